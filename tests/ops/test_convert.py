"""BitcastConvertType (same width, narrower, wider) against numpy's ``view``, ReducePrecision
against rounding through ml_dtypes / numpy narrow types, and their errors."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import (
    PARAM_AND_CONST,
    case_inputs,
    device_defines_otherwise,
    raises,
    run,
    run_case,
    skip_where_device_defines_otherwise,
)
from xlasdk import ops
from xlasdk.errors import DTypeError, ShapeError

S = xs.Shape.array_shape
NAN, INF = np.nan, np.inf
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


SPECIAL_F32_BITS = np.array(
    [0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001,
     0xFFC00123, 0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0x12345678, 0xDEADBEEF],
    dtype=np.uint32,
)


# -- BitcastConvertType ----------------------------------------------------------------------------

def test_bitcast_same_width_matches_view() -> None:
    """Same-width bitcasts keep the dimensions and every bit (NaN payloads, -0.0, denormals)."""
    rng = np.random.default_rng(0)
    f32 = SPECIAL_F32_BITS.view(np.float32).reshape(2, 7)
    u16 = rng.integers(0, 2**16, 5, dtype=np.uint16)
    s8 = np.array([-128, -1, 0, 1, 127], np.int8)
    b = xs.XlaBuilder("same")
    p32 = ops.Parameter(b, 0, S(np.float32, (2, 7)))
    p16 = ops.Parameter(b, 1, S(np.uint16, (5,)))
    p8 = ops.Parameter(b, 2, S(np.int8, (5,)))
    outs = [
        ops.BitcastConvertType(p32, np.uint32),
        ops.BitcastConvertType(p32, "int32"),
        ops.BitcastConvertType(ops.BitcastConvertType(p32, np.int32), np.float32),
        ops.BitcastConvertType(p16, np.float16),
        ops.BitcastConvertType(p16, ml_dtypes.bfloat16),
        ops.BitcastConvertType(p8, np.uint8),
    ]
    assert all(o.dims == d for o, d in zip(outs, [(2, 7)] * 3 + [(5,)] * 3, strict=True))
    # bf16 cannot come back through the test runner: bitcast it back to u16 inside the graph
    outs[4] = ops.BitcastConvertType(outs[4], np.uint16)
    got = run(b.build(ops.Tuple(b, outs)), f32, u16, s8)
    wants: list[np.ndarray[Any, Any]] = [f32.view(np.uint32), f32.view(np.int32), f32, u16.view(np.float16), u16,
                                         s8.view(np.uint8)]
    for g, w in zip(got, wants, strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8))


def test_bitcast_to_narrower_adds_minor_dimension() -> None:
    """f32 -> u8 gives (..., 4), least significant byte first, as numpy's view on little-endian."""
    rng = np.random.default_rng(1)
    f32 = SPECIAL_F32_BITS.view(np.float32).reshape(2, 7)
    u64 = rng.integers(0, 2**63, (2, 2), dtype=np.int64).view(np.uint64)
    b = xs.XlaBuilder("narrower")
    p32 = ops.Parameter(b, 0, S(np.float32, (2, 7)))
    pu = ops.Parameter(b, 1, S(np.uint64, (2, 2)))
    scalar = ops.Constant(b, np.float32(1.0))
    outs = [
        ops.BitcastConvertType(p32, np.uint8),
        ops.BitcastConvertType(pu, np.uint32),
        ops.BitcastConvertType(scalar, np.int16),
    ]
    assert [o.dims for o in outs] == [(2, 7, 4), (2, 2, 2), (2,)]
    got = run(b.build(ops.Tuple(b, outs)), f32, u64)
    wants = [
        f32.view(np.uint8).reshape(2, 7, 4),
        u64.view(np.uint32).reshape(2, 2, 2),
        np.float32(1.0).reshape(1).view(np.int16),
    ]
    for g, w in zip(got, wants, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8))
    np.testing.assert_array_equal(got[0][0, 2], [0, 0, 128, 63])  # 1.0f = 0x3f800000


