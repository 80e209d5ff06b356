"""TensorFlow SavedModels jax2tf wrote (shlo2jax/sources/saved_model.py, with the protobuf
wire reader sources/protowire.py and the tensor bundle reader sources/tensor_bundle.py, each
also tested in its own file): a folder loads without TensorFlow as the signature's function of
its inputs, by their TF names, with the variables bound as weights under their object paths; a
SavedModel outside what is read, or a damaged one, is a LoadError naming what was wrong. The SavedModels are the corpus's
(tests/corpus/tensorflow/jax2tf_*), copied into tmp_path and damaged there."""

import pathlib
import random
import shutil
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shlo2jax
from corpus import checks
from corpus import entry as corpus_entry
from shlo2jax.compat import make_ir_context
from shlo2jax.errors import LoadError, Shlo2JaxError
from shlo2jax.sources import saved_model
from shlo2jax.sources.mlir import parse_mlir
from shlo2jax.sources.protowire import Message
from _helpers import pb_field, pb_varint

CORPUS = pathlib.Path(__file__).resolve().parents[1] / "corpus" / "tensorflow"


def _entry(name):
    return corpus_entry.Entry(CORPUS / name)


def _folder(name):
    return CORPUS / name / "saved_model"


def _copy(name, tmp_path):
    target = tmp_path / name
    shutil.copytree(_folder(name), target)
    return target


# -- loading

def test_a_saved_model_is_the_signatures_function_with_the_variables_bound():
    e = _entry("jax2tf_mlp_poly")
    program = shlo2jax.load(str(_folder("jax2tf_mlp_poly")))
    fn = program["serving_default"]
    assert program.entry is fn and list(program.functions) == ["serving_default"]
    assert fn.arg_names == ("scale", "x")  # the signature's inputs, sorted by name
    assert fn.signature.startswith("@serving_default(scale: f32[?,1], x: f32[?,4])")
    assert set(fn.params) == {"params/w1", "params/b1", "params/w2", "params/b2"}
    assert fn.params["params/w1"].shape == (4, 6)
    out = fn(*e.args)
    assert sorted(out) == ["logits", "norm"]  # the signature's outputs, a dict by name
    for key, want in zip(sorted(out), e.outputs):
        np.testing.assert_allclose(np.asarray(out[key]), want, rtol=1e-5, atol=1e-6)
    by_name = fn(x=e.args[1], scale=e.args[0])
    np.testing.assert_array_equal(np.asarray(by_name["logits"]), np.asarray(out["logits"]))


def test_a_polymorphic_batch_takes_any_batch():
    fn = shlo2jax.load(str(_folder("jax2tf_mlp_poly"))).entry
    e = _entry("jax2tf_mlp_poly")
    scale, x = e.args
    one = fn(scale[:1], x[:1])
    np.testing.assert_allclose(np.asarray(one["norm"]), e.outputs[1][:1], rtol=1e-5)
    wide = fn(np.concatenate([scale] * 3), np.concatenate([x] * 3))
    assert wide["logits"].shape == (9, 2)


def test_a_keras_export_returns_the_signatures_outputs_only():
    # Keras 3 (JAX backend) exports through jax2tf: the module also returns the batch norm's
    # statistics, which the signature leaves out; the variables are Keras's, by object path.
    e = _entry("jax2tf_keras_bn")
    program = shlo2jax.load(str(_folder("jax2tf_keras_bn")))
    fn = program.entry
    assert len(program.module.functions["main"].output_types) == 3
    assert fn.result_names == ("output_0",) and len(fn.out_avals) == 1
    assert fn.signature.startswith("@serving_default(x: f32[?,6]) -> (f32[?,2])")
    assert list(fn.params) == [f"variables/{i}" for i in range(8)]
    out = jax.jit(fn)(*e.args)
    assert list(out) == ["output_0"]
    np.testing.assert_allclose(np.asarray(out["output_0"]), e.outputs[0], rtol=1e-5, atol=1e-6)


