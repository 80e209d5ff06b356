"""What a user meets when something is wrong: one line `shlo2jax: error: ...` on stderr, the
documented exit code (shlo2jax.tools.exits), no traceback. Most cases run in this process
(`cli.main` with capsys); a few run the real command, where the interpreter's own handling
(a closed pipe, the exit status, --debug) is what is tested."""

import os
import pathlib
import subprocess
import sys

import jax
import numpy as np
import pytest

from shlo2jax.tools import cli, exits

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mlp.mlir"
POLY = ROOT / "tests" / "corpus" / "jax" / "mlp_poly" / "exported.bin"  # f32[b,6] argument
EXPORTED = ROOT / "tests" / "corpus" / "jax" / "mlp" / "exported.bin"
BYTECODE = ROOT / "tests" / "corpus" / "tensorflow" / "tf_cnn" / "model.mlir.bc"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    (d / "empty.mlir").write_bytes(b"")
    (d / "bad.bin").write_bytes(b"\x00\x01\x02garbage")
    (d / "truncated.mlir.bc").write_bytes(BYTECODE.read_bytes()[:300])
    (d / "truncated.bin").write_bytes(EXPORTED.read_bytes()[:2000])
    (d / "parse.mlir").write_text("func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
                                  "  %0 = stablehlo.ad %x, %x : tensor<2xf32>\n"
                                  "  return %0 : tensor<2xf32>\n}\n")
    (d / "unsupported.mlir").write_text(
        "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
        '  %0 = "foo.frobnicate"(%x) : (tensor<2xf32>) -> tensor<2xf32>\n'
        "  return %0 : tensor<2xf32>\n}\n")
    (d / "dynamic.mlir").write_text(
        "func.func @main(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {\n"
        "  %0 = stablehlo.add %x, %x : tensor<?x2xf32>\n  return %0 : tensor<?x2xf32>\n}\n")
    (d / "token.mlir").write_text(
        "func.func @main(%t: !stablehlo.token, %x: tensor<2xf32>) -> tensor<2xf32> {\n"
        "  return %x : tensor<2xf32>\n}\n")
    np.savez(d / "keys.npz", w1=np.zeros(3), nope=np.zeros(2))
    np.savez(d / "missing.npz", arg_0=np.zeros((8, 16), np.float32))
    np.savez(d / "dtype.npz", **{f"arg_{i}": np.zeros(s, np.float64 if i == 4 else np.float32)
                                 for i, s in enumerate([(8, 16), (16,), (16, 4), (4,), (2, 8)])})
    return d


# (argv with {d} for the folder of bad files, exit code, words the one line must hold)
CASES = [
    (["run", "nothere.bin"], 1, ["no such file: nothere.bin"]),
    (["run", "examples/mlp.mlr"], 1, ["no such file: examples/mlp.mlr",
                                      "did you mean examples/mlp.mlir?"]),
    (["run", "examples"], 1, ["examples is a folder", "mlp.mlir"]),
    (["run", "{d}/empty.mlir"], 1, ["empty.mlir is empty (0 bytes)"]),
    (["run", "{d}/bad.bin"], 1, ["bad.bin (10 bytes) is not a known format"]),
    (["run", "{d}/truncated.mlir.bc"], 1, ["truncated or corrupt MLIR bytecode"]),
    (["run", "{d}/truncated.bin"], 1, ["truncated.bin", "corrupt", "jax.export artifact"]),
    (["info", "{d}/parse.mlir"], 1, ['parse.mlir":2:8: custom op \'stablehlo.ad\' is unknown']),
    (["run", "{d}/unsupported.mlir"], 1, ["1 unsupported construct(s) in the program: "
                                          "foo.frobnicate at ", "unsupported.mlir:2:8"]),
    (["run", "{d}/dynamic.mlir"], 1, ["arg_0: f32[?,2] has a `?` dimension",
                                      "--shape arg_0=Nx2"]),
    (["run", "{d}/dynamic.mlir", "--shape", "arg_0=3x3"], 2, ["does not fit arg_0: f32[?,2]"]),
    (["run", "{d}/token.mlir"], 1, ["seeded value for arg_0: !stablehlo.token is a token"]),
    (["run", "examples/mlp.mlir", "--inputs", "{d}/keys.npz"], 1,
     ["unknown key(s) 'w1', 'nope'", "takes arg_0, arg_1, arg_2, arg_3, arg_4"]),
    (["run", "examples/mlp.mlir", "--inputs", "{d}/missing.npz"], 1,
     ["missing argument(s) arg_1, arg_2, arg_3, arg_4"]),
    (["run", "examples/mlp.mlir", "--inputs", "{d}/dtype.npz"], 1,
     ["'arg_4' has dtype float64; arg_4 is f32[2,8]"]),
    (["run", "examples/mlp.mlir", "--inputs", "{d}/none.npz"], 1, ["none.npz: no such file"]),
    (["run", "examples/mlp.mlir", "--function", "foo"], 2,
     ["no public function @foo; public functions: main"]),
    (["compare", "examples/mlp.mlir", "--backends", "cpu,quantum"], 2,
     ["unknown backend(s) 'quantum'"]),
    (["compare", "examples/mlp.mlir", "--rtol", "-1"], 2,
     ["argument --rtol: -1 is out of range: must be at least 0"]),
    (["compare", "examples/mlp.mlir", "--atol", "nan"], 2, ["'nan' is not a finite number"]),
    (["compare", "examples/mlp.mlir", "--backends", "cpu"], 2, ["needs at least two backends"]),
    (["run", str(POLY)], 1, ["args[5]: f32[b,6] has the symbolic dimension b",
                             "give --dim b=SIZE"]),
    (["run", str(POLY), "--dim", "c=2"], 2, ["--dim c: no such dimension",
                                             "its symbolic dimensions: b"]),
    (["run", "examples/mlp.mlir", "--dim", "b"], 2, ["'b': write NAME=SIZE"]),
    (["run", "examples/mlp.mlir", "--output", "{d}/out.txt"], 2, ["name the file *.npz"]),
    (["export", "examples/mlp.mlir", "-o", "{d}/out.txt2"], 2,
     ["cannot tell the format from its extension"]),
    (["export", str(POLY), "-o", "{d}/out.mlir"], 1, ["only static, non-quantized"]),
    (["run", "examples/mlp.mlir", "--output", "{d}/no/such/folder/out.npz"], 2,
     ["--output", "no folder"]),  # (before the run: issue 43)
    (["info"], 2, ["give a FILE, or --ops"]),
    (["frobnicate"], 2, ["invalid choice: 'frobnicate'"]),
]