def test_bitcast_to_wider_removes_minor_dimension() -> None:
    rng = np.random.default_rng(2)
    u8 = rng.integers(0, 256, (3, 4), dtype=np.uint8)
    s16 = rng.integers(-(2**15), 2**15, (2, 5, 2), dtype=np.int16)
    b = xs.XlaBuilder("wider")
    p8 = ops.Parameter(b, 0, S(np.uint8, (3, 4)))
    p16 = ops.Parameter(b, 1, S(np.int16, (2, 5, 2)))
    outs = [
        ops.BitcastConvertType(p8, np.float32),
        ops.BitcastConvertType(p16, np.int32),
    ]
    assert [o.dims for o in outs] == [(3,), (2, 5)]
    got = run(b.build(ops.Tuple(b, outs)), u8, s16)
    wants: list[np.ndarray[Any, Any]] = [u8.view(np.float32).reshape(3), s16.view(np.int32).reshape(2, 5)]
    for g, w in zip(got, wants, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8))


def test_bitcast_of_f64_keeps_every_bit() -> None:
    """f64 <-> s64/u64 (same width), f64 -> u16/f32 (narrower), f32 -> f64 (wider): every bit, as
    numpy's view (random bit patterns: NaN payloads and denormals among them). A TPU keeps f64 values
    as pairs of f32 (its X64 rewriter), so not every bit pattern survives there: skipped by the row."""
    skip_where_device_defines_otherwise("tpu-f64-emulated")
    rng = np.random.default_rng(0)
    f64 = rng.integers(0, 2**63, 6, dtype=np.int64).view(np.float64).reshape(3, 2)
    g64 = rng.standard_normal((3,))
    f32 = rng.standard_normal((4, 2)).astype(np.float32)
    b = xs.XlaBuilder("f64_bits")
    p64 = ops.Parameter(b, 0, S(np.float64, (3, 2)))
    q64 = ops.Parameter(b, 1, S(np.float64, (3,)))
    pf = ops.Parameter(b, 2, S(np.float32, (4, 2)))
    outs = [
        ops.BitcastConvertType(p64, np.int64),
        ops.BitcastConvertType(p64, xs.PrimitiveType.U64),
        ops.BitcastConvertType(q64, np.uint16),
        ops.BitcastConvertType(q64, np.float32),
        ops.BitcastConvertType(pf, np.float64),
    ]
    assert [o.dims for o in outs] == [(3, 2), (3, 2), (3, 4), (3, 2), (4,)]
    got = run(b.build(ops.Tuple(b, outs)), f64, g64, f32)
    wants: list[np.ndarray[Any, Any]] = [f64.view(np.int64), f64.view(np.uint64), g64.view(np.uint16).reshape(3, 4),
                                         g64.view(np.float32).reshape(3, 2), f32.view(np.float64).reshape(4)]
    for g, w in zip(got, wants, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8))


def test_bitcast_identity_and_empty() -> None:
    b = xs.XlaBuilder("identity")
    p = ops.Parameter(b, 0, S(np.float32, (0, 3)))
    assert ops.BitcastConvertType(p, np.float32) is p
    e = ops.BitcastConvertType(p, np.uint8)
    w = ops.BitcastConvertType(e, np.float32)
    assert e.dims == (0, 3, 4) and w.dims == (0, 3)
    got = run(b.build(ops.Tuple(b, [e, w])), np.zeros((0, 3), np.float32))
    assert got[0].shape == (0, 3, 4) and got[1].shape == (0, 3)


