"""Running a program as its grid of processes (replicas x partitions) on a device mesh.

    outs = run_spmd(program["main"], per_process_args, num_replicas=2, num_partitions=2)

Every process is one shard of a `jax.shard_map` over a `Mesh` with axes
("replicas", "partitions"); process (r, p) has the flat id `r * num_partitions + p` and
gets `per_process_args[r * num_partitions + p]`. See shlo2jax/spmd/grid.py for how grids run.

The mesh needs num_replicas * num_partitions devices. On CPU, set
`XLA_FLAGS=--xla_force_host_platform_device_count=8` before jax is imported.

Under `jax.distributed` the mesh is made of the global devices (`jax.devices()`), so
the grid spans the processes; like any multi-controller JAX code, every process makes
the same call, with the arguments of the whole grid, and gets every grid process's
outputs back, replicated on every device so each process can read them.
"""

from __future__ import annotations

from typing import Sequence

import jax

from shlo2jax import compat
from shlo2jax.errors import SpmdUnsupported  # noqa: F401  (what a grid that cannot run raises)
from shlo2jax.spmd.grid import grid_function


def run_spmd(function, per_process_args: Sequence[Sequence], num_replicas: int = 1,
             num_partitions: int = 1) -> list:
    """Runs `function` (a `shlo2jax.Function`, or a grid `[[f, ...], ...]` of them, one per
    replica row and partition column) as every process of the replicas x partitions grid.
    `per_process_args[r * num_partitions + p]` are process (r, p)'s arguments; returns one
    list of outputs per process, in the same order."""
    if isinstance(function, (list, tuple)):
        grid = [[f.definition for f in row] for row in function]
        program = function[0][0].program
        if (len(grid), len(grid[0])) != (num_replicas, num_partitions):
            raise ValueError(f"a {len(grid)}x{len(grid[0])} grid of functions for "
                             f"{num_replicas}x{num_partitions} processes")
    else:
        grid = [[function.definition] * num_partitions for _ in range(num_replicas)]
        program = function.program
    run, _, _ = grid_function(program.module, program.options, grid)
    with compat.enable_x64():
        outs = jax.jit(run)([list(a) for a in per_process_args])
    return [list(o) for o in outs]
