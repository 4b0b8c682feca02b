"""Tests of xlasdk/ops/sort.py: Sort (variadic, comparators, total order) and TopK."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import PerTestRng, device_defines_otherwise, param, raises, run
from xlasdk import ops
from xlasdk.errors import DTypeError, ShapeError

S = xs.Shape
RNG = PerTestRng(1234)  # per test: values that do not depend on the order of the suite


def bits(a: np.ndarray[Any, Any]) -> list[int]:
    return [int(v) for v in a.view(np.uint32)]


# -- Sort ------------------------------------------------------------------------------------------

def test_sort_default_order_across_dtypes() -> None:
    """Ascending, one operand, each dtype in one computation (constants carry the narrow types)."""
    arrays: list[np.ndarray[Any, Any]] = [
        RNG.standard_normal(17).astype(np.float32),
        RNG.standard_normal(9),
        RNG.standard_normal(11).astype(np.float16),
        RNG.integers(-128, 127, 20).astype(np.int8),
        RNG.integers(-(2**31), 2**31 - 1, 20).astype(np.int32),
        RNG.integers(-(2**62), 2**62, 20).astype(np.int64),
        np.array([2**31 + 5, 3, 0, 2**32 - 1, 7], np.uint32),  # wrong if compared as signed
        RNG.integers(0, 255, 15).astype(np.uint8),
        np.array([True, False, True, False]),
        np.array([3 + 1j, 1 - 1j, -1 + 5j, 1 + 0j, 1 - 2j], np.complex64),  # by real, then imaginary
    ]
    b = xs.XlaBuilder("sorts")
    bf = np.array([3, -1, 0.5, 2, -7], ml_dtypes.bfloat16)
    outs = [ops.Sort(b, ops.Constant(b, a)) for a in arrays]
    outs.append(ops.ConvertElementType(ops.Sort(b, ops.Constant(b, bf)), np.float32))
    got = run(b.build(outs))
    for g, a in zip(got, arrays, strict=False):
        if a.dtype == np.float64 and device_defines_otherwise("tpu-f64-emulated"):
            continue  # the capability table's row: XLA:TPU's f64 is not binary64
        assert g.dtype == a.dtype
        np.testing.assert_array_equal(g, np.sort(a))
    np.testing.assert_array_equal(got[-1], np.sort(bf.astype(np.float32)))


def test_sort_total_order_nan_and_signed_zero() -> None:
    """[NaN, 1, -0.0, 0.0, -inf, -NaN] ascending -> [-NaN, -inf, -0.0, 0.0, 1, NaN] (bit for bit)."""
    nan = np.float32(np.nan)
    x = np.array([nan, 1, -0.0, 0.0, -np.inf, -nan], np.float32)
    b = xs.XlaBuilder("total")
    p = ops.Parameter(b, 0, S.array_shape(np.float32, (6,)))
    stable = ops.Sort(b, p, is_stable=True)
    descending = ops.Sort(b, [p], comparator=lambda u, v: ops.Compare(u, v, "GT", "TOTALORDER"))
    up, down = run(b.build([stable, descending]), x)
    expected = [0xFFC00000, 0xFF800000, 0x80000000, 0x00000000, 0x3F800000, 0x7FC00000]
    assert bits(up) == expected
    assert bits(down) == expected[::-1]


def test_sort_with_payloads_stable_matches_argsort() -> None:
    keys = RNG.integers(0, 5, 40).astype(np.int32)  # many ties: stability matters
    payload = np.arange(40, dtype=np.float32) * 1.5
    other = RNG.integers(-9, 9, 40).astype(np.int64)
    b = xs.XlaBuilder("payload")
    pk = ops.Parameter(b, 0, S.array_shape(np.int32, (40,)))
    pp = ops.Parameter(b, 1, S.array_shape(np.float32, (40,)))
    po = ops.Parameter(b, 2, S.array_shape(np.int64, (40,)))
    s = ops.Sort(b, [pk, pp, po], is_stable=True)
    got = run(b.build([ops.GetTupleElement(s, i) for i in range(3)]), keys, payload, other)
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(got[0], keys[order])
    np.testing.assert_array_equal(got[1], payload[order])
    np.testing.assert_array_equal(got[2], other[order])


def test_sort_custom_comparators() -> None:
    """Descending (stable), by the second operand, and lexicographic on two keys."""
    k1 = RNG.integers(0, 4, 30).astype(np.int32)
    k2 = RNG.standard_normal(30).astype(np.float32)
    idx = np.arange(30, dtype=np.int32)
    b = xs.XlaBuilder("comparators")
    p1 = ops.Parameter(b, 0, S.array_shape(np.int32, (30,)))
    p2 = ops.Parameter(b, 1, S.array_shape(np.float32, (30,)))
    pi = ops.Parameter(b, 2, S.array_shape(np.int32, (30,)))

    def descending(a: xs.XlaOp, b_: xs.XlaOp, *payload: xs.XlaOp) -> xs.XlaOp:
        return ops.Gt(a, b_)

    def by_second(l0: xs.XlaOp, r0: xs.XlaOp, l1: xs.XlaOp, r1: xs.XlaOp, l2: xs.XlaOp, r2: xs.XlaOp) -> xs.XlaOp:
        return ops.Lt(l1, r1)

    def lexicographic(l0: xs.XlaOp, r0: xs.XlaOp, l1: xs.XlaOp, r1: xs.XlaOp, l2: xs.XlaOp, r2: xs.XlaOp) -> xs.XlaOp:
        return ops.Or(ops.Lt(l0, r0), ops.And(ops.Eq(l0, r0), ops.Lt(l1, r1)))

    d = ops.Sort(b, [p1, pi], is_stable=True, comparator=descending)
    s2 = ops.Sort(b, [p1, p2, pi], comparator=by_second)
    lx = ops.Sort(b, [p1, p2, pi], dimension=0, comparator=lexicographic)
    outs = [ops.GetTupleElement(d, 1), ops.GetTupleElement(s2, 2), ops.GetTupleElement(lx, 2)]
    got = run(b.build(outs), k1, k2, idx)
    np.testing.assert_array_equal(got[0], np.argsort(-k1, kind="stable"))
    np.testing.assert_array_equal(got[1], np.argsort(k2))  # k2 values are distinct
    np.testing.assert_array_equal(got[2], np.lexsort((k2, k1)))


def test_sort_along_non_last_dimensions() -> None:
    x2 = RNG.standard_normal((4, 6)).astype(np.float32)
    x3 = RNG.integers(-50, 50, (3, 5, 2)).astype(np.int32)
    b = xs.XlaBuilder("dims")
    p2 = ops.Parameter(b, 0, S.array_shape(np.float32, (4, 6)))
    p3 = ops.Parameter(b, 1, S.array_shape(np.int32, (3, 5, 2)))
    outs = [ops.Sort(b, p2, 0), ops.Sort(b, p2, dimension=-2), ops.Sort(b, p2, 1), ops.Sort(b, p3, 1),
            ops.Sort(b, p3, 0), ops.Sort(b, p3)]
    got = run(b.build(outs), x2, x3)
    expected = [np.sort(x2, 0), np.sort(x2, 0), np.sort(x2, 1), np.sort(x3, 1), np.sort(x3, 0), np.sort(x3, 2)]
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_array_equal(g, e)


def test_sort_xla_computation_comparator_and_former_argument_order() -> None:
    cb = xs.XlaBuilder("gt")
    ops.Gt(ops.Parameter(cb, 0, S.scalar_shape(np.float32)), ops.Parameter(cb, 1, S.scalar_shape(np.float32)))
    gt = cb.build()
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    b = xs.XlaBuilder("former")
    p = ops.Parameter(b, 0, S.array_shape(np.float32, (3, 4)))
    outs = [
        ops.Sort(b, [p], gt),  # xla_client: Sort(builder, operands, comparator, dimension, is_stable)
        ops.Sort(b, [p], gt, 0, True),
        ops.Sort(b, p, comparator=gt, dimension=0),
    ]
    comp = b.build(outs)
    assert "stablehlo.sort" in comp.as_stablehlo_text()
    got = run(comp, x)
    np.testing.assert_array_equal(got[0], -np.sort(-x, 1))
    np.testing.assert_array_equal(got[1], -np.sort(-x, 0))
    np.testing.assert_array_equal(got[2], -np.sort(-x, 0))


# -- TopK ------------------------------------------------------------------------------------------

def test_topk_matches_numpy() -> None:
    x = RNG.standard_normal((5, 12)).astype(np.float32)
    xi = RNG.permutation(50).astype(np.int32)[:20]
    b = xs.XlaBuilder("topk")
    p = ops.Parameter(b, 0, S.array_shape(np.float32, (5, 12)))
    pi = ops.Parameter(b, 1, S.array_shape(np.int32, (20,)))
    outs = []
    for t in (ops.TopK(p, 4), ops.TopK(pi, 7), ops.TopK(p, 3, largest=False), ops.TopK(pi, 20, largest=False)):
        outs += [ops.GetTupleElement(t, 0), ops.GetTupleElement(t, 1)]
    got = run(b.build(outs), x, xi)
    top = np.argsort(-x, axis=1)[:, :4]
    np.testing.assert_array_equal(got[0], np.take_along_axis(x, top, 1))
    np.testing.assert_array_equal(got[1], top)
    assert got[1].dtype == np.int32 and got[0].shape == (5, 4)
    np.testing.assert_array_equal(got[3], np.argsort(-xi)[:7])
    np.testing.assert_array_equal(got[2], xi[np.argsort(-xi)[:7]])
    low = np.argsort(x, axis=1)[:, :3]
    np.testing.assert_array_equal(got[4], np.take_along_axis(x, low, 1))
    np.testing.assert_array_equal(got[5], low)
    np.testing.assert_array_equal(got[6], np.sort(xi))
    np.testing.assert_array_equal(got[7], np.argsort(xi))


def test_topk_ties_nan_and_k_zero() -> None:
    nan = np.float32(np.nan)
    x = np.array([1, nan, 3, 1, -np.inf, -nan, 3, 0], np.float32)
    b = xs.XlaBuilder("ties")
    p = ops.Parameter(b, 0, S.array_shape(np.float32, (8,)))
    big, small, none = ops.TopK(p, 8), ops.TopK(p, 8, largest=False), ops.TopK(p, 0)
    outs = [ops.GetTupleElement(t, i) for t in (big, small, none) for i in (0, 1)]
    got = run(b.build(outs), x)
    assert got[1].tolist() == [1, 2, 6, 0, 3, 7, 4, 5]  # NaN first, ties by lower index, -NaN last
    assert bits(got[0]) == bits(x[got[1]])
    assert got[3].tolist() == [5, 4, 7, 0, 3, 2, 6, 1]
    assert got[4].shape == (0,) and got[5].shape == (0,) and got[5].dtype == np.int32


# -- errors ----------------------------------------------------------------------------------------

def test_sort_errors() -> None:
    b = xs.XlaBuilder("e")
    x = ops.Constant(b, np.zeros((2, 3), np.float32))
    y = ops.Constant(b, np.zeros((3, 2), np.int32))
    with raises(ShapeError, "Sort: operand 'operands[1]' has shape s32[3,2], expected dimensions [2, 3]"):
        ops.Sort(b, [x, y])
    with raises(ShapeError, "Sort: dimension 2 out of range for rank 2 operands f32[2,3]"):
        ops.Sort(b, x, dimension=2)
    with raises(DTypeError, "Sort: dimension must be an int, got 1.0"):
        ops.Sort(b, x, dimension=1.0)
    with raises(ShapeError, "Sort: operand 'operands[0]' is the scalar f32[]"):
        ops.Sort(b, ops.Constant(b, np.float32(1)))
    with raises(ShapeError, "Sort: operands must be an XlaOp or a non-empty list of XlaOps"):
        ops.Sort(b, [], dimension=0)
    with raises(ShapeError, "Sort: comparator returns (f32[]) but must return one pred[]"):
        ops.Sort(b, [x], comparator=lambda u, v: ops.Sub(u, v))
    with raises(ShapeError, "Sort: comparator", "takes 2 arguments but 4 are passed (f32[], f32[], f32[], f32[])"):
        ops.Sort(b, [x, x], comparator=lambda u, v: ops.Lt(u, v))
    with raises(DTypeError, "Sort: is_stable must be a bool, got 'yes'"):
        ops.Sort(b, x, is_stable="yes")
    with raises(DTypeError, "Sort: operand 'operands[1]' must be an XlaOp, got float"):
        ops.Sort(b, [x, 1.0])  # type: ignore[list-item]


def test_topk_errors() -> None:
    b = xs.XlaBuilder("e")
    x = ops.Constant(b, np.zeros((2, 3), np.float32))
    with raises(ShapeError, "TopK: k = 4 out of range [0, 3] for operand f32[2,3]"):
        ops.TopK(x, 4)
    with raises(ShapeError, "TopK: k = -1 out of range"):
        ops.TopK(x, -1)
    with raises(DTypeError, "TopK: k must be an int, got 2.0"):
        ops.TopK(x, 2.0)  # type: ignore[arg-type]
    with raises(DTypeError, "TopK: operand 'operand' is c64[3]; TopK needs an integer or floating-point type"):
        ops.TopK(ops.Constant(b, np.zeros(3, np.complex64)), 1)
    with raises(ShapeError, "TopK: operand 'operand' is the scalar f32[]"):
        ops.TopK(ops.Constant(b, np.float32(0)), 0)


# -- pure shape rules (no builder) ----------------------------------------------------------------

def test_sort_and_top_k_shape_rules() -> None:
    from xlasdk.ops.sort import approx_top_k_shape, sort_shape, top_k_shape

    f32, s32 = xs.Shape.array_shape(np.float32, (3, 5)), xs.Shape.array_shape(np.int32, (3, 5))
    assert sort_shape("Sort", [f32], -1) == f32
    assert sort_shape("Sort", [f32, s32], 0) == xs.Shape.tuple_shape([f32, s32])
    with raises(ShapeError, "Sort: dimension 2 out of range for rank 2 operands f32[3,5]"):
        sort_shape("Sort", [f32], 2)
    with raises(ShapeError, "Sort: operand 'operands[0]' is the scalar f32[]; sorting needs rank >= 1"):
        sort_shape("Sort", [xs.Shape.array_shape(np.float32, ())], 0)
    with raises(ShapeError, "Sort: operand 'operands[1]' has shape s32[5], expected dimensions [3, 5]"):
        sort_shape("Sort", [f32, xs.Shape.array_shape(np.int32, (5,))], 0)
    two = xs.Shape.array_shape(np.dtype(ml_dtypes.int2), (3, 5))
    with raises(DTypeError, "Sort: operand 'operands[0]' is s2[3,5]: XLA:CPU cannot sort 2-bit types"):
        sort_shape("Sort", [two], 0)
    want = xs.Shape.tuple_shape([xs.Shape.array_shape(np.float32, (3, 2)), xs.Shape.array_shape(np.int32, (3, 2))])
    assert top_k_shape("TopK", f32, 2) == want
    with raises(ShapeError, "TopK: k = 6 out of range [0, 5] for operand f32[3,5]"):
        top_k_shape("TopK", f32, 6)
    with raises(DTypeError, "TopK: operand 'operand' is c64[3,5]; TopK needs an integer or floating-point type"):
        top_k_shape("TopK", xs.Shape.array_shape(np.complex64, (3, 5)), 1)
    scalars = [xs.Shape.array_shape(np.float32, ()), xs.Shape.array_shape(np.int32, ())]
    got = approx_top_k_shape("ApproxTopK", [f32, s32], scalars, 2, -1, 0.9, True, -1)
    assert got == want
    with raises(ShapeError, "ApproxTopK: top_k must be in [0, 3], got 4"):
        approx_top_k_shape("ApproxTopK", [f32], scalars[:1], 4, 0, 0.9, True, -1)
    with raises(DTypeError, "ApproxTopK: operand 'init_values[0]' has element type s32[], expected"):
        approx_top_k_shape("ApproxTopK", [f32], scalars[1:], 1, 0, 0.9, True, -1)


def test_sort_rejects_two_bit_types() -> None:
    """Found by the shape-rule fuzzer: Sort of 2-bit operands is rejected (XLA:CPU failed to compile or sorted them
    wrongly); converted to 8 bits first, as the message says, they sort right."""
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
def test_topk_of_sub_byte_types(dtype: Any, values: list[float]) -> None:
    """Found by the shape-rule fuzzer: TopK of 2-bit, 4-bit and f4e2m1fn operands compiles and matches a numpy
    reference."""
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
