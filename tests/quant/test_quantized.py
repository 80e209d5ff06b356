"""Quantized types and ops: !quant.uniform parsing, quantize/dequantize, quantized op paths."""

import jax
import ml_dtypes
import numpy as np
import pytest

import shlo2jax
from shlo2jax import compat
from shlo2jax import quant
from shlo2jax.quant import QArray, parse_quantized_element
from shlo2jax.value_types import UnsupportedTypeError
import xla_known


def _load(body, args, results):
    text = f"func.func @main({args}) -> ({results}) {{\n{body}\n}}"
    return shlo2jax.load(text)


def _round_even_clamp(v, lo, hi):
    return np.clip(np.round(np.clip(v, lo, hi)), lo, hi)  # np.round is half-to-even


# ------------------------------------------------------------------ types

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


# ------------------------------------------------------------------ quantize / dequantize

_STORAGE = [("i2", ml_dtypes.int2, -2, 1), ("i4", ml_dtypes.int4, -8, 7),
            ("i8", np.int8, -128, 127), ("i16", np.int16, -32768, 32767),
            ("u2", ml_dtypes.uint2, 0, 3), ("u4", ml_dtypes.uint4, 0, 15),
            ("u8", np.uint8, 0, 255), ("u16", np.uint16, 0, 65535)]


def _storage_param(storage, dtype, lo, hi):
    # Quantizing clamps then converts: a strict known failure for 2-bit storage where this
    # jaxlib's XLA miscompiles that (tests/xla_known.py).
    name = "clamped convert to 2 bits"
    marks = [pytest.mark.xfail(xla_known.xla_miscompiles(name), strict=True,
                               reason=xla_known.xla_miscompile_reason(name))] \
        if storage in ("i2", "u2") else []
    return pytest.param(storage, dtype, lo, hi, marks=marks)


@pytest.mark.parametrize("storage,dtype,lo,hi", [_storage_param(*s) for s in _STORAGE])
def test_quantize_rounds_half_even_and_clamps(storage, dtype, lo, hi):
    scale, zp = 0.5, (lo + hi + 1) // 2
    qt = f"!quant.uniform<{storage}:f32, {scale}:{zp}>"
    sname = {"u": "ui"}.get(storage[0], "i") + storage[1:]
    x = np.array([-1e6, -0.75, -0.25, 0.0, 0.25, 0.75, 1.25, 1e6, (hi - zp) * scale,
                  (lo - zp) * scale], np.float32)
    prog = _load(f"""
  %q = stablehlo.uniform_quantize %x : (tensor<10xf32>) -> tensor<10x{qt}>
  %s = stablehlo.bitcast_convert %q : (tensor<10x{qt}>) -> tensor<10x{sname}>
  %d = stablehlo.uniform_dequantize %q : (tensor<10x{qt}>) -> tensor<10xf32>
  return %s, %d : tensor<10x{sname}>, tensor<10xf32>""",
                 "%x: tensor<10xf32>", f"tensor<10x{sname}>, tensor<10xf32>")
    ints, floats = prog(x)
    expected = _round_even_clamp(x.astype(np.float64) / scale + zp, lo, hi)
    np.testing.assert_array_equal(np.asarray(ints).astype(np.int64), expected.astype(np.int64))
    np.testing.assert_array_equal(np.asarray(floats), ((expected - zp) * scale).astype(np.float32))


def test_narrow_storage_range_clamps():
    qt = "!quant.uniform<i8<-127:127>:f32, 1.0>"
    prog = _load(f"""
  %q = stablehlo.uniform_quantize %x : (tensor<4xf32>) -> tensor<4x{qt}>
  %s = stablehlo.bitcast_convert %q : (tensor<4x{qt}>) -> tensor<4xi8>
  return %s : tensor<4xi8>""", "%x: tensor<4xf32>", "tensor<4xi8>")
    out = prog(np.array([-500, -127.5, 126.5, 500], np.float32))
    np.testing.assert_array_equal(np.asarray(out), [-127, -127, 126, 127])


