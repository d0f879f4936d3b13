#!/usr/bin/env bash
# The GPU path in one call (at most ~8 minutes): run on a machine with a CUDA GPU and jax's CUDA
# plugin installed, from the repository root. Never part of CI.
#   bash benchmarks/gpu_check.sh [OUT_DIR]
# 1. the tests marked `gpu` (tests/test_gpu.py) and the runtime/optimize tests on the GPU;
# 2. the quick suite (`shlo-env bench`) at a small budget;
# 3. a zoo subset on the GPU with the GPU's XLA options offered to the search.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-results-gpu}}"
mkdir -p "$out"
python - <<'PY' || { echo "no GPU backend: jax.default_backend() is not gpu" >&2; exit 2; }
import jax, sys
print("jax", jax.__version__, "backend", jax.default_backend(), jax.devices())
sys.exit(0 if jax.default_backend() == "gpu" else 1)
PY
python -c "import shlo_env" 2>/dev/null || python -m pip install -q --no-deps -e . || exit 2
status=0
step() { echo "+ $*"; "$@" || status=1; }
step timeout 150 python -m pytest -q -x -m gpu tests/test_gpu.py
step timeout 120 python -m pytest -q -x tests/test_runtime.py tests/test_optimize.py -k "not slow"
step timeout 150 shlo-env bench --budget 4 --limit 8 --out "$out/quick" --db "$out/gpu.sqlite" --no-plot --no-progress
if python -c "import shlo_env.zoo" 2>/dev/null; then
  step timeout 120 shlo-env bench --dataset zoo --limit 4 --budget 20 --xla-options --out "$out/zoo" \
      --db "$out/gpu.sqlite" --no-plot --no-progress
fi
exit $status