def test_several_xla_call_modules_are_chained_into_one_program():
    # An encoder and a head converted apart and composed in one tf.function: two modules,
    # each @main private in one module whose @main calls them, the encoder's result passed on.
    e = _entry("jax2tf_two_calls")
    program = shlo2jax.load(str(_folder("jax2tf_two_calls")))
    fn = program.entry
    functions = set(program.module.functions)
    assert {"m0.main", "m1.main", "main"} <= functions  # (and each module's own helpers)
    assert all(f == "main" or f.startswith(("m0.", "m1.")) for f in functions)
    assert fn.signature.startswith("@serving_default(x: f32[?,4]) -> (f32[?,6], f32[?,3])")
    assert fn.arg_names == ("x",) and fn.result_names == ("features", "logits")
    assert set(fn.params) == {"params/w1", "params/b1", "params/w2", "params/b2"}
    out = fn(*e.args)
    for key, want in zip(sorted(out), e.outputs):
        np.testing.assert_allclose(np.asarray(out[key]), want, rtol=1e-5, atol=1e-6)
    grads = jax.grad(lambda p: checks.loss(fn.with_params(p)(*e.args), e.projections))(fn.params)
    np.testing.assert_allclose(np.asarray(grads["params/w1"]), e.weight_grads["params/w1"],
                               rtol=1e-4, atol=1e-6)


def test_weights_given_as_arrays_are_tf_constants_bound_as_constants():
    e = _entry("jax2tf_mlp_consts")
    fn = shlo2jax.load(str(_folder("jax2tf_mlp_consts"))).entry
    assert fn.params == {} and fn.arg_names == ("x",)
    shapes = sorted(tuple(v.shape) for v in fn.constants.values())
    assert shapes == [(3,), (4, 5), (5,), (5, 3)]
    assert all(n.startswith("constants/__inference_serve_") for n in fn.constants)
    np.testing.assert_allclose(np.asarray(fn(*e.args)["logits"]), e.outputs[0], rtol=1e-5,
                               atol=1e-6)


def _tensor(dtype: int, dims, *fields) -> Message:
    """A TensorProto: its dtype, its shape's dims, then (field, payload) pairs."""
    shape = b"".join(pb_field(2, b"\x08" + pb_varint(d)) for d in dims)
    return Message(b"\x08" + pb_varint(dtype) + pb_field(2, shape)
                   + b"".join(pb_field(n, payload) for n, payload in fields), "t")


@pytest.mark.parametrize("proto, expected", [
    (_tensor(1, [2, 2], (4, np.arange(4, dtype="<f4").tobytes())), np.arange(4.0).reshape(2, 2)),
    (_tensor(1, [3], (5, np.array([1.5, 2.5], "<f4").tobytes())), [1.5, 2.5, 2.5]),  # repeats
    (_tensor(1, [2]), [0.0, 0.0]),  # no values: zeros
    (_tensor(9, [2], (10, pb_varint(7) + pb_varint((1 << 64) - 3))), [7, -3]),  # int64, negative
    (_tensor(10, [3], (11, b"\x01\x00\x01")), [True, False, True]),
    (_tensor(19, [1], (13, pb_varint(0x3C00))), [1.0]),  # half: its bits in an int32
    (_tensor(2, [], (6, np.array([0.25], "<f8").tobytes())), 0.25),
])
def test_tensor_protos_of_every_form(proto, expected):
    value = saved_model.tensor_value(proto, "t")
    np.testing.assert_array_equal(value, np.asarray(expected, value.dtype))
    assert value.shape == np.shape(expected)


@pytest.mark.parametrize("proto, expected", [
    (_tensor(1, [2, 2], (4, b"\x00" * 12)), r"12 bytes for float32\[2, 2\]"),
    (_tensor(1, [1], (5, np.array([1.0, 2.0], "<f4").tobytes())), r"2 values for float32\[1\]"),
    (_tensor(1, [1], (5, b"\x00\x00")), r"corrupt packed values \(2 bytes\)"),
    (_tensor(7, [1]), r"TensorFlow dtype 7 is not one shlo2jax reads"),
    (_tensor(1, [(1 << 64) - 1]), r"a constant of unknown shape \(-1,\)"),
])
def test_malformed_tensor_protos_are_refused(proto, expected):
    with pytest.raises(LoadError, match=expected):
        saved_model.tensor_value(proto, "t")


def test_a_module_for_several_platforms_gets_its_platform_index_bound():
    e = _entry("jax2tf_cpu_cuda")
    fn = shlo2jax.load(str(_folder("jax2tf_cpu_cuda"))).entry
    assert fn.arg_names == ("x",) and set(fn.params) == {"params/w1", "params/b1"}
    assert fn.module_arg_names == ("platform_index", "params/w1", "params/b1", "x")
    assert {k: int(v) for k, v in fn.constants.items()} == {"platform_index": 0}  # CPU's
    np.testing.assert_allclose(np.asarray(fn(*e.args)["y"]), e.outputs[0], rtol=1e-5,
                               atol=1e-6)


