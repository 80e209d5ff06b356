"""`jax.export` artifacts of every serialization version jax has written load, run and
differentiate like the jax that wrote them (tests/export_artifacts/: written by
generate.py under jax 0.4.23 (serialization version 1, calling conventions 8 and 9), 0.4.30
and 0.5.3 (version 2, convention 9), 0.7.2 (version 2, convention 10), 0.8.3, 0.9.2 and
0.10.2 (version 3), and `future/`: jax 0.10.2's serializer writing what jax after 0.11 writes
(version 12 and the jax_version field)).

Each artifact loads through `shlo2jax.load` (jax.export.deserialize where the installed jax
reads it right, the flatbuffer reader otherwise), and through the flatbuffer reader alone;
its forward values and its gradient agree with the writer's golden.
"""

import dataclasses
import json
import pathlib

import flatbuffers
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export as jax_export

import shlo2jax
from shlo2jax.sources import export_flatbuffer, jax_export as sources_jax_export

ARTIFACTS = pathlib.Path(__file__).resolve().parents[1] / "export_artifacts"


def _artifacts(slow_but_mlp: bool = False):
    out = []
    for manifest in sorted(ARTIFACTS.glob("*/manifest.json")):
        entries = json.loads(manifest.read_text())["artifacts"]
        for name, entry in sorted(entries.items()):
            marks = [pytest.mark.slow] if slow_but_mlp and name != "mlp" else []
            out.append(pytest.param(manifest.parent / f"{name}.bin", entry, marks=marks,
                                    id=f"{manifest.parent.name}/{name}"))
    return out


ALL = _artifacts()
# the flatbuffer reader alone: each writer's mlp in the fast subset, the rest slow
ALL_MLP_FAST = _artifacts(slow_but_mlp=True)


def _golden(path):
    return dict(np.load(path.with_suffix(".npz")))


def _inputs(golden):
    return [golden[f"in{i}"] for i in range(sum(k.startswith("in") for k in golden))]


def _outputs(golden):
    return [golden[f"out{j}"] for j in range(sum(k.startswith("out") for k in golden))]


def _flat(result):
    return list(result) if isinstance(result, tuple) else [result]


def _check_forward(function, golden):
    outs = _flat(function(*_inputs(golden)))
    expected = _outputs(golden)
    assert len(outs) == len(expected)
    for got, want in zip(outs, expected):
        assert np.asarray(got).dtype == want.dtype
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


def _check_grad(function, golden):
    inputs = _inputs(golden)
    floating = [i for i, a in enumerate(inputs) if jnp.issubdtype(a.dtype, jnp.floating)]
    cts = {int(k[2:]): v for k, v in golden.items() if k.startswith("ct")}

    def loss(*fl):
        full = list(inputs)
        for i, v in zip(floating, fl):
            full[i] = v
        outs = _flat(function(*full))
        return sum(jnp.sum(outs[j] * ct) for j, ct in cts.items())

    grads = jax.grad(loss, argnums=tuple(range(len(floating))))(*[inputs[i] for i in floating])
    for i, g in zip(floating, grads):
        np.testing.assert_allclose(np.asarray(g), golden[f"grad{i}"], rtol=1e-4, atol=1e-5)


def _check_signature(function, golden, entry):
    inputs = _inputs(golden)
    assert len(function.in_avals) == len(inputs)
    for aval, x in zip(function.in_avals, inputs):
        assert aval.dtype == x.dtype and len(aval.shape) == x.ndim
        assert all(not isinstance(d, int) or d == n for d, n in zip(aval.shape, x.shape))
    assert f"[jax.export {entry['program']}]" in function.signature


@pytest.mark.parametrize("path, entry", ALL)
def test_artifact_loads_runs_and_differentiates(path, entry):
    """shlo2jax.load of the serialized bytes: forward and gradient agree with the writer's."""
    golden = _golden(path)
    program = shlo2jax.load(str(path))
    function = program.entry
    assert program.exported.calling_convention_version == entry["calling_convention_version"]
    assert tuple(program.exported.platforms) == tuple(entry["platforms"])
    _check_signature(function, golden, entry)
    _check_forward(function, golden)
    if entry["vjp"]:
        assert function.uses_producer_vjp
        _check_grad(function, golden)


