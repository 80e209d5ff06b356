"""Every code block of README.md and docs/ (docs/generated aside) runs as printed.

A page's ```python blocks run in order in one child process (tests/_doc_snippets.py), so a
later block uses an earlier one's names; a ```bash / ```sh / ```console block runs each of its
command lines that invokes the project (`shlo2jax`, `python -m shlo2jax...`, `python
benchmarks|docs|tests/...`) with this interpreter, checking its exit status and the output its
`# -> ` comment states (a console block: the lines after a `$ ` command). Both run in a scratch
folder that links to every entry of the checkout's root (and ../shared beside it, when there), so
the blocks read the repository's files and what they write stays out of it.

A block that cannot run here says why in a marker before its fence (tests/_doc_snippets.py);
`pip install` lines are skipped by rule (they change the environment the tests run in), and a
command that needs ../shared skips, with that reason, without it."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shlex
import subprocess
import sys

import numpy as np
import pytest

from _doc_snippets import (FAILED, RUN_LANGUAGES, Block, blocks, check_value, expectations, matches,
                           stray_markers)

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CHILD = pathlib.Path(__file__).with_name("_doc_snippets.py")
PAGES = ["README.md"] + sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md")
                               if "generated" not in p.relative_to(ROOT / "docs").parts)
TIMEOUT_S = {"fast": 300, "slow": 3600}
PIP = "`pip install` changes the environment the tests run in (and needs the network)"
SCRIPT_FOLDERS = ("benchmarks/", "docs/", "tests/")
# The pages on SPMD say to run their grids on 8 host devices, set before jax starts.
PYTHON_ENV = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}


def page_blocks(page: str) -> list[Block]:
    return [b for b in blocks((ROOT / page).read_text(), page) if b.language in RUN_LANGUAGES]


ALL = [block for page in PAGES for block in page_blocks(page)]


def _kind(block: Block) -> str:
    """"skip", "slow" or "" (no marker, or one test_markers_are_known_and_placed refuses)."""
    try:
        return (block.kind_and_reason or ("",))[0]
    except ValueError:
        return ""


def _marks(block_list) -> list:
    # (a slow snippet runs for minutes: long, so that it starts first)
    return ([pytest.mark.slow, pytest.mark.long] if any(_kind(b) == "slow" for b in block_list)
            else []) + \
        ([pytest.mark.shared] if any("../shared" in b.code for b in block_list) else [])


def _python_pages():
    for page in PAGES:
        runnable = [b for b in page_blocks(page) if b.language == "python" and _kind(b) != "skip"]
        if runnable:
            yield pytest.param(page, runnable, id=page, marks=_marks(runnable))


def _shell_blocks():
    """Each shell block once: a page that repeats another's commands (the CLI reference and a
    guide) runs them once, where they first appear."""
    first = {}
    for block in ALL:
        if block.language != "python" and _kind(block) != "skip":
            seen = first.setdefault(block.code, block)
            marks = _marks([block]) if seen is block else \
                [pytest.mark.skip(reason=f"the same commands as {seen.where}, run there")]
            yield pytest.param(block, id=block.where, marks=marks)


def _skipped_blocks():
    for block in ALL:
        if _kind(block) == "skip":
            yield pytest.param(block, id=block.where)


@pytest.fixture
def checkout(tmp_path) -> pathlib.Path:
    """A scratch root: links to the checkout's entries, and to ../shared beside it when there."""
    scratch = tmp_path / "checkout"
    scratch.mkdir()
    for entry in ROOT.iterdir():
        if not entry.name.startswith("."):
            (scratch / entry.name).symlink_to(entry)
    if SHARED.is_dir():
        (tmp_path / "shared").symlink_to(SHARED)
    return scratch


def _tail(text: str, n: int = 4000) -> str:
    return text[-n:]


@pytest.mark.parametrize("page, runnable", list(_python_pages()))
def test_python_blocks_run(page, runnable, checkout, tmp_path):
    listing = tmp_path / "blocks.json"
    listing.write_text(json.dumps([vars(b) for b in runnable]))
    slow = any(_kind(b) == "slow" for b in runnable)
    proc = subprocess.run([sys.executable, str(CHILD), str(listing)], cwd=checkout,
                          capture_output=True, text=True, env={**os.environ, **PYTHON_ENV},
                          timeout=TIMEOUT_S["slow" if slow else "fast"])
    failed = re.search(f"{FAILED}(\\S+)", proc.stderr)
    where = failed.group(1) if failed else page
    assert proc.returncode == 0, f"{where}: the block does not run as printed:\n{_tail(proc.stderr)}"


