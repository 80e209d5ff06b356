"""compare(..., reduce=DIR) and `shlo2jax compare --reduce DIR` (issue 43): a disagreement
shrunk to a small standalone module, written with its arguments, that still disagrees between
the same two runs; cut at the op where the difference starts, grown upstream where that op
alone does not show it, then delta-debugged."""

import pathlib

import numpy as np
import pytest

import shlo2jax
from shlo2jax.errors import UsageError
from shlo2jax.tools import cli, exits
from shlo2jax.tools.compare import compare
from shlo2jax.tools.compare.locate import inlined_body
from shlo2jax.tools.inputs import bind_arrays, read_npz

ROOT = pathlib.Path(__file__).resolve().parents[3]
MLP = ROOT / "tests" / "corpus" / "jax" / "mlp" / "exported.bin"
SECOND_BIAS = "%8 = stablehlo.add %5, %7"   # the second layer's bias add

# f32 loses what f64 keeps where two values near 1e7 are subtracted: the subtract is where
# the two runs part, but its operands (rounded to f32 by the add before it) agree, and fed
# those f32 operands alone f64 subtracts them exactly as f32 does. (Two scales, not one:
# XLA folds (a + 1) - a.)
CANCELLATION = """
func.func public @main(%x: tensor<8xf32>, %w: tensor<8xf32>) -> tensor<f32> {
  %0 = stablehlo.multiply %x, %w : tensor<8xf32>
  %1 = stablehlo.sine %0 : tensor<8xf32>
  %scale = stablehlo.constant dense<1.0e7> : tensor<8xf32>
  %one = stablehlo.constant dense<1.0> : tensor<8xf32>
  %2 = stablehlo.multiply %1, %scale : tensor<8xf32>
  %3 = stablehlo.add %2, %one : tensor<8xf32>
  %scale2 = stablehlo.constant dense<0.99999e7> : tensor<8xf32>
  %4 = stablehlo.multiply %1, %scale2 : tensor<8xf32>
  %5 = stablehlo.subtract %3, %4 : tensor<8xf32>
  %6 = stablehlo.abs %5 : tensor<8xf32>
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %7 = stablehlo.reduce(%6 init: %c) applies stablehlo.add across dimensions = [0]
       : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
  return %7 : tensor<f32>
}
"""
LOOSE = {"rtol": 1e-3, "atol": 1e-6}


@pytest.fixture
def perturbed(tmp_path) -> tuple:
    """The corpus MLP as MLIR text and a copy whose second bias add is a subtract."""
    text = shlo2jax.load(MLP).mlir_module.operation.get_asm(large_elements_limit=None)
    assert text.count(SECOND_BIAS) == 1
    original, edited = tmp_path / "mlp.mlir", tmp_path / "mlp_edited.mlir"
    original.write_text(text)
    edited.write_text(text.replace(SECOND_BIAS, "%8 = stablehlo.subtract %5, %7"))
    return original, edited


def _inputs(reduced_dir: pathlib.Path) -> list:
    module = shlo2jax.load(reduced_dir / "reduced.mlir")
    return bind_arrays(module.entry, read_npz(str(reduced_dir / "inputs.npz")))


def _ops(path: pathlib.Path) -> list:
    """The names of the ops of @main, callees inlined (the terminator left out)."""
    with inlined_body(shlo2jax.load(path), "main") as (_, _, ops):
        return [op.name for op in ops[:-1]]


def test_an_edited_corpus_model_reduces_to_the_op_changed(perturbed, tmp_path):
    original, edited = perturbed
    out = tmp_path / "reduced"
    result = compare(original, against=edited, reduce=out)
    reduced = result.reduced
    assert not result.ok and (reduced.a, reduced.b) == ("cpu", "cpu:against")
    assert reduced.ops_before == len(_ops(original))
    assert 1 <= reduced.ops_after <= 10 < reduced.ops_before
    assert reduced.paths == [str(out / n) for n in
                             ("reduced.mlir", "reduced_other.mlir", "inputs.npz")]
    assert reduced.cut.startswith("stablehlo.add at ")
    mine, theirs = _ops(out / "reduced.mlir"), _ops(out / "reduced_other.mlir")
    assert "stablehlo.add" in mine and "stablehlo.subtract" in theirs
    assert len(mine) == reduced.ops_after
    # the two written modules, on the arguments written, still disagree
    again = compare(out / "reduced.mlir", against=out / "reduced_other.mlir",
                    inputs=_inputs(out))
    assert again.disagreeing() and again.runs["cpu"].status == "ok"
    assert result.to_json()["reduced"]["ops_after"] == reduced.ops_after


def test_the_reference_interpreter_runs_the_reduced_module(perturbed, tmp_path):
    original, edited = perturbed
    out = tmp_path / "reduced"
    compare(original, against=edited, reduce=out)
    ran = compare(out / "reduced.mlir", ["cpu", "interpreter"], inputs=_inputs(out))
    assert ran.runs["interpreter"].status == "ok" and ran.ok


