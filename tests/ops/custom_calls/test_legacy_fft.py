"""ops/custom_calls/legacy_fft.py: DUCC FFTs (CPU, jax <= 0.4.26), FlatBuffers descriptors."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import shlo2jax

from ._programs import (DTYPES, _random, _run, _tensor)


# ---------------------------------------------------------------- DUCC FFT (CPU, jax <= 0.4.26)


def _flatbuffer(fields):
    """A FlatBuffers table (the root) with `fields` in field-id order: (kind, value)
    or None for an absent field. Scalars inline, vectors after the table."""
    sizes = {"i8": 1, "bool": 1, "u32": 4, "f64": 8, "vec_u64": 4, "vec_u32": 4}
    buf = bytearray(4)  # root offset, patched below
    vt_pos = len(buf)
    n = len(fields)
    buf += bytes(4 + 2 * n)  # vtable, patched below
    while len(buf) % 8:
        buf += b"\0"
    table = len(buf)
    buf += struct.pack("<i", table - vt_pos)
    offsets, vectors = [], []
    for field in fields:
        if field is None:
            offsets.append(0)
            continue
        kind, value = field
        size = sizes[kind]
        while (len(buf) - table) % size:
            buf += b"\0"
        offsets.append(len(buf) - table)
        if kind.startswith("vec"):
            vectors.append((len(buf), kind, value))
            buf += bytes(4)
        else:
            buf += struct.pack({"i8": "<b", "bool": "<B", "u32": "<I", "f64": "<d"}[kind], value)
    table_size = len(buf) - table
    for at, kind, values in vectors:
        elem = 8 if kind == "vec_u64" else 4
        while (len(buf) + 4) % elem:
            buf += b"\0"
        start = len(buf)
        buf += struct.pack("<I", len(values))
        buf += struct.pack(f"<{len(values)}{'Q' if elem == 8 else 'I'}", *values)
        struct.pack_into("<I", buf, at, start - at)
    struct.pack_into(f"<HH{n}H", buf, vt_pos, 4 + 2 * n, table_size, *offsets)
    struct.pack_into("<I", buf, 0, table)
    return bytes(buf)


def _strides(shape):
    return [int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape))]


FFT_CASES = {  # name: (input dtype, output dtype, DuccFftType, forward, numpy reference)
    "fft": (np.complex64, np.complex64, 0, True, lambda x, ax, s: np.fft.fftn(x, axes=ax)),
    "ifft": (np.complex128, np.complex128, 0, False, lambda x, ax, s: np.fft.ifftn(x, axes=ax)),
    "rfft": (np.float32, np.complex64, 2, True, lambda x, ax, s: np.fft.rfftn(x, axes=ax)),
    "irfft": (np.complex128, np.float64, 1, False,
              lambda x, ax, s: np.fft.irfftn(x, s=[s[a] for a in ax], axes=ax)),
}


@pytest.mark.parametrize("case", list(FFT_CASES))
@pytest.mark.parametrize("rank", [1, 2])
@pytest.mark.parametrize("dynamic", [False, True])
def test_ducc_fft(case, rank, dynamic):
    in_dtype, out_dtype, fft_type, forward, reference = FFT_CASES[case]
    out_shape = (3, 4, 6)
    in_shape = out_shape[:-1] + (4,) if fft_type == 1 else out_shape  # C2R input: n//2 + 1
    if fft_type == 2:
        out_shape = in_shape[:-1] + (4,)
    axes = list(range(3 - rank, 3))
    lengths = [(out_shape if fft_type == 1 else in_shape)[a] for a in axes]
    scale = 1.0 if forward else 1.0 / float(np.prod(lengths))
    double = np.dtype(out_dtype) in (np.float64, np.complex128)
    x = _random(in_shape, in_dtype)
    in_t = _tensor(in_shape, DTYPES[in_dtype][0])
    out_t = _tensor(out_shape, DTYPES[out_dtype][0])
    if not dynamic:
        # jaxlib/ducc_fft.py (jax 0.4.1): DuccFftDescriptor {dtype, fft_type, shape,
        # strides_in, strides_out, axes, forward, scale}; C2R's shape is the output's.
        shape = out_shape if fft_type == 1 else in_shape
        desc = _flatbuffer([("i8", int(double)), ("i8", fft_type), ("vec_u64", list(shape)),
                            ("vec_u64", _strides(in_shape)), ("vec_u64", _strides(out_shape)),
                            ("vec_u32", axes), ("bool", int(forward)), ("f64", scale)])
        text = f"""
func.func @main(%x: {in_t}) -> {out_t} {{
  %d = stablehlo.constant dense<{list(desc)}> : tensor<{len(desc)}xui8>
  %r = stablehlo.custom_call @ducc_fft(%d, %x) {{api_version = 2 : i32}} : (tensor<{len(desc)}xui8>, {in_t}) -> {out_t}
  func.return %r : {out_t}
}}"""
    else:
        # jax 0.4.13 .. 0.4.26: DynamicDuccFftDescriptor {ndims, dtype, fft_type, axes,
        # forward}; shape, strides and scale (f64[1]) are operands, then the result shape.
        desc = _flatbuffer([("u32", 3), ("i8", int(double)), ("i8", fft_type),
                            ("vec_u32", axes), ("bool", int(forward))])
        shape = out_shape if fft_type == 1 else in_shape
        text = f"""
func.func @main(%x: {in_t}) -> {out_t} {{
  %d = stablehlo.constant dense<{list(desc)}> : tensor<{len(desc)}xui8>
  %shape = stablehlo.constant dense<{list(shape)}> : tensor<3xi32>
  %sin = stablehlo.constant dense<{_strides(in_shape)}> : tensor<3xi32>
  %sout = stablehlo.constant dense<{_strides(out_shape)}> : tensor<3xi32>
  %scale = stablehlo.constant dense<[{scale!r}]> : tensor<1xf64>
  %rs = stablehlo.constant dense<{list(out_shape)}> : tensor<3xi32>
  %r = stablehlo.custom_call @dynamic_ducc_fft(%d, %x, %shape, %sin, %sout, %scale, %rs) {{
      api_version = 2 : i32, indices_of_shape_operands = dense<6> : tensor<1xi64>}}
      : (tensor<{len(desc)}xui8>, {in_t}, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<1xf64>, tensor<3xi32>) -> {out_t}
  func.return %r : {out_t}
}}"""
    (y,) = _run(shlo2jax.load(text), x)
    assert y.dtype == out_dtype and y.shape == out_shape
    expected = reference(x.astype(np.complex128 if fft_type != 2 else np.float64), axes, out_shape)
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


def test_ducc_fft_unknown_type_code():
    desc = _flatbuffer([("i8", 0), ("i8", 7), ("vec_u64", [4]), ("vec_u64", [1]),
                        ("vec_u64", [1]), ("vec_u32", [0]), ("bool", 1), ("f64", 1.0)])
    text = f"""
func.func @main(%x: tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>> {{
  %d = stablehlo.constant dense<{list(desc)}> : tensor<{len(desc)}xui8>
  %r = stablehlo.custom_call @ducc_fft(%d, %x) : (tensor<{len(desc)}xui8>, tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>>
  func.return %r : tensor<4xcomplex<f32>>
}}"""
    with pytest.raises(Exception, match="unknown DuccFftType 7"):
        shlo2jax.load(text)(np.ones(4, np.complex64))
