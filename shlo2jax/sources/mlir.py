"""MLIR text, MLIR bytecode and VHLO portable artifacts -> a verified `ir.Module`, through
jaxlib's MLIR bindings.

Malformed input raises `LoadError`, never aborts the process: the input is checked before
jaxlib parses it, a VHLO module's attributes before jaxlib converts it to StableHLO, and it
is parsed (and converted) in a child process where the checks cannot vouch for it
(`shlo2jax.sources.safe_parse`, `shlo2jax.sources.vhlo_kinds`).
"""

from __future__ import annotations

import functools
import re
from typing import Optional, Union

import jaxlib
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo
from jaxlib.mlir.passmanager import PassManager

from shlo2jax import compat
from shlo2jax.errors import LoadError
from shlo2jax.sources import vhlo_downgrade, vhlo_kinds
from shlo2jax.sources.safe_parse import (BYTECODE_MAGIC, check_bytecode, check_text,
                                         parse_in_child, printed_problem)


def _diagnostic(e: Exception, source_name: str) -> str:
    text = str(e).strip()
    return text.replace('"-":', f'"{source_name}":') if source_name else text


class NewerThanJaxlib(LoadError):
    """A VHLO artifact written by a newer StableHLO than jaxlib reads, using what it lacks."""


def parse_mlir(source: Union[str, bytes], context: ir.Context, source_name: str = "") -> ir.Module:
    """MLIR text, MLIR bytecode or a VHLO portable artifact -> a verified `ir.Module`.

    Malformed input raises `LoadError`, never aborts the process (see the module docstring);
    a VHLO artifact newer than jaxlib reads, a `NewerThanJaxlib` naming both versions."""
    try:
        return _parse_mlir(source, context, source_name)
    except LoadError as e:
        written = vhlo_version(source) if isinstance(source, bytes) else None
        oldest, newest = compat.stablehlo_versions()
        if written is None or written <= newest:
            raise
        # jaxlib reads a newer artifact whose ops all exist in its own StableHLO: the
        # version alone is no verdict, the failure with it is. Where the newer ops have an
        # older form that says the same, the artifact is rewritten to it and read on the
        # checked path (`shlo2jax.sources.vhlo_downgrade`); else the error names the op
        # and the feature it uses.
        failure = e
        try:
            with context:
                context.dialects["vhlo"]  # noqa: B018 - its ops are what jaxlib knows
            downgraded = vhlo_downgrade.downgrade(source, stablehlo.get_current_version(),
                                                  context.is_registered_operation)
        except vhlo_downgrade.NewerFeature as feature:
            lacks = feature.what
        except LoadError:  # not readable as bytecode here either: jaxlib's message says why
            lacks = None
        else:
            try:
                return _parse_mlir(downgraded.data, context, source_name)
            except LoadError as again:
                failure, lacks = again, None
        text = lambda v: "v" + ".".join(map(str, v))  # noqa: E731
        where = f"{source_name}: " if source_name else ""
        if lacks is None:
            lacks = vhlo_downgrade.describe_reader_error(str(failure)) or \
                str(failure).strip().splitlines()[0]
        raise NewerThanJaxlib(
            f"{where}a VHLO artifact written by StableHLO {text(written)}, newer than jaxlib "
            f"{jaxlib.__version__} reads (StableHLO {text(oldest)} to {text(newest)}), using "
            f"what {text(newest)} lacks ({lacks}): load it with a jax whose jaxlib reads "
            f"StableHLO {text(written)}, or have its producer write it for {text(newest)} or "
            "older") from None


def vhlo_version(data: bytes) -> Optional[tuple]:
    """The StableHLO version a VHLO portable artifact was written for (its bytecode producer
    string, `StableHLO_vX.Y.Z`), or None for other bytes."""
    if not data.startswith(b"ML\xefR") or len(data) < 6:
        return None
    first = data[4]  # the bytecode version, a prefix varint: its trailing zeros say its length
    length = 9 if first == 0 else (first & -first).bit_length()
    end = data.find(b"\0", 4 + length, 4 + length + 64)
    match = re.fullmatch(rb"StableHLO_v(\d+)\.(\d+)\.(\d+)", data[4 + length:end]) \
        if end > 0 else None
    return None if match is None else tuple(int(g) for g in match.groups())


