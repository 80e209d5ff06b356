"""Baked-in weights as named, trainable parameters: `lift_params` and its inverse `bind_params`.

Many exports carry their weights as constants (a `jax.export` of a function closing over its
parameters, Keras exports, TensorFlow graphs with frozen variables). `lift_params` makes every
such constant a named entry of a `params` dict and returns `apply(params, *inputs)`, which
computes what the program computes, reading those constants from `params`:

    params, apply = shlo2jax.lift_params(program)
    grads = jax.grad(lambda p: loss(apply(p, x)))(params)

How: the lifted constants' ops keep their place in the decoded program; a translator made for
the lifted function (`_LiftedTranslator`) answers the constant rule's question "is this op
lifted?" with the value of its parameter in the call being traced (ops/constant.py), read from
an environment the call pushes (`_Environment`). Functions the program calls that use lifted
constants (directly or through their own callees) are traced once, as `jax.jit` callees taking
those parameters as extra arguments, so no tracer leaks between traces.

Which constants: floating (and complex) constants of at least `min_elements` elements whose
elements are not all equal (a splat is a fill value, e.g. the zeros a bias starts from, or the
coefficients of a decomposed special function broadcast to an activation's shape); every
`dense_resource` blob whatever its size. Integer constants (index tables, masks, shapes) stay
constants unless `integers=True`. Constants with the same type and bytes (the same MLIR
attribute: one weight closed over by several jitted functions appears once per function) are
one parameter, so its gradient is the sum over its uses.

Memory: a parameter's value is the decoded constant itself, as a jax array made once with
`jax.device_put` (on CPU, of 64-byte aligned memory, without a copy; see attributes.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import threading
from typing import Callable, Iterable, Optional, Union

import jax
import numpy as np

from shlo2jax import attributes, compat
from shlo2jax import names as naming
from shlo2jax import value_types as T
from shlo2jax.errors import UnsupportedError
from shlo2jax.loader import load
from shlo2jax.module import Region
from shlo2jax.function import Function
from shlo2jax.options import LoadOptions
from shlo2jax.program import Program
from shlo2jax.translate import Translator, TranslatorMode

_CONSTANT_OPS = frozenset({"stablehlo.constant", "mhlo.constant"})
# Ops that only move or re-type a value: a weight reaches the op that uses it through them.
_TRANSPARENT = frozenset({"broadcast_in_dim", "broadcast", "reshape", "convert", "transpose",
                          "copy"})
_CONTRACTIONS = frozenset({"dot_general", "dot", "convolution"})
_SLICES = frozenset({"slice", "dynamic_slice"})


def _kind(op) -> str:
    return op.name.rpartition(".")[2]


# -- which constants

@dataclasses.dataclass
class LiftedConstant:
    """One parameter made of one or more constant ops with the same type and bytes."""
    name: str
    ops: list  # the constant ops (shlo2jax.module.Op), first in program order first
    value: np.ndarray  # the decoded constant (shared with the program: not a copy)
    resource: Optional[str] = None  # the dense_resource blob it was decoded from

    @property
    def op(self):
        return self.ops[0]

    def describe(self) -> str:
        where = self.op.location
        uses = f", {len(self.ops)} constant ops" if len(self.ops) > 1 else ""
        blob = f", dense_resource<{self.resource}>" if self.resource else ""
        return (f"{self.op.name} #{self.op.index} {T.tensor_type(self.value.shape, self.value.dtype)}"
                f"{uses}{blob} at {where}")


def _is_splat(value: np.ndarray) -> bool:
    if value.size <= 1:
        return True
    flat = value.reshape(-1)
    bits = flat.view(np.dtype((np.void, value.dtype.itemsize)))
    first = bits[0]
    sample = bits[:: max(1, bits.size // 1024)]
    if not (sample == first).all():
        return False
    chunk = 1 << 20
    return all((bits[i:i + chunk] == first).all() for i in range(0, bits.size, chunk))


def _liftable_type(value: np.ndarray, integers: bool) -> bool:
    if T.is_float(value.dtype) or T.is_complex(value.dtype):
        return True
    return integers and (T.is_integer(value.dtype) or value.dtype == np.bool_)


def _walk(region: Region):
    for op in region.ops:
        yield op
        for inner in op.regions:
            yield from _walk(inner)


def _referenced_functions(op, functions: dict) -> set:
    """The functions an op names in its attributes (func.call callees, composite
    decompositions, custom-call bodies, ...)."""
    found = set()
    attrs = op.attrs if isinstance(op.attrs, dict) else {}

    def visit(value):
        if isinstance(value, str):
            if value in functions:
                found.add(value)
        elif isinstance(value, (tuple, list)):
            for v in value:
                visit(v)
        elif isinstance(value, dict):
            for v in value.values():
                visit(v)
    visit(attrs)
    return found


class _ModuleIndex:
    """What naming and callee tracing need to know about the functions a function reaches:
    each value's producer and users, each function's ops and referenced functions."""

    def __init__(self, module, root: str):
        self.module = module
        functions = module.functions
        self.reached: list = []
        self.calls: dict = {}  # function -> the functions its ops name
        self.ops_of: dict = {}  # function -> its ops (nested regions included)
        stack, seen = [root], set()
        while stack:
            name = stack.pop()
            if name in seen or name not in functions:
                continue
            seen.add(name)
            self.reached.append(name)
            ops = list(_walk(functions[name].body))
            self.ops_of[name] = ops
            self.calls[name] = set()
            for op in ops:
                self.calls[name] |= _referenced_functions(op, functions)
            stack.extend(sorted(self.calls[name] - seen, reverse=True))
        self.producer: dict = {}
        self.users: dict = {}
        for name in self.reached:
            for op in self.ops_of[name]:
                for vid in op.results:
                    self.producer[vid] = op
                for position, vid in enumerate(op.operands):
                    self.users.setdefault(vid, []).append((op, position))

    def transitive(self, direct: dict) -> dict:
        """function -> the union of `direct[f]` over every function it reaches."""
        out = {name: set(direct.get(name, ())) for name in self.reached}
        changed = True
        while changed:
            changed = False
            for name in self.reached:
                for callee in self.calls[name]:
                    extra = out.get(callee, set()) - out[name]
                    if extra:
                        out[name] |= extra
                        changed = True
        return out

    def source(self, vid):
        """The op that defines `vid`, looking through ops that only move or re-type values."""
        op = self.producer.get(vid)
        while op is not None and _kind(op) in _TRANSPARENT and op.operands:
            op = self.producer.get(op.operands[0])
        return op

    def _region_of(self, op):
        """The region an op's operands become the block arguments of: a called function's
        body, a while loop's body (a loop-invariant weight a scan carries)."""
        if op.name == "func.call":
            callee = self.module.functions.get(op.attrs.get("callee"))
            return None if callee is None else callee.body
        if _kind(op) == "while" and len(op.regions) == 2:
            return op.regions[1]
        return None

    def consumer(self, vid, outer: tuple = (), depth: int = 0):
        """(op, operand position, scope) of the first op that computes with `vid`, following it
        through ops that only move, slice or re-type it, into called functions and loop
        bodies; `scope` is that op's location's scope, under the scope of the call or loop it
        was reached through when its own name stack does not say it (a while body's does not).
        Or ("returned", vid): the value leaves its region unchanged."""
        for _ in range(256):
            uses = self.users.get(vid)
            if not uses:
                return ("returned", vid)
            op, position = uses[0]
            kind = _kind(op)
            if len(op.results) == 1 and (kind in _TRANSPARENT or (kind in _SLICES
                                                                  and position == 0)):
                vid = op.results[0]  # (a slice of a weight, a scanned layer's, is that weight)
                continue
            region = self._region_of(op) if depth < 8 else None
            if region is not None and position < len(region.args):
                here = _within(outer, naming.scope(op.location))
                inner = self.consumer(region.args[position], here, depth + 1)
                if inner[0] != "returned":
                    return inner
                if op.name == "func.call" and inner[1] in region.outputs:
                    vid = op.results[region.outputs.index(inner[1])]
                    continue  # e.g. jnp indexing's jitted helper: the value comes back
            return op, position, _within(outer, naming.scope(op.location))
        return ("returned", vid)


