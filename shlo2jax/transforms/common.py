"""What the module rewrites share (no rewrite of its own): the names of a module's ops, and a
rewrite tried on a copy first."""

from __future__ import annotations

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


def rewrite_on_a_trial_copy(mlir_module, rewrite, errors=(ir.MLIRError,)) -> bool:
    """`rewrite(operation)` applied to `mlir_module` if it succeeds on a copy (a failing
    conversion may leave the IR half rewritten); False, the module untouched, when it raises
    one of `errors`. StableHLO's passes are registered first, once."""
    global _passes_registered
    if not _passes_registered:
        stablehlo.register_stablehlo_passes()
        _passes_registered = True
    trial = mlir_module.operation.clone()
    try:
        rewrite(trial)
    except errors:
        return False
    finally:
        trial.erase()
    rewrite(mlir_module.operation)
    return True
