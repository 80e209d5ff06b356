"""TensorFlow's HLO for the corpus (producer "hlo", entries `tf_*`): `tf.function(jit_compile=
True)` models dumped with `XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_proto
--xla_dump_hlo_as_text`, as a TensorFlow user dumps them (issue 29).

Each model gives `tf_<model>_before_opt` and `tf_<model>_after_opt`, whose artifact is the
dump's `.hlo.pb` file as XLA wrote it (an `xla.HloProto` wrapping the module, file names of 130
characters: `module_0000.a_inference_f_10__XlaMustCompile_true_config_proto_<hash>_executor_
type_<hash>_.3.before_optimizations.hlo.pb`); the MLP gives `tf_mlp_compiler_ir` too, the text
`f.experimental_get_compiler_ir(*args)(stage="hlo")` returns. Weights are arguments (the
functions take every tensor explicitly, so the HLO's parameters are the function's arguments in
order), but in `tf_sgd_step`, whose `tf.Variable`s are parameters after the arguments and whose
new values are outputs after the function's, aliased to them (`input_output_alias`). Goldens: the jit-compiled function's outputs, and `tf.GradientTape` gradients of the
corpus loss through it. Runs in the gen-tf environment (tests/corpus/README.md).
"""

from __future__ import annotations

import json
import os
import pathlib
import zlib

import numpy as np

try:
    from producers import hlo_dumps  # under make_corpus.py
except ImportError:  # the child: tests/corpus/producers is on sys.path
    import hlo_dumps

MODELS = ("tf_mlp", "tf_cnn", "tf_cnn_train_step", "tf_topk", "tf_gru_while", "tf_sgd_step")
FLAGS = "--xla_dump_hlo_as_proto --xla_dump_hlo_as_text"


def build(root, only=None):
    hlo_dumps.build(root, only, "hlo_tf_models", MODELS, "hlo.pb", FLAGS)
    if only in (None, "tf_mlp", "tf_mlp_compiler_ir"):
        _compiler_ir_entry(root)


def _compiler_ir_entry(root):
    """tf_mlp_compiler_ir: the same MLP through experimental_get_compiler_ir (text, no dump)."""
    import shutil
    import subprocess
    import sys
    import tempfile
    entry = hlo_dumps.corpus_entry()
    with tempfile.TemporaryDirectory() as tmp:
        code = (f"import sys; sys.path.insert(0, {str(hlo_dumps.PRODUCERS_DIR)!r}); "
                f"import hlo_tf_models as m; m.child('tf_mlp', {tmp!r}, compiler_ir=True)")
        subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp,
                       env={k: v for k, v in os.environ.items() if k != "XLA_FLAGS"})
        out = pathlib.Path(tmp)
        info = json.loads((out / "info.json").read_text())
        with np.load(out / "golden.npz") as data:
            arrays = dict(data)
        args = [arrays[f"arg_{i}"] for i in range(len(info["arg_info"]))]
        outputs = [arrays[f"out_{i}"] for i in range(len(info["output_names"]))]
        grads = {i: arrays[f"grad_{i}"] for i in range(len(args)) if f"grad_{i}" in arrays}
        folder = pathlib.Path(root) / hlo_dumps.PRODUCER / "tf_mlp_compiler_ir"
        if folder.exists():
            shutil.rmtree(folder)
        text = (out / "compiler_ir.hlo").read_bytes()
        entry.write_entry(
            folder, producer=hlo_dumps.PRODUCER, model=info["model"], artifact_name="model.hlo",
            artifact=text, args=args, arg_info=info["arg_info"], outputs=outputs,
            projections=hlo_dumps.loss_projections(outputs), grads=grads,
            versions=info["versions"],
            export_call=f"{info['export_call']}; f.experimental_get_compiler_ir(*args)"
                        "(stage=\"hlo\")",
            output_names=info["output_names"], vmap_args=info["vmap_args"],
            extra={"hlo_stage": "before_opt", "hlo_producer": "tensorflow"})
        print(f"  hlo/{folder.name}: {len(text) / 1024:.1f} KiB", file=sys.stderr)


# ------------------------------------------------------------------ the child (gen-tf venv)

