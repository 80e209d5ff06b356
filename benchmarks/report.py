"""The benchmarks side by side in one run, and the README's performance bullet made from it.

    python benchmarks/report.py [--full] [--parts speed,memory,grads] [--size-mb 1024]
                                [--args-mb 3072] [--grads-python PYTHON] [--results FILE]
    python benchmarks/report.py --readme     # rewrite README.md's block from the results
    python benchmarks/report.py --check      # exit 1 where README.md's block is stale

A run starts each benchmark as a child process with `--json` and collects what it writes into
`--results` (benchmarks/results/latest.json, committed), with when and where it ran: the date,
the commit, jax's version, the CPU and the load average before and after each part (the
machine may be shared: compare the columns of one run, not runs made at other times). A part
left out of `--parts` keeps its figures from the run before, with their own date. Then it prints
one markdown table. By default each benchmark runs in a quick mode (about 7 minutes in all);
`--full` runs their own defaults (about 15 minutes for speed.py alone):

  speed   benchmarks/speed.py: time to first result (import + load + first call) of a small
          corpus artifact beside `jax.export.deserialize` + call, and the translation
          throughput (load + trace + lower) of bench.py's real programs of 50,000+ ops and its
          generated 62,000-op program (quick: `--small jax/mlp --large
          generated,climate,fold,sampler,neural_ode --runs 6`: medians of 6 processes for
          the small artifact, 3 for each large program)
  memory  benchmarks/memory.py: peak memory of load + first call with 1 GB of weights baked
          into a `jax.export` artifact and with 3 GB passed as arguments, per lowering and
          for `jax.export` (`--size-mb`/`--args-mb` for smaller cases)
  grads   benchmarks/grads.py, where it exists and takes `--json`: gradient compile and call
          time beside Enzyme-JAX and jax.grad of the source (quick: the `lm` case, 3 runs).
          Enzyme-JAX imports only in its own environment: `--grads-python` names its Python
          (benchmarks/requirements-enzyme.txt); elsewhere grads.py reports it skipped

`--readme` writes README.md's performance bullet (between `<!-- performance:begin -->` and
`<!-- performance:end -->`) from the results alone, running nothing; `--check` (and
tests/test_benchmarks_report.py) fails where that bullet is not what the results give.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import textwrap
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
RESULTS = BENCHMARKS / "results" / "latest.json"
README = ROOT / "README.md"
BEGIN, END = "<!-- performance:begin -->", "<!-- performance:end -->"
# The bullet, markers included, stays within what the hand-written one took (README.md must
# stay under 12,000 characters: tests/test_docs.py).
README_BLOCK_LIMIT = 663
PARTS = ("speed", "memory", "grads")

# bench.py's real producers' programs of 50,000+ ops (jax.export artifacts made at bench time)
REAL_PROGRAMS = ("climate", "fold", "sampler", "neural_ode")
QUICK = {
    "speed": ["--small", "jax/mlp", "--large", "generated," + ",".join(REAL_PROGRAMS),
              "--runs", "6"],
    "grads": ["--cases", "lm", "--runs", "3", "--calls", "10", "--seconds", "3"],
}


# ------------------------------------------------------------------ running the benchmarks

def machine() -> dict:
    """Where the run happens: what the figures depend on besides the code."""
    import jax
    cpu = ""
    try:
        cpu = next((line.split(":", 1)[1].strip() for line in
                    pathlib.Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), "")
    except OSError:
        pass
    return {"cpu": cpu or platform.processor(), "cpus": os.cpu_count(),
            "jax": jax.__version__, "backend": jax.default_backend(),
            "python": platform.python_version(),
            "note": "a shared machine: other work may run beside the benchmarks (see each "
                    "part's load average); compare the columns of one part, not parts or runs "
                    "made at other times"}


def part_command(part: str, opts) -> list:
    """The benchmark's command line (without `--json`), or None where it cannot run."""
    script = BENCHMARKS / f"{part}.py"
    if part == "memory":
        return [sys.executable, str(script), "--size-mb", str(opts.size_mb),
                "--args-mb", str(opts.args_mb or 3 * opts.size_mb)]
    args = [] if opts.full else QUICK[part]
    python = opts.grads_python if part == "grads" else sys.executable
    return [python, str(script), *args]


