"""Derivatives through translated programs: check_grads (order 2, forward and reverse) for
every differentiable op family, real models' gradients against the originals, and clear
errors where a program has no reverse-mode derivative."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export as jax_export
from jax import lax
from jax.test_util import check_grads

import shlo2jax
from shlo2jax import compat

RNG = np.random.default_rng(0)


def normal(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def export(fn, *args):
    """(translated program, its MLIR text) for `fn` exported with jax.export."""
    specs = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype),
                                   args)
    text = jax_export.export(jax.jit(fn))(*specs).mlir_module()
    return shlo2jax.load(text), text


# ------------------------------------------------------------- op families (float64)
#
# Each case: (function of float arrays, arguments, ops the export must contain). Integer
# operands (indices) are closed over so check_grads perturbs only the float ones.

def _conv(x, w):
    y = lax.conv_general_dilated(x, w, (2, 1), ((1, 1), (0, 1)), rhs_dilation=(1, 2),
                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return jnp.tanh(y)


def _argmax_value(x):
    # A two-operand (value, index) selection reduce, as jnp.argmax exports it, whose value
    # result is differentiated.
    def body(a, b):
        pick = (a[0] > b[0]) | ((a[0] == b[0]) & (a[1] < b[1]))
        return lax.select(pick, a[0], b[0]), lax.select(pick, a[1], b[1])
    iota = lax.broadcasted_iota(np.int32, x.shape, 1)
    values, index = lax.reduce((x, iota), (-np.inf, np.int32(0)), body, (1,))
    return values * 2 + jnp.sin(x[:, 0]) * index


def _scatters(x, u):
    x = jnp.asarray(x)
    idx = jnp.array([3, 1, 1, 0])
    return (x.at[idx].add(u) + x.at[idx].set(u * 2) * x + x.at[idx].max(u) + x.at[idx].min(u)
            + x.at[jnp.array([2, 0, 4, 1])].multiply(u, unique_indices=True))


def _dynamic(x, u, i):
    y = lax.dynamic_update_slice(x, u * u, (i, i - 1))
    return lax.dynamic_slice(y, (i - 1, i), (3, 2)) * 2


def _shapes(x, y):
    z = jnp.concatenate([x, y[:, ::2]], axis=1)             # concatenate, slice
    z = jnp.pad(z, ((1, 0), (0, 2)), constant_values=0.5)   # pad
    z = lax.pad(z, 0.0, ((0, 0, 1), (1, -1, 0)))            # interior + negative padding
    z = z.T.reshape(-1, 2)                                 # transpose, reshape
    return z * jnp.broadcast_to(x[:1, :2], z.shape)         # broadcast_in_dim


def _sort(x):
    s = jnp.sort(x, axis=0)
    order = jnp.argsort(x[:, 0])
    return s * jnp.arange(1.0, 5.0)[:, None] + x[order]


def _while(x, w):
    return lax.fori_loop(0, 4, lambda i, h: jnp.tanh(h @ w) + h * i, x)


def _branches(x, k):
    y = lax.cond(jnp.sum(x) > 0, lambda v: jnp.sin(v) * 2, lambda v: v ** 3, x)
    return lax.switch(k, [jnp.exp, jnp.cos, lambda v: v * v], y)


def _fft(x):
    spectrum = jnp.fft.rfft(x, axis=-1)
    return jnp.fft.irfft(spectrum * spectrum, n=x.shape[-1], axis=-1) + jnp.abs(
        jnp.fft.fft(x.astype(jnp.complex128))) ** 2


def _max_pool_grad(x, g):
    # jax exports the max-pool gradient as select_and_scatter (GE select, add scatter).
    pool = lambda y: lax.reduce_window(y, -jnp.inf, lax.max, (2, 2), (2, 1), ((0, 1), (1, 0)))
    return jax.vjp(pool, x)[1](g)[0] * x


CASES = {
    "elementwise": (lambda x, y: jnp.tanh(x) * jnp.exp(y) + x / (y * y + 1) + jnp.sqrt(x * x + 1)
                    + jnp.arctan2(x, y + 3) + jnp.maximum(x, y) + jax.nn.sigmoid(x) ** 1.5,
                    (normal(3, 4), normal(3, 4)), ("stablehlo.tanh", "stablehlo.atan2")),
    "dot_general": (lambda a, b: jnp.einsum("bij,bjk->bik", a, b) @ jnp.ones((5, 2)),
                    (normal(2, 3, 4), normal(2, 4, 5)), ("stablehlo.dot_general",)),
    "convolution": (_conv, (normal(1, 5, 4, 2), normal(3, 2, 2, 3)), ("stablehlo.convolution",)),
    "reduce": (lambda x: jnp.sum(x ** 2, axis=0) + jnp.max(x, axis=0) * jnp.prod(x, axis=0)
               + jax.nn.logsumexp(x, axis=0) + jnp.min(x, axis=0),
               (normal(3, 4),), ("stablehlo.reduce",)),
    "reduce_argmax": (_argmax_value, (normal(3, 5),), ("stablehlo.reduce",)),
    "reduce_window": (lambda x: (lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1),
                                                   (1, 2, 1, 1), "VALID") ** 2).sum()
                      + lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 1, 2, 1), "SAME")
                      .sum(axis=(1, 2)) + (jnp.cumsum(x, axis=1)[:, -1] ** 2).sum(axis=1)
                      + lax.cummax(x, axis=2)[:, -1, -1] + lax.cummin(x, axis=1)[:, -1, 0],
                      (normal(1, 4, 5, 2),), ("stablehlo.reduce_window",)),
    "select_and_scatter": (_max_pool_grad, (normal(5, 4), normal(3, 4)),
                           ("stablehlo.select_and_scatter",)),
    "gather": (lambda x: x[jnp.array([2, 0, 2])] * jnp.take_along_axis(
                   x, jnp.array([[1], [3], [0], [2]]), axis=1)[:3],
               (normal(4, 5),), ("stablehlo.gather",)),
    "scatter": (_scatters, (normal(5, 3), normal(4, 3)), ("stablehlo.scatter",)),
    "dynamic_slice": (lambda x, u: _dynamic(x, u, jnp.int32(2)), (normal(5, 4), normal(2, 3)),
                      ("stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice")),
    "shape_ops": (_shapes, (normal(3, 4), normal(3, 4)),
                  ("stablehlo.pad", "stablehlo.concatenate", "stablehlo.transpose")),
    "sort": (_sort, (normal(4, 3),), ("stablehlo.sort",)),
    "while": (_while, (normal(2, 3), normal(3, 3) * 0.5), ("stablehlo.while",)),
    "select": (lambda x, y: jnp.where(x > y, x * y, jnp.sin(y)) + lax.clamp(-0.5, x, 0.5),
               (normal(3, 4), normal(3, 4)), ("stablehlo.select",)),
    "fft": (_fft, (normal(2, 8),), ("stablehlo.fft",)),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_check_grads(name):
    fn, args, ops = CASES[name]
    with compat.enable_x64():
        program, text = export(fn, *args)
        for op in ops:
            assert op in text, op
        np.testing.assert_allclose(program(*args), fn(*args), rtol=1e-10, atol=1e-12)
        check_grads(program, args, order=2, modes=("fwd", "rev"))


@pytest.mark.slow
@pytest.mark.parametrize("k", [0, 1, 2, 7])
def test_check_grads_if_case(k):
    with compat.enable_x64():
        program, text = export(_branches, normal(3), np.int32(0))
        assert "stablehlo.case" in text
        x = normal(3)
        for sign in (1, -1):    # both sides of the cond
            xs = np.abs(x) * sign
            check_grads(lambda v: program(v, np.int32(k)), (xs,), order=2, modes=("fwd", "rev"))


LINALG = """
func.func @main(%a: tensor<3x3xf64>, %b: tensor<3x2xf64>) -> tensor<3x2xf64> {
  %t = stablehlo.transpose %a, dims = [1, 0] : (tensor<3x3xf64>) -> tensor<3x3xf64>
  %m = stablehlo.dot_general %a, %t, contracting_dims = [1] x [0] : (tensor<3x3xf64>, tensor<3x3xf64>) -> tensor<3x3xf64>
  %e = stablehlo.constant dense<[[3.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 3.0]]> : tensor<3x3xf64>
  %spd = stablehlo.add %m, %e : tensor<3x3xf64>
  %l = stablehlo.cholesky %spd, lower = true : tensor<3x3xf64>
  %x = "stablehlo.triangular_solve"(%l, %b) {left_side = true, lower = true, unit_diagonal = false, transpose_a = #stablehlo<transpose NO_TRANSPOSE>} : (tensor<3x3xf64>, tensor<3x2xf64>) -> tensor<3x2xf64>
  %y = "stablehlo.triangular_solve"(%l, %x) {left_side = true, lower = true, unit_diagonal = false, transpose_a = #stablehlo<transpose TRANSPOSE>} : (tensor<3x3xf64>, tensor<3x2xf64>) -> tensor<3x2xf64>
  return %y : tensor<3x2xf64>
}
"""


@pytest.mark.slow
def test_check_grads_cholesky_triangular_solve():
    a, b = normal(3, 3), normal(3, 2)
    with compat.enable_x64():
        program = shlo2jax.load(LINALG)
        spd = a @ a.T + 3 * np.eye(3)
        np.testing.assert_allclose(program(a, b), np.linalg.solve(spd, b), rtol=1e-10)
        check_grads(program, (a, b), order=2, modes=("fwd", "rev"))


# ------------------------------------------------------------- what has no derivative

UNCOUNTED_WHILE = """
func.func @main(%x: tensor<3xf32>, %n: tensor<i32>) -> tensor<3xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<3xf32>
  cond {
    %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %one : tensor<i32>
    %s = stablehlo.sine %v : tensor<3xf32>
    stablehlo.return %j, %s : tensor<i32>, tensor<3xf32>
  }
  return %r#1 : tensor<3xf32>
}
"""


def test_uncounted_while_differentiates_both_ways():
    # the trip count is an argument; the body is element-wise, so reverse mode is read off
    # forward mode (tests/test_gradient_fidelity.py covers the other kinds of loops)
    program = shlo2jax.load(UNCOUNTED_WHILE)
    x, n = np.array([0.1, 0.5, 1.0], np.float32), np.int32(3)
    _, tangent = jax.jvp(lambda v: program(v, n), (x,), (np.ones(3, np.float32),))
    expected, v = np.ones(3), x
    for _ in range(3):
        expected, v = expected * np.cos(v), np.sin(v)
    np.testing.assert_allclose(tangent, expected, rtol=1e-5)
    np.testing.assert_allclose(jax.grad(lambda v: program(v, n).sum())(x), expected, rtol=1e-5)


GENERAL_SCATTER = """
func.func @main(%x: tensor<4xf32>, %i: tensor<2x1xi32>, %u: tensor<2xf32>) -> tensor<4xf32> {
  %r = "stablehlo.scatter"(%x, %i, %u) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.subtract %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>} : (tensor<4xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


def test_general_scatter_derivative_names_the_op():
    program = shlo2jax.load(GENERAL_SCATTER)
    x, i, u = np.zeros(4, np.float32), np.array([[1], [1]], np.int32), np.ones(2, np.float32)
    np.testing.assert_array_equal(program(x, i, u), [0, -2, 0, 0])
    with pytest.raises(shlo2jax.TranslationError, match=r"stablehlo.scatter at "):
        jax.grad(lambda v: program(v, i, u).sum())(x)


def test_integer_outputs_get_float0_cotangents():
    def fn(x):
        return jnp.argmax(x, axis=1), jnp.max(x, axis=1) * 2
    x = normal(3, 4, dtype=np.float32)
    program, _ = export(fn, x)
    (index, value), vjp = jax.vjp(program, x)
    np.testing.assert_array_equal(index, np.argmax(x, axis=1))
    cotangent = (np.zeros(index.shape, jax.dtypes.float0), np.ones(3, np.float32))
    grad, = vjp(cotangent)
    expected = np.zeros_like(x)
    expected[np.arange(3), np.argmax(x, axis=1)] = 2
    np.testing.assert_allclose(grad, expected)
    _, tangents = jax.jvp(program, (x,), (np.ones_like(x),))
    assert tangents[0].dtype == jax.dtypes.float0
    np.testing.assert_allclose(tangents[1], np.full(3, 2.0))


# ------------------------------------------------------------- real models (float32)

def _dense(key, n_in, n_out):
    return {"w": jax.random.normal(key, (n_in, n_out)) / np.sqrt(n_in), "b": jnp.zeros(n_out)}


def mlp(params, x):
    h = jax.nn.relu(x @ params[0]["w"] + params[0]["b"])
    return jax.nn.log_softmax(h @ params[1]["w"] + params[1]["b"])


def mlp_params():
    k = jax.random.split(jax.random.key(1), 2)
    return [_dense(k[0], 6, 8), _dense(k[1], 8, 3)]


def cnn(params, x):
    y = lax.conv_general_dilated(x, params["conv"], (1, 1), "SAME",
                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))
    mean, var = jnp.mean(y, axis=(0, 1, 2)), jnp.var(y, axis=(0, 1, 2))   # batch norm
    y = (y - mean) * lax.rsqrt(var + 1e-5) * params["scale"] + params["shift"]
    y = jax.nn.relu(y)
    y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    y = lax.reduce_window(y, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "SAME") / 4
    return y.reshape(y.shape[0], -1) @ params["head"]


def cnn_params():
    k = jax.random.split(jax.random.key(2), 2)
    return {"conv": jax.random.normal(k[0], (3, 3, 2, 4)) * 0.3, "scale": jnp.ones(4) * 1.1,
            "shift": jnp.full(4, 0.1), "head": jax.random.normal(k[1], (4 * 4 * 4, 3)) * 0.2}


def _layer_norm(x, g, b):
    mu = jnp.mean(x, -1, keepdims=True)
    return (x - mu) * lax.rsqrt(jnp.var(x, -1, keepdims=True) + 1e-5) * g + b


def transformer(params, tokens):
    x = params["embed"][tokens] + params["pos"]

    def layer(h, p):
        q, k, v = (h @ p["wq"], h @ p["wk"], h @ p["wv"])
        att = jax.nn.softmax(jnp.einsum("sd,td->st", q, k) / np.sqrt(q.shape[-1])
                             + jnp.triu(jnp.full((h.shape[0],) * 2, -1e9), 1))
        h = _layer_norm(h + att @ v, p["g1"], p["b1"])
        h = _layer_norm(h + jax.nn.gelu(h @ p["w1"]) @ p["w2"], p["g2"], p["b2"])
        return h, None

    x, _ = lax.scan(layer, x, params["layers"])
    return jnp.mean(x, axis=0) @ params["out"]


def transformer_params():
    d, f, layers, vocab, seq = 8, 16, 2, 11, 5
    k = iter(jax.random.split(jax.random.key(3), 10))
    stack = lambda *shape: jax.random.normal(next(k), (layers, *shape)) / np.sqrt(shape[0])
    return {"embed": jax.random.normal(next(k), (vocab, d)), "pos": jax.random.normal(next(k), (seq, d)),
            "layers": {"wq": stack(d, d), "wk": stack(d, d), "wv": stack(d, d), "w1": stack(d, f),
                       "w2": stack(f, d), "g1": jnp.ones((layers, d)), "b1": jnp.zeros((layers, d)),
                       "g2": jnp.ones((layers, d)), "b2": jnp.zeros((layers, d))},
            "out": jax.random.normal(next(k), (d, 3))}


def rnn(params, x):
    def step(i, h):
        return jnp.tanh(h @ params["w"] + jnp.asarray(x)[i] @ params["u"])
    return lax.fori_loop(0, x.shape[0], step, jnp.zeros(params["w"].shape[0])) @ params["out"]


def rnn_params():
    k = jax.random.split(jax.random.key(4), 3)
    return {"w": jax.random.normal(k[0], (5, 5)) * 0.4, "u": jax.random.normal(k[1], (3, 5)),
            "out": jax.random.normal(k[2], (5, 2))}


MODELS = {
    "mlp": (mlp, mlp_params, lambda: normal(4, 6, dtype=np.float32)),
    "cnn": (cnn, cnn_params, lambda: normal(2, 8, 8, 2, dtype=np.float32)),
    "transformer": (transformer, transformer_params,
                    lambda: RNG.integers(0, 11, (5,)).astype(np.int32)),
    "rnn": (rnn, rnn_params, lambda: normal(6, 3, dtype=np.float32)),
}


def load_model(name):
    """(original model, translated model with the same pytree signature, params, input)."""
    fn, make_params, make_input = MODELS[name]
    params, x = make_params(), make_input()
    flat, tree = jax.tree_util.tree_flatten(params)
    program, _ = export(lambda leaves, x: fn(jax.tree_util.tree_unflatten(tree, leaves), x),
                        flat, x)

    def translated(params, x):
        return program(*jax.tree_util.tree_leaves(params), x)
    return fn, translated, params, x


def _assert_trees_close(actual, expected, rtol=1e-5):
    for a, e in zip(jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected)):
        scale = np.max(np.abs(e))
        np.testing.assert_allclose(a, e, rtol=rtol, atol=rtol * scale)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_grad_matches_original(name):
    fn, translated, params, x = load_model(name)
    loss = lambda model: lambda p: jnp.sum(jnp.sin(model(p, x)))
    np.testing.assert_allclose(translated(params, x), fn(params, x), rtol=1e-5, atol=1e-6)
    _assert_trees_close(jax.grad(loss(translated))(params), jax.grad(loss(fn))(params))


