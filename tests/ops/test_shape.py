"""reshape, broadcast_in_dim, broadcast, transpose, slice, concatenate, pad, reverse,
get_dimension_size and the static-result dynamism ops, against numpy."""

import ml_dtypes
import numpy as np
import pytest

from shlo2jax import value_types as T

from _helpers import assert_same_bits, op_counts, run_main, staged_jaxpr, tensor

ELEMENTS = ["i1", "i4", "i8", "i16", "i32", "i64", "ui8", "ui32", "ui64", "f8E4M3FN", "bf16",
            "f16", "f32", "f64", "complex<f32>", "complex<f64>"]


def _data(element, shape):
    """Distinct (where the type allows) deterministic values of a spec element type."""
    dtype = T.ELEMENT_DTYPES[element]
    n = int(np.prod(shape, dtype=np.int64))
    base = np.arange(n)
    if dtype == np.bool_:
        values = base % 3 == 1
    elif T.is_complex(dtype):
        values = (base + 1j * (n - base)).astype(dtype)
    elif element == "i4":
        values = (base % 16 - 8).astype(dtype)
    elif element == "f8E4M3FN":
        values = ((base % 32) - 16).astype(np.float32).astype(dtype)
    else:
        values = (base % 120).astype(dtype)
    return np.asarray(values, dtype=dtype).reshape(shape)


def _unary(element, in_shape, out_shape, op_text):
    x = _data(element, in_shape)
    tin, tout = tensor(in_shape, element), tensor(out_shape, element)
    body = f"  %r = {op_text.format(x='%a0', tin=tin, tout=tout)}\n  return %r : {tout}"
    return x, run_main(body, [x], [tin], [tout])


@pytest.mark.parametrize("element", ELEMENTS)
def test_reshape(element):
    x, out = _unary(element, (2, 3, 4), (4, 6), "stablehlo.reshape {x} : ({tin}) -> {tout}")
    assert_same_bits(out, x.reshape(4, 6))


def test_reshape_scalar_and_empty():
    x, out = _unary("f32", (1, 1), (), "stablehlo.reshape {x} : ({tin}) -> {tout}")
    assert_same_bits(out, x.reshape(()))
    x, out = _unary("i32", (0, 3), (3, 0), "stablehlo.reshape {x} : ({tin}) -> {tout}")
    assert_same_bits(out, x.reshape(3, 0))


@pytest.mark.parametrize("element", ELEMENTS)
def test_broadcast_in_dim_permuted_and_expanding(element):
    # result[i, j, k] = x[k, 0]: operand dim 0 -> result dim 2, size-1 dim 1 -> expanded dim 0.
    x, out = _unary(element, (2, 1), (3, 4, 2),
                    "stablehlo.broadcast_in_dim {x}, dims = [2, 0] : ({tin}) -> {tout}")
    expected = np.broadcast_to(x[:, 0][None, None, :], (3, 4, 2))
    assert_same_bits(out, np.ascontiguousarray(expected))


def test_broadcast_in_dim_scalar():
    x, out = _unary("bf16", (), (2, 3), "stablehlo.broadcast_in_dim {x}, dims = [] : ({tin}) -> {tout}")
    assert_same_bits(out, np.full((2, 3), x, x.dtype))


@pytest.mark.parametrize("element", ["i1", "i8", "f32", "complex<f64>"])
def test_broadcast_legacy_prepends(element):
    x, out = _unary(element, (2, 3), (4, 5, 2, 3),
                    '"stablehlo.broadcast"({x}) {{broadcast_sizes = array<i64: 4, 5>}} '
                    ': ({tin}) -> {tout}')
    assert_same_bits(out, np.ascontiguousarray(np.broadcast_to(x, (4, 5, 2, 3))))


@pytest.mark.parametrize("element", ELEMENTS)
def test_transpose(element):
    x, out = _unary(element, (2, 3, 4), (4, 2, 3),
                    "stablehlo.transpose {x}, dims = [2, 0, 1] : ({tin}) -> {tout}")
    assert_same_bits(out, np.ascontiguousarray(np.transpose(x, (2, 0, 1))))


@pytest.mark.parametrize("element", ELEMENTS)
def test_slice_strided(element):
    x, out = _unary(element, (5, 7), (2, 3),
                    "stablehlo.slice {x} [1:4:2, 0:7:3] : ({tin}) -> {tout}")
    assert_same_bits(out, np.ascontiguousarray(x[1:4:2, 0:7:3]))


