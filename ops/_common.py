"""What several op families share: attribute readers, result packing, bit reinterpretation,
the element-type refusal every elementwise rule uses, and the derivative wrappers of ops
whose reverse mode (or any derivative) lax cannot give.

A family imports from here, never another family's names.
"""

from __future__ import annotations

import json
import re
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from shlo2jax import value_types as T
from shlo2jax.gradients import no_reverse_mode_primitive
from shlo2jax.attributes import Opaque
from shlo2jax.errors import TranslationError, Unsupported
from shlo2jax.translate import evaluate

# ---------------------------------------------------------------- replayable handlers


def replayable(key=None, constants=True):
    """Decorator: marks a handler whose result is one lax call on its operands, decided by
    their avals, the translator and `key(op)` (a hashable summary of what the handler reads
    from the op, e.g. its params; None: nothing). The translation learns that call's equation
    once per key and operand avals and stages it again without binding
    (shlo2jax.compat.EquationReplay). A handler that stages more than one equation for some
    operands is simply never replayed for them. `constants=False`: a handler that treats a
    constant (numpy) operand otherwise than passing it to lax is replayed for traced
    operands only."""
    def mark(handler):
        handler.replayable = key if key is not None else True
        handler.replayable_constants = constants
        return handler
    return mark


def planned(view):
    """Decorator: marks a handler whose op is seen, once per region when the translation plans
    it, through `view(op, producer, translator)`, where `producer(value id)` is the op of the
    region that defines that value (None: an argument, a captured value, a multi-result op's
    result). The op `view` returns (`op`, or `op.replaced(params=...)`) is what the handler
    and its `replayable` key read: a decision made from the module, the same on every trace."""
    def mark(handler):
        handler.planned = view
        return handler
    return mark


# `params` of a view that is one of its op's operands, unchanged (`picking`).
PICKED = "picked"


def picking(op, index: int):
    """A `planned` view of `op` that is its operand `index` itself: it reads that operand
    only, so the others, where nothing else reads them, are not staged (translate._live).
    Its handler returns it (`picked_or`); its `replayable` key is `picked_key`."""
    return op.replaced(operands=(op.operands[index],), params=PICKED)


def picked_or(fn, op, operands):
    """The operand a `picking` view kept, else fn(*operands)."""
    return operands[0] if op.params is PICKED else fn(*operands)


def picked_key(op) -> bool:
    return op.params is PICKED


def op_names(*names) -> frozenset:
    """The op names `names` in both dialects: {stablehlo.n, mhlo.n} for each n."""
    return frozenset(f"{d}.{n}" for d in ("stablehlo", "mhlo") for n in names)


def reduce_body_op(reduce_op):
    """The name of a reduce's body's one op where it combines the two block arguments
    (maximum for a reduce_max, add for a sum), else None."""
    (body,) = reduce_op.regions
    if len(body.ops) != 1 or len(body.args) != 2:
        return None
    (inner,) = body.ops
    if set(inner.operands) != set(body.args) or tuple(body.outputs) != tuple(inner.results):
        return None
    return inner.name


def value_type(vid, producer, region):
    """The type of the value `vid` of `region`: its producer's result type (`producer`, a
    planned view's), or the block argument's; None for a captured value or a multi-result
    op's result."""
    source = producer(vid)
    if source is not None:
        return source.result_types[0]
    if region is not None and vid in region.args:
        return region.arg_types[region.args.index(vid)]
    return None


# Ops whose result holds only elements of their (first) operand, unchanged.
_ELEMENT_PRESERVING = frozenset((
    "stablehlo.broadcast_in_dim", "mhlo.broadcast_in_dim", "stablehlo.broadcast",
    "mhlo.broadcast", "stablehlo.reshape", "mhlo.reshape", "stablehlo.transpose",
    "mhlo.transpose"))
_CONVERTS = frozenset(("stablehlo.convert", "mhlo.convert"))
_CONSTANTS = frozenset(("stablehlo.constant", "mhlo.constant"))


