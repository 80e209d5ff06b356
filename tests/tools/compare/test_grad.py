"""compare(..., grad=True) and `shlo2jax compare --grad`: the gradients of one seeded loss
(the outputs times seeded cotangents, summed) on each translated backend, and with --locate
the first op of the backward pass whose result's cotangent differs."""

import pathlib

import jax
import jax.numpy as jnp
import numpy as np

import shlo2jax
from shlo2jax.tools import cli, exits
from shlo2jax.tools.compare import compare
from shlo2jax.tools.compare.gradients import cotangent_module_text, seeded_cotangents
from _helpers import CHAIN

ROOT = pathlib.Path(__file__).resolve().parents[3]
MLP = ROOT / "examples" / "mlp.mlir"



def _name(location: str) -> str:
    return location.split('"')[1] if '"' in location else location


def test_the_gradients_of_the_seeded_loss_are_compared():
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    y = np.linspace(0, 2, 8, dtype=np.float32)
    result = compare(CHAIN, inputs=[x, y], grad=True)
    assert list(result.runs) == ["cpu", "f64"] and result.ok, result.table()
    assert result.gradients and "gradient w.r.t. floating-point input 1" in result.table()
    # what the cpu backend computed is jax.grad of sum(out * ct) written in JAX
    program = shlo2jax.load(CHAIN)
    (ct,) = seeded_cotangents(program.entry, 0)
    expected = jax.grad(lambda x, y: jnp.sum(jnp.tanh(jnp.sin(x * y) + x) * ct),
                        argnums=(0, 1))(x, y)
    for got, want in zip(result.runs["cpu"].outputs, expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert result.runs["f64"].outputs[0].dtype == np.float64


def test_backends_that_do_not_translate_are_skipped():
    result = compare(CHAIN, ["cpu", "interpreter"], grad=True)
    assert result.runs["interpreter"].status == "skipped"
    assert "translated backends" in result.runs["interpreter"].reason
    assert not result.compared


def test_a_program_of_integers_has_no_loss_to_differentiate():
    result = compare("""
func.func public @main(%x: tensor<3xi32>) -> tensor<3xi32> {
  %0 = stablehlo.add %x, %x : tensor<3xi32>
  return %0 : tensor<3xi32>
}""", grad=True)
    assert {r.status for r in result.runs.values()} == {"skipped"}
    assert "floating-point input and output" in result.runs["cpu"].reason


def test_the_cotangent_copy_subtracts_a_zero_argument_from_every_float_result():
    program = shlo2jax.load(CHAIN)
    text, keys, types, readers = cotangent_module_text(program, "main")
    # multiply, sine, add, tanh, the constant and the reduce: one point each
    assert [_name(k.location) for k in keys] == [
        "step0_multiply", "step1_sine", "step2_add", "step3_tanh", "step4_zero", "step5_sum"]
    # which ops read each result: what its cotangent is made from
    assert readers == {(0, 0): [1], (1, 0): [2], (2, 0): [3], (3, 0): [5], (4, 0): [5],
                       (5, 0): ["return"]}
    copy = shlo2jax.load(text)
    assert len(copy.entry.in_avals) == 2 + len(keys)
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    zeros = [np.zeros(shape, dtype) for shape, dtype in types]
    np.testing.assert_array_equal(copy(x, x, *zeros), program(x, x))  # x - 0 is x


def test_locate_names_the_first_op_of_the_backward_pass():
    # the copy's sine is a cosine: from the outputs back, the reduce's and the tanh's
    # cotangents agree (the sum's derivative is the cotangent itself) and the add's is the
    # first to differ (its derivative reads tanh of the add, whose value differs)
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    other = CHAIN.replace("stablehlo.sine %0", "stablehlo.cosine %0")
    result = compare(CHAIN, inputs=[x, x], grad=True, against=other, locate=True,
                     locate_limit=2)
    assert not result.ok
    first = result.located[0]
    assert _name(first.location) == "step2_add" and first.cotangent
    # the tanh's cotangent agrees: the backward pass parts at the tanh's derivative
    assert first.culprit is True and [_name(r.split(" at ")[1]) for r in first.readers] == [
        "step3_tanh"]
    assert "the backward pass parts at the derivative of stablehlo.tanh" in result.table()
    second = result.located[1]
    assert _name(second.location) == "step1_sine" and second.culprit is False


def test_f32_drift_in_the_backward_pass_is_located_against_f64():
    result = compare(MLP, grad=True, rtol=0, atol=0, locate=True, locate_limit=1)
    assert not result.ok and result.located, result.locate_notes
    first = result.located[0]
    assert (first.a, first.b) == ("cpu", "f64") and first.cotangent
    assert first.location.startswith(f"{MLP}:")


def test_cli_grad(tmp_path, capsys):
    assert cli.main(["compare", str(MLP), "--grad"]) == exits.OK
    out = capsys.readouterr().out
    assert "gradient w.r.t. floating-point input 4: float32[2, 8]" in out
    assert cli.main(["compare", str(MLP), "--grad", "--rtol", "0", "--atol", "0",
                     "--locate"]) == exits.DISAGREE
    captured = capsys.readouterr()
    assert "the cotangent of its result" in captured.out
    assert "the gradients (backends) disagree: cpu vs f64" in captured.err
