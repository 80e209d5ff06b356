"""Arguments given a value: the uses of some of a function's arguments replaced by constants.

The dynamic-shape executable (executables/polymorphic) specialises a function on the values
of its dimension-size arguments (scalar integers whose value drives `?` sizes): their uses
become constants, which shape refinement then folds; the arguments stay in the signature.
An `index` argument gets an `arith.constant` (a stablehlo.constant holds no `index` tensor;
refinement folds arith's too).
"""

from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from shlo2jax import value_types as T
from shlo2jax.transforms.common import function_named


def substitute_constants(module, values: dict, function: str = "main") -> None:
    """The uses of @function's argument i become a constant of value `values[i]` (an int or a
    sequence of them, of the argument's shape); the argument itself stays."""
    func_op = function_named(module, function)
    block = func_op.regions[0].blocks[0]
    for i, value in values.items():
        arg = block.arguments[i]
        data = np.array(value, dtype=T.ELEMENT_DTYPES[str(arg.type.element_type)]).reshape(
            arg.type.shape)
        attr = ir.DenseElementsAttr.get(data, type=arg.type.element_type, shape=list(data.shape))
        where = ir.InsertionPoint.at_block_begin(block)
        if isinstance(arg.type.element_type, ir.IndexType):
            # (stablehlo.constant holds no `index` tensor; refinement folds arith's too)
            constant = ir.Operation.create("arith.constant", results=[arg.type],
                                           attributes={"value": attr}, loc=arg.location, ip=where)
        else:
            constant = stablehlo.ConstantOp(attr, loc=arg.location, ip=where)
        arg.replace_all_uses_with(constant.result)
