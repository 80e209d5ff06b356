"""Linear-algebra custom_call targets: LAPACK (CPU FFI), cuSOLVER/hipSOLVER, TPU.

jax lowers `lax.linalg` to these kernels; each handler reproduces the kernel's
output format exactly (LAPACK's 1-based int32 pivots, `info` codes, the
overwritten input operand, real/imaginary eigenvalue pairs...) on top of
`jax.lax.linalg`, which computes the same decompositions on any backend.
Layout attributes (column-major operand_layouts) only describe physical
storage: the logical tensors are the same, so they are ignored.
"""

from __future__ import annotations

import struct

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.lax import linalg as L
from jax._src.lax.linalg import geqp3 as _lax_geqp3
from jax._src.lax.linalg import geqrf as _lax_geqrf

from shlo2jax import registry
from shlo2jax.registry import Unsupported
from shlo2jax.types import TupleType
from shlo2jax.ops._common import backend_config
from shlo2jax.ops.custom_calls import builtin

# LAPACK character flags arrive as their ASCII codes (ui8 attributes).
_L, _U, _N, _V, _A, _S, _O = (ord(c) for c in "LUNVASO")
_T, _C, _R = ord("T"), ord("C"), ord("R")


def _lapack(*routines):
    """Every LAPACK FFI target name for these routines (s/d/c/z prefixes)."""
    names = []
    for routine in routines:
        real, cplx = routine if isinstance(routine, tuple) else (routine, routine)
        names += [f"lapack_s{real}_ffi", f"lapack_d{real}_ffi",
                  f"lapack_c{cplx}_ffi", f"lapack_z{cplx}_ffi"]
    return names


def _gpu(*routines):
    return [f"{lib}_{r}_ffi" for r in routines for lib in ("cusolver", "hipsolver")]


def _blas_batched(*routines):
    # Small batched matrices went to cuBLAS/hipBLAS (same outputs as the solver kernels).
    return [f"{lib}_{r}_batched_ffi" for r in routines for lib in ("cublas", "hipblas")]


def _batch(x):
    return x.shape[:-2]


def _adjoint(x):
    x = jnp.swapaxes(x, -1, -2)
    return jnp.conj(x) if jnp.iscomplexobj(x) else x


def _info(ok):
    """LAPACK's `info`: 0 on success, a positive code otherwise."""
    return lax.select(ok, jnp.zeros(ok.shape, np.int32), jnp.ones(ok.shape, np.int32))


def _all_finite(x, batch_rank):
    finite = jnp.isfinite(x)
    axes = tuple(range(batch_rank, x.ndim))
    return jnp.all(finite, axis=axes) if axes else finite


def _uplo_lower(cfg):
    if "lower" in cfg:
        return bool(cfg["lower"])
    uplo = cfg.get("uplo", _L)
    if uplo not in (_L, _U):
        raise Unsupported(f"uplo={uplo!r}")
    return uplo == _L


# ---------------------------------------------------------------- LU (getrf)

def _prepare_getrf(op):
    backend_config(op)
    return None


def getrf(ctx, op, params, a):
    lu, pivots, _ = L.lu(a)
    k = min(a.shape[-2], a.shape[-1])
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)[..., :k]
    zero = diag == 0
    # info = i (1-based) for the first exactly-zero U(i, i), as LAPACK reports it.
    first = jnp.argmax(zero, axis=-1).astype(np.int32) + 1
    info = jnp.where(jnp.any(zero, axis=-1), first, 0).astype(np.int32)
    return lu, (pivots + 1).astype(np.int32), info


builtin(_lapack("getrf") + _gpu("getrf") + _blas_batched("getrf"), getrf, _prepare_getrf)


def _prepare_pivots_to_permutation(op):
    return op.result_types[0].shape[-1]


def pivots_to_permutation(ctx, op, size, pivots):
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


builtin(["cu_lu_pivots_to_permutation", "hip_lu_pivots_to_permutation"], pivots_to_permutation,
        _prepare_pivots_to_permutation)


def tpu_lu(ctx, op, params, a):
    lu, pivots, perm = L.lu(a)
    return (lu, pivots.astype(np.int32), perm.astype(np.int32))


builtin(["LuDecomposition"], tpu_lu)

# ---------------------------------------------------------------- QR

