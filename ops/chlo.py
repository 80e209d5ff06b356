"""CHLO ("client HLO") ops.

jax lowers `lax.erf`, `lax.lgamma`, `lax.asin`, ... to exactly these chlo ops, so mapping
each one back to its lax function reproduces what XLA computes for it. The
`chlo.broadcast_*` ops broadcast their operands and then reuse the translation of
the same-shape op (`stablehlo.add`, `stablehlo.compare`, `chlo.zeta`, ...).
"""

from __future__ import annotations

import re
from typing import Callable, NamedTuple, Optional

import jax.numpy as jnp
import numpy as np
from jax import lax

from shlo2jax import registry
from shlo2jax import value_types as T
from shlo2jax.attributes import Opaque
from shlo2jax.module import Op
from shlo2jax.registry import Unsupported, register_op

# ----------------------------------------------------------------- unary ops

# The mhlo dialect has its own copies of some of these ops (with the same semantics).
_UNARY = {
    ("chlo.acos", "mhlo.acos"): lax.acos,
    ("chlo.acosh", "mhlo.acosh"): lax.acosh,
    ("chlo.asin", "mhlo.asin"): lax.asin,
    ("chlo.asinh", "mhlo.asinh"): lax.asinh,
    ("chlo.atan",): lax.atan,
    ("chlo.atanh", "mhlo.atanh"): lax.atanh,
    ("chlo.cosh", "mhlo.cosh"): lax.cosh,
    ("chlo.sinh", "mhlo.sinh"): lax.sinh,
    ("chlo.tan",): lax.tan,
    ("chlo.bessel_i1e",): lax.bessel_i1e,
    ("chlo.digamma",): lax.digamma,
    ("chlo.lgamma",): lax.lgamma,
    ("chlo.erf", "mhlo.erf"): lax.erf,
    ("chlo.erfc",): lax.erfc,
    ("chlo.erf_inv",): lax.erf_inv,
    ("chlo.square",): lax.square,
}
# The chlo verifier admits complex operands for these, but there is no complex lowering.
_REAL_ONLY = {"chlo.bessel_i1e"}


def _widened(fn):
    """`fn` computed in f32 for f16 and 8-bit and narrower floats.

    XLA's chlo lowerings have no widening for f8 (and lax's erfc/bessel_i1e refuse them),
    and f8 arithmetic would lose all accuracy; in f16 some (acosh) are a few ulp off.
    """
    def run(*args):
        dtype = args[0].dtype
        if not (T.is_float(dtype) and (T.bit_width(dtype) < 16 or dtype == np.float16)):
            return fn(*args)
        wide = [lax.convert_element_type(a, np.float32) for a in args]
        return lax.convert_element_type(fn(*wide), dtype)
    return run


def _reject_complex(op):
    if T.is_complex(op.result_types[0].dtype):
        raise Unsupported(f"{op.name} of a complex operand (XLA has no lowering for it)")


def _register_unary(names, fn):
    fn = _widened(fn)

    @register_op(*names, prepare=_reject_complex if names[0] in _REAL_ONLY else None)
    def unary(ctx, op, x):
        return fn(x)
    unary.__name__ = unary.__qualname__ = names[0].split(".", 1)[1]


for _names, _fn in _UNARY.items():
    _register_unary(_names, _fn)

# A `stablehlo.composite` named after one of these chlo ops stands for it (ops.composite), as
# StableHLO's serialization writes a chlo op its portable form cannot hold (jax 0.12 exports
# `chlo.erfc` so).
registry.OP_COMPOSITES.update({name: _widened(fn) for names, fn in _UNARY.items()
                               for name in names
                               if name.startswith("chlo.") and name not in _REAL_ONLY})


@register_op("chlo.conj")
def conj(ctx, op, x):
    # lax.conj of a real array would return a complex one; chlo.conj keeps real types.
    return lax.conj(x) if T.is_complex(x.dtype) else x


def _has_infinity(dtype) -> bool:
    """False for the types without infinities (f8E4M3FN, f4E2M1FN, ...)."""
    return bool(np.isinf(np.array(np.inf).astype(dtype).astype(np.float32)))


