"""constant and iota."""

from __future__ import annotations

from jax import lax

from shlo2jax.registry import register_op


@register_op("stablehlo.constant", "mhlo.constant", prepare=lambda op: op.attrs["value"])
def constant(ctx, op):
    # A constant lifted into a parameter (shlo2jax.params) reads its value from the parameters
    # of the call being traced; the translator of such a call has `mode.lifted`.
    lifted = ctx.translator.mode.lifted
    if lifted is not None:
        value = lifted(op)
        if value is not None:
            return value
    # A numpy array: lax embeds it as a literal, with no device transfer while tracing.
    return op.params


@register_op("stablehlo.iota", "mhlo.iota")
def iota(ctx, op):
    rtype = op.result_types[0]
    return lax.broadcasted_iota(rtype.dtype, rtype.shape, op.attrs["iota_dimension"])
