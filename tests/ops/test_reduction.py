"""reduce, reduce_window, select_and_scatter, map, sort against independent numpy references."""

import itertools

import jax
import ml_dtypes
import numpy as np
import pytest

import shlo2jax
from shlo2jax import compat
from shlo2jax import value_types as T

from _helpers import assert_same_bits, tensor

BF16 = np.dtype(ml_dtypes.bfloat16)


def run(text, *args):
    with compat.enable_x64():
        outs = shlo2jax.load(text)(*args)
    return [np.asarray(o) for o in outs] if isinstance(outs, (tuple, list)) else [np.asarray(outs)]


def random_values(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -50), min(info.max, 50), shape, endpoint=True).astype(dtype)
    if dtype.kind == "c":
        return (rng.integers(-4, 5, shape) + 1j * rng.integers(-4, 5, shape)).astype(dtype)
    return (rng.integers(-8, 9, shape) / 4).astype(dtype)   # exact in every float type


# ------------------------------------------------------------------ reduce

def reduce_module(shape, dtype, dims, body_ops, body_result="%r", init_type=None):
    out_shape = [d for i, d in enumerate(shape) if i not in dims]
    scalar = tensor((), init_type or dtype)
    return f"""
func.func @main(%x: {tensor(shape, dtype)}, %init: {scalar}) -> {tensor(out_shape, init_type or dtype)} {{
  %0 = stablehlo.reduce(%x init: %init) across dimensions = {list(dims)} :
      ({tensor(shape, dtype)}, {scalar}) -> {tensor(out_shape, init_type or dtype)}
   reducer(%a: {scalar}, %b: {scalar}) {{
    {body_ops}
    stablehlo.return {body_result} : {scalar}
  }}
  return %0 : {tensor(out_shape, init_type or dtype)}
}}"""


NP_OPS = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
          "and": np.logical_and, "or": np.logical_or, "xor": np.bitwise_xor}
IDENTITY = {"add": 0, "multiply": 1, "xor": 0, "and": True, "or": False}


def np_reduce(fn, x, init, axes):
    """The spec's schedule folded left, init first."""
    x = np.moveaxis(x, axes, list(range(len(axes))))
    flat = x.reshape((-1,) + x.shape[len(axes):])
    acc = np.broadcast_to(init, flat.shape[1:]).copy()
    for row in flat:
        acc = fn(acc, row).astype(x.dtype)
    return acc


@pytest.mark.parametrize("name,dtype", [
    ("add", np.int32), ("add", np.uint8), ("add", np.float32), ("add", np.float64),
    ("add", np.complex64), ("multiply", np.int64), ("multiply", np.float32),
    ("maximum", np.int8), ("maximum", np.float32), ("maximum", BF16), ("maximum", np.uint32),
    ("minimum", np.float16), ("minimum", np.int16), ("and", np.bool_), ("or", np.bool_),
    ("xor", np.uint8), ("and", np.int32), ("or", np.uint64)])
@pytest.mark.parametrize("identity", [True, False])
def test_reduce_single_op_bodies(name, dtype, identity):
    rng = np.random.default_rng(0)
    x = random_values(rng, (4, 5, 3), dtype)
    if name in ("maximum", "minimum"):
        if not identity:
            init = np.array(5, dtype)
        elif np.dtype(dtype).kind in "iu":
            info = np.iinfo(dtype)
            init = np.array(info.min if name == "maximum" else info.max, dtype)
        else:
            init = np.array(-np.inf if name == "maximum" else np.inf, dtype)
    elif np.dtype(dtype) == np.bool_:
        init = np.array(IDENTITY[name] if identity else not IDENTITY[name], dtype)
    else:
        init = np.array(IDENTITY[name] if identity else 3, dtype)
    if name in ("and", "or") and np.dtype(dtype) != np.bool_:
        init = np.array(-1 if name == "and" else 0, dtype) if identity else np.array(6, dtype)
        fn = {"and": np.bitwise_and, "or": np.bitwise_or}[name]
    else:
        fn = NP_OPS[name]
    text = reduce_module(x.shape, dtype, (0, 2), f"%r = stablehlo.{name} %a, %b : {tensor((), dtype)}")
    got, = run(text, x, init)
    expected = np_reduce(fn, x, init, [0, 2])
    if np.dtype(dtype).kind in "fc" or dtype == BF16:
        np.testing.assert_allclose(got.astype(np.complex128), expected.astype(np.complex128), rtol=1e-2)
    else:
        assert_same_bits(got, expected)


def test_reduce_init_applied_once_on_large_input():
    # XLA splits large reductions and would add a non-identity init more than once.
    x = np.ones((100_000,), np.int32)
    text = reduce_module(x.shape, np.int32, (0,), "%r = stablehlo.add %a, %b : tensor<i32>")
    got, = run(text, x, np.array(7, np.int32))
    assert_same_bits(got, np.array(100_007, np.int32))


def test_reduce_general_body_init_applied_once():
    # A two-op body is not recognised as a monoid: it takes the general path, which applies
    # the init once, as the reference interpreter does.
    x = np.ones((3, 50_000), np.int64)
    body = ("%z = stablehlo.constant dense<0> : tensor<i64>\n"
            "    %s = stablehlo.add %a, %b : tensor<i64>\n"
            "    %r = stablehlo.add %s, %z : tensor<i64>")
    got, = run(reduce_module(x.shape, np.int64, (1,), body), x, np.array(-5, np.int64))
    assert_same_bits(got, np.full((3,), 49_995, np.int64))


@pytest.mark.parametrize("name,fn", [("add", np.logical_or), ("multiply", np.logical_and)])
@pytest.mark.parametrize("init", [False, True])
def test_reduce_boolean_add_multiply(name, fn, init):
    # On i1, add is logical or and multiply logical and.
    x = np.array([[0, 0, 0], [1, 0, 1], [1, 1, 1]], bool)
    got, = run(reduce_module(x.shape, np.bool_, (1,), f"%r = stablehlo.{name} %a, %b : tensor<i1>"),
               x, np.array(init))
    assert_same_bits(got, np_reduce(fn, x, np.array(init), [1]))


