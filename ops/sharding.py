"""Sharding markers and manual (shard_map) regions.

Markers: `@Sharding`, `sdy.sharding_constraint`, `sdy.reshard`,
`@xla.sdy.ShardingConstraint` / `@xla.sdy.FuncResultSharding`. When a program runs
on its mesh (the translator's `mode.sharding`, a `shlo2jax.spmd.mesh.ShardingContext`
given by `Function`), they are `jax.lax.with_sharding_constraint`s with the marker's
`NamedSharding`; on one device (or inside a manual region) they are the identity.

Manual regions: `sdy.manual_computation` and the `shlo2jax.manual_region` ops that
`shlo2jax.spmd.manual_regions.rewrite_manual_regions` folds from `@SPMDFullToShardShape` ...
`@SPMDShardToFullShape` stretches run as a `jax.shard_map` over the grid of
processes (see shlo2jax/spmd/manual_regions.py): the collectives inside communicate between
devices exactly as in a grid of processes (shlo2jax.spmd.grid). On one device a manual region whose
per-device shapes equal the global ones is just its body.
"""

from __future__ import annotations

import re
from typing import NamedTuple, Optional

import jax
from jax.sharding import PartitionSpec

from shlo2jax.errors import ShardingError
from shlo2jax.module import Region
from shlo2jax.ops._common import single_or_tuple
from shlo2jax.registry import Unsupported, register_custom_call, register_op
from shlo2jax.spmd import sharding_attributes as S
from shlo2jax.spmd.grid import ProcessGrid
from shlo2jax.spmd.mesh import AXES, make_mesh
from shlo2jax.translate import evaluate


def _context(ctx):
    """The program's ShardingContext when it runs on its mesh, outside manual regions."""
    mode = ctx.translator.mode
    return None if mode.grid is not None else mode.sharding


def _constrain(ctx, shardings, values, open_dims=False):
    sc = _context(ctx)
    if sc is None:
        return values
    out = []
    for x, sharding in zip(values, shardings):
        try:
            named = sc.named(sharding, x.ndim, open_dims)
        except ShardingError:
            named = None  # a hint only: the values are the same without it
        out.append(x if named is None else jax.lax.with_sharding_constraint(x, named))
    return out


# ---------------------------------------------------------------- markers

def _prepare_marker(op):
    if len(op.operands) != len(op.result_types):
        raise Unsupported(f"{op.attrs.get('call_target_name')} with {len(op.operands)} operands "
                          f"and {len(op.result_types)} results")
    try:
        frontend = op.attrs.get("mhlo.frontend_attributes")
        text = frontend.get("xla.sdy.sharding") if isinstance(frontend, dict) else None
        if isinstance(text, str) and "sharding_per_value" in text:
            shardings = S.parse_sdy_shardings(text.replace("\\22", '"'))
        else:
            sharding = S.value_sharding(op.attrs)
            shardings = [sharding] * len(op.operands)
    except ShardingError:
        shardings = [None] * len(op.operands)
    return tuple(shardings)


@register_custom_call("Sharding", "xla.sdy.ShardingConstraint", "xla.sdy.FuncResultSharding",
                      prepare=_prepare_marker)
def sharding_marker(ctx, op, *args):
    return single_or_tuple(op, _constrain(ctx, op.params, args))


def _prepare_sdy_constraint(op):
    try:
        return S.parse_sdy_sharding(S.attribute_text(op.attrs["sharding"]))
    except ShardingError as e:
        raise Unsupported(str(e)) from None


@register_op("sdy.sharding_constraint", "sdy.reshard", prepare=_prepare_sdy_constraint)
def sharding_constraint(ctx, op, x):
    return _constrain(ctx, [op.params], [x])[0]


@register_op("sdy.propagation_barrier")
def propagation_barrier(ctx, op, x):
    return x


@register_op("sdy.sharding_group")
def sharding_group(ctx, op, x):
    return ()


# ---------------------------------------------------------------- unpaired shard conversions

@register_custom_call("SPMDFullToShardShape", "SPMDShardToFullShape",
                      "xla.sdy.GlobalToLocalShape", "xla.sdy.LocalToGlobalShape",
                      prepare=lambda op: op.result_types[0].shape)
def shard_shape(ctx, op, x):
    # Reached only outside a manual region (see rewrite_manual_regions): one device.
    shape = op.params
    if tuple(x.shape) != tuple(shape):
        raise ValueError(f"{op.attrs.get('call_target_name')} changes the shape "
                         f"{tuple(x.shape)} -> {tuple(shape)}: a program partitioned over "
                         "several devices, and this conversion is not part of a FullToShard "
                         "... ShardToFull region")
    return x


