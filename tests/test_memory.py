"""shlo2jax.memory: the paused garbage collector, the C heap's free memory handed back, calls
on a fresh chunk of CPython's frame stack."""

import gc
import sys

import pytest

from shlo2jax.memory import (gc_paused, on_fresh_stack_chunk, return_freed_memory,
                             with_stack_headroom)


def test_gc_paused_nests_and_respects_a_disabled_collector():
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a caller's choice is left alone
    finally:
        gc.enable()


def test_a_pause_that_made_many_objects_ends_with_them_in_the_oldest_generation():
    gc.collect()
    with gc_paused():
        kept = [[] for _ in range(gc_paused.PROMOTED + 1000)]
    young = gc.get_count()[0]
    assert young < 1000  # (not the pause's objects: they were moved on)
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    assert all(gc.is_tracked(x) for x in kept[:10])
    with gc_paused():
        few = [[] for _ in range(100)]
    assert gc.get_count()[0] >= young + len(few)  # a small pause: left young


def test_return_freed_memory_runs_anywhere():
    # glibc's malloc_trim on Linux, nothing elsewhere; never raises
    return_freed_memory()


@pytest.mark.parametrize("run", [on_fresh_stack_chunk, with_stack_headroom])
def test_on_a_fresh_stack_chunk_returns_and_raises_what_the_call_does(run):
    assert run(divmod, 7, 2) == (3, 1)
    with pytest.raises(ZeroDivisionError):
        run(divmod, 1, 0)


def _leaf(n):
    return n + 1


def _loop(calls):
    # called from C, as jax's safe_map and foreach call a lowering rule per equation: each
    # call pushes its frame on its own (a Python loop's calls here map no chunk either way)
    list(map(_leaf, range(calls)))


def _minor_faults() -> int:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _at_depth(depth, fn, *args):
    return fn(*args) if depth == 0 else _at_depth(depth - 1, fn, *args)


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="counts the process's page faults (getrusage's ru_minflt, Linux)")
def test_a_loop_on_a_fresh_stack_chunk_maps_no_chunk_per_call():
    # From every caller depth over more than a chunk's worth of frames: where the loop's calls
    # crossed a chunk's end, each would map a fresh chunk (a page fault per call).
    calls, worst = 2000, 0
    for depth in range(400):
        before = _minor_faults()
        _at_depth(depth, on_fresh_stack_chunk, _loop, calls)
        worst = max(worst, _minor_faults() - before)
    assert worst < calls // 10


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="counts the process's page faults (getrusage's ru_minflt, Linux)")
def test_a_loop_nested_below_a_first_calls_headroom_maps_no_chunk_per_call():
    # A loop run up to several chunks' worth of frames below the call, as jax's lowering runs
    # a nested loop body's equations: on_fresh_stack_chunk's 16 KiB leave some of these
    # depths crossing a chunk's end (a page fault per call), with_stack_headroom's 256 none.
    calls, worst = 1000, 0
    for nested in range(600):
        before = _minor_faults()
        with_stack_headroom(_at_depth, nested, _loop, calls)
        worst = max(worst, _minor_faults() - before)
    assert worst < calls // 10
