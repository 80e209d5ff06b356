"""torch.export `.pt2` archives (shlo2jax/sources/pt2.py). The step after torch (torchax's
StableHLO and the state dict -> a function with its parameters bound) is tested without torch
from each corpus entry's committed lowering (tests/corpus/pt2/<name>/lowered/, written by the
producer with `sources.pt2.lower`): `shlo2jax.load("model.pt2")` with the torch front end
replaced by that lowering must give the producer's outputs and gradients. The front end itself
(torch.export.load, torchax) is tested where torch and torchax are installed."""

import importlib.util
import pathlib
import struct
import sys

import numpy as np
import pytest

import shlo2jax
from corpus import checks
from corpus import entry as corpus_entry
from shlo2jax import sources
from shlo2jax.errors import LoadError
from shlo2jax.sources import pt2
from shlo2jax.tools.cli import main

CORPUS = pathlib.Path(__file__).resolve().parents[1] / "corpus" / "pt2"
NAMES = sorted(p.parent.name for p in CORPUS.glob("*/model.pt2"))
FORWARD_ARGS = {"mlp": ("input",), "cnn_bn": ("image",), "transformer": ("tokens",),
                "buffers": ("x", "shift")}
HAS_TORCHAX = all(importlib.util.find_spec(m) is not None for m in ("torch", "torchax"))
needs_torch = pytest.mark.skipif(not HAS_TORCHAX, reason="needs torch and torchax (pip install "
                                 "\"shlo2jax[torch]\"): the .pt2 front end")


def _committed(name) -> pt2.Lowered:
    return pt2.Lowered(**corpus_entry.read_lowering(CORPUS / name))


def _load_committed(name, monkeypatch):
    """`shlo2jax.load` of the entry's model.pt2, its torch step replaced by the committed
    lowering."""
    monkeypatch.setattr(pt2, "lower", lambda data, where: _committed(name))
    return shlo2jax.load(str(CORPUS / name / "model.pt2"))


def test_the_corpus_has_the_entries():
    assert set(NAMES) == set(FORWARD_ARGS)


@pytest.mark.parametrize("name", NAMES)
def test_a_pt2_is_detected_by_its_bytes(name):
    assert sources.detect((CORPUS / name / "model.pt2").read_bytes()).name == "pt2"


def test_another_zip_is_not_a_pt2(tmp_path):
    import zipfile
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as z:
        z.writestr("notes/readme.txt", "not torch")
    data = (tmp_path / "other.zip").read_bytes()
    assert not pt2.is_pt2(data) and sources.detect(data).name != "pt2"
    assert not pt2.is_pt2(pt2.ZIP_MAGIC + b"cut short")


@pytest.mark.parametrize("name", NAMES)
def test_the_lowering_assembles_with_the_state_dict_bound(name, monkeypatch):
    program = _load_committed(name, monkeypatch)
    fn = program["forward"]
    assert program.entry is fn
    lowering = _committed(name)
    kinds = {}
    for kind, bound, _ in lowering.arguments:
        kinds.setdefault(kind, []).append(bound)
    assert list(fn.params) == kinds["param"]
    assert sorted(fn.constants) == sorted(kinds.get("constant", []))
    assert fn.arg_names == FORWARD_ARGS[name]
    for bound, value in {**fn.params, **fn.constants}.items():
        np.testing.assert_array_equal(np.asarray(value), lowering.values[bound])


@pytest.mark.parametrize("check", ["forward", "grad", "vmap", "jit_eager"])
@pytest.mark.parametrize("name", NAMES)
def test_the_lowering_gives_the_producers_results(name, check, monkeypatch):
    e = corpus_entry.Entry(CORPUS / name)
    fn = _load_committed(name, monkeypatch)["forward"]
    result = checks.run(e, check, fn)
    assert result.ok, f"{e.id} {check}: {result.message}"


def test_batch_norm_statistics_and_buffers_are_constants(monkeypatch):
    fn = _load_committed("cnn_bn", monkeypatch)["forward"]
    assert {"bn.running_mean", "bn.running_var"} <= set(fn.constants)
    assert {"bn.weight", "bn.bias"} <= set(fn.params)
    buffers = _load_committed("buffers", monkeypatch)["forward"]
    assert sorted(buffers.constants) == ["center", "gain"]  # persistent and not
    assert sorted(buffers.params) == ["proj.bias", "proj.weight"]


def test_other_weights_change_the_result(monkeypatch):
    e = corpus_entry.Entry(CORPUS / "mlp")
    fn = _load_committed("mlp", monkeypatch)["forward"]
    doubled = {n: 2 * v for n, v in fn.params.items() if n.endswith(".bias")}
    base, moved = fn(*e.args), fn.with_params(doubled)(*e.args)
    assert not np.allclose(np.asarray(base), np.asarray(moved))


def test_a_dict_result_keeps_torchs_keys(monkeypatch):
    e = corpus_entry.Entry(CORPUS / "buffers")
    out = _load_committed("buffers", monkeypatch)["forward"](*e.args)
    assert list(out) == ["norm", "y"]


