"""shlo2jax.memory: the paused garbage collector, the C heap's free memory handed back."""

import gc

from shlo2jax.memory import gc_paused, return_freed_memory


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


def test_return_freed_memory_runs_anywhere():
    # glibc's malloc_trim on Linux, nothing elsewhere; never raises
    return_freed_memory()
