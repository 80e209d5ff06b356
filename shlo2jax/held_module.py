"""A loaded program's MLIR module without its large constants, for a program that holds weights.

MLIR keeps every attribute's data in its context until the context itself goes (attributes
are uniqued there and never freed), so a program that kept jaxlib's module after decoding
would hold its weights twice: in the context, and as the decoded numpy arrays its constant
rule embeds or `shlo2jax.lift_params` wraps. A program whose large constants add up to
`RELEASE_BYTES` or more keeps an outline instead (see `Program.mlir_module`): the module as
bytecode with each large constant's value replaced by a zero splat of its type and tagged,
and the decoded arrays. `ModuleOutline.module()` parses it into a fresh context and writes
the arrays back: the module the program was decoded from, for the tools that want one
(XLA directly, the reference interpreter, shape refinement), a copy of the weights held only
while the caller holds it.

An `ir.Location` holds its context too, so such a program's ops keep their locations as a
`HeldLocations` (bytecode of a module of their own), formatted when first read.
"""

from __future__ import annotations

import io

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_dialect

from shlo2jax.attributes import dense_attribute, writes_back
from shlo2jax.compat import make_ir_context

# A constant this large is outlined (its data leaves the bytecode); a program whose outlined
# constants add up to RELEASE_BYTES lets go of its MLIR module and context after decoding.
LARGE_CONSTANT_BYTES = 1 << 16
RELEASE_BYTES = 16 << 20

_TAG = "shlo2jax.outlined"
_CARRIER = "shlo2jax_locations"


class HeldLocations:
    """`ir.Location`s kept as the bytecode of a module of their own (the argument locations of
    a private function: unformatted, as printing a long call-site chain costs 5-30 us and most
    programs never read their locations), and read back, in a context of their own, when
    first asked for: an `ir.Location` kept from the load would keep the program's context,
    and its weights."""
    __slots__ = ("_bytecode", "_module", "_arguments")

    def __init__(self):
        self._bytecode = self._module = self._arguments = None

    def hold(self, locations: list) -> None:
        """Holds `locations`: `ir.Location`s of one context, or None where no location is
        held (read as unknown); none at all: nothing to read."""
        context = next((location.context for location in locations if location is not None),
                       None)
        if context is None:
            return
        with context, ir.Location.unknown() as unknown:
            module = ir.Module.create()
            with ir.InsertionPoint(module.body):
                # (one binding call: a private function whose arguments are located there)
                carrier = func_dialect.FuncOp(_CARRIER, ir.FunctionType.get(
                    [ir.IntegerType.get_signless(1)] * len(locations), []), visibility="private")
                with ir.InsertionPoint(carrier.add_entry_block(
                        [unknown if location is None else location for location in locations])):
                    func_dialect.ReturnOp([])
            self._bytecode = write_bytecode(module)

    def formatted(self, format_location) -> list:
        """Every location as `format_location(location)` gives it, read in a context that is
        not kept."""
        with make_ir_context():
            module = ir.Module.parse(self._bytecode)
            return [format_location(argument.location) for argument in _carried(module)]

    def __getitem__(self, i: int):
        """The `i`th location (an `ir.Location` of the held module's context)."""
        if self._arguments is None:
            with make_ir_context():
                module = ir.Module.parse(self._bytecode)
                # (the arguments are the module's: it stays while they are read)
                self._module, self._arguments = module, _carried(module)
        return self._arguments[i].location


def _carried(module):
    """The arguments of `HeldLocations`' carrier function, each with its `.location`."""
    return ir.SymbolTable(module.operation)[_CARRIER].regions[0].blocks[0].arguments


class ModuleOutline:
    """The bytecode of a module whose large constants are tagged zero splats, and their data."""

    def __init__(self, bytecode: bytes, arrays: list):
        self.bytecode = bytecode
        self.arrays = arrays  # the decoded constants (shared with the program's ops)

    def module(self):
        """The module, in a fresh context, with every outlined constant's data written back."""
        context = make_ir_context()
        with context, ir.Location.unknown():
            module = ir.Module.parse(self.bytecode)
            tagged = []

            def visit(operation):
                if _TAG in operation.attributes:
                    tagged.append(operation)
                return ir.WalkResult.ADVANCE
            module.operation.walk(visit)
            for operation in tagged:
                array = self.arrays[operation.attributes[_TAG].value]
                operation.attributes["value"] = dense_attribute(
                    array, operation.attributes["value"].type)
                del operation.attributes[_TAG]
        return module


