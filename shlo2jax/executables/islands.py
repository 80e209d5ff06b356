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

At load, `outline` (shlo2jax.transforms.outline_ops) copies the first op of each distinct
island into a small module of its own (one public function per island, and the functions the
islands refer to: a composite's decomposition, a custom call's called computations; each
island an `Island` record there); `Islands` decodes it. At each lowering, `Islands.lower_into`
finds the islands again in the module being lowered (the same walk finds them in the same
order) and replaces each by its call. The islands' locations are formatted
when first read (`Outline.records`), not at load.
"""

from __future__ import annotations

import jax
from jax.interpreters import mlir
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_dialect

from shlo2jax import compat
from shlo2jax.errors import Shlo2JaxError
from shlo2jax.memory import gc_paused
from shlo2jax.transforms.outline_ops import Outline, function_name
from shlo2jax.translate import Translator


class Islands:
    """Ops of a program decoded from their `Outline`, and lowered in place of those ops at each
    lowering of the program's module."""

    def __init__(self, outlined: Outline, find, program_of, context=None):
        """`find(mlir_module)`: the outlined ops of a module, in walk order. `program_of`: the
        program of an `ir.Module`, built as the program that holds the ops was
        (`Program.refined`: its options; what the translation lacks is an UnsupportedError
        now). `context`: the MLIR context to parse them in (the program's, while it holds its
        module; else a new one)."""
        self._outlined, self.slots, self._find = outlined, outlined.slots, find
        self._prefix = outlined.prefix
        with context or compat.make_ir_context():
            module = ir.Module.parse(outlined.bytecode)
        program = program_of(module)
        self.module = program.module
        # No record refers to the context after this (as `held_module.release` leaves a program):
        # the locations are held apart, and the constants are held as the records'.
        self.module.large_constants = []
        self.module.hold_locations()
        self.translator = Translator(self.module, program.options)

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
        name, i = function_name(slot), 0
        while name in taken or name in mctx.symbol_table:
            name, i = f"{function_name(slot)}_{i}", i + 1
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
