"""Custom-call forms of older jax/jaxlib releases: packed descriptors, leading scalar
operands, the first FFI spellings.

Each module is synthesized as jaxlib's Python wrappers of that era built it: the
descriptor is `struct.pack`ed exactly as the kernel's C struct (the layouts are
written out here, independently of the decoders), the operand and result lists
are those of jaxlib's lowering. Results are checked through the defining
properties of each decomposition (reconstruction, orthogonality, triangularity),
as jax's export back-compat tests do, against numpy; workspaces must be zeros.
"""

from __future__ import annotations

import pathlib
import re
import struct

import numpy as np
import pytest

import shlo2jax
from shlo2jax.errors import UnsupportedError

RNG = np.random.default_rng(7)

DTYPES = {np.float32: ("f32", 0), np.float64: ("f64", 1), np.complex64: ("complex<f32>", 2),
          np.complex128: ("complex<f64>", 3)}
REAL = {np.float32: "f32", np.float64: "f64", np.complex64: "f32", np.complex128: "f64"}
LAPACK_PREFIX = {np.float32: "s", np.float64: "d", np.complex64: "c", np.complex128: "z"}
ALL = list(DTYPES)


def _tol(dtype):
    return 2e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10


def _random(shape, dtype):
    a = RNG.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * RNG.standard_normal(shape)
    return a.astype(dtype)


def _adj(x):
    return np.conj(np.swapaxes(x, -1, -2))


def _herm(shape, dtype):
    a = _random(shape, dtype)
    return ((a + _adj(a)) / 2).astype(dtype)


def _tensor(shape, element):
    dims = "x".join(str(d) for d in shape)
    return f"tensor<{dims}x{element}>" if shape else f"tensor<{element}>"


def mlir_bytes(data: bytes) -> str:
    """A byte string as an MLIR string literal (every byte escaped)."""
    return '"' + "".join(f"\\{b:02X}" for b in data) + '"'


def _program(target, operands, results, attrs=""):
    """One custom call in @main. operands: ("arg", type) -> a function argument,
    ("const", type, literal) -> a stablehlo.constant; results: types."""
    args, lines, names = [], [], []
    for i, operand in enumerate(operands):
        if operand[0] == "arg":
            args.append((f"%a{i}", operand[1]))
            names.append(f"%a{i}")
        else:
            lines.append(f"  %c{i} = stablehlo.constant {operand[2]} : {operand[1]}")
            names.append(f"%c{i}")
    types = [o[1] for o in operands]
    n = len(results)
    lhs = "%r" if n == 1 else f"%r:{n}"
    outs = "%r" if n == 1 else ", ".join(f"%r#{i}" for i in range(n))
    attrs = f" {{{attrs}}}" if attrs else ""
    lines.append(f"  {lhs} = stablehlo.custom_call @{target}({', '.join(names)}){attrs} : "
                 f"({', '.join(types)}) -> ({', '.join(results)})")
    lines.append(f"  func.return {outs} : {', '.join(results)}")
    signature = ", ".join(f"{name}: {t}" for name, t in args)
    return shlo2jax.load(f"func.func @main({signature}) -> ({', '.join(results)}) {{\n"
                         + "\n".join(lines) + "\n}")


def _run(program, *args):
    outs = program(*args)
    return [np.asarray(x) for x in (outs if isinstance(outs, tuple) else (outs,))]


def _i32(value):
    return ("const", "tensor<i32>", f"dense<{value}>")


def _u8(value):
    return ("const", "tensor<ui8>", f"dense<{value}>")


def _assert_zeros(*arrays):
    for x in arrays:
        assert not np.any(x), "a workspace must come back as zeros"


def _check_lu(a, lu, pivots_1based, rtol):
    for idx in np.ndindex(a.shape[:-2]):
        m, n = a.shape[-2:]
        perm = np.arange(m)
        for i, p in enumerate(pivots_1based[idx] - 1):
            perm[[i, p]] = perm[[p, i]]
        k = min(m, n)
        lower = np.tril(lu[idx], -1)[:, :k] + np.eye(m, k)
        upper = np.triu(lu[idx])[:k, :]
        np.testing.assert_allclose(lower @ upper, a[idx][perm], rtol=rtol, atol=rtol)


def _householder(m, k, reflectors, taus, lower_start):
    """Q = H(0) ... H(k-1), H(i) = I - tau_i v_i v_i^H, v_i[lower_start(i)] = 1 and the
    entries below from column i of `reflectors` (LAPACK's geqrf/gehrd/sytrd('L'))."""
    q = np.eye(m, dtype=reflectors.dtype)
    for i in range(k):
        v = np.zeros(m, reflectors.dtype)
        s = lower_start(i)
        v[s] = 1
        v[s + 1:] = reflectors[s + 1:, i]
        q = q @ (np.eye(m) - taus[i] * np.outer(v, np.conj(v)))
    return q


# ---------------------------------------------------------------- pre-FFI LAPACK (operands)
# jaxlib/lapack.py of jax 0.4.1 (c4d590b1b6) .. 0.4.38: geev_mhlo/geev_hlo,
# gees_hlo, gehrd_hlo, sytrd_hlo with api_version 2 and leading scalar operands.

