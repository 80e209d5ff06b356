"""QR factorisation in LAPACK's Householder form (xGEQRF, xORGQR), with derivatives.

jax's `geqrf` and `householder_product` primitives compute what LAPACK, cuSOLVER and the TPU
compute, but have no derivative rules: jax differentiates `qr` as a whole, from Q and R. An
exported QR is the two kernels apart (the packed reflectors are an intermediate value), so each
needs a derivative of its own. Here each runs the primitive for its values, and its JVP is that
of the same factorisation written in lax ops, column by column as LAPACK defines it (xGEQR2 with
xLARFG and xLARF; xORG2R): the packed output and its taus are a smooth function of the input
wherever a column below the diagonal is nonzero, so that derivative is the exact one.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from shlo2jax.compat import lax_geqrf


def _rows(m):
    return lax.broadcasted_iota(jnp.int32, (m,), 0)


def householder_qr(a):
    """(packed, taus) of LAPACK's geqrf, in differentiable lax ops. a: [..., m, n].

    Column j: alpha = a[j, j], x = a[j+1:, j]; beta = -sign(Re alpha) |(alpha, x)|,
    tau = (beta - alpha) / beta, v = [1, x / (alpha - beta)]; the columns right of j get
    H^H = I - conj(tau) v v^H from the left. A column already zero below the diagonal with a
    real diagonal gets tau = 0 (xLARFG's H = I).
    """
    m, n = a.shape[-2:]
    k = min(m, n)
    dtype = a.dtype
    rows, cols = _rows(m), _rows(n)
    taus = jnp.zeros(a.shape[:-2] + (k,), dtype)

    def column(j, state):
        a, taus = state
        col = lax.dynamic_index_in_dim(a, j, axis=-1, keepdims=False)
        alpha = lax.dynamic_index_in_dim(col, j, axis=-1, keepdims=False)
        below = rows > j
        x = jnp.where(below, col, 0)
        squares = jnp.sum(jnp.real(x * jnp.conj(x)), axis=-1)
        alpha_re, alpha_im = jnp.real(alpha), jnp.imag(alpha)
        identity = (squares == 0) & (alpha_im == 0)
        # sqrt's derivative is infinite at 0: keep the H = I columns away from it
        norm = jnp.sqrt(jnp.where(identity, 1, alpha_re ** 2 + alpha_im ** 2 + squares))
        beta = jnp.where(identity, 1, jnp.where(jnp.signbit(alpha_re), norm, -norm))
        if jnp.iscomplexobj(a):
            tau = lax.complex((beta - alpha_re) / beta, -alpha_im / beta)
        else:
            tau = (beta - alpha_re) / beta
        tau = jnp.where(identity, 0, tau).astype(dtype)
        beta = beta.astype(dtype)
        v_tail = x / jnp.where(identity, 1, alpha - beta)[..., None]
        v = jnp.where(rows == j, jnp.ones((), dtype), v_tail)
        w = jnp.einsum("...m,...mn->...n", jnp.conj(v), a)
        update = jnp.conj(tau)[..., None, None] * v[..., :, None] * w[..., None, :]
        a = a - jnp.where(cols > j, update, 0)
        diagonal = jnp.where(identity, alpha, beta)[..., None]
        packed = jnp.where(rows == j, diagonal, jnp.where(below, v_tail, col))
        a = lax.dynamic_update_index_in_dim(a, packed[..., :, None], j, axis=-1)
        taus = lax.dynamic_update_index_in_dim(taus, tau[..., None], j, axis=-1)
        return a, taus

    return lax.fori_loop(0, k, column, (a, taus))


def householder_product_in_lax(a, taus):
    """LAPACK's orgqr in differentiable lax ops: the first n columns of H_0 ... H_{k-1},
    H_i = I - tau_i v_i v_i^H, v_i the i-th column of `a` below the diagonal with a 1 on it."""
    m, n = a.shape[-2:]
    k = taus.shape[-1]
    rows = _rows(m)
    q = jnp.broadcast_to(jnp.eye(m, n, dtype=a.dtype), a.shape)

    def reflect(t, q):
        i = k - 1 - t
        col = lax.dynamic_index_in_dim(a, i, axis=-1, keepdims=False)
        v = jnp.where(rows == i, jnp.ones((), a.dtype), jnp.where(rows > i, col, 0))
        tau = lax.dynamic_index_in_dim(taus, i, axis=-1, keepdims=False)
        w = jnp.einsum("...m,...mn->...n", jnp.conj(v), q)
        return q - tau[..., None, None] * v[..., :, None] * w[..., None, :]

    return lax.fori_loop(0, k, reflect, q)


@jax.custom_jvp
def geqrf(a):
    """LAPACK's geqrf: (packed reflectors and R, taus), differentiable."""
    return tuple(lax_geqrf(a))


@geqrf.defjvp
def _geqrf_jvp(primals, tangents):
    return geqrf(*primals), jax.jvp(householder_qr, primals, tangents)[1]


@jax.custom_jvp
def householder_product(a, taus):
    """LAPACK's orgqr / ungqr: Q from the reflectors, differentiable."""
    return jax.lax.linalg.householder_product(a, taus)


@householder_product.defjvp
def _householder_product_jvp(primals, tangents):
    return householder_product(*primals), jax.jvp(householder_product_in_lax, primals,
                                                  tangents)[1]
