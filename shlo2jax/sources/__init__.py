"""What `shlo2jax.load` reads: each input kind detected once and read into one verified
`ir.Module` (a `Source`), whatever it came as.

- a path (str or `os.PathLike`) to a file: its bytes, read as below. A str that names no
  file and does not look like program text (no `{`, no newline, not starting with `module`,
  `func.func` or `HloModule`) is a missing file, answered with the closest names in its
  folder. A folder is read by the folder reader that claims it (`FOLDER_READERS`: an XLA
  dump, a PyTorch/XLA StableHLO bundle, a TensorFlow SavedModel jax2tf wrote), else refused by
  name;
- MLIR text (str), MLIR bytecode or a VHLO portable artifact (bytes): `sources.mlir`;
- a `jax.export.Exported`, or the bytes of `Exported.serialize()`: `sources.jax_export`
  (the module inside, with the `Exported` kept for its calling convention);
- a torch.export `.pt2` archive (a zip file): `sources.pt2`, lowered by torchax (torch and
  torchax installed: `pip install "shlo2jax[torch]"`);
- an `ir.Module` already parsed (a refined copy of a program's module).

Bytes are told apart by their first bytes (`detect`): MLIR bytecode by its `ML\\xefR` magic
(a VHLO artifact by its `StableHLO_` producer string), a serialized `jax.export` by its
flatbuffer header, an HLO module proto by its first field; so a truncated or corrupt input is
named as the kind it is. An empty input says so.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import pickle
import re
import struct
import subprocess
import sys
from typing import Callable, NamedTuple, Optional

from jaxlib.mlir import ir

from shlo2jax.compat import make_ir_context
from shlo2jax.conventions.exported import of_export
from shlo2jax.errors import LoadError, MissingFileError
from shlo2jax.sources import export_compat, hlo, jax_export, pt2, saved_model, torch_xla_bundle
from shlo2jax.sources.mlir import NewerThanJaxlib, parse_mlir
from shlo2jax.sources.safe_parse import BYTECODE_MAGIC, how_child_ended


@dataclasses.dataclass
class Source:
    """One input, read: its verified MLIR module, the name errors give it, and the calling
    convention of each module function whose callers do not pass the module's own arguments
    (`conventions`: the module function's name -> a factory of its `shlo2jax.conventions`
    convention, given the function's signature and the `assembly.Assembly`): a `jax.export`
    artifact's @main (`conventions.exported`), a PyTorch/XLA bundle's functions with their
    weights bound (`sources.torch_xla_bundle`), a SavedModel's signature with its variables
    bound (`sources.saved_model`)."""
    mlir_module: ir.Module
    name: str
    conventions: dict = dataclasses.field(default_factory=dict)


def read(source, source_name: str = "", module: Optional[str] = None,
         signature: Optional[str] = None) -> Source:
    """`source` detected and read (see the module docstring); malformed input is a
    `LoadError` (a missing file a `MissingFileError`). `module` names the module of an XLA
    dump folder to read (`sources.hlo`), `signature` the signature of a SavedModel
    (`sources.saved_model`)."""
    if isinstance(source, ir.Module):
        return Source(source, source_name)
    if isinstance(source, (str, bytes, bytearray, memoryview, os.PathLike)):
        return _read_data(source, source_name, module, signature)
    if jax_export.is_exported(source):
        return _exported(source, owned=False)
    raise LoadError(f"cannot load a {type(source).__name__}: give a path, MLIR text, "
                    "bytes or a jax.export.Exported")


# `load(..., untrusted=True)`: the source is read in a child process first. The checks of
# `safe_parse` refuse what is known to crash or hang jaxlib's readers before they see it; what
# they do not know yet would take the caller's process with it. In the child, a hang is cut
# off at the time limit and a crash ends only the child; either is a LoadError. Input the
# child reads (or refuses with a shlo2jax error: reading is deterministic, so the same error
# comes again) is then read in this process.
UNTRUSTED_READ_SECONDS = 120.0
_READ_IN_CHILD = """
import pickle
import sys
from shlo2jax import sources
from shlo2jax.errors import Shlo2JaxError
source, source_name, module, signature = pickle.load(sys.stdin.buffer)
try:
    sources.read(source, source_name, module, signature)
except Shlo2JaxError:
    pass  # (the caller's own read raises it again)
"""


def read_in_child(source, source_name: str = "", module: Optional[str] = None,
                  signature: Optional[str] = None, timeout: Optional[float] = None) -> None:
    """Reads `source` as `read` does, in a child process with a time limit (default
    `UNTRUSTED_READ_SECONDS`); raises LoadError where the child does not finish in time or
    dies. A module already parsed needs no reading; a `jax.export.Exported` is read as its
    module's bytes."""
    if isinstance(source, ir.Module):
        return
    if jax_export.is_exported(source):
        source, module = bytes(source.mlir_module_serialized), None
    elif isinstance(source, (bytearray, memoryview)):
        source = bytes(source)
    limit = UNTRUSTED_READ_SECONDS if timeout is None else timeout
    named = isinstance(source, os.PathLike) or (isinstance(source, str) and _is_path(source))
    where = source_name or (os.fspath(source) if named else "the input")
    try:
        done = subprocess.run([sys.executable, "-c", _READ_IN_CHILD],
                              input=pickle.dumps((source, source_name, module, signature)),
                              capture_output=True, timeout=limit)
    except subprocess.TimeoutExpired:
        raise LoadError(f"reading {where} ran past {limit:g} s in a child process "
                        f"(untrusted=True): refused") from None
    if done.returncode != 0:
        err = [line.strip() for line in
               done.stderr.decode("utf-8", "backslashreplace").splitlines() if line.strip()]
        tail = f": {' | '.join(err[-3:])}" if err else ""
        raise LoadError(f"reading {where} ended its child process "
                        f"({how_child_ended(done.returncode)}; untrusted=True){tail}")


def _read_data(source, source_name: str, module: Optional[str],
               signature: Optional[str]) -> Source:
    """A path (its file, or its folder), program text or bytes, read."""
    if isinstance(source, os.PathLike) or (isinstance(source, str) and _is_path(source)):
        path = os.fspath(source)
        source_name = source_name or path
        if os.path.isdir(path):
            return read_folder(path, source_name, module, signature)
        source = _file_bytes(path)
    if module is not None:
        raise LoadError(f"module={module!r} names a module of an XLA dump folder, and "
                        f"{source_name or 'the input'} is not a folder")
    if signature is not None:
        raise LoadError(f"signature={signature!r} names a signature of a SavedModel folder, "
                        f"and {source_name or 'the input'} is not a folder")
    if isinstance(source, memoryview):
        source = bytes(source)
    where = source_name or "the input"
    if not source[:4096].strip() and not source.strip():  # (no copy of a large input)
        raise LoadError(f"{where} is empty" + (f" ({len(source)} bytes of white space)"
                                               if source else " (0 bytes)"))
    kind = detect(source)
    if isinstance(source, bytearray) and kind.name != "jax-export":
        source = bytes(source)  # (a jax.export artifact is read in place: no copy of it)
    reader = READERS.get(kind.name)
    if reader is None:
        raise LoadError(f"{where} is {kind.description}, which shlo2jax does not read")
    return reader(source, source_name, kind)


# ----------------------------------------------------------------------- paths

_TEXT_START_RE = re.compile(r"\s*(module\b|func\.func\b|HloModule\b|#|//|\"?builtin\.module)")


def looks_like_text(s: str) -> bool:
    """Whether a str is program text rather than a path (see the module docstring)."""
    return "{" in s or "\n" in s or bool(_TEXT_START_RE.match(s))


def _is_path(s: str) -> bool:
    if not s.strip():
        return False  # empty input, said so below
    if "\n" not in s and len(s) < 4096 and os.path.lexists(s):
        return True
    if looks_like_text(s):
        return False
    raise MissingFileError(missing_file_message(s))


def missing_file_message(path: str) -> str:
    """`no such file: PATH`, with the closest names in its folder (or the missing folder)."""
    folder, base = os.path.split(path)
    if folder and not os.path.isdir(folder):
        return f"no such file: {path} (no folder {folder})"
    try:
        names = os.listdir(folder or ".")
    except OSError:
        names = []
    close = difflib.get_close_matches(base, names, n=3, cutoff=0.6)
    if not close:
        return f"no such file: {path}"
    return f"no such file: {path} (did you mean {' or '.join(os.path.join(folder, c) for c in close)}?)"


def _file_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:  # a dangling link
        raise MissingFileError(missing_file_message(path)) from None
    except OSError as e:
        raise LoadError(f"cannot read {path}: {e.strerror or e}") from None


class FolderReader(NamedTuple):
    """A reader of one kind of folder (an HLO dump, a bundle of files): `claims(path)` says
    whether the folder is of its kind, `read(path, source_name, module, signature)` reads it
    into a `Source` (`module`, `signature`: what the user named, or None; a reader refuses
    the one its kind does not have)."""
    name: str
    claims: Callable[[str], bool]
    read: Callable[[str, str, Optional[str]], Source]


# The one place folder kinds are dispatched: the first reader that claims a folder reads it.
FOLDER_READERS: list = []

_PROGRAM_SUFFIXES = (".mlir", ".mlirbc", ".bc", ".bin", ".pb", ".txt", ".hlo")


def read_folder(path: str, source_name: str = "", module: Optional[str] = None,
                signature: Optional[str] = None) -> Source:
    """A folder read by the first of `FOLDER_READERS` that claims it; else a `LoadError`
    naming the folder and the program files in it."""
    for reader in FOLDER_READERS:
        if reader.claims(path):
            return reader.read(path, source_name or path, module, signature)
    try:
        files = sorted(n for n in os.listdir(path) if n.endswith(_PROGRAM_SUFFIXES)
                       and os.path.isfile(os.path.join(path, n)))
    except OSError:
        files = []
    hint = (f"; files here that may be one: {', '.join(files[:5])}"
            + (f" and {len(files) - 5} more" if len(files) > 5 else "")) if files else ""
    return _refuse(f"{path} is a folder, and no folder reader claims it: give a file{hint}")


def _refuse(message: str):
    raise LoadError(message)


# ----------------------------------------------------------------------- kinds of input

class Kind(NamedTuple):
    """What `detect` found: a reader's name and the words errors use for it."""
    name: str            # mlir-text, mlir-bytecode, vhlo, jax-export, hlo-text, hlo-proto, unknown
    article: str         # "a ", "an " or ""
    noun: str

    @property
    def description(self) -> str:
        return self.article + self.noun


def detect(data) -> Kind:
    """The kind of an input (str or bytes) by its first bytes (see the module docstring)."""
    if isinstance(data, str):
        if data.lstrip().startswith("HloModule"):
            return Kind("hlo-text", "", "HLO text (an `HloModule`)")
        return Kind("mlir-text", "", "MLIR text")
    if data.startswith(BYTECODE_MAGIC):
        producer = _bytecode_producer(data)
        if producer.startswith("StableHLO_"):
            return Kind("vhlo", "a ", f"VHLO portable artifact (producer {producer})")
        return Kind("mlir-bytecode", "", "MLIR bytecode" + (f" (producer {producer})"
                                                          if producer else ""))
    if _is_flatbuffer(data):
        return Kind("jax-export", "a ", "serialized jax.export artifact")
    if data.lstrip().startswith(b"HloModule"):
        return Kind("hlo-text", "", "HLO text (an `HloModule`)")
    if pt2.is_pt2(data):
        return Kind("pt2", "a ", "torch.export .pt2 archive")
    if _is_hlo_proto(data):
        return Kind("hlo-proto", "a ", "serialized HLO module proto")
    return Kind("unknown", "", "not a known format")


def _bytecode_producer(data: bytes) -> str:
    """The producer string after the magic and the version varint ('' where unreadable)."""
    pos = len(BYTECODE_MAGIC)
    while pos < len(data) and data[pos] & 1 == 0 and pos < len(BYTECODE_MAGIC) + 9:
        pos += 1  # MLIR's varint: the low bit of the first byte ends a one-byte varint
    pos += 1
    end = data.find(b"\x00", pos, pos + 200)
    return data[pos:end].decode("ascii", "replace") if end > pos else ""


def _is_flatbuffer(data: bytes) -> bool:
    """A flatbuffer's header: the root table's offset, its vtable's offset and sizes all
    within the data (jax.export writes no file identifier). Data cut short before its root
    table still has the root's offset: a small multiple of 4 whose upper bytes are zero."""
    if len(data) < 4:
        return False
    root = struct.unpack_from("<I", data, 0)[0]
    if len(data) <= root + 4:
        return 8 <= root <= 4096 and root % 4 == 0
    if root < 4 or len(data) < 16:
        return False
    vtable = root - struct.unpack_from("<i", data, root)[0]
    if not 4 <= vtable <= len(data) - 4:
        return False
    vtable_size, object_size = struct.unpack_from("<HH", data, vtable)
    return (vtable_size % 2 == 0 and 8 <= vtable_size <= 256 and 4 <= object_size <= 1024
            and vtable + vtable_size <= len(data))


def _is_hlo_proto(data: bytes) -> bool:
    """An HloModuleProto (or an HloProto or HloSnapshot holding one) starts with field 1,
    its name: tag 0x0a, a length, the name's printable bytes, then the next field's tag."""
    for _ in range(3):  # HloSnapshot { hlo: HloProto { hlo_module: HloModuleProto { name } } }
        if len(data) < 3 or data[0] != 0x0A:
            return False
        length, pos = _varint(data, 1)
        if length is None:
            return False
        name = data[pos:pos + length]
        if name[:1] == b"\x0a":
            data = data[pos:]
            continue
        return (0 < length < 512 and len(name) == length
                and all(32 < b < 127 for b in name) and data[pos + length:pos + length + 1]
                in (b"\x12", b"\x1a", b"\x22", b"\x2a", b"\x32", b"\x3a"))
    return False


def _varint(data: bytes, pos: int):
    value, shift = 0, 0
    while pos < len(data) and shift < 35:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7
    return None, pos


# ----------------------------------------------------------------------- readers

def _mlir(source, source_name: str, kind: Kind) -> Source:
    try:
        module = parse_mlir(source, make_ir_context(), source_name)
    except NewerThanJaxlib:
        raise  # a whole artifact, only newer: it says so itself
    except LoadError as e:
        if kind.name in ("vhlo", "mlir-bytecode"):
            raise LoadError(f"{source_name or 'the input'} ({len(source)} bytes) is a truncated "
                            f"or corrupt {kind.noun}: {e}") from None
        raise
    return Source(module, source_name)


def _jax_export(data: bytes, source_name: str, kind: Kind) -> Source:
    exported = jax_export.deserialize(data)
    if exported is None:
        raise LoadError(f"{source_name or 'the input'} ({len(data)} bytes) is a truncated or "
                        f"corrupt {kind.noun}: jax.export cannot deserialize it")
    return _exported(exported, owned=True)


_CONTROL_RE = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f]")


