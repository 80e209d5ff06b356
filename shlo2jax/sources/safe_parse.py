"""Reading untrusted MLIR without letting jaxlib abort the process.

jaxlib's MLIR bindings turn every diagnostic of a failed parse into a Python string inside
a C callback (`ir.Module.parse` collects them for its exception). When a diagnostic holds
bytes that are not UTF-8 (a dialect, op or symbol name read from a corrupt bytecode string
table, a string literal with `\\FF` escapes in text), nanobind's conversion throws a C++
exception through that callback and the process ends in `std::terminate`. A Python `try`
cannot catch that, so the input is checked before it reaches the parser:

* MLIR bytecode: the framing is read (header, section headers, the string table, the
  attribute/type offset table) the way MLIR's reader reads it. A framing error is reported
  here (the parser would only fail on it); every shared string must be UTF-8, and every
  attribute/type entry kept as assembly text is checked like text. Entries that refer to one
  another in a cycle (which MLIR's reader goes round forever) are a framing error too
  (`_reference_cycle`).
* Text: every `\\XX` escape that writes a byte >= 0x80 must, with its string literal, still
  form valid UTF-8 (raw text is UTF-8 by construction).

* MLIR bytecode's IR section: walked op by op for what MLIR's reader trusts without checking
  (a top-level block with arguments, a count that sizes an allocation before its entries are
  read; see `_check_ir`).

Input that passes is parsed in this process; parsing it cannot put a non-UTF-8 byte in a
diagnostic. Input that does not pass (a string that is not UTF-8, say) is not necessarily
malformed: it is parsed once in a child process first (`parse_in_child`), which reports how
jaxlib fared; only a clean parse there is repeated here (parsing is deterministic). The
headers and tables cost a few milliseconds on a large model, the IR walk about 0.5 us of CPU
per op (36 ms on a 75k-op module, whose parse by jaxlib takes 68 ms).
"""

from __future__ import annotations

import dataclasses
import io
import os
import re
import signal
import subprocess
import sys
from typing import NamedTuple, Optional

from shlo2jax import compat
from shlo2jax.compat import QUANT_WARMUP

BYTECODE_MAGIC = b"ML\xefR"

