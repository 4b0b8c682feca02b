"""Tests of xlasdk/ops/elementwise.py: every op of the UNARY and BINARY tables against numpy/scipy
over the element types it allows, broadcasting, Python operators, comparisons, Select, Clamp,
ConvertElementType and result accuracy.

Values go in as parameters of a wide "carrier" type (f64, s64, u64, c128, pred) and are converted
to the type under test inside the computation, so that bf16/fp8/int4 inputs need no host
transfer; the inputs are rounded to the tested type in numpy first, so the conversion is exact and
the references see the very values XLA sees. All ops of one element type share one computation.
"""

from __future__ import annotations

import functools
import math
import os
import subprocess
import sys
import warnings
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import scipy.special as sp

import xlasdk as xs
from tests.helpers import (
    PARAM_AND_CONST,
    assert_device_close,
    case_inputs,
    param,
    raises,
    run,
    run_case,
    skip_where_device_defines_otherwise,
)
from xlasdk import ops
from xlasdk import types as xtypes
from xlasdk.errors import DTypeError
from xlasdk.ops import elementwise as ew

P = xs.PrimitiveType
F32 = xs.Shape.array_shape
NAN = np.nan
I32_MIN = -(2**31)
I64_MIN = -(2**63)


# ------------------------------------------------------------------------------ element types

FLOAT_TYPES = [P.F16, P.BF16, P.F32, P.F64, P.F8E4M3FN]  # F8E5M2 etc.: type rules only (compile time)
COMPLEX_TYPES = [P.C64, P.C128]
SINT_TYPES = [P.S4, P.S8, P.S16, P.S32, P.S64]
UINT_TYPES = [P.U4, P.U8, P.U16, P.U32, P.U64]
TESTED = FLOAT_TYPES + COMPLEX_TYPES + SINT_TYPES + UINT_TYPES + [P.PRED]


def dt(et: xs.PrimitiveType) -> np.dtype[Any]:
    return xs.etype_to_dtype(et)


def carrier(et: xs.PrimitiveType) -> Any:
    if et in xtypes.FLOATS:
        return np.float64
    if et in xtypes.COMPLEX:
        return np.complex128
    if et in xtypes.SIGNED_INTS:
        return np.int64
    if et in xtypes.UNSIGNED_INTS:
        return np.uint64
    return np.bool_


def width(et: xs.PrimitiveType) -> int:
    return {P.S4: 4, P.U4: 4, P.S2: 2, P.U2: 2}.get(et, dt(et).itemsize * 8)


def wrap(v: np.ndarray[Any, Any], et: xs.PrimitiveType) -> np.ndarray[Any, Any]:
    """Python-int results wrapped to the integer type ``et`` (as XLA's two's complement does)."""
    w = width(et)
    out = []
    for x in v.tolist():
        x = int(x) & ((1 << w) - 1)
        if et in xtypes.SIGNED_INTS and x >= 1 << (w - 1):
            x -= 1 << w
        out.append(x)
    return np.array(out, dtype=object)


def int_range(et: xs.PrimitiveType) -> tuple[int, int]:
    info = ml_dtypes.iinfo(dt(et))  # type: ignore[no-untyped-call]
    return int(info.min), int(info.max)


def rounded(values: Any, et: xs.PrimitiveType) -> np.ndarray[Any, Any]:
    """``values`` rounded to ``et`` and returned in the carrier type (exactly representable)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.asarray(values).astype(dt(et)).astype(carrier(et))


def build_and_run(et: xs.PrimitiveType, inputs: list[list[np.ndarray[Any, Any]]],
                  fns: list[Callable[..., xs.XlaOp]]) -> list[np.ndarray[Any, Any]]:
    """One computation: ``fns[i](*converted inputs[i])`` for every i; returns the outputs."""
    b = xs.XlaBuilder(f"ew_{et.name}")
    outs, args, n = [], [], 0
    for ins, fn in zip(inputs, fns, strict=True):
        converted = []
        for a in ins:
            p = ops.Parameter(b, n, xs.shape_from_pyval(a))
            n += 1
            args.append(a)
            converted.append(ops.ConvertElementType(p, et))
        outs.append(fn(*converted))
    return run(b.build(outs), *args)


def tol(et: xs.PrimitiveType, scale: float = 1.0) -> dict[str, float]:
    """rtol/atol for an inexact result of type ``et`` (``scale`` loosens for long expansions)."""
    base = {
        P.F16: 2e-3, P.BF16: 1.6e-2, P.F32: 2e-6, P.F64: 1e-13, P.C64: 2e-6, P.C128: 1e-13,
        P.F8E4M3FN: 0.13, P.F8E5M2: 0.26,
    }[et]
    return {"rtol": base * scale, "atol": base * scale * 1e-2}


def assert_close(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any], et: xs.PrimitiveType, scale: float = 1.0,
                 what: str = "") -> None:
    g = got.astype(np.complex128 if et in xtypes.COMPLEX else np.float64)
    w = np.asarray(want, dtype=g.dtype)
    # the result type cannot hold more than its range: references saturate like the result
    t = tol(et, scale)
    # on the CPU the tolerance above; on another device its error model judges the op that made ``got``
    assert_device_close(g, w, rtol=t["rtol"], atol=t["atol"], equal_nan=True, err_msg=what, of=got)


# ------------------------------------------------------------------------------ unary table

def _rng(*key: object) -> np.random.Generator:
    """Random values that depend only on ``key`` (the case drawing them), never on which tests ran
    before: one module-wide generator made each case's inputs depend on the order of the suite."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _float_domain(kind: str, key: object = "") -> np.ndarray[Any, Any]:
    r = _rng("float", kind, key)
    spec = np.array([0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 1.0, -1.0])
    domains = {
        "any": np.concatenate([spec, [np.inf, -np.inf, np.nan], r.uniform(-8, 8, 20)]),
        "real": np.concatenate([spec, r.uniform(-6, 6, 20)]),
        "exp": r.uniform(-5, 5, 24),
        "pos": np.concatenate([[1.0, 2.0, 0.5], r.uniform(0.05, 9, 21)]),
        "gt-1": r.uniform(-0.9, 8, 24),
        "unit": np.concatenate([[0.0, 0.5, -0.5], r.uniform(-0.95, 0.95, 21)]),
        "ge1": r.uniform(1.0, 9, 24),
        "tan": r.uniform(-1.4, 1.4, 24),
        "erf": r.uniform(-3, 3, 24),
        "gamma": np.concatenate([r.uniform(0.1, 8, 20), [-0.5, -1.5, -2.25, -3.75]]),
        "digamma": np.concatenate([r.uniform(0.1, 8, 20), [-0.5, -1.5, -2.25, -3.75]]),
        "bessel": r.uniform(-12, 12, 24),
    }
    return domains[kind]


def _complex_domain(kind: str, key: object = "") -> np.ndarray[Any, Any]:
    r = _rng("complex", kind, key)
    z = r.uniform(-2, 2, 16) + 1j * r.uniform(-2, 2, 16)
    if kind == "unit":  # away from the branch cuts of acos/asin/atanh (|re| >= 1 on the real axis)
        z = r.uniform(-0.8, 0.8, 16) + 1j * r.uniform(-0.8, 0.8, 16)
    if kind in ("pos", "gt-1", "ge1"):  # right half plane: away from the cuts of log, sqrt, acosh
        z = r.uniform(0.2, 3, 16) + 1j * r.uniform(-2, 2, 16)
    return np.concatenate([z, [1 + 0j, 1j, -0.5j]])


def _logistic(x: Any) -> Any:
    return 1.0 / (1.0 + np.exp(-x))


def _round_afz(x: Any) -> Any:
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def _csign(x: Any) -> Any:
    if np.iscomplexobj(x):
        a = np.abs(x)
        return np.where(a == 0, 0, x / np.where(a == 0, 1, a))
    return np.sign(x)


def _popcount(x: np.ndarray[Any, Any], et: xs.PrimitiveType) -> np.ndarray[Any, Any]:
    mask = (1 << width(et)) - 1
    return wrap(np.array([bin(int(v) & mask).count("1") for v in x.tolist()], dtype=object), et)


def _clz(x: np.ndarray[Any, Any], et: xs.PrimitiveType) -> np.ndarray[Any, Any]:
    w = width(et)
    mask = (1 << w) - 1
    return wrap(np.array([w - (int(v) & mask).bit_length() for v in x.tolist()], dtype=object), et)


