"""Translation and run-time benchmark: translated programs against XLA compiling the module directly.

    python benchmarks/bench.py [--models chess,resnet50,transformer_scan,transformer_unrolled,generated]
                               [--json benchmarks/results.json] [--repeats 20]

For each model, each measurement runs in a fresh child process (so peak memory is that
step's own):
  translate  load + translate + trace + lower to StableHLO (XLA compile excluded): seconds,
             ops/s, peak RSS
  run        steady-state run time of the translated program under jax.jit (median)
  direct     the same module compiled directly by XLA through jaxlib: compile seconds, peak
             RSS of load + compile, run time (median)
Prints a table and writes JSON. Models from ../shared are skipped when it is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "models"
MODELS = ["chess", "resnet50", "transformer_scan", "transformer_unrolled", "generated"]


# ------------------------------------------------------------------ model sources

def _transformer_module(unrolled: bool, layers: int = 12, d_model: int = 512, seq: int = 128,
                        vocab: int = 1024) -> bytes:
    """A decoder-only transformer LM exported with jax.export; weights are arguments."""
    import jax
    import jax.numpy as jnp
    from jax import export as jax_export

    heads, d_ff = 8, 4 * d_model

    def layer(x, p):
        def norm(v, g):
            mean = v.mean(-1, keepdims=True)
            var = ((v - mean) ** 2).mean(-1, keepdims=True)
            return (v - mean) * jax.lax.rsqrt(var + 1e-5) * g
        h = norm(x, p["g1"])
        q, k, v = (jnp.einsum("sd,dhk->hsk", h, p[n]) for n in ("wq", "wk", "wv"))
        scores = jnp.einsum("hqk,hsk->hqs", q, k) / jnp.sqrt(d_model // heads)
        mask = jnp.tril(jnp.ones((seq, seq), bool))
        attn = jax.nn.softmax(jnp.where(mask, scores, -1e9), axis=-1)
        x = x + jnp.einsum("hqs,hsk,hkd->qd", attn, v, p["wo"])
        h = norm(x, p["g2"])
        return x + jax.nn.gelu(h @ p["w1"]) @ p["w2"]

    def model(embed, params, tokens):
        x = embed[tokens]
        if unrolled:
            for i in range(layers):
                x = layer(x, jax.tree.map(lambda a: a[i], params))
        else:
            x, _ = jax.lax.scan(lambda c, p: (layer(c, p), None), x, params)
        return x @ embed.T

    hd = d_model // heads
    f32 = jnp.float32
    params = {"g1": (layers, d_model), "g2": (layers, d_model), "wq": (layers, d_model, heads, hd),
              "wk": (layers, d_model, heads, hd), "wv": (layers, d_model, heads, hd),
              "wo": (layers, heads, hd, d_model), "w1": (layers, d_model, d_ff),
              "w2": (layers, d_ff, d_model)}
    specs = (jax.ShapeDtypeStruct((vocab, d_model), f32),
             {k: jax.ShapeDtypeStruct(s, f32) for k, s in params.items()},
             jax.ShapeDtypeStruct((seq,), jnp.int32))
    return jax_export.export(jax.jit(model))(*specs).mlir_module_serialized


def _generated_module(functions: int = 150, ops_per_function: int = 410, call_sites: int = 250) -> str:
    """Like the largest real exports: many private functions, each called from several sites."""
    kinds = ["stablehlo.add", "stablehlo.multiply", "stablehlo.subtract", "stablehlo.maximum"]
    lines = ["module @generated {"]
    for f in range(functions):
        lines.append(f"  func.func private @f{f}(%a: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<16xf32> {{")
        prev = "%a"
        for i in range(ops_per_function):
            if i % 10 == 9:
                lines.append(f"    %v{i} = stablehlo.tanh {prev} : tensor<16xf32>")
            else:
                lines.append(f"    %v{i} = {kinds[i % 4]} {prev}, %b : tensor<16xf32>")
            prev = f"%v{i}"
        lines.append(f"    return {prev} : tensor<16xf32>\n  }}")
    lines.append("  func.func public @main(%x: tensor<16xf32>) -> tensor<16xf32> {")
    # Independent call sites combined by a balanced tree: real exports are wide, not one
    # 100,000-op dependency chain (which overflows the stack of XLA's recursive passes).
    level = []
    for c in range(call_sites):
        lines.append(f"    %c{c} = func.call @f{(c * 7) % functions}(%x, %x) : "
                     "(tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>")
        level.append(f"%c{c}")
    n = 0
    while len(level) > 1:
        pairs, level = level, []
        for i in range(0, len(pairs) - 1, 2):
            lines.append(f"    %s{n} = stablehlo.add {pairs[i]}, {pairs[i + 1]} : tensor<16xf32>")
            level.append(f"%s{n}")
            n += 1
        if len(pairs) % 2:
            level.append(pairs[-1])
    lines.append(f"    return {level[0]} : tensor<16xf32>\n  }}\n}}")
    return "\n".join(lines)


def materialize(model: str, workdir: pathlib.Path):
    """-> (path to the module file, load options) or None when the model is not available."""
    if model == "chess":
        path = SHARED / "searchless_chess_9m.mlir.bc"
        return (path, {}) if path.exists() else None
    if model == "resnet50":
        path = SHARED / "jax_resnet_50.mlir"
        return (path, {"placeholder_data": True}) if path.exists() else None
    if model.startswith("transformer"):
        path = workdir / f"{model}.mlir.bc"
        if not path.exists():
            path.write_bytes(_transformer_module(unrolled=model.endswith("unrolled")))
        return path, {}
    if model == "generated":
        path = workdir / "generated.mlir"
        if not path.exists():
            path.write_text(_generated_module())
        return path, {}
    raise ValueError(model)


# ------------------------------------------------------------------ child-process steps

def _peak_rss_mb() -> float:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _timed_runs(fn, args, repeats: int) -> float:
    import jax
    jax.block_until_ready(fn(*args))  # warm-up (and compile)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def step_translate(path, options, repeats):
    import jax
    baseline = _peak_rss_mb()
    start = time.perf_counter()
    import shlo2jax
    from shlo2jax.inputs import seeded_inputs
    program = shlo2jax.load(path, **options)
    loaded = time.perf_counter()
    fn = program.entry
    avals = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in fn.in_avals]
    with jax.enable_x64(True):
        lowered = fn._traceable().lower(*avals)
        lowered.as_text()
    done = time.perf_counter()
    ops = len(program.module.ops)
    result = {"ops": ops, "load_s": loaded - start, "translate_s": done - start,
              "ops_per_s": ops / (done - start), "translate_peak_mb": _peak_rss_mb(),
              "baseline_mb": baseline}
    inputs = seeded_inputs(fn)
    with jax.enable_x64(True):
        compiled = lowered.compile()
        result["run_s"] = _timed_runs(compiled, inputs, repeats)
        # What XLA made of it, to compare with the direct compile.
        result["hlo_fusions"] = compiled.as_text().count(" fusion(")
    return result


def step_direct(path, options, repeats):
    import jax
    import shlo2jax
    from shlo2jax._jax_internals import compile_mlir_module
    from shlo2jax.inputs import seeded_inputs
    program = shlo2jax.load(path, **options)  # parse (+ placeholders); translation unused
    text = program.mlir_module.operation.get_asm(large_elements_limit=None, enable_debug_info=False)
    inputs = seeded_inputs(program.entry)
    start = time.perf_counter()
    run = compile_mlir_module(text)
    compile_s = time.perf_counter() - start
    return {"direct_compile_s": compile_s, "direct_peak_mb": _peak_rss_mb(),
            "direct_run_s": _timed_runs(run, inputs, repeats)}


STEPS = {"translate": step_translate, "direct": step_direct}


def _child(step: str, path: str, options: str, repeats: int):
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    result = STEPS[step](pathlib.Path(path), json.loads(options), repeats)
    print("RESULT " + json.dumps(result))


def _run_step(step, path, options, repeats) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", step, str(path), json.dumps(options),
                          str(repeats)], capture_output=True, text=True, timeout=3600)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": (out.stderr or out.stdout).strip().splitlines()[-1:]}


# ------------------------------------------------------------------ main

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results.json"))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        step, path, options, repeats = args.child
        return _child(step, path, options, int(repeats))
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            found = materialize(model, pathlib.Path(tmp))
            if found is None:
                print(f"{model}: skipped (../shared/models absent)")
                continue
            path, options = found
            row = {}
            for step in STEPS:
                row.update(_run_step(step, path, options, args.repeats))
            if "run_s" in row and "direct_run_s" in row:
                row["run_ratio"] = row["run_s"] / row["direct_run_s"]
                row["memory_ratio"] = row["translate_peak_mb"] / row["direct_peak_mb"]
            results[model] = row
            print(model, json.dumps(row), flush=True)
    _print_table(results)
    pathlib.Path(args.json).write_text(json.dumps(results, indent=2))
    print(f"wrote {args.json}")


def _print_table(results):
    header = (f"{'model':22s} {'ops':>7s} {'translate s':>11s} {'ops/s':>8s} {'run ms':>8s} "
              f"{'direct ms':>9s} {'ratio':>6s} {'compile s':>9s} {'peak MB':>8s} {'direct MB':>9s}")
    print(header)
    print("-" * len(header))
    for model, r in results.items():
        if "error" in r:
            print(f"{model:22s} error: {r['error']}")
            continue
        print(f"{model:22s} {r['ops']:7d} {r['translate_s']:11.2f} {r['ops_per_s']:8.0f} "
              f"{r['run_s'] * 1e3:8.3f} {r['direct_run_s'] * 1e3:9.3f} {r['run_ratio']:6.3f} "
              f"{r['direct_compile_s']:9.2f} {r['translate_peak_mb']:8.0f} {r['direct_peak_mb']:9.0f}")


if __name__ == "__main__":
    main()
