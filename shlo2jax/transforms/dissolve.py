"""XLA's fusions and copies dissolved into the module's own ops.

The wrappers of XLA's optimised dumps are no computation of their own (as the translation
runs them, ops/control_flow.py): a fusion is the ops of its region, a copy (a layout change)
its operand. The direct lowering (shlo2jax.executables.direct) dissolves them into the
module's own ops before it merges the module: the ops in a fusion lower as themselves, and
only those that need the translation (a bitcast) are islands. Its scan asks `dissolvable` of
each op it walks.
"""

from __future__ import annotations

from jaxlib.mlir import ir


# The ops `dissolve` takes away (a fusion's `mhlo.return` goes with its fusion).
DISSOLVED = frozenset({"mhlo.fusion", "mhlo.copy", "mhlo.return"})


def dissolvable(operation) -> bool:
    """Whether `operation` dissolves: a copy that keeps its type, a fusion of one block ended
    by `mhlo.return` whose arguments and results have the fusion's types (or such a fusion's
    `mhlo.return`)."""
    name = operation.name
    if name == "mhlo.copy":
        return len(operation.operands) == 1 and len(operation.results) == 1 and \
            operation.operands[0].type == operation.results[0].type
    if name == "mhlo.return":  # a dissolved fusion's (a fusion that is not is never entered)
        return operation.parent.name == "mhlo.fusion"
    if name != "mhlo.fusion" or len(operation.regions) != 1 or \
            len(operation.regions[0].blocks) != 1:
        return False
    block = operation.regions[0].blocks[0]
    ops = block.operations
    terminator = ops[len(ops) - 1] if len(ops) else None
    return terminator is not None and terminator.name == "mhlo.return" and \
        [a.type for a in block.arguments] == [v.type for v in operation.operands] and \
        [v.type for v in terminator.operands] == list(operation.results.types)


def dissolve(mlir_module) -> None:
    """Replaces each fusion of `mlir_module` by the ops of its region, and each copy by its
    operand (see `dissolvable`; the scan found them so)."""
    found = []

    def visit(operation):
        if operation.name in DISSOLVED and operation.name != "mhlo.return" and \
                dissolvable(operation):
            found.append(operation)
        return ir.WalkResult.ADVANCE

    mlir_module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    for operation in found:  # (a fusion in a fusion is moved out with its ops first)
        if operation.name == "mhlo.fusion":
            block = operation.regions[0].blocks[0]
            for argument, operand in zip(block.arguments, operation.operands):
                argument.replace_all_uses_with(operand)
            inner = list(block.operations)
            for result, value in zip(operation.results, inner[-1].operands):
                result.replace_all_uses_with(value)
            for op in inner[:-1]:
                op.move_before(operation)
        else:
            operation.results[0].replace_all_uses_with(operation.operands[0])
        operation.erase()
