"""Running work that may kill its process (an abort in jaxlib or XLA, a hang) in a pool of
worker processes, so that the caller always gets an answer per item.

    for index, status, value in run_isolated("pkg.module:function", items, jobs=2, timeout=60):
        ...   # status: "ok" (value: what the function returned), "raised" (value: the
              # exception's traceback text), "crashed" (value: how the worker died and
              # the end of its log) or "timeout" (value: a `TimedOut`, the text with the
              # stage the work last reported by `report_stage`)

Each worker imports the function once and calls it on item after item (items and results
are pickled); a worker that dies or runs past `timeout` is replaced and the rest of the
work goes on. Results come in completion order.
"""

from __future__ import annotations

import collections
import importlib
import os
import subprocess
import sys
import tempfile
import time
import traceback
from multiprocessing.connection import Connection, wait
from typing import Iterable, Iterator, Optional

from shlo2jax.tools.progress import Progress
from shlo2jax.tools.reference import crash_reason, signal_name

_WORKER_CMD = "from shlo2jax.tools.isolated import _worker_main; _worker_main()"

# In a worker: the connection to the parent and the item being worked on, for report_stage.
_reporting: Optional[tuple] = None


class TimedOut(str):
    """A timeout's text; `stage`: what the work last reported doing (`report_stage`), or None.
    It tells a hang of the tool from work that merely runs long (a program that never ends)."""
    stage: Optional[str] = None


def report_stage(stage: str) -> None:
    """Tells the parent what the work on the current item is doing now; a no-op outside a
    worker. A timeout's value carries the last stage reported."""
    if _reporting is not None:
        conn, index = _reporting
        conn.send(("stage", index, stage))


def worker_connections():
    """In a worker process: (conn_in, conn_out) on the stdin/stdout pipes its parent made.
    Afterwards stdin reads /dev/null and what the work prints goes to stderr (the log), not
    into the result pipe."""
    conn_in = Connection(os.dup(0), writable=False)
    conn_out = Connection(os.dup(1), readable=False)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    return conn_in, conn_out


def fresh_log() -> None:
    """Empties the worker's log (its stderr), so that a crash message belongs to the next item."""
    try:
        os.ftruncate(2, 0)
        os.lseek(2, 0, os.SEEK_SET)
    except OSError:
        pass


class WorkerProcess:
    """The parent's side of one worker: the child runs `argv` with pickled-frame connections
    on its stdin/stdout and its stderr in a temporary log file."""

    def __init__(self, argv: list, env: dict, log_prefix: str):
        self.log = tempfile.TemporaryFile(prefix=log_prefix)
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, env=env)
        self.send_conn = Connection(os.dup(self.proc.stdin.fileno()), readable=False)
        self.recv_conn = Connection(os.dup(self.proc.stdout.fileno()), writable=False)
        self.proc.stdin.close()
        self.proc.stdout.close()
        self.ready = False
        self.started = time.time()
        self.deadline = 0.0
        self.done = 0

    def exit_description(self) -> str:
        """How the dead worker ended: the signal's name or its exit status."""
        self.proc.wait()
        code = self.proc.returncode
        return signal_name(code) if code is not None and code < 0 else f"exit status {code}"

    def log_tail(self) -> str:
        try:
            self.log.seek(0)
            return crash_reason(self.log.read()[-20000:].decode("utf-8", "replace"))
        except (OSError, ValueError):
            return ""

    def close(self, kill: bool = False):
        """Ends the worker: killed, or asked to stop (it returns at the next read)."""
        if kill:
            try:
                self.proc.kill()
            except OSError:
                pass
        else:
            try:
                self.send_conn.send(None)
            except OSError:
                pass
        for c in (self.send_conn, self.recv_conn):
            try:
                c.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def requests(conn_in):
    """A worker's requests, each with a fresh log, until the parent closes the pipe or
    sends None."""
    while True:
        try:
            msg = conn_in.recv()
        except EOFError:
            return
        if msg is None:
            return
        fresh_log()
        yield msg