def _geqrf(a):
    # lax.linalg exports householder_product but not geqrf (its inverse step).
    return tuple(_lax_geqrf(a))


def geqrf(ctx, op, params, a):
    return _geqrf(a)


def householder_product(ctx, op, params, a, taus):
    return L.householder_product(a, taus)


builtin(_lapack("geqrf") + _gpu("geqrf") + _blas_batched("geqrf"), geqrf)
builtin(_lapack(("orgqr", "ungqr")) + _gpu("orgqr"), householder_product)


def geqp3(ctx, op, params, a, jpvt):
    # Column-pivoted QR: jpvt in and out is LAPACK's (1-based; a nonzero entry on
    # input moves that column to the front). The GPU "hybrid" kernel has the same contract.
    return tuple(_lax_geqp3(a, jpvt))


builtin(_lapack("geqp3") + ["cuhybrid_geqp3", "hiphybrid_geqp3"], geqp3)


def _prepare_ormqr(op):
    cfg = backend_config(op)
    return dict(left=bool(cfg.get("left", True)), transpose=bool(cfg.get("transpose", False)))


def ormqr(ctx, op, params, a, taus, c):
    # Q (or Q^H) from the reflectors in (a, taus) applied to c, on the left or the right.
    return L.ormqr(a, taus, c, **params)


builtin(_lapack(("ormqr", "unmqr")) + _gpu("ormqr"), ormqr, _prepare_ormqr)
builtin(["Qr"], geqrf)  # TPU: the same (a, taus), as one tuple
builtin(["ProductOfElementaryHouseholderReflectors"], householder_product)

# ---------------------------------------------------------------- Cholesky (potrf)

def _prepare_potrf(op):
    return _uplo_lower(backend_config(op))


def potrf(ctx, op, lower, a):
    # Only the named triangle is read; the upper factor is the adjoint of the
    # lower factor of the adjoint.
    chol = L.cholesky(a if lower else _adjoint(a), symmetrize_input=False)
    ok = _all_finite(chol, a.ndim - 2)
    return (chol if lower else _adjoint(chol)), _info(ok)


builtin(_lapack("potrf") + _gpu("potrf"), potrf, _prepare_potrf)

# ---------------------------------------------------------------- eigh (syevd/heevd)

def _prepare_syevd(op):
    cfg = backend_config(op)
    if cfg.get("mode", _V) != _V:
        raise Unsupported("syevd without eigenvectors (mode N)")
    return _uplo_lower(cfg)


def syevd(ctx, op, lower, a):
    v, w = L.eigh(a, lower=lower, symmetrize_input=False, sort_eigenvalues=True)
    return v, w, _info(_all_finite(w, a.ndim - 2))


builtin(_lapack(("syevd", "heevd")) + _gpu("syevd"), syevd, _prepare_syevd)


def _prepare_legacy_hipsolver_syev(op):
    # Pre-FFI descriptor: int32 (type, uplo, batch, n, lwork); rocBLAS fill 122 = lower.
    raw = op.attrs.get("backend_config", "")
    raw = raw.encode("latin-1") if isinstance(raw, str) else bytes(raw)
    if len(raw) < 8:
        raise Unsupported("hipsolver_syev descriptor too short")
    return struct.unpack_from("<2i", raw)[1] == 122


def legacy_hipsolver_syev(ctx, op, lower, a):
    v, w = L.eigh(a, lower=lower, symmetrize_input=False, sort_eigenvalues=True)
    work = op.result_types[3]
    return v, w, _info(_all_finite(w, a.ndim - 2)), jnp.zeros(work.shape, work.dtype)


builtin(["hipsolver_syevd", "hipsolver_syevj"],
        legacy_hipsolver_syev, _prepare_legacy_hipsolver_syev)


def _prepare_tpu_eigh(op):
    # backend_config "lower,sort_eigenvalues,max_iter,tol".
    parts = str(op.attrs.get("backend_config", "1,1")).split(",")
    return bool(int(parts[0])), bool(int(parts[1]))


def tpu_eigh(ctx, op, params, a):
    lower, sort = params
    v, w = L.eigh(a, lower=lower, symmetrize_input=False, sort_eigenvalues=sort)
    return (v, w)


builtin(["Eigh"], tpu_eigh, _prepare_tpu_eigh)

# ---------------------------------------------------------------- SVD

