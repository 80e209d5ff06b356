"""Malformed inputs made from real ones, and what loading and calling them does.

`mutants(sources, count, seed)` makes byte-level mutants of bytecode and serialized exports
(truncations, bytes flipped after the `ML\\xefR` magic, bytes that break UTF-8, deleted,
repeated and zeroed ranges) and text-level mutants of MLIR text (element types and shapes
changed, arguments and results added or dropped, lines deleted, repeated or swapped, values,
op names and numbers replaced, string literals whose escapes are not UTF-8, truncations), which
HLO text (the corpus's `model.hlo`; `--no-hlo` leaves it out) meets too.
`release_sources` adds StableHLO's release artifacts (`tests/vhlo/`, `--releases`).
`check_mutant` loads one and, when it loads, calls its entry function (or, in a module of
many public functions, a sample of them) on seeded inputs; it reports what happened, and
whether that is allowed: a library error (`Shlo2JaxError`: a `LoadError`, `UnsupportedError`,
`TranslationError`, `ShapeError`, ...) or the `TypeError` of a call whose arguments do not
match the signature. It then runs the mutant as the command line does (`shlo2jax run FILE`,
then `info`): each must succeed, or end in one line `shlo2jax: error: ...` with a documented
exit code (1 input, 2 usage; never 5, an internal error) and no traceback. Run it through `shlo2jax.tools.isolated.run_isolated` so that a crash is seen as
one.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import os
import random
import re
import tempfile
import time
import traceback
from typing import NamedTuple, Union

import jax
from jax import export
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from shlo2jax.compat import make_ir_context
from shlo2jax.errors import Shlo2JaxError, UnsupportedError
from shlo2jax.loader import load
from shlo2jax.options import LoadOptions, field_choices
from shlo2jax.tools import commands, exits
from shlo2jax.tools.inputs import seeded_inputs
from shlo2jax.tools.isolated import run_isolated


class Source(NamedTuple):
    name: str
    data: Union[bytes, str]  # bytes: bytecode or a serialized jax.export; str: MLIR text


def default_sources(root: str, shared: str = "", max_bytes: int = 200_000,
                    hlo: bool = True) -> list:
    """The bundled example, the corpus's exports (serialized, their VHLO modules, and the
    printed text of their bytecode modules where this jaxlib reads them: plain bytecode is
    not portable across MLIR versions), `shared`/models/*.mlir.bc when present, and with
    `hlo` the corpus's HLO text and protos (`model.hlo`, `model.hlo.pb`: TensorFlow's dumps'
    `xla.HloProto` files; after the others)."""
    sources = []
    with open(os.path.join(root, "examples", "mlp.mlir"), encoding="utf-8") as f:
        sources.append(Source("examples/mlp.mlir", f.read()))
    corpus = os.path.join(root, "tests", "corpus")
    found = []
    for dirpath, dirnames, filenames in os.walk(corpus):
        dirnames.sort()
        for name in sorted(filenames):
            if name in ("exported.bin", "model.mlir.bc"):
                found.append(os.path.join(dirpath, name))
    if shared:
        models = os.path.join(shared, "models")
        if os.path.isdir(models):
            found += [os.path.join(models, n) for n in sorted(os.listdir(models))
                      if n.endswith(".mlir.bc")]
    for path in found:
        if os.path.getsize(path) > max_bytes:
            continue
        with open(path, "rb") as f:
            data = f.read()
        rel = os.path.relpath(path, root)
        sources.append(Source(rel, data))
        with make_ir_context() as context:
            if path.endswith(".bin"):
                inner = bytes(export.deserialize(bytearray(data)).mlir_module_serialized)
                sources.append(Source(rel + ":vhlo", inner))
                text = str(_stablehlo_module(context, inner))
            else:
                # Plain MLIR bytecode (not VHLO) is read only by the MLIR that wrote it, or one
                # whose dialects encode their ops the same way: jaxlib 0.12's StableHLO reads
                # a custom_call's properties with a field (result_tilings) that TensorFlow's
                # MLIR did not write (tf_special). Such a file is a seed as bytes only.
                try:
                    text = str(ir.Module.parse(data))
                except ir.MLIRError:
                    continue
        sources.append(Source(rel + ":text", text))
    if hlo:  # XLA's HLO (sources/hlo.py): text mutated as text, protos as bytes
        hlo_root = os.path.join(corpus, "hlo")
        for name in sorted(os.listdir(hlo_root)) if os.path.isdir(hlo_root) else []:
            for file_name, mode in (("model.hlo", "r"), ("model.hlo.pb", "rb")):
                path = os.path.join(hlo_root, name, file_name)
                if os.path.isfile(path) and os.path.getsize(path) <= max_bytes:
                    with open(path, mode, **({"encoding": "utf-8"} if mode == "r" else {})) as f:
                        sources.append(Source(os.path.relpath(path, root), f.read()))
    return sources


def release_sources(root: str, versions=None) -> list:
    """StableHLO's release artifacts (`tests/vhlo/stablehlo_legalize_to_vhlo.<v>.mlir.bc`,
    VHLO written by every release since 0.9.0, each covering every op it had; `versions`,
    e.g. ["0.9.0", "1.16.0"], picks some): each as its bytes, and where this jaxlib reads
    it, as the text of its StableHLO module. Their modules have some 200 public functions
    and no @main: a mutant that loads has a sample of them called (`CALLS_PER_MUTANT`)."""
    folder = os.path.join(root, "tests", "vhlo")
    found = sorted(n for n in os.listdir(folder) if n.startswith("stablehlo_legalize_to_vhlo.")
                   and n.endswith(".mlir.bc")) if os.path.isdir(folder) else []
    version = lambda n: n.split(".")[1].replace("_", ".")  # noqa: E731
    if versions is not None:
        found = [n for n in found if version(n) in set(versions)]
    sources = []
    for name in sorted(found, key=lambda n: tuple(int(v) for v in version(n).split("."))):
        with open(os.path.join(folder, name), "rb") as f:
            data = f.read()
        rel = os.path.relpath(os.path.join(folder, name), root)
        sources.append(Source(rel, data))
        with make_ir_context() as context:
            try:
                text = str(_stablehlo_module(context, data))
            except Exception:  # noqa: BLE001 - newer than this jaxlib reads: bytes only
                continue
        sources.append(Source(rel + ":text", text))
    return sources


def _stablehlo_module(context, vhlo: bytes):
    return stablehlo.deserialize_portable_artifact(context, vhlo)


# ---------------------------------------------------------------- byte-level mutations

_UTF8_BREAKERS = (0xFF, 0xFE, 0x80, 0xC3, 0xE2, 0xF0, 0xC0)


def _mutate_bytes(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    b = bytearray(data)
    start = 4 if data.startswith(b"ML\xefR") else 0
    n = len(b)
    pos = lambda: rng.randrange(start, n)  # noqa: E731
    kind = rng.choice(["truncate", "flip", "flip", "flip_many", "utf8", "delete", "repeat",
                       "zero", "swap"])
    if kind == "truncate":
        return kind, bytes(b[:rng.randrange(start, n)])
    if kind == "flip":
        i = pos()
        b[i] = rng.randrange(256)
        return f"flip@{i}", bytes(b)
    if kind == "flip_many":
        for _ in range(rng.randrange(2, 17)):
            b[pos()] = rng.randrange(256)
        return kind, bytes(b)
    if kind == "utf8":
        i = pos()
        b[i] = rng.choice(_UTF8_BREAKERS)
        return f"utf8@{i}", bytes(b)
    i = pos()
    length = rng.randrange(1, max(2, min(64, n - i)))
    if kind == "delete":
        del b[i:i + length]
    elif kind == "repeat":
        b[i:i] = b[i:i + length]
    elif kind == "zero":
        b[i:i + length] = bytes(len(b[i:i + length]))
    else:  # swap two ranges
        j = pos()
        chunk_i, chunk_j = bytes(b[i:i + length]), bytes(b[j:j + length])
        if len(chunk_i) == len(chunk_j):
            b[i:i + length], b[j:j + length] = chunk_j, chunk_i
    return f"{kind}@{i}+{length}", bytes(b)


# ---------------------------------------------------------------- text-level mutations

_TENSOR_RE = re.compile(r"tensor<((?:[0-9?]+x)*)([a-z][a-z0-9]*)>")
_ELEMENT_TYPES = ("f32", "f16", "bf16", "f64", "i1", "i8", "i32", "i64", "ui8", "complex<f32>",
                  "f8E4M3FN", "index", "!stablehlo.token")
_SSA_RE = re.compile(r"%[\w#]+")
_OP_RE = re.compile(r"\b(?:stablehlo|chlo|mhlo|func)\.[a-z_]+\b")
_OP_NAMES = ("stablehlo.add", "stablehlo.multiply", "stablehlo.reshape", "stablehlo.transpose",
             "stablehlo.while", "stablehlo.frobnicate", "chlo.erf", "mhlo.add", "func.call",
             "stablehlo.custom_call", "stablehlo.scatter")
_INT_RE = re.compile(r"(?<![\w%#.])-?\d+(?![\w.])")
_NUMBERS = ("0", "1", "-1", "2", "3", "7", "64", "-3", "2147483647", "-2147483648",
            "9223372036854775807", "99999999999999999999999")
_BAD_STRINGS = ('"\\FF\\FE"', '"a\\C3"', '"\\80"', '"\\F0\\9F\\98"', '"\\00\\FF"')
_SIGNATURE_RE = re.compile(r"(func\.func\s+(?:public\s+|private\s+)?@[\w.$\"]+)\(([^)]*)\)")


def _mutate_text(text: str, rng: random.Random) -> tuple[str, str]:
    lines = text.split("\n")
    kind = rng.choice(["element_type", "element_type", "shape", "shape", "signature",
                       "signature", "return", "delete_line", "repeat_line", "swap_lines",
                       "value", "op_name", "number", "number", "bad_string", "junk",
                       "truncate", "bytes"])
    if kind == "element_type" or kind == "shape":
        matches = list(_TENSOR_RE.finditer(text))
        if matches:
            m = rng.choice(matches)
            dims, element = m.group(1), m.group(2)
            if kind == "element_type":
                element = rng.choice(_ELEMENT_TYPES)
            else:
                parts = [d for d in dims.split("x") if d]
                if parts and rng.random() < 0.7:
                    k = rng.randrange(len(parts))
                    parts[k] = rng.choice(["0", "1", "3", "5", "?", "1000000"])
                elif parts and rng.random() < 0.5:
                    del parts[rng.randrange(len(parts))]
                else:
                    parts.insert(0, rng.choice(["1", "2"]))
                dims = "".join(p + "x" for p in parts)
            return (f"{kind}@{m.start()}",
                    text[:m.start()] + f"tensor<{dims}{element}>" + text[m.end():])
    if kind == "signature":
        matches = list(_SIGNATURE_RE.finditer(text))
        if matches:
            m = rng.choice(matches)
            args = [a for a in m.group(2).split(", ") if a.strip()]
            if args and rng.random() < 0.5:
                del args[rng.randrange(len(args))]
                what = "drop_arg"
            else:
                args.insert(rng.randrange(len(args) + 1) if args else 0,
                            f"%extra: {rng.choice(['tensor<2xf32>', 'tensor<i32>', 'tensor<8x16xf32>'])}")
                what = "add_arg"
            return (f"{what}@{m.start()}",
                    text[:m.start()] + f"{m.group(1)}({', '.join(args)})" + text[m.end():])
    if kind == "return":
        idx = [i for i, ln in enumerate(lines) if ln.strip().startswith(("return", "stablehlo.return", "func.return"))]
        if idx:
            i = rng.choice(idx)
            line = lines[i]
            head, _, types = line.partition(" : ")
            values = head.split(",")
            if len(values) > 1:
                lines[i] = ",".join(values[:-1]) + " : " + ",".join(types.split(",")[:-1])
            else:
                lines[i] = line.replace(":", ", %0 :", 1) if ":" in line else line + " %0"
            return f"return@line{i + 1}", "\n".join(lines)
    if kind in ("delete_line", "repeat_line", "swap_lines") and len(lines) > 2:
        i = rng.randrange(len(lines))
        if kind == "delete_line":
            del lines[i]
        elif kind == "repeat_line":
            lines.insert(i, lines[i])
        else:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        return f"{kind}@line{i + 1}", "\n".join(lines)
    if kind == "value":
        matches = list(_SSA_RE.finditer(text))
        if len(matches) > 1:
            m, other = rng.choice(matches), rng.choice(matches)
            return f"value@{m.start()}", text[:m.start()] + other.group() + text[m.end():]
    if kind == "op_name":
        matches = list(_OP_RE.finditer(text))
        if matches:
            m = rng.choice(matches)
            return (f"op_name@{m.start()}",
                    text[:m.start()] + rng.choice(_OP_NAMES) + text[m.end():])
    if kind == "number":
        matches = list(_INT_RE.finditer(text))
        if matches:
            m = rng.choice(matches)
            return f"number@{m.start()}", text[:m.start()] + rng.choice(_NUMBERS) + text[m.end():]
    if kind == "bad_string":
        bad = rng.choice(_BAD_STRINGS)
        where = rng.choice(["symbol", "attribute", "location", "call"])
        if where == "symbol":
            m = re.search(r"@(main|relu|\w+)\(", text)
            if m:
                return "bad_symbol", text[:m.start()] + f"@{bad}(" + text[m.end():]
        if where == "attribute":
            m = re.search(r"(stablehlo\.\w+)(\s)", text)
            if m:
                return ("bad_attribute",
                        text[:m.end(1)] + f" {{note = {bad}}}" + text[m.end(1):])
        if where == "call":
            m = re.search(r"call @(\w+)", text)
            if m:
                return "bad_callee", text[:m.start()] + f"call @{bad}" + text[m.end():]
        m = re.search(r"\n(\s*)return", text)
        if m:
            return "bad_location", text[:m.start()] + f"\n{m.group(1)}return loc({bad}:1:2)" + \
                text[m.end():]
    if kind == "junk":
        i = rng.randrange(len(text))
        junk = rng.choice(["{", "}", "(", ")", "<", ">", ":", ",", "%", "@", "\"", "\\",
                           "é", "\x00", "dense<", "tensor<", "// ", "#loc"])
        return f"junk@{i}", text[:i] + junk + text[i:]
    if kind == "bytes":
        label, data = _mutate_bytes(text.encode("utf-8"), rng)
        return f"text_{label}", data.decode("utf-8", "surrogateescape") \
            if rng.random() < 0.2 else data  # mostly bytes, which need not be UTF-8
    i = rng.randrange(len(text))
    return f"truncate@{i}", text[:i]


def mutants(sources: list, count: int, seed: int = 0) -> list:
    """`count` mutants, byte-level and text-level in turn, each kind spread over its
    sources: [(source name, mutation, input)]."""
    rng = random.Random(seed)
    binary = [s for s in sources if isinstance(s.data, bytes)]
    text = [s for s in sources if isinstance(s.data, str)]
    kinds = [k for k in (binary, text) if k]
    out = []
    for k in range(count):
        group = kinds[k % len(kinds)]
        source = group[(k // len(kinds)) % len(group)]
        if isinstance(source.data, bytes):
            label, data = _mutate_bytes(source.data, rng)
        else:
            label, data = _mutate_text(source.data, rng)
        out.append((source.name, label, data))
    return out


# ---------------------------------------------------------------- loading and calling one

def _allowed(e: BaseException) -> bool:
    """A library error, or the TypeError of a call whose arguments do not fit."""
    return isinstance(e, Shlo2JaxError) or exits.is_argument_error(e)


def check_mutant(mutant: tuple, seed: int = 0, lowering: str = "translate") -> dict:
    """Loads the mutant, calls its entry on seeded inputs when it loads, and runs it on the
    command line (`check_on_the_command_line`): what happened."""
    outcome = _check_api(mutant, lowering)
    cli = check_on_the_command_line(mutant, lowering)
    if outcome["allowed"] and not cli["allowed"]:
        outcome = {**outcome, "allowed": False, "error": cli["error"], "cli": cli}
    return outcome


# Public functions called of a mutant that has no entry (@main, or one public function):
# a sample, picked by its mutation (StableHLO's release artifacts have some 200 each).
CALLS_PER_MUTANT = 4


def _check_api(mutant: tuple, lowering: str) -> dict:
    _, label, data = mutant
    try:
        try:
            program = load(data, lowering=lowering)
        except UnsupportedError:
            # refused by name: loaded with strict=False, what it has that runs is called
            # (and what it refuses must be refused by name again)
            program = load(data, lowering=lowering, strict=False)
    except Exception as e:  # noqa: BLE001 - the point is to see every kind
        return _outcome("load", e)
    functions = program.functions
    if "main" in functions or len(functions) == 1:
        called = [program.entry]
    else:
        called = random.Random(label).sample(list(functions.values()),
                                             min(CALLS_PER_MUTANT, len(functions)))
    outcome = None
    for fn in called:
        try:
            inputs = seeded_inputs(fn)
        except ValueError as e:  # tokens, `?` dimensions: no seeded inputs (not the library's)
            outcome = outcome or {"stage": "inputs", "outcome": "loaded", "allowed": True,
                                  "error": str(e)[:200]}
            continue
        try:
            jax.block_until_ready(fn(*inputs))
        except Exception as e:  # noqa: BLE001
            failed = _outcome("call", e)
            if not failed["allowed"]:
                return failed
            outcome = outcome if outcome and outcome["outcome"] == "ran" else failed
            continue
        outcome = {"stage": "call", "outcome": "ran", "allowed": True, "error": ""}
    return outcome


# The exit codes a mutant may get on the command line: success, an input error, a usage
# error (a module without @main and with several public functions asks for --function).
CLI_CODES = (exits.OK, exits.INPUT, exits.USAGE)


def check_on_the_command_line(mutant: tuple, lowering: str = "translate") -> dict:
    """`shlo2jax run FILE`, then `shlo2jax info FILE`, on the mutant, in this process:
    {"code", "allowed", "error"}; allowed: a code of CLI_CODES, and on an error exactly one
    line `shlo2jax: error: ...` on stderr and no traceback."""
    _, _, data = mutant
    binary = isinstance(data, bytes)
    with tempfile.TemporaryDirectory(prefix="shlo2jax-mutant-") as folder:
        path = os.path.join(folder, "mutant.bin" if binary else "mutant.mlir")
        with open(path, "wb" if binary else "w", **({} if binary else {
                "encoding": "utf-8", "errors": "surrogateescape"})) as f:
            f.write(data)
        code, err = _command(["run", path, "--lowering", lowering])
        if code in CLI_CODES and err.count("\n") <= 1:
            # `info` of the same file answers the same way (it loads with strict=False)
            code, err = _command(["info", path])
    lines = err.splitlines()
    problems = []
    if code not in CLI_CODES:
        problems.append(f"exit code {code}")
    if code != exits.OK and (len(lines) != 1 or not lines[0].startswith("shlo2jax: error: ")):
        problems.append(f"{len(lines)} lines on stderr, not one 'shlo2jax: error: ...'")
    if "Traceback" in err:
        problems.append("a traceback")
    error = ("command line: " + ", ".join(problems) + ": " + err[-1500:]) if problems else ""
    return {"code": code, "allowed": not problems, "error": error}


def _command(argv: list) -> tuple:
    """(exit code, stderr) of the command line, stdout discarded."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = commands.main(argv)
    return code, err.getvalue()


def check_mutant_lowered_directly(mutant: tuple) -> dict:
    """`check_mutant` of a program loaded with `lowering="direct"` (XLA compiles what it can
    of the mutant as it is)."""
    return check_mutant(mutant, lowering="direct")


def _outcome(stage: str, e: BaseException) -> dict:
    allowed = _allowed(e)
    out = {"stage": stage, "outcome": type(e).__name__, "allowed": allowed,
           "error": str(e)[:300]}
    if not allowed:
        out["traceback"] = "".join(traceback.format_exception(type(e), e, e.__traceback__))[-3000:]
    return out


# ---------------------------------------------------------------- a run over many

class Report(NamedTuple):
    count: int
    outcomes: dict          # "stage:outcome" -> how many
    failures: list          # [{source, mutation, status, detail}]: crashes, timeouts, errors
                            # that are not the library's
    seconds: float

    def summary(self) -> str:
        crashes = sum(1 for f in self.failures if f["status"] in ("crashed", "timeout"))
        return (f"mutate: {self.count} mutants, {crashes} crashes, "
                f"{len(self.failures) - crashes} unexpected errors")


def run_mutants(mutant_list: list, jobs: int = 2, timeout: float = 120.0,
                lowering: str = "translate", progress: bool = False) -> Report:
    """Checks every mutant in worker processes (`run_isolated`): a mutant that kills its
    worker is reported as a crash, not as the end of the run. `progress`: a progress bar on
    a terminal (shlo2jax.tools.progress)."""
    start = time.time()
    outcomes: collections.Counter = collections.Counter()
    failures = []
    check = "check_mutant" if lowering == "translate" else "check_mutant_lowered_directly"
    for index, status, value in run_isolated(f"shlo2jax.tools.mutate:{check}", mutant_list,
                                             jobs=jobs, timeout=timeout,
                                             progress="mutate" if progress else None):
        source, mutation, _ = mutant_list[index]
        if status == "ok":
            outcomes[f"{value['stage']}:{value['outcome']}"] += 1
            if value["allowed"]:
                continue
            detail = value.get("traceback") or value["error"]
            status = "error"
        else:
            outcomes[status] += 1
            detail = str(value)
        failures.append({"index": index, "source": source, "mutation": mutation,
                         "status": status, "detail": detail[-3000:]})
    failures.sort(key=lambda f: f["index"])
    return Report(len(mutant_list), dict(sorted(outcomes.items())), failures,
                  time.time() - start)


def main(argv=None) -> int:
    """`shlo2jax mutate`: load and call mutants of the bundled modules, and run each on the
    command line; exit status 1 on a crash, an error that is not the library's, or a command
    line that does not end in one line with a documented exit code."""
    parser = exits.Parser(prog="shlo2jax mutate", description=main.__doc__)
    parser.add_argument("--count", type=commands.non_negative_int, default=1000,
                        help="mutants (default: %(default)s)")
    parser.add_argument("--seed", type=commands.non_negative_int, default=0,
                        help="seed of the mutations (default: %(default)s)")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bar (there is none where stderr is not a terminal)")
    parser.add_argument("-j", "--jobs", type=commands.positive_int, default=2,
                        help="worker processes (default: %(default)s)")
    parser.add_argument("--root", default=".",
                        help="the checkout whose examples/ and tests/corpus/ are mutated")
    parser.add_argument("--shared", default="",
                        help="also mutate SHARED/models/*.mlir.bc (at most 200 kB each)")
    parser.add_argument("--hlo", action=argparse.BooleanOptionalAction, default=True,
                        help="also mutate the corpus's HLO text (tests/corpus/hlo/*/model.hlo; "
                             "default: yes)")
    parser.add_argument("--releases", action=argparse.BooleanOptionalAction, default=False,
                        help="also mutate StableHLO's release artifacts (tests/vhlo/*.mlir.bc "
                             "and their text; default: no)")
    parser.add_argument("--lowering", choices=field_choices("lowering"),
                        default=LoadOptions().lowering,
                        help="load the mutants with this lowering (load(..., lowering=); "
                             "default: %(default)s)")
    parser.add_argument("--json", help="write the outcomes and every failure to this file")
    parser.add_argument("--save", help="write each failing mutant to this folder")
    args = parser.parse_args(argv)
    sources = default_sources(args.root, args.shared, hlo=args.hlo)
    if args.releases:
        sources += release_sources(args.root)
    mutant_list = mutants(sources, args.count, args.seed)
    report = run_mutants(mutant_list, jobs=args.jobs, lowering=args.lowering,
                         progress=not args.quiet)
    for name, n in report.outcomes.items():
        print(f"  {name}: {n}")
    for f in report.failures:
        print(f"{f['status']}: {f['source']} {f['mutation']} (mutant {f['index']}, seed "
              f"{args.seed}): {f['detail'].strip().splitlines()[-1] if f['detail'].strip() else ''}")
        if args.save:
            os.makedirs(args.save, exist_ok=True)
            data = mutant_list[f["index"]][2]
            name = os.path.join(args.save, f"mutant_{args.seed}_{f['index']}")
            with open(name + (".mlir" if isinstance(data, str) else ".bin"),
                      "w" if isinstance(data, str) else "wb") as out:
                out.write(data)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"seed": args.seed, "count": report.count, "seconds": report.seconds,
                       "outcomes": report.outcomes, "failures": report.failures}, out, indent=2)
    print(f"{report.seconds:.0f} s")
    print(report.summary())
    return 1 if report.failures else 0
