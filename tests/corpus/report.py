"""Runs every corpus entry through the checks of tests/test_corpus.py and prints a table:
producer x model x (load, forward max error, gradient max relative error, non-finite gradient
values, vmap, jit == eager), then totals and the failures with their messages.

    python tests/corpus/report.py [--markdown] [--readme README.md] [--producer NAME]

--readme rewrites the part of that file between `<!-- corpus-table:start -->` and
`<!-- corpus-table:end -->` with the markdown table.
"""

from __future__ import annotations

import argparse
import math
import os
import pathlib
import re
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import checks  # noqa: E402
import entry as corpus_entry  # noqa: E402

START, END = "<!-- corpus-table:start -->", "<!-- corpus-table:end -->"


def evaluate(e) -> dict:
    load, fn = checks.check_load(e)
    results = {"load": load}
    for check in checks.CHECKS[1:]:
        results[check] = (checks.run(e, check, fn) if fn is not None else load
                          if load.skipped else
                          checks.Result(False, math.inf, message="not loaded"))
    return results


def _number(x) -> str:
    if x is None:
        return "-"
    if not math.isfinite(x):
        return "inf"
    return "0" if x == 0 else f"{x:.1e}"


def _cell(check, r) -> str:
    if r.skipped:
        return "n/a"
    if check in ("load", "vmap", "jit_eager"):
        return "ok" if r.ok else "FAIL"
    if not r.ok and r.nonfinite:
        return "FAIL non-finite"
    if not r.ok and r.error is not None and math.isinf(r.error):
        return "FAIL raised"
    text = _number(r.error)
    return text if r.ok else f"FAIL {text}"


COLUMNS = [("producer", None), ("model", None), ("load", "load"), ("forward max err", "forward"),
           ("grad max rel err", "grad"), ("non-finite grads", None), ("vmap", "vmap"),
           ("jit = eager", "jit_eager")]


def rows(results: dict) -> list:
    out = []
    for e, res in results.items():
        grad = res["grad"]
        nonfinite = "n/a" if grad.skipped else str(grad.nonfinite)
        out.append([e.meta["producer"], e.folder.name, _cell("load", res["load"]),
                    _cell("forward", res["forward"]), _cell("grad", grad), nonfinite,
                    _cell("vmap", res["vmap"]), _cell("jit_eager", res["jit_eager"])])
    return out


def totals(results: dict) -> str:
    n = len(results)
    parts = []
    for check, label in (("load", "load"), ("forward", "forward"), ("grad", "grad"),
                         ("vmap", "vmap"), ("jit_eager", "jit = eager")):
        applicable = [r[check] for r in results.values() if not r[check].skipped]
        parts.append(f"{label} {sum(r.ok for r in applicable)}/{len(applicable)}")
    return f"{n} entries; passing: " + ", ".join(parts)


def failures(results: dict, known: dict) -> list:
    lines = []
    for e, res in results.items():
        for check, r in res.items():
            if not r.ok and not r.skipped:
                tag = " (known failure)" if (e.id, check) in known else " (UNLISTED)"
                message = " ".join(r.message.split())
                if len(message) > 200:
                    message = message[:197] + "..."
                lines.append(f"{e.id} {check}{tag}: {message}")
    return lines


def markdown(results: dict, known: dict) -> str:
    header = [name for name, _ in COLUMNS]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows(results):
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", f"**Totals:** {totals(results)}.", "",
              "Errors: forward, max |got - want| / max |want| over the outputs; grad, the worst "
              "argument's max |got - want| / max(max |want|, 1e-3 x the entry's largest); "
              "non-finite grads, values non-finite where the producer's are finite; FAIL raised: "
              "the check raised (message below); n/a: no floating argument or no vmap argument.",
              ""]
    fails = failures(results, known)
    if fails:
        lines.append("Failures (the lists in `tests/corpus/<producer>/known_failures.json` "
                     "only shrink):")
        lines.append("")
        lines += [f"- `{line.split(': ', 1)[0]}`: {line.split(': ', 1)[1]}" for line in fails]
    return "\n".join(lines)


def plain(results: dict, known: dict) -> str:
    table = [[name for name, _ in COLUMNS]] + rows(results)
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in table]
    lines += ["", totals(results), ""] + failures(results, known)
    return "\n".join(lines)


def rewrite_readme(path: pathlib.Path, table: str) -> None:
    text = path.read_text()
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{path} has no {START} ... {END} markers")
    path.write_text(pattern.sub(lambda _: f"{START}\n{table}\n{END}", text))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument("--readme", help="rewrite this file's corpus-table section")
    parser.add_argument("--producer", help="only this producer's entries")
    args = parser.parse_args(argv)
    entries = [e for e in corpus_entry.entries()
               if args.producer in (None, e.meta["producer"])]
    known = corpus_entry.known_failures()
    results = {}
    start = time.perf_counter()
    for e in entries:
        t0 = time.perf_counter()
        results[e] = evaluate(e)
        print(f"{e.id}: {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    print(f"checked {len(entries)} entries in {time.perf_counter() - start:.0f}s", file=sys.stderr)
    if args.readme:
        rewrite_readme(pathlib.Path(args.readme), markdown(results, known))
        print(f"rewrote the corpus table in {args.readme}", file=sys.stderr)
    print(markdown(results, known) if args.markdown else plain(results, known))
    return 0


if __name__ == "__main__":
    sys.exit(main())
