"""The SPMD executable: a program partitioned over several devices (mhlo.num_replicas *
mhlo.num_partitions > 1) runs under `jax.jit` on its mesh with its declared shardings.

The declared `mhlo.sharding` / `sdy.sharding`s become `NamedSharding`s on the program's mesh
(`shlo2jax.spmd.mesh`: `ShardingContext`, `named_shardings`) when jax has that many devices;
the results are arrays with those shardings. With fewer devices (decided at load:
`executables.choose`), a program whose shardings are only annotations runs on one device,
translated; one with manual (shard_map) regions cannot run (`TooFewDevices`).
"""

from __future__ import annotations

import functools

import jax

from shlo2jax import compat
from shlo2jax.errors import ShardingError
from shlo2jax.spmd.mesh import too_few_devices
from shlo2jax.translate import Translator, TranslatorMode


def enough_devices(program) -> bool:
    """Whether jax has the devices `program` is partitioned over (every process's)."""
    return len(jax.devices()) >= program.sharding.num_devices


class Sharded:
    """Calls place the arguments on the program's mesh and run it partitioned."""
    lowering = "translate"

    def __init__(self, function):
        self.function = function

    @functools.cached_property
    def jitted(self):
        fn = self.function
        program = fn.program
        translator = Translator(program.module, program.options,
                                TranslatorMode(sharding=program.sharding))
        return jax.jit(translator.function_body(fn.definition),
                       in_shardings=fn.in_shardings, out_shardings=fn.out_shardings)

    def __call__(self, *args) -> tuple:
        placed = [a if s is None else jax.device_put(a, s)
                  for a, s in zip(args, self.function.in_shardings)]
        with compat.enable_x64():
            return tuple(self.jitted(*placed))


class TooFewDevices:
    """A program with manual (shard_map) regions, loaded where jax has fewer devices than it is
    partitioned over: each call says so (the program still loads, for its signature, its ops
    and the tools)."""
    lowering = "translate"

    def __init__(self, function):
        needed = function.program.sharding.num_devices
        self.message = (f"the program is partitioned over {needed} devices, "
                        f"{too_few_devices(needed)}")

    def __call__(self, *args) -> tuple:
        raise ShardingError(self.message)
