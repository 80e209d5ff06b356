"""The fast subset (`python -m pytest -m "not slow" -n auto`) still touches every op family:
each module of ops/ (and of ops/custom_calls/) and the quant/ package has, in FAMILY_TESTS,
the tests that exercise it, and at least one of them is not marked `slow`. A new family
without an entry fails here, as does marking slow every test of a family."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
_CC = "tests/ops/custom_calls/test_custom_calls.py::"
_LEGACY = "tests/ops/custom_calls/test_legacy.py::"

# family -> node-id prefixes of tests that run its translations
FAMILY_TESTS = {
    "check": ["tests/tools/test_conformance.py::test_right_value_passes",
              "tests/tools/test_conformance.py::test_close_"],
    "chlo": ["tests/ops/test_chlo.py"],
    "collectives": ["tests/spmd/test_collectives.py"],
    "comparison": ["tests/ops/test_comparison.py"],
    "composite": ["tests/ops/test_composite.py"],
    "constant": ["tests/ops/test_constant.py"],
    "control_flow": ["tests/ops/test_control_flow.py"],
    "convert": ["tests/ops/test_convert.py"],
    "convolution": ["tests/ops/test_convolution.py"],
    "dynamic": ["tests/executables/test_polymorphic.py"],
    "elementwise": ["tests/ops/test_elementwise.py"],
    "indexing": ["tests/ops/test_indexing.py"],
    "linalg": ["tests/ops/test_linalg.py"],
    "quantized": ["tests/quant/test_quantized.py"],
    "random": ["tests/ops/test_random.py"],
    "reduction": ["tests/ops/test_reduction.py"],
    "shape": ["tests/ops/test_shape.py"],
    "sharding": ["tests/spmd/test_sharding.py"],
    "side_effects": ["tests/ops/test_side_effects.py"],
    "custom_calls/generic": [_CC + "test_x64_split_and_combine", _CC + "test_approx_top_k",
                             _CC + "test_placement_markers_are_identity"],
    "custom_calls/linalg": [_CC + "test_getrf_", _CC + "test_potrf_", _CC + "test_syevd_"],
    "custom_calls/catalog": [_LEGACY + "test_catalog_names_existing_tests",
                             _LEGACY + "test_every_builtin_target_is_described"],
    "custom_calls/legacy": [_LEGACY + "test_lapack_"],
    "custom_calls/legacy_fft": [_LEGACY + "test_ducc_fft"],
    "custom_calls/legacy_gpu": [_LEGACY + "test_gpu_"],
    "custom_calls/legacy_rnn": [_LEGACY + "test_rnn_"],
    "custom_calls/legacy_sparse": [_LEGACY + "test_sparse_"],
    "quant": ["tests/ops/test_f6.py", "tests/quant/test_quantized.py"],
}


def families() -> set:
    """The op families: the public modules under ops/, and the quant package."""
    ops = ROOT / "ops"
    return {p.relative_to(ops).with_suffix("").as_posix() for p in ops.rglob("*.py")
            if not p.name.startswith("_")} | {"quant"}


def uncovered(node_ids) -> list:
    """The families none of whose tests is among `node_ids`."""
    return sorted(f for f, prefixes in FAMILY_TESTS.items()
                  if not any(n.startswith(p) for n in node_ids for p in prefixes))


def test_every_family_has_its_tests_listed():
    assert families() == set(FAMILY_TESTS)


def test_uncovered_names_a_family_with_no_test():
    ids = [p + "[x]" for f, prefixes in FAMILY_TESTS.items() if f != "chlo" for p in prefixes]
    assert uncovered(ids) == ["chlo"]
    assert uncovered(ids + ["tests/ops/test_chlo.py::test_erf[f32]"]) == []


def test_every_family_has_a_test_outside_slow():
    files = sorted({p.split("::")[0] for prefixes in FAMILY_TESTS.values() for p in prefixes})
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "not slow",
         "-p", "no:cacheprovider", *files],
        cwd=ROOT, capture_output=True, text=True)
    # A test file that does not import (a syntax error in it or in what it imports) fails
    # the collection: the message is the ERRORS section, not the tail of the collected ids.
    errors = proc.stdout.find("= ERRORS =")
    report = proc.stdout[proc.stdout.rfind("\n", 0, errors) + 1:] if errors >= 0 else \
        proc.stdout[-3000:]
    assert proc.returncode == 0, report[:6000] + proc.stderr[-3000:]
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    missing = uncovered(ids)
    assert not missing, f"no test outside `slow` for: {missing}"