def grads_unavailable(python: str):
    """Why benchmarks/grads.py cannot be run (None where it can)."""
    script = BENCHMARKS / "grads.py"
    if not script.exists():
        return "benchmarks/grads.py does not exist"
    try:
        usage = subprocess.run([python, str(script), "--help"], capture_output=True, text=True,
                               timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"benchmarks/grads.py --help failed: {e}"
    return None if "--json" in usage else "benchmarks/grads.py takes no --json"


def run_part(part: str, opts) -> dict:
    """One benchmark in a child process: its `--json` output, with when and how it ran."""
    command = part_command(part, opts)
    record = {"command": " ".join(_shown(a) for a in command),
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "commit": _commit(), "load_average_before": round(os.getloadavg()[0], 2)}
    if part == "grads":
        why = grads_unavailable(command[0])
        if why:
            return record | {"not_run": why}
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / f"{part}.json"
        start = time.perf_counter()
        print(f"== {part}: {record['command']}", flush=True)
        try:
            done = subprocess.run(command + ["--json", str(out)], cwd=ROOT,
                                  timeout=opts.timeout)
            status = done.returncode
        except subprocess.TimeoutExpired:
            status = f"ran past {opts.timeout} s"
        record["seconds"] = round(time.perf_counter() - start, 1)
        record["load_average_after"] = round(os.getloadavg()[0], 2)
        if status != 0 or not out.exists():
            return record | {"not_run": f"{part}.py ended with {status} and wrote no results"}
        return record | {"results": json.loads(out.read_text())}


def _commit() -> str:
    """The checkout's commit, `-dirty` where the working tree holds uncommitted edits."""
    return subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT,
                          capture_output=True, text=True).stdout.strip()


def _shown(arg: str) -> str:
    path = pathlib.Path(arg)
    if arg == sys.executable:
        return "python"
    if path.is_absolute() and ROOT in path.parents:
        return str(path.relative_to(ROOT))
    return arg


# ------------------------------------------------------------------ reading the results

def speed_rows(speed: dict) -> dict:
    """{'first': [(entry, shlo2jax total s, jax.export total s)], 'steady': [...ms],
    'large': [(program, static ops, shlo2jax s, jax.export s or None, shlo2jax CPU s or None)]}"""
    first, steady, large = [], [], []
    for entry, row in speed.get("small", {}).items():
        ours, theirs = row.get("shlo2jax", {}), row.get("jax.export", {})
        if ours.get("total") and theirs.get("total"):
            first.append((entry, ours["total"], theirs["total"]))
        if ours.get("steady") and theirs.get("steady"):
            steady.append((entry, ours["steady"] * 1e3, theirs["steady"] * 1e3))
    for program, row in speed.get("large", {}).items():
        ours, theirs = row.get("shlo2jax", {}), row.get("jax.export", {})
        ops = ours.get("static_ops") or theirs.get("static_ops")
        if ops and ours.get("seconds"):
            large.append((program, ops, ours["seconds"], theirs.get("seconds"), ours.get("cpu")))
    return {"first": first, "steady": steady, "large": large}


def memory_rows(memory: list) -> dict:
    """{(case, megabytes): {variant: row}} of memory.py's rows that ran."""
    out: dict = {}
    for row in memory:
        if "error" not in row:
            out.setdefault((row["case"], row["megabytes"]), {})[row["variant"]] = row
    return out


def grads_rows(grads: dict) -> dict:
    """{case: {variant: (compile s, call ms)}} of grads.py's results that ran."""
    out: dict = {}
    for case, by_variant in grads.items():
        if not isinstance(by_variant, dict):
            continue
        for variant, r in by_variant.items():
            if isinstance(r, dict) and r.get("compile_s") is not None and r.get("call_ms"):
                out.setdefault(case, {})[variant] = (r["compile_s"], r["call_ms"])
    return out


def _part(results: dict, name: str):
    part = results.get(name) or {}
    return part.get("results")


# ------------------------------------------------------------------ the markdown table

