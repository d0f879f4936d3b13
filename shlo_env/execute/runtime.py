"""Compile, run and time StableHLO through the PJRT client of jax's default backend.

Timing follows the HloEnv paper (Appendix D.3): at least 10 runs after 3 warm-ups, and two
programs compared side by side in one process (A, B, A, B, ...). Each run records three
timings: `full` (host wall clock around execute until the outputs are ready), `async` (until
execute returns: the dispatch), and `compute` (device time, where the backend reports it; None
on CPU). T(G) is the 10th percentile of the runs, not the paper's minimum: fast programs get
more runs (up to `min_seconds` of measuring: `shlo_env.measure.timing_policy.TimingPolicy`), and on a shared
machine the minimum of a 60 us program moved by +-20% between identical measurements while the
10th percentile moved by +-3%.
With the 10 runs a slow program gets, the 10th percentile is the minimum (up to interpolation).

Running untrusted or rewritten programs in-process can abort the interpreter (XLA aborts on
some inputs); `shlo_env.execute.worker` runs these same functions in a child process.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import time
from collections.abc import Sequence
from typing import Any

import jax
import ml_dtypes
import numpy as np
import xxhash

from shlo_env import _jax_compat
from shlo_env.execute import xla_options
from shlo_env.ir.effects import has_host_callbacks
from shlo_env.ir.program import Program
from shlo_env.measure.timing_policy import QUICK, TimingPolicy


class CompileError(RuntimeError):
    """XLA rejected the program."""


TIMING_PERCENTILE = 10.0


@dataclasses.dataclass
class Timing:
    """Seconds; each field is the 10th percentile over `runs` measured executions."""

    full: float
    async_: float
    compute: float | None
    runs: int
    samples: list[float] = dataclasses.field(default_factory=list, repr=False)  # full, per run

    @property
    def minimum(self) -> float:
        return min(self.samples) if self.samples else self.full

    def as_dict(self) -> dict:
        return {"full": self.full, "async": self.async_, "compute": self.compute, "runs": self.runs,
                "min": self.minimum}


@dataclasses.dataclass
class Executable:
    loaded: Any  # the PJRT LoadedExecutable (jaxlib ships no type for it)
    text_hash: str

    def cost(self) -> dict:
        return cost_analysis(self)


def _text_of(program: Program | str) -> str:
    return program if isinstance(program, str) else program.text()


def devices():
    return _jax_compat.backend().local_devices()[:1]


def platform() -> str:
    return _jax_compat.backend().platform


@functools.lru_cache(maxsize=256)
def _compile_cached(text: str, disabled_passes: tuple[str, ...]) -> Executable:
    if has_host_callbacks(text):
        # compiled without jax's list of Python callbacks, the call would run a function that
        # is not there: a segfault (shlo_env.ir.effects; `optimize` searches around them)
        raise CompileError("the program calls Python host callbacks (jax.debug.print, pure_callback, "
                           "io_callback, ...), which exist only in the process that lowered it")
    _jax_compat.init_lapack()
    client = _jax_compat.backend()
    # `disabled_passes` also carries XLA option actions (`name=value`, see shlo_env.execute.xla_options).
    passes, overrides = xla_options.split(disabled_passes)
    opts = _jax_compat.compile_options(passes, overrides)
    try:
        loaded = client.compile_and_load(text, _jax_compat.device_list(devices()), opts)
    except Exception as e:  # noqa: BLE001 - XlaRuntimeError and friends
        raise CompileError(str(e).strip().splitlines()[0] if str(e).strip() else repr(e)) from e
    return Executable(loaded, xxhash.xxh3_64_hexdigest(text.encode()))


def compile(program: Program | str, disabled_passes: Sequence[str] = ()) -> Executable:  # noqa: A001
    """Compile StableHLO (a Program or its text) for the default device; cached by text."""
    return _compile_cached(_text_of(program), tuple(disabled_passes))


def to_device(inputs: Sequence[np.ndarray]) -> list:
    """Arrays on the default device with their exact dtypes (64-bit ones too)."""
    dev = devices()[0]
    with _jax_compat.enable_x64():
        return [jax.device_put(np.asarray(x), dev) for x in inputs]


def execute(exe: Executable, inputs: Sequence) -> list[np.ndarray]:
    """Run once and return the outputs as numpy arrays."""
    args = inputs if inputs and isinstance(inputs[0], jax.Array) else to_device(inputs)
    outs = exe.loaded.execute(list(args))
    return [np.asarray(o) for o in outs]


def _run_once(exe: Executable, args: list) -> tuple[float, float]:
    t0 = time.perf_counter()
    outs = exe.loaded.execute(args)
    t1 = time.perf_counter()
    for o in outs:
        o.block_until_ready()
    t2 = time.perf_counter()
    return t2 - t0, t1 - t0


def typical(samples: Sequence[float]) -> float:
    """T(G) of a list of run times: their 10th percentile (see the module docstring)."""
    return float(np.percentile(samples, TIMING_PERCENTILE))


def median_ratio(base: Sequence[float], cand: Sequence[float]) -> float:
    """Median of the per-call ratios cand[i] / base[i] of interleaved runs (A, B, A, B, ...).

    The 10th-percentile ratio compares each program's luckiest runs; this one compares calls
    made at the same moment, so a decision that holds up must clear a threshold on both."""
    n = min(len(base), len(cand))
    if not n:
        return float("nan")
    return float(np.median(np.asarray(cand[:n]) / np.asarray(base[:n])))


def interleave(runs_once: Sequence, timing: TimingPolicy = QUICK) -> list[list[tuple[float, float]]]:
    """Call each of `runs_once` in turn (A, B, A, B, ...) as `timing` says: `warmup` rounds,
    then at least `runs` rounds and more until `min_seconds` have passed (at most `max_rounds`,
    default 100 x runs). Each call returns (full, async) seconds; returns them per callable."""
    max_rounds = timing.max_rounds or 100 * timing.runs
    for _ in range(timing.warmup):
        for f in runs_once:
            f()
    samples: list[list[tuple[float, float]]] = [[] for _ in runs_once]
    start, rounds = time.perf_counter(), 0
    while rounds < timing.runs or (time.perf_counter() - start < timing.min_seconds and rounds < max_rounds):
        for i, f in enumerate(runs_once):
            samples[i].append(f())
        rounds += 1
    return samples


def measure(exe: Executable, inputs: Sequence, timing: TimingPolicy = QUICK) -> Timing:
    """T(G) of one executable: see the module docstring."""
    return compare([exe], inputs, timing)[0]


def compare(exes: Sequence[Executable], inputs: Sequence, timing: TimingPolicy = QUICK) -> list[Timing]:
    """Time several executables side by side, interleaved (A, B, A, B, ...), on the same inputs."""
    args = list(inputs) if inputs and isinstance(inputs[0], jax.Array) else to_device(inputs)
    per_exe = interleave([lambda e=e: _run_once(e, args) for e in exes], timing)
    out = []
    for samples in per_exe:
        full, disp = [f for f, _ in samples], [a for _, a in samples]
        out.append(Timing(typical(full), typical(disp), None, len(samples), full))
    return out


def cost_analysis(exe: Executable) -> dict:
    """XLA's static cost estimate: {'flops': ..., 'bytes': ...} (a free, noise-less signal)."""
    try:
        raw = exe.loaded.cost_analysis()
    except Exception:  # noqa: BLE001 - not every backend implements it
        return {"flops": float("nan"), "bytes": float("nan")}
    return _cost_dict(raw)


