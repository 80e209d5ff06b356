"""Collectives: all_reduce, all_gather, reduce_scatter, all_to_all, collective_permute,
collective_broadcast, replica_id, partition_id, and the interpreter's run_parallel.

A program runs as a grid of processes (replicas x partitions). In a grid (shlo2jax.spmd.grid)
every process is one shard of a `shard_map` over the mesh axes ("replicas", "partitions"),
and a process's flat id is `replica * num_partitions + partition`, the order of
`lax.axis_index(("replicas", "partitions"))`. The spec turns `replica_groups` (or
`source_target_pairs`) into groups of processes according to the op's mode
(cross_replica, cross_partition, cross_replica_and_partition, flattened_ids); every group is a
list of flat ids (shlo2jax.spmd.groups: the modes, the groups, how an op runs on them), and
the collective is one lax collective over both axes with those groups as
`axis_index_groups`, or, where lax cannot express the group layout
(ragged or partial groups, a non-monoid reduction, broadcast), the exact general path:
all_gather the whole grid, then take the group's members in order.

Outside a grid, a 1x1 program (mhlo.num_replicas = mhlo.num_partitions = 1,
the default) is one process: the collectives act on groups of one process.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import io_callback

from shlo2jax import host_transfers
from shlo2jax import value_types as T
from shlo2jax.attributes import Opaque
from shlo2jax.errors import ShardingError, SpmdUnsupported, UnsupportedError
from shlo2jax.ops._common import single_or_tuple
from shlo2jax.registry import Unsupported, register_op
from shlo2jax.spmd import grid as G
from shlo2jax.spmd import sharding_attributes as S
from shlo2jax.spmd.grid import ProcessGrid
from shlo2jax.spmd.groups import Plan, beyond_grid, group_mode, make_plan, process_groups
from shlo2jax.spmd.mesh import AXES

_MONOIDS = {"stablehlo.add": "add", "mhlo.add": "add", "stablehlo.maximum": "max",
            "mhlo.maximum": "max", "stablehlo.minimum": "min", "mhlo.minimum": "min"}
_PROCESS_ID_OPS = frozenset({"stablehlo.replica_id", "mhlo.replica_id", "stablehlo.partition_id",
                             "mhlo.partition_id"})
_LAX_REDUCE = {"add": lax.psum, "max": lax.pmax, "min": lax.pmin}


# ---------------------------------------------------------------- params

@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class Grouped:
    """A collective over the spec's process groups: its mode and `replica_groups`, and for
    a reduction the body when it is one add / max / min. `plans` keeps, per grid shape, how
    the op runs there (`plan_for`)."""
    mode: str
    groups: list
    monoid: Optional[str]
    plans: dict = dataclasses.field(default_factory=dict, init=False, repr=False)

    def beyond_grid(self, num_replicas: int, num_partitions: int) -> Optional[str]:
        """Why the groups name more processes than the grid has, or None (see
        shlo2jax.spmd.grid.plain_call_problems)."""
        if isinstance(self.groups, S.MeshAxesGroups):
            return None  # (the devices of the program's own mesh)
        ids = [i for g in self.groups for i in g]
        return beyond_grid(self.mode, ids, max((len(g) for g in self.groups), default=0),
                           "replica_groups", self.groups, num_replicas, num_partitions)


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class ReduceScatter(Grouped):
    dim: int


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class AllToAll(Grouped):
    split: int
    concat: int
    count: int


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class Permute:
    """collective_permute: its mode and source_target_pairs; `flat` keeps the pairs as flat
    process ids per grid shape."""
    mode: str
    pairs: list
    flat: dict = dataclasses.field(default_factory=dict, init=False, repr=False)

    def beyond_grid(self, num_replicas: int, num_partitions: int) -> Optional[str]:
        ids = [i for pair in self.pairs for i in pair]
        return beyond_grid(self.mode, ids, None, "source_target_pairs", self.pairs,
                           num_replicas, num_partitions)


# ---------------------------------------------------------------- process groups

def _id_groups(groups) -> list:
    """`replica_groups` without the -1 padding of ragged groups."""
    if isinstance(groups, Opaque):
        # StableHLO 1.16's `#stablehlo.replica_group_mesh_axes<mesh = @m, axes = [...]>`
        # (jax >= 0.12's shard_map collectives): groups named by the axes of a Shardy mesh,
        # resolved into process ids where the op runs (plan_for: the program's meshes)
        named = S.parse_mesh_axes_groups(groups.text)
        if named is not None:
            return named
        construct = groups.text.split("<", 1)[0]
        raise Unsupported(f"replica_groups given as {construct} (not a list of process ids) "
                          f"are not supported: {groups.text}")
    arr = np.asarray(groups, dtype=np.int64)
    if arr.size == 0:
        return []
    arr = arr.reshape(arr.shape[0], -1)
    return [[int(i) for i in row if i >= 0] for row in arr]


def grid(ctx, op) -> ProcessGrid:
    """The grid this op runs in: the spmd run's, or the module's when it is 1x1."""
    current = ctx.translator.mode.grid
    if current is not None:
        if not current.in_mesh and op.name not in _PROCESS_ID_OPS and \
                current.num_replicas * current.num_partitions > 1:
            raise RuntimeError(f"{op.name} in a process run on its own (no mesh axes)")
        return current
    attrs = ctx.translator.module.attrs
    R, P = int(attrs.get("mhlo.num_replicas", 1)), int(attrs.get("mhlo.num_partitions", 1))
    if R * P != 1:
        raise RuntimeError(f"{op.name} in a {R}x{P} program: run it with "
                           "shlo2jax.spmd.run_spmd (one process per replica and partition)")
    return ProcessGrid(1, 1, in_mesh=False)


def plan_for(ctx, op, lax_ok: bool = True) -> Plan:
    """The op's plan on the current grid, computed once per grid shape."""
    g = grid(ctx, op)
    key = (g.num_replicas, g.num_partitions, g.in_mesh)
    plans = op.params.plans
    plan = plans.get(key)
    if plan is None:
        groups = op.params.groups
        if isinstance(groups, S.MeshAxesGroups):
            groups = _mesh_axes_ids(ctx, op, groups, g)
        groups = process_groups(op.params.mode, groups, g.num_replicas, g.num_partitions)
        plan = make_plan(groups, g.num_replicas * g.num_partitions, g.in_mesh, lax_ok)
        plans[key] = plan
    return plan