def _within(outer: tuple, inner: list) -> tuple:
    """A scope reached through a call or loop of scope `outer`: jax's name stacks inside a
    function repeat the caller's; those inside a loop body start afresh."""
    inner = tuple(inner)
    if not outer or inner[:len(outer)] == outer:
        return inner or outer
    return outer + inner


def _role(index: _ModuleIndex, op, position: int) -> str:
    """What a weight is to the op that uses it: a `kernel` of a contraction, the `bias` added to
    one's result, the `embedding` table of a gather; else the op's kind."""
    kind = _kind(op)
    if kind in _CONTRACTIONS:
        return "kernel"
    if kind == "add" and len(op.operands) == 2:
        source = index.source(op.operands[1 - position])
        if source is not None and _kind(source) in _CONTRACTIONS:
            return "bias"
    if kind == "gather" and position == 0:
        return "embedding"
    return kind


_NAMED_ROLES = frozenset({"kernel", "bias", "embedding"})


def _constant_name(index: _ModuleIndex, constant_op) -> str:
    """`scope/role` from the constant's first real use (its location's name stack, else the
    constant's own), else `const_<op index>`."""
    used = index.consumer(constant_op.results[0])
    scope, role = [], None
    if used[0] != "returned":
        consumer, position, where = used
        role = _role(index, consumer, position)
        scope = list(where)
    if not scope:
        scope = naming.scope(constant_op.location)
    if scope and role:
        return "/".join(scope + [role])
    if role in _NAMED_ROLES:
        return role
    return f"const_{constant_op.index}"


