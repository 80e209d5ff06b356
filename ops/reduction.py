"""Reductions and region-driven ops: reduce, reduce_window, select_and_scatter, map, sort.

Bodies are regions; a body that is one known monoid op maps to the lax monoid
reductions (fast, differentiable). Any other body runs as the region itself.
The spec lets an implementation apply init values any number of times, and XLA
does (it splits large reductions, and skips reduce_window padding); the reference
interpreter applies each exactly once, first. To match it, general bodies reduce
under a "has a value" flag whose init is a true identity, and the real init is
applied once afterwards.
"""

from __future__ import annotations

import itertools
import re
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from shlo2jax import compat
from shlo2jax import value_types as T
from shlo2jax.module import Region
from shlo2jax.ops._common import (explicit_captures, ints, non_differentiable, replayable,
                                  single_or_tuple)
from shlo2jax.registry import Unsupported, register_op


# ------------------------------------------------------------------ body analysis

_MONOIDS = {
    "add": lax.add, "multiply": lax.mul, "maximum": lax.max, "minimum": lax.min,
    "and": lax.bitwise_and, "or": lax.bitwise_or, "xor": lax.bitwise_xor,
}
# Applying these more than once with the same init changes nothing.
_IDEMPOTENT = frozenset({"maximum", "minimum", "and", "or"})


def _monoid(region: Region):
    """The op name when `region` is `return op(arg0, arg1)` for a known commutative monoid op."""
    if len(region.args) != 2 or len(region.ops) != 1 or region.captures:
        return None
    body = region.ops[0]
    name = body.name.split(".", 1)[1]
    if (name in _MONOIDS and body.name.split(".")[0] in ("stablehlo", "mhlo")
            and set(body.operands) == set(region.args) and len(set(body.operands)) == 2
            and region.outputs == body.results):
        return name
    return None


def _bool_monoid(name, dtype):
    """On i1, add is logical or and multiply logical and (spec); max/min are the same."""
    if dtype == np.bool_:
        return {"add": "or", "multiply": "and", "maximum": "or", "minimum": "and"}.get(name, name)
    return name


def _is_identity(name, init) -> bool:
    """Whether `init` is a concrete (numpy) value that is exactly the identity of `name`."""
    if not isinstance(init, (np.ndarray, np.generic)):
        return False
    value = np.asarray(init)
    dtype = value.dtype
    if name == "add":
        # +0 is the identity jax's reduce_sum uses; a -0 init must stay visible.
        if T.is_complex(dtype):
            return value == 0 and not np.signbit(value.real) and not np.signbit(value.imag)
        return bool(value == 0) and not (T.is_float(dtype) and np.signbit(value.astype(np.float64)))
    if name == "multiply":
        return bool(value == 1)
    if name in ("xor", "or"):
        return bool(value == 0)
    if T.is_complex(dtype):
        return False
    if name == "and":
        return bool(value == (True if dtype == np.bool_ else np.array(-1).astype(dtype)))
    if name in ("maximum", "minimum"):
        if dtype == np.bool_:
            return bool(value == (name == "minimum"))
        if T.is_float(dtype):
            return bool(value == (-np.inf if name == "maximum" else np.inf))
        info = ml_dtypes.iinfo(dtype) if T.is_integer(dtype) else None
        return info is not None and bool(value == (info.min if name == "maximum" else info.max))
    return False


def _monoid_reduce(reducer, x, init, name, *args):
    """A monoid lax reduction; an idempotent op with another init re-applies it, harmlessly,
    since XLA may drop it (e.g. a reduce over no dimensions)."""
    out = reducer(x, init, _MONOIDS[name], *args)
    if name in _IDEMPOTENT and not _is_identity(name, init):
        out = _MONOIDS[name](out, lax.broadcast_in_dim(init, out.shape, ()))
    return out


def _elementwise(fn, arrays, shape):
    """Applies a scalar region callable to equally shaped arrays element by element."""
    arrays = [lax.broadcast_in_dim(a, shape, ()) if a.ndim == 0 and shape else a for a in arrays]
    size = int(np.prod(shape, dtype=np.int64))
    flat = [lax.reshape(a, (size,)) for a in arrays]
    outs = jax.vmap(lambda *xs: tuple(fn(*xs)))(*flat)
    return [lax.reshape(o, tuple(shape)) for o in outs]


def _flagged(body):
    """`body` lifted to (has_value, values...) pairs: (False, ...) is then a true identity."""
    def comp(a, b):
        fa, va = a[0], a[1:]
        fb, vb = b[0], b[1:]
        out = body(*va, *vb)
        picked = [lax.select(fa & fb, o, lax.select(fa, x, y)) for o, x, y in zip(out, va, vb)]
        return (fa | fb, *picked)
    return comp


