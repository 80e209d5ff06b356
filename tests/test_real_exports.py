"""Modules as other exporters write them load without hand edits and compute the right values.

torch, torch_xla, torchax and tensorflow are not dependencies: each module below is
written by hand to reproduce what that exporter emits (module and argument
attributes, legacy op spellings, tuples, weights as arguments, custom calls, the
wrapper functions jax2tf puts around an `XlaCallModule` body...). Expected values
are computed with numpy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import shlo2jax
from shlo2jax import register_composite
from shlo2jax.errors import UnsupportedError
from shlo2jax.registry import COMPOSITE_RULES

RNG = np.random.default_rng(7)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _outputs(result):
    return [np.asarray(x) for x in (result if isinstance(result, (tuple, list)) else (result,))]


# ---------------------------------------------------------------- PyTorch: torch_xla

# `exported_program_to_stablehlo(torch.export.export(MLP(), (x,)))`: the module is
# XLA's HLO converted back to StableHLO. Weights come first as arguments (in
# state_dict order), the user input last; ops carry `xla_shape`/`result_layout`
# attributes, matmuls are the legacy `stablehlo.dot`, locations hold the FX node
# metadata as JSON.
TORCH_XLA_MLP = r"""
#loc1 = loc("p0.1")
module @IrToHlo.24 attributes {mhlo.cross_program_prefetches = [], mhlo.input_output_alias = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<16xf32> loc("p0.1"), %arg1: tensor<16x10xf32> loc("p1.2"), %arg2: tensor<4xf32> loc("p2.3"), %arg3: tensor<4x16xf32> loc("p3.4"), %arg4: tensor<2x10xf32> loc("p4.5")) -> tensor<2x4xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<2x16xf32> loc(#loc2)
    %0 = stablehlo.transpose %arg1, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[10,16]{0,1}"} : (tensor<16x10xf32>) -> tensor<10x16xf32> loc(#loc2)
    %1 = stablehlo.dot %arg4, %0, precision = [DEFAULT, DEFAULT] : (tensor<2x10xf32>, tensor<10x16xf32>) -> tensor<2x16xf32> loc(#loc2)
    %2 = stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<16xf32>) -> tensor<2x16xf32> loc(#loc2)
    %3 = stablehlo.add %1, %2 : tensor<2x16xf32> loc(#loc2)
    %4 = stablehlo.maximum %3, %cst : tensor<2x16xf32> loc(#loc3)
    %5 = stablehlo.transpose %arg3, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[16,4]{0,1}"} : (tensor<4x16xf32>) -> tensor<16x4xf32> loc(#loc4)
    %6 = stablehlo.dot %4, %5, precision = [DEFAULT, DEFAULT] : (tensor<2x16xf32>, tensor<16x4xf32>) -> tensor<2x4xf32> loc(#loc4)
    %7 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<4xf32>) -> tensor<2x4xf32> loc(#loc4)
    %8 = stablehlo.add %6, %7 : tensor<2x4xf32> loc(#loc4)
    return %8 : tensor<2x4xf32> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc = loc(unknown)
#loc2 = loc("{\22stack_trace\22: \22  File \\\22model.py\\\22, line 12, in forward\\n    x = self.fc1(x)\\n\22, \22nn_module_stack\22: \22L__self__,,__main__.MLP;L__self___fc1,fc1,torch.nn.modules.linear.Linear\22, \22source_fn_stack\22: \22linear\22}")
#loc3 = loc("{\22source_fn_stack\22: \22relu\22}")
#loc4 = loc("{\22source_fn_stack\22: \22linear_1\22}")
"""


def test_torch_xla_mlp_weights_as_arguments():
    b1, w1, b2, w2, x = _f32(16), _f32(16, 10), _f32(4), _f32(4, 16), _f32(2, 10)
    program = shlo2jax.load(TORCH_XLA_MLP)
    assert [a.shape for a in program.entry.in_avals] == [(16,), (16, 10), (4,), (4, 16), (2, 10)]
    (got,) = _outputs(program(b1, w1, b2, w2, x))
    expected = np.maximum(x @ w1.T + b1, 0) @ w2.T + b2
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


# An embedding lookup and top-k as torch_xla emits them from older releases: the
# result is one tuple (HLO's root tuple, not flattened), indices are converted to
# ui32 before the gather, the comparison has no compare type, and `torch.topk` is an MHLO op carried as a
# custom call (`@mhlo.topk` with `mhlo.attributes`).
TORCH_XLA_EMBED_TOPK = r"""
module @IrToHlo.31 attributes {mhlo.cross_program_prefetches = [], mhlo.dynamic_parameter_bindings = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<8x4xf32>, %arg1: tensor<3xi64>) -> tuple<tensor<3x2xf32>, tensor<3x2xi64>, tensor<3xi1>> {
    %c = stablehlo.constant dense<4> : tensor<3xi64>
    %0 = stablehlo.convert %arg1 : (tensor<3xi64>) -> tensor<3xui32>
    %1 = "stablehlo.gather"(%arg0, %0) {dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 4>} : (tensor<8x4xf32>, tensor<3xui32>) -> tensor<3x4xf32>
    %2:2 = stablehlo.custom_call @mhlo.topk(%1) {mhlo.attributes = {k = 2 : i64, largest = true}, mhlo.version = 1 : i64} : (tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xi32>)
    %3 = stablehlo.convert %2#1 : (tensor<3x2xi32>) -> tensor<3x2xi64>
    %4 = stablehlo.compare  LT, %arg1, %c : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
    %5 = stablehlo.tuple %2#0, %3, %4 {xla_shape = "(f32[3,2]{1,0}, s64[3,2]{1,0}, pred[3]{0})"} : tuple<tensor<3x2xf32>, tensor<3x2xi64>, tensor<3xi1>>
    return %5 : tuple<tensor<3x2xf32>, tensor<3x2xi64>, tensor<3xi1>>
  }
}
"""


def test_torch_xla_tuple_result_gather_and_topk():
    table = RNG.permutation(32).reshape(8, 4).astype(np.float32)
    ids = np.array([5, 0, 7], np.int64)
    # The one tuple-typed result comes back as a Python tuple.
    values, indices, small = _outputs(shlo2jax.load(TORCH_XLA_EMBED_TOPK)(table, ids))
    rows = table[ids]
    order = np.argsort(-rows, axis=1, kind="stable")[:, :2]
    np.testing.assert_array_equal(values, np.take_along_axis(rows, order, axis=1))
    assert indices.dtype == np.int64
    np.testing.assert_array_equal(indices, order)
    np.testing.assert_array_equal(small, ids < 4)


# `torch_xla.experimental.mark_pattern_utils.StableHLOCompositeBuilder` around
# F.scaled_dot_product_attention: a `stablehlo.composite` whose decomposition is
# a private function of the module.
TORCH_XLA_SDPA_COMPOSITE = r"""
module @IrToHlo.40 attributes {mhlo.cross_program_prefetches = [], mhlo.input_output_alias = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<2x3x4xf32>, %arg1: tensor<2x3x4xf32>, %arg2: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
    %0 = stablehlo.composite "test.sdpa" %arg0, %arg1, %arg2 {composite_attributes = {scale = 5.000000e-01 : f32}, decomposition = @test.sdpa.impl} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
    return %0 : tensor<2x3x4xf32>
  }
  func.func private @test.sdpa.impl(%arg0: tensor<2x3x4xf32>, %arg1: tensor<2x3x4xf32>, %arg2: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %cst_1 = stablehlo.constant dense<5.000000e-01> : tensor<2x3x4xf32>
    %0 = stablehlo.multiply %arg0, %cst_1 : tensor<2x3x4xf32>
    %1 = stablehlo.dot_general %0, %arg1, batching_dims = [0] x [0], contracting_dims = [2] x [2], precision = [DEFAULT, DEFAULT] : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x3xf32>
    %2 = stablehlo.reduce(%1 init: %cst) applies stablehlo.maximum across dimensions = [2] : (tensor<2x3x3xf32>, tensor<f32>) -> tensor<2x3xf32>
    %3 = stablehlo.broadcast_in_dim %2, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<2x3x3xf32>
    %4 = stablehlo.subtract %1, %3 : tensor<2x3x3xf32>
    %5 = stablehlo.exponential %4 : tensor<2x3x3xf32>
    %6 = stablehlo.reduce(%5 init: %cst_0) applies stablehlo.add across dimensions = [2] : (tensor<2x3x3xf32>, tensor<f32>) -> tensor<2x3xf32>
    %7 = stablehlo.broadcast_in_dim %6, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<2x3x3xf32>
    %8 = stablehlo.divide %5, %7 : tensor<2x3x3xf32>
    %9 = stablehlo.dot_general %8, %arg2, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x3x3xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
    return %9 : tensor<2x3x4xf32>
  }
}
"""


def _attention(q, k, v, scale):
    s = np.einsum("bqd,bkd->bqk", q * scale, k)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bqk,bkd->bqd", p / p.sum(-1, keepdims=True), v)


@pytest.fixture
def clean_composites():
    saved = dict(COMPOSITE_RULES)
    yield
    COMPOSITE_RULES.clear()
    COMPOSITE_RULES.update(saved)


def test_torch_xla_composite_decomposition_and_override(clean_composites):
    q, k, v = _f32(2, 3, 4), _f32(2, 3, 4), _f32(2, 3, 4)
    (got,) = _outputs(shlo2jax.load(TORCH_XLA_SDPA_COMPOSITE)(q, k, v))
    np.testing.assert_allclose(got, _attention(q, k, v, 0.5), rtol=1e-5, atol=1e-6)

    import jax

    @register_composite("test.sdpa")
    def sdpa(q, k, v, *, scale):
        seen["scale"] = scale
        return jax.nn.dot_product_attention(q[:, :, None], k[:, :, None], v[:, :, None],
                                            scale=scale)[:, :, 0]

    seen = {}
    (got,) = _outputs(shlo2jax.load(TORCH_XLA_SDPA_COMPOSITE)(q, k, v))
    assert seen["scale"] == pytest.approx(0.5)
    np.testing.assert_allclose(got, _attention(q, k, v, 0.5), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- PyTorch: torchax (torch_xla2)

# `torchax.export.exported_program_to_stablehlo` goes through jax.export: a
# public @main with `mhlo.layout_mode`/`mhlo.sharding` argument attributes,
# `jax.result_info` names, a dynamic batch dimension checked by a
# `shape_assertion` and passed to the wrapped body as a dimension argument.
TORCHAX_DYNAMIC_BATCH = r"""
module @jit_func attributes {jax.uses_shape_polymorphism = true, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<5x3xf32> {mhlo.layout_mode = "default", mhlo.sharding = "{replicated}"}, %arg1: tensor<5xf32> {mhlo.layout_mode = "default", mhlo.sharding = "{replicated}"}, %arg2: tensor<?x3xf32> {mhlo.layout_mode = "default", mhlo.sharding = "{replicated}"}) -> (tensor<?x5xf32> {jax.result_info = "[0]", mhlo.layout_mode = "default"}) {
    %c = stablehlo.constant dense<1> : tensor<i64>
    %0 = stablehlo.get_dimension_size %arg2, dim = 0 : (tensor<?x3xf32>) -> tensor<i32>
    %1 = stablehlo.convert %0 : (tensor<i32>) -> tensor<i64>
    %2 = stablehlo.compare  GE, %1, %c,  SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.custom_call @shape_assertion(%2, %1) {api_version = 2 : i32, error_message = "Input shapes do not match the polymorphic shapes specification. Expected value >= 1 for dimension variable 's0'.", has_side_effect = true} : (tensor<i1>, tensor<i64>) -> ()
    %3 = call @_wrapped_jax_export_main(%1, %arg0, %arg1, %arg2) : (tensor<i64>, tensor<5x3xf32>, tensor<5xf32>, tensor<?x3xf32>) -> tensor<?x5xf32>
    return %3 : tensor<?x5xf32>
  }
  func.func private @_wrapped_jax_export_main(%arg0: tensor<i64> {jax.global_constant = "s0"}, %arg1: tensor<5x3xf32> {mhlo.layout_mode = "default", mhlo.sharding = "{replicated}"}, %arg2: tensor<5xf32> {mhlo.layout_mode = "default", mhlo.sharding = "{replicated}"}, %arg3: tensor<?x3xf32> {mhlo.layout_mode = "default", mhlo.sharding = "{replicated}"}) -> (tensor<?x5xf32> {jax.result_info = "[0]", mhlo.layout_mode = "default"}) {
    %0 = stablehlo.transpose %arg1, dims = [1, 0] : (tensor<5x3xf32>) -> tensor<3x5xf32>
    %1 = stablehlo.dot_general %arg3, %0, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<?x3xf32>, tensor<3x5xf32>) -> tensor<?x5xf32>
    %2 = stablehlo.reshape %arg2 : (tensor<5xf32>) -> tensor<1x5xf32>
    %3 = stablehlo.convert %arg0 : (tensor<i64>) -> tensor<i32>
    %4 = stablehlo.reshape %3 : (tensor<i32>) -> tensor<1xi32>
    %c = stablehlo.constant dense<5> : tensor<1xi32>
    %5 = stablehlo.concatenate %4, %c, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %6 = stablehlo.dynamic_broadcast_in_dim %2, %5, dims = [0, 1] : (tensor<1x5xf32>, tensor<2xi32>) -> tensor<?x5xf32>
    %7 = stablehlo.add %1, %6 : tensor<?x5xf32>
    %8 = stablehlo.tanh %7 : tensor<?x5xf32>
    return %8 : tensor<?x5xf32>
  }
}
"""


@pytest.mark.parametrize("batch", [1, 4])
def test_torchax_dynamic_batch(batch):
    w, b, x = _f32(5, 3), _f32(5), _f32(batch, 3)
    (got,) = _outputs(shlo2jax.load(TORCHAX_DYNAMIC_BATCH)(w, b, x))
    np.testing.assert_allclose(got, np.tanh(x @ w.T + b), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- TensorFlow: XlaCallModule bodies

# The module a user pulls out of a `tf.XlaCallModule` op written by jax2tf with
# `native_serialization_platforms=("cpu", "cuda", "tpu")`: the first argument is
# the platform index (a `jax.global_constant`), each platform's branch has its
# own kernels (LAPACK, cuSOLVER, the TPU's Qr), arguments carry
# `mhlo.sharding = "{replicated}"`.
def _multi_platform_qr_module():
    import jax
    from jax import export

    exported = export.export(jax.jit(lambda a: jax.numpy.linalg.qr(a)),
                             platforms=("cpu", "cuda", "tpu"))(
        jax.ShapeDtypeStruct((4, 3), np.float32))
    return exported.mlir_module()


@pytest.mark.parametrize("platform_index", [0, 1, 2])
def test_tf_xla_call_module_platform_index(platform_index):
    text = _multi_platform_qr_module()
    for target in ("lapack_sgeqrf_ffi", "cusolver_geqrf_ffi", "Qr"):
        assert f"@{target}(" in text
    assert 'jax.global_constant = "_platform_index"' in text
    a = _f32(4, 3)
    q, r = _outputs(shlo2jax.load(text)(np.int32(platform_index), a))
    np.testing.assert_allclose(q @ r, a, atol=1e-5)
    np.testing.assert_allclose(q.T @ q, np.eye(3), atol=1e-5)
    np.testing.assert_allclose(np.tril(r, -1), 0, atol=1e-6)
    np.testing.assert_allclose(np.abs(np.diag(r)), np.abs(np.linalg.qr(a)[1].diagonal()),
                               rtol=1e-4)


# The same, written the way TensorFlow's own tests write XlaCallModule modules:
# the platform index and a dimension argument (dim_args_spec) are leading
# arguments of @main; the module has `tf.`-prefixed attributes the TF bridge adds.
TF_PLATFORMS_AND_DIM_ARGS = r"""
module @jit_f.0 attributes {jax.uses_shape_polymorphism = true, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32, tf.versions = {bad_consumers = [], min_consumer = 12 : i32, producer = 1645 : i32}} {
  func.func public @main(%arg_platform_idx: tensor<i32> {jax.global_constant = "_platform_index"}, %arg_dim0: tensor<i32> {jax.global_constant = "b"}, %arg0: tensor<?xf32> {mhlo.sharding = "{replicated}", tf.aliasing_output = 0 : i32}, %arg1: tensor<?xf32> {mhlo.sharding = "{replicated}"}) -> (tensor<?xf32> {jax.result_info = "", mhlo.sharding = "{replicated}"}, tensor<i32>) {
    %res = "stablehlo.case"(%arg_platform_idx) ({
      %0 = stablehlo.add %arg0, %arg1 : tensor<?xf32>
      stablehlo.return %0 : tensor<?xf32>
    }, {
      %1 = stablehlo.subtract %arg0, %arg1 : tensor<?xf32>
      stablehlo.return %1 : tensor<?xf32>
    }) : (tensor<i32>) -> tensor<?xf32>
    return %res, %arg_dim0 : tensor<?xf32>, tensor<i32>
  }
}
"""


@pytest.mark.parametrize("platform_index,sign", [(0, 1.0), (1, -1.0)])
def test_tf_platform_index_and_dimension_arguments(platform_index, sign):
    x, y = _f32(3), _f32(3)
    got, dim = _outputs(shlo2jax.load(TF_PLATFORMS_AND_DIM_ARGS)(
        np.int32(platform_index), np.int32(3), x, y))
    np.testing.assert_allclose(got, x + sign * y, rtol=1e-6)
    assert int(dim) == 3


# A jax2tf module that calls back into TensorFlow (`jax2tf.call_tf(...,
# call_tf_graph=True)`): the TF function is not in the module, so loading names it.
TF_CALL_TF_FUNCTION = r"""
module @jit_f attributes {jax.uses_shape_polymorphism = false, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3xf32> {mhlo.sharding = "{replicated}"}) -> (tensor<3xf32> {jax.result_info = ""}) {
    %0 = stablehlo.custom_call @tf.call_tf_function(%arg0) {api_version = 2 : i32, has_side_effect = true, tf.backend_config = {called_index = 0 : i64, has_token_input_output = false}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}
"""


def test_tf_call_tf_function_is_reported_and_can_be_supplied():
    with pytest.raises(UnsupportedError, match="tf.call_tf_function.*TensorFlow"):
        shlo2jax.load(TF_CALL_TF_FUNCTION)
    from shlo2jax import registry
    saved = registry.CUSTOM_CALL_RULES["tf.call_tf_function"]
    try:
        # The user supplies the TF function's JAX equivalent for the called index.
        @shlo2jax.register_custom_call("tf.call_tf_function")
        def tf_function(ctx, op, x):
            return x * 3

        x = _f32(3)
        (got,) = _outputs(shlo2jax.load(TF_CALL_TF_FUNCTION)(x))
        np.testing.assert_allclose(got, 3 * x)
    finally:
        registry.CUSTOM_CALL_RULES["tf.call_tf_function"] = saved


# TensorFlow's SavedModel -> StableHLO converter: a tf_saved_model module whose
# entry is `@serving_default` (no @main), with `tf_saved_model.*` and
# `tf.entry_function` attributes, `mhlo.erf` from tf.math.erf carried as an
# MHLO custom call.
TF_SAVED_MODEL = r"""
module attributes {tf.versions = {bad_consumers = [], min_consumer = 12 : i32, producer = 1645 : i32}, tf_saved_model.semantics} {
  func.func @serving_default(%arg0: tensor<1x4xf32> {tf_saved_model.index_path = ["x"]}) -> (tensor<1x4xf32> {tf_saved_model.index_path = ["output_0"]}) attributes {tf.entry_function = {control_outputs = "", inputs = "serving_default_x:0", outputs = "PartitionedCall:0"}, tf_saved_model.exported_names = ["serving_default"]} {
    %cst = stablehlo.constant dense<[[1.0, -2.0, 0.5, 3.0]]> : tensor<1x4xf32>
    %0 = stablehlo.multiply %arg0, %cst : tensor<1x4xf32>
    %1 = stablehlo.custom_call @mhlo.erf(%0) {mhlo.attributes = {}, mhlo.version = 1 : i64} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    return %1 : tensor<1x4xf32>
  }
}
"""


def test_tf_saved_model_module():
    program = shlo2jax.load(TF_SAVED_MODEL)
    x = _f32(1, 4)
    (got,) = _outputs(program["serving_default"](x))
    expected = np.vectorize(math.erf)(x * np.array([[1.0, -2.0, 0.5, 3.0]]))
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    (entry,) = _outputs(program(x))  # the only public function is the entry
    np.testing.assert_array_equal(entry, got)


# torch_xla's host offloading (`torch_xla.experimental.stablehlo_custom_call.place_to_host`
# / `place_to_device`) and a user kernel called through `stablehlo_custom_call`:
# arguments carry `mhlo.frontend_attributes`/`mhlo.sharding`, the custom calls
# `api_version`, `has_side_effect` and a string `backend_config`.
TORCH_XLA_OFFLOAD_AND_USER_KERNEL = r"""
module @SyncTensorsGraph.12 attributes {mhlo.cross_program_prefetches = [], mhlo.input_output_alias = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<4x4xf32> {mhlo.frontend_attributes = {_xla_buffer_placement = "device"}, mhlo.sharding = "{replicated}"}) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
    %0 = stablehlo.custom_call @MoveToHost(%arg0) {api_version = 1 : i32, backend_config = "", has_side_effect = false} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %1 = stablehlo.custom_call @MoveToDevice(%0) {api_version = 1 : i32, backend_config = ""} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %2 = stablehlo.custom_call @my_lib.scale_rows(%1) {api_version = 1 : i32, backend_config = "{\"factor\": 2.5}", has_side_effect = false} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    return %1, %2 : tensor<4x4xf32>, tensor<4x4xf32>
  }
}
"""


def test_torch_xla_host_offload_and_user_kernel():
    with pytest.raises(UnsupportedError, match="my_lib.scale_rows"):
        shlo2jax.load(TORCH_XLA_OFFLOAD_AND_USER_KERNEL)
    import json

    from shlo2jax import registry

    def prepare(op):
        return json.loads(op.attrs["backend_config"])["factor"]

    try:
        @shlo2jax.register_custom_call("my_lib.scale_rows", prepare=prepare)
        def scale_rows(ctx, op, x):
            return x * op.params  # the factor prepare read from the backend config

        x = _f32(4, 4)
        moved, scaled = _outputs(shlo2jax.load(TORCH_XLA_OFFLOAD_AND_USER_KERNEL)(x))
        np.testing.assert_array_equal(moved, x)
        np.testing.assert_allclose(scaled, 2.5 * x, rtol=1e-6)
    finally:
        registry.CUSTOM_CALL_RULES.pop("my_lib.scale_rows", None)


# jax2tf with ordered effects: a leading token argument and result (`jax.token`).
TF_WITH_TOKENS = r"""
module @jit_f attributes {jax.uses_shape_polymorphism = false, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: !stablehlo.token {jax.token = true}, %arg1: tensor<3xf32> {mhlo.sharding = "{replicated}"}) -> (!stablehlo.token {jax.token = true}, tensor<3xf32> {jax.result_info = ""}) {
    %0 = stablehlo.sine %arg1 : tensor<3xf32>
    return %arg0, %0 : !stablehlo.token, tensor<3xf32>
  }
}
"""


def test_tf_module_with_token_arguments():
    x = _f32(3)
    token, got = shlo2jax.load(TF_WITH_TOKENS)(shlo2jax.TOKEN, x)
    np.testing.assert_allclose(np.asarray(got), np.sin(x), rtol=1e-6)


# What the `module` attribute of an XlaCallModule op holds (version >= 5): the
# module serialized as a VHLO portable artifact for the minimum supported version.
@pytest.mark.parametrize("text", [TF_PLATFORMS_AND_DIM_ARGS, TORCHAX_DYNAMIC_BATCH],
                         ids=["platforms", "torchax"])
def test_xla_call_module_portable_artifact_bytes(text):
    from jaxlib.mlir.dialects import stablehlo as shlo
    artifact = shlo.serialize_portable_artifact_str(text, shlo.get_minimum_version())
    assert isinstance(artifact, bytes)
    program = shlo2jax.load(artifact)
    if text is TF_PLATFORMS_AND_DIM_ARGS:
        x, y = _f32(3), _f32(3)
        got, _ = _outputs(program(np.int32(1), np.int32(3), x, y))
        np.testing.assert_allclose(got, x - y, rtol=1e-6)
    else:
        w, b, x = _f32(5, 3), _f32(5), _f32(2, 3)
        (got,) = _outputs(program(w, b, x))
        np.testing.assert_allclose(got, np.tanh(x @ w.T + b), rtol=1e-5, atol=1e-6)


# A torch_xla training step (SyncTensorsGraph): the updated parameter aliases its
# input buffer (`mhlo.input_output_alias`), the learning rate is a scalar argument.
TORCH_XLA_SGD_STEP = r"""
module @SyncTensorsGraph.9 attributes {mhlo.cross_program_prefetches = [], mhlo.input_output_alias = [{alias = {kind = "may_alias", parameter_index = array<i64>, parameter_number = 0 : i64}, output_index = array<i64: 0>}], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>, %arg2: tensor<f32>) -> tuple<tensor<4xf32>> {
    %0 = stablehlo.broadcast_in_dim %arg2, dims = [] {xla_shape = "f32[4]{0}"} : (tensor<f32>) -> tensor<4xf32>
    %1 = stablehlo.multiply %arg1, %0 : tensor<4xf32>
    %2 = stablehlo.subtract %arg0, %1 : tensor<4xf32>
    %3 = stablehlo.tuple %2 : tuple<tensor<4xf32>>
    return %3 : tuple<tensor<4xf32>>
  }
}
"""


def test_torch_xla_training_step_with_aliasing():
    w, g = _f32(4), _f32(4)
    (updated,) = _outputs(shlo2jax.load(TORCH_XLA_SGD_STEP)(w, g, np.float32(0.1)))
    np.testing.assert_allclose(updated, w - np.float32(0.1) * g, rtol=1e-6)
