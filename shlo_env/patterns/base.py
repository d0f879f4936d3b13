"""The Pattern API and the registry of built-in patterns.

A pattern is a small class:

    @register
    class MulByOne(Pattern):
        '''x * 1 -> x'''
        root = "stablehlo.multiply"
        numerics = Numerics.EXACT

        def match(self, op):
            for x, one in commuted(op):     # tries both operand orders
                if splat_value(one) == 1:
                    return Match(x=x)

        def rewrite(self, b, m):
            return m.x

`match(op)` is pure (never mutates IR) and returns a `Match` or None. Every `ir.Value` in the
match becomes an input of the alternatives region, so `rewrite(b, m)` receives the same `Match`
with those values replaced by region arguments, builds the replacement with the `Builder` `b`,
and returns the new value(s): one per root. Roots default to the results of `op`; a multi-root
pattern sets `Match(roots=[...], ...)`.

The helpers patterns match with (`producer`, `splat_value`, `commuted`, ...) are in
`patterns.matching`; loop analysis (`static_trip_count`, `FlatBody`) in `patterns.loop_analysis`.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any, ClassVar

from shlo_env.measure.numerics import Numerics

__all__ = ["Pattern", "Match", "Numerics", "register", "all_patterns", "default_patterns", "get", "resolve"]


class Match(dict):
    """Captures of a match; `m.x` reads `m["x"]`. `roots` (optional) lists the replaced values.
    `numerics` (optional) loosens the pattern's tier for this match only (e.g. a merge that is
    exact unless XLA could contract a multiply into the add it separates)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Pattern:
    """Base class of every rewrite. Subclasses set `root` and `numerics` and define match/rewrite.

    `operand_from` (optional, a name or a collection of names) is a precondition the driver
    checks from its index before calling `match`: the pattern can only match an op one of
    whose operands is defined by an op with one of these names (`NegNeg`: "stablehlo.negate").
    Empty means none. A declaration that is not a necessary condition loses matches;
    tests/test_match_cache.py checks each one.

    `sweep_first` (optional) marks a rewrite that never costs: EXACT, never more ops than it
    replaces, no arithmetic added (`SumOfDisjointPads`). A search takes it at every site as its
    first whole-program candidate (`shlo_env.search.first_sweep`), before its budget goes to
    anything else; tests/property/test_patterns_meta.py checks the tier.
    """

    root: ClassVar[str | tuple[str, ...]] = ()
    operand_from: ClassVar[str | Collection[str]] = ()
    numerics: ClassVar[Numerics] = Numerics.EXACT
    sweep_first: ClassVar[bool] = False
    name: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()

    @classmethod
    def roots(cls) -> tuple[str, ...]:
        """Op names this pattern is tried on (a class with OPERATION_NAME works too)."""
        r = cls.root
        items = r if isinstance(r, tuple) else (r,)
        return tuple(getattr(x, "OPERATION_NAME", x) for x in items)

    @classmethod
    def operand_producers(cls) -> frozenset[str]:
        """`operand_from` as a set of op names (empty: no precondition)."""
        names = cls.operand_from
        return frozenset([names] if isinstance(names, str) else names)

    def match(self, op) -> Match | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def rewrite(self, b, m: Match):  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def summary(self) -> str:
        doc = (type(self).__doc__ or "").strip()
        return doc.splitlines()[0] if doc else self.name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} ({self.numerics.name.lower()})>"


# --- registry -------------------------------------------------------------------------------

# Filled by `@register` as each family module is imported. Nothing here imports the families:
# Python runs `shlo_env/patterns/__init__.py` (which imports every family) before this module
# can be imported, so the registry is complete whenever a function below runs.
_REGISTRY: dict[str, Pattern] = {}


def register(cls: type[Pattern]) -> type[Pattern]:
    """Class decorator adding a built-in pattern to the registry."""
    instance = cls()
    if instance.name in _REGISTRY:
        raise ValueError(f"pattern name {instance.name!r} registered twice")
    _REGISTRY[instance.name] = instance
    return cls


def all_patterns() -> list[Pattern]:
    """Every built-in pattern, APPROX ones included."""
    return list(_REGISTRY.values())


def default_patterns() -> list[Pattern]:
    """What `optimize` uses by default: every pattern that preserves values (EXACT, REASSOCIATE)."""
    return [p for p in all_patterns() if p.numerics <= Numerics.REASSOCIATE]


def get(name: str) -> Pattern:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no pattern named {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def resolve(patterns) -> list[Pattern]:
    """Accept None (defaults), names, Pattern classes or instances."""
    if patterns is None:
        return default_patterns()
    out = []
    for p in patterns:
        if isinstance(p, str):
            out.append(get(p))
        elif isinstance(p, type) and issubclass(p, Pattern):
            out.append(p())
        elif isinstance(p, Pattern):
            out.append(p)
        else:
            raise TypeError(f"not a pattern: {p!r}")
    return out
