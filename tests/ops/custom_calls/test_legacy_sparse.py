"""ops/custom_calls/legacy_sparse.py: cuSPARSE/hipSPARSE (descriptor and FFI forms) and the
CPU CSR kernel."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from ._programs import (DTYPES, _assert_zeros, _program, _random, _run, _tensor, _tol, mlir_bytes)

RNG = np.random.default_rng(7)


# ---------------------------------------------------------------- cuSPARSE / hipSPARSE
# jaxlib/gpu_sparse.py (jax 0.4.1 .. 0.5.0: backend_config) and
# jax/experimental/sparse/_lowerings.py (0.5.1 ..: `*_ffi`, {opaque = <same struct>}).
# struct SparseMatDescriptor {DataType value_type; IndexType index_type; int rows, cols,
# nnz; int batch_count = 1; int batch_stride = 0;}; cudaDataType: f32=0, f64=1, c64=4,
# c128=5; index i32 = 2; operation N=0, T=1.


CUDA_DATA = {np.float32: 0, np.float64: 1, np.complex64: 4, np.complex128: 5}
SPARSE_DTYPES = [np.float32, np.complex128]


def _sparse_attrs(target, desc):
    if target.endswith("_ffi"):
        return f"api_version = 4 : i32, mhlo.backend_config = {{opaque = {mlir_bytes(desc)}}}"
    return f"backend_config = {mlir_bytes(desc)}, api_version = 2 : i32"


def _sparse_matrix(rows, cols, dtype):
    dense = _random((rows, cols), dtype)
    dense[RNG.random((rows, cols)) < 0.5] = 0
    return dense


def _mat_desc(dtype, rows, cols, nnz):
    return struct.pack("<7i", CUDA_DATA[dtype], 2, rows, cols, nnz, 1, 0)


@pytest.mark.slow
@pytest.mark.parametrize("lib", ["cusparse", "hipsparse"])
@pytest.mark.parametrize("ffi", [False, True])
@pytest.mark.parametrize("dtype", SPARSE_DTYPES)
def test_sparse_csr(lib, ffi, dtype):
    rows, cols = 4, 5
    dense = _sparse_matrix(rows, cols, dtype)
    nnz = int(np.count_nonzero(dense)) + 2  # room to spare: padded with zeros
    element = DTYPES[dtype][0]
    suffix = "_ffi" if ffi else ""
    desc = _mat_desc(dtype, rows, cols, nnz)
    target = f"{lib}_csr_fromdense{suffix}"
    data, indices, indptr, buf = _run(_program(
        target, [("arg", _tensor((rows, cols), element))],
        [_tensor((nnz,), element), _tensor((nnz,), "i32"), _tensor((rows + 1,), "i32"),
         _tensor((16,), "i8")], _sparse_attrs(target, desc)), dense)
    _assert_zeros(buf)
    real = np.count_nonzero(dense)
    r, c = np.nonzero(dense)
    np.testing.assert_array_equal(indices[:real], c)
    np.testing.assert_array_equal(data[:real], dense[r, c])
    _assert_zeros(data[real:], indices[real:])
    np.testing.assert_array_equal(indptr, np.searchsorted(r, np.arange(rows + 1)))
    target = f"{lib}_csr_todense{suffix}"
    back, buf = _run(_program(
        target, [("arg", _tensor((nnz,), element)), ("arg", _tensor((nnz,), "i32")),
                 ("arg", _tensor((rows + 1,), "i32"))],
        [_tensor((rows, cols), element), _tensor((16,), "i8")], _sparse_attrs(target, desc)),
        data, indices, indptr)
    np.testing.assert_array_equal(back, dense)


@pytest.mark.parametrize("lib", ["cusparse", "hipsparse"])
@pytest.mark.parametrize("ffi", [False, True])
@pytest.mark.parametrize("dtype", SPARSE_DTYPES)
def test_sparse_coo(lib, ffi, dtype):
    rows, cols = 3, 4
    dense = _sparse_matrix(rows, cols, dtype)
    nnz = int(np.count_nonzero(dense)) + 1
    element = DTYPES[dtype][0]
    suffix = "_ffi" if ffi else ""
    desc = _mat_desc(dtype, rows, cols, nnz)
    target = f"{lib}_coo_fromdense{suffix}"
    data, row, col, buf = _run(_program(
        target, [("arg", _tensor((rows, cols), element))],
        [_tensor((nnz,), element), _tensor((nnz,), "i32"), _tensor((nnz,), "i32"),
         _tensor((8,), "i8")], _sparse_attrs(target, desc)), dense)
    r, c = np.nonzero(dense)
    np.testing.assert_array_equal(row[:len(r)], r)
    np.testing.assert_array_equal(col[:len(c)], c)
    np.testing.assert_array_equal(data[:len(r)], dense[r, c])
    _assert_zeros(data[len(r):])
    # duplicate entries add up in todense
    data2 = np.concatenate([data, data[:1]])
    row2, col2 = np.concatenate([row, row[:1]]), np.concatenate([col, col[:1]])
    target = f"{lib}_coo_todense{suffix}"
    desc2 = _mat_desc(dtype, rows, cols, nnz + 1)
    back, _ = _run(_program(
        target, [("arg", _tensor((nnz + 1,), element)), ("arg", _tensor((nnz + 1,), "i32")),
                 ("arg", _tensor((nnz + 1,), "i32"))],
        [_tensor((rows, cols), element), _tensor((8,), "i8")], _sparse_attrs(target, desc2)),
        data2, row2, col2)
    expected = dense.copy()
    expected[row[0], col[0]] += data[0]
    np.testing.assert_allclose(back, expected, rtol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("lib,ffi", [("cusparse", False), ("hipsparse", True)])
@pytest.mark.parametrize("fmt", ["csr", "coo"])
@pytest.mark.parametrize("kind", ["matvec", "matmat"])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("dtype", SPARSE_DTYPES)
def test_sparse_products(lib, fmt, kind, transpose, ffi, dtype):
    rows, cols, ccols = 4, 3, 2
    dense = _sparse_matrix(rows, cols, dtype)
    r, c = np.nonzero(dense)
    data = dense[r, c]
    nnz = len(data)
    element = DTYPES[dtype][0]
    code = CUDA_DATA[dtype]
    in_rows, out_rows = (rows, cols) if transpose else (cols, rows)
    mat = struct.pack("<7i", code, 2, rows, cols, nnz, 1, 0)
    if kind == "matvec":
        # CsrMatvecDescriptor {SparseMat A; DenseVec x, y; op}; DenseVec {type; size}
        x = _random((in_rows,), dtype)
        desc = mat + struct.pack("<5i", code, in_rows, code, out_rows, int(transpose))
        x_t, out_t = _tensor((in_rows,), element), _tensor((out_rows,), element)
    else:
        # CsrMatmatDescriptor {SparseMat A; DenseMat B, C; op_A};
        # DenseMat {type; rows, cols; batch_count; batch_stride}
        x = _random((in_rows, ccols), dtype)
        desc = mat + struct.pack("<11i", code, in_rows, ccols, 1, 0, code, out_rows, ccols, 1, 0,
                                 int(transpose))
        x_t, out_t = _tensor((in_rows, ccols), element), _tensor((out_rows, ccols), element)
    if fmt == "csr":
        index_args = [c.astype(np.int32), np.searchsorted(r, np.arange(rows + 1)).astype(np.int32)]
        index_types = [_tensor((nnz,), "i32"), _tensor((rows + 1,), "i32")]
    else:
        index_args = [r.astype(np.int32), c.astype(np.int32)]
        index_types = [_tensor((nnz,), "i32")] * 2
    target = f"{lib}_{fmt}_{kind}" + ("_ffi" if ffi else "")
    prog = _program(target, [("arg", _tensor((nnz,), element))] +
                    [("arg", t) for t in index_types] + [("arg", x_t)],
                    [out_t, _tensor((32,), "i8")], _sparse_attrs(target, desc))
    y, buf = _run(prog, data, *index_args, x)
    _assert_zeros(buf)
    op = dense.T if transpose else dense
    np.testing.assert_allclose(y, op @ x, rtol=10 * _tol(dtype), atol=10 * _tol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.int32])
@pytest.mark.parametrize("vector", [False, True])
def test_cpu_csr_sparse_dense(dtype, vector):
    # jax/experimental/sparse/bcsr.py (0.7.0 ..): (data, indptr, indices, rhs)
    rows, cols = 4, 5
    dense = (_sparse_matrix(rows, cols, np.float64) * 10).astype(dtype)
    r, c = np.nonzero(dense)
    data = dense[r, c]
    indptr = np.searchsorted(r, np.arange(rows + 1)).astype(np.int32)
    rhs = (_random((cols,) if vector else (cols, 3), np.float64) * 10).astype(dtype)
    element = "i32" if dtype == np.int32 else DTYPES[dtype][0]
    out_t = _tensor((rows,) if vector else (rows, 3), element)
    prog = _program("cpu_csr_sparse_dense_ffi",
                    [("arg", _tensor((len(data),), element)), ("arg", _tensor((rows + 1,), "i32")),
                     ("arg", _tensor((len(data),), "i32")), ("arg", _tensor(rhs.shape, element))],
                    [out_t], "api_version = 4 : i32, mhlo.backend_config = {}")
    (y,) = _run(prog, data, indptr, c.astype(np.int32), rhs)
    if dtype == np.int32:
        np.testing.assert_array_equal(y, dense @ rhs)
        return
    # A sum of terms of either sign loses relative accuracy; the bound is the terms' size.
    terms = np.abs(dense).astype(np.float64) @ np.abs(rhs).astype(np.float64)
    exact = dense.astype(np.complex128) @ rhs.astype(np.complex128)
    assert np.all(np.abs(y - exact) <= 8 * np.finfo(dtype).eps * terms), (y, exact)
