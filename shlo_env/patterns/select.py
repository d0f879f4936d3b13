"""select / compare rewrites."""

from __future__ import annotations

from shlo_env.patterns.base import Match, Pattern, register


@register
class SelectSameBranches(Pattern):
    """select(p, x, x) -> x."""

    root = "stablehlo.select"

    def match(self, op):
        _, on_true, on_false = op.operands
        if on_true == on_false:
            return Match(x=on_true)

    def rewrite(self, b, m):
        return m.x
