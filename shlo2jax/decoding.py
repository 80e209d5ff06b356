"""The one decode pipeline: a verified `ir.Module`, from any source, -> the decoded module.

MLIR is walked once into plain Python records (`shlo2jax.module`); CHLO ops without a
translation rule are first decomposed by jaxlib's pass, and shape-dialect ops (TensorFlow's
dynamic batch) rewritten into StableHLO (`shlo2jax.transforms.shape_legalize`); the
per-device (manual) regions of a sharded program are rewritten into the ops that run them; with `options.strict`,
every construct that cannot run is reported together, at load.
"""

from __future__ import annotations

import contextlib

from shlo2jax.errors import LoadError, UnsupportedError
from shlo2jax.memory import gc_paused
from shlo2jax.module import ModuleDef, decode_module, decode_signatures
from shlo2jax.options import LoadOptions
from shlo2jax.spmd import grid, manual_regions, mesh
from shlo2jax.transforms.chlo_legalize import legalize_chlo
from shlo2jax.transforms.shape_legalize import legalize_shapes


def decode(mlir_module, source_name: str, options: LoadOptions) -> ModuleDef:
    """The decoded module of `mlir_module` (see the module docstring)."""
    # Decoding allocates a few long-lived records per op and no cyclic garbage: the collector's
    # repeated full passes over the growing heap cost ~20% of a large load and free nothing
    # (paused, the records are scanned once, on its next pass).
    with gc_paused(), mlir_module.context, names_read_as_utf8(source_name):
        module = _decode_once(mlir_module, source_name, options)
        missing_chlo = {name for name, _, _ in module.problems if name.startswith("chlo.")}
        # CHLO ops without a direct translation: decompose with jaxlib's pass, decode again.
        if missing_chlo and legalize_chlo(mlir_module, missing_chlo):
            module = _decode_once(mlir_module, source_name, options)
        # Shape-dialect ops (TensorFlow's dynamic batch): rewritten into StableHLO, decode again.
        if any(name.startswith("shape.") for name, _, _ in module.problems) and \
                legalize_shapes(mlir_module):
            module = _decode_once(mlir_module, source_name, options)
    if options.strict and module.problems:
        raise UnsupportedError(module.problems)
    # Collectives naming more processes than a plain call has run as a grid of processes
    # (spmd.run_spmd), so strict loads them; reported here, a plain call refuses them.
    module.problems += grid.plain_call_problems(module, mesh.num_partitions(module, mlir_module))
    # (a manual region begins with a custom call: a module without one has none to fold)
    problems = manual_regions.rewrite_manual_regions(module) if module.custom_calls else []
    if problems:
        raise UnsupportedError(problems)
    return module


def signatures(mlir_module, source_name: str):
    """The module's functions' signatures only (see `module.decode_signatures`)."""
    with mlir_module.context, names_read_as_utf8(source_name):
        return decode_signatures(mlir_module, source_name=source_name)


def _decode_once(mlir_module, source_name: str, options: LoadOptions) -> ModuleDef:
    return decode_module(mlir_module, source_name=source_name,
                         placeholder_data=options.placeholder_data, seed=options.seed,
                         strict=False)


@contextlib.contextmanager
def names_read_as_utf8(source_name: str):
    """Reports a name that is not UTF-8 (an op, a symbol, a type) as the malformed input it is.
    jaxlib raises a RuntimeError ("conversion error") reading one; inside a walk's callback,
    a RuntimeError that carries the callback's error."""
    where = f" {source_name}" if source_name else ""
    try:
        yield
    except UnicodeDecodeError as e:
        raise LoadError(f"cannot read{where}: a name in the module is not UTF-8 "
                        f"({e.object[max(0, e.start - 20):e.end + 20]!r})") from None
    except RuntimeError as e:
        if "conversion error" not in str(e) and "UnicodeDecodeError" not in str(e):
            raise
        raise LoadError(f"cannot read{where}: a name or string in the module is not "
                        "UTF-8") from None
