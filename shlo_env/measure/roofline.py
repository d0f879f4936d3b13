"""The roofline floor of a program: the time it cannot beat on this device.

    floor_s = flops / peak_flops + bytes_accessed / peak_bandwidth

with flops and bytes from XLA's `cost_analysis` of the compiled program (the same numbers the
`cost-model` strategy ranks by; the sum of the two terms, not their maximum, as in that model).
`bench` reports the returned program's measured time against this floor (T / floor, >= 1 when
the peak rates are right). Note that XLA's cost analysis counts a `while` body once, not once
per iteration, so for loops the floor is too low and T / floor too high.

Peak rates:

- GPUs: a table of known devices (`GPU_PEAKS`, from the vendors' data sheets), matched on
  `device.device_kind`. The flops peak is the dense TF32 tensor-core rate where the device has
  one (XLA runs float32 dots on tensor cores in TF32 by default on those devices), else FP32.
- CPUs: measured (`measure_cpu_peaks`): the best rate over a few repetitions of 256 to 2048 square
  float32 matmul (flops) and of a sum and an elementwise op over a 256 MiB array (bytes: the
  faster of the two; writing a fresh 256 MiB output is much slower on CPU), each counted
  with XLA's own cost analysis, so the floor and the peaks use one definition of "flops" and
  "bytes". The result is stored in the results database per environment (measured once).
- Either can be set by hand: `--peak-flops` / `--peak-bandwidth`, or the environment variables
  `SHLO_ENV_PEAK_FLOPS` / `SHLO_ENV_PEAK_BANDWIDTH` (flops/s, bytes/s).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping

# (substring of device_kind, peak flops/s, peak bytes/s); the first match wins (specific first).
GPU_PEAKS: tuple[tuple[str, float, float], ...] = (
    ("H200", 494.7e12, 4.8e12),          # H200 SXM: TF32 dense 494.7 TFLOP/s, HBM3e 4.8 TB/s
    ("H100 PCIe", 378.0e12, 2.0e12),     # H100 PCIe: TF32 dense 378 TFLOP/s, 2.0 TB/s
    ("H100 NVL", 417.5e12, 3.9e12),      # H100 NVL: TF32 dense 417.5 TFLOP/s, 3.9 TB/s
    ("H100", 494.7e12, 3.35e12),         # H100 SXM: TF32 dense 494.7 TFLOP/s, HBM3 3.35 TB/s
    ("GH200", 494.7e12, 4.0e12),         # GH200: TF32 dense 494.7 TFLOP/s, 4.0 TB/s (HBM3)
    ("A100-SXM4-80GB", 156.0e12, 2.039e12),
    ("A100-PCIE-80GB", 156.0e12, 1.935e12),
    ("A100", 156.0e12, 1.555e12),        # A100 40GB: TF32 dense 156 TFLOP/s, 1.555 TB/s
    ("L40S", 183.0e12, 0.864e12),
    ("L4", 60.0e12, 0.300e12),
    ("A10G", 62.5e12, 0.600e12),
    ("A10", 62.5e12, 0.600e12),
    ("RTX 4090", 82.6e12, 1.008e12),     # FP32 (TF32 dense on GeForce is the same order)
    ("V100", 15.7e12, 0.900e12),         # FP32 (no TF32 on Volta)
    ("T4", 8.1e12, 0.320e12),            # FP32
)

ENV_FLOPS = "SHLO_ENV_PEAK_FLOPS"
ENV_BANDWIDTH = "SHLO_ENV_PEAK_BANDWIDTH"


def known_gpu_peaks(device_kind: str) -> tuple[float, float] | None:
    for key, flops, bw in GPU_PEAKS:
        if key.lower() in device_kind.lower():
            return flops, bw
    return None


def measure_cpu_peaks(repeats: int = 5, sizes: tuple[int, ...] = (256, 512, 2048),
                      mib: int = 256) -> tuple[float, float]:
    """(flops/s, bytes/s) measured on the default device with XLA-compiled kernels: the best
    matmul rate over several sizes (one size alone can understate the peak several-fold on a
    shared machine: 10 GFLOP/s at 2048^2 against 100 at 256^2 under load 13)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from shlo_env.execute import runtime

    def best_rate(fn, *args) -> tuple[dict, float]:
        compiled = jax.jit(fn).lower(*args).compile()
        cost = runtime._cost_dict(compiled.cost_analysis())  # noqa: SLF001 - one cost definition
        jax.block_until_ready(compiled(*args))
        best = math.inf
        for _ in range(repeats):
            t = time.perf_counter()
            jax.block_until_ready(compiled(*args))
            best = min(best, time.perf_counter() - t)
        return cost, best

    rng = np.random.default_rng(0)
    flops = 0.0
    for n in sizes:
        a = jnp.asarray(rng.standard_normal((n, n), dtype=np.float32))
        b = jnp.asarray(rng.standard_normal((n, n), dtype=np.float32))
        cost, t = best_rate(lambda x, y: x @ y, a, b)
        flops = max(flops, (cost["flops"] or 2.0 * n ** 3) / t)
    x = jnp.asarray(rng.standard_normal(mib * 2 ** 20 // 4, dtype=np.float32))
    bandwidth = 0.0
    for fn, default_bytes in ((jnp.sum, x.nbytes), (lambda v: v * 2.0 + 1.0, 2.0 * x.nbytes)):
        cost, t = best_rate(fn, x)
        bandwidth = max(bandwidth, (cost["bytes"] or default_bytes) / t)
    return flops, bandwidth


def peak_rates(platform: str, device_kind: str, *, flops: float | None = None,
               bandwidth: float | None = None, stored: tuple | None = None,
               measure: bool = True) -> tuple[float | None, float | None, str]:
    """(peak flops/s, peak bytes/s, where they came from) for the device at hand.

    Order: explicit arguments, then the environment variables, then `stored` (a previous
    measurement: (flops, bandwidth, source)), then the GPU table, then a CPU measurement.
    (None, None, reason) when unknown (e.g. an unlisted GPU)."""
    flops = flops or _env_float(ENV_FLOPS)
    bandwidth = bandwidth or _env_float(ENV_BANDWIDTH)
    if flops and bandwidth:
        return flops, bandwidth, "configured"
    if stored and stored[0] and stored[1]:
        return flops or stored[0], bandwidth or stored[1], stored[2] or "stored"
    if platform != "cpu":
        known = known_gpu_peaks(device_kind)
        if known is None:
            return None, None, f"unknown device {device_kind!r} (set --peak-flops/--peak-bandwidth)"
        return flops or known[0], bandwidth or known[1], f"data sheet ({device_kind})"
    if not measure:
        return None, None, "not measured"
    f, b = measure_cpu_peaks()
    return flops or f, bandwidth or b, "measured (best of 256^2 to 2048^2 f32 matmuls; 256 MiB sum/elementwise)"


def cost_seconds(cost: Mapping, flops_per_s: float, bytes_per_s: float,
                 transcendentals_per_s: float | None = None) -> float | None:
    """The one cost-to-seconds model: flops / flops_per_s + bytes / bytes_per_s (plus
    transcendentals / transcendentals_per_s when that rate is given), from XLA's cost analysis.

    None when the cost has no estimate: it carries an "error", or its flops or bytes are
    missing, None or NaN. `runtime` already counts an entry XLA leaves out (XLA omits zero
    counts) as 0, so a missing or NaN entry here means there was no cost analysis at all (a
    rejected program, or a backend without one), never "zero"; guessing 0 for it would rank a
    broken candidate as free. Callers choose what "no estimate" means for them: the cost-model
    search ranks it last (inf), the roofline column leaves it empty, the gym reward fails the step.
    A negative count (none is expected) counts as 0."""
    flops, nbytes = _count(cost, "flops"), _count(cost, "bytes")
    if cost.get("error") or flops is None or nbytes is None:
        return None
    seconds = flops / flops_per_s + nbytes / bytes_per_s
    if transcendentals_per_s:
        seconds += (_count(cost, "transcendentals") or 0.0) / transcendentals_per_s
    return seconds


def _count(cost: Mapping, key: str) -> float | None:
    """One count of a cost analysis (negative counts as 0); None when it is missing or NaN."""
    value = cost.get(key)
    if value is None or math.isnan(float(value)):
        return None
    return max(float(value), 0.0)


def floor_s(cost: dict, flops: float | None, bandwidth: float | None) -> float | None:
    """The roofline floor of a cost (see the module docstring); None without peaks or a cost."""
    if not flops or not bandwidth or not cost:
        return None
    return cost_seconds(cost, flops, bandwidth)


def _env_float(name: str) -> float | None:
    v = os.environ.get(name)
    if not v:
        return None
    try:
        return float(v)
    except ValueError:
        raise ValueError(f"{name}={v!r} is not a number (flops/s or bytes/s)") from None


__all__ = ["GPU_PEAKS", "cost_seconds", "floor_s", "known_gpu_peaks", "measure_cpu_peaks", "peak_rates"]
