"""jax.numpy.fft on CPU before XLA ran DUCC itself: `ducc_fft` and `dynamic_ducc_fft`.

jaxlib/ducc_fft.py (jax 0.4.1 .. 0.4.26) passed the FFT's description as a
FlatBuffers table in a u8 constant operand (operand 0), not in backend_config:

    table DuccFftDescriptor {            // jaxlib/cpu/ducc_fft.fbs @ b63801b4db
      dtype:DuccFftDtype (byte: COMPLEX64 = 0, COMPLEX128 = 1);
      fft_type:DuccFftType (byte: C2C = 0, C2R = 1, R2C = 2);
      shape:[uint64]; strides_in:[uint64]; strides_out:[uint64];
      axes:[uint32]; forward:bool; scale:double; }
    table DynamicDuccFftDescriptor {     // @ b9c0658fcf (jax 0.4.13)
      ndims:uint32; dtype; fft_type; axes:[uint32]; forward:bool; }

`ducc_fft(descriptor, x)`; `dynamic_ducc_fft(descriptor, x, shape, strides_in,
strides_out, scale)` plus the result shape (a shape operand). The kernel
(jaxlib/cpu/ducc_fft_kernels.cc) computes an unnormalized DUCC transform over
`axes` (element strides) times `scale`; for C2R the shape is the real output's.
The descriptor is a program constant, so it is decoded while tracing.
"""

from __future__ import annotations

import dataclasses
import functools
import struct

import jax
import jax.numpy as jnp
import numpy as np

from shlo2jax.ops.custom_calls._descriptors import Outputs, kernel_prepare
from shlo2jax.registry import TargetInfo, register_custom_call

_FFT_TYPES = {0: "C2C", 1: "C2R", 2: "R2C"}


class _Table:
    """A read-only FlatBuffers table: the vtable gives each field's offset."""

    def __init__(self, buf: bytes, pos: int):
        self.buf, self.pos = buf, pos
        vtable = pos - struct.unpack_from("<i", buf, pos)[0]
        self.vsize = struct.unpack_from("<H", buf, vtable)[0]
        self.vtable = vtable

    def _offset(self, field: int) -> int:
        slot = 4 + 2 * field
        if slot + 2 > self.vsize:
            return 0
        return struct.unpack_from("<H", self.buf, self.vtable + slot)[0]

    def scalar(self, field: int, fmt: str, default):
        offset = self._offset(field)
        return default if offset == 0 else struct.unpack_from("<" + fmt, self.buf,
                                                              self.pos + offset)[0]

    def vector(self, field: int, fmt: str) -> tuple:
        offset = self._offset(field)
        if offset == 0:
            return ()
        at = self.pos + offset
        start = at + struct.unpack_from("<I", self.buf, at)[0]
        length = struct.unpack_from("<I", self.buf, start)[0]
        return struct.unpack_from(f"<{length}{fmt}", self.buf, start + 4)


@dataclasses.dataclass(frozen=True)
class Fft:
    double: bool
    fft_type: str
    axes: tuple
    forward: bool
    shape: tuple = ()        # static kernel only (C2R: the real output's shape)
    strides_in: tuple = ()
    strides_out: tuple = ()
    scale: float = 1.0


def _error(target, what):
    return ValueError(f"custom_call @{target}: {what}")


@functools.lru_cache(maxsize=256)
def _decode(target: str, raw: bytes, dynamic: bool) -> Fft:
    try:
        table = _Table(raw, struct.unpack_from("<I", raw, 0)[0])
        first = 1 if dynamic else 0  # the dynamic table starts with ndims
        dtype = table.scalar(first, "b", 0)
        fft_type = table.scalar(first + 1, "b", 0)
        if dynamic:
            axes, forward = table.vector(3, "I"), bool(table.scalar(4, "B", 0))
            extra = {}
        else:
            axes, forward = table.vector(5, "I"), bool(table.scalar(6, "B", 0))
            extra = dict(shape=table.vector(2, "Q"), strides_in=table.vector(3, "Q"),
                         strides_out=table.vector(4, "Q"), scale=table.scalar(7, "d", 0.0))
    except struct.error as e:
        raise _error(target, f"malformed FlatBuffers descriptor ({len(raw)} bytes): {e}") from None
    if dtype not in (0, 1):
        raise _error(target, f"unknown DuccFftDtype {dtype} in the descriptor")
    if fft_type not in _FFT_TYPES:
        raise _error(target, f"unknown DuccFftType {fft_type} in the descriptor")
    fft = Fft(dtype == 1, _FFT_TYPES[fft_type], tuple(axes), forward, **extra)
    expected_forward = {"C2C": fft.forward, "R2C": True, "C2R": False}[fft.fft_type]
    if fft.forward != expected_forward or not fft.axes:
        raise _error(target, f"{fft.fft_type} with forward={fft.forward}, axes={fft.axes}: "
                             "jaxlib never emitted it")
    return fft