# MLIR's bytecode sections (mlir/Bytecode/Encoding.h)
_STRING, _DIALECT, _ATTR_TYPE, _ATTR_TYPE_OFFSET, _IR = 0, 1, 2, 3, 4
_NUM_SECTIONS = 9
_ALIGNMENT_BYTE = 0xCB
_DIALECT_VERSIONING = 1  # the bytecode version from which dialects carry versions


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What the check says about an input: `error` (it is malformed: the message), or
    `safe` (the in-process parser may see it), or neither (a child process must parse it
    first; `why` says what made the check inconclusive)."""
    safe: bool
    error: Optional[str] = None
    why: str = ""
    # (a safe bytecode's dialect names, as its dialect section lists them: what was read,
    # not part of the verdict)
    dialects: tuple = dataclasses.field(default=(), compare=False, repr=False)

    @property
    def readable_dialects_only(self) -> bool:
        """Whether the checked bytecode holds builtin, vhlo and sdy constructs only (the
        dialects the bytecode reading knows, `vhlo_bytecode_paths`): else (an attribute of
        another dialect, say) that reading would not vouch for it, and the module is printed
        without writing it first (~0.03 s on a 50k-op module)."""
        return bool(self.dialects) and set(self.dialects) <= {b"builtin", b"vhlo", b"sdy"}


SAFE = Verdict(True)


class _Framing(Exception):
    pass


class _Reader:
    __slots__ = ("data", "pos", "end")

    def __init__(self, data, pos: int = 0, end: Optional[int] = None):
        self.data, self.pos = data, pos
        self.end = len(data) if end is None else end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise _Framing("a byte is read past the end of the bytecode")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def bytes(self, n: int) -> bytes:
        if n > self.end - self.pos:
            raise _Framing(f"{n} bytes are read where {self.end - self.pos} remain")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def varint(self) -> int:
        first = self.byte()
        if first & 1:
            return first >> 1
        if first == 0:
            return int.from_bytes(self.bytes(8), "little")
        n = (first & -first).bit_length() - 1  # trailing zeros: the extra bytes
        value = int.from_bytes(bytes([first]) + self.bytes(n), "little")
        return value >> (n + 1)

    def cstring(self) -> bytes:
        nul = self.data.find(b"\0", self.pos, self.end)
        if nul < 0:
            raise _Framing("a string has no terminating NUL")
        out = self.data[self.pos:nul]
        self.pos = nul + 1
        return out

    def empty(self) -> bool:
        return self.pos >= self.end


def _sections(data: bytes) -> tuple[int, bytes, dict]:
    """(version, producer, {section id: (start, end)}) of a bytecode file."""
    r = _Reader(data, len(BYTECODE_MAGIC))
    version = r.varint()
    producer = r.cstring()
    sections = {}
    while not r.empty():
        head = r.byte()
        length = r.varint()
        section, aligned = head & 0x7F, head & 0x80
        if section >= _NUM_SECTIONS:
            raise _Framing(f"invalid section id {section}")
        if section in sections:
            raise _Framing(f"section {section} appears twice")
        if aligned:
            alignment = r.varint()
            if alignment == 0 or alignment & (alignment - 1):
                raise _Framing(f"section {section}: alignment {alignment} is not a power of two")
            # MLIR pads to an absolute address; a buffer that is not aligned that far is
            # refused by its reader, so in a readable file the padding ends at an offset
            # that is a multiple of the alignment.
            while r.pos % alignment:
                if r.byte() != _ALIGNMENT_BYTE:
                    raise _Framing(f"section {section}: a padding byte is not 0xCB")
        if length > r.end - r.pos:
            raise _Framing(f"section {section} ({length} bytes) runs past the end of the file")
        sections[section] = (r.pos, r.pos + length)
        r.pos += length
    for required in (_STRING, _DIALECT, _ATTR_TYPE, _ATTR_TYPE_OFFSET, _IR):
        if required not in sections:
            raise _Framing(f"required section {required} is missing")
    return version, producer, sections


def _strings(data: bytes, start: int, end: int) -> list[bytes]:
    r = _Reader(data, start, end)
    count = r.varint()
    if count > end - start:
        raise _Framing(f"the string table claims {count} strings in {end - start} bytes")
    sizes = [r.varint() for _ in range(count)]  # last string first
    data_end = end
    strings = []
    for size in sizes:
        if size < 1 or data_end - size < r.pos:
            raise _Framing("a string's size exceeds the string table")
        if data[data_end - 1] != 0:
            raise _Framing("a string of the string table is not NUL-terminated")
        strings.append(data[data_end - size:data_end - 1])
        data_end -= size
    if data_end != r.pos:
        raise _Framing("unexpected data between the string sizes and the strings")
    strings.reverse()
    return strings


def _attr_type_entries(data: bytes, sections: dict) -> tuple[int, list]:
    """(the number of attributes, [(dialect index, start, end, custom encoding)] of every
    attribute entry, then every type entry), read from the offset table."""
    r = _Reader(data, *sections[_ATTR_TYPE_OFFSET])
    start, end = sections[_ATTR_TYPE]
    num_attrs, num_types = r.varint(), r.varint()
    if num_attrs + num_types > end - start + 1 + (r.end - r.pos):
        raise _Framing("the attribute/type table claims more entries than it has bytes")
    offset, entries = start, []
    for count in (num_attrs, num_types):
        done = 0
        while done < count:
            dialect = r.varint()
            group = r.varint()
            if group > count - done:
                raise _Framing("an attribute/type group runs past its table")
            for _ in range(group):
                flagged = r.varint()
                size = flagged >> 1
                if size > end - offset:
                    raise _Framing("an attribute/type entry runs past its section")
                entries.append((dialect, offset, offset + size, flagged & 1))
                offset += size
            done += group
    if not r.empty():
        raise _Framing("unexpected data after the attribute/type offset table")
    return num_attrs, entries


def _asm_entries(data: bytes, entries: list) -> list[bytes]:
    """The attribute and type entries stored as assembly text (not custom encoded)."""
    texts = []
    for _, start, end, custom in entries:
        if not custom:
            entry = data[start:end]
            nul = entry.find(b"\0")
            texts.append(entry if nul < 0 else entry[:nul])
    return texts


# ------------------------------------------------------- references between attributes/types
# MLIR's reader resolves an attribute or type entry that refers to others by reading those
# first, recursively; past `maxAttrTypeDepth` (5) it defers the entry it reached and retries
# it from a worklist once what it needs is read. Entries that refer to one another in a cycle
# never are: the worklist goes round without end (gelu_mlp_vjp's VHLO module with two 11-byte
# spans swapped, `swap@397+11`: a CallSiteLoc whose callee is, through four more locations,
# itself; `ir.Module.parse` never returns). Real IR cannot hold such a cycle (an
# attribute is built from the ones it holds, which exist before it), so a cycle is a framing
# error. The references are read from the encodings of the builtin dialect (locations,
# arrays, dictionaries, symbol references, typed attributes, tensor and function types:
# mlir/include/mlir/IR/BuiltinDialectBytecode.td; every module's locations are builtin, VHLO
# keeps them), of VHLO (its arrays, dictionaries, typed attributes, tensor, function and
# quantized types: stablehlo/dialect/VhloBytecode.cpp) and of Shardy (its attributes: jax's
# LAPACK calls carry a sharding rule, whose operand mapping changed to name the rule made
# jaxlib's reader loop). An entry of another dialect, a code not listed, or an encoding that
# does not read within its entry adds no reference: the check can only miss a cycle through
# it, never refuse a file without one.
#
# Each encoding, by its code, as the fields it starts with, up to its last reference: `a` an
# attribute, `t` a type, `A`/`T` a list of them, `D` a list of (name, value) attribute pairs,
# `s` a string index, `v` a varint, `L` a list of varints (a shape), `o` an optional
# attribute. The dialects only append codes ("the order of these codes must not be changed").
_BUILTIN_ATTRIBUTES = (
    "A",    # 0 ArrayAttr
    "D",    # 1 DictionaryAttr
    "",     # 2 StringAttr
    "st",   # 3 StringAttr with a type
    "a",    # 4 FlatSymbolRefAttr
    "aA",   # 5 SymbolRefAttr
    "t",    # 6 TypeAttr
    "",     # 7 UnitAttr
    "t",    # 8 IntegerAttr (its value is read by its type's width)
    "t",    # 9 FloatAttr
    "aa",   # 10 CallSiteLoc (callee, caller)
    "a",    # 11 FileLineColLoc (its file name; a line and a column follow)
    "A",    # 12 FusedLoc
    "Aa",   # 13 FusedLoc with metadata
    "aa",   # 14 NameLoc (name, child location)
    "",     # 15 UnknownLoc
    "t",    # 16 DenseResourceElementsAttr
    "t",    # 17 DenseArrayAttr
    "t",    # 18 DenseIntOrFPElementsAttr
    "t",    # 19 DenseStringElementsAttr
    "taa",  # 20 SparseElementsAttr
    "a",    # 21 DistinctAttr
    "a",    # 22 FileLineColRange (its file name; lines and columns follow)
)
_BUILTIN_TYPES = (
    "", "",          # 0 IntegerType, 1 IndexType
    "TT",            # 2 FunctionType (inputs, results)
    "", "", "", "", "", "",  # 3-8 BFloat16 .. Float128
    "t",             # 9 ComplexType
    "Lta",           # 10 MemRefType (shape, element type, layout)
    "aLta",          # 11 MemRefType with a memory space
    "",              # 12 NoneType
    "Lt",            # 13 RankedTensorType
    "aLt",           # 14 RankedTensorType with an encoding
    "T",             # 15 TupleType
    "t",             # 16 UnrankedMemRefType
    "at",            # 17 UnrankedMemRefType with a memory space
    "t",             # 18 UnrankedTensorType
    "Lt",            # 19 VectorType
)
_VHLO_ATTRIBUTES = {1: "A", 6: "D", 8: "t", 9: "t", 15: "t", 17: "t",  # array, dict, float,
                    22: "a", 23: "aa", 24: "a", 25: "a"}  # integer, tensor, type; axes, meshes
_VHLO_TYPES = {1: "t", 8: "TT", 20: "Lt", 21: "aLt", 23: "T", 24: "vtt", 25: "t",
               30: "vtt", 42: "t"}  # complex, function, ranked tensor (with an encoding),
#                                     tuple, quantized, unranked tensor, quantized per axis,
#                                     future
# Shardy's attributes (shardy/dialect/sdy/ir/bytecode.td; its only custom encodings are
# attributes): `s` a string, `o` an optional attribute (0, or its index with the low bit set).
# Real exports hold them on LAPACK custom calls (sharding rules) and sharded arguments.
_SDY_MESH, _SDY_SHARDING_RULE = 2, 10
_SDY_ATTRIBUTES = {
    0: "A",     # ManualAxesAttr (axis names)
    _SDY_MESH: "A",  # MeshAttr (its axes; device ids follow)
    4: "so",    # AxisRefAttr (name, sub-axis info)
    5: "A",     # DimensionShardingAttr (axes; closed, priority follow)
    6: "aAA",   # TensorShardingAttr v1 (mesh or its name, dimensions, replicated axes)
    7: "A",     # TensorShardingPerValueAttr v1
    9: "A",     # TensorMappingAttr (dimension mappings)
    _SDY_SHARDING_RULE: "LAA",  # OpShardingRuleAttr (factor sizes, operand and result
    #                             mappings; lists of factors follow)
    11: "A", 12: "A", 13: "A", 14: "A",  # axis ref lists, lists of them, all-to-all params
    15: "aAAA",  # TensorShardingAttr v2 (and unreduced axes)
    16: "A",     # TensorShardingPerValueAttr v2
    17: "aAAA",  # TensorShardingAttr v3 (a reduction follows)
}
_REFERENCES = {  # dialect: ({attribute code: fields}, {type code: fields})
    b"builtin": (dict(enumerate(_BUILTIN_ATTRIBUTES)), dict(enumerate(_BUILTIN_TYPES))),
    b"vhlo": (_VHLO_ATTRIBUTES, _VHLO_TYPES),
    b"sdy": (_SDY_ATTRIBUTES, {}),
}
_BUILTIN_NAMES = {0: "ArrayAttr", 1: "DictionaryAttr", 10: "CallSiteLoc", 11: "FileLineColLoc",
                  12: "FusedLoc", 13: "FusedLoc", 14: "NameLoc", 22: "FileLineColRange"}


def _dialect_names(data: bytes, version: int, start: int, end: int,
                   strings: list, op_names: Optional[list] = None) -> list[bytes]:
    """The names of the dialect section's dialects, by index (b"" for a name index beyond
    the string table: the reader refuses it). `op_names`, for a version that writes no
    registered flag with them: filled with the op names (`dialect.op`), by index."""
    r = _Reader(data, start, end)
    names = []
    for _ in range(r.varint()):
        if r.empty():
            raise _Framing("the dialect section ends before its dialects")
        index = r.varint()
        has_version = False
        if version >= _DIALECT_VERSIONING:
            index, has_version = index >> 1, index & 1
        names.append(strings[index] if index < len(strings) else b"")
        if has_version:  # a nested section: id, length, (alignment and padding), bytes
            head, length = r.byte(), r.varint()
            if head & 0x80:
                alignment = r.varint()
                if alignment == 0 or alignment & (alignment - 1):
                    raise _Framing("a dialect version's alignment is not a power of two")
                while r.pos % alignment:
                    r.byte()
            r.bytes(length)
    if op_names is not None:  # how many, then grouped by dialect
        total = r.varint()
        while len(op_names) < total:
            dialect, count = r.varint(), r.varint()
            op_names.extend(names[dialect] + b"." + strings[r.varint()] for _ in range(count))
        if len(op_names) != total or not r.empty():
            raise _Framing("the op names are not as many as the dialect section says")
    return names


_ELEMENT = {"A": "a", "T": "t", "D": "a", "L": "v"}  # a list's element


def _references(data: bytes, pos: int, end: int, fields: str, num_attrs: int) -> list:
    """The entries (attributes 0.., types num_attrs..) that the fields `fields` of an encoding
    at data[pos:end] refer to, in the order MLIR's reader reads them. Where the encoding does
    not read within the entry, those read before: the reader resolves each reference as it
    reads it, so it follows them (round a cycle, forever) before it fails."""
    out = []
    for field in fields:
        n = 1
        if field in "ATDL":
            if pos >= end:
                return out
            n, pos = _varint(data, pos)
            if field == "D":  # (name, value) pairs
                n *= 2
            field = _ELEMENT[field]
        for _ in range(n):
            if pos >= end:
                return out
            value, pos = _varint(data, pos)
            if pos > end:
                return out
            if field == "a":
                out.append(value)
            elif field == "t":
                out.append(num_attrs + value)
            elif field == "o" and value & 1:
                out.append(value >> 1)
    return out


def _scalar_fields(table: dict, num_attrs: int) -> dict:
    """{code: fields} with fields of one reference or value each (no lists) made a tuple of
    what each adds to the varint it reads (None: not a reference): the fast path."""
    bases = {"a": 0, "t": num_attrs}
    return {code: tuple(bases.get(f) for f in fields)
            if fields and not set(fields) & set("ATDLo") else fields
            for code, fields in table.items() if fields}


def _reference_graph(data: bytes, num_attrs: int, entries: list, dialects: list) -> dict:
    """{entry: [the entries it refers to]} (attributes 0.., types num_attrs..) of the entries
    whose encodings `_REFERENCES` knows."""
    tables = {}
    for i, name in enumerate(dialects):
        if name in _REFERENCES:
            attributes, types = _REFERENCES[name]
            tables[i] = (_scalar_fields(attributes, num_attrs), _scalar_fields(types, num_attrs))
    if not tables:
        return {}
    edges: dict = {}
    varint = _varint
    for i, (dialect, start, end, custom) in enumerate(entries):
        table = tables.get(dialect)
        if table is None or not custom or start >= end:
            continue
        code = data[start]
        if code & 1:
            code, pos = code >> 1, start + 1
        else:
            code, pos = varint(data, start)
        fields = table[i >= num_attrs].get(code)
        if fields is None:
            continue
        if fields.__class__ is tuple:  # (the inline path: locations, typed attributes)
            refs = []
            for base in fields:  # (as `_references`: those read within the entry)
                if pos >= end:
                    break
                value = data[pos]
                if value & 1:
                    value, pos = value >> 1, pos + 1
                else:
                    value, pos = varint(data, pos)
                if pos > end:
                    break
                if base is not None:
                    refs.append(base + value)
        else:
            refs = _references(data, pos, end, fields, num_attrs)
        if refs:
            edges[i] = refs
    return edges


def _reference_cycle(data: bytes, num_attrs: int, entries: list,
                     dialects: list) -> Optional[str]:
    """Where attribute/type entries refer to one another in a cycle: the cycle in words;
    else None."""
    cycle = _find_cycle(_reference_graph(data, num_attrs, entries, dialects))
    if cycle is None:
        return None

    def name(i):
        dialect, start, _, _ = entries[i]
        code = _varint(data, start)[0]
        what = f"type #{i - num_attrs}" if i >= num_attrs else f"attribute #{i}"
        if dialects[dialect] == b"builtin" and i < num_attrs and code in _BUILTIN_NAMES:
            return f"{what} (a {_BUILTIN_NAMES[code]})"
        return f"{what} ({dialects[dialect].decode()} code {code})"
    path = " -> ".join(name(i) for i in cycle + cycle[:1])
    return (f"attribute/type entries refer to one another in a cycle ({path}); MLIR's "
            f"reader would go round it forever")


def _find_cycle(edges: dict) -> Optional[list]:
    """A cycle of the graph {node: [successor]} as its nodes in order, or None (an iterative
    depth-first search: chains as long as the table do not recurse)."""
    state: dict = {}  # 1: on the current path, 2: done
    for root in edges:
        if root in state:
            continue
        path, stack = [root], [iter(edges[root])]
        state[root] = 1
        while stack:
            for nxt in stack[-1]:
                seen = state.get(nxt)
                if seen == 1:
                    return path[path.index(nxt):]
                if seen is None:
                    state[nxt] = 1
                    path.append(nxt)
                    stack.append(iter(edges.get(nxt, ())))
                    break
            else:
                state[path.pop()] = 2
                stack.pop()
    return None



# ------------------------------------------------------------ what an entry's type must be
# MLIR's readers trust that an attribute's type is the kind it needs: a float attribute of a
# non-float type ends in LLVM's `report_fatal_error` ("unsupported floating-point type"; SIGABRT),
# a dense tensor constant whose data is not the size its type declares is read past its end
# (SIGSEGV). Both were seen with two spans of a real module's attribute section swapped
# (hf_deberta_v2's VHLO `swap@4592+17`, gru_scan's `swap@1376+2` changing a blob's length).
# Each type entry is classified from its encoding (VhloBytecode.cpp's and
# BuiltinDialectBytecode.td's codes): ("float", bits), ("int", bits), ("index",),
# ("complex", element), ("tensor", shape, element), else None (not known: never refused).
_VHLO_FLOATS = {2: 16, 3: 16, 4: 32, 5: 64, 6: 8, 7: 8, 27: 8, 28: 8, 29: 8, 34: 19, 35: 8,
                36: 8, 37: 4, 38: 6, 39: 6, 40: 8}
_VHLO_INTS = {0: 1, 10: 4, 11: 8, 12: 16, 13: 32, 14: 64, 15: 4, 16: 8, 17: 16, 18: 32,
              19: 64, 31: 2, 32: 2}
_BUILTIN_FLOATS = {3: 16, 4: 16, 5: 32, 6: 64, 7: 80, 8: 128}
# attribute code -> what its type must be: dialect: {code: "float" | "int" | "dense"}
_TYPED_ATTRIBUTES = {b"vhlo": {8: "float", 9: "int", 15: "dense"},
                     b"builtin": {9: "float", 8: "int", 18: "dense"}}


def _signed(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def _type_kind(data: bytes, num_attrs: int, entries: list, dialects: list, index: int,
               depth: int = 0):
    """What type entry `index` (counted after the attributes) is, from its encoding."""
    index += num_attrs
    if not num_attrs <= index < len(entries) or depth > 4:
        return None
    dialect, pos, end, custom = entries[index]
    name = dialects[dialect] if dialect < len(dialects) else b""
    if not custom or pos >= end or name not in (b"vhlo", b"builtin"):
        return None
    code, pos = _varint(data, pos)
    vhlo = name == b"vhlo"
    floats = _VHLO_FLOATS if vhlo else _BUILTIN_FLOATS
    if code in floats:
        return ("float", floats[code])
    if vhlo and code in _VHLO_INTS:
        return ("int", _VHLO_INTS[code])
    if not vhlo and code == 0:
        return ("int", _varint(data, pos)[0] >> 2) if pos < end else None
    if code == (9 if vhlo else 1):
        return ("index",)

    def element(at: int):
        if at >= end:
            return None
        return _type_kind(data, num_attrs, entries, dialects, _varint(data, at)[0], depth + 1)
    if code == (1 if vhlo else 9):
        return ("complex", element(pos))
    if code in ((20, 21) if vhlo else (13, 14)):  # a ranked tensor (with an encoding)
        if code in (21, 14) and pos < end:
            pos = _varint(data, pos)[1]
        if pos >= end:
            return None
        rank, pos = _varint(data, pos)
        if rank > end - pos:
            return None
        shape = []
        for _ in range(rank):
            dim, pos = _varint(data, pos)
            shape.append(_signed(dim))
            if pos >= end:
                return None
        return ("tensor", tuple(shape), element(pos))
    return None


def _element_bytes(kind) -> Optional[int]:
    """The bytes one element of `kind` takes in a dense constant's data, where that is sure
    (MLIR rounds widths up to bytes, but packs i1 and sizes TF32 and others its own way)."""
    if kind is None:
        return None
    if kind[0] in ("float", "int") and kind[1] in (8, 16, 32, 64):
        return kind[1] // 8
    if kind[0] == "int" and kind[1] in (2, 4):
        return 1
    if kind[0] == "complex":
        inner = _element_bytes(kind[1])
        return None if inner is None else 2 * inner
    return None


def _mistyped_attribute(data: bytes, num_attrs: int, entries: list,
                        dialects: list) -> Optional[str]:
    """The first attribute entry whose type is not what its kind needs (a float attribute of
    a type that is no float, an integer attribute of one that is no integer, a dense tensor
    constant of a scalar type or whose data is neither its type's size nor one element's): in
    words; else None."""
    tables = {i: _TYPED_ATTRIBUTES[name] for i, name in enumerate(dialects)
              if name in _TYPED_ATTRIBUTES}
    if not tables:
        return None
    for i in range(num_attrs):
        dialect, pos, end, custom = entries[i]
        table = tables.get(dialect)
        if table is None or not custom or pos >= end:
            continue
        code, pos = _varint(data, pos)
        need = table.get(code)
        if need is None or pos >= end:
            continue
        reference, pos = _varint(data, pos)
        kind = _type_kind(data, num_attrs, entries, dialects, reference)
        if kind is None:
            continue
        what = f"attribute #{i} ({dialects[dialect].decode()} code {code})"
        if need == "float" and kind[0] != "float":
            return f"{what} is a float attribute of a {kind[0]} type"
        if need == "int" and kind[0] not in ("int", "index"):
            return f"{what} is an integer attribute of a {kind[0]} type"
        if need == "dense" and kind[0] != "tensor":  # (a scalar type: nothing to hold data)
            return f"{what} is a dense constant of {kind[0]} type, not a tensor"
        if need == "dense" and pos < end:
            size, pos = _varint(data, pos)
            width = _element_bytes(kind[2])
            if width is None or any(d < 0 for d in kind[1]):
                continue
            count = 1
            for d in kind[1]:
                count *= d
            if size not in (count * width, width):
                return (f"{what}: a dense constant of {count} element(s) of {width} byte(s) "
                        f"holds {size} bytes of data")
    return None

_HIGH_ESCAPE = re.compile(rb"\\[89a-fA-F][0-9a-fA-F]")
_TOKENS = re.compile(rb'//[^\n]*|"(?:[^"\\\n]|\\.)*"')
_ESCAPE = re.compile(rb"\\([0-9a-fA-F]{2}|.)", re.S)
_SIMPLE_ESCAPES = {b"n": b"\n", b"t": b"\t", b'"': b'"', b"\\": b"\\"}


def _unescaped(literal: bytes) -> bytes:
    def one(m):
        code = m.group(1)
        return bytes([int(code, 16)]) if len(code) == 2 else _SIMPLE_ESCAPES.get(code, code)
    return _ESCAPE.sub(one, literal[1:-1])


def _bad_string_literal(text: bytes) -> Optional[str]:
    """The first string literal whose escapes write bytes that are not UTF-8, or None."""
    if not _HIGH_ESCAPE.search(text):
        return None
    for m in _TOKENS.finditer(text):
        token = m.group()
        if token.startswith(b'"') and _HIGH_ESCAPE.search(token):
            try:
                _unescaped(token).decode("utf-8")
            except UnicodeDecodeError:
                line = text.count(b"\n", 0, m.start()) + 1
                return f"line {line}: {token[:60].decode('ascii', 'backslashreplace')}"
    return None


def check_text(text: str) -> Verdict:
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError as e:
        return Verdict(False, error=f"the text is not encodable as UTF-8 ({e.reason} at "
                                    f"character {e.start})")
    bad = _bad_string_literal(raw)
    if bad:
        return Verdict(False, why=f"a string literal's escapes write bytes that are not UTF-8 "
                                  f"({bad})")
    huge = _huge_convolution_dimension(raw)
    if huge:
        return Verdict(False, error=huge)
    return SAFE


# StableHLO's parser of convolution dimension numbers (`dim_numbers = [b, 0, 1, f]x[0, 1, i,
# o]->[b, 0, 1, f]`, and `#stablehlo.conv<...>`) sizes a table by the largest spatial dimension
# it reads before checking it against anything: `[2147483647, 1, i, o]` (a mutant of a real
# module, found by `shlo2jax mutate`) takes 17 GB and 30 s to be refused. No tensor has 65,536
# dimensions.
_CONV_DIMENSIONS = re.compile(rb"\[([^\]\n]*)\]x\[([^\]\n]*)\]->\[([^\]\n]*)\]")
_MAX_DIMENSION = 1 << 16


def _huge_convolution_dimension(raw: bytes) -> Optional[str]:
    if b"]x[" not in raw:
        return None
    for match in _CONV_DIMENSIONS.finditer(raw):
        for number in re.findall(rb"\d+", b",".join(match.groups())):
            if int(number) >= _MAX_DIMENSION:
                line = raw.count(b"\n", 0, match.start()) + 1
                return (f"line {line}: convolution dimension numbers name dimension "
                        f"{int(number)} (a tensor has fewer than {_MAX_DIMENSION:,})")
    return None


# ------------------------------------------------------------------------- the IR section
# MLIR's reader checks most of what the IR section says (name, attribute, type, value and
# block indices are looked up with a range check, a value defined twice is an error), but
# not all of it, and what it does not check crashes the process:
# * the top-level block is read before any value scope exists: a top-level block that
#   declares arguments makes `defineValues` index an empty vector (SIGSEGV; a 10-byte
#   deletion in an attribute section shifts the IR section onto its first nested region,
#   whose first byte says "one block": found by `shlo2jax mutate`);
# * every count (blocks, values, block arguments, results, operands, successors, regions,
#   use-list entries) sizes an allocation before the entries are read: a corrupt count of
#   2^40 aborts ("out of memory") where the bytes would have run out;
# * an index-pair use-list order (bytecode version >= 3) writes to `shuffle[src]` with `src`
#   unchecked against the value's uses.
# So the IR section is walked the way the reader walks it (op encoding of
# mlir/lib/Bytecode/Reader/BytecodeReader.cpp): every count must fit the bytes left in its
# section (each entry takes at least one byte), the top-level block has no arguments, and an
# index-pair use-list order (none of the 120 modules under tests/ and ../shared has one)
# makes the check inconclusive. What the reader checks itself (the indices, value ranges) is
# not checked again: ~0.5 us of CPU per op.
_HAS_ATTRS, _HAS_RESULTS, _HAS_OPERANDS, _HAS_SUCCESSORS = 0x01, 0x02, 0x04, 0x08
_HAS_REGIONS, _HAS_USE_LIST_ORDERS, _HAS_PROPERTIES = 0x10, 0x20, 0x40
_LAZY_LOADING, _USE_LIST_ORDERING, _ELIDED_ARG_LOCATIONS = 2, 3, 4  # bytecode versions
# The newest version whose op encoding the walk knows (MLIR's kVersion = 6: jaxlib 0.10.2
# refuses 7 as "newer than the current version 6"). A newer one may encode ops differently:
# the walk could refuse it falsely, so it is parsed in a child first (slower, never wrong)
# until the walk learns it.
_NEWEST_WALKED = 6
_MAX_DEPTH = 256  # regions nested deeper than real models nest them: the child decides


class _Inconclusive(Exception):
    pass


# A prefix varint's length in bytes, by its first byte: one more than its trailing zeros (a
# zero byte: 8 more bytes follow). Skipping a varint is one lookup.
_VARINT_LENGTH = tuple(9 if b == 0 else (b & -b).bit_length() for b in range(256))


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """(value, next position) of the prefix varint at `pos` (its multi-byte cases)."""
    first = data[pos]
    if first & 1:
        return first >> 1, pos + 1
    if first == 0:
        return int.from_bytes(data[pos + 1:pos + 9], "little"), pos + 9
    n = (first & -first).bit_length()  # the varint's length in bytes
    return int.from_bytes(data[pos:pos + n], "little") >> n, pos + n


def _count(data: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    n = data[pos]
    if n & 1:  # (one byte: most counts)
        n, pos = n >> 1, pos + 1
    else:
        n, pos = _varint(data, pos)
    if n > end - pos:
        raise _Framing(f"the IR section claims {n} {what} where {max(end - pos, 0)} bytes remain")
    return n, pos


def _skip_varints(data: bytes, pos: int, n: int) -> int:
    length = _VARINT_LENGTH
    for _ in range(n):
        pos += length[data[pos]]
    return pos


def _use_list_orders(data: bytes, pos: int, end: int, num_values: int) -> int:
    entries = 1
    if num_values > 1:
        entries, pos = _count(data, pos, end, "use-list orders")
    for _ in range(entries):
        if num_values > 1:
            pos = _skip_varints(data, pos, 1)  # the result's index (an unknown one is ignored)
        flagged, pos = _varint(data, pos)
        if flagged & 1:
            raise _Inconclusive("an index-pair use-list order (its indices are not range "
                                "checked by the reader)")
        n = flagged >> 1
        if n > end - pos:
            raise _Framing(f"a use-list order claims {n} entries where {end - pos} bytes remain")
        pos = _skip_varints(data, pos, n)
    return pos


def _ops(data: bytes, pos: int, end: int, version: int, num_ops: int, depth: int,
         found: Optional[set] = None) -> int:
    """Walks `num_ops` ops from `pos` (their regions too); -> the position after them. (Hot:
    varints are skipped by one table lookup, the table is a local, the counts are unrolled.)
    `found`: filled with each op's (name index, attribute dictionary index or None)."""
    length = _VARINT_LENGTH
    for _ in range(num_ops):
        # name (its registered flag in its low bit), mask, location
        name = pos
        pos += length[data[pos]]
        mask = data[pos]
        pos += 1 + length[data[pos + 1]]
        if found is not None:
            found.add((_varint(data, name)[0],
                       _varint(data, pos)[0] if mask & _HAS_ATTRS else None))
        if mask & _HAS_ATTRS:
            pos += length[data[pos]]
        if mask & _HAS_PROPERTIES:  # an index (into the properties section or the attributes)
            pos += length[data[pos]]
        # results, operands, successors: each a count, then as many varints (types, value
        # ids, block ids). A one-byte count (< 64, most of them) sizes nothing harmful and
        # is read inline; longer ones must fit the bytes left.
        num_results = 0
        if mask & _HAS_RESULTS:
            num_results = data[pos]
            if num_results & 1:
                num_results, pos = num_results >> 1, pos + 1
            else:
                num_results, pos = _count(data, pos, end, "results")
            for _ in range(num_results):
                pos += length[data[pos]]
        if mask & _HAS_OPERANDS:
            n = data[pos]
            if n & 1:
                n, pos = n >> 1, pos + 1
            else:
                n, pos = _count(data, pos, end, "operands")
            for _ in range(n):
                pos += length[data[pos]]
        if mask & _HAS_SUCCESSORS:
            n, pos = _count(data, pos, end, "successors")
            for _ in range(n):
                pos += length[data[pos]]
        if mask & (_HAS_USE_LIST_ORDERS | _HAS_REGIONS):
            pos = _op_tail(data, pos, end, version, mask, num_results, depth, found)
        if pos > end:
            raise _Framing("an op runs past the end of its IR section")
    return pos