def _mesh_axes_ids(ctx, op, named: "S.MeshAxesGroups", g: ProcessGrid) -> list:
    """Groups named by the axes of a Shardy mesh -> lists of device ids, which are the
    ids of the op's mode (a program exported with a mesh has one replica: device id =
    partition id = flat id)."""
    sc = ctx.translator.mode.sharding
    mesh = (getattr(sc, "meshes", None) or {}).get(named.mesh)
    if mesh is None:
        if g.num_replicas * g.num_partitions == 1:
            return [[0]]
        raise ValueError(f"{op.name}: replica groups over the axes of sdy.mesh @{named.mesh}, "
                         "which this run of the program does not know (run the program on "
                         "its mesh: a plain call)")
    if mesh.size != g.num_replicas * g.num_partitions:
        raise ValueError(f"{op.name}: replica groups over sdy.mesh @{named.mesh} "
                         f"({mesh.size} devices) in a {g.num_replicas}x{g.num_partitions} "
                         "grid of processes")
    try:
        return named.groups(mesh)
    except ShardingError as e:
        raise ValueError(f"{op.name}: {e}") from None


# ---------------------------------------------------------------- the general path

def _members(x, plan: Plan):
    """[G, *x.shape]: the operands of this process's group members, in group order, and
    this process's flat id."""
    if plan.path == "single":
        return x[None], 0
    gathered = lax.all_gather(x, AXES)
    me = lax.axis_index(AXES)
    return jnp.take(gathered, jnp.asarray(plan.table)[me], axis=0), me


def _elementwise(body):
    """A reduction region (scalars -> scalar) applied element by element to arrays."""
    def apply(a, b):
        shape = a.shape
        out = jax.vmap(lambda u, v: body(u, v)[0])(a.reshape(-1), b.reshape(-1))
        return out.reshape(shape)
    return apply


def _fold(vals, size, combine):
    """vals[0] combined with vals[1..size-1] in order; `size` may be traced."""
    acc = vals[0]
    ragged = not isinstance(size, (int, np.integer))
    for k in range(1, vals.shape[0]):
        step = combine(acc, vals[k])
        acc = jnp.where(k < size, step, acc) if ragged else step
    return acc


