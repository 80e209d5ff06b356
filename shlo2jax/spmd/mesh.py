"""Device meshes: a grid of processes' (`make_mesh`) and a sharded program's, with its
shardings (the manual regions: shlo2jax.spmd.manual_regions).

A program exported from a sharded `jax.jit` declares how its values are laid out
over devices, in one of two notations:

* GSPMD: `mhlo.sharding = "{devices=[2,4]<=[8]}"` strings on arguments, results and
  `@Sharding` custom calls; a `shard_map` is an `@SPMDFullToShardShape` ...
  `@SPMDShardToFullShape` pair around per-device code.
* Shardy: an `sdy.mesh @mesh = <["x"=2, "y"=4]>`, `#sdy.sharding<@mesh, [{"x"}, {}]>`
  on arguments/results and in `sdy.sharding_constraint`; a `shard_map` is an
  `sdy.manual_computation` region (serialized exports may spell it with
  `@xla.sdy.GlobalToLocalShape` / `@xla.sdy.LocalToGlobalShape` custom calls).

Every sharding is first turned into a tile assignment (shlo2jax.spmd.sharding_attributes:
`Tiling`, the tile count of each dimension and the device id of every tile copy).
`ShardingContext` builds one
`jax.sharding.Mesh` for the program (the `sdy.mesh`, or for GSPMD the coarsest mesh
whose axes express every iota tile assignment of the program) and turns tilings into
`NamedSharding`s on it; `named_shardings` gives those of a function's arguments or results
(what the `Sharded` executable places its arguments with).

Manual regions (shlo2jax.spmd.manual_regions) run as a `shard_map` over the grid of processes
of `shlo2jax.spmd.grid`, on the mesh of `make_mesh`: axes AXES ("replicas", "partitions"),
process (r, p) on `jax.devices()[r * num_partitions + p]`.
"""

from __future__ import annotations

import math
import re
from typing import Optional

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from shlo2jax import value_types as T
from shlo2jax.errors import ShardingError, SpmdUnsupported
from shlo2jax.spmd.sharding_attributes import (HloSharding, SdyMesh, SdySharding, Tiling,
                                               parse_sdy_mesh, sdy_tiling,
                                               value_sharding_or_none)


AXES = ("replicas", "partitions")  # the mesh axes of a grid of processes


def make_mesh(num_replicas: int, num_partitions: int) -> Mesh:
    """The grid's mesh: the first num_replicas * num_partitions of `jax.devices()`, which
    are every process's devices under `jax.distributed`."""
    n = num_replicas * num_partitions
    devices = jax.devices()
    if len(devices) < n:
        raise SpmdUnsupported(
            f"a {num_replicas}x{num_partitions} grid of processes needs {n} devices for the "
            f"collectives, {too_few_devices(n)}")
    return Mesh(np.array(devices[:n]).reshape(num_replicas, num_partitions), AXES)


