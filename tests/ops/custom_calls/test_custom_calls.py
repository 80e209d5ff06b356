"""Built-in custom_call targets: output formats checked against numpy, overrides, load-time reports."""

from __future__ import annotations

import re

import numpy as np
import pytest

import shlo2jax
from shlo2jax import compat
import shlo2jax.ops  # noqa: F401
from shlo2jax import registry
from shlo2jax.errors import UnsupportedError


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


def test_threefry_matches_jax():
    import jax
    from jax.extend.random import threefry_2x32
    k = np.array([1, 2], np.uint32)
    x = np.arange(8, dtype=np.uint32)
    t = "tensor<4xui32>"
    prog = _call("cu_threefry2x32_ffi", [t, t, t, t], [t, t])
    y0, y1 = prog(np.full(4, k[0]), np.full(4, k[1]), x[:4], x[4:])
    expected = np.asarray(threefry_2x32(jax.numpy.asarray(k), jax.numpy.asarray(x)))
    np.testing.assert_array_equal(np.concatenate([y0, y1]), expected)


def test_x64_split_and_combine():
    body = """
  %lo = stablehlo.custom_call @X64SplitLow(%arg0) : (tensor<2xui64>) -> tensor<2xui32>
  %hi = stablehlo.custom_call @X64SplitHigh(%arg0) : (tensor<2xui64>) -> tensor<2xui32>
  %c = stablehlo.custom_call @X64Combine(%lo, %hi) : (tensor<2xui32>, tensor<2xui32>) -> tensor<2xui64>
  func.return %lo, %hi, %c : tensor<2xui32>, tensor<2xui32>, tensor<2xui64>"""
    prog = shlo2jax.load(_module(body, "(%arg0: tensor<2xui64>) -> (tensor<2xui32>, tensor<2xui32>, tensor<2xui64>)"))
    x = np.array([0x0123456789ABCDEF, 0xFFFFFFFF00000001], np.uint64)
    lo, hi, c = (np.asarray(v) for v in prog(x))
    np.testing.assert_array_equal(lo, (x & 0xFFFFFFFF).astype(np.uint32))
    np.testing.assert_array_equal(hi, (x >> 32).astype(np.uint32))
    np.testing.assert_array_equal(c, x)


# (Sharding markers and shard conversions: ops/sharding.py, tests/spmd/test_sharding.py.)
@pytest.mark.parametrize("target", ["annotate_device_placement", "MoveToHost", "MoveToDevice"])
def test_placement_markers_are_identity(target):
    prog = _call(target, ["tensor<2x3xf32>"], ["tensor<2x3xf32>"])
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(prog(x)), x)


@pytest.mark.parametrize("target,platform", [("tpu_custom_call", "TPU"),
                                             ("__gpu$xla.gpu.triton", "CUDA GPU")])
def test_platform_bound_kernels_reported_at_load(target, platform):
    with pytest.raises(UnsupportedError, match=platform):
        _call(target, ["tensor<2xf32>"], ["tensor<2xf32>"])


def test_approx_top_k_exact_answer():
    text = """
func.func private @cmp(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>) -> tensor<i1> {
  %0 = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
  func.return %0 : tensor<i1>
}
func.func @main(%x: tensor<7xf32>) -> (tensor<3xf32>, tensor<3xi32>) {
  %i = stablehlo.iota dim = 0 : tensor<7xi32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m1 = stablehlo.constant dense<-1> : tensor<i32>
  %0:2 = stablehlo.custom_call @ApproxTopK(%x, %i, %ninf, %m1) {called_computations = [@cmp],
      mhlo.backend_config = {aggregate_to_topk = true, recall_target = 0.95 : f32,
      reduction_dim = 0 : i64, reduction_input_size_override = -1 : i64, top_k = 3 : i64}}
      : (tensor<7xf32>, tensor<7xi32>, tensor<f32>, tensor<i32>) -> (tensor<3xf32>, tensor<3xi32>)
  func.return %0#0, %0#1 : tensor<3xf32>, tensor<3xi32>
}"""
    x = np.array([3.0, 9.0, -1.0, 7.0, 9.5, 0.0, 2.0], np.float32)
    values, indices = (np.asarray(v) for v in shlo2jax.load(text)(x))
    np.testing.assert_array_equal(values, [9.5, 9.0, 7.0])
    np.testing.assert_array_equal(indices, [4, 1, 3])


