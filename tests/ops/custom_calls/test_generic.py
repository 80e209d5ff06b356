"""ops/custom_calls/generic.py: random bits, placement markers, 64-bit splitting, top-k,
jax.export's dynamic calls, the targets reported at load, and user registrations beside the
built-ins."""

from __future__ import annotations

import re

import numpy as np
import pytest

import shlo2jax
import shlo2jax.ops  # noqa: F401
from shlo2jax import registry
from shlo2jax.errors import UnsupportedError

from ._programs import (_call, _export, _module, _on_cpu)

RNG = np.random.default_rng(0)


def test_threefry_matches_jax():
    import jax
    from jax.extend.random import threefry_2x32
    k = np.array([1, 2], np.uint32)
    x = np.arange(8, dtype=np.uint32)
    t = "tensor<4xui32>"
    prog = _call("cu_threefry2x32_ffi", [t, t, t, t], [t, t])
    y0, y1 = prog(np.full(4, k[0]), np.full(4, k[1]), x[:4], x[4:])
    expected = np.asarray(threefry_2x32(jax.numpy.asarray(k), jax.numpy.asarray(x)))
    np.testing.assert_array_equal(np.concatenate([y0, y1]), expected)


def test_x64_split_and_combine():
    body = """
  %lo = stablehlo.custom_call @X64SplitLow(%arg0) : (tensor<2xui64>) -> tensor<2xui32>
  %hi = stablehlo.custom_call @X64SplitHigh(%arg0) : (tensor<2xui64>) -> tensor<2xui32>
  %c = stablehlo.custom_call @X64Combine(%lo, %hi) : (tensor<2xui32>, tensor<2xui32>) -> tensor<2xui64>
  func.return %lo, %hi, %c : tensor<2xui32>, tensor<2xui32>, tensor<2xui64>"""
    prog = shlo2jax.load(_module(body, "(%arg0: tensor<2xui64>) -> (tensor<2xui32>, tensor<2xui32>, tensor<2xui64>)"))
    x = np.array([0x0123456789ABCDEF, 0xFFFFFFFF00000001], np.uint64)
    lo, hi, c = (np.asarray(v) for v in prog(x))
    np.testing.assert_array_equal(lo, (x & 0xFFFFFFFF).astype(np.uint32))
    np.testing.assert_array_equal(hi, (x >> 32).astype(np.uint32))
    np.testing.assert_array_equal(c, x)


# (Sharding markers and shard conversions: ops/sharding.py, tests/spmd/test_sharding.py.)

@pytest.mark.parametrize("target", ["annotate_device_placement", "MoveToHost", "MoveToDevice"])
def test_placement_markers_are_identity(target):
    prog = _call(target, ["tensor<2x3xf32>"], ["tensor<2x3xf32>"])
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(prog(x)), x)


@pytest.mark.parametrize("target,platform", [("tpu_custom_call", "TPU"),
                                             ("__gpu$xla.gpu.triton", "CUDA GPU")])
def test_platform_bound_kernels_reported_at_load(target, platform):
    with pytest.raises(UnsupportedError, match=platform):
        _call(target, ["tensor<2xf32>"], ["tensor<2xf32>"])


def test_approx_top_k_exact_answer():
    text = """
func.func private @cmp(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>) -> tensor<i1> {
  %0 = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
  func.return %0 : tensor<i1>
}
func.func @main(%x: tensor<7xf32>) -> (tensor<3xf32>, tensor<3xi32>) {
  %i = stablehlo.iota dim = 0 : tensor<7xi32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m1 = stablehlo.constant dense<-1> : tensor<i32>
  %0:2 = stablehlo.custom_call @ApproxTopK(%x, %i, %ninf, %m1) {called_computations = [@cmp],
      mhlo.backend_config = {aggregate_to_topk = true, recall_target = 0.95 : f32,
      reduction_dim = 0 : i64, reduction_input_size_override = -1 : i64, top_k = 3 : i64}}
      : (tensor<7xf32>, tensor<7xi32>, tensor<f32>, tensor<i32>) -> (tensor<3xf32>, tensor<3xi32>)
  func.return %0#0, %0#1 : tensor<3xf32>, tensor<3xi32>
}"""
    x = np.array([3.0, 9.0, -1.0, 7.0, 9.5, 0.0, 2.0], np.float32)
    values, indices = (np.asarray(v) for v in shlo2jax.load(text)(x))
    np.testing.assert_array_equal(values, [9.5, 9.0, 7.0])
    np.testing.assert_array_equal(indices, [4, 1, 3])


