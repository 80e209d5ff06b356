"""Several StableHLO modules, each called once in order with what the earlier ones returned,
as one module: what a SavedModel whose signature runs several `XlaCallModule` ops (jax2tf
functions composed in one `tf.function`) is (`sources.saved_model`).

`chain` moves every module's symbols into one module, prefixed `m<k>.` (module k's @main
becomes the private `@m<k>.main`), and adds a public `@main` that takes the arguments the
calls name, calls each `@m<k>.main` in order and returns what `outputs` names. The new module's
attributes are the first module's. A type that does not match where a value is passed (an
argument passed to two calls as different types, a result passed on as another type) is a
`LoadError`.
"""

from __future__ import annotations

from typing import NamedTuple

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_dialect

from shlo2jax.errors import LoadError


class Ref(NamedTuple):
    """A value of the chain: argument `index` of the new @main (`call` None), or result
    `index` of call `call`."""
    call: object
    index: int


def main_of(module: ir.Module, what: str):
    """The module's func.func @main."""
    for op in module.body.operations:
        if op.operation.name == "func.func" and \
                ir.StringAttr(op.attributes["sym_name"]).value == "main":
            return op
    raise LoadError(f"{what}: the module has no @main")


def _prefixed(module: ir.Module, prefix: str) -> None:
    """Every symbol of `module` renamed `<prefix><name>` (its uses too); @main made private."""
    for op in list(module.body.operations):
        if "sym_name" not in op.attributes:
            continue
        old = ir.StringAttr(op.attributes["sym_name"]).value
        ir.SymbolTable.replace_all_symbol_uses(old, prefix + old, module.operation)
        ir.SymbolTable.set_symbol_name(op, prefix + old)
        if old == "main":
            op.attributes["sym_visibility"] = ir.StringAttr.get("private")


def chain(modules: list, calls: list, outputs: list, what: str) -> ir.Module:
    """One module calling `modules[k]`'s @main with the operands `calls[k]` (`Ref`s), in
    order, and returning `outputs` (`Ref`s); see the module docstring."""
    signatures = [ir.FunctionType(ir.TypeAttr(main_of(m, what).attributes["function_type"]).value)
                  for m in modules]
    arg_types = _argument_types(signatures, calls, what)
    context = modules[0].context
    with context, ir.Location.unknown(context):
        merged = ir.Module.create()
        attributes = modules[0].operation.attributes
        for i in range(len(attributes)):
            merged.operation.attributes[attributes[i].name] = attributes[i].attr
        for k, module in enumerate(modules):
            _prefixed(module, f"m{k}.")
            for op in list(module.body.operations):
                merged.body.append(op)
        result_types = [_type_of(r, arg_types, signatures) for r in outputs]
        main = func_dialect.FuncOp("main", ir.FunctionType.get(arg_types, result_types),
                                   ip=ir.InsertionPoint(merged.body))
        block = main.add_entry_block()
        with ir.InsertionPoint(block):
            results: list = []
            for k, operands in enumerate(calls):
                values = [_value(r, block, results) for r in operands]
                call = func_dialect.CallOp(list(signatures[k].results),
                                           ir.FlatSymbolRefAttr.get(f"m{k}.main"), values)
                results.append(list(call.results))
            func_dialect.ReturnOp([_value(r, block, results) for r in outputs])
        if not merged.operation.verify():
            raise LoadError(f"{what}: the modules do not make one valid module")
    return merged


def _argument_types(signatures: list, calls: list, what: str) -> list:
    """The new @main's argument types, from the operands the calls take; a value passed as
    two types is refused."""
    types: dict = {}
    for k, (signature, operands) in enumerate(zip(signatures, calls)):
        if len(operands) != len(signature.inputs):
            raise LoadError(f"{what}: call {k} passes {len(operands)} operands to a @main "
                            f"taking {len(signature.inputs)}")
        for i, (ref, want) in enumerate(zip(operands, signature.inputs)):
            got = types.setdefault(ref.index, want) if ref.call is None else \
                _result_type(ref, signatures, k, what)
            if got != want:
                raise LoadError(f"{what}: call {k}'s operand {i} is {got}, and its @main takes "
                                f"{want}")
    if sorted(types) != list(range(len(types))):
        raise LoadError(f"{what}: the calls take arguments {sorted(types)}, not 0 to "
                        f"{len(types) - 1}")
    return [types[i] for i in range(len(types))]


def _result_type(ref: Ref, signatures: list, before: int, what: str):
    if not 0 <= ref.call < before or ref.index >= len(signatures[ref.call].results):
        raise LoadError(f"{what}: call {before} takes result {ref.index} of call {ref.call}, "
                        "which is not an earlier call's result")
    return signatures[ref.call].results[ref.index]


def _type_of(ref: Ref, arg_types: list, signatures: list):
    return arg_types[ref.index] if ref.call is None else \
        signatures[ref.call].results[ref.index]


def _value(ref: Ref, block, results: list):
    return block.arguments[ref.index] if ref.call is None else results[ref.call][ref.index]
