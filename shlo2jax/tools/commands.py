"""The program commands of the command line: `info`, `run`, `compare`, `export` (their
options, checked before any work, and what each prints). `shlo2jax.tools.cli` adds the tools
that take their own options (conformance, fuzz, mutate) and ends every error in one line
(`shlo2jax.tools.exits`)."""

from __future__ import annotations

import argparse
import json
import os
import math
import re
import time

import numpy as np

from shlo2jax import registry
from shlo2jax.errors import UsageError
from shlo2jax.loader import load
from shlo2jax.signatures import text as signature_text
from shlo2jax.spmd import grid, mesh
from shlo2jax.tools import exits
from shlo2jax.tools.compare import BUILTIN_BACKENDS, DEFAULT_BACKENDS, backend, compare
from shlo2jax.tools.compare.reduce import check_folder
from shlo2jax.tools.export import export_translated
from shlo2jax.tools.inputs import bind_arrays, read_npz, seeded_inputs
from shlo2jax.tools.option_flags import add_option_flags, options_from
from shlo2jax.tools.progress import Steps

COMMANDS = (
    ("info", "functions, signatures, op histogram, unsupported ops and derivatives; with "
             "--ops, every op and custom-call target translated"),
    ("run", "run a function on seeded or .npz inputs and print (or save) its outputs"),
    ("compare", "run one function on several backends and compare the outputs pair by pair, "
                "or two programs (--against) on the same inputs (exit 3 when they disagree, "
                "4 when fewer than two ran)"),
    ("export", "write the translated program back out: StableHLO text (.mlir) or a "
               "serialized jax.export artifact (.bin)"),
)

# `info` lists everything a program has: it loads not strict (the unsupported ops are listed,
# not refused) and with placeholder data (an elided constant is no reason to stop); --strict
# and --no-placeholder-data load as `run` does.
INFO_DEFAULTS = {"strict": False, "placeholder_data": True}
# The seed of a program command seeds its random inputs too.
_SEED_NOTE = {"seed": "; also the seed of the random inputs"}

# export -o: the format each extension stands for (--format names it for any other).
EXPORT_FORMATS = {"mlir": (".mlir",), "jax-export": (".bin", ".jax", ".exported")}


# ------------------------------------------------------------------- option types

def _number(kind, low, low_inclusive=True, what="a number"):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if value < low or (value == low and not low_inclusive):
            bound = "at least" if low_inclusive else "more than"
            raise argparse.ArgumentTypeError(f"{text} is out of range: must be {bound} {low}")
        return value
    parse.__name__ = what  # argparse names the type in its messages
    return parse


non_negative_float = _number(float, 0.0, what="a number >= 0")
positive_float = _number(float, 0.0, low_inclusive=False, what="a number > 0")
non_negative_int = _number(int, 0, what="an integer >= 0")
positive_int = _number(int, 1, what="an integer >= 1")


def _dim(text: str) -> tuple:
    match = re.fullmatch(r"([A-Za-z_]\w*)=(\d+)", text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r}: write NAME=SIZE, e.g. --dim b=4")
    return match.group(1), int(match.group(2))


def _shape(text: str) -> tuple:
    match = re.fullmatch(r"([^=]+)=((?:\d+(?:x\d+)*)?)", text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r}: write ARG=D0xD1x..., e.g. --shape x=4x6 "
                                         "(ARG= for a scalar)")
    dims = tuple(int(d) for d in match.group(2).split("x")) if match.group(2) else ()
    return match.group(1), dims


def _backends(text: str) -> list:
    names = [b.strip() for b in text.split(",") if b.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give at least two of " + ", ".join(BUILTIN_BACKENDS))
    unknown = [b for b in names if b not in BUILTIN_BACKENDS and not b.startswith("python=")]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown backend(s) {', '.join(map(repr, unknown))}; "
                         f"choose from {', '.join(BUILTIN_BACKENDS)}, python=PATH")
    for spec in names:
        if spec.startswith("python="):
            try:
                backend(spec)  # (a path that names no executable: refused before any work)
            except UsageError as e:
                raise argparse.ArgumentTypeError(str(e)) from None
    repeated = sorted({b for b in names if names.count(b) > 1})
    if repeated:
        raise argparse.ArgumentTypeError(f"{', '.join(repeated)} named twice")
    return names


