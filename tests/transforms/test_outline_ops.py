"""shlo2jax.transforms.outline_ops: ops cut out into a module of their own, one function per
distinct op (the direct lowering's islands)."""

import pytest
from jaxlib.mlir import ir

from shlo2jax.compat import make_ir_context
from shlo2jax.transforms.outline_ops import Island, outline

TEXT = """func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.custom_call @mhlo.erf(%x) : (tensor<4xf32>) -> tensor<4xf32> loc("a.py":3:5)
  %1 = stablehlo.custom_call @mhlo.erf(%y) : (tensor<4xf32>) -> tensor<4xf32> loc("a.py":4:7)
  %2 = stablehlo.composite "my.op" %0, %1 {decomposition = @SUFFIX} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}
func.func private @SUFFIX(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""


def _functions(bytecode):
    """(the module, its functions by name): the functions live as long as the module."""
    module = ir.Module.parse(bytecode)
    return module, {op.attributes["sym_name"].value: op for op in module.body.operations}


@pytest.mark.parametrize("decomposition", ["decomposition", "shlo2jax_island_7"])
def test_one_function_per_distinct_op_and_the_functions_they_refer_to(decomposition):
    with make_ir_context():
        module = ir.Module.parse(TEXT.replace("SUFFIX", decomposition))
        ops = [view.operation for view in
               list(module.body.operations[0].regions[0].blocks[0].operations)[:3]]
        outlined = outline(ops, ("erf", "erf", "composite"), module, "a.py")
        # the two erf calls (same op, types, attributes) share one function
        assert outlined.slots == (0, 0, 1)
        assert outlined.ops == ("stablehlo.custom_call",) * 2 + ("stablehlo.composite",)
        # a referenced function named like an outlined one moves the prefix out of its way
        prefix = "_shlo2jax_island_" if decomposition.startswith("shlo2jax") else "shlo2jax_island_"
        assert outlined.prefix == prefix
        held, functions = _functions(outlined.bytecode)  # (held: the functions live in it)
        assert set(functions) == {f"{prefix}0", f"{prefix}1", decomposition}
        erf = functions[f"{prefix}0"].operation
        assert str(erf.attributes["function_type"]) == "(tensor<4xf32>) -> tensor<4xf32>"
        assert [op.name for op in erf.regions[0].blocks[0].operations] == [
            "stablehlo.custom_call", "func.return"]
        # the source module is left as it was
        assert "stablehlo.custom_call" in str(module) and len(module.body.operations) == 2
    records = outlined.records
    assert [type(r) for r in records] == [Island] * 3
    assert records[0].why == "erf" and "a.py:3:5" in records[0].location
