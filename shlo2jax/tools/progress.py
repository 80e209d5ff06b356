"""Progress of long work (conformance cases, fuzzed programs, mutants), drawn with tqdm on
stderr where stderr is a terminal: never when it is piped or redirected (a log, CI), nor
with the command's `-q`. The lines a command prints go to stdout above the bar
(`Progress.line`), so that a bar never breaks a line. Work of a few long steps (compare's
backends) says each step's start and end on a line of its own instead (`Steps`)."""

from __future__ import annotations

import contextlib
import sys
import threading
import time

from tqdm import tqdm

# Seconds between redraws (tqdm's default).
MIN_INTERVAL = 0.1


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


class Progress:
    """A count of `total` things done, shown as a bar under `label` (see the module
    docstring); a context manager."""

    def __init__(self, total: int, label: str, quiet: bool = False):
        shown = not quiet and _is_terminal(sys.stderr)
        self._bar = tqdm(total=total, desc=label, file=sys.stderr, disable=not shown,
                         leave=False, dynamic_ncols=True, unit="",
                         mininterval=MIN_INTERVAL)
        self.shown = shown

    def advance(self, n: int = 1) -> None:
        self._bar.update(n)

    def line(self, text: str) -> None:
        """`text` printed on stdout, the bar drawn again below it."""
        if self.shown:
            self._bar.write(text, file=sys.stdout)
        else:
            print(text, flush=True)

    def close(self) -> None:
        self._bar.close()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Steps:
    """Lines `label: text` on stderr as the steps of long work start and end, shown where a
    bar would be (see the module docstring); called with the text."""

    def __init__(self, label: str, quiet: bool = False):
        self.label = label
        self.shown = not quiet and _is_terminal(sys.stderr)

    def __call__(self, text: str) -> None:
        if self.shown:
            print(f"{self.label}: {text}", file=sys.stderr, flush=True)

    def timed(self, label: str, limit: float):
        """A context manager: while it lasts, a bar of the seconds spent against `limit`
        (shown where the lines are), redrawn from a thread."""
        return _Elapsed(f"{self.label}: {label}", limit) if self.shown \
            else contextlib.nullcontext()


class _Elapsed:
    def __init__(self, label: str, limit: float):
        self._bar = tqdm(total=round(limit), desc=label, file=sys.stderr, leave=False,
                         dynamic_ncols=True, unit="s", mininterval=MIN_INTERVAL,
                         bar_format="{desc}: {bar} {n:.0f}/{total:.0f} s")
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)

    def _tick(self) -> None:
        start = time.monotonic()
        while not self._done.wait(0.5):
            self._bar.n = min(self._bar.total, time.monotonic() - start)
            self._bar.refresh()

    def __enter__(self) -> "_Elapsed":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
        self._bar.close()
