"""`assemble`: what a source read (`sources.Source`) -> the `Program`, built once.

The one path every program takes, a loaded one and those made from a loaded program's module
later (a refined copy, the ops of islands): the module's functions' signatures or its decoded
ops (`decode`, the one place a module is decoded, now or on first use), the program built
with each function's calling convention (`shlo2jax.conventions`, as the source says) and its
executable (`shlo2jax.executables`). Nothing edits a Program after it is built.
"""

from __future__ import annotations

import dataclasses
import functools

from shlo2jax import decoding, sources
from shlo2jax.executables import direct
from shlo2jax.executables.direct import scan as direct_scan
from shlo2jax.module import ModuleDef
from shlo2jax.options import LoadOptions
from shlo2jax.memory import return_freed_memory
from shlo2jax.program import Program


@dataclasses.dataclass(frozen=True)
class Assembly:
    """How one load builds its programs: its options and the name errors give the input."""
    options: LoadOptions
    source_name: str

    def decode(self, mlir_module, signatures_suffice=None) -> ModuleDef:
        """The decoded module (`shlo2jax.decoding`); its signatures only where
        `signatures_suffice` holds of them."""
        return decoding.decode(mlir_module, self.source_name, self.options, signatures_suffice)

    def program(self, mlir_module) -> Program:
        """The program of another `ir.Module`, built as this load builds its programs."""
        return assemble(sources.Source(mlir_module, self.source_name), self.options)

    def lazy_entry(self, make_source) -> "LazyEntry":
        """The entry function of the program of `make_source()`, read and built on first call."""
        return LazyEntry(make_source, self.options)


def assemble(source: sources.Source, options: LoadOptions) -> Program:
    """The program of `source`, loaded with `options`."""
    assembly = Assembly(options, source.name)
    mlir_module, conventions = source.mlir_module, source.conventions
    del source  # (the module is the program's now: the last references go below)
    scan = main_lowers_directly = None
    if options.lowering == "direct":
        # A program whose @main lowers directly is not decoded until something needs its
        # translation (shlo2jax.executables.direct): loading it is parsing it and one walk.
        with mlir_module.context, decoding.names_read_as_utf8(assembly.source_name):
            scan = direct_scan(mlir_module, assembly.source_name)
        if scan.blocker is None:
            main_lowers_directly = functools.partial(direct.main_lowers_directly,
                                                     mlir_module=mlir_module, scan=scan)
    module = assembly.decode(mlir_module, main_lowers_directly)
    program = Program(assembly, mlir_module, module, scan=scan, conventions=conventions)
    if program.released_mlir_module:
        del mlir_module, module  # the last references: the context goes here
        return_freed_memory()
    return program


class LazyEntry:
    """The entry function of a program loaded on its first call (the producer's VJP of a
    `jax.export` artifact, `make_source()` its `ExportRecord`: reading it costs as much as the
    artifact itself, and only reverse mode needs it)."""

    def __init__(self, make_source, options: LoadOptions):
        self._make_source, self._options = make_source, options

    @functools.cached_property
    def entry(self):
        return assemble(sources.read(self._make_source()), self._options).entry

    def __call__(self, *args):
        return self.entry(*args)
