"""A VHLO portable artifact written by a newer StableHLO than the installed jaxlib reads,
rewritten to one it reads where the newer features are unused.

StableHLO gives each VHLO op a version range (`stablehlo/dialect/VhloOps.td`: `VHLO_Op<
"custom_call_v2", "1.18.0", "current">`); a newer op that only adds attributes has a
downgrade to its older form, exact when the new attributes hold their defaults
(`stablehlo/transforms/VhloToVersion.cpp`, `VhloToVersionPatterns.td`). A jaxlib older than
the artifact has no such op registered, so it cannot read it at all. This module applies
those downgrades to the artifact's bytecode before jaxlib sees it:

RULES (newer op -> older op, exact when):

    vhlo.custom_call_v2 (1.18.0)  -> vhlo.custom_call_v1  result_tilings = #vhlo.array_v1<[]>
    vhlo.composite_v2 (1.14.0)    -> vhlo.composite_v1    no composite_regions

What has no older form (or whose downgrade this module does not make) is refused with
`NewerThanJaxlib`, naming the op and what it uses (see NO_OLDER_FORM, ATTRIBUTE_CODES,
TYPE_CODES):

    vhlo.collective_broadcast_v2 (1.20.0: variadic operands, has_dynamic_root; its
        properties change layout, so no rename gives v1's: not downgraded here)
    vhlo.collective_reduce_v1 (1.19.0), vhlo.async_start_v1 / async_done_v1 (1.15.0),
    #vhlo.replica_group_mesh_axes_v1 and its parts (1.16.0), !vhlo.future_v1 (1.15.0)

How, and why not otherwise. jaxlib reads every op, attribute and type; this module only
renames. MLIR bytecode names each op by an index into a table of op names (the dialect
section), each a string of the string section; the rewrite points the newer name's entry at
the older name (appended to the string section where absent) and writes the producer string
of the installed jaxlib's version. An op's inherent attributes are its properties, written
as one attribute index each in alphabetical order: custom_call_v2's are custom_call_v1's
with `result_tilings` appended (MLIR's reader reads the properties it knows and ignores what
follows), composite_v2's are composite_v1's. So the renamed op reads, in the old jaxlib, as
its older form with the same operands, results, attributes and location. Before renaming,
the IR section is walked for every op under that name: a custom_call_v2 whose
`result_tilings` is not the empty VHLO array, or a composite_v2 with regions, uses what the
older op cannot say, and is refused.

Parsing the artifact with jaxlib first (the newer ops as unregistered ops) does not work:
the VHLO dialect is loaded and refuses unknown ops in the verifier, which `ir.Module.parse`
always runs, and MLIR's reader reads only the first property of an op it does not know
(properties of unregistered ops are one attribute), so the rest would be lost.

The rewritten bytes are untrusted input like any other: `shlo2jax.sources.mlir` reads them
on its checked path (the bytecode check, the VHLO attribute kinds, a child process where the
checks cannot vouch). This module's own reading of malformed bytes raises `LoadError`
(never a plain exception): every read is bounds checked.

Section offsets: the dialect section comes first, so everything after it moves when it
grows. MLIR aligns a section that needs it only when its offset is not already aligned (an
unflagged section may still need its alignment), so the new dialect section is padded (op
name indices written as longer varints, which MLIR's reader accepts) to move everything by
a multiple of 64 bytes: every alignment up to 64 is kept; a flagged alignment above that
is refused.
"""

from __future__ import annotations

import re
from typing import NamedTuple, Optional

from shlo2jax.errors import LoadError
from shlo2jax.sources.safe_parse import (_ALIGNMENT_BYTE, _ATTR_TYPE, _ATTR_TYPE_OFFSET,
                                         _DIALECT, _IR, _NUM_SECTIONS, _STRING,
                                         BYTECODE_MAGIC, _Framing, _Reader, _strings)