def _promoted(values, dtypes) -> list:
    """`values` in the body's element types, which may be wider than the operands' (spec:
    "promotable" reduce, reduce_window, select_and_scatter bodies accumulate in the wider
    type; the init values keep the operands' type). Concrete (numpy) values stay concrete,
    so an identity init is still recognised."""
    out = []
    for x, dt in zip(values, dtypes):
        if x.dtype == dt:
            out.append(x)
        elif isinstance(x, (np.ndarray, np.generic)):
            out.append(np.asarray(x).astype(dt))
        else:
            out.append(lax.convert_element_type(x, dt))
    return out


# ------------------------------------------------------------------ reduce

class Reduce(NamedTuple):
    dims: tuple
    monoid: Optional[str]      # the body's one monoid op (one input), else None
    dtypes: tuple              # the result (accumulation) types
    n: int                     # inputs (as many init values follow)
    selection: Optional[bool]  # several inputs whose body picks one element (argmax, ...)


def _reduce_prepare(op):
    n = len(op.results)
    return Reduce(ints(op.attrs["dimensions"]), _monoid(op.regions[0]) if n == 1 else None,
                  tuple(t.dtype for t in op.result_types), n,
                  _is_selection(op.regions[0], n) if n > 1 else None)


def _is_selection(region: Region, n: int):
    """True when every output is `select(pred, lhs_i, rhs_i)` of its own pair of arguments
    (argmax / argmin and other pick-one-element reductions): each result is then one
    input element, which is what carries the derivative."""
    producers = {o.results[0]: o for o in region.ops if len(o.results) == 1}
    for i, out in enumerate(region.outputs):
        sel = producers.get(out)
        if sel is None or sel.name.split(".", 1)[1] != "select" or \
                set(sel.operands[1:]) != {region.args[i], region.args[n + i]}:
            return None
    return True


def _general_reduce(body, inputs, inits, dims):
    flag = lax.full(inputs[0].shape, True)
    has, *partial = lax.reduce((flag, *inputs), (np.bool_(False), *inits), _flagged(body), dims)
    shape = partial[0].shape
    if 0 in shape:
        return partial
    finished = _elementwise(body, [*inits, *partial], shape)
    if all(inputs[0].shape[d] for d in dims):
        return finished
    # An empty reduction is its init alone.
    return [lax.select(has, f, lax.broadcast_in_dim(i, shape, ())) for f, i in zip(finished, inits)]


def _selection(ctx, op, inputs, inits, forward, candidates):
    """A selection (reduce or reduce_window) whose derivative is that of the element it
    picked: the tangent of each output is the mean tangent of the candidate elements equal
    (in every operand) to the picked tuple; nothing flows where no element matches (e.g. the
    init was kept). With an index operand riding along (argmax) the picked tuple is unique,
    so this is the one-hot of the winning position, whichever way the body broke the tie.

    forward(body, xs, inits) -> outputs; candidates(x, fill, out_shape) -> (array, dims):
    each output's candidate elements of `x` along `dims` of the array, the other axes being
    the output's (the reduced dims themselves for reduce; a trailing window axis for
    reduce_window, where padding holds `fill`)."""
    captured, bind = explicit_captures(ctx, op.regions[0])

    @jax.custom_jvp
    def run(caps, inputs, inits):
        return tuple(forward(bind(caps)[0], list(inputs), list(inits)))

    # Captured values only steer the selection (outputs are selects of the arguments).
    @run.defjvp
    def _jvp(primals, tangents):
        (caps, xs, inits), (_, txs, tinits) = primals, tangents
        outs = run(caps, xs, inits)
        mask = dims = None
        for x, i, o in zip(xs, inits, outs):
            view, dims = candidates(x, i, o.shape)
            kept = tuple(d for d in range(view.ndim) if d not in dims)
            equal = view == lax.broadcast_in_dim(o, view.shape, kept)
            mask = equal if mask is None else mask & equal
        count = lax.reduce(lax.convert_element_type(mask, np.int32), np.int32(0), lax.add, dims)
        touts = []
        for t, ti, o in zip(txs, tinits, outs):
            if not jnp.issubdtype(o.dtype, jnp.inexact):
                touts.append(np.zeros(o.shape, jax.dtypes.float0))
                continue
            view, _ = candidates(t, ti, o.shape)
            picked = lax.reduce(lax.select(mask, view, jnp.zeros_like(view)),
                                _identity("add", t.dtype), lax.add, dims)
            picked = picked / lax.convert_element_type(lax.max(count, np.int32(1)), t.dtype)
            # Where no element matched, the init was the result.
            touts.append(lax.select(count > 0, picked, lax.broadcast_in_dim(ti, o.shape, ())))
        return outs, tuple(touts)

    return single_or_tuple(op, list(run(captured, tuple(inputs), tuple(inits))))


