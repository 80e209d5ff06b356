"""Quantized and f6 tensors through every op: uniform_quantize/dequantize and a generic wrapper.

Quantized values are `shlo2jax.quant.QArray`s, f6 values `F6Array`s (uint8 bit patterns
whose "expressed" type is f32, see shlo2jax.quant.float6). Instead of teaching each
handler about them, the decoder (shlo2jax.module) gives every op that touches such a
value, and only those, the rule `carried_rule` wraps here:

* no quantized operand or result: the original handler runs untouched (decided at load);
* data movement (reshape, transpose, slice, gather, ...) whose quantized operands and
  results share their parameters: the original handler runs on the storage integers;
* ops with regions (reduce, sort, while, if, ...): storage integers outside, regions see
  QArrays (rebuilt from their block-argument types), so the body's own quantized ops
  run with the spec's per-step requantization;
* everything else, the spec's `dequantize_op_quantize`: operands are dequantized, the
  original handler runs on an expressed-type view of the op (prepared at load time),
  and results are quantized to their declared types;
* a float result from quantized operands (compare, hybrid dot/convolution) dequantizes
  the operands (`hybrid_dequantize_then_op`);
* dot_general / dot / convolution with quantized operands and result accumulate the
  zero-point-centred storage integers in int32 (int64 for 16-bit storage) and rescale;
* f6: convert to f6 rounds once from the operand's own precision (f64 is not narrowed to
  f32 first); bitcast_convert moves the bit patterns (f6 <-> f6, i1/i2/ui2 lanes);
  dot_general / dot into f6 round every product and partial sum to f6, as the spec's
  reduce-in-the-result-type definition does.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Optional

import numpy as np
from jax import lax

from shlo2jax import value_types as T
from shlo2jax.module import Op, Region
from shlo2jax.quant import (QArray, QuantizedType, check_tensor_type, dequantize, quantize,
                            straight_through_active, wrap_storage)
from shlo2jax.registry import OpRule, Unsupported, register_op, register_rule_wrapper

_DATA_MOVEMENT = frozenset({
    "reshape", "transpose", "broadcast_in_dim", "broadcast", "slice", "dynamic_slice",
    "concatenate", "gather", "pad", "reverse", "dynamic_update_slice", "select",
    "dynamic_reshape", "dynamic_broadcast_in_dim", "real_dynamic_slice", "dynamic_pad",
    "dynamic_gather", "torch_index_select", "all_gather", "all_to_all", "collective_permute",
    "collective_broadcast", "get_dimension_size", "set_dimension_size", "constant"})
# Handed QArrays as they are: they only route values. (So are custom calls: the decoder
# gives their targets' rules the values as they are.)
_PASS_THROUGH = frozenset({
    "func.call", "stablehlo.tuple", "mhlo.tuple", "stablehlo.get_tuple_element",
    "mhlo.get_tuple_element", "stablehlo.optimization_barrier", "mhlo.optimization_barrier",
    "stablehlo.send", "stablehlo.recv", "stablehlo.infeed", "stablehlo.outfeed",
    "stablehlo.composite"})


def _mnemonic(name: str) -> str:
    return name.split(".", 1)[1] if "." in name else name


def _is_q(t) -> bool:
    return isinstance(t, T.TensorType) and t.quant is not None


def _expressed(t):
    if _is_q(t):
        dtype = t.quant.expressed_dtype
        return T.TensorType(t.shape, dtype, T.dtype_name(dtype), None, t.bounds)
    return t


def _plain(t):
    """The storage-type view of a quantized (or f6) tensor type."""
    return _as_dtype(t, t.quant.storage_dtype) if _is_q(t) else t


def _as_dtype(t, dtype):
    if _is_q(t):
        return T.TensorType(t.shape, np.dtype(dtype), T.dtype_name(dtype), None, t.bounds)
    return t


def _view(op: Op, result_types, prepare, regions=None):
    """A copy of `op` with other result types (and regions), params prepared for them."""
    view = op.replaced(result_types=tuple(result_types),
                       regions=op.regions if regions is None else tuple(regions))
    view.params = prepare(view) if prepare is not None else view.attrs
    return view


def _try_view(op, result_types, prepare):
    try:
        return _view(op, result_types, prepare)
    except Unsupported:
        return None


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """What the load-time prepare decided for an op with quantized results: views of the op
    (its params prepared for them) on storage integers and on expressed values, and for
    quantized dots the integer-accumulating views by accumulator type."""
    storage: Optional[Op] = None
    expressed: Optional[Op] = None
    integer: Optional[dict] = None
    regions: bool = False


def _wrap_prepare(name, prepare):
    mnemonic = _mnemonic(name)

    def wrapped(op):
        quantized_regions = any(_is_q(t) for r in op.regions for t in r.arg_types)
        if not quantized_regions and not any(_is_q(t) for t in op.result_types):
            return prepare(op) if prepare is not None else op.attrs
        _check_quantized_results(op)
        if op.regions:
            # Recognised bodies (a lone add as a monoid, ...) would apply to the storage
            # integers; with the adapters no body is recognised and each runs as written.
            regions = [_storage_region(r) for r in op.regions]
            return _Plan(storage=_view(op, [_plain(t) for t in op.result_types], prepare, regions),
                         regions=True)
        expressed = _try_view(op, [_expressed(t) for t in op.result_types], prepare)
        storage = _view(op, [_plain(t) for t in op.result_types], prepare) \
            if mnemonic in _DATA_MOVEMENT else None
        plan = _Plan(storage=storage, expressed=expressed)
        if plan.expressed is None and plan.storage is None:
            raise Unsupported(f"{name} on quantized values: no expressed-type translation")
        return plan
    return wrapped


_FRESH_IDS = itertools.count(-1, -1)  # value ids of the ops below; decoded ids are >= 0


def _adapter(name, handler, operand, result, rtype, params):
    op = Op(name, (operand,), (result,), (rtype,), {}, (), "shlo2jax.quant")
    op.handler, op.params = handler, params
    return op


def _to_qarray(ctx, op, x):
    return x if isinstance(x, QArray) else wrap_storage(x, op.params)


def _to_storage(ctx, op, x):
    return _storage(x)


def _storage_region(region: Region) -> Region:
    """`region` taking and returning storage integers where it has quantized values.

    Handlers pass storage integers to their regions (lax needs arrays); adapter ops at the
    region's entry rebuild the QArrays its ops expect, and at its exit take their storage.
    (A result type of None is not checked by the translation loop.)"""
    args, entry = [], []
    for vid, t in zip(region.args, region.arg_types):
        if _is_q(t):
            fresh = next(_FRESH_IDS)
            entry.append(_adapter("quant.from_storage", _to_qarray, fresh, vid, t, t.quant))
            vid = fresh
        args.append(vid)
    outputs, exit_ops = [], []
    for vid in region.outputs:
        fresh = next(_FRESH_IDS)
        exit_ops.append(_adapter("quant.to_storage", _to_storage, vid, fresh, None, None))
        outputs.append(fresh)
    return Region(tuple(args), tuple(_plain(t) for t in region.arg_types),
                  entry + list(region.ops) + exit_ops, tuple(outputs), region.captures)


def _params_key(q):
    if type(q) is not QuantizedType:
        return q  # an f6 type: its bit patterns mean the same wherever they move
    return (q.storage_dtype, q.storage_min, q.storage_max, q.expressed_dtype, q.scales,
            q.zero_points)


def _storage_compatible(operands, result_types) -> bool:
    """Moving storage integers keeps every element's value: one parameter set throughout."""
    keys = {_params_key(x.qtype) for x in operands if isinstance(x, QArray)}
    keys |= {_params_key(t.quant) for t in result_types if _is_q(t)}
    if len(keys) != 1:
        return False
    return not any(x.ste is not None for x in operands if isinstance(x, QArray))


