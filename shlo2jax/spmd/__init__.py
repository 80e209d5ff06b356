"""SPMD: a program over several devices.

* `mesh`: the device meshes (`make_mesh`, a grid's; `ShardingContext`, a sharded program's)
  and the `NamedSharding`s of a sharded program's values (`named_shardings`);
* `sharding_attributes`: the `mhlo.sharding` / `sdy.sharding` annotations, decoded;
* `manual_regions`: a sharded export's manual (shard_map) regions, folded at decode;
* `grid`: a program as a grid of processes (replicas x partitions) on a mesh;
* `groups`: the spec's process groups of a collective, and how it runs on a grid;
* `run`: `run_spmd`, a loaded function run as a grid of processes.

The `Sharded` executable (a sharded program called on its mesh) is in
shlo2jax/executables/sharded.py.
"""

from shlo2jax.spmd.run import run_spmd

__all__ = ["run_spmd"]
