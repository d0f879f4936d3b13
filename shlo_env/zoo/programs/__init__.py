"""The source code of the zoo: third-party model libraries, lowered by `shlo_env.zoo.generate`.

Each module registers builders with `@program(...)`. A builder takes no arguments and returns
`(fn, args, config)`: a pure function, its example arguments (parameters and optimizer state are
arguments, so they become module inputs rather than baked constants) and the model config as a
JSON-able dict. Weights are random, built from configs: nothing is fetched from a model hub.
These modules import the libraries at the top (`pip install shlo_env[zoo]`); only
`shlo_env.zoo.generate` imports them. Loading the stored zoo needs none of them.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Callable
from typing import Any

# Nothing in the zoo may reach a model hub: these make transformers/huggingface_hub fail fast
# instead of trying. Keras must pick its JAX backend before it is first imported.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("KERAS_BACKEND", "jax")

KINDS = ("inference", "train_step")
# library -> the distribution whose version is recorded
LIBRARIES = {"transformers": "transformers", "flax.linen": "flax", "flax.nnx": "flax", "haiku": "dm-haiku",
             "equinox": "equinox", "jraph": "jraph", "keras": "keras"}

# The modules that define programs, in registry order.
MODULES = ("transformers_flax", "flax_examples", "haiku_nets", "equinox_nets", "jraph_nets", "keras_models")


@dataclasses.dataclass(frozen=True)
class ZooSpec:
    name: str
    library: str  # a key of LIBRARIES
    kind: str  # "inference" or "train_step" (loss, gradient and parameter update in one program)
    description: str
    build: Callable[[], tuple[Callable, tuple, dict[str, Any]]]
    uses: tuple[str, ...] = ()  # other distributions the code calls (e.g. optax in a train step)


_REGISTRY: dict[str, ZooSpec] = {}


def program(name: str, *, library: str, kind: str, description: str, uses: tuple[str, ...] = ()):
    """Register a builder `() -> (fn, args, config)` under `name`."""
    if library not in LIBRARIES:
        raise ValueError(f"unknown zoo library {library!r}; one of {sorted(LIBRARIES)}")
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; one of {KINDS}")

    def register(build):
        if name in _REGISTRY:
            raise ValueError(f"duplicate zoo program {name!r}")
        _REGISTRY[name] = ZooSpec(name, library, kind, description, build, tuple(uses))
        return build

    return register


def optax_step(loss_fn: Callable, tx) -> Callable:
    """step(params, opt_state, *batch) -> (params, opt_state, loss): one optax update of `loss_fn`."""
    import jax
    import optax

    def step(params, opt_state, *batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, *batch)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return step


def registry() -> dict[str, ZooSpec]:
    """Every registered program (imports the source modules and so the model libraries)."""
    for m in MODULES:
        importlib.import_module(f"{__name__}.{m}")
    return dict(_REGISTRY)
