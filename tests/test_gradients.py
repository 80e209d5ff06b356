"""shlo2jax.gradients.dot_general: lax.dot_general's value, with the rhs cotangent computed
as lhs contracted with the cotangent (what makes a dense layer's weight gradient cheap on CPU)."""

import contextlib
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from shlo2jax.gradients import dot_general

from _helpers import nested_primitives

# (lhs shape, rhs shape, dimension numbers)
CASES = [
    ((6, 5), (5, 4), (((1,), (0,)), ((), ()))),                  # matmul
    ((3, 7, 5), (5, 4), (((2,), (0,)), ((), ()))),               # dense layer, 2 leading dims
    ((6, 5), (4, 5), (((1,), (1,)), ((), ()))),                  # x @ w.T
    ((2, 3, 5, 4), (2, 4, 6, 3), (((3, 1), (1, 3)), ((0,), (0,)))),  # batch, 2 contracting, permuted
    ((3, 2, 5), (3, 2, 4), (((0,), (0,)), ((1,), (1,)))),       # batch not leading
    ((5,), (5,), (((0,), (0,)), ((), ()))),                      # inner product
    ((3, 4), (5,), (((), ()), ((), ()))),                        # outer product
]


def _args(lhs_shape, rhs_shape, dtype=np.float32):
    rng = np.random.default_rng(0)
    return (jnp.asarray(rng.standard_normal(lhs_shape), dtype),
            jnp.asarray(rng.standard_normal(rhs_shape), dtype))


def _ours(dims, **kw):
    return lambda a, b: dot_general(a, b, dims, **kw)


def _lax(dims, **kw):
    return lambda a, b: lax.dot_general(a, b, dims, **kw)


@pytest.mark.parametrize("lhs_shape,rhs_shape,dims", CASES)
def test_value_and_gradients_are_lax_dot_generals(lhs_shape, rhs_shape, dims):
    a, b = _args(lhs_shape, rhs_shape)
    ours, theirs = _ours(dims), _lax(dims)
    assert np.array_equal(jax.jit(ours)(a, b), jax.jit(theirs)(a, b))
    out_shape = jax.eval_shape(theirs, a, b).shape
    proj = jnp.asarray(np.random.default_rng(1).standard_normal(out_shape), np.float32)

    def grad(f):
        return jax.jit(jax.grad(lambda a, b: jnp.sum(f(a, b) * proj), argnums=(0, 1)))(a, b)
    for got, want in zip(grad(ours), grad(theirs)):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # forward mode, and vmap of the gradient
    ta, tb = _args(lhs_shape, rhs_shape)
    np.testing.assert_allclose(jax.jvp(ours, (a, b), (ta, tb))[1],
                               jax.jvp(theirs, (a, b), (ta, tb))[1], rtol=1e-5, atol=1e-5)
    stacked = jnp.stack([a, 2 * a])
    batched = [jax.vmap(jax.grad(lambda a, b: jnp.sum(f(a, b) * proj), argnums=1),
                        in_axes=(0, None))(stacked, b) for f in (ours, theirs)]
    np.testing.assert_allclose(*batched, rtol=1e-5, atol=1e-5)


def test_second_order():
    a, b = _args((3, 4), (4, 2))
    dims = (((1,), (0,)), ((), ()))

    def hvp(f):
        loss = lambda b: jnp.sum(jnp.tanh(f(a, b)))  # noqa: E731
        return jax.jvp(jax.grad(loss), (b,), (jnp.ones_like(b),))[1]
    np.testing.assert_allclose(hvp(_ours(dims)), hvp(_lax(dims)), rtol=1e-5, atol=1e-6)


def test_mixed_precision_cotangents_take_the_operand_types():
    a, b = _args((4, 3), (3, 5), jnp.bfloat16)
    dims = (((1,), (0,)), ((), ()))
    f = _ours(dims, preferred_element_type=jnp.float32)
    assert f(a, b).dtype == jnp.float32
    ga, gb = jax.grad(lambda a, b: jnp.sum(f(a, b)), argnums=(0, 1))(a, b)
    assert ga.dtype == gb.dtype == jnp.bfloat16