def _op_tail(data: bytes, pos: int, end: int, version: int, mask: int, num_results: int,
             depth: int, found: Optional[set] = None) -> int:
    """An op's use-list orders and regions (where its mask says it has them)."""
    if version >= _USE_LIST_ORDERING and mask & _HAS_USE_LIST_ORDERS:
        pos = _use_list_orders(data, pos, end, num_results)
    if not mask & _HAS_REGIONS:
        return pos
    flagged, pos = _varint(data, pos)
    num_regions, isolated = flagged >> 1, flagged & 1
    if not num_regions:
        return pos
    if depth >= _MAX_DEPTH:
        raise _Inconclusive(f"regions nest deeper than {_MAX_DEPTH}")
    if isolated and version >= _LAZY_LOADING:  # its regions are a nested section
        r = _Reader(data, pos, end)
        head, length = r.byte(), r.varint()
        if head & 0x7F != _IR:
            raise _Framing("an isolated region is not an IR section")
        if head & 0x80:
            raise _Inconclusive("an aligned nested IR section")
        if length > end - r.pos:
            raise _Framing("a nested IR section runs past its parent")
        region_pos, region_end, after = r.pos, r.pos + length, r.pos + length
    else:  # the op's regions follow it in its own section: the op ends after them
        region_pos, region_end, after = pos, end, None
    if num_regions > region_end - region_pos:
        raise _Framing(f"an op claims {num_regions} regions where "
                       f"{region_end - region_pos} bytes remain")
    for _ in range(num_regions):
        region_pos = _region(data, region_pos, region_end, version, depth + 1, found)
    return region_pos if after is None else after


