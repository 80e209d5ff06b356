"""The differential fuzzer (shlo2jax.tools.fuzz): a fixed set of seeds must agree on the
translation, XLA compiling the module directly and (small programs) the reference
interpreter; CI-sized (about a minute on 2 cores)."""

import subprocess
import sys

import numpy as np

from shlo2jax.tools import fuzz

CI_SEEDS = "--count", "24", "--seed", "1000"


def test_generated_programs_cover_the_families():
    texts = [fuzz.generate(seed).text() for seed in range(300)]
    for needle in ("stablehlo.reduce", "stablehlo.while", "stablehlo.scatter", "stablehlo.gather",
                   "stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice",
                   "stablehlo.dot_general", "stablehlo.convert", "stablehlo.select",
                   "stablehlo.transpose", "stablehlo.pad", "stablehlo.concatenate",
                   "stablehlo.broadcast_in_dim", "stablehlo.slice", "stablehlo.reverse",
                   "tensor<bf16>", "xi8>", "xui8>", "xi64>", "-2147483648"):
        assert any(needle in t for t in texts), needle
    inputs = np.concatenate([x.astype(np.float64).ravel() for seed in range(100)
                             for x in fuzz.generate(seed).inputs if x.dtype.kind == "f"])
    assert np.isnan(inputs).any() and np.isinf(inputs).any()
    assert (np.signbit(inputs) & (inputs == 0)).any()  # -0


def test_a_difference_is_a_mismatch():
    same = {"cpu": [np.array([1.0, np.nan], np.float32)],
            "xla-direct": [np.array([1.0, np.nan], np.float32)]}
    assert fuzz._mismatch(same) is None
    assert fuzz._mismatch({"cpu": [np.array([1.0, np.nan], np.float32)],
                           "xla-direct": [np.array([1.0, 2.0], np.float32)]})
    assert fuzz._mismatch({"cpu": [np.array([-128], np.int8)],
                           "interpreter": [np.array([127], np.int8)]})
    assert fuzz._mismatch({"cpu": [np.array([0.0], np.float32)],
                           "interpreter": ("unavailable", "no")}) is None


def test_fixed_seeds_agree_on_every_backend():
    done = subprocess.run([sys.executable, "-m", "shlo2jax", "fuzz", *CI_SEEDS],
                          capture_output=True, text=True, timeout=600)
    lines = done.stdout.strip().splitlines()
    assert lines and lines[-1] == "fuzz: 24 programs, 0 mismatches, 0 crashes", \
        done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 0
    interpreted = int(lines[-2].split("; ")[1].split()[0])
    assert interpreted >= 5, lines[-2]  # the reference interpreter took part


def test_xla_flushing_subnormals_is_listed_apart_not_hidden():
    program = fuzz.generate(1000)
    tiny = np.array([1e-45, 1.0], np.float32)  # a subnormal input
    normal = np.array([1e-3, 1.0], np.float32)
    spec, flushed = [np.array([-1.0], np.float32)], [np.array([0.0], np.float32)]
    xla_alone = {"cpu": spec, "xla-direct": flushed, "interpreter": spec}
    assert fuzz._explained_by_flushing(program._replace(inputs=[tiny]), xla_alone)
    assert not fuzz._explained_by_flushing(program._replace(inputs=[normal]), xla_alone)
    translation_alone = {"cpu": flushed, "xla-direct": spec, "interpreter": spec}
    assert not fuzz._explained_by_flushing(program._replace(inputs=[tiny]), translation_alone)