def test_rhs_cotangent_contracts_the_lhs_with_the_cotangent():
    """The weight gradient of a dense layer is dot_general(x, ct) over the leading
    dimensions, with no transpose of the cotangent (lax: dot_general(ct, x), transposed)."""
    x, w = _args((3, 7, 5), (5, 4))
    dims = (((2,), (0,)), ((), ()))
    jaxpr = jax.make_jaxpr(jax.grad(lambda w: jnp.sum(jnp.sin(dot_general(x, w, dims)))))(w)
    dots = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "dot_general"]
    assert len(dots) == 1
    assert dots[0].params["dimension_numbers"] == (((0, 1), (0, 1)), ((), ()))
    assert dots[0].invars[0].aval.shape == x.shape
    assert not [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "transpose"]


def test_integer_operands_bind_lax():
    a = jnp.arange(6, dtype=jnp.int32).reshape(2, 3)
    dims = (((1,), (0,)), ((), ()))
    jaxpr = jax.make_jaxpr(_ours(dims))(a, a.T)
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns] == ["dot_general"]


# ------------------------------------------------------------------ products with constants

def _program(constant: str, op: str = "multiply"):
    import shlo2jax
    return shlo2jax.load(f"""
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %c = stablehlo.constant dense<{constant}> : tensor<4xf32>
  %y = stablehlo.{op} %x, %c : tensor<4xf32>
  %z = stablehlo.sine %y : tensor<4xf32>
  return %z : tensor<4xf32>
}}""")


def _primitives(fn, x) -> set:
    """The primitives of the gradient's jaxpr, nested jaxprs (the program's jit) included."""
    return set(nested_primitives(jax.make_jaxpr(jax.grad(lambda x: jnp.sum(fn(x))))(x).jaxpr))


@pytest.mark.parametrize("op", ["multiply", "divide"])
def test_finite_nonzero_constant_factors_take_lax_derivatives(op):
    x = jnp.asarray([0.0, 1.5, -2.0, 3.0], jnp.float32)
    program = _program("[2.0, -0.5, 3.0, 1.0e-3]", op)
    assert not {p for p in _primitives(program, x) if "strong_zero" in p}
    c = jnp.asarray([2.0, -0.5, 3.0, 1.0e-3], jnp.float32)

    def ref(x):
        return jnp.sin(x * c if op == "multiply" else x / c)
    assert np.array_equal(program(x), jax.jit(ref)(x))
    np.testing.assert_allclose(jax.grad(lambda x: jnp.sum(program(x)))(x),
                               jax.grad(lambda x: jnp.sum(ref(x)))(x), rtol=1e-6)


@pytest.mark.parametrize("constant", ["[2.0, 0.0, 3.0, 1.0]", "[2.0, 0x7F800000, 3.0, 1.0]"])
def test_constants_with_zeros_or_infinities_keep_strong_zeros(constant):
    x = jnp.asarray([0.0, 1.5, -2.0, 3.0], jnp.float32)
    assert {p for p in _primitives(_program(constant), x) if "strong_zero" in p}


def test_subnormal_divisors_keep_strong_zeros():
    x = jnp.asarray([0.0, 1.5, -2.0, 3.0], jnp.float32)
    assert {p for p in _primitives(_program("[2.0, 1.0e-40, 3.0, 1.0]", "divide"), x)
            if "strong_zero" in p}


def _seen_through(chain: str, scalar: str, op: str = "divide", dtype: str = "f32"):
    import shlo2jax
    return shlo2jax.load(f"""
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %s = stablehlo.constant dense<{scalar}> : tensor<{dtype}>
  {chain}
  %y = stablehlo.{op} %x, %c : tensor<4xf32>
  %z = stablehlo.sine %y : tensor<4xf32>
  return %z : tensor<4xf32>
}}""")


_BROADCAST = "%c = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<4xf32>"
_CHAIN = ("%v = stablehlo.convert %s : (tensor<f64>) -> tensor<f32>\n"
          "  %r = stablehlo.reshape %v : (tensor<f32>) -> tensor<1xf32>\n"
          "  %c = stablehlo.broadcast_in_dim %r, dims = [0] : (tensor<1xf32>) -> tensor<4xf32>")