@register_op("stablehlo.reduce", "mhlo.reduce", prepare=_reduce_prepare)
@replayable(key=lambda op: op.params)  # (a monoid from its identity: one equation)
def reduce(ctx, op, *args):
    p = op.params
    n, dims = p.n, p.dims
    # Promotable bodies (spec C6) accumulate in a wider type than the inputs.
    inputs, inits = _promoted(args[:n], p.dtypes), _promoted(args[n:], p.dtypes)
    name = _bool_monoid(p.monoid, p.dtypes[0])
    if name in _AD_REDUCE and _has_identity(name, p.dtypes[0]) and \
            not _is_identity(name, inits[0]):
        # Reduce from the identity, which lax turns into its differentiable reductions, then
        # apply the init once (the init may also be traced: jax exports some via a broadcast).
        x = inputs[0]
        out = compat.monoid_reduce(x, _identity(name, x.dtype), _MONOIDS[name], dims)
        if name == "add" and T.is_float(x.dtype):
            # lax sums from +0: a sum of only -0 terms (spec: -0) must stay -0.
            # (jnp.signbit refuses 8/4-bit floats; widening keeps the sign of zero.)
            wide = x if T.bit_width(x.dtype) >= 16 else lax.convert_element_type(x, np.float32)
            negative_zero = jnp.all((x == 0) & jnp.signbit(wide), axis=dims)
            out = lax.select(negative_zero, lax.full_like(out, -0.0), out)
        return _MONOIDS[name](out, lax.broadcast_in_dim(inits[0], out.shape, ()))
    if name is not None and (name in _IDEMPOTENT or _is_identity(name, inits[0])):
        return _monoid_reduce(compat.monoid_reduce, inputs[0], inits[0], name, dims)
    if p.selection is not None:
        return _selection(ctx, op, inputs, inits,
                          lambda body, xs, inits: _general_reduce(body, xs, inits, dims),
                          lambda x, fill, out_shape: (x, dims))
    captured, bind = explicit_captures(ctx, op.regions[0])
    run = non_differentiable(
        lambda caps, xs, inits: tuple(_general_reduce(bind(caps)[0], list(xs), list(inits), dims)),
        op, "a reduce body that is neither a monoid nor a selection")
    return single_or_tuple(op, list(run(captured, tuple(inputs), tuple(inits))))


# ------------------------------------------------------------------ reduce_window

class ReduceWindow(NamedTuple):
    n: int                 # inputs (as many init values follow)
    window: tuple
    strides: tuple
    base: tuple            # base dilations
    wdil: tuple            # window dilations
    padding: tuple         # (low, high) per dimension
    monoid: Optional[str]  # the body's one monoid op (one input), else None
    dtypes: tuple          # the result (accumulation) types
    selection: Optional[bool]  # several inputs whose body picks one element (argmax, ...)


def _reduce_window_prepare(op):
    n = len(op.results)
    rank = len(ints(op.attrs["window_dimensions"]))
    attrs = op.attrs
    ones = (1,) * rank
    padding = attrs.get("padding")
    padding = (tuple((0, 0) for _ in range(rank)) if padding is None
               else tuple((int(lo), int(hi)) for lo, hi in np.asarray(padding).reshape(rank, 2)))
    return ReduceWindow(
        n=n,
        window=ints(attrs["window_dimensions"]),
        strides=ints(attrs["window_strides"]) if "window_strides" in attrs else ones,
        base=ints(attrs["base_dilations"]) if "base_dilations" in attrs else ones,
        wdil=ints(attrs["window_dilations"]) if "window_dilations" in attrs else ones,
        padding=padding,
        monoid=_monoid(op.regions[0]) if n == 1 else None,
        dtypes=tuple(t.dtype for t in op.result_types),
        selection=_is_selection(op.regions[0], n) if n > 1 else None)


@register_op("stablehlo.reduce_window", "mhlo.reduce_window", prepare=_reduce_window_prepare)
def reduce_window(ctx, op, *args):
    p = op.params
    n = p.n
    inputs, inits = _promoted(args[:n], p.dtypes), _promoted(args[n:], p.dtypes)
    name = _bool_monoid(p.monoid, p.dtypes[0])
    if name in _AD_WINDOW and _has_identity(name, p.dtypes[0]) and \
            not _is_identity(name, inits[0]):
        return _ad_reduce_window(inputs[0], inits[0], name, p)
    # XLA skips padding where the spec pads with init: the same only for an identity
    # init or an idempotent body.
    if name in _IDEMPOTENT or (name == "add" and _is_identity(name, inits[0])):
        return _monoid_reduce(lax.reduce_window, inputs[0], inits[0], name, p.window,
                              p.strides, p.padding, p.base, p.wdil)
    if p.selection is not None:
        # Argmax windows (XLA:CPU writes select_and_scatter so): each window's elements
        # along a trailing axis make it a selection reduce over that axis.
        return _selection(ctx, op, inputs, inits,
                          lambda body, xs, inits: _general_reduce_window(body, xs, inits, p),
                          lambda x, fill, out_shape: (_windows(x, fill, p, out_shape),
                                                      (len(out_shape),)))
    captured, bind = explicit_captures(ctx, op.regions[0])
    run = non_differentiable(lambda caps, xs, inits: tuple(_general_reduce_window(
        bind(caps)[0], list(xs), list(inits), p)), op, "a reduce_window body other than "
        "add, max, min or a selection")
    return single_or_tuple(op, list(run(captured, tuple(inputs), tuple(inits))))