_PROPERTIES = 8
# MLIR bytecode versions (mlir/Bytecode/Encoding.h)
_NATIVE_PROPERTIES = 5  # kNativePropertiesEncoding: properties section, op names flagged
_ELIDE_UNKNOWN_BLOCK_ARG_LOCATION = 4  # the dialect section counts its op names
_DIALECT_VERSIONING = 1
_LAZY_LOADING, _USE_LIST_ORDERING = 2, 3
_HAS_ATTRS, _HAS_RESULTS, _HAS_OPERANDS, _HAS_SUCCESSORS = 0x01, 0x02, 0x04, 0x08
_HAS_REGIONS, _HAS_USE_LIST_ORDERS, _HAS_PROPERTIES = 0x10, 0x20, 0x40
_MAX_DEPTH = 256
_SHIFT_MODULUS = 64


class Rule(NamedTuple):
    older: str        # the op it becomes
    since: str        # the StableHLO version that added the newer op
    condition: str    # when the downgrade is exact, in words


RULES = {
    "custom_call_v2": Rule("custom_call_v1", "1.18.0", "result_tilings is empty"),
    "composite_v2": Rule("composite_v1", "1.14.0", "it has no composite_regions"),
}

# Newer ops without a downgrade here: op -> (StableHLO version, what it adds).
NO_OLDER_FORM = {
    "collective_broadcast_v2": ("1.20.0", "variadic operands and has_dynamic_root"),
    "collective_reduce_v1": ("1.19.0", "the op collective_reduce"),
    "async_start_v1": ("1.15.0", "the op async_start"),
    "async_done_v1": ("1.15.0", "the op async_done"),
}

# VHLO's bytecode codes (stablehlo/dialect/VhloBytecode.cpp) of the attributes and types
# added since 1.13, by which an older jaxlib's reader refuses them ("unknown vhlo attribute
# code: 23"): code -> (name, StableHLO version).
ATTRIBUTE_CODES = {
    21: ("#vhlo.sub_axis_info_v1", "1.16.0"),
    22: ("#vhlo.axis_ref_v1", "1.16.0"),
    23: ("#vhlo.replica_group_mesh_axes_v1 (replica groups named by mesh axes)", "1.16.0"),
    24: ("#vhlo.mesh_axis_v1", "1.16.0"),
    25: ("#vhlo.mesh_v1", "1.16.0"),
}
TYPE_CODES = {
    41: ("!vhlo.buffer_v1", "1.13.0"),
    42: ("!vhlo.future_v1", "1.15.0"),
}

# custom_call_v2's properties, alphabetical as MLIR's ODS writes them: result_tilings last.
_CUSTOM_CALL_V2_PROPERTIES = 9
# #vhlo.array_v1<[]> in VHLO's custom encoding: kArrayV1Attr (1), then 0 elements
_EMPTY_VHLO_ARRAY = b"\x03\x01"


class NewerFeature(LoadError):
    """The artifact uses a newer VHLO feature the installed jaxlib lacks (`what`)."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


def describe_reader_error(message: str) -> Optional[str]:
    """What an older jaxlib's reader says it cannot read, as the VHLO feature it is."""
    m = re.search(r"unknown vhlo (attribute|type) code: (\d+)", message)
    if m:
        table = ATTRIBUTE_CODES if m[1] == "attribute" else TYPE_CODES
        known = table.get(int(m[2]))
        if known:
            return f"{m[1]} {known[0]}, StableHLO {known[1]}"
        return f"a VHLO {m[1]} with bytecode code {m[2]}"
    m = re.search(r"unregistered operation '(vhlo\.([^']+))'", message)
    if m:
        known = NO_OLDER_FORM.get(m[2])
        return f"operation {m[1]}" + (f" ({known[1]}, StableHLO {known[0]})" if known else "")
    return None


# ------------------------------------------------------------------------------ encoding

def _varint(value: int, length: int = 0) -> bytes:
    """MLIR's prefix varint of `value`, in `length` bytes (at least the fewest it needs)."""
    need = 9
    for n in range(1, 9):
        if value < 1 << (7 * n):
            need = n
            break
    length = max(length, need)
    if length == 9:
        return b"\0" + value.to_bytes(8, "little")
    return ((value << length) | (1 << (length - 1))).to_bytes(length, "little")


