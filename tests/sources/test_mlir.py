"""shlo2jax/sources/mlir.py: MLIR text and bytecode read through jaxlib's parser, with what
its Python bindings do to corrupt input turned into load errors."""

import pathlib

import pytest

import shlo2jax
from shlo2jax.errors import LoadError

ROOT = pathlib.Path(__file__).resolve().parents[2]
ATTENTION = ROOT / "tests" / "corpus" / "tensorflow" / "tf_attention_mask" / "model.mlir.bc"


def test_an_op_name_that_is_not_utf8_is_a_load_error():
    """The module's bytecode with the last byte of the dialect name `func` made 0xe8: the
    string table may hold bytes that are not UTF-8 (so the framing check cannot refuse it),
    jaxlib parses it, and its bindings raise UnicodeDecodeError reading the op's name (`flip@1890`
    of `shlo2jax mutate --kinds bytes,text --count 2000 --seed 21`, mutant 1258)."""
    data = bytearray(ATTENTION.read_bytes())
    assert len(data) == 3748 and data[1887:1891] == b"func", "the corpus file changed"
    data[1890] = 0xE8
    with pytest.raises(LoadError, match="a dialect's or an op's name is not UTF-8"):
        shlo2jax.load(bytes(data))


RELEASE_1_5 = ROOT / "tests" / "vhlo" / "stablehlo_legalize_to_vhlo.1_5_0.mlir.bc"


def test_a_module_the_parse_refuses_is_not_read_again_as_an_artifact():
    """StableHLO 1.5.0's release artifact with byte 7643 made 0xeb (`flip@7643` of `shlo2jax
    mutate --kinds bytes --releases --count 1000 --seed 58`, mutant 829): a
    `vhlo.collective_broadcast_v1` now holds a region. jaxlib's parse refuses it; reading it
    again as a portable artifact, as the error path did, ended the process on jaxlib 0.12.0.1
    (SIGSEGV in `deserialize_portable_artifact`). The parse's error is the answer."""
    data = bytearray(RELEASE_1_5.read_bytes())
    assert len(data) == 18842 and data[7643] == 0x05, "the release artifact changed"
    data[7643] = 0xEB
    with pytest.raises(LoadError, match="collective_broadcast_v1' op requires zero regions"):
        shlo2jax.load(bytes(data))
