"""Malformed inputs made from real ones, and what loading and calling them does.

`mutants(sources, count, seed)` makes byte-level mutants of bytecode and serialized exports
(truncations, bytes flipped after the `ML\\xefR` magic, bytes that break UTF-8, deleted,
repeated and zeroed ranges) and text-level mutants of MLIR text (element types and shapes
changed, arguments and results added or dropped, lines deleted, repeated or swapped, values,
op names and numbers replaced, string literals whose escapes are not UTF-8, truncations), which
HLO text (the corpus's `model.hlo`; `--no-hlo` leaves it out) meets too.
`release_sources` adds StableHLO's release artifacts (`tests/vhlo/`, `--releases`).
`structured_sources` gives the seeds of the structure-aware kinds (KINDS, `--kinds`;
`shlo2jax.tools.mutate_structured` makes their mutants): HLO text and protos, XLA dump folders,
jax.export flatbuffers of every serialization version, the `.npz` of `run --inputs`,
PyTorch/XLA bundles and SavedModels. A folder mutant is written to a temporary folder and
loaded by its path; an `.npz` mutant is the arguments its program is called on.
`check_mutant` loads one and, when it loads, calls its entry function (or, in a module of
many public functions, a sample of them) on seeded inputs; it reports what happened, and
whether that is allowed: a library error (`Shlo2JaxError`: a `LoadError`, `UnsupportedError`,
`TranslationError`, `ShapeError`, ...) or the `TypeError` of a call whose arguments do not
match the signature. It then runs the mutant as the command line does (`shlo2jax run FILE`,
then `info`): each must succeed, or end in one line `shlo2jax: error: ...` with a documented
exit code (1 input, 2 usage; never 5, an internal error) and no traceback. Run it through
`shlo2jax.tools.isolated.run_isolated` so that a crash is seen as one (`run_mutants`), and a
mutant past the time limit as a hang, unless it was running its compiled program and XLA
compiling the module directly runs past the limit too: a program that never ends (RUNS_LONG).
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
import shutil
import tempfile
import time
import traceback
import zipfile
from typing import NamedTuple, Union

import jax
import numpy as np
from jax import export
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from shlo2jax.compat import make_ir_context
from shlo2jax.errors import Shlo2JaxError, UnsupportedError, UsageError
from shlo2jax.loader import load
from shlo2jax.options import LoadOptions, field_choices
from shlo2jax.sources.hlo import module_proto
from shlo2jax.tools import commands, exits
from shlo2jax.tools.inputs import bind_arrays, read_npz, seeded_inputs
from shlo2jax.tools.isolated import report_stage, run_isolated
from shlo2jax.tools.mutate_structured import (
    LINE_EDITS, Folder, WithInputs, edit_lines, mutate_flatbuffer, mutate_folder, mutate_hlo_text, mutate_json,
    mutate_npy, mutate_npz, mutate_proto, npy_bytes, pb_varint, text_file_mutator,
    zip_members)


class Source(NamedTuple):
    name: str
    # bytes: bytecode or a serialized jax.export; str: MLIR text; a Folder; WithInputs
    data: Union[bytes, str, Folder, WithInputs]
    kind: str = ""  # a key of KINDS; "" : "bytes" for bytes, "text" for text


# What `--kinds` picks: each kind a family of mutants, with the seeds it mutates.
KINDS = {
    "bytes": "byte-level mutants of bytecode, VHLO, serialized exports and HLO protos",
    "text": "text-level mutants of MLIR text and HLO text",
    "hlo_text": "HLO-aware mutants of HLO text (shapes, opcodes, operands, attributes)",
    "hlo_proto": "protobuf-aware mutants of HloModuleProto, HloProto and HloSnapshot",
    "export": "flatbuffer-aware mutants of jax.export artifacts of every serialization "
              "version (tests/export_artifacts/, the corpus's exported.bin)",
    "dump": "XLA dump folders (--xla_dump_to): files mutated, deleted, duplicated, renamed",
    "bundle": "PyTorch/XLA bundle folders: JSON meta, .npy weights, modules",
    "npz": ".npz files of --inputs: keys, shapes, dtypes, declared sizes, zip bytes",
    "saved_model": "SavedModel folders: saved_model.pb (protobuf-aware), variables/",
    "pt2": "torch.export .pt2 archives: the graph's and weights' JSON, weights, members, "
           "the zip (loading them needs torch and torchax; without, each is one LoadError)",
}


def kind_of(source: Source) -> str:
    return source.kind or ("bytes" if isinstance(source.data, bytes) else "text")


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


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _folder(path: str) -> Folder:
    files = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        files += [(os.path.relpath(os.path.join(dirpath, n), path),
                   _read(os.path.join(dirpath, n))) for n in sorted(filenames)]
    return Folder(tuple(files))


def _entries(root: str, *parts) -> list:
    folder = os.path.join(root, "tests", "corpus", *parts)
    return [os.path.join(folder, n) for n in sorted(os.listdir(folder))
            if os.path.isdir(os.path.join(folder, n))] if os.path.isdir(folder) else []


def _hlo_sources(root: str, max_bytes: int) -> list:
    """The corpus's HLO text (hlo_text), its HloProto files as HloProto, as the
    HloModuleProto inside and wrapped in an HloSnapshot (hlo_proto), and each entry as the
    XLA dump folder holding it (dump: its before_optimizations file, with the
    after_optimizations text of its `_after_opt` twin where there is one)."""
    out = []
    for entry in _entries(root, "hlo"):
        name = os.path.basename(entry)
        rel = os.path.relpath(entry, root)
        text_path = os.path.join(entry, "model.hlo")
        proto_path = text_path + ".pb"
        dump = {}
        if os.path.isfile(text_path) and os.path.getsize(text_path) <= max_bytes:
            text = _read(text_path)
            out.append(Source(f"{rel}/model.hlo", text.decode("utf-8"), "hlo_text"))
            dump[f"module_0000.{name}.before_optimizations.txt"] = text
        if os.path.isfile(proto_path) and os.path.getsize(proto_path) <= max_bytes:
            proto = _read(proto_path)
            module = module_proto(proto)
            out += [Source(f"{rel}/model.hlo.pb", proto, "hlo_proto"),
                    Source(f"{rel}/model.hlo.pb:snapshot", b"\x0a" + pb_varint(len(proto)) + proto,
                           "hlo_proto")]
            if module is not None and module != proto:
                out.append(Source(f"{rel}/model.hlo.pb:module", module, "hlo_proto"))
            dump[f"module_0000.{name}.before_optimizations.hlo.pb"] = proto
        twin = os.path.join(os.path.dirname(entry), name.replace("_before_opt", "_after_opt"),
                            "model.hlo")
        if dump and name.endswith("_before_opt") and os.path.isfile(twin) and \
                os.path.getsize(twin) <= max_bytes:
            dump[f"module_0000.{name}.cpu_after_optimizations.txt"] = _read(twin)
        if dump and not name.endswith("_after_opt"):
            out.append(Source(f"{rel}:dump", Folder(tuple(sorted(dump.items()))), "dump"))
    return out


def _export_sources(root: str, max_bytes: int) -> list:
    """Every artifact of tests/export_artifacts/ (one folder per jax version that wrote it:
    serialization versions 1 to 12) and the corpus's exported.bin."""
    found = []
    artifacts = os.path.join(root, "tests", "export_artifacts")
    for version in sorted(os.listdir(artifacts)) if os.path.isdir(artifacts) else []:
        folder = os.path.join(artifacts, version)
        if os.path.isdir(folder):
            found += [os.path.join(folder, n) for n in sorted(os.listdir(folder))
                      if n.endswith(".bin")]
    for group in sorted(os.listdir(os.path.join(root, "tests", "corpus"))):
        found += [os.path.join(e, "exported.bin") for e in _entries(root, group)
                  if os.path.isfile(os.path.join(e, "exported.bin"))]
    return [Source(os.path.relpath(p, root), _read(p), "export") for p in found
            if os.path.getsize(p) <= max_bytes]


