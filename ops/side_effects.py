"""Ops with side effects and tokens: after_all, create_token, infeed, outfeed, send, recv,
add_dependency, interpreter.probe.

A token carries no data (`shlo2jax.TOKEN`, a pytree without leaves). Effects run as ordered
`io_callback`s, which JAX keeps in trace order = program order; since a token is always defined
before it is used, program order respects every token dependency, so joining tokens
(after_all) needs no runtime work. The host side lives in `shlo2jax.host_transfers`.

Value-preserving ops with no effect here: `optimization_barrier` (ops/control_flow.py),
`mhlo.add_dependency`, and `interpreter.probe` (its value is recorded only when a run is
probed, see `shlo2jax.probe`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Optional

import jax
import numpy as np
from jax.experimental import io_callback

from shlo2jax import host_transfers
from shlo2jax import value_types as T
from shlo2jax.ops._common import single_or_tuple
from shlo2jax.registry import Unsupported, register_op
from shlo2jax.translate import TOKEN


def _data_types(op):
    """The non-token result types; each must be a static, non-quantized tensor to cross to the
    host."""
    types = []
    for t in op.result_types:
        if isinstance(t, T.TokenType):
            continue
        if type(t) is not T.TensorType or not t.is_static or t.quant is not None:
            raise Unsupported(f"{op.name} result of type {t}: host transfers take static tensors")
        types.append(t)
    return tuple(types)


class HostTransfer(NamedTuple):
    site: str                     # the op and its location, for the host side's messages
    types: tuple = ()             # the data types received (infeed, recv)
    handle: Optional[int] = None  # the channel (send, recv)


def _site(op):
    return f"{op.name} at {op.location}"


def _from_host(op, take):
    """Results of an op fed by the host: `take(types)` runs on the host, tokens are TOKEN."""
    types = op.params.types
    values = iter(())
    if types:
        shapes = [jax.ShapeDtypeStruct(t.shape, t.dtype) for t in types]
        values = iter(io_callback(functools.partial(take, types=types), shapes, ordered=True))
    return single_or_tuple(op, [TOKEN if isinstance(t, T.TokenType) else next(values)
                                 for t in op.result_types])


@register_op("stablehlo.after_all", "mhlo.after_all", "stablehlo.create_token",
             "mhlo.create_token")
def after_all(ctx, op, *tokens):
    return TOKEN


@register_op("mhlo.add_dependency")
def add_dependency(ctx, op, operand, token):
    return operand


# `layout` only says how the transferred buffers are laid out in memory; the values are logical
# arrays, so it has no effect here.
@register_op("stablehlo.infeed", "mhlo.infeed",
             prepare=lambda op: HostTransfer(_site(op), _data_types(op)))
def infeed(ctx, op, token):
    return _from_host(op, functools.partial(host_transfers.take_infeed, op.params.site))


@register_op("stablehlo.outfeed", "mhlo.outfeed", prepare=lambda op: HostTransfer(_site(op)))
def outfeed(ctx, op, *operands):
    *inputs, token = operands
    io_callback(functools.partial(host_transfers.put_outfeed, op.params.site), None, *inputs,
                ordered=True)
    return TOKEN


def _prepare_channel(op):
    if not op.attrs.get("is_host_transfer", False):
        raise Unsupported(f"{op.name} between devices (not is_host_transfer) needs the "
                          "collectives machinery")
    handle = op.attrs.get("channel_handle")
    if handle is None:
        raise Unsupported(f"{op.name} without a channel_handle")
    types = _data_types(op) if op.name.endswith("recv") else ()
    return HostTransfer(_site(op), types, int(handle.handle))


@register_op("stablehlo.send", "mhlo.send", prepare=_prepare_channel)
def send(ctx, op, *operands):
    *inputs, token = operands
    p = op.params
    io_callback(functools.partial(host_transfers.send_to_host, p.site, p.handle), None, *inputs,
                ordered=True)
    return TOKEN


@register_op("stablehlo.recv", "mhlo.recv", prepare=_prepare_channel)
def recv(ctx, op, token):
    p = op.params
    return _from_host(op, functools.partial(host_transfers.recv_from_host, p.site, p.handle))


@register_op("interpreter.probe")
def interpreter_probe(ctx, op, operand):
    return operand


def _print_value(type_text: str, value) -> None:
    print(f"{type_text} {{\n  {np.array2string(np.asarray(value), separator=', ')}\n}}", flush=True)


@register_op("interpreter.print")
def interpreter_print(ctx, op, operand):
    # The reference interpreter's debugging print, on the host's stdout. A debug callback
    # (not an ordered io_callback) so it also works inside shard_map (multi-process runs).
    type_text = str(T.tensor_type(operand.shape, operand.dtype))
    jax.debug.callback(functools.partial(_print_value, type_text), operand)
    return ()
