"""Regression tests for the bugs tests/test_fuzz_shape_rules.py found, each with the exact input
that failed (an MLIR verifier error, an XLA compile error, or a valid input rejected), checked
against numpy where the op now works."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import raises, run
from xlasdk import ops
from xlasdk.errors import DTypeError, ShapeError


def param(b: xs.XlaBuilder, i: int, dtype: Any, dims: tuple[int, ...]) -> xs.XlaOp:
    return ops.Parameter(b, i, xs.Shape.array_shape(dtype, dims))


# -- degenerate broadcasting of a size-1 dimension against a size-0 one -------------------------
# Add(f32[0,0], f32[0,1]) predicted f32[0,1] (max of the sizes) and broadcast the empty operand to
# size 1: "size of operand dimension 1 (0) is not equal to 1 or size of result dimension 1 (1)".


def test_add_degenerate_broadcast_size_one_against_zero() -> None:
    b = xs.XlaBuilder("bcast0")
    x, y = param(b, 0, np.float32, (0, 0)), param(b, 1, np.float32, (0, 1))
    r = ops.Add(x, y)
    assert r.shape == xs.Shape.array_shape(np.float32, (0, 0))
    z, w = param(b, 2, np.float32, (1, 2)), param(b, 3, np.float32, (0,))
    s = ops.Mul(z, w, broadcast_dimensions=[0])  # explicit broadcast_dimensions: size 1 against 0
    assert s.shape.dimensions() == (0, 2)
    u = ops.Max(param(b, 4, np.float32, (1, 3)), param(b, 5, np.float32, (2, 1)))  # the usual case still works
    outs = run(b.build(ops.Tuple(b, [r, s, u])), np.zeros((0, 0), np.float32), np.zeros((0, 1), np.float32),
               np.ones((1, 2), np.float32), np.zeros((0,), np.float32), np.array([[1, 5, 2]], np.float32),
               np.array([[3], [4]], np.float32))
    assert outs[0].shape == (0, 0) and outs[1].shape == (0, 2)
    np.testing.assert_array_equal(outs[2], np.maximum([[1, 5, 2]], [[3], [4]]))


# -- Compare with a compare_type of the other signedness -----------------------------------------
# Compare(s32[], s32[], "EQ", "UNSIGNED") was accepted and failed in XLA's HLO verifier at compile
# time: "Expected comparison type SIGNED. actual: UNSIGNED".


def test_compare_type_signedness_must_match() -> None:
    b = xs.XlaBuilder("cmp")
    s, u = param(b, 0, np.int32, ()), param(b, 1, np.uint32, (2,))
    with raises(DTypeError, "Compare", "compare_type UNSIGNED", "s32"):
        ops.Compare(s, s, "EQ", "UNSIGNED")
    with raises(DTypeError, "Compare", "compare_type SIGNED", "u32"):
        ops.Compare(u, u, "LT", "SIGNED")
    ok = [ops.Compare(s, s, "EQ", "SIGNED"), ops.Compare(u, u, "LT", "UNSIGNED")]
    outs = run(b.build(ops.Tuple(b, ok)), np.int32(-3), np.array([1, 2**31 + 1], np.uint32))
    assert outs[0] == np.True_
    np.testing.assert_array_equal(outs[1], [False, False])


# -- convolution: empty kernel window; SAME padding of an empty, dilated input ---------------------


def test_conv_kernel_spatial_size_zero_is_rejected() -> None:
    # MLIR: "expects window to have positive value for 0-th window dimension, but got 0".
    b = xs.XlaBuilder("conv_k0")
    x, w = param(b, 0, np.float32, (1, 1, 3)), param(b, 1, np.float32, (1, 1, 0))
    with raises(ShapeError, "ConvGeneralDilated", "kernel spatial sizes [0]"):
        ops.ConvGeneralDilated(x, w, [1], [(0, 0)])


def test_conv_same_padding_of_empty_dilated_input() -> None:
    # Rejected before ("lhs_dims[1] must be >= 0, got -1"): the dilated size of an empty dimension
    # was computed as (0 - 1) * 2 + 1.
    b = xs.XlaBuilder("conv_same0")
    x, w = param(b, 0, np.float32, (0, 1, 0, 0)), param(b, 1, np.float32, (1, 1, 1, 1))
    r = ops.ConvGeneralDilated(x, w, [1, 1], "SAME", [1, 2], [1, 1], ("NCHW", "OIHW", "NCHW"))
    assert r.shape == xs.Shape.array_shape(np.float32, (0, 1, 0, 0))
    y = param(b, 2, np.float32, (1, 1, 0, 2))  # the same with a non-empty batch
    s = ops.ConvGeneralDilated(y, w, [1, 1], "SAME", [2, 2], [1, 1], ("NCHW", "OIHW", "NCHW"))
    assert s.shape.dimensions() == (1, 1, 0, 3)
    outs = run(b.build(ops.Tuple(b, [r, s])), np.zeros((0, 1, 0, 0), np.float32), np.ones((1, 1, 1, 1), np.float32),
               np.zeros((1, 1, 0, 2), np.float32))
    assert outs[0].shape == (0, 1, 0, 0) and outs[1].shape == (1, 1, 0, 3)


# -- 2-bit sorts and sub-byte TopK ---------------------------------------------------------------


def test_sort_of_two_bit_types_is_rejected() -> None:
    # Sort(bf16[2], s2[2]) failed to compile on XLA:CPU ("Inputs must have the same shape"), and
    # XLA:CPU sorts 2-bit arrays wrongly: Sort(s2[3]) of [1, -2, 0] gave [0, 0, 0].
    b = xs.XlaBuilder("sort2")
    x, y = param(b, 0, ml_dtypes.bfloat16, (2,)), param(b, 1, ml_dtypes.int2, (2,))
    with raises(DTypeError, "Sort", "operands[1]", "s2[2]", "2-bit"):
        ops.Sort(b, [x, y], 0, False)
    u = param(b, 2, ml_dtypes.uint2, (3,))
    with raises(DTypeError, "Sort", "operands[0]", "u2[3]", "ConvertElementType"):
        ops.Sort(b, u)
    # converted to 8 bits first, as the message says, the sort is right
    keys = ops.ConvertElementType(param(b, 3, ml_dtypes.int2, (3,)), np.int8)
    s = ops.Sort(b, [keys, ops.ConvertElementType(u, np.uint8)])
    outs = run(b.build(ops.Tuple(b, [ops.GetTupleElement(s, 0), ops.GetTupleElement(s, 1)])),
               np.zeros(2, ml_dtypes.bfloat16), np.zeros(2, ml_dtypes.int2), np.array([1, 2, 3], ml_dtypes.uint2),
               np.array([1, -2, 0], ml_dtypes.int2))
    np.testing.assert_array_equal(outs[0], [-2, 0, 1])
    np.testing.assert_array_equal(outs[1], [2, 3, 1])


def test_concat_of_two_bit_types_in_a_subprocess() -> None:
    # ConcatInDim(b, [s2[3,5], s2[3,5]], 1) aborted the process while compiling
    # ("Check failed: bit_offset != nullptr" in XLA:CPU's EmitFastConcatenate).
    code = textwrap.dedent(
        """
        import ml_dtypes, numpy as np, xlasdk as xs
        from xlasdk import ops
        for dt in (ml_dtypes.int2, ml_dtypes.uint2):
            for dim in (0, 1):
                b = xs.XlaBuilder("c")
                x = ops.Parameter(b, 0, xs.Shape.array_shape(dt, (3, 5)))
                y = ops.Parameter(b, 1, xs.Shape.array_shape(dt, (3, 2 + 3 * (1 - dim))))
                c = ops.ConcatInDim(b, [x, y, x], dim)
                xv = (np.arange(15).reshape(3, 5) % 4 - (2 if dt == ml_dtypes.int2 else 0)).astype(dt)
                yv = np.ones((3, 2 + 3 * (1 - dim)), dt)
                out = xs.compile(b.build(c))(xv, yv).to_numpy()
                assert out.dtype == np.dtype(dt) and c.dtype == np.dtype(dt)
                np.testing.assert_array_equal(out.astype(int), np.concatenate([xv, yv, xv], dim).astype(int))
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]


