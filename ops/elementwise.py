"""Element-wise unary and binary arithmetic, logic and bit operations.

Most ops are one `jax.lax` call, which lowers back to the same StableHLO op, so
XLA's semantics carry over unchanged (integer division by zero, INT_MIN / -1,
shifts by the bit width or more, NaN-propagating min/max). Custom lowerings
exist only where lax lacks a case: booleans in add/multiply, integer power,
abs/popcnt of sub-byte integers, complex cbrt, real/imag of real tensors,
logistic in narrow floats (where lax's expansion rounds differently from XLA),
sign/floor/ceil of subnormals (which XLA on CPU flushes), and a few ops computed
in f32 where XLA's own narrow computation is off by more than an ulp.
"""

from __future__ import annotations

import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from shlo2jax import value_types as T
from shlo2jax.gradients import finite_nonzero_constant
from shlo2jax.ops._ranges import finite_derivative, finite_factors, finite_quotient
from shlo2jax.ops._softmax import normalization_shift
from shlo2jax.ops._common import (SIGNED_OF_WIDTH, UNSIGNED_OF_WIDTH, bits_as,
                                  constant_elements, picked_key, picked_or, picking, planned,
                                  reject_unsupported_types, replayable)
from shlo2jax.registry import Unsupported, register_op

_BF16 = T.ELEMENT_DTYPES["bf16"]


def _is_bool(x) -> bool:
    return x.dtype == np.bool_


def _register_simple(names, fn):
    """Ops that are exactly one lax call on their operands."""
    def handler(ctx, op, *operands):
        return fn(*operands)
    handler.__name__ = handler.__qualname__ = names[0].split(".", 1)[1]
    register_op(*names, prepare=reject_unsupported_types)(replayable()(handler))


# ---------------------------------------------------------------- unary ops

_UNARY = {
    ("stablehlo.cosine", "mhlo.cosine"): lax.cos,
    ("stablehlo.sine", "mhlo.sine"): lax.sin,
    ("stablehlo.tanh", "mhlo.tanh"): lax.tanh,
    ("stablehlo.negate", "mhlo.negate"): lax.neg,
    ("stablehlo.not", "mhlo.not"): lax.bitwise_not,  # logical not on i1
    ("stablehlo.count_leading_zeros", "mhlo.count_leading_zeros"): lax.clz,
    ("stablehlo.round_nearest_afz", "mhlo.round_nearest_afz"):
        lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
    ("stablehlo.round_nearest_even", "mhlo.round_nearest_even"):
        lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
    ("stablehlo.is_finite", "mhlo.is_finite"): lax.is_finite,
}

for _names, _fn in _UNARY.items():
    _register_simple(_names, _fn)


def _in_f32(fn, x):
    """fn computed in f32 and rounded once to x's type."""
    return lax.convert_element_type(fn(lax.convert_element_type(x, np.float32)), x.dtype)


def _below_cut(x, result):
    """XLA's complex sqrt ignores the sign of a zero imaginary part, giving the upper
    side's value on the negative real axis; the reference interpreter (C99: f(conj z) =
    conj f(z)) takes the lower side for -0: conjugate there."""
    im = lax.imag(x)
    below = (im == 0) & jnp.signbit(im)
    return lax.select(below, lax.conj(result), result)


@register_op("stablehlo.sqrt", "mhlo.sqrt", prepare=reject_unsupported_types)
def sqrt(ctx, op, x):
    # XLA computes 8/4-bit floats in f16, whose rounded sqrt can land on a tie of the
    # narrow type (sqrt(3.875) in f8E3M4); f32 has enough bits to round correctly.
    math = ctx.translator.math
    if T.is_float(x.dtype) and T.bit_width(x.dtype) < 16:
        return _in_f32(math.sqrt, x)
    if T.is_complex(x.dtype):
        return _below_cut(x, math.sqrt(x))
    return math.sqrt(x)


@register_op("stablehlo.exponential_minus_one", "mhlo.exponential_minus_one",
             prepare=reject_unsupported_types)
def exponential_minus_one(ctx, op, x):
    # XLA's f16 expm1 is off by a few ulp; the f32 one rounds to within one f16 ulp.
    expm1 = ctx.translator.math.expm1
    return _in_f32(expm1, x) if x.dtype == np.float16 else expm1(x)


_SUBNORMAL_CHECKED = frozenset(np.dtype(t) for t in (np.float16, ml_dtypes.bfloat16, np.float32,
                                                      np.float64))


