"""Cross-backend comparison: one module, several backends, differences located op by op.

    result = shlo2jax.compare("model.mlir", backends=["cpu", "interpreter", "xla-direct", "f64"])
    print(result.table())
    result.ok          # every pair of backends agrees within the tolerances

Backends:
  cpu, gpu, tpu  the translated program under jax.jit on the first device of that kind
  interpreter    jaxlib's StableHLO reference interpreter (in a child process)
  xla-direct     the module compiled directly by XLA through jaxlib, no translation (@main)
  f64            the translated program with every floating-point type widened to f64
                 (complex to complex128): a high-precision reference for float32 results
  python=PATH    the translated program under another Python's jax, in a child process
                 (`python=PATH:gpu` on its GPU): this shlo2jax's source, that jax
A `Backend` object adds another (e.g. a perturbed module, or a callable).

Every backend gets the same inputs: the user's, or seeded ones. Each pair of backends is
compared per output: max absolute error, max relative error |a-b|/max(|a|,|b|), max ULP
distance (in the narrower type of the two), and whether every element is within
`atol + rtol * max(|a|, |b|)` (or within `max_ulp` ULP when given). Integers and booleans
must be equal. Non-finite values must match (any NaN equals any NaN).

`locate=True`: for each pair that disagrees and whose both backends run the translation,
both are rerun recording every op's results (`shlo2jax.probe`) and the ops whose results
differ beyond the tolerances are reported with their locations and whether their operands
already differed: those where a difference starts first, then those it reaches.

`against=other`: two programs of one signature, each run on each (translated) backend with
the same inputs: `compare("model.mlir", against="edited.mlir", locate=True)`.

`grad=True`: the gradients of a seeded scalar loss are compared instead of the outputs
(`gradients`); with `locate`, the first ops of the backward pass whose cotangents differ.

`reduce=DIR` (CLI: --reduce DIR): the first disagreeing pair's difference shrunk to a small
standalone module that still shows it, written with its arguments (`reduce`).

`result.write_html(path)` (CLI: --html): the comparison as one self-contained HTML page, with
after `locate` each op's error along the program (`result.profiles`);
`result.write_model_explorer(path)` (--model-explorer): those errors as Model Explorer node data.

The package: `backends` (the ways of running), `python_backend` (the `python=` backend),
`specs` (a backend from its name), `comparison` (`compare`), `report` (what it returns),
`locate` (the diverging ops, each op's error), `gradients` (`grad=True`), `page` (the HTML),
`overlay` (Model Explorer's node data), `reduce` (`reduce=DIR`).
"""

from shlo2jax.tools.compare.backends import (BUILTIN_BACKENDS, DEFAULT_BACKENDS, Backend,
                                             CallableBackend, Float64Backend,
                                             InterpreterBackend, TranslatedBackend,
                                             XlaDirectBackend)
from shlo2jax.tools.compare.comparison import compare
from shlo2jax.tools.compare.python_backend import PythonBackend
from shlo2jax.tools.compare.specs import backend
from shlo2jax.tools.compare.locate import diverging_ops, instrumented_module_text
from shlo2jax.tools.compare.reduce import reduce_disagreement
from shlo2jax.tools.compare.report import (BackendRun, Comparison, Divergence, OpError,
                                           PairResult, Reduced)
from shlo2jax.tools.numerics import Errors, array_errors

__all__ = ["BUILTIN_BACKENDS", "DEFAULT_BACKENDS", "Backend", "CallableBackend",
           "Float64Backend", "InterpreterBackend", "PythonBackend", "TranslatedBackend",
           "XlaDirectBackend", "backend", "compare", "diverging_ops", "instrumented_module_text",
           "BackendRun", "Comparison", "Divergence", "OpError", "PairResult", "Reduced",
           "reduce_disagreement", "Errors", "array_errors"]
