"""The dynamic-shape executable: calls of functions whose signature has `?` dimensions are
specialised to their arguments' shapes, then translated.

A call with concrete argument shapes refines a clone of the module with
StableHLO's own passes (`stablehlo-refine-arguments`, `stablehlo-refine-shapes`,
`stablehlo-canonicalize-dynamism`), so no shape arithmetic is done here; when
that leaves `?` behind, it is retried with calls inlined, then with jax's own
refinement (which also knows jax.export's dynamic custom calls). The
now-static module is decoded and translated like any other and cached per input
signature: a second call with the same shapes and dtypes does no refinement.
Bounded dimensions (`#stablehlo.bounds`) are checked against their bound, then
refined like `?`.

Dimension-size arguments (scalar integers whose value drives `?` sizes, as in
jax2tf-era modules; also short integer vectors such as slice starts) are
specialised on their value when the shapes alone leave `?` behind: their uses
become a constant, the argument stays in the signature, and the value joins the
cache key. Such an argument must then be concrete (not a tracer). `jax.export`
artifacts need no values: their dimension variables are derived from the
argument shapes, and their `shape_assertion` checks run at trace time
(the dynamic op family) or, when refinement itself fails, are read from the folded
module for the error message.
"""

from __future__ import annotations

import io
import threading

import numpy as np
from jaxlib.mlir import ir

from shlo2jax import value_types as T
from shlo2jax.compat import make_ir_context, refine_polymorphic_shapes
from shlo2jax.errors import ShapeError, UnsupportedError
from shlo2jax.module import format_location
from shlo2jax.transforms.common import calls as calls_in
from shlo2jax.transforms.common import function_named, functions
from shlo2jax.transforms.constant_arguments import substitute_constants
from shlo2jax.transforms.inline_calls import inline_calls
from shlo2jax.transforms.keep_reachable import copy_reached, drop_unreachable, reached_functions
from shlo2jax.transforms.refine_shapes import refine_arguments, refine_shapes, strip_bounds
from shlo2jax.transforms.rename_function import rename_function


_lock = threading.Lock()
# Counts refinement pipeline runs (new input signatures only); tests use it to see the cache.
refinement_count = 0


class _Entry:
    """What one argument signature needs: a refined function, or one per dimension-value tuple."""
    __slots__ = ("function", "dim_args", "by_values")

    def __init__(self, function=None, dim_args=(), by_values=None):
        self.function = function
        self.dim_args: tuple = dim_args
        self.by_values: dict = by_values if by_values is not None else {}


class Polymorphic:
    """Calls specialise the function to their arguments (see the module docstring) and run the
    specialised function's own executable. A function whose argument shapes are all static
    (only its results have `?` dimensions) is planned at load (`plan_at_load`)."""
    lowering = "translate"

    def __init__(self, function):
        self.function = function
        self.refused: tuple = plan_at_load(function)

    def __call__(self, *args) -> tuple:
        if self.refused:
            raise UnsupportedError(list(self.refused))
        return specialise(self.function, args).call_module(*args)


def plan_at_load(function) -> tuple:
    """Plans now, once, a function whose argument shapes are all static: its calls can only
    differ by the values of its dimension-size arguments, so what the first call would decide
    from its shapes alone (that `?` stays whatever the values, that refinement fails, or the
    refined function itself) is decided at load (issue 30: what cannot run is never first
    found out at call time). Refused: with `strict`, the error is raised here; without, its
    problems join the program's (`shlo2jax info` lists them) and are returned, for calls to
    raise. () when planned or when nothing can be planned before a call."""
    types = function.input_types
    # A program loaded to lower directly is decoded later (its problems are not there yet).
    if not function.program.decoded or not all(
            isinstance(t, T.TensorType) and t.is_static for t in types):
        return ()
    key = tuple((tuple(int(d) for d in t.shape), np.dtype(t.dtype)) for t in types)
    try:
        entry = _plan(function, key)
    except UnsupportedError as e:
        # (plain triples: their op indices count the refined module's ops, not this one's)
        error, problems = e, [tuple(p) for p in e.problems]
    except ShapeError as e:  # refinement on the signature's own shapes failed: no call runs
        problems = [(f"func.func @{function.module_name}", function.definition.location, str(e))]
        error = UnsupportedError(problems)
        error.__cause__ = e
    else:
        function.__dict__.setdefault("_specialised", {})[key] = entry
        return ()
    if function.program.options.strict:
        raise error
    function.program.module.problems += problems
    return tuple(problems)


