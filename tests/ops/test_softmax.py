"""A softmax's shift by its maximum (ops/_softmax.py): the derivative through the maximum is
stopped where the shifted values are only normalized, as the producers' softmax has it.

Programs are jax.export's of jax.nn.softmax and log_softmax (whose derivatives give the
expected gradients) and of the same arithmetic written out, read elsewhere or normalized
otherwise (whose jax.grad, through the maximum, gives them).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shlo2jax

from _helpers import staged_jaxpr

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 5)).astype(np.float32)
W = RNG.standard_normal((2, 3, 5)).astype(np.float32)
X[0, 1, :2] = X[0, 1, 2]  # tied maxima: where the maximum's derivative shares the cotangent


def _exported(fn, *args):
    avals = [jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype) for a in args]
    return shlo2jax.load(jax.export.export(jax.jit(fn))(*avals).mlir_module())


def _shifts(program, *args) -> int:
    """How many subtracts the translation staged with their subtrahend's gradient stopped."""
    return [e.primitive.name for e in staged_jaxpr(program, *args).eqns].count("stop_gradient")


def _grad(fn, *args):
    return jax.grad(lambda *a: sum((o * W).sum() for o in jax.tree.leaves(fn(*a))))(*args)


NORMALIZATIONS = {
    "softmax": lambda x: jax.nn.softmax(x, axis=-1),
    "softmax_of_two_axes": lambda x: jax.nn.softmax(x, axis=(0, 2)),
    "log_softmax": lambda x: jax.nn.log_softmax(x, axis=1),
    "masked_softmax": lambda x: jax.nn.softmax(
        jnp.where(jnp.arange(5) < 3, x, -jnp.inf), axis=-1),
}


@pytest.mark.parametrize("name", NORMALIZATIONS)
def test_a_normalized_shift_has_the_producers_derivative(name):
    fn = NORMALIZATIONS[name]
    program = _exported(fn, X)
    assert _shifts(program, X) == 1
    np.testing.assert_allclose(program(X), fn(X), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(_grad(program.entry, X), _grad(fn, X), rtol=1e-5, atol=1e-6)
    # nothing of the maximum's derivative is left: its tie test is an `eq` (jax 0.6's
    # reverse mode still stages the forward part of that derivative, dead, for XLA to drop)
    if _release(jax.__version__) >= (0, 7):
        backward = str(jax.make_jaxpr(lambda x: _grad(program.entry, x))(X))
        assert " eq " not in backward, backward


def _release(version: str) -> tuple:
    return tuple(int(p) for p in version.split(".")[:2])


def _written_out(x, axis=-1, total_axis=None, plus=0.0, also=None):
    """softmax(x) as its arithmetic, the maximum differentiated (jax.grad's expectation)."""
    m = jnp.max(x, axis, keepdims=True)
    e = jnp.exp(x - m)
    total = e.sum(axis if total_axis is None else total_axis, keepdims=True) + plus
    out = e / total
    return out if also is None else (out, also(x - m, e))


NOT_NORMALIZED = {
    # what reads the shifted values or their exp also escapes the normalization
    "exp_returned": lambda x: _written_out(x, also=lambda s, e: e),
    "shift_returned": lambda x: _written_out(x, also=lambda s, e: s * 2.0),
    # normalized over other dimensions than the maximum's, or not a plain sum
    "summed_over_another_axis": lambda x: _written_out(x, axis=-1, total_axis=1),
    "sum_plus_one": lambda x: _written_out(x, plus=1.0),
    # shifted by another value's maximum
    "another_maximum": lambda x: jnp.exp(x - jnp.max(x * 2.0, -1, keepdims=True)) / jnp.exp(
        x - jnp.max(x * 2.0, -1, keepdims=True)).sum(-1, keepdims=True),
}


@pytest.mark.parametrize("name", NOT_NORMALIZED)
def test_a_shift_read_otherwise_keeps_the_maximums_derivative(name):
    fn = NOT_NORMALIZED[name]
    program = _exported(fn, X)
    assert _shifts(program, X) == 0
    np.testing.assert_allclose(_grad(program.entry, X), _grad(fn, X), rtol=1e-5, atol=1e-6)


def _spread_along(dims):
    return f"""
func.func @main(%x: tensor<3x3xf32>) -> tensor<3x3xf32> {{
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1]
      : (tensor<3x3xf32>, tensor<f32>) -> tensor<3xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [{dims}] : (tensor<3xf32>) -> tensor<3x3xf32>
  %s = stablehlo.subtract %x, %mb : tensor<3x3xf32>
  %e = stablehlo.exponential %s : tensor<3x3xf32>
  %t = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<3x3xf32>, tensor<f32>) -> tensor<3xf32>
  %tb = stablehlo.broadcast_in_dim %t, dims = [0] : (tensor<3xf32>) -> tensor<3x3xf32>
  %y = stablehlo.divide %e, %tb : tensor<3x3xf32>
  return %y : tensor<3x3xf32>
}}"""


@pytest.mark.parametrize("dims, shift", [("0", 1), ("1", 0)])
def test_the_maximum_must_be_spread_over_the_rows_it_was_taken_of(dims, shift):
    # dims = [1] spreads row i's maximum down column i: not a shift of row i
    program = shlo2jax.load(_spread_along(dims))
    x = X[0, :, :3]
    assert _shifts(program, x) == shift
    m = x.max(1)
    mb = m[:, None] if dims == "0" else m[None, :]

    def source(v):
        m = v.max(1)
        e = jnp.exp(v - (m[:, None] if dims == "0" else m[None, :]))
        return e / e.sum(1, keepdims=True)
    np.testing.assert_allclose(program(x), np.exp(x - mb) / np.exp(x - mb).sum(1, keepdims=True),
                               rtol=1e-6)
    w = W[0, :, :3]
    got = jax.grad(lambda v: (program.entry(v) * w).sum())(x)
    np.testing.assert_allclose(got, jax.grad(lambda v: (source(v) * w).sum())(x),
                               rtol=1e-5, atol=1e-6)


def test_a_fully_masked_row_selected_away_has_zero_gradients():
    # a row all -inf shifts to NaN: the producer's program selects it away, and its
    # gradient stays zero (finite) with the maximum's derivative stopped
    mask = np.array([True, True, False, False, False])
    rows = np.array([[True], [False], [True]])

    def fn(x):
        masked = jnp.where(mask & rows, x, -jnp.inf)
        return jnp.where(rows, jax.nn.softmax(masked, axis=-1), 0.0)
    program = _exported(fn, X)
    assert _shifts(program, X) == 1
    got = _grad(program.entry, X)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, _grad(fn, X), rtol=1e-5, atol=1e-6)
    assert not got[:, 1].any()
