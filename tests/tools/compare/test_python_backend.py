"""compare's `python=PATH` backend (shlo2jax/tools/compare/python_backend.py): the program under
another Python's jax in a child, its outputs and per-op records back for `locate`, and its
failures as one line."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import shlo2jax
from shlo2jax import registry
from shlo2jax.errors import UsageError
from shlo2jax.tools import cli, exits
from shlo2jax.tools.compare import (PythonBackend, TranslatedBackend, backend, compare,
                                    diverging_ops)
from shlo2jax.tools.compare.locate import Recording, module_operands
from shlo2jax.tools.compare.python_backend import load_arrays, parse_spec, save_arrays
from shlo2jax.tools.inputs import seeded_inputs

from _helpers import CHAIN

# Another Python with jax: SHLO2JAX_OTHER_PYTHON (.ci/run's older-jax legs point it at the
# newest jax's venv), else this machine's venv of the oldest supported jax where it is there.
OLDEST_VENV = "/work/venvs/jax072/bin/python"
OTHER = os.environ.get("SHLO2JAX_OTHER_PYTHON") or (
    OLDEST_VENV if os.path.exists(OLDEST_VENV) else None)
other_python = pytest.mark.skipif(
    OTHER is None, reason="no second Python with jax: set SHLO2JAX_OTHER_PYTHON to one "
    f"(e.g. a venv of jax 0.7.2), or make {OLDEST_VENV}")
# This interpreter (always there: the same jax in a child) and the other one (another jax).
PYTHONS = [pytest.param(sys.executable, id="this-python"),
           pytest.param(OTHER, id="other-python", marks=other_python)]

PERTURBED = CHAIN.replace("stablehlo.sine", "stablehlo.cosine")


def _jax_version(python: str) -> str:
    return subprocess.run([python, "-c", "import jax; print(jax.__version__)"],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.parametrize("python", PYTHONS)
def test_identical_programs_agree_op_by_op(python):
    program = shlo2jax.load(CHAIN)
    inputs = seeded_inputs(program.entry, 0)
    other = PythonBackend(python)
    result = compare(program, ["cpu", other])
    assert result.ok and result.runs[other.name].status == "ok"
    assert other.jax_version == _jax_version(python)
    recordings = [Recording(b.probe(program, "main", inputs)[1], program.source_name, inputs,
                            module_operands(program, "main"))
                  for b in (TranslatedBackend("cpu"), other)]
    here, there = (r.records for r in recordings)
    assert list(here) == list(there)  # the same ops, indices, names and locations
    assert {key.location for key in there} == set(re.findall(r'loc\("(\w+)"\)', CHAIN))
    assert diverging_ops(*recordings, rtol=1e-4, atol=1e-6, max_ulp=None, limit=3) == []


@pytest.mark.parametrize("python", PYTHONS)
def test_a_perturbed_module_is_located_across_pythons(python):
    other = PythonBackend(python, name="other", source=PERTURBED)
    result = compare(CHAIN, ["cpu", other], locate=True)
    assert not result.ok
    first = result.located[0]
    assert (first.a, first.b, first.name, first.other_name, first.location) == \
        ("cpu", "other", "stablehlo.sine", "stablehlo.cosine", "step1_sine")
    assert first.culprit is True
    assert [d.name for d in result.located[1:]] == ["stablehlo.add", "stablehlo.tanh"]


@other_python
def test_the_command_line_compares_and_locates_under_another_jax(tmp_path, capsys):
    path = tmp_path / "chain.mlir"
    path.write_text(CHAIN)
    spec = f"python={OTHER}"
    assert cli.main(["compare", str(path), "--backends", f"cpu,{spec}", "--locate"]) == exits.OK
    out = capsys.readouterr().out
    assert f"cpu vs {spec}" in out and "backends agree" in out


def test_a_python_that_is_not_there_is_a_usage_error(tmp_path, capsys):
    path = tmp_path / "chain.mlir"
    path.write_text(CHAIN)
    missing = str(tmp_path / "no-venv" / "bin" / "python")
    code = cli.main(["compare", str(path), "--backends", f"cpu,python={missing}"])
    err = capsys.readouterr().err
    assert code == exits.USAGE
    assert err.count("\n") == 1 and err.startswith("shlo2jax: error:")
    assert f"python={missing}: no such executable" in err
    with pytest.raises(UsageError, match="no such executable"):
        backend(f"python={missing}")
    with pytest.raises(UsageError, match="unknown platform 'npu'"):
        PythonBackend(sys.executable, platform="npu")


def test_a_python_without_jax_is_skipped_with_the_reason(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")],
                   check=True)
    bare = PythonBackend(str(tmp_path / "bare" / "bin" / "python"), name="bare")
    run = compare(CHAIN, ["cpu", bare]).runs["bare"]
    assert run.status == "skipped"
    assert "cannot import" in run.reason and "needs jax, jaxlib and numpy" in run.reason


def test_a_module_the_other_side_refuses_is_one_line_naming_its_jax():
    target = "test.only_in_the_parent"
    module = f"""
    func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {{
      %0 = stablehlo.custom_call @{target}(%x) : (tensor<3xf32>) -> tensor<3xf32>
      return %0 : tensor<3xf32>
    }}"""
    try:
        shlo2jax.register_custom_call(target)(lambda ctx, op, x: x * 2)
        run = compare(module, ["cpu", PythonBackend(sys.executable, name="child")]).runs["child"]
    finally:
        registry.CUSTOM_CALL_RULES.pop(target, None)
    assert run.status == "error" and "\n" not in run.reason
    assert run.reason.startswith(f"OtherPythonError: under jax {_jax_version(sys.executable)}: "
                                 "UnsupportedError")
    assert target in run.reason


def test_the_child_runs_within_its_time_limit():
    run = compare(CHAIN, ["cpu", PythonBackend(sys.executable, name="slow", timeout=0.01)]
                  ).runs["slow"]
    assert run.status == "error" and "ran past 0.01 s" in run.reason


def test_arrays_travel_with_their_dtypes(tmp_path):
    arrays = [np.arange(6, dtype=np.float32).reshape(2, 3).astype(ml_dtypes.bfloat16),
              np.array([-8, 7, 0], dtype=ml_dtypes.int4),
              np.array(1.5 - 2j, dtype=np.complex64), np.array([True, False]),
              np.zeros((0, 4), np.int64),
              np.array([0.5, 448.0], dtype=ml_dtypes.float8_e4m3fn)]
    path = str(tmp_path / "a.npz")
    back = load_arrays(path, save_arrays(path, arrays))
    for x, y in zip(arrays, back):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x.astype(np.float64) if x.dtype.kind == "V" else x,
                                      y.astype(np.float64) if y.dtype.kind == "V" else y)


def test_a_spec_names_the_python_and_optionally_its_platform():
    assert parse_spec("python=/venv/bin/python") == ("/venv/bin/python", "cpu")
    assert parse_spec("python=/venv/bin/python:gpu") == ("/venv/bin/python", "gpu")
    assert parse_spec("python=/odd:dir/python") == ("/odd:dir/python", "cpu")
    assert backend(f"python={sys.executable}").name == f"python={sys.executable}"
