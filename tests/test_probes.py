"""Probes: recording intermediate values of a run (shlo2jax.probe, interpreter.probe)."""

import ml_dtypes
import numpy as np
import pytest

import shlo2jax
from shlo2jax import probes
from shlo2jax.host_transfers import host_io
from shlo2jax.probes import ProbeKey, probe

STRAIGHT = """
func.func private @scale(%v: tensor<3xf32>) -> tensor<3xf32> {
  %c = stablehlo.constant dense<3.0> : tensor<3xf32>
  %m = stablehlo.multiply %v, %c : tensor<3xf32>
  func.return %m : tensor<3xf32>
}
func.func @main(%x: tensor<3xf32>, %y: tensor<3xf32>) -> (tensor<3xf32>, tensor<f32>) {
  %a = stablehlo.add %x, %y : tensor<3xf32>
  %e = stablehlo.exponential %a : tensor<3xf32>
  %s1 = func.call @scale(%e) : (tensor<3xf32>) -> tensor<3xf32>
  %s2 = func.call @scale(%s1) : (tensor<3xf32>) -> tensor<3xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%s2 init: %zero) applies stablehlo.add across dimensions = [0]
      : (tensor<3xf32>, tensor<f32>) -> tensor<f32>
  func.return %s2, %r : tensor<3xf32>, tensor<f32>
}"""


def _by_name(records, name):
    return [v for k, vs in sorted(records.items()) if k.name == name for v in vs]


def test_probed_values_equal_a_step_by_step_evaluation():
    program = shlo2jax.load(STRAIGHT)
    x = np.array([0.5, -1.0, 2.0], np.float32)
    y = np.array([0.25, 1.0, -3.0], np.float32)
    (out, total), records = probe(program, x, y, values="all")
    # Step by step, in numpy.
    a = x + y
    e = np.exp(a)
    s1 = e * np.float32(3)
    s2 = s1 * np.float32(3)
    np.testing.assert_array_equal(_by_name(records, "stablehlo.add")[0], a)
    np.testing.assert_allclose(_by_name(records, "stablehlo.exponential")[0], e, rtol=1e-6)
    # The callee's multiply ran twice: both executions, in order; so did each func.call.
    multiplies = _by_name(records, "stablehlo.multiply")
    assert len(multiplies) == 2
    np.testing.assert_allclose(multiplies[0], s1, rtol=1e-6)
    np.testing.assert_allclose(multiplies[1], s2, rtol=1e-6)
    calls = _by_name(records, "func.call")
    np.testing.assert_array_equal(calls[1], multiplies[1])
    np.testing.assert_allclose(_by_name(records, "stablehlo.reduce")[0], s2.sum(), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(out), calls[1])
    # The reduction body's add cannot leave its computation: reported, not silently dropped.
    assert any(k.name == "stablehlo.add" for k in records.skipped)
    for key, values in records.items():
        assert isinstance(key, ProbeKey) and key.location.startswith("-:")
        assert all(isinstance(v, np.ndarray) for v in values)
    # Probing leaves the program as it was: the normal (jitted) call agrees.
    out2, total2 = program(x, y)
    np.testing.assert_array_equal(np.asarray(out2), np.asarray(out))
    assert float(total2) == float(total)


def test_selectors():
    program = shlo2jax.load(STRAIGHT)
    x = y = np.ones(3, np.float32)
    add = next(op for op in program.module.ops if op.name == "stablehlo.add")
    for selector in ([add.index], "stablehlo.exponential", [add.location]):
        _, records = probe(program, x, y, values=selector)
        assert len(records) == 1
    _, records = probe(program, x, y, values=[add.index, "stablehlo.exponential"])
    assert {k.name for k in records} == {"stablehlo.add", "stablehlo.exponential"}
    with pytest.raises(ValueError, match="no op matches"):
        probe(program, x, y, values=["no.such_op"])