def test_a_module_for_several_platforms_without_a_platform_index_is_refused():
    module = parse_mlir("func.func @main(%i: tensor<i32>, %x: tensor<f32>) -> tensor<f32> {\n"
                        "  return %x : tensor<f32>\n}", make_ir_context(), "m")
    node = saved_model._Node("call", "XlaCallModule", (),
                             {"platforms": _list(2, b"CPU", b"CUDA")})
    with pytest.raises(LoadError, match=r"^m: XlaCallModule 'call' is lowered for CPU, CUDA, "
                                        r"and its module's @main takes no leading platform "
                                        r"index"):
        saved_model._takes_platform_index(module, node, "m")


def test_gradients_wrt_the_variables_are_tensorflows():
    e = _entry("jax2tf_mlp")
    fn = shlo2jax.load(str(_folder("jax2tf_mlp"))).entry
    grads = jax.grad(lambda p: checks.loss(fn.with_params(p)(*e.args), e.projections))(fn.params)
    assert set(grads) == set(e.weight_grads)
    for name, want in e.weight_grads.items():
        np.testing.assert_allclose(np.asarray(grads[name]), want, rtol=1e-4,
                                   atol=1e-4 * np.abs(want).max())


def test_lift_params_uses_the_object_paths():
    e = _entry("jax2tf_mlp")
    fn = shlo2jax.load(str(_folder("jax2tf_mlp"))).entry
    params, apply = shlo2jax.lift_params(fn)
    assert set(params) == set(fn.params) and apply.input_names == ("x",)
    zero = {**params, "params/w2": jnp.zeros((8, 3), jnp.float32)}
    np.testing.assert_allclose(np.asarray(apply(zero, *e.args)["logits"]),
                               np.broadcast_to(np.asarray(params["params/b2"]), (2, 3)))


def test_the_cli_runs_a_saved_model(capsys, tmp_path):
    from shlo2jax.tools.cli import main
    out_path = tmp_path / "out.npz"
    folder = str(_folder("jax2tf_mlp_poly"))
    assert main(["run", folder, "--shape", "x=2x4", "--shape", "scale=2x1",
                 "--output", str(out_path)]) == 0
    printed = capsys.readouterr().out
    assert "@serving_default(scale: f32[?,1], x: f32[?,4])" in printed
    assert "output logits: float32[2, 2]" in printed and "output norm: float32[2]" in printed
    assert sorted(np.load(out_path).files) == ["logits", "norm"]
    assert main(["run", folder, "--signature", "predict"]) != 0
    assert "no signature 'predict'" in capsys.readouterr().err


# -- what is refused

def test_an_unknown_signature_lists_those_there_are():
    with pytest.raises(LoadError, match=r"no signature 'predict' in the SavedModel; its "
                                        r"signatures: serving_default$"):
        shlo2jax.load(str(_folder("jax2tf_mlp")), signature="predict")


def test_signature_and_module_are_each_for_their_own_kind(tmp_path):
    with pytest.raises(LoadError, match="names a module of an XLA dump folder, and .* is a "
                                        "SavedModel: name its signature with signature="):
        shlo2jax.load(str(_folder("jax2tf_mlp")), module="jit_f")
    path = tmp_path / "f.mlir"
    path.write_text("func.func @main(%x: tensor<f32>) -> tensor<f32> { return %x : tensor<f32> }")
    with pytest.raises(LoadError, match="signature='serving_default' names a signature of a "
                                        "SavedModel folder, and .* is not a folder"):
        shlo2jax.load(str(path), signature="serving_default")


def _rename_op(folder, old: bytes, new: bytes):
    """Every NodeDef op `old` (field 2: tag 0x12, its length) renamed `new`, of the same
    length: the enclosing messages' lengths stay right."""
    assert len(old) == len(new)
    pb = folder / "saved_model.pb"
    data = pb.read_bytes()
    tag = b"\x12" + bytes([len(old)])
    assert tag + old in data
    pb.write_bytes(data.replace(tag + old, tag + new))


def test_an_op_outside_the_followed_set_is_named_with_its_node(tmp_path, capsys):
    # Around an XlaCallModule, a TensorFlow op is refused whether TensorFlow is installed
    # or not: the module is the program, and the op would be computed outside it.
    from shlo2jax.tools.cli import main
    folder = _copy("jax2tf_mlp", tmp_path)
    _rename_op(folder, b"IdentityN", b"EagerPyFn")
    with pytest.raises(LoadError) as info:
        shlo2jax.load(str(folder))
    message = str(info.value)
    assert "(signature 'serving_default'): op EagerPyFn (node 'IdentityN' in function " \
           "__inference_serve" in message
    assert "\n" not in message and "XlaCallModule" in message
    assert main(["info", str(folder)]) == 1
    err = capsys.readouterr().err
    assert "op EagerPyFn (node 'IdentityN'" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.fixture
