"""Every use of a private jax/jaxlib API lives here, each with a fallback per version.

jax's public surface does not yet expose an MLIR context with the StableHLO dialects registered,
XLA's compile options as jax.jit builds them, or StableHLO's portable serialization. When a jax
release moves one of these, only this file changes.
"""

from __future__ import annotations

import functools
import os
from collections.abc import MutableMapping


def quiet_xla_logs(env: MutableMapping[str, str] = os.environ) -> None:
    """Hide XLA's C++ INFO lines (`pjrt_client.cc] PjRt-IFRT device count ...`) unless the user
    chose a level. XLA reads TF_CPP_MIN_LOG_LEVEL (the only log variable jaxlib reads) once,
    when jaxlib's first native library loads: shlo_env loads `jaxlib.mlir` before jax, whose own
    default of 1 then comes too late. Applied here at import, before jaxlib, and so inherited
    by every child process (workers, pool processes, Ray actors)."""
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")


quiet_xla_logs()  # shlo_env/__init__ imports this module first


def share_device(env: MutableMapping[str, str]) -> None:
    """For a process of ours beside the user's on one accelerator (a worker, a sweep's pool
    process): no up-front grab of 75 % of its memory, unless the user chose."""
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
from jaxlib.mlir import ir  # noqa: E402


def make_ir_context() -> ir.Context:
    """A fresh MLIR context with stablehlo, chlo, func and mhlo registered."""
    try:
        from jax._src.interpreters import mlir as jax_mlir

        ctx = jax_mlir.make_ir_context()
    except (ImportError, AttributeError):  # pragma: no cover - future jax
        from jaxlib.mlir.dialects import stablehlo, chlo

        ctx = ir.Context()
        stablehlo.register_dialect(ctx)
        chlo.register_dialect(ctx)
    # Our alternatives op is an unregistered operation.
    ctx.allow_unregistered_dialects = True
    return ctx


def backend():
    """The PJRT client of jax's default backend (GPU when present, CPU otherwise)."""
    try:
        import jax.extend.backend as jeb

        return jeb.get_backend()
    except (ImportError, AttributeError):  # pragma: no cover - older jax
        from jax._src import xla_bridge

        return xla_bridge.get_backend()


def xla_client():
    try:
        from jax._src.lib import xla_client as xc
    except ImportError:  # pragma: no cover
        from jaxlib import xla_client as xc
    return xc


def compile_options(disabled_passes: tuple[str, ...] = (), overrides: dict | None = None):
    """XLA CompileOptions built the way jax.jit builds them, so timings compare fairly.
    `overrides` are XLA debug options by name (what jax.jit's `compiler_options` takes)."""
    xc = xla_client()
    try:
        from jax._src import compiler

        opts = compiler.get_compile_options(num_replicas=1, num_partitions=1,
                                            env_options_overrides=dict(overrides) if overrides else None)
    except (ImportError, AttributeError, TypeError):  # pragma: no cover - API drift
        opts = xc.CompileOptions()
        if overrides:
            opts.env_option_overrides = list(overrides.items())
    if disabled_passes:
        debug = opts.executable_build_options.debug_options
        # Assigning replaces what is there, so merge with what is already disabled. jaxlib 0.10
        # exposes the repeated field as one comma-separated string; older ones as a list.
        current = debug.xla_disable_hlo_passes
        if isinstance(current, str):
            names = [p for p in current.split(",") if p] + [p for p in disabled_passes if p not in current.split(",")]
            debug.xla_disable_hlo_passes = ",".join(names)
        else:  # pragma: no cover - jaxlib versions with a list-valued field
            debug.xla_disable_hlo_passes = list(current) + [p for p in disabled_passes if p not in current]
    return opts


def device_list(devices):
    return xla_client().DeviceList(tuple(devices))


def serialize_portable(module_text: str) -> bytes:
    """StableHLO portable artifact (VHLO bytecode), the form `jax.export` stores."""
    from jaxlib.mlir._mlir_libs import _stablehlo

    version = _stablehlo.get_current_version()
    return _stablehlo.serialize_portable_artifact_str(module_text, version)


def deserialize_portable(data: bytes) -> bytes:
    """The StableHLO module of a portable artifact, as MLIR bytecode (what jaxlib returns,
    despite the function's name: decoding it as text fails)."""
    from jaxlib.mlir._mlir_libs import _stablehlo

    return _stablehlo.deserialize_portable_artifact_str(data)


def eval_module(module: ir.Module, inputs: list) -> list:
    """The StableHLO reference interpreter: an oracle independent of XLA."""
    from jaxlib.mlir._mlir_libs import _stablehlo

    return _stablehlo.eval_module(module, inputs)


