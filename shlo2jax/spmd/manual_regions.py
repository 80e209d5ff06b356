"""The manual (per-device) regions of a sharded program, folded into one op each at decode.

A `shard_map` exported with GSPMD shardings is an `@SPMDFullToShardShape` ...
`@SPMDShardToFullShape` pair around per-device code (Shardy exports may spell it with
`@xla.sdy.GlobalToLocalShape` / `@xla.sdy.LocalToGlobalShape`). Each connected stretch
becomes one `shlo2jax.manual_region` op (ops/sharding.py), which runs as a `shard_map` over
the grid of processes of `shlo2jax.spmd.grid` (mesh axes ("replicas", "partitions"), process id =
device id = partition id), so the collectives inside keep the exact process-group semantics
of ops/collectives.py: a global value enters as the stack of its per-device blocks
(`Tiling.to_local`) and leaves the same way (`Tiling.to_global`).
"""

from __future__ import annotations

import heapq
import re

from shlo2jax import registry
from shlo2jax.errors import ShardingError
from shlo2jax.spmd.mesh import custom_call_target
from shlo2jax.module import Op, Region
from shlo2jax.spmd.sharding_attributes import parse_sdy_shardings, value_sharding_or_none


_FULL_TO_SHARD = ("SPMDFullToShardShape", "xla.sdy.GlobalToLocalShape")
_SHARD_TO_FULL = ("SPMDShardToFullShape", "xla.sdy.LocalToGlobalShape")
MANUAL_REGION = "shlo2jax.manual_region"


def rewrite_manual_regions(module) -> list:
    """Folds each connected `SPMDFullToShardShape ... SPMDShardToFullShape` stretch of
    every block into one `shlo2jax.manual_region` op (a region of per-device code);
    returns the problems found as (op name, location, why)."""
    problems = []
    seen = set()

    def visit(region):
        if id(region) in seen:
            return
        seen.add(id(region))
        for op in region.ops:
            for r in op.regions:
                visit(r)
        if any(custom_call_target(op) in _FULL_TO_SHARD for op in region.ops):
            try:
                _rewrite_block(region, module, registry)
            except ShardingError as e:
                problems.append((MANUAL_REGION, region.ops[0].location, str(e)))

    for fdef in module.functions.values():
        visit(fdef.body)
    return problems