def _npz_sources(root: str, max_bytes: int = 8_000) -> list:
    """The corpus's small jax exports with the arguments of their data.npz (`arg_<i>`) as
    the .npz of `--inputs`."""
    out = []
    for entry in _entries(root, "jax"):
        program, data = os.path.join(entry, "exported.bin"), os.path.join(entry, "data.npz")
        if not (os.path.isfile(program) and os.path.isfile(data)) or \
                os.path.getsize(program) > max_bytes:
            continue
        with np.load(data) as arrays:
            members = [(f"{k}.npy", npy_bytes(arrays[k])) for k in arrays.files
                       if k.startswith("arg_")]
        if members:
            out.append(Source(os.path.relpath(data, root),
                              WithInputs(_read(program), ".bin", zip_members(members)), "npz"))
    return out


def structured_sources(root: str, kinds=tuple(KINDS), max_bytes: int = 200_000) -> list:
    """The seeds of the structure-aware kinds among `kinds` (see KINDS)."""
    kinds = set(kinds)
    out = [s for s in _hlo_sources(root, max_bytes) if s.kind in kinds] \
        if kinds & {"hlo_text", "hlo_proto", "dump"} else []
    if "export" in kinds:
        out += _export_sources(root, max_bytes)
    if "npz" in kinds:
        out += _npz_sources(root)
    if "bundle" in kinds:
        out += [Source(os.path.relpath(e, root) + "/bundle", _folder(os.path.join(e, "bundle")),
                       "bundle") for e in _entries(root, "torch_xla")
                if os.path.isdir(os.path.join(e, "bundle"))]
    if "saved_model" in kinds:
        out += [Source(os.path.relpath(e, root) + "/saved_model",
                       _folder(os.path.join(e, "saved_model")), "saved_model")
                for e in _entries(root, "tensorflow")
                if os.path.basename(e).startswith("jax2tf_")
                and os.path.isfile(os.path.join(e, "saved_model", "saved_model.pb"))]
    if "pt2" in kinds:
        out += [Source(os.path.relpath(e, root) + "/model.pt2",
                       _read(os.path.join(e, "model.pt2")), "pt2")
                for e in _entries(root, "pt2") if os.path.isfile(os.path.join(e, "model.pt2"))]
    return out


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
    if kind in LINE_EDITS and len(lines) > 2:
        i = edit_lines(kind, lines, rng)
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


