"""`optimize(fn, *args)`: a drop-in for `jax.jit(fn)` that is never wrong and never slower.

lower -> the program search every front end shares (`shlo_env.api.search_program`: the cache,
else strategies in `shlo_env.search`, every candidate verified then timed in a worker process,
the winner confirmed with a second measurement) -> build a callable and check it once more in
this process against `jax.jit(fn)`, on outputs and on time (`_Delivery`). If anything is not
better beyond the measured noise, the callable is `jax.jit(fn)` itself.

With `passes=True` the search may also disable XLA passes (macro actions, see
`shlo_env.search.passes`). A winner with disabled passes is built as
`jax.jit(exported.call, compiler_options={"xla_disable_hlo_passes": ...})`, so the callable
compiles with the same passes off; the in-process check times exactly that callable. (Called
inside another jitted function, the callable is inlined into the caller's program and compiled
with the caller's options: the rewrites stay, the disabled passes do not.)
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from shlo_env import logs
from shlo_env.api import cache as search_cache
from shlo_env.api import search_program as front_end
from shlo_env.api.effects import optimize_effects
from shlo_env.execute import runtime
from shlo_env.execute import xla_options as option_actions
from shlo_env.ir.effects import has_host_callbacks
from shlo_env.ir.program import Program, ProgramError, lower
from shlo_env.measure.noise_thresholds import accepts
from shlo_env.measure.timing_policy import SEARCH, TimingPolicy
from shlo_env.measure.verify import escalate
from shlo_env.search import passes as pass_actions
from shlo_env.search.acceptance import return_original
from shlo_env.search.options import SearchOptions, options_from, preset
from shlo_env.search.result import ProgramResult, SearchSummary, counted

verify_log = logs.get("verify")


@dataclasses.dataclass
class Report(SearchSummary):
    """What `optimize` did: the search's summary (`SearchSummary`, shared with the program-level
    `ProgramResult`) and the in-process check. Times are seconds (T: 10th percentile of the
    runs, see runtime); ratio = optimized / jax.jit of those, median_ratio = the median of the
    per-call ratios; a rewrite is kept only when both clear the threshold."""

    baseline_s: float = float("nan")
    optimized_s: float = float("nan")
    ratio: float = 1.0
    median_ratio: float = float("nan")  # median per-call ratio of the same interleaved runs
    verification: str = ""
    optimized_hash: str = ""
    pass_actions: tuple[str, ...] = ()  # passes the search was allowed to disable
    decisions: list = dataclasses.field(default_factory=list)  # decision vectors from the original to the result
    cache: str = ""  # "hit" (taken from the persistent cache), "stored" (searched, then stored), "" (off),
    # "revalidated" (an entry of other jax/jaxlib versions, verified and timed again here)

    @classmethod
    def from_result(cls, res: SearchSummary, **fields) -> "Report":
        """The report of a program-level search: its `SearchSummary` fields (containers
        copied), plus `fields`."""
        shared = {f.name: copy.copy(getattr(res, f.name)) for f in dataclasses.fields(SearchSummary)}
        return cls(**{**shared, **fields})

    def explain(self) -> str:
        """Per rewrite: the lines of your source it replaced, the XLA actions, a diff of the
        StableHLO; or, when jax.jit was kept, why, measured (`shlo_env.api.explain`)."""
        from shlo_env.api.explain import explain

        original, optimized = self.__dict__.get("_programs", (None, None))
        return explain(self, original, optimized)

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
        if self.acceptance:
            lines.append(f"  {self.describe_acceptance()}")
        if self.applied:
            lines.append(f"  rewrites: {', '.join(counted(self.applied))} ({self.numerics})")
        if self.actions:
            lines.append(f"  XLA actions (passes disabled, options set): {', '.join(self.action_tokens)}")
        if self.verification:
            lines.append(f"  verified: {self.verification}")
        if self.reason:
            lines.append(f"  why: {self.reason}")
        if self.cache == "hit":
            lines.append("  persistent cache: hit (searched in an earlier run, checked against jax.jit "
                         "on a seeded random input set)")
        elif self.cache == "revalidated":
            lines.append("  persistent cache: searched under other jax/jaxlib versions, verified and timed "
                         "again here (no new search)")
        fails = ", ".join(f"{k} {v}" for k, v in sorted(self.failures.items()))
        untimed = ", ".join(f"{k} {v}" for k, v in sorted(self.untimed.items()))
        lines.append(f"  search: {self.candidates_evaluated} candidates, {self.cache_hits} cache hits "
                     f"({self.hit_rate:.0%})" + (f", rejected: {fails}" if fails else "")
                     + (f", verified but not timed: {untimed}" if untimed else "")
                     + f", {self.search_s:.1f} s of {self.total_s:.1f} s")
        if self.cuts:
            lines.append(f"  cut short by the budget: {'; '.join(self.cuts)}")
        if self.phases:
            lines.append("  where the budget went (seconds spent, of those given):")
            lines.append(self.describe_phases())
        return "\n".join(lines)


class OptimizedFunction:
    """Callable like `jax.jit(fn)`: same arguments, same output pytree. `.report` says what happened.

    Keyword arguments bind to `fn`'s positional parameters. Arguments of another signature
    (shapes, dtypes, structure) than the ones optimized for run `fn` as `jax.jit(fn)` does;
    `shlo_env.jit` searches per signature instead.

    A call is one `jax.jit` call (see `dispatching`): each instance's `__call__` is that
    `jax.jit` itself (`own_class`), so jax's C++ dispatch finds the executable of a signature
    it has seen with no Python in between, at what `jax.jit(fn)` costs per call. Only a rewrite
    compiled with XLA actions (`report.actions`) is called through a Python check of
    the signature, since one `jax.jit` compiles every signature with one set of compiler
    options."""

    def __new__(cls, *args, **kwargs):
        return super().__new__(own_class(cls))

    def __init__(self, fn: Callable, call: Callable, report: Report, program: Program | None,
                 original: Program | None, fallback: Callable | None = None, dispatch: Callable | None = None):
        self.__wrapped__ = fn
        self._call = call  # the optimized module's callable (jax.jit(fn) when it was kept)
        self._fallback = fallback if fallback is not None else call  # jax.jit(fn)
        self.report = report
        report.__dict__["_programs"] = (original, program)  # for report.explain() (not a field: not stored)
        self.program = program  # the chosen program (None when jax.jit(fn) is returned)
        self.original = original
        if dispatch is None:
            dispatch = call if self._call is self._fallback or original is None else dispatching(
                fn, call, original, report.action_tokens, self._fallback)
        self._dispatch = dispatch
        type(self).__call__ = staticmethod(dispatch)  # type: ignore[method-assign]
        self.__name__ = getattr(fn, "__name__", "fn")
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(self, *args, **kwargs):  # replaced per instance by `dispatch` itself (see __init__)
        return self._dispatch(*args, **kwargs)

    stitched = None  # the delivered module (an ir.Module) when the program has host callbacks

    @property
    def keyed_effects(self) -> bool:
        """Host callbacks: the callable is jax's compiled executable behind a Python check of the
        signature (`shlo_env.api.effects`), which an outer `jax.jit` cannot trace into."""
        return self.stitched is not None

    @property
    def module_call(self) -> Callable:
        """The optimized module alone (a `jax.jit`, with the rewrite's compiler options), taking
        exactly the optimized signature; `jax.jit(fn)` when it was kept."""
        return self._call

    def __repr__(self) -> str:
        return f"<OptimizedFunction {self.__name__}: {self.report.speedup:.2f}x vs jax.jit>"

    def export(self, path: str | os.PathLike) -> "os.PathLike":
        """Write a portable artifact (a folder) that `shlo_env.load_optimized(path)` runs with the
        chosen XLA actions: the serialized jax.export module, its actions, numerics tier and
        report, and the jax/jaxlib/device it was tuned on (`shlo_env.api.export`)."""
        from shlo_env.api.export import write_artifact

        if self.stitched is not None:
            raise ValueError("cannot export: the program calls Python host callbacks, which a file cannot carry "
                             "(docs/side_effects.md)")
        if self.original is None:
            raise ValueError("nothing to export: this function was not lowered")
        r = self.report
        return write_artifact(path, self.program if self.program is not None else self.original,
                              fn=self.__wrapped__, original=self.original,
                              actions=r.action_tokens if self.program is not None else (), numerics=r.numerics,
                              report=dataclasses.asdict(r), report_text=str(r), name=r.name)


def own_class(cls: type) -> type:
    """A subclass of `cls` for one instance, so that the instance's `__call__` can be a C++
    callable (a `jax.jit`) set on its class: Python calls it with no frame of its own."""
    return type(cls.__name__, (cls,), {"__module__": cls.__module__, "__qualname__": cls.__qualname__})


def dispatching(fn: Callable, call: Callable, program: Program, actions: Sequence = (),
                fallback: Callable | None = None) -> Callable:
    """What an `OptimizedFunction` calls: `call` (the optimized module, taking `program`'s
    signature) for arguments of that signature, `fn` for any other.

    Without XLA actions this is one `jax.jit` of a router that jax traces once per signature:
    the choice is made at trace time, and every later call is jax's own C++ dispatch (no Python
    signature check per call). Keyword arguments bind to `fn`'s positional parameters there.
    With actions, `call` is a `jax.jit` compiled with them, and other signatures must not be:
    the arguments go to `call` first and to `fallback` (`jax.jit(fn)`) when jax refuses them."""
    try:
        signature: inspect.Signature | None = inspect.signature(fn)
    except (TypeError, ValueError):
        signature = None
    if actions:
        return _checked(signature, call, fallback if fallback is not None else jax.jit(fn))
    specs = [(tuple(s.shape), np.dtype(s.dtype)) for s in program.in_specs]

    def route(*args, **kwargs):  # runs when jax traces a new signature, not per call
        positional = _positional(signature, args, kwargs)
        if positional is not None:
            leaves, tree = jax.tree_util.tree_flatten((positional, {}))
            if tree == program.in_tree and [(tuple(x.shape), np.dtype(x.dtype)) for x in leaves] == specs:
                return call(*positional)
        return fn(*args, **kwargs)

    route.__name__ = route.__qualname__ = getattr(fn, "__name__", "fn")  # jax names the program after it
    return jax.jit(route)


def _positional(signature: inspect.Signature | None, args: tuple, kwargs: dict) -> tuple | None:
    """`args` with `kwargs` bound to positional parameters; None when some cannot be."""
    if not kwargs:
        return args
    try:
        bound = signature.bind(*args, **kwargs) if signature is not None else None
    except TypeError:
        return None
    return None if bound is None or bound.kwargs else bound.args


def _checked(signature: inspect.Signature | None, call: Callable, fallback: Callable) -> Callable:
    """`call` for the arguments jax's exported-signature check accepts, `fallback` otherwise."""

    def checked(*args, **kwargs):
        positional = _positional(signature, args, kwargs)
        if positional is None:
            return fallback(*args, **kwargs)  # keyword-only: not the optimized signature
        try:
            return call(*positional)
        except (TypeError, ValueError):
            # jax checks the arguments against the exported signature before running anything:
            # another signature gets jax.jit(fn) (which raises jax's own error if they are bad).
            return fallback(*args, **kwargs)

    return checked