def test_i32_storage_f64_expressed():
    qt = "!quant.uniform<i32:f64, 0.001:5>"
    prog = _load(f"""
  %q = stablehlo.uniform_quantize %x : (tensor<3xf64>) -> tensor<3x{qt}>
  return %q : tensor<3x{qt}>""", "%x: tensor<3xf64>", f"tensor<3x{qt}>")
    out = prog(np.array([1.0, -2.0004, 1e9], np.float64))
    assert isinstance(out, QArray)
    np.testing.assert_array_equal(np.asarray(out.storage), [1005, -1995, 2**31 - 1])


@pytest.mark.parametrize("expressed,dtype", [("f16", np.float16), ("bf16", ml_dtypes.bfloat16),
                                             ("f64", np.float64)])
def test_expressed_types_roundtrip(expressed, dtype):
    qt = f"!quant.uniform<i8:{expressed}, 0.25:3>"
    prog = _load(f"""
  %q = stablehlo.uniform_quantize %x : (tensor<3x{expressed}>) -> tensor<3x{qt}>
  %d = stablehlo.uniform_dequantize %q : (tensor<3x{qt}>) -> tensor<3x{expressed}>
  return %d : tensor<3x{expressed}>""", f"%x: tensor<3x{expressed}>", f"tensor<3x{expressed}>")
    out = prog(np.array([1.0, -0.5, 100.0], dtype))
    np.testing.assert_array_equal(np.asarray(out).astype(np.float64), [1.0, -0.5, (127 - 3) * 0.25])


def test_per_axis_quantize_and_dequantize():
    qt = "!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>"
    prog = _load(f"""
  %q = stablehlo.uniform_quantize %x : (tensor<2x3xf32>) -> tensor<2x3x{qt}>
  %d = stablehlo.uniform_dequantize %q : (tensor<2x3x{qt}>) -> tensor<2x3xf32>
  return %q, %d : tensor<2x3x{qt}>, tensor<2x3xf32>""", "%x: tensor<2x3xf32>",
                 f"tensor<2x3x{qt}>, tensor<2x3xf32>")
    x = np.array([[4.0, 0.0, 100.0], [15.0, -0.25, 1.0]], np.float32)
    q, d = prog(x)
    expected = np.array([[10, -30, 127], [10, -20, -18]])
    np.testing.assert_array_equal(np.asarray(q.storage), expected)
    scales = np.array([[0.1], [0.5]], np.float32)
    np.testing.assert_allclose(np.asarray(d), (expected - np.array([[-30], [-20]])) * scales,
                               rtol=1e-6)


def test_requantize_between_scales():
    a = "!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>"
    b = "!quant.uniform<i8:f32:0, {0.1:-20,0.2:-30}>"
    prog = _load(f"""
  %q = stablehlo.bitcast_convert %x : (tensor<2xi8>) -> tensor<2x{a}>
  %r = stablehlo.uniform_quantize %q : (tensor<2x{a}>) -> tensor<2x{b}>
  %s = stablehlo.bitcast_convert %r : (tensor<2x{b}>) -> tensor<2xi8>
  return %s : tensor<2xi8>""", "%x: tensor<2xi8>", "tensor<2xi8>")
    # dequantized [4.0, 15.0]; requantized 4/0.1 - 20 = 20, 15/0.2 - 30 = 45
    np.testing.assert_array_equal(np.asarray(prog(np.array([10, 10], np.int8))), [20, 45])


# ------------------------------------------------------------------ ops

def test_elementwise_dequantize_op_quantize():
    a, b = "!quant.uniform<i8:f32, 0.1:-30>", "!quant.uniform<i8:f32, 0.5:-20>"
    prog = _load(f"""
  %qa = stablehlo.uniform_quantize %x : (tensor<2xf32>) -> tensor<2x{a}>
  %qb = stablehlo.uniform_quantize %y : (tensor<2xf32>) -> tensor<2x{b}>
  %s = stablehlo.add %qa, %qb : (tensor<2x{a}>, tensor<2x{b}>) -> tensor<2x{b}>
  %n = stablehlo.negate %s : (tensor<2x{b}>) -> tensor<2x{b}>
  %i = stablehlo.bitcast_convert %n : (tensor<2x{b}>) -> tensor<2xi8>
  return %i : tensor<2xi8>""", "%x: tensor<2xf32>, %y: tensor<2xf32>", "tensor<2xi8>")
    out = prog(np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0], np.float32))
    # 1+3 = 4 -> 4/0.5-20 = -12; negated -4 -> -28; 2+4 = 6 -> -8; -6 -> -32
    np.testing.assert_array_equal(np.asarray(out), [-28, -32])


