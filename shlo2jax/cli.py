"""The `shlo2jax` command line: info, run, conformance."""

from __future__ import annotations

import argparse
import sys

import numpy as np


def _info(args) -> int:
    import shlo2jax
    program = shlo2jax.load(args.file, strict=False, placeholder_data=True)
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
    return 0


def _run(args) -> int:
    import shlo2jax
    from shlo2jax.inputs import seeded_inputs
    program = shlo2jax.load(args.file, placeholder_data=args.placeholder_data, seed=args.seed)
    fn = program[args.function] if args.function else program.entry
    if args.inputs:
        data = np.load(args.inputs)
        keys = sorted(data.files, key=lambda k: int(k.split("_")[-1]) if k.split("_")[-1].isdigit() else k)
        inputs = [data[k] for k in keys]
    else:
        inputs = seeded_inputs(fn, args.seed)
    outputs = fn(*inputs)
    if not isinstance(outputs, tuple):
        outputs = (outputs,)
    outputs = [np.asarray(o) for o in outputs]
    print(f"{fn.signature}")
    with np.printoptions(threshold=20, edgeitems=3, precision=6):
        for i, out in enumerate(outputs):
            print(f"output {i}: {out.dtype}{list(out.shape)}\n{out}")
    if args.output:
        np.savez(args.output, **{f"output_{i}": o for i, o in enumerate(outputs)})
        print(f"saved {len(outputs)} output(s) to {args.output}")
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "conformance":
        from shlo2jax.conformance import main as conformance_main
        return conformance_main(argv[1:])
    parser = argparse.ArgumentParser(prog="shlo2jax", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="functions, signatures, op histogram and unsupported ops")
    p.add_argument("file")
    p.set_defaults(func=_info)
    p = sub.add_parser("run", help="run a function on seeded or .npz inputs")
    p.add_argument("file")
    p.add_argument("--function", help="public function to run (default: the entry)")
    p.add_argument("--inputs", help=".npz with arg_0, arg_1, ... (default: seeded random)")
    p.add_argument("--output", help="write the outputs to this .npz")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--placeholder-data", action="store_true",
                   help="fill dense_resource<__elided__> constants with seeded data")
    p.set_defaults(func=_run)
    sub.add_parser("conformance", help="run StableHLO conformance cases (see --help)")
    args = parser.parse_args(argv)
    return args.func(args)
