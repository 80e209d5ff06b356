module @IrToHlo.406 attributes {mhlo.cross_program_prefetches = [], mhlo.input_output_alias = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<24xf32>, %arg1: tensor<24x8xf32>, %arg2: tensor<24xf32>, %arg3: tensor<24x6xf32>, %arg4: tensor<4x3x6xf32>, %arg5: tensor<24xf32>, %arg6: tensor<24x8xf32>, %arg7: tensor<24xf32>, %arg8: tensor<24x8xf32>) -> (tensor<4x3x8xf32>, tensor<2x3x8xf32>) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<1x3x8xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<3x8xf32>
    %0 = stablehlo.reshape %arg4 : (tensor<4x3x6xf32>) -> tensor<12x6xf32>
    %1 = stablehlo.transpose %arg3, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[6,24]{0,1}"} : (tensor<24x6xf32>) -> tensor<6x24xf32>
    %2 = stablehlo.dot_general %0, %1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<12x6xf32>, tensor<6x24xf32>) -> tensor<12x24xf32>
    %3 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<24xf32>) -> tensor<12x24xf32>
    %4 = stablehlo.add %2, %3 : tensor<12x24xf32>
    %5 = stablehlo.reshape %4 : (tensor<12x24xf32>) -> tensor<4x3x24xf32>
    %6 = stablehlo.slice %5 [0:1, 0:3, 0:24] : (tensor<4x3x24xf32>) -> tensor<1x3x24xf32>
    %7 = stablehlo.reshape %6 : (tensor<1x3x24xf32>) -> tensor<3x24xf32>
    %8 = stablehlo.slice %7 [0:3, 16:24] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %9 = stablehlo.reshape %8 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %10 = stablehlo.transpose %arg6, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[8,24]{0,1}"} : (tensor<24x8xf32>) -> tensor<8x24xf32>
    %11 = stablehlo.dot_general %cst_0, %10, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x8xf32>, tensor<8x24xf32>) -> tensor<3x24xf32>
    %12 = stablehlo.broadcast_in_dim %arg5, dims = [1] : (tensor<24xf32>) -> tensor<3x24xf32>
    %13 = stablehlo.add %11, %12 : tensor<3x24xf32>
    %14 = stablehlo.reshape %13 : (tensor<3x24xf32>) -> tensor<1x3x24xf32>
    %15 = stablehlo.slice %14 [0:1, 0:3, 16:24] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %16 = stablehlo.slice %14 [0:1, 0:3, 0:8] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %17 = stablehlo.slice %7 [0:3, 0:8] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %18 = stablehlo.reshape %17 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %19 = stablehlo.add %16, %18 : tensor<1x3x8xf32>
    %20 = stablehlo.logistic %19 : tensor<1x3x8xf32>
    %21 = stablehlo.multiply %15, %20 : tensor<1x3x8xf32>
    %22 = stablehlo.add %9, %21 : tensor<1x3x8xf32>
    %23 = stablehlo.tanh %22 : tensor<1x3x8xf32>
    %24 = stablehlo.subtract %cst, %23 : tensor<1x3x8xf32>
    %25 = stablehlo.slice %14 [0:1, 0:3, 8:16] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %26 = stablehlo.slice %7 [0:3, 8:16] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %27 = stablehlo.reshape %26 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %28 = stablehlo.add %25, %27 : tensor<1x3x8xf32>
    %29 = stablehlo.logistic %28 : tensor<1x3x8xf32>
    %30 = stablehlo.multiply %24, %29 : tensor<1x3x8xf32>
    %31 = stablehlo.add %30, %23 : tensor<1x3x8xf32>
    %32 = stablehlo.slice %5 [1:2, 0:3, 0:24] : (tensor<4x3x24xf32>) -> tensor<1x3x24xf32>
    %33 = stablehlo.reshape %32 : (tensor<1x3x24xf32>) -> tensor<3x24xf32>
    %34 = stablehlo.slice %33 [0:3, 16:24] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %35 = stablehlo.reshape %34 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %36 = stablehlo.reshape %31 : (tensor<1x3x8xf32>) -> tensor<3x8xf32>
    %37 = stablehlo.dot_general %36, %10, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x8xf32>, tensor<8x24xf32>) -> tensor<3x24xf32>
    %38 = stablehlo.add %37, %12 : tensor<3x24xf32>
    %39 = stablehlo.reshape %38 : (tensor<3x24xf32>) -> tensor<1x3x24xf32>
    %40 = stablehlo.slice %39 [0:1, 0:3, 16:24] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %41 = stablehlo.slice %39 [0:1, 0:3, 0:8] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %42 = stablehlo.slice %33 [0:3, 0:8] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %43 = stablehlo.reshape %42 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %44 = stablehlo.add %41, %43 : tensor<1x3x8xf32>
    %45 = stablehlo.logistic %44 : tensor<1x3x8xf32>
    %46 = stablehlo.multiply %40, %45 : tensor<1x3x8xf32>
    %47 = stablehlo.add %35, %46 : tensor<1x3x8xf32>
    %48 = stablehlo.tanh %47 : tensor<1x3x8xf32>
    %49 = stablehlo.subtract %31, %48 : tensor<1x3x8xf32>
    %50 = stablehlo.slice %39 [0:1, 0:3, 8:16] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %51 = stablehlo.slice %33 [0:3, 8:16] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %52 = stablehlo.reshape %51 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %53 = stablehlo.add %50, %52 : tensor<1x3x8xf32>
    %54 = stablehlo.logistic %53 : tensor<1x3x8xf32>
    %55 = stablehlo.multiply %49, %54 : tensor<1x3x8xf32>
    %56 = stablehlo.add %55, %48 : tensor<1x3x8xf32>
    %57 = stablehlo.slice %5 [2:3, 0:3, 0:24] : (tensor<4x3x24xf32>) -> tensor<1x3x24xf32>
    %58 = stablehlo.reshape %57 : (tensor<1x3x24xf32>) -> tensor<3x24xf32>
    %59 = stablehlo.slice %58 [0:3, 16:24] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %60 = stablehlo.reshape %59 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %61 = stablehlo.reshape %56 : (tensor<1x3x8xf32>) -> tensor<3x8xf32>
    %62 = stablehlo.dot_general %61, %10, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x8xf32>, tensor<8x24xf32>) -> tensor<3x24xf32>
    %63 = stablehlo.add %62, %12 : tensor<3x24xf32>
    %64 = stablehlo.reshape %63 : (tensor<3x24xf32>) -> tensor<1x3x24xf32>
    %65 = stablehlo.slice %64 [0:1, 0:3, 16:24] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %66 = stablehlo.slice %64 [0:1, 0:3, 0:8] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %67 = stablehlo.slice %58 [0:3, 0:8] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %68 = stablehlo.reshape %67 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %69 = stablehlo.add %66, %68 : tensor<1x3x8xf32>
    %70 = stablehlo.logistic %69 : tensor<1x3x8xf32>
    %71 = stablehlo.multiply %65, %70 : tensor<1x3x8xf32>
    %72 = stablehlo.add %60, %71 : tensor<1x3x8xf32>
    %73 = stablehlo.tanh %72 : tensor<1x3x8xf32>
    %74 = stablehlo.subtract %56, %73 : tensor<1x3x8xf32>
    %75 = stablehlo.slice %64 [0:1, 0:3, 8:16] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %76 = stablehlo.slice %58 [0:3, 8:16] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %77 = stablehlo.reshape %76 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %78 = stablehlo.add %75, %77 : tensor<1x3x8xf32>
    %79 = stablehlo.logistic %78 : tensor<1x3x8xf32>
    %80 = stablehlo.multiply %74, %79 : tensor<1x3x8xf32>
    %81 = stablehlo.add %80, %73 : tensor<1x3x8xf32>
    %82 = stablehlo.slice %5 [3:4, 0:3, 0:24] : (tensor<4x3x24xf32>) -> tensor<1x3x24xf32>
    %83 = stablehlo.reshape %82 : (tensor<1x3x24xf32>) -> tensor<3x24xf32>
    %84 = stablehlo.slice %83 [0:3, 16:24] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %85 = stablehlo.reshape %84 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %86 = stablehlo.reshape %81 : (tensor<1x3x8xf32>) -> tensor<3x8xf32>
    %87 = stablehlo.dot_general %86, %10, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x8xf32>, tensor<8x24xf32>) -> tensor<3x24xf32>
    %88 = stablehlo.add %87, %12 : tensor<3x24xf32>
    %89 = stablehlo.reshape %88 : (tensor<3x24xf32>) -> tensor<1x3x24xf32>
    %90 = stablehlo.slice %89 [0:1, 0:3, 16:24] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %91 = stablehlo.slice %89 [0:1, 0:3, 0:8] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %92 = stablehlo.slice %83 [0:3, 0:8] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %93 = stablehlo.reshape %92 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %94 = stablehlo.add %91, %93 : tensor<1x3x8xf32>
    %95 = stablehlo.logistic %94 : tensor<1x3x8xf32>
    %96 = stablehlo.multiply %90, %95 : tensor<1x3x8xf32>
    %97 = stablehlo.add %85, %96 : tensor<1x3x8xf32>
    %98 = stablehlo.tanh %97 : tensor<1x3x8xf32>
    %99 = stablehlo.subtract %81, %98 : tensor<1x3x8xf32>
    %100 = stablehlo.slice %89 [0:1, 0:3, 8:16] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %101 = stablehlo.slice %83 [0:3, 8:16] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %102 = stablehlo.reshape %101 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %103 = stablehlo.add %100, %102 : tensor<1x3x8xf32>
    %104 = stablehlo.logistic %103 : tensor<1x3x8xf32>
    %105 = stablehlo.multiply %99, %104 : tensor<1x3x8xf32>
    %106 = stablehlo.add %105, %98 : tensor<1x3x8xf32>
    %107 = stablehlo.concatenate %31, %56, %81, %106, dim = 0 : (tensor<1x3x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>) -> tensor<4x3x8xf32>
    %108 = stablehlo.reshape %107 : (tensor<4x3x8xf32>) -> tensor<12x8xf32>
    %109 = stablehlo.transpose %arg1, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[8,24]{0,1}"} : (tensor<24x8xf32>) -> tensor<8x24xf32>
    %110 = stablehlo.dot_general %108, %109, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<12x8xf32>, tensor<8x24xf32>) -> tensor<12x24xf32>
    %111 = stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<24xf32>) -> tensor<12x24xf32>
    %112 = stablehlo.add %110, %111 : tensor<12x24xf32>
    %113 = stablehlo.reshape %112 : (tensor<12x24xf32>) -> tensor<4x3x24xf32>
    %114 = stablehlo.slice %113 [0:1, 0:3, 0:24] : (tensor<4x3x24xf32>) -> tensor<1x3x24xf32>
    %115 = stablehlo.reshape %114 : (tensor<1x3x24xf32>) -> tensor<3x24xf32>
    %116 = stablehlo.slice %115 [0:3, 16:24] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %117 = stablehlo.reshape %116 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %118 = stablehlo.transpose %arg8, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[8,24]{0,1}"} : (tensor<24x8xf32>) -> tensor<8x24xf32>
    %119 = stablehlo.dot_general %cst_0, %118, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x8xf32>, tensor<8x24xf32>) -> tensor<3x24xf32>
    %120 = stablehlo.broadcast_in_dim %arg7, dims = [1] : (tensor<24xf32>) -> tensor<3x24xf32>
    %121 = stablehlo.add %119, %120 : tensor<3x24xf32>
    %122 = stablehlo.reshape %121 : (tensor<3x24xf32>) -> tensor<1x3x24xf32>
    %123 = stablehlo.slice %122 [0:1, 0:3, 16:24] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %124 = stablehlo.slice %122 [0:1, 0:3, 0:8] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %125 = stablehlo.slice %115 [0:3, 0:8] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %126 = stablehlo.reshape %125 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %127 = stablehlo.add %124, %126 : tensor<1x3x8xf32>
    %128 = stablehlo.logistic %127 : tensor<1x3x8xf32>
    %129 = stablehlo.multiply %123, %128 : tensor<1x3x8xf32>
    %130 = stablehlo.add %117, %129 : tensor<1x3x8xf32>
    %131 = stablehlo.tanh %130 : tensor<1x3x8xf32>
    %132 = stablehlo.subtract %cst, %131 : tensor<1x3x8xf32>
    %133 = stablehlo.slice %122 [0:1, 0:3, 8:16] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %134 = stablehlo.slice %115 [0:3, 8:16] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %135 = stablehlo.reshape %134 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %136 = stablehlo.add %133, %135 : tensor<1x3x8xf32>
    %137 = stablehlo.logistic %136 : tensor<1x3x8xf32>
    %138 = stablehlo.multiply %132, %137 : tensor<1x3x8xf32>
    %139 = stablehlo.add %138, %131 : tensor<1x3x8xf32>
    %140 = stablehlo.slice %113 [1:2, 0:3, 0:24] : (tensor<4x3x24xf32>) -> tensor<1x3x24xf32>
    %141 = stablehlo.reshape %140 : (tensor<1x3x24xf32>) -> tensor<3x24xf32>
    %142 = stablehlo.slice %141 [0:3, 16:24] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %143 = stablehlo.reshape %142 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %144 = stablehlo.reshape %139 : (tensor<1x3x8xf32>) -> tensor<3x8xf32>
    %145 = stablehlo.dot_general %144, %118, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x8xf32>, tensor<8x24xf32>) -> tensor<3x24xf32>
    %146 = stablehlo.add %145, %120 : tensor<3x24xf32>
    %147 = stablehlo.reshape %146 : (tensor<3x24xf32>) -> tensor<1x3x24xf32>
    %148 = stablehlo.slice %147 [0:1, 0:3, 16:24] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %149 = stablehlo.slice %147 [0:1, 0:3, 0:8] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %150 = stablehlo.slice %141 [0:3, 0:8] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %151 = stablehlo.reshape %150 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %152 = stablehlo.add %149, %151 : tensor<1x3x8xf32>
    %153 = stablehlo.logistic %152 : tensor<1x3x8xf32>
    %154 = stablehlo.multiply %148, %153 : tensor<1x3x8xf32>
    %155 = stablehlo.add %143, %154 : tensor<1x3x8xf32>
    %156 = stablehlo.tanh %155 : tensor<1x3x8xf32>
    %157 = stablehlo.subtract %139, %156 : tensor<1x3x8xf32>
    %158 = stablehlo.slice %147 [0:1, 0:3, 8:16] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %159 = stablehlo.slice %141 [0:3, 8:16] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %160 = stablehlo.reshape %159 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %161 = stablehlo.add %158, %160 : tensor<1x3x8xf32>
    %162 = stablehlo.logistic %161 : tensor<1x3x8xf32>
    %163 = stablehlo.multiply %157, %162 : tensor<1x3x8xf32>
    %164 = stablehlo.add %163, %156 : tensor<1x3x8xf32>
    %165 = stablehlo.slice %113 [2:3, 0:3, 0:24] : (tensor<4x3x24xf32>) -> tensor<1x3x24xf32>
    %166 = stablehlo.reshape %165 : (tensor<1x3x24xf32>) -> tensor<3x24xf32>
    %167 = stablehlo.slice %166 [0:3, 16:24] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %168 = stablehlo.reshape %167 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %169 = stablehlo.reshape %164 : (tensor<1x3x8xf32>) -> tensor<3x8xf32>
    %170 = stablehlo.dot_general %169, %118, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x8xf32>, tensor<8x24xf32>) -> tensor<3x24xf32>
    %171 = stablehlo.add %170, %120 : tensor<3x24xf32>
    %172 = stablehlo.reshape %171 : (tensor<3x24xf32>) -> tensor<1x3x24xf32>
    %173 = stablehlo.slice %172 [0:1, 0:3, 16:24] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %174 = stablehlo.slice %172 [0:1, 0:3, 0:8] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %175 = stablehlo.slice %166 [0:3, 0:8] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %176 = stablehlo.reshape %175 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %177 = stablehlo.add %174, %176 : tensor<1x3x8xf32>
    %178 = stablehlo.logistic %177 : tensor<1x3x8xf32>
    %179 = stablehlo.multiply %173, %178 : tensor<1x3x8xf32>
    %180 = stablehlo.add %168, %179 : tensor<1x3x8xf32>
    %181 = stablehlo.tanh %180 : tensor<1x3x8xf32>
    %182 = stablehlo.subtract %164, %181 : tensor<1x3x8xf32>
    %183 = stablehlo.slice %172 [0:1, 0:3, 8:16] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %184 = stablehlo.slice %166 [0:3, 8:16] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %185 = stablehlo.reshape %184 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %186 = stablehlo.add %183, %185 : tensor<1x3x8xf32>
    %187 = stablehlo.logistic %186 : tensor<1x3x8xf32>
    %188 = stablehlo.multiply %182, %187 : tensor<1x3x8xf32>
    %189 = stablehlo.add %188, %181 : tensor<1x3x8xf32>
    %190 = stablehlo.slice %113 [3:4, 0:3, 0:24] : (tensor<4x3x24xf32>) -> tensor<1x3x24xf32>
    %191 = stablehlo.reshape %190 : (tensor<1x3x24xf32>) -> tensor<3x24xf32>
    %192 = stablehlo.slice %191 [0:3, 16:24] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %193 = stablehlo.reshape %192 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %194 = stablehlo.reshape %189 : (tensor<1x3x8xf32>) -> tensor<3x8xf32>
    %195 = stablehlo.dot_general %194, %118, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x8xf32>, tensor<8x24xf32>) -> tensor<3x24xf32>
    %196 = stablehlo.add %195, %120 : tensor<3x24xf32>
    %197 = stablehlo.reshape %196 : (tensor<3x24xf32>) -> tensor<1x3x24xf32>
    %198 = stablehlo.slice %197 [0:1, 0:3, 16:24] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %199 = stablehlo.slice %197 [0:1, 0:3, 0:8] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %200 = stablehlo.slice %191 [0:3, 0:8] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %201 = stablehlo.reshape %200 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %202 = stablehlo.add %199, %201 : tensor<1x3x8xf32>
    %203 = stablehlo.logistic %202 : tensor<1x3x8xf32>
    %204 = stablehlo.multiply %198, %203 : tensor<1x3x8xf32>
    %205 = stablehlo.add %193, %204 : tensor<1x3x8xf32>
    %206 = stablehlo.tanh %205 : tensor<1x3x8xf32>
    %207 = stablehlo.subtract %189, %206 : tensor<1x3x8xf32>
    %208 = stablehlo.slice %197 [0:1, 0:3, 8:16] : (tensor<1x3x24xf32>) -> tensor<1x3x8xf32>
    %209 = stablehlo.slice %191 [0:3, 8:16] : (tensor<3x24xf32>) -> tensor<3x8xf32>
    %210 = stablehlo.reshape %209 : (tensor<3x8xf32>) -> tensor<1x3x8xf32>
    %211 = stablehlo.add %208, %210 : tensor<1x3x8xf32>
    %212 = stablehlo.logistic %211 : tensor<1x3x8xf32>
    %213 = stablehlo.multiply %207, %212 : tensor<1x3x8xf32>
    %214 = stablehlo.add %213, %206 : tensor<1x3x8xf32>
    %215 = stablehlo.concatenate %139, %164, %189, %214, dim = 0 : (tensor<1x3x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>, tensor<1x3x8xf32>) -> tensor<4x3x8xf32>
    %216 = stablehlo.reshape %106 : (tensor<1x3x8xf32>) -> tensor<3x8xf32>
    %217 = stablehlo.reshape %214 : (tensor<1x3x8xf32>) -> tensor<3x8xf32>
    %218 = stablehlo.concatenate %216, %217, dim = 0 : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<6x8xf32>
    %219 = stablehlo.reshape %218 : (tensor<6x8xf32>) -> tensor<2x3x8xf32>
    return %215, %219 : tensor<4x3x8xf32>, tensor<2x3x8xf32>
  }
}
