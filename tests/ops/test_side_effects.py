"""Tokens and side effects: after_all/create_token, infeed, outfeed, host send/recv."""

import jax
import ml_dtypes
import numpy as np
import pytest

import shlo2jax
from shlo2jax import TOKEN
from shlo2jax.errors import HostIOError
from shlo2jax.host_transfers import call_with_io, host_io
from shlo2jax import compat

TOK = "!stablehlo.token"


def test_tokens_as_values_through_calls_and_control_flow():
    program = shlo2jax.load(f"""
    func.func private @pass(%t: {TOK}, %x: tensor<i32>) -> ({TOK}, tensor<i32>) {{
      %a = stablehlo.after_all %t : {TOK}
      func.return %a, %x : {TOK}, tensor<i32>
    }}
    func.func @main(%t0: {TOK}, %x: tensor<i32>, %p: tensor<i1>) -> ({TOK}, tensor<i32>) {{
      %c = stablehlo.create_token : {TOK}
      %t1 = stablehlo.after_all %t0, %c : {TOK}
      %t2, %y = func.call @pass(%t1, %x) : ({TOK}, tensor<i32>) -> ({TOK}, tensor<i32>)
      %one = stablehlo.constant dense<1> : tensor<i32>
      %lim = stablehlo.constant dense<5> : tensor<i32>
      %w:2 = stablehlo.while(%it = %t2, %i = %y) : {TOK}, tensor<i32>
       cond {{
        %lt = stablehlo.compare LT, %i, %lim : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %lt : tensor<i1>
      }} do {{
        %n = stablehlo.add %i, %one : tensor<i32>
        %nt = stablehlo.after_all %it : {TOK}
        stablehlo.return %nt, %n : {TOK}, tensor<i32>
      }}
      %r:2 = "stablehlo.if"(%p) ({{
        stablehlo.return %w#0, %w#1 : {TOK}, tensor<i32>
      }}, {{
        %z = stablehlo.negate %w#1 : tensor<i32>
        stablehlo.return %t0, %z : {TOK}, tensor<i32>
      }}) : (tensor<i1>) -> ({TOK}, tensor<i32>)
      %b = stablehlo.optimization_barrier %r#0 : {TOK}
      func.return %b, %r#1 : {TOK}, tensor<i32>
    }}""")
    for pred, expected in ((True, 5), (False, -5)):
        token, value = program(TOKEN, np.array(2, np.int32), np.array(pred))
        assert token is TOKEN and int(value) == expected
    with pytest.raises(TypeError, match="token"):
        program(np.zeros((), np.float32), np.array(2, np.int32), np.array(True))


def test_empty_after_all():
    program = shlo2jax.load(f"""
    func.func @main() -> {TOK} {{
      %0 = stablehlo.after_all : {TOK}
      %1 = stablehlo.after_all : {TOK}
      %2 = stablehlo.after_all %0, %1 : {TOK}
      func.return %2 : {TOK}
    }}""")
    assert program() is TOKEN


# A loop that reads one value per iteration, writes twice that value, and finally writes the
# count: the host must see infeed/outfeed strictly interleaved.
LOOP = f"""
func.func @main(%n: tensor<i32>) -> tensor<f32> {{
  %t = stablehlo.after_all : {TOK}
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %fzero = stablehlo.constant dense<0.0> : tensor<f32>
  %w:4 = stablehlo.while(%i = %zero, %tok = %t, %acc = %fzero, %lim = %n)
      : tensor<i32>, {TOK}, tensor<f32>, tensor<i32>
   cond {{
    %lt = stablehlo.compare LT, %i, %lim : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }} do {{
    %x, %t1 = "stablehlo.infeed"(%tok) {{infeed_config = ""}} : ({TOK}) -> (tensor<f32>, {TOK})
    %two = stablehlo.add %x, %x : tensor<f32>
    %t2 = "stablehlo.outfeed"(%two, %t1) {{outfeed_config = ""}} : (tensor<f32>, {TOK}) -> {TOK}
    %s = stablehlo.add %acc, %x : tensor<f32>
    %j = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %j, %t2, %s, %lim : tensor<i32>, {TOK}, tensor<f32>, tensor<i32>
  }}
  %end = "stablehlo.outfeed"(%w#0, %w#1) {{outfeed_config = "count"}} : (tensor<i32>, {TOK}) -> {TOK}
  func.return %w#2 : tensor<f32>
}}"""