def test_data_movement_keeps_storage_and_moves_axis():
    a = "!quant.uniform<i8:f32:0, {0.5:1,0.25:2}>"
    b = "!quant.uniform<i8:f32:1, {0.5:1,0.25:2}>"
    prog = _load(f"""
  %q = stablehlo.bitcast_convert %x : (tensor<2x3xi8>) -> tensor<2x3x{a}>
  %t = stablehlo.transpose %q, dims = [1, 0] : (tensor<2x3x{a}>) -> tensor<3x2x{b}>
  return %t : tensor<3x2x{b}>""", "%x: tensor<2x3xi8>", f"tensor<3x2x{b}>")
    x = np.arange(6, dtype=np.int8).reshape(2, 3)
    out = prog(x)
    assert out.qtype == parse_quantized_element(b)
    np.testing.assert_array_equal(np.asarray(out.storage), x.T)


def test_per_tensor_data_movement():
    a = b = "!quant.uniform<i8:f32, 0.5:1>"
    prog = _load(f"""
  %q = stablehlo.bitcast_convert %x : (tensor<4xi8>) -> tensor<4x{a}>
  %r = stablehlo.reverse %q, dims = [0] : tensor<4x{a}>
  %s = stablehlo.slice %r [1:4] : (tensor<4x{a}>) -> tensor<3x{a}>
  %c = stablehlo.concatenate %s, %s, dim = 0 : (tensor<3x{a}>, tensor<3x{a}>) -> tensor<6x{b}>
  %i = stablehlo.bitcast_convert %c : (tensor<6x{b}>) -> tensor<6xi8>
  %j = stablehlo.bitcast_convert %s : (tensor<3x{a}>) -> tensor<3xi8>
  return %j, %i : tensor<3xi8>, tensor<6xi8>""", "%x: tensor<4xi8>", "tensor<3xi8>, tensor<6xi8>")
    x = np.array([1, 5, -3, 70], np.int8)
    j, i = prog(x)
    np.testing.assert_array_equal(np.asarray(j), [-3, 5, 1])
    np.testing.assert_array_equal(np.asarray(i), [-3, 5, 1, -3, 5, 1])


def test_reduce_max_on_quantized_values():
    q = "!quant.uniform<i8:f32, 0.5:-3>"
    prog = _load(f"""
  %init = stablehlo.uniform_quantize %i : (tensor<f32>) -> tensor<{q}>
  %r = stablehlo.reduce(%x init: %init) applies stablehlo.maximum across dimensions = [1]
       : (tensor<2x3x{q}>, tensor<{q}>) -> tensor<2x{q}>
  %d = stablehlo.uniform_dequantize %r : (tensor<2x{q}>) -> tensor<2xf32>
  return %d : tensor<2xf32>""", f"%x: tensor<2x3x{q}>, %i: tensor<f32>", "tensor<2xf32>")
    x = np.array([[-10, 4, 2], [-9, -8, -12]], np.int8)
    out = prog(x, np.float32(-4.0))
    np.testing.assert_array_equal(np.asarray(out), [(4 + 3) * 0.5, (-8 + 3) * 0.5])


def test_hybrid_dot_general_float_by_quantized():
    q = "!quant.uniform<i8:f32:1, {0.5:0,0.25:0}>"
    prog = _load(f"""
  %r = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
       : (tensor<2x3xf32>, tensor<3x2x{q}>) -> tensor<2x2xf32>
  return %r : tensor<2x2xf32>""", f"%x: tensor<2x3xf32>, %w: tensor<3x2x{q}>", "tensor<2x2xf32>")
    x = np.array([[1.0, 2.0, -1.0], [0.5, 0.0, 3.0]], np.float32)
    w = np.array([[2, -4], [1, 8], [-3, 0]], np.int8)
    out = prog(x, w)
    np.testing.assert_allclose(np.asarray(out), x @ (w * np.array([0.5, 0.25])), rtol=1e-6)


