"""jax.experimental.rnn's LSTM kernels: cuDNN (`cudnn_rnn`, `cudnn_rnn_bwd`, and
their FFI spellings) and MIOpen (`hipdnn_rnn_ffi`, `hipdnn_rnn_bwd_ffi`).

The descriptor (jaxlib/gpu/rnn_kernels.h) is

    struct RnnDescriptor {   // 4d1c4bc761 (2022-11-28); cudnn_allow_tf32 from fc1c31d958
      int input_size, hidden_size, num_layers, batch_size, max_seq_length;
      float dropout; bool bidirectional; [bool cudnn_allow_tf32;]
      int workspace_size, reserve_space_size; };

36 bytes either way (the flag sits in what was padding). jax 0.4.1 .. 0.4.38
put it in `backend_config`; from c6e83903de (jax 0.5.1) it is the FFI attribute
`opaque` of `cudnn_rnn_ffi` / `hipdnn_rnn_ffi`.

Forward: (x[batch, seq, input], h0, c0 [layers * dirs, batch, hidden], weights,
seq_lengths[batch] i32) -> (y[batch, seq, dirs * hidden], h_n, c_n, workspace,
reserve space). The weights are cuDNN's flat buffer: W_ih then W_hh of each
pseudo-layer (layer-major, direction-minor), then their biases b_ih, b_hh;
gate order i, f, g, o (MIOpen: i, f, o, g). Outputs past a sequence's length
are zeros, h_n/c_n are the states at its last step, the reverse direction
reads each sequence backwards from its last step. Backward: (dy, dh_n, dc_n,
x, h0, c0, w, y, reserve space, dw accumulator, seq_lengths) -> (dx, dh0, dc0,
dw + accumulator, workspace), here the gradient of the forward computation.
The reserve space and workspaces are zeros: nothing reads them on CPU.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from shlo2jax.ops.custom_calls._descriptors import (Outputs, Struct, descriptor_bytes,
                                                    kernel_prepare, target_of, unpack)
from shlo2jax.registry import TargetInfo, Unsupported, register_custom_call

RNN = Struct("RnnDescriptor", "<5if2B2x2i",
             ("input_size", "hidden_size", "num_layers", "batch_size", "max_seq_length",
              "dropout", "bidirectional", "allow_tf32", "workspace_size", "reserve_space_size"),
             "jaxlib/gpu/rnn_kernels.h @ 4d1c4bc761 .. 2f32a79471")


@dataclasses.dataclass(frozen=True)
class RnnCall:
    out: Outputs
    input_size: int
    hidden_size: int
    num_layers: int
    bidirectional: bool
    miopen_gates: bool  # MIOpen's gate order (i, f, o, g)


def _prepare(op):
    cfg = op.attrs.get("mhlo.backend_config")
    raw = descriptor_bytes(op, "opaque") if isinstance(cfg, dict) else descriptor_bytes(op)
    _, f = unpack(op, RNN, raw=raw)
    out = Outputs.of(op)
    if f["dropout"] != 0.0:
        raise Unsupported(f"custom_call @{target_of(op)}: dropout={f['dropout']}: cuDNN's "
                          "dropout mask cannot be reproduced")
    if f["bidirectional"] not in (0, 1):
        raise Unsupported(f"custom_call @{target_of(op)}: bidirectional={f['bidirectional']}")
    dirs = 2 if f["bidirectional"] else 1
    backward = "bwd" in target_of(op)
    state = out.types[1][0]
    if not backward and out.types[0][0] != (f["batch_size"], f["max_seq_length"],
                                            dirs * f["hidden_size"]):
        raise Unsupported(f"custom_call @{target_of(op)}: descriptor sizes do not match the "
                          f"output {out.types[0][0]}")
    if state != (f["num_layers"] * dirs, f["batch_size"], f["hidden_size"]):
        raise Unsupported(f"custom_call @{target_of(op)}: descriptor sizes do not match the "
                          f"state {state}")
    return RnnCall(out, f["input_size"], f["hidden_size"], f["num_layers"], dirs == 2,
                   target_of(op).startswith("hip"))


def _unpack_weights(params: RnnCall, w):
    """[(W_ih, W_hh, b_ih, b_hh)] per pseudo-layer, gates in cuDNN's order i, f, g, o."""
    dirs = 2 if params.bidirectional else 1
    hidden = params.hidden_size
    shapes = []
    for layer in range(params.num_layers * dirs):
        inputs = params.input_size if layer < dirs else dirs * hidden
        shapes.append(((4 * hidden, inputs), (4 * hidden, hidden)))
    needed = sum(a * b + c * d for (a, b), (c, d) in shapes) + 8 * hidden * len(shapes)
    if w.shape != (needed,):
        raise ValueError(f"RNN weights of shape {w.shape}: the descriptor's LSTM needs "
                         f"({needed},)")
    offset, matrices = 0, []
    for ih, hh in shapes:
        pair = []
        for shape in (ih, hh):
            size = shape[0] * shape[1]
            pair.append(w[offset:offset + size].reshape(shape))
            offset += size
        matrices.append(pair)
    layers = []
    for pair in matrices:
        biases = [w[offset:offset + 4 * hidden], w[offset + 4 * hidden:offset + 8 * hidden]]
        offset += 8 * hidden
        layers.append(tuple(pair + biases))
    if params.miopen_gates:  # i, f, o, g -> i, f, g, o
        def reorder(m):
            i, f, o, g = jnp.split(m, 4, axis=0)
            return jnp.concatenate([i, f, g, o], axis=0)
        layers = [tuple(reorder(m) for m in layer) for layer in layers]
    return layers


