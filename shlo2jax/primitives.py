"""Primitives lowering to StableHLO ops that lax offers only in a narrower form: a scatter with
any update body over several operands, `rng_bit_generator` with every state the spec
allows, and a while loop of a known trip count that reverse mode differentiates. The op
families bind them (ops/indexing.py, ops/random.py, ops/control_flow.py).
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from jax import lax
from jax.extend.core import Literal, Primitive
from jax.interpreters import ad, mlir
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo

from shlo2jax import compat
from shlo2jax.compat import lower_jaxpr


def general_scatter_primitive():
    """A primitive lowering to `stablehlo.scatter` whose update region is a traced jaxpr.

    lax offers scatters only for fixed bodies and one operand; StableHLO allows any body
    over several operands. Binding takes `*inputs, indices, *updates` and the params
    `body` (a ClosedJaxpr over 2n scalars), `n`, `dnums` (lax.ScatterDimensionNumbers with
    the index vector last), `indices_are_sorted`, `unique_indices`. No AD or vmap rules.
    Uses jax's lowering API (Primitive, mlir.register_lowering, jaxpr_subcomp).
    """
    prim = Primitive("shlo2jax_general_scatter")
    prim.multiple_results = True
    # Outside jit (never the case for translated programs), run it compiled.
    prim.def_impl(lambda *args, **params: jax.jit(functools.partial(prim.bind, **params))(*args))

    @prim.def_abstract_eval
    def _abstract(*avals, n, **_):
        return [jax.core.ShapedArray(a.shape, a.dtype) for a in avals[:n]]

    def _lower(ctx, *args, body, n, dnums, indices_are_sorted, unique_indices):
        inputs, indices, updates = args[:n], args[n], args[n + 1:]
        mctx = ctx.module_context
        result_types = [compat.aval_to_ir_type(mctx, a) for a in ctx.avals_out]
        hlo_dnums = hlo.ScatterDimensionNumbers.get(
            update_window_dims=list(dnums.update_window_dims),
            inserted_window_dims=list(dnums.inserted_window_dims),
            input_batching_dims=list(dnums.operand_batching_dims),
            scatter_indices_batching_dims=list(dnums.scatter_indices_batching_dims),
            scattered_dims_to_operand_dims=list(dnums.scatter_dims_to_operand_dims),
            index_vector_dim=len(ctx.avals_in[n].shape) - 1)
        scatter_op = hlo.ScatterOp(result_types, list(inputs), indices, list(updates), hlo_dnums,
                                   indices_are_sorted=ir.BoolAttr.get(indices_are_sorted),
                                   unique_indices=ir.BoolAttr.get(unique_indices))
        scalars = [compat.aval_to_ir_type(mctx, jax.core.ShapedArray((), a.dtype))
                   for a in ctx.avals_out]
        block = scatter_op.update_computation.blocks.append(*scalars, *scalars)
        with ir.InsertionPoint(block):
            consts = [mlir.ir_constant(np.asarray(c)) for c in body.consts]
            outs = lower_jaxpr(ctx, body.jaxpr, consts, *block.arguments)
            flat = []
            for value in outs:
                flat.extend(value if isinstance(value, (tuple, list)) else [value])
            hlo.return_(flat)
        return scatter_op.results

    mlir.register_lowering(prim, _lower)
    return prim


@functools.cache
def rng_bit_generator_primitive():
    """A primitive lowering to `stablehlo.rng_bit_generator` with the state as given.

    lax.rng_bit_generator takes a u64[2] (or u32[4]) state only; XLA's Philox also takes the
    spec's u64[3]. Binding takes the state and the params `shape`, `dtype` (an unsigned
    type of 8..64 bits: XLA fills any of them) and `algorithm` ("DEFAULT", "THREE_FRY",
    "PHILOX"); returns (new state, bits). No AD rule (the values are integers) or vmap rule.
    """
    prim = Primitive("shlo2jax_rng_bit_generator")
    prim.multiple_results = True
    prim.def_impl(lambda *args, **params: jax.jit(functools.partial(prim.bind, **params))(*args))

    @prim.def_abstract_eval
    def _abstract(state, *, shape, dtype, algorithm):
        return [jax.core.ShapedArray(state.shape, state.dtype),
                jax.core.ShapedArray(shape, dtype)]

    def _lower(ctx, state, *, shape, dtype, algorithm):
        mctx = ctx.module_context
        state_type, bits_type = (compat.aval_to_ir_type(mctx, a) for a in ctx.avals_out)
        attr = ir.Attribute.parse(f"#stablehlo<rng_algorithm {algorithm}>")
        return hlo.RngBitGeneratorOp(state_type, bits_type, attr, state).results

    mlir.register_lowering(prim, _lower)
    return prim


def counted_loop(step, start: int, bound: int, carry, counter_dtype, forwarded=()):
    """`carry` after `carry = step(i, carry)` for i = start, ..., bound - 1 (start < bound; i
    a scalar of `counter_dtype`, which holds both), as a while loop that reverse mode
    differentiates: `step` is traced once, the loop lowers as the while loop it is, and its
    derivatives are those of the scan of its trips (see `counted_loop_primitive`).
    `forwarded[j]` true: `step` returns carry[j] as it is given (a scan's stacked inputs,
    a loop's weights), so the loop takes it as a constant of its body, not a carried value
    (as lax.while_loop moves what its body forwards)."""
    if compat.jit_disabled():  # op by op, as jax.disable_jit asks: a Python loop
        return lax.fori_loop(start, bound, lambda i, c: tuple(
            step(lax.convert_element_type(i, counter_dtype), c)), tuple(carry))
    first, last, one = (np.asarray(n, counter_dtype) for n in (start, bound, 1))
    carry = tuple(carry)
    moving = [j for j in range(len(carry)) if not (j < len(forwarded) and forwarded[j])]
    leaves, tree = jax.tree_util.tree_flatten(tuple(carry[j] for j in moving))  # (tokens: [])

    def body(i, *leaves):
        given = list(carry)  # (the forwarded ones: the enclosing trace's, constants here)
        for j, value in zip(moving, jax.tree_util.tree_unflatten(tree, leaves)):
            given[j] = value
        outs = step(i, tuple(given))
        return [lax.add(i, one), *jax.tree_util.tree_leaves(tuple(outs[j] for j in moving))]

    args = [first, *leaves]
    body_jaxpr, body_env = compat.trace_jaxpr(body, args, "counted loop body")
    cond_jaxpr, cond_env = compat.trace_jaxpr(lambda i, *_: [lax.lt(i, last)], args,
                                              "counted loop condition")
    in_avals = [jax.typeof(a) for a in args]
    if body_jaxpr.effects or cond_jaxpr.effects or \
            [v.aval for v in body_jaxpr.outvars] != in_avals:
        # (ordered effects keep their order in a scan; a weak type lax.while_loop promotes)
        return _staged_by_while_loop(step, first, last, one, carry, bound - start)
    body_jaxpr, body_consts = compat.closed_jaxpr(body_jaxpr, body_env, args)
    cond_jaxpr, cond_consts = compat.closed_jaxpr(cond_jaxpr, cond_env, args)
    outs = counted_loop_primitive().bind(
        *cond_consts, *body_consts, *args, cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr,
        cond_nconsts=len(cond_consts), body_nconsts=len(body_consts), trips=bound - start)
    final = list(carry)
    for j, value in zip(moving, jax.tree_util.tree_unflatten(tree, outs[1:])):
        final[j] = value
    return tuple(final)


def _staged_by_while_loop(step, first, last, one, carry, trips: int) -> tuple:
    """The counted loop as lax.while_loop stages it, its while equation then bound as the
    counted loop (or, with ordered effects, as the scan of its trips)."""
    leaves, tree = jax.tree_util.tree_flatten(carry)

    def loop(*leaves):
        carry = jax.tree_util.tree_unflatten(tree, leaves)
        return jax.tree_util.tree_leaves(lax.while_loop(
            lambda c: lax.lt(c[0], last), lambda c: (lax.add(c[0], one), *step(c[0], c[1:])),
            (first, *carry))[1:])

    jaxpr, env = compat.trace_jaxpr(loop, leaves, "counted loop")
    for eqn in jaxpr.eqns:  # the while loop (and whatever lax staged around it)
        args = [v.val if isinstance(v, Literal) else env[v] for v in eqn.invars]
        if eqn.primitive is compat.WHILE_P and not eqn.effects:
            outs = counted_loop_primitive().bind(*args, trips=trips, **eqn.params)
        elif eqn.primitive is compat.WHILE_P:  # ordered effects: the scan keeps their order
            outs = _as_scan(args, trips=trips, **eqn.params)
        else:
            subfuns, params = eqn.primitive.get_bind_params(eqn.params)
            outs = eqn.primitive.bind(*subfuns, *args, **params)
        env.update(zip(eqn.outvars, outs if eqn.primitive.multiple_results else [outs]))
    return jax.tree_util.tree_unflatten(
        tree, [v.val if isinstance(v, Literal) else env[v] for v in jaxpr.outvars])


@functools.cache
def counted_loop_primitive():
    """jax's while loop (its operands and params: cond_jaxpr, body_jaxpr, cond_nconsts,
    body_nconsts) known to run `trips` trips (a further param).

    It evaluates and lowers as the while loop, and is differentiated (forward and reverse)
    and batched as the scan of `trips` applications of the body, which is what
    lax.fori_loop with static bounds stages. jax lowers such a scan by staging it again as
    a while loop: about a millisecond per loop, a third of the lowering of a program of 240
    counted loops; this primitive lowers straight to the loop, and pays for the scan only
    when a derivative or a batch is taken.
    """
    prim = Primitive("shlo2jax_counted_loop")
    prim.multiple_results = True
    prim.def_impl(lambda *args, **params: jax.jit(functools.partial(prim.bind, **params))(*args))
    prim.def_effectful_abstract_eval(
        lambda *avals, trips, **params: compat.WHILE_P.abstract_eval(*avals, **params))
    while_lowering = compat.lowering_rule(compat.WHILE_P)
    mlir.register_lowering(prim, lambda ctx, *args, trips, **params:
                           while_lowering(ctx, *args, **params))
    ad.primitive_jvps[prim] = _counted_loop_jvp
    compat.set_batching_rule(prim, _counted_loop_batch)
    return prim


def _as_scan(args, *, trips, cond_nconsts, body_nconsts, body_jaxpr, **_):
    """The counted loop's results as the scan of its trips."""
    consts = args[cond_nconsts:cond_nconsts + body_nconsts]
    body = compat.jaxpr_as_fun(body_jaxpr)
    carry = tuple(args[cond_nconsts + body_nconsts:])
    return list(lax.scan(lambda c, _: (tuple(body(*consts, *c)), None), carry, None,
                         length=trips)[0])


def _counted_loop_jvp(primals, tangents, **params):
    # only the inputs with a tangent are differentiated: the scan's JVP then carries no
    # tangents for the others
    moving = [type(t) is not ad.Zero for t in tangents]

    def on_moving(*values):
        values = iter(values)
        return _as_scan([next(values) if m else p for p, m in zip(primals, moving)], **params)

    outs, out_tangents = jax.jvp(on_moving, [p for p, m in zip(primals, moving) if m],
                                 [t for t, m in zip(tangents, moving) if m])
    return outs, [ad.Zero(jax.typeof(o).to_tangent_aval()) if t.dtype == jax.dtypes.float0
                  else t for o, t in zip(outs, out_tangents)]


def _counted_loop_batch(args, dims, **params):
    outs = jax.vmap(lambda *a: _as_scan(a, **params), in_axes=tuple(dims))(*args)
    return list(outs), [0] * len(outs)