def test_loop_iterations_and_untaken_branches():
    program = shlo2jax.load("""
    func.func @main(%n: tensor<i64>, %p: tensor<i1>) -> tensor<i64> {
      %zero = stablehlo.constant dense<0> : tensor<i64>
      %one = stablehlo.constant dense<1> : tensor<i64>
      %w:3 = stablehlo.while(%i = %zero, %sum = %zero, %lim = %n) : tensor<i64>, tensor<i64>, tensor<i64>
       cond {
        %lt = stablehlo.compare LT, %i, %lim : (tensor<i64>, tensor<i64>) -> tensor<i1>
        stablehlo.return %lt : tensor<i1>
      } do {
        %j = stablehlo.add %i, %one : tensor<i64>
        %sq = stablehlo.multiply %j, %j : tensor<i64>
        %s = "interpreter.probe"(%sq) {probe_id = "square"} : (tensor<i64>) -> tensor<i64>
        %t = stablehlo.add %sum, %s : tensor<i64>
        stablehlo.return %j, %t, %lim : tensor<i64>, tensor<i64>, tensor<i64>
      }
      %r = "stablehlo.if"(%p) ({
        %neg = stablehlo.negate %w#1 : tensor<i64>
        stablehlo.return %neg : tensor<i64>
      }, {
        %not = stablehlo.not %w#1 : tensor<i64>
        stablehlo.return %not : tensor<i64>
      }) : (tensor<i1>) -> tensor<i64>
      func.return %r : tensor<i64>
    }""")
    out, records = probe(program, np.array(4, np.int64), np.array(True), values="all")
    assert int(out) == -(1 + 4 + 9 + 16)
    assert [int(v) for v in records.by_probe_id("square")] == [1, 4, 9, 16]
    assert [int(v) for v in _by_name(records, "stablehlo.multiply")] == [1, 4, 9, 16]
    assert [int(v) for v in _by_name(records, "stablehlo.negate")] == [-30]
    assert _by_name(records, "stablehlo.not") == []  # the branch did not run
    _, only = probe(program, np.array(2, np.int64), np.array(False), values="probes")
    assert [k.probe_id for k in only] == ["square"]
    assert [int(v) for v in only.by_probe_id("square")] == [1, 4]


@pytest.mark.parametrize("mlir_type,dtype,lhs,rhs", [
    ("i1", np.bool_, [0, 0, 1], [1, 1, 1]),
    ("i64", np.int64, [-127, 126, 0], [-1, 1, 1]),
    ("ui64", np.uint64, [32766, 0, 2**64 - 1], [1, 2, 1]),
    ("f64", np.float64, [3.402e38, 1.175e-38, 0.0], [1.0, -1.0, 1.0]),
    ("bf16", ml_dtypes.bfloat16, [1.0, 2.5, -3.0], [0.5, 1.5, 0.0]),
    ("complex<f32>", np.complex64, [1 + 2j, 3 + 4j, 5 + 6j], [1 + 1j, 1 + 1j, 1 + 1j]),
])
def test_interpreter_probe_element_types(mlir_type, dtype, lhs, rhs):
    program = shlo2jax.load(f"""
    func.func @main(%a: tensor<3x{mlir_type}>, %b: tensor<3x{mlir_type}>) -> tensor<3x{mlir_type}> {{
      %s = stablehlo.add %a, %b : tensor<3x{mlir_type}>
      %p = "interpreter.probe"(%s) {{probe_id = "probe/0"}} : (tensor<3x{mlir_type}>) -> tensor<3x{mlir_type}>
      func.return %p : tensor<3x{mlir_type}>
    }}""")
    a, b = np.array(lhs, dtype=dtype), np.array(rhs, dtype=dtype)
    expected = (a | b) if dtype is np.bool_ else (a + b)  # i1 add is logical or
    out, records = probe(program, a, b, values="probes")
    (value,) = records.by_probe_id("probe/0")
    assert value.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(value, expected)
    np.testing.assert_array_equal(np.asarray(out), expected)
    # Without probing, interpreter.probe is the identity.
    np.testing.assert_array_equal(np.asarray(program(a, b)), expected)