def _cost_dict(raw) -> dict:
    # XLA leaves out an entry that is zero (no arithmetic, or a program returning its input).
    if isinstance(raw, list):
        raw = raw[0] if raw else {}
    return {"flops": float(raw.get("flops", 0.0)), "bytes": float(raw.get("bytes accessed", 0.0)),
            "transcendentals": float(raw.get("transcendentals", 0.0))}


def hlo_cost(program: Program | str) -> dict:
    """Cost analysis of the program as written, before XLA optimizes it: no compile, about a
    millisecond. Raises CompileError if XLA cannot convert the program."""
    try:
        raw = _jax_compat.hlo_cost_analysis(_text_of(program))
    except (ImportError, AttributeError) as e:  # pragma: no cover - other jaxlib versions
        raise NotImplementedError(f"this jaxlib has no HLO cost analysis entry point ({e})") from e
    except Exception as e:  # noqa: BLE001 - XlaRuntimeError and friends
        raise CompileError(str(e).strip().splitlines()[0] if str(e).strip() else repr(e)) from e
    return _cost_dict(raw)


# --- inputs -----------------------------------------------------------------------------------

def random_inputs(specs, seed: int, scale: float = 1.0, nonnegative: bool = False,
                  int_max: int | None = None) -> list[np.ndarray]:
    """Inputs for verification: N(0,1) floats (as in the paper), small integers, random booleans.
    `scale` multiplies the float (and complex) draws only: the same seed with another scale
    gives the same integers and booleans and rescaled floats (see `shlo_env.measure.verify`). With
    `nonnegative`, the same draws' magnitudes: floats |x| and integers from 0 up (a variance
    under a square root, a label used as an index), and with `int_max` the integers' magnitudes
    modulo `int_max + 1` (labels of a two-class head)."""
    return RandomDraws(specs, seed).inputs(scale, nonnegative, int_max)


