"""benchmarks/report.py: README.md's performance bullet is what benchmarks/results/latest.json
gives (no benchmark runs here), and the bullet and table are made from the results alone."""

import copy
import importlib.util
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def report():
    spec = importlib.util.spec_from_file_location("benchmarks_report",
                                                  ROOT / "benchmarks" / "report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def results(report):
    return json.loads(report.RESULTS.read_text())


def test_readme_block_is_current(report, results):
    problem = report.stale((ROOT / "README.md").read_text(), results)
    assert problem is None, problem


def test_results_say_when_and_where_they_were_taken(report, results):
    assert results["machine"]["jax"] and results["machine"]["cpus"]
    for part in report.PARTS:
        record = results[part]
        assert record["date"] and record["command"]
        assert "results" in record or record["not_run"]
        if "results" in record:
            assert "load_average_before" in record and "load_average_after" in record


def test_readme_block_figures_come_from_the_results(report, results):
    block = report.readme_block(results)
    assert len(block) <= report.README_BLOCK_LIMIT
    memory = report.memory_rows(results["memory"]["results"])
    baked = next(by for (case, _), by in memory.items() if case == "baked")
    assert f"(`jax.export`: {baked['export']['peak']:,.0f})" in block
    assert results["machine"]["jax"] in block


def test_a_changed_figure_makes_the_block_stale(report, results):
    readme = (ROOT / "README.md").read_text()
    changed = copy.deepcopy(results)
    row = next(r for r in changed["memory"]["results"] if r["variant"] == "export")
    row["peak"] += 100
    problem = report.stale(readme, changed)
    assert problem is not None and "--readme" in problem


def test_replace_block_needs_the_markers(report):
    with pytest.raises(ValueError, match="performance:begin"):
        report.replace_block("no markers here", "x")
    text = f"a\n{report.BEGIN}\nold\n{report.END}\nb"
    assert report.replace_block(text, "NEW") == "a\nNEW\nb"


def test_parts_not_run_say_why(report, results):
    partial = {"machine": results["machine"], "memory": results["memory"],
               "grads": {"date": "2026-01-01 00:00 UTC", "command": "python grads.py",
                         "not_run": "benchmarks/grads.py does not exist"}}
    assert "grads: not run (benchmarks/grads.py does not exist)" in report.table(partial)
    block = report.readme_block(partial)
    assert "gradient" not in block and "peak memory" in block
