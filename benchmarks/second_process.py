"""Load-to-first-result of a first and a second process, with JAX's persistent compilation cache.

    python benchmarks/second_process.py [MODEL] [--runs 2]

MODEL defaults to ../shared/models/searchless_chess_9m.mlir.bc when it is there, else the
bundled examples/mlp.mlir. Each run is a fresh Python process that imports jax and shlo2jax,
loads the artifact, calls its entry function under `jax.jit` on seeded inputs and waits for the
result; all runs share one empty cache folder (`jax_compilation_cache_dir`), so the first
process compiles and writes the cache and the later ones read it. Prints, per process: import,
load (parse + decode), first result (trace + lower + compile or cache read + run) and the total
from the start of the process, in wall seconds.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_MODEL = ROOT.parent / "shared" / "models" / "searchless_chess_9m.mlir.bc"

CHILD = textwrap.dedent("""
    import json, sys, time
    t0 = time.perf_counter()
    import jax
    jax.config.update("jax_compilation_cache_dir", sys.argv[2])
    # cache every compilation, however small or fast (the defaults skip quick ones)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    import shlo2jax
    from shlo2jax.tools.inputs import seeded_inputs
    t1 = time.perf_counter()
    program = shlo2jax.load(sys.argv[1])
    t2 = time.perf_counter()
    fn = program.entry
    inputs = seeded_inputs(fn, seed=0)
    jax.block_until_ready(jax.jit(fn)(*inputs))
    t3 = time.perf_counter()
    print(json.dumps({"import": t1 - t0, "load": t2 - t1, "first_result": t3 - t2,
                      "total": t3 - t0}))
""")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default=str(SHARED_MODEL if SHARED_MODEL.exists()
                                                        else ROOT / "examples" / "mlp.mlir"))
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        for _ in range(args.runs):
            done = subprocess.run([sys.executable, "-c", CHILD, args.model, cache],
                                  capture_output=True, text=True, check=True)
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        entries = sum(1 for p in pathlib.Path(cache).rglob("*") if p.is_file())
    print(f"{args.model}: {args.runs} processes sharing one persistent compilation cache "
          f"({entries} cache entries written)")
    print(f"{'process':8s} {'import s':>9s} {'load s':>8s} {'first result s':>15s} {'total s':>8s}")
    for i, row in enumerate(rows, 1):
        print(f"{i:<8d} {row['import']:9.2f} {row['load']:8.2f} {row['first_result']:15.2f} "
              f"{row['total']:8.2f}")


if __name__ == "__main__":
    main()
