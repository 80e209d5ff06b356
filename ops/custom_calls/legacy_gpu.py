"""Pre-FFI GPU kernels of jaxlib: cuSOLVER/cuBLAS and hipSOLVER/hipBLAS with
opaque descriptors, threefry, Cholesky update, gtsv2.

jaxlib's Python wrappers (jaxlib/gpu_solver.py, gpu_prng.py, gpu_linalg.py,
gpu_sparse.py) packed each kernel's C struct with `PackDescriptor` (the bytes
of the struct, jaxlib/kernel_helpers.h) into `backend_config`, and the kernel
refused any other length (`UnpackDescriptor`). The structs below are those of
jaxlib/gpu/solver_kernels.h, blas_kernels.h, prng_kernels.h,
cholesky_update_kernel.h and sparse_kernels.h, unchanged from jaxlib 0.4.1
(c4d590b1b6) until each kernel was ported to the FFI; x86-64 layout: enums and
ints are 4 bytes, padding written out as `x`.

CUDA and ROCm builds share the structs; their enum values differ (cuBLAS fill
mode lower=0/upper=1, hipSOLVER 122/121; cuSOLVER eig mode 0/1, hipSOLVER
201/202). Every kernel works on column-major matrices (the layouts jax
declared), so the logical tensors are the usual ones, except where noted.
"""

from __future__ import annotations

import dataclasses
import jax.numpy as jnp
import numpy as np
from jax.extend.random import threefry2x32_p
from jax.lax import linalg as L

from shlo2jax.ops import _linalg as K
from shlo2jax.ops.custom_calls._descriptors import (Outputs, Struct, check_dtype, descriptor_bytes,
                                                    enum_member, kernel_prepare, target_of, unpack)
from shlo2jax.registry import TargetInfo, Unsupported, register_custom_call

# enum class SolverType / BlasType {F32, F64, C64, C128} (solver_kernels.h, blas_kernels.h)
_SOLVER_TYPES = {0: np.float32, 1: np.float64, 2: np.complex64, 3: np.complex128}
_SOLVER_DTYPES = "f32, f64, c64, c128"
_DESCRIPTOR = "descriptor"

_H = "jaxlib/gpu/solver_kernels.h @ c4d590b1b6 (jaxlib 0.4.1) .. affba367c5 (0.4.34)"
_BLAS_H = "jaxlib/gpu/blas_kernels.h @ c4d590b1b6 (jaxlib 0.4.1) .. affba367c5 (0.4.34)"

# struct GetrfDescriptor { SolverType type; int batch, m, n, lwork; };
GETRF = Struct("GetrfDescriptor", "<5i", ("type", "batch", "m", "n", "lwork"), _H)
# struct GeqrfDescriptor { SolverType type; int batch, m, n, lwork; };
GEQRF = Struct("GeqrfDescriptor", "<5i", ("type", "batch", "m", "n", "lwork"), _H)
# struct OrgqrDescriptor { SolverType type; int batch, m, n, k, lwork; };
ORGQR = Struct("OrgqrDescriptor", "<6i", ("type", "batch", "m", "n", "k", "lwork"), _H)
# struct SyevdDescriptor { SolverType type; gpusolverFillMode_t uplo; int batch, n; int lwork; };
# (batch = -1 from a2ac510dc3 on: the batch size is an extra operand)
SYEVD = Struct("SyevdDescriptor", "<5i", ("type", "uplo", "batch", "n", "lwork"), _H)
# struct SyevjDescriptor { SolverType type; gpusolverFillMode_t uplo; int batch, n; int lwork; };
SYEVJ = Struct("SyevjDescriptor", "<5i", ("type", "uplo", "batch", "n", "lwork"), _H)
# struct GesvdDescriptor { SolverType type; int batch, m, n; int lwork; signed char jobu, jobvt; };
GESVD = Struct("GesvdDescriptor", "<5i2b2x", ("type", "batch", "m", "n", "lwork", "jobu", "jobvt"),
               _H)