@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("jobvl,jobvr", [("V", "V"), ("N", "V"), ("V", "N")])
def test_lapack_geev(dtype, jobvl, jobvr):
    b, n = 2, 4
    element, _ = DTYPES[dtype]
    real = REAL[dtype]
    cplx = f"complex<{real}>"
    a = _random((b, n, n), dtype)
    if np.issubdtype(dtype, np.complexfloating):
        # workspaces: A (n x n) and rwork[2n]; then w, vl, vr, info
        results = [_tensor((n, n), element), _tensor((2 * n,), real), _tensor((b, n), element)]
    else:
        # workspaces: A, vl, vr (n x n, real); then wr, wi, vl, vr, info
        results = [_tensor((n, n), element)] * 3 + [_tensor((b, n), element)] * 2
    results += [_tensor((b, n, n), cplx)] * 2 + [_tensor((b,), "i32")]
    prog = _program(f"lapack_{LAPACK_PREFIX[dtype]}geev",
                    [_i32(b), _i32(n), _u8(ord(jobvl)), _u8(ord(jobvr)),
                     ("arg", _tensor((b, n, n), element))],
                    results, "api_version = 2 : i32")
    outs = _run(prog, a)
    if np.issubdtype(dtype, np.complexfloating):
        _assert_zeros(outs[0], outs[1])
        w = outs[2]
    else:
        _assert_zeros(*outs[:3])
        w = outs[3] + 1j * outs[4]
    vl, vr, info = outs[-3:]
    np.testing.assert_array_equal(info, 0)
    tol = 10 * _tol(dtype) * np.abs(a).max() * n
    for i in range(b):
        np.testing.assert_allclose(np.sort_complex(w[i]), np.sort_complex(np.linalg.eigvals(a[i])),
                                   atol=tol)
        if jobvr == "V":
            np.testing.assert_allclose(a[i] @ vr[i], vr[i] * w[i], atol=tol)
            np.testing.assert_allclose(np.linalg.norm(vr[i], axis=0), 1, atol=tol)
        else:
            _assert_zeros(vr[i])
        if jobvl == "V":  # vl^H A = w vl^H
            np.testing.assert_allclose(_adj(vl[i]) @ a[i], w[i][:, None] * _adj(vl[i]), atol=tol)
        else:
            _assert_zeros(vl[i])


def test_lapack_geev_real_pairs_are_conjugate():
    a = np.array([[0.0, -2.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 3.0]])
    results = [_tensor((3, 3), "f64")] * 3 + [_tensor((3,), "f64")] * 2 + \
        [_tensor((3, 3), "complex<f64>")] * 2 + ["tensor<i32>"]
    prog = _program("lapack_dgeev", [_i32(1), _i32(3), _u8(86), _u8(86),
                                     ("arg", _tensor((3, 3), "f64"))], results)
    outs = _run(prog, a)
    wr, wi, vr = outs[3], outs[4], outs[6]
    pair = np.flatnonzero(wi != 0)
    assert len(pair) == 2 and pair[1] == pair[0] + 1 and wi[pair[0]] == -wi[pair[1]]
    assert wr[pair[0]] == wr[pair[1]]
    np.testing.assert_allclose(vr[:, pair[1]], np.conj(vr[:, pair[0]]), atol=1e-12)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("jobvs", ["V", "N"])
def test_lapack_gees(dtype, jobvs):
    b, n = 2, 4
    element, _ = DTYPES[dtype]
    a = _random((b, n, n), dtype)
    complex_input = np.issubdtype(dtype, np.complexfloating)
    mat = _tensor((b, n, n), element)
    if complex_input:  # (T, rwork[n], w, vs, sdim, info)
        results = [mat, _tensor((n,), REAL[dtype]), _tensor((b, n), element)]
    else:  # (T, wr, wi, vs, sdim, info)
        results = [mat, _tensor((b, n), element), _tensor((b, n), element)]
    results += [mat, _tensor((b,), "i32"), _tensor((b,), "i32")]
    prog = _program(f"lapack_{LAPACK_PREFIX[dtype]}gees",
                    [_i32(b), _i32(n), _u8(ord(jobvs)), _u8(ord("N")), ("arg", mat)],
                    results, "api_version = 2 : i32")
    outs = _run(prog, a)
    t, vs, sdim, info = outs[0], outs[3], outs[4], outs[5]
    np.testing.assert_array_equal(info, 0)
    np.testing.assert_array_equal(sdim, 0)
    tol = 10 * _tol(dtype) * np.abs(a).max() * n
    if complex_input:
        _assert_zeros(outs[1])
        w = outs[2]
        assert np.all(np.tril(t, -1) == 0)
    else:
        w = outs[1] + 1j * outs[2]
        assert np.all(np.tril(t, -2) == 0)
    for i in range(b):
        np.testing.assert_allclose(np.sort_complex(w[i]),
                                   np.sort_complex(np.linalg.eigvals(a[i])), atol=tol)
        if jobvs == "V":
            np.testing.assert_allclose(vs[i] @ t[i] @ _adj(vs[i]), a[i], atol=tol)
            np.testing.assert_allclose(_adj(vs[i]) @ vs[i], np.eye(n), atol=tol)
        else:
            _assert_zeros(vs[i])


def test_lapack_gees_sort_is_refused_at_trace_time():
    mat = _tensor((3, 3), "f32")
    prog = _program("lapack_sgees", [_i32(1), _i32(3), _u8(86), _u8(ord("S")), ("arg", mat)],
                    [mat, "tensor<3xf32>", "tensor<3xf32>", mat, "tensor<i32>", "tensor<i32>"])
    with pytest.raises(Exception, match="sort"):
        prog(np.eye(3, dtype=np.float32))


