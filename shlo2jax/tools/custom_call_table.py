"""Prints the README's table of built-in custom-call targets, generated from the registry.

    python -m shlo2jax.custom_call_table            # the markdown table
    python -m shlo2jax.custom_call_table --readme   # rewrite README.md's table in place

The rows come from `shlo2jax.ops.custom_calls_catalog` (every built-in target must
have an entry there); tests/test_legacy_custom_calls.py checks that README.md holds
exactly this table.
"""

from __future__ import annotations

import pathlib
import sys

START = "<!-- custom-call-table:start -->"
END = "<!-- custom-call-table:end -->"


def table() -> str:
    import shlo2jax.ops  # noqa: F401  (registers every family)
    from shlo2jax.ops.custom_calls_catalog import markdown_table
    return markdown_table()


def replace_in(readme: str, generated: str) -> str:
    head, start, rest = readme.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise ValueError(f"README has no {START} ... {END} block")
    return f"{head}{START}\n{generated}{END}{tail}"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--readme"]:
        path = pathlib.Path(__file__).resolve().parents[1] / "README.md"
        path.write_text(replace_in(path.read_text(), table()))
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    sys.stdout.write(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
