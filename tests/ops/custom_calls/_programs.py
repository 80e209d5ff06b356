"""What the custom-call tests share (tests/ops/custom_calls/test_*.py): modules synthesized
as jaxlib's wrappers built them (`_program`, `_run`), random operands and the checks of each
decomposition's defining properties. `RNG` here is reseeded for each test like a test
module's own (tests/conftest.py)."""

from __future__ import annotations

import numpy as np
import shlo2jax
from shlo2jax import compat
import shlo2jax.ops  # noqa: F401

RNG = np.random.default_rng(7)


def _module(body: str, signature: str) -> str:
    return f"func.func @main{signature} {{\n{body}\n}}"


def _call(target, operand_types, result_types, backend="{}", extra=""):
    args = ", ".join(f"%arg{i}" for i in range(len(operand_types)))
    sig_in = ", ".join(f"%arg{i}: {t}" for i, t in enumerate(operand_types))
    results = ", ".join(result_types)
    n = len(result_types)
    lhs = "%0" if n == 1 else f"%0:{n}"
    outs = "%0" if n == 1 else ", ".join(f"%0#{i}" for i in range(n))
    body = (f"  {lhs} = stablehlo.custom_call @{target}({args}) {{mhlo.backend_config = {backend}"
            f"{extra}}} : ({', '.join(operand_types)}) -> ({results})\n"
            f"  func.return {outs} : {results}")
    return shlo2jax.load(_module(body, f"({sig_in}) -> ({results})"))


# ---------------------------------------------------------------- jax's own exports, per platform
# jax lowers lax.linalg to a different kernel on each platform and post-processes
# the kernel's outputs (pivot bases, packed eigenvectors, transposed slots...). An
# export for a platform, translated and run here, must give what jax computes on CPU.


_NOT_GUARANTEED_STABLE = [
    *(f"lapack_{p}{r}_ffi" for p in "sdcz" for r in ("geqp3", "gesvd", "ormqr", "unmqr")),
    *(f"{p}hybrid_{r}" for p in ("cu", "hip") for r in ("geqp3", "eig_real", "eig_comp")),
    *(f"{p}solver_{r}_ffi" for p in ("cu", "hip") for r in ("ormqr", "gesvdp", "syrk")),
    "cu_cholesky_update_ffi", "hipsparse_gtsv2_ffi", "tridiagonal_solve_perturbed_ffi",
    "cu_tridiagonal_solve_perturbed", "hip_tridiagonal_solve_perturbed", "cusolver_csrlsvqr_ffi",
    "hip_threefry2x32_ffi",  # guaranteed stable from jax 0.8 on
]


def _export(fn, platform, target, *args):
    import jax
    from jax import export
    checks = [export.DisabledSafetyCheck.custom_call(t) for t in _NOT_GUARANTEED_STABLE]
    avals = [jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype) for a in args]
    with compat.enable_x64():
        exported = export.export(jax.jit(fn), platforms=[platform], disabled_checks=checks)(*avals)
    text = exported.mlir_module()
    assert f"custom_call @{target}(" in text
    return shlo2jax.load(text)


def _on_cpu(fn, *args):
    import jax
    with compat.enable_x64():
        return [np.asarray(x) for x in jax.tree.leaves(jax.jit(fn)(*args))]


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