def _topk_ref(x: np.ndarray[Any, Any], k: int, largest: bool) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    v = x.astype(np.float64)
    idx = np.arange(v.shape[-1])
    order = np.array([np.lexsort((idx, -row if largest else row)) for row in v.reshape(-1, v.shape[-1])])
    order = order.reshape(v.shape)[..., :k]
    return np.take_along_axis(x, order, -1), order.astype(np.int32)


@pytest.mark.parametrize(
    "dtype, values",
    [
        (ml_dtypes.int2, [1, -2, 0, 1, -1]),
        (ml_dtypes.uint2, [3, 0, 2, 3, 1]),
        (ml_dtypes.int4, [7, -8, 0, 7, -1]),
        (ml_dtypes.uint4, [15, 0, 9, 15, 1]),
        (ml_dtypes.float4_e2m1fn, [6.0, -0.5, 1.5, 6.0, -4.0]),
    ],
)
def test_topk_sub_byte_types(dtype: Any, values: list[float]) -> None:
    # TopK(s4[3], 2) failed to compile: "does not support custom element sizes on non-sub-byte types";
    # TopK(s2[3], 2, largest=False) failed: "Inputs must have the same shape".
    b = xs.XlaBuilder("topk")
    x = param(b, 0, dtype, (2, 5))
    results = []
    for k, largest in ((2, True), (3, False), (5, True), (0, False)):
        t = ops.TopK(x, k, largest)
        assert t.shape == xs.Shape.tuple_shape(
            [xs.Shape.array_shape(dtype, (2, k)), xs.Shape.array_shape(np.int32, (2, k))]
        )
        results += [ops.GetTupleElement(t, 0), ops.GetTupleElement(t, 1)]
    data = np.array([values, values[::-1]], dtype)
    outs = run(b.build(ops.Tuple(b, results)), data)
    for j, (k, largest) in enumerate(((2, True), (3, False), (5, True), (0, False))):
        want_v, want_i = _topk_ref(data, k, largest)
        assert outs[2 * j].dtype == np.dtype(dtype)
        np.testing.assert_array_equal(outs[2 * j].astype(np.float64), want_v.astype(np.float64))
        np.testing.assert_array_equal(outs[2 * j + 1], want_i)


