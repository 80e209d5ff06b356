"""convert, bitcast_convert and reduce_precision.

Expected values come from numpy / ml_dtypes casts and views, from bit lists
written out with Python integers, or by hand.
"""

import ml_dtypes
import numpy as np
import pytest

import shlo2jax
from shlo2jax.value_types import ELEMENT_DTYPES

from _helpers import assert_same_bits, tensor

FLOAT8_AND_4 = ["f4E2M1FN", "f8E3M4", "f8E4M3", "f8E4M3FN", "f8E4M3FNUZ", "f8E4M3B11FNUZ",
                "f8E5M2", "f8E5M2FNUZ", "f8E8M0FNU"]


def run(op, x, result_shape, result_dtype, attrs=""):
    t, r = tensor(x.shape, x.dtype), tensor(result_shape, result_dtype)
    text = f"""func.func @main(%x: {t}) -> {r} {{
      %0 = "{op}"(%x) {{{attrs}}} : ({t}) -> {r}
      return %0 : {r}
    }}"""
    out = np.asarray(shlo2jax.load(text)(x))
    assert out.dtype == np.dtype(result_dtype) and out.shape == tuple(result_shape)
    return out


def convert(x, dtype):
    return run("stablehlo.convert", x, x.shape, dtype)


# ------------------------------------------------------------------ convert

@pytest.mark.parametrize("dtype, expected", [
    # Out-of-range values saturate and NaN becomes 0, as XLA converts.
    (np.int32, [0, 2**31 - 1, -2**31, 2**31 - 1, -2**31, -1, 300, 2, -2]),
    (np.int8, [0, 127, -128, 127, -128, -1, 127, 2, -2]),
    (np.uint8, [0, 255, 0, 255, 0, 0, 255, 2, 0]),
    (np.uint32, [0, 2**32 - 1, 0, 2**32 - 1, 0, 0, 300, 2, 0]),
    (np.int64, [0, 10**10, -10**10, 2**63 - 1, -2**63, -1, 300, 2, -2]),
])
def test_float_to_int_truncates_and_saturates(dtype, expected):
    x = np.array([np.nan, 1e10, -1e10, np.inf, -np.inf, -1.5, 300, 2.7, -2.7], np.float32)
    np.testing.assert_array_equal(convert(x, dtype), np.array(expected).astype(dtype))


@pytest.mark.parametrize("src, dst", [
    (np.int32, np.int8), (np.int64, np.uint16), (np.uint32, np.int32), (np.int16, np.uint64),
    (np.int8, ml_dtypes.int4), (np.int32, ml_dtypes.uint4), (ml_dtypes.int4, np.int32),
    (ml_dtypes.uint4, np.int8), (np.int8, ml_dtypes.int2), (ml_dtypes.uint2, np.uint8),
])
def test_int_to_int_wraps(src, dst):
    info = ml_dtypes.iinfo(src)
    values = [v for v in (int(info.min), -300, -9, -1, 0, 1, 7, 8, 200, 70000, int(info.max))
              if info.min <= v <= info.max]
    x = np.array(values).astype(src)
    d = ml_dtypes.iinfo(dst)
    span = int(d.max) - int(d.min) + 1
    expected = [(v - int(d.min)) % span + int(d.min) for v in values]
    wide = np.uint64 if np.dtype(dst) == np.uint64 else np.int64
    np.testing.assert_array_equal(convert(x, dst), np.array(expected, wide).astype(dst))


@pytest.mark.parametrize("src", [np.int8, np.uint32, np.float32, np.float64, np.complex64,
                                 ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.int4])
def test_to_bool_is_nonzero(src):
    values = [0, 1, -0.0, 2, 0.5, np.nan] if np.dtype(src).kind in "fcV" else [0, 1, 3, 0]
    x = np.array(values).astype(src)
    if np.dtype(src).kind == "c":
        # complex-to-any-other-type ignores the imaginary part.
        x = np.array([0, 1j, -0.0, 2, 0.5j, np.nan], src)
    np.testing.assert_array_equal(convert(x, np.bool_), x.real.astype(np.float64) != 0)


