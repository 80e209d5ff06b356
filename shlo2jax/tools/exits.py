"""How the command line ends: one line `shlo2jax: error: <what>` on stderr and an exit code
per class of error; the traceback only with `--debug` (or `SHLO2JAX_DEBUG=1`); a closed pipe
(`shlo2jax info m.mlir | head -2`) ends quietly.

| code | meaning |
|---|---|
| 0 | success (`compare`: at least two backends ran and every pair agrees) |
| 1 | the input cannot be used: a missing, empty or malformed file, unsupported ops, inputs that do not fit the signature, a call that fails |
| 2 | usage: an unknown or invalid option or value, an unknown function or backend |
| 3 | `compare`: backends disagree, or a backend failed with an error |
| 4 | `compare`: fewer than two backends produced results (nothing was compared) |
| 5 | internal error: an exception that is not shlo2jax's (a bug; `--debug` shows where) |
| 130 | interrupted (Ctrl-C) |
| 141 | the reader of the output closed the pipe (as a process killed by SIGPIPE) |

`conformance`, `fuzz` and `mutate` keep their own documented status (1: the run found a
failure); their errors end in the same one line.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback

from shlo2jax.errors import Shlo2JaxError, UsageError

OK, INPUT, USAGE, DISAGREE, NOTHING_COMPARED, INTERNAL = 0, 1, 2, 3, 4, 5
INTERRUPTED, CLOSED_PIPE = 130, 141

EXIT_CODES = (
    (OK, "success (compare: at least two backends ran and every pair agrees)"),
    (INPUT, "the input cannot be used: a missing, empty or malformed file, unsupported\n"
            "       ops, inputs that do not fit, a failing call"),
    (USAGE, "usage: an invalid option or value, an unknown function or backend"),
    (DISAGREE, "compare: backends disagree, or a backend failed with an error"),
    (NOTHING_COMPARED, "compare: fewer than two backends produced results"),
    (INTERNAL, "internal error (a bug: --debug shows the traceback)"),
    (INTERRUPTED, "interrupted"),
    (CLOSED_PIPE, "the output's reader closed the pipe"),
)

# Where a call's arguments are checked against the function's signature: a TypeError raised
# there is the documented answer to arguments that do not fit (an input error, not a bug).
ARGUMENT_CHECKS = ("program.py", "names.py", "signatures.py",
                   os.path.join("executables", "exported.py"))

# At most this many lines of a multi-line message are joined into the one line.
_MAX_LINES = 8


class CommandFailed(Exception):
    """A command that ran to its end but whose verdict is a failure (`compare`: disagreement,
    nothing compared): its exit code and the one line saying why."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


class Parser(argparse.ArgumentParser):
    """argparse whose errors are a `UsageError` (one line, exit 2) instead of a usage block."""

    def error(self, message):
        raise UsageError(f"{message} (see {self.prog} --help)")


def is_argument_error(e: BaseException) -> bool:
    """A TypeError raised where a call's arguments are checked (see ARGUMENT_CHECKS)."""
    if not isinstance(e, TypeError):
        return False
    frames = traceback.extract_tb(e.__traceback__)
    return bool(frames) and frames[-1].filename.endswith(tuple(
        os.path.join("shlo2jax", f) for f in ARGUMENT_CHECKS))


def one_line(message: str) -> str:
    """A message of several lines (MLIR diagnostics, lists of unsupported ops) as one line:
    its lines joined by '; ', the first `_MAX_LINES` of them."""
    lines = [ln.strip() for ln in str(message).splitlines() if ln.strip()]
    if len(lines) > _MAX_LINES:
        lines = lines[:_MAX_LINES] + [f"... and {len(lines) - _MAX_LINES} more lines "
                                      "(--debug prints them all)"]
    joined = "; ".join(lines).replace(":; ", ": ")
    return joined or "(no message)"


def classify(e: BaseException) -> tuple:
    """(exit code, the one line) of an exception that ends a command."""
    if isinstance(e, CommandFailed):
        return e.code, one_line(str(e))
    if isinstance(e, UsageError):
        return USAGE, one_line(str(e))
    where = getattr(e, "shlo2jax_file", "")
    if isinstance(e, Shlo2JaxError) or is_argument_error(e):
        message = one_line(str(e))
        if where and where not in message:
            message = f"{where}: {message}"
        return INPUT, message
    if isinstance(e, OSError):  # a file named on the command line cannot be read or written
        name = f"{e.filename}: " if e.filename else ""
        return INPUT, f"{name}{e.strerror or e}"
    return INTERNAL, (f"internal error, {type(e).__name__}: {one_line(str(e))} (this is a bug "
                      "in shlo2jax; --debug or SHLO2JAX_DEBUG=1 prints the traceback)")


@contextlib.contextmanager
def about(path):
    """Errors raised inside name `path` (the file a command was given) where they do not."""
    try:
        yield
    except Exception as e:
        if path and not hasattr(e, "shlo2jax_file"):
            try:
                e.shlo2jax_file = str(path)
            except AttributeError:  # an exception type without a __dict__
                pass
        raise


def debug_requested(argv: list) -> tuple:
    """(whether the traceback is asked for, argv without `--debug`)."""
    debug = "--debug" in argv or os.environ.get("SHLO2JAX_DEBUG", "") not in ("", "0")
    return debug, [a for a in argv if a != "--debug"]


def guarded(command, argv: list, debug: bool) -> int:
    """`command(argv)`'s exit code; an exception ends it in one line on stderr (see the
    module docstring)."""
    try:
        code = command(argv)
        sys.stdout.flush()  # here, not at exit: a closed pipe is caught below
        return code
    except BrokenPipeError:
        _quiet_stdout()
        return CLOSED_PIPE
    except KeyboardInterrupt:
        _error("interrupted")
        return INTERRUPTED
    except SystemExit as e:  # --help, --version, a sub-tool's own argparse
        return e.code if isinstance(e.code, int) else (0 if e.code is None else USAGE)
    except Exception as e:  # noqa: BLE001 - every error ends in one line and a code
        if debug:
            traceback.print_exc()
        code, message = classify(e)
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            _quiet_stdout()
            return CLOSED_PIPE
        _error(message)
        return code


def _error(message: str) -> None:
    print(f"shlo2jax: error: {message}", file=sys.stderr, flush=True)


def _quiet_stdout() -> None:
    """The reader has gone: what is still buffered goes nowhere, so that the interpreter's
    flush at exit raises nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is not a file (a test's capture)
        pass
