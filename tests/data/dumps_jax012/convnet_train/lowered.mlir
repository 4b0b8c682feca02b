module @jit_train_step attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<3x3x1x4xf32>, %arg2: tensor<8xf32>, %arg3: tensor<3x3x4x8xf32>, %arg4: tensor<10xf32>, %arg5: tensor<32x10xf32>, %arg6: tensor<4x8x8x1xf32>, %arg7: tensor<4xi32>, %arg8: tensor<f32>) -> (tensor<f32> {jax.result_info = "result[0]"}, tensor<4xf32> {jax.result_info = "result[1]['conv1_b']"}, tensor<3x3x1x4xf32> {jax.result_info = "result[1]['conv1_w']"}, tensor<8xf32> {jax.result_info = "result[1]['conv2_b']"}, tensor<3x3x4x8xf32> {jax.result_info = "result[1]['conv2_w']"}, tensor<10xf32> {jax.result_info = "result[1]['dense_b']"}, tensor<32x10xf32> {jax.result_info = "result[1]['dense_w']"}) {
    %0 = stablehlo.convolution(%arg6, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<4x8x8x1xf32>, tensor<3x3x1x4xf32>) -> tensor<4x8x8x4xf32>
    %1 = stablehlo.broadcast_in_dim %arg0, dims = [3] : (tensor<4xf32>) -> tensor<1x1x1x4xf32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1, 2, 3] : (tensor<1x1x1x4xf32>) -> tensor<4x8x8x4xf32>
    %3 = stablehlo.add %0, %2 : tensor<4x8x8x4xf32>
    %4 = call @relu(%3) : (tensor<4x8x8x4xf32>) -> tensor<4x8x8x4xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %5 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4x8x8x4xf32>
    %6 = stablehlo.compare GT, %3, %5, FLOAT : (tensor<4x8x8x4xf32>, tensor<4x8x8x4xf32>) -> tensor<4x8x8x4xi1>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<4x8x8x4xf32>
    %cst_1 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %8 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<f32>
    %9 = "stablehlo.reduce_window"(%4, %8) <{base_dilations = array<i64: 1, 1, 1, 1>, padding = dense<0> : tensor<4x2xi64>, window_dilations = array<i64: 1, 1, 1, 1>, window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, 1>}> ({
    ^bb0(%arg9: tensor<f32>, %arg10: tensor<f32>):
      %87 = stablehlo.maximum %arg9, %arg10 : tensor<f32>
      stablehlo.return %87 : tensor<f32>
    }) : (tensor<4x8x8x4xf32>, tensor<f32>) -> tensor<4x4x4x4xf32>
    %10 = stablehlo.convolution(%9, %arg3) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<4x4x4x4xf32>, tensor<3x3x4x8xf32>) -> tensor<4x4x4x8xf32>
    %11 = stablehlo.broadcast_in_dim %arg2, dims = [3] : (tensor<8xf32>) -> tensor<1x1x1x8xf32>
    %12 = stablehlo.broadcast_in_dim %11, dims = [0, 1, 2, 3] : (tensor<1x1x1x8xf32>) -> tensor<4x4x4x8xf32>
    %13 = stablehlo.add %10, %12 : tensor<4x4x4x8xf32>
    %14 = call @relu_0(%13) : (tensor<4x4x4x8xf32>) -> tensor<4x4x4x8xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %15 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<4x4x4x8xf32>
    %16 = stablehlo.compare GT, %13, %15, FLOAT : (tensor<4x4x4x8xf32>, tensor<4x4x4x8xf32>) -> tensor<4x4x4x8xi1>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %17 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<4x4x4x8xf32>
    %cst_4 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %18 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<f32>
    %19 = "stablehlo.reduce_window"(%14, %18) <{base_dilations = array<i64: 1, 1, 1, 1>, padding = dense<0> : tensor<4x2xi64>, window_dilations = array<i64: 1, 1, 1, 1>, window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, 1>}> ({
    ^bb0(%arg9: tensor<f32>, %arg10: tensor<f32>):
      %87 = stablehlo.add %arg9, %arg10 : tensor<f32>
      stablehlo.return %87 : tensor<f32>
    }) : (tensor<4x4x4x8xf32>, tensor<f32>) -> tensor<4x2x2x8xf32>
    %cst_5 = stablehlo.constant dense<4.000000e+00> : tensor<f32>
    %20 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<4x2x2x8xf32>
    %21 = stablehlo.divide %19, %20 : tensor<4x2x2x8xf32>
    %22 = stablehlo.reshape %21 : (tensor<4x2x2x8xf32>) -> tensor<4x32xf32>
    %23 = stablehlo.dot_general %22, %arg5, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<4x32xf32>, tensor<32x10xf32>) -> tensor<4x10xf32>
    %24 = stablehlo.broadcast_in_dim %arg4, dims = [1] : (tensor<10xf32>) -> tensor<1x10xf32>
    %25 = stablehlo.broadcast_in_dim %24, dims = [0, 1] : (tensor<1x10xf32>) -> tensor<4x10xf32>
    %26 = stablehlo.add %23, %25 : tensor<4x10xf32>
    %27:3 = call @log_softmax(%26) : (tensor<4x10xf32>) -> (tensor<4x10xf32>, tensor<4x10xf32>, tensor<4x1xf32>)
    %28 = call @_one_hot(%arg7) : (tensor<4xi32>) -> tensor<4x10xf32>
    %29 = stablehlo.multiply %28, %27#0 : tensor<4x10xf32>
    %cst_6 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %30 = stablehlo.reduce(%29 init: %cst_6) applies stablehlo.add across dimensions = [1] : (tensor<4x10xf32>, tensor<f32>) -> tensor<4xf32>
    %cst_7 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %31 = stablehlo.reduce(%30 init: %cst_7) applies stablehlo.add across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
    %cst_8 = stablehlo.constant dense<4.000000e+00> : tensor<f32>
    %32 = stablehlo.divide %31, %cst_8 : tensor<f32>
    %33 = stablehlo.negate %32 : tensor<f32>
    %cst_9 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %34 = stablehlo.negate %cst_9 : tensor<f32>
    %cst_10 = stablehlo.constant dense<4.000000e+00> : tensor<f32>
    %35 = stablehlo.divide %34, %cst_10 : tensor<f32>
    %36 = stablehlo.broadcast_in_dim %35, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %37 = stablehlo.broadcast_in_dim %36, dims = [0] : (tensor<4xf32>) -> tensor<4x10xf32>
    %38 = stablehlo.multiply %28, %37 : tensor<4x10xf32>
    %39 = call @log_softmax_1(%27#1, %27#2, %38) : (tensor<4x10xf32>, tensor<4x1xf32>, tensor<4x10xf32>) -> tensor<4x10xf32>
    %cst_11 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %40 = stablehlo.reduce(%39 init: %cst_11) applies stablehlo.add across dimensions = [0] : (tensor<4x10xf32>, tensor<f32>) -> tensor<10xf32>
    %41 = stablehlo.reshape %40 : (tensor<10xf32>) -> tensor<1x10xf32>
    %cst_12 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %42 = stablehlo.reduce(%41 init: %cst_12) applies stablehlo.add across dimensions = [0] : (tensor<1x10xf32>, tensor<f32>) -> tensor<10xf32>
    %43 = stablehlo.dot_general %39, %22, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<4x10xf32>, tensor<4x32xf32>) -> tensor<10x32xf32>
    %44 = stablehlo.transpose %43, dims = [1, 0] : (tensor<10x32xf32>) -> tensor<32x10xf32>
    %45 = stablehlo.dot_general %39, %arg5, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<4x10xf32>, tensor<32x10xf32>) -> tensor<4x32xf32>
    %46 = stablehlo.reshape %45 : (tensor<4x32xf32>) -> tensor<4x2x2x8xf32>
    %cst_13 = stablehlo.constant dense<4.000000e+00> : tensor<f32>
    %47 = stablehlo.broadcast_in_dim %cst_13, dims = [] : (tensor<f32>) -> tensor<4x2x2x8xf32>
    %48 = stablehlo.divide %46, %47 : tensor<4x2x2x8xf32>
    %cst_14 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %49 = stablehlo.pad %48, %cst_14, low = [0, 1, 1, 0], high = [0, 1, 1, 0], interior = [0, 1, 1, 0] : (tensor<4x2x2x8xf32>, tensor<f32>) -> tensor<4x5x5x8xf32>
    %cst_15 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %50 = stablehlo.broadcast_in_dim %cst_15, dims = [] : (tensor<f32>) -> tensor<f32>
    %51 = "stablehlo.reduce_window"(%49, %50) <{base_dilations = array<i64: 1, 1, 1, 1>, padding = dense<0> : tensor<4x2xi64>, window_dilations = array<i64: 1, 1, 1, 1>, window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 1, 1, 1>}> ({
    ^bb0(%arg9: tensor<f32>, %arg10: tensor<f32>):
      %87 = stablehlo.add %arg9, %arg10 : tensor<f32>
      stablehlo.return %87 : tensor<f32>
    }) : (tensor<4x5x5x8xf32>, tensor<f32>) -> tensor<4x4x4x8xf32>
    %cst_16 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %52 = stablehlo.broadcast_in_dim %cst_16, dims = [] : (tensor<f32>) -> tensor<4x4x4x8xf32>
    %53 = stablehlo.select %16, %51, %52 : tensor<4x4x4x8xi1>, tensor<4x4x4x8xf32>
    %cst_17 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %54 = stablehlo.reduce(%53 init: %cst_17) applies stablehlo.add across dimensions = [0, 1, 2] : (tensor<4x4x4x8xf32>, tensor<f32>) -> tensor<8xf32>
    %55 = stablehlo.reshape %54 : (tensor<8xf32>) -> tensor<1x1x1x8xf32>
    %cst_18 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %56 = stablehlo.reduce(%55 init: %cst_18) applies stablehlo.add across dimensions = [0, 1, 2] : (tensor<1x1x1x8xf32>, tensor<f32>) -> tensor<8xf32>
    %57 = stablehlo.convolution(%9, %53) dim_numbers = [f, 0, 1, b]x[i, 0, 1, o]->[0, 1, b, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<4x4x4x4xf32>, tensor<4x4x4x8xf32>) -> tensor<3x3x4x8xf32>
    %58 = stablehlo.reverse %arg3, dims = [0, 1] : tensor<3x3x4x8xf32>
    %59 = stablehlo.convolution(%53, %58) dim_numbers = [b, 0, 1, f]x[0, 1, o, i]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<4x4x4x8xf32>, tensor<3x3x4x8xf32>) -> tensor<4x4x4x4xf32>
    %cst_19 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %60 = stablehlo.pad %4, %cst_19, low = [0, 0, 0, 0], high = [0, 0, 0, 0], interior = [0, 0, 0, 0] : (tensor<4x8x8x4xf32>, tensor<f32>) -> tensor<4x8x8x4xf32>
    %cst_20 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %61 = "stablehlo.select_and_scatter"(%60, %59, %cst_20) <{padding = dense<0> : tensor<4x2xi64>, window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, 1>}> ({
    ^bb0(%arg9: tensor<f32>, %arg10: tensor<f32>):
      %87 = stablehlo.compare GE, %arg9, %arg10, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %87 : tensor<i1>
    }, {
    ^bb0(%arg9: tensor<f32>, %arg10: tensor<f32>):
      %87 = stablehlo.add %arg9, %arg10 : tensor<f32>
      stablehlo.return %87 : tensor<f32>
    }) : (tensor<4x8x8x4xf32>, tensor<4x4x4x4xf32>, tensor<f32>) -> tensor<4x8x8x4xf32>
    %62 = stablehlo.slice %61 [0:4, 0:8, 0:8, 0:4] : (tensor<4x8x8x4xf32>) -> tensor<4x8x8x4xf32>
    %cst_21 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %63 = stablehlo.broadcast_in_dim %cst_21, dims = [] : (tensor<f32>) -> tensor<4x8x8x4xf32>
    %64 = stablehlo.select %6, %62, %63 : tensor<4x8x8x4xi1>, tensor<4x8x8x4xf32>
    %cst_22 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %65 = stablehlo.reduce(%64 init: %cst_22) applies stablehlo.add across dimensions = [0, 1, 2] : (tensor<4x8x8x4xf32>, tensor<f32>) -> tensor<4xf32>
    %66 = stablehlo.reshape %65 : (tensor<4xf32>) -> tensor<1x1x1x4xf32>
    %cst_23 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %67 = stablehlo.reduce(%66 init: %cst_23) applies stablehlo.add across dimensions = [0, 1, 2] : (tensor<1x1x1x4xf32>, tensor<f32>) -> tensor<4xf32>
    %68 = stablehlo.convolution(%arg6, %64) dim_numbers = [f, 0, 1, b]x[i, 0, 1, o]->[0, 1, b, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<4x8x8x1xf32>, tensor<4x8x8x4xf32>) -> tensor<3x3x1x4xf32>
    %69 = stablehlo.broadcast_in_dim %arg8, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %70 = stablehlo.multiply %69, %67 : tensor<4xf32>
    %71 = stablehlo.subtract %arg0, %70 : tensor<4xf32>
    %72 = stablehlo.broadcast_in_dim %arg8, dims = [] : (tensor<f32>) -> tensor<3x3x1x4xf32>
    %73 = stablehlo.multiply %72, %68 : tensor<3x3x1x4xf32>
    %74 = stablehlo.subtract %arg1, %73 : tensor<3x3x1x4xf32>
    %75 = stablehlo.broadcast_in_dim %arg8, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %76 = stablehlo.multiply %75, %56 : tensor<8xf32>
    %77 = stablehlo.subtract %arg2, %76 : tensor<8xf32>
    %78 = stablehlo.broadcast_in_dim %arg8, dims = [] : (tensor<f32>) -> tensor<3x3x4x8xf32>
    %79 = stablehlo.multiply %78, %57 : tensor<3x3x4x8xf32>
    %80 = stablehlo.subtract %arg3, %79 : tensor<3x3x4x8xf32>
    %81 = stablehlo.broadcast_in_dim %arg8, dims = [] : (tensor<f32>) -> tensor<10xf32>
    %82 = stablehlo.multiply %81, %42 : tensor<10xf32>
    %83 = stablehlo.subtract %arg4, %82 : tensor<10xf32>
    %84 = stablehlo.broadcast_in_dim %arg8, dims = [] : (tensor<f32>) -> tensor<32x10xf32>
    %85 = stablehlo.multiply %84, %44 : tensor<32x10xf32>
    %86 = stablehlo.subtract %arg5, %85 : tensor<32x10xf32>
    return %33, %71, %74, %77, %80, %83, %86 : tensor<f32>, tensor<4xf32>, tensor<3x3x1x4xf32>, tensor<8xf32>, tensor<3x3x4x8xf32>, tensor<10xf32>, tensor<32x10xf32>
  }
  func.func private @relu(%arg0: tensor<4x8x8x4xf32>) -> tensor<4x8x8x4xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4x8x8x4xf32>
    %1 = stablehlo.maximum %arg0, %0 : tensor<4x8x8x4xf32>
    return %1 : tensor<4x8x8x4xf32>
  }
  func.func private @relu_0(%arg0: tensor<4x4x4x8xf32>) -> tensor<4x4x4x8xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4x4x4x8xf32>
    %1 = stablehlo.maximum %arg0, %0 : tensor<4x4x4x8xf32>
    return %1 : tensor<4x4x4x8xf32>
  }
  func.func private @log_softmax(%arg0: tensor<4x10xf32>) -> (tensor<4x10xf32>, tensor<4x10xf32>, tensor<4x1xf32>) {
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.maximum across dimensions = [1] : (tensor<4x10xf32>, tensor<f32>) -> tensor<4xf32>
    %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %2 = stablehlo.maximum %1, %0 : tensor<4xf32>
    %3 = stablehlo.broadcast_in_dim %2, dims = [0] : (tensor<4xf32>) -> tensor<4x1xf32>
    %4 = stablehlo.broadcast_in_dim %3, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x10xf32>
    %5 = stablehlo.subtract %arg0, %4 : tensor<4x10xf32>
    %6 = stablehlo.exponential %5 : tensor<4x10xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %7 = stablehlo.reduce(%6 init: %cst_1) applies stablehlo.add across dimensions = [1] : (tensor<4x10xf32>, tensor<f32>) -> tensor<4xf32>
    %8 = stablehlo.broadcast_in_dim %7, dims = [0] : (tensor<4xf32>) -> tensor<4x1xf32>
    %9 = stablehlo.log %8 : tensor<4x1xf32>
    %10 = stablehlo.broadcast_in_dim %9, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x10xf32>
    %11 = stablehlo.subtract %5, %10 : tensor<4x10xf32>
    return %11, %6, %8 : tensor<4x10xf32>, tensor<4x10xf32>, tensor<4x1xf32>
  }
  func.func private @_one_hot(%arg0: tensor<4xi32>) -> tensor<4x10xf32> {
    %0 = stablehlo.broadcast_in_dim %arg0, dims = [0] : (tensor<4xi32>) -> tensor<4x1xi32>
    %1 = stablehlo.iota dim = 1 : tensor<1x10xi32>
    %2 = stablehlo.broadcast_in_dim %0, dims = [0, 1] : (tensor<4x1xi32>) -> tensor<4x10xi32>
    %3 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<1x10xi32>) -> tensor<4x10xi32>
    %4 = stablehlo.compare EQ, %2, %3, SIGNED : (tensor<4x10xi32>, tensor<4x10xi32>) -> tensor<4x10xi1>
    %5 = stablehlo.convert %4 : (tensor<4x10xi1>) -> tensor<4x10xf32>
    return %5 : tensor<4x10xf32>
  }
  func.func private @log_softmax_1(%arg0: tensor<4x10xf32>, %arg1: tensor<4x1xf32>, %arg2: tensor<4x10xf32>) -> tensor<4x10xf32> {
    %0 = stablehlo.negate %arg2 : tensor<4x10xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.reduce(%0 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<4x10xf32>, tensor<f32>) -> tensor<4xf32>
    %2 = stablehlo.reshape %1 : (tensor<4xf32>) -> tensor<4x1xf32>
    %3 = stablehlo.divide %2, %arg1 : tensor<4x1xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %4 = stablehlo.reduce(%3 init: %cst_0) applies stablehlo.add across dimensions = [1] : (tensor<4x1xf32>, tensor<f32>) -> tensor<4xf32>
    %5 = stablehlo.broadcast_in_dim %4, dims = [0] : (tensor<4xf32>) -> tensor<4x10xf32>
    %6 = stablehlo.multiply %5, %arg0 : tensor<4x10xf32>
    %7 = stablehlo.add %arg2, %6 : tensor<4x10xf32>
    return %7 : tensor<4x10xf32>
  }
}
