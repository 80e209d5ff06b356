"""Element-wise unary and binary ops.

Expected values come from numpy (float64 / complex128, then rounded), from
Python integers with explicit wrap-around, or are written out by hand. Where the
spec leaves a result implementation-defined (integer division by zero, shifts
past the bit width, integer power with a negative exponent), the expected
values are XLA's, as documented in the test.
"""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

import shlo2jax
from shlo2jax.value_types import bit_width

from _helpers import element, tensor
import xla_known

BF16 = ml_dtypes.bfloat16
# (rtol, atol) per element type: a few ulp of the type.
TOL = {np.dtype(np.float16): (4e-3, 1e-3), np.dtype(BF16): (3e-2, 1e-2),
       np.dtype(np.float32): (4e-6, 1e-6), np.dtype(np.float64): (1e-13, 1e-14),
       np.dtype(np.complex64): (4e-6, 1e-6), np.dtype(np.complex128): (1e-13, 1e-14)}
FLOATS = [np.float16, BF16, np.float32, np.float64]
SIGNED = [np.int8, np.int16, np.int32, np.int64]
UNSIGNED = [np.uint8, np.uint16, np.uint32, np.uint64]


def run(op, *args, result_dtype=None, attrs=""):
    """`%0 = "<op>"(args...) {attrs}` in generic form, on numpy arrays; returns numpy."""
    args = [np.asarray(a) for a in args]
    types = [tensor(a.shape, a.dtype) for a in args]
    rtype = tensor(args[-1].shape, result_dtype or args[-1].dtype)
    params = ", ".join(f"%a{i}: {t}" for i, t in enumerate(types))
    names = ", ".join(f"%a{i}" for i in range(len(args)))
    text = f"""func.func @main({params}) -> {rtype} {{
      %0 = "{op}"({names}) {{{attrs}}} : ({", ".join(types)}) -> {rtype}
      return %0 : {rtype}
    }}"""
    return np.asarray(shlo2jax.load(text)(*args))


def assert_bitwise(actual, expected):
    """Equal values and dtypes; NaN matches NaN, and -0.0 must match -0.0."""
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype
    if expected.dtype.kind == "f" or expected.dtype == BF16:
        a, e = actual.astype(np.float64), expected.astype(np.float64)
        same = (a == e) & (np.signbit(a) == np.signbit(e)) | (np.isnan(a) & np.isnan(e))
        assert same.all(), (actual, expected)
    else:
        np.testing.assert_array_equal(actual, expected)


def assert_close(actual, expected, dtype):
    assert actual.dtype == np.dtype(dtype)
    rtol, atol = TOL[np.dtype(dtype)]
    np.testing.assert_allclose(actual.astype(np.complex128), np.asarray(expected, np.complex128),
                               rtol=rtol, atol=atol, equal_nan=True)


def arr(values, dtype):
    """Python integers (each in range for `dtype`) as an array of `dtype`."""
    if np.dtype(dtype) == np.uint64:
        return np.array([int(v) for v in values], np.uint64)
    return np.array([int(v) for v in values], np.int64).astype(dtype)


def wrap(values, dtype):
    """Python integers reduced modulo 2^bits into `dtype` (two's complement)."""
    info = ml_dtypes.iinfo(dtype)
    span = int(info.max) - int(info.min) + 1
    return arr([(int(v) - int(info.min)) % span + int(info.min) for v in values], dtype)


# ------------------------------------------------------------ float unary ops

REAL_IN = np.array([-2.75, -1.5, -0.5, -0.0, 0.0, 0.25, 0.5, 1.0, 1.5, 3.0])
POSITIVE_IN = np.array([0.01, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 10.0])

FLOAT_UNARY = {
    "cbrt": (np.cbrt, REAL_IN),
    "cosine": (np.cos, REAL_IN),
    "sine": (np.sin, REAL_IN),
    "tan": (np.tan, REAL_IN),
    "tanh": (np.tanh, REAL_IN),
    "exponential": (np.exp, REAL_IN),
    "exponential_minus_one": (np.expm1, REAL_IN),
    "log": (np.log, POSITIVE_IN),
    "log_plus_one": (np.log1p, POSITIVE_IN - 0.5),
    "logistic": (lambda x: 1 / (1 + np.exp(-x)), REAL_IN),
    "rsqrt": (lambda x: 1 / np.sqrt(x), POSITIVE_IN),
    "sqrt": (np.sqrt, POSITIVE_IN),
}


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: element(d))
@pytest.mark.parametrize("name", FLOAT_UNARY)
def test_float_unary(name, dtype):
    fn, values = FLOAT_UNARY[name]
    x = values.astype(dtype)
    expected = fn(x.astype(np.float64)).astype(dtype)
    assert_close(run(f"stablehlo.{name}", x), expected, dtype)