@pytest.mark.parametrize("path, entry", ALL_MLP_FAST)
def test_flatbuffer_reader_reads_each_version(path, entry):
    """The flatbuffer reader alone (what load uses where jax refuses): the same Exported as
    jax's where jax reads it, and the program it gives runs and differentiates."""
    data = path.read_bytes()
    record = export_flatbuffer.read(data)
    assert record.serialization_version == entry["serialization_version"]
    assert record.calling_convention_version == entry["calling_convention_version"]
    assert record.nr_devices == 1 and record.vjp is not None
    mine = export_flatbuffer.to_exported(record)
    try:
        theirs = jax_export.deserialize(bytearray(data))
    except Exception:  # noqa: BLE001 - this jax refuses it: nothing to compare with
        theirs = None
    if theirs is not None and export_flatbuffer.agrees(theirs, record):
        for field in ("fun_name", "in_tree", "out_tree", "platforms", "module_kept_var_idx",
                      "calling_convention_version", "nr_devices", "uses_global_constants",
                      "ordered_effects", "unordered_effects"):
            assert getattr(mine, field) == getattr(theirs, field), field
        assert [str(a) for a in mine.in_avals] == [str(a) for a in theirs.in_avals]
        assert [str(a) for a in mine.out_avals] == [str(a) for a in theirs.out_avals]
        assert mine.mlir_module_serialized == bytes(theirs.mlir_module_serialized)
        assert [str(a) for a in mine.vjp().in_avals] == [str(a) for a in theirs.vjp().in_avals]
    golden = _golden(path)
    program = shlo2jax.load(mine)
    _check_forward(program.entry, golden)
    _check_grad(program.entry, golden)


MLP = ARTIFACTS / "jax-0.10.2" / "mlp.bin"
OLDEST = ARTIFACTS / "jax-0.4.23" / "mlp.bin"


@pytest.mark.parametrize("path", [MLP, OLDEST], ids=["jax-0.10.2", "jax-0.4.23"])
def test_load_falls_back_where_jax_refuses(path, monkeypatch):
    """Where jax.export.deserialize raises (a version it refuses), load reads the flatbuffer."""
    def refuse(_):
        raise ValueError("unsupported serialization version")
    monkeypatch.setattr(sources_jax_export.jax_export, "deserialize", refuse)
    program = shlo2jax.load(path.read_bytes())
    golden = _golden(path)
    _check_forward(program.entry, golden)
    _check_grad(program.entry, golden)


def test_load_reads_the_flatbuffer_where_jax_misreads(monkeypatch):
    """An older jax reads a newer artifact without error but wrongly (jax 0.7 reads the
    device count of a jax >= 0.8.3 artifact as 0): load takes the flatbuffer's reading."""
    real = jax_export.deserialize
    monkeypatch.setattr(sources_jax_export.jax_export, "deserialize",
                        lambda data: dataclasses.replace(real(data), nr_devices=0))
    program = shlo2jax.load(MLP.read_bytes())
    assert program.exported.nr_devices == 1
    _check_forward(program.entry, _golden(MLP))


@pytest.mark.parametrize("cut", [0.5, 0.9, 0.99])
def test_truncated_artifact_is_a_load_error(cut):
    data = MLP.read_bytes()
    with pytest.raises(shlo2jax.LoadError):
        shlo2jax.load(data[:int(len(data) * cut)])


@pytest.mark.parametrize("where", ["root", "vtable", "module"])
def test_corrupted_artifact_is_a_load_error(where):
    data = bytearray(MLP.read_bytes())
    modules = [i for i in range(len(data)) if data.startswith(b"ML\xefR", i)]  # its VJP's too
    at = {"root": [0], "vtable": [int.from_bytes(data[:4], "little") - 8],
          "module": [i + 4 for i in modules]}[where]
    for i in at:
        data[i:i + 4] = b"\xff\xff\xff\x7f"
    with pytest.raises(shlo2jax.LoadError):
        shlo2jax.load(bytes(data))


def test_corrupted_offsets_never_escape_as_other_errors():
    """Every 4-byte window of the header and tables overwritten: load gives a program or a
    LoadError, never another exception (a malformed offset is read bounds-checked)."""
    clean = MLP.read_bytes()
    for at in range(0, 400, 4):
        data = bytearray(clean)
        data[at:at + 4] = b"\xf0\xff\xff\x0f"
        try:
            export_flatbuffer.read(bytes(data))
        except (export_flatbuffer.NotAnExport, shlo2jax.LoadError):
            pass


@pytest.mark.parametrize("path", [MLP, OLDEST], ids=["jax-0.10.2", "jax-0.4.23"])
def test_corrupt_artifacts_load_or_raise_load_error(path, monkeypatch):
    """Windows of the tables overwritten, read by the flatbuffer reader (jax refusing): load
    gives a program or a LoadError, never another exception."""
    def refuse(_):
        raise ValueError("unsupported serialization version")
    monkeypatch.setattr(sources_jax_export.jax_export, "deserialize", refuse)
    clean = path.read_bytes()
    for at in range(0, 240, 8):
        data = bytearray(clean)
        data[at:at + 4] = b"\x08\x00\x00\x80"
        try:
            shlo2jax.load(bytes(data))
        except shlo2jax.LoadError:
            pass


