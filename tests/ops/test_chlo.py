"""CHLO ops: special functions, trig/hyperbolic, predicates, top_k, mulhi, ragged_dot,
scan, constants, the broadcasting binary ops (the chlo-legalize fallback:
tests/transforms/test_chlo_legalize.py).

Expected values come from numpy/scipy (computed in float64, then rounded) or are
written out by hand.
"""

import ml_dtypes
import numpy as np
import pytest
import scipy.special as sp

import shlo2jax
from shlo2jax import compat
from shlo2jax.compat import make_ir_context

from _helpers import tensor


def _needs_ops(*names):
    """Skips where the installed jaxlib's dialects lack one of the ops (an older jaxlib): a
    program using it does not parse there, and load reports that as a LoadError."""
    context = make_ir_context()
    missing = [n for n in names if not context.is_registered_operation(n)]
    import jaxlib
    return pytest.mark.skipif(bool(missing), reason=f"jaxlib {jaxlib.__version__} has no "
                              f"{', '.join(missing)} (a later jaxlib added it)")


def _parses(text: str) -> bool:
    from jaxlib.mlir import ir
    try:
        with make_ir_context():
            ir.Module.parse(text)
        return True
    except Exception:  # this jaxlib's parser refuses it
        return False


_REVERSE_SCAN = """func.func @f(%x: tensor<2xi32>, %i: tensor<i32>) -> tensor<2xi32> {
  %0:2 = chlo.scan(%x) inits(%i) dimension=0 attributes {is_reverse = true} {
  ^bb0(%a: tensor<i32>, %c: tensor<i32>):
    stablehlo.return %a, %c : tensor<i32>, tensor<i32>
  } : (tensor<2xi32>, tensor<i32>) -> (tensor<2xi32>, tensor<i32>)
  return %0#0 : tensor<2xi32>
}"""

BF16 = ml_dtypes.bfloat16
# (rtol, atol) per element type: a few ulp of the type.
TOL = {np.dtype(np.float16): (2e-3, 1e-3), np.dtype(BF16): (1.6e-2, 1e-2),
       np.dtype(np.float32): (2e-5, 1e-6), np.dtype(np.float64): (1e-12, 1e-14),
       np.dtype(np.complex64): (2e-5, 1e-6), np.dtype(np.complex128): (1e-12, 1e-14)}
FLOATS = [np.float16, BF16, np.float32, np.float64]


def unary(op, x, result_dtype=None):
    """Runs `%0 = chlo.<op> %x` on the array x."""
    t = tensor(x.shape, x.dtype)
    r = t if result_dtype is None else tensor(x.shape, result_dtype)
    text = f"""func.func @main(%x: {t}) -> {r} {{
      %0 = chlo.{op} %x : {t} -> {r}
      return %0 : {r}
    }}"""
    return np.asarray(shlo2jax.load(text)(x))


def binary(op, x, y, generic=False):
    tx, ty = tensor(x.shape, x.dtype), tensor(y.shape, y.dtype)
    if generic:
        line = f'%0 = "chlo.{op}"(%x, %y) : ({tx}, {ty}) -> {tx}'
    else:
        line = f"%0 = chlo.{op} %x, %y : {tx}, {ty} -> {tx}"
    text = f"""func.func @main(%x: {tx}, %y: {ty}) -> {tx} {{
      {line}
      return %0 : {tx}
    }}"""
    return np.asarray(shlo2jax.load(text)(x, y))


def assert_close(actual, expected, dtype):
    rtol, atol = TOL[np.dtype(dtype)]
    assert actual.dtype == np.dtype(dtype)
    np.testing.assert_allclose(actual.astype(np.complex128 if actual.dtype.kind == "c"
                                             else np.float64),
                               expected, rtol=rtol, atol=atol)


# ------------------------------------------------------------- real unary ops

