"""Candidate sources: where a strategy's decision vectors come from.

A *candidate source* is a callable `source(ctx, exp) -> Iterator[list[int]]`: decision vectors
over the dimensions of one expansion (`SearchContext.expand`), in the order the source thinks
worth trying. Sources never evaluate anything; a strategy applies the vectors
(`SearchContext.child`), ranks the children (`shlo_env.search.rankers`) and times those the
acquisition rule picks (`shlo_env.search.acquisition`).

    pick_first        the paper's pick-first vector (`shlo_env.rewrite.decisions.pick_first`)
    singles(hot)      each single choice alone, hottest sites first (`site_heat`)
    sweeps(hot)       one rewrite at all its sites, those that paid first
    random_draws(n, p) n seeded random vectors (XLA actions taken with probability p)
    exhaustive        every vector (small spaces only)
    xla_actions       each offered XLA action alone (the option screen's candidates)

Combinators: `chain(*sources)` (in turn), `alternate(*sources)` (a1, b1, a2, ...),
`first(n, source)` (its first n), and `distinct(source, limit)` (no stop vector, no repeat,
at most `limit`).

One source yields states rather than vectors: `pick_first_chain(ctx, exp)`, the pick-first
chain from the state beyond its first step, as (first step's vector, state) pairs: a rewrite
that pays only once a later one applies is several steps deep, out of one step's reach. Beam search's children
are `distinct(chain(pick_first, alternate(singles(hot), sweeps(hot)), random_draws(...)))`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from shlo_env.search.base import all_vectors, interleave, is_stop, pick_first_vector, random_vector

if TYPE_CHECKING:
    from shlo_env.search.base import Expansion, SearchContext, State

Source = Callable[["SearchContext", "Expansion"], Iterator[list[int]]]


def pick_first(ctx: SearchContext, exp: Expansion) -> Iterator[list[int]]:
    """The pick-first vector (none when it is the stop vector)."""
    vec = pick_first_vector(exp.dims)
    if not is_stop(vec):
        yield vec


def singles(hot_first: bool = True, rewrites_only: bool = False) -> Source:
    """Each single choice alone (`SearchContext.singles`); `rewrites_only` leaves out the XLA
    action toggles (for rankers that read the graph only)."""
    def source(ctx: SearchContext, exp: Expansion) -> Iterator[list[int]]:
        for vec in ctx.singles(exp, hot_first):
            if not (rewrites_only and any(vec[exp.num_rewrites:])):
                yield vec
    return source


def sweeps(hot_first: bool = True) -> Source:
    """Each rewrite at all its sites (`SearchContext.sweeps`: those that paid first)."""
    return lambda ctx, exp: ctx.sweeps(exp, hot_first)


def random_draws(n: int, pass_prob: float = 0.1) -> Source:
    """`n` random vectors from the context's seeded stream (`random_vector`)."""
    return lambda ctx, exp: (random_vector(exp.dims, ctx.rng, pass_prob) for _ in range(n))


def exhaustive(ctx: SearchContext, exp: Expansion) -> Iterator[list[int]]:
    """Every vector but the stop vector (only for small spaces: `Expansion.size`)."""
    return all_vectors(exp.dims)


def xla_actions(ctx: SearchContext, exp: Expansion) -> Iterator[list[int]]:
    """Each offered XLA action (disable a pass, set an option) alone."""
    for i, d in enumerate(exp.dims):
        if d.kind == "pass":
            vec = [0] * len(exp.dims)
            vec[i] = 1
            yield vec


def chain(*sources: Source) -> Source:
    """The sources in turn."""
    return lambda ctx, exp: itertools.chain.from_iterable(s(ctx, exp) for s in sources)


def alternate(*sources: Source) -> Source:
    """One vector of each source in turn (a1, b1, a2, b2, ...), until all are exhausted."""
    return lambda ctx, exp: interleave(*(s(ctx, exp) for s in sources))


def first(n: int, source: Source) -> Source:
    """The source's first `n` vectors."""
    return lambda ctx, exp: itertools.islice(source(ctx, exp), max(0, n))


def pick_first_states(ctx: SearchContext, start: State | None = None) -> Iterator[State]:
    """The states of the pick-first chain from `start` (default: the root), in order, until
    pick-first stops, a state repeats or a step fails to apply (at most `ctx.max_steps`).
    Nothing is evaluated: the caller decides what to time or compile."""
    state = start if start is not None else ctx.root
    seen = {state.key}
    for _ in range(ctx.max_steps):
        exp = ctx.expand(state)
        vec = pick_first_vector(exp.dims)
        nxt = None if is_stop(vec) else ctx.child(exp, vec)
        if nxt is None or nxt.key in seen:
            return
        seen.add(nxt.key)
        yield nxt
        state = nxt


def pick_first_chain(ctx: SearchContext, exp: Expansion) -> Iterator[tuple[list[int], State]]:
    """The states of the pick-first chain from `exp`'s state (`pick_first_states`) after its
    first step (that one is `pick_first`'s child), each with the first step's vector. Nothing
    is evaluated."""
    vec = pick_first_vector(exp.dims)
    if is_stop(vec):
        return
    yield from ((vec, state) for state in itertools.islice(pick_first_states(ctx, exp.state), 1, None))


def distinct(source: Source, limit: int | None = None) -> Source:
    """The source without the stop vector and repeats, at most `limit` vectors."""
    def out(ctx: SearchContext, exp: Expansion) -> Iterator[list[int]]:
        seen: set[tuple[int, ...]] = set()
        for vec in source(ctx, exp):
            t = tuple(vec)
            if is_stop(vec) or t in seen:
                continue
            seen.add(t)
            yield list(vec)
            if limit is not None and len(seen) >= limit:
                return
    return out


__all__ = ["Source", "alternate", "chain", "distinct", "exhaustive", "first", "pick_first", "pick_first_chain", "pick_first_states",
           "random_draws", "singles", "sweeps", "xla_actions"]