# ---------------------------------------------------------------- the kinds' mutators

def _binary(path: str, data: bytes, rng: random.Random) -> tuple:
    return _mutate_bytes(data, rng) if data else ("empty", data)


def _dump_content(path: str, data: bytes, rng: random.Random) -> tuple:
    if path.endswith(".hlo.pb"):
        return mutate_proto(data, rng)
    return text_file_mutator(mutate_hlo_text)(path, data, rng)


def _dump_rename(path: str, rng: random.Random) -> str:
    number, _, rest = path.partition(".")
    name, _, stage = rest.partition(".")
    return rng.choice([f"module_0001.{rest}", f"{number}.other.{stage}",
                       path.replace("before_optimizations", "cpu_after_optimizations"),
                       path.replace(".txt", ".hlo.pb") if path.endswith(".txt")
                       else path.replace(".hlo.pb", ".txt"),
                       f"module_x.{rest}", "notes.txt"])


def _bundle_content(path: str, data: bytes, rng: random.Random) -> tuple:
    if path.endswith(".meta"):
        return text_file_mutator(mutate_json)(path, data, rng)
    if path.endswith(".mlir"):
        return text_file_mutator(_mutate_text)(path, data, rng)
    if path.endswith(".bytecode"):
        return _binary(path, data, rng)
    return mutate_npy(data, rng)  # data/<state_dict key>, constants/<i>


