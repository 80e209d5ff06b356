"""The flatbuffer of `Exported.serialize()`, read field by field with the flatbuffers runtime,
for the artifacts the installed jax refuses or misreads.

`jax.export.deserialize` reads only what its own release understands: jax 0.4.2x reads
serialization version 1 only, jax 0.4.30 version 2 only, jax 0.5-0.7 versions 2 and 3, and
jax after 0.11 refuses what jax 0.8.1 and older wrote (a 16-bit device count only); an older
jax also reads a newer artifact wrongly without complaint (jax 0.7 reads the device count of
a jax >= 0.9 artifact as 0: it moved to another field). Every field jax has ever
written keeps its slot in the schema (jax/_src/export/serialization.fbs; fields are only
added), so one reader of the slots below reads every version: 1 (jax 0.4.22-0.4.2x), 2
(0.4.30-0.7.x), 3 (stored by 0.8.x-0.11, schema versions 3-11 inside) and 12 (after 0.11).

Read here: the module bytes, the in/out avals (the per-value vectors of versions 1-11 or the
unique avals and indices of version 10 on), the pytree definitions, the device count (16- or
32-bit), the HloSharding protos, the platforms, the effects (by type name), the disabled
checks, the calling convention, the kept arguments, and the `vjp`, recursively. Named
shardings (versions 6 on) are read as unspecified: shlo2jax lays values out from the
module's own sharding attributes, and the `Exported` built here keeps `in_shardings_hlo`
None for them.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Optional

import flatbuffers
import jax
import ml_dtypes
import numpy as np
from flatbuffers import number_types as N

from shlo2jax import compat
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


class NotAnExport(Exception):
    """The bytes are not a flatbuffer table at all (read as MLIR instead)."""


class NewerThanReader(LoadError):
    """A value this reader does not know (an enum code, a field in a known field's place):
    a newer jax wrote it, and the installed jax, where newer still, may read it."""


@dataclasses.dataclass(frozen=True)
class Aval:
    shape: tuple  # the dimensions as jax wrote them: "3", "b", "2*b"
    dtype: str    # a name of _DTYPES


@dataclasses.dataclass(frozen=True)
class Tree:
    kind: str
    children: tuple = ()
    names: tuple = ()        # dict keys
    custom_name: str = ""


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
    in_shardings: tuple      # HloSharding proto bytes, or None (unspecified or named)
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
        in_shardings=_shardings(t.tables(IN_SHARDINGS), len(in_avals)),
        out_shardings=_shardings(t.tables(OUT_SHARDINGS), len(out_avals)),
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
    code = t.scalar(2, N.Uint8Flags)
    if code not in _DTYPES:
        raise NewerThanReader(f"jax.export artifact: an aval of dtype code {code}, which no "
                              f"jax this reader knows writes (known: 0-{max(_DTYPES)})")
    return Aval(tuple(t.strings(1) or ()), _DTYPES[code])


def _tree(t: _Table, depth: int) -> Tree:
    if depth > 1000:
        raise LoadError("corrupt jax.export artifact: a pytree nested deeper than 1000")
    code = t.scalar(0, N.Int8Flags)
    if code not in _PYTREE_KINDS:
        raise NewerThanReader(f"jax.export artifact: a pytree node of kind {code}, which this "
                              "reader does not know (a newer jax wrote it)")
    return Tree(_PYTREE_KINDS[code], tuple(_tree(c, depth + 1) for c in t.tables(1) or ()),
                tuple(t.strings(2) or ()), t.string(3) or "")


def _shardings(tables, n: int) -> tuple:
    if tables is None:  # version 10 on: indices into the named shardings only
        return (None,) * n
    out = []
    for s in tables:
        proto = s.bytes_view(1)
        out.append(bytes(proto) if proto is not None and not s.has(2) else None)
    return tuple(out)


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


# ---------------------------------------------------------------- the installed jax's Exported

def to_exported(rec: SerializedExport):
    """A `jax.export.Exported` of the installed jax holding `rec`'s fields (a `LoadError`
    where a field holds what the installed jax cannot take: a corrupt sharding proto)."""
    try:
        return _to_exported(rec)
    except LoadError:
        raise
    except Exception as e:  # noqa: BLE001 - corrupt contents: a LoadError, never a crash
        raise LoadError(f"{rec.describe()}: cannot make an Exported of it: "
                        f"{type(e).__name__}: {e}") from None


def _to_exported(rec: SerializedExport):
    where = rec.describe()
    scope = jax.export.SymbolicScope()
    in_avals = tuple(_shaped(a, scope, where) for a in rec.in_avals)
    out_avals = tuple(_shaped(a, scope, where) for a in rec.out_avals)
    vjp = rec.vjp
    return compat.make_exported(
        fun_name=rec.fun_name,
        in_tree=_treedef(rec.in_tree, where),
        in_avals=in_avals,
        out_tree=_treedef(rec.out_tree, where),
        out_avals=out_avals,
        in_shardings_hlo=tuple(_hlo_sharding(p) for p in rec.in_shardings),
        out_shardings_hlo=tuple(_hlo_sharding(p) for p in rec.out_shardings),
        nr_devices=rec.nr_devices,
        platforms=rec.platforms,
        ordered_effects=tuple(_effect(e, where) for e in rec.ordered_effects),
        unordered_effects=tuple(_effect(e, where) for e in rec.unordered_effects),
        disabled_safety_checks=tuple(c for c in map(_disabled_check, rec.disabled_checks)
                                     if c is not None),
        mlir_module_serialized=bytes(rec.module),
        calling_convention_version=rec.calling_convention_version,
        module_kept_var_idx=rec.module_kept_var_idx,
        uses_global_constants=rec.uses_global_constants,
        _get_vjp=None if vjp is None else (lambda _: to_exported(vjp)),
    )


def agrees(exported, rec: SerializedExport) -> bool:
    """Whether `exported` (the installed jax's reading) holds what `rec` says of what shlo2jax
    uses: an older jax reads a newer artifact without error but leaves out what moved."""
    def same(avals, recs):
        return len(avals) == len(recs) and all(
            len(a.shape) == len(r.shape) and _dtype_name(a.dtype) == r.dtype and all(
                not isinstance(d, int) or not s.isdigit() or d == int(s)
                for d, s in zip(a.shape, r.shape))
            for a, r in zip(avals, recs))
    return (same(exported.in_avals, rec.in_avals) and same(exported.out_avals, rec.out_avals)
            and exported.nr_devices == rec.nr_devices
            and tuple(exported.platforms) == rec.platforms
            and tuple(exported.module_kept_var_idx) == rec.module_kept_var_idx
            and exported.calling_convention_version == rec.calling_convention_version
            and exported.has_vjp() == (rec.vjp is not None))


def _dtype_name(dtype) -> str:
    return "float0" if dtype == jax.dtypes.float0 else np.dtype(dtype).name


def _numpy_dtype(name: str, where: str):
    if name == "float0":
        return jax.dtypes.float0
    if name.startswith("key<"):
        raise LoadError(f"{where}: a PRNG key ({name}) in its signature; shlo2jax reads "
                        "arrays only")
    if hasattr(np, name) and name not in ("bool",):
        return np.dtype(name)
    if name == "bool":
        return np.dtype(np.bool_)
    if hasattr(ml_dtypes, name):
        return np.dtype(getattr(ml_dtypes, name))
    raise LoadError(f"{where}: dtype {name}, which this ml_dtypes ({ml_dtypes.__version__}) "
                    "does not have")


def _shaped(aval: Aval, scope, where: str):
    try:
        shape = jax.export.symbolic_shape(",".join(aval.shape), scope=scope)
    except Exception as e:  # noqa: BLE001 - jax's shape parser: the message names the dimension
        raise LoadError(f"{where}: cannot read the shape ({', '.join(aval.shape)}): {e}") from None
    return jax.core.ShapedArray(shape, _numpy_dtype(aval.dtype, where))


def _treedef(tree: Tree, where: str):
    counter = iter(range(1 << 30))

    def build(node: Tree):
        children = [build(c) for c in node.children]
        if node.kind == "leaf":
            return next(counter)
        if node.kind == "none":
            return None
        if node.kind == "tuple":
            return tuple(children)
        if node.kind == "list":
            return children
        if node.kind == "dict":
            if len(node.names) != len(children):
                raise LoadError(f"{where}: a dict node with {len(node.names)} keys and "
                                f"{len(children)} children")
            return dict(zip(node.names, children))
        raise LoadError(f"{where}: a custom pytree node {node.custom_name!r}, which "
                        "jax.export.deserialize reads only where its type is registered "
                        "(jax.export.register_pytree_node_serialization)")
    return jax.tree_util.tree_structure(build(tree))


def _hlo_sharding(proto: Optional[bytes]):
    return None if proto is None else compat.hlo_sharding_from_proto(proto)


def _effect(type_name: str, where: str):
    effect = compat.effect_from_type_name(type_name)
    if effect is None:
        raise LoadError(f"{where}: effect {type_name}, which no module of this jax "
                        f"({jax.__version__}) registers")
    return effect


def _disabled_check(check):
    kind, target = check
    if kind == "custom_call":
        return jax.export.DisabledSafetyCheck.custom_call(target)
    if kind == "platform":
        return jax.export.DisabledSafetyCheck.platform()
    # shape_assertions (jax 0.4.2x): jax removed the check it disabled; nothing to carry
    return None