def _npz_path(text: str) -> str:
    if not text.endswith(".npz"):
        raise argparse.ArgumentTypeError(f"{text!r}: the outputs are written as .npz; name the "
                                         "file *.npz")
    return text


# ------------------------------------------------------------------- the parser

_MODULE_HELP = ("the module to read from an XLA dump folder (--xla_dump_to) holding several: "
                "its name (jit_f), file prefix (module_0004.jit_f) or number")
_SIGNATURE_HELP = "the signature to read from a SavedModel folder (default: serving_default)"


def add_commands(sub) -> None:
    """The program commands as subparsers of `sub` (argparse's subparsers action)."""
    helps = dict(COMMANDS)
    p = sub.add_parser("info", help=helps["info"], description=helps["info"])
    p.add_argument("file", nargs="?", help="the program (see shlo2jax --help for the kinds read)")
    p.add_argument("--module", metavar="NAME", help=_MODULE_HELP)
    p.add_argument("--signature", metavar="NAME", help=_SIGNATURE_HELP)
    p.add_argument("--ops", action="store_true",
                   help="list every registered op and custom-call target with the function "
                        "(module:name) that translates it")
    p.add_argument("--mlir-types", action="store_true",
                   help="write signatures with MLIR types (tensor<8x16xf32>) instead of "
                        "f32[8,16]")
    add_option_flags(p, defaults=INFO_DEFAULTS)
    p.set_defaults(func=_info)

    p = sub.add_parser("run", help=helps["run"], description=helps["run"])
    _program_arguments(p, "run")
    _input_arguments(p)
    p.add_argument("--output", type=_npz_path, metavar="OUT.npz",
                   help="write the outputs to this .npz (arrays output_0, output_1, ...)")
    p.add_argument("--mlir-types", action="store_true",
                   help="write the signature with MLIR types")
    add_option_flags(p, notes={**_SEED_NOTE, "lowering": "; with direct, the function's "
                               "lowering is printed (docs: Direct lowering)"})
    p.set_defaults(func=_run)

    p = sub.add_parser("compare", help=helps["compare"], description=helps["compare"])
    _program_arguments(p, "compare")
    _input_arguments(p)
    p.add_argument("--backends", type=_backends, default=None, metavar="B1,B2,...",
                   help=f"comma-separated, at least two of: {', '.join(BUILTIN_BACKENDS)} "
                        f"(default: {','.join(DEFAULT_BACKENDS)}), or python=PATH: the "
                        "translated program under another Python's jax, in a child "
                        "(python=PATH:gpu on its GPU); absent devices are skipped "
                        "with the reason; with --against, one or more of cpu, gpu, tpu "
                        "(default: cpu)")
    p.add_argument("--against", metavar="OTHER",
                   help="compare FILE with another program of the same signature (an edited "
                        "copy, the HLO after XLA's optimizations, another producer's export): "
                        "both run on each backend on the same inputs; --locate names the first "
                        "op where they part (ops matched by location, else by structure)")
    p.add_argument("--grad", action="store_true",
                   help="compare the gradients of a seeded scalar loss (the outputs times fixed "
                        "seeded cotangents, summed) with respect to every floating-point input, "
                        "on translated backends (default: cpu,f64); --locate names the first "
                        "op of the backward pass whose result's cotangent differs")
    p.add_argument("--rtol", type=non_negative_float, default=1e-4,
                   help="relative tolerance against max(|a|, |b|), >= 0 (default: %(default)s)")
    p.add_argument("--atol", type=non_negative_float, default=1e-6,
                   help="absolute tolerance, >= 0 (default: %(default)s)")
    p.add_argument("--max-ulp", type=non_negative_int, default=None, metavar="N",
                   help="also accept floats at most N ULP apart")
    p.add_argument("--locate", action="store_true",
                   help="when backends disagree, report the first ops whose results diverge")
    p.add_argument("--json", metavar="FILE", help="write the comparison as JSON to this file")
    p.add_argument("--html", metavar="REPORT", help="write the comparison as one self-contained "
                   "HTML page to this file: the error tables, each disagreeing output's "
                   "element errors, and with --locate each op's error along the program and "
                   "the diverging ops")
    p.add_argument("--model-explorer", metavar="OVERLAY", help="with --locate: write each op's "
                   "max relative error as Model Explorer node data (JSON) to this file, to load "
                   "over the module in Model Explorer (the first pair located through probes)")
    p.add_argument("--reduce", metavar="DIR", help="when they disagree: write to the folder DIR "
                   "(made if absent) the smallest standalone module found that still disagrees "
                   "between the first disagreeing pair (cut at the op where the difference "
                   "starts, then delta-debugged), reduced.mlir (and reduced_other.mlir with "
                   "--against), and its arguments, inputs.npz")
    p.add_argument("--interpreter-timeout", type=positive_float, default=600.0, metavar="S",
                   help="seconds the reference interpreter, or a python= backend's child, may "
                        "run, > 0 (default: %(default)s; the interpreter evaluates op by op, a "
                        "large model takes minutes)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="say nothing on stderr as each backend and recording starts and ends "
                        "(said only where stderr is a terminal)")
    add_option_flags(p, notes=_SEED_NOTE)
    p.set_defaults(func=_compare)

    p = sub.add_parser("export", help=helps["export"], description=helps["export"])
    _program_arguments(p, "export")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="the file to write; its extension picks the format: .mlir for "
                        "StableHLO text, .bin (.jax, .exported) for a serialized jax.export "
                        "artifact; any other needs --format")
    p.add_argument("--format", choices=tuple(EXPORT_FORMATS),
                   help="mlir: StableHLO text; jax-export: a serialized jax.export artifact "
                        "(default: from OUT's extension)")
    add_option_flags(p)
    p.set_defaults(func=_export)


