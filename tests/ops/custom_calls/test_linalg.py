"""ops/custom_calls/linalg.py: the LAPACK/cuSOLVER/cuBLAS kernels' output formats, checked
against numpy, in their typed-FFI and first forms."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import shlo2jax
from shlo2jax import compat
import shlo2jax.ops  # noqa: F401
from shlo2jax.errors import UnsupportedError

from ._programs import (ALL, DTYPES, LAPACK_PREFIX, REAL, _adj, _assert_zeros, _call, _check_lu,
    _export, _householder, _i32, _on_cpu, _program, _random, _run, _tensor, _tol, mlir_bytes)

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("prefix,dtype,elem", [("s", np.float32, "f32"), ("d", np.float64, "f64"),
                                               ("c", np.complex64, "complex<f32>"),
                                               ("z", np.complex128, "complex<f64>")])
def test_getrf_lapack_format(prefix, dtype, elem):
    a = RNG.standard_normal((2, 3, 3)).astype(dtype)
    t = f"tensor<2x3x3x{elem}>"
    prog = _call(f"lapack_{prefix}getrf_ffi", [t], [t, "tensor<2x3xi32>", "tensor<2xi32>"])
    lu, pivots, info = (np.asarray(x) for x in prog(a))
    assert pivots.dtype == np.int32 and info.dtype == np.int32
    assert pivots.min() >= 1 and pivots.max() <= 3  # 1-based, LAPACK style
    np.testing.assert_array_equal(info, 0)
    for b in range(2):
        perm = np.arange(3)
        for i, p in enumerate(pivots[b] - 1):
            perm[[i, p]] = perm[[p, i]]
        lower = np.tril(lu[b], -1) + np.eye(3)
        upper = np.triu(lu[b])
        np.testing.assert_allclose(lower @ upper, a[b][perm], rtol=1e-4, atol=1e-4)


def test_getrf_singular_info():
    a = np.zeros((2, 2), np.float64)
    prog = _call("lapack_dgetrf_ffi", ["tensor<2x2xf64>"],
                 ["tensor<2x2xf64>", "tensor<2xi32>", "tensor<i32>"])
    assert int(prog(a)[2]) == 1  # first zero pivot, 1-based


@pytest.mark.parametrize("backend,lower", [("{uplo = 76 : ui8}", True),
                                           ("{uplo = 85 : ui8}", False)])
def test_potrf_reads_one_triangle(backend, lower):
    m = RNG.standard_normal((4, 4))
    spd = m @ m.T + 4 * np.eye(4)
    # Garbage in the triangle LAPACK does not read.
    a = np.tril(spd) + np.triu(np.full((4, 4), 7.0), 1) if lower else \
        np.triu(spd) + np.tril(np.full((4, 4), 7.0), -1)
    prog = _call("lapack_dpotrf_ffi", ["tensor<4x4xf64>"], ["tensor<4x4xf64>", "tensor<i32>"],
                 backend)
    factor, info = (np.asarray(x) for x in prog(a))
    expected = np.linalg.cholesky(spd)
    np.testing.assert_allclose(factor, expected if lower else expected.T, rtol=1e-10, atol=1e-12)
    assert int(info) == 0


def test_syevd_eigenpairs():
    m = RNG.standard_normal((5, 5))
    a = m + m.T
    prog = _call("lapack_dsyevd_ffi", ["tensor<5x5xf64>"],
                 ["tensor<5x5xf64>", "tensor<5xf64>", "tensor<i32>"],
                 "{mode = 86 : ui8, uplo = 76 : ui8}")
    v, w, info = (np.asarray(x) for x in prog(np.tril(a)))
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), rtol=1e-10)
    np.testing.assert_allclose(a @ v, v * w, atol=1e-10)


def test_gesdd_output_order():
    a = RNG.standard_normal((3, 3)).astype(np.float32)
    t = "tensor<3x3xf32>"
    prog = _call("lapack_sgesdd_ffi", [t], [t, "tensor<3xf32>", t, t, "tensor<i32>"],
                 "{mode = 65 : ui8}")
    _, s, u, vt, info = (np.asarray(x) for x in prog(a))
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=1e-5)
    np.testing.assert_allclose((u * s) @ vt, a, atol=1e-5)


def test_geev_real_splits_eigenvalues():
    a = np.array([[0.0, -1.0], [1.0, 0.0]])  # eigenvalues +-i
    prog = _call("lapack_dgeev_ffi", ["tensor<2x2xf64>"],
                 ["tensor<2xf64>", "tensor<2xf64>", "tensor<2x2xcomplex<f64>>",
                  "tensor<2x2xcomplex<f64>>", "tensor<i32>"],
                 "{compute_left = 86 : ui8, compute_right = 86 : ui8}")
    wr, wi, vl, vr, info = (np.asarray(x) for x in prog(a))
    np.testing.assert_allclose(wr, [0, 0], atol=1e-12)
    np.testing.assert_allclose(sorted(wi), [-1, 1], atol=1e-12)
    np.testing.assert_allclose(a @ vr, vr * (wr + 1j * wi), atol=1e-12)


def test_gees_real_eigenvalue_pairs():
    a = np.array([[1.0, 2.0, 0.0], [-2.0, 1.0, 0.0], [0.0, 0.0, 3.0]])  # 1+-2i, 3
    t = "tensor<3x3xf64>"
    prog = _call("lapack_dgees_ffi", [t], [t, t, "tensor<3xf64>", "tensor<3xf64>", "tensor<i32>",
                                           "tensor<i32>"], "{mode = 86 : ui8, sort = 78 : ui8}")
    schur, vs, wr, wi, sdim, info = (np.asarray(x) for x in prog(a))
    np.testing.assert_allclose(vs @ schur @ vs.T, a, atol=1e-12)
    got = sorted(zip(np.round(wr, 9), np.round(wi, 9)))
    assert got == [(1.0, -2.0), (1.0, 2.0), (3.0, 0.0)]
    assert int(sdim) == 0 and int(info) == 0


@pytest.mark.parametrize("trans,lower", [(78, True), (84, True), (78, False)])
def test_trsm(trans, lower):
    a = np.tril(RNG.standard_normal((3, 3))) + 3 * np.eye(3)
    a = a if lower else a.T
    b = RNG.standard_normal((3, 2))
    uplo = 76 if lower else 85
    prog = _call("lapack_dtrsm_ffi", ["tensor<3x3xf64>", "tensor<3x2xf64>"], ["tensor<3x2xf64>"],
                 f"{{diag = 78 : ui8, side = 76 : ui8, trans_x = {trans} : ui8, uplo = {uplo} : ui8}}")
    x = np.asarray(prog(a, b))
    op_a = a.T if trans == 84 else a
    np.testing.assert_allclose(op_a @ x, b, atol=1e-12)


def test_gtsv():
    dl = np.array([0.0, 1.0, 1.0])
    d = np.array([4.0, 4.0, 4.0])
    du = np.array([1.0, 1.0, 0.0])
    b = np.array([[1.0], [2.0], [3.0]])
    v, m = "tensor<3xf64>", "tensor<3x1xf64>"
    prog = _call("lapack_dgtsv_ffi", [v, v, v, m], [v, v, v, m, "tensor<i32>"])
    x = np.asarray(prog(dl, d, du, b)[3])
    dense = np.diag(d) + np.diag(dl[1:], -1) + np.diag(du[:-1], 1)
    np.testing.assert_allclose(dense @ x, b, atol=1e-12)


def test_pivots_to_permutation_skips_out_of_range():
    prog = _call("cu_lu_pivots_to_permutation", ["tensor<3xi32>"], ["tensor<4xi32>"])
    got = np.asarray(prog(np.array([2, 9, 3], np.int32)))
    # swap(0,2) -> [2,1,0,3]; 9 out of range: skipped; swap(2,3) -> [2,1,3,0]
    np.testing.assert_array_equal(got, [2, 1, 3, 0])


# Pre-FFI kernels (api_version 2): flags and sizes as leading scalar operands.


def test_legacy_getrf_tuple_result():
    text = """
