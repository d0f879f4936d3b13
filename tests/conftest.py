import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def randn(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


@pytest.fixture(scope="session")
def subgraph_dataset() -> str:
    """'inst-10-20' when the corpus sub-graph data is present, else 'random'."""
    try:
        from shlo_env import corpus

        corpus.entries("inst-10-20")
        return "inst-10-20"
    except (ImportError, AttributeError, LookupError):
        return "random"


@pytest.fixture(autouse=True)
def _search_cache_in_tmp(tmp_path_factory, monkeypatch):
    """Tests never touch the user's cache of searches, and each test starts with an empty one
    (tests that share searches pass `cache=` themselves)."""
    monkeypatch.setenv("SHLO_ENV_CACHE_DIR", str(tmp_path_factory.mktemp("shlo_env_cache")))
