"""Special functions built from XLA ops: ``Igamma``, ``Igammac``, ``RegularizedIncompleteBeta``,
``BesselI0e``.

StableHLO and CHLO have no op for these, so each is expanded here into element-wise ops (and,
for the series and continued fractions, a ``stablehlo.while`` that runs until every element has
converged), following XLA's math library (``xla/hlo/builder/lib/math.cc``) and Cephes. f16
and bf16 inputs are computed in f32 and rounded back. Edge values follow ``scipy.special``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..builder import XlaOp
from ..shape import Shape
from ..types import PrimitiveType
from . import elementwise as ew
from ._core import dtype_error, operand, same_builder, shape_error
from .control import GetTupleElement, Tuple, While
from .convert import ConvertElementType
from .reduce import Reduce
from .sources import Constant, constant_like

__all__ = ["Igamma", "Igammac", "RegularizedIncompleteBeta", "BesselI0e", "IgammaGradA", "RandomGammaGrad"]

_P = PrimitiveType
_UPCAST = {_P.F16: _P.F32, _P.BF16: _P.F32, _P.F32: _P.F32, _P.F64: _P.F64}


# -- loop helpers --------------------------------------------------------------------------------

def any_true(p: XlaOp) -> XlaOp:
    """``pred[]``: whether any element of the pred array ``p`` is true."""
    if p.shape.rank() == 0:
        return p
    b = p.builder
    return Reduce(b, p, Constant(b, np.bool_(False)), ew.Or, list(range(p.shape.rank())))


def while_loop(
    init: Sequence[XlaOp],
    cond: Callable[[list[XlaOp]], XlaOp],
    body: Callable[[list[XlaOp]], Sequence[XlaOp]],
) -> list[XlaOp]:
    """``ops.While`` over a list of loop values: ``cond(vals) -> pred[]``, ``body(vals) -> vals``.

    ``cond`` and ``body`` receive the loop values as XlaOps of a fresh sub-builder (so their
    constants must be made from those values, e.g. ``x + 1.0``); returns the final values.
    """
    n = len(init)
    b = init[0].builder

    def unpack(t: XlaOp) -> list[XlaOp]:
        return [GetTupleElement(t, i) for i in range(n)]

    out = While(lambda t: cond(unpack(t)), lambda t: list(body(unpack(t))), Tuple(b, list(init)))
    return unpack(out)


def _full(value: float, like: XlaOp) -> XlaOp:
    return constant_like("special", value, like)


def _eps(x: XlaOp) -> float:
    return float(np.finfo(x.dtype).eps)


def special_type(op: str, name: str, operand: Shape) -> PrimitiveType:
    """Element-type rule of the special functions: the compute type of the operand ``name`` (f32
    for f16/bf16/f32, f64 for f64); DTypeError for other element types."""
    et = operand.element_type()
    if et not in _UPCAST:
        dtype_error(op, f"operand {name!r} must be f16, bf16, f32 or f64, got {operand}")
    return _UPCAST[et]


def special_operand(op: str, name: str, operand: Shape, et: PrimitiveType) -> None:
    """DTypeError unless the operand ``name`` has the element type ``et`` of the others."""
    if operand.element_type() is not et:
        dtype_error(op, f"operand {name!r} has element type {operand}, expected {et.name.lower()} like the others")


def special_shape(op: str, named: Sequence[tuple[str, Shape]]) -> tuple[int, ...]:
    """Shape rule of the special functions: the common dimensions of the non-scalar operands (``()``
    when all are scalars); ShapeError for two non-scalar operands of different shapes."""
    dims: tuple[int, ...] | None = None
    for name, x in named:
        d = x.dimensions()
        if x.rank() == 0:
            continue
        if dims is None:
            dims = d
        elif d != dims:
            shape_error(op, f"operand {name!r} has shape {x}, expected {list(dims)} like the others (or a scalar)")
    return dims if dims is not None else ()


def _operands(op: str, named: Sequence[tuple[str, Any]]) -> tuple[list[XlaOp], PrimitiveType]:
    """Check the operands of an element-wise special function and bring them to one shape and
    the compute type. Python scalars become constants of the arrays' element type; arrays must
    share one shape, or be scalars (broadcast to it). Returns the operands and the result type."""
    first = next((v for _, v in named if isinstance(v, XlaOp)), None)
    if first is None:
        dtype_error(op, f"operand {named[0][0]!r} must be an XlaOp (Python scalars are allowed beside one)")
    ref_name = next(n for n, v in named if v is first)
    ref = operand(op, ref_name, first)
    et = ref.shape.element_type()
    ct = special_type(op, ref_name, ref.shape)
    xs: list[XlaOp] = []
    for name, v in named:
        if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)):
            xs.append(constant_like(op, v, ref, scalar=True))  # DTypeError if it does not fit
            continue
        x = operand(op, name, v)
        special_operand(op, name, x.shape, et)
        xs.append(x)
    same_builder(op, [(n, x) for (n, _), x in zip(named, xs, strict=True)])
    target = special_shape(op, [(n, x.shape) for (n, _), x in zip(named, xs, strict=True)])
    out = []
    for x in xs:
        if x.shape.dimensions() != target:
            x = ew.broadcast_to(x, target, ())
        out.append(ConvertElementType(x, ct))
    return out, et


def _finish(x: XlaOp, et: PrimitiveType) -> XlaOp:
    return ConvertElementType(x, et)


def _isnan(x: XlaOp) -> XlaOp:
    return ew.Ne(x, x)


# -- incomplete gamma ----------------------------------------------------------------------------

_IGAMMA_MAX_ITER = 2000


def _log_ax(a: XlaOp, x: XlaOp) -> tuple[XlaOp, XlaOp]:
    """``exp(a log x - x - lgamma(a))`` and whether it underflows."""
    ax = a * ew.Log(x) - x - ew.Lgamma(a)
    max_finite = float(np.finfo(x.dtype).max)
    underflow = ew.Lt(ax, -float(np.log(max_finite)))
    return ew.Exp(ax), underflow


def _igamma_series(ax: XlaOp, x: XlaOp, a: XlaOp, enabled: XlaOp) -> XlaOp:
    """P(a, x) by its power series (Cephes igam), for the enabled elements."""
    eps = _eps(x)
    i0 = Constant(x.builder, np.int32(0))

    def cond(v: list[XlaOp]) -> XlaOp:
        return ew.And(ew.Lt(v[6], _IGAMMA_MAX_ITER), any_true(v[0]))

    def body(v: list[XlaOp]) -> list[XlaOp]:
        en, r, c, ans, xx, aa, i = v
        r2 = r + 1.0
        c2 = c * (xx / r2)
        ans2 = ans + c2
        en2 = ew.And(en, ew.Gt(c2 / ans2, eps))
        return [en2, ew.Select(en, r2, r), ew.Select(en, c2, c), ew.Select(en, ans2, ans), xx, aa, i + 1]

    one = _full(1.0, x)
    out = while_loop([enabled, a, one, one, x, a, i0], cond, body)
    return out[3] * ax / a


def _igammac_cf(ax: XlaOp, x: XlaOp, a: XlaOp, enabled: XlaOp) -> XlaOp:
    """Q(a, x) by its continued fraction (Cephes igamc), for the enabled elements."""
    eps = _eps(x)
    big = 1.0 / eps
    y = 1.0 - a
    z = x + y + 1.0
    c = _full(0.0, x)
    pkm2 = _full(1.0, x)
    qkm2 = x
    pkm1 = x + 1.0
    qkm1 = z * x
    ans = pkm1 / qkm1
    t = _full(1.0, x)
    i0 = Constant(x.builder, np.int32(0))

    def cond(v: list[XlaOp]) -> XlaOp:
        return ew.And(ew.Lt(v[10], _IGAMMA_MAX_ITER), any_true(v[0]))

    def body(v: list[XlaOp]) -> list[XlaOp]:
        en, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2, i = v
        c2 = c + 1.0
        y2 = y + 1.0
        z2 = z + 2.0
        yc = y2 * c2
        pk = pkm1 * z2 - pkm2 * yc
        qk = qkm1 * z2 - qkm2 * yc
        nonzero = ew.Ne(qk, 0.0)
        r = pk / qk
        t2 = ew.Select(nonzero, ew.Abs((ans - r) / r), _full(1.0, t))
        ans2 = ew.Select(nonzero, r, ans)
        rescale = ew.Gt(ew.Abs(pk), big)
        n_pkm2, n_pkm1, n_qkm2, n_qkm1 = (ew.Select(rescale, p * eps, p) for p in (pkm1, pk, qkm1, qk))
        en2 = ew.And(en, ew.Gt(t2, eps))
        new = [ans2, t2, y2, z2, c2, n_pkm1, n_qkm1, n_pkm2, n_qkm2]
        old = [ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2]
        return [en2] + [ew.Select(en, nv, ov) for nv, ov in zip(new, old, strict=True)] + [i + 1]

    out = while_loop([enabled, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2, i0], cond, body)
    return out[1] * ax


def _igamma_edges(a: XlaOp, x: XlaOp, out: XlaOp, lower: bool) -> XlaOp:
    """scipy's values at the edges: x = 0, x = inf, a = 0, a = inf; NaN outside the domain."""
    inf = float("inf")
    p0, p1 = (0.0, 1.0) if lower else (1.0, 0.0)
    out = ew.Select(ew.Eq(x, 0.0), _full(p0, out), out)
    out = ew.Select(ew.Eq(x, inf), _full(p1, out), out)
    out = ew.Select(ew.Eq(a, 0.0), _full(p1, out), out)
    out = ew.Select(ew.Eq(a, inf), _full(p0, out), out)
    bad = ew.Or(ew.Or(ew.Lt(x, 0.0), ew.Lt(a, 0.0)), ew.Or(_isnan(a), _isnan(x)))
    bad = ew.Or(bad, ew.And(ew.Eq(a, 0.0), ew.Eq(x, 0.0)))
    bad = ew.Or(bad, ew.And(ew.Eq(a, inf), ew.Eq(x, inf)))
    return ew.Select(bad, _full(float("nan"), out), out)