# ---------------------------------------------------------------- manual regions

class ManualRegion(NamedTuple):
    """A region of per-device code: the shardings its operands enter with and its results
    leave with, the mesh axes it is manual over (None: all), its body (taking the entered
    values, then the captured ones), the body's captures, and how many operands enter."""
    in_shardings: tuple
    out_shardings: tuple
    axes: Optional[frozenset]
    body: Region
    captures: tuple
    entries: int


def _prepare_manual_computation(op):
    try:
        ins = S.parse_sdy_shardings(S.attribute_text(op.attrs["in_shardings"]))
        outs = S.parse_sdy_shardings(S.attribute_text(op.attrs["out_shardings"]))
    except (KeyError, ShardingError) as e:
        raise Unsupported(f"cannot read the shardings: {e}") from None
    axes = frozenset(re.findall(r'"([^"]+)"', S.attribute_text(op.attrs.get("manual_axes", ""))))
    region = op.regions[0]
    body = Region(region.args + region.captures,
                  region.arg_types + (None,) * len(region.captures), region.ops,
                  region.outputs, ())
    return ManualRegion(tuple(ins), tuple(outs), axes, body, region.captures, len(op.operands))


def _prepare_manual_region(op):
    a = op.attrs
    return ManualRegion(a["in_shardings"], a["out_shardings"], a.get("axes"), op.regions[0], (),
                        a["num_entries"])


def _tilings(sc, shardings, types, axes, what):
    out = []
    for sharding, t in zip(shardings, types):
        tiling = sc.tiling(sharding, len(t.shape), axes)
        if tiling is None:
            raise ValueError(f"the manual region's {what} has no sharding")
        out.append(tiling)
    return out


@register_op("sdy.manual_computation", prepare=_prepare_manual_computation)
def manual_computation(ctx, op, *operands):
    return _manual(ctx, op, operands)


@register_op("shlo2jax.manual_region", prepare=_prepare_manual_region)
def manual_region(ctx, op, *operands):
    return _manual(ctx, op, operands)


def _manual(ctx, op, operands):
    p = op.params
    body = p.body
    k = p.entries
    captured = list(operands[k:]) + [ctx.env[v] for v in p.captures]
    entries = operands[:k]
    local_types = body.arg_types[:k]
    sc = ctx.translator.mode.sharding
    if ctx.translator.mode.grid is not None:
        raise ValueError("a manual region inside a manual region is not supported")
    if sc is None or sc.num_devices == 1:
        # one device: the per-device values are the whole values
        for x, t in zip(entries, local_types):
            if tuple(x.shape) != tuple(t.shape):
                n = sc.num_devices if sc is not None else "several"
                raise ValueError(
                    f"the program is partitioned over {n} devices (a manual region takes "
                    f"{t} blocks of {x.dtype}{list(x.shape)}): call it where "
                    "len(jax.devices()) covers its mesh")
        return single_or_tuple(op, evaluate(ctx.translator, body, list(entries) + captured, {}))
    n = sc.num_devices
    t_in = _tilings(sc, p.in_shardings, [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in entries],
                    p.axes, "operand")
    t_out = _tilings(sc, p.out_shardings, op.result_types, p.axes, "result")
    stacked = [t.to_local(x, n) for t, x in zip(t_in, entries)]
    for s, t in zip(stacked, local_types):
        if t is not None and tuple(s.shape[1:]) != tuple(t.shape):
            raise ValueError(f"per-device blocks {list(s.shape[1:])} where the region "
                             f"takes {t}")
    # The per-device code's translator: collectives see the grid of processes.
    inner = ctx.translator.derived(grid=ProcessGrid(sc.num_replicas, sc.num_partitions))

    def per_device(*xs):
        args = [x[0] for x in xs[:k]] + list(xs[k:])
        return tuple(y[None] for y in evaluate(inner, body, args, {}))

    grid = PartitionSpec(AXES)
    mesh = make_mesh(sc.num_replicas, sc.num_partitions)
    outs = jax.shard_map(per_device, mesh=mesh,
                         in_specs=(grid,) * k + (PartitionSpec(),) * len(captured),
                         out_specs=(grid,) * len(op.result_types),
                         check_vma=False)(*stacked, *captured)
    results = [t.to_global(y, rt.shape) for t, y, rt in zip(t_out, outs, op.result_types)]
    # the region's out shardings (over its manual axes) are where the values live
    # (a partly manual region leaves the other axes to the compiler)
    partial = p.axes is not None and sc.sdy_mesh is not None and \
        set(p.axes) != {name for name, _ in sc.sdy_mesh.axes}
    return single_or_tuple(op, _constrain(ctx, p.out_shardings, results, open_dims=partial))