def _fingerprint(value: np.ndarray) -> tuple:
    flat = value.reshape(-1).view(np.uint8) if value.flags.c_contiguous else \
        np.ascontiguousarray(value).reshape(-1).view(np.uint8)
    step = max(1, flat.size // 65536)
    return (value.dtype.str, value.shape, hashlib.blake2b(flat[::step].tobytes()).hexdigest())


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(
        np.ascontiguousarray(a).reshape(-1).view(np.uint8),
        np.ascontiguousarray(b).reshape(-1).view(np.uint8))


def find_constants(function, min_elements: int = 2, *, splats: bool = False,
                   integers: bool = False, taken: Iterable[str] = ()) -> list:
    """The constants `lift_params` lifts from `function`, named, in program order."""
    taken = list(taken)
    module = function.program.module
    index = _ModuleIndex(module, function.definition.name)
    resources = getattr(module, "resource_constants", {}) or {}
    groups: dict = {}  # fingerprint -> [LiftedConstant]
    found = []
    for fname in index.reached:
        for op in index.ops_of[fname]:
            if op.name not in _CONSTANT_OPS or len(op.result_types) != 1:
                continue
            rtype, value = op.result_types[0], op.params
            if isinstance(value, attributes.Splat):  # a large splat: lifted only when asked,
                if not (splats and value.size >= max(min_elements, 1)  # and only then built
                        and _liftable_type(value, integers)):
                    continue
                value = value.materialise()
            if type(rtype) is not T.TensorType or rtype.quant is not None or \
                    not rtype.is_static or not isinstance(value, np.ndarray):
                continue
            resource = resources.get(op.index)
            if resource is None and not (value.size >= max(min_elements, 1)
                                         and _liftable_type(value, integers)
                                         and (splats or not _is_splat(value))):
                continue
            key = _fingerprint(value)
            for constant in groups.get(key, ()):
                if _same_bytes(constant.value, value):
                    constant.ops.append(op)
                    break
            else:
                constant = LiftedConstant("", [op], value, resource)
                groups.setdefault(key, []).append(constant)
                found.append(constant)
    found.sort(key=lambda c: c.op.index)
    for constant in found:
        constant.ops.sort(key=lambda o: o.index)
    names = naming.unique(taken + [_constant_name(index, c.op) for c in found])
    for constant, name in zip(found, names[len(taken):]):
        constant.name = name
    return found


# -- tracing with lifted constants

class _Environment:
    """The parameter values of the call being traced, per thread: a stack of frames (the
    lifted call's, then one per jitted callee that takes parameters)."""

    def __init__(self, names_by_op: dict):
        self.names_by_op = names_by_op  # op.index -> parameter name
        self._local = threading.local()

    @contextlib.contextmanager
    def frame(self, values: dict):
        frames = self._local.__dict__.setdefault("frames", [])
        frames.append(values)
        try:
            yield
        finally:
            frames.pop()

    def current(self) -> dict:
        frames = self._local.__dict__.get("frames")
        if not frames:
            raise RuntimeError("a lifted constant was traced outside its lifted call")
        return frames[-1]

    def value(self, op):
        """The constant rule's hook (ops/constant.py): op -> its parameter's value, or None."""
        name = self.names_by_op.get(op.index)
        return None if name is None else self.current()[name]


class _LiftedTranslator(Translator):
    """A translator whose constant rule reads lifted constants from the environment, and whose
    callees that use lifted constants take them as arguments."""

    def __init__(self, module, options, mode: TranslatorMode, environment: _Environment,
                 needs: dict):
        super().__init__(module, options, dataclasses.replace(mode, lifted=environment.value))
        self._environment = environment
        self._needs = needs  # function -> the parameter names it uses, itself or its callees

    def in_mode(self, mode: TranslatorMode) -> Translator:
        return _LiftedTranslator(self.module, self.options, mode, self._environment, self._needs)

    def callee(self, name: str) -> Callable:
        needed = tuple(sorted(self._needs.get(name, ())))
        if not needed:
            return super().callee(name)
        fn = self._callees.get(name)
        if fn is not None:
            return fn
        fdef = self.module.functions.get(name)
        if fdef is None:
            raise KeyError(f"func.call to undefined function @{name}")
        body = self.function_body(fdef)
        environment = self._environment
        if self.mode.recorder is not None or self.mode.observer is not None:
            fn = body  # inlined: reads the caller's frame
        else:
            def with_parameters(values, *args):
                with environment.frame(dict(zip(needed, values))):
                    return body(*args)
            with_parameters.__name__ = body.__name__
            traced = jax.jit(with_parameters)

            def fn(*args):
                frame = environment.current()
                return traced(tuple(frame[n] for n in needed), *args)
        self._callees[name] = fn
        return fn


# -- the API

def _device_array(value: np.ndarray):
    value.flags.writeable = False  # the program's constant: shared, never written
    with compat.enable_x64():  # 64-bit constants stay 64-bit
        return jax.device_put(value)


def _function_of(source, options: Optional[LoadOptions] = None):
    if isinstance(source, (Lifted, Program, Function)) and options is not None:
        raise TypeError("options=: how a source is loaded; this one is loaded already (load "
                        "it with the options instead)")
    if isinstance(source, Lifted):
        return source.function
    if isinstance(source, Program):
        return source.entry
    if isinstance(source, Function):
        return source
    return load(source, options).entry


class Lifted:
    """`apply(params, *inputs, **named_inputs)`: the function with its lifted constants (and
    the arguments taken into the parameters) read from `params`.

    `names`: every parameter's name; `constants`: the lifted constants (LiftedConstant: its
    ops, value, where it came from); `arguments`: the names of the arguments taken into
    `params`; `input_names`: the arguments `apply` still takes, in order; `bound`: the weights
    the source bound (a PyTorch/XLA bundle's, `Function.params`), parameters under their
    own names.
    Reverse mode differentiates the translation (an artifact's own VJP knows nothing of
    lifted constants).
    """

    def __init__(self, function, constants: list, arguments: list):
        # Refused as UnsupportedError (a shlo2jax error naming the function), not a bare one.
        if function.is_polymorphic:
            raise UnsupportedError([(
                "func.func", function.signature,
                "lift_params: the function is shape-polymorphic; lifting constants from a "
                "function with `?` dimensions is not supported")])
        if function.is_sharded and function.program.has_manual_regions:
            raise UnsupportedError([(
                "func.func", function.signature,
                "lift_params: the function has manual (shard_map) regions; lifting constants "
                "from it is not supported")])
        self.function = function
        self.constants = constants
        self.bound = dict(function.params)  # the weights the source binds (its convention's)
        arg_names = function.arg_names
        self._argument_positions = [arg_names.index(n) for n in arguments]
        self.arguments = tuple(arguments)
        taken = set(self._argument_positions)
        self._input_positions = [i for i in range(len(arg_names)) if i not in taken]
        self.input_names = tuple(arg_names[i] for i in self._input_positions)
        self.names = (tuple(self.bound) + tuple(self.arguments)
                      + tuple(c.name for c in constants))
        self._constant_names = tuple(c.name for c in constants)
        self._expected = {c.name: (c.value.shape, c.value.dtype) for c in constants}
        self._expected.update({n: (tuple(v.shape), np.dtype(v.dtype))
                               for n, v in self.bound.items()})
        in_avals = function.in_avals
        for name, i in zip(self.arguments, self._argument_positions):
            self._expected[name] = (tuple(in_avals[i].shape), np.dtype(in_avals[i].dtype))

        environment = _Environment({op.index: c.name for c in constants for op in c.ops})
        module = function.program.module
        index = _ModuleIndex(module, function.definition.name)
        direct: dict = {}
        by_op = environment.names_by_op
        for fname in index.reached:
            direct[fname] = {by_op[op.index] for op in index.ops_of[fname] if op.index in by_op}
        needs = index.transitive(direct)
        translator = _LiftedTranslator(module, function.program.options, TranslatorMode(),
                                       environment, needs)
        body = function.taking_storage_integers(translator.function_body(function.definition))
        constant_names = self._constant_names

        def lifted(values, *args):
            with environment.frame(dict(zip(constant_names, values))):
                return body(*args)
        lifted.__name__ = f"lifted_{function.definition.name}".replace(".", "_")
        self._traced = jax.jit(lifted)

    def __repr__(self):
        inputs = ", ".join(self.input_names)
        return (f"<shlo2jax.Lifted apply(params[{len(self.names)}], {inputs}) of "
                f"{self.function.signature}>")

    @property
    def in_avals(self) -> tuple:
        """The inputs `apply` takes after `params`."""
        avals = self.function.in_avals
        return tuple(avals[i] for i in self._input_positions)

    @property
    def out_avals(self) -> tuple:
        return self.function.out_avals

    def describe(self) -> str:
        """One line per parameter: name, type, and where it came from."""
        rows = [f"{n}: {T.tensor_type(tuple(v.shape), np.dtype(v.dtype))} (a weight the source "
                "bound)" for n, v in self.bound.items()]
        avals = self.function.in_avals
        for name, i in zip(self.arguments, self._argument_positions):
            a = avals[i]
            rows.append(f"{name}: {T.tensor_type(tuple(a.shape), np.dtype(a.dtype))} "
                        f"(argument {i})")
        for c in self.constants:
            rows.append(f"{c.name}: {c.describe()}")
        return "\n".join(rows)

    def split_arguments(self, *args, **kwargs) -> tuple:
        """The function's full argument list -> (the arguments taken into `params`, by name;
        the remaining inputs, in order)."""
        args = self.function.bind_keywords(args, kwargs)
        if len(args) != len(self.function.arg_names):
            raise TypeError(f"{self.function.signature} takes {len(self.function.arg_names)} "
                            f"argument(s), got {len(args)}")
        taken = {n: args[i] for n, i in zip(self.arguments, self._argument_positions)}
        return taken, tuple(args[i] for i in self._input_positions)

    def check_params(self, params) -> None:
        if not isinstance(params, dict):
            raise TypeError(f"params must be a dict of parameter name -> array, got "
                            f"{type(params).__name__}")
        missing = [n for n in self.names if n not in params]
        extra = [n for n in params if n not in self._expected]
        if missing or extra:
            raise KeyError("params " + "; ".join(
                part for part in (f"lacks {', '.join(map(repr, missing))}" if missing else "",
                                  f"has no parameter {', '.join(map(repr, extra))}" if extra
                                  else "") if part))
        for name in self.names:
            value = params[name]
            shape, dtype = self._expected[name]
            if isinstance(value, jax.ShapeDtypeStruct):
                raise TypeError(f"params[{name!r}] is a placeholder ({value}): the argument "
                                "taken into params needs its value (see Lifted.split_arguments)")
            got_shape, got_dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
            if got_shape is None or got_dtype is None or isinstance(value, (bool, int, float,
                                                                              complex)):
                raise TypeError(f"params[{name!r}] must be an array, got {type(value).__name__}")
            if tuple(got_shape) != tuple(shape) or np.dtype(got_dtype) != np.dtype(dtype):
                raise TypeError(f"params[{name!r}] is {np.dtype(got_dtype)}{list(got_shape)}, "
                                f"the parameter is {np.dtype(dtype)}{list(shape)} (values are "
                                "never converted)")

    def __call__(self, params, *inputs, **named_inputs):
        fn = self.function
        if named_inputs:
            inputs = naming.bind_keywords(self.input_names, inputs, named_inputs,
                                          f"apply(params, {', '.join(self.input_names)})")
        if len(inputs) != len(self._input_positions):
            raise TypeError(f"apply(params, {', '.join(self.input_names)}) takes "
                            f"{len(self._input_positions)} input(s) after params, got "
                            f"{len(inputs)}")
        self.check_params(params)
        full: list = [None] * len(fn.arg_names)
        for name, i in zip(self.arguments, self._argument_positions):
            full[i] = params[name]
        for value, i in zip(inputs, self._input_positions):
            full[i] = value
        # the caller's arguments (and the bound weights params replaces) as the module takes
        # them: a convention checks what only it knows, the module's types are checked here
        convention = fn.convention
        module_args = convention.module_arguments(full, {n: params[n] for n in self.bound})
        fn.check_module_arguments(module_args)
        module_args = fn.coerce_f6(module_args)
        values = tuple(params[n] for n in self._constant_names)
        with compat.enable_x64():
            outs = self._traced(values, *module_args)
        return convention.returned(convention.flat_results(outs))

    def bind(self, params) -> "Bound":
        """The function with `params` baked in: see `bind_params`."""
        return Bound(self, params)


def _argument_selection(function, params) -> list:
    names = function.arg_names
    if params is None:
        return []
    if callable(params):
        return [n for n in names if params(n)]
    chosen = list(params)
    unknown = [n for n in chosen if n not in names]
    if unknown:
        raise KeyError(f"{function.signature} has no argument named "
                       f"{', '.join(map(repr, unknown))}; its arguments: {', '.join(names)}")
    return [n for n in names if n in set(chosen)]


def lift_params(source, min_elements: int = 2, params: Union[None, Callable[[str], bool],
                                                                Iterable[str]] = None, *,
                splats: bool = False, integers: bool = False,
                options: Optional[LoadOptions] = None) -> tuple:
    """`(params, apply)`: the constants of a program's function as named parameters.

    `source`: a Program (its entry function), a Function, or anything `shlo2jax.load` takes
    (loaded with `options`, a `shlo2jax.LoadOptions`; default: its defaults).
    `min_elements`: the smallest constant lifted (`dense_resource` blobs are always lifted).
    `params`: arguments to take into `params` too, by name (`Function.arg_names`): a predicate
    (`lambda name: name.startswith("p_")`) or a collection of names; their entries are
    `jax.ShapeDtypeStruct` placeholders until given values (`apply.split_arguments`).
    `splats=True` lifts constants whose elements are all equal too; `integers=True` integer and
    boolean constants too.

    `params` is a dict name -> array (jax arrays of the decoded constants, not copies);
    `apply(params, *inputs)` computes exactly what the function computes on the same values.
    """
    function = _function_of(source, options)
    arguments = _argument_selection(function, params)
    bound = function.params
    constants = find_constants(function, min_elements, splats=splats, integers=integers,
                               taken=tuple(function.arg_names) + tuple(bound))
    lifted = Lifted(function, constants, arguments)
    values: dict = dict(bound)  # the source's weights, under their names
    avals = function.in_avals
    for name in arguments:
        a = avals[function.arg_names.index(name)]
        values[name] = jax.ShapeDtypeStruct(tuple(a.shape), a.dtype)
    for constant in constants:
        values[constant.name] = _device_array(constant.value)
    return values, lifted


class Bound:
    """A lifted function with its parameters baked in, called with the remaining inputs.
    `shlo2jax.export.export_translated(bound)` writes it out as a `jax.export` artifact
    (the parameters become the program's constants again)."""

    def __init__(self, lifted: Lifted, params: dict):
        lifted.check_params(params)
        self.lifted = lifted
        self.params = dict(params)
        self.name = lifted.function.name
        self.__name__ = f"bound_{self.name}".replace(".", "_")
        self.arg_names = lifted.input_names
        self.result_names = lifted.function.result_names

    def __call__(self, *inputs, **named_inputs):
        return self.lifted(self.params, *inputs, **named_inputs)

    @property
    def in_avals(self) -> tuple:
        return tuple(jax.ShapeDtypeStruct(tuple(a.shape), a.dtype) for a in self.lifted.in_avals)

    @property
    def out_avals(self) -> tuple:
        return tuple(jax.ShapeDtypeStruct(tuple(a.shape), a.dtype)
                     for a in self.lifted.out_avals)

    @property
    def input_types(self) -> tuple:
        return tuple(T.tensor_type(tuple(a.shape), np.dtype(a.dtype)) for a in self.in_avals)

    @property
    def output_types(self) -> tuple:
        return tuple(T.tensor_type(tuple(a.shape), np.dtype(a.dtype)) for a in self.out_avals)

    @property
    def signature(self) -> str:
        ins = ", ".join(f"%{n}: {t}" for n, t in zip(self.arg_names, self.input_types))
        outs = ", ".join(str(t) for t in self.output_types)
        return f"@{self.name}({ins}) -> ({outs})  [parameters bound]"

    def __repr__(self):
        return f"<shlo2jax.Bound {self.signature}>"


def bind_params(source, params: dict, **lift_options) -> Bound:
    """The inverse of `lift_params`: the function with `params` in place of its constants (and
    of the arguments taken into params), a callable of the remaining inputs that
    `shlo2jax.export.export_translated` writes out as an artifact.

    `source`: the `apply` that `lift_params` returned, or what `lift_params` takes (lifted
    again with `lift_options`; arguments named in `params` are taken into it). Lifted
    parameters `params` does not name keep the program's values.
    """
    if isinstance(source, Lifted):
        lifted = source
        defaults = {**lifted.bound,
                    **{c.name: _device_array(c.value) for c in lifted.constants}}
    else:
        function = _function_of(source)
        arguments = [n for n in params if n in function.arg_names]
        defaults, lifted = lift_params(function, params=arguments, **lift_options)
    full = {**{n: v for n, v in defaults.items() if n not in lifted.arguments}, **params}
    return Bound(lifted, full)
