"""A serialized jax.export artifact read by shlo2jax.sources.jax_export: fields that disagree
with one another are a LoadError at load, not an error at every call."""

import pathlib
import struct

import pytest

import shlo2jax
from shlo2jax.errors import LoadError
from shlo2jax.sources import export_flatbuffer

ROOT = pathlib.Path(__file__).resolve().parents[2]


# Found by `shlo2jax mutate --kinds export --count 150 --seed 1` (mutants 71 and 28): a
# vtable entry of a pytree node changed, the flatbuffer still reads, and every call was a
# TypeError counting arguments.
@pytest.mark.parametrize("path, at, value, leaves, avals", [
    ("tests/corpus/jax/mlp/exported.bin", 3168, 0, 1, 7),        # a node's children gone
    ("tests/export_artifacts/jax-0.5.3/poly.bin", 6468, 12, 0, 1),  # a leaf read as a tuple
])
def test_a_pytree_that_disagrees_with_the_avals_is_refused(path, at, value, leaves, avals):
    data = bytearray((ROOT / path).read_bytes())
    struct.pack_into("<H", data, at, value)
    export_flatbuffer.read(bytes(data))  # the flatbuffer itself still reads
    with pytest.raises(LoadError, match=f"corrupt: the pytree of its inputs has {leaves} "
                                        f"leaves, its inputs {avals} avals"):
        shlo2jax.load(bytes(data))


def test_every_export_artifact_still_loads():
    for path in sorted((ROOT / "tests" / "export_artifacts").glob("*/*.bin")):
        assert shlo2jax.load(str(path)).entry is not None, path