@pytest.mark.parametrize("dst", [np.int32, np.uint8, np.float32, np.complex128,
                                 ml_dtypes.bfloat16, ml_dtypes.float8_e5m2, ml_dtypes.uint4])
def test_from_bool(dst):
    x = np.array([True, False, True])
    np.testing.assert_array_equal(convert(x, dst), np.array([1, 0, 1]).astype(dst))


@pytest.mark.parametrize("dst", [np.float32, np.float64, np.int32, np.float16])
def test_complex_to_real_takes_real_part(dst):
    x = np.array([1.5 + 2j, -3.25 - 7j, 0.5j], np.complex128)
    np.testing.assert_array_equal(convert(x, dst), x.real.astype(dst))


def test_real_and_complex_widths():
    x = np.array([1.5, -2.0, np.inf], np.float32)
    np.testing.assert_array_equal(convert(x, np.complex128), x.astype(np.complex128))
    z = np.array([1 / 3 + 2j, 1e30 - 1e-30j], np.complex128)
    np.testing.assert_array_equal(convert(z, np.complex64), z.astype(np.complex64))


@pytest.mark.parametrize("element", FLOAT8_AND_4 + ["bf16", "f16"])
@pytest.mark.parametrize("src", [np.float32, np.float64])
def test_narrow_float_conversion_rounds_like_ml_dtypes(element, src):
    dtype = ELEMENT_DTYPES[element]
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(256) * np.exp(rng.uniform(-10, 10, 256))).astype(src)
    x[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e30]
    with np.errstate(all="ignore"):
        expected = x.astype(dtype)
    actual = convert(x, dtype)
    ok = (actual.astype(np.float64) == expected.astype(np.float64)) | (
        np.isnan(actual.astype(np.float64)) & np.isnan(expected.astype(np.float64)))
    assert ok.all(), (x[~ok][:4], actual[~ok][:4], expected[~ok][:4])
    # and back: every value of the narrow type is exact in f32
    np.testing.assert_array_equal(convert(actual, np.float32), actual.astype(np.float32))


@pytest.mark.parametrize("element", FLOAT8_AND_4)
def test_narrow_float_to_int(element):
    dtype = ELEMENT_DTYPES[element]
    x = np.array([0.5, 1.0, 1.5, 2.0, 3.0, 4.0]).astype(dtype)
    expected = np.trunc(x.astype(np.float64)).astype(np.int32)
    np.testing.assert_array_equal(convert(x, np.int32), expected)


# ---------------------------------------------------------- bitcast_convert

def bitcast(x, result_shape, dtype):
    return run("stablehlo.bitcast_convert", x, result_shape, dtype)


def test_bitcast_same_width():
    x = np.array([1.0, -0.0, np.nan, 3e38], np.float32)
    assert_same_bits(bitcast(x, (4,), np.int32), x.view(np.int32))
    assert_same_bits(bitcast(x.view(np.uint32), (4,), np.float32), x)
    h = np.array([[1.5, -2.0]], ml_dtypes.bfloat16)
    assert_same_bits(bitcast(h, (1, 2), np.float16), h.view(np.float16))
    f8 = np.array([0.5, -448.0], ml_dtypes.float8_e4m3fn)
    assert_same_bits(bitcast(f8, (2,), np.uint8), f8.view(np.uint8))


def test_bitcast_narrowing_adds_a_trailing_dimension():
    x = np.array([1.0, -2.5, 7e300], np.float64)
    assert_same_bits(bitcast(x, (3, 8), np.uint8), x.view(np.uint8).reshape(3, 8))
    assert_same_bits(bitcast(x, (3, 2), np.float32), x.view(np.float32).reshape(3, 2))


def test_bitcast_widening_drops_the_trailing_dimension():
    x = np.arange(24, dtype=np.uint8).reshape(3, 8)
    assert_same_bits(bitcast(x, (3,), np.int64), x.view(np.int64).reshape(3))
    y = np.array([[1, -1], [7, 0]], np.int32)
    assert_same_bits(bitcast(y, (2,), np.float64), y.view(np.float64).reshape(2))


