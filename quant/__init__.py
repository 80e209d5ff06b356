"""Quantized element types and values (`!quant.uniform`).

JAX has no quantized dtype. A quantized tensor travels as a `QArray`: its storage
integers (the only array leaf) plus its `QuantizedType` (static pytree aux data), so it
flows through `jax.jit`, function boundaries and `lax` control flow like any pytree.

    x = QArray(storage_ints, qtype)      # or quantize(floats, qtype)
    x.dequantize()                       # (storage - zero_point) * scale, in the expressed type

Semantics follow the StableHLO spec: `quantize` divides by the scale, adds the zero point,
clamps to [storage_min, storage_max] and rounds to nearest even, all in the expressed type;
`dequantize` subtracts the zero point from the storage integers, converts and scales.

f6 values (f6E2M3FN, f6E3M2FN: XLA has no such type) travel the same way, as an
`F6Array` (a QArray whose `qtype` is a `shlo2jax.value_types.Float6Type`): uint8 bit patterns,
"dequantized" exactly to f32 and "quantized" back by rounding to nearest even once
(`shlo2jax.quant.float6`). `np.asarray(f6_array)` is an ml_dtypes float6 numpy array;
`F6Array.from_numpy(a)` wraps one as a function argument.

Gradients: storage integers carry no gradient, so `uniform_dequantize(uniform_quantize(x))`
has a zero derivative. `straight_through(function)` gives a version of a loaded function
in which every quantize passes its input's gradient through unchanged (the
straight-through estimator) — an explicit opt-in, never the default.

The quantized element type itself (`QuantizedType`, its parsing and the spec's constraints)
is one of the types of `shlo2jax.value_types`; this module re-exports it.
"""

from __future__ import annotations

import jax
import numpy as np
from jax import lax

from shlo2jax import compat
from shlo2jax import value_types as T
from shlo2jax.compat import load_quant_dialect
from shlo2jax.translate import Translator
from shlo2jax.value_types import (QuantizedType, UnsupportedTypeError, check_tensor_type,
                            parse_quantized_element)

__all__ = ["QuantizedType", "QArray", "F6Array", "parse_quantized_element", "quantize",
           "dequantize", "wrap_storage",
           "check_tensor_type", "straight_through", "straight_through_active",
           "load_quant_dialect", "check_operand", "coerce_argument"]

# --------------------------------------------------------------------------- values

@jax.tree_util.register_pytree_node_class
class QArray:
    """A quantized tensor: storage integers + static quantization parameters.

    `ste` is internal: under `straight_through`, the float value a quantize started from,
    through which gradients pass."""
    __slots__ = ("storage", "qtype", "ste")

    def __init__(self, storage, qtype: QuantizedType, ste=None):
        self.storage, self.qtype, self.ste = storage, qtype, ste

    @property
    def shape(self):
        return tuple(self.storage.shape)

    @property
    def ndim(self):
        return len(self.storage.shape)

    @property
    def dtype(self):
        """The storage dtype (as `TensorType.dtype` of a quantized type)."""
        return np.dtype(self.storage.dtype)

    @property
    def expressed_dtype(self):
        return self.qtype.expressed_dtype

    def dequantize(self):
        return dequantize(self)

    def tree_flatten(self):
        return (self.storage, self.ste), self.qtype

    @classmethod
    def tree_unflatten(cls, qtype, children):
        return cls(children[0], qtype, children[1])

    def __repr__(self):
        return f"QArray({self.storage!r}, {self.qtype})"


@jax.tree_util.register_pytree_node_class
class F6Array(QArray):
    """An f6 tensor: uint8 bit patterns + its `Float6Type` (`qtype`).

    `dtype` is the ml_dtypes float6 type; `np.asarray(x)` gives an ml_dtypes float6 numpy
    array (concrete values only); `dequantize()` the exact f32 values."""
    __slots__ = ()

    @classmethod
    def from_numpy(cls, values) -> "F6Array":
        """Wraps an ml_dtypes float6 numpy array (a function argument of an f6 type)."""
        values = np.asarray(values)
        ft = T.FLOAT6_TYPES.get(values.dtype)
        if ft is None:
            raise TypeError(f"F6Array.from_numpy needs a float6 numpy array, got {values.dtype}")
        from shlo2jax.quant import float6
        return cls(float6.from_numpy(values, ft), ft)

    @property
    def dtype(self):
        return self.qtype.dtype

    def __array__(self, dtype=None, copy=None):
        from shlo2jax.quant import float6
        out = float6.to_numpy(self.storage, self.qtype)
        return out if dtype is None else out.astype(dtype)

    def __repr__(self):
        try:
            return f"F6Array({np.asarray(self)!r})"
        except Exception:  # traced: no values to show
            return f"F6Array({self.storage!r}, {self.qtype})"


