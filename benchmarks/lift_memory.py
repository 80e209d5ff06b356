"""Memory of `shlo2jax.lift_params`: does lifting copy the weights?

    python benchmarks/lift_memory.py [--megabytes 256] [--layers 4]

Writes a `jax.export` artifact of an MLP whose `--layers` square float32 weights (about
`--megabytes` MB in all) are closed over, i.e. baked into the program as constants; then, in a
fresh child process (so peak RSS is the measurement's own), reads it and prints the process's
resident memory after each step:

  imports      jax and shlo2jax imported
  load         shlo2jax.load: the decoded constants (the program lets the artifact's module bytes
               and jaxlib's MLIR module go after decoding: shlo2jax/held_module.py); the peak
               column shows what the load held while decoding
  lift         lift_params: the parameters wrap the decoded constants (expected: + ~0 MB)
  apply        the first apply(params, x): compile and run, the weights passed as arguments
  grad         one jax.grad of a loss through apply w.r.t. all parameters (the gradient is
               itself the size of the weights)

Figures are resident set sizes in MB (current, and the peak so far). The machine is shared:
only the process's own memory counts here, so the figures are stable between runs.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import textwrap

MB = 1 << 20


def make_artifact(path: pathlib.Path, megabytes: int, layers: int) -> dict:
    """The artifact, written by a child process so that its memory is not the measurement's."""
    code = textwrap.dedent(f"""
        import json, math, sys
        import jax, jax.numpy as jnp, numpy as np
        layers, total = {layers}, {megabytes} * (1 << 20)
        width = int(math.sqrt(total / 4 / layers))
        rng = np.random.default_rng(0)
        weights = [(rng.standard_normal((width, width), np.float32) / np.float32(np.sqrt(width)))
                   for _ in range(layers)]
        def f(x):
            for w in weights:
                x = jnp.tanh(x @ w)
            return x
        exported = jax.export.export(jax.jit(f))(jax.ShapeDtypeStruct((2, width), jnp.float32))
        data = exported.serialize()
        open({str(path)!r}, "wb").write(data)
        print(json.dumps({{"width": width, "weights_mb": sum(w.nbytes for w in weights) / (1 << 20),
                          "artifact_mb": len(data) / (1 << 20)}}))
        """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MB


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def measure(path: str) -> list:
    """Runs in the child: (step, current RSS, peak RSS) after each step."""
    rows = []

    def record(step):
        rows.append((step, rss_mb(), peak_mb()))

    import jax
    import jax.numpy as jnp
    import numpy as np
    import shlo2jax
    record("imports")
    program = shlo2jax.load(pathlib.Path(path).read_bytes())
    record("load")
    params, apply = shlo2jax.lift_params(program)
    record("lift")
    x = np.ones(apply.in_avals[0].shape, np.float32)
    jax.block_until_ready(apply(params, x))
    record("apply")
    grads = jax.jit(jax.grad(lambda p: jnp.sum(apply(p, x))))(params)
    jax.block_until_ready(grads)
    record("grad")
    shared = sum(params[c.name].unsafe_buffer_pointer() == c.value.ctypes.data
                 for c in apply.constants)
    rows.append(("wrapped", shared, len(apply.constants)))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # (the child's entry point)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "closed_mlp.bin"
        made = make_artifact(path, args.megabytes, args.layers)
        done = subprocess.run([sys.executable, __file__, "--measure", str(path)],
                              capture_output=True, text=True, check=True)
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    *steps, (_, shared, lifted) = rows
    print(f"{args.layers} closed-over float32 weights {made['width']}x{made['width']}: "
          f"{made['weights_mb']:.0f} MB of constants, artifact {made['artifact_mb']:.0f} MB")
    print(f"{'step':10s} {'RSS MB':>9s} {'+MB':>8s} {'peak MB':>9s}")
    previous = None
    for step, current, peak in steps:
        delta = "" if previous is None else f"{current - previous:+8.0f}"
        print(f"{step:10s} {current:9.0f} {delta:>8s} {peak:9.0f}")
        previous = current
    lift = steps[2][1] - steps[1][1]
    print(f"lift_params added {lift:.0f} MB for {made['weights_mb']:.0f} MB of weights; "
          f"{shared} of {lifted} parameters wrap the decoded constant's memory")


if __name__ == "__main__":
    main()
