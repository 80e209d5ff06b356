"""func.call, while, if, case, tuples, optimization_barrier; HLO's `fusion` and `copy`."""

from __future__ import annotations

import functools
import math
import warnings
from typing import NamedTuple, Optional

import jax
from jax import lax
import jax.numpy as jnp
import numpy as np

from shlo2jax import value_types as T
from shlo2jax.gradients import LoopBoundWarning, custom_linear
from shlo2jax.options import DEFAULT_LOOP_TRIPS
from shlo2jax.primitives import counted_loop
from shlo2jax.ops._common import (explicit_captures, forward_mode_only, ints, single_or_tuple,
                                  tangent_dtype)
from shlo2jax.registry import register_op
from shlo2jax.translate import evaluate


# Callees of at most this many ops (their regions' included) are evaluated inline (see `call`),
# where the copies of one callee add at most _INLINED_SHARE of the module's ops (or
# _INLINED_COPIES, in a small module): a helper called from thousands of sites (a neural ODE's
# softplus at each of its 1,800 vector-field evaluations) stays one jitted callee, traced once,
# where copying it would add half the program's equations to trace, lower and differentiate.
_INLINED_OPS = 32
_INLINED_SHARE = 1 / 8
_INLINED_COPIES = 1024


# Private functions jax emits as the lowering of a primitive whose derivative jax defines on
# the primitive (`mlir.lower_fun` of a jitted implementation): the export keeps only the
# implementation, which may compute through the bits of its argument (`bitcast_convert`, no
# derivative), so differentiating it gives zeros. Such a call keeps its body's values and
# takes the primitive's derivative, as the producer's gradient does. jax 0.12 lowers f32
# `lax.lgamma` so (`@lgamma_impl`; f16/bf16 convert to f32 and call it), whose JVP is
# `g * digamma(x)`; a second signature's copy is `@lgamma_impl_0`, ...
_PRIMITIVE_IMPLEMENTATIONS = {"lgamma_impl": lax.digamma}


def _implemented_primitive_derivative(fdef):
    """The derivative of the primitive `fdef` implements (see _PRIMITIVE_IMPLEMENTATIONS), or
    None: a private function of one floating-point tensor to one of the same type."""
    if fdef.public:
        return None
    derivative = _PRIMITIVE_IMPLEMENTATIONS.get(fdef.name.rstrip("0123456789").rstrip("_"))
    if (derivative is None or len(fdef.input_types) != 1
            or tuple(fdef.output_types) != tuple(fdef.input_types)
            or not isinstance(fdef.input_types[0], T.TensorType)
            or not jnp.issubdtype(fdef.input_types[0].dtype, jnp.floating)):
        return None
    return derivative


def _with_derivative(fn, derivative):
    """`fn` (one value to a 1-tuple) with the JVP `t * derivative(x)`."""
    @jax.custom_jvp
    def primitive(x):
        return fn(x)[0]

    @primitive.defjvp
    def _jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return primitive(x), t * derivative(x)
    return primitive


@register_op("func.call", prepare=lambda op: op.attrs["callee"])
def call(ctx, op, *args):
    translator = ctx.translator
    fdef = translator.module.functions.get(op.params)
    derivative = None if fdef is None else _implemented_primitive_derivative(fdef)
    if derivative is not None:
        return _with_derivative(translator.callee(op.params), derivative)(*args)
    if fdef is not None and _inlined(fdef, translator.module):
        # A small helper (an exporter's `_var`, `silu`, `_where`) evaluated in its caller's
        # trace, sharing the caller's table of values (Scope.seen): what it computes again
        # (the mean its caller computed) is staged once, as the producer's own program does
        # after inlining, and reverse mode has one cotangent path for it instead of two
        # (searchless chess: 13,159 -> 8,276 instructions in the optimised gradient).
        outs = tuple(evaluate(translator, fdef.body, args, {}, ctx.seen))
    else:
        outs = translator.callee(op.params)(*args)
    return single_or_tuple(op, outs)


def _inlined(fdef, module) -> bool:
    size = _small_size(fdef)
    return size is not None and size * module.call_sites().get(fdef.name, 0) <= max(
        _INLINED_COPIES, len(module.ops) * _INLINED_SHARE)