def _general_reduce_window(body, inputs, inits, p):
    config = [(lo, hi, b - 1) for (lo, hi), b in zip(p.padding, p.base)]
    padded = [lax.pad(x, i, config) for x, i in zip(inputs, inits)]
    rank = len(p.window)
    flag = lax.full(padded[0].shape, True)
    _, *partial = lax.reduce_window((flag, *padded), (np.bool_(False), *inits), _flagged(body),
                                    p.window, p.strides, ((0, 0),) * rank, (1,) * rank,
                                    p.wdil)
    shape = partial[0].shape
    if 0 in shape:
        return partial
    # Windows are never empty (window_dimensions > 0): the init enters exactly once here.
    return _elementwise(body, [*inits, *partial], shape)


def _windows(x, fill, p, out_shape):
    """`x` padded as the spec pads it (with `fill`, which may be traced: a tangent's init),
    with each window's elements along a new trailing axis: out_shape + (window size,).
    One strided slice per window position, so linear (transposable) and batchable; the
    size is the window's times the output's."""
    size = int(np.prod(p.window))
    if 0 in out_shape:
        return lax.full((*out_shape, size), 0, x.dtype)
    config = [(lo, hi, b - 1) for (lo, hi), b in zip(p.padding, p.base)]
    if any(c != (0, 0, 0) for c in config):
        x = lax.pad(x, fill, config)
    rank = x.ndim
    views = []
    for position in itertools.product(*(range(w) for w in p.window)):
        start = [k * d for k, d in zip(position, p.wdil)]
        limit = [s + (n - 1) * st + 1 for s, n, st in zip(start, out_shape, p.strides)]
        views.append(lax.expand_dims(lax.slice(x, start, limit, p.strides), (rank,)))
    return lax.concatenate(views, rank)


# Monoids lax reduces with differentiable, batchable primitives (given the identity init).
_AD_REDUCE = frozenset({"add", "multiply", "maximum", "minimum"})
_AD_WINDOW = frozenset({"add", "maximum", "minimum"})   # no reduce_window_prod in lax


def _has_identity(name, dtype) -> bool:
    """Whether _identity knows `name`'s identity on `dtype` (complex has no max/min one)."""
    return name in ("add", "multiply") or not (T.is_complex(dtype) or np.dtype(dtype) == np.bool_)


def _identity(name, dtype):
    if name in ("add", "multiply"):
        return np.array(0 if name == "add" else 1, dtype)
    if T.is_float(dtype):
        value = np.array(-np.inf if name == "maximum" else np.inf, dtype)
        if np.isnan(value.astype(np.float32)):   # a float8 type without infinities
            value = np.array(ml_dtypes.finfo(dtype).min if name == "maximum"
                             else ml_dtypes.finfo(dtype).max, dtype)
        return value
    info = ml_dtypes.iinfo(dtype)   # numpy's iinfo knows no sub-byte integer types
    return np.array(info.min if name == "maximum" else info.max, dtype)


def _ad_reduce_window(x, init, name, p):
    """Sum/max/min windows whose init is not a concrete identity (jax exports its inits
    through a broadcast, so they arrive traced).

    lax only picks its differentiable, batchable reduce_window_{sum,max,min} primitives
    for a concrete identity init; so the spec's padding with init is made explicit and
    the init is applied once at the end, which is exactly the spec's result.
    """
    config = [(lo, hi, b - 1) for (lo, hi), b in zip(p.padding, p.base)]
    if any(c != (0, 0, 0) for c in config):
        x = lax.pad(x, init, config)
    rank = x.ndim
    out = lax.reduce_window(x, _identity(name, x.dtype), _MONOIDS[name], p.window,
                            p.strides, ((0, 0),) * rank, (1,) * rank, p.wdil)
    return _MONOIDS[name](out, lax.broadcast_in_dim(init, out.shape, ()))


# ------------------------------------------------------------------ map