def test_bitcast_int4_packs_low_nibble_first():
    x = np.array([[1, -2], [7, -8]], ml_dtypes.int4)
    expected = np.array([1 | (0xE << 4), 7 | (0x8 << 4)], np.int64).astype(np.uint8)
    np.testing.assert_array_equal(bitcast(x, (2,), np.uint8), expected)
    back = bitcast(expected, (2, 2), ml_dtypes.int4)
    np.testing.assert_array_equal(back.astype(np.int8), x.astype(np.int8))


def bits_lsb_first(value, width):
    return [bool((value >> i) & 1) for i in range(width)]


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.float64, ml_dtypes.uint4])
def test_bitcast_to_and_from_i1(dtype):
    # i1 is one bit: an N-bit value is N booleans, least significant bit first.
    width = 4 if dtype == ml_dtypes.uint4 else np.dtype(dtype).itemsize * 8
    raw = [0b1011, 0b0110] if width == 4 else [0x0123456789ABCDEF, 0xFEDCBA9876543210]
    raw = [r & ((1 << width) - 1) for r in raw]
    if width == 4:
        x = np.array(raw).astype(dtype)
    else:
        x = np.array(raw, np.uint64).astype(f"u{width // 8}").view(dtype)
    expected = np.array([bits_lsb_first(r, width) for r in raw])
    bits = bitcast(x, (2, width), np.bool_)
    np.testing.assert_array_equal(bits, expected)
    back = bitcast(expected, (2,), dtype)
    np.testing.assert_array_equal(back.view(np.uint8), x.view(np.uint8))


def test_bitcast_complex_widths():
    z = np.array([1.5 - 2j, np.pi + 1e-20j], np.complex128)
    assert_same_bits(bitcast(z, (2, 2), np.complex64).view(np.uint64),
              z.view(np.complex64).reshape(2, 2).view(np.uint64))
    w = np.array([[1 + 2j, 3 - 4j]], np.complex64)
    assert_same_bits(bitcast(w, (1,), np.complex128).view(np.uint64),
              w.view(np.complex128).reshape(1).view(np.uint64))


def test_bitcast_bool_to_bool():
    x = np.array([True, False])
    np.testing.assert_array_equal(bitcast(x, (2,), np.bool_), x)


# --------------------------------------------------------- reduce_precision

def reduce_precision(x, exponent_bits, mantissa_bits):
    attrs = f"exponent_bits = {exponent_bits} : i32, mantissa_bits = {mantissa_bits} : i32"
    return run("stablehlo.reduce_precision", x, x.shape, x.dtype, attrs)


@pytest.mark.parametrize("src", [np.float32, np.float64])
@pytest.mark.parametrize("exponent_bits, mantissa_bits, narrow", [
    (5, 10, np.float16), (8, 7, ml_dtypes.bfloat16), (4, 3, ml_dtypes.float8_e4m3),
    (5, 2, ml_dtypes.float8_e5m2)])
def test_reduce_precision_matches_a_round_trip(src, exponent_bits, mantissa_bits, narrow):
    # Within the narrow format's normal range, reduce_precision rounds like a cast there and back.
    rng = np.random.default_rng(1)
    info = ml_dtypes.finfo(narrow)
    x = (rng.uniform(-1, 1, 200) * float(info.max) * 0.9).astype(src)
    x = x[np.abs(x) > float(info.tiny)]
    x = np.concatenate([x, np.array([np.inf, -np.inf, 0.0, -0.0, np.nan], src)])
    expected = x.astype(narrow).astype(src)
    actual = reduce_precision(x, exponent_bits, mantissa_bits)
    np.testing.assert_array_equal(actual, expected)
    assert (np.signbit(actual) == np.signbit(expected)).all()


