"""Gradient compile and call time: shlo2jax beside Enzyme-JAX and jax.grad of the source.

    python benchmarks/grads.py [--cases chess,lm,hf_bart,tv_mobilenet_v3,transformer_scan]
                               [--variants translated,direct,enzyme,source] [--runs 3]
                               [--calls 20] [--seconds 10] [--json grads.json]
                               [--profile]

Run it from the benchmark venv (benchmarks/requirements-enzyme.txt: jax, enzyme-ad and this
package), where `enzyme_ad` imports; without it the enzyme column is skipped with the reason.

Cases (each a real model; weights are arguments):
  chess            ../shared/models/searchless_chess_9m.mlir.bc, DeepMind's 9M-parameter
                   transformer exported by its authors (skipped when ../shared is absent)
  lm               a 4-layer d_model-256 decoder LM written here and exported with jax.export
                   at bench time (its source is the `source` variant)
  hf_bart, tv_mobilenet_v3
                   the corpus's torchax exports of BART and MobileNetV3 (tests/corpus/torch)
  transformer_scan the corpus's jax.export of a scanned 2-layer transformer (its generator,
                   tests/corpus/producers/jax_models.py, is the `source` variant)

Variants: `translated` (shlo2jax.load, the default), `direct` (lowering="direct"), `enzyme`
(Enzyme-JAX's `enzyme_ad.jax.hlo_call` of the same module's StableHLO text: its gradient is
Enzyme's reverse mode of the module), `source` (jax.grad of the Python source, where the case
has it); and, when asked for, `lax` (translated with gradients="lax": lax's derivative rules
instead of strong zeros, the bound of what removing strong zeros can give) and `lax_dot`
(translated with lax.dot_general's own reverse mode: the translation before
`shlo2jax.gradients.dot_general`). The loss is sum(first floating output * a fixed random projection); gradients are
taken w.r.t. every floating argument.

Each (case, variant) runs in a fresh child process, the variants alternating, `--runs` times
(with `--interleave`, all variants of a case in one child: `--runs` compiles of each,
alternating, then the calls alternating; on a shared machine whose load moves, the ratios of
one such run are what to compare):
  compile  seconds to trace, lower and compile jax.jit(jax.grad(loss)) (load excluded)
  call     milliseconds per steady-state call, the median of `--calls` calls (fewer, at
           least 3, once they take `--seconds`)
  err      max |g - g_translated| / max |g_translated| over the gradients
and the optimised HLO of the gradient: kernels, fusions, XLA's flops and bytes accessed.
Medians over the runs are printed as a markdown table. `--profile` adds, per variant, the
primitives of the gradient's jaxpr by kind (what the translation adds over the source).
"""

from __future__ import annotations

import argparse
import collections
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
CORPUS = ROOT / "tests" / "corpus"
CASES = ["chess", "lm", "hf_bart", "tv_mobilenet_v3", "transformer_scan"]
VARIANTS = ["translated", "direct", "enzyme", "source"]


# ------------------------------------------------------------------ the cases

