"""ops/custom_calls/legacy_gpu.py: pre-FFI cuSOLVER/cuBLAS and hipSOLVER/hipBLAS kernels with
packed descriptors, threefry, Cholesky update, gtsv2 (modules synthesized as jaxlib's wrappers
of that era built them; see _programs.py)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import shlo2jax

from ._programs import (ALL, DTYPES, REAL, _adj, _assert_zeros, _check_lu, _check_tridiagonal,
    _herm, _program, _random, _run, _tensor, _tol, mlir_bytes)


# ---------------------------------------------------------------- cuSOLVER / hipSOLVER / cuBLAS
# jaxlib/gpu_solver.py (c4d590b1b6, jax 0.4.1 .. 0.4.34) with the structs of
# jaxlib/gpu/solver_kernels.h and blas_kernels.h; SolverType/BlasType F32=0 .. C128=3.
# Matrices are column-major in memory (layout {0, 1} for 2-D), i.e. the logical tensors.


CUDA_FILL = {True: 0, False: 1}      # CUBLAS_FILL_MODE_LOWER / UPPER
HIP_FILL = {True: 122, False: 121}   # HIPSOLVER_FILL_MODE_LOWER / UPPER


def _col_major(rank):
    nb = rank - 2
    return "[" + ", ".join(str(d) for d in (nb, nb + 1, *range(nb - 1, -1, -1))) + "]"


def _layouts(operands, results):
    fmt = lambda ls: "[" + ", ".join(f"dense<{l}> : tensor<{l.count(',') + 1 if l != '[]' else 0}xindex>" for l in ls) + "]"  # noqa: E731
    return f"operand_layouts = {fmt(operands)}, result_layouts = {fmt(results)}"


@pytest.mark.parametrize("target", ["cusolver_getrf", "hipsolver_getrf", "cublas_getrf_batched",
                                    "hipblas_getrf_batched"])
@pytest.mark.parametrize("dtype", ALL)
def test_gpu_getrf(target, dtype):
    b, m, n = (3, 4, 4) if "batched" in target else (2, 5, 3)
    element, code = DTYPES[dtype]
    a = _random((b, m, n), dtype)
    a[0, :, 0] = 0  # a pivot column of zeros: info counts it
    if "batched" in target:
        # build_getrf_batched_descriptor(dtype, batch, n): struct {BlasType; int batch, n;}
        desc = struct.pack("<3i", code, b, n)
        work = _tensor((b * 8 * 2,), "i8")
    else:
        # build_getrf_descriptor(dtype, b, m, n): struct {SolverType; int batch, m, n, lwork;}
        desc = struct.pack("<5i", code, b, m, n, 33)
        work = _tensor((33,), element)
    mat = _tensor((b, m, n), element)
    prog = _program(target, [("arg", mat)],
                    [mat, _tensor((b, min(m, n)), "i32"), _tensor((b,), "i32"), work],
                    f"backend_config = {mlir_bytes(desc)}, api_version = 2 : i32")
    lu, pivots, info, workspace = _run(prog, a)
    _assert_zeros(workspace)
    assert pivots.dtype == np.int32 and pivots.min() >= 1
    assert info[0] == 1 and np.all(info[1:] == 0)  # 1-based index of the first zero pivot
    _check_lu(a, lu, pivots, 10 * _tol(dtype))


@pytest.mark.parametrize("platform", ["cu", "hip"])
@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("batched_blas", [False, True])
def test_gpu_geqrf_orgqr(platform, dtype, batched_blas):
    b, m, n = 3, 5, 3
    element, code = DTYPES[dtype]
    a = _random((b, m, n), dtype)
    mat = _tensor((b, m, n), element)
    taus_t = _tensor((b, n), element)
    if batched_blas:
        # struct GeqrfBatchedDescriptor {BlasType type; int batch, m, n;}: two i8 workspaces
        geqrf = (f"{platform}blas_geqrf_batched", struct.pack("<4i", code, b, m, n),
                 [mat, taus_t, _tensor((24,), "i8"), _tensor((24,), "i8")])
    else:
        geqrf = (f"{platform}solver_geqrf", struct.pack("<5i", code, b, m, n, 11),
                 [mat, taus_t, _tensor((b,), "i32"), _tensor((11,), element)])
    target, desc, results = geqrf
    cm = _col_major(3)
    outs = _run(_program(target, [("arg", mat)], results,
                         f"backend_config = {mlir_bytes(desc)}, api_version = 2 : i32, "
                         + _layouts([cm], [cm, "[1, 0]", "[0]", "[0]"])), a)
    r_and_v, taus = outs[0], outs[1]
    _assert_zeros(*outs[2:])
    # struct OrgqrDescriptor {SolverType type; int batch, m, n, k, lwork;}
    desc = struct.pack("<6i", code, b, m, n, n, 5)
    q, info, work = _run(_program(f"{platform}solver_orgqr", [("arg", mat), ("arg", taus_t)],
                                  [mat, _tensor((b,), "i32"), _tensor((5,), element)],
                                  f"backend_config = {mlir_bytes(desc)}, api_version = 2 : i32"),
                         r_and_v, taus)
    np.testing.assert_array_equal(info, 0)
    _assert_zeros(work)
    tol = 10 * _tol(dtype) * m
    np.testing.assert_allclose(_adj(q) @ q, np.broadcast_to(np.eye(n), (b, n, n)), atol=tol)
    np.testing.assert_allclose(q @ np.triu(r_and_v[:, :n, :]), a, atol=tol)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["cusolver_syevd", "cusolver_syevj", "hipsolver_syevd",
                                    "hipsolver_syevj"])
@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("lower", [True, False])
def test_gpu_syev(target, dtype, lower):
    b, n = 2, 4
    element, code = DTYPES[dtype]
    a = _herm((b, n, n), dtype)
    garbage = np.triu(np.full((n, n), 5.0), 1) if lower else np.tril(np.full((n, n), 5.0), -1)
    fill = (HIP_FILL if target.startswith("hip") else CUDA_FILL)[lower]
    # struct SyevdDescriptor / SyevjDescriptor {SolverType type; FillMode uplo; int batch, n; int lwork;}
    desc = struct.pack("<5i", code, fill, b, n, 21)
    mat = _tensor((b, n, n), element)
    v, w, info, work = _run(_program(target, [("arg", mat)],
                                     [mat, _tensor((b, n), REAL[dtype]), _tensor((b,), "i32"),
                                      _tensor((21,), element)],
                                     f"backend_config = {mlir_bytes(desc)}"),
                            (a + garbage).astype(dtype))
    np.testing.assert_array_equal(info, 0)
    _assert_zeros(work)
    tol = 10 * _tol(dtype) * n
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), atol=tol)
    assert np.all(np.diff(w, axis=-1) >= 0)
    np.testing.assert_allclose(a @ v, v * w[:, None, :], atol=tol)
    np.testing.assert_allclose(_adj(v) @ v, np.broadcast_to(np.eye(n), (b, n, n)), atol=tol)


def test_gpu_syevd_dynamic_batch_operand():
    # From a2ac510dc3 (jax 0.4.10): batch = -1 in the descriptor, the batch size is a
    # second operand and the result shapes follow as shape operands.
    n = 3
    a = _herm((2, n, n), np.float32)
    desc = struct.pack("<5i", 0, 0, -1, n, 9)
    mat = _tensor((2, n, n), "f32")
    text = f"""
