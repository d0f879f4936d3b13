"""`optimize` for functions with host callbacks or ordered effects (tokens).

`jax.debug.print`, `jax.debug.callback`, `jax.pure_callback`, `jax.experimental.io_callback` and
`eqx.error_if` lower to custom calls of Python functions that exist only in this process (the
module refers to them by index into the list jax compiles it with), so such a program can
neither run in the worker nor be carried by `jax.export`. Here:

1. The search runs on the program with its callbacks cut out (`shlo_env.ir.effects.cut`): every
   top-level op holding a callback or a token is taken out, what it reads becomes an output
   (verified like any output: each callback receives what it received before, within the
   rewrite's tier), what it makes becomes an input. It runs in the worker like any program;
   no callback of the user fires during the search.
2. The winner is stitched back (`Cut.stitch`): the cut ops unchanged, in their order.
3. The callable is jax's own compile of the user's function (`jax.jit(fn).lower(*args)`) with
   the stitched module swapped in (`_jax_compat.compile_swapped`): jax compiles it with the same
   Python callbacks, runtime tokens for ordered effects, and the same pytrees. No `jax.export`.
4. Before it is returned, it is checked in this process against the original, both compiled
   with *stand-in* callbacks that record what they receive and return seeded values: the same
   callbacks must be called the same number of times in the same order, with the same values
   (within the tier), and the outputs must agree; the two are then timed side by side (with the
   stand-ins, so the user's callbacks do not fire while we time).

The returned callable runs the compiled module for the optimized signature (the user's callbacks
fire once per call, as under `jax.jit`), and `jax.jit(fn)` for any other signature and under
`jax.vmap`/`jax.grad`/an outer `jax.jit` (a compiled executable cannot be traced into).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from shlo_env import _jax_compat
from shlo_env.execute import runtime
from shlo_env.execute import xla_options as option_actions
from shlo_env.ir import effects
from shlo_env.ir.program import ProgramError
from shlo_env.measure.noise_thresholds import accepts
from shlo_env.measure.numerics import Numerics
from shlo_env.measure.verify import escalate

CHECK_SEED = 20_261_129  # the seeded random input set of the in-process check


def needs_effects_path(program_or_text) -> bool:
    """Does `optimize` need this path: host callbacks anywhere, or tokens in main's signature?"""
    text = program_or_text if isinstance(program_or_text, str) else None
    if text is None:
        return False
    return effects.has_host_callbacks(text) or "!stablehlo.token" in text


class _Recorder:
    """Stand-ins for a lowering's host callbacks: each records (index, operands) and returns
    seeded values of its result types (a token passes through)."""

    def __init__(self, module, count: int):
        self.calls: list[tuple[int, list[np.ndarray]]] = []
        kinds: dict[int, tuple[bool, list]] = {}
        for op in effects.callback_ops(module):
            i = effects.callback_index(op)
            if i is None:
                continue
            types = [r.type for r in op.results]
            token = any("token" in str(t) for t in types)
            from shlo_env.ir.tensor_types import dtype_of, shape_of

            outs = [(shape_of(t), dtype_of(t)) for t in types if "token" not in str(t)]
            kinds[i] = (token, outs)
        self.stubs = [self._stub(i, *kinds.get(i, (False, []))) for i in range(count)]

    def _stub(self, index: int, token: bool, outs: list):
        def stub(*args):
            values = [np.array(a, copy=True) for a in args if a is not None]
            n = sum(1 for i, _ in self.calls if i == index)
            self.calls.append((index, values))
            rng = np.random.default_rng([index, n, CHECK_SEED])
            made = []
            for shape, dtype in outs:
                if np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.complexfloating):
                    made.append(rng.standard_normal(shape).astype(dtype))
                else:
                    made.append(np.zeros(shape, dtype))
            return tuple(([args[0]] if token else []) + made)
        return stub


