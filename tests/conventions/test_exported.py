"""A jax function exported with jax.export and loaded back behaves like the original:
same outputs, same jax.grad, same jax.vmap; the live `Exported` is read into shlo2jax's
record of it (`sources.jax_export.ExportRecord`) through its public attributes, whichever
jax (0.7 to 0.12) made it."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export as jax_export
from jax import lax

import shlo2jax
from shlo2jax.sources import export_compat
from shlo2jax.sources import jax_export as sources_jax_export


@jax.jit
def _row_max(h):
    return jnp.max(h, axis=-1)  # a nested jit: a func.call in the export


def model(w, x):
    def body(i, carry):
        return carry * 0.9 + jnp.tanh(carry @ w)
    h = lax.fori_loop(0, 3, body, x)  # a counted while loop
    h = lax.cond(jnp.sum(h) > 0, lambda h: h * 2, lambda h: h - 1, h)
    return jnp.sum(_row_max(h))


W = (np.random.default_rng(0).standard_normal((4, 4)) * 0.5).astype(np.float32)
X = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)


@pytest.fixture(scope="module")
def exported():
    spec_w = jax.ShapeDtypeStruct(W.shape, jnp.float32)
    spec_x = jax.ShapeDtypeStruct(X.shape, jnp.float32)
    exported = jax_export.export(jax.jit(model))(spec_w, spec_x)
    text = exported.mlir_module()
    for op in ("stablehlo.while", "stablehlo.case", "stablehlo.reduce", "stablehlo.dot_general",
               "call @"):
        assert op in text, op  # the export really contains what this test is about
    return exported


@pytest.fixture(scope="module")
def loaded(exported):
    return shlo2jax.load(exported)


def test_outputs(loaded):
    np.testing.assert_allclose(loaded(W, X), model(W, X), rtol=1e-6)


def test_grad(loaded):
    expected = jax.grad(model, argnums=(0, 1))(W, X)
    actual = jax.grad(loaded, argnums=(0, 1))(W, X)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


def test_vmap(loaded):
    xs = np.stack([X, -X, 2 * X])
    expected = jax.vmap(model, in_axes=(None, 0))(W, xs)
    np.testing.assert_allclose(jax.vmap(loaded, in_axes=(None, 0))(W, xs), expected, rtol=1e-6)


def test_jit_of_grad(loaded):
    expected = jax.jit(jax.grad(model))(W, X)
    np.testing.assert_allclose(jax.jit(jax.grad(loaded))(W, X), expected, rtol=1e-5, atol=1e-6)


def test_live_exported_is_read_into_a_record(exported, loaded):
    """The record holds the live Exported's fields, in shlo2jax's terms (avals as
    ShapeDtypeStructs, effects by name, checks as (kind, target)); `exported` gives the
    user's Exported back."""
    record = loaded.entry.record
    assert isinstance(record, sources_jax_export.ExportRecord)
    assert record.origin is exported and loaded.exported is exported
    assert record.serialization_version is None and record.serialized is None
    for field in ("fun_name", "in_tree", "out_tree", "nr_devices", "calling_convention_version",
                  "uses_global_constants"):
        assert getattr(record, field) == getattr(exported, field), field
    assert record.platforms == tuple(exported.platforms)
    assert record.module_kept_var_idx == tuple(exported.module_kept_var_idx)
    assert [(a.shape, a.dtype) for a in record.in_avals] == [
        (a.shape, a.dtype) for a in exported.in_avals]
    assert all(isinstance(a, jax.ShapeDtypeStruct) for a in record.in_avals + record.out_avals)
    assert record.ordered_effects == () and record.disabled_checks == ()
    assert bytes(record.mlir_module_serialized) == bytes(exported.mlir_module_serialized)
    assert record.has_vjp() == exported.has_vjp()
    assert loaded.entry.arg_names and "[jax.export model]" in loaded.entry.signature


def test_live_exported_with_disabled_checks_and_polymorphic_shape():
    """A live Exported with a symbolic dimension and a disabled safety check: its record
    keeps the symbolic shape and the check, and the program runs at two batch sizes."""
    b, = jax_export.symbolic_shape("b")
    exported = jax_export.export(
        jax.jit(lambda x: jnp.sin(x) * 2.0),
        disabled_checks=[jax_export.DisabledSafetyCheck.custom_call("my_target")])(
            jax.ShapeDtypeStruct((b, 3), jnp.float32))
    record = export_compat.record_of(exported)
    assert record.disabled_checks == (("custom_call", "my_target"),)
    assert str(record.in_avals[0].shape) == str(exported.in_avals[0].shape)
    program = shlo2jax.load(exported)
    for n in (2, 5):
        x = np.ones((n, 3), np.float32)
        np.testing.assert_allclose(program(x), np.sin(x) * 2.0, rtol=1e-6)


@pytest.mark.parametrize("kept", [(0, 2), (1, 0), (1, 1)])
def test_kept_arguments_outside_the_export_are_a_load_error(exported, kept):
    """A damaged artifact (`shlo2jax mutate`: a flipped byte of a corpus export) may name kept
    arguments the export does not have: refused at load, not an IndexError at the call."""
    damaged = dataclasses.replace(exported, module_kept_var_idx=kept)
    with pytest.raises(shlo2jax.LoadError, match=r"module_kept_var_idx \[.*\] is not an "
                                                 r"increasing list of the indices of its 2"):
        shlo2jax.load(damaged)
