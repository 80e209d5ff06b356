"""Exact f6 <-> float conversions on uint8 bit patterns, in jax ops (XLA has no f6 type).

f6E2M3FN and f6E3M2FN are finite-only (FN): no infinity, no NaN. Encoding rounds to
nearest, ties to even, once, from the input's own precision (f32 or f64), and follows
the StableHLO reference interpreter for what no f6 value can hold:

* a finite value beyond the largest magnitude saturates to +-max (ml_dtypes and XLA's
  f4E2M1FN agree);
* NaN and +-inf become a zero of the same sign (ml_dtypes instead saturates infinities
  and maps NaN to a zero of either sign).

Computing an arithmetic op in f32 and encoding its result rounds exactly as computing in
f6 would: f32 has more than 2p+2 significand bits for f6's p = 3 or 4.
"""

from __future__ import annotations

import numpy as np
import jax.numpy as jnp
from jax import lax

from shlo2jax import value_types as T

# float dtype -> (unsigned bits dtype, significand bits, exponent bias, total bits)
_LAYOUT = {np.dtype(np.float32): (np.uint32, 23, 127, 32),
           np.dtype(np.float64): (np.uint64, 52, 1023, 64)}


def decode(bits, ft: T.Float6Type):
    """uint8 bit patterns -> their exact f32 values."""
    m, bias = ft.mantissa_bits, ft.bias
    b = lax.convert_element_type(bits, np.uint32)
    sign = b >> np.uint32(5)
    exp = (b >> np.uint32(m)) & np.uint32((1 << ft.exponent_bits) - 1)
    mant = b & np.uint32((1 << m) - 1)
    normal = lax.bitcast_convert_type(
        (sign << np.uint32(31)) | ((exp + np.uint32(127 - bias)) << np.uint32(23))
        | (mant << np.uint32(23 - m)), np.float32)
    # A zero exponent field: mant * 2^(emin - m), exactly; the sign also makes -0.
    sub = lax.convert_element_type(mant, np.float32) * np.float32(2.0 ** (ft.min_exponent - m))
    sub = jnp.where(sign != 0, -sub, sub)
    return jnp.where(exp == 0, sub, normal)


def encode(x, ft: T.Float6Type):
    """Float values -> uint8 bit patterns, rounded once to nearest even (see the module doc).

    f32 and f64 are encoded in their own precision; narrower floats widen to f32 exactly,
    integers and booleans convert to f64 first (exact below 2^53; larger ones saturate)."""
    dtype = np.dtype(x.dtype)
    if dtype not in _LAYOUT:
        x = lax.convert_element_type(x, np.float32 if T.is_float(dtype) else np.float64)
        dtype = np.dtype(x.dtype)
    utype, frac, ebias, width = _LAYOUT[dtype]
    m, emin = ft.mantissa_bits, ft.min_exponent
    bits = lax.bitcast_convert_type(x, utype)
    sign = lax.convert_element_type(bits >> utype(width - 1), np.uint8)
    top = 2.0 * ft.max_value  # anything beyond saturates: clamp early so nothing overflows
    a = jnp.where(jnp.isfinite(x), jnp.minimum(jnp.abs(x), dtype.type(top)), dtype.type(0))
    # The quantum of a's binade in f6: 2^(max(floor(log2 a), emin) - m), built from its bits.
    e = lax.convert_element_type(lax.bitcast_convert_type(a, utype) >> utype(frac), np.int32)
    e = jnp.maximum(e - np.int32(ebias), np.int32(emin))
    quantum = lax.bitcast_convert_type(
        lax.convert_element_type(e + np.int32(ebias - m), utype) << utype(frac), dtype)
    r = jnp.minimum(jnp.round(a / quantum) * quantum, dtype.type(ft.max_value))
    # r is now an f6 magnitude: its exponent and leading m fraction bits are the f6 fields.
    rbits = lax.bitcast_convert_type(r, utype)
    re = lax.convert_element_type(rbits >> utype(frac), np.int32) - np.int32(ebias)
    mant = lax.convert_element_type((rbits >> utype(frac - m)) & utype((1 << m) - 1), np.int32)
    normal = ((re + np.int32(ft.bias)) << np.int32(m)) | mant
    subnormal = lax.convert_element_type(r * dtype.type(2.0 ** (m - emin)), np.int32)
    field = lax.convert_element_type(jnp.where(re >= emin, normal, subnormal), np.uint8)
    return field | (sign << np.uint8(5))


def to_numpy(storage, ft: T.Float6Type) -> np.ndarray:
    """Concrete bit patterns -> an ml_dtypes f6 numpy array."""
    return np.asarray(np.asarray(storage, np.uint8) & np.uint8(0x3F)).view(ft.dtype)


def from_numpy(values: np.ndarray, ft: T.Float6Type) -> np.ndarray:
    """An ml_dtypes f6 numpy array -> its bit patterns as uint8."""
    return np.asarray(np.ascontiguousarray(values).view(np.uint8) & np.uint8(0x3F))
