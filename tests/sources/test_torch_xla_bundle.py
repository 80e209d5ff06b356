"""PyTorch/XLA StableHLO bundles (shlo2jax/sources/torch_xla_bundle.py and the bound calling
convention of shlo2jax/conventions/bound.py): a folder loads as a program whose function takes torch's
inputs, with the weights bound under their state_dict names; a malformed bundle is a LoadError
naming the file and what was wrong. The bundles are the corpus's (tests/corpus/torch_xla/),
copied into tmp_path and damaged there."""

import functools
import json
import pathlib
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shlo2jax
from corpus import checks
from corpus import entry as corpus_entry
from shlo2jax.errors import LoadError, Shlo2JaxError
from shlo2jax.sources import torch_xla_bundle

CORPUS = pathlib.Path(__file__).resolve().parents[1] / "corpus" / "torch_xla"


def _entry(name):
    return corpus_entry.Entry(CORPUS / name)


def _bundle(name):
    return CORPUS / name / "bundle"


def _copy(name, tmp_path):
    target = tmp_path / name
    shutil.copytree(_bundle(name), target)
    (target / "constants").mkdir(exist_ok=True)  # (git keeps no empty folder)
    return target


def _meta(folder):
    return json.loads((folder / "functions" / "forward.meta").read_text())


def _write_meta(folder, meta):
    (folder / "functions" / "forward.meta").write_text(json.dumps(meta))


# -- loading

def test_a_bundle_is_one_function_of_torchs_inputs_with_the_weights_bound():
    e = _entry("mlp")
    program = shlo2jax.load(str(_bundle("mlp")))
    fn = program["forward"]
    assert program.entry is fn and list(program.functions) == ["forward"]
    assert fn.arg_names == ("args[0]",)
    assert fn.signature.startswith("@forward(args[0]: f32[3,16]) -> (f32[3,4])")
    meta = _meta(_bundle("mlp"))
    names = [loc["name"] for loc in meta["input_locations"] if loc["type_"] == "parameter"]
    assert list(fn.params) == names and set(names) == {"0.weight", "0.bias", "2.weight",
                                                       "2.bias", "4.weight", "4.bias"}
    np.testing.assert_array_equal(np.asarray(fn.params["0.weight"]),
                                  np.load(_bundle("mlp") / "data" / "0.weight"))
    ok, err, msg = checks.compare([np.asarray(program(*e.args))], e.outputs, 1e-4, 1e-5)
    assert ok, msg
    assert fn.module_arg_names[-1] == "args[0]" and fn.module_arg_names[0] == "4.bias"


def test_inputs_are_in_torchs_order_whatever_the_modules():
    # The module takes input 1 (scale) before input 0 (the ids).
    e = _entry("embedding_padding_idx")
    fn = shlo2jax.load(_bundle("embedding_padding_idx"))["forward"]
    assert [b.position for b in fn.convention.bindings if b.kind == "input"] == [1, 0]
    ids, scale = e.args
    assert ids.dtype == np.int64 and scale.dtype == np.float32
    want = e.outputs[0]
    np.testing.assert_allclose(np.asarray(fn(ids, scale)), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(fn(**{"args[1]": scale, "args[0]": ids})), want,
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match=r"args\[0\] of @forward has dtype float32"):
        fn(scale, scale)


def test_outputs_are_unflattened_by_the_pytree_spec():
    e = _entry("lstm")
    out = shlo2jax.load(_bundle("lstm"))["forward"](*e.args)
    assert isinstance(out, tuple) and len(out) == 3
    assert [o.shape for o in out] == [o.shape for o in e.outputs]


_LEAF = {"type": None, "context": None, "children_spec": []}


def _node(kind, *children, context="null"):
    return {"type": kind, "context": context, "children_spec": list(children)}


def test_outputs_nested_in_tuples_are_rebuilt_from_the_spec():
    # torch's treespec_dumps of (y, (h, (c, [z])), ()): five results, rebuilt leaf by leaf in
    # the module's order; an empty tuple holds no result.
    tup = functools.partial(_node, "builtins.tuple")
    spec = tup(_LEAF, tup(_LEAF, tup(_LEAF, _node("builtins.list", _LEAF, _LEAF))), tup())
    structure = torch_xla_bundle.output_structure(json.dumps([1, spec]), 5, "forward.meta", "@main")
    assert structure(("y", "h", "c", "z0", "z1")) == ("y", ("h", ("c", ["z0", "z1"])), ())
    assert torch_xla_bundle.output_structure(json.dumps([1, _LEAF]), 1, "m", "@main")(("y",)) == "y"
    with pytest.raises(LoadError, match=r"output_pytree_spec has 5 leaves, @main returns 4"):
        torch_xla_bundle.output_structure(json.dumps([1, spec]), 4, "forward.meta", "@main")


