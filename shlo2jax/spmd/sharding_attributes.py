"""Sharding annotations decoded: `mhlo.sharding` strings and Shardy (`sdy`) meshes and
shardings, as tile assignments.

* GSPMD: `mhlo.sharding = "{devices=[2,4]<=[8]}"` on arguments, results and `@Sharding`
  custom calls.
* Shardy: `#sdy.sharding<@mesh, [{"x"}, {}]>` on arguments/results and in
  `sdy.sharding_constraint`, over an `sdy.mesh @mesh = <["x"=2, "y"=4]>`.

Every sharding becomes a tile assignment (`Tiling`: the tile count of each dimension and the
device id of every tile copy). shlo2jax.spmd.mesh builds the program's device mesh on them.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple, Optional

import jax.numpy as jnp
import numpy as np

from shlo2jax import value_types as T
from shlo2jax.errors import ShardingError


# ---------------------------------------------------------------- tile assignments

class Tiling(NamedTuple):
    """`tiles[d]` blocks along dimension d; `devices` has shape tiles + (copies,): the
    device ids holding each block (copies > 1 when the value is partly replicated)."""
    tiles: tuple
    devices: np.ndarray

    @property
    def num_devices(self) -> int:
        return int(self.devices.size)

    def tile_of(self) -> np.ndarray:
        """[num devices]: the flat block index each device holds."""
        out = np.full(self.devices.max() + 1, -1, np.int64)
        blocks = np.arange(math.prod(self.tiles)).reshape(self.tiles + (1,))
        out[self.devices] = np.broadcast_to(blocks, self.devices.shape)
        return out

    def local_shape(self, shape) -> tuple:
        if len(shape) != len(self.tiles):
            raise ShardingError(f"a sharding of rank {len(self.tiles)} on a rank-{len(shape)} "
                                "value")
        for s, t in zip(shape, self.tiles):
            if s % t:
                raise ShardingError(f"dimension {s} is not divisible into {t} blocks (padded "
                                    "shards are not supported)")
        return tuple(s // t for s, t in zip(shape, self.tiles))

    def to_local(self, x, n: int):
        """[n, *local]: device k's block of the global value x, for every device k < n."""
        blocks = _blocks(x, self.tiles, self.local_shape(x.shape))
        tile_of = self.tile_of()
        if len(tile_of) < n or (tile_of[:n] < 0).any():
            raise ShardingError(f"the sharding does not place a block on each of {n} devices")
        return jnp.take(blocks, jnp.asarray(tile_of[:n]), axis=0)

    def to_global(self, y, shape):
        """The global value from the stacked device blocks y ([n, *local])."""
        first = self.devices.reshape(math.prod(self.tiles), -1)[:, 0]
        blocks = jnp.take(y, jnp.asarray(first), axis=0)
        local = tuple(y.shape[1:])
        rank = len(shape)
        x = blocks.reshape(self.tiles + local)
        # [t0, t1, ..., l0, l1, ...] -> [t0, l0, t1, l1, ...]
        x = x.transpose([i for d in range(rank) for i in (d, rank + d)])
        return x.reshape(shape)


def _blocks(x, tiles, local):
    rank = len(tiles)
    x = x.reshape(tuple(v for t, l in zip(tiles, local) for v in (t, l)))
    x = x.transpose([2 * d for d in range(rank)] + [2 * d + 1 for d in range(rank)])
    return x.reshape((math.prod(tiles),) + tuple(local))


def replicated(rank: int, n: int) -> Tiling:
    return Tiling((1,) * rank, np.arange(n).reshape((1,) * rank + (n,)))


# ---------------------------------------------------------------- mhlo.sharding strings

class HloSharding(NamedTuple):
    """A parsed `mhlo.sharding` string. kind: "replicated", "maximal", "manual", "tiled",
    "unknown" or "tuple" (`elements` then holds the parts)."""
    kind: str
    tiles: tuple = ()           # tile counts of the data dimensions
    devices: Optional[np.ndarray] = None  # shape tiles + (copies,)
    iota: Optional[tuple] = None  # (reshape_dims, transpose) of an iota tile assignment
    device: int = 0             # maximal
    manual_subgroup: bool = False
    elements: tuple = ()

    def tiling(self, rank: int, n: int) -> Optional[Tiling]:
        if self.kind in ("replicated", "maximal"):
            return replicated(rank, n)
        if self.kind == "tiled":
            if len(self.tiles) != rank:
                raise ShardingError(f"sharding of rank {len(self.tiles)} on a rank-{rank} value")
            return Tiling(self.tiles, self.devices)
        return None


