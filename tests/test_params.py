"""shlo2jax.lift_params / bind_params and argument names, on what real producers wrote.

The corpus entries named *_closed (and jax/transformer_tpu) bake their weights into the artifact
as constants; beside them, params.npz holds the weights and param_grads.npz the producer's
gradient of the entry's loss w.r.t. each (tests/corpus/README.md).
"""

import gc
import io
import pathlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shlo2jax
from corpus import checks
from corpus import entry as corpus_entry
from shlo2jax.export import export_translated

ROOT = pathlib.Path(__file__).resolve().parents[1]
CLOSED = [e for e in corpus_entry.entries() if e.folder.joinpath("params.npz").exists()]
KNOWN = corpus_entry.known_failures()


def _ids(e):
    return e.id


def _load(e):
    if (e.id, "load") in KNOWN:
        pytest.skip(f"{e.id} does not load: {KNOWN[(e.id, 'load')]}")
    fn = shlo2jax.load(str(e.artifact_path))[e.meta.get("function", "main")]
    if fn.is_polymorphic:
        # A known limitation (docs/guides/params.md): refused by name, never a plain error.
        with pytest.raises(shlo2jax.UnsupportedError, match="shape-polymorphic"):
            shlo2jax.lift_params(fn)
        pytest.xfail(f"{e.id}: lift_params of a shape-polymorphic function ({fn.signature}) "
                     "is not supported")
    return fn


def _npz(e, name):
    with np.load(e.folder / name) as data:
        return dict(data)


def _bits(a):
    a = np.ascontiguousarray(np.asarray(a))
    return a.dtype.str, a.tobytes()


def _is_splat(a):
    a = np.asarray(a).reshape(-1)
    return a.size <= 1 or bool(np.all(a == a[0]))


def _normalized(name):
    """A parameter path's words, for matching a lifted name with a producer's key."""
    return [w for w in re.split(r"[/._\[\]']+", name.lower())
            if w and w not in ("params", "value", "batch_stats")]