def test_a_cancellation_cpu_vs_f64_keeps_the_rounding_op(tmp_path):
    out = tmp_path / "reduced"
    # (f64 named first: the recorded values are the f32 run's, whatever the order)
    told = []
    result = compare(CANCELLATION, ["f64", "cpu"], reduce=out, progress=told.append, **LOOSE)
    reduced = result.reduced
    assert (reduced.a, reduced.b) == ("cpu", "f64")
    # progress: the cut, then each candidate checked, with its verdict, as it comes
    said = [t for t in told if t.startswith("reduce: ")]
    assert said[0].startswith("reduce: cut at op #") and "stablehlo.subtract" in said[0], said
    assert len(said) == 1 + reduced.checks, said
    assert said[-1].endswith(("still disagrees", "agrees"))
    assert reduced.cut.startswith("stablehlo.subtract at ")
    assert reduced.checks > 1  # the subtract alone did not disagree: it grew upstream
    ops = _ops(out / "reduced.mlir")
    assert ops[-1] == "stablehlo.subtract" and "stablehlo.add" in ops
    assert "stablehlo.reduce" not in ops and "stablehlo.sine" not in ops
    assert len(ops) == reduced.ops_after < reduced.ops_before == 12
    inputs = _inputs(out)
    assert all(x.dtype == np.float32 for x in inputs)
    assert compare(out / "reduced.mlir", ["cpu", "f64"], inputs=inputs, **LOOSE).disagreeing()
    assert compare(out / "reduced.mlir", ["cpu", "interpreter"],
                   inputs=inputs).runs["interpreter"].status == "ok"


def test_the_cli_writes_prints_and_the_rerun_reproduces(perturbed, tmp_path, capsys):
    original, edited = perturbed
    out = tmp_path / "reduced"
    code = cli.main(["compare", str(original), "--against", str(edited), "--reduce", str(out)])
    printed = capsys.readouterr().out
    assert code == exits.DISAGREE
    line = next(ln for ln in printed.splitlines() if ln.startswith("reduced: "))
    before = len(_ops(original))
    assert line.startswith(f"reduced: {before} ops -> 1 ops, written to {out}/reduced.mlir, "
                           f"{out}/reduced_other.mlir and {out}/inputs.npz (cpu vs "
                           "cpu:against, cut at stablehlo.add at ")
    rerun = next(ln for ln in printed.splitlines() if ln.startswith("rerun: "))
    words = rerun.split()[2:]  # (after "rerun: shlo2jax")
    assert words[:7] == ["compare", f"{out}/reduced.mlir", "--inputs", f"{out}/inputs.npz",
                         "--against", f"{out}/reduced_other.mlir", "--backends"]
    assert cli.main(words) == exits.DISAGREE
    assert "programs DISAGREE" in capsys.readouterr().out


def test_the_cli_rerun_of_a_cpu_vs_f64_reduction_reproduces(tmp_path, capsys):
    program = tmp_path / "cancel.mlir"
    program.write_text(CANCELLATION)
    out = tmp_path / "reduced"
    out.mkdir()
    (out / "reduced_other.mlir").write_text("")  # (an earlier --against reduction's)
    code = cli.main(["compare", str(program), "--backends", "cpu,f64", "--rtol", "1e-3",
                     "--reduce", str(out)])
    printed = capsys.readouterr().out
    assert code == exits.DISAGREE and "reduced: 12 ops -> " in printed
    assert sorted(p.name for p in out.iterdir()) == ["inputs.npz", "reduced.mlir"]
    rerun = next(ln for ln in printed.splitlines() if ln.startswith("rerun: ")).split()[2:]
    assert rerun[-6:] == ["--backends", "cpu,f64", "--rtol", "0.001", "--atol", "1e-06"]
    assert cli.main(rerun) == exits.DISAGREE


def test_a_folder_that_cannot_be_written_is_refused_before_loading(tmp_path, capsys):
    a_file = tmp_path / "taken"
    a_file.write_text("")
    missing_program = str(tmp_path / "absent.mlir")  # (loading it would fail: exit 1)
    for folder, why in ((a_file, "is a file; give a folder"),
                        (tmp_path / "no" / "such", "no folder")):
        code = cli.main(["compare", missing_program, "--reduce", str(folder)])
        assert code == exits.USAGE and why in capsys.readouterr().err
    with pytest.raises(UsageError, match="is a file"):
        compare(CANCELLATION, ["cpu", "f64"], reduce=a_file)
    assert cli.main(["compare", missing_program, "--grad", "--reduce",
                     str(tmp_path / "r")]) == exits.USAGE


def test_nothing_to_reduce_where_they_agree(tmp_path, capsys):
    program = tmp_path / "cancel.mlir"
    program.write_text(CANCELLATION)
    out = tmp_path / "reduced"
    code = cli.main(["compare", str(program), "--backends", "cpu,xla-direct", "--reduce",
                     str(out)])
    assert code == exits.OK and "reduce: nothing to reduce" in capsys.readouterr().out
    assert not out.exists()


def test_a_difference_inside_a_loop_is_cut_at_the_loop(tmp_path):
    """The loop's body reads the function's constants (the trip count, the step) from
    outside it: they come with it."""
    program = shlo2jax.load(ROOT / "tests" / "corpus" / "jax" / "gru_scan" / "exported.bin")
    text = program.mlir_module.operation.get_asm(large_elements_limit=None)
    bias = "%3 = stablehlo.add %0, %2 : tensor<3x36xf32>"  # (in a function the loop calls)
    assert text.count(bias) == 1
    original, edited = tmp_path / "gru.mlir", tmp_path / "gru_edited.mlir"
    original.write_text(text)
    edited.write_text(text.replace(bias, bias.replace("add", "subtract")))
    out = tmp_path / "reduced"
    reduced = compare(original, against=edited, reduce=out).reduced
    ops = _ops(out / "reduced.mlir")
    assert reduced.cut.startswith("stablehlo.while at ") and "stablehlo.while" in ops
    assert set(ops) == {"stablehlo.while", "stablehlo.constant"}
    assert len(ops) == reduced.ops_after < reduced.ops_before
    again = compare(out / "reduced.mlir", against=out / "reduced_other.mlir",
                    inputs=_inputs(out))
    assert again.disagreeing()