def _prepare_gesdd(op):
    mode = backend_config(op).get("mode", _A)
    if mode not in (_A, _S, _N):
        raise Unsupported(f"gesdd mode {chr(mode)!r}")
    return mode != _N, mode == _A


def _svd(a, compute_uv, full):
    if not compute_uv:
        s = L.svd(a, full_matrices=False, compute_uv=False)
        return s, None, None
    u, s, vh = L.svd(a, full_matrices=full, compute_uv=True)
    return s, u, vh


def _svd_outputs(op, a, s, u, vh):
    ok = _all_finite(s, a.ndim - 2)
    outs = [a, s]
    for i, m in ((2, u), (3, vh)):
        rtype = op.result_types[i]
        outs.append(m if m is not None and m.shape == rtype.shape
                    else jnp.zeros(rtype.shape, rtype.dtype))
    return (*outs, _info(ok))


def gesdd(ctx, op, params, a):
    compute_uv, full = params
    s, u, vh = _svd(a, compute_uv, full)
    return _svd_outputs(op, a, s, u, vh)


builtin(_lapack("gesdd", "gesvd"), gesdd, _prepare_gesdd)


def _prepare_gpu_svd(op):
    cfg = backend_config(op)
    return (bool(cfg.get("compute_uv", True)), bool(cfg.get("full_matrices", True)),
            bool(cfg.get("transposed", False)))


def gpu_gesvd(ctx, op, params, a):
    compute_uv, full, transposed = params
    s, u, vh = _svd(a, compute_uv, full)
    if transposed:
        # A wide matrix is handed over row-major, i.e. as its transpose: the
        # kernel's "U" slot then holds V^H of A and its "V^H" slot U of A.
        u, vh = vh, u
    return _svd_outputs(op, a, s, u, vh)


def gpu_gesvdj(ctx, op, params, a):
    compute_uv, full, _ = params
    s, u, vh = _svd(a, compute_uv, full)  # gesvdj and gesvdp return V, not V^H
    return _svd_outputs(op, a, s, u, None if vh is None else _adjoint(vh))


builtin(_gpu("gesvd", "gesdd"), gpu_gesvd, _prepare_gpu_svd)
builtin(_gpu("gesvdj", "gesvdp"), gpu_gesvdj, _prepare_gpu_svd)

# ---------------------------------------------------------------- eig (geev)

def _prepare_geev(op):
    cfg = backend_config(op)
    return cfg.get("compute_left", _V) == _V, cfg.get("compute_right", _V) == _V


def geev(ctx, op, params, a):
    left, right = params
    w, vl, vr = L.eig(a, compute_left_eigenvectors=True, compute_right_eigenvectors=True)
    ok = _info(_all_finite(w, a.ndim - 2))
    vl = vl if left else jnp.zeros_like(vl)
    vr = vr if right else jnp.zeros_like(vr)
    if len(op.result_types) == 4:  # complex input: one complex eigenvalue array
        return w, vl, vr, ok
    real = op.result_types[0].dtype
    return jnp.real(w).astype(real), jnp.imag(w).astype(real), vl, vr, ok


def _prepare_gpu_eig(op):
    cfg = backend_config(op)
    return bool(cfg.get("left", False)), bool(cfg.get("right", True))


# The GPU "hybrid" kernels (MAGMA or LAPACK on the host) have geev's outputs.
builtin(["cuhybrid_eig_real", "cuhybrid_eig_comp", "hiphybrid_eig_real", "hiphybrid_eig_comp"],
        geev, _prepare_gpu_eig)


def _pack_conjugate_pairs(w, v):
    """cusolverDnXgeev's real eigenvectors: a complex pair (w_j, w_j+1 = conj w_j)
    shares columns j (real part of v_j) and j+1 (its imaginary part)."""
    complex_ = jnp.imag(w) != 0
    # The second member of a pair: an odd running count of complex eigenvalues.
    second = (jnp.cumsum(complex_.astype(np.int32), axis=-1) % 2 == 0) & complex_
    # v_j+1 = conj(v_j), so Im(v_j) = -Im(v_j+1).
    return jnp.where(second[..., None, :], -jnp.imag(v), jnp.real(v))