def _igamma(op: str, a: Any, x: Any, lower: bool) -> XlaOp:
    """P(a, x) (``lower``) or Q(a, x): the series where ``x <= max(1, a)``, else the continued
    fraction, each computed for its own elements only, then the other one as ``1 -`` it."""
    (aa, xx), et = _operands(op, [("a", a), ("x", x)])
    ax, underflow = _log_ax(aa, xx)
    domain = ew.Or(ew.Or(ew.Le(xx, 0.0), ew.Le(aa, 0.0)), ew.Or(_isnan(aa), _isnan(xx)))
    finite = ew.And(ew.IsFinite(aa), ew.IsFinite(xx))
    enabled = ew.And(ew.Not(ew.Or(domain, underflow)), finite)
    use_cf = ew.And(ew.Gt(xx, 1.0), ew.Gt(xx, aa))
    series = _igamma_series(ax, xx, aa, ew.And(enabled, ew.Not(use_cf)))
    cf = _igammac_cf(ax, xx, aa, ew.And(enabled, use_cf))
    out = ew.Select(use_cf, 1.0 - cf, series) if lower else ew.Select(use_cf, cf, 1.0 - series)
    return _finish(_igamma_edges(aa, xx, ew.Clamp(0.0, out, 1.0), lower=lower), et)


