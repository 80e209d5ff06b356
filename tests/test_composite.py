"""stablehlo.composite: decomposition by default, a registered JAX implementation when given."""

from __future__ import annotations

import numpy as np
import pytest

import shlo2jax
from shlo2jax import register_composite
from shlo2jax.registry import COMPOSITE_RULES

ADD_N = """
func.func private @add_n.impl(%arg0: tensor<3xi64>) -> tensor<3xi64> {
  %0 = stablehlo.constant dense<2> : tensor<3xi64>
  %1 = stablehlo.add %arg0, %0 : tensor<3xi64>
  func.return %1 : tensor<3xi64>
}
func.func @main(%x: tensor<3xi64>) -> tensor<3xi64> {
  %0 = stablehlo.composite "test.add_n" %x {
    composite_attributes = {n = 2 : i64}, decomposition = @add_n.impl
  } : (tensor<3xi64>) -> tensor<3xi64>
  %1 = stablehlo.composite "test.add_n" %0 {
    composite_attributes = {n = 2 : i64}, decomposition = @add_n.impl
  } : (tensor<3xi64>) -> tensor<3xi64>
  func.return %1 : tensor<3xi64>
}
"""

TWO_RESULTS = """
func.func private @split.impl(%a: tensor<2xf32>, %b: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %0 = stablehlo.add %a, %b : tensor<2xf32>
  %1 = stablehlo.subtract %a, %b : tensor<2xf32>
  func.return %0, %1 : tensor<2xf32>, tensor<2xf32>
}
func.func @main(%a: tensor<2xf32>, %b: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %0:2 = stablehlo.composite "test.sum_diff" %a, %b {decomposition = @split.impl, version = 1 : i32}
      : (tensor<2xf32>, tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)
  func.return %0#0, %0#1 : tensor<2xf32>, tensor<2xf32>
}
"""

X = np.array([1, 5, -3], np.int64)


@pytest.fixture
def clean_rules():
    saved = dict(COMPOSITE_RULES)
    yield
    COMPOSITE_RULES.clear()
    COMPOSITE_RULES.update(saved)


def test_decomposition_is_called():
    np.testing.assert_array_equal(np.asarray(shlo2jax.load(ADD_N)(X)), X + 4)


def test_several_results():
    a = np.array([1.0, 2.0], np.float32)
    b = np.array([0.5, 4.0], np.float32)
    s, d = shlo2jax.load(TWO_RESULTS)(a, b)
    np.testing.assert_array_equal(np.asarray(s), a + b)
    np.testing.assert_array_equal(np.asarray(d), a - b)


def test_registered_implementation_replaces_decomposition(clean_rules):
    calls = []

    @register_composite("test.add_n")
    def add_n(x, *, n):
        calls.append(n)
        return x * 10 + n

    np.testing.assert_array_equal(np.asarray(shlo2jax.load(ADD_N)(X)), (X * 10 + 2) * 10 + 2)
    assert calls == [2, 2]


def test_registered_implementation_with_several_results(clean_rules):
    register_composite("test.sum_diff", lambda a, b: (a * b, a / b))
    a = np.array([1.0, 2.0], np.float32)
    b = np.array([0.5, 4.0], np.float32)
    p, q = shlo2jax.load(TWO_RESULTS)(a, b)
    np.testing.assert_allclose(np.asarray(p), a * b)
    np.testing.assert_allclose(np.asarray(q), a / b)


def test_other_names_keep_their_decomposition(clean_rules):
    register_composite("test.other", lambda x: x)
    np.testing.assert_array_equal(np.asarray(shlo2jax.load(ADD_N)(X)), X + 4)
