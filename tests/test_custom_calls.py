"""Built-in custom_call targets: output formats checked against numpy, overrides, load-time reports."""

from __future__ import annotations

import numpy as np
import pytest

import shlo2jax
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


@pytest.mark.parametrize("target", ["annotate_device_placement", "MoveToHost", "MoveToDevice",
                                    "Sharding", "SPMDFullToShardShape"])
def test_single_device_markers_are_identity(target):
    prog = _call(target, ["tensor<2x3xf32>"], ["tensor<2x3xf32>"])
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(prog(x)), x)


def test_shape_changing_shard_conversion_fails():
    prog = _call("SPMDFullToShardShape", ["tensor<2x4xf32>"], ["tensor<1x4xf32>"])
    with pytest.raises(shlo2jax.TranslationError, match="several devices"):
        prog(np.zeros((2, 4), np.float32))


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
        def fake_getrf(ctx, op, params, a):
            assert params == "user-params"
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


def test_user_registration_of_new_target():
    try:
        shlo2jax.register_custom_call("my.double", lambda ctx, op, params, x: x * 2)
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
