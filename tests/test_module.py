"""shlo2jax.module: the decode's walk of a function (one walk listing its ops, read block by
block) gives the records that reading each block's operation list gives."""

import pytest
from jaxlib.mlir import ir

from shlo2jax import compat
from shlo2jax import module as M

# Ops of every arity of results (none, one, several), nested regions (a while whose body
# holds a reduce), a region of two blocks in an unregistered op (reported, its ops skipped)
# followed by ops that use values from before it, and an op without a Python class (its
# regions are read: `shape.assuming`).
_TEXT = """
func.func @main(%a: tensor<4xf32>, %n: tensor<i32>) -> (tensor<4xf32>, tensor<i32>) {
  %c = stablehlo.constant dense<1> : tensor<i32>
  %w:2 = stablehlo.while(%i = %n, %x = %a) : tensor<i32>, tensor<4xf32>
    cond {
      %p = stablehlo.compare GT, %i, %c : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %z = stablehlo.constant dense<0.0> : tensor<f32>
      %r = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0]
        : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
      %b = stablehlo.broadcast_in_dim %r, dims = [] : (tensor<f32>) -> tensor<4xf32>
      %s = stablehlo.subtract %i, %c : tensor<i32>
      stablehlo.return %s, %b : tensor<i32>, tensor<4xf32>
    }
  %u = "foo.two_blocks"(%a) ({
    ^bb0:
      %q = stablehlo.add %a, %a : tensor<4xf32>
      "foo.br"() [^bb1] : () -> ()
    ^bb1:
      "foo.yield"(%a) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  stablehlo.custom_call @nothing(%a) {has_side_effect = true} : (tensor<4xf32>) -> ()
  %t = shape.const_witness true
  %v = shape.assuming %t -> (tensor<4xf32>) {
    %m = stablehlo.multiply %w#1, %a : tensor<4xf32>
    shape.assuming_yield %m : tensor<4xf32>
  }
  %y = stablehlo.add %v, %a : tensor<4xf32>
  return %y, %w#0 : tensor<4xf32>, tensor<i32>
}
"""


def _records(module) -> list:
    def region(r):
        return (r.args, r.outputs, r.captures, [one(op) for op in r.ops])

    def one(op):
        return (op.name, op.operands, op.results, op.result_types, op.index,
                [region(r) for r in op.regions])
    return [(f.name, region(f.body)) for f in module.functions.values()] + \
        [(p[0], p[2]) for p in module.problems]


def _decoded(monkeypatch, walk: bool):
    if not walk:
        monkeypatch.setattr(M, "walked_operations", lambda operation: None)
    with compat.make_ir_context() as context:
        context.allow_unregistered_dialects = True
        module = ir.Module.parse(_TEXT)
        return M.decode_module(module, strict=False)


def test_walk_decodes_as_the_blocks_do(monkeypatch):
    walked = _decoded(monkeypatch, walk=True)
    assert compat.walked_operations is M.walked_operations  # (the walk ran)
    blocks = _decoded(monkeypatch, walk=False)
    assert _records(walked) == _records(blocks)
    problems = [(name, what) for name, _, what in walked.problems]
    assert ("foo.two_blocks", "region with 2 blocks (only single-block regions)") in problems
    main = walked.functions["main"].body
    names = [op.name for op in main.ops]
    assert names[-1] == "stablehlo.add" and "shape.assuming" in names
    assigned = main.ops[names.index("shape.assuming")]
    # the multiply inside shape.assuming reads the while's second result and an argument
    multiply = assigned.regions[0].ops[0]
    assert multiply.name == "stablehlo.multiply"
    loop = main.ops[names.index("stablehlo.while")]
    assert multiply.operands == (loop.results[1], main.args[0])
    assert assigned.regions[0].captures == tuple(sorted(set(multiply.operands)))
    assert main.ops[names.index("stablehlo.custom_call")].results == ()


