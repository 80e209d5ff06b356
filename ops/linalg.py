"""Linear algebra: dot_general, dot, einsum, cholesky, triangular_solve, fft, batch norm."""

from __future__ import annotations

import re
from typing import NamedTuple, Optional

import jax.numpy as jnp
import numpy as np
from jax import lax

from shlo2jax import value_types as T
from shlo2jax.attributes import DotAlgorithm, DotDims
from shlo2jax.gradients import dot_general as _dot_general
from shlo2jax.ops._common import (TriangularSolve, enum_value, ints, precision_config, preferred_type,
                                  replayable, widen_two_bit)
from shlo2jax.registry import Unsupported, register_op


# ---------------------------------------------------------------- dot_general

_MHLO_DOT_FIELD_RE = re.compile(r"(\w+_dimensions)\s*=\s*\[([^\]]*)\]")


def _dot_dims(op) -> DotDims:
    dims = op.attrs["dot_dimension_numbers"]
    if isinstance(dims, DotDims):
        return dims
    fields = {k: tuple(int(v) for v in body.split(",") if v.strip())
              for k, body in _MHLO_DOT_FIELD_RE.findall(dims.text)}
    return DotDims(*(fields.get(name, ()) for name in DotDims._fields))


# (lhs, rhs, accumulation, lhs components, rhs components, primitive ops) -> preset.
_PRESETS = {
    ("f16", "f16", "f16", 1, 1, 1): "F16_F16_F16",
    ("f16", "f16", "f32", 1, 1, 1): "F16_F16_F32",
    ("bf16", "bf16", "bf16", 1, 1, 1): "BF16_BF16_BF16",
    ("bf16", "bf16", "f32", 1, 1, 1): "BF16_BF16_F32",
    ("bf16", "bf16", "f32", 1, 1, 3): "BF16_BF16_F32_X3",
    ("bf16", "bf16", "f32", 1, 1, 6): "BF16_BF16_F32_X6",
    ("bf16", "bf16", "f32", 1, 1, 9): "BF16_BF16_F32_X9",
    ("tf32", "tf32", "f32", 1, 1, 1): "TF32_TF32_F32",
    ("tf32", "tf32", "f32", 1, 1, 3): "TF32_TF32_F32_X3",
    ("f32", "f32", "f32", 1, 1, 1): "F32_F32_F32",
    ("f64", "f64", "f64", 1, 1, 1): "F64_F64_F64",
}


# The algorithms jax lowers for CPU (jax._src.lax.lax._handle_dot_precision).
_CPU_ALGORITHMS = frozenset(lax.DotAlgorithmPreset[n] for n in (
    "DEFAULT", "F16_F16_F16", "F32_F32_F32", "F64_F64_F64", "BF16_BF16_F32",
    "BF16_BF16_F32_X3", "BF16_BF16_F32_X6"))


def _algorithm(alg: DotAlgorithm):
    """DotAlgorithm -> lax.DotAlgorithmPreset (or a lax.DotAlgorithm for other numpy types)."""
    if alg is None:
        return None
    lhs, rhs, acc = alg.lhs_precision_type, alg.rhs_precision_type, alg.accumulation_type
    counts = (alg.lhs_component_count, alg.rhs_component_count, alg.num_primitive_operations)
    if lhs.startswith("f8") and rhs.startswith("f8") and counts == (1, 1, 1):
        fast = "_FAST_ACCUM" if alg.allow_imprecise_accumulation else ""
        return lax.DotAlgorithmPreset[
            ("ANY_F8_ANY_F8_F32" if acc == "f32" else "ANY_F8_ANY_F8_ANY") + fast]
    name = _PRESETS.get((lhs, rhs, acc) + counts)
    if name is not None and not alg.allow_imprecise_accumulation:
        return lax.DotAlgorithmPreset[name]
    try:
        return lax.DotAlgorithm(T.ELEMENT_DTYPES[lhs], T.ELEMENT_DTYPES[rhs],
                                T.ELEMENT_DTYPES[acc], *counts, alg.allow_imprecise_accumulation)
    except KeyError:
        raise Unsupported(f"dot algorithm {alg} is not expressible in lax") from None


class Dot(NamedTuple):
    dims: tuple                # lax.dot_general's ((contracting), (batch)) dimension numbers
    precision: Optional[tuple]
    algorithm: object          # a lax.DotAlgorithmPreset / lax.DotAlgorithm, or None
    result: np.dtype