def test_bitcast_errors() -> None:
    b = xs.XlaBuilder("errors")
    u8 = ops.Parameter(b, 0, S(np.uint8, (3, 2)))
    f32 = ops.Parameter(b, 1, S(np.float32, (3,)))
    c64 = ops.Parameter(b, 2, S(np.complex64, (3,)))
    pred = ops.Parameter(b, 3, S(np.bool_, (4,)))
    s4 = ops.Constant(b, np.zeros((2,), ml_dtypes.int4))
    scalar = ops.Constant(b, np.uint8(1))
    with raises(ShapeError, "BitcastConvertType", "last dimension", "4"):
        ops.BitcastConvertType(u8, np.float32)
    with raises(ShapeError, "BitcastConvertType", "last dimension", "2"):
        ops.BitcastConvertType(scalar, np.uint16)
    with raises(DTypeError, "BitcastConvertType", "complex", "c64"):
        ops.BitcastConvertType(c64, np.uint64)
    with raises(DTypeError, "BitcastConvertType", "complex", "f32"):
        ops.BitcastConvertType(f32, np.complex64)
    with raises(DTypeError, "BitcastConvertType", "complex"):
        ops.BitcastConvertType(c64, np.float32)
    with raises(DTypeError, "BitcastConvertType", "pred", "same width"):
        ops.BitcastConvertType(pred, np.uint8)
    with raises(DTypeError, "BitcastConvertType", "s4", "same width"):
        ops.BitcastConvertType(s4, np.int8)
    with raises(DTypeError, "BitcastConvertType", "new_element_type"):
        ops.BitcastConvertType(f32, "float37")
    with raises(DTypeError, "BitcastConvertType", "operand"):
        ops.BitcastConvertType([1.0], np.uint8)  # type: ignore[arg-type]


# -- ReducePrecision -------------------------------------------------------------------------------

def round_mantissa(x: np.ndarray[Any, Any], bits: int) -> np.ndarray[Any, Any]:
    """Round f32/f64 values to ``bits`` mantissa bits at their own exponent (ties to even), by
    integer arithmetic on the bit patterns (a carry moves into the exponent; inf stays inf)."""
    ut, total = (np.uint32, 23) if x.dtype == np.float32 else (np.uint64, 52)
    u = x.view(ut).astype(np.uint64)
    drop = np.uint64(total - bits)
    if drop == 0:
        return np.array(x, copy=True)
    lsb = (u >> drop) & np.uint64(1)
    r = ((u + (np.uint64(1) << (drop - np.uint64(1))) - np.uint64(1) + lsb) >> drop) << drop
    out: np.ndarray[Any, Any] = r.astype(ut).view(x.dtype)
    return out


def reduce_ref(x: np.ndarray[Any, Any], exponent_bits: int, mantissa_bits: int) -> np.ndarray[Any, Any]:
    """XLA's ReducePrecision: round the mantissa; if the exponent range shrinks, results above the
    format's largest finite value become +-inf and results below its smallest normal +-0."""
    r = round_mantissa(x, mantissa_bits)
    src_exponent_bits = 8 if x.dtype == np.float32 else 11
    if exponent_bits < src_exponent_bits:
        emax = 2 ** (exponent_bits - 1) - 1
        big = (2 - 2.0**-mantissa_bits) * 2.0**emax
        with np.errstate(invalid="ignore"):
            r = np.where(np.abs(r) > big, np.copysign(np.inf, x), r)
            r = np.where(np.abs(r) < 2.0 ** (1 - emax), np.copysign(0.0, x), r)
    return r.astype(x.dtype)


