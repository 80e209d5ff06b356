// A two-layer MLP with a softmax head, exported from JAX with jax.export.
// Arguments: w1, b1, w2, b2, x. Try: shlo2jax run examples/mlp.mlir
module @jit_mlp attributes {jax.uses_shape_polymorphism = false, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8x16xf32>, %arg1: tensor<16xf32>, %arg2: tensor<16x4xf32>, %arg3: tensor<4xf32>, %arg4: tensor<2x8xf32>) -> (tensor<2x4xf32> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %0 = stablehlo.dot_general %arg4, %arg0, contracting_dims = [1] x [0] : (tensor<2x8xf32>, tensor<8x16xf32>) -> tensor<2x16xf32>
    %1 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<16xf32>) -> tensor<1x16xf32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<1x16xf32>) -> tensor<2x16xf32>
    %3 = stablehlo.add %0, %2 : tensor<2x16xf32>
    %4 = call @relu(%3) : (tensor<2x16xf32>) -> tensor<2x16xf32>
    %5 = stablehlo.dot_general %4, %arg2, contracting_dims = [1] x [0] : (tensor<2x16xf32>, tensor<16x4xf32>) -> tensor<2x4xf32>
    %6 = stablehlo.broadcast_in_dim %arg3, dims = [1] : (tensor<4xf32>) -> tensor<1x4xf32>
    %7 = stablehlo.broadcast_in_dim %6, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<2x4xf32>
    %8 = stablehlo.add %5, %7 : tensor<2x4xf32>
    %9 = stablehlo.reduce(%8 init: %cst_0) applies stablehlo.maximum across dimensions = [1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<2xf32>
    %10 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2xf32>
    %11 = stablehlo.maximum %10, %9 : tensor<2xf32>
    %12 = stablehlo.broadcast_in_dim %11, dims = [0] : (tensor<2xf32>) -> tensor<2x1xf32>
    %13 = stablehlo.broadcast_in_dim %12, dims = [0, 1] : (tensor<2x1xf32>) -> tensor<2x4xf32>
    %14 = stablehlo.subtract %8, %13 : tensor<2x4xf32>
    %15 = stablehlo.exponential %14 : tensor<2x4xf32>
    %16 = stablehlo.reduce(%15 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<2xf32>
    %17 = stablehlo.broadcast_in_dim %16, dims = [0] : (tensor<2xf32>) -> tensor<2x1xf32>
    %18 = stablehlo.broadcast_in_dim %17, dims = [0, 1] : (tensor<2x1xf32>) -> tensor<2x4xf32>
    %19 = stablehlo.divide %15, %18 : tensor<2x4xf32>
    return %19 : tensor<2x4xf32>
  }
  func.func private @relu(%arg0: tensor<2x16xf32>) -> tensor<2x16xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x16xf32>
    %1 = stablehlo.maximum %arg0, %0 : tensor<2x16xf32>
    return %1 : tensor<2x16xf32>
  }
}
