"""The command line's load options are `LoadOptions`' fields (issue 42): every subcommand that
loads a program has a flag per field, made from the field (its help, a Literal's choices, a
bool's --x/--no-x), and the flags reach the loaded program as one `LoadOptions`. The tools
(`conformance`, `fuzz`) and `lift_params` pass the options they are given to where they load."""

import dataclasses
import pathlib
import re

import pytest

import shlo2jax
from shlo2jax import LoadOptions
from shlo2jax.options import LoopBounds, field_choices, field_help
from shlo2jax.tools import cli, commands, conformance, fuzz
from shlo2jax.tools.option_flags import flags_of

ROOT = pathlib.Path(__file__).resolve().parents[2]
MLP = ROOT / "examples" / "mlp.mlir"
FIELDS = [f.name for f in dataclasses.fields(LoadOptions)]

ELIDED = """func.func @main() {
  %c = stablehlo.constant dense_resource<__elided__> : tensor<2xf32>
  %0 = stablehlo.subtract %c, %c : tensor<2xf32>
  check.expect_eq_const %0, dense<0.0> : tensor<2xf32>
  func.return
}
"""


def _subparsers(parser):
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            return action.choices
    raise AssertionError("no subcommands")


def loading_parsers() -> dict:
    """Every subcommand that loads a program, with its parser."""
    program_commands = _subparsers(cli.parser())
    parsers = {name: program_commands[name] for name, _ in commands.COMMANDS}
    parsers["conformance"] = conformance._parser()
    parsers["fuzz"] = fuzz._parser()
    return parsers


@pytest.mark.parametrize("command", ["info", "run", "compare", "export", "conformance", "fuzz"])
def test_every_field_has_a_flag_on_every_loading_subcommand(command):
    parser = loading_parsers()[command]
    flags = flags_of(parser)
    assert sorted(flags) == sorted(FIELDS), f"{command}: {flags}"
    for action in parser._actions:
        name = action.dest.removeprefix("load_option_")
        if name in FIELDS and action.dest != name:
            # its help is the field's documentation; a Literal's choices are its type's
            assert field_help()[name].replace("%", "%%").rstrip(".")[:60] in action.help
            assert action.choices == field_choices(name)


def test_every_field_is_documented_and_literals_give_the_choices():
    assert sorted(field_help()) == sorted(FIELDS)
    assert field_choices("lowering") == ("translate", "direct")
    assert field_choices("gradients") == ("strong_zero", "lax")
    assert field_choices("seed") is None


def test_no_subcommand_lists_the_choices_of_an_option_itself():
    literal = re.compile(r"""\(\s*["']translate["']\s*,\s*["']direct["']\s*\)|"""
                         r"""\(\s*["']strong_zero["']\s*,\s*["']lax["']\s*\)""")
    found = [str(p.relative_to(ROOT)) for p in (ROOT / "shlo2jax").rglob("*.py")
             if literal.search(p.read_text())]
    assert not found, found


@pytest.fixture
def loaded(monkeypatch):
    """The programs the commands load (commands.load wrapped)."""
    programs = []

    def load(*args, **kwargs):
        # one LoadOptions, no loose option keywords (module, signature: what a folder reads)
        assert set(kwargs) <= {"module", "signature"}, kwargs
        programs.append(shlo2jax.load(*args, **kwargs))
        return programs[-1]
    monkeypatch.setattr(commands, "load", load)
    return programs


def test_flag_values_reach_the_loaded_program(loaded, capsys):
    assert cli.main(["run", str(MLP), "--lowering", "direct", "--max-loop-trips", "7",
                     "--gradients", "lax", "--no-producer-vjp", "--seed", "3"]) == 0
    assert "lowering: direct" in capsys.readouterr().out
    options = loaded[-1].options
    assert options == LoadOptions(lowering="direct", max_loop_trips=7, gradients="lax",
                                  producer_vjp=False, seed=3)


def test_loop_bounds_by_location(loaded, capsys):
    assert cli.main(["export", str(MLP), "-o", "/dev/null", "--format", "mlir",
                     "--max-loop-trips", 'loc("a")=3', "--max-loop-trips", "b.mlir:2:8=5"]) == 0
    trips = loaded[-1].options.max_loop_trips
    assert isinstance(trips, LoopBounds) and trips == {'loc("a")': 3, "b.mlir:2:8": 5}