def test_one_interpreter_child_serves_many_programs_and_survives_an_abort():
    """The fuzzer keeps one reference-interpreter child (a child per program cost ~0.4 CPU s,
    more than the program): it answers as a one-shot child does, an op the interpreter lacks
    aborts only that program (reported as unsupported), and the next program runs."""
    import pytest

    from shlo2jax.errors import InterpreterUnsupported
    from shlo2jax.tools import reference

    def module(body):
        return ("func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {\n"
                f"  %r = {body}\n  return %r : tensor<3xf32>\n}}")

    add = module("stablehlo.add %a, %a : tensor<3xf32>")
    lacking = module("stablehlo.custom_call @no_such_target(%a) : (tensor<3xf32>) -> tensor<3xf32>")
    x = np.array([1.5, -0.0, np.inf], np.float32)
    server = reference.InterpreterServer()
    try:
        first = server.run(reference._refined_reference_text(add, False),
                           [reference._reference_input(x)], 60)
        np.testing.assert_array_equal(first[0], reference.run_interpreter(add, [x], timeout=60)[0])
        np.testing.assert_array_equal(first[0], x + x)
        child = server._proc.pid
        assert reference.run_interpreter(add, [x], timeout=60, server=server)
        assert server._proc.pid == child  # the same child answered again
        with pytest.raises(InterpreterUnsupported, match="SIGABRT.*no_such_target"):
            reference.run_interpreter(lacking, [x], timeout=60, server=server)
        again = reference.run_interpreter(module("stablehlo.negate %a : tensor<3xf32>"), [x],
                                          timeout=60, server=server)
        np.testing.assert_array_equal(again[0], -x)
    finally:
        server.close()


# XLA compiling seed 2544's module itself, alone in a child process (see below)
_XLA_DIRECT_2544 = """
from shlo2jax.loader import load
from shlo2jax.tools import fuzz
from shlo2jax.tools.compare import XlaDirectBackend
program = fuzz.generate(2544)
XlaDirectBackend().run(load(program.text()), "main", program.inputs)
"""


def _xla_dies_on_seed_2544() -> bool:
    """Whether this jaxlib's XLA kills the process compiling seed 2544's `rem(x - x, x - x)`
    (its constant folding divides by zero: SIGFPE up to jaxlib 0.10; jaxlib 0.12 folds it
    without dying)."""
    import os
    done = subprocess.run([sys.executable, "-c", _XLA_DIRECT_2544], capture_output=True,
                          timeout=300, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode <= 0, done.stderr.decode(errors="replace")[-2000:]
    return done.returncode < 0


def test_xla_killing_the_process_is_told_apart_from_the_translation():
    """Seed 2544 computes `rem(x - x, x - x)`: where XLA's constant folding divides by zero
    while compiling the module directly (jaxlib <= 0.10), the worker dies (SIGFPE). The
    translation guards its divisor and runs; the run reports XLA's crash apart and counts no
    crash of ours. Where XLA survives it (jaxlib 0.12), the seed is one that agrees.
    Seed 1145 (a 0-d input with a subnormal) once raised in the flushing check."""
    dies = _xla_dies_on_seed_2544()
    report = fuzz.run([2544, 1145], jobs=1)
    assert report.crashes == [] and report.mismatches == []
    assert [c["seed"] for c in report.xla_crashes] == ([2544] if dies else [])
    if dies:
        assert "SIGFPE" in report.xla_crashes[0]["detail"]


# Loaded by the fuzzer's workers (PYTHONPATH): XLA compiling a module directly kills the process
_XLA_DIES = """
import os
import signal

from shlo2jax.tools import compare


def _die(self, program, function, inputs):
    os.kill(os.getpid(), signal.SIGFPE)


compare.XlaDirectBackend.run_program = _die
"""


def test_any_xla_crash_is_told_apart_from_the_translation(tmp_path, monkeypatch):
    """Whatever jaxlib's XLA survives: with XLA compiling the module directly made to kill
    its worker (SIGFPE), the program is run again without it, runs, and is reported as
    XLA's crash, not as a crash of the translation."""
    import os
    (tmp_path / "sitecustomize.py").write_text(_XLA_DIES)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(tmp_path)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    report = fuzz.run([1000], jobs=1)
    assert report.crashes == [] and report.mismatches == []
    assert [c["seed"] for c in report.xla_crashes] == [1000]
    assert all("SIGFPE" in c["detail"] and "without it the program ran" in c["detail"]
               for c in report.xla_crashes)
