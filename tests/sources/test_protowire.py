"""Protobuf's wire format read field by field (shlo2jax/sources/protowire.py), what the
SavedModel reader parses TensorFlow's messages with: every wire form it meets, and malformed
bytes as a LoadError naming the message, never a plain exception or a hang."""

import random

import pytest

from shlo2jax.errors import LoadError
from shlo2jax.sources.protowire import Message, varint
from _helpers import pb_varint


def _tag(number: int, wire: int) -> bytes:
    return pb_varint(number << 3 | wire)


def _bytes(number: int, payload: bytes) -> bytes:
    return _tag(number, 2) + pb_varint(len(payload)) + payload


def test_every_wire_form():
    data = (_tag(1, 0) + pb_varint(300)                       # varint
            + _tag(2, 0) + pb_varint((1 << 64) - 5)           # a negative int64
            + _tag(3, 1) + (7).to_bytes(8, "little")        # fixed64
            + _tag(4, 5) + (9).to_bytes(4, "little")        # fixed32
            + _bytes(5, "héllo".encode())                    # a string
            + _bytes(6, _bytes(1, b"inner"))                 # a nested message
            + _bytes(7, pb_varint(1) + pb_varint(2) + pb_varint(1 << 40))  # packed varints
            + _tag(7, 0) + pb_varint(3)                        # ... and one more, unpacked
            + _bytes(8, _bytes(1, b"k") + _bytes(2, b"v"))   # a map entry
            + _tag(9, 0) + pb_varint(1) + _tag(9, 0) + pb_varint(2))  # a repeated scalar
    m = Message(data, "m")
    assert m.int(1) == 300 and m.int(2) == -5 and m.int(3) == 7 and m.int(4) == 9
    assert m.str(5) == "héllo" and m.message(6).str(1) == "inner"
    assert m.ints(7) == [1, 2, 1 << 40, 3]
    assert {k: bytes(v) for k, v in m.map(8).items()} == {"k": b"v"}
    assert m.int(9) == 2  # (the last value of a scalar wins)
    assert m.int(10, default=4) == 4 and m.str(10) == "" and m.bytes(10) == b""
    assert not m.has(10) and m.message(10).fields == {} and m.messages(10) == []


@pytest.mark.parametrize("data, expected", [
    (_tag(1, 2) + pb_varint(10) + b"short", r"m: truncated \(field 1 holds 10 bytes, 5 are left\)"),
    (_tag(1, 0) + b"\x80\x80", r"m: truncated \(a varint runs past the end\)"),
    (_tag(1, 0) + b"\xff" * 11, r"m: corrupt \(a varint longer than 10 bytes\)"),
    (_tag(1, 3), r"m: corrupt \(field 1 has wire type 3\)"),
    (b"\x00", r"m: corrupt \(field number 0\)"),
    (_tag(1, 1) + b"\x00" * 3, r"m: truncated \(field 1 runs past the end\)"),
])
def test_malformed_messages_are_refused(data, expected):
    with pytest.raises(LoadError, match=expected):
        Message(data, "m")


def test_a_field_of_another_wire_type_than_read_is_refused():
    m = Message(_tag(1, 0) + pb_varint(5) + _bytes(2, b"\xff\xfe"), "m")
    with pytest.raises(LoadError, match=r"m: corrupt \(field 1 has the wrong wire type\)"):
        m.str(1)
    with pytest.raises(LoadError, match=r"m: corrupt \(field 2 has the wrong wire type\)"):
        m.int(2)
    with pytest.raises(LoadError, match=r"m: corrupt \(field 2 is not UTF-8 text\)"):
        m.str(2)
    with pytest.raises(LoadError, match=r"m: corrupt \(field 1 has the wrong wire type\)"):
        m.messages(1)


def test_varint_positions():
    assert varint(b"\x96\x01rest", 0, "v") == (150, 2)


def test_random_bytes_are_read_or_refused():
    # Seeded random buffers and every cut of a real message: each parses (its nested messages
    # too) or is a LoadError.
    rng = random.Random(45)
    real = _bytes(1, _bytes(1, b"a" * 40) + _tag(2, 0) + pb_varint(7)) * 3
    samples = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
               for _ in range(300)] + [real[:cut] for cut in range(len(real))]
    for data in samples:
        try:
            m = Message(data, "m")
            for number in m.fields:
                m.messages(number)
        except LoadError:
            pass
