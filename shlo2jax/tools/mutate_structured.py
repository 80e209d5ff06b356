"""Structure-aware mutants for `shlo2jax mutate`: each damages one part of a format its
reader must walk (a protobuf field, a flatbuffer offset or vtable entry, an `.npy` header, a
JSON value, a file of a folder), where byte-level damage mostly breaks the first check.

- `mutate_proto`: protobuf messages (HloModuleProto, HloProto, HloSnapshot, SavedModel):
  parsed into fields (length-delimited payloads that themselves parse as messages, nested),
  one varint changed, one payload truncated, one field dropped or repeated, its number or wire
  type changed, or its length prefix made to disagree with its payload;
- `mutate_flatbuffer`: `Exported.serialize()`: the serialization version, a vtable entry, a
  vtable's or table's size, a table's vtable offset, a field's reference, a vector's length;
- `mutate_hlo_text`: HLO text (`f32[4,8]{1,0}` shapes, opcodes, operands, attributes, lines);
- `mutate_npy` / `mutate_npz`: an array file's header (shape, dtype, order), its data
  truncated; an `.npz`'s keys, arrays, declared sizes and zip bytes;
- `mutate_json`: a JSON document's values changed, removed or retyped;
- `Folder` mutants (`mutate_folder`): one file's contents mutated by its kind, a file deleted,
  duplicated or renamed.
"""

from __future__ import annotations

import io
import json
import random
import re
import struct
import warnings
import zipfile
from typing import Callable, NamedTuple, Optional, Union

import numpy as np

from shlo2jax.errors import LoadError
from shlo2jax.sources import protowire


class Folder(NamedTuple):
    """A folder as data: (relative path, bytes) per file; written out to be loaded."""
    files: tuple

    def as_dict(self) -> dict:
        return dict(self.files)


class WithInputs(NamedTuple):
    """A program and the `.npz` of its arguments (`shlo2jax run PROGRAM --inputs X.npz`)."""
    program: Union[bytes, str]
    suffix: str             # the program file's suffix: ".bin", ".mlir"
    npz: bytes


# ---------------------------------------------------------------- protobuf

_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


def pb_varint(value: int) -> bytes:
    """A protobuf varint (a negative value as its 64-bit two's complement)."""
    out = bytearray()
    value &= (1 << 64) - 1
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out) + bytes([value])


class _Field:
    """One protobuf field: `value` an int (varint, fixed), bytes, or a list of _Field (a
    payload that parses as a message); `raw`, where set, is written instead (a damaged field)."""
    __slots__ = ("number", "wire", "value", "raw")

    def __init__(self, number, wire, value):
        self.number, self.wire, self.value, self.raw = number, wire, value, None


def parse_message(data: bytes, depth: int = 0) -> Optional[list]:
    """The fields of `data` as a message, nested payloads parsed too; None where `data` is not
    a message that writes back to the same bytes."""
    fields, pos = [], 0
    try:
        while pos < len(data):
            tag, pos = protowire.varint(data, pos, "message")
            number, wire = tag >> 3, tag & 7
            if number == 0 or number > 10_000:
                return None
            if wire == _VARINT:
                value, pos = protowire.varint(data, pos, "message")
            elif wire in (_FIXED64, _FIXED32):
                size = 8 if wire == _FIXED64 else 4
                if pos + size > len(data):
                    return None
                value, pos = data[pos:pos + size], pos + size
            elif wire == _BYTES:
                length, pos = protowire.varint(data, pos, "message")
                if pos + length > len(data):
                    return None
                value, pos = data[pos:pos + length], pos + length
                nested = parse_message(value, depth + 1) if value and depth < 12 else None
                value = nested if nested is not None else bytes(value)
            else:
                return None
            fields.append(_Field(number, wire, value))
    except LoadError:  # (protowire's: a varint past the end or too long)
        return None
    return fields if write_message(fields) == bytes(data) else None


