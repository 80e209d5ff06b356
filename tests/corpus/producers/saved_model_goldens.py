"""The goldens of a SavedModel corpus entry (producers jax2tf_models and tf_graph_models):
TensorFlow's own forward pass and `GradientTape` gradients through the reloaded signature."""

from __future__ import annotations

import tensorflow as tf

import entry


def variables_of(loaded) -> dict:
    """The reloaded SavedModel's variables by object path (what `Function.params` names
    them)."""
    if not hasattr(loaded, "params") and not hasattr(loaded, "variables"):
        return {}  # (weights as constants)
    if hasattr(loaded, "params"):  # (the tf.Module cases)
        return {f"params/{k}": v for k, v in loaded.params.items()}
    return {f"variables/{i}": v for i, v in enumerate(loaded.variables)}  # (Keras's)


def goldens(path, inputs):
    """The reloaded SavedModel's outputs (sorted by key), and the tape's gradients of the
    corpus loss w.r.t. the inputs and the variables (by object path)."""
    loaded = tf.saved_model.load(str(path))
    signature = loaded.signatures["serving_default"]
    variables = variables_of(loaded)
    names = sorted(inputs)
    args = {n: tf.constant(inputs[n]) for n in names}
    outputs = signature(**args)
    keys = sorted(outputs)
    outs = [outputs[k].numpy() for k in keys]
    projections = entry.loss_projections(outs)
    with tf.GradientTape() as tape:
        tape.watch(list(args.values()) + list(variables.values()))  # (non-trainable ones too)
        outputs = signature(**args)
        loss = tf.add_n([tf.reduce_sum(outputs[k] * p) for k, p in zip(keys, projections)])
    grads = tape.gradient(loss, [args[n] for n in names] + list(variables.values()))
    input_grads = {i: g.numpy() for i, g in enumerate(grads[:len(names)])}
    weight_grads = {k: g.numpy() for k, g in zip(variables, grads[len(names):])}
    return keys, outs, projections, input_grads, weight_grads