class RandomDraws:
    """One seed's random draws, kept: `inputs` makes the set of `random_inputs(specs, seed,
    ...)` from them, bit for bit, without drawing again (a redrawn 45 MB set: 0.2 s a draw).
    Floats are kept at 32 bits for sets of 32 bits or less, else at 64: keep one only while
    redrawing its set."""

    def __init__(self, specs, seed: int):
        rng = np.random.default_rng(seed)
        self._draws: list[tuple[np.dtype, np.ndarray]] = []
        for s in specs:
            dtype, shape = np.dtype(s.dtype), tuple(s.shape)
            raw: np.ndarray
            if dtype == np.bool_:
                raw = rng.random(shape) < 0.5
            elif np.issubdtype(dtype, np.integer):
                info = np.iinfo(dtype)
                raw = rng.integers(max(info.min, -8), min(info.max, 8) + 1, size=shape)
            else:  # drawn at the width the set has (a float32 draw takes a third of a float64 one)
                width = np.float64 if dtype.itemsize > (8 if dtype.kind == "c" else 4) else np.float32
                raw = rng.standard_normal(shape, dtype=width)
                if dtype.kind == "c":
                    raw = raw + 1j * rng.standard_normal(shape, dtype=width)
            self._draws.append((dtype, raw))

    def inputs(self, scale: float = 1.0, nonnegative: bool = False, int_max: int | None = None
               ) -> list[np.ndarray]:
        """The set drawn as `random_inputs` documents (new arrays on every call)."""
        out = []
        for dtype, raw in self._draws:
            if dtype == np.bool_:
                out.append(np.array(raw))
            elif np.issubdtype(dtype, np.integer):
                ints = raw if not nonnegative else np.abs(raw) if int_max is None else np.abs(raw) % (int_max + 1)
                out.append(np.array(ints, dtype=dtype))
            elif np.issubdtype(dtype, np.complexfloating):
                out.append(np.array(scale * raw, dtype=dtype))
            else:
                x = np.abs(raw) if nonnegative else raw
                # 1.0 * x is x: skip the float64 product (np.array copies, 0-d stays an array)
                out.append(np.array(x if scale == 1.0 else scale * x, dtype=dtype))
        return out


_SPECIAL_FLOATS = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 0.5, -2.0, 3.0e38, 1.0e-30, 7.0])


def _special_pool(dtype) -> np.ndarray:
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return np.array(sorted({int(info.min), int(info.max), 0, 1, 2, -1 if info.min < 0 else 3}), dtype=dtype)
    with np.errstate(over="ignore"):
        return _SPECIAL_FLOATS.astype(dtype)


def special_inputs(specs, seed: int) -> list[list[np.ndarray]]:
    """Adversarial input sets for EXACT checks: every input filled with one special value
    (NaN, +-Inf, -0, extremes...) per set, plus one set mixing them with ordinary values."""
    rng = np.random.default_rng(seed)
    specs = list(specs)
    pools = [None if np.dtype(s.dtype) == np.bool_ else _special_pool(np.dtype(s.dtype)) for s in specs]
    base = random_inputs(specs, seed)
    sets = []
    for i in range(max((len(p) for p in pools if p is not None), default=0)):
        sets.append([b if p is None else np.full(tuple(s.shape), p[i % len(p)], dtype=s.dtype)
                     for s, p, b in zip(specs, pools, base)])
    mixed = []
    for s, p, b in zip(specs, pools, base):
        if p is None:
            mixed.append(b)
            continue
        picks = p[rng.integers(0, len(p), size=tuple(s.shape))]
        mixed.append(np.where(rng.random(tuple(s.shape)) < 0.5, picks, b).astype(s.dtype))
    sets.append(mixed)
    return sets


def input_sets(program: Program, num_random: int = 3, seed: int = 0) -> list[list[np.ndarray]]:
    """The program's example inputs (if any) followed by `num_random` seeded random sets: N(0,1)
    draws, or perturbations of the example inputs when `program.perturb_examples`."""
    sets = [list(program.example_args)] if program.example_args is not None else []
    return sets + [random_set(program, seed + i) for i in range(num_random)]


def random_set(program: Program, seed: int) -> list[np.ndarray]:
    """The random set of `seed` of `input_sets`."""
    if program.example_args is not None and getattr(program, "perturb_examples", False):
        return perturbed_inputs(program.example_args, seed)
    return random_inputs(program.in_specs, seed)


PERTURBATION = 0.01  # relative size of the perturbation of a user's example inputs


