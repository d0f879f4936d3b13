"""XLA's own passes as macro actions: which ones a search may disable, per platform.

The HloEnv paper's pass analysis (its Table 1) turned single XLA passes off and measured what
that did. Here a search can do the same as part of its action space: a state is a program plus
a set of disabled passes (`xla_disable_hlo_passes`), and the evaluator caches by (DAG hash,
disabled passes). Only optimization passes are offered: passes that lower, legalize, assign
layouts or insert copies are needed for a correct executable and are never candidates
(turning copy-insertion off, for instance, lets an output alias an input buffer).

Names are XLA's `HloPassInterface::name()`; they were read off the CPU pipeline of
jaxlib 0.10 (`TF_CPP_VMODULE=hlo_pass_pipeline=2`). A pass name that the pipeline at hand does
not run is harmless: disabling it changes nothing, and the evaluator's cache then finds the
unchanged executable's timing equal to the original's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from shlo_env.execute import xla_options

# (name, what it does): optimization passes of XLA's CPU pipeline.
CPU_PASSES: tuple[tuple[str, str], ...] = (
    ("algsimp", "algebraic simplifier"),
    ("cse", "common subexpression elimination"),
    ("dce", "dead code elimination"),
    ("constant_folding", "evaluate constant subgraphs at compile time"),
    ("reshape-mover", "move reshapes/transposes past elementwise ops"),
    ("transpose-folding", "fold transposes into dot/convolution dimension numbers"),
    ("tree_reduction_rewriter", "split large reductions into a tree"),
    ("while-loop-invariant-code-motion", "hoist loop-invariant work out of while loops"),
    ("while-loop-constant-sinking", "sink loop-invariant constants into while bodies"),
    ("simplify-while-loops", "remove/trim trivial while loops and dead loop state"),
    ("small-while-loop-hoisting", "run small while loops outside the thunk runtime"),
    ("tuple-simplifier", "forward tuple elements through get-tuple-element"),
    ("simplify-conditional", "inline conditionals with a constant predicate"),
    ("conditional-to-select", "turn small conditionals into selects"),
    ("batch-dot-simplification", "drop degenerate batch dimensions of dots"),
    ("gemv-rewriter", "rewrite matrix-vector products for the vector kernel"),
    ("dot-library-rewriter", "hand dots to a library kernel (oneDNN/XNNPACK) where it can"),
    ("fusion", "CPU instruction fusion (loop and input fusion)"),
    ("cpu-parallel-task-assigner", "split ops into parallel tasks across cores"),
    ("call-inliner", "inline called computations"),
    ("zero_sized_hlo_elimination", "replace zero-element ops by constants"),
    ("simplify-sorts", "remove unused sort operands"),
)

# The GPU pipeline's counterparts (names from XLA's GPU compiler; offered on CUDA/ROCm).
GPU_PASSES: tuple[tuple[str, str], ...] = (
    ("algsimp", "algebraic simplifier"),
    ("cse", "common subexpression elimination"),
    ("dce", "dead code elimination"),
    ("constant_folding", "evaluate constant subgraphs at compile time"),
    ("reshape-mover", "move reshapes/transposes past elementwise ops"),
    ("transpose-folding", "fold transposes into dot dimension numbers"),
    ("tree_reduction_rewriter", "split large reductions into a tree"),
    ("while-loop-invariant-code-motion", "hoist loop-invariant work out of while loops"),
    ("while-loop-constant-sinking", "sink loop-invariant constants into while bodies"),
    ("simplify-while-loops", "remove/trim trivial while loops"),
    ("tuple-simplifier", "forward tuple elements"),
    ("simplify-conditional", "inline conditionals with a constant predicate"),
    ("dot_merger", "merge dots that share an operand"),
    ("dot-dimension-sorter", "sort dot dimensions for the library call"),
    ("priority-fusion", "the main GPU fusion pass"),
    ("multi_output_fusion", "fuse siblings/producers into multi-output fusions"),
    ("horizontal-loop-fusion", "fuse independent small loop fusions"),
    ("horizontal-input-fusion", "fuse independent reductions"),
    ("variadic-op-splitter", "split wide concatenates"),
    ("reduction-splitter", "split reductions over several dimensions"),
    ("gemm-broadcast-folding-rewriter", "fold broadcasts into gemm batch dims"),
    ("all-reduce-combiner", "combine small all-reduces"),
)


def candidate_passes(platform: str | None = None) -> tuple[str, ...]:
    """The pass names a search may disable on `platform` (default: jax's default backend)."""
    if platform is None:
        from shlo_env.execute import runtime

        platform = runtime.platform()
    table = CPU_PASSES if platform == "cpu" else GPU_PASSES
    return tuple(name for name, _ in table)


def describe(action: str | xla_options.Action) -> str:
    if xla_options.is_option(action):
        return xla_options.describe(action)
    name = xla_options.parse(action).name
    for table in (CPU_PASSES, GPU_PASSES):
        for n, what in table:
            if n == name:
                return what
    return ""


def normalize(passes: Iterable[str | xla_options.Action] | str | None) -> tuple[str, ...]:
    """A canonical form of a set of XLA actions, as tokens (`xla_options.normalize`: sorted,
    unique, no empty names, one value per option)."""
    return xla_options.tokens(xla_options.normalize(passes))


def resolve(passes: bool | str | Sequence[str] | None, platform: str | None = None) -> tuple[str, ...]:
    """The pass actions an option asks for: False/None -> none, True/"auto" -> the platform's
    candidates, a sequence -> those names."""
    if passes is None or passes is False:
        return ()
    if passes is True or passes == "auto":
        return candidate_passes(platform)
    return normalize(passes)


def state_key(dag_hash: str, passes: Sequence[str | xla_options.Action] = ()) -> str:
    """The evaluation-cache key of (program, disabled passes): the DAG hash alone when none."""
    passes = normalize(passes)
    return dag_hash if not passes else f"{dag_hash}|-{','.join(passes)}"