COMPLEX_UNARY = {
    "cosine": np.cos, "sine": np.sin, "tan": np.tan, "tanh": np.tanh, "exponential": np.exp,
    "exponential_minus_one": np.expm1, "log": np.log, "log_plus_one": np.log1p,
    "logistic": lambda z: 1 / (1 + np.exp(-z)), "sqrt": np.sqrt,
    "rsqrt": lambda z: 1 / np.sqrt(z), "negate": np.negative,
    "sign": lambda z: np.where(z == 0, 0, z / np.abs(z)),
    "cbrt": lambda z: np.abs(z) ** (1 / 3) * np.exp(1j * np.angle(z) / 3),
}
COMPLEX_IN = np.array([0.5 + 0.25j, -1.5 + 2j, 3 - 0.5j, -0.25 - 1j, 2 + 0j, -8 + 0j, 0 - 27j])


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=["c64", "c128"])
@pytest.mark.parametrize("name", COMPLEX_UNARY)
def test_complex_unary(name, dtype):
    x = COMPLEX_IN.astype(dtype)
    expected = COMPLEX_UNARY[name](x.astype(np.complex128)).astype(dtype)
    assert_close(run(f"stablehlo.{name}", x), expected, dtype)


def test_complex_cbrt_principal_root():
    x = np.array([-8 + 0j, complex(-8, -0.0), 27j, 0j, np.inf + 0j], np.complex128)
    expected = np.array([1 + np.sqrt(3) * 1j, 1 - np.sqrt(3) * 1j, np.sqrt(27) / 2 + 1.5j, 0j,
                         np.inf + 0j])
    assert_close(run("stablehlo.cbrt", x), expected, np.complex128)


SPECIAL = np.array([-np.inf, -2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, np.inf, np.nan])


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: element(d))
@pytest.mark.parametrize("name, expected", [
    ("ceil", [-np.inf, -2, -1, -0.0, -0.0, 0, 1, 2, 3, np.inf, np.nan]),
    ("floor", [-np.inf, -3, -2, -1, -0.0, 0, 0, 1, 2, np.inf, np.nan]),
    # Ties go away from zero / to even; the sign of zero survives.
    ("round_nearest_afz", [-np.inf, -3, -2, -1, -0.0, 0, 1, 2, 3, np.inf, np.nan]),
    ("round_nearest_even", [-np.inf, -2, -2, -0.0, -0.0, 0, 0, 2, 2, np.inf, np.nan]),
    ("negate", [np.inf, 2.5, 1.5, 0.5, 0.0, -0.0, -0.5, -1.5, -2.5, -np.inf, np.nan]),
    ("abs", [np.inf, 2.5, 1.5, 0.5, 0.0, 0.0, 0.5, 1.5, 2.5, np.inf, np.nan]),
    # sign keeps -0.0 and NaN.
    ("sign", [-1, -1, -1, -1, -0.0, 0.0, 1, 1, 1, 1, np.nan]),
])
def test_exact_float_unary(name, expected, dtype):
    assert_bitwise(run(f"stablehlo.{name}", SPECIAL.astype(dtype)),
                   np.array(expected).astype(dtype))


@pytest.mark.parametrize("dtype", FLOATS + [ml_dtypes.float8_e4m3fn],
                         ids=lambda d: element(d))
def test_is_finite(dtype):
    x = np.array([1.0, -0.0, np.inf, -np.inf, np.nan, 3.5])
    with np.errstate(invalid="ignore"):
        x = x.astype(dtype)
    expected = np.isfinite(x.astype(np.float64))
    assert_bitwise(run("stablehlo.is_finite", x, result_dtype=np.bool_), expected)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.complex128])