@pytest.mark.parametrize("name, structure", [
    ("lstm_sequence", "y"),             # the output sequence alone
    ("gru_state", ("y", "h")),          # (output, h_n)
    ("lstm_nested", ("y", ("h", "c"))),  # (head(output), (h_n, c_n))
])
def test_recurrent_models_return_torchs_structure_and_shapes(name, structure):
    e = _entry(name)
    out = shlo2jax.load(_bundle(name))["forward"](*e.args)
    assert jax.tree.structure(out) == jax.tree.structure(structure)
    assert [o.shape for o in jax.tree.leaves(out)] == [o.shape for o in e.outputs]

def test_an_unreadable_output_spec_returns_the_results_flat(tmp_path):
    folder = _copy("mlp", tmp_path)
    meta = _meta(folder)
    meta["output_pytree_spec"] = json.dumps(
        [1, {"type": "collections.namedtuple", "context": "\"Out\"",
             "children_spec": [{"type": None, "context": None, "children_spec": []}]}])
    _write_meta(folder, meta)
    out = shlo2jax.load(folder)["forward"](*_entry("mlp").args)
    assert isinstance(out, jax.Array) and out.shape == (3, 4)  # one result, flat


def test_dict_outputs_are_dicts(tmp_path):
    folder = _copy("lstm", tmp_path)
    meta = _meta(folder)
    leaf = {"type": None, "context": None, "children_spec": []}
    meta["output_pytree_spec"] = json.dumps(
        [1, {"type": "builtins.dict", "context": json.dumps(["y", "state"]),
             "children_spec": [leaf, {"type": "builtins.list", "context": "null",
                                      "children_spec": [leaf, leaf]}]}])
    _write_meta(folder, meta)
    out = shlo2jax.load(folder)["forward"](*_entry("lstm").args)
    assert list(out) == ["y", "state"] and isinstance(out["state"], list)
    assert out["state"][1].shape == (2, 12)


def test_constants_are_bound_too_and_are_not_params():
    fn = shlo2jax.load(_bundle("causal_decoder"))["forward"]
    assert list(fn.constants) == ["constants/0"]
    assert fn.constants["constants/0"].dtype == np.bool_
    assert "constants/0" not in fn.params and len(fn.params) == 29


def test_a_single_program_file_of_a_bundle_loads_as_before():
    for suffix in ("bytecode", "mlir"):
        program = shlo2jax.load(str(_bundle("mlp") / "functions" / f"forward.{suffix}"))
        assert list(program.functions) == ["main"]
        assert len(program["main"].input_types) == 7  # six weights and the input


def test_unused_inputs_are_taken_and_ignored(tmp_path):
    folder = _copy("mlp", tmp_path)
    meta = _meta(folder)
    meta["unused_inputs"] = [[{"type_": "input_arg", "position": 1, "name": ""},
                              {"shape": [2], "dtype": "float32", "dynamic_dims": []}]]
    _write_meta(folder, meta)
    fn = shlo2jax.load(folder)["forward"]
    assert fn.arg_names == ("input_0", "input_1")  # the input spec names one input: not read
    e = _entry("mlp")
    a = fn(e.args[0], np.zeros(2, np.float32))
    np.testing.assert_allclose(np.asarray(a), e.outputs[0], rtol=1e-5, atol=1e-6)


# -- weights

def test_gradients_wrt_the_weights_are_torchs():
    e = _entry("mlp")
    fn = shlo2jax.load(_bundle("mlp"))["forward"]
    grads = jax.grad(lambda p: checks.loss(fn.with_params(p)(*e.args), e.projections))(fn.params)
    assert set(grads) == set(e.weight_grads)
    for name, want in e.weight_grads.items():
        np.testing.assert_allclose(np.asarray(grads[name]), want, rtol=1e-4,
                                   atol=1e-4 * np.abs(want).max())


