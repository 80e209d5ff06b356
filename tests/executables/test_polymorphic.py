"""Functions with `?` dimensions: shape refinement per call signature, dimension-size
arguments, jax.export shape polymorphism and its shape assertions, and the dynamic ops."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

import shlo2jax
from shlo2jax import compat
from shlo2jax.executables import polymorphic
from shlo2jax.errors import ShapeError, UnsupportedError


def _mlp(x, w, b):
    return jnp.tanh(x @ w + b).sum(axis=1, keepdims=True) * x.shape[0]


@pytest.fixture(scope="module")
def mlp_program():
    w_spec = jax.ShapeDtypeStruct((4, 3), jnp.float32)
    b_spec = jax.ShapeDtypeStruct((3,), jnp.float32)
    x_spec = jax.ShapeDtypeStruct(export.symbolic_shape("batch, 4"), jnp.float32)
    return shlo2jax.load(export.export(jax.jit(_mlp))(x_spec, w_spec, b_spec))


def _mlp_args(batch, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((batch, 4)).astype(np.float32),
            rng.standard_normal((4, 3)).astype(np.float32),
            rng.standard_normal(3).astype(np.float32))


def _expected_mlp(x, w, b):
    x, w, b = (a.astype(np.float64) for a in (x, w, b))
    return np.tanh(x @ w + b).sum(axis=1, keepdims=True) * x.shape[0]


def test_polymorphic_export_matches_original_for_three_batch_sizes(mlp_program):
    assert mlp_program.entry.input_types[0].shape == (None, 4)
    for batch in (1, 5, 16):
        args = _mlp_args(batch, seed=batch)
        out = mlp_program(*args)
        assert out.shape == (batch, 1) and out.dtype == np.float32
        np.testing.assert_allclose(np.asarray(out), _expected_mlp(*args), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(out), np.asarray(_mlp(*args)), rtol=1e-6,
                                   atol=1e-6)


def test_polymorphic_export_under_jit_retraces_per_shape(mlp_program):
    jitted = jax.jit(mlp_program)
    for batch in (2, 7):
        args = _mlp_args(batch)
        np.testing.assert_allclose(np.asarray(jitted(*args)), _expected_mlp(*args), rtol=1e-5,
                                   atol=1e-5)
    grads = jax.grad(lambda x, w, b: mlp_program(x, w, b).sum(), argnums=1)(*_mlp_args(3))
    assert grads.shape == (4, 3)


def test_shape_assertion_violation_is_reported(mlp_program):
    # The export requires batch >= 1.
    with pytest.raises(ShapeError, match="Expected value >= 1 for dimension variable 'batch'"):
        mlp_program(*_mlp_args(0))


def test_inconsistent_dimension_variable_is_reported():
    b, = export.symbolic_shape("b")
    exported = export.export(jax.jit(lambda x, y: x.sum(axis=1) + y))(
        jax.ShapeDtypeStruct((b, 4), jnp.float32), jax.ShapeDtypeStruct((b,), jnp.float32))
    program = shlo2jax.load(exported)
    x = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(np.asarray(program(x, np.arange(3, dtype=np.float32))),
                                  4 + np.arange(3, dtype=np.float32))
    with pytest.raises(ShapeError, match=r"args\[1\].shape\[0\] \(= 5\) and the specification "
                                         r"'b' \(= 3\)"):
        program(x, np.ones(5, np.float32))


def test_divisibility_constraint_is_reported():
    exported = export.export(jax.jit(lambda x: x.reshape(-1, 2, 4).sum(1)))(
        jax.ShapeDtypeStruct(export.symbolic_shape("2*b, 4"), jnp.float32))
    program = shlo2jax.load(exported)
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    np.testing.assert_array_equal(np.asarray(program(x)), x.reshape(3, 2, 4).sum(1))
    with pytest.raises(ShapeError, match="Division had remainder 1"):
        program(np.ones((3, 4), np.float32))


def test_one_refinement_per_signature(mlp_program):
    function = mlp_program.entry
    function.__dict__.pop("_specialised", None)
    start = polymorphic.refinement_count
    mlp_program(*_mlp_args(6))
    assert polymorphic.refinement_count == start + 1
    mlp_program(*_mlp_args(6, seed=1))  # same shapes: cached
    assert polymorphic.refinement_count == start + 1
    mlp_program(*_mlp_args(9))
    assert polymorphic.refinement_count == start + 2
    mlp_program(*_mlp_args(6, seed=2))
    assert polymorphic.refinement_count == start + 2


# A jax2tf-era module: %arg0 is the size of the `?` dimension (its VALUE drives the shapes).
DIM_ARG_MODULE = """
func.func public @main(%arg0: tensor<i64>, %arg1: tensor<?x4xf32>) -> tensor<2x?x4xf32> {
  %c1 = stablehlo.constant dense<2> : tensor<1xi32>
  %n = stablehlo.convert %arg0 : (tensor<i64>) -> tensor<i32>
  %n1 = stablehlo.reshape %n : (tensor<i32>) -> tensor<1xi32>
  %c4 = stablehlo.constant dense<4> : tensor<1xi32>
  %shape = stablehlo.concatenate %c1, %n1, %c4, dim = 0
      : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
  %b = stablehlo.dynamic_broadcast_in_dim %arg1, %shape, dims = [1, 2]
      : (tensor<?x4xf32>, tensor<3xi32>) -> tensor<2x?x4xf32>
  %iota = stablehlo.dynamic_iota %shape, dim = 1 : (tensor<3xi32>) -> tensor<2x?x4xf32>
  %r = stablehlo.add %b, %iota : tensor<2x?x4xf32>
  return %r : tensor<2x?x4xf32>
}
"""


def _dim_arg_expected(x):
    n = x.shape[0]
    return np.broadcast_to(x, (2, n, 4)) + np.arange(n, dtype=np.float32)[None, :, None]


def test_dimension_size_argument():
    program = shlo2jax.load(DIM_ARG_MODULE)
    for n in (1, 3):
        x = np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)
        out = program(np.array(n, np.int64), x)
        np.testing.assert_array_equal(np.asarray(out), _dim_arg_expected(x))
        # A concrete jax array is as good as numpy.
        with compat.enable_x64():
            n_array = jnp.asarray(n, jnp.int64)
        out = program(n_array, x)
        np.testing.assert_array_equal(np.asarray(out), _dim_arg_expected(x))


def test_dimension_size_value_is_part_of_the_cache_key():
    program = shlo2jax.load(DIM_ARG_MODULE)
    x = np.ones((1, 4), np.float32)  # one row broadcasts to any count: only %arg0 decides it
    start = polymorphic.refinement_count
    for n in (2, 5, 2):
        out = program(np.array(n, np.int64), x)
        expected = _dim_arg_expected(np.ones((n, 4), np.float32))
        np.testing.assert_array_equal(np.asarray(out), expected)
    # One refinement on shapes alone, then one per distinct value.
    assert polymorphic.refinement_count == start + 3


def test_inconsistent_dimension_size_argument_is_reported():
    program = shlo2jax.load(DIM_ARG_MODULE)
    with pytest.raises(ShapeError, match="shape refinement failed"):
        program(np.array(5, np.int64), np.ones((3, 4), np.float32))


def test_traced_dimension_size_argument_is_refused():
    program = shlo2jax.load(DIM_ARG_MODULE)
    x = np.ones((3, 4), np.float32)
    with pytest.raises(ShapeError, match="must be concrete"), compat.enable_x64():
        jax.jit(program)(np.array(3, np.int64), x)
    # A constant inside the jitted function is concrete: fine.
    out = jax.jit(lambda x: program(np.array(3, np.int64), x))(x)
    np.testing.assert_array_equal(np.asarray(out), _dim_arg_expected(x))


def test_static_shapes_through_jit_with_tracers():
    program = shlo2jax.load(DIM_ARG_MODULE)
    fn = jax.jit(lambda x: program(np.array(x.shape[0], np.int64), x) * 2)
    for n in (2, 4):
        x = np.ones((n, 4), np.float32)
        np.testing.assert_array_equal(np.asarray(fn(x)), 2 * _dim_arg_expected(x))


def test_non_main_function_is_refined():
    program = shlo2jax.load("""