def Igamma(a: XlaOp | float, x: XlaOp | float) -> XlaOp:
    """Regularized lower incomplete gamma function ``P(a, x) = gamma(a, x) / Gamma(a)``
    (the former XLA ``Igamma``; ``scipy.special.gammainc``).

    Expanded into XLA ops: the power series for ``x <= max(1, a)`` and ``1 - Q`` by the
    continued fraction otherwise, each a ``stablehlo.while`` that stops when every element has
    converged (at most 2000 steps). Edge values as scipy: ``P(a, 0) = 0``, ``P(a, inf) = 1``,
    ``P(0, x > 0) = 1``, ``P(inf, x) = 0``; NaN for ``a < 0``, ``x < 0``, ``a = x = 0``, NaN inputs.

    Parameters
    ----------
    a, x: arrays of one element type (f16, bf16, f32 or f64) and one shape ``(...)``; either
        may be a scalar (XlaOp or Python number), broadcast to the other.

    Returns
    -------
    XlaOp of the common shape and the operands' element type.

    Raises
    ------
    DTypeError: an operand that is not floating-point, or element types that differ.
    ShapeError: shapes that differ (other than scalars).
    """
    return _igamma("Igamma", a, x, lower=True)


def Igammac(a: XlaOp | float, x: XlaOp | float) -> XlaOp:
    """Regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``
    (the former XLA ``Igammac``; ``scipy.special.gammaincc``).

    Computed directly (not as ``1 - P``) by the continued fraction where ``x > max(1, a)``,
    else as ``1 - P`` by the series, so there its accuracy is absolute (about the machine epsilon),
    not relative, when ``Q`` is tiny; see :func:`Igamma` for the expansion. Results lie in [0, 1]. Edge values as
    scipy: ``Q(a, 0) = 1``, ``Q(a, inf) = 0``, ``Q(0, x > 0) = 0``, ``Q(inf, x) = 1``; NaN for
    ``a < 0``, ``x < 0``, ``a = x = 0``, NaN inputs.

    Parameters
    ----------
    a, x: as for :func:`Igamma`.

    Returns
    -------
    XlaOp of the common shape and the operands' element type.

    Raises
    ------
    DTypeError: an operand that is not floating-point, or element types that differ.
    ShapeError: shapes that differ (other than scalars).
    """
    return _igamma("Igammac", a, x, lower=False)