def test_real_imag(dtype):
    x = np.array([1.5 - 2j, -0.0 + 3j, 4 + 0j]).astype(np.complex128)
    x = x.real.astype(dtype) if np.dtype(dtype).kind == "f" else x.astype(dtype)
    part = np.float32 if dtype in (np.float32, np.complex64) else np.float64
    # A real tensor is its own real part, and its imaginary part is zero.
    assert_bitwise(run("stablehlo.real", x, result_dtype=part), x.real.astype(part))
    assert_bitwise(run("stablehlo.imag", x, result_dtype=part),
                   np.imag(x).astype(part) if np.iscomplexobj(x) else np.zeros(3, part))


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_abs(dtype):
    x = np.array([3 + 4j, -5 - 12j, 0j, 1e30 + 1e30j], dtype)
    part = np.float32 if dtype == np.complex64 else np.float64
    assert_close(run("stablehlo.abs", x, result_dtype=part), np.abs(x.astype(np.complex128)), part)


# ---------------------------------------------------------- integer unary ops

def int_values(dtype):
    info = ml_dtypes.iinfo(dtype)
    candidates = [int(info.min), int(info.min) + 1, -5, -2, -1, 0, 1, 2, 3, 7, int(info.max)]
    return arr([v for v in candidates if info.min <= v <= info.max], dtype)


INTS = SIGNED + UNSIGNED + [ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2]


def _known_miscompile(dtype, name, affected):
    """`dtype` as a parameter, a strict known failure where this jaxlib's XLA shows the
    miscompile `name` (tests/xla_known.py) and `dtype` is one it affects."""
    marks = [pytest.mark.xfail(xla_known.xla_miscompiles(name), strict=True,
                               reason=xla_known.xla_miscompile_reason(name))] \
        if dtype in affected else []
    return pytest.param(dtype, marks=marks, id=element(dtype))


@pytest.mark.parametrize("dtype", [_known_miscompile(d, "int2 popcnt", [ml_dtypes.int2])
                                   for d in INTS])
def test_integer_unary(dtype):
    x = int_values(dtype)
    bits = bit_width(dtype)
    mask = (1 << bits) - 1
    unsigned = [int(v) & mask for v in x]
    assert_bitwise(run("stablehlo.negate", x), wrap([-int(v) for v in x], dtype))
    assert_bitwise(run("stablehlo.not", x), wrap([~int(v) for v in x], dtype))
    assert_bitwise(run("stablehlo.popcnt", x), np.array([bin(u).count("1") for u in unsigned],
                                                        np.int64).astype(dtype))
    assert_bitwise(run("stablehlo.count_leading_zeros", x),
                   np.array([bits - u.bit_length() for u in unsigned]).astype(dtype))
    if ml_dtypes.iinfo(dtype).min < 0:
        # abs(INT_MIN) wraps to INT_MIN; sign is -1/0/1.
        assert_bitwise(run("stablehlo.abs", x), wrap([abs(int(v)) for v in x], dtype))
        assert_bitwise(run("stablehlo.sign", x),
                       np.array([(v > 0) - (v < 0) for v in map(int, x)]).astype(dtype))


def test_not_bool():
    x = np.array([True, False])
    assert_bitwise(run("stablehlo.not", x), ~x)


# --------------------------------------------------------------- binary ops

@pytest.mark.parametrize("dtype", FLOATS + [np.complex64, np.complex128],
                         ids=lambda d: element(d))
@pytest.mark.parametrize("name, fn", [
    ("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
    ("divide", np.divide), ("power", np.power)])
def test_float_arithmetic(name, fn, dtype):
    x = np.array([1.5, -2.25, 3.0, 0.5, 7.0, 2.0]).astype(dtype)
    y = np.array([0.5, 4.0, -1.5, 2.0, 3.0, -0.5]).astype(dtype)
    if np.dtype(dtype).kind == "c":
        x, y = (x + 0.5j).astype(dtype), (y - 0.25j).astype(dtype)
    elif name == "power":
        x = np.abs(x)
    wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
    expected = fn(x.astype(wide), y.astype(wide)).astype(dtype)
    assert_close(run(f"stablehlo.{name}", x, y), expected, dtype)


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32, np.float64],
                         ids=lambda d: element(d))
