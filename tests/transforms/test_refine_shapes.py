"""shlo2jax.transforms.refine_shapes: `?` dimensions refined to a call's argument shapes by
StableHLO's passes."""

import numpy as np
import pytest
from jaxlib.mlir import ir

from shlo2jax.compat import make_ir_context
from shlo2jax.transforms.common import function_named
from shlo2jax.transforms.refine_shapes import (refine_arguments, refine_shapes,
                                                refined_argument_types, strip_bounds)

TEXT = """func.func @main(%x: tensor<?xf32>, %t: !stablehlo.token) -> tensor<?xf32> {
  %0 = stablehlo.sine %x : tensor<?xf32>
  %1 = stablehlo.add %0, %x : tensor<?xf32>
  return %1 : tensor<?xf32>
}"""
KEY = (((5,), np.dtype(np.float32)), "Token")


def _main_type(module) -> str:
    return str(function_named(module, "main").attributes["function_type"])


def test_arguments_and_results_take_the_call_shapes():
    with make_ir_context():
        module = ir.Module.parse(TEXT)
        assert refined_argument_types(module, KEY) == ["tensor<5xf32>", "!stablehlo.token"]
        refine_shapes(module, KEY)
        assert _main_type(module) == "(tensor<5xf32>, !stablehlo.token) -> tensor<5xf32>"
        assert "?" not in str(module)


def test_refine_arguments_sets_only_the_arguments():
    with make_ir_context():
        module = ir.Module.parse(TEXT)
        refine_arguments(module, KEY)
        # (the pass wraps the new arguments in a cast to the old types; results stay `?`)
        assert _main_type(module).startswith("(tensor<5xf32>, !stablehlo.token) -> tensor<?xf32>")


def test_contradicting_shapes_raise():
    text = """func.func @main(%x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
      %0 = stablehlo.add %x, %y : tensor<?xf32>
      return %0 : tensor<?xf32>
    }"""
    with make_ir_context():
        module = ir.Module.parse(text)
        with pytest.raises(ir.MLIRError):
            refine_shapes(module, (((2,), np.float32), ((3,), np.float32)))


def test_strip_bounds():
    text = "tensor<?x3xf32, #stablehlo.bounds<8, ?>>"
    assert strip_bounds(text) == "tensor<?x3xf32>"