# -- derivatives of the incomplete gamma function ------------------------------------------------

def _igamma_series_grad(ax: XlaOp, x: XlaOp, a: XlaOp, enabled: XlaOp, sample: bool) -> XlaOp:
    """dP/da (or, ``sample``, the reparameterization derivative) by the differentiated power
    series (XLA's ``IgammaSeries`` in DERIVATIVE / SAMPLE_DERIVATIVE mode)."""
    eps = _eps(x)
    i0 = Constant(x.builder, np.int32(0))

    def cond(v: list[XlaOp]) -> XlaOp:
        return ew.And(ew.Lt(v[7], _IGAMMA_MAX_ITER), any_true(v[0]))

    def body(v: list[XlaOp]) -> list[XlaOp]:
        en, r, c, ans, xx, dc_da, dans_da, i = v
        r2 = r + 1.0
        dc_da2 = dc_da * (xx / r2) - (c * xx) / (r2 * r2)
        dans_da2 = dans_da + dc_da2
        c2 = c * (xx / r2)
        ans2 = ans + c2
        en2 = ew.And(en, ew.Gt(ew.Abs(dc_da2 / dans_da2), eps))
        new = [r2, c2, ans2, dc_da2, dans_da2]
        old = [r, c, ans, dc_da, dans_da]
        sel = [ew.Select(en, nv, ov) for nv, ov in zip(new, old, strict=True)]
        return [en2, sel[0], sel[1], sel[2], xx, sel[3], sel[4], i + 1]

    one, zero = _full(1.0, x), _full(0.0, x)
    out = while_loop([enabled, a, one, one, x, zero, zero, i0], cond, body)
    ans, dans_da = out[3], out[6]
    dlogax_da = ew.Log(x) - ew.Digamma(a + 1.0)
    if sample:
        return ew.Neg(dans_da + ans * dlogax_da) * x / a
    return ax * (ans * dlogax_da + dans_da) / a


