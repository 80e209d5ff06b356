"""Cross-backend comparison: shlo2jax.compare, the `compare`/`export` CLI commands,
shlo2jax.testing.assert_backends_agree and the translated -> jax.export round trip."""

import json
import pathlib

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import shlo2jax
from shlo2jax.tools import cli
from shlo2jax.tools.compare import (Backend, TranslatedBackend, array_errors,
                                    compare)
from shlo2jax.export import export_translated, translated_stablehlo
from shlo2jax.testing import BackendSkippedWarning, assert_backends_agree

from _helpers import F32_BITCAST
from _helpers import CHAIN

ROOT = pathlib.Path(__file__).resolve().parents[2]
MLP = ROOT / "examples" / "mlp.mlir"
ALL = ["cpu", "interpreter", "xla-direct", "f64"]



# ------------------------------------------------------------------------- error figures

def test_array_errors_exact_and_ulp():
    a = np.array([1.0, 2.0, -0.0], np.float32)
    e = array_errors(a, a.copy(), rtol=0, atol=0)
    assert e.ok and e.max_abs == 0 and e.max_ulp == 0
    b = a.copy()
    b[1] = np.nextafter(np.float32(2.0), np.float32(3.0))
    e = array_errors(a, b, rtol=0, atol=0)
    assert not e.ok and e.max_ulp == 1 and e.mismatched == 1 and e.first == (1,)
    assert e.max_abs == pytest.approx(2.0 ** -22)
    assert array_errors(a, b, rtol=0, atol=0, max_ulp=1).ok
    assert array_errors(a, b, rtol=1e-6, atol=0).ok
    # -0 and +0 are 0 ULP apart
    assert array_errors(np.float32([0.0]), np.float32([-0.0]), rtol=0, atol=0).ok


def test_array_errors_nonfinite():
    nan = np.float32([np.nan, 1.0])
    assert array_errors(nan, np.float32([-np.nan, 1.0]), 0, 0).ok  # any NaN equals any NaN
    e = array_errors(np.float32([np.inf, 1.0]), np.float32([1e30, 1.0]), 1e-3, 1e-3)
    assert not e.ok and e.mismatched == 1
    assert not array_errors(np.float32([np.inf]), np.float32([-np.inf]), 1, 1).ok
    assert not array_errors(np.float32([np.nan]), np.float32([0.0]), 1, 1).ok


def test_array_errors_integers_exact():
    a = np.array([1, 2, 3], np.int32)
    assert array_errors(a, a.copy(), 1, 1).ok
    e = array_errors(a, np.array([1, 2, 4], np.int32), rtol=1, atol=1)  # no tolerance for ints
    assert not e.ok and e.max_abs == 1 and e.max_ulp is None
    assert not array_errors(np.array([True]), np.array([False]), 1, 1).ok
    assert "dtypes differ" in array_errors(a, a.astype(np.int64), 0, 0).note


def test_array_errors_f64_reference_is_rounded_to_the_narrower_type():
    exact = np.array([1 / 3, 2 / 3, 1e-8], np.float64)
    rounded = exact.astype(np.float32)
    e = array_errors(rounded, exact, rtol=0, atol=0, max_ulp=0)
    assert e.ok and e.max_ulp == 0 and e.max_abs > 0  # abs error in f64, ULPs in f32
    e = array_errors(rounded, exact.astype(ml_dtypes.bfloat16).astype(np.float64), 0, 0)
    assert e.max_ulp > 1000  # f32 vs a bf16-rounded reference: many f32 ULPs


def test_array_errors_complex_and_scalars():
    a = np.array([1 + 2j, 3 - 1j], np.complex64)
    b = a.copy()
    b[0] = 1 + 2.5j
    e = array_errors(a, b, rtol=0, atol=0)
    assert not e.ok and e.max_abs == pytest.approx(0.5) and e.first == (0,)
    assert array_errors(np.float32(1.5), np.float32(1.5), 0, 0).ok  # 0-d arrays
    assert "shapes differ" in array_errors(np.zeros(2), np.zeros(3), 0, 0).note


# ----------------------------------------------------------------------------- compare