def test_float_remainder_takes_sign_of_dividend(dtype):
    x = np.array([17.5, -17.5, 17.5, -17.5, 5.0, -0.0, np.inf, 3.0]).astype(dtype)
    y = np.array([3.0, 3.0, -3.0, -3.0, 0.0, 2.0, 2.0, np.inf]).astype(dtype)
    with np.errstate(invalid="ignore"):
        expected = np.fmod(x.astype(np.float64), y.astype(np.float64)).astype(dtype)
    assert_bitwise(run("stablehlo.remainder", x, y), expected)


def test_complex_remainder_is_unsupported():
    x = np.array([1 + 1j], np.complex64)
    with pytest.raises(shlo2jax.UnsupportedError, match="remainder"):
        run("stablehlo.remainder", x, x)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: element(d))
def test_atan2(dtype):
    y = np.array([1.0, -1.0, 0.0, -0.0, 2.0, -3.0, 0.0]).astype(dtype)
    x = np.array([1.0, 1.0, -1.0, -1.0, -0.5, -2.0, 0.0]).astype(dtype)
    expected = np.arctan2(y.astype(np.float64), x.astype(np.float64)).astype(dtype)
    assert_close(run("stablehlo.atan2", y, x), expected, dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: element(d))
def test_atan2_of_subnormal_operands(dtype):
    """Found by shlo2jax fuzz (seeds 277, 526 and 14 more of 10,000): XLA's CPU atan2 gives
    NaN when both operands are subnormal (it tests them as nonzero, then its division
    flushes them); the spec gives the angle. The translation scales both exactly first."""
    info = ml_dtypes.finfo(dtype)
    sub = float(info.smallest_subnormal)
    y = np.array([-3 * sub, 3 * sub, 2 * sub, -sub, 0.0, -0.0, sub, 0.0, 1.0]).astype(dtype)
    x = np.array([-3 * sub, 3 * sub, -5 * sub, 7 * sub, sub, -sub, 0.0, -0.0, sub]).astype(dtype)
    expected = np.arctan2(y.astype(np.float64), x.astype(np.float64)).astype(dtype)
    assert_close(run("stablehlo.atan2", y, x), expected, dtype)


def test_complex_atan2():
    y = np.array([1 + 0.5j, -2 + 1j, 0.5 - 0.25j])
    x = np.array([2 - 1j, 1 + 0.5j, -1 + 2j])
    # atan2 extended to complex: -i log((x + iy) / sqrt(x^2 + y^2)).
    expected = -1j * np.log((x + 1j * y) / np.sqrt(x * x + y * y))
    assert_close(run("stablehlo.atan2", y, x), expected, np.complex128)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_complex_op(dtype):
    re, im = np.array([1.5, -0.0, 3.0], dtype), np.array([-2.0, 4.0, 0.0], dtype)
    ctype = np.complex64 if dtype == np.float32 else np.complex128
    assert_bitwise(run("stablehlo.complex", re, im, result_dtype=ctype),
                   (re + 1j * im.astype(ctype)).astype(ctype))


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: element(d))
def test_min_max_propagate_nan(dtype):
    x = np.array([1.0, np.nan, -2.0, 5.0, -np.inf]).astype(dtype)
    y = np.array([np.nan, 3.0, -1.0, 4.0, 0.0]).astype(dtype)
    assert_bitwise(run("stablehlo.maximum", x, y),
                   np.array([np.nan, np.nan, -1.0, 5.0, 0.0]).astype(dtype))
    assert_bitwise(run("stablehlo.minimum", x, y),
                   np.array([np.nan, np.nan, -2.0, 4.0, -np.inf]).astype(dtype))


def _bounded_by_constant(name, dtype, constant, first=True):
    """`name`(x, broadcast(constant)) (the constant first where `first`), then its result
    times 3 (a use whose derivative is finite), as a loaded program of one f32[5]/i32[5]."""
    ty, scalar = tensor((5,), dtype), tensor((), dtype)
    pair = "%b, %x" if first else "%x, %b"
    return shlo2jax.load(f"""
func.func @main(%x: {ty}) -> {ty} {{
  %c = stablehlo.constant dense<{constant}> : {scalar}
  %b = stablehlo.broadcast_in_dim %c, dims = [] : ({scalar}) -> {ty}
  %m = stablehlo.{name} {pair} : {ty}
  %k = stablehlo.constant dense<{3 if np.dtype(dtype).kind == "i" else 3.0}> : {ty}
  %r = stablehlo.multiply %m, %k : {ty}
  return %r : {ty}
}}""")


