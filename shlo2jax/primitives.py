"""Primitives lowering to StableHLO ops that lax offers only in a narrower form: a scatter with
any update body over several operands, and `rng_bit_generator` with every state the spec
allows. The op families bind them (ops/indexing.py, ops/random.py).
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import mlir
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