# -- Reduce and Map of floating-point operands of different precisions ---------------------------
# Reduce(f32[3], bf16[3]) failed in XLA's HLO verifier: "Seen floating point types of different
# precisions in %reduce.1 = (f32[], bf16[]) reduce(...), but mixed precision is disallowed".


def test_reduce_and_map_mixed_float_precisions_are_rejected() -> None:
    b = xs.XlaBuilder("mixed")
    x, y = param(b, 0, np.float32, (3,)), param(b, 1, ml_dtypes.bfloat16, (3,))
    ix, iy = param(b, 2, np.float32, ()), param(b, 3, ml_dtypes.bfloat16, ())

    def add2(a0: xs.XlaOp, a1: xs.XlaOp, x0: xs.XlaOp, x1: xs.XlaOp) -> tuple[xs.XlaOp, xs.XlaOp]:
        return ops.Add(a0, x0), ops.Add(a1, x1)

    with raises(DTypeError, "Reduce", "operands[1]", "bf16[3]", "f32[3]", "different precisions"):
        ops.Reduce(b, [x, y], [ix, iy], add2, [0])
    with raises(DTypeError, "Map", "operands[1]", "bf16[3]"):
        ops.Map(b, [x, y], lambda u, v: u, [0])
    # other mixes stay allowed: float with integer or complex operands
    n, c = param(b, 4, np.int32, (3,)), param(b, 5, np.complex64, (3,))
    i_n, i_c = param(b, 6, np.int32, ()), param(b, 7, np.complex64, ())
    r = ops.Reduce(b, [x, n, c], [ix, i_n, i_c], lambda *a: tuple(ops.Add(a[i], a[3 + i]) for i in range(3)), [0])
    m = ops.Map(b, [x, n], lambda u, v: ops.Add(u, ops.ConvertElementType(v, np.float32)), [0])
    outs = run(
        b.build(ops.Tuple(b, [ops.GetTupleElement(r, i) for i in range(3)] + [m])),
        np.array([1, 2, 3], np.float32), np.zeros(3, ml_dtypes.bfloat16), np.float32(0), ml_dtypes.bfloat16(0),
        np.array([4, 5, 6], np.int32), np.array([1j, 2, 3], np.complex64), np.int32(0), np.complex64(0),
    )
    assert outs[0] == 6 and outs[1] == 15 and outs[2] == 5 + 1j
    np.testing.assert_array_equal(outs[3], [5, 7, 9])