def test_with_params_replaces_weights_checked_and_never_converted():
    e = _entry("mlp")
    fn = shlo2jax.load(_bundle("mlp"))["forward"]
    zeroed = fn.with_params({"4.weight": jnp.zeros((4, 32), jnp.float32)})
    out = np.asarray(zeroed(*e.args))
    np.testing.assert_allclose(out, np.broadcast_to(np.asarray(fn.params["4.bias"]), (3, 4)))
    np.testing.assert_allclose(np.asarray(fn(*e.args)), e.outputs[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(KeyError, match="no weight 'nope'"):
        fn.with_params({"nope": jnp.zeros(3)})
    with pytest.raises(TypeError, match=r"float64\[4, 32\], the weight is float32\[4, 32\]"):
        fn.with_params({"4.weight": np.zeros((4, 32))})
    with pytest.raises(TypeError, match=r"float32\[32, 4\]"):
        fn.with_params({"4.weight": np.zeros((32, 4), np.float32)})


def test_lift_params_uses_the_state_dict_names():
    e = _entry("cnn_bn")
    fn = shlo2jax.load(_bundle("cnn_bn"))["forward"]
    params, apply = shlo2jax.lift_params(fn)
    assert set(fn.params) <= set(params) and "bn1.running_mean" in params
    assert apply.input_names == ("args[0]",)
    np.testing.assert_allclose(np.asarray(apply(params, *e.args)), e.outputs[0], rtol=1e-4,
                               atol=1e-5)
    grads = jax.grad(lambda p: checks.loss(apply(p, *e.args), e.projections))(params)
    want = e.weight_grads["bn1.running_var"]
    np.testing.assert_allclose(np.asarray(grads["bn1.running_var"]), want, rtol=1e-4,
                               atol=1e-4 * np.abs(want).max())
    bound = shlo2jax.bind_params(apply, {"head.bias": jnp.ones(5, jnp.float32)})
    shift = np.asarray(bound(*e.args)) - np.asarray(fn(*e.args))
    np.testing.assert_allclose(shift, 1 - np.asarray(fn.params["head.bias"])[None].repeat(2, 0),
                               rtol=1e-5, atol=1e-5)


def test_padding_idx_rows_follow_the_gathers_derivative_not_torchs_rule():
    # torch zeroes the gradient of the padding row; the exported gather has no such rule: its
    # derivative there is the sum of the padding positions' cotangents (padding_rows.npz,
    # torch autograd with padding_idx left out). Documented in docs/guides/torch_xla.md.
    e = _entry("embedding_padding_idx")
    fn = shlo2jax.load(_bundle("embedding_padding_idx"))["forward"]
    grads = jax.grad(lambda p: checks.loss(fn.with_params(p)(*e.args), e.projections))(fn.params)
    got = np.asarray(grads["emb.weight"])
    rows, true = e.rows_apart["emb.weight"]
    assert rows == [0] and not np.any(e.weight_grads["emb.weight"][0])  # torch's rule
    assert np.abs(got[0]).max() > 1e-3  # ours is not zero
    np.testing.assert_allclose(got[rows], true, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got[1:], e.weight_grads["emb.weight"][1:], rtol=1e-4, atol=1e-6)


def test_a_bundle_exports_as_a_jax_export_artifact_of_torchs_inputs():
    from shlo2jax.export import export_translated
    e = _entry("embedding_padding_idx")
    fn = shlo2jax.load(_bundle("embedding_padding_idx"))["forward"]
    exported = export_translated(fn)
    assert [a.shape for a in exported.in_avals] == [(3, 6), (3, 6)]
    again = shlo2jax.load(exported.serialize())
    np.testing.assert_allclose(np.asarray(again(*e.args)), e.outputs[0], rtol=1e-5, atol=1e-6)


# -- choosing a function

def test_a_bundle_of_several_functions_is_one_program(tmp_path):
    # torch_xla's bundle format holds several callables of one model; here the MLP's and the
    # LSTM's functions side by side, their weights in one data/.
    folder = _copy("mlp", tmp_path)
    lstm = _bundle("lstm")
    for suffix in ("bytecode", "mlir"):
        shutil.copy(lstm / "functions" / f"forward.{suffix}", folder / "functions" /
                    f"lstm.{suffix}")
    meta = json.loads((lstm / "functions" / "forward.meta").read_text())
    meta["name"] = "lstm"
    (folder / "functions" / "lstm.meta").write_text(json.dumps(meta))
    for weight in (lstm / "data").iterdir():
        shutil.copy(weight, folder / "data" / weight.name)
    program = shlo2jax.load(folder)
    assert sorted(program.functions) == ["forward", "lstm"]
    forward, recurrent = program["forward"], program["lstm"]
    assert forward.module_name == "forward" and "lstm.weight_hh_l0" in recurrent.params
    assert "0.weight" not in recurrent.params and "lstm.weight_hh_l0" not in forward.params
    for fn, e in ((forward, _entry("mlp")), (recurrent, _entry("lstm"))):
        ok, err, msg = checks.compare([np.asarray(o) for o in checks.as_list(fn(*e.args))],
                                      e.outputs, 1e-4, 1e-5)
        assert ok, msg
    assert list(shlo2jax.load(folder, module="lstm").functions) == ["lstm"]
    with pytest.raises(LoadError, match="no function 'nope'.*forward, lstm"):
        shlo2jax.load(folder, module="nope")
    result = shlo2jax.compare(program, backends=("cpu", "interpreter"), function="lstm")
    assert result.ok and result.compared, result.table()


def test_the_cli_runs_a_bundle(capsys):
    from shlo2jax.tools.cli import main
    assert main(["run", str(_bundle("mlp"))]) == 0
    assert "@forward(args[0]: f32[3,16])" in capsys.readouterr().out
    assert main(["info", str(_bundle("mlp"))]) == 0
    assert "every op is supported" in capsys.readouterr().out


def test_compare_runs_the_modules_main_with_the_weights():
    result = shlo2jax.compare(str(_bundle("embedding_padding_idx")),
                              backends=("cpu", "interpreter", "f64"))
    assert result.ok and result.compared, result.table()


# -- malformed bundles: LoadErrors naming the file

def _damaged(tmp_path, damage, name="mlp"):
    folder = _copy(name, tmp_path)
    damage(folder)
    with pytest.raises(LoadError) as info:
        shlo2jax.load(str(folder))
    return str(info.value)


def test_a_missing_weight_file(tmp_path):
    msg = _damaged(tmp_path, lambda f: (f / "data" / "2.weight").unlink())
    assert "data/2.weight: missing" in msg and "forward.meta binds parameter '2.weight'" in msg


def test_meta_that_is_not_json(tmp_path):
    msg = _damaged(tmp_path, lambda f: (f / "functions" / "forward.meta").write_text("{oops"))
    assert "forward.meta: not valid JSON" in msg


@pytest.mark.parametrize("edit,expected", [
    (lambda m: m["input_locations"].pop(0) and m["input_signature"].pop(0),
     "input_locations names 6 arguments, but the module's @main takes 7"),
    (lambda m: m["input_signature"][1].update(shape=[4, 31]),
     r"input_signature\[1\] declares float32\[4, 31\], but the module's @main argument 1 is "
     r"tensor<4x32xf32>"),
    (lambda m: m["output_signature"][0].update(dtype="int32"),
     r"output_signature\[0\] declares int32\[3, 4\]"),
    (lambda m: m["input_locations"][0].update(type_="buffer"),
     r"input_locations\[0\] is not a parameter, constant or input_arg location"),
    (lambda m: m["input_locations"][0].update(name="../data/0.bias"),
     "which is not a file name in data/"),
    (lambda m: m["input_locations"][6].update(position=3),
     r"the inputs' positions \[3\] are not 0 to 0"),
    (lambda m: m.pop("input_locations"), "'input_locations' is missing or not a list"),
    (lambda m: m["input_signature"][0].update(dtype="quaternion"),
     "dtype 'quaternion' is not a tensor dtype"),
    (lambda m: m.update(output_pytree_spec=json.dumps(
        [1, {"type": "builtins.tuple", "context": "null", "children_spec": []}])),
     "output_pytree_spec has 0 leaves, the module's @main returns 1 results"),
])
def test_meta_that_does_not_match_the_module(tmp_path, edit, expected):
    def damage(folder):
        meta = _meta(folder)
        edit(meta)
        _write_meta(folder, meta)
    msg = _damaged(tmp_path, damage)
    assert "forward.meta" in msg
    assert __import__("re").search(expected, msg), msg


@pytest.mark.parametrize("value,expected", [
    (np.zeros((4, 32), np.float64), r"holds float64\[4, 32\], but @main's argument 1 is "
                                    r"tensor<4x32xf32> \(values are never converted\)"),
    (np.zeros((32, 4), np.float32), r"holds float32\[32, 4\]"),
    (np.zeros((), np.float32), r"holds float32\[\]"),
])
def test_a_weight_of_another_type(tmp_path, value, expected):
    def damage(folder):
        with open(folder / "data" / "4.weight", "wb") as f:
            np.save(f, value)
    msg = _damaged(tmp_path, damage)
    assert "data/4.weight: " in msg and __import__("re").search(expected, msg), msg


@pytest.mark.parametrize("content", [b"not an array", b"", b"\x93NUMPY\x01\x00garbage"])
def test_a_weight_file_that_is_not_npy(tmp_path, content):
    msg = _damaged(tmp_path, lambda f: (f / "data" / "0.bias").write_bytes(content))
    assert "data/0.bias: not a numpy .npy array" in msg


def test_a_pickled_weight_is_refused(tmp_path):
    def damage(folder):
        with open(folder / "data" / "0.bias", "wb") as f:
            np.save(f, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert "data/0.bias: an array of Python objects" in _damaged(tmp_path, damage)


def test_a_missing_constant_and_a_missing_program(tmp_path):
    msg = _damaged(tmp_path, lambda f: shutil.rmtree(f / "constants"), name="causal_decoder")
    assert "constants/0: missing" in msg

    def no_program(folder):
        (folder / "functions" / "forward.bytecode").unlink()
        (folder / "functions" / "forward.mlir").unlink()
    assert "neither functions/forward.bytecode nor functions/forward.mlir" in \
        _damaged(tmp_path / "b", no_program)


def test_a_truncated_program(tmp_path):
    def damage(folder):
        path = folder / "functions" / "forward.bytecode"
        path.write_bytes(path.read_bytes()[:300])
    assert "forward.bytecode" in _damaged(tmp_path, damage)


def test_every_file_truncated_is_a_shlo2jax_error_or_loads(tmp_path):
    # Each file of a bundle cut to half: a Shlo2JaxError, never a plain exception (the .mlir
    # text is not read where the bytecode is there, so cutting it changes nothing).
    source = _bundle("embedding_padding_idx")
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        rel = path.relative_to(source)
        folder = tmp_path / str(rel).replace("/", "_")
        shutil.copytree(source, folder)
        target = folder / rel
        target.write_bytes(target.read_bytes()[:len(target.read_bytes()) // 2])
        try:
            shlo2jax.load(str(folder))
        except Shlo2JaxError as e:
            assert str(rel).split("/")[-1] in str(e) or "forward" in str(e), (rel, str(e))
        else:
            assert rel.suffix == ".mlir", rel


# -- the corpus's weight-gradient check can fail

def test_the_corpus_grad_check_sees_the_weights():
    import copy
    e = _entry("embedding_padding_idx")
    fn = shlo2jax.load(_bundle("embedding_padding_idx"))["forward"]
    assert checks.check_grad(e, fn).ok
    bad = copy.copy(e)
    bad.weight_grads = dict(e.weight_grads)
    bad.weight_grads["proj.weight"] = e.weight_grads["proj.weight"] * (1 + 1e-3)
    result = checks.check_grad(bad, fn)
    assert not result.ok and "weight proj.weight" in result.message
    # Without its rows checked apart, torch's zeroed padding row disagrees with the gather's.
    bad = copy.copy(e)
    bad.rows_apart = {}
    result = checks.check_grad(bad, fn)
    assert not result.ok and "weight emb.weight" in result.message


@pytest.mark.slow  # (300 loads: about 30 s)
def test_mutated_meta_and_weight_files_are_shlo2jax_errors(tmp_path):
    # Seeded mutations of the meta's JSON values (other types, other names, other positions)
    # and of a weight file's bytes (its .npy header first): each loads, or is a Shlo2JaxError.
    import copy
    import random
    folder = _copy("embedding_padding_idx", tmp_path)
    meta_path = folder / "functions" / "forward.meta"
    weight_path = folder / "data" / "proj.weight"
    meta0, weight0 = _meta(folder), weight_path.read_bytes()
    choices = [None, 0, -1, 7, 1.5, "x", "", [], {}, [1], ["a"], {"type_": "parameter"}, True,
               "float32", "constant", "input_arg", "parameter", [[1]], 10**20, "null", "[1, 5]",
               {"shape": [2], "dtype": "float32"}, [[{"type_": "input_arg", "position": 2},
                                                    {"shape": [2], "dtype": ["f"]}]]]

    def paths(value, path=()):
        yield path
        items = value.items() if isinstance(value, dict) else \
            enumerate(value) if isinstance(value, list) else ()
        for key, inner in items:
            yield from paths(inner, path + (key,))
    every = [p for p in paths(meta0) if p]
    rng = random.Random(30)
    for k in range(300):
        if k % 3:
            meta = copy.deepcopy(meta0)
            for _ in range(rng.randint(1, 3)):
                *parents, last = rng.choice(every)
                node = meta
                try:
                    for key in parents:
                        node = node[key]
                    node[last] = copy.deepcopy(rng.choice(choices))
                except (KeyError, IndexError, TypeError):
                    pass  # an earlier mutation replaced the path
            meta_path.write_text(json.dumps(meta))
            weight_path.write_bytes(weight0)
        else:
            data = bytearray(weight0)
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(140)] = rng.randrange(256)
            weight_path.write_bytes(bytes(data))
            meta_path.write_text(json.dumps(meta0))
        try:
            shlo2jax.load(str(folder))
        except Shlo2JaxError:
            pass
