"""Islands: the ops of a function that lowers directly whose translation lowers in their place.

A function lowers directly (shlo2jax.executables.direct) when XLA compiles its ops as they are.
Some ops need the translation instead (a custom call the translation maps, such as TF's
`mhlo.erf` or a legacy GPU kernel; a composite; an integer division, whose divisor the
translation guards; an op over 2-bit integers). Where such an op depends on nothing but its
operands, it is an island: the function still lowers to the module's own ops, and each island
becomes a `func.call` of a private function whose body is the lowering of that op's
translation. An op with regions (a sort over 2-bit integers) is one island with them, where
they use nothing from outside it. Only the islands are decoded, at load (an op the translation
lacks is reported then, all together); each distinct island (same op, attributes and types,
and regions of the same ops) is one function. The calls of jax's kernels are islands too on a
platform that lacks them, decoded at such a lowering.

At load, `outline` copies the first op of each distinct island into a small module of its own
(one public function per island, and the functions the islands refer to: a composite's
decomposition, a custom call's called computations); `Islands` decodes it. At each lowering,
`Islands.lower_into` finds the islands again in the module being lowered (the same walk finds
them in the same order) and replaces each by its call. The islands' locations are formatted
when first read (`Outline.records`), not at load.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
from jax.interpreters import mlir
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_dialect

from shlo2jax import compat, decoding
from shlo2jax.compat import attribute_items
from shlo2jax.errors import Shlo2JaxError
from shlo2jax.module import format_location
from shlo2jax.outline import HeldLocations, write_bytecode
from shlo2jax.memory import gc_paused
from shlo2jax.translate import Translator


class Island(NamedTuple):
    """One op of a function that lowers directly and lowers from its translation there."""
    op: str        # the op's name: "stablehlo.custom_call", "stablehlo.composite", ...
    location: str  # where it is in the source
    why: str       # why it cannot lower as itself

    def __str__(self):
        return f"{self.op} at {self.location}: {self.why}"


def _function_name(slot) -> str:
    return f"shlo2jax_island_{slot}"


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
        read (`outline.HeldLocations`): printing a location (a long call-site chain) costs
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
    prefix = _function_name("")
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


class Islands:
    """Ops of a program decoded from their `Outline`, and lowered in place of those ops at each
    lowering of the program's module."""

    def __init__(self, outlined: Outline, find, source_name: str, options, context=None):
        """`find(mlir_module)`: the outlined ops of a module, in walk order. `context`: the MLIR
        context to parse them in (the program's, while it holds its module; else a new one)."""
        self._outlined, self.slots, self._find = outlined, outlined.slots, find
        self._prefix = outlined.prefix
        with context or compat.make_ir_context():
            module = ir.Module.parse(outlined.bytecode)
        # strict options (the default): what the translation lacks is an UnsupportedError now
        self.module = decoding.decode(module, source_name, options)
        # No record refers to the context after this (as `outline.release` leaves a program):
        # the locations are held apart, and the constants are held as the records'.
        self.module.large_constants = []
        self.module.hold_locations()
        self.translator = Translator(self.module, options)

    records = property(lambda self: self._outlined.records,
                       doc="An `Island` per op, in walk order (`Outline.records`).")

    def _signature(self, slot: int) -> tuple:
        fdef = self.module.functions[f"{self._prefix}{slot}"]
        return fdef, [jax.core.ShapedArray(t.shape, t.dtype) for t in fdef.input_types]

    def lower_into(self, ctx, mlir_module, chosen=None) -> None:
        """Replaces each of the ops of `mlir_module` (parsed in the context of the lowering
        rule's `ctx`; those `chosen(op)` accepts, where given) by a call of its translation,
        lowered as a private function of the module being lowered."""
        operations = self._find(mlir_module)
        if len(operations) != len(self.slots):  # the same module, walked the same way
            raise Shlo2JaxError(f"the direct lowering found {len(operations)} islands where "
                                f"the load found {len(self.slots)}")
        taken = ir.SymbolTable(mlir_module.operation)
        lowered: dict = {}
        for operation, slot in zip(operations, self.slots):
            if chosen is not None and not chosen(operation):
                continue
            name = lowered.get(slot)
            if name is None:
                name = lowered[slot] = self._lower(ctx, slot, operation, taken)
            with ir.InsertionPoint(operation), operation.location:
                call = func_dialect.CallOp(list(operation.results.types),
                                           ir.FlatSymbolRefAttr.get(name),
                                           list(operation.operands))
            for old, new in zip(operation.results, call.results):
                old.replace_all_uses_with(new)
            operation.erase()

    def _lower(self, ctx, slot: int, operation, taken) -> str:
        """The name of a new private function of the module being lowered: the lowering of
        island `slot`'s translation, with `operation`'s types. Its name is free in the module
        the islands are in too (`taken`), which is merged into it after."""
        mctx = ctx.module_context
        name, i = _function_name(slot), 0
        while name in taken or name in mctx.symbol_table:
            name, i = f"{_function_name(slot)}_{i}", i + 1
        fdef, avals = self._signature(slot)
        with operation.location:
            fn = func_dialect.FuncOp(
                name, ir.FunctionType.get([v.type for v in operation.operands],
                                          list(operation.results.types)),
                visibility="private", ip=ir.InsertionPoint(mctx.module.body))
            mctx.symbol_table.insert(fn)
            block = fn.add_entry_block()
            # jax's lowering of a traceable function (no jit of its own: a jit's tracing costs
            # as much as a small island's), in a rule context of the island's types
            island_ctx = ctx.replace(avals_in=avals, avals_out=None, tokens_out=None)
            with ir.InsertionPoint(block), compat.enable_x64(), gc_paused():
                outs = mlir.lower_fun(self.translator.function_body(fdef))(
                    island_ctx, *block.arguments)
                flat = []
                for value in outs:
                    flat.extend(value if isinstance(value, (tuple, list)) else [value])
                func_dialect.ReturnOp(flat)
        return name