def _bundle_rename(path: str, rng: random.Random) -> str:
    folder, _, name = path.rpartition("/")
    return rng.choice([f"{folder}/{name}_renamed", f"{folder}/other{os.path.splitext(name)[1]}",
                       f"{folder}/{name}.npy", name, f"functions/{name}", f"data/{name}"])


def _saved_model_content(path: str, data: bytes, rng: random.Random) -> tuple:
    if path.endswith(".pb"):
        return mutate_proto(data, rng)
    if path.endswith(".index"):  # a table of BundleEntryProtos: its blocks and footer
        return _binary(path, data, rng)
    if rng.random() < 0.5:  # variables.data-*: the variables' bytes
        return "truncate_data", data[:rng.randrange(max(1, len(data)))]
    return _binary(path, data, rng)


def _saved_model_rename(path: str, rng: random.Random) -> str:
    return rng.choice([path + ".old", path.replace("variables", "vars"),
                       path.replace("00000-of-00001", "00000-of-00002"), "saved_model.pbtxt",
                       "variables/variables.index" if path != "variables/variables.index"
                       else "saved_model.pb"])


# The one-line members of a .pt2 (archive_format, archive_version, byteorder, .data/version)
# and what each may become.
_PT2_WORDS = (b"", b"pt2", b"0", b"1", b"99", b"-1", b"big", b"little", b"\xff\xfe",
              b"1" * 4096)


def _pt2_content(path: str, data: bytes, rng: random.Random) -> tuple:
    if path.endswith(".json"):
        return text_file_mutator(mutate_json)(path, data, rng)
    if len(data) <= 8 or "/.data/" in path:
        return "word", rng.choice(_PT2_WORDS)
    if rng.random() < 0.5:  # a weight's or constant's raw bytes, the pickled sample inputs
        return "truncate_data", data[:rng.randrange(max(1, len(data)))]
    return _binary(path, data, rng)


def _pt2_rename(path: str, rng: random.Random) -> str:
    folder, _, name = path.rpartition("/")
    return rng.choice([f"{folder}/{name}_renamed", f"{folder}/weight_99", name,
                       path.replace("model/", "other/", 1), f"{folder}/../{name}",
                       path.replace("weights", "constants")])


def _mutate_pt2(data: bytes, rng: random.Random) -> tuple:
    """(label, bytes): a .pt2 archive with one member mutated as a folder's file is (its JSON
    by `mutate_json`, a weight's bytes), deleted, duplicated or renamed; or the zip itself
    truncated or its bytes changed."""
    kind = rng.random()
    if kind < 0.1:
        return "pt2_truncate", data[:rng.randrange(max(1, len(data)))]
    if kind < 0.2:
        return _mutate_bytes(data, rng)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = Folder(tuple((i.filename, archive.read(i)) for i in archive.infolist()))
    label, folder = mutate_folder(members, rng, _pt2_content, _pt2_rename)
    return label, zip_members(list(folder.files))


def _with_inputs(data: WithInputs, rng: random.Random) -> tuple:
    label, npz = mutate_npz(data.npz, rng)
    return label, data._replace(npz=npz)


def _folder_mutator(content, rename):
    return lambda data, rng: mutate_folder(data, rng, content, rename)


# kind -> (its data, a random.Random) -> (label, mutant data)
_MUTATORS = {
    "bytes": _mutate_bytes,
    "text": _mutate_text,
    "hlo_text": mutate_hlo_text,
    "hlo_proto": mutate_proto,
    "export": mutate_flatbuffer,
    "dump": _folder_mutator(_dump_content, _dump_rename),
    "bundle": _folder_mutator(_bundle_content, _bundle_rename),
    "npz": _with_inputs,
    "saved_model": _folder_mutator(_saved_model_content, _saved_model_rename),
    "pt2": _mutate_pt2,
}


