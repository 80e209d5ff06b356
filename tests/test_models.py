"""Real exported models from ../shared/models, checked against XLA compiling the same module."""

import numpy as np
import pytest

import shlo2jax
from shlo2jax.tools.inputs import seeded_inputs
from shlo2jax.tools.reference import xla_direct

pytestmark = pytest.mark.slow


def test_searchless_chess_matches_xla_direct(shared_dir):
    program = shlo2jax.load(shared_dir / "models" / "searchless_chess_9m.mlir.bc")
    inputs = seeded_inputs(program.entry, seed=0)
    assert len(inputs) == 95 and inputs[-1].shape == (33, 79) and inputs[-1].dtype == np.int32
    actual = program(*inputs)
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = xla_direct(program)(*inputs)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        a, e = np.asarray(a), np.asarray(e)
        assert a.dtype == e.dtype and a.shape == e.shape
        assert np.all(np.isfinite(e))
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5 * np.max(np.abs(e)))


def test_resnet50_with_placeholder_weights_matches_xla_direct(shared_dir):
    path = shared_dir / "models" / "jax_resnet_50.mlir"
    with pytest.raises(shlo2jax.ElidedDataError):
        shlo2jax.load(path)
    program = shlo2jax.load(path, placeholder_data=True, seed=0)
    inputs = seeded_inputs(program.entry, seed=0)
    actual = program(*inputs)
    expected = xla_direct(program)(*inputs)  # the module now carries the same placeholder data
    for a, e in zip(actual, expected):
        a, e = np.asarray(a), np.asarray(e)
        assert np.all(np.isfinite(e)) and np.max(np.abs(e)) > 0
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5 * np.max(np.abs(e)))
