"""Every input form of shlo2jax.load, and the Program/Function API."""

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export as jax_export
from jaxlib.mlir.dialects import stablehlo

import shlo2jax
from shlo2jax import sources

TEXT = """
module @m {
  func.func public @main(%x: tensor<3xf32>, %y: tensor<3xf32>) -> tensor<3xf32> {
    %0 = func.call @double(%x) : (tensor<3xf32>) -> tensor<3xf32>
    %1 = stablehlo.add %0, %y : tensor<3xf32>
    return %1 : tensor<3xf32>
  }
  func.func private @double(%x: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.add %x, %x : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
  func.func public @second(%x: tensor<2xi64>) -> (tensor<2xi64>, tensor<2xi64>) {
    %0 = stablehlo.add %x, %x : tensor<2xi64>
    return %0, %x : tensor<2xi64>, tensor<2xi64>
  }
}
"""

X = np.array([1.0, 2.0, 3.0], np.float32)
Y = np.array([0.5, -1.0, 4.0], np.float32)
EXPECTED = 2 * X + Y


def _check(program):
    np.testing.assert_array_equal(np.asarray(program(X, Y)), EXPECTED)


def test_text():
    _check(shlo2jax.load(TEXT))


def test_path_str_and_pathlike(tmp_path):
    path = tmp_path / "m.mlir"
    path.write_text(TEXT)
    _check(shlo2jax.load(str(path)))
    program = shlo2jax.load(path)
    _check(program)
    assert str(path) in program.module.functions["main"].body.ops[0].location


def test_bytecode():
    program = shlo2jax.load(TEXT)
    import io
    buffer = io.BytesIO()
    program.mlir_module.operation.write_bytecode(buffer)
    _check(shlo2jax.load(buffer.getvalue()))


@pytest.mark.parametrize("target", ["1.0.0", "current"])
def test_vhlo_portable_artifact(target, tmp_path):
    if target == "current":
        target = stablehlo.get_current_version()
    artifact = stablehlo.serialize_portable_artifact_str(TEXT, target)
    _check(shlo2jax.load(artifact))
    path = tmp_path / "m.mlir.bc"
    path.write_bytes(artifact)
    _check(shlo2jax.load(path))


def _exported():
    def f(x, y):
        return (x + x) + y
    spec = jax.ShapeDtypeStruct((3,), jnp.float32)
    return jax_export.export(jax.jit(f))(spec, spec)


def test_jax_export_object():
    _check(shlo2jax.load(_exported()))


def test_jax_export_serialized_bytes():
    data = _exported().serialize()
    _check(shlo2jax.load(data))
    _check(shlo2jax.load(bytes(data)))


def test_functions_and_signatures():
    program = shlo2jax.load(TEXT)
    assert set(program.functions) == {"main", "second"}  # @double is private
    second = program["second"]
    assert second.in_avals == (jax.ShapeDtypeStruct((2,), np.int64),)
    assert second.out_avals == (jax.ShapeDtypeStruct((2,), np.int64),) * 2
    assert second.signature == "@second(arg_0: i64[2]) -> (i64[2], i64[2])"
    a, b = second(np.array([3, -4], np.int64))
    assert a.dtype == np.int64 and b.dtype == np.int64  # no x64 flag needed
    np.testing.assert_array_equal(a, [6, -8])
    with pytest.raises(KeyError, match="no public function @double"):
        program["double"]


def test_jit_grad_vmap_jaxpr():
    program = shlo2jax.load(TEXT)
    np.testing.assert_array_equal(jax.jit(program)(X, Y), EXPECTED)
    grad = jax.grad(lambda x, y: jnp.sum(program(x, y)), argnums=(0, 1))(X, Y)
    np.testing.assert_array_equal(grad[0], np.full(3, 2.0, np.float32))
    np.testing.assert_array_equal(grad[1], np.ones(3, np.float32))
    batched = jax.vmap(program)(np.stack([X, Y]), np.stack([Y, X]))
    np.testing.assert_array_equal(batched, np.stack([2 * X + Y, 2 * Y + X]))
    jaxpr = jax.make_jaxpr(program)(X, Y)
    assert "add" in str(jaxpr)


def test_callee_traced_once(monkeypatch):
    from shlo2jax.ops import control_flow

    # (@inc is two ops: callees that small are inlined at each call, ops/control_flow.call)
    monkeypatch.setattr(control_flow, "_INLINED_OPS", 0)
    text = """
    func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
      %0 = func.call @inc(%x) : (tensor<3xf32>) -> tensor<3xf32>
      %1 = func.call @inc(%0) : (tensor<3xf32>) -> tensor<3xf32>
      %2 = func.call @inc(%1) : (tensor<3xf32>) -> tensor<3xf32>
      return %2 : tensor<3xf32>
    }
    func.func private @inc(%x: tensor<3xf32>) -> tensor<3xf32> {
      %c = stablehlo.constant dense<1.0> : tensor<3xf32>
      %0 = stablehlo.add %x, %c : tensor<3xf32>
      return %0 : tensor<3xf32>
    }"""
    program = shlo2jax.load(text)
    traces = []
    inc_def = program.module.functions["inc"]
    original = inc_def.body.ops[1].handler

    def counting(ctx, op, *args):
        traces.append(op)
        return original(ctx, op, *args)
    inc_def.body.ops[1].handler = counting
    np.testing.assert_array_equal(program(X), X + 3)
    assert len(traces) == 1  # three call sites, one trace