def test_reduce_precision_overflow_and_identity():
    x = np.array([70000.0, -1e5, 1.0 + 2**-20, 3.0], np.float32)
    np.testing.assert_array_equal(reduce_precision(x, 5, 10),
                                  np.array([np.inf, -np.inf, 1.0, 3.0], np.float32))
    np.testing.assert_array_equal(reduce_precision(x, 8, 23), x)
    np.testing.assert_array_equal(reduce_precision(x, 11, 52), x)


# ------------------------------------------------- narrow floats to and from everything

FLOAT_TARGETS = FLOAT8_AND_4 + ["bf16", "f16", "f32", "f64"]
INT_TARGETS = ["i1", "i2", "i4", "i8", "i16", "i32", "i64", "ui2", "ui4", "ui8", "ui16", "ui32",
               "ui64"]


@pytest.mark.slow
@pytest.mark.parametrize("src", FLOAT8_AND_4)
def test_every_narrow_float_value_to_every_type(src):
    """Every bit pattern of a narrow float converted to every float type (rounded like
    ml_dtypes; NaN to NaN), every integer type (in-range values truncate; out-of-range ones
    and NaN are left to the implementation) and complex, in one module."""
    dtype = ELEMENT_DTYPES[src]
    bits = 4 if src.startswith("f4") else 8
    x = np.arange(1 << bits).astype(np.uint8).view(dtype)
    n = x.size
    targets = FLOAT_TARGETS + INT_TARGETS + ["complex<f32>", "complex<f64>"]
    t = f"tensor<{n}x{src}>"
    types = [f"tensor<{n}x{e}>" for e in targets]
    lines = [f"  %r{i} = stablehlo.convert %x : ({t}) -> {rt}" for i, rt in enumerate(types)]
    text = (f"func.func @main(%x: {t}) -> ({', '.join(types)}) {{\n" + "\n".join(lines)
            + f"\n  return {', '.join(f'%r{i}' for i in range(len(types)))} : "
            + ", ".join(types) + "\n}")
    outs = [np.asarray(o) for o in shlo2jax.load(text)(x)]
    wide = x.astype(np.float64)
    for element, out in zip(targets, outs):
        target = ELEMENT_DTYPES[element]
        assert out.dtype == target, element
        if element in FLOAT_TARGETS:
            with np.errstate(all="ignore"):
                expected = wide.astype(target).astype(np.float64)
            got = out.astype(np.float64)
            ok = (got == expected) & (np.signbit(got) == np.signbit(expected)) | (
                np.isnan(got) & np.isnan(expected))
            if element in ("f4E2M1FN", "f8E8M0FNU") or "FNUZ" in element:
                # No NaN / infinity / negative zero / sign to land on: implementation-defined.
                ok |= ~np.isfinite(wide) | (wide == 0) | (element == "f8E8M0FNU") & (wide < 0)
                if element == "f4E2M1FN" or element == "f8E8M0FNU":
                    ok |= ~np.isfinite(wide)
            assert ok.all(), (element, x[~ok][:6], out[~ok][:6])
        elif element.startswith("complex"):
            np.testing.assert_array_equal(out.real, wide.astype(target.type(0).real.dtype))
            assert (out.imag == 0).all()
        elif element == "i1":
            np.testing.assert_array_equal(out, wide != 0)
        else:
            info = ml_dtypes.iinfo(target)
            inside = np.isfinite(wide) & (np.trunc(wide) >= float(int(info.min))) & (
                np.trunc(wide) < float(int(info.max) + 1))
            # (Narrow float values have few significant bits: exact in float64.)
            np.testing.assert_array_equal(out[inside].astype(np.float64),
                                          np.trunc(wide[inside]), err_msg=element)


# XLA on CPU converts f4E2M1FN +-6.0 (its largest value) to the integer type's max/min
# (127 for i8); the translation goes through f32.
@pytest.mark.parametrize("dst", [np.int8, np.int32, ml_dtypes.int4])
def test_f4_largest_value_to_int(dst):
    x = np.array([6.0, -6.0, 4.0]).astype(ml_dtypes.float4_e2m1fn)
    np.testing.assert_array_equal(convert(x, dst).astype(np.int64), [6, -6, 4])


# ------------------------------------------- reduce_precision, every exponent/mantissa pair