def _storage(x):
    return x.storage if isinstance(x, QArray) else x


def _deq(x):
    return dequantize(x) if isinstance(x, QArray) else x


def _pack(out, result_types, convert):
    if len(result_types) == 1:
        return convert(out, result_types[0])
    return tuple(convert(o, t) for o, t in zip(out, result_types))


def _wrap_storage(value, t):
    return wrap_storage(value, t.quant) if _is_q(t) else value


def _quantize_result(value, t):
    return quantize(value, t.quant) if _is_q(t) else value


def _run_storage(handler, ctx, view, operands, result_types):
    out = handler(ctx, view, *[_storage(x) for x in operands])
    return _pack(out, result_types, _wrap_storage)


def _run_expressed(handler, ctx, view, operands, result_types):
    out = handler(ctx, view, *[_deq(x) for x in operands])
    return _pack(out, result_types, _quantize_result)


def _wrap_handler(name, handler):
    storage_only = _mnemonic(name) in _DATA_MOVEMENT

    def wrapped(ctx, op, *operands):
        plan = op.params
        if type(plan) is not _Plan:
            if not any(isinstance(x, QArray) for x in operands):
                return handler(ctx, op, *operands)
            # Plain results from quantized operands: storage for data movement
            # (get_dimension_size), the dequantized values otherwise (compare, hybrid ops).
            convert = _storage if storage_only else _deq
            return handler(ctx, op, *[convert(x) for x in operands])
        if plan.regions:
            return _run_storage(handler, ctx, plan.storage, operands, op.result_types)
        if plan.storage is not None and (plan.expressed is None or _storage_compatible(
                operands, op.result_types)):
            return _run_storage(handler, ctx, plan.storage, operands, op.result_types)
        return _run_expressed(handler, ctx, plan.expressed, operands, op.result_types)
    wrapped.__name__ = getattr(handler, "__name__", name)
    wrapped.__doc__ = getattr(handler, "__doc__", None)
    wrapped.__wrapped__ = handler
    return wrapped


