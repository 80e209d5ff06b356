"""A top-level function renamed, with every use of its symbol.

StableHLO's `stablehlo-refine-arguments` refines @main only: shape refinement
(executables/polymorphic) renames the function it specialises @main in its copy, and a @main
it calls out of the way.
"""

from __future__ import annotations

from jaxlib.mlir import ir


def rename_function(module, old: str, new: str) -> bool:
    """Renames the top-level function @old to @new, and every use of the symbol; False where
    the module has no @old."""
    for view in module.body.operations:
        operation = view.operation
        if operation.name == "func.func" and operation.attributes["sym_name"].value == old:
            ir.SymbolTable.replace_all_symbol_uses(old, new, module.operation)
            operation.attributes["sym_name"] = ir.StringAttr.get(new)
            return True
    return False