def test_slice_empty():
    x, out = _unary("i16", (4,), (0,), "stablehlo.slice {x} [2:2] : ({tin}) -> {tout}")
    assert_same_bits(out, x[2:2])


@pytest.mark.parametrize("element", ELEMENTS)
def test_concatenate(element):
    a, b, c = _data(element, (2, 1)), _data(element, (2, 0)), _data(element, (2, 3))[:, ::-1]
    c = np.ascontiguousarray(c)
    types = [tensor(s, element) for s in ((2, 1), (2, 0), (2, 3))]
    tout = tensor((2, 4), element)
    body = (f"  %r = stablehlo.concatenate %a0, %a1, %a2, dim = 1 : "
            f"({', '.join(types)}) -> {tout}\n  return %r : {tout}")
    assert_same_bits(run_main(body, [a, b, c], types, [tout]), np.concatenate([a, b, c], axis=1))


def _numpy_pad(x, value, low, high, interior):
    """The spec's pad: interior padding first, then edge padding (negative = crop)."""
    for d, (lo, hi, it) in enumerate(zip(low, high, interior)):
        n = x.shape[d]
        size = n + max(n - 1, 0) * it
        shape = list(x.shape)
        shape[d] = size
        inner = np.full(shape, value, x.dtype)
        index = [slice(None)] * x.ndim
        index[d] = slice(0, size, it + 1)
        inner[tuple(index)] = x
        shape[d] = size + max(lo, 0) + max(hi, 0)
        full = np.full(shape, value, x.dtype)
        index[d] = slice(max(lo, 0), max(lo, 0) + size)
        full[tuple(index)] = inner
        index[d] = slice(-min(lo, 0), full.shape[d] + min(hi, 0))
        x = full[tuple(index)]
    return np.ascontiguousarray(x)


@pytest.mark.parametrize("element", ["i1", "i4", "i8", "ui64", "f8E4M3FN", "bf16", "f32",
                                     "complex<f32>"])
@pytest.mark.parametrize("low,high,interior", [
    ((1, 0), (2, 1), (0, 0)),       # plain edge padding
    ((0, -1), (1, 2), (1, 0)),      # negative low edge crops, interior padding
    ((-2, 1), (-1, -2), (2, 1)),    # cropping into the interior padding on both ends
    ((0, 0), (0, 0), (0, 0)),
])
def test_pad(element, low, high, interior):
    x = _data(element, (3, 4))
    value = _data(element, (7,))[-1].reshape(())
    expected = _numpy_pad(x, value, low, high, interior)
    tin, tout, tval = tensor((3, 4), element), tensor(expected.shape, element), tensor((), element)
    body = (f"  %r = stablehlo.pad %a0, %a1, low = {list(low)}, high = {list(high)}, "
            f"interior = {list(interior)} : ({tin}, {tval}) -> {tout}\n  return %r : {tout}")
    assert_same_bits(run_main(body, [x, value], [tin, tval], [tout]), expected)


@pytest.mark.parametrize("element", ELEMENTS)
def test_reverse(element):
    x, out = _unary(element, (2, 3, 4), (2, 3, 4),
                    "stablehlo.reverse {x}, dims = [0, 2] : {tin}")
    assert_same_bits(out, np.ascontiguousarray(x[::-1, :, ::-1]))


def test_reverse_no_dims():
    x, out = _unary("f64", (3,), (3,), "stablehlo.reverse {x}, dims = [] : {tin}")
    assert_same_bits(out, x)


@pytest.mark.parametrize("dim,size", [(0, 2), (1, 0), (2, 5)])
def test_get_dimension_size(dim, size):
    tin = tensor((2, 0, 5), "f32")
    body = (f"  %r = stablehlo.get_dimension_size %a0, dim = {dim} : ({tin}) -> tensor<i32>\n"
            f"  return %r : tensor<i32>")
    assert_same_bits(run_main(body, [np.zeros((2, 0, 5), np.float32)], [tin], ["tensor<i32>"]),
                 np.array(size, np.int32))


