"""Protocol buffers' wire format, read field by field: what the SavedModel reader needs of
TensorFlow's messages (`sources.saved_model`, `sources.tensor_bundle`), without TensorFlow.

No package reads these messages without TensorFlow: the `protobuf` runtime has no schema for
them, and the generated modules TensorBoard ships (`tensorboard.compat.proto`) hold neither
`SavedModel` nor `BundleEntryProto` and bring a web server with them. The wire format itself is
small and documented (protobuf.dev/programming-guides/encoding): a message is a sequence of
(tag, value) where the tag's low 3 bits say how the value is stored. `Message` keeps each
field's raw values by number; the reader names the fields it reads (the schema lives there,
beside the `.proto` field numbers it cites). Anything truncated or malformed is a `LoadError`
naming what was being read: every step moves forward through a bounded buffer, so a corrupt
input can neither hang nor crash the reader.
"""

from __future__ import annotations

from shlo2jax.errors import LoadError

_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


def varint(data: bytes, pos: int, what: str) -> tuple:
    """(value, position after it) of the varint at `pos` (unsigned, at most 64 bits)."""
    value, shift = 0, 0
    while True:
        if pos >= len(data):
            raise LoadError(f"{what}: truncated (a varint runs past the end)")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise LoadError(f"{what}: corrupt (a varint longer than 10 bytes)")


def signed(value: int) -> int:
    """A varint read as int64 (protobuf stores negative int64 as 10-byte two's complement)."""
    return value - (1 << 64) if value >= 1 << 63 else value


class Message:
    """One serialized message, its fields by number (each a list of raw values: an int for
    varints and fixed-width fields, a memoryview of the enclosing buffer for length-delimited
    ones: nested messages are read in place, never copied). `what` names it in errors."""

    def __init__(self, data, what: str):
        self.what = what
        self.fields: dict = {}
        data = memoryview(data)
        pos = 0
        while pos < len(data):
            tag, pos = varint(data, pos, what)
            number, wire = tag >> 3, tag & 7
            if number == 0:
                raise LoadError(f"{what}: corrupt (field number 0)")
            if wire == _VARINT:
                value, pos = varint(data, pos, what)
            elif wire in (_FIXED64, _FIXED32):
                size = 8 if wire == _FIXED64 else 4
                if pos + size > len(data):
                    raise LoadError(f"{what}: truncated (field {number} runs past the end)")
                value = int.from_bytes(data[pos:pos + size], "little")
                pos += size
            elif wire == _BYTES:
                length, pos = varint(data, pos, what)
                if pos + length > len(data):
                    raise LoadError(f"{what}: truncated (field {number} holds {length} bytes, "
                                    f"{len(data) - pos} are left)")
                value = data[pos:pos + length]
                pos += length
            else:  # groups (3, 4) are proto2's deprecated form: no TensorFlow message uses them
                raise LoadError(f"{what}: corrupt (field {number} has wire type {wire})")
            self.fields.setdefault(number, []).append(value)

    def _last(self, number: int, kind: type):
        values = self.fields.get(number)
        if not values:
            return None
        value = values[-1]  # (protobuf: the last value of a repeated scalar field wins)
        if not isinstance(value, kind):
            raise LoadError(f"{self.what}: corrupt (field {number} has the wrong wire type)")
        return value

    def int(self, number: int, default: int = 0) -> int:
        """A varint field as int64 (the default where absent)."""
        value = self._last(number, int)
        return default if value is None else signed(value)

    def bool(self, number: int) -> bool:
        return bool(self.int(number))

    def _view(self, number: int) -> memoryview:
        value = self._last(number, memoryview)
        return memoryview(b"") if value is None else value

    def bytes(self, number: int) -> bytes:
        """A bytes field, copied out (b"" where absent)."""
        return bytes(self._view(number))

    def str(self, number: int) -> str:
        return _text(self._view(number), self.what, number)

    def message(self, number: int, what: str = "") -> "Message":
        """A nested message (an empty one where absent)."""
        return Message(self._view(number), what or f"{self.what} field {number}")

    def messages(self, number: int, what: str = "") -> list:
        return [Message(_bytes(v, self.what, number), what or f"{self.what} field {number}")
                for v in self.fields.get(number, ())]

    def strs(self, number: int) -> list:
        return [_text(_bytes(v, self.what, number), self.what, number)
                for v in self.fields.get(number, ())]

    def ints(self, number: int) -> list:
        """A repeated varint field, packed or not, as int64s."""
        out = []
        for value in self.fields.get(number, ()):
            if isinstance(value, int):
                out.append(signed(value))
                continue
            pos = 0
            while pos < len(value):
                item, pos = varint(value, pos, f"{self.what} field {number}")
                out.append(signed(item))
        return out

    def map(self, number: int, what: str = "") -> dict:
        """A `map<string, V>` field: key -> the value's serialized form (a message's, a
        string's), in place."""
        out = {}
        for entry in self.messages(number, what or f"{self.what} field {number}"):
            out[entry.str(1)] = entry._view(2)
        return out

    def has(self, number: int) -> bool:
        return number in self.fields


def _bytes(value, what: str, number: int) -> memoryview:
    if not isinstance(value, memoryview):
        raise LoadError(f"{what}: corrupt (field {number} has the wrong wire type)")
    return value


def _text(value: memoryview, what: str, number: int) -> str:
    try:
        return str(value, "utf-8")
    except UnicodeDecodeError:
        raise LoadError(f"{what}: corrupt (field {number} is not UTF-8 text)") from None
