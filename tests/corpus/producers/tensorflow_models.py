"""TensorFlow models for the corpus (producer "tensorflow"): a tf.function saved as a
SavedModel, converted by TensorFlow's own SavedModel-to-StableHLO converter
(`tensorflow.compiler.mlir.tensorflow_to_stablehlo.python.pywrap_tensorflow_to_stablehlo.
savedmodel_to_stablehlo`, what TF 2.21 ships), and Keras 3 on the TensorFlow backend exported
with `model.export(path, format="tf_saved_model")` then the same converter.

The converter freezes tf.Variables into constants (the closed-over entries; their gradients are
in param_grads.npz); weights passed as signature inputs stay arguments. Inputs and outputs are
named with zero-padded positions ("a00_x", "output_00"); the converter orders @main's arguments
and results its own way, and the entry follows that order (see `module_order`).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ["KERAS_BACKEND"] = "tensorflow"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.compiler.mlir.tensorflow_to_stablehlo.python import (  # noqa: E402
    pywrap_tensorflow_to_stablehlo as tf2shlo)

import entry  # noqa: E402

PRODUCER = "tensorflow"
CONVERT = ("pywrap_tensorflow_to_stablehlo.savedmodel_to_stablehlo(saved_model_dir, "
           "['serving_default'], ['serve'], '')")


def rng_for(name):
    import zlib
    return np.random.default_rng(zlib.crc32(name.encode()))


def normal(rng, shape, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


def versions():
    import platform
    import keras
    return {"python": platform.python_version(), "numpy": np.__version__,
            "tensorflow": tf.__version__, "keras": keras.__version__}


def _as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def convert(module_or_dir, signature=None, input_arg_shapes: str = "") -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        if isinstance(module_or_dir, str):
            path = module_or_dir
        else:
            path = os.path.join(tmp, "saved_model")
            tf.saved_model.save(module_or_dir, path, signatures={"serving_default": signature})
        return tf2shlo.savedmodel_to_stablehlo(path, ["serving_default"], ["serve"],
                                               input_arg_shapes)


def module_order(artifact: bytes, n_args: int, n_outputs: int):
    """(argument positions, output positions) in the converted @main's order.

    The converter orders @main's arguments and results as it pleases (neither by the
    signature's order nor by name); its `tf.entry_function` attribute keeps the SavedModel
    tensor names in @main's order ("serving_default_a03_var:0,...", "PartitionedCall:2,...":
    structured outputs are numbered in sorted-key order). The artifact is MLIR bytecode and
    this venv has no MLIR bindings, so the two strings are read from the bytecode's string
    table; every position must be found exactly once."""
    lists = [m.decode() for m in re.findall(rb"[A-Za-z_][\w/]*:\d+(?:,[A-Za-z_][\w/]*:\d+)*",
                                            artifact)]
    inputs = [m for m in lists if m.startswith("serving_default_")]
    outputs = [m for m in lists if not m.startswith("serving_default_")
               and len(m.split(",")) == n_outputs]
    if len(inputs) != 1 or len(outputs) != 1:
        raise RuntimeError(f"cannot read the converter's signature order: {lists}")
    arg_order = []
    for item in inputs[0].split(","):
        tensor = item[len("serving_default_"):].rsplit(":", 1)[0]
        match = re.fullmatch(r"a(\d\d)_.*", tensor)
        arg_order.append(int(match.group(1)) if match else 0)
    out_order = [int(item.rsplit(":", 1)[1]) for item in outputs[0].split(",")]
    if sorted(arg_order) != list(range(n_args)) or sorted(out_order) != list(range(n_outputs)):
        raise RuntimeError(f"incomplete signature order {arg_order} / {out_order}")
    return arg_order, out_order


def add_entry(root, name, *, model, fn, args, arg_names, roles, variables=None,
              artifact=None, vmap_roles=("input",), notes="", export_call=None, tolerance=None):
    """fn(*args) -> tensor or tuple; variables: {path: tf.Variable} that fn closes over."""
    variables = variables or {}
    args = [np.asarray(a) for a in args]
    if artifact is None:
        specs = [tf.TensorSpec(a.shape, tf.as_dtype(a.dtype), name=f"a{i:02d}_{n}")
                 for i, (a, n) in enumerate(zip(args, arg_names))]

        class Holder(tf.Module):
            pass
        holder = Holder()
        holder.vars = list(variables.values())

        @tf.function(input_signature=specs)
        def serve(*xs):
            return {f"output_{i:02d}": o for i, o in enumerate(_as_list(fn(*xs)))}
        holder.serve = serve
        artifact = convert(holder, serve)
        export_call = (f"tf.saved_model.save(module, dir, signatures={{'serving_default': "
                       f"tf.function(f, input_signature=specs)}}); {CONVERT}")

    tensors = [tf.constant(a) for a in args]
    float_idx = [i for i, a in enumerate(args) if entry.is_float(a.dtype)]
    with tf.GradientTape(persistent=True) as tape:
        for i in float_idx:
            tape.watch(tensors[i])
        outputs = _as_list(fn(*tensors))
        outputs_np = [o.numpy() for o in outputs]
        projections = entry.loss_projections(outputs_np)
        loss = tf.add_n([tf.reduce_sum(tf.cast(o, tf.float32) * p)
                         for o, p in zip(outputs, projections) if p is not None])
    grads = tape.gradient(loss, [tensors[i] for i in float_idx])
    var_grads = tape.gradient(loss, list(variables.values())) if variables else []
    grads = {i: (np.zeros_like(args[i]) if g is None else tf.convert_to_tensor(g).numpy())
             for i, g in zip(float_idx, grads)}
    arg_info = [{"name": n, "role": r, "grad": i in grads}
                for i, (n, r) in enumerate(zip(arg_names, roles))]
    # Everything in the converted module's own order.
    arg_order, out_order = module_order(artifact, len(args), len(outputs_np))
    args = [args[i] for i in arg_order]
    arg_info = [arg_info[i] for i in arg_order]
    roles = [roles[i] for i in arg_order]
    grads = {j: grads[i] for j, i in enumerate(arg_order) if i in grads}
    outputs_np = [outputs_np[k] for k in out_order]
    projections = [projections[k] for k in out_order]
    folder = root / PRODUCER / name
    extra = {"grad_by": "tf.GradientTape"}
    if variables:
        extra["closed_params"] = {
            "values": "params.npz", "grads": "param_grads.npz", "paths": list(variables),
            "note": "the producer's gradient of the same loss w.r.t. each tf.Variable the "
                    "converter froze into a constant, keyed by variable path"}
    vmap_args = [i for i, r in enumerate(roles) if r in vmap_roles] or None
    entry.write_entry(folder, producer=PRODUCER, model=model, artifact_name="model.mlir.bc",
                      artifact=artifact, args=args, arg_info=arg_info, outputs=outputs_np,
                      projections=projections, grads=grads, versions=versions(),
                      export_call=export_call, tolerance=tolerance, vmap_args=vmap_args,
                      notes=notes, extra=extra)
    for stale in ("params.npz", "param_grads.npz"):
        (folder / stale).unlink(missing_ok=True)
    if variables:
        np.savez_compressed(folder / "params.npz",
                            **{k: v.numpy() for k, v in variables.items()})
        np.savez_compressed(folder / "param_grads.npz",
                            **{k: (np.zeros(v.shape, v.dtype.as_numpy_dtype) if g is None
                                   else tf.convert_to_tensor(g).numpy())
                                for (k, v), g in zip(variables.items(),
                                                                        var_grads)})
    size = sum(p.stat().st_size for p in folder.iterdir())
    print(f"  {PRODUCER}/{name}: {len(args)} args, {len(outputs_np)} outputs, "
          f"{size / 1024:.0f} KiB", file=sys.stderr)


# ---- models ------------------------------------------------------------------------------

def layer_norm(x, scale, bias):
    mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) * tf.math.rsqrt(var + 1e-5) * scale + bias


def build(root, only=None):
    def want(name):
        return only in (None, name)

    # Exact-GELU MLP, variables frozen by the converter.
    if want("tf_gelu_mlp_closed"):
        rng = rng_for("tf_gelu_mlp")
        variables = {"dense0/kernel": tf.Variable(normal(rng, (8, 24), 0.5)),
                     "dense0/bias": tf.Variable(np.zeros(24, np.float32)),
                     "dense1/kernel": tf.Variable(normal(rng, (24, 4), 0.3)),
                     "dense1/bias": tf.Variable(np.zeros(4, np.float32))}
        v = variables

        def gelu_mlp(x):
            h = tf.nn.gelu(x @ v["dense0/kernel"] + v["dense0/bias"], approximate=False)
            return tf.nn.log_softmax(h @ v["dense1/kernel"] + v["dense1/bias"])
        x = normal(rng, (6, 8), 1.5)
        x[4:] = 0  # zero-padded rows: exactly-zero pre-activations with zero-initialised biases
        add_entry(root, "tf_gelu_mlp_closed", model="TF MLP with exact GELU "
                  "(tf.nn.gelu(approximate=False)), zero biases, zero-padded rows; tf.Variables "
                  "frozen into constants by the converter", fn=gelu_mlp, args=[x],
                  arg_names=["x"], roles=["input"], variables=variables)

    # A CNN with weights as signature inputs.
    if want("tf_cnn"):
        rng = rng_for("tf_cnn")
        weights = {"k1": normal(rng, (3, 3, 3, 8), 0.3), "b1": normal(rng, (8,), 0.1),
                   "mean": normal(rng, (8,), 0.2), "var": 0.5 + rng.uniform(0, 1, 8).astype(np.float32),
                   "gamma": 1 + normal(rng, (8,), 0.1), "beta": normal(rng, (8,), 0.1),
                   "k2": normal(rng, (3, 3, 8, 8), 0.2), "w": normal(rng, (8, 5), 0.3)}
        names = list(weights)

        def cnn(*a):
            p = dict(zip(names, a[:len(names)]))
            x = a[len(names)]
            h = tf.nn.conv2d(x, p["k1"], 1, "SAME") + p["b1"]
            h = tf.nn.relu(tf.nn.batch_normalization(h, p["mean"], p["var"], p["beta"],
                                                     p["gamma"], 1e-3))
            h = tf.nn.max_pool2d(h, 2, 2, "VALID")
            h = tf.nn.elu(tf.nn.conv2d(h, p["k2"], 1, "SAME"))
            return tf.nn.softmax(tf.reduce_mean(h, [1, 2]) @ p["w"])
        images = normal(rng, (2, 8, 8, 3))
        add_entry(root, "tf_cnn", model="TF CNN (conv2d, batch_normalization with fixed "
                  "statistics, max_pool2d, elu, softmax); weights as signature inputs",
                  fn=cnn, args=list(weights.values()) + [images], arg_names=names + ["images"],
                  roles=["param"] * len(names) + ["input"])

    # Attention with a padding mask, weights as inputs.
    if want("tf_attention_mask"):
        rng = rng_for("tf_attention")
        d, vocab = 16, 20
        weights = {"embed": normal(rng, (vocab, d), 0.5), "wq": normal(rng, (d, d), 0.25),
                   "wk": normal(rng, (d, d), 0.25), "wv": normal(rng, (d, d), 0.25),
                   "ln_s": 1 + normal(rng, (d,), 0.1), "ln_b": normal(rng, (d,), 0.1),
                   "wo": normal(rng, (d, vocab), 0.25)}
        names = list(weights)

        def attention(*a):
            p = dict(zip(names, a[:len(names)]))
            tokens, pad = a[len(names):]
            x = tf.gather(p["embed"], tokens)
            q, k, v = x @ p["wq"], x @ p["wk"], x @ p["wv"]
            logits = tf.einsum("bqd,bkd->bqk", q, k) / np.sqrt(d)
            mask = tf.logical_and(tf.cast(tf.linalg.band_part(tf.ones((7, 7)), -1, 0), tf.bool)[None],
                                  pad[:, None, :])
            logits = tf.where(mask, logits, tf.fill(tf.shape(logits), -1e9))
            x = layer_norm(x + tf.nn.softmax(logits) @ v, p["ln_s"], p["ln_b"])
            return x @ p["wo"]
        tokens = rng.integers(0, vocab, (2, 7)).astype(np.int32)
        pad = np.arange(7)[None] < np.array([[7], [4]])
        add_entry(root, "tf_attention_mask", model="TF single-head causal attention with a "
                  "padding mask (gather, einsum, tf.where, layer norm); weights as inputs",
                  fn=attention, args=list(weights.values()) + [tokens, pad],
                  arg_names=names + ["tokens", "pad_mask"],
                  roles=["param"] * len(names) + ["input", "input"])

    # Special functions.
    if want("tf_special"):
        rng = rng_for("tf_special")

        def special(x, a):
            u = tf.clip_by_value(0.5 * (1 + tf.math.erf(x / np.sqrt(2))), 1e-6, 1 - 1e-6)
            return (tf.math.lgamma(a + tf.abs(x)), tf.math.digamma(a + tf.abs(x)),
                    tf.math.erfinv(2 * u - 1), tf.math.ndtri(u),
                    tf.math.special.bessel_i0e(x), tf.math.erfc(x))
        x = normal(rng, (3, 5))
        a = 0.5 + rng.uniform(0, 3, (5,)).astype(np.float32)
        add_entry(root, "tf_special", model="TF special functions: erf, lgamma, digamma, "
                  "erfinv, ndtri, bessel_i0e, erfc", fn=special, args=[x, a],
                  arg_names=["x", "a"], roles=["input", "param"])

    # A data-dependent while loop (Newton's method to convergence), variables frozen.
    if want("tf_newton_while_closed"):
        rng = rng_for("tf_newton_while")
        variables = {"scale": tf.Variable(np.float32(1.7))}

        def newton(y):
            target = variables["scale"] * y

            def cond(i, x):
                return tf.logical_and(i < 100, tf.reduce_max(tf.abs(x * x - target)) > 1e-5)

            def body(i, x):
                return i + 1, 0.5 * (x + target / x)
            i, x = tf.while_loop(cond, body, (tf.constant(0), tf.ones_like(y) + target))
            return x, i
        y = rng.uniform(0.5, 30, (6,)).astype(np.float32)
        add_entry(root, "tf_newton_while_closed", model="Newton square root in tf.while_loop "
                  "until converged (data-dependent trip count); tf.Variable frozen",
                  fn=newton, args=[y], arg_names=["y"], roles=["input"], variables=variables)

    # Keras 3 on the TensorFlow backend, exported by Keras itself. (A Keras LSTM exported
    # this way does not convert: its tf.while_loop carries a TensorList, "'mhlo.while' op
    # operand #2 must be variadic of ranked tensor ... but got
    # 'tensor<!tf_type.variant<tensor<?x8xf32>>>'"; see tests/corpus/README.md.)
    for name, shapes in (("keras_tf_cnn_closed", "2,8,8,3"), ("keras_tf_cnn_dynamic_closed", "")):
        if not want(name):
            continue
        import keras
        assert keras.backend.backend() == "tensorflow", keras.backend.backend()
        keras.utils.set_random_seed(3)
        model = keras.Sequential([keras.Input((8, 8, 3)),
                                  keras.layers.Conv2D(8, 3, padding="same"),
                                  keras.layers.BatchNormalization(),
                                  keras.layers.Activation("swish"),
                                  keras.layers.DepthwiseConv2D(3, strides=2, padding="same"),
                                  keras.layers.LayerNormalization(),
                                  keras.layers.GlobalAveragePooling2D(),
                                  keras.layers.Dense(4, activation="softmax")])
        images = normal(rng_for("keras_tf_cnn"), (2, 8, 8, 3))
        variables = {v.path: v.value for v in model.variables}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "export")
            model.export(path, format="tf_saved_model", verbose=False)
            artifact = convert(path, input_arg_shapes=shapes)
        call = CONVERT.replace("'')", f"{shapes!r})")
        how = ("the batch fixed by the converter's input_arg_shapes_str='2,8,8,3'" if shapes else
               "the exported batch dimension left dynamic (the converter keeps shape-dialect ops)")
        add_entry(root, name, model="Keras 3 (TensorFlow backend) CNN: Conv2D, "
                  "BatchNormalization, swish, DepthwiseConv2D, LayerNormalization, softmax Dense; "
                  f"exported by model.export, weights frozen by the converter; {how}",
                  fn=lambda x: model(x, training=False), args=[images], arg_names=["images"],
                  roles=["input"], variables=variables, artifact=artifact,
                  export_call=f"model.export(dir, format='tf_saved_model'); {call}")