class _Section(NamedTuple):
    id: int
    alignment: int  # flagged alignment, or 1
    data: bytes


def _read_sections(data: bytes) -> tuple[int, int, list]:
    """(bytecode version, where the header ends, [_Section]) of a bytecode file."""
    r = _Reader(data, len(BYTECODE_MAGIC))
    version = r.varint()
    r.cstring()  # the producer
    header_end = r.pos
    sections, seen = [], set()
    while not r.empty():
        head = r.byte()
        length = r.varint()
        section, aligned = head & 0x7F, head & 0x80
        if section >= _NUM_SECTIONS or section in seen:
            raise _Framing(f"invalid or repeated section id {section}")
        seen.add(section)
        alignment = 1
        if aligned:
            alignment = r.varint()
            if alignment == 0 or alignment & (alignment - 1):
                raise _Framing(f"section {section}: alignment {alignment}")
            if alignment > _SHIFT_MODULUS:
                raise _Framing(f"section {section}: alignment {alignment} > {_SHIFT_MODULUS}")
            while r.pos % alignment:
                if r.byte() != _ALIGNMENT_BYTE:
                    raise _Framing(f"section {section}: a padding byte is not 0xCB")
        sections.append(_Section(section, alignment, r.bytes(length)))
    for required in (_STRING, _DIALECT, _ATTR_TYPE_OFFSET, _IR):
        if required not in seen:
            raise _Framing(f"required section {required} is missing")
    return version, header_end, sections


def _write_strings(strings: list) -> bytes:
    sizes = b"".join(_varint(len(s) + 1) for s in reversed(strings))
    return _varint(len(strings)) + sizes + b"".join(s + b"\0" for s in strings)


class _Dialects(NamedTuple):
    head: bytes        # the dialect count and entries, as read
    names: list        # dialect index -> name string index
    op_names: list     # [dialect index, name string index, was-registered flag]


def _read_dialects(section: bytes, version: int) -> _Dialects:
    r = _Reader(section)
    count = r.varint()
    if count > len(section):
        raise _Framing("the dialect section claims more dialects than it has bytes")
    names = []
    for _ in range(count):
        if version < _DIALECT_VERSIONING:
            names.append(r.varint())
            continue
        flagged = r.varint()
        names.append(flagged >> 1)
        if flagged & 1:  # a dialect version: a nested section
            head = r.byte()
            length = r.varint()
            if head & 0x80:
                raise _Framing("an aligned dialect version section")
            r.bytes(length)
    head = section[:r.pos]
    if version >= _ELIDE_UNKNOWN_BLOCK_ARG_LOCATION:
        r.varint()  # the number of op names (a reservation)
    op_names = []
    while not r.empty():
        dialect = r.varint()
        n = r.varint()
        if dialect >= len(names) or n > r.end - r.pos:
            raise _Framing("an op name group names no dialect or runs past its section")
        for _ in range(n):
            if version >= _NATIVE_PROPERTIES:
                flagged = r.varint()
                op_names.append([dialect, flagged >> 1, flagged & 1])
            else:
                op_names.append([dialect, r.varint(), None])
    return _Dialects(head, names, op_names)


def _write_dialects(dialects: _Dialects, version: int, pad: int) -> bytes:
    """The dialect section; `pad` extra bytes spread over the op name varints."""
    groups, run = [], []
    for entry in dialects.op_names:
        if run and run[0][0] != entry[0]:
            groups.append(run)
            run = []
        run.append(entry)
    if run:
        groups.append(run)
    out = [dialects.head]
    if version >= _ELIDE_UNKNOWN_BLOCK_ARG_LOCATION:
        out.append(_varint(len(dialects.op_names)))
    for group in groups:
        out.append(_varint(group[0][0]) + _varint(len(group)))
        for _, string, flag in group:
            value = string if flag is None else string << 1 | flag
            least = len(_varint(value))
            extra = min(pad, 9 - least)  # (9 bytes: the 0x00 form)
            pad -= extra
            out.append(_varint(value, least + extra))
    if pad:
        raise _Framing("the dialect section has too few op names to keep offsets aligned")
    return b"".join(out)