func.func @main(%a: tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3xi32>, tensor<i32>) {
  %b = stablehlo.constant dense<1> : tensor<i32>
  %n = stablehlo.constant dense<3> : tensor<i32>
  %0 = stablehlo.custom_call @lapack_sgetrf(%b, %n, %n, %a) {api_version = 2 : i32}
      : (tensor<i32>, tensor<i32>, tensor<i32>, tensor<3x3xf32>) -> tuple<tensor<3x3xf32>, tensor<3xi32>, tensor<i32>>
  %1 = stablehlo.get_tuple_element %0[0] : (tuple<tensor<3x3xf32>, tensor<3xi32>, tensor<i32>>) -> tensor<3x3xf32>
  %2 = stablehlo.get_tuple_element %0[1] : (tuple<tensor<3x3xf32>, tensor<3xi32>, tensor<i32>>) -> tensor<3xi32>
  %3 = stablehlo.get_tuple_element %0[2] : (tuple<tensor<3x3xf32>, tensor<3xi32>, tensor<i32>>) -> tensor<i32>
  func.return %1, %2, %3 : tensor<3x3xf32>, tensor<3xi32>, tensor<i32>
}"""
    a = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 10]], np.float32)
    lu, pivots, info = (np.asarray(x) for x in shlo2jax.load(text)(a))
    np.testing.assert_array_equal(pivots, [3, 3, 3])  # 1-based: row 7 8 10 first, ...
    perm = np.arange(3)
    for i, p in enumerate(pivots - 1):
        perm[[i, p]] = perm[[p, i]]
    np.testing.assert_allclose((np.tril(lu, -1) + np.eye(3)) @ np.triu(lu), a[perm], atol=1e-5)
    assert int(info) == 0


def test_legacy_potrf_and_syevd_with_workspaces():
    text = """
