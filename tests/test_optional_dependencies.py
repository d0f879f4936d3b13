"""shlo_env imports and optimizes without hypothesis or gymnasium; `import shlo_env` registers
the Gymnasium environment without importing gymnasium."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_without(tmp_path, blocked: list[str], code: str) -> dict:
    """Run `code` in a fresh process (and its worker processes) where importing any of
    `blocked` fails as if the package were not installed; returns the JSON it prints last."""
    shim = tmp_path / "blocked"
    shim.mkdir(exist_ok=True)
    for name in blocked:
        (shim / f"{name}.py").write_text(f"raise ImportError('{name} is blocked for this test')\n")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="1", SHLO_ENV_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(shim), str(ROOT)]))
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_optimize_and_jit_work_without_hypothesis(tmp_path):
    res = run_without(tmp_path, ["hypothesis"], """
        import json, sys
        import jax.numpy as jnp, numpy as np
        import shlo_env
        X = np.random.randn(512, 256).astype(np.float32)
        W = np.random.randn(256, 256).astype(np.float32)
        f = lambda X, W: jnp.sum(X @ W, axis=0)
        opt = shlo_env.optimize(f, X, W, budget_s=30)
        jitted = shlo_env.jit(f, budget_s=30)
        ok = bool(np.allclose(opt(X, W), jitted(X, W), rtol=1e-3, atol=1e-2))
        try:
            import shlo_env.testing
            message = ""
        except ImportError as e:
            message = str(e)
        print(json.dumps({"applied": list(opt.report.applied), "ok": ok, "message": message,
                          "hypothesis": "hypothesis" in sys.modules}))
    """)
    assert "reduce_through_dot" in res["applied"] and res["ok"]
    assert "pip install 'shlo_env[test]'" in res["message"]


def test_import_without_gymnasium_does_not_need_it(tmp_path):
    res = run_without(tmp_path, ["gymnasium"], """
        import json, sys
        import shlo_env
        try:
            import gymnasium
            error = ""
        except ImportError as e:
            error = str(e)
        print(json.dumps({"error": error, "loaded": "gymnasium" in sys.modules}))
    """)
    assert "blocked" in res["error"] and not res["loaded"]


def test_import_registers_the_env_lazily(tmp_path):
    pytest.importorskip("gymnasium", reason="the gym extra is not installed (pip install 'shlo_env[gym]')")
    res = run_without(tmp_path, [], """
        import json, sys
        import shlo_env
        lazy = "gymnasium" not in sys.modules
        import gymnasium as gym
        env = gym.make("shlo_env/Rewrite-v0")
        obs, info = env.reset(seed=0)
        print(json.dumps({"lazy": lazy, "spec": gym.spec("shlo_env/Rewrite-v0").entry_point,
                          "env": type(env.unwrapped).__name__,
                          "loader": type(gym.__spec__.loader).__module__}))
    """)
    assert res["lazy"] and res["spec"] == "shlo_env.research.gym_env:RewriteEnv" and res["env"] == "RewriteEnv"
    assert res["loader"] != "shlo_env.research.gym_registration"  # the hook leaves gymnasium's own loader


def test_gymnasium_imported_first_is_registered_too(tmp_path):
    pytest.importorskip("gymnasium", reason="the gym extra is not installed (pip install 'shlo_env[gym]')")
    res = run_without(tmp_path, [], """
        import json
        import gymnasium as gym
        import shlo_env
        print(json.dumps({"registered": "shlo_env/Rewrite-v0" in gym.registry}))
    """)
    assert res["registered"]