@pytest.mark.parametrize("argv, code, words", CASES, ids=[" ".join(c[0][:2]) + f" #{i}"
                                                          for i, c in enumerate(CASES)])
def test_one_line_and_the_exit_code(files, capsys, monkeypatch, argv, code, words):
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("SHLO2JAX_DEBUG", raising=False)
    got = cli.main([a.replace("{d}", str(files)) for a in argv])
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("shlo2jax: error: "), err
    assert "Traceback" not in err
    for w in words:
        assert w in lines[0], lines[0]
    assert got == code, lines[0]


def test_compare_on_fewer_than_two_backends_reports_no_agreement(capsys, monkeypatch):
    if {d.platform for d in jax.devices()} & {"gpu", "tpu"}:
        pytest.skip("a GPU or TPU is here: both backends could run")
    monkeypatch.chdir(ROOT)
    assert cli.main(["compare", "examples/mlp.mlir", "--backends", "cpu,tpu"]) == \
        exits.NOTHING_COMPARED
    out, err = capsys.readouterr()
    assert "backends agree" not in out
    assert out.rstrip().endswith("nothing compared: fewer than two backends produced results")
    assert err.startswith("shlo2jax: error: nothing compared: 1 of 2 backends produced results "
                          "(cpu) (tpu skipped: no tpu device") and err.count("\n") == 1
    assert cli.main(["compare", "examples/mlp.mlir", "--backends", "gpu,tpu"]) == \
        exits.NOTHING_COMPARED
    assert "0 of 2 backends produced results (gpu skipped" in capsys.readouterr().err


