module @IrToHlo.29 attributes {mhlo.cross_program_prefetches = [], mhlo.input_output_alias = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4x8xf32>, %arg2: tensor<3x6xf32>, %arg3: tensor<3x6xi64>, %arg4: tensor<30x8xf32>) -> tensor<3x4xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.reshape %arg3 : (tensor<3x6xi64>) -> tensor<18xi64>
    %1 = stablehlo.convert %0 : (tensor<18xi64>) -> tensor<18xui32>
    %2 = "stablehlo.gather"(%arg4, %1) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 8>}> : (tensor<30x8xf32>, tensor<18xui32>) -> tensor<18x8xf32>
    %3 = stablehlo.reshape %2 : (tensor<18x8xf32>) -> tensor<3x6x8xf32>
    %4 = stablehlo.broadcast_in_dim %arg2, dims = [0, 1] : (tensor<3x6xf32>) -> tensor<3x6x8xf32>
    %5 = stablehlo.multiply %3, %4 : tensor<3x6x8xf32>
    %6 = stablehlo.reduce(%5 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<3x6x8xf32>, tensor<f32>) -> tensor<3x8xf32>
    %7 = stablehlo.transpose %arg1, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[8,4]{0,1}"} : (tensor<4x8xf32>) -> tensor<8x4xf32>
    %8 = stablehlo.dot_general %6, %7, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x8xf32>, tensor<8x4xf32>) -> tensor<3x4xf32>
    %9 = stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<4xf32>) -> tensor<3x4xf32>
    %10 = stablehlo.add %8, %9 : tensor<3x4xf32>
    return %10 : tensor<3x4xf32>
  }
}
