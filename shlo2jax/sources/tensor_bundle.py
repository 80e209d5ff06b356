"""TensorFlow's tensor bundles (checkpoints: a SavedModel's `variables/variables.index` and
`variables.data-<shard>-of-<shards>`), read without TensorFlow.

The index is a LevelDB-style sorted table (tensorflow/core/lib/io/table_format.txt): a
48-byte footer (the metaindex's and the index block's handles, varint offset and size,
padded to 40 bytes, then the magic 0xdb4775248b80fb57) and blocks of prefix-compressed
entries (shared key length, unshared length, value length, the key's unshared bytes, the
value), each block followed by its compression type and a checksum. Every index entry
points to a data block; every data entry maps a tensor's name to its `BundleEntryProto`
(tensor_bundle.proto: 1 dtype, 2 shape, 3 shard_id, 4 offset, 5 size, 7 slices); the entry
under the empty key is the `BundleHeaderProto` (1 num_shards, 2 endianness). A tensor's bytes
are `size` bytes at `offset` in its shard's data file, little-endian.

What is read is checked as it is read: a truncated or corrupt file is a `LoadError` naming
it and what was wrong; a block stored compressed (TensorFlow writes bundles uncompressed), a
sliced (partitioned) variable, a big-endian bundle or a dtype numpy cannot hold is refused
by name. The data's checksums are not verified (sizes are).
"""

from __future__ import annotations

import math
import os
import struct

import numpy as np

from shlo2jax.errors import LoadError
from shlo2jax.sources.protowire import Message, varint

_MAGIC = 0xDB4775248B80FB57
_FOOTER = 48
_BLOCK_TRAILER = 5  # the compression type byte and a 4-byte checksum

# TensorFlow's DataType enum (types.proto) -> numpy, for the dtypes a variable can hold.
DTYPES = {1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8",
          8: "complex64", 9: "int64", 10: "bool", 14: "bfloat16", 17: "uint16",
          18: "complex128", 19: "float16", 22: "uint32", 23: "uint64"}
DT_STRING = 7


def np_dtype(tf_dtype: int, what: str) -> np.dtype:
    name = DTYPES.get(tf_dtype)
    if name is None:
        raise LoadError(f"{what}: TensorFlow dtype {tf_dtype} is not one shlo2jax reads "
                        "(numeric and bool tensors only)")
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def shape_of(proto: Message) -> tuple:
    """A `TensorShapeProto`'s dims (2: Dim { 1 size }), -1 for an unknown one; None where the
    rank is unknown (3)."""
    if proto.bool(3):
        return None
    return tuple(d.int(1) for d in proto.messages(2, f"{proto.what} dim"))