def _region(data: bytes, pos: int, end: int, version: int, depth: int,
            found: Optional[set] = None) -> int:
    num_blocks, pos = _count(data, pos, end, "blocks")
    if not num_blocks:
        return pos
    _, pos = _count(data, pos, end, "values")  # (values of the region, sized before read)
    for _ in range(num_blocks):
        flagged, pos = _varint(data, pos)
        if flagged & 1:  # arguments
            num_args, pos = _count(data, pos, end, "block arguments")
            for _ in range(num_args):
                if version >= _ELIDED_ARG_LOCATIONS:  # a type, its low bit: a location follows
                    flagged_type, pos = _varint(data, pos)
                    if flagged_type & 1:
                        pos = _skip_varints(data, pos, 1)
                else:  # a type and a location
                    pos = _skip_varints(data, pos, 2)
            if version >= _USE_LIST_ORDERING:
                has_orders = data[pos]
                pos += 1
                if has_orders:
                    pos = _use_list_orders(data, pos, end, num_args)
        pos = _ops(data, pos, end, version, flagged >> 1, depth, found)
    return pos


def _check_ir(data: bytes, version: int, start: int, end: int) -> None:
    """Raises _Framing where the IR section would crash MLIR's reader (or where the reader
    would fail anyway), _Inconclusive where the walk cannot tell."""
    if version > _NEWEST_WALKED:
        raise _Inconclusive(f"bytecode version {version} is newer than the walk knows")
    try:
        flagged, pos = _varint(data, start)
        if flagged & 1:
            raise _Framing("the top-level block declares arguments (MLIR's reader defines them "
                           "before any value scope exists)")
        _ops(data, pos, end, version, flagged >> 1, 0)
    except IndexError:  # (the file ended inside a varint: the reader fails there too)
        raise _Framing("the IR section runs past the end of the file") from None


