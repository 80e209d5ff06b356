"""`Function`: one function of a program, callable like a JAX function.

A `Function` is a calling convention (`shlo2jax.conventions`: the arguments, names, bound
values and results a caller sees) plus one executable chosen when its program is built
(`shlo2jax.executables`: how the module function runs).
"""

from __future__ import annotations

import copy
import functools
from typing import Optional

from shlo2jax import executables, names, quant, signatures
from shlo2jax import value_types as T
from shlo2jax.conventions import ModuleConvention
from shlo2jax.module import FunctionDef
from shlo2jax.spmd.mesh import named_shardings


class Function:
    """One function of a program, callable like a JAX function.

    64-bit types work without the user enabling `jax_enable_x64`: calls run with x64 enabled
    inside the library. Arguments are never converted: a wrong count, shape or dtype raises
    `TypeError`. What a call takes and returns is its `convention`'s; how it runs (translated,
    lowered directly, partitioned over the program's mesh, specialised to `?` dimensions) was
    decided at load: see `executable` and `lowering`.
    """

    def __init__(self, program, fdef: FunctionDef, convention=None):
        self.program = program
        self._definition = fdef  # its signature; its body too once the program is decoded
        self.convention = convention or ModuleConvention(fdef)
        """What a caller sees (`shlo2jax.conventions`): the arguments, the values the source
        binds, the results; the module function's own unless the source gives another."""
        self.module_name = fdef.name  # the module function's (`name`: the public one)
        self.input_types: tuple = tuple(fdef.input_types)  # the module function's types
        self.output_types: tuple = tuple(fdef.output_types)
        # `?` dimensions: each call specialises the module to its arguments' shapes.
        self.is_polymorphic = any(isinstance(t, T.TensorType) and not t.is_static
                                  for t in self.input_types + self.output_types)
        self.lowering_note: Optional[str] = executables.why_translated(self)
        self.executable: executables.Executable = executables.choose(self)
        """How the module function runs (`shlo2jax.executables`), chosen here, at load."""

    @property
    def definition(self) -> FunctionDef:
        """The decoded module function (decoding the program on first use, see
        `Program.module`)."""
        if self._definition.body is None:
            self._definition = self.program.module.functions[self.module_name]
        return self._definition

    lowering = property(lambda self: self.executable.lowering, doc=""""direct" when calls and jit
        lower this function to the module's own ops (`load(..., lowering="direct")`, where it
        allows it), else "translate". `lowering_note` says why it is translated ("not asked
        for" by default); `islands`, which of its ops lower from their translation inside it.""")
    islands = property(lambda self: getattr(self.executable, "islands", ()), doc="""An `Island`
        (op, location, why) per op lowered from its translation (shlo2jax.executables.islands).""")

    # -- what a caller sees: the convention's

    name = property(lambda self: self.convention.name)
    argument_types = property(lambda self: self.convention.argument_types, doc="""The type of
        each argument a call takes: a shlo2jax type where the module says it, else a
        `jax.ShapeDtypeStruct` (a `jax.export` artifact's aval).""")
    in_avals = property(lambda self: self.convention.in_avals, doc="""What a call takes, as
        `jax.ShapeDtypeStruct`s (a TensorType where a dimension is dynamic).""")
    out_avals = property(lambda self: self.convention.out_avals)
    signature = property(lambda self: self.convention.signature, doc="""`@main(w1: f32[8,16],
        x: f32[2,8]) -> (f32[2,4])`, named by `arg_names`.""")
    arg_names = property(lambda self: self.convention.arg_names, doc="""Each argument's name as
        the module gives it (shlo2jax.names: jax's argument paths, `tf_saved_model.index_path`,
        ...), else `arg_<i>`; unique. A call takes them as keyword arguments.""")
    result_names = property(lambda self: self.convention.result_names, doc="""Each result's
        name (`jax.result_info`, ...), else `result_<i>`; unique.""")
    module_arg_names = property(lambda self: self.convention.module_arg_names, doc="""Each of
        the module function's arguments' names (a bound weight's where the source binds it).""")
    params = property(lambda self: self.convention.params, doc="""The weights the source binds,
        name -> array (a PyTorch/XLA bundle's); empty where it binds none.""")
    constants = property(lambda self: self.convention.constants, doc="""The other values the
        source binds (fixed: not parameters), name -> array.""")
    record = property(lambda self: self.convention.record, doc="""shlo2jax's record of the
        `jax.export` artifact the function came from (`sources.jax_export.ExportRecord`:
        whichever jax wrote it and whichever is installed); None for other sources.""")
    uses_producer_vjp = property(lambda self: self.convention.uses_producer_vjp, doc="""Whether
        reverse mode uses the VJP a `jax.export` artifact ships.""")

    @property
    def exported(self):
        """The `jax.export.Exported` of the installed jax the function came from, made on
        request (None for other sources)."""
        return self.convention.exported(self.program)

    def with_params(self, params: dict) -> "Function":
        """This function with the bound weights `params` names replaced (the others kept);
        values are checked, never converted, and may be tracers (`jax.grad` w.r.t. them)."""
        new = copy.copy(self)
        new.convention = self.convention.with_params(params)
        new.__dict__.pop("_call", None)
        return new

    __repr__ = lambda self: f"<shlo2jax.Function {self.signature}>"  # noqa: E731

    def _repr_html_(self) -> str:
        """In a notebook: the arguments and results as a table, and how the function runs."""
        how = f"lowering: {self.lowering}" + (f" ({self.lowering_note})"
                                              if self.lowering_note else "")
        source = self.signature.partition("  [")[2].rstrip("]")
        note = "; ".join(part for part in (source, how) if part)
        return signatures.html(self.name, self.arg_names, self.in_avals, self.result_names,
                               self.out_avals, note)

    def bind_keywords(self, args: tuple, kwargs: dict) -> tuple:
        """The positional arguments, completed by keyword arguments named by `arg_names`
        (too few positional arguments: an error naming the missing ones)."""
        if not kwargs and len(args) >= len(self.in_avals):
            return args
        return names.bind_keywords(self.arg_names, args, kwargs, self.signature)

    def check_arguments(self, args) -> None:
        """TypeError unless `args` are what a call takes (see the class docstring)."""
        self.convention.check_arguments(args)

    def check_module_arguments(self, args) -> None:
        """TypeError unless `args` are the module function's arguments."""
        signatures.check_types(args, self.input_types, self.module_arg_names,
                               self.module_name, self.signature)

    def taking_storage_integers(self, body):
        """`body` (of this function's arguments), taking quantized arguments as their raw
        storage integers too."""
        return quant.taking_storage_integers(self.input_types, body)

    def coerce_f6(self, args) -> tuple:
        """ml_dtypes float6 arguments as F6Arrays (jax cannot hold f6); the others as given."""
        return quant.coerced_f6(self.input_types, args)

    # -- sharded programs (see shlo2jax.executables.sharded)

    @property
    def is_sharded(self) -> bool:
        """Whether the program is partitioned over several devices (mhlo.num_replicas *
        mhlo.num_partitions > 1)."""
        return self.program.sharding.num_devices > 1

    @property
    def mesh(self):
        """The `jax.sharding.Mesh` the program runs on (its `sdy.mesh`, or for GSPMD shardings
        a mesh over the first num_partitions devices whose axes express them); None for a
        one-device program."""
        return self.program.sharding.mesh if self.is_sharded else None

    @property
    def in_shardings(self) -> tuple:
        """The declared sharding of each argument as a `NamedSharding` on `mesh` (None where
        the program leaves it open); all None for a one-device program."""
        return named_shardings(self.program, self._definition.arg_attrs, self.input_types)

    @property
    def out_shardings(self) -> tuple:
        return named_shardings(self.program, self._definition.result_attrs, self.output_types)

    def __call__(self, *args, **kwargs):
        return self.convention.returned(self._call(*self.bind_keywords(args, kwargs)))

    def call(self, *args) -> tuple:
        """The flat results (a tuple) of a call with positional arguments."""
        return self._call(*args)

    @functools.cached_property
    def _call(self):
        convention = self.convention

        def run(*args):
            return convention.flat_results(self.call_module(*convention.module_arguments(args)))
        return convention.wrap(run)

    def call_module(self, *args) -> tuple:
        """The module function's results (a tuple) for its positional arguments."""
        self.check_module_arguments(args)
        return self.executable(*self.coerce_f6(args))