func.func @main(%a: tensor<2x2xf64>) -> (tensor<2x2xf64>, tensor<i32>, tensor<2x2xf64>, tensor<2xf64>) {
  %one = stablehlo.constant dense<1> : tensor<i32>
  %n = stablehlo.constant dense<2> : tensor<i32>
  %0:2 = stablehlo.custom_call @lapack_dpotrf(%one, %one, %n, %a) {api_version = 2 : i32}
      : (tensor<i32>, tensor<i32>, tensor<i32>, tensor<2x2xf64>) -> (tensor<2x2xf64>, tensor<i32>)
  %1:5 = stablehlo.custom_call @lapack_dsyevd(%one, %one, %n, %a) {api_version = 2 : i32}
      : (tensor<i32>, tensor<i32>, tensor<i32>, tensor<2x2xf64>)
        -> (tensor<2x2xf64>, tensor<2xf64>, tensor<i32>, tensor<17xf64>, tensor<13xi32>)
  func.return %0#0, %0#1, %1#0, %1#1 : tensor<2x2xf64>, tensor<i32>, tensor<2x2xf64>, tensor<2xf64>
}"""
    a = np.array([[4.0, 2.0], [2.0, 3.0]])
    chol, info, v, w = (np.asarray(x) for x in shlo2jax.load(text)(a))
    np.testing.assert_allclose(chol, np.linalg.cholesky(a), rtol=1e-12)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), rtol=1e-12)
    np.testing.assert_allclose(a @ v, v * w, atol=1e-12)


def test_legacy_blas_trsm_with_alpha():
    text = """
