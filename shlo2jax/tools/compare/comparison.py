"""`compare`: one function, several backends, the same inputs, every pair's outputs compared."""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from typing import Callable, Optional, Sequence

import numpy as np

from shlo2jax.errors import BackendUnavailable, InputError, UsageError
from shlo2jax.executables.polymorphic import specialise
from shlo2jax.loader import load
from shlo2jax.options import LoadOptions
from shlo2jax.program import Program
from shlo2jax.tools.compare.backends import DEFAULT_BACKENDS, TranslatedBackend
from shlo2jax.tools.compare.specs import backend
from shlo2jax.tools.compare.gradients import GradientBackend, locate_backward, seeded_cotangents
from shlo2jax.tools.compare.locate import locate as locate_divergences
from shlo2jax.tools.compare.reduce import check_folder, reduce_disagreement
from shlo2jax.tools.compare.report import BackendRun, Comparison, PairResult
from shlo2jax.tools.inputs import seeded_inputs
from shlo2jax.tools.numerics import Errors, array_errors


def compare(source, backends: Optional[Sequence] = None, *, against=None,
            against_name: Optional[str] = None, grad: bool = False,
            function: Optional[str] = None, inputs: Optional[Sequence] = None, seed: int = 0,
            rtol: float = 1e-4, atol: float = 1e-6, max_ulp: Optional[int] = None,
            locate: bool = False, locate_limit: int = 3, locate_values="all",
            reduce=None, interpreter_timeout: float = 600.0,
            options: Optional[LoadOptions] = None,
            progress: Optional[Callable[[str], None]] = None, **option_values) -> Comparison:
    """Runs one function of a module on each backend with the same inputs and compares
    every pair of backends' outputs. `source`: anything `shlo2jax.load` accepts, or a
    loaded Program. See the package docstring for the backends and the error figures.
    `backends` defaults to cpu, interpreter, xla-direct and f64.

    `against`: another program of the same signature (anything `load` accepts, or a
    Program): both run on each backend (cpu by default; translated backends only) and each
    backend's two runs are compared; with `locate`, their ops are matched by location where
    both carry the same locations (an edited copy of one file), else by structure.
    `against_name`: what the other program is called in the report (default: its path, or
    the name it was loaded under).

    `grad`: what is compared is the gradient, with respect to every floating-point input, of
    the seeded loss `sum_i sum(out_i * ct_i)` (`ct_i` seeded cotangents), on translated
    backends (cpu and f64 by default); with `locate`, the first ops of the backward pass whose
    results' cotangents differ (shlo2jax.tools.compare.gradients).

    `locate_values`: which ops the probes record when locating ("all", or op names, indices
    or locations as `shlo2jax.probe` takes them); recording every op of a large model holds
    all its intermediate values in memory at once, twice.

    `reduce`: a folder: where the first disagreeing pair disagrees, the smallest standalone
    module found that still does, and its arguments, are written there (`reduce.py`;
    `result.reduced` says what was written).

    `interpreter_timeout`: the seconds a child process (the reference interpreter's, another
    Python's) may run. `progress`: called with a line of text as each backend's run and each
    recording for `locate` starts and ends (the command line's `Steps`)."""
    progress = progress or (lambda text: None)
    if reduce is not None:
        if grad:
            raise UsageError("reduce: reduces a disagreement of the outputs; not with grad")
        check_folder(reduce)
    program = source if isinstance(source, Program) else load(source, options, **option_values)
    fn = program[function] if function else program.entry
    if inputs is None:
        inputs, how = seeded_inputs(fn, seed), f"seeded (seed {seed})"
    else:
        inputs, how = [np.asarray(x) for x in inputs], "given"
    fn.check_arguments(inputs)
    other = None
    if against is not None:
        other = against if isinstance(against, Program) else load(against, program.options)
        against_name = against_name or _name(against, other)
        other = _counterpart(fn, other, against_name)
    fn, inputs = _module_function(fn, inputs)
    program = fn.program
    if other is not None:
        other = _module_function(other, inputs)[0].program
    if grad and not backends and other is None:
        backends = ("cpu", "f64")  # (the backends that differentiate: translated ones)
    chosen, compared = _backends(backends, other, interpreter_timeout)
    if grad:
        cotangents = seeded_cotangents(fn, seed)
        chosen = [GradientBackend(b, cotangents) for b in chosen]
    runs = {b.name: _run(b, program, fn.name, inputs, progress) for b in chosen}
    result = Comparison(fn.name, how, {"rtol": rtol, "atol": atol, "max_ulp": max_ulp}, runs,
                        _pairs(runs, compared, rtol, atol, max_ulp),
                        against=against_name or "", gradients=grad)
    match = "auto" if other is not None else "location"
    by_name = {b.name: b for b in chosen}
    if locate and grad:
        locate_backward(result, program, fn.name, list(inputs), by_name, rtol, atol, max_ulp,
                        locate_limit, match, progress)
    elif locate:
        locate_divergences(result, program, fn.name, list(inputs), by_name, rtol, atol,
                           max_ulp, locate_limit, locate_values, match, progress)
    if reduce is not None and result.disagreeing():
        progress("reducing the first disagreement")
        result.reduced = reduce_disagreement(result, program, fn.name, list(inputs), by_name,
                                             reduce, other, compare=compare,
                                             progress=progress)
    return result


