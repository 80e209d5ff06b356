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


def with_serialized_module(exported, module):
    """`exported` (a `jax.export.Exported`) with `module` serialized as its module bytes, the
    way `jax.export` serializes a module it lowered (a VHLO artifact, jax's target version)."""
    import dataclasses

    from jax._src.export import _export
    with module.context:
        serialized = _export._module_to_bytecode(module)
    return dataclasses.replace(exported, mlir_module_serialized=serialized)


def compile_mlir_module(module_text, platform: str = "cpu", num_replicas: int = 1,
                        num_partitions: int = 1):
    """Compiles a StableHLO module with XLA directly (no translation) on one device.

    Returns `run(*arrays) -> list of arrays`. This is the oracle for translated
    programs: the same module, compiled as-is by the XLA that jax uses.
    """
    from jax._src import compiler, xla_bridge
    from jax._src.lib import xla_client as xc

    backend = xla_bridge.get_backend(platform)
    initialize_kernels((platform,))
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


# ------------------------------------------------------------------ strong-zero derivatives

@functools.cache
def strong_zero_ops():
    """The element-wise ops whose local derivative can be infinite, with strong-zero
    derivatives: a zero tangent or cotangent times an infinite (or NaN) local derivative
    contributes 0, as it does in the producer's own derivative of the function the module
    was exported from.

    Exporters decompose erf, erf_inv, lgamma, Bessel functions, ... into polynomial branches
    chosen by `select`; the unselected branch can overflow (`1/x` at 0, `exp` of a large
    value), and reverse mode multiplies its exactly-zero cotangent by that infinite local
    derivative: 0 * inf = NaN. Here every such op is a primitive of its own whose values and
    lowering are exactly the lax primitive's (the same StableHLO op), and whose JVP multiplies
    tangents with `sz_mul`/`sz_div`: linear primitives with 0 * anything = 0, their own
    transposes and batching rules, whose derivatives are strong-zero too (to every order).

    Returns a namespace: `mul div exp expm1 log log1p sqrt rsqrt cbrt tan atan2 pow` (the
    primal ops) and `sz_mul sz_div` (the tangent products). Uses jax's primitive rule tables
    (ad, batching, mlir lowering), `core.auto_insert_reshard` (shard_map's varying axes) and
    lax's own abstract evaluation and lowering rules of the wrapped primitives.
    """
    import types

    import jax.numpy as jnp
    from jax import lax
    from jax._src import core, dispatch
    from jax._src.interpreters import ad, batching, mlir
    from jax._src.lax import lax as lax_internal
    from jax.extend.core import Primitive

    def const(x, value):
        return np.array(value, dtype=np.dtype(x.dtype))

    def unbroadcast(aval, x):  # batching may broadcast size-1 dimensions (lax allows it)
        return lax_internal._unbroadcast(aval, x)

    def new_primitive(name, like, nary):
        prim = Primitive(name)
        prim.def_impl(functools.partial(dispatch.apply_primitive, prim))
        prim.def_effectful_abstract_eval(like.abstract_eval)
        (batching.defbroadcasting if nary else batching.defvectorized)(prim)
        return prim

    # -- the tangent products: 0 * x = 0 for every x, inf and NaN included
    sz_mul_p = new_primitive("strong_zero_mul", lax_internal.mul_p, True)
    sz_div_p = new_primitive("strong_zero_div", lax_internal.div_p, True)

    def sz_mul(a, b):
        return sz_mul_p.bind(*core.auto_insert_reshard(a, b), out_dtype=None)

    def sz_div(t, x):
        """t / x, linear in t, 0 where t is 0."""
        return sz_div_p.bind(*core.auto_insert_reshard(t, x))

    def zero_where(mask, value):
        return lax.select(jnp.broadcast_to(mask, value.shape), lax.full_like(value, 0), value)

    def sz_mul_value(a, b, out_dtype=None):
        return zero_where((a == 0) | (b == 0), lax.mul(a, b))

    def sz_div_value(t, x):
        return zero_where(t == 0, lax.div(t, x))

    mlir.register_lowering(sz_mul_p, mlir.lower_fun(sz_mul_value, multiple_results=False))
    mlir.register_lowering(sz_div_p, mlir.lower_fun(sz_div_value, multiple_results=False))
    ad.defbilinear(sz_mul_p,
                   lambda ct, a, b, **_: unbroadcast(a.aval, sz_mul(ct, b)),
                   lambda ct, a, b, **_: unbroadcast(b.aval, sz_mul(a, ct)))
    ad.defjvp(sz_div_p,
              lambda dt, t, x: sz_div(dt, x),
              lambda dx, t, x: lax.neg(sz_mul(dx, sz_div(sz_div(t, x), x))))

    def numerator_transpose(name, divide):
        def transpose(ct, x, y):
            if ad.is_undefined_primal(y):
                raise ValueError(f"{name} is linear in its numerator only")
            if type(ct) is ad.Zero:
                return [ad.Zero(x.aval.to_ct_aval()), None]
            return [unbroadcast(x.aval, divide(ct, y)), None]
        return transpose

    ad.primitive_transposes[sz_div_p] = numerator_transpose("strong_zero_div", sz_div)

    # -- the primal ops: lax's values and lowering, strong-zero JVPs
    def wrap(source, example):
        params = _LAX_PARAMS.get(source.name, {})  # what lax's own function binds
        prim = new_primitive(f"{source.name}_strong_zero", source, len(example) > 1)
        entry = mlir._lowerings[source]
        mlir.register_lowering(prim, entry.rule, inline=entry.inline)
        for platform, table in list(mlir._platform_specific_lowerings.items()):
            if source in table:
                mlir.register_lowering(prim, table[source].rule, platform=platform,
                                       inline=table[source].inline)

        def bind(*args):
            return prim.bind(*core.auto_insert_reshard(*args), **params)
        bind.__name__ = source.name
        return prim, bind

    f1, f2 = (np.float32(1),), (np.float32(1), np.float32(1))
    L = lax_internal
    mul_p, mul = wrap(L.mul_p, f2)
    div_p, div = wrap(L.div_p, f2)
    exp_p, exp = wrap(L.exp_p, f1)
    expm1_p, expm1 = wrap(L.expm1_p, f1)
    log_p, log = wrap(L.log_p, f1)
    log1p_p, log1p = wrap(L.log1p_p, f1)
    sqrt_p, sqrt = wrap(L.sqrt_p, f1)
    rsqrt_p, rsqrt = wrap(L.rsqrt_p, f1)
    cbrt_p, cbrt = wrap(L.cbrt_p, f1)
    tan_p, tan = wrap(L.tan_p, f1)
    atan2_p, atan2 = wrap(L.atan2_p, f2)
    pow_p, pow_ = wrap(L.pow_p, f2)

    one = lambda x: const(x, 1)
    # The formulas are lax's own (jax/_src/lax/lax.py), with every product of a tangent
    # strong-zero and every residual computed by these ops (so higher orders are too).
    ad.defbilinear(mul_p,
                   lambda ct, x, y, **_: unbroadcast(x.aval, sz_mul(ct, y)),
                   lambda ct, x, y, **_: unbroadcast(y.aval, sz_mul(x, ct)))
    ad.defjvp(mul_p, lambda g, x, y, **_: sz_mul(g, y), lambda g, x, y, **_: sz_mul(x, g))
    ad.defjvp2(div_p, lambda g, ans, x, y: sz_div(g, y),
               lambda g, ans, x, y: lax.neg(sz_mul(g, div(ans, y))))
    ad.primitive_transposes[div_p] = numerator_transpose("division", sz_div)
    ad.defjvp2(exp_p, lambda g, ans, x, **_: sz_mul(g, ans))
    ad.defjvp2(expm1_p, lambda g, ans, x, **_: sz_mul(g, lax.add(ans, one(ans))))
    ad.defjvp(log_p, lambda g, x, **_: sz_div(g, x))
    ad.defjvp(log1p_p, lambda g, x, **_: sz_div(g, lax.add(x, one(x))))
    ad.defjvp2(sqrt_p, lambda g, ans, x, **_: sz_mul(g, div(const(x, 0.5), ans)))
    ad.defjvp2(rsqrt_p, lambda g, ans, x, **_: sz_mul(g, mul(const(x, -0.5), div(ans, x))))
    ad.defjvp2(cbrt_p, lambda g, ans, x, **_: sz_mul(g, div(const(x, 1 / 3), mul(ans, ans))))
    ad.defjvp2(tan_p, lambda g, ans, x, **_: sz_mul(g, lax.add(one(x), mul(ans, ans))))

    def atan2_denominator(x, y):
        return lax.add(mul(x, x), mul(y, y))
    ad.defjvp(atan2_p, lambda g, x, y: sz_mul(g, div(y, atan2_denominator(x, y))),
              lambda g, x, y: sz_mul(g, div(lax.neg(x), atan2_denominator(x, y))))

    def pow_jvp_base(g, ans, x, y):
        return sz_mul(g, mul(y, pow_(x, lax.sub(y, one(y)))))

    def pow_jvp_exponent(g, ans, x, y):
        # lax's rule: log(x) with x = 0 replaced by 1 (the exponent's derivative is 0 there)
        safe_x = lax.select(x == const(x, 0), lax.full_like(x, 1), x)
        return sz_mul(g, mul(log(safe_x), ans))
    ad.defjvp2(pow_p, pow_jvp_base, pow_jvp_exponent)

    return types.SimpleNamespace(
        mul=mul, div=div, exp=exp, expm1=expm1, log=log, log1p=log1p, sqrt=sqrt, rsqrt=rsqrt,
        cbrt=cbrt, tan=tan, atan2=atan2, pow=pow_, sz_mul=sz_mul, sz_div=sz_div)