# struct GesvdjDescriptor { SolverType type; int batch, m, n; int lwork;
#                           gpusolverEigMode_t jobz; int econ; };
GESVDJ = Struct("GesvdjDescriptor", "<7i", ("type", "batch", "m", "n", "lwork", "jobz", "econ"),
                _H)
# struct SytrdDescriptor { SolverType type; gpusolverFillMode_t uplo; int batch, n, lda, lwork; };
SYTRD = Struct("SytrdDescriptor", "<6i", ("type", "uplo", "batch", "n", "lda", "lwork"), _H)
# struct CsrlsvqrDescriptor { SolverType type; int n, nnz, reorder; double tol; };
CSRLSVQR = Struct("CsrlsvqrDescriptor", "<4id", ("type", "n", "nnz", "reorder", "tol"), _H)
# struct GetrfBatchedDescriptor { BlasType type; int batch, n; };
GETRF_BATCHED = Struct("GetrfBatchedDescriptor", "<3i", ("type", "batch", "n"), _BLAS_H)
# struct GeqrfBatchedDescriptor { BlasType type; int batch, m, n; };
GEQRF_BATCHED = Struct("GeqrfBatchedDescriptor", "<4i", ("type", "batch", "m", "n"), _BLAS_H)

_CUDA_FILL = {0: True, 1: False}          # cublasFillMode_t: LOWER=0, UPPER=1 -> lower?
_HIP_FILL = {122: True, 121: False}       # hipsolverFillMode_t: LOWER=122, UPPER=121
_CUDA_EIG_MODE = {0: False, 1: True}      # cusolverEigMode_t: NOVECTOR=0, VECTOR=1
_HIP_EIG_MODE = {201: False, 202: True}   # hipsolverEigMode_t: NOVECTOR=201, VECTOR=202


def _is_hip(op) -> bool:
    return target_of(op).startswith("hip")


def _lower(op, code) -> bool:
    return enum_member(op, "fill mode (uplo)", code, _HIP_FILL if _is_hip(op) else _CUDA_FILL)


def _solver_type(op, fields, array_dtype):
    dtype = enum_member(op, "element type", fields["type"], _SOLVER_TYPES)
    check_dtype(op, dtype, array_dtype)
    return dtype


def _check_batch(op, fields, shape, allow_dynamic=False):
    batch = int(np.prod(shape[:-2], dtype=np.int64))
    if fields["batch"] != batch and not (allow_dynamic and fields["batch"] == -1):
        raise Unsupported(f"custom_call @{target_of(op)}: descriptor batch {fields['batch']} "
                          f"does not match the array's batch {batch}")


@dataclasses.dataclass(frozen=True)
class SolverCall:
    """A decoded solver descriptor: the flags the kernel reads, and its result types."""
    out: Outputs
    has_info: bool = True  # cuBLAS's batched geqrf has no info result
    lower: bool = True
    compute_uv: bool = True
    full_matrices: bool = True
    econ: bool = False
    transposed: bool = False


def _decode(op, layout: Struct, **checks):
    _, fields = unpack(op, layout)
    out = Outputs.of(op)
    shape, dtype = out.types[0]
    _solver_type(op, fields, dtype)
    _check_batch(op, fields, shape, allow_dynamic=checks.get("dynamic_batch", False))
    return fields, out


# ---------------------------------------------------------------- LU

def _prepare_getrf(op):
    batched = "blas" in target_of(op)  # cuBLAS's batched kernel: square matrices only
    fields, out = _decode(op, GETRF_BATCHED if batched else GETRF)
    m, n = out.types[0][0][-2:]
    sizes = (fields["n"], fields["n"]) if batched else (fields["m"], fields["n"])
    if sizes != (m, n):
        raise Unsupported(f"custom_call @{target_of(op)}: descriptor sizes {sizes[0]}x{sizes[1]} "
                          f"but the matrix is {m}x{n}")
    return SolverCall(out)