def test_user_registration_overrides_builtin():
    target = "lapack_sgetrf_ffi"
    saved = registry.CUSTOM_CALL_RULES[target]
    try:
        seen = {}

        def prepare(op):
            seen["backend"] = op.attrs.get("mhlo.backend_config")
            return "user-params"

        @shlo2jax.register_custom_call(target, prepare=prepare)
        def fake_getrf(ctx, op, a):
            assert op.params == "user-params"
            n = a.shape[-1]
            return a * 2, np.arange(1, n + 1, dtype=np.int32), np.int32(0)

        t = "tensor<2x2xf32>"
        prog = _call(target, [t], [t, "tensor<2xi32>", "tensor<i32>"])
        lu, pivots, _ = prog(np.ones((2, 2), np.float32))
        np.testing.assert_array_equal(np.asarray(lu), 2 * np.ones((2, 2)))
        np.testing.assert_array_equal(np.asarray(pivots), [1, 2])
        assert seen["backend"] == {}
    finally:
        registry.CUSTOM_CALL_RULES[target] = saved


def test_register_custom_call_is_a_decorator():
    # The handler is decorated, never passed along with the target (the old contract).
    with pytest.raises(TypeError, match="decorates the handler"):
        shlo2jax.register_custom_call("my.double", lambda ctx, op, x: x * 2)
    assert "my.double" not in registry.CUSTOM_CALL_RULES


def test_user_registration_of_new_target():
    try:
        @shlo2jax.register_custom_call("my.double")
        def double(ctx, op, x):
            return x * 2

        prog = _call("my.double", ["tensor<3xi32>"], ["tensor<3xi32>"])
        np.testing.assert_array_equal(np.asarray(prog(np.arange(3, dtype=np.int32))), [0, 2, 4])
    finally:
        registry.CUSTOM_CALL_RULES.pop("my.double", None)


# jax.export's dynamic ops, here with static shapes and constant size operands
# (what remains after shape refinement when it does not rewrite them).


def test_dynamic_top_k():
    text = """
func.func @main(%x: tensor<2x5xf32>) -> (tensor<2x2xf32>, tensor<2x2xi32>) {
  %k = stablehlo.constant dense<2> : tensor<i32>
  %0:2 = stablehlo.custom_call @stablehlo.dynamic_top_k(%x, %k) {api_version = 2 : i32}
      : (tensor<2x5xf32>, tensor<i32>) -> (tensor<2x2xf32>, tensor<2x2xi32>)
  func.return %0#0, %0#1 : tensor<2x2xf32>, tensor<2x2xi32>
}"""
    x = np.array([[1, 5, 3, 5, 0], [9, -1, 2, 8, 7]], np.float32)
    values, indices = (np.asarray(v) for v in shlo2jax.load(text)(x))
    np.testing.assert_array_equal(values, [[5, 5], [9, 8]])
    np.testing.assert_array_equal(indices, [[1, 3], [0, 3]])


def test_dynamic_rng_bit_generator_matches_static_op():
    text = """
func.func @main(%s: tensor<2xui64>) -> (tensor<2xui64>, tensor<3x4xui32>, tensor<2xui64>, tensor<3x4xui32>) {
  %shape = stablehlo.constant dense<[3, 4]> : tensor<2xi32>
  %0:2 = stablehlo.custom_call @stablehlo.dynamic_rng_bit_generator(%s, %shape) {
      api_version = 2 : i32, rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>}
      : (tensor<2xui64>, tensor<2xi32>) -> (tensor<2xui64>, tensor<3x4xui32>)
  %1:2 = stablehlo.rng_bit_generator %s, algorithm = THREE_FRY
      : (tensor<2xui64>) -> (tensor<2xui64>, tensor<3x4xui32>)
  func.return %0#0, %0#1, %1#0, %1#1 : tensor<2xui64>, tensor<3x4xui32>, tensor<2xui64>, tensor<3x4xui32>
}"""
    outs = [np.asarray(v) for v in shlo2jax.load(text)(np.array([1, 2], np.uint64))]
    np.testing.assert_array_equal(outs[0], outs[2])
    np.testing.assert_array_equal(outs[1], outs[3])


def test_dynamic_reduce_window_sum():
    text = """
func.func private @add(%a: tensor<f32>, %b: tensor<f32>) -> tensor<f32> {
  %0 = stablehlo.add %a, %b : tensor<f32>
  func.return %0 : tensor<f32>
}
func.func @main(%x: tensor<3x4xf32>) -> tensor<2x2xf32> {
  %init = stablehlo.constant dense<1.0> : tensor<f32>
  %dims = stablehlo.constant dense<[2, 3]> : tensor<2xi32>
  %ones = stablehlo.constant dense<1> : tensor<2xi32>
  %pad = stablehlo.constant dense<0> : tensor<2x2xi32>
  %0 = stablehlo.custom_call @stablehlo.dynamic_reduce_window(%x, %init, %dims, %ones, %ones, %ones, %pad)
      {api_version = 2 : i32, called_computations = [@add]}
      : (tensor<3x4xf32>, tensor<f32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>, tensor<2x2xi32>) -> tensor<2x2xf32>
  func.return %0 : tensor<2x2xf32>
}"""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = np.asarray(shlo2jax.load(text)(x))
    expected = [[1 + x[i:i + 2, j:j + 3].sum() for j in range(2)] for i in range(2)]
    np.testing.assert_array_equal(got, expected)