# name -> (reference on float64/complex128 values, float domain, complex domain, tolerance scale)
UNARY_REF: dict[str, tuple[Callable[[Any], Any], str, str, float]] = {
    "Abs": (np.abs, "any", "any", 1),
    "Neg": (np.negative, "any", "any", 1),
    "Exp": (np.exp, "exp", "any", 4),
    "Exp2": (np.exp2, "exp", "any", 4),
    "Log2": (np.log2, "pos", "pos", 4),
    "Expm1": (np.expm1, "exp", "any", 4),
    "Log": (np.log, "pos", "pos", 4),
    "Log1p": (np.log1p, "gt-1", "pos", 4),
    "Sqrt": (np.sqrt, "pos", "pos", 2),
    "Rsqrt": (lambda x: 1 / np.sqrt(x), "pos", "pos", 4),
    "Cbrt": (np.cbrt, "real", "", 4),
    "Tanh": (np.tanh, "real", "any", 4),
    "Logistic": (_logistic, "real", "any", 4),
    "Sin": (np.sin, "real", "any", 4),
    "Cos": (np.cos, "real", "any", 4),
    "Tan": (np.tan, "tan", "any", 8),
    "Floor": (np.floor, "any", "", 0),
    "Ceil": (np.ceil, "any", "", 0),
    "Round": (_round_afz, "any", "", 0),
    "RoundNearestEven": (np.rint, "any", "", 0),
    "Sign": (_csign, "any", "any", 1),
    "IsFinite": (np.isfinite, "any", "", 0),
    "Real": (np.real, "real", "any", 0),
    "Imag": (np.imag, "real", "any", 0),
    "Conj": (np.conj, "", "any", 0),
    "Erf": (sp.erf, "erf", "", 8),
    "Erfc": (sp.erfc, "erf", "", 16),
    "ErfInv": (sp.erfinv, "unit", "", 16),
    "Lgamma": (sp.gammaln, "gamma", "", 64),
    "Digamma": (sp.digamma, "digamma", "", 64),
    "Acos": (np.arccos, "unit", "unit", 8),
    "Asin": (np.arcsin, "unit", "unit", 8),
    "Atan": (np.arctan, "real", "unit", 8),
    "Acosh": (np.arccosh, "ge1", "ge1", 8),
    "Asinh": (np.arcsinh, "real", "unit", 8),
    "Atanh": (np.arctanh, "unit", "unit", 8),
    "Cosh": (np.cosh, "exp", "any", 8),
    "Sinh": (np.sinh, "exp", "any", 8),
    "Square": (np.square, "real", "any", 2),
    "BesselI1e": (sp.i1e, "bessel", "", 16),
}

INT_UNARY_REF: dict[str, Callable[[np.ndarray[Any, Any], xs.PrimitiveType], np.ndarray[Any, Any]]] = {
    "Abs": lambda x, et: wrap(np.abs(x.astype(object)), et),
    "Neg": lambda x, et: wrap(-x.astype(object), et),
    "Sign": lambda x, et: wrap(np.sign(x), et),
    "Not": lambda x, et: wrap(~x.astype(object), et) if et is not P.PRED else ~x,
    "PopulationCount": _popcount,
    "Clz": _clz,
    "Square": lambda x, et: wrap(x.astype(object) * x.astype(object), et),
}


def test_unary_reference_table_covers_every_op() -> None:
    covered = set(UNARY_REF) | set(INT_UNARY_REF)
    assert covered == set(ew.UNARY), set(ew.UNARY) ^ covered
    for name in ew.UNARY:
        assert getattr(ops, name) is getattr(ew, name)


def _int_sample(et: xs.PrimitiveType) -> np.ndarray[Any, Any]:
    if et is P.PRED:
        return np.array([True, False])
    lo, hi = int_range(et)
    vals = {lo, hi, 0, 1, 2, 3, lo + 1, hi - 1, (lo + hi) // 2}
    if lo:
        vals |= {-1, -2, -3}
    draw = _rng("int", et.name).integers(lo, hi, 12, endpoint=True, dtype=np.int64 if hi < 2**63 else np.uint64)
    vals |= {int(v) for v in draw}
    return np.array(sorted(vals), dtype=carrier(et))


def _unary_inputs(name: str, et: xs.PrimitiveType) -> np.ndarray[Any, Any]:
    if et in xtypes.FLOATS:
        return rounded(_float_domain(UNARY_REF[name][1], (name, et.name)), et)
    if et in xtypes.COMPLEX:
        return rounded(_complex_domain(UNARY_REF[name][2], (name, et.name)), et)
    return _int_sample(et)


def _unary_cases() -> list[tuple[str, xs.PrimitiveType]]:
    return [(n, et) for n, u in ew.UNARY.items() for et in TESTED if et in u.allowed]


@functools.cache
def unary_results(et: xs.PrimitiveType) -> dict[str, tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]:
    names = [n for n, e in _unary_cases() if e is et]
    inputs = [[_unary_inputs(n, et)] for n in names]
    outs = build_and_run(et, inputs, [getattr(ops, n) for n in names])
    return {n: (i[0], o) for n, i, o in zip(names, inputs, outs, strict=True)}


@pytest.mark.parametrize(("name", "et"), _unary_cases(), ids=[f"{n}-{e.name}" for n, e in _unary_cases()])
def test_unary_values(name: str, et: xs.PrimitiveType) -> None:
    if et in (P.F64, P.C128):
        skip_where_device_defines_otherwise("tpu-f64-emulated")
    if name == "PopulationCount" and et in (P.S4, P.S8, P.S16):
        skip_where_device_defines_otherwise("tpu-popcnt-narrow-signed")
    x, got = unary_results(et)[name]
    u = ew.UNARY[name]
    assert got.dtype == dt(u.result(et)), (got.dtype, u.result(et))
    assert got.shape == x.shape
    if et in xtypes.INTS or et is P.PRED:
        want = INT_UNARY_REF[name](x, et)
        np.testing.assert_array_equal(got.astype(object) if et is not P.PRED else got, want)
        return
    ref, _, _, scale = UNARY_REF[name]
    with np.errstate(all="ignore"):
        want = ref(x)
    if name == "IsFinite":
        np.testing.assert_array_equal(got, want)
        return
    res_et = u.result(et)
    if scale == 0:  # exact ops: the result is the reference rounded to the result type
        want_r = np.asarray(want).astype(dt(res_et)).astype(carrier(res_et))
        np.testing.assert_array_equal(got.astype(carrier(res_et)), want_r)
        if name in ("Floor", "Ceil", "Round", "RoundNearestEven", "Neg"):  # signed zeros survive
            assert np.array_equal(np.signbit(got.astype(np.float64)), np.signbit(want_r.real)), (x, got)
        return
    if res_et in (P.F8E4M3FN, P.F8E5M2, P.BF16, P.F16):
        # the result is rounded to a narrow type: compare to the rounded reference within one ulp
        want = rounded(want, res_et)
        scale = 1.0 if res_et in (P.F8E4M3FN, P.F8E5M2) else min(scale, 4)
    assert_close(got, want, res_et, scale, what=f"{name} on {x}")


def test_round_half_away_from_zero_vs_nearest_even() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.0, 3.5, 2.4999998], np.float32)
    b = xs.XlaBuilder("round")
    p = ops.Parameter(b, 0, xs.shape_from_pyval(x))
    r, e = run(b.build([ops.Round(p), ops.RoundNearestEven(p)]), x)
    np.testing.assert_array_equal(r, [1, 2, 3, -1, -2, -3, 0, -0.0, 4, 2])
    np.testing.assert_array_equal(e, [0, 2, 2, -0.0, -2, -2, 0, -0.0, 4, 2])
    assert np.signbit(r[7]) and np.signbit(e[3]) and np.signbit(e[7])


def test_reciprocal() -> None:
    x = np.array([2.0, -4.0, 0.0, -0.0, np.inf], np.float32)
    z = np.array([1 + 1j, 2j], np.complex64)
    b = xs.XlaBuilder("recip")
    r = ops.Reciprocal(ops.Parameter(b, 0, xs.shape_from_pyval(x)))
    rz = ops.Reciprocal(ops.Parameter(b, 1, xs.shape_from_pyval(z)))
    o, oz = run(b.build([r, rz]), x, z)
    np.testing.assert_array_equal(o, [0.5, -0.25, np.inf, -np.inf, 0.0])
    np.testing.assert_allclose(oz, 1 / z, rtol=1e-6)
    i = ops.Constant(b, np.int32(2))
    with raises(xs.DTypeError, "Reciprocal", "operand 'operand' must be floating-point or complex", "s32[]"):
        ops.Reciprocal(i)


@pytest.mark.parametrize("name", sorted(ew.UNARY))
def test_unary_rejects_other_types(name: str) -> None:
    u = ew.UNARY[name]
    b = xs.XlaBuilder("bad")
    fn = getattr(ops, name)
    for et in sorted(xtypes.ARRAY_TYPES):
        x = ops.Parameter(b, len(b.parameters()), xs.Shape.array_shape(et, [2]))
        if et in u.allowed:
            assert fn(x).dims == (2,)
        else:
            with raises(xs.DTypeError, f"{name}: operand 'operand' must be") as raised:
                fn(x)
            msg = str(raised.value)
            assert f"got {x.shape}" in msg
    tup = ops.Parameter(b, len(b.parameters()), xs.Shape.tuple_shape([xs.Shape.array_shape("f32", [2])]))
    with raises(xs.ShapeError, name, "operand 'operand' must be an array, got (f32[2])"):
        fn(tup)
    with raises(xs.DTypeError, name, "operand 'operand' must be an XlaOp, got float32"):
        fn(np.float32(1))


# ------------------------------------------------------------------------------ result accuracy