@pytest.mark.parametrize("op", ["multiply", "divide"])
@pytest.mark.parametrize("chain,dtype", [(_BROADCAST, "f32"), (_CHAIN, "f64")])
def test_constants_seen_through_broadcasts_and_converts_take_lax_derivatives(op, chain, dtype):
    """An exporter's scalar constant broadcast (a mean's divisor, a scale) is a factor
    with a finite local derivative: lax's derivative, no zero tests in the backward."""
    x = jnp.asarray([0.0, 1.5, -2.0, 3.0], jnp.float32)
    program = _seen_through(chain, "256.0", op, dtype)
    assert not {p for p in _primitives(program, x) if "strong_zero" in p}
    ref = (lambda x: jnp.sin(x * 256.0)) if op == "multiply" else (lambda x: jnp.sin(x / 256.0))
    np.testing.assert_allclose(jax.grad(lambda x: jnp.sum(program(x)))(x),
                               jax.grad(lambda x: jnp.sum(ref(x)))(x), rtol=1e-6)


@pytest.mark.filterwarnings("ignore:overflow encountered")
@pytest.mark.parametrize("scalar,chain,dtype", [
    ("0.0", _BROADCAST, "f32"), ("0x7F800000", _BROADCAST, "f32"),
    ("1.0e-300", _CHAIN, "f64"),  # zero once converted to f32
    ("1.0e+300", _CHAIN, "f64")])  # infinite once converted to f32
def test_constants_zero_or_infinite_once_converted_keep_strong_zeros(scalar, chain, dtype):
    x = jnp.asarray([0.0, 1.5, -2.0, 3.0], jnp.float32)
    assert {p for p in _primitives(_seen_through(chain, scalar, "multiply", dtype), x)
            if "strong_zero" in p}


def test_a_constant_factor_does_not_decide_another_products_rule():
    """Two products of the same types, one by a broadcast constant: the other keeps its
    strong zeros (the translation replays equations learned per op kind and types)."""
    import shlo2jax
    program = shlo2jax.load("""
func.func @main(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %s = stablehlo.constant dense<2.0> : tensor<f32>
  %c = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %a = stablehlo.multiply %x, %c : tensor<4xf32>
  %b = stablehlo.multiply %a, %w : tensor<4xf32>
  return %b : tensor<4xf32>
}""")
    x = jnp.asarray([0.0, 1.5, -2.0, 3.0], jnp.float32)
    w = jnp.asarray([np.inf, 1.0, 2.0, 0.5], jnp.float32)
    for _ in range(2):  # (the second trace replays what the first learned)
        kinds = [e.primitive.name for e in jax.make_jaxpr(program)(x, w).eqns[0].params[
            "jaxpr"].eqns]
        assert kinds.count("mul") == 1 and kinds.count("mul_strong_zero") == 1, kinds
    # d/dx of (2x) * w at w = inf, through a zero cotangent for that element: 0, not NaN
    grad = jax.grad(lambda x: jnp.sum(program(x, w) * jnp.asarray([0.0, 1, 1, 1])))(x)
    np.testing.assert_array_equal(grad, [0.0, 2.0, 4.0, 1.0])


def test_the_translation_binds_it():
    """A module's dot_general differentiates through gradients.dot_general (its replayed
    equations too: the second trace of the same program)."""
    import shlo2jax
    program = shlo2jax.load("""
func.func @main(%x: tensor<3x7x5xf32>, %w: tensor<5x4xf32>) -> tensor<3x7x4xf32> {
  %y = stablehlo.dot_general %x, %w, contracting_dims = [2] x [0] : (tensor<3x7x5xf32>, tensor<5x4xf32>) -> tensor<3x7x4xf32>
  %z = stablehlo.sine %y : tensor<3x7x4xf32>
  return %z : tensor<3x7x4xf32>
}""")
    x, w = _args((3, 7, 5), (5, 4))
    for _ in range(2):
        found = _primitives(lambda w: program(x, w), w)
        assert "dot_general_lhs_contracted" in found
    np.testing.assert_allclose(
        jax.grad(lambda w: jnp.sum(program(x, w)))(w),
        jax.grad(lambda w: jnp.sum(jnp.sin(jnp.einsum("abk,kn->abn", x, w))))(w), rtol=1e-5)


# ------------------------------------------------------------------ squares

def _square_programs():
    """(square, product): `(x - m) * (x - m)`, one SSA value twice, and the same product of
    two values (`mul`'s rule: two guarded tangent products)."""
    import shlo2jax
    square = shlo2jax.load("""
func.func @main(%x: tensor<12xf32>, %m: tensor<12xf32>) -> tensor<12xf32> {
  %d = stablehlo.subtract %x, %m : tensor<12xf32>
  %s = stablehlo.multiply %d, %d : tensor<12xf32>
  return %s : tensor<12xf32>
}""")
    product = shlo2jax.load("""
func.func @main(%x: tensor<12xf32>, %y: tensor<12xf32>, %m: tensor<12xf32>) -> tensor<12xf32> {
  %d = stablehlo.subtract %x, %m : tensor<12xf32>
  %e = stablehlo.subtract %y, %m : tensor<12xf32>
  %s = stablehlo.multiply %d, %e : tensor<12xf32>
  return %s : tensor<12xf32>
}""")
    return square, product


