"""Every error path of loading and calling: clear, typed, naming op and location."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shlo2jax
from shlo2jax import compat

ADD = """
func.func @main(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.add %x, %y : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}"""


def test_unsupported_ops_reported_together_at_load():
    text = """
    func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
      %0 = "foo.frobnicate"(%x) : (tensor<2xf32>) -> tensor<2xf32>
      %1 = "bar.twiddle"(%0) : (tensor<2xf32>) -> tensor<2xf32>
      %2 = stablehlo.custom_call @no_such_target(%1) : (tensor<2xf32>) -> tensor<2xf32>
      return %2 : tensor<2xf32>
    }"""
    with pytest.raises(shlo2jax.UnsupportedError) as info:
        shlo2jax.load(text, source_name="prog.mlir")
    problems = info.value.problems
    assert [p[0] for p in problems] == ["foo.frobnicate", "bar.twiddle", "stablehlo.custom_call"]
    message = str(info.value)
    assert "prog.mlir:3:12" in message and "prog.mlir:4:12" in message
    assert "'no_such_target'" in message


def test_unsupported_element_type():
    text = """
    func.func @main(%x: tensor<2xi3>) -> tensor<2xi3> {
      return %x : tensor<2xi3>
    }"""
    with pytest.raises(shlo2jax.UnsupportedError, match="element type i3"):
        shlo2jax.load(text)


def test_non_strict_load_lists_problems():
    text = """
    func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
      %0 = "foo.frobnicate"(%x) : (tensor<2xf32>) -> tensor<2xf32>
      return %0 : tensor<2xf32>
    }"""
    program = shlo2jax.load(text, strict=False)
    assert program.module.problems[0][0] == "foo.frobnicate"


@pytest.mark.parametrize("body,named", [
    ('%0 = stablehlo.custom_call @no_such_target(%x) : (tensor<2xf32>) -> tensor<2xf32>',
     "custom_call target 'no_such_target' has no translation"),
    ('%0 = "foo.frobnicate"(%x) : (tensor<2xf32>) -> tensor<2xf32>', "foo.frobnicate"),
    # a rule whose `prepare` refused the op: it never runs on what it could not prepare
    ('%0 = stablehlo.custom_call @tpu_custom_call(%x) : (tensor<2xf32>) -> tensor<2xf32>',
     "tpu_custom_call"),
])
def test_non_strict_call_reaching_an_unsupported_op_names_it(body, named):
    text = f"""
    func.func @main(%x: tensor<2xf32>, %y: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {{
      %a = stablehlo.add %x, %y : tensor<2xf32>
      {body}
      return %a, %0 : tensor<2xf32>, tensor<2xf32>
    }}"""
    program = shlo2jax.load(text, strict=False, source_name="p.mlir")
    x = np.ones(2, np.float32)
    for call in (lambda: program(x, x), lambda: jax.jit(program)(x, x),
                 lambda: jax.grad(lambda v: program(v, x)[0].sum())(x)):
        with pytest.raises(shlo2jax.UnsupportedError, match=r"at p.mlir:4:\d+: ") as info:
            call()
        assert named in str(info.value)
        assert len(info.value.problems) == 1


def test_malformed_text_carries_diagnostic():
    with pytest.raises(shlo2jax.LoadError, match=r"(?s)cannot parse MLIR broken.mlir.*"
                       r"broken.mlir\":1:17: expected non-function type"):
        shlo2jax.load("func.func @main( -> {", source_name="broken.mlir")


def test_verifier_error():
    text = """
    func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
      %0 = stablehlo.add %x, %x : (tensor<2xf32>, tensor<2xf32>) -> tensor<3xf32>
      return %x : tensor<2xf32>
    }"""
    with pytest.raises(shlo2jax.LoadError):
        shlo2jax.load(text)


def test_garbage_bytes_and_missing_file(tmp_path):
    with pytest.raises(shlo2jax.LoadError):
        shlo2jax.load(b"ML\xefR\x00garbage")
    with pytest.raises(shlo2jax.LoadError, match="no such file"):
        shlo2jax.load(str(tmp_path / "missing.mlir"))


@pytest.mark.parametrize("args, match", [
    ((np.zeros((2, 3), np.float32),), r"takes 2 argument\(s\), got 1"),
    ((np.zeros((2, 3), np.float32),) * 3, r"takes 2 argument\(s\), got 3"),
    ((np.zeros((2, 3), np.float64), np.zeros((2, 3), np.float32)), r"arg_0 .* dtype float64, expected f32\[2,3\]"),
    ((np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32)), r"arg_1 .* shape \(3, 2\), expected f32\[2,3\]"),
    ((np.zeros((2, 3), np.float32), 1.0), r"arg_1 .* got float"),
    ((np.zeros((2, 3), np.float32), [[1.0] * 3] * 2), r"arg_1 .* got list"),
])
def test_wrong_arguments_raise_type_error(args, match):
    program = shlo2jax.load(ADD)
    with pytest.raises(TypeError, match=match):
        program(*args)


def test_numpy_scalars_are_arrays_whatever_their_type():
    # np.float64 and np.complex128 subclass Python's float and complex; they were refused as
    # Python scalars while np.float32 passed (StableHLO's release artifact type_complex_f64)
    program = shlo2jax.load("""
    func.func @main(%x: tensor<f64>, %z: tensor<complex<f64>>) -> (tensor<f64>, tensor<complex<f64>>) {
      return %x, %z : tensor<f64>, tensor<complex<f64>>
    }""")
    with compat.enable_x64():
        x, z = program(np.float64(1.5), np.complex128(2 - 1j))
    assert float(x) == 1.5 and complex(z) == 2 - 1j
    with pytest.raises(TypeError, match="got float"):
        program(1.5, np.complex128(0))

def test_no_silent_int64_truncation():
    # A user passing int64 where i32 is declared gets an error, never a cast.
    program = shlo2jax.load("""
    func.func @main(%x: tensor<2xi32>) -> tensor<2xi32> { return %x : tensor<2xi32> }""")
    with pytest.raises(TypeError, match="int64"):
        program(np.array([1, 2], np.int64))


def test_elided_constant_refused_unless_placeholder():
    text = """
    func.func @main() -> tensor<4xf32> {
      %c = stablehlo.constant dense_resource<__elided__> : tensor<4xf32>
      return %c : tensor<4xf32>
    }"""
    with pytest.raises(shlo2jax.ElidedDataError, match="placeholder_data=True"):
        shlo2jax.load(text)
    a = np.asarray(shlo2jax.load(text, placeholder_data=True, seed=1)())
    b = np.asarray(shlo2jax.load(text, placeholder_data=True, seed=1)())
    c = np.asarray(shlo2jax.load(text, placeholder_data=True, seed=2)())
    assert a.dtype == np.float32 and a.shape == (4,)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_result_type_mismatch_is_an_error():
    # A handler whose result contradicts the declared type fails loudly with op and location.
    from shlo2jax.registry import register_op

    @register_op("test.wrong_shape")
    def wrong_shape(ctx, op, x):
        return jnp.concatenate([x, x])

    text = """
    func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
      %0 = "test.wrong_shape"(%x) : (tensor<2xf32>) -> tensor<2xf32>
      return %0 : tensor<2xf32>
    }"""
    program = shlo2jax.load(text, source_name="bad.mlir")
    with pytest.raises(shlo2jax.TranslationError,
                       match=r"test.wrong_shape at bad.mlir:3:12: result #0 has type tensor<4xf32>, declared tensor<2xf32>"):
        program(np.zeros(2, np.float32))