INF = np.inf
REAL_CASES = {
    "erf": (sp.erf, [-3.0, -1.0, -0.5, 0.0, 0.3, 1.0, 2.5, INF, -INF]),
    "erfc": (sp.erfc, [-2.0, -0.5, 0.0, 0.5, 1.0, 3.0, INF]),
    "erf_inv": (sp.erfinv, [-1.0, -0.99, -0.5, 0.0, 0.25, 0.9, 1.0, 1.5]),
    "lgamma": (sp.gammaln, [0.5, 1.0, 1.5, 2.0, 3.0, 10.0, 100.0, -0.5, -2.5, 0.0, INF]),
    "digamma": (sp.psi, [0.5, 1.0, 2.5, 10.0, 100.0, -0.5, -1.5]),
    "bessel_i1e": (sp.i1e, [-5.0, -1.0, 0.0, 0.5, 2.0, 20.0]),
    "asin": (np.arcsin, [-1.0, -0.7, 0.0, 0.3, 0.99, 1.0, 2.0]),
    "acos": (np.arccos, [-1.0, -0.7, 0.0, 0.3, 0.99, 1.0, -2.0]),
    "atan": (np.arctan, [-100.0, -1.0, 0.0, 0.5, 3.0, INF]),
    "sinh": (np.sinh, [-5.0, -0.5, 0.0, 1e-3, 2.0, 10.0]),
    "cosh": (np.cosh, [-5.0, -0.5, 0.0, 1e-3, 2.0, 10.0]),
    "tan": (np.tan, [-1.5, -0.5, 0.0, 0.7, 1.2]),
    "asinh": (np.arcsinh, [-10.0, -0.5, 0.0, 1e-3, 3.0, 1e4]),
    "acosh": (np.arccosh, [1.0, 1.5, 3.0, 100.0, 0.5]),
    "atanh": (np.arctanh, [-1.0, -0.9, 0.0, 0.3, 0.99, 1.0, 1.5]),
    "square": (np.square, [-3.0, 0.5, 0.0, 7.0, -INF]),
}


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", sorted(REAL_CASES))
def test_real_unary(op, dtype):
    fn, values = REAL_CASES[op]
    x = np.array(values, dtype)
    with np.errstate(all="ignore"):
        expected = fn(x.astype(np.float64))
    assert_close(unary(op, x), expected, dtype)


def test_special_function_poles():
    # XLA's values at the poles. digamma(0) is NaN in the chlo decomposition of jaxlib <= 0.11
    # and -inf (the limit from above) from jaxlib 0.12: the translation gives what the
    # installed XLA compiles for the same chlo op, and NaN at the negative integers.
    x = np.array([0.0, -1.0, -2.0, -INF], np.float32)
    np.testing.assert_array_equal(unary("lgamma", x), [INF, INF, INF, INF])
    text = """func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
      %0 = chlo.digamma %x : tensor<3xf32> -> tensor<3xf32>
      return %0 : tensor<3xf32>
    }"""
    xla, = compat.compile_mlir_module(f"module {{ {text} }}")(x[:3])
    got = unary("digamma", x[:3])
    np.testing.assert_array_equal(got, np.asarray(xla))
    assert np.isnan(got[1:]).all() and (np.isnan(got[0]) or got[0] == -INF)


@pytest.mark.parametrize("op", ["erfc", "bessel_i1e", "lgamma", "asin"])
@pytest.mark.parametrize("dtype", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2],
                         ids=lambda d: np.dtype(d).name)
def test_f8_computes_in_f32(op, dtype):
    fn = REAL_CASES[op][0]
    x = np.array([0.5, 1.0, 1.5, -0.75], dtype)
    with np.errstate(invalid="ignore"):
        expected = fn(x.astype(np.float32)).astype(np.float32).astype(dtype)
    actual = unary(op, x)
    assert actual.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(actual.astype(np.float32), expected.astype(np.float32))


# ---------------------------------------------------------- complex unary ops

COMPLEX_FNS = {"asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh,
               "acosh": np.arccosh, "atanh": np.arctanh, "sinh": np.sinh, "cosh": np.cosh,
               "tan": np.tan, "square": np.square}
# Off the branch cuts, plus points just above the cuts (where every convention agrees).
COMPLEX_POINTS = [0.5 + 0.5j, -1.5 + 2j, 3 - 0.25j, -0.2 - 4j, 1e-3 + 1e-3j, 10 + 0.1j,
                  2 + 0j, -2 + 0j, 0.5 + 0j]


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", sorted(COMPLEX_FNS))
def test_complex_unary(op, dtype):
    x = np.array(COMPLEX_POINTS, dtype)
    assert_close(unary(op, x), COMPLEX_FNS[op](x.astype(np.complex128)), dtype)