@pytest.mark.parametrize("first", [True, False])
@pytest.mark.parametrize("name, constant, lax_fn", [
    ("maximum", "0xFF800000", lax.max), ("minimum", "0x7F800000", lax.min)])
def test_min_max_with_infinite_bound_is_the_other_operand(name, constant, lax_fn, first):
    # max(x, -inf) is x bit for bit (NaN, -0 and -inf included): the translation uses x
    # itself, so its derivative is 1 everywhere (lax's splits the tie at x = -inf in halves)
    f = _bounded_by_constant(name, np.float32, constant, first)
    x = np.array([-np.inf, -0.0, np.nan, 2.5, np.inf], np.float32)
    bound = np.float32(-np.inf if name == "maximum" else np.inf)
    assert_bitwise(np.asarray(f(x)), np.asarray(lax_fn(x, bound) * np.float32(3)))
    jaxpr = str(jax.make_jaxpr(jax.grad(lambda v: f(v).sum()))(x))
    assert "max" not in jaxpr and "min[" not in jaxpr and "select" not in jaxpr, jaxpr
    np.testing.assert_array_equal(jax.grad(lambda v: f(v).sum())(x), np.full(5, 3, np.float32))


def test_integer_min_max_with_extreme_bound():
    x = np.array([-2**31, -1, 0, 7, 2**31 - 1], np.int32)
    assert_bitwise(_bounded_by_constant("maximum", np.int32, -2**31)(x), x * 3)
    assert_bitwise(_bounded_by_constant("minimum", np.int32, 2**31 - 1, first=False)(x), x * 3)


@pytest.mark.parametrize("constant", ["-3.0e+38", "0x7F800000"])
def test_max_with_other_constant_keeps_lax_rule(constant):
    # a finite bound, or the wrong infinity, is a real max: lax's rule (ties split in halves)
    f = _bounded_by_constant("maximum", np.float32, constant)
    x = np.array([-3.0e38, -1.0, 0.0, 2.5, 4.0], np.float32)
    expected = jax.grad(lambda v: (lax.max(v, jnp.full_like(v, np.float32(constant)
                                                              if constant[0] == "-" else np.inf))
                                   * 3).sum())(x)
    np.testing.assert_array_equal(jax.grad(lambda v: f(v).sum())(x), expected)
    assert "max" in str(jax.make_jaxpr(f)(x))


def test_complex_min_max_are_lexicographic():
    x = np.array([1 + 5j, 2 + 0j, 3 - 1j, 1 + 1j], np.complex64)
    y = np.array([2 + 0j, 1 + 9j, 3 + 1j, 1 + 1j], np.complex64)
    assert_bitwise(run("stablehlo.maximum", x, y), np.array([2, 2, 3 + 1j, 1 + 1j], np.complex64))
    assert_bitwise(run("stablehlo.minimum", x, y),
                   np.array([1 + 5j, 1 + 9j, 3 - 1j, 1 + 1j], np.complex64))


@pytest.mark.parametrize("name, fn", [
    ("add", np.logical_or), ("multiply", np.logical_and), ("maximum", np.logical_or),
    ("minimum", np.logical_and), ("and", np.logical_and), ("or", np.logical_or),
    ("xor", np.logical_xor)])
def test_bool_binary(name, fn):
    # The spec's boolean add is OR and multiply is AND.
    x, y = np.array([False, False, True, True]), np.array([False, True, False, True])
    assert_bitwise(run(f"stablehlo.{name}", x, y), fn(x, y))


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: element(d))
def test_integer_binary_wraps(dtype):
    x = int_values(dtype)
    y = np.roll(x, 3)
    xs, ys = list(map(int, x)), list(map(int, y))
    bits = bit_width(dtype)
    mask = (1 << bits) - 1
    cases = {
        "add": [a + b for a, b in zip(xs, ys)],
        "subtract": [a - b for a, b in zip(xs, ys)],
        "multiply": [a * b for a, b in zip(xs, ys)],
        "maximum": [max(a, b) for a, b in zip(xs, ys)],
        "minimum": [min(a, b) for a, b in zip(xs, ys)],
        "and": [(a & b) for a, b in zip(xs, ys)],
        "or": [(a | b) & mask for a, b in zip(xs, ys)],
        "xor": [(a ^ b) & mask for a, b in zip(xs, ys)],
    }
    for name, expected in cases.items():
        assert_bitwise(run(f"stablehlo.{name}", x, y), wrap(expected, dtype))


