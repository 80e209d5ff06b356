"""The library's exceptions. Each names the op and its source location where one is known."""

from __future__ import annotations


class Shlo2JaxError(Exception):
    """Base class of every error raised by shlo2jax."""


class LoadError(Shlo2JaxError, ValueError):
    """The input is not a readable StableHLO program (carries the MLIR diagnostic)."""


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