def perturbed_inputs(inputs: Sequence[np.ndarray], seed: int, scale: float = PERTURBATION) -> list[np.ndarray]:
    """`inputs` with each float value moved by a seeded relative N(0, scale) step (its sign and
    its zeros kept: a variance stays positive, a mask stays a mask); integers and booleans
    (indices, labels, counts) as they are."""
    rng = np.random.default_rng(seed)
    out = []
    for x in inputs:
        x = np.asarray(x)
        if np.issubdtype(x.dtype, np.floating) or x.dtype == ml_dtypes.bfloat16:
            wide = x.astype(np.float64)
            step = np.clip(rng.standard_normal(x.shape) * scale, -0.5, 0.5)
            out.append((wide * (1.0 + step)).astype(x.dtype))
        elif np.issubdtype(x.dtype, np.complexfloating):
            step = np.clip(rng.standard_normal(x.shape) * scale, -0.5, 0.5)
            out.append((x * (1.0 + step)).astype(x.dtype))
        else:
            out.append(x.copy())
    return out


# --- float64 reference ------------------------------------------------------------------------

# A float type name standing alone (`tensor<f32>`, `: f32`) or after a shape (`4x8xf32`).
_LOW_FLOATS = re.compile(r"(?<![\w])(bf16|f16|f32)(?!\w)|(?<=\dx)(bf16|f16|f32)(?!\w)")


# jax's CPU LAPACK kernels are named by their element type (lapack_spotrf_ffi for f32,
# lapack_dpotrf_ffi for f64; c and z for complex): a widened program calls the wide one.
_LAPACK_NARROW = re.compile(r"@lapack_([sc])(?=\w)")


def promote_to_f64(text: str) -> str:
    """The same program with every float type widened to f64: the reference for REASSOCIATE.
    Its LAPACK calls (a Cholesky factor, a triangular solve) call their f64 kernels."""
    wide = _LOW_FLOATS.sub("f64", text)
    return _LAPACK_NARROW.sub(lambda m: "@lapack_" + {"s": "d", "c": "z"}[m.group(1)], wide)


def perturb_inputs(inputs: Sequence[np.ndarray], ulps: float, seed: int = 0) -> list[np.ndarray]:
    """Float inputs moved by `ulps` ulps (of their own dtype) with random signs, widened to f64."""
    rng = np.random.default_rng(seed)
    out = []
    for x in inputs:
        x = np.asarray(x)
        if _is_low_float(x) or x.dtype in (np.float64, np.complex128):
            from shlo_env.measure.numerics import eps

            sign = rng.choice([-1.0, 1.0], size=x.shape)
            out.append(_widen(x) * (1.0 + ulps * eps(x.dtype) * sign))
        else:
            out.append(x)
    return out


def reference_outputs(program: Program, inputs: Sequence[np.ndarray],
                      perturb_ulps: float = 0.0) -> list[np.ndarray] | None:
    """Outputs of the f64-promoted program (on inputs moved by `perturb_ulps`, if given), or
    None if it does not compile (e.g. bitcasts between widths)."""
    try:
        exe = compile(promote_to_f64(program.text()))
    except CompileError:
        return None
    wide = widen_inputs(inputs, perturb_ulps)
    try:
        return execute(exe, wide)
    except Exception:  # noqa: BLE001
        return None


def widen_inputs(inputs: Sequence[np.ndarray], perturb_ulps: float = 0.0) -> list[np.ndarray]:
    """Inputs for the `promote_to_f64` program: float and complex inputs widened to 64 bits
    (and moved by `perturb_ulps` ulps when given)."""
    if perturb_ulps:
        return perturb_inputs(inputs, perturb_ulps)
    return [_widen(x) if _is_low_float(x) else x for x in inputs]


def _is_low_float(x) -> bool:
    """A float or complex dtype that `promote_to_f64` widens (complex<f32> -> complex<f64>)."""
    d = np.asarray(x).dtype
    return d in (np.float16, np.float32, np.dtype(ml_dtypes.bfloat16), np.complex64)


def _widen(x) -> np.ndarray:
    x = np.asarray(x)
    return x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)


def optimized_hlo(exe: Executable) -> str:
    """XLA's optimized HLO of a compiled program, canonicalized (no metadata or debug names):
    two programs with equal text compiled to the same executable."""
    return canonical_hlo("\n".join(_jax_compat.canonical_hlo_text(m) for m in exe.loaded.hlo_modules()))


def canonical_hlo(text: str) -> str:
    """Drops what names or fingerprints the source rather than the code: the module's name, the
    debug tables, and XLA GPU's `fingerprint_before_lhs` (a hash of the module with its metadata,
    so equal executables from differently located sources would differ)."""
    text = re.sub(r"\n(FileNames|FunctionNames|FileLocations|StackFrames)\n(?:[^\n]+\n)*", "\n", text)
    text = re.sub(r'fingerprint_before_lhs="[0-9a-fA-F]*"', 'fingerprint_before_lhs=""', text)
    return re.sub(r"^HloModule [^\s,]+", "HloModule m", text, flags=re.M)
