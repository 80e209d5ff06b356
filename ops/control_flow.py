"""func.call, while, if, case, tuples, optimization_barrier."""

from __future__ import annotations

import jax
from jax import lax
import jax.numpy as jnp

from shlo2jax.registry import register_op


def _single_or_tuple(op, outs):
    return outs[0] if len(op.results) == 1 else tuple(outs)


@register_op("func.call", prepare=lambda op: {"callee": op.attrs["callee"]})
def call(ctx, op, *args):
    outs = ctx.translator.callee(op.params["callee"])(*args)
    return _single_or_tuple(op, outs)


@register_op("stablehlo.while", "mhlo.while")
def while_(ctx, op, *init):
    cond_region, body_region = op.regions
    cond, body = ctx.region(cond_region), ctx.region(body_region)
    outs = lax.while_loop(lambda carry: cond(*carry)[0], lambda carry: tuple(body(*carry)),
                          tuple(init))
    return _single_or_tuple(op, outs)


@register_op("stablehlo.if", "mhlo.if")
def if_(ctx, op, pred):
    true_fn, false_fn = (ctx.region(r) for r in op.regions)
    outs = lax.cond(pred, lambda: tuple(true_fn()), lambda: tuple(false_fn()))
    return _single_or_tuple(op, outs)


@register_op("stablehlo.case", "mhlo.case")
def case(ctx, op, index):
    branches = [ctx.region(r) for r in op.regions]
    n = len(branches)
    # The spec runs the last branch for any out-of-range index; lax.switch would clamp.
    index = jnp.where((index < 0) | (index >= n), n - 1, index).astype(jnp.int32)
    outs = lax.switch(index, [lambda b=b: tuple(b()) for b in branches])
    return _single_or_tuple(op, outs)


@register_op("stablehlo.tuple", "mhlo.tuple")
def tuple_(ctx, op, *elements):
    return tuple(elements)


@register_op("stablehlo.get_tuple_element", "mhlo.get_tuple_element",
             prepare=lambda op: op.attrs["index"])
def get_tuple_element(ctx, op, tup):
    return tup[op.params]


@register_op("stablehlo.optimization_barrier", "mhlo.optimization_barrier")
def optimization_barrier(ctx, op, *operands):
    outs = lax.optimization_barrier(tuple(operands))
    return _single_or_tuple(op, outs)