_BIG = 3.0e38  # 2 * _BIG overflows; _BIG * 0.25 + _BIG * 0.25 does not
_SQUARE_X = np.asarray([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 2.0e19, 0.25, 0.25,
                        0.0, 1.0e-30], np.float32)
_SQUARE_CT = np.asarray([1.0, 1.0, 0.0, -2.0, 0.0, 1.0, 0.0, 1.0, _BIG, -_BIG, _BIG, np.nan],
                        np.float32)


def _square_vjp(square, product):
    """The cotangent of x for both programs at _SQUARE_X, _SQUARE_CT: the product's is the
    sum of its two operands' (what `mul`'s rule gives a value used twice)."""
    m = jnp.zeros(12, jnp.float32)
    x, ct = jnp.asarray(_SQUARE_X), jnp.asarray(_SQUARE_CT)
    _, vjp = jax.vjp(lambda x: square(x, m), x)
    _, vjp2 = jax.vjp(lambda x, y: product(x, y, m), x, x)
    (got,), (gx, gy) = vjp(ct), vjp2(ct)
    return got, gx + gy


def test_a_square_equals_two_products_values_and_gradient():
    """Values and gradient bit for bit with `mul`'s two guarded products, at 0, inf, NaN,
    a zero cotangent times an infinite or NaN factor (0), a cotangent whose double
    overflows where its two products' sum does not."""
    square, product = _square_programs()
    m = jnp.zeros(12, jnp.float32)
    x = jnp.asarray(_SQUARE_X)
    np.testing.assert_array_equal(square(x, m), product(x, x, m))
    got, want = _square_vjp(square, product)
    np.testing.assert_array_equal(got, want)
    assert got[4] == 0 and got[6] == 0 and np.isfinite(got[8]) and got[10] == 0, got
    assert jnp.signbit(got[2]) == jnp.signbit(want[2])
    # forward mode too
    _, tangent = jax.jvp(lambda x: square(x, m), (x,), (jnp.asarray(_SQUARE_CT),))
    _, tangent2 = jax.jvp(lambda x: product(x, x, m), (x,), (jnp.asarray(_SQUARE_CT),))
    np.testing.assert_array_equal(tangent, tangent2)


def test_a_square_has_one_guard():
    """The square's backward is one compare-and-select, the product's two."""
    square, product = _square_programs()
    m = jnp.zeros(12, jnp.float32)
    x = jnp.asarray(_SQUARE_X)

    def selects(f, *args):
        text = jax.jit(jax.grad(lambda x: jnp.sum(f(x, *args)))).lower(x).as_text()
        return text.count("stablehlo.select")
    assert "strong_zero_twice_mul" in _primitives(lambda x: square(x, m), x)
    assert "strong_zero_mul" not in _primitives(lambda x: square(x, m), x)
    assert selects(square, m) == 1
    assert selects(lambda x, m: product(x, x, m), m) == 2


def test_a_squares_higher_derivatives_equal_two_products():
    square, product = _square_programs()
    m = jnp.zeros(12, jnp.float32)
    x = jnp.asarray(_SQUARE_X)
    ct = jnp.asarray(np.where(np.isfinite(_SQUARE_CT), _SQUARE_CT, 0.0)
                     / np.float32(1e30), jnp.float32)

    def grad_of_grad(f):
        inner = jax.grad(lambda x: jnp.sum(f(x) * ct))
        return jax.grad(lambda x: jnp.sum(inner(x) * jnp.arange(12.0, dtype=jnp.float32)))(x)
    got = grad_of_grad(lambda x: square(x, m))
    np.testing.assert_array_equal(got, grad_of_grad(lambda x: product(x, x, m)))
    finite = np.isfinite(_SQUARE_X)
    np.testing.assert_allclose(np.asarray(got)[finite],
                               (2 * np.asarray(ct) * np.arange(12.0))[finite], rtol=1e-6)
    finite_x = jnp.arange(12.0, dtype=jnp.float32) - 5.0
    np.testing.assert_array_equal(jax.hessian(lambda x: jnp.sum(square(x, m)))(finite_x),
                                  2 * np.eye(12, dtype=np.float32))
    np.testing.assert_array_equal(jax.vmap(jax.grad(lambda x: jnp.sum(square(x, m))))(
        jnp.stack([finite_x, -finite_x])), jnp.stack([2 * finite_x, -2 * finite_x]))