func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
  return %arg0 : tensor<2xf32>
}
func.func public @double(%arg0: tensor<?xf32>) -> tensor<?xf32> {
  %0 = stablehlo.add %arg0, %arg0 : tensor<?xf32>
  return %0 : tensor<?xf32>
}
""")
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(program["double"](x)), 2 * x)


def test_bounded_dynamic_dimension():
    program = shlo2jax.load("""
func.func @main(%x: tensor<?x4xf32, #stablehlo.bounds<8, ?>>)
    -> tensor<?x4xf32, #stablehlo.bounds<8, ?>> {
  %0 = stablehlo.add %x, %x : tensor<?x4xf32, #stablehlo.bounds<8, ?>>
  return %0 : tensor<?x4xf32, #stablehlo.bounds<8, ?>>
}
""")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(np.asarray(program(x)), 2 * x)
    # the argument is named as the signature names it (issue 31: one format everywhere)
    assert program.entry.arg_names == ("arg_0",)
    with pytest.raises(ShapeError, match=r"argument arg_0 of @main .*exceeds its bound 8"):
        program(np.ones((9, 4), np.float32))


def test_other_public_function_of_a_dynamic_module():
    program = shlo2jax.load("""
func.func public @main(%arg0: tensor<?xf32>) -> tensor<?xf32> {
  %0 = stablehlo.negate %arg0 : tensor<?xf32>
  return %0 : tensor<?xf32>
}
func.func public @twice(%arg0: tensor<?x2xi32>) -> tensor<?x2xi32> {
  %0 = stablehlo.add %arg0, %arg0 : tensor<?x2xi32>
  return %0 : tensor<?x2xi32>
}
""")
    x = np.arange(6, dtype=np.int32).reshape(3, 2)
    np.testing.assert_array_equal(np.asarray(program["twice"](x)), 2 * x)
    np.testing.assert_array_equal(np.asarray(program(np.ones(2, np.float32))), [-1, -1])


def test_value_dependent_slice_is_specialised_on_concrete_starts():
    # limit = convert(start') + size: refinement does not see that limit - start' is the
    # static size, so the start values decide the result's shape.
    program = shlo2jax.load("""
