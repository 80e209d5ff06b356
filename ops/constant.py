"""constant and iota."""

from __future__ import annotations

import weakref

import numpy as np
from jax import lax

from shlo2jax.attributes import Splat
from shlo2jax.registry import register_op


# Small constants, one array per value (dtype, shape, bytes): equal constants written in
# several functions (each of an exporter's helpers has its own `256.0`) are then the same
# operand, so the ops computed from them are recognised as the same value (translate.evaluate
# stages a replayable op once per operands).
_INTERNED: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()
_INTERNED_SIZE = 16


def _interned(op):
    value = op.attrs["value"]
    if type(value) is not np.ndarray or value.size > _INTERNED_SIZE or value.dtype.hasobject:
        return value
    key = (value.dtype.str, value.dtype.name, value.shape, value.tobytes())
    return _INTERNED.setdefault(key, value)


@register_op("stablehlo.constant", "mhlo.constant", prepare=_interned)
def constant(ctx, op):
    # A constant lifted into a parameter (shlo2jax.params) reads its value from the parameters
    # of the call being traced; the translator of such a call has `mode.lifted`.
    lifted = ctx.translator.mode.lifted
    if lifted is not None:
        value = lifted(op)
        if value is not None:
            return value
    value = op.params
    if type(value) is Splat:  # a large splat: its one value broadcast, never a host array
        return lax.full(value.shape, value.value, value.dtype)
    # A numpy array: lax embeds it as a literal, with no device transfer while tracing.
    return value


@register_op("stablehlo.iota", "mhlo.iota")
def iota(ctx, op):
    rtype = op.result_types[0]
    return lax.broadcasted_iota(rtype.dtype, rtype.shape, op.attrs["iota_dimension"])