def check_bytecode(data: bytes) -> Verdict:
    try:
        version, producer, sections = _sections(data)
        strings = _strings(data, *sections[_STRING])
        num_attrs, entries = _attr_type_entries(data, sections)
        asm = _asm_entries(data, entries)
        dialects = _dialect_names(data, version, *sections[_DIALECT], strings)
        problem = (_reference_cycle(data, num_attrs, entries, dialects)
                   or _mistyped_attribute(data, num_attrs, entries, dialects))
        if problem:
            raise _Framing(problem)
        _check_ir(data, version, *sections[_IR])
    except _Framing as e:
        return Verdict(False, error=f"corrupt MLIR bytecode: {e}")
    except _Inconclusive as e:
        return Verdict(False, why=f"the IR section cannot be vouched for: {e}")
    for i, s in enumerate([producer] + strings):
        try:
            s.decode("utf-8")
        except UnicodeDecodeError:
            what = "the producer string" if i == 0 else f"shared string #{i - 1}"
            return Verdict(False, why=f"{what} is not UTF-8 ({s[:40]!r})")
    for text in asm:
        try:
            text.decode("utf-8")
        except UnicodeDecodeError:
            return Verdict(False, why=f"an attribute or type entry is not UTF-8 ({text[:40]!r})")
        bad = _bad_string_literal(text)
        if bad:
            return Verdict(False, why=f"an attribute or type entry writes bytes that are not "
                                      f"UTF-8 ({bad})")
    return Verdict(True, dialects=tuple(dialects))


# What parsing accepts but jaxlib aborts on when the decoder reads it, seen in the module's
# printed form (printed without debug info, large constants elided: ~10 ms on a
# 9M-parameter model):
# * a location in an attribute's place (`value = #loc3`; a location is an attribute to
#   MLIR, corrupt bytecode can put one anywhere). Handing it to Python as an attribute
#   (`named.attr`, iterating an ArrayAttr) throws inside nanobind's cast, and the
#   VHLO-to-StableHLO conversion of some ops dereferences it as the attribute it expects
#   (SIGSEGV). Without debug info, no location prints except one used as a value: a
#   `loc(...)` or a `#loc` alias outside string literals.
# * an attribute or symbol name that is not UTF-8 (`{"\FF" = ...}`): reading
#   `NamedAttribute.name` throws where nanobind cannot pass it on. String values may be
#   binary (a kernel's config); names may not.
_LOCATION_AS_VALUE = re.compile(r'"(?:[^"\\\n]|\\.)*"|#loc\d*\b|\bloc\(')
_NAME_LITERAL = re.compile(rb'(@?)("(?:[^"\\\n]|\\.)*")([ \t]*=)?')


def printed_problem(module, vhlo_kinds: Optional[dict] = None, to_file: bool = False,
                    read_first: bool = True) -> tuple:
    """(what in `module`, an `ir.Module`, would abort the process when it is decoded, or
    None: a location in an attribute's place, a name that is not UTF-8; whether any string
    in it holds bytes outside ASCII; for a VHLO module, given the kinds its attributes may
    have (`shlo2jax.sources.vhlo_kinds.KINDS`), why its conversion to StableHLO cannot be
    vouched for in this process, or None). A VHLO module's names print as string values, so
    the second answer says whether its StableHLO conversion needs the name check again.

    A VHLO module is printed in the generic form: it shows every op's attributes as
    attributes (`vhlo.func_v1`'s own printer shows its name and type as a signature, and
    casts them blindly to print them). `to_file`: the module's strings are all UTF-8 (the
    bytecode check said so): a VHLO module is read from its bytecode (`vhlo_bytecode_paths`;
    with `read_first`: see `Verdict.readable_dialects_only`), printed only where that
    reading does not vouch for it, and then through a file (`_vhlo_printed`)."""
    if vhlo_kinds is not None and to_file and read_first:
        read = _vhlo_bytecode_read(module)
        if read is not None and _unknown_kind(read[0], vhlo_kinds) is None:
            return None, read[1], None
    asm = _vhlo_printed(module) if vhlo_kinds is not None and to_file else None
    if asm is None:
        asm = module.operation.get_asm(binary=True, large_elements_limit=16,
                                       enable_debug_info=False,
                                       print_generic_op_form=vhlo_kinds is not None)
    escaped = _HIGH_ESCAPE.search(asm) is not None
    problem = _printed_problem(asm, escaped)
    if vhlo_kinds is None or problem:
        return problem, escaped, None
    return None, escaped, vhlo_kinds_problem(asm, vhlo_kinds)


# MLIR hands a printed module to Python in pieces of a few bytes, each through a Python call
# (its callback stream is unbuffered): 2.7 million calls for the 11 MB generic form of a 50k-op
# VHLO artifact, two thirds of the print's 0.2 s of CPU. A pass manager's IR printing writes
# to files through MLIR's buffered stream instead. So a VHLO module is printed by a pass
# manager that runs `symbol-privatize` on it with IR printing before each pass into a
# temporary folder: the same flags print the same text, and on a module whose top-level ops
# are all vhlo ops (none of them a symbol) symbol-privatize changes nothing. It reads the
# module's top-level ops only (symbol-dce, used before, walked every op's attributes for
# symbol uses: 0.012 s on a 50k-op artifact). Where anything is unlike that (another op at the
# top, a module name that is not a plain file name, a jaxlib without the printing options, a
# failed run), the module is printed as before.
_PLAIN_NAME = re.compile(r"[\w$-][\w.$-]*")


def readable_dialects_only(data: bytes) -> bool:
    """`Verdict.readable_dialects_only` of a bytecode file that the check finds safe (False for
    any other)."""
    return check_bytecode(data).readable_dialects_only


def _vhlo_bytecode_read(module) -> Optional[tuple]:
    """`vhlo_bytecode_paths` of a module of vhlo ops, or None."""
    if not all(op.operation.name.startswith("vhlo.") for op in module.body.operations):
        return None
    written = io.BytesIO()
    try:
        module.operation.write_bytecode(written, desired_version=_NATIVE_PROPERTIES - 1)
    except Exception:  # noqa: BLE001 - a jaxlib that cannot: printed as before
        return None
    return vhlo_bytecode_paths(written.getvalue())