def _grad_error(got, want, largest):
    """checks.check_grad's measure: |got - want|_inf over max(|want|_inf, floor * largest)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = max(float(np.max(np.abs(want), initial=0.0)), checks.GRAD_FLOOR * largest)
    return float(np.max(np.abs(got - want), initial=0.0)) / (scale if scale > 0 else 1.0)


def _loss_grads(e, apply, params):
    return jax.jit(jax.grad(lambda p: checks.loss(apply(p, *e.args), e.projections)))(params)


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("e", CLOSED, ids=_ids)
def test_closed_weights_become_parameters(e):
    fn = _load(e)
    params, apply = shlo2jax.lift_params(fn)
    assert list(params) == list(apply.names) and len(set(params)) == len(params)

    # Exactly what the program computes: bit for bit op by op (under jit, XLA folds the
    # original program's constant subexpressions at compile time, which moves the last bits).
    with jax.disable_jit():
        want = checks.as_list(fn(*e.args))
        got = checks.as_list(apply(params, *e.args))
    for w, g in zip(want, got):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    ok, err, msg = checks.compare([np.asarray(o) for o in checks.as_list(apply(params, *e.args))],
                                  e.outputs, e.tolerance["forward_rtol"],
                                  e.tolerance["forward_atol"])
    assert ok, f"{e.id} forward through the lifted parameters: {msg}"

    # Every closed-over weight that is not a fill value is one lifted parameter, found by its
    # bytes (TensorFlow's converter stores a depthwise kernel in another shape: same bytes).
    values = _npz(e, "params.npz")
    producer_grads = _npz(e, "param_grads.npz")
    lifted_bits = {}
    for name, value in params.items():
        lifted_bits.setdefault(_bits(np.asarray(value).reshape(-1)), []).append(name)
    matched = {}
    for key, value in values.items():
        if _is_splat(value):
            continue
        candidates = lifted_bits.get(_bits(value.reshape(-1)), [])
        if len(candidates) > 1:  # the same values twice: the names decide
            candidates = [n for n in candidates if _normalized(n)[-1:] == _normalized(key)[-1:]]
        assert len(candidates) == 1, f"{e.id}: weight {key} {value.shape} is not one lifted " \
                                     f"parameter: {candidates}"
        matched[key] = candidates[0]
    assert len(set(matched.values())) == len(matched)

    # The producer's gradient w.r.t. each closed-over weight, through the lifted parameters.
    grads = _loss_grads(e, apply, params)
    largest = max(float(np.max(np.abs(g), initial=0.0)) for g in producer_grads.values())
    for key, name in matched.items():
        got = np.asarray(grads[name]).reshape(producer_grads[key].shape)
        assert np.all(np.isfinite(got))
        error = _grad_error(got, producer_grads[key], largest)
        assert error <= e.tolerance["grad_rtol"], f"{e.id}: d loss / d {name} ({key}): {error:.3g}"


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("e", CLOSED, ids=_ids)
def test_splat_weights_share_one_constant(e):
    # Fill values (zero biases, unit scales) and scalars are lifted with splats=True and
    # min_elements=1. The exporter stored weights with the same bytes as one constant, so the
    # parameter's gradient is the sum of the producer's gradients of those weights.
    fn = _load(e)
    params, apply = shlo2jax.lift_params(fn, min_elements=1, splats=True)
    with jax.disable_jit():
        for w, g in zip(checks.as_list(fn(*e.args)), checks.as_list(apply(params, *e.args))):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    values = _npz(e, "params.npz")
    producer_grads = _npz(e, "param_grads.npz")
    grads = _loss_grads(e, apply, params)
    largest = max(float(np.max(np.abs(g), initial=0.0)) for g in producer_grads.values())
    compared = 0
    for name, value in params.items():
        value, grad = np.asarray(value), np.asarray(grads[name])
        same = [k for k, v in values.items() if _bits(v) == _bits(value) and v.shape == value.shape]
        if not same and value.size > 1 and _is_splat(value):
            # a scalar weight the converter broadcast to its use's shape (TensorFlow freezes
            # `scale * y` as a tensor<6xf32> constant): the scalar's gradient is the sum
            same = [k for k, v in values.items() if v.size == 1
                    and _bits(v.reshape(-1)) == _bits(value.reshape(-1)[:1])]
            grad = np.asarray(grad.sum()).reshape(np.shape(values[same[0]])) if same else grad
        if not same:
            continue
        compared += 1
        error = _grad_error(grad, sum(producer_grads[k] for k in same), largest)
        assert error <= e.tolerance["grad_rtol"], f"{e.id}: d loss / d {name} ({same}): {error:.3g}"
    assert compared


@pytest.mark.corpus
def test_names_come_from_the_module():
    by_id = {e.id: e for e in CLOSED}
    expected = {
        # Flax linen: the module path of the op that uses the weight
        "flax/linen_cnn_bn_closed": {"LinenCNN/Conv_0/kernel", "LinenCNN/Conv_1/kernel",
                                     "LinenCNN/Dense_0/kernel", "LinenCNN/BatchNorm_0/subtract"},
        # inside a scan's loop body, under the loop's own scope
        "flax/linen_gru_closed": {"LinenRNN/RNN_0/GRUCell_0/ir/kernel", "LinenRNN/Dense_0/kernel"},
        # Keras on JAX: the layer names
        "keras/keras_transformer_closed": {"multi_head_attention/query/kernel", "dense_1/kernel",
                                           "embedding/embedding"},
        "keras/keras_cnn_closed": {"conv2d/kernel", "conv2d/bias", "dense/kernel", "dense/bias"},
        # TensorFlow: the node names of the ops using the frozen variables
        "tensorflow/keras_tf_cnn_closed": {"sequential_1/dense_1/kernel",
                                           "sequential_1/conv2d_1/kernel"},
        # plain jax closures: no name stack; the role in the op using it
        "jax/convnet_closed": {"kernel", "bias", "kernel_1", "bias_1", "kernel_2"},
    }
    for entry_id, names in expected.items():
        params, apply = shlo2jax.lift_params(_load(by_id[entry_id]))
        assert names <= set(params), (entry_id, sorted(params))
    # Keras's own variable paths, exactly
    keras = _npz(by_id["keras/keras_transformer_closed"], "params.npz")
    params, _ = shlo2jax.lift_params(_load(by_id["keras/keras_transformer_closed"]))
    assert {"multi_head_attention/query/kernel", "dense_2/kernel"} <= set(keras) & set(params)
    # A constant nothing names: its op index
    params, apply = shlo2jax.lift_params(_load(by_id["flax/nnx_resnet_closed"]))
    assert any(re.fullmatch(r"const_\d+", n) for n in params)
    assert all(re.fullmatch(r"const_(\d+)", n) is None or
               any(op.index == int(n[6:]) for op in c.ops)
               for n, c in zip(apply._constant_names, apply.constants))


@pytest.mark.corpus
def test_names_are_stable_across_loads():
    e = next(e for e in CLOSED if e.id == "keras/keras_transformer_closed")
    first, _ = shlo2jax.lift_params(_load(e))
    again, _ = shlo2jax.lift_params(shlo2jax.load(e.artifact_path.read_bytes()))
    assert list(first) == list(again)


def _shared_weight_export():
    """A weight closed over by two jitted helpers and the function itself: jax writes one
    constant op per function, with the same attribute."""
    w = (np.arange(12, dtype=np.float32).reshape(3, 4) - 5) / 7

    @jax.jit
    def g(x):
        return jnp.tanh(x @ w)

    @jax.jit
    def h(x):
        return jnp.sin(x @ w)

    def f(x):
        return g(x) + h(2 * x) + x @ w

    def f_of_w(w_, x):
        return jnp.tanh(x @ w_) + jnp.sin(2 * x @ w_) + x @ w_

    return jax.export.export(jax.jit(f))(jax.ShapeDtypeStruct((2, 3), jnp.float32)), w, f_of_w


@pytest.mark.slow
def test_one_weight_in_several_functions_is_one_parameter():
    exported, w, f_of_w = _shared_weight_export()
    program = shlo2jax.load(exported)
    constants = [op for op in program.module.ops if op.name == "stablehlo.constant"
                 and op.result_types[0].shape == (3, 4)]
    assert len(constants) == 3  # one per function
    params, apply = shlo2jax.lift_params(program)
    assert list(params) == ["kernel"]
    assert len(apply.constants[0].ops) == 3
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(apply(params, x)), np.asarray(program(x)), rtol=1e-6)
    # the callees take the parameter as an argument: the gradient is the sum over the uses
    got = jax.grad(lambda p: jnp.sum(apply(p, x) ** 2))(params)["kernel"]
    want = jax.grad(lambda w_: jnp.sum(f_of_w(w_, x) ** 2))(w)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
    # and a changed parameter changes every use
    moved = {"kernel": params["kernel"] * 0.5}
    np.testing.assert_allclose(np.asarray(apply(moved, x)), np.asarray(f_of_w(w * 0.5, x)),
                               rtol=1e-5, atol=1e-6)


def _convnet():
    e = next(e for e in CLOSED if e.id == "jax/convnet_closed")
    return e, _load(e)


@pytest.mark.corpus
@pytest.mark.slow
def test_jit_vmap_over_inputs_and_params():
    e, fn = _convnet()
    params, apply = shlo2jax.lift_params(fn)
    x = e.args[0]
    np.testing.assert_array_equal(np.asarray(jax.jit(apply)(params, x)),
                                  np.asarray(apply(params, x)))
    xs = np.stack([x, 0.5 * x, -x])
    batched = jax.vmap(apply, in_axes=(None, 0))(params, xs)
    for i in range(3):
        np.testing.assert_allclose(np.asarray(batched[i]), np.asarray(apply(params, xs[i])),
                                   rtol=1e-5, atol=1e-6)
    scales = np.array([1.0, 0.5, 2.0], np.float32)
    stacked = {k: jnp.stack([v * s for s in scales]) for k, v in params.items()}
    batched = jax.vmap(apply, in_axes=(0, None))(stacked, x)
    for i, s in enumerate(scales):
        one = {k: v * s for k, v in params.items()}
        np.testing.assert_allclose(np.asarray(batched[i]), np.asarray(apply(one, x)),
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.corpus
def test_shard_map_over_the_batch():
    e, fn = _convnet()
    params, apply = shlo2jax.lift_params(fn)
    devices = np.array(jax.devices()[:1])
    mesh = jax.sharding.Mesh(devices, ("batch",))
    P = jax.sharding.PartitionSpec
    # the convnet's batch is 2: each device of a 1-device mesh gets the whole batch
    sharded = jax.shard_map(apply, mesh=mesh, in_specs=(P(), P("batch")), out_specs=P("batch"))
    np.testing.assert_allclose(np.asarray(jax.jit(sharded)(params, e.args[0])),
                               np.asarray(apply(params, e.args[0])), rtol=1e-6, atol=1e-7)


@pytest.mark.corpus
def test_lifted_weights_are_not_copied():
    e, fn = _convnet()
    if jax.default_backend() != "cpu":
        pytest.skip("zero-copy device_put is a CPU property")
    params, apply = shlo2jax.lift_params(fn)
    wrapped = 0
    for constant in apply.constants:
        array = params[constant.name]
        assert constant.value is constant.op.params  # the decoded constant itself
        if constant.value.nbytes < 64:
            continue  # decoded into numpy's own (16-byte aligned) memory: copied, < 64 bytes
        assert array.unsafe_buffer_pointer() == constant.value.ctypes.data, constant.name
        wrapped += 1
    assert wrapped >= 3  # the three kernels


@pytest.mark.corpus
def test_parameters_are_checked():
    e, fn = _convnet()
    params, apply = shlo2jax.lift_params(fn)
    x = e.args[0]
    with pytest.raises(KeyError, match="lacks 'kernel'"):
        apply({k: v for k, v in params.items() if k != "kernel"}, x)
    with pytest.raises(KeyError, match="no parameter 'nope'"):
        apply({**params, "nope": params["bias"]}, x)
    with pytest.raises(TypeError, match=r"params\['bias'\] is float64\[8\]"):
        apply({**params, "bias": np.asarray(params["bias"], np.float64)}, x)
    with pytest.raises(TypeError, match="takes 1 input"):
        apply(params)


@pytest.mark.corpus
def test_min_elements_and_integers():
    e, fn = _convnet()
    params, _ = shlo2jax.lift_params(fn, min_elements=100)
    assert sorted(params) == ["kernel", "kernel_1"]  # 3x3x3x8 and 3x3x8x8; not 8 or 8x5
    # an integer table stays a constant unless asked for
    program = shlo2jax.load(jax.export.export(jax.jit(
        lambda x: x[np.array([2, 0, 1, 1], np.int32)] * np.array([1.0, 2.0, 3.0, 4.0],
                                                                  np.float32)))(
        jax.ShapeDtypeStruct((3,), jnp.float32)))
    floats, _ = shlo2jax.lift_params(program)
    everything, apply = shlo2jax.lift_params(program, integers=True)
    assert len(floats) == 1 and len(everything) == 2
    x = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_array_equal(np.asarray(apply(everything, x)), np.asarray(program(x)))


@pytest.mark.corpus
@pytest.mark.slow
def test_weight_arguments_taken_into_params_by_name():
    # torchax passes the module's parameters and buffers as `states[i]`, the inputs as
    # `inputs[0][k]` (torch's placeholder names, p_net_0_weight, ..., are not in the artifact)
    e = next(e for e in corpus_entry.entries() if e.id == "torch/nn_gelu_mlp")
    fn = _load(e)
    assert fn.arg_names == tuple([f"states[{i}]" for i in range(8)] + ["inputs[0][0]"])
    params, apply = shlo2jax.lift_params(fn, params=lambda name: name.startswith("states"))
    assert apply.input_names == ("inputs[0][0]",)
    assert all(isinstance(params[f"states[{i}]"], jax.ShapeDtypeStruct) for i in range(8))
    with pytest.raises(TypeError, match="placeholder"):
        apply(params, e.args[-1])
    weights, inputs = apply.split_arguments(*e.args)
    params.update(weights)
    out = apply(params, *inputs)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(fn(*e.args)))
    np.testing.assert_array_equal(np.asarray(apply(params, **{"inputs[0][0]": inputs[0]})),
                                  np.asarray(out))
    grads = jax.grad(lambda p: checks.loss(apply(p, *inputs), e.projections))(params)
    largest = max(float(np.max(np.abs(g))) for g in e.grads.values())
    for i in range(8):
        assert _grad_error(grads[f"states[{i}]"], e.grads[i], largest) <= 1e-4
    with pytest.raises(KeyError, match="no argument named 'p_net_0_weight'"):
        shlo2jax.lift_params(fn, params=["p_net_0_weight"])


@pytest.mark.corpus
@pytest.mark.slow
def test_bind_params_round_trip():
    # load -> lift -> fine-tune (here: move) the parameters -> bind -> export -> serialize ->
    # load again: the new artifact computes what apply computed with the moved parameters.
    e = next(e for e in CLOSED if e.id == "flax/nnx_resnet_closed")
    program = shlo2jax.load(str(e.artifact_path))
    params, apply = shlo2jax.lift_params(program)
    moved = {k: v * 1.05 if k.startswith("kernel") else v for k, v in params.items()}
    bound = shlo2jax.bind_params(apply, moved)
    x = e.args[0]
    np.testing.assert_array_equal(np.asarray(bound(x)), np.asarray(apply(moved, x)))
    serialized = export_translated(bound).serialize()
    again = shlo2jax.load(serialized)
    assert again.entry.in_avals == bound.in_avals
    np.testing.assert_allclose(np.asarray(again(x)), np.asarray(apply(moved, x)),
                               rtol=1e-5, atol=1e-6)
    assert not np.allclose(np.asarray(again(x)), np.asarray(program(x)), rtol=1e-4)
    # the new artifact's weights are constants again, and lift once more
    relifted, _ = shlo2jax.lift_params(again)
    assert sorted(_bits(v)[1] for v in relifted.values() if v.ndim == 4) == \
        sorted(_bits(v)[1] for k, v in moved.items() if v.ndim == 4)
    # binding by name on the program: unnamed parameters keep the program's values
    partial = shlo2jax.bind_params(program, {"kernel": moved["kernel"]})
    want = apply({**params, "kernel": moved["kernel"]}, x)
    np.testing.assert_array_equal(np.asarray(partial(x)), np.asarray(want))


@pytest.mark.corpus
def test_dense_resource_blobs_are_parameters():
    # Importers such as torch-mlir write weights as dense_resource blobs (dialect_resources):
    # the convnet's weights rewritten that way, with the MLIR API they use.
    from jaxlib.mlir import ir
    from shlo2jax.compat import make_ir_context
    from shlo2jax.sources.mlir import parse_mlir
    e, fn = _convnet()
    exported = jax.export.deserialize(bytearray(e.artifact_path.read_bytes()))
    context = make_ir_context()
    module = parse_mlir(bytes(exported.mlir_module_serialized), context)
    arrays = []
    with context, ir.Location.unknown():
        for operation in module.body.operations:
            for op in operation.operation.regions[0].blocks[0].operations:
                attr = op.attributes["value"] if op.operation.name == "stablehlo.constant" \
                    else None
                if isinstance(attr, ir.DenseElementsAttr) and not attr.is_splat:
                    arrays.append(np.array(attr))
                    op.attributes["value"] = ir.DenseResourceElementsAttr.get_from_buffer(
                        memoryview(arrays[-1]), f"torch_tensor_{len(arrays)}", attr.type)
        out = io.BytesIO()
        module.operation.write_bytecode(out)
    program = shlo2jax.load(out.getvalue())
    assert sorted(program.module.resource_constants.values()) == \
        [f"torch_tensor_{i}" for i in range(1, 6)]
    params, apply = shlo2jax.lift_params(program, min_elements=10 ** 9)  # blobs: always
    assert sorted(params) == ["bias", "bias_1", "kernel", "kernel_1", "kernel_2"]
    x = e.args[0]
    np.testing.assert_array_equal(np.asarray(program(x)), np.asarray(fn(x)))
    np.testing.assert_array_equal(np.asarray(apply(params, x)), np.asarray(fn(x)))


@pytest.mark.corpus
def test_argument_and_result_names():
    def f(params, x, *, scale):
        return {"y": params["w"] @ x * scale, "z": x.sum()}

    example = {"w": jnp.ones((3, 4)), "b": jnp.ones(4)}  # b is unused: jax drops it
    exported = jax.export.export(jax.jit(f))(example, jnp.ones((4,)), scale=jnp.float32(2))
    fn = shlo2jax.load(exported).entry
    assert fn.arg_names == ("params['b']", "params['w']", "x", "scale")
    assert fn.result_names == ("result['y']", "result['z']")
    w, x = np.arange(12, dtype=np.float32).reshape(3, 4), np.ones(4, np.float32)
    by_name = fn(**{"params['w']": w, "params['b']": x, "x": x, "scale": np.float32(2)})
    by_position = fn(x, w, x, np.float32(2))
    for a, b in zip(by_name, by_position):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(fn(x, w, x=x, scale=np.float32(2))[0]),
                                  np.asarray(by_position[0]))
    with pytest.raises(TypeError, match="no argument named 'w'"):
        fn(x, w=w, x=x, scale=np.float32(2))
    with pytest.raises(TypeError, match="missing "):
        fn(x, w)
    # TensorFlow's signature names; unnamed MLIR arguments and results
    tf = shlo2jax.load(ROOT / "tests/corpus/tensorflow/tf_cnn/model.mlir.bc").entry
    assert tf.arg_names[:3] == ("a08_images", "a03_var", "a05_beta")
    assert tf.result_names == ("output_00",)
    plain = shlo2jax.load(ROOT / "examples/mlp.mlir").entry
    assert plain.arg_names == ("arg_0", "arg_1", "arg_2", "arg_3", "arg_4")


# -- a program holding large constants lets its MLIR module go (shlo2jax.held_module)

_HOLDS_ONCE = """
import json, os, sys
import numpy as np
import shlo2jax


