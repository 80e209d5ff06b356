"""Collectives, replica_id / partition_id and shlo2jax.spmd.run_spmd against numpy references.

Grids of processes need several devices: those checks (`_grid_*`) run together in one
child process started with XLA_FLAGS=--xla_force_host_platform_device_count=8 (the flag
must be set before jax is imported, and the rest of the suite runs with one device); each
test below asserts its own check's outcome. Expected values come from a numpy transcription
of the spec's process groups, not from the translation.
"""

import pathlib
import sys
import textwrap

import jax
import ml_dtypes
import numpy as np
import pytest

# tests/: multidevice and _helpers, for the child process this file runs as a script
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import multidevice  # noqa: E402
import shlo2jax  # noqa: E402
from shlo2jax import compat  # noqa: E402

from _helpers import element, tensor  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)


def dense(groups):
    width = max(len(g) for g in groups)
    rows = [list(g) + [-1] * (width - len(g)) for g in groups]
    return f"dense<{rows}> : tensor<{len(rows)}x{width}xi64>"


def channel(handle, use_global=False):
    text = f", channel_handle = #stablehlo.channel_handle<handle = {handle}, type = 1>" \
        if handle else ""
    return text + (", use_global_device_ids" if use_global else "")


# ---------------------------------------------------------------- numpy reference (the spec)

