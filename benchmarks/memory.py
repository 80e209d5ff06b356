"""Load and first-call memory, side by side with `jax.export` (issue 32).

    python benchmarks/memory.py [--size-mb 1024] [--args-mb 3072] [--cases baked,args]
                                [--variants export,translated,direct] [--cache DIR] [--json FILE]

Two `jax.export` artifacts of a small MLP (`--layers` square float32 weights, tanh between them),
written once by a child process into `--cache` (a folder under the system's temporary folder by
default; reused while it exists):

  baked   the weights (about `--size-mb` MB, default 1 GB) closed over: baked into the module
          as constants, so the artifact is the size of the weights
  args    the weights (about `--args-mb` MB, default 3x `--size-mb`) passed as arguments: the
          artifact is small, the caller holds the weights (numpy arrays made in the child
          before anything is loaded, so they are in every variant's figures alike)
  splat   (only when asked: `--cases splat`) a StableHLO text module summing one splat constant
          `dense<1.0>` of about `--size-mb` MB (issue 46): a few hundred bytes of text, which the
          translation broadcasts rather than materialising; no `export` variant (it is no
          `jax.export` artifact)

Each (case, variant) runs in a fresh child process, one at a time:

  export      `jax.export.deserialize(bytes)` + `exported.call(*args)` (the baseline)
  translated  `shlo2jax.load(bytes)` + `program["main"](*args)` (the default lowering)
  direct      `shlo2jax.load(bytes, lowering="direct")` + the same call

Columns: `peak` the child's peak resident memory (its own `ru_maxrss`, from `os.wait4` when it
ends: RUSAGE_CHILDREN would give the largest child so far); `base` RSS once jax, numpy (and
shlo2jax) are imported and the arguments made; `load`/`call` RSS after each step, and the peak
reached by the end of the load (`load peak`); `dropped` RSS after the program, the artifact's
bytes, the arguments and the result are deleted and `gc.collect()` ran; `cleared` the same after
`jax.clear_caches()` too (jax's jit caches keep the compiled executable, and with it the
constants baked into it), each read once RSS stops falling (XLA frees buffers on a worker
thread); `load s`/`first s` wall seconds of the load and of the first call to
its result. Memory in MB (2^20 bytes), read from /proc/self/status (VmRSS) in the child.
Memory figures are the process's own, so they are stable on a shared machine; times are not.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile
import textwrap
import time

MB = 1 << 20
CASES = ["baked", "args"]
VARIANTS = ["export", "translated", "direct"]


# ------------------------------------------------------------------ the artifacts

def artifact_path(cache: pathlib.Path, case: str, megabytes: int, layers: int) -> pathlib.Path:
    if case == "splat":
        return cache / f"splat_{megabytes}mb.mlir"
    return cache / f"mlp_{case}_{megabytes}mb_{layers}l.bin"


def splat_module(megabytes: int) -> str:
    width = int(math.sqrt(megabytes * MB / 4))
    t = f"tensor<{width}x{width}xf32>"
    return textwrap.dedent(f"""\
        func.func @main() -> tensor<f32> {{
          %c = stablehlo.constant dense<1.0> : {t}
          %z = stablehlo.constant dense<0.0> : tensor<f32>
          %s = stablehlo.reduce(%c init: %z) applies stablehlo.add across dimensions = [0, 1]
            : ({t}, tensor<f32>) -> tensor<f32>
          return %s : tensor<f32>
        }}
        """)


def make_artifact(path: pathlib.Path, case: str, megabytes: int, layers: int) -> None:
    """Writes the artifact from a child process, so that its memory is no measurement's."""
    if path.exists():
        return
    if case == "splat":
        path.write_text(splat_module(megabytes))
        return
    code = textwrap.dedent(f"""
        import math
        import jax, jax.numpy as jnp, numpy as np
        case, layers, total = {case!r}, {layers}, {megabytes} * (1 << 20)
        width = int(math.sqrt(total / 4 / layers))
        x = jax.ShapeDtypeStruct((2, width), jnp.float32)
        if case == "baked":
            rng = np.random.default_rng(0)
            weights = [rng.standard_normal((width, width), np.float32) / np.float32(np.sqrt(width))
                       for _ in range(layers)]
            def f(x):
                for w in weights:
                    x = jnp.tanh(x @ w)
                return x
            exported = jax.export.export(jax.jit(f))(x)
        else:
            def f(weights, x):
                for w in weights:
                    x = jnp.tanh(x @ w)
                return x
            w = jax.ShapeDtypeStruct((width, width), jnp.float32)
            exported = jax.export.export(jax.jit(f))([w] * layers, x)
        data = exported.serialize()
        open({str(path) + ".part"!r}, "wb").write(data)
        """)
    subprocess.run([sys.executable, "-c", code], check=True)
    os.replace(str(path) + ".part", path)


# ------------------------------------------------------------------ the child

def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024  # kB
    raise RuntimeError("no VmRSS in /proc/self/status")


def settled_rss_mb(timeout: float = 3.0) -> float:
    """RSS once it stops falling: XLA's CPU client frees a deleted buffer on a worker thread,
    so RSS read right after `del` + `gc.collect()` still counts buffers on their way out."""
    previous, deadline = rss_mb(), time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        time.sleep(0.1)
        current = rss_mb()
        if previous - current < 1:
            return current
        previous = current
    return previous