def test_reduce_precision_against_reference() -> None:
    """(8, 7), (5, 10), (4, 3), (8, 23) on f32 and (8, 23), (11, 52), (5, 2) on f64, on random bit
    patterns: overflow to inf, ties to even, NaN, denormals, values below a narrowed exponent
    range (flushed). (8, 7) is exactly bfloat16 rounding and, for f16-normal results, (5, 10) is
    float16 rounding."""
    rng = np.random.default_rng(3)
    x32 = np.concatenate([
        rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32).view(np.float32),
        (rng.standard_normal(2000) * 2.0 ** rng.integers(-30, 30, 2000)).astype(np.float32),
        SPECIAL_F32_BITS.view(np.float32),
        np.array([1 + 2**-8, 1 + 3 * 2**-8, 65520.0, 65519.0, 2**-14, 2**-15, 240.0, 248.0], np.float32),
    ])
    assert x32.dtype == np.float32
    x64 = np.concatenate([
        rng.standard_normal(3000) * 2.0 ** rng.integers(-140, 140, 3000),
        rng.integers(0, 2**63, 3000, dtype=np.int64).view(np.float64),
        [3.5e38, 1e-46, np.nan, -0.0, np.inf],
    ])
    cfg32 = [(8, 7), (5, 10), (4, 3), (8, 23)]
    cfg64 = [(8, 23), (11, 52), (5, 2)]
    b = xs.XlaBuilder("reduce_precision")
    p32 = ops.Parameter(b, 0, S(np.float32, x32.shape))
    p64 = ops.Parameter(b, 1, S(np.float64, x64.shape))
    outs = [ops.ReducePrecision(p32, e, m) for e, m in cfg32] + [ops.ReducePrecision(p64, e, m) for e, m in cfg64]
    assert all(o.shape == p.shape for o, p in zip(outs, [p32] * 4 + [p64] * 3, strict=True))
    got = run(b.build(ops.Tuple(b, outs)), x32, x64)
    for g, x, (e, m) in zip(got, [x32] * 4 + [x64] * 3, cfg32 + cfg64, strict=True):
        nan = np.isnan(x)
        assert g.dtype == x.dtype
        assert np.isnan(g[nan]).all(), (e, m)  # NaN stays NaN (its payload is implementation-defined)
        want = reduce_ref(x, e, m)
        np.testing.assert_array_equal(g[~nan], want[~nan], err_msg=f"{x.dtype} {(e, m)}")
        np.testing.assert_array_equal(np.signbit(g[~nan]), np.signbit(want[~nan]), err_msg=f"{(e, m)}")
    ok = ~np.isnan(x32)
    with np.errstate(over="ignore", invalid="ignore"):
        np.testing.assert_array_equal(got[0][ok], x32.astype(ml_dtypes.bfloat16).astype(np.float32)[ok])
        h = x32.astype(np.float16)
    normal = ok & (np.abs(h) >= 2.0**-14)
    np.testing.assert_array_equal(got[1][normal], h.astype(np.float32)[normal])
    assert got[4][x64 == 3.5e38][0] == np.inf  # beyond f32's range
    assert got[4][x64 == 1e-46][0] == 0.0  # below f32's smallest normal


def test_reduce_precision_narrow_inputs() -> None:
    """f16 and bf16 operands (built as constants) behave as computed in f32: (5, 2) on f16 is
    float8_e5m2 rounding with results below 2^-14 flushed (the exponent is narrower than f32's),
    (8, 3) on bf16 rounds the mantissa and keeps bf16 denormals."""
    xs16 = np.array([1.0, 1.125, 1.375, 57344.0, 61440.0, -0.0, 3e-5, 2.0**-14, 100.0, 1.5e-5], np.float16)
    xbf = np.array([1.0, 1.0625, 1.1875, 3.0e38, -2.5, 1e-39, -3e-39], ml_dtypes.bfloat16)
    b = xs.XlaBuilder("narrow")
    r16 = ops.ReducePrecision(ops.Constant(b, xs16), 5, 2)
    rbf = ops.ReducePrecision(ops.Constant(b, xbf), 8, 3)
    assert r16.dtype == np.float16 and rbf.dtype == ml_dtypes.bfloat16
    got16, gotbf = run(b.build(ops.Tuple(b, [r16, ops.BitcastConvertType(rbf, np.uint16)])))
    with np.errstate(over="ignore"):
        want16 = xs16.astype(ml_dtypes.float8_e5m2).astype(np.float16)
    want16[np.abs(want16) < 2.0**-14] = 0.0
    np.testing.assert_array_equal(got16, want16)
    np.testing.assert_array_equal(got16, reduce_ref(xs16.astype(np.float32), 5, 2).astype(np.float16))
    assert got16[-1] == 0.0 and got16[6] == 0.0  # f16 denormals 1.5e-5 and 3e-5 are flushed
    np.testing.assert_array_equal(gotbf.view(ml_dtypes.bfloat16).astype(np.float32),
                                  round_mantissa(xbf.astype(np.float32), 3))