def test_reduce_negative_zero_init_and_empty():
    x = np.full((2, 3), -0.0, np.float32)
    text = reduce_module(x.shape, np.float32, (1,), "%r = stablehlo.add %a, %b : tensor<f32>")
    got, = run(text, x, np.array(-0.0, np.float32))
    assert_same_bits(got, np.full((2,), -0.0, np.float32))
    got, = run(text, x, np.array(0.0, np.float32))
    assert_same_bits(got, np.zeros((2,), np.float32))
    empty = np.zeros((2, 0), np.float32)
    text = reduce_module(empty.shape, np.float32, (1,), "%r = stablehlo.maximum %a, %b : tensor<f32>")
    got, = run(text, empty, np.array(-2.5, np.float32))
    assert_same_bits(got, np.full((2,), -2.5, np.float32))


@pytest.mark.parametrize("name,fn", [("maximum", np.maximum), ("minimum", np.minimum),
                                     ("add", np.add), ("multiply", np.multiply)])
def test_reduce_over_no_dimensions_applies_init(name, fn):
    x = np.array([[1, 7, 3], [-2, 5, 9]], np.int32)
    text = reduce_module(x.shape, np.int32, (), f"%r = stablehlo.{name} %a, %b : tensor<i32>")
    got, = run(text, x, np.array(5, np.int32))
    assert_same_bits(got, fn(np.int32(5), x).astype(np.int32))


def test_reduce_general_body_empty_input_is_init():
    empty = np.zeros((0, 3), np.int32)
    text = reduce_module(empty.shape, np.int32, (0,), "%r = stablehlo.add %a, %b : tensor<i32>")
    got, = run(text, empty, np.array(4, np.int32))
    assert_same_bits(got, np.full((3,), 4, np.int32))


def test_reduce_promotes_to_body_type():
    x = np.array([[100, 100, 100]], np.int8)
    text = reduce_module(x.shape, np.int8, (1,), "%r = stablehlo.add %a, %b : tensor<i32>",
                         init_type=np.int32)
    got, = run(text, x, np.array(0, np.int32))
    assert_same_bits(got, np.array([300], np.int32))


ARGMAX = """
func.func @main(%x: tensor<3x6xf32>) -> (tensor<3xf32>, tensor<3xi32>) {
  %iota = stablehlo.iota dim = 1 : tensor<3x6xi32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.reduce(%x init: %ninf), (%iota init: %zero) across dimensions = [1] :
      (tensor<3x6xf32>, tensor<3x6xi32>, tensor<f32>, tensor<i32>) -> (tensor<3xf32>, tensor<3xi32>)
   reducer(%a: tensor<f32>, %b: tensor<f32>) (%ai: tensor<i32>, %bi: tensor<i32>) {
    %gt = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %nan = stablehlo.compare NE, %a, %a, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %pick = stablehlo.or %gt, %nan : tensor<i1>
    %eq = stablehlo.compare EQ, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %lt = stablehlo.compare LT, %ai, %bi, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %tie = stablehlo.and %eq, %lt : tensor<i1>
    %pick_i = stablehlo.or %pick, %tie : tensor<i1>
    %v = stablehlo.select %pick, %a, %b : tensor<i1>, tensor<f32>
    %i = stablehlo.select %pick_i, %ai, %bi : tensor<i1>, tensor<i32>
    stablehlo.return %v, %i : tensor<f32>, tensor<i32>
  }
  return %0#0, %0#1 : tensor<3xf32>, tensor<3xi32>
}"""


def test_reduce_variadic_argmax():
    x = np.array([[1, 5, 2, 5, 0, 5], [-1, -3, np.nan, 4, np.nan, 9], [2, 2, 2, 2, 2, 2]], np.float32)
    values, index = run(ARGMAX, x)
    assert_same_bits(index, np.array([1, 2, 0], np.int32))
    assert_same_bits(values, np.array([5, np.nan, 2], np.float32))


# ------------------------------------------------------------------ reduce_window

