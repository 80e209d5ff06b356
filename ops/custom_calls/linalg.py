"""Linear-algebra custom_call targets: LAPACK (CPU FFI), cuSOLVER/hipSOLVER, TPU.

jax lowers `lax.linalg` to these kernels; each handler reproduces the kernel's
output format exactly (LAPACK's 1-based int32 pivots, `info` codes, the
overwritten input operand, real/imaginary eigenvalue pairs...) on top of
`jax.lax.linalg`, which computes the same decompositions on any backend.
Layout attributes (column-major operand_layouts) only describe physical
storage: the logical tensors are the same, so they are ignored.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.lax import linalg as L

from shlo2jax import registry
from shlo2jax.compat import lax_geqp3, lax_ormqr, lax_tridiagonal_solve_perturbed
from shlo2jax.ops import _linalg as K
from shlo2jax.ops._common import TriangularSolve, backend_config
from shlo2jax.ops.custom_calls._descriptors import Outputs, known_int
from shlo2jax.registry import Unsupported, register_custom_call

# LAPACK character flags arrive as their ASCII codes (ui8 attributes).
_L, _U, _N, _V, _A, _S = (ord(c) for c in "LUNVAS")
_T, _C = ord("T"), ord("C")


# ---------------------------------------------------------------- LU (getrf)

def _prepare_getrf(op):
    backend_config(op)
    return None


# Small batched matrices go to cuBLAS/hipBLAS (the same outputs as the solver kernels).
@register_custom_call("lapack_sgetrf_ffi", "lapack_dgetrf_ffi", "lapack_cgetrf_ffi",
                      "lapack_zgetrf_ffi", "cusolver_getrf_ffi", "hipsolver_getrf_ffi",
                      "cublas_getrf_batched_ffi", "hipblas_getrf_batched_ffi",
                      prepare=_prepare_getrf)
def getrf(ctx, op, a):
    return K.getrf(a)


def _prepare_pivots_to_permutation(op):
    return op.result_types[0].shape[-1]


@register_custom_call("cu_lu_pivots_to_permutation", "hip_lu_pivots_to_permutation",
                      prepare=_prepare_pivots_to_permutation)
def pivots_to_permutation(ctx, op, pivots):
    size = op.params
    # The GPU kernels apply the swaps in order and skip a pivot outside
    # [0, size) (lax's CPU path would clamp it instead).
    batch = pivots.shape[:-1]
    iota = lax.broadcasted_iota(np.int32, batch + (size,), len(batch))

    def swap(i, perm):
        j = lax.dynamic_index_in_dim(pivots, i, axis=-1, keepdims=False).astype(np.int32)
        j = jnp.where((j >= 0) & (j < size), j, i)
        pi = lax.dynamic_index_in_dim(perm, i, axis=-1, keepdims=True)
        pj = jnp.take_along_axis(perm, j[..., None], axis=-1)
        perm = jnp.where(iota == i, pj, perm)
        return jnp.where(iota == j[..., None], pi, perm)

    return lax.fori_loop(0, min(pivots.shape[-1], size), swap, iota)


@register_custom_call("LuDecomposition")
def tpu_lu(ctx, op, a):
    lu, pivots, perm = L.lu(a)
    return (lu, pivots.astype(np.int32), perm.astype(np.int32))


# ---------------------------------------------------------------- QR

# Qr: TPU's, the same (a, taus), as one tuple.
@register_custom_call("lapack_sgeqrf_ffi", "lapack_dgeqrf_ffi", "lapack_cgeqrf_ffi",
                      "lapack_zgeqrf_ffi", "cusolver_geqrf_ffi", "hipsolver_geqrf_ffi",
                      "cublas_geqrf_batched_ffi", "hipblas_geqrf_batched_ffi", "Qr")
def geqrf(ctx, op, a):
    return K.geqrf(a)


@register_custom_call("lapack_sorgqr_ffi", "lapack_dorgqr_ffi", "lapack_cungqr_ffi",
                      "lapack_zungqr_ffi", "cusolver_orgqr_ffi", "hipsolver_orgqr_ffi",
                      "ProductOfElementaryHouseholderReflectors")
def householder_product(ctx, op, a, taus):
    return K.householder_product(a, taus)


@register_custom_call("lapack_sgeqp3_ffi", "lapack_dgeqp3_ffi", "lapack_cgeqp3_ffi",
                      "lapack_zgeqp3_ffi", "cuhybrid_geqp3", "hiphybrid_geqp3")
def geqp3(ctx, op, a, jpvt):
    # Column-pivoted QR: jpvt in and out is LAPACK's (1-based; a nonzero entry on
    # input moves that column to the front). The GPU "hybrid" kernel has the same contract.
    return tuple(lax_geqp3(a, jpvt))


class Ormqr(NamedTuple):
    left: bool       # Q applied on the left of c (else on the right)
    transpose: bool  # Q^H instead of Q


def _prepare_ormqr(op):
    cfg = backend_config(op)
    return Ormqr(left=bool(cfg.get("left", True)), transpose=bool(cfg.get("transpose", False)))


@register_custom_call("lapack_sormqr_ffi", "lapack_dormqr_ffi", "lapack_cunmqr_ffi",
                      "lapack_zunmqr_ffi", "cusolver_ormqr_ffi", "hipsolver_ormqr_ffi",
                      prepare=_prepare_ormqr)
def ormqr(ctx, op, a, taus, c):
    # Q (or Q^H) from the reflectors in (a, taus) applied to c, on the left or the right.
    return lax_ormqr(a, taus, c, left=op.params.left, transpose=op.params.transpose)


# ---------------------------------------------------------------- Cholesky (potrf)

def _prepare_potrf(op):
    return K.uplo_lower(backend_config(op))


@register_custom_call("lapack_spotrf_ffi", "lapack_dpotrf_ffi", "lapack_cpotrf_ffi",
                      "lapack_zpotrf_ffi", "cusolver_potrf_ffi", "hipsolver_potrf_ffi",
                      prepare=_prepare_potrf)
def potrf(ctx, op, a):
    return K.potrf(op.params, a)


# ---------------------------------------------------------------- eigh (syevd/heevd)

def _prepare_syevd(op):
    cfg = backend_config(op)
    if cfg.get("mode", _V) != _V:
        raise Unsupported("syevd without eigenvectors (mode N)")
    return K.uplo_lower(cfg)


@register_custom_call("lapack_ssyevd_ffi", "lapack_dsyevd_ffi", "lapack_cheevd_ffi",
                      "lapack_zheevd_ffi", "cusolver_syevd_ffi", "hipsolver_syevd_ffi",
                      prepare=_prepare_syevd)
def syevd(ctx, op, a):
    return K.syevd(op.params, a)


# The pre-FFI `hipsolver_syevd` / `cusolver_syevj` & co: legacy_gpu.py.


class TpuEigh(NamedTuple):
    lower: bool
    sort_eigenvalues: bool


def _prepare_tpu_eigh(op):
    # backend_config "lower,sort_eigenvalues,max_iter,tol".
    parts = str(op.attrs.get("backend_config", "1,1")).split(",")
    return TpuEigh(bool(int(parts[0])), bool(int(parts[1])))


@register_custom_call("Eigh", prepare=_prepare_tpu_eigh)
def tpu_eigh(ctx, op, a):
    p = op.params
    v, w = L.eigh(a, lower=p.lower, symmetrize_input=False, sort_eigenvalues=p.sort_eigenvalues)
    return (v, w)

# ---------------------------------------------------------------- SVD

class Svd(NamedTuple):
    compute_uv: bool
    full_matrices: bool
    transposed: bool = False  # GPU: a wide matrix handed over as its transpose


def _prepare_gesdd(op):
    mode = backend_config(op).get("mode", _A)
    if mode not in (_A, _S, _N):
        raise Unsupported(f"gesdd mode {chr(mode)!r}")
    return Svd(compute_uv=mode != _N, full_matrices=mode == _A)


def _svd_outputs(op, a, s, u, vh):
    slots = [(t.shape, t.dtype) for t in op.result_types[2:4]]
    return K.svd_results(a, s, u, vh, slots)


@register_custom_call("lapack_sgesdd_ffi", "lapack_dgesdd_ffi", "lapack_cgesdd_ffi",
                      "lapack_zgesdd_ffi", "lapack_sgesvd_ffi", "lapack_dgesvd_ffi",
                      "lapack_cgesvd_ffi", "lapack_zgesvd_ffi", prepare=_prepare_gesdd)
def gesdd(ctx, op, a):
    s, u, vh = K.svd(a, op.params.compute_uv, op.params.full_matrices)
    return _svd_outputs(op, a, s, u, vh)


def _prepare_gpu_svd(op):
    cfg = backend_config(op)
    return Svd(bool(cfg.get("compute_uv", True)), bool(cfg.get("full_matrices", True)),
               bool(cfg.get("transposed", False)))


@register_custom_call("cusolver_gesvd_ffi", "hipsolver_gesvd_ffi", "cusolver_gesdd_ffi",
                      "hipsolver_gesdd_ffi", prepare=_prepare_gpu_svd)
def gpu_gesvd(ctx, op, a):
    s, u, vh = K.svd(a, op.params.compute_uv, op.params.full_matrices)
    if op.params.transposed:
        # A wide matrix is handed over row-major, i.e. as its transpose: the
        # kernel's "U" slot then holds V^H of A and its "V^H" slot U of A.
        u, vh = vh, u
    return _svd_outputs(op, a, s, u, vh)


@register_custom_call("cusolver_gesvdj_ffi", "hipsolver_gesvdj_ffi", "cusolver_gesvdp_ffi",
                      "hipsolver_gesvdp_ffi", prepare=_prepare_gpu_svd)
def gpu_gesvdj(ctx, op, a):
    # gesvdj and gesvdp return V, not V^H
    s, u, vh = K.svd(a, op.params.compute_uv, op.params.full_matrices)
    return _svd_outputs(op, a, s, u, None if vh is None else K.adjoint(vh))

# ---------------------------------------------------------------- eig (geev)

class Eig(NamedTuple):
    left: bool   # the left eigenvectors are wanted
    right: bool  # the right ones


def _prepare_geev(op):
    cfg = backend_config(op)
    return Eig(cfg.get("compute_left", _V) == _V, cfg.get("compute_right", _V) == _V)


def _prepare_gpu_eig(op):
    cfg = backend_config(op)
    return Eig(bool(cfg.get("left", False)), bool(cfg.get("right", True)))


@register_custom_call("lapack_sgeev_ffi", "lapack_dgeev_ffi", "lapack_cgeev_ffi",
                      "lapack_zgeev_ffi", prepare=_prepare_geev)
def geev(ctx, op, a):
    w, vl, vr, ok = K.geev(a, op.params.left, op.params.right)
    if len(op.result_types) == 4:  # complex input: one complex eigenvalue array
        return w, vl, vr, ok
    real = op.result_types[0].dtype
    return jnp.real(w).astype(real), jnp.imag(w).astype(real), vl, vr, ok


# The GPU "hybrid" kernels (MAGMA or LAPACK on the host) have geev's outputs.
register_custom_call("cuhybrid_eig_real", "cuhybrid_eig_comp", "hiphybrid_eig_real",
                     "hiphybrid_eig_comp", prepare=_prepare_gpu_eig)(geev)


def _pack_conjugate_pairs(w, v):
    """cusolverDnXgeev's real eigenvectors: a complex pair (w_j, w_j+1 = conj w_j)
    shares columns j (real part of v_j) and j+1 (its imaginary part)."""
    complex_ = jnp.imag(w) != 0
    # The second member of a pair: an odd running count of complex eigenvalues.
    second = (jnp.cumsum(complex_.astype(np.int32), axis=-1) % 2 == 0) & complex_
    # v_j+1 = conj(v_j), so Im(v_j) = -Im(v_j+1).
    return jnp.where(second[..., None, :], -jnp.imag(v), jnp.real(v))


@register_custom_call("cusolver_geev_ffi", prepare=_prepare_gpu_eig)
def cusolver_geev(ctx, op, a):
    left, right = op.params
    w, vl, vr = L.eig(a, compute_left_eigenvectors=True, compute_right_eigenvectors=True)
    info = K.info(K.all_finite(w, a.ndim - 2))
    out = []
    for wanted, v in ((left, vl), (right, vr)):
        if jnp.iscomplexobj(a):
            out.append(v if wanted else jnp.zeros_like(v))
        else:
            out.append(_pack_conjugate_pairs(w, v) if wanted else jnp.zeros(a.shape, a.dtype))
    return a, w, out[0], out[1], info


# ---------------------------------------------------------------- Schur (gees)

def _prepare_gees(op):
    cfg = backend_config(op)
    if cfg.get("sort", _N) != _N:
        # jaxlib's kernel itself fails on it ("Ordering eigenvalues on the diagonal is
        # not implemented"): there is no select callback to order by.
        raise Unsupported("gees with eigenvalue sorting (sort = 'S'): the LAPACK kernel "
                          "does not implement it")
    return cfg.get("mode", _V) == _V


@register_custom_call("lapack_sgees_ffi", "lapack_dgees_ffi", "lapack_cgees_ffi",
                      "lapack_zgees_ffi", prepare=_prepare_gees)
def gees(ctx, op, a):
    t, vs, sdim, info = K.gees(a, op.params)  # params: whether the Schur vectors are wanted
    if len(op.result_types) == 5:  # complex input: one complex eigenvalue array
        return t, vs, jnp.diagonal(t, axis1=-2, axis2=-1), sdim, info
    wr, wi = K.quasi_triangular_eigenvalues(t)
    return t, vs, wr, wi, sdim, info


# ---------------------------------------------------------------- Hessenberg, tridiagonal

def _prepare_gehrd(op):
    cfg = backend_config(op)
    n = op.result_types[0].shape[-1]
    if cfg.get("low", 1) != 1 or cfg.get("high", n) != n:
        raise Unsupported(f"gehrd with ilo={cfg.get('low')}, ihi={cfg.get('high')} "
                          f"(only the full range 1..{n})")
    return None


@register_custom_call("lapack_sgehrd_ffi", "lapack_dgehrd_ffi", "lapack_cgehrd_ffi",
                      "lapack_zgehrd_ffi", prepare=_prepare_gehrd)
def gehrd(ctx, op, a):
    h, taus = L.hessenberg(a)
    return h, taus, jnp.zeros(K.batch_shape(a), np.int32)


def _prepare_sytrd(op):
    return K.uplo_lower(backend_config(op))


@register_custom_call("lapack_ssytrd_ffi", "lapack_dsytrd_ffi", "lapack_chetrd_ffi",
                      "lapack_zhetrd_ffi", "cusolver_sytrd_ffi", "hipsolver_sytrd_ffi",
                      prepare=_prepare_sytrd)
def sytrd(ctx, op, a):
    return K.sytrd(op.params, a)


# ---------------------------------------------------------------- solves (trsm, gtsv)

def _prepare_trsm(op):
    cfg = backend_config(op)
    trans = cfg.get("trans_x", _N)
    if trans not in (_N, _T, _C):
        raise Unsupported(f"trsm trans_x={trans!r}")
    return TriangularSolve(left_side=cfg.get("side", _L) == _L, lower=cfg.get("uplo", _L) == _L,
                           transpose_a=trans != _N, conjugate_a=trans == _C,
                           unit_diagonal=cfg.get("diag", _N) == _U)


@register_custom_call("lapack_strsm_ffi", "lapack_dtrsm_ffi", "lapack_ctrsm_ffi",
                      "lapack_ztrsm_ffi", prepare=_prepare_trsm)
def trsm(ctx, op, a, b, *alpha):
    if alpha:  # older kernels take alpha as a third operand: solves op(A) X = alpha B
        b = b * alpha[0]
    return L.triangular_solve(a, b, **op.params._asdict())


@register_custom_call("lapack_sgtsv_ffi", "lapack_dgtsv_ffi", "lapack_cgtsv_ffi",
                      "lapack_zgtsv_ffi")
def gtsv(ctx, op, dl, d, du, b):
    x = L.tridiagonal_solve(dl, d, du, b)
    return dl, d, du, x, K.info(K.all_finite(x, dl.ndim - 1))


@register_custom_call("tridiagonal_solve_perturbed_ffi", "cu_tridiagonal_solve_perturbed",
                      "hip_tridiagonal_solve_perturbed")
def tridiagonal_solve_perturbed(ctx, op, dl, d, du, b):
    # Partial pivoting with tiny pivots perturbed: a singular system still gets an answer.
    return lax_tridiagonal_solve_perturbed(dl, d, du, b)

# ---------------------------------------------------------------- GPU-only BLAS-like kernels


@register_custom_call("cu_cholesky_update_ffi", "hip_cholesky_update_ffi")
def cholesky_update(ctx, op, r, w):
    return K.cholesky_update(r, w)


def _prepare_syrk(op):
    return bool(backend_config(op).get("transpose", False))


@register_custom_call("cusolver_syrk_ffi", "hipsolver_syrk_ffi", prepare=_prepare_syrk)
def syrk(ctx, op, a, c, alpha, beta):
    """cuBLAS syrk on row-major buffers: alpha A A^T + beta C (A^T A with transpose)
    written to the lower triangle only; the strict upper triangle keeps C as it was."""
    at = jnp.swapaxes(a, -1, -2)
    prod = jnp.matmul(at, a, precision=lax.Precision.HIGHEST) if op.params else \
        jnp.matmul(a, at, precision=lax.Precision.HIGHEST)
    updated = alpha * prod + beta * c
    n = c.shape[-1]
    lower = lax.broadcasted_iota(np.int32, (n, n), 0) >= lax.broadcasted_iota(np.int32, (n, n), 1)
    return jnp.where(lower, updated, c)


@register_custom_call("cusolver_csrlsvqr_ffi")
def csrlsvqr(ctx, op, data, indices, indptr, b):
    """jax.experimental.sparse.linalg.spsolve on GPU."""
    return K.csr_solve(data, indices, indptr, b)


@register_custom_call("cusparse_gtsv2_ffi", "hipsparse_gtsv2_ffi")
def sparse_gtsv2(ctx, op, dl, d, du, b):
    return L.tridiagonal_solve(dl, d, du, b)


# ---------------------------------------------------------------- pre-FFI LAPACK/BLAS kernels
# Exports from jax before the FFI kernels (mid 2024 and earlier) call
# `lapack_?getrf` & co with api_version 2: the flags and sizes are leading scalar
# operands (constants), workspaces are extra results, and some producers return
# everything as one tuple. The flags must be known while tracing. (The pre-FFI geev, gees,
# gehrd and sytrd are in legacy.py.)

def _flag(value):
    return known_int(value, "a flag operand of a LAPACK call")


class LegacyKernel(NamedTuple):
    """How a pre-FFI kernel call runs: `compute(out, *operands)` gives its leading results
    (workspaces follow as zeros); or, for an FFI kernel exported under the old name, the FFI
    rule's handler on a view of the op with that rule's params."""
    out: Optional[Outputs] = None
    compute: Optional[Callable] = None
    ffi_handler: Optional[Callable] = None
    ffi_op: object = None


def _prepare_legacy(op):
    target = op.attrs["call_target_name"]
    if isinstance(op.attrs.get("mhlo.backend_config"), dict):
        # Briefly (mid 2024) the FFI kernels were exported under the old names.
        rule = registry.custom_call_rule(target + "_ffi")
        if rule is None:
            raise Unsupported(f"{target} with a typed backend_config (no FFI counterpart)")
        params = rule.prepare(op) if rule.prepare else op.attrs
        return LegacyKernel(ffi_handler=rule.handler, ffi_op=op.replaced(params=params))
    return LegacyKernel(Outputs.of(op), _LEGACY[target])


def legacy_kernel(ctx, op, *operands):
    p = op.params
    if p.ffi_handler is not None:
        return p.ffi_handler(ctx, p.ffi_op, *operands)
    return p.out.pack(p.compute(p.out, *operands))


def _legacy_getrf(out, b, m, n, a):
    return K.getrf(a)


def _legacy_geqrf(out, b, m, n, lwork, a):
    return (*K.geqrf(a), jnp.zeros(a.shape[:-2], np.int32))


def _legacy_orgqr(out, b, m, n, k, lwork, a, taus):
    return K.householder_product(a, taus), jnp.zeros(a.shape[:-2], np.int32)


def _legacy_potrf(out, lower, b, n, a):
    return K.potrf(bool(_flag(lower)), a)


def _legacy_gesdd(out, full, compute_uv, b, m, n, lwork, a):
    s, u, vh = K.svd(a, bool(_flag(compute_uv)), bool(_flag(full)))
    return K.svd_results(a, s, u, vh, out.types[2:4])


def _legacy_syevd(out, lower, b, n, a, *shapes):
    return K.syevd(bool(_flag(lower)), a)


def _legacy_trsm(out, left, lower, trans, diag, m, n, num_b, alpha, a, b):
    trans = _flag(trans)
    return (L.triangular_solve(a, b * alpha, left_side=bool(_flag(left)),
                               lower=bool(_flag(lower)), transpose_a=trans != 0,
                               conjugate_a=trans == 2, unit_diagonal=bool(_flag(diag))),)


_LEGACY = {
    "lapack_sgetrf": _legacy_getrf, "lapack_dgetrf": _legacy_getrf,
    "lapack_cgetrf": _legacy_getrf, "lapack_zgetrf": _legacy_getrf,
    "lapack_sgeqrf": _legacy_geqrf, "lapack_dgeqrf": _legacy_geqrf,
    "lapack_cgeqrf": _legacy_geqrf, "lapack_zgeqrf": _legacy_geqrf,
    "lapack_sorgqr": _legacy_orgqr, "lapack_dorgqr": _legacy_orgqr,
    "lapack_cungqr": _legacy_orgqr, "lapack_zungqr": _legacy_orgqr,
    "lapack_spotrf": _legacy_potrf, "lapack_dpotrf": _legacy_potrf,
    "lapack_cpotrf": _legacy_potrf, "lapack_zpotrf": _legacy_potrf,
    "lapack_sgesdd": _legacy_gesdd, "lapack_dgesdd": _legacy_gesdd,
    "lapack_cgesdd": _legacy_gesdd, "lapack_zgesdd": _legacy_gesdd,
    "lapack_ssyevd": _legacy_syevd, "lapack_dsyevd": _legacy_syevd,
    "lapack_cheevd": _legacy_syevd, "lapack_zheevd": _legacy_syevd,
    "blas_strsm": _legacy_trsm, "blas_dtrsm": _legacy_trsm,
    "blas_ctrsm": _legacy_trsm, "blas_ztrsm": _legacy_trsm,
}

for _target in _LEGACY:
    register_custom_call(_target, prepare=_prepare_legacy)(legacy_kernel)
