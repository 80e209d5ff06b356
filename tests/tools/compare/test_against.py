"""compare(source, against=other) and `shlo2jax compare FILE --against OTHER` (issue 43): two
programs of one signature on the same inputs, and with --locate the first op where they part,
its ops matched by location (an edited copy of one file) or by structure (other locations)."""

import json
import pathlib

import numpy as np
import pytest

import shlo2jax
from shlo2jax.errors import InputError, UsageError
from shlo2jax.tools import cli, exits
from shlo2jax.tools.compare import compare

ROOT = pathlib.Path(__file__).resolve().parents[3]
MLP = ROOT / "examples" / "mlp.mlir"
FIRST_ADD = "%3 = stablehlo.add %0, %2"   # the first layer's bias add


def _edited(text: str) -> str:
    """The MLP with one op changed: its first bias add is a subtract."""
    assert text.count(FIRST_ADD) == 1
    return text.replace(FIRST_ADD, "%3 = stablehlo.subtract %0, %2")


def _line_of(text: str, what: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if what in line)


@pytest.fixture
def edited(tmp_path) -> pathlib.Path:
    path = tmp_path / "mlp_edited.mlir"
    path.write_text(_edited(MLP.read_text()))
    return path


def test_an_edited_copy_is_located_at_the_op_changed(edited):
    result = compare(str(MLP), against=edited, locate=True)
    assert not result.ok and result.verdict == "programs DISAGREE"
    assert [(p.a, p.b) for p in result.pairs] == [("cpu", "cpu:against")]
    assert result.against == str(edited)
    first = result.located[0]
    # matched by location: the copy's own line and column, whatever its file is called
    assert first.location == f"{MLP}:{_line_of(MLP.read_text(), FIRST_ADD)}:10"
    assert (first.name, first.other_name) == ("stablehlo.add", "stablehlo.subtract")
    assert first.source_line.startswith(FIRST_ADD)  # the line its location names
    # its operands agree: it is the culprit; the ops after it carry its difference
    assert first.culprit is True and all(e.ok for e in first.operands)
    assert len(first.operands) == 2
    # then the relu's maximum, whose operand already differs, and the call of the relu,
    # whose results the ops it runs make
    assert [(d.name, d.culprit) for d in result.located[1:]] == [("stablehlo.maximum", False),
                                                                 ("func.call", None)]
    assert result.located[2].holds_ops
    table = result.table()
    assert "(in cpu:against: stablehlo.subtract)" in table and "first op to differ" in table
    data = json.loads(result.dumps())
    assert data["against"] == str(edited) and data["located"][0]["culprit"] is True
    assert data["located"][0]["other_name"] == "stablehlo.subtract"


def test_an_identical_copy_agrees(tmp_path, capsys):
    copy = tmp_path / "copy.mlir"
    copy.write_text(MLP.read_text())
    result = compare(MLP, against=copy, locate=True)
    assert result.ok and result.verdict == "programs agree" and not result.located
    assert result.pairs[0].errors.max_abs == 0
    assert cli.main(["compare", str(MLP), "--against", str(copy), "--locate"]) == exits.OK
    assert "programs agree" in capsys.readouterr().out


def test_other_locations_are_matched_by_structure():
    text = _edited(MLP.read_text())
    # every op two lines further down: no location of the one is the same op's in the other
    shifted = "// moved\n// down\n" + text
    # and the module as MLIR prints it again, without its locations (its own lines then)
    printed = shlo2jax.load(text).mlir_module.operation.get_asm(enable_debug_info=False)
    for other in (shifted, printed):
        result = compare(str(MLP), against=other, locate=True, locate_limit=1)
        first = result.located[0]
        assert (first.name, first.other_name) == ("stablehlo.add", "stablehlo.subtract")
        assert first.location.startswith(f"{MLP}:{_line_of(MLP.read_text(), FIRST_ADD)}:")
        assert first.other_location and first.culprit is True


def test_a_different_signature_is_refused_naming_both(tmp_path, capsys):
    other = tmp_path / "negate.mlir"
    other.write_text("""
func.func public @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = stablehlo.negate %x : tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}""")
    mine, theirs = shlo2jax.load(MLP).entry.signature, shlo2jax.load(other).entry.signature
    with pytest.raises(InputError, match="signatures differ") as refused:
        compare(MLP, against=other)
    assert mine in str(refused.value) and theirs in str(refused.value)
    assert cli.main(["compare", str(MLP), "--against", str(other)]) == exits.INPUT
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and mine in err and theirs in err
    assert err.startswith(f"shlo2jax: error: {MLP}: cannot compare against {other}:")