def _igammac_cf_grad(ax: XlaOp, x: XlaOp, a: XlaOp, enabled: XlaOp, sample: bool) -> XlaOp:
    """dQ/da (or, ``sample``, minus the reparameterization derivative) by the differentiated
    continued fraction (XLA's ``IgammacContinuedFraction`` in DERIVATIVE / SAMPLE_DERIVATIVE mode)."""
    eps = _eps(x)
    big = 1.0 / eps
    y = 1.0 - a
    z = x + y + 1.0
    c = _full(0.0, x)
    pkm2 = _full(1.0, x)
    qkm2 = x
    pkm1 = x + 1.0
    qkm1 = z * x
    ans = pkm1 / qkm1
    t = _full(1.0, x)
    dpkm2_da = _full(0.0, x)
    dqkm2_da = _full(0.0, x)
    dpkm1_da = _full(0.0, x)
    dqkm1_da = ew.Neg(x)
    dans_da = (dpkm1_da - ans * dqkm1_da) / qkm1

    i0 = Constant(x.builder, np.int32(0))

    def cond(v: list[XlaOp]) -> XlaOp:
        return ew.And(ew.Lt(v[15], _IGAMMA_MAX_ITER), any_true(v[0]))

    def body(v: list[XlaOp]) -> list[XlaOp]:
        en, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da, i = v
        c2 = c + 1.0
        y2 = y + 1.0
        z2 = z + 2.0
        yc = y2 * c2
        pk = pkm1 * z2 - pkm2 * yc
        qk = qkm1 * z2 - qkm2 * yc
        nonzero = ew.Ne(qk, 0.0)
        r = pk / qk
        t2 = ew.Select(nonzero, ew.Abs((ans - r) / r), _full(1.0, t))
        ans2 = ew.Select(nonzero, r, ans)
        dpk_da = dpkm1_da * z2 - pkm1 - dpkm2_da * yc + pkm2 * c2
        dqk_da = dqkm1_da * z2 - qkm1 - dqkm2_da * yc + qkm2 * c2
        dans_da2 = ew.Select(nonzero, (dpk_da - ans2 * dqk_da) / qk, dans_da)
        grad_delta = ew.Select(nonzero, ew.Abs(dans_da2 - dans_da), _full(1.0, dans_da))
        rescale = ew.Gt(ew.Abs(pk), big)
        n_pkm2, n_pkm1, n_qkm2, n_qkm1, n_dpkm2, n_dqkm2, n_dpkm1, n_dqkm1 = (
            ew.Select(rescale, p * eps, p) for p in (pkm1, pk, qkm1, qk, dpkm1_da, dqkm1_da, dpk_da, dqk_da)
        )
        en2 = ew.And(en, ew.Gt(grad_delta, eps))
        new = [ans2, t2, y2, z2]
        old = [ans, t, y, z]
        rest_new = [n_pkm1, n_qkm1, n_pkm2, n_qkm2, n_dpkm2, n_dqkm2, n_dpkm1, n_dqkm1, dans_da2]
        rest_old = [pkm1, qkm1, pkm2, qkm2, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da]
        return (
            [en2] + [ew.Select(en, nv, ov) for nv, ov in zip(new, old, strict=True)] + [c2]
            + [ew.Select(en, nv, ov) for nv, ov in zip(rest_new, rest_old, strict=True)] + [i + 1]
        )

    init = [enabled, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da, i0]
    out = while_loop(init, cond, body)
    ans, dans_da = out[1], out[14]
    dlogax_da = ew.Log(x) - ew.Digamma(a)
    if sample:
        return ew.Neg(dans_da + ans * dlogax_da) * x
    return ax * (ans * dlogax_da + dans_da)


