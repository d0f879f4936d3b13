"""The pattern library: `all_patterns()`, `default_patterns()`, `get(name)`.

One module per family; each pattern is a small class registered with `@register`.
"""

from shlo_env.patterns.base import (  # noqa: F401
    Match, Numerics, Pattern, all_patterns, default_patterns, get, register, resolve,
)
from shlo_env.patterns import algebraic, dot, select, shape, slicing  # noqa: F401,E402

__all__ = ["Match", "Numerics", "Pattern", "all_patterns", "default_patterns", "get", "register", "resolve"]