def mutants(sources: list, count: int, seed: int = 0) -> list:
    """`count` mutants, the kinds of `sources` (`kind_of`, in KINDS' order) in turn, each
    kind spread over its sources: [(source name, mutation, input)]. Byte- and text-level
    mutants draw on one generator seeded with `seed` (the sequence they had before the other
    kinds); every other kind on its own, so a kind's mutants are the same whatever other
    kinds run beside it."""
    by_kind: dict = {}
    for s in sources:
        by_kind.setdefault(kind_of(s), []).append(s)
    groups = [(k, by_kind[k]) for k in KINDS if k in by_kind]
    shared = random.Random(seed)
    rngs = {k: shared if k in ("bytes", "text") else random.Random(f"{k}:{seed}")
            for k, _ in groups}
    out = []
    for k in range(count):
        kind, group = groups[k % len(groups)]
        source = group[(k // len(groups)) % len(group)]
        label, data = _MUTATORS[kind](source.data, rngs[kind])
        out.append((source.name, label, data))
    return out


# ---------------------------------------------------------------- loading and calling one

def _allowed(e: BaseException) -> bool:
    """A library error, or the TypeError of a call whose arguments do not fit."""
    return isinstance(e, Shlo2JaxError) or exits.is_argument_error(e)


def check_mutant(mutant: tuple, seed: int = 0, lowering: str = "translate") -> dict:
    """Loads the mutant, calls its entry on seeded inputs (or, for an `.npz` mutant, on its
    arrays) when it loads, and runs it on the command line (`check_on_the_command_line`):
    what happened. A folder mutant is written to a temporary folder and loaded by its path."""
    with _written(mutant[2]) as (path, inputs):
        outcome = _check_api(mutant, lowering, path, inputs)
        cli = _check_command_line(path, inputs, lowering)
    if outcome["allowed"] and not cli["allowed"]:
        outcome = {**outcome, "allowed": False, "error": cli["error"], "cli": cli}
    return outcome


@contextlib.contextmanager
def _written(data):
    """(the mutant's program file or folder, the .npz of its inputs or None), written to a
    temporary folder."""
    with tempfile.TemporaryDirectory(prefix="shlo2jax-mutant-") as folder:
        inputs = None
        if isinstance(data, Folder):
            path = os.path.join(folder, "mutant")
            for name, payload in data.files:
                os.makedirs(os.path.dirname(os.path.join(path, name)), exist_ok=True)
                with open(os.path.join(path, name), "wb") as f:
                    f.write(payload)
            os.makedirs(path, exist_ok=True)
        else:
            program, suffix = (data.program, data.suffix) if isinstance(data, WithInputs) else \
                (data, ".bin" if isinstance(data, bytes) else ".mlir")
            path = os.path.join(folder, "mutant" + suffix)
            with open(path, "wb") as f:
                f.write(program if isinstance(program, bytes)
                        else program.encode("utf-8", "surrogateescape"))
            if isinstance(data, WithInputs):
                inputs = os.path.join(folder, "inputs.npz")
                with open(inputs, "wb") as f:
                    f.write(data.npz)
        yield path, inputs


# Public functions called of a mutant that has no entry (@main, or one public function):
# a sample, picked by its mutation (StableHLO's release artifacts have some 200 each).
CALLS_PER_MUTANT = 4


def _check_api(mutant: tuple, lowering: str, path: str, inputs) -> dict:
    """The mutant loaded (`_loadable`) and its entry, or a sample of its functions, called."""
    _, label, data = mutant
    source = _loadable(data, path)
    try:
        try:
            program = load(source, lowering=lowering)
        except UnsupportedError:
            # refused by name: loaded with strict=False, what it has that runs is called
            # (and what it refuses must be refused by name again)
            program = load(source, lowering=lowering, strict=False)
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
            args = _arguments(fn, inputs)
        except ValueError as e:
            # tokens, `?` dimensions: no seeded inputs (not the library's); an .npz that does
            # not fit: an InputError, the library's (a ValueError too)
            if inputs:
                failed = _outcome("inputs", e)
                if not failed["allowed"]:
                    return failed
                outcome = outcome or failed
                continue
            outcome = outcome or {"stage": "inputs", "outcome": "loaded", "allowed": True,
                                  "error": str(e)[:200]}
            continue
        except Exception as e:  # noqa: BLE001
            return _outcome("inputs", e)
        try:
            _call_in_stages(fn, args)
        except Exception as e:  # noqa: BLE001
            failed = _outcome("call", e)
            if not failed["allowed"]:
                return failed
            outcome = outcome if outcome and outcome["outcome"] == "ran" else failed
            continue
        outcome = {"stage": "call", "outcome": "ran", "allowed": True, "error": ""}
    return outcome


def _loadable(data, path: str):
    """What `load` is given for a mutant: a program as bytes or text itself (its file is for
    the command line), a folder by its path."""
    return data if isinstance(data, (bytes, str)) else path


def _arguments(fn, inputs):
    """The mutant's arguments: its .npz's arrays where it has one, else seeded inputs."""
    return bind_arrays(fn, read_npz(inputs)) if inputs else seeded_inputs(fn)


def _call_in_stages(fn, args) -> None:
    """fn(*args), its compile and its run reported apart (`report_stage`): a mutant past the
    time limit while it runs is a program that runs long, which `run_mutants` tells from a
    hang by running the module as XLA compiles it directly."""
    report_stage("compile")
    try:
        compiled = jax.jit(fn).lower(*args).compile()
    except Exception:  # noqa: BLE001 - raised again by the call as the user meets it
        report_stage("call")
        jax.block_until_ready(fn(*args))
        return
    report_stage("run")
    jax.block_until_ready(compiled(*args))


def run_directly(mutant: tuple) -> str:
    """The mutant loaded with `lowering="direct"` (XLA compiling the module as it is) and its
    entry called as `check_mutant` calls it: "ran", or the error's type (its run is what
    matters: whether XLA's own program ends within the time limit)."""
    with _written(mutant[2]) as (path, inputs):
        _, _, data = mutant
        try:
            fn = load(_loadable(data, path), lowering="direct").entry
            args = _arguments(fn, inputs)
            jax.block_until_ready(fn(*args))
        except Exception as e:  # noqa: BLE001
            return type(e).__name__
    return "ran"


# The outcome of a mutant whose call runs past the time limit, and XLA's direct compile of
# it too: the program does not end (a loop whose counter was mutated away), not a hang.
RUNS_LONG = "run:runs past the time limit, as XLA's direct compile does"


# The exit codes a mutant may get on the command line: success, an input error, a usage
# error (a module without @main and with several public functions asks for --function).
CLI_CODES = (exits.OK, exits.INPUT, exits.USAGE)


def check_on_the_command_line(mutant: tuple, lowering: str = "translate") -> dict:
    """`shlo2jax run FILE` (with `--inputs X.npz` for an .npz mutant), then `shlo2jax info
    FILE`, on the mutant, in this process: {"code", "allowed", "error"}; allowed: a code of
    CLI_CODES, and on an error exactly one line `shlo2jax: error: ...` on stderr and no
    traceback."""
    with _written(mutant[2]) as (path, inputs):
        return _check_command_line(path, inputs, lowering)


def _check_command_line(path: str, inputs, lowering: str) -> dict:
    code, err = _command(["run", path, "--lowering", lowering] +
                         (["--inputs", inputs] if inputs else []))
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
                         "status": status, "detail": detail[-3000:],
                         "stage": getattr(value, "stage", None)})
    _run_long_ones_directly(mutant_list, failures, outcomes, timeout, jobs)
    failures.sort(key=lambda f: f["index"])
    return Report(len(mutant_list), dict(sorted(outcomes.items())), failures,
                  time.time() - start)