@pytest.mark.parametrize("dtype", ALL)
def test_lapack_gehrd(dtype):
    b, n = 2, 5
    element, _ = DTYPES[dtype]
    a = _random((b, n, n), dtype)
    mat = _tensor((b, n, n), element)
    lwork = 7  # whatever jaxlib's workspace query said: only its type matters
    prog = _program(f"lapack_{LAPACK_PREFIX[dtype]}gehrd",
                    [_i32(n), _i32(1), _i32(n), _i32(n), _i32(b), _i32(lwork), ("arg", mat)],
                    [mat, _tensor((b, n - 1), element), _tensor((b,), "i32"),
                     _tensor((lwork,), element)], "api_version = 2 : i32")
    h, taus, info, work = _run(prog, a)
    np.testing.assert_array_equal(info, 0)
    _assert_zeros(work)
    for i in range(b):
        q = _householder(n, n - 1, h[i], taus[i], lambda j: j + 1)
        np.testing.assert_allclose(_adj(q) @ a[i] @ q, np.triu(h[i], -1),
                                   atol=10 * _tol(dtype) * n)


def _check_tridiagonal(a, out, d, e, taus, lower, dtype):
    n = a.shape[-1]
    if lower:
        q = _householder(n, n - 1, out, taus, lambda j: j + 1)
    else:
        # Q = H(n-1) ... H(1) (1-based), v(i+1) = 1 and v above from A(:, i+1).
        q = np.eye(n, dtype=out.dtype)
        for i in range(n - 1):
            v = np.zeros(n, out.dtype)
            v[i] = 1
            v[:i] = out[:i, i + 1]
            q = (np.eye(n) - taus[i] * np.outer(v, np.conj(v))) @ q
    t = np.diag(d) + np.diag(e, -1) + np.diag(e, 1)
    np.testing.assert_allclose(_adj(q) @ a @ q, t, atol=20 * _tol(dtype) * n)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("lower", [True, False])
def test_lapack_sytrd(dtype, lower):
    b, n = 2, 4
    element, _ = DTYPES[dtype]
    real = REAL[dtype]
    a = _herm((b, n, n), dtype)
    # Garbage in the triangle LAPACK does not read.
    garbage = np.triu(np.full((n, n), 9.0), 1) if lower else np.tril(np.full((n, n), 9.0), -1)
    mat = _tensor((b, n, n), element)
    name = {np.float32: "ssytrd", np.float64: "dsytrd", np.complex64: "chetrd",
            np.complex128: "zhetrd"}[dtype]
    prog = _program(f"lapack_{name}", [_i32(n), _i32(int(lower)), _i32(n), _i32(b), _i32(9),
                                       ("arg", mat)],
                    [mat, _tensor((b, n), real), _tensor((b, n - 1), real),
                     _tensor((b, n - 1), element), _tensor((b,), "i32"), _tensor((9,), element)],
                    "api_version = 2 : i32")
    out, d, e, taus, info, work = _run(prog, (a + garbage).astype(dtype))
    np.testing.assert_array_equal(info, 0)
    _assert_zeros(work)
    for i in range(b):
        _check_tridiagonal(a[i], out[i], d[i], e[i], taus[i], lower, dtype)


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


# ---------------------------------------------------------------- DUCC FFT (CPU, jax <= 0.4.26)

def _flatbuffer(fields):
    """A FlatBuffers table (the root) with `fields` in field-id order: (kind, value)
    or None for an absent field. Scalars inline, vectors after the table."""
    sizes = {"i8": 1, "bool": 1, "u32": 4, "f64": 8, "vec_u64": 4, "vec_u32": 4}
    buf = bytearray(4)  # root offset, patched below
    vt_pos = len(buf)
    n = len(fields)
    buf += bytes(4 + 2 * n)  # vtable, patched below
    while len(buf) % 8:
        buf += b"\0"
    table = len(buf)
    buf += struct.pack("<i", table - vt_pos)
    offsets, vectors = [], []
    for field in fields:
        if field is None:
            offsets.append(0)
            continue
        kind, value = field
        size = sizes[kind]
        while (len(buf) - table) % size:
            buf += b"\0"
        offsets.append(len(buf) - table)
        if kind.startswith("vec"):
            vectors.append((len(buf), kind, value))
            buf += bytes(4)
        else:
            buf += struct.pack({"i8": "<b", "bool": "<B", "u32": "<I", "f64": "<d"}[kind], value)
    table_size = len(buf) - table
    for at, kind, values in vectors:
        elem = 8 if kind == "vec_u64" else 4
        while (len(buf) + 4) % elem:
            buf += b"\0"
        start = len(buf)
        buf += struct.pack("<I", len(values))
        buf += struct.pack(f"<{len(values)}{'Q' if elem == 8 else 'I'}", *values)
        struct.pack_into("<I", buf, at, start - at)
    struct.pack_into(f"<HH{n}H", buf, vt_pos, 4 + 2 * n, table_size, *offsets)
    struct.pack_into("<I", buf, 0, table)
    return bytes(buf)


def _strides(shape):
    return [int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape))]


FFT_CASES = {  # name: (input dtype, output dtype, DuccFftType, forward, numpy reference)
    "fft": (np.complex64, np.complex64, 0, True, lambda x, ax, s: np.fft.fftn(x, axes=ax)),
    "ifft": (np.complex128, np.complex128, 0, False, lambda x, ax, s: np.fft.ifftn(x, axes=ax)),
    "rfft": (np.float32, np.complex64, 2, True, lambda x, ax, s: np.fft.rfftn(x, axes=ax)),
    "irfft": (np.complex128, np.float64, 1, False,
              lambda x, ax, s: np.fft.irfftn(x, s=[s[a] for a in ax], axes=ax)),
}