def _dot_params(op, dims: DotDims) -> Dot:
    return Dot(((dims.lhs_contracting_dimensions, dims.rhs_contracting_dimensions),
                (dims.lhs_batching_dimensions, dims.rhs_batching_dimensions)),
               precision_config(op), _algorithm(op.attrs.get("algorithm")),
               op.result_types[0].dtype)


def _dot(lhs, rhs, p):
    result = p.result
    lhs, rhs = widen_two_bit(lhs), widen_two_bit(rhs)
    preferred = preferred_type(result, lhs, rhs)

    def default(lhs, rhs):
        # (lax.dot_general's value; its reverse mode contracts lhs with the cotangent)
        return _dot_general(lhs, rhs, p.dims, precision=p.precision,
                            preferred_element_type=preferred)

    algorithm = p.algorithm
    # The algorithm describes how floating-point operands are rounded and accumulated;
    # for integer operands (which the reference interpreter accepts) it has no meaning.
    if algorithm is None or not (T.is_float(lhs.dtype) and T.is_float(rhs.dtype)):
        out = default(lhs, rhs)
    else:
        def with_algorithm(lhs, rhs):
            return lax.dot_general(lhs, rhs, p.dims, precision=algorithm,
                                   preferred_element_type=preferred)
        if algorithm in _CPU_ALGORITHMS:
            out = with_algorithm(lhs, rhs)
        else:
            # XLA:CPU ignores the algorithm, while jax refuses to lower the others
            # there: run the default dot on CPU, as XLA itself would.
            out = lax.platform_dependent(lhs, rhs, cpu=default, default=with_algorithm)
    if out.dtype != result:
        out = lax.convert_element_type(out, result)
    return out


@register_op("stablehlo.dot_general", "mhlo.dot_general",
             prepare=lambda op: _dot_params(op, _dot_dims(op)))
@replayable(key=lambda op: op.params)  # (one dot_general equation for most operand types)
def dot_general(ctx, op, lhs, rhs):
    return _dot(lhs, rhs, op.params)


def _prepare_dot(op):
    # Legacy dot contracts the last dimension of lhs (rank 1 or 2, known at trace
    # time) with the first of rhs.
    return _dot_params(op, DotDims((), (), (), ()))


@register_op("stablehlo.dot", "mhlo.dot", prepare=_prepare_dot)
def dot(ctx, op, lhs, rhs):
    p = op.params._replace(dims=(((lhs.ndim - 1,), (0,)), ((), ())))
    return _dot(lhs, rhs, p)


def _prepare_einsum(op):
    config = op.attrs["einsum_config"]
    # unary_einsum is printed with an empty first operand: ",ab->ba".
    return config.lstrip(",") if op.name.endswith("unary_einsum") else config


@register_op("stablehlo.einsum", "mhlo.einsum", "stablehlo.unary_einsum", "mhlo.unary_einsum",
             prepare=_prepare_einsum)
def einsum(ctx, op, *operands):
    return jnp.einsum(op.params, *operands, preferred_element_type=op.result_types[0].dtype)


# ---------------------------------------------------------------- factorizations

@register_op("stablehlo.cholesky", "mhlo.cholesky",
             prepare=lambda op: bool(op.attrs.get("lower", False)))
def cholesky(ctx, op, a):
    dtype = a.dtype
    if T.is_float(dtype) and dtype.itemsize < 4:
        # LAPACK has no half-precision factorization: factor in f32, round once.
        a = lax.convert_element_type(a, np.float32)
    # Only the selected triangle of `a` is read (symmetrize_input=False reads the lower
    # one); for upper, a = U^H U with U = L^H where L factors the conjugate transpose.
    if op.params:
        out = lax.linalg.cholesky(a, symmetrize_input=False)
    else:
        a_h = jnp.conj(jnp.swapaxes(a, -1, -2))
        out = jnp.conj(jnp.swapaxes(lax.linalg.cholesky(a_h, symmetrize_input=False), -1, -2))
    return lax.convert_element_type(out, dtype)


_TRANSPOSE = {"NO_TRANSPOSE": (False, False), "TRANSPOSE": (True, False),
              "ADJOINT": (True, True)}