def test_static_dot_general_per_axis_integer_accumulation():
    lq = "!quant.uniform<i8:f32, 0.5:2>"
    rq = "!quant.uniform<i8:f32:1, {0.25:0,0.125:0}>"
    oq = "!quant.uniform<i8:f32, 0.1:-5>"
    prog = _load(f"""
  %r = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
       : (tensor<2x3x{lq}>, tensor<3x2x{rq}>) -> tensor<2x2x{oq}>
  %d = stablehlo.bitcast_convert %r : (tensor<2x2x{oq}>) -> tensor<2x2xi8>
  return %d : tensor<2x2xi8>""", f"%x: tensor<2x3x{lq}>, %w: tensor<3x2x{rq}>", "tensor<2x2xi8>")
    x = np.array([[4, 0, -2], [10, 3, 2]], np.int8)
    w = np.array([[2, -4], [1, 8], [-3, 0]], np.int8)
    out = prog(x, w)
    real = ((x.astype(np.int64) - 2) @ w.astype(np.int64)) * (0.5 * np.array([0.25, 0.125]))
    expected = _round_even_clamp(real / 0.1 - 5, -128, 127)
    np.testing.assert_array_equal(np.asarray(out), expected)


def test_compare_dequantizes():
    a, b = "!quant.uniform<i8:f32, 1.0:0>", "!quant.uniform<i8:f32, 0.5:0>"
    prog = _load(f"""
  %c = stablehlo.compare LT, %x, %y : (tensor<3x{a}>, tensor<3x{b}>) -> tensor<3xi1>
  return %c : tensor<3xi1>""", f"%x: tensor<3x{a}>, %y: tensor<3x{b}>", "tensor<3xi1>")
    out = prog(np.array([1, 2, 3], np.int8), np.array([4, 4, 4], np.int8))  # y = 2.0
    np.testing.assert_array_equal(np.asarray(out), [True, False, False])


# ------------------------------------------------------------------ values and functions

def test_arguments_accept_qarray_or_storage_and_check_types():
    q = "!quant.uniform<u8:f32, 0.5:10>"
    prog = _load(f"""
  %d = stablehlo.uniform_dequantize %x : (tensor<2x{q}>) -> tensor<2xf32>
  return %d, %x : tensor<2xf32>, tensor<2x{q}>""", f"%x: tensor<2x{q}>",
                 f"tensor<2xf32>, tensor<2x{q}>")
    qtype = parse_quantized_element(q)
    d1, q1 = prog(np.array([10, 14], np.uint8))
    d2, _ = prog(QArray(np.array([10, 14], np.uint8), qtype))
    np.testing.assert_array_equal(np.asarray(d1), [0.0, 2.0])
    np.testing.assert_array_equal(np.asarray(d2), [0.0, 2.0])
    assert isinstance(q1, QArray) and q1.qtype == qtype
    with pytest.raises(TypeError):
        prog(np.array([10, 14], np.int8))
    with pytest.raises(TypeError):
        prog(QArray(np.array([10, 14], np.uint8), parse_quantized_element(
            "!quant.uniform<u8:f32, 0.25:10>")))


def test_qarray_is_a_pytree_through_jit():
    qtype = parse_quantized_element("!quant.uniform<i8:f32, 0.5:1>")
    with compat.enable_x64():
        q = jax.jit(lambda x: quant.quantize(x, qtype))(np.array([1.0, -3.0], np.float32))
        back = jax.jit(lambda v: v.dequantize())(q)
    assert isinstance(q, QArray) and q.qtype == qtype
    np.testing.assert_array_equal(np.asarray(back), [1.0, -3.0])


def test_gradients_zero_by_default_straight_through_on_request():
    q = "!quant.uniform<i8:f32, 0.5:0>"
    prog = _load(f"""
  %q = stablehlo.uniform_quantize %x : (tensor<3xf32>) -> tensor<3x{q}>
  %m = stablehlo.multiply %q, %q : (tensor<3x{q}>, tensor<3x{q}>) -> tensor<3x{q}>
  %d = stablehlo.uniform_dequantize %m : (tensor<3x{q}>) -> tensor<3xf32>
  return %d : tensor<3xf32>""", "%x: tensor<3xf32>", "tensor<3xf32>")
    x = np.array([1.0, 2.0, -1.5], np.float32)
    plain = jax.grad(lambda v: prog(v).sum())(x)
    np.testing.assert_array_equal(np.asarray(plain), [0.0, 0.0, 0.0])
    ste = quant.straight_through(prog.entry)
    np.testing.assert_array_equal(np.asarray(ste(x)), np.asarray(prog(x)))
    grad = jax.grad(lambda v: ste(v).sum())(x)
    np.testing.assert_allclose(np.asarray(grad), 2 * x)  # d(x*x)/dx through the quantizers