def _igamma_grad(op: str, a: Any, x: Any, sample: bool) -> XlaOp:
    (aa, xx), et = _operands(op, [("a", a), ("x", x)])
    ax, underflow = _log_ax(aa, xx)
    nan = ew.Or(_isnan(aa), _isnan(xx))
    x_zero = ew.Eq(xx, 0.0)
    domain = ew.Or(ew.Lt(xx, 0.0), ew.Le(aa, 0.0))
    enabled = ew.Not(ew.Or(ew.Or(x_zero, domain), ew.Or(underflow, nan)))
    use_cf = ew.And(ew.Gt(xx, 1.0), ew.Gt(xx, aa))
    cf = _igammac_cf_grad(ax, xx, aa, ew.And(enabled, use_cf), sample)
    series = _igamma_series_grad(ax, xx, aa, ew.And(enabled, ew.Not(use_cf)), sample)
    out = ew.Select(use_cf, ew.Neg(cf), series)
    out = ew.Select(x_zero, _full(0.0, out), out)
    out = ew.Select(ew.Or(domain, nan), _full(float("nan"), out), out)
    return _finish(out, et)


def IgammaGradA(a: XlaOp | float, x: XlaOp | float) -> XlaOp:
    """``dP(a, x)/da``, the derivative of the regularized lower incomplete gamma function in
    ``a`` (the former XLA ``IgammaGradA``).

    Expanded into XLA ops as XLA's math library and jax (``lax.igamma_grad_a``) do: the
    differentiated power series for ``x <= max(1, a)``, minus the differentiated continued
    fraction of ``Q`` otherwise, each a ``stablehlo.while`` that stops when every element has
    converged (at most 2000 steps). 0 where ``x = 0``; NaN where ``x < 0``, ``a <= 0`` or an input
    is NaN.

    Parameters
    ----------
    a, x: arrays of one element type (f16, bf16, f32 or f64) and one shape ``(...)``; either
        may be a scalar (XlaOp or Python number), broadcast to the other.

    Returns
    -------
    XlaOp of the common shape and the operands' element type.

    Raises
    ------
    DTypeError: an operand that is not floating-point, or element types that differ.
    ShapeError: shapes that differ (other than scalars).
    """
    return _igamma_grad("IgammaGradA", a, x, sample=False)


def RandomGammaGrad(a: XlaOp | float, x: XlaOp | float) -> XlaOp:
    """The derivative of a Gamma(a, 1) sample ``x`` in ``a`` with the CDF held fixed,
    ``dx/da = -(dP(a, x)/da) / (dP(a, x)/dx)`` (implicit reparameterization; the former XLA
    ``RandomGammaGrad``).

    Expanded into XLA ops as XLA's math library and jax (``lax.random_gamma_grad``) do: the
    same series and continued fraction as :func:`IgammaGradA`, in their sample-derivative form.
    0 where ``x = 0``; NaN where ``x < 0``, ``a <= 0`` or an input is NaN.

    Parameters
    ----------
    a, x: as for :func:`IgammaGradA` (``x`` a sample of Gamma(a, 1)).

    Returns
    -------
    XlaOp of the common shape and the operands' element type.

    Raises
    ------
    DTypeError: an operand that is not floating-point, or element types that differ.
    ShapeError: shapes that differ (other than scalars).
    """
    return _igamma_grad("RandomGammaGrad", a, x, sample=True)


# -- incomplete beta -----------------------------------------------------------------------------

