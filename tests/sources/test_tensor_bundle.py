"""TensorFlow's tensor bundles read without TensorFlow (shlo2jax/sources/tensor_bundle.py): the
checkpoint TensorFlow wrote for a corpus SavedModel, and bundles written here in the documented
table format (tensorflow/core/lib/io/table_format.txt, tensor_bundle.proto) to reach what that
one does not: several blocks, shared key prefixes, several shards, and what is refused by name
(a compressed block, a big-endian bundle, a sliced variable, a corrupt table)."""

import pathlib
import shutil
import struct

import numpy as np
import pytest

import shlo2jax
from shlo2jax.errors import LoadError
from shlo2jax.sources import tensor_bundle
from _helpers import pb_field, pb_varint

VARIABLES = (pathlib.Path(__file__).resolve().parents[1] / "corpus" / "tensorflow" /
             "jax2tf_mlp" / "saved_model" / "variables")
MAGIC = struct.pack("<Q", 0xDB4775248B80FB57)


def _int(number: int, value: int) -> bytes:
    return pb_varint(number << 3) + pb_varint(value)


def _block(entries, compression: int = 0) -> bytes:
    """A table block: each key after the first shares its prefix with the one before."""
    out, previous = bytearray(), b""
    for key, value in entries:
        shared = next((i for i, (a, b) in enumerate(zip(key, previous)) if a != b),
                      min(len(key), len(previous)))
        out += pb_varint(shared) + pb_varint(len(key) - shared) + pb_varint(len(value))
        out += key[shared:] + value
        previous = key
    out += struct.pack("<II", 0, 1)  # one restart point, at 0
    return bytes(out) + bytes([compression]) + b"\0\0\0\0"  # (the checksum is not read)


def _table(entries, per_block: int = 2, compression: int = 0) -> bytes:
    """A sorted table of (key, value) pairs, `per_block` entries a data block."""
    entries = sorted(entries)
    data, index = bytearray(), []
    for i in range(0, len(entries), per_block):
        chunk = entries[i:i + per_block]
        block = _block(chunk, compression)
        index.append((chunk[-1][0], pb_varint(len(data)) + pb_varint(len(block) - 5)))
        data += block
    meta = _block([])
    meta_handle = pb_varint(len(data)) + pb_varint(len(meta) - 5)
    data += meta
    index_block = _block(index)
    index_handle = pb_varint(len(data)) + pb_varint(len(index_block) - 5)
    data += index_block
    footer = meta_handle + index_handle
    return bytes(data) + footer + b"\0" * (40 - len(footer)) + MAGIC


def _entry(dtype: int, shape, shard: int, offset: int, size: int, slices: bool = False):
    dims = b"".join(pb_field(2, _int(1, d)) for d in shape)
    return (_int(1, dtype) + pb_field(2, dims) + _int(3, shard) + _int(4, offset)
            + _int(5, size) + (pb_field(7, b"") if slices else b""))


def _bundle(tmp_path, tensors, shards: int = 1, endianness: int = 0, **table) -> str:
    """A bundle of `tensors` (name -> (array, shard)) written to tmp_path; its prefix."""
    prefix = str(tmp_path / "variables")
    files = [bytearray() for _ in range(shards)]
    entries = [(b"", _int(1, shards) + _int(2, endianness))]
    dtypes = {np.dtype("float32"): 1, np.dtype("int64"): 9, np.dtype("bool"): 10}
    for name, (array, shard) in tensors.items():
        raw = np.ascontiguousarray(array).tobytes()
        entries.append((name.encode(), _entry(dtypes[array.dtype], array.shape, shard,
                                              len(files[shard]), len(raw))))
        files[shard] += raw
    (tmp_path / "variables.index").write_bytes(_table(entries, **table))
    for i, data in enumerate(files):
        (tmp_path / f"variables.data-{i:05d}-of-{shards:05d}").write_bytes(bytes(data))
    return prefix


