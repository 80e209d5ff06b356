"""StableHLO's own release artifacts: one VHLO portable artifact written by every release
since 0.9.0, covering every op that release had (`stablehlo_legalize_to_vhlo.<v>.mlir.bc`,
copied from openxla/stablehlo: see SOURCE.md beside this file).

Each loads (or, newer than the installed jaxlib reads, is refused with a LoadError naming
both StableHLO versions); `strict=True` refuses each only with its constructs named, and
`shlo2jax info` shows them; no plain Python exception escapes a load or a call. In the slow
tests, every function is run on seeded inputs and compared with jaxlib's StableHLO reference
interpreter, with a per-release table printed (COLUMNS: functions / refused at load / loaded
with strict=True / of those, run only as a grid of processes / run here / run by the
interpreter / agree / differ where the spec says the interpreter is wrong or the seeded inputs
break an op's constraints: INTERPRETER_DIFFERS), and the functions a plain call refuses for
their collectives run with shlo2jax.spmd.run_spmd on 8 host devices.
docs/guides/stablehlo_releases.md shows the table."""

from __future__ import annotations

import collections
import contextlib
import io
import pathlib
import re
import sys
import warnings

import jax
import jaxlib
import numpy as np
import pytest
from jaxlib.mlir.dialects import stablehlo

import shlo2jax
from shlo2jax import compat, errors
from shlo2jax.errors import LoadError, Shlo2JaxError, UnsupportedError
from shlo2jax.tools import commands
from shlo2jax.tools import compare as C
from shlo2jax.tools import reference

HERE = pathlib.Path(__file__).parent


def _version(path: pathlib.Path) -> tuple:
    return tuple(int(x) for x in re.search(r"\.(\d+_\d+_\d+)\.mlir", path.name)[1].split("_"))


ARTIFACTS = sorted(HERE.glob("stablehlo_legalize_to_vhlo.*.mlir.bc"), key=_version)
READABLE = tuple(int(x) for x in stablehlo.get_current_version().split("."))


def _name(path) -> str:
    return ".".join(map(str, _version(path)))


def test_every_release_is_here():
    versions = [_version(p) for p in ARTIFACTS]
    assert versions[0] == (0, 9, 0) and len(versions) >= 31
    assert (1, 16, 0) in versions and (1, 18, 0) in versions


@pytest.mark.parametrize("path", ARTIFACTS, ids=_name)
def test_release_artifact_loads_or_is_refused_by_name(path):
    data = path.read_bytes()
    if _version(path) > READABLE:
        # written by a StableHLO newer than the installed jaxlib reads
        with pytest.raises(LoadError) as info:
            shlo2jax.load(data, strict=False)
        oldest, newest = (".".join(map(str, v)) for v in compat.stablehlo_versions())
        # one clear error, not "truncated or corrupt"
        assert str(info.value).startswith(
            f"a VHLO artifact written by StableHLO v{_name(path)}, newer than jaxlib "
            f"{jaxlib.__version__} reads (StableHLO v{oldest} to v{newest}), using what "
            f"v{newest} lacks (operation vhlo.")
        # the first thing no downgrade brings to this jaxlib (shlo2jax.sources.vhlo_downgrade)
        lacks = str(info.value).split(" lacks (", 1)[1]
        key = _name(path) if READABLE >= (1, 15, 0) or _name(path) == "1.14.0" \
            else "before 1.15"
        expected = NEWER_FIRST_REFUSED_BY_RELEASE.get(key)
        assert expected and lacks.startswith(expected), (lacks, expected)
        return
    program = shlo2jax.load(data, strict=False)
    assert len(program.functions) > 150
    # strict: refused only with the constructs named, each with where it is
    with pytest.raises(UnsupportedError) as info:
        shlo2jax.load(data)
    assert info.value.problems and all(name and where and what
                                       for name, where, what in info.value.problems)
    # what strict=False reports besides: the collectives whose groups name more processes
    # than a plain call has, which run as a grid (spmd.run_spmd), so strict loads them
    grid = [p for p in program.module.problems if "but a plain call runs" in p[2]]
    assert {p[0] for p in grid} <= {"stablehlo.all_reduce", "stablehlo.all_gather",
                                   "stablehlo.reduce_scatter", "stablehlo.all_to_all",
                                   "stablehlo.collective_permute",
                                   "stablehlo.collective_broadcast", "stablehlo.collective_reduce",
                                   "stablehlo.cross-replica-sum"}
    assert len(grid) >= 11 and all("shlo2jax.spmd.run_spmd(..., num_" in p[2] for p in grid)
    assert {p[:1] + p[2:] for p in info.value.problems} == \
        {p[:1] + p[2:] for p in program.module.problems if p not in grid}
    # `shlo2jax info` shows all of them
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert commands.main(["info", str(path)]) == 0
    shown = out.getvalue()
    assert f"not yet supported ({len(program.module.problems) - len(grid)}):" in shown
    assert f"needs a process grid ({len(grid)}): run with shlo2jax.spmd.run_spmd(" in shown
    assert all(f"  {name} at {where}: {what}" in shown
               for name, where, what in program.module.problems)