# lax.mul binds `out_dtype`; the unary ops bind `accuracy` (None: XLA's default).
_LAX_PARAMS = {"mul": {"out_dtype": None}, "exp": {"accuracy": None},
                   "expm1": {"accuracy": None}, "log": {"accuracy": None},
                   "log1p": {"accuracy": None}, "sqrt": {"accuracy": None},
                   "rsqrt": {"accuracy": None}, "cbrt": {"accuracy": None},
                   "tan": {"accuracy": None}}


# ------------------------------------------------------------------ linear maps with a custom transpose

class _Callable:
    """A function as a primitive's param: params must hash, and a closure compares by identity."""
    __slots__ = ("fn", "__weakref__")

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args):
        return self.fn(*args)


@functools.cache
def _custom_linear_primitive():
    from jax._src import core
    from jax._src.interpreters import ad, batching, mlir
    from jax.extend.core import Primitive

    prim = Primitive("shlo2jax_custom_linear")
    prim.multiple_results = True

    def value(*args, forward, transpose, num_res, differentiable_forward):
        return list(forward(*args))

    def abstract(*avals, forward, transpose, num_res, differentiable_forward=None):
        outs = jax.eval_shape(forward, *[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals])
        return [core.ShapedArray(o.shape, o.dtype) for o in outs]

    prim.def_impl(value)
    prim.def_abstract_eval(abstract)
    mlir.register_lowering(prim, mlir.lower_fun(value, multiple_results=True))

    def jvp(primals, tangents, *, forward, transpose, num_res, differentiable_forward):
        res, lin = primals[:num_res], primals[num_res:]
        res_tangents, lin_tangents = tangents[:num_res], tangents[num_res:]
        params = dict(forward=forward, transpose=transpose, num_res=num_res,
                      differentiable_forward=differentiable_forward)
        out = prim.bind(*primals, **params)
        out_tangents = prim.bind(*res, *map(ad.instantiate_zeros, lin_tangents), **params)
        if any(type(t) is not ad.Zero for t in res_tangents):
            # the map itself depends on the residuals (second-order derivatives)
            _, through_res = jax.jvp(lambda *r: differentiable_forward(*r, *lin), tuple(res),
                                     tuple(map(ad.instantiate_zeros, res_tangents)))
            out_tangents = [a + b for a, b in zip(out_tangents, through_res)]
        return out, out_tangents

    def transpose_rule(cts, *args, forward, transpose, num_res, differentiable_forward):
        res = args[:num_res]
        if any(ad.is_undefined_primal(r) for r in res):
            raise ValueError("custom_linear is not linear in its residual arguments")
        avals = abstract(*[a.aval if ad.is_undefined_primal(a) else core.typeof(a) for a in args],
                         forward=forward, transpose=transpose, num_res=num_res)
        cts = [jax.lax.full(a.shape, 0, a.dtype) if type(ct) is ad.Zero else ct
               for ct, a in zip(cts, avals)]
        return [None] * num_res + list(transpose(*res, *cts))

    def batch(args, dims, *, forward, transpose, num_res, differentiable_forward):
        size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
        # linear arguments are materialised batched, so cotangents come back batched too
        args = [a if i < num_res and d is None else batching.bdim_at_front(a, d, size)
                for i, (a, d) in enumerate(zip(args, dims))]
        res_axes = tuple(None if d is None else 0 for d in dims[:num_res])
        n_lin = len(args) - num_res
        batched_forward = jax.vmap(forward, in_axes=res_axes + (0,) * n_lin)
        n_out = len(jax.eval_shape(batched_forward, *args))
        batched_transpose = jax.vmap(transpose, in_axes=res_axes + (0,) * n_out)
        batched_differentiable = jax.vmap(differentiable_forward,
                                          in_axes=res_axes + (0,) * n_lin)
        outs = prim.bind(*args, forward=_Callable(batched_forward),
                         transpose=_Callable(batched_transpose), num_res=num_res,
                         differentiable_forward=_Callable(batched_differentiable))
        return outs, [0] * len(outs)

    ad.primitive_jvps[prim] = jvp
    ad.primitive_transposes[prim] = transpose_rule
    batching.primitive_batchers[prim] = batch
    return prim


