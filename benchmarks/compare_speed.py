"""What locating (and reducing) a disagreement costs beside a plain comparison, on the
largest corpus models.

    python benchmarks/compare_speed.py [--models torch/hf_distilbert_dynamic_batch,...]
                                       [--backends cpu,f64] [--runs 3] [--json FILE]

Each figure is the wall time of one `shlo2jax compare` command line, as a user runs it, in a
fresh process (import, load, every backend's run, the pair's figures): `plain` with
`--rtol 0 --atol 0` (so float32 and its f64 reference disagree and there is something to
locate), `locate` the same with `--locate`, and, where the command line has it, `reduce` with
`--locate --reduce DIR`. The variants of one model run in alternation; each figure is the
median over `--runs`. `x plain` is the variant's time over the plain comparison's (the
issue's bar: `--locate` at most 3x, `--reduce` at most 60 s); `cpu s` the command's CPU
seconds (user and system: on a shared machine, less swayed by the others' load than walls).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The largest corpus artifacts of static shapes by op count: 1,564 and 1,458 ops (the one
# larger, hf_distilbert_dynamic_batch, needs --dim).
DEFAULT_MODELS = ("torch/hf_whisper", "torch/hf_bart")


def _has_reduce() -> bool:
    out = subprocess.run([sys.executable, "-m", "shlo2jax", "compare", "--help"],
                         capture_output=True, text=True, cwd=ROOT)
    return "--reduce" in out.stdout


def _command(model: str, backends: str, variant: str, scratch: str) -> list:
    argv = [sys.executable, "-m", "shlo2jax", "compare",
            str(ROOT / "tests" / "corpus" / model / "exported.bin"),
            "--backends", backends, "--rtol", "0", "--atol", "0"]
    if variant in ("locate", "reduce"):
        argv.append("--locate")
    if variant == "reduce":
        argv += ["--reduce", os.path.join(scratch, "reduced")]
    return argv


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(argv: list) -> tuple:
    """(wall seconds, CPU seconds) of the command."""
    start, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    # exit 3: the backends differ, what --rtol 0 asks to see; anything but 0/3 is a failure
    if done.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return time.perf_counter() - start, _children_cpu() - cpu


def measure(models, backends: str, runs: int) -> list:
    variants = ["plain", "locate"] + (["reduce"] if _has_reduce() else [])
    rows = []
    for model in models:
        times = {v: [] for v in variants}
        cpus = {v: [] for v in variants}
        for _ in range(runs):
            for variant in variants:
                with tempfile.TemporaryDirectory() as scratch:
                    seconds, cpu = _timed(_command(model, backends, variant, scratch))
                times[variant].append(seconds)
                cpus[variant].append(cpu)
        plain = statistics.median(times["plain"])
        for variant in variants:
            median = statistics.median(times[variant])
            rows.append({"model": model, "variant": variant, "seconds": round(median, 2),
                         "x_plain": round(median / plain, 2),
                         "cpu_seconds": round(statistics.median(cpus[variant]), 2),
                         "runs": runs})
    return rows


def table(rows: list) -> str:
    lines = ["| model | variant | seconds | x plain | cpu s |", "|---|---|---:|---:|---:|"]
    lines += [f"| {r['model']} | {r['variant']} | {r['seconds']:.2f} | {r['x_plain']:.2f} "
              f"| {r['cpu_seconds']:.2f} |" for r in rows]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS),
                        help="corpus entries (folders under tests/corpus holding exported.bin)")
    parser.add_argument("--backends", default="cpu,f64")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args(argv)
    rows = measure([m for m in args.models.split(",") if m], args.backends, args.runs)
    print(table(rows))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
