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
        # keep_unused: the module's arguments are what it takes (an export's module has
        # dropped its unused ones already), and jax's pruning of the unused ones at lowering is
        # a dead-code pass over the whole traced program, loops' bodies included (jax 0.12:
        # about 0.15 CPU s of a 52,000-op program of nested loops' 1.0 s lowering)
        fn = self.function
        return jax.jit(fn.taking_storage_integers(fn.program.translator.function_body(
            fn.definition)), keep_unused=True)

    def __call__(self, *args) -> tuple:
        # 64-bit types run without the user enabling jax_enable_x64. The collector is paused
        # for the whole trace, jax's building of the jaxpr after the body returned included
        # (its full passes over the trace's objects cost ~25% of a 50k-op trace, freeing
        # nothing); a call that only runs pays two flag flips.
        with compat.enable_x64(), gc_paused():
            return tuple(self.jitted(*args))
