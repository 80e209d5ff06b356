"""Seeded arguments for running a function without user data (CLI `run`, comparisons)."""

from __future__ import annotations

import numpy as np

from shlo2jax import types as T


def seeded_array(ttype: T.TensorType, rng: np.random.Generator) -> np.ndarray:
    """Floats standard normal; integers in [0, 3] so they are valid as indices and sizes."""
    dtype, shape = ttype.dtype, ttype.shape
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if T.is_integer(dtype):
        return rng.integers(0, 4, shape).astype(dtype)
    if T.is_complex(dtype):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def seeded_inputs(function, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    inputs = []
    for i, t in enumerate(function.input_types):
        if not isinstance(t, T.TensorType) or not t.is_static or t.quant is not None:
            raise ValueError(f"cannot generate a seeded value for %arg{i}: {t}; pass inputs")
        inputs.append(seeded_array(t, rng))
    return inputs