def _program_arguments(p, verb: str) -> None:
    """FILE, --module and --function: how every command picks its function (the load options,
    --seed among them, are `add_option_flags`')."""
    p.add_argument("file", help="the program: MLIR text (.mlir), MLIR bytecode or a VHLO "
                                "artifact (.mlir.bc, .bc), a serialized jax.export (.bin), "
                                "HLO: text, a .pb/.hlo.pb proto, an XLA dump folder, a "
                                "SavedModel folder jax2tf wrote, or a torch.export .pt2 "
                                "(with torch and torchax installed)")
    p.add_argument("--module", metavar="NAME", help=_MODULE_HELP)
    p.add_argument("--signature", metavar="NAME", help=_SIGNATURE_HELP)
    p.add_argument("--function", metavar="NAME",
                   help=f"public function to {verb} (default: @main, or the only public one)")


def _input_arguments(p) -> None:
    p.add_argument("--inputs", metavar="ARGS.npz",
                   help="the arguments as an .npz keyed by argument name as the signature "
                        "writes it (w1, x, args[0]), or by position (0, 1, ... or arg_0, "
                        "arg_1, ...) (default: seeded random values)")
    p.add_argument("--dim", type=_dim, action="append", default=[], metavar="NAME=SIZE",
                   help="size of a symbolic dimension of a shape-polymorphic jax.export "
                        "(f32[b,6]: --dim b=4), for seeded inputs (repeatable)")
    p.add_argument("--shape", type=_shape, action="append", default=[], metavar="ARG=D0xD1",
                   help="the whole shape of one argument (name or position) with `?` "
                        "dimensions, for seeded inputs: --shape x=4x6 (repeatable)")


# ------------------------------------------------------------------- shared steps

# Inputs of at least this many bytes are loaded saying so (on a terminal): a load of a
# gigabyte of weights takes seconds.
LARGE_INPUT_BYTES = 64 << 20


def _load(args):
    """The program FILE, loaded with the options the flags give (`options_from`); a large
    one with its start and end said on stderr (`Steps`)."""
    say = Steps("shlo2jax", quiet=getattr(args, "quiet", False))
    size = _input_bytes(args.file) if say.shown else 0
    if size >= LARGE_INPUT_BYTES:
        say(f"loading {args.file} ({size / (1 << 20):,.0f} MB)")
    start = time.perf_counter()
    with exits.about(args.file):
        program = load(args.file, options_from(args), module=args.module,
                       signature=args.signature)
    if size >= LARGE_INPUT_BYTES:
        say(f"loaded in {time.perf_counter() - start:.1f} s")
    return program