@pytest.mark.parametrize("case", list(FFT_CASES))
@pytest.mark.parametrize("rank", [1, 2])
@pytest.mark.parametrize("dynamic", [False, True])
def test_ducc_fft(case, rank, dynamic):
    in_dtype, out_dtype, fft_type, forward, reference = FFT_CASES[case]
    out_shape = (3, 4, 6)
    in_shape = out_shape[:-1] + (4,) if fft_type == 1 else out_shape  # C2R input: n//2 + 1
    if fft_type == 2:
        out_shape = in_shape[:-1] + (4,)
    axes = list(range(3 - rank, 3))
    lengths = [(out_shape if fft_type == 1 else in_shape)[a] for a in axes]
    scale = 1.0 if forward else 1.0 / float(np.prod(lengths))
    double = np.dtype(out_dtype) in (np.float64, np.complex128)
    x = _random(in_shape, in_dtype)
    in_t = _tensor(in_shape, DTYPES[in_dtype][0])
    out_t = _tensor(out_shape, DTYPES[out_dtype][0])
    if not dynamic:
        # jaxlib/ducc_fft.py (jax 0.4.1): DuccFftDescriptor {dtype, fft_type, shape,
        # strides_in, strides_out, axes, forward, scale}; C2R's shape is the output's.
        shape = out_shape if fft_type == 1 else in_shape
        desc = _flatbuffer([("i8", int(double)), ("i8", fft_type), ("vec_u64", list(shape)),
                            ("vec_u64", _strides(in_shape)), ("vec_u64", _strides(out_shape)),
                            ("vec_u32", axes), ("bool", int(forward)), ("f64", scale)])
        text = f"""
func.func @main(%x: {in_t}) -> {out_t} {{
  %d = stablehlo.constant dense<{list(desc)}> : tensor<{len(desc)}xui8>
  %r = stablehlo.custom_call @ducc_fft(%d, %x) {{api_version = 2 : i32}} : (tensor<{len(desc)}xui8>, {in_t}) -> {out_t}
  func.return %r : {out_t}
}}"""
    else:
        # jax 0.4.13 .. 0.4.26: DynamicDuccFftDescriptor {ndims, dtype, fft_type, axes,
        # forward}; shape, strides and scale (f64[1]) are operands, then the result shape.
        desc = _flatbuffer([("u32", 3), ("i8", int(double)), ("i8", fft_type),
                            ("vec_u32", axes), ("bool", int(forward))])
        shape = out_shape if fft_type == 1 else in_shape
        text = f"""
func.func @main(%x: {in_t}) -> {out_t} {{
  %d = stablehlo.constant dense<{list(desc)}> : tensor<{len(desc)}xui8>
  %shape = stablehlo.constant dense<{list(shape)}> : tensor<3xi32>
  %sin = stablehlo.constant dense<{_strides(in_shape)}> : tensor<3xi32>
  %sout = stablehlo.constant dense<{_strides(out_shape)}> : tensor<3xi32>
  %scale = stablehlo.constant dense<[{scale!r}]> : tensor<1xf64>
  %rs = stablehlo.constant dense<{list(out_shape)}> : tensor<3xi32>
  %r = stablehlo.custom_call @dynamic_ducc_fft(%d, %x, %shape, %sin, %sout, %scale, %rs) {{
      api_version = 2 : i32, indices_of_shape_operands = dense<6> : tensor<1xi64>}}
      : (tensor<{len(desc)}xui8>, {in_t}, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<1xf64>, tensor<3xi32>) -> {out_t}
  func.return %r : {out_t}
}}"""
    (y,) = _run(shlo2jax.load(text), x)
    assert y.dtype == out_dtype and y.shape == out_shape
    expected = reference(x.astype(np.complex128 if fft_type != 2 else np.float64), axes, out_shape)
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


def test_ducc_fft_unknown_type_code():
    desc = _flatbuffer([("i8", 0), ("i8", 7), ("vec_u64", [4]), ("vec_u64", [1]),
                        ("vec_u64", [1]), ("vec_u32", [0]), ("bool", 1), ("f64", 1.0)])
    text = f"""
func.func @main(%x: tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>> {{
  %d = stablehlo.constant dense<{list(desc)}> : tensor<{len(desc)}xui8>
  %r = stablehlo.custom_call @ducc_fft(%d, %x) : (tensor<{len(desc)}xui8>, tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>>
  func.return %r : tensor<4xcomplex<f32>>
}}"""
    with pytest.raises(Exception, match="unknown DuccFftType 7"):
        shlo2jax.load(text)(np.ones(4, np.complex64))


# ---------------------------------------------------------------- cuDNN / MIOpen LSTM

def _rnn_case(bidirectional, num_layers=2, batch=3, seq=5, input_size=4, hidden=3):
    from jax.experimental import rnn
    dirs = 2 if bidirectional else 1
    x = _random((batch, seq, input_size), np.float32)
    h0 = _random((num_layers * dirs, batch, hidden), np.float32)
    c0 = _random((num_layers * dirs, batch, hidden), np.float32)
    w = (0.5 * _random((rnn.get_num_params_in_lstm(input_size, hidden, num_layers,
                                                   bidirectional),), np.float32))
    lengths = np.array([seq, 2, 4][:batch], np.int32)
    return dict(x=x, h0=h0, c0=c0, w=w, lengths=lengths, input_size=input_size, hidden=hidden,
                num_layers=num_layers, bidirectional=bidirectional)


def _rnn_descriptor(case, workspace=16, reserve=24):
    # jaxlib/gpu/rnn.cc BuildRnnDescriptor: {int input_size, hidden_size, num_layers,
    # batch_size, max_seq_length; float dropout; bool bidirectional; bool cudnn_allow_tf32;
    # int workspace_size, reserve_space_size;}
    batch, seq = case["x"].shape[:2]
    return struct.pack("<5if2B2x2i", case["input_size"], case["hidden"], case["num_layers"],
                       batch, seq, 0.0, int(case["bidirectional"]), 1, workspace, reserve)