def _contiguous(shape) -> tuple:
    strides, stride = [], 1
    for d in reversed(shape):
        strides.append(stride)
        stride *= d
    return tuple(reversed(strides))


def _constant_bytes(value, target) -> bytes:
    if isinstance(value, jax.core.Tracer):
        raise _error(target, "the FFT descriptor operand is computed from traced values; "
                             "jaxlib passed it as a constant")
    return np.asarray(value, np.uint8).tobytes()


def _transform(fft: Fft, x, out_shape, out_dtype):
    axes = tuple(a % x.ndim for a in fft.axes)
    if fft.fft_type == "C2C":
        y = jnp.fft.fftn(x, axes=axes) if fft.forward else \
            jnp.fft.ifftn(x, axes=axes, norm="forward")
    elif fft.fft_type == "R2C":
        y = jnp.fft.rfftn(x, axes=axes)
    else:
        y = jnp.fft.irfftn(x, s=[out_shape[a] for a in axes], axes=axes, norm="forward")
    return y.astype(out_dtype)


@dataclasses.dataclass(frozen=True)
class FftCall:
    target: str
    out: Outputs


def _prepare(op):
    return FftCall(op.attrs.get("call_target_name"), Outputs.of(op))


def _check_precision(params: FftCall, fft: Fft):
    shape, dtype = params.out.types[0]
    double = np.dtype(dtype) in (np.float64, np.complex128)
    if double != fft.double:
        raise _error(params.target, f"descriptor dtype {'COMPLEX128' if fft.double else 'COMPLEX64'}"
                                    f" but the result is {np.dtype(dtype).name}")
    return shape, dtype


_INFO = dict(forms=("operands",), dtypes="f32, f64, c64, c128",
             test=("tests/ops/custom_calls/test_legacy_fft.py::test_ducc_fft",
                   "tests/ops/custom_calls/test_legacy_fft.py::test_ducc_fft_unknown_type_code"))


@register_custom_call("ducc_fft", prepare=kernel_prepare(_prepare, operands=2),
                      info=TargetInfo("DUCC FFT on CPU (FlatBuffers descriptor operand)",
                                      jax="0.4.1 .. 0.4.12 (and later jax with jaxlib < 0.4.13)",
                                      **_INFO))
def ducc_fft(ctx, op, descriptor, x, *result_shapes):
    params = op.params
    fft = _decode(params.target, _constant_bytes(descriptor, params.target), False)
    shape, dtype = _check_precision(params, fft)
    logical = tuple(shape) if fft.fft_type == "C2R" else tuple(x.shape)
    if fft.shape != logical or fft.strides_in != _contiguous(x.shape) or \
            fft.strides_out != _contiguous(shape):
        raise _error(params.target, f"descriptor shape {fft.shape} / strides {fft.strides_in}, "
                                    f"{fft.strides_out} do not describe the dense row-major "
                                    f"arrays {tuple(x.shape)} -> {tuple(shape)}")
    y = _transform(fft, x, shape, dtype)
    return y if fft.scale == 1.0 else (y * np.asarray(fft.scale, y.real.dtype)).astype(dtype)


@register_custom_call("dynamic_ducc_fft", prepare=kernel_prepare(_prepare, operands=6),
                      info=TargetInfo("DUCC FFT on CPU, dynamic shapes (FlatBuffers descriptor "
                                      "operand)", jax="0.4.13 .. 0.4.26", **_INFO))
def dynamic_ducc_fft(ctx, op, descriptor, x, shape_operand, strides_in, strides_out, scale,
                     *result_shapes):
    params = op.params
    fft = _decode(params.target, _constant_bytes(descriptor, params.target), True)
    shape, dtype = _check_precision(params, fft)
    y = _transform(fft, x, shape, dtype)
    real = y.real.dtype
    return (y * jnp.asarray(scale).reshape(()).astype(real)).astype(dtype)

