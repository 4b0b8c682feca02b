"""Evaluation rules of the element-wise ops (:mod:`xlasdk.ops.elementwise`): the unary and binary
tables' ops, compare, select and clamp, and the CHLO functions (erf, lgamma, digamma, next_after,
the scipy-backed Bessel, zeta and polygamma).

The rules are bound to the rows of :mod:`xlasdk.ops.elementwise` (its ``UNARY`` / ``BINARY``
tables', compare, select and clamp). Floats are computed in float64 /
complex128 and rounded once to the result's type; integers exactly, with XLA's edges (division by
zero, shifts past the bit width). Element-wise unary ops of loaded modules that the table has no
row for (``mhlo.erf``, ``chlo.is_inf``...) are bound by name (:func:`evaluates_opaque`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .._optable import OpDef, bind_evaluation, evaluates
from ..attrs import ComparisonDirection, ComparisonType
from ..builder import XlaOp
from ..ops.elementwise import BINARY, CLAMP, COMPARE, SELECT, UNARY
from ._walk import (
    CUSTOM_CALL_RULES,
    ELEMENTWISE_OPS,
    Evaluator,
    Rule,
    Value,
    as_output,
    dtype_of,
    evaluates_opaque,
    is_float,
    total_order_key,
    widened,
)

__all__: list[str] = []


def _unary(fn: Callable[[Any], Any]) -> Rule:
    def rule(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
        with np.errstate(all="ignore"):
            return as_output(fn(widened(a[0])), o.shape)
    return rule


_erf = np.vectorize(math.erf, otypes=[np.float64])


_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _erfinv(y: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The inverse of erf in float64: a first guess refined by Newton's method to full precision;
    +-1 give +-inf and |y| > 1 NaN."""
    y = np.asarray(y, dtype=np.float64)
    with np.errstate(all="ignore"):
        w = -np.log((1.0 - y) * (1.0 + y))
        x = np.sign(y) * np.sqrt(np.maximum(w, 0.0) * 0.5 + 1e-300) * np.where(np.abs(y) < 0.9, 1.0, 1.0)
        x = np.where(np.abs(y) < 0.5, y * np.sqrt(np.pi) / 2, x)
        for _ in range(60):
            err = _erf(x) - y
            step = err / (2.0 / np.sqrt(np.pi) * np.exp(-x * x))
            x = np.where(np.isfinite(step), x - step, x)
    return np.where(np.abs(y) == 1, np.sign(y) * np.inf, np.where(np.abs(y) > 1, np.nan, x))


_U = {k: u.opdef for k, u in UNARY.items()}
_B = {k: b.opdef for k, b in BINARY.items()}

#: the unary ops' functions, in float64 / complex128, by row (of ``ops.elementwise.UNARY``)
_UNARY: dict[OpDef, Callable[[Any], Any]] = {
    _U["Abs"]: np.abs, _U["Neg"]: np.negative, _U["Exp"]: np.exp, _U["Exp2"]: np.exp2, _U["Log2"]: np.log2,
    _U["Expm1"]: np.expm1, _U["Log"]: np.log, _U["Log1p"]: np.log1p,
    _U["Sqrt"]: np.sqrt, _U["Rsqrt"]: lambda x: 1.0 / np.sqrt(x), _U["Cbrt"]: np.cbrt,
    _U["Sin"]: np.sin, _U["Cos"]: np.cos, _U["Tan"]: np.tan, _U["Tanh"]: np.tanh,
    _U["Logistic"]: lambda x: 1.0 / (1.0 + np.exp(-x)), _U["Floor"]: np.floor,
    _U["Ceil"]: np.ceil, _U["RoundNearestEven"]: np.rint,
    _U["Round"]: lambda x: np.copysign(np.floor(np.abs(x) + 0.5), x),
    _U["IsFinite"]: np.isfinite, _U["Real"]: np.real, _U["Imag"]: np.imag,
    _U["Erf"]: _erf, _U["Erfc"]: _erfc, _U["ErfInv"]: _erfinv,
}


_lgamma = np.vectorize(lambda v: math.lgamma(v) if not (v <= 0 and v == math.floor(v)) else math.inf,
                       otypes=[np.float64])