@pytest.mark.parametrize("dtype", SIGNED + UNSIGNED + [ml_dtypes.int4, ml_dtypes.uint4],
                         ids=lambda d: element(d))
def test_integer_divide_and_remainder(dtype):
    info = ml_dtypes.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    if lo < 0:
        x = [7, -7, 7, -7, 5, -5, 0, lo, lo]
        y = [2, 2, -2, -2, 0, 0, 0, -1, 1]
        # Truncating division; XLA: x / 0 = -1, x % 0 = x, INT_MIN / -1 = INT_MIN,
        # INT_MIN % -1 = 0.
        quotient = [3, -3, -3, 3, -1, -1, -1, lo, lo]
        remainder = [1, -1, 1, -1, 5, -5, 0, 0, 0]
    else:
        x, y = [7, hi, 5, 0, hi], [2, 16 if hi > 16 else 3, 0, 0, hi]
        # XLA: unsigned x / 0 is all ones, x % 0 = x.
        quotient = [3, hi // y[1], hi, hi, 1]
        remainder = [1, hi % y[1], 5, 0, 0]
    x, y = arr(x, dtype), arr(y, dtype)
    assert_bitwise(run("stablehlo.divide", x, y), arr(quotient, dtype))
    assert_bitwise(run("stablehlo.remainder", x, y), arr(remainder, dtype))


@pytest.mark.parametrize("dtype", SIGNED + UNSIGNED + [ml_dtypes.int4, ml_dtypes.uint4],
                         ids=lambda d: element(d))
def test_shifts(dtype):
    bits = bit_width(dtype)
    signed = ml_dtypes.iinfo(dtype).min < 0
    x_values = [-3 if signed else 5, 1, 6, -1 if signed else 3]
    amounts = [0, 1, 2, bits - 1, bits, bits + 1] + ([-1] if signed else [])
    xs = [a for a in x_values for _ in amounts]
    ss = [s for _ in x_values for s in amounts]
    x, s = np.array(xs).astype(dtype), np.array(ss).astype(dtype)
    mask = (1 << bits) - 1
    out_of_range = [not 0 <= k < bits for k in ss]  # negative amounts read as huge unsigned
    # Shifting by the bit width or more gives 0, or the sign fill for arithmetic shifts.
    left = [0 if oob else a << k for a, k, oob in zip(xs, ss, out_of_range)]
    logical = [0 if oob else (a & mask) >> k for a, k, oob in zip(xs, ss, out_of_range)]
    arithmetic = [(-1 if a < 0 else 0) if oob else a >> k
                  for a, k, oob in zip(xs, ss, out_of_range)]
    assert_bitwise(run("stablehlo.shift_left", x, s), wrap(left, dtype))
    assert_bitwise(run("stablehlo.shift_right_logical", x, s), wrap(logical, dtype))
    assert_bitwise(run("stablehlo.shift_right_arithmetic", x, s), wrap(arithmetic, dtype))


@pytest.mark.parametrize("dtype", SIGNED, ids=lambda d: element(d))
def test_signed_integer_power(dtype):
    x = [2, -3, 0, 0, 5, 1, -1, -1, 2, -2, 0, 3]
    y = [10, 3, 0, 4, 1, -5, -3, -2, -1, -1, -1, 2]
    # A negative exponent gives 0 except for bases 1 and -1 (whose powers are exact).
    expected = [1024, -27, 1, 0, 5, 1, -1, 1, 0, 0, 0, 9]
    out = run("stablehlo.power", np.array(x).astype(dtype), np.array(y).astype(dtype))
    assert_bitwise(out, wrap(expected, dtype))


@pytest.mark.parametrize("dtype", UNSIGNED, ids=lambda d: element(d))
def test_unsigned_integer_power(dtype):
    x = np.array([2, 3, 0, 7, 1]).astype(dtype)
    y = np.array([7, 4, 0, 2, 200]).astype(dtype)
    expected = [128, 81, 1, 49, 1]
    assert_bitwise(run("stablehlo.power", x, y), wrap(expected, dtype))


def test_integer_power_overflow_follows_xla():
    # XLA squares over the exponent's low 6 bits only and reads unsigned exponents
    # as signed (sub-byte ones after widening to 8 bits).
    i64 = run("stablehlo.power", np.array([3, 3, 3], np.int64), np.array([5, 64, 65], np.int64))
    assert_bitwise(i64, np.array([243, 1, 3], np.int64))
    u8 = run("stablehlo.power", np.array([3, 255, 1], np.uint8),
             np.array([200, 255, 200], np.uint8))
    assert_bitwise(u8, np.array([0, 255, 1], np.uint8))
    u4 = run("stablehlo.power", np.array([3, 3], ml_dtypes.uint4),
             np.array([10, 3], ml_dtypes.uint4))
    assert_bitwise(u4, np.array([3 ** 10 % 16, 27 % 16], ml_dtypes.uint4))


def test_power_wraps_like_repeated_multiplication():
    x = np.array([3, -7, 10], np.int32)
    y = np.array([21, 11, 12], np.int32)
    assert_bitwise(run("stablehlo.power", x, y), wrap([3 ** 21, (-7) ** 11, 10 ** 12], np.int32))


@pytest.mark.parametrize("dtype", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, BF16])
def test_narrow_float_arithmetic_rounds_once(dtype):
    x = np.array([1.0, 2.0, -3.0, 0.5]).astype(dtype)
    y = np.array([0.125, 3.0, 1.5, -0.75]).astype(dtype)
    for name, fn in [("add", np.add), ("multiply", np.multiply), ("subtract", np.subtract)]:
        expected = fn(x.astype(np.float64), y.astype(np.float64)).astype(dtype)
        assert_bitwise(run(f"stablehlo.{name}", x, y), expected)


