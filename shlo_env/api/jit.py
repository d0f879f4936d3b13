"""`shlo_env.jit`: use the search like `jax.jit`, a decorator that specializes per signature.

    @shlo_env.jit
    def f(X, W):
        return jnp.sum(X @ W, axis=0)

    f(X, W)             # first call for this signature: cache lookup, else search; then fast
    f.report(X, W)      # what was chosen for this signature

Each input signature (pytree structure, shapes, dtypes, weak types, static argument values) is
specialized once, as jax.jit retraces: `optimize` runs on `fn` with the static arguments bound
and the dynamic ones flattened, through the persistent cache (`shlo_env.api.cache`), so a second
process finds the winner without searching. The callable per signature is a `jax.jit` with the
user's own static and donated arguments around the optimized module (or `jax.jit(fn)` itself
when nothing was faster), so calls, keyword arguments, donation, `.lower` and nesting inside
other jitted code behave as jax.jit's. Under `jax.vmap`/`jax.grad` the optimized module falls
back to tracing `fn` (`shlo_env.api.optimize.transformable`).

Calls go through one `jax.jit` of a dispatcher that jax traces once per signature: the trace
specializes the signature (with the call's concrete arguments as the search's examples) and
embeds its optimized module or `fn`. The function's `__call__` is that `jax.jit` itself, so a
signature already specialized is dispatched by jax's own C++ path with no Python in between, at
`jax.jit`'s cost per call. Nothing is raised out of that trace: jax's C++ cache would send the
signature through Python for good. (A winner compiled with XLA actions needs its
own compiler options: once a function has one, its calls look up their signature in Python. A
background search that swaps a winner in clears jax's cache of the function: each signature is
traced and compiled again once.)

With `background=True` a new signature runs `jax.jit(fn)` at once; one background thread (shared
by every jit function, so the MLIR context is used by one search at a time) looks the cache up or
searches, and swaps the winner in when done. `f.wait()` blocks until that has happened.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterable

import jax
import numpy as np

from shlo_env import _jax_compat
from shlo_env.execute import xla_options
from shlo_env.ir.program import ProgramError
from shlo_env.api.optimize import OptimizedFunction, Report, optimize, own_class
from shlo_env.search.options import SearchOptions, options_from, preset

NOTICE_AFTER_S = 3.0  # a search still running after this long prints a line on stderr
#: The "quick" mode (its first call blocks: 15 s at most) without XLA options: a jit function nests
#: inside other jitted code and is dispatched by jax's C++ path, and a winner with compiler options
#: can do neither (jax takes compiler options on a top-level jit only). `xla_options=...` (or
#: `mode="max"`) asks for them anyway; `mode="default"` searches as `optimize` does.
JIT_DEFAULTS = preset("quick", xla_options=False)
# Searches share one MLIR context: a synchronous search waits for a background one to finish.
_SEARCH_LOCK = threading.Lock()


@dataclasses.dataclass
class Specialization:
    """What one input signature runs: `call` (takes the user's arguments) and why; `jitted` is
    the same as a jax.jit with the user's signature (for `.lower`)."""

    call: Callable
    report: Report
    optimized: OptimizedFunction | None = None
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    jitted: Callable | None = None

    def __post_init__(self):
        self.jitted = self.jitted if self.jitted is not None else self.call


def jit(fn: Callable | None = None, /, *, static_argnums: int | Iterable[int] | None = None,
        static_argnames: str | Iterable[str] | None = None,
        donate_argnums: int | Iterable[int] | None = None,
        donate_argnames: str | Iterable[str] | None = None, background: bool = False,
        progress: bool | None = None, cache: bool | str | os.PathLike | None = True,
        options: SearchOptions | None = None, **fields):
    """Like `jax.jit(fn, ...)`, with a rewrite search per input signature.

    Usable as `shlo_env.jit(fn)`, `@shlo_env.jit` and `@shlo_env.jit(budget_s=30, ...)`.

    Args:
      static_argnums, static_argnames, donate_argnums, donate_argnames: as in `jax.jit`.
      background: run `jax.jit(fn)` at once on a new signature and swap the winner in when a
        background search (or cache lookup) finishes.
      progress: True for the search's live line; None (default) prints one line on stderr when
        a search takes longer than a few seconds; False for silence.
      cache: the persistent cache of searches, as in `shlo_env.optimize`.
      options, fields: the search's options, as in `shlo_env.optimize` (a `SearchOptions`,
        and/or its fields by name: `budget_s`, `strategy`, `patterns`, `passes`, ...); an
        unknown name is a TypeError here, not at the first call.
    """
    search = options_from(JIT_DEFAULTS if options is None else options, fields, where="shlo_env.jit")
    if fn is None:
        return functools.partial(jit, static_argnums=static_argnums, static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, donate_argnames=donate_argnames,
                                 background=background, progress=progress, cache=cache, options=search)
    return JitFunction(fn, static_argnums=static_argnums, static_argnames=static_argnames,
                       donate_argnums=donate_argnums, donate_argnames=donate_argnames,
                       background=background, progress=progress, cache=cache, options=search)


def _as_tuple(x, kind) -> tuple:
    if x is None:
        return ()
    return (x,) if isinstance(x, kind) else tuple(x)


def _argnums_and_argnames(fn, nums, names) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Positions and names of the same parameters, each completed from the other (as jax.jit)."""
    nums, names = _as_tuple(nums, int), _as_tuple(names, str)
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return nums, names
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    nums = tuple(n if n >= 0 else n + len(positional) for n in nums)
    more_names = [positional[n].name for n in nums
                  if 0 <= n < len(positional) and positional[n].kind == positional[n].POSITIONAL_OR_KEYWORD]
    more_nums = [i for i, p in enumerate(positional) if p.name in names and p.kind == p.POSITIONAL_OR_KEYWORD]
    return tuple(sorted(set(nums) | set(more_nums))), tuple(dict.fromkeys(names + tuple(more_names)))


class JitFunction:
    """The object `shlo_env.jit` returns; call it like `jax.jit(fn)`."""

    def __new__(cls, *args, **kwargs):
        return super().__new__(own_class(cls))  # its `__call__` is set per instance (see __init__)

    def __init__(self, fn: Callable, *, static_argnums=None, static_argnames=None, donate_argnums=None,
                 donate_argnames=None, background: bool = False, progress: bool | None = None,
                 cache: bool | str | os.PathLike | None = True, options: SearchOptions | None = None):
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._jit_kwargs = {"static_argnums": static_argnums, "static_argnames": static_argnames,
                            "donate_argnums": donate_argnums, "donate_argnames": donate_argnames}
        self._jitted = jax.jit(fn, **self._jit_kwargs)
        self._static_nums, self._static_names = _argnums_and_argnames(fn, static_argnums, static_argnames)
        self.background = background
        self.progress = progress
        self.cache = cache
        self.options = options if options is not None else JIT_DEFAULTS
        self._specializations: dict = {}
        self._lock = threading.Lock()
        self._keyed = False  # a winner needs its own compiler options: route calls in Python
        self._dispatch = self._new_dispatch()
        type(self).__call__ = staticmethod(self._dispatch)  # type: ignore[method-assign]

    # --- calling ------------------------------------------------------------------------------

    def __call__(self, *args, **kwargs):
        """Replaced per instance by its dispatching `jax.jit` (see __init__), or, once a winner
        needs its own compiler options, by `_keyed_call`."""
        return self._keyed_call(args, kwargs) if self._keyed else self._dispatch(*args, **kwargs)

    def _keyed_call(self, args, kwargs):
        """A call with the signature looked up in Python (see the module doc)."""
        try:
            key = self._signature(args, kwargs)
            spec = self._specializations.get(key)  # TypeError: an unhashable static value
        except (_NotASignature, TypeError):
            return self._jitted(*args, **kwargs)  # jax.jit raises its own error for such arguments
        if spec is None:
            spec = self._specialize(key, args, kwargs)
        return spec.call(*args, **kwargs)

    def _new_dispatch(self) -> Callable:
        """One `jax.jit` for every signature: jax traces `dispatch` once per signature, and it
        embeds what that signature's specialization runs. A new one drops jax's executables
        (a background search swapped a winner in): `dispatch` is a new function, so jax's
        caches of traces miss too."""
        fn, specs = self._fn, self._specializations

        @functools.wraps(fn)  # jax.jit reads fn's signature to match static/donated names
        def dispatch(*args, **kwargs):
            key = self._signature(args, kwargs)  # the leaves are tracers here
            spec = specs.get(key)
            if spec is None:
                calling = _jax_compat.jit_call_arguments()  # the call's own (concrete) arguments
                same = calling is not None and self._same_signature(key, calling)
                spec = self._specialize(key, *(calling if same and calling is not None else (args, kwargs)))
            if spec.optimized is None or spec.optimized.report.actions or spec.optimized.keyed_effects:
                # jax.jit(fn)'s program; a winner with XLA actions runs from `_keyed_call` from now on
                return fn(*args, **kwargs)
            d_args, d_kwargs, _, _ = self._split(args, kwargs)
            return spec.optimized.module_call(*jax.tree_util.tree_leaves((d_args, d_kwargs)))

        # static as the signature key has them (a static position passed by keyword too)
        return jax.jit(dispatch, **{**self._jit_kwargs, "static_argnums": self._static_nums,
                                    "static_argnames": self._static_names})

    def report(self, *args, **kwargs) -> Report:
        """What runs for the signature of these arguments (specializing it first if needed)."""
        return self._specialization(args, kwargs).report

    def lower(self, *args, **kwargs):
        """`jax.jit`'s `Lowered` of what runs for these arguments (the optimized module, called
        from a wrapper that has the user's signature, when the search's rewrite was taken)."""
        return self._specialization(args, kwargs).jitted.lower(*args, **kwargs)

    def eval_shape(self, *args, **kwargs):
        return self._jitted.eval_shape(*args, **kwargs)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every background search of this function has finished; False on timeout."""
        end = None if timeout is None else time.monotonic() + timeout
        for spec in list(self._specializations.values()):
            left = None if end is None else max(0.0, end - time.monotonic())
            if not spec.done.wait(left):
                return False
        return True

    @property
    def specializations(self) -> dict:
        """Signature -> Specialization, for every signature seen so far."""
        return dict(self._specializations)

    def __repr__(self) -> str:
        return f"<shlo_env.jit {getattr(self._fn, '__name__', 'fn')}: {len(self._specializations)} signature(s)>"

    def __get__(self, obj, objtype=None):  # methods: bind like a function does
        return self if obj is None else functools.partial(self, obj)

    # --- signatures ---------------------------------------------------------------------------

    def _split(self, args, kwargs):
        """(dynamic positional args, dynamic kwargs, static positional items, static kwargs)."""
        if not self._static_nums and not self._static_names:
            return args, kwargs, (), ()
        dyn_args = tuple(a for i, a in enumerate(args) if i not in self._static_nums)
        static_args = tuple((i, args[i]) for i in self._static_nums if i < len(args))
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self._static_names}
        static_kwargs = tuple(sorted((k, v) for k, v in kwargs.items() if k in self._static_names))
        return dyn_args, dyn_kwargs, static_args, static_kwargs

    def _signature(self, args, kwargs):
        dyn_args, dyn_kwargs, static_args, static_kwargs = self._split(args, kwargs)
        try:
            leaves, tree = jax.tree_util.tree_flatten((dyn_args, dyn_kwargs))
            key = (tree, tuple(map(_leaf_key, leaves)), static_args, static_kwargs)
        except Exception as e:  # noqa: BLE001 - not arrays, or unhashable static values
            raise _NotASignature from e
        return key

    def _specialization(self, args, kwargs) -> Specialization:
        key = self._signature(args, kwargs)
        return self._specializations.get(key) or self._specialize(key, args, kwargs)

    def _specialize(self, key, args, kwargs) -> Specialization:
        with self._lock:
            spec = self._specializations.get(key)
            if spec is not None:
                return spec
            if self.background:
                report = Report(name=getattr(self._fn, "__name__", "fn"), strategy=str(self.options.strategy),
                                reason="running jax.jit(fn) while a background search runs")
                interim = Specialization(self._jitted, report)
                self._specializations[key] = interim
                _background().submit(lambda: self._finish_in_background(key, interim, args, kwargs))
                return interim
            spec = self._search(args, kwargs)
            spec.done.set()
            self._register(key, spec)
            return spec

    def _register(self, key, spec: Specialization, swapped: bool = False) -> None:
        self._specializations[key] = spec
        if spec.optimized is not None and (spec.optimized.report.actions or spec.optimized.keyed_effects) \
                and not self._keyed:
            self._keyed = True
            type(self).__call__ = _keyed_entry  # type: ignore[method-assign]
        if swapped:  # jax has compiled what ran before: trace every signature again
            self._dispatch.clear_cache()  # type: ignore[attr-defined]

    def _same_signature(self, key, call: tuple) -> bool:
        try:
            return self._signature(*call) == key
        except _NotASignature:
            return False

    def _finish_in_background(self, key, interim: Specialization, args, kwargs) -> None:
        try:
            spec = self._search(args, kwargs)
        except Exception as e:  # noqa: BLE001 - a failed background search keeps jax.jit
            interim.report.reason = f"background search failed: {type(e).__name__}: {e}"
            spec = interim
        self._register(key, spec, swapped=spec is not interim)
        interim.done.set()
        spec.done.set()

    # --- the search for one signature ---------------------------------------------------------

    def _search(self, args, kwargs) -> Specialization:
        """`optimize` on `fn` with the static arguments bound and the dynamic leaves flat."""
        dyn_args, dyn_kwargs, static_args, static_kwargs = self._split(args, kwargs)
        leaves, tree = jax.tree_util.tree_flatten((dyn_args, dyn_kwargs))
        merge = functools.partial(_merge, tree, static_args, len(args), static_kwargs)

        def flat_fn(*flat):
            a, k = merge(flat)
            return self._fn(*a, **k)

        flat_fn.__name__ = getattr(self._fn, "__name__", "fn")
        # Under a transformation (vmap, grad, an outer jit) the leaves are tracers: search on
        # their shapes and dtypes with random inputs only. Concrete leaves are copied: a numpy
        # view of a jax array would keep its buffer from being donated.
        example = [jax.ShapeDtypeStruct(x.shape, x.dtype) if isinstance(x, jax.core.Tracer)
                   else np.array(x, copy=True) if isinstance(x, jax.Array) else x for x in leaves]
        quiet = self.progress is not None or self.background
        notice = None if quiet else _Notice(flat_fn.__name__, leaves, self.options.budget_s)
        try:
            # The in-process checks run the candidates on concrete inputs, also when this call
            # is being traced by an outer transformation.
            with _SEARCH_LOCK, jax.ensure_compile_time_eval():
                opt = optimize(flat_fn, *example, options=self.options, progress=self.progress, cache=self.cache)
        except ProgramError as e:  # not a program we can search (jax.jit raises fn's own errors)
            report = Report(name=flat_fn.__name__, strategy=str(self.options.strategy),
                            reason=f"not searched: {e}")
            return Specialization(self._jitted, report)
        finally:
            if notice is not None:
                notice.cancel()
        if notice is not None:
            notice.finished(opt.report)
        if opt.program is None:
            return Specialization(self._jitted, opt.report, opt)
        passes = opt.report.action_tokens
        inner = opt.module_call  # a jax.jit of the optimized module, with its compiler options

        @functools.wraps(self._fn)  # jax.jit reads fn's signature to match static/donated names
        def wrapper(*a, **k):
            d_args, d_kwargs, _, _ = self._split(a, k)
            return inner(*jax.tree_util.tree_leaves((d_args, d_kwargs)))

        # disabled passes and `name=value` option actions, each where XLA takes it
        compiler_options = xla_options.compiler_options(passes) if passes else None
        jitted = jax.jit(wrapper, compiler_options=compiler_options, **self._jit_kwargs)
        if opt.keyed_effects:
            # host callbacks: `inner` is a compiled executable, which jax.jit cannot trace into;
            # `jitted` (for `.lower`) runs fn's own program there
            return Specialization(wrapper, opt.report, opt, jitted=jitted)
        # Without donation the plain wrapper is enough (static values are part of the signature
        # already): no second compile on the first call. Donation needs jax.jit's own handling.
        donates = self._jit_kwargs["donate_argnums"] is not None or self._jit_kwargs["donate_argnames"] is not None
        call = jitted if donates else wrapper
        return Specialization(call, opt.report, opt, jitted=jitted)


