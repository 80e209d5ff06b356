"""The process's memory while a program loads and traces: the garbage collector paused over
work that makes no cyclic garbage (`gc_paused`: decoding, tracing, lowering islands), the
C heap's free memory handed back to the system once an MLIR context went (`return_freed_memory`:
the loader, after a program let its module go), and the translation's loop and a first call's
lowering kept off the ends of CPython's frame stack chunks (`on_fresh_stack_chunk`,
`with_stack_headroom`)."""

from __future__ import annotations

import ctypes
import gc
import sys
from typing import Callable


class gc_paused:
    """Pauses Python's cyclic garbage collector for the duration (nests; re-entrant).

    Tracing allocates a few long-lived objects per op (equations, variables, tracers) and
    almost no cyclic garbage: the collector's repeated passes over that growing heap cost
    about a third of the trace time of a large program and free nothing.

    Where the pause made more than `PROMOTED` objects (a large program's trace or decode),
    they are moved to the oldest generation as it ends (`gc.freeze()` then `gc.unfreeze()`:
    two list splices): else the young generations' first collections after it would each
    pass over all of them once more for nothing (a 51k-op program: 0.17 s at the end of its
    trace, 0.18 s in its lowering). They are collected by the next full collection, as
    everything old is; a pause that made fewer objects ends as it began.
    """
    __slots__ = ("_paused",)
    PROMOTED = 100_000

    def __enter__(self):
        self._paused = gc.isenabled()
        if self._paused:
            gc.disable()
        return self

    def __exit__(self, *exc):
        if self._paused:
            if gc.get_count()[0] > self.PROMOTED:
                gc.freeze()
                gc.unfreeze()
            gc.enable()
        return False


def return_freed_memory() -> None:
    """Hands the memory the C heap has free back to the system (glibc's `malloc_trim`).

    glibc serves an allocation below its mmap threshold (which grows up to 32 MB as large
    blocks are freed) from its heap, and keeps such blocks resident once freed: a context's
    weights stored in blocks of a few MB would still count in the process's memory after the
    context went, until reused."""
    if not sys.platform.startswith("linux"):
        return
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return
    trim(0)


def on_fresh_stack_chunk(fn: Callable, *args):
    """`fn(*args)`, its frames starting a fresh 16 KiB of CPython's frame stack.

    CPython >= 3.11 keeps a thread's Python frames in chunks of 16 KiB and frees a chunk as
    soon as the frame at its start returns: a loop whose every iteration calls just across a
    chunk's end maps and unmaps a chunk per call (an mmap, a munmap and a fresh page: ~8 us).
    Where the translation's loop ran was chance (a few frames more or less in the caller): a
    51k-op program traced through its `Function` mapped 56,000 chunks, 0.6 of its 1.45 CPU s
    of trace. This function's frame reserves more than a chunk holds (a stack it never uses:
    never written), so it always gets a 32 KiB chunk of its own with 16 KiB left after it,
    where `fn` and the calls of its loop run.
    """
    return fn(*args)


# CPython gives a frame of n slots (8 bytes) that does not fit a chunk of its own, of 16 KiB
# doubled until it holds n + 1000 slots: 2,100 fit no 16 KiB chunk (2,048) and get 32 KiB. An
# overstated stack size is safe (it is only reserved); before 3.11 it costs one allocation.
on_fresh_stack_chunk.__code__ = on_fresh_stack_chunk.__code__.replace(co_stacksize=2100)


def with_stack_headroom(fn: Callable, *args):
    """`fn(*args)`, its frames starting a chunk of CPython's frame stack with 256 KiB free.

    As `on_fresh_stack_chunk`, for what runs nested loops of its own below `fn`: jax's
    lowering of a translation walks each jaxpr, a loop's body or a callee's one level of
    recursion deeper, with a call per equation that can fall across a chunk's end where the
    translation's own loop (kept on a fresh chunk) cannot protect it. A 51k-op program's
    lowering took 1.2 CPU s where its calls crossed (95,000 chunks mapped) and 0.5 where they
    did not, by the depth of the caller's stack. The chunk costs one mapping per call
    (~8 us): a first call, which traces and lowers, is where it pays.
    """
    return fn(*args)


# 32,000 slots (256 KiB, never written) plus CPython's 1,000 of overhead need more than 256 KiB:
# the chunk is 512 KiB, half of it free after this frame.
with_stack_headroom.__code__ = with_stack_headroom.__code__.replace(co_stacksize=32000)
