"""shlo2jax.transforms.chlo_legalize: chlo ops without a translation rewritten into stablehlo
by jaxlib's `chlo-legalize-to-stablehlo`, only when one is missing, never half-way."""

import numpy as np

import shlo2jax
import shlo2jax.ops  # noqa: F401  (the rules registered: `None` asks the registry what is missing)
from shlo2jax.compat import make_ir_context
from shlo2jax.sources.mlir import parse_mlir
from shlo2jax.transforms.chlo_legalize import legalize_chlo


def _chlo_names(mlir_module):
    return {op.name for op in mlir_module.body.operations[0].regions[0].blocks[0].operations
            if op.name.startswith("chlo.")}


def test_legalize_rewrites_untranslated_chlo_ops():
    text = """func.func @main(%x: tensor<3xcomplex<f32>>) -> tensor<3xcomplex<f32>> {
      %0 = chlo._asin_acos_kernel %x : tensor<3xcomplex<f32>> -> tensor<3xcomplex<f32>>
      %1 = chlo.tan %0 : tensor<3xcomplex<f32>> -> tensor<3xcomplex<f32>>
      return %1 : tensor<3xcomplex<f32>>
    }"""
    context = make_ir_context()
    module = parse_mlir(text, context)
    with context:
        legalize_chlo(module, None)
        assert _chlo_names(module) == set()
        assert module.operation.verify()


def test_legalized_module_translates():
    # _asin_acos_kernel has no direct translation; after the pass, its stablehlo
    # expansion must satisfy asin(z) = atan2(re z, re w) + i sign(im z) im w.
    text = """func.func @main(%x: tensor<4xcomplex<f64>>) -> tensor<4xcomplex<f64>> {
      %0 = chlo._asin_acos_kernel %x : tensor<4xcomplex<f64>> -> tensor<4xcomplex<f64>>
      return %0 : tensor<4xcomplex<f64>>
    }"""
    program = shlo2jax.load(text)  # the loader falls back to the pass by itself
    assert "chlo._asin_acos_kernel" not in program.op_histogram()
    z = np.array([0.5 + 0.5j, -1.5 + 2j, 3 - 0.25j, 0.2 - 4j])
    w = np.asarray(program(z))
    asin = np.arctan2(z.real, w.real) + 1j * np.sign(z.imag) * w.imag
    np.testing.assert_allclose(asin, np.arcsin(z), rtol=1e-12)


def test_legalize_leaves_translatable_modules_alone():
    text = """func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
      %0 = chlo.erf %x : tensor<3xf32> -> tensor<3xf32>
      return %0 : tensor<3xf32>
    }"""
    context = make_ir_context()
    module = parse_mlir(text, context)
    with context:
        legalize_chlo(module, None)
        assert _chlo_names(module) == {"chlo.erf"}
        legalize_chlo(module, ["chlo.lgamma"])  # named but absent: nothing to do
        assert _chlo_names(module) == {"chlo.erf"}
        legalize_chlo(module, ["chlo.erf"])
        assert _chlo_names(module) == set()


def test_legalize_failure_leaves_module_untouched():
    # The pass has no f8 lowering for erfc: the module stays as it was.
    text = """func.func @main(%x: tensor<3xf8E4M3FN>) -> tensor<3xf8E4M3FN> {
      %0 = chlo.erfc %x : tensor<3xf8E4M3FN> -> tensor<3xf8E4M3FN>
      return %0 : tensor<3xf8E4M3FN>
    }"""
    context = make_ir_context()
    module = parse_mlir(text, context)
    with context:
        before = str(module)
        legalize_chlo(module, ["chlo.erfc"])
        assert str(module) == before