def _tests(names) -> tuple:
    """Test references: a bare name is a test of tests/ops/custom_calls/test_legacy_gpu.py."""
    return tuple(n if "::" in n else f"tests/ops/custom_calls/test_legacy_gpu.py::{n}" for n in names)


def _solver_info(kernel, jax, *tests):
    return TargetInfo(kernel, forms=(_DESCRIPTOR,), jax=jax, dtypes=_SOLVER_DTYPES,
                      test=_tests(tests))


@register_custom_call(
    "cusolver_getrf", "hipsolver_getrf", "cublas_getrf_batched", "hipblas_getrf_batched",
    prepare=kernel_prepare(_prepare_getrf, operands=1),
    info=_solver_info("cuSOLVER/hipSOLVER getrf, cuBLAS/hipBLAS getrf_batched (LU), pre-FFI",
                      "0.4.1 .. 0.4.34 (`*_ffi` from 0.4.32, e51848ea3d)", "test_gpu_getrf"))
def getrf(ctx, op, a, *result_shapes):
    """(LU, 1-based int32 pivots, info, workspace): as LAPACK's getrf."""
    return op.params.out.pack(K.getrf(a))


# ---------------------------------------------------------------- QR

def _prepare_geqrf(op):
    layout = GEQRF_BATCHED if "blas" in target_of(op) else GEQRF
    fields, out = _decode(op, layout)
    if (fields["m"], fields["n"]) != tuple(out.types[0][0][-2:]):
        raise Unsupported(f"custom_call @{target_of(op)}: descriptor sizes "
                          f"{fields['m']}x{fields['n']} do not match the matrix")
    return SolverCall(out, has_info="blas" not in target_of(op))


@register_custom_call(
    "cusolver_geqrf", "hipsolver_geqrf", "cublas_geqrf_batched", "hipblas_geqrf_batched",
    prepare=kernel_prepare(_prepare_geqrf, operands=1),
    info=_solver_info("cuSOLVER/hipSOLVER geqrf, cuBLAS/hipBLAS geqrf_batched (QR), pre-FFI",
                      "0.4.1 .. 0.4.34 (`*_ffi` from 0.4.35, c0240764bc)", "test_gpu_geqrf_orgqr"))
def geqrf(ctx, op, a, *result_shapes):
    """cuSOLVER: (A with R and the reflectors, tau, info, workspace); cuBLAS batched:
    (A, tau, two byte workspaces) -- no info."""
    a_out, taus = K.geqrf(a)
    if op.params.has_info:
        return op.params.out.pack([a_out, taus, jnp.zeros(a.shape[:-2], np.int32)])
    return op.params.out.pack([a_out, taus])


def _prepare_orgqr(op):
    fields, out = _decode(op, ORGQR)
    if (fields["m"], fields["n"]) != tuple(out.types[0][0][-2:]):
        raise Unsupported(f"custom_call @{target_of(op)}: descriptor sizes do not match the matrix")
    return SolverCall(out)


@register_custom_call(
    "cusolver_orgqr", "hipsolver_orgqr",
    prepare=kernel_prepare(_prepare_orgqr, operands=2),
    info=_solver_info("cuSOLVER/hipSOLVER orgqr/ungqr (Householder product), pre-FFI",
                      "0.4.1 .. 0.4.34 (`*_ffi` from 0.4.35, c0240764bc)", "test_gpu_geqrf_orgqr"))
def orgqr(ctx, op, a, taus, *result_shapes):
    """(Q, info, workspace)."""
    q = K.householder_product(a, taus)
    return op.params.out.pack([q, jnp.zeros(a.shape[:-2], np.int32)])


# ---------------------------------------------------------------- eigh