@pytest.mark.slow
def test_searchless_chess_grad_agrees_with_finite_differences(shared_dir):
    program = shlo2jax.load((shared_dir / "models" / "searchless_chess_9m.mlir.bc").read_bytes())
    main = program.entry
    weight_avals, board_aval = main.in_avals[:-1], main.in_avals[-1]
    rng = np.random.default_rng(0)
    weights = [(rng.standard_normal(a.shape) * 0.05).astype(a.dtype) for a in weight_avals]
    board = rng.integers(0, 20, board_aval.shape).astype(board_aval.dtype)
    target = rng.standard_normal(main.out_avals[0].shape).astype(np.float32)

    @jax.jit
    def loss(ws):
        out = main(*ws, board)
        out = out[0] if isinstance(out, (tuple, list)) else out
        return jnp.mean(out * target)   # linear in the outputs: no cancellation in the loss

    grads = jax.jit(jax.grad(loss))(weights)
    assert len(grads) == len(weights) == 94
    for g, w in zip(grads, weights):
        assert g.shape == w.shape and np.all(np.isfinite(g))
    # Central differences along a random direction of the weights' own scale. Without
    # float64 the step trades truncation error (O(eps^2)) against f32 rounding of the loss
    # (~1e-7 relative, divided by eps): eps = 1e-2 keeps both near 1e-4 relative (measured
    # 3e-4; 1e-1 and 1e-3 give 5e-3 and 4e-3), so 1e-2 relative is a safe tolerance.
    direction = [(rng.standard_normal(w.shape) * 0.05).astype(np.float32) for w in weights]
    eps = 1e-2
    plus = loss([w + eps * d for w, d in zip(weights, direction)])
    minus = loss([w - eps * d for w, d in zip(weights, direction)])
    finite_difference = float(plus - minus) / (2 * eps)
    analytic = sum(float(np.vdot(np.asarray(g, np.float64), d)) for g, d in zip(grads, direction))
    assert abs(analytic) > 0
    np.testing.assert_allclose(analytic, finite_difference, rtol=1e-2)


def test_scatter_multiply_repeated_indices():
    # With repeated indices lax differentiates a multiplying scatter in its operand only.
    idx = np.array([3, 1, 1])
    fn = lambda v, u: jnp.asarray(v).at[idx].multiply(u)
    v, u = normal(5, 2, dtype=np.float32), normal(3, 2, dtype=np.float32)
    program, text = export(fn, v, u)
    assert "stablehlo.scatter" in text
    grad = jax.grad(lambda v: jnp.sum(program(v, u) ** 2))(v)
    expected = jax.grad(lambda v: jnp.sum(fn(v, u) ** 2))(v)
    np.testing.assert_allclose(grad, expected, rtol=1e-6)
    with pytest.raises(shlo2jax.TranslationError, match=r"stablehlo.scatter at .*unique_indices"):
        jax.grad(lambda u: jnp.sum(program(v, u)))(u)
