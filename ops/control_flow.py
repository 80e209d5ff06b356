"""func.call, while, if, case, tuples, optimization_barrier; HLO's `fusion` and `copy`."""

from __future__ import annotations

import math
from typing import NamedTuple, Optional

import jax
from jax import lax
import jax.numpy as jnp
import numpy as np

from shlo2jax.gradients import custom_linear
from shlo2jax.ops._common import (explicit_captures, forward_mode_only, single_or_tuple,
                                  tangent_dtype)
from shlo2jax.registry import register_op


@register_op("func.call", prepare=lambda op: op.attrs["callee"])
def call(ctx, op, *args):
    outs = ctx.translator.callee(op.params)(*args)
    return single_or_tuple(op, outs)


def _constant_source(region, vid, through_broadcast=False):
    """Where a loop-invariant operand comes from: ("env", vid) if captured, ("value", array)
    if a constant op inside the region defines it (or, `through_broadcast`, a scalar
    broadcast_in_dim of such a value), else None."""
    if vid in region.captures:
        return ("env", vid)
    for op in region.ops:
        if op.results == (vid,):
            if op.name in ("stablehlo.constant", "mhlo.constant"):
                return ("value", op.params)
            if through_broadcast and op.name in ("stablehlo.broadcast_in_dim",
                                                 "mhlo.broadcast_in_dim") \
                    and op.result_types[0].shape == ():
                return _constant_source(region, op.operands[0])
    return None


class CounterBound(NamedTuple):
    """A loop-carried scalar counter that the condition compares with a loop-invariant
    limit: `counter <direction> limit` must hold for the loop to go on, and the body adds
    `step` to the counter (subtracts it when `negate_step`)."""
    index: int          # position of the counter among the carried values
    direction: str      # LT, LE, GT, GE or NE, with the counter on the left
    limit: tuple        # a _constant_source
    step: tuple         # a _constant_source
    negate_step: bool
    # (source, value): boolean constants the path from the comparison to the condition's
    # value compares against (`p != false` is p); each must have that value at trace time
    guards: tuple = ()


class CountedLoop(NamedTuple):
    """A while loop `for (i = init; i < bound; i += step)`: the counter's position among the
    loop values, and where the bound and the step come from (see `_constant_source`)."""
    counter: int
    bound: tuple
    step: tuple


class WhileParams(NamedTuple):
    counted: Optional[CountedLoop]  # the exact `i = c; i < N; i += 1` loop (a static fori_loop)
    bounds: tuple                # CounterBounds: each caps the trip count


_FLIPPED = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "NE": "NE", "EQ": "EQ"}


def _defining_op(region, vid):
    for op in region.ops:
        if vid in op.results:
            return op
    return None


def _counter_bounds(cond, body) -> tuple:
    """Counters whose comparison must hold for the loop to go on: the condition's value is
    the comparison, or a conjunction (`and`) that includes it. Each bounds the trip count."""
    found = []
    pending = [(cond.outputs[0], ())] if cond.outputs else []
    while pending:
        vid, guards = pending.pop()
        op = _defining_op(cond, vid)
        if op is None:
            continue
        if op.name in ("stablehlo.and", "mhlo.and"):
            pending.extend((v, guards) for v in op.operands)
            continue
        if op.name in ("stablehlo.convert", "mhlo.convert") and \
                op.result_types[0].dtype == np.bool_:
            pending.append((op.operands[0], guards))
            continue
        direction = op.attrs.get("comparison_direction")
        if op.name not in ("stablehlo.compare", "mhlo.compare"):
            continue
        if direction in ("NE", "EQ") and op.result_types[0].dtype == np.bool_ and \
                _region_type(cond, op.operands[0]) == np.bool_:
            # jnp's `a & b` on booleans: (a != false) & ... ; `a == true` is a too
            lhs, rhs = op.operands
            constant = _constant_source(cond, rhs, through_broadcast=True)
            if constant is not None:
                pending.append((lhs, guards + ((constant, direction == "EQ"),)))
                continue
        lhs, rhs = op.operands
        if lhs in cond.args and rhs not in cond.args:
            k, other = cond.args.index(lhs), rhs
        elif rhs in cond.args and lhs not in cond.args:
            k, other, direction = cond.args.index(rhs), lhs, _FLIPPED.get(direction)
        else:
            continue
        if direction not in ("LT", "LE", "GT", "GE", "NE"):
            continue
        limit = _constant_source(cond, other)
        update = _defining_op(body, body.outputs[k])
        if limit is None or update is None or update.name not in (
                "stablehlo.add", "mhlo.add", "stablehlo.subtract", "mhlo.subtract"):
            continue
        if update.operands[0] == body.args[k]:
            step_vid = update.operands[1]
        elif update.operands[1] == body.args[k] and update.name.endswith(".add"):
            step_vid = update.operands[0]
        else:
            continue
        step = _constant_source(body, step_vid)
        if step is not None:
            found.append(CounterBound(k, direction, limit, step,
                                      update.name.endswith(".subtract"), guards))
    return tuple(found)