def _prepare_syev(op):
    layout = SYEVJ if target_of(op).endswith("syevj") else SYEVD
    fields, out = _decode(op, layout, dynamic_batch=layout is SYEVD)
    if fields["n"] != out.types[0][0][-1]:
        raise Unsupported(f"custom_call @{target_of(op)}: descriptor n={fields['n']} does not "
                          "match the matrix")
    return SolverCall(out, lower=_lower(op, fields["uplo"]))


@register_custom_call(
    "cusolver_syevd", "hipsolver_syevd", "cusolver_syevj", "hipsolver_syevj",
    prepare=kernel_prepare(_prepare_syev, operands=(1, 2)),
    info=_solver_info("cuSOLVER/hipSOLVER syevd, syevj (eigh), pre-FFI",
                      "0.4.1 .. 0.4.34 (`*_ffi` from 0.4.35, 67f24df740)", "test_gpu_syev",
                      "test_gpu_syevd_dynamic_batch_operand",
                      "tests/test_back_compat.py::test_back_compat"))
def syev(ctx, op, a, *batch_size_and_result_shapes):
    """(eigenvectors overwriting A, ascending eigenvalues, info, workspace). A batch
    size operand (descriptor batch -1, dynamic shapes) is not needed here."""
    return op.params.out.pack(K.syevd(op.params.lower, a))


# ---------------------------------------------------------------- SVD

_JOB = {ord("A"): "all", ord("S"): "some", ord("N"): "none"}


def _prepare_gesvd(op):
    fields, out = _decode(op, GESVD)
    rows, cols = out.types[0][0][-2:]
    jobu = enum_member(op, "jobu", fields["jobu"] & 0xFF, _JOB)
    jobvt = enum_member(op, "jobvt", fields["jobvt"] & 0xFF, _JOB)
    if jobu != jobvt:
        raise Unsupported(f"custom_call @{target_of(op)}: jobu={jobu}, jobvt={jobvt} (jaxlib "
                          "always asked for both alike)")
    # cuSOLVER's gesvd wants m >= n: jax handed a wide matrix over as its transpose
    # (row-major layout), so the descriptor holds (n, m) and the kernel's "U" slot is
    # V^T of the matrix, its "VT" slot U.
    if (fields["m"], fields["n"]) == (rows, cols):
        transposed = False
    elif (fields["m"], fields["n"]) == (cols, rows):
        transposed = True
    else:
        raise Unsupported(f"custom_call @{target_of(op)}: descriptor sizes "
                          f"{fields['m']}x{fields['n']} do not match the {rows}x{cols} matrix")
    return SolverCall(out, compute_uv=jobu != "none", full_matrices=jobu == "all",
                      transposed=transposed and rows != cols)


def _svd_slots(out: Outputs, a, s, first, second):
    """(A, s, first, second, info, workspace); a vector set not computed is zeros."""
    return out.pack(K.svd_results(a, s, first, second, out.types[2:4]))


@register_custom_call(
    "cusolver_gesvd", "hipsolver_gesvd",
    prepare=kernel_prepare(_prepare_gesvd, operands=1),
    info=_solver_info("cuSOLVER/hipSOLVER gesvd (SVD), pre-FFI",
                      "0.4.1 .. 0.4.34 (`*_ffi` from 0.4.35, 8361eb58e1)", "test_gpu_gesvd"))
def gesvd(ctx, op, a, *result_shapes):
    p = op.params
    s, u, vh = K.svd(a, p.compute_uv, p.full_matrices)
    if p.transposed:
        return _svd_slots(p.out, a, s, vh, u)
    return _svd_slots(p.out, a, s, u, vh)


def _prepare_gesvdj(op):
    fields, out = _decode(op, GESVDJ)
    rows, cols = out.types[0][0][-2:]
    if (fields["m"], fields["n"]) != (rows, cols):
        raise Unsupported(f"custom_call @{target_of(op)}: descriptor sizes do not match the matrix")
    vectors = enum_member(op, "jobz (eig mode)", fields["jobz"],
                         _HIP_EIG_MODE if _is_hip(op) else _CUDA_EIG_MODE)
    if fields["econ"] not in (0, 1):
        raise Unsupported(f"custom_call @{target_of(op)}: econ={fields['econ']}")
    return SolverCall(out, compute_uv=vectors, econ=bool(fields["econ"]))