def test_interleaved_infeed_outfeed_in_a_loop_keep_program_order():
    program = shlo2jax.load(LOOP)
    feed = [np.float32(v) for v in (1.5, -2.0, 4.0)]
    with host_io(infeed=feed) as io:
        total = program(np.array(3, np.int32))
    assert float(total) == 3.5
    assert [kind for kind, _, _ in io.events] == ["infeed", "outfeed"] * 3 + ["outfeed"]
    assert [float(v) for _, _, v in io.events[:6]] == [1.5, 3.0, -2.0, -4.0, 4.0, 8.0]
    assert [np.asarray(v).tolist() for v in io.outfeed] == [3.0, -4.0, 8.0, 3]
    assert not io.infeed

    # Under the user's own jax.jit too, and again with a fresh feed (the jit cache is reused).
    jitted = jax.jit(lambda n: program(n))
    for feed in ([np.float32(1)], [np.float32(2), np.float32(5)]):
        with compat.enable_x64(), host_io(infeed=list(feed)) as io:
            total = jitted(np.array(len(feed), np.int32))
        assert float(total) == sum(feed)
        assert [float(v) for v in io.outfeed[:-1]] == [2 * float(v) for v in feed]


def test_exhausted_infeed_is_a_clear_error():
    program = shlo2jax.load(LOOP)
    with pytest.raises(HostIOError, match=r"infeed exhausted.*tensor<f32>.*2 item\(s\) consumed"):
        with host_io(infeed=[np.float32(1), np.float32(2)]):
            program(np.array(3, np.int32))
    # The program still runs afterwards.
    outputs, io = call_with_io(program, np.array(1, np.int32), infeed=[np.float32(7)])
    assert float(outputs) == 7.0 and len(io.outfeed) == 2


def test_host_transfer_outside_a_context_is_an_error():
    program = shlo2jax.load(LOOP)
    with pytest.raises(Exception, match="outside `shlo2jax.host_io\\("):
        program(np.array(1, np.int32))
        jax.effects_barrier()


@pytest.mark.parametrize("mlir_type,dtype", [
    ("f32", np.float32), ("i8", np.int8), ("ui64", np.uint64), ("i1", np.bool_),
    ("bf16", ml_dtypes.bfloat16), ("complex<f64>", np.complex128), ("i4", ml_dtypes.int4),
])
def test_infeed_several_results_with_layout(mlir_type, dtype):
    program = shlo2jax.load(f"""
    func.func @main(%t: {TOK}) -> (tensor<2x3x{mlir_type}>, tensor<i32>, {TOK}) {{
      %a, %b, %t1 = "stablehlo.infeed"(%t) {{infeed_config = "cfg", layout = [[0, 1], []]}}
          : ({TOK}) -> (tensor<2x3x{mlir_type}>, tensor<i32>, {TOK})
      func.return %a, %b, %t1 : tensor<2x3x{mlir_type}>, tensor<i32>, {TOK}
    }}""")
    a = np.arange(6).reshape(2, 3).astype(dtype)
    b = np.array(-7, np.int32)
    with host_io(infeed=[(a, b)]) as io:
        got_a, got_b, token = program(TOKEN)
    assert token is TOKEN
    np.testing.assert_array_equal(np.asarray(got_a), a)
    assert np.asarray(got_a).dtype == a.dtype and int(got_b) == -7
    assert not io.infeed


def test_infeed_token_only_and_wrong_values():
    program = shlo2jax.load(f"""
    func.func @main(%t: {TOK}) -> ({TOK}, tensor<2xf32>) {{
      %t1 = "stablehlo.infeed"(%t) {{infeed_config = ""}} : ({TOK}) -> {TOK}
      %x, %t2 = "stablehlo.infeed"(%t1) : ({TOK}) -> (tensor<2xf32>, {TOK})
      func.return %t2, %x : {TOK}, tensor<2xf32>
    }}""")
    value = np.array([1, 2], np.float32)
    (token, x), io = call_with_io(program, TOKEN, infeed=[value])
    assert token is TOKEN and np.asarray(x).tolist() == [1, 2] and not io.infeed  # only %x reads
    with pytest.raises(HostIOError, match=r"float64\[2\].*tensor<2xf32>.*never converted"):
        call_with_io(program, TOKEN, infeed=[np.array([1.0, 2.0])])
    with pytest.raises(HostIOError, match="takes 1 values"):
        call_with_io(program, TOKEN, infeed=[(value, value)])