# ---------------------------------------------------------------- approximate top-k on TPU


_CMP_GT = """
func.func private @cmp(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>) -> tensor<i1> {
  %0 = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
  func.return %0 : tensor<i1>
}"""


def test_partial_reduce_then_aggregate():
    # What XLA's ApproxTopK builds for TPU: PartialReduce to 4 candidates per row, then
    # sort + slice to top_k = 2 (the aggregation). Exact candidates give the exact top 2.
    text = _CMP_GT + """
func.func @main(%x: tensor<2x16xf32>) -> (tensor<2x4xf32>, tensor<2x4xi32>) {
  %i = stablehlo.iota dim = 1 : tensor<2x16xi32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m1 = stablehlo.constant dense<-1> : tensor<i32>
  %0 = stablehlo.custom_call @PartialReduce(%x, %i, %ninf, %m1) {called_computations = [@cmp],
      backend_config = "{\\"log2_reduction\\": 2, \\"reduction_dim\\": 1, \\"to_apply_type\\": \\"comparator\\", \\"top_k\\": 2, \\"recall_target\\": 0.950000}"}
      : (tensor<2x16xf32>, tensor<2x16xi32>, tensor<f32>, tensor<i32>) -> tuple<tensor<2x4xf32>, tensor<2x4xi32>>
  %v = stablehlo.get_tuple_element %0[0] : (tuple<tensor<2x4xf32>, tensor<2x4xi32>>) -> tensor<2x4xf32>
  %k = stablehlo.get_tuple_element %0[1] : (tuple<tensor<2x4xf32>, tensor<2x4xi32>>) -> tensor<2x4xi32>
  func.return %v, %k : tensor<2x4xf32>, tensor<2x4xi32>
}"""
    x = RNG.permutation(32).reshape(2, 16).astype(np.float32)
    values, indices = (np.asarray(v) for v in shlo2jax.load(text)(x))
    expected = -np.sort(-x, axis=1)[:, :4]
    np.testing.assert_array_equal(values, expected)
    np.testing.assert_array_equal(np.take_along_axis(x, indices, axis=1), expected)


def test_partial_reduce_min_with_separate_results():
    text = """
func.func private @cmp(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>) -> tensor<i1> {
  %0 = stablehlo.compare LT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
  func.return %0 : tensor<i1>
}
func.func @main(%x: tensor<8xf32>) -> (tensor<3xf32>, tensor<3xi32>) {
  %i = stablehlo.iota dim = 0 : tensor<8xi32>
  %inf = stablehlo.constant dense<0x7F800000> : tensor<f32>
  %m1 = stablehlo.constant dense<-1> : tensor<i32>
  %0:2 = stablehlo.custom_call @PartialReduce(%x, %i, %inf, %m1) {called_computations = [@cmp],
      backend_config = "{\\"log2_reduction\\": 1, \\"reduction_dim\\": 0, \\"to_apply_type\\": \\"comparator\\", \\"top_k\\": 3, \\"recall_target\\": 0.9}"}
      : (tensor<8xf32>, tensor<8xi32>, tensor<f32>, tensor<i32>) -> (tensor<3xf32>, tensor<3xi32>)
  func.return %0#0, %0#1 : tensor<3xf32>, tensor<3xi32>
}"""
    x = np.array([4.0, -2.0, 7.0, 0.5, -9.0, 3.0, 1.0, 8.0], np.float32)
    values, indices = (np.asarray(v) for v in shlo2jax.load(text)(x))
    np.testing.assert_array_equal(values, [-9.0, -2.0, 0.5])
    np.testing.assert_array_equal(indices, [4, 1, 3])


# ---------------------------------------------------------------- MHLO ops encoded as custom calls


