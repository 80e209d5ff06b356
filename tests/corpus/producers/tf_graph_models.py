"""SavedModels TensorFlow computes itself for the corpus (producer "tensorflow", entries
`tfgraph_*`): no XlaCallModule, the signature's graph of TensorFlow ops, which shlo2jax
reads through TensorFlow's XLA bridge (`shlo2jax[tf]`). A Keras 3 model on the TensorFlow
backend exported with `model.export(path, format="tf_saved_model", input_signature=...)`,
and a tf.function of TensorFlow ops over a tf.Module's variables saved with
`tf.saved_model.save`. The bridge compiles static shapes: each signature's inputs have
fixed shapes.

The goldens are TensorFlow's, as for the jax2tf entries (`saved_model_goldens`); the entries'
meta.json says `extra.requires: "tensorflow"` (the corpus tests skip them without it).

Generator environment: `gen-tf` (requirements-tf.txt: TensorFlow with Keras 3).
"""

from __future__ import annotations

import os
import platform
import shutil
import zlib
from typing import NamedTuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ["KERAS_BACKEND"] = "tensorflow"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import entry  # noqa: E402
from producers import saved_model_goldens  # noqa: E402

PRODUCER = "tensorflow"
ARTIFACT = "saved_model"
CASES = {}


class Case(NamedTuple):
    """One entry: `save(path)` writes the SavedModel; `inputs` the signature's, by name."""
    save: object
    inputs: dict
    model: str
    export_call: str


def case(name):
    def register(fn):
        CASES[name] = fn
        return fn
    return register


def versions() -> dict:
    import keras
    return {"python": platform.python_version(), "numpy": np.__version__,
            "tensorflow": tf.__version__, "keras": keras.__version__}


@case("tfgraph_keras_mlp")
def _tfgraph_keras_mlp(rng):
    """A Keras 3 model on the TensorFlow backend: Dense-gelu, a layer norm, Dense."""
    import keras
    keras.utils.set_random_seed(int(rng.integers(2**31)))
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(5, activation="gelu"),
                              keras.layers.LayerNormalization(), keras.layers.Dense(2)])
    inputs = {"x": rng.standard_normal((3, 6)).astype(np.float32)}

    def save(path):
        model.export(str(path), format="tf_saved_model",
                     input_signature=[tf.TensorSpec((3, 6), tf.float32, name="x")])
    return Case(save, inputs, "Keras Dense-gelu-LayerNorm-Dense (TensorFlow backend)",
                "model.export('saved_model', format='tf_saved_model', input_signature=["
                "tf.TensorSpec((3, 6), tf.float32, name='x')])  # KERAS_BACKEND=tensorflow")


@case("tfgraph_function")
def _tfgraph_function(rng):
    """A tf.function of TensorFlow ops over a tf.Module's variables: two inputs, two
    outputs (a gated dense layer with softplus, and the rows' log-sum-exp)."""
    module = tf.Module()
    module.params = {
        "w": tf.Variable((rng.standard_normal((4, 3)) / 2).astype(np.float32)),
        "gate": tf.Variable((rng.standard_normal((4, 3)) / 2).astype(np.float32)),
        "b": tf.Variable((0.1 * rng.standard_normal(3)).astype(np.float32))}
    specs = [tf.TensorSpec((2, 4), tf.float32, name="x"),
             tf.TensorSpec((2, 1), tf.float32, name="scale")]

    @tf.function(input_signature=specs)
    def serve(x, scale):
        p = module.params
        h = tf.nn.softplus(tf.matmul(x, p["w"]) + p["b"]) * tf.sigmoid(tf.matmul(x, p["gate"]))
        return {"y": h * scale, "lse": tf.reduce_logsumexp(h, axis=-1)}
    module.serve = serve
    inputs = {"x": rng.standard_normal((2, 4)).astype(np.float32),
              "scale": (1.0 + 0.1 * rng.standard_normal((2, 1))).astype(np.float32)}

    def save(path):
        tf.saved_model.save(module, str(path), signatures={"serving_default": serve})
    return Case(save, inputs, "tf.function: softplus(x W + b) * sigmoid(x G), scaled; "
                "log-sum-exp of the rows",
                "tf.saved_model.save(module, 'saved_model', signatures={'serving_default': "
                "tf.function(serve, input_signature=[...])})")


def write(root, name: str) -> None:
    c = CASES[name](np.random.default_rng(zlib.crc32(name.encode())))
    folder = root / PRODUCER / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ARTIFACT
    shutil.rmtree(path, ignore_errors=True)
    c.save(path)
    keys, outs, projections, input_grads, weight_grads = saved_model_goldens.goldens(
        path, c.inputs)
    (folder / "weight_grads.npz").unlink(missing_ok=True)
    np.savez_compressed(folder / "weight_grads.npz", **weight_grads)
    names = sorted(c.inputs)
    entry.write_entry(
        folder, producer=PRODUCER, model=c.model, artifact_name=ARTIFACT, artifact=None,
        args=[c.inputs[n] for n in names],
        arg_info=[{"name": n, "role": "input", "grad": True} for n in names],
        outputs=outs, projections=projections, grads=input_grads, versions=versions(),
        export_call=c.export_call, function="serving_default", output_names=keys,
        vmap_args=list(range(len(names))),
        notes="outputs are the signature's dict, sorted by key; read through TensorFlow's "
              "XLA bridge",
        extra={"weight_grads": "weight_grads.npz", "weights_read": sorted(weight_grads),
               "requires": "tensorflow"})


def build(root, only=None) -> None:
    names = [only] if only else list(CASES)
    for name in names:
        if name not in CASES:
            raise SystemExit(f"no TensorFlow-graph entry {name!r}; entries: {', '.join(CASES)}")
        write(root, name)
