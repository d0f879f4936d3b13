"""Equivalence testing for rewrites: for our own patterns and for yours.

    from shlo_env.testing import check_pattern
    check_pattern(MyPattern, programs_from(lambda x: x * 2.0, arrays((4, 8))))

`check_rewrites(program, patterns)` augments a program, applies each alternative (and random
decision vectors), and compares every result with the original within the tier of what was
applied. The oracle is the StableHLO reference interpreter where it supports every op (fast,
and independent of XLA), else XLA itself. REASSOCIATE results are judged against a float64
reference (the same program widened to f64).

Hypothesis strategies for random programs live in `shlo_env.testing.random_programs` and are
re-exported here.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence

import numpy as np
try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError as e:  # hypothesis is a test-time dependency, not a run-time one
    raise ImportError("shlo_env.testing needs hypothesis, which is not installed: "
                      "pip install 'shlo_env[test]' (or pip install hypothesis)") from e
from jaxlib.mlir import ir

from shlo_env import _jax_compat
from shlo_env.execute import runtime
from shlo_env.rewrite.driver import apply, augment, list_alternatives, walk_ops
from shlo_env.ir.program import Program, ir_scope, load, lower
from shlo_env.measure.numerics import SENSITIVITY_ULPS, Comparison, Numerics, compare_outputs
from shlo_env.patterns.base import Pattern, resolve
# Random programs from an op table, re-exported for users writing their own property tests.
from shlo_env.testing.random_programs import OP_TABLE, jax_programs, programs, recipes, sample  # noqa: F401
from shlo_env.ir.tensor_types import element_type

# Ops the reference interpreter is known to evaluate; anything else goes to XLA (the
# interpreter aborts the process on an op it does not support).
INTERPRETER_OPS = frozenset(
    "stablehlo." + n for n in """
    abs add and atan2 broadcast_in_dim cbrt ceil clamp compare concatenate constant convert cosine
    count_leading_zeros divide dot_general dynamic_slice dynamic_update_slice exponential
    exponential_minus_one floor gather iota is_finite log log_plus_one logistic maximum minimum
    multiply negate not or pad popcnt power reduce remainder reshape return reverse round_nearest_afz
    round_nearest_even rsqrt select shift_left shift_right_arithmetic shift_right_logical sign sine
    slice sqrt subtract tan tanh transpose while xor optimization_barrier case if real imag complex
    """.split()
) | {"func.return", "func.func"}

_INTERPRETER_DTYPES = {np.dtype(t) for t in (np.float32, np.float64, np.float16, np.int8, np.int16,
                                             np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                                             np.uint64, np.bool_)}


class MismatchError(AssertionError):
    """A rewrite changed what the program computes beyond its tier."""


def interpretable(program: Program) -> bool:
    if any(np.dtype(s.dtype) not in _INTERPRETER_DTYPES for s in program.in_specs + program.out_specs):
        return False
    return all(op.name in INTERPRETER_OPS for op in walk_ops(program.body))


def evaluate(program: Program, inputs: Sequence[np.ndarray], backend: str = "auto") -> list[np.ndarray]:
    """Outputs of `program`: `backend` is 'interpreter', 'xla', or 'auto' (interpreter if it can)."""
    if backend == "interpreter" or (backend == "auto" and interpretable(program)):
        with ir_scope():
            attrs = [_dense(x, spec) for x, spec in zip(inputs, program.in_specs)]
            outs = _jax_compat.eval_module(program.module, attrs)
        return [np.array(o).reshape(s.shape).astype(s.dtype) for o, s in zip(outs, program.out_specs)]
    return runtime.execute(runtime.compile(program), inputs)


def _dense(x, spec) -> ir.DenseElementsAttr:
    # Explicit type and shape: numpy's buffer protocol loses rank 0 and unsignedness.
    x = np.ascontiguousarray(np.asarray(x, dtype=spec.dtype)).reshape(tuple(spec.shape))
    return ir.DenseElementsAttr.get(x, type=element_type(x.dtype), shape=list(x.shape))


def reference(program: Program, inputs: Sequence[np.ndarray], backend: str = "auto",
              perturb_ulps: float = 0.0):
    """float64 outputs of the widened program (on inputs moved by `perturb_ulps`), or None when
    it cannot be widened."""
    try:
        wide = load(runtime.promote_to_f64(program.text()))
    except Exception:  # noqa: BLE001 - e.g. bitcast_convert between widths
        return None
    try:
        return evaluate(wide, runtime.widen_inputs(inputs, perturb_ulps), backend)
    except Exception:  # noqa: BLE001
        return None


@dataclasses.dataclass
class Mismatch:
    decisions: list[int]
    applied: tuple[str, ...]
    comparison: Comparison
    inputs: list[np.ndarray]
    program_text: str

    def __str__(self) -> str:
        return (f"{', '.join(self.applied)} changed the result ({self.comparison.detail}; "
                f"error {self.comparison.max_error:.3g}, bound {self.comparison.bound:.3g}) "
                f"with decisions {self.decisions}")


@dataclasses.dataclass
class CheckResult:
    num_alternatives: int = 0
    num_candidates: int = 0
    mismatches: list[Mismatch] = dataclasses.field(default_factory=list)
    matched: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.mismatches


def decision_vectors(alts, mode: str | int = "each", seed: int = 0) -> list[list[int]]:
    """'each': every single choice alone (one-hot); an int n: that plus n random full vectors."""
    vecs = []
    for i, a in enumerate(alts):
        for k in range(1, a.num_choices):
            v = [0] * len(alts)
            v[i] = k
            vecs.append(v)
    if isinstance(mode, int) and alts:
        rng = random.Random(seed)
        for _ in range(mode):
            vecs.append([rng.randrange(a.num_choices) for a in alts])
    return vecs


def check_rewrites(program: Program, patterns=None, *, decisions: str | int = "each",
                   input_sets: Sequence[Sequence[np.ndarray]] | None = None, num_random: int = 2,
                   seed: int = 0, backend: str = "auto", stop_at_first: bool = True) -> CheckResult:
    """Augment `program` with `patterns` and compare each applied candidate with the original."""
    result = CheckResult()
    augmented = augment(program, resolve(patterns))
    alts = list_alternatives(augmented)
    result.num_alternatives = len(alts)
    for a in alts:
        for label in a.labels[1:]:
            result.matched[label] = result.matched.get(label, 0) + 1
    if not alts:
        return result
    sets = list(input_sets) if input_sets is not None else runtime.input_sets(program, num_random, seed)
    specials = runtime.special_inputs(program.in_specs, seed)  # only EXACT must survive these
    original_is_interpretable = backend == "auto" and interpretable(program)
    memo: dict = {}

    def original_outputs(kind: str, i: int, b: str):  # computed once per (input set, backend)
        key = (kind, i, b)
        if key not in memo:
            s = sets[i] if kind != "special" else specials[i]
            if kind == "special" or kind == "plain":
                memo[key] = evaluate(program, s, b)
            else:
                memo[key] = reference(program, s, b, SENSITIVITY_ULPS if kind == "sensitivity" else 0.0)
        return memo[key]

    for vec in decision_vectors(alts, decisions, seed):
        if not any(vec):
            continue
        candidate = apply(augmented, vec)
        result.num_candidates += 1
        tier = Numerics(candidate.numerics)
        # The same oracle for both sides: the interpreter only if it runs both programs.
        b = backend if backend != "auto" else (
            "interpreter" if original_is_interpretable and interpretable(candidate) else "xla")
        checks = []
        for i, s in enumerate(sets):
            ref = sens = None
            if tier >= Numerics.REASSOCIATE:
                ref, sens = original_outputs("reference", i, b), original_outputs("sensitivity", i, b)
            checks.append((s, original_outputs("plain", i, b), ref, sens))
        if tier == Numerics.EXACT:
            checks += [(s, original_outputs("special", i, b), None, None) for i, s in enumerate(specials)]
        for s, original, ref, sens in checks:
            got = evaluate(candidate, s, b)
            cmp = compare_outputs(got, original, tier, ref, sens)
            if not cmp.ok:
                result.mismatches.append(Mismatch(vec, candidate.applied, cmp, list(s), candidate.text()))
                if stop_at_first:
                    return result
    return result


__all__ = [
    "CheckResult", "Mismatch", "MismatchError", "arrays", "check_pattern", "check_rewrites", "evaluate",
    "interpretable", "programs_from", "reference", "OP_TABLE", "jax_programs", "programs", "recipes", "sample",
]


# --- strategies for pattern authors --------------------------------------------------------

def arrays(shape: Sequence[int], dtype=np.float32) -> st.SearchStrategy:
    """A strategy of example arrays with a fixed shape: N(0,1) floats or small integers."""
    dtype = np.dtype(dtype)

    def make(seed: int) -> np.ndarray:
        spec = type("Spec", (), {"shape": tuple(shape), "dtype": dtype})
        return runtime.random_inputs([spec], seed)[0]

    return st.integers(0, 2**31 - 1).map(make)


def programs_from(fn: Callable, *arg_strategies: st.SearchStrategy) -> st.SearchStrategy:
    """Programs lowered from `fn` on arguments drawn from `arg_strategies`."""
    return st.tuples(*arg_strategies).map(lambda args: lower(fn, *args))


def check_pattern(pattern: type[Pattern] | Pattern, programs: st.SearchStrategy, *,  # noqa: F811
                  max_examples: int = 50, decisions: str | int = "each", backend: str = "auto",
                  require_match: bool = True, seed: int | None = 0) -> CheckResult:
    """Property-test one pattern: on every drawn program, every alternative it records must
    match the original within the pattern's tier. Raises `MismatchError` (with hypothesis's
    shrunk example) on a difference, and AssertionError if the pattern never fires."""
    p = pattern() if isinstance(pattern, type) else pattern
    total = CheckResult()

    @settings(max_examples=max_examples, deadline=None, database=None, derandomize=seed is not None,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(programs)
    def run(program):
        if not isinstance(program, Program):
            program = lower(*program) if isinstance(program, tuple) else program
        res = check_rewrites(program, [p], decisions=decisions, backend=backend)
        total.num_alternatives += res.num_alternatives
        total.num_candidates += res.num_candidates
        if res.mismatches:
            total.mismatches.extend(res.mismatches)
            m = res.mismatches[0]
            raise MismatchError(f"pattern {p.name!r}: {m}\ninputs: {m.inputs}\nprogram:\n{program.text()}")

    run()
    if require_match and total.num_alternatives == 0:
        raise AssertionError(f"pattern {p.name!r} never fired on {max_examples} drawn programs")
    return total