def _subnormal_signs(x):
    """(negative subnormal, positive subnormal) masks, read from the bits: XLA on CPU flushes
    subnormal inputs to zero, in comparisons too, so floor(-tiny) would come out -0, not -1."""
    width = T.bit_width(x.dtype)
    mantissa = (1 << ml_dtypes.finfo(x.dtype).nmant) - 1
    exponent = ((1 << (width - 1)) - 1) ^ mantissa
    bits = bits_as(x, UNSIGNED_OF_WIDTH)
    const = lambda v: np.array(v, bits.dtype)
    subnormal = ((bits & const(exponent)) == const(0)) & ((bits & const(mantissa)) != const(0))
    negative = (bits >> const(width - 1)) == const(1)
    return subnormal & negative, subnormal & ~negative


def _subnormal_fixed(x, result, negative_value, positive_value):
    """`result` with the spec's value where x is a (negative / positive) subnormal that XLA
    on CPU flushed to zero."""
    if x.dtype not in _SUBNORMAL_CHECKED:
        return result
    negative, positive = _subnormal_signs(x)
    result = lax.select(negative, lax.full_like(x, negative_value), result)
    return lax.select(positive, lax.full_like(x, positive_value), result)


@register_op("stablehlo.floor", "mhlo.floor", prepare=reject_unsupported_types)
def floor(ctx, op, x):
    return _subnormal_fixed(x, lax.floor(x), -1, 0)


@register_op("stablehlo.ceil", "mhlo.ceil", prepare=reject_unsupported_types)
def ceil(ctx, op, x):
    return _subnormal_fixed(x, lax.ceil(x), -0.0, 1)


@register_op("stablehlo.sign", "mhlo.sign", prepare=reject_unsupported_types)
def sign(ctx, op, x):
    return _subnormal_fixed(x, lax.sign(x), -1, 1)


@register_op("stablehlo.abs", "mhlo.abs", prepare=reject_unsupported_types)
@replayable()
def abs_(ctx, op, x):
    if T.is_integer(x.dtype) and T.bit_width(x.dtype) < 8:
        # lax.abs refuses sub-byte integers; abs(INT_MIN) wraps to INT_MIN either way.
        return lax.convert_element_type(lax.abs(lax.convert_element_type(x, np.int8)), x.dtype)
    return lax.abs(x)


@register_op("stablehlo.popcnt", "mhlo.popcnt", prepare=reject_unsupported_types)
def popcnt(ctx, op, x):
    if T.bit_width(x.dtype) < 8 and not T.is_unsigned(x.dtype):
        # XLA counts the bits of sub-byte integers after sign-extending them to a byte.
        return bits_as(lax.population_count(bits_as(x, UNSIGNED_OF_WIDTH)), SIGNED_OF_WIDTH)
    return lax.population_count(x)


@register_op("stablehlo.cbrt", "mhlo.cbrt", prepare=reject_unsupported_types)
def cbrt(ctx, op, x):
    if not T.is_complex(x.dtype):
        return ctx.translator.math.cbrt(x)
    # The principal cube root (XLA has none for complex): |x|^(1/3) at a third of the angle.
    magnitude = lax.cbrt(lax.abs(x))
    angle = lax.atan2(lax.imag(x), lax.real(x)) / 3
    sin = lax.sin(angle)
    # A zero angle keeps its (signed) zero imaginary part even for an infinite magnitude.
    imag = lax.select(sin == lax.full_like(sin, 0), sin, magnitude * sin)
    return lax.complex(magnitude * lax.cos(angle), imag)


@register_op("stablehlo.logistic", "mhlo.logistic", prepare=reject_unsupported_types)
def logistic(ctx, op, x):
    # lax expands logistic as 1 / (1 + exp(-x)), which in bf16 and 8/4-bit floats
    # rounds several times and overflows exp; XLA widens those (bf16 to f32, the
    # narrower ones to f16) and rounds once at the end. XLA's f16 logistic is off by a
    # few ulp near 0.5, so f16 is widened to f32 too.
    if T.is_float(x.dtype) and (T.bit_width(x.dtype) < 16 or x.dtype == _BF16
                                or x.dtype == np.float16):
        wide = np.float16 if T.bit_width(x.dtype) < 16 else np.float32
        return lax.convert_element_type(lax.logistic(lax.convert_element_type(x, wide)), x.dtype)
    return lax.logistic(x)


@register_op("stablehlo.real", "mhlo.real", prepare=reject_unsupported_types)
def real(ctx, op, x):
    # The spec also accepts real tensors: their real part is the value itself.
    return lax.real(x) if T.is_complex(x.dtype) else x


@register_op("stablehlo.imag", "mhlo.imag", prepare=reject_unsupported_types)
def imag(ctx, op, x):
    return lax.imag(x) if T.is_complex(x.dtype) else jnp.zeros_like(x)