@register_custom_call(
    "cusolver_gesvdj",
    prepare=kernel_prepare(_prepare_gesvdj, operands=1),
    info=_solver_info("cuSOLVER gesvdj (SVD, Jacobi), pre-FFI",
                      "0.4.1 .. 0.4.34 (`*_ffi` from 0.4.35, 8361eb58e1)", "test_gpu_gesvdj"))
def gesvdj(ctx, op, a, *result_shapes):
    """(A, s, U, V, info, workspace): V, not V^H; economy U (m, k) and V (n, k) with
    econ, else full square ones (the batched kernel has no economy mode)."""
    s, u, vh = K.svd(a, op.params.compute_uv, not op.params.econ)
    v = None if vh is None else K.adjoint(vh)
    return _svd_slots(op.params.out, a, s, u, v)


# ---------------------------------------------------------------- tridiagonal reduction

def _prepare_sytrd(op):
    fields, out = _decode(op, SYTRD)
    if fields["n"] != out.types[0][0][-1]:
        raise Unsupported(f"custom_call @{target_of(op)}: descriptor n does not match the matrix")
    return SolverCall(out, lower=_lower(op, fields["uplo"]))


@register_custom_call(
    "cusolver_sytrd", "hipsolver_sytrd",
    prepare=kernel_prepare(_prepare_sytrd, operands=1),
    info=_solver_info("cuSOLVER/hipSOLVER sytrd/hetrd (tridiagonal), pre-FFI",
                      "0.4.1 .. 0.4.38 (`*_ffi` from 0.5.0, 32df37e6e4)", "test_gpu_sytrd"))
def sytrd(ctx, op, a, *result_shapes):
    """(A with the reflectors, d, e, tau, info, workspace), LAPACK's layout.

    cuSOLVER wrote a wrong 1 at A[0, 1] for uplo=upper (NVIDIA bug 3865118); jax
    patched it from e[0] in the program after the call, so the correct value here
    leaves the program's result unchanged."""
    return op.params.out.pack(K.sytrd(op.params.lower, a))


# ---------------------------------------------------------------- sparse QR solve

@dataclasses.dataclass(frozen=True)
class CsrlsvqrCall:
    n: int
    nnz: int


def _prepare_csrlsvqr(op):
    _, fields = unpack(op, CSRLSVQR)
    out = Outputs.of(op)
    _solver_type(op, fields, out.types[0][1])
    if fields["n"] != out.types[0][0][0]:
        raise Unsupported(f"custom_call @{target_of(op)}: descriptor n={fields['n']} does not "
                          "match b")
    if fields["reorder"] not in (0, 1, 2, 3):
        raise Unsupported(f"custom_call @{target_of(op)}: reorder={fields['reorder']}")
    return CsrlsvqrCall(fields["n"], fields["nnz"])


@register_custom_call(
    "cusolver_csrlsvqr",
    prepare=kernel_prepare(_prepare_csrlsvqr, operands=4),
    info=_solver_info("cuSOLVER csrlsvqr (sparse solve), pre-FFI",
                      "0.4.1 .. 0.5.0 (`*_ffi` from 0.5.1)", "test_gpu_csrlsvqr"))
def csrlsvqr(ctx, op, data, indptr, indices, b, *result_shapes):
    """The pre-FFI kernel takes (data, indptr, indices, b): indptr before indices."""
    return K.csr_solve(data, indices, indptr, b)