def _small_size(fdef) -> Optional[int]:
    """The ops of `fdef` (its regions' included) where they are at most _INLINED_OPS."""
    size = 0
    pending = [fdef.body]
    while pending:
        ops = pending.pop().ops
        size += len(ops)
        if size > _INLINED_OPS:
            return None
        pending.extend(r for op in ops for r in op.regions)
    return size


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
    # per loop value: whether the body returns it as it is given (a scan's stacked inputs, a
    # loop's weights), which the counted loop takes as a constant of its body
    forwarded: tuple = ()


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
    return CountedLoop(k, bound, step,
                       tuple(out == arg for out, arg in zip(body.outputs, body.args)))


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
            return single_or_tuple(op, _fori_loop(body, init, k, start, bound,
                                                  counted.forwarded))
    captured, bind = explicit_captures(ctx, cond_region, body_region)

    def loop(captured, carry):
        cond_fn, body_fn = bind(captured)
        return lax.while_loop(lambda c: cond_fn(*c)[0], lambda c: tuple(body_fn(*c)),
                              tuple(carry))

    user = ctx.options.loop_bound(op.location)
    if user is None and _elementwise_loop(ctx, op):
        # exact, and cheaper than a bounded loop: no trip is stored or run in vain
        return single_or_tuple(op, elementwise_reverse_mode(loop, op)(captured, tuple(init)))
    provable = _provable_trips(ctx, op, init)
    if provable is not None:
        trips, why = provable, "its counter's bound"
    elif user is not None:
        trips, why = user, "max_loop_trips"
    else:
        trips, why = DEFAULT_LOOP_TRIPS, "the default bound on data-dependent loops"
    outs = bounded_reverse_mode(loop, bind, trips, (op.location, why))(captured, tuple(init))
    return single_or_tuple(op, outs)


def _provable_trips(ctx, op, init) -> Optional[int]:
    """The fewest trips a counter in the condition allows, else None."""
    provable = [_trip_bound(b, _concrete(("value", init[b.index]), ctx.env), ctx.env)
                for b in op.params.bounds]
    provable = [n for n in provable if n is not None]
    return min(provable) if provable else None


# Ops whose every result element depends only on the same element of each operand (or on
# scalar operands): a loop body built of them has a diagonal Jacobian.
_ELEMENTWISE = frozenset("""
    abs add and atan2 cbrt ceil clamp compare convert cosine count_leading_zeros divide
    exponential exponential_minus_one floor imag is_finite log log_plus_one logistic maximum
    minimum multiply negate not or popcnt power real reduce_precision remainder
    round_nearest_afz round_nearest_even rsqrt select shift_left shift_right_arithmetic
    shift_right_logical sign sine sqrt subtract tan tanh xor constant iota
    acos acosh asin asinh atan atanh bessel_i1e conj cosh digamma erf erf_inv erfc is_inf
    is_neg_inf is_pos_inf lgamma next_after polygamma sinh square zeta constant_like
    broadcast_add broadcast_and broadcast_atan2 broadcast_compare broadcast_divide
    broadcast_maximum broadcast_minimum broadcast_multiply broadcast_next_after broadcast_or
    broadcast_polygamma broadcast_power broadcast_remainder broadcast_select
    broadcast_subtract broadcast_xor broadcast_zeta
""".split())


def _derivative_kind(rtype) -> str:
    """"none" (no derivative flows: integers, booleans, tokens), "real" (a real floating
    tensor) or "other" (complex, quantized, tuples: not analysed)."""
    if type(rtype) is T.TokenType:
        return "none"
    if type(rtype) is not T.TensorType or rtype.quant is not None:
        return "other"
    if jnp.issubdtype(rtype.dtype, jnp.complexfloating):
        return "other"
    return "real" if jnp.issubdtype(rtype.dtype, jnp.floating) else "none"


def _elementwise_loop(ctx, op) -> bool:
    """Whether the loop's derivative is element-wise: every real floating value its body
    reads or computes has one shape S (or is a scalar), and every op computing one is
    element-wise, a scalar broadcast to S, or a call of such a function. The condition
    only decides when to stop (a step function of the data), so each element of the result
    is a function of the same element of each input and of the scalar inputs: reverse mode
    needs one forward-mode pass per input, not the loop's trips."""
    body = op.regions[1]
    kinds = [_derivative_kind(t) for t in op.result_types]
    if "other" in kinds:
        return False
    shapes = {t.shape for t, k in zip(op.result_types, kinds) if k == "real"}
    for vid in body.captures:
        value = ctx.env[vid]
        if jnp.issubdtype(jnp.result_type(value), jnp.complexfloating):
            return False
        if jnp.issubdtype(jnp.result_type(value), jnp.floating):
            shapes.add(np.shape(value))
    shapes.discard(())
    if len(shapes) > 1 or any(d is None for s in shapes for d in s):
        return False
    shape = shapes.pop() if shapes else ()
    return _elementwise_region(ctx.translator.module, body, shape, set())


