"""Dynamic-shape ops, and the `shape_assertion` custom call of `jax.export` artifacts.

Functions with `?` dimensions are specialised to concrete shapes before they are
translated (shlo2jax/dynamic.py), and `stablehlo-canonicalize-dynamism` turns
most dynamic ops into their static forms. The ones left over (their shape
operands are computed, not constant) have static result types by then, so each
reduces to its static lax counterpart: the result type gives the shape, and a
shape operand whose value is known while tracing is checked against it.

`prepare` functions here accept `?` result types: the original, unrefined
module is decoded at load time too, and only its refined copies are translated.

Registered elsewhere: get_dimension_size, dynamic_reshape, dynamic_broadcast_in_dim,
dynamic_pad (ops/shape.py); real_dynamic_slice, dynamic_gather (ops/indexing.py).
"""

from __future__ import annotations

import types

import jax
import numpy as np
from jax import lax

from shlo2jax.errors import ShapeAssertionError
from shlo2jax.registry import Unsupported, register_custom_call, register_op


def _ints(value) -> tuple:
    return tuple(int(v) for v in np.asarray(value).reshape(-1))


def _known(value):
    """The value as a numpy array when it is known while tracing, else None."""
    if isinstance(value, (np.ndarray, np.generic)):
        return np.asarray(value)
    if isinstance(value, jax.core.Tracer):
        return None
    try:
        return np.asarray(value)
    except Exception:
        return None


def _static_shape(op) -> tuple:
    shape = op.result_types[0].shape
    if None in shape:
        raise ValueError(f"result type {op.result_types[0]} is still dynamic: the function must "
                         "be called through shape refinement")
    return shape


def _check_operand(op, name: str, value, expected) -> None:
    """A shape-like operand known while tracing must agree with the static result type."""
    known = _known(value)
    if known is not None and _ints(known) != tuple(expected):
        raise ValueError(f"{name} operand is {list(_ints(known))}, but the result type "
                         f"{op.result_types[0]} needs {list(expected)}")


# ---------------------------------------------------------------- shape-operand ops

@register_op("stablehlo.dynamic_iota", "mhlo.dynamic_iota",
             prepare=lambda op: int(op.attrs["iota_dimension"]))
def dynamic_iota(ctx, op, output_shape):
    shape = _static_shape(op)
    _check_operand(op, "output_shape", output_shape, shape)
    return lax.broadcasted_iota(op.result_types[0].dtype, shape, op.params)


@register_op("stablehlo.set_dimension_size", "mhlo.set_dimension_size",
             prepare=lambda op: int(op.attrs["dimension"]))
def set_dimension_size(ctx, op, x, size):
    # With a static result type, only the identity case is representable.
    shape = _static_shape(op)
    if shape != x.shape:
        raise ValueError(f"operand shape {x.shape} differs from the static result type "
                         f"{op.result_types[0]}")
    _check_operand(op, "size", size, (shape[op.params],))
    return x


def _dynamic_conv_prepare(op):
    from shlo2jax.ops.convolution import _prepare
    try:
        return _prepare(op)
    except (TypeError, ValueError) as e:
        raise Unsupported(f"cannot read convolution attributes: {e}") from None


@register_op("stablehlo.dynamic_conv", "mhlo.dynamic_conv", prepare=_dynamic_conv_prepare)
def dynamic_conv(ctx, op, lhs, rhs, padding):
    from shlo2jax.ops.convolution import convolution

    known = _known(padding)
    if known is None:
        raise ValueError("padding computed from traced values: dynamic_conv needs it known "
                         "while tracing")
    params = dict(op.params, padding=tuple((int(lo), int(hi)) for lo, hi in
                                           np.asarray(known).reshape(-1, 2)))
    out = convolution(ctx, types.SimpleNamespace(params=params), lhs, rhs)
    if out.shape != _static_shape(op):
        raise ValueError(f"padding {params['padding']} gives shape {out.shape}, but the result "
                         f"type is {op.result_types[0]}")
    return out


# ---------------------------------------------------------------- jax.export shape checks

@register_custom_call("shape_assertion")
def shape_assertion(ctx, op, attrs, predicate, *values):
    """Raises when the predicate is known to be false while tracing.

    After shape refinement the predicate and the values are constants, so a call
    whose shapes break the export's constraints fails here, with the export's
    own message. A predicate that depends on traced data cannot be checked
    without a runtime check (checkify) and is skipped.
    """
    known = _known(predicate)
    if known is None or bool(known.all()):
        return ()
    message = attrs.get("error_message", "shape assertion failed")
    shown = []
    for v in values:
        k = _known(v)
        shown.append(k.item() if k is not None and k.size == 1 else "?")
    try:
        message = message.format(*shown)
    except (IndexError, KeyError, ValueError):
        message = f"{message} (values: {shown})"
    raise ShapeAssertionError(f"{message} (custom_call @shape_assertion at {op.location})")
