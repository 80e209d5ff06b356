"""jax2tf SavedModels for the corpus (producer "tensorflow", entries `jax2tf_*`): a jax function
converted by `jax.experimental.jax2tf.convert` (native serialization: one XlaCallModule op
holding the StableHLO module), its weights held in tf.Variables of a tf.Module, saved with
`tf.saved_model.save(module, "saved_model", signatures={"serving_default": ...})`. The entry's
artifact is that folder, as TensorFlow wrote it (`saved_model.pb`, `variables/`).

The goldens are TensorFlow's: the SavedModel reloaded with `tf.saved_model.load` and its
signature run; the gradients come from `tf.GradientTape` through that signature (jax2tf's
`with_gradient=True` registers the jax VJP as the op's gradient) w.r.t. the inputs and every
variable, the variables' keyed by their object paths (`params/w1`: what `Function.params` names
them) in `weight_grads.npz`. Inputs are the signature's, sorted by name; outputs the
signature's dict, sorted by key.

Generator environment: `gen-jax2tf` (requirements-jax2tf.txt: tensorflow-cpu and the jax the
runtime pins, in one venv, as jax2tf needs).
"""

from __future__ import annotations

import os
import platform
import shutil
import zlib
from typing import NamedTuple, Optional

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ["KERAS_BACKEND"] = "jax"  # (Keras 3 exports a JAX-backend model through jax2tf)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from jax.experimental import jax2tf  # noqa: E402

import entry  # noqa: E402
from producers import saved_model_goldens  # noqa: E402

PRODUCER = "tensorflow"
ARTIFACT = "saved_model"
CASES = {}


class Case(NamedTuple):
    """One entry: `fn(params, *inputs)` (inputs in sorted order) returning the signature's
    dict; `specs` the inputs' tf.TensorSpecs by name; `polymorphic_shapes` each input's shape
    by name (jax2tf's syntax) or None; `platforms` jax2tf's native_serialization_platforms
    (None: the one it runs on). A Keras case has `keras_model` instead of params, fn and specs:
    Keras 3 on the JAX backend exports it through jax2tf itself (`model.export`)."""
    params: Optional[dict]
    fn: object
    inputs: dict
    specs: Optional[dict]
    model: str
    polymorphic_shapes: Optional[dict] = None
    platforms: Optional[tuple] = None
    keras_model: object = None
    closed: bool = False  # the params given to the converted function as arrays: TF Consts
    # instead of one converted fn: compose(convert, params, *inputs) -> the signature's dict,
    # calling several jax2tf-converted functions (convert(f): jax2tf.convert with the options)
    compose: object = None


def case(name):
    def register(fn):
        CASES[name] = fn
        return fn
    return register


def rng_for(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def versions() -> dict:
    return {"python": platform.python_version(), "numpy": np.__version__,
            "tensorflow": tf.__version__, "jax": jax.__version__}


def _params(rng, sizes) -> dict:
    """Dense layers' weights and (non-zero) biases, as float32."""
    params = {}
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:]), start=1):
        params[f"w{i}"] = (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32)
        params[f"b{i}"] = (0.1 * rng.standard_normal(n_out)).astype(np.float32)
    return params


def _mlp(params, x):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


@case("jax2tf_mlp")
def _jax2tf_mlp(rng):
    """A two-layer MLP on a fixed batch: variables as the weights, one input, one output."""
    params = _params(rng, (4, 8, 3))

    def fn(params, x):
        return {"logits": _mlp(params, x)}
    inputs = {"x": rng.standard_normal((2, 4)).astype(np.float32)}
    specs = {"x": tf.TensorSpec([2, 4], tf.float32)}
    return Case(params, fn, inputs, specs, "Dense-tanh-Dense, batch 2")


@case("jax2tf_mlp_poly")
def _jax2tf_mlp_poly(rng):
    """The MLP with a polymorphic batch (`(b, ...)`), two inputs and two outputs."""
    params = _params(rng, (4, 6, 2))

    def fn(params, scale, x):  # (the inputs in sorted order)
        logits = _mlp(params, x) * scale
        return {"logits": logits, "norm": jnp.sqrt(jnp.sum(logits * logits, axis=-1))}
    inputs = {"x": rng.standard_normal((3, 4)).astype(np.float32),
              "scale": (1.0 + 0.1 * rng.standard_normal((3, 1))).astype(np.float32)}
    specs = {"x": tf.TensorSpec([None, 4], tf.float32),
             "scale": tf.TensorSpec([None, 1], tf.float32)}
    return Case(params, fn, inputs, specs,
                "Dense-tanh-Dense times a per-row scale, and the rows' norms; batch polymorphic",
                polymorphic_shapes={"x": "(b, 4)", "scale": "(b, 1)"})