def cusolver_geev(ctx, op, params, a):
    left, right = params
    w, vl, vr = L.eig(a, compute_left_eigenvectors=True, compute_right_eigenvectors=True)
    info = _info(_all_finite(w, a.ndim - 2))
    out = []
    for wanted, v in ((left, vl), (right, vr)):
        if jnp.iscomplexobj(a):
            out.append(v if wanted else jnp.zeros_like(v))
        else:
            out.append(_pack_conjugate_pairs(w, v) if wanted else jnp.zeros(a.shape, a.dtype))
    return a, w, out[0], out[1], info


builtin(["cusolver_geev_ffi"], cusolver_geev, _prepare_gpu_eig)


# ---------------------------------------------------------------- Schur (gees)

def _prepare_gees(op):
    cfg = backend_config(op)
    if cfg.get("sort", _N) != _N:
        # jaxlib's kernel itself fails on it ("Ordering eigenvalues on the diagonal is
        # not implemented"): there is no select callback to order by.
        raise Unsupported("gees with eigenvalue sorting (sort = 'S'): the LAPACK kernel "
                          "does not implement it")
    return cfg.get("mode", _V) == _V


def _quasi_triangular_eigenvalues(t):
    """(wr, wi) of a real Schur form, in diagonal order, as LAPACK lists them.

    2x2 blocks are standardized (equal diagonal entries, off-diagonals of
    opposite signs): their eigenvalues are a +- i sqrt(|b c|).
    """
    n = t.shape[-1]
    wr = jnp.diagonal(t, axis1=-2, axis2=-1)
    if n == 1:
        return wr, jnp.zeros_like(wr)
    sub = jnp.diagonal(t, offset=-1, axis1=-2, axis2=-1)
    sup = jnp.diagonal(t, offset=1, axis1=-2, axis2=-1)
    im = jnp.sqrt(jnp.abs(sub)) * jnp.sqrt(jnp.abs(sup))
    pad = jnp.zeros(wr.shape[:-1] + (1,), wr.dtype)
    starts = jnp.concatenate([jnp.where(sub != 0, im, 0), pad], axis=-1)
    seconds = jnp.concatenate([pad, jnp.where(sub != 0, -im, 0)], axis=-1)
    return wr, starts + seconds


def gees(ctx, op, want_vectors, a):
    t, vs = L.schur(a, compute_schur_vectors=True)
    if not want_vectors:
        vs = jnp.zeros_like(vs)
    batch = _batch(a)
    sdim = jnp.zeros(batch, np.int32)
    info = _info(_all_finite(t, len(batch)))
    if len(op.result_types) == 5:  # complex input: one complex eigenvalue array
        return t, vs, jnp.diagonal(t, axis1=-2, axis2=-1), sdim, info
    wr, wi = _quasi_triangular_eigenvalues(t)
    return t, vs, wr, wi, sdim, info


# ---------------------------------------------------------------- Hessenberg, tridiagonal

def _prepare_gehrd(op):
    cfg = backend_config(op)
    n = op.result_types[0].shape[-1]
    if cfg.get("low", 1) != 1 or cfg.get("high", n) != n:
        raise Unsupported(f"gehrd with ilo={cfg.get('low')}, ihi={cfg.get('high')} "
                          f"(only the full range 1..{n})")
    return None


def gehrd(ctx, op, params, a):
    h, taus = L.hessenberg(a)
    return h, taus, jnp.zeros(_batch(a), np.int32)


def _prepare_sytrd(op):
    return _uplo_lower(backend_config(op))


def sytrd(ctx, op, lower, a):
    out, d, e, taus = L.tridiagonal(a, lower=lower)
    return out, d, e, taus, jnp.zeros(_batch(a), np.int32)


builtin(_lapack(("sytrd", "hetrd")) + _gpu("sytrd"), sytrd, _prepare_sytrd)

# ---------------------------------------------------------------- solves (trsm, gtsv)

def _prepare_trsm(op):
    cfg = backend_config(op)
    trans = cfg.get("trans_x", _N)
    if trans not in (_N, _T, _C):
        raise Unsupported(f"trsm trans_x={trans!r}")
    return dict(left_side=cfg.get("side", _L) == _L, lower=cfg.get("uplo", _L) == _L,
                transpose_a=trans != _N, conjugate_a=trans == _C,
                unit_diagonal=cfg.get("diag", _N) == _U)