def test_mhlo_forms():
    x = _data("f32", (3, 4))
    z = np.array(-1, np.float32)
    body = """
  %0 = "mhlo.pad"(%a0, %a1) {edge_padding_low = dense<[0, -1]> : tensor<2xi64>, edge_padding_high = dense<[1, 2]> : tensor<2xi64>, interior_padding = dense<[1, 0]> : tensor<2xi64>} : (tensor<3x4xf32>, tensor<f32>) -> tensor<6x5xf32>
  %1 = "mhlo.slice"(%a0) {start_indices = dense<[0, 1]> : tensor<2xi64>, limit_indices = dense<[2, 4]> : tensor<2xi64>, strides = dense<[1, 2]> : tensor<2xi64>} : (tensor<3x4xf32>) -> tensor<2x2xf32>
  %2 = "mhlo.reverse"(%a0) {dimensions = dense<[0, 1]> : tensor<2xi64>} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %3 = "mhlo.transpose"(%a0) {permutation = dense<[1, 0]> : tensor<2xi64>} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %4 = "mhlo.broadcast_in_dim"(%a1) {broadcast_dimensions = dense<> : tensor<0xi64>} : (tensor<f32>) -> tensor<2xf32>
  return %0, %1, %2, %3, %4 : tensor<6x5xf32>, tensor<2x2xf32>, tensor<3x4xf32>, tensor<4x3xf32>, tensor<2xf32>"""
    outs = run_main(body, [x, z], ["tensor<3x4xf32>", "tensor<f32>"],
                ["tensor<6x5xf32>", "tensor<2x2xf32>", "tensor<3x4xf32>", "tensor<4x3xf32>",
                 "tensor<2xf32>"])
    assert_same_bits(outs[0], _numpy_pad(x, z, (0, -1), (1, 2), (1, 0)))
    assert_same_bits(outs[1], np.ascontiguousarray(x[0:2, 1:4:2]))
    assert_same_bits(outs[2], np.ascontiguousarray(x[::-1, ::-1]))
    assert_same_bits(outs[3], np.ascontiguousarray(x.T))
    assert_same_bits(outs[4], np.full((2,), z))


def test_dynamism_ops_with_static_results():
    x = _data("i64", (3, 1))
    body = """
  %shape = stablehlo.constant dense<[3, 2, 2]> : tensor<3xi64>
  %0 = stablehlo.dynamic_broadcast_in_dim %a0, %shape, dims = [0, 2] : (tensor<3x1xi64>, tensor<3xi64>) -> tensor<3x2x2xi64>
  %flat = stablehlo.constant dense<[3]> : tensor<1xi64>
  %1 = stablehlo.dynamic_reshape %a0, %flat : (tensor<3x1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %pv = stablehlo.constant dense<-1> : tensor<i64>
  %lo = stablehlo.constant dense<[1, -1]> : tensor<2xi64>
  %hi = stablehlo.constant dense<[0, 2]> : tensor<2xi64>
  %in = stablehlo.constant dense<[1, 0]> : tensor<2xi64>
  %2 = stablehlo.dynamic_pad %a0, %pv, %lo, %hi, %in : (tensor<3x1xi64>, tensor<i64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<6x2xi64>
  return %0, %1, %2 : tensor<3x2x2xi64>, tensor<3xi64>, tensor<6x2xi64>"""
    outs = run_main(body, [x], ["tensor<3x1xi64>"],
                ["tensor<3x2x2xi64>", "tensor<3xi64>", "tensor<6x2xi64>"])
    assert_same_bits(outs[0], np.ascontiguousarray(np.broadcast_to(x[:, None, :], (3, 2, 2))))
    assert_same_bits(outs[1], x.reshape(3))
    assert_same_bits(outs[2], _numpy_pad(x, np.int64(-1), (1, -1), (0, 2), (1, 0)))


ALL_ELEMENTS = ["i1", "i2", "i4", "i8", "i16", "i32", "i64", "ui2", "ui4", "ui8", "ui16", "ui32",
                "ui64", "f4E2M1FN", "f8E4M3FN", "f8E5M2", "f8E4M3FNUZ", "f8E5M2FNUZ",
                "f8E4M3B11FNUZ", "f8E4M3", "f8E3M4", "f8E8M0FNU", "bf16", "f16", "f32", "f64",
                "complex<f32>", "complex<f64>"]


