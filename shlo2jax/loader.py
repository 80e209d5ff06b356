"""`load()`: any StableHLO artifact -> `Program`, through jaxlib's MLIR bindings."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from typing import Mapping, Union

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from shlo2jax._jax_internals import make_ir_context
from shlo2jax.chlo_legalize import legalize_chlo
from shlo2jax.errors import LoadError, UnsupportedError
from shlo2jax.direct import scan as direct_scan
from shlo2jax.module import decode_module, decode_signatures
from shlo2jax.options import TranslationOptions
from shlo2jax.outline import return_freed_memory
from shlo2jax.program import Program
from shlo2jax.safe_parse import (BYTECODE_MAGIC, check_bytecode, check_text, printed_problem,
                                 parse_in_child)
from shlo2jax.translate import gc_paused



def _diagnostic(e: Exception, source_name: str) -> str:
    text = str(e).strip()
    return text.replace('"-":', f'"{source_name}":') if source_name else text


def parse_mlir(source: Union[str, bytes], context: ir.Context, source_name: str = "") -> ir.Module:
    """MLIR text, MLIR bytecode or a VHLO portable artifact -> a verified `ir.Module`.

    Malformed input raises `LoadError`, never aborts the process: the input is checked
    before jaxlib parses it (see `shlo2jax.safe_parse`)."""
    where = f" {source_name}" if source_name else ""
    if isinstance(source, bytes) and not source.startswith(BYTECODE_MAGIC):
        try:
            source = source.decode("utf-8")
        except UnicodeDecodeError as e:
            raise LoadError(f"cannot read{where}: neither MLIR bytecode (no `ML\\xefR` magic) "
                            f"nor UTF-8 text (byte 0x{source[e.start]:02x} at offset "
                            f"{e.start})") from None
    verdict = check_bytecode(source) if isinstance(source, bytes) else check_text(source)
    if verdict.error:
        raise LoadError(f"cannot read MLIR{where}: {verdict.error}")
    if not verdict.safe:
        child = parse_in_child(source, source_name)
        if not child.ok:
            message = child.message.replace('"-":', f'"{source_name}":') if source_name else child.message
            raise LoadError(f"cannot read MLIR{where}: {message} ({verdict.why})")
    if isinstance(source, bytes):
        # A VHLO artifact is checked as the bytecode it is before it is converted (the
        # conversion is where a location in an attribute's place crashes), and converted
        # (its names are read from the StableHLO module); plain bytecode parsed here is
        # the module. See `printed_problem` for what the checks look for.
        with context:
            try:
                module = ir.Module.parse(source)
            except Exception:  # noqa: BLE001 - parse_mlir_unchecked reports it
                module = None
        if module is not None:
            escaped = _check_printed(module, where)
            if not _is_vhlo(module):
                return module
            converted = parse_mlir_unchecked(source, context, source_name)
            # A VHLO module prints its names as string values: where some string holds
            # bytes outside ASCII, the converted module's names are checked again. Where
            # none does, a second print and scan (~0.4 s on a 50k-op model) finds nothing
            # (and a location in an attribute's place would have failed the conversion).
            if escaped:
                _check_printed(converted, where)
            return converted
    module = parse_mlir_unchecked(source, context, source_name)
    _check_printed(module, where)
    return module


def _is_vhlo(module: ir.Module) -> bool:
    return any(op.operation.name.startswith("vhlo.") for op in module.body.operations)


def _check_printed(module: ir.Module, where: str) -> bool:
    """Raises LoadError for what would abort the process; -> whether a string holds bytes
    outside ASCII (see `printed_problem`)."""
    problem, escaped = printed_problem(module)
    if problem:
        raise LoadError(f"cannot read MLIR{where} (corrupt input): {problem}")
    return escaped


def parse_mlir_unchecked(source: Union[str, bytes], context: ir.Context,
                         source_name: str = "") -> ir.Module:
    """`parse_mlir` without the check: input that makes jaxlib emit a diagnostic with bytes
    that are not UTF-8 aborts the process."""
    where = f" {source_name}" if source_name else ""
    with context:
        if isinstance(source, bytes):
            try:
                module = stablehlo.deserialize_portable_artifact(context, source)
            except Exception as vhlo_error:  # not VHLO: plain (stablehlo) bytecode
                try:
                    module = ir.Module.parse(source)
                except Exception as e:
                    raise LoadError(f"cannot read MLIR bytecode{where}: {_diagnostic(e, source_name)} "
                                    f"(as a VHLO artifact: {_diagnostic(vhlo_error, source_name)})") from None
        else:
            try:
                module = ir.Module.parse(source)
            except Exception as e:
                raise LoadError(f"cannot parse MLIR{where}: {_diagnostic(e, source_name)}") from None
    # No separate `verify()`: parsing (text or bytecode) verifies the module, and so does the
    # pass pipeline that turns a VHLO artifact into StableHLO; a second walk costs ~1 us/op.
    return module


def _from_exported(exported, options, owned: bool = False) -> Program:
    """The program of a `jax.export.Exported`. `owned`: the loader made it (from serialized
    bytes): when the program lets its MLIR module go, the `Exported` it keeps drops its module
    bytes too (they hold the weights once more; `Program.exported` rebuilds them)."""
    program = load(bytes(exported.mlir_module_serialized),
                   source_name=f"jax.export:{exported.fun_name}", **options)
    if owned and program.released_mlir_module:
        exported = dataclasses.replace(exported, mlir_module_serialized=b"")
    program.set_exported(exported, lambda: load(exported.vjp(), **options))
    return program


def load(source, *, placeholder_data: bool = False, seed: int = 0, source_name: str = "",
         strict: bool = True, gradients: str = "strong_zero",
         max_loop_trips: Union[None, int, Mapping[str, int]] = None,
         producer_vjp: bool = True, lowering: str = "translate") -> Program:
    """Loads a StableHLO program.

    `source` is MLIR text (a str), a path to a `.mlir` / `.mlir.bc` / `.bc` file,
    MLIR bytecode or a VHLO portable artifact (bytes), a `jax.export.Exported`,
    or the bytes of a serialized `Exported` (`Exported.serialize()`).

    `placeholder_data=True` fills `dense_resource<__elided__>` constants with
    data seeded by `seed` instead of refusing to load. With `strict` (default),
    every unsupported op or type is reported together in one `UnsupportedError`.

    Derivatives: `gradients="strong_zero"` (default) differentiates the ops whose local
    derivative can be infinite so that a zero cotangent contributes zero (no 0 * inf = NaN
    from the unselected branch of a decomposed special function); `"lax"` keeps lax's plain
    rules. `max_loop_trips` bounds the iterations of while loops whose trip count depends on
    the data, so reverse mode can go through them (an int, or a mapping from a loop's
    location to its bound). A `jax.export` artifact serialized with `vjp_order >= 1` carries
    its producer's VJP: with `producer_vjp` (default) reverse mode uses it.

    `lowering="direct"`: where a function allows it (see `shlo2jax.direct`), `jit` and calls
    lower it to the module's own ops, as XLA would compile the module; derivatives and vmap
    still trace the translation. A program whose @main lowers directly is decoded only when
    the translation is first needed (`Program.decoded`), and what it cannot translate is
    reported then. `Function.lowering` says which lowering a function uses.
    """
    TranslationOptions(gradients=gradients, max_loop_trips=max_loop_trips)  # validates them
    from shlo2jax.direct import LOWERINGS
    if lowering not in LOWERINGS:
        raise ValueError(f"lowering must be one of {LOWERINGS}, got {lowering!r}")
    options = dict(placeholder_data=placeholder_data, seed=seed, strict=strict,
                   gradients=gradients, max_loop_trips=max_loop_trips, producer_vjp=producer_vjp,
                   lowering=lowering)
    try:
        from jax import export as jax_export
        if isinstance(source, jax_export.Exported):
            return _from_exported(source, options)
    except ImportError:  # pragma: no cover - jax always has export in the pinned range
        pass
    if isinstance(source, os.PathLike) or (
            isinstance(source, str) and "\n" not in source and "{" not in source
            and len(source) < 4096 and os.path.exists(source)):
        path = os.fspath(source)
        with open(path, "rb") as f:
            data = f.read()
        return load(data, source_name=source_name or path, **options)
    if isinstance(source, (bytearray, memoryview)):
        source = bytes(source)
    if isinstance(source, str) and "\n" not in source and source.endswith((".mlir", ".bc")):
        raise LoadError(f"no such file: {source}")
    if isinstance(source, bytes) and not source.startswith(BYTECODE_MAGIC):
        exported = _try_deserialize_exported(source)
        if exported is not None:
            return _from_exported(exported, options, owned=True)
    _load_builtin_rules()
    context = make_ir_context()
    mlir_module = parse_mlir(source, context, source_name)
    decode = functools.partial(_decoded_module, mlir_module, source_name=source_name,
                               placeholder_data=placeholder_data, seed=seed, strict=strict,
                               translation_options=TranslationOptions(
                                   gradients=gradients, max_loop_trips=max_loop_trips))
    program_options = {k: v for k, v in options.items() if k != "strict"}
    scan = None
    if lowering == "direct":
        # A program whose @main lowers directly is not decoded until something needs its
        # translation (shlo2jax.direct): loading it is parsing it and one walk.
        with context, _names_read_as_utf8(source_name):
            scan = direct_scan(mlir_module, source_name)
            signatures = decode_signatures(mlir_module, source_name=source_name) \
                if scan.blocker is None else None
        if signatures is not None:
            program = Program(signatures, mlir_module, source_name, program_options,
                              decode=decode, direct_scan=scan)
            main = program.functions.get("main")
            if main is None or main.lowering != "direct":
                program.module  # noqa: B018 - decodes it now: nothing lowers directly
            return program
    program = Program(decode(), mlir_module, source_name, program_options, direct_scan=scan)
    if program.release_mlir_module():
        del decode, mlir_module, context  # the last references: the context goes here
        return_freed_memory()
    return program


def _decoded_module(mlir_module, *, source_name, placeholder_data, seed, strict,
                    translation_options):
    """The program's decoded module; CHLO ops without a translation rule decomposed by jaxlib's
    pass first. `strict`: every unsupported construct raised together."""
    # Decoding allocates a few long-lived records per op and no cyclic garbage: the collector's
    # repeated full passes over the growing heap cost ~20% of a large load and free nothing
    # (paused, the records are scanned once, on its next pass).
    with gc_paused(), mlir_module.context:
        decode = functools.partial(_decode, mlir_module, source_name=source_name,
                                   placeholder_data=placeholder_data, seed=seed, strict=False)
        module = decode()
        missing_chlo = {name for name, _, _ in module.problems if name.startswith("chlo.")}
        # CHLO ops without a direct translation: decompose with jaxlib's pass, decode again.
        if missing_chlo and legalize_chlo(mlir_module, missing_chlo):
            module = decode()
    if strict and module.problems:
        raise UnsupportedError(module.problems)
    module.translation_options = translation_options
    return module


@contextlib.contextmanager
def _names_read_as_utf8(source_name: str):
    """Reports a name that is not UTF-8 (an op, a symbol, a type) as the malformed input it is.
    jaxlib raises a RuntimeError ("conversion error") reading one; inside a walk's callback,
    a RuntimeError that carries the callback's error."""
    where = f" {source_name}" if source_name else ""
    try:
        yield
    except UnicodeDecodeError as e:
        raise LoadError(f"cannot read{where}: a name in the module is not UTF-8 "
                        f"({e.object[max(0, e.start - 20):e.end + 20]!r})") from None
    except RuntimeError as e:
        if "conversion error" not in str(e) and "UnicodeDecodeError" not in str(e):
            raise
        raise LoadError(f"cannot read{where}: a name or string in the module is not "
                        "UTF-8") from None


def _decode(mlir_module, **kwargs):
    with _names_read_as_utf8(kwargs.get("source_name", "")):
        return decode_module(mlir_module, **kwargs)


def _load_builtin_rules() -> None:
    """The built-in op families register their rules when imported: at the first load, so that
    `import shlo2jax` stays light (rules the user registered before keep precedence)."""
    import shlo2jax.ops  # noqa: F401


def _try_deserialize_exported(data: bytes):
    stripped = data.lstrip()
    if stripped[:1] in (b"m", b"f", b"/", b"#", b"!") or stripped.startswith(b"module"):
        return None  # MLIR text
    try:
        from jax import export as jax_export
        return jax_export.deserialize(bytearray(data))
    except Exception:
        return None
