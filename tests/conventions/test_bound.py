"""The bound calling convention (shlo2jax/conventions/bound.py): a module function some of whose
arguments are bound to named values, called with the rest. The PyTorch/XLA bundles that use it
are tested in tests/sources/test_torch_xla_bundle.py; here a source of a small module gives its
@main the convention, as a source file would."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shlo2jax
from shlo2jax.errors import LoadError
from shlo2jax import sources
from shlo2jax.assembly import assemble
from shlo2jax.conventions.bound import Binding, BoundValue, binding

TEXT = """
func.func @main(%w: tensor<2xf32>, %x: tensor<2xf32>, %c: tensor<i1>) -> (tensor<2xf32>, tensor<2xf32>) {
  %p = stablehlo.multiply %w, %x : tensor<2xf32>
  %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i1>) -> tensor<2xi1>
  %s = stablehlo.select %b, %p, %x : tensor<2xi1>, tensor<2xf32>
  return %s, %x : tensor<2xf32>, tensor<2xf32>
}
"""
BINDINGS = [Binding("param", "w"), Binding("input", "", 0), Binding("constant", "c")]


def _values(w=np.array([2.0, 3.0], np.float32), c=np.array(True)):
    return {"w": BoundValue(w, "w.npy"), "c": BoundValue(c, "c.npy")}


def _bound(bindings=BINDINGS, values=None, inputs=None, structure=None, results=None):
    t = shlo2jax.load(TEXT)["main"].input_types[1]
    source = sources.read(TEXT, "test.mlir")
    source.conventions = {"main": binding("f", bindings, values or _values(),
                                          inputs or [("x", t)], structure, "test", results)}
    return assemble(source, shlo2jax.LoadOptions())["f"]


def test_called_with_the_remaining_inputs():
    fn = _bound()
    assert fn.arg_names == ("x",) and fn.module_arg_names == ("w", "x", "c")
    assert fn.signature.startswith("@f(x: f32[2]) -> (f32[2], f32[2])  [test: 1 weights bound]")
    y, x = fn(np.array([1.0, 1.0], np.float32))
    np.testing.assert_array_equal(np.asarray(y), [2.0, 3.0])
    assert list(fn.params) == ["w"] and list(fn.constants) == ["c"]


def test_structure_shapes_the_results():
    fn = _bound(structure=lambda outs: {"y": outs[0], "x": outs[1]})
    out = jax.jit(fn)(np.ones(2, np.float32))
    assert set(out) == {"y", "x"}


def test_results_select_and_name_the_module_results():
    fn = _bound(results={"x_again": 1, "y": 0}, structure=lambda outs: dict(zip(("x_again", "y"),
                                                                               outs)))
    assert fn.result_names == ("x_again", "y") and len(fn.out_avals) == 2
    x = np.array([1.0, 4.0], np.float32)
    out = fn(x)
    np.testing.assert_array_equal(np.asarray(out["y"]), [2.0, 12.0])
    np.testing.assert_array_equal(np.asarray(out["x_again"]), x)
    only = _bound(results={"y": 0})
    assert only.signature.startswith("@f(x: f32[2]) -> (f32[2])  [test")
    np.testing.assert_array_equal(np.asarray(jax.jit(only)(x)), [2.0, 12.0])
    grads = jax.grad(lambda p: only.with_params(p)(x).sum())(only.params)
    np.testing.assert_array_equal(np.asarray(grads["w"]), x)
    with pytest.raises(LoadError, match="the results name module result 2, and @main returns 2"):
        _bound(results={"y": 2})


def test_with_params_and_gradients():
    fn = _bound()
    x = np.array([1.0, 4.0], np.float32)
    grads = jax.grad(lambda p: fn.with_params(p)(x)[0].sum())(fn.params)
    np.testing.assert_array_equal(np.asarray(grads["w"]), x)
    other = fn.with_params({"w": jnp.array([0.5, 0.5], jnp.float32)})
    np.testing.assert_array_equal(np.asarray(other(x)[0]), [0.5, 2.0])
    np.testing.assert_array_equal(np.asarray(fn(x)[0]), [2.0, 12.0])  # unchanged
    with pytest.raises(KeyError):
        fn.with_params({"c": np.array(False)})  # a constant is not a parameter
    with pytest.raises(TypeError, match="never converted"):
        fn.with_params({"w": np.array([1, 2], np.int32)})
    params, apply = shlo2jax.lift_params(fn)
    assert list(params) == ["w"] and apply.input_names == ("x",)
    np.testing.assert_array_equal(np.asarray(apply(params, x)[0]), [2.0, 12.0])


@pytest.mark.parametrize("bindings,values,expected", [
    (BINDINGS[:2], None, "2 argument bindings for @main, which takes 3 arguments"),
    ([Binding("param", "w"), Binding("input", "", 1), Binding("constant", "c")], None,
     "argument 1 is input 1, which is not one input of 1"),
    ([Binding("input", "", 0), Binding("input", "", 0), Binding("constant", "c")], None,
     "argument 1 is input 0, which is not one input of 1 \\(or is bound twice\\)"),
    (BINDINGS, {"c": BoundValue(np.array(True), "c.npy")}, "no value for param 'w'"),
    (BINDINGS, _values(w=np.zeros(2, np.float64)),
     r"w.npy: holds float64\[2\], but @main's argument 0 is tensor<2xf32>"),
    (BINDINGS, _values(c=np.array([True])), r"c.npy: holds bool\[1\]"),
])
def test_bindings_that_do_not_fit_the_module(bindings, values, expected):
    with pytest.raises(LoadError, match=expected):
        _bound(bindings, values)


def test_an_input_of_another_type_than_the_module_argument():
    program = shlo2jax.load(TEXT)
    wrong = program["main"].input_types[2]
    with pytest.raises(LoadError, match="test: input 0 is tensor<i1>, but @main's argument 1 "
                                        "is tensor<2xf32>"):
        _bound(inputs=[("x", wrong)])