class Bundle:
    """A tensor bundle's index, read (`prefix`: the path without `.index`, as TensorFlow
    names it). `entries`: tensor name -> its `BundleEntryProto`; `read(name)` its value."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.index_path = prefix + ".index"
        data = read_file(self.index_path)
        self.entries = {key: Message(value, f"{self.index_path}: the entry of {key!r}")
                        for key, value in _table(data, self.index_path)}
        header = self.entries.pop("", None)
        if header is None:
            raise LoadError(f"{self.index_path}: no bundle header (the entry under the empty "
                            "key)")
        self.num_shards = header.int(1)
        if header.int(2) != 0:
            raise LoadError(f"{self.index_path}: a big-endian bundle, which shlo2jax does "
                            "not read")
        if not 1 <= self.num_shards <= 100000:
            raise LoadError(f"{self.index_path}: corrupt header ({self.num_shards} shards)")

    def _entry(self, name: str) -> Message:
        entry = self.entries.get(name)
        if entry is None:
            raise LoadError(f"{self.index_path}: no tensor {name!r} in the bundle")
        if entry.has(7):
            raise LoadError(f"{self.index_path}: tensor {name!r} is stored in slices (a "
                            "partitioned variable), which shlo2jax does not read")
        return entry

    def _bytes(self, name: str, entry: Message) -> bytes:
        shard, offset, size = entry.int(3), entry.int(4), entry.int(5)
        if not 0 <= shard < self.num_shards or offset < 0 or size < 0:
            raise LoadError(f"{self.index_path}: corrupt entry of {name!r} (shard {shard}, "
                            f"offset {offset}, size {size})")
        path = f"{self.prefix}.data-{shard:05d}-of-{self.num_shards:05d}"
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read(size)
        except OSError as e:
            raise LoadError(f"cannot read {path} ({name!r}): {e.strerror or e}") from None
        if len(data) != size:
            raise LoadError(f"{path} is truncated: {name!r} is {size} bytes at offset "
                            f"{offset}, the file holds {len(data)} of them")
        return data

    def read(self, name: str) -> np.ndarray:
        """The tensor `name` (numeric or bool) as a numpy array."""
        entry = self._entry(name)
        what = f"{self.index_path}: tensor {name!r}"
        dtype = np_dtype(entry.int(1), what)
        shape = shape_of(entry.message(2, f"{what} shape"))
        if shape is None or any(d < 0 for d in shape):
            raise LoadError(f"{what}: corrupt shape {shape}")
        data = self._bytes(name, entry)
        count = math.prod(shape)  # (Python ints: a corrupt shape cannot overflow)
        if len(data) != count * dtype.itemsize:
            raise LoadError(f"{what}: {len(data)} bytes for {dtype}{list(shape)}, which takes "
                            f"{count * dtype.itemsize}")
        return np.frombuffer(data, dtype).reshape(shape).copy()

    def read_string(self, name: str) -> bytes:
        """A scalar string tensor's bytes (stored as its varint length, a 4-byte checksum of
        the lengths, then the bytes)."""
        entry = self._entry(name)
        what = f"{self.index_path}: tensor {name!r}"
        if entry.int(1) != DT_STRING or shape_of(entry.message(2, what)) != ():
            raise LoadError(f"{what} is not a scalar string")
        data = self._bytes(name, entry)
        length, pos = varint(data, 0, what)
        if pos + 4 + length != len(data):
            raise LoadError(f"{what}: corrupt string ({length} bytes said, "
                            f"{len(data) - pos - 4} stored)")
        return data[pos + 4:]


def read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise LoadError(f"cannot read {path}: {e.strerror or e}") from None


def _table(data: bytes, what: str):
    """(key, value) of every data entry of a sorted table, in order."""
    if len(data) < _FOOTER or struct.unpack_from("<Q", data, len(data) - 8)[0] != _MAGIC:
        raise LoadError(f"{what} ({len(data)} bytes) is truncated or not a tensor bundle "
                        "index (no table footer)")
    footer = data[len(data) - _FOOTER:]
    _, pos = _handle(footer, 0, what)           # the metaindex: nothing in it is needed
    index, _ = _handle(footer, pos, what)
    for _, value in _block(data, index, what):
        handle, _ = _handle(value, 0, what)
        yield from _block(data, handle, what)


def _handle(data: bytes, pos: int, what: str) -> tuple:
    offset, pos = varint(data, pos, what)
    size, pos = varint(data, pos, what)
    return (offset, size), pos


def _block(data: bytes, handle: tuple, what: str):
    """The entries of the block at `handle` (offset, size)."""
    offset, size = handle
    end = offset + size
    if end + _BLOCK_TRAILER > len(data) - _FOOTER or size < 4:
        raise LoadError(f"{what}: corrupt block handle (offset {offset}, size {size} in a "
                        f"file of {len(data)} bytes)")
    if data[end] != 0:
        raise LoadError(f"{what}: a block stored with compression {data[end]}, which "
                        "shlo2jax does not read")
    restarts = struct.unpack_from("<I", data, end - 4)[0]
    limit = end - 4 - 4 * restarts  # where the entries end
    if restarts < 1 or limit < offset:
        raise LoadError(f"{what}: corrupt block ({restarts} restart points)")
    pos, key = offset, b""
    while pos < limit:
        shared, pos = varint(data, pos, what)
        unshared, pos = varint(data, pos, what)
        length, pos = varint(data, pos, what)
        if shared > len(key) or pos + unshared + length > limit:
            raise LoadError(f"{what}: corrupt block entry at offset {pos}")
        key = key[:shared] + data[pos:pos + unshared]
        pos += unshared
        yield _key(key, what), data[pos:pos + length]
        pos += length


def _key(key: bytes, what: str) -> str:
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        raise LoadError(f"{what}: corrupt key {key[:40]!r}") from None


def exists(prefix: str) -> bool:
    return os.path.isfile(prefix + ".index")
