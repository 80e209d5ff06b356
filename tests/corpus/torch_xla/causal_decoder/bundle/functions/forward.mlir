module @IrToHlo.538 attributes {mhlo.cross_program_prefetches = [], mhlo.input_output_alias = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<40x16xf32>, %arg1: tensor<16xf32>, %arg2: tensor<16xf32>, %arg3: tensor<16x32xf32>, %arg4: tensor<32xf32>, %arg5: tensor<32x16xf32>, %arg6: tensor<16xf32>, %arg7: tensor<16xf32>, %arg8: tensor<16x16xf32>, %arg9: tensor<48xf32>, %arg10: tensor<48x16xf32>, %arg11: tensor<16xf32>, %arg12: tensor<16xf32>, %arg13: tensor<16x32xf32>, %arg14: tensor<32xf32>, %arg15: tensor<32x16xf32>, %arg16: tensor<16xf32>, %arg17: tensor<16xf32>, %arg18: tensor<16x16xf32>, %arg19: tensor<48xf32>, %arg20: tensor<48x16xf32>, %arg21: tensor<16xf32>, %arg22: tensor<7x16xf32>, %arg23: tensor<2x7xi64>, %arg24: tensor<40x16xf32>, %arg25: tensor<16xf32>, %arg26: tensor<i1>, %arg27: tensor<16xf32>, %arg28: tensor<16xf32>, %arg29: tensor<16xf32>, %arg30: tensor<16xf32>) -> tensor<2x7x40xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<2x7x32xf32>
    %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<7x7xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<7x7xf32>
    %c = stablehlo.constant dense<0> : tensor<7x7xi64>
    %cst_2 = stablehlo.constant dense<0.594603539> : tensor<2x2x8x7xf32>
    %cst_3 = stablehlo.constant dense<0.594603539> : tensor<2x2x7x8xf32>
    %cst_4 = stablehlo.constant dense<0.000000e+00> : tensor<14xf32>
    %cst_5 = stablehlo.constant dense<1.000000e+00> : tensor<14xf32>
    %cst_6 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %c_7 = stablehlo.constant dense<[0, 1, 2, 3, 4, 5, 6]> : tensor<7xi64>
    %cst_8 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.reshape %arg23 : (tensor<2x7xi64>) -> tensor<14xi64>
    %1 = stablehlo.convert %0 : (tensor<14xi64>) -> tensor<14xui32>
    %2 = "stablehlo.gather"(%arg24, %1) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 16>}> : (tensor<40x16xf32>, tensor<14xui32>) -> tensor<14x16xf32>
    %3 = stablehlo.reshape %2 : (tensor<14x16xf32>) -> tensor<2x7x16xf32>
    %4 = stablehlo.broadcast_in_dim %arg22, dims = [1, 2] : (tensor<7x16xf32>) -> tensor<2x7x16xf32>
    %5 = stablehlo.add %3, %4 : tensor<2x7x16xf32>
    %6 = stablehlo.reshape %5 : (tensor<2x7x16xf32>) -> tensor<1x14x16xf32>
    %output, %batch_mean, %batch_var = "stablehlo.batch_norm_training"(%6, %cst_5, %cst_4) <{epsilon = 9.99999974E-6 : f32, feature_index = 1 : i64}> : (tensor<1x14x16xf32>, tensor<14xf32>, tensor<14xf32>) -> (tensor<1x14x16xf32>, tensor<14xf32>, tensor<14xf32>)
    %7 = stablehlo.broadcast_in_dim %arg25, dims = [2] : (tensor<16xf32>) -> tensor<2x7x16xf32>
    %8 = stablehlo.reshape %output : (tensor<1x14x16xf32>) -> tensor<2x7x16xf32>
    %9 = stablehlo.broadcast_in_dim %arg21, dims = [2] : (tensor<16xf32>) -> tensor<2x7x16xf32>
    %10 = stablehlo.multiply %8, %9 : tensor<2x7x16xf32>
    %11 = stablehlo.add %7, %10 : tensor<2x7x16xf32>
    %12 = stablehlo.transpose %11, dims = [1, 0, 2] {result_layout = dense<[2, 0, 1]> : tensor<3xindex>, xla_shape = "f32[7,2,16]{2,0,1}"} : (tensor<2x7x16xf32>) -> tensor<7x2x16xf32>
    %13 = stablehlo.transpose %arg20, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[16,48]{0,1}"} : (tensor<48x16xf32>) -> tensor<16x48xf32>
    %14 = stablehlo.broadcast_in_dim %13, dims = [1, 2] : (tensor<16x48xf32>) -> tensor<7x16x48xf32>
    %15 = stablehlo.dot_general %12, %14, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<7x2x16xf32>, tensor<7x16x48xf32>) -> tensor<7x2x48xf32>
    %16 = stablehlo.broadcast_in_dim %arg19, dims = [2] : (tensor<48xf32>) -> tensor<7x2x48xf32>
    %17 = stablehlo.add %15, %16 : tensor<7x2x48xf32>
    %18 = stablehlo.reshape %17 : (tensor<7x2x48xf32>) -> tensor<1x7x2x3x16xf32>
    %19 = stablehlo.transpose %18, dims = [3, 1, 2, 0, 4] {result_layout = dense<[4, 0, 2, 1, 3]> : tensor<5xindex>, xla_shape = "f32[3,7,2,1,16]{4,0,2,1,3}"} : (tensor<1x7x2x3x16xf32>) -> tensor<3x7x2x1x16xf32>
    %20 = stablehlo.reshape %19 : (tensor<3x7x2x1x16xf32>) -> tensor<3x7x2x16xf32>
    %21 = stablehlo.slice %20 [0:1, 0:7, 0:2, 0:16] : (tensor<3x7x2x16xf32>) -> tensor<1x7x2x16xf32>
    %22 = stablehlo.reshape %21 : (tensor<1x7x2x16xf32>) -> tensor<7x4x8xf32>
    %23 = stablehlo.transpose %22, dims = [1, 0, 2] {result_layout = dense<[2, 0, 1]> : tensor<3xindex>, xla_shape = "f32[4,7,8]{2,0,1}"} : (tensor<7x4x8xf32>) -> tensor<4x7x8xf32>
    %24 = stablehlo.reshape %23 : (tensor<4x7x8xf32>) -> tensor<2x2x7x8xf32>
    %25 = stablehlo.multiply %24, %cst_3 : tensor<2x2x7x8xf32>
    %26 = stablehlo.reshape %25 : (tensor<2x2x7x8xf32>) -> tensor<4x7x8xf32>
    %27 = stablehlo.slice %20 [1:2, 0:7, 0:2, 0:16] : (tensor<3x7x2x16xf32>) -> tensor<1x7x2x16xf32>
    %28 = stablehlo.reshape %27 : (tensor<1x7x2x16xf32>) -> tensor<7x4x8xf32>
    %29 = stablehlo.transpose %28, dims = [1, 0, 2] {result_layout = dense<[2, 0, 1]> : tensor<3xindex>, xla_shape = "f32[4,7,8]{2,0,1}"} : (tensor<7x4x8xf32>) -> tensor<4x7x8xf32>
    %30 = stablehlo.reshape %29 : (tensor<4x7x8xf32>) -> tensor<2x2x7x8xf32>
    %31 = stablehlo.transpose %30, dims = [0, 1, 3, 2] {result_layout = dense<[2, 3, 1, 0]> : tensor<4xindex>, xla_shape = "f32[2,2,8,7]{2,3,1,0}"} : (tensor<2x2x7x8xf32>) -> tensor<2x2x8x7xf32>
    %32 = stablehlo.multiply %31, %cst_2 : tensor<2x2x8x7xf32>
    %33 = stablehlo.reshape %32 : (tensor<2x2x8x7xf32>) -> tensor<4x8x7xf32>
    %34 = stablehlo.dot_general %26, %33, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<4x7x8xf32>, tensor<4x8x7xf32>) -> tensor<4x7x7xf32>
    %35 = stablehlo.reshape %34 : (tensor<4x7x7xf32>) -> tensor<2x2x7x7xf32>
    %36 = stablehlo.broadcast_in_dim %c_7, dims = [1] : (tensor<7xi64>) -> tensor<7x7xi64>
    %37 = stablehlo.broadcast_in_dim %c_7, dims = [0] : (tensor<7xi64>) -> tensor<7x7xi64>
    %38 = stablehlo.subtract %36, %37 : tensor<7x7xi64>
    %39 = stablehlo.compare  LE, %38, %c : (tensor<7x7xi64>, tensor<7x7xi64>) -> tensor<7x7xi1>
    %40 = stablehlo.broadcast_in_dim %arg26, dims = [] : (tensor<i1>) -> tensor<7x7xi1>
    %41 = stablehlo.and %39, %40 : tensor<7x7xi1>
    %42 = stablehlo.select %41, %cst_1, %cst_0 : tensor<7x7xi1>, tensor<7x7xf32>
    %43 = stablehlo.broadcast_in_dim %42, dims = [2, 3] : (tensor<7x7xf32>) -> tensor<2x2x7x7xf32>
    %44 = stablehlo.add %35, %43 : tensor<2x2x7x7xf32>
    %45 = stablehlo.reduce(%44 init: %cst_6) applies stablehlo.maximum across dimensions = [3] : (tensor<2x2x7x7xf32>, tensor<f32>) -> tensor<2x2x7xf32>
    %46 = stablehlo.broadcast_in_dim %45, dims = [0, 1, 2] : (tensor<2x2x7xf32>) -> tensor<2x2x7x7xf32>
    %47 = stablehlo.subtract %44, %46 : tensor<2x2x7x7xf32>
    %48 = stablehlo.exponential %47 : tensor<2x2x7x7xf32>
    %49 = stablehlo.reduce(%48 init: %cst_8) applies stablehlo.add across dimensions = [3] : (tensor<2x2x7x7xf32>, tensor<f32>) -> tensor<2x2x7xf32>
    %50 = stablehlo.broadcast_in_dim %49, dims = [0, 1, 2] : (tensor<2x2x7xf32>) -> tensor<2x2x7x7xf32>
    %51 = stablehlo.divide %48, %50 : tensor<2x2x7x7xf32>
    %52 = stablehlo.reshape %51 : (tensor<2x2x7x7xf32>) -> tensor<4x7x7xf32>
    %53 = stablehlo.slice %20 [2:3, 0:7, 0:2, 0:16] : (tensor<3x7x2x16xf32>) -> tensor<1x7x2x16xf32>
    %54 = stablehlo.reshape %53 : (tensor<1x7x2x16xf32>) -> tensor<7x4x8xf32>
    %55 = stablehlo.transpose %54, dims = [1, 0, 2] {result_layout = dense<[2, 0, 1]> : tensor<3xindex>, xla_shape = "f32[4,7,8]{2,0,1}"} : (tensor<7x4x8xf32>) -> tensor<4x7x8xf32>
    %56 = stablehlo.dot_general %52, %55, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<4x7x7xf32>, tensor<4x7x8xf32>) -> tensor<4x7x8xf32>
    %57 = stablehlo.reshape %56 : (tensor<4x7x8xf32>) -> tensor<2x2x7x8xf32>
    %58 = stablehlo.transpose %57, dims = [2, 0, 1, 3] {result_layout = dense<[3, 0, 2, 1]> : tensor<4xindex>, xla_shape = "f32[7,2,2,8]{3,0,2,1}"} : (tensor<2x2x7x8xf32>) -> tensor<7x2x2x8xf32>
    %59 = stablehlo.reshape %58 : (tensor<7x2x2x8xf32>) -> tensor<14x16xf32>
    %60 = stablehlo.transpose %arg18, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[16,16]{0,1}"} : (tensor<16x16xf32>) -> tensor<16x16xf32>
    %61 = stablehlo.dot_general %59, %60, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<14x16xf32>, tensor<16x16xf32>) -> tensor<14x16xf32>
    %62 = stablehlo.broadcast_in_dim %arg17, dims = [1] : (tensor<16xf32>) -> tensor<14x16xf32>
    %63 = stablehlo.add %61, %62 : tensor<14x16xf32>
    %64 = stablehlo.reshape %63 : (tensor<14x16xf32>) -> tensor<7x2x16xf32>
    %65 = stablehlo.transpose %64, dims = [1, 0, 2] {result_layout = dense<[2, 0, 1]> : tensor<3xindex>, xla_shape = "f32[2,7,16]{2,0,1}"} : (tensor<7x2x16xf32>) -> tensor<2x7x16xf32>
    %66 = stablehlo.add %5, %65 : tensor<2x7x16xf32>
    %67 = stablehlo.reshape %66 : (tensor<2x7x16xf32>) -> tensor<1x14x16xf32>
    %output_9, %batch_mean_10, %batch_var_11 = "stablehlo.batch_norm_training"(%67, %cst_5, %cst_4) <{epsilon = 9.99999974E-6 : f32, feature_index = 1 : i64}> : (tensor<1x14x16xf32>, tensor<14xf32>, tensor<14xf32>) -> (tensor<1x14x16xf32>, tensor<14xf32>, tensor<14xf32>)
    %68 = stablehlo.broadcast_in_dim %arg27, dims = [2] : (tensor<16xf32>) -> tensor<2x7x16xf32>
    %69 = stablehlo.reshape %output_9 : (tensor<1x14x16xf32>) -> tensor<2x7x16xf32>
    %70 = stablehlo.broadcast_in_dim %arg16, dims = [2] : (tensor<16xf32>) -> tensor<2x7x16xf32>
    %71 = stablehlo.multiply %69, %70 : tensor<2x7x16xf32>
    %72 = stablehlo.add %68, %71 : tensor<2x7x16xf32>
    %73 = stablehlo.reshape %72 : (tensor<2x7x16xf32>) -> tensor<14x16xf32>
    %74 = stablehlo.transpose %arg15, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[16,32]{0,1}"} : (tensor<32x16xf32>) -> tensor<16x32xf32>
    %75 = stablehlo.dot_general %73, %74, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<14x16xf32>, tensor<16x32xf32>) -> tensor<14x32xf32>
    %76 = stablehlo.broadcast_in_dim %arg14, dims = [1] : (tensor<32xf32>) -> tensor<14x32xf32>
    %77 = stablehlo.add %75, %76 : tensor<14x32xf32>
    %78 = stablehlo.reshape %77 : (tensor<14x32xf32>) -> tensor<2x7x32xf32>
    %79 = stablehlo.maximum %78, %cst : tensor<2x7x32xf32>
    %80 = stablehlo.reshape %79 : (tensor<2x7x32xf32>) -> tensor<14x32xf32>
    %81 = stablehlo.transpose %arg13, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[32,16]{0,1}"} : (tensor<16x32xf32>) -> tensor<32x16xf32>
    %82 = stablehlo.dot_general %80, %81, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<14x32xf32>, tensor<32x16xf32>) -> tensor<14x16xf32>
    %83 = stablehlo.broadcast_in_dim %arg12, dims = [1] : (tensor<16xf32>) -> tensor<14x16xf32>
    %84 = stablehlo.add %82, %83 : tensor<14x16xf32>
    %85 = stablehlo.reshape %84 : (tensor<14x16xf32>) -> tensor<2x7x16xf32>
    %86 = stablehlo.add %66, %85 : tensor<2x7x16xf32>
    %87 = stablehlo.reshape %86 : (tensor<2x7x16xf32>) -> tensor<1x14x16xf32>
    %output_12, %batch_mean_13, %batch_var_14 = "stablehlo.batch_norm_training"(%87, %cst_5, %cst_4) <{epsilon = 9.99999974E-6 : f32, feature_index = 1 : i64}> : (tensor<1x14x16xf32>, tensor<14xf32>, tensor<14xf32>) -> (tensor<1x14x16xf32>, tensor<14xf32>, tensor<14xf32>)
    %88 = stablehlo.broadcast_in_dim %arg28, dims = [2] : (tensor<16xf32>) -> tensor<2x7x16xf32>
    %89 = stablehlo.reshape %output_12 : (tensor<1x14x16xf32>) -> tensor<2x7x16xf32>
    %90 = stablehlo.broadcast_in_dim %arg11, dims = [2] : (tensor<16xf32>) -> tensor<2x7x16xf32>
    %91 = stablehlo.multiply %89, %90 : tensor<2x7x16xf32>
    %92 = stablehlo.add %88, %91 : tensor<2x7x16xf32>
    %93 = stablehlo.transpose %92, dims = [1, 0, 2] {result_layout = dense<[2, 0, 1]> : tensor<3xindex>, xla_shape = "f32[7,2,16]{2,0,1}"} : (tensor<2x7x16xf32>) -> tensor<7x2x16xf32>
    %94 = stablehlo.transpose %arg10, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[16,48]{0,1}"} : (tensor<48x16xf32>) -> tensor<16x48xf32>
    %95 = stablehlo.broadcast_in_dim %94, dims = [1, 2] : (tensor<16x48xf32>) -> tensor<7x16x48xf32>
    %96 = stablehlo.dot_general %93, %95, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<7x2x16xf32>, tensor<7x16x48xf32>) -> tensor<7x2x48xf32>
    %97 = stablehlo.broadcast_in_dim %arg9, dims = [2] : (tensor<48xf32>) -> tensor<7x2x48xf32>
    %98 = stablehlo.add %96, %97 : tensor<7x2x48xf32>
    %99 = stablehlo.reshape %98 : (tensor<7x2x48xf32>) -> tensor<1x7x2x3x16xf32>
    %100 = stablehlo.transpose %99, dims = [3, 1, 2, 0, 4] {result_layout = dense<[4, 0, 2, 1, 3]> : tensor<5xindex>, xla_shape = "f32[3,7,2,1,16]{4,0,2,1,3}"} : (tensor<1x7x2x3x16xf32>) -> tensor<3x7x2x1x16xf32>
    %101 = stablehlo.reshape %100 : (tensor<3x7x2x1x16xf32>) -> tensor<3x7x2x16xf32>
    %102 = stablehlo.slice %101 [0:1, 0:7, 0:2, 0:16] : (tensor<3x7x2x16xf32>) -> tensor<1x7x2x16xf32>
    %103 = stablehlo.reshape %102 : (tensor<1x7x2x16xf32>) -> tensor<7x4x8xf32>
    %104 = stablehlo.transpose %103, dims = [1, 0, 2] {result_layout = dense<[2, 0, 1]> : tensor<3xindex>, xla_shape = "f32[4,7,8]{2,0,1}"} : (tensor<7x4x8xf32>) -> tensor<4x7x8xf32>
    %105 = stablehlo.reshape %104 : (tensor<4x7x8xf32>) -> tensor<2x2x7x8xf32>
    %106 = stablehlo.multiply %105, %cst_3 : tensor<2x2x7x8xf32>
    %107 = stablehlo.reshape %106 : (tensor<2x2x7x8xf32>) -> tensor<4x7x8xf32>
    %108 = stablehlo.slice %101 [1:2, 0:7, 0:2, 0:16] : (tensor<3x7x2x16xf32>) -> tensor<1x7x2x16xf32>
    %109 = stablehlo.reshape %108 : (tensor<1x7x2x16xf32>) -> tensor<7x4x8xf32>
    %110 = stablehlo.transpose %109, dims = [1, 0, 2] {result_layout = dense<[2, 0, 1]> : tensor<3xindex>, xla_shape = "f32[4,7,8]{2,0,1}"} : (tensor<7x4x8xf32>) -> tensor<4x7x8xf32>
    %111 = stablehlo.reshape %110 : (tensor<4x7x8xf32>) -> tensor<2x2x7x8xf32>
    %112 = stablehlo.transpose %111, dims = [0, 1, 3, 2] {result_layout = dense<[2, 3, 1, 0]> : tensor<4xindex>, xla_shape = "f32[2,2,8,7]{2,3,1,0}"} : (tensor<2x2x7x8xf32>) -> tensor<2x2x8x7xf32>
    %113 = stablehlo.multiply %112, %cst_2 : tensor<2x2x8x7xf32>
    %114 = stablehlo.reshape %113 : (tensor<2x2x8x7xf32>) -> tensor<4x8x7xf32>
    %115 = stablehlo.dot_general %107, %114, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<4x7x8xf32>, tensor<4x8x7xf32>) -> tensor<4x7x7xf32>
    %116 = stablehlo.reshape %115 : (tensor<4x7x7xf32>) -> tensor<2x2x7x7xf32>
    %117 = stablehlo.add %116, %43 : tensor<2x2x7x7xf32>
    %118 = stablehlo.reduce(%117 init: %cst_6) applies stablehlo.maximum across dimensions = [3] : (tensor<2x2x7x7xf32>, tensor<f32>) -> tensor<2x2x7xf32>
    %119 = stablehlo.broadcast_in_dim %118, dims = [0, 1, 2] : (tensor<2x2x7xf32>) -> tensor<2x2x7x7xf32>
    %120 = stablehlo.subtract %117, %119 : tensor<2x2x7x7xf32>
    %121 = stablehlo.exponential %120 : tensor<2x2x7x7xf32>
    %122 = stablehlo.reduce(%121 init: %cst_8) applies stablehlo.add across dimensions = [3] : (tensor<2x2x7x7xf32>, tensor<f32>) -> tensor<2x2x7xf32>
    %123 = stablehlo.broadcast_in_dim %122, dims = [0, 1, 2] : (tensor<2x2x7xf32>) -> tensor<2x2x7x7xf32>
    %124 = stablehlo.divide %121, %123 : tensor<2x2x7x7xf32>
    %125 = stablehlo.reshape %124 : (tensor<2x2x7x7xf32>) -> tensor<4x7x7xf32>
    %126 = stablehlo.slice %101 [2:3, 0:7, 0:2, 0:16] : (tensor<3x7x2x16xf32>) -> tensor<1x7x2x16xf32>
    %127 = stablehlo.reshape %126 : (tensor<1x7x2x16xf32>) -> tensor<7x4x8xf32>
    %128 = stablehlo.transpose %127, dims = [1, 0, 2] {result_layout = dense<[2, 0, 1]> : tensor<3xindex>, xla_shape = "f32[4,7,8]{2,0,1}"} : (tensor<7x4x8xf32>) -> tensor<4x7x8xf32>
    %129 = stablehlo.dot_general %125, %128, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<4x7x7xf32>, tensor<4x7x8xf32>) -> tensor<4x7x8xf32>
    %130 = stablehlo.reshape %129 : (tensor<4x7x8xf32>) -> tensor<2x2x7x8xf32>
    %131 = stablehlo.transpose %130, dims = [2, 0, 1, 3] {result_layout = dense<[3, 0, 2, 1]> : tensor<4xindex>, xla_shape = "f32[7,2,2,8]{3,0,2,1}"} : (tensor<2x2x7x8xf32>) -> tensor<7x2x2x8xf32>
    %132 = stablehlo.reshape %131 : (tensor<7x2x2x8xf32>) -> tensor<14x16xf32>
    %133 = stablehlo.transpose %arg8, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[16,16]{0,1}"} : (tensor<16x16xf32>) -> tensor<16x16xf32>
    %134 = stablehlo.dot_general %132, %133, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<14x16xf32>, tensor<16x16xf32>) -> tensor<14x16xf32>
    %135 = stablehlo.broadcast_in_dim %arg7, dims = [1] : (tensor<16xf32>) -> tensor<14x16xf32>
    %136 = stablehlo.add %134, %135 : tensor<14x16xf32>
    %137 = stablehlo.reshape %136 : (tensor<14x16xf32>) -> tensor<7x2x16xf32>
    %138 = stablehlo.transpose %137, dims = [1, 0, 2] {result_layout = dense<[2, 0, 1]> : tensor<3xindex>, xla_shape = "f32[2,7,16]{2,0,1}"} : (tensor<7x2x16xf32>) -> tensor<2x7x16xf32>
    %139 = stablehlo.add %86, %138 : tensor<2x7x16xf32>
    %140 = stablehlo.reshape %139 : (tensor<2x7x16xf32>) -> tensor<1x14x16xf32>
    %output_15, %batch_mean_16, %batch_var_17 = "stablehlo.batch_norm_training"(%140, %cst_5, %cst_4) <{epsilon = 9.99999974E-6 : f32, feature_index = 1 : i64}> : (tensor<1x14x16xf32>, tensor<14xf32>, tensor<14xf32>) -> (tensor<1x14x16xf32>, tensor<14xf32>, tensor<14xf32>)
    %141 = stablehlo.broadcast_in_dim %arg29, dims = [2] : (tensor<16xf32>) -> tensor<2x7x16xf32>
    %142 = stablehlo.reshape %output_15 : (tensor<1x14x16xf32>) -> tensor<2x7x16xf32>
    %143 = stablehlo.broadcast_in_dim %arg6, dims = [2] : (tensor<16xf32>) -> tensor<2x7x16xf32>
    %144 = stablehlo.multiply %142, %143 : tensor<2x7x16xf32>
    %145 = stablehlo.add %141, %144 : tensor<2x7x16xf32>
    %146 = stablehlo.reshape %145 : (tensor<2x7x16xf32>) -> tensor<14x16xf32>
    %147 = stablehlo.transpose %arg5, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[16,32]{0,1}"} : (tensor<32x16xf32>) -> tensor<16x32xf32>
    %148 = stablehlo.dot_general %146, %147, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<14x16xf32>, tensor<16x32xf32>) -> tensor<14x32xf32>
    %149 = stablehlo.broadcast_in_dim %arg4, dims = [1] : (tensor<32xf32>) -> tensor<14x32xf32>
    %150 = stablehlo.add %148, %149 : tensor<14x32xf32>
    %151 = stablehlo.reshape %150 : (tensor<14x32xf32>) -> tensor<2x7x32xf32>
    %152 = stablehlo.maximum %151, %cst : tensor<2x7x32xf32>
    %153 = stablehlo.reshape %152 : (tensor<2x7x32xf32>) -> tensor<14x32xf32>
    %154 = stablehlo.transpose %arg3, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[32,16]{0,1}"} : (tensor<16x32xf32>) -> tensor<32x16xf32>
    %155 = stablehlo.dot_general %153, %154, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<14x32xf32>, tensor<32x16xf32>) -> tensor<14x16xf32>
    %156 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<16xf32>) -> tensor<14x16xf32>
    %157 = stablehlo.add %155, %156 : tensor<14x16xf32>
    %158 = stablehlo.reshape %157 : (tensor<14x16xf32>) -> tensor<2x7x16xf32>
    %159 = stablehlo.add %139, %158 : tensor<2x7x16xf32>
    %160 = stablehlo.reshape %159 : (tensor<2x7x16xf32>) -> tensor<1x14x16xf32>
    %output_18, %batch_mean_19, %batch_var_20 = "stablehlo.batch_norm_training"(%160, %cst_5, %cst_4) <{epsilon = 9.99999974E-6 : f32, feature_index = 1 : i64}> : (tensor<1x14x16xf32>, tensor<14xf32>, tensor<14xf32>) -> (tensor<1x14x16xf32>, tensor<14xf32>, tensor<14xf32>)
    %161 = stablehlo.broadcast_in_dim %arg30, dims = [2] : (tensor<16xf32>) -> tensor<2x7x16xf32>
    %162 = stablehlo.reshape %output_18 : (tensor<1x14x16xf32>) -> tensor<2x7x16xf32>
    %163 = stablehlo.broadcast_in_dim %arg1, dims = [2] : (tensor<16xf32>) -> tensor<2x7x16xf32>
    %164 = stablehlo.multiply %162, %163 : tensor<2x7x16xf32>
    %165 = stablehlo.add %161, %164 : tensor<2x7x16xf32>
    %166 = stablehlo.reshape %165 : (tensor<2x7x16xf32>) -> tensor<14x16xf32>
    %167 = stablehlo.transpose %arg0, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[16,40]{0,1}"} : (tensor<40x16xf32>) -> tensor<16x40xf32>
    %168 = stablehlo.dot_general %166, %167, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<14x16xf32>, tensor<16x40xf32>) -> tensor<14x40xf32>
    %169 = stablehlo.reshape %168 : (tensor<14x40xf32>) -> tensor<2x7x40xf32>
    return %169 : tensor<2x7x40xf32>
  }
}