@pytest.mark.parametrize("name", sorted(n for n, u in ew.UNARY.items() if u.accuracy))
def test_result_accuracy_in_hlo(name: str) -> None:
    fn = getattr(ops, name)
    b = xs.XlaBuilder("acc")
    x = ops.Parameter(b, 0, xs.Shape.array_shape("f32", [4]))
    hi = fn(x, result_accuracy=xs.ResultAccuracy(mode="HIGHEST"))
    tol_ = fn(x, result_accuracy=xs.ResultAccuracy(atol=1e-5, ulps=2))
    dflt = fn(x, result_accuracy=xs.ResultAccuracy(mode=xs.ResultAccuracy.Mode.DEFAULT))
    comp = b.build([hi, tol_, dflt])
    hlo = comp.as_hlo_text()
    mlir = comp.as_stablehlo_text()
    assert "result_accuracy_mode<HIGHEST>" in mlir and "ulps = 2" in mlir
    assert mlir.count("result_accuracy = ") == 2  # DEFAULT is elided
    if name != "Erf":  # HLO's erf has no accuracy field (documented)
        assert "result_accuracy={mode=highest}" in hlo
        assert "result_accuracy={tolerance={atol=1e-05,rtol=0,ulps=2}}" in hlo
        assert hlo.count("result_accuracy=") == 2
    xin = np.array([0.25, 0.5, 1.0, 1.25], np.float32)
    want = {
        "Exp": np.exp, "Expm1": np.expm1, "Log": np.log, "Log1p": np.log1p, "Sin": np.sin, "Cos": np.cos,
        "Tan": np.tan, "Tanh": np.tanh, "Sqrt": np.sqrt, "Rsqrt": lambda v: 1 / np.sqrt(v), "Cbrt": np.cbrt,
        "Logistic": _logistic, "Erf": sp.erf,
    }[name](xin.astype(np.float64))
    for out in run(comp, xin):
        assert_device_close(out, want, rtol=1e-5)


def test_result_accuracy_errors() -> None:
    b = xs.XlaBuilder("acc_err")
    x = ops.Parameter(b, 0, xs.Shape.array_shape("f32", [4]))
    ra = xs.ResultAccuracy(mode="HIGHEST")
    with raises(xs.ShapeError, "Abs: result_accuracy is not supported by this op"):
        ops.Abs(x, result_accuracy=ra)
    with raises(xs.ShapeError, "Floor", "result_accuracy"):
        ops.Floor(x, result_accuracy=ra)
    with raises(xs.DTypeError, "Exp", "result_accuracy must be an xs.ResultAccuracy, got str"):
        ops.Exp(x, result_accuracy="HIGHEST")


# ------------------------------------------------------------------------------ binary table