def _region_type(region, vid):
    """The element dtype of a value defined in the region or one of its arguments."""
    if vid in region.args:
        return region.arg_types[region.args.index(vid)].dtype
    op = _defining_op(region, vid)
    return None if op is None else op.result_types[op.results.index(vid)].dtype


def _prepare_while(op):
    cond, body = op.regions
    return WhileParams(_counted_loop(op), _counter_bounds(cond, body))


def _counted_loop(op):
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


def _concrete(source, env):
    kind, payload = source
    value = env.get(payload) if kind == "env" else payload
    if isinstance(value, (np.ndarray, np.generic)) and np.shape(value) == ():
        return np.asarray(value)
    return None


def _concrete_int(source, env):
    value = _concrete(source, env)
    return None if value is None or not np.issubdtype(value.dtype, np.integer) else int(value)


# Counting a float counter's trips one by one stops here: no provable bound beyond it.
_MAX_COUNTED_TRIPS = 1 << 20
_CONTINUES = {"LT": np.less, "LE": np.less_equal, "GT": np.greater, "GE": np.greater_equal,
              "NE": np.not_equal}


def _trip_bound(bound: CounterBound, start, env) -> Optional[int]:
    """An upper bound on the trips of a loop whose counter starts at `start`, or None."""
    limit, step = _concrete(bound.limit, env), _concrete(bound.step, env)
    if start is None or limit is None or step is None:
        return None
    for source, value in bound.guards:
        guard = _concrete(source, env)
        if guard is None or guard.dtype != np.bool_ or bool(guard) != value:
            return None
    dtype = start.dtype
    if limit.dtype != dtype or step.dtype != dtype or dtype == np.bool_:
        return None
    goes_on = _CONTINUES[bound.direction]
    if np.issubdtype(dtype, np.integer) and bound.direction != "NE":
        # exactly, in Python integers: a counter that would wrap around has no bound
        c, lim, d = int(start), int(limit), int(step)
        d = -d if bound.negate_step else d
        if not goes_on(c, lim):
            return 0
        if d == 0 or (d > 0) != (bound.direction in ("LT", "LE")):
            return None
        span = abs(lim - c) + (1 if bound.direction in ("LE", "GE") else 0)
        trips = -(-span // abs(d))
        info = np.iinfo(dtype)
        return trips if info.min <= c + trips * d <= info.max else None
    with np.errstate(all="ignore"):
        step = -step if bound.negate_step else step
        c, n = start.copy(), 0
        while goes_on(c, limit):
            n += 1
            if n > _MAX_COUNTED_TRIPS:
                return None
            c = np.asarray(c + step, dtype)
    return n


@register_op("stablehlo.while", "mhlo.while", prepare=_prepare_while)
def while_(ctx, op, *init):
    cond_region, body_region = op.regions
    counted = op.params.counted
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

    trips = _max_trips(ctx, op, init)
    if trips is None:
        outs = forward_mode_only(loop, op, (
            "a while loop whose trip count depends on the data has no reverse-mode derivative "
            "without a bound on its iterations: load the program with `max_loop_trips=N` (or "
            f"`max_loop_trips={{{op.location!r}: N}}`) and it is differentiated as a bounded, "
            "checkpointed loop"))(captured, tuple(init))
    else:
        outs = bounded_reverse_mode(loop, bind, trips)(captured, tuple(init))
    return single_or_tuple(op, outs)


def _max_trips(ctx, op, init) -> Optional[int]:
    """The fewest trips a counter in the condition allows, else the user's bound, else None."""
    provable = [_trip_bound(b, _concrete(("value", init[b.index]), ctx.env), ctx.env)
                for b in op.params.bounds]
    provable = [n for n in provable if n is not None]
    if provable:
        return min(provable)
    return ctx.options.loop_bound(op.location)


def bounded_reverse_mode(loop, bind, max_trips: int):
    """`loop(captured, carry)` (a lax.while_loop) whose derivative is its own in forward
    mode and, in reverse mode, that of the same loop run as `max_trips` checkpointed steps
    that stop changing the carry once the condition fails. If the loop needs more trips,
    its reverse-mode derivatives are NaN: loudly wrong rather than silently truncated."""
    wrapped = jax.custom_jvp(loop)

    def bounded(captured, carry):
        cond_fn, body_fn = bind(captured)

        def step(c):
            return lax.cond(cond_fn(*c)[0], lambda c: tuple(body_fn(*c)), lambda c: c, c)

        final = checkpointed_repeat(step, tuple(carry), max_trips)
        return final, jnp.logical_not(cond_fn(*final)[0])

    @wrapped.defjvp
    def _jvp(primals, tangents):
        flat, tree = jax.tree_util.tree_flatten(primals)
        flat_tangents = jax.tree_util.tree_leaves(tangents)
        outs = wrapped(*primals)
        diff_in = [i for i, x in enumerate(flat) if tangent_dtype(x) != jax.dtypes.float0]
        diff_out = [j for j, o in enumerate(outs) if tangent_dtype(o) != jax.dtypes.float0]

        def unflatten(values):
            return jax.tree_util.tree_unflatten(tree, values)

        def tangent_map(fn):
            def forward(*args):
                res, lin = args[:len(flat)], args[len(flat):]
                full = [np.zeros(np.shape(x), jax.dtypes.float0) for x in res]
                for i, t in zip(diff_in, lin):
                    full[i] = t
                _, touts = jax.jvp(lambda *a: fn(*unflatten(a)), tuple(res), tuple(full))
                return [touts[j] for j in diff_out]
            return forward

        def transpose(*args):
            res, cts = list(args[:len(flat)]), args[len(flat):]

            def on_inputs(*diff):
                values = list(res)
                for i, v in zip(diff_in, diff):
                    values[i] = v
                final, finished = bounded(*unflatten(values))
                return [final[j] for j in diff_out], finished

            _, pullback, finished = jax.vjp(on_inputs, *[res[i] for i in diff_in],
                                            has_aux=True)
            grads = pullback(list(cts))
            return [jnp.where(finished, g, jnp.full_like(g, np.nan)) for g in grads]

        lin = [jnp.zeros_like(flat[i]) if type(flat_tangents[i]) is
               jax.custom_derivatives.SymbolicZero else flat_tangents[i] for i in diff_in]
        # forward mode runs the loop as it is; a derivative of the forward-mode derivative
        # (second order, in reverse mode) goes through the bounded loop
        touts = custom_linear(tangent_map(loop), transpose, flat, lin,
                              tangent_map(lambda *a: bounded(*a)[0])) if diff_out else []
        out_tangents = [np.zeros(np.shape(o), jax.dtypes.float0) for o in outs]
        for j, t in zip(diff_out, touts):
            out_tangents[j] = t
        return outs, tuple(out_tangents)

    return wrapped


# Reverse mode keeps one carry per trip while they fit in this many bytes, and about
# sqrt(trips) of them beyond (recomputing the rest): the deeper scheme compiles slower.
_FLAT_CHECKPOINT_BYTES = 1 << 26


def checkpointed_repeat(step, carry, n: int):
    """`step` applied n times (or a few more) to `carry`, reverse-differentiable: each trip's
    values are recomputed from its carry in reverse mode; when n carries are large, only
    about sqrt(n) are kept, an outer scan over checkpointed inner scans of about sqrt(n)
    steps that are recomputed one block at a time."""
    if n <= 0:
        return carry
    carry_bytes = sum(np.size(c) * np.dtype(c.dtype).itemsize
                      for c in jax.tree_util.tree_leaves(carry))
    if n * carry_bytes <= _FLAT_CHECKPOINT_BYTES:
        one_trip = jax.checkpoint(step)
        return lax.scan(lambda c, _: (one_trip(c), None), carry, None, length=n)[0]
    inner = max(1, math.isqrt(n))
    outer = -(-n // inner)

    def block(c):
        return lax.scan(lambda c, _: (step(c), None), c, None, length=inner)[0]

    block = jax.checkpoint(block)
    return lax.scan(lambda c, _: (block(c), None), carry, None, length=outer)[0]


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


# After XLA's optimizations an HLO module holds `fusion` instructions (a computation XLA emits
# as one kernel) and `copy` (a layout change); `hlo_to_stablehlo` keeps them as mhlo ops. The
# fused computation is an ordinary region: it runs as a call. Layouts do not exist here, so a
# copy is its operand.
@register_op("mhlo.fusion")
def fusion(ctx, op, *operands):
    return single_or_tuple(op, ctx.region(op.regions[0])(*operands))


@register_op("mhlo.copy")
def copy(ctx, op, x):
    return x