_IOTA_RE = re.compile(r"<=\[([\d,\s]+)\](?:T\(([\d,\s]+)\))?")


def _ints(text) -> list:
    return [int(v) for v in re.findall(r"-?\d+", text)]


def _split_top(text: str) -> list:
    return [p for p in T.split_top_level(text) if p]


def parse_hlo_sharding(text: str) -> HloSharding:
    """`{replicated}`, `{maximal device=0}`, `{manual}`, `{unknown}`,
    `{devices=[2,4]<=[8]}`, `{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}`,
    `{devices=[2,1]0,1}`, `{devices=[1,2,2]<=[4] last_tile_dims={manual}}`, and tuples
    `{{...}, {...}}`."""
    s = text.strip()
    if not (s.startswith("{") and s.endswith("}")):
        raise ShardingError(f"not an HLO sharding: {text!r}")
    body = s[1:-1].strip()
    if body.startswith("{") or body == "":
        return HloSharding("tuple", elements=tuple(parse_hlo_sharding(p) for p in _split_top(body)))
    body = re.sub(r"\s*metadata=\{.*\}\s*$", "", body)
    body = re.sub(r",\s*$", "", body)
    if body.startswith(("mesh[", "single_device[")):
        return _parse_named_hlo_sharding(body, text)
    if body in ("replicated", "manual", "unknown"):
        return HloSharding(body)
    if body.startswith("maximal"):
        m = re.search(r"device=(\d+)", body)
        return HloSharding("maximal", device=int(m.group(1)) if m else 0)
    m = re.match(r"devices=\[([\d,\s]+)\]\s*(.*)$", body, re.S)
    if not m:
        raise ShardingError(f"unsupported HLO sharding {text!r}")
    dims = _ints(m.group(1))
    rest = m.group(2)
    iota = _IOTA_RE.match(rest)
    if iota:
        reshape = _ints(iota.group(1))
        perm = _ints(iota.group(2)) if iota.group(2) else list(range(len(reshape)))
        assignment = np.arange(math.prod(reshape)).reshape(reshape).transpose(perm)
        iota_form = (tuple(reshape), tuple(perm))
        rest = rest[iota.end():]
    else:
        ids = re.match(r"([\d,\s]+)", rest)
        if not ids:
            raise ShardingError(f"unsupported HLO sharding {text!r}")
        assignment = np.asarray(_ints(ids.group(1)))
        rest = rest[ids.end():]
        iota_form = _as_iota(assignment)
    assignment = assignment.reshape(dims)
    subgroups = []
    if "last_tile_dim_replicate" in rest:
        subgroups = ["replicated"]
    else:
        sub = re.search(r"last_tile_dims=\{([^}]*)\}", rest)
        if sub:
            subgroups = [t.strip() for t in sub.group(1).split(",") if t.strip()]
    if any(t not in ("replicated", "manual") for t in subgroups):
        raise ShardingError(f"unsupported subgroup types in {text!r}")
    rank = len(dims) - len(subgroups)
    tiles = tuple(dims[:rank])
    devices = assignment.reshape(tiles + (-1,))
    return HloSharding("tiled", tiles, devices, iota_form, manual_subgroup="manual" in subgroups)