def test_mlp_agrees_on_every_cpu_backend():
    result = compare(MLP, ALL)
    assert [r.status for r in result.runs.values()] == ["ok"] * 4, result.table()
    assert result.ok, result.table()
    assert len(result.pairs) == 6  # every pair of 4 backends, one output
    cpu_xla = next(p for p in result.pairs if (p.a, p.b) == ("cpu", "xla-direct"))
    assert cpu_xla.errors.max_abs < 1e-6
    table = result.table()
    assert "cpu vs f64" in table and "backends agree" in table
    data = json.loads(result.dumps())
    assert data["ok"] and set(data["backends"]) == set(ALL)
    assert {(p["a"], p["b"]) for p in data["pairs"]} == {
        ("cpu", "interpreter"), ("cpu", "xla-direct"), ("cpu", "f64"),
        ("interpreter", "xla-direct"), ("interpreter", "f64"), ("xla-direct", "f64")}


def test_top_level_api_is_the_compare_function():
    result = shlo2jax.compare(MLP, ["cpu", "xla-direct"])
    assert result.ok and result.runs["xla-direct"].status == "ok"


def test_absent_devices_are_skipped_with_the_reason():
    result = compare(MLP, ["cpu", "tpu"])
    if jax.devices()[0].platform == "tpu":
        pytest.skip("a TPU is present: the absence case cannot be shown here")
    tpu = result.runs["tpu"]
    assert tpu.status == "skipped" and "tpu" in tpu.reason
    # one backend ran: nothing was compared, and agreement is not reported
    assert not result.compared and not result.ok and result.pairs == []
    assert result.table().endswith("nothing compared: fewer than two backends produced results")


def test_user_inputs_and_a_callable_backend():
    program = shlo2jax.load(CHAIN)
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    y = np.linspace(0, 2, 8, dtype=np.float32)

    def original(x, y):  # the same computation written in JAX
        return jnp.sum(jnp.tanh(jnp.sin(x * y) + x))
    result = compare(program, ["cpu", "f64", ("jax", original)], inputs=[x, y])
    assert result.inputs == "given"
    assert result.ok, result.table()
    expected = np.sum(np.tanh(np.sin(x.astype(np.float64) * y) + x))
    assert float(result.runs["f64"].outputs[0]) == pytest.approx(expected, rel=1e-12)
    assert result.runs["f64"].outputs[0].dtype == np.float64


def test_dynamic_modules_are_compared_refined_to_the_inputs():
    text = """
func.func public @main(%x: tensor<?xf32>) -> tensor<?xf32> {
  %0 = stablehlo.sine %x : tensor<?xf32> loc("dyn_sine")
  %1 = stablehlo.multiply %0, %x : tensor<?xf32>
  return %1 : tensor<?xf32>
}"""
    x = np.linspace(-2, 2, 7, dtype=np.float32)
    result = compare(text, ALL, inputs=[x], max_ulp=1)
    assert [r.status for r in result.runs.values()] == ["ok"] * 4, result.table()
    assert result.ok and result.runs["cpu"].outputs[0].shape == (7,)
    result = compare(text, ["cpu", "f64"], inputs=[x], rtol=0, atol=0, locate=True)
    assert "dyn_sine" in result.located[0].location  # probes run on the refined program



def test_an_export_whose_module_drops_unused_arguments_runs_on_every_backend():
    # jax.export leaves arguments jax found unused out of the module (module_kept_var_idx):
    # the backends that run the module's text take its arguments, not the export's.
    exported = jax.export.export(jax.jit(lambda unused, x: jnp.sin(x) * x))(
        jax.ShapeDtypeStruct((3,), np.float32), jax.ShapeDtypeStruct((4,), np.float32))
    assert exported.module_kept_var_idx == (1,)
    x = np.linspace(-2, 2, 4, dtype=np.float32)
    result = compare(exported.serialize(), ALL, inputs=[np.zeros(3, np.float32), x], max_ulp=1)
    assert [r.status for r in result.runs.values()] == ["ok"] * 4, result.table()
    assert result.ok
    np.testing.assert_allclose(result.runs["f64"].outputs[0], np.sin(x) * x, rtol=1e-6)