def test_reduce_precision_errors() -> None:
    b = xs.XlaBuilder("errors")
    f = ops.Parameter(b, 0, S(np.float32, (3,)))
    i = ops.Parameter(b, 1, S(np.int32, (3,)))
    c = ops.Parameter(b, 2, S(np.complex64, (3,)))
    with raises(DTypeError, "ReducePrecision", "operand 'operand'", "s32"):
        ops.ReducePrecision(i, 8, 7)
    with raises(DTypeError, "ReducePrecision", "operand 'operand'", "c64"):
        ops.ReducePrecision(c, 8, 7)
    with raises(ShapeError, "ReducePrecision", "exponent_bits", ">= 1"):
        ops.ReducePrecision(f, 0, 7)
    with raises(ShapeError, "ReducePrecision", "mantissa_bits", ">= 0"):
        ops.ReducePrecision(f, 8, -1)
    with raises(DTypeError, "ReducePrecision", "exponent_bits", "int"):
        ops.ReducePrecision(f, 8.0, 7)  # type: ignore[arg-type]
    with raises(DTypeError, "ReducePrecision", "mantissa_bits", "int"):
        ops.ReducePrecision(f, 8, True)


# ------------------------------------------------------------------------------ pure shape rules


def test_convert_and_reduce_precision_rules_without_builder() -> None:
    from xlasdk.ops.convert import convert_shape, reduce_precision_shape
    from xlasdk.types import PrimitiveType as P

    s = xs.Shape.array_shape(np.dtype(np.float32), (2, 3))
    assert convert_shape("ConvertElementType", s, P.S8) == xs.Shape.array_shape(np.dtype(np.int8), (2, 3))
    assert convert_shape("ConvertElementType", s, P.F32) is s
    c = xs.Shape.array_shape(np.dtype(np.complex64), (4,))
    assert convert_shape("ConvertElementType", c, P.C128) == xs.Shape.array_shape(np.dtype(np.complex128), (4,))
    with raises(DTypeError, "ConvertElementType: cannot convert complex c64[4] to f32; use Real/Imag first"):
        convert_shape("ConvertElementType", c, P.F32)
    with raises(ShapeError, "ConvertElementType", "c128[1152921504606846976]"):
        convert_shape("ConvertElementType", xs.Shape.array_shape(np.dtype(np.int8), (2**60,)), P.C128)
    assert reduce_precision_shape("ReducePrecision", s, 8, 7) is s
    with raises(ShapeError, "ReducePrecision: exponent_bits must be >= 1, got 0"):
        reduce_precision_shape("ReducePrecision", s, 0, 7)
    with raises(ShapeError, "ReducePrecision: mantissa_bits must be >= 0, got -1"):
        reduce_precision_shape("ReducePrecision", s, 5, -1)
    with raises(DTypeError, "ReducePrecision: operand 'operand' must be floating-point, got s32[1]"):
        reduce_precision_shape("ReducePrecision", xs.Shape.array_shape(np.dtype(np.int32), (1,)), 5, 2)


def test_convert_element_type_is_exported_from_convert() -> None:
    from xlasdk.ops import convert, elementwise

    assert ops.ConvertElementType is convert.ConvertElementType
    assert "ConvertElementType" in convert.__all__ and "ConvertElementType" not in elementwise.__all__


# -- ConvertElementType ----------------------------------------------------------------------------

def same_bits(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any]) -> None:
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.tobytes() == want.tobytes(), (got, want)


FLOAT_TO_INT_X = np.array(
    [NAN, INF, -INF, 3e9, -3e9, 2.9, -2.9, 2147483520.0, 2147483648.0, -2147483648.0, -0.5], np.float32
)
FLOAT_TO_INT_WANT = {
    np.int32: [0, 2147483647, -2147483648, 2147483647, -2147483648, 2, -2, 2147483520, 2147483647, -2147483648, 0],
    np.uint32: [0, 4294967295, 0, 3000000000, 0, 2, 0, 2147483520, 2147483648, 0, 0],
    np.int8: [0, 127, -128, 127, -128, 2, -2, 127, 127, -128, 0],
    np.uint8: [0, 255, 0, 255, 0, 2, 0, 255, 255, 0, 0],
}
FLOAT_TO_S64_WANT = [0, I64_MAX, I64_MIN, 3000000000, -3000000000, 2, -2, 2147483520, 2147483648, -2147483648, 0]


