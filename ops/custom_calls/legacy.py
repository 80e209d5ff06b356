"""Custom-call targets of older jax/jaxlib releases: the pre-FFI CPU LAPACK forms not in
ops/custom_calls/linalg.py (geev, gees, gehrd, sytrd/hetrd), markers and aliases, and the
cuDNN fused-attention calls reported at load.

The GPU kernels with opaque descriptors are in legacy_gpu.py, the sparse ones in
legacy_sparse.py, DUCC FFTs in legacy_fft.py and the cuDNN RNN in legacy_rnn.py (all in
ops/custom_calls/); what they share (descriptor reading, the operand-count check) is
ops/custom_calls/_descriptors.py, the linear algebra ops/_linalg.py. Every target carries a
`TargetInfo` (forms, the jax versions that emitted it, dtypes, the tests covering it), from
which `python -m shlo2jax.tools.custom_call_table` prints the README's table.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
from jax.lax import linalg as L

from shlo2jax.ops import _linalg as K
from shlo2jax.ops._common import backend_config
from shlo2jax.ops.custom_calls._descriptors import Outputs, kernel_prepare, known_int, target_of
from shlo2jax.registry import TargetInfo, Unsupported, register_custom_call


# ---------------------------------------------------------------- pre-FFI LAPACK
# jaxlib/lapack.py of jax 0.4.1 (jaxlib-v0.4.1, b8ae8e3fa1) .. 0.4.38 emitted
# `lapack_?geev`, `lapack_?gees`, `lapack_?gehrd`, `lapack_?sytrd` with
# api_version 2: sizes and flags are leading scalar operands and the kernel
# (jaxlib/cpu/lapack_kernels.cc) writes workspaces as extra results.

_LAPACK_DTYPES = "f32, f64, c64, c128"


@dataclasses.dataclass(frozen=True)
class LapackOutputs:
    out: Outputs
    complex_input: bool


def _prepare_lapack(op):
    out = Outputs.of(op)
    if isinstance(op.attrs.get("mhlo.backend_config"), dict):
        raise Unsupported(f"custom_call @{target_of(op)} with a typed backend_config: "
                          "jaxlib's kernel of that name takes scalar operands")
    name = target_of(op)
    return LapackOutputs(out, name.startswith(("lapack_c", "lapack_z")))


_T_LEGACY = "tests/ops/custom_calls/test_legacy.py::"


def _lapack_info(kernel, jax, test):
    return TargetInfo(kernel, forms=("operands",), jax=jax, dtypes=_LAPACK_DTYPES,
                      test=(_T_LEGACY + test,))


@register_custom_call(
    "lapack_sgeev", "lapack_dgeev", "lapack_cgeev", "lapack_zgeev",
    prepare=kernel_prepare(_prepare_lapack, operands=5),
    info=_lapack_info("LAPACK geev (eig), pre-FFI",
                      "0.4.1 .. 0.4.31; exports until 0.5.0 (FFI since 3c6103f2df)",
                      "test_lapack_geev"))
def lapack_geev(ctx, op, b, n, jobvl, jobvr, a, *result_shapes):
    """Results: workspaces (real: three n x n; complex: n x n and rwork[2n]), the
    eigenvalues (real: wr, wi; complex: w), vl, vr (complex, LAPACK's pairs
    unpacked as conj pairs), info. An eigenvector set not asked for is left
    unwritten by the kernel: zeros here."""
    w, vl, vr, info = K.geev(a, left=known_int(jobvl, "jobvl") == ord("V"),
                             right=known_int(jobvr, "jobvr") == ord("V"))
    out = op.params.out
    if op.params.complex_input:
        return out.pack([out.zeros(0), out.zeros(1), w, vl, vr, info])
    real = a.dtype
    return out.pack([out.zeros(0), out.zeros(1), out.zeros(2), jnp.real(w).astype(real),
                     jnp.imag(w).astype(real), vl, vr, info])


@register_custom_call(
    "lapack_sgees", "lapack_dgees", "lapack_cgees", "lapack_zgees",
    prepare=kernel_prepare(_prepare_lapack, operands=5),
    info=_lapack_info("LAPACK gees (Schur), pre-FFI",
                      "0.4.1 .. 0.4.37; exports until 0.5.0 (FFI since 9081e85d68)",
                      "test_lapack_gees"))
def lapack_gees(ctx, op, b, n, jobvs, sort, a, *result_shapes):
    """Results: real (T, wr, wi, vs, sdim, info); complex (T, rwork[n], w, vs,
    sdim, info). T overwrites the input."""
    if known_int(sort, "sort") != ord("N"):
        raise ValueError("gees with eigenvalue sorting: jaxlib's kernel has no select "
                         "function to sort by")
    t, vs, sdim, info = K.gees(a, vectors=known_int(jobvs, "jobvs") == ord("V"))
    out = op.params.out
    if op.params.complex_input:
        return out.pack([t, out.zeros(1), jnp.diagonal(t, axis1=-2, axis2=-1), vs, sdim, info])
    wr, wi = K.quasi_triangular_eigenvalues(t)
    return out.pack([t, wr, wi, vs, sdim, info])


@register_custom_call(
    "lapack_sgehrd", "lapack_dgehrd", "lapack_cgehrd", "lapack_zgehrd",
    prepare=kernel_prepare(_prepare_lapack, operands=7),
    info=_lapack_info("LAPACK gehrd (Hessenberg), pre-FFI",
                      "0.4.1 .. 0.4.33; exports until 0.5.0 (FFI since 6e9a53690c)",
                      "test_lapack_gehrd"))
def lapack_gehrd(ctx, op, n, ilo, ihi, lda, b, lwork, a, *result_shapes):
    """Results: (H with the reflectors below the subdiagonal, tau, info, work)."""
    size = a.shape[-1]
    lo, hi = known_int(ilo, "ilo"), known_int(ihi, "ihi")
    if (lo, hi) != (1, size):
        raise ValueError(f"gehrd with ilo={lo}, ihi={hi}: only the full range 1..{size}")
    h, taus = L.hessenberg(a)
    return op.params.out.pack([h, taus, jnp.zeros(a.shape[:-2], np.int32)])


@register_custom_call(
    "lapack_ssytrd", "lapack_dsytrd", "lapack_chetrd", "lapack_zhetrd",
    prepare=kernel_prepare(_prepare_lapack, operands=6),
    info=_lapack_info("LAPACK sytrd/hetrd (tridiagonal), pre-FFI",
                      "0.4.1 .. 0.4.37; exports until 0.5.0 (FFI since d474feda9e)",
                      "test_lapack_sytrd"))
def lapack_sytrd(ctx, op, n, lower, lda, b, lwork, a, *result_shapes):
    """Results: (A with the reflectors, d, e, tau, info, work)."""
    return op.params.out.pack(K.sytrd(bool(known_int(lower, "lower")), a))


# ---------------------------------------------------------------- markers and aliases

def _prepare_layout_constraint(op):
    if len(op.result_types) != 1:
        raise Unsupported(f"custom_call @{target_of(op)} with {len(op.result_types)} results")
    return None


@register_custom_call("LayoutConstraint",
                      prepare=kernel_prepare(_prepare_layout_constraint, operands=1),
                      info=TargetInfo("Layout constraint marker (identity)",
                                      forms=("attributes",), jax="0.4.31 ..", dtypes="any",
                                      test=(_T_LEGACY + "test_layout_constraint",)))
def layout_constraint(ctx, op, x, *result_shapes):
    """`jax.experimental.layout.with_layout_constraint`: the layout (and tiling) only
    constrain physical storage."""
    return x


def _prepare_oneapi_potrf(op):
    return K.uplo_lower(backend_config(op))


@register_custom_call("oneapisolver_potrf_ffi",
                      prepare=kernel_prepare(_prepare_oneapi_potrf, operands=1),
                      info=TargetInfo("oneAPI (Intel GPU) potrf (Cholesky)", forms=("FFI",),
                                      jax="main branch after 0.11.0 (platform `oneapi`)",
                                      dtypes=_LAPACK_DTYPES, test=(_T_LEGACY + "test_oneapi_potrf",)))
def oneapi_potrf(ctx, op, a, *result_shapes):
    return K.potrf(op.params, a)


# ---------------------------------------------------------------- reported at load
# jax.nn.dot_product_attention(implementation="cudnn") lowers to XLA's cuDNN
# fused-attention calls (jax/_src/cudnn/fused_attention_stablehlo.py, jax 0.4.25 ..),
# configured by a JSON backend_config (layouts as dot dimension numbers, mask type,
# sliding window, segment offsets, paged KV cache, dropout seed). Not translated.

def _refuse_cudnn_attention(op):
    raise Unsupported(f"custom_call @{target_of(op)} is cuDNN fused attention, which runs only "
                      "on a CUDA GPU with cuDNN; it has no translation here (export with "
                      "jax.nn.dot_product_attention(implementation='xla') for a portable program)")


@register_custom_call(
        "__cudnn$fmhaSoftmax", "__cudnn$fmhaSoftmaxBackward", "__cudnn$fmhaSoftmaxDropout",
        "__cudnn$fmhaSoftmaxDropoutBackward", "__cudnn$fmhaScaleBiasSoftmax",
        "__cudnn$fmhaScaleBiasSoftmaxBackward", "__cudnn$fmhaScaleBiasSoftmaxDropout",
        "__cudnn$fmhaScaleBiasSoftmaxDropoutBackward", "__cudnn$fmhaScaleMaskSoftmax",
        "__cudnn$fmhaScaleMaskSoftmaxBackward", "__cudnn$fmhaScaleMaskSoftmaxDropout",
        "__cudnn$fmhaScaleMaskSoftmaxDropoutBackward", "__cudnn$fmhaScaleBiasMaskSoftmax",
        "__cudnn$fmhaScaleBiasMaskSoftmaxBackward", "__cudnn$fmhaScaleBiasMaskSoftmaxDropout",
        "__cudnn$fmhaScaleBiasMaskSoftmaxDropoutBackward", "__cudnn$fmhaSoftmaxF8",
        "__cudnn$fmhaSoftmaxBackwardF8",
        prepare=_refuse_cudnn_attention,
        info=TargetInfo("cuDNN fused attention (jax.nn.dot_product_attention, cudnn)",
                        forms=("attributes",),
                        jax="0.4.25 .. (Mask variants 0.4.25 .. 0.4.28; F8 0.4.38 ..)",
                        dtypes="reported at load (needs a CUDA GPU with cuDNN)",
                        test=(_T_LEGACY + "test_cudnn_fused_attention_is_reported",)))
def cudnn_attention(ctx, op, *operands):  # never traced: the prepare refuses the op at load
    raise AssertionError(f"{op.name} was not refused at load time")