def outline(mlir_module, large_constants) -> "ModuleOutline | None":
    """The outline of `mlir_module` (changed in place: the caller drops it), or None when none of
    `large_constants` ((ir.Operation, decoded Op) of each constant of LARGE_CONSTANT_BYTES or
    more) can be written back exactly (dense_resource blobs, splats, types numpy lacks)."""
    arrays = []
    with mlir_module.context, ir.Location.unknown():
        i64 = ir.IntegerType.get_signless(64)
        for operation, op in large_constants:
            array = op.attrs.get("value")
            if not isinstance(array, np.ndarray) or not writes_back(array.dtype):
                continue
            try:
                value = operation.attributes["value"]
            except TypeError:  # an attribute the bindings cannot downcast (complex ones)
                continue
            if not isinstance(value, ir.DenseElementsAttr) or value.is_splat:
                continue
            zero = _zero_splat(value.type)
            if zero is None:
                continue
            operation.attributes["value"] = zero
            operation.attributes[_TAG] = ir.IntegerAttr.get(i64, len(arrays))
            arrays.append(array)
        if not arrays:
            return None
        buffer = io.BytesIO()
        mlir_module.operation.write_bytecode(buffer)
    return ModuleOutline(buffer.getvalue(), arrays)


def outlined_bytes(large_constants) -> int:
    return sum(op.attrs["value"].nbytes for _, op in large_constants)


def _zero_splat(shaped_type):
    element = shaped_type.element_type
    try:
        zero = ir.IntegerAttr.get(element, 0) if isinstance(element, ir.IntegerType) \
            else ir.FloatAttr.get(element, 0.0)
        return ir.DenseElementsAttr.get_splat(shaped_type, zero)
    except (TypeError, ValueError, ir.MLIRError):
        return None


def release(module, mlir_module) -> "ModuleOutline | None":
    """An outline of `mlir_module` when the large constants of `module` (decoded from it) add up
    to `RELEASE_BYTES`: then no decoded record refers to an MLIR object any more (the ops'
    locations are held apart: `ModuleDef.hold_locations`), and the caller may let the MLIR
    module and its context go (which hold the constants' data until they go). None when the
    program keeps its module. Empties `module.large_constants` either way."""
    large_constants, module.large_constants = module.large_constants, []
    if mlir_module is None or outlined_bytes(large_constants) < RELEASE_BYTES:
        return None
    module.hold_locations()
    return outline(mlir_module, large_constants)


class HeldModule:
    """A program's MLIR module: parsed, or once the program let it go, its outline (see
    `release`) or its bytecode (`hold_bytecode`: a program that lowers directly)."""

    def __init__(self, mlir_module):
        self._module, self._outline, self._bytecode = mlir_module, None, None

    @property
    def released(self) -> bool:
        """Whether the parsed module (and its context, which holds the weights) was let go."""
        return self._outline is not None or self._bytecode is not None

    def module(self):
        """The module; where it was let go, parsed again in a fresh context (a copy of its
        weights, held while the caller holds it)."""
        if self._outline is not None:
            return self._outline.module()
        if self._bytecode is not None:
            with make_ir_context():
                return ir.Module.parse(self._bytecode)
        return self._module

    def bytecode(self) -> bytes:
        """The module as MLIR bytecode: where the module is held as bytecode, those very bytes
        (written once), else written now."""
        return self._bytecode if self._bytecode is not None else write_bytecode(self.module())

    def hold_bytecode(self) -> bool:
        """Holds the module as bytecode, written once here, and lets the parsed module go (its
        context holds the weights once more): a program that lowers directly lowers from
        those bytes (`bytecode`). Whether the module is let go (not where it was already)."""
        if self._module is None:
            return False
        self._bytecode, self._module = write_bytecode(self._module), None
        return True

    def release(self, decoded_module) -> bool:
        """Lets the module go when `decoded_module`'s large constants call for it (`release`);
        whether it did. A module held as bytecode stays so (the direct lowering shares those
        bytes); `decoded_module`, decoded from a parse of it, stops referring to that parse."""
        if self._bytecode is not None:
            decoded_module.large_constants = []
            decoded_module.hold_locations()
            return True
        kept = release(decoded_module, self._module)
        if kept is not None:
            self._outline, self._module = kept, None
        return kept is not None


def write_bytecode(mlir_module) -> bytes:
    """`mlir_module` as MLIR bytecode."""
    buffer = io.BytesIO()
    mlir_module.operation.write_bytecode(buffer)
    return buffer.getvalue()
