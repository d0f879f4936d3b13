"""Shape rewrites: transposes and reshapes that compose or vanish."""

from __future__ import annotations

from shlo_env.patterns.base import Match, Pattern, i64s, producer, register, shape_of


@register
class TransposeOfTranspose(Pattern):
    """transpose(transpose(x, p), q) -> transpose(x, p∘q), or x when that is the identity."""

    root = "stablehlo.transpose"

    def match(self, op):
        inner = producer(op.operands[0], "stablehlo.transpose")
        if inner is None:
            return None
        p, q = i64s(inner, "permutation"), i64s(op, "permutation")
        return Match(x=inner.operands[0], perm=[p[i] for i in q])

    def rewrite(self, b, m):
        return b.transpose(m.x, m.perm)


@register
class ReshapeOfReshape(Pattern):
    """reshape(reshape(x)) -> reshape(x), or x when the shapes agree."""

    root = "stablehlo.reshape"

    def match(self, op):
        inner = producer(op.operands[0], "stablehlo.reshape")
        if inner is not None:
            return Match(x=inner.operands[0], shape=shape_of(op.result.type))

    def rewrite(self, b, m):
        return b.reshape(m.x, m.shape)