def test_compare_disagreement_exits_3(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert cli.main(["compare", "examples/mlp.mlir", "--backends", "cpu,f64",
                     "--rtol", "0", "--atol", "0"]) == exits.DISAGREE
    out, err = capsys.readouterr()
    assert out.rstrip().endswith("backends DISAGREE")
    assert err == "shlo2jax: error: backends disagree: cpu vs f64 beyond rtol=0.0, atol=0.0\n"


def test_polymorphic_export_runs_with_dim(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert cli.main(["run", str(POLY), "--dim", "b=3"]) == 0
    out = capsys.readouterr().out
    assert "args[5]: f32[b,6]) -> (f32[b,3])" in out and "output 0: float32[3, 3]" in out
    assert cli.main(["compare", str(POLY), "--dim", "b=5", "--backends", "cpu,f64"]) == 0
    assert "backends agree" in capsys.readouterr().out


def test_dynamic_dimensions_sized_with_shape(files, capsys):
    assert cli.main(["run", str(files / "dynamic.mlir"), "--shape", "arg_0=3x2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("@main(arg_0: f32[?,2]) -> (f32[?,2])\noutput 0: float32[3, 2]")
    assert cli.main(["info", str(files / "dynamic.mlir"), "--mlir-types"]) == 0
    assert "@main(arg_0: tensor<?x2xf32>) -> (tensor<?x2xf32>)" in capsys.readouterr().out


def test_inputs_by_name_and_by_position(tmp_path, capsys):
    rng = np.random.default_rng(0)
    shapes = [(8, 16), (16,), (16, 4), (4,), (2, 8)]
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    by_position, by_name = tmp_path / "pos.npz", tmp_path / "name.npz"
    np.savez(by_position, **{str(i): a for i, a in enumerate(args)})
    np.savez(by_name, **{f"arg_{i}": a for i, a in reversed(list(enumerate(args)))})
    outs = []
    for path in (by_position, by_name):
        out = tmp_path / f"out_{path.stem}.npz"
        assert cli.main(["run", str(EXAMPLE), "--inputs", str(path), "--output", str(out)]) == 0
        outs.append(np.load(out)["output_0"])
    np.testing.assert_array_equal(outs[0], outs[1])
    # a jax.export names its arguments by their paths: the keys are those names
    named = tmp_path / "exported.npz"
    data = {f"args[{i}]": np.ones(s, np.float32)
            for i, s in enumerate([(24,), (24,), (24,), (6, 24), (24, 3), (4, 6)])}
    np.savez(named, **data)
    assert cli.main(["run", str(POLY), "--inputs", str(named)]) == 0
    assert "output 0: float32[4, 3]" in capsys.readouterr().out


def test_help_lists_every_command_and_exit_code(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("info", "run", "compare", "export", "conformance", "fuzz", "mutate"):
        assert f"    {command}" in out
    for code, _ in exits.EXIT_CODES:
        assert f"\n  {code:<4} " in out
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("shlo2jax ")


def test_every_option_has_help():
    parser = cli.parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    for name, sub in subparsers.choices.items():
        if name in cli.TOOLS:
            continue
        for action in sub._actions:
            assert action.help, f"shlo2jax {name} {action.option_strings or action.dest}"


def test_internal_errors_are_one_line_with_code_5(capsys, monkeypatch):
    def broken(args):
        raise KeyError("a bug")
    monkeypatch.setattr("shlo2jax.tools.commands._info", broken)
    monkeypatch.delenv("SHLO2JAX_DEBUG", raising=False)
    assert cli.main(["info", "x.mlir"]) == exits.INTERNAL
    err = capsys.readouterr().err
    assert err.startswith("shlo2jax: error: internal error, KeyError: 'a bug'")
    assert err.count("\n") == 1


# ------------------------------------------------------------------ the real command

def _command(*argv, env=None, shell=None):
    environment = {k: v for k, v in os.environ.items() if k != "SHLO2JAX_DEBUG"}
    environment.update({"JAX_PLATFORMS": "cpu", **(env or {})})
    if shell:
        return subprocess.run(["bash", "-o", "pipefail", "-c", shell], cwd=ROOT, env=environment,
                              capture_output=True, text=True, timeout=300)
    return subprocess.run([sys.executable, "-m", "shlo2jax", *argv], cwd=ROOT, env=environment,
                          capture_output=True, text=True, timeout=300)


def test_command_error_and_debug(files):
    done = _command("run", "examples/mlp.mlr")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == ("shlo2jax: error: no such file: examples/mlp.mlr (did you mean "
                           "examples/mlp.mlir?)\n")
    done = _command("run", "examples/mlp.mlr", env={"SHLO2JAX_DEBUG": "1"})
    assert done.returncode == 1 and "Traceback" in done.stderr
    assert done.stderr.rstrip().splitlines()[-1].startswith("shlo2jax: error: no such file")


def test_closed_pipe_ends_quietly():
    # `true` has gone long before the interpreter starts writing: every write meets a closed
    # pipe. With `head -2` the writes may all fit the pipe's buffer before head exits.
    for reader, lines in (("true", 0), ("head -2", 2)):
        done = _command(shell=f"{sys.executable} -m shlo2jax info examples/mlp.mlir | {reader}")
        assert len(done.stdout.splitlines()) == lines
        assert done.stderr == ""  # no BrokenPipeError, no "Exception ignored"
        assert done.returncode in ((exits.CLOSED_PIPE,) if reader == "true"
                                   else (0, exits.CLOSED_PIPE))


@pytest.mark.parametrize("argv", [
    ["compare", "examples/mlp.mlir", "--json", "{missing}/report.json"],
    ["run", "examples/mlp.mlir", "--output", "{missing}/outputs.npz"],
    ["export", "examples/mlp.mlir", "-o", "{missing}/mlp.bin"],
    ["compare", "examples/mlp.mlir", "--json", "{folder}"],
])
def test_an_output_path_is_checked_before_the_work(argv, capsys, monkeypatch, tmp_path):
    # Issue 43: a report path that cannot be written is a usage error at once, not after the
    # comparison (the reference interpreter may run for minutes first)
    monkeypatch.chdir(ROOT)
    argv = [a.format(missing=tmp_path / "missing", folder=tmp_path) for a in argv]
    assert cli.main(argv) == exits.USAGE
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("shlo2jax: error: ") and err.count("\n") == 1, err
    assert str(tmp_path) in err
