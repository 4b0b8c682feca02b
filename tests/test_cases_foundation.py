"""Bug-report cases of /work/shared/cases/cases.md for the foundation ops (C-01..C-05, C-10..C-12).

Each case runs with the data as parameters and as constants: constants take XLA's constant
folding path (HloEvaluator), parameters the compiled code, and both must give the case's values.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import run
from xlasdk import ops

NAN, INF = np.nan, np.inf
I32_MIN, I32_MAX = -(2**31), 2**31 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def inputs(b: xs.XlaBuilder, arrays: list[np.ndarray[Any, Any]], const: bool) -> list[xs.XlaOp]:
    if const:
        return [ops.Constant(b, a) for a in arrays]
    return [ops.Parameter(b, i, xs.shape_from_pyval(a)) for i, a in enumerate(arrays)]


def go(b: xs.XlaBuilder, outs: list[xs.XlaOp], arrays: list[np.ndarray[Any, Any]],
       const: bool) -> list[np.ndarray[Any, Any]]:
    return run(b.build(outs), *([] if const else arrays))


def same_bits(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any]) -> None:
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.tobytes() == want.tobytes(), (got, want)


FORMS = pytest.mark.parametrize("const", [False, True], ids=["param", "const"])


# ---------------------------------------------------------------------------------- C-01


@FORMS
def test_C01_nan_through_max_min_reduce(const: bool) -> None:
    cases: list[tuple[np.ndarray[Any, Any], str]] = [
        (np.array([NAN, 1.0], np.float32), "max"),
        (np.array([1.0, NAN], np.float32), "max"),
        (np.array([NAN, 1.0], np.float64), "max"),
        (np.array([NAN, 1.0], np.float32), "min"),
        (np.array([7, NAN, -2.5, 11, 0.25], np.float32), "max"),
    ]
    b = xs.XlaBuilder("c01")
    xs_ = inputs(b, [c[0] for c in cases], const)
    outs = []
    for x, (a, kind) in zip(xs_, cases, strict=True):
        init = ops.Constant(b, a.dtype.type(-INF if kind == "max" else INF))
        f = ops.Max if kind == "max" else ops.Min
        outs.append(ops.Reduce(b, x, init, lambda p, q, f=f: f(p, q), [0]))
    res = go(b, outs, [c[0] for c in cases], const)
    for r, (a, _) in zip(res, cases, strict=True):
        assert r.shape == () and r.dtype == a.dtype
        assert np.isnan(r), (a, r)


# ---------------------------------------------------------------------------------- C-02


@FORMS
def test_C02_min_max_nan_and_signed_zero(const: bool) -> None:
    a = np.array([3, NAN, NAN, 1, -0.0, +0.0], np.float32)
    c = np.array([NAN, 3, NAN, 2, +0.0, -0.0], np.float32)
    b = xs.XlaBuilder("c02")
    A, C = inputs(b, [a, c], const)
    mn, mx = go(b, [ops.Min(A, C), ops.Max(A, C)], [a, c], const)
    np.testing.assert_array_equal(mn, [NAN, NAN, NAN, 1, -0.0, -0.0])
    np.testing.assert_array_equal(mx, [NAN, NAN, NAN, 2, 0.0, 0.0])
    np.testing.assert_array_equal(np.signbit(mn[4:]), [True, True])
    np.testing.assert_array_equal(np.signbit(mx[4:]), [False, False])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_C02_constant_min_max_with_nan(dtype: Any) -> None:
    b = xs.XlaBuilder("c02c")
    three = ops.Constant(b, dtype(3))
    nan = ops.Div(ops.Constant(b, dtype(0)), ops.Constant(b, dtype(0)))
    res = run(b.build([ops.Min(three, nan), ops.Max(three, nan), ops.Min(nan, three), ops.Max(nan, three)]))
    for r in res:
        assert r.dtype == dtype and np.isnan(r)


@FORMS
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_C02_clamp_swapped_bounds(const: bool, dtype: Any) -> None:
    x = np.array([0, 3, 7, 10], dtype)
    b = xs.XlaBuilder("c02clamp")
    (X,) = inputs(b, [x], const)
    lo, hi = ops.Constant(b, dtype(5)), ops.Constant(b, dtype(2))
    (r,) = go(b, [ops.Clamp(lo, X, hi)], [x], const)
    assert r.dtype == dtype
    np.testing.assert_array_equal(r, [2, 2, 2, 2])


@FORMS
def test_C02_clamp_nan(const: bool) -> None:
    x = np.array([NAN, -1, 2], np.float32)
    b = xs.XlaBuilder("c02nan")
    (X,) = inputs(b, [x], const)
    (r,) = go(b, [ops.Clamp(0.0, X, 1.0)], [x], const)
    np.testing.assert_array_equal(r, [NAN, 0, 1])


# ---------------------------------------------------------------------------------- C-03


DIV_CASES = [
    (np.int32, [7, -7, 0, I32_MIN, I32_MIN, 7, -7], [0, 0, 0, -1, 0, -2, 2],
     [-1, -1, -1, I32_MIN, -1, -3, -3], [7, -7, 0, 0, I32_MIN, 1, -1]),
    (np.uint32, [7, 0, 0xFFFFFFFF], [0, 0, 0], [0xFFFFFFFF] * 3, [7, 0, 0xFFFFFFFF]),
    (np.int8, [5, -128, -128], [0, -1, 0], [-1, -128, -1], [5, 0, -128]),
    (np.int64, [9, I64_MIN], [0, -1], [-1, I64_MIN], [9, 0]),
]


@FORMS
@pytest.mark.parametrize(("dtype", "a", "d", "q", "r"), DIV_CASES, ids=["s32", "u32", "s8", "s64"])
def test_C03_integer_div_rem_by_zero_and_overflow(const: bool, dtype: Any, a: list[int], d: list[int], q: list[int],
                                                   r: list[int]) -> None:
    x, y = np.array(a, dtype), np.array(d, dtype)
    b = xs.XlaBuilder("c03")
    X, Y = inputs(b, [x, y], const)
    got_q, got_r = go(b, [ops.Div(X, Y), ops.Rem(X, Y)], [x, y], const)
    np.testing.assert_array_equal(got_q, np.array(q, dtype))
    np.testing.assert_array_equal(got_r, np.array(r, dtype))
    assert got_q.dtype == dtype and got_r.dtype == dtype


@FORMS
def test_C03_float_rem_sign_of_dividend(const: bool) -> None:
    x = np.array([-10, 10, -1, 5.5, -0.0], np.float32)
    y = np.array([3, -3, 1, 0, 2], np.float32)
    b = xs.XlaBuilder("c03f")
    X, Y = inputs(b, [x, y], const)
    (r,) = go(b, [ops.Rem(X, Y)], [x, y], const)
    np.testing.assert_array_equal(r, [-1, 1, -0.0, NAN, -0.0])
    np.testing.assert_array_equal(np.signbit(r[[0, 1, 2, 4]]), [True, False, True, True])  # NaN's sign is unspecified


def test_C03_constant_div_by_zero_does_not_kill_the_process() -> None:
    # constant folding of s32 7 / 0 raised SIGFPE inside XLA; the guarded lowering gives -1
    code = (
        "import numpy as np, xlasdk as xs, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from helpers import run\n"
        "from xlasdk import ops\n"
        "b = xs.XlaBuilder('c03')\n"
        "q = ops.Div(ops.Constant(b, np.int32(7)), ops.Constant(b, np.int32(0)))\n"
        "r = ops.Rem(ops.Constant(b, np.int32(7)), ops.Constant(b, np.int32(0)))\n"
        "m = ops.Div(ops.Constant(b, np.int32(-2**31)), ops.Constant(b, np.int32(-1)))\n"
        "print(*[int(v) for v in run(b.build([q, r, m, ops.Constant(b, 7) / 0, 7 % ops.Constant(b, 0)]))])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["-1", "7", str(I32_MIN), "-1", "7"]


# ---------------------------------------------------------------------------------- C-04

C04_X = np.array([NAN, INF, -INF, 3e9, -3e9, 2.9, -2.9, 2147483520.0, 2147483648.0, -2147483648.0, -0.5], np.float32)
C04 = {
    np.int32: [0, 2147483647, -2147483648, 2147483647, -2147483648, 2, -2, 2147483520, 2147483647, -2147483648, 0],
    np.uint32: [0, 4294967295, 0, 3000000000, 0, 2, 0, 2147483520, 2147483648, 0, 0],
    np.int8: [0, 127, -128, 127, -128, 2, -2, 127, 127, -128, 0],
    np.uint8: [0, 255, 0, 255, 0, 2, 0, 255, 255, 0, 0],
    np.int64: [0, I64_MAX, I64_MIN, 3000000000, -3000000000, 2, -2, 2147483520, 2147483648, -2147483648, 0],
}


@FORMS
def test_C04_float_to_int_nan_inf_out_of_range(const: bool) -> None:
    b = xs.XlaBuilder("c04")
    (X,) = inputs(b, [C04_X], const)
    res = go(b, [ops.ConvertElementType(X, t) for t in C04], [C04_X], const)
    for got, (t, want) in zip(res, C04.items(), strict=True):
        assert got.dtype == t
        np.testing.assert_array_equal(got, np.array(want, t), err_msg=str(t))


@FORMS
def test_C04_pred_wrap_and_int_to_float(const: bool) -> None:
    f = np.array([0.0, -0.0, NAN, 0.1], np.float32)
    i = np.array([0, 2, -1], np.int32)
    w = np.array([256, 300, -1, 255], np.int32)
    g = np.array([16777217, 2147483647], np.int32)
    b = xs.XlaBuilder("c04b")
    F, I, W, G = inputs(b, [f, i, w, g], const)
    outs = [ops.ConvertElementType(F, np.bool_), ops.ConvertElementType(I, np.bool_),
            ops.ConvertElementType(W, np.uint8),
            ops.ConvertElementType(G, np.float32)]
    r = go(b, outs, [f, i, w, g], const)
    np.testing.assert_array_equal(r[0], [False, False, True, True])
    np.testing.assert_array_equal(r[1], [False, True, True])
    np.testing.assert_array_equal(r[2], np.array([0, 44, 255, 255], np.uint8))
    np.testing.assert_array_equal(r[3], np.array([16777216.0, 2147483648.0], np.float32))


# ---------------------------------------------------------------------------------- C-05


SHIFT_CASES = [
    ("u8", np.uint8, [128], [2], None, [224], [32]),
    ("s32", np.int32, [1, -8, 8, -1, 5, 1], [32, 32, 40, 32, -1, 31], [0, 0, 0, 0, 0, I32_MIN], [0, -1, 0, -1, 0, 0],
     [0, 0, 0, 0, 0, 0]),
    ("u32", np.uint32, [1, 0x80000000, 0xFFFFFFFF], [32, 33, 0xFFFFFFFF], [0, 0, 0], [0, 0xFFFFFFFF, 0xFFFFFFFF],
     [0, 0, 0]),
]


@FORMS
@pytest.mark.parametrize(("name", "dtype", "x", "s", "shl", "sra", "srl"), SHIFT_CASES, ids=[c[0] for c in SHIFT_CASES])
def test_C05_shifts(const: bool, name: str, dtype: Any, x: list[int], s: list[int], shl: list[int] | None,
                    sra: list[int], srl: list[int]) -> None:
    xa, sa = np.array(x, dtype), np.array(s, dtype)
    b = xs.XlaBuilder("c05")
    X, S = inputs(b, [xa, sa], const)
    r = go(b, [ops.ShiftLeft(X, S), ops.ShiftRightArithmetic(X, S), ops.ShiftRightLogical(X, S)], [xa, sa], const)
    if shl is not None:
        np.testing.assert_array_equal(r[0], np.array(shl, dtype))
    np.testing.assert_array_equal(r[1], np.array(sra, dtype))
    np.testing.assert_array_equal(r[2], np.array(srl, dtype))


@FORMS
def test_C05_s8_shifts(const: bool) -> None:
    x = np.array([-128, 64, 1], np.int8)
    s1, s2, s3 = np.array([1, 1, 8], np.int8), np.array([7, 8, 100], np.int8), np.array([7, 8, 1], np.int8)
    b = xs.XlaBuilder("c05s8")
    X, S1, S2, S3 = inputs(b, [x, s1, s2, s3], const)
    outs = [ops.ShiftLeft(X, S1), ops.ShiftRightArithmetic(X, S2), ops.ShiftRightLogical(X, S3)]
    r = go(b, outs, [x, s1, s2, s3], const)
    np.testing.assert_array_equal(r[0], np.array([0, -128, 0], np.int8))
    np.testing.assert_array_equal(r[1], np.array([-1, 0, 0], np.int8))
    np.testing.assert_array_equal(r[2], np.array([1, 0, 0], np.int8))


# ---------------------------------------------------------------------------------- C-10


C10_BITS = [
    (0x44E48000, 0x44E4), (np.float32(1006.0).view(np.uint32), 0x447C), (np.float32(1329.0).view(np.uint32), 0x44A6),
    (np.float32(128.5).view(np.uint32), 0x4300), (0x3F808000, 0x3F80), (0x3F818000, 0x3F82), (0x3F808001, 0x3F81),
    (0x7F7FFFFF, 0x7F80), (0x7FC00001, 0x7FC0), (0x7F800001, 0x7FC0), (0xFF800000, 0xFF80), (0x00000001, 0x0000),
    (0x80000000, 0x8000),
]


@FORMS
def test_C10_f32_to_bf16_rounding(const: bool) -> None:
    x = np.array([int(a) for a, _ in C10_BITS], np.uint32).view(np.float32)
    want = np.array([w for _, w in C10_BITS], np.uint16)
    assert x[0] == 1828.0 and float(want.view(ml_dtypes.bfloat16)[0]) == 1824.0
    b = xs.XlaBuilder("c10")
    (X,) = inputs(b, [x], const)
    (r,) = go(b, [ops.ConvertElementType(X, "bfloat16")], [x], const)
    assert r.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(r.view(np.uint16), want, err_msg=str([hex(v) for v in r.view(np.uint16)]))


def test_C10_bf16_iota() -> None:
    b = xs.XlaBuilder("c10iota")
    v = ops.Iota(b, ml_dtypes.bfloat16, 300)
    s = ops.Iota(b, xs.Shape.array_shape(ml_dtypes.bfloat16, [300]), 0)
    for r in run(b.build([v, s])):
        assert r.dtype == ml_dtypes.bfloat16 and r.shape == (300,)
        np.testing.assert_array_equal(r[255:261].astype(np.float32), [255, 256, 256, 258, 260, 260])
        assert float(r[299]) == 300.0


@FORMS
def test_C10_bf16_add(const: bool) -> None:
    bf = ml_dtypes.bfloat16
    a = np.array([256, 1, 1], np.float32)
    c = np.array([1, 0.00390625, 0.005859375], np.float32)
    b = xs.XlaBuilder("c10add")
    A, C = inputs(b, [a, c], const)
    (r,) = go(b, [ops.Add(ops.ConvertElementType(A, bf), ops.ConvertElementType(C, bf))], [a, c], const)
    assert r.dtype == bf
    np.testing.assert_array_equal(r.astype(np.float32), [256, 1.0, 1.0078125])


# ---------------------------------------------------------------------------------- C-11

C11_X = np.array([448, 464, 465, 1000, -1000, INF, -INF, NAN, 2**-9, 2**-10, 0.0029296875, -0.0], np.float32)
C11_E4M3FN = [0x7E, 0x7E, 0x7F, 0x7F, 0xFF, 0x7F, 0xFF, 0x7F, 0x01, 0x00, 0x02, 0x80]
C11_E5M2 = [0x5F, 0x5F, 0x5F, 0x64, 0xE4, 0x7C, 0xFC, 0x7E, 0x18, 0x14, 0x1A, 0x80]


@FORMS
def test_C11_f32_to_fp8(const: bool) -> None:
    b = xs.XlaBuilder("c11")
    (X,) = inputs(b, [C11_X], const)
    e4, e5 = go(b, [ops.ConvertElementType(X, ml_dtypes.float8_e4m3fn), ops.ConvertElementType(X, "float8_e5m2")],
                [C11_X], const)
    assert e4.dtype == ml_dtypes.float8_e4m3fn and e5.dtype == ml_dtypes.float8_e5m2
    np.testing.assert_array_equal(e4.view(np.uint8), np.array(C11_E4M3FN, np.uint8))
    np.testing.assert_array_equal(e5.view(np.uint8), np.array(C11_E5M2, np.uint8))


def test_C11_all_e4m3fn_patterns_to_f32_match_ml_dtypes() -> None:
    allb = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    b = xs.XlaBuilder("c11all")
    (r,) = run(b.build(ops.ConvertElementType(ops.Constant(b, allb), np.float32)))
    want = allb.astype(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(r), nan)
    np.testing.assert_array_equal(np.signbit(r), np.signbit(want))  # NaN payloads may differ, signs may not
    same_bits(r[~nan], want[~nan])


# ---------------------------------------------------------------------------------- C-12


@FORMS
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.float32])
def test_C12_grouped_1x1_conv(const: bool, dtype: Any) -> None:
    x = np.array([-2, -1, 0, 1], dtype).reshape(1, 4, 1, 1)
    w = np.array([[-3, -2], [-1, 0], [1, 2], [3, 4]], dtype).reshape(4, 2, 1, 1)
    b = xs.XlaBuilder("c12a")
    X, W = inputs(b, [x, w], const)
    y = ops.ConvGeneralDilated(X, W, [1, 1], "VALID", dimension_numbers=("NCHW", "OIHW", "NCHW"), feature_group_count=2)
    assert y.dims == (1, 4, 1, 1)
    (r,) = go(b, [y], [x, w], const)
    assert r.dtype == dtype
    np.testing.assert_array_equal(r.ravel(), [8, 2, 2, 4])


@FORMS
def test_C12_1d_dilations_and_batch_groups(const: bool) -> None:
    dn = ("NCH", "OIH", "NCH")
    x1 = np.array([1, 2, 3], np.float32).reshape(1, 1, 3)
    k = np.array([1, 10], np.float32).reshape(1, 1, 2)
    x2 = np.arange(1, 7, dtype=np.float32).reshape(1, 1, 6)
    x4 = np.array([1, 2, 3, 4], np.float32).reshape(4, 1, 1)
    k2 = np.array([1, 10], np.float32).reshape(2, 1, 1)
    b = xs.XlaBuilder("c12b")
    X1, K, X2, X4, K2 = inputs(b, [x1, k, x2, x4, k2], const)
    lhs_dil = ops.ConvGeneralDilated(X1, K, [1], [(1, 1)], lhs_dilation=[2], dimension_numbers=dn)
    rhs_dil = ops.ConvGeneralDilated(X2, K, [1], [(-1, 0)], rhs_dilation=[2], dimension_numbers=dn)
    bgc = ops.ConvGeneralDilated(X4, K2, [1], "VALID", dimension_numbers=dn, batch_group_count=2)
    assert bgc.dims == (2, 2, 1)
    r1, r2, r3 = go(b, [lhs_dil, rhs_dil, bgc], [x1, k, x2, x4, k2], const)
    np.testing.assert_array_equal(r1.ravel(), [10, 1, 20, 2, 30, 3])
    np.testing.assert_array_equal(r2.ravel(), [42, 53, 64])
    assert r3.shape == (2, 2, 1)
    np.testing.assert_array_equal(r3.ravel(), [1, 30, 2, 40])