def specialise(function, args):
    """The static Function that `function` (dynamic input types) becomes for `args`: the
    module refined to their shapes (and dimension-argument values), cached per signature."""
    cache = function.__dict__.setdefault("_specialised", {})
    key = tuple(_arg_key(a) for a in args)
    entry = cache.get(key)
    if entry is None:
        with _lock:
            entry = cache.get(key)
            if entry is None:
                entry = _plan(function, key)
                cache[key] = entry
    if entry.function is not None:
        return entry.function
    values = tuple(_dimension_value(function, args, i) for i in entry.dim_args)
    specialised = entry.by_values.get(values)
    if specialised is None:
        with _lock:
            specialised = entry.by_values.get(values)
            if specialised is None:
                specialised = _refined_function(function, key, dict(zip(entry.dim_args, values)))
                entry.by_values[values] = specialised
    return specialised


def _arg_key(arg):
    shape, dtype = getattr(arg, "shape", None), getattr(arg, "dtype", None)
    if shape is None or dtype is None:  # a token or a tuple: its type is fixed by the signature
        return type(arg).__name__
    try:
        return tuple(int(d) for d in shape), np.dtype(dtype)
    except Exception:  # jax.export symbolic dimensions
        raise ShapeError(f"shape {tuple(shape)}: a function with `?` dimensions is specialised "
                         "to concrete shapes, and symbolic dimensions (exporting it with "
                         "shape polymorphism) are not supported") from None


def _plan(function, key) -> _Entry:
    """Refines on shapes alone; if `?` remains, finds the arguments whose values decide it."""
    _check_bounds(function, key)
    context, module = _specialise(function, key, {})
    with context:
        remaining = _dynamic_ops(module)
        if not remaining:
            return _Entry(function=_translate(function, module))
        dim_args = _dimension_arguments(module, remaining)
        if not dim_args:
            raise _still_dynamic(function, remaining, ())
    return _Entry(dim_args=dim_args)


def _refined_function(function, key, values: dict):
    context, module = _specialise(function, key, values)
    with context:
        remaining = _dynamic_ops(module)
        if remaining:
            raise _still_dynamic(function, remaining, values)
        return _translate(function, module)


# ---------------------------------------------------------------- MLIR work (inside a context)

def _specialise(function, key, values: dict):
    """A refined copy of the module: (context, module).

    refine-shapes refines each callee once, for constant leading scalar arguments only:
    a function called with different constants (jax.export's divmod, _where), or one
    whose shapes hang on a later constant argument, stays dynamic or fails. As jax's own
    refinement does, such a module is retried with its calls inlined. That is done here
    (shlo2jax.transforms.inline_calls): jaxlib's Python bindings register no inliner
    interface for func (the `inline` pass leaves every call in place), and jax's
    refine_polymorphic_shapes stops on such a module with "incompatible refinement keys"
    before its shape assertions can speak. The module rewrites (the copy, renaming,
    constants, refinement) are shlo2jax.transforms'.
    """

    refined = failed = error = None
    context = None  # one fresh context for this call's copies (all used on this thread)
    calls = True
    for inline in (False, True):
        if inline and not calls:  # nothing to inline: no second copy (inline_calls says no)
            break
        context, module = _clone(function, context)
        with context:
            substitute_constants(module, values)
            if not inline:
                calls = bool(calls_in(function_named(module, "main")))
            if inline and not inline_calls(module):
                break
            try:
                _refine(module, key)
            except ir.MLIRError as e:
                failed, error = (context, module), e
                continue
            drop_unreachable(module)
            refined = (context, module)
            if not _dynamic_ops(module):
                break
    if refined is None or _dynamic_ops(refined[1]):
        # Ops only jax's own refinement knows (the `stablehlo.dynamic_reduce_window`,
        # `dynamic_top_k`, ... custom calls of jax.export) are left for it to finish.
        assertion, by_jax = _jax_refinement(function, key, values, context)
        if assertion:
            raise ShapeError(_describe_call(function, key, values) + " breaks the program's "
                             f"shape constraints:\n  {assertion}")
        if by_jax is not None:
            return by_jax
    if refined is not None:
        return refined
    context, module = failed
    with context:
        # Folding stops at the first failure; an export's own shape checks that were
        # already decided say best what is wrong.
        broken = _failed_assertions(module)
    if broken:
        raise ShapeError(_describe_call(function, key, values) + " breaks the program's shape "
                         "constraints:\n" + "\n".join(f"  {m}" for m in broken))
    raise ShapeError(_describe_call(function, key, values) + " contradicts the program's "
                     f"shape constraints (shape refinement failed):\n{_diagnostics(error)}")


