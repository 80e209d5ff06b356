"""What the module rewrites share (no rewrite of its own): the names of a module's ops, its
functions by name, StableHLO's passes registered once, a rewrite tried on a copy first, and
the legalizations decoding applies (each rewrite module says what it is: its `LEGALIZATION`)."""

from __future__ import annotations

import dataclasses
from typing import Callable

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

_passes_registered = False


def op_names(mlir_module) -> set:
    """The names of every op in the module, nested ones included."""
    names = set()

    def visit(operation):
        names.add(operation.name)
        return ir.WalkResult.ADVANCE

    mlir_module.operation.walk(visit)
    return names


def functions(module) -> dict:
    """The module's top-level `func.func`s by name (their `ir.Operation`s)."""
    return {view.operation.attributes["sym_name"].value: view.operation
            for view in module.body.operations if view.operation.name == "func.func"}


def function_named(module, name: str):
    """The module's top-level `func.func` @name (KeyError where there is none)."""
    for view in module.body.operations:
        operation = view.operation
        if operation.name == "func.func" and operation.attributes["sym_name"].value == name:
            return operation
    raise KeyError(name)


def calls(operation) -> list:
    """The `func.call`s nested in `operation` (at any depth), in program order."""
    found = []
    for region in operation.regions:
        for block in region.blocks:
            for view in block.operations:
                if view.operation.name == "func.call":
                    found.append(view.operation)
                found.extend(calls(view.operation))
    return found


def register_stablehlo_passes() -> None:
    """StableHLO's passes registered with MLIR (once), for `PassManager.parse`."""
    global _passes_registered
    if not _passes_registered:
        stablehlo.register_stablehlo_passes()
        _passes_registered = True


def rewrite_on_a_trial_copy(mlir_module, rewrite, errors=(ir.MLIRError,)) -> bool:
    """`rewrite(operation)` applied to `mlir_module` if it succeeds on a copy (a failing
    conversion may leave the IR half rewritten); False, the module untouched, when it raises
    one of `errors`. StableHLO's passes are registered first, once."""
    register_stablehlo_passes()
    trial = mlir_module.operation.clone()
    try:
        rewrite(trial)
    except errors:
        return False
    finally:
        trial.erase()
    rewrite(mlir_module.operation)
    return True


@dataclasses.dataclass(frozen=True)
class Legalization:
    """A rewrite decoding applies when an op whose name starts with `prefix` has no
    translation: `rewrite(module_op)`, tried on a copy first, the module left as it was when
    it raises one of `errors`."""
    prefix: str
    rewrite: Callable
    errors: tuple = (ir.MLIRError,)


def legalize(mlir_module, legalizations, untranslated_names) -> bool:
    """Each of `legalizations` that an op of `untranslated_names` calls for applied to
    `mlir_module` (see `rewrite_on_a_trial_copy`); True if one changed it."""
    applied = False
    for legalization in legalizations:
        if any(name.startswith(legalization.prefix) for name in untranslated_names):
            applied |= rewrite_on_a_trial_copy(mlir_module, legalization.rewrite,
                                               legalization.errors)
    return applied