def _keyed_entry(self: JitFunction, *args, **kwargs):
    return self._keyed_call(args, kwargs)


def _leaf_key(x):
    """What a leaf's program depends on: the same for a concrete leaf and for the tracer jax
    traces it as (shape, dtype, weak type)."""
    a = jax.typeof(x)
    return (a.shape, a.dtype, a.weak_type)


class _NotASignature(TypeError):
    """The arguments are not ones jax.jit accepts; jax.jit is called to raise its own error."""


def _merge(tree, static_args, nargs, static_kwargs, flat):
    """The full (args, kwargs) of a call from the dynamic leaves and the bound static values."""
    dyn_args, dyn_kwargs = jax.tree_util.tree_unflatten(tree, flat)
    statics = dict(static_args)
    dyn = iter(dyn_args)
    args = [statics[i] if i in statics else next(dyn) for i in range(nargs)]
    return args, {**dyn_kwargs, **dict(static_kwargs)}


class _Notice:
    """One line on stderr when a search is still running after NOTICE_AFTER_S seconds."""

    def __init__(self, name, leaves, budget_s):
        self.name = name
        self.start = time.perf_counter()
        self.shown = False
        sig = ", ".join(f"{jax.typeof(x).str_short()}" for x in leaves[:4]) + (", ..." if len(leaves) > 4 else "")
        self.text = (f"shlo_env.jit: searching rewrites of {name}({sig}), up to {budget_s:.0f} s; the result "
                     f"is cached (background=True runs jax.jit meanwhile)")
        self.timer = threading.Timer(NOTICE_AFTER_S, self._show)
        self.timer.daemon = True
        self.timer.start()

    def _show(self):
        self.shown = True
        print(self.text, file=sys.stderr, flush=True)

    def cancel(self):
        self.timer.cancel()

    def finished(self, report: Report):
        if self.shown:
            what = ("kept jax.jit" if report.returned_original
                    else f"{report.speedup:.2f}x faster than jax.jit ({', '.join(report.applied)})")
            print(f"shlo_env.jit: {self.name}: {what}, after {time.perf_counter() - self.start:.1f} s",
                  file=sys.stderr, flush=True)


class _Background:
    """One daemon thread running background searches in order (one MLIR user at a time)."""

    def __init__(self):
        self.queue: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._run, name="shlo_env.jit background", daemon=True)
        self.thread.start()

    def submit(self, job: Callable[[], None]) -> None:
        self.queue.put(job)

    def _run(self):
        while True:
            job = self.queue.get()
            job()


@functools.cache
def _background() -> _Background:
    return _Background()


__all__ = ["jit", "JitFunction", "Specialization"]
