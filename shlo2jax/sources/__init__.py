"""What `shlo2jax.load` reads: each input kind detected once and read into one verified
`ir.Module` (a `Source`), whatever it came as.

- a path (str or `os.PathLike`) to a file: its bytes, read as below;
- MLIR text (str), MLIR bytecode or a VHLO portable artifact (bytes): `sources.mlir`;
- a `jax.export.Exported`, or the bytes of `Exported.serialize()`: `sources.jax_export`
  (the module inside, with the `Exported` kept for its calling convention);
- an `ir.Module` already parsed (a refined copy of a program's module).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

from jaxlib.mlir import ir

from shlo2jax.compat import make_ir_context
from shlo2jax.errors import LoadError
from shlo2jax.sources import jax_export
from shlo2jax.sources.mlir import parse_mlir
from shlo2jax.sources.safe_parse import BYTECODE_MAGIC


@dataclasses.dataclass
class Source:
    """One input, read: its verified MLIR module, the name errors give it, and, for a
    `jax.export` artifact, the `Exported` (`owned`: made here from serialized bytes, so the
    program may drop its copy of the module bytes)."""
    mlir_module: ir.Module
    name: str
    exported: Optional[object] = None
    owned: bool = False


def read(source, source_name: str = "") -> Source:
    """`source` detected and read (see the module docstring); malformed input is a
    `LoadError`."""
    if jax_export.is_exported(source):
        return _exported(source, owned=False)
    if isinstance(source, ir.Module):
        return Source(source, source_name)
    if isinstance(source, os.PathLike) or (
            isinstance(source, str) and "\n" not in source and "{" not in source
            and len(source) < 4096 and os.path.exists(source)):
        path = os.fspath(source)
        with open(path, "rb") as f:
            source = f.read()
        source_name = source_name or path
    if isinstance(source, (bytearray, memoryview)):
        source = bytes(source)
    if isinstance(source, str) and "\n" not in source and source.endswith((".mlir", ".bc")):
        raise LoadError(f"no such file: {source}")
    if isinstance(source, bytes) and not source.startswith(BYTECODE_MAGIC):
        exported = jax_export.deserialize(source)
        if exported is not None:
            return _exported(exported, owned=True)
    return Source(parse_mlir(source, make_ir_context(), source_name), source_name)


def _exported(exported, owned: bool) -> Source:
    name = jax_export.source_name(exported)
    module = parse_mlir(jax_export.module_bytes(exported), make_ir_context(), name)
    return Source(module, name, exported, owned)