@PARAM_AND_CONST
def test_float_to_int_gives_zero_for_nan_and_saturates(const: bool) -> None:
    """Case C-04 (shared/cases/cases.md): float to integer conversion gives 0 for NaN, saturates infinities and
    out-of-range values to the type's bounds, and truncates toward zero (8- and 32-bit targets: the
    same on a TPU v5e, measured)."""
    b = xs.XlaBuilder("c04")
    (X,) = case_inputs(b, [FLOAT_TO_INT_X], const)
    res = run_case(b, [ops.ConvertElementType(X, t) for t in FLOAT_TO_INT_WANT], [FLOAT_TO_INT_X], const)
    for got, (t, want) in zip(res, FLOAT_TO_INT_WANT.items(), strict=True):
        assert got.dtype == t
        np.testing.assert_array_equal(got, np.array(want, t), err_msg=str(t))


@PARAM_AND_CONST
def test_float_to_s64_gives_zero_for_nan_and_saturates(const: bool) -> None:
    """The same to s64, which a TPU defines otherwise beyond s64's range (its row says how)."""
    skip_where_device_defines_otherwise("tpu-float-to-int-nan")
    b = xs.XlaBuilder("c04_s64")
    (X,) = case_inputs(b, [FLOAT_TO_INT_X], const)
    (got,) = run_case(b, [ops.ConvertElementType(X, np.int64)], [FLOAT_TO_INT_X], const)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.array(FLOAT_TO_S64_WANT, np.int64))


@PARAM_AND_CONST
def test_convert_to_pred_narrow_int_wraps_and_int_to_float_rounds(const: bool) -> None:
    """Case C-04 (shared/cases/cases.md): conversion to pred is `!= 0` (NaN is true, -0.0 false), a narrowing integer
    conversion wraps around, and integer to float rounds to nearest even."""
    f = np.array([0.0, -0.0, NAN, 0.1], np.float32)
    i = np.array([0, 2, -1], np.int32)
    w = np.array([256, 300, -1, 255], np.int32)
    g = np.array([16777217, 2147483647], np.int32)
    b = xs.XlaBuilder("c04b")
    F, I, W, G = case_inputs(b, [f, i, w, g], const)
    outs = [ops.ConvertElementType(F, np.bool_), ops.ConvertElementType(I, np.bool_),
            ops.ConvertElementType(W, np.uint8),
            ops.ConvertElementType(G, np.float32)]
    r = run_case(b, outs, [f, i, w, g], const)
    np.testing.assert_array_equal(r[0], [False, False, True, True])
    np.testing.assert_array_equal(r[1], [False, True, True])
    np.testing.assert_array_equal(r[2], np.array([0, 44, 255, 255], np.uint8))
    np.testing.assert_array_equal(r[3], np.array([16777216.0, 2147483648.0], np.float32))


F32_TO_BF16_BITS = [
    (0x44E48000, 0x44E4), (np.float32(1006.0).view(np.uint32), 0x447C), (np.float32(1329.0).view(np.uint32), 0x44A6),
    (np.float32(128.5).view(np.uint32), 0x4300), (0x3F808000, 0x3F80), (0x3F818000, 0x3F82), (0x3F808001, 0x3F81),
    (0x7F7FFFFF, 0x7F80), (0x7FC00001, 0x7FC0), (0x7F800001, 0x7FC0), (0xFF800000, 0xFF80), (0x00000001, 0x0000),
    (0x80000000, 0x8000),
]


@PARAM_AND_CONST
def test_f32_to_bf16_rounds_to_nearest_even(const: bool) -> None:
    """Case C-10 (shared/cases/cases.md): f32 to bf16 rounds to nearest even (1828.0 is 1824.0, the largest finite
    f32 is infinity, the smallest subnormal is 0), quiets NaNs and keeps infinities and signed zeros, bit for bit."""
    x = np.array([int(a) for a, _ in F32_TO_BF16_BITS], np.uint32).view(np.float32)
    want = np.array([w for _, w in F32_TO_BF16_BITS], np.uint16)
    assert x[0] == 1828.0 and float(want.view(ml_dtypes.bfloat16)[0]) == 1824.0
    b = xs.XlaBuilder("c10")
    (X,) = case_inputs(b, [x], const)
    (r,) = run_case(b, [ops.ConvertElementType(X, "bfloat16")], [x], const)
    assert r.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(r.view(np.uint16), want, err_msg=str([hex(v) for v in r.view(np.uint16)]))