def _parse_named_hlo_sharding(body: str, text: str) -> HloSharding:
    """XLA's named sharding (what jax >= 0.12's XLA writes in HLO, e.g. `--xla_dump_to`):
    `{mesh['x'=4,'y'=2], [{}, {'y'}]}`, `{mesh['a'=2], device_ids=([4,16]T(1,0)), [{'a'}],
    replicated={'c'}}`, `{mesh[...], replicated}`, `{mesh[...], manual}`,
    `{single_device[device_id=5]}` -> the tile assignment it stands for. Sub-axes
    (`'b':(2)2`), unreduced and partly manual values are not read."""
    single = re.fullmatch(r"single_device\[device_id=(\d+)\]", body)
    if single:
        return HloSharding("maximal", device=int(single[1]))
    head = re.match(r"mesh\[([^\]]*)\]\s*(?:,\s*|$)", body)
    if head is None:
        raise ShardingError(f"unsupported HLO sharding {text!r}")
    axes = tuple((n, int(v)) for n, v in re.findall(r"'([^']+)'\s*=\s*(\d+)", head[1]))
    rest = body[head.end():]
    ids = None
    listed = re.match(r"device_ids=\((.*?)\)\s*(?:,\s*|$)", rest) or \
        re.match(r"device_ids=\[([\d,\s]*)\]\s*(?:,\s*|$)", rest)
    if listed:
        n = math.prod(v for _, v in axes)
        iota = re.fullmatch(r"\s*\[([\d,\s]+)\](?:T\(([\d,\s]+)\))?\s*", listed[1])
        if iota:
            reshape = _ints(iota[1])
            perm = _ints(iota[2]) if iota[2] else list(range(len(reshape)))
            ids = np.arange(n).reshape(reshape).transpose(perm).reshape(-1)
        else:
            ids = np.asarray(_ints(listed[1]))
        rest = rest[listed.end():]
    rest = rest.strip()
    if rest in ("replicated", "manual") or not axes:
        return HloSharding(rest if rest in ("replicated", "manual") else "replicated")
    if not rest.startswith("["):
        raise ShardingError(f"unsupported HLO sharding {text!r}")
    close = rest.index("]")
    extra = rest[close + 1:]
    if ":" in rest or "unreduced" in extra or "manual" in extra:
        raise ShardingError(f"unsupported HLO sharding (sub-axes, unreduced or partly "
                            f"manual) {text!r}")
    dims = tuple(tuple(re.findall(r"'([^']+)'", d)) for d in _split_top(rest[1:close]))
    mesh = SdyMesh(axes, None if ids is None else tuple(int(i) for i in ids))
    tiling = sdy_tiling(SdySharding(mesh, dims), mesh)
    flat = tiling.devices.reshape(-1)
    names = [a for a, _ in axes]
    order = [names.index(a) for d in dims for a in d]
    perm = order + [i for i in range(len(names)) if i not in order]
    iota_form = (tuple(v for _, v in axes), tuple(perm)) if ids is None else _as_iota(flat)
    return HloSharding("tiled", tuple(tiling.tiles), tiling.devices, iota_form)


def _as_iota(assignment: np.ndarray) -> Optional[tuple]:
    if (assignment == np.arange(assignment.size)).all():
        return ((int(assignment.size),), (0,))
    return None


# ---------------------------------------------------------------- sdy meshes and shardings

class SdyMesh(NamedTuple):
    axes: tuple                  # ((name, size), ...)
    device_ids: Optional[tuple]  # None: iota

    @property
    def size(self) -> int:
        return math.prod(size for _, size in self.axes)

    def device_array(self) -> np.ndarray:
        ids = np.arange(self.size) if self.device_ids is None else np.asarray(self.device_ids)
        return ids.reshape(tuple(size for _, size in self.axes))


class SdySharding(NamedTuple):
    mesh: object                 # a mesh name (str) or an inline SdyMesh
    dims: tuple                  # per dimension: the axis names it is split over (major first)


def parse_sdy_mesh(text: str) -> SdyMesh:
    """`<["x"=2, "y"=4]>`, `#sdy.mesh<["a"=2], device_ids=[1, 0]>`, `<[], device_ids=[0]>`."""
    s = text.strip()
    s = s[len("#sdy.mesh"):] if s.startswith("#sdy.mesh") else s
    axes = tuple((name, int(size)) for name, size in re.findall(r'"([^"]+)"\s*=\s*(\d+)', s))
    ids = re.search(r"device_ids\s*=\s*\[([\d,\s]*)\]", s)
    return SdyMesh(axes, tuple(_ints(ids.group(1))) if ids else None)


class MeshAxesGroups(NamedTuple):
    """StableHLO 1.16's `#stablehlo.replica_group_mesh_axes<mesh = @m, axes = [...]>`
    (jax >= 0.12 writes a shard_map's collectives so): the process groups of a collective
    named by axes of a `sdy.mesh`, not listed as process ids."""
    mesh: str       # the sdy.mesh symbol
    axes: tuple     # the axis names, major first
    text: str

    def groups(self, mesh: SdyMesh) -> list:
        """The device-id groups: one per combination of the other axes (in mesh order),
        each the devices along `axes` (major first), ids from the mesh's device order."""
        sizes = dict(mesh.axes)
        unknown = [a for a in self.axes if a not in sizes]
        if unknown:
            raise ShardingError(f"{self.text}: sdy.mesh @{self.mesh} has no axis {unknown[0]!r}")
        names = [name for name, _ in mesh.axes]
        rest = [n for n in names if n not in self.axes]
        ids = mesh.device_array().transpose([names.index(n) for n in rest + list(self.axes)])
        size = math.prod(sizes[a] for a in self.axes)
        return [[int(i) for i in row] for row in ids.reshape(-1, size)]


