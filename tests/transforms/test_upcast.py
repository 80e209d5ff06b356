"""shlo2jax.transforms.upcast: a module with every float type widened to f64 (the f64 reference
backend of shlo2jax.tools.compare)."""

import pathlib
import re

import numpy as np
import pytest

import shlo2jax
from shlo2jax.errors import BackendUnavailable
from shlo2jax.transforms.upcast import upcast_module_text, widen

from _helpers import F32_BITCAST

ROOT = pathlib.Path(__file__).resolve().parents[2]
MLP = ROOT / "examples" / "mlp.mlir"


def test_f64_reference_widens_types_and_constants():
    program = shlo2jax.load(MLP)
    text = upcast_module_text(program)
    assert not re.search(r"[<x]f32\b", text)  # no f32 type is left anywhere
    assert "tensor<8x16xf64>" in text
    widened = shlo2jax.load(text)
    assert widened.entry.in_avals[0].dtype == np.float64


def test_f64_reference_refuses_float_bitcasts():
    program = shlo2jax.load(F32_BITCAST)
    with pytest.raises(BackendUnavailable, match="bitcast_convert"):
        upcast_module_text(program)


def test_complex_constants_are_split_into_f64_parts():
    # the bindings cannot build a complex dense attribute: the constant becomes
    # stablehlo.complex of two f64 constants, with the same values
    program = shlo2jax.load("""
func.func public @main(%x: tensor<2xcomplex<f32>>) -> tensor<2xcomplex<f32>> {
  %c = stablehlo.constant dense<[(1.5, -2.0), (0.25, 3.0)]> : tensor<2xcomplex<f32>>
  %0 = stablehlo.add %x, %c : tensor<2xcomplex<f32>>
  return %0 : tensor<2xcomplex<f32>>
}""")
    text = upcast_module_text(program)
    assert "complex<f32>" not in text and "stablehlo.complex" in text
    widened = shlo2jax.load(text)
    x = np.array([1 + 1j, -2 + 0.5j], np.complex64)
    out = np.asarray(widened(widen(x)))
    assert out.dtype == np.complex128
    np.testing.assert_array_equal(out, x.astype(np.complex128) + np.array([1.5 - 2j, 0.25 + 3j]))


def test_integers_and_quantized_types_are_left_alone():
    assert widen(np.arange(3, dtype=np.int32)).dtype == np.int32
    assert widen(np.ones(2, np.float16)).dtype == np.float64
    program = shlo2jax.load("""
func.func public @main(%x: tensor<3xi32>, %y: tensor<3xf32>) -> (tensor<3xi32>, tensor<3xf32>) {
  return %x, %y : tensor<3xi32>, tensor<3xf32>
}""")
    text = upcast_module_text(program)
    assert "tensor<3xi32>" in text and "tensor<3xf64>" in text and "f32" not in text
