"""The SPMD executable: a program partitioned over several devices (mhlo.num_replicas *
mhlo.num_partitions > 1) runs under `jax.jit` on its mesh with its declared shardings.

The declared `mhlo.sharding` / `sdy.sharding`s become `NamedSharding`s on the program's mesh
(`shlo2jax.spmd.mesh`: `ShardingContext`, `named_shardings`) when jax has that many devices;
the results are arrays with those shardings. With fewer devices, a program whose shardings
are only annotations runs on one device, translated; one with manual (shard_map) regions
raises.
"""

from __future__ import annotations

import functools

import jax

from shlo2jax import compat
from shlo2jax.executables.translated import Translated
from shlo2jax.translate import Translator, TranslatorMode


class Sharded:
    """Calls place the arguments on the program's mesh and run it partitioned."""
    lowering = "translate"

    def __init__(self, function):
        self.function = function
        self._one_device = Translated(function)

    @functools.cached_property
    def jitted(self):
        fn = self.function
        program = fn.program
        translator = Translator(program.module, program.options,
                                TranslatorMode(sharding=program.sharding))
        return jax.jit(translator.function_body(fn.definition),
                       in_shardings=fn.in_shardings, out_shardings=fn.out_shardings)

    def _enough_devices(self) -> bool:
        program = self.function.program
        if len(jax.devices()) >= program.sharding.num_devices:
            return True
        if program.has_manual_regions:
            program.sharding.mesh  # noqa: B018 - raises: too few devices
        return False  # annotations only: the same values on one device

    def __call__(self, *args) -> tuple:
        if not self._enough_devices():
            return self._one_device(*args)
        placed = [a if s is None else jax.device_put(a, s)
                  for a, s in zip(args, self.function.in_shardings)]
        with compat.enable_x64():
            return tuple(self.jitted(*placed))