def _jax_refinement(function, key, values: dict, context=None):
    """(failed shape assertion message or None, refined (context, module) or None) from
    jax's `refine_polymorphic_shapes`, which runs StableHLO's refinement with jax's
    extensions (inlining, shape assertions, jax.export's dynamic custom calls)."""


    context, module = _clone(function, context)
    with context:
        substitute_constants(module, values)
        try:
            refine_arguments(module, key)
        except ir.MLIRError:
            return None, None
        try:
            refined = refine_polymorphic_shapes(module)
        except Exception as e:  # jax wraps the cause: a failed shape assertion says it all
            cause = str(e.__cause__ or e)
            return (cause.strip() if "shape_assertion" in cause or
                    "do not match the polymorphic shapes" in cause else None), None
        data = refined.operation.get_asm(binary=True)
    context = make_ir_context()
    with context:
        module = ir.Module.parse(data)
        drop_unreachable(module)
        if _dynamic_ops(module):
            return None, None
    return None, (context, module)


def _failed_assertions(module) -> list:
    """Messages of `shape_assertion` custom calls whose predicate folded to false."""
    messages = []

    def constant(value):
        owner = value.owner
        if getattr(owner, "name", None) != "stablehlo.constant":
            return None
        try:
            return np.asarray(owner.attributes["value"])
        except Exception:
            return None

    for operation in _operations(module):
        if operation.name == "stablehlo.custom_call" and \
                operation.attributes["call_target_name"].value == "shape_assertion":
            operands = [constant(v) for v in operation.operands]
            if operands and operands[0] is not None and not operands[0].all():
                shown = [o.item() if o is not None and o.size == 1 else "?" for o in operands[1:]]
                message = operation.attributes["error_message"].value
                try:
                    message = message.format(*shown)
                except (IndexError, KeyError, ValueError):
                    pass
                messages.append(message)
    return messages


def _clone(function, context=None):
    """A private copy of @function and what it calls in `context`, or a fresh context (MLIR
    contexts are not thread-safe: a context is never shared beyond one call's work).

    `stablehlo-refine-arguments` refines @main only: another function is renamed @main in
    the copy (and a @main it calls is renamed out of the way). The copy holds only the
    functions @function reaches (and the module's other top-level ops): a module of a
    thousand functions is not copied once per function planned at load (issue 32), and
    refinement, which changes only @main and its callees, decides the same.
    """

    source = function.program.mlir_module
    if source is None:
        raise UnsupportedError([(f"func.func @{function.module_name}", function.definition.location,
                                 "dynamic shapes need the MLIR module the program was "
                                 "loaded from")])
    bounded = function.__dict__.setdefault("_bounded", _has_bounds(function.program))
    if context is None:
        context = make_ir_context()
    with context:
        try:
            module = ir.Module.parse(_copied(function, source, bounded, subset=True))
        except ir.MLIRError:  # a symbol the walk did not see: the whole module, as before
            module = ir.Module.parse(_copied(function, source, bounded, subset=False))
        if function.module_name != "main":
            rename_function(module, "main", "__shlo2jax_original_main")
            rename_function(module, function.module_name, "main")
    return context, module


