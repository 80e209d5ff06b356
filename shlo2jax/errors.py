"""Every exception shlo2jax raises, all under `Shlo2JaxError`.

Errors that reach the user name the op and its source location where one is known. The
`UnlocatedError`s say what is wrong but not where: helpers raise them without knowing which
op they serve, and the translation loop reports one raised while an op is translated as a
`TranslationError` of that op.
"""

from __future__ import annotations


class Shlo2JaxError(Exception):
    """Base class of every error raised by shlo2jax."""


class LoadError(Shlo2JaxError, ValueError):
    """The input is not a readable StableHLO program (carries the MLIR diagnostic)."""


class MissingFileError(LoadError, FileNotFoundError):
    """A path names no file (the message gives the closest names in its folder)."""


class ElidedDataError(LoadError):
    """A `dense_resource<__elided__>` constant has no data and no placeholder was asked for."""


class UnsupportedError(Shlo2JaxError, NotImplementedError):
    """Ops or types that have no translation yet, all of them, found at load time."""

    def __init__(self, problems):
        # problems: list of (op name, location, what is unsupported)
        self.problems = list(problems)
        lines = [f"{len(self.problems)} unsupported construct(s) in the program:"]
        lines += [f"  {name} at {loc}: {what}" for name, loc, what in self.problems]
        super().__init__("\n".join(lines))


class TranslationError(Shlo2JaxError):
    """An op's translation failed or produced a value that contradicts its declared type."""

    def __init__(self, op_name: str, location: str, message: str):
        self.op_name, self.location, self.message = op_name, location, message
        super().__init__(f"{op_name} at {location}: {message}")


class ShapeError(Shlo2JaxError, ValueError):
    """Argument shapes (or dimension-size values) contradict the program's shape constraints."""


class ShapeAssertionError(ShapeError):
    """A `shape_assertion` (argument shapes vs. a polymorphic shape specification) failed."""


class HostIOError(Shlo2JaxError):
    """A host transfer could not happen (no feed left, no context, a wrongly typed value)."""


class InterpreterError(Shlo2JaxError):
    """The reference interpreter failed to run a module (timeout, error, bad module)."""


class InterpreterUnsupported(InterpreterError):
    """The reference interpreter aborted: it lacks an op or type the module uses."""


class OtherPythonError(Shlo2JaxError):
    """A program run under another Python's jax (compare's `python=` backend) failed: the
    child crashed, ran past its time, or that jax refused the module."""


class InputError(Shlo2JaxError, ValueError):
    """Values cannot be made or used as asked: inputs that do not fit a function's signature
    (unknown or missing arguments, shapes, dtypes), a dimension size not given, a signature
    that cannot be exported (the command line exits with 1)."""


class UsageError(Shlo2JaxError, ValueError):
    """A command-line option or argument is wrong (an unknown function or backend, a value
    out of range, inputs that do not fit the signature): the command line exits with 2."""


class BackendUnavailable(Shlo2JaxError):
    """A comparison backend cannot run here or cannot run this module (the reason says which)."""


# ---------------------------------------------------------------- what, not where

class UnlocatedError(Shlo2JaxError):
    """Says what is wrong but not which op: reported against the op being translated."""


class Unsupported(UnlocatedError):
    """Raised by a rule's `prepare`: this op instance cannot be translated (the message says
    why). The decoder collects these and reports them all at load time."""


class UnsupportedTypeError(UnlocatedError):
    """A type this library cannot represent; the message is the MLIR spelling."""


class ShardingError(UnlocatedError, ValueError):
    """A sharding that cannot be parsed or expressed."""


class SpmdUnsupported(UnlocatedError, NotImplementedError):
    """A grid of processes cannot run here (too few devices, differing signatures,
    device-to-device send/recv); the message says why."""
