"""The shape of what reverse mode emits, where it decides XLA's compile time (issue 32):
`shlo2jax.gradients.dot_general` takes, for each cotangent, the operand order whose product
is the operand as laid out, so attention's batched products need no transpose back."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from shlo2jax.gradients import dot_general

# (lhs shape, rhs shape, dimension numbers, the operand whose cotangent needs no transpose)
CASES = [
    # attention's values x scores ([b, k, h, d] x [b, h, q, k] -> [b, h, d, q]): the scores'
    # cotangent in lax's order (ct x values) is [b, h, q, k] as it is
    ((3, 7, 2, 4), (3, 2, 5, 7), (((1,), (3,)), ((0, 2), (0, 1))), 1),
    # x^T w (the lhs contracted on its leading dimension): its cotangent as w x ct is x's
    # layout, where lax's (ct x w) is its transpose
    ((5, 6), (5, 4), (((0,), (0,)), ((), ())), 0),
    # a dense layer's weight: x contracted with the cotangent (as before)
    ((3, 7, 5), (5, 4), (((2,), (0,)), ((), ())), 1),
]


def _args(*shapes):
    rng = np.random.default_rng(0)
    return [jnp.asarray(rng.standard_normal(s), np.float32) for s in shapes]


def _loss(dot, dims, proj):
    return lambda a, b: jnp.sum(jnp.sin(dot(a, b, dims)) * proj)


@pytest.mark.parametrize("lhs_shape,rhs_shape,dims,operand", CASES)
def test_the_cotangent_is_computed_in_the_operands_layout(lhs_shape, rhs_shape, dims, operand):
    a, b = _args(lhs_shape, rhs_shape)
    (proj,) = _args(jax.eval_shape(lambda a, b: lax.dot_general(a, b, dims), a, b).shape)
    jaxpr = jax.make_jaxpr(jax.grad(_loss(dot_general, dims, proj), argnums=operand))(a, b)
    kinds = [e.primitive.name for e in jaxpr.jaxpr.eqns]
    assert kinds.count("dot_general") == 1 and "transpose" not in kinds, kinds


@pytest.mark.parametrize("lhs_shape,rhs_shape,dims,operand", CASES)
def test_values_and_gradients_are_lax_dot_generals(lhs_shape, rhs_shape, dims, operand):
    a, b = _args(lhs_shape, rhs_shape)
    (proj,) = _args(jax.eval_shape(lambda a, b: lax.dot_general(a, b, dims), a, b).shape)
    assert np.array_equal(jax.jit(lambda a, b: dot_general(a, b, dims))(a, b),
                          jax.jit(lambda a, b: lax.dot_general(a, b, dims))(a, b))
    grads = [jax.jit(jax.grad(_loss(dot, dims, proj), argnums=(0, 1)))(a, b)
             for dot in (dot_general, lax.dot_general)]
    for got, want in zip(*grads):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # vmap of the gradient, and second order (forward over reverse)
    stacked = jnp.stack([a, 2 * a])
    batched = [jax.vmap(jax.grad(_loss(dot, dims, proj), argnums=1), in_axes=(0, None))(
        stacked, b) for dot in (dot_general, lax.dot_general)]
    np.testing.assert_allclose(*batched, rtol=1e-5, atol=1e-6)
    hvps = [jax.jvp(jax.grad(lambda b: _loss(dot, dims, proj)(a, b)), (b,),
                    (jnp.ones_like(b),))[1] for dot in (dot_general, lax.dot_general)]
    np.testing.assert_allclose(*hvps, rtol=1e-5, atol=1e-5)
