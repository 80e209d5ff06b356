"""Quantized element types and ops (`!quant.uniform`)."""

from shlo2jax.types import UnsupportedTypeError


def parse_quantized_element(spelling: str):
    raise UnsupportedTypeError(f"quantized element type {spelling}")
