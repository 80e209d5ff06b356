"""shlo2jax: StableHLO programs as ordinary JAX functions."""

from shlo2jax.compare import compare  # the function; the module stays importable by name
from shlo2jax.dynamic import ShapeError
from shlo2jax.errors import (ElidedDataError, HostIOError, LoadError, Shlo2JaxError,
                             TranslationError, UnsupportedError)
from shlo2jax.host_transfers import HostIO, call_with_io, host_io
from shlo2jax.probes import ProbeKey, probe
from shlo2jax.loader import load
from shlo2jax.program import Function, Program
from shlo2jax.registry import register_composite, register_custom_call, register_op
from shlo2jax.translate import TOKEN, Token

__version__ = "0.1.0"

__all__ = [
    "load", "compare", "Program", "Function", "register_op", "register_custom_call",
    "register_composite", "TOKEN", "Token",
    "host_io", "HostIO", "HostIOError", "call_with_io", "probe", "ProbeKey",
    "Shlo2JaxError", "LoadError", "ElidedDataError", "UnsupportedError", "TranslationError", "ShapeError",
]