def _copied(function, source, bounded: bool, subset: bool):
    """The module (or the part of it @function reaches) as bytecode, or as text without its
    bounds where it has bounds (refine-shapes leaves bounded `?` dimensions alone: the copy
    drops them; the arguments were checked against them)."""
    with source.context:
        part = _reachable_part(function, source) if subset else None
        if part is None:
            part = source
        if bounded:
            return strip_bounds(part.operation.get_asm(large_elements_limit=None,
                                                       enable_debug_info=True))
        buffer = io.BytesIO()
        part.operation.write_bytecode(buffer)
        return buffer.getvalue()


def _reachable_part(function, source):
    """A new module in the source's context holding the functions @function reaches and every
    other top-level op (`keep_reachable.copy_reached`); None where @function is not a
    top-level function. What it reaches is found once per function."""
    if function.module_name not in functions(source):  # (then the whole module is copied)
        return None
    reached = function.__dict__.get("_reached")
    if reached is None:
        reached = function.__dict__["_reached"] = reached_functions(source, function.module_name)
    return copy_reached(source, reached)


def _has_bounds(program) -> bool:
    return any(isinstance(t, T.TensorType) and t.bounds is not None
               for op in program.module.ops for t in op.result_types) or any(
        isinstance(t, T.TensorType) and t.bounds is not None
        for f in program.module.functions.values() for t in f.input_types + f.output_types)


def _check_bounds(function, key) -> None:
    for i, (ttype, k) in enumerate(zip(function.input_types, key)):
        bounds = getattr(ttype, "bounds", None)
        if bounds and isinstance(k, tuple):
            for d, (size, bound) in enumerate(zip(k[0], bounds)):
                if bound is not None and size > bound:
                    raise ShapeError(f"argument {function.module_arg_names[i]} of "
                                     f"@{function.module_name} has shape {k[0]}: "
                                     f"dimension {d} exceeds its bound {bound}")


def _refine(module, key) -> None:
    global refinement_count
    refinement_count += 1
    refine_shapes(module, key)


def _diagnostics(error) -> str:
    lines = []
    for d in getattr(error, "error_diagnostics", ()):
        lines.append(f"  {d.location}: {d.message}")
        lines += [f"    {n.location}: {n.message}" for n in d.notes]
    return "\n".join(lines) or f"  {error}"


def _describe_call(function, key, values) -> str:
    parts = []
    for i, k in enumerate(key):
        if isinstance(k, tuple):
            text = f"{function.module_arg_names[i]}: {T.tensor_type(k[0], k[1])}"
            if values and i in values:
                text += f" = {values[i]}"
            parts.append(text)
    return f"calling @{function.module_name}({', '.join(parts)})"


def _is_dynamic(mlir_type) -> bool:
    if isinstance(mlir_type, ir.RankedTensorType):
        return not mlir_type.has_static_shape
    return isinstance(mlir_type, ir.UnrankedTensorType)


def _dynamic_ops(module) -> list:
    """Every op (nested ones too) with a result or block argument of dynamic type."""
    return [operation for operation in _operations(module)
            if any(_is_dynamic(r.type) for r in operation.results) or any(
                _is_dynamic(a.type) for region in operation.regions
                for block in region.blocks for a in block.arguments)]


def _operations(module):
    """Every operation of the module, nested ones included, in program order."""
    stack = [view.operation for view in reversed(list(module.body.operations))]
    while stack:
        operation = stack.pop()
        yield operation
        for region in reversed(list(operation.regions)):
            for block in reversed(list(region.blocks)):
                stack.extend(view.operation for view in reversed(list(block.operations)))