def _is_inf_like(x, signs):
    if not _has_infinity(x.dtype):
        return jnp.zeros(x.shape, np.bool_)
    result = None
    for sign in signs:
        hit = lax.eq(x, lax.full_like(x, sign * np.inf))
        result = hit if result is None else lax.bitwise_or(result, hit)
    return result


@register_op("chlo.is_inf")
def is_inf(ctx, op, x):
    return _is_inf_like(x, (1, -1))


@register_op("chlo.is_pos_inf")
def is_pos_inf(ctx, op, x):
    return _is_inf_like(x, (1,))


@register_op("chlo.is_neg_inf")
def is_neg_inf(ctx, op, x):
    return _is_inf_like(x, (-1,))


# ---------------------------------------------------------------- binary ops

@register_op("chlo.next_after")
def next_after(ctx, op, x, y):
    return lax.nextafter(x, y)


_polygamma = _widened(lax.polygamma)
_zeta = _widened(lax.zeta)


@register_op("chlo.polygamma")
def polygamma(ctx, op, n, x):
    return _polygamma(n, x)


@register_op("chlo.zeta")
def zeta(ctx, op, x, q):
    return _zeta(x, q)


_WIDE = {False: np.dtype(np.int64), True: np.dtype(np.uint64)}


@register_op("chlo.mulhi", "mhlo.mulhi")
def mulhi(ctx, op, x, y):
    unsigned = T.is_unsigned(x.dtype)
    bits = T.bit_width(x.dtype)
    if bits < 64:
        # The full product of two N-bit integers fits in 64 bits for N <= 32.
        wide = _WIDE[unsigned]
        product = lax.mul(lax.convert_element_type(x, wide), lax.convert_element_type(y, wide))
        shift = jnp.full(product.shape, bits, wide)
        high = (lax.shift_right_logical if unsigned else lax.shift_right_arithmetic)(product, shift)
        return lax.convert_element_type(high, x.dtype)
    if unsigned:
        return _umulhi64(x, y)
    # Signed high word from the unsigned one: hi_s = hi_u - (x < 0 ? y : 0) - (y < 0 ? x : 0).
    ux, uy = lax.bitcast_convert_type(x, np.uint64), lax.bitcast_convert_type(y, np.uint64)
    high = _umulhi64(ux, uy)
    zero = jnp.zeros(x.shape, np.uint64)
    high = lax.sub(high, lax.select(lax.lt(x, jnp.zeros_like(x)), uy, zero))
    high = lax.sub(high, lax.select(lax.lt(y, jnp.zeros_like(y)), ux, zero))
    return lax.bitcast_convert_type(high, x.dtype)


def _umulhi64(x, y):
    """High 64 bits of the 128-bit product of two uint64 arrays, from 32-bit halves."""
    mask = jnp.full(x.shape, 0xFFFFFFFF, np.uint64)
    s32 = jnp.full(x.shape, 32, np.uint64)
    x_lo, x_hi = lax.bitwise_and(x, mask), lax.shift_right_logical(x, s32)
    y_lo, y_hi = lax.bitwise_and(y, mask), lax.shift_right_logical(y, s32)
    lo_lo, hi_lo = lax.mul(x_lo, y_lo), lax.mul(x_hi, y_lo)
    lo_hi, hi_hi = lax.mul(x_lo, y_hi), lax.mul(x_hi, y_hi)
    # Each partial sum stays below 2**64.
    cross = lax.add(lax.add(lax.shift_right_logical(lo_lo, s32), lax.bitwise_and(hi_lo, mask)),
                    lo_hi)
    return lax.add(lax.add(hi_hi, lax.shift_right_logical(hi_lo, s32)),
                   lax.shift_right_logical(cross, s32))


# ------------------------------------------------------------------ constants

@register_op("chlo.constant", prepare=lambda op: op.attrs["value"])
def constant(ctx, op):
    return op.params


_COMPLEX_NUMBER_RE = re.compile(r"#complex\.number<:\w+ ([-+.\w]+), ([-+.\w]+)>.*")