# ------------------------------------------- ops whose local derivative can be infinite
# Their values are lax's; their derivatives follow the program's gradient mode
# (shlo2jax.options.LoadOptions.gradients): strong zeros by default.

def _strong_zero_mode(translator, op) -> bool:
    """Whether the op's derivative takes strong zeros (the mode's, a real floating type)."""
    return translator.options.gradients != "lax" and T.is_float(op.result_types[0].dtype)


def _by_finite_derivative(op, producer, translator):
    """A `planned` view: params True where the op's local derivative (and its own) is finite
    everywhere, from the ranges of its operand (ops._ranges): lax's rule then gives the
    strong-zero values, up to the sign of a zero, with no zero test."""
    if _strong_zero_mode(translator, op) and finite_derivative(op, producer, translator):
        return op.replaced(params=True)
    return op


def _finite_key(op):
    return op.params if op.params is True or type(op.params) is tuple else False


@register_op("stablehlo.exponential", "mhlo.exponential", prepare=reject_unsupported_types)
@planned(_by_finite_derivative)
@replayable(key=_finite_key)
def exponential(ctx, op, x):
    return lax.exp(x) if op.params is True else ctx.translator.math.exp(x)


@register_op("stablehlo.log", "mhlo.log", prepare=reject_unsupported_types)
@planned(_by_finite_derivative)
@replayable(key=_finite_key)
def log(ctx, op, x):
    return lax.log(x) if op.params is True else ctx.translator.math.log(x)


@register_op("stablehlo.log_plus_one", "mhlo.log_plus_one", prepare=reject_unsupported_types)
@replayable()
def log_plus_one(ctx, op, x):
    return ctx.translator.math.log1p(x)


@register_op("stablehlo.rsqrt", "mhlo.rsqrt", prepare=reject_unsupported_types)
@planned(_by_finite_derivative)
@replayable(key=_finite_key)
def rsqrt(ctx, op, x):
    return lax.rsqrt(x) if op.params is True else ctx.translator.math.rsqrt(x)


@register_op("stablehlo.tan", "mhlo.tan", prepare=reject_unsupported_types)
@replayable()
def tan(ctx, op, x):
    return ctx.translator.math.tan(x)


def _safe_divisor(x, y):
    """(y with the divisions XLA defines specially replaced by 1, y == 0): x / 0 and
    INT_MIN / -1. XLA's CPU code guards them, but its compile-time constant folding does not:
    a program whose divisor folds to 0 (`rem(x - x, x - x)`) kills the process with SIGFPE
    while XLA compiles it, the translation's as much as the module's (fuzz seeds 2544,
    3260, 8914)."""
    zero = lax.full_like(y, 0)
    by_zero = y == zero
    special = by_zero
    if not T.is_unsigned(y.dtype):
        special = lax.bitwise_or(by_zero, lax.bitwise_and(
            x == lax.full_like(x, ml_dtypes.iinfo(x.dtype).min), y == lax.full_like(y, -1)))
    return lax.select(special, lax.full_like(y, 1), y), by_zero


def _by_finite_factors(positions, reciprocal=False, ranges=None):
    """A `planned` view: the op with params True where an operand at one of `positions` is
    a module constant (through broadcasts, reshapes, transposes, converts) finite and
    nonzero everywhere (its reciprocal too, for a divisor): its local derivative is finite,
    so the product (quotient) takes lax's derivative, the strong-zero one up to the sign
    of a zero, and its reverse mode needs no zero tests. Else, in the strong-zero mode,
    `ranges(op, producer, translator)` (ops._ranges: which local derivatives are finite
    everywhere, from the module) decides per side: params (first side's finite, second's),
    True where both are."""
    def view(op, producer, translator):
        for i in positions:
            value = constant_elements(op.operands[i], producer, translator)
            if value is not None and finite_nonzero_constant(value, reciprocal):
                return op.replaced(params=True)
        if not _strong_zero_mode(translator, op):
            return op
        sides = ranges(op, producer, translator)
        if all(sides):
            return op.replaced(params=True if not reciprocal else sides)
        return op.replaced(params=sides) if any(sides) else op
    return view


