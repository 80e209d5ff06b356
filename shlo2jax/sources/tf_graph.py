"""A SavedModel signature TensorFlow computes itself (no `XlaCallModule`: a Keras 3 model on
the TensorFlow backend, a tf.function of TensorFlow ops) as HLO, through TensorFlow's own XLA
bridge: the one place shlo2jax imports TensorFlow, the optional extra `shlo2jax[tf]`.

The SavedModel is loaded with `tf.saved_model.load`, the signature's concrete function
wrapped in a `tf.function(jit_compile=True)` taking its inputs positionally (sorted by name),
and `experimental_get_compiler_ir(...)(stage="hlo_serialized")` gives the serialized
`HloModuleProto`: its parameters are those inputs, then the resources the function captures
(its variables), in the wrapper's order; its results the signature's outputs, a dict
flattened in sorted key order. The bridge compiles static shapes only: an input dimension
the signature leaves unknown is refused (export with fixed shapes).
"""

from __future__ import annotations

import os

from shlo2jax.errors import LoadError

EXTRA = 'pip install "shlo2jax[tf]"'


def _tensorflow(what: str, why: str):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # (TF's start-up chatter on stderr)
    try:
        import tensorflow as tf
    except ImportError:
        tf = None
    # (a folder named `tensorflow` on the path, a corpus's or a project's, imports as an empty
    # namespace package where TensorFlow is not installed)
    if getattr(tf, "__file__", None) is None:
        raise LoadError(f"{what}: {why}: shlo2jax reads such a graph through TensorFlow's "
                        f"XLA bridge, and TensorFlow is not installed ({EXTRA})")
    return tf


def hlo_of_signature(path: str, signature: str, input_names: list, captures: int, what: str,
                     why: str) -> tuple:
    """(the serialized HloModuleProto of the signature `signature` of the SavedModel at
    `path`, taking `input_names` then its captured variables; for each of those variables,
    its position among the signature function's `captures` captured inputs)."""
    tf = _tensorflow(what, why)
    try:
        loaded = tf.saved_model.load(path)  # (held: its variables live while it does)
        function = loaded.signatures[signature]
    except Exception as e:  # noqa: BLE001 - TensorFlow's errors: named, one line
        raise LoadError(f"{what}: TensorFlow could not load it: {_first_line(e)}") from None
    specs = function.structured_input_signature[1]
    if sorted(specs) != list(input_names):
        raise LoadError(f"{what}: TensorFlow's signature takes {sorted(specs)}, the saved "
                        f"one {list(input_names)}")
    for name in input_names:
        if not specs[name].shape.is_fully_defined():
            raise LoadError(f"{what}: input {name!r} has shape {specs[name].shape}, and "
                            "TensorFlow's XLA bridge compiles static shapes only: export "
                            "the model with a fixed input shape")
    if len(function.captured_inputs) != captures:
        raise LoadError(f"{what}: the signature's function captures "
                        f"{len(function.captured_inputs)} tensors, the object graph binds "
                        f"{captures}")

    @tf.function(jit_compile=True, autograph=False)
    def positional(*args):
        return function(**dict(zip(input_names, args)))
    arg_specs = [tf.TensorSpec(specs[n].shape, specs[n].dtype) for n in input_names]
    try:
        data = positional.experimental_get_compiler_ir(*arg_specs)(stage="hlo_serialized")
        wrapper = positional.get_concrete_function(*arg_specs)
    except Exception as e:  # noqa: BLE001 - the bridge's refusal (an op it cannot compile)
        raise LoadError(f"{what}: TensorFlow's XLA bridge did not compile it: "
                        f"{_first_line(e)}") from None
    return data, _capture_order(wrapper.captured_inputs, function.captured_inputs, what)


def _capture_order(outer: list, inner: list, what: str) -> list:
    """For each tensor the wrapper captures, its position among the signature function's."""
    order = []
    for tensor in outer:
        found = [i for i, t in enumerate(inner) if t is tensor]
        if not found:
            raise LoadError(f"{what}: the compiled function captures a tensor the "
                            "signature's function does not")
        order.append(found[0])
    return order


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