# ------------------------------------------------------------------ factors finite by range

def _layer_norm(eps_argument: bool):
    """scale * rsqrt(mean(x * x) + eps): eps a module constant (the range analysis finds the
    rsqrt in (0, 1/sqrt(eps)]) or an argument (unknown: every guard stays)."""
    import shlo2jax
    eps = ", %eps: tensor<f32>" if eps_argument else ""
    constant = "" if eps_argument else \
        "%eps = stablehlo.constant dense<1.0e-5> : tensor<f32>"
    return shlo2jax.load(f"""
func.func @main(%x: tensor<4x8xf32>, %s: tensor<4x8xf32>{eps}) -> tensor<4x8xf32> {{
  {constant}
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %n = stablehlo.constant dense<8.0> : tensor<4xf32>
  %sq = stablehlo.multiply %x, %x : tensor<4x8xf32>
  %sum = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  %var = stablehlo.divide %sum, %n : tensor<4xf32>
  %e = stablehlo.broadcast_in_dim %eps, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %v = stablehlo.add %var, %e : tensor<4xf32>
  %r = stablehlo.rsqrt %v : tensor<4xf32>
  %rb = stablehlo.broadcast_in_dim %r, dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
  %y = stablehlo.multiply %s, %rb : tensor<4x8xf32>
  %xy = stablehlo.multiply %y, %x : tensor<4x8xf32>
  return %xy : tensor<4x8xf32>
}}""")


def test_a_factor_finite_by_range_drops_its_guards_with_the_same_gradients():
    """rsqrt(mean(x^2) + eps) is finite: rsqrt takes lax's rule and `s * rsqrt(...)` the
    finite side's (no zero test); `s` and the other product's factors stay guarded. The
    gradients equal the guarded program's (eps an argument), second order too."""
    ranged, guarded = _layer_norm(False), _layer_norm(True)
    eps = jnp.float32(1e-5)
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(4, 8)), jnp.float32).at[0].set(0.0)
    s = jnp.asarray(rng.normal(size=(4, 8)), jnp.float32).at[1, 2].set(0.0)
    prims = _primitives(lambda x: ranged(x, s), x)
    assert "rsqrt_strong_zero" not in prims and "strong_zero_mul_finite" in prims
    assert "rsqrt_strong_zero" in _primitives(lambda x: guarded(x, s, eps), x)
    np.testing.assert_array_equal(ranged(x, s), guarded(x, s, eps))
    ct = jnp.asarray(rng.normal(size=(4, 8)), jnp.float32).at[2].set(0.0)
    got = jax.vjp(ranged, x, s)[1](ct)
    want = jax.vjp(lambda x, s: guarded(x, s, eps), x, s)[1](ct)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)

    def grad_of_grad(f):
        inner = jax.grad(lambda x, s: jnp.sum(f(x, s) * ct), argnums=(0, 1))
        return jax.grad(lambda x, s: sum(jnp.sum(g * g) for g in inner(x, s)),
                        argnums=(0, 1))(x, s)
    for g, w in zip(grad_of_grad(ranged), grad_of_grad(lambda x, s: guarded(x, s, eps))):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        assert np.all(np.isfinite(g))

    def selects(f):
        text = jax.jit(jax.grad(lambda x, s: jnp.sum(f(x, s)), argnums=(0, 1))).lower(
            x, s).as_text()
        return text.count("stablehlo.select")
    assert selects(ranged) < selects(lambda x, s: guarded(x, s, eps))


