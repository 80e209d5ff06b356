"""`compare ... --locate --model-explorer OVERLAY` / `Comparison.write_model_explorer`: each
op's error as Model Explorer node data (graph id -> {"results": {node id: {"value", "bgColor"}}}),
its nodes numbered as Model Explorer's MLIR adapter numbers a StableHLO module's."""

import json
import pathlib

import pytest

import shlo2jax
from shlo2jax.tools import cli, exits
from shlo2jax.tools.compare import compare
from shlo2jax.tools.compare.overlay import BEYOND, EQUAL, FIRST, node_ids

ROOT = pathlib.Path(__file__).resolve().parents[3]
MLP = ROOT / "examples" / "mlp.mlir"
FIRST_ADD = "%3 = stablehlo.add %0, %2"


@pytest.fixture(scope="module")
def edited(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("overlay") / "mlp_edited.mlir"
    path.write_text(MLP.read_text().replace(FIRST_ADD, "%3 = stablehlo.subtract %0, %2"))
    return path


def _op_at(module, text: str, what: str):
    """The op of the line holding `what` named as in `what` (`%n = NAME ...`)."""
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if what in ln)
    name = what.split()[2]
    return next(op for op in module.ops if f":{line}:" in op.location and op.name == name)


def test_nodes_are_numbered_as_model_explorer_numbers_them():
    module = shlo2jax.load(str(MLP)).module
    text = MLP.read_text()
    ids = node_ids(module)
    # @main: two constants, then %0.. in order: %3 the 6th op
    assert ids[_op_at(module, text, FIRST_ADD).index] == ("main", "5")
    # %9 (node 11) is a reduce whose region holds a maximum and its return (nodes 12, 13)
    assert ids[_op_at(module, text, "%9 = stablehlo.reduce").index] == ("main", "11")
    assert ids[_op_at(module, text, "%10 = stablehlo.broadcast_in_dim").index] == ("main", "14")
    reduce_op = _op_at(module, text, "%9 = stablehlo.reduce")
    assert ids[reduce_op.regions[0].ops[0].index] == ("main", "12")
    # @relu: its own graph, numbered from 0
    assert ids[_op_at(module, text, "%1 = stablehlo.maximum %arg0").index] == ("relu", "2")
    assert len(ids) == len(module.ops)


def test_the_node_data_of_two_programs_that_part(edited, tmp_path):
    result = compare(str(MLP), against=edited, locate=True)
    path = tmp_path / "overlay.json"
    assert result.write_model_explorer(path) == ["cpu", "cpu:against"]
    data = json.loads(path.read_text())
    assert set(data) == {"main", "relu"}
    for graph in data.values():
        assert set(graph) == {"results"}
        for node, r in graph["results"].items():
            assert node.isdigit() and set(r) == {"value", "bgColor"}
            assert isinstance(r["value"], float) and r["bgColor"].startswith("#")
    main = data["main"]["results"]
    first = result.located[0]
    assert main["5"] == {"value": first.errors.max_rel, "bgColor": FIRST}
    assert [main[str(n)]["bgColor"] for n in range(5)] == [EQUAL] * 5
    assert data["relu"]["results"]["2"]["bgColor"] == BEYOND   # the relu's maximum
    profile = result.profiles[("cpu", "cpu:against")]
    assert sum(len(g["results"]) for g in data.values()) == len(profile)


def test_the_cli_writes_it_only_with_locate(edited, tmp_path, capsys):
    path = tmp_path / "overlay.json"
    code = cli.main(["compare", str(MLP), "--against", str(edited), "--model-explorer",
                     str(path)])
    assert code == exits.USAGE and "add --locate" in capsys.readouterr().err
    assert not path.exists()
    code = cli.main(["compare", str(MLP), "--against", str(edited), "--locate",
                     "--model-explorer", str(path)])
    assert code == exits.DISAGREE
    assert f"wrote {path} (cpu vs cpu:against)" in capsys.readouterr().out
    assert json.loads(path.read_text())["main"]["results"]["5"]["bgColor"] == FIRST