def _unknown(data: bytes, source_name: str, kind: Kind) -> Source:
    # Not a known binary format: MLIR text as bytes, else say what it is not.
    control = _CONTROL_RE.search(data[:65536])
    if control:
        raise LoadError(f"{source_name or 'the input'} ({len(data)} bytes) is not a known "
                        "format: not MLIR text (byte 0x"
                        f"{data[control.start()]:02x} at offset {control.start()}), not MLIR "
                        "bytecode (no `ML\\xefR` magic), not a jax.export artifact")
    return _mlir(data, source_name, kind)


def _hlo(data, source_name: str, kind: Kind) -> Source:
    return Source(hlo.read(data, source_name), source_name)


def _pt2(data: bytes, source_name: str, kind: Kind) -> Source:
    return Source(*pt2.read(data, source_name))


def _no_signature(path: str, signature: Optional[str], kind: str) -> None:
    if signature is not None:
        raise LoadError(f"signature={signature!r} names a signature of a SavedModel, and "
                        f"{path} is {kind}")


def _xla_dump(path: str, source_name: str, module: Optional[str],
              signature: Optional[str]) -> Source:
    _no_signature(path, signature, "an XLA dump folder")
    data, name = hlo.read_dump_folder(path, module)
    return _hlo(data, name, detect(data))


