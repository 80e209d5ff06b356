"""Ops of a module cut out into a module of their own: one public function per distinct op.

`outline(operations, whys, mlir_module)` copies the first op of each distinct kind (same op,
attributes and types, and regions of the same ops, wired alike) into a small module: one
public function `<prefix><slot>` taking the op's operands and returning its results, and the
functions the ops refer to (a composite's decomposition, a custom call's called
computations). The direct lowering (shlo2jax.executables.direct) outlines its islands so,
at load, and shlo2jax.executables.islands decodes the `Outline` and lowers each op's
translation in its place. The ops' locations are formatted when first read
(`Outline.records`), not at load.
"""

from __future__ import annotations

from typing import NamedTuple

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_dialect

from shlo2jax.compat import attribute_items
from shlo2jax.module import format_location
from shlo2jax.held_module import HeldLocations, write_bytecode


class Island(NamedTuple):
    """One op of a function that lowers directly and lowers from its translation there."""
    op: str        # the op's name: "stablehlo.custom_call", "stablehlo.composite", ...
    location: str  # where it is in the source
    why: str       # why it cannot lower as itself

    def __str__(self):
        return f"{self.op} at {self.location}: {self.why}"


def function_name(slot, prefix: str = "shlo2jax_island_") -> str:
    """The name of the function of outlined op `slot` (`prefix`: `Outline.prefix`)."""
    return f"{prefix}{slot}"


def _key(operation):
    """Ops with the same key have the same translation: one island function serves them (the
    same op, operand and result types and attributes, and regions of the same ops, wired
    alike). An op with an attribute the bindings cannot read has a key of its own."""
    attributes = tuple(attribute_items(operation))
    if any(attr is None for _, attr in attributes):
        return object()
    key = (operation.name, tuple(str(v.type) for v in operation.operands),
           tuple(str(t) for t in operation.results.types),
           tuple((name, str(attr)) for name, attr in attributes))
    return key if not len(operation.regions) else key + _regions_key(operation)


def _regions_key(operation) -> tuple:
    """The ops in `operation`'s regions, in walk order: each one's name, the positions (in that
    order) of the values it uses, its result types and attributes; each block's argument
    types. An island's regions use only values defined in them (`direct._self_contained`).
    Types and attributes are uniqued in their context: equal ones are one object, compared
    without printing them (a constant in a region is not printed)."""
    numbered: dict = {}
    parts: list = []

    def visit(op):
        if op != operation:
            attributes = tuple(attribute_items(op))
            if any(attr is None for _, attr in attributes):
                parts.append(object())  # (unreadable: a key of its own)
            parts.append((op.name, tuple(numbered.get(v, -1) for v in op.operands),
                          tuple(op.results.types), attributes))
            for value in op.results:
                numbered[value] = len(numbered)
        for region in op.regions:
            parts.append(len(region.blocks))
            for block in region.blocks:
                parts.append(tuple(a.type for a in block.arguments))
                for value in block.arguments:
                    numbered[value] = len(numbered)
        return ir.WalkResult.ADVANCE

    operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return tuple(parts)


def _symbols(attr, into: list) -> None:
    if isinstance(attr, ir.FlatSymbolRefAttr):
        into.append(attr.value)
    elif isinstance(attr, ir.ArrayAttr):
        for element in attr:
            _symbols(element, into)
    elif isinstance(attr, ir.DictAttr):
        for i in range(len(attr)):
            _symbols(attr[i].attr, into)


def references(operation, into: list) -> None:
    """Appends to `into` the names of the symbols `operation`'s attributes refer to (not those
    of the ops in its regions)."""
    for _, attr in attribute_items(operation):
        _symbols(attr, into)


def _referenced_functions(operations, symbol_table) -> list:
    """The names of the functions `operations` refer to (a composite's decomposition, a custom
    call's called computations), and those they refer to in turn, each once."""
    names: list = []

    def refer(operation):
        references(operation, names)
        return ir.WalkResult.ADVANCE

    for operation in operations:
        operation.walk(refer)  # (the ops in its regions too)
    seen: list = []
    while names:
        name = names.pop()
        if name not in seen and name in symbol_table:
            seen.append(name)
            symbol_table[name].operation.walk(refer)
    return seen


class Outline:
    """Ops of a module copied into a module of their own (`outline`)."""
    __slots__ = ("ops", "bytecode", "slots", "prefix", "_whys", "_locations", "_source_name",
                 "_records")

    def __init__(self, ops: tuple, whys: tuple, locations: HeldLocations, bytecode: bytes,
                 slots: tuple, prefix: str, source_name: str):
        self.ops = ops  # each op's name, in walk order
        # one public function `<prefix><slot>` per distinct op, and the functions they refer to
        self.bytecode = bytecode
        self.slots = slots  # for each op, the slot of its function
        self.prefix = prefix  # `shlo2jax_island_`, unless a function they refer to is named so
        self._whys, self._locations, self._source_name = whys, locations, source_name
        self._records = None

    @property
    def records(self) -> tuple:
        """An `Island` per op, in walk order. Their locations are formatted here, when first
        read (`held_module.HeldLocations`): printing a location (a long call-site chain) costs
        about as much as outlining the op, and most programs never read them."""
        if self._records is None:
            locations = self._locations.formatted(
                lambda location: format_location(location, self._source_name))
            self._records = tuple(Island(*record)
                                  for record in zip(self.ops, locations, self._whys))
        return self._records


def outline(operations, whys: tuple, mlir_module, source_name: str = "") -> Outline:
    """The `Outline` of `operations` (ops of `mlir_module`, in walk order; `whys`, why each
    cannot lower as itself; `source_name`, what their locations name as `-`). Raises where
    the ops cannot be copied into a module that verifies."""
    keys: dict = {}
    firsts, slots = [], []
    for operation in operations:
        slot = keys.setdefault(_key(operation), len(keys))
        if slot == len(firsts):
            firsts.append(operation)
        slots.append(slot)
    symbol_table = ir.SymbolTable(mlir_module.operation)
    referenced = _referenced_functions(firsts, symbol_table)
    prefix = function_name("")
    while any(name.startswith(prefix) for name in referenced):
        prefix = "_" + prefix
    with mlir_module.context, ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            for name in referenced:
                symbol_table[name].operation.clone()
            for slot, operation in enumerate(firsts):
                with operation.location:
                    fn = func_dialect.FuncOp(f"{prefix}{slot}", ir.FunctionType.get(
                        [v.type for v in operation.operands], list(operation.results.types)))
                    block = fn.add_entry_block()
                    with ir.InsertionPoint(block):
                        copy = operation.clone()
                        for i, argument in enumerate(block.arguments):
                            copy.operands[i] = argument
                        func_dialect.ReturnOp(list(copy.results))
        if not module.operation.verify():  # (raises, where the bindings report it so)
            raise ValueError("the module of the islands does not verify")
        locations = HeldLocations()  # (kept unformatted: see `Outline.records`)
        locations.hold([op.location for op in operations])
        return Outline(tuple(op.name for op in operations), tuple(whys), locations,
                       write_bytecode(module), tuple(slots), prefix, source_name)