@register_op("stablehlo.divide", "mhlo.divide", prepare=reject_unsupported_types)
@planned(_by_finite_factors((1,), reciprocal=True, ranges=finite_quotient))
@replayable(key=_finite_key)
def divide(ctx, op, x, y):
    if op.params is True:  # (a real floating constant divisor)
        return lax.div(x, y)
    if type(op.params) is tuple:  # (some of its local derivatives are finite everywhere)
        return ctx.translator.math.div_finite(x, y, op.params)
    if T.is_integer(x.dtype):
        # XLA: x / 0 is -1 (all bits set), INT_MIN / -1 is INT_MIN (x / 1 here).
        safe, by_zero = _safe_divisor(x, y)
        return lax.select(by_zero, lax.full_like(x, -1 if not T.is_unsigned(x.dtype)
                                                else ml_dtypes.iinfo(x.dtype).max), lax.div(x, safe))
    return ctx.translator.math.div(x, y)


def _exactly_scaled_when_both_subnormal(y, x):
    """(y, x), where both are subnormal or zero replaced by their values times one power of
    two (the same angle): each one's bits read as an integer magnitude, with its sign. XLA on
    CPU flushes subnormals in arithmetic, so atan2 of two subnormals is NaN there (it tests
    them as nonzero, then divides flushed zeros: fuzz seeds 277, 526 and 14 more of 10,000);
    integers are not flushed."""
    dtype = np.dtype(y.dtype)
    bits_type = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dtype.itemsize]
    sign = bits_type(1) << bits_type(8 * dtype.itemsize - 1)

    def scaled(v):
        bits = lax.bitcast_convert_type(lax.stop_gradient(v), bits_type)
        magnitude = lax.convert_element_type(
            lax.bitwise_and(bits, lax.full_like(bits, ~sign)), dtype)
        negative = lax.bitwise_and(bits, lax.full_like(bits, sign)) != lax.full_like(bits, 0)
        return lax.select(negative, lax.neg(magnitude), magnitude)

    tiny = lax.full_like(y, ml_dtypes.finfo(dtype).tiny)
    both = lax.bitwise_and(lax.abs(y) < tiny, lax.abs(x) < tiny)
    return lax.select(both, scaled(y), y), lax.select(both, scaled(x), x)


@register_op("stablehlo.atan2", "mhlo.atan2", prepare=reject_unsupported_types)
def atan2(ctx, op, x, y):
    # (8-bit and smaller floats: XLA computes them in a wider type, where they are normal)
    if T.is_float(x.dtype) and np.dtype(x.dtype).itemsize >= 2:
        x, y = _exactly_scaled_when_both_subnormal(x, y)
    return ctx.translator.math.atan2(x, y)


# --------------------------------------------------------------- binary ops

_BINARY = {
    ("stablehlo.and", "mhlo.and"): lax.bitwise_and,
    ("stablehlo.or", "mhlo.or"): lax.bitwise_or,
    ("stablehlo.xor", "mhlo.xor"): lax.bitwise_xor,
    ("stablehlo.shift_left", "mhlo.shift_left"): lax.shift_left,
    ("stablehlo.shift_right_arithmetic", "mhlo.shift_right_arithmetic"):
        lax.shift_right_arithmetic,
    ("stablehlo.shift_right_logical", "mhlo.shift_right_logical"): lax.shift_right_logical,
    ("stablehlo.complex", "mhlo.complex"): lax.complex,
}

for _names, _fn in _BINARY.items():
    _register_simple(_names, _fn)


def _identity_of_bound(bound):
    """A `planned` view: maximum (bound -1: the type's lowest value) or minimum (+1: its
    highest) where one operand is a module constant (through broadcasts, reshapes,
    transposes, converts) that is that value everywhere: the result is the other operand
    bit for bit (NaN propagates, -0 stays), so the op is that operand (`picking`). Its
    derivative is then 1, where lax.max's splits a tie in halves: a
    softmax exported without its stop_gradient on the row max computes
    max(-inf, reduce_max(x)), and lax's rule made two compares, two selects and a divide
    per softmax in the backward pass (14 fused instructions each on searchless chess)."""
    def view(op, producer, translator):
        dtype = getattr(op.result_types[0], "dtype", None)
        if dtype is None or getattr(op.result_types[0], "quant", None) is not None:
            return op
        if T.is_float(dtype) and not T.is_complex(dtype):
            extreme = np.inf * bound
        elif T.is_integer(dtype) and dtype != np.bool_:
            info = ml_dtypes.iinfo(dtype)
            extreme = info.min if bound < 0 else info.max
        else:
            return op
        for i in (0, 1):
            value = constant_elements(op.operands[i], producer, translator)
            if value is not None and value.dtype == dtype and value.size and bool(
                    np.all(value == extreme)):
                return picking(op, 1 - i)
        return op
    return view


@register_op("stablehlo.maximum", "mhlo.maximum", prepare=reject_unsupported_types)
@planned(_identity_of_bound(-1))
@replayable(key=picked_key)
def maximum(ctx, op, *operands):
    return picked_or(lax.max, op, operands)