def test_program_repr_and_histogram():
    program = shlo2jax.load(TEXT)
    assert program.op_histogram() == {"stablehlo.add": 3, "func.call": 1}
    assert "@main" in repr(program)


def test_outlined_constants_are_written_back_bit_for_bit(monkeypatch):
    # A program holding large constants lets its MLIR module go and rebuilds it on demand from
    # an outline and its decoded constants (shlo2jax.held_module): here every constant is large.
    from shlo2jax import held_module
    types = ["f32", "bf16", "f16", "f64", "f8E4M3FN", "f8E5M2", "i8", "ui16", "i32", "i64",
             "i1", "i4", "complex<f32>"]
    rng = np.random.default_rng(0)
    lines, names = [], []
    for i, t in enumerate(types):
        if t == "i1":
            body = ", ".join(rng.choice(["true", "false"], 6))
        elif t == "complex<f32>":
            body = ", ".join(f"({rng.normal():.6e}, {rng.normal():.6e})" for _ in range(6))
        elif t.startswith(("f", "b")):
            body = ", ".join(f"{v:.6e}" for v in rng.normal(size=6))
        else:
            body = ", ".join(str(v) for v in rng.integers(-7 if t[0] == "i" else 0, 8, 6))
        lines.append(f"    %c{i} = stablehlo.constant dense<[[{body}]]> : tensor<1x6x{t}>")
        names.append(f"%c{i}")
    lines.append("    %s = stablehlo.constant dense<1.5> : tensor<1x6xf32>")  # a splat stays
    names.append("%s")
    result_types = ", ".join(f"tensor<1x6x{t}>" for t in types) + ", tensor<1x6xf32>"
    text = (f"func.func @main() -> ({result_types}) {{\n" + "\n".join(lines) +
            f"\n    return {', '.join(names)} : {result_types}\n}}\n")
    kept = shlo2jax.load(text)
    with monkeypatch.context() as patched:
        patched.setattr(held_module, "LARGE_CONSTANT_BYTES", 0)
        patched.setattr(held_module, "RELEASE_BYTES", 0)
        program = shlo2jax.load(text)
    assert program.released_mlir_module and not kept.released_mlir_module
    assert len(program._held._outline.arrays) == 10  # all but i1, i4 and complex (kept in it)
    asm = dict(large_elements_limit=None, enable_debug_info=True)
    assert program.mlir_module.operation.get_asm(**asm) == kept.mlir_module.operation.get_asm(**asm)
    for got, want in zip(program(), kept()):
        np.testing.assert_array_equal(np.asarray(got).view(np.uint8),
                                      np.asarray(want).view(np.uint8))


def test_shape_refinement_of_a_program_that_let_its_module_go(monkeypatch):
    # `?` dimensions are specialised by refining the module (shlo2jax.executables.polymorphic): a program that
    # let its module go rebuilds it for that, and so does each refined program
    from shlo2jax import held_module
    w = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    exported = jax_export.export(jax.jit(lambda x: jnp.tanh(x @ w)))(
        jax_export.symbolic_args_specs((np.zeros((3, 4), np.float32),), "(b, 4)")[0])
    with monkeypatch.context() as patched:
        patched.setattr(held_module, "LARGE_CONSTANT_BYTES", 0)
        patched.setattr(held_module, "RELEASE_BYTES", 0)
        program = shlo2jax.load(exported.serialize())
        assert program.released_mlir_module and program.entry.is_polymorphic
        for batch in (1, 3):
            x = np.arange(batch * 4, dtype=np.float32).reshape(batch, 4) / 8
            np.testing.assert_allclose(np.asarray(program(x)), np.tanh(x @ w), rtol=1e-6)


