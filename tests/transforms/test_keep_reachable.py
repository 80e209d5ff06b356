"""shlo2jax.transforms.keep_reachable: only the functions a root reaches, through calls and
symbols in attributes (a composite's decomposition)."""

from jaxlib.mlir import ir

from shlo2jax.compat import make_ir_context
from shlo2jax.transforms.common import functions
from shlo2jax.transforms.keep_reachable import copy_reached, drop_unreachable, reached_functions

TEXT = """module attributes {mhlo.num_partitions = 1 : i32} {
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = func.call @f(%x) : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
func.func private @f(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.composite "my.op" %x {decomposition = @g} : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
func.func private @g(%x: tensor<3xf32>) -> tensor<3xf32> {
  return %x : tensor<3xf32>
}
func.func @unused(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = func.call @g(%x) : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
}"""


def test_reached_through_calls_and_decompositions():
    with make_ir_context():
        module = ir.Module.parse(TEXT)
        assert reached_functions(module, "main") == {"main", "f", "g"}
        assert reached_functions(module, "unused") == {"unused", "g"}
        assert reached_functions(module, "g") == {"g"}


def test_drop_unreachable_and_copy_reached():
    with make_ir_context():
        module = ir.Module.parse(TEXT)
        part = copy_reached(module, {"unused", "g"})
        assert set(functions(part)) == {"unused", "g"}
        assert "mhlo.num_partitions" in part.operation.attributes  # the module's attributes
        assert part.operation.verify()
        assert set(functions(module)) == {"main", "f", "g", "unused"}  # the source is intact
        drop_unreachable(module)
        assert set(functions(module)) == {"main", "f", "g"}
        assert module.operation.verify()