def _rng(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def _normal(rng, shape, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


def _models(tf, name):
    """(description, function of explicit tensors, [(arg name, role, value)], output names,
    vmap arg indices, notes)."""
    rng = _rng(name)
    if name == "tf_mlp":
        sizes = [16, 32, 32, 8]
        params = []
        for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
            params += [(f"dense{i}.kernel", "param", _normal(rng, (a, b), a ** -0.5)),
                       (f"dense{i}.bias", "param", _normal(rng, (b,), 0.1))]
        args = params + [("x", "input", _normal(rng, (4, 16)))]

        def f(*a):
            h = a[-1]
            for i in range(0, len(a) - 1, 2):
                h = tf.matmul(h, a[i]) + a[i + 1]
                h = tf.tanh(h) if i < len(a) - 3 else h
            return tf.nn.log_softmax(h)
        return ("MLP 16-32-32-8, tanh, log_softmax; weights as arguments", f, args,
                ["log_probs"], [len(args) - 1], "")
    if name in ("tf_cnn", "tf_cnn_train_step"):
        args = [("conv1.kernel", "param", _normal(rng, (3, 3, 3, 8), 0.3)),
                ("conv1.bias", "param", _normal(rng, (8,), 0.1)),
                ("conv2.kernel", "param", _normal(rng, (3, 3, 8, 8), 0.15)),
                ("conv2.bias", "param", _normal(rng, (8,), 0.1)),
                ("dense.kernel", "param", _normal(rng, (8, 5), 0.3)),
                ("dense.bias", "param", _normal(rng, (5,), 0.1)),
                ("images", "input", _normal(rng, (2, 8, 8, 3)))]

        def cnn(k1, b1, k2, b2, w, b, x):
            h = tf.nn.relu(tf.nn.conv2d(x, k1, 1, "SAME") + b1)
            h = tf.nn.max_pool2d(h, 2, 2, "VALID")
            h = tf.nn.relu(tf.nn.conv2d(h, k2, 1, "SAME") + b2)
            return tf.reduce_mean(h, axis=[1, 2]) @ w + b
        if name == "tf_cnn":
            return ("NHWC conv net: conv3x3-relu-maxpool2-conv3x3-relu-mean-dense; weights as "
                    "arguments", cnn, args, ["logits"], [6], "")
        labels = ("labels", "input", np.array([1, 3], np.int32))

        def step(k1, b1, k2, b2, w, b, x, y):
            params = [k1, b1, k2, b2, w, b]
            with tf.GradientTape() as tape:
                tape.watch(params)
                logits = cnn(*params, x)
                # (not sparse_softmax_cross_entropy_with_logits: TF's second derivative of
                # that op differs from finite differences by about 1%)
                picked = tf.gather(tf.nn.log_softmax(logits), y, axis=1, batch_dims=1)
                loss = -tf.reduce_mean(picked)
            return [loss] + tape.gradient(loss, params)
        return ("a training step of the conv net: cross-entropy loss and its gradient w.r.t. "
                "each weight (tf.GradientTape inside the jit-compiled function: max-pool's "
                "gradient is a select-and-scatter)", step, args + [labels],
                ["loss"] + [f"d_{n}" for n, _, _ in args[:6]], [6],
                "the outputs are gradients: the golden gradient of the corpus loss is "
                "second order (nested tf.GradientTape)")
    if name == "tf_topk":
        args = [("router.kernel", "param", _normal(rng, (6, 10), 0.5)),
                ("x", "input", _normal(rng, (5, 6)))]

        def f(w, x):
            scores = x @ w
            values, indices = tf.math.top_k(scores, k=3)
            ranked = tf.sort(scores, axis=-1, direction="DESCENDING")
            order = tf.argsort(x, axis=0, stable=True)
            return values, indices, ranked, order, x
        return ("top-3 routing scores (tf.math.top_k), a descending sort and a stable argsort; "
                "the input is returned too (a passthrough output: alias_passthrough_params)",
                f, args, ["values", "indices", "ranked", "order", "x"], [1], "")
    if name == "tf_gru_while":
        h, d, steps = 8, 6, 7
        args = [("gru.kernel", "param", _normal(rng, (d, 3 * h), d ** -0.5)),
                ("gru.recurrent_kernel", "param", _normal(rng, (h, 3 * h), h ** -0.5)),
                ("gru.bias", "param", _normal(rng, (3 * h,), 0.1)),
                ("xs", "input", _normal(rng, (steps, 3, d)))]

        def f(wx, wh, b, xs):
            def body(t, state, outs):
                x = xs[t]
                zx, rx, nx = tf.split(x @ wx + b, 3, axis=-1)
                zh, rh, nh = tf.split(state @ wh, 3, axis=-1)
                z, r = tf.sigmoid(zx + zh), tf.sigmoid(rx + rh)
                new = (1 - z) * tf.tanh(nx + r * nh) + z * state
                return t + 1, new, outs.write(t, new)
            outs = tf.TensorArray(tf.float32, size=steps)
            _, last, outs = tf.while_loop(lambda t, *_: t < steps, body,
                                          (tf.constant(0), tf.zeros((3, h)), outs),
                                          maximum_iterations=steps)
            return last, outs.stack()
        return ("GRU over 7 steps in a tf.while_loop (an HLO while over a tuple; after "
                "optimizations with known_trip_count); weights as arguments", f, args,
                ["last_state", "states"], [3], "")
    if name == "tf_sgd_step":
        args = [("x", "input", _normal(rng, (4, 6))), ("y", "input", _normal(rng, (4, 3))),
                ("w", "variable", _normal(rng, (6, 3), 0.4)),
                ("b", "variable", _normal(rng, (3,), 0.1))]

        def sgd(x, y, w, b):
            with tf.GradientTape() as tape:
                tape.watch([w, b])
                loss = tf.reduce_mean(tf.square(x @ w + b - y))
            gw, gb = tape.gradient(loss, [w, b])
            return loss, x, w - 0.1 * gw, b - 0.1 * gb
        return ("an SGD step on tf.Variables (w, b): the function returns (loss, x) and "
                "assigns the variables, so the HLO takes them as parameters after the "
                "arguments and returns their new values after the outputs, aliased to their "
                "parameters (input_output_alias)", sgd, args, ["loss", "x", "new_w", "new_b"],
                [0, 1], "the goldens of the HLO's outputs are (loss, x) and the variables' values "
                "after the step; the golden gradient differentiates that pure step")
    raise KeyError(name)


def _dumped(tf, name, fn, args):
    """The jit-compiled function to dump, and its outputs as the HLO returns them."""
    f = tf.function(fn, jit_compile=True)
    if name != "tf_sgd_step":
        outputs = f(*args)
        return f, list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    w, b = tf.Variable(args[2]), tf.Variable(args[3])

    @tf.function(jit_compile=True)
    def step(x, y):
        loss, x_out, new_w, new_b = fn(x, y, w, b)
        w.assign(new_w)
        b.assign(new_b)
        return loss, x_out
    loss, x_out = step(*args[:2])
    return step, [loss, x_out, w.read_value(), b.read_value()]


def child(name, out, compiler_ir=False):
    import tensorflow as tf
    import keras
    import platform
    model, fn, arg_specs, output_names, vmap_args, notes = _models(tf, name)
    args = [np.asarray(v) for _, _, v in arg_specs]
    dump = pathlib.Path(out) / "dump"
    before = set(os.listdir(dump)) if dump.exists() else set()
    f, outputs = _dumped(tf, name, fn, args)
    outputs = [np.asarray(o) for o in outputs]
    module = hlo_dumps.new_module(dump, before) if not compiler_ir else ""
    if compiler_ir:
        (pathlib.Path(out) / "compiler_ir.hlo").write_text(
            f.experimental_get_compiler_ir(*args)(stage="hlo"))
    projections = hlo_dumps.loss_projections(outputs)
    floats = [i for i, (_, _, v) in enumerate(arg_specs) if v.dtype.kind == "f"]

    # The gradient eagerly, by TF's own kernels: a tape around the jit-compiled `f` would pass
    # the while loop's TensorList accumulators across the XLA/TF boundary, which TF does not do,
    # and tf_cnn_train_step's second-order gradient jit-compiled as one function disagrees with
    # central differences by up to 2% where the eager one agrees. For tf_cnn_train_step this
    # tape is around the model's own.
    tensors = [tf.constant(a) for a in args]
    wrt = [tensors[i] for i in floats]
    with tf.GradientTape() as tape:
        tape.watch(wrt)
        loss = _loss(tf, fn(*tensors), projections)
    grads = tape.gradient(loss, wrt)
    grads = {i: np.asarray(g) for i, g in zip(floats, grads)}
    arg_info = [{"name": n, "role": r, "grad": i in grads} for i, (n, r, _) in enumerate(arg_specs)]
    hlo_dumps.write_golden(
        out, module=module, producer="tensorflow", args=args, arg_info=arg_info,
        outputs=outputs, grads=grads, model=model,
        export_call="f = tf.function(model, jit_compile=True); f(*args)",
        versions={"python": platform.python_version(), "numpy": np.__version__,
                  "tensorflow": tf.__version__, "keras": keras.__version__},
        output_names=output_names, vmap_args=vmap_args, notes=notes)


def _loss(tf, outputs, projections):
    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    total = tf.constant(0.0)
    for o, p in zip(outputs, projections):
        if p is not None:
            total += tf.reduce_sum(o * p)
    return total
