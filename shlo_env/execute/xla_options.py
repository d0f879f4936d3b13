"""XLA actions, typed: `DisablePass(name)` and `SetOption(name, value)`; the compile options
offered as macro actions beside the pass toggles of `shlo_env.search.passes`.

A search state carries a sorted tuple of typed actions (`State.actions`, `Evaluation.actions`,
`SearchSummary.actions`, the cache entry). Their text form, a *token*, is what crosses process
and file boundaries (the worker's compile arguments, the cache key, the results database): a
pass name disables that pass, `name=value` (e.g. `xla_cpu_use_onednn=true`) sets an option.
`parse` reads a token back into its action; `action.token` writes it. `split` separates the two
kinds where a compile is built; option tokens become `CompileOptions.env_option_overrides`
(jax.jit's `compiler_options`), which jaxlib 0.10.2 accepts per compile for every CPU option
listed here.

These options change code generation and the runtime (library calls, threading, vector width,
scheduling), not the HLO: the optimized HLO text is usually unchanged, so only timing shows
their effect. Options that can reorder float math (threading, library kernels, vector width)
claim the REASSOCIATE tier and are verified as such; fast math is APPROX and only offered when
asked for (`resolve(..., approx=True)`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Union

from shlo_env.measure.numerics import Numerics


@dataclasses.dataclass(frozen=True)
class DisablePass:
    """Compile without the XLA pass `name` (`xla_disable_hlo_passes`)."""

    name: str

    def __post_init__(self):
        if not self.name or "=" in self.name or "," in self.name:
            raise ValueError(f"not an XLA pass name: {self.name!r}")

    @property
    def token(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.token


@dataclasses.dataclass(frozen=True)
class SetOption:
    """Compile with the XLA option `name` set to `value` (`env_option_overrides`)."""

    name: str
    value: bool | int | str

    def __post_init__(self):
        if not self.name or "=" in self.name or "," in self.name:
            raise ValueError(f"not an XLA option name: {self.name!r}")

    @property
    def token(self) -> str:
        return token(self.name, self.value)

    def __str__(self) -> str:
        return self.token


Action = Union[DisablePass, SetOption]


def parse(action: "str | Action") -> Action:
    """The typed action of a token (`name=value`: SetOption, else DisablePass); an action is
    returned as it is."""
    if isinstance(action, (DisablePass, SetOption)):
        return action
    if not isinstance(action, str):
        raise TypeError(f"an XLA action is a DisablePass, a SetOption or a token string, got {action!r}")
    text = action.strip()
    if "=" in text:
        name, _, value = text.partition("=")
        return SetOption(name, parse_value(value))
    return DisablePass(text)


def normalize(actions: "Iterable[str | Action] | str | None") -> tuple[Action, ...]:
    """A canonical tuple of typed actions: sorted by token, unique, no empty tokens, one value
    per option (the first in token order when two values of one option meet). A string is a
    comma-separated list of tokens."""
    if not actions:
        return ()
    if isinstance(actions, str):
        actions = actions.split(",")
    typed = {parse(a) for a in actions if not (isinstance(a, str) and not a.strip())}
    out: list[Action] = []
    options: set[str] = set()
    for a in sorted(typed, key=lambda a: a.token):
        if isinstance(a, SetOption):
            if a.name in options:
                continue
            options.add(a.name)
        out.append(a)
    return tuple(out)


def tokens(actions: "Iterable[str | Action] | None") -> tuple[str, ...]:
    """The token of each action, in order (what the worker and the files store)."""
    return tuple(parse(a).token for a in actions or ())

# (name, values offered, what it does, tier). The values are the alternatives to XLA's default
# as far as it is known; a value equal to the default is harmless (the same executable).
CPU_OPTIONS: tuple[tuple[str, tuple, str, Numerics], ...] = (
    ("xla_cpu_use_xnnpack", (True, False), "route dots/convolutions to XNNPACK kernels", Numerics.REASSOCIATE),
    ("xla_cpu_use_onednn", (True,), "route dots/convolutions to oneDNN kernels", Numerics.REASSOCIATE),
    ("xla_cpu_experimental_xnn_graph_fusion_mode",
     ("XNN_GRAPH_FUSION_MODE_GREEDY", "XNN_GRAPH_FUSION_MODE_GREEDY_SLINKY", "XNN_GRAPH_FUSION_MODE_BYPASS_COST_MODEL"),
     "fuse op graphs into XNNPACK subgraphs", Numerics.REASSOCIATE),
    ("xla_cpu_multi_thread_eigen", (False,), "single-threaded Eigen kernels", Numerics.REASSOCIATE),
    ("xla_cpu_enable_concurrency_optimized_scheduler", (True, False),
     "schedule for concurrency instead of memory", Numerics.EXACT),
    ("xla_cpu_prefer_vector_width", (128, 512), "preferred SIMD width in bits", Numerics.REASSOCIATE),
    ("xla_cpu_parallel_codegen_split_count", (1, 8), "LLVM modules compiled in parallel", Numerics.EXACT),
)
CPU_APPROX_OPTIONS = (
    ("xla_cpu_enable_fast_math", (True,), "LLVM fast math (changes results)", Numerics.APPROX),
)

# The GPU counterparts, used when the backend is a GPU (names from XLA's debug options).
GPU_OPTIONS: tuple[tuple[str, tuple, str, Numerics], ...] = (
    ("xla_gpu_autotune_level", (0, 2, 4), "GEMM/conv autotuning effort (0 = off)", Numerics.REASSOCIATE),
    ("xla_gpu_enable_triton_gemm", (False, True), "emit GEMMs with Triton instead of cuBLAS", Numerics.REASSOCIATE),
    ("xla_gpu_enable_latency_hiding_scheduler", (True,), "latency-hiding instruction scheduler", Numerics.EXACT),
    ("xla_gpu_enable_command_buffer", ("",), "CUDA graphs off (empty command-buffer list)", Numerics.EXACT),
)
GPU_APPROX_OPTIONS = (
    ("xla_gpu_enable_fast_min_max", (True,), "min/max ignore NaN semantics", Numerics.APPROX),
)

ALL_OPTIONS = CPU_OPTIONS + CPU_APPROX_OPTIONS + GPU_OPTIONS + GPU_APPROX_OPTIONS

#: Screened by default (`SearchOptions.xla_options="default"`), per platform: the options that
#: the paired acceptance test took on zoo programs of one kind. Single-threaded Eigen: small
#: transformer inference (0.836 and 0.964 of the time on a 2-core CPU; 1.00 +- 0.03 on the other
#: 14 zoo programs, docs/experiments/2026-11-26-zoo-oracle-quiet.md). No GPU option is measured yet.
DEFAULT_SCREEN: dict[str, tuple[str, ...]] = {"cpu": ("xla_cpu_multi_thread_eigen=false",)}
#: ... and on programs of fewer ops than this, the kind where it paid. On the zoo's programs of
#: 1,000 ops or more (train steps, 1,002-4,910 ops) four bench runs screened it 52 times, at
#: 0.6-8.5 s each (a whole-program compile), and the two it chose were no gain (final 0.991 and
#: 1.047); docs/experiments/2026-11-27-zoo-fifth-run.md.
DEFAULT_SCREEN_MAX_OPS = 1000


def token(name: str, value) -> str:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return f"{name}={text}"


def is_option(action: "str | Action") -> bool:
    return isinstance(action, SetOption) or (isinstance(action, str) and "=" in action)


def parse_value(text: str):
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        return text


def split(actions: "Iterable[str | Action]") -> tuple[tuple[str, ...], dict]:
    """(disabled pass names, {option: value}) of a state's actions (typed or tokens)."""
    passes, options = [], {}
    for a in actions or ():
        if isinstance(a, str) and not a:
            continue
        typed = parse(a)
        if isinstance(typed, SetOption):
            options[typed.name] = typed.value
        else:
            passes.append(typed.name)
    return tuple(passes), options


