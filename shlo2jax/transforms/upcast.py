"""A module with every floating-point type widened to f64: the f64 reference backend's program
(shlo2jax.tools.compare's `f64` backend, a high-precision reference for float32 results).

Every narrower float element type (f16, bf16, f32, the f8/f6/f4 types) becomes f64, and
complex<f32> complex<f64>: values, block arguments, function types, type attributes and
constants (a complex constant becomes a `stablehlo.complex` of two f64 constants: the
bindings can neither read nor build complex-valued dense attributes). A module whose meaning
depends on float widths (a `bitcast_convert` between floats and integers) is refused.
"""

from __future__ import annotations

import re

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from shlo2jax import attributes
from shlo2jax import value_types as T
from shlo2jax.compat import make_ir_context
from shlo2jax.errors import BackendUnavailable

_NARROW_FLOAT = (r"f16|bf16|f32|tf32|f8E4M3FN|f8E5M2|f8E4M3FNUZ|f8E5M2FNUZ|f8E4M3B11FNUZ|"
                 r"f8E4M3|f8E3M4|f8E8M0FNU|f4E2M1FN|f6E2M3FN|f6E3M2FN")
# An element type follows `<` (scalars, complex<...>), `Nx` or `?x` (shaped tensors), a
# comma or a space; `(?!\w)` keeps f32 from matching inside longer names.
_ELEMENT_RE = re.compile(rf"(?:(?<=[<,\s(])|(?<=[\d?]x))({_NARROW_FLOAT})(?!\w)")


def _widen_type_text(text: str) -> str:
    if "quant." in text:  # quantized types keep their storage and expressed types
        return text
    return _ELEMENT_RE.sub("f64", text)


def widen(x):
    """An input for the f64 program: floats to float64, complex to complex128."""
    a = np.asarray(x)
    if T.is_complex(a.dtype):
        return a.astype(np.complex128)
    if T.is_float(a.dtype):
        return a.astype(np.float64)
    return a


def upcast_module_text(program) -> str:
    """The program's module with every floating-point element type widened to f64 (and
    complex<f32> to complex<f64>): values, block arguments, function types and constants.
    Raises BackendUnavailable for a module whose meaning depends on float widths
    (bitcast_convert between floats and integers)."""
    text = program.mlir_module.operation.get_asm(large_elements_limit=None, enable_debug_info=True)
    cache: dict = {}

    def widened(t):
        s = str(t)
        if s not in cache:
            n = _widen_type_text(s)
            cache[s] = None if n == s else ir.Type.parse(n)
        return cache[s]

    def widen_attribute(attr):
        if isinstance(attr, ir.TypeAttr):
            new = widened(attr.value)
            return None if new is None else ir.TypeAttr.get(new)
        if isinstance(attr, ir.DenseElementsAttr):
            new = widened(attr.type)
            if new is None:
                return None
            ttype = T.parse_type(str(attr.type))
            values = attributes.dense_elements(attr, ttype)
            if isinstance(values, attributes.Splat) and T.is_float(values.dtype):
                return ir.DenseElementsAttr.get_splat(  # (a large splat stays one value)
                    new, ir.FloatAttr.get(ir.ShapedType(new).element_type, float(values.value)))
            values = widen(values)
            return ir.DenseElementsAttr.get(np.ascontiguousarray(values), type=new)
        if isinstance(attr, ir.FloatAttr):
            new = widened(attr.type)
            return None if new is None else ir.FloatAttr.get(new, attr.value)
        return None

    def operations(operation):
        yield operation
        for region in operation.regions:
            for block in region.blocks:
                for inner in block.operations:
                    yield from operations(inner.operation)

    def refuse_float_bitcasts(operation):
        if operation.name in ("stablehlo.bitcast_convert", "mhlo.bitcast_convert"):
            types = [v.type for v in list(operation.operands) + list(operation.results)]
            if any(widened(t) is not None for t in types):
                raise BackendUnavailable(
                    f"the f64 reference cannot widen {operation.name} at {operation.location}: "
                    "its result depends on the float's width")

    def walk(operation):
        for result in operation.results:
            new = widened(result.type)
            if new is not None:
                result.set_type(new)
        attrs = operation.attributes
        for name in list(attrs):
            try:  # by name: indexed access aborts on attributes the bindings cannot downcast
                attr = attrs[name]
            except TypeError:
                raise BackendUnavailable(f"the f64 reference cannot widen the {name} attribute "
                                         f"of {operation.name} at {operation.location}") from None
            new = widen_attribute(attr)
            if new is not None:
                attrs[name] = new
        for region in operation.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    new = widened(arg.type)
                    if new is not None:
                        arg.set_type(new)
                for inner in block.operations:
                    walk(inner.operation)

    def split_complex_constant(operation):
        """A complex constant becomes stablehlo.complex of two f64 constants: the bindings
        can neither read nor build complex-valued dense attributes."""
        values = widen(attributes.decode_printed_attribute(operation, "value"))
        # The parts get a location of their own, so that `locate` aligns the complex op
        # with the constant it replaces.
        with ir.InsertionPoint(operation), \
                ir.Location.name("f64_complex_part", childLoc=operation.location):
            parts = [stablehlo.ConstantOp(ir.DenseElementsAttr.get(np.ascontiguousarray(p)))
                     for p in (values.real, values.imag)]
        with ir.InsertionPoint(operation), operation.location:
            joined = stablehlo.ComplexOp(parts[0].result, parts[1].result)
        operation.results[0].replace_all_uses_with(joined.result)
        operation.erase()

    with make_ir_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        complex_constants = []
        for op in module.body.operations:
            for operation in operations(op.operation):
                refuse_float_bitcasts(operation)
                if operation.name == "stablehlo.constant" and \
                        "complex<" in str(operation.results[0].type):
                    complex_constants.append(operation)
        for operation in complex_constants:
            split_complex_constant(operation)
        for op in module.body.operations:
            walk(op.operation)
        try:
            module.operation.verify()
        except ir.MLIRError as e:
            raise BackendUnavailable(f"the module widened to f64 does not verify: {e}") from None
        return module.operation.get_asm(large_elements_limit=None, enable_debug_info=True)