@pytest.mark.parametrize("factor", [
    "%f = stablehlo.exponential %x : tensor<4xf32>",  # [0, inf]: exp(100) overflows
    "%f = stablehlo.divide %one, %x : tensor<4xf32>",  # 1 / 0
    "%f = stablehlo.rsqrt %x : tensor<4xf32>",  # rsqrt(0)
])
def test_a_factor_that_can_be_infinite_keeps_its_guard(factor):
    """exp(x), 1/x, rsqrt(x) of an argument can be infinite: a product with them in a branch
    `select` drops keeps a finite (zero) gradient there, which an unguarded product would
    make NaN (0 * inf)."""
    import shlo2jax
    program = shlo2jax.load(f"""
func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>, %p: tensor<4xi1>) -> tensor<4xf32> {{
  %one = stablehlo.constant dense<1.0> : tensor<4xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<4xf32>
  {factor}
  %m = stablehlo.multiply %y, %f : tensor<4xf32>
  %q = stablehlo.divide %y, %f : tensor<4xf32>
  %s = stablehlo.add %m, %q : tensor<4xf32>
  %out = stablehlo.select %p, %s, %zero : tensor<4xi1>, tensor<4xf32>
  return %out : tensor<4xf32>
}}""")
    x = jnp.asarray([100.0, 0.0, 1.0, 2.0], jnp.float32)
    y = jnp.asarray([1.0, 2.0, 3.0, 4.0], jnp.float32)
    p = jnp.asarray([False, False, True, True])
    gx, gy = jax.grad(lambda x, y: jnp.sum(program(x, y, p)), argnums=(0, 1))(x, y)
    assert np.all(np.isfinite(gx)) and np.all(np.isfinite(gy)), (gx, gy)
    assert gx[0] == gx[1] == gy[0] == gy[1] == 0


def _sigmoid_product(one_argument: bool):
    """x * (1 / (1 + exp(-x))): the quotient's denominator is in [1, inf] and its numerator
    the constant 1 (or, `one_argument`, an argument: unknown, every guard stays)."""
    import shlo2jax
    head = ", %one: tensor<4xf32>" if one_argument else ""
    one = "" if one_argument else "%one = stablehlo.constant dense<1.0> : tensor<4xf32>"
    return shlo2jax.load(f"""
func.func @main(%x: tensor<4xf32>{head}) -> tensor<4xf32> {{
  {one}
  %n = stablehlo.negate %x : tensor<4xf32>
  %e = stablehlo.exponential %n : tensor<4xf32>
  %d = stablehlo.add %one, %e : tensor<4xf32>
  %sig = stablehlo.divide %one, %d : tensor<4xf32>
  %out = stablehlo.multiply %x, %sig : tensor<4xf32>
  return %out : tensor<4xf32>
}}""")


def test_a_sigmoids_quotient_and_product_take_lax_rules_on_their_finite_sides():
    ranged, guarded = _sigmoid_product(False), _sigmoid_product(True)
    one = jnp.ones(4, jnp.float32)
    x = jnp.asarray([-100.0, 0.0, 1.5, 100.0], jnp.float32)
    prims = _primitives(ranged, x)
    assert {"strong_zero_div_finite", "strong_zero_mul_finite"} <= prims
    np.testing.assert_array_equal(ranged(x), guarded(x, one))
    for ct in (jnp.asarray([0.0, 1.0, 0.0, 2.0], jnp.float32), jnp.ones(4, jnp.float32)):
        got = jax.vjp(ranged, x)[1](ct)[0]
        want = jax.vjp(lambda x: guarded(x, one), x)[1](ct)[0]
        np.testing.assert_array_equal(got, want)
        assert np.all(np.isfinite(got))
    finite_x = jnp.asarray([-3.0, 0.0, 1.5, 3.0], jnp.float32)
    np.testing.assert_allclose(jax.hessian(lambda x: jnp.sum(ranged(x)))(finite_x),
                               jax.hessian(lambda x: jnp.sum(guarded(x, one)))(finite_x),
                               rtol=1e-6)


