"""Indexed data movement: dynamic_slice, dynamic_update_slice, gather, scatter,
torch_index_select, real_dynamic_slice.

Out-of-bounds behaviour follows the spec: dynamic_slice / dynamic_update_slice and
gather clamp start indices so the slice fits; scatter skips each update element
whose result index is out of bounds.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from shlo2jax import value_types as T
from shlo2jax.compat import auto_insert_reshard, set_batching_rule
from shlo2jax.primitives import general_scatter_primitive
from shlo2jax.attributes import GatherDims, Opaque, ScatterDims
from shlo2jax.errors import TranslationError
from shlo2jax.ops._common import (ints, known_value, non_differentiable, planned, result_shape,
                                  single_or_tuple)
from shlo2jax.ops._ranges import Range, exact_range
from shlo2jax.registry import Unsupported, register_op


# ---------------------------------------------------------------- start-index clamping

def _clamp_start(index, upper: int, known: Range = None):
    """`clamp(0, index, upper)` in the index's own type (upper is capped to fit it). A constant
    index is clamped here, with no equation: exporters slice a loop body's tensors at constant
    starts beside the counter (jax's `t[k]` is `dynamic_slice(t, k, 0, 0)`), so most starts of
    a program of loops are constants (the climate benchmark: 1,712 clamps traced, each with
    its two bounds lowered as constants). An index whose exact range (`known`) lies within
    [0, upper] needs no clamp: a counted loop's counter slicing the layer weights of a
    stack (`w[i]`)."""
    dtype = index.dtype
    upper = min(upper, _largest(dtype))
    if known is not None and 0 <= known[0] and known[1] <= upper:
        return index
    if isinstance(index, np.ndarray):
        value = int(index)
        if 0 <= value <= upper:  # (the module's own constant: one object, one jaxpr constant)
            return index
        return np.array(min(max(value, 0), upper), dtype)  # (lax.clamp's order: max, min)
    return lax.clamp(np.array(0, dtype), index, np.array(upper, dtype))


@functools.cache
def _largest(dtype) -> int:
    return int(ml_dtypes.iinfo(np.dtype(dtype)).max)


def _clamped_starts(shape, sizes, starts, known=None):
    known = known or (None,) * len(starts)
    return [_clamp_start(s, dim - size, r)
            for s, dim, size, r in zip(starts, shape, sizes, known)]


class DynamicSlice(NamedTuple):
    sizes: tuple
    # per start, its exact range (ops._ranges.exact_range) or None, found when planned
    start_ranges: tuple = ()


def _start_ranges(op, producer, translator):
    """A `planned` view: the dynamic slice with its starts' exact ranges, so that a start
    known within bounds is not clamped. Lifted constants are the call's values: no view."""
    if translator.mode.lifted is not None:
        return op
    known = tuple(exact_range(s, producer, translator) for s in op.operands[1:])
    if not any(r is not None for r in known):
        return op
    return op.replaced(params=op.params._replace(start_ranges=known))


@register_op("stablehlo.dynamic_slice", "mhlo.dynamic_slice",
             prepare=lambda op: DynamicSlice(ints(op.attrs["slice_sizes"])))
@planned(_start_ranges)
def dynamic_slice(ctx, op, x, *starts):
    sizes, known = op.params
    starts = _clamped_starts(x.shape, sizes, starts, known)
    # (the primitive itself: lax.dynamic_slice's wrapper normalizes negative starts, which
    # clamped ones are not, and costs a third of the op's trace: fold's 1,900 slices)
    return lax.dynamic_slice_p.bind(*auto_insert_reshard(x, *starts), slice_sizes=sizes)


@register_op("stablehlo.dynamic_update_slice", "mhlo.dynamic_update_slice")
def dynamic_update_slice(ctx, op, x, update, *starts):
    starts = _clamped_starts(x.shape, update.shape, starts)
    return lax.dynamic_update_slice(x, update, starts, allow_negative_indices=False)


@register_op("stablehlo.real_dynamic_slice", "mhlo.real_dynamic_slice")
def real_dynamic_slice(ctx, op, x, starts, limits, strides):
    # The static result shape fixes the extent; limits only restate it.
    out_shape = result_shape(op)
    known = [known_value(v) for v in (starts, limits, strides)]
    if all(k is not None for k in known):
        _check_real_dynamic_slice(op, x.shape, *(ints(k) for k in known), out_shape)
    if isinstance(starts, np.ndarray) and isinstance(strides, np.ndarray):
        begin, step = ints(starts), ints(strides)
        end = [b + (n - 1) * s + 1 if n else b for b, n, s in zip(begin, out_shape, step)]
        return lax.slice(x, begin, end, step)
    for d, n in enumerate(out_shape):
        index = starts[d] + strides[d] * lax.iota(starts.dtype, n)
        x = jnp.take(x, index, axis=d, mode="clip")
    return x


def _check_real_dynamic_slice(op, shape, starts, limits, strides, out_shape):
    """The spec's constraints on known start, limit and stride operands."""
    for d, (b, e, s, n, size) in enumerate(zip(starts, limits, strides, shape, out_shape)):
        why = None
        if s <= 0:
            why = f"stride {s} is not positive"
        elif not 0 <= b <= e <= n:
            why = f"start {b} and limit {e} are not within 0 <= start <= limit <= {n}"
        elif -(-(e - b) // s) != size:
            why = (f"start {b}, limit {e} and stride {s} give {-(-(e - b) // s)} elements, "
                   f"the result type {op.result_types[0]} has {size}")
        if why is not None:
            raise TranslationError(op.name, op.location, f"dimension {d}: {why}")


# ---------------------------------------------------------------- dimension numbers

_FIELD_RE = re.compile(r"(\w+)\s*=\s*(\[[^\]]*\]|-?\d+)")


def _opaque_fields(attr) -> dict:
    """`#mhlo.gather<...>` / `#mhlo.scatter<...>` text -> field dict."""
    fields = {}
    for name, value in _FIELD_RE.findall(attr.text):
        if value.startswith("["):
            fields[name] = tuple(int(v) for v in value[1:-1].split(",") if v.strip())
        else:
            fields[name] = int(value)
    return fields


def _gather_dims(attr) -> GatherDims:
    if isinstance(attr, GatherDims):
        return attr
    if not isinstance(attr, Opaque):
        raise Unsupported(f"unrecognised gather dimension numbers {attr!r}")
    f = _opaque_fields(attr)
    return GatherDims(f.get("offset_dims", ()), f.get("collapsed_slice_dims", ()),
                      f.get("operand_batching_dims", ()), f.get("start_indices_batching_dims", ()),
                      f.get("start_index_map", ()), f["index_vector_dim"])


def _scatter_dims(attr) -> ScatterDims:
    if isinstance(attr, ScatterDims):
        return attr
    if not isinstance(attr, Opaque):
        raise Unsupported(f"unrecognised scatter dimension numbers {attr!r}")
    f = _opaque_fields(attr)
    return ScatterDims(f.get("update_window_dims", ()), f.get("inserted_window_dims", ()),
                       f.get("input_batching_dims", ()), f.get("scatter_indices_batching_dims", ()),
                       f.get("scatter_dims_to_operand_dims", ()), f["index_vector_dim"])


def _without_index_vector_dim(dims, index_vector_dim) -> tuple:
    """Index-tensor dims renumbered for the index vector moved last (lax's layout)."""
    return tuple(d - (d > index_vector_dim) for d in dims)


def _index_vector_last(indices, index_vector_dim: int):
    rank = indices.ndim
    if index_vector_dim == rank:  # implicit trailing index vector of size 1
        return lax.expand_dims(indices, (rank,))
    if index_vector_dim == rank - 1:
        return indices
    perm = [d for d in range(rank) if d != index_vector_dim] + [index_vector_dim]
    return lax.transpose(indices, perm)


# ---------------------------------------------------------------- gather

class Gather(NamedTuple):
    dnums: lax.GatherDimensionNumbers  # for indices with the index vector last
    index_vector_dim: int
    slice_sizes: Optional[tuple]       # None: dynamic_gather's operand
    sorted: bool


def _gather_params(op, d: GatherDims, slice_sizes: tuple) -> Gather:
    dnums = lax.GatherDimensionNumbers(
        offset_dims=d.offset_dims, collapsed_slice_dims=d.collapsed_slice_dims,
        start_index_map=d.start_index_map, operand_batching_dims=d.operand_batching_dims,
        start_indices_batching_dims=_without_index_vector_dim(d.start_indices_batching_dims,
                                                              d.index_vector_dim))
    return Gather(dnums, d.index_vector_dim, slice_sizes,
                  bool(op.attrs.get("indices_are_sorted", False)))


def _gather_prepare(op):
    return _gather_params(op, _gather_dims(op.attrs["dimension_numbers"]),
                          ints(op.attrs["slice_sizes"]))


@register_op("stablehlo.gather", "mhlo.gather", prepare=_gather_prepare)
def gather(ctx, op, operand, indices):
    p = op.params
    indices = _index_vector_last(indices, p.index_vector_dim)
    # CLIP: start indices clamped to [0, dim - slice_size], as the spec says.
    return lax.gather(operand, indices, p.dnums, p.slice_sizes,
                      indices_are_sorted=p.sorted, mode=lax.GatherScatterMode.CLIP)


def _dynamic_gather_prepare(op):
    return _gather_params(op, _gather_dims(op.attrs["dimension_numbers"]), None)


@register_op("stablehlo.dynamic_gather", "mhlo.dynamic_gather", prepare=_dynamic_gather_prepare)
def dynamic_gather(ctx, op, operand, indices, slice_sizes):
    p = op.params
    # The static result type gives the sizes: 1 on collapsed and batching dims, else the
    # offset extents. Sizes known while tracing must be those (checked per the spec);
    # traced ones cannot be checked, and the result type's are taken.
    d, out_shape = p.dnums, result_shape(op)
    offsets = iter(d.offset_dims)
    sizes = tuple(1 if dim in d.collapsed_slice_dims or dim in d.operand_batching_dims
                  else out_shape[next(offsets)] for dim in range(operand.ndim))
    known = known_value(slice_sizes)
    if known is not None:
        _check_slice_sizes(op, operand.shape, ints(known), sizes)
    indices = _index_vector_last(indices, p.index_vector_dim)
    return lax.gather(operand, indices, p.dnums, sizes, indices_are_sorted=p.sorted,
                      mode=lax.GatherScatterMode.CLIP)


def _check_slice_sizes(op, shape, known, sizes) -> None:
    """dynamic_gather's slice_sizes operand, known while tracing, against the spec's
    constraints (as gather's: one per operand dimension, within it, at most 1 on collapsed and
    batching dimensions) and the static result type (`sizes`, what it implies)."""
    d = op.params.dnums
    why = None
    if len(known) != len(shape):
        why = f"{len(known)} slice sizes for an operand of rank {len(shape)}"
    else:
        for dim, (k, n) in enumerate(zip(known, shape)):
            if not 0 <= k <= n:
                why = f"slice size {k} of dimension {dim} is outside [0, {n}]"
            elif k > 1 and (dim in d.collapsed_slice_dims or dim in d.operand_batching_dims):
                why = f"slice size {k} of collapsed or batching dimension {dim} is above 1"
            if why:
                break
        else:
            if tuple(known) != tuple(sizes):
                why = (f"slice sizes {list(known)} give another shape than the result type "
                       f"{op.result_types[0]} (slice sizes {list(sizes)})")
    if why is not None:
        raise TranslationError(op.name, op.location, f"slice_sizes operand: {why}")


class IndexSelect(NamedTuple):
    dim: int
    batch_dims: int


def _torch_index_select_prepare(op):
    return IndexSelect(int(op.attrs["dim"]), int(op.attrs.get("batch_dims", 0)))


@register_op("stablehlo.torch_index_select", "mhlo.torch_index_select",
             prepare=_torch_index_select_prepare)
def torch_index_select(ctx, op, operand, index):
    # result = operand[:dim] ++ index[batch_dims:] ++ operand[dim+1:], leading batch dims shared.
    dim, batch = op.params
    index_rank, out_rank = index.ndim, index.ndim + operand.ndim - 1 - batch
    dnums = lax.GatherDimensionNumbers(
        offset_dims=tuple(range(batch, dim)) + tuple(range(dim + index_rank - batch, out_rank)),
        collapsed_slice_dims=(dim,), start_index_map=(dim,),
        operand_batching_dims=tuple(range(batch)), start_indices_batching_dims=tuple(range(batch)))
    sizes = tuple(1 if d < batch or d == dim else n for d, n in enumerate(operand.shape))
    return lax.gather(operand, lax.expand_dims(index, (index_rank,)), dnums, sizes,
                      mode=lax.GatherScatterMode.CLIP)


# ---------------------------------------------------------------- scatter

# Update bodies that are one commutative op of (current, update): lax has a scatter for each.
_BODY_OPS = {"add": "add", "multiply": "mul", "minimum": "min", "maximum": "max",
             "and": "and", "or": "or"}

_LAX_SCATTER = {"add": lax.scatter_add, "mul": lax.scatter_mul, "min": lax.scatter_min,
                "max": lax.scatter_max, "replace": lax.scatter}

# On i1 the spec's add is OR and multiply is AND; OR/AND are max/min.
_BOOL_KIND = {"add": "max", "or": "max", "mul": "min", "and": "min", "min": "min", "max": "max",
              "replace": "replace", "keep": "keep"}


def _body_kinds(region, n: int):
    """Per result: 'keep' / 'replace' / a `_BODY_OPS` value, or None for a general body."""
    producers = {}
    for body_op in region.ops:
        name = body_op.name.split(".", 1)[1]
        producers[body_op.results[0]] = (name, body_op.operands, len(body_op.results))
    kinds = []
    for i, out in enumerate(region.outputs):
        current, update = region.args[i], region.args[n + i]
        if out == current:
            kinds.append("keep")
        elif out == update:
            kinds.append("replace")
        elif out in producers:
            name, operands, nres = producers[out]
            if name in _BODY_OPS and nres == 1 and sorted(operands) == sorted((current, update)):
                kinds.append(_BODY_OPS[name])
            else:
                return None
        else:
            return None
    # Other ops in the body are dead unless some output uses them (checked above).
    return tuple(kinds)


class Scatter(NamedTuple):
    dnums: lax.ScatterDimensionNumbers  # for indices with the index vector last
    index_vector_dim: int
    n: int                  # inputs (as many updates follow the indices)
    kinds: Optional[tuple]  # per result, the lax scatter its body is; None: a general body
    sorted: bool
    unique: bool
    dtypes: tuple           # the result types (the body's, possibly wider than the inputs')


def _scatter_prepare(op):
    d = _scatter_dims(op.attrs["scatter_dimension_numbers"])
    n = len(op.results)
    dnums = lax.ScatterDimensionNumbers(
        update_window_dims=d.update_window_dims, inserted_window_dims=d.inserted_window_dims,
        scatter_dims_to_operand_dims=d.scatter_dims_to_operand_dims,
        operand_batching_dims=d.input_batching_dims,
        scatter_indices_batching_dims=_without_index_vector_dim(
            d.scatter_indices_batching_dims, d.index_vector_dim))
    unique = bool(op.attrs.get("unique_indices", False))
    kinds = _body_kinds(op.regions[0], n)
    if kinds is not None:
        kinds = tuple(_BOOL_KIND[k] if rt.dtype == np.bool_ else k
                      for k, rt in zip(kinds, op.result_types))
        if any(k in ("and", "or") for k in kinds):
            kinds = None  # integer bitwise bodies: no lax scatter for them
        elif n > 1 and "replace" in kinds and not unique:
            kinds = None  # one schedule must pick the same winner for every result
        elif any(k in ("min", "max") and T.is_complex(rt.dtype)
                 for k, rt in zip(kinds, op.result_types)):
            kinds = None
    return Scatter(dnums, d.index_vector_dim, n, kinds,
                   bool(op.attrs.get("indices_are_sorted", False)), unique,
                   tuple(rt.dtype for rt in op.result_types))


def _window_sizes(operand_shape, update_shape, dnums) -> list:
    """Per operand dim: the update window's extent (1 for inserted and batching dims)."""
    sizes, k = [], 0
    for d in range(len(operand_shape)):
        if d in dnums.inserted_window_dims or d in dnums.operand_batching_dims:
            sizes.append(1)
        else:
            sizes.append(update_shape[dnums.update_window_dims[k]])
            k += 1
    return sizes


def _as_int64(indices):
    """Indices as int64 without wrapping (64-bit values are capped far beyond any dim)."""
    dtype = np.dtype(indices.dtype)
    if dtype.itemsize == 8:
        low = 0 if T.is_unsigned(dtype) else -(1 << 62)
        indices = lax.clamp(np.array(low, dtype), indices, np.array(1 << 62, dtype))
    return lax.convert_element_type(indices, np.int64)


@register_op("stablehlo.scatter", "mhlo.scatter", prepare=_scatter_prepare)
def scatter(ctx, op, *args):
    p = op.params
    n, dnums = p.n, p.dnums
    inputs, indices, updates = args[:n], args[n], args[n + 1:]
    # The body's element types may be wider than the inputs' (promotable): results use them.
    inputs = [lax.convert_element_type(x, t) for x, t in zip(inputs, p.dtypes)]
    updates = [lax.convert_element_type(u, t) for u, t in zip(updates, p.dtypes)]
    indices = _index_vector_last(indices, p.index_vector_dim)

    # XLA drops a whole update window that does not fit; the spec drops only the
    # out-of-bounds elements. Padding each indexed window dim by (window - 1) on both
    # sides makes every partly-inside window fit, and fully-outside ones still drop.
    shape = inputs[0].shape
    if updates[0].size == 0 or inputs[0].size == 0:
        # no update element (an empty window or no index), or nothing to update: the spec's
        # result is the input (and lax's padding below would be negative)
        return single_or_tuple(op, inputs)
    windows = _window_sizes(shape, updates[0].shape, dnums)
    margin = [w - 1 if d in dnums.scatter_dims_to_operand_dims else 0
              for d, w in enumerate(windows)]
    if any(margin):
        offsets = np.array([margin[d] for d in dnums.scatter_dims_to_operand_dims], np.int64)
        indices = _as_int64(indices) + offsets
        inputs = [lax.pad(x, np.zeros((), x.dtype), [(m, m, 0) for m in margin])
                  for x in inputs]

    if p.kinds is not None:
        scatter_fns = {kind: functools.partial(
            _LAX_SCATTER[kind], dimension_numbers=dnums, indices_are_sorted=p.sorted,
            unique_indices=p.unique, mode=lax.GatherScatterMode.FILL_OR_DROP)
            for kind in set(p.kinds) - {"keep"}}
        if "mul" in scatter_fns and not p.unique:
            scatter_fns["mul"] = _scatter_mul_with_named_error(scatter_fns["mul"], op)
        outs = [x if kind == "keep" else scatter_fns[kind](x, indices, u)
                for kind, x, u in zip(p.kinds, inputs, updates)]
    else:
        body = _region_jaxpr(ctx.region(op.regions[0]), p.dtypes)
        bind = lambda *a: tuple(_general_scatter_p.bind(
            *a, body=body, n=n, dnums=dnums, indices_are_sorted=p.sorted,
            unique_indices=p.unique))
        outs = non_differentiable(bind, op, "a scatter whose update body is not add, multiply, "
                                  "min, max or replace")(*inputs, indices, *updates)

    if any(margin):
        outs = [lax.slice(x, margin, [m + s for m, s in zip(margin, shape)]) for x in outs]
    return single_or_tuple(op, outs)


def _scatter_mul_with_named_error(scatter_mul, op):
    """A multiplying scatter with possibly repeated indices: lax differentiates it in the
    operand but not in the updates; say so naming the op instead of lax's bare error."""
    fn = jax.custom_jvp(scatter_mul)

    def _jvp(primals, tangents):
        x, indices, updates = primals
        tx, _, tu = tangents
        if not isinstance(tu, jax.custom_derivatives.SymbolicZero):
            raise TranslationError(op.name, op.location, "cannot differentiate a multiplying "
                                   "scatter in its updates unless unique_indices = true")
        out = scatter_mul(x, indices, updates)
        if isinstance(tx, jax.custom_derivatives.SymbolicZero):
            return out, jnp.zeros_like(out)
        return out, scatter_mul(tx, indices, updates)
    fn.defjvp(_jvp, symbolic_zeros=True)
    return fn


# ---------------------------------------------------------------- general scatter bodies
#
# lax offers scatters only for fixed bodies (replace/add/mul/min/max) and one operand.
# Any other body, and several operands sharing one body, lower to a stablehlo.scatter
# whose region is the traced body: XLA applies it natively. Derivatives raise an error naming the op; vmap adds the batch as a scattered index coordinate.

def _region_jaxpr(region, dtypes):
    avals = [jax.ShapeDtypeStruct((), t) for t in dtypes] * 2
    closed = jax.make_jaxpr(lambda *a: tuple(region(*a)))(*avals)
    if any(isinstance(c, jax.core.Tracer) for c in closed.consts):
        raise NotImplementedError("scatter body uses a traced value from outside the body")
    return closed


_general_scatter_p = general_scatter_primitive()


def _batch_at_front(x, dim, size):
    if dim is None:
        return lax.broadcast(x, (size,))
    return jnp.moveaxis(x, dim, 0)


def _general_scatter_batch(args, dims, *, body, n, dnums, indices_are_sorted, unique_indices):
    """vmap. One operand: the mapped dim leads everything and becomes one more scattered
    index coordinate (an iota), so each batch element scatters into its own slice. Several
    operands: a lax.map over the batch (XLA's CPU backend crashed on the variadic form)."""
    params = dict(body=body, n=n, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices)
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    if n > 1:
        mapped = [k for k, d in enumerate(dims) if d is not None]

        def one(slices):
            full = list(args)
            for k, x in zip(mapped, slices):
                full[k] = x
            return tuple(_general_scatter_p.bind(*full, dnums=dnums, **params))
        return list(lax.map(one, tuple(jnp.moveaxis(args[k], dims[k], 0) for k in mapped))), [0] * n
    args = [_batch_at_front(a, d, size) for a, d in zip(args, dims)]
    indices = args[n]
    batch_index = lax.broadcasted_iota(indices.dtype, (*indices.shape[:-1], 1), 0)
    args[n] = lax.concatenate([batch_index, indices], indices.ndim - 1)
    up = lambda ds: tuple(d + 1 for d in ds)
    batched = lax.ScatterDimensionNumbers(
        update_window_dims=up(dnums.update_window_dims),
        inserted_window_dims=(0,) + up(dnums.inserted_window_dims),
        scatter_dims_to_operand_dims=(0,) + up(dnums.scatter_dims_to_operand_dims),
        operand_batching_dims=up(dnums.operand_batching_dims),
        scatter_indices_batching_dims=up(dnums.scatter_indices_batching_dims))
    return _general_scatter_p.bind(*args, dnums=batched, **dict(params, indices_are_sorted=False)), [0] * n


set_batching_rule(_general_scatter_p, _general_scatter_batch)
