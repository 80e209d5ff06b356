"""Load + lowering of programs with islands: `lowering="direct"` beside the translation (issue 32).

    python benchmarks/islands.py [--runs 7] [--compile] [entry ...]

For each corpus entry (default: the programs below), in one process, after one warm-up run of
each: `shlo2jax.load(artifact, lowering=...)` then `jax.jit(fn).lower(*args)` (and, with
`--compile`, `.compile()`), for the direct lowering and the translation in turn, `--runs` times,
interleaved (direct, translated, translated, direct, ...) so that a busy machine slows both
alike. Prints the medians in seconds (wall; and this process's CPU time, which a busy machine
disturbs less, without the HLO reader's child process), and for the direct lowering its islands
(sites, distinct functions) and kernel calls.

  hlo/transformer_scan_after_opt  XLA's optimised dump of a transformer (fusions, bitcasts:
                                  mostly islands before the fusions dissolved)
  hlo/xla_mlp_after_opt           the same of an MLP
  tensorflow/tf_special           one @mhlo.erf island
  torch/hf_mixtral                two composites
  jax/linalg_cuda                 jax's CUDA kernels, islands when lowered for CPU
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGRAMS = ["hlo/transformer_scan_after_opt", "hlo/xla_mlp_after_opt", "tensorflow/tf_special",
            "torch/hf_mixtral", "jax/linalg_cuda"]
LOWERINGS = ["direct", "translate"]


def run(entry, lowering: str, compile_too: bool) -> tuple:
    """(load s, lower s, compile s or 0, load + lower CPU s, the function) of one load and
    lowering (CPU: this process's, without the HLO reader's child process, the same for both)."""
    import jax
    import shlo2jax
    cpu, start = time.process_time(), time.perf_counter()
    program = shlo2jax.load(str(entry.artifact_path), lowering=lowering)
    fn = program[entry.meta.get("function", "main")]
    loaded = time.perf_counter()
    lowered = jax.jit(fn).lower(*entry.args)
    done, cpu = time.perf_counter(), time.process_time() - cpu
    compiled = 0.0
    if compile_too:
        lowered.compile()
        compiled = time.perf_counter() - done
    return loaded - start, done - loaded, compiled, cpu, fn


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("entries", nargs="*", default=PROGRAMS)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--compile", action="store_true", help="time .compile() too")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests"))
    from corpus import entry as corpus_entry
    entries = {e.id: e for e in corpus_entry.entries()}
    times = {(name, lowering): [] for name in args.entries for lowering in LOWERINGS}
    islands = {}
    for name in args.entries:  # warm-up: jax's and shlo2jax's one-time costs
        for lowering in LOWERINGS:
            fn = run(entries[name], lowering, args.compile)[4]
            if lowering == "direct":
                slots = fn.program.direct_scan.island_outline
                kernels = fn.program.direct_scan.kernel_outline
                islands[name] = (fn.lowering, len(fn.islands),
                                 len(set(slots.slots)) if slots else 0,
                                 len(kernels.records) if kernels else 0)
    for i in range(args.runs):
        for name in args.entries:
            for lowering in (LOWERINGS if i % 2 == 0 else LOWERINGS[::-1]):
                times[name, lowering].append(run(entries[name], lowering, args.compile)[:4])
    head = "| program | direct: islands (distinct), kernels | direct load + lower s | " \
           "translated load + lower s | direct / translated | CPU s direct / translated |"
    if args.compile:
        head += " compile s direct / translated |"
    print(f"medians of {args.runs} interleaved runs\n")
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for name in args.entries:
        med = {lowering: [statistics.median(t[k] for t in times[name, lowering])
                          for k in range(4)] for lowering in LOWERINGS}
        total = {lowering: statistics.median(t[0] + t[1] for t in times[name, lowering])
                 for lowering in LOWERINGS}
        how, sites, distinct, kernels = islands[name]
        described = f"{sites} ({distinct}), {kernels}" if how == "direct" else f"({how})"
        row = (f"| {name} | {described} | {total['direct']:.3f} ({med['direct'][0]:.3f} + "
               f"{med['direct'][1]:.3f}) | {total['translate']:.3f} ({med['translate'][0]:.3f}"
               f" + {med['translate'][1]:.3f}) | {total['direct'] / total['translate']:.2f} | "
               f"{med['direct'][3]:.3f} / {med['translate'][3]:.3f} |")
        if args.compile:
            row += f" {med['direct'][2]:.3f} / {med['translate'][2]:.3f} |"
        print(row)


if __name__ == "__main__":
    main()