def test_outfeed_several_and_no_operands():
    program = shlo2jax.load(f"""
    func.func @main(%x: tensor<2xi64>, %y: tensor<f16>, %t: {TOK}) -> {TOK} {{
      %t1 = "stablehlo.outfeed"(%x, %y, %t) {{outfeed_config = "a"}}
          : (tensor<2xi64>, tensor<f16>, {TOK}) -> {TOK}
      %t2 = "stablehlo.outfeed"(%t1) : ({TOK}) -> {TOK}
      %t3 = "stablehlo.outfeed"(%y, %t2) : (tensor<f16>, {TOK}) -> {TOK}
      func.return %t3 : {TOK}
    }}""")
    x, y = np.array([3, -4], np.int64), np.array(0.5, np.float16)
    token, io = call_with_io(program, x, y, TOKEN)
    assert token is TOKEN and len(io.outfeed) == 3
    first, empty, last = io.outfeed
    assert np.asarray(first[0]).tolist() == [3, -4] and first[1] == y and first[1].dtype == y.dtype
    assert empty == () and last == y


SEND_RECV = f"""
func.func @main(%x: tensor<2x2xi64>, %t: {TOK}) -> (tensor<2x2xi64>, tensor<i32>, {TOK}) {{
  %t1 = "stablehlo.send"(%x, %t) {{
      channel_handle = #stablehlo.channel_handle<handle = 1, type = 2>, is_host_transfer = true
  }} : (tensor<2x2xi64>, {TOK}) -> {TOK}
  %c = stablehlo.constant dense<[[5, 6], [7, 8]]> : tensor<2x2xi64>
  %t2 = "stablehlo.send"(%c, %t1) {{
      channel_handle = #stablehlo.channel_handle<handle = 2, type = 2>, is_host_transfer = true
  }} : (tensor<2x2xi64>, {TOK}) -> {TOK}
  %r, %s, %t3 = "stablehlo.recv"(%t2) {{
      channel_handle = #stablehlo.channel_handle<handle = 1, type = 3>, is_host_transfer = true
  }} : ({TOK}) -> (tensor<2x2xi64>, tensor<i32>, {TOK})
  func.return %r, %s, %t3 : tensor<2x2xi64>, tensor<i32>, {TOK}
}}"""


def test_host_send_recv_by_channel():
    program = shlo2jax.load(SEND_RECV)
    x = np.array([[1, 2], [3, 4]], np.int64)
    reply = (np.array([[0, 0], [0, 1]], np.int64), np.array(9, np.int32))
    (r, s, token), io = call_with_io(program, x, TOKEN, recv={1: [reply]})
    assert token is TOKEN
    np.testing.assert_array_equal(io.sent[1][0], x)
    np.testing.assert_array_equal(io.sent[2][0], [[5, 6], [7, 8]])
    np.testing.assert_array_equal(np.asarray(r), reply[0])
    assert int(s) == 9
    assert [(kind, key) for kind, key, _ in io.events] == [("send", 1), ("send", 2), ("recv", 1)]
    with pytest.raises(HostIOError, match="nothing to receive on channel 1"):
        call_with_io(program, x, TOKEN, recv={2: [reply]})


def test_loopback_receives_what_was_sent():
    program = shlo2jax.load(f"""
    func.func @main(%x: tensor<3xf32>, %t: {TOK}) -> tensor<3xf32> {{
      %t1 = "stablehlo.send"(%x, %t) {{
          channel_handle = #stablehlo.channel_handle<handle = 4, type = 2>, is_host_transfer = true
      }} : (tensor<3xf32>, {TOK}) -> {TOK}
      %r, %t2 = "stablehlo.recv"(%t1) {{
          channel_handle = #stablehlo.channel_handle<handle = 4, type = 3>, is_host_transfer = true
      }} : ({TOK}) -> (tensor<3xf32>, {TOK})
      func.return %r : tensor<3xf32>
    }}""")
    x = np.array([1, -2, 3], np.float32)
    out, _ = call_with_io(program, x, TOKEN, loopback=True)
    np.testing.assert_array_equal(np.asarray(out), x)


