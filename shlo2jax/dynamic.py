"""Calls of functions whose signature has `?` dimensions."""

from shlo2jax.errors import UnsupportedError


def call_dynamic(function, args):
    raise UnsupportedError([(f"func.func @{function.name}", function.definition.location,
                             "calling a function with dynamic (`?`) input dimensions is not "
                             "supported yet (shape refinement: issue 7)")])