def _group_size(plan: Plan, me):
    if plan.path == "single" or (plan.sizes == plan.sizes[0]).all():
        return int(plan.sizes[0])
    return jnp.asarray(plan.sizes)[me]


def _position(plan: Plan, me):
    return 0 if plan.path == "single" else jnp.asarray(plan.position)[me]


def _concat_members(vals, dim: int):
    return jnp.concatenate([vals[k] for k in range(vals.shape[0])], axis=dim)


# ---------------------------------------------------------------- prepare helpers

def _monoid(op) -> Optional[str]:
    """"add" / "max" / "min" when the body is exactly that op on its two arguments."""
    if not op.regions:
        return None
    region = op.regions[0]
    if len(region.ops) != 1 or len(region.args) != 2:
        return None
    inner = region.ops[0]
    kind = _MONOIDS.get(inner.name)
    if kind is None or sorted(inner.operands) != sorted(region.args) or \
            tuple(region.outputs) != tuple(inner.results):
        return None
    return kind


def _prepare_grouped(op) -> Grouped:
    return Grouped(group_mode(op), _id_groups(op.attrs.get("replica_groups", ())), _monoid(op))


def _lax_reducible(op, operands) -> bool:
    # XLA's all-reduce has no boolean add; those (and complex max/min, which do not exist)
    # take the general path.
    kind = op.params.monoid
    if kind is None:
        return False
    return all(x.dtype != np.bool_ and (kind == "add" or not T.is_complex(x.dtype))
               for x in operands)


# ---------------------------------------------------------------- ops

def _grid_index(ctx, op, axis: int):
    """This process's index along a grid axis (0: replicas, 1: partitions) as ui32."""
    g = grid(ctx, op)
    if not g.in_mesh:
        return jnp.asarray(g.process[axis], np.uint32)
    return lax.axis_index(AXES[axis]).astype(np.uint32)


@register_op("stablehlo.replica_id", "mhlo.replica_id")
def replica_id(ctx, op):
    return _grid_index(ctx, op, 0)


@register_op("stablehlo.partition_id", "mhlo.partition_id")
def partition_id(ctx, op):
    return _grid_index(ctx, op, 1)


def _promoted(op, operands) -> list:
    """The operands in the result types, which a promotable body (all_reduce and
    reduce_scatter, the spec's `is_promotable`) makes wider than the operands': the
    reduction accumulates in them."""
    return [x if x.dtype == t.dtype else lax.convert_element_type(x, t.dtype)
            for x, t in zip(operands, op.result_types)]


@register_op("stablehlo.all_reduce", "mhlo.all_reduce", prepare=_prepare_grouped)
def all_reduce(ctx, op, *operands):
    operands = _promoted(op, operands)
    plan = plan_for(ctx, op, lax_ok=_lax_reducible(op, operands))
    if plan.path == "lax":
        reduce = _LAX_REDUCE[op.params.monoid]
        return single_or_tuple(op, [reduce(x, AXES, axis_index_groups=plan.axis_index_groups)
                                    for x in operands])
    combine = _elementwise(ctx.region(op.regions[0]))
    out = []
    for x in operands:
        vals, me = _members(x, plan)
        out.append(_fold(vals, _group_size(plan, me), combine))
    return single_or_tuple(op, out)


@register_op("stablehlo.all_gather", "mhlo.all_gather", prepare=_prepare_grouped)
def all_gather(ctx, op, *operands):
    plan = plan_for(ctx, op)
    dim = op.attrs["all_gather_dim"]
    if plan.path == "lax":
        return single_or_tuple(op, [lax.all_gather(x, AXES, axis=dim, tiled=True,
                                                   axis_index_groups=plan.axis_index_groups)
                                    for x in operands])
    _require_uniform(plan, op)
    return single_or_tuple(op, [_concat_members(_members(x, plan)[0], dim) for x in operands])


def _require_uniform(plan: Plan, op):
    if not plan.member.all() or len(set(plan.sizes.tolist())) != 1:
        raise ValueError(f"{op.name} needs every process in a group of the same size; "
                         f"groups {list(plan.groups)}")


def _prepare_reduce_scatter(op):
    g = _prepare_grouped(op)
    return ReduceScatter(g.mode, g.groups, g.monoid, int(op.attrs["scatter_dimension"]))


