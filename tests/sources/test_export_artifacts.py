"""`jax.export` artifacts of every serialization version jax has written load, run,
differentiate and vmap like the jax that wrote them, under every supported jax
(tests/export_artifacts/: written by generate.py under jax 0.4.23 (serialization version 1,
calling conventions 8 and 9), 0.4.30 and 0.5.3 (version 2, convention 9), 0.7.2 (version 2,
convention 10), 0.8.3, 0.9.2 and 0.10.2 (version 3), 0.11.2 and 0.12.0.1 (version 12 and
the writer's jax_version; also `sharded`: named shardings with an abstract mesh; 0.12.0.1
also `linsolve`: LAPACK's FFI calls with their `mhlo.backend_config`), and
`future/`: jax 0.10.2's serializer writing version 12).

Each artifact is read by shlo2jax's flatbuffer reader alone (never `jax.export.deserialize`;
no jax `Exported` is made on the way), including those the installed jax refuses or
misreads; its record agrees with jax's own reading where jax reads it right, and its forward
values, gradient and vmap agree with the writer's golden. (jax 0.11.2's and 0.12.0.1's
`poly` carry StableHLO 1.18's `vhlo.custom_call_v2`: an older jaxlib reads them through
`sources.vhlo_downgrade`.)
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
from shlo2jax.sources import export_compat, export_flatbuffer, jax_export as sources_jax_export

ARTIFACTS = pathlib.Path(__file__).resolve().parents[1] / "export_artifacts"


def _artifacts(slow_but_mlp: bool = False):
    out = []
    for manifest in sorted(ARTIFACTS.glob("*/manifest.json")):
        entries = json.loads(manifest.read_text())["artifacts"]
        for name, entry in sorted(entries.items()):
            path = manifest.parent / f"{name}.bin"
            marks = [pytest.mark.slow] if slow_but_mlp and name != "mlp" else []
            out.append(pytest.param(path, entry, marks=marks,
                                    id=f"{manifest.parent.name}/{name}"))
    return out


ALL = _artifacts()
# jax's own reading compared: each writer's mlp in the fast subset, the rest slow
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


def _check_vmap(function, golden):
    """vmap over a batch of two: the golden inputs and the same inputs again (a batch of
    the golden's outputs twice)."""
    batched = [np.stack([x, x]) for x in _inputs(golden)]
    outs = _flat(jax.vmap(function)(*batched))
    for got, want in zip(outs, _outputs(golden)):
        np.testing.assert_allclose(np.asarray(got), np.stack([want, want]), rtol=1e-5,
                                   atol=1e-6)


def _check_signature(function, golden, entry):
    inputs = _inputs(golden)
    assert len(function.in_avals) == len(inputs)
    for aval, x in zip(function.in_avals, inputs):
        assert aval.dtype == x.dtype and len(aval.shape) == x.ndim
        assert all(not isinstance(d, int) or d == n for d, n in zip(aval.shape, x.shape))
    assert f"[jax.export {entry['program']}]" in function.signature


@pytest.mark.parametrize("path, entry", ALL)
def test_artifact_loads_runs_differentiates_and_vmaps(path, entry):
    """shlo2jax.load of the serialized bytes: forward, gradient and vmap agree with the
    writer's, whatever the installed jax's deserialize makes of the bytes."""
    golden = _golden(path)
    function = shlo2jax.load(str(path)).entry
    record = function.record
    assert isinstance(record, sources_jax_export.ExportRecord) and record.origin is None
    assert record.serialization_version == entry["serialization_version"]
    assert record.calling_convention_version == entry["calling_convention_version"]
    assert tuple(record.platforms) == tuple(entry["platforms"])
    _check_signature(function, golden, entry)
    _check_forward(function, golden)
    _check_vmap(function, golden)
    if entry["vjp"]:
        assert function.uses_producer_vjp
        _check_grad(function, golden)


@pytest.mark.parametrize("path, entry", ALL_MLP_FAST)
def test_record_agrees_with_jax_where_jax_reads_it(path, entry):
    """The flatbuffer reader's record holds what jax's own deserialize reads, where the
    installed jax reads the artifact right (elsewhere nothing to compare with)."""
    data = path.read_bytes()
    record = sources_jax_export.deserialize(data)
    assert record.serialization_version == entry["serialization_version"]
    assert record.nr_devices == 1 and record.has_vjp()
    if export_compat.jax_reading(data, record) != "jax":
        pytest.skip(f"jax {jax.__version__} does not read it right")
    theirs = jax_export.deserialize(bytearray(data))
    for field in ("fun_name", "in_tree", "out_tree", "module_kept_var_idx",
                  "calling_convention_version", "nr_devices", "uses_global_constants"):
        assert getattr(record, field) == getattr(theirs, field), field
    assert tuple(record.platforms) == tuple(theirs.platforms)
    assert record.ordered_effects == tuple(str(type(e)) for e in theirs.ordered_effects)
    for mine, jaxs in ((record.in_avals, theirs.in_avals), (record.out_avals, theirs.out_avals),
                       (record.vjp().in_avals, theirs.vjp().in_avals)):
        assert [(str(a.shape), a.dtype) for a in mine] == [(str(a.shape), a.dtype) for a in jaxs]
    assert bytes(record.mlir_module_serialized) == bytes(theirs.mlir_module_serialized)
    assert bytes(record.vjp().mlir_module_serialized) == bytes(
        theirs.vjp().mlir_module_serialized)


# What each jax's own jax.export.deserialize refuses of the artifacts (shlo2jax reads them
# all: test_artifact_loads_runs_differentiates_and_vmaps); by jax (major, minor).
REFUSED = {
    (0, 7): {"jax-0.4.23", "future", "jax-0.11.2", "jax-0.12.0.1"},
    (0, 10): set(),
    (0, 11): {"jax-0.4.23", "jax-0.4.30", "jax-0.5.3", "jax-0.7.2"},
    (0, 12): {"jax-0.4.23", "jax-0.4.30", "jax-0.5.3", "jax-0.7.2"},
}
INSTALLED = tuple(int(p) for p in jax.__version__.split(".")[:2])


@pytest.mark.skipif(INSTALLED not in REFUSED, reason="no table for this jax")
def test_what_this_jax_refuses_is_read_anyway():
    """The artifacts the installed jax's deserialize refuses are the ones the table says
    (so the load test above shows what it claims), and the flatbuffer reader reads each."""
    refused = set()
    for path, _ in (p.values for p in ALL):
        data = path.read_bytes()
        record = sources_jax_export.deserialize(data)
        if export_compat.jax_reading(data, record) == "refused":
            refused.add(path.parent.name)
            with pytest.raises(Exception):
                jax_export.deserialize(bytearray(data))
            assert record.module_kept_var_idx and len(record.mlir_module_serialized)
    assert refused == REFUSED[INSTALLED]


class Pair:
    """A pytree node type of the producer's, registered for serialization there but not
    where the artifact is read."""

    def __init__(self, a, b):
        self.a, self.b = a, b


def test_a_custom_node_jax_refuses_is_read_as_its_children(monkeypatch):
    """An artifact whose pytree holds a custom node the reading jax has no serialization for:
    jax.export.deserialize refuses it (every jax); shlo2jax reads the node as a tuple of its
    children (the same flat arguments), runs and differentiates it."""
    from jax._src.export import _export
    name = "tests.Pair"
    monkeypatch.setattr(_export, "serialization_registry", dict(_export.serialization_registry))
    monkeypatch.setattr(_export, "deserialization_registry",
                        dict(_export.deserialization_registry))
    try:
        jax.tree_util.register_pytree_node(Pair, lambda p: ((p.a, p.b), None),
                                           lambda _, c: Pair(*c))
    except ValueError:
        pass  # registered by an earlier run in this process
    jax_export.register_pytree_node_serialization(
        Pair, serialized_name=name, serialize_auxdata=lambda _: b"",
        deserialize_auxdata=lambda _: None)
    x = np.arange(3, dtype=np.float32)
    spec = jax.ShapeDtypeStruct((3,), np.float32)
    exported = jax_export.export(jax.jit(lambda p: p.a * jnp.sin(p.b)))(Pair(spec, spec))
    data = exported.serialize(vjp_order=1)
    del _export.deserialization_registry[name]  # the reader's jax: not registered
    with pytest.raises(ValueError, match="unregistered type"):
        jax_export.deserialize(bytearray(data))
    function = shlo2jax.load(data).entry
    assert function.record.custom_nodes == (name,)
    np.testing.assert_allclose(function(x, x + 1), x * np.sin(x + 1), rtol=1e-6)
    grad = jax.grad(lambda a: function(a, x + 1).sum())(x)
    np.testing.assert_allclose(grad, np.sin(x + 1), rtol=1e-6)
    with pytest.raises(shlo2jax.LoadError, match="custom nodes tests.Pair"):
        function.exported  # noqa: B018 - no jax Exported can hold it here


def test_named_shardings_are_read_with_their_mesh():
    """jax 0.12's `sharded`: named shardings by index into the unique named shardings and
    abstract meshes (schema version 10 on), in the record as written."""
    path = ARTIFACTS / "jax-0.12.0.1" / "sharded.bin"
    record = export_flatbuffer.read(path.read_bytes())
    assert record.jax_version == "0.12.0.1" and record.serialization_version == 12
    rows = record.in_shardings[0]
    assert isinstance(rows, export_flatbuffer.NamedSharding)
    assert rows.partitions == (("x",), None) and rows.memory_kind == "device"
    assert rows.mesh.axis_names == ("x",) and rows.mesh.axis_sizes == (1,)
    assert rows.mesh.axis_types == ("auto",) and rows.mesh.device[2] == "cpu"
    assert record.in_shardings[1] is None and record.out_shardings == (rows, None)
    assert record.vjp.in_shardings[0] == rows


MLP = ARTIFACTS / "jax-0.10.2" / "mlp.bin"
OLDEST = ARTIFACTS / "jax-0.4.23" / "mlp.bin"
NEWEST = ARTIFACTS / "jax-0.12.0.1" / "mlp.bin"
WRITERS3 = [MLP, OLDEST, NEWEST]
WRITERS3_IDS = ["jax-0.10.2", "jax-0.4.23", "jax-0.12.0.1"]


@pytest.mark.parametrize("path", WRITERS3, ids=WRITERS3_IDS)
def test_load_never_asks_jax_to_read_the_artifact(path, monkeypatch):
    """Load, call, grad and vmap use neither jax.export.deserialize nor a jax Exported."""
    from jax._src.export import _export, serialization

    def refuse(*_, **__):
        raise AssertionError("jax.export was asked")
    for module in (jax_export, serialization):
        monkeypatch.setattr(module, "deserialize", refuse)
    monkeypatch.setattr(_export.Exported, "__init__", refuse)
    function = shlo2jax.load(path.read_bytes()).entry
    golden = _golden(path)
    _check_forward(function, golden)
    _check_grad(function, golden)
    _check_vmap(function, golden)
    assert function.arg_names and function.signature


@pytest.mark.parametrize("path", WRITERS3, ids=WRITERS3_IDS)
def test_exported_of_the_installed_jax(path):
    """`Function.exported`, on request: a jax Exported of the installed jax (jax's
    own reading where it reads the bytes right, else made from the record's fields), which
    jax calls and serializes again."""
    golden = _golden(path)
    program = shlo2jax.load(path.read_bytes())
    exported = program.exported
    assert isinstance(exported, jax_export.Exported)
    assert exported is program.exported  # made once
    args = jax.tree_util.tree_unflatten(exported.in_tree, _inputs(golden))[0]
    np.testing.assert_allclose(exported.call(*args), _outputs(golden)[0], rtol=1e-5, atol=1e-6)
    assert [str(a) for a in exported.vjp().in_avals] == [
        str(jax.core.ShapedArray(a.shape, a.dtype)) for a in program.entry.record.vjp().in_avals]


@pytest.mark.parametrize("cut", [0.5, 0.9, 0.99])
@pytest.mark.parametrize("path", WRITERS3, ids=WRITERS3_IDS)
def test_truncated_artifact_is_a_load_error(path, cut):
    data = path.read_bytes()
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
    """Every 4-byte window of the header and tables overwritten: the reader gives a record
    or a LoadError, never another exception (a malformed offset is read bounds-checked)."""
    clean = MLP.read_bytes()
    for at in range(0, 400, 4):
        data = bytearray(clean)
        data[at:at + 4] = b"\xf0\xff\xff\x0f"
        try:
            sources_jax_export.deserialize(bytes(data))
        except shlo2jax.LoadError:
            pass


@pytest.mark.parametrize("path", WRITERS3 + [ARTIFACTS / "jax-0.12.0.1" / "sharded.bin"],
                         ids=WRITERS3_IDS + ["jax-0.12.0.1-sharded"])
def test_corrupt_artifacts_load_or_raise_load_error(path):
    """Windows of the tables overwritten: load gives a program or a LoadError, never another
    exception."""
    clean = path.read_bytes()
    root = int.from_bytes(clean[:4], "little")
    for at in list(range(0, 240, 8)) + list(range(max(0, root - 160), root + 96, 4)):
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
    record = sources_jax_export.deserialize(MLP.read_bytes())
    module = bytes(record.mlir_module_serialized)
    written = sources_jax_export.vhlo_version(module)
    old = ("StableHLO_v" + ".".join(map(str, written))).encode()
    new = b"StableHLO_v9" + old[len(b"StableHLO_v9"):]  # the same length: v9.x.y
    assert b"tanh_v2" in module
    future = module.replace(old, new, 1).replace(b"tanh_v2", b"tanh_v9")
    with pytest.raises(shlo2jax.LoadError, match=r"(?s)StableHLO v9\..*newer than jaxlib .* reads"
                       r".*tanh_v9"):
        shlo2jax.load(dataclasses.replace(record, mlir_module_serialized=future))
    # the version alone: read
    shlo2jax.load(dataclasses.replace(record, mlir_module_serialized=module.replace(old, new, 1)))


def test_unknown_calling_convention_is_a_load_error():
    record = sources_jax_export.deserialize(MLP.read_bytes())
    with pytest.raises(shlo2jax.LoadError, match="calling convention 11"):
        shlo2jax.load(dataclasses.replace(record, calling_convention_version=11))


def test_vhlo_version_of_each_writer():
    """The producer string of each writer's module: VHLO 0.9.0 (jax 0.4.2x, 0.4.30) up to
    StableHLO 1.18 (jax 0.11.2, 0.12.0.1)."""
    versions = {}
    for path, _ in (p.values for p in ALL):
        record = export_flatbuffer.read(path.read_bytes())
        versions[path.parent.name] = sources_jax_export.vhlo_version(bytes(record.module))
    assert versions["jax-0.4.23"] == (0, 9, 0)
    assert versions["jax-0.12.0.1"] >= (1, 18, 0)
    assert all(v is not None and v >= (0, 9, 0) for v in versions.values())


def test_effects_are_kept_by_type_name():
    """Effects are serialized as their class names (no public jax API exports one, so no
    artifact here has one): the record keeps the names, and loading and calling need no
    effect object (the module's tokens are the calling convention); a jax Exported of the
    record makes a registered effect again and names an unknown one in a LoadError."""
    record = sources_jax_export.deserialize(MLP.read_bytes())
    ordered = "<class 'jax._src.debugging.OrderedDebugEffect'>"
    unknown = "<class 'mine.Effect'>"
    with_names = dataclasses.replace(record, ordered_effects=(ordered,),
                                     mlir_module_serialized=bytes(record.mlir_module_serialized))
    assert with_names.serialized is None  # (stale beside other module bytes)
    exported = export_compat.jax_exported(with_names)
    assert [str(type(e)) for e in exported.ordered_effects] == [ordered]
    odd = dataclasses.replace(with_names, unordered_effects=(unknown,))
    function = shlo2jax.load(odd).entry
    assert function.record.unordered_effects == (unknown,)
    _check_forward(function, _golden(MLP))
    with pytest.raises(shlo2jax.LoadError, match="effect <class 'mine.Effect'>"):
        function.exported  # noqa: B018


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
    reader does not know: a LoadError naming both."""
    data = _flatbuffer(31, lambda b: b.PrependUint32Slot(30, 7, 0))
    with pytest.raises(export_flatbuffer.NewerThanReader, match=r"no input avals.*\[30\]"):
        export_flatbuffer.read(data)
    with pytest.raises(shlo2jax.LoadError):
        shlo2jax.load(data)


def test_unknown_slots_alone_are_read_past(monkeypatch):
    """Fields a newer jax adds after those known are read past where the known ones are
    there: a reader that knows the fields up to jax 0.10 (26) reads what jax 0.11 on write
    (its jax_version is slot 26)."""
    path = ARTIFACTS / "jax-0.12.0.1" / "mlp.bin"
    assert export_flatbuffer.read(path.read_bytes()).jax_version == "0.12.0.1"
    monkeypatch.setattr(export_flatbuffer, "KNOWN_SLOTS", export_flatbuffer.JAX_VERSION)
    record = export_flatbuffer.read(path.read_bytes())
    assert record.unknown_slots == (export_flatbuffer.JAX_VERSION,)
    program = shlo2jax.load(sources_jax_export.from_serialized(record))
    _check_forward(program.entry, _golden(path))
