"""`jax.export` artifacts: an `Exported`, or the bytes of `Exported.serialize()`, read into
shlo2jax's own description of an export, an `ExportRecord`.

The module inside is read like any MLIR source; the record travels with it, for the calling
convention of its entry function (`shlo2jax.conventions.exported`), its argument names and
the producer's VJP. Nothing on the way (load, call, grad, vmap) asks the installed jax to
read the artifact or builds a jax `Exported`:

- serialized bytes are always read by shlo2jax's flatbuffer reader
  (`sources.export_flatbuffer`), every serialization version jax has written (1, 2, 3, 12),
  whatever jax is installed, including those it refuses (too old or newer than it) or
  misreads;
- a live `jax.export.Exported` the user passes is read through its public attributes
  (`sources.export_compat.record_of`, tolerant of what differs between jax releases).

`Function.exported` still gives a jax `Exported` of the installed jax where that jax
can represent the artifact (`sources.export_compat.jax_exported`), on request only.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import jax
import ml_dtypes
import numpy as np
from jax import export as _jax_export
from jaxlib.mlir import ir

from shlo2jax.errors import LoadError
from shlo2jax.sources import export_flatbuffer
from shlo2jax.sources.mlir import parse_mlir, vhlo_version  # noqa: F401  (vhlo_version: its API)

# The calling conventions of the `Exported` module that jax has written by default (8 in jax
# 0.4.2x, 9 in 0.4.30-0.6.x, 10 from 0.7) and that shlo2jax.s exported convention follows.
CALLING_CONVENTIONS = (8, 9, 10)


@dataclasses.dataclass(frozen=True, eq=False)
class ExportRecord:
    """What shlo2jax knows of one export, whichever jax wrote it and whichever is installed.

    `in_avals`/`out_avals`: `jax.ShapeDtypeStruct`s (a shape-polymorphic dimension is a
    `jax.export.symbolic_shape` dimension); `in_tree`/`out_tree`: `PyTreeDef`s (a custom
    node is read as a tuple of its children, its serialized name in `custom_nodes`: the flat
    values are the same; see `_treedef`). Shardings as read:
    per value HloSharding proto bytes, an `export_flatbuffer.NamedSharding`, or None
    (unspecified); for a live `Exported`, jax's own sharding objects. Effects by type name
    (as jax serializes them), disabled checks as `(kind, custom call target or None)`.
    `mlir_module_serialized`: the module bytes (b"" once the program let them go, and the
    serialized bytes, `serialized`, go with them). The VJP (`vjp()`) is read on request.
    """
    fun_name: str
    in_tree: jax.tree_util.PyTreeDef
    in_avals: tuple
    out_tree: jax.tree_util.PyTreeDef
    out_avals: tuple
    nr_devices: int
    in_shardings: tuple
    out_shardings: tuple
    platforms: tuple
    ordered_effects: tuple
    unordered_effects: tuple
    disabled_checks: tuple
    mlir_module_serialized: object
    calling_convention_version: int
    module_kept_var_idx: tuple
    uses_global_constants: bool
    serialization_version: Optional[int] = None  # None: read from a live Exported
    jax_version: Optional[str] = None            # the writer's, where it says (version 12 on)
    custom_nodes: tuple = ()
    get_vjp: Optional[Callable[[], "ExportRecord"]] = None
    origin: object = None       # the live jax Exported it was read from
    serialized: object = None   # the bytes it was read from

    def __post_init__(self):
        # The serialized bytes are kept while the module bytes are read from them: gone with
        # the module bytes (they hold them: the weights), or stale beside other module bytes.
        module = self.mlir_module_serialized
        if self.serialized is not None and not (
                isinstance(module, memoryview) and module.obj is self.serialized):
            object.__setattr__(self, "serialized", None)

    def has_vjp(self) -> bool:
        return self.get_vjp is not None

    def vjp(self) -> "ExportRecord":
        """The record of the producer's VJP (`serialize(vjp_order >= 1)`)."""
        if self.get_vjp is None:
            raise LoadError(f"{self.describe()} carries no VJP")
        return self.get_vjp()

    def describe(self) -> str:
        if self.serialization_version is None:
            return f"jax.export artifact {self.fun_name}"
        by = f", written by jax {self.jax_version}" if self.jax_version else ""
        return (f"jax.export artifact {self.fun_name} (serialization version "
                f"{self.serialization_version}, calling convention "
                f"{self.calling_convention_version}{by})")


def is_exported(source) -> bool:
    return isinstance(source, (_jax_export.Exported, ExportRecord))


def deserialize(data) -> Optional[ExportRecord]:
    """The export serialized in `data` (bytes of `Exported.serialize()`, read in place), or
    None when `data` is not one (MLIR text or bytecode). Read by the flatbuffer reader alone,
    whatever jax is installed; a malformed artifact raises `LoadError`."""
    stripped = data[:4096].lstrip()  # (a slice: the artifact's bytes are not copied)
    if stripped[:1] in (b"m", b"f", b"/", b"#", b"!") or stripped.startswith(b"module"):
        return None  # MLIR text
    try:
        serialized = export_flatbuffer.read(data)
    except export_flatbuffer.NotAnExport:
        return None
    return from_serialized(serialized, data)


