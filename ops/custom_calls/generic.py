"""Built-in `stablehlo.custom_call` targets found in real exports.

Random bits (threefry), device-placement markers, 64-bit splitting,
approximate top-k (`ApproxTopK`, TPU's `PartialReduce`), `lax.empty`'s
`AllocateBuffer`, jax.export's `stablehlo.dynamic_*` calls, and the targets
that cannot run here, reported at load time with what they need: kernels
compiled for one platform (Pallas/Mosaic/Triton/cuDNN) and calls back into the
exporting process (Python callbacks, `tf.call_tf_function`). The
linear-algebra kernels are in ops/custom_calls/linalg.py, the sharding markers
in ops/sharding.py.

Built-ins never replace a rule that is already registered: a target the user
registered first (before the built-ins were imported) keeps the user's rule.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.random import threefry2x32_p

from shlo2jax import value_types as T
from shlo2jax.ops._common import backend_config, single_or_tuple
from shlo2jax.registry import Unsupported, register_custom_call


# ------------------------------------------------ identity markers

def _prepare_same_shape(op):
    if len(op.operands) != len(op.result_types):
        raise Unsupported(f"{op.attrs.get('call_target_name')} with {len(op.operands)} operands "
                          f"and {len(op.result_types)} results")
    return None


# Memory-space and placement annotations: one address space here.
@register_custom_call("annotate_device_placement", "MoveToHost", "MoveToDevice",
                      prepare=_prepare_same_shape)
def placement_marker(ctx, op, *args):
    return single_or_tuple(op, args)


# ------------------------------------------------ random bits

# The pre-FFI `cu_threefry2x32` (descriptor) is in legacy_gpu.py.
@register_custom_call("cu_threefry2x32_ffi", "hip_threefry2x32_ffi")
def threefry(ctx, op, k0, k1, x0, x1):
    return tuple(threefry2x32_p.bind(k0, k1, x0, x1))


# ------------------------------------------------ 64-bit splitting (TPU x64 rewriting)

def _prepare_x64_part(op):
    return op.result_types[0].dtype


def _as_u64(x):
    return lax.bitcast_convert_type(x, np.uint64) if x.dtype != np.uint64 else x


@register_custom_call("X64SplitLow", prepare=_prepare_x64_part)
def x64_split_low(ctx, op, x):
    dtype = op.params
    low = lax.convert_element_type(_as_u64(x), np.uint32)
    return lax.bitcast_convert_type(low, dtype) if dtype != np.uint32 else low


@register_custom_call("X64SplitHigh", prepare=_prepare_x64_part)
def x64_split_high(ctx, op, x):
    dtype = op.params
    high = lax.convert_element_type(lax.shift_right_logical(_as_u64(x), np.uint64(32)), np.uint32)
    return lax.bitcast_convert_type(high, dtype) if dtype != np.uint32 else high


@register_custom_call("X64Combine", prepare=_prepare_x64_part)
def x64_combine(ctx, op, low, high):
    dtype = op.params

    def u64(part):
        part = lax.bitcast_convert_type(part, np.uint32) if part.dtype != np.uint32 else part
        return lax.convert_element_type(part, np.uint64)
    bits = lax.bitwise_or(lax.shift_left(u64(high), np.uint64(32)), u64(low))
    return lax.bitcast_convert_type(bits, dtype) if dtype != np.uint64 else bits


# ------------------------------------------------ approximate top-k

class TopK(NamedTuple):
    """The best `k` of `n` operands (keys first) along `dim`, ordered by `comparator`."""
    comparator: str
    n: int
    dim: int
    k: int


def _prepare_approx_top_k(op):
    cfg = backend_config(op)
    called = op.attrs.get("called_computations", ())
    if len(called) != 1:
        raise Unsupported("ApproxTopK without a single comparator")
    n = len(op.operands) // 2
    rtype = op.result_types[0]
    dim = int(cfg.get("reduction_dim", -1)) % len(rtype.shape)
    return TopK(called[0], n, dim, rtype.shape[dim])


def _comparator_is_greater(ctx, name) -> bool:
    fdef = ctx.translator.module.functions[name]
    for cop in fdef.body.ops:
        if cop.name in ("stablehlo.compare", "mhlo.compare"):
            direction = str(cop.attrs.get("comparison_direction", "GT"))
            return "GT" in direction or "GE" in direction
    raise ValueError(f"comparator @{name} has no compare op")


def _top_k(ctx, p: TopK, operands) -> tuple:
    # The exact top k is a valid answer at any recall target.
    keys, rest = operands[0], operands[1:p.n]
    if _comparator_is_greater(ctx, p.comparator):
        keys = lax.neg(keys) if T.is_float(keys.dtype) else lax.bitwise_not(keys)
    order = lax.iota(np.int32, operands[0].shape[p.dim])
    order = lax.broadcast_in_dim(order, operands[0].shape, (p.dim,))
    sorted_ = lax.sort((keys, order), dimension=p.dim, is_stable=True, num_keys=1)
    index = lax.slice_in_dim(sorted_[1], 0, p.k, axis=p.dim)
    outs = [operands[0], *rest]
    return tuple(jnp.take_along_axis(x, index, axis=p.dim) for x in outs)


@register_custom_call("ApproxTopK", prepare=_prepare_approx_top_k)
def approx_top_k(ctx, op, *operands):
    return _top_k(ctx, op.params, operands)


class PartialReduce(NamedTuple):
    top_k: TopK
    as_tuple: bool  # the results come as one tuple


def _prepare_partial_reduce(op):
    # XLA's approximate top-k on TPU: (operands..., init values...) -> one bin per
    # output slot along reduction_dim, with a JSON backend_config string
    # {"log2_reduction", "reduction_dim", "to_apply_type": "comparator", "top_k", ...}.
    cfg = backend_config(op)
    if cfg.get("to_apply_type", "comparator") != "comparator":
        raise Unsupported(f"PartialReduce with to_apply_type={cfg.get('to_apply_type')!r}")
    called = op.attrs.get("called_computations", ())
    if len(called) != 1:
        raise Unsupported("PartialReduce without a single comparator")
    types = op.result_types
    as_tuple = len(types) == 1 and isinstance(types[0], T.TupleType)
    rtype = types[0].elements[0] if as_tuple else types[0]
    dim = int(cfg.get("reduction_dim", -1)) % len(rtype.shape)
    return PartialReduce(TopK(called[0], len(op.operands) // 2, dim, rtype.shape[dim]), as_tuple)


@register_custom_call("PartialReduce", prepare=_prepare_partial_reduce)
def partial_reduce(ctx, op, *operands):
    # The best `size` candidates by the comparator, best first: what the
    # aggregation that follows (sort + slice to top_k) expects, at full recall.
    outs = _top_k(ctx, op.params.top_k, operands)
    return tuple(outs) if op.params.as_tuple or len(outs) > 1 else outs[0]


# ------------------------------------------------ XLA:GPU's cuBLAS gemm (after-optimizations HLO)

class Gemm(NamedTuple):
    dims: tuple        # lax.dot_general's ((lhs contracting, rhs contracting), (lhs batch, rhs batch))
    alpha: complex
    beta: float
    precision: tuple


def _prepare_gemm(op):
    """XLA:GPU rewrites a dot into `__cublas$gemm` (operands a, b and, where beta is not 0, the
    addend c; results the product and a workspace): out = alpha * dot(a, b) + beta * c, the
    dimensions and alpha/beta in `gemm_backend_config`. Layouts are XLA's business: the
    dimension numbers are logical."""
    cfg = backend_config(op).get("gemm_backend_config")
    if not isinstance(cfg, dict) or "dot_dimension_numbers" not in cfg:
        raise Unsupported("__cublas$gemm without a gemm_backend_config and its dot dimensions")
    if cfg.get("epilogue", "DEFAULT") != "DEFAULT":
        raise Unsupported(f"__cublas$gemm epilogue {cfg['epilogue']} (only DEFAULT runs here)")
    dn = cfg["dot_dimension_numbers"]

    def dims(key):
        return tuple(int(d) for d in dn.get(key, ()))
    precision = tuple(lax.Precision[p] if p in lax.Precision.__members__ else None
                      for p in cfg.get("precision_config", {}).get("operand_precision", ()))
    return Gemm(((dims("lhs_contracting_dimensions"), dims("rhs_contracting_dimensions")),
                 (dims("lhs_batch_dimensions"), dims("rhs_batch_dimensions"))),
                complex(float(cfg.get("alpha_real", 1)), float(cfg.get("alpha_imag", 0))),
                float(cfg.get("beta", 0)), precision if len(precision) == 2 and None not in precision else None)


@register_custom_call("__cublas$gemm", prepare=_prepare_gemm)
def cublas_gemm(ctx, op, a, b, *addend):
    g = op.params
    result = op.result_types[0]
    product_type = result.elements[0] if isinstance(result, T.TupleType) else result
    out = lax.dot_general(a, b, g.dims, precision=g.precision,
                          preferred_element_type=product_type.dtype).astype(product_type.dtype)
    if g.alpha != 1:
        alpha = g.alpha if jnp.iscomplexobj(out) else g.alpha.real
        out = out * jnp.asarray(alpha, out.dtype)
    if g.beta != 0 and addend:
        out = out + jnp.asarray(g.beta, out.dtype) * addend[0]
    if isinstance(result, T.TupleType):  # (product, workspace)
        return (out,) + tuple(jnp.zeros(t.shape, t.dtype) for t in result.elements[1:])
    return single_or_tuple(op, (out,) + tuple(jnp.zeros(t.shape, t.dtype)
                                              for t in op.result_types[1:]))


# XLA's TopkRewriter turns a sort with a greater-than comparator whose first k results are
# used into a `TopK` custom call (operand: [batch,] n; results: the k largest and their
# indices, in the sort's order).
@register_custom_call("TopK")
def xla_topk(ctx, op, x):
    result = op.result_types[0]
    values_type, indices_type = (result.elements if isinstance(result, T.TupleType)
                                 else op.result_types)
    values, indices = lax.top_k(x, values_type.shape[-1])
    outs = (values, indices.astype(indices_type.dtype))
    return outs if isinstance(result, T.TupleType) else single_or_tuple(op, outs)


# ------------------------------------------------ targets that cannot run here

_PLATFORM_BOUND = {
    "tpu_custom_call": "a TPU (Mosaic/Pallas kernel)",
    "triton_kernel_call": "a GPU (Triton kernel from Pallas)",
    "triton_kernel_call_ffi": "a GPU (Triton kernel from Pallas)",
    "__gpu$xla.gpu.triton": "a CUDA GPU (Triton kernel)",
    "mosaic_gpu": "a CUDA GPU (Mosaic GPU kernel)",
    "mosaic_gpu_v2": "a CUDA GPU (Mosaic GPU kernel)",
    "__cudnn$fusion": "a CUDA GPU with cuDNN (cuDNN fusion kernel)",
}

# Calls back into the exporting Python process (a function pointer or a
# registry index in that process): nothing to call after the program is saved.
_HOST_CALLBACKS = {
    "xla_python_cpu_callback": "the exporting process, on CPU",
    "xla_ffi_python_cpu_callback": "the exporting process, on CPU",
    "xla_python_gpu_callback": "the exporting process, on GPU",
    "xla_ffi_python_gpu_callback": "the exporting process, on GPU",
    "xla_ffi_partitioned_python_cpu_callback": "the exporting process, on CPU",
    "xla_ffi_partitioned_python_gpu_callback": "the exporting process, on GPU",
    "tf.call_tf_function": "TensorFlow (a TF graph embedded by jax2tf.call_tf)",
}


def _prepare_host_callback(op):
    target = op.attrs["call_target_name"]
    raise Unsupported(f"custom_call @{target} calls back into {_HOST_CALLBACKS[target]}; the "
                      "callee is not part of the program (register a handler for this target "
                      "to supply it)")


def _prepare_platform_bound(op):
    target = op.attrs["call_target_name"]
    raise Unsupported(f"custom_call @{target} is a compiled kernel that runs only on "
                      f"{_PLATFORM_BOUND[target]}; it has no portable translation")


def _cannot_run(ctx, op, *args):  # never traced: the prepare refuses the op at load time
    raise AssertionError(f"{op.name} was not refused at load time")


for _target in _HOST_CALLBACKS:
    register_custom_call(_target, prepare=_prepare_host_callback)(_cannot_run)
for _target in _PLATFORM_BOUND:
    register_custom_call(_target, prepare=_prepare_platform_bound)(_cannot_run)


# ------------------------------------------------ allocation and liveness

# `lax.empty`: a buffer whose contents are unspecified; zeros are one valid choice.
@register_custom_call("AllocateBuffer")
def allocate_buffer(ctx, op):
    rtype = op.result_types[0]
    return jnp.zeros(rtype.shape, rtype.dtype)


# jax's `prevent_mlir_dce` sink: keeps its operands alive, no results.
@register_custom_call("dce_sink")
def dce_sink(ctx, op, *args):
    return ()


# ------------------------------------------------ jax.export's dynamic-shape ops
# `stablehlo.dynamic_*` custom calls carry sizes as operands. Calls with
# concrete shapes are refined first (shlo2jax.executables.polymorphic), which usually rewrites
# them into static ops; when one survives, its size operands must be known
# while tracing (constants after refinement). (`stablehlo.dynamic_rng_bit_generator`
# is in ops/random.py.)

def _known_ints(value, what):
    if isinstance(value, jax.core.Tracer):
        raise ValueError(f"{what} is computed from traced values: it must be known while tracing")
    return tuple(int(v) for v in np.asarray(value).reshape(-1))


@register_custom_call("stablehlo.dynamic_top_k")
def dynamic_top_k(ctx, op, x, k):
    (k,) = _known_ints(k, "k")
    values, indices = lax.top_k(x, k)
    return values, indices.astype(op.result_types[1].dtype)


class DynamicTopK(NamedTuple):
    comparator: str
    n: int
    dim: int  # possibly negative: the rank is read from the operands


def _prepare_dynamic_approx_top_k(op):
    shape_operands = op.attrs.get("indices_of_shape_operands")
    num_shape = 0 if shape_operands is None else len(np.asarray(shape_operands).reshape(-1))
    n = (len(op.operands) - 1 - num_shape) // 2
    cfg = backend_config(op)
    called = op.attrs.get("called_computations", ())
    if len(called) != 1:
        raise Unsupported("dynamic_approx_top_k without a single comparator")
    return DynamicTopK(called[0], n, int(cfg.get("reduction_dim", -1)))


@register_custom_call("stablehlo.dynamic_approx_top_k", prepare=_prepare_dynamic_approx_top_k)
def dynamic_approx_top_k(ctx, op, *operands):
    p = op.params
    (k,) = _known_ints(operands[2 * p.n], "k")
    dim = p.dim % operands[0].ndim
    return _top_k(ctx, TopK(p.comparator, p.n, dim, k), operands[:2 * p.n])


class DynamicReduceWindow(NamedTuple):
    body: str  # the function reducing two windows' values
    n: int     # inputs (as many init values follow)


def _prepare_dynamic_reduce_window(op):
    called = op.attrs.get("called_computations", ())
    if len(called) != 1:
        raise Unsupported("dynamic_reduce_window without a single body")
    return DynamicReduceWindow(called[0], (len(op.operands) - 5) // 2)


@register_custom_call("stablehlo.dynamic_reduce_window", prepare=_prepare_dynamic_reduce_window)
def dynamic_reduce_window(ctx, op, *operands):
    n = op.params.n
    inputs, inits = operands[:n], operands[n:2 * n]
    dims, strides, base, window, padding = (
        _known_ints(v, "window attribute") for v in operands[2 * n:])
    body = ctx.translator.callee(op.params.body)

    def computation(acc, xs):
        outs = body(*acc, *xs)
        return tuple(outs)

    outs = lax.reduce_window(tuple(inputs), tuple(inits), computation, dims, strides,
                             tuple(zip(padding[::2], padding[1::2])), base, window)
    return single_or_tuple(op, outs)