# --------------------------------------------------------------------------- own ops

def _check_quantized_results(op):
    """The tensor-level quantization constraints of the op's results, at load time."""
    for t in op.result_types:
        if _is_q(t) and type(t.quant) is QuantizedType:
            try:
                check_tensor_type(t.shape, t.quant)
            except T.UnsupportedTypeError as e:
                raise Unsupported(str(e)) from None


def _quantized_result_prepare(op):
    _check_quantized_results(op)
    return op.result_types[0]


@register_op("stablehlo.uniform_quantize", "mhlo.uniform_quantize",
             prepare=_quantized_result_prepare)
def uniform_quantize(ctx, op, x):
    rtype = op.params
    if not _is_q(rtype):
        raise TypeError(f"uniform_quantize to non-quantized type {rtype}")
    if isinstance(x, QArray):  # requantization: quantize(dequantize(x)), as the spec says
        x = dequantize(x)
    if np.dtype(x.dtype) != rtype.quant.expressed_dtype:
        raise TypeError(f"uniform_quantize of {x.dtype} values to {rtype}")
    return quantize(x, rtype.quant)


@register_op("stablehlo.uniform_dequantize", "mhlo.uniform_dequantize",
             prepare=lambda op: op.result_types[0])
def uniform_dequantize(ctx, op, x):
    if not isinstance(x, QArray):
        raise TypeError(f"uniform_dequantize of non-quantized {x.dtype} values")
    return dequantize(x)


def _bitcast_family(original):
    """bitcast_convert between a quantized type and its storage type reinterprets the storage
    integers (the verifier allows no other quantized bitcast); f6 ones move bit patterns."""
    def handler(ctx, op, x):
        rtype = op.result_types[0]
        if isinstance(x, QArray) and type(x.qtype) is T.Float6Type \
                or _is_q(rtype) and type(rtype.quant) is T.Float6Type:
            return _bitcast_f6(x, rtype)
        if _is_q(rtype):
            return QArray(_storage(x) if isinstance(x, QArray) else original(ctx, op, x),
                          rtype.quant)
        return original(ctx, op, _storage(x))
    return handler


