"""Every use of a jax internal lives here, so a JAX upgrade touches one file; with them the
MLIR context those internals make, completed with the `quant` dialect jaxlib leaves out."""

from __future__ import annotations

import functools
from typing import Optional

import jax
import numpy as np


def make_ir_context():
    """An MLIR context with every dialect jax registers (func, stablehlo, chlo, sdy, mhlo, ...)."""
    from jax._src.interpreters import mlir as jax_mlir

    context = jax_mlir.make_ir_context()
    # The conformance `check` and `interpreter` dialects are not registered in jaxlib.
    context.allow_unregistered_dialects = True
    load_quant_dialect(context)  # `!quant.uniform` types must parse
    return context


_QUANT_ARTIFACT: Optional[bytes] = None
_QUANT_WARMUP = """func.func @q(%a: tensor<1x!quant.uniform<i8:f32, 1.0>>) -> tensor<1xf32> {
  %d = stablehlo.uniform_dequantize %a : (tensor<1x!quant.uniform<i8:f32, 1.0>>) -> tensor<1xf32>
  return %d : tensor<1xf32>
}"""


def load_quant_dialect(context) -> None:
    """Loads MLIR's `quant` dialect into `context` so `!quant.uniform` types parse.

    jaxlib registers no `quant` dialect with its Python contexts; the StableHLO
    portable-artifact reader loads it as a dependency, so reading a tiny artifact
    with a quantized type (made once by jaxlib's own serializer) brings it in."""
    global _QUANT_ARTIFACT
    from jaxlib.mlir.dialects import stablehlo
    if _QUANT_ARTIFACT is None:
        _QUANT_ARTIFACT = bytes(stablehlo.serialize_portable_artifact_str(
            _QUANT_WARMUP, stablehlo.get_minimum_version()))
    with context:
        stablehlo.deserialize_portable_artifact(context, _QUANT_ARTIFACT)


def refine_polymorphic_shapes(module):
    """jax's shape refinement of an exported module (StableHLO refinement plus inlining,
    shape assertions and jax.export's dynamic custom calls)."""
    from jax._src.interpreters import mlir as jax_mlir
    return jax_mlir.refine_polymorphic_shapes(module)


def compile_mlir_module(module_text, platform: str = "cpu", num_replicas: int = 1,
                        num_partitions: int = 1):
    """Compiles a StableHLO module with XLA directly (no translation) on one device.

    Returns `run(*arrays) -> list of arrays`. This is the oracle for translated
    programs: the same module, compiled as-is by the XLA that jax uses.
    """
    from jax._src import compiler, xla_bridge
    from jax._src.lib import xla_client as xc

    backend = xla_bridge.get_backend(platform)
    devices = backend.devices()[:num_replicas * num_partitions]
    options = compiler.get_compile_options(num_replicas=num_replicas,
                                           num_partitions=num_partitions)
    executable = backend.compile_and_load(module_text, executable_devices=xc.DeviceList(
        tuple(devices)), compile_options=options)

    def run(*arrays):
        with jax.enable_x64(True):
            args = [jax.device_put(a, devices[0]) for a in arrays]
            results = executable.execute_sharded(args)
            return [per_device[0] for per_device in
                    results.disassemble_into_single_device_arrays()]
    return run


def general_scatter_primitive():
    """A primitive lowering to `stablehlo.scatter` whose update region is a traced jaxpr.

    lax offers scatters only for fixed bodies and one operand; StableHLO allows any body
    over several operands. Binding takes `*inputs, indices, *updates` and the params
    `body` (a ClosedJaxpr over 2n scalars), `n`, `dnums` (lax.ScatterDimensionNumbers with
    the index vector last), `indices_are_sorted`, `unique_indices`. No AD or vmap rules.
    Uses jax's lowering API (Primitive, mlir.register_lowering, jaxpr_subcomp).
    """
    from jax.extend.core import Primitive
    from jax.interpreters import mlir
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo as hlo

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
        result_types = [mlir.aval_to_ir_type(mctx, a) for a in ctx.avals_out]
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
        scalars = [mlir.aval_to_ir_type(mctx, jax.core.ShapedArray((), a.dtype))
                   for a in ctx.avals_out]
        block = scatter_op.update_computation.blocks.append(*scalars, *scalars)
        with ir.InsertionPoint(block):
            consts = [mlir.ir_constant(np.asarray(c)) for c in body.consts]
            outs, _ = mlir.jaxpr_subcomp(
                mctx, body.jaxpr, ctx.name_stack, mlir.TokenSet(), consts,
                *block.arguments, dim_var_values=ctx.dim_var_values,
                const_lowering=ctx.const_lowering, outer_traceback=ctx.traceback)
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
    from jax.extend.core import Primitive
    from jax.interpreters import mlir
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo as hlo

    prim = Primitive("shlo2jax_rng_bit_generator")
    prim.multiple_results = True
    prim.def_impl(lambda *args, **params: jax.jit(functools.partial(prim.bind, **params))(*args))

    @prim.def_abstract_eval
    def _abstract(state, *, shape, dtype, algorithm):
        return [jax.core.ShapedArray(state.shape, state.dtype),
                jax.core.ShapedArray(shape, dtype)]

    def _lower(ctx, state, *, shape, dtype, algorithm):
        mctx = ctx.module_context
        state_type, bits_type = (mlir.aval_to_ir_type(mctx, a) for a in ctx.avals_out)
        attr = ir.Attribute.parse(f"#stablehlo<rng_algorithm {algorithm}>")
        return hlo.RngBitGeneratorOp(state_type, bits_type, attr, state).results

    mlir.register_lowering(prim, _lower)
    return prim


def no_reverse_mode_primitive():
    """An identity on tangents whose transpose raises: placed on the tangent outputs of an
    op that has a forward-mode but no reverse-mode derivative, so reverse mode fails with
    an error naming the op. Binding takes one array and the params `op_name`, `location`,
    `why`. Uses jax's primitive rule tables (ad, batching, mlir lowering).
    """
    from jax.extend.core import Primitive
    from jax.interpreters import ad, batching, mlir

    from shlo2jax.errors import TranslationError

    prim = Primitive("shlo2jax_no_reverse_mode")
    prim.def_impl(lambda x, **_: x)
    prim.def_abstract_eval(lambda x, **_: x)
    mlir.register_lowering(prim, lambda ctx, x, **_: [x])

    def _transpose(ct, x, *, op_name, location, why):
        raise TranslationError(op_name, location, f"cannot reverse-differentiate: {why}")

    ad.deflinear2(prim, _transpose)
    batching.primitive_batchers[prim] = lambda args, dims, **p: (prim.bind(*args, **p), dims[0])
    return prim


def set_batching_rule(prim, rule):
    """Registers `rule(args, dims, **params) -> (outs, out_dims)` as prim's vmap rule."""
    from jax.interpreters import batching
    batching.primitive_batchers[prim] = rule


def lax_geqrf(a):
    """jax's QR factorisation step (Householder reflectors and their taus, LAPACK's geqrf
    format), which `jax.lax.linalg` does not export."""
    from jax._src.lax.linalg import geqrf
    return geqrf(a)


def lax_geqp3(a, jpvt):
    """jax's column-pivoted QR (LAPACK's geqp3), which `jax.lax.linalg` does not export."""
    from jax._src.lax.linalg import geqp3
    return geqp3(a, jpvt)