@register_op("stablehlo.minimum", "mhlo.minimum", prepare=reject_unsupported_types)
@planned(_identity_of_bound(+1))
@replayable(key=picked_key)
def minimum(ctx, op, *operands):
    return picked_or(lax.min, op, operands)


# `params` of a subtract that is a softmax's shift by its maximum (ops._softmax)
_SHIFT = "softmax shift"


def _by_normalization_shift(op, producer, translator):
    """A `planned` view: a real floating x - spread(max(x)) whose result is normalized
    as a softmax or log_softmax: its derivative through the maximum is stopped, as the
    producer's softmax has it (ops._softmax). The value is the same."""
    if not normalization_shift(op, producer, translator):
        return op
    dtype = getattr(op.result_types[0], "dtype", None)
    if (dtype is not None and getattr(op.result_types[0], "quant", None) is None
            and T.is_float(dtype) and not T.is_complex(dtype)):
        return op.replaced(params=_SHIFT)
    return op


@register_op("stablehlo.subtract", "mhlo.subtract", prepare=reject_unsupported_types)
@planned(_by_normalization_shift)
@replayable(key=lambda op: op.params is _SHIFT)
def subtract(ctx, op, x, y):
    return lax.sub(x, lax.stop_gradient(y) if op.params is _SHIFT else y)


@register_op("stablehlo.add", "mhlo.add", prepare=reject_unsupported_types)
@replayable()
def add(ctx, op, x, y):
    # Boolean addition is logical OR in the spec (and XLA), which lax.add refuses.
    return lax.bitwise_or(x, y) if _is_bool(x) else lax.add(x, y)


@register_op("stablehlo.multiply", "mhlo.multiply", prepare=reject_unsupported_types)
@planned(_by_finite_factors((0, 1), ranges=finite_factors))
@replayable(key=lambda op: (_finite_key(op), op.operands[0] == op.operands[1]))
def multiply(ctx, op, x, y):
    # (a square, one SSA value twice, reaches `math.mul` as one object: its own rule, so
    # its replay key differs from a product of two values of the same types)
    if op.params is True:  # (a finite factor: a real floating constant, or both)
        return lax.mul(x, y)
    if type(op.params) is tuple:  # (one factor finite everywhere)
        return ctx.translator.math.mul_finite(x, y, op.params)
    return lax.bitwise_and(x, y) if _is_bool(x) else ctx.translator.math.mul(x, y)


def _prepare_remainder(op):
    reject_unsupported_types(op)
    if T.is_complex(op.result_types[0].dtype):
        # The spec lists complex, but neither the reference interpreter nor XLA implements it.
        raise Unsupported("remainder of complex numbers has no implemented semantics")
    return None


@register_op("stablehlo.remainder", "mhlo.remainder", prepare=_prepare_remainder)
def remainder(ctx, op, x, y):
    if T.is_integer(x.dtype):
        # XLA: x % 0 is x, INT_MIN % -1 is 0 (x % 1 here); see _safe_divisor.
        safe, by_zero = _safe_divisor(x, y)
        return lax.select(by_zero, x, lax.rem(x, safe))
    return lax.rem(x, y)


@register_op("stablehlo.power", "mhlo.power", prepare=reject_unsupported_types)
def power(ctx, op, x, y):
    return _integer_power(x, y) if T.is_integer(x.dtype) else ctx.translator.math.pow(x, y)


def _integer_power(x, y):
    """Integer power exactly as XLA computes it (lax.pow takes no integer base).

    XLA squares over the exponent's low 6 bits only (anything larger overflows
    except for bases 0 and +-1, whose powers those bits still decide), and a
    negative exponent gives 0 unless the base is 1 or all-ones (-1). XLA reads
    the exponent as signed even for unsigned types, after widening sub-byte
    types to 8 bits (so ui2/ui4 exponents are never negative).
    """
    one, zero = lax.full_like(x, 1), lax.full_like(x, 0)
    acc, base, e = one, x, y
    for _ in range(6):
        acc = lax.select(lax.bitwise_and(e, one) == one, lax.mul(acc, base), acc)
        base = lax.mul(base, base)
        e = lax.shift_right_logical(e, one)
    if T.is_unsigned(y.dtype) and T.bit_width(y.dtype) < 8:
        negative = lax.full_like(y, False, dtype=np.bool_)
    else:
        signed_y = bits_as(y, SIGNED_OF_WIDTH)
        negative = signed_y < lax.full_like(signed_y, 0)
    unit = (x == one) | (x == lax.bitwise_not(zero))
    return lax.select(negative & ~unit, zero, acc)