# ---------------------------------------------------------------- threefry
# struct ThreeFry2x32Descriptor { std::int64_t n; };  jaxlib/gpu/prng_kernels.h @ c4d590b1b6.
# From 7d452adfd3 (jaxlib 0.4.2) n = -1 means: the length is a fifth operand
# (i64[1]) and the two output shapes follow as shape operands.
THREEFRY = Struct("ThreeFry2x32Descriptor", "<q", ("n",),
                  "jaxlib/gpu/prng_kernels.h @ c4d590b1b6 .. 9f797990b5")


@dataclasses.dataclass(frozen=True)
class ThreefryCall:
    n: int


def _prepare_threefry(op):
    _, fields = unpack(op, THREEFRY)
    out = Outputs.of(op)
    size = int(np.prod(out.types[0][0], dtype=np.int64))
    if fields["n"] not in (-1, size):
        raise Unsupported(f"custom_call @{target_of(op)}: descriptor length {fields['n']} but "
                          f"the outputs hold {size} values")
    return ThreefryCall(fields["n"])


@register_custom_call("cu_threefry2x32", "hip_threefry2x32",
                      prepare=kernel_prepare(_prepare_threefry, operands=(4, 5)),
                      info=TargetInfo("threefry2x32 random bits, pre-FFI", forms=(_DESCRIPTOR,),
                                      jax="0.4.1 .. 0.5.0 (`*_ffi` from 0.4.31, cbe524298c; the "
                                          "old form stayed for exports)",
                                      dtypes="u32",
                                      test=_tests(["test_threefry_descriptor",
                                                   "test_threefry_dynamic_length_operand"])))
def threefry(ctx, op, k0, k1, x0, x1, *length_and_result_shapes):
    return tuple(threefry2x32_p.bind(k0, k1, x0, x1))


# ---------------------------------------------------------------- Cholesky rank-1 update
# enum LinalgType { F32 = 0, F64 = 1 };
# struct CholeskyUpdateDescriptor { LinalgType linalg_type; std::int64_t matrix_size; };
# jaxlib/gpu/cholesky_update_kernel.h @ e8b06ccf56 (2024-05-14) .. 5bc17f7ec3 (removed).
CHOLESKY_UPDATE = Struct("CholeskyUpdateDescriptor", "<i4xq", ("type", "n"),
                         "jaxlib/gpu/cholesky_update_kernel.h @ e8b06ccf56")


@dataclasses.dataclass(frozen=True)
class CholeskyUpdateCall:
    n: int


def _prepare_cholesky_update(op):
    _, fields = unpack(op, CHOLESKY_UPDATE)
    out = Outputs.of(op)
    dtype = enum_member(op, "element type", fields["type"], {0: np.float32, 1: np.float64})
    check_dtype(op, dtype, out.types[0][1])
    if fields["n"] != out.types[0][0][-1]:
        raise Unsupported(f"custom_call @{target_of(op)}: descriptor size {fields['n']} does "
                          "not match the matrix")
    return CholeskyUpdateCall(fields["n"])


@register_custom_call("cu_cholesky_update",
                      prepare=kernel_prepare(_prepare_cholesky_update, operands=2),
                      info=TargetInfo("Cholesky rank-1 update, pre-FFI", forms=(_DESCRIPTOR,),
                                      jax="0.4.29 .. 0.4.31 (`*_ffi` from 0.4.32, bd90968a25)",
                                      dtypes="f32, f64",
                                      test=_tests(["test_cholesky_update_descriptor"])))
def cholesky_update(ctx, op, r, w, *result_shapes):
    return K.cholesky_update(r, w)


# ---------------------------------------------------------------- tridiagonal solve (gtsv2)
# struct Gtsv2Descriptor { int m, n, ldb; };          sparse_kernels.h @ c4d590b1b6
# struct Gtsv2Descriptor { int batch, m, n, ldb; };   from 7dfc8ff49d (jax 0.4.15)
GTSV2_V1 = Struct("Gtsv2Descriptor", "<3i", ("m", "n", "ldb"),
                  "jaxlib/gpu/sparse_kernels.h @ c4d590b1b6")