def _map_prepare(op):
    rank = len(op.result_types[0].shape)
    if ints(op.attrs.get("dimensions", ())) != tuple(range(rank)):
        raise Unsupported(f"map dimensions {op.attrs.get('dimensions')} (the spec requires all, in order)")
    return None


@register_op("stablehlo.map", "mhlo.map", prepare=_map_prepare)
def map_(ctx, op, *inputs):
    shape = inputs[0].shape
    body = ctx.region(op.regions[0])
    if 0 in shape:
        return single_or_tuple(op, [jnp.zeros(shape, t.dtype) for t in op.result_types])
    return single_or_tuple(op, _elementwise(body, inputs, shape))


# ------------------------------------------------------------------ select_and_scatter

class SelectAndScatter(NamedTuple):
    window: tuple
    strides: tuple
    padding: tuple   # (low, high) per dimension
    offsets: list    # every position within a window, in row-major order
    dtype: np.dtype  # the result's (the scatter body's) element type


def _select_and_scatter_prepare(op):
    attrs = op.attrs
    window = ints(attrs["window_dimensions"])
    rank = len(window)
    padding = attrs.get("padding")
    padding = (((0, 0),) * rank if padding is None
               else tuple((int(lo), int(hi)) for lo, hi in np.asarray(padding).reshape(rank, 2)))
    strides = ints(attrs["window_strides"]) if "window_strides" in attrs else (1,) * rank
    offsets = list(itertools.product(*[range(w) for w in window]))
    return SelectAndScatter(window, strides, padding, offsets, op.result_types[0].dtype)


def _window_view(x, fill, offset, source_shape, strides, padding):
    """x at operand index `w * strides + offset - low_padding` for every window w (fill outside)."""
    padded = lax.pad(x, fill, [(lo, hi, 0) for lo, hi in padding])
    limits = [k + (s - 1) * st + 1 for k, s, st in zip(offset, source_shape, strides)]
    return lax.slice(padded, offset, limits, strides)


def _scatter_view(y, fill, offset, operand_shape, strides, padding):
    """The inverse of _window_view: y[w] placed at operand index `w * strides + offset - low`."""
    config = []
    for k, s, st, (lo, _), n in zip(offset, y.shape, strides, padding, operand_shape):
        low = k - lo
        config.append((low, n - (low + (s - 1) * st + 1), st - 1))
    return lax.pad(y, fill, config)


@register_op("stablehlo.select_and_scatter", "mhlo.select_and_scatter",
             prepare=_select_and_scatter_prepare)
def select_and_scatter(ctx, op, operand, source, init):
    p = op.params
    select, scatter = (ctx.region(r) for r in op.regions)
    shape = operand.shape
    src_shape = source.shape
    # A promotable scatter body (spec C11): the result, source and init in its wider type;
    # selection compares the operand as it is.
    source, init = _promoted((source, init), (p.dtype, p.dtype))
    result = lax.broadcast_in_dim(init, shape, ())
    if 0 in src_shape or 0 in shape:
        return result
    view = lambda x, fill, k: _window_view(x, fill, k, src_shape, p.strides, p.padding)
    valid_all = lax.full(shape, True)
    zero = lax.full((), 0, operand.dtype)
    source_zero = lax.full((), 0, source.dtype)
    # Select: fold each window in row-major order; padding is never selected.
    chosen = chosen_val = have = None
    for index, k in enumerate(p.offsets):
        val, valid = view(operand, zero, k), view(valid_all, np.bool_(False), k)
        if chosen is None:
            chosen_val, chosen, have = val, lax.full(src_shape, 0, np.int32), valid
            continue
        keep, = _elementwise(select, [chosen_val, val], src_shape)
        take = valid & (~have | ~keep)
        chosen_val = lax.select(take, val, chosen_val)
        chosen = lax.select(take, lax.full(src_shape, index, np.int32), chosen)
        have = have | valid
    # Scatter: an operand element receives from windows in ascending source order,
    # i.e. descending window offsets.
    for index in reversed(range(len(p.offsets))):
        k = p.offsets[index]
        hit = have & (chosen == index)
        place = lambda y, fill: _scatter_view(y, fill, k, shape, p.strides, p.padding)
        hit_here = place(hit, np.bool_(False))
        src_here = place(source, source_zero)
        combined, = _elementwise(scatter, [result, src_here], shape)
        result = lax.select(hit_here, combined, result)
    return result


# ------------------------------------------------------------------ sort

_FLIP = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE", "EQ": "EQ", "NE": "NE"}
_COMPARE = ("stablehlo.compare", "mhlo.compare")
_BOOL_OPS = {"and": lambda a, b: a and b, "or": lambda a, b: a or b,
             "xor": lambda a, b: a != b}
_KEY_FLOATS = frozenset(np.dtype(d) for d in (np.float16, np.float32, np.float64)) | {
    np.dtype(T.ELEMENT_DTYPES["bf16"])}