COLUMNS = ("shlo2jax (translated)", '`lowering="direct"`', "jax.export", "Enzyme-JAX",
           "jax.grad of the source")
_MEMORY_VARIANTS = {"translated": 0, "direct": 1, "export": 2}
_GRAD_VARIANTS = {"translated": 0, "direct": 1, "enzyme": 3, "source": 4}


def table(results: dict) -> str:
    lines = ["| measure | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]

    def row(label, cells):
        lines.append(f"| {label} | " + " | ".join(c if c else "-" for c in cells) + " |")

    speed = _part(results, "speed")
    if speed:
        rows = speed_rows(speed)
        for entry, ours, theirs in rows["first"]:
            row(f"time to first result, {entry} (s)",
                [f"{ours:.2f} ({ours / theirs:.2f}x)", "", f"{theirs:.2f}", "", ""])
        for entry, ours, theirs in rows["steady"]:
            row(f"steady call, {entry} (ms)", [f"{ours:.3f}", "", f"{theirs:.3f}", "", ""])
        for program, ops, ours, theirs, cpu in rows["large"]:
            per_cpu = f"; {ops / cpu:,.0f} per CPU s" if cpu else ""
            row(f"load + trace + lower, {program} ({ops:,} ops): s (ops/s)",
                [f"{ours:.2f} ({ops / ours:,.0f}{per_cpu})", "",
                 f"{theirs:.2f}" if theirs else "", "", ""])
    memory = _part(results, "memory")
    if memory:
        for (case, megabytes), by_variant in memory_rows(memory).items():
            what = "baked in" if case == "baked" else "as arguments"
            for key, label in (("peak", "peak MB"), ("load_s", "load s")):
                cells = [""] * len(COLUMNS)
                for variant, r in by_variant.items():
                    if variant in _MEMORY_VARIANTS:
                        cells[_MEMORY_VARIANTS[variant]] = (f"{r[key]:.0f}" if key == "peak"
                                                            else f"{r[key]:.2f}")
                row(f"{megabytes:,} MB of weights {what}: load + first call {label}"
                    if key == "peak" else f"{megabytes:,} MB of weights {what}: {label}", cells)
    grads = _part(results, "grads")
    if grads:
        for case, by_variant in grads_rows(grads).items():
            for i, label in ((0, "compile s"), (1, "call ms")):
                cells = [""] * len(COLUMNS)
                for variant, values in by_variant.items():
                    if variant in _GRAD_VARIANTS:
                        cells[_GRAD_VARIANTS[variant]] = f"{values[i]:.3g}"
                row(f"gradient, {case}: {label}", cells)
    for name in PARTS:
        part = results.get(name) or {}
        if "not_run" in part:
            lines.append(f"\n{name}: not run ({part['not_run']})")
    return "\n".join(lines)


# ------------------------------------------------------------------ the README bullet

def _range(values, spec) -> str:
    lo, hi = min(values), max(values)
    return format(lo, spec) if format(lo, spec) == format(hi, spec) else \
        f"{format(lo, spec)}-{format(hi, spec)}"


def _size(megabytes: int) -> str:
    return f"{megabytes // 1024} GB" if megabytes % 1024 == 0 else f"{megabytes} MB"


def readme_block(results: dict) -> str:
    """README.md's performance bullet, markers included, from the results alone."""
    meta = results.get("machine", {})
    dates = sorted({(results.get(p) or {}).get("date", "")[:10] for p in PARTS} - {""})
    facts = []
    speed = _part(results, "speed")
    if speed:
        rows = speed_rows(speed)
        if rows["first"]:
            facts.append("time to first result on a small program "
                         + _range([o / t for _, o, t in rows["first"]], ".2f")
                         + " times `jax.export`'s")
        real = [(ops, ops / seconds) for program, ops, seconds, _, _ in rows["large"]
                if program in REAL_PROGRAMS]
        thousands = lambda ops: f"{ops / 1000:.0f}k"  # noqa: E731
        if real:
            facts.append(f"load + trace + lower at {_range([r for _, r in real], ',.0f')} ops/s "
                         f"on {len(real)} real "
                         f"{_range([o / 1000 for o, _ in real], '.0f')}k-op programs")
        for program, ops, seconds, _, _ in rows["large"]:
            if program not in REAL_PROGRAMS:
                facts.append(f"{ops / seconds:,.0f} on a generated {thousands(ops)}-op one"
                             if real else f"load + trace + lower of a generated "
                                          f"{thousands(ops)}-op program at {ops / seconds:,.0f} ops/s")
    memory = _part(results, "memory")
    if memory:
        cases = []
        for (case, megabytes), by in memory_rows(memory).items():
            ours = [by[v]["peak"] for v in ("translated", "direct") if v in by]
            if ours and "export" in by:
                what = "baked in" if case == "baked" else "passed as arguments"
                cases.append(f"{_range(ours, ',.0f')} MB with {_size(megabytes)} of weights "
                             f"{what} (`jax.export`: {by['export']['peak']:,.0f})")
        if cases:
            facts.append("peak memory of load + first call, both lowerings: " + ", ".join(cases))
    grads = _part(results, "grads")
    if grads:
        for case, by in grads_rows(grads).items():
            if "translated" in by:
                theirs = ", Enzyme-JAX {:.3g} s / {:.3g} ms".format(*by["enzyme"]) \
                    if "enzyme" in by else ""
                facts.append("`{}` gradient (grads.py), compile / call: {:.3g} s / {:.3g} ms"
                             .format(case, *by["translated"]) + theirs)
    where = (f"{', '.join(dates)}, a shared {meta.get('cpus', '?')}-CPU machine, "
             f"{meta.get('backend', 'cpu').upper()}, jax {meta.get('jax', '?')}")
    text = (f"**Performance** (`python benchmarks/report.py`, {where}): "
            + "; ".join(facts) + ". [More](docs/performance.md).")
    bullet = textwrap.fill(text, width=99, initial_indent="- ", subsequent_indent="  ",
                           break_long_words=False, break_on_hyphens=False)
    block = f"{BEGIN}\n{bullet}\n{END}"
    if len(block) > README_BLOCK_LIMIT:
        raise ValueError(f"the README block would take {len(block)} characters, more than "
                         f"{README_BLOCK_LIMIT}: shorten what readme_block writes")
    return block


def replace_block(readme: str, block: str) -> str:
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"README.md has no {BEGIN} ... {END} block")
    return readme[:start] + block + readme[end + len(END):]


