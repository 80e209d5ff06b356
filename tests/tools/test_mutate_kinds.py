"""`shlo2jax mutate --kinds`: structure-aware mutants of every input kind (HLO text and protos,
XLA dump folders, PyTorch/XLA bundles, jax.export flatbuffers, .npz inputs, SavedModels, .pt2 archives),
each loaded, called and run on the command line in a worker with a time limit per mutant.
Every mutant must load and run, or end in a library error; the command line in one line
`shlo2jax: error: ...` with a documented exit code. docs/guides/robustness.md records the
campaigns; these run 20 of each kind."""

import importlib.util
import pathlib

import pytest

from shlo2jax.errors import UsageError
from shlo2jax.tools import mutate
from shlo2jax.tools.mutate import (KINDS, check_mutant, default_sources, kind_of, mutants,
                                   run_mutants, structured_sources)
from shlo2jax.tools.mutate_structured import Folder, WithInputs

ROOT = pathlib.Path(__file__).resolve().parents[2]
HAVE_TORCH = all(importlib.util.find_spec(m) is not None for m in ("torch", "torchax"))
STRUCTURED = [k for k in KINDS if k not in ("bytes", "text")]
SECONDS_PER_MUTANT = 120


@pytest.fixture(scope="module")
def sources():
    return structured_sources(str(ROOT))


def test_every_kind_has_seeds(sources):
    by_kind = {}
    for s in sources:
        by_kind.setdefault(s.kind, []).append(s)
    assert set(by_kind) == set(STRUCTURED)
    assert all(isinstance(s.data, Folder) for k in ("dump", "bundle", "saved_model")
               for s in by_kind[k])
    assert all(isinstance(s.data, WithInputs) for s in by_kind["npz"])
    # every jax that wrote tests/export_artifacts: serialization versions 1 to 12
    assert {s.name.split("/")[2] for s in by_kind["export"]
            if s.name.startswith("tests/export_artifacts/")} >= {"jax-0.4.23", "jax-0.4.30",
                                                                 "jax-0.8.3", "jax-0.12.0.1"}
    assert {s.name.rsplit(":", 1)[-1] for s in by_kind["hlo_proto"]} >= {"snapshot", "module"}


@pytest.mark.parametrize("kind", STRUCTURED)
def test_a_seed_of_each_kind_loads_and_runs_unmutated(sources, kind):
    """The check's baseline: what is mutated runs as it is (else every mutant is an error)."""
    if kind == "pt2" and not HAVE_TORCH:
        pytest.skip("a .pt2 loads only where torch and torchax are (pip install "
                    "\"shlo2jax[torch]\"); without them each pt2 mutant is one LoadError")
    seed = next(s for s in sources if s.kind == kind)
    outcome = check_mutant((seed.name, "none", seed.data))
    assert outcome["allowed"] and outcome["outcome"] in ("ran", "loaded"), outcome


def test_a_kind_draws_the_same_mutants_whatever_runs_beside_it(sources):
    npz = [s for s in sources if s.kind == "npz"]
    alone = [label for _, label, _ in mutants(npz, 6, seed=4)]
    beside = [label for _, label, _ in mutants(sources, 6 * len(STRUCTURED), seed=4)
              if label.startswith("npz_")]
    assert beside == alone


def test_byte_and_text_mutants_keep_their_sequence(sources):
    """Byte- and text-level mutants share one generator, drawn in the order they were before
    the other kinds: beside those they are the same (the recorded failures keep their
    mutations)."""
    classic = default_sources(str(ROOT))
    assert {kind_of(s) for s in classic} == {"bytes", "text"}
    alone = [(name, label) for name, label, _ in mutants(classic, 20, seed=0)]
    groups = len(KINDS)  # KINDS' order: bytes, text, then the others
    beside = [(name, label) for k, (name, label, _) in
              enumerate(mutants(classic + sources, 10 * groups, seed=0)) if k % groups < 2]
    assert beside == alone


def test_kinds_on_the_command_line():
    assert mutate._kinds("npz, dump") == ("npz", "dump")
    with pytest.raises(Exception, match="unknown kind"):
        mutate._kinds("npz,frob")
    with pytest.raises(UsageError, match="no seeds"):
        mutate.main(["--kinds", "dump", "--root", str(ROOT / "examples"), "--count", "1"])


def test_a_folder_mutant_is_checked_by_its_path():
    saved = next(s for s in structured_sources(str(ROOT), ["saved_model"]))
    files = dict(saved.data.files)
    del files["saved_model.pb"]
    outcome = check_mutant((saved.name, "delete", Folder(tuple(files.items()))))
    assert outcome["allowed"] and outcome["stage"] == "load", outcome
    assert outcome["outcome"] == "LoadError"


@pytest.mark.slow
@pytest.mark.parametrize("kind", STRUCTURED)
def test_twenty_mutants_of_each_kind_end_in_library_errors_or_runs(sources, kind):
    sample = mutants([s for s in sources if s.kind == kind], 20, seed=46)
    report = run_mutants(sample, jobs=1, timeout=SECONDS_PER_MUTANT)
    failures = "\n".join(f"{f['status']}: {f['source']} {f['mutation']} (mutant {f['index']}, "
                         f"seed 46)\n{f['detail']}" for f in report.failures)
    assert not report.failures, f"{report.summary()}\n{failures}"
    assert sum(report.outcomes.values()) == 20
    assert any(k.endswith(("Error", "NewerThanReader")) for k in report.outcomes), report.outcomes