# What refuses each newer release's artifact as a whole: the first op (by name) whose
# newer form has no older one on this jaxlib; on one older than 1.15 (jax 0.7.2: 1.13),
# the async ops of 1.15.
NEWER_FIRST_REFUSED_BY_RELEASE = {
    "1.18.0": "operation vhlo.custom_call_v2 with result_tilings (StableHLO 1.18.0)",
    "1.19.0": "operation vhlo.collective_reduce_v1 (the op collective_reduce, StableHLO 1.19.0)",
    "1.20.0": "operation vhlo.collective_broadcast_v2 (variadic operands and has_dynamic_root",
    "1.14.0": "operation vhlo.composite_v2 with composite_regions (StableHLO 1.14.0)",
    "before 1.15": "operation vhlo.async_done_v1 (the op async_done, StableHLO 1.15.0)",
}

# The newer releases' artifacts less the functions that use what has no older form (and
# their callers), written again for that release by jax 0.12 (downgrade/, made by
# make_downgrade_inputs.py): their custom_call_v2 (and, before 1.14, composite_v2) are
# brought down to the installed jaxlib's version by shlo2jax.sources.vhlo_downgrade.
SUBSETS = sorted((HERE / "downgrade").glob("release_subset.*.mlir.bc"), key=_version)


def test_newer_release_subsets_are_here():
    assert [_name(p) for p in SUBSETS] == ["1.18.0", "1.19.0", "1.20.0"]


@pytest.mark.parametrize("path", SUBSETS, ids=_name)
def test_newer_release_subset_loads(path):
    program = shlo2jax.load(path.read_bytes(), strict=False)
    assert len(program.functions) > 200
    text = str(program.mlir_module)
    # the ops the downgrade renamed are there, as StableHLO
    assert text.count("stablehlo.custom_call") >= 10 and "stablehlo.composite" in text
    # the same functions as the release the installed jaxlib reads itself, where their
    # StableHLO is the same text (most functions repeat between releases)
    own = max((p for p in ARTIFACTS if _version(p) <= READABLE), key=_version)
    theirs = _function_modules(shlo2jax.load(own.read_bytes(), strict=False))
    mine = _function_modules(program)
    same = [n for n in mine if n in theirs and mine[n] == theirs[n]]
    assert len(same) > 150, len(same)
    assert any("custom_call" in n for n in same)


@pytest.mark.parametrize("path", SUBSETS, ids=_name)
def test_newer_release_subset_against_the_reference_interpreter(path):
    """The subset's functions that hold a renamed op (custom_call, composite) or whose
    StableHLO differs from the release the installed jaxlib reads itself (none so far: the
    others are that release's functions, which the slow test compares), run on seeded
    inputs and compared with jaxlib's StableHLO reference interpreter (all of them: the
    slow test below)."""
    program = shlo2jax.load(path.read_bytes(), strict=False)
    own = max((p for p in ARTIFACTS if _version(p) <= READABLE), key=_version)
    theirs = _function_modules(shlo2jax.load(own.read_bytes(), strict=False))
    chosen = {name: text for name, text in _function_modules(program).items()
              if theirs.get(name) != text or "custom_call" in text or "composite" in text}
    counts = _compare_all(chosen)
    assert len(chosen) >= 10 and counts["agree"] >= 3, counts


@pytest.mark.slow
@pytest.mark.long  # (minutes: each runs the reference interpreter on a release's every function)
@pytest.mark.parametrize("path", SUBSETS, ids=_name)
def test_newer_release_subset_all_against_the_reference_interpreter(path):
    counts = _compare_all(_function_modules(shlo2jax.load(path.read_bytes(), strict=False)))
    assert counts["agree"] > 100, counts


