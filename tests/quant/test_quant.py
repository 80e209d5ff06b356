"""The quant package: `!quant.uniform` element types parsed and checked against the spec's
constraints. Quantized values through ops: tests/ops/test_quantized.py."""

import ml_dtypes
import numpy as np
import pytest

from shlo2jax import quant
from shlo2jax.quant import parse_quantized_element
from shlo2jax.value_types import UnsupportedTypeError


def test_parse_per_tensor_and_defaults():
    q = parse_quantized_element("!quant.uniform<i8:f32, 0.5>")
    assert (q.storage_min, q.storage_max, q.zero_points, q.scales) == (-128, 127, (0,), (0.5,))
    assert q.storage_dtype == np.int8 and q.expressed_dtype == np.float32 and not q.per_axis


def test_parse_per_axis_narrow():
    q = parse_quantized_element("!quant.uniform<i8<-127:127>:f16:1, {1.000000e-01:-30,0.5:-20}>")
    assert q.quantization_dimension == 1 and q.zero_points == (-30, -20)
    assert (q.storage_min, q.storage_max) == (-127, 127)
    assert q.scales[0] == float(np.float16(0.1))  # C5: scales are in the expressed type


@pytest.mark.parametrize("storage,dtype", [
    ("i2", ml_dtypes.int2), ("i4", ml_dtypes.int4), ("i8", np.int8), ("i16", np.int16),
    ("u2", ml_dtypes.uint2), ("u4", ml_dtypes.uint4), ("u8", np.uint8), ("u16", np.uint16)])
def test_parse_storage_types(storage, dtype):
    assert parse_quantized_element(f"!quant.uniform<{storage}:f32, 1.0>").storage_dtype == dtype


@pytest.mark.parametrize("expressed", ["f16", "bf16", "f32", "f64", "f8E4M3FN", "f8E5M2"])
def test_parse_expressed_types(expressed):
    storage = "i4" if expressed.startswith("f8") else "i8"
    q = parse_quantized_element(f"!quant.uniform<{storage}:{expressed}, 0.25:1>")
    assert q.scales == (0.25,)


@pytest.mark.parametrize("spelling,constraint", [
    ("!quant.uniform<i16:f8E4M3FN, 1.0>", "C1"),
    ("!quant.uniform<i8<-200:0>:f32, 1.0>", "C2-C4"),
    ("!quant.uniform<i8<5:5>:f32, 1.0>", "C2-C4"),
    ("!quant.uniform<i8:f32, 0.0>", "C6"),
    ("!quant.uniform<i8:f32, -1.0>", "C6"),
    ("!quant.uniform<i8:f16, 1.0e10>", "C7"),
    ("!quant.uniform<i8<-10:10>:f32, 1.0:11>", "C8"),
    ("!quant.uniform<u8:f32, 1.0:-1>", "C8"),
    ("!quant.uniform<i8:f32:-1, {1.0, 2.0}>", "C12"),
])
def test_constraint_violations(spelling, constraint):
    with pytest.raises(UnsupportedTypeError, match=constraint):
        parse_quantized_element(spelling)


def test_unsupported_spellings():
    with pytest.raises(UnsupportedTypeError):
        parse_quantized_element("!quant.any<i8:f32>")
    with pytest.raises(UnsupportedTypeError):
        parse_quantized_element("!quant.uniform<i64:f64, 1.0>")


def test_tensor_constraints_c12_c13():
    q = parse_quantized_element("!quant.uniform<i8:f32:1, {1.0:0, 2.0:0}>")
    quant.check_tensor_type((3, 2), q)
    with pytest.raises(UnsupportedTypeError, match="rank"):
        quant.check_tensor_type((2,), q)
    with pytest.raises(UnsupportedTypeError, match="scales"):
        quant.check_tensor_type((2, 3), q)