def _elementwise_region(module, region, shape, seen) -> bool:
    for op in region.ops:
        kinds = [_derivative_kind(t) for t in op.result_types]
        if all(k == "none" for k in kinds):
            continue
        if "other" in kinds or any(k == "real" and t.shape not in (shape, ())
                                   for t, k in zip(op.result_types, kinds)):
            return False
        dialect, _, base = op.name.partition(".")
        if dialect in ("stablehlo", "mhlo", "chlo") and base in _ELEMENTWISE:
            continue
        if base == "broadcast_in_dim" and dialect in ("stablehlo", "mhlo") and \
                ints(op.attrs["broadcast_dimensions"]) in ((), tuple(range(len(shape)))):
            continue
        if op.name == "func.call":
            callee = module.functions.get(op.attrs["callee"])
            if callee is None:
                return False
            if callee.name in seen:
                continue
            seen.add(callee.name)
            arg_kinds = [_derivative_kind(t) for t in callee.input_types]
            if "other" in arg_kinds or any(
                    k == "real" and t.shape not in (shape, ())
                    for t, k in zip(callee.input_types, arg_kinds)):
                return False
            if _elementwise_region(module, callee.body, shape, seen):
                continue
        return False
    return True


def _custom_reverse_mode(loop, transpose, second_order):
    """`loop(captured, carry)` (a lax.while_loop) whose derivative is its own in forward
    mode and `transpose(wrapped, unflatten, res, cts, diff_in, diff_out)` in reverse mode:
    the cotangents of the differentiable inputs `res[i] for i in diff_in` (res: the flat
    inputs) from those of the differentiable outputs. `second_order(tangent_map)` is the
    forward-mode derivative again (`tangent_map(fn)`: that of `fn`), as second-order
    derivatives differentiate it with respect to the inputs."""
    wrapped = jax.custom_jvp(loop)
    symbolic_zero = jax.custom_derivatives.SymbolicZero

    def _jvp(primals, tangents):
        flat, tree = jax.tree_util.tree_flatten(primals)
        flat_tangents = jax.tree_util.tree_leaves(
            tangents, is_leaf=lambda t: isinstance(t, symbolic_zero))
        outs = wrapped(*primals)
        # only the inputs whose tangent is not a symbolic zero (under jax.grad: those that
        # depend on what is differentiated) take part: fewer tangents, fewer cotangents
        diff_in = [i for i, (x, t) in enumerate(zip(flat, flat_tangents))
                   if tangent_dtype(x) != jax.dtypes.float0 and type(t) is not symbolic_zero]
        diff_out = [j for j, o in enumerate(outs) if tangent_dtype(o) != jax.dtypes.float0]

        def unflatten(values):
            return jax.tree_util.tree_unflatten(tree, values)

        def tangent_map(fn):
            def forward(*args):
                res, lin = args[:len(flat)], args[len(flat):]
                full = [_zero_tangent(x) for x in res]
                for i, t in zip(diff_in, lin):
                    full[i] = t
                _, touts = jax.jvp(lambda *a: fn(*unflatten(a)), tuple(res), tuple(full))
                return [touts[j] for j in diff_out]
            return forward

        def transpose_map(*args):
            return transpose(wrapped, unflatten, list(args[:len(flat)]), args[len(flat):],
                             diff_in, diff_out)

        lin = [flat_tangents[i] for i in diff_in]
        # forward mode runs the loop as it is
        touts = custom_linear(tangent_map(loop), transpose_map, flat, lin,
                              second_order(tangent_map)) if diff_out and diff_in else []
        out_tangents = [_zero_tangent(o) for o in outs]
        for j, t in zip(diff_out, touts):
            out_tangents[j] = t
        return outs, tuple(out_tangents)

    wrapped.defjvp(_jvp, symbolic_zeros=True)
    return wrapped


def _zero_tangent(x):
    dtype = tangent_dtype(x)
    return np.zeros(np.shape(x), dtype) if dtype == jax.dtypes.float0 else jnp.zeros_like(x)


