"""A backend from what a user names it: `cpu`, `interpreter`, ..., `python=PATH[:PLATFORM]`."""

from __future__ import annotations

from shlo2jax.tools.compare.backends import (BUILTIN_BACKENDS, Backend, CallableBackend,
                                             Float64Backend, InterpreterBackend,
                                             TranslatedBackend, XlaDirectBackend)
from shlo2jax.tools.compare.python_backend import PythonBackend, parse_spec


def backend(spec, interpreter_timeout: float = 600.0) -> Backend:
    """A Backend from its name (see BUILTIN_BACKENDS), `python=PATH[:PLATFORM]` (another
    Python's jax: `python_backend.PythonBackend`), or a Backend / (name, callable).
    `interpreter_timeout`: the seconds a child (the interpreter's, another Python's) may run."""
    if isinstance(spec, str) and spec.startswith("python="):
        python, platform = parse_spec(spec)
        return PythonBackend(python, platform, name=spec, timeout=interpreter_timeout)
    if isinstance(spec, Backend):
        return spec
    if isinstance(spec, tuple) and len(spec) == 2 and callable(spec[1]):
        return CallableBackend(*spec)
    if spec in ("cpu", "gpu", "tpu"):
        return TranslatedBackend(spec)
    if spec == "interpreter":
        return InterpreterBackend(interpreter_timeout)
    if spec == "xla-direct":
        return XlaDirectBackend()
    if spec == "f64":
        return Float64Backend()
    raise ValueError(f"unknown backend {spec!r}; choose from {', '.join(BUILTIN_BACKENDS)}, "
                     "python=PATH, or pass a shlo2jax.tools.compare.Backend")
