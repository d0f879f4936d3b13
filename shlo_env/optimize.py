"""`optimize(fn, *args)`: a drop-in for `jax.jit(fn)` that is never wrong and never slower.

lower -> search (strategies in `shlo_env.search`, every candidate verified then timed in a
worker process) -> confirm the winner with a second measurement -> build a callable and check
it once more in this process against `jax.jit(fn)`, on outputs and on time. If anything is not
better beyond the measured noise, the callable is `jax.jit(fn)` itself.

With `passes=True` the search may also disable XLA passes (macro actions, see
`shlo_env.search.passes`). A winner with disabled passes is built as
`jax.jit(exported.call, compiler_options={"xla_disable_hlo_passes": ...})`, so the callable
compiles with the same passes off; the in-process check times exactly that callable. (Called
inside another jitted function, the callable is inlined into the caller's program and compiled
with the caller's options: the rewrites stay, the disabled passes do not.)
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

import jax
import numpy as np

from shlo_env import runtime
from shlo_env import xla_options as option_actions
from shlo_env.import_ import Program, lower
from shlo_env.numerics import verify
from shlo_env.search import passes as pass_actions
from shlo_env.search.runner import optimize_program


@dataclasses.dataclass
class Report:
    """What `optimize` did. Times are seconds (T: 10th percentile of the runs, see runtime); ratio = optimized / jax.jit
    of those, median_ratio = the median of the per-call ratios; a rewrite is kept only when both clear the threshold."""

    name: str
    strategy: str
    baseline_s: float = float("nan")
    optimized_s: float = float("nan")
    ratio: float = 1.0
    median_ratio: float = float("nan")  # median per-call ratio of the same interleaved runs
    applied: tuple[str, ...] = ()
    numerics: str = "EXACT"
    verification: str = ""
    returned_original: bool = True
    reason: str = ""
    candidates_evaluated: int = 0
    cache_hits: int = 0
    failures: dict = dataclasses.field(default_factory=dict)
    noise: float = float("nan")
    threshold: float = float("nan")
    search_s: float = 0.0
    total_s: float = 0.0
    original_hash: str = ""
    optimized_hash: str = ""
    disabled_passes: tuple[str, ...] = ()  # XLA passes the returned callable compiles without
    pass_actions: tuple[str, ...] = ()  # passes the search was allowed to disable
    decision_space: int = 1  # decision vectors at the root (pass toggles included)
    strategy_info: dict = dataclasses.field(default_factory=dict)

    @property
    def hit_rate(self) -> float:
        total = self.candidates_evaluated + self.cache_hits
        return self.cache_hits / total if total else 0.0

    @property
    def speedup(self) -> float:
        return 1.0 / self.ratio if self.ratio > 0 else float("inf")

    def __str__(self) -> str:
        lines = [f"optimize({self.name}) with {self.strategy}: "
                 + ("returned jax.jit(fn) unchanged" if self.returned_original
                    else f"{self.speedup:.2f}x faster than jax.jit")]
        if not np.isnan(self.baseline_s) and np.isnan(self.optimized_s):
            lines.append(f"  jax.jit {self.baseline_s * 1e3:.3f} ms (noise {self.noise:.3f}, accept below "
                         f"{self.threshold:.3f})")
        elif not np.isnan(self.baseline_s):
            median = "" if np.isnan(self.median_ratio) else f", median per call {self.median_ratio:.3f}"
            lines.append(f"  jax.jit {self.baseline_s * 1e3:.3f} ms, optimized {self.optimized_s * 1e3:.3f} ms "
                         f"(ratio {self.ratio:.3f}{median}; noise {self.noise:.3f}, accept below {self.threshold:.3f}"
                         " on both)")
        if self.applied:
            lines.append(f"  rewrites: {', '.join(self.applied)} ({self.numerics})")
        if self.disabled_passes:
            lines.append(f"  XLA actions (passes disabled, options set): {', '.join(self.disabled_passes)}")
        if self.verification:
            lines.append(f"  verified: {self.verification}")
        if self.reason:
            lines.append(f"  why: {self.reason}")
        fails = ", ".join(f"{k} {v}" for k, v in sorted(self.failures.items()))
        lines.append(f"  search: {self.candidates_evaluated} candidates, {self.cache_hits} cache hits "
                     f"({self.hit_rate:.0%})" + (f", rejected: {fails}" if fails else "")
                     + f", {self.search_s:.1f} s of {self.total_s:.1f} s")
        return "\n".join(lines)


class OptimizedFunction:
    """Callable like `jax.jit(fn)`: same arguments, same output pytree. `.report` says what happened."""

    def __init__(self, fn: Callable, call: Callable, report: Report, program: Program | None,
                 original: Program | None):
        self.__wrapped__ = fn
        self._call = call
        self.report = report
        self.program = program  # the chosen program (None when jax.jit(fn) is returned)
        self.original = original
        self.__name__ = getattr(fn, "__name__", "fn")
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(self, *args):
        return self._call(*args)

    def __repr__(self) -> str:
        return f"<OptimizedFunction {self.__name__}: {self.report.speedup:.2f}x vs jax.jit>"


def exported_callable(fn: Callable, args: Sequence, program: Program,
                      disabled_passes: Sequence[str] = ()) -> Callable:
    """`jax.jit` of a `jax.export.Exported` whose module is `program`: jax's fast dispatch path,
    argument checking, and composition inside other jitted functions. With `disabled_passes`,
    XLA compiles it with those passes off (`xla_disable_hlo_passes`)."""
    from jax import export

    exp = export.export(jax.jit(fn))(*args)
    exp = dataclasses.replace(
        exp, mlir_module_serialized=program.portable(),
        module_kept_var_idx=tuple(range(len(program.in_specs))))
    if disabled_passes:  # disabled pass names and `name=value` XLA option actions
        return jax.jit(exp.call, compiler_options=option_actions.compiler_options(disabled_passes))
    return jax.jit(exp.call)


def callable_samples(fns: Sequence[Callable], args: Sequence, runs: int = 10, warmup: int = 3,
                     min_seconds: float = 0.2) -> list[list[float]]:
    """Wall times of each callable's runs (outputs awaited), interleaved (A, B, A, B, ...), as
    `runtime.compare` times executables."""
    def once(f):
        def run():
            t = time.perf_counter()
            jax.block_until_ready(f(*args))
            elapsed = time.perf_counter() - t
            return elapsed, elapsed
        return run

    samples = runtime.interleave([once(f) for f in fns], runs, warmup, min_seconds)
    return [[full for full, _ in s] for s in samples]


def time_callables(fns: Sequence[Callable], args: Sequence, runs: int = 10, warmup: int = 3,
                   min_seconds: float = 0.2) -> list[float]:
    """T of each callable (10th percentile of its interleaved wall times)."""
    return [runtime.typical(s) for s in callable_samples(fns, args, runs, warmup, min_seconds)]


def optimize(fn: Callable, *args, patterns=None, strategy: str = "auto", budget_s: float = 120.0,
             max_steps: int = 6, num_random: int = 3, seed: int = 0, min_gain: float = 0.03,
             progress: bool | None = None, timeout_s: float | None = None,
             name: str | None = None, passes: bool | Sequence[str] = False,
             xla_options: bool | str | Sequence[str] = False,
             strategy_options: dict | None = None) -> OptimizedFunction:
    """Search rewrites of `fn` lowered on `args`; return a callable at least as fast as jax.jit(fn).

    Args:
      patterns: Pattern classes/instances/names (default: every value-preserving pattern).
      strategy: a name from `shlo_env.search.strategies()`, or "auto" (by decision-space size:
        exhaustive when small, beam search, factorized MCTS when large).
      budget_s: wall-clock budget for the whole call (search, confirmation, final check); the
        search gets about three quarters of it and a compile or run still going near the end
        is abandoned.
      num_random: seeded random input sets used to verify candidates, besides `args`.
      min_gain: the smallest speedup worth taking (raised to twice the measured noise).
      progress: show a live line (best ratio, candidates evaluated, cache hits) on stderr.
      timeout_s: per compile/run limit in the worker (a hang costs one candidate).
      passes: also let the search disable XLA passes: True for the platform's candidates
        (`shlo_env.search.passes.candidate_passes()`), or a list of pass names.
      xla_options: also let the search set XLA compile options: True for the platform's
        value-preserving ones (`shlo_env.xla_options`), "approx" to add fast math (APPROX tier,
        looser verification), or a list of `name=value` tokens. The returned callable compiles
        with the chosen options (`Report.disabled_passes` lists them beside disabled passes).
      strategy_options: keyword options for the strategy (e.g. {"alpha": 1.0} for beam).
    """
    t0 = time.perf_counter()
    name = name or getattr(fn, "__name__", "fn")
    jitted = jax.jit(fn)
    program = lower(fn, *args, name=name)
    report = Report(name=name, strategy=str(strategy))
    progress = progress if progress is not None else False
    offered = pass_actions.resolve(passes) + option_actions.resolve(xla_options)
    report.pass_actions = offered

    def keep_original(reason: str) -> OptimizedFunction:
        report.returned_original = True
        report.reason = reason
        report.ratio = 1.0
        report.disabled_passes = ()
        report.total_s = time.perf_counter() - t0
        return OptimizedFunction(fn, jitted, report, None, program)

    # The search, confirmation and verification are the program-level search; the rest of the
    # budget (about 15%) builds the callable and checks it in this process.
    res = optimize_program(program, patterns=patterns, strategy=strategy, budget_s=budget_s,
                           max_steps=max_steps, num_random=num_random, seed=seed, min_gain=min_gain,
                           progress=progress, timeout_s=timeout_s, passes=passes, xla_options=xla_options,
                           strategy_options=strategy_options, final_timing=False, cost=False, name=name)
    report.original_hash = res.original_hash
    report.strategy, report.noise, report.threshold = res.strategy, res.noise, res.threshold
    report.decision_space, report.strategy_info, report.search_s = res.decision_space, res.strategy_info, res.search_s
    report.candidates_evaluated, report.cache_hits = res.candidates_evaluated, res.cache_hits
    report.failures = dict(res.failures)
    report.baseline_s = res.baseline.get("full", float("nan"))
    if res.status != "ok":
        return keep_original(res.error)
    if res.returned_original:
        return keep_original(res.reason)
    return _finish(fn, args, jitted, program, res.evaluation, report, res.check_inputs, res.check_reference,
                   res.threshold, keep_original, t0)


def _finish(fn, args, jitted, program, best, report, flat_inputs, reference_out, threshold,
            keep_original, t0) -> OptimizedFunction:
    """Build the optimized callable and check it in this process against jax.jit(fn)."""
    chosen = best.program
    try:
        call = exported_callable(fn, args, chosen, best.passes)
        call_args = jax.tree_util.tree_unflatten(program.in_tree, runtime.to_device(flat_inputs))[0]
        got = jax.tree_util.tree_leaves(call(*call_args))
        want = jax.tree_util.tree_leaves(jitted(*call_args))
    except Exception as e:  # noqa: BLE001 - any failure here means: keep jax.jit
        return keep_original(f"could not build the optimized callable: {type(e).__name__}: {e}")
    ref, sens = reference_out if reference_out is not None else (None, None)
    cmp = verify([[np.asarray(g) for g in got]], [[np.asarray(w) for w in want]], best.numerics,
                 None if ref is None else [ref], None if sens is None else [sens])
    if not cmp.ok:
        return keep_original(f"final in-process check against jax.jit failed: {cmp.detail}")
    tier = max(cmp.tier, best.verified)
    s_jit, s_opt = callable_samples([jitted, call], call_args)
    t_jit, t_opt = runtime.typical(s_jit), runtime.typical(s_opt)
    ratio, median = t_opt / t_jit, runtime.median_ratio(s_jit, s_opt)
    report.baseline_s, report.optimized_s, report.ratio, report.median_ratio = t_jit, t_opt, ratio, median
    if ratio >= threshold or median >= threshold:
        return keep_original(f"in-process ratio {ratio:.3f} (median per call {median:.3f}) vs jax.jit is "
                             f"within noise (worker measured {best.ratio:.3f}, median {best.median_ratio:.3f})")
    report.returned_original = False
    report.applied = chosen.applied
    report.disabled_passes = best.passes
    report.numerics = tier.name
    report.optimized_hash = best.key
    c = best.comparison
    sets = "example args + random sets" if program.example_args is not None else "random sets"
    report.verification = (f"{tier.name} tier on {sets} in a worker, then against jax.jit in-process"
                           + (f"; {c.describe()}" if c is not None and c.describe() else ""))
    report.total_s = time.perf_counter() - t0
    return OptimizedFunction(fn, call, report, chosen, program)
