"""shlo2jax.memory: the paused garbage collector, the C heap's free memory handed back, calls
on a fresh chunk of CPython's frame stack."""

import gc
import sys

import pytest

from shlo2jax.memory import gc_paused, on_fresh_stack_chunk, return_freed_memory


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


def test_on_fresh_stack_chunk_returns_and_raises_what_the_call_does():
    assert on_fresh_stack_chunk(divmod, 7, 2) == (3, 1)
    with pytest.raises(ZeroDivisionError):
        on_fresh_stack_chunk(divmod, 1, 0)


def _leaf(n):
    return n + 1


def _loop(calls):
    for i in range(calls):
        _leaf(i)


def _at_depth(depth, fn, *args):
    return fn(*args) if depth == 0 else _at_depth(depth - 1, fn, *args)


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="counts the process's page faults (getrusage's ru_minflt, Linux)")
def test_a_loop_on_a_fresh_stack_chunk_maps_no_chunk_per_call():
    # From every caller depth over more than a chunk's worth of frames: where the loop's calls
    # crossed a chunk's end, each would map a fresh chunk (a page fault per call).
    import resource

    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    calls, worst = 2000, 0
    for depth in range(400):
        before = faults()
        _at_depth(depth, on_fresh_stack_chunk, _loop, calls)
        worst = max(worst, faults() - before)
    assert worst < calls // 10