def _compare_all(modules: dict) -> collections.Counter:
    """Each function's module compared as `_compare_one` does: no plain exception, no
    disagreement the spec does not explain (INTERPRETER_DIFFERS)."""
    server = reference.InterpreterServer()
    counts, disagree, plain = collections.Counter(), [], []
    try:
        for name, text in modules.items():
            outcome, detail = _compare_one(text, name, server)
            counts.update(outcome)
            if "plain" in outcome:
                plain.append((name, detail))
            if "disagree" in outcome and name not in INTERPRETER_DIFFERS:
                disagree.append((name, detail))
    finally:
        server.close()
    print(dict(counts))
    assert not plain, plain
    assert not disagree, disagree
    return counts


def test_replica_groups_named_by_mesh_axes_are_refused_by_name():
    # 1.16.0 added `#stablehlo.replica_group_mesh_axes`; a plain ValueError escaped the load
    if READABLE < (1, 16, 0):
        pytest.skip("this jaxlib reads StableHLO before 1.16: the artifact is refused whole "
                    "(test_release_artifact_loads_or_is_refused_by_name)")
    data = (HERE / "stablehlo_legalize_to_vhlo.1_16_0.mlir.bc").read_bytes()
    program = shlo2jax.load(data, strict=False)
    refused = [p for p in program.module.problems if "replica_group_mesh_axes" in p[2]]
    assert [p[0] for p in refused] == ["stablehlo.all_reduce"]
    with pytest.raises(UnsupportedError, match="replica_groups given as "
                       "#stablehlo.replica_group_mesh_axes"):
        program["attr_replica_group_mesh_axes"](np.float32(1))


def _function_modules(program) -> dict:
    """Each public function as a module of its own with the functions it calls (the
    interpreter runs @main of a module it can parse whole: one function's module holds only
    the types that function uses)."""
    module = program.mlir_module
    with module.context:
        funcs = {}
        for view in module.body.operations:
            op = view.operation
            if op.name == "func.func":
                funcs[op.attributes["sym_name"].value] = op.get_asm(
                    large_elements_limit=None, enable_debug_info=False)
    out = {}
    for name in program.functions:
        needed, pending = [], [name]
        while pending:
            callee = pending.pop()
            if callee in needed:
                continue
            needed.append(callee)
            pending += [c for c in re.findall(r"@([\w.$-]+)", funcs[callee])
                        if c in funcs and c not in needed]
        out[name] = "module {\n" + "\n".join(funcs[n] for n in needed) + "\n}\n"
    return out


# Where the interpreter and the translation differ and the spec says why.
INTERPRETER_DIFFERS = {
    # the interpreter adds init_value once more per source value scattered to an element;
    # the spec's reduce of the scattered values takes it once (see the test below)
    "default_select_and_scatter": "interpreter: init_value per scattered value",
    "op_select_and_scatter": "interpreter: init_value per scattered value",
    # slice_sizes is an argument: seeded values break the spec's constraint that they give
    # the result type's shape (the translation takes the sizes from the result type)
    "default_dynamic_gather": "seeded slice_sizes outside the op's domain",
    "op_dynamic_gather": "seeded slice_sizes outside the op's domain",
    "op_dynamic_gather_with_batching_dims": "seeded slice_sizes outside the op's domain",
}
# 1863-term float32 sums: the two accumulate in different orders
TOLERANCES = {name: {"rtol": 1e-4, "atol": 1e-3}
              for name in ("default_convolution", "default_dynamic_conv")}


def test_select_and_scatter_takes_init_value_once():
    # the spec: result[i] = reduce(source values whose window selected i, init_value)
    text = """
func.func @main(%x: tensor<1x4x3x1xf32>, %s: tensor<1x3x2x1xf32>, %init: tensor<f32>)
    -> tensor<1x4x3x1xf32> {
  %0 = "stablehlo.select_and_scatter"(%x, %s, %init) <{window_dimensions = array<i64: 1, 2, 2, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.compare GE, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }) : (tensor<1x4x3x1xf32>, tensor<1x3x2x1xf32>, tensor<f32>) -> tensor<1x4x3x1xf32>
  return %0 : tensor<1x4x3x1xf32>
}"""
    x = np.float32([[5, 1, 2], [3, 9, 4], [-1, 6, 7], [0, 8, -2]]).reshape(1, 4, 3, 1)
    s = np.arange(10, 70, 10, dtype=np.float32).reshape(1, 3, 2, 1)
    want = np.full((4, 3), 0.5, np.float32)
    want[1, 1] += 10 + 20 + 30 + 40  # the four windows holding the 9 select it
    want[3, 1] += 50 + 60            # the two holding the 8
    got = shlo2jax.load(text)(x, s, np.float32(0.5))
    np.testing.assert_array_equal(np.asarray(got)[0, :, :, 0], want)


