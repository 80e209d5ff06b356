"""Host I/O and probes: what a program's side effects exchange with Python.

Host feed (infeed, outfeed, host send/recv)::

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

Probes::

    outputs, records = probe(program, *args, values="all")

records every tensor result of the chosen ops during a run: `records[ProbeKey(op_index,
result, name, location, probe_id)]` is the list of its values, one per execution, in execution
order (an op in a loop body, or in a function called twice, has several). Values of ops at a
function's top level (callees are inlined while probing) come back as extra outputs of the
jitted run; values inside `while`/`if`/`case` bodies come back through ordered callbacks;
values inside other regions (reduction bodies, comparators, scatter updates) cannot leave
their computation and are listed in `records.skipped` instead.
"""

from __future__ import annotations

import collections
import functools
import itertools
import logging
from typing import NamedTuple, Optional

import jax
import numpy as np
from jax.experimental import io_callback

from shlo2jax import types as T
from shlo2jax.errors import HostIOError
from shlo2jax.translate import Translator, TranslatorMode


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


# ---- the host side of the ops (called by ops/side_effects.py's ordered callbacks) ----------

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


def take_infeed(site: str, types) -> list:
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


# ---- probes --------------------------------------------------------------------------------

class ProbeKey(NamedTuple):
    op_index: int
    result: int
    name: str
    location: str
    probe_id: Optional[str] = None


class ProbeRecords(dict):
    """ProbeKey -> list of values (one per execution, in order); `skipped`: keys whose values
    live inside a region that cannot hand them out (e.g. a reduction body)."""

    def __init__(self):
        super().__init__()
        self.skipped: set = set()

    def by_probe_id(self, probe_id: str) -> list:
        """The values recorded by `interpreter.probe` ops with this probe_id, in order."""
        return [v for k, vs in self.items() if k.probe_id == probe_id for v in vs]


# Regions of these ops become lax control flow, where ordered callbacks may run.
_CALLBACK_REGIONS = frozenset({"stablehlo.while", "mhlo.while", "stablehlo.if", "mhlo.if",
                               "stablehlo.case", "mhlo.case", "func.call"})


class _Prober:
    def __init__(self, selected: frozenset):
        self.selected = selected
        self.stack: list = []
        self.top: list = []          # (seq, key, traced value): extra outputs
        self.nested: dict = {}       # seq -> (key, [values]): filled by callbacks at run time
        self.skipped: set = set()
        self.seq = itertools.count()

    def reset(self):
        self.stack.clear()
        self.top.clear()
        self.nested.clear()
        self.skipped.clear()

    def __call__(self, op, results):
        if results is None:
            self.stack.append(op)
            return
        self.stack.pop()
        if op.index not in self.selected:
            return
        owners = [o.name for o in self.stack if o.name != "func.call"]
        for i, (value, rtype) in enumerate(zip(results, op.result_types)):
            if type(rtype) is T.TokenType:
                continue
            key = _key(op, i)
            seq = next(self.seq)
            if type(rtype) is not T.TensorType or rtype.quant is not None:
                self.skipped.add(key)  # tuples and quantized values are not plain arrays
            elif not owners:
                self.top.append((seq, key, value))
            elif all(name in _CALLBACK_REGIONS for name in owners):
                self.nested[seq] = (key, [])
                io_callback(functools.partial(self._record, seq), None, value, ordered=True)
            else:
                self.skipped.add(key)

    def _record(self, seq, value):
        self.nested[seq][1].append(np.array(value))

    def records(self, top_values) -> ProbeRecords:
        entries = [(seq, key, [np.asarray(v)]) for (seq, key, _), v in zip(self.top, top_values)]
        entries += [(seq, key, values) for seq, (key, values) in self.nested.items() if values]
        records = ProbeRecords()
        for _, key, values in sorted(entries, key=lambda e: e[0]):
            records.setdefault(key, []).extend(values)
        records.skipped = set(self.skipped)
        return records


def _in_opaque_regions(module) -> dict:
    """Op index -> key of ops nested in regions whose values cannot leave (reduction bodies,
    comparators...), whether or not the translation evaluates those regions."""
    found = {}

    def walk(region, opaque):
        for op in region.ops:
            if opaque:
                for i, rtype in enumerate(op.result_types):
                    if type(rtype) is T.TensorType:
                        found.setdefault(op.index, []).append(_key(op, i))
            for inner in op.regions:
                walk(inner, opaque or op.name not in _CALLBACK_REGIONS)
    for fdef in module.functions.values():
        walk(fdef.body, False)
    return found


def _key(op, result: int) -> ProbeKey:
    return ProbeKey(op.index, result, op.name, op.location, op.attrs.get("probe_id"))


def _select(module, values) -> frozenset:
    if isinstance(values, str) and values == "all":
        return frozenset(op.index for op in module.ops)
    if isinstance(values, str) and values == "probes":
        return frozenset(op.index for op in module.ops if op.name == "interpreter.probe")
    if isinstance(values, (str, int)):
        values = [values]
    chosen, unmatched = set(), []
    for selector in values:
        if isinstance(selector, (int, np.integer)):
            hits = [op.index for op in module.ops if op.index == selector]
        else:
            hits = [op.index for op in module.ops if selector in (
                op.name, op.location, op.attrs.get("probe_id") if isinstance(op.attrs, dict)
                else None)]
        if not hits:
            unmatched.append(selector)
        chosen.update(hits)
    if unmatched:
        raise ValueError(f"probe: no op matches {unmatched!r} (give op indices, op names, "
                         "locations or interpreter.probe ids, or 'all' / 'probes')")
    return frozenset(chosen)


def _statically_skipped(module, selected) -> set:
    return {key for index, keys in _in_opaque_regions(module).items() if index in selected
            for key in keys}


def probe(target, *args, values="all"):
    """Runs a Program (its entry) or Function under jax.jit, recording intermediate values.

    `values`: "all", "probes" (the `interpreter.probe` ops), or a list of op indices
    (`Op.index`), op names, locations or probe ids. Returns `(outputs, ProbeRecords)`.
    """
    fn = target.entry if hasattr(target, "entry") else target
    fn.check_arguments(args)
    if not all(t.is_static for t in fn.input_types if isinstance(t, T.TensorType)):
        raise NotImplementedError(f"probe: @{fn.name} has dynamic input shapes")
    prober = _Prober(_select(fn.program.module, values))
    body = Translator(fn.program.module, TranslatorMode(observer=prober)).function_body(
        fn.definition)

    def run(*call_args):
        prober.reset()
        outs = body(*call_args)
        return outs, [value for _, _, value in prober.top]

    with jax.enable_x64(True):
        outs, top_values = jax.jit(run)(*args)
        jax.block_until_ready((outs, top_values))
        jax.effects_barrier()
    outputs = outs[0] if len(outs) == 1 else tuple(outs)
    records = prober.records(top_values)
    records.skipped |= _statically_skipped(fn.program.module, prober.selected)
    return outputs, records
