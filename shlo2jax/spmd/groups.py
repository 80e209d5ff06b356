"""The spec's process groups: which processes a collective's groups name, and how the
collective runs on a grid of processes (replicas x partitions).

A process's flat id is `replica * num_partitions + partition` (the order of
`lax.axis_index(("replicas", "partitions"))` in shlo2jax.spmd.grid). A collective's
`replica_groups` (or `source_target_pairs`) are read according to its mode
(`group_mode`: cross_replica, cross_partition, cross_replica_and_partition, flattened_ids)
into groups of flat ids (`process_groups`); `make_plan` says how the collective runs on
them: one lax collective with `axis_index_groups`, the general all_gather-and-select path,
or one process. The op translations are ops/collectives.py.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from shlo2jax.registry import Unsupported


class Plan(NamedTuple):
    """How one collective runs on one grid: `path` is "lax" (one lax collective over both
    mesh axes with `axis_index_groups`), "general" (all_gather + select) or "single" (one
    process, no mesh axes)."""
    path: str
    groups: tuple           # flat process ids, one tuple per group, in group order
    axis_index_groups: Optional[list]
    table: np.ndarray       # [N, G]: the members of each process's group (padded with itself)
    sizes: np.ndarray       # [N]: size of each process's group (1 when in no group)
    position: np.ndarray    # [N]: each process's index in its group
    member: np.ndarray      # [N]: whether the process is in a group


def channel_id(op) -> int:
    handle = op.attrs.get("channel_handle")
    return int(handle.handle) if handle is not None else 0


def group_mode(op) -> str:
    """The spec's process-group mode of a collective."""
    channel = channel_id(op)
    short = op.name.split(".", 1)[1]
    use_global = bool(op.attrs.get("use_global_device_ids", False))
    # collective_reduce's groups are collective_broadcast's, unless use_global_device_ids (an
    # attribute it has and the spec does not mention) reads them as flat ids, as all_reduce's
    if short in ("all_to_all", "collective_permute", "collective_broadcast") or (
            short == "collective_reduce" and not use_global):
        return "cross_replica" if channel <= 0 else "cross_partition"
    if channel <= 0:
        if use_global:
            raise Unsupported("use_global_device_ids needs a channel_handle > 0")
        return "cross_replica"
    return "flattened_ids" if use_global else "cross_replica_and_partition"


def process_groups(mode: str, groups: list, num_replicas: int, num_partitions: int) -> list:
    """The spec's process groups as lists of flat ids (replica * num_partitions + partition).
    Empty `groups` mean one group of every id along the mode's axis (every process for
    flattened_ids)."""
    R, P = num_replicas, num_partitions
    flat = lambda r, p: r * P + p  # noqa: E731
    out = []
    if mode == "cross_replica":
        groups = groups or [list(range(R))]
        for p in range(P):
            out += [[flat(r, p) for r in g] for g in groups]
    elif mode == "cross_partition":
        groups = groups or [list(range(P))]
        for r in range(R):
            out += [[flat(r, p) for p in g] for g in groups]
    elif mode == "cross_replica_and_partition":
        groups = groups or [list(range(R))]
        out = [[flat(r, p) for p in range(P) for r in g] for g in groups]
    elif mode == "flattened_ids":
        out = [list(g) for g in (groups or [list(range(R * P))])]
    else:
        raise ValueError(mode)
    n = R * P
    seen = set()
    for g in out:
        for i in g:
            if not 0 <= i < n:
                raise ValueError(f"process id {i} outside the {R}x{P} grid ({mode})")
            if i in seen:
                raise ValueError(f"process {i} is in two groups ({mode})")
            seen.add(i)
    return out


def make_plan(groups: list, n: int, in_mesh: bool, lax_ok: bool) -> Plan:
    """`lax_ok`: the op has a lax collective for this element type and body. lax needs
    groups that partition the processes into groups of equal size."""
    size = max((len(g) for g in groups), default=1)
    table = np.tile(np.arange(n)[:, None], (1, size))
    sizes, position, member = np.ones(n, np.int64), np.zeros(n, np.int64), np.zeros(n, bool)
    for g in groups:
        for k, i in enumerate(g):
            table[i, :len(g)] = g
            sizes[i], position[i], member[i] = len(g), k, True
    covers = member.all() and len({len(g) for g in groups}) == 1
    if not in_mesh:
        path, aig = "single", None
    elif lax_ok and covers:
        path = "lax"
        aig = None if [list(g) for g in groups] == [list(range(n))] else [list(g) for g in groups]
    else:
        path, aig = "general", None
    return Plan(path, tuple(tuple(g) for g in groups), aig, table, sizes, position, member)


def beyond_grid(mode: str, ids: list, size: Optional[int], what: str, value, R: int,
                P: int) -> Optional[str]:
    """Why process ids `ids` (replica, partition or flat ids, per the spec's `mode`) do not
    all exist in an R x P grid, with the grid that has them; None when they do."""
    axis = {"cross_replica": "replica", "cross_partition": "partition",
            "cross_replica_and_partition": "replica", "flattened_ids": "process"}[mode]
    have = {"replica": R, "partition": P, "process": R * P}[axis]
    if not ids or max(ids) < have:
        return None
    need = max(ids) + 1
    grid = {"replica": f"num_replicas={need}" + (f", num_partitions={P}" if P > 1 else ""),
            "partition": (f"num_replicas={R}, " if R > 1 else "") + f"num_partitions={need}",
            "process": f"num_replicas * num_partitions >= {need}"}[axis]
    groups = f" (groups of up to {size} process{'es' if size > 1 else ''})" if size else ""
    return (f"{what} {value}{groups} name {axis} {max(ids)} ({mode}), but a plain call runs "
            f"the program's {R} replica(s) x {P} partition(s) on {R * P} device(s): run it as "
            f"a grid of processes, shlo2jax.spmd.run_spmd(..., {grid})")