def _run_long_ones_directly(mutant_list: list, failures: list, outcomes, timeout: float,
                            jobs: int) -> None:
    """A mutant whose translated program was still running at the time limit is a hang only
    if XLA compiling the module directly ends it: each is run so (`run_directly`) with the
    same limit, and one that runs past it too is counted as RUNS_LONG, not as a failure."""
    running = [f for f in failures if f["status"] == "timeout" and f["stage"] == "run"]
    for index, status, value in run_isolated("shlo2jax.tools.mutate:run_directly",
                                             [mutant_list[f["index"]] for f in running],
                                             jobs=jobs, timeout=timeout):
        failure = running[index]
        if status == "timeout":
            failures.remove(failure)
            outcomes["timeout"] -= 1
            outcomes[RUNS_LONG] += 1
        else:
            failure["detail"] += (f"; XLA's direct compile of the module ends within the "
                                  f"limit ({value if status == 'ok' else status})")
    if not outcomes["timeout"]:
        del outcomes["timeout"]


def _kinds(text: str) -> tuple:
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(f"unknown kind(s) {', '.join(unknown) or '(none)'}; "
                                         f"the kinds: {', '.join(KINDS)}")
    return kinds


def _save(data, name: str) -> None:
    """A failing mutant written as it was checked: a file, a folder, or a folder holding the
    program and the inputs.npz."""
    with _written(data) as (path, inputs):
        target = name + (os.path.splitext(path)[1] if inputs is None else "")
        if inputs is not None:
            os.makedirs(target, exist_ok=True)
            shutil.copy(path, os.path.join(target, os.path.basename(path)))
            shutil.copy(inputs, os.path.join(target, "inputs.npz"))
        elif os.path.isdir(path):
            shutil.copytree(path, target, dirs_exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
            shutil.copy(path, target)


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
    parser.add_argument("--kinds", type=_kinds, default=tuple(KINDS), metavar="KIND,...",
                        help="the kinds of mutants, comma-separated (default: all): " +
                             "; ".join(f"{k}: {v}" for k, v in KINDS.items()))
    parser.add_argument("--timeout", type=commands.positive_int, default=120,
                        help="seconds per mutant before its worker is killed and the mutant "
                             "counted as a hang, unless its compiled program was running and "
                             "runs past the limit under XLA's direct compile too "
                             "(default: %(default)s)")
    parser.add_argument("--json", help="write the outcomes and every failure to this file")
    parser.add_argument("--save", help="write each failing mutant to this folder")
    args = parser.parse_args(argv)
    sources = [s for s in default_sources(args.root, args.shared, hlo=args.hlo)
               if kind_of(s) in args.kinds] if {"bytes", "text"} & set(args.kinds) else []
    if args.releases:
        sources += [s for s in release_sources(args.root) if kind_of(s) in args.kinds]
    sources += structured_sources(args.root, args.kinds)
    if not sources:
        raise UsageError(f"no seeds for --kinds {','.join(args.kinds)} under {args.root}")
    mutant_list = mutants(sources, args.count, args.seed)
    report = run_mutants(mutant_list, jobs=args.jobs, timeout=args.timeout,
                         lowering=args.lowering, progress=not args.quiet)
    for name, n in report.outcomes.items():
        print(f"  {name}: {n}")
    for f in report.failures:
        print(f"{f['status']}: {f['source']} {f['mutation']} (mutant {f['index']}, seed "
              f"{args.seed}): {f['detail'].strip().splitlines()[-1] if f['detail'].strip() else ''}")
        if args.save:
            _save(mutant_list[f["index"]][2],
                  os.path.join(args.save, f"mutant_{args.seed}_{f['index']}"))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"seed": args.seed, "count": report.count, "seconds": report.seconds,
                       "outcomes": report.outcomes, "failures": report.failures}, out, indent=2)
    print(f"{report.seconds:.0f} s")
    print(report.summary())
    return 1 if report.failures else 0
