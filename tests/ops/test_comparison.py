"""compare (every direction and compare_type), select and clamp.

Expected values come from numpy comparisons or hand-written orderings.
"""

import operator

import ml_dtypes
import numpy as np
import pytest

import shlo2jax

from _helpers import element, staged_jaxpr, tensor

BF16 = ml_dtypes.bfloat16
DIRECTIONS = {"EQ": operator.eq, "NE": operator.ne, "LT": operator.lt, "LE": operator.le,
              "GT": operator.gt, "GE": operator.ge}


def compare(direction, x, y, compare_type=None):
    t = tensor(x.shape, x.dtype)
    r = tensor(x.shape, np.bool_)
    kind = f", {compare_type}" if compare_type else ""
    text = f"""func.func @main(%x: {t}, %y: {t}) -> {r} {{
      %0 = stablehlo.compare {direction}, %x, %y{kind} : ({t}, {t}) -> {r}
      return %0 : {r}
    }}"""
    out = np.asarray(shlo2jax.load(text)(x, y))
    assert out.dtype == np.bool_
    return out


def all_pairs(values):
    """Every ordered pair of `values`, as two flat arrays."""
    x, y = np.meshgrid(values, values, indexing="ij")
    return x.ravel(), y.ravel()


INTEGER_CASES = [
    (np.int8, "SIGNED", [-128, -1, 0, 1, 127]),
    (np.int32, "SIGNED", [-2**31, -5, 0, 5, 2**31 - 1]),
    (np.int64, "SIGNED", [-2**63, -1, 0, 2**62, 2**63 - 1]),
    (ml_dtypes.int4, "SIGNED", [-8, -1, 0, 3, 7]),
    (np.uint8, "UNSIGNED", [0, 1, 127, 128, 255]),
    (np.uint32, "UNSIGNED", [0, 1, 2**31 - 1, 2**31, 2**32 - 1]),
    (np.uint64, "UNSIGNED", [0, 1, 2**63, 2**64 - 1]),
    (ml_dtypes.uint4, "UNSIGNED", [0, 1, 7, 8, 15]),
    (np.bool_, "UNSIGNED", [False, True]),
]


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("dtype, compare_type, values", INTEGER_CASES,
                         ids=[element(c[0]) for c in INTEGER_CASES])
def test_integer_compare(direction, dtype, compare_type, values):
    a, b = all_pairs(np.array(values, dtype=object))
    expected = np.array([DIRECTIONS[direction](p, q) for p, q in zip(a, b)])
    wide = np.uint64 if np.dtype(dtype) == np.uint64 else np.int64
    x, y = (np.array([int(v) for v in side], wide).astype(dtype) for side in (a, b))
    np.testing.assert_array_equal(compare(direction, x, y, compare_type), expected)
    # Without compare_type, signedness comes from the element type.
    np.testing.assert_array_equal(compare(direction, x, y), expected)


def test_compare_type_overrides_signedness():
    x, y = np.array([-1, 1], np.int8), np.array([1, -1], np.int8)
    np.testing.assert_array_equal(compare("LT", x, y, "UNSIGNED"), [False, True])
    u, v = np.array([255, 1], np.uint8), np.array([1, 255], np.uint8)
    np.testing.assert_array_equal(compare("LT", u, v, "SIGNED"), [True, False])


FLOAT_VALUES = [-np.inf, -2.5, -0.0, 0.0, 1.0, 3.0, np.inf, np.nan]


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32, np.float64,
                                   ml_dtypes.float8_e5m2], ids=lambda d: element(d))
def test_float_compare_is_ieee(direction, dtype):
    # FLOAT: -0 == +0, NaN is unordered (only NE is true).
    a, b = all_pairs(np.array(FLOAT_VALUES))
    with np.errstate(invalid="ignore"):
        expected = DIRECTIONS[direction](a, b)
    x, y = a.astype(dtype), b.astype(dtype)
    np.testing.assert_array_equal(compare(direction, x, y, "FLOAT"), expected)