def without_tensorflow(monkeypatch):
    """`import tensorflow` fails, as where the [tf] extra is not installed."""
    monkeypatch.setitem(sys.modules, "tensorflow", None)


def test_a_graph_without_an_xla_call_module_takes_tensorflow(tmp_path, without_tensorflow):
    folder = _copy("jax2tf_mlp", tmp_path)
    _rename_op(folder, b"XlaCallModule", b"XlaCallModulf")
    with pytest.raises(LoadError, match=r"\(signature 'serving_default'\): op XlaCallModulf "
                                        r"\(node 'XlaCallModule' in function .*\) is "
                                        r"TensorFlow's own: .* TensorFlow is not installed "
                                        r"\(pip install \"shlo2jax\[tf\]\"\)$"):
        shlo2jax.load(str(folder))


def test_a_folder_named_tensorflow_is_not_tensorflow(tmp_path, monkeypatch):
    # where TensorFlow is not installed, `import tensorflow` finds such a folder (tests/corpus
    # has one) as an empty namespace package: the error is still that it is not installed
    import importlib.util
    spec = importlib.util.find_spec("tensorflow")
    if spec is not None and spec.origin is not None:
        pytest.skip("TensorFlow is installed here: its package is found before any folder")
    (tmp_path / "on_path" / "tensorflow").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(tmp_path / "on_path"))
    folder = _copy("jax2tf_mlp", tmp_path)
    _rename_op(folder, b"XlaCallModule", b"XlaCallModulf")
    try:
        with pytest.raises(LoadError, match=r"TensorFlow is not installed"):
            shlo2jax.load(str(folder))
    finally:  # the namespace package imported must not outlive the test (find_spec finds it)
        sys.modules.pop("tensorflow", None)


def _saved_model_pb(nodes, output: str) -> bytes:
    """A SavedModel whose `serving_default` maps input `x` (the Placeholder `x`) to output `y`
    (the tensor `output`), over the graph's `nodes`: (name, op, inputs)."""
    def node(name, op, inputs):
        return pb_field(1, name.encode()) + pb_field(2, op.encode()) + b"".join(
            pb_field(3, i.encode()) for i in inputs)

    def entry(key, info):
        return pb_field(1, key.encode()) + pb_field(2, info)
    tensor = pb_field(3, pb_field(2, b"\x08\x02"))  # TensorShapeProto { dim { size: 2 } }
    signature = (pb_field(1, entry("x", pb_field(1, b"x:0") + b"\x10\x01" + tensor))
                 + pb_field(2, entry("y", pb_field(1, output.encode()) + b"\x10\x01" + tensor)))
    graph = b"".join(pb_field(1, node(*n)) for n in [("x", "Placeholder", ())] + list(nodes))
    meta_graph = (pb_field(1, pb_field(4, b"serve")) + pb_field(2, graph)
                  + pb_field(5, entry("serving_default", signature)))
    return pb_field(2, meta_graph)


@pytest.mark.parametrize("nodes, output, expected", [
    ([("a", "Identity", ("x",)), ("b", "IdentityN", ("a", "^x")),
      ("c", "PreventGradient", ("b",))], "c:0",
     r"the signature runs no XlaCallModule: .* TensorFlow is not installed"),
    ([("a", "Identity", ("b",)), ("b", "Identity", ("a",))], "a:0",
     r"node 'a' in the graph depends on itself"),
    ([("a", "Identity", ("x",))], "a:1", r"reads output 1 of node 'a' \(Identity\), which has 1"),
    ([("a", "Identity", ("nowhere:0",))], "a:0", r"names tensor 'nowhere:0', which no node"),
    ([("a", "StatefulPartitionedCall", ("x",))], "a:0", r"has no attribute 'f'"),
    ([(f"n{i}", "Identity", (f"n{i + 1}",)) for i in range(20000)]
     + [("n20000", "Identity", ("x",))], "n0:0", r"chains of ops are too long to follow"),
])
def test_graphs_outside_what_is_read_are_refused_by_what_is_wrong(tmp_path, nodes, output,
                                                                   expected,
                                                                   without_tensorflow):
    (tmp_path / "saved_model.pb").write_bytes(_saved_model_pb(nodes, output))
    with pytest.raises(LoadError, match=r"\(signature 'serving_default'\): .*" + expected):
        shlo2jax.load(str(tmp_path))