@pytest.mark.parametrize("name, text, expected", [
    ("stablehlo.add", "%0 = stablehlo.add %a, %a : tensor<f32>", True),
    ("stablehlo.reduce", "%0 = stablehlo.reduce(%a init: %a) applies stablehlo.add across "
                         "dimensions = [] : (tensor<f32>, tensor<f32>) -> tensor<f32>", False),
    ("foo.bar", '%0 = "foo.bar"(%a) : (tensor<f32>) -> tensor<f32>', False),
    ("shape.assuming", "%t = shape.const_witness true\n"
                       "%0 = shape.assuming %t -> (tensor<f32>) {\n"
                       "  shape.assuming_yield %a : tensor<f32>\n}", False),
])
def test_declares_no_regions(name, text, expected):
    """Only a registered op whose own op view class declares no region counts as regionless
    (an op without a class, or unregistered, has its regions read)."""
    source = f"func.func @f(%a: tensor<f32>) -> tensor<f32> {{\n{text}\nreturn %a : tensor<f32>\n}}"
    with compat.make_ir_context() as context:
        context.allow_unregistered_dialects = True
        module = ir.Module.parse(source)
        ops = compat.walked_operations(module.operation)
        (op,) = [op for op in ops if op.name == name]
        assert compat.declares_no_regions(op) is expected


def test_custom_calls_counted():
    """A module without a custom call has no manual region to fold (decoding skips the
    rewrite's walk); one with a custom call, whatever its target, is walked."""
    plain = M.ModuleDef("m", {}, {}, [])
    assert plain.custom_calls  # (not known: walked)
    with compat.make_ir_context() as context:
        context.allow_unregistered_dialects = True
        decoded = M.decode_module(ir.Module.parse(_TEXT), strict=False)
        assert decoded.custom_calls
        without = M.decode_module(ir.Module.parse(
            "func.func @f(%a: tensor<f32>) -> tensor<f32> {\n"
            "  %0 = stablehlo.add %a, %a : tensor<f32>\n  return %0 : tensor<f32>\n}"), strict=False)
        assert not without.custom_calls


def test_view_reads_its_location_from_the_op():
    """A view (`Op.replaced`) holds no `ir.Location` of its own and formats nothing when made
    (the translation plans thousands): its location is the op's, read when first asked for,
    so holding the module's ops' locations apart (what a program letting its context go
    does: `ModuleDef.hold_locations`) is enough."""
    with compat.make_ir_context():
        op = M.Op("stablehlo.add", (0, 0), (1,), (None,), {}, (),
                  ir.Location.file("x.py", 3, 4))
    view = op.replaced(params=True)
    second = view.replaced(params=False)
    assert isinstance(op._location, ir.Location)  # (nothing formatted yet)
    assert not isinstance(view._location, ir.Location)
    assert not isinstance(second._location, ir.Location)
    op.location  # noqa: B018 - formats it
    assert second.location == view.location == op.location == "x.py:3:4"
    assert type(view._location) is str and type(second._location) is str
    assert op.replaced(params=1)._location == "x.py:3:4"
    assert op.replaced(_location="elsewhere").location == "elsewhere"


def test_hold_locations_formats_none_and_reads_each_back():
    """`ModuleDef.hold_locations` leaves no op referring to an `ir.Location` and formats only
    an op that is not at its index (none to read it back from); each held one reads back as
    formatting it would have given, a view made before reading the op's."""
    with compat.make_ir_context():
        located = [ir.Location.file("-", 3, 4), ir.Location.name("n", ir.Location.file(
            "a.py", 1, 2)), ir.Location.file("b.py", 5, 6)]
        want = [M.format_location(location, "src.mlir") for location in located]
        ops = [M.Op("stablehlo.add", (), (), (), {}, (), location, "src.mlir")
               for location in located + ["formatted", None]]
    for index, op in enumerate(ops):
        op.index = index
    ops[2].index = 7  # (not at its position)
    module = M.ModuleDef("m", {}, {}, ops)
    module.hold_locations()
    del located
    assert [type(op._location) for op in ops[:3]] == [M.held_module.HeldLocations] * 2 + [str]
    assert ops[2]._location == want[2] and ops[3]._location == "formatted"
    assert ops[4]._location is None
    view = ops[1].replaced(params=None)
    assert [op.location for op in ops[:3]] == want and view.location == want[1]
    assert want[0] == "src.mlir:3:4"
