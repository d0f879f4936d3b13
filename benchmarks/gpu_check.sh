#!/usr/bin/env bash
# The GPU path in one call (about 5 minutes on an H200): run on a machine with a CUDA GPU and jax's CUDA
# plugin installed, from the repository root. Never part of CI.
#   bash benchmarks/gpu_check.sh [OUT_DIR]
# 0. a smoke test: the package imports, and one program compiles, runs and times on the GPU;
# 1. the tests marked `gpu` (tests/test_gpu.py) and the runtime/optimize tests on the GPU;
# 2. the quick suite (`shlo-env bench`) at a small budget;
# 3. a zoo subset on the GPU with the GPU's XLA options offered to the search.
# Needs no network: when shlo_env is not installed it runs from this checkout (PYTHONPATH).
# Each step has its own time limit, and a failed step does not stop the later ones.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-results-gpu}}"
mkdir -p "$out"
py="${PYTHON:-$(command -v python3 || command -v python)}"
# The search's worker processes share the GPU with this one: no process may take 75 % of it.
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
"$py" - <<'PY' || { echo "no GPU backend: jax.default_backend() is not gpu" >&2; exit 2; }
import jax, sys
print("jax", jax.__version__, "backend", jax.default_backend(), jax.devices())
sys.exit(0 if jax.default_backend() == "gpu" else 1)
PY
"$py" -c "import shlo_env" 2>/dev/null || export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
status=0
step() { echo "+ $*"; local t0=$SECONDS; "$@" || { echo "! step failed (rc $?): $*"; status=1; }; echo "  ($((SECONDS - t0)) s)"; }
shlo=("$py" -m shlo_env)
step timeout 60 "$py" - <<'PY'
import time, numpy as np, jax.numpy as jnp
from shlo_env import runtime
from shlo_env.ir.program import lower
t0 = time.perf_counter()
x = np.ones((512, 512), np.float32)
exe = runtime.compile(lower(lambda a: jnp.tanh(a @ a), x))
print("platform", runtime.platform(), "time", runtime.measure(exe, runtime.to_device((x,))).full,
      "s; smoke in", round(time.perf_counter() - t0, 1), "s")
PY
step timeout 120 "$py" -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py
step timeout 110 "$py" -m pytest -q -p no:cacheprovider tests/test_runtime.py tests/test_optimize.py -k "not slow"
# 200 s: the quick noise profile (about 170 self-timings, a minute on an H200) comes first
step timeout 200 "${shlo[@]}" bench --budget 4 --limit 8 --out "$out/quick" --db "$out/gpu.sqlite" --no-plot --no-progress
# budget 60: at 20 s the two 4k-op train steps of the subset spend it all on the original
step timeout 300 "${shlo[@]}" bench --dataset zoo --limit 4 --budget 60 --xla-options --out "$out/zoo" \
    --db "$out/gpu.sqlite" --no-plot --no-progress
exit $status