def np_reduce_window(fn, x, init, window, strides, base, wdil, padding):
    """The spec, literally: pad with init (interior base dilation), slice windows, fold init first."""
    dilated_shape = [(n - 1) * b + 1 if n else 0 for n, b in zip(x.shape, base)]
    dilated = np.full(dilated_shape, init, x.dtype)
    dilated[tuple(slice(None, None, b) for b in base)] = x
    padded = np.full([lo + n + hi for n, (lo, hi) in zip(dilated_shape, padding)], init, x.dtype)
    padded[tuple(slice(lo, lo + n) for n, (lo, _) in zip(dilated_shape, padding))] = dilated
    span = [(w - 1) * d + 1 for w, d in zip(window, wdil)]
    out_shape = [(p - s) // st + 1 for p, s, st in zip(padded.shape, span, strides)]
    out = np.empty(out_shape, x.dtype)
    for idx in itertools.product(*map(range, out_shape)):
        acc = np.asarray(init)
        for k in itertools.product(*map(range, window)):
            acc = fn(acc, padded[tuple(i * st + kk * d for i, st, kk, d in zip(idx, strides, k, wdil))])
        out[idx] = acc
    return out


def reduce_window_module(shape, out_shape, dtype, body, window, strides, base, wdil, padding):
    s = tensor((), dtype)
    return f"""
func.func @main(%x: {tensor(shape, dtype)}, %init: {s}) -> {tensor(out_shape, dtype)} {{
  %0 = "stablehlo.reduce_window"(%x, %init) ({{
    ^bb0(%a: {s}, %b: {s}):
      {body}
      stablehlo.return %r : {s}
  }}) {{
    window_dimensions = array<i64: {", ".join(map(str, window))}>,
    window_strides = array<i64: {", ".join(map(str, strides))}>,
    base_dilations = array<i64: {", ".join(map(str, base))}>,
    window_dilations = array<i64: {", ".join(map(str, wdil))}>,
    padding = dense<{[list(p) for p in padding]}> : tensor<{len(shape)}x2xi64>
  }} : ({tensor(shape, dtype)}, {s}) -> {tensor(out_shape, dtype)}
  return %0 : {tensor(out_shape, dtype)}
}}"""


WINDOW_CASES = [
    # window, strides, base, wdil, padding
    ((2, 1), (4, 1), (2, 1), (3, 1), ((2, 1), (0, 0))),   # the spec example
    ((3, 2), (1, 1), (1, 1), (1, 1), ((1, 1), (0, 1))),
    ((2, 2), (2, 1), (1, 2), (1, 1), ((0, 0), (1, 2))),
    ((1, 3), (1, 2), (1, 1), (1, 2), ((0, 0), (2, 0))),
]


@pytest.mark.parametrize("name,dtype,init", [
    ("add", np.int64, 0), ("add", np.int32, 2), ("add", np.float32, 0.0), ("add", np.float64, 1.5),
    ("maximum", np.float32, -np.inf), ("maximum", np.int8, 3), ("minimum", np.uint8, 255),
    ("minimum", np.float16, 0.5), ("multiply", np.int32, 1), ("multiply", np.int64, -1)])
@pytest.mark.parametrize("case", WINDOW_CASES)
def test_reduce_window(name, dtype, init, case):
    window, strides, base, wdil, padding = case
    x = random_values(np.random.default_rng(1), (3, 4), dtype)
    init = np.array(init, dtype)
    expected = np_reduce_window(lambda a, b: NP_OPS[name](a, b).astype(dtype), x, init, *case)
    text = reduce_window_module(x.shape, expected.shape, dtype,
                                f"%r = stablehlo.{name} %a, %b : {tensor((), dtype)}", *case)
    got, = run(text, x, init)
    assert_same_bits(got, expected)


@pytest.mark.parametrize("keep", ["%a", "%b"])
def test_reduce_window_general_body(keep):
    # "keep first" / "keep last" are associative but not commutative: the result depends on
    # the order of window elements and on where the (padding and) init enter.
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    case = ((2, 2), (1, 1), (1, 1), (1, 1), ((1, 0), (0, 1)))
    fn = (lambda a, b: a) if keep == "%a" else (lambda a, b: b)
    expected = np_reduce_window(fn, x, np.int32(100), *case)
    text = reduce_window_module(x.shape, expected.shape, np.int32, "", *case)
    text = text.replace("stablehlo.return %r", f"stablehlo.return {keep}")
    got, = run(text, x, np.array(100, np.int32))
    assert_same_bits(got, expected)


def test_reduce_window_variadic():
    text = """
func.func @main(%x: tensor<6xf32>, %i: tensor<6xi32>) -> (tensor<4xf32>, tensor<4xi32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = "stablehlo.reduce_window"(%x, %i, %ninf, %zero) ({
    ^bb0(%a: tensor<f32>, %ai: tensor<i32>, %b: tensor<f32>, %bi: tensor<i32>):
      %ge = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %v = stablehlo.select %ge, %a, %b : tensor<i1>, tensor<f32>
      %j = stablehlo.select %ge, %ai, %bi : tensor<i1>, tensor<i32>
      stablehlo.return %v, %j : tensor<f32>, tensor<i32>
  }) {window_dimensions = array<i64: 3>} :
      (tensor<6xf32>, tensor<6xi32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xi32>)
  return %0#0, %0#1 : tensor<4xf32>, tensor<4xi32>
}"""
    x = np.array([1, 7, 3, 7, 2, 0], np.float32)
    values, index = run(text, x, np.arange(6, dtype=np.int32))
    assert_same_bits(values, np.array([7, 7, 7, 7], np.float32))
    assert_same_bits(index, np.array([1, 1, 3, 3], np.int32))


# Argmax windows, as XLA:CPU rewrites select_and_scatter (max-pool's gradient): (value, flat
# index) pairs whose body selects one pair; the value result differentiates as the one-hot of
# the index the body picked.
ARGMAX_WINDOW_BODIES = {
    # A total order: the larger value, on a tie the lower index.
    "gt_lower_index": """
      %gt = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %eq = stablehlo.compare EQ, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %lt = stablehlo.compare LT, %ai, %bi, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %tie = stablehlo.and %eq, %lt : tensor<i1>
      %pick = stablehlo.or %gt, %tie : tensor<i1>""",
    # The larger value, on a tie the higher index.
    "gt_higher_index": """
      %gt = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %eq = stablehlo.compare EQ, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %hi = stablehlo.compare GT, %ai, %bi, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %tie = stablehlo.and %eq, %hi : tensor<i1>
      %pick = stablehlo.or %gt, %tie : tensor<i1>""",
    # XLA:CPU's own body (tf_cnn_train_step_after_opt): GE, index -1 marks the init; which
    # of equal values wins depends on the order the implementation folds a window in.
    "xla_ge": """
      %ge = stablehlo.compare GE, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %m1 = stablehlo.constant dense<-1> : tensor<i32>
      %real = stablehlo.compare NE, %ai, %m1 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %both = stablehlo.and %ge, %real : tensor<i1>
      %b_real = stablehlo.compare NE, %bi, %m1 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %b_init = stablehlo.not %b_real : tensor<i1>
      %pick = stablehlo.or %both, %b_init : tensor<i1>""",
}


def argmax_window_module(shape, out_shape, body, window, strides, base, wdil, padding):
    size = int(np.prod(shape))
    x, i = tensor(shape, np.float32), tensor(shape, np.int32)
    y, j = tensor(out_shape, np.float32), tensor(out_shape, np.int32)
    array = lambda v: ", ".join(map(str, v))
    return f"""
func.func @main(%x: {x}) -> ({y}, {j}) {{
  %flat = stablehlo.iota dim = 0 : tensor<{size}xi32>
  %i = stablehlo.reshape %flat : (tensor<{size}xi32>) -> {i}
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %none = stablehlo.constant dense<-1> : tensor<i32>
  %0:2 = "stablehlo.reduce_window"(%x, %i, %ninf, %none) ({{
    ^bb0(%a: tensor<f32>, %ai: tensor<i32>, %b: tensor<f32>, %bi: tensor<i32>):
      {body}
      %v = stablehlo.select %pick, %a, %b : tensor<i1>, tensor<f32>
      %k = stablehlo.select %pick, %ai, %bi : tensor<i1>, tensor<i32>
      stablehlo.return %v, %k : tensor<f32>, tensor<i32>
  }}) {{
    window_dimensions = array<i64: {array(window)}>, window_strides = array<i64: {array(strides)}>,
    base_dilations = array<i64: {array(base)}>, window_dilations = array<i64: {array(wdil)}>,
    padding = dense<{[list(p) for p in padding]}> : tensor<{len(shape)}x2xi64>
  }} : ({x}, {i}, tensor<f32>, tensor<i32>) -> ({y}, {j})
  return %0#0, %0#1 : {y}, {j}
}}"""


def np_argmax_window(x, case, lowest):
    """(max, its flat index: the lowest or highest among equal values) per window; (-inf, -1)
    where a window holds only padding. The spec's reference on (value, index) objects."""
    pairs = np.empty(x.shape, object)
    for k, v in enumerate(x.flat):
        pairs[np.unravel_index(k, x.shape)] = (v, k)

    def pick(a, b):
        a, b = (p.item() if isinstance(p, np.ndarray) else p for p in (a, b))
        if a is None or b is None:
            return b if a is None else a
        key = lambda p: (p[0], -p[1] if lowest else p[1])
        return a if key(a) >= key(b) else b
    best = np_reduce_window(pick, pairs, np.array(None, object), *case)
    values = np.array([-np.inf if b is None else b[0] for b in best.flat], np.float32)
    index = np.array([-1 if b is None else b[1] for b in best.flat], np.int32)
    return values.reshape(best.shape), index.reshape(best.shape)


def argmax_window(body, case, x):
    values, index = np_argmax_window(x, case, True)
    return shlo2jax.load(argmax_window_module(x.shape, values.shape, ARGMAX_WINDOW_BODIES[body],
                                              *case))


def one_hot_grad(x, index, cotangent):
    """The value output's gradient: each window's cotangent at the index its body picked."""
    grad = np.zeros(x.size, np.float32)
    real = index >= 0
    np.add.at(grad, index[real], cotangent[real])
    return grad.reshape(x.shape)


@pytest.mark.parametrize("case", WINDOW_CASES)
@pytest.mark.parametrize("body", ["gt_lower_index", "gt_higher_index"])
def test_reduce_window_argmax_ties_follow_the_body(body, case):
    x = random_values(np.random.default_rng(2), (5, 4), np.float32)   # many equal values
    want_values, want_index = np_argmax_window(x, case, body == "gt_lower_index")
    fn = argmax_window(body, case, x)
    values, index = fn(x)
    assert_same_bits(np.asarray(values), want_values)
    assert_same_bits(np.asarray(index), want_index)
    cot = np.random.default_rng(3).standard_normal(want_values.shape).astype(np.float32)
    grad = jax.grad(lambda v: jax.numpy.sum(fn(v)[0] * cot))(x)
    np.testing.assert_allclose(grad, one_hot_grad(x, want_index, cot), rtol=1e-6, atol=1e-6)
    tangent = np.random.default_rng(4).standard_normal(x.shape).astype(np.float32)
    (_, _), (t_values, t_index) = jax.jvp(fn, (x,), (tangent,))
    assert t_index.dtype == jax.dtypes.float0
    want_t = np.where(want_index >= 0, tangent.flat[np.maximum(want_index, 0)], 0)
    np.testing.assert_allclose(t_values, want_t, rtol=1e-6)


@pytest.mark.parametrize("case", WINDOW_CASES)
def test_reduce_window_argmax_xla_body_derivative_follows_its_pick(case):
    # Equal values: the index XLA's GE body returns is the one the derivative flows to.
    x = random_values(np.random.default_rng(5), (5, 4), np.float32)
    fn = argmax_window("xla_ge", case, x)
    values, index = map(np.asarray, fn(x))
    want_values, _ = np_argmax_window(x, case, True)
    assert_same_bits(values, want_values)
    real = index >= 0
    assert_same_bits(x.flat[index[real]], values[real])
    cot = np.random.default_rng(6).standard_normal(values.shape).astype(np.float32)
    grad = jax.grad(lambda v: jax.numpy.sum(fn(v)[0] * cot))(x)
    np.testing.assert_allclose(grad, one_hot_grad(x, index, cot), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("body", sorted(ARGMAX_WINDOW_BODIES))
def test_reduce_window_argmax_matches_lax_max_pool_derivatives(body):
    # Distinct values: the value output is a max pool, whose lax derivatives it must equal;
    # and finite differences (check_grads, both modes, order 2: the rule's own derivative).
    from jax import lax
    from jax.test_util import check_grads
    case = ((2, 3), (2, 1), (1, 1), (1, 1), ((1, 0), (0, 2)))   # (lax: no dilated max-pool VJP)
    window, strides, base, wdil, padding = case
    x = np.random.default_rng(7).permutation(30).reshape(5, 6).astype(np.float32) / 4
    fn = argmax_window(body, case, x)
    pool = lambda v: lax.reduce_window(v, -np.inf, lax.max, window, strides, padding, base, wdil)
    cot = np.random.default_rng(8).standard_normal(np.shape(pool(x))).astype(np.float32)
    np.testing.assert_allclose(jax.grad(lambda v: (fn(v)[0] * cot).sum())(x),
                               jax.grad(lambda v: (pool(v) * cot).sum())(x), rtol=1e-6)
    tangent = np.random.default_rng(9).standard_normal(x.shape).astype(np.float32)
    np.testing.assert_allclose(jax.jvp(lambda v: fn(v)[0], (x,), (tangent,))[1],
                               jax.jvp(pool, (x,), (tangent,))[1], rtol=1e-6)
    if body == "xla_ge":   # (slow: once)
        check_grads(lambda v: fn(v)[0] * 2, (x,), order=2, modes=("fwd", "rev"), eps=1e-2)


def test_reduce_window_argmax_vmap_of_value_and_grad():
    case = WINDOW_CASES[1]
    xs = random_values(np.random.default_rng(10), (3, 5, 4), np.float32)
    fn = argmax_window("gt_lower_index", case, xs[0])
    loss = lambda v: (fn(v)[0] ** 2).sum()
    batched = jax.vmap(jax.value_and_grad(loss))(xs)
    for k, x in enumerate(xs):
        value, grad = jax.value_and_grad(loss)(x)
        np.testing.assert_allclose(batched[0][k], value, rtol=1e-6)
        np.testing.assert_allclose(batched[1][k], grad, rtol=1e-6)
    values, index = jax.vmap(fn)(xs)
    for k, x in enumerate(xs):
        assert_same_bits(np.asarray(index[k]), np.asarray(fn(x)[1]))


# ------------------------------------------------------------------ map

@pytest.mark.parametrize("dtype", [np.int64, np.float32, np.uint8])
def test_map(dtype):
    s = tensor((), dtype)
    text = f"""
func.func @main(%x: {tensor((2, 3), dtype)}, %y: {tensor((2, 3), dtype)}) -> {tensor((2, 3), dtype)} {{
  %0 = "stablehlo.map"(%x, %y) ({{
    ^bb0(%a: {s}, %b: {s}):
      %two = stablehlo.constant dense<2> : {s}
      %m = stablehlo.multiply %a, %two : {s}
      %r = stablehlo.add %m, %b : {s}
      stablehlo.return %r : {s}
  }}) {{dimensions = array<i64: 0, 1>}} : ({tensor((2, 3), dtype)}, {tensor((2, 3), dtype)}) -> {tensor((2, 3), dtype)}
  return %0 : {tensor((2, 3), dtype)}
}}""".replace("dense<2>", "dense<2.0>" if np.dtype(dtype).kind == "f" else "dense<2>")
    x = np.arange(6).reshape(2, 3).astype(dtype)
    y = (np.arange(6).reshape(2, 3) + 10).astype(dtype)
    got, = run(text, x, y)
    assert_same_bits(got, (x * 2 + y).astype(dtype))


def test_map_rank0():
    text = """
func.func @main(%x: tensor<i32>) -> tensor<i32> {
  %0 = "stablehlo.map"(%x) ({
    ^bb0(%a: tensor<i32>):
      %r = stablehlo.multiply %a, %a : tensor<i32>
      stablehlo.return %r : tensor<i32>
  }) {dimensions = array<i64>} : (tensor<i32>) -> tensor<i32>
  return %0 : tensor<i32>
}"""
    got, = run(text, np.array(-7, np.int32))
    assert_same_bits(got, np.array(49, np.int32))


# ------------------------------------------------------------------ select_and_scatter

def np_select_and_scatter(select, scatter, operand, source, init, window, strides, padding):
    """The reference interpreter's algorithm: sequential window fold, scatter in source order."""
    result = np.full(operand.shape, init, operand.dtype)
    for w in itertools.product(*map(range, source.shape)):
        best = None
        for k in itertools.product(*map(range, window)):
            p = tuple(wi * s + ki - lo for wi, s, ki, (lo, _) in zip(w, strides, k, padding))
            if not all(0 <= pi < n for pi, n in zip(p, operand.shape)):
                continue
            if best is None or not select(operand[best], operand[p]):
                best = p
        if best is not None:
            result[best] = scatter(result[best], source[w])
    return result


def sas_module(shape, src_shape, dtype, select_dir, scatter_body, window, strides, padding):
    s = tensor((), dtype)
    return f"""
func.func @main(%x: {tensor(shape, dtype)}, %src: {tensor(src_shape, dtype)}, %init: {s}) -> {tensor(shape, dtype)} {{
  %0 = "stablehlo.select_and_scatter"(%x, %src, %init) ({{
    ^bb0(%a: {s}, %b: {s}):
      %c = stablehlo.compare {select_dir}, %a, %b : ({s}, {s}) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
  }}, {{
    ^bb0(%a: {s}, %b: {s}):
      {scatter_body}
      stablehlo.return %r : {s}
  }}) {{
    window_dimensions = array<i64: {", ".join(map(str, window))}>,
    window_strides = array<i64: {", ".join(map(str, strides))}>,
    padding = dense<{[list(p) for p in padding]}> : tensor<{len(shape)}x2xi64>
  }} : ({tensor(shape, dtype)}, {tensor(src_shape, dtype)}, {s}) -> {tensor(shape, dtype)}
  return %0 : {tensor(shape, dtype)}
}}"""


def test_select_and_scatter_spec_example():
    x = np.array([[1, 5], [2, 5], [3, 6], [4, 4]], np.int64)
    src = np.array([[5, 6], [7, 8]], np.int64)
    text = sas_module(x.shape, src.shape, np.int64, "GE", "%r = stablehlo.add %a, %b : tensor<i64>",
                      (3, 1), (2, 1), ((0, 1), (0, 0)))
    got, = run(text, x, src, np.array(0, np.int64))
    assert_same_bits(got, np.array([[0, 0], [0, 0], [5, 14], [7, 0]], np.int64))


SAS_CASES = [
    # operand shape, window, strides, padding
    ((4, 6), (2, 2), (2, 2), ((0, 0), (0, 0))),
    ((5, 5), (3, 3), (1, 1), ((1, 1), (1, 1))),
    ((4, 7), (3, 2), (2, 3), ((1, 0), (0, 2))),
    ((6,), (4,), (1,), ((2, 3),)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint16])
@pytest.mark.parametrize("direction", ["GE", "GT", "LE"])
@pytest.mark.parametrize("case", SAS_CASES)
def test_select_and_scatter(dtype, direction, case):
    shape, window, strides, padding = case
    rng = np.random.default_rng(2)
    x = rng.integers(0, 4, shape).astype(dtype)     # many ties: first-wins matters
    padded = [lo + n + hi for n, (lo, hi) in zip(shape, padding)]
    src_shape = tuple((p - w) // s + 1 for p, w, s in zip(padded, window, strides))
    src = rng.integers(1, 9, src_shape).astype(dtype)
    init = np.array(1, dtype)
    # a * 2 + b is not commutative: checks that windows scatter in source order.
    body = (f"%two = stablehlo.constant dense<{'2.0' if dtype == np.float32 else '2'}> : {tensor((), dtype)}\n"
            f"      %m = stablehlo.multiply %a, %two : {tensor((), dtype)}\n"
            f"      %r = stablehlo.add %m, %b : {tensor((), dtype)}")
    select = {"GE": np.greater_equal, "GT": np.greater, "LE": np.less_equal}[direction]
    expected = np_select_and_scatter(select, lambda a, b: (a * 2 + b).astype(dtype), x, src, init,
                                     window, strides, padding)
    got, = run(sas_module(shape, src_shape, dtype, direction, body, window, strides, padding),
               x, src, init)
    assert_same_bits(got, expected)


# ------------------------------------------------------------------ sort

def sort_module(shapes_dtypes, dim, comparator, stable=True):
    ins = ", ".join(f"%x{i}: {tensor(s, d)}" for i, (s, d) in enumerate(shapes_dtypes))
    types = ", ".join(tensor(s, d) for s, d in shapes_dtypes)
    block = ", ".join(f"%a{i}: {tensor((), d)}, %b{i}: {tensor((), d)}"
                      for i, (_, d) in enumerate(shapes_dtypes))
    names = ", ".join(f"%x{i}" for i in range(len(shapes_dtypes)))
    n = len(shapes_dtypes)
    results = ", ".join(f"%0#{i}" for i in range(n)) if n > 1 else "%0"
    lhs = f"%0:{n}" if n > 1 else "%0"
    return f"""
func.func @main({ins}) -> ({types}) {{
  {lhs} = "stablehlo.sort"({names}) ({{
    ^bb0({block}):
      {comparator}
      stablehlo.return %r : tensor<i1>
  }}) {{dimension = {dim} : i64, is_stable = {"true" if stable else "false"}}} : ({types}) -> ({types})
  return {results} : {types}
}}"""


def np_stable_sort(keys_fn, arrays, axis):
    """Stable sort of `arrays` along `axis` by a Python key of each element tuple."""
    moved = [np.moveaxis(a, axis, -1) for a in arrays]
    out = [np.empty_like(m) for m in moved]
    for idx in np.ndindex(moved[0].shape[:-1]):
        rows = [m[idx] for m in moved]
        order = sorted(range(len(rows[0])), key=lambda j: keys_fn(*[r[j] for r in rows]))
        for o, r in zip(out, rows):
            o[idx] = r[order]
    return [np.moveaxis(o, -1, axis) for o in out]


@pytest.mark.parametrize("dtype,ctype", [(np.int32, "SIGNED"), (np.int8, "SIGNED"),
                                         (np.uint8, "UNSIGNED"), (np.uint64, "UNSIGNED"),
                                         (np.int64, "SIGNED"), (np.bool_, "UNSIGNED")])
@pytest.mark.parametrize("direction", ["LT", "GT"])
@pytest.mark.parametrize("dim", [0, -1])
def test_sort_integers(dtype, ctype, direction, dim):
    x = random_values(np.random.default_rng(3), (5, 7), dtype)
    idx = np.broadcast_to(np.arange(35, dtype=np.int32).reshape(5, 7), (5, 7)).copy()
    s = tensor((), dtype)
    comparator = f"%r = stablehlo.compare {direction}, %a0, %b0, {ctype} : ({s}, {s}) -> tensor<i1>"
    got = run(sort_module([((5, 7), dtype), ((5, 7), np.int32)], dim, comparator), x, idx)
    sign = 1 if direction == "LT" else -1
    expected = np_stable_sort(lambda v, i: sign * int(v), [x, idx], dim)
    for g, e in zip(got, expected):
        assert_same_bits(g, e)


def test_sort_spec_example_stable_descending():
    text = sort_module([((2, 3), np.int64)] * 2, 0,
                       "%r = stablehlo.compare GT, %a0, %b0 : (tensor<i64>, tensor<i64>) -> tensor<i1>")
    r0, r1 = run(text, np.array([[1, 2, 3], [3, 2, 1]], np.int64),
                 np.array([[3, 2, 1], [1, 2, 3]], np.int64))
    assert_same_bits(r0, np.array([[3, 2, 3], [1, 2, 1]], np.int64))
    assert_same_bits(r1, np.array([[1, 2, 1], [3, 2, 3]], np.int64))


# jax's float comparator: zeros and NaNs canonicalised, then TOTALORDER.
JAX_FLOAT_LT = """
      %zero = stablehlo.constant dense<0.0> : tensor<f32>
      %nan = stablehlo.constant dense<0x7FC00000> : tensor<f32>
      %az = stablehlo.compare EQ, %a0, %zero, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %a1_ = stablehlo.select %az, %zero, %a0 : tensor<i1>, tensor<f32>
      %an = stablehlo.compare NE, %a0, %a0, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %ak = stablehlo.select %an, %nan, %a1_ : tensor<i1>, tensor<f32>
      %bz = stablehlo.compare EQ, %b0, %zero, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %b1_ = stablehlo.select %bz, %zero, %b0 : tensor<i1>, tensor<f32>
      %bn = stablehlo.compare NE, %b0, %b0, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %bk = stablehlo.select %bn, %nan, %b1_ : tensor<i1>, tensor<f32>
      %r = stablehlo.compare LT, %ak, %bk, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>"""

SPECIALS = np.array([3.0, -0.0, np.nan, 0.0, -np.inf, -np.nan, 1.5, 0.0, np.inf, -0.0, -2.0, 1.5],
                    np.float32)


def total_order_key(v):
    bits = int(np.float32(v).view(np.int32))
    return bits ^ 0x7FFFFFFF if bits < 0 else bits


def test_sort_float_jax_comparator():
    idx = np.arange(SPECIALS.size, dtype=np.int32)
    text = sort_module([((12,), np.float32), ((12,), np.int32)], 0, JAX_FLOAT_LT)
    got = run(text, SPECIALS, idx)
    canon = lambda v, i: (1, 0.0) if np.isnan(v) else (0, float(v) + 0.0)
    expected = np_stable_sort(canon, [SPECIALS, idx], 0)
    assert_same_bits(got[1], expected[1])
    assert_same_bits(got[0], expected[0])


def test_sort_float_total_order():
    idx = np.arange(SPECIALS.size, dtype=np.int32)
    comparator = "%r = stablehlo.compare LT, %a0, %b0, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>"
    got = run(sort_module([((12,), np.float32), ((12,), np.int32)], 0, comparator), SPECIALS, idx)
    expected = np_stable_sort(lambda v, i: total_order_key(v), [SPECIALS, idx], 0)
    assert_same_bits(got[1], expected[1])


def test_sort_float_descending_equal_zeros_stay_stable():
    x = np.array([0.0, -1.0, -0.0, 2.0, 0.0, -0.0], np.float32)
    idx = np.arange(6, dtype=np.int32)
    comparator = "%r = stablehlo.compare GT, %a0, %b0, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>"
    got = run(sort_module([((6,), np.float32), ((6,), np.int32)], 0, comparator), x, idx)
    assert_same_bits(got[1], np.array([3, 0, 2, 4, 5, 1], np.int32))


def test_sort_lexicographic_two_keys():
    rng = np.random.default_rng(4)
    k0 = rng.integers(0, 3, (4, 9)).astype(np.int32)
    k1 = rng.integers(0, 3, (4, 9)).astype(np.uint8)
    v = rng.random((4, 9)).astype(np.float32)
    # k0 ascending, then k1 descending
    comparator = """
      %lt0 = stablehlo.compare LT, %a0, %b0, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %eq0 = stablehlo.compare EQ, %a0, %b0, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %gt1 = stablehlo.compare GT, %a1, %b1, UNSIGNED : (tensor<ui8>, tensor<ui8>) -> tensor<i1>
      %t = stablehlo.and %eq0, %gt1 : tensor<i1>
      %r = stablehlo.or %lt0, %t : tensor<i1>"""
    text = sort_module([((4, 9), np.int32), ((4, 9), np.uint8), ((4, 9), np.float32)], 1, comparator)
    got = run(text, k0, k1, v)
    expected = np_stable_sort(lambda a, b, c: (int(a), -int(b)), [k0, k1, v], 1)
    for g, e in zip(got, expected):
        assert_same_bits(g, e)


def test_sort_complex_lexicographic():
    x = np.array([1 + 2j, 1 - 1j, -3 + 0j, 1 + 0j, -3 - 5j], np.complex64)
    comparator = ("%r = stablehlo.compare LT, %a0, %b0, FLOAT : "
                  "(tensor<complex<f32>>, tensor<complex<f32>>) -> tensor<i1>")
    got, = run(sort_module([((5,), np.complex64)], 0, comparator), x)
    assert_same_bits(got, np.sort_complex(x).astype(np.complex64))


@pytest.mark.parametrize("n", [2, 7, 13, 32])
def test_sort_general_comparator(n):
    # `a - b < 0` mixes both sides in one expression: sorted by the comparator itself.
    rng = np.random.default_rng(n)
    x = rng.integers(-20, 20, (3, n)).astype(np.int32)
    idx = np.broadcast_to(np.arange(n, dtype=np.int32), (3, n)).copy()
    comparator = """
      %d = stablehlo.subtract %a0, %b0 : tensor<i32>
      %z = stablehlo.constant dense<0> : tensor<i32>
      %r = stablehlo.compare LT, %d, %z, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>"""
    got = run(sort_module([((3, n), np.int32), ((3, n), np.int32)], 1, comparator), x, idx)
    expected = np_stable_sort(lambda v, i: int(v), [x, idx], 1)
    for g, e in zip(got, expected):
        assert_same_bits(g, e)


def test_sort_general_comparator_on_second_operand_descending():
    # Sorts by the second operand, descending, through a comparator lax cannot express.
    rng = np.random.default_rng(5)
    x = rng.random((6, 5)).astype(np.float32)
    key = rng.integers(0, 4, (6, 5)).astype(np.int64)
    comparator = """
      %d = stablehlo.subtract %b1, %a1 : tensor<i64>
      %z = stablehlo.constant dense<0> : tensor<i64>
      %r = stablehlo.compare LT, %d, %z, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>"""
    got = run(sort_module([((6, 5), np.float32), ((6, 5), np.int64)], 0, comparator), x, key)
    expected = np_stable_sort(lambda a, b: -int(b), [x, key], 0)
    for g, e in zip(got, expected):
        assert_same_bits(g, e)


def test_mhlo_reduce_and_reduce_window():
    # mhlo spells dimensions and window attributes as dense arrays.
    text = """
func.func @main(%x: tensor<6xf32>, %init: tensor<f32>) -> (tensor<f32>, tensor<3xf32>) {
  %0 = "mhlo.reduce"(%x, %init) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %c = "mhlo.maximum"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "mhlo.return"(%c) : (tensor<f32>) -> ()
  }) {dimensions = dense<0> : tensor<1xi64>} : (tensor<6xf32>, tensor<f32>) -> tensor<f32>
  %1 = "mhlo.reduce_window"(%x, %init) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %c = "mhlo.maximum"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "mhlo.return"(%c) : (tensor<f32>) -> ()
  }) {window_dimensions = dense<2> : tensor<1xi64>, window_strides = dense<2> : tensor<1xi64>,
      padding = dense<[[0, 0]]> : tensor<1x2xi64>} : (tensor<6xf32>, tensor<f32>) -> tensor<3xf32>
  return %0, %1 : tensor<f32>, tensor<3xf32>
}"""
    x = np.array([0.5, -0.0, 3.0, 0.0, -2.0, 3.5], np.float32)
    got_max, got_window = run(text, x, np.array(-np.inf, np.float32))
    assert_same_bits(got_max, np.array(3.5, np.float32))
    assert_same_bits(got_window, np.array([0.5, 3.0, 3.5], np.float32))


# ------------------------------------------------- every element type, one module each

# The types the tests above leave out (i8/i32/i64/ui8/ui32/ui64/f32/f64 are covered there).
ALL_REDUCIBLE = ["i2", "i4", "i16", "ui2", "ui4", "ui16", "f4E2M1FN", "f8E4M3FN", "f8E5M2",
                 "f8E4M3FNUZ", "f8E5M2FNUZ", "f8E4M3B11FNUZ", "f8E4M3", "f8E3M4", "f8E8M0FNU",
                 "bf16", "f16"]


def _typed_values(element, rng, shape):
    """(values, summable values): finite values of the type, and ones whose row sums of four
    are exact in the type (integers wrap, which is exact too)."""
    dtype = T.ELEMENT_DTYPES[element]
    if T.is_integer(dtype):
        info = ml_dtypes.iinfo(dtype)
        lo, hi = max(int(info.min), -100), min(int(info.max), 100)
        values = rng.integers(lo, hi, shape, endpoint=True).astype(dtype)
        return values, values
    bits = T.bit_width(dtype)
    if bits <= 8:
        patterns = np.arange(1 << bits).astype(np.uint8).view(dtype)
        finite = patterns[np.isfinite(patterns.astype(np.float64))]
    else:
        finite = (rng.integers(-1000, 1000, 64) / 8).astype(dtype)
    values = rng.choice(finite, shape)
    summable = None if element == "f8E8M0FNU" else rng.choice([0.0, 0.5], shape).astype(dtype)
    return values, summable


@pytest.mark.slow
@pytest.mark.parametrize("element", ALL_REDUCIBLE)
def test_reduce_reduce_window_sort_every_element_type(element):
    dtype = T.ELEMENT_DTYPES[element]
    rng = np.random.default_rng(7)
    x, s = _typed_values(element, rng, (3, 4))
    t, r, w, e = (f"tensor<3x4x{element}>", f"tensor<3x{element}>", f"tensor<3x3x{element}>",
                  f"tensor<{element}>")
    signed = T.is_integer(dtype) and ml_dtypes.iinfo(dtype).min < 0
    ctype = "FLOAT" if T.is_float(dtype) else ("SIGNED" if signed else "UNSIGNED")
    add = s is not None
    text = f"""func.func @main(%x: {t}, %s: {t}, %lo: {e}, %z: {e}) -> ({r}, {r}, {w}, {t}, {r}) {{
      %0 = stablehlo.reduce(%x init: %lo) applies stablehlo.maximum across dimensions = [1] : ({t}, {e}) -> {r}
      %1 = stablehlo.reduce(%x init: %lo) applies stablehlo.minimum across dimensions = [1] : ({t}, {e}) -> {r}
      %2 = "stablehlo.reduce_window"(%x, %lo) ({{
        ^bb0(%a: {e}, %b: {e}):
          %m = stablehlo.maximum %a, %b : {e}
          stablehlo.return %m : {e}
      }}) {{window_dimensions = array<i64: 1, 2>}} : ({t}, {e}) -> {w}
      %3 = "stablehlo.sort"(%x) ({{
        ^bb0(%a: {e}, %b: {e}):
          %c = stablehlo.compare LT, %a, %b, {ctype} : ({e}, {e}) -> tensor<i1>
          stablehlo.return %c : tensor<i1>
      }}) {{dimension = 1 : i64, is_stable = true}} : ({t}) -> {t}
      %4 = stablehlo.reduce(%{"s" if add else "x"} init: %z) applies stablehlo.{"add" if add else "maximum"} across dimensions = [1] : ({t}, {e}) -> {r}
      return %0, %1, %2, %3, %4 : {r}, {r}, {w}, {t}, {r}
    }}"""
    lo = x.min()     # an init inside the data range, so it shows in neither max nor min
    z = np.array(0 if add else x.min()).astype(dtype)
    outs = run(text, x, s if add else x, np.asarray(lo, dtype), z)
    wx = x.astype(np.float64) if T.is_float(dtype) else x.astype(object)
    assert_same_bits(outs[0], np.maximum(wx.max(axis=1), lo.astype(wx.dtype)).astype(dtype))
    assert_same_bits(outs[1], np.minimum(wx.min(axis=1), lo.astype(wx.dtype)).astype(dtype))
    windows = np.maximum(wx[:, :-1], wx[:, 1:])
    assert_same_bits(outs[2], np.maximum(windows, lo.astype(wx.dtype)).astype(dtype))
    order = np.argsort(x.astype(np.float64), axis=1, kind="stable")
    assert_same_bits(outs[3], np.take_along_axis(x, order, axis=1))
    if add:
        if T.is_integer(dtype):
            info = ml_dtypes.iinfo(dtype)
            span = int(info.max) - int(info.min) + 1
            sums = [(sum(int(v) for v in row) - int(info.min)) % span + int(info.min)
                    for row in s]
            expected = (np.array(sums, np.uint64) if dtype == np.uint64
                        else np.array(sums, np.int64).astype(dtype))
        else:
            expected = s.astype(np.float64).sum(axis=1).astype(dtype)
        assert_same_bits(outs[4], expected)


# ------------------------------------------------------------------ promotable bodies
# StableHLO 1.x (its release artifacts' op_*_with_promotable_types): a body whose block
# arguments are wider than the operands' element type accumulates in the wider type; the
# init values keep the operands' type (reduce C2/C6, reduce_window, select_and_scatter C11).
# jaxlib's reference interpreter aborts on these ("Expected same type for an SSA register").

def test_reduce_promotable_f32_to_f64_init_in_operand_type():
    text = """
func.func @main(%x: tensor<4x4xf32>, %init: tensor<f32>) -> tensor<4xf64> {
  %0 = stablehlo.reduce(%x init: %init) across dimensions = [0] : (tensor<4x4xf32>, tensor<f32>) -> tensor<4xf64>
   reducer(%a: tensor<f64>, %b: tensor<f64>)  {
    %1 = stablehlo.add %a, %b : tensor<f64>
    stablehlo.return %1 : tensor<f64>
  }
  return %0 : tensor<4xf64>
}"""
    # f32 values whose f32 sum rounds: only an f64 accumulation keeps every bit
    x = np.array([[1.0, 2.0**24, 0.1, -3.5]] * 4, np.float32)
    x[1, 1] = 1.0
    got, = run(text, x, np.float32(0.5))
    want = 0.5 + x.astype(np.float64).sum(axis=0)
    assert got.dtype == np.float64
    assert_same_bits(got, want)


def test_reduce_window_promotable_variadic():
    text = """
func.func @main(%x: tensor<4x2xf32>, %y: tensor<4x2xf32>, %i: tensor<f32>, %j: tensor<f32>) -> (tensor<2x2xf64>, tensor<2x2xf32>) {
  %0:2 = "stablehlo.reduce_window"(%x, %y, %i, %j) <{padding = dense<[[2, 2], [0, 0]]> : tensor<2x2xi64>, window_dimensions = array<i64: 5, 1>, window_strides = array<i64: 3, 1>}> ({
  ^bb0(%a: tensor<f64>, %b: tensor<f32>, %c: tensor<f64>, %d: tensor<f32>):
    %1 = stablehlo.add %a, %c : tensor<f64>
    %2 = stablehlo.add %b, %d : tensor<f32>
    stablehlo.return %1, %2 : tensor<f64>, tensor<f32>
  }) : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<f32>, tensor<f32>) -> (tensor<2x2xf64>, tensor<2x2xf32>)
  return %0#0, %0#1 : tensor<2x2xf64>, tensor<2x2xf32>
}"""
    x = np.array([[2.0**24, 1], [1, 2], [1, 3], [0.25, 4]], np.float32)
    y = np.arange(8, dtype=np.float32).reshape(4, 2)
    wide, narrow = run(text, x, y, np.float32(1), np.float32(-1))

    def windows(a, init, dtype):  # padding 2 each side with init, windows of 5, stride 3
        padded = np.concatenate([np.full((2, 2), init), a, np.full((2, 2), init)]).astype(dtype)
        return np.stack([init + padded[k:k + 5].sum(axis=0, dtype=dtype) for k in (0, 3)])
    assert wide.dtype == np.float64 and narrow.dtype == np.float32
    assert_same_bits(wide, windows(x.astype(np.float64), 1.0, np.float64))
    np.testing.assert_array_equal(narrow, windows(y, -1.0, np.float32))


def test_select_and_scatter_promotable_scatter_body():
    text = """
func.func @main(%x: tensor<4x4xf32>, %s: tensor<2x2xf32>, %init: tensor<f32>) -> tensor<4x4xf64> {
  %0 = "stablehlo.select_and_scatter"(%x, %s, %init) <{window_dimensions = array<i64: 2, 2>, window_strides = array<i64: 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.compare GE, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  }, {
  ^bb0(%a: tensor<f64>, %b: tensor<f64>):
    %1 = stablehlo.add %a, %b : tensor<f64>
    stablehlo.return %1 : tensor<f64>
  }) : (tensor<4x4xf32>, tensor<2x2xf32>, tensor<f32>) -> tensor<4x4xf64>
  return %0 : tensor<4x4xf64>
}"""
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    s = np.array([[2.0**24, 1], [0.1, -2]], np.float32)
    got, = run(text, x, s, np.float32(1))
    want = np.ones((4, 4), np.float64)
    for i in range(2):
        for j in range(2):  # each window's maximum is its bottom-right element
            want[2 * i + 1, 2 * j + 1] += np.float64(s[i, j])
    assert got.dtype == np.float64
    assert_same_bits(got, want)
