"""`Program`: a loaded module, its public functions (`shlo2jax.function.Function`) by name.

A `Program` is built once, by `shlo2jax.assembly.assemble`, and is not edited after.
"""

from __future__ import annotations

import functools
import html

from shlo2jax import held_module
from shlo2jax.errors import LoadError
from shlo2jax.executables.direct import scan as direct_scan
from shlo2jax.function import Function
from shlo2jax.module import ModuleDef
from shlo2jax.options import LoadOptions
from shlo2jax.spmd import manual_regions, mesh
from shlo2jax.translate import Translator


class Program:
    """A loaded StableHLO module. Calling it calls its entry function."""

    def __init__(self, assembly, mlir_module, module: ModuleDef, *, scan=None,
                 conventions=None):
        """Built by `shlo2jax.assembly.assemble` (`assembly`: how, the options among it), once.

        `module` decoded; or only its functions' signatures (`module.signatures_only`, where
        @main lowers directly: see shlo2jax.executables.direct): the program then holds its
        module as bytecode and decodes it on first use of `module`. `scan`: the assembly's
        `direct.scan` of the module, when it made one. `conventions`: module function name ->
        the factory of its calling convention (`sources.Source.conventions`; the others take
        their own)."""
        self.assembly = assembly
        self.options: LoadOptions = assembly.options
        self.source_name: str = assembly.source_name
        self._module, self._decoded = module, not module.signatures_only
        if scan is not None:
            self.direct_scan = scan
        self._held = held_module.HeldModule(mlir_module)
        self.sharding = mesh.ShardingContext(module, mlir_module)
        conventions = dict(conventions or {})
        self.functions: dict[str, Function] = {}
        for name, fdef in module.functions.items():
            if not fdef.public:
                continue
            make = conventions.pop(name, None)
            function = Function(self, fdef, make(fdef, assembly) if make else None)
            self.functions[function.name] = function
        if conventions:
            raise LoadError(f"{self.source_name}: the module has no public function "
                            f"{', '.join('@' + n for n in conventions)}, whose calling "
                            "convention the source gives")
        if self._decoded:
            self._held.release(module)
        else:
            self._held.hold_bytecode()  # @main lowers from the module's bytecode

    @property
    def module(self) -> ModuleDef:
        """The decoded module: every op as a record the translation runs. A program loaded to
        lower directly decodes it here, on first use (an `UnsupportedError` then lists what
        it cannot translate, at each use until it can)."""
        return self._module if self._decoded else self.decode()

    def decode(self) -> ModuleDef:
        """Decodes the module (the assembly's `decode`), once."""
        if not self._decoded:
            parsed = self._held.module()  # (where held as bytecode, a parse of it: once)
            self._module = self.assembly.decode(parsed)
            self._decoded, self.sharding = True, mesh.ShardingContext(self._module, parsed)
            self._held.release(self._module)
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
        on each access where the program let it go (see `shlo2jax.held_module.HeldModule`).""")

    released_mlir_module = property(lambda self: self._held.released,
                                    doc="Whether the program let its MLIR module go.")
    mlir_bytecode = property(lambda self: self._held.bytecode(),
                             doc="The module as bytecode (where held so, those bytes).")

    @property
    def exported(self):
        """The `jax.export.Exported` the program was loaded from (None for other sources)."""
        main = self.functions.get("main")
        return None if main is None else main.exported

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
        """The program of another module made from this one's (a refined copy with `?`
        dimensions specialised: shlo2jax.executables.polymorphic; the ops of its islands),
        built the same way, with this program's options; its functions take their own
        calling conventions."""
        return self.assembly.program(mlir_module)

    @property
    def num_replicas(self) -> int:
        return int(self._module.attrs.get("mhlo.num_replicas", 1))

    @property
    def num_partitions(self) -> int:
        return int(self._module.attrs.get("mhlo.num_partitions", 1))

    def op_histogram(self) -> dict:
        """Op name -> how many times it occurs, most frequent first."""
        return self.module.op_histogram()

    def _repr_html_(self) -> str:
        """In a notebook: the program's name and each public function's table."""
        name = html.escape(self._module.name or self.source_name or "module")
        return (f"<div><b>shlo2jax.Program</b> {name}"
                + "".join(f._repr_html_() for f in self.functions.values()) + "</div>")

    def __repr__(self):
        name = self._module.name or self.source_name or "module"
        return f"<shlo2jax.Program {name}: {', '.join(f.signature for f in self.functions.values())}>"