def _rnn_reference(case, w):
    from jax.experimental import rnn
    weights = rnn.unpack_lstm_weights(w, case["input_size"], case["hidden"], case["num_layers"],
                                      case["bidirectional"])
    return rnn.lstm_ref(case["x"], case["h0"], case["c0"], *weights,
                        seq_lengths=case["lengths"], input_size=case["input_size"],
                        hidden_size=case["hidden"], num_layers=case["num_layers"], dropout=0.0,
                        bidirectional=case["bidirectional"])


def _rnn_types(case):
    dirs = 2 if case["bidirectional"] else 1
    batch, seq = case["x"].shape[:2]
    return (_tensor(case["x"].shape, "f32"), _tensor(case["h0"].shape, "f32"),
            _tensor(case["w"].shape, "f32"), _tensor((batch,), "i32"),
            _tensor((batch, seq, dirs * case["hidden"]), "f32"))


def _valid(case, y):
    mask = np.arange(y.shape[1])[None, :] < case["lengths"][:, None]
    return np.where(mask[..., None], y, 0)


@pytest.mark.parametrize("target,bidirectional", [("cudnn_rnn", True), ("cudnn_rnn_ffi", False),
                                                  ("hipdnn_rnn_ffi", True)])
def test_rnn_lstm(target, bidirectional):
    from jax.experimental import rnn
    case = _rnn_case(bidirectional)
    x_t, h_t, w_t, len_t, y_t = _rnn_types(case)
    desc = _rnn_descriptor(case)
    if target.endswith("_ffi"):  # c6e83903de (jax 0.5.1): the descriptor as `opaque`
        attrs = f"api_version = 4 : i32, mhlo.backend_config = {{opaque = {mlir_bytes(desc)}}}"
    else:
        attrs = f"api_version = 2 : i32, backend_config = {mlir_bytes(desc)}"
    w = case["w"]
    if target.startswith("hip"):  # MIOpen's gate order: jax's ROCm callers swap the gates
        w_kernel = np.asarray(rnn.swap_lstm_gates(w, case["input_size"], case["hidden"],
                                                  case["num_layers"], bidirectional))
    else:
        w_kernel = w
    prog = _program(target, [("arg", x_t), ("arg", h_t), ("arg", h_t), ("arg", w_t),
                             ("arg", len_t)],
                    [y_t, h_t, h_t, _tensor((16,), "f32"), _tensor((24,), "f32")], attrs)
    y, h, c, workspace, reserve = _run(prog, case["x"], case["h0"], case["c0"], w_kernel,
                                       case["lengths"])
    _assert_zeros(workspace, reserve)
    y_ref, h_ref, c_ref = (np.asarray(v) for v in _rnn_reference(case, w))
    np.testing.assert_allclose(y, _valid(case, y_ref), atol=1e-5)
    np.testing.assert_allclose(h, h_ref, atol=1e-5)
    np.testing.assert_allclose(c, c_ref, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("target,bidirectional", [("cudnn_rnn_bwd", True),
                                                  ("cudnn_rnn_bwd_ffi", False)])
def test_rnn_lstm_backward(target, bidirectional):
    import jax
    case = _rnn_case(bidirectional)
    x_t, h_t, w_t, len_t, y_t = _rnn_types(case)
    desc = _rnn_descriptor(case)
    if target.endswith("_ffi"):
        attrs = f"api_version = 4 : i32, mhlo.backend_config = {{opaque = {mlir_bytes(desc)}}}"
    else:
        attrs = f"api_version = 2 : i32, backend_config = {mlir_bytes(desc)}"
    y_ref = np.asarray(_rnn_reference(case, case["w"])[0])
    dy = _valid(case, _random(y_ref.shape, np.float32))
    dh = _random(case["h0"].shape, np.float32)
    dc = _random(case["h0"].shape, np.float32)
    dw0 = np.zeros_like(case["w"])
    prog = _program(target, [("arg", y_t), ("arg", h_t), ("arg", h_t), ("arg", x_t), ("arg", h_t),
                             ("arg", h_t), ("arg", w_t), ("arg", y_t), ("arg", _tensor((24,), "f32")),
                             ("arg", w_t), ("arg", len_t)],
                    [x_t, h_t, h_t, w_t, _tensor((16,), "f32")], attrs)
    dx, dh0, dc0, dw, workspace = _run(prog, dy, dh, dc, case["x"], case["h0"], case["c0"],
                                       case["w"], y_ref, np.zeros(24, np.float32), dw0,
                                       case["lengths"])
    _assert_zeros(workspace)

    def forward(x, h0, c0, w):
        return _rnn_reference(dict(case, x=x, h0=h0, c0=c0), w)
    _, vjp = jax.vjp(forward, case["x"], case["h0"], case["c0"], case["w"])
    expected = vjp((jax.numpy.asarray(dy), jax.numpy.asarray(dh), jax.numpy.asarray(dc)))
    for got, exp in zip((dx, dh0, dc0, dw), expected):
        np.testing.assert_allclose(got, np.asarray(exp), atol=1e-4)


def test_rnn_dropout_is_refused():
    case = _rnn_case(False)
    x_t, h_t, w_t, len_t, y_t = _rnn_types(case)
    batch, seq = case["x"].shape[:2]
    desc = struct.pack("<5if2B2x2i", 4, 3, 2, batch, seq, 0.5, 0, 1, 16, 24)
    with pytest.raises(UnsupportedError, match="cudnn_rnn.*dropout"):
        _program("cudnn_rnn", [("arg", x_t), ("arg", h_t), ("arg", h_t), ("arg", w_t),
                               ("arg", len_t)],
                 [y_t, h_t, h_t, _tensor((16,), "f32"), _tensor((24,), "f32")],
                 f"backend_config = {mlir_bytes(desc)}")


# ---------------------------------------------------------------- markers and aliases

def test_layout_constraint():
    text = """
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %r = stablehlo.custom_call @LayoutConstraint(%x) {api_version = 1 : i32,
      operand_layouts = [dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[1, 0]> : tensor<2xindex>]}
      : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %r : tensor<2x3xf32>
}"""
    x = _random((2, 3), np.float32)
    np.testing.assert_array_equal(np.asarray(shlo2jax.load(text)(x)), x)


@pytest.mark.parametrize("lower", [True, False])
def test_oneapi_potrf(lower):
    m = _random((2, 3, 3), np.float64)
    a = m @ _adj(m) + 3 * np.eye(3)
    t = _tensor((2, 3, 3), "f64")
    prog = _program("oneapisolver_potrf_ffi", [("arg", t)], [t, _tensor((2,), "i32")],
                    f"api_version = 4 : i32, mhlo.backend_config = {{lower = {str(lower).lower()}}}")
    factor, info = _run(prog, a)
    np.testing.assert_array_equal(info, 0)
    rebuilt = factor @ _adj(factor) if lower else _adj(factor) @ factor
    np.testing.assert_allclose(rebuilt, a, atol=1e-10)


# ---------------------------------------------------------------- malformed descriptors

BAD_DESCRIPTORS = [
    # (target, descriptor, operand types, result types, message)
    ("cusolver_syevd", struct.pack("<4i", 0, 0, 1, 3),
     ["tensor<3x3xf32>"], ["tensor<3x3xf32>", "tensor<3xf32>", "tensor<i32>", "tensor<4xf32>"],
     r"cusolver_syevd: opaque descriptor of 16 bytes; jaxlib's descriptor is 20"),
    ("cusolver_syevj", struct.pack("<6i", 0, 0, 1, 3, 4, 0),
     ["tensor<3x3xf32>"], ["tensor<3x3xf32>", "tensor<3xf32>", "tensor<i32>", "tensor<4xf32>"],
     r"cusolver_syevj: opaque descriptor of 24 bytes"),
    ("cusolver_getrf", struct.pack("<5i", 9, 1, 3, 3, 4),
     ["tensor<3x3xf32>"], ["tensor<3x3xf32>", "tensor<3xi32>", "tensor<i32>", "tensor<4xf32>"],
     r"cusolver_getrf: unknown element type code 9"),
    ("hipsolver_syevd", struct.pack("<5i", 0, 0, 1, 3, 4),  # 0 is CUDA's lower, not hipSOLVER's
     ["tensor<3x3xf32>"], ["tensor<3x3xf32>", "tensor<3xf32>", "tensor<i32>", "tensor<4xf32>"],
     r"hipsolver_syevd: unknown fill mode \(uplo\) code 0"),
    ("cusolver_geqrf", struct.pack("<5i", 1, 1, 3, 3, 4),  # says f64, the array is f32
     ["tensor<3x3xf32>"], ["tensor<3x3xf32>", "tensor<3xf32>", "tensor<i32>", "tensor<4xf32>"],
     r"cusolver_geqrf: the descriptor says float64 but the array is float32"),
    ("cublas_getrf_batched", struct.pack("<3i", 0, 5, 3),
     ["tensor<2x3x3xf32>"],
     ["tensor<2x3x3xf32>", "tensor<2x3xi32>", "tensor<2xi32>", "tensor<8xi8>"],
     r"cublas_getrf_batched: descriptor batch 5 does not match the array's batch 2"),
    ("cusolver_gesvd", struct.pack("<5i2b2x", 0, 1, 3, 3, 4, ord("Q"), ord("Q")),
     ["tensor<3x3xf32>"], ["tensor<3x3xf32>", "tensor<3xf32>", "tensor<3x3xf32>",
                           "tensor<3x3xf32>", "tensor<i32>", "tensor<4xf32>"],
     r"cusolver_gesvd: unknown jobu code 81"),
    ("cu_threefry2x32", struct.pack("<i", 4),
     ["tensor<4xui32>"] * 4, ["tensor<4xui32>"] * 2,
     r"cu_threefry2x32: opaque descriptor of 4 bytes; jaxlib's descriptor is 8"),
    ("cusparse_csr_todense", struct.pack("<7i", 77, 2, 2, 2, 1, 1, 0),
     ["tensor<1xf32>", "tensor<1xi32>", "tensor<3xi32>"], ["tensor<2x2xf32>", "tensor<4xi8>"],
     r"cusparse_csr_todense: unknown value type code 77"),
    ("cusparse_gtsv2_f32", struct.pack("<2i", 3, 1),
     ["tensor<3xf32>"] * 3 + ["tensor<3x1xf32>"], ["tensor<3x1xf32>", "tensor<4xi8>"],
     r"cusparse_gtsv2_f32: opaque descriptor of 8 bytes; jaxlib's descriptor is 12 .* or 16"),
]


BAD_DESCRIPTORS += [
    ("cusolver_geqrf", struct.pack("<5i", 0, 1, 3, 3, 4),  # one operand too many
     ["tensor<3x3xf32>", "tensor<3x3xf32>"],
     ["tensor<3x3xf32>", "tensor<3xf32>", "tensor<i32>", "tensor<4xf32>"],
     r"cusolver_geqrf with 2 operands; the kernel takes 1"),
    ("lapack_sgehrd", b"",  # a result that is a token: cannot be decoded
     ["tensor<3x3xf32>"], ["!stablehlo.token"], r"lapack_sgehrd with 1 operands; the kernel takes 7"),
    ("cu_threefry2x32", struct.pack("<q", 4),  # token results: nothing to decode them as
     ["tensor<4xui32>"] * 4, ["!stablehlo.token"] * 2, r"cu_threefry2x32: cannot decode it"),
]


@pytest.mark.parametrize("target,desc,operands,results,message", BAD_DESCRIPTORS,
                         ids=[c[0] + str(i) for i, c in enumerate(BAD_DESCRIPTORS)])
def test_bad_descriptors(target, desc, operands, results, message):
    with pytest.raises(UnsupportedError, match=message):
        _program(target, [("arg", t) for t in operands], results,
                 f"backend_config = {mlir_bytes(desc)}")


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


# ---------------------------------------------------------------- older producer forms

# jax 0.4.1 printed MHLO (generic `"mhlo.custom_call"` with `api_version = 2 : i32`),
# and early native serialization wrote that module as plain MLIR bytecode.
MHLO_EIGH = """
module @jit_eigh attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3x3xf32>) -> (tensor<2x3x3xf32>, tensor<2x3xf32>) {
    %0 = mhlo.constant dense<1> : tensor<i32>
    %1 = mhlo.constant dense<2> : tensor<i32>
    %2 = mhlo.constant dense<3> : tensor<i32>
    %3:5 = "mhlo.custom_call"(%0, %1, %2, %arg0) {api_version = 2 : i32, backend_config = "", call_target_name = "lapack_ssyevd", has_side_effect = false, operand_layouts = [dense<> : tensor<0xindex>, dense<> : tensor<0xindex>, dense<> : tensor<0xindex>, dense<[1, 2, 0]> : tensor<3xindex>], output_operand_aliases = [#mhlo.output_operand_alias<output_tuple_indices = [0], operand_index = 3, operand_tuple_indices = []>], result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 0]> : tensor<2xindex>, dense<0> : tensor<1xindex>, dense<0> : tensor<1xindex>, dense<0> : tensor<1xindex>]} : (tensor<i32>, tensor<i32>, tensor<i32>, tensor<2x3x3xf32>) -> (tensor<2x3x3xf32>, tensor<2x3xf32>, tensor<2xi32>, tensor<37xf32>, tensor<18xi32>)
    %4 = mhlo.add %3#1, %3#1 : tensor<2x3xf32>
    return %3#0, %4 : tensor<2x3x3xf32>, tensor<2x3xf32>
  }
}"""


@pytest.mark.parametrize("as_bytecode", [False, True])
def test_mhlo_module_bytecode_with_legacy_lapack(as_bytecode):
    import io
    from jaxlib.mlir import ir
    from shlo2jax.compat import make_ir_context
    source = MHLO_EIGH
    if as_bytecode:
        with make_ir_context():
            module = ir.Module.parse(MHLO_EIGH)
            buffer = io.BytesIO()
            module.operation.write_bytecode(buffer)
        source = buffer.getvalue()
        assert "mhlo.custom_call" not in repr(source)  # really bytes, not text
    a = _herm((2, 3, 3), np.float32)
    v, twice_w = _run(shlo2jax.load(source), a)
    w = twice_w / 2
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), atol=1e-5)
    np.testing.assert_allclose(a @ v, v * w[:, None, :], atol=1e-5)