def test_constant_of_storage_integers():
    q = "!quant.uniform<i8:f32, 0.5:2>"
    prog = _load(f"""
  %c = "stablehlo.constant"() {{value = dense<[4, -2]> : tensor<2xi8>}} : () -> tensor<2x{q}>
  %d = stablehlo.uniform_dequantize %c : (tensor<2x{q}>) -> tensor<2xf32>
  return %d : tensor<2xf32>""", "", "tensor<2xf32>")
    np.testing.assert_array_equal(np.asarray(prog()), [1.0, -2.0])


def test_reduce_add_requantizes_every_step():
    s = "!quant.uniform<i8<-3:3>:f32, 1.0:0>"
    prog = _load(f"""
  %r = stablehlo.reduce(%x init: %i) applies stablehlo.add across dimensions = [0]
       : (tensor<4x{s}>, tensor<{s}>) -> tensor<{s}>
  return %r : tensor<{s}>""", f"%x: tensor<4x{s}>, %i: tensor<{s}>", f"tensor<{s}>")
    # Each quantized add clamps to storage_max 3; adding storage integers would give 8.
    out = prog(np.array([2, 2, 2, 2], np.int8), np.array(0, np.int8))
    assert int(np.asarray(out.storage)) == 3


def test_while_loop_carries_quantized_values():
    q = "!quant.uniform<i8:f32, 0.5:0>"
    prog = _load(f"""
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c3 = stablehlo.constant dense<3> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<2x{q}>
    cond {{
      %p = stablehlo.compare LT, %i, %c3 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    }} do {{
      %n = stablehlo.add %i, %c1 : tensor<i32>
      %w = stablehlo.add %v, %v : tensor<2x{q}>
      stablehlo.return %n, %w : tensor<i32>, tensor<2x{q}>
    }}
  %d = stablehlo.uniform_dequantize %r#1 : (tensor<2x{q}>) -> tensor<2xf32>
  return %d : tensor<2xf32>""", f"%x: tensor<2x{q}>", "tensor<2xf32>")
    out = prog(np.array([3, 40], np.int8))
    np.testing.assert_array_equal(np.asarray(out), [12.0, 63.5])  # 3*8 = 24; 40*8 saturates at 127


def test_vmap_over_per_axis_qarray():
    qtype = parse_quantized_element("!quant.uniform<u8:f32:1, {0.5:10,2.0:0}>")
    storage = np.array([[[10, 1], [12, 3]], [[14, 0], [8, 255]]], np.uint8)  # batch of 2x2x2
    out = jax.vmap(lambda s: QArray(s, qtype).dequantize())(storage)
    expected = (storage.astype(np.float64) - np.array([10, 0])) * np.array([0.5, 2.0])
    np.testing.assert_array_equal(np.asarray(out), expected)