def test_a_quotient_by_a_value_bounded_away_from_zero_takes_lax_rules_on_both_sides():
    """x / (c + exp(z)), c = 1 a constant (the divisor in [1, inf]: its reciprocal and
    x / d / d finite where x is: x = tanh) or an argument (every guard stays): the same
    gradients for both operands, in reverse and forward mode."""
    import shlo2jax

    def program(c_argument):
        head = ", %c: tensor<4xf32>" if c_argument else ""
        c = "" if c_argument else "%c = stablehlo.constant dense<1.0> : tensor<4xf32>"
        return shlo2jax.load(f"""
func.func @main(%x: tensor<4xf32>, %z: tensor<4xf32>{head}) -> tensor<4xf32> {{
  {c}
  %t = stablehlo.tanh %x : tensor<4xf32>
  %e = stablehlo.exponential %z : tensor<4xf32>
  %d = stablehlo.add %c, %e : tensor<4xf32>
  %q = stablehlo.divide %t, %d : tensor<4xf32>
  return %q : tensor<4xf32>
}}""")
    ranged, guarded = program(False), program(True)
    c = jnp.ones(4, jnp.float32)
    x = jnp.asarray([0.0, 1.0, -2.0, 0.5], jnp.float32)
    z = jnp.asarray([-100.0, 0.0, 1.5, 100.0], jnp.float32)
    assert "strong_zero_div_finite" in _primitives(lambda x: ranged(x, z), x)
    ct = jnp.asarray([1.0, 0.0, 2.0, 1.0], jnp.float32)
    got = jax.vjp(ranged, x, z)[1](ct)
    want = jax.vjp(lambda x, z: guarded(x, z, c), x, z)[1](ct)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        assert np.all(np.isfinite(g))
    tangents = (jnp.asarray([1.0, 0.0, 0.5, 2.0], jnp.float32), ct)
    np.testing.assert_array_equal(jax.jvp(ranged, (x, z), tangents)[1],
                                  jax.jvp(lambda x, z: guarded(x, z, c), (x, z), tangents)[1])


def test_products_finite_by_range_batch():
    """vmap of the gradient and of the hessian through the one-side-guarded products and
    quotients (their batching rules) equals the guarded program's."""
    ranged, guarded = _layer_norm(False), _layer_norm(True)
    xs = jnp.asarray(np.random.default_rng(1).normal(size=(3, 4, 8)), jnp.float32)
    s, eps = jnp.ones((4, 8), jnp.float32), jnp.float32(1e-5)
    np.testing.assert_array_equal(
        jax.vmap(jax.grad(lambda x: jnp.sum(ranged(x, s))))(xs),
        jax.vmap(jax.grad(lambda x: jnp.sum(guarded(x, s, eps))))(xs))
    sig, sig_guarded = _sigmoid_product(False), _sigmoid_product(True)
    x, one = jnp.asarray(np.random.default_rng(2).normal(size=(5, 4)), jnp.float32), \
        jnp.ones(4, jnp.float32)
    np.testing.assert_array_equal(
        jax.vmap(jax.hessian(lambda x: jnp.sum(sig(x))))(x),
        jax.vmap(jax.hessian(lambda x: jnp.sum(sig_guarded(x, one))))(x))


# ------------------------------------------------------------------ direct linearizations

def _linearized_cases():
    """name -> f(x, y): each of shlo2jax's primitives with a linearization rule, on values
    with zeros, infinities, NaN and negatives (the strong-zero guards' cases)."""
    from shlo2jax.gradients import strong_zero_ops
    sz = strong_zero_ops()
    dims = (((1,), (0,)), ((), ()))
    return {
        "mul": sz.mul, "div": sz.div, "atan2": sz.atan2, "pow": sz.pow,
        "exp": lambda x, y: sz.exp(x) * y, "expm1": lambda x, y: sz.expm1(x) * y,
        "log": lambda x, y: sz.log(x) * y, "log1p": lambda x, y: sz.log1p(x) * y,
        "sqrt": lambda x, y: sz.sqrt(x) * y, "rsqrt": lambda x, y: sz.rsqrt(x) * y,
        "cbrt": lambda x, y: sz.cbrt(x) * y, "tan": lambda x, y: sz.tan(x) * y,
        "square": lambda x, y: sz.mul(x, x) * y,
        "sz_mul": sz.sz_mul, "sz_div": sz.sz_div,
        "mul_finite_x": lambda x, y: sz.mul_finite(x, y, (True, False)),
        "mul_finite_y": lambda x, y: sz.mul_finite(x, y, (False, True)),
        "div_finite_reciprocal": lambda x, y: sz.div_finite(x, y, (True, False)),
        "div_finite_quotient": lambda x, y: sz.div_finite(x, y, (False, True)),
        "dot_general": lambda x, y: dot_general(
            jnp.reshape(x, (2, 4)), jnp.reshape(y, (4, 2)), dims).reshape(4) * x[:4],
    }


_LIN_X = np.asarray([0.0, 1.5, -2.0, np.inf, 0.25, 3.0, np.nan, -0.0], np.float32)
_LIN_Y = np.asarray([2.0, 0.0, 0.5, 1.0, -np.inf, 4.0, 1.0, 3.0], np.float32)
_LIN_CT = np.asarray([1.0, 0.0, -2.0, 0.0, 1.0, 0.5, 0.0, 1.0], np.float32)