def trsm(ctx, op, params, a, b, *alpha):
    if alpha:  # older kernels take alpha as a third operand: solves op(A) X = alpha B
        b = b * alpha[0]
    return L.triangular_solve(a, b, **params)


builtin(_lapack("trsm"), trsm, _prepare_trsm)


def gtsv(ctx, op, params, dl, d, du, b):
    x = L.tridiagonal_solve(dl, d, du, b)
    return dl, d, du, x, _info(_all_finite(x, dl.ndim - 1))


builtin(_lapack("gtsv"), gtsv)


def tridiagonal_solve_perturbed(ctx, op, params, dl, d, du, b):
    # Partial pivoting with tiny pivots perturbed: a singular system still gets an answer.
    return L.tridiagonal_solve(dl, d, du, b, perturb_singular=True)


builtin(["tridiagonal_solve_perturbed_ffi", "cu_tridiagonal_solve_perturbed",
         "hip_tridiagonal_solve_perturbed"], tridiagonal_solve_perturbed)

# ---------------------------------------------------------------- GPU-only BLAS-like kernels


def cholesky_update(ctx, op, params, r, w):
    """The rank-1 update kernel: Givens rotations of the upper factor's rows with w.

    Row k is rotated from column k onwards (the kernel leaves the zeros left of the
    diagonal alone); w comes back as the kernel leaves it (rotated to ~0).
    """
    n = r.shape[-1]
    cols = lax.iota(np.int32, n)

    def step(k, state):
        r, w = state
        rk = lax.dynamic_index_in_dim(r, k, axis=0, keepdims=False)
        a, b = rk[k], w[k]
        scale = jnp.maximum(jnp.abs(a), jnp.abs(b))
        safe = jnp.where(b == 0, 1, scale)
        rh = lax.rsqrt((a / safe) ** 2 + (b / safe) ** 2)
        c = jnp.where(b == 0, 1, a / safe * rh)
        s = jnp.where(b == 0, 0, -(b / safe) * rh)
        active = cols >= k
        new_rk = jnp.where(active, c * rk - s * w, rk)
        w = jnp.where(active, s * rk + c * w, w)
        return lax.dynamic_update_index_in_dim(r, new_rk, k, axis=0), w

    return lax.fori_loop(0, n, step, (r, w))


builtin(["cu_cholesky_update_ffi", "hip_cholesky_update_ffi"], cholesky_update)


def _prepare_syrk(op):
    return bool(backend_config(op).get("transpose", False))


def syrk(ctx, op, transpose, a, c, alpha, beta):
    """cuBLAS syrk on row-major buffers: alpha A A^T + beta C (A^T A with transpose)
    written to the lower triangle only; the strict upper triangle keeps C as it was."""
    at = jnp.swapaxes(a, -1, -2)
    prod = jnp.matmul(at, a, precision=lax.Precision.HIGHEST) if transpose else \
        jnp.matmul(a, at, precision=lax.Precision.HIGHEST)
    updated = alpha * prod + beta * c
    n = c.shape[-1]
    lower = lax.broadcasted_iota(np.int32, (n, n), 0) >= lax.broadcasted_iota(np.int32, (n, n), 1)
    return jnp.where(lower, updated, c)


builtin(["cusolver_syrk_ffi", "hipsolver_syrk_ffi"], syrk, _prepare_syrk)


def csrlsvqr(ctx, op, params, data, indices, indptr, b):
    """jax.experimental.sparse.linalg.spsolve on GPU: A x = b, A square in CSR form.

    Solved densely (duplicate entries add up, as in CSR); `reorder` only changes the
    kernel's fill-in and `tol` its singularity test.
    """
    n = b.shape[0]
    entries = lax.iota(np.int32, data.shape[0])
    rows = jnp.searchsorted(indptr.astype(np.int32), entries, side="right") - 1
    dense = jnp.zeros((n, n), data.dtype).at[rows, indices].add(data)
    return jnp.linalg.solve(dense, b)


builtin(["cusolver_csrlsvqr_ffi"], csrlsvqr)
builtin(["cusparse_gtsv2_ffi", "hipsparse_gtsv2_ffi"],
        lambda ctx, op, params, dl, d, du, b: L.tridiagonal_solve(dl, d, du, b))


builtin(_lapack("geev"), geev, _prepare_geev)
builtin(_lapack("gees"), gees, _prepare_gees)
builtin(_lapack("gehrd"), gehrd, _prepare_gehrd)