def _div_trunc(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _rem_trunc(a: int, b: int) -> int:
    return a - _div_trunc(a, b) * b


def _shift_ref(name: str, x: np.ndarray[Any, Any], s: np.ndarray[Any, Any],
               et: xs.PrimitiveType) -> np.ndarray[Any, Any]:
    w = width(et)
    mask = (1 << w) - 1
    out = []
    for a, n in zip(x.tolist(), s.tolist(), strict=True):
        a, n = int(a), int(n)
        if name == "ShiftLeft":
            out.append(a << n)
        elif name == "ShiftRightLogical":
            out.append((a & mask) >> n)
        else:  # arithmetic: on the signed reading of the bits
            v = a & mask
            if v >= 1 << (w - 1):
                v -= 1 << w
            out.append(v >> n)
    return wrap(np.array(out, dtype=object), et)


def _int_pow(a: int, n: int) -> int:
    if n < 0:
        return 1 if a == 1 else ((-1 if n % 2 else 1) if a == -1 else 0)
    return int(int(a) ** int(n))


def _make_complex(re: np.ndarray[Any, Any], im: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    out = np.empty(re.shape, np.complex128)
    out.real, out.imag = re, im
    return out


def _catan2(y: Any, x: Any) -> Any:
    if np.iscomplexobj(y):
        return -1j * np.log((x + 1j * y) / np.sqrt(x * x + y * y))
    return np.arctan2(y, x)


# name -> (float reference, integer reference on Python ints (None: not allowed), lhs domain, rhs domain, tol scale)
BINARY_REF: dict[str, tuple[Callable[[Any, Any], Any], Callable[[int, int], int] | None, str, str, float]] = {
    "Add": (np.add, lambda a, b: a + b, "any", "any", 1),
    "Sub": (np.subtract, lambda a, b: a - b, "any", "any", 1),
    "Mul": (np.multiply, lambda a, b: a * b, "any", "any", 1),
    "Div": (np.divide, _div_trunc, "any", "nonzero", 2),
    "Rem": (np.fmod, _rem_trunc, "any", "nonzero", 1),
    "Max": (np.maximum, max, "any", "any", 0),
    "Min": (np.minimum, min, "any", "any", 0),
    "Pow": (np.power, _int_pow, "pos", "exponent", 16),
    "Atan2": (_catan2, None, "any", "any", 4),
    "Complex": (lambda a, b: _make_complex(a, b), None, "any", "any", 0),
    "And": (np.bitwise_and, lambda a, b: a & b, "any", "any", 0),
    "Or": (np.bitwise_or, lambda a, b: a | b, "any", "any", 0),
    "Xor": (np.bitwise_xor, lambda a, b: a ^ b, "any", "any", 0),
    "ShiftLeft": (np.left_shift, None, "any", "shift", 0),
    "ShiftRightArithmetic": (np.right_shift, None, "any", "shift", 0),
    "ShiftRightLogical": (np.right_shift, None, "any", "shift", 0),
    "NextAfter": (np.nextafter, None, "any", "any", 0),
    "Polygamma": (sp.polygamma, None, "order", "pos", 256),
    "Zeta": (sp.zeta, None, "zeta_s", "pos", 64),
}


def test_binary_reference_table_covers_every_op() -> None:
    assert set(BINARY_REF) == set(ew.BINARY)
    for name in ew.BINARY:
        assert getattr(ops, name) is getattr(ew, name)


def _binary_float_domain(kind: str, n: int, key: object = "") -> np.ndarray[Any, Any]:
    r = _rng("binary-float", kind, n, key)
    if kind == "any":
        return np.concatenate([[0.0, -0.0, 1.5, -2.5, np.inf, np.nan, 3.0, -0.0], r.uniform(-8, 8, n - 8)])
    if kind == "nonzero":
        rand = r.uniform(0.5, 6, n - 8) * r.choice([-1, 1], n - 8)
        return np.concatenate([[2.0, -3.0, 0.5, 1.0, 7.0, -1.0, np.inf, 2.0], rand])
    if kind == "pos":
        return r.uniform(0.5, 4, n)
    if kind == "exponent":
        return r.uniform(-2, 3, n)
    if kind == "order":
        return r.integers(0, 4, n).astype(np.float64)
    if kind == "zeta_s":
        return r.uniform(1.5, 6, n)
    raise AssertionError(kind)


def _binary_int_domain(kind: str, et: xs.PrimitiveType, n: int, key: object = "") -> np.ndarray[Any, Any]:
    if et is P.PRED:
        return np.array([True, True, False, False] * (n // 4))
    lo, hi = int_range(et)
    r = _rng("binary-int", kind, et.name, n, key)
    if kind == "shift":
        return r.integers(0, width(et), n).astype(carrier(et))
    if kind == "exponent":
        return r.integers(0, 5 if width(et) > 8 else 3, n).astype(carrier(et))
    base = r.integers(lo, hi, n, endpoint=True, dtype=np.int64 if hi < 2**63 else np.uint64).astype(carrier(et))
    base[:4] = [lo, hi, 0, 1][:4]
    if kind == "nonzero":
        base[base == 0] = 1
        if lo:  # avoid INT_MIN / -1 (covered by case C-03)
            base[base == -1] = 2
        return base
    if kind == "pos" and "Pow":  # small bases so that powers stay interesting before wrapping
        return r.integers(max(lo, -3), min(hi, 5), n, endpoint=True).astype(carrier(et))
    return base


def _binary_inputs(name: str, et: xs.PrimitiveType) -> list[np.ndarray[Any, Any]]:
    _, _, ld, rd, _ = BINARY_REF[name]
    n = 16
    if et in xtypes.FLOATS:
        return [rounded(_binary_float_domain(ld, n, (name, et.name, "lhs")), et),
                rounded(_binary_float_domain(rd, n, (name, et.name, "rhs")), et)]
    if et in xtypes.COMPLEX:
        r = _rng("binary-complex", name, et.name)
        a = r.uniform(-3, 3, n) + 1j * r.uniform(-3, 3, n)
        c = r.uniform(-3, 3, n) + 1j * r.uniform(-3, 3, n)
        if name == "Pow":
            a = r.uniform(0.3, 2, n) + 1j * r.uniform(-1, 1, n)
            c = r.uniform(-1, 2, n) + 1j * r.uniform(-1, 1, n)
        return [rounded(a, et), rounded(c, et)]
    return [_binary_int_domain(ld if name == "Pow" else "any", et, n, (name, "lhs")),
            _binary_int_domain(rd, et, n, (name, "rhs"))]


def _binary_cases() -> list[tuple[str, xs.PrimitiveType]]:
    return [(n, et) for n, bo in ew.BINARY.items() for et in TESTED if et in bo.allowed]


@functools.cache
def binary_results(et: xs.PrimitiveType) -> dict[str, tuple[list[np.ndarray[Any, Any]], np.ndarray[Any, Any]]]:
    names = [n for n, e in _binary_cases() if e is et]
    inputs = [_binary_inputs(n, et) for n in names]
    outs = build_and_run(et, inputs, [getattr(ops, n) for n in names])
    return {n: (i, o) for n, i, o in zip(names, inputs, outs, strict=True)}


@pytest.mark.parametrize(("name", "et"), _binary_cases(), ids=[f"{n}-{e.name}" for n, e in _binary_cases()])
def test_binary_values(name: str, et: xs.PrimitiveType) -> None:
    if et in (P.F64, P.C128):
        skip_where_device_defines_otherwise("tpu-f64-emulated")
    if name == "Rem" and et in (P.F16, P.BF16, P.F32):
        skip_where_device_defines_otherwise("tpu-float-remainder")
    (x, y), got = binary_results(et)[name]
    bo = ew.BINARY[name]
    res_et = bo.result(et)
    assert got.dtype == dt(res_et)
    fref, iref, _, _, scale = BINARY_REF[name]
    if et is P.PRED:
        want = {"Add": x | y, "Mul": x & y, "Max": x | y, "Min": x & y, "And": x & y, "Or": x | y, "Xor": x ^ y}[name]
        np.testing.assert_array_equal(got, want)
        return
    if et in xtypes.INTS:
        if name.startswith("Shift"):
            want = _shift_ref(name, x, y, et)
        else:
            assert iref is not None
            pairs = zip(x.tolist(), y.tolist(), strict=True)
            want = wrap(np.array([iref(int(a), int(c)) for a, c in pairs], dtype=object), et)
        np.testing.assert_array_equal(got.astype(object), want, err_msg=f"{name} {x} {y}")
        return
    with np.errstate(all="ignore"):
        if name == "NextAfter":  # numpy's nextafter in the tested type itself
            want = np.nextafter(x.astype(dt(et)), y.astype(dt(et))).astype(np.float64)
        else:
            want = fref(x, y)
    if scale == 0:
        want_r = np.asarray(want).astype(dt(res_et)).astype(carrier(res_et))
        np.testing.assert_array_equal(got.astype(carrier(res_et)), want_r, err_msg=f"{name} {x} {y}")
        if name in ("Max", "Min"):  # signed zeros: Min(-0, +0) = -0, Max = +0
            assert np.array_equal(np.signbit(got.astype(np.float64)), np.signbit(want_r)), (x, y, got)
        return
    if res_et in (P.F8E4M3FN, P.F8E5M2, P.BF16, P.F16):
        want = rounded(want, res_et)
        scale = 1.0 if res_et in (P.F8E4M3FN, P.F8E5M2) else min(scale, 4)
    assert_close(got, want, res_et, scale, what=f"{name} {x} {y}")


@pytest.mark.parametrize("name", sorted(ew.BINARY))
def test_binary_rejects_other_types(name: str) -> None:
    bo = ew.BINARY[name]
    b = xs.XlaBuilder("bad")
    fn = getattr(ops, name)
    for et in sorted(xtypes.ARRAY_TYPES):
        x = ops.Parameter(b, len(b.parameters()), xs.Shape.array_shape(et, [2]))
        if et in bo.allowed:
            assert fn(x, x).shape == xs.Shape.array_shape(bo.result(et), [2])
        else:
            with raises(xs.DTypeError, f"{name}: operand 'lhs' must be", str(x.shape)):
                fn(x, x)


def test_pow_integer_negative_exponents() -> None:
    # XLA:CPU: x ** -n is 0, except 1 ** -n = 1 and (-1) ** -n = +-1; the constant-folded form agrees
    base = np.array([2, 1, -1, -1, 0, 3, -2, 0, 5, -1, 7], np.int32)
    expo = np.array([-1, -5, -3, -2, -1, 0, -4, 0, 2, -2147483648, 1], np.int32)
    want = [0, 1, -1, 1, 0, 1, 0, 1, 25, 1, 7]
    b = xs.XlaBuilder("pow")
    p = ops.Pow(ops.Parameter(b, 0, xs.shape_from_pyval(base)), ops.Parameter(b, 1, xs.shape_from_pyval(expo)))
    c = ops.Pow(ops.Constant(b, base), ops.Constant(b, expo))
    s8 = ops.Pow(ops.Constant(b, base.astype(np.int8)), ops.Constant(b, np.clip(expo, -128, 127).astype(np.int8)))
    s64 = ops.Pow(ops.Constant(b, base.astype(np.int64)), ops.Constant(b, expo.astype(np.int64)))
    u = ops.Pow(ops.Constant(b, np.array([2, 3, 0, 255], np.uint8)), ops.Constant(b, np.array([7, 2, 0, 2], np.uint8)))
    outs = run(b.build([p, c, s8, s64, u]), base, expo)
    for o in outs[:4]:
        np.testing.assert_array_equal(o, want)
    np.testing.assert_array_equal(outs[4], [128, 9, 1, 1])


def test_int_bitwise_of_narrowing_converts_compiles() -> None:
    # XLA:CPU segfaults compiling and/or of a narrowing signed convert; And/Or avoid that form
    x = np.array([-3, 200, -70000, 5], np.int64)
    y = np.array([-1, -2, 12345, -9], np.int64)
    b = xs.XlaBuilder("narrow")
    px, py = ops.Parameter(b, 0, xs.shape_from_pyval(x)), ops.Parameter(b, 1, xs.shape_from_pyval(y))
    outs = []
    for t in (np.int8, np.int16, np.int32):
        cx, cy = ops.ConvertElementType(px, t), ops.ConvertElementType(py, t)
        outs += [ops.And(cx, cy), ops.Or(cx, ops.Constant(b, np.array([1, 2, 3, 4], t))), cx & cy, cx | cy]
    res = run(b.build(outs), x, y)
    for k, t in enumerate((np.int8, np.int16, np.int32)):
        xt, yt = x.astype(t), y.astype(t)
        wants = [xt & yt, xt | np.array([1, 2, 3, 4], t), xt & yt, xt | yt]
        for got, want in zip(res[4 * k: 4 * k + 4], wants, strict=True):
            assert got.dtype == t
            np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------------------ broadcasting


def test_broadcasting_rules() -> None:
    a23 = np.arange(6, dtype=np.float32).reshape(2, 3)
    r3 = np.array([10, 20, 30], np.float32)
    c2 = np.array([100, 200], np.float32)
    c21 = c2.reshape(2, 1)
    r13 = r3.reshape(1, 3)
    b = xs.XlaBuilder("bcast")
    A = ops.Parameter(b, 0, xs.shape_from_pyval(a23))
    R = ops.Parameter(b, 1, xs.shape_from_pyval(r3))
    C = ops.Parameter(b, 2, xs.shape_from_pyval(c2))
    C21 = ops.Parameter(b, 3, xs.shape_from_pyval(c21))
    R13 = ops.Parameter(b, 4, xs.shape_from_pyval(r13))
    S = ops.Constant(b, np.float32(0.5))
    cases = [
        (ops.Add(A, S), a23 + 0.5),
        (ops.Sub(S, A), 0.5 - a23),
        (ops.Add(A, R, broadcast_dimensions=[1]), a23 + r3),
        (ops.Sub(C, A, broadcast_dimensions=(0,)), c2[:, None] - a23),
        (ops.Mul(A, C21), a23 * c21),  # degenerate size-1 dims
        (ops.Add(C21, R13), c21 + r13),  # both degenerate: [2,1] + [1,3] -> [2,3]
        (ops.Max(R13, A), np.maximum(r13, a23)),
        (ops.Add(A, A, broadcast_dimensions=[0, 1]), a23 + a23),  # identity mapping at equal rank
        (ops.Add(C21, A, broadcast_dimensions=[0, 1]), c21 + a23),
    ]
    assert [c[0].dims for c in cases] == [(2, 3)] * len(cases)
    outs = run(b.build([c[0] for c in cases]), a23, r3, c2, c21, r13)
    for out, (_, want) in zip(outs, cases, strict=True):
        np.testing.assert_array_equal(out, want)


def test_broadcast_dimensions_into_rank3() -> None:
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    v = np.array([1, 2, 3], np.int32)
    m = np.arange(8, dtype=np.int32).reshape(2, 4)
    b = xs.XlaBuilder("bcast3")
    X, V, M = (ops.Parameter(b, i, xs.shape_from_pyval(a)) for i, a in enumerate((x, v, m)))
    outs = [ops.Mul(X, V, [1]), ops.Sub(M, X, [0, 2]), ops.Add(X, ops.Reshape(V, [1, 3, 1]))]
    o1, o2, o3 = run(b.build(outs), x, v, m)
    np.testing.assert_array_equal(o1, x * v[None, :, None])
    np.testing.assert_array_equal(o2, m[:, None, :] - x)
    np.testing.assert_array_equal(o3, x + v[None, :, None])


def test_broadcasting_errors() -> None:
    b = xs.XlaBuilder("bcast_err")
    A = ops.Parameter(b, 0, xs.Shape.array_shape("f32", [2, 3]))
    B32 = ops.Parameter(b, 1, xs.Shape.array_shape("f32", [3, 2]))
    V3 = ops.Parameter(b, 2, xs.Shape.array_shape("f32", [3]))
    V2 = ops.Parameter(b, 3, xs.Shape.array_shape("f32", [2]))
    I = ops.Parameter(b, 4, xs.Shape.array_shape("s32", [2, 3]))
    other = ops.Parameter(xs.XlaBuilder("other"), 0, xs.Shape.array_shape("f32", [2, 3]))
    with raises(xs.ShapeError, "Add: operand 'rhs' has shape f32[3,2], incompatible with 'lhs' f32[2,3]"):
        ops.Add(A, B32)
    with raises(xs.ShapeError, "Add: operand 'rhs' has shape f32[3], expected f32[2,3]", "broadcast_dimensions"):
        ops.Add(A, V3)
    with raises(xs.ShapeError, "Sub: operand 'rhs' dimension 0 has size 3, but it maps to dimension 0 of size 2"):
        ops.Sub(A, V3, [0])
    with raises(xs.ShapeError, "Mul: broadcast_dimensions has 2 entries, expected 1", "'rhs'"):
        ops.Mul(A, V2, [0, 1])
    with raises(xs.ShapeError, "Mul: broadcast_dimensions [2] must be strictly increasing"):
        ops.Mul(V2, A, [2])
    with raises(xs.ShapeError, "Max: broadcast_dimensions [1, 0] given for operands of equal rank 2"):
        ops.Max(A, A, [1, 0])
    with raises(xs.DTypeError, "Add: operand 'rhs' has element type s32", "expected f32 like 'lhs'"):
        ops.Add(A, I)
    with raises(xs.ShapeError, "Add: operand 'rhs' belongs to builder 'other'", "'lhs' belongs to 'bcast_err'"):
        ops.Add(A, other)
    with raises(xs.DTypeError, "Add: operand 'rhs' must be an XlaOp (or a scalar beside one), got str"):
        ops.Add(A, "x")
    with raises(xs.DTypeError, "Add: operand 'lhs' must be an XlaOp", "got list"):
        ops.Add([1.0], A)
    with raises(xs.DTypeError, "Add: operand 'lhs' must be an XlaOp"):
        ops.Add(1, 2)
    tup = ops.Parameter(b, 5, xs.Shape.tuple_shape([xs.Shape.array_shape("f32", [2, 3])]))
    with raises(xs.ShapeError, "Add: operand 'rhs' must be an array, got (f32[2,3])"):
        ops.Add(A, tup)


# ------------------------------------------------------------------------------ Python operators


def test_python_operators() -> None:
    x = np.array([1.5, -2.0, 3.0, 0.5], np.float32)
    y = np.array([0.5, 4.0, -2.0, 2.0], np.float32)
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    n = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = xs.XlaBuilder("pyops")
    X, Y = ops.Parameter(b, 0, xs.shape_from_pyval(x)), ops.Parameter(b, 1, xs.shape_from_pyval(y))
    M, N = ops.Parameter(b, 2, xs.shape_from_pyval(m)), ops.Parameter(b, 3, xs.shape_from_pyval(n))
    exprs = [X + Y, X - Y, X * Y, X / Y, X % Y, X ** Y.__abs__(), M @ N, -X, abs(X),
             X + 1, 1 + X, X - 2.5, 2.5 - X, X * 2, 3 * X, X / 4, 1.0 / X, X % 1.0, 7.0 % Y, X ** 2, 2 ** X,
             X + np.float32(1), np.float32(1) - X]
    outs = run(b.build(exprs), x, y, m, n)
    wants = [x + y, x - y, x * y, x / y, np.fmod(x, y), x ** np.abs(y), m @ n, -x, np.abs(x),
             x + 1, 1 + x, x - 2.5, 2.5 - x, x * 2, 3 * x, x / 4, 1.0 / x, np.fmod(x, 1.0), np.fmod(7.0, y),
             x ** 2, 2 ** x,
             x + 1, 1 - x]
    for k, (o, w) in enumerate(zip(outs, wants, strict=True)):
        assert o.dtype == np.float32, k
        assert_device_close(o, w.astype(np.float32), rtol=1e-6, err_msg=str(k))  # a TPU's pow: its own bound


def test_python_operators_int_and_bitwise() -> None:
    x = np.array([7, -7, 12, 5], np.int32)
    y = np.array([2, 3, -5, 9], np.int32)
    b = xs.XlaBuilder("pyint")
    X, Y = ops.Parameter(b, 0, xs.shape_from_pyval(x)), ops.Parameter(b, 1, xs.shape_from_pyval(y))
    exprs = [X / Y, X % Y, X & Y, X | Y, X ^ Y, ~X, X + 1, 10 - X, X * -2, X ** 2, 3 & X, -X, abs(X)]
    outs = run(b.build(exprs), x, y)
    wants = [[3, -2, -2, 0], [1, -1, 2, 5], x & y, x | y, x ^ y, ~x, x + 1, 10 - x, x * -2, x ** 2, 3 & x, -x,
             np.abs(x)]
    for k, (o, w) in enumerate(zip(outs, wants, strict=True)):
        assert o.dtype == np.int32, k
        np.testing.assert_array_equal(o, w, err_msg=str(k))


def test_python_scalar_coercion_errors() -> None:
    b = xs.XlaBuilder("coerce")
    i = ops.Parameter(b, 0, xs.Shape.array_shape("s32", [2]))
    u8 = ops.Parameter(b, 1, xs.Shape.array_shape("u8", [2]))
    f = ops.Parameter(b, 2, xs.Shape.array_shape("f32", [2]))
    with raises(xs.DTypeError, "Add: scalar 1.5 cannot be represented as s32"):
        i + 1.5
    with raises(xs.DTypeError, "Mul: scalar 2.5 cannot be represented as s32"):
        2.5 * i
    with raises(xs.DTypeError, "Sub: scalar 256 cannot be represented as u8"):
        u8 - 256
    with raises(xs.DTypeError, "Add: scalar -1 cannot be represented as u8"):
        u8 + -1
    with raises(xs.DTypeError, "Mul: scalar 1j cannot be represented as f32"):
        f * 1j
    with raises(xs.DTypeError, "Add: operand 'rhs' must be an XlaOp (or a scalar beside one), got str"):
        f + "a"
    with pytest.raises(TypeError, match="XlaOp has no truth value"):
        bool(f)


# ------------------------------------------------------------------------------ comparisons


def test_comparisons_ieee_nan_and_signed_zero() -> None:
    a = np.array([1.0, np.nan, np.nan, -0.0, 0.0, -np.inf, 2.0], np.float32)
    c = np.array([2.0, 1.0, np.nan, 0.0, -0.0, -np.inf, 2.0], np.float32)
    b = xs.XlaBuilder("cmp")
    A, C = ops.Parameter(b, 0, xs.shape_from_pyval(a)), ops.Parameter(b, 1, xs.shape_from_pyval(c))
    fns = [ops.Eq, ops.Ne, ops.Lt, ops.Le, ops.Gt, ops.Ge]
    outs = run(b.build([f(A, C) for f in fns]), a, c)
    with np.errstate(invalid="ignore"):
        wants = [a == c, a != c, a < c, a <= c, a > c, a >= c]
    for f, o, w in zip(fns, outs, wants, strict=True):
        assert o.dtype == np.bool_
        np.testing.assert_array_equal(o, w, err_msg=f.__name__)
    assert outs[0][3] and outs[0][4] and not outs[0][2] and outs[1][2]  # -0 == +0, NaN != NaN


def test_compare_totalorder() -> None:
    # TOTALORDER: -NaN < -inf < -1 < -0.0 < +0.0 < 1 < +inf < +NaN
    order = np.array([-np.nan, -np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan], np.float64)
    order[0] = -abs(order[7])  # a NaN with the sign bit set
    assert np.signbit(order[0])
    a = np.repeat(order, len(order))
    c = np.tile(order, len(order))
    b = xs.XlaBuilder("total")
    A, C = ops.Parameter(b, 0, xs.shape_from_pyval(a)), ops.Parameter(b, 1, xs.shape_from_pyval(c))
    dirs = ["EQ", "NE", "LT", "LE", "GT", "GE"]
    outs = run(b.build([ops.Compare(A, C, d, "TOTALORDER") for d in dirs]
                       + [ops.Compare(A, C, xs.ComparisonDirection.LT, xs.ComparisonType.TOTALORDER),
                          ops.Compare(A, C, "lt", "totalorder")]), a, c)
    ia = np.repeat(np.arange(8), 8)
    ic = np.tile(np.arange(8), 8)
    wants = [ia == ic, ia != ic, ia < ic, ia <= ic, ia > ic, ia >= ic, ia < ic, ia < ic]
    for d, o, w in zip(dirs + ["LT enum", "lt lower"], outs, wants, strict=True):
        np.testing.assert_array_equal(o, w, err_msg=d)


def test_compare_integers_signed_and_unsigned() -> None:
    s = np.array([-1, 0, 5, -2147483648], np.int32)
    t = np.array([0, 0, -5, 2147483647], np.int32)
    u = np.array([0xFFFFFFFF, 0, 5, 1], np.uint32)
    v = np.array([0, 0, 6, 1], np.uint32)
    b = xs.XlaBuilder("icmp")
    S, Tt = ops.Parameter(b, 0, xs.shape_from_pyval(s)), ops.Parameter(b, 1, xs.shape_from_pyval(t))
    U, V = ops.Parameter(b, 2, xs.shape_from_pyval(u)), ops.Parameter(b, 3, xs.shape_from_pyval(v))
    bo = ops.Constant(b, np.array([True, False, True, False]))
    bo2 = ops.Constant(b, np.array([False, False, True, True]))
    outs = run(b.build([ops.Lt(S, Tt), ops.Gt(U, V), ops.Compare(S, Tt, "GE", "SIGNED"),
                        ops.Compare(U, V, "LE", "UNSIGNED"), ops.Gt(bo, bo2), ops.Eq(S, 0)]), s, t, u, v)
    np.testing.assert_array_equal(outs[0], s < t)
    np.testing.assert_array_equal(outs[1], u > v)
    np.testing.assert_array_equal(outs[2], s >= t)
    np.testing.assert_array_equal(outs[3], u <= v)
    np.testing.assert_array_equal(outs[4], [True, False, False, False])
    np.testing.assert_array_equal(outs[5], s == 0)


def test_compare_complex_eq_ne() -> None:
    z = np.array([1 + 2j, 1 + 2j, np.nan], np.complex64)
    w = np.array([1 + 2j, 1 - 2j, np.nan], np.complex64)
    b = xs.XlaBuilder("ccmp")
    Z, W = ops.Parameter(b, 0, xs.shape_from_pyval(z)), ops.Parameter(b, 1, xs.shape_from_pyval(w))
    eq, ne = run(b.build([ops.Eq(Z, W), ops.Ne(Z, W)]), z, w)
    np.testing.assert_array_equal(eq, [True, False, False])
    np.testing.assert_array_equal(ne, [False, True, True])


def test_compare_errors() -> None:
    b = xs.XlaBuilder("cmp_err")
    f = ops.Parameter(b, 0, xs.Shape.array_shape("f32", [2]))
    i = ops.Parameter(b, 1, xs.Shape.array_shape("s32", [2]))
    z = ops.Parameter(b, 2, xs.Shape.array_shape("c64", [2]))
    bo = ops.Parameter(b, 3, xs.Shape.array_shape("pred", [2]))
    with raises(xs.ShapeError, "Compare: unknown ComparisonDirection 'FOO'"):
        ops.Compare(f, f, "FOO")
    with raises(xs.ShapeError, "Compare: unknown ComparisonType 'BAR'"):
        ops.Compare(f, f, "LT", "BAR")
    with raises(xs.DTypeError, "Compare: compare_type TOTALORDER does not apply to element type s32"):
        ops.Compare(i, i, "LT", "TOTALORDER")
    with raises(xs.DTypeError, "Compare: compare_type FLOAT does not apply to element type s32"):
        ops.Compare(i, i, "LT", "FLOAT")
    with raises(xs.DTypeError, "Compare: compare_type SIGNED does not apply to element type f32"):
        ops.Compare(f, f, "LT", "SIGNED")
    with raises(xs.DTypeError, "Compare", "SIGNED", "pred"):
        ops.Compare(bo, bo, "EQ", "SIGNED")
    with raises(xs.DTypeError, "Compare: direction LT is not defined for complex c64[2]; only EQ and NE"):
        ops.Lt(z, z)
    with raises(xs.DTypeError, "Compare: compare_type TOTALORDER does not apply to element type c64"):
        ops.Compare(z, z, "EQ", "TOTALORDER")
    with raises(xs.DTypeError, "Compare: operand 'rhs' has element type s32"):
        ops.Eq(f, i)
    with raises(xs.ShapeError, "Compare: operand 'rhs' has shape f32[2,1]"):
        ops.Lt(f, ops.Reshape(f, [2, 1]))


def test_complex_ordered_compare_of_constants_does_not_crash() -> None:
    # an ordered compare of complex constants aborts XLA's constant folder: rejected in Python
    import subprocess

    code = (
        "import numpy as np, xlasdk as xs\nfrom xlasdk import ops\n"
        "b = xs.XlaBuilder('c'); z = ops.Constant(b, np.array([1+2j], np.complex64))\n"
        "try:\n    ops.Lt(z, z)\nexcept xs.DTypeError as e:\n    print('rejected:', e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "rejected: Compare: direction LT" in proc.stdout


# ------------------------------------------------------------------------------ Select, Clamp


def test_select() -> None:
    p = np.array([True, False, True])
    t = np.array([1, 2, 3], np.int32)
    f = np.array([-1, -2, -3], np.int32)
    b = xs.XlaBuilder("select")
    Pp, Tt, Ff = (ops.Parameter(b, i, xs.shape_from_pyval(a)) for i, a in enumerate((p, t, f)))
    s1 = ops.Select(Pp, Tt, Ff)
    s2 = ops.Select(ops.Constant(b, False), Tt, Ff)  # a scalar pred picks whole operands
    s3 = ops.Select(ops.Lt(Tt, 2), Ff, Tt)
    o1, o2, o3 = run(b.build([s1, s2, s3]), p, t, f)
    np.testing.assert_array_equal(o1, [1, -2, 3])
    np.testing.assert_array_equal(o2, f)
    np.testing.assert_array_equal(o3, [-1, 2, 3])
    x = ops.Parameter(b, 3, xs.Shape.array_shape("f32", [3]))
    y = ops.Parameter(b, 4, xs.Shape.array_shape("f32", [2]))
    with raises(xs.DTypeError, "Select: operand 'pred' must have element type pred, got s32[3]"):
        ops.Select(Tt, Tt, Ff)
    with raises(xs.DTypeError, "Select: operand 'on_false' has element type f32[3]", "'on_true' s32[3]"):
        ops.Select(Pp, Tt, x)
    with raises(xs.ShapeError, "Select: operand 'on_false' has shape f32[2], expected f32[3]"):
        ops.Select(Pp, x, ops.Slice(x, [0], [2]))
    with raises(xs.ShapeError, "Select: operand 'pred' has shape pred[2]", "pred[]"):
        ops.Select(ops.Constant(b, [True, False]), x, x)
    assert ops.Select(ops.Constant(b, [True, False]), y, y).dims == (2,)
    with raises(xs.DTypeError, "Select: operand 'pred' must be an XlaOp, got bool"):
        ops.Select(True, x, x)  # type: ignore[arg-type]


def test_clamp() -> None:
    x = np.array([-5.0, 0.5, 3.0, np.nan, 10.0], np.float32)
    lo = np.array([0.0, 1.0, 0.0, 0.0, 20.0], np.float32)
    xi = np.array([-5, 0, 3, 7, 10], np.int32)
    b = xs.XlaBuilder("clamp")
    X, L, XI = (ops.Parameter(b, i, xs.shape_from_pyval(a)) for i, a in enumerate((x, lo, xi)))
    outs = run(b.build([
        ops.Clamp(0.0, X, 1.0),  # Python scalar bounds
        ops.Clamp(ops.Constant(b, np.float32(-1)), X, ops.Constant(b, np.float32(2))),  # scalar ops
        ops.Clamp(L, X, 5.0),  # array min, scalar max
        ops.Clamp(1, XI, 5),
        ops.Clamp(5, XI, 2),  # min > max: every element becomes max
    ]), x, lo, xi)
    np.testing.assert_array_equal(outs[0], [0, 0.5, 1, np.nan, 1])
    np.testing.assert_array_equal(outs[1], [-1, 0.5, 2, np.nan, 2])
    np.testing.assert_array_equal(outs[2], [0, 1, 3, np.nan, 5])
    np.testing.assert_array_equal(outs[3], [1, 1, 3, 5, 5])
    np.testing.assert_array_equal(outs[4], [2, 2, 2, 2, 2])
    z = ops.Parameter(b, 3, xs.Shape.array_shape("c64", [2]))
    with raises(xs.DTypeError, "Clamp: scalar 1.5 cannot be represented as s32"):
        ops.Clamp(0, XI, 1.5)
    with raises(xs.DTypeError, "Clamp: operand 'min' has element type f32[]", "expected s32"):
        ops.Clamp(ops.Constant(b, 0.0), XI, ops.Constant(b, 1))
    with raises(xs.ShapeError, "Clamp: operand 'min' has shape f32[2], expected a scalar or f32[5]"):
        ops.Clamp(ops.Constant(b, [0.0, 1.0]), X, 1.0)
    with raises(xs.DTypeError, "Clamp: operand 'operand' must be real (non-complex), got c64[2]"):
        ops.Clamp(z, z, z)
    with raises(xs.DTypeError, "Clamp: operand 'operand' must be an XlaOp, got str"):
        ops.Clamp(0.0, "x", 1.0)


# ------------------------------------------------------------------------------ ConvertElementType


def test_convert_element_type() -> None:
    f = np.array([1.7, -1.7, 0.0, 255.9, 1e10], np.float32)
    i = np.array([1, -1, 0, 300], np.int32)
    bo = np.array([True, False])
    z = np.array([1 + 2j], np.complex64)
    b = xs.XlaBuilder("convert")
    F, I, B, Z = (ops.Parameter(b, k, xs.shape_from_pyval(a)) for k, a in enumerate((f, i, bo, z)))
    same = ops.ConvertElementType(F, np.float32)
    assert same is F  # converting to the same type is a no-op
    exprs = [
        ops.ConvertElementType(F, np.int32), ops.ConvertElementType(F, "u8"), ops.ConvertElementType(I, np.float64),
        ops.ConvertElementType(I, xs.PrimitiveType.S8), ops.ConvertElementType(B, np.float32),
        ops.ConvertElementType(B, np.int32), ops.ConvertElementType(F, np.complex64),
        ops.ConvertElementType(Z, np.complex128),
        ops.ConvertElementType(I, "bfloat16"), ops.ConvertElementType(F, ml_dtypes.float8_e4m3fn),
    ]
    assert [str(e.shape) for e in exprs] == ["s32[5]", "u8[5]", "f64[4]", "s8[4]", "f32[2]", "s32[2]", "c64[5]",
                                             "c128[1]",
                                             "bf16[4]", "f8e4m3fn[5]"]
    outs = run(b.build(exprs), f, i, bo, z)
    np.testing.assert_array_equal(outs[0], [1, -1, 0, 255, 2147483647])
    np.testing.assert_array_equal(outs[1], [1, 0, 0, 255, 255])
    np.testing.assert_array_equal(outs[2], [1, -1, 0, 300])
    np.testing.assert_array_equal(outs[3], [1, -1, 0, 44])
    np.testing.assert_array_equal(outs[4], [1, 0])
    np.testing.assert_array_equal(outs[5], [1, 0])
    np.testing.assert_array_equal(outs[6], f.astype(np.complex64))
    np.testing.assert_array_equal(outs[7], z.astype(np.complex128))
    np.testing.assert_array_equal(outs[8].astype(np.float32), [1, -1, 0, 300])
    fp8 = f.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    np.testing.assert_array_equal(outs[9].astype(np.float32), fp8[:4].tolist() + [np.nan])  # 1e10: NaN (no inf)
    with raises(xs.DTypeError, "ConvertElementType: new_element_type 'nope' is not an XLA element type"):
        ops.ConvertElementType(F, "nope")
    with raises(xs.DTypeError, "ConvertElementType", "TUPLE"):
        ops.ConvertElementType(F, xs.PrimitiveType.TUPLE)
    with raises(xs.DTypeError, "ConvertElementType: cannot convert complex c64[1] to f32"):
        ops.ConvertElementType(Z, np.float32)
    with raises(xs.DTypeError, "ConvertElementType: operand 'operand' must be an XlaOp"):
        ops.ConvertElementType(np.zeros(2), np.float32)


def test_math_constants_sanity() -> None:
    # guards the reference helpers themselves
    assert _round_afz(np.array([2.5, -2.5]))[0] == 3 and _div_trunc(-7, 2) == -3 and _rem_trunc(-7, 2) == -1
    assert _clz(np.array([1]), P.S8)[0] == 7 and _popcount(np.array([-1]), P.S4)[0] == 4
    assert math.isclose(float(_catan2(np.array([1.0]), np.array([1.0]))[0]), math.pi / 4)


# ------------------------------------------------------------------------------ pure shape rules


def _sh(dtype: Any, dims: tuple[int, ...]) -> xs.Shape:
    return xs.Shape.array_shape(np.dtype(dtype), dims)


def test_generated_functions_carry_their_names() -> None:
    for name in list(ew.UNARY) + list(ew.BINARY):
        assert getattr(ew, name).__name__ == name


def test_unary_and_binary_rules_without_builder() -> None:
    assert ew.unary_shape("Abs", _sh(np.complex64, (2, 3))) == _sh(np.float32, (2, 3))
    assert ew.unary_shape("IsFinite", _sh(np.float64, (4,))) == _sh(np.bool_, (4,))
    assert ew.unary_shape("Neg", _sh(np.int8, ())) == _sh(np.int8, ())
    with raises(xs.DTypeError, "Exp: operand 'operand' must be floating-point or complex, got s32[2]"):
        ew.unary_shape("Exp", _sh(np.int32, (2,)))
    f32 = ew.FLOATS
    assert ew.binary_element_type("Add", _sh(np.float32, (2,)), _sh(np.float32, ()), f32) is xtypes.PrimitiveType.F32
    with raises(xs.DTypeError, "Add: operand 'rhs' has element type f64", "expected f32 like 'lhs'"):
        ew.binary_element_type("Add", _sh(np.float32, (2,)), _sh(np.float64, (2,)), f32)
    assert ew.binary_result_shape("Complex", _sh(np.float64, (5,))) == _sh(np.complex128, (5,))


def test_binary_shape_broadcasting() -> None:
    f = np.float32
    assert ew.binary_shape("Add", _sh(f, (2, 3)), _sh(f, (2, 3)), ()) == ((2, 3), (0, 1), (0, 1))
    assert ew.binary_shape("Add", _sh(f, (2, 3)), _sh(f, ()), ()) == ((2, 3), (0, 1), ())
    assert ew.binary_shape("Add", _sh(f, ()), _sh(f, (4,)), ()) == ((4,), (), (0,))
    assert ew.binary_shape("Add", _sh(f, (1, 3)), _sh(f, (5, 1)), ()) == ((5, 3), (0, 1), (0, 1))
    assert ew.binary_shape("Add", _sh(f, (1, 3)), _sh(f, (0, 1)), ()) == ((0, 3), (0, 1), (0, 1))
    # rank 1 into rank 3 along dimension 1, on either side
    assert ew.binary_shape("Mul", _sh(f, (4,)), _sh(f, (2, 4, 5)), (1,)) == ((2, 4, 5), (1,), (0, 1, 2))
    assert ew.binary_shape("Mul", _sh(f, (2, 1, 5)), _sh(f, (7,)), (1,)) == ((2, 7, 5), (0, 1, 2), (1,))
    with raises(xs.ShapeError, "Add: operand 'rhs' has shape f32[3,2]", "expected f32[2] (or a scalar"):
        ew.binary_shape("Add", _sh(f, (2,)), _sh(f, (3, 2)), ())
    with raises(xs.ShapeError, "Add: operand 'rhs' has shape f32[2,4]", "in dimension 1 (4 vs 3"):
        ew.binary_shape("Add", _sh(f, (2, 3)), _sh(f, (2, 4)), ())
    with raises(xs.ShapeError, "Mul: broadcast_dimensions has 2 entries, expected 1"):
        ew.binary_shape("Mul", _sh(f, (4,)), _sh(f, (2, 4)), (0, 1))
    with raises(xs.ShapeError, "Mul: broadcast_dimensions [1, 0] must be strictly increasing"):
        ew.binary_shape("Mul", _sh(f, (4, 2)), _sh(f, (2, 4, 5)), (1, 0))
    with raises(xs.ShapeError, "Mul: operand 'lhs' dimension 0 has size 3", "dimension 1 of size 4"):
        ew.binary_shape("Mul", _sh(f, (3,)), _sh(f, (2, 4)), (1,))
    with raises(xs.ShapeError, "broadcast_dimensions [1] given for operands of equal rank 1"):
        ew.binary_shape("Mul", _sh(f, (3,)), _sh(f, (3,)), (1,))


def test_compare_select_clamp_rules() -> None:
    from xlasdk.attrs import ComparisonDirection as D
    from xlasdk.attrs import ComparisonType as T

    assert ew.compare_result(_sh(np.int32, (2, 2)), D.LT, None) == ("SIGNED", _sh(np.bool_, (2, 2)))
    assert ew.compare_result(_sh(np.uint8, ()), D.EQ, None) == ("UNSIGNED", _sh(np.bool_, ()))
    assert ew.compare_result(_sh(np.float32, (3,)), D.GT, T.TOTALORDER) == ("TOTALORDER", _sh(np.bool_, (3,)))
    with raises(xs.DTypeError, "Compare: compare_type SIGNED does not apply to element type f32"):
        ew.compare_result(_sh(np.float32, (3,)), D.GT, T.SIGNED)
    with raises(xs.DTypeError, "Compare: direction LT is not defined for complex c64[2]"):
        ew.compare_result(_sh(np.complex64, (2,)), D.LT, None)
    p, t = _sh(np.bool_, (2, 3)), _sh(np.float32, (2, 3))
    assert ew.select_shape("Select", p, t, t) == t
    assert ew.select_shape("Select", _sh(np.bool_, ()), t, t) == t
    with raises(xs.DTypeError, "Select: operand 'pred' must have element type pred, got s32[2,3]"):
        ew.select_shape("Select", _sh(np.int32, (2, 3)), t, t)
    with raises(xs.ShapeError, "Select: operand 'pred' has shape pred[3]", "expected pred[2, 3] or pred[]"):
        ew.select_shape("Select", _sh(np.bool_, (3,)), t, t)
    with raises(xs.ShapeError, "Select: operand 'on_false' has shape f32[3,2]"):
        ew.select_shape("Select", p, t, _sh(np.float32, (3, 2)))
    lo = _sh(np.float32, ())
    assert ew.clamp_shape("Clamp", lo, t, t) == t
    with raises(xs.ShapeError, "Clamp: operand 'max' has shape f32[3]", "expected a scalar or f32[2,3]"):
        ew.clamp_shape("Clamp", lo, t, _sh(np.float32, (3,)))
    with raises(xs.DTypeError, "Clamp: operand 'min' has element type f64[]", "expected f32"):
        ew.clamp_shape("Clamp", _sh(np.float64, ()), t, lo)
    with raises(xs.DTypeError, "Clamp: operand 'operand' must be real (non-complex)"):
        ew.clamp_shape("Clamp", lo, _sh(np.complex64, (2,)), lo)


@PARAM_AND_CONST
def test_min_max_propagate_nan_and_order_signed_zero(const: bool) -> None:
    """Case C-02 (shared/cases/cases.md): Min/Max with a NaN operand are NaN, and Min(-0, +0) is -0, Max(-0, +0) is
    +0."""
    a = np.array([3, NAN, NAN, 1, -0.0, +0.0], np.float32)
    c = np.array([NAN, 3, NAN, 2, +0.0, -0.0], np.float32)
    b = xs.XlaBuilder("c02")
    A, C = case_inputs(b, [a, c], const)
    mn, mx = run_case(b, [ops.Min(A, C), ops.Max(A, C)], [a, c], const)
    np.testing.assert_array_equal(mn, [NAN, NAN, NAN, 1, -0.0, -0.0])
    np.testing.assert_array_equal(mx, [NAN, NAN, NAN, 2, 0.0, 0.0])
    np.testing.assert_array_equal(np.signbit(mn[4:]), [True, True])
    np.testing.assert_array_equal(np.signbit(mx[4:]), [False, False])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_min_max_of_folded_constant_nan_are_nan(dtype: Any) -> None:
    """Case C-02 (shared/cases/cases.md): Min/Max of a constant and a constant-folded NaN (0/0) are NaN in either
    operand order."""
    b = xs.XlaBuilder("c02c")
    three = ops.Constant(b, dtype(3))
    nan = ops.Div(ops.Constant(b, dtype(0)), ops.Constant(b, dtype(0)))
    res = run(b.build([ops.Min(three, nan), ops.Max(three, nan), ops.Min(nan, three), ops.Max(nan, three)]))
    for r in res:
        assert r.dtype == dtype and np.isnan(r)


@PARAM_AND_CONST
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_clamp_with_swapped_bounds_gives_the_upper_bound(const: bool, dtype: Any) -> None:
    """Case C-02 (shared/cases/cases.md): Clamp(5, x, 2), lower bound above the upper, gives the upper bound for
    every x."""
    x = np.array([0, 3, 7, 10], dtype)
    b = xs.XlaBuilder("c02clamp")
    (X,) = case_inputs(b, [x], const)
    lo, hi = ops.Constant(b, dtype(5)), ops.Constant(b, dtype(2))
    (r,) = run_case(b, [ops.Clamp(lo, X, hi)], [x], const)
    assert r.dtype == dtype
    np.testing.assert_array_equal(r, [2, 2, 2, 2])


@PARAM_AND_CONST
def test_clamp_propagates_nan(const: bool) -> None:
    """Case C-02 (shared/cases/cases.md): Clamp of a NaN operand is NaN."""
    x = np.array([NAN, -1, 2], np.float32)
    b = xs.XlaBuilder("c02nan")
    (X,) = case_inputs(b, [x], const)
    (r,) = run_case(b, [ops.Clamp(0.0, X, 1.0)], [x], const)
    np.testing.assert_array_equal(r, [NAN, 0, 1])


DIV_CASES = [
    (np.int32, [7, -7, 0, I32_MIN, I32_MIN, 7, -7], [0, 0, 0, -1, 0, -2, 2],
     [-1, -1, -1, I32_MIN, -1, -3, -3], [7, -7, 0, 0, I32_MIN, 1, -1]),
    (np.uint32, [7, 0, 0xFFFFFFFF], [0, 0, 0], [0xFFFFFFFF] * 3, [7, 0, 0xFFFFFFFF]),
    (np.int8, [5, -128, -128], [0, -1, 0], [-1, -128, -1], [5, 0, -128]),
    (np.int64, [9, I64_MIN], [0, -1], [-1, I64_MIN], [9, 0]),
]


@PARAM_AND_CONST
@pytest.mark.parametrize(("dtype", "a", "d", "q", "r"), DIV_CASES, ids=["s32", "u32", "s8", "s64"])
def test_integer_div_rem_by_zero_and_overflow_are_defined(const: bool, dtype: Any, a: list[int], d: list[int],
                                                          q: list[int], r: list[int]) -> None:
    """Case C-03 (shared/cases/cases.md): integer Div/Rem by zero and INT_MIN / -1 give XLA's defined results: x / 0
    is all ones (-1), x % 0 is x, INT_MIN / -1 is INT_MIN and INT_MIN % -1 is 0."""
    x, y = np.array(a, dtype), np.array(d, dtype)
    b = xs.XlaBuilder("c03")
    X, Y = case_inputs(b, [x, y], const)
    got_q, got_r = run_case(b, [ops.Div(X, Y), ops.Rem(X, Y)], [x, y], const)
    np.testing.assert_array_equal(got_q, np.array(q, dtype))
    np.testing.assert_array_equal(got_r, np.array(r, dtype))
    assert got_q.dtype == dtype and got_r.dtype == dtype


@PARAM_AND_CONST
def test_float_rem_takes_the_sign_of_the_dividend(const: bool) -> None:
    """Case C-03 (shared/cases/cases.md): float Rem has the sign of the dividend (fmod), and x % 0 is NaN."""
    x = np.array([-10, 10, -1, 5.5, -0.0], np.float32)
    y = np.array([3, -3, 1, 0, 2], np.float32)
    b = xs.XlaBuilder("c03f")
    X, Y = case_inputs(b, [x, y], const)
    (r,) = run_case(b, [ops.Rem(X, Y)], [x, y], const)
    np.testing.assert_array_equal(r, [-1, 1, -0.0, NAN, -0.0])
    np.testing.assert_array_equal(np.signbit(r[[0, 1, 2, 4]]), [True, False, True, True])  # NaN's sign is unspecified


def test_folded_constant_integer_div_by_zero_does_not_kill_the_process() -> None:
    """Case C-03 (shared/cases/cases.md): constant folding of integer division by zero and INT_MIN / -1 does not kill
    the process (it raised SIGFPE inside XLA); it runs in a subprocess."""
    # constant folding of s32 7 / 0 raised SIGFPE inside XLA; the guarded lowering gives -1
    code = (
        "import numpy as np, xlasdk as xs, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parents[1])!r})\n"
        "from helpers import run\n"
        "from xlasdk import ops\n"
        "b = xs.XlaBuilder('c03')\n"
        "q = ops.Div(ops.Constant(b, np.int32(7)), ops.Constant(b, np.int32(0)))\n"
        "r = ops.Rem(ops.Constant(b, np.int32(7)), ops.Constant(b, np.int32(0)))\n"
        "m = ops.Div(ops.Constant(b, np.int32(-2**31)), ops.Constant(b, np.int32(-1)))\n"
        "print(*[int(v) for v in run(b.build([q, r, m, ops.Constant(b, 7) / 0, 7 % ops.Constant(b, 0)]))])\n"
    )
    # the child runs on the CPU: a chip this process holds cannot be opened by another process
    env = {**os.environ, "XLASDK_TEST_PLATFORM": "cpu"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["-1", "7", str(I32_MIN), "-1", "7"]


SHIFT_CASES = [
    ("u8", np.uint8, [128], [2], None, [224], [32]),
    ("s32", np.int32, [1, -8, 8, -1, 5, 1], [32, 32, 40, 32, -1, 31], [0, 0, 0, 0, 0, I32_MIN], [0, -1, 0, -1, 0, 0],
     [0, 0, 0, 0, 0, 0]),
    ("u32", np.uint32, [1, 0x80000000, 0xFFFFFFFF], [32, 33, 0xFFFFFFFF], [0, 0, 0], [0, 0xFFFFFFFF, 0xFFFFFFFF],
     [0, 0, 0]),
]


@PARAM_AND_CONST
@pytest.mark.parametrize(("name", "dtype", "x", "s", "shl", "sra", "srl"), SHIFT_CASES, ids=[c[0] for c in SHIFT_CASES])
def test_shifts_by_out_of_range_amounts_and_unsigned_arithmetic_shift(
    const: bool, name: str, dtype: Any, x: list[int], s: list[int], shl: list[int] | None, sra: list[int],
    srl: list[int],
) -> None:
    """Case C-05 (shared/cases/cases.md): shifts by an amount at least the bit width (or negative) give 0, or all
    sign bits for an arithmetic right shift of a value with its top bit set; an arithmetic right shift of an unsigned
    value shifts in its top bit."""
    xa, sa = np.array(x, dtype), np.array(s, dtype)
    b = xs.XlaBuilder("c05")
    X, S = case_inputs(b, [xa, sa], const)
    r = run_case(b, [ops.ShiftLeft(X, S), ops.ShiftRightArithmetic(X, S), ops.ShiftRightLogical(X, S)], [xa, sa], const)
    if shl is not None:
        np.testing.assert_array_equal(r[0], np.array(shl, dtype))
    np.testing.assert_array_equal(r[1], np.array(sra, dtype))
    np.testing.assert_array_equal(r[2], np.array(srl, dtype))


@PARAM_AND_CONST
def test_s8_shifts_by_out_of_range_amounts(const: bool) -> None:
    """Case C-05 (shared/cases/cases.md): s8 shifts wrap around on the left and give 0 or all sign bits for
    out-of-range shift amounts."""
    x = np.array([-128, 64, 1], np.int8)
    s1, s2, s3 = np.array([1, 1, 8], np.int8), np.array([7, 8, 100], np.int8), np.array([7, 8, 1], np.int8)
    b = xs.XlaBuilder("c05s8")
    X, S1, S2, S3 = case_inputs(b, [x, s1, s2, s3], const)
    outs = [ops.ShiftLeft(X, S1), ops.ShiftRightArithmetic(X, S2), ops.ShiftRightLogical(X, S3)]
    r = run_case(b, outs, [x, s1, s2, s3], const)
    np.testing.assert_array_equal(r[0], np.array([0, -128, 0], np.int8))
    np.testing.assert_array_equal(r[1], np.array([-1, 0, 0], np.int8))
    np.testing.assert_array_equal(r[2], np.array([1, 0, 0], np.int8))


@PARAM_AND_CONST
def test_bf16_add_rounds_to_nearest_even(const: bool) -> None:
    """Case C-10 (shared/cases/cases.md): a bf16 Add rounds its result to nearest even (256 + 1 is 256, 1 + 2**-8 is
    1)."""
    bf = ml_dtypes.bfloat16
    a = np.array([256, 1, 1], np.float32)
    c = np.array([1, 0.00390625, 0.005859375], np.float32)
    b = xs.XlaBuilder("c10add")
    A, C = case_inputs(b, [a, c], const)
    (r,) = run_case(b, [ops.Add(ops.ConvertElementType(A, bf), ops.ConvertElementType(C, bf))], [a, c], const)
    assert r.dtype == bf
    np.testing.assert_array_equal(r.astype(np.float32), [256, 1.0, 1.0078125])


def test_add_broadcasts_size_one_against_size_zero() -> None:
    """Found by the shape-rule fuzzer: a size-1 dimension broadcast against a size-0 one gives size 0: Add(f32[0,0],
    f32[0,1]) was predicted f32[0,1] and the empty operand broadcast to size 1, which MLIR's verifier rejected ("size
    of operand dimension 1 (0) is not equal to 1 or size of result dimension 1 (1)")."""
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


def test_compare_type_signedness_must_match_the_operands() -> None:
    """Found by the shape-rule fuzzer: a Compare whose compare_type has the other signedness than its integer
    operands is rejected: Compare(s32[], s32[], "EQ", "UNSIGNED") was accepted and failed in XLA's HLO verifier
    ("Expected comparison type SIGNED. actual: UNSIGNED")."""
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