GTSV2_V2 = Struct("Gtsv2Descriptor", "<4i", ("batch", "m", "n", "ldb"),
                  "jaxlib/gpu/sparse_kernels.h @ 7dfc8ff49d")


@dataclasses.dataclass(frozen=True)
class Gtsv2Call:
    out: Outputs
    m: int
    n: int
    ldb: int
    row_major_b: bool  # B's declared layout is row-major (jax <= 0.4.14)


def _minor_to_major(op, key, index):
    layouts = op.attrs.get(key)
    if layouts is None or index >= len(layouts):
        return None
    return tuple(int(v) for v in np.asarray(layouts[index]).reshape(-1))


def _prepare_gtsv2(op):
    cfg = op.attrs.get("mhlo.backend_config")
    raw = None
    if isinstance(cfg, dict) and "opaque" in cfg:  # FFI spelling: the same struct as `opaque`
        raw = descriptor_bytes(op, "opaque")
    layout, fields = unpack(op, GTSV2_V1, GTSV2_V2, raw=raw)
    out = Outputs.of(op)
    shape, dtype = out.types[0]
    expected = np.float32 if "f32" in target_of(op) else np.float64
    check_dtype(op, expected, dtype)
    if (fields["ldb"], fields["n"]) != tuple(shape[-2:]) or fields["m"] > fields["ldb"]:
        raise Unsupported(f"custom_call @{target_of(op)}: descriptor m={fields['m']}, "
                          f"n={fields['n']}, ldb={fields['ldb']} do not match B {shape}")
    if "batch" in fields and fields["batch"] != int(np.prod(shape[:-2], dtype=np.int64)):
        raise Unsupported(f"custom_call @{target_of(op)}: descriptor batch {fields['batch']} "
                          f"does not match B {shape}")
    b_layout = _minor_to_major(op, "operand_layouts", 3)
    rank = len(shape)
    row_major = b_layout is not None and rank >= 2 and b_layout[0] == rank - 1
    return Gtsv2Call(out, fields["m"], fields["n"], fields["ldb"], row_major)


@register_custom_call("cusparse_gtsv2_f32", "cusparse_gtsv2_f64", "hipsparse_gtsv2_f32",
                      "hipsparse_gtsv2_f64", "cusparse_gtsv2_f32_ffi", "cusparse_gtsv2_f64_ffi",
                      "hipsparse_gtsv2_f32_ffi", "hipsparse_gtsv2_f64_ffi",
                      prepare=kernel_prepare(_prepare_gtsv2, operands=4),
                      info=TargetInfo("cuSPARSE/hipSPARSE gtsv2 (tridiagonal solve), pre-FFI "
                                      "and first FFI", forms=(_DESCRIPTOR, "FFI"),
                                      jax="0.4.1 .. 0.5.3 (descriptor), 0.6.0 .. 0.6.1 (`*_ffi` "
                                          "with the descriptor as `opaque`)",
                                      dtypes="f32, f64",
                                      test=_tests(["test_gtsv2", "test_gtsv2_v1_single_column_is_"
                                                   "the_plain_solve"])))
def gtsv2(ctx, op, dl, d, du, b, *result_shapes):
    """cusparse<t>gtsv2: B (ldb x n, column-major in memory) is overwritten by X.

    Until 7dfc8ff49d jax declared B row-major ([1, 0]) while the kernel reads the
    buffer column-major: for n > 1 the kernel solved the buffer read as an
    ldb x n column-major matrix, and that is what it returned."""
    p = op.params
    batch = b.shape[:-2]
    if p.row_major_b and p.n > 1:
        cols = jnp.swapaxes(b.reshape(batch + (p.n, p.ldb)), -1, -2)
        x = L.tridiagonal_solve(dl, d, du, cols)
        x = jnp.swapaxes(x, -1, -2).reshape(b.shape)
    else:
        x = L.tridiagonal_solve(dl, d, du, b)
    return p.out.pack([x])
