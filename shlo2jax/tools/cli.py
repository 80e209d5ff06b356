"""The `shlo2jax` command line: `main(argv)` -> exit status.

The program commands (info, run, compare, export) are in `shlo2jax.tools.commands`; the
tools that parse their own options (conformance, fuzz, mutate) are handed the rest of the
line; every error ends in one line (`shlo2jax.tools.exits`).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys

import jax
import jaxlib

from shlo2jax.tools import exits
from shlo2jax.tools.commands import add_commands
from shlo2jax.tools.conformance import main as conformance_main
from shlo2jax.tools.fuzz import main as fuzz_main
from shlo2jax.tools.mutate import main as mutate_main

# The tools that parse their own options: `shlo2jax NAME ...` hands them the rest of the line.
TOOLS = {
    "conformance": (conformance_main, "run StableHLO conformance cases through the "
                                      "translation (exit 1 below the floor or on a new failure)"),
    "fuzz": (fuzz_main, "random well-typed programs: the translation against XLA and the "
                        "reference interpreter (exit 1 on a mismatch or crash)"),
    "mutate": (mutate_main, "load and call malformed mutants of the bundled modules (exit 1 on "
                            "a crash, an error not the library's, or a CLI answer not one line)"),
}


def version() -> str:
    try:
        mine = importlib.metadata.version("shlo2jax")
    except importlib.metadata.PackageNotFoundError:  # a checkout on sys.path, not installed
        mine = "(not installed)"
    return f"shlo2jax {mine} (jax {jax.__version__}, jaxlib {jaxlib.__version__})"


DESCRIPTION = """\
Run and inspect StableHLO programs as JAX functions. Commands: info, run, compare,
export, conformance, fuzz, mutate (each takes --help).

A program (FILE) is MLIR text (.mlir), MLIR bytecode or a VHLO artifact (.mlir.bc,
.bc), a serialized jax.export (.bin), or XLA's HLO (text, an HloModuleProto or .hlo.pb, an
--xla_dump_to folder: --module NAME picks one of its modules); its kind is read from its
bytes, not its name.
Errors end in one line `shlo2jax: error: ...` on stderr; --debug (anywhere on the line)
or SHLO2JAX_DEBUG=1 prints the traceback too."""


def parser() -> exits.Parser:
    epilog = "exit status:\n" + "\n".join(f"  {code:<4} {meaning}"
                                          for code, meaning in exits.EXIT_CODES)
    p = exits.Parser(prog="shlo2jax", description=DESCRIPTION, epilog=epilog,
                     formatter_class=_Formatter)
    p.add_argument("--version", action="version", version=version())
    p.add_argument("--debug", action="store_true",
                   help="on an error, print the traceback too (also SHLO2JAX_DEBUG=1)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND",
                           parser_class=exits.Parser)
    add_commands(sub)
    for name, (_, help_text) in TOOLS.items():
        sub.add_parser(name, help=help_text + f" (see shlo2jax {name} --help)", add_help=False)
    return p


class _Formatter(argparse.RawDescriptionHelpFormatter):
    pass


def main(argv=None) -> int:
    """The command line: the command's exit status (see `shlo2jax.tools.exits`)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    debug, argv = exits.debug_requested(argv)
    return exits.guarded(_dispatch, argv, debug)


def _dispatch(argv: list) -> int:
    if argv and argv[0] in TOOLS:
        return TOOLS[argv[0]][0](argv[1:])
    args = parser().parse_args(argv)
    return args.func(args)
