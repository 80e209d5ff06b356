"""`load()`: any supported input -> `Program`.

The walk of one input: its options decided (`LoadOptions`), the source read
(`shlo2jax.sources`), the program built from what it read (`shlo2jax.assembly`).
"""

from __future__ import annotations

from typing import Optional

from shlo2jax import sources
from shlo2jax.assembly import assemble
from shlo2jax.memory import gc_paused
from shlo2jax.options import LoadOptions
from shlo2jax.program import Program


def load(source, options: Optional[LoadOptions] = None, *, source_name: str = "",
         module: Optional[str] = None, signature: Optional[str] = None,
         **option_values) -> Program:
    """Loads a StableHLO program.

    `source` is MLIR text (a str), a path to a `.mlir` / `.mlir.bc` / `.bc` file,
    MLIR bytecode or a VHLO portable artifact (bytes), a `jax.export.Exported`,
    or the bytes of a serialized `Exported` (`Exported.serialize()`); or XLA's HLO: HLO text
    (`HloModule ...`), a serialized `HloModuleProto` (or the `HloProto` a `.hlo.pb` dump file
    holds), or an `XLA_FLAGS=--xla_dump_to=DIR` folder, whose `before_optimizations` program
    is read (`module` names one where the folder holds several: its name, `"jit_f"`, its file
    prefix or its number). Or a TensorFlow SavedModel folder that jax2tf wrote (native
    serialization: an `XlaCallModule`), read without TensorFlow, or one TensorFlow computes
    itself, read through TensorFlow's XLA bridge (the `[tf]` extra): `signature` names the
    signature (default `"serving_default"`), whose function takes the signature's inputs by
    name with the variables bound as weights (docs/guides/saved_model.md). Whatever the
    input, the entry function is `program["main"]`.

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
    - `untrusted=True`: the input is read in a child process first, with a time limit, so
      that an input that would hang or crash jaxlib's readers is a `LoadError` (for input
      that must never hang the caller; a few seconds more per load).

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
        if options.untrusted:
            sources.read_in_child(source, source_name, module, signature)
        return assemble(sources.read(source, source_name, module, signature), options)


def _load_builtin_rules() -> None:
    """The built-in op families register their rules when imported: at the first load, so that
    `import shlo2jax` stays light (rules the user registered before keep precedence)."""
    import shlo2jax.ops  # noqa: F401