def _bitcast_f6(x, rtype):
    """f6 <-> f6 keeps the bit patterns; f6 <-> i1/i2/ui2 splits them into (or packs them
    from) a trailing dimension of 6 or 3 lanes, least significant bits first."""
    if isinstance(x, QArray):
        bits = x.storage
        if _is_q(rtype):
            return wrap_storage(bits, rtype.quant)
        width = T.bit_width(rtype.dtype)
        shifts = (np.arange(6 // width) * width).astype(np.uint8)
        lanes = lax.shift_right_logical(
            lax.broadcast_in_dim(bits, bits.shape + shifts.shape, tuple(range(bits.ndim))),
            lax.broadcast_in_dim(shifts, bits.shape + shifts.shape, (bits.ndim,)))
        lanes = lax.bitwise_and(lanes, lax.full_like(lanes, (1 << width) - 1))
        if rtype.dtype == np.bool_:
            return lanes != lax.full_like(lanes, 0)
        if not T.is_unsigned(rtype.dtype):  # sign-extend each lane
            lanes = lax.convert_element_type(lanes, np.int8)
            top = lax.full_like(lanes, 1 << (width - 1))
            lanes = lax.sub(lax.bitwise_xor(lanes, top), top)
        return lax.convert_element_type(lanes, rtype.dtype)
    width = T.bit_width(x.dtype)
    lanes = lax.convert_element_type(x, np.int8 if width > 1 else np.uint8)
    lanes = lax.convert_element_type(
        lax.bitwise_and(lanes, lax.full_like(lanes, (1 << width) - 1)), np.uint8)
    shifts = (np.arange(x.shape[-1]) * width).astype(np.uint8)
    lanes = lax.shift_left(lanes, lax.broadcast_in_dim(shifts, lanes.shape, (lanes.ndim - 1,)))
    bits = lax.reduce(lanes, np.uint8(0), lax.bitwise_or, (lanes.ndim - 1,))
    return wrap_storage(bits, rtype.quant)


def _plain_prepare(prepare):
    """The original prepare, shown the storage types of quantized results."""
    def wrapped(op):
        if prepare is None:
            return op.attrs
        if not any(_is_q(t) for t in op.result_types):
            return prepare(op)
        return _view(op, [_plain(t) for t in op.result_types], prepare).params
    return wrapped


def _dot_result_dim(op, lhs_ndim, rhs_ndim, rhs_dim):
    """Where rhs dimension `rhs_dim` lands in the result, or None if it is contracted."""
    if _mnemonic(op.name) == "convolution":
        dims = op.attrs.get("dimension_numbers")
        if dims is None or not hasattr(dims, "kernel_output_feature_dimension"):
            return None
        return dims.output_feature_dimension if rhs_dim == dims.kernel_output_feature_dimension \
            else None
    if _mnemonic(op.name) == "dot":
        return lhs_ndim - 1 if rhs_dim == rhs_ndim - 1 and rhs_ndim == 2 else None
    dims = op.attrs.get("dot_dimension_numbers")
    if not hasattr(dims, "rhs_batching_dimensions"):
        return None
    batch, contract = dims.rhs_batching_dimensions, dims.rhs_contracting_dimensions
    if rhs_dim in contract:
        return None
    if rhs_dim in batch:
        return batch.index(rhs_dim)
    lhs_free = lhs_ndim - len(dims.lhs_batching_dimensions) - len(dims.lhs_contracting_dimensions)
    free = [d for d in range(rhs_ndim) if d not in batch and d not in contract]
    return len(batch) + lhs_free + free.index(rhs_dim)


def _dot_prepare(prepare):
    wrapped = _wrap_prepare("dot", prepare)

    def dot_prepare(op):
        plan = wrapped(op)
        if type(plan) is _Plan and type(op.result_types[0].quant) is QuantizedType:
            plan = dataclasses.replace(plan, integer={
                wide: _try_view(op, [_as_dtype(t, wide) for t in op.result_types], prepare)
                for wide in (np.int32, np.int64)})
        return plan
    return dot_prepare


def _f6_dot(op, lhs, rhs):
    """dot_general / dot into an f6 result as the spec defines it (a reduce in the result
    type): every product rounded to f6, then summed one contracting index at a time in
    row-major order, every partial sum rounded (as the reference interpreter does). An
    f32 accumulation would differ by far more than rounding: f6 saturates at +-7.5 / +-28."""
    from shlo2jax.quant import float6
    ft = op.result_types[0].quant
    lhs, rhs = _deq(lhs), _deq(rhs)
    wide = np.float64 if np.float64 in (np.dtype(lhs.dtype), np.dtype(rhs.dtype)) else np.float32
    lhs, rhs = lax.convert_element_type(lhs, wide), lax.convert_element_type(rhs, wide)
    if _mnemonic(op.name) == "dot":
        lb, rb, lc, rc = (), (), (lhs.ndim - 1,), (0,)
    else:
        d = op.attrs["dot_dimension_numbers"]
        lb, rb = d.lhs_batching_dimensions, d.rhs_batching_dimensions
        lc, rc = d.lhs_contracting_dimensions, d.rhs_contracting_dimensions
    lf = tuple(i for i in range(lhs.ndim) if i not in lb and i not in lc)
    rf = tuple(i for i in range(rhs.ndim) if i not in rb and i not in rc)
    size = lambda x, dims: int(np.prod([x.shape[i] for i in dims], dtype=np.int64))
    batch, m, n, k = size(lhs, lb), size(lhs, lf), size(rhs, rf), size(lhs, lc)
    lhs = lax.reshape(lax.transpose(lhs, lb + lf + lc), (batch, m, k))
    rhs = lax.reshape(lax.transpose(rhs, rb + rf + rc), (batch, n, k))

    def rounded(x):
        return lax.convert_element_type(float6.decode(float6.encode(x, ft), ft), wide)

    def step(i, acc):
        a = lax.dynamic_index_in_dim(lhs, i, 2, keepdims=True)   # (batch, m, 1)
        b = lax.dynamic_index_in_dim(rhs, i, 2, keepdims=False)  # (batch, n)
        return rounded(acc + rounded(a * b[:, None, :]))
    acc = lax.fori_loop(0, k, step, lax.full((batch, m, n), 0, wide))
    return quantize(lax.reshape(acc, tuple(op.result_types[0].shape)), ft)


def _dot_family(original):
    generic = _wrap_handler("dot", original)

    def handler(ctx, op, lhs, rhs):
        rq = op.result_types[0].quant
        if type(rq) is T.Float6Type and _mnemonic(op.name) in ("dot_general", "dot"):
            return _f6_dot(op, lhs, rhs)
        plan = op.params
        if (type(plan) is not _Plan or plan.integer is None or type(lhs) is not QArray
                or type(rhs) is not QArray or lhs.qtype.per_axis or straight_through_active()):
            return generic(ctx, op, lhs, rhs)
        rq, lq, out_q = rhs.qtype, lhs.qtype, op.result_types[0].quant
        scale_dim = None
        if rq.per_axis:
            scale_dim = _dot_result_dim(op, lhs.ndim, rhs.ndim, rq.quantization_dimension)
            if scale_dim is None:
                return generic(ctx, op, lhs, rhs)
        wide = np.int64 if max(T.bit_width(lq.storage_dtype), T.bit_width(rq.storage_dtype)) > 8 \
            else np.int32
        view = plan.integer[wide]
        if view is None:
            return generic(ctx, op, lhs, rhs)
        _, lzp = lq.params(lhs.ndim)
        _, rzp = rq.params(rhs.ndim)
        centered_l = lax.sub(lax.convert_element_type(lhs.storage, wide), lzp.astype(wide))
        centered_r = lax.sub(lax.convert_element_type(rhs.storage, wide), rzp.astype(wide))
        acc = original(ctx, view, centered_l, centered_r)
        et = out_q.expressed_dtype
        scale = np.asarray(rq.scales, np.float64) * lq.scales[0]
        if scale_dim is not None:
            shape = [1] * acc.ndim
            shape[scale_dim] = len(rq.scales)
            scale = scale.reshape(shape)
        else:
            scale = scale.reshape(())
        value = lax.mul(lax.convert_element_type(acc, et), scale.astype(et))
        return quantize(value, out_q)
    return handler


def _convert_family(original):
    """convert to f6 encodes the operand in its own precision: going through f32 first would
    round twice (an f64 just above a tie would land on the tie, then on the even side)."""
    generic = _wrap_handler("convert", original)

    def handler(ctx, op, x):
        rtype = op.result_types[0]
        if not (_is_q(rtype) and type(rtype.quant) is T.Float6Type):
            return generic(ctx, op, x)
        x = _deq(x)
        if T.is_complex(x.dtype):
            x = lax.real(x)  # the spec keeps the real part
        return quantize(x, rtype.quant)
    return handler


# --------------------------------------------------------------------------- wrapping

_SPECIAL = {
    "bitcast_convert": lambda rule: (_bitcast_family(rule.handler), _plain_prepare(rule.prepare)),
    "dot_general": lambda rule: (_dot_family(rule.handler), _dot_prepare(rule.prepare)),
    "dot": lambda rule: (_dot_family(rule.handler), _dot_prepare(rule.prepare)),
    "convolution": lambda rule: (_dot_family(rule.handler), _dot_prepare(rule.prepare)),
    "convert": lambda rule: (_convert_family(rule.handler),
                             _wrap_prepare(rule.name, rule.prepare)),
}
_OWN = frozenset({"stablehlo.uniform_quantize", "mhlo.uniform_quantize",
                  "stablehlo.uniform_dequantize", "mhlo.uniform_dequantize"})
_WRAPPED: dict = {}  # id(rule) -> (rule, its wrapped rule)


@register_rule_wrapper("carried")
def carried_rule(rule: OpRule) -> OpRule:
    """The rule for an op that touches quantized or f6 values (the decoder asks, at load).

    Any rule is wrapped, built-in or registered by the user; routing ops (calls, tuples,
    custom calls, ...) and checks get the values as they are."""
    name = rule.name
    if name in _OWN or name in _PASS_THROUGH or name.startswith("check."):
        return rule
    cached = _WRAPPED.get(id(rule))
    if cached is not None and cached[0] is rule:
        return cached[1]
    special = _SPECIAL.get(_mnemonic(name))
    if special is not None:
        handler, prepare = special(rule)
    else:
        handler, prepare = _wrap_handler(name, rule.handler), _wrap_prepare(name, rule.prepare)
    wrapped = OpRule(name, handler, prepare)
    _WRAPPED[id(rule)] = (rule, wrapped)
    return wrapped
