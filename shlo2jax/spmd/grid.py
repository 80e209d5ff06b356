"""Programs as grids of processes (replicas x partitions) on a device mesh.

A grid's processes run as the shards of one `jax.shard_map` over a `Mesh` with axes
("replicas", "partitions"); process (r, p) has the flat id `r * num_partitions + p`, the
order of `lax.axis_index(("replicas", "partitions"))`. Its functions are traced by a
translator whose mode carries the `ProcessGrid`: replica_id / partition_id are the mesh
axis indices and the collectives (shlo2jax.ops.collectives) communicate over the mesh axes.
Processes may run different functions with one signature (`programs=[[@f, @f], [@g, @g]]`
in the interpreter's run_parallel): a `lax.switch` on the process id picks each one's.

Processes that communicate only through send/recv (the interpreter pairs them by
channel) run one after another instead, senders first: their transfers are host
callbacks that meet inside `shlo2jax.host_io(loopback=True)`.

Users run a loaded function as a grid with `shlo2jax.spmd.run_spmd` (shlo2jax/spmd/run.py);
the interpreter's `run_parallel` op (ops/collectives.py) and manual (shard_map) regions of sharded exports
(ops/sharding.py) run here too.

The mesh needs num_replicas * num_partitions devices. On CPU, set
`XLA_FLAGS=--xla_force_host_platform_device_count=8` before jax is imported.
"""

from __future__ import annotations

import copy
from typing import NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec

from shlo2jax import value_types as T
from shlo2jax.errors import SpmdUnsupported
from shlo2jax.module import Problem
from shlo2jax.spmd.mesh import AXES, make_mesh
from shlo2jax.translate import TOKEN, Translator, TranslatorMode

HOST_DEVICES_FLAG = "--xla_force_host_platform_device_count=8"


class ProcessGrid(NamedTuple):
    """The grid of processes a translator traces for (its `mode.grid`)."""
    num_replicas: int
    num_partitions: int
    in_mesh: bool = True  # False: one process traced on its own, without mesh axes
    process: tuple = (0, 0)  # (replica, partition) of that process when not in_mesh


_SEND_RECV = frozenset({"stablehlo.send", "stablehlo.recv", "mhlo.send", "mhlo.recv"})
_COLLECTIVES = frozenset({
    "stablehlo.all_reduce", "mhlo.all_reduce", "stablehlo.all_gather", "mhlo.all_gather",
    "stablehlo.reduce_scatter", "mhlo.reduce_scatter", "stablehlo.all_to_all", "mhlo.all_to_all",
    "stablehlo.collective_permute", "mhlo.collective_permute", "stablehlo.collective_broadcast",
    "mhlo.collective_broadcast", "stablehlo.collective_reduce"})


def collective_in(module, name: str) -> Optional[str]:
    """A collective op that function `name` (or a function it calls) has, or None."""
    found = _op_names(module.functions[name].body, module, {name}) & _COLLECTIVES
    return min(found) if found else None


def _op_names(region, module, seen) -> set:
    names = set()
    for op in region.ops:
        names.add(op.name)
        for r in op.regions:
            names |= _op_names(r, module, seen)
        callee = op.attrs.get("callee") if op.name == "func.call" else None
        if isinstance(callee, str) and callee not in seen and callee in module.functions:
            seen.add(callee)
            names |= _op_names(module.functions[callee].body, module, seen)
    return names


_RUN_PARALLEL = "interpreter.run_parallel"


