module @IrToHlo.64 attributes {mhlo.cross_program_prefetches = [], mhlo.input_output_alias = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<5xf32>, %arg1: tensor<5x8xf32>, %arg2: tensor<8xf32>, %arg3: tensor<8xf32>, %arg4: tensor<8xf32>, %arg5: tensor<8xf32>, %arg6: tensor<8xf32>, %arg7: tensor<8x8x3x3xf32>, %arg8: tensor<8xf32>, %arg9: tensor<8xf32>, %arg10: tensor<8xf32>, %arg11: tensor<8xf32>, %arg12: tensor<8xf32>, %arg13: tensor<8x3x3x3xf32>, %arg14: tensor<2x3x8x8xf32>) -> tensor<2x5xf32> {
    %cst = stablehlo.constant dense<6.250000e-02> : tensor<2x8xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<2x8x4x4xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<2x8x8x8xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.convolution(%arg14, %arg13) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<2x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x8x8xf32>
    %1 = stablehlo.broadcast_in_dim %arg12, dims = [1] : (tensor<8xf32>) -> tensor<2x8x8x8xf32>
    %2 = stablehlo.add %0, %1 : tensor<2x8x8x8xf32>
    %3 = "stablehlo.batch_norm_inference"(%2, %arg11, %arg10, %arg9, %arg8) <{epsilon = 9.99999974E-6 : f32, feature_index = 1 : i64}> : (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x8x8xf32>
    %4 = stablehlo.maximum %3, %cst_1 : tensor<2x8x8x8xf32>
    %5 = stablehlo.convolution(%4, %arg7) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [2, 2], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<2x8x8x8xf32>, tensor<8x8x3x3xf32>) -> tensor<2x8x4x4xf32>
    %6 = stablehlo.broadcast_in_dim %arg6, dims = [1] : (tensor<8xf32>) -> tensor<2x8x4x4xf32>
    %7 = stablehlo.add %5, %6 : tensor<2x8x4x4xf32>
    %8 = "stablehlo.batch_norm_inference"(%7, %arg5, %arg4, %arg3, %arg2) <{epsilon = 9.99999974E-6 : f32, feature_index = 1 : i64}> : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x4x4xf32>
    %9 = stablehlo.maximum %8, %cst_0 : tensor<2x8x4x4xf32>
    %10 = stablehlo.reduce(%9 init: %cst_2) applies stablehlo.add across dimensions = [2, 3] : (tensor<2x8x4x4xf32>, tensor<f32>) -> tensor<2x8xf32>
    %11 = stablehlo.multiply %10, %cst : tensor<2x8xf32>
    %12 = stablehlo.transpose %arg1, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[8,5]{0,1}"} : (tensor<5x8xf32>) -> tensor<8x5xf32>
    %13 = stablehlo.dot_general %11, %12, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x8xf32>, tensor<8x5xf32>) -> tensor<2x5xf32>
    %14 = stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<5xf32>) -> tensor<2x5xf32>
    %15 = stablehlo.add %13, %14 : tensor<2x5xf32>
    return %15 : tensor<2x5xf32>
  }
}