def _input_bytes(path: str) -> int:
    """The bytes of the file, or of the files in the folder (0 where it cannot be read: the
    load says why)."""
    try:
        if os.path.isdir(path):
            return sum(os.path.getsize(os.path.join(folder, name))
                       for folder, _, names in os.walk(path) for name in names)
        return os.path.getsize(path)
    except OSError:
        return 0


def _function(program, name):
    if name:
        if name.lstrip("@") not in program.functions:
            raise UsageError(f"--function {name}: no public function @{name.lstrip('@')}; "
                             f"public functions: {', '.join(program.functions) or 'none'}")
        return program.functions[name.lstrip("@")]
    if "main" not in program.functions and len(program.functions) != 1:
        raise UsageError("the program has no @main and several public functions "
                         f"({', '.join(program.functions)}): pick one with --function")
    return program.entry


def _inputs(fn, args) -> tuple:
    """(the arguments, how they were made) from --inputs, or seeded with --dim/--shape."""
    if args.inputs:
        if args.dim or args.shape:
            raise UsageError("--dim and --shape size seeded inputs; --inputs gives every "
                             "array, so they cannot go with it")
        return bind_arrays(fn, read_npz(args.inputs)), "given"
    dims, seed = dict(args.dim), options_from(args).seed
    return (seeded_inputs(fn, seed, dims=dims, shapes=dict(args.shape)),
            f"seeded (seed {seed})")


def _signature(fn, mlir_types: bool) -> str:
    if not mlir_types:
        return fn.signature
    return signature_text(fn.name, fn.in_avals, fn.out_avals, fn.arg_names, mlir_types=True)


# ------------------------------------------------------------------- the commands

def _info(args) -> int:
    if args.ops:
        return _rules()
    if args.file is None:
        raise UsageError("info: give a FILE, or --ops")
    program = _load(args)
    module = program.module
    print(f"module: {module.name or '(unnamed)'}  replicas={program.num_replicas} "
          f"partitions={program.num_partitions}")
    print("public functions:")
    for fn in program.functions.values():
        print(f"  {_signature(fn, args.mlir_types)}")
    private = [n for n, f in module.functions.items() if not f.public]
    if private:
        print(f"private functions: {len(private)}")
    hist = module.op_histogram()
    print(f"ops: {sum(hist.values())} ({len(hist)} kinds)")
    for name, count in hist.items():
        print(f"  {count:7d}  {name}")
    # Collectives whose groups name more processes than a plain call has are no gap: they
    # run as a grid of processes (spmd.run_spmd), so they are listed apart.
    needs_grid = set(grid.plain_call_problems(module, mesh.num_partitions(module)))
    unsupported = [p for p in module.problems if p not in needs_grid]
    if unsupported:
        print(f"not yet supported ({len(unsupported)}):")
        for name, loc, what in unsupported:
            print(f"  {name} at {loc}: {what}")
    else:
        print("every op is supported")
    on_grid = [p for p in module.problems if p in needs_grid]
    if on_grid:
        runs = {m[0] for p in on_grid for m in re.finditer(r"shlo2jax\.spmd\.run_spmd\([^)]*\)",
                                                             p[2])}
        how = runs.pop() if len(runs) == 1 else "shlo2jax.spmd.run_spmd(..., num_replicas=N)"
        print(f"needs a process grid ({len(on_grid)}): run with {how}")
        for name, loc, what in on_grid:
            print(f"  {name} at {loc}: {what}")
    dormant = module.dormant_problems
    if dormant:
        print(f"in functions that never run (unreached, or decompositions replaced by a "
              f"registered composite implementation): {len(dormant)} unsupported op(s)")
    _print_derivatives(program)
    return exits.OK


