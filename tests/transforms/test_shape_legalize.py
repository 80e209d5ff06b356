"""Shape-dialect ops in the form TensorFlow's SavedModel -> StableHLO converter leaves them for
a `?` batch (shlo2jax/transforms/shape_legalize.py): rewritten into StableHLO at decode, refined per call,
forward, jax.grad, jit and vmap against jax; shapes that do not broadcast are a ShapeError."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shlo2jax
from shlo2jax.errors import ShapeAssertionError, ShapeError, UnsupportedError

# x * w (w broadcast along a `?` batch, inside the converter's cstr/assuming guard), then
# reshaped to (3, batch) through tensor.dim / tensor.from_elements / index constants.
SCALE_AND_TRANSPOSE = """
func.func @main(%arg0: tensor<?x3xf32>, %arg1: tensor<3xf32>) -> tensor<3x?xf32> {
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : index
  %w_shape = shape.const_shape [3] : tensor<1xindex>
  %0 = shape.shape_of %arg0 : tensor<?x3xf32> -> tensor<2xindex>
  %1 = shape.cstr_broadcastable %0, %w_shape : tensor<2xindex>, tensor<1xindex>
  %2 = shape.assuming %1 -> (tensor<?x3xf32>) {
    %3 = shape.shape_of %arg0 : tensor<?x3xf32> -> tensor<2xindex>
    %4 = shape.broadcast %3, %w_shape : tensor<2xindex>, tensor<1xindex> -> tensor<2xindex>
    %5 = stablehlo.dynamic_broadcast_in_dim %arg0, %4, dims = [0, 1] : (tensor<?x3xf32>, tensor<2xindex>) -> tensor<?x3xf32>
    %6 = stablehlo.dynamic_broadcast_in_dim %arg1, %4, dims = [1] : (tensor<3xf32>, tensor<2xindex>) -> tensor<?x3xf32>
    %7 = stablehlo.multiply %5, %6 : tensor<?x3xf32>
    shape.assuming_yield %7 : tensor<?x3xf32>
  }
  %dim = tensor.dim %2, %c0 : tensor<?x3xf32>
  %shape = tensor.from_elements %c3, %dim : tensor<2xindex>
  %8 = stablehlo.dynamic_reshape %2, %shape : (tensor<?x3xf32>, tensor<2xindex>) -> tensor<3x?xf32>
  return %8 : tensor<3x?xf32>
}
"""

# x + y for two `?` vectors: numpy's broadcasting, guarded by shape.cstr_broadcastable.
BROADCAST_ADD = """
func.func @main(%arg0: tensor<?xf32>, %arg1: tensor<?xf32>) -> tensor<?xf32> {
  %0 = shape.shape_of %arg0 : tensor<?xf32> -> tensor<1xindex>
  %1 = shape.shape_of %arg1 : tensor<?xf32> -> tensor<1xindex>
  %2 = shape.cstr_broadcastable %0, %1 : tensor<1xindex>, tensor<1xindex>
  %3 = shape.assuming %2 -> (tensor<?xf32>) {
    %4 = shape.broadcast %0, %1 : tensor<1xindex>, tensor<1xindex> -> tensor<1xindex>
    %5 = stablehlo.dynamic_broadcast_in_dim %arg0, %4, dims = [0] : (tensor<?xf32>, tensor<1xindex>) -> tensor<?xf32>
    %6 = stablehlo.dynamic_broadcast_in_dim %arg1, %4, dims = [0] : (tensor<?xf32>, tensor<1xindex>) -> tensor<?xf32>
    %7 = stablehlo.add %5, %6 : tensor<?xf32>
    shape.assuming_yield %7 : tensor<?xf32>
  }
  return %3 : tensor<?xf32>
}
"""


def _reference(x, w):
    return jnp.reshape(x * w, (3, x.shape[0]))


@pytest.mark.parametrize("batch", [1, 2, 5])
def test_forward_matches_jax(batch):
    program = shlo2jax.load(SCALE_AND_TRANSPOSE, strict=True)
    rng = np.random.default_rng(batch)
    x = rng.standard_normal((batch, 3)).astype(np.float32)
    w = rng.standard_normal(3).astype(np.float32)
    got = program(x, w)
    assert got.shape == (3, batch)
    np.testing.assert_allclose(got, _reference(x, w), rtol=1e-6)
    jitted = jax.jit(program)(x, w)
    np.testing.assert_allclose(jitted, _reference(x, w), rtol=1e-6)


def test_grad_and_vmap_match_jax():
    program = shlo2jax.load(SCALE_AND_TRANSPOSE)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = rng.standard_normal(3).astype(np.float32)
    proj = rng.standard_normal((3, 4)).astype(np.float32)

    def loss(f):
        return lambda x, w: jnp.sum(f(x, w) * proj)

    got = jax.grad(loss(program), argnums=(0, 1))(x, w)
    want = jax.grad(loss(_reference), argnums=(0, 1))(x, w)
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=1e-5)
    xs = rng.standard_normal((2, 4, 3)).astype(np.float32)
    batched = jax.vmap(program, in_axes=(0, None))(xs, w)
    np.testing.assert_allclose(batched, jax.vmap(_reference, in_axes=(0, None))(xs, w),
                               rtol=1e-6)


def test_load_leaves_no_shape_dialect_op():
    program = shlo2jax.load(SCALE_AND_TRANSPOSE, strict=True)
    names = set(program.module.op_histogram())
    assert not {n for n in names if n.split(".")[0] in ("shape", "tensor", "arith", "builtin")}
    assert "stablehlo.custom_call" in names  # the broadcast check stays, as a shape_assertion


@pytest.mark.parametrize("shapes", [((3,), (3,)), ((3,), (1,)), ((1,), (4,))])
def test_broadcastable_shapes_broadcast_like_numpy(shapes):
    program = shlo2jax.load(BROADCAST_ADD)
    x, y = (np.arange(np.prod(s), dtype=np.float32).reshape(s) + 1 for s in shapes)
    np.testing.assert_array_equal(program(x, y), x + y)
    np.testing.assert_array_equal(jax.jit(program)(x, y), x + y)


@pytest.mark.parametrize("jit", [False, True])
def test_shapes_that_do_not_broadcast_are_a_shape_error(jit):
    program = shlo2jax.load(BROADCAST_ADD)
    run = jax.jit(program) if jit else program
    with pytest.raises(ShapeError, match="are not broadcastable"):
        run(np.ones(3, np.float32), np.ones(5, np.float32))


@pytest.mark.parametrize("jit", [False, True])
def test_the_check_holds_where_no_broadcast_would_fail(jit):
    """A witness guarding a region that broadcasts nothing: refinement succeeds, and the check
    is the shape_assertion run while tracing."""
    text = BROADCAST_ADD.replace("%7 = stablehlo.add %5, %6", "%7 = stablehlo.add %arg0, %arg0")
    program = shlo2jax.load(text)
    run = jax.jit(program) if jit else program
    np.testing.assert_array_equal(run(np.ones(3, np.float32), np.ones(1, np.float32)),
                                  np.full(3, 2, np.float32))
    with pytest.raises(ShapeAssertionError, match="are not broadcastable"):
        run(np.ones(3, np.float32), np.ones(5, np.float32))


def test_a_witness_used_otherwise_is_left_to_the_decoder():
    """A witness combined by shape.assuming_all is not rewritten: the module stays as it is and
    its ops are reported at load, never half rewritten."""
    text = BROADCAST_ADD.replace(
        "%3 = shape.assuming %2 ->",
        "%w = shape.assuming_all %2, %2\n  %3 = shape.assuming %w ->")
    with pytest.raises(UnsupportedError, match="shape.assuming_all"):
        shlo2jax.load(text, strict=True)