def option_name(action: "str | Action") -> str | None:
    typed = parse(action)
    return typed.name if isinstance(typed, SetOption) else None


def _table(platform: str, approx: bool):
    if platform == "cpu":
        return CPU_OPTIONS + (CPU_APPROX_OPTIONS if approx else ())
    return GPU_OPTIONS + (GPU_APPROX_OPTIONS if approx else ())


def candidate_options(platform: str | None = None, approx: bool = False) -> tuple[str, ...]:
    """Every option token a search may set on `platform` (default: jax's default backend)."""
    return tuple(token(name, v) for name, values, _, _ in _table(_platform(platform), approx) for v in values)


def _platform(platform: str | None) -> str:
    if platform is not None:
        return platform
    from shlo_env import _jax_compat  # not runtime: runtime reads this module

    return _jax_compat.backend().platform


def resolve(options: bool | str | Sequence[str] | None, platform: str | None = None,
            ops: int | None = None) -> tuple[str, ...]:
    """The option actions asked for: False/None/"none" -> none, "default" -> the platform's
    `DEFAULT_SCREEN` (none for a program of `ops` >= `DEFAULT_SCREEN_MAX_OPS`), True/"auto" ->
    the platform's value-preserving candidates, "approx" -> those plus fast math, a sequence ->
    those tokens."""
    if options is None or options is False or options == "none":
        return ()
    if options == "default":
        if ops is not None and ops >= DEFAULT_SCREEN_MAX_OPS:
            return ()
        return DEFAULT_SCREEN.get(_platform(platform), ())
    if options is True or options == "auto":
        return candidate_options(platform)
    if options == "approx":
        return candidate_options(platform, approx=True)
    given = [options] if isinstance(options, str) else list(options)
    bad = [t for t in given if not is_option(t)]
    if bad:
        raise ValueError(f"XLA option actions are NAME=VALUE tokens, got {bad}")
    return tuple(given)


def numerics(actions: "Iterable[str | Action]") -> Numerics:
    """The loosest tier among the option actions (an unknown option claims REASSOCIATE)."""
    tier = Numerics.EXACT
    tiers = {name: t for name, _, _, t in ALL_OPTIONS}
    for a in actions or ():
        name = option_name(a)
        if name is not None:
            tier = max(tier, tiers.get(name, Numerics.REASSOCIATE))
    return tier


def describe(action: "str | Action") -> str:
    name = option_name(action)
    return next((what for n, _, what, _ in ALL_OPTIONS if n == name), "")


def compiler_options(actions: "Iterable[str | Action]") -> dict:
    """jax.jit's `compiler_options` for a state's actions (passes and options together)."""
    passes, options = split(actions)
    if passes:
        options["xla_disable_hlo_passes"] = ",".join(passes)
    return options