# Strictly increasing in IEEE totalOrder (as XLA orders each type's bit patterns).
TOTAL_ORDERS = {
    np.float32: [-np.nan, -np.inf, -3.5, -1e-45, -0.0, 0.0, 1e-45, 2.0, np.inf, np.nan],
    np.float64: [-np.nan, -np.inf, -1.0, -0.0, 0.0, 5e-324, 1.0, np.inf, np.nan],
    BF16: [-np.nan, -np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan],
    np.float16: [-np.nan, -np.inf, -65504.0, -0.0, 0.0, 6e-8, np.inf, np.nan],
    ml_dtypes.float8_e4m3fn: [-np.nan, -448.0, -1.0, -0.0, 0.0, 0.5, 448.0, np.nan],
    # No -0 here: the bit pattern 0x80 is the only NaN, and sits just below +0.
    ml_dtypes.float8_e4m3fnuz: [-240.0, -1.0, np.nan, 0.0, 1.0, 240.0],
    ml_dtypes.float4_e2m1fn: [-6.0, -0.5, -0.0, 0.0, 0.5, 6.0],
}


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("dtype", TOTAL_ORDERS, ids=lambda d: element(d))
def test_totalorder_compare(direction, dtype):
    values = TOTAL_ORDERS[dtype]
    with np.errstate(invalid="ignore", over="ignore"):
        ordered = np.array(values).astype(dtype)
    if dtype in (np.float32, np.float64, np.float16, BF16, ml_dtypes.float8_e4m3fn):
        ordered[0] = -np.abs(ordered[-1])  # -NaN: a NaN with the sign bit set
        assert np.signbit(ordered[0].astype(np.float32))
    i, j = all_pairs(np.arange(len(values)))
    expected = DIRECTIONS[direction](i, j)
    np.testing.assert_array_equal(compare(direction, ordered[i], ordered[j], "TOTALORDER"),
                                  expected)


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_compare_is_lexicographic(direction, dtype):
    values = np.array([-1 + 2j, 0 - 1j, 0 + 0j, 0 + 1j, 2 - 5j, 2 + 0j], dtype)
    i, j = all_pairs(np.arange(len(values)))  # `values` is in lexicographic order
    expected = DIRECTIONS[direction](i, j)
    np.testing.assert_array_equal(compare(direction, values[i], values[j], "FLOAT"), expected)


# ------------------------------------------------------------------- select

def call(text, *args):
    return np.asarray(shlo2jax.load(text)(*args))


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint32, np.float32, BF16,
                                   np.complex128, ml_dtypes.int4, ml_dtypes.float8_e4m3fn],
                         ids=lambda d: element(d))
def test_select(dtype):
    pred = np.array([[True, False, True], [False, False, True]])
    x = np.array([[1, 0, 1], [1, 1, 0]]).astype(dtype)
    y = np.array([[0, 1, 0], [0, 0, 1]]).astype(dtype)
    t, p = tensor((2, 3), dtype), tensor((2, 3), np.bool_)
    text = f"""func.func @main(%p: {p}, %x: {t}, %y: {t}) -> {t} {{
      %0 = stablehlo.select %p, %x, %y : {p}, {t}
      return %0 : {t}
    }}"""
    out = call(text, pred, x, y)
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, np.where(pred, x, y))


@pytest.mark.parametrize("pred", [True, False])
def test_select_scalar_predicate(pred):
    x, y = np.arange(6, dtype=np.int32).reshape(2, 3), -np.ones((2, 3), np.int32)
    text = """func.func @main(%p: tensor<i1>, %x: tensor<2x3xi32>, %y: tensor<2x3xi32>)
        -> tensor<2x3xi32> {
      %0 = stablehlo.select %p, %x, %y : tensor<i1>, tensor<2x3xi32>
      return %0 : tensor<2x3xi32>
    }"""
    np.testing.assert_array_equal(call(text, np.array(pred), x, y), x if pred else y)


# -------------------------------------------------------------------- clamp