@case("jax2tf_mlp_consts")
def _jax2tf_mlp_consts(rng):
    """The MLP with its weights given to the converted function as numpy arrays: the graph
    holds them as Const ops (no variables)."""
    params = _params(rng, (4, 5, 3))

    def fn(params, x):
        return {"logits": _mlp(params, x)}
    inputs = {"x": rng.standard_normal((2, 4)).astype(np.float32)}
    specs = {"x": tf.TensorSpec([2, 4], tf.float32)}
    return Case(params, fn, inputs, specs, "Dense-tanh-Dense, the weights as TF constants",
                closed=True)


@case("jax2tf_two_calls")
def _jax2tf_two_calls(rng):
    """Two converted functions in one tf.function: an encoder, then a head taking the
    encoder's features and the input again; the signature returns both calls' results (two
    XlaCallModule ops, each with its own variables; both batch polymorphic, so the chained
    @main passes `?` shapes on)."""
    params = _params(rng, (4, 6, 3))

    def encoder(params, x):
        return jnp.tanh(x @ params["w1"] + params["b1"])

    def head(params, h, x):
        return h @ params["w2"] + params["b2"] + jnp.sum(x, axis=-1, keepdims=True)

    def compose(convert, params, x):
        h = convert(encoder, [None, "(b, 4)"])({k: params[k] for k in ("w1", "b1")}, x)
        logits = convert(head, [None, "(b, 6)", "(b, 4)"])(
            {k: params[k] for k in ("w2", "b2")}, h, x)
        return {"features": h, "logits": logits}
    inputs = {"x": rng.standard_normal((2, 4)).astype(np.float32)}
    specs = {"x": tf.TensorSpec([None, 4], tf.float32)}
    return Case(params, None, inputs, specs, "an encoder and a head converted apart, composed "
                "in one tf.function; batch polymorphic", compose=compose)


@case("jax2tf_cpu_cuda")
def _jax2tf_cpu_cuda(rng):
    """One dense layer and a sine, lowered for CPU and CUDA: the module takes a platform
    index first, which the XlaCallModule op passes itself."""
    params = _params(rng, (3, 2))

    def fn(params, x):
        return {"y": jnp.sin(x @ params["w1"] + params["b1"])}
    inputs = {"x": rng.standard_normal((2, 3)).astype(np.float32)}
    specs = {"x": tf.TensorSpec([2, 3], tf.float32)}
    return Case(params, fn, inputs, specs, "Dense-sin lowered for cpu and cuda",
                platforms=("cpu", "cuda"))


@case("jax2tf_keras_bn")
def _jax2tf_keras_bn(rng):
    """A Keras 3 model on the JAX backend, `model.export(format="tf_saved_model")`: its
    batch norm's statistics are variables too, and the module also returns their (inference
    mode: unchanged) values, which the signature leaves out."""
    import keras
    keras.utils.set_random_seed(int(rng.integers(2**31)))
    model = keras.Sequential([keras.Input((6,), name="x"),
                              keras.layers.Dense(5, activation="gelu"),
                              keras.layers.BatchNormalization(), keras.layers.Dense(2)])
    batch_norm = model.layers[1]
    batch_norm.moving_mean.assign(0.1 * rng.standard_normal(5).astype(np.float32))
    batch_norm.moving_variance.assign((0.5 + rng.random(5)).astype(np.float32))
    inputs = {"x": rng.standard_normal((3, 6)).astype(np.float32)}
    return Case(None, None, inputs, None, "Keras Dense-gelu-BatchNorm-Dense (JAX backend)",
                keras_model=model)


@case("jax2tf_scan_rnn")
def _jax2tf_scan_rnn(rng):
    """An Elman RNN over the time axis with `lax.scan` (the module holds a `while` loop),
    then a dense head on the last state; variables as the weights."""
    hidden, features = 5, 3
    params = {"wx": (rng.standard_normal((features, hidden)) / 2).astype(np.float32),
              "wh": (rng.standard_normal((hidden, hidden)) / 3).astype(np.float32),
              "b": (0.1 * rng.standard_normal(hidden)).astype(np.float32),
              "wo": (rng.standard_normal((hidden, 2)) / 2).astype(np.float32)}

    def fn(params, x):  # x: [batch, time, features]
        def step(h, x_t):
            h = jnp.tanh(x_t @ params["wx"] + h @ params["wh"] + params["b"])
            return h, h
        h0 = jnp.zeros((x.shape[0], hidden), x.dtype)
        last, states = jax.lax.scan(step, h0, jnp.swapaxes(x, 0, 1))
        return {"logits": last @ params["wo"], "states": jnp.swapaxes(states, 0, 1)}
    inputs = {"x": rng.standard_normal((2, 4, features)).astype(np.float32)}
    specs = {"x": tf.TensorSpec([2, 4, features], tf.float32)}
    return Case(params, fn, inputs, specs, "tanh RNN by lax.scan over 4 steps, a dense head")


def _keras_seeded(rng):
    import keras
    keras.utils.set_random_seed(int(rng.integers(2**31)))
    return keras


