"""The translated executable: the function's ops traced as `jax.lax` calls, under one `jax.jit`.

The default way a function runs, and the one every transformation traces.
"""

from __future__ import annotations

import functools

import jax

from shlo2jax import compat
from shlo2jax.memory import gc_paused, with_stack_headroom


class Translated:
    """Calls run the translation of the function, jitted once (see `shlo2jax.translate`)."""
    lowering = "translate"

    def __init__(self, function):
        self.function = function
        self.called = False

    @functools.cached_property
    def jitted(self):
        fn = self.function
        return jax.jit(fn.taking_storage_integers(fn.program.translator.function_body(
            fn.definition)))

    def __call__(self, *args) -> tuple:
        # 64-bit types run without the user enabling jax_enable_x64. The collector is paused
        # for the whole trace, jax's building of the jaxpr after the body returned included
        # (its full passes over the trace's objects cost ~25% of a 50k-op trace, freeing
        # nothing); a call that only runs pays two flag flips.
        # The first call on values, which traces, lowers and compiles, runs where jax's
        # lowering loops cannot cross the end of a frame stack chunk
        # (memory.with_stack_headroom); later ones go straight to the compiled call.
        with compat.enable_x64(), gc_paused():
            if self.called:
                return tuple(self.jitted(*args))
            self.called = not any(isinstance(a, jax.core.Tracer) for a in args)
            return tuple(with_stack_headroom(self.jitted, *args))
