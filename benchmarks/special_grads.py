"""Reverse mode through exported special functions: time and memory against jax's own.

    python benchmarks/special_grads.py [--size 1024] [--repeat 20] [--only gammainc,expi]

For each differentiable function of jax.scipy.special whose export contains a while loop
(series and continued fractions whose trip count depends on the data), and a few without
one for scale: the function is exported with `jax.export` at float32 and `--size` elements,
loaded with shlo2jax's default options, and `jax.jit(jax.grad(loss))` of the export is set
against `jax.jit(jax.grad(loss))` of the source function (jax's own derivative rules: closed
forms, or custom JVPs of the series). Columns:

  loops      stablehlo.while ops in the export
  compile    seconds to trace, lower and compile the gradient (source / export)
  run        milliseconds per call once compiled, the median of `--repeat` calls
  temp       XLA's temporary buffer bytes of the compiled gradient (`memory_analysis()`),
             the memory a call needs beyond its arguments and results, in KiB
  max err    max |export - source| / max |source| over the gradients

The machine may be shared: compile and run times are wall-clock and vary with its load;
the memory figures are XLA's own accounting and do not.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np

import shlo2jax


def cases(n: int) -> dict:
    pos = np.linspace(0.3, 5.0, n).astype(np.float32)
    prob = np.linspace(0.03, 0.97, n).astype(np.float32)
    real = np.linspace(-3.7, 3.9, n).astype(np.float32)
    return {  # name: (arguments, argnums)
        "gammainc": ((pos, pos[::-1] * 1.3), (0, 1)),
        "gammaincc": ((pos, pos[::-1] * 1.3), (0, 1)),
        "betainc": ((pos, pos[::-1], prob), (2,)),
        "exp1": ((pos,), (0,)),
        "expi": ((pos,), (0,)),
        "expn": ((np.full(n, 2, np.int32), pos), (1,)),
        "hyp1f1": ((pos / 3, pos[::-1] / 2, pos / 4), (0, 1, 2)),
        "hyp2f1": ((pos / 3, pos[::-1] / 2, pos + 1, prob * 0.9), (0, 1, 2, 3)),
        # no loop, for scale
        "digamma": ((pos,), (0,)),
        "erfinv": ((prob * 2 - 1,), (0,)),
        "i1": ((real,), (0,)),
    }


def measure(grad, args, repeat):
    start = time.perf_counter()
    compiled = jax.jit(grad).lower(*args).compile()
    compile_s = time.perf_counter() - start
    jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        out = jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - start)
    temp = compiled.memory_analysis().temp_size_in_bytes
    return out, compile_s, statistics.median(times) * 1e3, temp


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--only", default="", help="comma-separated names")
    opts = parser.parse_args()
    table = cases(opts.size)
    names = opts.only.split(",") if opts.only else list(table)
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}, float32, {opts.size} elements")
    header = (f"{'function':10} {'loops':>5} {'compile s (src/exp)':>20} "
              f"{'run ms (src/exp)':>18} {'temp KiB (src/exp)':>20} {'max err':>9}")
    print(header)
    print("-" * len(header))
    for name in names:
        args, argnums = table[name]
        fn = getattr(jsp, name)
        exported = jax.export.export(jax.jit(fn))(
            *[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args])
        loops = exported.mlir_module().count("stablehlo.while")
        translated = shlo2jax.load(exported.serialize()).entry
        weights = jnp.linspace(0.5, 1.5, opts.size, dtype=np.float32)

        def grad_of(f):
            return jax.grad(lambda *a: jnp.sum(f(*a) * weights), argnums=argnums)

        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an overflowing loop bound would be a failure
            src, src_c, src_r, src_t = measure(grad_of(fn), args, opts.repeat)
            exp, exp_c, exp_r, exp_t = measure(grad_of(translated), args, opts.repeat)
        err = max(float(np.nanmax(np.abs(np.asarray(e) - np.asarray(s))) /
                        np.nanmax(np.abs(np.asarray(s)))) for e, s in zip(exp, src))
        print(f"{name:10} {loops:5d} {src_c:9.2f} / {exp_c:8.2f} {src_r:8.2f} / {exp_r:7.2f} "
              f"{src_t / 1024:9.0f} / {exp_t / 1024:8.0f} {err:9.1e}", flush=True)


if __name__ == "__main__":
    main()
