"""jax.vmap over translated programs: every argument, control flow, sort, gather, scatter
(including general-body scatters), and real models batched over their inputs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export as jax_export
from jax import lax

import shlo2jax

RNG = np.random.default_rng(1)


def normal(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def export(fn, *args):
    specs = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype),
                                   args)
    text = jax_export.export(jax.jit(fn))(*specs).mlir_module()
    return shlo2jax.load(text), text


def _loop(fn, args, in_axes):
    """The reference: fn applied to each batch element in turn."""
    size = next(np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None)
    outs = [fn(*[a if ax is None else np.take(a, k, axis=ax) for a, ax in zip(args, in_axes)])
            for k in range(size)]
    return jax.tree_util.tree_map(lambda *xs: np.stack(xs), *outs)


def _uncounted_while(x, n):
    return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, jnp.sin(c[1]) + c[0]),
                          (0, x))[1]


def _scatter_family(x, i, u):
    x = jnp.asarray(x)
    return (x.at[i].add(u), x.at[i].set(u), x.at[i].max(u), x.at[i].multiply(u))


CASES = {
    "counted_while": (lambda x, w: lax.fori_loop(0, 3, lambda k, h: jnp.tanh(h @ w) + k, x),
                      (normal(2, 3), normal(3, 3)), "stablehlo.while"),
    "uncounted_while": (_uncounted_while, (normal(4), np.int32(3)), "stablehlo.while"),
    "cond": (lambda p, x: lax.cond(p > 0, jnp.sin, jnp.cos, x), (np.float32(1), normal(3)),
             "stablehlo.case"),
    "case": (lambda k, x: lax.switch(k, [jnp.sin, jnp.cos, jnp.exp], x), (np.int32(1), normal(3)),
             "stablehlo.case"),
    "sort": (lambda x, y: lax.sort((x, y), num_keys=1), (normal(5), normal(5)), "stablehlo.sort"),
    "gather": (lambda x, i: jnp.asarray(x)[i], (normal(6, 2), np.array([4, 0, 5], np.int32)), "stablehlo.gather"),
    "scatter": (_scatter_family, (normal(5, 2), np.array([1, 3, 1], np.int32), normal(3, 2)),
                "stablehlo.scatter"),
    "dynamic_slice": (lambda x, i: lax.dynamic_slice(x, (i, i), (2, 2)),
                      (normal(4, 5), np.int32(1)), "stablehlo.dynamic_slice"),
}


def _batched(a, size=3):
    a = np.asarray(a)
    if a.dtype.kind in "iu":   # stay in range for indices and branch numbers
        return np.stack([(a + k) % 3 if a.ndim == 0 else (a + k) % 3 for k in range(size)])
    return np.stack([a * (1 + 0.5 * k) - 0.3 * k for k in range(size)])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_over_each_argument(name):
    fn, args, op = CASES[name]
    program, text = export(fn, *args)
    assert op in text
    n = len(args)
    for in_axes in [tuple(0 if j == k else None for j in range(n)) for k in range(n)] + [(0,) * n]:
        batched = [_batched(a) if ax == 0 else a for a, ax in zip(args, in_axes)]
        expected = jax.vmap(fn, in_axes=in_axes)(*batched)
        actual = jax.vmap(program, in_axes=in_axes)(*batched)
        for a, e in zip(jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected)):
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6, err_msg=str(in_axes))


GENERAL_SCATTER = """
func.func @main(%x: tensor<4x2xf32>, %i: tensor<3x1xi32>, %u: tensor<3x2xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>) {
  %two = stablehlo.constant dense<2.0> : tensor<4x2xf32>
  %y = stablehlo.multiply %x, %two : tensor<4x2xf32>
  %three = stablehlo.constant dense<3.0> : tensor<3x2xf32>
  %v = stablehlo.add %u, %three : tensor<3x2xf32>
  %r:2 = "stablehlo.scatter"(%x, %y, %i, %u, %v) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<f32>, %d: tensor<f32>):
      %s = stablehlo.subtract %a, %c : tensor<f32>
      %m = stablehlo.multiply %b, %d : tensor<f32>
      stablehlo.return %s, %m : tensor<f32>, tensor<f32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>} : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<3x1xi32>, tensor<3x2xf32>, tensor<3x2xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>)
  return %r#0, %r#1 : tensor<4x2xf32>, tensor<4x2xf32>
}
"""


def _general_scatter_reference(x, i, u):
    sub, mul = x.copy(), x * 2
    for row, k in enumerate(i[:, 0]):
        if 0 <= k < x.shape[0]:
            sub[k] -= u[row]
            mul[k] *= u[row] + 3
    return sub, mul


@pytest.mark.parametrize("in_axes", [(0, None, None), (None, 0, None), (None, None, 0), (0, 0, 0),
                                     (1, None, 1)])
def test_vmap_general_body_scatter(in_axes):
    program = shlo2jax.load(GENERAL_SCATTER)
    x, i, u = normal(4, 2), np.array([[1], [3], [1]], np.int32), normal(3, 2)
    batch = {0: lambda a: np.stack([a, a * 2 + 1]), 1: lambda a: np.stack([a, a * 2 + 1], axis=1)}
    indices = np.stack([i, np.array([[0], [7], [2]], np.int32)])   # 7: out of bounds, skipped
    args = [x if in_axes[0] is None else batch[in_axes[0]](x),
            i if in_axes[1] is None else indices,
            u if in_axes[2] is None else batch[in_axes[2]](u)]
    expected = _loop(lambda *a: _general_scatter_reference(*[np.asarray(v) for v in a]), args,
                     in_axes)
    actual = jax.vmap(program, in_axes=in_axes)(*args)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, rtol=1e-6)


# ------------------------------------------------------------- models batched

def mlp(params, x):
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return h @ params["w2"]


def cnn(params, x):
    y = lax.conv_general_dilated(x[None], params["conv"], (1, 1), "SAME",
                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y = (y - jnp.mean(y, axis=(0, 1, 2))) * lax.rsqrt(jnp.var(y, axis=(0, 1, 2)) + 1e-5)
    y = lax.reduce_window(jax.nn.relu(y), -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    return y.reshape(-1) @ params["head"]


def transformer(params, x):
    def layer(h, w):
        att = jax.nn.softmax((h @ w) @ h.T / 2.0)
        h = h + att @ h
        return (h - h.mean(-1, keepdims=True)) / (h.std(-1, keepdims=True) + 1e-5), None
    return lax.scan(layer, x, params["layers"])[0].sum(0)


def rnn(params, x):
    return lax.fori_loop(0, x.shape[0], lambda i, h: jnp.tanh(h @ params["w"] + x[i]),
                         jnp.zeros(x.shape[1]))


MODELS = {
    "mlp": (mlp, {"w1": normal(4, 6), "b1": normal(6), "w2": normal(6, 2)}, normal(5, 4)),
    "cnn": (cnn, {"conv": normal(3, 3, 1, 2) * 0.5, "head": normal(4 * 4 * 2, 3)},
            normal(5, 8, 8, 1)),
    "transformer": (transformer, {"layers": normal(2, 4, 4) * 0.3}, normal(5, 3, 4)),
    "rnn": (rnn, {"w": normal(3, 3) * 0.5}, normal(5, 4, 3)),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_vmap_over_batch(name):
    fn, params, xs = MODELS[name]
    flat, tree = jax.tree_util.tree_flatten(params)
    program, _ = export(lambda leaves, x: fn(jax.tree_util.tree_unflatten(tree, leaves), x),
                        flat, xs[0])
    translated = lambda p, x: program(*jax.tree_util.tree_leaves(p), x)
    expected = jax.vmap(fn, in_axes=(None, 0))(params, jnp.asarray(xs))
    np.testing.assert_allclose(jax.vmap(translated, in_axes=(None, 0))(params, xs), expected,
                               rtol=1e-5, atol=1e-5)
    # Per-example gradients: vmap of grad.
    loss = lambda model: lambda p, x: jnp.sum(jnp.sin(model(p, x)))
    expected = jax.vmap(jax.grad(loss(fn)), in_axes=(None, 0))(params, jnp.asarray(xs))
    actual = jax.vmap(jax.grad(loss(translated)), in_axes=(None, 0))(params, xs)
    for a, e in zip(jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected)):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5 * np.max(np.abs(e)))


ONE_OPERAND_SCATTER = """
func.func @main(%x: tensor<4x2xf32>, %i: tensor<3x1xi32>, %u: tensor<3x2xf32>) -> tensor<4x2xf32> {
  %r = "stablehlo.scatter"(%x, %i, %u) ({
    ^bb0(%a: tensor<f32>, %c: tensor<f32>):
      %s = stablehlo.subtract %a, %c : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>} : (tensor<4x2xf32>, tensor<3x1xi32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  return %r : tensor<4x2xf32>
}
"""


@pytest.mark.parametrize("in_axes", [(0, None, None), (None, 0, None), (None, None, 1), (1, 0, 0)])
def test_vmap_general_body_scatter_one_operand(in_axes):
    program = shlo2jax.load(ONE_OPERAND_SCATTER)
    x, i, u = normal(4, 2), np.array([[1], [3], [1]], np.int32), normal(3, 2)
    batch = {0: lambda a: np.stack([a, a * 2 + 1]), 1: lambda a: np.stack([a, a * 2 + 1], axis=1)}
    indices = np.stack([i, np.array([[0], [-1], [2]], np.int32)])   # -1: out of bounds, skipped
    args = [x if in_axes[0] is None else batch[in_axes[0]](x),
            i if in_axes[1] is None else indices,
            u if in_axes[2] is None else batch[in_axes[2]](u)]
    expected = _loop(lambda *a: _general_scatter_reference(*[np.asarray(v) for v in a])[0], args,
                     in_axes)
    np.testing.assert_allclose(jax.vmap(program, in_axes=in_axes)(*args), expected, rtol=1e-6)
