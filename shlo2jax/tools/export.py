"""Writing a translated program back out: a `jax.export.Exported` of the translation, from
which StableHLO text (`.mlir_module()`) or a serialized artifact (`.serialize()`) follows.

The round trip — load, translate, export, serialize, load again — gives the same function:
what the translation produced is ordinary StableHLO that JAX lowered.
"""

from __future__ import annotations

import jax

from shlo2jax import value_types as T
from shlo2jax.errors import InputError
from shlo2jax import compat


def export_translated(function, platforms=None) -> "jax.export.Exported":
    """`jax.export` of a loaded Function (or a Program's entry) with its declared signature.

    `platforms`: the lowering platforms (default: the current backend), e.g. ("cpu", "cuda").
    Functions with dynamic shapes, tokens or tuples in their signature are refused.
    """
    fn = function.entry if hasattr(function, "entry") else function
    for t in fn.input_types + fn.output_types:
        if not isinstance(t, T.TensorType) or not t.is_static or t.quant is not None:
            raise InputError(f"export_translated: {fn.signature} has a {t} in its signature; "
                             "only static, non-quantized tensor signatures can be exported")
    with compat.enable_x64():  # 64-bit signatures stay 64-bit
        return jax.export.export(jax.jit(fn), platforms=platforms)(*fn.in_avals)


def translated_stablehlo(function, platforms=None) -> str:
    """The translated program as StableHLO MLIR text."""
    return export_translated(function, platforms).mlir_module()
