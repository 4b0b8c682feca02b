module @jit_gru_forward attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>, %arg2: tensor<4xf32>, %arg3: tensor<4x4xf32>, %arg4: tensor<4x4xf32>, %arg5: tensor<4x4xf32>, %arg6: tensor<3x4xf32>, %arg7: tensor<3x4xf32>, %arg8: tensor<3x4xf32>, %arg9: tensor<6x2x3xf32>, %arg10: tensor<2x4xf32>, %arg11: tensor<2xui32>) -> (tensor<6x2x4xf32> {jax.result_info = "result[0]"}, tensor<2x4xf32> {jax.result_info = "result[1]"}, tensor<48xf32> {jax.result_info = "result[2]"}, tensor<i32> {jax.result_info = "result[3]"}, tensor<2x4xf32> {jax.result_info = "result[4]"}, tensor<2xui32> {jax.result_info = "result[5]"}, tensor<3xf32> {jax.result_info = "result[6]"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<6x2x4xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1:14 = stablehlo.while(%iterArg = %arg9, %iterArg_2 = %arg8, %iterArg_3 = %arg5, %iterArg_4 = %arg2, %iterArg_5 = %arg7, %iterArg_6 = %arg4, %iterArg_7 = %arg1, %iterArg_8 = %arg6, %iterArg_9 = %arg3, %iterArg_10 = %arg0, %iterArg_11 = %c, %iterArg_12 = %arg10, %iterArg_13 = %arg11, %iterArg_14 = %0) : tensor<6x2x3xf32>, tensor<3x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<3x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<3x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<i32>, tensor<2x4xf32>, tensor<2xui32>, tensor<6x2x4xf32>
    cond {
      %c_15 = stablehlo.constant dense<6> : tensor<i32>
      %7 = stablehlo.compare LT, %iterArg_11, %c_15, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %7 : tensor<i1>
    } do {
      %7 = func.call @dynamic_index_in_dim(%iterArg, %iterArg_11) : (tensor<6x2x3xf32>, tensor<i32>) -> tensor<2x3xf32>
      %8 = func.call @_threefry_split(%iterArg_13) : (tensor<2xui32>) -> tensor<2x2xui32>
      %9 = stablehlo.slice %8 [0:1, 0:2] : (tensor<2x2xui32>) -> tensor<1x2xui32>
      %10 = stablehlo.reshape %9 : (tensor<1x2xui32>) -> tensor<2xui32>
      %11 = stablehlo.slice %8 [1:2, 0:2] : (tensor<2x2xui32>) -> tensor<1x2xui32>
      %12 = stablehlo.reshape %11 : (tensor<1x2xui32>) -> tensor<2xui32>
      %13 = stablehlo.dot_general %7, %iterArg_2, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
      %14 = stablehlo.dot_general %iterArg_12, %iterArg_3, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      %15 = stablehlo.add %13, %14 : tensor<2x4xf32>
      %16 = stablehlo.broadcast_in_dim %iterArg_4, dims = [1] : (tensor<4xf32>) -> tensor<1x4xf32>
      %17 = stablehlo.broadcast_in_dim %16, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<2x4xf32>
      %18 = stablehlo.add %15, %17 : tensor<2x4xf32>
      %19 = stablehlo.negate %18 : tensor<2x4xf32>
      %20 = stablehlo.exponential %19 : tensor<2x4xf32>
      %cst_15 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %21 = stablehlo.broadcast_in_dim %cst_15, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %22 = stablehlo.add %21, %20 : tensor<2x4xf32>
      %cst_16 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %23 = stablehlo.broadcast_in_dim %cst_16, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %24 = stablehlo.divide %23, %22 : tensor<2x4xf32>
      %25 = stablehlo.dot_general %7, %iterArg_5, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
      %26 = stablehlo.dot_general %iterArg_12, %iterArg_6, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      %27 = stablehlo.add %25, %26 : tensor<2x4xf32>
      %28 = stablehlo.broadcast_in_dim %iterArg_7, dims = [1] : (tensor<4xf32>) -> tensor<1x4xf32>
      %29 = stablehlo.broadcast_in_dim %28, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<2x4xf32>
      %30 = stablehlo.add %27, %29 : tensor<2x4xf32>
      %31 = stablehlo.negate %30 : tensor<2x4xf32>
      %32 = stablehlo.exponential %31 : tensor<2x4xf32>
      %cst_17 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %33 = stablehlo.broadcast_in_dim %cst_17, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %34 = stablehlo.add %33, %32 : tensor<2x4xf32>
      %cst_18 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %35 = stablehlo.broadcast_in_dim %cst_18, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %36 = stablehlo.divide %35, %34 : tensor<2x4xf32>
      %37 = stablehlo.dot_general %7, %iterArg_8, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
      %38 = stablehlo.multiply %36, %iterArg_12 : tensor<2x4xf32>
      %39 = stablehlo.dot_general %38, %iterArg_9, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      %40 = stablehlo.add %37, %39 : tensor<2x4xf32>
      %41 = stablehlo.broadcast_in_dim %iterArg_10, dims = [1] : (tensor<4xf32>) -> tensor<1x4xf32>
      %42 = stablehlo.broadcast_in_dim %41, dims = [0, 1] : (tensor<1x4xf32>) -> tensor<2x4xf32>
      %43 = stablehlo.add %40, %42 : tensor<2x4xf32>
      %44 = stablehlo.tanh %43 : tensor<2x4xf32>
      %cst_19 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %45 = stablehlo.broadcast_in_dim %cst_19, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %46 = stablehlo.subtract %45, %24 : tensor<2x4xf32>
      %47 = stablehlo.multiply %46, %iterArg_12 : tensor<2x4xf32>
      %48 = stablehlo.multiply %24, %44 : tensor<2x4xf32>
      %49 = stablehlo.add %47, %48 : tensor<2x4xf32>
      %cst_20 = stablehlo.constant dense<8.000000e-01> : tensor<f32>
      %50 = func.call @_bernoulli(%12, %cst_20) : (tensor<2xui32>, tensor<f32>) -> tensor<2x4xi1>
      %cst_21 = stablehlo.constant dense<8.000000e-01> : tensor<f32>
      %51 = stablehlo.broadcast_in_dim %cst_21, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %52 = stablehlo.divide %49, %51 : tensor<2x4xf32>
      %cst_22 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %53 = func.call @_where(%50, %52, %cst_22) : (tensor<2x4xi1>, tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
      %54 = func.call @dynamic_update_index_in_dim(%iterArg_14, %53, %iterArg_11) : (tensor<6x2x4xf32>, tensor<2x4xf32>, tensor<i32>) -> tensor<6x2x4xf32>
      %c_23 = stablehlo.constant dense<1> : tensor<i32>
      %55 = stablehlo.add %iterArg_11, %c_23 : tensor<i32>
      stablehlo.return %iterArg, %iterArg_2, %iterArg_3, %iterArg_4, %iterArg_5, %iterArg_6, %iterArg_7, %iterArg_8, %iterArg_9, %iterArg_10, %55, %49, %10, %54 : tensor<6x2x3xf32>, tensor<3x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<3x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<3x4xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<i32>, tensor<2x4xf32>, tensor<2xui32>, tensor<6x2x4xf32>
    }
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %3:3 = stablehlo.while(%iterArg = %c_1, %iterArg_2 = %1#11, %iterArg_3 = %2) : tensor<i32>, tensor<2x4xf32>, tensor<2x4xf32>
    cond {
      %c_4 = stablehlo.constant dense<20> : tensor<i32>
      %7 = stablehlo.compare LT, %iterArg, %c_4, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %8 = stablehlo.abs %iterArg_2 : tensor<2x4xf32>
      %cst_5 = stablehlo.constant dense<0xFF800000> : tensor<f32>
      %9 = stablehlo.reduce(%8 init: %cst_5) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<f32>
      %cst_6 = stablehlo.constant dense<5.000000e-02> : tensor<f32>
      %10 = stablehlo.compare GT, %9, %cst_6, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %11 = stablehlo.and %7, %10 : tensor<i1>
      stablehlo.return %11 : tensor<i1>
    } do {
      %c_4 = stablehlo.constant dense<1> : tensor<i32>
      %7 = stablehlo.add %iterArg, %c_4 : tensor<i32>
      %cst_5 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
      %8 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
      %9 = stablehlo.multiply %iterArg_2, %8 : tensor<2x4xf32>
      %10 = stablehlo.tanh %iterArg_2 : tensor<2x4xf32>
      %11 = stablehlo.add %iterArg_3, %10 : tensor<2x4xf32>
      stablehlo.return %7, %9, %11 : tensor<i32>, tensor<2x4xf32>, tensor<2x4xf32>
    }
    %4 = stablehlo.reshape %1#13 : (tensor<6x2x4xf32>) -> tensor<48xf32>
    %5 = call @sort(%4) : (tensor<48xf32>) -> tensor<48xf32>
    %6 = call @_normal(%1#12) : (tensor<2xui32>) -> tensor<3xf32>
    return %1#13, %1#11, %5, %3#0, %3#2, %1#12, %6 : tensor<6x2x4xf32>, tensor<2x4xf32>, tensor<48xf32>, tensor<i32>, tensor<2x4xf32>, tensor<2xui32>, tensor<3xf32>
  }
  func.func private @dynamic_index_in_dim(%arg0: tensor<6x2x3xf32>, %arg1: tensor<i32>) -> tensor<2x3xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, sizes = [1, 2, 3] : (tensor<6x2x3xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x3xf32>
    %1 = stablehlo.reshape %0 : (tensor<1x2x3xf32>) -> tensor<2x3xf32>
    return %1 : tensor<2x3xf32>
  }
  func.func private @_threefry_split(%arg0: tensor<2xui32>) -> tensor<2x2xui32> {
    %0 = stablehlo.slice %arg0 [0:1] : (tensor<2xui32>) -> tensor<1xui32>
    %1 = stablehlo.reshape %0 : (tensor<1xui32>) -> tensor<ui32>
    %2 = stablehlo.slice %arg0 [1:2] : (tensor<2xui32>) -> tensor<1xui32>
    %3 = stablehlo.reshape %2 : (tensor<1xui32>) -> tensor<ui32>
    %4 = stablehlo.iota dim = 0 : tensor<2xui64>
    %c = stablehlo.constant dense<1> : tensor<ui64>
    %5 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<ui64>) -> tensor<2xui64>
    %6 = stablehlo.multiply %5, %4 : tensor<2xui64>
    %c_0 = stablehlo.constant dense<32> : tensor<ui64>
    %7 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<ui64>) -> tensor<2xui64>
    %8 = stablehlo.shift_right_logical %6, %7 : tensor<2xui64>
    %9 = stablehlo.convert %6 : (tensor<2xui64>) -> tensor<2xui32>
    %10 = stablehlo.convert %8 : (tensor<2xui64>) -> tensor<2xui32>
    %11:2 = call @threefry2x32(%1, %3, %10, %9) : (tensor<ui32>, tensor<ui32>, tensor<2xui32>, tensor<2xui32>) -> (tensor<2xui32>, tensor<2xui32>)
    %12 = stablehlo.broadcast_in_dim %11#0, dims = [0] : (tensor<2xui32>) -> tensor<2x1xui32>
    %13 = stablehlo.broadcast_in_dim %11#1, dims = [0] : (tensor<2xui32>) -> tensor<2x1xui32>
    %14 = stablehlo.concatenate %12, %13, dim = 1 : (tensor<2x1xui32>, tensor<2x1xui32>) -> tensor<2x2xui32>
    return %14 : tensor<2x2xui32>
  }
  func.func private @threefry2x32(%arg0: tensor<ui32>, %arg1: tensor<ui32>, %arg2: tensor<2xui32>, %arg3: tensor<2xui32>) -> (tensor<2xui32>, tensor<2xui32>) {
    %c = stablehlo.constant dense<[13, 15, 26, 6]> : tensor<4xui32>
    %c_0 = stablehlo.constant dense<[17, 29, 16, 24]> : tensor<4xui32>
    %0 = stablehlo.xor %arg0, %arg1 : tensor<ui32>
    %c_1 = stablehlo.constant dense<466688986> : tensor<ui32>
    %1 = stablehlo.xor %0, %c_1 : tensor<ui32>
    %2 = stablehlo.broadcast_in_dim %arg0, dims = [] : (tensor<ui32>) -> tensor<2xui32>
    %3 = stablehlo.add %arg2, %2 : tensor<2xui32>
    %4 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<ui32>) -> tensor<2xui32>
    %5 = stablehlo.add %arg3, %4 : tensor<2xui32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %c_3 = stablehlo.constant dense<0> : tensor<i32>
    %6:9 = stablehlo.while(%iterArg = %c_3, %iterArg_4 = %c_2, %iterArg_5 = %3, %iterArg_6 = %5, %iterArg_7 = %arg1, %iterArg_8 = %1, %iterArg_9 = %arg0, %iterArg_10 = %c, %iterArg_11 = %c_0) : tensor<i32>, tensor<i32>, tensor<2xui32>, tensor<2xui32>, tensor<ui32>, tensor<ui32>, tensor<ui32>, tensor<4xui32>, tensor<4xui32>
    cond {
      %c_12 = stablehlo.constant dense<5> : tensor<i32>
      %7 = stablehlo.compare LT, %iterArg, %c_12, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %7 : tensor<i1>
    } do {
      %c_12 = stablehlo.constant dense<1> : tensor<i32>
      %7 = stablehlo.add %iterArg_4, %c_12 : tensor<i32>
      %8 = stablehlo.slice %iterArg_10 [0:1] : (tensor<4xui32>) -> tensor<1xui32>
      %9 = stablehlo.reshape %8 : (tensor<1xui32>) -> tensor<ui32>
      %10 = stablehlo.slice %iterArg_10 [1:2] : (tensor<4xui32>) -> tensor<1xui32>
      %11 = stablehlo.reshape %10 : (tensor<1xui32>) -> tensor<ui32>
      %12 = stablehlo.slice %iterArg_10 [2:3] : (tensor<4xui32>) -> tensor<1xui32>
      %13 = stablehlo.reshape %12 : (tensor<1xui32>) -> tensor<ui32>
      %14 = stablehlo.slice %iterArg_10 [3:4] : (tensor<4xui32>) -> tensor<1xui32>
      %15 = stablehlo.reshape %14 : (tensor<1xui32>) -> tensor<ui32>
      %16 = stablehlo.add %iterArg_5, %iterArg_6 : tensor<2xui32>
      %17 = stablehlo.broadcast_in_dim %9, dims = [] : (tensor<ui32>) -> tensor<2xui32>
      %18 = stablehlo.shift_left %iterArg_6, %17 : tensor<2xui32>
      %c_13 = stablehlo.constant dense<32> : tensor<ui32>
      %19 = stablehlo.subtract %c_13, %9 : tensor<ui32>
      %20 = stablehlo.broadcast_in_dim %19, dims = [] : (tensor<ui32>) -> tensor<2xui32>
      %21 = stablehlo.shift_right_logical %iterArg_6, %20 : tensor<2xui32>
      %22 = stablehlo.or %18, %21 : tensor<2xui32>
      %23 = stablehlo.xor %16, %22 : tensor<2xui32>
      %24 = stablehlo.add %16, %23 : tensor<2xui32>
      %25 = stablehlo.broadcast_in_dim %11, dims = [] : (tensor<ui32>) -> tensor<2xui32>
      %26 = stablehlo.shift_left %23, %25 : tensor<2xui32>
      %c_14 = stablehlo.constant dense<32> : tensor<ui32>
      %27 = stablehlo.subtract %c_14, %11 : tensor<ui32>
      %28 = stablehlo.broadcast_in_dim %27, dims = [] : (tensor<ui32>) -> tensor<2xui32>
      %29 = stablehlo.shift_right_logical %23, %28 : tensor<2xui32>
      %30 = stablehlo.or %26, %29 : tensor<2xui32>
      %31 = stablehlo.xor %24, %30 : tensor<2xui32>
      %32 = stablehlo.add %24, %31 : tensor<2xui32>
      %33 = stablehlo.broadcast_in_dim %13, dims = [] : (tensor<ui32>) -> tensor<2xui32>
      %34 = stablehlo.shift_left %31, %33 : tensor<2xui32>
      %c_15 = stablehlo.constant dense<32> : tensor<ui32>
      %35 = stablehlo.subtract %c_15, %13 : tensor<ui32>
      %36 = stablehlo.broadcast_in_dim %35, dims = [] : (tensor<ui32>) -> tensor<2xui32>
      %37 = stablehlo.shift_right_logical %31, %36 : tensor<2xui32>
      %38 = stablehlo.or %34, %37 : tensor<2xui32>
      %39 = stablehlo.xor %32, %38 : tensor<2xui32>
      %40 = stablehlo.add %32, %39 : tensor<2xui32>
      %41 = stablehlo.broadcast_in_dim %15, dims = [] : (tensor<ui32>) -> tensor<2xui32>
      %42 = stablehlo.shift_left %39, %41 : tensor<2xui32>
      %c_16 = stablehlo.constant dense<32> : tensor<ui32>
      %43 = stablehlo.subtract %c_16, %15 : tensor<ui32>
      %44 = stablehlo.broadcast_in_dim %43, dims = [] : (tensor<ui32>) -> tensor<2xui32>
      %45 = stablehlo.shift_right_logical %39, %44 : tensor<2xui32>
      %46 = stablehlo.or %42, %45 : tensor<2xui32>
      %47 = stablehlo.xor %40, %46 : tensor<2xui32>
      %48 = stablehlo.broadcast_in_dim %iterArg_7, dims = [] : (tensor<ui32>) -> tensor<2xui32>
      %49 = stablehlo.add %40, %48 : tensor<2xui32>
      %50 = stablehlo.broadcast_in_dim %iterArg_8, dims = [] : (tensor<ui32>) -> tensor<2xui32>
      %51 = stablehlo.add %47, %50 : tensor<2xui32>
      %c_17 = stablehlo.constant dense<1> : tensor<i32>
      %52 = stablehlo.add %iterArg_4, %c_17 : tensor<i32>
      %53 = stablehlo.convert %52 : (tensor<i32>) -> tensor<ui32>
      %54 = stablehlo.broadcast_in_dim %53, dims = [] : (tensor<ui32>) -> tensor<2xui32>
      %55 = stablehlo.add %51, %54 : tensor<2xui32>
      %c_18 = stablehlo.constant dense<1> : tensor<i32>
      %56 = stablehlo.add %iterArg, %c_18 : tensor<i32>
      stablehlo.return %56, %7, %49, %55, %iterArg_8, %iterArg_9, %iterArg_7, %iterArg_11, %iterArg_10 : tensor<i32>, tensor<i32>, tensor<2xui32>, tensor<2xui32>, tensor<ui32>, tensor<ui32>, tensor<ui32>, tensor<4xui32>, tensor<4xui32>
    }
    return %6#2, %6#3 : tensor<2xui32>, tensor<2xui32>
  }
  func.func private @_bernoulli(%arg0: tensor<2xui32>, %arg1: tensor<f32>) -> tensor<2x4xi1> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %0 = call @_uniform(%arg0, %cst, %cst_0) : (tensor<2xui32>, tensor<f32>, tensor<f32>) -> tensor<2x4xf32>
    %1 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %2 = stablehlo.compare LT, %0, %1, FLOAT : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xi1>
    return %2 : tensor<2x4xi1>
  }
  func.func private @_uniform(%arg0: tensor<2xui32>, %arg1: tensor<f32>, %arg2: tensor<f32>) -> tensor<2x4xf32> {
    %0 = stablehlo.convert %arg1 : tensor<f32>
    %1 = stablehlo.convert %arg2 : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<1x1xf32>
    %3 = stablehlo.broadcast_in_dim %1, dims = [] : (tensor<f32>) -> tensor<1x1xf32>
    %4 = stablehlo.slice %arg0 [0:1] : (tensor<2xui32>) -> tensor<1xui32>
    %5 = stablehlo.reshape %4 : (tensor<1xui32>) -> tensor<ui32>
    %6 = stablehlo.slice %arg0 [1:2] : (tensor<2xui32>) -> tensor<1xui32>
    %7 = stablehlo.reshape %6 : (tensor<1xui32>) -> tensor<ui32>
    %8 = stablehlo.iota dim = 0 : tensor<2x4xui64>
    %9 = stablehlo.iota dim = 1 : tensor<2x4xui64>
    %c = stablehlo.constant dense<4> : tensor<ui64>
    %10 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<ui64>) -> tensor<2x4xui64>
    %11 = stablehlo.multiply %10, %8 : tensor<2x4xui64>
    %c_0 = stablehlo.constant dense<1> : tensor<ui64>
    %12 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<ui64>) -> tensor<2x4xui64>
    %13 = stablehlo.multiply %12, %9 : tensor<2x4xui64>
    %14 = stablehlo.add %11, %13 : tensor<2x4xui64>
    %c_1 = stablehlo.constant dense<32> : tensor<ui64>
    %15 = stablehlo.broadcast_in_dim %c_1, dims = [] : (tensor<ui64>) -> tensor<2x4xui64>
    %16 = stablehlo.shift_right_logical %14, %15 : tensor<2x4xui64>
    %17 = stablehlo.convert %14 : (tensor<2x4xui64>) -> tensor<2x4xui32>
    %18 = stablehlo.convert %16 : (tensor<2x4xui64>) -> tensor<2x4xui32>
    %19:2 = call @threefry2x32_0(%5, %7, %18, %17) : (tensor<ui32>, tensor<ui32>, tensor<2x4xui32>, tensor<2x4xui32>) -> (tensor<2x4xui32>, tensor<2x4xui32>)
    %20 = stablehlo.xor %19#0, %19#1 : tensor<2x4xui32>
    %c_2 = stablehlo.constant dense<9> : tensor<ui32>
    %21 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
    %22 = stablehlo.shift_right_logical %20, %21 : tensor<2x4xui32>
    %c_3 = stablehlo.constant dense<1065353216> : tensor<ui32>
    %23 = stablehlo.broadcast_in_dim %c_3, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
    %24 = stablehlo.or %22, %23 : tensor<2x4xui32>
    %25 = stablehlo.bitcast_convert %24 : (tensor<2x4xui32>) -> tensor<2x4xf32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %26 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %27 = stablehlo.subtract %25, %26 : tensor<2x4xf32>
    %28 = stablehlo.subtract %3, %2 : tensor<1x1xf32>
    %29 = stablehlo.broadcast_in_dim %28, dims = [0, 1] : (tensor<1x1xf32>) -> tensor<2x4xf32>
    %30 = stablehlo.multiply %27, %29 : tensor<2x4xf32>
    %31 = stablehlo.broadcast_in_dim %2, dims = [0, 1] : (tensor<1x1xf32>) -> tensor<2x4xf32>
    %32 = stablehlo.add %30, %31 : tensor<2x4xf32>
    %33 = stablehlo.broadcast_in_dim %2, dims = [0, 1] : (tensor<1x1xf32>) -> tensor<2x4xf32>
    %34 = stablehlo.maximum %33, %32 : tensor<2x4xf32>
    return %34 : tensor<2x4xf32>
  }
  func.func private @threefry2x32_0(%arg0: tensor<ui32>, %arg1: tensor<ui32>, %arg2: tensor<2x4xui32>, %arg3: tensor<2x4xui32>) -> (tensor<2x4xui32>, tensor<2x4xui32>) {
    %c = stablehlo.constant dense<[13, 15, 26, 6]> : tensor<4xui32>
    %c_0 = stablehlo.constant dense<[17, 29, 16, 24]> : tensor<4xui32>
    %0 = stablehlo.xor %arg0, %arg1 : tensor<ui32>
    %c_1 = stablehlo.constant dense<466688986> : tensor<ui32>
    %1 = stablehlo.xor %0, %c_1 : tensor<ui32>
    %2 = stablehlo.broadcast_in_dim %arg0, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
    %3 = stablehlo.add %arg2, %2 : tensor<2x4xui32>
    %4 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
    %5 = stablehlo.add %arg3, %4 : tensor<2x4xui32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %c_3 = stablehlo.constant dense<0> : tensor<i32>
    %6:9 = stablehlo.while(%iterArg = %c_3, %iterArg_4 = %c_2, %iterArg_5 = %3, %iterArg_6 = %5, %iterArg_7 = %arg1, %iterArg_8 = %1, %iterArg_9 = %arg0, %iterArg_10 = %c, %iterArg_11 = %c_0) : tensor<i32>, tensor<i32>, tensor<2x4xui32>, tensor<2x4xui32>, tensor<ui32>, tensor<ui32>, tensor<ui32>, tensor<4xui32>, tensor<4xui32>
    cond {
      %c_12 = stablehlo.constant dense<5> : tensor<i32>
      %7 = stablehlo.compare LT, %iterArg, %c_12, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %7 : tensor<i1>
    } do {
      %c_12 = stablehlo.constant dense<1> : tensor<i32>
      %7 = stablehlo.add %iterArg_4, %c_12 : tensor<i32>
      %8 = stablehlo.slice %iterArg_10 [0:1] : (tensor<4xui32>) -> tensor<1xui32>
      %9 = stablehlo.reshape %8 : (tensor<1xui32>) -> tensor<ui32>
      %10 = stablehlo.slice %iterArg_10 [1:2] : (tensor<4xui32>) -> tensor<1xui32>
      %11 = stablehlo.reshape %10 : (tensor<1xui32>) -> tensor<ui32>
      %12 = stablehlo.slice %iterArg_10 [2:3] : (tensor<4xui32>) -> tensor<1xui32>
      %13 = stablehlo.reshape %12 : (tensor<1xui32>) -> tensor<ui32>
      %14 = stablehlo.slice %iterArg_10 [3:4] : (tensor<4xui32>) -> tensor<1xui32>
      %15 = stablehlo.reshape %14 : (tensor<1xui32>) -> tensor<ui32>
      %16 = stablehlo.add %iterArg_5, %iterArg_6 : tensor<2x4xui32>
      %17 = stablehlo.broadcast_in_dim %9, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
      %18 = stablehlo.shift_left %iterArg_6, %17 : tensor<2x4xui32>
      %c_13 = stablehlo.constant dense<32> : tensor<ui32>
      %19 = stablehlo.subtract %c_13, %9 : tensor<ui32>
      %20 = stablehlo.broadcast_in_dim %19, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
      %21 = stablehlo.shift_right_logical %iterArg_6, %20 : tensor<2x4xui32>
      %22 = stablehlo.or %18, %21 : tensor<2x4xui32>
      %23 = stablehlo.xor %16, %22 : tensor<2x4xui32>
      %24 = stablehlo.add %16, %23 : tensor<2x4xui32>
      %25 = stablehlo.broadcast_in_dim %11, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
      %26 = stablehlo.shift_left %23, %25 : tensor<2x4xui32>
      %c_14 = stablehlo.constant dense<32> : tensor<ui32>
      %27 = stablehlo.subtract %c_14, %11 : tensor<ui32>
      %28 = stablehlo.broadcast_in_dim %27, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
      %29 = stablehlo.shift_right_logical %23, %28 : tensor<2x4xui32>
      %30 = stablehlo.or %26, %29 : tensor<2x4xui32>
      %31 = stablehlo.xor %24, %30 : tensor<2x4xui32>
      %32 = stablehlo.add %24, %31 : tensor<2x4xui32>
      %33 = stablehlo.broadcast_in_dim %13, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
      %34 = stablehlo.shift_left %31, %33 : tensor<2x4xui32>
      %c_15 = stablehlo.constant dense<32> : tensor<ui32>
      %35 = stablehlo.subtract %c_15, %13 : tensor<ui32>
      %36 = stablehlo.broadcast_in_dim %35, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
      %37 = stablehlo.shift_right_logical %31, %36 : tensor<2x4xui32>
      %38 = stablehlo.or %34, %37 : tensor<2x4xui32>
      %39 = stablehlo.xor %32, %38 : tensor<2x4xui32>
      %40 = stablehlo.add %32, %39 : tensor<2x4xui32>
      %41 = stablehlo.broadcast_in_dim %15, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
      %42 = stablehlo.shift_left %39, %41 : tensor<2x4xui32>
      %c_16 = stablehlo.constant dense<32> : tensor<ui32>
      %43 = stablehlo.subtract %c_16, %15 : tensor<ui32>
      %44 = stablehlo.broadcast_in_dim %43, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
      %45 = stablehlo.shift_right_logical %39, %44 : tensor<2x4xui32>
      %46 = stablehlo.or %42, %45 : tensor<2x4xui32>
      %47 = stablehlo.xor %40, %46 : tensor<2x4xui32>
      %48 = stablehlo.broadcast_in_dim %iterArg_7, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
      %49 = stablehlo.add %40, %48 : tensor<2x4xui32>
      %50 = stablehlo.broadcast_in_dim %iterArg_8, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
      %51 = stablehlo.add %47, %50 : tensor<2x4xui32>
      %c_17 = stablehlo.constant dense<1> : tensor<i32>
      %52 = stablehlo.add %iterArg_4, %c_17 : tensor<i32>
      %53 = stablehlo.convert %52 : (tensor<i32>) -> tensor<ui32>
      %54 = stablehlo.broadcast_in_dim %53, dims = [] : (tensor<ui32>) -> tensor<2x4xui32>
      %55 = stablehlo.add %51, %54 : tensor<2x4xui32>
      %c_18 = stablehlo.constant dense<1> : tensor<i32>
      %56 = stablehlo.add %iterArg, %c_18 : tensor<i32>
      stablehlo.return %56, %7, %49, %55, %iterArg_8, %iterArg_9, %iterArg_7, %iterArg_11, %iterArg_10 : tensor<i32>, tensor<i32>, tensor<2x4xui32>, tensor<2x4xui32>, tensor<ui32>, tensor<ui32>, tensor<ui32>, tensor<4xui32>, tensor<4xui32>
    }
    return %6#2, %6#3 : tensor<2x4xui32>, tensor<2x4xui32>
  }
  func.func private @_where(%arg0: tensor<2x4xi1>, %arg1: tensor<2x4xf32>, %arg2: tensor<f32>) -> tensor<2x4xf32> {
    %0 = stablehlo.convert %arg2 : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %2 = stablehlo.select %arg0, %arg1, %1 : tensor<2x4xi1>, tensor<2x4xf32>
    return %2 : tensor<2x4xf32>
  }
  func.func private @dynamic_update_index_in_dim(%arg0: tensor<6x2x4xf32>, %arg1: tensor<2x4xf32>, %arg2: tensor<i32>) -> tensor<6x2x4xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1, 2] : (tensor<2x4xf32>) -> tensor<1x2x4xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c, %c_0 : (tensor<6x2x4xf32>, tensor<1x2x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<6x2x4xf32>
    return %1 : tensor<6x2x4xf32>
  }
  func.func private @sort(%arg0: tensor<48xf32>) -> tensor<48xf32> {
    %0 = "stablehlo.sort"(%arg0) <{dimension = 0 : i64, is_stable = true}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %1 = stablehlo.compare EQ, %arg1, %cst, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %2 = stablehlo.select %1, %cst_0, %arg1 : tensor<i1>, tensor<f32>
      %3 = stablehlo.compare NE, %arg1, %arg1, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %cst_1 = stablehlo.constant dense<0x7FC00000> : tensor<f32>
      %4 = stablehlo.select %3, %cst_1, %2 : tensor<i1>, tensor<f32>
      %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %5 = stablehlo.compare EQ, %arg2, %cst_2, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %6 = stablehlo.select %5, %cst_3, %arg2 : tensor<i1>, tensor<f32>
      %7 = stablehlo.compare NE, %arg2, %arg2, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %cst_4 = stablehlo.constant dense<0x7FC00000> : tensor<f32>
      %8 = stablehlo.select %7, %cst_4, %6 : tensor<i1>, tensor<f32>
      %9 = stablehlo.compare LT, %4, %8, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %9 : tensor<i1>
    }) : (tensor<48xf32>) -> tensor<48xf32>
    return %0 : tensor<48xf32>
  }
  func.func private @_normal(%arg0: tensor<2xui32>) -> tensor<3xf32> {
    %0 = call @_normal_real(%arg0) : (tensor<2xui32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
  func.func private @_normal_real(%arg0: tensor<2xui32>) -> tensor<3xf32> {
    %cst = stablehlo.constant dense<-0.99999994> : tensor<f32>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %0 = call @_uniform_1(%arg0, %cst, %cst_0) : (tensor<2xui32>, tensor<f32>, tensor<f32>) -> tensor<3xf32>
    %1 = chlo.erf_inv %0 : tensor<3xf32> -> tensor<3xf32>
    %cst_1 = stablehlo.constant dense<1.41421354> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %3 = stablehlo.multiply %2, %1 : tensor<3xf32>
    return %3 : tensor<3xf32>
  }
  func.func private @_uniform_1(%arg0: tensor<2xui32>, %arg1: tensor<f32>, %arg2: tensor<f32>) -> tensor<3xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %1 = stablehlo.broadcast_in_dim %arg2, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %2 = stablehlo.slice %arg0 [0:1] : (tensor<2xui32>) -> tensor<1xui32>
    %3 = stablehlo.reshape %2 : (tensor<1xui32>) -> tensor<ui32>
    %4 = stablehlo.slice %arg0 [1:2] : (tensor<2xui32>) -> tensor<1xui32>
    %5 = stablehlo.reshape %4 : (tensor<1xui32>) -> tensor<ui32>
    %6 = stablehlo.iota dim = 0 : tensor<3xui64>
    %c = stablehlo.constant dense<1> : tensor<ui64>
    %7 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<ui64>) -> tensor<3xui64>
    %8 = stablehlo.multiply %7, %6 : tensor<3xui64>
    %c_0 = stablehlo.constant dense<32> : tensor<ui64>
    %9 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<ui64>) -> tensor<3xui64>
    %10 = stablehlo.shift_right_logical %8, %9 : tensor<3xui64>
    %11 = stablehlo.convert %8 : (tensor<3xui64>) -> tensor<3xui32>
    %12 = stablehlo.convert %10 : (tensor<3xui64>) -> tensor<3xui32>
    %13:2 = call @threefry2x32_2(%3, %5, %12, %11) : (tensor<ui32>, tensor<ui32>, tensor<3xui32>, tensor<3xui32>) -> (tensor<3xui32>, tensor<3xui32>)
    %14 = stablehlo.xor %13#0, %13#1 : tensor<3xui32>
    %c_1 = stablehlo.constant dense<9> : tensor<ui32>
    %15 = stablehlo.broadcast_in_dim %c_1, dims = [] : (tensor<ui32>) -> tensor<3xui32>
    %16 = stablehlo.shift_right_logical %14, %15 : tensor<3xui32>
    %c_2 = stablehlo.constant dense<1065353216> : tensor<ui32>
    %17 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<ui32>) -> tensor<3xui32>
    %18 = stablehlo.or %16, %17 : tensor<3xui32>
    %19 = stablehlo.bitcast_convert %18 : (tensor<3xui32>) -> tensor<3xf32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %20 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %21 = stablehlo.subtract %19, %20 : tensor<3xf32>
    %22 = stablehlo.subtract %1, %0 : tensor<1xf32>
    %23 = stablehlo.broadcast_in_dim %22, dims = [0] : (tensor<1xf32>) -> tensor<3xf32>
    %24 = stablehlo.multiply %21, %23 : tensor<3xf32>
    %25 = stablehlo.broadcast_in_dim %0, dims = [0] : (tensor<1xf32>) -> tensor<3xf32>
    %26 = stablehlo.add %24, %25 : tensor<3xf32>
    %27 = stablehlo.broadcast_in_dim %0, dims = [0] : (tensor<1xf32>) -> tensor<3xf32>
    %28 = stablehlo.maximum %27, %26 : tensor<3xf32>
    return %28 : tensor<3xf32>
  }
  func.func private @threefry2x32_2(%arg0: tensor<ui32>, %arg1: tensor<ui32>, %arg2: tensor<3xui32>, %arg3: tensor<3xui32>) -> (tensor<3xui32>, tensor<3xui32>) {
    %c = stablehlo.constant dense<[13, 15, 26, 6]> : tensor<4xui32>
    %c_0 = stablehlo.constant dense<[17, 29, 16, 24]> : tensor<4xui32>
    %0 = stablehlo.xor %arg0, %arg1 : tensor<ui32>
    %c_1 = stablehlo.constant dense<466688986> : tensor<ui32>
    %1 = stablehlo.xor %0, %c_1 : tensor<ui32>
    %2 = stablehlo.broadcast_in_dim %arg0, dims = [] : (tensor<ui32>) -> tensor<3xui32>
    %3 = stablehlo.add %arg2, %2 : tensor<3xui32>
    %4 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<ui32>) -> tensor<3xui32>
    %5 = stablehlo.add %arg3, %4 : tensor<3xui32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %c_3 = stablehlo.constant dense<0> : tensor<i32>
    %6:9 = stablehlo.while(%iterArg = %c_3, %iterArg_4 = %c_2, %iterArg_5 = %3, %iterArg_6 = %5, %iterArg_7 = %arg1, %iterArg_8 = %1, %iterArg_9 = %arg0, %iterArg_10 = %c, %iterArg_11 = %c_0) : tensor<i32>, tensor<i32>, tensor<3xui32>, tensor<3xui32>, tensor<ui32>, tensor<ui32>, tensor<ui32>, tensor<4xui32>, tensor<4xui32>
    cond {
      %c_12 = stablehlo.constant dense<5> : tensor<i32>
      %7 = stablehlo.compare LT, %iterArg, %c_12, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %7 : tensor<i1>
    } do {
      %c_12 = stablehlo.constant dense<1> : tensor<i32>
      %7 = stablehlo.add %iterArg_4, %c_12 : tensor<i32>
      %8 = stablehlo.slice %iterArg_10 [0:1] : (tensor<4xui32>) -> tensor<1xui32>
      %9 = stablehlo.reshape %8 : (tensor<1xui32>) -> tensor<ui32>
      %10 = stablehlo.slice %iterArg_10 [1:2] : (tensor<4xui32>) -> tensor<1xui32>
      %11 = stablehlo.reshape %10 : (tensor<1xui32>) -> tensor<ui32>
      %12 = stablehlo.slice %iterArg_10 [2:3] : (tensor<4xui32>) -> tensor<1xui32>
      %13 = stablehlo.reshape %12 : (tensor<1xui32>) -> tensor<ui32>
      %14 = stablehlo.slice %iterArg_10 [3:4] : (tensor<4xui32>) -> tensor<1xui32>
      %15 = stablehlo.reshape %14 : (tensor<1xui32>) -> tensor<ui32>
      %16 = stablehlo.add %iterArg_5, %iterArg_6 : tensor<3xui32>
      %17 = stablehlo.broadcast_in_dim %9, dims = [] : (tensor<ui32>) -> tensor<3xui32>
      %18 = stablehlo.shift_left %iterArg_6, %17 : tensor<3xui32>
      %c_13 = stablehlo.constant dense<32> : tensor<ui32>
      %19 = stablehlo.subtract %c_13, %9 : tensor<ui32>
      %20 = stablehlo.broadcast_in_dim %19, dims = [] : (tensor<ui32>) -> tensor<3xui32>
      %21 = stablehlo.shift_right_logical %iterArg_6, %20 : tensor<3xui32>
      %22 = stablehlo.or %18, %21 : tensor<3xui32>
      %23 = stablehlo.xor %16, %22 : tensor<3xui32>
      %24 = stablehlo.add %16, %23 : tensor<3xui32>
      %25 = stablehlo.broadcast_in_dim %11, dims = [] : (tensor<ui32>) -> tensor<3xui32>
      %26 = stablehlo.shift_left %23, %25 : tensor<3xui32>
      %c_14 = stablehlo.constant dense<32> : tensor<ui32>
      %27 = stablehlo.subtract %c_14, %11 : tensor<ui32>
      %28 = stablehlo.broadcast_in_dim %27, dims = [] : (tensor<ui32>) -> tensor<3xui32>
      %29 = stablehlo.shift_right_logical %23, %28 : tensor<3xui32>
      %30 = stablehlo.or %26, %29 : tensor<3xui32>
      %31 = stablehlo.xor %24, %30 : tensor<3xui32>
      %32 = stablehlo.add %24, %31 : tensor<3xui32>
      %33 = stablehlo.broadcast_in_dim %13, dims = [] : (tensor<ui32>) -> tensor<3xui32>
      %34 = stablehlo.shift_left %31, %33 : tensor<3xui32>
      %c_15 = stablehlo.constant dense<32> : tensor<ui32>
      %35 = stablehlo.subtract %c_15, %13 : tensor<ui32>
      %36 = stablehlo.broadcast_in_dim %35, dims = [] : (tensor<ui32>) -> tensor<3xui32>
      %37 = stablehlo.shift_right_logical %31, %36 : tensor<3xui32>
      %38 = stablehlo.or %34, %37 : tensor<3xui32>
      %39 = stablehlo.xor %32, %38 : tensor<3xui32>
      %40 = stablehlo.add %32, %39 : tensor<3xui32>
      %41 = stablehlo.broadcast_in_dim %15, dims = [] : (tensor<ui32>) -> tensor<3xui32>
      %42 = stablehlo.shift_left %39, %41 : tensor<3xui32>
      %c_16 = stablehlo.constant dense<32> : tensor<ui32>
      %43 = stablehlo.subtract %c_16, %15 : tensor<ui32>
      %44 = stablehlo.broadcast_in_dim %43, dims = [] : (tensor<ui32>) -> tensor<3xui32>
      %45 = stablehlo.shift_right_logical %39, %44 : tensor<3xui32>
      %46 = stablehlo.or %42, %45 : tensor<3xui32>
      %47 = stablehlo.xor %40, %46 : tensor<3xui32>
      %48 = stablehlo.broadcast_in_dim %iterArg_7, dims = [] : (tensor<ui32>) -> tensor<3xui32>
      %49 = stablehlo.add %40, %48 : tensor<3xui32>
      %50 = stablehlo.broadcast_in_dim %iterArg_8, dims = [] : (tensor<ui32>) -> tensor<3xui32>
      %51 = stablehlo.add %47, %50 : tensor<3xui32>
      %c_17 = stablehlo.constant dense<1> : tensor<i32>
      %52 = stablehlo.add %iterArg_4, %c_17 : tensor<i32>
      %53 = stablehlo.convert %52 : (tensor<i32>) -> tensor<ui32>
      %54 = stablehlo.broadcast_in_dim %53, dims = [] : (tensor<ui32>) -> tensor<3xui32>
      %55 = stablehlo.add %51, %54 : tensor<3xui32>
      %c_18 = stablehlo.constant dense<1> : tensor<i32>
      %56 = stablehlo.add %iterArg, %c_18 : tensor<i32>
      stablehlo.return %56, %7, %49, %55, %iterArg_8, %iterArg_9, %iterArg_7, %iterArg_11, %iterArg_10 : tensor<i32>, tensor<i32>, tensor<3xui32>, tensor<3xui32>, tensor<ui32>, tensor<ui32>, tensor<ui32>, tensor<4xui32>, tensor<4xui32>
    }
    return %6#2, %6#3 : tensor<3xui32>, tensor<3xui32>
  }
}