def _worker_main() -> None:
    global _reporting
    conn_in, conn_out = worker_connections()
    module, _, name = sys.argv[1].partition(":")
    function = getattr(importlib.import_module(module), name)
    conn_out.send(("ready",))
    for index, item in requests(conn_in):
        _reporting = (conn_out, index)
        try:
            conn_out.send((index, "ok", function(item)))
        except Exception:
            conn_out.send((index, "raised", traceback.format_exc()))


class _Worker(WorkerProcess):
    def __init__(self, target: str, env: dict):
        super().__init__([sys.executable, "-c", _WORKER_CMD, target], env,
                         "shlo2jax-isolated-")
        self.index: Optional[int] = None
        self.stage: Optional[str] = None

    def send(self, index: int, item, timeout: float):
        self.index, self.deadline, self.stage = index, time.time() + timeout, None
        self.send_conn.send((index, item))

    def death(self) -> str:
        how = self.exit_description()  # (waits for the end, so the log is complete)
        tail = self.log_tail()
        return f"the worker died ({how})" + (f": {tail}" if tail else "")


def run_isolated(target: str, items: Iterable, jobs: int = 2, timeout: float = 120.0,
                 env: Optional[dict] = None, items_per_worker: int = 500,
                 progress: Optional[str] = None) -> Iterator[tuple]:
    """Calls `target` ("module:function") on every item in worker processes; yields
    (index, status, value) per item as they finish (see the module docstring). `progress`:
    the label of a progress bar over the items (`shlo2jax.tools.progress`), None for none."""
    items = list(items)
    with Progress(len(items), progress or "", quiet=progress is None) as bar:
        for result in _run_isolated(target, items, jobs, timeout, env, items_per_worker):
            bar.advance()
            yield result


def _run_isolated(target: str, items: list, jobs: int, timeout: float, env: Optional[dict],
                  items_per_worker: int) -> Iterator[tuple]:
    env = dict(os.environ if env is None else env)
    env.setdefault("JAX_PLATFORMS", "cpu")
    pending = collections.deque(enumerate(items))
    workers: list[_Worker] = []
    startup_limit = max(300.0, timeout)
    failed_starts = 0
    try:
        while pending or any(w.index is not None for w in workers):
            busy = sum(1 for w in workers if w.index is not None)
            while len(workers) < min(max(1, jobs), len(pending) + busy):
                workers.append(_Worker(target, env))
            for w in workers:
                if w.ready and w.index is None and pending:
                    w.send(*pending.popleft(), timeout)
            deadlines = [w.deadline if w.index is not None else w.started + startup_limit
                         for w in workers]
            ready = wait([w.recv_conn for w in workers],
                         timeout=max(0.0, min(deadlines) - time.time()))
            for w in list(workers):
                if w.recv_conn in ready:
                    try:
                        msg = w.recv_conn.recv()
                    except (EOFError, OSError):
                        msg = None
                    if msg is None:
                        why = w.death()
                        if w.index is not None:
                            yield w.index, "crashed", why
                        elif not w.ready:
                            failed_starts += 1
                            if failed_starts >= 3:
                                raise RuntimeError(f"workers fail to start: {why}")
                        w.close(kill=True)
                        workers.remove(w)
                        continue
                    if msg[0] == "ready":
                        w.ready, failed_starts = True, 0
                        continue
                    if msg[0] == "stage":
                        w.stage = msg[2] if msg[1] == w.index else w.stage
                        continue
                    index, status, value = msg
                    w.index = None
                    w.done += 1
                    yield index, status, value
                    if w.done >= items_per_worker:  # jax's caches grow with every jit
                        w.close()
                        workers.remove(w)
                elif w.index is not None and time.time() >= w.deadline:
                    timed_out = TimedOut(f"ran past {timeout:g} s (worker killed)" +
                                         (f" in its stage '{w.stage}'" if w.stage else ""))
                    timed_out.stage = w.stage
                    yield w.index, "timeout", timed_out
                    w.close(kill=True)
                    workers.remove(w)
                elif w.index is None and not w.ready and time.time() >= w.started + startup_limit:
                    failed_starts += 1
                    w.close(kill=True)
                    workers.remove(w)
                    if failed_starts >= 3:
                        raise RuntimeError("workers do not start")
    finally:
        for w in workers:
            w.close(kill=w.index is not None)