@register_op("stablehlo.reduce_scatter", "mhlo.reduce_scatter", prepare=_prepare_reduce_scatter)
def reduce_scatter(ctx, op, x):
    x, = _promoted(op, (x,))
    dim = op.params.dim
    lax_ok = op.params.monoid == "add" and _lax_reducible(op, (x,))
    plan = plan_for(ctx, op, lax_ok=lax_ok)
    if plan.path == "lax":
        return lax.psum_scatter(x, AXES, scatter_dimension=dim, tiled=True,
                                axis_index_groups=plan.axis_index_groups)
    _require_uniform(plan, op)
    vals, me = _members(x, plan)
    reduced = _fold(vals, int(plan.sizes[0]), _elementwise(ctx.region(op.regions[0])))
    chunk = op.result_types[0].shape[dim]
    return lax.dynamic_slice_in_dim(reduced, _position(plan, me) * chunk, chunk, dim)


def _prepare_all_to_all(op):
    g = _prepare_grouped(op)
    return AllToAll(g.mode, g.groups, g.monoid, int(op.attrs["split_dimension"]),
                    int(op.attrs["concat_dimension"]), int(op.attrs["split_count"]))


@register_op("stablehlo.all_to_all", "mhlo.all_to_all", prepare=_prepare_all_to_all)
def all_to_all(ctx, op, *operands):
    p = op.params
    plan = plan_for(ctx, op)
    if plan.path == "lax":
        return single_or_tuple(op, [lax.all_to_all(x, AXES, p.split, p.concat, tiled=True,
                                                   axis_index_groups=plan.axis_index_groups)
                                    for x in operands])
    _require_uniform(plan, op)
    if int(plan.sizes[0]) != p.count:
        raise ValueError(f"split_count {p['count']} differs from the group size {plan.sizes[0]}")
    out = []
    for x in operands:
        vals, me = _members(x, plan)
        chunk = x.shape[p.split] // p.count
        # member k sends me its chunk number `my position`
        parts = lax.dynamic_slice_in_dim(vals, _position(plan, me) * chunk, chunk, p.split + 1)
        out.append(_concat_members(parts, p.concat))
    return single_or_tuple(op, out)


def _prepare_permute(op):
    mode = group_mode(op)
    pairs = np.asarray(op.attrs.get("source_target_pairs", np.zeros((0, 2))), np.int64)
    return Permute(mode, [tuple(int(v) for v in row) for row in pairs.reshape(-1, 2)])


def _flat_pairs(ctx, op) -> tuple:
    """The pairs as flat ids: one copy per partition (cross_replica) or replica."""
    g = grid(ctx, op)
    R, P = key = (g.num_replicas, g.num_partitions)
    cache = op.params.flat
    if key not in cache:
        if op.params.mode == "cross_replica":
            flat = [(s * P + p, t * P + p) for p in range(P) for s, t in op.params.pairs]
        else:
            flat = [(r * P + s, r * P + t) for r in range(R) for s, t in op.params.pairs]
        n = R * P
        if any(not (0 <= i < n) for pair in flat for i in pair):
            raise ValueError(f"source_target_pairs {op.params.pairs} outside the {R}x{P} grid")
        cache[key] = tuple(flat)
    return cache[key], g


@register_op("stablehlo.collective_permute", "mhlo.collective_permute", prepare=_prepare_permute)
def collective_permute(ctx, op, x):
    pairs, g = _flat_pairs(ctx, op)
    if g.in_mesh:
        return lax.ppermute(x, AXES, perm=pairs)
    return x if (0, 0) in pairs else jnp.zeros_like(x)


@register_op("stablehlo.collective_broadcast", "mhlo.collective_broadcast",
             prepare=_prepare_grouped)
def collective_broadcast(ctx, op, x):
    # one source, many targets: no lax collective sends that (ppermute is one-to-one)
    plan = plan_for(ctx, op, lax_ok=False)
    vals, me = _members(x, plan)
    if plan.path == "single":
        return x if plan.member[0] else jnp.zeros_like(x)
    member = jnp.asarray(plan.member)[me]
    return jnp.where(member, vals[0], jnp.zeros_like(x))


# ---------------------------------------------------------------- collective_reduce

def _prepare_collective_reduce(op) -> Grouped:
    return Grouped(group_mode(op), _id_groups(op.attrs.get("replica_groups", ())), _monoid(op))