@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int64, np.float32, np.float64, BF16],
                         ids=lambda d: element(d))
def test_clamp_with_tensor_bounds(dtype):
    lo = np.array([0, 0, 2, 5, 1]).astype(dtype)
    x = np.array([3, 10, 1, 6, 7]).astype(dtype)
    hi = np.array([4, 9, 3, 5, 9]).astype(dtype)
    t = tensor((5,), dtype)
    text = f"""func.func @main(%lo: {t}, %x: {t}, %hi: {t}) -> {t} {{
      %0 = stablehlo.clamp %lo, %x, %hi : {t}
      return %0 : {t}
    }}"""
    out = call(text, lo, x, hi)
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, np.minimum(np.maximum(x, lo), hi))


def test_clamp_with_scalar_bounds_and_nan():
    x = np.array([-5.0, 0.5, 3.0, np.nan], np.float32)
    text = """func.func @main(%lo: tensor<f32>, %x: tensor<4xf32>, %hi: tensor<f32>)
        -> tensor<4xf32> {
      %0 = stablehlo.clamp %lo, %x, %hi : (tensor<f32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
      return %0 : tensor<4xf32>
    }"""
    out = call(text, np.float32(-1), x, np.float32(2))
    # min(max(x, lo), hi): NaN propagates.
    np.testing.assert_array_equal(out, np.array([-1.0, 0.5, 2.0, np.nan], np.float32))


NARROW_FLOATS = ["f4E2M1FN", "f8E4M3FN", "f8E5M2", "f8E4M3FNUZ", "f8E5M2FNUZ", "f8E4M3B11FNUZ",
                 "f8E4M3", "f8E3M4", "f8E8M0FNU"]


@pytest.mark.slow
@pytest.mark.parametrize("element", NARROW_FLOATS)
def test_narrow_float_compare_every_pair_of_bit_patterns(element):
    """FLOAT (IEEE: NaN unordered, -0 == +0) and TOTALORDER (sign-magnitude order of the bit
    patterns, so -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN) on every pair of values."""
    from shlo2jax import value_types as T
    dtype = T.ELEMENT_DTYPES[element]
    bits = T.bit_width(dtype)
    patterns = np.arange(1 << bits)
    values = patterns.astype(np.uint8).view(dtype)
    signed = element != "f8E8M0FNU"           # f8E8M0FNU has no sign bit
    unsigned_zero_nan = "FNUZ" in element       # bits 0b100..0 are the NaN, not -0
    if unsigned_zero_nan:
        keep = patterns != 1 << (bits - 1)      # its total order is not the spec's concern
        values, patterns = values[keep], patterns[keep]
    x, y = all_pairs(values)
    kx, ky = all_pairs(patterns)
    sign = 1 << (bits - 1)

    def key(p):
        if not signed:
            return p
        return np.where(p & sign, -(p & (sign - 1)) - 1, p)

    t = f"tensor<{x.size}x{element}>"
    r = f"tensor<{x.size}xi1>"
    lines, rets = [], []
    for ctype in ["FLOAT", "TOTALORDER"]:
        for d in DIRECTIONS:
            lines.append(f"  %r{len(rets)} = stablehlo.compare {d}, %x, %y, {ctype} : "
                         f"({t}, {t}) -> {r}")
            rets.append(f"%r{len(rets)}")
    text = (f"func.func @main(%x: {t}, %y: {t}) -> ({', '.join([r] * len(rets))}) {{\n"
            + "\n".join(lines) + f"\n  return {', '.join(rets)} : {', '.join([r] * len(rets))}\n}}")
    outs = [np.asarray(o) for o in shlo2jax.load(text)(x, y)]
    wx, wy = x.astype(np.float64), y.astype(np.float64)
    for out, fn in zip(outs[:6], DIRECTIONS.values()):
        np.testing.assert_array_equal(out, fn(wx, wy))
    for out, (d, fn) in zip(outs[6:], DIRECTIONS.items()):
        np.testing.assert_array_equal(out, fn(key(kx), key(ky)), err_msg=d)