def _backends(specs, other, interpreter_timeout: float) -> tuple:
    """(the backends, the pairs of their names compared: None for every pair). Against
    another program, each backend (cpu by default) has a counterpart running that program,
    and only the two are compared."""
    default = ("cpu",) if other is not None else DEFAULT_BACKENDS
    chosen = [backend(b, interpreter_timeout) for b in (specs or default)]
    compared = None
    if other is not None:
        counterparts = [_against(b, other) for b in chosen]
        compared = [(b.name, c.name) for b, c in zip(chosen, counterparts)]
        chosen += counterparts
    names = [b.name for b in chosen]
    if len(set(names)) != len(names):
        raise ValueError(f"backend names repeat: {names}")
    return chosen, compared


def _module_function(fn, inputs: list):
    """The function every backend runs and its arguments: a function that binds values (a
    PyTorch/XLA bundle's) as its module's own function, the bound values among its
    arguments; one with `?` dimensions refined to these inputs' shapes."""
    if fn.params or fn.constants or _drops_arguments(fn, inputs):
        inputs = [np.asarray(x) for x in fn.convention.module_arguments(inputs)]
        program = fn.program.refined(fn.program.mlir_module)
        fn = program[fn.module_name]
    if fn.is_polymorphic:
        fn = specialise(fn, inputs)
    return fn, inputs


def _drops_arguments(fn, inputs: list) -> bool:
    """Whether `fn` is a jax.export artifact's whose module leaves out arguments jax found
    unused (module_kept_var_idx): the backends that run the module's own text (f64, the
    interpreter, xla-direct) take its arguments, so every backend is given those. (Not with
    tokens or a platform index among them, which only the artifact's convention passes.)"""
    if fn.convention.record is None:
        return False
    kept = fn.convention.module_arguments(inputs)
    return len(kept) != len(inputs) and all(isinstance(x, np.ndarray) for x in kept)


def _avals(fn) -> tuple:
    return tuple((tuple(a.shape), str(a.dtype)) for a in fn.in_avals), \
        tuple((tuple(a.shape), str(a.dtype)) for a in fn.out_avals)


def _name(against, other: Program) -> str:
    """The other program's name: its path where it was given one, else its source's name."""
    if isinstance(against, os.PathLike) or isinstance(against, str) and "\n" not in against \
            and os.path.exists(against):
        return str(against)
    return other.source_name or "(text)"


def _counterpart(fn, other: Program, name: str):
    """The function of `other` compared with `fn`: its function of the same name, or its
    entry; refused unless it takes and returns the same types (names may differ)."""
    theirs = other[fn.name] if fn.name in other.functions else other.entry
    if _avals(theirs) != _avals(fn) or theirs.name != fn.name:
        raise InputError(f"cannot compare against {name}: the signatures differ: "
                         f"{fn.signature} vs {theirs.signature}")
    if fn.params or fn.constants or theirs.params or theirs.constants:
        raise InputError("compare against another program: a function that binds values (a "
                         "PyTorch/XLA bundle's weights) is not compared so; compare the "
                         "bundles' module files")
    return theirs


def _against(b, other: Program):
    """The backend `b` running the other program: a translated backend of it."""
    if type(b) is not TranslatedBackend or b.source is not None:
        raise UsageError(f"compare against another program runs both on the translated "
                         f"backends (cpu, gpu, tpu); {b.name} cannot run another program")
    return TranslatedBackend(b.platform, name=f"{b.name}:against", source=other)


def _run(b, program, function: str, inputs: list, progress: Callable) -> BackendRun:
    """The backend's run, its start and end told to `progress`; a backend run in a child
    with a time limit (the interpreter, another Python) shows its seconds against the limit
    while it runs, where `progress` draws (a `Steps`)."""
    progress(f"{b.name}: running")
    limit = getattr(b, "timeout", None)
    timed = getattr(progress, "timed", None)
    with timed(b.name, limit) if timed and limit else contextlib.nullcontext():
        run = _outcome(b, program, function, inputs)
    version = getattr(b, "jax_version", "")  # (another Python's)
    progress(f"{b.name}: {run.status}" + (f" in {run.seconds:.1f} s" if run.seconds else "")
             + (f" (jax {version})" if version else "")
             + (f": {run.reason}" if run.reason else ""))
    return run


def _outcome(b, program, function: str, inputs: list) -> BackendRun:
    start = time.perf_counter()
    try:
        outs = b.run(program, function, list(inputs))
        return BackendRun(b.name, "ok", time.perf_counter() - start, outputs=outs)
    except BackendUnavailable as e:
        return BackendRun(b.name, "skipped", reason=str(e))
    except Exception as e:  # a backend failing is a result to report, not a crash
        message = " | ".join(ln.strip() for ln in str(e).strip().splitlines()[:3])
        return BackendRun(b.name, "error", time.perf_counter() - start,
                          reason=f"{type(e).__name__}: {message}")


def _pairs(runs: dict, compared, rtol, atol, max_ulp) -> list:
    """The error figures of each pair of runs that produced results, per output: every pair,
    or those named in `compared`."""
    ran = [r for r in runs.values() if r.status == "ok"]
    which = itertools.combinations(ran, 2) if compared is None else \
        [(runs[a], runs[b]) for a, b in compared if runs[a] in ran and runs[b] in ran]
    pairs = []
    for ra, rb in which:
        if len(ra.outputs) != len(rb.outputs):
            note = f"{len(ra.outputs)} vs {len(rb.outputs)} outputs"
            pairs.append(PairResult(ra.name, rb.name, 0, Errors(0, 0, None, 1, 1, None, note)))
            continue
        for i, (x, y) in enumerate(zip(ra.outputs, rb.outputs)):
            pairs.append(PairResult(ra.name, rb.name, i, array_errors(x, y, rtol, atol, max_ulp)))
    return pairs