@pytest.mark.parametrize("words, message", [
    (["--max-loop-trips", "7", "--max-loop-trips", "a=1"], "not both"),
    (["--max-loop-trips", "many"], "write N"),
    (["--lowering", "fast"], "invalid choice"),
    (["--seed", "-1"], "at least 0"),
])
def test_bad_flag_values_are_usage_errors(words, message, capsys):
    assert cli.main(["run", str(MLP)] + words) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_info_loads_not_strict_unless_told(loaded, capsys):
    assert cli.main(["info", str(MLP)]) == 0
    assert loaded[-1].options == LoadOptions(strict=False, placeholder_data=True)
    assert cli.main(["info", str(MLP), "--strict", "--no-placeholder-data"]) == 0
    assert loaded[-1].options == LoadOptions()
    help_text = _subparsers(cli.parser())["info"].format_help()
    assert "(default here: --no-strict)" in " ".join(help_text.split())


def test_conformance_loads_each_case_with_the_options(tmp_path, capsys):
    case = {"id": "case.mlir", "text": ELIDED, "path": "case.mlir", "group": "."}
    assert conformance.run_case(case)[0] == "error"  # elided data: not loaded by default
    with_data = LoadOptions(placeholder_data=True)
    assert conformance.run_case(case, options=with_data) == ("pass", "1 check(s) held")
    (tmp_path / "case.mlir").write_text(ELIDED)
    cases = conformance.discover([str(tmp_path)])
    # in a worker process: the options travel with the case
    results = conformance.run_cases(cases, 1, 120, options=with_data)
    assert [r["outcome"] for r in results] == ["pass"]
    # and from the command line
    assert conformance.main([str(tmp_path), "-j", "0", "--placeholder-data"]) == 0
    assert "1 check(s) held" in capsys.readouterr().out


def test_fuzz_loads_each_program_with_the_options(monkeypatch):
    seen = []
    real_load = fuzz.load

    def load(text, options=None, **kwargs):
        seen.append(options)
        return real_load(text, options, **kwargs)
    monkeypatch.setattr(fuzz, "load", load)
    options = LoadOptions(lowering="direct", max_loop_trips=5)
    program = fuzz.generate(3)
    fuzz._run_backends(program.text(), program.inputs, interpreter=False, xla_direct=False,
                       options=options)
    assert seen == [options]
    # the item a worker process gets carries them
    checked = []
    monkeypatch.setattr(fuzz, "check", lambda *args: checked.append(args) or {})
    fuzz.check_in_worker((3, False, options))
    assert checked == [(3, False, options)]
    # and the command line's flags make them (--seed picks the programs)
    runs = []
    monkeypatch.setattr(fuzz, "run", lambda seeds, jobs, options, progress: runs.append(options) or
                        fuzz.Report(0, [], [], [], 0, 0.0))
    assert fuzz.main(["--count", "0", "--seed", "9", "--placeholder-seed", "4",
                      "--lowering", "direct", "--no-strict"]) == 0
    assert runs == [LoadOptions(seed=4, lowering="direct", strict=False)]


def test_lift_params_loads_a_path_with_the_options(tmp_path):
    path = tmp_path / "elided.mlir"
    path.write_text("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
                    "  %w = stablehlo.constant dense_resource<__elided__> : tensor<4xf32>\n"
                    "  %0 = stablehlo.multiply %x, %w : tensor<4xf32>\n"
                    "  return %0 : tensor<4xf32>\n}\n")
    with pytest.raises(shlo2jax.errors.LoadError, match="placeholder_data"):
        shlo2jax.lift_params(str(path))
    options = LoadOptions(placeholder_data=True, seed=2, gradients="lax")
    params, apply = shlo2jax.lift_params(str(path), options=options)
    assert len(params) == 1 and apply.function.program.options is options
    program = shlo2jax.load(str(path), options)
    with pytest.raises(TypeError, match="loaded already"):
        shlo2jax.lift_params(program, options=options)