def test_f64_reference_refuses_float_bitcasts():
    program = shlo2jax.load(F32_BITCAST)
    result = compare(program, ["cpu", "f64"])  # (tests/transforms/test_upcast.py: the refusal)
    assert result.runs["f64"].status == "skipped" and "bitcast" in result.runs["f64"].reason


def test_integer_and_quantity_mismatch_makes_the_comparison_fail():
    class OffByOne(Backend):
        name = "off-by-one"

        def run(self, program, function, inputs):
            return [np.asarray(program[function](*inputs)) + np.int32(1)]
    program = shlo2jax.load("""
func.func public @main(%x: tensor<3xi32>) -> tensor<3xi32> {
  %0 = stablehlo.add %x, %x : tensor<3xi32>
  return %0 : tensor<3xi32>
}""")
    result = compare(program, ["cpu", OffByOne(), "interpreter"])
    assert not result.ok
    bad = [(p.a, p.b) for p in result.disagreeing()]
    assert bad == [("cpu", "off-by-one"), ("off-by-one", "interpreter")]


def test_a_failing_backend_is_reported_not_raised():
    class Broken(Backend):
        name = "broken"

        def run(self, program, function, inputs):
            raise RuntimeError("device lost")
    result = compare(MLP, ["cpu", Broken()])
    assert result.runs["broken"].status == "error"
    assert "device lost" in result.runs["broken"].reason
    assert not result.ok


# ------------------------------------------------------------------------------ locate

def _perturbed_chain():
    # sine becomes cosine in the copy: the same ops, indices and locations otherwise
    return CHAIN.replace("stablehlo.sine %0", "stablehlo.cosine %0")


def test_locate_pinpoints_a_perturbed_op():
    perturbed = TranslatedBackend("cpu", name="perturbed", source=_perturbed_chain())
    result = compare(CHAIN, ["cpu", perturbed], locate=True)
    assert not result.ok
    first = result.located[0]
    assert (first.a, first.b) == ("cpu", "perturbed")
    assert first.name == "stablehlo.sine" and "step1_sine" in first.location
    # the ops before it agree; the divergence then propagates downstream in program order
    assert [d.location.split('"')[1] if '"' in d.location else d.location
            for d in result.located] == ["step1_sine", "step2_add", "step3_tanh"]
    assert "step1_sine" in result.table()
    data = result.to_json()
    assert data["located"][0]["name"] == "stablehlo.sine"
    # the sine's operand agrees on both: it is the first op to differ; the add and the tanh
    # read values that already differ
    assert [d.culprit for d in result.located] == [True, False, False]
    assert result.located[1].operands[1].ok and not result.located[1].operands[0].ok
    assert data["located"][0]["culprit"] is True and data["located"][0]["operands"][0]["ok"]
    assert "its operands agree" in result.table()


def test_locate_matches_a_file_and_a_copy_given_as_text():
    # Issue 43: a program loaded from a file has its own locations named by the path, a copy
    # given as text by `-`: the same line and column are the same op. Here the copy's first
    # bias add is a subtract; that op is located first, at the file's own position.
    text = MLP.read_text()
    first_add = "%3 = stablehlo.add %0, %2"
    assert text.count(first_add) == 1
    perturbed = TranslatedBackend("cpu", name="copy",
                                  source=text.replace(first_add,
                                                      "%3 = stablehlo.subtract %0, %2"))
    result = compare(str(MLP), ["cpu", perturbed], locate=True)
    assert not result.ok and result.located, result.locate_notes
    first = result.located[0]
    line = text.splitlines().index(next(ln for ln in text.splitlines() if first_add in ln)) + 1
    assert first.location.startswith(f"{MLP}:{line}:"), first.location
    assert first.name == "stablehlo.add"  # (the cpu program's op: its own name)
    # and the f64 reference's copy of the file, made from the program's text
    widened = compare(str(MLP), ["cpu", "f64"], rtol=0, atol=0, locate=True)
    assert widened.located and widened.located[0].name == "stablehlo.dot_general"
    assert widened.located[0].location.startswith(f"{MLP}:")


