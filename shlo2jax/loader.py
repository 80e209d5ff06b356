"""`load()`: any supported input -> `Program`.

The walk of one input: its options decided (`LoadOptions`), the source read
(`shlo2jax.sources`), its module decoded (`shlo2jax.decoding`; for a program that lowers
directly, only its signatures, see `shlo2jax.executables.direct`), the `Program` made, whose
functions choose their executables (`shlo2jax.executables`).
"""

from __future__ import annotations

import functools
from typing import Optional

from shlo2jax import decoding, sources
from shlo2jax.executables.direct import scan as direct_scan
from shlo2jax.executables.exported import ExportedFunction
from shlo2jax.options import LoadOptions
from shlo2jax.memory import return_freed_memory
from shlo2jax.program import Program
from shlo2jax.sources.jax_export import record_of
from shlo2jax.memory import gc_paused


def load(source, options: Optional[LoadOptions] = None, *, source_name: str = "",
         module: Optional[str] = None, **option_values) -> Program:
    """Loads a StableHLO program.

    `source` is MLIR text (a str), a path to a `.mlir` / `.mlir.bc` / `.bc` file,
    MLIR bytecode or a VHLO portable artifact (bytes), a `jax.export.Exported`,
    or the bytes of a serialized `Exported` (`Exported.serialize()`); or XLA's HLO: HLO text
    (`HloModule ...`), a serialized `HloModuleProto` (or the `HloProto` a `.hlo.pb` dump file
    holds), or an `XLA_FLAGS=--xla_dump_to=DIR` folder, whose `before_optimizations` program
    is read (`module` names one where the folder holds several: its name, `"jit_f"`, its file
    prefix or its number). Whatever the input, the entry function is `program["main"]`.

    How it is loaded: `options` (a `shlo2jax.LoadOptions`), and any of its fields as keyword
    arguments, which override those of `options`:

    - `placeholder_data=True` fills `dense_resource<__elided__>` constants with data seeded
      by `seed` instead of refusing to load.
    - `strict` (default True): every unsupported op or type is reported together in one
      `UnsupportedError`.
    - `gradients="strong_zero"` (default) differentiates the ops whose local derivative can
      be infinite so that a zero cotangent contributes zero (no 0 * inf = NaN from the
      unselected branch of a decomposed special function); `"lax"` keeps lax's plain rules.
    - `max_loop_trips` bounds the iterations of while loops whose trip count depends on the
      data, so reverse mode can go through them (an int, or a mapping from a loop's location
      to its bound).
    - `producer_vjp` (default True): a `jax.export` artifact serialized with
      `vjp_order >= 1` carries its producer's VJP, and reverse mode uses it.
    - `lowering="direct"`: where a function allows it, `jit` and calls lower it to the
      module's own ops, as XLA would compile the module; derivatives and vmap still trace
      the translation. A program whose @main lowers directly is decoded only when the
      translation is first needed (`Program.decoded`), and what it cannot translate is
      reported then. `Function.lowering` says which lowering a function uses.

    The program keeps the options as `program.options`; a tool that loads it again passes
    them on (`load(text, options=program.options)`).
    """
    fields = {f for f in LoadOptions.__dataclass_fields__}
    unknown = sorted(set(option_values) - fields)
    if unknown:
        raise TypeError(f"load() got unknown option(s) {', '.join(unknown)}; the options are "
                        f"{', '.join(sorted(fields))} (see shlo2jax.LoadOptions)")
    options = LoadOptions.of(options, **option_values)
    # Reading and decoding allocate long-lived objects and almost no cyclic garbage: the
    # collector's passes over them (~8% of a 50k-op load) free nothing.
    with gc_paused():
        _load_builtin_rules()
        return _program_of(sources.read(source, source_name, module), options)


def _program_of(source: sources.Source, options: LoadOptions) -> Program:
    mlir_module, name, exported, owned = (source.mlir_module, source.name, source.exported,
                                          source.owned)
    convention = source.convention
    program = None
    scan = None
    as_bytecode = False
    if options.lowering == "direct":
        # A program whose @main lowers directly is not decoded until something needs its
        # translation (shlo2jax.executables.direct): loading it is parsing it and one walk.
        with mlir_module.context, decoding.names_read_as_utf8(name):
            scan = direct_scan(mlir_module, name)
        signatures = decoding.signatures(mlir_module, name) if scan.blocker is None else None
        if signatures is not None:
            program = Program(signatures, mlir_module, name, options, decoded=False, scan=scan)
            main = program.functions.get("main")
            if main is None or main.lowering != "direct":
                program.module  # noqa: B018 - decodes it now: nothing lowers directly
            else:  # @main lowers from the module's bytecode: held so below
                as_bytecode = True
    if program is None:
        program = Program(decoding.decode(mlir_module, name, options), mlir_module, name,
                          options, scan=scan)
        if program.release_mlir_module():
            del source, mlir_module  # the last references: the context goes here
            return_freed_memory()
    if exported is not None:
        _take_exported_convention(program, exported, options,
                                  owned and (as_bytecode or program.released_mlir_module))
    if convention is not None:
        convention(program)  # the source's calling convention (sources.Source.convention)
    if as_bytecode:
        # The module's bytecode, written once the Exported's module bytes went; the parsed
        # module (its context holds the weights once more) goes with the last references.
        del source, mlir_module, exported
        program.release_mlir_module(as_bytecode=True)
        return_freed_memory()
    return program


def _take_exported_convention(program: Program, exported, options: LoadOptions,
                              drop_bytes: bool) -> None:
    """The program came from a `jax.export` artifact (`exported`: its `ExportRecord`, or the
    live `jax.export.Exported` the user gave): its entry function takes the exported
    function's arguments (`ExportedFunction`), which lets the record's module bytes go with
    `drop_bytes` (a record the loader read from serialized bytes, whose program lets its
    module go)."""
    main = program.functions.get("main")
    if main is None:
        return
    record = record_of(exported)
    vjp = _LazyProgram(record.vjp, options) if options.producer_vjp and record.has_vjp() \
        else None
    function = ExportedFunction.wrapping(main, record, vjp)
    if drop_bytes:
        function.drop_module_bytes()
    program.functions["main"] = function


class _LazyProgram:
    """The entry function of a program loaded on its first call (the producer's VJP of a
    `jax.export` artifact, `make_source()` its `ExportRecord`: reading it costs as much as the
    artifact itself, and only reverse mode needs it)."""

    def __init__(self, make_source, options: LoadOptions):
        self._make_source, self._options = make_source, options

    @functools.cached_property
    def entry(self):
        return _program_of(sources.read(self._make_source()), self._options).entry

    def __call__(self, *args):
        return self.entry(*args)


def _load_builtin_rules() -> None:
    """The built-in op families register their rules when imported: at the first load, so that
    `import shlo2jax` stays light (rules the user registered before keep precedence)."""
    import shlo2jax.ops  # noqa: F401
