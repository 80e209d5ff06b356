"""SavedModels TensorFlow computes itself (shlo2jax/sources/tf_graph.py, reached through
sources/saved_model.py when the signature runs no XlaCallModule): read through TensorFlow's
XLA bridge as HLO, the variables bound as weights under their object paths; without
TensorFlow, a one-line LoadError naming the extra. The SavedModels are the corpus's
(tests/corpus/tensorflow/tfgraph_*) and, for what is refused, written here with TensorFlow."""

import importlib.util
import pathlib
import sys

import jax.numpy as jnp
import numpy as np
import pytest

import shlo2jax
from corpus import entry as corpus_entry
from shlo2jax.errors import LoadError

CORPUS = pathlib.Path(__file__).resolve().parents[1] / "corpus" / "tensorflow"
needs_tensorflow = pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is None,
    reason="TensorFlow (shlo2jax's [tf] extra) is not installed: CI has none")


def _folder(name):
    return CORPUS / name / "saved_model"


def test_without_tensorflow_a_graph_is_one_line_naming_the_extra(monkeypatch, capsys):
    from shlo2jax.tools.cli import main
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # (as where it is not installed)
    folder = str(_folder("tfgraph_function"))
    with pytest.raises(LoadError, match=r"\(signature 'serving_default'\): op \w+ \(node '.+' "
                                        r"in function __inference_serve_\d+\) is TensorFlow's "
                                        r"own: .*XLA bridge, and TensorFlow is not installed "
                                        r"\(pip install \"shlo2jax\[tf\]\"\)$"):
        shlo2jax.load(folder)
    assert main(["info", folder]) == 1
    err = capsys.readouterr().err
    assert 'pip install "shlo2jax[tf]"' in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@needs_tensorflow
def test_a_tf_function_is_its_hlo_with_the_variables_as_weights():
    e = corpus_entry.Entry(CORPUS / "tfgraph_function")
    serve = shlo2jax.load(str(_folder("tfgraph_function"))).entry
    assert str(serve.signature).startswith("@serving_default(scale: f32[2,1], x: f32[2,4])")
    assert serve.result_names == ("lse", "y")
    assert sorted(serve.params) == ["params/b", "params/gate", "params/w"]
    out = serve(*e.args)
    np.testing.assert_allclose(out["y"], e.outputs[1], rtol=1e-5, atol=1e-6)
    # The weights are arguments, not constants folded into the HLO: new ones change the result.
    doubled = {k: 2 * v for k, v in serve.params.items()}
    assert not np.allclose(serve.with_params(doubled)(*e.args)["y"], out["y"])


@needs_tensorflow
def test_a_keras_model_on_the_tensorflow_backend_binds_its_variables():
    serve = shlo2jax.load(str(_folder("tfgraph_keras_mlp"))).entry
    assert str(serve.signature).startswith("@serving_default(x: f32[3,6])")
    assert sorted(serve.params) == [f"variables/{i}" for i in range(6)]


def _save(tmp_path, fn, spec):
    import tensorflow as tf
    module = tf.Module()
    module.w = tf.Variable(np.ones((4, 2), np.float32))
    serve = tf.function(lambda x: {"y": fn(module, x)}, input_signature=[spec])
    module.serve = serve
    tf.saved_model.save(module, str(tmp_path), signatures={"serving_default": serve})
    return str(tmp_path)


@needs_tensorflow
def test_an_input_of_unknown_shape_is_refused(tmp_path):
    import tensorflow as tf
    folder = _save(tmp_path, lambda m, x: tf.matmul(x, m.w),
                   tf.TensorSpec([None, 4], tf.float32, name="x"))
    with pytest.raises(LoadError, match=r"input 'x' has shape \(None, 4\), and TensorFlow's "
                                        r"XLA bridge compiles static shapes only"):
        shlo2jax.load(folder)


@needs_tensorflow
def test_an_op_the_bridge_cannot_compile_is_one_line(tmp_path):
    import tensorflow as tf
    folder = _save(tmp_path, lambda m, x: tf.py_function(np.sin, [tf.matmul(x, m.w)],
                                                         tf.float32),
                   tf.TensorSpec([2, 4], tf.float32, name="x"))
    with pytest.raises(LoadError) as info:
        shlo2jax.load(folder)
    message = str(info.value)
    assert "(signature 'serving_default'): TensorFlow's XLA bridge did not compile it: " \
        in message and "\n" not in message