FP8_X = np.array([448, 464, 465, 1000, -1000, INF, -INF, NAN, 2**-9, 2**-10, 0.0029296875, -0.0], np.float32)
FP8_E4M3FN_BITS = [0x7E, 0x7E, 0x7F, 0x7F, 0xFF, 0x7F, 0xFF, 0x7F, 0x01, 0x00, 0x02, 0x80]
FP8_E5M2_BITS = [0x5F, 0x5F, 0x5F, 0x64, 0xE4, 0x7C, 0xFC, 0x7E, 0x18, 0x14, 0x1A, 0x80]


@PARAM_AND_CONST
def test_f32_to_fp8_rounds_to_nearest_even_and_e4m3fn_overflows_to_nan(const: bool) -> None:
    """Case C-11 (shared/cases/cases.md): f32 to f8e4m3fn and f8e5m2 rounds to nearest even, into the subnormals too;
    f8e4m3fn, which has no infinity, takes out-of-range values and infinities to NaN; bit for bit (on a
    device whose row says so, -inf's NaN may have either sign)."""
    b = xs.XlaBuilder("c11")
    (X,) = case_inputs(b, [FP8_X], const)
    e4, e5 = run_case(b, [ops.ConvertElementType(X, ml_dtypes.float8_e4m3fn), ops.ConvertElementType(X, "float8_e5m2")],
                      [FP8_X], const)
    assert e4.dtype == ml_dtypes.float8_e4m3fn and e5.dtype == ml_dtypes.float8_e5m2
    want = np.array(FP8_E4M3FN_BITS, np.uint8)
    if device_defines_otherwise("tpu-fp8-nan-sign"):  # a NaN of either sign (a v5e: -inf gives 0x7f, and
        nans = np.isin(want, [0x7F, 0xFF])            # -1000 too when XLA folds the constant)
        assert np.isin(e4.view(np.uint8)[nans], [0x7F, 0xFF]).all(), e4.view(np.uint8)
        want[nans] = e4.view(np.uint8)[nans]
    np.testing.assert_array_equal(e4.view(np.uint8), want)
    np.testing.assert_array_equal(e5.view(np.uint8), np.array(FP8_E5M2_BITS, np.uint8))


def test_every_e4m3fn_bit_pattern_to_f32_matches_ml_dtypes() -> None:
    """Case C-11 (shared/cases/cases.md): every one of the 256 f8e4m3fn bit patterns converts to the f32 that
    ml_dtypes gives (NaN payloads aside)."""
    allb = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    b = xs.XlaBuilder("c11all")
    (r,) = run(b.build(ops.ConvertElementType(ops.Constant(b, allb), np.float32)))
    want = allb.astype(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(r), nan)
    np.testing.assert_array_equal(np.signbit(r), np.signbit(want))  # NaN payloads may differ, signs may not
    same_bits(r[~nan], want[~nan])


@pytest.mark.parametrize("layout", ["transposed", "strided", "fortran", "reversed"])
def test_bitcast_of_a_non_contiguous_host_array(layout: str) -> None:
    """A host array that is not C-contiguous goes to the device by value (its logical elements, row-major),
    and a bitcast to a narrower type reads those elements' bytes (issue 43: the TPU run of the bitcast tests
    failed in numpy's ``view`` of a device output that was not C-contiguous; the outputs of tests.helpers.run
    are C-contiguous now, and the inputs were checked here)."""
    a = np.arange(24, dtype=np.float32).reshape(4, 6) * np.float32(1.5) - 7
    x = {"transposed": a.T, "strided": a[:, ::2], "fortran": np.asfortranarray(a), "reversed": a[::-1]}[layout]
    assert not x.flags.c_contiguous
    b = xs.XlaBuilder("bitcast_host")
    p = ops.Parameter(b, 0, S(np.float32, x.shape))
    (got,) = run(b.build(ops.BitcastConvertType(p, np.uint8)), x)
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(got, np.ascontiguousarray(x).view(np.uint8).reshape(*x.shape, 4))