@case("jax2tf_keras_cnn")
def _jax2tf_keras_cnn(rng):
    """A Keras 3 CNN on the JAX backend, `model.export(format="tf_saved_model")`: two
    convolutions, pooling, a dense head."""
    keras = _keras_seeded(rng)
    model = keras.Sequential([
        keras.Input((8, 8, 2), name="images"),
        keras.layers.Conv2D(4, 3, activation="relu", padding="same"),
        keras.layers.MaxPooling2D(2),
        keras.layers.Conv2D(4, 3, activation="swish"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(3)])
    inputs = {"images": rng.standard_normal((2, 8, 8, 2)).astype(np.float32)}
    return Case(None, None, inputs, None,
                "Keras Conv-relu-MaxPool-Conv-swish-GAP-Dense (JAX backend)", keras_model=model)


@case("jax2tf_keras_transformer")
def _jax2tf_keras_transformer(rng):
    """A Keras 3 transformer block on the JAX backend, exported through jax2tf: multi-head
    self-attention and a feed-forward layer, each with a residual and a layer norm, then a
    mean over the sequence and a dense head."""
    keras = _keras_seeded(rng)
    tokens = keras.Input((5, 8), name="tokens")
    attended = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)(tokens, tokens)
    h = keras.layers.LayerNormalization()(tokens + attended)
    ff = keras.layers.Dense(8)(keras.layers.Dense(16, activation="gelu")(h))
    h = keras.layers.LayerNormalization()(h + ff)
    out = keras.layers.Dense(2)(keras.layers.GlobalAveragePooling1D()(h))
    model = keras.Model(tokens, out)
    inputs = {"tokens": rng.standard_normal((2, 5, 8)).astype(np.float32)}
    return Case(None, None, inputs, None, "Keras transformer block: 2-head self-attention, "
                "gelu feed-forward, layer norms, pooled dense head (JAX backend)",
                keras_model=model)


def _save(folder, c: Case):
    if c.keras_model is not None:
        path = folder / ARTIFACT
        shutil.rmtree(path, ignore_errors=True)
        c.keras_model.export(str(path), format="tf_saved_model")
        return path
    return _save_module(folder, c)


def _save_module(folder, c: Case):
    """The case saved as a SavedModel in `folder`."""
    module = tf.Module()
    if not c.closed:
        module.params = {k: tf.Variable(v) for k, v in c.params.items()}
    weights = c.params if c.closed else module.params
    specs = c.specs
    names = sorted(specs)
    # (polymorphic_shapes: the weights' first, None: static; then the inputs' in order)
    poly = None if c.polymorphic_shapes is None else \
        [None] + [c.polymorphic_shapes[n] for n in names]
    def convert(fn, polymorphic_shapes=None):
        return jax2tf.convert(fn, with_gradient=True, polymorphic_shapes=polymorphic_shapes,
                              native_serialization_platforms=c.platforms)
    converted = convert(c.fn, poly) if c.compose is None else None

    @tf.function(autograph=False, input_signature=[tf.TensorSpec(specs[n].shape, specs[n].dtype,
                                                                 name=n) for n in names])
    def serve(*args):
        if c.compose is not None:
            return c.compose(convert, weights, *args)
        return converted(weights, *args)
    module.serve = serve
    path = folder / ARTIFACT
    shutil.rmtree(path, ignore_errors=True)
    tf.saved_model.save(module, str(path), signatures={"serving_default": serve})
    return path


def write(root, name: str) -> None:
    c = CASES[name](rng_for(name))
    inputs = c.inputs
    folder = root / PRODUCER / name
    folder.mkdir(parents=True, exist_ok=True)
    path = _save(folder, c)
    keys, outs, projections, input_grads, weight_grads = saved_model_goldens.goldens(
        path, inputs)
    (folder / "weight_grads.npz").unlink(missing_ok=True)
    if weight_grads:
        np.savez_compressed(folder / "weight_grads.npz", **weight_grads)
    names = sorted(inputs)
    entry.write_entry(
        folder, producer=PRODUCER, model=c.model, artifact_name=ARTIFACT, artifact=None,
        args=[inputs[n] for n in names],
        arg_info=[{"name": n, "role": "input", "grad": True} for n in names],
        outputs=outs, projections=projections, grads=input_grads, versions=versions(),
        export_call=(("model.export('saved_model', format='tf_saved_model')  # Keras 3, "
                      "KERAS_BACKEND=jax") if c.keras_model is not None else
                     ("tf.saved_model.save(module, 'saved_model', signatures={"
                      "'serving_default': tf.function(jax2tf.convert(fn, with_gradient=True, "
                      f"polymorphic_shapes={c.polymorphic_shapes!r}, "
                      f"native_serialization_platforms={c.platforms!r}))}})")),
        function="serving_default", output_names=keys, vmap_args=list(range(len(names))),
        notes="outputs are the signature's dict, sorted by key",
        extra={"weight_grads": "weight_grads.npz", "weights_read": sorted(weight_grads)}
        if weight_grads else {})


def build(root, only=None) -> None:
    names = [only] if only else list(CASES)
    for name in names:
        if name not in CASES:
            raise SystemExit(f"no jax2tf entry {name!r}; entries: {', '.join(CASES)}")
        write(root, name)
