"""The pattern library: `all_patterns()`, `default_patterns()`, `get(name)`.

One module per family; each pattern is a small class registered with `@register`.
"""

from shlo_env.patterns.base import (  # noqa: F401
    Match, Numerics, Pattern, all_patterns, default_patterns, get, register, resolve,
)
from shlo_env.patterns import (  # noqa: F401,E402
    algebraic, convert, dot, fusion, layout, loops, reduce, select, shape, slicing,
)
from shlo_env.patterns import batching  # noqa: F401,E402  (horizontal batching, issue 10)

__all__ = ["Match", "Numerics", "Pattern", "all_patterns", "default_patterns", "get", "register", "resolve"]
