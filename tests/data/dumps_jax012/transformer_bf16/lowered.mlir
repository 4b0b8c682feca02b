module @jit_transformer_block attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<32xbf16>, %arg1: tensor<16xbf16>, %arg2: tensor<16xbf16>, %arg3: tensor<16xbf16>, %arg4: tensor<16xbf16>, %arg5: tensor<16xbf16>, %arg6: tensor<16x32xbf16>, %arg7: tensor<32x16xbf16>, %arg8: tensor<16x16xbf16>, %arg9: tensor<16x16xbf16>, %arg10: tensor<16x16xbf16>, %arg11: tensor<16x16xbf16>, %arg12: tensor<8x16xbf16>) -> (tensor<8x16xbf16> {jax.result_info = "result"}) {
    %0 = stablehlo.convert %arg12 : (tensor<8x16xbf16>) -> tensor<8x16xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.reduce(%0 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0] : (tensor<8xf32>) -> tensor<8x1xf32>
    %cst_0 = stablehlo.constant dense<1.600000e+01> : tensor<f32>
    %3 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<8x1xf32>
    %4 = stablehlo.divide %2, %3 : tensor<8x1xf32>
    %5 = stablehlo.broadcast_in_dim %4, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x16xf32>
    %6 = stablehlo.subtract %0, %5 : tensor<8x16xf32>
    %7 = stablehlo.multiply %6, %6 : tensor<8x16xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %8 = stablehlo.reduce(%7 init: %cst_1) applies stablehlo.add across dimensions = [1] : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
    %9 = stablehlo.broadcast_in_dim %8, dims = [0] : (tensor<8xf32>) -> tensor<8x1xf32>
    %cst_2 = stablehlo.constant dense<1.600000e+01> : tensor<f32>
    %10 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<8x1xf32>
    %11 = stablehlo.divide %9, %10 : tensor<8x1xf32>
    %12 = stablehlo.broadcast_in_dim %4, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x16xf32>
    %13 = stablehlo.subtract %0, %12 : tensor<8x16xf32>
    %cst_3 = stablehlo.constant dense<9.99999974E-6> : tensor<f32>
    %14 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<8x1xf32>
    %15 = stablehlo.add %11, %14 : tensor<8x1xf32>
    %16 = stablehlo.rsqrt %15 : tensor<8x1xf32>
    %17 = stablehlo.broadcast_in_dim %16, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x16xf32>
    %18 = stablehlo.multiply %13, %17 : tensor<8x16xf32>
    %19 = stablehlo.convert %18 : (tensor<8x16xf32>) -> tensor<8x16xbf16>
    %20 = stablehlo.broadcast_in_dim %arg3, dims = [1] : (tensor<16xbf16>) -> tensor<1x16xbf16>
    %21 = stablehlo.broadcast_in_dim %20, dims = [0, 1] : (tensor<1x16xbf16>) -> tensor<8x16xbf16>
    %22 = stablehlo.multiply %19, %21 : tensor<8x16xbf16>
    %23 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<16xbf16>) -> tensor<1x16xbf16>
    %24 = stablehlo.broadcast_in_dim %23, dims = [0, 1] : (tensor<1x16xbf16>) -> tensor<8x16xbf16>
    %25 = stablehlo.add %22, %24 : tensor<8x16xbf16>
    %26 = stablehlo.dot_general %25, %arg10, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xbf16>, tensor<16x16xbf16>) -> tensor<8x16xbf16>
    %27 = stablehlo.dot_general %25, %arg8, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xbf16>, tensor<16x16xbf16>) -> tensor<8x16xbf16>
    %28 = stablehlo.dot_general %25, %arg11, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xbf16>, tensor<16x16xbf16>) -> tensor<8x16xbf16>
    %29 = stablehlo.reshape %26 : (tensor<8x16xbf16>) -> tensor<8x2x8xbf16>
    %30 = stablehlo.transpose %29, dims = [1, 0, 2] : (tensor<8x2x8xbf16>) -> tensor<2x8x8xbf16>
    %31 = stablehlo.reshape %27 : (tensor<8x16xbf16>) -> tensor<8x2x8xbf16>
    %32 = stablehlo.transpose %31, dims = [1, 0, 2] : (tensor<8x2x8xbf16>) -> tensor<2x8x8xbf16>
    %33 = stablehlo.reshape %28 : (tensor<8x16xbf16>) -> tensor<8x2x8xbf16>
    %34 = stablehlo.transpose %33, dims = [1, 0, 2] : (tensor<8x2x8xbf16>) -> tensor<2x8x8xbf16>
    %35 = stablehlo.dot_general %30, %32, batching_dims = [0] x [0], contracting_dims = [2] x [2], precision = [DEFAULT, DEFAULT] : (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>) -> tensor<2x8x8xf32>
    %cst_4 = stablehlo.constant dense<2.82842708> : tensor<f32>
    %36 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<2x8x8xf32>
    %37 = stablehlo.divide %35, %36 : tensor<2x8x8xf32>
    %c = stablehlo.constant dense<true> : tensor<i1>
    %38 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i1>) -> tensor<8x8xi1>
    %39 = call @tril(%38) : (tensor<8x8xi1>) -> tensor<8x8xi1>
    %cst_5 = stablehlo.constant dense<-1.000000e+09> : tensor<f32>
    %40 = call @_where(%39, %37, %cst_5) : (tensor<8x8xi1>, tensor<2x8x8xf32>, tensor<f32>) -> tensor<2x8x8xf32>
    %cst_6 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %41 = stablehlo.reduce(%40 init: %cst_6) applies stablehlo.maximum across dimensions = [2] : (tensor<2x8x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %cst_7 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %42 = stablehlo.broadcast_in_dim %cst_7, dims = [] : (tensor<f32>) -> tensor<2x8xf32>
    %43 = stablehlo.maximum %42, %41 : tensor<2x8xf32>
    %44 = stablehlo.broadcast_in_dim %43, dims = [0, 1] : (tensor<2x8xf32>) -> tensor<2x8x1xf32>
    %45 = stablehlo.broadcast_in_dim %44, dims = [0, 1, 2] : (tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
    %46 = stablehlo.subtract %40, %45 : tensor<2x8x8xf32>
    %47 = stablehlo.exponential %46 : tensor<2x8x8xf32>
    %cst_8 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %48 = stablehlo.reduce(%47 init: %cst_8) applies stablehlo.add across dimensions = [2] : (tensor<2x8x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %49 = stablehlo.broadcast_in_dim %48, dims = [0, 1] : (tensor<2x8xf32>) -> tensor<2x8x1xf32>
    %50 = stablehlo.broadcast_in_dim %49, dims = [0, 1, 2] : (tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
    %51 = stablehlo.divide %47, %50 : tensor<2x8x8xf32>
    %52 = stablehlo.convert %51 : (tensor<2x8x8xf32>) -> tensor<2x8x8xbf16>
    %53 = stablehlo.dot_general %34, %52, batching_dims = [0] x [0], contracting_dims = [1] x [2], precision = [DEFAULT, DEFAULT] : (tensor<2x8x8xbf16>, tensor<2x8x8xbf16>) -> tensor<2x8x8xbf16>
    %54 = stablehlo.transpose %53, dims = [2, 0, 1] : (tensor<2x8x8xbf16>) -> tensor<8x2x8xbf16>
    %55 = stablehlo.reshape %54 : (tensor<8x2x8xbf16>) -> tensor<8x16xbf16>
    %56 = stablehlo.dot_general %55, %arg9, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xbf16>, tensor<16x16xbf16>) -> tensor<8x16xbf16>
    %57 = stablehlo.add %arg12, %56 : tensor<8x16xbf16>
    %58 = stablehlo.convert %57 : (tensor<8x16xbf16>) -> tensor<8x16xf32>
    %cst_9 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %59 = stablehlo.reduce(%58 init: %cst_9) applies stablehlo.add across dimensions = [1] : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
    %60 = stablehlo.broadcast_in_dim %59, dims = [0] : (tensor<8xf32>) -> tensor<8x1xf32>
    %cst_10 = stablehlo.constant dense<1.600000e+01> : tensor<f32>
    %61 = stablehlo.broadcast_in_dim %cst_10, dims = [] : (tensor<f32>) -> tensor<8x1xf32>
    %62 = stablehlo.divide %60, %61 : tensor<8x1xf32>
    %63 = stablehlo.broadcast_in_dim %62, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x16xf32>
    %64 = stablehlo.subtract %58, %63 : tensor<8x16xf32>
    %65 = stablehlo.multiply %64, %64 : tensor<8x16xf32>
    %cst_11 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %66 = stablehlo.reduce(%65 init: %cst_11) applies stablehlo.add across dimensions = [1] : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
    %67 = stablehlo.broadcast_in_dim %66, dims = [0] : (tensor<8xf32>) -> tensor<8x1xf32>
    %cst_12 = stablehlo.constant dense<1.600000e+01> : tensor<f32>
    %68 = stablehlo.broadcast_in_dim %cst_12, dims = [] : (tensor<f32>) -> tensor<8x1xf32>
    %69 = stablehlo.divide %67, %68 : tensor<8x1xf32>
    %70 = stablehlo.broadcast_in_dim %62, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x16xf32>
    %71 = stablehlo.subtract %58, %70 : tensor<8x16xf32>
    %cst_13 = stablehlo.constant dense<9.99999974E-6> : tensor<f32>
    %72 = stablehlo.broadcast_in_dim %cst_13, dims = [] : (tensor<f32>) -> tensor<8x1xf32>
    %73 = stablehlo.add %69, %72 : tensor<8x1xf32>
    %74 = stablehlo.rsqrt %73 : tensor<8x1xf32>
    %75 = stablehlo.broadcast_in_dim %74, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x16xf32>
    %76 = stablehlo.multiply %71, %75 : tensor<8x16xf32>
    %77 = stablehlo.convert %76 : (tensor<8x16xf32>) -> tensor<8x16xbf16>
    %78 = stablehlo.broadcast_in_dim %arg5, dims = [1] : (tensor<16xbf16>) -> tensor<1x16xbf16>
    %79 = stablehlo.broadcast_in_dim %78, dims = [0, 1] : (tensor<1x16xbf16>) -> tensor<8x16xbf16>
    %80 = stablehlo.multiply %77, %79 : tensor<8x16xbf16>
    %81 = stablehlo.broadcast_in_dim %arg4, dims = [1] : (tensor<16xbf16>) -> tensor<1x16xbf16>
    %82 = stablehlo.broadcast_in_dim %81, dims = [0, 1] : (tensor<1x16xbf16>) -> tensor<8x16xbf16>
    %83 = stablehlo.add %80, %82 : tensor<8x16xbf16>
    %84 = stablehlo.dot_general %83, %arg6, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xbf16>, tensor<16x32xbf16>) -> tensor<8x32xbf16>
    %85 = stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<32xbf16>) -> tensor<1x32xbf16>
    %86 = stablehlo.broadcast_in_dim %85, dims = [0, 1] : (tensor<1x32xbf16>) -> tensor<8x32xbf16>
    %87 = stablehlo.add %84, %86 : tensor<8x32xbf16>
    %cst_14 = stablehlo.constant dense<5.000000e-01> : tensor<bf16>
    %88 = stablehlo.broadcast_in_dim %cst_14, dims = [] : (tensor<bf16>) -> tensor<8x32xbf16>
    %89 = stablehlo.multiply %88, %87 : tensor<8x32xbf16>
    %90 = stablehlo.negate %87 : tensor<8x32xbf16>
    %cst_15 = stablehlo.constant dense<7.070310e-01> : tensor<bf16>
    %91 = stablehlo.broadcast_in_dim %cst_15, dims = [] : (tensor<bf16>) -> tensor<8x32xbf16>
    %92 = stablehlo.multiply %90, %91 : tensor<8x32xbf16>
    %93 = chlo.erfc %92 : tensor<8x32xbf16> -> tensor<8x32xbf16>
    %94 = stablehlo.multiply %89, %93 : tensor<8x32xbf16>
    %95 = stablehlo.dot_general %94, %arg7, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x32xbf16>, tensor<32x16xbf16>) -> tensor<8x16xbf16>
    %96 = stablehlo.add %57, %95 : tensor<8x16xbf16>
    %97 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<16xbf16>) -> tensor<1x16xbf16>
    %98 = stablehlo.broadcast_in_dim %97, dims = [0, 1] : (tensor<1x16xbf16>) -> tensor<8x16xbf16>
    %99 = stablehlo.add %96, %98 : tensor<8x16xbf16>
    return %99 : tensor<8x16xbf16>
  }
  func.func private @tril(%arg0: tensor<8x8xi1>) -> tensor<8x8xi1> {
    %0 = stablehlo.iota dim = 0 : tensor<8x8xi32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<8x8xi32>
    %2 = stablehlo.add %0, %1 : tensor<8x8xi32>
    %3 = stablehlo.iota dim = 1 : tensor<8x8xi32>
    %4 = stablehlo.compare GE, %2, %3, SIGNED : (tensor<8x8xi32>, tensor<8x8xi32>) -> tensor<8x8xi1>
    %c_0 = stablehlo.constant dense<false> : tensor<i1>
    %5 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i1>) -> tensor<8x8xi1>
    %6 = stablehlo.select %4, %arg0, %5 : tensor<8x8xi1>, tensor<8x8xi1>
    return %6 : tensor<8x8xi1>
  }
  func.func private @_where(%arg0: tensor<8x8xi1>, %arg1: tensor<2x8x8xf32>, %arg2: tensor<f32>) -> tensor<2x8x8xf32> {
    %0 = stablehlo.convert %arg2 : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %arg0, dims = [1, 2] : (tensor<8x8xi1>) -> tensor<2x8x8xi1>
    %2 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<2x8x8xf32>
    %3 = stablehlo.select %1, %arg1, %2 : tensor<2x8x8xi1>, tensor<2x8x8xf32>
    return %3 : tensor<2x8x8xf32>
  }
}