def _print_derivatives(program) -> None:
    options = program.options
    print("derivatives:")
    for fn in program.functions.values():
        if getattr(fn, "uses_producer_vjp", False):
            print(f"  @{fn.name}: reverse mode uses the producer's VJP shipped with the "
                  "artifact (jax.export, vjp_order >= 1); forward mode and vmap the translation")
        else:
            print(f"  @{fn.name}: the translation's ({options.gradients.replace('_', '-')} "
                  "derivative rules)")
    loops = [op for op in program.module.ops if op.name in ("stablehlo.while", "mhlo.while")
             and getattr(op.params, "counted", None) is None]
    if loops:
        unbounded = [op for op in loops if not op.params.bounds]
        print(f"  {len(loops)} while loop(s) with no static trip count; reverse mode runs them "
              "as bounded, checkpointed loops, bounded by a counter in the condition where "
              f"there is one, else by max_loop_trips (now {options.max_loop_trips}); "
              f"{len(unbounded)} have no such counter:")
        for op in unbounded[:10]:
            print(f"    {op.name} at {op.location}")
        if len(unbounded) > 10:
            print(f"    ... and {len(unbounded) - 10} more")


def _rules() -> int:
    """Every registered op and custom-call target, with the function that translates it."""
    # Here, not at the top: the op families load for `info --ops` alone, not at every
    # command's start (`--help`, and the conformance, fuzz and mutate parents, need none).
    import shlo2jax.ops  # noqa: F401  (the built-in rules register when their families load)

    def where(handler) -> str:
        return f"{handler.__module__}:{handler.__qualname__}"

    tables = (("ops", registry.OP_RULES), ("custom_call targets", registry.CUSTOM_CALL_RULES),
              ("composites", registry.COMPOSITE_RULES))
    for title, table in tables:
        if not table:
            continue
        print(f"{title} ({len(table)}):")
        width = max(len(name) for name in table)
        for name in sorted(table):
            rule = table[name]
            print(f"  {name:<{width}}  {where(getattr(rule, 'handler', rule))}")
    return exits.OK


def _writable(flag: str, path) -> None:
    """A UsageError, before any work, where the file `path` (given by `flag`) cannot be
    written: its folder missing or not writable, or a folder in its place."""
    if not path:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path}: is a folder; give a file name")
    if not os.path.isdir(folder):
        raise UsageError(f"{flag} {path}: no folder {folder}")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"{flag} {path}: the folder {folder} is not writable")


def _run(args) -> int:
    _writable("--output", args.output)
    program = _load(args)
    fn = _function(program, args.function)
    with exits.about(args.file):
        inputs, _ = _inputs(fn, args)
        outputs = _named_outputs(fn(*inputs))
    print(_signature(fn, args.mlir_types))
    if program.options.lowering == "direct":
        print(f"lowering: {fn.lowering}" + (f" ({fn.lowering_note})" if fn.lowering_note else ""))
    with np.printoptions(threshold=20, edgeitems=3, precision=6):
        for label, (_, out) in zip(_labels(outputs), outputs.items()):
            print(f"output {label}: {out.dtype}{list(out.shape)}\n{out}")
    if args.output:
        np.savez(args.output, **outputs)
        print(f"saved {len(outputs)} output(s) to {args.output}")
    return exits.OK


def _named_outputs(outputs) -> dict:
    """What a call returned, name -> array: a dict's (a SavedModel signature's) by its keys,
    sorted; else `output_<i>` in order."""
    if isinstance(outputs, dict):
        return {str(k): np.asarray(v) for k, v in sorted(outputs.items())}
    if not isinstance(outputs, tuple):
        outputs = (outputs,)
    return {f"output_{i}": np.asarray(o) for i, o in enumerate(outputs)}


def _labels(outputs: dict) -> list:
    """How `run` prints each output: its position, or its key where the call returned a dict."""
    return [name[len("output_"):] if name == f"output_{i}" else name
            for i, name in enumerate(outputs)]


