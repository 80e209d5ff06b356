"""The `shlo2jax` command line: info, run, compare, export, conformance."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from shlo2jax import registry
from shlo2jax.loader import load
from shlo2jax.tools.compare import compare
from shlo2jax.tools.conformance import main as conformance_main
from shlo2jax.tools.export import export_translated
from shlo2jax.tools.fuzz import main as fuzz_main
from shlo2jax.tools.inputs import seeded_inputs
from shlo2jax.tools.mutate import main as mutate_main


def _info(args) -> int:
    if args.ops:
        return _rules()
    if args.file is None:
        print("shlo2jax info: give a FILE, or --ops", file=sys.stderr)
        return 2
    program = load(args.file, strict=False, placeholder_data=True)
    module = program.module
    print(f"module: {module.name or '(unnamed)'}  replicas={program.num_replicas} "
          f"partitions={program.num_partitions}")
    print("public functions:")
    for fn in program.functions.values():
        print(f"  {fn.signature}")
    private = [n for n, f in module.functions.items() if not f.public]
    if private:
        print(f"private functions: {len(private)}")
    hist = module.op_histogram()
    print(f"ops: {sum(hist.values())} ({len(hist)} kinds)")
    for name, count in hist.items():
        print(f"  {count:7d}  {name}")
    if module.problems:
        print(f"not yet supported ({len(module.problems)}):")
        for name, loc, what in module.problems:
            print(f"  {name} at {loc}: {what}")
    else:
        print("every op is supported")
    dormant = module.dormant_problems
    if dormant:
        print(f"in functions that never run (unreached, or decompositions replaced by a "
              f"registered composite implementation): {len(dormant)} unsupported op(s)")
    _print_derivatives(program)
    return 0


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
    return 0


def _run(args) -> int:
    program = load(args.file, placeholder_data=args.placeholder_data, seed=args.seed,
                   lowering=args.lowering)
    fn = program[args.function] if args.function else program.entry
    if args.inputs:
        inputs = _load_inputs(args.inputs)
    else:
        inputs = seeded_inputs(fn, args.seed)
    outputs = fn(*inputs)
    if not isinstance(outputs, tuple):
        outputs = (outputs,)
    outputs = [np.asarray(o) for o in outputs]
    print(f"{fn.signature}")
    if args.lowering == "direct":
        print(f"lowering: {fn.lowering}" + (f" ({fn.lowering_note})" if fn.lowering_note else ""))
    with np.printoptions(threshold=20, edgeitems=3, precision=6):
        for i, out in enumerate(outputs):
            print(f"output {i}: {out.dtype}{list(out.shape)}\n{out}")
    if args.output:
        np.savez(args.output, **{f"output_{i}": o for i, o in enumerate(outputs)})
        print(f"saved {len(outputs)} output(s) to {args.output}")
    return 0


def _load_inputs(path: str) -> list:
    data = np.load(path)
    keys = sorted(data.files, key=lambda k: int(k.split("_")[-1]) if k.split("_")[-1].isdigit() else k)
    return [data[k] for k in keys]


def _compare(args) -> int:
    result = compare(args.file, backends=[b.strip() for b in args.backends.split(",") if b.strip()],
                     function=args.function,
                     inputs=_load_inputs(args.inputs) if args.inputs else None, seed=args.seed,
                     rtol=args.rtol, atol=args.atol, max_ulp=args.max_ulp, locate=args.locate,
                     interpreter_timeout=args.interpreter_timeout,
                     placeholder_data=args.placeholder_data)
    print(result.table())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result.to_json(), f, indent=2)
        print(f"wrote {args.json}")
    return 0 if result.ok else 1


def _export(args) -> int:
    program = load(args.file, placeholder_data=args.placeholder_data, seed=args.seed)
    fn = program[args.function] if args.function else program.entry
    exported = export_translated(fn)
    if args.output.endswith(".mlir"):
        text = exported.mlir_module()
        with open(args.output, "w") as f:
            f.write(text)
        what = "StableHLO text"
    else:
        with open(args.output, "wb") as f:
            f.write(exported.serialize())
        what = "a serialized jax.export artifact"
    print(f"wrote the translation of {fn.signature} to {args.output} as {what}")
    return 0


def _program_arguments(p, verb: str) -> None:
    """FILE, --function, --seed and --placeholder-data: how every command picks its function."""
    p.add_argument("file")
    p.add_argument("--function", help=f"public function to {verb} (default: the entry)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--placeholder-data", action="store_true",
                   help="fill dense_resource<__elided__> constants with seeded data")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "conformance":
        return conformance_main(argv[1:])
    if argv and argv[0] == "fuzz":
        return fuzz_main(argv[1:])
    if argv and argv[0] == "mutate":
        return mutate_main(argv[1:])
    parser = argparse.ArgumentParser(prog="shlo2jax", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="functions, signatures, op histogram and unsupported ops; "
                                    "with --ops, every op and custom-call target translated")
    p.add_argument("file", nargs="?")
    p.add_argument("--ops", action="store_true",
                   help="list every registered op and custom-call target with the function "
                        "(module:name) that translates it")
    p.set_defaults(func=_info)
    p = sub.add_parser("run", help="run a function on seeded or .npz inputs")
    _program_arguments(p, "run")
    p.add_argument("--inputs", help=".npz with arg_0, arg_1, ... (default: seeded random)")
    p.add_argument("--output", help="write the outputs to this .npz")
    p.add_argument("--lowering", choices=("translate", "direct"), default="translate",
                   help="direct: XLA compiles the module's own ops where it can (see README, "
                        "Performance); the function's lowering is printed")
    p.set_defaults(func=_run)
    p = sub.add_parser("compare", help="run one module on several backends and compare the "
                                       "outputs pair by pair (exit 1 when they disagree)")
    _program_arguments(p, "compare")
    p.add_argument("--backends", default="cpu,interpreter,xla-direct,f64",
                   help="comma-separated: cpu, gpu, tpu, interpreter, xla-direct, f64 "
                        "(default: %(default)s); absent devices are skipped with the reason")
    p.add_argument("--inputs", help=".npz with arg_0, arg_1, ... (default: seeded random)")
    p.add_argument("--rtol", type=float, default=1e-4,
                   help="relative tolerance against max(|a|, |b|) (default: %(default)s)")
    p.add_argument("--atol", type=float, default=1e-6, help="absolute tolerance (default: %(default)s)")
    p.add_argument("--max-ulp", type=int, default=None,
                   help="also accept floats at most this many ULP apart")
    p.add_argument("--locate", action="store_true",
                   help="when backends disagree, report the first ops whose results diverge")
    p.add_argument("--json", help="write the comparison as JSON to this file")
    p.add_argument("--interpreter-timeout", type=float, default=600.0,
                   help="seconds the reference interpreter may run (default: %(default)s; it "
                        "evaluates op by op, a large model takes minutes)")
    p.set_defaults(func=_compare)
    p = sub.add_parser("export", help="write the translated program back out: StableHLO text "
                                      "(OUTPUT.mlir) or a serialized jax.export artifact")
    _program_arguments(p, "export")
    p.add_argument("-o", "--output", required=True)
    p.set_defaults(func=_export)
    sub.add_parser("conformance", help="run StableHLO conformance cases (see --help)")
    sub.add_parser("fuzz", help="random well-typed programs: the translation against XLA and "
                                "the reference interpreter; exit 1 on a mismatch or crash")
    sub.add_parser("mutate", help="load and call malformed mutants of the bundled modules; "
                                  "exit 1 on a crash or an error not the library's (see --help)")
    args = parser.parse_args(argv)
    return args.func(args)
