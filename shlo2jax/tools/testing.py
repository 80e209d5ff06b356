"""Test helpers for users of shlo2jax.

    from shlo2jax.testing import assert_backends_agree

    def test_model_agrees_everywhere():
        assert_backends_agree("model.mlir", backends=["cpu", "gpu", "interpreter", "f64"],
                              rtol=1e-3, atol=1e-5)

Backends that are not present (no GPU here, an op the reference interpreter lacks) are
skipped with their reason as a warning; the test itself is skipped when fewer than
`min_backends` could run. Disagreement fails the test with the comparison table, including
the first diverging ops when `locate` is on.
"""

from __future__ import annotations

import warnings

from shlo2jax.tools.compare import DEFAULT_BACKENDS, compare


class BackendSkippedWarning(UserWarning):
    """A backend asked for in a comparison could not run here."""


def assert_backends_agree(module, backends=DEFAULT_BACKENDS, *, function=None, inputs=None,
                          seed: int = 0, rtol: float = 1e-4, atol: float = 1e-6,
                          max_ulp=None, locate: bool = True, min_backends: int = 2,
                          **option_values):
    """Runs `module` on `backends` with the same inputs; fails unless every pair agrees.
    Returns the `shlo2jax.tools.compare.Comparison`."""
    import pytest  # here: an optional dependency (the `test` extra), not the package's
    result = compare(module, backends, function=function, inputs=inputs, seed=seed, rtol=rtol,
                     atol=atol, max_ulp=max_ulp, locate=locate, **option_values)
    skipped = [r for r in result.runs.values() if r.status == "skipped"]
    for run in skipped:
        warnings.warn(f"backend {run.name} skipped: {run.reason}", BackendSkippedWarning,
                      stacklevel=2)
    ran = [r.name for r in result.runs.values() if r.status != "skipped"]
    if len(ran) < min_backends:
        reasons = "; ".join(f"{r.name}: {r.reason}" for r in skipped)
        pytest.skip(f"only {len(ran)} of the requested backends could run ({', '.join(ran)}); "
                    f"skipped: {reasons}")
    if not result.ok:
        raise AssertionError("backends disagree\n" + result.table())
    return result