def _attribute_entries(section: bytes, attr_section_len: int) -> list:
    """[(dialect index, custom encoding?, start, end)] of the attributes (types skipped)."""
    r = _Reader(section)
    num_attrs, num_types = r.varint(), r.varint()
    if num_attrs + num_types > len(section) + attr_section_len:
        raise _Framing("the attribute/type table claims more entries than it has bytes")
    entries, offset = [], 0
    for count, keep in ((num_attrs, True), (num_types, False)):
        done = 0
        while done < count:
            dialect = r.varint()
            group = r.varint()
            if group > count - done or group == 0:
                raise _Framing("an attribute/type group runs past its table")
            for _ in range(group):
                flagged = r.varint()
                size = flagged >> 1
                if size > attr_section_len - offset:
                    raise _Framing("an attribute/type entry runs past its section")
                if keep:
                    entries.append((dialect, flagged & 1, offset, offset + size))
                offset += size
            done += group
    return entries


def _properties(section: bytes) -> list:
    """The properties section's entries, each the raw bytes of one op's properties."""
    if not section:
        return []
    r = _Reader(section)
    count = r.varint()
    if count > len(section):
        raise _Framing("the properties section claims more entries than it has bytes")
    out = []
    for _ in range(count):
        out.append(r.bytes(r.varint()))
    return out


def _ops(data: bytes, r: _Reader, version: int, num_ops: int, depth: int, out: list) -> None:
    """Appends (op name index, mask, properties index or None, region count) of `num_ops`
    ops (and those in their regions) read from `r`, the way MLIR's reader reads them."""
    for _ in range(num_ops):
        name = r.varint()
        mask = r.byte()
        r.varint()  # location
        if mask & _HAS_ATTRS:
            r.varint()
        props = r.varint() if mask & _HAS_PROPERTIES else None
        num_results = 0
        for flag in (_HAS_RESULTS, _HAS_OPERANDS, _HAS_SUCCESSORS):
            if mask & flag:
                n = r.varint()
                if n > r.end - r.pos:
                    raise _Framing("a count exceeds the bytes left")
                if flag == _HAS_RESULTS:
                    num_results = n
                for _ in range(n):
                    r.varint()
        if version >= _USE_LIST_ORDERING and mask & _HAS_USE_LIST_ORDERS:
            _use_list_orders(r, num_results)
        num_regions = 0
        if mask & _HAS_REGIONS:
            flagged = r.varint()
            num_regions, isolated = flagged >> 1, flagged & 1
            if num_regions:
                if depth >= _MAX_DEPTH:
                    raise _Framing(f"regions nest deeper than {_MAX_DEPTH}")
                if num_regions > r.end - r.pos:
                    raise _Framing("an op claims more regions than bytes left")
                if isolated and version >= _LAZY_LOADING:
                    head = r.byte()
                    length = r.varint()
                    if head & 0x7F != _IR or head & 0x80:
                        raise _Framing("an isolated region is not a plain IR section")
                    inner = _Reader(data, r.pos, r.pos + length)
                    if length > r.end - r.pos:
                        raise _Framing("a nested IR section runs past its parent")
                    out.append((name, mask, props, num_regions))
                    for _ in range(num_regions):
                        _region(data, inner, version, depth + 1, out)
                    r.pos += length
                    continue
                out.append((name, mask, props, num_regions))
                for _ in range(num_regions):
                    _region(data, r, version, depth + 1, out)
                continue
        out.append((name, mask, props, num_regions))