def constant_elements(vid, producer, translator, depth: int = 16):
    """The elements of the value `vid` where it is a module constant seen through broadcasts,
    reshapes, transposes and converts to real floating types (a numpy array of the value's
    element type, converted as each convert converts it), else None. A constant lifted
    into a parameter (`mode.lifted`) holds the call's value, not the module's: None."""
    converts = []
    op = producer(vid)
    for _ in range(depth):
        if op is None:
            return None
        if op.name in _CONSTANTS:
            value = op.params
            if translator.mode.lifted is not None or type(value) is not np.ndarray:
                return None
            with np.errstate(all="ignore"):
                for dtype in reversed(converts):
                    value = value.astype(dtype)
            return value
        if op.name in _CONVERTS:
            dtype = getattr(op.result_types[0], "dtype", None)
            if dtype is None or not T.is_float(dtype):  # (XLA's float -> int is its own)
                return None
            converts.append(dtype)
        elif op.name not in _ELEMENT_PRESERVING:
            return None
        op = producer(op.operands[0])
    return None


# ---------------------------------------------------------------- attributes


def ints(value) -> tuple:
    """An integer array attribute as a tuple: a tuple (stablehlo) or a dense array (mhlo)."""
    if type(value) is tuple:  # (a decoded array attribute: a flat tuple of ints, usually)
        try:
            return tuple(map(int, value))
        except TypeError:  # nested
            pass
    return tuple(int(v) for v in np.asarray(value).reshape(-1))


_ENUM_RE = re.compile(r"(\w+)>?\s*$")


def enum_value(value):
    """A stablehlo enum decodes to its name; the mhlo spelling (`#mhlo<precision HIGH>`,
    `#mhlo.rng_algorithm<PHILOX>`) stays opaque text: take the last word of it."""
    if isinstance(value, Opaque):
        return _ENUM_RE.search(value.text.rstrip(">")).group(1)
    return value


def precision_config(op):
    """precision_config -> a pair of lax.Precision (None when absent)."""
    config = op.attrs.get("precision_config")
    if not config:
        return None
    names = [enum_value(p) for p in config]
    if len(names) == 1:
        names = names * 2
    unknown = [n for n in names if n not in lax.Precision.__members__]
    if unknown:
        raise Unsupported(f"precision {unknown[0]}")
    return tuple(lax.Precision[n] for n in names)


def backend_config(op) -> dict:
    """A custom call's typed backend_config (FFI kernels: `mhlo.backend_config = {...}`)."""
    cfg = op.attrs.get("mhlo.backend_config", op.attrs.get("backend_config", {}))
    if isinstance(cfg, dict):
        return cfg
    if isinstance(cfg, str) and cfg.strip().startswith("{"):
        try:
            return json.loads(cfg)
        except ValueError:
            pass
    return {}


def reject_unsupported_types(op):
    """Shared `prepare`: refuse, at load time, element types no lax op can compute on."""
    for rtype in op.result_types:
        if getattr(rtype, "quant", None) is not None:
            raise Unsupported(f"quantized element type {rtype.element}")
        if getattr(rtype, "dtype", None) in T.XLA_UNSUPPORTED_DTYPES:
            raise Unsupported(f"element type {rtype.element} has no XLA support")
    return None


class TriangularSolve(NamedTuple):
    """`lax.linalg.triangular_solve`'s options: the op's attributes, or LAPACK trsm's flags."""
    left_side: bool
    lower: bool
    transpose_a: bool
    conjugate_a: bool
    unit_diagonal: bool


# ---------------------------------------------------------------- results


def single_or_tuple(op, values):
    """What a handler returns: the value itself for a one-result op, else a tuple."""
    values = tuple(values)
    return values[0] if len(op.results) == 1 else values


def known_value(value):
    """The value as a numpy array when it is known while tracing (a constant), else None."""
    if isinstance(value, (np.ndarray, np.generic)):
        return np.asarray(value)
    if isinstance(value, jax.core.Tracer):
        return None
    try:
        return np.asarray(value)
    except Exception:
        return None


def result_shape(op) -> tuple:
    """The static result shape. `?` is accepted at load time (a dynamic module is
    refined to static shapes before it is translated), so it is checked here."""
    shape = op.result_types[0].shape
    if None in shape:
        raise ValueError(f"result type {op.result_types[0]} is still dynamic: the function must "
                         "be called through shape refinement")
    return shape


# ---------------------------------------------------------------- bits and widths

SIGNED_OF_WIDTH = {2: T.ELEMENT_DTYPES["i2"], 4: T.ELEMENT_DTYPES["i4"], 8: np.dtype(np.int8),
                   16: np.dtype(np.int16), 32: np.dtype(np.int32), 64: np.dtype(np.int64)}