def _any_data(element, shape, salt=0):
    """Deterministic values of any element type, narrow floats from their finite bit
    patterns (so every field of the encoding is exercised)."""
    dtype = T.ELEMENT_DTYPES[element]
    n = int(np.prod(shape, dtype=np.int64))
    if T.is_float(dtype) and T.bit_width(dtype) <= 8:
        patterns = np.arange(1 << T.bit_width(dtype)).astype(np.uint8).view(dtype)
        finite = patterns[np.isfinite(patterns.astype(np.float64))]
        return finite[(np.arange(n) * 7 + salt) % finite.size].reshape(shape)
    if T.is_integer(dtype) and T.bit_width(dtype) <= 4:
        info = ml_dtypes.iinfo(dtype)
        span = int(info.max) - int(info.min) + 1
        return ((np.arange(n) + salt) % span + int(info.min)).astype(dtype).reshape(shape)
    return np.roll(_data(element, (n + salt,)), -salt)[:n].reshape(shape) if salt else \
        _data(element, shape)


@pytest.mark.slow
@pytest.mark.parametrize("element", ALL_ELEMENTS)
def test_data_movement_every_element_type(element):
    """reshape, transpose, broadcast_in_dim, slice, concatenate, pad and reverse in one
    module, bit-exact against numpy."""
    x, y = _any_data(element, (2, 3, 4)), _any_data(element, (2, 1, 4), salt=5)
    pv = _any_data(element, (), salt=3)
    tx, ty, tp = tensor((2, 3, 4), element), tensor((2, 1, 4), element), tensor((), element)
    shapes = [(4, 6), (4, 2, 3), (2, 3, 3, 4), (1, 2, 2), (2, 4, 4), (3, 7, 4), (2, 3, 4)]
    outs = [tensor(s, element) for s in shapes]
    body = f"""
  %0 = stablehlo.reshape %a0 : ({tx}) -> {outs[0]}
  %1 = stablehlo.transpose %a0, dims = [2, 0, 1] : ({tx}) -> {outs[1]}
  %2 = stablehlo.broadcast_in_dim %a0, dims = [0, 1, 3] : ({tx}) -> {outs[2]}
  %3 = stablehlo.slice %a0 [1:2, 0:3:2, 1:4:2] : ({tx}) -> {outs[3]}
  %4 = stablehlo.concatenate %a0, %a1, dim = 1 : ({tx}, {ty}) -> {outs[4]}
  %5 = stablehlo.pad %a0, %a2, low = [1, 0, -1], high = [0, 2, 1], interior = [0, 1, 0] : ({tx}, {tp}) -> {outs[5]}
  %6 = stablehlo.reverse %a0, dims = [0, 2] : {tx}
  return %0, %1, %2, %3, %4, %5, %6 : {", ".join(outs)}"""
    results = run_main(body, [x, y, pv], [tx, ty, tp], outs)
    expected = [x.reshape(4, 6), np.transpose(x, (2, 0, 1)),
                np.broadcast_to(x[:, :, None, :], (2, 3, 3, 4)), x[1:2, 0:3:2, 1:4:2],
                np.concatenate([x, y], axis=1), _numpy_pad(x, pv, (1, 0, -1), (0, 2, 1), (0, 1, 0)),
                x[::-1, :, ::-1]]
    for out, want in zip(results, expected):
        assert_same_bits(out, np.ascontiguousarray(want))


# ------------------------------------------------------------------ broadcast of a constant

def test_constant_broadcast_once_per_region_not_per_use():
    """jax writes one scalar constant and a broadcast of it at each use; JAX re-emits a
    literal at every use, so the translation shares the broadcast: the lowered translation
    has no more constants and broadcasts than the export (real producer: jax.export)."""
    import jax
    import jax.numpy as jnp
    from jax import export as jax_export

    import shlo2jax

    def model(x):
        for _ in range(12):
            x = jnp.tanh(x * 0.5 + 1.0) * 0.5
        return x

    exported = jax_export.export(jax.jit(model))(jax.ShapeDtypeStruct((8,), jnp.float32))
    program = shlo2jax.load(exported.serialize())
    source = op_counts(exported.mlir_module())
    lowered = op_counts(jax.jit(program.entry).lower(jnp.ones(8, jnp.float32)).as_text())
    assert source["stablehlo.constant"] <= 3
    assert lowered["stablehlo.constant"] <= source["stablehlo.constant"]
    assert lowered["stablehlo.broadcast_in_dim"] <= source["stablehlo.broadcast_in_dim"]
    x = jnp.linspace(-2, 2, 8, dtype=jnp.float32)
    np.testing.assert_allclose(program.entry(x), model(x), rtol=1e-6)
    np.testing.assert_allclose(jax.grad(lambda v: program.entry(v).sum())(x),
                               jax.grad(lambda v: model(v).sum())(x), rtol=1e-5)
    xs = jnp.stack([x, -x])
    np.testing.assert_allclose(jax.vmap(program.entry)(xs), jax.vmap(model)(xs), rtol=1e-6)