def transformable(call: Callable, fn: Callable) -> Callable:
    """`call` (an exported module: no JVP or batching rule) made transformable: under `jax.vmap`
    it runs `jax.vmap(fn)`, under `jax.grad`/`jax.jvp` it differentiates `fn`; plain calls and
    calls inside another `jax.jit` run `call`. `fn` must compute what `call` computes."""

    @jax.custom_batching.custom_vmap
    def batchable(*args):
        return call(*args)

    @batchable.def_vmap
    def _vmap_rule(axis_size, in_batched, *args):  # custom_vmap moves every batch axis to 0
        in_axes = tuple(jax.tree_util.tree_map(lambda b: 0 if b else None, b) for b in in_batched)
        out = jax.vmap(fn, in_axes=in_axes, axis_size=axis_size)(*args)
        return out, jax.tree_util.tree_map(lambda _: True, out)

    @jax.custom_jvp
    def differentiable(*args):
        return batchable(*args)

    @differentiable.defjvp
    def _jvp_rule(primals, tangents):
        return jax.jvp(fn, primals, tangents)

    return differentiable


def exported_callable(fn: Callable, args: Sequence, program: Program,
                      disabled_passes: Sequence[str] = ()) -> Callable:
    """`jax.jit` of a `jax.export.Exported` whose module is `program`: jax's fast dispatch path,
    argument checking, and composition inside other jitted functions; `jax.vmap` and `jax.grad`
    fall back to `fn` (see `transformable`). With `disabled_passes`, XLA compiles it with those
    passes off (`xla_disable_hlo_passes`)."""
    from jax import export

    exp = export.export(jax.jit(fn, keep_unused=True))(*args)  # as `lower` traced it: jax's caches hit
    exp = dataclasses.replace(
        exp, mlir_module_serialized=program.portable(),
        module_kept_var_idx=tuple(range(len(program.in_specs))))
    call = transformable(exp.call, fn)
    if disabled_passes:  # disabled pass names and `name=value` XLA option actions
        return jax.jit(call, compiler_options=option_actions.compiler_options(disabled_passes))
    return jax.jit(call)


