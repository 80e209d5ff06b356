"""func.call, while, if, case, tuples, optimization_barrier."""

from __future__ import annotations

from typing import NamedTuple

from jax import lax
import jax.numpy as jnp
import numpy as np

from shlo2jax.ops._common import explicit_captures, forward_mode_only, single_or_tuple
from shlo2jax.registry import register_op


@register_op("func.call", prepare=lambda op: op.attrs["callee"])
def call(ctx, op, *args):
    outs = ctx.translator.callee(op.params)(*args)
    return single_or_tuple(op, outs)


def _constant_source(region, vid):
    """Where a loop-invariant operand comes from: ("env", vid) if captured, ("value", array)
    if a constant op inside the region defines it, else None."""
    if vid in region.captures:
        return ("env", vid)
    for op in region.ops:
        if op.results == (vid,) and op.name in ("stablehlo.constant", "mhlo.constant"):
            return ("value", op.params)
    return None


class CountedLoop(NamedTuple):
    """A while loop `for (i = init; i < bound; i += step)`: the counter's position among the
    loop values, and where the bound and the step come from (see `_constant_source`)."""
    counter: int
    bound: tuple
    step: tuple


def _prepare_while(op):
    """Recognises the counted loop `for (i = init; i < bound; i += 1)` that fori_loop and scan
    export to, so it can become a lax.fori_loop with static bounds (reverse-differentiable)."""
    cond, body = op.regions
    compares = [o for o in cond.ops if o.name not in ("stablehlo.constant", "mhlo.constant")]
    if len(compares) != 1 or compares[0].name != "stablehlo.compare" or \
            compares[0].results != cond.outputs:
        return None
    compare = compares[0]
    if compare.attrs.get("comparison_direction") != "LT" or compare.operands[0] not in cond.args:
        return None
    k = cond.args.index(compare.operands[0])
    counter_type = op.result_types[k]
    if not (jnp.issubdtype(counter_type.dtype, jnp.integer) and counter_type.shape == ()):
        return None
    bound = _constant_source(cond, compare.operands[1])
    increments = [o for o in body.ops if o.results == (body.outputs[k],)]
    if bound is None or len(increments) != 1 or increments[0].name != "stablehlo.add":
        return None
    increment = increments[0]
    if increment.operands[0] != body.args[k]:
        return None
    step = _constant_source(body, increment.operands[1])
    if step is None:
        return None
    return CountedLoop(k, bound, step)


def _concrete_int(source, env):
    kind, payload = source
    value = env.get(payload) if kind == "env" else payload
    if isinstance(value, (np.ndarray, np.generic)) and value.shape == ():
        return int(value)
    return None


@register_op("stablehlo.while", "mhlo.while", prepare=_prepare_while)
def while_(ctx, op, *init):
    cond_region, body_region = op.regions
    counted = op.params
    if counted is not None:
        body = ctx.region(body_region)
        k = counted.counter
        start = _concrete_int(("value", init[k]), ctx.env)
        bound = _concrete_int(counted.bound, ctx.env)
        step = _concrete_int(counted.step, ctx.env)
        if start is not None and bound is not None and step == 1:
            return single_or_tuple(op, _fori_loop(body, init, k, start, bound))
    captured, bind = explicit_captures(ctx, cond_region, body_region)

    def loop(captured, carry):
        cond_fn, body_fn = bind(captured)
        return lax.while_loop(lambda c: cond_fn(*c)[0], lambda c: tuple(body_fn(*c)),
                              tuple(carry))

    outs = forward_mode_only(loop, op, "a while loop whose trip count is not a static "
                             "`i = c; i < N; i += 1` has no reverse-mode derivative")(
        captured, tuple(init))
    return single_or_tuple(op, outs)


def _fori_loop(body, init, k, start, bound):
    counter_dtype = np.asarray(init[k]).dtype
    rest = tuple(init[:k]) + tuple(init[k + 1:])

    def step(i, carry):
        args = carry[:k] + (lax.convert_element_type(i, counter_dtype),) + carry[k:]
        outs = body(*args)
        return tuple(outs[:k]) + tuple(outs[k + 1:])

    # Static Python bounds make lax.fori_loop a scan: reverse-mode AD works through it.
    final = lax.fori_loop(start, bound, step, rest) if bound > start else rest
    counter = np.asarray(max(start, bound), dtype=counter_dtype)
    return final[:k] + (counter,) + final[k:]


@register_op("stablehlo.if", "mhlo.if")
def if_(ctx, op, pred):
    true_fn, false_fn = (ctx.region(r) for r in op.regions)
    outs = lax.cond(pred, lambda: tuple(true_fn()), lambda: tuple(false_fn()))
    return single_or_tuple(op, outs)


@register_op("stablehlo.case", "mhlo.case")
def case(ctx, op, index):
    branches = [ctx.region(r) for r in op.regions]
    n = len(branches)
    # The spec runs the last branch for any out-of-range index; lax.switch would clamp.
    index = jnp.where((index < 0) | (index >= n), n - 1, index).astype(jnp.int32)
    outs = lax.switch(index, [lambda b=b: tuple(b()) for b in branches])
    return single_or_tuple(op, outs)


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
    return single_or_tuple(op, outs)