@pytest.mark.slow
@pytest.mark.long  # (minutes: each runs the reference interpreter on a release's every function)
def test_release_artifacts_against_the_reference_interpreter():
    """Per release: functions, those that load, those that run here on seeded inputs, those
    the interpreter runs too, and those that agree. Functions repeat between releases: each
    distinct one is compared once."""
    server = reference.InterpreterServer()
    seen, rows, disagree, plain = {}, [], [], []
    try:
        for path in ARTIFACTS:
            if _version(path) > READABLE:
                rows.append((_name(path), "newer than jaxlib reads"))
                continue
            program = shlo2jax.load(path.read_bytes(), strict=False)
            counts = collections.Counter(functions=len(program.functions))
            for name, text in _function_modules(program).items():
                if text not in seen:
                    seen[text] = _compare_one(text, name, server)
                outcome, detail = seen[text]
                counts.update(outcome)
                if "plain" in outcome:
                    plain.append((_name(path), name, detail))
                if "disagree" in outcome and name not in INTERPRETER_DIFFERS:
                    disagree.append((_name(path), name, detail))
            rows.append((_name(path), counts))
    finally:
        server.close()
    print("\n" + "  ".join(h for h, _ in COLUMNS))
    for version, counts in rows:
        if isinstance(counts, str):
            print(f"{version:{len(COLUMNS[0][0])}}  {counts}")
            continue
        print("  ".join(f"{version if key == 'release' else counts[key]:>{len(h)}}"
                        for h, key in COLUMNS))
    for row in disagree:
        print("disagree:", *row)
    assert not plain, plain  # no plain Python exception from a load or a call
    assert not disagree, disagree
    if jaxlib.__version__ == DOCUMENTED_JAXLIB:  # the docs show these figures
        documented = _documented_table()
        measured = {version: [counts[key] for _, key in COLUMNS[1:]]
                    for version, counts in rows if not isinstance(counts, str)}
        assert documented == measured, ("docs/guides/stablehlo_releases.md's table is stale",
                                         documented, measured)


DOCS = HERE.parents[1] / "docs" / "guides" / "stablehlo_releases.md"
DOCUMENTED_JAXLIB = "0.10.2"  # the jaxlib the docs' table was measured with


def _documented_table() -> dict:
    """The docs' table, release -> its figures; a row names releases as "a-b" (the range of
    the artifacts here) or "a, b"."""
    names = [_name(p) for p in ARTIFACTS if _version(p) <= READABLE]
    key = lambda name: tuple(int(x) for x in name.split("."))  # noqa: E731
    table = {}
    for line in DOCS.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != len(COLUMNS) or not cells[1].isdigit():
            continue
        for item in cells[0].split(", "):
            low, _, high = item.partition("-")
            table.update({n: [int(c) for c in cells[1:]] for n in names
                          if key(low) <= key(n) <= key(high or low)})
    return table


# The table's columns: per release, its public functions; those refused at load (a function
# module of its own, loaded with strict=True: UnsupportedError); those that load with
# strict=True; of these, those whose collectives name more processes than a plain call has
# (they run as a grid, shlo2jax.spmd.run_spmd: here not called); those run here on seeded
# inputs; those the interpreter runs too; those that agree; those that differ where the spec
# says why (INTERPRETER_DIFFERS).
COLUMNS = (("release", "release"), ("functions", "functions"), ("refused", "refused"),
           ("loaded", "loaded"), ("grid-only", "grid"), ("run", "run"),
           ("interpreter", "interpreter"), ("agree", "agree"), ("spec-explained", "disagree"))