def _freeze(value):
    if isinstance(value, np.ndarray):
        return ("nd", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (tuple, list)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


def _enum(value):
    """An enum attribute's name: mhlo enums may arrive as undecoded `#mhlo<kind NAME>` text."""
    text = getattr(value, "text", None)
    if text is not None:
        match = re.match(r"#\w+<\w+\s+(\w+)>", text)
        return match.group(1) if match else text
    return value


def _default_compare_type(dtype):
    if T.is_float(dtype) or T.is_complex(dtype):
        return "FLOAT"
    return "UNSIGNED" if T.is_unsigned(dtype) or dtype == np.bool_ else "SIGNED"


class _NotLexicographic(Exception):
    pass


def _analyze_comparator(region: Region):
    """Splits a comparator into sort keys: [(value id, dtype, compare_type, ascending)].

    A comparator is recognised when every comparison between the two sides compares
    the same expression of one side's operands with that expression of the other's
    (`k(lhs) < k(rhs)`), and its boolean combination of those comparisons is a
    lexicographic order on the keys. Raises _NotLexicographic otherwise.
    """
    if len(region.outputs) != 1:
        raise _NotLexicographic("comparator returns several values")
    side, sig, vtype = {}, {}, {}
    for i, (a, t) in enumerate(zip(region.args, region.arg_types)):
        side[a], sig[a], vtype[a] = ("L" if i % 2 == 0 else "R"), ("arg", i // 2), t
    for c in region.captures:
        side[c], sig[c] = "C", ("capture", c)
    formula = {}    # value id -> ("atom", id) | ("op", name, operand ids) | ("const", bool)
    keys = {}       # key signature -> (lhs value id, dtype, compare_type)
    for op in region.ops:
        if op.regions or len(op.results) != 1:
            raise _NotLexicographic(f"{op.name} in comparator")
        sides = {side[o] for o in op.operands} - {"C"}
        (res,) = op.results
        vtype[res] = op.result_types[0]
        sig[res] = (op.name, _freeze(op.attrs), str(op.result_types[0]),
                    tuple(sig[o] for o in op.operands))
        if sides <= {"L"} or sides == {"R"}:
            side[res] = sides.pop() if sides else "C"
            if side[res] == "C" and op.name.endswith(".constant") and op.result_types[0].dtype == np.bool_:
                value = op.attrs["value"]  # (a Splat's one value, not its array)
                value = getattr(value, "value", value)
                formula[res] = ("const", bool(np.asarray(value).reshape(-1)[0]))
            continue
        side[res] = "M"
        if op.name in _COMPARE and {side[o] for o in op.operands} == {"L", "R"}:
            x, y = op.operands
            direction = _enum(op.attrs["comparison_direction"])
            if side[x] == "R":
                x, y, direction = y, x, _FLIP[direction]
            if sig[x] != sig[y]:   # args of both sides are keyed by operand index only
                raise _NotLexicographic("compares different expressions of the two sides")
            dtype = vtype[x].dtype
            ctype = _enum(op.attrs.get("compare_type")) or _default_compare_type(dtype)
            if ctype == "NOTYPE":
                ctype = _default_compare_type(dtype)
            known = keys.setdefault(sig[x], (x, dtype, ctype))
            if known[2] != ctype:
                raise _NotLexicographic("one key compared with two compare types")
            formula[res] = ("atom", sig[x], direction)
            continue
        base = op.name.split(".", 1)[1]
        if base in _BOOL_OPS or base == "not" or base == "select" or (
                op.name in _COMPARE and _enum(op.attrs["comparison_direction"]) in ("EQ", "NE")):
            if op.result_types[0].dtype != np.bool_ or any(o not in formula for o in op.operands):
                raise _NotLexicographic(f"{op.name} mixes the sides outside a boolean formula")
            name = base if op.name not in _COMPARE else _enum(op.attrs["comparison_direction"])
            formula[res] = ("op", name, op.operands)
            continue
        raise _NotLexicographic(f"{op.name} mixes both sides")
    out = region.outputs[0]
    if out not in formula:
        raise _NotLexicographic("result is not a comparison")
    key_sigs = list(keys)
    if len(key_sigs) > 6:
        raise _NotLexicographic("too many keys")

    def evaluate(relations):   # relations: key signature -> -1 | 0 | 1 (lhs vs rhs)
        cache = {}

        def ev(v):
            if v in cache:
                return cache[v]
            f = formula[v]
            if f[0] == "const":
                r = f[1]
            elif f[0] == "atom":
                rel = relations[f[1]]
                r = {"LT": rel < 0, "LE": rel <= 0, "GT": rel > 0, "GE": rel >= 0,
                     "EQ": rel == 0, "NE": rel != 0}[f[2]]
            else:
                name, ops = f[1], f[2]
                vals = [ev(o) for o in ops]
                if name == "not":
                    r = not vals[0]
                elif name == "select":
                    r = vals[1] if vals[0] else vals[2]
                elif name == "EQ":
                    r = vals[0] == vals[1]
                elif name == "NE":
                    r = vals[0] != vals[1]
                else:
                    r = _BOOL_OPS[name](*vals)
            cache[v] = r
            return r
        return ev(out)

    order, fixed, remaining = [], {}, list(key_sigs)

    def outcomes(extra):
        free = [k for k in remaining if k not in extra]
        results = set()
        for combo in itertools.product((-1, 0, 1), repeat=len(free)):
            results.add(evaluate({**fixed, **extra, **dict(zip(free, combo))}))
        return results

    while True:
        if outcomes({}) == {False}:
            break
        for k in remaining:
            lt, gt = outcomes({k: -1}), outcomes({k: 1})
            if len(lt) == 1 and len(gt) == 1 and lt != gt:
                order.append((k, lt == {True}))
                fixed[k] = 0
                remaining.remove(k)
                break
        else:
            raise _NotLexicographic("not a lexicographic strict order")
    return [(keys[k][0], keys[k][1], keys[k][2], ascending) for k, ascending in order]


def _key_subregion(region: Region, key_ids):
    """A region computing the given (lhs-side) key values from the comparator's arguments."""
    needed, ops = set(key_ids), []
    for op in reversed(region.ops):
        if needed.intersection(op.results):
            ops.append(op)
            needed.update(op.operands)
    return Region(region.args, region.arg_types, ops[::-1], tuple(key_ids), region.captures)


def _total_order_bits(x):
    """Signed integers ordered like IEEE totalOrder of the floats x."""
    width = T.bit_width(x.dtype)
    itype = {16: np.int16, 32: np.int32, 64: np.int64}[width]
    bits = lax.bitcast_convert_type(x, itype)
    magnitude = lax.full((), np.iinfo(itype).max, itype)
    return lax.select(bits < 0, bits ^ magnitude, bits)


def _sortable(x, ctype, ascending):
    """Integer (or bool-free) keys whose ascending lax.sort order is the comparison's order."""
    dtype = x.dtype
    if T.is_complex(dtype):
        parts = [lax.real(x), lax.imag(x)]
    else:
        parts = [x]
    keys = []
    for part in parts:
        pdt = part.dtype
        if T.is_float(pdt):
            if pdt not in _KEY_FLOATS or ctype not in ("FLOAT", "TOTALORDER"):
                raise _NotLexicographic(f"{pdt} keys")
            if ctype == "FLOAT":   # -0 == +0 under FLOAT comparisons
                part = lax.select(part == 0, lax.full_like(part, 0), part)
            key = _total_order_bits(part)
        elif pdt == np.bool_:
            key = lax.convert_element_type(part, np.uint8)
        elif T.bit_width(pdt) < 8:
            key = lax.convert_element_type(part, np.uint8 if T.is_unsigned(pdt) else np.int8)
            if (ctype == "SIGNED") == T.is_unsigned(pdt):
                raise _NotLexicographic("sub-byte key compared with the other signedness")
        else:
            key = part
            if ctype == "SIGNED" and T.is_unsigned(pdt):
                key = lax.bitcast_convert_type(part, np.dtype(f"int{T.bit_width(pdt)}"))
            elif ctype == "UNSIGNED" and not T.is_unsigned(pdt):
                key = lax.bitcast_convert_type(part, np.dtype(f"uint{T.bit_width(pdt)}"))
        keys.append(key if ascending else lax.bitwise_not(key))
    return keys


_SORTED_AS = {T.ELEMENT_DTYPES["i2"]: np.dtype(np.int8),
              T.ELEMENT_DTYPES["ui2"]: np.dtype(np.uint8)}


class Sort(NamedTuple):
    dim: int
    keys: Optional[list]              # the comparator as sort keys (_analyze_comparator);
    key_region: Optional[Region]      # None: sorted by the comparator region itself


def _sort_prepare(op):
    rank = len(op.result_types[0].shape)
    dim = int(op.attrs.get("dimension", -1))
    if dim < 0:
        dim += rank
    try:
        keys = _analyze_comparator(op.regions[0])
        return Sort(dim, keys, _key_subregion(op.regions[0], [k[0] for k in keys]))
    except (_NotLexicographic, KeyError):   # KeyError: an attribute this analysis cannot read
        return Sort(dim, None, None)


@register_op("stablehlo.sort", "mhlo.sort", prepare=_sort_prepare)
def sort(ctx, op, *operands):
    p = op.params
    dim = p.dim
    shape = operands[0].shape
    if shape[dim] <= 1 or 0 in shape or (p.keys is not None and not p.keys):
        return single_or_tuple(op, operands)   # (a comparator that is always false keeps the order)
    if p.keys is not None:
        try:
            keys = _sort_keys(ctx, p, operands, shape)
        except _NotLexicographic:
            keys = None
        if keys is not None:
            # XLA's sort rejects 2-bit operands ("Inputs must have the same shape"); they
            # travel as bytes (exact conversions).
            carried = [lax.convert_element_type(x, _SORTED_AS[x.dtype]) if x.dtype in _SORTED_AS
                       else x for x in operands]
            outs = lax.sort((*keys, *carried), dimension=dim, is_stable=True,
                            num_keys=len(keys))
            return single_or_tuple(op, [lax.convert_element_type(y, x.dtype)
                                for y, x in zip(outs[len(keys):], operands)])
    return single_or_tuple(op, _merge_sort(ctx.region(op.regions[0]), operands, dim))


def _sort_keys(ctx, p: Sort, operands, shape):
    keys, subregion = p.keys, p.key_region
    arg_index = {a: i // 2 for i, a in enumerate(subregion.args)}
    if all(k[0] in arg_index for k in keys):
        values = [operands[arg_index[k[0]]] for k in keys]
    else:
        doubled = [x for x in operands for _ in range(2)]
        values = _elementwise(ctx.region(subregion), doubled, shape)
    out = []
    for value, (_, _, ctype, ascending) in zip(values, keys):
        out.extend(_sortable(value, ctype, ascending))
    return out


def _merge_sort(comparator, operands, dim):
    """A stable bottom-up merge sort driven by the comparator region itself.

    Each merge places an element at (its index in its run) + (how many elements of
    the other run go before it), found by binary search with the comparator:
    exact and stable for any strict weak order.
    """
    moved = [jnp.moveaxis(x, dim, -1) for x in operands]
    batch_shape, n = moved[0].shape[:-1], moved[0].shape[-1]
    rows = int(np.prod(batch_shape, dtype=np.int64))
    size = 1 << (n - 1).bit_length()
    xs = [lax.pad(lax.reshape(x, (rows, n)), lax.full((), 0, x.dtype), [(0, 0, 0), (0, size - n, 0)])
          for x in moved]
    valid = lax.broadcast_in_dim(jnp.arange(size) < n, (rows, size), (1,))

    def less(a, a_valid, b, b_valid):
        args = [v for pair in zip(a, b) for v in pair]
        c, = _elementwise(comparator, args, (rows, size))
        return a_valid & (~b_valid | c)    # padding sorts after everything

    pos = jnp.arange(size, dtype=np.int32)
    steps = (size - 1).bit_length() + 1   # binary search over a run of up to size/2

    def merge_pass(level, carry):
        xs, valid = carry
        width = jnp.left_shift(np.int32(1), level)
        block = pos // (2 * width) * (2 * width)
        offset = pos - block
        is_left = offset < width
        start = jnp.where(is_left, block + width, block)

        def search(_, bounds):
            lo, hi = bounds
            active = lo < hi
            mid = (lo + hi) // 2
            idx = start + jnp.minimum(mid, width - 1)
            other = [jnp.take_along_axis(x, idx, axis=1) for x in xs]
            other_valid = jnp.take_along_axis(valid, idx, axis=1)
            # Left elements go after strictly smaller right ones; right elements after
            # every left one not greater than them (that keeps equal ones stable).
            # One comparator call: (other, self) for left elements, (self, other) for right.
            a = [jnp.where(is_left, o, x) for o, x in zip(other, xs)]
            b = [jnp.where(is_left, x, o) for o, x in zip(other, xs)]
            c = less(a, jnp.where(is_left, other_valid, valid), b,
                     jnp.where(is_left, valid, other_valid))
            go = jnp.where(is_left, c, ~c) & active
            return jnp.where(go, mid + 1, lo), jnp.where(active & ~go, mid, hi)

        lo = jnp.zeros((rows, size), np.int32)
        hi = jnp.broadcast_to(width, (rows, size))
        lo, _ = lax.fori_loop(0, steps, search, (lo, hi))
        target = block + jnp.where(is_left, offset, offset - width) + lo
        inverse = jnp.zeros((rows, size), np.int32).at[
            jnp.arange(rows)[:, None], target].set(jnp.broadcast_to(pos, (rows, size)))
        return ([jnp.take_along_axis(x, inverse, axis=1) for x in xs],
                jnp.take_along_axis(valid, inverse, axis=1))

    xs, valid = lax.fori_loop(0, (size - 1).bit_length(), merge_pass, (xs, valid))
    outs = [lax.reshape(x[:, :n], (*batch_shape, n)) for x in xs]
    return [jnp.moveaxis(x, -1, dim) for x in outs]