UNSIGNED_OF_WIDTH = {2: T.ELEMENT_DTYPES["ui2"], 4: T.ELEMENT_DTYPES["ui4"],
                     8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: np.dtype(np.uint32),
                     64: np.dtype(np.uint64)}


def bits_as(x, table):
    """x's bits reinterpreted as the integer type of the same width from `table`."""
    itype = table[T.bit_width(x.dtype)]
    return x if x.dtype == itype else lax.bitcast_convert_type(x, itype)


def preferred_type(result, lhs, rhs):
    """The preferred_element_type of a dot or convolution that yields `result` (converted
    afterwards if needed).

    lax refuses an integer result narrower than the operands; integer accumulation
    wraps, so accumulating wide and wrapping at the end gives the same values.
    """
    if T.is_integer(result) and T.is_integer(lhs.dtype) and T.bit_width(result) < max(
            T.bit_width(lhs.dtype), T.bit_width(rhs.dtype)):
        return None
    return result


_TWO_BIT_WIDENED = {T.ELEMENT_DTYPES["i2"]: np.dtype(np.int8),
                    T.ELEMENT_DTYPES["ui2"]: np.dtype(np.uint8)}


def widen_two_bit(x):
    """XLA on CPU has no dot or convolution on 2-bit integers ("unsupported operand type
    S2"); bytes hold the same values, and the wrapped result is the same."""
    wide = _TWO_BIT_WIDENED.get(x.dtype)
    return x if wide is None else lax.convert_element_type(x, wide)


# ---------------------------------------------------------------- regions and derivatives


def explicit_captures(ctx, *regions):
    """(values, bind): the values the regions capture, and `bind(values)` giving each
    region as a callable that reads them from `values` instead of the enclosing scope.
    A custom derivative rule must receive every traced input as an argument (a closure
    over a tracer escapes its transformation)."""
    captures = tuple(dict.fromkeys(c for r in regions for c in r.captures))
    # Constants stay constants (lax.reduce bodies cannot close over tracers).
    static = {c: ctx.env[c] for c in captures if isinstance(ctx.env[c], (np.ndarray, np.generic))}
    traced = tuple(c for c in captures if c not in static)

    def bind(values):
        env = {**static, **dict(zip(traced, values))}
        return [lambda *a, r=r: evaluate(ctx.translator, r, a, env) for r in regions]
    return tuple(ctx.env[c] for c in traced), bind


def tangent_dtype(x):
    dtype = np.dtype(jnp.result_type(x))
    return dtype if jnp.issubdtype(dtype, jnp.inexact) else jax.dtypes.float0


def forward_mode_only(fn, op, why):
    """`fn` with its own forward-mode derivative whose transpose (reverse mode) raises a
    TranslationError naming `op` and its location, instead of a bare lax error."""
    wrapped = jax.custom_jvp(fn)

    @wrapped.defjvp
    def _jvp(primals, tangents):
        outs, touts = jax.jvp(fn, primals, tangents)
        flat, tree = jax.tree_util.tree_flatten(touts)
        flat = [t if tangent_dtype(t) == jax.dtypes.float0 else
                _no_reverse_mode_p.bind(t, op_name=op.name, location=op.location, why=why)
                for t in flat]
        return outs, jax.tree_util.tree_unflatten(tree, flat)
    return wrapped


_no_reverse_mode_p = no_reverse_mode_primitive()


def non_differentiable(fn, op, why):
    """`fn` whose derivative (any mode) raises a TranslationError naming `op`, except where
    every differentiable input has a zero tangent."""
    wrapped = jax.custom_jvp(fn)

    def _jvp(primals, tangents):
        flat = jax.tree_util.tree_leaves(
            tangents, is_leaf=lambda t: isinstance(t, jax.custom_derivatives.SymbolicZero))
        if any(not isinstance(t, jax.custom_derivatives.SymbolicZero)
               and tangent_dtype(t) != jax.dtypes.float0 for t in flat):
            raise TranslationError(op.name, op.location, f"cannot differentiate: {why}")
        outs = fn(*primals)
        touts = jax.tree_util.tree_map(
            lambda o: np.zeros(np.shape(o), jax.dtypes.float0)
            if tangent_dtype(o) == jax.dtypes.float0 else jnp.zeros_like(o), outs)
        return outs, touts
    wrapped.defjvp(_jvp, symbolic_zeros=True)
    return wrapped
