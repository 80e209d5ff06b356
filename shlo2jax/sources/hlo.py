"""XLA's HLO as input: HLO text (`HloModule ...`), a serialized `HloModuleProto`, the
`xla.HloProto` / `xla.HloSnapshot` wrappers `.hlo.pb` dump files hold, and `--xla_dump_to`
folders.

jaxlib converts: its HLO text parser and `hlo_to_stablehlo` (serialized HloModuleProto ->
StableHLO bytecode) run in a child process (`compat.HLO_TO_STABLEHLO_CHILD`), because the
parser aborts the process on some malformed text; the StableHLO it writes is then read like
any MLIR bytecode (`sources.mlir`). The converted module keeps HLO's instruction names as
locations, flattens tuple-shaped entry parameters and results, and turns `while` over tuples
into a `stablehlo.while` over the elements. Post-optimization forms it leaves in the `mhlo`
dialect (`fusion`, `copy`) have rules of their own (ops/control_flow.py).

An `--xla_dump_to` folder holds one set of files per compiled module
(`module_0004.jit_f.before_optimizations.txt`, `....cpu_after_optimizations.txt`, with
`--xla_dump_hlo_as_proto` also `.hlo.pb`): the folder reads the module's
`before_optimizations` program, from its `.hlo.pb` where there is one (text dumps print large
constants as `{...}`, refused as an `ElidedDataError`); where the folder holds several
modules, `module=` names one (its name, `jit_f`, or its file prefix, `module_0004.jit_f`, or
its number, `4`, or else the start of its name: TensorFlow's run past 100 characters).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Optional

import numpy as np

from jaxlib.mlir import ir

from shlo2jax.compat import HLO_TO_STABLEHLO_CHILD, make_ir_context
from shlo2jax.errors import ElidedDataError, LoadError
from shlo2jax.sources.mlir import parse_mlir
from shlo2jax.sources.safe_parse import how_child_ended

# A dump file: module_<number>.<module name>.<stage>.(txt|hlo.pb)
# The stage has no dot but in XLA:GPU's compute capability (`sm_8.0_gpu_after_optimizations`);
# module names can hold dots (TensorFlow's `a_inference_f_10__XlaMustCompile_..._.3`).
_DUMP_FILE_RE = re.compile(r"^module_(\d+)\.(.+?)\.(before_optimizations|(?:sm_\d+\.\d+_)?"
                           r"(?:\w+_)?after_optimizations)\.(txt|hlo\.pb)$")


def is_hlo_text(data) -> bool:
    """Whether `data` (str or bytes) is HLO text: it starts with `HloModule`."""
    head = data.lstrip()[:9]
    return head in ("HloModule", b"HloModule")


def module_proto(data: bytes) -> Optional[bytes]:
    """The serialized HloModuleProto in `data`: `data` itself, or the module an
    `xla.HloProto` (field 1) or an `xla.HloSnapshot` (field 1, an HloProto) wraps; None when
    `data` has neither shape.

    A module starts with its field 1, the name (printable), then field 2 or a later one; a
    wrapper's field 1 is a message that itself starts with a field 1. Only these first
    fields are read (protobuf's wire format: tag byte 0x0a, a varint length, the payload):
    jaxlib parses the module."""
    for _ in range(3):  # HloSnapshot { hlo: HloProto { hlo_module: HloModuleProto } }
        field = _first_field(data)
        if field is None:
            return None
        payload, rest = field
        if payload[:1] == b"\x0a" and _first_field(payload) is not None:
            data = payload
            continue
        if len(payload) < 512 and all(32 <= b < 127 for b in payload) and (
                not rest or rest[0] in (0x12, 0x1a, 0x22, 0x28, 0x30, 0x3a, 0x42, 0x4a)):
            return data
        return None
    return None


def _first_field(data: bytes):
    """(payload, what follows) of field 1 (length-delimited) at the start of `data`, or None."""
    if data[:1] != b"\x0a":
        return None
    length, shift, pos = 0, 0, 1
    while True:
        if pos >= len(data) or shift > 56:
            return None
        byte = data[pos]
        length |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            break
        shift += 7
    if pos + length > len(data):
        return None
    return data[pos:pos + length], data[pos + length:]


def to_stablehlo(data, source_name: str = "", timeout: float = 600.0) -> bytes:
    """HLO text (str or bytes) or a serialized HloModuleProto (or a wrapper of one) ->
    StableHLO bytecode, converted by jaxlib in a child process. Malformed input is a
    `LoadError` with jaxlib's message (or how the child died)."""
    where = f" {source_name}" if source_name else ""
    if isinstance(data, str):
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError as e:  # (a lone surrogate: no file's text holds one)
            raise LoadError(f"cannot read HLO text{where}: not encodable as UTF-8 ({e.reason} "
                            f"at character {e.start})") from None
    if is_hlo_text(data):
        kind, what = "text", "HLO text"
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise LoadError(f"cannot read HLO text{where}: not UTF-8 (byte 0x{data[e.start]:02x} "
                            f"at offset {e.start})") from None
        _refuse_elided_constants(text, where)
    else:
        module = module_proto(data)
        if module is None:
            raise LoadError(f"cannot read{where}: a truncated or corrupt HLO module proto "
                            f"({len(data)} bytes: its first fields are not an HloModuleProto's, "
                            "nor an HloProto's or HloSnapshot's holding one)")
        kind, what, data = "proto", "HLO module proto", module
    try:
        proc = subprocess.run([sys.executable, "-c", HLO_TO_STABLEHLO_CHILD, kind], input=data,
                              capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise LoadError(f"cannot read {what}{where}: jaxlib's conversion ran past {timeout:.0f} s "
                        "in a child process") from None
    if proc.returncode == 0:
        return proc.stdout
    if proc.returncode == 3:
        message = proc.stdout.decode("utf-8", "backslashreplace").strip()
        raise LoadError(f"cannot read {what}{where}: {message}")
    err = proc.stderr.decode("utf-8", "backslashreplace").strip().splitlines()
    tail = " | ".join(line.strip() for line in err if line.strip() and not line.lstrip().startswith("@"))
    how = how_child_ended(proc.returncode)
    raise LoadError(f"cannot read {what}{where}: jaxlib's HLO reader aborts on this input ({how}): "
                    f"{tail[-600:]}")


def read(data, source_name: str = "") -> ir.Module:
    """HLO text or a serialized HloModuleProto (or a wrapper of one) -> the verified StableHLO
    `ir.Module` it converts to (`to_stablehlo`), with what the conversion leaves out or leaves
    in forms of HLO's own put back as StableHLO (`_adapt`)."""
    module = parse_mlir(to_stablehlo(data, source_name), make_ir_context(), source_name)
    try:
        _adapt(module, data)
    except (ValueError, IndexError, KeyError, TypeError) as e:
        # (the forms adapted are those XLA writes; anything else must still be a LoadError)
        where = f" {source_name}" if source_name else ""
        raise LoadError(f"cannot read HLO{where}: its converted module has an unexpected form "
                        f"({type(e).__name__}: {e})") from None
    return module


# The module header's `replica_count=N, num_partitions=M` (its HloModuleConfig): the
# HloModuleProto `hlo_to_stablehlo` reads has no field for them, so they come from the text.
_HEADER_GRID_RE = {"mhlo.num_replicas": re.compile(r"\breplica_count=(\d+)"),
                   "mhlo.num_partitions": re.compile(r"\bnum_partitions=(\d+)")}
# XLA's SPMD partitioner names the per-partition entry computation `<entry>_spmd`
_PARTITIONED_ENTRY_RE = re.compile(r"^ENTRY\s+%?[\w.\-]*_spmd\b", re.MULTILINE)


def _adapt(module: ir.Module, data) -> None:
    """What `hlo_to_stablehlo` writes that reads otherwise than HLO meant, made StableHLO:

    - the grid (`replica_count`, `num_partitions` of a text header) as `mhlo.num_replicas` /
      `mhlo.num_partitions`, which `run_spmd` and the collectives' process groups read;
    - a module that XLA's SPMD partitioner already partitioned (its entry `..._spmd`, the
      `after_optimizations` dumps of a partitioned program) is the program of one partition:
      its parameters' and results' `mhlo.sharding`s describe the global arrays, not its
      per-partition shapes, so they are dropped: it runs as one process of the grid
      (`run_spmd`);
    - async pairs (`all-reduce-start`/`-done`, `all-gather-start`, `collective-permute-start`,
      `copy-start`/`-done`, ...) become the operation they wrap: scheduling is XLA's concern;
    - `domain` (sharding domains XLA's partitioner placed) is its operand."""
    if isinstance(data, bytes):
        head = data[:65536].decode("utf-8", "replace") if is_hlo_text(data) else ""
    else:
        head = data if is_hlo_text(data) else ""
    header = head.split("\n", 1)[0]
    if not head:  # a proto: its entry computation's name (field 2, after the name)
        named = _first_field(module_proto(bytes(data)) or b"")
        entry = _first_field(b"\x0a" + named[1][1:]) if named and named[1][:1] == b"\x12" else None
        head = f"ENTRY {entry[0].decode('utf-8', 'replace')}" if entry else ""
    with module.context, ir.Location.unknown():
        partitioned = bool(_PARTITIONED_ENTRY_RE.search(head))
        for name, pattern in _HEADER_GRID_RE.items():
            found = pattern.search(header)
            if found and int(found[1]) > 1 and not (partitioned and name == "mhlo.num_partitions"):
                module.operation.attributes[name] = ir.IntegerAttr.get(
                    ir.IntegerType.get_signless(32), int(found[1]))
        if partitioned:
            _drop_entry_shardings(module)
            # one partition's program: declared, so that no sharding left inside it makes
            # the program's grid the partitioned mesh (mesh.num_partitions)
            module.operation.attributes["mhlo.num_partitions"] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(32), 1)
        elif not any(name in module.operation.attributes for name in _HEADER_GRID_RE):
            # `Lowered.as_text(dialect="hlo")` prints no grid: the devices the shardings
            # name, as the StableHLO of the same jit declares them (mhlo.num_partitions)
            devices = _devices_sharded_over(module)
            if devices > 1:
                module.operation.attributes["mhlo.num_partitions"] = ir.IntegerAttr.get(
                    ir.IntegerType.get_signless(32), devices)
        meshes = {op.operation.attributes["sym_name"].value: str(op.operation.attributes["mesh"])
                  for op in module.body.operations if op.operation.name == "sdy.mesh"}
        # (collected first: the rewrites erase ops a walk would meet later)
        for op in [op.operation for op in _walk(module.operation)
                   if _target(op.operation) == "xla.sdy.GlobalToLocalShape"]:
            _shard_map_as_exported(op)
        for op in [op.operation for op in _walk(module.operation)
                   if op.operation.name in _REWRITTEN or "replica_groups" in op.operation.attributes]:
            if op.name not in _REWRITTEN:
                _explicit_replica_groups(op, meshes)
            elif op.name == "mhlo.domain":
                op.results[0].replace_all_uses_with(op.operands[0])
                op.erase()
            else:
                _inline_async(op)


_REWRITTEN = ("stablehlo.async_start", "mhlo.async_start", "mhlo.domain")


_MESH_AXES_RE = re.compile(r'^#stablehlo\.replica_group_mesh_axes<mesh = @([\w.\-]+), axes = '
                           r'\[((?:#stablehlo\.axis_ref<name = "[^"]+">(?:, )?)*)\]>$')


def _explicit_replica_groups(op, meshes: dict) -> None:
    """Replica groups XLA prints over the axes of a mesh (`replica_groups=mesh['x'=4,'y'=2]
    {'x'}`, after partitioning) -> the list of device-id groups they stand for: one group per
    combination of the other axes, devices numbered row-major over the mesh. Other forms
    (sub-axes, a mesh with its own device order) are left for the decoder to report."""
    found = _MESH_AXES_RE.match(str(op.attributes["replica_groups"]))
    mesh = meshes.get(found[1]) if found else None
    axes = re.findall(r'name = "([^"]+)"', found[2]) if found else []
    shape = re.fullmatch(r'#sdy\.mesh<\[((?:"[^"]+"=\d+(?:, )?)*)\]>', mesh or "")
    if shape is None:
        return
    sizes = dict((k, int(v)) for k, v in re.findall(r'"([^"]+)"=(\d+)', shape[1]))
    if not set(axes) <= set(sizes):
        return
    names = list(sizes)
    rest = [n for n in names if n not in axes]
    ids = np.arange(int(np.prod(list(sizes.values()), dtype=np.int64))).reshape(
        [sizes[n] for n in names])
    group = int(np.prod([sizes[n] for n in axes], dtype=np.int64))
    groups = ids.transpose([names.index(n) for n in rest + axes]).reshape(-1, group)
    op.attributes["replica_groups"] = ir.DenseElementsAttr.get(
        np.ascontiguousarray(groups, np.int64), type=ir.IntegerType.get_signless(64))


def _walk(operation) -> list:
    """Every op nested in `operation`, collected before any is changed."""
    found = []
    for region in operation.regions:
        for block in region.blocks:
            for op in block.operations:
                found.append(op)
                found.extend(_walk(op.operation))
    return found


def _target(op) -> Optional[str]:
    if op.name != "stablehlo.custom_call":
        return None
    return ir.StringAttr(op.attributes["call_target_name"]).value


def _users(op) -> list:
    return [u.owner.operation if hasattr(u.owner, "operation") else u.owner
            for r in op.results for u in r.uses]


def _shard_map_as_exported(entry) -> None:
    """A `shard_map` in HLO (`GlobalToLocalShape`, a `call` of its body, `LocalToGlobalShape`,
    the Shardy shardings in the custom calls' frontend attributes; one tuple-shaped call for
    all operands or all results) -> the form of jax's StableHLO export the decoder folds
    (shlo2jax/spmd/manual_regions.py): the shardings on the `call`, one conversion per value."""
    values = [entry] if not _is_tuple(entry) else [
        u for u in _users(entry) if u.name == "stablehlo.get_tuple_element"]
    calls = []
    for u in (u for v in values for u in _users(v) if u.name == "func.call"):
        if not any(u == c for c in calls):  # (one op has many Python wrappers)
            calls.append(u)
    if len(calls) != 1:
        return  # (not the form jax writes: left for the decoder to report)
    [call] = calls
    exits = [u for u in _users(call) if _target(u) == "xla.sdy.LocalToGlobalShape"]
    merged = {}
    for op in [call, entry] + exits[:1]:
        if "mhlo.frontend_attributes" in op.attributes:
            d = ir.DictAttr(op.attributes["mhlo.frontend_attributes"])
            merged.update({d[k].name: d[k].attr for k in range(len(d))})
    call.attributes["mhlo.frontend_attributes"] = ir.DictAttr.get(merged)
    for op in [entry] + exits[:1]:
        if _is_tuple(op):
            _split_tuple_custom_call(op)


def _is_tuple(op) -> bool:
    return len(op.results) == 1 and str(op.results[0].type).startswith("tuple<")


def _split_tuple_custom_call(op) -> None:
    """A custom call of n operands and one tuple result read by `get_tuple_element`s -> n
    custom calls of one operand and one result each."""
    users = _users(op)
    if any(u.name != "stablehlo.get_tuple_element" for u in users):
        return
    attrs = {op.attributes[k].name: op.attributes[k].attr for k in range(len(op.attributes))
             if op.attributes[k].name != "xla_shape"}
    for gte in users:
        index = ir.IntegerAttr(gte.attributes["index"]).value
        single = ir.Operation.create("stablehlo.custom_call", results=[gte.results[0].type],
                                     operands=[op.operands[index]], attributes=attrs,
                                     loc=op.location, ip=ir.InsertionPoint(op))
        gte.results[0].replace_all_uses_with(single.results[0])
        gte.erase()
    op.erase()


_TILES_RE = re.compile(r"devices=\[([\d,]+)\]")


def _devices_sharded_over(module: ir.Module) -> int:
    """The most devices an `mhlo.sharding` of the module's ops, arguments and results tiles
    over (`{devices=[4,1,2]<=[8] last_tile_dim_replicate}`: 8)."""
    most = 1
    for op in [module.operation] + _walk(module.operation):
        attrs = op.operation.attributes
        for k in range(len(attrs)):
            for tiles in _TILES_RE.findall(str(attrs[k].attr)):
                most = max(most, int(np.prod([int(t) for t in tiles.split(",")], dtype=np.int64)))
    return most


def _drop_entry_shardings(module: ir.Module) -> None:
    for op in module.body.operations:
        if op.operation.name != "func.func" or "sym_visibility" in op.operation.attributes:
            continue
        for key in ("arg_attrs", "res_attrs"):
            if key not in op.operation.attributes:
                continue
            kept = []
            for entry in ir.ArrayAttr(op.operation.attributes[key]):
                d = ir.DictAttr(entry)
                kept.append(ir.DictAttr.get({d[i].name: d[i].attr for i in range(len(d))
                                             if d[i].name != "mhlo.sharding"}))
            op.operation.attributes[key] = ir.ArrayAttr.get(kept)


def _inline_async(start) -> None:
    """`async_start` ... `async_done` -> the wrapped operation, where the start is: the ops
    of its region (`stablehlo.async_start`), or a call of its `called_computation`
    (`mhlo.async_start`). `async_update`s between them pass the bundle on."""
    chain, value = [start], start.results[0]
    while True:
        users = [use.owner for use in value.uses]
        if len(users) != 1:
            return  # (not the pair XLA writes: left for the decoder to report)
        user = users[0]
        user = user.operation if hasattr(user, "operation") else user
        chain.append(user)
        if user.name.endswith("async_done"):
            break
        if not user.name.endswith("async_update"):
            return
        value = user.results[0]
    done = chain[-1]
    if "called_computation" in start.attributes:
        callee = ir.FlatSymbolRefAttr(start.attributes["called_computation"])
        call = ir.Operation.create("func.call", results=[r.type for r in done.results],
                                   operands=list(start.operands),
                                   attributes={"callee": callee}, loc=start.location,
                                   ip=ir.InsertionPoint(start))
        values = list(call.results)
    else:
        block = start.regions[0].blocks[0]
        for arg, operand in zip(block.arguments, start.operands):
            arg.replace_all_uses_with(operand)
        ops = list(block.operations)
        values = list(ops[-1].operands)  # the region's return
        for op in ops[:-1]:
            op.operation.move_before(start)
    for result, value in zip(done.results, values):
        result.replace_all_uses_with(value)
    for op in reversed(chain):
        op.erase()


# XLA prints a large constant's data as `{...}` unless asked not to (dump .txt files and
# `Compiled.as_text()` do): jaxlib's parser reads it as a constant of zeros.
_ELIDED_CONSTANT_RE = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(\S+)\s+constant\(\{\.\.\.\}\)",
                                 re.MULTILINE)


