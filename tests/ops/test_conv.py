"""Tests of xlasdk/ops/conv.py (ConvGeneralDilated, Conv) against a direct-loop numpy reference."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import (
    PARAM_AND_CONST,
    PerTestRng,
    assert_device_close,
    case_inputs,
    param,
    raises,
    run,
    run_case,
    skip_where_device_defines_otherwise,
)
from xlasdk import ops
from xlasdk.errors import ShapeError

RNG = PerTestRng(11)  # per test: values that do not depend on the order of the suite


def ref_conv(x: np.ndarray[Any, Any], w: np.ndarray[Any, Any], strides: Sequence[int], pads: Sequence[tuple[int, int]],
             lhs_dil: Sequence[int] | None = None, rhs_dil: Sequence[int] | None = None, fgc: int = 1,
             bgc: int = 1) -> np.ndarray[Any, Any]:
    """Convolution in (B, C, *S) / (O, I, *K) -> (B / bgc, O, *S') layout, by direct loops in float64."""
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    n = x.ndim - 2
    lhs_dil = list(lhs_dil or [1] * n)
    rhs_dil = list(rhs_dil or [1] * n)
    B, C = x.shape[:2]
    O, I = w.shape[:2]
    # input dilation: holes between the input elements
    dil = np.zeros((B, C) + tuple((s - 1) * d + 1 if s else 0 for s, d in zip(x.shape[2:], lhs_dil, strict=True)))
    dil[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in lhs_dil)] = x
    # padding: positive pads zeros, negative crops
    for i, (lo, hi) in enumerate(pads):
        ax = 2 + i
        if lo < 0:
            dil = dil.take(range(-lo, dil.shape[ax]), axis=ax)
        if hi < 0:
            dil = dil.take(range(0, max(dil.shape[ax] + hi, 0)), axis=ax)
        width = [(0, 0)] * dil.ndim
        width[ax] = (max(lo, 0), max(hi, 0))
        dil = np.pad(dil, width)
    # kernel (window) dilation
    wd = np.zeros((O, I) + tuple((k - 1) * d + 1 for k, d in zip(w.shape[2:], rhs_dil, strict=True)))
    wd[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in rhs_dil)] = w
    sizes: list[tuple[int, int, int]] = list(zip(dil.shape[2:], wd.shape[2:], strides, strict=True))
    out_sp = [max((p - k) // s + 1, 0) if p >= k else 0 for p, k, s in sizes]
    Bo = B // bgc
    out = np.zeros((Bo, O) + tuple(out_sp))
    per_fg, per_bg = O // fgc, O // bgc
    for o in range(O):
        g, k = o // per_fg, o // per_bg  # feature group (input channels) and batch group (input batches)
        xs_ = dil[k * Bo:(k + 1) * Bo, g * I:(g + 1) * I]
        for pos in itertools.product(*[range(s) for s in out_sp]):
            win = tuple(slice(p * s, p * s + kd) for p, s, kd in zip(pos, strides, wd.shape[2:], strict=True))
            prod = xs_[(slice(None), slice(None)) + win] * wd[o]
            out[(slice(None), o) + tuple(pos)] = prod.sum(axis=tuple(range(1, 2 + n)))
    return out


def same_pads(sizes: Sequence[int], windows: Sequence[int], strides: Sequence[int]) -> list[tuple[int, int]]:
    """TF/XLA SAME padding: output ceil(in / stride), the odd element of padding on the high side."""
    out = []
    for n, k, s in zip(sizes, windows, strides, strict=True):
        total = max((-(-n // s) - 1) * s + k - n, 0)
        out.append((total // 2, total - total // 2))
    return out


def sample(shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray[Any, Any]:
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(-4, 5, shape).astype(dtype)
    return RNG.normal(size=shape).astype(dtype)


# (name, lhs shape NC.., rhs shape OI.., strides, padding, lhs_dil, rhs_dil, fgc, bgc)
NCHW_CASES: list[tuple[str, tuple[int, ...], tuple[int, ...], list[int], Any, Any, Any, int, int]] = [
    ("valid", (2, 3, 6, 7), (4, 3, 3, 2), [1, 1], "VALID", None, None, 1, 1),
    ("strided_explicit", (2, 3, 7, 7), (4, 3, 3, 3), [2, 3], [(1, 2), (0, 1)], None, None, 1, 1),
    ("same_odd", (1, 2, 7, 5), (3, 2, 3, 4), [2, 2], "SAME", None, None, 1, 1),
    ("negative_pad", (1, 2, 6, 6), (2, 2, 2, 2), [1, 1], [(-1, 0), (-2, -1)], None, None, 1, 1),
    ("lhs_dilation", (1, 2, 4, 3), (2, 2, 3, 2), [1, 1], [(2, 2), (1, 1)], [2, 3], None, 1, 1),
    ("rhs_dilation", (1, 2, 8, 9), (3, 2, 3, 2), [1, 2], "VALID", None, [2, 3], 1, 1),
    ("both_dilations_same", (1, 1, 5, 5), (1, 1, 3, 3), [2, 1], "SAME", [2, 1], [1, 2], 1, 1),
    ("groups", (2, 4, 5, 5), (6, 2, 3, 3), [1, 1], [(1, 1), (1, 1)], None, None, 2, 1),
    ("depthwise", (1, 3, 5, 4), (6, 1, 2, 2), [1, 1], "VALID", None, None, 3, 1),  # multiplier 2
    ("batch_groups", (4, 2, 5, 5), (6, 2, 3, 3), [2, 2], [(1, 0), (0, 1)], None, None, 1, 2),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_conv_general_dilated_nchw(dtype: Any) -> None:
    if dtype is np.float64:
        skip_where_device_defines_otherwise("tpu-f64-emulated")
    b = xs.XlaBuilder("conv")
    outs: list[xs.XlaOp] = []
    args: list[np.ndarray[Any, Any]] = []
    wants: list[np.ndarray[Any, Any]] = []
    for _, ls, rs, st, pad, ld, rd, g, bg in NCHW_CASES:
        x, w = sample(ls, dtype), sample(rs, dtype)
        X = ops.Parameter(b, len(args), xs.shape_from_pyval(x))
        W = ops.Parameter(b, len(args) + 1, xs.shape_from_pyval(w))
        args += [x, w]
        outs.append(ops.ConvGeneralDilated(X, W, st, pad, lhs_dilation=ld, rhs_dilation=rd,
                                           dimension_numbers=("NCHW", "OIHW", "NCHW"), feature_group_count=g,
                                           batch_group_count=bg))
        if isinstance(pad, str):
            eff_in = [(s - 1) * d + 1 for s, d in zip(ls[2:], ld or [1, 1], strict=True)]
            eff_k = [(k - 1) * d + 1 for k, d in zip(rs[2:], rd or [1, 1], strict=True)]
            pad = same_pads(eff_in, eff_k, st) if pad == "SAME" else [(0, 0), (0, 0)]
        wants.append(ref_conv(x, w, st, pad, ld, rd, g, bg))
    for o, want, case in zip(outs, wants, NCHW_CASES, strict=True):
        assert o.dims == want.shape, case[0]
    for got, want, case in zip(run(b.build(outs), *args), wants, NCHW_CASES, strict=True):
        assert got.dtype == np.dtype(dtype)
        if np.dtype(dtype).kind == "i":
            np.testing.assert_array_equal(got, want, err_msg=case[0])
        else:
            assert_device_close(got, want, rtol=1e-5, atol=1e-5, err_msg=case[0])


def test_conv_layouts_nhwc_hwio_and_mixed() -> None:
    x = sample((2, 6, 5, 3))  # NHWC
    w = sample((3, 2, 3, 4))  # HWIO
    xc, wc = x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1)  # to NCHW / OIHW
    want = ref_conv(xc, wc, [1, 2], [(1, 1), (0, 1)])
    x1 = sample((5, 2, 4, 3))  # "HNWC"-style odd layout
    w1 = sample((2, 3, 2, 4))  # "WIHO"
    want1 = ref_conv(x1.transpose(1, 3, 0, 2), w1.transpose(3, 1, 2, 0), [1, 1], [(0, 0), (0, 0)])
    dn_obj = xs.make_convolution_dimension_numbers(("NHWC", "HWIO", "NHWC"), 2)
    b = xs.XlaBuilder("layouts")
    X, W, X1, W1 = (ops.Parameter(b, i, xs.shape_from_pyval(a)) for i, a in enumerate((x, w, x1, w1)))
    outs = [
        ops.ConvGeneralDilated(X, W, [1, 2], [(1, 1), (0, 1)], dimension_numbers=("NHWC", "HWIO", "NHWC")),
        ops.ConvGeneralDilated(X, W, [1, 2], [(1, 1), (0, 1)], dimension_numbers=("NHWC", "HWIO", "NCHW")),
        ops.ConvGeneralDilated(X, W, [1, 2], [(1, 1), (0, 1)], dimension_numbers=dn_obj),
        ops.ConvGeneralDilated(X1, W1, [1, 1], "VALID", dimension_numbers=("HNWC", "WIHO", "CNHW")),
    ]
    r = run(b.build(outs), x, w, x1, w1)
    assert_device_close(r[0], want.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-5)
    assert_device_close(r[1], want, rtol=1e-5, atol=1e-5)
    assert_device_close(r[2], r[0], rtol=0, atol=0)
    assert_device_close(r[3], want1.transpose(1, 0, 2, 3), rtol=1e-5, atol=1e-5)


def test_conv_1d_and_3d() -> None:
    x1, w1 = sample((2, 3, 9)), sample((4, 3, 3))
    x3, w3 = sample((1, 2, 4, 5, 3)), sample((3, 2, 2, 3, 2))
    b = xs.XlaBuilder("nd")
    X1, W1, X3, W3 = (ops.Parameter(b, i, xs.shape_from_pyval(a)) for i, a in enumerate((x1, w1, x3, w3)))
    outs = [
        ops.ConvGeneralDilated(X1, W1, [2], [(1, 2)], rhs_dilation=[2], dimension_numbers=("NCH", "OIH", "NCH")),
        ops.ConvGeneralDilated(X3, W3, [1, 2, 1], [(1, 0), (0, 0), (1, 1)],
                               dimension_numbers=("NCDHW", "OIDHW", "NCDHW")),
        ops.ConvGeneralDilated(X3, W3, [1, 1, 1], "VALID"),  # None: NC.../OI.../NC...
    ]
    r = run(b.build(outs), x1, w1, x3, w3)
    assert_device_close(r[0], ref_conv(x1, w1, [2], [(1, 2)], None, [2]), rtol=1e-5, atol=1e-5)
    assert_device_close(r[1], ref_conv(x3, w3, [1, 2, 1], [(1, 0), (0, 0), (1, 1)]), rtol=1e-5, atol=1e-5)
    assert_device_close(r[2], ref_conv(x3, w3, [1, 1, 1], [(0, 0)] * 3), rtol=1e-5, atol=1e-5)


def test_conv_shorthand() -> None:
    x, w = sample((2, 4, 6, 5)), sample((6, 2, 3, 3))
    b = xs.XlaBuilder("conv_short")
    X, W = ops.Parameter(b, 0, xs.shape_from_pyval(x)), ops.Parameter(b, 1, xs.shape_from_pyval(w))
    outs = [
        ops.Conv(X, W, [1, 1], "SAME", feature_group_count=2),
        ops.Conv(X, W, [2, 1], xs.PaddingType.VALID, feature_group_count=2),
        ops.Conv(X, W, [1, 2], [(2, 0), (1, 1)], feature_group_count=2),
        ops.Conv(ops.Reshape(X, [4, 2, 6, 5]), W, [1, 1], "VALID", batch_group_count=2),
    ]
    assert outs[0].dims == (2, 6, 6, 5)
    r = run(b.build(outs), x, w)
    want0 = ref_conv(x, w, [1, 1], same_pads([6, 5], [3, 3], [1, 1]), fgc=2)
    assert_device_close(r[0], want0, rtol=1e-5, atol=1e-5)
    assert_device_close(r[1], ref_conv(x, w, [2, 1], [(0, 0), (0, 0)], fgc=2), rtol=1e-5, atol=1e-5)
    assert_device_close(r[2], ref_conv(x, w, [1, 2], [(2, 0), (1, 1)], fgc=2), rtol=1e-5, atol=1e-5)
    want3 = ref_conv(x.reshape(4, 2, 6, 5), w, [1, 1], [(0, 0)] * 2, bgc=2)
    assert_device_close(r[3], want3, rtol=1e-5, atol=1e-5)


def test_conv_precision_and_preferred_type() -> None:
    xi, wi = sample((1, 2, 4, 4), np.int8) * 30, sample((2, 2, 2, 2), np.int8) * 30
    xb, wb = sample((1, 2, 4, 4)).astype(ml_dtypes.bfloat16), sample((2, 2, 2, 2)).astype(ml_dtypes.bfloat16)
    xu4 = RNG.integers(0, 16, (1, 1, 3, 3)).astype(ml_dtypes.uint4)
    b = xs.XlaBuilder("conv_pref")
    XI, WI = ops.Parameter(b, 0, xs.shape_from_pyval(xi)), ops.Parameter(b, 1, xs.shape_from_pyval(wi))
    pc = xs.PrecisionConfig([xs.PrecisionConfig.Precision.HIGHEST, xs.PrecisionConfig.Precision.HIGH])
    outs = [
        ops.ConvGeneralDilated(XI, WI, [1, 1], "VALID", preferred_element_type=np.int32, precision_config=pc),
        ops.Conv(ops.Constant(b, xb), ops.Constant(b, wb), [1, 1], "VALID", preferred_element_type=np.float32),
        ops.Conv(ops.Constant(b, xu4), ops.Constant(b, xu4), [1, 1], "VALID", preferred_element_type=np.int32),
    ]
    assert [str(o.shape) for o in outs] == ["s32[1,2,3,3]", "f32[1,2,3,3]", "s32[1,1,1,1]"]
    comp = b.build(outs)
    conv_lines = [ln for ln in comp.as_hlo_text().splitlines() if " convolution(" in ln]
    assert "operand_precision={highest,high}" in conv_lines[0]
    r = run(comp, xi, wi)
    want = ref_conv(xi, wi, [1, 1], [(0, 0)] * 2)
    assert np.abs(want).max() > 127  # the s8 result would overflow
    np.testing.assert_array_equal(r[0], want)
    np.testing.assert_allclose(r[1], ref_conv(xb.astype(np.float32), wb.astype(np.float32), [1, 1], [(0, 0)] * 2),
                               rtol=1e-5, atol=1e-5)
    assert r[2].ravel()[0] == int((xu4.astype(np.int64) ** 2).sum())


def test_conv_errors() -> None:
    b = xs.XlaBuilder("conv_err")
    x = ops.Parameter(b, 0, xs.Shape.array_shape("f32", [1, 4, 5, 5]))
    w = ops.Parameter(b, 1, xs.Shape.array_shape("f32", [6, 4, 3, 3]))
    wi = ops.Parameter(b, 2, xs.Shape.array_shape("s32", [6, 4, 3, 3]))
    w3 = ops.Parameter(b, 3, xs.Shape.array_shape("f32", [6, 4, 3]))
    w2 = ops.Parameter(b, 4, xs.Shape.array_shape("f32", [6, 2, 3, 3]))
    bo = ops.Parameter(b, 5, xs.Shape.array_shape("pred", [1, 1, 2, 2]))
    C = ops.ConvGeneralDilated
    with raises(xs.DTypeError, "ConvGeneralDilated: operand 'rhs' has element type s32[6,4,3,3], expected f32 like 'lhs'"):  # noqa: E501
        C(x, wi, [1, 1], "VALID")
    with raises(xs.DTypeError, "ConvGeneralDilated: operand 'lhs' must be numeric, got pred[1,1,2,2]"):
        C(bo, bo, [1, 1], "VALID")
    with raises(xs.ShapeError, "ConvGeneralDilated: operands must have equal rank >= 2, got 'lhs' f32[1,4,5,5] and 'rhs' f32[6,4,3]"):  # noqa: E501
        C(x, w3, [1, 1], "VALID")
    with raises(xs.ShapeError, "ConvGeneralDilated: window_strides has 1 entries, expected 2"):
        C(x, w, [1], "VALID")
    with raises(xs.ShapeError, "ConvGeneralDilated: window_strides [1, 0] must all be >= 1"):
        C(x, w, [1, 0], "VALID")
    with raises(xs.ShapeError, "ConvGeneralDilated: lhs_dilation [0, 1] must all be >= 1"):
        C(x, w, [1, 1], "VALID", lhs_dilation=[0, 1])
    with raises(xs.ShapeError, "ConvGeneralDilated: rhs_dilation has 1 entries, expected 2"):
        C(x, w, [1, 1], "VALID", rhs_dilation=[1])
    with raises(xs.ShapeError, "ConvGeneralDilated: unknown PaddingType 'FOO'"):
        C(x, w, [1, 1], "FOO")
    with raises(xs.ShapeError, "ConvGeneralDilated: padding has 1 (lo, hi) pairs, expected one per spatial dimension (2)"):  # noqa: E501
        C(x, w, [1, 1], [(1, 1)])
    with raises(xs.ShapeError, "ConvGeneralDilated: padding[0] must be a (lo, hi) pair of ints"):
        C(x, w, [1, 1], [(1, 1, 1), (0, 0)])
    with raises(xs.ShapeError, "ConvGeneralDilated: input features (4, from 'lhs' f32[1,4,5,5]) must equal kernel input features ", "(4, from 'rhs' f32[6,4,3,3]) times feature_group_count (3)"):  # noqa: E501
        C(x, w, [1, 1], "VALID", feature_group_count=3)
    with raises(xs.ShapeError, "ConvGeneralDilated: input features (4", "kernel input features (2"):
        C(x, w2, [1, 1], "VALID")
    x25, w5 = ops.Reshape(x, [1, 4, 25, 1]), ops.Slice(w2, [0, 0, 0, 0], [5, 2, 3, 3])
    with raises(xs.ShapeError, "ConvGeneralDilated: kernel output features (5) must be divisible by feature_group_count (2)"):  # noqa: E501
        C(x25, w5, [1, 1], "VALID", feature_group_count=2)
    with raises(xs.ShapeError, "ConvGeneralDilated: feature_group_count (0) and batch_group_count (1) must be >= 1"):
        C(x, w, [1, 1], "VALID", feature_group_count=0)
    with raises(xs.ShapeError, "ConvGeneralDilated: batch (1) and kernel output features (6) must be divisible by batch_group_count (2)"):  # noqa: E501
        C(x, w, [1, 1], "VALID", batch_group_count=2)
    with raises(xs.ShapeError, "ConvGeneralDilated: feature_group_count and batch_group_count cannot both be > 1"):
        C(x, w2, [1, 1], "VALID", feature_group_count=2, batch_group_count=2)
    with raises(xs.DTypeError, "ConvGeneralDilated: feature_group_count must be an int, got float 1.5"):
        C(x, w, [1, 1], "VALID", feature_group_count=1.5)
    with raises(xs.DTypeError, "ConvGeneralDilated: batch_group_count must be an int, got str"):
        C(x, w, [1, 1], "VALID", batch_group_count="2")
    with raises(xs.ShapeError, "ConvGeneralDilated: bad dimension_numbers", "3 layout strings"):
        C(x, w, [1, 1], "VALID", dimension_numbers=("NCHW", "OIHW"))
    with raises(xs.ShapeError, "ConvGeneralDilated: bad dimension_numbers", "spatial letters"):
        C(x, w, [1, 1], "VALID", dimension_numbers=("NCHW", "OIHX", "NCHW"))
    dn1 = xs.make_convolution_dimension_numbers(("NCH", "OIH", "NCH"), 1)
    with raises(xs.ShapeError, "ConvGeneralDilated: bad dimension_numbers", "expected num_spatial_dimensions=2"):
        C(x, w, [1, 1], "VALID", dimension_numbers=dn1)
    bad_dn = xs.make_convolution_dimension_numbers(None, 2)
    bad_dn.input_spatial_dimensions = [2, 7]
    with raises(xs.ShapeError, "ConvGeneralDilated: bad dimension_numbers: input dimensions [0, 1, 2, 7] must be < 4"):
        C(x, w, [1, 1], "VALID", dimension_numbers=bad_dn)
    with raises(xs.DTypeError, "ConvGeneralDilated: preferred_element_type s32 is not compatible with f32 operands"):
        C(x, w, [1, 1], "VALID", preferred_element_type=np.int32)
    with raises(xs.DTypeError, "ConvGeneralDilated: precision_config must be an xs.PrecisionConfig"):
        C(x, w, [1, 1], "VALID", precision_config="x")
    with raises(xs.ShapeError, "ConvGeneralDilated: operands must have equal rank >= 2"):
        C(ops.Constant(b, np.float32(1)), ops.Constant(b, np.float32(1)), [], "VALID")
    with raises(xs.DTypeError, "ConvGeneralDilated: operand 'rhs' must be an XlaOp, got ndarray"):
        C(x, np.ones((6, 4, 3, 3)), [1, 1], "VALID")
    # the shorthand names itself
    with raises(xs.ShapeError, "Conv: unknown PaddingType 'XX'"):
        ops.Conv(x, w, [1, 1], "XX")
    with raises(xs.ShapeError, "Conv: window_strides has 3 entries, expected 2"):
        ops.Conv(x, w, [1, 1, 1], "SAME")
    with raises(xs.ShapeError, "Conv: input features (4"):
        ops.Conv(x, w2, [1, 1], "SAME")


# -- pure shape rules (no builder) ----------------------------------------------------------------

def test_convolution_shape_rules() -> None:
    from xlasdk.attrs import make_convolution_dimension_numbers
    from xlasdk.ops.conv import convolution_padding, convolution_rank, convolution_shape

    lhs = xs.Shape.array_shape(np.float32, (2, 3, 9, 8))
    rhs = xs.Shape.array_shape(np.float32, (4, 3, 3, 2))
    dn = make_convolution_dimension_numbers(None, 2)
    assert convolution_rank("Conv", lhs, rhs) == 2
    # (9 - 3) // 2 + 1 = 4 and (8 + 1 + 1 - 2) // 1 + 1 = 9
    out = convolution_shape("Conv", lhs, rhs, dn, (2, 1), ((0, 0), (1, 1)), (1, 1), (1, 1), 1, 1)
    assert out == xs.Shape.array_shape(np.float32, (2, 4, 4, 9))
    # SAME: ceil(9 / 2) = 5, ceil(8 / 1) = 8
    assert convolution_padding("Conv", lhs, rhs, dn, (2, 1), "SAME", (1, 1), (1, 1)) == ((1, 1), (0, 1))
    same = convolution_shape("Conv", lhs, rhs, dn, (2, 1), "SAME", (1, 1), (1, 1), 1, 1, np.float64)
    assert same == xs.Shape.array_shape(np.float64, (2, 4, 5, 8))
    # rhs dilation 2: window 5; lhs dilation 2: input 17
    dil = convolution_shape("Conv", lhs, rhs, dn, (1, 1), "VALID", (2, 1), (2, 1), 1, 1)
    assert dil == xs.Shape.array_shape(np.float32, (2, 4, 13, 7))
    grouped = xs.Shape.array_shape(np.float32, (6, 1, 3, 2))  # 3 groups of 1 input feature
    assert convolution_shape("Conv", lhs, grouped, dn, (1, 1), "VALID", (1, 1), (1, 1), 3, 1).dimensions() == (
        2, 6, 7, 7)
    with raises(xs.ShapeError, "Conv: input features (3, from 'lhs' f32[2,3,9,8]) must equal kernel input features"):
        convolution_shape("Conv", lhs, grouped, dn, (1, 1), "VALID", (1, 1), (1, 1), 1, 1)
    with raises(xs.ShapeError, "Conv: window_strides has 1 entries, expected 2 (spatial dimensions)"):
        convolution_shape("Conv", lhs, rhs, dn, (1,), "VALID", (1, 1), (1, 1), 1, 1)
    with raises(xs.ShapeError, "Conv: feature_group_count and batch_group_count cannot both be > 1"):
        convolution_shape("Conv", lhs, rhs, dn, (1, 1), "VALID", (1, 1), (1, 1), 3, 2)
    with raises(xs.ShapeError, "Conv: operands must have equal rank >= 2, got 'lhs' f32[2,3,9,8] and 'rhs' f32[4,3]"):
        convolution_rank("Conv", lhs, xs.Shape.array_shape(np.float32, (4, 3)))
    with raises(xs.DTypeError, "Conv: operand 'rhs' has element type f64[4,3,3,2], expected f32 like 'lhs'"):
        convolution_rank("Conv", lhs, xs.Shape.array_shape(np.float64, (4, 3, 3, 2)))


@PARAM_AND_CONST
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.float32])
def test_conv_feature_groups_with_a_1x1_kernel(const: bool, dtype: Any) -> None:
    """Case C-12 (shared/cases/cases.md): a grouped convolution (feature_group_count=2) with a 1x1 kernel, as
    parameters and as folded constants."""
    x = np.array([-2, -1, 0, 1], dtype).reshape(1, 4, 1, 1)
    w = np.array([[-3, -2], [-1, 0], [1, 2], [3, 4]], dtype).reshape(4, 2, 1, 1)
    b = xs.XlaBuilder("c12a")
    X, W = case_inputs(b, [x, w], const)
    y = ops.ConvGeneralDilated(X, W, [1, 1], "VALID", dimension_numbers=("NCHW", "OIHW", "NCHW"), feature_group_count=2)
    assert y.dims == (1, 4, 1, 1)
    (r,) = run_case(b, [y], [x, w], const)
    assert r.dtype == dtype
    np.testing.assert_array_equal(r.ravel(), [8, 2, 2, 4])


@PARAM_AND_CONST
def test_conv_1d_lhs_and_rhs_dilation_and_batch_groups(const: bool) -> None:
    """Case C-12 (shared/cases/cases.md): 1-d convolutions with lhs dilation, rhs dilation and negative padding, and
    batch_group_count=2."""
    dn = ("NCH", "OIH", "NCH")
    x1 = np.array([1, 2, 3], np.float32).reshape(1, 1, 3)
    k = np.array([1, 10], np.float32).reshape(1, 1, 2)
    x2 = np.arange(1, 7, dtype=np.float32).reshape(1, 1, 6)
    x4 = np.array([1, 2, 3, 4], np.float32).reshape(4, 1, 1)
    k2 = np.array([1, 10], np.float32).reshape(2, 1, 1)
    b = xs.XlaBuilder("c12b")
    X1, K, X2, X4, K2 = case_inputs(b, [x1, k, x2, x4, k2], const)
    lhs_dil = ops.ConvGeneralDilated(X1, K, [1], [(1, 1)], lhs_dilation=[2], dimension_numbers=dn)
    rhs_dil = ops.ConvGeneralDilated(X2, K, [1], [(-1, 0)], rhs_dilation=[2], dimension_numbers=dn)
    bgc = ops.ConvGeneralDilated(X4, K2, [1], "VALID", dimension_numbers=dn, batch_group_count=2)
    assert bgc.dims == (2, 2, 1)
    r1, r2, r3 = run_case(b, [lhs_dil, rhs_dil, bgc], [x1, k, x2, x4, k2], const)
    np.testing.assert_array_equal(r1.ravel(), [10, 1, 20, 2, 30, 3])
    np.testing.assert_array_equal(r2.ravel(), [42, 53, 64])
    assert r3.shape == (2, 2, 1)
    np.testing.assert_array_equal(r3.ravel(), [1, 30, 2, 40])


def test_conv_rejects_kernel_spatial_size_zero() -> None:
    """Found by the shape-rule fuzzer: a kernel with a spatial size 0 is rejected (MLIR's verifier failed on it)."""
    # MLIR: "expects window to have positive value for 0-th window dimension, but got 0".
    b = xs.XlaBuilder("conv_k0")
    x, w = param(b, 0, np.float32, (1, 1, 3)), param(b, 1, np.float32, (1, 1, 0))
    with raises(ShapeError, "ConvGeneralDilated", "kernel spatial sizes [0]"):
        ops.ConvGeneralDilated(x, w, [1], [(0, 0)])


def test_conv_same_padding_of_empty_dilated_input() -> None:
    """Found by the shape-rule fuzzer: SAME padding of an empty, dilated input dimension gives an empty result."""
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


def test_f4_conv_and_dot_with_preferred_element_type() -> None:
    """Found by the shape-rule fuzzer: ConvGeneralDilated (and DotGeneral) of f4e2m1fn operands with a
    preferred_element_type compile and compute the exact values."""
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
