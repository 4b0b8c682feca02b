module @jit_int_ops attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<5x6xf32>, %arg1: tensor<8xi32>, %arg2: tensor<8xi32>, %arg3: tensor<8xui8>, %arg4: tensor<i32>) -> (tensor<5xi32> {jax.result_info = "result[0]"}, tensor<8xi32> {jax.result_info = "result[1]"}, tensor<8xi32> {jax.result_info = "result[2]"}, tensor<5x6xf32> {jax.result_info = "result[3]"}, tensor<5x8xi32> {jax.result_info = "result[4]"}, tensor<5x8xui8> {jax.result_info = "result[5]"}, tensor<8x6xf32> {jax.result_info = "result[6]"}, tensor<5x2xf32> {jax.result_info = "result[7]"}, tensor<5x2xi32> {jax.result_info = "result[8]"}) {
    %0 = call @argmax(%arg0) : (tensor<5x6xf32>) -> tensor<5xi32>
    %1 = call @cumsum(%arg1) : (tensor<8xi32>) -> tensor<8xi32>
    %2 = call @cummax(%arg1) : (tensor<8xi32>) -> tensor<8xi32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %3 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
    %4 = stablehlo.slice %arg1 [0:1] : (tensor<8xi32>) -> tensor<1xi32>
    %5 = stablehlo.reshape %4 : (tensor<1xi32>) -> tensor<i32>
    %6 = stablehlo.convert %5 : (tensor<i32>) -> tensor<f32>
    %7 = stablehlo.broadcast_in_dim %6, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
    %8 = stablehlo.multiply %3, %7 : tensor<2x3xf32>
    %c = stablehlo.constant dense<1> : tensor<i32>
    %9 = stablehlo.add %arg4, %c : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %10 = stablehlo.compare LT, %arg4, %c_0, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_1 = stablehlo.constant dense<5> : tensor<i32>
    %11 = stablehlo.add %arg4, %c_1 : tensor<i32>
    %12 = stablehlo.select %10, %11, %arg4 : tensor<i1>, tensor<i32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %13 = stablehlo.compare LT, %9, %c_2, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_3 = stablehlo.constant dense<6> : tensor<i32>
    %14 = stablehlo.add %9, %c_3 : tensor<i32>
    %15 = stablehlo.select %13, %14, %9 : tensor<i1>, tensor<i32>
    %16 = stablehlo.dynamic_update_slice %arg0, %8, %12, %15 : (tensor<5x6xf32>, tensor<2x3xf32>, tensor<i32>, tensor<i32>) -> tensor<5x6xf32>
    %c_4 = stablehlo.constant dense<0> : tensor<i32>
    %17 = stablehlo.broadcast_in_dim %c_4, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %18 = stablehlo.compare EQ, %arg2, %17, SIGNED : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi1>
    %c_5 = stablehlo.constant dense<1> : tensor<i32>
    %19 = call @_where(%18, %c_5, %arg2) : (tensor<8xi1>, tensor<i32>, tensor<8xi32>) -> tensor<8xi32>
    %c_6 = stablehlo.constant dense<2> : tensor<i32>
    %20 = stablehlo.broadcast_in_dim %c_6, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %21 = stablehlo.shift_left %arg1, %20 : tensor<8xi32>
    %c_7 = stablehlo.constant dense<1> : tensor<i32>
    %22 = stablehlo.broadcast_in_dim %c_7, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %23 = stablehlo.shift_right_arithmetic %arg2, %22 : tensor<8xi32>
    %24 = stablehlo.xor %21, %23 : tensor<8xi32>
    %25 = call @floor_divide(%arg1, %19) : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi32>
    %26 = call @remainder(%arg1, %19) : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi32>
    %c_8 = stablehlo.constant dense<-5> : tensor<i32>
    %c_9 = stablehlo.constant dense<5> : tensor<i32>
    %27 = call @clip(%arg1, %c_8, %c_9) : (tensor<8xi32>, tensor<i32>, tensor<i32>) -> tensor<8xi32>
    %28 = stablehlo.multiply %arg1, %arg2 : tensor<8xi32>
    %c_10 = stablehlo.constant dense<7> : tensor<i32>
    %29 = stablehlo.broadcast_in_dim %c_10, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %30 = stablehlo.subtract %28, %29 : tensor<8xi32>
    %31 = stablehlo.broadcast_in_dim %24, dims = [1] : (tensor<8xi32>) -> tensor<1x8xi32>
    %32 = stablehlo.broadcast_in_dim %25, dims = [1] : (tensor<8xi32>) -> tensor<1x8xi32>
    %33 = stablehlo.broadcast_in_dim %26, dims = [1] : (tensor<8xi32>) -> tensor<1x8xi32>
    %34 = stablehlo.broadcast_in_dim %27, dims = [1] : (tensor<8xi32>) -> tensor<1x8xi32>
    %35 = stablehlo.broadcast_in_dim %30, dims = [1] : (tensor<8xi32>) -> tensor<1x8xi32>
    %36 = stablehlo.concatenate %31, %32, %33, %34, %35, dim = 0 : (tensor<1x8xi32>, tensor<1x8xi32>, tensor<1x8xi32>, tensor<1x8xi32>, tensor<1x8xi32>) -> tensor<5x8xi32>
    %37 = stablehlo.popcnt %arg3 : tensor<8xui8>
    %38 = stablehlo.add %arg3, %arg3 : tensor<8xui8>
    %c_11 = stablehlo.constant dense<3> : tensor<ui8>
    %39 = stablehlo.broadcast_in_dim %c_11, dims = [] : (tensor<ui8>) -> tensor<8xui8>
    %40 = stablehlo.shift_right_logical %arg3, %39 : tensor<8xui8>
    %41 = stablehlo.not %arg3 : tensor<8xui8>
    %c_12 = stablehlo.constant dense<1> : tensor<ui8>
    %42 = stablehlo.broadcast_in_dim %c_12, dims = [] : (tensor<ui8>) -> tensor<8xui8>
    %43 = stablehlo.shift_right_logical %arg3, %42 : tensor<8xui8>
    %44 = stablehlo.broadcast_in_dim %37, dims = [1] : (tensor<8xui8>) -> tensor<1x8xui8>
    %45 = stablehlo.broadcast_in_dim %38, dims = [1] : (tensor<8xui8>) -> tensor<1x8xui8>
    %46 = stablehlo.broadcast_in_dim %40, dims = [1] : (tensor<8xui8>) -> tensor<1x8xui8>
    %47 = stablehlo.broadcast_in_dim %41, dims = [1] : (tensor<8xui8>) -> tensor<1x8xui8>
    %48 = stablehlo.broadcast_in_dim %43, dims = [1] : (tensor<8xui8>) -> tensor<1x8xui8>
    %49 = stablehlo.concatenate %44, %45, %46, %47, %48, dim = 0 : (tensor<1x8xui8>, tensor<1x8xui8>, tensor<1x8xui8>, tensor<1x8xui8>, tensor<1x8xui8>) -> tensor<5x8xui8>
    %50 = stablehlo.abs %arg1 : tensor<8xi32>
    %c_13 = stablehlo.constant dense<5> : tensor<i32>
    %51 = call @remainder_2(%50, %c_13) : (tensor<8xi32>, tensor<i32>) -> tensor<8xi32>
    %52 = call @_take(%arg0, %51) : (tensor<5x6xf32>, tensor<8xi32>) -> tensor<8x6xf32>
    %values, %indices = chlo.top_k(%arg0, k = 2) : tensor<5x6xf32> -> (tensor<5x2xf32>, tensor<5x2xi32>)
    return %0, %1, %2, %16, %36, %49, %52, %values, %indices : tensor<5xi32>, tensor<8xi32>, tensor<8xi32>, tensor<5x6xf32>, tensor<5x8xi32>, tensor<5x8xui8>, tensor<8x6xf32>, tensor<5x2xf32>, tensor<5x2xi32>
  }
  func.func private @argmax(%arg0: tensor<5x6xf32>) -> tensor<5xi32> {
    %0 = stablehlo.iota dim = 1 : tensor<5x6xi32>
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1:2 = stablehlo.reduce(%arg0 init: %cst), (%0 init: %c) across dimensions = [1] : (tensor<5x6xf32>, tensor<5x6xi32>, tensor<f32>, tensor<i32>) -> (tensor<5xf32>, tensor<5xi32>)
     reducer(%arg1: tensor<f32>, %arg3: tensor<f32>) (%arg2: tensor<i32>, %arg4: tensor<i32>)  {
      %2 = stablehlo.compare GT, %arg1, %arg3, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %3 = stablehlo.compare NE, %arg1, %arg1, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %4 = stablehlo.or %2, %3 : tensor<i1>
      %5 = stablehlo.compare EQ, %arg1, %arg3, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %6 = stablehlo.compare LT, %arg2, %arg4, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %7 = stablehlo.and %5, %6 : tensor<i1>
      %8 = stablehlo.or %4, %7 : tensor<i1>
      %9 = stablehlo.select %4, %arg1, %arg3 : tensor<i1>, tensor<f32>
      %10 = stablehlo.select %8, %arg2, %arg4 : tensor<i1>, tensor<i32>
      stablehlo.return %9, %10 : tensor<f32>, tensor<i32>
    }
    return %1#1 : tensor<5xi32>
  }
  func.func private @cumsum(%arg0: tensor<8xi32>) -> tensor<8xi32> {
    %0 = call @cumsum_0(%arg0) : (tensor<8xi32>) -> tensor<8xi32>
    return %0 : tensor<8xi32>
  }
  func.func private @cumsum_0(%arg0: tensor<8xi32>) -> tensor<8xi32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<i32>
    %1 = "stablehlo.reduce_window"(%arg0, %0) <{base_dilations = array<i64: 1>, padding = dense<[[7, 0]]> : tensor<1x2xi64>, window_dilations = array<i64: 1>, window_dimensions = array<i64: 8>, window_strides = array<i64: 1>}> ({
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<i32>):
      %2 = stablehlo.add %arg1, %arg2 : tensor<i32>
      stablehlo.return %2 : tensor<i32>
    }) : (tensor<8xi32>, tensor<i32>) -> tensor<8xi32>
    return %1 : tensor<8xi32>
  }
  func.func private @cummax(%arg0: tensor<8xi32>) -> tensor<8xi32> {
    %c = stablehlo.constant dense<-2147483648> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<i32>
    %1 = "stablehlo.reduce_window"(%arg0, %0) <{base_dilations = array<i64: 1>, padding = dense<[[7, 0]]> : tensor<1x2xi64>, window_dilations = array<i64: 1>, window_dimensions = array<i64: 8>, window_strides = array<i64: 1>}> ({
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<i32>):
      %2 = stablehlo.maximum %arg1, %arg2 : tensor<i32>
      stablehlo.return %2 : tensor<i32>
    }) : (tensor<8xi32>, tensor<i32>) -> tensor<8xi32>
    return %1 : tensor<8xi32>
  }
  func.func private @_where(%arg0: tensor<8xi1>, %arg1: tensor<i32>, %arg2: tensor<8xi32>) -> tensor<8xi32> {
    %0 = stablehlo.convert %arg1 : tensor<i32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %2 = stablehlo.select %arg0, %1, %arg2 : tensor<8xi1>, tensor<8xi32>
    return %2 : tensor<8xi32>
  }
  func.func private @floor_divide(%arg0: tensor<8xi32>, %arg1: tensor<8xi32>) -> tensor<8xi32> {
    %0 = stablehlo.divide %arg0, %arg1 : tensor<8xi32>
    %1 = stablehlo.sign %arg0 : tensor<8xi32>
    %2 = stablehlo.sign %arg1 : tensor<8xi32>
    %3 = stablehlo.compare NE, %1, %2, SIGNED : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi1>
    %4 = stablehlo.remainder %arg0, %arg1 : tensor<8xi32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %5 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %6 = stablehlo.compare NE, %4, %5, SIGNED : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi1>
    %7 = stablehlo.and %3, %6 : tensor<8xi1>
    %c_0 = stablehlo.constant dense<1> : tensor<i32>
    %8 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %9 = stablehlo.subtract %0, %8 : tensor<8xi32>
    %10 = call @_where_1(%7, %9, %0) : (tensor<8xi1>, tensor<8xi32>, tensor<8xi32>) -> tensor<8xi32>
    return %10 : tensor<8xi32>
  }
  func.func private @_where_1(%arg0: tensor<8xi1>, %arg1: tensor<8xi32>, %arg2: tensor<8xi32>) -> tensor<8xi32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<8xi1>, tensor<8xi32>
    return %0 : tensor<8xi32>
  }
  func.func private @remainder(%arg0: tensor<8xi32>, %arg1: tensor<8xi32>) -> tensor<8xi32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %1 = stablehlo.compare EQ, %arg1, %0, SIGNED : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi1>
    %c_0 = stablehlo.constant dense<1> : tensor<i32>
    %2 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %3 = call @_where_1(%1, %2, %arg1) : (tensor<8xi1>, tensor<8xi32>, tensor<8xi32>) -> tensor<8xi32>
    %4 = stablehlo.remainder %arg0, %3 : tensor<8xi32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %5 = stablehlo.broadcast_in_dim %c_1, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %6 = stablehlo.compare NE, %4, %5, SIGNED : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi1>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %7 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %8 = stablehlo.compare LT, %4, %7, SIGNED : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi1>
    %c_3 = stablehlo.constant dense<0> : tensor<i32>
    %9 = stablehlo.broadcast_in_dim %c_3, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %10 = stablehlo.compare LT, %3, %9, SIGNED : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi1>
    %11 = stablehlo.compare NE, %8, %10, UNSIGNED : (tensor<8xi1>, tensor<8xi1>) -> tensor<8xi1>
    %12 = stablehlo.and %11, %6 : tensor<8xi1>
    %13 = stablehlo.add %4, %3 : tensor<8xi32>
    %14 = stablehlo.select %12, %13, %4 : tensor<8xi1>, tensor<8xi32>
    return %14 : tensor<8xi32>
  }
  func.func private @clip(%arg0: tensor<8xi32>, %arg1: tensor<i32>, %arg2: tensor<i32>) -> tensor<8xi32> {
    %0 = stablehlo.convert %arg1 : tensor<i32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %2 = stablehlo.maximum %1, %arg0 : tensor<8xi32>
    %3 = stablehlo.convert %arg2 : tensor<i32>
    %4 = stablehlo.broadcast_in_dim %3, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %5 = stablehlo.minimum %4, %2 : tensor<8xi32>
    return %5 : tensor<8xi32>
  }
  func.func private @remainder_2(%arg0: tensor<8xi32>, %arg1: tensor<i32>) -> tensor<8xi32> {
    %0 = stablehlo.convert %arg1 : tensor<i32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.compare EQ, %0, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_0 = stablehlo.constant dense<1> : tensor<i32>
    %2 = call @_where_3(%1, %c_0, %0) : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
    %3 = stablehlo.broadcast_in_dim %2, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %4 = stablehlo.remainder %arg0, %3 : tensor<8xi32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %5 = stablehlo.broadcast_in_dim %c_1, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %6 = stablehlo.compare NE, %4, %5, SIGNED : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi1>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %7 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %8 = stablehlo.compare LT, %4, %7, SIGNED : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi1>
    %c_3 = stablehlo.constant dense<0> : tensor<i32>
    %9 = stablehlo.compare LT, %2, %c_3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %10 = stablehlo.broadcast_in_dim %9, dims = [] : (tensor<i1>) -> tensor<8xi1>
    %11 = stablehlo.compare NE, %8, %10, UNSIGNED : (tensor<8xi1>, tensor<8xi1>) -> tensor<8xi1>
    %12 = stablehlo.and %11, %6 : tensor<8xi1>
    %13 = stablehlo.broadcast_in_dim %2, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %14 = stablehlo.add %4, %13 : tensor<8xi32>
    %15 = stablehlo.select %12, %14, %4 : tensor<8xi1>, tensor<8xi32>
    return %15 : tensor<8xi32>
  }
  func.func private @_where_3(%arg0: tensor<i1>, %arg1: tensor<i32>, %arg2: tensor<i32>) -> tensor<i32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<i1>, tensor<i32>
    return %0 : tensor<i32>
  }
  func.func private @_take(%arg0: tensor<5x6xf32>, %arg1: tensor<8xi32>) -> tensor<8x6xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %1 = stablehlo.compare LT, %arg1, %0, SIGNED : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi1>
    %c_0 = stablehlo.constant dense<5> : tensor<i32>
    %2 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %3 = stablehlo.add %arg1, %2 : tensor<8xi32>
    %4 = call @_where_1(%1, %3, %arg1) : (tensor<8xi1>, tensor<8xi32>, tensor<8xi32>) -> tensor<8xi32>
    %5 = stablehlo.broadcast_in_dim %4, dims = [0] : (tensor<8xi32>) -> tensor<8x1xi32>
    %c_1 = stablehlo.constant dense<4> : tensor<1xi32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %6 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<i32>) -> tensor<8x1xi32>
    %7 = stablehlo.compare GE, %5, %6, SIGNED : (tensor<8x1xi32>, tensor<8x1xi32>) -> tensor<8x1xi1>
    %8 = stablehlo.broadcast_in_dim %c_1, dims = [1] : (tensor<1xi32>) -> tensor<1x1xi32>
    %9 = stablehlo.broadcast_in_dim %8, dims = [0, 1] : (tensor<1x1xi32>) -> tensor<8x1xi32>
    %10 = stablehlo.compare LE, %5, %9, SIGNED : (tensor<8x1xi32>, tensor<8x1xi32>) -> tensor<8x1xi1>
    %11 = stablehlo.and %7, %10 : tensor<8x1xi1>
    %c_3 = stablehlo.constant dense<true> : tensor<i1>
    %12 = stablehlo.reduce(%11 init: %c_3) applies stablehlo.and across dimensions = [1] : (tensor<8x1xi1>, tensor<i1>) -> tensor<8xi1>
    %13 = "stablehlo.gather"(%arg0, %5) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 6>}> : (tensor<5x6xf32>, tensor<8x1xi32>) -> tensor<8x6xf32>
    %14 = stablehlo.broadcast_in_dim %12, dims = [0] : (tensor<8xi1>) -> tensor<8x6xi1>
    %cst = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %15 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<8x6xf32>
    %16 = stablehlo.select %14, %13, %15 : tensor<8x6xi1>, tensor<8x6xf32>
    return %16 : tensor<8x6xf32>
  }
}
