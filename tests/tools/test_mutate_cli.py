"""`shlo2jax mutate` runs every mutant on the command line too: each must succeed or end in
one line `shlo2jax: error: ...` with a documented exit code and no traceback. A small fixed
sample here (fast subset), and of StableHLO's release artifacts; tests/tools/test_mutate.py runs 200
per lowering, and 150 of every release artifact (slow)."""

import pathlib

from shlo2jax.tools import exits
from shlo2jax.tools.mutate import (check_on_the_command_line, default_sources, mutants,
                                   release_sources, run_mutants)

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_a_sample_of_mutants_answers_in_one_line():
    sample = mutants(default_sources(str(ROOT)), 24, seed=31)
    report = run_mutants(sample, jobs=1, timeout=120)
    failures = "\n".join(f"{f['status']}: {f['source']} {f['mutation']}\n{f['detail']}"
                         for f in report.failures)
    assert not report.failures, f"{report.summary()}\n{failures}"
    assert report.outcomes.get("load:LoadError", 0) > 0, report.outcomes



def _stablehlo_version() -> tuple:
    from jaxlib.mlir.dialects import stablehlo
    return tuple(int(v) for v in stablehlo.get_current_version().split("."))


def test_mutants_of_release_artifacts_answer_by_name():
    """StableHLO's release artifacts as seeds (tests/vhlo, `mutate --releases`): an old, a
    recent and 1.20.0, newer than jaxlib <= 0.10 reads (bytes only there; jaxlib 0.12 reads
    it: its text too), bytes and text. Every mutant's load, `info`,
    and calls of some of its functions end in a library error or a run, never in a plain
    exception or a crash; each runs in a worker with a time limit (robustness.md: a bytecode
    mutant can make jaxlib's reader loop)."""
    sources = release_sources(str(ROOT), ["0.9.0", "1.16.0", "1.20.0"])
    reads_1_20 = _stablehlo_version() >= (1, 20, 0)
    assert [type(s.data) for s in sources] == [bytes, str, bytes, str, bytes] + \
        ([str] if reads_1_20 else [])
    report = run_mutants(mutants(sources, 24, seed=3), jobs=1, timeout=120)
    failures = "\n".join(f"{f['status']}: {f['source']} {f['mutation']}\n{f['detail']}"
                         for f in report.failures)
    assert not report.failures, f"{report.summary()}\n{failures}"
    assert report.outcomes.get("call:ran", 0) > 0, report.outcomes

def test_the_check_sees_a_command_line_that_is_not_one_line(monkeypatch):
    """The check fails where the command line would answer in more than one line or with an
    internal error (here: a stand-in for a bug, a KeyError escaping `run`)."""
    def broken(args):
        raise KeyError("a bug")
    monkeypatch.setattr("shlo2jax.tools.commands._run", broken)
    # the parser binds the command when it is built, so the stand-in is seen at the next call
    verdict = check_on_the_command_line(("t", "none", (ROOT / "examples" / "mlp.mlir").read_text()))
    assert verdict["code"] == exits.INTERNAL and not verdict["allowed"]
    assert "exit code 5" in verdict["error"]
