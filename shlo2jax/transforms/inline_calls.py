"""Calls inlined: every `func.call` reachable from a root function replaced by a copy of its
callee's body.

jaxlib's `inline` pass cannot do it: its Python bindings register no inliner interface for
func, so the pass leaves every call in place. Shape refinement retries a module with its calls
inlined when refining each callee once leaves `?` behind (executables/polymorphic), and the
comparison tools record every op of one function's body with its callees inlined
(tools/compare's `instrumented_module_text`).
"""

from __future__ import annotations

from jaxlib.mlir import ir

from shlo2jax.errors import UnsupportedError
from shlo2jax.transforms.common import calls
from shlo2jax.transforms.common import functions as functions_of


def inline_calls(module, root: str = "main", limit: int = 200000) -> bool:
    """Replaces every func.call reachable from @root by a copy of its callee's body (call
    inside the module's context); True where it inlined something. Raises UnsupportedError
    past `limit` copied ops."""
    functions = functions_of(module)
    copied = 0
    while True:
        pending = calls(functions[root])
        if not pending:
            return copied > 0
        for call in pending:
            body = functions[call.attributes["callee"].value].regions[0].blocks[0]
            mapping = dict(zip(body.arguments, call.operands))
            at = ir.InsertionPoint(call)
            for view in body.operations:
                operation = view.operation
                if operation.name == "func.return":
                    for result, value in zip(call.results, operation.operands):
                        result.replace_all_uses_with(mapping.get(value, value))
                    break
                clone = operation.clone(ip=at)
                remap_operands(clone, mapping)
                mapping.update(zip(operation.results, clone.results))
                copied += 1
            if copied > limit:
                raise UnsupportedError([("func.call", str(call.location), "too many calls to "
                                         "inline for shape refinement")])
            call.erase()


def remap_operands(operation, mapping: dict) -> None:
    """Points the operands of an op (and of ops nested in it) at their inlined values."""
    operands = operation.operands
    for i in range(len(operands)):
        new = mapping.get(operands[i])
        if new is not None:
            operands[i] = new
    for region in operation.regions:
        for block in region.blocks:
            for view in block.operations:
                remap_operands(view.operation, mapping)
