"""Several modules called in order as one (shlo2jax/sources/module_chain.py, what a SavedModel
running several XlaCallModule ops loads as): the chained @main calls each module's @main,
passing results on; a value passed as another type than a @main takes is a LoadError. The
SavedModel that needs it is tested in tests/sources/test_saved_model.py."""

import numpy as np
import pytest

import shlo2jax
from shlo2jax.compat import make_ir_context
from shlo2jax.errors import LoadError
from shlo2jax.sources.mlir import parse_mlir
from shlo2jax.sources.module_chain import Ref, chain

DOUBLE = """func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %y = stablehlo.add %x, %x : tensor<3xf32>
  return %y : tensor<3xf32>
}"""
# (a private helper of its own: the prefix keeps it apart from the other module's symbols)
SUBTRACT = """func.func @main(%a: tensor<3xf32>, %b: tensor<3xf32>) -> (tensor<3xf32>, tensor<i32>) {
  %d = func.call @helper(%a, %b) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %c = stablehlo.constant dense<7> : tensor<i32>
  return %d, %c : tensor<3xf32>, tensor<i32>
}
func.func private @helper(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
  %d = stablehlo.subtract %a, %b : tensor<3xf32>
  return %d : tensor<3xf32>
}"""


def _modules(*texts):
    context = make_ir_context()
    return [parse_mlir(t, context, f"m{i}") for i, t in enumerate(texts)]


def test_the_chained_main_calls_each_module_in_order():
    # double(x), then subtract(double(x), y): returns the difference and double(x)
    merged = chain(_modules(DOUBLE, SUBTRACT),
                   [[Ref(None, 0)], [Ref(0, 0), Ref(None, 1)]],
                   [Ref(1, 0), Ref(0, 0), Ref(1, 1)], "test")
    fn = shlo2jax.load(merged)["main"]
    x, y = np.array([1, 2, 3], np.float32), np.array([0.5, 0.5, 0.5], np.float32)
    difference, doubled, seven = fn(x, y)
    np.testing.assert_array_equal(np.asarray(difference), 2 * x - y)
    np.testing.assert_array_equal(np.asarray(doubled), 2 * x)
    assert int(seven) == 7


def test_one_argument_passed_to_two_calls_is_one_argument():
    # subtract(double(x), x) = x
    merged = chain(_modules(DOUBLE, SUBTRACT), [[Ref(None, 0)], [Ref(0, 0), Ref(None, 0)]],
                   [Ref(1, 0)], "test")
    fn = shlo2jax.load(merged)["main"]
    assert len(fn.in_avals) == 1
    x = np.array([1, 2, 3], np.float32)
    np.testing.assert_array_equal(np.asarray(fn(x)), x)


@pytest.mark.parametrize("calls, outputs, expected", [
    ([[Ref(None, 0)], [Ref(1, 0), Ref(None, 1)]], [Ref(1, 0)],
     r"call 1 takes result 0 of call 1, which is not an earlier call's result"),
    ([[Ref(None, 0)], [Ref(None, 1)]], [Ref(0, 0)],
     r"call 1 passes 1 operands to a @main taking 2"),
    ([[Ref(None, 0)], [Ref(None, 2), Ref(None, 3)]], [Ref(0, 0)],
     r"the calls take arguments \[0, 2, 3\], not 0 to 2"),
])
def test_calls_that_do_not_fit_are_refused(calls, outputs, expected):
    with pytest.raises(LoadError, match=r"^test: " + expected):
        chain(_modules(DOUBLE, SUBTRACT), calls, outputs, "test")


def test_a_value_passed_as_another_type_is_refused():
    # SUBTRACT's i32 result passed to DOUBLE, which takes f32[3]
    with pytest.raises(LoadError, match=r"^test: call 1's operand 0 is tensor<i32>, and its "
                                        r"@main takes tensor<3xf32>"):
        chain(_modules(SUBTRACT, DOUBLE), [[Ref(None, 0), Ref(None, 1)], [Ref(0, 1)]],
              [Ref(1, 0)], "test")