# ---------------------------------------------------------------- pre-FFI LAPACK/BLAS kernels
# Exports from jax before the FFI kernels (mid 2024 and earlier) call
# `lapack_?getrf` & co with api_version 2: the flags and sizes are leading scalar
# operands (constants), workspaces are extra results, and some producers return
# everything as one tuple. The flags must be known while tracing.

def _flag(value):
    if isinstance(value, jax.core.Tracer):
        raise ValueError("a flag operand of a LAPACK call is computed from traced values")
    return int(np.asarray(value).reshape(-1)[0])


def _prepare_legacy(op):
    if isinstance(op.attrs.get("mhlo.backend_config"), dict):
        # Briefly (mid 2024) the FFI kernels were exported under the old names.
        target = op.attrs["call_target_name"]
        rule = registry.CUSTOM_CALL_RULES.get(target + "_ffi")
        if rule is None:
            raise Unsupported(f"{target} with a typed backend_config (no FFI counterpart)")
        return "ffi", rule.handler, rule.prepare(op) if rule.prepare else op.attrs
    types = op.result_types
    as_tuple = len(types) == 1 and isinstance(types[0], TupleType)
    return (types[0].elements if as_tuple else types), as_tuple


def _legacy(targets, compute):
    """`compute(types, *operands)` returns the leading results; workspaces are zeros."""
    def handler(ctx, op, params, *operands):
        if params[0] == "ffi":
            return params[1](ctx, op, params[2], *operands)
        types, as_tuple = params
        outs = list(compute(types, *operands))
        outs += [jnp.zeros(t.shape, t.dtype) for t in types[len(outs):]]
        return tuple(outs) if as_tuple or len(outs) > 1 else outs[0]
    builtin(targets, handler, _prepare_legacy)


def _legacy_names(prefix, *routines):
    return [f"{prefix}_{p}{r[i // 2]}" for r in
            (x if isinstance(x, tuple) else (x, x) for x in routines)
            for i, p in enumerate("sdcz")]


def _legacy_getrf(types, b, m, n, a):
    return getrf(None, None, None, a)


def _legacy_geqrf(types, b, m, n, lwork, a):
    return (*_geqrf(a), jnp.zeros(a.shape[:-2], np.int32))


def _legacy_orgqr(types, b, m, n, k, lwork, a, taus):
    return L.householder_product(a, taus), jnp.zeros(a.shape[:-2], np.int32)


def _legacy_potrf(types, lower, b, n, a):
    return potrf(None, None, bool(_flag(lower)), a)


def _legacy_gesdd(types, full, compute_uv, b, m, n, lwork, a):
    s, u, vh = _svd(a, bool(_flag(compute_uv)), bool(_flag(full)))
    outs = [a, s]
    for t, x in zip(types[2:4], (u, vh)):
        outs.append(x if x is not None and x.shape == tuple(t.shape) else jnp.zeros(t.shape, t.dtype))
    return (*outs, _info(_all_finite(s, a.ndim - 2)))


def _legacy_syevd(types, lower, b, n, a, *shapes):
    v, w = L.eigh(a, lower=bool(_flag(lower)), symmetrize_input=False, sort_eigenvalues=True)
    return v, w, _info(_all_finite(w, a.ndim - 2))


def _legacy_trsm(types, left, lower, trans, diag, m, n, num_b, alpha, a, b):
    trans = _flag(trans)
    return (L.triangular_solve(a, b * alpha, left_side=bool(_flag(left)),
                               lower=bool(_flag(lower)), transpose_a=trans != 0,
                               conjugate_a=trans == 2, unit_diagonal=bool(_flag(diag))),)


_legacy(_legacy_names("lapack", "getrf"), _legacy_getrf)
_legacy(_legacy_names("lapack", "geqrf"), _legacy_geqrf)
_legacy(_legacy_names("lapack", ("orgqr", "ungqr")), _legacy_orgqr)
_legacy(_legacy_names("lapack", "potrf"), _legacy_potrf)
_legacy(_legacy_names("lapack", "gesdd"), _legacy_gesdd)
_legacy(_legacy_names("lapack", ("syevd", "heevd")), _legacy_syevd)
_legacy(_legacy_names("blas", "trsm"), _legacy_trsm)