def dispatching(fn: Callable, compiled, in_tree, specs, fallback: Callable) -> Callable:
    """The user's callable: `compiled` (jax's `Compiled`, the stitched module) for concrete
    arguments of the optimized signature, `fallback` (`jax.jit(fn)`) for any other and for
    tracers (vmap, grad, an outer jit trace `fn` itself)."""
    try:
        signature: inspect.Signature | None = inspect.signature(fn)
    except (TypeError, ValueError):
        signature = None

    def call(*args, **kwargs):
        positional = args
        if kwargs:
            try:
                bound = signature.bind(*args, **kwargs) if signature is not None else None
            except TypeError:
                bound = None
            positional = None if bound is None or bound.kwargs else bound.args
        if positional is not None:
            leaves, tree = jax.tree_util.tree_flatten((positional, {}))
            if (tree == in_tree and len(leaves) == len(specs)
                    and not any(isinstance(x, jax.core.Tracer) for x in leaves)
                    and all(tuple(np.shape(x)) == s[0] for x, s in zip(leaves, specs))):
                try:
                    return compiled(*positional)
                except (TypeError, ValueError):
                    # jax checks the arguments' types before running anything (a dtype or a
                    # weak type the executable was not compiled for): jax.jit(fn) takes them
                    pass
        return fallback(*args, **kwargs)

    call.__name__ = call.__qualname__ = getattr(fn, "__name__", "fn")
    return call


