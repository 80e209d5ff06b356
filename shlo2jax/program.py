"""`Program` and `Function`: the user-facing callables.

A `Function` is a facade: its signature, its argument names, the check of a call's arguments,
and one executable chosen when the program is loaded (`shlo2jax.executables`) that runs it.
"""

from __future__ import annotations

import functools
from typing import Optional

from shlo2jax import decoding, executables, names, outline, quant, signatures
from shlo2jax import types as T
from shlo2jax.executables.direct import scan as direct_scan
from shlo2jax.module import FunctionDef, ModuleDef
from shlo2jax.options import LoadOptions
from shlo2jax.spmd import manual_regions, mesh, named_shardings
from shlo2jax.translate import Translator


class Function:
    """One function of a program, callable like a JAX function.

    64-bit types work without the user enabling `jax_enable_x64`: calls run with x64 enabled
    inside the library. Arguments are never converted: a wrong count, shape or dtype raises
    `TypeError`. How a call runs (translated, lowered directly, partitioned over the program's
    mesh, specialised to `?` dimensions) was decided at load: see `executable` and `lowering`.
    """

    def __init__(self, program: "Program", fdef: FunctionDef):
        self.program = program
        self._definition = fdef  # its signature; its body too once the program is decoded
        self.name = fdef.name
        self.input_types: tuple = fdef.input_types
        self.output_types: tuple = fdef.output_types
        # `?` dimensions: each call specialises the module to its arguments' shapes.
        self.is_polymorphic = any(isinstance(t, T.TensorType) and not t.is_static
                                  for t in self.input_types + self.output_types)
        self.lowering_note: Optional[str] = executables.why_translated(self)
        self.executable: executables.Executable = executables.choose(self)

    @property
    def definition(self) -> FunctionDef:
        """The decoded function (decoding the program on first use, see `Program.module`)."""
        if self._definition.body is None:
            self._definition = self.program.module.functions[self.name]
        return self._definition

    lowering = property(lambda self: self.executable.lowering, doc=""""direct" when calls and jit
        lower this function to the module's own ops (`load(..., lowering="direct")`, where it
        allows it), else "translate". `lowering_note` says why it is translated ("not asked
        for" by default); `islands`, which of its ops lower from their translation inside it.""")
    islands = property(lambda self: getattr(self.executable, "islands", ()), doc="""An `Island`
        (op, location, why) per op lowered from its translation (shlo2jax.executables.islands).""")

    @property
    def in_avals(self) -> tuple:
        """Inputs as `jax.ShapeDtypeStruct`s (a TensorType where a dimension is dynamic)."""
        return tuple(signatures.aval(t) for t in self.input_types)

    @property
    def out_avals(self) -> tuple:
        return tuple(signatures.aval(t) for t in self.output_types)

    @property
    def signature(self) -> str:
        """`@main(w1: f32[8,16], x: f32[2,8]) -> (f32[2,4])`, named by `arg_names`."""
        return signatures.text(self.name, self.input_types, self.output_types, self.arg_names)

    __repr__ = lambda self: f"<shlo2jax.Function {self.signature}>"  # noqa: E731

    @functools.cached_property
    def arg_names(self) -> tuple:
        """Each argument's name as the module gives it (shlo2jax.names: jax's argument paths,
        `tf_saved_model.index_path`, ...), else `arg_<i>`; unique. A call takes them as
        keyword arguments."""
        return names.with_fallback(names.module_argument_names(self.program, self._definition),
                                   "arg")

    @functools.cached_property
    def result_names(self) -> tuple:
        """Each result's name (`jax.result_info`, ...), else `result_<i>`; unique."""
        return names.with_fallback(names.module_result_names(self.program, self._definition),
                                   "result")

    def bind_keywords(self, args: tuple, kwargs: dict) -> tuple:
        """The positional arguments, completed by keyword arguments named by `arg_names`
        (too few positional arguments: an error naming the missing ones)."""
        if not kwargs and len(args) >= len(self.in_avals):
            return args
        return names.bind_keywords(self.arg_names, args, kwargs, self.signature)

    def check_arguments(self, args) -> None:
        signatures.check_arguments(self, args)

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
        outs = self.call_module(*self.bind_keywords(args, kwargs))
        return outs[0] if len(outs) == 1 else outs

    def call_module(self, *args) -> tuple:
        """The module function's results (a tuple) for its positional arguments."""
        self.check_arguments(args)
        return self.executable(*self.coerce_f6(args))