def plain_call_problems(module, partitions: Optional[int] = None) -> list:
    """(op name, location, what) of each collective, in the functions a call of the program
    runs, whose process groups name more processes than that call has: the program's grid
    (mhlo.num_replicas x `partitions`: the decoder passes `mesh.num_partitions`, which for
    an older export that declares no partitions counts the devices its meshes and shardings
    name, the mesh its sharded executable runs on; else mhlo.num_partitions, 1 unless
    declared). Such an op runs only in
    a grid of processes (`shlo2jax.spmd.run_spmd`); the decoder reports it at load, and a
    plain call refuses it then instead of failing while tracing. The processes of an
    interpreter.run_parallel are a grid of their own, not checked here. A collective's
    params say whether it fits a grid (`beyond_grid`, ops/collectives.py)."""
    if not any(getattr(op.params, "beyond_grid", None) for op in module.ops):
        return []  # (no collective: most programs)
    R = int(module.attrs.get("mhlo.num_replicas", 1))
    P = partitions if partitions is not None else int(module.attrs.get("mhlo.num_partitions", 1))
    problems, seen = [], set()
    pending = [n for n, f in module.functions.items() if f.public] or list(module.functions)
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        for op in _all_ops(module.functions[name].body):
            check = getattr(op.params, "beyond_grid", None)
            why = check(R, P) if check is not None else None
            if why:
                problems.append(Problem(op.name, op.location, why, op.index))
            if op.name != _RUN_PARALLEL and isinstance(op.attrs, dict):
                pending += [v for v in op.attrs.values()
                            if isinstance(v, str) and v in module.functions]
    return problems


def _all_ops(region):
    for op in region.ops:
        yield op
        for inner in op.regions:
            yield from _all_ops(inner)


def _as_a_grid_runs_it(module):
    """The module as a grid's translator sees it: the collectives a plain call refuses
    (`plain_call_problems`) run here."""
    beyond = set(plain_call_problems(module))
    if not beyond or not set(module.problems) & beyond:
        return module
    view = copy.copy(module)
    view.problems = [p for p in module.problems if p not in beyond]
    return view


def grid_function(module, options, programs: Sequence[Sequence], sequential: bool = False):
    """A traceable `f(per_process_args) -> per-process outputs` for a grid of FunctionDefs
    (or names) of `module`, translated with `options` (the program's LoadOptions):
    `programs[r][p]` runs as replica r, partition p. `sequential`: run the
    processes one after another in process order (they share a host queue), whatever
    they contain."""
    module = _as_a_grid_runs_it(module)
    rows = [[module.functions[f] if isinstance(f, str) else f for f in row] for row in programs]
    R, P = len(rows), len(rows[0])
    if any(len(row) != P for row in rows):
        raise SpmdUnsupported("programs must form a rectangle (replicas x partitions)")
    flat = [f for row in rows for f in row]
    n = R * P
    distinct = list({f.name: f for f in flat}.values())
    ops = {f.name: _op_names(f.body, module, {f.name}) for f in distinct}
    if sequential or (n > 1 and any(ops[f.name] & _SEND_RECV for f in distinct)):
        return _sequential_grid(module, options, rows, flat, distinct, ops)
    if len(distinct) > 1:
        for f in distinct:
            found = ops[f.name] & _COLLECTIVES
            if found:
                # each process would take its own branch of a lax.switch, and a collective
                # in one branch has no partner in the others
                raise SpmdUnsupported(
                    f"processes run different functions and @{f.name} has a collective "
                    f"({sorted(found)[0]})")
    in_types, out_types = flat[0].input_types, flat[0].output_types
    for f in flat:
        if (f.input_types, f.output_types) != (in_types, out_types):
            if not any(ops[g.name] & _COLLECTIVES for g in distinct):
                # independent processes: no shard_map needed
                return _sequential_grid(module, options, rows, flat, distinct, ops)
            raise SpmdUnsupported(
                f"processes run functions of different signatures (@{flat[0].name}, "
                f"@{f.name}): one shard_map needs one signature")
    if any(isinstance(t, T.TupleType) for t in in_types + out_types):
        raise SpmdUnsupported("tuple arguments or results of per-process functions")
    # its own callee cache: these traces use mesh axes
    translator = Translator(module, options,
                            TranslatorMode(grid=ProcessGrid(R, P, in_mesh=n > 1)))
    names = list(dict.fromkeys(f.name for f in flat))
    bodies = [translator.function_body(module.functions[name]) for name in names]
    branch = np.array([names.index(f.name) for f in flat], np.int32)
    tensor_in = [i for i, t in enumerate(in_types) if isinstance(t, T.TensorType)]
    tensor_out = [i for i, t in enumerate(out_types) if isinstance(t, T.TensorType)]

    def one_process(args):
        if len(bodies) == 1:
            return tuple(bodies[0](*args))
        index = jnp.asarray(branch)[lax.axis_index(AXES)]
        return tuple(lax.switch(index, [lambda *a, b=b: tuple(b(*a)) for b in bodies], *args))

    def run(per_process_args):
        if len(per_process_args) != n:
            raise TypeError(f"{n} processes, got arguments for {len(per_process_args)}")
        if n == 1:
            return [list(one_process(list(per_process_args[0])))]
        mesh = make_mesh(R, P)
        stacked = [jnp.stack([jnp.asarray(args[i]) for args in per_process_args])
                   for i in tensor_in]

        def shard(*xs):
            args = [TOKEN] * len(in_types)
            for i, x in zip(tensor_in, xs):
                args[i] = x[0]
            outs = one_process(args)
            return tuple(outs[i][None] for i in tensor_out)

        spec = PartitionSpec(AXES)
        outs = jax.shard_map(shard, mesh=mesh, in_specs=(spec,) * len(stacked),
                             out_specs=(spec,) * len(tensor_out), check_vma=False)(*stacked)
        if jax.process_count() > 1:
            # under jax.distributed the grid spans the processes: replicated, every
            # process's results can be read on each (np.asarray) without a gather
            outs = lax.with_sharding_constraint(outs, NamedSharding(mesh, PartitionSpec()))
        results = []
        for k in range(n):
            per = [TOKEN] * len(out_types)
            for j, i in enumerate(tensor_out):
                per[i] = outs[j][k]
            results.append(per)
        return results

    return run, (R, P), flat