def test_reduce_two_bit_beside_other_widths_is_rejected() -> None:
    # Reduce(u2[1,2,4], u64[1,2,4], dimensions [0, 1, 2]) failed to compile on XLA:CPU: "RET_CHECK
    # failure (reduce_decomposer.cc:95) reduce->inputs()[i]->shape().layout() == ...".
    b = xs.XlaBuilder("r2")
    x, y = param(b, 0, ml_dtypes.uint2, (1, 2, 4)), param(b, 1, np.uint64, (1, 2, 4))
    ix, iy = param(b, 2, ml_dtypes.uint2, ()), param(b, 3, np.uint64, ())

    def add2(a0: xs.XlaOp, a1: xs.XlaOp, x0: xs.XlaOp, x1: xs.XlaOp) -> tuple[xs.XlaOp, xs.XlaOp]:
        return ops.Add(a0, x0), ops.Add(a1, x1)

    with raises(DTypeError, "Reduce", "operands[0]", "u2[1,2,4]", "2-bit"):
        ops.Reduce(b, [x, y], [ix, iy], add2, [0, 1, 2])
    # 2-bit operands together still reduce (sums wrap around modulo 4)
    z, iz = param(b, 4, ml_dtypes.int2, (1, 2, 4)), param(b, 5, ml_dtypes.int2, ())
    r = ops.Reduce(b, [x, z], [ix, iz], add2, [0, 1, 2])
    xv = np.array([[[1, 2, 3, 0], [1, 1, 1, 1]]], ml_dtypes.uint2)
    zv = np.array([[[1, -2, 1, 0], [-1, 1, 1, 1]]], ml_dtypes.int2)
    outs = run(b.build(ops.Tuple(b, [ops.GetTupleElement(r, 0), ops.GetTupleElement(r, 1)])), xv,
               np.zeros((1, 2, 4), np.uint64), ml_dtypes.uint2(0), np.uint64(0), zv, ml_dtypes.int2(0))
    assert int(outs[0]) == 10 % 4 and int(outs[1]) == (2 + 2) % 4 - 2


# -- DotGeneral / ConvGeneralDilated of f4e2m1fn and 2-bit integers ------------------------------


def test_f4_contractions_with_preferred_type() -> None:
    # ConvGeneralDilated(f4e2m1fn[1,1], f4e2m1fn[1,1], [], [], dimension_numbers=("NC", "OI", "NC"),
    # preferred_element_type=f32) failed to compile: "custom element sizes on non-sub-byte types".
    f4 = ml_dtypes.float4_e2m1fn
    b = xs.XlaBuilder("f4")
    x, w = param(b, 0, f4, (1, 1)), param(b, 1, f4, (1, 1))
    c = ops.ConvGeneralDilated(x, w, [], [], [], [], ("NC", "OI", "NC"), preferred_element_type=np.float32)
    p, q = param(b, 2, f4, (2, 3)), param(b, 3, f4, (3, 2))
    d = ops.DotGeneral(p, q, (([1], [0]), ([], [])), preferred_element_type=ml_dtypes.bfloat16)
    assert c.shape == xs.Shape.array_shape(np.float32, (1, 1)) and d.dtype == np.dtype(ml_dtypes.bfloat16)
    pv = np.array([[1, 2, 3], [0.5, -1, 6]], f4)
    qv = np.array([[1, -2], [0.5, 1], [3, 0]], f4)
    outs = run(b.build(ops.Tuple(b, [c, d])), np.array([[3]], f4), np.array([[-1.5]], f4), pv, qv)
    assert outs[0][0, 0] == -4.5
    np.testing.assert_array_equal(outs[1].astype(np.float32), pv.astype(np.float32) @ qv.astype(np.float32))


def test_two_bit_contractions() -> None:
    # DotGeneral(s2[2,3], s2[3,2]) failed to compile: "UNIMPLEMENTED: unsupported operand type S2 in
    # op dot" (the same for convolution); the 2-bit result wraps around like any integer result.
    s2 = ml_dtypes.int2
    b = xs.XlaBuilder("s2")
    p, q = param(b, 0, s2, (2, 3)), param(b, 1, s2, (3, 2))
    d = ops.DotGeneral(p, q, (([1], [0]), ([], [])))
    x, w = param(b, 2, ml_dtypes.uint2, (1, 2, 3)), param(b, 3, ml_dtypes.uint2, (2, 2, 2))
    c = ops.ConvGeneralDilated(x, w, [1], [(0, 0)])
    assert d.shape == xs.Shape.array_shape(s2, (2, 2)) and c.shape == xs.Shape.array_shape(ml_dtypes.uint2, (1, 2, 2))
    pv = np.array([[1, -2, 1], [-1, 0, 1]], s2)
    qv = np.array([[1, 1], [-1, 0], [1, -2]], s2)
    xv = np.array([[[1, 2, 3], [0, 1, 2]]], ml_dtypes.uint2)
    wv = np.array([[[1, 1], [2, 0]], [[3, 1], [0, 1]]], ml_dtypes.uint2)
    outs = run(b.build(ops.Tuple(b, [d, c])), pv, qv, xv, wv)
    exact = pv.astype(np.int64) @ qv.astype(np.int64)
    np.testing.assert_array_equal(outs[0].astype(np.int64), (exact + 2) % 4 - 2)
    xi, wi = xv.astype(np.int64), wv.astype(np.int64)
    conv = np.array([[[sum(xi[0, ci, t + k] * wi[o, ci, k] for ci in range(2) for k in range(2)) for t in range(2)]
                      for o in range(2)]])
    np.testing.assert_array_equal(outs[1].astype(np.int64), conv % 4)