def _digamma(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """psi(x) in float64: the reflection psi(1 - x) - pi / tan(pi x) below 1/2, the recurrence
    psi(x) = psi(x + 1) - 1/x up to x >= 10, then the asymptotic series (error < 1e-15); NaN at
    the poles 0, -1, -2, ... (XLA's CHLO decomposition gives NaN there too)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        reflect = x < 0.5
        y = np.where(reflect, 1.0 - x, x)
        acc = np.zeros_like(y)
        for _ in range(10):
            small = y < 10
            acc = np.where(small, acc - 1.0 / y, acc)
            y = np.where(small, y + 1.0, y)
        inv2 = 1.0 / (y * y)
        series = (np.log(y) - 0.5 / y - inv2 * (1.0 / 12 - inv2 * (1.0 / 120 - inv2 * (1.0 / 252 - inv2 * (
            1.0 / 240 - inv2 * (1.0 / 132))))))
        psi = series + acc
        psi = np.where(reflect, psi - np.pi / np.tan(np.pi * x), psi)
        return np.where((x <= 0) & (x == np.floor(x)), np.nan, psi)


def _next_after(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """The float of the result's type next to x in the direction of y, from the bits (for every
    float type, bf16 and fp8 included): y when they are equal, NaN when either is."""
    x, y = np.asarray(a[0]), np.asarray(a[1])
    dt = dtype_of(o.shape)
    x, y = np.broadcast_arrays(x.astype(dt), y.astype(dt))
    width = dt.itemsize
    bits = np.ascontiguousarray(x).view(np.dtype(f"u{width}")).astype(np.int64)
    xf, yf = widened(x), widened(y)
    sign_bit = np.int64(1) << np.int64(8 * width - 1)
    with np.errstate(all="ignore"):
        toward_bigger_magnitude = (xf < yf) == (xf > 0)
        step = np.where(toward_bigger_magnitude, bits + 1, bits - 1)
        tiny = np.where(yf < 0, sign_bit | 1, 1)  # from +-0: the smallest subnormal on y's side
        out = np.where(xf == 0, tiny, step)
    res = out.astype(np.dtype(f"u{width}")).view(dt)
    res = np.where(xf == yf, y, res)
    return as_output(np.where(np.isnan(xf) | np.isnan(yf), np.nan, widened(np.asarray(res))), o.shape)


def _scipy_special(name: str) -> Callable[..., Any] | None:
    try:
        import scipy.special  # an optional dependency: pip install "xlasdk[reference]"
    except ImportError:
        return None
    fn: Callable[..., Any] = getattr(scipy.special, name)
    return fn


def _needs_scipy(name: str, nargs: int) -> Rule:
    def rule(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
        fn = _scipy_special(name)
        if fn is None:
            raise ev.fail(o, f"needs scipy for its reference values (scipy.special.{name}): pip install "
                             "'xlasdk[reference]'")
        with np.errstate(all="ignore"):
            return as_output(fn(*(widened(v) for v in a[:nargs])), o.shape)
    return rule


_UNARY.update({
    _U["Sinh"]: np.sinh, _U["Cosh"]: np.cosh, _U["Asinh"]: np.arcsinh, _U["Acosh"]: np.arccosh,
    _U["Atanh"]: np.arctanh, _U["Asin"]: np.arcsin, _U["Acos"]: np.arccos, _U["Atan"]: np.arctan,
    _U["Square"]: lambda x: x * x, _U["Conj"]: np.conj, _U["Lgamma"]: _lgamma, _U["Digamma"]: _digamma,
})
#: unary ops of loaded modules that the table has no row for (opaque: bound by name)
_OPAQUE_UNARY: dict[str, Callable[[Any], Any]] = {
    "mhlo.erf": _erf,  # what XLA's HLO -> StableHLO import makes of HLO's erf
    "chlo.tan": np.tan, "chlo.is_inf": np.isinf, "chlo.is_pos_inf": np.isposinf, "chlo.is_neg_inf": np.isneginf,
}
for _row, _fn in _UNARY.items():
    bind_evaluation(_row, _unary(_fn))
# jaxlib's element-wise special-function kernels (``cpu_lgamma_ffi``...: JAX 0.12.1's CPU lowering of
# gammaln / digamma), their shape contract in :mod:`xlasdk.ops.lapack_contracts`
CUSTOM_CALL_RULES.update({"cpu_lgamma_ffi": _unary(_lgamma), "cpu_digamma_ffi": _unary(_digamma)})
for _name, _fn in _OPAQUE_UNARY.items():
    evaluates_opaque(_name)(_unary(_fn))
bind_evaluation(_B["NextAfter"], _next_after)
bind_evaluation(_U["BesselI1e"], _needs_scipy("i1e", 1))
bind_evaluation(_B["Zeta"], _needs_scipy("zeta", 2))
bind_evaluation(_B["Polygamma"], _needs_scipy("polygamma", 2))


@evaluates(_U["Sign"])
def _sign(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    x = widened(a[0])
    if x.dtype.kind == "c":
        with np.errstate(all="ignore"):
            m = np.abs(x)
            return as_output(np.where(m == 0, 0, x / np.where(m == 0, 1, m)), o.shape)
    if x.dtype.kind == "f":  # NaN stays NaN and -0 stays -0
        return as_output(np.where(np.isnan(x) | (x == 0), x, np.sign(x)), o.shape)
    return as_output(np.sign(x), o.shape)


@evaluates(_U["Not"])
def _not(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    x = a[0]
    return as_output(np.logical_not(x) if x.dtype == np.bool_ else np.invert(x), o.shape)


@evaluates(_U["PopulationCount"])
def _popcnt(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    x = a[0]
    u = x.view(np.dtype(f"u{x.dtype.itemsize}"))
    bits = np.unpackbits(u.reshape(-1, 1).view(np.uint8), axis=1).sum(axis=1)
    return as_output(bits.reshape(x.shape), o.shape)


@evaluates(_U["Clz"])
def _clz(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    x = a[0]
    width = x.dtype.itemsize * 8
    u = x.view(np.dtype(f"u{x.dtype.itemsize}")).astype(np.uint64)
    n = np.full(x.shape, width, np.int64)
    for k in range(width):
        n = np.where((u >> np.uint64(k)) & np.uint64(1), width - 1 - k, n)
    return as_output(n, o.shape)


def _binary(fn: Callable[[Any, Any], Any]) -> Rule:
    def rule(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
        with np.errstate(all="ignore"):
            return as_output(fn(widened(a[0]), widened(a[1])), o.shape)
    return rule


def _int_div(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """XLA's integer division: toward zero; x / 0 is -1 (all ones); INT_MIN / -1 is INT_MIN."""
    dt = x.dtype
    zero = y == 0
    safe = np.where(zero, 1, y)
    if dt.kind == "i":
        overflow = (x == np.iinfo(dt).min) & (safe == -1)
        safe = np.where(overflow, 1, safe)
        q = np.abs(x.astype(np.int64)) // np.abs(safe.astype(np.int64))
        q = np.where((x < 0) != (safe < 0), -q, q).astype(dt)
        q = np.where(overflow, x, q)
        return np.where(zero, np.array(-1, dt), q)
    return np.where(zero, np.array(np.iinfo(dt).max, dt), x // safe)


def _int_rem(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """XLA's integer remainder: the sign of the dividend; x % 0 is x; INT_MIN % -1 is 0."""
    zero = y == 0
    safe = np.where(zero, 1, y)
    if x.dtype.kind == "i":
        safe = np.where((x == np.iinfo(x.dtype).min) & (safe == -1), 1, safe)
        r = np.fmod(x.astype(np.int64), safe.astype(np.int64)).astype(x.dtype)
    else:
        r = x % safe
    return np.where(zero, x, r)


def _shift(kind: str) -> Rule:
    def rule(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
        x, s = a
        dt = x.dtype
        width = dt.itemsize * 8
        u = x.view(np.dtype(f"u{dt.itemsize}"))
        su = s.astype(np.int64)
        past = (su < 0) | (su >= width)
        sc = np.where(past, 0, su).astype(u.dtype)
        with np.errstate(all="ignore"):
            if kind == "left":
                r = np.where(past, 0, u << sc).astype(u.dtype).view(dt)
            elif kind == "logical":
                r = np.where(past, 0, u >> sc).astype(u.dtype).view(dt)
            else:  # arithmetic: fill with the sign bit
                xi = x.astype(np.int64) if dt.kind == "i" else x.view(np.dtype(f"i{dt.itemsize}")).astype(np.int64)
                r64 = np.where(past, np.where(xi < 0, -1, 0), xi >> np.where(past, 0, su))
                r = r64.astype(np.dtype(f"i{dt.itemsize}")).view(dt)
        return as_output(r, o.shape)
    return rule


bind_evaluation(_B["ShiftLeft"], _shift("left"))
bind_evaluation(_B["ShiftRightLogical"], _shift("logical"))
bind_evaluation(_B["ShiftRightArithmetic"], _shift("arithmetic"))


def _arith(fn: Callable[[Any, Any], Any], int_fn: Callable[[Any, Any], Any] | None = None) -> Rule:
    def rule(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
        x, y = a
        with np.errstate(all="ignore"):
            if x.dtype.kind in "iub":
                return as_output((int_fn or fn)(x, y), o.shape)
            return as_output(fn(widened(x), widened(y)), o.shape)
    return rule


def _maxmin(fn: Callable[[Any, Any], Any]) -> Rule:
    def rule(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
        x, y = a
        if x.dtype.kind == "c":  # XLA orders complex numbers lexicographically (real, then imaginary)
            pick_x = (x.real > y.real) | ((x.real == y.real) & (x.imag >= y.imag))
            if fn is np.minimum:
                pick_x = ~pick_x | ((x.real == y.real) & (x.imag == y.imag))
            return as_output(np.where(pick_x, x, y), o.shape)
        wx, wy = widened(x), widened(y)
        r = fn(wx, wy)  # NaN propagates, as in XLA
        if wx.dtype.kind == "f":  # max(+0, -0) is +0 and min(+0, -0) is -0, whatever the order
            both = (wx == 0) & (wy == 0)
            neg = np.signbit(wx) & np.signbit(wy) if fn is np.maximum else np.signbit(wx) | np.signbit(wy)
            r = np.where(both, np.where(neg, -0.0, 0.0), r)
        return as_output(r, o.shape)
    return rule


for _row, _rule_fn in {
    _B["Add"]: _arith(np.add), _B["Sub"]: _arith(np.subtract),
    _B["Mul"]: _arith(np.multiply), _B["Div"]: _arith(np.divide, _int_div),
    _B["Rem"]: _arith(np.fmod, _int_rem), _B["Pow"]: _arith(np.power),
    _B["Atan2"]: _binary(np.arctan2),
    _B["Max"]: _maxmin(np.maximum), _B["Min"]: _maxmin(np.minimum),
    _B["And"]: _arith(np.logical_and, np.bitwise_and), _B["Or"]: _arith(np.logical_or, np.bitwise_or),
    _B["Xor"]: _arith(np.logical_xor, np.bitwise_xor),  # bool operands take the bitwise form too
    _B["Complex"]: _binary(lambda x, y: x + 1j * y),
}.items():
    bind_evaluation(_row, _rule_fn)


#: numpy's comparison of each direction
COMPARISONS: dict[ComparisonDirection, Callable[[Any, Any], Any]] = {
    ComparisonDirection.EQ: np.equal, ComparisonDirection.NE: np.not_equal, ComparisonDirection.LT: np.less,
    ComparisonDirection.LE: np.less_equal, ComparisonDirection.GT: np.greater, ComparisonDirection.GE: np.greater_equal,
}


@evaluates(COMPARE)
def _compare(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    x, y = a
    direction: ComparisonDirection = ev.attr(o, "comparison_direction")
    if ev.attr(o, "compare_type") is ComparisonType.TOTALORDER and is_float(x.dtype):
        x, y = total_order_key(x), total_order_key(y)
    elif x.dtype.kind == "c":
        if direction not in (ComparisonDirection.EQ, ComparisonDirection.NE):
            raise ev.fail(o, f"{direction.name} of complex numbers is not an XLA comparison")
    else:
        x, y = widened(x), widened(y)
    return as_output(COMPARISONS[direction](x, y), o.shape)


@evaluates(SELECT)
def _select(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    return as_output(np.where(a[0], a[1], a[2]), o.shape)


@evaluates(CLAMP)
def _clamp(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    lo, x, hi = (widened(v) for v in a)
    return as_output(np.minimum(np.maximum(x, lo), hi), o.shape)


# the ops a region run on whole slices may hold (and whose error bounds are probed through their rules)
ELEMENTWISE_OPS.update(_OPAQUE_UNARY)
ELEMENTWISE_OPS.update(row.name for row in [
    *_UNARY, _U["Sign"], _U["Not"], _U["PopulationCount"], _U["Clz"],
    _B["Add"], _B["Sub"], _B["Mul"], _B["Div"], _B["Rem"],
    _B["Pow"], _B["Atan2"], _B["Max"], _B["Min"], _B["And"],
    _B["Or"], _B["Xor"], _B["Complex"], _B["ShiftLeft"], _B["ShiftRightLogical"],
    _B["ShiftRightArithmetic"], COMPARE, SELECT, CLAMP, _B["Polygamma"],
])