NAN_OUT = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %nan = stablehlo.constant dense<0x7FC00000> : tensor<4xf32>
  %y = stablehlo.multiply %x, %nan : tensor<4xf32>
  return %y : tensor<4xf32>
}
"""


def test_every_output_nan_is_nothing_compared_and_a_constant_is_said(tmp_path, capsys):
    # Issue 43: NaN everywhere agrees with NaN everywhere, and says nothing
    from shlo2jax.tools import exits
    result = compare(NAN_OUT, ["cpu", "f64"])
    assert result.vacuous == "nan" and not result.compared and not result.ok
    assert result.verdict.startswith("nothing compared: every output is NaN")
    path = tmp_path / "nan.mlir"
    path.write_text(NAN_OUT)
    assert cli.main(["compare", str(path), "--backends", "cpu,f64"]) == exits.NOTHING_COMPARED
    assert "every output is NaN on every backend" in capsys.readouterr().err
    zeros = NAN_OUT.replace("%y = stablehlo.multiply %x, %nan", "%y = stablehlo.subtract %x, %x")
    agreed = compare(zeros, ["cpu", "f64"])
    assert agreed.ok and agreed.vacuous == "constant"
    assert agreed.verdict.startswith("backends agree, but every output is one repeated value")
    plain = compare(MLP.read_text(), ["cpu", "f64"], rtol=1e-3)
    assert plain.vacuous is None
    assert repr(plain) == "<Comparison @main: cpu, f64; backends agree>"  # no arrays
    shown = plain._repr_html_()  # a notebook's display: backends, pairs, verdict
    assert shown.count("<tr") == 1 + 2 + 1 + 1 and "<b>backends agree</b>" in shown
    assert "color:#c00" not in shown
    tight = compare(MLP.read_text(), ["cpu", "f64"], rtol=0, atol=0)
    assert not tight.ok and "color:#c00" in tight._repr_html_()  # the pair beyond them, red


def test_locate_inside_called_functions_and_loops():
    text = """
func.func private @body(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.exponential %x : tensor<4xf32> loc("inner_exp")
  %1 = stablehlo.log_plus_one %0 : tensor<4xf32> loc("inner_log1p")
  return %1 : tensor<4xf32>
}
func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.negate %x : tensor<4xf32> loc("outer_negate")
  %1 = func.call @body(%0) : (tensor<4xf32>) -> tensor<4xf32> loc("outer_call")
  return %1 : tensor<4xf32>
}"""
    perturbed = TranslatedBackend(name="perturbed",
                                  source=text.replace("stablehlo.log_plus_one %0", "stablehlo.log %0"))
    result = compare(text, ["cpu", perturbed], locate=True, locate_limit=1)
    assert len(result.located) == 1
    assert "inner_log1p" in result.located[0].location


@pytest.mark.parametrize("other", ["interpreter", "xla-direct"])
def test_locate_inside_called_functions_without_probes(other):
    # the instrumented copy inlines the callees, so their ops are recorded too
    text = CHAIN.replace("func.func public @main", "func.func private @chain") + """
