module @IrToHlo.334 attributes {mhlo.cross_program_prefetches = [], mhlo.input_output_alias = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<3xf32>, %arg1: tensor<3x8xf32>, %arg2: tensor<32xf32>, %arg3: tensor<32x8xf32>, %arg4: tensor<32xf32>, %arg5: tensor<32x6xf32>, %arg6: tensor<3x4x6xf32>, %arg7: tensor<32xf32>, %arg8: tensor<32x8xf32>, %arg9: tensor<32xf32>, %arg10: tensor<32x8xf32>) -> (tensor<3x4x3xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<1x3x8xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<3x8xf32>
    %0 = stablehlo.transpose %arg10, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[8,32]{0,1}"} : (tensor<32x8xf32>) -> tensor<8x32xf32>
    %1 = stablehlo.dot_general %cst_0, %0, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x8xf32>, tensor<8x32xf32>) -> tensor<3x32xf32>
    %2 = stablehlo.broadcast_in_dim %arg9, dims = [1] : (tensor<32xf32>) -> tensor<3x32xf32>
    %3 = stablehlo.add %1, %2 : tensor<3x32xf32>
    %4 = stablehlo.reshape %3 : (tensor<3x32xf32>) -> tensor<1x3x32xf32>
    %5 = stablehlo.transpose %arg8, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[8,32]{0,1}"} : (tensor<32x8xf32>) -> tensor<8x32xf32>
    %6 = stablehlo.dot_general %cst_0, %5, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x8xf32>, tensor<8x32xf32>) -> tensor<3x32xf32>
    %7 = stablehlo.broadcast_in_dim %arg7, dims = [1] : (tensor<32xf32>) -> tensor<3x32xf32>
    %8 = stablehlo.add %6, %7 : tensor<3x32xf32>
    %9 = stablehlo.reshape %8 : (tensor<3x32xf32>) -> tensor<1x3x32xf32>
    %10 = stablehlo.transpose %arg6, dims = [1, 0, 2] {result_layout = dense<[2, 0, 1]> : tensor<3xindex>, xla_shape = "f32[4,3,6]{2,0,1}"} : (tensor<3x4x6xf32>) -> tensor<4x3x6xf32>
    %11 = stablehlo.transpose %arg5, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[6,32]{0,1}"} : (tensor<32x6xf32>) -> tensor<6x32xf32>
    %12 = stablehlo.broadcast_in_dim %11, dims = [1, 2] : (tensor<6x32xf32>) -> tensor<4x6x32xf32>
    %13 = stablehlo.dot_general %10, %12, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<4x3x6xf32>, tensor<4x6x32xf32>) -> tensor<4x3x32xf32>
    %14 = stablehlo.broadcast_in_dim %arg4, dims = [2] : (tensor<32xf32>) -> tensor<4x3x32xf32>
    %15 = stablehlo.add %13, %14 : tensor<4x3x32xf32>
    %16 = stablehlo.slice %15 [0:1, 0:3, 0:32] : (tensor<4x3x32xf32>) -> tensor<1x3x32xf32>
    %17 = stablehlo.add %9, %16 : tensor<1x3x32xf32>
    %18 = stablehlo.slice %17 [0:1, 0:3, 24:32] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %19 = stablehlo.logistic %18 : tensor<1x3x8xf32>
    %20 = stablehlo.slice %17 [0:1, 0:3, 8:16] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %21 = stablehlo.logistic %20 : tensor<1x3x8xf32>
    %22 = stablehlo.multiply %21, %cst : tensor<1x3x8xf32>
    %23 = stablehlo.slice %17 [0:1, 0:3, 0:8] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %24 = stablehlo.logistic %23 : tensor<1x3x8xf32>
    %25 = stablehlo.slice %17 [0:1, 0:3, 16:24] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %26 = stablehlo.tanh %25 : tensor<1x3x8xf32>
    %27 = stablehlo.multiply %24, %26 : tensor<1x3x8xf32>
    %28 = stablehlo.add %22, %27 : tensor<1x3x8xf32>
    %29 = stablehlo.tanh %28 : tensor<1x3x8xf32>
    %30 = stablehlo.multiply %19, %29 : tensor<1x3x8xf32>
    %31 = stablehlo.reshape %30 : (tensor<1x3x8xf32>) -> tensor<3x8xf32>
    %32 = stablehlo.dot_general %31, %5, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x8xf32>, tensor<8x32xf32>) -> tensor<3x32xf32>
    %33 = stablehlo.add %32, %7 : tensor<3x32xf32>
    %34 = stablehlo.reshape %33 : (tensor<3x32xf32>) -> tensor<1x3x32xf32>
    %35 = stablehlo.slice %15 [1:2, 0:3, 0:32] : (tensor<4x3x32xf32>) -> tensor<1x3x32xf32>
    %36 = stablehlo.add %34, %35 : tensor<1x3x32xf32>
    %37 = stablehlo.slice %36 [0:1, 0:3, 24:32] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %38 = stablehlo.logistic %37 : tensor<1x3x8xf32>
    %39 = stablehlo.slice %36 [0:1, 0:3, 8:16] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %40 = stablehlo.logistic %39 : tensor<1x3x8xf32>
    %41 = stablehlo.multiply %40, %28 : tensor<1x3x8xf32>
    %42 = stablehlo.slice %36 [0:1, 0:3, 0:8] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %43 = stablehlo.logistic %42 : tensor<1x3x8xf32>
    %44 = stablehlo.slice %36 [0:1, 0:3, 16:24] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %45 = stablehlo.tanh %44 : tensor<1x3x8xf32>
    %46 = stablehlo.multiply %43, %45 : tensor<1x3x8xf32>
    %47 = stablehlo.add %41, %46 : tensor<1x3x8xf32>
    %48 = stablehlo.tanh %47 : tensor<1x3x8xf32>
    %49 = stablehlo.multiply %38, %48 : tensor<1x3x8xf32>
    %50 = stablehlo.reshape %49 : (tensor<1x3x8xf32>) -> tensor<3x8xf32>
    %51 = stablehlo.dot_general %50, %5, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x8xf32>, tensor<8x32xf32>) -> tensor<3x32xf32>
    %52 = stablehlo.add %51, %7 : tensor<3x32xf32>
    %53 = stablehlo.reshape %52 : (tensor<3x32xf32>) -> tensor<1x3x32xf32>
    %54 = stablehlo.slice %15 [2:3, 0:3, 0:32] : (tensor<4x3x32xf32>) -> tensor<1x3x32xf32>
    %55 = stablehlo.add %53, %54 : tensor<1x3x32xf32>
    %56 = stablehlo.slice %55 [0:1, 0:3, 24:32] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %57 = stablehlo.logistic %56 : tensor<1x3x8xf32>
    %58 = stablehlo.slice %55 [0:1, 0:3, 8:16] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %59 = stablehlo.logistic %58 : tensor<1x3x8xf32>
    %60 = stablehlo.multiply %59, %47 : tensor<1x3x8xf32>
    %61 = stablehlo.slice %55 [0:1, 0:3, 0:8] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %62 = stablehlo.logistic %61 : tensor<1x3x8xf32>
    %63 = stablehlo.slice %55 [0:1, 0:3, 16:24] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %64 = stablehlo.tanh %63 : tensor<1x3x8xf32>
    %65 = stablehlo.multiply %62, %64 : tensor<1x3x8xf32>
    %66 = stablehlo.add %60, %65 : tensor<1x3x8xf32>
    %67 = stablehlo.tanh %66 : tensor<1x3x8xf32>
    %68 = stablehlo.multiply %57, %67 : tensor<1x3x8xf32>
    %69 = stablehlo.reshape %68 : (tensor<1x3x8xf32>) -> tensor<3x8xf32>
    %70 = stablehlo.dot_general %69, %5, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x8xf32>, tensor<8x32xf32>) -> tensor<3x32xf32>
    %71 = stablehlo.add %70, %7 : tensor<3x32xf32>
    %72 = stablehlo.reshape %71 : (tensor<3x32xf32>) -> tensor<1x3x32xf32>
    %73 = stablehlo.slice %15 [3:4, 0:3, 0:32] : (tensor<4x3x32xf32>) -> tensor<1x3x32xf32>
    %74 = stablehlo.add %72, %73 : tensor<1x3x32xf32>
    %75 = stablehlo.slice %74 [0:1, 0:3, 24:32] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %76 = stablehlo.logistic %75 : tensor<1x3x8xf32>
    %77 = stablehlo.slice %74 [0:1, 0:3, 8:16] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %78 = stablehlo.logistic %77 : tensor<1x3x8xf32>
    %79 = stablehlo.multiply %78, %66 : tensor<1x3x8xf32>
    %80 = stablehlo.slice %74 [0:1, 0:3, 0:8] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %81 = stablehlo.logistic %80 : tensor<1x3x8xf32>
    %82 = stablehlo.slice %74 [0:1, 0:3, 16:24] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %83 = stablehlo.tanh %82 : tensor<1x3x8xf32>
    %84 = stablehlo.multiply %81, %83 : tensor<1x3x8xf32>
    %85 = stablehlo.add %79, %84 : tensor<1x3x8xf32>
    %86 = stablehlo.tanh %85 : tensor<1x3x8xf32>
    %87 = stablehlo.multiply %76, %86 : tensor<1x3x8xf32>
    %88 = stablehlo.concatenate %30, %49, %68, %87, dim = 0 : (tensor<1x3x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>) -> tensor<4x3x8xf32>
    %89 = stablehlo.reshape %88 : (tensor<4x3x8xf32>) -> tensor<12x8xf32>
    %90 = stablehlo.transpose %arg3, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[8,32]{0,1}"} : (tensor<32x8xf32>) -> tensor<8x32xf32>
    %91 = stablehlo.dot_general %89, %90, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<12x8xf32>, tensor<8x32xf32>) -> tensor<12x32xf32>
    %92 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<32xf32>) -> tensor<12x32xf32>
    %93 = stablehlo.add %91, %92 : tensor<12x32xf32>
    %94 = stablehlo.reshape %93 : (tensor<12x32xf32>) -> tensor<4x3x32xf32>
    %95 = stablehlo.slice %94 [0:1, 0:3, 0:32] : (tensor<4x3x32xf32>) -> tensor<1x3x32xf32>
    %96 = stablehlo.add %4, %95 : tensor<1x3x32xf32>
    %97 = stablehlo.slice %96 [0:1, 0:3, 24:32] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %98 = stablehlo.logistic %97 : tensor<1x3x8xf32>
    %99 = stablehlo.slice %96 [0:1, 0:3, 8:16] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %100 = stablehlo.logistic %99 : tensor<1x3x8xf32>
    %101 = stablehlo.multiply %100, %cst : tensor<1x3x8xf32>
    %102 = stablehlo.slice %96 [0:1, 0:3, 0:8] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %103 = stablehlo.logistic %102 : tensor<1x3x8xf32>
    %104 = stablehlo.slice %96 [0:1, 0:3, 16:24] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %105 = stablehlo.tanh %104 : tensor<1x3x8xf32>
    %106 = stablehlo.multiply %103, %105 : tensor<1x3x8xf32>
    %107 = stablehlo.add %101, %106 : tensor<1x3x8xf32>
    %108 = stablehlo.tanh %107 : tensor<1x3x8xf32>
    %109 = stablehlo.multiply %98, %108 : tensor<1x3x8xf32>
    %110 = stablehlo.reshape %109 : (tensor<1x3x8xf32>) -> tensor<3x8xf32>
    %111 = stablehlo.dot_general %110, %0, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x8xf32>, tensor<8x32xf32>) -> tensor<3x32xf32>
    %112 = stablehlo.add %111, %2 : tensor<3x32xf32>
    %113 = stablehlo.reshape %112 : (tensor<3x32xf32>) -> tensor<1x3x32xf32>
    %114 = stablehlo.slice %94 [1:2, 0:3, 0:32] : (tensor<4x3x32xf32>) -> tensor<1x3x32xf32>
    %115 = stablehlo.add %113, %114 : tensor<1x3x32xf32>
    %116 = stablehlo.slice %115 [0:1, 0:3, 24:32] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %117 = stablehlo.logistic %116 : tensor<1x3x8xf32>
    %118 = stablehlo.slice %115 [0:1, 0:3, 8:16] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %119 = stablehlo.logistic %118 : tensor<1x3x8xf32>
    %120 = stablehlo.multiply %119, %107 : tensor<1x3x8xf32>
    %121 = stablehlo.slice %115 [0:1, 0:3, 0:8] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %122 = stablehlo.logistic %121 : tensor<1x3x8xf32>
    %123 = stablehlo.slice %115 [0:1, 0:3, 16:24] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %124 = stablehlo.tanh %123 : tensor<1x3x8xf32>
    %125 = stablehlo.multiply %122, %124 : tensor<1x3x8xf32>
    %126 = stablehlo.add %120, %125 : tensor<1x3x8xf32>
    %127 = stablehlo.tanh %126 : tensor<1x3x8xf32>
    %128 = stablehlo.multiply %117, %127 : tensor<1x3x8xf32>
    %129 = stablehlo.reshape %128 : (tensor<1x3x8xf32>) -> tensor<3x8xf32>
    %130 = stablehlo.dot_general %129, %0, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x8xf32>, tensor<8x32xf32>) -> tensor<3x32xf32>
    %131 = stablehlo.add %130, %2 : tensor<3x32xf32>
    %132 = stablehlo.reshape %131 : (tensor<3x32xf32>) -> tensor<1x3x32xf32>
    %133 = stablehlo.slice %94 [2:3, 0:3, 0:32] : (tensor<4x3x32xf32>) -> tensor<1x3x32xf32>
    %134 = stablehlo.add %132, %133 : tensor<1x3x32xf32>
    %135 = stablehlo.slice %134 [0:1, 0:3, 24:32] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %136 = stablehlo.logistic %135 : tensor<1x3x8xf32>
    %137 = stablehlo.slice %134 [0:1, 0:3, 8:16] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %138 = stablehlo.logistic %137 : tensor<1x3x8xf32>
    %139 = stablehlo.multiply %138, %126 : tensor<1x3x8xf32>
    %140 = stablehlo.slice %134 [0:1, 0:3, 0:8] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %141 = stablehlo.logistic %140 : tensor<1x3x8xf32>
    %142 = stablehlo.slice %134 [0:1, 0:3, 16:24] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %143 = stablehlo.tanh %142 : tensor<1x3x8xf32>
    %144 = stablehlo.multiply %141, %143 : tensor<1x3x8xf32>
    %145 = stablehlo.add %139, %144 : tensor<1x3x8xf32>
    %146 = stablehlo.tanh %145 : tensor<1x3x8xf32>
    %147 = stablehlo.multiply %136, %146 : tensor<1x3x8xf32>
    %148 = stablehlo.reshape %147 : (tensor<1x3x8xf32>) -> tensor<3x8xf32>
    %149 = stablehlo.dot_general %148, %0, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x8xf32>, tensor<8x32xf32>) -> tensor<3x32xf32>
    %150 = stablehlo.add %149, %2 : tensor<3x32xf32>
    %151 = stablehlo.reshape %150 : (tensor<3x32xf32>) -> tensor<1x3x32xf32>
    %152 = stablehlo.slice %94 [3:4, 0:3, 0:32] : (tensor<4x3x32xf32>) -> tensor<1x3x32xf32>
    %153 = stablehlo.add %151, %152 : tensor<1x3x32xf32>
    %154 = stablehlo.slice %153 [0:1, 0:3, 24:32] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %155 = stablehlo.logistic %154 : tensor<1x3x8xf32>
    %156 = stablehlo.slice %153 [0:1, 0:3, 8:16] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %157 = stablehlo.logistic %156 : tensor<1x3x8xf32>
    %158 = stablehlo.multiply %157, %145 : tensor<1x3x8xf32>
    %159 = stablehlo.slice %153 [0:1, 0:3, 0:8] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %160 = stablehlo.logistic %159 : tensor<1x3x8xf32>
    %161 = stablehlo.slice %153 [0:1, 0:3, 16:24] : (tensor<1x3x32xf32>) -> tensor<1x3x8xf32>
    %162 = stablehlo.tanh %161 : tensor<1x3x8xf32>
    %163 = stablehlo.multiply %160, %162 : tensor<1x3x8xf32>
    %164 = stablehlo.add %158, %163 : tensor<1x3x8xf32>
    %165 = stablehlo.tanh %164 : tensor<1x3x8xf32>
    %166 = stablehlo.multiply %155, %165 : tensor<1x3x8xf32>
    %167 = stablehlo.concatenate %109, %128, %147, %166, dim = 0 : (tensor<1x3x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>) -> tensor<4x3x8xf32>
    %168 = stablehlo.transpose %167, dims = [1, 0, 2] {result_layout = dense<[2, 0, 1]> : tensor<3xindex>, xla_shape = "f32[3,4,8]{2,0,1}"} : (tensor<4x3x8xf32>) -> tensor<3x4x8xf32>
    %169 = stablehlo.transpose %arg1, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[8,3]{0,1}"} : (tensor<3x8xf32>) -> tensor<8x3xf32>
    %170 = stablehlo.broadcast_in_dim %169, dims = [1, 2] : (tensor<8x3xf32>) -> tensor<3x8x3xf32>
    %171 = stablehlo.dot_general %168, %170, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<3x4x8xf32>, tensor<3x8x3xf32>) -> tensor<3x4x3xf32>
    %172 = stablehlo.broadcast_in_dim %arg0, dims = [2] : (tensor<3xf32>) -> tensor<3x4x3xf32>
    %173 = stablehlo.add %171, %172 : tensor<3x4x3xf32>
    %174 = stablehlo.concatenate %87, %166, dim = 0 : (tensor<1x3x8xf32>, tensor<1x3x8xf32>) -> tensor<2x3x8xf32>
    %175 = stablehlo.concatenate %85, %164, dim = 0 : (tensor<1x3x8xf32>, tensor<1x3x8xf32>) -> tensor<2x3x8xf32>
    return %173, %174, %175 : tensor<3x4x3xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>
  }
}