def _prepare_triangular_solve(op):
    a = op.attrs
    transpose, conjugate = _TRANSPOSE[enum_value(a.get("transpose_a", "NO_TRANSPOSE"))]
    return TriangularSolve(left_side=bool(a["left_side"]), lower=bool(a["lower"]),
                           transpose_a=transpose, conjugate_a=conjugate,
                           unit_diagonal=bool(a["unit_diagonal"]))


@register_op("stablehlo.triangular_solve", "mhlo.triangular_solve",
             prepare=_prepare_triangular_solve)
def triangular_solve(ctx, op, a, b):
    return lax.linalg.triangular_solve(a, b, **op.params._asdict())


# ---------------------------------------------------------------- fft

class Fft(NamedTuple):
    fft_type: lax.FftType
    fft_length: tuple


def _prepare_fft(op):
    return Fft(lax.FftType[enum_value(op.attrs["fft_type"])], ints(op.attrs["fft_length"]))


@register_op("stablehlo.fft", "mhlo.fft", prepare=_prepare_fft)
def fft(ctx, op, x):
    fft_type, lengths = op.params
    return lax.fft(x, fft_type, lengths)


# ---------------------------------------------------------------- batch norm
# Composed exactly as the spec's reference formulas (spec: batch_norm_*).

class BatchNorm(NamedTuple):
    epsilon: float
    feature_index: int


def _prepare_batch_norm(op):
    return BatchNorm(float(op.attrs["epsilon"]), int(op.attrs["feature_index"]))


def _bcast(v, feature_index, like):
    return lax.broadcast_in_dim(v, like.shape, (feature_index,))


def _sum(x, feature_index):
    return lax.reduce_sum(x, tuple(d for d in range(x.ndim) if d != feature_index))


def _per_feature(x, feature_index):
    # size(operand) / dim(operand, feature_index), in the element type.
    return np.array(x.size // x.shape[feature_index] if x.shape[feature_index] else 0,
                    dtype=x.dtype)


def _mean(x, feature_index):
    return lax.div(_sum(x, feature_index), _per_feature(x, feature_index))


def _normalize(x, scale, offset, mean, variance, epsilon, fi):
    centered = lax.sub(x, _bcast(mean, fi, x))
    stddev = lax.sqrt(lax.add(_bcast(variance, fi, x), np.array(epsilon, x.dtype)))
    return lax.add(lax.mul(_bcast(scale, fi, x), lax.div(centered, stddev)),
                   _bcast(offset, fi, x))


@register_op("stablehlo.batch_norm_inference", "mhlo.batch_norm_inference",
             prepare=_prepare_batch_norm)
def batch_norm_inference(ctx, op, x, scale, offset, mean, variance):
    epsilon, fi = op.params
    return _normalize(x, scale, offset, mean, variance, epsilon, fi)


@register_op("stablehlo.batch_norm_training", "mhlo.batch_norm_training",
             prepare=_prepare_batch_norm)
def batch_norm_training(ctx, op, x, scale, offset):
    epsilon, fi = op.params
    mean = _mean(x, fi)
    centered = lax.sub(x, _bcast(mean, fi, x))
    variance = _mean(lax.mul(centered, centered), fi)
    return _normalize(x, scale, offset, mean, variance, epsilon, fi), mean, variance


@register_op("stablehlo.batch_norm_grad", "mhlo.batch_norm_grad", prepare=_prepare_batch_norm)
def batch_norm_grad(ctx, op, x, scale, mean, variance, grad_output):
    epsilon, fi = op.params
    centered = lax.sub(x, _bcast(mean, fi, x))
    var_eps = lax.add(_bcast(variance, fi, x), np.array(epsilon, x.dtype))
    stddev = lax.sqrt(var_eps)
    normalized = lax.div(centered, stddev)
    # The rest follows XLA's batchnorm_expander, as the spec does.
    n = _per_feature(grad_output, fi)
    i1 = lax.mul(grad_output, n)
    i2 = _bcast(_sum(grad_output, fi), fi, x)
    i3 = _bcast(_sum(lax.mul(grad_output, centered), fi), fi, x)
    i5 = lax.div(lax.mul(i3, centered), var_eps)
    i6 = lax.sub(lax.sub(i1, i2), i5)
    grad_operand = lax.mul(lax.div(lax.div(_bcast(scale, fi, x), stddev), n), i6)
    grad_scale = _sum(lax.mul(grad_output, normalized), fi)
    grad_offset = _sum(grad_output, fi)
    return grad_operand, grad_scale, grad_offset