def peak_mb() -> float:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def measure(case: str, variant: str, path: str, layers: int, megabytes: int) -> dict:
    """Runs in the child: RSS after each step, and the load's and first call's wall times."""
    import gc
    import jax
    import numpy as np
    out = {}
    if variant != "export":
        import shlo2jax
    blob = pathlib.Path(path).read_bytes()
    if case == "args":
        width = int(math.sqrt(megabytes * MB / 4 / layers))
        rng = np.random.default_rng(0)
        weights = [rng.standard_normal((width, width), np.float32) / np.float32(np.sqrt(width))
                   for _ in range(layers)]
        x = np.ones((2, width), np.float32)
        args = (weights, x)
    out["base"] = rss_mb()
    start = time.perf_counter()
    if variant == "export":
        exported = jax.export.deserialize(bytearray(blob))
        call = exported.call
        program = exported
    else:
        options = {"lowering": "direct"} if variant == "direct" else {}
        program = shlo2jax.load(blob, **options)
        call = program["main"]
    out["load_s"] = time.perf_counter() - start
    out["load"], out["load_peak"] = rss_mb(), peak_mb()
    if case == "splat":
        args = ()
    elif case == "baked":
        (x_aval,) = (exported.in_avals if variant == "export" else call.in_avals)
        args = (np.ones(x_aval.shape, x_aval.dtype),)
    start = time.perf_counter()
    if variant == "export":
        result = jax.block_until_ready(call(*args))
    else:  # the weights one argument each, as the module's signature has them
        result = jax.block_until_ready(call(*(args[0] + [args[1]] if case == "args" else args)))
    out["first_s"] = time.perf_counter() - start
    out["call"], out["call_peak"] = rss_mb(), peak_mb()
    del program, call, result, blob, args
    if variant == "export":
        del exported
    if case == "args":
        del weights, x
    gc.collect()
    out["dropped"] = settled_rss_mb()
    jax.clear_caches()
    gc.collect()
    out["cleared"] = settled_rss_mb()
    out["peak_self"] = peak_mb()
    return out


def run_child(case: str, variant: str, path: pathlib.Path, layers: int, megabytes: int) -> dict:
    """One fresh process; its peak RSS from its own rusage (os.wait4), its steps from stdout."""
    with tempfile.TemporaryFile("w+") as stdout:
        child = subprocess.Popen([sys.executable, __file__, "--child", case, variant, str(path),
                                  "--layers", str(layers), "--size-mb", str(megabytes)],
                                 stdout=stdout)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        stdout.seek(0)
        text = stdout.read()
    if child.returncode:
        return {"error": f"exit status {child.returncode}", "peak": usage.ru_maxrss / 1024}
    row = json.loads(text.strip().splitlines()[-1])
    row["peak"] = usage.ru_maxrss / 1024  # kB on Linux
    return row


# ------------------------------------------------------------------ the table

def table(rows: list, sizes: dict) -> str:
    head = ("| case | variant | peak MB | base MB | load MB (load peak) | after call MB | "
            "dropped MB | cleared MB | load s | first call s |")
    lines = [head, "|---" * (head.count("|") - 1) + "|"]
    for case, variant, r in rows:
        label = f"{case}, {sizes[case]} MB"
        if "error" in r:
            lines.append(f"| {label} | {variant} | {r['peak']:.0f} | {r['error']} |"
                         + " |" * 6)
            continue
        lines.append(f"| {label} | {variant} | {r['peak']:.0f} | {r['base']:.0f} | "
                     f"{r['load']:.0f} ({r['load_peak']:.0f}) | {r['call']:.0f} | "
                     f"{r['dropped']:.0f} | {r['cleared']:.0f} | {r['load_s']:.2f} | "
                     f"{r['first_s']:.2f} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="baked weights, MB")
    parser.add_argument("--args-mb", type=int, help="weights as arguments, MB (3x --size-mb)")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--cache", default=os.path.join(tempfile.gettempdir(),
                                                        "shlo2jax-memory-bench"))
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)  # case variant path
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(*args.child, args.layers, args.size_mb)))
        return
    sizes = {"baked": args.size_mb, "args": args.args_mb or 3 * args.size_mb,
             "splat": args.size_mb}
    cache = pathlib.Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    rows = []
    for case in args.cases.split(","):
        path = artifact_path(cache, case, sizes[case], args.layers)
        start = time.perf_counter()
        make_artifact(path, case, sizes[case], args.layers)
        print(f"{case}: {path} ({path.stat().st_size / MB:.0f} MB, "
              f"{time.perf_counter() - start:.0f} s to make)", flush=True)
        for variant in args.variants.split(","):
            if case == "splat" and variant == "export":
                continue
            row = run_child(case, variant, path, args.layers, sizes[case])
            print(f"  {variant}: {json.dumps(row)}", flush=True)
            rows.append((case, variant, row))
    print(table(rows, sizes))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(
            [{"case": c, "variant": v, "megabytes": sizes[c], **r} for c, v, r in rows], indent=1))


if __name__ == "__main__":
    main()