def _vhlo_printed(module) -> Optional[bytes]:
    """The generic printed form of a VHLO `module` (large elements elided, no debug info),
    printed through a file (see above), or None."""
    import tempfile
    from jaxlib.mlir import ir
    from jaxlib.mlir.passmanager import PassManager
    operation = module.operation
    if not all(op.operation.name.startswith("vhlo.") for op in module.body.operations):
        return None
    attributes = operation.attributes
    if "sym_name" in attributes:  # (the folder the printer writes to is named after it)
        name = attributes["sym_name"]
        if not isinstance(name, ir.StringAttr) or not _PLAIN_NAME.fullmatch(name.value):
            return None
    try:
        with tempfile.TemporaryDirectory(prefix="shlo2jax-print-") as folder, module.context:
            manager = PassManager.parse("builtin.module(symbol-privatize)")
            manager.enable_verifier(False)
            manager.enable_ir_printing(print_before_all=True, print_after_all=False,
                                       print_module_scope=False, large_elements_limit=16,
                                       enable_debug_info=False, print_generic_op_form=True,
                                       tree_printing_dir_path=folder)
            manager.run(operation)
            printed = [os.path.join(at, f) for at, _, files in os.walk(folder) for f in files]
            if len(printed) != 1:
                return None
            with open(printed[0], "rb") as f:
                text = f.read()
    except Exception:  # noqa: BLE001 - printed as before
        return None
    header = text.find(b"\n")  # `// -----// IR Dump Before SymbolPrivatizePass ... //----- //`
    if not text.startswith(b"// -----// IR Dump Before") or header < 0:
        return None
    return text[header + 1:].rstrip(b"\n") + b"\n"  # (as get_asm ends it)


def _printed_problem(asm: bytes, escaped: bool) -> Optional[str]:
    if escaped:
        for m in _NAME_LITERAL.finditer(asm):
            if (m.group(1) or m.group(3)) and _HIGH_ESCAPE.search(m.group(2)):
                try:
                    _unescaped(m.group(2)).decode("utf-8")
                except UnicodeDecodeError:
                    what = "symbol" if m.group(1) else "attribute"
                    return (f"an {what} name is not UTF-8: "
                            f"{m.group(2)[:60].decode('ascii', 'backslashreplace')}")
    if b"loc" not in asm:  # (a C-speed search; the scan below is ~3 us per op)
        return None
    text = asm.decode("utf-8", "replace")
    for m in _LOCATION_AS_VALUE.finditer(text):
        if not m.group().startswith('"'):
            start = text.rfind("\n", 0, m.start()) + 1
            end = text.find("\n", m.end())
            line = text[start:end if end >= 0 else len(text)].strip()
            if line.startswith("#loc"):  # an alias's definition: find its use instead
                continue
            return f"a location stands where an attribute value belongs: {line[:200]}"
    return None


# The child imports jaxlib's MLIR bindings only (0.4 s, not jax's 1.3 s), builds its context
# as jax's `make_ir_context` and shlo2jax's `compat.make_ir_context` do (the same
# dialects, unregistered ones allowed, `quant` loaded), and reads the input on the same path
# as `shlo2jax.loader.parse_mlir_unchecked`: a VHLO artifact first (that path has no Python
# diagnostic handler), then `ir.Module.parse`. Exit status 0: parsed; 3: a Python exception,
# its message on stdout; 4: a VHLO module that parses but does not convert to StableHLO (the
# conversion's exception on stdout, its diagnostics on stderr: jaxlib 0.12 verifies a
# converted `stablehlo.constant` whose `value` is no tensor, where older ones crash);
# anything else: the parser killed it.
_CHILD = compat.CHILD_DIALECTS_SOURCE + """
import sys

class Context(ir.Context):
    def __init__(self):  # (skips ir.Context.__init__, which loads every linked dialect)
        super(ir.Context, self).__init__()

registry = ir.DialectRegistry()
register_jax_dialects(registry)
context = Context()
context.append_dialect_registry(registry)
context.load_all_available_dialects()
sdy.register_dialect(context)
if mpmd is not None:
    mpmd.register_dialect(context)
mhlo.register_mhlo_dialect(context)
chlo.register_dialect(context)
stablehlo.register_dialect(context)
context.allow_unregistered_dialects = True
with context:
    stablehlo.deserialize_portable_artifact(context, bytes(stablehlo.serialize_portable_artifact_str(
        sys.argv[2], stablehlo.get_minimum_version())))
data = sys.stdin.buffer.read()
try:
    with context:
        if sys.argv[1] == "bytes":
            try:
                stablehlo.deserialize_portable_artifact(context, data)
            except Exception as vhlo_error:
                module = ir.Module.parse(data)
                if any(op.operation.name.startswith("vhlo.")
                       for op in module.body.operations):
                    sys.stdout.write(str(vhlo_error))
                    sys.exit(4)
        else:
            ir.Module.parse(data.decode("utf-8"))
except Exception as e:
    sys.stdout.write(str(e))
    sys.exit(3)
"""


class ChildParse(NamedTuple):
    ok: bool
    message: str = ""