def commands(block: Block) -> list[tuple[str, str]]:
    """(command line, what its output shows) per command of a shell block: a console block's
    output lines, or a bash line's `# -> ` comment; continuation lines (`\\`) joined."""
    found, lines = [], block.code.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if block.language == "console" and not line.startswith("$ "):
            i += 1
            continue
        line = line[2:] if block.language == "console" else line
        while line.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line.rstrip()[:-1] + " " + lines[i].strip()
        i += 1
        shown = ""
        if block.language == "console":
            output = []
            while i < len(lines) and not lines[i].startswith("$ "):
                output.append(lines[i])
                i += 1
            shown = "\n".join(output).strip()
        elif "# -> " in line:
            line, shown = line.split("# -> ", 1)
        if line.strip() and not line.lstrip().startswith("#"):
            found.append((line.strip(), f"-> {shown.strip()}" if shown.strip() else ""))
    return found


def argv_of(command: str) -> tuple[dict, list[str]] | str:
    """(environment additions, argv to run) for a command that invokes the project; the reason it
    is not run (`pip install`) as a str; ValueError for any other command (mark its block)."""
    words = shlex.split(command, comments=True)
    env = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    head, rest = (words[0], words[1:]) if words else ("", [])
    if head == "pip" or (head.startswith("python") and rest[:2] == ["-m", "pip"]):
        return PIP
    if head == "shlo2jax":
        return env, [str(pathlib.Path(sys.executable).with_name("shlo2jax")), *rest]
    if head == "sed":  # a bundled file edited into a copy (in the scratch checkout)
        return env, ["bash", "-c", command]
    if head == "python" and rest[:1] == ["-m"] and rest[1].split(".")[0] == "shlo2jax":
        return env, [sys.executable, *rest]
    if head == "python" and rest and rest[0].startswith(SCRIPT_FOLDERS):
        return env, [sys.executable, *rest]
    raise ValueError(f"{command!r} does not invoke shlo2jax; run it here, or mark its block "
                     f"`<!-- snippet: skip (why) -->`")


def expected_exit_and_output(shown: str) -> tuple[int, str]:
    """What a command's `-> ` note states: its exit status (`exit N`, 0 unless said) and output."""
    shown = shown.removeprefix("-> ").strip()
    stated = re.match(r"exit (\d+)\b[:;,]?\s*", shown)
    return (int(stated.group(1)), shown[stated.end():]) if stated else (0, shown)


@pytest.mark.parametrize("block", list(_shell_blocks()))
def test_shell_blocks_run(block, checkout):
    runs = [(command, shown, argv_of(command)) for command, shown in commands(block)]
    if all(isinstance(argv, str) for _, _, argv in runs):
        pytest.skip(f"{block.where}: {runs[0][2] if runs else 'no command'}")
    if "../shared" in block.code and not SHARED.is_dir():
        pytest.skip(f"{block.where}: needs {SHARED}, which is absent (not part of the repo)")
    timeout = TIMEOUT_S["slow" if _kind(block) == "slow" else "fast"]
    for command, shown, argv in runs:
        if isinstance(argv, str):
            continue
        env, args = argv
        proc = subprocess.run(args, cwd=checkout, capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, **env})
        status, output = expected_exit_and_output(shown)
        said = f"{block.where}: `{command}` exited {proc.returncode}:\n" \
               f"{_tail(proc.stdout, 2000)}\n{_tail(proc.stderr)}"
        assert proc.returncode == status, said
        printed = proc.stdout + proc.stderr
        if block.language == "console":
            assert matches(output, printed.strip()), f"{said}\n(the page shows:\n{output})"
        else:
            assert not output or matches(f"...{output}...", printed), \
                f"{said}\n(the page shows: {output})"


@pytest.mark.parametrize("block", list(_skipped_blocks()))
def test_marked_blocks_are_skipped(block):
    pytest.skip(f"{block.where}: {block.kind_and_reason[1]}")


def test_markers_are_known_and_placed():
    """A marker the runner does not know, or one not right before a fence, fails here (it would
    otherwise stop marking anything without a word)."""
    problems = []
    for page in PAGES:
        text = (ROOT / page).read_text()
        problems += [f"{page}:{line}: a snippet marker not right before a fence"
                     for line in stray_markers(text)]
        for block in blocks(text, page):
            try:
                block.kind_and_reason
            except ValueError as unknown:
                problems.append(str(unknown))
            if block.marker is not None and block.language not in RUN_LANGUAGES:
                problems.append(f"{block.where}: a snippet marker on a ```{block.language} "
                                f"block, which is not run")
    assert problems == []


def test_every_shell_command_is_run_or_ruled_out():
    """A command line of an unmarked block that is neither the project's nor `pip install`."""
    problems = []
    for block in ALL:
        if block.language == "python" or _kind(block):
            continue
        for command, _ in commands(block):
            try:
                argv_of(command)
            except ValueError as other:
                problems.append(f"{block.where}: {other}")
    assert problems == []


