"""Assertions for tests that compare backends (`pytest`): see `shlo2jax.tools.testing`."""

from shlo2jax.tools.testing import BackendSkippedWarning, assert_backends_agree

__all__ = ["assert_backends_agree", "BackendSkippedWarning"]