def test_a_lowering_that_does_not_parse_is_refused():
    broken = _committed("mlp")._replace(module=b"ML\xefR cut short")
    with pytest.raises(LoadError, match="model.pt2: torchax's StableHLO .* does not parse"):
        pt2.of_lowered(broken, "model.pt2")


# -- without torch

def test_without_torch_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # (import torch raises ImportError)
    path = str(CORPUS / "mlp" / "model.pt2")
    with pytest.raises(LoadError, match=r'needs torch and torchax .*pip install "shlo2jax\[torch\]"'):
        shlo2jax.load(path)


def test_without_torch_the_cli_says_so_in_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)
    assert main(["info", str(CORPUS / "mlp" / "model.pt2")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert 'pip install "shlo2jax[torch]"' in err


# -- the torch front end

@needs_torch
@pytest.mark.parametrize("name", NAMES)
def test_the_front_end_gives_the_committed_lowering(name):
    data = (CORPUS / name / "model.pt2").read_bytes()
    got, want = pt2.lower(data, name), _committed(name)
    assert (got.arguments, got.inputs, got.outputs) == (want.arguments, want.inputs,
                                                          want.outputs)
    assert sorted(got.values) == sorted(want.values)
    for bound, value in got.values.items():
        np.testing.assert_array_equal(value, want.values[bound])


@needs_torch
def test_an_op_torchax_cannot_lower_is_refused_by_name_and_place(tmp_path):
    import torch

    @torch.library.custom_op("shlo2jax_tests::twice", mutates_args=())
    def twice(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @twice.register_fake
    def _(x):
        return torch.empty_like(x)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)

        def forward(self, x):
            return twice(self.fc(x))

    path = tmp_path / "custom.pt2"
    torch.export.save(torch.export.export(Model().eval(), (torch.ones(2, 4),)), str(path))
    with pytest.raises(LoadError) as raised:
        shlo2jax.load(str(path))
    message = str(raised.value)
    assert "\n" not in message
    assert "torchax has no lowering for torch op shlo2jax_tests.twice.default" in message
    assert f"{pathlib.Path(__file__).name}:" in message  # the forward's line


def _cut_before_its_member_list(data: bytes) -> bytes:
    """The archive less its central directory (whose offset its end record holds)."""
    end = data.rfind(b"PK\x05\x06")
    return data[:struct.unpack_from("<I", data, end + 16)[0]]


def test_an_archive_cut_short_is_still_a_pt2():
    data = (CORPUS / "mlp" / "model.pt2").read_bytes()
    assert sources.detect(_cut_before_its_member_list(data)).name == "pt2"


@needs_torch
def test_a_damaged_archive_is_refused(tmp_path):
    data = (CORPUS / "mlp" / "model.pt2").read_bytes()
    cut = tmp_path / "cut.pt2"
    cut.write_bytes(_cut_before_its_member_list(data))
    with pytest.raises(LoadError, match="cut.pt2: torch.export.load cannot read"):
        shlo2jax.load(str(cut))


@needs_torch
def test_lowering_leaves_jax_x64_as_it_was():
    import jax
    before = jax.config.jax_enable_x64
    pt2.lower((CORPUS / "mlp" / "model.pt2").read_bytes(), "mlp")
    assert jax.config.jax_enable_x64 == before


def test_the_cli_runs_a_pt2_by_its_argument_names(monkeypatch, capsys, tmp_path):
    e = corpus_entry.Entry(CORPUS / "buffers")
    monkeypatch.setattr(pt2, "lower", lambda data, where: _committed("buffers"))
    np.savez(tmp_path / "args.npz", x=e.args[0], shift=e.args[1])
    out = tmp_path / "out.npz"
    assert main(["run", str(CORPUS / "buffers" / "model.pt2"), "--inputs",
                 str(tmp_path / "args.npz"), "--output", str(out)]) == 0
    with np.load(out) as got:
        assert sorted(got) == ["norm", "y"]
        np.testing.assert_allclose(got["norm"], e.outputs[0], rtol=1e-5, atol=1e-6)


@needs_torch
def test_a_dynamic_batch_dimension_stays_dynamic(tmp_path):
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh()).eval()
    batch = torch.export.Dim("batch", min=2, max=64)
    exported = torch.export.export(model, (torch.ones(5, 4),), dynamic_shapes=({0: batch},))
    torch.export.save(exported, str(tmp_path / "dynamic.pt2"))
    forward = shlo2jax.load(str(tmp_path / "dynamic.pt2"))["forward"]
    assert forward.signature.startswith("@forward(input: f32[?,4])")
    for rows in (3, 7):
        x = np.random.default_rng(rows).standard_normal((rows, 4)).astype(np.float32)
        want = model(torch.from_numpy(x)).detach().numpy()
        np.testing.assert_allclose(np.asarray(forward(x)), want, rtol=1e-5, atol=1e-6)