def parse_in_child(source, source_name: str = "", timeout: float = 600.0) -> ChildParse:
    """Parses `source` (text or bytes) in a child process: did jaxlib read it, and if not,
    what did it say (an exception's message, or how the process died)?"""
    kind = "bytes" if isinstance(source, bytes) else "text"
    data = source if isinstance(source, bytes) else source.encode("utf-8")
    try:
        proc = subprocess.run([sys.executable, "-c", _CHILD, kind, QUANT_WARMUP], input=data,
                              capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return ChildParse(False, f"parsing ran past {timeout:.0f} s in a child process")
    if proc.returncode == 0:
        return ChildParse(True)
    out = proc.stdout.decode("utf-8", "backslashreplace").strip()
    if proc.returncode == 3:
        return ChildParse(False, out)
    err = proc.stderr.decode("utf-8", "backslashreplace").strip().splitlines()
    if proc.returncode == 4:
        errors = [line.strip() for line in err if "error:" in line]
        return ChildParse(False, "the VHLO artifact does not convert to StableHLO: "
                          + out + (f": {' | '.join(errors[-3:])}" if errors else ""))
    tail = " | ".join(line.strip() for line in err[-3:] if line.strip())
    how = how_child_ended(proc.returncode)
    return ChildParse(False, f"jaxlib's MLIR parser aborts on this input ({how})"
                             + (f": {tail}" if tail else ""))


def how_child_ended(returncode: int) -> str:
    """A failed child's exit status in words: the signal that killed it, or the status."""
    if returncode >= 0:
        return f"exit status {returncode}"
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


# --------------------------------------------------------------------- VHLO attribute kinds
# The VHLO -> StableHLO conversion converts each attribute of a vhlo op by its kind and hands
# the result to the StableHLO op's builder, which casts each inherent attribute to the kind
# the op declares without checking (a release build's `llvm::cast`): a corrupt artifact whose
# `vhlo.constant_v1` holds a string where its `#vhlo.tensor_v1` belongs ends in SIGSEGV. The
# bytecode reader accepts any attribute there (VHLO declares them as "any attribute"). So
# before the conversion runs in this process, every attribute of every vhlo op is read as the
# kinds it is made of, from the module's bytecode (`vhlo_bytecode_paths`) or, where that
# reading does not know what it finds, its generic printed form (`vhlo_attribute_paths`), and
# each must be one that real artifacts hold for that op and attribute (the table in
# `shlo2jax.sources.vhlo_kinds`, learned from StableHLO's release artifacts and the test
# corpus). What is not in the table is not an error, only a reason to convert in a child
# process first.

_ATTR_TOKEN = re.compile(rb'"(?:[^"\\\n]|\\.)*"|->|#vhlo<\w+|[#!]?[\w.$+-]+|\S')
_OPEN, _CLOSE = frozenset((b"<", b"[", b"{", b"(")), frozenset((b">", b"]", b"}", b")"))
_SCALAR_KINDS = (b"tensor_v1", b"integer_v1", b"float_v1")
_DIMS = re.compile(rb"^(?:[\d?]+x)*")
# An op's line in the generic form: `"name"(operands) <{properties}> {attributes} : types`,
# with `({` ending it where the op has regions; after its last region, `}) {attributes} : ...`.
_GENERIC_LINE = re.compile(rb'^[ \t]*(?:%[^"\n]*= )?"([\w.$]+)"\([^)\n]*\)(.*)$'
                           rb'|^[ \t]*\}\)(.*)$', re.M)
_QUOTED = rb'"(?:[^"\\\n]+|\\.)*"'
_PROPS_AND_ATTRS = re.compile(  # (greedy runs, no backtracking: ~1 ms per 100 kB)
    rb'(?: <\{((?:[^"\n}]+|' + _QUOTED + rb'|\}(?!>(?: [:({]|$)))*)\}>(?= [:({]|$))?'
    rb'(?: \{((?:[^"\n}]+|' + _QUOTED + rb'|\}(?! :|$))*)\}(?= :|$))?')


def _skip(toks: list, i: int) -> int:
    """The index after the bracketed group opening at toks[i]."""
    depth = 0
    while i < len(toks):
        t = toks[i]
        if t in _OPEN or t.startswith(b"#vhlo<"):  # (an enum's `>` closes it)
            depth += 1
        elif t in _CLOSE:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise _Framing("unbalanced brackets")


def _value(toks: list, i: int, prefix: bytes, out: set) -> int:
    """Adds the kind paths of the attribute value starting at toks[i] to `out`; -> the
    index after it."""
    t = toks[i]
    if t.startswith(b"#vhlo<"):  # an enum: `#vhlo<comparison_direction_v1 EQ>`
        if toks[i + 2] != b">":
            raise _Framing(f"an enum's value is not one word ({t[:40]!r})")
        out.add(prefix + t[6:])
        return i + 3
    if not t.startswith(b"#vhlo.") or i + 1 >= len(toks) or toks[i + 1] != b"<":
        # not a VHLO attribute (a builtin string, a location, ...): never in the table
        out.add(prefix + b"?" + t[:40])
        depth = 0
        while i < len(toks):
            t = toks[i]
            if t in _OPEN or t.startswith(b"#vhlo<"):
                depth += 1
            elif t in _CLOSE or t in (b",", b"="):
                if depth == 0:
                    return i
                if t in _CLOSE:
                    depth -= 1
            i += 1
        return i
    kind = t[6:]
    end = _skip(toks, i + 1)  # toks[i + 1] is `<`, toks[end - 1] its `>`
    if kind in _SCALAR_KINDS:  # the element type: `#vhlo.tensor_v1<dense<1> : tensor<2xi64>>`
        inner = toks[i + 2:end - 1]
        colon = len(inner) - 1 - inner[::-1].index(b":") if b":" in inner else -1
        scalar = b"".join(inner[colon + 1:])
        if scalar.startswith(b"tensor<") and scalar.endswith(b">"):
            scalar = scalar[7:-1]
        kind += b"<" + _DIMS.sub(b"", scalar, 1) + b">"
    elif kind == b"type_v1":  # the type's kind: `#vhlo.type_v1<!vhlo.func_v1<...>>`
        kind += b"<" + toks[i + 2][:40] + b">"
    out.add(prefix + kind)
    nested = prefix + kind + b"/"
    if kind == b"array_v1" and toks[i + 2] == b"[":
        j = i + 3
        while toks[j] != b"]":
            j = _value(toks, j, nested, out)
            if toks[j] == b",":
                j += 1
            elif toks[j] != b"]":
                raise _Framing("an array element is not followed by `,` or `]`")
    elif kind == b"dict_v1" and toks[i + 2] == b"{":
        j = i + 3
        while toks[j] != b"}":
            j = _value(toks, j, nested + b"key:", out)
            if toks[j] != b"=":
                raise _Framing("a dictionary key is not followed by `=`")
            j = _value(toks, j + 1, nested, out)
            if toks[j] == b",":
                j += 1
            elif toks[j] != b"}":
                raise _Framing("a dictionary entry is not followed by `,` or `}`")
    elif kind not in _SCALAR_KINDS:  # the attributes inside (a result accuracy's mode)
        for j in range(i + 2, end - 1):
            if toks[j].startswith(b"#"):
                _value(toks, j, nested, out)
    return end


def _entries(body: bytes) -> list:
    """[(name, {kind path})] of an attribute dictionary's body (`a = #vhlo..., b = ...`)."""
    toks = _ATTR_TOKEN.findall(body)
    toks.append(b",")  # (a sentinel: the loop below ends on it)
    entries, i = [], 0
    while i < len(toks) - 1:
        name = toks[i]
        if toks[i + 1] != b"=":
            raise _Framing(f"an attribute name is not followed by `=` ({name[:40]!r})")
        paths: set = set()
        i = _value(toks, i + 2, b"", paths)
        if toks[i] != b",":
            raise _Framing(f"attribute {name[:40]!r} is not followed by `,`")
        entries.append((name, paths))
        i += 1
    return entries


def vhlo_attribute_paths(asm: bytes):
    """Yields (op name, attribute name, {kind path}) for the attributes of the vhlo ops in a
    module's generic printed form (`get_asm(print_generic_op_form=True)`), once per distinct
    attribute dictionary of an op. A kind path names an attribute's kind and the kinds it
    holds: `array_v1`, `array_v1/integer_v1<i64>`, `dict_v1/key:string_v1`. Raises
    `_Framing` where the text cannot be read so."""
    lines: set = set()  # (op, what follows its operands): a few hundred distinct in 50k ops
    stack: list = []
    for op, rest, closing in _GENERIC_LINE.findall(asm):
        if not op:  # `}) {attributes} : ...` after an op's regions
            if not stack:
                raise _Framing("a region closes where none is open")
            op, rest = stack.pop(), closing
        elif rest.endswith(b"({"):
            stack.append(op)
        lines.add((op, rest))
    dicts: set = set()
    match = _PROPS_AND_ATTRS.match
    for op, rest in lines:
        if op.startswith(b"vhlo."):
            found = match(rest)
            if rest[found.end():found.end() + 3] not in (b"", b" : ", b" ({"):
                raise _Framing(f"{op[:60]!r}'s attributes end where they cannot")
            dicts.add((op,) + found.groups())
    for op, *bodies in sorted(dicts, key=lambda d: tuple(b or b"" for b in d)):  # (one order)
        for body in bodies:
            if body:
                for name, paths in _entries(body):
                    yield op, name, paths


def vhlo_kinds_problem(asm: bytes, table: dict) -> Optional[str]:
    """None where every attribute of every vhlo op in `asm` (a generic printed form) has kinds
    `table` ({op: {attribute: {kind path}}}) knows; else what it does not know."""
    try:
        return _unknown_kind(vhlo_attribute_paths(asm), table)
    except (_Framing, IndexError) as e:
        return f"the attributes of the VHLO ops cannot be read ({e or 'truncated'})"


def _unknown_kind(found, table: dict) -> Optional[str]:
    """What the first of `found` ((op, attribute name, {kind path}), bytes) that `table` does
    not know is, or None."""
    for op, name, paths in found:
        known = table.get(op.decode(), {}).get(name.decode("utf-8", "replace"))
        if known is None:
            return f"{op.decode()} has an attribute `{name[:60].decode('utf-8', 'replace')}` " \
                   f"that the known artifacts do not hold"
        unknown = sorted(p for p in paths if p.decode("utf-8", "replace") not in known)
        if unknown:
            kind = unknown[0][:80].decode("utf-8", "replace").replace("?", "non-VHLO ")
            return (f"{op.decode()}'s attribute `{name.decode('utf-8', 'replace')}` is "
                    f"`{kind}`, a kind the known artifacts do not hold there")
    return None


# The same kind paths, read from the module's bytecode instead of its printed form. A vhlo
# op keeps its attributes as properties, which bytecode version >= 5 writes without their
# names (in the order the op's definition lists them); written as version 4, each op's
# attributes are one dictionary of named attributes again: writing it costs ~0.03 s on a
# 50k-op module, where printing it costs ~0.15 s and scanning the print ~0.07 s. The kinds
# are read from the VHLO encodings (stablehlo/dialect/VhloBytecode.cpp), named as the printed
# form names them. Only the kinds below are read; anything else (another dialect's attribute,
# a location where a value belongs, a type that holds an attribute, a code not listed) makes
# the reading say None, and the printed form is read as before: it names what it found.
_NATIVE_PROPERTIES = 5  # the bytecode version from which ops write properties
_VHLO_LEAVES = {2: b"bool_v1", 3: b"comparison_direction_v1", 4: b"comparison_type_v1",
                5: b"api_version_v1", 7: b"fft_type_v1", 10: b"output_operand_alias_v1",
                11: b"precision_v1", 12: b"rng_algorithm_v1", 13: b"rng_distribution_v1",
                14: b"string_v1", 16: b"transpose_v1", 19: b"result_accuracy_mode_v1"}
_VHLO_ARRAY, _VHLO_DICT, _VHLO_FLOAT, _VHLO_INTEGER, _VHLO_TENSOR, _VHLO_TYPE = 1, 6, 8, 9, 15, 17
_VHLO_RESULT_ACCURACY = 20  # atol, rtol (APFloats), ulps, then its mode (an attribute)
# vhlo type code -> its name where a kind names it: as the printed form writes an integer's or
# a tensor's element type (builtin), a float's type and a type attribute's kind (vhlo); only
# those the table holds (a type named otherwise is read from the printed form)
_BUILTIN_TYPE_NAMES = {0: b"i1", 4: b"f32", 9: b"index", 13: b"i32", 14: b"i64", 16: b"ui8"}
_VHLO_NONE = 33  # (a dot_general_v2's unset accumulation type, `!vhlo.none_v1`)
_VHLO_TYPE_NAMES = {4: b"!vhlo.f32_v1", 8: b"!vhlo.func_v1", _VHLO_NONE: b"!vhlo.none_v1"}
_VHLO_RANKED_TENSOR = 20
# vhlo types that hold no attribute: scalars, and complex, function, ranked tensor (without
# an encoding), tuple and unranked tensor types of them
_ATTRIBUTE_FREE_TYPES = frozenset(_VHLO_FLOATS) | frozenset(_VHLO_INTS) | {
    1, 8, 9, 20, 22, 23, 25, _VHLO_NONE}
_BUILTIN_SCALARS = (2, 7, 8)  # string, unit, integer: the module's own attributes
_ATTRIBUTE_NAME = re.compile(rb"[A-Za-z_][\w$.]*")  # (as MLIR prints a name unquoted)
# sdy attributes that real artifacts hold on vhlo ops (a custom call's sharding rule, jax's
# LAPACK calls; a function argument's sharding), by their code in the sdy dialect's bytecode
# (shardy/dialect/sdy/ir/bytecode.td): a tensor sharding's three versions print alike
_BUILTIN_FLAT_SYMBOL_REF = 4
_SDY_KINDS = {_SDY_SHARDING_RULE: b"?#sdy.op_sharding_rule", 6: b"?#sdy.sharding",
              15: b"?#sdy.sharding", 17: b"?#sdy.sharding"}


class _BytecodeKinds:
    """Reads attribute entries of a bytecode file as kind paths (see above)."""

    def __init__(self, data: bytes, num_attrs: int, entries: list, dialects: list,
                 strings: list):
        self.data, self.num_attrs, self.entries = data, num_attrs, entries
        self.dialects, self.strings = dialects, strings

    def entry(self, index: int, attribute: bool = True) -> tuple:
        """(dialect name or None where stored as text, code, position after it, end) of an
        attribute (else type) entry."""
        if attribute and index >= self.num_attrs:
            raise _Framing("an attribute index past the attributes")
        number, pos, end, custom = self.entries[index if attribute else self.num_attrs + index]
        if not custom:
            return None, None, pos, end
        code, pos = _varint(self.data, pos)
        return self.dialects[number], code, pos, end

    def encoding(self, index: int, dialect: bytes, attribute: bool = True) -> tuple:
        """(code, position after it, end) of an attribute (else type) entry of `dialect`."""
        name, code, pos, end = self.entry(index, attribute)
        if name != dialect:
            raise _Inconclusive("not an encoding read here")
        return code, pos, end

    def dictionary(self, index: int) -> list:
        """[(name, value index)] of a builtin dictionary attribute."""
        code, pos, end = self.encoding(index, b"builtin")
        if code != 1:
            raise _Inconclusive("not a dictionary")
        count, pos = _varint(self.data, pos)
        items = []
        for _ in range(count):
            name, pos = _varint(self.data, pos)
            value, pos = _varint(self.data, pos)
            items.append((self.string(name), value))
        if pos != end:
            raise _Framing("a dictionary does not end where its entry does")
        return items

    def string(self, index: int) -> bytes:
        code, pos, _ = self.encoding(index, b"builtin")
        if code != 2:
            raise _Inconclusive("not a string")
        return self.strings[_varint(self.data, pos)[0]]

    def builtin_scalar(self, index: int) -> bool:
        """Whether attribute `index` is a builtin string, unit or integer (a bool)."""
        number = self.entries[index][0] if index < self.num_attrs else None
        if number is None or self.dialects[number] != b"builtin":
            return False
        return self.encoding(index, b"builtin")[0] in _BUILTIN_SCALARS

    def type_code(self, index: int) -> tuple:
        return self.encoding(index, b"vhlo", attribute=False)

    def kinds(self, index: int, prefix: bytes, out: set) -> None:
        """Adds the kind paths of attribute `index` to `out` (raises where it cannot)."""
        data = self.data
        if self.sdy_kind(index, prefix, out):
            return
        code, pos, end = self.encoding(index, b"vhlo")
        leaf = _VHLO_LEAVES.get(code)
        if leaf is not None:
            out.add(prefix + leaf)
            return
        if code in (_VHLO_ARRAY, _VHLO_DICT):
            kind = b"array_v1" if code == _VHLO_ARRAY else b"dict_v1"
            out.add(prefix + kind)
            count, pos = _varint(data, pos)
            for i in range(count if code == _VHLO_ARRAY else 2 * count):
                element, pos = _varint(data, pos)
                key = code == _VHLO_DICT and i % 2 == 0
                self.kinds(element, prefix + kind + (b"/key:" if key else b"/"), out)
        elif code in (_VHLO_FLOAT, _VHLO_INTEGER, _VHLO_TENSOR, _VHLO_TYPE):
            type_index, pos = _varint(data, pos)
            type_code, at, _ = self.type_code(type_index)
            if code == _VHLO_TENSOR:  # named by its element type
                if type_code != _VHLO_RANKED_TENSOR:
                    raise _Inconclusive("a tensor attribute of another type")
                rank, at = _varint(data, at)
                at = _skip_varints(data, at, rank)
                type_code = self.type_code(_varint(data, at)[0])[0]
            names = _VHLO_TYPE_NAMES if code in (_VHLO_FLOAT, _VHLO_TYPE) else _BUILTIN_TYPE_NAMES
            kind = {_VHLO_FLOAT: b"float_v1", _VHLO_INTEGER: b"integer_v1",
                    _VHLO_TENSOR: b"tensor_v1", _VHLO_TYPE: b"type_v1"}[code]
            out.add(prefix + kind + b"<" + names[type_code] + b">")
            return  # (a value's bytes follow; a type holds no attribute, see _plain_types)
        elif code == _VHLO_RESULT_ACCURACY:
            out.add(prefix + b"result_accuracy_v1")
            mode, pos = _varint(data, _skip_varints(data, pos, 3))
            self.kinds(mode, prefix + b"result_accuracy_v1/", out)
        else:
            raise _Inconclusive(f"vhlo attribute code {code}")
        if pos != end:
            raise _Framing("an attribute does not end where its entry does")

    def sdy_kind(self, index: int, prefix: bytes, out: set) -> bool:
        """Adds the kind path of attribute `index` where it is one of the sdy attributes the
        table holds, named as the printed form names a non-VHLO attribute (by its mnemonic;
        what it holds is not walked there either); -> whether it was one."""
        name, code, pos, _ = self.entry(index)
        if name != b"sdy":
            return False
        kind = _SDY_KINDS.get(code)
        if kind is None:
            raise _Inconclusive(f"sdy attribute code {code}")
        if code != _SDY_SHARDING_RULE:
            # A sharding's mesh is read as any attribute (the others' parts are read as the
            # kinds they must be, and MLIR's reader checks those): here it must be a symbol
            # reference or a mesh, as the printer expects
            if self.entry(_varint(self.data, pos)[0])[:2] not in (
                    (b"builtin", _BUILTIN_FLAT_SYMBOL_REF), (b"sdy", _SDY_MESH)):
                raise _Inconclusive("a sharding whose mesh is neither a symbol nor a mesh")
        out.add(prefix + kind)
        return True


def _plain_types(kinds: _BytecodeKinds) -> bool:
    """Whether every type entry is a vhlo type that holds no attribute or a builtin integer
    type (of the module's own attributes)."""
    for number, pos, end, custom in kinds.entries[kinds.num_attrs:]:
        dialect = kinds.dialects[number]
        code = _varint(kinds.data, pos)[0] if custom and pos < end else None
        if not (dialect == b"vhlo" and code in _ATTRIBUTE_FREE_TYPES
                or dialect == b"builtin" and code == 0):
            return False
    return True


def vhlo_bytecode_paths(data: bytes) -> Optional[tuple]:
    """([(op, attribute name, {kind path})] of every vhlo op's attributes, as
    `vhlo_attribute_paths` reads them from the printed form, once per distinct dictionary;
    whether any string holds bytes outside ASCII), read from `data`, a VHLO module's bytecode
    written as version 4 (see above); None where it holds what the reading does not know."""
    try:
        version, _, sections = _sections(data)
        if version >= _NATIVE_PROPERTIES:
            return None
        strings = _strings(data, *sections[_STRING])
        num_attrs, entries = _attr_type_entries(data, sections)
        op_names: list = []
        dialects = _dialect_names(data, version, *sections[_DIALECT], strings, op_names)
        kinds = _BytecodeKinds(data, num_attrs, entries, dialects, strings)
        if not _plain_types(kinds):
            return None
        start, end = sections[_IR]
        flagged, pos = _varint(data, start)
        ops: set = set()
        _ops(data, pos, end, version, flagged >> 1, 0, ops)
        found = []
        for name_index, attributes in ops:
            op = op_names[name_index]
            vhlo = op.startswith(b"vhlo.")
            if not vhlo and op != b"builtin.module":
                return None
            for name, value in kinds.dictionary(attributes) if attributes is not None else ():
                if not _ATTRIBUTE_NAME.fullmatch(name):
                    return None
                paths: set = set()
                if vhlo or not kinds.builtin_scalar(value):  # (the module's: these or VHLO)
                    kinds.kinds(value, b"", paths)
                if vhlo:
                    found.append((op, name, paths))
    except (_Framing, _Inconclusive, IndexError, KeyError, RecursionError):
        return None  # (RecursionError: arrays nested past Python's stack, read from the print)
    return found, any(max(s, default=0) >= 0x80 for s in strings)