def test_probe_with_host_feed_in_a_loop():
    program = shlo2jax.load("""
    func.func @main(%n: tensor<i32>) -> tensor<f32> {
      %t = stablehlo.after_all : !stablehlo.token
      %zero = stablehlo.constant dense<0> : tensor<i32>
      %one = stablehlo.constant dense<1> : tensor<i32>
      %fzero = stablehlo.constant dense<0.0> : tensor<f32>
      %w:4 = stablehlo.while(%i = %zero, %tok = %t, %acc = %fzero, %lim = %n)
          : tensor<i32>, !stablehlo.token, tensor<f32>, tensor<i32>
       cond {
        %lt = stablehlo.compare LT, %i, %lim : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %lt : tensor<i1>
      } do {
        %x, %t1 = "stablehlo.infeed"(%tok) : (!stablehlo.token) -> (tensor<f32>, !stablehlo.token)
        %t2 = "stablehlo.outfeed"(%acc, %t1) : (tensor<f32>, !stablehlo.token) -> !stablehlo.token
        %s = stablehlo.add %acc, %x : tensor<f32>
        %j = stablehlo.add %i, %one : tensor<i32>
        stablehlo.return %j, %t2, %s, %lim : tensor<i32>, !stablehlo.token, tensor<f32>, tensor<i32>
      }
      func.return %w#2 : tensor<f32>
    }""")
    feed = [np.float32(v) for v in (1.0, 2.0, 5.0)]
    with host_io(infeed=feed) as io:
        total, records = probe(program, np.array(3, np.int32), values=["stablehlo.infeed"])
    assert float(total) == 8.0
    assert [float(v) for v in _by_name(records, "stablehlo.infeed")] == [1.0, 2.0, 5.0]
    assert [float(v) for v in io.outfeed] == [0.0, 1.0, 3.0]


def test_tuples_are_reported_as_skipped():
    program = shlo2jax.load("""
    func.func @main(%x: tensor<f32>) -> tensor<f32> {
      %t = stablehlo.tuple %x, %x : tuple<tensor<f32>, tensor<f32>>
      %y = stablehlo.get_tuple_element %t[1] : (tuple<tensor<f32>, tensor<f32>>) -> tensor<f32>
      func.return %y : tensor<f32>
    }""")
    _, records = probe(program, np.array(2.0, np.float32))
    assert {k.name for k in records.skipped} == {"stablehlo.tuple"}
    assert [float(v) for v in _by_name(records, "stablehlo.get_tuple_element")] == [2.0]


def test_probes_see_the_ops_a_run_leaves_out():
    # an op nothing reads is not staged in a plain run (translate._live), but a probe is the
    # op-by-op view of the module: it still records it
    program = shlo2jax.load("""func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %unread = stablehlo.exponential %x : tensor<3xf32>
  %n = stablehlo.negate %x : tensor<3xf32>
  func.return %n : tensor<3xf32>
}""")
    x = np.array([0.5, -1.0, 2.0], np.float32)
    out, records = probe(program, x, values="all")
    np.testing.assert_array_equal(out, -x)
    np.testing.assert_allclose(_by_name(records, "stablehlo.exponential")[0], np.exp(x),
                               rtol=1e-6)


def test_probe_compiler_options_leave_out_an_option_this_xla_lacks(monkeypatch):
    monkeypatch.setattr(probes, "_ELEMENTAL_EMITTERS", {"xla_cpu_no_such_option": False})
    probes.probe_compiler_options.cache_clear()
    try:
        assert probes.probe_compiler_options() == probes.PROBE_COMPILER_OPTIONS
    finally:
        probes.probe_compiler_options.cache_clear()  # (computed again, unpatched)


