"""shlo2jax.held_module: a program whose large constants add up to RELEASE_BYTES lets its MLIR
module and context go; its ops' locations are held apart (`HeldLocations`) and formatted when
first read, with the text that formatting each op's `ir.Location` gives."""

import gc

import jax
import numpy as np
import pytest
from jaxlib.mlir import ir

import shlo2jax
from shlo2jax import held_module, registry
from shlo2jax.held_module import HeldLocations

# A constant outlined once the thresholds are lowered (non-splat), ops inside a region, and
# locations of each kind: a file position, `-` (the source's name), a name around a call-site
# chain, a bare name, none.
_TEXT = """
func.func @main(%x: tensor<8xf32>) -> tensor<f32> {
  %w = stablehlo.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<8xf32> loc("w.py":1:2)
  %0 = stablehlo.multiply %x, %w : tensor<8xf32> loc("-":7:9)
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%0 init: %z) applies stablehlo.add across dimensions = [0]
    : (tensor<8xf32>, tensor<f32>) -> tensor<f32> loc("jit(f)/reduce_sum"(callsite("g"("a.py":3:4) at "b.py":5:6)))
  %s = "test.released_wrong_shape"(%r) : (tensor<f32>) -> tensor<f32> loc("bare")
  return %s : tensor<f32>
}"""


@pytest.fixture
def rule():
    """A rule whose result contradicts the op's type (a trace-time error naming the op's
    location), registered while the test runs."""
    @registry.register_op("test.released_wrong_shape")
    def wrong_shape(ctx, op, x):
        return jax.numpy.stack([x, x])
    yield
    del registry.OP_RULES["test.released_wrong_shape"]


def _load(monkeypatch, **kwargs):
    """`_TEXT` loaded as a program holding large constants (its module let go)."""
    with monkeypatch.context() as patched:
        patched.setattr(held_module, "LARGE_CONSTANT_BYTES", 16)
        patched.setattr(held_module, "RELEASE_BYTES", 0)
        program = shlo2jax.load(_TEXT, source_name="m.mlir", **kwargs)
    assert program.released_mlir_module
    return program


def test_released_locations_are_formatted_when_first_read(monkeypatch, rule):
    kept = shlo2jax.load(_TEXT, source_name="m.mlir")  # (its module held: eager formatting)
    assert not kept.released_mlir_module
    want = [op.location for op in kept.module.ops]
    assert want[:2] == ["w.py:1:2", "m.mlir:7:9"] and want[-1] == "bare"
    gc.collect()  # (contexts other tests left as garbage)
    contexts = ir.Context._get_live_count()
    program = _load(monkeypatch)
    gc.collect()
    assert ir.Context._get_live_count() <= contexts  # neither the program's nor another
    ops = program.module.ops
    assert all(type(op._location) is HeldLocations for op in ops)  # nothing formatted
    # a view made before the first read reads the op's
    view = ops[1].replaced(params=None)
    assert [op.location for op in ops] == want
    assert view.location == want[1]
    assert all(type(op._location) is str for op in ops)
    # the first read parsed the held locations in a context of their own (one)
    gc.collect()
    assert ir.Context._get_live_count() <= contexts + 1


def test_an_error_at_trace_names_a_held_location(monkeypatch, rule):
    program = _load(monkeypatch)
    assert type(program.module.ops[-1]._location) is HeldLocations
    with pytest.raises(shlo2jax.TranslationError,
                       match=r"test.released_wrong_shape at bare: result #0 has type"):
        program(np.ones(8, np.float32))


def test_a_direct_program_decoded_later_holds_its_locations(monkeypatch):
    """A program lowering directly holds its module as bytecode; decoding it (for `jax.grad`)
    parses that, and the decoded ops then hold their locations apart (not that parse's)."""
    text = _TEXT.replace('"test.released_wrong_shape"(%r)', "stablehlo.negate %r")
    with monkeypatch.context() as patched:
        patched.setattr(held_module, "LARGE_CONSTANT_BYTES", 16)
        patched.setattr(held_module, "RELEASE_BYTES", 0)
        program = shlo2jax.load(text, source_name="m.mlir", lowering="direct")
        assert program.entry.lowering == "direct" and not program.decoded
        ops = program.module.ops
    assert all(type(op._location) is HeldLocations for op in ops)
    kept = shlo2jax.load(text, source_name="m.mlir")
    x = np.linspace(0, 1, 8, dtype=np.float32)
    np.testing.assert_allclose(jax.grad(program)(x), jax.grad(kept)(x))
    assert [op.location for op in ops] == [op.location for op in kept.module.ops]


def test_held_locations_read_unknown_where_none_is_held():
    with shlo2jax.compat.make_ir_context():
        locations = [ir.Location.file("a.py", 1, 2), None, ir.Location.name("n")]
        held = HeldLocations()
        held.hold(locations)
    assert [str(held[i]) for i in range(3)] == ['loc("a.py":1:2)', "loc(unknown)", 'loc("n")']