class Program:
    """A loaded StableHLO module. Calling it calls its entry function."""

    def __init__(self, module: ModuleDef, mlir_module, source_name: str, options: LoadOptions,
                 decoded: bool = True, scan=None):
        """`module` decoded; or, with `decoded=False`, only its functions' signatures
        (`decoding.signatures`): the ops are decoded on first use of `module` (a program
        that lowers directly: see shlo2jax.executables.direct). `scan`: the loader's
        `direct.scan` of the module, when it made one."""
        self._module = module
        if scan is not None:
            self.direct_scan = scan
        self._decoded = decoded
        self.options = options
        self.source_name = source_name
        self._held = outline.HeldModule(mlir_module)
        self.sharding = mesh.ShardingContext(module, mlir_module)
        self.functions: dict[str, Function] = {
            name: Function(self, fdef) for name, fdef in module.functions.items() if fdef.public}

    @property
    def module(self) -> ModuleDef:
        """The decoded module: every op as a record the translation runs. A program loaded to
        lower directly decodes it here, on first use (an `UnsupportedError` then lists what
        it cannot translate, at each use until it can)."""
        if not self._decoded:
            parsed = self._held.module()  # (where held as bytecode, a parse of it: once)
            self._module = decoding.decode(parsed, self.source_name, self.options)
            self._decoded, self.sharding = True, mesh.ShardingContext(self._module, parsed)
            self.release_mlir_module()
        return self._module

    decoded = property(lambda self: self._decoded, doc="Whether the ops are decoded (`module`).")

    @functools.cached_property
    def translator(self) -> Translator:
        """The translation of the module (its traced callees are kept)."""
        return Translator(self.module, self.options)

    has_manual_regions = functools.cached_property(
        lambda self: manual_regions.has_manual_regions(self.module))

    @functools.cached_property
    def direct_scan(self):
        """What `shlo2jax.executables.direct.scan` finds in the module."""
        return direct_scan(self.mlir_module, self.source_name)

    mlir_module = property(lambda self: self._held.module(), doc="""The verified `ir.Module` the
        program was decoded from (for the reference interpreter, XLA, shape refinement); rebuilt
        on each access where the program let it go (see `shlo2jax.outline.HeldModule`).""")

    released_mlir_module = property(lambda self: self._held.released,
                                    doc="Whether the program let its MLIR module go.")
    mlir_bytecode = property(lambda self: self._held.bytecode(),
                             doc="The module as bytecode (where held so, those bytes).")

    def release_mlir_module(self, as_bytecode: bool = False) -> bool:
        """Lets the MLIR module and its context go when the program's large constants add up
        to `outline.RELEASE_BYTES`, or holding it as bytecode (`as_bytecode`: a program that
        lowers directly lowers from those bytes); whether it did."""
        return self._held.hold_bytecode() if as_bytecode else self._held.release(self._module)

    @property
    def exported(self):
        """The `jax.export.Exported` the program was loaded from (None for other sources)."""
        main = self.functions.get("main")
        return getattr(main, "exported", None)

    @property
    def entry(self) -> Function:
        if "main" in self.functions:
            return self.functions["main"]
        if len(self.functions) == 1:
            return next(iter(self.functions.values()))
        raise ValueError("the program has no @main and several public functions "
                         f"({', '.join(self.functions)}); pick one with program[name]")

    def __getitem__(self, name: str) -> Function:
        try:
            return self.functions[name]
        except KeyError:
            raise KeyError(f"no public function @{name}; public functions: "
                           f"{', '.join(self.functions)}") from None

    def __call__(self, *args, **kwargs):
        return self.entry(*args, **kwargs)

    def refined(self, mlir_module) -> "Program":
        """The program of a refined copy of this program's module (`?` dimensions specialised:
        shlo2jax.executables.polymorphic), decoded with this program's options."""
        program = Program(decoding.decode(mlir_module, self.source_name, self.options),
                          mlir_module, self.source_name, self.options)
        program.release_mlir_module()
        return program

    @property
    def num_replicas(self) -> int:
        return int(self._module.attrs.get("mhlo.num_replicas", 1))

    @property
    def num_partitions(self) -> int:
        return int(self._module.attrs.get("mhlo.num_partitions", 1))

    def op_histogram(self) -> dict:
        """Op name -> how many times it occurs, most frequent first."""
        return self.module.op_histogram()

    def __repr__(self):
        name = self._module.name or self.source_name or "module"
        return f"<shlo2jax.Program {name}: {', '.join(f.signature for f in self.functions.values())}>"