func.func @main(%a: tensor<2x2xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %m = stablehlo.constant dense<2> : tensor<i32>
  %n = stablehlo.constant dense<3> : tensor<i32>
  %alpha = stablehlo.constant dense<2.0> : tensor<f32>
  %0 = stablehlo.custom_call @blas_strsm(%one, %one, %zero, %zero, %m, %n, %one, %alpha, %a, %b)
      {api_version = 2 : i32} : (tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>,
      tensor<i32>, tensor<i32>, tensor<f32>, tensor<2x2xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %0 : tensor<2x3xf32>
}"""
    a = np.array([[2.0, 0.0], [1.0, 4.0]], np.float32)
    b = RNG.standard_normal((2, 3)).astype(np.float32)
    x = np.asarray(shlo2jax.load(text)(a, b))
    np.testing.assert_allclose(a @ x, 2 * b, rtol=1e-5, atol=1e-5)


def test_old_name_with_ffi_signature():
    t = "tensor<2x2xf32>"
    prog = _call("lapack_sgetrf", [t], [t, "tensor<2xi32>", "tensor<i32>"])
    lu, pivots, info = (np.asarray(x) for x in prog(np.array([[0.0, 1.0], [2.0, 3.0]], np.float32)))
    np.testing.assert_array_equal(pivots, [2, 2])
    np.testing.assert_allclose(lu, [[2.0, 3.0], [0.0, 1.0]])


def _assert_same(got, expected, dtype):
    tol = 1e-5 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        g = np.asarray(g)
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=tol, atol=tol)


@pytest.mark.parametrize("platform,target,shape,dtype", [
    ("cpu", "lapack_sgeqp3_ffi", (4, 3), np.float32),
    ("cpu", "lapack_zgeqp3_ffi", (3, 5), np.complex128),
    ("cuda", "cuhybrid_geqp3", (4, 4), np.float64),
    ("rocm", "hiphybrid_geqp3", (3, 4), np.complex64),
])
def test_pivoted_qr_geqp3(platform, target, shape, dtype):
    from jax.lax import linalg as L
    fn = lambda a: L.qr(a, pivoting=True)  # noqa: E731
    a = _random(shape, dtype)
    got = _export(fn, platform, target, a)(a)
    q, r, p = expected = _on_cpu(fn, a)
    np.testing.assert_allclose(q @ r, a[:, p], atol=1e-4)
    _assert_same(got, expected, dtype)


@pytest.mark.parametrize("platform,target,left,transpose,dtype", [
    ("cpu", "lapack_sormqr_ffi", True, False, np.float32),
    ("cpu", "lapack_zunmqr_ffi", False, True, np.complex128),
    ("cuda", "cusolver_ormqr_ffi", True, True, np.float64),
    ("rocm", "hipsolver_ormqr_ffi", False, False, np.complex64),
])
def test_ormqr_applies_q(platform, target, left, transpose, dtype):
    from jax.lax import linalg as L
    import jax.numpy as jnp
    if not hasattr(L, "ormqr"):
        pytest.skip("this jax cannot write the program: no jax.lax.linalg.ormqr (jax >= 0.10); "
                    "tests/compat/test_compat.py tests the translation's fallback")

    def fn(a, c):
        r, taus = jnp.linalg.qr(a, mode="raw")
        return L.ormqr(jnp.swapaxes(r, -1, -2), taus, c, left=left, transpose=transpose)

    a, c = _random((4, 3), dtype), _random((4, 4), dtype)
    got = _export(fn, platform, target, a, c)(a, c)
    q = np.linalg.qr(a, mode="complete")[0]
    # Householder QR fixes Q up to the signs of its first 3 columns: compare with jax on CPU.
    expected = _on_cpu(fn, a, c)
    _assert_same([got], expected, dtype)
    # Independently: Q from numpy's QR agrees up to the signs (phases) of its first 3 columns,
    # and the 4th column is fixed up to a phase too; Q @ Q^H @ c recovers c.
    qq = np.conj(q.T) if transpose else q
    product = qq @ c if left else c @ qq
    np.testing.assert_allclose(np.linalg.norm(expected[0]), np.linalg.norm(product), rtol=1e-4)


@pytest.mark.parametrize("platform,target,shape,dtype", [
    ("cpu", "lapack_sgesvd_ffi", (3, 5), np.float32),
    ("cpu", "lapack_zgesvd_ffi", (4, 2), np.complex128),
    ("cuda", "cusolver_gesvd_ffi", (2, 4), np.float64),   # wide: handed over transposed
    ("cuda", "cusolver_gesvd_ffi", (4, 2), np.complex64),
    ("rocm", "hipsolver_gesvd_ffi", (3, 5), np.complex128),
    ("cuda", "cusolver_gesvdj_ffi", (3, 5), np.float32),
    ("cuda", "cusolver_gesvdp_ffi", (5, 3), np.complex128),
])
@pytest.mark.parametrize("full", [True, False])
def test_svd_kernels(platform, target, shape, dtype, full):
    from jax.lax import linalg as L
    name = {"gesvdj": "JACOBI", "gesvdp": "POLAR"}.get(target.split("_")[1], "QR")
    if not hasattr(L.SvdAlgorithm, name):
        pytest.skip(f"this jax cannot write the program: no SvdAlgorithm.{name} (jax >= 0.8)")
    algorithm = getattr(L.SvdAlgorithm, name)
    a = _random(shape, dtype)
    u, s, vh = (np.asarray(x) for x in _export(
        lambda a: L.svd(a, full_matrices=full, algorithm=algorithm), platform, target, a)(a))
    m, n = shape
    k = min(m, n)
    assert u.shape == (m, m if full else k) and vh.shape == (n if full else k, n)
    tol = 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=tol, atol=tol)
    np.testing.assert_allclose((u[:, :k] * s) @ vh[:k], a, atol=tol)
    np.testing.assert_allclose(np.conj(u.T) @ u, np.eye(u.shape[1]), atol=tol)
    np.testing.assert_allclose(vh @ np.conj(vh.T), np.eye(vh.shape[0]), atol=tol)


@pytest.mark.parametrize("platform,target,dtype", [
    ("cuda", "cuhybrid_eig_real", np.float32), ("cuda", "cuhybrid_eig_comp", np.complex128),
    ("rocm", "hiphybrid_eig_real", np.float64)])
@pytest.mark.parametrize("left", [True, False])
def test_gpu_hybrid_eig(platform, target, dtype, left):
    from jax.lax import linalg as L
    fn = lambda a: L.eig(a, compute_left_eigenvectors=left)  # noqa: E731
    a = np.array([[1.0, 2.0, 0.5], [-2.0, 1.0, 0.0], [0.3, 0.0, 3.0]]).astype(dtype)
    got = _export(fn, platform, target, a)(a)
    expected = _on_cpu(fn, a)
    w, vr = expected[0], expected[-1]
    np.testing.assert_allclose(a @ vr, vr * w, atol=1e-4)
    _assert_same(got, expected, dtype)


def _unpack_conjugate_pairs(w, vr):
    """LAPACK's real eigenvector storage unpacked: for a pair w[j] = conj(w[j+1]) with
    Im w[j] > 0, columns j and j+1 hold Re v and Im v."""
    out = vr.astype(np.result_type(vr.dtype, np.complex64))
    j = 0
    while j < len(w):
        if w[j].imag > 0:
            out[:, j] = vr[:, j] + 1j * vr[:, j + 1]
            out[:, j + 1] = np.conj(out[:, j])
            j += 2
        else:
            j += 1
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_cusolver_geev_packs_real_eigenvectors(dtype):
    a = np.array([[1.0, 2.0, 0.5], [-2.0, 1.0, 0.0], [0.3, 0.0, 3.0]]).astype(dtype)
    cdt = np.result_type(dtype, np.complex64)
    t, c = f"tensor<3x3x{'f64' if dtype == np.float64 else 'complex<f32>'}>", \
        f"{'complex<f64>' if dtype == np.float64 else 'complex<f32>'}"
    prog = _call("cusolver_geev_ffi", [t], [t, f"tensor<3x{c}>", t, t, "tensor<i32>"],
                 "{left = false, right = true}")
    _, w, vl, vr, info = (np.asarray(x) for x in prog(a))
    assert w.dtype == cdt and vr.dtype == dtype and int(info) == 0
    np.testing.assert_array_equal(vl, 0)
    if dtype == np.float64:  # real storage: the pair's columns hold Re v and Im v
        assert np.sum(w.imag != 0) == 2
        vr = _unpack_conjugate_pairs(w, vr)
    np.testing.assert_allclose(a @ vr, vr * w, atol=1e-5)
    np.testing.assert_allclose(np.sort_complex(np.round(w, 4)),
                               np.sort_complex(np.round(np.linalg.eigvals(a), 4)), atol=2e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cholesky_update_kernel(dtype):
    from jax.lax import linalg as L
    m = RNG.standard_normal((4, 4))
    spd = m @ m.T + 4 * np.eye(4)
    r = np.linalg.cholesky(spd).T.astype(dtype)
    w = RNG.standard_normal(4).astype(dtype)
    got = np.asarray(_export(L.cholesky_update, "cuda", "cu_cholesky_update_ffi", r, w)(r, w))
    tol = 1e-4 if dtype == np.float32 else 1e-12
    # The updated factor: R'^T R' = R^T R + w w^T, R' upper triangular.
    np.testing.assert_allclose(np.tril(got, -1), 0, atol=tol)
    np.testing.assert_allclose(got.T @ got, spd + np.outer(w, w), rtol=tol, atol=tol)


def test_cholesky_update_second_result_is_rotated_vector():
    t, v = "tensor<2x2xf64>", "tensor<2xf64>"
    prog = _call("cu_cholesky_update_ffi", [t, v], [t, v])
    r, w = (np.asarray(x) for x in prog(np.array([[3.0, 1.0], [0.0, 2.0]]), np.array([4.0, 0.0])))
    # First rotation: c = 3/5, s = -4/5; row 0 -> [5, 3/5], w -> [0, -4/5 * 1] ...
    np.testing.assert_allclose(r[0], [5.0, 0.6], atol=1e-12)
    np.testing.assert_allclose(r.T @ r, [[9.0, 3.0], [3.0, 5.0]] + np.outer([4, 0], [4, 0]),
                               atol=1e-12)
    np.testing.assert_allclose(w, 0, atol=1e-12)


@pytest.mark.parametrize("symmetrize", [True, False])
def test_syrk_writes_the_lower_triangle(symmetrize):
    from jax.lax import linalg as L
    a, c = _random((3, 5), np.float32), _random((3, 3), np.float32)
    fn = lambda a, c: L.symmetric_product(a, c, alpha=2.0, beta=0.5,  # noqa: E731
                                          symmetrize_output=symmetrize)
    got = np.asarray(_export(fn, "cuda", "cusolver_syrk_ffi", a, c)(a, c))
    full = 2.0 * a @ a.T + 0.5 * c
    if symmetrize:
        np.testing.assert_allclose(got, np.tril(full) + np.tril(full, -1).T, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_allclose(np.tril(got), np.tril(full), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(np.triu(got, 1), np.triu(c, 1))


@pytest.mark.parametrize("platform,target", [("cpu", "tridiagonal_solve_perturbed_ffi"),
                                             ("cuda", "cu_tridiagonal_solve_perturbed")])
def test_tridiagonal_solve_perturbed(platform, target):
    from jax.lax import linalg as L
    if not compat._PERTURBED_SOLVE:
        pytest.skip("this jax cannot write the program: tridiagonal_solve has no "
                    "perturb_singular= (jax >= 0.10)")
    fn = lambda dl, d, du, b: L.tridiagonal_solve(dl, d, du, b,  # noqa: E731
                                                  perturb_singular=True)
    dl = np.array([0.0, 1.0, 2.0, 1.0])
    d = np.array([2.0, 3.0, 1.0, 4.0])
    du = np.array([1.0, 1.0, 1.0, 0.0])
    b = RNG.standard_normal((4, 2))
    x = np.asarray(_export(fn, platform, target, dl, d, du, b)(dl, d, du, b))
    dense = np.diag(d) + np.diag(dl[1:], -1) + np.diag(du[:-1], 1)
    np.testing.assert_allclose(dense @ x, b, atol=1e-10)
    # A singular system still gets a finite answer.
    d0 = np.array([1.0, 1.0, 1.0, 1.0])
    dl0, du0 = np.array([0.0, 1.0, 1.0, 1.0]), np.array([1.0, 1.0, 1.0, 0.0])
    assert np.all(np.isfinite(np.asarray(_export(fn, platform, target, dl0, d0, du0, b)(
        dl0, d0, du0, b))))


@pytest.mark.parametrize("target", ["cublas_getrf_batched_ffi", "hipblas_getrf_batched_ffi"])
def test_blas_batched_getrf_has_solver_outputs(target):
    a = RNG.standard_normal((3, 2, 2)).astype(np.float32)
    t = "tensor<3x2x2xf32>"
    lu, pivots, info = (np.asarray(x) for x in
                        _call(target, [t], [t, "tensor<3x2xi32>", "tensor<3xi32>"])(a))
    for b in range(3):
        perm = np.arange(2)
        if pivots[b, 0] == 2:
            perm = perm[::-1]
        np.testing.assert_allclose((np.tril(lu[b], -1) + np.eye(2)) @ np.triu(lu[b]), a[b][perm],
                                   atol=1e-5)
    np.testing.assert_array_equal(info, 0)


def test_gees_sorting_reported_as_the_kernel_reports_it():
    t = "tensor<3x3xf64>"
    with pytest.raises(UnsupportedError, match="sort"):
        _call("lapack_dgees_ffi", [t], [t, t, "tensor<3xf64>", "tensor<3xf64>", "tensor<i32>",
                                       "tensor<i32>"], "{mode = 86 : ui8, sort = 83 : ui8}")


def test_sparse_csrlsvqr_solve():
    from jax.experimental.sparse.linalg import spsolve
    dense = np.array([[4.0, 1.0, 0.0], [0.0, 3.0, 2.0], [1.0, 0.0, 5.0]], np.float32)
    data = dense[dense != 0]
    indices = np.nonzero(dense)[1].astype(np.int32)
    indptr = np.concatenate([[0], np.cumsum((dense != 0).sum(1))]).astype(np.int32)
    b = np.array([1.0, 2.0, 3.0], np.float32)
    prog = _export(lambda d, i, p, b: spsolve(d, i, p, b), "cuda", "cusolver_csrlsvqr_ffi",
                   data, indices, indptr, b)
    np.testing.assert_allclose(np.asarray(prog(data, indices, indptr, b)),
                               np.linalg.solve(dense, b), rtol=1e-5)


def _spd(a):
    import jax.numpy as jnp
    return a @ jnp.conj(a.T) + 3 * jnp.eye(a.shape[0], dtype=a.dtype)


def _herm(a):
    import jax.numpy as jnp
    return a + jnp.conj(a.T)


@pytest.mark.slow
@pytest.mark.parametrize("platform,target,name", [
    ("cuda", "cu_lu_pivots_to_permutation", "lu"), ("rocm", "hipsolver_getrf_ffi", "lu"),
    ("tpu", "LuDecomposition", "lu"),
    ("cuda", "cusolver_orgqr_ffi", "qr"), ("tpu", "ProductOfElementaryHouseholderReflectors", "qr"),
    ("cuda", "cusolver_potrf_ffi", "cholesky"), ("rocm", "hipsolver_potrf_ffi", "cholesky"),
    ("cuda", "cusolver_syevd_ffi", "eigh"), ("tpu", "Eigh", "eigh"),
    ("cuda", "cusolver_sytrd_ffi", "tridiagonal"),
])
@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_platform_exports_match_cpu(platform, target, name, dtype):
    from jax.lax import linalg as L
    if platform == "tpu" and dtype == np.complex128:
        pytest.skip("TPUs have no f64")
    fn = {"lu": L.lu, "qr": L.qr, "cholesky": lambda a: L.cholesky(_spd(a)),
          "eigh": lambda a: L.eigh(_herm(a)), "tridiagonal": lambda a: L.tridiagonal(_herm(a))}[name]
    a = _random((4, 4), dtype)
    got = _export(fn, platform, target, a)(a)
    _assert_same(got if isinstance(got, tuple) else (got,), _on_cpu(fn, a), dtype)


# ---------------------------------------------------------------- the other pre-FFI LAPACK forms
# (rules in ops/custom_calls_linalg.py): jaxlib/lapack.py of jax 0.4.1's operand lists.


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ALL)
def test_lapack_operand_forms(dtype):
    b, m, n = 2, 4, 3
    p = LAPACK_PREFIX[dtype]
    element, _ = DTYPES[dtype]
    real = REAL[dtype]
    tol = 10 * _tol(dtype) * m
    a = _random((b, m, n), dtype)
    mat = _tensor((b, m, n), element)
    # getrf(b, m, n, a) -> (lu, pivots, info)
    lu, piv, info = _run(_program(f"lapack_{p}getrf", [_i32(b), _i32(m), _i32(n), ("arg", mat)],
                                  [mat, _tensor((b, n), "i32"), _tensor((b,), "i32")]), a)
    _check_lu(a, lu, piv, tol)
    # geqrf(b, m, n, lwork, a) -> (a, tau, info, work); orgqr(b, m, n, k, lwork, a, tau)
    qr, taus, info, work = _run(_program(
        f"lapack_{p}geqrf", [_i32(b), _i32(m), _i32(n), _i32(10), ("arg", mat)],
        [mat, _tensor((b, n), element), _tensor((b,), "i32"), _tensor((10,), element)]), a)
    _assert_zeros(work)
    name = "orgqr" if p in "sd" else "ungqr"
    q, info, work = _run(_program(
        f"lapack_{p}{name}", [_i32(b), _i32(m), _i32(n), _i32(n), _i32(10), ("arg", mat),
                              ("arg", _tensor((b, n), element))],
        [mat, _tensor((b,), "i32"), _tensor((10,), element)]), qr, taus)
    np.testing.assert_allclose(q @ np.triu(qr[:, :n]), a, atol=tol)
    # potrf(lower, b, n, a) -> (factor, info); syevd(lower, b, n, a) -> (v, w, info, work...)
    sq = _tensor((b, n, n), element)
    spd = (a.swapaxes(-1, -2).conj() @ a + np.eye(n)).astype(dtype)
    for lower in (True, False):
        factor, info = _run(_program(f"lapack_{p}potrf", [_i32(int(lower)), _i32(b), _i32(n),
                                                          ("arg", sq)],
                                     [sq, _tensor((b,), "i32")]), spd)
        np.testing.assert_array_equal(info, 0)
        rebuilt = factor @ _adj(factor) if lower else _adj(factor) @ factor
        np.testing.assert_allclose(rebuilt, spd, atol=tol)
        ev = "syevd" if p in "sd" else "heevd"
        work = [_tensor((20,), element), _tensor((8,), "i32")]
        v, w, info, *ws = _run(_program(f"lapack_{p}{ev}", [_i32(int(lower)), _i32(b), _i32(n),
                                                           ("arg", sq)],
                                        [sq, _tensor((b, n), real), _tensor((b,), "i32")] + work),
                               spd)
        _assert_zeros(*ws)
        np.testing.assert_allclose(spd @ v, v * w[:, None, :].astype(dtype), atol=tol)
    # gesdd(full, compute_uv, b, m, n, lwork, a) -> (a, s, u, vt, info, iwork, work)
    k = min(m, n)
    for full in (True, False):
        u_t = _tensor((b, m, m if full else k), element)
        vt_t = _tensor((b, n if full else k, n), element)
        _, s, u, vt, info, *ws = _run(_program(
            f"lapack_{p}gesdd", [_i32(int(full)), _i32(1), _i32(b), _i32(m), _i32(n), _i32(30),
                                 ("arg", mat)],
            [mat, _tensor((b, k), real), u_t, vt_t, _tensor((b,), "i32"), _tensor((24,), "i32"),
             _tensor((30,), element)]), a)
        _assert_zeros(*ws)
        np.testing.assert_allclose((u[..., :k] * s[:, None, :].astype(dtype)) @ vt[..., :k, :], a,
                                   atol=tol)
    # trsm(left, lower, trans, diag, m, n, batch, alpha, a, b) -> x
    tri = (np.tril(_random((b, n, n), dtype)) + 3 * np.eye(n)).astype(dtype)
    rhs = _random((b, n, 2), dtype)
    (x,) = _run(_program(f"blas_{p}trsm",
                         [_i32(1), _i32(1), _i32(0), _i32(0), _i32(n), _i32(2), _i32(b),
                          ("const", f"tensor<{element}>", "dense<(2.0,0.0)>" if p in "cz"
                           else "dense<2.0>"),
                          ("arg", sq), ("arg", _tensor((b, n, 2), element))],
                         [_tensor((b, n, 2), element)]), tri, rhs)
    np.testing.assert_allclose(tri @ x, 2 * rhs, atol=tol)


@pytest.mark.parametrize("target", ["cublas_geqrf_batched_ffi", "hipblas_geqrf_batched_ffi"])
def test_unemitted_ffi_spellings(target):
    a = _random((2, 3, 3), np.float32)
    t = _tensor((2, 3, 3), "f32")
    qr, taus = _run(_program(target, [("arg", t)], [t, _tensor((2, 3), "f32")],
                             "api_version = 4 : i32, mhlo.backend_config = {}"), a)
    for i in range(2):
        q = _householder(3, 3, qr[i], taus[i], lambda j: j)
        np.testing.assert_allclose(q @ np.triu(qr[i]), a[i], atol=1e-5)


@pytest.mark.parametrize("form", ["descriptor", "attribute", "ffi"])
@pytest.mark.parametrize("platform", ["cu", "hip"])
def test_lu_pivots_to_permutation_forms(form, platform):
    pivots = np.array([[2, 2, 3], [1, 3, 3]], np.int32)  # 0-based swaps, as jax passes them
    if form == "descriptor":
        # jax <= 0.4.26: struct LuPivotsToPermutationDescriptor {std::int64_t batch_size;
        # std::int32_t pivot_size; std::int32_t permutation_size;}
        attrs = f"backend_config = {mlir_bytes(struct.pack('<qii', 2, 3, 4))}"
    elif form == "attribute":  # 0.4.27 .. 0.4.31: typed FFI attribute
        attrs = "api_version = 4 : i32, mhlo.backend_config = {permutation_size = 4 : i32}"
    else:
        attrs = "api_version = 4 : i32, mhlo.backend_config = {}"
    (perm,) = _run(_program(f"{platform}_lu_pivots_to_permutation",
                            [("arg", _tensor((2, 3), "i32"))], [_tensor((2, 4), "i32")], attrs),
                   pivots)
    for row, piv in zip(perm, pivots):
        expected = np.arange(4)
        for i, j in enumerate(piv):
            expected[[i, j]] = expected[[j, i]]
        np.testing.assert_array_equal(row, expected)