def too_few_devices(needed: int) -> str:
    """How many devices there are and how to get more."""
    have, processes = len(jax.devices()), jax.process_count()
    where = f" across {processes} processes" if processes > 1 else ""
    per_process = -(-needed // processes)
    more = "" if processes > 1 else ", or spread them over processes with jax.distributed"
    return (f"{have} available{where} (on CPU set XLA_FLAGS="
            f"--xla_force_host_platform_device_count={per_process} before importing jax{more})")


def module_meshes(mlir_module, module_attrs: dict) -> dict:
    """The `sdy.mesh` symbols of a module (and the `xla.sdy.meshes` frontend attribute of
    serialized Shardy exports), by name."""
    meshes = {}
    if mlir_module is not None:
        for view in mlir_module.body.operations:
            op = view.operation
            if op.name == "sdy.mesh":
                name = op.attributes["sym_name"].value
                meshes[name] = parse_sdy_mesh(str(op.attributes["mesh"]))
    frontend = module_attrs.get("mhlo.frontend_attributes") or {}
    text = frontend.get("xla.sdy.meshes") if isinstance(frontend, dict) else None
    if isinstance(text, str):
        for name, body in re.findall(r'(\w+)\s*=\s*#sdy\.mesh(<[^>]*>)', text.replace('\\22', '"')):
            meshes.setdefault(name, parse_sdy_mesh(body))
    return meshes


# ---------------------------------------------------------------- the program's mesh

def num_partitions(module, mlir_module=None, meshes: Optional[dict] = None) -> int:
    """mhlo.num_partitions; older exports do not say: the devices their meshes and
    shardings name (1 when none)."""
    declared = int(module.attrs.get("mhlo.num_partitions", 0))
    if declared:
        return declared
    if meshes is None:
        meshes = module_meshes(mlir_module, module.attrs)
    return max([m.size for m in meshes.values()] + [
        _devices_named(value_sharding_or_none(a)) for a in _sharding_attrs(module)], default=1)


def _refine(iotas, n) -> Optional[list]:
    """The coarsest mesh axis sizes (major first) over device ids 0..n-1 on which every
    iota tile assignment `(reshape_dims, transpose, tile_dims)` is a split of axes."""
    cuts = {1, n}
    for item in iotas:
        reshape, perm, dims = item
        strides = [math.prod(reshape[i + 1:]) for i in range(len(reshape))]
        cuts.update(strides)
        bounds = set(np.cumprod(dims).tolist())
        acc = 1
        for k in perm:
            size, stride = reshape[k], strides[k]
            for b in sorted(bounds):
                if acc < b < acc * size:
                    if b % acc or size % (b // acc):
                        return None
                    cuts.add(stride * (size // (b // acc)))
            acc *= size
    ordered = sorted(cuts)
    for a, b in zip(ordered, ordered[1:]):
        if b % a:
            return None
    return [b // a for a, b in zip(ordered, ordered[1:])][::-1]


class ShardingContext:
    """One program's device mesh and the translation of its shardings onto it.

    `num_devices` is mhlo.num_replicas * mhlo.num_partitions; device id k is
    `jax.devices()[k]` (the partition id of the process running there)."""

    def __init__(self, module, mlir_module=None):
        self.module = module
        attrs = module.attrs
        self.meshes = module_meshes(mlir_module, attrs)
        self.num_replicas = int(attrs.get("mhlo.num_replicas", 1))
        self.num_partitions = num_partitions(module, meshes=self.meshes)
        self.num_devices = self.num_replicas * self.num_partitions
        main = [m for m in self.meshes.values() if m.size == self.num_devices and m.axes]
        self.sdy_mesh: Optional[SdyMesh] = main[0] if main else None
        self._mesh = None
        self._gspmd_axes = None

    # -- meshes

    def mesh_of(self, sharding: SdySharding) -> SdyMesh:
        if isinstance(sharding.mesh, SdyMesh):
            return sharding.mesh
        try:
            return self.meshes[sharding.mesh]
        except KeyError:
            raise ShardingError(f"no sdy.mesh @{sharding.mesh}") from None

    def _gspmd_refinement(self) -> list:
        if self._gspmd_axes is None:
            reshapes = []
            for attrs in _sharding_attrs(self.module):
                _collect_iota(value_sharding_or_none(attrs), reshapes)
            sizes = _refine(reshapes, self.num_devices) or [self.num_devices]
            self._gspmd_axes = [s for s in sizes if s > 1] or [1]
        return self._gspmd_axes

    @property
    def mesh(self):
        """The `jax.sharding.Mesh` of the program's shardings."""
        if self._mesh is None:
            devices = jax.devices()  # every process's, under jax.distributed
            if len(devices) < self.num_devices:
                raise ShardingError(
                    f"the program is partitioned over {self.num_devices} devices, "
                    f"{too_few_devices(self.num_devices)}")
            devices = np.array(devices[:self.num_devices], dtype=object)
            if self.sdy_mesh is not None:
                names = tuple(name for name, _ in self.sdy_mesh.axes)
                self._mesh = Mesh(devices[self.sdy_mesh.device_array()], names)
            else:
                sizes = self._gspmd_refinement()
                names = tuple(f"d{i}" for i in range(len(sizes)))
                self._mesh = Mesh(devices.reshape(sizes), names)
        return self._mesh

    # -- shardings

    def tiling(self, sharding, rank: int, axes: Optional[set] = None) -> Optional[Tiling]:
        if sharding is None:
            return None
        if isinstance(sharding, SdySharding):
            return sdy_tiling(sharding, self.mesh_of(sharding), axes)
        return sharding.tiling(rank, self.num_devices)

    def named(self, sharding, rank: int, open_dims: bool = False):
        """A `NamedSharding` on `self.mesh`, or None when the sharding says nothing
        (unknown, manual, a tuple) or cannot be expressed on the mesh. `open_dims`:
        unsharded dimensions are left to the compiler (PartitionSpec.UNCONSTRAINED)."""
        named = self._named(sharding, rank)
        if named is None or not open_dims:
            return named
        spec = tuple(named.spec) + (None,) * (rank - len(named.spec))
        return NamedSharding(named.mesh, PartitionSpec(*[
            PartitionSpec.UNCONSTRAINED if d is None else d for d in spec]))

    def _named(self, sharding, rank: int):
        if sharding is None:
            return None
        mesh = self.mesh
        if isinstance(sharding, SdySharding):
            if self.sdy_mesh is not None and self.mesh_of(sharding) == self.sdy_mesh:
                if len(sharding.dims) != rank:
                    return None
                return NamedSharding(mesh, PartitionSpec(*[
                    None if not d else d[0] if len(d) == 1 else tuple(d) for d in sharding.dims]))
            tiling = self.tiling(sharding, rank)
        elif sharding.kind in ("replicated", "maximal"):
            return NamedSharding(mesh, PartitionSpec())
        elif sharding.kind != "tiled" or sharding.manual_subgroup:
            return None
        else:
            tiling = sharding.tiling(rank, self.num_devices)
        spec = self._spec(tiling)
        return None if spec is None else NamedSharding(mesh, PartitionSpec(*spec))

    def _spec(self, tiling: Tiling) -> Optional[list]:
        """The partition spec on the mesh whose tile assignment is exactly `tiling`."""
        mesh = self.mesh
        names, sizes = list(mesh.axis_names), [mesh.shape[a] for a in mesh.axis_names]
        index = {d: k for k, d in enumerate(jax.devices()[:self.num_devices])}
        ids = np.vectorize(lambda d: index[d], otypes=[np.int64])(mesh.devices)
        # the mesh is small: try every way of splitting dimensions over its axes
        for assign in _axis_assignments(sizes, tiling.tiles):
            used = [a for dim in assign for a in dim]
            rest = [a for a in range(len(names)) if a not in used]
            devices = ids.transpose(used + rest).reshape(tiling.tiles + (-1,))
            if np.array_equal(np.sort(devices, axis=-1), np.sort(tiling.devices, axis=-1)):
                return [None if not d else names[d[0]] if len(d) == 1
                        else tuple(names[a] for a in d) for d in assign]
        return None


def named_shardings(program, attrs, types) -> tuple:
    """The `NamedSharding` on the program's mesh of each value with these attributes and types
    (None where the program leaves it open; all None for a one-device program)."""
    context = program.sharding
    if context.num_devices <= 1:
        return (None,) * len(types)
    out = []
    for a, t in zip(attrs, types):
        rank = len(t.shape) if isinstance(t, T.TensorType) else None
        out.append(None if rank is None else context.named(value_sharding_or_none(a), rank))
    return tuple(out)


def _sharding_attrs(module):
    """The attribute dicts that may hold a sharding: arguments, results, @Sharding ops."""
    for fdef in module.functions.values():
        yield from fdef.arg_attrs
        yield from fdef.result_attrs
    for op in module.ops:
        if custom_call_target(op) == "Sharding":
            yield op.attrs


def _devices_named(sharding) -> int:
    if isinstance(sharding, HloSharding):
        if sharding.kind == "tiled":
            return int(sharding.devices.max()) + 1
        if sharding.kind == "maximal":
            return sharding.device + 1
        return max([_devices_named(e) for e in sharding.elements], default=1)
    return 1


def _collect_iota(sharding, out):
    if isinstance(sharding, HloSharding):
        if sharding.kind == "tiled" and sharding.iota is not None:
            out.append(sharding.iota + (tuple(sharding.devices.shape),))
        for e in sharding.elements:
            _collect_iota(e, out)


def _axis_assignments(sizes, tiles):
    """Every way to give each dimension a sequence of distinct mesh axes whose sizes
    multiply to its tile count."""
    def rec(d, used):
        if d == len(tiles):
            yield []
            return
        for combo in _combos(sizes, tiles[d], used):
            for tail in rec(d + 1, used | set(combo)):
                yield [combo] + tail
    yield from rec(0, set())


def _combos(sizes, target, used, prefix=()):
    product = math.prod(sizes[a] for a in prefix)
    if product == target:
        yield tuple(prefix)
    if product >= target:
        return
    for a in range(len(sizes)):
        if a not in used and a not in prefix and sizes[a] > 1:
            yield from _combos(sizes, target, used, prefix + (a,))


# ---------------------------------------------------------------- GSPMD manual regions


def custom_call_target(op) -> Optional[str]:
    """The target of a decoded custom call op; None for any other op."""
    if op.name in ("stablehlo.custom_call", "mhlo.custom_call"):
        return op.attrs.get("call_target_name")
    return None
