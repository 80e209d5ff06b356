"""shlo2jax.transforms.constant_arguments: the uses of dimension-size arguments become
constants, the arguments stay in the signature."""

import numpy as np
from jaxlib.mlir import ir

from shlo2jax.compat import make_ir_context
from shlo2jax.transforms.common import function_named
from shlo2jax.transforms.constant_arguments import substitute_constants

TEXT = """func.func @main(%n: tensor<i32>, %s: tensor<2xindex>, %x: tensor<?xf32>) -> (tensor<i32>, tensor<2xindex>, tensor<?xf32>) {
  return %n, %s, %x : tensor<i32>, tensor<2xindex>, tensor<?xf32>
}"""


def test_uses_become_constants_and_the_arguments_stay():
    with make_ir_context():
        module = ir.Module.parse(TEXT)
        substitute_constants(module, {0: 7, 1: (2, 3)})
        assert module.operation.verify()
        main = function_named(module, "main")
        block = main.regions[0].blocks[0]
        assert len(block.arguments) == 3
        ops = [view.operation for view in block.operations]
        assert sorted(op.name for op in ops[:-1]) == ["arith.constant", "stablehlo.constant"]
        returned = [v.owner for v in ops[-1].operands[:2]]
        assert [op.name for op in returned] == ["stablehlo.constant", "arith.constant"]
        assert np.asarray(returned[0].attributes["value"]).item() == 7
        assert "dense<[2, 3]> : tensor<2xindex>" in str(returned[1])
        assert ops[-1].operands[2] == block.arguments[2]  # the others untouched
