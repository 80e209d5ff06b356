"""Keras 3 models on the JAX backend for the corpus (producer "keras"), exported with
jax.export of the model's stateless call: the variables as arguments (keyed by variable path)
or closed over (baked into the artifact as constants)."""

from __future__ import annotations

import os

os.environ["KERAS_BACKEND"] = "jax"

import keras  # noqa: E402
import numpy as np  # noqa: E402

from producers import jax_common as jc  # noqa: E402

PRODUCER = "keras"


def stateless(model):
    """(variables keyed by path, f(variables, *inputs)) around model.stateless_call."""
    trainable = [v.path for v in model.trainable_variables]
    non_trainable = [v.path for v in model.non_trainable_variables]
    params = {v.path: np.asarray(v.value) for v in model.variables}

    def fn(params, *inputs):
        out, _ = model.stateless_call([params[p] for p in trainable],
                                      [params[p] for p in non_trainable],
                                      *inputs, training=False)
        return out
    return params, fn


def cnn():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((8, 8, 3)),
        keras.layers.Conv2D(8, 3, padding="same"),
        keras.layers.BatchNormalization(),
        keras.layers.ReLU(),
        keras.layers.MaxPooling2D(2),
        keras.layers.Conv2D(8, 3, padding="same", activation="gelu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(5, activation="softmax"),
    ])
    # A few training steps so the batch-norm statistics and weights are not at their init.
    rng = jc.rng_for("keras_cnn_train")
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="sparse_categorical_crossentropy")
    model.fit(jc.normal(rng, (16, 8, 8, 3)), rng.integers(0, 5, 16), epochs=2, batch_size=8,
              verbose=0, shuffle=False)
    return model


def transformer(vocab=24, seq=8, d=16):
    keras.utils.set_random_seed(1)
    tokens = keras.Input((seq,), dtype="int32")
    x = keras.layers.Embedding(vocab, d)(tokens)
    x = x + keras.layers.Embedding(seq, d)(keras.ops.arange(seq))[None]
    h = keras.layers.LayerNormalization()(x)
    x = x + keras.layers.MultiHeadAttention(num_heads=2, key_dim=d // 2)(h, h,
                                                                         use_causal_mask=True)
    h = keras.layers.LayerNormalization()(x)
    x = x + keras.layers.Dense(d)(keras.layers.Dense(2 * d, activation="gelu")(h))
    logits = keras.layers.Dense(vocab)(keras.layers.LayerNormalization()(x))
    return keras.Model(tokens, logits)


def lstm():
    keras.utils.set_random_seed(2)
    return keras.Sequential([keras.Input((6, 5)), keras.layers.LSTM(10, return_sequences=True),
                             keras.layers.GRU(8), keras.layers.Dense(3)])


def build(root, only=None):
    versions = jc.versions(keras=keras)
    versions["keras_backend"] = keras.backend.backend()
    assert versions["keras_backend"] == "jax"

    def add(name, **kw):
        if only in (None, name):
            jc.add_entry(root, PRODUCER, name, versions=versions, **kw)

    source = ("f = lambda variables, *inputs: model.stateless_call(trainable, non_trainable, "
              "*inputs, training=False)[0]")
    params, fn = stateless(cnn())
    images = jc.normal(jc.rng_for("keras_cnn"), (2, 8, 8, 3))
    add("keras_cnn", model="Keras Sequential CNN (Conv2D, BatchNormalization, MaxPooling2D, "
        "approximate-GELU Conv2D, GlobalAveragePooling2D, softmax Dense), briefly trained; "
        "variables as arguments", fn=fn, params=params, inputs=[images],
        input_names=["images"], source=source)
    add("keras_cnn_closed", model="the Keras CNN with its variables closed over", fn=fn,
        params=params, inputs=[images], input_names=["images"], closed=True, source=source)

    params, fn = stateless(transformer())
    rng = jc.rng_for("keras_transformer")
    tokens = rng.integers(0, 24, (2, 8)).astype(np.int32)
    add("keras_transformer", model="Keras functional transformer block (Embedding, "
        "MultiHeadAttention use_causal_mask=True, LayerNormalization, GELU FFN); variables as "
        "arguments", fn=fn, params=params, inputs=[tokens], input_names=["tokens"],
        source=source)
    add("keras_transformer_closed", model="the Keras transformer with its variables closed over",
        fn=fn, params=params, inputs=[tokens], input_names=["tokens"], closed=True,
        source=source)

    params, fn = stateless(lstm())
    xs = jc.normal(jc.rng_for("keras_lstm"), (3, 6, 5))
    add("keras_lstm_gru", model="Keras LSTM(10, return_sequences) -> GRU(8) -> Dense; "
        "variables as arguments", fn=fn, params=params, inputs=[xs], input_names=["xs"],
        source=source)
