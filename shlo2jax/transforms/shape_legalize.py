"""Shape-dialect ops (TensorFlow's dynamic-batch exports) rewritten into StableHLO at decode.

TensorFlow's SavedModel -> StableHLO converter computes the shapes of a `?` batch with the
`shape` dialect: `shape.shape_of`, `shape.broadcast`, `shape.const_shape`, `tensor.dim`,
`tensor.from_elements` and `index` constants feed `stablehlo.dynamic_broadcast_in_dim` /
`dynamic_reshape`, and each implicit broadcast sits in a `shape.assuming` region guarded by a
`shape.cstr_broadcastable` witness. StableHLO's shape refinement stops at them (it refines a
value only when every user is a StableHLO op), so they are rewritten once, when the program is
decoded, into the StableHLO ops they stand for, with jaxlib's `shape-legalize-to-stablehlo`:
shapes become `tensor<Nxi32>` computed by `get_dimension_size`, `concatenate`, `maximum`, ...
The function then is an ordinary dynamic StableHLO function, specialised per call
(executables/polymorphic.py), where refinement folds those computations to constants.

The pass has no rule for the constraint ops. Before it runs, each `shape.assuming` region is
inlined (a witness only orders its region after the check) and each `shape.cstr_broadcastable`
becomes a check that stays: after the pass, a `shape_assertion` custom call (jax.export's, run
at trace time by the dynamic op family) whose predicate says, per trailing dimension, that the
sizes are equal or one of them is 1. Refined, the predicate is a constant, so shapes that do
not broadcast are a `ShapeAssertionError` (or a `ShapeError` when refinement fails first).
"""

from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo
from jaxlib.mlir.passmanager import PassManager

from shlo2jax.transforms.common import Legalization, op_names, rewrite_on_a_trial_copy

_PIPELINE = "builtin.module(func.func(shape-legalize-to-stablehlo))"
# What stands for a `shape.cstr_broadcastable` while the pass runs: a cast to `none` marked
# by this attribute (the pass leaves casts alone, and refuses StableHLO ops on `index`
# tensors); replaced by the `shape_assertion` after it.
_PENDING = "shlo2jax.pending_cstr_broadcastable"
_CAST = "builtin.unrealized_conversion_cast"
_MESSAGE = ("the shapes of an implicit broadcast (shape.cstr_broadcastable) are not "
            "broadcastable: a dimension differs and neither size is 1")


def legalize_shapes(mlir_module) -> bool:
    """Rewrites `mlir_module`'s shape-dialect ops into StableHLO (see the module docstring).
    Call inside the module's context. Does nothing when the module holds no `shape.` op or
    when the rewrite fails on it (an op the pass has no rule for): the module is then left
    untouched and the decoder reports its ops as usual."""
    if not any(name.startswith("shape.") for name in op_names(mlir_module)):
        return False
    return rewrite_on_a_trial_copy(mlir_module, LEGALIZATION.rewrite, LEGALIZATION.errors)


class _CannotRewrite(Exception):
    """A construct this rewrite does not take (the module is then left as it is)."""


def _rewrite(module_op) -> None:
    for operation in _all(module_op, "shape.assuming"):
        _inline_assuming(operation)
    for operation in _all(module_op, "shape.cstr_broadcastable"):
        if any(True for _ in operation.result.uses):
            raise _CannotRewrite("a witness used by something else than shape.assuming")
        ir.Operation.create(_CAST, results=[ir.NoneType.get()], operands=list(operation.operands),
                            attributes={_PENDING: ir.UnitAttr.get()},
                            loc=operation.location, ip=ir.InsertionPoint(operation))
        operation.erase()
    PassManager.parse(_PIPELINE).run(module_op)
    for operation in _all(module_op, _CAST):
        if _PENDING in operation.attributes:
            _broadcastable_assertion(operation)
    _fold_casts(module_op)
    leftover = {o.name for o in _all(module_op) if o.name.startswith(("shape.", "tensor."))
                or o.name == _CAST}
    if leftover:
        raise _CannotRewrite(f"left over: {sorted(leftover)}")


# What decoding applies where a shape op has no translation (transforms/legalize);
# (ValueError: a jaxlib without the pass).
LEGALIZATION = Legalization(prefix="shape.", rewrite=_rewrite,
                            errors=(ir.MLIRError, ValueError, _CannotRewrite))


def _inline_assuming(operation) -> None:
    """The region's ops move before the op; its results become the yielded values."""
    block = operation.regions[0].blocks[0]
    ops = [view.operation for view in block.operations]
    for inner in ops[:-1]:
        inner.move_before(operation)
    for result, value in zip(operation.results, ops[-1].operands):
        result.replace_all_uses_with(value)
    operation.erase()