def write_message(fields: list) -> bytes:
    out = bytearray()
    for f in fields:
        if f.raw is not None:
            out += f.raw
            continue
        out += pb_varint(f.number << 3 | f.wire)
        if f.wire == _VARINT:
            out += pb_varint(f.value)
        elif f.wire in (_FIXED64, _FIXED32):
            out += f.value
        else:
            payload = write_message(f.value) if isinstance(f.value, list) else f.value
            out += pb_varint(len(payload)) + payload
    return bytes(out)


def _all_fields(fields: list, into: list) -> list:
    """(the list holding it, its index) of every field, nested ones too."""
    for i, f in enumerate(fields):
        into.append((fields, i))
        if isinstance(f.value, list):
            _all_fields(f.value, into)
    return into


_VARINTS = (0, 1, 2, 3, 7, 127, 128, 255, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32,
            2 ** 62, 2 ** 63 - 1, 2 ** 64 - 1, 2 ** 64 - 2)


def mutate_proto(data: bytes, rng: random.Random) -> tuple:
    """(label, bytes): one field of the message `data` damaged (module docstring); a `data`
    that is no message (a mutant of a mutant) is truncated instead."""
    fields = parse_message(data)
    if not fields:
        return "proto_unparsed_truncate", data[:rng.randrange(max(1, len(data)))]
    slots = _all_fields(fields, [])
    holder, i = rng.choice(slots)
    f = holder[i]
    kinds = ["drop", "duplicate", "number", "wire_type", "move"]
    if f.wire == _VARINT:
        kinds += ["varint"] * 4
    if f.wire == _BYTES:
        kinds += ["truncate", "truncate", "length", "empty", "grow"]
    kind = rng.choice(kinds)
    where = f"{kind}@field{f.number}#{slots.index((holder, i))}"
    if kind == "varint":
        f.value = rng.choice(_VARINTS + (f.value + 1, f.value ^ (1 << rng.randrange(64))))
    elif kind == "drop":
        del holder[i]
    elif kind == "duplicate":
        holder.insert(i, f)
    elif kind == "move":
        holder.insert(rng.randrange(len(holder) + 1), holder.pop(i))
    elif kind == "number":
        f.number = rng.choice([1, 2, 3, 5, 15, 16, 100, 536_870_911, f.number + 1])
    elif kind == "wire_type":
        body = write_message([f])[len(pb_varint(f.number << 3 | f.wire)):]
        f.raw = pb_varint(f.number << 3 | rng.choice([w for w in range(8) if w != f.wire])) + body
    else:  # length-delimited
        payload = write_message(f.value) if isinstance(f.value, list) else f.value
        if kind == "truncate":
            f.value = payload[:rng.randrange(max(1, len(payload)))]
        elif kind == "empty":
            f.value = b""
        elif kind == "grow":
            f.value = payload + payload[:rng.randrange(1, 64)] if payload else b"\x08\x01"
        else:  # a length prefix that disagrees with the payload after it
            length = rng.choice([0, len(payload) + 1, len(payload) + 1000, 2 ** 31, 2 ** 63,
                                 max(0, len(payload) - 1)])
            f.raw = pb_varint(f.number << 3 | _BYTES) + pb_varint(length) + payload
    return where, write_message(fields)


# ---------------------------------------------------------------- flatbuffers

# Exported's reference slots (shlo2jax.sources.export_flatbuffer): which hold tables, vectors
# (of tables, strings or numbers) or strings; the others hold scalars.
_FB_SCALARS = {0: 2, 6: 2, 14: 2, 16: 1, 18: 4}       # slot -> width
_FB_STRINGS = (1, 26)
_FB_TABLES = (2, 4, 17)
_FB_VECTORS = (3, 5, 7, 8, 9, 10, 11, 12, 13, 15, 19, 20, 21, 22, 23, 24, 25)
_SERIALIZATION_VERSIONS = (0, 1, 2, 3, 4, 5, 9, 10, 11, 12, 13, 255, 65535)


