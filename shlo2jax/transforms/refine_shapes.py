"""A module's `?` dimensions refined to a call's argument shapes, by StableHLO's own passes.

`refine_shapes(module, key)` sets @main's argument types to the call's shapes
(`stablehlo-refine-arguments`), then propagates them (`stablehlo-refine-shapes`,
`stablehlo-canonicalize-dynamism`, which turns dynamic ops with constant shapes into static
ones). `refine_arguments` only sets the argument types (what jax's own refinement starts
from). Raises `ir.MLIRError` where the passes fail (the shapes contradict the module). Used by
the dynamic-shape executable (executables/polymorphic), which tries them on copies and
caches the result per signature. `strip_bounds`: a module's text without its
`#stablehlo.bounds` (refinement leaves bounded `?` dimensions alone).
"""

from __future__ import annotations

import re

from jaxlib.mlir import ir, passmanager

from shlo2jax.transforms.common import function_named, register_stablehlo_passes

_ARGUMENTS_PIPELINE = "stablehlo-refine-arguments{{types='{types}'}}"
_REFINE_PIPELINE = ("builtin.module(" + _ARGUMENTS_PIPELINE + ",stablehlo-refine-shapes,"
                    "func.func(stablehlo-canonicalize-dynamism),stablehlo-refine-shapes)")
_BOUNDS_RE = re.compile(r",\s*#stablehlo\.bounds<[^>]*>")


def refine_shapes(module, key) -> None:
    """Refines @main of `module` to the argument shapes of `key` (see `refined_argument_types`)
    and the rest of the module after it. Call inside the module's context."""
    _run(_REFINE_PIPELINE, module, key)


def refine_arguments(module, key) -> None:
    """Only @main's argument types set to `key`'s shapes."""
    _run("builtin.module(" + _ARGUMENTS_PIPELINE + ")", module, key)


def _run(pipeline: str, module, key) -> None:
    register_stablehlo_passes()
    types = ",".join(refined_argument_types(module, key))
    passmanager.PassManager.parse(pipeline.format(types=types)).run(module.operation)


def strip_bounds(text: str) -> str:
    """Module text without its `#stablehlo.bounds<...>` encodings."""
    return _BOUNDS_RE.sub("", text)


def refined_argument_types(module, key) -> list:
    """@main's argument types with the call's shapes (MLIR spelling). `key`: per argument,
    (shape, dtype) for a tensor, anything else for an argument whose type stays."""
    types = []
    for arg, k in zip(function_named(module, "main").regions[0].blocks[0].arguments, key):
        mlir_type = arg.type
        if isinstance(k, tuple) and isinstance(mlir_type, ir.RankedTensorType):
            mlir_type = ir.RankedTensorType.get(list(k[0]), mlir_type.element_type,
                                                loc=ir.Location.unknown())
        types.append(str(mlir_type))
    return types