FOLDER_READERS.append(FolderReader("xla-dump", hlo.is_dump_folder, _xla_dump))
def _torch_xla_bundle(path: str, source_name: str, module: Optional[str],
                      signature: Optional[str]) -> Source:
    _no_signature(path, signature, "a PyTorch/XLA bundle")
    return Source(*torch_xla_bundle.read(path, module, source_name))


FOLDER_READERS.append(FolderReader("torch-xla-bundle", torch_xla_bundle.claims,
                                   _torch_xla_bundle))


def _saved_model(path: str, source_name: str, module: Optional[str],
                 signature: Optional[str]) -> Source:
    if module is not None:
        raise LoadError(f"module={module!r} names a module of an XLA dump folder, and {path} "
                        "is a SavedModel: name its signature with signature=")
    return Source(*saved_model.read(path, signature, source_name))


FOLDER_READERS.append(FolderReader("saved-model", saved_model.claims, _saved_model))

# Each kind `detect` names -> its reader (input, source name, kind) -> Source.
READERS: dict = {
    "mlir-text": _mlir,
    "mlir-bytecode": _mlir,
    "vhlo": _mlir,
    "jax-export": _jax_export,
    "hlo-text": _hlo,
    "hlo-proto": _hlo,
    "pt2": _pt2,
    "unknown": _unknown,
}


def _exported(exported, owned: bool) -> Source:
    record = export_compat.record_of(exported)
    name = jax_export.source_name(record)
    module = jax_export.read_module(record, make_ir_context())
    if owned:
        # The parsed module holds the weights now: the module bytes, a copy of them, go
        # before decoding makes another (`Function.exported` writes them again on access)
        record = dataclasses.replace(record, mlir_module_serialized=b"")
    return Source(module, name, {"main": of_export(record)})
