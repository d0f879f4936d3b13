"""The source code of the corpus: real model and workload code, lowered by `generate.py`.

Each module registers builders with `@program(...)`. A builder takes no arguments and returns
`(fn, args)`: a pure function and its example arguments (random weights, nothing downloaded),
ready for `shlo_env.ir.program.lower(fn, *args)`. These modules import the model libraries (flax,
equinox, optax: `pip install shlo_env[corpus]`) at the top, as model code does; only
`generate.py` imports them. Loading the stored corpus (`shlo_env.corpus`) needs none of them.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable

KINDS = ("train_step", "optimizer_update", "inference", "simulation")
LIBRARIES = ("flax.linen", "flax.nnx", "equinox", "optax", "jax")

# The modules that define programs, in registry order.
MODULES = ("flax_linen", "flax_nnx", "equinox_models", "optax_updates", "workloads", "attention")


@dataclasses.dataclass(frozen=True)
class ProgramSpec:
    name: str
    library: str  # the library the model code is written against (see LIBRARIES)
    kind: str  # see KINDS; "train_step" = loss, grad and parameter update in one program
    description: str
    build: Callable[[], tuple[Callable, tuple]]
    uses: tuple[str, ...] = ()  # other libraries the code calls (e.g. optax inside a flax train step)

    @property
    def training(self) -> bool:
        return self.kind == "train_step"


_REGISTRY: dict[str, ProgramSpec] = {}


def program(name: str, *, library: str, kind: str, description: str, uses: tuple[str, ...] = ()):
    """Register a builder `() -> (fn, args)` under `name`."""
    if library not in LIBRARIES:
        raise ValueError(f"unknown library {library!r}")
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}")

    def register(build):
        if name in _REGISTRY:
            raise ValueError(f"duplicate corpus program {name!r}")
        _REGISTRY[name] = ProgramSpec(name, library, kind, description, build, tuple(uses))
        return build

    return register


def registry() -> dict[str, ProgramSpec]:
    """Every registered program (imports the source modules and so the model libraries)."""
    for m in MODULES:
        importlib.import_module(f"{__name__}.{m}")
    return dict(_REGISTRY)