def wrap_storage(storage, qtype) -> QArray:
    """Storage integers (bit patterns for f6) as the value of their type."""
    if type(qtype) is T.Float6Type:
        if isinstance(storage, np.ndarray) and storage.dtype == qtype.dtype:
            storage = storage.view(np.uint8)  # a decoded f6 constant
        return F6Array(storage, qtype)
    return QArray(storage, qtype)


def _wide_int(dtype):
    return np.int64 if T.bit_width(dtype) > 16 else np.int32


def dequantize(x: QArray):
    """The spec's `dequantize`: (storage - zero_point) * scale in the expressed type."""
    q = x.qtype
    if type(q) is T.Float6Type:
        from shlo2jax.quant import float6
        return float6.decode(x.storage, q)
    scales, zps = q.params(x.ndim)
    wide = _wide_int(q.storage_dtype)
    centered = lax.sub(lax.convert_element_type(x.storage, wide), zps.astype(wide))
    out = lax.mul(lax.convert_element_type(centered, q.expressed_dtype), scales)
    if x.ste is not None:
        out = _pass_gradient(out, x.ste)
    return out


def quantize(x, qtype: QuantizedType, *, straight_through_grad: bool = False) -> QArray:
    """The spec's `quantize` of an expressed-type array: scale, shift, clamp, round half to even.

    With `straight_through_grad`, dequantizing the result passes gradients to `x` unchanged.
    For an f6 `qtype`: any real values, rounded to nearest even once (shlo2jax.quant.float6)."""
    if type(qtype) is T.Float6Type:
        from shlo2jax.quant import float6
        return F6Array(float6.encode(x, qtype), qtype)
    if np.dtype(x.dtype) != qtype.expressed_dtype:
        raise TypeError(f"quantize to {qtype} needs {qtype.expressed_dtype} values, got {x.dtype}")
    et = qtype.expressed_dtype
    scales, zps = qtype.params(x.ndim)
    y = lax.add(lax.div(x, scales), zps.astype(et))
    lo = np.asarray(qtype.storage_min, et)
    hi = np.asarray(qtype.storage_max, et)
    y = lax.round(lax.max(lax.min(y, hi), lo), lax.RoundingMethod.TO_NEAREST_EVEN)
    wide = _wide_int(qtype.storage_dtype)
    # The storage bounds in a narrow expressed type (bf16 of 32767 is 32768) may round
    # outward; clamp again exactly in integers before narrowing.
    ints = lax.convert_element_type(y, wide)
    ints = lax.clamp(np.asarray(qtype.storage_min, wide), ints, np.asarray(qtype.storage_max, wide))
    ste = x if (straight_through_grad or _STE.active) else None
    return QArray(lax.convert_element_type(ints, qtype.storage_dtype), qtype, ste)


@jax.custom_jvp
def _pass_gradient(value, source):
    return value


@_pass_gradient.defjvp
def _pass_gradient_jvp(primals, tangents):
    value, _ = primals
    return value, tangents[1]


# --------------------------------------------------------------------------- arguments

def _same_shape(shape, expected) -> bool:
    return len(shape) == len(expected) and all(
        d is None or d == s for d, s in zip(expected, shape))


def check_quantized_argument(where: str, arg, expected) -> None:
    """The argument check's hook (`where`: "argument x of @main"): a QArray of the type, or its
    raw storage integers."""
    if type(expected.quant) is T.Float6Type:
        _check_f6_argument(where, arg, expected)
        return
    try:
        check_tensor_type(expected.shape, expected.quant, f"{where}: ")
    except UnsupportedTypeError as e:
        raise TypeError(str(e)) from None
    if isinstance(arg, QArray):
        if arg.qtype != expected.quant:
            raise TypeError(f"{where} is quantized as {arg.qtype}, expected {expected}")
        shape = arg.shape
    else:
        shape, dtype = getattr(arg, "shape", None), getattr(arg, "dtype", None)
        if shape is None or dtype is None or isinstance(arg, (bool, int, float, complex)):
            raise TypeError(f"{where} must be a shlo2jax.quant.QArray or an array of its storage "
                            f"integers ({expected.dtype}) for {expected}, got {type(arg).__name__}")
        if np.dtype(dtype) != expected.dtype:
            raise TypeError(f"{where} has dtype {np.dtype(dtype)}; a quantized argument of type "
                            f"{expected} takes a QArray or {expected.dtype} storage integers")
    if not _same_shape(tuple(shape), expected.shape):
        raise TypeError(f"{where} has shape {tuple(shape)}, expected {expected}")