@register_op("stablehlo.collective_reduce", prepare=_prepare_collective_reduce)
def collective_reduce(ctx, op, *operands):
    """all_reduce's reduction of each group, kept by the group's root alone: its first
    member, or with `has_dynamic_root` the member whose index in the group the last operand
    (si32, one per data operand) names. Every other process, and one in no group, gets
    zeros (the spec's examples)."""
    roots = None
    if op.attrs.get("has_dynamic_root", False):
        operands, roots = operands[:-1], jnp.reshape(operands[-1], (-1,))
    operands = _promoted(op, operands)
    plan = plan_for(ctx, op, lax_ok=_lax_reducible(op, operands))
    if plan.path == "single":
        me = 0
        member, position = bool(plan.member[0]), 0
    else:
        me = lax.axis_index(AXES)
        member, position = jnp.asarray(plan.member)[me], jnp.asarray(plan.position)[me]
    out = []
    for k, x in enumerate(operands):
        if plan.path == "lax":
            total = _LAX_REDUCE[op.params.monoid](x, AXES,
                                                  axis_index_groups=plan.axis_index_groups)
        else:
            vals, _ = _members(x, plan)
            total = _fold(vals, _group_size(plan, me), _elementwise(ctx.region(op.regions[0])))
        root = 0 if roots is None else roots[k]
        out.append(jnp.where(jnp.logical_and(member, position == root), total,
                             jnp.zeros_like(total)))
    return single_or_tuple(op, out)


# ---------------------------------------------------------------- interpreter.run_parallel

class RunParallel(NamedTuple):
    programs: tuple   # rows (replicas) of function names (partitions)
    infeed: tuple     # functions whose values feed the processes' infeed ops, in order


def _prepare_run_parallel(op):
    programs = op.attrs.get("programs")
    if not programs or len({len(row) for row in programs}) != 1 or not programs[0]:
        raise Unsupported(f"programs must be a non-empty rectangle, got {programs!r}")
    return RunParallel(tuple(tuple(row) for row in programs), tuple(op.attrs.get("infeed", ())))


@register_op("interpreter.run_parallel", prepare=_prepare_run_parallel)
def run_parallel(ctx, op, *operands):
    p = op.params
    try:
        if not p.infeed:
            return single_or_tuple(op, G.run_parallel_traced(ctx.translator.module, ctx.options,
                                                             p.programs, operands))
        # The reference interpreter's processes pop one shared queue of the infeed
        # functions' values, each infeed op the next, in whatever order its threads reach
        # them; here the processes run one after another in process order (replica-major)
        # and take them in that order. A collective would need them to run together.
        module = ctx.translator.module
        for name in sorted({name for row in p.programs for name in row}):
            found = G.collective_in(module, name)
            if found:
                raise SpmdUnsupported(f"run_parallel with an infeed queue and a collective "
                                      f"(@{name} has {found}): the processes take the queue "
                                      "one after another")
        values = [ctx.translator.callee(name)()[0] for name in p.infeed]
        site = f"{op.name} at {op.location}"
        io_callback(host_transfers.begin_run_parallel_infeed, None, *values, ordered=True)
        outs = G.run_parallel_traced(module, ctx.options, p.programs, operands,
                                     sequential=True)
        io_callback(functools.partial(host_transfers.end_run_parallel_infeed, site), None,
                    ordered=True)
    except SpmdUnsupported as e:
        raise UnsupportedError([(op.name, op.location, str(e))]) from None
    return single_or_tuple(op, outs)


def _prepare_cross_replica_sum(op):
    return Grouped("cross_replica", _id_groups(op.attrs.get("replica_groups", ())), "add")


@register_op("stablehlo.cross-replica-sum", prepare=_prepare_cross_replica_sum)
def cross_replica_sum(ctx, op, x):
    # The legacy spelling of an all_reduce with an add body over replica groups.
    plan = plan_for(ctx, op, lax_ok=x.dtype != np.bool_)
    if plan.path == "lax":
        return lax.psum(x, AXES, axis_index_groups=plan.axis_index_groups)
    vals, me = _members(x, plan)
    add = lax.bitwise_or if x.dtype == np.bool_ else lax.add
    return _fold(vals, _group_size(plan, me), add)
