"""ops/dynamic.py: the dynamic ops' handlers (dynamic_iota, dynamic_conv, set_dimension_size,
the `shape_assertion` custom call) on programs whose shapes are static. Refinement of `?`
dimensions and jax.export's shape polymorphism: tests/executables/test_polymorphic.py."""

import numpy as np
import pytest

import shlo2jax
from shlo2jax.errors import ShapeError


def test_dynamic_iota_with_static_result():
    program = shlo2jax.load("""
func.func @main() -> tensor<3x2xi32> {
  %s = stablehlo.constant dense<[3, 2]> : tensor<2xi64>
  %0 = stablehlo.dynamic_iota %s, dim = 0 : (tensor<2xi64>) -> tensor<3x2xi32>
  return %0 : tensor<3x2xi32>
}
""")
    np.testing.assert_array_equal(np.asarray(program()), [[0, 0], [1, 1], [2, 2]])


@pytest.mark.parametrize("low,high,expected", [
    ([0], [0], [1 * 1 + 2 * 2 + 3 * 3, 2 * 1 + 3 * 2 + 4 * 3]),
    ([1], [0], [0 * 1 + 1 * 2 + 2 * 3, 1 * 1 + 2 * 2 + 3 * 3, 2 * 1 + 3 * 2 + 4 * 3]),
])
def test_dynamic_conv_with_constant_padding(low, high, expected):
    n_out = len(expected)
    program = shlo2jax.load(f"""
func.func @main(%x: tensor<1x4x1xf32>, %k: tensor<3x1x1xf32>) -> tensor<1x{n_out}x1xf32> {{
  %p = stablehlo.constant dense<[[{low[0]}, {high[0]}]]> : tensor<1x2xi64>
  %0 = "stablehlo.dynamic_conv"(%x, %k, %p) {{batch_group_count = 1 : i64,
      dimension_numbers = #stablehlo.conv<[b, 0, f]x[0, i, o]->[b, 0, f]>,
      feature_group_count = 1 : i64}}
      : (tensor<1x4x1xf32>, tensor<3x1x1xf32>, tensor<1x2xi64>) -> tensor<1x{n_out}x1xf32>
  return %0 : tensor<1x{n_out}x1xf32>
}}
""")
    x = np.array([1, 2, 3, 4], np.float32).reshape(1, 4, 1)
    k = np.array([1, 2, 3], np.float32).reshape(3, 1, 1)
    np.testing.assert_array_equal(np.asarray(program(x, k)).reshape(-1), expected)


def test_set_dimension_size_with_static_result_is_identity():
    program = shlo2jax.load("""
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %n = stablehlo.constant dense<3> : tensor<i32>
  %0 = stablehlo.set_dimension_size %x, %n, dim = 0 : (tensor<3xf32>, tensor<i32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
""")
    x = np.array([1.5, -2, 3], np.float32)
    np.testing.assert_array_equal(np.asarray(program(x)), x)


ASSERTION_MODULE = """
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %a = stablehlo.constant dense<%A%> : tensor<i32>
  %b = stablehlo.constant dense<4> : tensor<i32>
  %p = stablehlo.compare EQ, %a, %b, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
  %q = stablehlo.constant dense<%P%> : tensor<i1>
  stablehlo.custom_call @shape_assertion(%q, %a, %b) {api_version = 2 : i32,
      error_message = "expected {0} == {1}", has_side_effect = true}
      : (tensor<i1>, tensor<i32>, tensor<i32>) -> ()
  stablehlo.custom_call @shape_assertion(%p, %a) {api_version = 2 : i32,
      error_message = "traced predicate on {0}", has_side_effect = true}
      : (tensor<i1>, tensor<i32>) -> ()
  return %x : tensor<2xf32>
}
"""


def test_shape_assertion_custom_call():
    x = np.array([1, 2], np.float32)
    ok = shlo2jax.load(ASSERTION_MODULE.replace("%A%", "4").replace("%P%", "true"))
    np.testing.assert_array_equal(np.asarray(ok(x)), x)
    bad = shlo2jax.load(ASSERTION_MODULE.replace("%A%", "3").replace("%P%", "false"))
    with pytest.raises(ShapeError, match=r"expected 3 == 4"):
        bad(x)
    # A predicate computed while tracing cannot be checked without a runtime check: skipped.
    traced = shlo2jax.load(ASSERTION_MODULE.replace("%A%", "3").replace("%P%", "true"))
    np.testing.assert_array_equal(np.asarray(traced(x)), x)
