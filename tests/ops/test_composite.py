"""stablehlo.composite: decomposition by default, a registered JAX implementation when given."""

from __future__ import annotations

import numpy as np
import scipy.special
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


ATTRS_IN_LOOP = """
func.func private @scale.impl(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %x, %x : tensor<2xf32>
  func.return %0 : tensor<2xf32>
}
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c3 = stablehlo.constant dense<3> : tensor<i32>
  %0:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<2xf32>
  cond {
    %lt = stablehlo.compare LT, %i, %c3 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  } do {
    %n = stablehlo.add %i, %c1 : tensor<i32>
    %s = stablehlo.composite "test.scale" %v {composite_attributes = {factor = 1.500000e+00 : f32,
        mode = "fast", enabled = true, axes = dense<[0, 1]> : tensor<2xi64>},
        decomposition = @scale.impl, version = 2 : i32} : (tensor<2xf32>) -> tensor<2xf32>
    stablehlo.return %n, %s : tensor<i32>, tensor<2xf32>
  }
  func.return %0#1 : tensor<2xf32>
}
"""


def test_inside_a_loop_decomposition_then_registered(clean_rules):
    x = np.array([1.0, -2.0], np.float32)
    np.testing.assert_array_equal(np.asarray(shlo2jax.load(ATTRS_IN_LOOP)(x)), x * 8)
    seen = {}

    @register_composite("test.scale")
    def scale(v, *, factor, mode, enabled, axes):
        seen.update(factor=factor, mode=mode, enabled=enabled, axes=tuple(np.asarray(axes)))
        return v * factor

    np.testing.assert_allclose(np.asarray(shlo2jax.load(ATTRS_IN_LOOP)(x)), x * 1.5 ** 3)
    assert seen == dict(factor=pytest.approx(1.5), mode="fast", enabled=True, axes=(0, 1))


KERNEL_IN_DECOMPOSITION = """
func.func private @kernel.impl(%a: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.custom_call @tpu_custom_call(%a) {backend_config = "{\\"custom_call_config\\": {}}"} : (tensor<3xf32>) -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.composite "my.fused_kernel" %x {decomposition = @kernel.impl} : (tensor<3xf32>) -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
"""


def test_registered_implementation_stands_in_for_a_kernel_that_cannot_run(clean_rules):
    # The decomposition calls a TPU (Pallas) kernel: unusable here, and reported.
    with pytest.raises(shlo2jax.UnsupportedError, match="tpu_custom_call"):
        shlo2jax.load(KERNEL_IN_DECOMPOSITION)
    register_composite("my.fused_kernel", lambda x: x * 2 + 1)
    # The decomposition never runs once an implementation is registered, so its kernel is
    # not reported either.
    program = shlo2jax.load(KERNEL_IN_DECOMPOSITION)
    assert [p[0] for p in program.module.dormant_problems] == ["stablehlo.custom_call"]
    x = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_array_equal(np.asarray(program(x)), x * 2 + 1)


def test_functions_that_never_run_are_not_reported():
    text = """
func.func private @unused(%a: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.custom_call @tpu_custom_call(%a) : (tensor<3xf32>) -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
func.func private @used(%a: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.negate %a : tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = func.call @used(%x) : (tensor<3xf32>) -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
"""
    program = shlo2jax.load(text)
    x = np.array([1.0, -2.0, 3.0], np.float32)
    np.testing.assert_array_equal(np.asarray(program(x)), -x)
    assert program.module.problems == [] and len(program.module.dormant_problems) == 1
    called = text.replace("func.call @used", "func.call @unused")
    with pytest.raises(shlo2jax.UnsupportedError, match="tpu_custom_call"):
        shlo2jax.load(called)


# StableHLO's serialization writes a chlo op its portable form cannot hold as a composite of
# the op's name, its decomposition the op's expansion (jax 0.12 exports `chlo.erfc` so); here
# the expansion is a cruder one (1 - erf(x) through tanh), so that which ran can be told apart.
_CHLO_ERFC = """
func.func private @chlo.erfc.impl(%x: tensor<5xf32>) -> tensor<5xf32> {
  %one = stablehlo.constant dense<1.0> : tensor<5xf32>
  %k = stablehlo.constant dense<1.2> : tensor<5xf32>
  %0 = stablehlo.multiply %x, %k : tensor<5xf32>
  %1 = stablehlo.tanh %0 : tensor<5xf32>
  %2 = stablehlo.subtract %one, %1 : tensor<5xf32>
  func.return %2 : tensor<5xf32>
}
func.func @main(%x: tensor<5xf32>) -> tensor<5xf32> {
  %0 = stablehlo.composite "chlo.erfc" %x {decomposition = @chlo.erfc.impl, version = VERSION : i32}
      : (tensor<5xf32>) -> tensor<5xf32>
  func.return %0 : tensor<5xf32>
}
"""


@pytest.mark.parametrize("version", [1, 2])
def test_a_chlo_composite_is_the_chlo_op_as_xla_recomposes_it(version):
    """A version-1 composite named after a unary chlo op computes that op (lax.erfc: its
    values, the producer's derivative, one equation), where XLA's compile recomposes it;
    another version keeps its decomposition, which the spec defines it as."""
    import jax
    from jax import lax
    program = shlo2jax.load(_CHLO_ERFC.replace("VERSION", str(version)))
    x = np.linspace(-2.0, 2.0, 5, dtype=np.float32)
    crude = lambda x: 1.0 - jax.numpy.tanh(1.2 * x)  # noqa: E731
    want = lax.erfc if version == 1 else crude
    np.testing.assert_allclose(program(x), want(x), rtol=1e-6)
    np.testing.assert_allclose(jax.grad(lambda x: program(x).sum())(x),
                               jax.grad(lambda x: want(x).sum())(x), rtol=1e-5)
    kinds = [e.primitive.name for e in jax.make_jaxpr(program)(x).eqns[0].params["jaxpr"].eqns]
    assert kinds == (["erfc"] if version == 1 else ["jit"]), kinds


def test_the_expansion_of_a_chlo_composite_is_not_reported():
    # (its decomposition never runs: a problem in it is dormant, as in a function never called)
    text = _CHLO_ERFC.replace("VERSION", "1").replace(
        "%2 = stablehlo.subtract %one, %1 : tensor<5xf32>",
        "%2 = stablehlo.custom_call @tpu_custom_call(%1) : (tensor<5xf32>) -> tensor<5xf32>")
    program = shlo2jax.load(text)
    assert program.module.problems == []
    assert [p[0] for p in program.module.dormant_problems] == ["stablehlo.custom_call"]
    x = np.linspace(-2, 2, 5, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(program(x)), scipy.special.erfc(x), rtol=1e-6)
