"""Igamma, Igammac, RegularizedIncompleteBeta and BesselI0e against scipy.special, at their edge
values, for f16/bf16/f32/f64, with scalar broadcasting, and their errors."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
import scipy.special as sp

import xlasdk as xs
from tests.helpers import assert_device_close, raises, run, skip_where_device_defines_otherwise
from xlasdk import ops
from xlasdk.errors import DTypeError, ShapeError

S = xs.Shape.array_shape
INF, NAN = np.inf, np.nan


def grid(dtype: Any) -> tuple[np.ndarray[Any, Any], ...]:
    """Random arguments over the functions' useful ranges (a, b log-spaced in [0.05, 60])."""
    rng = np.random.default_rng(0)
    n = 3000
    a = np.exp(rng.uniform(np.log(0.05), np.log(60.0), n))
    b = np.exp(rng.uniform(np.log(0.05), np.log(60.0), n))
    x = a * np.exp(rng.uniform(-3, 1.5, n))  # around a, where P moves from 0 to 1
    u = rng.uniform(0, 1, n)
    z = rng.uniform(-60, 60, n) * rng.uniform(0, 1, n) ** 2
    return tuple(v.astype(dtype) for v in (a, b, x, u, z))


# (rtol, atol) per dtype: f32 loses digits in exp(a log x - x - lgamma(a)) and lgamma sums.
TOL = {np.float32: (2e-4, 2e-6), np.float64: (1e-10, 1e-13)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_functions_against_scipy(dtype: Any) -> None:
    if dtype == np.float64:
        skip_where_device_defines_otherwise("tpu-f64-emulated")
    a, b, x, u, z = grid(dtype)
    bld = xs.XlaBuilder("special")
    pa, pb, px, pu, pz = (ops.Parameter(bld, i, S(dtype, a.shape)) for i in range(5))
    outs = [ops.Igamma(pa, px), ops.Igammac(pa, px), ops.RegularizedIncompleteBeta(pa, pb, pu), ops.BesselI0e(pz)]
    assert all(o.dtype == dtype and o.dims == a.shape for o in outs)
    got_p, got_q, got_i, got_e = run(bld.build(ops.Tuple(bld, outs)), a, b, x, u, z)
    a64, b64, x64, u64, z64 = (v.astype(np.float64) for v in (a, b, x, u, z))
    rtol, atol = TOL[dtype]
    want_p, want_q = sp.gammainc(a64, x64), sp.gammaincc(a64, x64)
    assert_device_close(got_p, want_p, rtol=rtol, atol=atol)
    assert_device_close(got_q, want_q, rtol=rtol, atol=atol)
    assert_device_close(got_p.astype(np.float64) + got_q, 1.0, atol=50 * atol)
    assert_device_close(got_i, sp.betainc(a64, b64, u64), rtol=rtol * 2, atol=atol * 5)
    assert_device_close(got_e, sp.i0e(z64), rtol=rtol / 20, atol=0)
    # The small tails keep their relative accuracy where scipy's value is not tiny
    mid = (want_p > 1e-3) & (want_p < 1 - 1e-3)
    assert mid.sum() > 1000


def test_special_edges_match_scipy() -> None:
    """x = 0, x = inf, a = 0, a = inf, negative and NaN arguments; x = 0, 1 and out of [0, 1]
    for the beta function; 0, +-inf, NaN, huge arguments for I0e."""
    skip_where_device_defines_otherwise("tpu-f64-emulated")  # f64 values
    ga = np.array([0, 0, 0, 1, -1, 1, INF, INF, 1, NAN, 1, 2.5, 1e-30, 3, 200, 0.5], np.float64)
    gx = np.array([0, 1, INF, 0, 1, -1, 1, INF, INF, 1, NAN, 1e-40, 1e-30, 1e4, 150, 1e-300], np.float64)
    ba = np.array([0, 1, 1, 1, 2, 2, INF, 1, 0, 2, 2, -1, 3, 1e-3, 1e3, 1, INF, INF, 0], np.float64)
    bb = np.array([1, 0, 1, 1, 3, 3, 1, 1, 0, 3, 3, 2, 1e-3, 4, 1e3, INF, INF, 0, INF], np.float64)
    bx = np.array([0.5, 0.5, 0, 1, -0.1, 1.1, 0.5, NAN, 0.5, 0, 1, 0.5, 0.999, 1e-3, 0.5, 0.5, 0.5, 0.5, 0.5])
    z = np.array([0, -0.0, 1, -1, 8, -8, 8.000001, INF, -INF, NAN, 1e-30, 700, 1e300], np.float64)
    b = xs.XlaBuilder("edges")
    p = [ops.Parameter(b, i, S(np.float64, v.shape)) for i, v in enumerate((ga, gx, ba, bb, bx, z))]
    outs = [ops.Igamma(p[0], p[1]), ops.Igammac(p[0], p[1]), ops.RegularizedIncompleteBeta(p[2], p[3], p[4]),
            ops.BesselI0e(p[5])]
    got = run(b.build(ops.Tuple(b, outs)), ga, gx, ba, bb, bx, z)
    assert_device_close(got[0], sp.gammainc(ga, gx), rtol=1e-10, atol=1e-300, equal_nan=True)
    # Q = 1 - P where x < max(1, a): absolute accuracy there (Q(1e-30, 1e-30) = 6.9e-29 gives 0)
    assert_device_close(got[1], sp.gammaincc(ga, gx), rtol=1e-10, atol=1e-14, equal_nan=True)
    assert np.all((got[1][~np.isnan(got[1])] >= 0) & (got[1][~np.isnan(got[1])] <= 1))
    assert_device_close(got[2], sp.betainc(ba, bb, bx), rtol=1e-9, atol=1e-300, equal_nan=True)
    assert_device_close(got[3], sp.i0e(z), rtol=1e-14, atol=0, equal_nan=True)
    np.testing.assert_array_equal(got[0][:4], [NAN, 1.0, 1.0, 0.0])  # hand values: P(0,0), P(0,1), P(0,inf), P(1,0)
    assert got[3][0] == 1.0 and got[3][7] == 0.0 and got[3][8] == 0.0


def test_half_precision_and_scalar_broadcast() -> None:
    """f16 and bf16 operands are computed in f32 and rounded back; Python numbers and rank-0
    operands broadcast against arrays."""
    a = np.array([0.5, 1.0, 2.0, 5.0, 10.0], np.float32)
    x = np.array([0.1, 1.0, 3.0, 4.0, 12.0], np.float32)
    b = xs.XlaBuilder("narrow")
    a16 = ops.Constant(b, a.astype(np.float16))
    xbf = ops.Constant(b, x.astype(ml_dtypes.bfloat16))
    pa = ops.Parameter(b, 0, S(np.float32, (5,)))
    px = ops.Parameter(b, 1, S(np.float32, (5,)))
    outs = [
        ops.Igamma(a16, ops.Constant(b, x.astype(np.float16))),
        ops.ConvertElementType(ops.BesselI0e(xbf), np.float32),
        ops.Igamma(2.0, px),
        ops.Igammac(pa, ops.Constant(b, np.float32(3.0))),
        ops.RegularizedIncompleteBeta(pa, 2.0, 0.25),
        ops.BesselI0e(ops.Constant(b, np.float16(-3.0))),
    ]
    assert outs[0].dtype == np.float16 and outs[5].dtype == np.float16 and outs[5].dims == ()
    assert outs[1].dtype == np.float32 and outs[2].dims == (5,) and outs[4].dims == (5,)
    got = run(b.build(ops.Tuple(b, outs)), a, x)
    a64, x64 = a.astype(np.float64), x.astype(np.float64)
    assert_device_close(got[0], sp.gammainc(a64, x64), rtol=2e-3, atol=1e-3)
    assert_device_close(got[1], sp.i0e(x.astype(ml_dtypes.bfloat16).astype(np.float64)), rtol=1e-2)
    assert_device_close(got[2], sp.gammainc(2.0, x64), rtol=1e-4, atol=1e-6)
    assert_device_close(got[3], sp.gammaincc(a64, 3.0), rtol=1e-4, atol=1e-6)
    assert_device_close(got[4], sp.betainc(a64, 2.0, 0.25), rtol=1e-4, atol=1e-6)
    assert_device_close(got[5], sp.i0e(-3.0), rtol=1e-3)


def test_special_errors() -> None:
    b = xs.XlaBuilder("errors")
    f = ops.Parameter(b, 0, S(np.float32, (3,)))
    g = ops.Parameter(b, 1, S(np.float32, (4,)))
    d = ops.Parameter(b, 2, S(np.float64, (3,)))
    i = ops.Parameter(b, 3, S(np.int32, (3,)))
    c = ops.Parameter(b, 4, S(np.complex64, (3,)))
    with raises(DTypeError, "Igamma", "operand 'a'", "s32"):
        ops.Igamma(i, f)
    with raises(DTypeError, "Igammac", "operand 'x'", "f64"):
        ops.Igammac(f, d)
    with raises(ShapeError, "Igamma", "operand 'x'", "f32[4]"):
        ops.Igamma(f, g)
    with raises(DTypeError, "RegularizedIncompleteBeta", "operand 'x'", "s32"):
        ops.RegularizedIncompleteBeta(f, f, i)
    with raises(ShapeError, "RegularizedIncompleteBeta", "operand 'b'", "[3]"):
        ops.RegularizedIncompleteBeta(f, g, f)
    with raises(DTypeError, "BesselI0e", "operand 'x'", "c64"):
        ops.BesselI0e(c)
    with raises(DTypeError, "BesselI0e", "operand 'x'", "XlaOp"):
        ops.BesselI0e(1.0)
    with raises(DTypeError, "Igamma", "operand 'a'", "XlaOp"):
        ops.Igamma(1.0, 2.0)
    with raises(DTypeError, "Igamma", "operand 'x'", "XlaOp"):
        ops.Igamma(f, "x")
    other = xs.XlaBuilder("other")
    h = ops.Parameter(other, 0, S(np.float32, (3,)))
    with raises(ShapeError, "Igamma", "operand 'x'", "builder"):
        ops.Igamma(f, h)


# ------------------------------------------------------------------------------ pure shape rules


def test_special_rules_without_builder() -> None:
    from xlasdk.ops.special import special_operand, special_shape, special_type
    from xlasdk.types import PrimitiveType as P

    def sh(dt: Any, dims: tuple[int, ...]) -> xs.Shape:
        return xs.Shape.array_shape(np.dtype(dt), dims)

    assert special_type("Igamma", "a", sh(ml_dtypes.bfloat16, (2,))) is P.F32
    assert special_type("Igamma", "a", sh(np.float64, ())) is P.F64
    with raises(DTypeError, "Igamma: operand 'x' must be f16, bf16, f32 or f64, got s32[2]"):
        special_type("Igamma", "x", sh(np.int32, (2,)))
    special_operand("Igamma", "x", sh(np.float16, (3,)), P.F16)
    with raises(DTypeError, "Igamma: operand 'x' has element type f64[3], expected f32 like the others"):
        special_operand("Igamma", "x", sh(np.float64, (3,)), P.F32)
    f = np.float32
    assert special_shape("Igamma", [("a", sh(f, ())), ("x", sh(f, (2, 3)))]) == (2, 3)
    assert special_shape("Igamma", [("a", sh(f, ())), ("x", sh(f, ()))]) == ()
    with raises(ShapeError, "RegularizedIncompleteBeta: operand 'x' has shape f32[3,2], expected [2, 3]"):
        special_shape("RegularizedIncompleteBeta", [("a", sh(f, (2, 3))), ("b", sh(f, ())), ("x", sh(f, (3, 2)))])