def test_dimension_size_argument_and_shape_operands():
    # jax2tf's native serialization before `jax.global_constant` (serialization
    # versions <= 4): the batch size is a leading i32 argument of @main; the pre-FFI
    # LAPACK call (here geev, shape-polymorphic since 3adfe321b0) reads it as its
    # batch operand and gets its result shapes as trailing shape operands.
    n = 3
    text = f"""
func.func public @main(%b: tensor<i32>, %a: tensor<?x{n}x{n}xf32>) -> (tensor<?x{n}xf32>, tensor<?x{n}xf32>, tensor<?x{n}x{n}xcomplex<f32>>) {{
  %n = stablehlo.constant dense<{n}> : tensor<i32>
  %v = stablehlo.constant dense<86> : tensor<ui8>
  %bb = stablehlo.reshape %b : (tensor<i32>) -> tensor<1xi32>
  %nn = stablehlo.constant dense<{n}> : tensor<1xi32>
  %ws = stablehlo.constant dense<[{n}, {n}]> : tensor<2xi32>
  %sw = stablehlo.concatenate %bb, %nn, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
  %sv = stablehlo.concatenate %bb, %nn, %nn, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
  %r:8 = stablehlo.custom_call @lapack_sgeev(%b, %n, %v, %v, %a, %ws, %ws, %ws, %sw, %sw, %sv, %sv, %bb) {{
      api_version = 2 : i32, indices_of_shape_operands = dense<[5, 6, 7, 8, 9, 10, 11, 12]> : tensor<8xi64>}}
      : (tensor<i32>, tensor<i32>, tensor<ui8>, tensor<ui8>, tensor<?x{n}x{n}xf32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>, tensor<3xi32>, tensor<3xi32>, tensor<1xi32>)
      -> (tensor<{n}x{n}xf32>, tensor<{n}x{n}xf32>, tensor<{n}x{n}xf32>, tensor<?x{n}xf32>, tensor<?x{n}xf32>, tensor<?x{n}x{n}xcomplex<f32>>, tensor<?x{n}x{n}xcomplex<f32>>, tensor<?xi32>)
  func.return %r#3, %r#4, %r#6 : tensor<?x{n}xf32>, tensor<?x{n}xf32>, tensor<?x{n}x{n}xcomplex<f32>>
}}"""
    a = _random((2, n, n), np.float32)
    wr, wi, vr = _run(shlo2jax.load(text), np.int32(2), a)
    w = wr + 1j * wi
    for i in range(2):
        np.testing.assert_allclose(np.sort_complex(w[i]), np.sort_complex(np.linalg.eigvals(a[i])),
                                   atol=1e-4)
        np.testing.assert_allclose(a[i] @ vr[i], vr[i] * w[i], atol=1e-4)


