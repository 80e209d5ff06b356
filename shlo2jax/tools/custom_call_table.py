"""Prints the README's table of built-in custom-call targets, generated from the registry.

    python -m shlo2jax.tools.custom_call_table                      # the markdown table
    python -m shlo2jax.tools.custom_call_table --readme [README.md]  # rewrite its table in place

A row is one kernel: its `TargetInfo` (registry.TARGET_INFO, attached where the target is
registered or in ops/custom_calls/catalog.py) and the targets sharing it. Every built-in
target must be described; docs/gen_tables.py writes this table into
docs/generated/custom_calls.md and tests/test_docs.py checks that it is current.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import shlo2jax.ops  # noqa: F401  (registers every op family: the table is read from the registry)
from shlo2jax import registry

START = "<!-- custom-call-table:start -->"
END = "<!-- custom-call-table:end -->"
README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def builtin_targets() -> list:
    """The built-in custom-call targets in the registry (a user's own rule is not listed)."""
    return sorted(name for name, rule in registry.CUSTOM_CALL_RULES.items()
                  if registry.is_builtin(rule))


def _compress(names) -> str:
    """Names differing in one character share a cell entry (display only):
    `lapack_sgeev`, `lapack_dgeev` -> `lapack_{s,d}geev`."""
    remaining = sorted(set(names))
    groups = []
    while remaining:
        best = None
        for name in remaining:
            for i in range(len(name)):
                members = [n for n in remaining if len(n) == len(name)
                           and n[:i] == name[:i] and n[i + 1:] == name[i + 1:]]
                if len(members) > 1 and (best is None or len(members) > len(best[2])):
                    best = (name[:i], name[i + 1:], members)
        if best is None:
            groups += [f"`{n}`" for n in remaining]
            break
        prefix, suffix, members = best
        order = "sdcz"  # LAPACK's type prefixes in their usual order
        chars = sorted((m[len(prefix)] for m in members),
                       key=lambda ch: (order.find(ch) if ch in order else len(order), ch))
        chars = ",".join(chars)
        groups.append(f"`{prefix}{{{chars}}}{suffix}`")
        remaining = [n for n in remaining if n not in members]
    return ", ".join(sorted(groups, key=lambda g: g.strip("`").replace("{", "")))


def table() -> str:
    """The README's custom-call table: one row per kernel, built from the registry."""
    targets = builtin_targets()
    missing = [t for t in targets if t not in registry.TARGET_INFO]
    if missing:
        raise KeyError(f"built-in custom-call targets without a description: {missing}")
    rows: dict = {}
    for target in targets:
        rows.setdefault(registry.TARGET_INFO[target], []).append(target)
    lines = ["| Kernel | Targets | Forms | Emitted by jax | Dtypes | Tests |",
             "|---|---|---|---|---|---|"]
    for info, names in sorted(rows.items(), key=lambda kv: kv[0].kernel.lower()):
        tests = "<br>".join(f"`{t}`" for t in info.test)
        lines.append(f"| {info.kernel} | {_compress(names)} | {', '.join(info.forms)} | "
                     f"{info.jax} | {info.dtypes} | {tests} |")
    return "\n".join(lines) + "\n"


def replace_in(readme: str, generated: str) -> str:
    head, start, rest = readme.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise ValueError(f"README has no {START} ... {END} block")
    return f"{head}{START}\n{generated}{END}{tail}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shlo2jax.tools.custom_call_table",
        description="The README's table of built-in custom-call targets.")
    parser.add_argument("--readme", nargs="?", const=str(README), metavar="PATH",
                        help="rewrite the table between the markers of this README "
                             "(default: the checkout's README.md) instead of printing it")
    args = parser.parse_args(argv)
    if args.readme:
        path = pathlib.Path(args.readme)
        path.write_text(replace_in(path.read_text(), table()))
        return 0
    sys.stdout.write(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
