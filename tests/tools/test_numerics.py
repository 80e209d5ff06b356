"""shlo2jax.tools.numerics: `error_figures` (the per-op profile's figures) gives what
`array_errors` gives, and `relative_errors` the elements its max rel is the largest of."""

import ml_dtypes
import numpy as np
import pytest

from shlo2jax.tools.numerics import array_errors, error_figures, relative_errors


def _pairs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 50)).astype(np.float32)
    near = (x * (1 + 1e-6 * rng.standard_normal(x.shape))).astype(np.float32)
    far = x.copy()
    far[1, 7] = -far[1, 7]
    wide = x.astype(np.float64) * (1 + 1e-9 * rng.standard_normal(x.shape))
    nan = near.copy()
    nan[0, 0] = np.nan
    return {"near": (x, near), "far": (x, far), "f64 reference": (x, wide),
            "equal": (x, x.copy()), "a nan on one side": (x, nan),
            "int": (np.arange(6), np.arange(6)[::-1].copy()),
            "f16 strided": (x[:, ::2].astype(np.float16), near[:, ::2].astype(np.float16)),
            "bf16, signs apart": (x.astype(ml_dtypes.bfloat16), -near.astype(ml_dtypes.bfloat16)),
            "f32 around zero": (x * 1e-40, -near * 1e-40),   # subnormals, -0 and +0
            "f64": (x.astype(np.float64), wide),
            "signed zeros": (np.array([0.0, -0.0, 1.0], np.float32),
                             np.array([-0.0, 0.0, 1.0000001], np.float32))}


@pytest.mark.parametrize("name", list(_pairs()))
@pytest.mark.parametrize("rtol, atol, max_ulp", [(1e-4, 1e-6, None), (0.0, 0.0, 2),
                                                 (1e-7, 0.0, None)])
def test_error_figures_are_array_errors_figures(name, rtol, atol, max_ulp):
    a, b = _pairs()[name]
    e = array_errors(a, b, rtol, atol, max_ulp)
    assert error_figures(a, b, rtol, atol, max_ulp) == (e.max_rel, e.max_ulp, e.ok)


def test_relative_errors_are_those_of_the_finite_elements():
    a = np.array([1.0, 2.0, np.inf, -4.0], np.float32)
    b = np.array([1.0, 2.5, np.inf, 4.0], np.float32)
    rel = relative_errors(a, b)
    assert rel.tolist() == [0.0, 0.2, 2.0]
    assert rel.max() == array_errors(a, b, 1e-4, 1e-6).max_rel
