"""Targeted property tests of the loop rewrites (shlo_env/patterns/loops.py)."""

import jax
import jax.numpy as jnp
import pytest
from hypothesis import strategies as st

from pattern_programs import DIM, check_targeted, programs, shapes
from shlo_env.patterns import loops as L
from shlo_env.testing import check_pattern

BODIES = [
    lambda i, c: c * 0.75 + 1.0,
    lambda i, c: jnp.sin(c) + c * 0.5,
    lambda i, c: c + i.astype(c.dtype) * 0.125,
]


def _loop(min_trips, max_trips=12):
    def build(draw):
        s = draw(shapes(1, 2))
        n = draw(st.integers(min_trips, max_trips))
        start = draw(st.integers(0, 2))
        body = draw(st.sampled_from(BODIES))
        if draw(st.booleans()):
            return (lambda x: jax.lax.fori_loop(start, start + n, body, x)), [s]

        def scan_fn(x, xs):
            def step(c, t):
                c = body(jnp.int32(1), c) + t
                return c, c * 2.0
            return jax.lax.scan(step, x, xs)

        return scan_fn, [s, (n,) + s]
    return build


def _hoist(draw):
    s = draw(shapes(1, 2))
    n = draw(st.integers(1, 6))
    f = draw(st.sampled_from([jnp.tanh, lambda w: w * 2.0 + 1.0, lambda w: jnp.exp(-w * w)]))
    return (lambda x, w: jax.lax.fori_loop(0, n, lambda i, c: c * f(w) + 0.5, x)), [s, s]


def _packed_state(draw):
    m = draw(DIM)
    k = draw(st.integers(2, 4))
    n = draw(st.integers(1, 6))

    def fn(*parts):
        def step(state, _):
            xs = [state[j] for j in range(k)]
            new = [xs[j] + 0.25 * jnp.cos(xs[(j + 1) % k]) for j in range(k)]
            return jnp.stack(new), None
        out, _ = jax.lax.scan(step, jnp.stack(parts), None, length=n)
        return out

    return fn, [(m,)] * k


def _dead_carry(draw):
    s = draw(shapes(1, 2))
    n = draw(st.integers(0, 6))
    body = draw(st.sampled_from(BODIES))

    def fn(x, d):
        def step(i, carry):
            c, dead = carry
            return body(i, c), dead * 0.5 + jnp.sin(c)  # dead reads c; nothing reads dead
        return jax.lax.fori_loop(0, n, step, (x, d))[0]

    return fn, [s, s]


def _independent_loops(draw):
    s = draw(shapes(1, 2))
    n = draw(st.integers(0, 6))
    f, g = draw(st.sampled_from(BODIES)), draw(st.sampled_from(BODIES))
    shift = draw(st.integers(0, 2))  # a different start: only the trip count must agree

    def fn(x, y):
        a = jax.lax.fori_loop(0, n, f, x)
        b = jax.lax.fori_loop(shift, shift + n, g, y * 2.0)
        return a, b * a if draw_uses_a else b

    draw_uses_a = draw(st.booleans())  # a user of the first loop between or after: still fusable
    return fn, [s, s]


def _independent_state(draw):
    s = draw(shapes(1, 2))
    n = draw(st.integers(0, 6))
    f, g = draw(st.sampled_from(BODIES)), draw(st.sampled_from(BODIES))
    with_dead = draw(st.booleans())

    def fn(x, y):
        def step(i, carry):
            a, b, d = carry
            return f(i, a), g(i, b), d + jnp.sum(a)  # d reads a: groups {a, d} and {b}
        a, b, d = jax.lax.fori_loop(0, n, step, (x, y * 2.0, jnp.zeros((1,), x.dtype)))
        return (a, b) if with_dead else (a, b, d)

    return fn, [s, s]


