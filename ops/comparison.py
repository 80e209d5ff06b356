"""compare, select and clamp."""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import numpy as np
from jax import lax

from shlo2jax import value_types as T
from shlo2jax.ops._common import (SIGNED_OF_WIDTH, UNSIGNED_OF_WIDTH, bits_as, picked_key,
                                  picked_or, picking, planned, reject_unsupported_types,
                                  replayable)
from shlo2jax.ops._ranges import exact_range
from shlo2jax.registry import Unsupported, register_op

_DIRECTIONS = {"EQ": lax.eq, "NE": lax.ne, "LT": lax.lt, "LE": lax.le, "GT": lax.gt,
               "GE": lax.ge}
_E8M0 = T.ELEMENT_DTYPES["f8E8M0FNU"]
_COMPARE_TYPES = (None, "NOTYPE", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED")


class Compare(NamedTuple):
    """A compare op's prepared params (`op.params`)."""
    fn: Callable                 # the lax comparison of the direction
    compare_type: Optional[str]  # as given (None, NOTYPE, FLOAT, TOTALORDER, SIGNED, UNSIGNED)


def _prepare_compare(op):
    direction = op.attrs["comparison_direction"]
    compare_type = op.attrs.get("compare_type")
    if direction not in _DIRECTIONS:
        raise Unsupported(f"comparison_direction {direction}")
    if compare_type not in _COMPARE_TYPES:
        raise Unsupported(f"compare_type {compare_type}")
    return Compare(_DIRECTIONS[direction], compare_type)


@register_op("stablehlo.compare", "mhlo.compare", prepare=_prepare_compare)
@replayable(key=lambda op: op.params)
def compare(ctx, op, x, y):
    fn, compare_type = op.params
    dtype = x.dtype
    if T.is_complex(dtype):
        if compare_type == "TOTALORDER":  # XLA refuses this; order each part totally
            return _lexicographic(fn, _total_order_key(lax.real(x)), _total_order_key(lax.imag(x)),
                                  _total_order_key(lax.real(y)), _total_order_key(lax.imag(y)))
        if fn in (lax.eq, lax.ne):
            return fn(x, y)
        # XLA orders complex numbers lexicographically by (real, imaginary).
        return _lexicographic(fn, lax.real(x), lax.imag(x), lax.real(y), lax.imag(y))
    if T.is_float(dtype):
        if compare_type == "TOTALORDER":
            return fn(_total_order_key(x), _total_order_key(y))
        return fn(x, y)
    # Integers follow compare_type when it disagrees with the element type's signedness.
    # (XLA rejects the disagreeing pairs; reading the bits as told is the natural meaning.)
    if compare_type == "SIGNED" and T.is_unsigned(dtype):
        x, y = bits_as(x, SIGNED_OF_WIDTH), bits_as(y, SIGNED_OF_WIDTH)
    elif compare_type == "UNSIGNED" and T.is_integer(dtype) and not T.is_unsigned(dtype):
        x, y = bits_as(x, UNSIGNED_OF_WIDTH), bits_as(y, UNSIGNED_OF_WIDTH)
    return fn(x, y)


def _lexicographic(fn, xa, xb, ya, yb):
    if fn in (lax.eq, lax.ne):
        same = lax.eq(xa, ya) & lax.eq(xb, yb)
        return same if fn is lax.eq else ~same
    strict = lax.lt if fn in (lax.lt, lax.le) else lax.gt
    return strict(xa, ya) | (lax.eq(xa, ya) & fn(xb, yb))


def _total_order_key(x):
    """A signed integer ordered as IEEE totalOrder orders the floats (as XLA computes it).

    The float's bits read as a signed integer already order non-negative values;
    flipping all but the sign bit of negative ones reverses their order, so that
    -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN.
    """
    if x.dtype == _E8M0:
        # No sign bit: the bits as an unsigned integer are already ordered, NaN (0xFF) last.
        return lax.bitcast_convert_type(x, np.uint8)
    width = T.bit_width(x.dtype)
    bits = bits_as(x, SIGNED_OF_WIDTH)
    flipped = lax.bitwise_xor(bits, lax.full_like(bits, np.iinfo(np.int64).max >> (64 - width)))
    return lax.select(bits < lax.full_like(bits, 0), flipped, bits)


def _decided_select(op, producer, translator):
    """A `planned` view: a select whose predicate holds one value everywhere, for every
    argument value (NaN included: ops._ranges.exact_range, so computed from constants, through
    private functions' calls), is the operand it picks (`picking`), so the predicate's ops
    and the other operand, where nothing else reads them, are not staged. A torch variance's
    `n - ddof > 0 ? sum / (n - ddof) : nan` is one such, in every layer norm of searchless
    chess (`_var(x, ddof)`, called with ddof = 0). Lifted constants are the call's values:
    no view."""
    if translator.mode.lifted is not None:
        return op
    decided = exact_range(op.operands[0], producer, translator)
    if decided == (1.0, 1.0) or decided == (0.0, 0.0):
        return picking(op, 1 if decided[0] else 2)
    return op


@register_op("stablehlo.select", "mhlo.select", prepare=reject_unsupported_types)
@planned(_decided_select)
@replayable(key=picked_key)
def select(ctx, op, *operands):
    # lax.select takes a scalar predicate for any operand shape, as the spec does.
    return picked_or(lax.select, op, operands)


@register_op("stablehlo.clamp", "mhlo.clamp", prepare=reject_unsupported_types)
def clamp(ctx, op, lo, x, hi):
    # lax.clamp broadcasts scalar bounds, as the spec allows.
    return lax.clamp(lo, x, hi)