def test_vhlo_artifact_is_parsed_once(monkeypatch):
    # The checked parse of a VHLO artifact is converted to StableHLO in place (the passes
    # stablehlo.deserialize_portable_artifact runs after its own parse): the reader that
    # parses the artifact a second time is not called, and the module is the one it makes
    from shlo2jax.compat import make_ir_context
    artifact = bytes(stablehlo.serialize_portable_artifact_str(TEXT, "1.0.0"))
    context = make_ir_context()
    with context:
        want = stablehlo.deserialize_portable_artifact(context, artifact)
    asm = dict(enable_debug_info=True)

    read = stablehlo.deserialize_portable_artifact
    module_bytes = bytes(_exported().mlir_module_serialized)

    def reader(context, data):
        if data in (artifact, module_bytes):  # (the quant dialect's warm-up reads its own)
            raise AssertionError("the artifact was parsed a second time")
        return read(context, data)
    with monkeypatch.context() as patched:
        patched.setattr(stablehlo, "deserialize_portable_artifact", reader)
        program = shlo2jax.load(artifact)
        _check(program)
        assert program.mlir_module.operation.get_asm(**asm) == want.operation.get_asm(**asm)
        _check(shlo2jax.load(_exported().serialize()))


def test_jax_export_bytearray_and_dropped_module_bytes(monkeypatch):
    # A bytearray is read in place; an artifact of RELEASE_BYTES or more lets the Exported's
    # module bytes go once parsed, and `exported` writes them again on access
    from shlo2jax import held_module
    data = _exported().serialize()
    _check(shlo2jax.load(bytearray(data)))
    assert shlo2jax.load(data).exported.mlir_module_serialized  # (kept: a small artifact)
    with monkeypatch.context() as patched:
        patched.setattr(held_module, "RELEASE_BYTES", 0)
        program = shlo2jax.load(bytearray(data))
        assert program["main"].record.mlir_module_serialized == b""
        _check(program)
        again = jax_export.deserialize(program.exported.serialize())
        np.testing.assert_array_equal(np.asarray(again.call(X, Y)), EXPECTED)


# ------------------------------------------------------------------ load(..., untrusted=True)

def _read_in_child_calls(monkeypatch) -> list:
    """The sources each `sources.read_in_child` call was given (the calls still run)."""
    calls = []
    real = sources.read_in_child

    def spy(source, *args, **kwargs):
        calls.append(source)
        return real(source, *args, **kwargs)
    monkeypatch.setattr(sources, "read_in_child", spy)
    return calls


def test_untrusted_input_is_read_in_a_child_first(monkeypatch, tmp_path):
    calls = _read_in_child_calls(monkeypatch)
    path = tmp_path / "m.mlir"
    path.write_text(TEXT)
    artifact = stablehlo.serialize_portable_artifact_str(TEXT, "1.0.0")
    for source in (TEXT, path, artifact, bytearray(artifact), _exported()):
        program = shlo2jax.load(source, untrusted=True)
        _check(program)
        assert program.options.untrusted
    assert len(calls) == 5
    shlo2jax.load(TEXT)
    assert len(calls) == 5  # (trusted input is read once, here)


def test_untrusted_input_the_child_refuses_is_refused_here_alike():
    with pytest.raises(shlo2jax.LoadError, match="cannot parse MLIR") as e:
        shlo2jax.load("func.func @main( {", untrusted=True)
    assert "child" not in str(e.value)  # (the child read it to the end: the error is ours)


def test_untrusted_input_that_hangs_the_reader_is_refused_at_the_time_limit(monkeypatch):
    # jaxlib's reader itself, without the checks, on gelu_mlp_vjp's VHLO module with two
    # spans of its attribute section swapped: locations in a cycle, which it never leaves
    # (tests/sources/test_safe_parse.py's `_swapped_locations`)
    exported = pathlib.Path(__file__).parents[1] / "corpus" / "jax" / "gelu_mlp_vjp" / "exported.bin"
    module = bytearray(jax_export.deserialize(bytearray(exported.read_bytes()))
                       .mlir_module_serialized)
    module[397:408], module[256:267] = module[256:267], module[397:408]
    monkeypatch.setattr(sources, "_READ_IN_CHILD", """
import pickle, sys
from shlo2jax.compat import make_ir_context
from shlo2jax.sources.mlir import parse_mlir_unchecked
source = pickle.load(sys.stdin.buffer)[0]
parse_mlir_unchecked(source, make_ir_context())
""")
    monkeypatch.setattr(sources, "UNTRUSTED_READ_SECONDS", 10.0)
    with pytest.raises(shlo2jax.LoadError, match=r"reading the input ran past 10 s in a child "
                                                 r"process \(untrusted=True\)"):
        shlo2jax.load(bytes(module), untrusted=True)


def test_untrusted_input_that_kills_the_reader_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(sources, "_READ_IN_CHILD",
                        "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    with pytest.raises(shlo2jax.LoadError, match=r"reading m\.mlir ended its child process "
                                                 r"\(SIGSEGV; untrusted=True\)"):
        shlo2jax.load(TEXT, source_name="m.mlir", untrusted=True)
    path = tmp_path / "n.mlir"
    path.write_text(TEXT)
    with pytest.raises(shlo2jax.LoadError, match=r"reading .*n\.mlir ended its child process"):
        shlo2jax.load(str(path), untrusted=True)