MOVED = """
func.func private @turned(%v: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %t = "stablehlo.transpose"(%v) {permutation = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  func.return %t : tensor<3x2xf32>
}
func.func @main(%x: tensor<2x3xf32>, %n: tensor<i64>) -> (tensor<2x2x2xf32>, tensor<6xf32>, tensor<2x6xf32>) {
  %b = "stablehlo.broadcast_in_dim"(%x) {broadcast_dimensions = array<i64: 2, 0>} : (tensor<2x3xf32>) -> tensor<3x4x2xf32>
  %s = "stablehlo.slice"(%b) {start_indices = array<i64: 0, 1, 0>, limit_indices = array<i64: 3, 4, 2>, strides = array<i64: 2, 2, 1>} : (tensor<3x4x2xf32>) -> tensor<2x2x2xf32>
  %e = stablehlo.exponential %x : tensor<2x3xf32>
  %t1 = func.call @turned(%e) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %t2 = func.call @turned(%x) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %r = stablehlo.reshape %t1 : (tensor<3x2xf32>) -> tensor<6xf32>
  %c = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %cb = stablehlo.broadcast_in_dim %c, dims = [0] : (tensor<2xf32>) -> tensor<2x6xf32>
  %zero = stablehlo.constant dense<0> : tensor<i64>
  %one = stablehlo.constant dense<1> : tensor<i64>
  %w:2 = stablehlo.while(%i = %zero, %acc = %r) : tensor<i64>, tensor<6xf32>
   cond {
    %lt = stablehlo.compare LT, %i, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  } do {
    %j = stablehlo.add %i, %one : tensor<i64>
    %sq = stablehlo.reshape %acc : (tensor<6xf32>) -> tensor<2x3xf32>
    %l = stablehlo.log %sq : tensor<2x3xf32>
    %f = stablehlo.reshape %l : (tensor<2x3xf32>) -> tensor<6xf32>
    stablehlo.return %j, %f : tensor<i64>, tensor<6xf32>
  }
  func.return %s, %w#1, %cb : tensor<2x2x2xf32>, tensor<6xf32>, tensor<2x6xf32>
}"""


def test_values_that_only_move_data_are_rebuilt_as_recorded(monkeypatch):
    # A reshape, transpose, broadcast or slice of a top-level value (an argument, a callee's
    # argument, a constant, another op's value, a rebuilt one) is made in numpy after the run,
    # not an output of it: the same bits as recording it; inside a loop it is recorded.
    program = shlo2jax.load(MOVED)
    x = np.array([[0.5, 1.0, 2.0], [3.0, 4.0, 5.0]], np.float32)
    made: list = []
    records = probes._Prober.records
    def spied(prober, *args):
        made.append(sorted(key.name for _, key, _ in prober.made))
        return records(prober, *args)
    monkeypatch.setattr(probes._Prober, "records", spied)
    outs, rebuilt = probe(program, x, np.array(2, np.int64), values="all")
    monkeypatch.setattr(probes, "REBUILT", {})  # (every value an output of the run)
    _, recorded = probe(program, x, np.array(2, np.int64), values="all")
    # (the broadcasts, the slice, both calls' transposes, the reshape after them, constants)
    assert made == [["stablehlo.broadcast_in_dim"] * 2 + ["stablehlo.constant"] * 3 +
                    ["stablehlo.reshape", "stablehlo.slice"] + ["stablehlo.transpose"] * 2, []]
    assert list(rebuilt) == list(recorded) and rebuilt.skipped == recorded.skipped
    for key in recorded:
        assert len(rebuilt[key]) == len(recorded[key])
        for a, b in zip(rebuilt[key], recorded[key]):
            assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), key
    np.testing.assert_array_equal(_by_name(rebuilt, "stablehlo.slice")[0],
                                  np.broadcast_to(x.T[:, None, :], (3, 4, 2))[::2, 1::2])
    assert len(_by_name(rebuilt, "stablehlo.reshape")) == 1 + 2 * 2  # (two loop iterations)
    np.testing.assert_array_equal(outs[0], _by_name(rebuilt, "stablehlo.slice")[0])
