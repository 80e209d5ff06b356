"""The fast subset (`python -m pytest -m "not slow" -n auto`) still touches every op family.
An op family is a public module of ops/ (or of ops/custom_calls/), or the quant/ package; its
tests live at the path that mirrors it (FAMILY_TESTS, computed from the layout):
ops/<family>.py -> tests/ops/test_<family>.py, ops/custom_calls/<family>.py ->
tests/ops/custom_calls/test_<family>.py, quant/ -> tests/quant/. A new family without its
test file fails here, as does marking slow every test of a family. The tests of minutes
(marked `long`) are collected before the others, so that `-n auto` starts them first."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def families() -> set:
    """The op families: the public modules under ops/, and the quant package."""
    ops = ROOT / "ops"
    return {p.relative_to(ops).with_suffix("").as_posix() for p in ops.rglob("*.py")
            if not p.name.startswith("_")} | {"quant"}


def mirrored_tests(family: str) -> str:
    """The tests of `family`, as a path relative to the root: a test file, or tests/quant/."""
    if family == "quant":
        return "tests/quant/"
    folder, _, name = family.rpartition("/")
    return "/".join(["tests", "ops", *([folder] if folder else []), f"test_{name}.py"])


FAMILY_TESTS = {family: mirrored_tests(family) for family in families()}


def uncovered(node_ids) -> list:
    """The families none of whose tests is among `node_ids`."""
    return sorted(f for f, path in FAMILY_TESTS.items()
                  if not any(n.startswith(path if path.endswith("/") else path + "::")
                             for n in node_ids))


def test_every_family_has_its_mirrored_tests():
    missing = [path for path in FAMILY_TESTS.values() if not (ROOT / path).exists()]
    assert not missing, f"op families without their test file: {missing}"
    assert list((ROOT / FAMILY_TESTS["quant"]).glob("test_*.py"))


def test_mirrored_paths():
    assert mirrored_tests("chlo") == "tests/ops/test_chlo.py"
    assert mirrored_tests("custom_calls/legacy_fft") == "tests/ops/custom_calls/test_legacy_fft.py"
    assert {"elementwise", "custom_calls/generic", "quant"} <= set(FAMILY_TESTS)


def test_uncovered_names_a_family_with_no_test():
    ids = [(p if p.endswith("/") else p + "::") + "test_x[y]" for f, p in FAMILY_TESTS.items()
           if f != "chlo"]
    assert uncovered(ids) == ["chlo"]
    assert uncovered(ids + ["tests/ops/test_chlo.py::test_erf[f32]"]) == []
    # a file whose name only begins like the family's is not its test file
    assert uncovered(ids + ["tests/ops/test_chlo_extra.py::test_erf"]) == ["chlo"]
    assert uncovered([i for i in ids if not i.startswith("tests/quant/")]
                     + ["tests/ops/test_chlo.py::t"]) == ["quant"]


def test_every_family_has_a_test_outside_slow():
    files = sorted(set(FAMILY_TESTS.values()))
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


def test_long_tests_are_collected_first():
    # (the release file named last: its long tests still come first)
    files = ["tests/compat/test_compat.py", "tests/vhlo/test_release_artifacts.py"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
        cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    long = [i for i, node in enumerate(ids) if "_all_against_the_reference_interpreter" in node
            or node.endswith("::test_release_artifacts_against_the_reference_interpreter")]
    assert len(long) >= 2 and long == list(range(len(long))), ids[:8]
    assert ids[len(long)].startswith(files[0])
