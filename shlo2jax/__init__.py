"""shlo2jax: StableHLO programs as ordinary JAX functions."""

from shlo2jax.errors import (ElidedDataError, HostIOError, LoadError, ShapeError,
                             Shlo2JaxError, TranslationError, UnsupportedError)
from shlo2jax.host_transfers import HostIO, call_with_io, host_io
from shlo2jax.probes import ProbeKey, probe
from shlo2jax.loader import load
from shlo2jax.options import LoadOptions
from shlo2jax.params import bind_params, lift_params
from shlo2jax.function import Function
from shlo2jax.program import Program
from shlo2jax.registry import register_composite, register_custom_call, register_op
from shlo2jax.translate import TOKEN, Token

__version__ = "0.1.0"

__all__ = [
    "load", "LoadOptions", "compare", "Program", "Function", "lift_params", "bind_params", "register_op", "register_custom_call",
    "register_composite", "TOKEN", "Token",
    "host_io", "HostIO", "HostIOError", "call_with_io", "probe", "ProbeKey",
    "Shlo2JaxError", "LoadError", "ElidedDataError", "UnsupportedError", "TranslationError", "ShapeError",
]


def __getattr__(name: str):
    # The tools load on first use, so `import shlo2jax` stays light: `shlo2jax.compare(...)`
    # (the function; its backends are in shlo2jax.tools.compare), `shlo2jax.testing`,
    # `shlo2jax.export` and `shlo2jax.tools`. (The package shlo2jax.spmd, whose
    # `shlo2jax.spmd.run_spmd` runs a grid of processes, loads with the loader.)
    if name == "compare":
        from shlo2jax.tools.compare import compare
        return compare
    if name == "testing":
        import shlo2jax.testing
        return shlo2jax.testing
    if name == "export":
        import shlo2jax.export
        return shlo2jax.export
    if name == "tools":
        import shlo2jax.tools
        return shlo2jax.tools
    raise AttributeError(f"module 'shlo2jax' has no attribute {name!r}")