def _jax_data_cases():
    import importlib
    import pkgutil
    data = pytest.importorskip("jax._src.internal_test_util.export_back_compat_test_data")
    found = []
    for info in pkgutil.iter_modules(data.__path__):
        if info.ispkg:
            continue
        module = importlib.import_module(f"{data.__name__}.{info.name}")
        for attr, value in vars(module).items():
            stack = [(f"{info.name}.{attr}", value)]
            while stack:
                name, v = stack.pop()
                if isinstance(v, dict) and "mlir_module_serialized" in v:
                    found.append((name, v))
                elif isinstance(v, dict):
                    stack += [(f"{name}[{k!r}]", x) for k, x in v.items()]
                elif isinstance(v, (list, tuple)):
                    stack += [(f"{name}[{i}]", x) for i, x in enumerate(v)]
    return found


def _producer_version(artifact: bytes):
    found = re.search(rb"StableHLO_v(\d+)\.(\d+)\.(\d+)", artifact[:64])
    return tuple(int(x) for x in found.groups()) if found else None


def test_oldest_serialized_forms_in_jax_data_load():
    """The installed jax's back-compat data holds VHLO artifacts older than the oldest
    version jaxlib still writes (StableHLO v0.9.0) and pre-artifact VHLO bytecode
    (2023, no producer version): they load and run (tests/test_back_compat.py checks
    every case's values; this pins that those oldest forms are among them)."""
    from jaxlib.mlir.dialects import stablehlo
    import test_back_compat
    minimum = tuple(int(x) for x in stablehlo.get_minimum_version().split("."))
    cases = _jax_data_cases()
    older = [(n, d) for n, d in cases
             if (_producer_version(d["mlir_module_serialized"]) or (0,)) < minimum]
    unversioned = [n for n, d in older if _producer_version(d["mlir_module_serialized"]) is None]
    assert older and unversioned, "the installed jax no longer ships pre-1.0 artifacts"
    for name, data in older:
        if data.get("nr_devices", 1) == 1 and test_back_compat._known(name) is None:
            test_back_compat.check_case(name, data)


