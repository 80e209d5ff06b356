"""Every use of a jax internal lives here, so a JAX upgrade touches one file."""

from __future__ import annotations


def make_ir_context():
    """An MLIR context with every dialect jax registers (func, stablehlo, chlo, sdy, mhlo, ...)."""
    from jax._src.interpreters import mlir as jax_mlir

    context = jax_mlir.make_ir_context()
    # The conformance `check` and `interpreter` dialects are not registered in jaxlib.
    context.allow_unregistered_dialects = True
    return context