def from_serialized(rec: export_flatbuffer.SerializedExport, data=None) -> ExportRecord:
    """The record of what the flatbuffer reader read (`data`: the bytes it read, kept for
    `export_compat.jax_exported` while the module bytes are)."""
    where = rec.describe()
    try:
        scope = _jax_export.SymbolicScope()
        custom: list = []
        vjp = rec.vjp
        in_tree = _treedef(rec.in_tree, where, custom)
        out_tree = _treedef(rec.out_tree, where, custom)
        _check_leaves(in_tree, rec.in_avals, "inputs", where)
        _check_leaves(out_tree, rec.out_avals, "outputs", where)
        return ExportRecord(
            fun_name=rec.fun_name,
            in_tree=in_tree,
            in_avals=tuple(_shaped(a, scope, where) for a in rec.in_avals),
            out_tree=out_tree,
            out_avals=tuple(_shaped(a, scope, where) for a in rec.out_avals),
            nr_devices=rec.nr_devices,
            in_shardings=rec.in_shardings,
            out_shardings=rec.out_shardings,
            platforms=rec.platforms,
            ordered_effects=rec.ordered_effects,
            unordered_effects=rec.unordered_effects,
            disabled_checks=rec.disabled_checks,
            mlir_module_serialized=rec.module,
            calling_convention_version=rec.calling_convention_version,
            module_kept_var_idx=rec.module_kept_var_idx,
            uses_global_constants=rec.uses_global_constants,
            serialization_version=rec.serialization_version,
            jax_version=rec.jax_version,
            custom_nodes=tuple(dict.fromkeys(custom)),
            get_vjp=None if vjp is None else (lambda: from_serialized(vjp)),
            serialized=data,
        )
    except LoadError:
        raise
    except Exception as e:  # noqa: BLE001 - malformed contents: a LoadError, never a crash
        raise LoadError(f"{where}: cannot read it: {type(e).__name__}: {e}") from None


def _check_leaves(tree, avals, what: str, where: str) -> None:
    """A pytree and its avals are two fields of the flatbuffer: a corrupt one would make every
    call a TypeError about argument counts the artifact itself disagrees on."""
    if tree.num_leaves != len(avals):
        raise LoadError(f"{where}: corrupt: the pytree of its {what} has {tree.num_leaves} "
                        f"leaves, its {what} {len(avals)} avals")


def module_bytes(exported) -> bytes:
    return bytes(exported.mlir_module_serialized)


def read_module(record: ExportRecord, context: ir.Context) -> ir.Module:
    """The verified module of `record`, once its calling convention is one shlo2jax follows.
    A module this jaxlib cannot read that was written for a newer StableHLO than this jaxlib
    reads (VHLO's forward window) is a `LoadError` naming both versions."""
    name = source_name(record)
    version = record.calling_convention_version
    if version not in CALLING_CONVENTIONS:
        raise LoadError(f"{name}: calling convention {version}; shlo2jax follows the calling "
                        f"conventions {', '.join(map(str, CALLING_CONVENTIONS))}")
    data = module_bytes(record)
    # (a module newer than jaxlib reads: parse_mlir's NewerThanJaxlib names both versions)
    return parse_mlir(data, context, name)


def source_name(exported) -> str:
    return f"jax.export:{exported.fun_name}"


# ---------------------------------------------------------------- the flatbuffer's values

def _numpy_dtype(name: str, where: str):
    if name == "float0":
        return jax.dtypes.float0
    if name == "token":
        raise LoadError(f"{where}: a token in its signature; shlo2jax reads arrays only")
    if name.startswith("key<"):
        raise LoadError(f"{where}: a PRNG key ({name}) in its signature; shlo2jax reads "
                        "arrays only")
    if name == "bool":
        return np.dtype(np.bool_)
    if hasattr(np, name):
        return np.dtype(name)
    if hasattr(ml_dtypes, name):
        return np.dtype(getattr(ml_dtypes, name))
    raise LoadError(f"{where}: dtype {name}, which this ml_dtypes ({ml_dtypes.__version__}) "
                    "does not have")


def _shaped(aval: export_flatbuffer.Aval, scope, where: str) -> jax.ShapeDtypeStruct:
    dtype = _numpy_dtype(aval.dtype, where)
    if all(d.isdigit() for d in aval.shape):
        return jax.ShapeDtypeStruct(tuple(int(d) for d in aval.shape), dtype)
    try:
        shape = _jax_export.symbolic_shape(",".join(aval.shape), scope=scope)
    except Exception as e:  # noqa: BLE001 - jax's shape parser: the message names the dimension
        raise LoadError(f"{where}: cannot read the shape ({', '.join(aval.shape)}): {e}") from None
    return jax.ShapeDtypeStruct(shape, dtype)


def _treedef(tree: export_flatbuffer.Tree, where: str, custom: list):
    counter = iter(range(1 << 30))

    def build(node: export_flatbuffer.Tree):
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
        # a custom node: its children, in order (the same flat values). The serialization
        # jax registers for it (`register_pytree_node_serialization`) is a jax internal that
        # `shlo2jax.compat` does not offer; `Function.exported` gives jax's own
        # reading of the bytes where jax reads them.
        custom.append(node.custom_name)
        return tuple(children)
    return jax.tree_util.tree_structure(build(tree))