func.func public @main(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<f32> {
  %0 = func.call @chain(%x, %y) : (tensor<8xf32>, tensor<8xf32>) -> tensor<f32> loc("the_call")
  return %0 : tensor<f32>
}"""
    perturbed = TranslatedBackend(name="perturbed",
                                  source=text.replace("stablehlo.sine %0", "stablehlo.cosine %0"))
    result = compare(text, [other, perturbed], locate=True, locate_limit=1)
    assert [d.name for d in result.located] == ["stablehlo.sine"]
    assert "step1_sine" in result.located[0].location


def test_locate_explains_what_it_cannot_record():
    class Shifted(Backend):
        name = "shifted"

        def run(self, program, function, inputs):
            return [np.asarray(program[function](*inputs)) + np.float32(1)]
    result = compare(CHAIN, ["cpu", Shifted()], locate=True)
    assert not result.ok and result.located == []
    assert any("cannot record intermediate values" in n for n in result.locate_notes)


@pytest.mark.parametrize("other", ["interpreter", "xla-direct"])
def test_locate_with_backends_that_cannot_probe(other):
    # the interpreter and XLA run an instrumented copy whose extra outputs are every op's
    # results (callees inlined)
    perturbed = TranslatedBackend(name="perturbed", source=_perturbed_chain())
    result = compare(CHAIN, [other, perturbed], locate=True)
    assert not result.ok
    assert [d.name for d in result.located] == ["stablehlo.sine", "stablehlo.add",
                                                "stablehlo.tanh"]
    assert "step1_sine" in result.located[0].location
    assert result.located[0].a == other
    # the instrumented copy says where the operands come from too (the function's arguments)
    assert [d.culprit for d in result.located] == [True, False, False]


def test_locate_aligns_the_f64_copy_of_complex_constants():
    text = """
func.func public @main(%x: tensor<3xcomplex<f32>>) -> tensor<3xcomplex<f32>> {
  %c = stablehlo.constant dense<[(1.0, 0.5), (2.0, -1.0), (0.25, 3.0)]> : tensor<3xcomplex<f32>> loc("the_constant")
  %0 = stablehlo.multiply %x, %c : tensor<3xcomplex<f32>> loc("the_multiply")
  %1 = stablehlo.exponential %0 : tensor<3xcomplex<f32>> loc("the_exp")
  return %1 : tensor<3xcomplex<f32>>
}"""
    result = compare(text, ["cpu", "f64", "interpreter"], rtol=0, atol=0, locate=True)
    assert result.runs["f64"].status == "ok"
    assert result.runs["f64"].outputs[0].dtype == np.complex128
    located = {(d.a, d.b): d for d in result.located}
    assert "the_exp" in located[("cpu", "f64")].location or \
        "the_multiply" in located[("cpu", "f64")].location
    assert all("f64_complex_part" not in d.location for d in result.located)


def test_f32_drift_from_f64_located_at_the_first_op_past_tolerance():
    # a cancelling sum: the f32 result drifts from the f64 one at the reduce
    program = shlo2jax.load(CHAIN)
    x = np.array([1e4, 1.0, -1e4, 1e-3, 3.0, -3.0, 0.5, 7.0], np.float32)
    result = compare(program, ["cpu", "f64"], inputs=[x, x], rtol=0, atol=0, locate=True)
    assert not result.ok
    first = result.located[0]
    assert first.a == "cpu" and first.b == "f64"
    assert first.errors.max_rel > 0


# --------------------------------------------------------------------- pytest helper

def test_assert_backends_agree_passes_and_warns_about_absent_backends():
    with pytest.warns(BackendSkippedWarning, match="tpu"):
        result = assert_backends_agree(MLP, backends=["cpu", "f64", "tpu"])
    assert result.ok


def test_assert_backends_agree_skips_without_two_backends():
    with pytest.raises(pytest.skip.Exception, match="could run"):
        with pytest.warns(BackendSkippedWarning):
            assert_backends_agree(MLP, backends=["cpu", "tpu"])


def test_assert_backends_agree_fails_with_the_table_and_located_op():
    perturbed = TranslatedBackend(name="perturbed", source=_perturbed_chain())
    with pytest.raises(AssertionError, match="step1_sine"):
        assert_backends_agree(CHAIN, backends=["cpu", perturbed])


# ---------------------------------------------------------------------------- the CLI

def test_cli_compare_exit_codes_and_json(tmp_path, capsys):
    out = tmp_path / "cmp.json"
    assert cli.main(["compare", str(MLP), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "interpreter vs xla-direct" in text and "backends agree" in text
    assert json.loads(out.read_text())["ok"] is True
    chain = tmp_path / "chain.mlir"
    chain.write_text(CHAIN)
    inputs = tmp_path / "in.npz"
    x = np.array([1e4, 1.0, -1e4, 1e-3, 3.0, -3.0, 0.5, 7.0], np.float32)
    np.savez(inputs, arg_0=x, arg_1=x)
    code = cli.main(["compare", str(chain), "--backends", "cpu,f64", "--inputs", str(inputs),
                     "--rtol", "0", "--atol", "0", "--locate"])
    text = capsys.readouterr().out
    assert code == 3 and "backends DISAGREE" in text and "first diverging ops" in text  # exits.DISAGREE


# ------------------------------------------------------------------------- round trip

def test_translated_program_exports_serializes_and_loads_again(tmp_path):
    program = shlo2jax.load(MLP)
    exported = export_translated(program)
    blob = exported.serialize()
    again = shlo2jax.load(blob)
    assert again.entry.in_avals == program.entry.in_avals
    result = compare(again, ["cpu", ("original", program.entry), "interpreter"])
    assert result.ok, result.table()
    text = translated_stablehlo(program)
    assert "stablehlo.dot_general" in text and "func.func public @main" in text
    assert shlo2jax.load(text).entry.out_avals == program.entry.out_avals
    path = tmp_path / "t.mlir"
    assert cli.main(["export", str(MLP), "-o", str(path)]) == 0
    assert np.allclose(shlo2jax.load(path)(*_mlp_inputs(program)), program(*_mlp_inputs(program)))


def test_export_keeps_64_bit_signatures():
    program = shlo2jax.load("""
func.func public @main(%x: tensor<2xf64>, %n: tensor<2xi64>) -> tensor<2xf64> {
  %0 = stablehlo.convert %n : (tensor<2xi64>) -> tensor<2xf64>
  %1 = stablehlo.multiply %x, %0 : tensor<2xf64>
  return %1 : tensor<2xf64>
}""")
    again = shlo2jax.load(export_translated(program).serialize())
    x, n = np.array([0.1, 0.2]), np.array([3, 2**40], np.int64)
    np.testing.assert_array_equal(again(x, n), program(x, n))
    assert again(x, n).dtype == np.float64


def test_export_refuses_dynamic_signatures():
    program = shlo2jax.load("""
func.func public @main(%x: tensor<?xf32>) -> tensor<?xf32> {
  %0 = stablehlo.negate %x : tensor<?xf32>
  return %0 : tensor<?xf32>
}""")
    with pytest.raises(ValueError, match="static"):
        export_translated(program)


def _mlp_inputs(program):
    from shlo2jax.tools.inputs import seeded_inputs
    return seeded_inputs(program.entry, 3)


# --------------------------------------------------- shared models and conformance cases

def _without_checks(text: str) -> str:
    """A format-A conformance module without its check custom calls: @main then just
    returns the op's result, which every backend can run."""
    return "\n".join(ln for ln in text.splitlines() if "custom_call @check." not in ln)


CONFORMANCE_CASES = [
    "cos_float32_20_20.mlir", "exp_float16_20_20.mlir", "tanh_float32_20_20.mlir",
    "log1p_float32_20_20.mlir", "cumsum_float32_8_9.mlir", "cumsum_int32_8_9.mlir",
    "dot_general_float16_4_3_float32_3_6.mlir",
    "conv_general_dilated_float32_2_3_9_10_float32_3_3_4_5.mlir",
    "argmax_float32_18_12.mlir", "gather_float32_10_10_10_int32_2_2_1.mlir",
    "erf_float32_20_20_chlo.mlir", "exp_complex64_20_20.mlir",
    "atan2_float32_20_20_float32_20_20.mlir",
]


@pytest.mark.slow
@pytest.mark.conformance
@pytest.mark.parametrize("name", CONFORMANCE_CASES)
def test_conformance_cases_agree_on_every_cpu_backend(shared_dir, name):
    path = shared_dir / "conformance" / "testdata" / name
    if not path.exists():
        pytest.skip(f"{name} is not in this copy of the conformance cases")
    # f32 accumulations (conv, dot) drift from the f64 result by up to ~1e-4 absolute
    result = compare(_without_checks(path.read_text()), ALL, rtol=1e-5, atol=1e-4, max_ulp=4)
    assert [r.status for r in result.runs.values()] == ["ok"] * 4, result.table()
    assert result.ok, result.table()


@pytest.mark.slow
def test_searchless_chess_agrees_translated_xla_and_f64(shared_dir):
    # The interpreter leg of this model takes ~10 minutes: .ci/run runs it through the CLI.
    result = compare(shared_dir / "models" / "searchless_chess_9m.mlir.bc",
                     ["cpu", "xla-direct", "f64"], rtol=1e-3, atol=1e-2, locate=True)
    assert result.ok, result.table()
    cpu_xla = next(p for p in result.pairs if (p.a, p.b) == ("cpu", "xla-direct"))
    assert cpu_xla.errors.max_abs <= 1e-5, result.table()
