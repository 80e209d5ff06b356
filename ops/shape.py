"""Data movement: reshape, broadcasts, transpose, slice, concatenate, pad, reverse,
get_dimension_size; HLO's layout-aware `bitcast`."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from jax import lax

from shlo2jax import value_types as T
from shlo2jax.errors import TranslationError
from shlo2jax.ops._common import ints, planned, replayable, result_shape
from shlo2jax.registry import register_op

_CONCATENATED_AS = {T.ELEMENT_DTYPES["i2"]: np.dtype(np.int8),
                    T.ELEMENT_DTYPES["ui2"]: np.dtype(np.uint8)}


@register_op("stablehlo.reshape", "mhlo.reshape")
@replayable(key=result_shape)
def reshape(ctx, op, x):
    return lax.reshape(x, result_shape(op))


def _bitcast_prepare(op):
    """An HLO `bitcast` (after XLA's layout assignment) reinterprets the operand's buffer:
    the layouts (minor to major) say which logical element each memory position holds.
    -> (source layout, result layout), None where the attribute is absent (row-major)."""
    return tuple(None if op.attrs.get(k) is None else ints(op.attrs[k])
                 for k in ("source_layout", "result_layout"))


@register_op("mhlo.bitcast", prepare=_bitcast_prepare)
def bitcast(ctx, op, x):
    # A transpose into memory order (major to minor), a reshape, and a transpose out; an
    # element type of the same width is reinterpreted bit for bit.
    dtype = op.result_types[0].dtype
    if x.dtype != dtype:
        if x.dtype.itemsize != np.dtype(dtype).itemsize:
            raise TranslationError(op.name, op.location, f"bitcast from {x.dtype} to {dtype} "
                                   "changes the element width")
        x = lax.bitcast_convert_type(x, dtype)
    source, result = op.params
    shape = result_shape(op)
    source_major = tuple(reversed(source)) if source is not None else tuple(range(x.ndim))
    result_major = tuple(reversed(result)) if result is not None else tuple(range(len(shape)))
    memory = lax.reshape(lax.transpose(x, source_major), [shape[d] for d in result_major])
    return lax.transpose(memory, tuple(int(i) for i in np.argsort(result_major)))


_BROADCASTS_IN_DIM = frozenset(("stablehlo.broadcast_in_dim", "mhlo.broadcast_in_dim"))


def _composed_broadcasts(op, producer, translator):
    """A `planned` view: a broadcast of a broadcast (what `expand_dims` then jnp's
    broadcasting export: `[b, s] -> [b, s, 1] -> [b, s, d]`) is one broadcast of the first
    operand, the dimensions composed; the inner one, where nothing else reads it, is then dead
    and not staged (shlo2jax.translate._plan). The same elements in the same places: each of
    the operand's dimensions is 1 or the size it lands on, through both broadcasts. One
    equation fewer to trace, differentiate and transpose per pair (searchless chess: 100 of
    its 733 forward equations)."""
    if not _plain(op):
        return op
    dims, inner = op.params, producer(op.operands[0])
    while inner is not None and inner.name in _BROADCASTS_IN_DIM and _plain(inner):
        dims = tuple(dims[d] for d in inner.params)
        op = op.replaced(operands=inner.operands, params=dims)
        inner = producer(inner.operands[0])
    return op


def _plain(op) -> bool:
    """A broadcast of static shapes between unquantized tensors."""
    rtype = op.result_types[0]
    return (type(rtype) is T.TensorType and rtype.quant is None and None not in rtype.shape
            and type(op.params) is tuple)


@register_op("stablehlo.broadcast_in_dim", "mhlo.broadcast_in_dim",
             prepare=lambda op: ints(op.attrs["broadcast_dimensions"]))
@planned(_composed_broadcasts)
@replayable(key=lambda op: (op.params, result_shape(op)), constants=False)
def broadcast_in_dim(ctx, op, x):
    if isinstance(x, np.ndarray):
        # A constant is a literal to JAX, emitted again at every use: exporters write one
        # constant broadcast at many sites (jax: a scalar per weak-typed Python number), so
        # one broadcast per region evaluation keeps the lowered program the source's size
        # (XLA's CSE merges them in the direct compile too).
        key = (id(x), op.params, op.result_types[0])
        hit = ctx.shared.get(key)
        if hit is not None and hit[0] is x:
            return hit[1]
        out = _broadcast_in_dim(x, result_shape(op), op.params)
        ctx.shared[key] = (x, out)
        return out
    return _broadcast_in_dim(x, result_shape(op), op.params)


def _broadcast_in_dim(x, shape, dims):
    # StableHLO allows the operand's dimensions to land in any order; lax before jax 0.8 wants
    # them increasing: transposing the operand first is the same broadcast on every release.
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    if order != list(range(len(dims))):
        x, dims = lax.transpose(x, order), tuple(dims[i] for i in order)
    return lax.broadcast_in_dim(x, shape, dims)


@register_op("stablehlo.broadcast", "mhlo.broadcast",
             prepare=lambda op: ints(op.attrs["broadcast_sizes"]))
def broadcast(ctx, op, x):
    return lax.broadcast(x, op.params)


@register_op("stablehlo.transpose", "mhlo.transpose",
             prepare=lambda op: ints(op.attrs["permutation"]))
@replayable(key=lambda op: op.params)
def transpose(ctx, op, x):
    return lax.transpose(x, op.params)


class Slice(NamedTuple):
    start_indices: tuple
    limit_indices: tuple
    strides: tuple


def _slice_prepare(op):
    starts = ints(op.attrs["start_indices"])
    strides = ints(op.attrs["strides"]) if "strides" in op.attrs else (1,) * len(starts)
    return Slice(starts, ints(op.attrs["limit_indices"]), strides)


@register_op("stablehlo.slice", "mhlo.slice", prepare=_slice_prepare)
@replayable(key=lambda op: op.params)
def slice_(ctx, op, x):
    starts, limits, strides = op.params
    return lax.slice(x, starts, limits, strides)


@register_op("stablehlo.concatenate", "mhlo.concatenate",
             prepare=lambda op: int(op.attrs["dimension"]))
def concatenate(ctx, op, *xs):
    dtype = op.result_types[0].dtype
    wide = _CONCATENATED_AS.get(dtype)
    if wide is not None:
        # XLA on CPU aborts the process (ir_array.cc "bit_offset" check) concatenating 2-bit
        # integers; they are concatenated as bytes instead (the conversions are exact).
        xs = [lax.convert_element_type(x, wide) for x in xs]
        return lax.convert_element_type(lax.concatenate(xs, op.params), dtype)
    return lax.concatenate(xs, op.params)


def _pad_prepare(op):
    return tuple(zip(ints(op.attrs["edge_padding_low"]), ints(op.attrs["edge_padding_high"]),
                     ints(op.attrs["interior_padding"])))


@register_op("stablehlo.pad", "mhlo.pad", prepare=_pad_prepare)
def pad(ctx, op, x, padding_value):
    # lax.pad takes negative edge padding (cropping) and interior padding, as the spec does.
    return lax.pad(x, padding_value, op.params)


@register_op("stablehlo.reverse", "mhlo.reverse",
             prepare=lambda op: ints(op.attrs["dimensions"]))
def reverse(ctx, op, x):
    return lax.rev(x, op.params)


@register_op("stablehlo.get_dimension_size", "mhlo.get_dimension_size",
             prepare=lambda op: int(op.attrs["dimension"]))
def get_dimension_size(ctx, op, x):
    # Shapes are static once traced: the size is a constant.
    return np.array(x.shape[op.params], dtype=op.result_types[0].dtype)


# The "dynamism" ops: by translation time their result types are static (see
# ops/dynamic.py), and the shape operands only restate them.

def _check_shape_operand(op, value, shape):
    # Constants reach handlers as numpy arrays: a known operand must agree with the type.
    if isinstance(value, np.ndarray) and ints(value) != tuple(shape):
        raise ValueError(f"shape operand {list(ints(value))} contradicts the result type "
                         f"{op.result_types[0]}")


@register_op("stablehlo.dynamic_reshape", "mhlo.dynamic_reshape")
def dynamic_reshape(ctx, op, x, output_shape):
    shape = result_shape(op)
    _check_shape_operand(op, output_shape, shape)
    return lax.reshape(x, shape)


@register_op("stablehlo.dynamic_broadcast_in_dim", "mhlo.dynamic_broadcast_in_dim",
             prepare=lambda op: ints(op.attrs["broadcast_dimensions"]))
def dynamic_broadcast_in_dim(ctx, op, x, output_dimensions):
    shape = result_shape(op)
    _check_shape_operand(op, output_dimensions, shape)
    return _broadcast_in_dim(x, shape, op.params)


@register_op("stablehlo.dynamic_pad", "mhlo.dynamic_pad")
def dynamic_pad(ctx, op, x, padding_value, low, high, interior):
    if not all(isinstance(a, np.ndarray) for a in (low, high, interior)):
        raise ValueError("dynamic_pad needs its padding amounts known while tracing")
    out = lax.pad(x, padding_value, tuple(zip(ints(low), ints(high), ints(interior))))
    if out.shape != result_shape(op):
        raise ValueError(f"padding gives shape {out.shape}, the result type is "
                         f"{op.result_types[0]}")
    return out
