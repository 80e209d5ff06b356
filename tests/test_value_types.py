"""Every spec element type through constants (literal, hex and splat forms) and arguments."""

import jax
import ml_dtypes
import numpy as np
import pytest

import shlo2jax
from shlo2jax import value_types as T
from shlo2jax.quant import F6Array


def _values(dtype, n):
    """n representative values of dtype, incl. extremes; deterministic."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return (np.arange(n) % 3 == 0)
    if T.is_integer(dtype):
        info = ml_dtypes.iinfo(dtype) if dtype.name in ("int2", "int4", "uint2", "uint4") \
            else np.iinfo(dtype)
        lo, hi = int(info.min), int(info.max)
        span = [lo + (hi - lo) * i // (n - 1) for i in range(n)]  # exact ends, no float rounding
        return np.array(span, dtype=object).astype(dtype)
    if T.is_complex(dtype):
        return (np.linspace(-3, 3, n) + 1j * np.linspace(2, -2, n)).astype(dtype)
    finfo = ml_dtypes.finfo(dtype)
    base = np.linspace(-2, 2, n).astype(np.float64)
    values = base.astype(dtype)
    values[0] = np.array(float(finfo.max)).astype(dtype)
    values[-1] = np.array(float(finfo.smallest_subnormal)).astype(dtype)
    return values


def _literal(values, dtype):
    name = T.dtype_name(dtype)
    def fmt(v):
        if dtype == np.bool_:
            return "true" if v else "false"
        if T.is_integer(dtype):
            return str(int(v))
        if T.is_complex(dtype):
            return f"({float(v.real)!r}, {float(v.imag)!r})"
        bits = v.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[dtype.itemsize])
        return hex(int(bits)) if np.dtype(dtype).itemsize > 1 or T.bit_width(dtype) == 8 else hex(int(bits))
    return "[" + ", ".join(fmt(v) for v in values) + "]", name


ELEMENTS = [name for name in T.ELEMENT_DTYPES if not name.startswith("si")]


def _bits(a):
    a = np.asarray(a)
    if a.dtype == np.bool_ or T.is_integer(a.dtype) and a.dtype.itemsize == 1 and T.bit_width(a.dtype) < 8:
        return a.astype(np.int64)
    return a.view(np.uint8)


@pytest.mark.parametrize("element", ELEMENTS)
@pytest.mark.parametrize("count", [5, 150])  # 150 elements print as hex, 5 as a literal list
def test_constant_round_trip(element, count):
    dtype = T.ELEMENT_DTYPES[element]
    values = _values(dtype, count)
    literal, name = _literal(values, dtype)
    text = f"""
    func.func @main(%x: tensor<{count}x{name}>) -> (tensor<{count}x{name}>, tensor<{count}x{name}>, tensor<3x{name}>) {{
      %c = stablehlo.constant dense<{literal}> : tensor<{count}x{name}>
      %s = stablehlo.constant dense<{_literal(values[1:2], dtype)[0][1:-1]}> : tensor<3x{name}>
      return %c, %x, %s : tensor<{count}x{name}>, tensor<{count}x{name}>, tensor<3x{name}>
    }}"""
    program = shlo2jax.load(text)
    # XLA has no f6 type: f6 values travel as F6Arrays (np.asarray gives ml_dtypes arrays).
    argument = F6Array.from_numpy(values) if dtype in T.FLOAT6_TYPES else values
    const, arg, splat = (np.asarray(v) for v in program(argument))
    assert const.dtype == dtype and arg.dtype == dtype and splat.dtype == dtype
    np.testing.assert_array_equal(_bits(const), _bits(values))
    np.testing.assert_array_equal(_bits(arg), _bits(values))
    np.testing.assert_array_equal(_bits(splat), _bits(np.repeat(values[1:2], 3)))


@pytest.mark.parametrize("element", ["f6E2M3FN", "f6E3M2FN"])
def test_f6_types_load_and_carry_their_codec(element):
    dtype = T.ELEMENT_DTYPES[element]
    t = T.parse_type(f"tensor<2x{element}>")
    assert t.dtype == dtype and T.is_float(t.dtype) and T.bit_width(t.dtype) == 6
    assert t.quant is T.FLOAT6_TYPES[dtype] and t.quant.storage_dtype == np.uint8
    assert T.tensor_type((2,), dtype) == t
    values = np.array([0.5, -1.0, 7.5, 0.0], dtype=np.float32).astype(dtype)
    text = f"""
    func.func @main() -> tensor<4x{element}> {{
      %c = stablehlo.constant dense<[5.000000e-01, -1.000000e+00, 7.500000e+00, 0.000000e+00]> : tensor<4x{element}>
      return %c : tensor<4x{element}>
    }}"""
    out = shlo2jax.load(text)()
    assert isinstance(out, F6Array) and out.dtype == dtype and out.storage.dtype == np.uint8
    np.testing.assert_array_equal(np.asarray(out).view(np.uint8), values.view(np.uint8))


def test_signed_spelling_maps_to_same_dtype():
    for bits in (2, 4, 8, 16, 32, 64):
        assert T.ELEMENT_DTYPES[f"si{bits}"] == T.ELEMENT_DTYPES[f"i{bits}"]
    assert T.dtype_name(np.int8) == "i8" and T.dtype_name(np.uint8) == "ui8"


def test_every_dtype_has_one_name():
    for name, dtype in T.ELEMENT_DTYPES.items():
        assert T.ELEMENT_DTYPES[T.dtype_name(dtype)] == dtype
    assert len(set(T.ELEMENT_DTYPES.values())) == 30  # the spec's 30 element types


def test_complex_nonfinite_literal():
    text = """
    func.func @main() -> tensor<2xcomplex<f32>> {
      %c = stablehlo.constant dense<[(0x7F800000, -1.5), (2.0, 0xFF800000)]> : tensor<2xcomplex<f32>>
      return %c : tensor<2xcomplex<f32>>
    }"""
    out = shlo2jax.load(text)()
    np.testing.assert_array_equal(out, np.array([complex(np.inf, -1.5), complex(2.0, -np.inf)], np.complex64))


def test_integer_and_unsigned_kinds():
    """is_integer / is_unsigned: numpy's integers and ml_dtypes' sub-byte ones (kind "V",
    like its floats), nothing else."""
    integers = [np.int8, np.int32, np.uint8, np.uint64, ml_dtypes.int2, ml_dtypes.int4,
                ml_dtypes.uint2, ml_dtypes.uint4]
    others = [np.float32, np.float16, np.complex64, np.bool_, ml_dtypes.bfloat16,
              ml_dtypes.float8_e4m3fn, ml_dtypes.float4_e2m1fn]
    assert all(T.is_integer(d) for d in integers)
    assert not any(T.is_integer(d) for d in others)
    assert [d for d in integers if T.is_unsigned(d)] == [np.uint8, np.uint64, ml_dtypes.uint2,
                                                        ml_dtypes.uint4]
    assert not any(T.is_unsigned(d) for d in others)