def test_device_to_device_send_is_reported_unsupported():
    with pytest.raises(shlo2jax.UnsupportedError, match="collectives"):
        shlo2jax.load(f"""
        func.func @main(%x: tensor<2xf32>, %t: {TOK}) -> {TOK} {{
          %t1 = "stablehlo.send"(%x, %t) {{
              channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>
          }} : (tensor<2xf32>, {TOK}) -> {TOK}
          func.return %t1 : {TOK}
        }}""")


def test_effects_in_branches_run_only_when_taken():
    program = shlo2jax.load(f"""
    func.func @main(%i: tensor<i32>, %x: tensor<f32>) -> tensor<f32> {{
      %t = stablehlo.after_all : {TOK}
      %r:2 = "stablehlo.case"(%i) ({{
        %t1 = "stablehlo.outfeed"(%x, %t) : (tensor<f32>, {TOK}) -> {TOK}
        stablehlo.return %x, %t1 : tensor<f32>, {TOK}
      }}, {{
        %y, %t1 = "stablehlo.infeed"(%t) : ({TOK}) -> (tensor<f32>, {TOK})
        stablehlo.return %y, %t1 : tensor<f32>, {TOK}
      }}) : (tensor<i32>) -> (tensor<f32>, {TOK})
      func.return %r#0 : tensor<f32>
    }}""")
    x = np.float32(2.5)
    out, io = call_with_io(program, np.array(0, np.int32), np.array(x))
    assert float(out) == 2.5 and [float(v) for v in io.outfeed] == [2.5]
    out, io = call_with_io(program, np.array(7, np.int32), np.array(x), infeed=[np.float32(-1)])
    assert float(out) == -1.0 and io.outfeed == [] and not io.infeed


def test_add_dependency_is_the_identity():
    program = shlo2jax.load(f"""
    func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {{
      %t = stablehlo.create_token : {TOK}
      %y = "mhlo.add_dependency"(%x, %t) : (tensor<2xf32>, {TOK}) -> tensor<2xf32>
      func.return %y : tensor<2xf32>
    }}""")
    x = np.array([1.5, -2.0], np.float32)
    np.testing.assert_array_equal(np.asarray(program(x)), x)


def test_outfeed_in_a_counted_loop():
    # `i = 0; i < 4; i += 1` with constant bounds becomes a scan: effects stay in order there too.
    program = shlo2jax.load(f"""
    func.func @main(%x: tensor<2xi32>) -> tensor<2xi32> {{
      %t = stablehlo.after_all : {TOK}
      %zero = stablehlo.constant dense<0> : tensor<i32>
      %w:3 = stablehlo.while(%i = %zero, %tok = %t, %v = %x) : tensor<i32>, {TOK}, tensor<2xi32>
       cond {{
        %four = stablehlo.constant dense<4> : tensor<i32>
        %lt = stablehlo.compare LT, %i, %four : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %lt : tensor<i1>
      }} do {{
        %one = stablehlo.constant dense<1> : tensor<i32>
        %t1 = "stablehlo.outfeed"(%i, %v, %tok) : (tensor<i32>, tensor<2xi32>, {TOK}) -> {TOK}
        %b = stablehlo.broadcast_in_dim %i, dims = [] : (tensor<i32>) -> tensor<2xi32>
        %n = stablehlo.add %v, %b : tensor<2xi32>
        %j = stablehlo.add %i, %one : tensor<i32>
        stablehlo.return %j, %t1, %n : tensor<i32>, {TOK}, tensor<2xi32>
      }}
      func.return %w#2 : tensor<2xi32>
    }}""")
    out, io = call_with_io(program, np.array([10, 20], np.int32))
    assert np.asarray(out).tolist() == [16, 26]
    assert [(int(i), np.asarray(v).tolist()) for i, v in io.outfeed] == [
        (0, [10, 20]), (1, [10, 20]), (2, [11, 21]), (3, [13, 23])]
