"""The flatbuffer of `Exported.serialize()`, read field by field with the flatbuffers runtime:
how shlo2jax reads every serialized `jax.export` artifact, whatever jax is installed.

`jax.export.deserialize` reads only what its own release understands: jax 0.4.2x reads
serialization version 1 only, jax 0.4.30 version 2 only, jax 0.5-0.7 versions 2 and 3, and
jax 0.11 on refuse what jax 0.8.1 and older wrote (a 16-bit device count only, HloSharding
protos); an older jax also reads a newer artifact wrongly without complaint (jax 0.7 reads
the device count of a jax >= 0.9 artifact as 0: it moved to another field). Every field jax
has ever written keeps its slot in the schema (jax/_src/export/serialization.fbs; fields are
only added), so one reader of the slots below reads every version: 1 (jax 0.4.22-0.4.2x), 2
(0.4.30-0.7.x), 3 (stored by 0.8.x-0.10, schema versions 3-11 inside) and 12 (jax 0.11 on:
the real version stored, and the writer's `jax_version`; the schema of jax 0.11.2 and
0.12.0.1 is the same, 27 fields of `Exported`).

Read here, into plain Python values (no jax object: `sources.jax_export.ExportRecord` makes
the jax view of them): the module bytes, the in/out avals (the per-value vectors of versions
1-11 or the unique avals and indices of version 10 on), the pytree definitions, the device
count (16- or 32-bit), the shardings (HloSharding proto bytes, or the named shardings of
schema version 6 on with their abstract meshes, inline or by index into the unique ones),
the platforms, the effects (by type name), the disabled checks, the calling convention, the
kept arguments, the writer's jax version, and the `vjp`, recursively.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Optional

import flatbuffers
import numpy as np
from flatbuffers import number_types as N

from shlo2jax.errors import LoadError

# The slots of table `Exported` (its fields in schema order; never renumbered).
SERIALIZATION_VERSION, FUNCTION_NAME, IN_TREE, IN_AVALS, OUT_TREE, OUT_AVALS = range(6)
NR_DEVICES_SHORT, IN_SHARDINGS, OUT_SHARDINGS, PLATFORMS, ORDERED_EFFECTS = range(6, 11)
UNORDERED_EFFECTS, DISABLED_CHECKS, MLIR_MODULE, CALLING_CONVENTION = range(11, 15)
MODULE_KEPT_VAR_IDX, USES_GLOBAL_CONSTANTS, VJP, NR_DEVICES = range(15, 19)
UNIQUE_AVALS, UNIQUE_ABSTRACT_MESHES, UNIQUE_NAMED_SHARDINGS = range(19, 22)
IN_AVALS_IDXS, OUT_AVALS_IDXS, IN_SHARDINGS_IDXS, OUT_SHARDINGS_IDXS, JAX_VERSION = range(22, 27)
KNOWN_SLOTS = 27

# enum DType (values fixed in the schema; 22 and on added later)
_DTYPES = {0: "bool", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "uint8", 6: "uint16",
           7: "uint32", 8: "uint64", 9: "float16", 10: "float32", 11: "float64",
           12: "complex64", 13: "complex128", 14: "bfloat16", 15: "int4", 16: "uint4",
           17: "float8_e4m3b11fnuz", 18: "float8_e4m3fn", 19: "float8_e4m3fnuz",
           20: "float8_e5m2", 21: "float8_e5m2fnuz", 22: "float0", 23: "float8_e4m3",
           24: "float8_e3m4", 25: "float8_e8m0fnu", 26: "float4_e2m1fn", 27: "key<fry>",
           28: "key<rbg>", 29: "key<unsafe_rbg>"}
_PYTREE_KINDS = {0: "leaf", 1: "none", 2: "tuple", 3: "list", 4: "dict", 5: "custom"}
_CHECK_PLATFORM, _CHECK_CUSTOM_CALL, _CHECK_SHAPE_ASSERTIONS = 0, 1, 2
_MEMORY_SPACES = {0: "device", 1: "device", 2: "host", 3: "any"}  # Missing, Device, Host, Any
_AXIS_TYPES = {0: "auto", 1: "auto", 2: "explicit", 3: "manual"}  # Missing, Auto, Explicit, ...
_AVAL_SHAPED_ARRAY, _AVAL_TOKEN = 0, 1
_SHARDING_UNSPECIFIED, _SHARDING_HLO, _SHARDING_NAMED = 0, 1, 2


class NotAnExport(Exception):
    """The bytes are not a flatbuffer table at all (read as MLIR instead)."""


class NewerThanReader(LoadError):
    """A value this reader does not know (an enum code, a field in a known field's place):
    a newer jax wrote it, and the installed jax, where newer still, may read it."""


@dataclasses.dataclass(frozen=True)
class Aval:
    shape: tuple  # the dimensions as jax wrote them: "3", "b", "2*b"
    dtype: str    # a name of _DTYPES
    memory_space: str = "device"  # schema version 5 on: _MEMORY_SPACES


@dataclasses.dataclass(frozen=True)
class Mesh:
    """An abstract mesh (schema version 6 on): axis names, sizes and types, and the abstract
    device (kind, cores, platform) where one was written."""
    axis_names: tuple
    axis_sizes: tuple
    axis_types: tuple        # names of _AXIS_TYPES
    device: Optional[tuple] = None


@dataclasses.dataclass(frozen=True)
class NamedSharding:
    """A named sharding as written: its mesh, its partition spec (per dimension: None or a
    tuple of mesh axis names), the reduced and unreduced axes, and the memory kind."""
    mesh: Mesh
    partitions: tuple
    reduced: tuple = ()
    unreduced: tuple = ()
    memory_kind: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Tree:
    kind: str
    children: tuple = ()
    names: tuple = ()        # dict keys
    custom_name: str = ""    # a custom node's registered serialization name
    custom_auxdata: bytes = b""


@dataclasses.dataclass(frozen=True)
class SerializedExport:
    """The fields of one serialized `Exported`, as written."""
    serialization_version: int
    jax_version: Optional[str]
    fun_name: str
    in_tree: Tree
    in_avals: tuple
    out_tree: Tree
    out_avals: tuple
    nr_devices: int
    in_shardings: tuple      # per value: HloSharding proto bytes, a NamedSharding, or None
    out_shardings: tuple
    platforms: tuple
    ordered_effects: tuple   # effect type names
    unordered_effects: tuple
    disabled_checks: tuple   # ("platform", None) / ("custom_call", target)
    module: memoryview
    calling_convention_version: int
    module_kept_var_idx: tuple
    uses_global_constants: bool
    vjp: Optional["SerializedExport"]
    unknown_slots: tuple     # slots set that this reader does not know (a newer writer)

    def describe(self) -> str:
        by = f", written by jax {self.jax_version}" if self.jax_version else ""
        return (f"jax.export artifact {self.fun_name} (serialization version "
                f"{self.serialization_version}, calling convention "
                f"{self.calling_convention_version}{by})")


class _Table:
    """One flatbuffer table, read by slot; every read bounds-checked against the buffer."""

    def __init__(self, buf: bytes, pos: int):
        if not 0 <= pos <= len(buf) - 4:
            raise IndexError(f"table at {pos} outside the {len(buf)} bytes")
        self.buf = buf
        self.tab = flatbuffers.table.Table(buf, pos)
        vtable = pos - struct.unpack_from("<i", buf, pos)[0]
        if not 0 <= vtable <= len(buf) - 4:
            raise IndexError(f"vtable at {vtable} outside the {len(buf)} bytes")
        self.vtable_slots = (struct.unpack_from("<H", buf, vtable)[0] - 4) // 2

    def _at(self, slot: int) -> int:
        off = self.tab.Offset(4 + 2 * slot) if slot < self.vtable_slots else 0
        return off + self.tab.Pos if off else 0

    def has(self, slot: int) -> bool:
        return bool(self._at(slot))

    def scalar(self, slot: int, flags, default=0):
        at = self._at(slot)
        return self.tab.Get(flags, at) if at else default

    def string(self, slot: int) -> Optional[str]:
        at = self._at(slot)
        return self._string(at) if at else None

    def _string(self, at: int) -> str:
        start = at + N.UOffsetTFlags.py_type(struct.unpack_from("<I", self.buf, at)[0])
        n = struct.unpack_from("<I", self.buf, start)[0]
        if start + 4 + n > len(self.buf):
            raise IndexError(f"a string of {n} bytes at {start} past the end")
        return bytes(self.buf[start + 4:start + 4 + n]).decode("utf-8")

    def table(self, slot: int) -> Optional["_Table"]:
        at = self._at(slot)
        return _Table(self.buf, self.tab.Indirect(at)) if at else None

    def _vector(self, slot: int, elem: int):
        at = self._at(slot)
        if not at:
            return None, 0
        start = self.tab.Vector(at - self.tab.Pos)
        n = self.tab.VectorLen(at - self.tab.Pos)
        if start + n * elem > len(self.buf):
            raise IndexError(f"a vector of {n} elements at {start} past the end")
        return start, n

    def tables(self, slot: int) -> Optional[list]:
        start, n = self._vector(slot, 4)
        if start is None:
            return None
        return [_Table(self.buf, self.tab.Indirect(start + 4 * i)) for i in range(n)]

    def strings(self, slot: int) -> Optional[list]:
        start, n = self._vector(slot, 4)
        return None if start is None else [self._string(start + 4 * i) for i in range(n)]

    def numbers(self, slot: int, dtype) -> Optional[np.ndarray]:
        dtype = np.dtype(dtype).newbyteorder("<")
        start, n = self._vector(slot, dtype.itemsize)
        if start is None:
            return None
        return np.frombuffer(self.buf, dtype, n, start)

    def bytes_view(self, slot: int) -> Optional[memoryview]:
        start, n = self._vector(slot, 1)
        return None if start is None else memoryview(self.buf)[start:start + n]


def read(data: bytes) -> SerializedExport:
    """The serialized `Exported` in `data`: `NotAnExport` where `data` is no flatbuffer table,
    `LoadError` where it is one but not a readable `Exported`."""
    buf = data if isinstance(data, (bytes, bytearray)) else bytes(data)  # read in place
    try:
        if len(buf) < 8:
            raise IndexError("shorter than a flatbuffer header")
        root = _Table(buf, flatbuffers.encode.Get(N.UOffsetTFlags.packer_type, buf, 0))
    except (IndexError, struct.error) as e:
        raise NotAnExport(str(e)) from None
    if not root.has(MLIR_MODULE):
        raise NotAnExport("no module bytes where an Exported keeps them")
    try:
        return _exported(root, depth=0)
    except LoadError:
        raise
    except Exception as e:  # noqa: BLE001 - any malformed offset: a LoadError, never a crash
        raise LoadError(f"corrupt jax.export artifact: {type(e).__name__}: {e}") from None


def _exported(t: _Table, depth: int) -> SerializedExport:
    if depth > 16:
        raise LoadError("corrupt jax.export artifact: VJPs nested deeper than 16")
    version = t.scalar(SERIALIZATION_VERSION, N.Uint16Flags)
    name = t.string(FUNCTION_NAME) or ""
    unknown = tuple(s for s in range(KNOWN_SLOTS, t.vtable_slots) if t.has(s))

    def missing(what):
        newer = (f"; it sets field(s) {list(unknown)} this reader does not know (a newer jax "
                 "wrote it)") if unknown else ""
        return NewerThanReader(f"jax.export artifact {name} (serialization version {version}) "
                               f"has no {what} where shlo2jax reads it{newer}")

    unique = t.tables(UNIQUE_AVALS)
    unique = None if unique is None else [_aval(a) for a in unique]

    def avals(per_value, idxs, what):
        index = t.numbers(idxs, np.uint32)
        if index is not None and unique is not None:
            if index.size and int(index.max()) >= len(unique):
                raise LoadError(f"corrupt jax.export artifact {name}: aval index out of range")
            return tuple(unique[int(i)] for i in index)
        values = t.tables(per_value)
        if values is None:
            raise missing(what)
        return tuple(_aval(a) for a in values)

    meshes = t.tables(UNIQUE_ABSTRACT_MESHES)
    meshes = None if meshes is None else [_mesh(m) for m in meshes]
    named = t.tables(UNIQUE_NAMED_SHARDINGS)
    named = None if named is None else [_named_sharding(s, meshes) for s in named]

    def shardings(per_value, idxs, n, what):
        index = t.numbers(idxs, np.uint32)
        if index is not None and named is not None:  # 0: unspecified, 1 + i: named[i]
            if index.size != n or (index.size and int(index.max()) > len(named)):
                raise LoadError(f"corrupt jax.export artifact {name}: {what} indices do not "
                                f"match its {n} values and {len(named)} named shardings")
            return tuple(None if i == 0 else named[int(i) - 1] for i in index)
        tables = t.tables(per_value)
        if tables is None:
            return (None,) * n
        if len(tables) != n:
            raise LoadError(f"corrupt jax.export artifact {name}: {len(tables)} {what} for "
                            f"{n} values")
        return tuple(_sharding(s, meshes) for s in tables)

    in_avals = avals(IN_AVALS, IN_AVALS_IDXS, "input avals")
    out_avals = avals(OUT_AVALS, OUT_AVALS_IDXS, "output avals")
    module = t.bytes_view(MLIR_MODULE)
    kept = t.numbers(MODULE_KEPT_VAR_IDX, np.uint16)
    vjp = t.table(VJP)
    return SerializedExport(
        serialization_version=version,
        jax_version=t.string(JAX_VERSION),
        fun_name=name,
        in_tree=_tree(t.table(IN_TREE), 0) if t.has(IN_TREE) else Tree("tuple", tuple(
            Tree("leaf") for _ in in_avals)),
        in_avals=in_avals,
        out_tree=_tree(t.table(OUT_TREE), 0) if t.has(OUT_TREE) else Tree("tuple", tuple(
            Tree("leaf") for _ in out_avals)),
        out_avals=out_avals,
        nr_devices=t.scalar(NR_DEVICES, N.Uint32Flags) or t.scalar(NR_DEVICES_SHORT, N.Int16Flags),
        in_shardings=shardings(IN_SHARDINGS, IN_SHARDINGS_IDXS, len(in_avals), "input shardings"),
        out_shardings=shardings(OUT_SHARDINGS, OUT_SHARDINGS_IDXS, len(out_avals),
                                "output shardings"),
        platforms=tuple(t.strings(PLATFORMS) or ()),
        ordered_effects=tuple(e.string(0) or "" for e in t.tables(ORDERED_EFFECTS) or ()),
        unordered_effects=tuple(e.string(0) or "" for e in t.tables(UNORDERED_EFFECTS) or ()),
        disabled_checks=tuple(_check(c) for c in t.tables(DISABLED_CHECKS) or ()),
        module=module,
        calling_convention_version=t.scalar(CALLING_CONVENTION, N.Uint16Flags),
        module_kept_var_idx=tuple(range(len(in_avals))) if kept is None else tuple(
            int(i) for i in kept),
        uses_global_constants=bool(t.scalar(USES_GLOBAL_CONSTANTS, N.BoolFlags, False)),
        vjp=None if vjp is None else _exported(vjp, depth + 1),
        unknown_slots=unknown,
    )


def _aval(t: _Table) -> Aval:
    if t.scalar(0, N.Int8Flags) == _AVAL_TOKEN:
        return Aval((), "token")
    code = t.scalar(2, N.Uint8Flags)
    if code not in _DTYPES:
        raise NewerThanReader(f"jax.export artifact: an aval of dtype code {code}, which no "
                              f"jax this reader knows writes (known: 0-{max(_DTYPES)})")
    space = t.scalar(3, N.Int8Flags)
    if space not in _MEMORY_SPACES:
        raise NewerThanReader(f"jax.export artifact: an aval in memory space {space}, which "
                              "this reader does not know")
    return Aval(tuple(t.strings(1) or ()), _DTYPES[code], _MEMORY_SPACES[space])


def _tree(t: _Table, depth: int) -> Tree:
    if depth > 1000:
        raise LoadError("corrupt jax.export artifact: a pytree nested deeper than 1000")
    code = t.scalar(0, N.Int8Flags)
    if code not in _PYTREE_KINDS:
        raise NewerThanReader(f"jax.export artifact: a pytree node of kind {code}, which this "
                              "reader does not know (a newer jax wrote it)")
    aux = t.bytes_view(4)
    return Tree(_PYTREE_KINDS[code], tuple(_tree(c, depth + 1) for c in t.tables(1) or ()),
                tuple(t.strings(2) or ()), t.string(3) or "", b"" if aux is None else bytes(aux))


def _sharding(t: _Table, meshes):
    named = t.table(2)
    if named is not None:
        return _named_sharding(named, meshes)
    proto = t.bytes_view(1)
    return None if proto is None else bytes(proto)


def _named_sharding(t: _Table, meshes) -> NamedSharding:
    if meshes:  # by index into the unique meshes (jax reads those first where written)
        index = t.scalar(3, N.Uint32Flags)
        if index >= len(meshes):
            raise LoadError("corrupt jax.export artifact: a mesh index out of range")
        mesh = meshes[index]
    else:
        inline = t.table(0)
        mesh = Mesh((), (), ()) if inline is None else _mesh(inline)
    spec = t.table(1)
    partitions, reduced, unreduced = (), (), ()
    if spec is not None:
        partitions = tuple(tuple(p.strings(0) or ()) or None for p in spec.tables(0) or ())
        reduced, unreduced = tuple(spec.strings(1) or ()), tuple(spec.strings(2) or ())
    return NamedSharding(mesh, partitions, reduced, unreduced, t.string(2))


def _mesh(t: _Table) -> Mesh:
    sizes = t.numbers(0, np.uint32)
    names = tuple(t.strings(1) or ())
    codes = t.numbers(2, np.int8)
    types = ()
    if codes is not None:
        unknown = sorted({int(c) for c in codes} - set(_AXIS_TYPES))
        if unknown:
            raise NewerThanReader(f"jax.export artifact: a mesh axis type {unknown[0]}, which "
                                  "this reader does not know")
        types = tuple(_AXIS_TYPES[int(c)] for c in codes)
    sizes = () if sizes is None else tuple(int(n) for n in sizes)
    if len(sizes) != len(names):
        raise LoadError(f"corrupt jax.export artifact: a mesh of {len(sizes)} sizes and "
                        f"{len(names)} axis names")
    device = t.table(3)
    if device is not None:
        device = (device.string(0), device.scalar(1, N.Uint32Flags, None), device.string(2))
    return Mesh(names, sizes, types, device)


def _check(t: _Table):
    kind = t.scalar(0, N.Int8Flags)
    if kind == _CHECK_CUSTOM_CALL:
        return ("custom_call", t.string(1) or "")
    if kind == _CHECK_PLATFORM:
        return ("platform", None)
    if kind == _CHECK_SHAPE_ASSERTIONS:
        return ("shape_assertions", None)
    raise NewerThanReader(f"jax.export artifact: a disabled safety check of kind {kind}, "
                          "which this reader does not know")