def test_the_cli_names_the_op_and_the_two_files(edited, capsys):
    code = cli.main(["compare", str(MLP), "--against", str(edited), "--locate"])
    captured = capsys.readouterr()
    assert code == exits.DISAGREE
    line = _line_of(MLP.read_text(), FIRST_ADD)
    assert f"op #5 stablehlo.add result 0 at {MLP}:{line}:10" in captured.out
    assert f"{MLP} and {edited} disagree: cpu vs cpu:against" in captured.err


def test_the_users_inputs_go_to_both_programs(edited, tmp_path, capsys):
    program = shlo2jax.load(MLP)
    inputs = tmp_path / "in.npz"
    rng = np.random.default_rng(7)  # (not compare's seeded inputs)
    arrays = {f"arg_{i}": rng.standard_normal(a.shape).astype(a.dtype) for i, a in
              enumerate(program.entry.in_avals)}
    np.savez(inputs, **arrays)
    code = cli.main(["compare", str(MLP), "--against", str(edited), "--inputs", str(inputs)])
    assert code == exits.DISAGREE and "inputs: given" in capsys.readouterr().out
    result = compare(MLP, against=edited, inputs=list(arrays.values()))
    expected = np.asarray(shlo2jax.load(edited)(*arrays.values()))
    np.testing.assert_array_equal(result.runs["cpu:against"].outputs[0], expected)


def test_both_programs_run_on_translated_backends_only(edited, capsys):
    with pytest.raises(UsageError, match="interpreter cannot run another program"):
        compare(MLP, ["cpu", "interpreter"], against=edited)
    code = cli.main(["compare", str(MLP), "--against", str(edited), "--backends", "f64"])
    assert code == exits.USAGE and "f64 cannot run another program" in capsys.readouterr().err


TWICE = """
func.func private @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.exponential %x : tensor<4xf32> loc("f_exp")
  return %0 : tensor<4xf32>
}
func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @f(%x) : (tensor<4xf32>) -> tensor<4xf32> loc("first_call")
  %1 = stablehlo.sine %0 : tensor<4xf32> loc("the_sine")
  %2 = func.call @f(%1) : (tensor<4xf32>) -> tensor<4xf32> loc("second_call")
  return %2 : tensor<4xf32>
}"""


def test_where_a_difference_starts_comes_before_what_it_reaches():
    # @f's exp is recorded first (at the first call) but differs only at its second
    # execution, downstream of the sine: the sine, whose operand agrees, is named first
    other = TWICE.replace("stablehlo.sine %0", "stablehlo.cosine %0")
    result = compare(TWICE, against=other, locate=True, locate_limit=3)
    first = result.located[0]
    assert "the_sine" in first.location and first.culprit is True
    exp = next(d for d in result.located if "f_exp" in d.location)
    assert exp.execution == 1 and exp.culprit is None  # (its operand: two call sites)


def test_the_producers_source_line_is_shown_where_its_file_is_here(tmp_path):
    # locations as jax writes them: the op's name, then the Python line that made it
    source = tmp_path / "model.py"
    source.write_text("import jax.numpy as jnp\ndef f(x):\n    return jnp.sin(x) * 2\n")
    text = f"""
func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {{
  %0 = stablehlo.sine %x : tensor<4xf32> loc("jit(f)/sin"("{source}":3:11))
  %c = stablehlo.constant dense<2.0> : tensor<4xf32> loc("jit(f)/mul"("{source}":3:11))
  %1 = stablehlo.multiply %0, %c : tensor<4xf32> loc("jit(f)/mul"("{source}":3:11))
  return %1 : tensor<4xf32>
}}"""
    result = compare(text, against=text.replace("dense<2.0>", "dense<3.0>"), locate=True)
    first = result.located[0]
    assert first.name == "stablehlo.constant" and first.culprit is True  # (no operands)
    assert first.location == f"{source}:3:11 (jit(f)/mul)"
    assert first.source_line == "return jnp.sin(x) * 2"
    assert "      return jnp.sin(x) * 2" in result.table()


CORPUS = ROOT / "tests" / "corpus"


def test_exports_of_two_producers(capsys):
    eqx = CORPUS / "equinox" / "eqx_mlp" / "exported.bin"
    nnx = CORPUS / "flax" / "nnx_mlp" / "exported.bin"
    assert compare(eqx, against=eqx, locate=True).ok
    # both load as jax.export:flat_fn: the refusal names them by their paths
    assert cli.main(["compare", str(eqx), "--against", str(nnx)]) == exits.INPUT
    err = capsys.readouterr().err
    assert f"cannot compare against {nnx}: the signatures differ: @main(args[0]: f32[24,10]" in err