def test_convolution_static_per_axis_and_hybrid():
    lq = "!quant.uniform<i8:f32, 0.5:-1>"
    kq = "!quant.uniform<i8:f32:2, {0.25:0,1.0:0}>"
    oq = "!quant.uniform<i16:f32, 0.125:3>"
    conv = ("dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {stride = [1], pad = [[1, 0]]} "
            "{batch_group_count = 1 : i64, feature_group_count = 1 : i64}")
    prog = _load(f"""
  %q = stablehlo.convolution(%x, %k) {conv}
       : (tensor<1x4x1x{lq}>, tensor<2x1x2x{kq}>) -> tensor<1x4x2x{oq}>
  %h = stablehlo.convolution(%f, %k) {conv}
       : (tensor<1x4x1xf32>, tensor<2x1x2x{kq}>) -> tensor<1x4x2xf32>
  %s = stablehlo.bitcast_convert %q : (tensor<1x4x2x{oq}>) -> tensor<1x4x2xi16>
  return %s, %h : tensor<1x4x2xi16>, tensor<1x4x2xf32>""",
                 f"%x: tensor<1x4x1x{lq}>, %k: tensor<2x1x2x{kq}>, %f: tensor<1x4x1xf32>",
                 "tensor<1x4x2xi16>, tensor<1x4x2xf32>")
    x = np.array([3, -1, 7, 0], np.int8).reshape(1, 4, 1)
    k = np.array([[1, -2], [3, 5]], np.int8).reshape(2, 1, 2)
    f = np.array([0.5, -1.0, 2.0, 4.0], np.float32).reshape(1, 4, 1)
    q, h = prog(x, k, f)

    def conv_ref(values, kernel):  # out[t, o] = sum_w values[t - 1 + w] * kernel[w, o]
        padded = np.concatenate([[0.0], values])
        return np.array([[sum(padded[t + w] * kernel[w, o] for w in range(2)) for o in range(2)]
                         for t in range(4)])
    kernel = k[:, 0, :].astype(np.float64) * np.array([0.25, 1.0])
    real = conv_ref((x[0, :, 0].astype(np.float64) + 1) * 0.5, kernel)
    expected = _round_even_clamp(real / 0.125 + 3, -32768, 32767)
    np.testing.assert_array_equal(np.asarray(q)[0], expected)
    np.testing.assert_allclose(np.asarray(h)[0], conv_ref(f[0, :, 0].astype(np.float64), kernel),
                               rtol=1e-6)


# ------------------------------------------------------------------ load-time wrapping

def test_only_ops_touching_quantized_values_get_the_wrapper():
    from shlo2jax.registry import lookup
    q = "!quant.uniform<i8:f32, 0.5>"
    prog = _load(f"""
  %f = stablehlo.add %x, %x : tensor<2xf32>
  %q = stablehlo.uniform_quantize %f : (tensor<2xf32>) -> tensor<2x{q}>
  %n = stablehlo.negate %q : tensor<2x{q}>
  %c = stablehlo.compare LT, %n, %n : (tensor<2x{q}>, tensor<2x{q}>) -> tensor<2xi1>
  return %c : tensor<2xi1>""", "%x: tensor<2xf32>", "tensor<2xi1>")
    add, _, negate, compare = prog.module.ops
    assert add.handler is lookup("stablehlo.add").handler  # decided at load: no wrapper
    assert negate.handler is not lookup("stablehlo.negate").handler
    assert compare.handler is not lookup("stablehlo.compare").handler
    np.testing.assert_array_equal(np.asarray(prog(np.array([1.0, 2.0], np.float32))),
                                  [False, False])


def test_user_rule_sees_dequantized_operands_and_is_requantized():
    from shlo2jax.registry import OP_RULES, register_op
    q = "!quant.uniform<i8:f32, 0.5>"
    seen = []

    @register_op("test.double")
    def double(ctx, op, x):
        seen.append((x.dtype, op.result_types[0].dtype))
        return x * 2
    try:
        prog = _load(f"""
  %q = stablehlo.uniform_quantize %x : (tensor<3xf32>) -> tensor<3x{q}>
  %d = "test.double"(%q) : (tensor<3x{q}>) -> tensor<3x{q}>
  %p = "test.double"(%x) : (tensor<3xf32>) -> tensor<3xf32>
  %f = stablehlo.uniform_dequantize %d : (tensor<3x{q}>) -> tensor<3xf32>
  return %f, %p : tensor<3xf32>, tensor<3xf32>""", "%x: tensor<3xf32>",
                     "tensor<3xf32>, tensor<3xf32>")
        x = np.array([1.0, -2.0, 40.0], np.float32)
        out, plain = prog(x)
    finally:
        del OP_RULES["test.double"]
    # 2x, requantized: scale 0.5 saturates at 127 * 0.5 = 63.5
    np.testing.assert_array_equal(np.asarray(out), [2.0, -4.0, 63.5])
    np.testing.assert_array_equal(np.asarray(plain), 2 * x)
    assert seen == [(np.float32, np.float32), (np.float32, np.float32)]