def _rewrite_block(region: Region, module, registry):
    ops = region.ops
    producer = {}
    for k, op in enumerate(ops):
        for v in op.results:
            producer[v] = k
    manual_values, member = set(), [False] * len(ops)
    for k, op in enumerate(ops):
        target = custom_call_target(op)
        used = set(op.operands) | {v for r in op.regions for v in r.captures}
        if target in _FULL_TO_SHARD:
            member[k] = True
            manual_values.update(op.results)
        elif used & manual_values:
            member[k] = True
            if target not in _SHARD_TO_FULL:
                manual_values.update(op.results)
    # connected components of the manual ops
    parent = list(range(len(ops)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i
    for k, op in enumerate(ops):
        if member[k]:
            used = set(op.operands) | {v for r in op.regions for v in r.captures}
            for v in used & manual_values:
                parent[find(k)] = find(producer[v])
    groups: dict = {}
    for k in range(len(ops)):
        if member[k]:
            groups.setdefault(find(k), []).append(k)
    escaping = set(region.outputs) & manual_values
    for root, members in list(groups.items()):
        if escaping & {v for k in members for v in ops[k].results} or \
                not any(custom_call_target(ops[k]) in _SHARD_TO_FULL for k in members):
            # not a manual region: unpaired conversions (one-device semantics)
            del groups[root]
    replacement = {}
    for members in groups.values():
        replacement[members[-1]] = _manual_op([ops[k] for k in members], producer, ops, module,
                                              registry)
    drop = {k for members in groups.values() for k in members}
    new_ops = [replacement.get(k, op) for k, op in enumerate(ops)
               if k not in drop or k in replacement]
    region.ops = _topological(new_ops, set(region.args) | set(region.captures))


def _sharding_of_producer(value, producer, ops):
    op = ops[producer[value]] if value in producer else None
    if op is not None and custom_call_target(op) == "Sharding":
        return value_sharding_or_none(op.attrs)
    return None


def _manual_op(members, producer, ops, module, registry) -> Op:
    inner = [op for op in members if custom_call_target(op) not in _FULL_TO_SHARD + _SHARD_TO_FULL]
    entries = [op for op in members if custom_call_target(op) in _FULL_TO_SHARD]
    exits = [op for op in members if custom_call_target(op) in _SHARD_TO_FULL]
    defined = {v for op in inner for v in op.results} | {op.results[0] for op in entries}
    used = set()
    for op in inner + exits:
        used.update(op.operands)
        used.update(v for r in op.regions for v in r.captures)
    captures = tuple(sorted(used - defined))
    args = tuple(op.results[0] for op in entries) + captures
    arg_types = tuple(op.result_types[0] for op in entries) + (None,) * len(captures)
    body = Region(args, arg_types, inner, tuple(op.operands[0] for op in exits), ())
    in_shardings = []
    for op in entries:
        # the full value's sharding is on the @Sharding before it (the entry's own names
        # the manual axes)
        sharding = _sharding_of_producer(op.operands[0], producer, ops)
        in_shardings.append(sharding if sharding is not None else value_sharding_or_none(op.attrs))
    out_shardings = [value_sharding_or_none(op.attrs) for op in exits]
    axes = None
    for op in inner:  # serialized Shardy: `call @xla.sdy.manual_computation_body`
        frontend = op.attrs.get("mhlo.frontend_attributes")
        if isinstance(frontend, dict) and "xla.sdy.in_shardings" in frontend:
            text = {key: str(v).replace("\\22", '"') for key, v in frontend.items()}
            in_shardings = parse_sdy_shardings(text["xla.sdy.in_shardings"])
            out_shardings = parse_sdy_shardings(text.get("xla.sdy.out_shardings", "[]"))
            axes = frozenset(re.findall(r'"([^"]+)"', text.get("xla.sdy.manual_axes", "")))
            if len(in_shardings) != len(entries) or len(out_shardings) != len(exits):
                raise ShardingError("the manual computation's shardings do not match its "
                                    "GlobalToLocalShape / LocalToGlobalShape calls")
            break
    attrs = {"in_shardings": tuple(in_shardings), "out_shardings": tuple(out_shardings),
             "num_entries": len(entries), "axes": axes}
    op = Op(MANUAL_REGION, tuple(op.operands[0] for op in entries) + captures,
            tuple(op.results[0] for op in exits), tuple(op.result_types[0] for op in exits),
            attrs, (body,), entries[0].location)
    op.index = entries[0].index
    rule = registry.lookup(MANUAL_REGION)
    if rule is None:
        raise ShardingError("no translation for manual regions")
    op.handler = rule.handler
    if rule.prepare is not None:
        try:
            op.params = rule.prepare(op)
        except registry.Unsupported as e:
            raise ShardingError(str(e)) from None
    return op


def _topological(ops, available) -> list:
    """`ops` reordered (stably) so every value is defined before it is used."""
    producer = {v: k for k, op in enumerate(ops) for v in op.results}
    deps = []
    for op in ops:
        used = set(op.operands) | {v for r in op.regions for v in r.captures}
        deps.append({producer[v] for v in used if v in producer})
    users = [[] for _ in ops]
    for k, d in enumerate(deps):
        for p in d:
            users[p].append(k)
    pending = [len(d) for d in deps]
    ready = [k for k, n in enumerate(pending) if n == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        k = heapq.heappop(ready)
        out.append(ops[k])
        for u in users[k]:
            pending[u] -= 1
            if pending[u] == 0:
                heapq.heappush(ready, u)
    if len(out) != len(ops):
        raise ShardingError("a manual region's results feed its own inputs")
    return out


def has_manual_regions(module) -> bool:
    """Whether the decoded module has per-device (shard_map) regions."""
    return any(op.name == "sdy.manual_computation" for op in module.ops) or any(
        op.name == MANUAL_REGION for f in module.functions.values() for op in f.body.ops)