_MESH_AXES_RE = re.compile(r'^#stablehlo\.replica_group_mesh_axes<mesh\s*=\s*@([\w.$\-]+),\s*'
                           r'axes\s*=\s*\[(.*)\]>$', re.S)


def parse_mesh_axes_groups(text: str) -> Optional[MeshAxesGroups]:
    """`#stablehlo.replica_group_mesh_axes<...>` -> MeshAxesGroups; None for any other text
    and for sub-axes (`sub_axis_info`), which are not read."""
    found = _MESH_AXES_RE.match(text.strip())
    if found is None or "sub_axis_info" in found[2]:
        return None
    refs = re.findall(r'#stablehlo\.axis_ref<name\s*=\s*"([^"]+)"\s*>', found[2])
    if len(refs) != found[2].count("axis_ref<"):
        return None
    return MeshAxesGroups(found[1], tuple(refs), text.strip())


def parse_sdy_sharding(text: str) -> SdySharding:
    """`#sdy.sharding<@mesh, [{"x"}, {}], replicated={"y"}>` or the bare `<@mesh, [...]>`."""
    s = text.strip()
    s = s[len("#sdy.sharding"):] if s.startswith("#sdy.sharding") else s
    s = s.strip()
    if s.startswith("<"):
        s = s[1:-1] if s.endswith(">") else s[1:]
    parts = _split_top(s)
    if len(parts) < 2:
        raise ShardingError(f"cannot parse the sdy sharding {text!r}")
    head = parts[0]
    mesh = head[1:] if head.startswith("@") else parse_sdy_mesh(head.replace("mesh", "", 1))
    dims_text = parts[1].strip()
    if not (dims_text.startswith("[") and dims_text.endswith("]")):
        raise ShardingError(f"cannot parse the sdy sharding {text!r}")
    dims = []
    for d in _split_top(dims_text[1:-1]):
        if ":" in d:
            raise ShardingError(f"sub-axes in {text!r} are not supported")
        dims.append(tuple(re.findall(r'"([^"]+)"', d)))
    return SdySharding(mesh, tuple(dims))


def parse_sdy_shardings(text: str) -> list:
    """`#sdy.sharding_per_value<[<@mesh, ...>, ...]>` -> [SdySharding, ...]."""
    s = text.strip()
    start, end = s.find("["), s.rfind("]")
    return [parse_sdy_sharding(p) for p in _split_top(s[start + 1:end])]


def sdy_tiling(sharding: SdySharding, mesh: SdyMesh, axes: Optional[set] = None) -> Tiling:
    """The tile assignment of an sdy sharding (only the mesh axes in `axes`, if given)."""
    names = [name for name, _ in mesh.axes]
    sizes = dict(mesh.axes)
    order, tiles = [], []
    for dim in sharding.dims:
        used = [a for a in dim if axes is None or a in axes]
        for a in used:
            if a not in sizes:
                raise ShardingError(f"axis {a!r} is not in the mesh {mesh}")
        order += [names.index(a) for a in used]
        tiles.append(math.prod(sizes[a] for a in used))
    rest = [i for i in range(len(names)) if i not in order]
    devices = mesh.device_array().transpose(order + rest).reshape(tuple(tiles) + (-1,))
    return Tiling(tuple(tiles), devices)


# ---------------------------------------------------------------- reading a value's sharding

def attribute_text(value) -> Optional[str]:
    """A sharding attribute's text (a decoded str, or the MLIR text of an Opaque one)."""
    if value is None:
        return None
    return value if isinstance(value, str) else getattr(value, "text", str(value))


def value_sharding(attrs: dict):
    """The sharding in an argument/result/op attribute dict: an SdySharding, an
    HloSharding, or None."""
    sdy = attrs.get("sdy.sharding")
    if sdy is not None:
        text = attribute_text(sdy)
        return parse_sdy_shardings(text)[0] if "sharding_per_value" in text \
            else parse_sdy_sharding(text)
    frontend = attrs.get("mhlo.frontend_attributes")
    if isinstance(frontend, dict) and isinstance(frontend.get("xla.sdy.sharding"), str):
        text = frontend["xla.sdy.sharding"].replace("\\22", '"')
        return parse_sdy_shardings(text)[0] if "sharding_per_value" in text \
            else parse_sdy_sharding(text)
    hlo = attrs.get("mhlo.sharding")
    if hlo is not None:
        return parse_hlo_sharding(attribute_text(hlo))
    return None


def value_sharding_or_none(attrs):
    """`value_sharding`, or None where the sharding cannot be read."""
    try:
        return value_sharding(attrs)
    except ValueError:  # ShardingError, or a malformed assignment
        return None