@functools.cache
def init_lapack() -> None:
    """jaxlib's LAPACK kernels must be registered before compiling modules that call them."""
    try:
        from jax._src.lib import lapack

        lapack._lapack.initialize()
    except Exception:  # noqa: BLE001 - absent or already initialized on some versions
        pass


def register_stablehlo_passes() -> None:
    try:
        from jaxlib.mlir._mlir_libs import _stablehlo

        _stablehlo.register_stablehlo_passes()
    except Exception:  # noqa: BLE001
        pass


def jax_versions() -> dict[str, str]:
    import jaxlib

    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__}


def enable_x64():
    """Context in which device_put keeps 64-bit dtypes (our inputs already have exact dtypes)."""
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(True)
    from jax.experimental import enable_x64 as ctx  # pragma: no cover - older jax

    return ctx()


def canonical_hlo_text(hlo_module) -> str:
    """HLO text without metadata and with canonical names: equal text, equal executable.

    Backend configs are kept: on CPU they carry the parallel partitioning and library-fusion
    settings (`outer_dimension_partitions`, `fusion_config`) that make two executables with
    the same instructions run differently."""
    try:
        from jaxlib import _hlo  # type: ignore[attr-defined]  # not in jaxlib's stubs

        options = _hlo.HloPrintOptions.fingerprint()
        try:
            options.print_backend_config = True
        except AttributeError:  # pragma: no cover - bindings without the setter
            pass
        return hlo_module.to_string(options)
    except (ImportError, AttributeError, TypeError):  # pragma: no cover - other jaxlib layouts
        return hlo_module.to_string()


def hlo_cost_analysis(text: str) -> dict:
    """XLA's HloCostAnalysis of StableHLO as written (before XLA's optimizations), on the CPU
    client, without compiling: what `Lowered.cost_analysis()` reports. Raw dict of XLA's keys."""
    import jax.extend.backend as jeb

    try:
        from jax._src.lib import _jax
    except ImportError:  # pragma: no cover - older jaxlib
        from jax._src.lib import xla_extension as _jax  # type: ignore[attr-defined]
    computation = _jax.mlir.mlir_module_to_xla_computation(text, use_tuple_args=False, return_tuple=False)
    return _jax.hlo_module_cost_analysis(jeb.get_backend("cpu"), computation.as_hlo_module())


def jit_call_arguments() -> tuple[tuple, dict] | None:
    """The (args, kwargs) a `jax.jit` function was called with, read from inside the trace that
    call started: jax's Python cache-miss handler (`pjit._cpp_pjit`'s `cache_miss`, jax 0.4.30
    to 0.10) holds them. None when no such frame is found (another jax, a `.lower()` trace)."""
    import sys

    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "cache_miss" and code.co_filename.endswith("pjit.py"):
            args, kwargs = frame.f_locals.get("args"), frame.f_locals.get("kwargs")
            return (args, kwargs) if isinstance(args, tuple) and isinstance(kwargs, dict) else None
        frame = frame.f_back  # type: ignore[assignment]
    return None


def compile_swapped(lowered, module: bytes | str, compiler_options: dict | None = None,
                    host_callbacks=None):
    """jax's `Compiled` of `lowered` (a `jax.jit(...).lower(...)`) with its StableHLO module
    replaced by `module` (text or bytecode; same signature), compiled in this process with the
    lowering's own host callbacks (the Python functions of `jax.debug.print`,
    `jax.pure_callback`, ...: the module refers to them by index) or with `host_callbacks`,
    and with its ordered effects (runtime tokens), donation and pytrees. This is what
    `Lowered.compile()` does (jax 0.10: `pxla.MeshComputation`), on a shallow copy whose module
    and callbacks are ours."""
    import copy

    lowering = lowered._lowering
    swapped = copy.copy(lowering)
    with lowering._hlo.context:
        swapped._hlo = ir.Module.parse(module)
    swapped._executable = None
    if host_callbacks is not None:
        if len(host_callbacks) != len(lowering.compile_args.get("host_callbacks", ())):
            raise ValueError("host_callbacks must stand in for each of the lowering's callbacks")
        swapped.compile_args = {**lowering.compile_args, "host_callbacks": list(host_callbacks)}
    replaced = copy.copy(lowered)
    replaced._lowering = swapped
    return replaced.compile(compiler_options)


def lowered_host_callbacks(lowered) -> list:
    """The Python functions a lowering's host-callback custom calls refer to by index."""
    return list(lowered._lowering.compile_args.get("host_callbacks", ()))