def _parse_mlir(source: Union[str, bytes], context: ir.Context, source_name: str = "") -> ir.Module:
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
        _parse_in_child(source, source_name, verdict.why)
    if isinstance(source, bytes):
        # A VHLO artifact is checked as the bytecode it is before it is converted (the
        # conversion is where a location in an attribute's place crashes), and converted
        # (its names are read from the StableHLO module); plain bytecode parsed here is
        # the module. See `printed_problem` for what the checks look for.
        with context:
            context.dialects["vhlo"]  # noqa: B018 - loaded, as the artifact reader loads it
            try:
                module = ir.Module.parse(source)
            except Exception as e:  # noqa: BLE001 - reported below
                # jaxlib's reader refused it, and that is the answer: reading it again as an
                # artifact (parse_mlir_unchecked) parses it again, and jaxlib 0.12's artifact
                # reader ends the process on some modules its parse refuses (a release
                # artifact's op given a region it may not have: SIGSEGV).
                raise LoadError(f"cannot read MLIR bytecode{where}: "
                                f"{_diagnostic(e, source_name)}") from None
        try:
            vhlo = _is_vhlo(module)
            escaped, unvouched = _check_printed(module, where, vhlo, to_file=verdict.safe,
                                                read_first=verdict.readable_dialects_only)
        except UnicodeDecodeError as e:
            # (a name the bindings hand back as text: an op's, in a string table whose
            # strings need not be UTF-8, which made the verdict inconclusive)
            raise LoadError(f"cannot read MLIR{where}: corrupt MLIR bytecode: a dialect's "
                            f"or an op's name is not UTF-8 ({e.reason})") from None
        if not vhlo:
            return module
        if unvouched and verdict.safe:
            # The conversion casts some attributes to the kinds it expects without
            # checking them: one of another kind can end the process. Converted in a
            # child first, a module that crashes it is reported instead.
            _parse_in_child(source, source_name, unvouched)
        converted = _to_stablehlo(module, source, context, source_name)
        # A VHLO module prints its names as string values: where some string holds
        # bytes outside ASCII, the converted module's names are checked again. Where
        # none does, a second print and scan (~0.4 s on a 50k-op model) finds nothing
        # (and a location in an attribute's place would have failed the conversion).
        if escaped:
            _check_printed(converted, where)
        return converted
    module = parse_mlir_unchecked(source, context, source_name)
    if not verdict.safe or "loc" in source:
        _check_printed(module, where)
    # Else the printed form cannot show what the check looks for (~0.15 s on a 60k-op
    # program): text writes every location as `loc(...)` (a `#alias` is defined by one, and
    # parsing makes none), and a safe verdict says every string's bytes are UTF-8.
    return module


def _to_stablehlo(module: ir.Module, source: bytes, context: ir.Context,
                  source_name: str) -> ir.Module:
    """The VHLO `module` just parsed and checked, converted to StableHLO in place by the
    passes `stablehlo.deserialize_portable_artifact` runs after its own parse (StableHLO's
    `createStablehloDeserializePipeline`): the artifact is parsed once, not a second time
    (on a 1 GB artifact a parse is about 1 s and a copy of the weights). A conversion that
    fails is left to `parse_mlir_unchecked`, whose answer (and message) it has always been."""
    _register_stablehlo_passes()
    pipeline = ("builtin.module(vhlo-to-version{target=" + stablehlo.get_current_version()
                + "},vhlo-legalize-to-stablehlo)")
    try:
        with context:
            PassManager.parse(pipeline).run(module.operation)
    except ir.MLIRError:
        return parse_mlir_unchecked(source, context, source_name)
    return module


@functools.cache
def _register_stablehlo_passes() -> None:
    stablehlo.register_stablehlo_passes()


def _is_vhlo(module: ir.Module) -> bool:
    return any(op.operation.name.startswith("vhlo.") for op in module.body.operations)


def _check_printed(module: ir.Module, where: str, vhlo: bool = False,
                   to_file: bool = False, read_first: bool = True) -> tuple:
    """Raises LoadError for what would abort the process; -> (whether a string holds bytes
    outside ASCII, why a `vhlo` module's conversion cannot be vouched for or None) (see
    `printed_problem`)."""
    problem, escaped, unvouched = printed_problem(module, vhlo_kinds.KINDS if vhlo else None,
                                                  to_file, read_first)
    if problem:
        raise LoadError(f"cannot read MLIR{where} (corrupt input): {problem}")
    return escaped, unvouched


def _parse_in_child(source: Union[str, bytes], source_name: str, why: str) -> None:
    """Parses (and converts, for VHLO) `source` in a child process; raises LoadError where
    that fails or the child dies. `why`: why the checks sent it there."""
    child = parse_in_child(source, source_name)
    if not child.ok:
        where = f" {source_name}" if source_name else ""
        message = child.message.replace('"-":', f'"{source_name}":') if source_name else child.message
        raise LoadError(f"cannot read MLIR{where}: {message} ({why})")


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