@pytest.mark.parametrize("dtype", [BF16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2])
def test_logistic_narrow_floats(dtype):
    # Rounded once from a wide computation: no overflow to NaN at the ends.
    x = np.array([-448.0, -2.5, -0.75, 0.0, 0.75, 2.5, 448.0]).astype(dtype)
    expected = (1 / (1 + np.exp(-x.astype(np.float64)))).astype(dtype)
    assert_bitwise(run("stablehlo.logistic", x), expected)


def test_mhlo_names():
    x = np.array([1.0, -2.0], np.float32)
    text = """func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
      %0 = "mhlo.add"(%a, %a) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      %1 = "mhlo.abs"(%0) : (tensor<2xf32>) -> tensor<2xf32>
      return %1 : tensor<2xf32>
    }"""
    assert_bitwise(np.asarray(shlo2jax.load(text)(x)), np.array([2.0, 4.0], np.float32))


@pytest.mark.parametrize("element", ["bf16", "f16", "f32", "f64"])
def test_floor_ceil_of_subnormals(element):
    # The spec's floor/ceil are exact; XLA on CPU flushes subnormal inputs to zero.
    import ml_dtypes
    from shlo2jax import value_types as T
    dtype = T.ELEMENT_DTYPES[element]
    tiny = np.array(ml_dtypes.finfo(dtype).smallest_subnormal, dtype)
    x = np.array([tiny, -tiny, 0.0, -0.0, 1.5, -1.5], dtype)
    program = shlo2jax.load(f"""
    func.func @main(%x: tensor<6x{element}>) -> (tensor<6x{element}>, tensor<6x{element}>) {{
      %0 = stablehlo.floor %x : tensor<6x{element}>
      %1 = stablehlo.ceil %x : tensor<6x{element}>
      return %0, %1 : tensor<6x{element}>, tensor<6x{element}>
    }}""")
    floor, ceil = (np.asarray(v).astype(np.float64) for v in program(x))
    np.testing.assert_array_equal(floor, [0.0, -1.0, 0.0, -0.0, 1.0, -2.0])
    np.testing.assert_array_equal(ceil, [1.0, -0.0, 0.0, -0.0, 2.0, -1.0])
    assert list(np.signbit(floor)) == [False, True, False, True, False, True]
    assert list(np.signbit(ceil)) == [False, True, False, True, False, True]


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_branch_cuts_respect_signed_zero(dtype):
    # On the negative real axis sqrt, rsqrt, log and log_plus_one take the side the sign of
    # the zero imaginary part names (C99, numpy and the reference interpreter agree).
    x = np.array([complex(-1, 0.0), complex(-1, -0.0), complex(-4, -0.0), complex(2, -0.0),
                  complex(-0.5, -0.0), complex(-0.0, -0.0), complex(3, 0.5)], dtype)
    wide = x.astype(np.complex128)
    cases = {"sqrt": np.sqrt(wide), "rsqrt": 1 / np.sqrt(wide[[0, 1, 2, 3, 4, 6]]),
             "log": np.log(wide[[0, 1, 2, 3, 4, 6]]),
             # log(1 + z) with the imaginary part (and its sign) carried over unchanged.
             "log_plus_one": np.log(np.array([complex(z.real + 1, z.imag) for z in wide[2:5]]))}
    inputs = {"sqrt": x, "rsqrt": x[[0, 1, 2, 3, 4, 6]], "log": x[[0, 1, 2, 3, 4, 6]],
              "log_plus_one": x[2:5]}
    for name, expected in cases.items():
        out = run(f"stablehlo.{name}", inputs[name])
        assert_close(out, expected, dtype)
        assert (np.signbit(out.imag) == np.signbit(expected.imag)).all(), (name, out, expected)