# A torch variance's `n - ddof > 0 ? s / (n - ddof) : nan`, of `%s` (the sums of squares)
# and `%ddof`.
_VARIANCE_OF_SUMS = """
  %n = stablehlo.constant dense<3.0> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %nan = stablehlo.constant dense<0x7FC00000> : tensor<4xf32>
  %count = stablehlo.subtract %n, %ddof : tensor<f32>
  %positive = stablehlo.compare GT, %count, %zero : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %c = stablehlo.broadcast_in_dim %count, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %v = stablehlo.divide %s, %c : tensor<4xf32>
  %r = stablehlo.select %positive, %v, %nan : tensor<i1>, tensor<4xf32>
  return %r : tensor<4xf32>
}"""

_VARIANCE = """func.func @main(%x: tensor<4x3xf32>) -> tensor<4xf32> {
  %ddof = stablehlo.constant dense<DDOF> : tensor<f32>
  %zero0 = stablehlo.constant dense<0.0> : tensor<f32>
  %sq = stablehlo.multiply %x, %x : tensor<4x3xf32>
  %s = stablehlo.reduce(%sq init: %zero0) applies stablehlo.add across dimensions = [1]
      : (tensor<4x3xf32>, tensor<f32>) -> tensor<4xf32>""" + _VARIANCE_OF_SUMS


def _staged_names(program, *args):
    return [e.primitive.name for e in staged_jaxpr(program, *args).eqns]


@pytest.mark.parametrize("ddof, picked", [("0.0", "sum"), ("4.0", "nan")])
def test_select_decided_by_constants_is_the_operand_it_picks(ddof, picked):
    # a torch variance's `n - ddof > 0 ? s / (n - ddof) : nan`: the predicate is one value,
    # computed from constants, so the select and its predicate's ops are not staged
    import jax
    program = shlo2jax.load(_VARIANCE.replace("DDOF", ddof))
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    expected = (x * x).sum(1) / np.float32(3) if picked == "sum" else np.full(4, np.nan)
    np.testing.assert_allclose(program(x), expected.astype(np.float32), rtol=1e-6)
    names = _staged_names(program, x)
    assert "select_n" not in names and "gt" not in names, names
    g = jax.grad(lambda v: program.entry(v).sum())(x)
    np.testing.assert_allclose(g, 2 * x / 3 if picked == "sum" else np.zeros_like(x), rtol=1e-6)


def test_select_on_an_argument_stays_a_select():
    # x > -inf is true for every number but not for NaN: a predicate that reads an argument
    # is not decided (the NaN the ranges leave aside would change the value)
    program = shlo2jax.load("""func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %lo = stablehlo.constant dense<0xFF800000> : tensor<3xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<3xf32>
  %p = stablehlo.compare GE, %x, %lo : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
  %r = stablehlo.select %p, %x, %zero : tensor<3xi1>, tensor<3xf32>
  return %r : tensor<3xf32>
}""")
    x = np.array([np.nan, -np.inf, 2.0], np.float32)
    np.testing.assert_array_equal(program(x), np.array([0.0, -np.inf, 2.0], np.float32))
    assert "select_n" in _staged_names(program, x)


def test_select_decided_through_a_private_functions_calls():
    # chess's `_var(x, ddof)`: the predicate reads the callee's argument, which every call
    # passes as the constant 0
    import jax
    program = shlo2jax.load("""
func.func private @var(%s: tensor<4xf32>, %ddof: tensor<f32>) -> tensor<4xf32> {"""
                            + _VARIANCE_OF_SUMS + """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %ddof = stablehlo.constant dense<0.0> : tensor<f32>
  %r = func.call @var(%x, %ddof) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}""")
    x = np.array([3.0, -6.0, 1.5, 0.0], np.float32)
    np.testing.assert_allclose(program(x), x / 3, rtol=1e-6)
    jaxpr = str(jax.make_jaxpr(program.entry)(x))
    assert "select_n" not in jaxpr, jaxpr