def _compare(args) -> int:
    if args.against is None and args.backends is not None and len(args.backends) < 2:
        raise UsageError(f"--backends {','.join(args.backends)}: compare needs at least two "
                         f"backends (of {', '.join(BUILTIN_BACKENDS)})")
    _writable("--json", args.json)
    _writable("--html", args.html)
    _writable("--model-explorer", args.model_explorer)
    if args.model_explorer and not args.locate:
        raise UsageError("--model-explorer writes the errors --locate measures: add --locate")
    if args.reduce is not None:
        if args.grad:
            raise UsageError("--reduce reduces a disagreement of the outputs; not with --grad")
        check_folder(args.reduce)
    program = _load(args)
    fn = _function(program, args.function)
    other = None
    if args.against is not None:
        with exits.about(args.against):
            other = load(args.against, program.options, module=args.module)
    with exits.about(args.file):
        given = None
        if args.inputs or args.dim or args.shape:
            given, _ = _inputs(fn, args)
        result = compare(program, backends=args.backends, against=other,
                         against_name=args.against, grad=args.grad, function=fn.name,
                         inputs=given, seed=program.options.seed, rtol=args.rtol,
                         atol=args.atol, max_ulp=args.max_ulp, locate=args.locate,
                         reduce=args.reduce, interpreter_timeout=args.interpreter_timeout,
                         progress=Steps("compare", quiet=args.quiet))
    print(result.table())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result.to_json(), f, indent=2)
        print(f"wrote {args.json}")
    if result.reduced is not None:
        print(f"{result.reduced.line}\nrerun: {result.reduced.rerun}")
    elif args.reduce is not None:
        print("reduce: nothing to reduce (no pair disagrees)")
    if args.html:
        result.write_html(args.html)
        print(f"wrote {args.html}")
    if args.model_explorer:
        pair = result.write_model_explorer(args.model_explorer)
        print(f"wrote {args.model_explorer}" + (f" ({' vs '.join(pair)})" if pair else
                                                 " (no graph: no pair was located through "
                                                 "probes)"))
    not_run = [f"{r.name} {r.status}: {exits.one_line(r.reason)}"
               for r in result.runs.values() if r.status != "ok"]
    detail = f" ({'; '.join(not_run)})" if not_run else ""
    disagreeing = result.disagreeing()
    if disagreeing:
        pairs = sorted({f"{p.a} vs {p.b}" for p in disagreeing})
        what = f"{args.file} and {args.against}" if args.against else "backends"
        what = f"the gradients ({what})" if args.grad else what
        raise exits.CommandFailed(exits.DISAGREE, f"{what} disagree: {', '.join(pairs)} beyond "
                                  f"rtol={args.rtol}, atol={args.atol}{detail}")
    if result.vacuous == "nan":
        raise exits.CommandFailed(
            exits.NOTHING_COMPARED, "nothing compared: every output is NaN on every backend "
            f"(give inputs the model expects: --inputs){detail}")
    if not result.compared:
        ran = [r.name for r in result.runs.values() if r.status == "ok"]
        raise exits.CommandFailed(
            exits.NOTHING_COMPARED, f"nothing compared: {len(ran)} of {len(result.runs)} backends "
            f"produced results{' (' + ', '.join(ran) + ')' if ran else ''}{detail}")
    if not result.ok:
        raise exits.CommandFailed(exits.DISAGREE, f"a backend failed{detail}")
    return exits.OK


def _export_format(args) -> str:
    if args.format:
        return args.format
    for name, suffixes in EXPORT_FORMATS.items():
        if args.output.endswith(suffixes):
            return name
    raise UsageError(f"-o {args.output}: cannot tell the format from its extension; name it "
                     ".mlir (StableHLO text) or .bin (a serialized jax.export), or give "
                     "--format mlir|jax-export")


def _export(args) -> int:
    what = _export_format(args)
    _writable("-o", args.output)
    program = _load(args)
    fn = _function(program, args.function)
    with exits.about(args.file):
        exported = export_translated(fn)
    if what == "mlir":
        with open(args.output, "w") as f:
            f.write(exported.mlir_module())
        written = "StableHLO text"
    else:
        with open(args.output, "wb") as f:
            f.write(exported.serialize())
        written = "a serialized jax.export artifact"
    print(f"wrote the translation of {fn.signature} to {args.output} as {written}")
    return exits.OK


def main(argv: list) -> int:
    """The program commands alone, as `shlo2jax.tools.cli.main` runs them: the exit status,
    an error ending in one line on stderr (`shlo2jax mutate` checks every mutant so)."""
    parser = exits.Parser(prog="shlo2jax")
    add_commands(parser.add_subparsers(dest="command", required=True,
                                       parser_class=exits.Parser))

    def command(words):
        args = parser.parse_args(words)
        return args.func(args)
    return exits.guarded(command, list(argv), debug=False)
