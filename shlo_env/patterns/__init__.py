"""The pattern library: `all_patterns()`, `default_patterns()`, `get(name)`.

One module per family; each pattern is a small class registered with `@register`. Importing
this package imports every family (tests/test_layering.py fails on a family left out).
The Pattern API and registry are in `base`, matching helpers in `matching`, loop analysis in
`loop_analysis`.
"""

from shlo_env.patterns.base import (  # noqa: F401
    Match, Numerics, Pattern, all_patterns, default_patterns, get, register, resolve,
)
from shlo_env.patterns import (  # noqa: F401,E402
    algebraic, conv, convert, dot, fusion, layout, loops, pad_sums, reduce, scans, select, shape,
    slicing, small_ops,
)
from shlo_env.patterns import batching  # noqa: F401,E402  (last: the registry's order is the search's)

__all__ = ["Match", "Numerics", "Pattern", "all_patterns", "default_patterns", "get", "register", "resolve"]
