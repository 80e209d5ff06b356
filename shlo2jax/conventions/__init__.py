"""Calling conventions: how a caller's arguments become a module function's, and its results
what a call returns.

A `shlo2jax.Function` is a convention plus an executable (`shlo2jax.executables`): the
executable runs the module function on the module's own arguments and knows nothing of who
calls it; the convention is everything the caller sees. A call is

    flat = convention.wrap(run)(*args)        # run: module_arguments -> executable -> flat_results
    return convention.returned(flat)

- `ModuleConvention` (here): the module function as the module declares it;
- `exported.ExportedConvention`: a `jax.export` artifact's entry function, called like
  `Exported.call` (the platform index, the tokens and the arguments jax dropped supplied; reverse
  mode through the producer's VJP where the artifact ships one);
- `bound.BoundConvention`: a function some of whose arguments the source binds to named
  values (a PyTorch/XLA bundle's weights and constants), called with the remaining ones.

A source says which convention each module function takes (`sources.Source.conventions`: the
module function's name -> a factory of (its signature-only `FunctionDef`, the `Assembly`));
the assembly makes them when it builds the program (`shlo2jax.assembly`). An input kind with
its own calling convention is one source file and one file here.

Every convention has the same attributes, so no caller asks which one it holds:
`name`, `argument_types`, `in_avals`, `out_avals`, `arg_names`, `result_names`, `module_arg_names`,
`signature`, `check_arguments`, `module_arguments`, `flat_results`, `returned`, `wrap`,
`params`, `constants`, `with_params`, `record`, `uses_producer_vjp`, `exported`.
"""

from __future__ import annotations

import functools
import types
from typing import Optional

from shlo2jax import names, signatures
from shlo2jax.module import FunctionDef

NO_VALUES = types.MappingProxyType({})


class ModuleConvention:
    """A module function called with its own arguments, returning its own results (one result
    as itself, several as a tuple). `name`: the public name (the module function's, unless a
    source renames it)."""

    record = None  # the jax.export record a convention reads (exported.ExportedConvention)
    uses_producer_vjp = False
    params = constants = NO_VALUES

    def __init__(self, fdef: FunctionDef, name: Optional[str] = None):
        self.name = name or fdef.name
        self._fdef = fdef  # its signature and argument attributes (the names read them)
        self.input_types, self.output_types = tuple(fdef.input_types), tuple(fdef.output_types)

    @property
    def argument_types(self) -> tuple:
        """The type of each argument a call takes: a shlo2jax type (`TensorType`, ...) where
        the module says it, else a `jax.ShapeDtypeStruct` (a `jax.export` artifact's aval)."""
        return self.input_types

    @property
    def in_avals(self) -> tuple:
        """Inputs as `jax.ShapeDtypeStruct`s (a TensorType where a dimension is dynamic)."""
        return tuple(signatures.aval(t) for t in self.argument_types)

    @property
    def out_avals(self) -> tuple:
        return tuple(signatures.aval(t) for t in self.output_types)

    @functools.cached_property
    def module_arg_names(self) -> tuple:
        """Each module argument's name as the module gives it (`shlo2jax.names`), else
        `arg_<i>`; unique."""
        return names.with_fallback(names.module_argument_names(self._fdef), "arg")

    arg_names = property(lambda self: self.module_arg_names, doc="What a call names its arguments.")

    @functools.cached_property
    def module_result_names(self) -> tuple:
        return names.with_fallback(names.module_result_names(self._fdef), "result")

    result_names = property(lambda self: self.module_result_names)

    @property
    def signature(self) -> str:
        """`@main(w1: f32[8,16], x: f32[2,8]) -> (f32[2,4])`, named by `arg_names`."""
        return signatures.text(self.name, self.input_types, self.output_types, self.arg_names)

    def check_arguments(self, args) -> None:
        """TypeError unless `args` are what a call takes: here the module function's own
        arguments (a call checks them as the module's, `Function.call_module`)."""
        signatures.check_types(args, self.input_types, self.module_arg_names, self._fdef.name,
                               self.signature)

    def module_arguments(self, args, params=None) -> tuple:
        """The caller's arguments as the module function takes them (`params`: weights that
        replace bound ones, for a convention that binds any)."""
        return tuple(args)

    def flat_results(self, outs) -> tuple:
        """The module function's results as the caller's flat results."""
        return tuple(outs)

    def returned(self, flat):
        """What a call returns of its flat results (one as itself, several as a tuple)."""
        return flat[0] if len(flat) == 1 else tuple(flat)

    def wrap(self, call):
        """The call of the caller's arguments to flat results (a convention may give it other
        derivatives: the producer's VJP)."""
        return call

    def with_params(self, params: dict) -> "ModuleConvention":
        """The convention with the weights `params` names replaced: this one binds none."""
        if params:
            raise KeyError(f"{self.name} binds no weights (its arguments are passed at each "
                           f"call); got {', '.join(map(repr, params))}")
        return self

    def exported(self, program):
        """The `jax.export.Exported` the function came from; None: it came from none."""
        return None
