"""A function some of whose module arguments the source binds to named values, called with
the remaining ones: a PyTorch/XLA bundle (`sources.torch_xla_bundle`) binds its weights from
`data/` under their `state_dict` names and its constants from `constants/`, and the caller
passes torch's inputs, in torch's order.

`BoundConvention`: the caller's arguments are its inputs; `params` the named weights;
`with_params` the same convention with other weights (e.g. tracers under `jax.grad`); the
module's function runs as it would on its own, with the arguments assembled from the bindings
(`module_arguments`). Values are checked against the module's argument types once, at load,
and never converted.
"""

from __future__ import annotations

import copy
import functools
from typing import Callable, NamedTuple, Optional

import jax
import numpy as np

from shlo2jax import compat, signatures
from shlo2jax import value_types as T
from shlo2jax.conventions import ModuleConvention
from shlo2jax.errors import LoadError
from shlo2jax.module import FunctionDef


class Binding(NamedTuple):
    """Where one module argument comes from: `"param"` (a named weight, in `params`),
    `"constant"` (a fixed value, in `constants`) or `"input"` (the caller's input at
    `position`)."""
    kind: str
    name: str
    position: int = -1


class BoundValue(NamedTuple):
    """A value the source binds, and where it came from (a file: errors name it)."""
    value: np.ndarray
    origin: str


def binding(name: str, bindings, values: dict, inputs, structure: Optional[Callable] = None,
            source: str = "bound", results: Optional[dict] = None):
    """The factory of a `BoundConvention` (its arguments, but the module function's
    definition), for `sources.Source.conventions`."""
    return lambda fdef, assembly: BoundConvention(fdef, name, bindings, values, inputs,
                                                  structure, source, results)