def xla_reduce_precision(x, exponent_bits, mantissa_bits):
    """XLA's (and the reference interpreter's) bit-level reduce_precision: round the
    mantissa to nearest even, then overflow to infinity and flush values below the reduced
    normal range to (signed) zero; NaN stays NaN."""
    finfo = ml_dtypes.finfo(x.dtype)
    src_m, src_e = finfo.nmant, finfo.nexp
    width = x.dtype.itemsize * 8
    utype = {16: np.uint16, 32: np.uint32, 64: np.uint64}[width]
    bits = x.view(utype).astype(object)
    out = []
    for b in bits:
        b = int(b)
        if mantissa_bits < src_m:
            shift = src_m - mantissa_bits
            last = 1 << shift
            bias = ((b & last) >> shift) + (last >> 1) - 1
            b = (b + bias) & ~(last - 1) & ((1 << width) - 1)
        if exponent_bits < src_e:
            exponent_mask = ((1 << src_e) - 1) << src_m
            src_bias = (1 << (src_e - 1)) - 1
            reduced_bias = (1 << (exponent_bits - 1)) - 1
            exponent = b & exponent_mask
            sign = b & (1 << (width - 1))
            if exponent > (src_bias + reduced_bias) << src_m:
                b = sign | exponent_mask
            elif exponent <= (src_bias - reduced_bias) << src_m:
                b = sign
        out.append(b)
    result = np.array(out, dtype=object).astype(utype).view(x.dtype)
    return np.where(np.isnan(x.astype(np.float64)), x, result)


@pytest.mark.slow
@pytest.mark.parametrize("element,pairs", [
    ("f16", [(e, m) for e in range(1, 6) for m in range(0, 11)]),
    # Wider types: every exponent width with a spread of mantissa widths.
    ("bf16", [(e, m) for e in range(1, 9) for m in (0, 1, 3, 7)]),
    ("f32", [(e, m) for e in range(1, 9) for m in (0, 2, 10, 23)]),
    ("f64", [(e, m) for e in (1, 2, 5, 8, 10, 11) for m in (0, 7, 23, 52)]),
])
def test_reduce_precision_every_exponent_mantissa_pair(element, pairs):
    dtype = ELEMENT_DTYPES[element]
    rng = np.random.default_rng(5)
    finfo = ml_dtypes.finfo(dtype)
    magnitudes = np.exp2(rng.uniform(np.log2(float(finfo.smallest_subnormal)) + 1,
                                     np.log2(float(finfo.max)), 48))
    x = (magnitudes * rng.choice([-1, 1], 48)).astype(dtype)
    ties = (1 + np.array([0.5, 0.25, 0.75, 1.5]) * 2.0 ** -np.array([1, 2, 3, 5]))
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -2.5, float(finfo.max),
                float(finfo.smallest_subnormal), float(finfo.smallest_normal), 65504.0, 1e-5]
    with np.errstate(over="ignore"):
        x = np.concatenate([x, np.array(specials + list(ties)).astype(dtype)])
    t = f"tensor<{x.size}x{element}>"
    lines = [f"  %r{i} = stablehlo.reduce_precision %x, format = e{e}m{m} : {t}"
             for i, (e, m) in enumerate(pairs)]
    text = (f"func.func @main(%x: {t}) -> ({', '.join([t] * len(pairs))}) {{\n"
            + "\n".join(lines) + f"\n  return {', '.join(f'%r{i}' for i in range(len(pairs)))}"
            + f" : {', '.join([t] * len(pairs))}\n}}")
    outs = shlo2jax.load(text)(x)
    for (e, m), out in zip(pairs, outs):
        out = np.asarray(out)
        expected = xla_reduce_precision(x, e, m)
        a, b = out.astype(np.float64), expected.astype(np.float64)
        ok = (a == b) & (np.signbit(a) == np.signbit(b)) | (np.isnan(a) & np.isnan(b))
        assert ok.all(), ((e, m), x[~ok][:4], out[~ok][:4], expected[~ok][:4])