def _check_f6_argument(where, arg, expected) -> None:
    if isinstance(arg, F6Array):
        if arg.qtype != expected.quant:
            raise TypeError(f"{where} is an F6Array of {arg.qtype}, expected {expected}")
        shape = arg.shape
    else:
        shape, dtype = getattr(arg, "shape", None), getattr(arg, "dtype", None)
        if shape is None or dtype is None or np.dtype(dtype) != expected.dtype:
            got = np.dtype(dtype) if dtype is not None else type(arg).__name__
            raise TypeError(f"{where} must be a shlo2jax.quant.F6Array for {expected}, got {got} "
                            "(wrap an ml_dtypes float6 numpy array with F6Array.from_numpy)")
    if not _same_shape(tuple(shape), expected.shape):
        raise TypeError(f"{where} has shape {tuple(shape)}, expected {expected}")


def coerce_argument(arg, ttype):
    """A function argument as the translation needs it: raw storage integers become a QArray,
    an ml_dtypes float6 numpy array an F6Array (only outside jit: jax cannot hold f6)."""
    if isinstance(ttype, T.TensorType) and ttype.quant is not None and not isinstance(arg, QArray):
        if type(ttype.quant) is T.Float6Type:
            return F6Array.from_numpy(arg)
        return QArray(arg, ttype.quant)
    return arg


def taking_storage_integers(input_types, body):
    """`body` (of arguments of `input_types`), taking quantized arguments as their raw storage
    integers too."""
    if not any(isinstance(t, T.TensorType) and t.quant is not None for t in input_types):
        return body

    def coerced(*args):  # raw storage integers become quantized values
        return body(*(coerce_argument(a, t) for a, t in zip(args, input_types)))
    return coerced


def coerced_f6(input_types, args) -> tuple:
    """ml_dtypes float6 arguments as F6Arrays (jax cannot hold f6); the others as given."""
    if not any(isinstance(t, T.TensorType) and type(t.quant) is T.Float6Type
               for t in input_types):
        return args
    return tuple(coerce_argument(a, t) if isinstance(t, T.TensorType) else a
                 for a, t in zip(args, input_types))


def check_operand(value, kind: str):
    """For the conformance runner: a recorded check operand as plain values.

    `eq` compares storage integers (bitwise); `almost_eq` / `close` compare the
    dequantized values. Non-quantized values pass through; f6 values become ml_dtypes
    float6 arrays."""
    if isinstance(value, F6Array):
        return np.asarray(value)
    if not isinstance(value, QArray):
        return value
    if kind == "eq":
        return np.asarray(value.storage)
    return np.asarray(dequantize(value))


# --------------------------------------------------------------------------- straight-through

class _SteState:
    active = False


_STE = _SteState()


def straight_through_active() -> bool:
    """Whether the program being traced now runs under `straight_through`."""
    return _STE.active


def straight_through(function):
    """`function` (a loaded `shlo2jax.Function`) with straight-through gradients.

    Every quantize in the program (uniform_quantize and the requantization after each
    quantized op) then passes the gradient of its float input through unchanged, so
    `jax.grad` of a quantize -> ... -> dequantize program is the float program's gradient.
    Data movement of quantized values (reshape, slice, ...) is done by dequantize ->
    op -> quantize in this mode, which is exact. Region-carrying ops (reduce, while, ...)
    on quantized values do not carry the gradient.
    """
    # its own callees, traced in this mode
    translator = Translator(function.program.module, function.program.options)
    body = translator.function_body(function.definition)
    types = function.input_types

    def traced(*args):
        previous, _STE.active = _STE.active, True
        try:
            return body(*(coerce_argument(a, t) for a, t in zip(args, types)))
        finally:
            _STE.active = previous
    jitted = jax.jit(traced)

    def call(*args):
        function.check_arguments(args)
        with compat.enable_x64():
            outs = jitted(*args)
        return outs[0] if len(outs) == 1 else tuple(outs)
    call.__name__ = f"{function.name}_straight_through"
    return call