def test_complex_branch_cut_ignores_negative_zero():
    # The chlo decomposition (what XLA and the reference interpreter compute) gives the
    # upper side's value on the asin/acos cuts for -0.0 imaginary parts too (C99 would
    # take the lower side).
    upper = np.array([2 + 0j, -2 + 0j], np.complex128)
    lower = np.array([complex(2, -0.0), complex(-2, -0.0)], np.complex128)
    for op, fn in (("asin", np.arcsin), ("acos", np.arccos)):
        np.testing.assert_allclose(unary(op, lower), fn(upper), rtol=1e-14)


def test_conj():
    x = np.array([1 + 2j, -3 - 0.5j, 0j], np.complex64)
    np.testing.assert_array_equal(unary("conj", x), np.conj(x))
    real = np.array([1.5, -2.0], np.float32)
    np.testing.assert_array_equal(unary("conj", real), real)


# --------------------------------------------------------------- predicates

@pytest.mark.parametrize("dtype", FLOATS + [ml_dtypes.float8_e5m2],
                         ids=lambda d: np.dtype(d).name)
def test_is_inf_family(dtype):
    x = np.array([INF, -INF, np.nan, 0.0, -1.0, 2.0], dtype)
    np.testing.assert_array_equal(unary("is_inf", x, "i1"), [1, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(unary("is_pos_inf", x, "i1"), [1, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(unary("is_neg_inf", x, "i1"), [0, 1, 0, 0, 0, 0])


def test_is_inf_type_without_infinity():
    # f8E4M3FN has no infinity: its largest finite value (448) is not one.
    x = np.array([448.0, -448.0, np.nan, 1.0], ml_dtypes.float8_e4m3fn)
    for op in ("is_inf", "is_pos_inf", "is_neg_inf"):
        np.testing.assert_array_equal(unary(op, x, "i1"), [0, 0, 0, 0])


# ---------------------------------------------------------- binary functions

def _next_after_expected(x, y):
    """Step x one unit in y's direction on the integer view of its bits."""
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize]
    out = []
    for a, b in zip(x, y):
        a64, b64 = float(a), float(b)
        if np.isnan(a64) or np.isnan(b64):
            out.append(np.nan)
            continue
        if a64 == b64:
            out.append(b)
            continue
        if a64 == 0.0:
            tiny = np.array([1], bits).view(x.dtype)[0]
            out.append(tiny if b64 > 0 else -tiny)
            continue
        raw = int(np.array([a], x.dtype).view(bits)[0])
        raw += 1 if (b64 > a64) == (a64 > 0) else -1
        out.append(np.array([raw], bits).view(x.dtype)[0])
    return np.array(out, x.dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_next_after(dtype):
    x = np.array([1.0, 1.0, 0.0, 0.0, -2.0, 3.0, np.nan, 1.0, -0.0], dtype)
    y = np.array([2.0, 0.0, 1.0, -1.0, -INF, 3.0, 1.0, np.nan, 0.0], dtype)
    actual = binary("next_after", x, y)
    expected = _next_after_expected(x, y)
    assert actual.dtype == expected.dtype
    nan = np.isnan(expected.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(actual.astype(np.float64)), nan)
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[x.itemsize]
    np.testing.assert_array_equal(actual.view(bits)[~nan], expected.view(bits)[~nan])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_polygamma(dtype):
    n = np.array([0.0, 1.0, 2.0, 3.0, 1.0], dtype)
    x = np.array([0.5, 2.0, 3.5, 0.1, 10.0], dtype)
    assert_close(binary("polygamma", n, x), sp.polygamma(n.astype(np.float64), x), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_zeta(dtype):
    x = np.array([2.0, 3.0, 4.5, 1.5, 10.0], dtype)
    q = np.array([1.0, 2.0, 0.5, 3.0, 1.0], dtype)
    assert_close(binary("zeta", x, q), sp.zeta(x.astype(np.float64), q), dtype)


MULHI_TYPES = {np.int8: "i8", np.int16: "i16", np.int32: "i32", np.int64: "i64",
               np.uint8: "ui8", np.uint16: "ui16", np.uint32: "ui32", np.uint64: "ui64"}


@_needs_ops("chlo.mulhi", "mhlo.mulhi")
@pytest.mark.parametrize("dtype", list(MULHI_TYPES), ids=lambda d: np.dtype(d).name)
def test_mulhi(dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(0)
    edges = [info.min, info.max, 0, 1, info.max // 2 + 1] + ([-1, info.min + 1] if info.min else [])
    x = np.array(edges + list(rng.integers(info.min, info.max, 12, dtype, endpoint=True)), dtype)
    y = np.array(list(reversed(edges)) + list(rng.integers(info.min, info.max, 12, dtype,
                                                            endpoint=True)), dtype)
    x, y = np.repeat(x, len(y)), np.tile(y, len(x))
    bits = info.bits
    expected = [(int(a) * int(b)) >> bits for a, b in zip(x, y)]  # floor shift = arithmetic
    t = tensor(x.shape, MULHI_TYPES[dtype])
    text = f"""func.func @main(%x: {t}, %y: {t}) -> {t} {{
      %0 = "chlo.mulhi"(%x, %y) : ({t}, {t}) -> {t}
      return %0 : {t}
    }}"""
    actual = np.asarray(shlo2jax.load(text)(x, y))
    assert actual.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(actual, np.array(expected, dtype))


# ------------------------------------------------------------------- top_k

@pytest.mark.parametrize("dtype,element", [(np.float32, "f32"), (np.float16, "f16"),
                                           (np.int8, "i8"), (np.uint64, "ui64"),
                                           (np.int32, "i32"), (np.bool_, "i1")])
def test_top_k(dtype, element):
    x = np.array([[3, 1, 4, 1, 5, 9], [2, 6, 5, 3, 5, 0]]).astype(dtype)
    k = 3
    t, tv, ti = tensor(x.shape, element), tensor((2, k), element), tensor((2, k), "i32")
    text = f"""func.func @main(%x: {t}) -> ({tv}, {ti}) {{
      %0:2 = chlo.top_k(%x, k = {k}) : {t} -> ({tv}, {ti})
      return %0#0, %0#1 : {tv}, {ti}
    }}"""
    values, indices = shlo2jax.load(text)(x)
    # Largest first; among equal values the lower index first.
    order = np.argsort(-x.astype(np.float64), axis=-1, kind="stable")[:, :k]
    np.testing.assert_array_equal(np.asarray(indices), order)
    np.testing.assert_array_equal(np.asarray(values), np.take_along_axis(x, order, -1))


def test_top_k_total_order():
    # As the reference decomposition (a stable sort with a TOTALORDER comparator):
    # +NaN first, -NaN last, and +0.0 above -0.0.
    x = np.array([1.0, np.nan, -0.0, 0.0, -np.nan, INF, 2.0, 0.0], np.float32)
    text = """func.func @main(%x: tensor<8xf32>) -> (tensor<6xf32>, tensor<6xi32>) {
      %0:2 = chlo.top_k(%x, k = 6) : tensor<8xf32> -> (tensor<6xf32>, tensor<6xi32>)
      return %0#0, %0#1 : tensor<6xf32>, tensor<6xi32>
    }"""
    values, indices = shlo2jax.load(text)(x)
    np.testing.assert_array_equal(indices, [1, 5, 6, 0, 3, 7])
    np.testing.assert_array_equal(values, [np.nan, INF, 2.0, 1.0, 0.0, 0.0])


# --------------------------------------------------------------- constants

def test_constant_and_constant_like():
    text = """func.func @main(%x: tensor<2x3xf32>)
        -> (tensor<3xi32>, tensor<2x3xf32>, tensor<2x3xi1>) {
      %0 = chlo.constant dense<[1, -2, 3]> : tensor<3xi32>
      %1 = "chlo.constant_like"(%x) {value = 2.5 : f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
      %2 = "chlo.constant_like"(%x) {value = true} : (tensor<2x3xf32>) -> tensor<2x3xi1>
      return %0, %1, %2 : tensor<3xi32>, tensor<2x3xf32>, tensor<2x3xi1>
    }"""
    a, b, c = shlo2jax.load(text)(np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(a, np.array([1, -2, 3], np.int32))
    np.testing.assert_array_equal(b, np.full((2, 3), 2.5, np.float32))
    np.testing.assert_array_equal(c, np.ones((2, 3), bool))


def test_constant_like_complex_and_dynamic_shape():
    text = """func.func @main(%x: tensor<?xcomplex<f64>>) -> tensor<?xcomplex<f64>> {
      %0 = "chlo.constant_like"(%x) {value = #complex.number<:f64 1.5, -2.0> : complex<f64>}
          : (tensor<?xcomplex<f64>>) -> tensor<?xcomplex<f64>>
      return %0 : tensor<?xcomplex<f64>>
    }"""
    actual = shlo2jax.load(text)(np.zeros(4, np.complex128))
    np.testing.assert_array_equal(actual, np.full(4, 1.5 - 2j))


# -------------------------------------------------------------- ragged_dot

def _ragged_dot_text(lhs, rhs, groups, out, dims):
    return f"""func.func @main(%l: {lhs}, %r: {rhs}, %g: {groups}) -> {out} {{
      %0 = "chlo.ragged_dot"(%l, %r, %g) {{
        ragged_dot_dimension_numbers = #chlo.ragged_dot<{dims}>,
        precision_config = [#chlo<precision DEFAULT>, #chlo<precision HIGHEST>]
      }} : ({lhs}, {rhs}, {groups}) -> {out}
      return %0 : {out}
    }}"""


def test_ragged_dot_ragged_rows():
    # Mode 1: lhs rows are split into groups, each multiplied by its own rhs matrix;
    # rows past the last group come out as zeros.
    rng = np.random.default_rng(1)
    lhs, rhs = rng.normal(size=(7, 4)), rng.normal(size=(3, 4, 5))
    groups = np.array([2, 0, 3], np.int64)
    dims = ("lhs_batching_dimensions = [], rhs_batching_dimensions = [], "
            "lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1], "
            "lhs_ragged_dimensions = [0], rhs_group_dimensions = [0]")
    text = _ragged_dot_text("tensor<7x4xf64>", "tensor<3x4x5xf64>", "tensor<3xi64>",
                            "tensor<7x5xf64>", dims)
    expected = np.zeros((7, 5))
    start = 0
    for g, size in enumerate(groups):
        expected[start:start + size] = lhs[start:start + size] @ rhs[g]
        start += size
    np.testing.assert_allclose(shlo2jax.load(text)(lhs, rhs, groups), expected, rtol=1e-12)


def test_ragged_dot_batched_ragged_rows():
    rng = np.random.default_rng(2)
    lhs = rng.normal(size=(2, 5, 3)).astype(np.float32)
    rhs = rng.normal(size=(2, 2, 3, 4)).astype(np.float32)
    groups = np.array([[3, 2], [1, 4]], np.int32)
    dims = ("lhs_batching_dimensions = [0], rhs_batching_dimensions = [1], "
            "lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [2], "
            "lhs_ragged_dimensions = [1], rhs_group_dimensions = [0]")
    text = _ragged_dot_text("tensor<2x5x3xf32>", "tensor<2x2x3x4xf32>", "tensor<2x2xi32>",
                            "tensor<2x5x4xf32>", dims)
    expected = np.zeros((2, 5, 4))
    for b in range(2):
        start = 0
        for g in range(2):
            size = groups[b, g]
            expected[b, start:start + size] = lhs[b, start:start + size] @ rhs[g, b]
            start += size
    np.testing.assert_allclose(shlo2jax.load(text)(lhs, rhs, groups), expected, rtol=1e-5,
                               atol=1e-6)


def test_ragged_dot_ragged_contraction():
    # Mode 2: the contracting dimension is split; one output matrix per group.
    rng = np.random.default_rng(3)
    lhs, rhs = rng.normal(size=(3, 6)), rng.normal(size=(6, 2))
    groups = np.array([1, 4, 1], np.int64)
    dims = ("lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0], "
            "lhs_ragged_dimensions = [1]")
    text = _ragged_dot_text("tensor<3x6xf64>", "tensor<6x2xf64>", "tensor<3xi64>",
                            "tensor<3x3x2xf64>", dims)
    bounds = np.concatenate([[0], np.cumsum(groups)])
    expected = np.stack([lhs[:, a:b] @ rhs[a:b] for a, b in zip(bounds[:-1], bounds[1:])])
    np.testing.assert_allclose(shlo2jax.load(text)(lhs, rhs, groups), expected, rtol=1e-12)


# -------------------------------------------------------------------- scan

@_needs_ops("chlo.scan")
@pytest.mark.skipif(not _parses(_REVERSE_SCAN), reason="this jaxlib's chlo.scan has no "
                    "is_reverse (a later jaxlib added it)")
def test_scan_prefix_sum_along_dim1_and_reverse():
    text = """func.func @main(%x: tensor<2x3xi32>)
        -> (tensor<2x3xi32>, tensor<2xi32>, tensor<2x3xi32>, tensor<2xi32>) {
      %init = stablehlo.constant dense<[0, 100]> : tensor<2xi32>
      %0:2 = chlo.scan(%x) inits(%init) dimension=1 {
      ^bb0(%a: tensor<2xi32>, %c: tensor<2xi32>):
        %1 = stablehlo.add %a, %c : tensor<2xi32>
        stablehlo.return %1, %1 : tensor<2xi32>, tensor<2xi32>
      } : (tensor<2x3xi32>, tensor<2xi32>) -> (tensor<2x3xi32>, tensor<2xi32>)
      %2:2 = chlo.scan(%x) inits(%init) dimension=1 attributes {is_reverse = true} {
      ^bb0(%a: tensor<2xi32>, %c: tensor<2xi32>):
        %1 = stablehlo.add %a, %c : tensor<2xi32>
        stablehlo.return %1, %1 : tensor<2xi32>, tensor<2xi32>
      } : (tensor<2x3xi32>, tensor<2xi32>) -> (tensor<2x3xi32>, tensor<2xi32>)
      return %0#0, %0#1, %2#0, %2#1 : tensor<2x3xi32>, tensor<2xi32>, tensor<2x3xi32>, tensor<2xi32>
    }"""
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    fwd, carry, rev, rcarry = shlo2jax.load(text)(x)
    np.testing.assert_array_equal(fwd, [[1, 3, 6], [104, 109, 115]])
    np.testing.assert_array_equal(carry, [6, 115])
    np.testing.assert_array_equal(rev, [[6, 5, 3], [115, 111, 106]])
    np.testing.assert_array_equal(rcarry, [6, 115])


@_needs_ops("chlo.scan")
def test_scan_two_inputs_two_carries_distinct_outputs():
    # Outputs differ from carries: out = running count, carry = (running sum, count).
    text = """func.func @main(%x: tensor<4xf32>, %w: tensor<4xf32>)
        -> (tensor<4xf32>, tensor<f32>, tensor<f32>) {
      %s0 = stablehlo.constant dense<0.0> : tensor<f32>
      %n0 = stablehlo.constant dense<10.0> : tensor<f32>
      %0:3 = chlo.scan(%x, %w) inits(%s0, %n0) dimension=0 {
      ^bb0(%a: tensor<f32>, %b: tensor<f32>, %s: tensor<f32>, %n: tensor<f32>):
        %p = stablehlo.multiply %a, %b : tensor<f32>
        %s1 = stablehlo.add %s, %p : tensor<f32>
        %n1 = stablehlo.add %n, %b : tensor<f32>
        stablehlo.return %p, %s1, %n1 : tensor<f32>, tensor<f32>, tensor<f32>
      } : (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>)
          -> (tensor<4xf32>, tensor<f32>, tensor<f32>)
      return %0#0, %0#1, %0#2 : tensor<4xf32>, tensor<f32>, tensor<f32>
    }"""
    x = np.array([1, 2, 3, 4], np.float32)
    w = np.array([0.5, 1, 2, -1], np.float32)
    out, s, n = shlo2jax.load(text)(x, w)
    np.testing.assert_array_equal(out, x * w)
    assert float(s) == float(np.sum(x * w)) and float(n) == 10 + float(np.sum(w))


# --------------------------------------------------------- broadcasting ops

def broadcast_op(op, x, y, result, attrs=""):
    tx, ty, tr = tensor(x.shape, x.dtype), tensor(y.shape, y.dtype), tensor(*result)
    text = f"""func.func @main(%x: {tx}, %y: {ty}) -> {tr} {{
      %0 = chlo.broadcast_{op} %x, %y {attrs} : ({tx}, {ty}) -> {tr}
      return %0 : {tr}
    }}"""
    return np.asarray(shlo2jax.load(text)(x, y))


def test_broadcast_numpy_style():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.array([10, 20, 30], np.float32)
    np.testing.assert_array_equal(broadcast_op("add", x, y, ((2, 3), np.float32)), x + y)
    np.testing.assert_array_equal(broadcast_op("subtract", y, x, ((2, 3), np.float32)), y - x)
    # Degenerate (size-1) dimensions stretch on both sides.
    col, row = np.array([[1], [2]], np.int32), np.array([[10, 20, 30]], np.int32)
    np.testing.assert_array_equal(broadcast_op("multiply", col, row, ((2, 3), "i32")),
                                  col * row)
    scalar = np.array(2.0, np.float32)
    np.testing.assert_array_equal(broadcast_op("maximum", x, scalar, ((2, 3), np.float32)),
                                  np.maximum(x, 2))


def test_broadcast_dimensions():
    # broadcast_dimensions places the lower-rank operand: here on dimension 0, not numpy's 1.
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    y = np.array([100, 200], np.int32)
    actual = broadcast_op("add", x, y, ((2, 3), "i32"), "{broadcast_dimensions = array<i64: 0>}")
    np.testing.assert_array_equal(actual, x + y[:, None])


def test_broadcast_compare():
    x = np.array([[1.0, np.nan, -0.0]], np.float32)
    y = np.array([[1.0], [0.0]], np.float32)
    lt = broadcast_op("compare", x, y, ((2, 3), "i1"),
                      "{comparison_direction = #chlo<comparison_direction LT>}")
    np.testing.assert_array_equal(lt, x < y)
    ge = broadcast_op("compare", x, y, ((2, 3), "i1"),
                      "{comparison_direction = #chlo<comparison_direction GE>, "
                      "compare_type = #chlo<comparison_type FLOAT>}")
    np.testing.assert_array_equal(ge, x >= y)
    # TOTALORDER: -0.0 < +0.0 and NaN above everything.
    total_lt = broadcast_op("compare", x, y, ((2, 3), "i1"),
                            "{comparison_direction = #chlo<comparison_direction LT>, "
                            "compare_type = #chlo<comparison_type TOTALORDER>}")
    np.testing.assert_array_equal(total_lt, [[False, False, True], [False, False, True]])


def test_broadcast_integer_ops():
    x = np.array([[7, -7, 5]], np.int32)
    y = np.array([[2], [-3]], np.int32)
    np.testing.assert_array_equal(broadcast_op("remainder", x, y, ((2, 3), "i32")),
                                  np.fmod(x, y))
    np.testing.assert_array_equal(broadcast_op("divide", x, y, ((2, 3), "i32")),
                                  np.trunc(x / y).astype(np.int32))
    np.testing.assert_array_equal(broadcast_op("and", x, y, ((2, 3), "i32")), x & y)
    np.testing.assert_array_equal(broadcast_op("xor", x, y, ((2, 3), "i32")), x ^ y)
    s = np.array([1, 2], np.int32)
    np.testing.assert_array_equal(
        broadcast_op("shift_left", x, s, ((2, 3), "i32"), "{broadcast_dimensions = array<i64: 0>}"),
        x << s[:, None])


def test_broadcast_complex_and_special():
    re = np.array([1.0, 2.0, 3.0], np.float32)
    im = np.array(0.5, np.float32)
    np.testing.assert_array_equal(broadcast_op("complex", re, im, ((3,), np.complex64)),
                                  re + 0.5j)
    x = np.array([[2.0], [3.0]], np.float64)
    q = np.array([1.0, 2.0], np.float64)
    np.testing.assert_allclose(broadcast_op("zeta", x, q, ((2, 2), np.float64)), sp.zeta(x, q),
                               rtol=1e-12)
    n = np.array(1.0, np.float64)
    np.testing.assert_allclose(broadcast_op("polygamma", n, x, ((2, 1), np.float64)),
                               sp.polygamma(1, x), rtol=1e-12)
    y = np.array([INF], np.float32)
    a = np.array([[1.0, 2.0]], np.float32)
    np.testing.assert_array_equal(broadcast_op("next_after", a, y, ((1, 2), np.float32)),
                                  np.nextafter(a, np.float32(INF)))


def test_broadcast_remaining_binary_ops():
    # Each op of the broadcast_* family not covered above, on (2, 1) x (3,) operands.
    x = np.array([[1.5], [-2.0]], np.float32)
    y = np.array([0.5, 2.0, -3.0], np.float32)
    np.testing.assert_allclose(broadcast_op("atan2", x, y, ((2, 3), np.float32)),
                               np.arctan2(x, y), rtol=1e-6)
    np.testing.assert_allclose(broadcast_op("power", np.abs(x), y, ((2, 3), np.float32)),
                               np.abs(x) ** y, rtol=1e-6)
    np.testing.assert_array_equal(broadcast_op("minimum", x, y, ((2, 3), np.float32)),
                                  np.minimum(x, y))
    a = np.array([[-16], [7]], np.int8)
    k = np.array([1, 3, 9], np.int8)     # 9 >= the bit width
    np.testing.assert_array_equal(broadcast_op("shift_right_arithmetic", a, k, ((2, 3), "i8")),
                                  np.array([[-8, -2, -1], [3, 0, 0]], np.int8))
    np.testing.assert_array_equal(broadcast_op("shift_right_logical", a, k, ((2, 3), "i8")),
                                  np.array([[120, 30, 0], [3, 0, 0]], np.uint8).view(np.int8))
    np.testing.assert_array_equal(broadcast_op("or", a, k, ((2, 3), "i8")), a | k)


def test_broadcast_select():
    text = """func.func @main(%p: tensor<2x1xi1>, %a: tensor<3xf32>, %b: tensor<f32>)
        -> tensor<2x3xf32> {
      %0 = chlo.broadcast_select %p, %a, %b
          : (tensor<2x1xi1>, tensor<3xf32>, tensor<f32>) -> tensor<2x3xf32>
      return %0 : tensor<2x3xf32>
    }"""
    p = np.array([[True], [False]])
    a = np.array([1, 2, 3], np.float32)
    b = np.array(-1, np.float32)
    np.testing.assert_array_equal(shlo2jax.load(text)(p, a, b), np.where(p, a, b))


# ------------------------------------------------------------ mhlo spellings

@_needs_ops("mhlo.mulhi")
def test_mhlo_twins():
    text = """func.func @main(%x: tensor<2x4xf32>, %r: tensor<2x4x3xf32>, %g: tensor<2xi64>,
                          %i: tensor<3xui16>) -> (tensor<2x4xf32>, tensor<2x3xf32>, tensor<2x3xi32>,
                                                   tensor<2x3xf32>, tensor<3xui16>) {
      %0 = "mhlo.erf"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
      %1:2 = "mhlo.topk"(%x) {k = 3 : i64, largest = false}
          : (tensor<2x4xf32>) -> (tensor<2x3xf32>, tensor<2x3xi32>)
      %2 = "mhlo.ragged_dot"(%x, %r, %g) {ragged_dot_dimension_numbers = #mhlo.ragged_dot<
          dot_dimension_numbers = #mhlo.dot<lhs_contracting_dimensions = [1],
                                            rhs_contracting_dimensions = [1]>,
          lhs_ragged_dimensions = [0], rhs_group_dimensions = [0]>}
          : (tensor<2x4xf32>, tensor<2x4x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
      %3 = "mhlo.mulhi"(%i, %i) : (tensor<3xui16>, tensor<3xui16>) -> tensor<3xui16>
      return %0, %1#0, %1#1, %2, %3
          : tensor<2x4xf32>, tensor<2x3xf32>, tensor<2x3xi32>, tensor<2x3xf32>, tensor<3xui16>
    }"""
    x = np.array([[0.5, -1.0, 0.5, 2.0], [3.0, 1.0, -2.0, 1.0]], np.float32)
    r = np.arange(24, dtype=np.float32).reshape(2, 4, 3) / 10
    g = np.array([1, 1], np.int64)
    i = np.array([65535, 256, 3], np.uint16)
    erf, values, indices, dot, hi = shlo2jax.load(text)(x, r, g, i)
    np.testing.assert_allclose(erf, sp.erf(x.astype(np.float64)), rtol=2e-5)
    # Smallest first; ties keep the lower index first.
    np.testing.assert_array_equal(indices, [[1, 0, 2], [2, 1, 3]])
    np.testing.assert_array_equal(values, np.take_along_axis(x, np.asarray(indices), -1))
    np.testing.assert_allclose(dot, np.stack([x[0] @ r[0], x[1] @ r[1]]), rtol=1e-5)
    np.testing.assert_array_equal(hi, [65534, 1, 0])