def test_shape_operands_of_type_index():
    # StableHLO's release artifacts pass shapes as `tensor<Nxindex>` arguments (MLIR's
    # target-width integer, 64 bits as XLA lowers it): taken as int64 arrays
    body = """
  %0 = stablehlo.dynamic_broadcast_in_dim %a0, %a1, dims = [1] : (tensor<3xf32>, tensor<2xindex>) -> tensor<2x3xf32>
  %1 = stablehlo.dynamic_reshape %a0, %a2 : (tensor<3xf32>, tensor<2xindex>) -> tensor<3x1xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<3x1xf32>"""
    x = np.array([1, 2, 3], np.float32)
    a, b = run_main(body, [x, np.array([2, 3], np.int64), np.array([3, 1], np.int64)],
                    ["tensor<3xf32>", "tensor<2xindex>", "tensor<2xindex>"],
                    ["tensor<2x3xf32>", "tensor<3x1xf32>"])
    assert_same_bits(a, np.stack([x, x]))
    assert_same_bits(b, x.reshape(3, 1))
    assert T.parse_type("tensor<2xindex>").dtype == np.int64


def _broadcast_chain(middle_read: bool):
    import shlo2jax
    results = "tensor<2x3x4xf32>, tensor<2x3x1xf32>" if middle_read else "tensor<2x3x4xf32>"
    text = f"""func.func @main(%x: tensor<2x3xf32>) -> ({results}) {{
  %m = stablehlo.broadcast_in_dim %x, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<2x3x1xf32>
  %b = stablehlo.broadcast_in_dim %m, dims = [0, 1, 2] : (tensor<2x3x1xf32>) -> tensor<2x3x4xf32>
  %n = stablehlo.negate %m : tensor<2x3x1xf32>
  %z = stablehlo.negate %x : tensor<2x3xf32>
  return %b{", %n" if middle_read else ""} : {results}
}}"""
    return shlo2jax.load(text)


@pytest.mark.parametrize("middle_read", [False, True])
def test_a_broadcast_of_a_broadcast_is_one_broadcast(middle_read):
    # [2, 3] -> [2, 3, 1] -> [2, 3, 4] (expand_dims, then jnp's broadcasting) stages one
    # broadcast of x; the middle value is staged only where something reads it, and the
    # negate of x nothing reads is not staged at all (translate._live)
    program = _broadcast_chain(middle_read)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = program(x)
    wide = out[0] if middle_read else out
    np.testing.assert_array_equal(wide, np.broadcast_to(x[:, :, None], (2, 3, 4)))
    if middle_read:
        np.testing.assert_array_equal(out[1], -x[:, :, None])
    jaxpr = staged_jaxpr(program, x)
    broadcasts = [e for e in jaxpr.eqns if e.primitive.name == "broadcast_in_dim"]
    assert len(broadcasts) == (2 if middle_read else 1), jaxpr
    assert all(e.invars[0] is jaxpr.invars[0] for e in broadcasts), jaxpr
    assert [e.primitive.name for e in jaxpr.eqns].count("neg") == int(middle_read), jaxpr


def test_composed_broadcast_dimensions_in_any_order():
    # the outer broadcast puts the middle value's dimensions out of order: the composition
    # maps each of x's dimensions through both
    import shlo2jax
    text = """func.func @main(%x: tensor<2x3xf32>) -> tensor<3x4x2xf32> {
  %m = stablehlo.broadcast_in_dim %x, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<2x3x1xf32>
  %b = stablehlo.broadcast_in_dim %m, dims = [2, 0, 1] : (tensor<2x3x1xf32>) -> tensor<3x4x2xf32>
  return %b : tensor<3x4x2xf32>
}"""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    expected = np.broadcast_to(np.transpose(x[:, :, None], (1, 2, 0)), (3, 4, 2))
    np.testing.assert_array_equal(shlo2jax.load(text)(x), expected)
