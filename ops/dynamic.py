"""Dynamic-shape ops, and the `shape_assertion` custom call of `jax.export` artifacts.

Functions with `?` dimensions are specialised to concrete shapes before they are
translated (shlo2jax/executables/polymorphic.py), and `stablehlo-canonicalize-dynamism` turns
most dynamic ops into their static forms. The ones left over (their shape
operands are computed, not constant) have static result types by then, so each
reduces to its static lax counterpart: the result type gives the shape, and a
shape operand whose value is known while tracing is checked against it.

`prepare` functions here accept `?` result types: the original, unrefined
module is decoded at load time too, and only its refined copies are translated.

Registered elsewhere: get_dimension_size, dynamic_reshape, dynamic_broadcast_in_dim,
dynamic_pad (ops/shape.py); real_dynamic_slice, dynamic_gather (ops/indexing.py);
dynamic_conv (ops/convolution.py).
"""

from __future__ import annotations

from jax import lax

from shlo2jax.errors import ShapeAssertionError
from shlo2jax.ops._common import ints, known_value, result_shape
from shlo2jax.registry import register_custom_call, register_op


def _check_operand(op, name: str, value, expected) -> None:
    """A shape-like operand known while tracing must agree with the static result type."""
    known = known_value(value)
    if known is not None and ints(known) != tuple(expected):
        raise ValueError(f"{name} operand is {list(ints(known))}, but the result type "
                         f"{op.result_types[0]} needs {list(expected)}")


# ---------------------------------------------------------------- shape-operand ops

@register_op("stablehlo.dynamic_iota", "mhlo.dynamic_iota",
             prepare=lambda op: int(op.attrs["iota_dimension"]))
def dynamic_iota(ctx, op, output_shape):
    shape = result_shape(op)
    _check_operand(op, "output_shape", output_shape, shape)
    return lax.broadcasted_iota(op.result_types[0].dtype, shape, op.params)


@register_op("stablehlo.set_dimension_size", "mhlo.set_dimension_size",
             prepare=lambda op: int(op.attrs["dimension"]))
def set_dimension_size(ctx, op, x, size):
    # With a static result type, only the identity case is representable.
    shape = result_shape(op)
    if shape != x.shape:
        raise ValueError(f"operand shape {x.shape} differs from the static result type "
                         f"{op.result_types[0]}")
    _check_operand(op, "size", size, (shape[op.params],))
    return x


# ---------------------------------------------------------------- jax.export shape checks

@register_custom_call("shape_assertion",
                      prepare=lambda op: op.attrs.get("error_message", "shape assertion failed"))
def shape_assertion(ctx, op, predicate, *values):
    """Raises when the predicate is known to be false while tracing.

    After shape refinement the predicate and the values are constants, so a call
    whose shapes break the export's constraints fails here, with the export's
    own message. A predicate that depends on traced data cannot be checked
    without a runtime check (checkify) and is skipped.
    """
    known = known_value(predicate)
    if known is None or bool(known.all()):
        return ()
    message = op.params
    shown = []
    for v in values:
        k = known_value(v)
        shown.append(k.item() if k is not None and k.size == 1 else "?")
    try:
        message = message.format(*shown)
    except (IndexError, KeyError, ValueError):
        message = f"{message} (values: {shown})"
    raise ShapeAssertionError(f"{message} (custom_call @shape_assertion at {op.location})")