def rss():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


shlo2jax.load("func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\\n  return %x : tensor<2xf32>\\n}")
before = rss()  # (the op rules are imported by the first load)
program = shlo2jax.load(sys.argv[1])
loaded = rss()
params, apply = shlo2jax.lift_params(program)
lifted = rss()
print(json.dumps({"load": loaded - before, "lift": lifted - loaded,
                  "released": program.released_mlir_module}))
"""


def _closed_mlp(width: int, layers: int):
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal((width, width), np.float32) / np.float32(np.sqrt(width))
               for _ in range(layers)]

    def f(x):
        for w in weights:
            x = jnp.tanh(x @ w)
        return x
    return weights, jax.export.export(jax.jit(f))(jax.ShapeDtypeStruct((2, width), jnp.float32))


@pytest.mark.slow
def test_load_holds_the_weights_once(tmp_path):
    # jax.export artifact with 64 MB of baked-in weights: before, the loaded program held them
    # three times (the Exported's module bytes, jaxlib's MLIR context, the decoded arrays)
    import subprocess
    import sys
    weights, exported = _closed_mlp(2048, 4)
    constant_bytes = sum(w.nbytes for w in weights)
    path = tmp_path / "closed_mlp.bin"
    path.write_bytes(exported.serialize())
    del weights, exported
    done = subprocess.run([sys.executable, "-c", _HOLDS_ONCE, str(path)], capture_output=True,
                          text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    grew = __import__("json").loads(done.stdout.strip().splitlines()[-1])
    assert grew["released"]
    assert grew["load"] < 1.5 * constant_bytes, (grew, constant_bytes)
    assert grew["lift"] < 0.1 * constant_bytes, (grew, constant_bytes)


def _released(source, monkeypatch):
    """`source` loaded as a program holding large constants is: its module let go (every
    non-splat constant outlined, whatever its size)."""
    from shlo2jax import held_module
    with monkeypatch.context() as patched:
        patched.setattr(held_module, "LARGE_CONSTANT_BYTES", 64)
        patched.setattr(held_module, "RELEASE_BYTES", 0)
        program = shlo2jax.load(source)
    assert program.released_mlir_module
    return program


@pytest.mark.corpus
@pytest.mark.slow
def test_a_program_that_let_its_module_go_offers_everything(monkeypatch):
    from jaxlib.mlir import ir
    from shlo2jax.tools.reference import xla_direct
    e = next(e for e in CLOSED if e.id == "jax/convnet_closed")
    kept = shlo2jax.load(str(e.artifact_path))
    assert not kept.released_mlir_module  # (a few KB of weights)
    gc.collect()  # (contexts other tests left as garbage)
    contexts = ir.Context._get_live_count()
    program = _released(str(e.artifact_path), monkeypatch)
    gc.collect()
    assert ir.Context._get_live_count() <= contexts  # the program holds none
    # the module it rebuilds is the one it was decoded from, locations included
    text = program.mlir_module.operation.get_asm(large_elements_limit=None,
                                                 enable_debug_info=True)
    assert text == kept.mlir_module.operation.get_asm(large_elements_limit=None,
                                                      enable_debug_info=True)
    assert "shlo2jax.outlined" not in text
    x = e.args[0]
    want = np.asarray(kept(x))
    np.testing.assert_array_equal(np.asarray(program(x)), want)
    # its Exported kept no module bytes: they are serialized again when asked for
    assert program.entry.record.mlir_module_serialized == b""
    np.testing.assert_array_equal(np.asarray(jax.tree.leaves(program.exported.call(x))[0]), want)
    assert "stablehlo" in program.exported.mlir_module()
    np.testing.assert_array_equal(np.asarray(shlo2jax.load(program.exported.serialize())(x)),
                                  want)
    np.testing.assert_allclose(np.asarray(xla_direct(program)(*kept.entry.convention.module_arguments(
        (x,)))[0]), want, rtol=1e-5, atol=1e-6)
    assert program.entry.arg_names == kept.entry.arg_names
    assert program.entry.result_names == kept.entry.result_names
    assert [op.location for op in program.module.ops] == [op.location for op in kept.module.ops]
    params, apply = shlo2jax.lift_params(program)
    kept_params, kept_apply = shlo2jax.lift_params(kept)
    assert sorted(params) == sorted(kept_params)
    grads = jax.grad(lambda p: jnp.sum(apply(p, x) ** 2))(params)
    kept_grads = jax.grad(lambda p: jnp.sum(kept_apply(p, x) ** 2))(kept_params)
    for name in params:
        np.testing.assert_array_equal(np.asarray(grads[name]), np.asarray(kept_grads[name]))
    moved = {k: v * 2 for k, v in params.items()}
    bound = shlo2jax.bind_params(apply, moved)
    again = shlo2jax.load(export_translated(bound).serialize())
    np.testing.assert_allclose(np.asarray(again(x)), np.asarray(apply(moved, x)),
                               rtol=1e-5, atol=1e-6)
    result = shlo2jax.compare(program, backends=["cpu", "xla-direct"], inputs=[x])
    assert result.ok, result.table()


def test_large_splat_lifted_only_when_asked_and_only_then_materialised():
    # A splat of more elements than attributes.SPLAT_RECORD_ELEMENTS is decoded as a Splat
    # record (issue 46): not a parameter by default; with splats=True, a full array.
    from shlo2jax import attributes
    t = "tensor<300x300xf32>"
    program = shlo2jax.load(f"""func.func @main(%x: {t}) -> {t} {{
      %c = stablehlo.constant dense<0.25> : {t}
      %y = stablehlo.add %x, %c : {t}
      return %y : {t}
    }}""")
    (op,) = [o for o in program.module.ops if o.name == "stablehlo.constant"]
    assert type(op.attrs["value"]) is attributes.Splat
    params, apply = shlo2jax.lift_params(program)
    assert params == {}
    params, apply = shlo2jax.lift_params(program, splats=True)
    (value,) = params.values()
    assert type(np.asarray(value)) is np.ndarray
    np.testing.assert_array_equal(np.asarray(value), np.full((300, 300), 0.25, np.float32))
    x = np.arange(90000, dtype=np.float32).reshape(300, 300)
    np.testing.assert_array_equal(np.asarray(apply(params, x)), x + np.float32(0.25))
    np.testing.assert_array_equal(np.asarray(program(x)), x + np.float32(0.25))