def callable_samples(fns: Sequence[Callable], args: Sequence, timing: TimingPolicy = SEARCH) -> list[list[float]]:
    """Wall times of each callable's runs (outputs awaited), interleaved (A, B, A, B, ...), as
    `runtime.compare` times executables."""
    def once(f):
        def run():
            t = time.perf_counter()
            jax.block_until_ready(f(*args))
            elapsed = time.perf_counter() - t
            return elapsed, elapsed
        return run

    samples = runtime.interleave([once(f) for f in fns], timing)
    return [[full for full, _ in s] for s in samples]


def time_callables(fns: Sequence[Callable], args: Sequence, timing: TimingPolicy = SEARCH) -> list[float]:
    """T of each callable (10th percentile of its interleaved wall times)."""
    return [runtime.typical(s) for s in callable_samples(fns, args, timing)]


# optimize()'s defaults: the "default" mode (`shlo_env.search.options.MODES`; `mode="quick"` or
# `mode="max"` for the others). The final timing and cost analysis in the worker are turned off
# per call (`_finish` times the callable here, in this process).
DEFAULTS = preset("default")


def optimize(fn: Callable, *args, options: SearchOptions | None = None, progress: bool | None = None,
             cache: bool | str | os.PathLike | None = True, **fields: Any) -> OptimizedFunction:
    """Search rewrites of `fn` lowered on `args`; return a callable at least as fast as jax.jit(fn).

        optimize(fn, x, w, budget_s=30, strategy="beam")
        optimize(fn, x, w, options=SearchOptions(budget_s=30), seed=1)

    Args:
      options: the search's options (`shlo_env.search.options.SearchOptions`; default
        `DEFAULTS`: the "default" mode, 60 s). Its `final_timing` and `cost` do not apply: the
        callable is timed in-process.
      mode (a field name here): "quick" (15 s), "default" (60 s) or "max" (600 s, XLA
        passes and options too): budget and strategy together (`MODES`); fields given
        beside it override it. `numerics="exact"|"reassociate"|"approx"` caps the tiers,
        `exclude_patterns=[name or family, ...]` leaves patterns out.
      fields: any `SearchOptions` field by name (`budget_s`, `strategy`, `patterns`, `passes`,
        `xla_options`, `seed`, ...), replacing the one in `options`; an unknown name is a
        TypeError. `budget_s` covers the whole call (search, confirmation, final check);
        `name` defaults to fn's name.
      progress: show one tqdm line (best ratio, candidates evaluated, cache hits) on stderr;
        off by default. Logs: `SHLO_ENV_LOGS=search,cache` (`shlo_env.logs`); a dump folder:
        `SHLO_ENV_DUMP_DIR` (`shlo_env.api.dump`).
      cache: the persistent cache of searches (`shlo_env.api.cache`): True for the default
        directory (`SHLO_ENV_CACHE_DIR`, else the user cache directory), a directory, or
        False. Its key is the program and the options that change the result
        (`SearchOptions.result_key`). A hit is checked against jax.jit(fn) on a seeded random
        input set, then used without searching (`report.cache == "hit"`).
    """
    t0 = time.perf_counter()
    options = options_from(DEFAULTS if options is None else options, fields, where="optimize")
    name = str(options.name or getattr(fn, "__name__", "fn"))
    options = options.with_(name=name, final_timing=False, cost=False)
    jitted = jax.jit(fn)
    try:
        program = lower(fn, *args, name=name)
    except ProgramError as e:
        if str(e).startswith("could not lower"):
            raise  # fn itself fails on these arguments, as under jax.jit
        if "token" not in str(e):  # a program jax.jit runs and we cannot search: say why
            return _not_searched(fn, jitted, name, options, t0, f"not searched: {e}")
        program = None  # ordered effects thread tokens through main: searched around them
    devices = program_devices(program.module) if program is not None else 1
    if devices > 1:
        return _not_searched(fn, jitted, name, options, t0, (
            f"not searched: the program runs on {devices} devices (sharded or replicated); shlo_env searches "
            f"single-device programs (sharding annotations on one device are searched), so jax.jit(fn) runs it"))
    if program is None or has_host_callbacks(program):
        # host callbacks and tokens: searched with them cut out, delivered by jax's own compile
        # (shlo_env.api.effects); not cached: the callbacks are this process's functions
        return optimize_effects(fn, args, jitted, name, t0, options, bool(progress),
                                OptimizedFunction=OptimizedFunction, Report=Report, callable_samples=callable_samples)
    delivery = _Delivery(fn, args, jitted, program, options, t0)
    res, status = front_end.search_program(program, options, cache=search_cache.open_cache(cache), warm_worker=True,
                                           progress=bool(progress), replay=delivery.replay, confirm=delivery.confirm)
    return delivery.deliver(res, status)


