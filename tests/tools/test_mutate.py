"""Malformed input never kills the process: mutants of the bundled modules (byte-level and
text-level, shlo2jax.tools.mutate) are loaded and called in worker processes, where a crash
shows as one instead of ending pytest. Every mutant must load and run, or fail with one of
the library's errors (or the TypeError of a call whose arguments do not fit).

This runs a fixed sample; `python -m shlo2jax mutate --count 1000` runs the full set."""

import collections
import pathlib
import subprocess
import sys

import pytest

from shlo2jax.tools.mutate import default_sources, mutants, release_sources, run_mutants

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sources():
    return default_sources(str(ROOT))


def test_sources_are_bytes_and_text(sources):
    assert sum(isinstance(s.data, bytes) for s in sources) >= 20
    assert sum(isinstance(s.data, str) for s in sources) >= 20


@pytest.mark.parametrize("lowering", ["translate", "direct"])
def test_mutants_raise_only_library_errors(sources, lowering):
    """With `lowering="direct"` a mutant that loads is compiled by XLA as it is (its ops
    decoded only when the translation is needed): the load takes another path to the same
    errors."""
    sample = mutants(sources, 200, seed=20)
    assert len({label.split("@")[0] for _, label, _ in sample}) >= 15  # a spread of kinds
    report = run_mutants(sample, jobs=2, timeout=120, lowering=lowering)
    failures = "\n".join(f"{f['status']}: {f['source']} {f['mutation']} (mutant {f['index']}, "
                         f"seed 20)\n{f['detail']}" for f in report.failures)
    assert not report.failures, f"{report.summary()}\n{failures}"
    assert report.outcomes.get("load:LoadError", 0) > 50, report.outcomes
    assert report.outcomes.get("call:ran", 0) > 0, report.outcomes  # some still run



def test_mutants_of_every_release_artifact_raise_only_library_errors():
    """StableHLO's release artifacts (tests/vhlo, 0.9.0 to 1.20.0, bytes and text) as seeds:
    loads, `info`, and calls of some of each loaded mutant's functions."""
    sample = mutants(release_sources(str(ROOT)), 150, seed=30)
    report = run_mutants(sample, jobs=2, timeout=120)
    failures = "\n".join(f"{f['status']}: {f['source']} {f['mutation']} (mutant {f['index']}, "
                         f"seed 30)\n{f['detail']}" for f in report.failures)
    assert not report.failures, f"{report.summary()}\n{failures}"
    assert report.outcomes.get("load:LoadError", 0) > 50, report.outcomes

# A location is an attribute to MLIR: corrupt input can put one where a value belongs.
# jaxlib aborts on such an attribute (nanobind cannot cast it; the VHLO conversion of a
# constant dereferences it); both were found by the mutants above. Loaded in a child process,
# since without the check they end it.
_LOAD_IN_CHILD = """
import sys
import shlo2jax
from shlo2jax.errors import LoadError
data = sys.stdin.buffer.read()
try:
    shlo2jax.load(data if data.startswith(b"ML\\xefR") else data.decode())
except LoadError as e:
    print("LoadError:", e)
"""


def _load_in_child(data: bytes) -> str:
    done = subprocess.run([sys.executable, "-c", _LOAD_IN_CHILD], input=data,
                          capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return done.stdout.decode()


def test_location_as_an_attribute_value_in_text():
    text = """
func.func public @main(%x: tensor<2xf32>) -> (tensor<2xf32> {jax.result_info = loc("r")}) {
  return %x : tensor<2xf32>
}
"""
    out = _load_in_child(text.encode())
    assert "LoadError" in out and "location stands where an attribute value belongs" in out


def test_attribute_name_that_is_not_utf8():
    text = r"""
func.func public @main(%x: tensor<2xf32>) -> (tensor<2xf32> {"ja\F2.result_info" = 1 : i32}) {
  return %x : tensor<2xf32>
}
"""
    out = _load_in_child(text.encode())
    assert "LoadError" in out and "an attribute name is not UTF-8" in out


def test_location_as_a_vhlo_constant_value():
    from jax import export
    from jaxlib.mlir import ir
    from shlo2jax.compat import make_ir_context
    exported = export.deserialize(bytearray(
        (ROOT / "tests" / "corpus" / "jax" / "mlp" / "exported.bin").read_bytes()))
    with make_ir_context():
        vhlo = ir.Module.parse(bytes(exported.mlir_module_serialized))
        asm = vhlo.operation.get_asm(print_generic_op_form=True)
        start = asm.index("{value = #vhlo.tensor_v1<") + len("{value = ")
        end = asm.index("}>", start)
        corrupt = ir.Module.parse(asm[:start] + 'loc("here")' + asm[end:])
        assert "vhlo.constant_v1" in str(corrupt)
        import io
        buffer = io.BytesIO()
        corrupt.operation.write_bytecode(buffer)
    out = _load_in_child(buffer.getvalue())
    assert "LoadError" in out and "vhlo.constant_v1" in out


# A loop whose condition is always true: a program that never ends, under XLA's direct
# compile as under the translation (as a mutant whose loop counter was deleted).
ENDLESS = """
func.func @main(%arg0: tensor<i32>) -> tensor<i32> {
  %0 = stablehlo.while(%iter = %arg0) : tensor<i32>
   cond {
    %c = stablehlo.compare LT, %iter, %iter : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %t = stablehlo.not %c : tensor<i1>
    stablehlo.return %t : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %n = stablehlo.add %iter, %one : tensor<i32>
    stablehlo.return %n : tensor<i32>
  }
  return %0 : tensor<i32>
}
"""


def test_a_program_that_never_ends_is_not_a_hang():
    """Past the time limit while the compiled program runs, and XLA compiling the module
    directly runs past it too: the program's own, counted apart from failures."""
    from shlo2jax.tools.mutate import RUNS_LONG
    report = run_mutants([("endless.mlir", "as written", ENDLESS)], jobs=1, timeout=15)
    assert not report.failures, report.failures
    assert report.outcomes == {RUNS_LONG: 1}


def test_a_run_past_the_limit_that_xla_ends_stays_a_failure():
    """The other way: a timeout in the run whose direct compile ends is kept, with XLA's
    outcome in its detail (here the mutant is a program that ends, standing for one whose
    translation would loop)."""
    from shlo2jax.tools.mutate import _run_long_ones_directly
    ends = ENDLESS.replace("%t = stablehlo.not %c", "%t = stablehlo.and %c, %c")
    failures = [{"index": 0, "source": "ends.mlir", "mutation": "", "status": "timeout",
                 "detail": "ran past 15 s (worker killed) in its stage 'run'", "stage": "run"}]
    outcomes = collections.Counter({"timeout": 1})
    _run_long_ones_directly([("ends.mlir", "", ends)], failures, outcomes, 60, 1)
    assert len(failures) == 1 and outcomes == {"timeout": 1}
    assert failures[0]["detail"].endswith("XLA's direct compile of the module ends within the "
                                          "limit (ran)")
