"""The linear-algebra kernels that several custom-call families compute: each gives what a
LAPACK/cuSOLVER kernel returns (LAPACK's 1-based int32 pivots, `info` codes, real Schur
eigenvalue pairs...) on top of `jax.lax.linalg`, whatever form the call came in (the typed
FFI in ops/custom_calls/linalg.py, the older descriptor and operand forms in
ops/custom_calls/legacy*.py).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.lax import linalg as L

from shlo2jax.errors import Unsupported

from shlo2jax.ops import _householder

# LAPACK's uplo flag arrives as its ASCII code (a ui8 attribute).
_LOWER, _UPPER = ord("L"), ord("U")


def batch_shape(x):
    return x.shape[:-2]


def adjoint(x):
    x = jnp.swapaxes(x, -1, -2)
    return jnp.conj(x) if jnp.iscomplexobj(x) else x


def info(ok):
    """LAPACK's `info`: 0 on success, a positive code otherwise."""
    return lax.select(ok, jnp.zeros(ok.shape, np.int32), jnp.ones(ok.shape, np.int32))


def all_finite(x, batch_rank):
    finite = jnp.isfinite(x)
    axes = tuple(range(batch_rank, x.ndim))
    return jnp.all(finite, axis=axes) if axes else finite


def uplo_lower(cfg: dict) -> bool:
    """Whether a typed backend_config (`lower` or LAPACK's `uplo`) names the lower triangle."""
    if "lower" in cfg:
        return bool(cfg["lower"])
    uplo = cfg.get("uplo", _LOWER)
    if uplo not in (_LOWER, _UPPER):
        raise Unsupported(f"uplo={uplo!r}")
    return uplo == _LOWER


def zeros_unless(x, shape, dtype):
    """`x` where it was computed with the slot's shape, else the zeros a kernel leaves in a
    slot it did not write."""
    if x is not None and tuple(x.shape) == tuple(shape):
        return x
    return jnp.zeros(shape, dtype)


# ---------------------------------------------------------------- factorizations

def getrf(a):
    """(LU, 1-based int32 pivots, info)."""
    lu, pivots, _ = L.lu(a)
    k = min(a.shape[-2], a.shape[-1])
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)[..., :k]
    zero = diag == 0
    # info = i (1-based) for the first exactly-zero U(i, i), as LAPACK reports it.
    # lax.argmax, not jnp.argmax: jnp's is a jitted function whose index type follows the
    # x64 flag at its own trace, which need not be the program's.
    first = lax.argmax(zero, zero.ndim - 1, np.int32) + 1
    found = jnp.where(jnp.any(zero, axis=-1), first, 0).astype(np.int32)
    return lu, (pivots + 1).astype(np.int32), found


def geqrf(a):
    """(A with R and the reflectors below it, tau), differentiable (ops/_householder.py)."""
    return _householder.geqrf(a)


def householder_product(a, taus):
    """Q of orgqr / ungqr from the reflectors and taus, differentiable."""
    return _householder.householder_product(a, taus)


def potrf(lower: bool, a):
    """(the Cholesky factor in the named triangle, info)."""
    # Only the named triangle is read; the upper factor is the adjoint of the
    # lower factor of the adjoint.
    chol = L.cholesky(a if lower else adjoint(a), symmetrize_input=False)
    ok = all_finite(chol, a.ndim - 2)
    return (chol if lower else adjoint(chol)), info(ok)


def syevd(lower: bool, a):
    """(eigenvectors, ascending eigenvalues, info)."""
    v, w = L.eigh(a, lower=lower, symmetrize_input=False, sort_eigenvalues=True)
    return v, w, info(all_finite(w, a.ndim - 2))


def svd(a, compute_uv: bool, full: bool):
    """(s, U, V^H); U and V^H are None when not computed."""
    if not compute_uv:
        s = L.svd(a, full_matrices=False, compute_uv=False)
        return s, None, None
    u, s, vh = L.svd(a, full_matrices=full, compute_uv=True)
    return s, u, vh


def svd_results(a, s, first, second, slots):
    """(A, s, first, second, info) as a kernel returns them: `slots` are the (shape, dtype)
    of the vector results; a set not computed (or of another shape) is zeros."""
    vectors = [zeros_unless(m, shape, dtype) for m, (shape, dtype) in zip((first, second), slots)]
    return (a, s, *vectors, info(all_finite(s, a.ndim - 2)))


def geev(a, left: bool, right: bool):
    """(eigenvalues, left eigenvectors, right eigenvectors, info); a set not asked for is
    zeros (the kernel leaves it unwritten)."""
    w, vl, vr = L.eig(a, compute_left_eigenvectors=True, compute_right_eigenvectors=True)
    ok = info(all_finite(w, a.ndim - 2))
    return w, vl if left else jnp.zeros_like(vl), vr if right else jnp.zeros_like(vr), ok


def gees(a, vectors: bool):
    """(T, Schur vectors, sdim, info); unsorted, so sdim is 0."""
    t, vs = L.schur(a, compute_schur_vectors=True)
    if not vectors:
        vs = jnp.zeros_like(vs)
    batch = batch_shape(a)
    return t, vs, jnp.zeros(batch, np.int32), info(all_finite(t, len(batch)))


def quasi_triangular_eigenvalues(t):
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


def sytrd(lower: bool, a):
    """(A with the reflectors, d, e, tau, info), LAPACK's layout."""
    out, d, e, taus = L.tridiagonal(a, lower=lower)
    return out, d, e, taus, jnp.zeros(batch_shape(a), np.int32)


# ---------------------------------------------------------------- updates and solves

def cholesky_update(r, w):
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


def csr_solve(data, indices, indptr, b):
    """A x = b, A square in CSR form (cuSOLVER's csrlsvqr).

    Solved densely (duplicate entries add up, as in CSR); the kernel's `reorder` only
    changes its fill-in and `tol` its singularity test.
    """
    n = b.shape[0]
    entries = lax.iota(np.int32, data.shape[0])
    rows = jnp.searchsorted(indptr.astype(np.int32), entries, side="right") - 1
    dense = jnp.zeros((n, n), data.dtype).at[rows, indices].add(data)
    return jnp.linalg.solve(dense, b)