def test_the_checkpoint_tensorflow_wrote():
    bundle = tensor_bundle.Bundle(str(VARIABLES / "variables"))
    assert set(bundle.entries) == {"_CHECKPOINTABLE_OBJECT_GRAPH"} | {
        f"params/{n}/.ATTRIBUTES/VARIABLE_VALUE" for n in ("w1", "b1", "w2", "b2")}
    w1 = bundle.read("params/w1/.ATTRIBUTES/VARIABLE_VALUE")
    assert w1.shape == (4, 8) and w1.dtype == np.float32
    fn = shlo2jax.load(str(VARIABLES.parent)).entry
    np.testing.assert_array_equal(np.asarray(fn.params["params/w1"]), w1)
    assert bundle.read_string("_CHECKPOINTABLE_OBJECT_GRAPH")[:1] == b"\n"  # (a message)
    with pytest.raises(LoadError, match="is not a scalar string"):
        bundle.read_string("params/w1/.ATTRIBUTES/VARIABLE_VALUE")
    with pytest.raises(LoadError, match="no tensor 'nope'"):
        bundle.read("nope")


def test_blocks_shared_prefixes_and_shards(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {f"layer/{i}/kernel": (rng.standard_normal((i + 1, 3)).astype(np.float32), i % 2)
               for i in range(5)}
    tensors["step"] = (np.array(7, np.int64), 0)
    tensors["mask"] = (np.array([True, False]), 1)
    bundle = tensor_bundle.Bundle(_bundle(tmp_path, tensors, shards=2))
    assert set(bundle.entries) == set(tensors)
    for name, (array, _) in tensors.items():
        np.testing.assert_array_equal(bundle.read(name), array)
        assert bundle.read(name).dtype == array.dtype


@pytest.mark.parametrize("kwargs, expected", [
    ({"compression": 1}, r"a block stored with compression 1, which shlo2jax does not read"),
    ({"endianness": 1}, r"a big-endian bundle, which shlo2jax does not read"),
])
def test_what_is_refused_by_name(tmp_path, kwargs, expected):
    prefix = _bundle(tmp_path, {"x": (np.zeros(2, np.float32), 0)}, **kwargs)
    with pytest.raises(LoadError, match=r"variables.index: " + expected):
        tensor_bundle.Bundle(prefix)


def test_a_header_of_no_shards_is_refused(tmp_path):
    (tmp_path / "variables.index").write_bytes(_table([(b"", _int(1, 0))]))
    with pytest.raises(LoadError, match=r"variables.index: corrupt header \(0 shards\)"):
        tensor_bundle.Bundle(str(tmp_path / "variables"))


def test_a_sliced_variable_is_refused(tmp_path):
    (tmp_path / "variables.index").write_bytes(_table([
        (b"", _int(1, 1)), (b"v", _entry(1, [2], 0, 0, 8, slices=True))]))
    with pytest.raises(LoadError, match=r"tensor 'v' is stored in slices \(a partitioned "
                                        r"variable\)"):
        tensor_bundle.Bundle(str(tmp_path / "variables")).read("v")


def test_sizes_that_disagree_are_refused(tmp_path):
    (tmp_path / "variables.index").write_bytes(_table([
        (b"", _int(1, 1)), (b"v", _entry(1, [3], 0, 0, 8))]))
    (tmp_path / "variables.data-00000-of-00001").write_bytes(b"\0" * 8)
    with pytest.raises(LoadError, match=r"tensor 'v': 8 bytes for float32\[3\], which takes 12"):
        tensor_bundle.Bundle(str(tmp_path / "variables")).read("v")


def test_every_cut_of_an_index_is_refused(tmp_path):
    data = (VARIABLES / "variables.index").read_bytes()
    shutil.copy(VARIABLES / "variables.data-00000-of-00001", tmp_path)
    for cut in range(len(data)):
        (tmp_path / "variables.index").write_bytes(data[:cut])
        with pytest.raises(LoadError, match="variables.index"):
            tensor_bundle.Bundle(str(tmp_path / "variables"))


def test_corrupt_tables_are_refused_never_a_crash(tmp_path):
    # Every byte of a written index set to each of a few values: a bundle, or a LoadError.
    prefix = _bundle(tmp_path, {"a/b": (np.ones(3, np.float32), 0),
                                "a/c": (np.zeros(2, np.float32), 0)})
    index = pathlib.Path(prefix + ".index")
    original = index.read_bytes()
    for position in range(len(original)):
        for value in (0x00, 0x7F, 0x80, 0xFF):
            data = bytearray(original)
            data[position] = value
            index.write_bytes(bytes(data))
            try:
                bundle = tensor_bundle.Bundle(prefix)
                for name in bundle.entries:
                    bundle.read(name)
            except LoadError:
                pass