def optimize_effects(fn: Callable, args: Sequence, jitted: Callable, name: str, t0: float, options,
                     progress: bool, *, OptimizedFunction, Report, callable_samples):
    """`optimize` for a function whose program holds host callbacks or tokens (module doc).
    `shlo_env.api.optimize` passes its callable and report classes and its timing of callables."""
    from shlo_env.api.search_program import search_program
    from shlo_env.search import passes as pass_actions

    lowered, module = effects.lower_inlined(fn, *args, name=name)
    leaves = jax.tree_util.tree_leaves(args)
    concrete = not any(isinstance(x, jax.ShapeDtypeStruct) for x in leaves)
    report = Report(name=name, strategy=str(options.strategy))

    def keep_original(reason: str) -> OptimizedFunction:
        report.returned_original, report.reason, report.ratio = True, reason, 1.0
        report.applied, report.actions, report.numerics = (), (), "EXACT"
        report.total_s = time.perf_counter() - t0
        return OptimizedFunction(fn, jitted, report, None, None)

    try:
        c = effects.cut(module, name=name)
    except (effects.CutError, ProgramError) as e:
        return keep_original(f"not searched: {effects.describe_callbacks(module)}: {e}")
    if c is None:  # tokens nowhere after all: nothing to cut (should not happen here)
        return keep_original("not searched: no host callback or token to search around")
    program = c.program
    if concrete:
        extra = runtime.random_inputs(c.extra_input_specs(), CHECK_SEED)
        specs_in = program.in_specs[:len(leaves)]  # the user's leaves, cast as `lower` casts them (a Python float)
        program.example_args = tuple(np.asarray(x, dtype=s.dtype).reshape(s.shape)
                                     for x, s in zip(leaves, specs_in)) + tuple(extra)
    # the one front end (logs, dumps, the progress line); not cached: a hit would need the
    # callbacks of this process stitched back, and the cut program's extra inputs are random
    res, _ = search_program(program, options, warm_worker=True, progress=progress)
    report = Report.from_result(
        res, baseline_s=res.baseline.get("full", float("nan")),
        pass_actions=pass_actions.resolve(options.passes) + option_actions.resolve(options.xla_options,
                                                                                  ops=program.num_ops()))
    note = f"{effects.describe_callbacks(module)}; {c.describe()}"
    if res.status != "ok":
        return keep_original(f"{res.error} ({note})")
    if res.returned_original:
        return keep_original(f"{res.reason} ({note})")
    best: Any = res.evaluation  # the search's Measurement of the winner
    try:
        stitched = c.stitch(best.program)
        stitched_bytes = _bytecode(stitched)
        options_dict = option_actions.compiler_options(best.passes) if best.passes else None
        compiled = _jax_compat.compile_swapped(lowered, stitched_bytes, options_dict)
    except Exception as e:  # noqa: BLE001 - any failure here means: keep jax.jit
        return keep_original(f"could not build the optimized callable with its callbacks: {type(e).__name__}: {e}")
    count = len(_jax_compat.lowered_host_callbacks(lowered))
    avals = jax.tree_util.tree_leaves(lowered.in_avals)
    specs = [(tuple(a.shape), np.dtype(a.dtype)) for a in avals]
    in_tree = jax.tree_util.tree_structure((tuple(args), {}))
    user = dispatching(fn, compiled, in_tree, specs, jitted)
    # the in-process check, with stand-in callbacks on both sides
    rec_o, rec_n = _Recorder(module, count), _Recorder(stitched, count)
    try:
        original_exe = _jax_compat.compile_swapped(lowered, _bytecode(module), None, rec_o.stubs)
        new_exe = _jax_compat.compile_swapped(lowered, stitched_bytes, options_dict, rec_n.stubs)
    except Exception as e:  # noqa: BLE001
        return keep_original(f"could not compile the check with stand-in callbacks: {type(e).__name__}: {e}")
    random_leaves = runtime.random_inputs([jax.ShapeDtypeStruct(s, d) for s, d in specs], CHECK_SEED)
    random_args = list(jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(tuple(args)), random_leaves))
    # the user's arguments (when they are arrays, not shapes: a search under an outer trace has
    # only shapes) and one seeded random set
    sets = ([list(args)] if concrete else []) + [random_args]
    got: list[tuple[list, list]] = []
    want: list[tuple[list, list]] = []
    for call_args in sets:
        for exe, rec, into in ((original_exe, rec_o, want), (new_exe, rec_n, got)):
            rec.calls.clear()
            out = [np.asarray(o) for o in jax.tree_util.tree_leaves(exe(*call_args))]
            jax.effects_barrier()
            into.append((out, list(rec.calls)))
    for (g_out, g_calls), (w_out, w_calls) in zip(got, want):
        if [i for i, _ in g_calls] != [i for i, _ in w_calls]:
            return keep_original(f"in-process check: the callbacks were called as {[i for i, _ in g_calls]}, "
                                 f"not {[i for i, _ in w_calls]} ({note})")
    flat = lambda runs: [out + [v for _, vals in calls for v in vals] for out, calls in runs]  # noqa: E731
    cmp = escalate(flat(got), flat(want), best.numerics, lambda: None, lambda: None, reference_free_first=True)
    if not cmp.ok:
        return keep_original(f"in-process check against the original (outputs and what each callback "
                             f"receives) failed: {cmp.detail} ({note})")
    tier = max(cmp.tier, best.verified)
    timing = res.timing if getattr(res, "timing", None) is not None else options.timing  # the worker's rounds
    stub_user = dispatching(fn, new_exe, in_tree, specs, jitted)
    s_jit, s_opt = callable_samples([original_exe, stub_user], sets[0], timing)
    t_jit, t_opt = runtime.typical(s_jit), runtime.typical(s_opt)
    ratio, median = t_opt / t_jit, runtime.median_ratio(s_jit, s_opt)
    report.baseline_s, report.optimized_s, report.ratio, report.median_ratio = t_jit, t_opt, ratio, median
    if not accepts(ratio, median, res.threshold):
        return keep_original(f"in-process ratio {ratio:.3f} (median per call {median:.3f}) vs jax.jit is within "
                             f"noise (worker measured {best.ratio:.3f}) ({note})")
    report.returned_original = False
    report.applied = best.program.applied
    report.action_tokens = best.passes
    report.numerics = Numerics(tier).name if not isinstance(tier, Numerics) else tier.name
    report.optimized_hash = best.key
    report.verification = (f"{report.numerics} tier on example args + random sets in a worker (callbacks cut out: "
                           f"what each receives compared as an output), then in-process against the original with "
                           f"stand-in callbacks (same calls, same order, same values); {note}")
    report.reason = ""
    report.total_s = time.perf_counter() - t0
    opt = OptimizedFunction(fn, user, report, best.program, None, fallback=jitted, dispatch=user)
    opt.stitched = stitched
    return opt


def _bytecode(module) -> bytes:
    import io

    buf = io.BytesIO()
    module.operation.write_bytecode(buf)
    return buf.getvalue()


__all__ = ["dispatching", "needs_effects_path", "optimize_effects"]