def test_a_hand_written_saved_model_reaches_the_module(tmp_path):
    # The smallest graph that names an XlaCallModule: its module attribute is missing.
    (tmp_path / "saved_model.pb").write_bytes(_saved_model_pb(
        [("call", "XlaCallModule", ("x",))], "call:0"))
    with pytest.raises(LoadError, match=r"node 'call' \(XlaCallModule\) has no attribute "
                                        r"'Tout'"):
        shlo2jax.load(str(tmp_path))


def _list(number: int, *items: bytes) -> Message:
    """An AttrValue holding a ListValue whose field `number` repeats `items`."""
    return Message(pb_field(1, b"".join(pb_field(number, item) for item in items)), "attr")


@pytest.mark.parametrize("attrs, expected", [
    ({"function_list": _list(9, pb_field(1, b"f"))}, r"calls back into TensorFlow functions "
                                                   r"\(function_list\)"),
    ({"has_token_input_output": Message(b"\x28\x01", "attr")},  # (AttrValue field 5, b)
     r"threads a token \(has_token_input_output\)"),
    ({"dim_args_spec": _list(2, b"0.0")}, r"is version 10 with dimension arguments"),
])
def test_a_module_outside_what_is_read_is_refused_by_its_attributes(attrs, expected):
    node = saved_model._Node("call", "XlaCallModule", (), {
        "version": Message(b"\x18\x0a", "attr"), "module": Message(pb_field(2, b"ML"), "attr"),
        **attrs})
    with pytest.raises(LoadError, match=r"^m: XlaCallModule 'call' " + expected):
        saved_model._module(node, "m", make_ir_context())


def test_a_corrupt_module_attribute_is_named():
    node = saved_model._Node("call", "XlaCallModule", (), {
        "version": Message(b"\x18\x0a", "attr"), "module": Message(pb_field(2, b"ML\xefR"), "attr")})
    with pytest.raises(LoadError, match=r"its module \(4 bytes, version 10\) is truncated or "
                                        r"corrupt"):
        saved_model._module(node, "m", make_ir_context())


# -- damaged files: a Shlo2JaxError naming the file, never a crash

def test_a_truncated_saved_model_pb(tmp_path):
    folder = _copy("jax2tf_mlp", tmp_path)
    pb = folder / "saved_model.pb"
    data = pb.read_bytes()
    for cut in (0, 1, 7, len(data) // 3, len(data) // 2, len(data) - 1):
        pb.write_bytes(data[:cut])
        with pytest.raises(LoadError, match="saved_model.pb|signature"):
            shlo2jax.load(str(folder))


def test_a_truncated_variables_index(tmp_path):
    folder = _copy("jax2tf_mlp", tmp_path)
    index = folder / "variables" / "variables.index"
    index.write_bytes(index.read_bytes()[:200])
    with pytest.raises(LoadError, match=r"variables.index \(200 bytes\) is truncated"):
        shlo2jax.load(str(folder))


def test_a_truncated_variables_data_file(tmp_path):
    folder = _copy("jax2tf_mlp", tmp_path)
    data_file = folder / "variables" / "variables.data-00000-of-00001"
    data_file.write_bytes(data_file.read_bytes()[:40])
    with pytest.raises(LoadError, match=r"variables.data-00000-of-00001 is truncated: "
                                        r"'.+' is \d+ bytes at offset \d+, the file holds "
                                        r"\d+ of them"):
        shlo2jax.load(str(folder))


def test_missing_variables(tmp_path):
    folder = _copy("jax2tf_mlp", tmp_path)
    shutil.rmtree(folder / "variables")
    with pytest.raises(LoadError, match=r"reads variables, and there is no .*variables"
                                        r"\.index"):
        shlo2jax.load(str(folder))


@pytest.mark.slow  # (about 250 loads)
def test_seeded_byte_flips_are_shlo2jax_errors_or_load(tmp_path):
    # Flipped bytes of saved_model.pb (its graph part, before the module bytes dominate) and
    # of variables.index: each loads, or is a Shlo2JaxError; never a plain exception or a hang.
    rng = random.Random(45)
    folder = _copy("jax2tf_mlp", tmp_path)
    for rel in ("saved_model.pb", "variables/variables.index"):
        path = folder / rel
        original = path.read_bytes()
        for _ in range(125):
            data = bytearray(original)
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            path.write_bytes(bytes(data))
            try:
                shlo2jax.load(str(folder))
            except Shlo2JaxError:
                pass
        path.write_bytes(original)
