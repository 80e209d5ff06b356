"""A VHLO artifact newer than the installed jaxlib reads is renamed to the older ops where
its newer ones say nothing their older forms cannot (shlo2jax.sources.vhlo_downgrade): jax
0.12's artifacts (StableHLO 1.18: custom_call_v2, composite_v2) load on older jaxlibs;
what really uses a newer feature is refused naming the op and the feature; malformed input
is a LoadError. Inputs: tests/vhlo/downgrade/ (made by tests/vhlo/make_downgrade_inputs.py
with jax 0.12)."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

import shlo2jax
from shlo2jax.compat import make_ir_context
from shlo2jax.errors import LoadError
from shlo2jax.sources import export_flatbuffer, vhlo_downgrade
from shlo2jax.sources.mlir import NewerThanJaxlib, vhlo_version

DATA = pathlib.Path(__file__).parents[1] / "vhlo" / "downgrade"
READABLE = tuple(int(x) for x in stablehlo.get_current_version().split("."))


def _knows(op: str) -> bool:
    context = make_ir_context()
    context.dialects["vhlo"]  # noqa: B018
    return context.is_registered_operation(op)


def _module_bytes(name: str) -> bytes:
    """The VHLO artifact itself (a jax.export artifact's module, read by shlo2jax's own
    reader: jax 0.7.2's `export.deserialize` refuses jax 0.12's serialization version)."""
    data = (DATA / name).read_bytes()
    if name.endswith(".bin"):
        return bytes(export_flatbuffer.read(data).module)
    return data


def test_the_inputs_are_newer_than_the_oldest_jaxlib_tested():
    # jax 0.12 writes StableHLO 1.18 (its 4-week compatibility window): newer than 0.10.2's
    # 1.17 and 0.7.2's 1.13, so the loads below go through the downgrade there
    assert vhlo_version(_module_bytes("jax012_shape_poly.bin")) == (1, 18, 0)
    assert vhlo_version(_module_bytes("jax012_composite_mlp.bin")) == (1, 18, 0)


def test_shape_polymorphic_jax012_export_loads_and_computes():
    # its shape assertions are vhlo.custom_call_v2 with result_tilings = []
    program = shlo2jax.load((DATA / "jax012_shape_poly.bin").read_bytes())
    for n in (1, 5):
        x = np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)
        got = np.asarray(program["main"](x))
        np.testing.assert_allclose(got, np.sin(x) * n + x.sum(axis=1, keepdims=True),
                                   rtol=1e-6, atol=1e-6)


def test_jax012_mlp_with_a_composite_loads_and_computes():
    program = shlo2jax.load((DATA / "jax012_composite_mlp.bin").read_bytes())
    assert "stablehlo.composite" in str(program.mlir_module)
    rng = np.random.default_rng(0)
    x, w1, b1, w2, b2 = (rng.standard_normal(s).astype(np.float32)
                         for s in ((4, 3), (3, 5), (5,), (5, 2), (2,)))
    got = np.asarray(program["main"](x, w1, b1, w2, b2))
    np.testing.assert_allclose(got, np.maximum(x @ w1 + b1, 0) @ w2 + b2, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(_knows("vhlo.custom_call_v2"), reason="this jaxlib reads "
                    "custom_call_v2 (StableHLO >= 1.18): nothing to refuse")
def test_result_tilings_is_refused_by_name():
    with pytest.raises(NewerThanJaxlib) as info:
        shlo2jax.load((DATA / "result_tilings.mlir.bc").read_bytes())
    assert "(operation vhlo.custom_call_v2 with result_tilings (StableHLO 1.18.0), which " \
           "vhlo.custom_call_v1 lacks)" in str(info.value)


@pytest.mark.skipif(_knows("vhlo.composite_v2"),
                    reason="this jaxlib reads composite_v2 (StableHLO >= 1.14): nothing to refuse")
def test_composite_regions_are_refused_by_name():
    with pytest.raises(NewerThanJaxlib) as info:
        shlo2jax.load((DATA / "composite_regions.mlir.bc").read_bytes())
    assert "(operation vhlo.composite_v2 with composite_regions (StableHLO 1.14.0), which " \
           "vhlo.composite_v1 lacks)" in str(info.value)


@pytest.mark.skipif(not _knows("vhlo.composite_v2"),
                    reason="this jaxlib lacks composite_v2: the regions are refused instead")
def test_composite_regions_load_where_jaxlib_reads_composite_v2():
    # on 0.10.2 only custom_call_v2 is renamed; composite_v2 (regions and all) stays
    program = shlo2jax.load((DATA / "composite_regions.mlir.bc").read_bytes())
    assert float(program["main"](np.float32(2.5))) == 2.5


def _as_stablehlo(data: bytes) -> str:
    with make_ir_context() as context:
        module = stablehlo.deserialize_portable_artifact(context, data)
        return module.operation.get_asm(enable_debug_info=False, large_elements_limit=None)


def _as_vhlo(data: bytes) -> str:
    with make_ir_context() as context:
        context.dialects["vhlo"]  # noqa: B018
        return ir.Module.parse(data).operation.get_asm(
            print_generic_op_form=True, enable_debug_info=False, large_elements_limit=None)


NEWER_THAN_1_17 = ("vhlo.custom_call_v2", "vhlo.composite_v2")


@pytest.mark.skipif(not _knows("vhlo.custom_call_v2"),
                    reason="forced on a jaxlib that reads custom_call_v2 (jax >= 0.11), which "
                           "can read the artifact before and after")
@pytest.mark.parametrize("name", ["jax012_shape_poly.bin", "jax012_composite_mlp.bin",
                                  "release_subset.1_18_0.mlir.bc",
                                  "release_subset.1_20_0.mlir.bc"])
def test_forced_rewrite_is_the_same_module(name):
    """The rewrite forced (the newer ops treated as unknown) on a jaxlib that reads both:
    the same StableHLO module as the original, and the same VHLO as StableHLO's own
    downgrade (`serialize_portable_artifact_str` at 1.17.0: custom_call_v2 -> v1)."""
    data = _module_bytes(name)
    forced = vhlo_downgrade.downgrade(data, "1.13.0", lambda op: op not in NEWER_THAN_1_17)
    assert set(forced.renamed) <= set(NEWER_THAN_1_17) and forced.renamed
    assert vhlo_version(forced.data) == (1, 13, 0)
    assert _as_stablehlo(forced.data) == _as_stablehlo(data)
    # against StableHLO's downgrade to 1.17 (it keeps composite_v2, 1.14) of the same
    # StableHLO module written at 1.18 (the module printed and read again: a function's
    # empty arg_attrs come back as [{}])
    text = _as_stablehlo(data)
    at_1_18 = bytes(stablehlo.serialize_portable_artifact_str(text, "1.18.0"))
    to_1_17 = vhlo_downgrade.downgrade(at_1_18, "1.17.0", lambda op: op != "vhlo.custom_call_v2")
    theirs = bytes(stablehlo.serialize_portable_artifact_str(text, "1.17.0"))
    assert _as_vhlo(to_1_17.data) == _as_vhlo(theirs)
    assert '"vhlo.custom_call_v2"' not in _as_vhlo(to_1_17.data)


def test_forced_rewrite_refuses_what_has_no_older_form():
    data = _module_bytes("result_tilings.mlir.bc")
    with pytest.raises(vhlo_downgrade.NewerFeature, match="result_tilings"):
        vhlo_downgrade.downgrade(data, "1.17.0", lambda op: op != "vhlo.custom_call_v2")
    data = _module_bytes("composite_regions.mlir.bc")
    with pytest.raises(vhlo_downgrade.NewerFeature, match="composite_regions"):
        vhlo_downgrade.downgrade(data, "1.13.0", lambda op: op not in NEWER_THAN_1_17)
    data = (DATA.parent / "stablehlo_legalize_to_vhlo.1_19_0.mlir.bc").read_bytes()
    with pytest.raises(vhlo_downgrade.NewerFeature,
                       match=r"operation vhlo\.collective_reduce_v1 \(the op collective_reduce"):
        vhlo_downgrade.downgrade(data, "1.18.0", lambda op: op != "vhlo.collective_reduce_v1")


def test_reader_errors_are_named():
    assert vhlo_downgrade.describe_reader_error("error: unknown vhlo attribute code: 23") == \
        "attribute #vhlo.replica_group_mesh_axes_v1 (replica groups named by mesh axes), " \
        "StableHLO 1.16.0"
    assert vhlo_downgrade.describe_reader_error("unknown vhlo type code: 42") == \
        "type !vhlo.future_v1, StableHLO 1.15.0"
    assert vhlo_downgrade.describe_reader_error("something else") is None


def _corruptions(data: bytes):
    """Truncations and single-byte changes across the file (the header, the dialect
    section, the middle, the string and properties sections at the end)."""
    for cut in (5, 12, 30, len(data) // 3, len(data) - 200, len(data) - 40, len(data) - 1):
        yield f"truncated at {cut}", data[:cut]
    for at in (4, 20, 40, 60, len(data) // 2, len(data) - 150, len(data) - 60, len(data) - 3):
        for value in (0x00, 0xFF):
            yield f"byte {at} = {value:#x}", data[:at] + bytes([value]) + data[at + 1:]


def test_malformed_newer_artifact_is_a_load_error():
    data = _module_bytes("jax012_shape_poly.bin")
    registered = lambda op: op not in NEWER_THAN_1_17  # noqa: E731 - as an old jaxlib
    outcomes = {"load error": 0, "loaded": 0}
    for what, bad in _corruptions(data):
        try:
            vhlo_downgrade.downgrade(bad, "1.13.0", registered)
        except LoadError:
            pass  # (NewerFeature is one)
        except Exception as e:  # noqa: BLE001 - the failure this test looks for
            pytest.fail(f"{what}: the downgrade raised {type(e).__name__}: {e}")
        try:
            shlo2jax.load(bad)
            outcomes["loaded"] += 1  # (a byte that changes nothing that matters)
        except LoadError:
            outcomes["load error"] += 1
        except Exception as e:  # noqa: BLE001
            pytest.fail(f"{what}: shlo2jax.load raised {type(e).__name__}: {e}")
    assert outcomes["load error"] >= 7  # every truncation at least


def test_non_bytecode_is_a_load_error():
    for bad in (b"", b"ML\xefR", b"ML\xefR\x0d", b"not bytecode"):
        with pytest.raises(LoadError):
            vhlo_downgrade.downgrade(bad, "1.17.0", lambda op: True)