def _betacf(a: XlaOp, b: XlaOp, x: XlaOp, enabled: XlaOp) -> XlaOp:
    """The continued fraction of I_x(a, b) (DLMF 8.17.22) by the modified Lentz method."""
    eps = _eps(x)
    tiny = float(np.finfo(x.dtype).tiny) / eps
    max_iter = 200 if x.dtype == np.float32 else 600

    def fix(v: XlaOp) -> XlaOp:
        return ew.Select(ew.Lt(ew.Abs(v), tiny), _full(tiny, v), v)

    qab = a + b
    qap = a + 1.0
    d = fix(1.0 - qab * x / qap)
    d = 1.0 / d
    c = _full(1.0, x)
    i0 = Constant(x.builder, np.int32(0))

    def cond(v: list[XlaOp]) -> XlaOp:
        return ew.And(ew.Lt(v[7], max_iter), any_true(v[0]))

    def body(v: list[XlaOp]) -> list[XlaOp]:
        en, c, d, h, aa, bb, xx, i = v
        m = ConvertElementType(i + 1, xx.dtype)
        m2 = m * 2.0
        qab, qap, qam = aa + bb, aa + 1.0, aa - 1.0
        num = m * (bb - m) * xx / ((qam + m2) * (aa + m2))
        d1 = 1.0 / fix(1.0 + num * d)
        c1 = fix(1.0 + num / c)
        h1 = h * d1 * c1
        num = -(aa + m) * (qab + m) * xx / ((aa + m2) * (qap + m2))
        d2 = 1.0 / fix(1.0 + num * d1)
        c2 = fix(1.0 + num / c1)
        delta = d2 * c2
        h2 = h1 * delta
        en2 = ew.And(en, ew.Gt(ew.Abs(delta - 1.0), eps))
        return [
            en2, ew.Select(en, c2, c), ew.Select(en, d2, d), ew.Select(en, h2, h), aa, bb, xx, i + 1,
        ]

    out = while_loop([enabled, c, d, d, a, b, x, i0], cond, body)
    return out[3]


def RegularizedIncompleteBeta(a: XlaOp | float, b: XlaOp | float, x: XlaOp | float) -> XlaOp:
    """Regularized incomplete beta function ``I_x(a, b) = B(x; a, b) / B(a, b)`` (the former
    XLA ``RegularizedIncompleteBeta``; ``scipy.special.betainc``).

    Expanded into XLA ops: the continued fraction of DLMF 8.17.22 by the modified Lentz method
    in a ``stablehlo.while`` (at most 200 steps for f32, 600 for f64), applied to ``(a, b, x)``
    when ``x < (a + 1) / (a + b + 2)`` and to ``(b, a, 1 - x)`` otherwise (``I = 1 - I'``).
    Edge values as scipy: ``I_0 = 0``, ``I_1 = 1``, ``a = 0 < b`` or ``b = inf`` gives 1, ``b = 0 < a``
    or ``a = inf`` gives 0; NaN for ``a < 0``, ``b < 0``, ``a = b = 0``, ``a = b = inf``, ``x`` outside
    ``[0, 1]`` and NaN inputs. Results lie in [0, 1]. The log of
    ``B(a, b)`` is taken as ``lgamma(a) + lgamma(b) - lgamma(a + b)``, so accuracy drops for
    ``a + b`` in the thousands and beyond.

    Parameters
    ----------
    a, b, x: arrays of one element type (f16, bf16, f32 or f64) and one shape ``(...)``; any
        may be a scalar (XlaOp or Python number), broadcast to the others.

    Returns
    -------
    XlaOp of the common shape and the operands' element type.

    Raises
    ------
    DTypeError: an operand that is not floating-point, or element types that differ.
    ShapeError: shapes that differ (other than scalars).
    """
    (aa, bb, xx), et = _operands("RegularizedIncompleteBeta", [("a", a), ("b", b), ("x", x)])
    swap = ew.Ge(xx, (aa + 1.0) / (aa + bb + 2.0))
    a1 = ew.Select(swap, bb, aa)
    b1 = ew.Select(swap, aa, bb)
    x1 = ew.Select(swap, 1.0 - xx, xx)
    ok = ew.And(ew.And(ew.Gt(a1, 0.0), ew.Gt(b1, 0.0)), ew.And(ew.Gt(x1, 0.0), ew.Lt(x1, 1.0)))
    ok = ew.And(ok, ew.And(ew.IsFinite(a1), ew.IsFinite(b1)))
    cf = _betacf(a1, b1, x1, ok)
    lbeta = ew.Lgamma(a1) + ew.Lgamma(b1) - ew.Lgamma(a1 + b1)
    res = cf * ew.Exp(ew.Log(x1) * a1 + ew.Log1p(-x1) * b1 - lbeta) / a1
    out = ew.Clamp(0.0, ew.Select(swap, 1.0 - res, res), 1.0)
    inf = float("inf")
    out = ew.Select(ew.And(ew.Eq(aa, inf), ew.Lt(bb, inf)), _full(0.0, out), out)
    out = ew.Select(ew.And(ew.Eq(bb, inf), ew.Lt(aa, inf)), _full(1.0, out), out)
    out = ew.Select(ew.Eq(xx, 0.0), _full(0.0, out), out)
    out = ew.Select(ew.Eq(xx, 1.0), _full(1.0, out), out)
    out = ew.Select(ew.And(ew.Eq(aa, 0.0), ew.Gt(bb, 0.0)), _full(1.0, out), out)
    out = ew.Select(ew.And(ew.Eq(bb, 0.0), ew.Gt(aa, 0.0)), _full(0.0, out), out)
    bad = ew.Or(ew.Or(ew.Lt(aa, 0.0), ew.Lt(bb, 0.0)), ew.Or(ew.Lt(xx, 0.0), ew.Gt(xx, 1.0)))
    bad = ew.Or(bad, ew.Or(ew.And(ew.Eq(aa, 0.0), ew.Eq(bb, 0.0)), ew.And(ew.Eq(aa, inf), ew.Eq(bb, inf))))
    bad = ew.Or(bad, ew.Or(_isnan(aa), ew.Or(_isnan(bb), _isnan(xx))))
    out = ew.Select(bad, _full(float("nan"), out), out)
    return _finish(out, et)