def _derivatives(f):
    """Reverse mode of f at _LIN_X, _LIN_Y: the cotangents with both, with each operand
    alone (a rule with one zero tangent) and the gradient of a gradient (the tangent
    products' own rules), as numpy arrays."""
    x, y, ct = map(jnp.asarray, (_LIN_X, _LIN_Y, _LIN_CT))
    n = f(x, y).shape[0]
    ct = ct[:n]

    def loss(x, y):
        return jnp.sum(f(x, y) * ct)
    first = jax.grad(loss, argnums=(0, 1))(x, y)
    alone = jax.grad(loss, argnums=0)(x, y), jax.grad(loss, argnums=1)(x, y)
    weights = jnp.arange(8.0, dtype=jnp.float32) - 3.0
    second = jax.grad(lambda x, y: jnp.sum(jax.grad(loss)(x, y) * weights),
                      argnums=(0, 1))(x, y)
    return [np.asarray(a) for a in (*first, *alone, *second)]


@contextlib.contextmanager
def _direct_linearize(on: bool):
    """jax's reverse mode with direct linearization (the rules; the default from jax 0.7) or
    through JVPs (partial evaluation of the JVP rules, no linearization rules)."""
    before = jax.config.jax_use_direct_linearize
    jax.config.update("jax_use_direct_linearize", on)
    try:
        yield
    finally:
        jax.config.update("jax_use_direct_linearize", before)


@pytest.fixture
def jvp_path():
    with _direct_linearize(True):  # (what the tests compare with it, on every jax)
        yield functools.partial(_direct_linearize, False)


@pytest.mark.parametrize("name", sorted(_linearized_cases()))
def test_linearizations_give_the_jvps_gradients(name, jvp_path):
    """Each rule's reverse mode, first and second order, is the JVP path's bit for bit (NaN
    where it is NaN): a rule that routed a residual to the wrong tangent, or computed a
    tangent other than its JVP's, fails here."""
    f = _linearized_cases()[name]
    got = _derivatives(f)
    with jvp_path():
        want = _derivatives(f)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("name", sorted(_linearized_cases()))
def test_linearizations_stage_the_jvps_equations(name, monkeypatch):
    """The gradient's jaxpr with a rule is the one jax builds from the JVP without it (the
    same primitives in the same order, so transposes and higher orders are unchanged), and
    no equation of shlo2jax's primitives goes through jax's fallback (the per-equation
    tracing of its JVP that the rules save)."""
    from shlo2jax.compat import ad
    f = _linearized_cases()[name]
    x, y = jnp.asarray(_LIN_X), jnp.asarray(_LIN_Y)

    def staged():
        grad = jax.grad(lambda x, y: jnp.sum(f(x, y)), argnums=(0, 1))
        return str(jax.make_jaxpr(grad)(x, y))

    fallback = ad.fallback_linearize_rule
    through_fallback = []

    def spy(prim, *args, **params):
        through_fallback.append(prim.name)
        return fallback(prim, *args, **params)
    monkeypatch.setattr(ad, "fallback_linearize_rule", spy)
    with _direct_linearize(True):  # (jax 0.6's default is off)
        with_rules = staged()
        ours = [p for p in ad.primitive_linearizations if _shlo2jax_primitive(p.name)]
        assert ours and not [n for n in through_fallback if _shlo2jax_primitive(n)]
        for prim in ours:
            monkeypatch.delitem(ad.primitive_linearizations, prim)
        assert staged() == with_rules
    assert any(_shlo2jax_primitive(n) for n in through_fallback)


def _shlo2jax_primitive(name: str) -> bool:
    return "strong_zero" in name or name == "dot_general_lhs_contracted"


def test_linearizations_batch(jvp_path):
    """vmap of the gradient through the rules equals the JVP path's."""
    f = _linearized_cases()["rsqrt"]
    ys = jnp.stack([jnp.asarray(_LIN_Y), 2 * jnp.asarray(_LIN_Y)])

    def batched():
        return jax.vmap(jax.grad(lambda x, y: jnp.sum(f(x, y))), in_axes=(None, 0))(
            jnp.asarray(_LIN_X), ys)
    got = batched()
    with jvp_path():
        np.testing.assert_array_equal(got, batched())