def spec_groups(mode, groups, R, P):
    """The spec's process groups as lists of (replica, partition)."""
    if mode == "cross_replica":
        return [[(r, p) for r in g] for p in range(P) for g in groups]
    if mode == "cross_partition":
        return [[(r, p) for p in g] for r in range(R) for g in groups]
    if mode == "cross_replica_and_partition":
        return [[(r, p) for p in range(P) for r in g] for g in groups]
    return [[(i // P, i % P) for i in g] for g in groups]  # flattened_ids


def group_of(process, groups):
    for g in groups:
        if process in g:
            return g
    return None


def processes(R, P):
    return [(r, p) for r in range(R) for p in range(P)]


# ---------------------------------------------------------------- programs

def reduce_body(kind, t):
    scalar = f"tensor<{t}>"
    if kind == "mul_add1":  # not a monoid lax has: takes the general path
        one = "(1.0, 0.0)" if t.startswith("complex") else "1.0" if "f" in t else "1"
        ops = (f"%m = stablehlo.multiply %a, %b : {scalar}\n"
               f"      %one = stablehlo.constant dense<{one}> : {scalar}\n"
               f"      %s = stablehlo.add %m, %one : {scalar}")
    else:
        ops = f"%s = stablehlo.{kind} %a, %b : {scalar}"
    return (f"({{\n    ^bb0(%a: {scalar}, %b: {scalar}):\n      {ops}\n"
            f"      stablehlo.return %s : {scalar}\n  }})")


def all_reduce_module(shape, dtype, kind, groups, handle=0, use_global=False):
    t = tensor(shape, dtype)
    return f"""
func.func @main(%x: {t}) -> {t} {{
  %r = "stablehlo.all_reduce"(%x) {reduce_body(kind, element(dtype))} {{
    replica_groups = {dense(groups)}{channel(handle, use_global)}
  }} : ({t}) -> {t}
  return %r : {t}
}}"""


NP_REDUCE = {"add": lambda a, b: a + b, "maximum": np.maximum, "minimum": np.minimum,
             "mul_add1": lambda a, b: a * b + 1}


def expected_all_reduce(inputs, kind, sgroups, R, P):
    out = []
    for proc in processes(R, P):
        g = group_of(proc, sgroups) or [proc]
        acc = inputs[g[0][0] * P + g[0][1]]
        for q in g[1:]:
            acc = NP_REDUCE[kind](acc, inputs[q[0] * P + q[1]]).astype(acc.dtype)
        out.append(acc)
    return out


# ---------------------------------------------------------------- in-process tests

def test_replica_and_partition_id_are_zero_in_a_one_process_program():
    program = shlo2jax.load("""
        func.func @main() -> (tensor<ui32>, tensor<ui32>) {
          %r = stablehlo.replica_id : tensor<ui32>
          %p = stablehlo.partition_id : tensor<ui32>
          return %r, %p : tensor<ui32>, tensor<ui32>
        }""")
    r, p = program()
    assert np.asarray(r).dtype == np.uint32 and int(r) == 0 and int(p) == 0


def test_replica_id_of_a_multi_replica_program_needs_the_spmd_runner():
    program = shlo2jax.load("""
        module attributes {mhlo.num_replicas = 2 : i32} {
          func.func @main() -> tensor<ui32> {
            %r = stablehlo.replica_id : tensor<ui32>
            return %r : tensor<ui32>
          }
        }""")
    with pytest.raises(shlo2jax.Shlo2JaxError, match="run_spmd"):
        program()


@pytest.mark.parametrize("kind", ["add", "maximum", "mul_add1"])
def test_collectives_of_a_one_process_program_act_on_groups_of_one(kind):
    x = np.array([1.5, -2.0, 3.0], np.float32)
    (out,) = [shlo2jax.load(all_reduce_module((3,), np.float32, kind, [[0]]))(x)]
    np.testing.assert_array_equal(np.asarray(out), x)
    gather = shlo2jax.load("""
        func.func @main(%x: tensor<2x3xi32>) -> (tensor<2x3xi32>, tensor<2x3xi32>, tensor<2x3xi32>) {
          %g = "stablehlo.all_gather"(%x) {all_gather_dim = 1 : i64,
                 replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<2x3xi32>) -> tensor<2x3xi32>
          %p = "stablehlo.collective_permute"(%x) {
                 source_target_pairs = dense<[[0, 0]]> : tensor<1x2xi64>} : (tensor<2x3xi32>) -> tensor<2x3xi32>
          %e = "stablehlo.collective_permute"(%x) {
                 source_target_pairs = dense<0> : tensor<0x2xi64>} : (tensor<2x3xi32>) -> tensor<2x3xi32>
          return %g, %p, %e : tensor<2x3xi32>, tensor<2x3xi32>, tensor<2x3xi32>
        }""")
    y = np.arange(6, dtype=np.int32).reshape(2, 3)
    g, p, e = gather(y)
    np.testing.assert_array_equal(g, y)
    np.testing.assert_array_equal(p, y)
    np.testing.assert_array_equal(e, np.zeros_like(y))


def test_process_groups_follow_the_spec_modes():
    from shlo2jax.spmd.groups import process_groups
    for mode, groups in [("cross_replica", [[0, 1], [3, 2]]), ("cross_partition", [[1, 0]]),
                         ("cross_replica_and_partition", [[0, 1], [2, 3]]),
                         ("flattened_ids", [[0, 7], [1, 6, 2, 5], [3, 4]])]:
        R, P = 4, 2
        expected = [[r * P + p for r, p in g] for g in spec_groups(mode, groups, R, P)]
        assert process_groups(mode, groups, R, P) == expected, mode
    # empty groups: every id along the mode's axis
    assert process_groups("cross_replica", [], 2, 2) == [[0, 2], [1, 3]]
    assert process_groups("cross_partition", [], 2, 2) == [[0, 1], [2, 3]]


def test_the_mode_comes_from_channel_handle_and_use_global_device_ids():
    from shlo2jax.spmd.groups import group_mode

    class FakeOp:
        def __init__(self, name, handle, use_global=False):
            from shlo2jax.attributes import ChannelHandle
            self.name = name
            self.attrs = {"use_global_device_ids": use_global}
            if handle is not None:
                self.attrs["channel_handle"] = ChannelHandle(handle=handle, type=1)

    assert group_mode(FakeOp("stablehlo.all_reduce", None)) == "cross_replica"
    assert group_mode(FakeOp("stablehlo.all_reduce", 0)) == "cross_replica"
    assert group_mode(FakeOp("stablehlo.all_gather", 1)) == "cross_replica_and_partition"
    assert group_mode(FakeOp("stablehlo.reduce_scatter", 2, True)) == "flattened_ids"
    assert group_mode(FakeOp("stablehlo.all_to_all", 1)) == "cross_partition"
    assert group_mode(FakeOp("stablehlo.collective_permute", 0)) == "cross_replica"
    assert group_mode(FakeOp("stablehlo.collective_broadcast", 5)) == "cross_partition"


def test_the_plan_picks_lax_only_for_layouts_lax_expresses():
    from shlo2jax.spmd.groups import make_plan
    assert make_plan([[0, 1, 2, 3]], 4, True, True).path == "lax"
    assert make_plan([[0, 1, 2, 3]], 4, True, True).axis_index_groups is None
    plan = make_plan([[0, 2], [3, 1]], 4, True, True)
    assert plan.path == "lax" and plan.axis_index_groups == [[0, 2], [3, 1]]
    assert make_plan([[0, 1, 2], [3]], 4, True, True).path == "general"    # ragged
    assert make_plan([[0, 1]], 4, True, True).path == "general"            # partial
    assert make_plan([[0, 1], [2, 3]], 4, True, False).path == "general"   # no lax op
    assert make_plan([[0]], 1, False, True).path == "single"
    plan = make_plan([[2, 0, 1], [3]], 4, True, True)
    assert plan.table[0].tolist() == [2, 0, 1] and plan.position.tolist() == [1, 2, 0, 0]
    assert plan.sizes.tolist() == [3, 3, 3, 1]


def test_run_parallel_reports_too_few_devices_as_unsupported():
    if len(jax.devices()) >= 16:
        pytest.skip("this process has 16 devices")
    with pytest.raises(shlo2jax.UnsupportedError, match="devices"):
        program = shlo2jax.load("""
            func.func @f() -> tensor<ui32> {
              %0 = stablehlo.replica_id : tensor<ui32>
              return %0 : tensor<ui32>
            }
            func.func @main() -> tensor<ui32> {
              %r:16 = "interpreter.run_parallel"() {programs = [[@f, @f, @f, @f], [@f, @f, @f, @f],
                [@f, @f, @f, @f], [@f, @f, @f, @f]]} : () -> (tensor<ui32>, tensor<ui32>,
                tensor<ui32>, tensor<ui32>, tensor<ui32>, tensor<ui32>, tensor<ui32>, tensor<ui32>,
                tensor<ui32>, tensor<ui32>, tensor<ui32>, tensor<ui32>, tensor<ui32>, tensor<ui32>,
                tensor<ui32>, tensor<ui32>)
              return %r#0 : tensor<ui32>
            }""")
        program()


TOK = "!stablehlo.token"
_SEND_RECV_GRID = f"""
    func.func @send(%x: tensor<2xi32>, %t: {TOK}) -> {TOK} {{
      %t1 = "stablehlo.send"(%x, %t) {{
          channel_handle = #stablehlo.channel_handle<handle = 3, type = 2>, is_host_transfer = true
      }} : (tensor<2xi32>, {TOK}) -> {TOK}
      %y = stablehlo.add %x, %x : tensor<2xi32>
      %t2 = "stablehlo.send"(%y, %t1) {{
          channel_handle = #stablehlo.channel_handle<handle = 3, type = 2>, is_host_transfer = true
      }} : (tensor<2xi32>, {TOK}) -> {TOK}
      return %t2 : {TOK}
    }}
    func.func @recv(%t: {TOK}) -> (tensor<2xi32>, tensor<2xi32>) {{
      %a, %t1 = "stablehlo.recv"(%t) {{
          channel_handle = #stablehlo.channel_handle<handle = 3, type = 3>, is_host_transfer = true
      }} : ({TOK}) -> (tensor<2xi32>, {TOK})
      %b, %t2 = "stablehlo.recv"(%t1) {{
          channel_handle = #stablehlo.channel_handle<handle = 3, type = 3>, is_host_transfer = true
      }} : ({TOK}) -> (tensor<2xi32>, {TOK})
      return %a, %b : tensor<2xi32>, tensor<2xi32>
    }}
    func.func @main(%x: tensor<2xi32>) -> (tensor<2xi32>, tensor<2xi32>) {{
      %t = stablehlo.after_all : {TOK}
      %r:3 = "interpreter.run_parallel"(%t, %x, %t) {{programs = [[@recv], [@send]]}}
        : ({TOK}, tensor<2xi32>, {TOK}) -> (tensor<2xi32>, tensor<2xi32>, {TOK})
      return %r#0, %r#1 : tensor<2xi32>, tensor<2xi32>
    }}"""


def test_run_parallel_send_recv_meet_through_the_loopback_host_feed():
    # process 0 receives what process 1 sends (it runs first although it comes second)
    program = shlo2jax.load(_SEND_RECV_GRID)
    x = np.array([3, -4], np.int32)
    (a, b), io = shlo2jax.call_with_io(program, x, loopback=True)
    np.testing.assert_array_equal(a, x)
    np.testing.assert_array_equal(b, 2 * x)


def test_send_recv_grids_with_a_collective_are_unsupported():
    text = _SEND_RECV_GRID.replace("%y = stablehlo.add %x, %x : tensor<2xi32>", """%y = "stablehlo.all_reduce"(%x) ({
        ^bb0(%a: tensor<i32>, %b: tensor<i32>):
          %s = stablehlo.add %a, %b : tensor<i32>
          stablehlo.return %s : tensor<i32>
      }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2xi32>) -> tensor<2xi32>""")
    with pytest.raises(shlo2jax.UnsupportedError, match="all_reduce"):
        shlo2jax.load(text)(np.zeros(2, np.int32))


def test_independent_processes_of_different_signatures_run_one_by_one():
    # no collectives: each process runs on its own, with its ids as constants
    program = shlo2jax.load("""
        func.func @ids() -> (tensor<ui32>, tensor<ui32>) {
          %r = stablehlo.replica_id : tensor<ui32>
          %p = stablehlo.partition_id : tensor<ui32>
          return %r, %p : tensor<ui32>, tensor<ui32>
        }
        func.func @twice(%x: tensor<ui32>) -> tensor<ui32> {
          %p = stablehlo.partition_id : tensor<ui32>
          %y = stablehlo.add %x, %p : tensor<ui32>
          return %y : tensor<ui32>
        }
        func.func @main(%x: tensor<ui32>) -> (tensor<ui32>, tensor<ui32>, tensor<ui32>, tensor<ui32>,
                                             tensor<ui32>, tensor<ui32>) {
          %r:6 = "interpreter.run_parallel"(%x, %x) {programs = [[@ids, @twice], [@twice, @ids]]}
            : (tensor<ui32>, tensor<ui32>) -> (tensor<ui32>, tensor<ui32>, tensor<ui32>,
                                               tensor<ui32>, tensor<ui32>, tensor<ui32>)
          return %r#0, %r#1, %r#2, %r#3, %r#4, %r#5 : tensor<ui32>, tensor<ui32>, tensor<ui32>,
            tensor<ui32>, tensor<ui32>, tensor<ui32>
        }""")
    outs = [int(v) for v in program(np.uint32(10))]
    # (0,0): ids -> 0, 0; (0,1): 10 + 1; (1,0): 10 + 0; (1,1): ids -> 1, 1
    assert outs == [0, 0, 11, 10, 1, 1]


def test_a_process_that_sends_and_receives_is_unsupported():
    text = _SEND_RECV_GRID.replace("programs = [[@recv], [@send]]", "programs = [[@both], [@send]]")
    text = text.replace("func.func @main", f"""func.func @both(%t: {TOK}) -> (tensor<2xi32>, tensor<2xi32>) {{
      %a, %b = func.call @recv(%t) : ({TOK}) -> (tensor<2xi32>, tensor<2xi32>)
      %t1 = func.call @send(%a, %t) : (tensor<2xi32>, {TOK}) -> {TOK}
      return %a, %b : tensor<2xi32>, tensor<2xi32>
    }}
    func.func @main""")
    with pytest.raises(shlo2jax.UnsupportedError, match="both sends and receives"):
        shlo2jax.load(text)(np.zeros(2, np.int32))


GROUPS_OF_TWO = """
    func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
      %0 = "stablehlo.all_reduce"(%x) ({
        ^bb0(%a: tensor<f32>, %b: tensor<f32>):
          %s = stablehlo.add %a, %b : tensor<f32>
          stablehlo.return %s : tensor<f32>
      }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2xf32>) -> tensor<2xf32> loc("ar.mlir":3:12)
      return %0 : tensor<2xf32>
    }"""


def test_groups_naming_more_processes_than_a_plain_call_has_are_refused_at_load():
    # StableHLO's release artifacts: collectives over replica groups of 2 or 4 in programs
    # that declare no grid (1 replica x 1 partition). They run as a grid (run_spmd, the grid
    # checks below); a plain call is refused, said at load, naming the op, where it is,
    # its groups and the grid a call has, never a trace-time error about a 1x1 grid.
    program = shlo2jax.load(GROUPS_OF_TWO)  # strict: it can run, as a grid
    (name, where, what), = program.module.problems
    assert (name, where) == ("stablehlo.all_reduce", "ar.mlir:3:12")
    assert "replica_groups [[0, 1]] (groups of up to 2 processes) name replica 1" in what
    assert "1 replica(s) x 1 partition(s) on 1 device(s)" in what
    assert "run_spmd(..., num_replicas=2)" in what
    with pytest.raises(shlo2jax.UnsupportedError) as info:
        program(np.ones(2, np.float32))
    assert info.value.problems == [(name, where, what)]


def test_groups_within_the_declared_grid_are_not_refused():
    program = shlo2jax.load("module attributes {mhlo.num_replicas = 2 : i32} {"
                            + GROUPS_OF_TWO + "}")
    assert program.module.problems == []



def test_a_refusal_is_the_refused_ops_own_where_locations_say_nothing():
    # StableHLO's release artifacts carry loc(unknown) on every op: the collective that
    # needs a grid is refused, and another of the same name that fits a plain call runs.
    fits = GROUPS_OF_TWO.replace("dense<[[0, 1]]> : tensor<1x2xi64>", "dense<[[0]]> : tensor<1x1xi64>")
    text = "\n".join(f.replace('loc("ar.mlir":3:12)', "loc(unknown)").replace("@main", "@" + name)
                     for name, f in (("needs_grid", GROUPS_OF_TWO), ("fits", fits)))
    program = shlo2jax.load(text)
    (name, where, what), = program.module.problems
    assert (name, where) == ("stablehlo.all_reduce", "unknown")
    x = np.arange(2, dtype=np.float32)
    np.testing.assert_array_equal(program.functions["fits"](x), x)
    with pytest.raises(shlo2jax.UnsupportedError, match=r"replica_groups \[\[0, 1\]\]"):
        program.functions["needs_grid"](x)

PROMOTABLE = """
    func.func @main(%x: tensor<2xf32>) -> (tensor<2xf64>, tensor<1xf64>) {
      %0 = "stablehlo.all_reduce"(%x) ({
        ^bb0(%a: tensor<f64>, %b: tensor<f64>):
          %s = stablehlo.add %a, %b : tensor<f64>
          stablehlo.return %s : tensor<f64>
      }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2xf32>) -> tensor<2xf64>
      %1 = "stablehlo.reduce_scatter"(%x) ({
        ^bb0(%a: tensor<f64>, %b: tensor<f64>):
          %s = stablehlo.add %a, %b : tensor<f64>
          stablehlo.return %s : tensor<f64>
      }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, scatter_dimension = 0 : i64} : (tensor<2xf32>) -> tensor<1xf64>
      return %0, %1 : tensor<2xf64>, tensor<1xf64>
    }"""


def _grid_promotable_bodies_accumulate_in_the_wider_type():
    # StableHLO 1.x's release artifacts (op_all_reduce_with_promotable_types, ...): f32
    # operands, an f64 body; f32 sums of these would round
    from shlo2jax import spmd
    x = [np.array([2.0**24, 1], np.float32), np.array([1, 2.0**-30], np.float32)]
    outs = spmd.run_spmd(shlo2jax.load(PROMOTABLE)["main"], [[v] for v in x], num_replicas=2)
    total = x[0].astype(np.float64) + x[1].astype(np.float64)
    for k, (reduced, scattered) in enumerate(outs):
        assert np.asarray(reduced).dtype == np.float64
        np.testing.assert_array_equal(np.asarray(reduced), total)
        np.testing.assert_array_equal(np.asarray(scattered), total[k:k + 1])


def _grid_groups_beyond_a_plain_call_run_as_a_grid():
    from shlo2jax import spmd
    program = shlo2jax.load(GROUPS_OF_TWO)
    x = [np.array([1, 2], np.float32), np.array([10, 20], np.float32)]
    outs = spmd.run_spmd(program["main"], [[v] for v in x], num_replicas=2)
    _assert_outputs([[np.asarray(o[0])] for o in outs], [x[0] + x[1]] * 2)


# ---------------------------------------------------------------- grid checks (child process)

def _run(text, inputs, R, P, name="main"):
    """Runs @name as every process; returns (outputs per process, the plan paths used)."""
    from shlo2jax import spmd
    program = shlo2jax.load(textwrap.dedent(text))
    outs = spmd.run_spmd(program[name], [[x] if not isinstance(x, list) else x for x in inputs],
                         R, P)
    paths = [plan.path for op in program.module.ops
             for plan in getattr(op.params, "plans", {}).values()]
    return [[np.asarray(v) for v in o] for o in outs], paths


def _assert_outputs(outs, expected):
    assert len(outs) == len(expected)
    for k, (o, e) in enumerate(zip(outs, expected)):
        e = np.asarray(e)
        assert o[0].dtype == e.dtype and o[0].shape == e.shape, (k, o[0], e)
        np.testing.assert_array_equal(o[0], e, err_msg=f"process {k}")


def _inputs(n, shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return [rng.integers(0, 2, shape).astype(bool) for _ in range(n)]
    if dtype.kind in "iu":
        return [rng.integers(0, 20, shape).astype(dtype) for _ in range(n)]
    if dtype.kind == "c":
        return [(rng.integers(-8, 8, shape) + 1j * rng.integers(-8, 8, shape)).astype(dtype)
                for _ in range(n)]
    return [rng.integers(-16, 16, shape).astype(dtype) for _ in range(n)]  # exact sums


def _grid_all_reduce_modes():
    R, P = 2, 2
    for handle, use_global, mode, groups in [
            (0, False, "cross_replica", [[0, 1]]),
            (1, False, "cross_replica_and_partition", [[0, 1]]),
            (1, True, "flattened_ids", [[0, 3], [2, 1]])]:
        x = _inputs(4, (3,), np.int64)
        outs, paths = _run(all_reduce_module((3,), np.int64, "add", groups, handle, use_global),
                           x, R, P)
        _assert_outputs(outs, expected_all_reduce(x, "add", spec_groups(mode, groups, R, P), R, P))
        assert paths == ["lax"], (mode, paths)


def _grid_all_reduce_dtypes():
    for dtype in [np.bool_, np.int8, np.uint32, np.float32, np.float64, BF16, np.complex64]:
        for kind in ["add", "maximum", "minimum"]:
            if np.dtype(dtype).kind == "c" and kind != "add":
                continue
            if dtype == np.bool_ and kind != "add":
                continue
            x = _inputs(4, (2, 3), dtype, seed=3)
            groups = [[0, 3], [1, 2]]
            outs, paths = _run(all_reduce_module((2, 3), dtype, kind, groups), x, 4, 1)
            ref_kind = "maximum" if (dtype == np.bool_) else kind  # i1 add is or
            _assert_outputs(outs, expected_all_reduce(
                x, ref_kind, spec_groups("cross_replica", groups, 4, 1), 4, 1))
            assert paths == ["general" if dtype == np.bool_ else "lax"], (dtype, kind, paths)


def _grid_all_reduce_subgroups():
    # subgroups of equal size run as one lax collective with axis_index_groups
    for R, P, handle, use_global, mode, groups in [
            (4, 2, 0, False, "cross_replica", [[0, 2], [1, 3]]),
            (4, 2, 1, False, "cross_replica_and_partition", [[0, 2], [1, 3]]),
            (2, 4, 1, True, "flattened_ids", [[0, 1, 2, 3], [4, 5, 6, 7]]),
            (2, 4, 1, True, "flattened_ids", [[7, 0], [1, 6], [2, 5], [3, 4]])]:
        x = _inputs(R * P, (2, 3), np.float32, seed=29)
        outs, paths = _run(all_reduce_module((2, 3), np.float32, "add", groups, handle,
                                             use_global), x, R, P)
        _assert_outputs(outs, expected_all_reduce(x, "add", spec_groups(mode, groups, R, P),
                                                  R, P))
        assert paths == ["lax"], (mode, groups, paths)


def _grid_replica_id():
    text = """
        func.func @main(%x: tensor<3xui32>) -> tensor<3xui32> {
          %r = stablehlo.replica_id : tensor<ui32>
          %b = stablehlo.broadcast_in_dim %r, dims = [] : (tensor<ui32>) -> tensor<3xui32>
          %s = stablehlo.add %x, %b : tensor<3xui32>
          return %s : tensor<3xui32>
        }"""
    for R, P in [(8, 1), (2, 4), (4, 2)]:
        x = [np.arange(3, dtype=np.uint32) * k for k in range(R * P)]
        outs, _ = _run(text, x, R, P)
        _assert_outputs(outs, [x[r * P + p] + np.uint32(r) for r, p in processes(R, P)])


def _grid_user_pmap_and_shard_map_over_a_translated_function():
    # A one-process program is an ordinary JAX function: jax.pmap and jax.shard_map map it
    # over 8 devices like any other.
    program = shlo2jax.load("""
        func.func @main(%x: tensor<3xf32>) -> tensor<f32> {
          %c = stablehlo.constant dense<0.0> : tensor<f32>
          %t = stablehlo.tanh %x : tensor<3xf32>
          %s = stablehlo.reduce(%t init: %c) applies stablehlo.add across dimensions = [0]
               : (tensor<3xf32>, tensor<f32>) -> tensor<f32>
          return %s : tensor<f32>
        }""")
    x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(8, 3)
    expected = np.tanh(x.astype(np.float64)).sum(axis=1)
    np.testing.assert_allclose(np.asarray(jax.pmap(program)(x)), expected, rtol=1e-6)
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:8]), ("d",))
    spec = jax.sharding.PartitionSpec("d")
    mapped = jax.shard_map(lambda b: program(b[0])[None], mesh=mesh, in_specs=spec,
                           out_specs=spec)
    np.testing.assert_allclose(np.asarray(jax.jit(mapped)(x)), expected, rtol=1e-6)


def _grid_all_reduce_subgroups_general():
    # a body lax has no collective for, and ragged groups (-1 padded)
    for kind, groups, R in [("mul_add1", [[0, 2], [1, 3]], 4), ("add", [[0, 1, 2], [3]], 4),
                            ("maximum", [[2, 0, 1], [3]], 4), ("mul_add1", [[1, 0]], 3)]:
        x = _inputs(R, (4,), np.int32, seed=5)
        outs, paths = _run(all_reduce_module((4,), np.int32, kind, groups), x, R, 1)
        _assert_outputs(outs, expected_all_reduce(
            x, kind, spec_groups("cross_replica", groups, R, 1), R, 1))
        assert paths == ["general"], (kind, groups, paths)


def _grid_cross_replica_sum():
    # The legacy op: an all_reduce with an add body over replica groups.
    for groups, path in [([[0, 1, 2, 3]], "lax"), ([[0, 2], [1, 3]], "lax"), ([[0, 1, 2], [3]], "general")]:
        x = _inputs(4, (3,), np.int32, seed=13)
        text = f"""
        func.func @main(%x: tensor<3xi32>) -> tensor<3xi32> {{
          %r = "stablehlo.cross-replica-sum"(%x) {{replica_groups = {dense(groups)}}}
            : (tensor<3xi32>) -> tensor<3xi32>
          return %r : tensor<3xi32>
        }}"""
        outs, paths = _run(text, x, 4, 1)
        _assert_outputs(outs, expected_all_reduce(
            x, "add", spec_groups("cross_replica", groups, 4, 1), 4, 1))
        assert paths == [path], (groups, paths)


def _reduce_scatter_module(shape, out_shape, dtype, kind, groups, dim, handle=0, use_global=False):
    t, o = tensor(shape, dtype), tensor(out_shape, dtype)
    return f"""
func.func @main(%x: {t}) -> {o} {{
  %r = "stablehlo.reduce_scatter"(%x) {reduce_body(kind, element(dtype))} {{
    scatter_dimension = {dim} : i64, replica_groups = {dense(groups)}{channel(handle, use_global)}
  }} : ({t}) -> {o}
  return %r : {o}
}}"""


def _grid_reduce_scatter():
    R, P = 2, 2
    cases = [("add", 0, False, "cross_replica", [[1, 0]], "lax"),
             ("add", 1, False, "cross_replica_and_partition", [[0, 1]], "lax"),
             ("add", 1, True, "flattened_ids", [[0, 3], [1, 2]], "lax"),
             ("maximum", 0, False, "cross_replica", [[0, 1]], "general"),
             ("mul_add1", 1, True, "flattened_ids", [[3, 1], [2, 0]], "general")]
    for kind, handle, use_global, mode, groups, path in cases:
        sgroups = spec_groups(mode, groups, R, P)
        size = len(sgroups[0])
        x = _inputs(4, (2, 2 * size), np.int64, seed=7)
        dim = 1
        chunk = x[0].shape[dim] // size
        reduced = expected_all_reduce(x, kind, sgroups, R, P)
        expected = []
        for k, proc in enumerate(processes(R, P)):
            pos = group_of(proc, sgroups).index(proc)
            expected.append(reduced[k][:, pos * chunk:(pos + 1) * chunk])
        out_shape = (2, chunk)
        outs, paths = _run(_reduce_scatter_module(x[0].shape, out_shape, np.int64, kind, groups,
                                                  dim, handle, use_global), x, R, P)
        _assert_outputs(outs, expected)
        assert paths == [path], (mode, kind, paths)


def _all_gather_module(shape, out_shape, dtype, groups, dim, handle=0, use_global=False):
    t, o = tensor(shape, dtype), tensor(out_shape, dtype)
    return f"""
func.func @main(%x: {t}) -> {o} {{
  %r = "stablehlo.all_gather"(%x) {{
    all_gather_dim = {dim} : i64, replica_groups = {dense(groups)}{channel(handle, use_global)}
  }} : ({t}) -> {o}
  return %r : {o}
}}"""


def _grid_all_gather():
    R, P = 2, 2
    for handle, use_global, mode, groups, dim in [
            (0, False, "cross_replica", [[1, 0]], 0),
            (1, False, "cross_replica_and_partition", [[0, 1]], 1),
            (1, True, "flattened_ids", [[0, 3], [2, 1]], 1)]:
        sgroups = spec_groups(mode, groups, R, P)
        x = _inputs(4, (2, 3), np.float32, seed=11)
        expected = [np.concatenate([x[r * P + p] for r, p in group_of(proc, sgroups)], axis=dim)
                    for proc in processes(R, P)]
        outs, paths = _run(_all_gather_module((2, 3), expected[0].shape, np.float32, groups, dim,
                                              handle, use_global), x, R, P)
        _assert_outputs(outs, expected)
        assert paths == ["lax"], (mode, paths)


def _all_to_all_module(shape, out_shape, dtype, groups, split, concat, count, handle=0):
    t, o = tensor(shape, dtype), tensor(out_shape, dtype)
    return f"""
func.func @main(%x: {t}) -> {o} {{
  %r = "stablehlo.all_to_all"(%x) {{
    split_dimension = {split} : i64, concat_dimension = {concat} : i64, split_count = {count} : i64,
    replica_groups = {dense(groups)}{channel(handle)}
  }} : ({t}) -> {o}
  return %r : {o}
}}"""


def _expected_all_to_all(x, sgroups, split, concat, R, P):
    out = []
    for proc in processes(R, P):
        g = group_of(proc, sgroups)
        pos, n = g.index(proc), len(g)
        parts = [np.split(x[r * P + p], n, axis=split)[pos] for r, p in g]
        out.append(np.concatenate(parts, axis=concat))
    return out


def _grid_all_to_all():
    R, P = 2, 2
    for handle, mode, groups, split, concat in [(0, "cross_replica", [[1, 0]], 1, 0),
                                                (1, "cross_partition", [[0, 1]], 0, 1),
                                                (0, "cross_replica", [[0, 1]], 1, 1)]:
        sgroups = spec_groups(mode, groups, R, P)
        x = _inputs(4, (2, 4), np.int32, seed=13)
        expected = _expected_all_to_all(x, sgroups, split, concat, R, P)
        outs, paths = _run(_all_to_all_module((2, 4), expected[0].shape, np.int32, groups, split,
                                              concat, 2, handle), x, R, P)
        _assert_outputs(outs, expected)
        assert paths == ["lax"], (mode, paths)
    # groups in any order on a 4x1 grid
    groups = [[3, 1], [0, 2]]
    sgroups = spec_groups("cross_replica", groups, 4, 1)
    x = _inputs(4, (2, 4), np.int32, seed=17)
    expected = _expected_all_to_all(x, sgroups, 1, 0, 4, 1)
    outs, paths = _run(_all_to_all_module((2, 4), (4, 2), np.int32, groups, 1, 0, 2), x, 4, 1)
    _assert_outputs(outs, expected)
    assert paths == ["lax"], paths


def _grid_collective_permute():
    R, P = 2, 3
    pairs = [[0, 1], [1, 0], [2, 2]]
    for handle, mode in [(0, "cross_replica"), (1, "cross_partition")]:
        use = [pr for pr in pairs if max(pr) < (R if mode == "cross_replica" else P)]
        x = _inputs(6, (2, 2), np.float64, seed=19)
        expected = []
        for r, p in processes(R, P):
            me = r if mode == "cross_replica" else p
            src = [s for s, t in use if t == me]
            if not src:
                expected.append(np.zeros((2, 2)))
            elif mode == "cross_replica":
                expected.append(x[src[0] * P + p])
            else:
                expected.append(x[r * P + src[0]])
        rows = ", ".join(f"[{s}, {t}]" for s, t in use)
        text = f"""
            func.func @main(%x: tensor<2x2xf64>) -> tensor<2x2xf64> {{
              %r = "stablehlo.collective_permute"(%x) {{
                source_target_pairs = dense<[{rows}]> : tensor<{len(use)}x2xi64>{channel(handle)}
              }} : (tensor<2x2xf64>) -> tensor<2x2xf64>
              return %r : tensor<2x2xf64>
            }}"""
        outs, _ = _run(text, x, R, P)
        _assert_outputs(outs, expected)


def _grid_collective_broadcast():
    R, P = 2, 3
    for handle, mode, groups in [(0, "cross_replica", [[1, 0]]), (1, "cross_partition", [[2, 0]]),
                                 (1, "cross_partition", [[1]])]:
        sgroups = spec_groups(mode, groups, R, P)
        x = _inputs(6, (1, 2), np.int64, seed=23)
        expected = []
        for proc in processes(R, P):
            g = group_of(proc, sgroups)
            expected.append(x[g[0][0] * P + g[0][1]] if g else np.zeros((1, 2), np.int64))
        text = f"""
            func.func @main(%x: tensor<1x2xi64>) -> tensor<1x2xi64> {{
              %r = "stablehlo.collective_broadcast"(%x) {{
                replica_groups = {dense(groups)}{channel(handle)}
              }} : (tensor<1x2xi64>) -> tensor<1x2xi64>
              return %r : tensor<1x2xi64>
            }}"""
        outs, paths = _run(text, x, R, P)
        _assert_outputs(outs, expected)
        assert paths == ["general"], paths


def _grid_replica_and_partition_id():
    text = """
        func.func @main(%x: tensor<ui32>) -> tensor<ui32> {
          %r = stablehlo.replica_id : tensor<ui32>
          %p = stablehlo.partition_id : tensor<ui32>
          %c = stablehlo.constant dense<10> : tensor<ui32>
          %m = stablehlo.multiply %r, %c : tensor<ui32>
          %s = stablehlo.add %m, %p : tensor<ui32>
          %t = stablehlo.add %s, %x : tensor<ui32>
          return %t : tensor<ui32>
        }"""
    for R, P in [(2, 4), (4, 2), (1, 8), (8, 1)]:
        x = [np.uint32(100 * k) for k in range(R * P)]
        outs, _ = _run(text, [np.asarray(v) for v in x], R, P)
        _assert_outputs(outs, [np.uint32(100 * (r * P + p) + 10 * r + p)
                               for r, p in processes(R, P)])


def _grid_different_programs_per_process():
    from shlo2jax import spmd
    program = shlo2jax.load("""
        func.func @f(%x: tensor<2xi32>) -> tensor<2xi32> {
          %r = stablehlo.replica_id : tensor<ui32>
          %c = stablehlo.convert %r : (tensor<ui32>) -> tensor<i32>
          %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<2xi32>
          %s = stablehlo.add %x, %b : tensor<2xi32>
          return %s : tensor<2xi32>
        }
        func.func @g(%x: tensor<2xi32>) -> tensor<2xi32> {
          %s = stablehlo.multiply %x, %x : tensor<2xi32>
          return %s : tensor<2xi32>
        }""")
    f, g = program["f"], program["g"]
    x = [np.array([k, k + 1], np.int32) for k in range(4)]
    outs = spmd.run_spmd([[f, f], [g, g]], [[v] for v in x], 2, 2)
    expected = [x[0], x[1], x[2] * x[2], x[3] * x[3]]
    _assert_outputs([[np.asarray(v) for v in o] for o in outs], expected)


def _grid_run_parallel_op():
    program = shlo2jax.load("""
        func.func @ar(%x: tensor<2xi64>) -> (tensor<2xi64>, tensor<ui32>) {
          %r = "stablehlo.all_reduce"(%x) ({
            ^bb0(%a: tensor<i64>, %b: tensor<i64>):
              %s = stablehlo.add %a, %b : tensor<i64>
              stablehlo.return %s : tensor<i64>
          }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2xi64>) -> tensor<2xi64>
          %p = stablehlo.partition_id : tensor<ui32>
          return %r, %p : tensor<2xi64>, tensor<ui32>
        }
        func.func @main() -> (tensor<2xi64>, tensor<ui32>, tensor<2xi64>, tensor<ui32>,
                              tensor<2xi64>, tensor<ui32>, tensor<2xi64>, tensor<ui32>) {
          %a = stablehlo.constant dense<[1, 2]> : tensor<2xi64>
          %b = stablehlo.constant dense<[10, 20]> : tensor<2xi64>
          %c = stablehlo.constant dense<[100, 200]> : tensor<2xi64>
          %d = stablehlo.constant dense<[1000, 2000]> : tensor<2xi64>
          %r:8 = "interpreter.run_parallel"(%a, %b, %c, %d) {programs = [[@ar, @ar], [@ar, @ar]]}
            : (tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>)
            -> (tensor<2xi64>, tensor<ui32>, tensor<2xi64>, tensor<ui32>,
                tensor<2xi64>, tensor<ui32>, tensor<2xi64>, tensor<ui32>)
          return %r#0, %r#1, %r#2, %r#3, %r#4, %r#5, %r#6, %r#7 : tensor<2xi64>, tensor<ui32>,
            tensor<2xi64>, tensor<ui32>, tensor<2xi64>, tensor<ui32>, tensor<2xi64>, tensor<ui32>
        }""")
    outs = [np.asarray(v) for v in program()]
    # processes (r, p) in order (0,0), (0,1), (1,0), (1,1); cross_replica groups {a, c}, {b, d}
    np.testing.assert_array_equal(outs[0], [101, 202])
    np.testing.assert_array_equal(outs[2], [1010, 2020])
    np.testing.assert_array_equal(outs[4], [101, 202])
    np.testing.assert_array_equal(outs[6], [1010, 2020])
    assert [int(outs[k]) for k in (1, 3, 5, 7)] == [0, 1, 0, 1]


def _child_main():
    def in_x64(fn):
        def run():
            with compat.enable_x64():
                fn()
        return run
    multidevice.report(multidevice.run_checks(
        (name, in_x64(fn)) for name, fn in sorted(globals().items())
        if name.startswith("_grid_") and callable(fn)))


@pytest.fixture(scope="module")
def grid_results():
    return multidevice.run_child(__file__)


_GRID_CHECKS = sorted(name for name in dir() if name.startswith("_grid_"))


@pytest.mark.xdist_group("collectives_grid")
@pytest.mark.slow
@pytest.mark.parametrize("check", _GRID_CHECKS)
def test_on_a_grid_of_processes(grid_results, check):
    assert grid_results.get(check) == "ok", grid_results.get(check)


if __name__ == "__main__" and "--child" in sys.argv:
    _child_main()