def bounded_reverse_mode(loop, bind, max_trips: int, where=("", "max_loop_trips")):
    """`loop(captured, carry)` (a lax.while_loop) whose derivative is its own in forward
    mode and, in reverse mode, that of the same loop run as `max_trips` checkpointed steps
    that stop changing the carry once the condition fails. If the loop needs more trips,
    its reverse-mode derivatives are NaN (loudly wrong rather than silently truncated) and
    a LoopBoundWarning says so when they are computed. `where`: the loop's location and
    where its bound came from, for the warning."""

    def bounded(captured, carry):
        cond_fn, body_fn = bind(captured)

        def step(c):
            return lax.cond(cond_fn(*c)[0], lambda c: tuple(body_fn(*c)), lambda c: c, c)

        final = checkpointed_repeat(step, tuple(carry), max_trips)
        return final, jnp.logical_not(cond_fn(*final)[0])

    def transpose(wrapped, unflatten, res, cts, diff_in, diff_out):
        def on_inputs(*diff):
            values = list(res)
            for i, v in zip(diff_in, diff):
                values[i] = v
            final, finished = bounded(*unflatten(values))
            return [final[j] for j in diff_out], finished

        _, pullback, finished = jax.vjp(on_inputs, *[res[i] for i in diff_in], has_aux=True)
        jax.debug.callback(functools.partial(_warn_unfinished, max_trips, where), finished)
        grads = pullback(list(cts))
        return [jnp.where(finished, g, jnp.full_like(g, np.nan)) for g in grads]

    # a derivative of the forward-mode derivative (second order, in reverse mode too) goes
    # through the bounded loop
    return _custom_reverse_mode(loop, transpose, lambda tangent_map: tangent_map(
        lambda *a: bounded(*a)[0]))


def _warn_unfinished(max_trips, where, finished):
    if not np.all(finished):
        location, why = where
        warnings.warn(
            f"stablehlo.while at {location}: the loop needs more than {max_trips} trips "
            f"({why}), so its reverse-mode derivatives are NaN; load the program with a "
            f"larger `max_loop_trips` (an int, or {{{location!r}: N}})", LoopBoundWarning,
            stacklevel=2)


def elementwise_reverse_mode(loop, op):
    """`loop(captured, carry)` (a lax.while_loop whose derivative is element-wise, see
    `_elementwise_loop`) whose derivative is its own in forward mode and, in reverse mode,
    is read off forward mode: with one tangent per differentiable input (ones on that
    input, batched in one run of the loop), each output element's derivative with respect
    to the same element of each input (or to a scalar input) is the Jacobian's only
    non-zero entry in its row. Exact whatever the trip count; no trip is stored. Second
    order: forward over reverse (`jax.hessian`), not reverse over reverse (an error naming
    `op`)."""

    def transpose(wrapped, unflatten, res, cts, diff_in, diff_out):
        def column(k):
            basis = [_zero_tangent(x) for x in res]
            for pos, i in enumerate(diff_in):
                basis[i] = jnp.full(np.shape(res[i]), k == pos, tangent_dtype(res[i]))
            _, touts = jax.jvp(lambda *a: wrapped(*unflatten(a)), tuple(res), tuple(basis))
            return [touts[j] for j in diff_out]

        columns = jax.vmap(column)(jnp.arange(len(diff_in)))
        grads = []
        for pos, i in enumerate(diff_in):
            shape, dtype = np.shape(res[i]), tangent_dtype(res[i])
            grad = jnp.zeros(shape, dtype)
            for ct, col in zip(cts, columns):
                # strong zeros: an output the function does not use (the unselected branch
                # of a select) can have an infinite or NaN derivative
                d = jnp.where(ct == 0, jnp.zeros((), ct.dtype), ct * col[pos])
                if d.shape == shape:
                    grad = grad + d.astype(dtype)
                elif shape == ():  # a scalar input reaches every element
                    grad = grad + jnp.sum(d).astype(dtype)
                # else a scalar output, which an element-wise input does not reach
            grads.append(grad)
        return grads

    return _custom_reverse_mode(loop, transpose, lambda tangent_map: forward_mode_only(
        tangent_map(loop), op, "reverse mode over the reverse-mode derivative of a loop "
        "whose derivative is element-wise (forward over reverse, as jax.hessian, works); "
        "load the program with `max_loop_trips=N` to run it as a bounded loop instead"))


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


def _fori_loop(body, init, k, start, bound, forwarded=()):
    counter_dtype = np.asarray(init[k]).dtype
    rest = tuple(init[:k]) + tuple(init[k + 1:])
    forwarded = tuple(forwarded[:k]) + tuple(forwarded[k + 1:])

    def step(i, carry):
        outs = body(*carry[:k], i, *carry[k:])
        return tuple(outs[:k]) + tuple(outs[k + 1:])

    # reverse-differentiable (static bounds): its derivatives are a scan's
    final = counted_loop(step, start, bound, rest, counter_dtype, forwarded) \
        if bound > start else rest
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