def _prepare_constant_like(op):
    value = op.attrs["value"]
    if isinstance(value, Opaque):
        m = _COMPLEX_NUMBER_RE.fullmatch(value.text)
        try:
            value = complex(float(m.group(1)), float(m.group(2)))
        except (AttributeError, ValueError):
            raise Unsupported(f"constant_like value {value.text}") from None
    value = np.asarray(value)
    if value.size != 1:
        raise Unsupported("constant_like value is not a scalar")
    return value.reshape(()).astype(op.result_types[0].dtype)


@register_op("chlo.constant_like", prepare=_prepare_constant_like)
def constant_like(ctx, op, like):
    return lax.full(like.shape, op.params, op.params.dtype)


# ---------------------------------------------------------------- misc ops

@register_op("chlo.top_k", prepare=lambda op: op.attrs["k"])
def top_k(ctx, op, x):
    return lax.top_k(x, op.params)


class TopK(NamedTuple):
    k: int
    largest: bool


@register_op("mhlo.topk", prepare=lambda op: TopK(op.attrs["k"], op.attrs.get("largest", True)))
def mhlo_topk(ctx, op, x):
    k, largest = op.params
    if largest:
        return lax.top_k(x, k)
    # Smallest first, ties by lower index: a stable ascending sort carrying the indices.
    indices = lax.broadcasted_iota(np.int32, x.shape, x.ndim - 1)
    values, indices = lax.sort((x, indices), dimension=x.ndim - 1, is_stable=True, num_keys=1)
    return values[..., :k], indices[..., :k]


class Scan(NamedTuple):
    n_outputs: int
    n_inputs: int
    dim: int
    length: Optional[int]
    reverse: bool


def _prepare_scan(op):
    # Operands are (inputs..., inits...); results and body outputs are (outputs..., carries...).
    n_inputs = op.attrs["operandSegmentSizes"][0]
    n_outputs = op.attrs["resultSegmentSizes"][0]
    dim = op.attrs["dimension"]
    length = op.result_types[0].shape[dim] if n_outputs else None
    if length is None:
        length = op.attrs.get("scan_dim_size")
    return Scan(n_outputs, n_inputs, dim, length, bool(op.attrs.get("is_reverse", False)))


@register_op("chlo.scan", prepare=_prepare_scan)
def scan(ctx, op, *operands):
    p = op.params
    n_in, n_out, dim = p.n_inputs, p.n_outputs, p.dim
    body = ctx.region(op.regions[0])

    def step(carry, xs):
        outs = body(*xs, *carry)
        return tuple(outs[n_out:]), tuple(outs[:n_out])

    xs = tuple(jnp.moveaxis(x, dim, 0) for x in operands[:n_in])
    length = p.length if n_in == 0 else None
    carry, ys = lax.scan(step, tuple(operands[n_in:]), xs, length=length, reverse=p.reverse)
    return tuple(jnp.moveaxis(y, 0, dim) for y in ys) + tuple(carry)


_RAGGED_FIELD_RE = re.compile(r"(\w+)\s*=\s*\[([^\]]*)\]")
_PRECISION_RE = re.compile(r"#(?:chlo|mhlo)<precision (\w+)>")


class RaggedDot(NamedTuple):
    dims: lax.RaggedDotDimensionNumbers
    precision: Optional[tuple]
    dtype: object  # the result type


def _prepare_ragged_dot(op):
    # The mhlo spelling nests the dot dimensions in `#mhlo.dot<...>`; the field names agree.
    text = op.attrs["ragged_dot_dimension_numbers"].text
    fields = {name: tuple(int(v) for v in values.split(",") if v.strip())
              for name, values in _RAGGED_FIELD_RE.findall(text)}
    get = lambda name: fields.get(name, ())  # noqa: E731  (printing drops empty fields)
    dims = lax.RaggedDotDimensionNumbers(
        dot_dimension_numbers=((get("lhs_contracting_dimensions"),
                                get("rhs_contracting_dimensions")),
                               (get("lhs_batching_dimensions"), get("rhs_batching_dimensions"))),
        lhs_ragged_dimensions=get("lhs_ragged_dimensions"),
        rhs_group_dimensions=get("rhs_group_dimensions"))
    precision = None
    if "precision_config" in op.attrs:
        names = [_PRECISION_RE.fullmatch(p.text).group(1) for p in op.attrs["precision_config"]]
        precision = tuple(lax.Precision[n] for n in names)
    return RaggedDot(dims, precision, op.result_types[0].dtype)


