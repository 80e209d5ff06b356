"""tf2jax beside shlo2jax on the corpus's SavedModels (tests/corpus/tensorflow/jax2tf_* and
tfgraph_*): which of forward, grad, vmap and jvp each one gets right, and its load, first-call
and call times.

    python benchmarks/tf2jax_side_by_side.py [--entries jax2tf_mlp,tfgraph_function]
                                             [--repeats 50] [--json PATH]

Needs TensorFlow and tf2jax beside shlo2jax (a throw-away environment: `pip install tf2jax`
pulls TensorFlow; the tfgraph_* entries need TensorFlow for shlo2jax too, its [tf] extra).

- shlo2jax: `shlo2jax.load(folder).entry`, the signature's inputs positionally (sorted).
- tf2jax: `tf.saved_model.load`, then `tf2jax.convert(tf.function(signature), **inputs)`,
  called as `fn(params, **inputs)`.
Both return the signature's dict, compared in sorted key order with the goldens.

Checks (the corpus's tolerances, tests/corpus/checks.py): forward = TensorFlow's outputs;
grad = jax.grad of the corpus loss w.r.t. the inputs = TensorFlow's GradientTape's; vmap
over 3 perturbed inputs = 3 calls; jvp of the loss along the golden gradient = its squared
norm. Times: load (reading the folder into a callable; TensorFlow and tf2jax imported
beforehand), first call (jax.jit's first call:
trace and compile), call (the median of `--repeats` jitted calls); seconds of wall time on a
shared machine.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import pathlib
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

REPO = pathlib.Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "corpus"
sys.path.insert(0, str(CORPUS))

import jax  # noqa: E402
import numpy as np  # noqa: E402

import checks  # noqa: E402
import entry as corpus_entry  # noqa: E402

CHECKS = ("forward", "grad", "vmap", "jvp")


def _sorted_outputs(out: dict) -> list:
    return [out[k] for k in sorted(out)]


def load_shlo2jax(e):
    import shlo2jax
    fn = shlo2jax.load(str(e.artifact_path)).entry
    return lambda *args: _sorted_outputs(fn(*args))


def load_tf2jax(e):
    import tensorflow as tf
    import tf2jax
    names = [a["name"] for a in e.meta["args"]]
    loaded = tf.saved_model.load(str(e.artifact_path))
    signature = loaded.signatures[e.meta["function"]]
    fn, params = tf2jax.convert(tf.function(signature), **dict(zip(names, e.args)))
    return lambda *args: _sorted_outputs(fn(params, **dict(zip(names, args)))[0])


TOOLS = {"shlo2jax": load_shlo2jax, "tf2jax": load_tf2jax}


def check_jvp(e, fn) -> checks.Result:
    """The loss's jvp along the golden input gradients: their squared norm."""
    wrt = sorted(e.grads)
    args = list(e.args)

    def of(*diff):
        full = list(args)
        for i, a in zip(wrt, diff):
            full[i] = a
        return checks.loss(fn(*full), e.projections)
    _, got = jax.jvp(of, tuple(np.asarray(e.args[i]) for i in wrt),
                     tuple(np.asarray(e.grads[i]) for i in wrt))
    want = sum(float(np.sum(np.square(e.grads[i].astype(np.float64)))) for i in wrt)
    err = abs(float(got) - want) / max(abs(want), 1e-30)
    ok = err <= e.tolerance["grad_rtol"]
    return checks.Result(ok, err, message="" if ok else f"jvp {float(got):.6g}, want {want:.6g}")


def run_check(e, name, fn) -> checks.Result:
    inputs_only = copy.copy(e)  # (tf2jax names variables its own way: gradients w.r.t. inputs)
    inputs_only.weight_grads, inputs_only.rows_apart = {}, {}
    try:
        if name == "jvp":
            return check_jvp(e, fn)
        return {"forward": checks.check_forward, "grad": checks.check_grad,
                "vmap": checks.check_vmap}[name](inputs_only, fn)
    except Exception as exc:  # noqa: BLE001 - the table names whatever went wrong
        return checks.Result(False, message=f"raised {type(exc).__name__}: "
                                            f"{str(exc).splitlines()[0][:200]}")


def measure(e, tool: str, repeats: int) -> dict:
    row = {"entry": e.folder.name, "tool": tool}
    start = time.perf_counter()
    try:
        fn = TOOLS[tool](e)
    except Exception as exc:  # noqa: BLE001
        row["load_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        return row
    row["load_s"] = time.perf_counter() - start
    jitted = jax.jit(fn)
    try:
        start = time.perf_counter()
        jax.block_until_ready(jitted(*e.args))
        row["first_call_s"] = time.perf_counter() - start
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            jax.block_until_ready(jitted(*e.args))
            times.append(time.perf_counter() - start)
        row["call_s"] = statistics.median(times)
    except Exception as exc:  # noqa: BLE001
        row["call_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    for name in CHECKS:
        r = run_check(e, name, fn)
        row[name] = {"ok": bool(r.ok), "message": r.message}
    return row


def _cell(row, name) -> str:
    if "load_error" in row:
        return "-"
    return "yes" if row[name]["ok"] else "no"


def table(rows: list) -> str:
    lines = ["| entry | tool | load s | first call s | call ms | forward | grad | vmap | jvp |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        times = (f"{r['load_s']:.2f}", f"{r['first_call_s']:.2f}" if "first_call_s" in r
                 else "-", f"{1e3 * r['call_s']:.3f}" if "call_s" in r else "-") \
            if "load_s" in r else ("load failed", "-", "-")
        lines.append(f"| {r['entry']} | {r['tool']} | " + " | ".join(times) + " | "
                     + " | ".join(_cell(r, n) for n in CHECKS) + " |")
    notes = []
    for r in rows:
        for what in ("load_error", "call_error"):
            if what in r:
                notes.append(f"- {r['entry']}, {r['tool']}: {what.replace('_', ' ')}: "
                             f"{r[what]}")
        for n in CHECKS:
            if n in r and not r[n]["ok"] and r[n]["message"] and \
                    r.get("call_error", "") not in r[n]["message"]:
                notes.append(f"- {r['entry']}, {r['tool']}, {n}: {r[n]['message']}")
    return "\n".join(lines + ([""] + notes if notes else []))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", help="comma-separated entry names (default: every "
                                          "jax2tf_* and tfgraph_* entry)")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    import tensorflow as tf  # (imported before any timing: load times exclude the imports)
    import tf2jax
    folder = CORPUS / "tensorflow"
    names = args.entries.split(",") if args.entries else sorted(
        p.name for p in folder.iterdir() if p.name.startswith(("jax2tf_", "tfgraph_")))
    rows = []
    for name in names:
        e = corpus_entry.Entry(folder / name)
        for tool in TOOLS:
            rows.append(measure(e, tool, args.repeats))
    print(table(rows))
    print(f"\njax {jax.__version__}, tensorflow {tf.__version__}, tf2jax "
          f"{getattr(tf2jax, '__version__', '?')}, {os.cpu_count()} CPUs")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