def _accumulated_dot(draw):
    """A loop adding a dot product of per-step slices to a carried value (a scan's weight
    gradient), in the forms JAX emits: x_t^T g_t or its transpose, acc on either side."""
    m, k, n = draw(DIM), draw(DIM), draw(DIM)
    trips = draw(st.integers(2, 6))
    start = draw(st.integers(0, 2))
    transposed, acc_first, via_scan = draw(st.booleans()), draw(st.booleans()), draw(st.booleans())

    def term(x, g):
        d = jnp.dot(x.T, g)  # [k, n]
        return d.T if transposed else d

    def fn(acc, xs, gs):
        if via_scan:
            def step(a, xg):
                x, g = xg
                return (a + term(x, g) if acc_first else term(x, g) + a), jnp.sum(x)
            return jax.lax.scan(step, acc, (xs, gs))
        return jax.lax.fori_loop(start, start + trips, lambda i, a: (
            a + term(xs[i - start], jnp.tanh(gs[i - start]))) if acc_first else term(xs[i - start], gs[i - start]) + a, acc)

    acc_shape = (n, k) if transposed else (k, n)
    return fn, [acc_shape, (trips, m, k), (trips, m, n)]


def _rnn_weight_gradient(draw):
    """The gradient of a small tanh RNN with respect to its recurrent weights (jax.grad of a scan)."""
    b, h = draw(DIM), draw(st.integers(1, 3))
    trips = draw(st.integers(2, 5))

    def loss(w, h0, xs):
        def step(hc, x):
            hn = jnp.tanh(hc @ w + x)
            return hn, hn
        return jnp.sum(jax.lax.scan(step, h0, xs)[1] ** 2)

    return jax.grad(loss), [(h, h), (b, h), (trips, b, h)]


CASES = {
    L.WhileAccumulatedDotAfterLoop: _accumulated_dot,
    L.WhileUnroll2: _loop(4),
    L.WhileUnroll4: _loop(8),
    L.WhileUnrollFull: _loop(1),
    L.WhileUnroll8: _loop(16, 24),
    L.WhileDropDeadCarry: _dead_carry,
    L.WhileFuse: _independent_loops,
    L.WhileSplit: _independent_state,
    L.WhileHoistInvariant: _hoist,
    L.WhileUnpackConcatState: _packed_state,
}


@pytest.mark.parametrize("pattern", list(CASES), ids=lambda p: p.name)
def test_pattern(pattern):
    check_targeted(pattern, CASES[pattern], max_examples=50)


def _loop_program(body_extra: str, a_step: str = "%a2 = stablehlo.sine %a : tensor<4xf32>", a_next: str = "%a2"):
    """A loop carrying %a and %b that returns %a: `a_step` computes %a's next value `a_next`,
    `body_extra` defines %b's (%b2)."""
    from shlo_env.ir.program import load
    return load(f"""
func.func @main(%x: tensor<4xf32>, %d: tensor<4xf32>) -> tensor<4xf32> {{
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:3 = stablehlo.while(%i = %c0, %a = %x, %b = %d) : tensor<i32>, tensor<4xf32>, tensor<4xf32>
    cond {{
      %n = stablehlo.constant dense<3> : tensor<i32>
      %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    }} do {{
      %one = stablehlo.constant dense<1> : tensor<i32>
      %j = stablehlo.add %i, %one : tensor<i32>
      {a_step}
      {body_extra}
      stablehlo.return %j, {a_next}, %b2 : tensor<i32>, tensor<4xf32>, tensor<4xf32>
    }}
  return %r#1 : tensor<4xf32>
}}""")


def _two_accumulators(draw):
    """Two sums in one loop reading the same per-step input (a GRU's gates): it is stacked once."""
    m, k, n = draw(DIM), draw(DIM), draw(DIM)
    trips = draw(st.integers(2, 5))

    def fn(a1, a2, xs, gs):
        def step(acc, xg):
            x, g = xg
            return (acc[0] + x.T @ g, acc[1] + x.T @ jnp.sin(g)), None
        return jax.lax.scan(step, (a1, a2), (xs, gs))[0]

    return fn, [(k, n), (k, n), (trips, m, k), (trips, m, n)]