def program_devices(module) -> int:
    """How many devices the lowered module runs on: its replicas times its partitions."""
    from jaxlib.mlir import ir

    count = 1
    for attr in ("mhlo.num_partitions", "mhlo.num_replicas"):
        if attr in module.operation.attributes:
            count *= int(ir.IntegerAttr(module.operation.attributes[attr]).value)
    return count


def _not_searched(fn, jitted, name: str, options: SearchOptions, t0: float, reason: str) -> OptimizedFunction:
    """jax.jit(fn) itself, with the one-line reason no search ran."""
    report = Report(name=name, strategy=str(options.strategy), returned_original=True, reason=reason)
    report.total_s = time.perf_counter() - t0
    return OptimizedFunction(fn, jitted, report, None, None)


class _Delivery:
    """What `optimize` adds to the program search (`front_end.search_program`): the callable it
    returns (the exported module with its XLA actions, behind the signature check of
    `dispatching`), built for a cached winner's check (`replay`) or for a new winner, which is
    checked once more in this process against jax.jit(fn) on outputs and on time (`confirm`);
    and the result as an `OptimizedFunction` with its `Report` (`deliver`)."""

    def __init__(self, fn: Callable, args: Sequence, jitted: Callable, program: Program, options: SearchOptions,
                 t0: float):
        self.fn, self.args, self.jitted, self.program, self.options, self.t0 = fn, args, jitted, program, options, t0
        self.call: Callable | None = None  # the optimized module's callable
        self.user: Callable | None = None  # what the caller gets: `call` for its signature, else jax.jit(fn)

    def build(self, chosen: Program, actions: Sequence[str]) -> None:
        self.call = exported_callable(self.fn, self.args, chosen, actions)
        self.user = dispatching(self.fn, self.call, self.program, actions, self.jitted)

    def replay(self, original: Program, chosen: Program, actions: Sequence[str]) -> "_CallableReplay":
        """The check of a cached winner runs the callable the caller will get."""
        self.build(chosen, actions)
        return _CallableReplay(self)

    def flat_outputs(self, f: Callable) -> Callable:
        """`f` (a callable of fn's arguments) as a function of flat input arrays to flat outputs."""
        def outputs(flat):
            call_args = jax.tree_util.tree_unflatten(self.program.in_tree, runtime.to_device(flat))[0]
            return [np.asarray(x) for x in jax.tree_util.tree_leaves(f(*call_args))]
        return outputs

    def confirm(self, res: ProgramResult) -> None:
        """The search's winner built as the callable and checked in this process against
        jax.jit(fn), on outputs and on time (as many rounds as the worker's timings); `res`
        returns the original when it fails (so the cache stores that)."""
        best: Any = res.evaluation  # the search's Evaluation of its winner
        inputs: Any = res.check_inputs  # the worker's input set 0, flat

        def keep_original(reason: str, timed_here: bool = False) -> None:
            return_original(res, self.program)
            res.reason, res.ratio = reason, 1.0
            if not timed_here:
                res.best = {}  # no in-process timing: the report shows jax.jit's alone

        try:
            self.build(best.program, best.passes)
            assert self.user is not None
            call_args = jax.tree_util.tree_unflatten(self.program.in_tree, runtime.to_device(inputs))[0]
            got = jax.tree_util.tree_leaves(self.user(*call_args))
            want = jax.tree_util.tree_leaves(self.jitted(*call_args))
        except Exception as e:  # noqa: BLE001 - any failure here means: keep jax.jit
            return keep_original(f"could not build the optimized callable: {type(e).__name__}: {e}")
        reference: Any = res.check_reference  # (float64 outputs, their sensitivity) when not EXACT
        ref, sens = reference if reference is not None else (None, None)
        cmp = escalate([[np.asarray(g) for g in got]], [[np.asarray(w) for w in want]], best.numerics,
                       lambda: None if ref is None else [ref], lambda: None if sens is None else [sens])
        verify_log.info("%s: in-process check against jax.jit: %s", res.name,
                        f"ok ({cmp.tier.name})" if cmp.ok else f"failed: {cmp.detail}")
        if not cmp.ok:
            return keep_original(f"final in-process check against jax.jit failed: {cmp.detail}")
        tier = max(cmp.tier, best.verified)
        # the in-process timing takes as many rounds as the worker's did (`Schedule.pair_policy`)
        timing = res.timing if res.timing is not None else self.options.timing
        s_jit, s_opt = callable_samples([self.jitted, self.user], call_args, timing)
        median = runtime.median_ratio(s_jit, s_opt)
        res.baseline, res.best = front_end.timed(s_jit), {**front_end.timed(s_opt), "median_ratio": median}
        res.ratio = res.best["full"] / res.baseline["full"]
        if not accepts(res.ratio, median, res.threshold):
            return keep_original(f"in-process ratio {res.ratio:.3f} (median per call {median:.3f}) vs jax.jit is "
                                 f"within noise (worker measured {best.ratio:.3f}, median {best.median_ratio:.3f})",
                                 timed_here=True)
        res.numerics = tier.name
        c = best.comparison
        sets = "example args + random sets" if self.program.example_args is not None else "random sets"
        res.verification = {**res.verification, "summary": (
            f"{tier.name} tier on {sets} in a worker, then against jax.jit in-process"
            + (f"; {c.describe()}" if c is not None and c.describe() else ""))}

    def report(self, res: ProgramResult, cache_status: str) -> Report:
        """The result in the report's words (times of the in-process timing when there was one)."""
        best = res.best or {}
        report = Report.from_result(
            res, baseline_s=res.baseline.get("full", float("nan")), optimized_s=best.get("full", float("nan")),
            ratio=res.ratio, median_ratio=best.get("median_ratio", float("nan")),
            verification=res.verification.get("summary", ""), decisions=list(res.decisions), cache=cache_status,
            optimized_hash="" if res.returned_original else pass_actions.state_key(res.best_hash, res.actions),
            pass_actions=pass_actions.resolve(self.options.passes) + option_actions.resolve(
                self.options.xla_options, ops=self.program.num_ops()))
        if res.status != "ok":  # the original did not run in the worker: jax.jit(fn), unsearched
            report.returned_original, report.reason, report.ratio = True, res.error, 1.0
            report.applied, report.actions, report.numerics, report.decisions = (), (), "EXACT", []
        report.total_s = time.perf_counter() - self.t0
        return report

    def deliver(self, res: ProgramResult, cache_status: str) -> OptimizedFunction:
        report = self.report(res, cache_status)
        if res.status == "ok" and not res.returned_original and self.call is not None:
            return OptimizedFunction(self.fn, self.call, report, res.program, self.program, fallback=self.jitted,
                                     dispatch=self.user)
        return OptimizedFunction(self.fn, self.jitted, report, None, self.program)


class _CallableReplay:
    """A cached winner checked as `optimize` returns it: its callable against jax.jit(fn) (as
    `lower` traced it, so jax's caches hit), timed on the caller's arguments."""

    what = "jax.jit's"

    def __init__(self, delivery: _Delivery):
        self.delivery = delivery
        self.run_original = delivery.flat_outputs(jax.jit(delivery.fn, keep_unused=True))
        self.run_chosen = delivery.flat_outputs(delivery.user)  # type: ignore[arg-type]

    def samples(self, timing: TimingPolicy) -> tuple[list[float], list[float]]:
        d = self.delivery
        s_jit, s_opt = callable_samples([d.jitted, d.user], d.args, timing)  # type: ignore[list-item]
        return s_jit, s_opt