def test_user_registration_overrides_builtin():
    target = "lapack_sgetrf_ffi"
    saved = registry.CUSTOM_CALL_RULES[target]
    try:
        seen = {}

        def prepare(op):
            seen["backend"] = op.attrs.get("mhlo.backend_config")
            return "user-params"

        @shlo2jax.register_custom_call(target, prepare=prepare)
        def fake_getrf(ctx, op, a):
            assert op.params == "user-params"
            n = a.shape[-1]
            return a * 2, np.arange(1, n + 1, dtype=np.int32), np.int32(0)

        t = "tensor<2x2xf32>"
        prog = _call(target, [t], [t, "tensor<2xi32>", "tensor<i32>"])
        lu, pivots, _ = prog(np.ones((2, 2), np.float32))
        np.testing.assert_array_equal(np.asarray(lu), 2 * np.ones((2, 2)))
        np.testing.assert_array_equal(np.asarray(pivots), [1, 2])
        assert seen["backend"] == {}
    finally:
        registry.CUSTOM_CALL_RULES[target] = saved


def test_register_custom_call_is_a_decorator():
    # The handler is decorated, never passed along with the target (the old contract).
    with pytest.raises(TypeError, match="decorates the handler"):
        shlo2jax.register_custom_call("my.double", lambda ctx, op, x: x * 2)
    assert "my.double" not in registry.CUSTOM_CALL_RULES


def test_user_registration_of_new_target():
    try:
        @shlo2jax.register_custom_call("my.double")
        def double(ctx, op, x):
            return x * 2

        prog = _call("my.double", ["tensor<3xi32>"], ["tensor<3xi32>"])
        np.testing.assert_array_equal(np.asarray(prog(np.arange(3, dtype=np.int32))), [0, 2, 4])
    finally:
        registry.CUSTOM_CALL_RULES.pop("my.double", None)


# jax.export's dynamic ops, here with static shapes and constant size operands
# (what remains after shape refinement when it does not rewrite them).

def test_dynamic_top_k():
    text = """
func.func @main(%x: tensor<2x5xf32>) -> (tensor<2x2xf32>, tensor<2x2xi32>) {
  %k = stablehlo.constant dense<2> : tensor<i32>
  %0:2 = stablehlo.custom_call @stablehlo.dynamic_top_k(%x, %k) {api_version = 2 : i32}
      : (tensor<2x5xf32>, tensor<i32>) -> (tensor<2x2xf32>, tensor<2x2xi32>)
  func.return %0#0, %0#1 : tensor<2x2xf32>, tensor<2x2xi32>
}"""
    x = np.array([[1, 5, 3, 5, 0], [9, -1, 2, 8, 7]], np.float32)
    values, indices = (np.asarray(v) for v in shlo2jax.load(text)(x))
    np.testing.assert_array_equal(values, [[5, 5], [9, 8]])
    np.testing.assert_array_equal(indices, [[1, 3], [0, 3]])


def test_dynamic_rng_bit_generator_matches_static_op():
    text = """
func.func @main(%s: tensor<2xui64>) -> (tensor<2xui64>, tensor<3x4xui32>, tensor<2xui64>, tensor<3x4xui32>) {
  %shape = stablehlo.constant dense<[3, 4]> : tensor<2xi32>
  %0:2 = stablehlo.custom_call @stablehlo.dynamic_rng_bit_generator(%s, %shape) {
      api_version = 2 : i32, rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>}
      : (tensor<2xui64>, tensor<2xi32>) -> (tensor<2xui64>, tensor<3x4xui32>)
  %1:2 = stablehlo.rng_bit_generator %s, algorithm = THREE_FRY
      : (tensor<2xui64>) -> (tensor<2xui64>, tensor<3x4xui32>)
  func.return %0#0, %0#1, %1#0, %1#1 : tensor<2xui64>, tensor<3x4xui32>, tensor<2xui64>, tensor<3x4xui32>
}"""
    outs = [np.asarray(v) for v in shlo2jax.load(text)(np.array([1, 2], np.uint64))]
    np.testing.assert_array_equal(outs[0], outs[2])
    np.testing.assert_array_equal(outs[1], outs[3])


def test_dynamic_reduce_window_sum():
    text = """
func.func private @add(%a: tensor<f32>, %b: tensor<f32>) -> tensor<f32> {
  %0 = stablehlo.add %a, %b : tensor<f32>
  func.return %0 : tensor<f32>
}
func.func @main(%x: tensor<3x4xf32>) -> tensor<2x2xf32> {
  %init = stablehlo.constant dense<1.0> : tensor<f32>
  %dims = stablehlo.constant dense<[2, 3]> : tensor<2xi32>
  %ones = stablehlo.constant dense<1> : tensor<2xi32>
  %pad = stablehlo.constant dense<0> : tensor<2x2xi32>
  %0 = stablehlo.custom_call @stablehlo.dynamic_reduce_window(%x, %init, %dims, %ones, %ones, %ones, %pad)
      {api_version = 2 : i32, called_computations = [@add]}
      : (tensor<3x4xf32>, tensor<f32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>, tensor<2x2xi32>) -> tensor<2x2xf32>
  func.return %0 : tensor<2x2xf32>
}"""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = np.asarray(shlo2jax.load(text)(x))
    expected = [[1 + x[i:i + 2, j:j + 3].sum() for j in range(2)] for i in range(2)]
    np.testing.assert_array_equal(got, expected)


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


