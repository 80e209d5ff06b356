"""Input kinds told apart by their bytes (shlo2jax.sources.detect), so that a missing, empty,
truncated or foreign input is named as what it is."""

import pathlib

import pytest
from jax import export

import shlo2jax
from shlo2jax import sources
from shlo2jax.errors import LoadError, MissingFileError

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXPORTED = (ROOT / "tests" / "corpus" / "jax" / "mlp" / "exported.bin").read_bytes()
BYTECODE = (ROOT / "tests" / "corpus" / "tensorflow" / "tf_cnn" / "model.mlir.bc").read_bytes()
VHLO = bytes(export.deserialize(bytearray(EXPORTED)).mlir_module_serialized)


def test_kinds_by_their_first_bytes():
    assert sources.detect("func.func @main() {}").name == "mlir-text"
    assert sources.detect(BYTECODE).name == "mlir-bytecode"
    vhlo = sources.detect(VHLO)
    assert vhlo.name == "vhlo" and "producer StableHLO_v" in vhlo.noun
    assert sources.detect(EXPORTED).name == "jax-export"
    assert sources.detect(EXPORTED[:40]).name == "jax-export"  # cut before its root table
    assert sources.detect(b"HloModule m\n").name == "hlo-text"
    assert sources.detect(b"\x0a\x05jit_f\x12\x03abc").name == "hlo-proto"
    assert sources.detect(b"\x00\x01garbage").name == "unknown"
    assert sources.detect((ROOT / "examples" / "mlp.mlir").read_bytes()).name == "unknown"


@pytest.mark.parametrize("data, words", [
    (BYTECODE[:300], "(300 bytes) is a truncated or corrupt MLIR bytecode (producer"),
    (VHLO[:300], "(300 bytes) is a truncated or corrupt VHLO portable artifact (producer "
                 "StableHLO_v"),
    (EXPORTED[:40], "jax.export artifact"),
    (b"\x00\x01garbage", "is not a known format: not MLIR text (byte 0x00 at offset 0)"),
    (b"", "the input is empty (0 bytes)"),
    ("  \n", "the input is empty (3 bytes of white space)"),
])
def test_a_broken_input_is_named_as_its_kind(data, words):
    with pytest.raises(LoadError) as e:
        shlo2jax.load(data)
    assert words in str(e.value)


def test_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(MissingFileError, match=r"no such file: examples/mlp\.mlr \(did you mean "
                                               r"examples/mlp\.mlir\?\)"):
        shlo2jax.load("examples/mlp.mlr")
    with pytest.raises(FileNotFoundError, match="no folder nowhere"):  # also a FileNotFoundError
        shlo2jax.load("nowhere/model.mlir")
    with pytest.raises(MissingFileError, match="no such file"):
        shlo2jax.load(tmp_path / "missing.bc")  # a Path
    with pytest.raises(LoadError, match="examples is a folder, and no folder reader claims it"):
        shlo2jax.load("examples")
    (tmp_path / "empty.mlir").write_text("")
    with pytest.raises(LoadError, match="empty.mlir is empty"):
        shlo2jax.load(str(tmp_path / "empty.mlir"))
    # a str that looks like program text is parsed, not looked up as a file
    with pytest.raises(LoadError, match="cannot parse MLIR"):
        shlo2jax.load("module { func.func @main( }")