def _lm(layers=4, d=256, heads=4, seq=128, vocab=512):
    """(source fn(*flat float args, tokens), example arguments): a decoder LM as a user
    writes it (layer norm, causal softmax attention, exact GELU)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    hd = d // heads

    def norm(v, g, b):
        m = v.mean(-1, keepdims=True)
        var = ((v - m) ** 2).mean(-1, keepdims=True)
        return (v - m) * jax.lax.rsqrt(var + 1e-5) * g + b

    def fn(embed, g1, b1, wqkv, wo, g2, b2, w1, w2, tokens):
        x = embed[tokens]
        mask = jnp.tril(jnp.ones((seq, seq), bool))
        for i in range(layers):
            h = norm(x, g1[i], b1[i])
            q, k, v = jnp.einsum("sd,cdhk->chsk", h, wqkv[i])
            s = jnp.einsum("hqk,hsk->hqs", q, k) / np.sqrt(hd)
            a = jax.nn.softmax(jnp.where(mask, s, -1e9), axis=-1)
            x = x + jnp.einsum("hqs,hsk,hkd->qd", a, v, wo[i])
            h = norm(x, g2[i], b2[i])
            x = x + jax.nn.gelu(h @ w1[i], approximate=False) @ w2[i]
        return x @ embed.T

    rng = np.random.default_rng(0)
    shapes = [(vocab, d), (layers, d), (layers, d), (layers, 3, d, heads, hd),
              (layers, heads, hd, d), (layers, d), (layers, d), (layers, d, 4 * d),
              (layers, 4 * d, d)]
    args = [(rng.standard_normal(s) * (1.0 if len(s) == 2 and s[0] == layers else 0.05)
             ).astype(np.float32) for s in shapes]
    args.append(rng.integers(0, vocab, (seq,)).astype(np.int32))
    return fn, args


def _transformer_scan_source():
    """The corpus generator's transformer, as a function of the export's flat arguments."""
    import jax
    sys.path[:0] = [str(CORPUS), str(CORPUS / "producers")]
    import jax_common as jc
    import jax_models
    params = jax_models.transformer_params(jc.rng_for("transformer_scan"))
    treedef = jax.tree_util.tree_structure(params)
    n = treedef.num_leaves

    def fn(*flat):
        return jax_models.transformer(jax.tree_util.tree_unflatten(treedef, flat[:n]), *flat[n:])
    return fn


def case(name: str):
    """-> dict(artifact=bytes or path, args=list of numpy arrays, source=fn or None), or a
    string: why the case cannot run here."""
    import numpy as np
    if name == "chess":
        path = SHARED / "searchless_chess_9m.mlir.bc"
        if not path.exists():
            return f"{path} is absent (../shared is not checked out)"
        return {"artifact": path, "args": None, "source": None}
    if name == "lm":
        import jax
        fn, args = _lm()
        specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
        artifact = jax.export.export(jax.jit(fn))(*specs).serialize()
        return {"artifact": bytes(artifact), "args": args, "source": fn}
    producer = "jax" if name == "transformer_scan" else "torch"
    folder = CORPUS / producer / name
    meta = json.loads((folder / "meta.json").read_text())
    with np.load(folder / "data.npz") as data:
        args = [data[f"arg_{i}"] for i in range(len(meta["args"]))]
    source = _transformer_scan_source() if name == "transformer_scan" else None
    return {"artifact": folder / meta["artifact"], "args": args, "source": source}


def _seeded_args(avals):
    import numpy as np
    rng = np.random.default_rng(0)
    out = []
    for a in avals:
        dtype = np.dtype(a.dtype)
        if np.issubdtype(dtype, np.floating):
            out.append((rng.standard_normal(a.shape) * 0.05).astype(dtype))
        else:
            out.append(rng.integers(0, 8, a.shape).astype(dtype))
    return out


def _module_text(program) -> str:
    """The module as StableHLO text with every constant printed (what hlo_call parses)."""
    exported = program.exported
    if exported is not None:
        return exported.mlir_module()
    return program.mlir_module.operation.get_asm(large_elements_limit=None)


# ------------------------------------------------------------------ a child: one variant

def _jaxpr_kinds(closed) -> dict:
    counts = collections.Counter()

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            counts[eqn.primitive.name] += 1
            for value in eqn.params.values():
                for sub in value if isinstance(value, (list, tuple)) else [value]:
                    inner = getattr(sub, "jaxpr", sub)
                    if hasattr(inner, "eqns"):
                        walk(inner)
    walk(closed.jaxpr)
    return dict(counts.most_common())


def _gradient(name: str, variant: str):
    """-> (jax.grad of the case's loss through the variant, the arguments it takes), or a
    string: why the variant cannot run here."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    import shlo2jax

    spec = case(name)
    if isinstance(spec, str):
        return spec
    artifact = spec["artifact"]
    if variant == "source":
        if spec["source"] is None:
            return "no Python source (not made by a jax.export generator here)"
        fn, avals = spec["source"], None
    else:
        if variant == "lax_dot":
            _with_lax_dot_rule()
        lowering = "direct" if variant == "direct" else "translate"
        gradients = "lax" if variant == "lax" else "strong_zero"
        program = shlo2jax.load(artifact, lowering=lowering, gradients=gradients)
        fn, avals = program.entry, program.entry.in_avals
        if variant == "enzyme":
            try:
                from enzyme_ad.jax import hlo_call
            except ImportError as e:
                return (f"enzyme_ad does not import ({e}): run from the venv of "
                        "benchmarks/requirements-enzyme.txt")
            text = _module_text(program)
            fn = lambda *a: hlo_call(*a, source=text)  # noqa: E731
    args = spec["args"] if spec["args"] is not None else _seeded_args(avals)
    args = [jnp.asarray(a) for a in args]
    wrt = [i for i, a in enumerate(args) if jnp.issubdtype(a.dtype, jnp.floating)]

    def first_float(outs):
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        return next(o for o in outs if jnp.issubdtype(o.dtype, jnp.floating))

    out = jax.eval_shape(lambda *a: first_float(fn(*a)), *args)  # (hlo_call runs only jitted)
    projection = jnp.asarray(np.random.default_rng(1).standard_normal(out.shape), jnp.float32)

    def loss(diff):
        full = list(args)
        for i, a in zip(wrt, diff):
            full[i] = a
        return jnp.sum(first_float(fn(*full)).astype(jnp.float32) * projection)
    grad = jax.grad(loss)
    if variant == "lax_dot":
        plain = grad

        def grad(diff):  # traced (under jit) with lax's dot_general rule
            _with_lax_dot_rule(True)
            try:
                return plain(diff)
            finally:
                _with_lax_dot_rule(False)
    return grad, [args[i] for i in wrt]


def _with_lax_dot_rule(on: bool = False):
    """The translation's dot_general bound as lax.dot_general (lax's reverse mode, the
    translation before issue 32's `shlo2jax.gradients.dot_general`) while `on`."""
    import shlo2jax.gradients
    import shlo2jax.ops.linalg as linalg
    from jax import lax
    linalg._dot_general = lax.dot_general if on else shlo2jax.gradients.dot_general


def _why(e: Exception) -> str:
    import traceback
    lines = [line for line in str(e).splitlines() if line.strip() and "----" not in line]
    frame = traceback.extract_tb(e.__traceback__)[-1]
    return (f"{type(e).__name__}{': ' + lines[0][:120] if lines else ''} (in {frame.name}, "
            f"{os.path.basename(frame.filename)}:{frame.lineno})")


def _failing_softly(fn, *args):
    try:
        return fn(*args)
    except Exception as e:
        return "failed: " + _why(e)


def _compile(grad, diff):
    import jax
    start = time.perf_counter()
    compiled = jax.jit(grad).lower(diff).compile()
    return compiled, time.perf_counter() - start


def _timed_call(compiled, diff) -> float:
    import jax
    start = time.perf_counter()
    jax.block_until_ready(compiled(diff))
    return time.perf_counter() - start


def _record(compiled, diff, grads_out, profile, grad) -> dict:
    import jax
    import numpy as np
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench import _cost, hlo_summary
    np.savez(grads_out, *[np.asarray(g) for g in jax.block_until_ready(compiled(diff))])
    summary = hlo_summary(compiled.as_text())
    record = {"kernels": sum(summary["kernels"].values()), "fusions": summary["fusions"],
              "fused_instructions": summary["fused_instructions"],
              **_cost(compiled.cost_analysis()), "wrt": len(diff)}
    if profile:
        record["jaxpr"] = _jaxpr_kinds(jax.make_jaxpr(grad)(diff))
        record["hlo_kernels"] = summary["kernels"]
        record["hlo_fused"] = summary["fused"]
    return record


def child(name: str, variant: str, calls: int, seconds: float, grads_out: str,
          profile: bool) -> dict:
    made = _failing_softly(_gradient, name, variant)
    if isinstance(made, str):
        return {"skipped": made}
    grad, diff = made
    compiled, compile_s = _compile(grad, diff)
    record = _record(compiled, diff, grads_out, profile, grad)
    times = []
    while len(times) < calls and (len(times) < 3 or sum(times) < seconds):
        times.append(_timed_call(compiled, diff))
    return {"compile_s": compile_s, "call_ms": statistics.median(times) * 1e3, **record}


def interleaved(name: str, variants: list, runs: int, calls: int, seconds: float,
                grads_dir: str, profile: bool) -> dict:
    """Every variant of one case in this one process: `runs` compiles of each, alternating
    (jax's caches cleared before each), then calls alternating; medians. On a shared
    machine whose load moves, the ratios of one such run are the figures to compare."""
    import jax
    made = {v: _failing_softly(_gradient, name, v) for v in variants}
    out = {v: {"skipped": m} for v, m in made.items() if isinstance(m, str)}
    ready = {v: m for v, m in made.items() if not isinstance(m, str)}
    compiles, compiled = {v: [] for v in ready}, {}
    for _ in range(runs):
        for v, (grad, diff) in list(ready.items()):
            jax.clear_caches()
            try:
                compiled[v], s = _compile(grad, diff)
            except Exception as e:  # a variant that cannot differentiate the case
                out[v] = {"error": _why(e)}
                del ready[v], compiles[v]
                continue
            compiles[v].append(s)
    times = {v: [] for v in ready}
    while min(map(len, times.values()), default=calls) < calls and (
            min(map(len, times.values())) < 3 or
            sum(map(sum, times.values())) < seconds * len(times)):
        for v in ready:
            times[v].append(_timed_call(compiled[v], ready[v][1]))
    for v, (grad, diff) in ready.items():
        out[v] = {"compile_s": statistics.median(compiles[v]),
                  "call_ms": statistics.median(times[v]) * 1e3, "runs": runs,
                  **_record(compiled[v], diff, os.path.join(grads_dir, f"{name}-{v}.npz"),
                            profile, grad)}
    return out


# ------------------------------------------------------------------ the parent

def _run_child(name, variant, opts, grads_out) -> dict:
    cmd = [sys.executable, __file__, "--child", name, variant, "--calls", str(opts.calls),
           "--seconds", str(opts.seconds),
           "--grads-out", grads_out] + (["--profile"] if opts.profile else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=opts.timeout)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}


