"""The structure-aware mutators of `shlo2jax mutate` (shlo2jax.tools.mutate_structured): each
changes the part of its format it names, and nothing else."""

import ast
import io
import json
import pathlib
import random
import zipfile

import numpy as np
import pytest

from shlo2jax.sources import export_flatbuffer
from shlo2jax.sources.hlo import module_proto
from shlo2jax.tools.mutate_structured import (
    Folder, mutate_flatbuffer, mutate_folder, mutate_hlo_text, mutate_json, mutate_npy,
    mutate_npz, mutate_proto, npy_bytes, parse_message, write_message, zip_members)
from _helpers import pb_field, pb_varint

ROOT = pathlib.Path(__file__).resolve().parents[2]
HLO_PROTO = ROOT / "tests" / "corpus" / "hlo" / "tf_mlp_before_opt" / "model.hlo.pb"
HLO_TEXT = ROOT / "tests" / "corpus" / "hlo" / "mlp_before_opt" / "model.hlo"


def test_a_message_parses_into_nested_fields_and_writes_back_the_same_bytes():
    inner = pb_field(1, b"name") + pb_varint(2 << 3) + pb_varint(300)
    data = pb_field(1, inner) + pb_field(3, b"\xff\xfe")  # the second: not a message
    fields = parse_message(data)
    assert [f.number for f in fields] == [1, 3]
    assert [f.number for f in fields[0].value] == [1, 2] and fields[0].value[1].value == 300
    assert fields[1].value == b"\xff\xfe"
    assert write_message(fields) == data
    proto = HLO_PROTO.read_bytes()
    assert write_message(parse_message(proto)) == proto


def test_proto_mutants_keep_lengths_consistent_unless_the_length_is_the_mutation():
    proto = HLO_PROTO.read_bytes()
    rng = random.Random(0)
    kinds, changed = set(), 0
    for _ in range(60):
        label, data = mutate_proto(proto, rng)
        kind = label.split("@")[0]
        kinds.add(kind)
        changed += data != proto  # (emptying an empty field, moving one in place: the same)
        if kind in ("drop", "duplicate", "truncate", "empty", "grow", "varint", "move"):
            assert parse_message(data) is not None, label  # the enclosing lengths follow
    assert {"drop", "duplicate", "truncate", "varint", "length", "wire_type"} <= kinds
    assert changed >= 50


def test_hlo_protos_of_each_wrapper_are_mutated_as_messages():
    proto = HLO_PROTO.read_bytes()
    module = module_proto(proto)
    assert module != proto and parse_message(module) is not None
    label, _ = mutate_proto(module, random.Random(1))
    assert "@field" in label
    label, data = mutate_proto(b"\xff\xff\xff", random.Random(1))  # no message: truncated
    assert label == "proto_unparsed_truncate" and len(data) < 3


@pytest.mark.parametrize("path", sorted((ROOT / "tests" / "export_artifacts").glob("*/mlp.bin")),
                         ids=lambda p: p.parent.name)
def test_the_version_mutation_rewrites_the_serialization_version_of_every_writer(path):
    data = path.read_bytes()
    before = export_flatbuffer.read(data)
    rng = random.Random(0)
    for _ in range(40):
        label, mutant = mutate_flatbuffer(data, rng)
        if label.startswith("version="):
            version = int(label.split("=")[1])
            after = export_flatbuffer.read(mutant)
            assert after.serialization_version == version
            assert after.in_avals == before.in_avals  # nothing else moved
            return
    pytest.fail("no version mutation in 40")


def test_flatbuffer_mutants_change_what_their_label_names():
    data = (ROOT / "tests" / "export_artifacts" / "jax-0.9.2" / "mlp.bin").read_bytes()
    rng = random.Random(3)
    kinds = set()
    for _ in range(80):
        label, mutant = mutate_flatbuffer(data, rng)
        kinds.add(label.split("@")[0].split("=")[0])
        assert len(mutant) == len(data)  # values rewritten in place
    assert {"version", "vtable_entry", "vtable_size", "reference", "length", "root"} <= kinds


def test_hlo_text_mutants():
    text = HLO_TEXT.read_text()
    rng = random.Random(0)
    labels = [mutate_hlo_text(text, rng)[0] for _ in range(80)]
    assert {"hlo_dims", "hlo_opcode", "hlo_operand", "hlo_element_type"} <= \
        {label.split("@")[0] for label in labels}
    label, mutant = next((lb, m) for lb, m in (mutate_hlo_text(text, random.Random(s))
                                               for s in range(100)) if lb.startswith("hlo_opcode"))
    assert mutant != text and len(mutant.splitlines()) == len(text.splitlines())


def test_npy_header_mutations_declare_what_the_label_says():
    data = npy_bytes(np.arange(6, dtype=np.float32).reshape(2, 3))
    seen = set()
    for seed in range(60):
        label, mutant = mutate_npy(data, random.Random(seed))
        seen.add(label.split("=")[0])
        if label.startswith(("npy_shape=", "npy_huge=")):
            shape = ast.literal_eval(label.split("=", 1)[1])  # the label prints the tuple
            stream = io.BytesIO(mutant)
            assert np.lib.format.read_magic(stream) == (1, 0)
            assert np.lib.format.read_array_header_1_0(stream)[0] == shape
        if label.startswith("npy_dtype="):
            assert label.split("=", 1)[1].encode() in mutant[:128]
    assert {"npy_shape", "npy_huge", "npy_dtype", "npy_truncate_data"} <= seen


def test_npz_mutations():
    npz = zip_members([("arg_0.npy", npy_bytes(np.ones(3, np.float32))),
                       ("arg_1.npy", npy_bytes(np.zeros((2, 2), np.int32)))])
    seen = set()
    for seed in range(60):
        label, mutant = mutate_npz(npz, random.Random(seed))
        kind = label.split(":")[0]
        seen.add(kind)
        if kind in ("npz_drop", "npz_extra", "npz_rename"):
            with zipfile.ZipFile(io.BytesIO(mutant)) as archive:
                names = archive.namelist()
            assert len(names) == {"npz_drop": 1, "npz_extra": 3, "npz_rename": 2}[kind]
            assert names != ["arg_0.npy", "arg_1.npy"] or kind == "npz_rename"
    assert {"npz_rename", "npz_drop", "npz_reshape", "npz_dtype", "npz_member",
            "npz_truncate"} <= seen


def test_json_mutations_change_one_value():
    doc = {"name": "forward", "input_locations": [{"type_": "parameter", "name": "w"}]}
    seen = set()
    for seed in range(40):
        label, text = mutate_json(json.dumps(doc), random.Random(seed))
        seen.add(label.split("@")[0])
        if label.startswith("json_remove@name"):
            assert "name" not in json.loads(text)
    assert {"json_value", "json_remove"} <= seen


def test_folder_mutants_delete_duplicate_rename_and_change_files():
    folder = Folder((("a.txt", b"one"), ("b/c.txt", b"two")))
    content = lambda path, data, rng: ("changed", data + b"!")  # noqa: E731
    rename = lambda path, rng: path + ".renamed"  # noqa: E731
    seen = {}
    for seed in range(40):
        label, mutant = mutate_folder(folder, random.Random(seed), content, rename)
        seen[label.split(":")[1].split("->")[0]] = mutant.as_dict()
    assert seen["changed"] != folder.as_dict()
    assert len(seen["delete"]) == 1
    assert len(seen["duplicate"]) == 3
    renamed = seen["rename"]
    assert len(renamed) == 2 and any(p.endswith(".renamed") for p in renamed)
