"""shlo2jax.transforms.rename_function: a function renamed with every use of its symbol."""

from jaxlib.mlir import ir

from shlo2jax.compat import make_ir_context
from shlo2jax.transforms.common import calls, functions
from shlo2jax.transforms.rename_function import rename_function

TEXT = """func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = func.call @f(%x) : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
func.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
  return %x : tensor<3xf32>
}"""


def test_a_function_and_its_calls_take_the_new_name():
    # as shape refinement does: @main out of the way, then the specialised function is @main
    with make_ir_context():
        module = ir.Module.parse(TEXT)
        assert rename_function(module, "main", "original_main")
        assert rename_function(module, "f", "main")
        assert set(functions(module)) == {"original_main", "main"}
        call, = calls(functions(module)["original_main"])
        assert call.attributes["callee"].value == "main"
        assert module.operation.verify()
        assert not rename_function(module, "absent", "x")