def test_mhlo_ops_encoded_as_custom_calls():
    import math
    text = """
func.func @main(%x: tensor<2x5xf32>) -> (tensor<2x3xf32>, tensor<2x3xi32>, tensor<2x5xf32>, tensor<2x2xf32>, tensor<2x2xi32>) {
  %e = stablehlo.custom_call @mhlo.erf(%x) {mhlo.attributes = {mhlo.version = 1 : i64}} : (tensor<2x5xf32>) -> tensor<2x5xf32>
  %0:2 = stablehlo.custom_call @mhlo.topk(%x) {mhlo.attributes = {k = 3 : i64, largest = true}, mhlo.version = 1 : i64} : (tensor<2x5xf32>) -> (tensor<2x3xf32>, tensor<2x3xi32>)
  %1:2 = stablehlo.custom_call @mhlo.topk(%x) {mhlo.attributes = {k = 2 : i64, largest = false}} : (tensor<2x5xf32>) -> (tensor<2x2xf32>, tensor<2x2xi32>)
  return %0#0, %0#1, %e, %1#0, %1#1 : tensor<2x3xf32>, tensor<2x3xi32>, tensor<2x5xf32>, tensor<2x2xf32>, tensor<2x2xi32>
}"""
    x = np.array([[1, 5, 3, 5, 0], [9, -1, 2, 8, 7]], np.float32)
    top_v, top_i, erf, low_v, low_i = (np.asarray(v) for v in shlo2jax.load(text)(x))
    np.testing.assert_array_equal(top_v, [[5, 5, 3], [9, 8, 7]])
    np.testing.assert_array_equal(top_i, [[1, 3, 2], [0, 3, 4]])  # ties: lower index first
    np.testing.assert_allclose(erf, np.vectorize(math.erf)(x), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(low_v, [[0, 1], [-1, 2]])
    np.testing.assert_array_equal(low_i, [[4, 0], [1, 2]])


def test_unknown_mhlo_custom_call_is_reported():
    with pytest.raises(UnsupportedError, match="mhlo.no_such_op"):
        _call("mhlo.no_such_op", ["tensor<2xf32>"], ["tensor<2xf32>"])


# ---------------------------------------------------------------- targets with no portable meaning


@pytest.mark.parametrize("target,where", [
    ("triton_kernel_call_ffi", "GPU"), ("__cudnn$fusion", "cuDNN"), ("mosaic_gpu_v2", "CUDA GPU"),
    ("xla_ffi_python_cpu_callback", "exporting process"), ("tf.call_tf_function", "TensorFlow")])
def test_unrunnable_targets_name_what_they_need(target, where):
    with pytest.raises(UnsupportedError, match=f"{re.escape(target)}.*{where}"):
        _call(target, ["tensor<2xf32>"], ["tensor<2xf32>"])


def test_allocate_buffer():
    text = """
func.func @main() -> tensor<2x3xf32> {
  %0 = stablehlo.custom_call @AllocateBuffer() : () -> tensor<2x3xf32>
  func.return %0 : tensor<2x3xf32>
}"""
    out = np.asarray(shlo2jax.load(text)())
    assert out.shape == (2, 3) and out.dtype == np.float32


def test_user_registration_before_the_builtins_load_is_kept():
    # The built-in families are imported at the first load; a rule registered before
    # (in a fresh process) must not be replaced by the built-in one for that target.
    import subprocess
    import sys
    import textwrap
    script = textwrap.dedent("""
        import sys
        import numpy as np
        import shlo2jax
        assert "shlo2jax.ops" not in sys.modules
        @shlo2jax.register_custom_call("lapack_spotrf_ffi")
        def potrf(ctx, op, a):
            return a + 1, np.int32(7)
        text = '''func.func @main(%a: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<i32>) {
          %0:2 = stablehlo.custom_call @lapack_spotrf_ffi(%a) {mhlo.backend_config = {uplo = 76 : ui8}}
              : (tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<i32>)
          func.return %0#0, %0#1 : tensor<2x2xf32>, tensor<i32>
        }'''
        out, info = shlo2jax.load(text)(np.eye(2, dtype=np.float32))
        assert "shlo2jax.ops" in sys.modules
        print(np.asarray(out).tolist(), int(info))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[[2.0,", "1.0],", "[1.0,", "2.0]]", "7"]


@pytest.mark.parametrize("platform,target", [("cuda", "cu_threefry2x32_ffi"),
                                             ("rocm", "hip_threefry2x32_ffi")])
def test_gpu_threefry_kernel_export(platform, target):
    import jax
    from jax._src import config
    fn = lambda k: jax.random.uniform(jax.random.wrap_key_data(k), (5, 3))  # noqa: E731
    key = np.array([0, 42], np.uint32)
    with config.threefry_gpu_kernel_lowering(True):
        prog = _export(fn, platform, target, key)
    np.testing.assert_array_equal(np.asarray(prog(key)), _on_cpu(fn, key)[0])


def test_dce_sink_has_no_effect_on_values():
    text = """
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  stablehlo.custom_call @dce_sink(%x) {api_version = 4 : i32, has_side_effect = true} : (tensor<3xf32>) -> ()
  %0 = stablehlo.negate %x : tensor<3xf32>
  func.return %0 : tensor<3xf32>
}"""
    x = np.array([1.0, -2.0, 3.0], np.float32)
    np.testing.assert_array_equal(np.asarray(shlo2jax.load(text)(x)), -x)