# -- Bessel I0e ------------------------------------------------------------------------------------

# Chebyshev coefficients of exp(-x) I0(x) on [0, 8] (in x/2 - 2) and of exp(-x) sqrt(x) I0(x)
# on [8, inf) (in 32/x - 2), from Cephes i0.c.
_I0E_A = (
    -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
    1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
    -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
    9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
    -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7,
    1.11738753912010371815e-6, -4.41673835845875056359e-6, 1.64484480707288970893e-5,
    -5.75419501008210370398e-5, 1.88502885095841655729e-4, -5.76375574538582365885e-4,
    1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
    -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2,
    1.71620901522208775349e-1, -3.04682672343198398683e-1, 6.76795274409476084995e-1,
)
_I0E_B = (
    -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
    3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
    1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
    -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
    7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
    -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
    3.39623202570838634515e-9, 2.26666899049817806459e-8, 2.04891858946906374183e-7,
    2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
    8.04490411014108831608e-1,
)


def _chbevl(x: XlaOp, coeffs: Sequence[float]) -> XlaOp:
    """Clenshaw evaluation of a Chebyshev series (Cephes chbevl)."""
    b0 = _full(coeffs[0], x)
    b1 = _full(0.0, x)
    b2 = b1
    for c in coeffs[1:]:
        b2 = b1
        b1 = b0
        b0 = x * b1 - b2 + c
    return (b0 - b2) * 0.5


def BesselI0e(x: XlaOp | float) -> XlaOp:
    """Exponentially scaled modified Bessel function of order 0, ``exp(-|x|) I0(x)`` (the former
    XLA ``BesselI0e``; ``scipy.special.i0e``).

    Expanded into XLA ops from Cephes' Chebyshev expansions (``|x| <= 8`` and ``|x| > 8``);
    even in ``x``, 1 at 0, 0 at +-inf.

    Parameters
    ----------
    x: an array of f16, bf16, f32 or f64, any shape.

    Returns
    -------
    XlaOp of the operand's shape and element type.

    Raises
    ------
    DTypeError: a non-floating-point operand.
    """
    (xx,), et = _operands("BesselI0e", [("x", x)])
    z = ew.Abs(xx)
    small = _chbevl(z * 0.5 - 2.0, _I0E_A)
    large = _chbevl(32.0 / z - 2.0, _I0E_B) / ew.Sqrt(z)
    return _finish(ew.Select(ew.Le(z, 8.0), small, large), et)