func.func @main(%a: {mat}) -> ({mat}, tensor<2x{n}xf32>, tensor<2xi32>) {{
  %b = stablehlo.constant dense<2> : tensor<i64>
  %s0 = stablehlo.constant dense<[2, {n}, {n}]> : tensor<3xi32>
  %s1 = stablehlo.constant dense<[2, {n}]> : tensor<2xi32>
  %s2 = stablehlo.constant dense<[2]> : tensor<1xi32>
  %s3 = stablehlo.constant dense<[9]> : tensor<1xi32>
  %r:4 = stablehlo.custom_call @cusolver_syevd(%a, %b, %s0, %s1, %s2, %s3) {{
      backend_config = {mlir_bytes(desc)}, indices_of_shape_operands = dense<[2, 3, 4, 5]> : tensor<4xi64>}}
      : ({mat}, tensor<i64>, tensor<3xi32>, tensor<2xi32>, tensor<1xi32>, tensor<1xi32>)
      -> ({mat}, tensor<2x{n}xf32>, tensor<2xi32>, tensor<9xf32>)
  func.return %r#0, %r#1, %r#2 : {mat}, tensor<2x{n}xf32>, tensor<2xi32>
}}"""
    v, w, info = _run(shlo2jax.load(text), a)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), atol=1e-4)
    np.testing.assert_allclose(a @ v, v * w[:, None, :], atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("platform,dtype", [("cu", np.float32), ("cu", np.complex128),
                                            ("hip", np.float64), ("hip", np.complex64)])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
@pytest.mark.parametrize("job", ["A", "S", "N"])
def test_gpu_gesvd(platform, dtype, shape, job):
    b = 2
    m, n = shape
    element, code = DTYPES[dtype]
    a = _random((b, m, n), dtype)
    mat = _tensor((b, m, n), element)
    s_t = _tensor((b, min(m, n)), REAL[dtype])
    full = job == "A"
    if m < n:
        # jaxlib hands a wide matrix over as its transpose: descriptor (n, m), row-major
        # layouts, and the slots hold (V^T (k x n), U (m x m)).
        k = n if full else m
        desc = struct.pack("<5i2b2x", code, b, n, m, 17, ord(job), ord(job))
        slots = [_tensor((b, k, n), element), _tensor((b, m, m), element)]
        layout = "[2, 1, 0]"
    else:
        k = m if full else n
        desc = struct.pack("<5i2b2x", code, b, m, n, 17, ord(job), ord(job))
        slots = [_tensor((b, m, k), element), _tensor((b, n, n), element)]
        layout = "[1, 2, 0]"
    results = [mat, s_t] + slots + [_tensor((b,), "i32"), _tensor((17,), element)]
    prog = _program(f"{platform}solver_gesvd", [("arg", mat)], results,
                    f"backend_config = {mlir_bytes(desc)}, " +
                    _layouts([layout], [layout, "[1, 0]", layout, layout, "[0]", "[0]"]))
    _, s, first, second, info, work = _run(prog, a)
    np.testing.assert_array_equal(info, 0)
    _assert_zeros(work)
    tol = 10 * _tol(dtype) * max(m, n)
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), atol=tol)
    if job == "N":
        _assert_zeros(first, second)
        return
    u, vt = (second, first) if m < n else (first, second)
    kk = min(m, n)
    np.testing.assert_allclose((u[..., :kk] * s[:, None, :].astype(dtype)) @ vt[..., :kk, :], a,
                               atol=tol)
    for q in (u, _adj(vt)):
        np.testing.assert_allclose(_adj(q) @ q, np.broadcast_to(np.eye(q.shape[-1]), q.shape[:-2] + (q.shape[-1],) * 2), atol=tol)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("b,econ", [(1, 1), (1, 0), (3, 0)])
@pytest.mark.parametrize("vectors", [True, False])
def test_gpu_gesvdj(dtype, b, econ, vectors):
    m, n = 5, 3
    element, code = DTYPES[dtype]
    a = _random((b, m, n), dtype)
    k = min(m, n)
    # struct GesvdjDescriptor {SolverType type; int batch, m, n; int lwork; EigMode jobz; int econ;}
    desc = struct.pack("<7i", code, b, m, n, 13, int(vectors), econ)
    mat = _tensor((b, m, n), element)
    results = [mat, _tensor((b, k), REAL[dtype]), _tensor((b, m, k if econ else m), element),
               _tensor((b, n, k if econ else n), element), _tensor((b,), "i32"),
               _tensor((13,), element)]
    _, s, u, v, info, work = _run(_program("cusolver_gesvdj", [("arg", mat)], results,
                                           f"backend_config = {mlir_bytes(desc)}"), a)
    np.testing.assert_array_equal(info, 0)
    _assert_zeros(work)
    tol = 10 * _tol(dtype) * m
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), atol=tol)
    if not vectors:
        _assert_zeros(u, v)
        return
    # gesvdj returns V, not V^H
    np.testing.assert_allclose((u[..., :k] * s[:, None, :].astype(dtype)) @ _adj(v[..., :k]), a,
                               atol=tol)


@pytest.mark.slow
@pytest.mark.parametrize("platform", ["cu", "hip"])
@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("lower", [True, False])
def test_gpu_sytrd(platform, dtype, lower):
    b, n = 2, 5
    element, code = DTYPES[dtype]
    real = REAL[dtype]
    a = _herm((b, n, n), dtype)
    fill = (HIP_FILL if platform == "hip" else CUDA_FILL)[lower]
    # struct SytrdDescriptor {SolverType type; FillMode uplo; int batch, n, lda, lwork;}
    desc = struct.pack("<6i", code, fill, b, n, n, 19)
    mat = _tensor((b, n, n), element)
    out, d, e, taus, info, work = _run(
        _program(f"{platform}solver_sytrd", [("arg", mat)],
                 [mat, _tensor((b, n), real), _tensor((b, n - 1), real),
                  _tensor((b, n - 1), element), _tensor((b,), "i32"), _tensor((19,), element)],
                 f"backend_config = {mlir_bytes(desc)}"), a)
    np.testing.assert_array_equal(info, 0)
    _assert_zeros(work)
    for i in range(b):
        _check_tridiagonal(a[i], out[i], d[i], e[i], taus[i], lower, dtype)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ALL)
def test_gpu_csrlsvqr(dtype):
    n = 4
    element, code = DTYPES[dtype]
    dense = _random((n, n), dtype) + 4 * np.eye(n, dtype=dtype)
    dense[0, 2] = dense[3, 1] = 0
    rows, cols = np.nonzero(dense)
    data = dense[rows, cols]
    indptr = np.searchsorted(rows, np.arange(n + 1)).astype(np.int32)
    b = _random((n,), dtype)
    # struct CsrlsvqrDescriptor {SolverType type; int n, nnz, reorder; double tol;}:
    # the kernel takes (data, indptr, indices, b), indptr first.
    desc = struct.pack("<4id", code, n, len(data), 0, 1e-6)
    nnz = len(data)
    prog = _program("cusolver_csrlsvqr",
                    [("arg", _tensor((nnz,), element)), ("arg", _tensor((n + 1,), "i32")),
                     ("arg", _tensor((nnz,), "i32")), ("arg", _tensor((n,), element))],
                    [_tensor((n,), element)], f"backend_config = {mlir_bytes(desc)}")
    (x,) = _run(prog, data, indptr, cols.astype(np.int32), b)
    np.testing.assert_allclose(dense @ x, b, atol=10 * _tol(dtype))


# ---------------------------------------------------------------- threefry, Cholesky update, gtsv2


def _threefry_expected(k, x):
    import jax
    from jax.extend.random import threefry_2x32
    return np.asarray(threefry_2x32(jax.numpy.asarray(k), jax.numpy.asarray(x)))


@pytest.mark.parametrize("platform", ["cu", "hip"])
def test_threefry_descriptor(platform):
    # jaxlib/gpu_prng.py: struct ThreeFry2x32Descriptor {std::int64_t n;}
    k = np.array([7, 11], np.uint32)
    x = np.arange(12, dtype=np.uint32)
    t = _tensor((2, 3), "ui32")
    prog = _program(f"{platform}_threefry2x32", [("arg", t)] * 4, [t, t],
                    f"backend_config = {mlir_bytes(struct.pack('<q', 6))}, api_version = 2 : i32")
    y0, y1 = _run(prog, np.full((2, 3), k[0]), np.full((2, 3), k[1]), x[:6].reshape(2, 3),
                  x[6:].reshape(2, 3))
    np.testing.assert_array_equal(np.concatenate([y0.ravel(), y1.ravel()]),
                                  _threefry_expected(k, x))


def test_threefry_dynamic_length_operand():
    # From 7d452adfd3: n = -1, the length is a fifth operand (i64[1]) and both result
    # shapes follow as shape operands.
    k = np.array([3, 4], np.uint32)
    x = np.arange(8, dtype=np.uint32)
    t = _tensor((4,), "ui32")
    text = f"""