def _fb_tables(data: bytes) -> list:
    """(table position, vtable position, vtable size) of the root table and of the tables its
    table fields and table vectors refer to (one level), where they lie inside `data`."""
    out = []

    def table(pos):
        if not 0 <= pos <= len(data) - 4:
            return None
        vt = pos - struct.unpack_from("<i", data, pos)[0]
        if not 0 <= vt <= len(data) - 4:
            return None
        size = struct.unpack_from("<H", data, vt)[0]
        out.append((pos, vt, size))
        return vt, size

    root = struct.unpack_from("<I", data, 0)[0]
    found = table(root)
    if not found:
        return out
    vt, size = found
    for slot in range((size - 4) // 2):
        entry = vt + 4 + 2 * slot
        off = struct.unpack_from("<H", data, entry)[0] if entry + 2 <= len(data) else 0
        if not off or slot not in _FB_TABLES + _FB_VECTORS:
            continue
        at = root + off
        if at + 4 > len(data):
            continue
        target = at + struct.unpack_from("<I", data, at)[0]
        if slot in _FB_TABLES:
            table(target)
        elif target + 4 <= len(data):
            n = struct.unpack_from("<I", data, target)[0]
            for k in range(min(n, 8)):
                el = target + 4 + 4 * k
                if el + 4 <= len(data):
                    table(el + struct.unpack_from("<I", data, el)[0])
    return out


def _root_slot(data: bytes, slot: int) -> Optional[int]:
    """The position of the root table's field `slot`, None where absent."""
    root = struct.unpack_from("<I", data, 0)[0]
    vt = root - struct.unpack_from("<i", data, root)[0]
    size = struct.unpack_from("<H", data, vt)[0]
    if 4 + 2 * slot >= size:
        return None
    off = struct.unpack_from("<H", data, vt + 4 + 2 * slot)[0]
    return root + off if off else None


def mutate_flatbuffer(data: bytes, rng: random.Random) -> tuple:
    """(label, bytes): one part of the flatbuffer `data` (a serialized `Exported`) changed:
    the serialization version, a vtable entry or size, a table's size or vtable offset, the
    root offset, a reference of the root table, a vector's or string's length, a scalar."""
    b = bytearray(data)
    try:
        tables = _fb_tables(data)
    except struct.error:
        tables = []
    if not tables:
        return "fb_unparsed_truncate", data[:rng.randrange(max(1, len(data)))]
    kind = rng.choice(["version", "version", "vtable_entry", "vtable_entry", "vtable_entry",
                       "vtable_size", "table_size", "vtable_offset", "root", "reference",
                       "reference", "length", "length", "scalar"])
    put = lambda fmt, at, v: struct.pack_into(fmt, b, at, v)  # noqa: E731
    root_pos, root_vt, root_size = tables[0]
    if kind == "version":
        at = _root_slot(data, 0)
        version = rng.choice(_SERIALIZATION_VERSIONS)
        if at is not None:
            put("<H", at, version)
            return f"version={version}", bytes(b)
        kind = "vtable_entry"
    if kind == "scalar":
        present = [(s, w) for s, w in _FB_SCALARS.items() if _root_slot(data, s) is not None]
        if present:
            slot, width = rng.choice(present)
            value = rng.choice([0, 1, 2, 3, 255, 2 ** (8 * width) - 1, 2 ** (8 * width - 1)])
            put({1: "<B", 2: "<H", 4: "<I"}[width], _root_slot(data, slot), value)
            return f"scalar@slot{slot}={value}", bytes(b)
        kind = "vtable_entry"
    if kind in ("reference", "length"):
        slots = [s for s in _FB_STRINGS + _FB_TABLES + _FB_VECTORS
                 if _root_slot(data, s) is not None]
        slot = rng.choice(slots)
        at = _root_slot(data, slot)
        if kind == "reference":
            value = rng.choice([0, 1, 4, len(data), 2 ** 31, 2 ** 32 - 1,
                                struct.unpack_from("<I", data, at)[0] + rng.choice([-8, -4, 4, 8])])
            put("<I", at, value % 2 ** 32)
            return f"reference@slot{slot}={value % 2 ** 32}", bytes(b)
        if slot in _FB_TABLES:
            kind = "vtable_entry"
        else:
            target = at + struct.unpack_from("<I", data, at)[0]
            if target + 4 <= len(data):
                n = struct.unpack_from("<I", data, target)[0]
                value = rng.choice([0, n + 1, n * 2 + 1, max(0, n - 1), 2 ** 31, 2 ** 32 - 1])
                put("<I", target, value)
                return f"length@slot{slot}={value}", bytes(b)
            kind = "vtable_entry"
    pos, vt, size = rng.choice(tables)
    if kind == "vtable_entry" and size > 4:
        entry = vt + 4 + 2 * rng.randrange((size - 4) // 2)
        if entry + 2 <= len(b):
            table_size = struct.unpack_from("<H", data, vt + 2)[0]
            value = rng.choice([0, 1, 2, 3, 4, table_size, table_size + 4, 0x7FFF, 0xFFFF,
                                struct.unpack_from("<H", data, entry)[0] + rng.choice([-4, 4])])
            put("<H", entry, value % 2 ** 16)
            return f"vtable_entry@{entry}={value % 2 ** 16}", bytes(b)
    if kind == "vtable_size" or kind == "vtable_entry":
        value = rng.choice([0, 2, 3, 4, size + 2, size + 200, 0xFFFF, max(0, size - 2)])
        put("<H", vt, value)
        return f"vtable_size@{vt}={value}", bytes(b)
    if kind == "table_size":
        value = rng.choice([0, 1, 4, 0xFFFF])
        put("<H", vt + 2, value)
        return f"table_size@{vt + 2}={value}", bytes(b)
    if kind == "vtable_offset":
        value = rng.choice([0, 4, -4, pos, pos + 1, -len(data), 2 ** 31 - 1,
                            struct.unpack_from("<i", data, pos)[0] + rng.choice([-2, 2])])
        put("<i", pos, max(-2 ** 31, min(2 ** 31 - 1, value)))
        return f"vtable_offset@{pos}={value}", bytes(b)
    value = rng.choice([0, 4, len(data) - 4, len(data), 2 ** 32 - 1,
                        root_pos + rng.choice([-4, 4])])
    put("<I", 0, value % 2 ** 32)
    return f"root={value % 2 ** 32}", bytes(b)


# ---------------------------------------------------------------- HLO text

_HLO_SHAPE_RE = re.compile(r"\b(pred|s8|s16|s32|s64|u8|u16|u32|u64|f16|bf16|f32|f64|c64|c128|"
                           r"token)\[([0-9,]*)\](\{[0-9,]*\})?")
_HLO_TYPES = ("pred", "s8", "s32", "s64", "u8", "f16", "bf16", "f32", "f64", "c64", "token",
              "f8e4m3fn", "s4", "frob")
_HLO_OPCODE_RE = re.compile(r"= ([a-z0-9\[\]{},]+ )?([a-z][a-z0-9-]*)\(")
_HLO_OPCODES = ("add", "multiply", "reshape", "transpose", "while", "call", "tuple",
                "get-tuple-element", "parameter", "constant", "custom-call", "fusion",
                "broadcast", "reduce", "frobnicate", "dot", "convolution", "sort")
_HLO_ATTR_RE = re.compile(r"\b(dimensions|index|slice|window|lhs_contracting_dims|"
                          r"rhs_contracting_dims|to_apply|condition|body|calls|"
                          r"parameter_number)=")
# an operand: a name after `(` or `, ` (XLA prints `%name` or, since 2024, `name`)
_HLO_NAME_RE = re.compile(r"(?:(?<=\()|(?<=, ))%?[A-Za-z_][\w.\-]*")
_HLO_NUMBER_RE = re.compile(r"(?<![\w.%])-?\d+(?![\w.])")
_HLO_NUMBERS = ("0", "1", "-1", "2", "7", "2147483647", "-2147483648", "9223372036854775807",
                "99999999999999999999999")



LINE_EDITS = ("delete_line", "repeat_line", "swap_lines")


def edit_lines(kind: str, lines: list, rng: random.Random) -> int:
    """Deletes, repeats or swaps (with another) a random line of `lines` in place, by `kind`
    (one of LINE_EDITS); returns its index."""
    i = rng.randrange(len(lines))
    if kind == "delete_line":
        del lines[i]
    elif kind == "repeat_line":
        lines.insert(i, lines[i])
    else:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    return i


def mutate_hlo_text(text: str, rng: random.Random) -> tuple:
    """(label, text): HLO text with one shape, opcode, operand, attribute, number or line
    changed, or truncated."""
    lines = text.split("\n")
    kind = rng.choice(["element_type", "dims", "dims", "layout", "opcode", "operand",
                       "operand", "attribute", "number", "number", "delete_line",
                       "repeat_line", "swap_lines", "truncate", "entry"])
    if kind in ("element_type", "dims", "layout"):
        matches = list(_HLO_SHAPE_RE.finditer(text))
        if matches:
            m = rng.choice(matches)
            element, dims, layout = m.group(1), m.group(2), m.group(3) or ""
            parts = [d for d in dims.split(",") if d]
            if kind == "element_type":
                element = rng.choice(_HLO_TYPES)
            elif kind == "dims":
                if parts and rng.random() < 0.6:
                    parts[rng.randrange(len(parts))] = rng.choice(
                        ["0", "1", "3", "1000000", "4294967296", "-1"])
                elif parts and rng.random() < 0.5:
                    del parts[rng.randrange(len(parts))]
                else:
                    parts.insert(0, rng.choice(["1", "2"]))
            else:
                layout = rng.choice(["{}", "{0}", "{5,0}", "{0,0}", "{1,0,2}", "{"])
            return (f"hlo_{kind}@{m.start()}",
                    text[:m.start()] + f"{element}[{','.join(parts)}]{layout}" + text[m.end():])
    if kind == "opcode":
        matches = list(_HLO_OPCODE_RE.finditer(text))
        if matches:
            m = rng.choice(matches)
            return (f"hlo_opcode@{m.start(2)}",
                    text[:m.start(2)] + rng.choice(_HLO_OPCODES) + text[m.end(2):])
    if kind == "operand":
        matches = list(_HLO_NAME_RE.finditer(text))
        if len(matches) > 1:
            m, other = rng.choice(matches), rng.choice(matches)
            return f"hlo_operand@{m.start()}", text[:m.start()] + other.group() + text[m.end():]
    if kind == "attribute":
        matches = list(_HLO_ATTR_RE.finditer(text))
        if matches:
            m = rng.choice(matches)
            end = text.find(",", m.end())
            end = text.find("\n", m.end()) if end < 0 else end
            value = rng.choice(["{}", "{9}", "{0,0}", "%nowhere", "-1", "{", "x"])
            return f"hlo_attribute@{m.start()}", text[:m.end()] + value + text[end:]
    if kind == "number":
        matches = list(_HLO_NUMBER_RE.finditer(text))
        if matches:
            m = rng.choice(matches)
            return (f"hlo_number@{m.start()}",
                    text[:m.start()] + rng.choice(_HLO_NUMBERS) + text[m.end():])
    if kind == "entry":
        text2 = text.replace("ENTRY ", "", 1) if rng.random() < 0.5 else \
            re.sub(r"\n(%?[\w.\-]+ )", r"\nENTRY \1", text, count=1)
        return "hlo_entry", text2
    if kind in LINE_EDITS and len(lines) > 2:
        i = edit_lines(kind, lines, rng)
        return f"hlo_{kind}@line{i + 1}", "\n".join(lines)
    i = rng.randrange(max(1, len(text)))
    return f"hlo_truncate@{i}", text[:i]


# ---------------------------------------------------------------- .npy, .npz, JSON

_NPY_DTYPES = ("<f4", "<f8", "<i8", "|b1", "<c8", "|u1", ">f4", "<f2", "|O", "<U3", "|V8",
               "<M8[s]", "frob", "")
_HUGE_SHAPES = ((2 ** 40,), (2 ** 31, 2 ** 31), (2 ** 62, 4), (-1,), (10 ** 30,))


def npy_bytes(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array(out, np.asarray(array), allow_pickle=False)
    return out.getvalue()


def _npy_header(data: bytes) -> Optional[tuple]:
    """(header dict text, where the header starts, where the data starts) of an .npy file."""
    if data[:6] != b"\x93NUMPY" or len(data) < 10:
        return None
    major = data[6]
    if major == 1:
        n, start = struct.unpack_from("<H", data, 8)[0], 10
    else:
        if len(data) < 12:
            return None
        n, start = struct.unpack_from("<I", data, 8)[0], 12
    return data[start:start + n].decode("latin1"), start, start + n


def _with_header(data: bytes, header: str, start: int, end: int) -> bytes:
    """`data` with its header dict replaced (padded as numpy writes it; version 1 when it
    fits)."""
    body = header.rstrip().rstrip("\n")
    total = len(body) + 1 + 10
    padded = body + " " * ((64 - total % 64) % 64) + "\n"
    if len(padded) < 65536:
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(padded)) + padded.encode("latin1") + \
            data[end:]
    return b"\x93NUMPY\x02\x00" + struct.pack("<I", len(padded)) + padded.encode("latin1") + \
        data[end:]


def mutate_npy(data: bytes, rng: random.Random) -> tuple:
    """(label, bytes): an .npy file with its header's shape, dtype or order changed (to
    ones that disagree with the data, or declare more than any machine holds), its header
    broken, or its data truncated."""
    found = _npy_header(data)
    kind = rng.choice(["shape", "shape", "huge", "dtype", "dtype", "order", "header",
                       "truncate_data", "truncate", "magic"])
    if found is None or kind == "truncate":
        return "npy_truncate", data[:rng.randrange(max(1, len(data)))]
    header, start, end = found
    if kind == "magic":
        return "npy_magic", b"\x93NUMPX" + data[6:] if rng.random() < 0.5 else \
            data[:6] + bytes([rng.choice([0, 3, 9])]) + data[7:]
    if kind == "truncate_data":
        return "npy_truncate_data", data[:rng.randrange(end, max(end + 1, len(data)))]
    if kind in ("shape", "huge"):
        m = re.search(r"'shape': \(([^)]*)\)", header)
        if m:
            dims = [d.strip() for d in m.group(1).split(",") if d.strip()]
            if kind == "huge":
                shape = rng.choice(_HUGE_SHAPES)
            elif dims and rng.random() < 0.4:
                dims[rng.randrange(len(dims))] = str(rng.choice([0, 1, 3, 7, 1000]))
                shape = tuple(int(d) for d in dims)
            else:
                shape = rng.choice([(), (1,), (2, 3), tuple(int(d) for d in dims) + (1,),
                                    tuple(int(d) for d in dims[1:])])
            header = header[:m.start()] + f"'shape': {shape!r}" + header[m.end():]
            return f"npy_{kind}={shape}", _with_header(data, header, start, end)
    if kind == "dtype":
        dtype = rng.choice(_NPY_DTYPES)
        header = re.sub(r"'descr': '[^']*'", f"'descr': '{dtype}'", header)
        return f"npy_dtype={dtype}", _with_header(data, header, start, end)
    if kind == "order":
        return "npy_order", _with_header(data, header.replace("False", "True"), start, end)
    broken = rng.choice(["{", "{'descr': '<f4'}", "[1, 2]", "{'shape': (2,), 'descr': 1, "
                         "'fortran_order': 0}", "__import__('os')", "{'descr': '<f4', "
                         "'fortran_order': False, 'shape': (2,), 'extra': 1}"])
    return "npy_header", _with_header(data, broken, start, end)


def zip_members(members: list) -> bytes:
    out = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(out, "w") as archive:
        warnings.simplefilter("ignore")  # a name twice is one of the mutations
        for name, payload in members:
            archive.writestr(name, payload)
    return out.getvalue()


def mutate_npz(data: bytes, rng: random.Random) -> tuple:
    """(label, bytes): an .npz of arguments with a key renamed, dropped or added, an array of
    another shape or dtype, one member's .npy damaged (`mutate_npy`: huge declared shapes,
    truncated data), or the zip itself truncated or its bytes changed."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = [(i.filename, archive.read(i)) for i in archive.infolist()]
    kind = rng.choice(["rename", "drop", "extra", "reshape", "dtype", "member", "member",
                       "member", "truncate_zip", "zip_bytes", "duplicate"])
    i = rng.randrange(len(members))
    name, payload = members[i]
    if kind == "truncate_zip":
        return "npz_truncate", data[:rng.randrange(max(1, len(data)))]
    if kind == "zip_bytes":
        b = bytearray(data)
        for _ in range(rng.randrange(1, 5)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return "npz_bytes", bytes(b)
    if kind == "rename":
        members[i] = (rng.choice(["nope.npy", "arg_99.npy", "-1.npy", "x", "0.npy", "arg_0.npy",
                                  "é.npy", "../up.npy"]), payload)
    elif kind == "drop":
        del members[i]
    elif kind == "extra":
        members.append(("extra.npy", npy_bytes(np.zeros(2, np.float32))))
    elif kind == "duplicate":
        members.append((name, payload))
    elif kind in ("reshape", "dtype"):
        array = np.load(io.BytesIO(payload), allow_pickle=False)
        if kind == "reshape":
            array = np.zeros(rng.choice([(), (1,), array.shape + (2,), (3, 0)]), array.dtype)
        else:
            array = array.astype(rng.choice([np.float64, np.int32, np.bool_, np.complex64,
                                             np.float16]))
        members[i] = (name, npy_bytes(array))
    else:
        label, damaged = mutate_npy(payload, rng)
        members[i] = (name, damaged)
        return f"npz_member:{name}:{label}", zip_members(members)
    return f"npz_{kind}:{name}", zip_members(members)


_JSON_VALUES = (None, 0, -1, 2 ** 63, 1.5, "", "x", "float99", [], {}, [None], True,
                "../../etc", [2 ** 40, 2 ** 40])


def mutate_json(text: str, rng: random.Random) -> tuple:
    """(label, text): a JSON document with one value changed, removed or retyped, a list
    element dropped or repeated; or its text truncated where it does not parse."""
    try:
        doc = json.loads(text)
    except ValueError:
        return "json_truncate", text[:rng.randrange(max(1, len(text)))]
    paths = []

    def walk(node, path):
        paths.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, path + (k,))
        elif isinstance(node, list):
            for k, v in enumerate(node[:16]):
                walk(v, path + (k,))
    walk(doc, ())
    path = rng.choice(paths[1:] or paths)
    if not path or rng.random() < 0.05:
        return "json_truncate", text[:rng.randrange(max(1, len(text)))]
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    key = path[-1]
    kind = rng.choice(["value", "value", "value", "remove", "repeat"])
    if kind == "remove":
        del parent[key]
    elif kind == "repeat" and isinstance(parent, list):
        parent.insert(key, parent[key])
    else:
        parent[key] = rng.choice(_JSON_VALUES)
    return f"json_{kind}@{'/'.join(map(str, path))}", json.dumps(doc)


# ---------------------------------------------------------------- folders

def mutate_folder(folder: Folder, rng: random.Random,
                  content: Callable[[str, bytes, random.Random], tuple],
                  rename: Callable[[str, random.Random], str]) -> tuple:
    """(label, Folder): one file's contents mutated by `content(path, bytes, rng)` (most
    often), or a file deleted, duplicated (under the name `rename` gives it) or renamed."""
    files = folder.as_dict()
    path = rng.choice(sorted(files))
    kind = rng.choice(["content"] * 6 + ["delete", "duplicate", "rename"])
    if kind == "content":
        label, data = content(path, files[path], rng)
        files[path] = data
        return f"{path}:{label}", Folder(tuple(sorted(files.items())))
    if kind == "delete":
        del files[path]
    else:
        new = rename(path, rng)
        files[new] = files[path] if kind == "duplicate" else files.pop(path)
        kind = f"{kind}->{new}"
    return f"{path}:{kind}", Folder(tuple(sorted(files.items())))


def text_file_mutator(mutate_text: Callable) -> Callable:
    """A content mutator of text files: `mutate_text` on the decoded text, written as UTF-8."""
    def mutate(path: str, data: bytes, rng: random.Random) -> tuple:
        label, text = mutate_text(data.decode("utf-8"), rng)
        return label, text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    return mutate
