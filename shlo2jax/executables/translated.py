"""The translated executable: the function's ops traced as `jax.lax` calls, under one `jax.jit`.

The default way a function runs, and the one every transformation traces.
"""

from __future__ import annotations

import functools

import jax

from shlo2jax import compat
from shlo2jax.memory import gc_paused


class Translated:
    """Calls run the translation of the function, jitted once (see `shlo2jax.translate`)."""
    lowering = "translate"

    def __init__(self, function):
        self.function = function

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
        with compat.enable_x64(), gc_paused():
            return tuple(self.jitted(*args))
