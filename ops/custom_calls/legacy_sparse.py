"""jax.experimental.sparse's kernels: cuSPARSE/hipSPARSE (descriptor and FFI
forms) and the CPU CSR kernel.

jaxlib/gpu_sparse.py (jax 0.4.1 .. 0.5.0) emitted `cusparse_csr_todense` & co
with a packed descriptor in `backend_config`; from 5e915d3307 (jax 0.5.1) the
same struct travels as the FFI attribute `opaque` of `cusparse_*_ffi`. The
structs are those of jaxlib/gpu/sparse_kernels.h (c4d590b1b6, jaxlib 0.4.1;
unchanged until the kernels were removed): enums and ints of 4 bytes.

The results follow jax's own reference implementations of these primitives
(jax/experimental/sparse/csr.py and coo.py), which the GPU lowerings match:
duplicate entries add up, `fromdense` lists the first `nnz` nonzeros in
row-major order and pads with zeros, and every kernel's scratch buffer is a
byte array of zeros.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
from jax import lax

from shlo2jax.ops.custom_calls._descriptors import (Outputs, Struct, check_dtype, descriptor_bytes,
                                                    enum_member, kernel_prepare, target_of, unpack)
from shlo2jax.registry import TargetInfo, Unsupported, register_custom_call

_H = "jaxlib/gpu/sparse_kernels.h @ c4d590b1b6 (jaxlib 0.4.1) .. 6f0c2a8d64"
# struct SparseMatDescriptor { gpuDataType value_type; gpusparseIndexType_t index_type;
#                              int rows, cols, nnz; int batch_count = 1; int batch_stride = 0; };
_MAT = ("value_type", "index_type", "rows", "cols", "nnz", "batch_count", "batch_stride")
SPARSE_MAT = Struct("SparseMatDescriptor", "<7i", _MAT, _H)
# struct CsrMatvecDescriptor / CooMatvecDescriptor {
#   SparseMatDescriptor A; DenseVecDescriptor x, y; gpusparseOperation_t op; };
# struct DenseVecDescriptor { gpuDataType type; int size; };
MATVEC = Struct("CsrMatvecDescriptor", "<12i",
                _MAT + ("x_type", "x_size", "y_type", "y_size", "op"), _H)
# struct CsrMatmatDescriptor / CooMatmatDescriptor {
#   SparseMatDescriptor A; DenseMatDescriptor B, C; gpusparseOperation_t op_A; };
# struct DenseMatDescriptor { gpuDataType type; int rows, cols; int batch_count; int batch_stride; };
MATMAT = Struct("CsrMatmatDescriptor", "<18i",
                _MAT + ("b_type", "b_rows", "b_cols", "b_batch_count", "b_batch_stride",
                        "c_type", "c_rows", "c_cols", "c_batch_count", "c_batch_stride", "op"), _H)

# cudaDataType_t (library_types.h); hipDataType has the same values.
_DATA_TYPES = {0: np.float32, 1: np.float64, 2: np.float16, 3: np.int8, 4: np.complex64,
               5: np.complex128, 8: np.uint8, 10: np.int32, 12: np.uint32,
               14: jnp.bfloat16}
# cusparseIndexType_t / hipsparseIndexType_t: 16U = 1, 32I = 2, 64I = 3.
_INDEX_TYPES = {1: np.uint16, 2: np.int32, 3: np.int64}
# cusparseOperation_t / hipsparseOperation_t: NON_TRANSPOSE = 0, TRANSPOSE = 1, CONJUGATE = 2.
_OPERATIONS = {0: "N", 1: "T", 2: "C"}


@dataclasses.dataclass(frozen=True)
class SparseCall:
    out: Outputs
    rows: int
    cols: int
    nnz: int
    index_dtype: np.dtype
    compute_dtype: np.dtype
    op: str = "N"


def _raw(op) -> bytes:
    cfg = op.attrs.get("mhlo.backend_config")
    if isinstance(cfg, dict):  # the FFI kernels take the same struct as attribute `opaque`
        if "opaque" not in cfg:
            raise Unsupported(f"custom_call @{target_of(op)} without its `opaque` descriptor")
        return descriptor_bytes(op, "opaque")
    return descriptor_bytes(op)


def _decode(op, layout):
    _, f = unpack(op, layout, raw=_raw(op))
    value = enum_member(op, "value type", f["value_type"], _DATA_TYPES)
    index = enum_member(op, "index type", f["index_type"], _INDEX_TYPES)
    if f["batch_count"] != 1:
        raise Unsupported(f"custom_call @{target_of(op)}: batch_count={f['batch_count']} "
                          "(jax's lowerings only emitted 1)")
    return f, np.dtype(value), np.dtype(index)


def _prepare_todense(op):
    f, value, index = _decode(op, SPARSE_MAT)
    out = Outputs.of(op)
    check_dtype(op, value, out.types[0][1])
    if tuple(out.types[0][0]) != (f["rows"], f["cols"]):
        raise Unsupported(f"custom_call @{target_of(op)}: descriptor shape "
                          f"{f['rows']}x{f['cols']} does not match the result")
    return SparseCall(out, f["rows"], f["cols"], f["nnz"], index, value)


def _prepare_fromdense(op):
    f, value, index = _decode(op, SPARSE_MAT)
    out = Outputs.of(op)
    check_dtype(op, value, out.types[0][1])
    check_dtype(op, index, out.types[1][1])
    if out.types[0][0] != (f["nnz"],):
        raise Unsupported(f"custom_call @{target_of(op)}: descriptor nnz={f['nnz']} does not "
                          "match the results")
    return SparseCall(out, f["rows"], f["cols"], f["nnz"], index, value)


def _prepare_product(op):
    vector = "matvec" in target_of(op)
    f, value, index = _decode(op, MATVEC if vector else MATMAT)
    out = Outputs.of(op)
    operation = enum_member(op, "operation", f["op"], _OPERATIONS)
    compute = np.dtype(enum_member(op, "output type", f["y_type" if vector else "c_type"],
                                  _DATA_TYPES))
    check_dtype(op, compute, out.types[0][1])
    rows, cols = (f["cols"], f["rows"]) if operation != "N" else (f["rows"], f["cols"])
    if out.types[0][0][0] != rows:
        raise Unsupported(f"custom_call @{target_of(op)}: descriptor output size {rows} does "
                          f"not match the result {out.types[0][0]}")
    return SparseCall(out, f["rows"], f["cols"], f["nnz"], index, compute, operation)


def _csr_rows(indptr, nnz):
    entries = lax.iota(np.int32, nnz)
    return jnp.searchsorted(indptr.astype(np.int32), entries, side="right").astype(np.int32) - 1


def _dense(params: SparseCall, data, row, col):
    dense = jnp.zeros((params.rows, params.cols), params.compute_dtype)
    return dense.at[row, col].add(data.astype(params.compute_dtype), mode="drop")


def _product(params: SparseCall, data, row, col, x):
    """op(A) @ x for x a vector or a matrix; entries outside the matrix are dropped."""
    a = data.astype(params.compute_dtype)
    if params.op == "C":
        a = jnp.conj(a)
    out_rows, x_rows = (col, row) if params.op != "N" else (row, col)
    out_size = params.out.types[0][0][0]
    inside = (row >= 0) & (row < params.rows) & (col >= 0) & (col < params.cols)
    a = jnp.where(inside, a, 0)
    gathered = jnp.take(x.astype(params.compute_dtype), x_rows, axis=0, mode="fill",
                        fill_value=0)
    terms = a.reshape(a.shape + (1,) * (x.ndim - 1)) * gathered
    result = jnp.zeros((out_size,) + x.shape[1:], params.compute_dtype)
    return result.at[out_rows].add(terms, mode="drop")


def _nonzeros(params: SparseCall, mat):
    row, col = jnp.nonzero(mat, size=params.nnz)
    data = mat[row, col]
    real = jnp.arange(params.nnz) < jnp.sum(mat != 0)
    return jnp.where(real, data, 0), row, col, real


_SPARSE_DTYPES = "f32, f64, c64, c128 (indices i32)"
_FORMS = ("descriptor", "FFI")
_JAX = "0.4.1 .. 0.5.0 (descriptor); 0.5.1 .. (`*_ffi`, the descriptor as `opaque`)"


def _info(name, test):
    return TargetInfo(f"cuSPARSE/hipSPARSE {name}", forms=_FORMS, jax=_JAX,
                      dtypes=_SPARSE_DTYPES,
                      test=(f"tests/ops/custom_calls/test_legacy_sparse.py::{test}",))


@register_custom_call("cusparse_csr_todense", "hipsparse_csr_todense", "cusparse_csr_todense_ffi",
                      "hipsparse_csr_todense_ffi",
                      prepare=kernel_prepare(_prepare_todense, operands=3),
                      info=_info("csr_todense", "test_sparse_csr"))
def csr_todense(ctx, op, data, indices, indptr, *result_shapes):
    rows = _csr_rows(indptr, data.shape[0])
    return op.params.out.pack([_dense(op.params, data, rows, indices)])


@register_custom_call("cusparse_coo_todense", "hipsparse_coo_todense", "cusparse_coo_todense_ffi",
                      "hipsparse_coo_todense_ffi",
                      prepare=kernel_prepare(_prepare_todense, operands=3),
                      info=_info("coo_todense", "test_sparse_coo"))
def coo_todense(ctx, op, data, row, col, *result_shapes):
    return op.params.out.pack([_dense(op.params, data, row, col)])


@register_custom_call("cusparse_csr_fromdense", "hipsparse_csr_fromdense",
                      "cusparse_csr_fromdense_ffi", "hipsparse_csr_fromdense_ffi",
                      prepare=kernel_prepare(_prepare_fromdense, operands=1),
                      info=_info("csr_fromdense", "test_sparse_csr"))
def csr_fromdense(ctx, op, mat, *result_shapes):
    p = op.params
    data, row, col, real = _nonzeros(p, mat)
    row = jnp.where(real, row, p.rows)
    counts = jnp.bincount(row, length=p.rows).astype(p.index_dtype)
    indptr = jnp.zeros(p.rows + 1, p.index_dtype).at[1:].set(jnp.cumsum(counts))
    return p.out.pack([data, col.astype(p.index_dtype), indptr])


@register_custom_call("cusparse_coo_fromdense", "hipsparse_coo_fromdense",
                      "cusparse_coo_fromdense_ffi", "hipsparse_coo_fromdense_ffi",
                      prepare=kernel_prepare(_prepare_fromdense, operands=1),
                      info=_info("coo_fromdense", "test_sparse_coo"))
def coo_fromdense(ctx, op, mat, *result_shapes):
    p = op.params
    data, row, col, _ = _nonzeros(p, mat)
    return p.out.pack([data, row.astype(p.index_dtype), col.astype(p.index_dtype)])


@register_custom_call("cusparse_csr_matvec", "hipsparse_csr_matvec", "cusparse_csr_matvec_ffi",
                      "hipsparse_csr_matvec_ffi",
                      prepare=kernel_prepare(_prepare_product, operands=4),
                      info=_info("csr_matvec (SpMV)", "test_sparse_products"))
@register_custom_call("cusparse_csr_matmat", "hipsparse_csr_matmat", "cusparse_csr_matmat_ffi",
                      "hipsparse_csr_matmat_ffi",
                      prepare=kernel_prepare(_prepare_product, operands=4),
                      info=_info("csr_matmat (SpMM)", "test_sparse_products"))
def csr_product(ctx, op, data, indices, indptr, x, *result_shapes):
    rows = _csr_rows(indptr, data.shape[0])
    return op.params.out.pack([_product(op.params, data, rows, indices, x)])


@register_custom_call("cusparse_coo_matvec", "hipsparse_coo_matvec", "cusparse_coo_matvec_ffi",
                      "hipsparse_coo_matvec_ffi",
                      prepare=kernel_prepare(_prepare_product, operands=4),
                      info=_info("coo_matvec (SpMV)", "test_sparse_products"))
@register_custom_call("cusparse_coo_matmat", "hipsparse_coo_matmat", "cusparse_coo_matmat_ffi",
                      "hipsparse_coo_matmat_ffi",
                      prepare=kernel_prepare(_prepare_product, operands=4),
                      info=_info("coo_matmat (SpMM)", "test_sparse_products"))
def coo_product(ctx, op, data, row, col, x, *result_shapes):
    return op.params.out.pack([_product(op.params, data, row, col, x)])


# ---------------------------------------------------------------- CPU CSR kernel
# jaxlib/cpu/sparse_kernels.cc (70567d4667, jax 0.7.0): Eigen's row-major sparse
# matrix times a dense one; bcsr_dot_general passes (data, indptr, indices, rhs).

@dataclasses.dataclass(frozen=True)
class CpuCsrCall:
    out: Outputs


def _prepare_cpu_csr(op):
    return CpuCsrCall(Outputs.of(op))


@register_custom_call("cpu_csr_sparse_dense_ffi",
                      prepare=kernel_prepare(_prepare_cpu_csr, operands=4),
                      info=TargetInfo("CPU CSR sparse x dense (bcsr_dot_general)", forms=("FFI",),
                                      jax="0.7.0 ..",
                                      dtypes="i32, i64, f32, f64, c64, c128 (indices i32, i64)",
                                      test=("tests/ops/custom_calls/test_legacy_sparse.py::"
                                            "test_cpu_csr_sparse_dense",)))
def cpu_csr_sparse_dense(ctx, op, data, indptr, indices, rhs, *result_shapes):
    out = op.params.out
    shape, dtype = out.types[0]
    call = SparseCall(out, shape[0], rhs.shape[0], data.shape[0], np.dtype(indptr.dtype),
                      np.dtype(dtype))
    return out.pack([_product(call, data, _csr_rows(indptr, data.shape[0]), indices, rhs)])