func.func @main(%k0: {t}, %k1: {t}, %x0: {t}, %x1: {t}) -> ({t}, {t}) {{
  %n = stablehlo.constant dense<[4]> : tensor<1xi64>
  %s = stablehlo.constant dense<[4]> : tensor<1xi32>
  %r:2 = stablehlo.custom_call @cu_threefry2x32(%k0, %k1, %x0, %x1, %n, %s, %s) {{
      backend_config = {mlir_bytes(struct.pack('<q', -1))},
      indices_of_shape_operands = dense<[5, 6]> : tensor<2xi64>}}
      : ({t}, {t}, {t}, {t}, tensor<1xi64>, tensor<1xi32>, tensor<1xi32>) -> ({t}, {t})
  func.return %r#0, %r#1 : {t}, {t}
}}"""
    y0, y1 = _run(shlo2jax.load(text), np.full(4, k[0]), np.full(4, k[1]), x[:4], x[4:])
    np.testing.assert_array_equal(np.concatenate([y0, y1]), _threefry_expected(k, x))


@pytest.mark.parametrize("dtype,code", [(np.float32, 0), (np.float64, 1)])
def test_cholesky_update_descriptor(dtype, code):
    # struct CholeskyUpdateDescriptor {LinalgType linalg_type; std::int64_t matrix_size;}
    n = 4
    m = _random((n, n), dtype)
    a = m @ m.T + n * np.eye(n, dtype=dtype)
    r = np.linalg.cholesky(a).T.astype(dtype)  # upper factor
    w = _random((n,), dtype)
    element = DTYPES[dtype][0]
    prog = _program("cu_cholesky_update", [("arg", _tensor((n, n), element)),
                                           ("arg", _tensor((n,), element))],
                    [_tensor((n, n), element), _tensor((n,), element)],
                    f"backend_config = {mlir_bytes(struct.pack('<i4xq', code, n))}")
    r_new, _ = _run(prog, r, w)
    np.testing.assert_allclose(r_new.T @ r_new, a + np.outer(w, w), rtol=10 * _tol(dtype),
                               atol=10 * _tol(dtype))
    assert np.all(np.tril(r_new, -1) == 0)


def _tridiagonal(m, dtype, batch=()):
    dl = _random(batch + (m,), dtype)
    du = _random(batch + (m,), dtype)
    d = _random(batch + (m,), dtype) + 4
    dl[..., 0] = 0
    du[..., -1] = 0
    return dl, d, du


def _dense_tridiagonal(dl, d, du):
    return np.diag(d) + np.diag(dl[1:], -1) + np.diag(du[:-1], 1)


@pytest.mark.parametrize("platform", ["cusparse", "hipsparse"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("form", ["v1", "v2", "ffi"])
def test_gtsv2(platform, dtype, form):
    suffix = "f32" if dtype == np.float32 else "f64"
    element = DTYPES[dtype][0]
    m = 4
    if form == "v1":
        # jax 0.4.1 .. 0.4.14: struct Gtsv2Descriptor {int m, n, ldb;}, B of one matrix
        # declared row-major ([1, 0]) although the kernel reads ldb x n column-major.
        batch, n = (), 2
        desc = struct.pack("<3i", m, n, m)
        layout = "[1, 0]"
    else:
        # from 7dfc8ff49d: {int batch, m, n, ldb;}, B batched and column-major
        batch, n = (2,), 3
        desc = struct.pack("<4i", 2, m, n, m)
        layout = "[1, 2, 0]"
    dl, d, du = _tridiagonal(m, dtype, batch)
    b = _random(batch + (m, n), dtype)
    vec = _tensor(batch + (m,), element)
    bt = _tensor(batch + (m, n), element)
    vlayout = "[1, 0]" if batch else "[0]"
    attrs = _layouts([vlayout] * 3 + [layout], [layout, "[0]"])
    if form == "ffi":  # jax 0.6.0 .. 0.6.1: `*_ffi` with the struct as attribute `opaque`
        target = f"{platform}_gtsv2_{suffix}_ffi"
        attrs += f", api_version = 4 : i32, mhlo.backend_config = {{opaque = {mlir_bytes(desc)}}}"
    else:
        target = f"{platform}_gtsv2_{suffix}"
        attrs += f", backend_config = {mlir_bytes(desc)}"
    prog = _program(target, [("arg", vec)] * 3 + [("arg", bt)], [bt, _tensor((8,), "i8")], attrs)
    x, buffer = _run(prog, dl, d, du, b)
    _assert_zeros(buffer)
    tol = 10 * _tol(dtype)
    for idx in np.ndindex(batch):
        t = _dense_tridiagonal(dl[idx], d[idx], du[idx])
        if form == "v1":
            # What the kernel computed: the row-major buffer read as a column-major
            # m x n matrix, solved, and written back the same way.
            cols = b[idx].reshape(n, m).T
            np.testing.assert_allclose(t @ x[idx].reshape(n, m).T, cols, atol=tol)
        else:
            np.testing.assert_allclose(t @ x[idx], b[idx], atol=tol)


def test_gtsv2_v1_single_column_is_the_plain_solve():
    dl, d, du = _tridiagonal(5, np.float64)
    b = _random((5, 1), np.float64)
    vec, bt = _tensor((5,), "f64"), _tensor((5, 1), "f64")
    prog = _program("cusparse_gtsv2_f64", [("arg", vec)] * 3 + [("arg", bt)],
                    [bt, _tensor((4,), "i8")],
                    f"backend_config = {mlir_bytes(struct.pack('<3i', 5, 1, 5))}, "
                    + _layouts(["[0]"] * 3 + ["[1, 0]"], ["[1, 0]", "[0]"]))
    x, _ = _run(prog, dl, d, du, b)
    np.testing.assert_allclose(_dense_tridiagonal(dl, d, du) @ x, b, atol=1e-12)