def _refuse_elided_constants(text: str, where: str) -> None:
    elided = _ELIDED_CONSTANT_RE.findall(text)
    if elided:
        shown = ", ".join(f"%{name} {shape}" for name, shape in elided[:3])
        more = f" and {len(elided) - 3} more" if len(elided) > 3 else ""
        raise ElidedDataError(
            f"cannot read HLO text{where}: the data of {len(elided)} constant(s) is elided as "
            f"{{...}} ({shown}{more}), as XLA prints large constants by default; load the "
            "module's .hlo.pb (XLA_FLAGS=--xla_dump_hlo_as_proto) or text printed with "
            "print_large_constants")


# ----------------------------------------------------------------------- dump folders

def is_dump_folder(path: str) -> bool:
    """Whether the folder holds `--xla_dump_to` module files."""
    try:
        return any(_DUMP_FILE_RE.match(n) for n in os.listdir(path))
    except OSError:
        return False


def dump_file(path: str, module: Optional[str] = None) -> str:
    """The file in the dump folder `path` to read: the `before_optimizations` program (its
    `.hlo.pb`, else its text) of its one module, or of the module `module` names (see the module
    docstring). Several modules and no `module`, or a `module` that names none or several: a
    `LoadError` listing them."""
    modules: dict = {}  # (number, name) -> {(stage, ext): file}
    for n in sorted(os.listdir(path)):
        m = _DUMP_FILE_RE.match(n)
        if m:
            modules.setdefault((int(m.group(1)), m.group(2)), {})[(m.group(3), m.group(4))] = n
    if not modules:
        raise LoadError(f"{path} holds no XLA dump files (module_NNNN.NAME.before_optimizations.txt "
                        "or .hlo.pb): dump with XLA_FLAGS=--xla_dump_to=DIR")
    listing = ", ".join(f"module_{k[0]:04d}.{k[1]}" for k in sorted(modules))
    chosen = sorted(modules)
    if module is not None:
        exact = [k for k in chosen if module in (k[1], f"module_{k[0]:04d}.{k[1]}", str(k[0]),
                                                 f"{k[0]:04d}")]
        # TensorFlow's file names run past 100 characters (`a_inference_f_10__XlaMustCompile_
        # true_config_proto_<hash>_executor_type_<hash>_.3`): the start of one names it
        chosen = exact or [k for k in chosen if k[1].startswith(module)]
        if not chosen:
            raise LoadError(f"{path} holds no module {module!r}; it holds {listing}")
    if len(chosen) > 1:
        how = ("name one by its number or file prefix" if module is not None
               else "name one: load(DIR, module=NAME), or --module NAME")
        raise LoadError(f"{path} holds {len(chosen)} modules{' named ' + repr(module) if module else ''}: "
                        f"{', '.join(f'module_{k[0]:04d}.{k[1]}' for k in chosen)}; {how}")
    files = modules[chosen[0]]
    # the proto first: a text dump elides large constants as {...}
    for key in (("before_optimizations", "hlo.pb"), ("before_optimizations", "txt")):
        if key in files:
            return os.path.join(path, files[key])
    raise LoadError(f"{path}: module_{chosen[0][0]:04d}.{chosen[0][1]} has no before_optimizations "
                    f"dump (it has {', '.join(sorted(files.values()))}): load one of those files")


def read_dump_folder(path: str, module: Optional[str] = None) -> tuple:
    """(the file's bytes, its path) for the dump folder's program (see `dump_file`)."""
    name = dump_file(path, module)
    with open(name, "rb") as f:
        return f.read(), name
