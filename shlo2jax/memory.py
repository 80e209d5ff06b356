"""The process's memory while a program loads and traces: the garbage collector paused over
work that makes no cyclic garbage (`gc_paused`: decoding, tracing, lowering islands), and the
C heap's free memory handed back to the system once an MLIR context went (`return_freed_memory`:
the loader, after a program let its module go)."""

from __future__ import annotations

import ctypes
import gc
import sys


class gc_paused:
    """Pauses Python's cyclic garbage collector for the duration (nests; re-entrant).

    Tracing allocates a few long-lived objects per op (equations, variables, tracers) and
    almost no cyclic garbage: the collector's repeated passes over that growing heap cost
    about a third of the trace time of a large program and free nothing.
    """
    __slots__ = ("_paused",)

    def __enter__(self):
        self._paused = gc.isenabled()
        if self._paused:
            gc.disable()
        return self

    def __exit__(self, *exc):
        if self._paused:
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
