"""Element-wise unary and binary arithmetic, logic and bit operations.

Most ops are one `jax.lax` call, which lowers back to the same StableHLO op, so
XLA's semantics carry over unchanged (integer division by zero, INT_MIN / -1,
shifts by the bit width or more, NaN-propagating min/max). Custom lowerings
exist only where lax lacks a case: booleans in add/multiply, integer power,
real/imag of real tensors.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from shlo2jax import types as T
from shlo2jax.registry import Unsupported, register_op


def reject_unsupported_types(op):
    """Shared `prepare`: refuse, at load time, element types no lax op can compute on."""
    for rtype in op.result_types:
        if getattr(rtype, "quant", None) is not None:
            raise Unsupported(f"quantized element type {rtype.element}")
        if getattr(rtype, "dtype", None) in T.XLA_UNSUPPORTED_DTYPES:
            raise Unsupported(f"element type {rtype.element} has no XLA support")
    return None


def _is_bool(x) -> bool:
    return x.dtype == np.bool_


def _names(mnemonic):
    return (f"stablehlo.{mnemonic}", f"mhlo.{mnemonic}")


def _register_simple(mnemonic, fn):
    """An op that is exactly one lax call on its operands."""
    def handler(ctx, op, *operands):
        return fn(*operands)
    handler.__name__ = mnemonic
    register_op(*_names(mnemonic), prepare=reject_unsupported_types)(handler)


# ---------------------------------------------------------------- unary ops

_UNARY = {
    "abs": lax.abs,
    "cbrt": lax.cbrt,
    "ceil": lax.ceil,
    "floor": lax.floor,
    "cosine": lax.cos,
    "sine": lax.sin,
    "tan": lax.tan,
    "tanh": lax.tanh,
    "exponential": lax.exp,
    "exponential_minus_one": lax.expm1,
    "log": lax.log,
    "log_plus_one": lax.log1p,
    "logistic": lax.logistic,
    "negate": lax.neg,
    "not": lax.bitwise_not,  # logical not on i1
    "popcnt": lax.population_count,
    "count_leading_zeros": lax.clz,
    "round_nearest_afz": lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
    "round_nearest_even": lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
    "rsqrt": lax.rsqrt,
    "sqrt": lax.sqrt,
    "sign": lax.sign,
    "is_finite": lax.is_finite,
}

for _mnemonic, _fn in _UNARY.items():
    _register_simple(_mnemonic, _fn)


@register_op(*_names("real"), prepare=reject_unsupported_types)
def real(ctx, op, x):
    # The spec also accepts real tensors: their real part is the value itself.
    return lax.real(x) if T.is_complex(x.dtype) else x


@register_op(*_names("imag"), prepare=reject_unsupported_types)
def imag(ctx, op, x):
    return lax.imag(x) if T.is_complex(x.dtype) else jnp.zeros_like(x)


# --------------------------------------------------------------- binary ops

_BINARY = {
    "subtract": lax.sub,
    "divide": lax.div,
    "remainder": lax.rem,
    "maximum": lax.max,
    "minimum": lax.min,
    "and": lax.bitwise_and,
    "or": lax.bitwise_or,
    "xor": lax.bitwise_xor,
    "shift_left": lax.shift_left,
    "shift_right_arithmetic": lax.shift_right_arithmetic,
    "shift_right_logical": lax.shift_right_logical,
    "atan2": lax.atan2,
    "complex": lax.complex,
}

for _mnemonic, _fn in _BINARY.items():
    _register_simple(_mnemonic, _fn)


@register_op(*_names("add"), prepare=reject_unsupported_types)
def add(ctx, op, x, y):
    # Boolean addition is logical OR in the spec (and XLA), which lax.add refuses.
    return lax.bitwise_or(x, y) if _is_bool(x) else lax.add(x, y)


@register_op(*_names("multiply"), prepare=reject_unsupported_types)
def multiply(ctx, op, x, y):
    return lax.bitwise_and(x, y) if _is_bool(x) else lax.mul(x, y)


@register_op(*_names("power"), prepare=reject_unsupported_types)
def power(ctx, op, x, y):
    return _integer_power(x, y) if T.is_integer(x.dtype) else lax.pow(x, y)


def _integer_power(x, y):
    """Integer power exactly as XLA computes it (lax.pow takes no integer base).

    XLA squares over the exponent's low 6 bits only (anything larger overflows
    except for bases 0 and +-1, whose powers those bits still decide), and a
    negative exponent -- reading the exponent as signed even for unsigned
    types -- gives 0 unless the base is 1 or all-ones (-1).
    """
    one, zero = lax.full_like(x, 1), lax.full_like(x, 0)
    acc, base, e = one, x, y
    for _ in range(6):
        acc = lax.select(lax.bitwise_and(e, one) == one, lax.mul(acc, base), acc)
        base = lax.mul(base, base)
        e = lax.shift_right_logical(e, one)
    signed_y = _as_signed(y)
    negative = signed_y < lax.full_like(signed_y, 0)
    unit = (x == one) | (x == lax.bitwise_not(zero))
    return lax.select(negative & ~unit, zero, acc)


_SIGNED_OF_WIDTH = {2: T.ELEMENT_DTYPES["i2"], 4: T.ELEMENT_DTYPES["i4"], 8: np.dtype(np.int8),
                    16: np.dtype(np.int16), 32: np.dtype(np.int32), 64: np.dtype(np.int64)}
_UNSIGNED_OF_WIDTH = {2: T.ELEMENT_DTYPES["ui2"], 4: T.ELEMENT_DTYPES["ui4"],
                      8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: np.dtype(np.uint32),
                      64: np.dtype(np.uint64)}


def _as_signed(x):
    """The same bits read as a signed integer of the same width."""
    if not T.is_unsigned(x.dtype):
        return x
    return lax.bitcast_convert_type(x, _SIGNED_OF_WIDTH[T.bit_width(x.dtype)])