def _random(shape, dtype):
    a = RNG.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * RNG.standard_normal(shape)
    return a.astype(dtype)


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


# ---------------------------------------------------------------- approximate top-k on TPU

_CMP_GT = """
func.func private @cmp(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>) -> tensor<i1> {
  %0 = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
  func.return %0 : tensor<i1>
}"""


def test_partial_reduce_then_aggregate():
    # What XLA's ApproxTopK builds for TPU: PartialReduce to 4 candidates per row, then
    # sort + slice to top_k = 2 (the aggregation). Exact candidates give the exact top 2.
    text = _CMP_GT + """
func.func @main(%x: tensor<2x16xf32>) -> (tensor<2x4xf32>, tensor<2x4xi32>) {
  %i = stablehlo.iota dim = 1 : tensor<2x16xi32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m1 = stablehlo.constant dense<-1> : tensor<i32>
  %0 = stablehlo.custom_call @PartialReduce(%x, %i, %ninf, %m1) {called_computations = [@cmp],
      backend_config = "{\\"log2_reduction\\": 2, \\"reduction_dim\\": 1, \\"to_apply_type\\": \\"comparator\\", \\"top_k\\": 2, \\"recall_target\\": 0.950000}"}
      : (tensor<2x16xf32>, tensor<2x16xi32>, tensor<f32>, tensor<i32>) -> tuple<tensor<2x4xf32>, tensor<2x4xi32>>
  %v = stablehlo.get_tuple_element %0[0] : (tuple<tensor<2x4xf32>, tensor<2x4xi32>>) -> tensor<2x4xf32>
  %k = stablehlo.get_tuple_element %0[1] : (tuple<tensor<2x4xf32>, tensor<2x4xi32>>) -> tensor<2x4xi32>
  func.return %v, %k : tensor<2x4xf32>, tensor<2x4xi32>
}"""
    x = RNG.permutation(32).reshape(2, 16).astype(np.float32)
    values, indices = (np.asarray(v) for v in shlo2jax.load(text)(x))
    expected = -np.sort(-x, axis=1)[:, :4]
    np.testing.assert_array_equal(values, expected)
    np.testing.assert_array_equal(np.take_along_axis(x, indices, axis=1), expected)


def test_partial_reduce_min_with_separate_results():
    text = """
func.func private @cmp(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>) -> tensor<i1> {
  %0 = stablehlo.compare LT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
  func.return %0 : tensor<i1>
}
func.func @main(%x: tensor<8xf32>) -> (tensor<3xf32>, tensor<3xi32>) {
  %i = stablehlo.iota dim = 0 : tensor<8xi32>
  %inf = stablehlo.constant dense<0x7F800000> : tensor<f32>
  %m1 = stablehlo.constant dense<-1> : tensor<i32>
  %0:2 = stablehlo.custom_call @PartialReduce(%x, %i, %inf, %m1) {called_computations = [@cmp],
      backend_config = "{\\"log2_reduction\\": 1, \\"reduction_dim\\": 0, \\"to_apply_type\\": \\"comparator\\", \\"top_k\\": 3, \\"recall_target\\": 0.9}"}
      : (tensor<8xf32>, tensor<8xi32>, tensor<f32>, tensor<i32>) -> (tensor<3xf32>, tensor<3xi32>)
  func.return %0#0, %0#1 : tensor<3xf32>, tensor<3xi32>
}"""
    x = np.array([4.0, -2.0, 7.0, 0.5, -9.0, 3.0, 1.0, 8.0], np.float32)
    values, indices = (np.asarray(v) for v in shlo2jax.load(text)(x))
    np.testing.assert_array_equal(values, [-9.0, -2.0, 0.5])
    np.testing.assert_array_equal(indices, [4, 1, 3])


# ---------------------------------------------------------------- MHLO ops encoded as custom calls

