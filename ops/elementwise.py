"""Element-wise unary and binary arithmetic."""

from __future__ import annotations

from jax import lax

from shlo2jax.registry import register_op


@register_op("stablehlo.add", "mhlo.add")
def add(ctx, op, x, y):
    return lax.add(x, y)