func.func public @main(%x: tensor<?x4xf32>, %start: tensor<2xi32>) -> tensor<?x2xf32> {
  %n = stablehlo.get_dimension_size %x, dim = 0 : (tensor<?x4xf32>) -> tensor<i32>
  %n1 = stablehlo.reshape %n : (tensor<i32>) -> tensor<1xi32>
  %two = stablehlo.constant dense<2> : tensor<1xi32>
  %size = stablehlo.concatenate %n1, %two, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
  %zero = stablehlo.constant dense<0> : tensor<2xi32>
  %neg = stablehlo.compare LT, %start, %zero, SIGNED
      : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi1>
  %s = stablehlo.select %neg, %zero, %start : tensor<2xi1>, tensor<2xi32>
  %s2 = stablehlo.convert %s : tensor<2xi32>
  %limit = stablehlo.add %s2, %size : tensor<2xi32>
  %one = stablehlo.constant dense<1> : tensor<2xi32>
  %0 = stablehlo.real_dynamic_slice %x, %s, %limit, %one
      : (tensor<?x4xf32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) -> tensor<?x2xf32>
  return %0 : tensor<?x2xf32>
}
""")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for col in (0, 2, -1):
        out = program(x, np.array([0, col], np.int32))
        np.testing.assert_array_equal(np.asarray(out), x[:, max(col, 0):max(col, 0) + 2])
    with pytest.raises(ShapeError, match="must be concrete"):
        jax.jit(program)(x, np.array([0, 1], np.int32))


def test_reexport_with_concrete_shapes_and_symbolic_refused():
    program = shlo2jax.load("""
func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
  %0 = stablehlo.add %x, %x : tensor<?xf32>
  return %0 : tensor<?xf32>
}
""")
    exported = export.export(jax.jit(program))(jax.ShapeDtypeStruct((5,), jnp.float32))
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(shlo2jax.load(exported)(x)), 2 * x)
    with pytest.raises(ShapeError, match="symbolic dimensions"):
        export.export(jax.jit(program))(
            jax.ShapeDtypeStruct(export.symbolic_shape("b"), jnp.float32))


def test_export_with_jax_dynamic_custom_calls():
    # cumsum over a symbolic dimension exports `custom_call @stablehlo.dynamic_reduce_window`,
    # which only jax's refinement resolves; the model also mixes conv, softmax and scan.
    def model(x, k):
        y = jax.lax.conv_general_dilated(x, k, (1,), "SAME",
                                         dimension_numbers=("NWC", "WIO", "NWC"))
        y = jax.nn.softmax(y, axis=-1)
        carry, sums = jax.lax.scan(lambda c, row: (c * 0.5 + row, row.sum()),
                                   jnp.zeros((y.shape[0], y.shape[2])), jnp.swapaxes(y, 0, 1))
        return carry, sums, jnp.cumsum(x, axis=1)

    b, t = export.symbolic_shape("b, t")
    program = shlo2jax.load(export.export(jax.jit(model))(
        jax.ShapeDtypeStruct((b, t, 3), jnp.float32), jax.ShapeDtypeStruct((3, 3, 4), jnp.float32)))
    rng = np.random.default_rng(0)
    k = rng.standard_normal((3, 3, 4)).astype(np.float32)
    for shape in ((1, 5), (3, 2)):
        x = rng.standard_normal(shape + (3,)).astype(np.float32)
        for got, want in zip(program(x, k), model(x, k)):
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(program(x, k)[2]), np.cumsum(x, axis=1), rtol=1e-5,
                                   atol=1e-6)


def test_static_inputs_dynamic_output():
    program = shlo2jax.load("""
