"""`jax.export` artifacts: an `Exported`, or the bytes of `Exported.serialize()`.

The module inside is read like any MLIR source; the `Exported` travels with it, for the
calling convention of its entry function (`shlo2jax.executables.exported`).

Serialized bytes of every serialization version jax has written are read: by
`jax.export.deserialize` where the installed jax reads them right, else field by field from
the flatbuffer (`sources.export_flatbuffer`): the artifacts it refuses (too old or newer than
it understands) and those it misreads (an older jax reading a newer artifact).
"""

from __future__ import annotations

from typing import Optional

from jax import export as jax_export
from jaxlib.mlir import ir

from shlo2jax.errors import LoadError
from shlo2jax.sources import export_flatbuffer
from shlo2jax.sources.mlir import parse_mlir, vhlo_version  # noqa: F401  (vhlo_version: its API)

# The calling conventions of the `Exported` module that jax has written by default (8 in jax
# 0.4.2x, 9 in 0.4.30-0.7.x, 10 from 0.8) and that shlo2jax's ExportedFunction follows.
CALLING_CONVENTIONS = (8, 9, 10)


def is_exported(source) -> bool:
    return isinstance(source, jax_export.Exported)


def deserialize(data: bytes) -> Optional[jax_export.Exported]:
    """The `Exported` serialized in `data`, or None when `data` is not one (MLIR text or
    bytecode). A serialized `Exported` that neither the installed jax nor the flatbuffer reader
    can read raises `LoadError`."""
    stripped = data[:4096].lstrip()  # (a slice: the artifact's bytes are not copied)
    if stripped[:1] in (b"m", b"f", b"/", b"#", b"!") or stripped.startswith(b"module"):
        return None  # MLIR text
    try:
        record, newer = export_flatbuffer.read(data), None
    except export_flatbuffer.NotAnExport:
        record, newer = None, None
    except export_flatbuffer.NewerThanReader as e:  # a jax newer still may read it
        record, newer = None, e
    # (a corrupt artifact raised LoadError above: an older jax, which reads fewer fields,
    # may not notice it)
    try:  # (bytes read in place: a bytearray of them would be a copy of the weights)
        exported = jax_export.deserialize(data)
    except Exception:  # noqa: BLE001 - refused by this jax: the flatbuffer reader's turn
        exported = None
    if exported is not None and (record is None or export_flatbuffer.agrees(exported, record)):
        return exported
    if newer is not None:
        raise newer
    if record is None:
        return None
    return export_flatbuffer.to_exported(record)


def module_bytes(exported: jax_export.Exported) -> bytes:
    return bytes(exported.mlir_module_serialized)


def read_module(exported: jax_export.Exported, context: ir.Context) -> ir.Module:
    """The verified module of `exported`, once its calling convention is one shlo2jax follows.
    A module this jaxlib cannot read that was written for a newer StableHLO than this jaxlib
    reads (VHLO's forward window) is a `LoadError` naming both versions."""
    name = source_name(exported)
    version = exported.calling_convention_version
    if version not in CALLING_CONVENTIONS:
        raise LoadError(f"{name}: calling convention {version}; shlo2jax follows the calling "
                        f"conventions {', '.join(map(str, CALLING_CONVENTIONS))}")
    data = module_bytes(exported)
    # (a module newer than jaxlib reads: parse_mlir's NewerThanJaxlib names both versions)
    return parse_mlir(data, context, name)


def source_name(exported: jax_export.Exported) -> str:
    return f"jax.export:{exported.fun_name}"