def stale(readme: str, results: dict):
    """What is wrong with README.md's block (None where it is what the results give)."""
    try:
        want = replace_block(readme, readme_block(results))
    except ValueError as e:
        return str(e)
    if want != readme:
        return ("README.md's performance block is not what benchmarks/results/latest.json "
                "gives: run `python benchmarks/report.py --readme`")
    return None


# ------------------------------------------------------------------ main

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--full", action="store_true", help="each benchmark's own defaults")
    parser.add_argument("--size-mb", type=int, default=1024, help="memory: baked weights, MB")
    parser.add_argument("--args-mb", type=int, help="memory: weights as arguments (3x)")
    parser.add_argument("--grads-python", default=sys.executable,
                        help="the Python that runs grads.py (Enzyme-JAX's environment)")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per benchmark")
    parser.add_argument("--results", default=str(RESULTS))
    parser.add_argument("--readme", action="store_true", help="rewrite README.md's block")
    parser.add_argument("--check", action="store_true", help="fail where the block is stale")
    opts = parser.parse_args(argv)
    path = pathlib.Path(opts.results)
    results = json.loads(path.read_text()) if path.exists() else {}
    if opts.readme or opts.check:
        readme = README.read_text()
        if opts.check:
            problem = stale(readme, results)
            print(problem or "README.md's performance block is current")
            return 1 if problem else 0
        README.write_text(replace_block(readme, readme_block(results)))
        print(f"README.md's performance block written from {path}")
        return 0
    results["machine"] = machine()
    for part in opts.parts.split(","):
        if part not in PARTS:
            parser.error(f"unknown part {part!r}; the parts are {', '.join(PARTS)}")
        results[part] = run_part(part, opts)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=1) + "\n")  # after each part: kept if cut
    print()
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