def _broadcastable_assertion(pending) -> None:
    """`pending`'s shapes (now i32 vectors) checked pairwise on their trailing dimensions."""
    shapes = [_through_casts(v) for v in pending.operands]
    for shape in shapes:
        ttype = ir.RankedTensorType(shape.type)
        if ttype.rank != 1 or not ttype.has_static_shape or str(ttype.element_type) != "i32":
            raise _CannotRewrite(f"shape operand of type {ttype}")  # (the pass makes i32)
    at, location = ir.InsertionPoint(pending), pending.location
    with location:
        checks = []
        for i, a in enumerate(shapes):
            for b in shapes[i + 1:]:
                checks += _pair_check(a, b, at)
        if checks:
            predicate = checks[0]
            for check in checks[1:]:
                predicate = _create("stablehlo.and", [predicate, check], predicate.type, at)
            ir.Operation.create(
                "stablehlo.custom_call", results=[], operands=[predicate] + shapes,
                attributes={"call_target_name": ir.StringAttr.get("shape_assertion"),
                            "has_side_effect": ir.BoolAttr.get(True),
                            "error_message": ir.StringAttr.get(_MESSAGE)}, ip=at)
    pending.erase()


def _pair_check(a, b, at) -> list:
    """[a scalar i1: the trailing dimensions of a and b are equal or one is 1] ([] if none)."""
    n, m = ir.RankedTensorType(a.type).shape[0], ir.RankedTensorType(b.type).shape[0]
    k = min(n, m)
    if k == 0:
        return []
    vector = ir.RankedTensorType.get([k], ir.IntegerType.get_signless(32))
    bools = ir.RankedTensorType.get([k], ir.IntegerType.get_signless(1))
    a, b = _trailing(a, n, k, vector, at), _trailing(b, m, k, vector, at)
    ones = stablehlo.ConstantOp(ir.DenseElementsAttr.get(np.ones(k, np.int32), type=vector),
                                ip=at).result
    equal = _compare_eq(a, b, bools, at)
    equal_or_a_one = _create("stablehlo.or", [equal, _compare_eq(a, ones, bools, at)], bools, at)
    ok = _create("stablehlo.or", [equal_or_a_one, _compare_eq(b, ones, bools, at)], bools, at)
    # One scalar: the k checks and-ed (k is a rank, a handful).
    scalar = ir.RankedTensorType.get([], ir.IntegerType.get_signless(1))
    result = None
    for d in range(k):
        one = _create("stablehlo.reshape", [_slice(ok, d, d + 1, at)], scalar, at)
        result = one if result is None else _create("stablehlo.and", [result, one], scalar, at)
    return [result]


def _trailing(value, n: int, k: int, vector, at):
    return value if n == k else _slice(value, n - k, n, at, vector)


def _slice(value, start: int, limit: int, at, result_type=None):
    ttype = ir.RankedTensorType(value.type)
    result_type = result_type or ir.RankedTensorType.get([limit - start], ttype.element_type)
    attrs = {"start_indices": ir.DenseI64ArrayAttr.get([start]),
             "limit_indices": ir.DenseI64ArrayAttr.get([limit]),
             "strides": ir.DenseI64ArrayAttr.get([1])}
    return ir.Operation.create("stablehlo.slice", results=[result_type], operands=[value],
                               attributes=attrs, ip=at).result


def _compare_eq(a, b, result_type, at):
    return ir.Operation.create(
        "stablehlo.compare", results=[result_type], operands=[a, b],
        attributes={"comparison_direction":
                    ir.Attribute.parse("#stablehlo<comparison_direction EQ>")}, ip=at).result


def _create(name: str, operands, result_type, at):
    return ir.Operation.create(name, results=[result_type], operands=operands, ip=at).result


def _through_casts(value):
    while not isinstance(value.owner, ir.Block) and value.owner.name == _CAST:
        value = value.owner.operands[0]
    return value


def _fold_casts(module_op) -> None:
    """The pass's index<->i32 casts: a cast whose source has the target type already is
    replaced by that source; casts and `index` constants left without a use are erased."""
    for operation in _all(module_op, _CAST):
        source, result = _through_casts(operation.operands[0]), operation.results[0]
        if source.type == result.type:
            result.replace_all_uses_with(source)
    changed = True
    while changed:
        changed = False
        for operation in _all(module_op):
            if (operation.name == _CAST or (operation.name == "arith.constant" and
                                           isinstance(operation.results[0].type, ir.IndexType))) \
                    and not any(True for r in operation.results for _ in r.uses):
                operation.erase()
                changed = True


def _all(module_op, name=None) -> list:
    found = []

    def visit(operation):
        if name is None or operation.name == name:
            found.append(operation)
        return ir.WalkResult.ADVANCE

    module_op.walk(visit)
    return found