# ------------------------------------------------------------------ integer division by zero

@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint32])
def test_integer_divide_and_remainder_by_zero_and_overflow_as_xla(dtype):
    """XLA defines x / 0 = -1 (all bits set), x % 0 = x, INT_MIN / -1 = INT_MIN and
    INT_MIN % -1 = 0; the translation gives the same, and XLA compiling the module itself
    (the oracle) agrees."""
    from shlo2jax.tools.reference import xla_direct
    info = np.iinfo(dtype)
    signed = info.min < 0
    x = np.array([7, 0, info.max, info.min, 5, 9] if signed else [7, 0, info.max, 5, 5, 9], dtype)
    y = np.array([0, 0, 0, -1, 2, -1] if signed else [0, 0, 0, 2, 3, 1], dtype)
    t = tensor(x.shape, element(dtype))
    program = shlo2jax.load(f"""func.func public @main(%x: {t}, %y: {t}) -> ({t}, {t}) {{
  %q = stablehlo.divide %x, %y : {t}
  %r = stablehlo.remainder %x, %y : {t}
  return %q, %r : {t}, {t}
}}""")
    q, r = (np.asarray(v) for v in program(x, y))
    all_ones = np.array(-1).astype(dtype)
    for i in range(len(x)):
        if y[i] == 0:
            assert q[i] == all_ones and r[i] == x[i], i
        elif signed and x[i] == info.min and y[i] == -1:
            assert q[i] == info.min and r[i] == 0, i
        else:
            assert q[i] == int(np.trunc(int(x[i]) / int(y[i]))) and r[i] == int(np.fmod(int(x[i]), int(y[i]))), i
    dq, dr = xla_direct(program)(x, y)
    np.testing.assert_array_equal(q, np.asarray(dq))
    np.testing.assert_array_equal(r, np.asarray(dr))


def test_a_divisor_that_folds_to_zero_does_not_kill_the_process():
    """`rem(x - x, x - x)`: XLA's compile-time constant folding divides by zero and the
    process dies with SIGFPE (XLA compiling the module directly does; fuzz seed 3260).
    The translation guards its divisor, so it compiles and gives x % 0 = x = 0."""
    import subprocess
    import sys
    code = """
import numpy as np, shlo2jax
p = shlo2jax.load('''func.func public @main(%a: tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>) {
  %z = stablehlo.subtract %a, %a : tensor<4xi32>
  %r = stablehlo.remainder %z, %z : tensor<4xi32>
  %q = stablehlo.divide %z, %z : tensor<4xi32>
  return %r, %q : tensor<4xi32>, tensor<4xi32>
}''')
r, q = p(np.array([3, -1, 0, 7], np.int32))
print(np.asarray(r).tolist(), np.asarray(q).tolist())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[-2] == "[0, 0, 0, 0] [-1, -1, -1, -1]"
