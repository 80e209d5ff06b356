"""convert, bitcast_convert and reduce_precision."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from jax import lax

from shlo2jax import value_types as T
from shlo2jax.ops._common import UNSIGNED_OF_WIDTH, bits_as, reject_unsupported_types
from shlo2jax.registry import Unsupported, register_op


def _prepare_result_dtype(op):
    reject_unsupported_types(op)
    return op.result_types[0].dtype


@register_op("stablehlo.convert", "mhlo.convert", prepare=_prepare_result_dtype)
def convert(ctx, op, x):
    dtype = op.params
    if T.is_complex(x.dtype) and not T.is_complex(dtype):
        # The spec takes the real part; say so rather than rely on lax's implicit drop.
        x = lax.real(x)
    if T.is_integer(dtype) and T.is_float(x.dtype) and T.bit_width(x.dtype) <= 8:
        # XLA on CPU converts f4E2M1FN's largest value (6.0) to the integer type's max or
        # min; through f32 (exact for every narrow float) the result is the spec's.
        x = lax.convert_element_type(x, np.float32)
    return lax.convert_element_type(x, dtype)


@register_op("stablehlo.bitcast_convert", "mhlo.bitcast_convert", prepare=_prepare_result_dtype)
def bitcast_convert(ctx, op, x):
    dtype = op.params
    if x.dtype == dtype:
        return x
    # XLA stores i1 in a byte and bitcasts that byte; the spec's i1 is one bit.
    if dtype == np.bool_:
        return _bits_of(x)
    if x.dtype == np.bool_:
        return _from_bits(x, dtype)
    if T.is_complex(x.dtype):  # lax refuses complex; the verifier allows only complex <-> complex
        return _complex_bitcast(x, dtype)
    # Width changes add (narrowing) or drop (widening) a trailing dimension, as in lax.
    return lax.bitcast_convert_type(x, dtype)


def _complex_bitcast(x, dtype):
    """complex<f64> <-> 2 x complex<f32>, regrouping the parts' bits in memory order."""
    parts = lax.concatenate([lax.expand_dims(lax.real(x), (x.ndim,)),
                             lax.expand_dims(lax.imag(x), (x.ndim,))], x.ndim)
    if dtype == np.complex64:
        # [re, im] -> [[re_lo, re_hi], [im_lo, im_hi]]: two complex<f32>, each one f64's halves.
        halves = lax.bitcast_convert_type(parts, np.float32)
        return lax.complex(_last(halves, 0), _last(halves, 1))
    # [[re0, im0], [re1, im1]] -> (re, im) = (f64 of re0:im0, f64 of re1:im1).
    doubles = lax.bitcast_convert_type(parts, np.float64)
    return lax.complex(_last(doubles, 0), _last(doubles, 1))


def _last(x, i):
    return lax.index_in_dim(x, i, axis=x.ndim - 1, keepdims=False)


def _bits_of(x):
    """x's bits as a trailing i1 dimension, least significant bit first."""
    width = T.bit_width(x.dtype)
    bits = bits_as(x, UNSIGNED_OF_WIDTH)
    shape = tuple(x.shape) + (width,)
    bits = lax.broadcast_in_dim(bits, shape, tuple(range(x.ndim)))
    shifts = lax.broadcast_in_dim(np.arange(width).astype(bits.dtype), shape, (x.ndim,))
    bits = lax.bitwise_and(lax.shift_right_logical(bits, shifts), lax.full_like(bits, 1))
    return bits != lax.full_like(bits, 0)


def _from_bits(bits, dtype):
    """The inverse of `_bits_of`: the trailing i1 dimension packed into one `dtype` value."""
    width = T.bit_width(dtype)
    utype = UNSIGNED_OF_WIDTH[max(width, 8)]  # lax reduces no sub-byte integers
    shifts = lax.broadcast_in_dim(np.arange(width).astype(utype), bits.shape, (bits.ndim - 1,))
    values = lax.shift_left(lax.convert_element_type(bits, utype), shifts)
    packed = lax.reduce(values, np.zeros((), utype), lax.bitwise_or, (bits.ndim - 1,))
    if width < 8:
        packed = lax.convert_element_type(packed, UNSIGNED_OF_WIDTH[width])
    return packed if packed.dtype == dtype else lax.bitcast_convert_type(packed, dtype)


class ReducePrecision(NamedTuple):
    exponent_bits: int
    mantissa_bits: int


def _prepare_reduce_precision(op):
    reject_unsupported_types(op)
    exponent_bits, mantissa_bits = op.attrs["exponent_bits"], op.attrs["mantissa_bits"]
    if exponent_bits < 1 or mantissa_bits < 0:
        raise Unsupported(f"reduce_precision to {exponent_bits} exponent and {mantissa_bits} "
                          "mantissa bits")
    return ReducePrecision(exponent_bits, mantissa_bits)


@register_op("stablehlo.reduce_precision", "mhlo.reduce_precision",
             prepare=_prepare_reduce_precision)
def reduce_precision(ctx, op, x):
    return lax.reduce_precision(x, op.params.exponent_bits, op.params.mantissa_bits)
