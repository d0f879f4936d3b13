"""XLA compile options as macro actions, beside the pass toggles of `shlo_env.search.passes`.

An option action is a token `name=value` (e.g. `xla_cpu_use_onednn=true`). It travels in the
same tuple as disabled pass names (a search state's `passes`, the evaluator's cache key, the
worker's compile arguments), so every search strategy can toggle it like a pass: the token is
either set or not. `split` separates the two kinds where a compile is built; option tokens
become `CompileOptions.env_option_overrides` (jax.jit's `compiler_options`), which jaxlib 0.10.2
accepts per compile for every CPU option listed here.

These options change code generation and the runtime (library calls, threading, vector width,
scheduling), not the HLO: the optimized HLO text is usually unchanged, so only timing shows
their effect. Options that can reorder float math (threading, library kernels, vector width)
claim the REASSOCIATE tier and are verified as such; fast math is APPROX and only offered when
asked for (`resolve(..., approx=True)`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from shlo_env.numerics import Numerics

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


def token(name: str, value) -> str:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return f"{name}={text}"


def is_option(action: str) -> bool:
    return "=" in action


def parse_value(text: str):
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        return text


def split(actions: Iterable[str]) -> tuple[tuple[str, ...], dict]:
    """(disabled pass names, {option: value}) of a state's actions."""
    passes, options = [], {}
    for a in actions or ():
        if is_option(a):
            name, _, value = a.partition("=")
            options[name] = parse_value(value)
        elif a:
            passes.append(a)
    return tuple(passes), options


def option_name(action: str) -> str | None:
    return action.partition("=")[0] if is_option(action) else None


def _table(platform: str, approx: bool):
    if platform == "cpu":
        return CPU_OPTIONS + (CPU_APPROX_OPTIONS if approx else ())
    return GPU_OPTIONS + (GPU_APPROX_OPTIONS if approx else ())


def candidate_options(platform: str | None = None, approx: bool = False) -> tuple[str, ...]:
    """Every option token a search may set on `platform` (default: jax's default backend)."""
    if platform is None:
        from shlo_env import _jax_compat  # not runtime: runtime reads this module

        platform = _jax_compat.backend().platform
    return tuple(token(name, v) for name, values, _, _ in _table(platform, approx) for v in values)


def resolve(options: bool | str | Sequence[str] | None, platform: str | None = None) -> tuple[str, ...]:
    """The option actions asked for: False/None -> none, True/"auto" -> the platform's
    value-preserving candidates, "approx" -> those plus fast math, a sequence -> those tokens."""
    if options is None or options is False:
        return ()
    if options is True or options == "auto":
        return candidate_options(platform)
    if options == "approx":
        return candidate_options(platform, approx=True)
    tokens = [options] if isinstance(options, str) else list(options)
    bad = [t for t in tokens if not is_option(t)]
    if bad:
        raise ValueError(f"XLA option actions are NAME=VALUE tokens, got {bad}")
    return tuple(tokens)


def numerics(actions: Iterable[str]) -> Numerics:
    """The loosest tier among the option actions (an unknown option claims REASSOCIATE)."""
    tier = Numerics.EXACT
    tiers = {name: t for name, _, _, t in ALL_OPTIONS}
    for a in actions or ():
        name = option_name(a)
        if name is not None:
            tier = max(tier, tiers.get(name, Numerics.REASSOCIATE))
    return tier


def describe(action: str) -> str:
    name = option_name(action)
    return next((what for n, _, what, _ in ALL_OPTIONS if n == name), "")


def compiler_options(actions: Iterable[str]) -> dict:
    """jax.jit's `compiler_options` for a state's actions (passes and options together)."""
    passes, options = split(actions)
    if passes:
        options["xla_disable_hlo_passes"] = ",".join(passes)
    return options
