import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def randn(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)