def test_newer_stablehlo_than_this_jaxlib_names_both_versions():
    """A module written for a StableHLO newer than this jaxlib reads (VHLO's forward window)
    that this jaxlib cannot read (an op version it does not have): a LoadError naming the
    artifact's version and this jaxlib's, never a crash. (The version alone decides nothing:
    jaxlib reads a newer artifact whose ops it has.)"""
    exported = jax_export.deserialize(bytearray(MLP.read_bytes()))
    module = bytes(exported.mlir_module_serialized)
    written = sources_jax_export.vhlo_version(module)
    old = ("StableHLO_v" + ".".join(map(str, written))).encode()
    new = b"StableHLO_v9" + old[len(b"StableHLO_v9"):]  # the same length: v9.x.y
    assert b"tanh_v2" in module
    future = module.replace(old, new, 1).replace(b"tanh_v2", b"tanh_v9")
    with pytest.raises(shlo2jax.LoadError, match=r"(?s)StableHLO v9\..*newer than jaxlib .* reads"
                       r".*tanh_v9"):
        shlo2jax.load(dataclasses.replace(exported, mlir_module_serialized=future))
    # the version alone: read
    shlo2jax.load(dataclasses.replace(exported, mlir_module_serialized=module.replace(old, new, 1)))


def test_unknown_calling_convention_is_a_load_error():
    exported = jax_export.deserialize(bytearray(MLP.read_bytes()))
    with pytest.raises(shlo2jax.LoadError, match="calling convention 11"):
        shlo2jax.load(dataclasses.replace(exported, calling_convention_version=11))


def test_vhlo_version_of_each_writer():
    """The producer string of each writer's module: VHLO 0.9.0 (jax 0.4.2x, 0.4.30) up to the
    one jax 0.10.2 targets."""
    versions = {}
    for path, _ in (p.values for p in ALL):
        record = export_flatbuffer.read(path.read_bytes())
        versions[path.parent.name] = sources_jax_export.vhlo_version(bytes(record.module))
    assert versions["jax-0.4.23"] == (0, 9, 0)
    assert all(v is not None and v >= (0, 9, 0) for v in versions.values())


def test_effects_are_read_by_type_name():
    """Effects are serialized as their class names (no public jax API exports one, so no
    artifact here has one): a registered effect is made again, an unknown one is a LoadError."""
    record = export_flatbuffer.read(MLP.read_bytes())
    ordered = "<class 'jax._src.debugging.OrderedDebugEffect'>"
    exported = export_flatbuffer.to_exported(
        dataclasses.replace(record, ordered_effects=(ordered,)))
    assert [str(type(e)) for e in exported.ordered_effects] == [ordered]
    with pytest.raises(shlo2jax.LoadError, match="effect <class 'mine.Effect'>"):
        export_flatbuffer.to_exported(
            dataclasses.replace(record, unordered_effects=("<class 'mine.Effect'>",)))


def _flatbuffer(slots: int, fill) -> bytes:
    builder = flatbuffers.Builder(0)
    module = builder.CreateByteVector(b"ML\xefR\x00")
    builder.StartObject(slots)
    builder.PrependUOffsetTRelativeSlot(export_flatbuffer.MLIR_MODULE, module, 0)
    fill(builder)
    builder.Finish(builder.EndObject())
    return bytes(builder.Output())


def test_a_newer_layout_that_moves_what_matters_is_a_clear_load_error():
    """An artifact whose avals are not where any known jax writes them, with a field set this
    reader does not know: a LoadError naming both (the installed jax may still read it)."""
    data = _flatbuffer(31, lambda b: b.PrependUint32Slot(30, 7, 0))
    with pytest.raises(export_flatbuffer.NewerThanReader, match=r"no input avals.*\[30\]"):
        export_flatbuffer.read(data)
    with pytest.raises(shlo2jax.LoadError):
        shlo2jax.load(data)


def test_unknown_slots_alone_are_read_past(monkeypatch):
    """Fields a newer jax adds after those known are read past where the known ones are
    there: a reader that knows the fields up to jax 0.11 (26) reads what jax after 0.11
    writes (its jax_version is slot 26)."""
    path = ARTIFACTS / "future" / "mlp.bin"
    assert export_flatbuffer.read(path.read_bytes()).jax_version == "0.12.0.1"
    monkeypatch.setattr(export_flatbuffer, "KNOWN_SLOTS", export_flatbuffer.JAX_VERSION)
    record = export_flatbuffer.read(path.read_bytes())
    assert record.unknown_slots == (export_flatbuffer.JAX_VERSION,)
    program = shlo2jax.load(export_flatbuffer.to_exported(record))
    _check_forward(program.entry, _golden(path))