# ---------------------------------------------------------------- the table of targets
# (docs/generated/custom_calls.md: tests/test_docs.py checks it is current)

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_table_tool_rewrites_a_readme(tmp_path):
    from shlo2jax.tools import custom_call_table
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{custom_call_table.START}\nstale row\n{custom_call_table.END}\ntail\n")
    assert custom_call_table.main(["--readme", str(readme)]) == 0
    text = readme.read_text()
    assert "stale row" not in text and text.endswith(f"{custom_call_table.END}\ntail\n")
    assert "| LAPACK geev (eig), pre-FFI | `lapack_{s,d,c,z}geev` |" in text


def test_every_builtin_target_is_described():
    from shlo2jax import registry
    from shlo2jax.tools.custom_call_table import builtin_targets
    targets = set(builtin_targets())
    assert targets - set(registry.TARGET_INFO) == set()
    assert set(registry.TARGET_INFO) - targets == set(), "descriptions of targets nobody registers"


def test_catalog_names_existing_tests():
    import shlo2jax.ops  # noqa: F401
    from shlo2jax import registry
    missing = []
    for info in set(registry.TARGET_INFO.values()):
        assert info.test, info.kernel
        for ref in info.test:
            path, _, name = ref.partition("::")
            source = (ROOT / path).read_text()
            if not re.search(rf"^def {re.escape(name)}\(", source, re.M):
                missing.append(ref)
    assert not missing, missing


def test_declared_operand_counts_match_the_handlers():
    # kernel_prepare(decode, operands=n) checks the count at load; the handler must read
    # exactly those operands (then jax's result shapes), or one would be silently dropped.
    import inspect
    import shlo2jax.ops  # noqa: F401
    from shlo2jax import registry
    checked, wrong = 0, []
    for name, rule in registry.CUSTOM_CALL_RULES.items():
        declared = getattr(rule.prepare, "operands", None)
        if declared is None:
            continue
        parameters = list(inspect.signature(rule.handler).parameters.values())[2:]
        named = sum(p.kind == p.POSITIONAL_OR_KEYWORD for p in parameters)
        rest = any(p.kind == p.VAR_POSITIONAL for p in parameters)
        checked += 1
        if named != declared[0] or not rest:
            wrong.append(f"{name}: declared {declared}, handler reads {named} (+ *rest: {rest})")
    assert checked > 80 and not wrong, wrong


@pytest.mark.parametrize("target", ["__cudnn$fmhaSoftmax", "__cudnn$fmhaScaleBiasMaskSoftmaxBackward"])
def test_cudnn_fused_attention_is_reported(target):
    t = "tensor<1x4x2x8xf16>"
    with pytest.raises(UnsupportedError, match=re.escape(target) + ".*cuDNN fused attention"):
        _program(target, [("arg", t)] * 3, [t, "tensor<0xui8>"],
                 'backend_config = "{\\22cudnn_fmha_backend_config\\22: {}}"')
