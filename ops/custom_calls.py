"""Built-in `stablehlo.custom_call` targets found in real exports.

Random bits (threefry), device-placement markers, 64-bit splitting,
approximate top-k (`ApproxTopK`, TPU's `PartialReduce`), `lax.empty`'s
`AllocateBuffer`, jax.export's `stablehlo.dynamic_*` calls, and the targets
that cannot run here, reported at load time with what they need: kernels
compiled for one platform (Pallas/Mosaic/Triton/cuDNN) and calls back into the
exporting process (Python callbacks, `tf.call_tf_function`). The
linear-algebra kernels are in ops/custom_calls_linalg.py, the sharding markers
in ops/sharding.py.

Built-ins never replace a rule that is already registered: a target the user
registered first (before the built-ins were imported) keeps the user's rule.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.random import threefry2x32_p

from shlo2jax import registry
from shlo2jax import types as T
from shlo2jax.ops._common import backend_config, single_or_tuple
from shlo2jax.registry import Unsupported


def builtin(targets, handler, prepare=None):
    """Registers `handler` for each target (a user's own rule for a target is kept)."""
    for target in targets:
        registry.register_custom_call(target, handler, prepare=prepare)


# ------------------------------------------------ identity markers

def _identity(ctx, op, params, *args):
    return args[0] if len(args) == 1 else tuple(args)


def _prepare_same_shape(op):
    if len(op.operands) != len(op.result_types):
        raise Unsupported(f"{op.attrs.get('call_target_name')} with {len(op.operands)} operands "
                          f"and {len(op.result_types)} results")
    return None


# Memory-space and placement annotations: one address space here.
builtin(["annotate_device_placement", "MoveToHost", "MoveToDevice"], _identity,
        _prepare_same_shape)


# ------------------------------------------------ random bits

def _threefry(ctx, op, params, k0, k1, x0, x1):
    return tuple(threefry2x32_p.bind(k0, k1, x0, x1))


builtin(["cu_threefry2x32_ffi", "hip_threefry2x32_ffi", "cu_threefry2x32", "hip_threefry2x32"],
        _threefry)


# ------------------------------------------------ 64-bit splitting (TPU x64 rewriting)

def _prepare_x64_part(op):
    return op.result_types[0].dtype


def _as_u64(x):
    return lax.bitcast_convert_type(x, np.uint64) if x.dtype != np.uint64 else x


def _x64_low(ctx, op, dtype, x):
    low = lax.convert_element_type(_as_u64(x), np.uint32)
    return lax.bitcast_convert_type(low, dtype) if dtype != np.uint32 else low


def _x64_high(ctx, op, dtype, x):
    high = lax.convert_element_type(lax.shift_right_logical(_as_u64(x), np.uint64(32)), np.uint32)
    return lax.bitcast_convert_type(high, dtype) if dtype != np.uint32 else high


def _x64_combine(ctx, op, dtype, low, high):
    def u64(part):
        part = lax.bitcast_convert_type(part, np.uint32) if part.dtype != np.uint32 else part
        return lax.convert_element_type(part, np.uint64)
    bits = lax.bitwise_or(lax.shift_left(u64(high), np.uint64(32)), u64(low))
    return lax.bitcast_convert_type(bits, dtype) if dtype != np.uint64 else bits


builtin(["X64SplitLow"], _x64_low, _prepare_x64_part)
builtin(["X64SplitHigh"], _x64_high, _prepare_x64_part)
builtin(["X64Combine"], _x64_combine, _prepare_x64_part)


# ------------------------------------------------ approximate top-k

def _prepare_approx_top_k(op):
    cfg = backend_config(op)
    called = op.attrs.get("called_computations", ())
    if len(called) != 1:
        raise Unsupported("ApproxTopK without a single comparator")
    n = len(op.operands) // 2
    rtype = op.result_types[0]
    dim = int(cfg.get("reduction_dim", -1)) % len(rtype.shape)
    return called[0], n, dim, rtype.shape[dim]


def _comparator_is_greater(ctx, name) -> bool:
    fdef = ctx.translator.module.functions[name]
    for cop in fdef.body.ops:
        if cop.name in ("stablehlo.compare", "mhlo.compare"):
            direction = str(cop.attrs.get("comparison_direction", "GT"))
            return "GT" in direction or "GE" in direction
    raise ValueError(f"comparator @{name} has no compare op")


def _approx_top_k(ctx, op, params, *operands):
    # The exact top k is a valid answer at any recall target.
    name, n, dim, k = params
    keys, rest = operands[0], operands[1:n]
    if _comparator_is_greater(ctx, name):
        keys = lax.neg(keys) if T.is_float(keys.dtype) else lax.bitwise_not(keys)
    order = lax.iota(np.int32, operands[0].shape[dim])
    order = lax.broadcast_in_dim(order, operands[0].shape, (dim,))
    sorted_ = lax.sort((keys, order), dimension=dim, is_stable=True, num_keys=1)
    index = lax.slice_in_dim(sorted_[1], 0, k, axis=dim)
    outs = [operands[0], *rest]
    return tuple(jnp.take_along_axis(x, index, axis=dim) for x in outs)


builtin(["ApproxTopK"], _approx_top_k, _prepare_approx_top_k)


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
    return (called[0], len(op.operands) // 2, dim, rtype.shape[dim]), as_tuple


def _partial_reduce(ctx, op, params, *operands):
    # The best `size` candidates by the comparator, best first: what the
    # aggregation that follows (sort + slice to top_k) expects, at full recall.
    inner, as_tuple = params
    outs = _approx_top_k(ctx, op, inner, *operands)
    return tuple(outs) if as_tuple or len(outs) > 1 else outs[0]


builtin(["PartialReduce"], _partial_reduce, _prepare_partial_reduce)


# ------------------------------------------------ platform-bound kernels

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


def _platform_bound(target, platform):
    def prepare(op):
        raise Unsupported(f"custom_call @{target} is a compiled kernel that runs only on "
                          f"{platform}; it has no portable translation")
    return prepare


def _host_callback(target, where):
    def prepare(op):
        raise Unsupported(f"custom_call @{target} calls back into {where}; the callee is not "
                          "part of the program (register a handler for this target to supply it)")
    return prepare


for _target, _where in _HOST_CALLBACKS.items():
    builtin([_target], _identity, _host_callback(_target, _where))


# `lax.empty`: a buffer whose contents are unspecified; zeros are one valid choice.
def _allocate_buffer(ctx, op, params):
    rtype = op.result_types[0]
    return jnp.zeros(rtype.shape, rtype.dtype)


builtin(["AllocateBuffer"], _allocate_buffer)


# jax's `prevent_mlir_dce` sink: keeps its operands alive, no results.
builtin(["dce_sink"], lambda ctx, op, params, *args: ())


for _target, _platform in _PLATFORM_BOUND.items():
    builtin([_target], _identity, _platform_bound(_target, _platform))


# ------------------------------------------------ jax.export's dynamic-shape ops
# `stablehlo.dynamic_*` custom calls carry sizes as operands. Calls with
# concrete shapes are refined first (shlo2jax.dynamic), which usually rewrites
# them into static ops; when one survives, its size operands must be known
# while tracing (constants after refinement).

def _known_ints(value, what):
    if isinstance(value, jax.core.Tracer):
        raise ValueError(f"{what} is computed from traced values: it must be known while tracing")
    return tuple(int(v) for v in np.asarray(value).reshape(-1))


def _dynamic_top_k(ctx, op, params, x, k):
    (k,) = _known_ints(k, "k")
    values, indices = lax.top_k(x, k)
    return values, indices.astype(op.result_types[1].dtype)


def _prepare_dynamic_approx_top_k(op):
    shape_operands = op.attrs.get("indices_of_shape_operands")
    num_shape = 0 if shape_operands is None else len(np.asarray(shape_operands).reshape(-1))
    n = (len(op.operands) - 1 - num_shape) // 2
    cfg = backend_config(op)
    called = op.attrs.get("called_computations", ())
    if len(called) != 1:
        raise Unsupported("dynamic_approx_top_k without a single comparator")
    return called[0], n, int(cfg.get("reduction_dim", -1))


def _dynamic_approx_top_k(ctx, op, params, *operands):
    name, n, dim = params
    (k,) = _known_ints(operands[2 * n], "k")
    dim = dim % operands[0].ndim
    return _approx_top_k(ctx, op, (name, n, dim, k), *operands[:2 * n])


def _prepare_dynamic_reduce_window(op):
    called = op.attrs.get("called_computations", ())
    if len(called) != 1:
        raise Unsupported("dynamic_reduce_window without a single body")
    return called[0], (len(op.operands) - 5) // 2


def _dynamic_reduce_window(ctx, op, params, *operands):
    name, n = params
    inputs, inits = operands[:n], operands[n:2 * n]
    dims, strides, base, window, padding = (
        _known_ints(v, "window attribute") for v in operands[2 * n:])
    body = ctx.translator.callee(name)

    def computation(acc, xs):
        outs = body(*acc, *xs)
        return tuple(outs)

    outs = lax.reduce_window(tuple(inputs), tuple(inits), computation, dims, strides,
                             tuple(zip(padding[::2], padding[1::2])), base, window)
    return single_or_tuple(op, outs)


builtin(["stablehlo.dynamic_top_k"], _dynamic_top_k)
builtin(["stablehlo.dynamic_approx_top_k"], _dynamic_approx_top_k, _prepare_dynamic_approx_top_k)
builtin(["stablehlo.dynamic_reduce_window"], _dynamic_reduce_window, _prepare_dynamic_reduce_window)
