"""ops/custom_calls/legacy_rnn.py: cuDNN / MIOpen LSTM kernels (jax.experimental.rnn)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from shlo2jax.errors import UnsupportedError

from ._programs import (_assert_zeros, _program, _random, _run, _tensor, mlir_bytes)


# ---------------------------------------------------------------- cuDNN / MIOpen LSTM


def _rnn_case(bidirectional, num_layers=2, batch=3, seq=5, input_size=4, hidden=3):
    from jax.experimental import rnn
    dirs = 2 if bidirectional else 1
    x = _random((batch, seq, input_size), np.float32)
    h0 = _random((num_layers * dirs, batch, hidden), np.float32)
    c0 = _random((num_layers * dirs, batch, hidden), np.float32)
    w = (0.5 * _random((rnn.get_num_params_in_lstm(input_size, hidden, num_layers,
                                                   bidirectional),), np.float32))
    lengths = np.array([seq, 2, 4][:batch], np.int32)
    return dict(x=x, h0=h0, c0=c0, w=w, lengths=lengths, input_size=input_size, hidden=hidden,
                num_layers=num_layers, bidirectional=bidirectional)


def _rnn_descriptor(case, workspace=16, reserve=24):
    # jaxlib/gpu/rnn.cc BuildRnnDescriptor: {int input_size, hidden_size, num_layers,
    # batch_size, max_seq_length; float dropout; bool bidirectional; bool cudnn_allow_tf32;
    # int workspace_size, reserve_space_size;}
    batch, seq = case["x"].shape[:2]
    return struct.pack("<5if2B2x2i", case["input_size"], case["hidden"], case["num_layers"],
                       batch, seq, 0.0, int(case["bidirectional"]), 1, workspace, reserve)


def _rnn_reference(case, w):
    from jax.experimental import rnn
    weights = rnn.unpack_lstm_weights(w, case["input_size"], case["hidden"], case["num_layers"],
                                      case["bidirectional"])
    return rnn.lstm_ref(case["x"], case["h0"], case["c0"], *weights,
                        seq_lengths=case["lengths"], input_size=case["input_size"],
                        hidden_size=case["hidden"], num_layers=case["num_layers"], dropout=0.0,
                        bidirectional=case["bidirectional"])


def _rnn_types(case):
    dirs = 2 if case["bidirectional"] else 1
    batch, seq = case["x"].shape[:2]
    return (_tensor(case["x"].shape, "f32"), _tensor(case["h0"].shape, "f32"),
            _tensor(case["w"].shape, "f32"), _tensor((batch,), "i32"),
            _tensor((batch, seq, dirs * case["hidden"]), "f32"))


def _valid(case, y):
    mask = np.arange(y.shape[1])[None, :] < case["lengths"][:, None]
    return np.where(mask[..., None], y, 0)


@pytest.mark.parametrize("target,bidirectional", [("cudnn_rnn", True), ("cudnn_rnn_ffi", False),
                                                  ("hipdnn_rnn_ffi", True)])
def test_rnn_lstm(target, bidirectional):
    from jax.experimental import rnn
    case = _rnn_case(bidirectional)
    x_t, h_t, w_t, len_t, y_t = _rnn_types(case)
    desc = _rnn_descriptor(case)
    if target.endswith("_ffi"):  # c6e83903de (jax 0.5.1): the descriptor as `opaque`
        attrs = f"api_version = 4 : i32, mhlo.backend_config = {{opaque = {mlir_bytes(desc)}}}"
    else:
        attrs = f"api_version = 2 : i32, backend_config = {mlir_bytes(desc)}"
    w = case["w"]
    if target.startswith("hip"):  # MIOpen's gate order: jax's ROCm callers swap the gates
        w_kernel = np.asarray(rnn.swap_lstm_gates(w, case["input_size"], case["hidden"],
                                                  case["num_layers"], bidirectional))
    else:
        w_kernel = w
    prog = _program(target, [("arg", x_t), ("arg", h_t), ("arg", h_t), ("arg", w_t),
                             ("arg", len_t)],
                    [y_t, h_t, h_t, _tensor((16,), "f32"), _tensor((24,), "f32")], attrs)
    y, h, c, workspace, reserve = _run(prog, case["x"], case["h0"], case["c0"], w_kernel,
                                       case["lengths"])
    _assert_zeros(workspace, reserve)
    y_ref, h_ref, c_ref = (np.asarray(v) for v in _rnn_reference(case, w))
    np.testing.assert_allclose(y, _valid(case, y_ref), atol=1e-5)
    np.testing.assert_allclose(h, h_ref, atol=1e-5)
    np.testing.assert_allclose(c, c_ref, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("target,bidirectional", [("cudnn_rnn_bwd", True),
                                                  ("cudnn_rnn_bwd_ffi", False)])
def test_rnn_lstm_backward(target, bidirectional):
    import jax
    case = _rnn_case(bidirectional)
    x_t, h_t, w_t, len_t, y_t = _rnn_types(case)
    desc = _rnn_descriptor(case)
    if target.endswith("_ffi"):
        attrs = f"api_version = 4 : i32, mhlo.backend_config = {{opaque = {mlir_bytes(desc)}}}"
    else:
        attrs = f"api_version = 2 : i32, backend_config = {mlir_bytes(desc)}"
    y_ref = np.asarray(_rnn_reference(case, case["w"])[0])
    dy = _valid(case, _random(y_ref.shape, np.float32))
    dh = _random(case["h0"].shape, np.float32)
    dc = _random(case["h0"].shape, np.float32)
    dw0 = np.zeros_like(case["w"])
    prog = _program(target, [("arg", y_t), ("arg", h_t), ("arg", h_t), ("arg", x_t), ("arg", h_t),
                             ("arg", h_t), ("arg", w_t), ("arg", y_t), ("arg", _tensor((24,), "f32")),
                             ("arg", w_t), ("arg", len_t)],
                    [x_t, h_t, h_t, w_t, _tensor((16,), "f32")], attrs)
    dx, dh0, dc0, dw, workspace = _run(prog, dy, dh, dc, case["x"], case["h0"], case["c0"],
                                       case["w"], y_ref, np.zeros(24, np.float32), dw0,
                                       case["lengths"])
    _assert_zeros(workspace)

    def forward(x, h0, c0, w):
        return _rnn_reference(dict(case, x=x, h0=h0, c0=c0), w)
    _, vjp = jax.vjp(forward, case["x"], case["h0"], case["c0"], case["w"])
    expected = vjp((jax.numpy.asarray(dy), jax.numpy.asarray(dh), jax.numpy.asarray(dc)))
    for got, exp in zip((dx, dh0, dc0, dw), expected):
        np.testing.assert_allclose(got, np.asarray(exp), atol=1e-4)


def test_rnn_dropout_is_refused():
    case = _rnn_case(False)
    x_t, h_t, w_t, len_t, y_t = _rnn_types(case)
    batch, seq = case["x"].shape[:2]
    desc = struct.pack("<5if2B2x2i", 4, 3, 2, batch, seq, 0.5, 0, 1, 16, 24)
    with pytest.raises(UnsupportedError, match="cudnn_rnn.*dropout"):
        _program("cudnn_rnn", [("arg", x_t), ("arg", h_t), ("arg", h_t), ("arg", w_t),
                               ("arg", len_t)],
                 [y_t, h_t, h_t, _tensor((16,), "f32"), _tensor((24,), "f32")],
                 f"backend_config = {mlir_bytes(desc)}")