def _run_interleaved(name, opts, tmp) -> dict:
    cmd = [sys.executable, __file__, "--interleave-child", name, "--variants", opts.variants,
           "--runs", str(opts.runs), "--calls", str(opts.calls), "--seconds",
           str(opts.seconds), "--grads-out", tmp] + (["--profile"] if opts.profile else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=opts.timeout)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            results = json.loads(line)
            print(f"  {name}: " + json.dumps({v: {k: x for k, x in r.items()
                                                  if not isinstance(x, dict)}
                                              for v, r in results.items()}),
                  file=sys.stderr, flush=True)
            return results
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {v: {"error": f"exit {proc.returncode}: " + " | ".join(tail)}
            for v in opts.variants.split(",")}


def _rel_error(path, reference) -> float:
    import numpy as np
    with np.load(path) as a, np.load(reference) as b:
        worst = 0.0
        for key in b.files:
            want, got = b[key].astype(np.float64), a[key].astype(np.float64)
            worst = max(worst, float(np.max(np.abs(got - want), initial=0.0) /
                                     max(np.max(np.abs(want), initial=0.0), 1e-30)))
        return worst


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--json", default="")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--interleave", action="store_true",
                        help="every variant of a case in one child process, alternating")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--interleave-child", help=argparse.SUPPRESS)
    parser.add_argument("--grads-out", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    variants = opts.variants.split(",")
    if opts.child:
        print(json.dumps(child(*opts.child, opts.calls, opts.seconds, opts.grads_out,
                               opts.profile)))
        return
    if opts.interleave_child:
        print(json.dumps(interleaved(opts.interleave_child, variants, opts.runs, opts.calls,
                                     opts.seconds, opts.grads_out, opts.profile)))
        return

    import jax
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in opts.cases.split(","):
            if opts.interleave:
                results[name] = _run_interleaved(name, opts, tmp)
                for v, record in results[name].items():
                    out = os.path.join(tmp, f"{name}-{v}.npz")
                    ref = os.path.join(tmp, f"{name}-translated.npz")
                    if v != "translated" and os.path.exists(out) and os.path.exists(ref):
                        record["err"] = _rel_error(out, ref)
                continue
            runs = collections.defaultdict(list)
            for r in range(opts.runs):
                order = variants[r % len(variants):] + variants[:r % len(variants)]
                for variant in order:
                    out = os.path.join(tmp, f"{name}-{variant}-{r}.npz")
                    record = _run_child(name, variant, opts, out)
                    runs[variant].append(record)
                    print(f"  {name} {variant} run {r}: " + json.dumps(
                        {k: v for k, v in record.items() if not isinstance(v, dict)}),
                        file=sys.stderr, flush=True)
                ref = os.path.join(tmp, f"{name}-translated-{r}.npz")
                for variant in variants:
                    out = os.path.join(tmp, f"{name}-{variant}-{r}.npz")
                    if variant != "translated" and os.path.exists(out) and os.path.exists(ref):
                        runs[variant][-1]["err"] = _rel_error(out, ref)
            results[name] = {v: _median(rs) for v, rs in runs.items()}
    how = (f"one process per case, {opts.runs} compiles each and calls alternating"
           if opts.interleave else f"medians of {opts.runs} fresh processes")
    print(f"\njax {jax.__version__}, {jax.devices()[0].device_kind}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}; {how}\n")
    print(_table(results, variants))
    if opts.json:
        pathlib.Path(opts.json).write_text(json.dumps(results, indent=1) + "\n")


def _median(records: list) -> dict:
    ok = [r for r in records if "compile_s" in r]
    if not ok:
        return records[0]
    out = dict(ok[-1])
    for key in ("compile_s", "call_ms", "err", "flops", "bytes_accessed"):
        values = [r[key] for r in ok if key in r]
        if values:
            out[key] = statistics.median(values)
    out["runs"] = len(ok)
    return out


def _table(results: dict, variants: list) -> str:
    lines = ["| case | variant | grad compile s | grad call ms | vs enzyme (compile / call) "
             "| kernels | fusions | GFLOP | MB accessed | max rel err vs translated |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, by_variant in results.items():
        enzyme = by_variant.get("enzyme", {})
        for variant in variants:
            r = by_variant.get(variant, {})
            if "compile_s" not in r:
                why = r.get("skipped") or r.get("error") or "not run"
                lines.append(f"| {name} | {variant} | {why} |||||||| ")
                continue
            ratio = (f"{r['compile_s'] / enzyme['compile_s']:.2f} / "
                     f"{r['call_ms'] / enzyme['call_ms']:.2f}" if "compile_s" in enzyme else "")
            err = f"{r['err']:.1e}" if "err" in r else ""
            lines.append(f"| {name} | {variant} | {r['compile_s']:.2f} | {r['call_ms']:.2f} | "
                         f"{ratio} | {r['kernels']} | {r['fusions']} | {r['flops'] / 1e9:.2f} | "
                         f"{r['bytes_accessed'] / 1e6:.1f} | {err} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
