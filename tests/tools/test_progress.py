"""Progress of long commands (shlo2jax/tools/progress.py): bars, and compare's steps, on
stderr where it is a terminal, never when it is piped or with -q; the command's lines stay
whole on stdout."""

from __future__ import annotations

import pathlib
import re
import time
import textwrap

import pytest

from shlo2jax.tools import cli, conformance, exits, isolated, progress
from shlo2jax.tools.compare import TranslatedBackend, compare

from _helpers import CHAIN

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _cases(folder, n: int = 3):
    for i in range(n):
        (folder / f"case{i}.mlir").write_text(textwrap.dedent(f"""\
            func.func @main() {{
              %0 = stablehlo.constant dense<{i}> : tensor<i32>
              %1 = stablehlo.add %0, %0 : tensor<i32>
              check.expect_eq_const %1, dense<{2 * i}> : tensor<i32>
              func.return
            }}
            """))


@pytest.fixture
def terminal(monkeypatch):
    """stderr taken for a terminal (under pytest it is a capture), every step drawn."""
    monkeypatch.setattr(progress, "_is_terminal", lambda stream: True)
    monkeypatch.setattr(progress, "MIN_INTERVAL", 0)


def test_conformance_draws_a_bar_on_a_terminal_and_keeps_lines_whole(tmp_path, capsys,
                                                                      terminal):
    _cases(tmp_path)
    assert conformance.main([str(tmp_path), "-j", "0"]) == 0
    out, err = capsys.readouterr()
    assert "conformance" in err and "3/3" in err
    lines = [line for line in out.splitlines() if line.startswith("pass")]
    assert len(lines) == 3 and all("conformance" not in line for line in lines)


@pytest.mark.parametrize("quiet", [False, True])
def test_no_bar_when_piped_or_quiet(tmp_path, capsys, monkeypatch, quiet):
    _cases(tmp_path, 2)
    if quiet:  # a terminal, but -q
        monkeypatch.setattr(progress, "_is_terminal", lambda stream: True)
    assert conformance.main([str(tmp_path), "-j", "0"] + (["-q"] if quiet else [])) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert sum(line.startswith("pass") for line in out.splitlines()) == (0 if quiet else 2)


def test_worker_runs_count_their_items(capsys, terminal):
    items = list(range(4))
    done = list(isolated.run_isolated("math:factorial", items, jobs=1, timeout=60,
                                      progress="items"))
    assert sorted((i, s, v) for i, s, v in done) == [(i, "ok", f) for i, f in
                                                      enumerate([1, 1, 2, 6])]
    err = capsys.readouterr().err
    assert "items" in err and "4/4" in err
    list(isolated.run_isolated("math:factorial", items, jobs=1, timeout=60))
    assert capsys.readouterr().err == ""


def test_compare_says_each_backend_and_recording_as_it_happens(capsys, terminal):
    perturbed = TranslatedBackend("cpu", name="other",
                                  source=CHAIN.replace("stablehlo.sine", "stablehlo.cosine"))
    compare(CHAIN, ["cpu", perturbed], locate=True, progress=progress.Steps("compare"))
    lines = capsys.readouterr().err.splitlines()
    assert [re.sub(r"[\d.]+ s", "S s", line) for line in lines] == [
        "compare: cpu: running", "compare: cpu: ok in S s",
        "compare: other: running", "compare: other: ok in S s",
        "compare: locate: recording every op of cpu",
        "compare: locate: cpu: 6 values recorded in S s",
        "compare: locate: recording every op of other",
        "compare: locate: other: 6 values recorded in S s"]


@pytest.mark.parametrize("terminal_stderr, quiet", [(True, False), (True, True),
                                                    (False, False)])
def test_the_compare_command_is_quiet_when_piped_or_with_q(tmp_path, capsys, monkeypatch,
                                                           terminal_stderr, quiet):
    monkeypatch.setattr(progress, "_is_terminal", lambda stream: terminal_stderr)
    path = tmp_path / "chain.mlir"
    path.write_text(CHAIN)
    argv = ["compare", str(path), "--backends", "cpu,f64"] + (["-q"] if quiet else [])
    assert cli.main(argv) == exits.OK
    out, err = capsys.readouterr()
    assert "backends agree" in out
    shown = terminal_stderr and not quiet
    assert ("compare: f64: ok in" in err) is shown and (err == "") is not shown


def test_the_interpreter_shows_its_seconds_against_its_limit(capsys, terminal, monkeypatch):
    """The reference interpreter's child cannot count its progress: its bar is the seconds
    spent against the time limit, redrawn while it runs, gone when it ends."""
    from shlo2jax.tools.compare import backends
    real = backends.InterpreterBackend.run

    def slow(self, *args, **kwargs):
        time.sleep(1.6)  # (three redraws of the bar)
        return real(self, *args, **kwargs)
    monkeypatch.setattr(backends.InterpreterBackend, "run", slow)
    compare(CHAIN, ["cpu", "interpreter"], interpreter_timeout=90,
            progress=progress.Steps("compare"))
    err = capsys.readouterr().err
    assert "compare: interpreter: running" in err
    assert re.search(r"compare: interpreter: .* 1/90 s", err), err  # redrawn as it ran
    assert "compare: interpreter: ok in" in err


def test_no_seconds_bar_when_piped(capsys):
    with progress.Steps("compare").timed("interpreter", 90):
        time.sleep(0.6)
    assert capsys.readouterr().err == ""


def test_a_large_input_is_loaded_saying_so(capsys, terminal, monkeypatch):
    from shlo2jax.tools import commands
    monkeypatch.setattr(commands, "LARGE_INPUT_BYTES", 1)  # (every input is large)
    path = str(ROOT / "examples" / "mlp.mlir")
    assert cli.main(["run", path]) == exits.OK
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and re.fullmatch(r"shlo2jax: loading .*mlp\.mlir \(0 MB\)", lines[0])
    assert re.fullmatch(r"shlo2jax: loaded in [\d.]+ s", lines[1]), lines
    monkeypatch.setattr(commands, "LARGE_INPUT_BYTES", 64 << 20)  # (the default: not this)
    assert cli.main(["run", path]) == exits.OK
    assert capsys.readouterr().err == ""
