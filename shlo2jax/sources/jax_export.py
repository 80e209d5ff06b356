"""`jax.export` artifacts: an `Exported`, or the bytes of `Exported.serialize()`.

The module inside is read like any MLIR source; the `Exported` travels with it, for the
calling convention of its entry function (`shlo2jax.executables.exported`).
"""

from __future__ import annotations

from typing import Optional

from jax import export as jax_export


def is_exported(source) -> bool:
    return isinstance(source, jax_export.Exported)


def deserialize(data: bytes) -> Optional[jax_export.Exported]:
    """The `Exported` serialized in `data`, or None when `data` is not one (MLIR text or
    bytecode, or bytes jax cannot read as an `Exported`)."""
    stripped = data.lstrip()
    if stripped[:1] in (b"m", b"f", b"/", b"#", b"!") or stripped.startswith(b"module"):
        return None  # MLIR text
    try:
        return jax_export.deserialize(bytearray(data))
    except Exception:  # noqa: BLE001 - not a serialized Exported: read as MLIR
        return None


def module_bytes(exported: jax_export.Exported) -> bytes:
    return bytes(exported.mlir_module_serialized)


def source_name(exported: jax_export.Exported) -> str:
    return f"jax.export:{exported.fun_name}"