# The operands that carry shapes (not data) of the ops whose result shapes they decide.
_SHAPE_OPERANDS = {
    "stablehlo.dynamic_broadcast_in_dim": (1,), "stablehlo.dynamic_iota": (0,),
    "stablehlo.dynamic_reshape": (1,), "stablehlo.dynamic_pad": (2, 3, 4),
    "stablehlo.real_dynamic_slice": (1, 2, 3), "stablehlo.dynamic_gather": (2,),
    "stablehlo.dynamic_conv": (2,), "stablehlo.set_dimension_size": (1,),
}


def _dimension_arguments(module, dynamic_ops) -> tuple:
    """Scalar integer arguments of the entry function whose values flow into a dynamic op."""

    func_op = function_named(module, "main")
    entry_block = func_op.regions[0].blocks[0]
    candidates = {i for i, a in enumerate(entry_block.arguments) if _is_small_integer(a.type)}
    stack = [operation.operands[i] for operation in dynamic_ops
             for i in _SHAPE_OPERANDS.get(operation.name, ())]
    if not stack:
        stack = [v for operation in dynamic_ops for v in operation.operands]
    calls_to: dict = {}
    for view in module.body.operations:
        for call in calls_in(view.operation):
            calls_to.setdefault(call.attributes["callee"].value, []).append(call)
    reached, seen = set(), set()
    while stack:
        value = stack.pop()
        if value in seen:
            continue
        seen.add(value)
        owner = value.owner
        if isinstance(owner, ir.Block):
            # (jaxlib <= 0.7 hands out operands as plain Values: cast to read the position)
            position = ir.BlockArgument(value).arg_number
            if owner == entry_block:
                reached.add(position)
            elif owner.owner.operation.name == "func.func":  # a callee's argument: its callers'
                callee = owner.owner.operation.attributes["sym_name"].value
                stack.extend(call.operands[position] for call in calls_to.get(callee, ()))
            continue
        stack.extend(owner.operands)
    chosen = reached & candidates
    if not chosen:  # not traced to an argument: every scalar integer may be a dimension size
        chosen = {i for i in candidates if entry_block.arguments[i].type.rank == 0}
    return tuple(sorted(chosen))


def _is_small_integer(mlir_type) -> bool:
    """A scalar, a short static vector (start indices, a shape) or a small matrix (a
    convolution's padding) of integers (`index` too: StableHLO's release artifacts pass
    shapes as `tensor<2xindex>`)."""
    if not (isinstance(mlir_type, ir.RankedTensorType) and mlir_type.has_static_shape and
            mlir_type.rank <= 2 and int(np.prod(mlir_type.shape)) <= 16 and
            (mlir_type.rank < 2 or mlir_type.shape[1] == 2)):
        return False
    element = mlir_type.element_type
    return isinstance(element, ir.IndexType) or (isinstance(element, ir.IntegerType)
                                                 and element.width > 1)


def _translate(function, module):
    return function.program.refined(module)["main"]


def _still_dynamic(function, operations, values) -> UnsupportedError:
    source = function.program.source_name
    problems = []
    for operation in operations[:10]:
        types = ", ".join(str(r.type) for r in operation.results if _is_dynamic(r.type))
        problems.append((operation.name, format_location(operation.location, source),
                         f"result type(s) {types or '(block arguments)'} stay dynamic after shape "
                         f"refinement of @{function.module_name}"
                         + (" with the dimension-size arguments specialised" if values else "")))
    return UnsupportedError(problems)


# ---------------------------------------------------------------- dimension-size values

def _dimension_value(function, args, index: int):
    """The argument's value, hashable (an int, or a tuple for a rank-1 argument)."""
    try:
        value = np.asarray(args[index])  # a tracer raises unless its value is known
    except TypeError:
        raise ShapeError(
            f"argument {function.module_arg_names[index]} of @{function.module_name} decides `?` "
            "dimensions of the program by "
            "its value (a dimension size), so it must be concrete, but it is a traced value; pass "
            "it as a numpy array or a concrete jax array (e.g. a static argument of the enclosing "
            "jit), or use a program whose `?` dimensions follow from the argument shapes "
            "alone") from None
    return int(value) if value.ndim == 0 else tuple(int(v) for v in value.reshape(-1))
