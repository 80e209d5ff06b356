"""shlo2jax.transforms.inline_calls: every call reachable from a root function replaced by its
callee's body (shape refinement's retry, the comparison tools' recording)."""

import numpy as np
import pytest
from jaxlib.mlir import ir

import shlo2jax
from shlo2jax.compat import make_ir_context
from shlo2jax.errors import UnsupportedError
from shlo2jax.transforms.common import calls, function_named
from shlo2jax.transforms.inline_calls import inline_calls

TEXT = """func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = func.call @twice(%x) : (tensor<3xf32>) -> tensor<3xf32>
  %1 = func.call @twice(%0) : (tensor<3xf32>) -> tensor<3xf32>
  return %1 : tensor<3xf32>
}
func.func private @twice(%a: tensor<3xf32>) -> tensor<3xf32> {
  %0 = func.call @add(%a, %a) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
func.func private @add(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.add %a, %b : tensor<3xf32>
  return %0 : tensor<3xf32>
}"""


def test_nested_calls_are_inlined_and_compute_the_same():
    with make_ir_context():
        module = ir.Module.parse(TEXT)
        assert inline_calls(module)
        main = function_named(module, "main")
        assert calls(main) == []
        assert [op.name for op in main.regions[0].blocks[0].operations] == [
            "stablehlo.add", "stablehlo.add", "func.return"]
        assert module.operation.verify()
        text = str(module)
        assert not inline_calls(module)  # nothing left to inline
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(shlo2jax.load(text)(x)), 4 * x)


def test_other_roots_and_the_limit():
    with make_ir_context():
        module = ir.Module.parse(TEXT)
        assert inline_calls(module, root="twice")
        assert calls(function_named(module, "twice")) == []
        assert len(calls(function_named(module, "main"))) == 2  # @main's own calls stay
        with pytest.raises(UnsupportedError, match="too many calls to inline"):
            inline_calls(ir.Module.parse(TEXT), limit=1)