func.func @main(%n: tensor<i64>, %x: tensor<f32>) -> tensor<?xf32> {
  %c = stablehlo.convert %n : (tensor<i64>) -> tensor<i32>
  %s = stablehlo.reshape %c : (tensor<i32>) -> tensor<1xi32>
  %0 = stablehlo.dynamic_broadcast_in_dim %x, %s, dims = []
      : (tensor<f32>, tensor<1xi32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
""")
    out = program(np.array(4, np.int64), np.array(2.5, np.float32))
    np.testing.assert_array_equal(np.asarray(out), [2.5] * 4)


def test_shape_arguments_of_type_index_are_specialised_on_their_values():
    # StableHLO's release artifacts (op_dynamic_iota, op_dynamic_pad, ...): shapes and
    # paddings given as `tensor<Nxindex>` arguments, substituted as arith constants
    # (stablehlo.constant holds no index tensor)
    program = shlo2jax.load("""
func.func @iota(%shape: tensor<1xindex>) -> tensor<?xf32> {
  %0 = stablehlo.dynamic_iota %shape, dim = 0 : (tensor<1xindex>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
func.func @pad(%x: tensor<?xf32>, %v: tensor<f32>, %lo: tensor<1xindex>, %hi: tensor<1xindex>,
               %in: tensor<1xindex>) -> tensor<?xf32> {
  %0 = stablehlo.dynamic_pad %x, %v, %lo, %hi, %in
      : (tensor<?xf32>, tensor<f32>, tensor<1xindex>, tensor<1xindex>, tensor<1xindex>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
""")
    index = lambda *v: np.array(v, np.int64)  # noqa: E731
    for n in (2, 5):
        np.testing.assert_array_equal(program["iota"](index(n)), np.arange(n, dtype=np.float32))
    x = np.array([1, 2, 3], np.float32)
    got = program["pad"](x, np.float32(-1), index(1), index(2), index(1))
    np.testing.assert_array_equal(got, [-1, 1, -1, 2, -1, 3, -1, -1])


def test_convolution_padding_argument_is_specialised_on_its_value():
    # StableHLO's release artifacts (op_dynamic_conv): the padding a tensor<2x2xi64> argument
    program = shlo2jax.load("""
func.func @main(%x: tensor<1x4x4x1xf32>, %w: tensor<3x3x1x1xf32>, %p: tensor<2x2xi64>) -> tensor<1x?x?x1xf32> {
  %0 = "stablehlo.dynamic_conv"(%x, %w, %p) {
    batch_group_count = 1 : i64,
    dimension_numbers = #stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>,
    feature_group_count = 1 : i64} : (tensor<1x4x4x1xf32>, tensor<3x3x1x1xf32>, tensor<2x2xi64>) -> tensor<1x?x?x1xf32>
  return %0 : tensor<1x?x?x1xf32>
}
""")
    x, w = np.ones((1, 4, 4, 1), np.float32), np.ones((3, 3, 1, 1), np.float32)
    assert program(x, w, np.zeros((2, 2), np.int64)).shape == (1, 2, 2, 1)
    same = np.asarray(program(x, w, np.ones((2, 2), np.int64)))
    assert same.shape == (1, 4, 4, 1) and same[0, 0, 0, 0] == 4 and same[0, 1, 1, 0] == 9


# Issue 30: a function whose arguments are all static is planned at load. Reduced from StableHLO's
# release artifacts' op_dynamic_reshape (tensor<16xf32>, tensor<2xindex>) -> tensor<?x?xf32>,
# whose shape argument, here a float converted, cannot be specialised on its value: the `?`
# dimensions stay whatever the call, so the function cannot run.
NO_DIMENSION_ARGUMENT = """
func.func @main(%x: tensor<16xf32>, %shape: tensor<2xf32>) -> tensor<?x?xf32> {
  %s = stablehlo.convert %shape : (tensor<2xf32>) -> tensor<2xi64>
  %r = stablehlo.dynamic_reshape %x, %s : (tensor<16xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
"""
STAYS_DYNAMIC = r"stablehlo\.dynamic_reshape at -:4:\d+: result type\(s\) tensor<\?x\?xf32> " \
                r"stay dynamic after shape refinement of @main"


def test_static_arguments_whose_result_shapes_stay_dynamic_are_refused_at_load():
    with pytest.raises(UnsupportedError, match=STAYS_DYNAMIC):
        shlo2jax.load(NO_DIMENSION_ARGUMENT)
    program = shlo2jax.load(NO_DIMENSION_ARGUMENT, strict=False)
    assert [p[0] for p in program.module.problems] == ["stablehlo.dynamic_reshape"]
    start = polymorphic.refinement_count
    with pytest.raises(UnsupportedError, match=STAYS_DYNAMIC):
        program(np.ones(16, np.float32), np.array([4, 4], np.float32))
    assert polymorphic.refinement_count == start  # decided at load, not tried again


def test_static_arguments_are_planned_once_at_load():
    start = polymorphic.refinement_count
    program = shlo2jax.load("""
func.func @main(%x: tensor<4x3xf32>) -> tensor<?x?xf32> {
  %s = stablehlo.constant dense<[3, 4]> : tensor<2xi64>
  %r = stablehlo.dynamic_reshape %x, %s : (tensor<4x3xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
""")
    assert polymorphic.refinement_count == start + 1
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    for _ in range(2):
        np.testing.assert_array_equal(program(x), x.reshape(3, 4))
    assert polymorphic.refinement_count == start + 1


def test_a_copy_holds_only_the_function_and_what_it_calls():
    # (issue 32: a function planned at load is copied with its callees, not the whole module)
    program = shlo2jax.load("""
func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
  return %arg0 : tensor<2xf32>
}
func.func private @reshape(%x: tensor<4x3xf32>) -> tensor<?x?xf32> {
  %s = stablehlo.constant dense<[3, 4]> : tensor<2xi64>
  %r = stablehlo.dynamic_reshape %x, %s : (tensor<4x3xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
func.func public @f(%x: tensor<4x3xf32>) -> tensor<?x?xf32> {
  %r = func.call @reshape(%x) : (tensor<4x3xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
func.func public @unrelated(%x: tensor<?xf32>) -> tensor<?xf32> {
  return %x : tensor<?xf32>
}
""")
    context, module = polymorphic._clone(program.functions["f"])
    with context:
        names = [view.operation.attributes["sym_name"].value for view in module.body.operations]
    assert names == ["reshape", "main"]  # @f is the copy's @main
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(program["f"](x), x.reshape(3, 4))
    assert not program.module.problems


def test_static_shape_argument_is_planned_at_load_and_specialised_per_value():
    # The artifacts' op_dynamic_reshape itself: its `?` follow from the shape argument's value,
    # which only a call knows (a value that contradicts the 16 elements is a call's ShapeError).
    start = polymorphic.refinement_count
    program = shlo2jax.load("""
func.func @main(%x: tensor<16xf32>, %shape: tensor<2xindex>) -> tensor<?x?xf32> {
  %r = stablehlo.dynamic_reshape %x, %shape : (tensor<16xf32>, tensor<2xindex>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
""")
    assert polymorphic.refinement_count == start + 1 and not program.module.problems
    x = np.arange(16, dtype=np.float32)
    assert program(x, np.array([2, 8], np.int64)).shape == (2, 8)
    assert polymorphic.refinement_count == start + 2  # the value's; the shapes' was at load
    with pytest.raises(ShapeError, match="input has 16 elements, but output_shape has 0"):
        program(x, np.array([0, 1], np.int64))


def test_static_arguments_whose_refinement_fails_are_refused_at_load(monkeypatch):
    # (the verifier refuses a constant shape that contradicts its operand before refinement
    # can: the failure is simulated, to see it reported as the load's UnsupportedError)
    def failing(function, key):
        raise ShapeError(f"calling @{function.name}(...) contradicts the program's shape "
                         "constraints (shape refinement failed)")
    monkeypatch.setattr(polymorphic, "_plan", failing)
    with pytest.raises(UnsupportedError, match=r"func\.func @main at .*shape refinement failed"):
        shlo2jax.load(NO_DIMENSION_ARGUMENT)
    program = shlo2jax.load(NO_DIMENSION_ARGUMENT, strict=False)
    assert [p[0] for p in program.module.problems] == ["func.func @main"]
    with pytest.raises(UnsupportedError, match="shape refinement failed"):
        program(np.ones(16, np.float32), np.array([4, 4], np.float32))
