"""How locate's recordings are compiled (probe_compiler_options: the cheap compile of a program
whose every op's value is an output) does not change the op it names."""

import pathlib

import pytest

import shlo2jax
from shlo2jax import probes
from shlo2jax.tools.compare import backends, compare
from shlo2jax.tools.compare.backends import Float64Backend, TranslatedBackend
from shlo2jax.tools.compare.locate import diverging_ops, instrumented_recording
from shlo2jax.tools.inputs import seeded_inputs

ROOT = pathlib.Path(__file__).resolve().parents[3]
# Special functions (power, log1p, erf's composite): the ops whose values XLA CPU's elemental
# and fusion emitters compute differently, by an ulp or so.
FLOW_SPECIAL = ROOT / "tests" / "corpus" / "jax" / "flow_special" / "exported.bin"
# A transformer whose float32 run parts from its f64 reference at a multiply reading
# broadcasts (rotary embeddings); 235 of its 391 probed values are made after the run.
LLAMA = ROOT / "tests" / "corpus" / "torch" / "hf_llama" / "exported.bin"


def _located(result) -> list:
    return [(d.op_index, d.name, d.execution, d.culprit, d.errors.mismatched)
            for d in result.located]


def test_probes_compiled_with_elemental_emitters_locate_the_same_ops(monkeypatch):
    chosen = probes.probe_compiler_options()
    if chosen == probes.PROBE_COMPILER_OPTIONS:
        pytest.skip("this jaxlib's XLA CPU has only its fusion emitters: one way to compile")
    located = []
    for options in (dict(probes.PROBE_COMPILER_OPTIONS), chosen):
        monkeypatch.setattr(probes, "probe_compiler_options", lambda options=options: options)
        located.append(_located(compare(FLOW_SPECIAL, ["cpu", "f64"], rtol=0, atol=0,
                                        locate=True)))
    assert located[0] and located[0][0][3]  # (a first op where the difference starts)
    assert located[1] == located[0]


def test_instrumented_recordings_compiled_as_probes_locate_the_same_ops(monkeypatch):
    # --reduce's recordings (and locate's against a backend without probes): the instrumented
    # module run by translated backends with probe_compiler_options, or fully optimised.
    program = shlo2jax.load(FLOW_SPECIAL)
    inputs = seeded_inputs(program.entry, 0)
    cpu, f64 = TranslatedBackend("cpu"), Float64Backend()

    def first_ops():
        recordings = [instrumented_recording(b, b.effective_program(program), "main", inputs)
                      for b in (cpu, f64)]
        return [(d["op_index"], d["name"], d["errors"].mismatched)
                for d in diverging_ops(*recordings, 0, 0, None, 3)]
    probed = first_ops()
    monkeypatch.setattr(backends, "probe_compiler_options", dict)  # (XLA's defaults)
    assert probed and first_ops() == probed


def test_values_rebuilt_after_the_run_locate_the_same_ops(monkeypatch):
    # probes.REBUILT: reshapes, transposes, broadcasts and slices of recorded values made in
    # numpy rather than recorded; an empty REBUILT records every value as an output.
    results = []
    for rebuilt in (probes.REBUILT, {}):
        monkeypatch.setattr(probes, "REBUILT", rebuilt)
        results.append(compare(LLAMA, ["cpu", "f64"], rtol=0, atol=0, locate=True))
    made, recorded = results
    assert _located(made) == _located(recorded) and made.located[0].culprit
    assert [(d.errors, d.operands) for d in made.located] == \
        [(d.errors, d.operands) for d in recorded.located]
    assert made.profiles == recorded.profiles and made.locate_notes == recorded.locate_notes