class BoundConvention(ModuleConvention):
    """The module function `fdef` with the arguments `bindings` names bound (see the module
    docstring), public as `name`. `inputs`: the caller's inputs in order, as (name, TensorType)
    (an input the module does not read is still taken); `values`: name -> BoundValue for every
    param and constant binding; `structure`: the flat results -> what a call returns (None: the
    one result, or a tuple); `source`: what the signature says the function came from;
    `results`: the caller's results, name -> the module result it is, in order (None: every
    module result: a SavedModel's signature returns some of them)."""

    def __init__(self, fdef: FunctionDef, name: str, bindings, values: dict, inputs,
                 structure: Optional[Callable] = None, source: str = "bound",
                 results: Optional[dict] = None):
        super().__init__(fdef, name)
        self._results = None if results is None else tuple(results.values())
        self._result_names = None if results is None else tuple(results)
        if self._results is not None:
            count = len(self.output_types)
            if any(not 0 <= i < count for i in self._results):
                raise LoadError(f"{source}: the results name module result "
                                f"{max(self._results)}, and @{fdef.name} returns {count}")
            self.output_types = tuple(self.output_types[i] for i in self._results)
        self.bindings = tuple(bindings)
        self.caller_types = tuple(t for _, t in inputs)
        self._input_names = tuple(n for n, _ in inputs)
        self._structure = structure
        self._source = source
        module_types = self.input_types
        if len(self.bindings) != len(module_types):
            raise LoadError(f"{source}: {len(self.bindings)} argument bindings for "
                            f"@{fdef.name}, which takes {len(module_types)} arguments")
        taken = set()
        for i, (binding_, ttype) in enumerate(zip(self.bindings, module_types)):
            if binding_.kind == "input":
                if not 0 <= binding_.position < len(inputs) or binding_.position in taken:
                    raise LoadError(f"{source}: @{fdef.name}'s argument {i} is input "
                                    f"{binding_.position}, which is not one input of "
                                    f"{len(inputs)} (or is bound twice)")
                taken.add(binding_.position)
                _check_type(ttype, self.caller_types[binding_.position],
                            f"{source}: input {binding_.position}", i, fdef.name)
                continue
            bound = values.get(binding_.name)
            if bound is None:
                raise LoadError(f"{source}: no value for {binding_.kind} {binding_.name!r} "
                                f"(@{fdef.name}'s argument {i})")
            _check_value(ttype, bound, i, fdef.name)
        with compat.enable_x64():  # 64-bit values stay 64-bit
            self._values = {n: jax.device_put(v.value) for n, v in values.items()}
        self._params = tuple(dict.fromkeys(b.name for b in self.bindings if b.kind == "param"))

    # -- names, signature

    argument_types = property(lambda self: self.caller_types)

    @property
    def arg_names(self) -> tuple:
        """The caller's inputs' names; the bound arguments are named in `module_arg_names`."""
        return self._input_names

    @functools.cached_property
    def module_arg_names(self) -> tuple:
        """Each module argument's name: a weight's, a constant's or the caller's input's."""
        return tuple(self._input_names[b.position] if b.kind == "input" else b.name
                     for b in self.bindings)

    @property
    def result_names(self) -> tuple:
        """The caller's results' names (`results`' keys), else the module's."""
        return self._result_names or self.module_result_names

    @property
    def signature(self) -> str:
        return (signatures.text(self.name, self.caller_types, self.output_types, self.arg_names)
                + f"  [{self._source}: {len(self._params)} weights bound]")

    # -- the bound values

    @property
    def params(self) -> dict:
        """The weights, name -> array (the values this function calls with)."""
        return {n: self._values[n] for n in self._params}

    @property
    def constants(self) -> dict:
        """The other bound values (fixed: not parameters), name -> array."""
        return {b.name: self._values[b.name] for b in self.bindings if b.kind == "constant"}

    def check_params(self, params) -> None:
        """TypeError/KeyError unless `params` maps weight names to arrays of their types."""
        if not isinstance(params, dict):
            raise TypeError(f"params must be a dict of weight name -> array, got "
                            f"{type(params).__name__}")
        unknown = [n for n in params if n not in self._params]
        if unknown:
            raise KeyError(f"{self.name} has no weight {', '.join(map(repr, unknown))}; its "
                           f"weights: {', '.join(self._params)}")
        for name, value in params.items():
            want = self._values[name]
            shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
            if shape is None or dtype is None or isinstance(value, (bool, int, float, complex)):
                raise TypeError(f"params[{name!r}] must be an array, got {type(value).__name__}")
            if tuple(shape) != tuple(want.shape) or np.dtype(dtype) != np.dtype(want.dtype):
                raise TypeError(f"params[{name!r}] is {np.dtype(dtype)}{list(shape)}, the weight "
                                f"is {np.dtype(want.dtype)}{list(want.shape)} (values are never "
                                "converted)")

    def with_params(self, params: dict) -> "BoundConvention":
        """This convention with the weights `params` names replaced (the others kept); values
        are checked, never converted, and may be tracers (`jax.grad` w.r.t. them)."""
        self.check_params(params)
        new = copy.copy(self)
        new._values = {**self._values, **params}
        return new

    # -- calling

    def check_arguments(self, args) -> None:
        signatures.check_types(args, self.caller_types, self.arg_names, self.name,
                               self.signature)

    def module_arguments(self, args, params: Optional[dict] = None) -> tuple:
        """The caller's inputs `args` and the bound values (weights from `params` where it
        names them) as the module function takes them."""
        self.check_arguments(args)
        values = self._values if not params else {**self._values, **params}
        return tuple(args[b.position] if b.kind == "input" else values[b.name]
                     for b in self.bindings)

    def flat_results(self, outs) -> tuple:
        """The module's results the caller receives (`results`), in order."""
        return tuple(outs) if self._results is None else tuple(outs[i] for i in self._results)

    def returned(self, flat):
        """The flat results as a call returns them (unflattened where the source says how)."""
        if self._structure is not None:
            return self._structure(tuple(flat))
        return super().returned(flat)


def _check_type(module_type, given, what: str, index: int, function: str) -> None:
    if module_type != given:
        raise LoadError(f"{what} is {given}, but @{function}'s argument {index} is {module_type}")


def _check_value(module_type, bound: BoundValue, index: int, function: str) -> None:
    value = bound.value
    if not isinstance(module_type, T.TensorType) or module_type.quant is not None:
        raise LoadError(f"{bound.origin}: @{function}'s argument {index} is {module_type}, "
                        "which a bound value cannot be")
    shape_ok = len(value.shape) == len(module_type.shape) and all(
        d is None or d == s for d, s in zip(module_type.shape, value.shape))
    if value.dtype != module_type.dtype or not shape_ok:
        raise LoadError(f"{bound.origin}: holds {value.dtype}{list(value.shape)}, but "
                        f"@{function}'s argument {index} is {module_type} (values are never "
                        "converted)")
