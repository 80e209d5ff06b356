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

from shlo2jax.compat import HLO_TO_STABLEHLO_CHILD
from shlo2jax.errors import ElidedDataError, LoadError
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
        data = data.encode("utf-8")
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
