"""dot_general, dot, einsum, cholesky, triangular_solve, fft and batch norm against numpy."""

import ml_dtypes
import numpy as np
import pytest

from shlo2jax import compat
from shlo2jax import value_types as T

from _helpers import run_main, tensor


def _run(body, args, arg_types, result_types):
    out = run_main(body, args, arg_types, result_types)
    return [np.asarray(o) for o in out] if isinstance(out, (tuple, list)) else np.asarray(out)


def _values(shape, dtype, rng, lo=-4, hi=5):
    """Small integers: exact in every element type, so results can be compared exactly."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if T.is_unsigned(dtype):
        lo = 0
    values = rng.integers(lo, hi, shape)
    if T.is_complex(dtype):
        values = values + 1j * rng.integers(lo, hi, shape)
    return values.astype(dtype)


# ---------------------------------------------------------------- dot_general

DOT_TYPES = [("f32", np.float32), ("f64", np.float64), ("bf16", ml_dtypes.bfloat16),
             ("f16", np.float16), ("i8", np.int8), ("i16", np.int16), ("i32", np.int32),
             ("i64", np.int64), ("ui8", np.uint8), ("ui32", np.uint32), ("ui64", np.uint64),
             ("complex<f32>", np.complex64), ("complex<f64>", np.complex128)]


def _dot_general(lhs, rhs, lhs_el, rhs_el, out_shape, out_el, dims, extra=""):
    body = (f"  %0 = stablehlo.dot_general %a0, %a1, {dims}{extra} : "
            f"({tensor(lhs.shape, lhs_el)}, {tensor(rhs.shape, rhs_el)}) -> {tensor(out_shape, out_el)}\n"
            f"  return %0 : {tensor(out_shape, out_el)}")
    return _run(body, [lhs, rhs], [tensor(lhs.shape, lhs_el), tensor(rhs.shape, rhs_el)],
                [tensor(out_shape, out_el)])


@pytest.mark.parametrize("element,dtype", DOT_TYPES)
def test_dot_general_batch_and_contracting_dims(element, dtype):
    rng = np.random.default_rng(0)
    # Batch dims are not leading in rhs, and there are two contracting dims:
    # the result is batch, lhs free, rhs free.
    lhs = _values((2, 3, 4, 2), dtype, rng, -2, 3)
    rhs = _values((4, 5, 2, 2), dtype, rng, -2, 3)
    dims = "batching_dims = [0] x [2], contracting_dims = [2, 3] x [0, 3]"
    out = _dot_general(lhs, rhs, element, element, (2, 3, 5), element, dims)
    wide = (np.complex128 if T.is_complex(dtype) else np.float64 if T.is_float(dtype)
            else np.int64)
    expected = np.einsum("bikl,kjbl->bij", lhs.astype(wide), rhs.astype(wide))
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out.astype(wide), expected.astype(dtype).astype(wide))


def test_dot_general_bool():
    rng = np.random.default_rng(1)
    lhs, rhs = _values((3, 4), bool, rng), _values((4, 2), bool, rng)
    out = _dot_general(lhs, rhs, "i1", "i1", (3, 2), "i1", "contracting_dims = [1] x [0]")
    np.testing.assert_array_equal(out, (lhs.astype(int) @ rhs.astype(int)) > 0)


def test_dot_general_no_dims_is_outer_product():
    lhs = np.array([[1, 2], [3, 4]], np.int64)
    rhs = np.array([[1, 0], [0, 1]], np.int64)
    out = _dot_general(lhs, rhs, "i64", "i64", (2, 2, 2, 2), "i64",
                       "batching_dims = [] x [], contracting_dims = [] x []")
    np.testing.assert_array_equal(out, np.einsum("ab,cd->abcd", lhs, rhs))


@pytest.mark.parametrize("in_el,in_dtype,out_el,out_dtype", [
    ("i8", np.int8, "i32", np.int32),  # products overflow i8
    ("ui8", np.uint8, "ui32", np.uint32),
    ("i32", np.int32, "i8", np.int8),  # narrower result wraps
    ("f32", np.float32, "f64", np.float64),
    ("f16", np.float16, "f32", np.float32),
    ("bf16", ml_dtypes.bfloat16, "f32", np.float32),
])
def test_dot_general_result_type_differs(in_el, in_dtype, out_el, out_dtype):
    lhs = np.array([[100, 120, 7], [-3, 90, 100]]).astype(in_dtype) if not T.is_unsigned(in_dtype) \
        else np.array([[200, 120, 7], [3, 90, 255]]).astype(in_dtype)
    rhs = np.array([[100], [110], [3]]).astype(in_dtype)
    out = _dot_general(lhs, rhs, in_el, in_el, (2, 1), out_el, "contracting_dims = [1] x [0]")
    exact = lhs.astype(np.int64) @ rhs.astype(np.int64)
    assert out.dtype == np.dtype(out_dtype)
    np.testing.assert_array_equal(out, exact.astype(out_dtype))


@pytest.mark.parametrize("precision", ["DEFAULT", "HIGH", "HIGHEST"])
def test_dot_general_precision_config(precision):
    rng = np.random.default_rng(2)
    lhs, rhs = rng.standard_normal((3, 5)), rng.standard_normal((5, 2))
    out = _dot_general(lhs.astype(np.float32), rhs.astype(np.float32), "f32", "f32", (3, 2), "f32",
                       "contracting_dims = [1] x [0]", f", precision = [{precision}, HIGHEST]")
    np.testing.assert_allclose(out, lhs @ rhs, rtol=1e-2, atol=1e-2)


_ALGORITHM = (", precision = [DEFAULT, DEFAULT], algorithm = <lhs_precision_type = {0}, "
              "rhs_precision_type = {0}, accumulation_type = {1}, lhs_component_count = 1, "
              "rhs_component_count = 1, num_primitive_operations = {2}, "
              "allow_imprecise_accumulation = false>")


@pytest.mark.parametrize("element,dtype,algorithm", [
    ("f32", np.float32, ("f32", "f32", 1)),
    ("f32", np.float32, ("tf32", "f32", 1)),  # no CPU kernel: XLA:CPU ignores it
    ("f32", np.float32, ("bf16", "f32", 3)),
    ("f16", np.float16, ("f16", "f32", 1)),
    ("f64", np.float64, ("f64", "f64", 1)),
    ("i64", np.int64, ("tf32", "f32", 1)),  # meaningless for integers: ignored
])
def test_dot_general_algorithm(element, dtype, algorithm):
    lhs = np.arange(8).reshape(2, 2, 2).astype(dtype)
    rhs = np.stack([np.eye(2), np.eye(2)]).astype(dtype)
    out = _dot_general(lhs, rhs, element, element, (2, 2, 2), element,
                       "batching_dims = [0] x [0], contracting_dims = [2] x [1]",
                       _ALGORITHM.format(*algorithm))
    np.testing.assert_array_equal(out, lhs)


def test_mhlo_dot_general():
    rng = np.random.default_rng(3)
    lhs, rhs = _values((2, 3, 4), np.float32, rng), _values((4, 2, 5), np.float32, rng)
    body = ('  %0 = "mhlo.dot_general"(%a0, %a1) {dot_dimension_numbers = #mhlo.dot<'
            "lhs_batching_dimensions = [0], rhs_batching_dimensions = [1], "
            "lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [0]>, "
            "precision_config = [#mhlo<precision DEFAULT>, #mhlo<precision HIGHEST>]} : "
            "(tensor<2x3x4xf32>, tensor<4x2x5xf32>) -> tensor<2x3x5xf32>\n"
            "  return %0 : tensor<2x3x5xf32>")
    out = _run(body, [lhs, rhs], ["tensor<2x3x4xf32>", "tensor<4x2x5xf32>"], ["tensor<2x3x5xf32>"])
    np.testing.assert_array_equal(out, np.einsum("bik,kbj->bij", lhs, rhs))


@pytest.mark.parametrize("lhs_shape,rhs_shape,out_shape", [
    ((2, 3), (3, 4), (2, 4)), ((2, 3), (3,), (2,)), ((3,), (3,), ()), ((3,), (3, 4), (4,))])
def test_dot_legacy(lhs_shape, rhs_shape, out_shape):
    rng = np.random.default_rng(4)
    lhs, rhs = _values(lhs_shape, np.int32, rng), _values(rhs_shape, np.int32, rng)
    lt, rt, ot = tensor(lhs_shape, "i32"), tensor(rhs_shape, "i32"), tensor(out_shape, "i32")
    body = f'  %0 = "stablehlo.dot"(%a0, %a1) : ({lt}, {rt}) -> {ot}\n  return %0 : {ot}'
    np.testing.assert_array_equal(_run(body, [lhs, rhs], [lt, rt], [ot]), np.dot(lhs, rhs))


def test_einsum_and_unary_einsum():
    rng = np.random.default_rng(5)
    x, y = _values((2, 3), np.float32, rng), _values((3, 4), np.float32, rng)
    body = ('  %0 = "stablehlo.einsum"(%a0, %a1) {einsum_config = "ab,bc->ca"} : '
            "(tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<4x2xf32>\n"
            '  %1 = "stablehlo.unary_einsum"(%a0) {einsum_config = ",ab->b"} : '
            "(tensor<2x3xf32>) -> tensor<3xf32>\n"
            "  return %0, %1 : tensor<4x2xf32>, tensor<3xf32>")
    out, out1 = _run(body, [x, y], ["tensor<2x3xf32>", "tensor<3x4xf32>"],
                     ["tensor<4x2xf32>", "tensor<3xf32>"])
    np.testing.assert_array_equal(out, (x @ y).T)
    np.testing.assert_array_equal(out1, x.sum(0))


# ---------------------------------------------------------------- cholesky / triangular_solve

LINALG_TYPES = [("f32", np.float32, 1e-4), ("f64", np.float64, 1e-10),
                ("complex<f32>", np.complex64, 1e-4), ("complex<f64>", np.complex128, 1e-10)]


def _spd(rng, shape, dtype):
    a = rng.standard_normal(shape)
    if T.is_complex(dtype):
        a = a + 1j * rng.standard_normal(shape)
    n = shape[-1]
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


@pytest.mark.parametrize("element,dtype,tol", LINALG_TYPES + [
    ("f16", np.float16, 1e-2), ("bf16", ml_dtypes.bfloat16, 5e-2)])
@pytest.mark.parametrize("lower", [True, False])
def test_cholesky(element, dtype, tol, lower):
    rng = np.random.default_rng(6)
    a = _spd(rng, (2, 4, 4), dtype)
    # Only the selected triangle is read: garbage in the other one must not matter.
    other = np.triu if lower else np.tril
    garbage = other(np.full((4, 4), 7.0), 1 if lower else -1).astype(dtype)
    t = tensor((2, 4, 4), element)
    body = (f'  %0 = "stablehlo.cholesky"(%a0) {{lower = {str(lower).lower()}}} : ({t}) -> {t}\n'
            f"  return %0 : {t}")
    out = _run(body, [a + garbage], [t], [t])
    expected = np.linalg.cholesky(a.astype(np.complex128))
    if not lower:
        expected = np.conj(np.swapaxes(expected, -1, -2))
    keep = np.tril if lower else np.triu  # the other triangle is implementation-defined
    np.testing.assert_allclose(keep(out).astype(np.complex128), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("element,dtype,tol", [LINALG_TYPES[0], LINALG_TYPES[3]])
@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a", ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"])
@pytest.mark.parametrize("unit_diagonal", [True, False])
def test_triangular_solve(element, dtype, tol, left_side, lower, transpose_a, unit_diagonal):
    rng = np.random.default_rng(7)
    a = _spd(rng, (2, 3, 3), dtype)  # well conditioned; the unused triangle is garbage
    b = rng.standard_normal((2, 3, 2) if left_side else (2, 2, 3)).astype(dtype)
    tri = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:  # the diagonal of `a` is not read
        tri = tri - tri * np.eye(3) + np.eye(3)
    op_a = {"NO_TRANSPOSE": tri, "TRANSPOSE": np.swapaxes(tri, -1, -2),
            "ADJOINT": np.conj(np.swapaxes(tri, -1, -2))}[transpose_a].astype(np.complex128)
    if left_side:  # op(a) x = b
        expected = np.linalg.solve(op_a, b)
    else:  # x op(a) = b  <=>  op(a)^T x^T = b^T
        expected = np.swapaxes(np.linalg.solve(np.swapaxes(op_a, -1, -2),
                                               np.swapaxes(b, -1, -2)), -1, -2)
    ta, tb = tensor(a.shape, element), tensor(b.shape, element)
    body = (f'  %0 = "stablehlo.triangular_solve"(%a0, %a1) {{'
            f"left_side = {str(left_side).lower()}, lower = {str(lower).lower()}, "
            f"unit_diagonal = {str(unit_diagonal).lower()}, "
            f"transpose_a = #stablehlo<transpose {transpose_a}>}} : ({ta}, {tb}) -> {tb}\n"
            f"  return %0 : {tb}")
    out = _run(body, [a, b], [ta, tb], [tb])
    np.testing.assert_allclose(out, expected, rtol=tol * 10, atol=tol * 10)


@pytest.mark.parametrize("element,dtype", [("bf16", ml_dtypes.bfloat16), ("f16", np.float16)])
def test_triangular_solve_low_precision(element, dtype):
    a = np.array([[2, 1, 0, 0], [0, 4, 1, 0], [0, 0, 2, 1], [0, 0, 0, 1]]).astype(dtype)
    x = np.array([[1], [2], [-1], [3]]).astype(dtype)
    b = (a.astype(np.float64) @ x.astype(np.float64)).astype(dtype)
    ta, tb = tensor((4, 4), element), tensor((4, 1), element)
    body = (f'  %0 = "stablehlo.triangular_solve"(%a0, %a1) {{left_side = true, lower = false, '
            "unit_diagonal = false, transpose_a = #stablehlo<transpose NO_TRANSPOSE>} : "
            f"({ta}, {tb}) -> {tb}\n  return %0 : {tb}")
    np.testing.assert_array_equal(_run(body, [a, b], [ta, tb], [tb]), x)


# ---------------------------------------------------------------- fft

@pytest.mark.parametrize("fft_type", ["FFT", "IFFT", "RFFT", "IRFFT"])
@pytest.mark.parametrize("lengths", [(1,), (7,), (8,), (4, 6), (2, 13), (3, 4, 5)])
@pytest.mark.parametrize("precision", ["f32", "f64"])
def test_fft(fft_type, lengths, precision):
    rng = np.random.default_rng(8)
    real, cplx = (np.float32, np.complex64) if precision == "f32" else (np.float64, np.complex128)
    axes = tuple(range(-len(lengths), 0))
    in_shape = (2,) + lengths
    if fft_type == "IRFFT":
        in_shape = in_shape[:-1] + (lengths[-1] // 2 + 1,)
    x = rng.standard_normal(in_shape)
    if fft_type != "RFFT":
        x = x + 1j * rng.standard_normal(in_shape)
    x = x.astype(real if fft_type == "RFFT" else cplx)
    expected = {"FFT": np.fft.fftn, "IFFT": np.fft.ifftn, "RFFT": np.fft.rfftn,
                "IRFFT": np.fft.irfftn}[fft_type](x, s=lengths, axes=axes)
    in_el = precision if fft_type == "RFFT" else f"complex<{precision}>"
    out_el = precision if fft_type == "IRFFT" else f"complex<{precision}>"
    ti, to = tensor(x.shape, in_el), tensor(expected.shape, out_el)
    body = (f"  %0 = stablehlo.fft %a0, type = {fft_type}, length = {list(lengths)} : "
            f"({ti}) -> {to}\n  return %0 : {to}")
    out = _run(body, [x], [ti], [to])
    tol = 1e-4 if precision == "f32" else 1e-12
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol)


def test_fft_empty_batch():
    x = np.zeros((3, 0, 8), np.float32)
    body = ("  %0 = stablehlo.fft %a0, type = RFFT, length = [8] : "
            "(tensor<3x0x8xf32>) -> tensor<3x0x5xcomplex<f32>>\n"
            "  return %0 : tensor<3x0x5xcomplex<f32>>")
    out = _run(body, [x], ["tensor<3x0x8xf32>"], ["tensor<3x0x5xcomplex<f32>>"])
    assert out.shape == (3, 0, 5) and out.dtype == np.complex64


def test_mhlo_fft():
    x = np.arange(8, dtype=np.float32)
    body = ('  %0 = "mhlo.fft"(%a0) {fft_type = #mhlo<fft_type RFFT>, '
            "fft_length = dense<8> : tensor<1xi64>} : (tensor<8xf32>) -> tensor<5xcomplex<f32>>\n"
            "  return %0 : tensor<5xcomplex<f32>>")
    out = _run(body, [x], ["tensor<8xf32>"], ["tensor<5xcomplex<f32>>"])
    np.testing.assert_allclose(out, np.fft.rfft(x), atol=1e-4)


# ---------------------------------------------------------------- batch norm

BN_TYPES = [("f32", np.float32, 1e-5), ("f64", np.float64, 1e-12),
            ("bf16", ml_dtypes.bfloat16, 5e-2), ("f16", np.float16, 1e-2)]
EPS = 1e-3
EPS_F32 = float(np.float32(EPS))  # epsilon is an f32 attribute


def _feature_view(v, fi, ndim):
    shape = [1] * ndim
    shape[fi] = -1
    return v.reshape(shape)


@pytest.mark.parametrize("element,dtype,tol", BN_TYPES)
@pytest.mark.parametrize("fi", [0, 1, 2])
def test_batch_norm_inference(element, dtype, tol, fi):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 3, 4)).astype(dtype)
    n = x.shape[fi]
    scale, offset, mean = (rng.standard_normal(n).astype(dtype) for _ in range(3))
    var = (rng.random(n) + 0.5).astype(dtype)
    tx, tf = tensor(x.shape, element), tensor((n,), element)
    body = (f'  %0 = "stablehlo.batch_norm_inference"(%a0, %a1, %a2, %a3, %a4) '
            f"{{epsilon = {EPS} : f32, feature_index = {fi} : i64}} : "
            f"({tx}, {tf}, {tf}, {tf}, {tf}) -> {tx}\n  return %0 : {tx}")
    out = _run(body, [x, scale, offset, mean, var], [tx, tf, tf, tf, tf], [tx])
    f = lambda v: _feature_view(v.astype(np.float64), fi, 3)  # noqa: E731
    expected = (x.astype(np.float64) - f(mean)) / np.sqrt(f(var) + EPS_F32) * f(scale) + f(offset)
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_allclose(out.astype(np.float64), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("element,dtype,tol", BN_TYPES)
@pytest.mark.parametrize("fi", [0, 2])
def test_batch_norm_training(element, dtype, tol, fi):
    rng = np.random.default_rng(10)
    x = rng.standard_normal((2, 3, 4)).astype(dtype)
    n = x.shape[fi]
    scale, offset = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    tx, tf = tensor(x.shape, element), tensor((n,), element)
    body = (f'  %0:3 = "stablehlo.batch_norm_training"(%a0, %a1, %a2) '
            f"{{epsilon = {EPS} : f32, feature_index = {fi} : i64}} : "
            f"({tx}, {tf}, {tf}) -> ({tx}, {tf}, {tf})\n"
            f"  return %0#0, %0#1, %0#2 : {tx}, {tf}, {tf}")
    out, mean, var = _run(body, [x, scale, offset], [tx, tf, tf], [tx, tf, tf])
    axes = tuple(d for d in range(3) if d != fi)
    xd = x.astype(np.float64)
    exp_mean, exp_var = xd.mean(axis=axes), xd.var(axis=axes)  # biased variance, as the spec
    f = lambda v: _feature_view(v.astype(np.float64), fi, 3)  # noqa: E731
    expected = (xd - f(exp_mean)) / np.sqrt(f(exp_var) + EPS_F32) * f(scale) + f(offset)
    np.testing.assert_allclose(mean.astype(np.float64), exp_mean, rtol=tol, atol=tol)
    np.testing.assert_allclose(var.astype(np.float64), exp_var, rtol=tol, atol=tol)
    np.testing.assert_allclose(out.astype(np.float64), expected, rtol=tol * 2, atol=tol * 2)


@pytest.mark.parametrize("element,dtype,tol", BN_TYPES)
@pytest.mark.parametrize("fi", [1, 2])
def test_batch_norm_grad(element, dtype, tol, fi):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 3, 4)).astype(dtype)
    g = rng.standard_normal((2, 3, 4)).astype(dtype)
    n = x.shape[fi]
    axes = tuple(d for d in range(3) if d != fi)
    scale = rng.standard_normal(n).astype(dtype)
    mean = x.astype(np.float64).mean(axis=axes).astype(dtype)
    var = x.astype(np.float64).var(axis=axes).astype(dtype)
    tx, tf = tensor(x.shape, element), tensor((n,), element)
    body = (f'  %0:3 = "stablehlo.batch_norm_grad"(%a0, %a1, %a2, %a3, %a4) '
            f"{{epsilon = {EPS} : f32, feature_index = {fi} : i64}} : "
            f"({tx}, {tf}, {tf}, {tf}, {tx}) -> ({tx}, {tf}, {tf})\n"
            f"  return %0#0, %0#1, %0#2 : {tx}, {tf}, {tf}")
    gx, gs, go = _run(body, [x, scale, mean, var, g], [tx, tf, tf, tf, tx], [tx, tf, tf])
    # The closed-form gradient of batch normalization through the batch statistics.
    f = lambda v: _feature_view(v.astype(np.float64), fi, 3)  # noqa: E731
    xd, gd = x.astype(np.float64), g.astype(np.float64)
    stddev = np.sqrt(f(var) + EPS_F32)
    xhat = (xd - f(mean)) / stddev
    exp_gx = f(scale) / stddev * (gd - gd.mean(axis=axes, keepdims=True)
                                  - xhat * (gd * xhat).mean(axis=axes, keepdims=True))
    np.testing.assert_allclose(gx.astype(np.float64), exp_gx, rtol=tol * 4, atol=tol * 4)
    np.testing.assert_allclose(gs.astype(np.float64), (gd * xhat).sum(axis=axes),
                               rtol=tol * 4, atol=tol * 4)
    np.testing.assert_allclose(go.astype(np.float64), gd.sum(axis=axes), rtol=tol * 4, atol=tol * 4)


# ---------------------------------------------------------------- QR kernels' derivatives

HOUSEHOLDER_SHAPES = [(5, 3), (4, 4), (2, 6, 4), (3, 5)]


def _householder_input(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("shape", HOUSEHOLDER_SHAPES)
def test_householder_qr_in_lax_is_lapack_geqrf(shape, dtype):
    import jax
    from shlo2jax.ops import _householder
    with compat.enable_x64():
        a = _householder_input(shape, dtype)
        packed, taus = _householder.geqrf(a)  # LAPACK's own values
        packed_lax, taus_lax = _householder.householder_qr(a)
        np.testing.assert_allclose(packed_lax, packed, atol=1e-12)
        np.testing.assert_allclose(taus_lax, taus, atol=1e-12)
        if shape[-2] >= shape[-1]:
            np.testing.assert_allclose(_householder.householder_product_in_lax(packed, taus),
                                       _householder.householder_product(packed, taus), atol=1e-12)


# Second-order check_grads costs ~30 s a case on 2 cores: one tall real and one wide complex
# case here; the first-order reverse mode of every shape is checked against jnp.linalg.qr below.
@pytest.mark.slow
@pytest.mark.parametrize("shape,dtype", [((4, 4), np.float64), ((3, 5), np.complex128)])
def test_geqrf_and_householder_product_derivatives(shape, dtype):
    """Forward and reverse mode to second order, against finite differences."""
    import jax
    from jax.test_util import check_grads
    from shlo2jax.ops import _householder
    with compat.enable_x64():
        a = _householder_input(shape, dtype)
        check_grads(_householder.geqrf, (a,), order=2, modes=("fwd", "rev"), atol=1e-5,
                    rtol=1e-5)
        if shape[-2] >= shape[-1]:
            packed, taus = _householder.geqrf(a)
            check_grads(_householder.householder_product, (packed, taus), order=2,
                        modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("shape", [(5, 3), (4, 4), (2, 6, 4)])
def test_qr_from_the_two_kernels_has_jnp_linalg_qr_gradient(shape, dtype):
    """An exported jnp.linalg.qr is geqrf then orgqr: its gradient is jax's rule for qr."""
    import jax
    import jax.numpy as jnp
    from shlo2jax.ops import _householder
    with compat.enable_x64():
        a = _householder_input(shape, dtype)
        k = min(shape[-2:])
        q0, r0 = jnp.linalg.qr(a)
        rng = np.random.default_rng(1)
        wq, wr = rng.standard_normal(q0.shape), rng.standard_normal(r0.shape)

        def from_kernels(a):
            packed, taus = _householder.geqrf(a)
            q = _householder.householder_product(packed[..., :, :k], taus)
            return q, jnp.triu(packed[..., :k, :])

        def loss(qr, a):
            q, r = qr(a)
            return jnp.real(jnp.sum(q * wq) + jnp.sum(r * wr))

        np.testing.assert_allclose(jax.grad(lambda a: loss(from_kernels, a))(a),
                                   jax.grad(lambda a: loss(jnp.linalg.qr, a))(a),
                                   atol=1e-9, rtol=1e-9)
