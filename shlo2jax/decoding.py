"""The one decode pipeline: a verified `ir.Module`, from any source, -> the decoded module.

MLIR is walked once into plain Python records (`shlo2jax.module`); CHLO ops without a
translation rule are first decomposed by jaxlib's pass, and shape-dialect ops (TensorFlow's
dynamic batch) rewritten into StableHLO (`shlo2jax.transforms.shape_legalize`); the
per-device (manual) regions of a sharded program are rewritten into the ops that run them; with `options.strict`,
every construct that cannot run is reported together, at load.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Optional

from shlo2jax.errors import LoadError, UnsupportedError
from shlo2jax.memory import gc_paused
from shlo2jax.module import ModuleDef, decode_module, decode_signatures
from shlo2jax.options import LoadOptions
from shlo2jax.spmd import grid, manual_regions, mesh
from shlo2jax.transforms import chlo_legalize, shape_legalize
from shlo2jax.transforms.common import legalize

# Rewrites into ops the translation has, for the ops it has no rule for (the chlo ops without
# one; shape-dialect ops); each leaves the module as it was when it fails.
LEGALIZATIONS = (chlo_legalize.LEGALIZATION, shape_legalize.LEGALIZATION)


def decode(mlir_module, source_name: str, options: LoadOptions,
           signatures_suffice: Optional[Callable] = None) -> ModuleDef:
    """The decoded module of `mlir_module` (see the module docstring); or, where
    `signatures_suffice(signatures)` holds of its functions' signatures, those only (a module
    whose ops are decoded on first use: `ModuleDef.signatures_only`)."""
    # Decoding allocates a few long-lived records per op and no cyclic garbage: the collector's
    # repeated full passes over the growing heap cost ~20% of a large load and free nothing
    # (paused, the records are scanned once, on its next pass).
    with gc_paused(), mlir_module.context, names_read_as_utf8(source_name):
        if signatures_suffice is not None:
            signatures = decode_signatures(mlir_module, source_name=source_name)
            if signatures is not None and signatures_suffice(signatures):
                return signatures
        # Decoded again, once, where a legalization rewrote ops that have no rule as they are.
        for legalized in (False, True):
            module = _decode_once(mlir_module, source_name, options)
            untranslated = {name for name, _, _ in module.problems}
            if legalized or not untranslated or \
                    not legalize(mlir_module, LEGALIZATIONS, untranslated):
                break
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