def test_accumulated_dot_in_a_scan_gradient():
    check_targeted(L.WhileAccumulatedDotAfterLoop, _rnn_weight_gradient, max_examples=25)
    check_targeted(L.WhileAccumulatedDotAfterLoop, _two_accumulators, max_examples=20)


def test_accumulated_dot_left_alone_when_the_body_reads_the_sum():
    from shlo_env.rewrite import driver
    from shlo_env.ir.program import lower

    def reads_acc(acc, xs, gs):  # the running sum feeds the next step: no single dot after the loop
        return jax.lax.fori_loop(0, 3, lambda i, a: a + jnp.dot(xs[i].T, gs[i] * jnp.sum(a)), acc)

    z = jnp.zeros
    stats = driver.AugmentStats()
    driver.augment(lower(reads_acc, z((2, 3)), z((3, 4, 2)), z((3, 4, 3))), [L.WhileAccumulatedDotAfterLoop()], stats=stats)
    assert not stats.recorded


def test_dead_carry_found_and_effectful_loops_left_alone():
    from shlo_env.rewrite import driver

    pure = _loop_program("%b2 = stablehlo.add %b, %a : tensor<4xf32>")
    stats = driver.AugmentStats()
    driver.augment(pure, [L.WhileDropDeadCarry()], stats=stats)
    assert stats.recorded["while_drop_dead_carry"] == 1
    # An RNG op with hidden generator state in the body: the loop's work must not be dropped
    # (nor fused, nor hoisted). (rng_bit_generator carries its state as a value: it is pure.)
    rng = _loop_program("""%lo = stablehlo.constant dense<0.0> : tensor<f32>
      %hi = stablehlo.constant dense<1.0> : tensor<f32>
      %shape = stablehlo.constant dense<4> : tensor<1xi64>
      %bf = stablehlo.rng %lo, %hi, %shape, distribution = UNIFORM : (tensor<f32>, tensor<f32>, tensor<1xi64>) -> tensor<4xf32>
      %b2 = stablehlo.add %b, %bf : tensor<4xf32>""")
    stats = driver.AugmentStats()
    driver.augment(rng, [L.WhileDropDeadCarry(), L.WhileFuse(), L.WhileSplit(), L.WhileHoistInvariant()], stats=stats)
    assert not stats.recorded


def _nested_loop_program(inner_adds: str):
    """`_loop_program` whose %a update is an inner loop adding `inner_adds` to it each step, a
    value the inner body captures from the outer body."""
    inner = f"""%w:2 = stablehlo.while(%k = %one, %y = %a) : tensor<i32>, tensor<4xf32>
        cond {{
          %m = stablehlo.constant dense<2> : tensor<i32>
          %q = stablehlo.compare LT, %k, %m, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
          stablehlo.return %q : tensor<i1>
        }} do {{
          %k2 = stablehlo.add %k, %one : tensor<i32>
          %y2 = stablehlo.add %y, {inner_adds} : tensor<4xf32>
          stablehlo.return %k2, %y2 : tensor<i32>, tensor<4xf32>
        }}"""
    return _loop_program("%b2 = stablehlo.sine %b : tensor<4xf32>", a_step=inner, a_next="%w#1")


def test_a_carry_read_only_inside_a_nested_loop_is_live():
    """%b reaches the result only as a value the inner loop captures: it must not be dropped;
    when the inner loop adds %y to itself instead, %b is dead and is dropped."""
    from shlo_env.rewrite import driver

    for inner_adds, dropped in (("%b", 0), ("%y", 1)):
        stats = driver.AugmentStats()
        driver.augment(_nested_loop_program(inner_adds), [L.WhileDropDeadCarry()], stats=stats)
        assert stats.recorded["while_drop_dead_carry"] == dropped, inner_adds


@pytest.mark.parametrize("pattern", [L.WhileDropDeadCarry, L.WhileFuse, L.WhileSplit], ids=lambda p: p.name)
def test_exact_when_compiled_by_xla(pattern):
    """EXACT is a promise about what XLA runs: bitwise equal when both programs are compiled."""
    check_pattern(pattern, programs(CASES[pattern]), max_examples=8, backend="xla")