def _compare_one(text, name, server):
    """(outcome tags, detail) of one function's module: refused, or loaded (strict=True) and
    then grid, or run / interpreter / agree."""
    try:
        program = shlo2jax.load(text)
    except UnsupportedError as e:
        return ("refused",), "; ".join(p[2] for p in e.problems)
    except Shlo2JaxError as e:
        return ("refused",), str(e)
    except Exception as e:  # a plain exception escaping a load is a bug
        return ("plain",), f"load: {type(e).__name__}: {e}"
    if program.module.problems:  # what strict loads yet a plain call refuses: a grid runs it
        return ("loaded", "grid"), "; ".join(p[2] for p in program.module.problems)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = C.compare(program, backends=(
                "cpu", C.InterpreterBackend(timeout=60, server=server)), function=name,
                **TOLERANCES.get(name, {}))
        except (Shlo2JaxError, TypeError) as e:
            # no seeded value for tokens, tuples, `?` dimensions; refused when specialised
            return ("loaded",), f"inputs: {e}"
    runs = result.runs
    tags = ["loaded"]
    if runs["cpu"].status == "ok":
        tags.append("run")
    elif not runs["cpu"].reason.startswith(tuple(c.__name__ for c in _LIBRARY_ERRORS)):
        return tuple(tags) + ("plain",), runs["cpu"].reason
    if runs["interpreter"].status == "ok":
        tags.append("interpreter")
    if "run" in tags and "interpreter" in tags:
        tags.append("agree" if result.ok else "disagree")
    return tuple(tags), runs["cpu"].reason or ""


_LIBRARY_ERRORS = tuple(c for c in vars(errors).values()
                        if isinstance(c, type) and issubclass(c, Shlo2JaxError))


# ---------------------------------------------------------------- grid-only functions

def _grid_of(what: str) -> tuple:
    """(num_replicas, num_partitions) the refusal of a plain call names."""
    found = dict(re.findall(r"(num_replicas|num_partitions)=(\d+)", what))
    flat = re.search(r"num_replicas \* num_partitions >= (\d+)", what)
    if flat:
        return int(flat[1]), 1
    return int(found.get("num_replicas", 1)), int(found.get("num_partitions", 1))


def _run_grid_only_functions() -> dict:
    """In a child with 8 host devices: each function of 1.16.0 whose collectives a plain
    call refuses, run with shlo2jax.spmd.run_spmd on the grid its refusal names, seeded
    inputs per process: function -> "ok" or why not."""
    from shlo2jax.spmd import run_spmd
    from shlo2jax.tools.inputs import seeded_inputs
    data = (HERE / "stablehlo_legalize_to_vhlo.1_16_0.mlir.bc").read_bytes()
    program = shlo2jax.load(data, strict=False)
    results = {}
    for name, text in _function_modules(program).items():
        try:
            one = shlo2jax.load(text)
        except UnsupportedError:
            continue
        if not one.module.problems:
            continue
        R, P = _grid_of(one.module.problems[0][2])
        fn = one[name]
        try:
            args = [seeded_inputs(fn, seed=k) for k in range(R * P)]
            outs = run_spmd(fn, args, num_replicas=R, num_partitions=P)
            shapes = [[np.shape(o) for o in per] for per in outs]
            want = [tuple(t.shape) for t in fn.output_types]
            results[name] = "ok" if all(s == want for s in shapes) else f"shapes {shapes}"
        except Exception as e:  # noqa: BLE001 - reported per function
            results[name] = f"{type(e).__name__}: {e}"[:500]
    return results


# Functions whose declared result contradicts the spec: all_gather over groups of one
# process ([[0], [1]]) gathers nothing (the result is the operand's shape times the group
# size, 1), yet they declare twice the operand's gathered dimension.
GRID_OUTSIDE_THE_SPEC = {
    name: "declared tensor<16x16xf32>"
    for name in ("default_all_gather", "op_all_gather", "default_all_gather_variadic")}


@pytest.mark.slow
def test_grid_only_functions_run_as_a_grid():
    import multidevice  # (tests/, on the path under pytest)
    results = multidevice.run_child(__file__)
    assert len(results) >= 17, results
    wrong = {name: why for name, why in results.items() if why != "ok" and not (
        name in GRID_OUTSIDE_THE_SPEC and why.startswith("TranslationError")
        and GRID_OUTSIDE_THE_SPEC[name] in why)}
    assert not wrong, wrong


if __name__ == "__main__" and "--child" in sys.argv:
    import jax
    sys.path.insert(0, str(HERE.parent))  # tests/: multidevice
    import multidevice
    with compat.enable_x64():
        multidevice.report(_run_grid_only_functions())
