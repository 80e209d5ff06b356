"""Only the functions a root function reaches: the others erased (`drop_unreachable`), or a copy
of the module holding the reached ones (`copy_reached`).

A function refers to another by a symbol in an attribute of one of its ops (a `func.call`'s
callee, a composite's decomposition, a custom call's called computations). Shape refinement
(executables/polymorphic) copies only what the function it specialises reaches (a module of a
thousand functions is not copied once per function planned at load), and drops what @main no
longer calls once refined (only @main is translated).
"""

from __future__ import annotations

from jaxlib.mlir import ir

from shlo2jax import compat
from shlo2jax.transforms.common import functions as functions_of


def reached_functions(module, root: str) -> set:
    """The names of the top-level functions @root refers to, directly or not, and @root's."""
    functions = functions_of(module)
    reached, stack = {root}, [root]
    while stack:
        for callee in symbol_uses(functions[stack.pop()]):
            if callee not in reached and callee in functions:
                reached.add(callee)
                stack.append(callee)
    return reached


def drop_unreachable(module, root: str = "main") -> None:
    """Erases the functions @root does not refer to (directly or not)."""
    reached = reached_functions(module, root)
    for name, operation in functions_of(module).items():
        if name not in reached:
            operation.erase()


def copy_reached(source, reached: set):
    """A new module in `source`'s context holding clones of its functions named in `reached`
    and of every other top-level op, with the module's attributes (the clones share the
    source's uniqued attributes: constants' data is not copied)."""
    part = ir.Module.create(loc=source.operation.location)
    for name in compat.attribute_names(source.operation):
        part.operation.attributes[name] = source.operation.attributes[name]
    at = ir.InsertionPoint(part.body)
    for view in source.body.operations:
        operation = view.operation
        if operation.name != "func.func" or operation.attributes["sym_name"].value in reached:
            operation.clone(ip=at)
    return part


def symbol_uses(operation) -> set:
    """Symbols named by attributes of nested ops (func.call callees, composite
    decompositions, custom_call called_computations, ...)."""

    names = set()
    for region in operation.regions:
        for block in region.blocks:
            for view in block.operations:
                nested = view.operation
                for key in compat.attribute_names(nested):
                    if key == "value":  # constants: indexed access aborts on some dense data
                        continue
                    attr = nested.attributes[key]
                    items = list(attr) if isinstance(attr, ir.ArrayAttr) else [attr]
                    names.update(a.value for a in items if isinstance(a, ir.FlatSymbolRefAttr))
                names |= symbol_uses(nested)
    return names
