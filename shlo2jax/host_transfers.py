"""Host transfers: what a program's infeed, outfeed and host send/recv exchange with Python.

    with shlo2jax.host_io(infeed=[x0, (y1, z1)], recv={7: [w]}) as io:
        program(*args)
    io.outfeed        # one entry per outfeed executed, in program order
    io.sent[5]        # values sent to the host on channel 5
    io.events         # every transfer in order: (kind, key, value)

or `outputs, io = call_with_io(program, *args, infeed=[...])`.

Each execution of `stablehlo.infeed` takes the next item of `infeed` (one array when the op has
one data result, a tuple of arrays when it has several; an infeed with only a token result takes
nothing); `recv` with `is_host_transfer` takes the next item of `recv[channel_handle]`. Values
must have exactly the declared shape and dtype (never converted). Each `outfeed` appends its
operands (an array, or a tuple when it has several operands) to `io.outfeed`; each host `send`
appends to `io.sent[handle]`. With `loopback=True`, what is sent on a channel can then be
received on it.

The ops run as ordered `jax.experimental.io_callback`s, so under `jax.jit` they happen in
program order (a valid order for their tokens). The callbacks find the innermost active
`host_io` context at run time (a process-wide stack: one host_io per program run at a time).
Leaving the context waits for all of them (`jax.effects_barrier`). A program that runs out of
feed, or runs a host transfer outside any context, stops with `HostIOError`.
"""

from __future__ import annotations

import collections
import logging
from typing import Optional

import jax
import numpy as np

from shlo2jax.errors import HostIOError


class _QuietHostIOErrors(logging.Filter):
    """JAX logs every failed callback with its traceback; a HostIOError is re-raised with a
    clear message anyway, so its log record is noise."""

    def filter(self, record):
        return not (record.exc_info and isinstance(record.exc_info[1], HostIOError))


logging.getLogger("jax._src.callback").addFilter(_QuietHostIOErrors())

_ACTIVE: list = []  # callbacks run on XLA's threads: a process-wide stack, not thread-local


class HostIO:
    """The host side of a program run: feeds consumed by infeed/recv, records of outfeed/send."""

    def __init__(self, infeed=(), recv=None, *, loopback: bool = False):
        self.infeed = collections.deque(infeed)
        self.recv = {int(h): collections.deque(v) for h, v in (recv or {}).items()}
        self.outfeed: list = []
        self.sent: dict = {}
        self.events: list = []
        self.loopback = loopback
        self.error: Optional[HostIOError] = None

    def __enter__(self):
        _ACTIVE.append(self)
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            jax.effects_barrier()
        except Exception as e:  # a failed callback also surfaces here
            exc = exc or e
        finally:
            _ACTIVE.remove(self)
        if self.error is not None and not isinstance(exc, HostIOError):
            # XLA reports a failed callback as an opaque runtime error; say what happened.
            raise self.error from exc
        if exc is not None and exc_type is None:
            raise exc
        return False

    def _fail(self, message: str):
        self.error = HostIOError(message)
        raise self.error

    def __repr__(self):
        return (f"<HostIO infeed left={len(self.infeed)} outfeed={len(self.outfeed)} "
                f"sent={ {h: len(v) for h, v in self.sent.items()} }>")


def host_io(infeed=(), recv=None, *, loopback: bool = False) -> HostIO:
    """A context in which programs' infeed/outfeed/host send/recv talk to these feeds."""
    return HostIO(infeed, recv, loopback=loopback)


def call_with_io(fn, *args, infeed=(), recv=None, loopback: bool = False):
    """Calls a Program/Function (or any callable) with a fresh host feed: (outputs, HostIO)."""
    with host_io(infeed, recv, loopback=loopback) as io:
        outputs = fn(*args)
        jax.block_until_ready(outputs)
    return outputs, io


# ---- the host side of the ops (ops/side_effects.py's ordered callbacks call these) ---------

def _active(site: str) -> HostIO:
    if not _ACTIVE:
        raise HostIOError(f"{site} ran outside `shlo2jax.host_io(...)`: a program with "
                          "host transfers must be called inside a host_io context")
    return _ACTIVE[-1]


def _typed(io: HostIO, site: str, item, types) -> list:
    # One data result: the item is the array itself (or a 1-tuple); several: a tuple of arrays.
    values = [item] if len(types) == 1 and not isinstance(item, tuple) else item
    if not isinstance(values, (list, tuple)) or len(values) != len(types):
        io._fail(f"{site} takes {len(types)} values per transfer ("
                 f"{', '.join(map(str, types))}); the feed gave {type(item).__name__}")
    out = []
    for i, (value, ttype) in enumerate(zip(values, types)):
        array = np.asarray(value)
        if array.dtype != ttype.dtype or array.shape != tuple(ttype.shape):
            io._fail(f"{site}: fed value #{i} is {array.dtype}{list(array.shape)}, the op "
                     f"declares {ttype} (values are never converted)")
        out.append(array)
    return out


# `interpreter.run_parallel(...) {infeed = [@f, @g]}`: the processes' infeed ops take the
# values of @f, @g, ... from one queue they share, ahead of any host feed. The op pushes
# the queue before its processes run and pops it after (ordered callbacks, in that order).
_RUN_PARALLEL_INFEED: list = []


def begin_run_parallel_infeed(*values) -> None:
    _RUN_PARALLEL_INFEED.append(collections.deque(np.asarray(v) for v in values))


def end_run_parallel_infeed(site: str) -> None:
    left = _RUN_PARALLEL_INFEED.pop()
    if left:
        raise HostIOError(f"{site}: its processes left {len(left)} of its infeed values "
                          "unread")


def take_infeed(site: str, types) -> list:
    if _RUN_PARALLEL_INFEED:
        queue = _RUN_PARALLEL_INFEED[-1]
        if not queue:
            raise HostIOError(f"{site}: the run_parallel infeed queue is exhausted")
        item = queue.popleft()
        if len(types) != 1 or item.dtype != types[0].dtype or \
                item.shape != tuple(types[0].shape):
            raise HostIOError(f"{site} takes ({', '.join(map(str, types))}); the "
                              f"run_parallel infeed gave {item.dtype}{list(item.shape)}")
        return [item]
    io = _active(site)
    if not io.infeed:
        io._fail(f"{site}: infeed exhausted: the op wants ({', '.join(map(str, types))}) but "
                 f"the feed is empty ({sum(e[0] == 'infeed' for e in io.events)} item(s) "
                 "consumed so far)")
    values = _typed(io, site, io.infeed.popleft(), types)
    io.events.append(("infeed", site, _single(values)))
    return values


def put_outfeed(site: str, *values) -> None:
    io = _active(site)
    value = _single([np.array(v) for v in values])
    io.outfeed.append(value)
    io.events.append(("outfeed", site, value))


def send_to_host(site: str, handle: int, *values) -> None:
    io = _active(site)
    value = _single([np.array(v) for v in values])
    io.sent.setdefault(handle, []).append(value)
    io.events.append(("send", handle, value))
    if io.loopback:
        io.recv.setdefault(handle, collections.deque()).append(value)


def recv_from_host(site: str, handle: int, types) -> list:
    io = _active(site)
    queue = io.recv.get(handle)
    if not queue:
        io._fail(f"{site}: nothing to receive on channel {handle}: give values in "
                 f"host_io(recv={{{handle}: [...]}})")
    values = _typed(io, site, queue.popleft(), types)
    io.events.append(("recv", handle, _single(values)))
    return values


def _single(values):
    return values[0] if len(values) == 1 else tuple(values)