def test_mhlo_ops_encoded_as_custom_calls():
    import math
    text = """
func.func @main(%x: tensor<2x5xf32>) -> (tensor<2x3xf32>, tensor<2x3xi32>, tensor<2x5xf32>, tensor<2x2xf32>, tensor<2x2xi32>) {
  %e = stablehlo.custom_call @mhlo.erf(%x) {mhlo.attributes = {mhlo.version = 1 : i64}} : (tensor<2x5xf32>) -> tensor<2x5xf32>
  %0:2 = stablehlo.custom_call @mhlo.topk(%x) {mhlo.attributes = {k = 3 : i64, largest = true}, mhlo.version = 1 : i64} : (tensor<2x5xf32>) -> (tensor<2x3xf32>, tensor<2x3xi32>)
  %1:2 = stablehlo.custom_call @mhlo.topk(%x) {mhlo.attributes = {k = 2 : i64, largest = false}} : (tensor<2x5xf32>) -> (tensor<2x2xf32>, tensor<2x2xi32>)
  return %0#0, %0#1, %e, %1#0, %1#1 : tensor<2x3xf32>, tensor<2x3xi32>, tensor<2x5xf32>, tensor<2x2xf32>, tensor<2x2xi32>
}"""
    x = np.array([[1, 5, 3, 5, 0], [9, -1, 2, 8, 7]], np.float32)
    top_v, top_i, erf, low_v, low_i = (np.asarray(v) for v in shlo2jax.load(text)(x))
    np.testing.assert_array_equal(top_v, [[5, 5, 3], [9, 8, 7]])
    np.testing.assert_array_equal(top_i, [[1, 3, 2], [0, 3, 4]])  # ties: lower index first
    np.testing.assert_allclose(erf, np.vectorize(math.erf)(x), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(low_v, [[0, 1], [-1, 2]])
    np.testing.assert_array_equal(low_i, [[4, 0], [1, 2]])


def test_unknown_mhlo_custom_call_is_reported():
    with pytest.raises(UnsupportedError, match="mhlo.no_such_op"):
        _call("mhlo.no_such_op", ["tensor<2xf32>"], ["tensor<2xf32>"])


# ---------------------------------------------------------------- targets with no portable meaning

@pytest.mark.parametrize("target,where", [
    ("triton_kernel_call_ffi", "GPU"), ("__cudnn$fusion", "cuDNN"), ("mosaic_gpu_v2", "CUDA GPU"),
    ("xla_ffi_python_cpu_callback", "exporting process"), ("tf.call_tf_function", "TensorFlow")])
def test_unrunnable_targets_name_what_they_need(target, where):
    with pytest.raises(UnsupportedError, match=f"{re.escape(target)}.*{where}"):
        _call(target, ["tensor<2xf32>"], ["tensor<2xf32>"])


def test_allocate_buffer():
    text = """
func.func @main() -> tensor<2x3xf32> {
  %0 = stablehlo.custom_call @AllocateBuffer() : () -> tensor<2x3xf32>
  func.return %0 : tensor<2x3xf32>
}"""
    out = np.asarray(shlo2jax.load(text)())
    assert out.shape == (2, 3) and out.dtype == np.float32


def test_user_registration_before_the_builtins_load_is_kept():
    # The built-in families are imported at the first load; a rule registered before
    # (in a fresh process) must not be replaced by the built-in one for that target.
    import subprocess
    import sys
    import textwrap
    script = textwrap.dedent("""
        import sys
        import numpy as np
        import shlo2jax
        assert "shlo2jax.ops" not in sys.modules
        @shlo2jax.register_custom_call("lapack_spotrf_ffi")
        def potrf(ctx, op, a):
            return a + 1, np.int32(7)
        text = '''func.func @main(%a: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<i32>) {
          %0:2 = stablehlo.custom_call @lapack_spotrf_ffi(%a) {mhlo.backend_config = {uplo = 76 : ui8}}
              : (tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<i32>)
          func.return %0#0, %0#1 : tensor<2x2xf32>, tensor<i32>
        }'''
        out, info = shlo2jax.load(text)(np.eye(2, dtype=np.float32))
        assert "shlo2jax.ops" in sys.modules
        print(np.asarray(out).tolist(), int(info))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[[2.0,", "1.0],", "[1.0,", "2.0]]", "7"]


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


@pytest.mark.parametrize("platform,target", [("cuda", "cu_threefry2x32_ffi"),
                                             ("rocm", "hip_threefry2x32_ffi")])
def test_gpu_threefry_kernel_export(platform, target):
    import jax
    from jax._src import config
    fn = lambda k: jax.random.uniform(jax.random.wrap_key_data(k), (5, 3))  # noqa: E731
    key = np.array([0, 42], np.uint32)
    with config.threefry_gpu_kernel_lowering(True):
        prog = _export(fn, platform, target, key)
    np.testing.assert_array_equal(np.asarray(prog(key)), _on_cpu(fn, key)[0])


def test_dce_sink_has_no_effect_on_values():
    text = """
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  stablehlo.custom_call @dce_sink(%x) {api_version = 4 : i32, has_side_effect = true} : (tensor<3xf32>) -> ()
  %0 = stablehlo.negate %x : tensor<3xf32>
  func.return %0 : tensor<3xf32>
}"""
    x = np.array([1.0, -2.0, 3.0], np.float32)
    np.testing.assert_array_equal(np.asarray(shlo2jax.load(text)(x)), -x)
