"""shlo2jax.transforms.dissolve: XLA's fusions become the ops of their regions and copies their
operands (the direct lowering runs it before it merges a module)."""

import re

from jaxlib.mlir import ir

from shlo2jax.compat import make_ir_context
from shlo2jax.transforms.dissolve import dissolvable, dissolve

from _helpers import FUSIONS



def _ops(module) -> list:
    names = []

    def visit(operation):
        names.append(operation.name)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return names


def test_fusions_and_copies_dissolve_into_the_module_ops():
    with make_ir_context():
        module = ir.Module.parse(FUSIONS)
        dissolve(module)
        assert module.operation.verify()
        assert _ops(module) == ["builtin.module", "func.func", "stablehlo.add",
                                "stablehlo.multiply", "mhlo.bitcast", "func.return"]
        text = str(module)
        # the copy's user reads the fusion's argument (the fused computation's %a = %x)
        assert re.search(r"mhlo.bitcast\W+%arg0\b", text), text
        assert "return %1, %arg0, %2" in text


def test_a_copy_that_changes_its_type_stays():
    text = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
      %0 = "mhlo.copy"(%x) : (tensor<4xf32>) -> tensor<4xf32>
      return %0 : tensor<4xf32>
    }"""
    with make_ir_context():
        module = ir.Module.parse(text)
        copy = module.body.operations[0].regions[0].blocks[0].operations[0]
        assert dissolvable(copy)
        module = ir.Module.parse(text.replace("tensor<4xf32>) -> tensor<4xf32>\n",
                                              "tensor<4xf32>) -> tensor<?xf32>\n", 1)
                                 .replace("-> tensor<4xf32> {", "-> tensor<?xf32> {")
                                 .replace("return %0 : tensor<4xf32>", "return %0 : tensor<?xf32>"))
        before = str(module)
        dissolve(module)
        assert str(module) == before
