"""ops/check.py: the conformance `check` ops and `check.*` custom-call targets. `check.eq`
returns whether its operands agree; the `expect_*` checks leave values alone and, when the
translator records checks (the conformance runner's mode), record what they compare and within
what. The runner's verdicts on recorded checks: tests/tools/test_conformance.py."""

import numpy as np
import pytest

import shlo2jax
from shlo2jax.translate import Translator, TranslatorMode

CHECKS = """
func.func @main(%x: tensor<3xf32>, %y: tensor<3xf32>, %i: tensor<2xi32>) -> tensor<3xf32> {
  stablehlo.custom_call @check.expect_eq(%i, %i) : (tensor<2xi32>, tensor<2xi32>) -> ()
  stablehlo.custom_call @check.expect_close(%x, %y) : (tensor<3xf32>, tensor<3xf32>) -> ()
  stablehlo.custom_call @check.expect_almost_eq(%x, %y) : (tensor<3xf32>, tensor<3xf32>) -> ()
  return %x : tensor<3xf32>
}
"""


def _eq(element):
    return shlo2jax.load(f"""
func.func @main(%a: tensor<3x{element}>, %b: tensor<3x{element}>) -> tensor<i1> {{
  %0 = stablehlo.custom_call @check.eq(%a, %b) : (tensor<3x{element}>, tensor<3x{element}>) -> tensor<i1>
  return %0 : tensor<i1>
}}
""")


@pytest.mark.parametrize("element,dtype", [("i32", np.int32), ("f32", np.float32)])
def test_check_eq_returns_whether_the_operands_agree(element, dtype):
    program = _eq(element)
    a = np.array([1, 2, 3], dtype)
    assert bool(program(a, a.copy()))
    assert not bool(program(a, np.array([1, 2, 4], dtype)))


def test_check_eq_takes_nan_for_nan():
    nan = np.array([np.nan, 1, 2], np.float32)
    assert bool(_eq("f32")(nan, nan.copy()))


def test_expect_checks_leave_values_alone():
    x = np.array([1.0, 2.0, 3.0], np.float32)
    out = shlo2jax.load(CHECKS)(x, x + 1, np.array([4, 5], np.int32))
    np.testing.assert_array_equal(np.asarray(out), x)


def test_expect_checks_are_recorded_with_their_kind_and_operands():
    program = shlo2jax.load(CHECKS)
    recorded = []
    body = Translator(program.module, program.options, TranslatorMode(recorder=recorded))
    x, y, i = np.array([1, 2, 3], np.float32), np.array([1, 2, 4], np.float32), np.arange(2, dtype=np.int32)
    outs = body.function_body(program["main"].definition)(x, y, i)
    np.testing.assert_array_equal(np.asarray(outs[0] if isinstance(outs, (list, tuple)) else outs), x)
    assert [check.kind for _, check, _ in recorded] == ["eq", "close", "almost_eq"]
    assert recorded[2][1].tolerance == 1e-3
    np.testing.assert_array_equal(np.asarray(recorded[1][2][1]), y)