def _run_direction(weights, x, h, c, lengths, reverse):
    """One LSTM direction over time-major x[seq, batch, in]: (outputs, h_last, c_last)."""
    w_ih, w_hh, b_ih, b_hh = weights
    steps = x.shape[0]
    if reverse:
        x = _reverse_valid(x, lengths)
    projected = jnp.einsum("sbi,gi->sbg", x, w_ih, precision=lax.Precision.HIGHEST) + b_ih + b_hh

    def cell(carry, inputs):
        h, c = carry
        t, z = inputs
        z = z + jnp.matmul(h, w_hh.T, precision=lax.Precision.HIGHEST)
        i, f, g, o = jnp.split(z, 4, axis=-1)
        c_new = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h_new = jax.nn.sigmoid(o) * jnp.tanh(c_new)
        active = (t < lengths)[:, None]  # past the end of a sequence the state stays
        h, c = jnp.where(active, h_new, h), jnp.where(active, c_new, c)
        return (h, c), jnp.where(active, h_new, 0)

    (h, c), ys = lax.scan(cell, (h, c), (jnp.arange(steps), projected))
    if reverse:
        ys = _reverse_valid(ys, lengths)
    return ys, h, c


def _reverse_valid(x, lengths):
    """Reverses each batch column's first `length` steps in place (padding stays last)."""
    steps = x.shape[0]
    t = jnp.arange(steps)[:, None]
    source = jnp.where(t < lengths[None, :], lengths[None, :] - 1 - t, t)
    return jnp.take_along_axis(x, source[..., None], axis=0)


def _forward(params: RnnCall, x, h0, c0, w, lengths):
    layers = _unpack_weights(params, w)
    dirs = 2 if params.bidirectional else 1
    lengths = lengths.astype(np.int32)
    seq = jnp.swapaxes(x, 0, 1)
    hs, cs = [], []
    for layer in range(params.num_layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            y, h, c = _run_direction(layers[k], seq, h0[k], c0[k], lengths, reverse=d == 1)
            outs.append(y)
            hs.append(h)
            cs.append(c)
        seq = jnp.concatenate(outs, axis=-1) if dirs == 2 else outs[0]
    return jnp.swapaxes(seq, 0, 1), jnp.stack(hs), jnp.stack(cs)


_INFO = dict(forms=("descriptor", "FFI"), dtypes="f32, f64",
             jax="0.4.1 .. 0.4.38 (descriptor); 0.5.1 .. (`*_ffi`, descriptor as `opaque`)",
             test=("tests/ops/custom_calls/test_legacy_rnn.py::test_rnn_lstm",
                   "tests/ops/custom_calls/test_legacy_rnn.py::test_rnn_lstm_backward"))


@register_custom_call("cudnn_rnn", "cudnn_rnn_ffi", "hipdnn_rnn_ffi",
                      prepare=kernel_prepare(_prepare, operands=5),
                      info=TargetInfo("cuDNN/MIOpen LSTM forward (jax.experimental.rnn)", **_INFO))
def rnn_forward(ctx, op, x, h0, c0, w, lengths, *result_shapes):
    y, h, c = _forward(op.params, x, h0, c0, w, lengths)
    return op.params.out.pack([y, h, c])


@register_custom_call("cudnn_rnn_bwd", "cudnn_rnn_bwd_ffi", "hipdnn_rnn_bwd_ffi",
                      prepare=kernel_prepare(_prepare, operands=11),
                      info=TargetInfo("cuDNN/MIOpen LSTM backward (jax.experimental.rnn)",
                                      **_INFO))
def rnn_backward(ctx, op, dy, dh, dc, x, h0, c0, w, y, reserve, dw0, lengths, *result_shapes):
    params = op.params
    _, vjp = jax.vjp(lambda x, h0, c0, w: _forward(params, x, h0, c0, w, lengths), x, h0, c0, w)
    dx, dh0, dc0, dw = vjp((dy, dh, dc))
    return params.out.pack([dx, dh0, dc0, dw0 + dw])
