"""Real exported models from ../shared/models, checked against XLA compiling the same module."""

import numpy as np
import pytest

import shlo2jax
from shlo2jax.cli import seeded_inputs
from shlo2jax.reference import xla_direct


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