def _use_list_orders(r: _Reader, num_results: int) -> None:
    entries = r.varint() if num_results > 1 else 1
    for _ in range(entries):
        if num_results > 1:
            r.varint()
        n = r.varint() >> 1
        if n > r.end - r.pos:
            raise _Framing("a use-list order exceeds the bytes left")
        for _ in range(n):
            r.varint()


def _region(data: bytes, r: _Reader, version: int, depth: int, out: list) -> None:
    num_blocks = r.varint()
    if not num_blocks:
        return
    r.varint()  # values
    for _ in range(num_blocks):
        flagged = r.varint()
        if flagged & 1:
            n = r.varint()
            if n > r.end - r.pos:
                raise _Framing("block arguments exceed the bytes left")
            for _ in range(n):
                if version >= 4:
                    if r.varint() & 1:
                        r.varint()
                else:
                    r.varint()
                    r.varint()
            if version >= _USE_LIST_ORDERING and r.byte():
                _use_list_orders(r, n)
        _ops(data, r, version, flagged >> 1, depth, out)


# ------------------------------------------------------------------------------- rewrite

class Downgraded(NamedTuple):
    data: bytes       # the rewritten artifact
    renamed: dict     # newer op -> (older op, how many ops)


def downgrade(data: bytes, target: str, registered) -> Downgraded:
    """`data` (a VHLO artifact) with each newer op `registered` (a predicate on an op's
    full name, e.g. `ir.Context.is_registered_operation`) does not know renamed to its
    older form where that is exact, and `StableHLO_v<target>` as its producer.

    Raises `NewerFeature` naming the op and feature where a newer op is used in a way
    its older form cannot say, or has no older form; `LoadError` where the bytes cannot
    be read as MLIR bytecode."""
    try:
        return _downgrade(data, target, registered)
    except LoadError:
        raise
    except _Framing as e:
        raise LoadError(f"corrupt MLIR bytecode: {e}") from None
    except (IndexError, ValueError, OverflowError) as e:
        raise LoadError(f"corrupt MLIR bytecode: {type(e).__name__} ({e})") from None


def _downgrade(data: bytes, target: str, registered) -> Downgraded:
    if not data.startswith(BYTECODE_MAGIC):
        raise _Framing("no MLIR bytecode magic")
    version, header_end, sections = _read_sections(data)
    by_id = {s.id: s for s in sections}
    if version < _NATIVE_PROPERTIES:
        raise _Framing(f"bytecode version {version} predates the properties encoding")
    section = by_id[_STRING].data
    strings = _strings(section, 0, len(section))
    dialects = _read_dialects(by_id[_DIALECT].data, version)

    def string(i):
        if i >= len(strings):
            raise _Framing(f"invalid string index {i}")
        return strings[i].decode("utf-8", "replace")

    vhlo = [i for i, s in enumerate(dialects.names) if string(s) == "vhlo"]
    newer = {}  # op name index -> its name
    for index, (dialect, name, _) in enumerate(dialects.op_names):
        if dialect in vhlo and not registered(f"vhlo.{string(name)}"):
            newer[index] = string(name)
    for name in sorted(set(newer.values())):
        if name not in RULES:
            since, what = NO_OLDER_FORM.get(name, (None, None))
            raise NewerFeature(f"operation vhlo.{name}" + (
                f" ({what}, StableHLO {since})" if since else ""))
    ops: list = []
    if newer:
        r = _Reader(by_id[_IR].data)
        flagged = r.varint()
        if flagged & 1:
            raise _Framing("the top-level block declares arguments")
        _ops(r.data, r, version, flagged >> 1, 0, ops)
    props = _properties(by_id[_PROPERTIES].data if _PROPERTIES in by_id else b"")
    attr_data = by_id[_ATTR_TYPE].data if _ATTR_TYPE in by_id else b""
    attributes = None
    counts: dict = {}
    for name_index, mask, prop_index, num_regions in ops:
        name = newer.get(name_index)
        if name is None:
            continue
        counts[name] = counts.get(name, 0) + 1
        if name == "composite_v2" and num_regions:
            raise NewerFeature("operation vhlo.composite_v2 with composite_regions "
                               "(StableHLO 1.14.0), which vhlo.composite_v1 lacks")
        if name == "custom_call_v2":
            if prop_index is None or prop_index >= len(props):
                raise _Framing("a vhlo.custom_call_v2 without its properties")
            r = _Reader(props[prop_index])
            values = [r.varint() for _ in range(_CUSTOM_CALL_V2_PROPERTIES)]
            if not r.empty():
                raise _Framing("vhlo.custom_call_v2's properties run past its attributes")
            if attributes is None:
                attributes = _attribute_entries(by_id[_ATTR_TYPE_OFFSET].data,
                                                len(attr_data))
            tilings = values[-1]
            if tilings >= len(attributes):
                raise _Framing(f"invalid attribute index {tilings}")
            dialect, custom, start, end = attributes[tilings]
            if dialect >= len(dialects.names):
                raise _Framing("an attribute names no dialect")
            if not (custom and dialect in vhlo and attr_data[start:end] == _EMPTY_VHLO_ARRAY):
                raise NewerFeature("operation vhlo.custom_call_v2 with result_tilings "
                                   "(StableHLO 1.18.0), which vhlo.custom_call_v1 lacks")
    # rename: each newer op name entry points at its older name's string
    index_of = {s: i for i, s in enumerate(strings)}
    new_strings = list(strings)
    renamed = {}
    for index, name in newer.items():
        older = RULES[name].older.encode()
        if older not in index_of:
            index_of[older] = len(new_strings)
            new_strings.append(older)
        dialects.op_names[index][1] = index_of[older]
        renamed[f"vhlo.{name}"] = (f"vhlo.{RULES[name].older}", counts.get(name, 0))
    return Downgraded(_assemble(version, header_end, target, sections, dialects,
                                new_strings), renamed)