# ---------------------------------------------------------------- the reader and the checks

PAGE = '''Text.

<!-- snippet: skip (needs a GPU) -->
```python
x = 1
```

```console
$ shlo2jax info examples/mlp.mlir --strict
@main(arg_0: f32[8,16], ...) -> (f32[2,4])
$ shlo2jax run missing.mlir
shlo2jax: error: ...
```

<!-- snippet: later -->
```bash
shlo2jax run x.mlir   # -> exit 1: no such file
```
<!-- snippet: slow (stray) -->

```text
not code
```
'''


def test_blocks_read_language_line_code_and_marker():
    found = blocks(PAGE, "p.md")
    assert [(b.language, b.line, b.marker) for b in found] == [
        ("python", 5, " skip (needs a GPU) "), ("console", 9, None), ("bash", 17, " later "),
        ("text", 22, None)]
    assert found[0].code == "x = 1" and found[0].kind_and_reason == ("skip", "needs a GPU")
    with pytest.raises(ValueError, match="unknown snippet marker 'later'"):
        found[2].kind_and_reason
    assert stray_markers(PAGE) == [19]


def test_commands_of_console_and_bash_blocks():
    console, bash = blocks(PAGE, "p.md")[1:3]
    assert commands(console) == [
        ("shlo2jax info examples/mlp.mlir --strict", "-> @main(arg_0: f32[8,16], ...) -> (f32[2,4])"),
        ("shlo2jax run missing.mlir", "-> shlo2jax: error: ...")]
    assert commands(bash) == [("shlo2jax run x.mlir", "-> exit 1: no such file")]
    assert expected_exit_and_output("-> exit 1: no such file") == (1, "no such file")
    assert expected_exit_and_output("-> 2 passed") == (0, "2 passed")
    joined = Block("p.md", 1, "bash", "python -m shlo2jax conformance a \\\n  -q   # all")
    assert commands(joined) == [("python -m shlo2jax conformance a  -q   # all", "")]


def test_argv_of_runs_the_projects_commands_only():
    env, argv = argv_of('XLA_FLAGS="--a b" shlo2jax run examples/mlp.mlir  # note')
    assert env == {"XLA_FLAGS": "--a b"} and argv[1:] == ["run", "examples/mlp.mlir"]
    assert pathlib.Path(argv[0]).name == "shlo2jax"
    assert argv_of("python -m shlo2jax.compat")[1] == [sys.executable, "-m", "shlo2jax.compat"]
    assert argv_of("python docs/gen_tables.py --check")[1][1:] == ["docs/gen_tables.py", "--check"]
    assert argv_of('pip install -e ".[test]"') == PIP
    for other in ("mkdocs serve", "python train.py", "python -m pytest", 'python -c "1"'):
        with pytest.raises(ValueError, match="mark its block"):
            argv_of(other)


def test_stated_values_are_checked():
    code = ("y = f(1)\nprint(y)   # -> @main(a: f32[2], ...) -> (f32[])\n"
            "z          # -> [1.0, 2.5]\nw\n# -> ['a',\n#     'b']\n# a remark, not output\n")
    assert expectations(code) == {2: "@main(a: f32[2], ...) -> (f32[])", 3: "[1.0, 2.5]",
                                  4: "['a', 'b']"}
    assert check_value("@main(a: f32[2], b: i32[])  ->  (f32[])",
                       "@main(a: f32[2], ...) -> (f32[])") is None
    assert check_value("@main(a: f32[3]) -> (f32[])", "@main(a: f32[2], ...) -> (f32[])")
    assert check_value(np.array([1.0, 2.5000001], np.float32), "[1.0, 2.5]") is None
    assert check_value(np.array([1.0, 2.6]), "[1.0, 2.5]")
    assert check_value(np.array([1.0, 2.5, 0.0]), "[1.0, 2.5]")  # the shape too
    assert check_value(["a", "b"], "['a', 'b']") is None and check_value(["b", "a"], "['a', 'b']")
    assert check_value(True, "True") is None and check_value(False, "True")


def test_a_failing_block_is_named_by_its_page_line(tmp_path):
    page = [Block("p.md", 10, "python", "x = 2\n"),
            Block("p.md", 20, "python", "y = x + 1\ny   # -> 4\n")]
    listing = tmp_path / "blocks.json"
    listing.write_text(json.dumps([vars(b) for b in page]))
    proc = subprocess.run([sys.executable, str(CHILD), str(listing)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1
    assert f"{FAILED}p.md:20" in proc.stderr and "p.md:21: 3 is not 4" in proc.stderr
