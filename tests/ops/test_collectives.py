"""stablehlo.collective_reduce (StableHLO 1.19, jaxlib >= 0.12's dialect): each process
group's reduction, kept by the group's root alone, zeros elsewhere (the spec's examples).
XLA on CPU does not compile the op ("not supported by XLA:CPU ThunkEmitter"), so the reference
here is the spec's, in numpy. Grids of processes run in a child process with 8 host devices
(tests/multidevice.py). The other collectives of ops/collectives.py, on grids of processes
against the spec's process groups: tests/spmd/test_collectives.py."""

from __future__ import annotations

import sys
import os

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import multidevice  # noqa: E402

import shlo2jax  # noqa: E402

def _dialect_has_the_op() -> bool:
    from jaxlib.mlir.dialects import stablehlo
    return hasattr(stablehlo, "CollectiveReduceOp")


def _program(groups, body="add", channel=0, dynamic=False, t="tensor<1x2xi64>"):
    rows = ", ".join("[" + ", ".join(map(str, g)) + "]" for g in groups)
    dense = f"dense<[{rows}]> : tensor<{len(groups)}x{len(groups[0])}xi64>"
    handle = (f", channel_handle = #stablehlo.channel_handle<handle = {channel}, type = 1>"
              if channel else "")
    root = ", %root" if dynamic else ""
    root_type = ", tensor<1xi32>" if dynamic else ""
    flag = ", has_dynamic_root" if dynamic else ""
    scalar = t.split("x")[-1].rstrip(">")
    return f"""
        func.func @main(%x: {t}{", %root: tensor<1xi32>" if dynamic else ""}) -> {t} {{
          %r = "stablehlo.collective_reduce"(%x{root}) ({{
            ^bb0(%a: tensor<{scalar}>, %b: tensor<{scalar}>):
              %s = stablehlo.{body} %a, %b : tensor<{scalar}>
              stablehlo.return %s : tensor<{scalar}>
          }}) {{replica_groups = {dense}{handle}{flag}}} : ({t}{root_type}) -> {t}
          return %r : {t}
        }}"""


def _expected(xs, groups, R, P, body, channel, root=0):
    """The spec's result on each process (r, p), flat id r * P + p."""
    reduce = {"add": np.add, "maximum": np.maximum, "multiply": np.multiply}[body]
    out = [np.zeros_like(xs[0]) for _ in range(R * P)]
    for fixed in range(P if channel == 0 else R):
        for g in groups:
            ids = [m * P + fixed for m in g] if channel == 0 else [fixed * P + m for m in g]
            total = xs[ids[0]]
            for i in ids[1:]:
                total = reduce(total, xs[i])
            out[ids[root]] = total
    return out


def test_one_process_keeps_its_operand():
    if not _dialect_has_the_op():
        pytest.skip("this jaxlib's stablehlo dialect has no collective_reduce")
    x = np.array([[3, 4]], np.int64)
    program = shlo2jax.load(_program([[0]]))
    np.testing.assert_array_equal(program(x), x)


def test_the_rule_is_registered_under_its_name():
    from shlo2jax import registry
    shlo2jax.load("func.func @main() {\n  return\n}")  # the built-in rules load with one
    assert registry.lookup("stablehlo.collective_reduce") is not None


def _grid_collective_reduce():
    from shlo2jax import compat, spmd
    R, P = 4, 2
    rng = np.random.default_rng(5)
    with compat.enable_x64():
        xs = [rng.integers(0, 20, (1, 2)).astype(np.int64) for _ in range(R * P)]
        cases = [([[0, 1, 2, 3]], "add", 0), ([[2, 0], [3, 1]], "add", 0),
                 ([[1, 0]], "multiply", 1), ([[3, 1], [0, 2]], "maximum", 0),
                 ([[0], [1], [2], [3]], "add", 0)]
        for groups, body, channel in cases:
            program = shlo2jax.load(_program(groups, body, channel))
            outs = spmd.run_spmd(program["main"], [[x] for x in xs], R, P)
            want = _expected(xs, groups, R, P, body, channel)
            for k, (o, w) in enumerate(zip(outs, want)):
                np.testing.assert_array_equal(np.asarray(o[0]), w,
                                              err_msg=f"{groups} {body} process {k}")
        groups = [[0, 1, 2, 3]]
        program = shlo2jax.load(_program(groups, "add", 0, dynamic=True))
        for root in (3, 1):
            outs = spmd.run_spmd(program["main"],
                                 [[x, np.array([root], np.int32)] for x in xs], R, P)
            want = _expected(xs, groups, R, P, "add", 0, root)
            for k, (o, w) in enumerate(zip(outs, want)):
                np.testing.assert_array_equal(np.asarray(o[0]), w,
                                              err_msg=f"root {root} process {k}")


@pytest.mark.slow
def test_on_a_grid_of_processes():
    if not _dialect_has_the_op():
        pytest.skip("this jaxlib's stablehlo dialect has no collective_reduce")
    results = multidevice.run_child(__file__)
    assert results.get("_grid_collective_reduce") == "ok", results


if __name__ == "__main__" and "--child" in sys.argv:
    multidevice.report(multidevice.run_checks([("_grid_collective_reduce",
                                                 _grid_collective_reduce)]))