def _sequential_grid(module, options, rows, flat, distinct, ops):
    """Processes without collectives (talking through send/recv, or not at all): each runs
    on its own, senders before receivers, in one trace. Their transfers are ordered host callbacks (ops/side_effects.py),
    so a send reaches the recv of its channel through the host feed (in order, per channel)
    when it runs inside `shlo2jax.host_io(loopback=True)`."""
    for f in distinct:
        shared = ops[f.name] & _COLLECTIVES
        if shared:
            raise SpmdUnsupported(
                f"@{f.name} uses {sorted(shared)[0]} in a grid whose processes also send/recv: "
                "only processes that talk through send/recv alone are modelled")
        if {"stablehlo.send", "mhlo.send"} & ops[f.name] and \
                {"stablehlo.recv", "mhlo.recv"} & ops[f.name]:
            raise SpmdUnsupported(
                f"@{f.name} both sends and receives: processes that exchange values both ways "
                "cannot run one after another")
    R, P = len(rows), len(rows[0])
    bodies = []
    for k, f in enumerate(flat):  # a translator per process: its ids are constants
        grid = ProcessGrid(R, P, in_mesh=False, process=(k // P, k % P))
        translator = Translator(module, options, TranslatorMode(grid=grid))
        bodies.append(translator.function_body(f))
    receives = [bool({"stablehlo.recv", "mhlo.recv"} & ops[f.name]) for f in flat]
    order = sorted(range(len(flat)), key=lambda k: receives[k])

    def run(per_process_args):
        if len(per_process_args) != len(flat):
            raise TypeError(f"{len(flat)} processes, got arguments for {len(per_process_args)}")
        results = [None] * len(flat)
        for k in order:
            results[k] = list(bodies[k](*per_process_args[k]))
        return results

    return run, (len(rows), len(rows[0])), flat


def run_parallel_traced(module, options, programs, operands, sequential: bool = False) -> list:
    """interpreter.run_parallel: operands are the processes' arguments one process after
    another (replica-major); the results come back the same way."""
    run, _, flat = grid_function(module, options, programs, sequential)
    per_process, at = [], 0
    for f in flat:
        k = len(f.input_types)
        per_process.append(list(operands[at:at + k]))
        at += k
    if at != len(operands):
        raise SpmdUnsupported(f"{len(operands)} operands for processes taking {at}")
    return [v for outs in run(per_process) for v in outs]