def custom_linear(forward, transpose, residuals, linear, differentiable_forward=None) -> list:
    """`forward(*residuals, *linear)`, a list of arrays linear in `linear`, whose transpose
    is `transpose(*residuals, *cotangents)` (a list of cotangents of `linear`).

    Like `jax.custom_derivatives.linear_call`, plus a batching rule and derivatives with
    respect to the residuals (second order), taken through `differentiable_forward` (the
    same map, written so that reverse mode can go through it; default `forward`). It is how
    a derivative can be computed one way in forward mode and another in reverse mode: a
    `custom_jvp` rule returns `custom_linear(jvp, vjp, primals, tangents)`. Uses jax's
    primitive rule tables.
    """
    return _custom_linear_primitive().bind(
        *residuals, *linear, forward=_Callable(forward), transpose=_Callable(transpose),
        num_res=len(residuals),
        differentiable_forward=_Callable(differentiable_forward or forward))


@functools.cache
def direct_call_primitive():
    """A primitive whose lowering is a StableHLO module's function itself: the module's ops,
    merged into the module being lowered (jax's `merge_mlir_modules`, as `jax.export`'s
    `Exported.call` does), and a call of it. Binding takes the function's arguments and the
    param `callee` (shlo2jax.direct.DirectCallee: `bytecode`, a module whose `@main` is the
    function; `out_avals`; `translated`, the translation of the same function;
    `custom_call_targets`, the kernels the module calls). Derivatives and batching are the
    translation's: its JVP and its vmap; so is the lowering for a platform that lacks one of
    the module's kernels."""
    from jax.extend.core import Primitive
    from jax.interpreters import ad, batching, mlir
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import func as func_dialect

    prim = Primitive("shlo2jax_direct_call")
    prim.multiple_results = True
    from jax._src import config

    def _impl(*args, callee):
        if config.disable_jit.value:  # op by op, as jax.disable_jit asks: the translation
            return list(callee.translated(*args))
        return jax.jit(functools.partial(prim.bind, callee=callee))(*args)

    prim.def_impl(_impl)
    prim.def_abstract_eval(lambda *avals, callee: [jax.core.ShapedArray(a.shape, a.dtype)
                                                    for a in callee.out_avals])

    def _lower(ctx, *args, callee):
        mctx = ctx.module_context
        if callee.custom_call_targets:
            if not all(callee.custom_call_targets <= registered_custom_call_targets(p)
                       for p in mctx.platforms):
                # a kernel the target platform lacks (a GPU export's solver lowered for CPU):
                # the translation, which maps it to lax
                return mlir.lower_fun(lambda *a: list(callee.translated(*a)),
                                      multiple_results=True)(ctx, *args)
            initialize_kernels(mctx.platforms)
        submodule = ir.Module.parse(callee.bytecode, context=mctx.context)
        name = mlir.merge_mlir_modules(mctx.module, f"shlo2jax_{callee.name}", submodule,
                                       dst_symtab=mctx.symbol_table)
        result_types = [mlir.aval_to_ir_type(mctx, a) for a in ctx.avals_out]
        call = func_dialect.CallOp(result_types, ir.FlatSymbolRefAttr.get(name), list(args))
        return call.results

    mlir.register_lowering(prim, _lower)

    def _jvp(primals, tangents, *, callee):
        tangents = [ad.instantiate_zeros(t) for t in tangents]
        outs, out_tangents = jax.jvp(callee.translated, tuple(primals), tuple(tangents))
        return list(outs), list(out_tangents)

    ad.primitive_jvps[prim] = _jvp

    def _batch(args, dims, *, callee):
        outs = jax.vmap(callee.translated, in_axes=tuple(dims), out_axes=0)(*args)
        return list(outs), [0] * len(outs)

    batching.primitive_batchers[prim] = _batch
    return prim


def stable_custom_call_targets() -> frozenset:
    """The custom call targets whose ABI `jax.export` guarantees stable (jax's own kernels:
    LAPACK, cuSOLVER, ... FFI handlers)."""
    from jax._src.export import _export
    return frozenset(_export._CUSTOM_CALL_TARGETS_GUARANTEED_STABLE)


def registered_custom_call_targets(platform: str) -> frozenset:
    """The custom call targets XLA's `platform` ("cpu", "cuda", ...) implements in this process
    (a few dozen names: asked at each lowering, so a kernel registered later counts)."""
    from jax._src.lib import xla_client
    try:
        return frozenset(xla_client.custom_call_targets(platform))
    except Exception:  # a platform XLA does not know here
        return frozenset()


def initialize_kernels(platforms) -> None:
    """Binds jaxlib's kernels for `platforms` to their libraries before a module that calls them
    is compiled: the CPU LAPACK kernels are registered with XLA at import, but until jax
    initializes them (its linalg lowerings do, and `Exported.call`) they call through null
    function pointers, and the process dies."""
    from jax._src.export import _export
    _export._ensure_backends_initialized(tuple(platforms))
