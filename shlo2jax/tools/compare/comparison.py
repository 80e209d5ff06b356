"""`compare`: one function, several backends, the same inputs, every pair's outputs compared."""

from __future__ import annotations

import itertools
import time
from typing import Optional, Sequence

import numpy as np

from shlo2jax.errors import BackendUnavailable
from shlo2jax.executables.polymorphic import specialise
from shlo2jax.loader import load
from shlo2jax.options import LoadOptions
from shlo2jax.program import Program
from shlo2jax.tools.compare.backends import DEFAULT_BACKENDS, backend
from shlo2jax.tools.compare.locate import locate as locate_divergences
from shlo2jax.tools.compare.report import BackendRun, Comparison, PairResult
from shlo2jax.tools.inputs import seeded_inputs
from shlo2jax.tools.numerics import Errors, array_errors


def compare(source, backends: Sequence = DEFAULT_BACKENDS, *, function: Optional[str] = None,
            inputs: Optional[Sequence] = None, seed: int = 0, rtol: float = 1e-4,
            atol: float = 1e-6, max_ulp: Optional[int] = None, locate: bool = False,
            locate_limit: int = 3, locate_values="all", interpreter_timeout: float = 600.0,
            options: Optional[LoadOptions] = None, **option_values) -> Comparison:
    """Runs one function of a module on each backend with the same inputs and compares
    every pair of backends' outputs. `source`: anything `shlo2jax.load` accepts, or a
    loaded Program. See the module docstring for the backends and the error figures.

    `locate_values`: which ops the probes record when locating ("all", or op names, indices
    or locations as `shlo2jax.probe` takes them); recording every op of a large model holds
    all its intermediate values in memory at once, twice."""
    program = source if isinstance(source, Program) else load(source, options, **option_values)
    fn = program[function] if function else program.entry
    if inputs is None:
        inputs, how = seeded_inputs(fn, seed), f"seeded (seed {seed})"
    else:
        inputs, how = [np.asarray(x) for x in inputs], "given"
    fn.check_arguments(inputs)
    if fn.params or fn.constants:  # (values the source binds: a PyTorch/XLA bundle's) every
        # backend runs the module's own function, with the bound values among its arguments
        inputs = [np.asarray(x) for x in fn.convention.module_arguments(inputs)]
        name, program = fn.module_name, program.refined(program.mlir_module)
        fn = program[name]
    if fn.is_polymorphic:  # every backend runs the module refined to these inputs' shapes
        fn = specialise(fn, inputs)
        program = fn.program
    chosen = [backend(b, interpreter_timeout) for b in backends]
    names = [b.name for b in chosen]
    if len(set(names)) != len(names):
        raise ValueError(f"backend names repeat: {names}")
    runs = {}
    for b in chosen:
        start = time.perf_counter()
        try:
            outs = b.run(program, fn.name, list(inputs))
            runs[b.name] = BackendRun(b.name, "ok", time.perf_counter() - start, outputs=outs)
        except BackendUnavailable as e:
            runs[b.name] = BackendRun(b.name, "skipped", reason=str(e))
        except Exception as e:  # a backend failing is a result to report, not a crash
            message = " | ".join(ln.strip() for ln in str(e).strip().splitlines()[:3])
            runs[b.name] = BackendRun(b.name, "error", time.perf_counter() - start,
                                      reason=f"{type(e).__name__}: {message}")
    tolerances = {"rtol": rtol, "atol": atol, "max_ulp": max_ulp}
    pairs = []
    ran = [r for r in runs.values() if r.status == "ok"]
    for ra, rb in itertools.combinations(ran, 2):
        if len(ra.outputs) != len(rb.outputs):
            note = f"{len(ra.outputs)} vs {len(rb.outputs)} outputs"
            pairs.append(PairResult(ra.name, rb.name, 0, Errors(0, 0, None, 1, 1, None, note)))
            continue
        for i, (x, y) in enumerate(zip(ra.outputs, rb.outputs)):
            pairs.append(PairResult(ra.name, rb.name, i, array_errors(x, y, rtol, atol, max_ulp)))
    result = Comparison(fn.name, how, tolerances, runs, pairs)
    if locate:
        locate_divergences(result, program, fn.name, list(inputs), {b.name: b for b in chosen},
                           rtol, atol, max_ulp, locate_limit, locate_values)
    return result