@register_op("chlo.ragged_dot", "mhlo.ragged_dot", prepare=_prepare_ragged_dot)
def ragged_dot(ctx, op, lhs, rhs, group_sizes):
    p = op.params
    return lax.ragged_dot_general(lhs, rhs, group_sizes, p.dims, precision=p.precision,
                                  preferred_element_type=p.dtype)


# ------------------------------------------------------------ broadcasting ops

# Each broadcasting op -> the same-shape op it reduces to.
_BROADCAST_TARGETS = {
    "chlo.broadcast_add": "stablehlo.add",
    "chlo.broadcast_atan2": "stablehlo.atan2",
    "chlo.broadcast_divide": "stablehlo.divide",
    "chlo.broadcast_maximum": "stablehlo.maximum",
    "chlo.broadcast_minimum": "stablehlo.minimum",
    "chlo.broadcast_multiply": "stablehlo.multiply",
    "chlo.broadcast_power": "stablehlo.power",
    "chlo.broadcast_remainder": "stablehlo.remainder",
    "chlo.broadcast_shift_left": "stablehlo.shift_left",
    "chlo.broadcast_shift_right_arithmetic": "stablehlo.shift_right_arithmetic",
    "chlo.broadcast_shift_right_logical": "stablehlo.shift_right_logical",
    "chlo.broadcast_subtract": "stablehlo.subtract",
    "chlo.broadcast_and": "stablehlo.and",
    "chlo.broadcast_or": "stablehlo.or",
    "chlo.broadcast_xor": "stablehlo.xor",
    "chlo.broadcast_compare": "stablehlo.compare",
    "chlo.broadcast_complex": "stablehlo.complex",
    "chlo.broadcast_select": "stablehlo.select",
    "chlo.broadcast_next_after": "chlo.next_after",
    "chlo.broadcast_polygamma": "chlo.polygamma",
    "chlo.broadcast_zeta": "chlo.zeta",
}

_CHLO_ENUM_RE = re.compile(r"#chlo<\w+ (\w+)>")


class Broadcasting(NamedTuple):
    handler: Callable          # the same-shape op's handler
    inner: Op                  # a view of this op as the same-shape op, its params prepared
    dims: Optional[tuple]      # broadcast_dimensions of the lower-rank operand


def _prepare_broadcast(op):
    """Stands up the same-shape op this one reduces to, with its own prepare run."""
    target = _BROADCAST_TARGETS[op.name]
    rule = registry.lookup(target)
    if rule is None:
        raise Unsupported(f"needs a translation for {target}")
    attrs = {}
    for key in ("comparison_direction", "compare_type"):
        if key in op.attrs:
            value = _CHLO_ENUM_RE.fullmatch(op.attrs[key].text).group(1)
            if value != "NOTYPE":
                attrs[key] = value
    inner = Op(target, op.operands, op.results, op.result_types, attrs, (), op.location)
    if rule.prepare is not None:
        inner.params = rule.prepare(inner)
    return Broadcasting(rule.handler, inner, op.attrs.get("broadcast_dimensions"))


def _broadcast_operands(operands, dims):
    """numpy-style broadcasting; `dims` (if given) maps the lower-rank operand's dimensions."""
    rank = max(x.ndim for x in operands)
    placed = []
    for x in operands:
        if dims is not None and x.ndim < rank:
            placed.append(tuple(dims))
        else:
            placed.append(tuple(range(rank - x.ndim, rank)))
    shape = [1] * rank
    for x, where in zip(operands, placed):
        for size, d in zip(x.shape, where):
            if size != 1:
                shape[d] = size
    shape = tuple(shape)
    return [x if x.shape == shape else lax.broadcast_in_dim(x, shape, where)
            for x, where in zip(operands, placed)]


@register_op(*_BROADCAST_TARGETS, prepare=_prepare_broadcast)
def broadcast_op(ctx, op, *operands):
    p = op.params
    return p.handler(ctx, p.inner, *_broadcast_operands(operands, p.dims))