def _size(section_id: int, body: bytes) -> int:
    """The bytes an unaligned section takes: its id, its length, its body."""
    return 1 + len(_varint(len(body))) + len(body)


def _assemble(version: int, header_end: int, target: str, sections: list,
              dialects: _Dialects, strings: list) -> bytes:
    """The bytecode file again with the new header, dialect and string sections. Each
    section starts where it did modulo _SHIFT_MODULUS (see the module docstring): the new
    dialect section is padded (its op name varints written longer), and the string
    section with an unused string."""
    header = BYTECODE_MAGIC + _varint(version) + f"StableHLO_v{target}".encode() + b"\0"
    out = bytearray(header)
    if sections[0].id != _DIALECT:  # (MLIR writes it first)
        raise _Framing("the dialect section is not the first")
    for section in sections:
        if section.id == _DIALECT:
            if section.alignment != 1:
                raise _Framing("an aligned dialect section")
            # its end moves by a multiple of _SHIFT_MODULUS from where it was
            was_end = header_end + _size(section.id, section.data)
            plain = _write_dialects(dialects, version, 0)
            pad = (was_end - (len(out) + 1 + 9 + len(plain))) % _SHIFT_MODULUS
            body = _write_dialects(dialects, version, pad)
            out += bytes([section.id]) + _varint(len(body), 9) + body
            continue
        body = section.data
        if section.id == _STRING:
            was = _size(_STRING, section.data)
            for filler in range(2 * _SHIFT_MODULUS + 1):
                body = _write_strings(strings + ([b"x" * filler] if filler else []))
                if (_size(_STRING, body) - was) % _SHIFT_MODULUS == 0:
                    break
            else:
                raise _Framing("the string section cannot keep the offsets after it")
        if section.alignment > 1 and (len(out) + 1 + len(_varint(len(body)))) % section.alignment:
            out += bytes([section.id | 0x80]) + _varint(len(body)) + _varint(section.alignment)
            while len(out) % section.alignment:
                out.append(_ALIGNMENT_BYTE)
        else:
            out += bytes([section.id]) + _varint(len(body))
        out += body
    return bytes(out)
