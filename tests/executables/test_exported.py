"""A jax function exported with jax.export and loaded back behaves like the original:
same outputs, same jax.grad, same jax.vmap."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export as jax_export
from jax import lax

import shlo2jax


@jax.jit
def _row_max(h):
    return jnp.max(h, axis=-1)  # a nested jit: a func.call in the export


def model(w, x):
    def body(i, carry):
        return carry * 0.9 + jnp.tanh(carry @ w)
    h = lax.fori_loop(0, 3, body, x)  # a counted while loop
    h = lax.cond(jnp.sum(h) > 0, lambda h: h * 2, lambda h: h - 1, h)
    return jnp.sum(_row_max(h))


W = (np.random.default_rng(0).standard_normal((4, 4)) * 0.5).astype(np.float32)
X = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)


@pytest.fixture(scope="module")
def loaded():
    spec_w = jax.ShapeDtypeStruct(W.shape, jnp.float32)
    spec_x = jax.ShapeDtypeStruct(X.shape, jnp.float32)
    exported = jax_export.export(jax.jit(model))(spec_w, spec_x)
    text = exported.mlir_module()
    for op in ("stablehlo.while", "stablehlo.case", "stablehlo.reduce", "stablehlo.dot_general",
               "call @"):
        assert op in text, op  # the export really contains what this test is about
    return shlo2jax.load(exported)


def test_outputs(loaded):
    np.testing.assert_allclose(loaded(W, X), model(W, X), rtol=1e-6)


def test_grad(loaded):
    expected = jax.grad(model, argnums=(0, 1))(W, X)
    actual = jax.grad(loaded, argnums=(0, 1))(W, X)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


def test_vmap(loaded):
    xs = np.stack([X, -X, 2 * X])
    expected = jax.vmap(model, in_axes=(None, 0))(W, xs)
    np.testing.assert_allclose(jax.vmap(loaded, in_axes=(None, 0))(W, xs), expected, rtol=1e-6)


def test_jit_of_grad(loaded):
    expected = jax.jit(jax.grad(model))(W, X)
    np.testing.assert_allclose(jax.jit(jax.grad(loaded))(W, X), expected, rtol=1e-5, atol=1e-6)
