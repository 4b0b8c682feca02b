"""Reference rules for linear algebra: Cholesky, triangular solves, batch normalization, the LAPACK
custom calls of jaxlib's CPU lowering, convolutions with ``batch_group_count``, and the small ops
around them (dimension sizes, tokens).

StableHLO ops (``stablehlo.cholesky``, ``stablehlo.triangular_solve``, the three batch norms) are
computed in float64 / complex128 from their operands and rounded once to the result type, as every
rule of :mod:`xlasdk.reference`.

LAPACK custom calls (``lapack_<t><routine>_ffi``: the ``jnp.linalg`` / ``jax.scipy.linalg``
lowerings of jaxlib on CPU) are computed by the same LAPACK routine, in the same precision
(``t`` = s, d, c, z), through :mod:`scipy.linalg.lapack`: jaxlib's CPU kernels call the LAPACK
that scipy ships, so the reference reproduces what a correct kernel returns (the Householder
representation of a QR, the sign of each eigenvector, the order of a Schur form: all choices of the
algorithm, which a float64 computation could make otherwise). What it checks is XLA's side of the
call: the layouts (column-major matrices), the batch, the attributes (``uplo``, ``mode``...), the
results' wiring. Its workspace sizes are the optimal ones LAPACK reports, as jaxlib's kernels query
them, so that blocked algorithms block alike: on jaxlib 0.10.2 and 0.12 every target of
``jnp.linalg`` / ``jax.scipy.linalg`` agrees with XLA:CPU bit for bit (``tests/test_reference_linalg.py``),
and each result carries into the ops after it the bound of an op whose work the error bounds do not
follow (one ulp of each element).
A target, a layout or an attribute the rule cannot read raises :class:`UnsupportedOpError` naming
it; nothing is guessed. scipy is an optional dependency (``pip install 'xlasdk[reference]'``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._optable import evaluates
from ..attrs import DotDimensionNumbers, TriangularSolveOptions_Transpose
from ..builder import XlaOp
from ..ops.linalg import CHOLESKY, DOT_GENERAL, TRIANGULAR_SOLVE
from ..ops.reduce import BATCH_NORM_GRAD, BATCH_NORM_INFERENCE, BATCH_NORM_TRAINING
from ._walk import (
    CUSTOM_CALL_RULES,
    Evaluator,
    Value,
    as_output,
    dtype_of,
    evaluates_opaque,
    result_shapes,
    results_of,
    widened,
)

__all__: list[str] = []


# -- dots ------------------------------------------------------------------------------------------------------
def _dot(o: XlaOp, x: np.ndarray[Any, Any], y: np.ndarray[Any, Any], dn: DotDimensionNumbers) -> Value:
    lb, rb = dn.lhs_batch_dimensions, dn.rhs_batch_dimensions
    lc, rc = dn.lhs_contracting_dimensions, dn.rhs_contracting_dimensions
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    ls = [next(letters) for _ in range(x.ndim)]
    rs = [next(letters) for _ in range(y.ndim)]
    for i, j in zip(lb, rb, strict=True):
        rs[j] = ls[i]
    for i, j in zip(lc, rc, strict=True):
        rs[j] = ls[i]
    out = [ls[i] for i in lb] + [ls[i] for i in range(x.ndim) if i not in lb and i not in lc] + [
        rs[j] for j in range(y.ndim) if j not in rb and j not in rc]
    wide_x, wide_y = widened(x), widened(y)
    if wide_x.dtype.kind in "iub":  # integers: exact in int64, wrapped to the result type
        wide_x, wide_y = wide_x.astype(np.int64), wide_y.astype(np.int64)
    with np.errstate(all="ignore"):
        r = np.einsum(f"{''.join(ls)},{''.join(rs)}->{''.join(out)}", wide_x, wide_y)
    return as_output(r, o.shape)


@evaluates(DOT_GENERAL)
def _dot_general(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    return _dot(o, a[0], a[1], ev.attr(o, "dot_dimension_numbers"))


@evaluates_opaque("stablehlo.dot")  # HLO's dot of loaded modules (ops.Dot emits dot_general)
def _plain_dot(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    x, y = a
    return _dot(o, x, y, DotDimensionNumbers([x.ndim - 1], [0]))


# -- Cholesky and triangular solves ---------------------------------------------------------------------------
def _adjoint(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return np.asarray(np.conj(np.swapaxes(x, -1, -2)))


def _hermitian_from(x: np.ndarray[Any, Any], lower: bool) -> np.ndarray[Any, Any]:
    """The Hermitian matrices whose ``lower`` (else upper) triangle is ``x``'s."""
    tri = np.tril(x) if lower else np.triu(x)
    diag = np.real(np.diagonal(x, axis1=-2, axis2=-1)) if x.dtype.kind == "c" else np.diagonal(x, axis1=-2, axis2=-1)
    h: np.ndarray[Any, Any] = tri + _adjoint(tri)
    idx = np.arange(x.shape[-1])
    h[..., idx, idx] = diag
    return h


_CHOLESKY_MARGIN = 64.0  # a pivot within this many ulps * n of the matrix's scale is too close to call


@evaluates(CHOLESKY)
def _cholesky(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """Cholesky factor of the Hermitian matrices given by the ``lower`` (else upper) triangle, in
    float64 / complex128, with the other triangle zero (as XLA:CPU returns it). A matrix that is
    not positive definite gives NaN everywhere (XLA:CPU's value). One whose smallest pivot is
    within rounding of the element type of zero (XLA may find it positive definite or not) raises
    :class:`UnsupportedOpError` rather than guess."""
    lower: bool = ev.attr(o, "lower", False)
    x = widened(np.asarray(a[0]))
    h = _hermitian_from(x, lower)
    n = x.shape[-1]
    flat = h.reshape((-1, n, n))
    out = np.full(flat.shape, np.nan, dtype=flat.dtype)
    eps = float(np.finfo(np.dtype(o.shape.numpy_dtype())).eps)
    for k, m in enumerate(flat):
        if not np.all(np.isfinite(m)):
            continue  # NaN (XLA:CPU's factor of a matrix holding NaN or inf)
        scale = float(np.max(np.abs(np.diagonal(m)), initial=0.0))
        try:
            lo = np.linalg.cholesky(m)
        except np.linalg.LinAlgError:
            lo = None
        pivots = np.abs(np.diagonal(lo)) ** 2 if lo is not None else np.zeros(0)
        if lo is not None and np.all(np.isfinite(lo)) and float(np.min(pivots, initial=np.inf)) > \
                _CHOLESKY_MARGIN * n * eps * scale:
            out[k] = lo if lower else _adjoint(lo)
        elif lo is not None or _near_definite(m, n * _CHOLESKY_MARGIN * eps * scale):
            raise ev.fail(o, f"of a matrix (batch element {k}) that is positive definite only within rounding of "
                             f"{o.shape.element_type().name} has no reference value (XLA may give its factor or NaN)")
    return as_output(out.reshape(x.shape), o.shape)


def _near_definite(m: np.ndarray[Any, Any], tol: float) -> bool:
    """Whether the smallest eigenvalue of Hermitian ``m`` is within ``tol`` of zero (or NaN)."""
    if not np.all(np.isfinite(m)):
        return False
    return bool(np.min(np.linalg.eigvalsh(m)) > -tol)


@evaluates(TRIANGULAR_SOLVE)
def _triangular_solve(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """``op(a) x = b`` (``left_side``) or ``x op(a) = b``, reading only the ``lower`` (else upper)
    triangle of ``a`` (its diagonal taken as ones with ``unit_diagonal``), ``op`` by
    ``transpose_a`` (NO_TRANSPOSE, TRANSPOSE, ADJOINT), in float64 / complex128 by substitution (a
    zero on the diagonal gives inf/NaN, as substitution does)."""
    left: bool = ev.attr(o, "left_side", False)
    lower: bool = ev.attr(o, "lower", False)
    unit: bool = ev.attr(o, "unit_diagonal", False)
    tr = ev.attr(o, "transpose_a", TriangularSolveOptions_Transpose.NO_TRANSPOSE).name
    m = widened(np.asarray(a[0]))
    b = widened(np.asarray(a[1]))
    t = np.tril(m) if lower else np.triu(m)
    if unit:
        idx = np.arange(m.shape[-1])
        t[..., idx, idx] = 1
    if tr == "TRANSPOSE":
        t, lower = np.swapaxes(t, -1, -2), not lower
    elif tr == "ADJOINT":
        t, lower = _adjoint(t), not lower
    if not left:  # x t = b  <=>  t^T x^T = b^T
        t, b, lower = np.swapaxes(t, -1, -2), np.swapaxes(b, -1, -2), not lower
    x = np.zeros(b.shape, np.result_type(t, b))
    n = t.shape[-1]
    order = range(n) if lower else range(n - 1, -1, -1)
    with np.errstate(all="ignore"):
        for i in order:
            acc = b[..., i, :] - np.einsum("...k,...kj->...j", t[..., i, :], x)
            x[..., i, :] = acc / t[..., i, i][..., None]
    if not left:
        x = np.swapaxes(x, -1, -2)
    return as_output(x, o.shape)


# -- batch normalization (rows of ops/reduce.py, computed in float64 as the linear algebra is) ------------------------
def _bn_axes(x: np.ndarray[Any, Any], f: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The reduced axes and the shape a per-feature vector broadcasts to."""
    axes = tuple(k for k in range(x.ndim) if k != f)
    shape = tuple(x.shape[f] if k == f else 1 for k in range(x.ndim))
    return axes, shape


@evaluates(BATCH_NORM_TRAINING)
def _batch_norm_training(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """``(y, mean, var)`` with ``mean``, ``var`` (biased: divided by the count) over every axis but
    ``feature_index`` and ``y = (x - mean) / sqrt(var + epsilon) * scale + offset``, in float64."""
    x, scale, offset = (widened(np.asarray(v)) for v in a)
    eps = float(ev.attr(o, "epsilon"))
    axes, shape = _bn_axes(x, ev.attr(o, "feature_index"))
    with np.errstate(all="ignore"):
        mean = np.mean(x, axis=axes)
        var = np.mean((x - mean.reshape(shape)) ** 2, axis=axes)
        y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * scale.reshape(shape) \
            + offset.reshape(shape)
    shapes = result_shapes(o)
    return results_of(o, [as_output(v, s) for v, s in zip((y, mean, var), shapes, strict=True)])


@evaluates(BATCH_NORM_INFERENCE)
def _batch_norm_inference(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """``(x - mean) / sqrt(variance + epsilon) * scale + offset`` per feature, in float64."""
    x, scale, offset, mean, var = (widened(np.asarray(v)) for v in a)
    eps = float(ev.attr(o, "epsilon"))
    _, shape = _bn_axes(x, ev.attr(o, "feature_index"))
    with np.errstate(all="ignore"):
        y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * scale.reshape(shape) \
            + offset.reshape(shape)
    return as_output(y, o.shape)


@evaluates(BATCH_NORM_GRAD)
def _batch_norm_grad(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """``(grad_operand, grad_scale, grad_offset)`` of batch_norm_training at ``mean``, ``variance``:
    with ``r = 1 / sqrt(variance + epsilon)``, ``xhat = (x - mean) r`` and N the elements per
    feature, ``grad_offset = sum(dy)``, ``grad_scale = sum(dy xhat)``, ``grad_operand = scale r /
    N (N dy - grad_offset - xhat grad_scale)``, in float64."""
    x, scale, mean, var, dy = (widened(np.asarray(v)) for v in a)
    eps = float(ev.attr(o, "epsilon"))
    f: int = ev.attr(o, "feature_index")
    axes, shape = _bn_axes(x, f)
    count = x.size // max(x.shape[f], 1)
    with np.errstate(all="ignore"):
        r = 1.0 / np.sqrt(var + eps)
        xhat = (x - mean.reshape(shape)) * r.reshape(shape)
        g_offset = np.sum(dy, axis=axes)
        g_scale = np.sum(dy * xhat, axis=axes)
        centred = count * dy - g_offset.reshape(shape) - xhat * g_scale.reshape(shape)
        g_x = (scale * r / count).reshape(shape) * centred
    shapes = result_shapes(o)
    return results_of(o, [as_output(v, s) for v, s in zip((g_x, g_scale, g_offset), shapes, strict=True)])


# -- LAPACK custom calls (jaxlib's CPU lowering of jnp.linalg) ----------------------------------------------------
_LAPACK_TYPES = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}


def _scipy_lapack() -> tuple[Any, Any] | None:
    try:
        import scipy.linalg.blas as blas  # an optional dependency: pip install "xlasdk[reference]"
        import scipy.linalg.lapack as lapack
    except ImportError:
        return None
    return lapack, blas


class _LapackCall:
    """One LAPACK custom call as the rules read it: its node, its type letter (s, d, c, z), its
    attributes (``mhlo.backend_config`` or ``backend_config``, as single characters or ints)."""

    def __init__(self, o: XlaOp, ev: Evaluator, target: str, t: str, routine: str, config: dict[str, Any],
                 lapack: Any, blas: Any) -> None:
        self.o, self.ev, self.target, self.t, self.routine = o, ev, target, t, routine
        self.config, self.lapack, self.blas = config, lapack, blas

    def fail(self, why: str) -> Exception:
        return self.ev.fail(self.o, f"to {self.target!r} {why}")

    def char(self, name: str, allowed: str) -> str:
        """The attribute ``name`` as one of the characters of ``allowed`` (XLA stores a ui8 code)."""
        v = self.config.get(name)
        c = chr(int(v)) if isinstance(v, (int, np.integer)) and 0 <= int(v) < 128 else None
        if c is None or c not in allowed:
            raise self.fail(f"with {name}={v!r} has no evaluation rule (expected one of the characters "
                            f"{', '.join(repr(x) for x in allowed)})")
        return c

    def integer(self, name: str) -> int:
        v = self.config.get(name)
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise self.fail(f"with {name}={v!r} has no evaluation rule (expected an integer)")
        return int(v)

    def fn(self, name: str, blas: bool = False) -> Any:
        return getattr(self.blas if blas else self.lapack, self.t + name)

    def lwork(self, name: str, *args: Any, **kw: Any) -> int:
        """The optimal workspace size, as jaxlib's kernels query it."""
        got = getattr(self.lapack, f"{self.t}{name}_lwork")(*args, **kw)
        return max(int(np.real(got[0])), 1)


def _fortran(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return np.array(x, order="F", copy=True)


def _ok(info: Any) -> np.ndarray[Any, Any]:
    return np.asarray(info, np.int32)


def _potrf(c: _LapackCall, a: list[np.ndarray[Any, Any]], shapes: list[tuple[int, ...]]) -> list[Any]:
    lower = c.char("uplo", "LU") == "L"
    fac, info = c.fn("potrf")(a[0], lower=int(lower), clean=0)
    return [fac, _ok(info)]


def _getrf(c: _LapackCall, a: list[np.ndarray[Any, Any]], shapes: list[tuple[int, ...]]) -> list[Any]:
    lu, piv, info = c.fn("getrf")(a[0])
    return [lu, np.asarray(piv, np.int32) + 1, _ok(info)]  # LAPACK's 1-based pivots (scipy gives 0-based)


def _trsm(c: _LapackCall, a: list[np.ndarray[Any, Any]], shapes: list[tuple[int, ...]]) -> list[Any]:
    side, uplo = c.char("side", "LR"), c.char("uplo", "LU")
    trans, diag = c.char("trans_x", "NTC"), c.char("diag", "NU")
    x = c.fn("trsm", blas=True)(1.0, a[0], a[1], side=int(side == "R"), lower=int(uplo == "L"),
                                trans_a="NTC".index(trans), diag=int(diag == "U"))
    return [x]


def _geqrf(c: _LapackCall, a: list[np.ndarray[Any, Any]], shapes: list[tuple[int, ...]]) -> list[Any]:
    m, n = a[0].shape
    qr, tau, _, _ = c.fn("geqrf")(a[0], lwork=c.lwork("geqrf", m, n))
    return [qr, tau]


def _orgqr(c: _LapackCall, a: list[np.ndarray[Any, Any]], shapes: list[tuple[int, ...]]) -> list[Any]:
    fn = c.fn(c.routine)
    _, work, _ = fn(a[0], a[1], lwork=-1)
    q, _, _ = fn(a[0], a[1], lwork=max(int(np.real(work[0])), 1))
    return [q]


def _syevd(c: _LapackCall, a: list[np.ndarray[Any, Any]], shapes: list[tuple[int, ...]]) -> list[Any]:
    vectors = c.char("mode", "VN") == "V"
    lower = c.char("uplo", "LU") == "L"
    w, v, info = c.fn(c.routine)(a[0], compute_v=int(vectors), lower=int(lower))
    return [v, w, _ok(info)]  # with mode 'N', v is the matrix as LAPACK leaves it


def _svd(c: _LapackCall, a: list[np.ndarray[Any, Any]], shapes: list[tuple[int, ...]]) -> list[Any]:
    mode = c.char("mode", "ASN")
    m, n = a[0].shape
    work = _fortran(a[0])
    kw = {"compute_uv": int(mode != "N"), "full_matrices": int(mode == "A")}
    u, s, vt, info = c.fn(c.routine)(work, lwork=c.lwork(c.routine, m, n, **kw), overwrite_a=1, **kw)
    if mode == "N":
        u, vt = np.full(shapes[2], np.nan, a[0].dtype), np.full(shapes[3], np.nan, a[0].dtype)
    return [work, s, u, vt, _ok(info)]  # the input as LAPACK leaves it, then S, U, V^H, info


def _complex_vectors(v: np.ndarray[Any, Any], wi: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Real geev's eigenvectors as complex ones: a pair ``wi[j] > 0`` stores ``v[:, j] +- i v[:, j+1]``."""
    out = v.astype(np.result_type(v.dtype, np.complex64))
    j = 0
    while j < len(wi):
        if wi[j] != 0 and j + 1 < len(wi):
            re, im = v[:, j], v[:, j + 1]
            out[:, j], out[:, j + 1] = re + 1j * im, re - 1j * im
            j += 2
        else:
            j += 1
    return out


def _geev(c: _LapackCall, a: list[np.ndarray[Any, Any]], shapes: list[tuple[int, ...]]) -> list[Any]:
    left, right = c.char("compute_left", "VN") == "V", c.char("compute_right", "VN") == "V"
    n = a[0].shape[0]
    kw = {"compute_vl": int(left), "compute_vr": int(right)}
    got = c.fn("geev")(a[0], lwork=c.lwork("geev", n, **kw), **kw)
    k = 2 if c.t in "sd" else 1  # real: wr, wi; complex: w
    vl, vr, info = got[k], got[k + 1], got[k + 2]
    if c.t in "sd":
        vl, vr = _complex_vectors(vl, got[1]), _complex_vectors(vr, got[1])
    vl = vl if left else np.full(shapes[k], np.nan, vl.dtype)
    vr = vr if right else np.full(shapes[k + 1], np.nan, vr.dtype)
    return [*got[:k], vl, vr, _ok(info)]


def _gees(c: _LapackCall, a: list[np.ndarray[Any, Any]], shapes: list[tuple[int, ...]]) -> list[Any]:
    vectors = c.char("mode", "VN") == "V"
    c.char("sort", "N")  # sorting needs a selection function the call does not carry
    fn = c.fn("gees")
    kw = {"compute_v": int(vectors), "sort_t": 0}
    work = fn(lambda *v: 0, a[0], lwork=-1, **kw)[-2]
    got = fn(lambda *v: 0, a[0], lwork=max(int(np.real(work[0])), 1), **kw)
    t, sdim = got[0], got[1]
    vs, info = got[-3], got[-1]
    vs = vs if vectors else np.full(shapes[1], np.nan, vs.dtype)
    return [t, vs, *got[2:-3], _ok(sdim), _ok(info)]


def _gehrd(c: _LapackCall, a: list[np.ndarray[Any, Any]], shapes: list[tuple[int, ...]]) -> list[Any]:
    lo, hi = c.integer("low"), c.integer("high")
    n = a[0].shape[0]
    if not 1 <= lo <= max(hi, 1) <= max(n, 1):
        raise c.fail(f"with low={lo}, high={hi} has no evaluation rule (expected 1 <= low <= high <= {n})")
    h, tau, info = c.fn("gehrd")(a[0], lo=lo - 1, hi=hi - 1, lwork=c.lwork("gehrd", n, lo=lo - 1, hi=hi - 1))
    return [h, tau[: shapes[1][-1]], _ok(info)]


def _sytrd(c: _LapackCall, a: list[np.ndarray[Any, Any]], shapes: list[tuple[int, ...]]) -> list[Any]:
    lower = c.char("uplo", "LU") == "L"
    n = a[0].shape[0]
    fac, d, e, tau, info = c.fn(c.routine)(a[0], lower=int(lower), lwork=c.lwork(c.routine, n, lower=int(lower)))
    return [fac, d, e, tau, _ok(info)]


_Routine = Callable[[_LapackCall, list[np.ndarray[Any, Any]], list[tuple[int, ...]]], list[Any]]
#: routine -> (rule, the backend_config keys it reads, the type letters it takes, its operands' matrix ranks
#: beyond the batch, its results' ranks beyond the batch)
_ROUTINES: dict[str, tuple[_Routine, frozenset[str], str, tuple[int, ...], tuple[int, ...]]] = {
    "potrf": (_potrf, frozenset({"uplo"}), "sdcz", (2,), (2, 0)),
    "getrf": (_getrf, frozenset(), "sdcz", (2,), (2, 1, 0)),
    "trsm": (_trsm, frozenset({"side", "uplo", "trans_x", "diag"}), "sdcz", (2, 2), (2,)),
    "geqrf": (_geqrf, frozenset(), "sdcz", (2,), (2, 1)),
    "orgqr": (_orgqr, frozenset(), "sd", (2, 1), (2,)),
    "ungqr": (_orgqr, frozenset(), "cz", (2, 1), (2,)),
    "syevd": (_syevd, frozenset({"mode", "uplo"}), "sd", (2,), (2, 1, 0)),
    "heevd": (_syevd, frozenset({"mode", "uplo"}), "cz", (2,), (2, 1, 0)),
    "gesdd": (_svd, frozenset({"mode"}), "sdcz", (2,), (2, 1, 2, 2, 0)),
    "gesvd": (_svd, frozenset({"mode"}), "sdcz", (2,), (2, 1, 2, 2, 0)),
    "geev": (_geev, frozenset({"compute_left", "compute_right"}), "sdcz", (2,), ()),
    "gees": (_gees, frozenset({"mode", "sort"}), "sdcz", (2,), ()),
    "gehrd": (_gehrd, frozenset({"low", "high"}), "sdcz", (2,), (2, 1, 0)),
    "sytrd": (_sytrd, frozenset({"uplo"}), "sd", (2,), (2, 1, 1, 1, 0)),
    "hetrd": (_sytrd, frozenset({"uplo"}), "cz", (2,), (2, 1, 1, 1, 0)),
}
_RESULT_RANKS = {  # the routines whose result ranks depend on the type (real or complex)
    ("geev", True): (1, 1, 2, 2, 0), ("geev", False): (1, 2, 2, 0),
    ("gees", True): (2, 2, 1, 1, 0, 0), ("gees", False): (2, 2, 1, 0, 0),
}


def _layout_ok(layout: Any, rank: int, matrix: bool) -> bool:
    """Whether ``layout`` (minor to major) is what a LAPACK kernel reads: matrices column-major in
    their last two dimensions, the batch major; vectors and scalars in the default order."""
    want = [rank - 2, rank - 1, *range(rank - 3, -1, -1)] if matrix else list(range(rank - 1, -1, -1))
    try:
        return [int(v) for v in np.asarray(layout).reshape(-1)] == want
    except (TypeError, ValueError):
        return False


def _lapack_config(o: XlaOp, ev: Evaluator) -> dict[str, Any] | None:
    """The call's attributes: ``mhlo.backend_config`` (StableHLO) or ``backend_config`` (HLO); None
    when neither is a dictionary (or an empty one)."""
    for name in ("mhlo.backend_config", "backend_config"):
        v = ev.attr(o, name)
        if isinstance(v, dict) and v:
            return dict(v)
    for name in ("mhlo.backend_config", "backend_config"):
        v = ev.attr(o, name)
        if not (v is None or v == "" or (isinstance(v, dict) and not v)):
            return None
    return {}


def _lapack_rule(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """A ``lapack_<t><routine>_ffi`` custom call of jaxlib's CPU lowering, by the same LAPACK
    routine through scipy (see the module's docstring), batch element by batch element."""
    target = str(ev.attr(o, "call_target_name"))
    t, routine = target[len("lapack_")], target[len("lapack_") + 1: -len("_ffi")]
    spec = _ROUTINES.get(routine)
    if spec is None or t not in spec[2]:
        raise ev.fail(o, f"to {target!r} has no evaluation rule (a LAPACK routine the reference does not know)")
    fn, keys, _, op_ranks, res_ranks = spec
    res_ranks = _RESULT_RANKS.get((routine, t in "sd"), res_ranks)
    mods = _scipy_lapack()
    if mods is None:
        raise ev.fail(o, f"to {target!r} needs scipy for its reference values (scipy.linalg.lapack): pip install "
                         "'xlasdk[reference]'")
    config = _lapack_config(o, ev)
    if config is None or set(config) - keys:
        raise ev.fail(o, f"to {target!r} with backend_config {config!r} has no evaluation rule (expected the keys "
                         f"{sorted(keys)})")
    call = _LapackCall(o, ev, target, t, routine, config, *mods)
    dtype = np.dtype(_LAPACK_TYPES[t])
    xs_ = [np.asarray(v) for v in a]
    res_shapes = result_shapes(o)
    one_tuple = len(res_shapes) == 1 and res_shapes[0].is_tuple()  # HLO's form: one tuple-shaped result
    if one_tuple:
        res_shapes = list(res_shapes[0].tuple_shapes())
    shapes = [tuple(s.dimensions()) for s in res_shapes]
    if len(xs_) != len(op_ranks) or len(shapes) != len(res_ranks) or xs_[0].ndim < 2:
        raise call.fail(f"with {len(xs_)} operands and {len(shapes)} results has no evaluation rule (expected "
                        f"{len(op_ranks)} and {len(res_ranks)}, the first a matrix)")
    nb = xs_[0].ndim - 2
    declared = ev.attr(o, "mhlo.frontend_attributes")
    declared = declared.get("num_batch_dims") if isinstance(declared, dict) else None
    if declared is not None and str(declared) != str(nb):
        raise call.fail(f"with num_batch_dims={declared!r} has no evaluation rule (expected {nb}: the operand's "
                        "dimensions but the last two)")
    batch = xs_[0].shape[:nb]
    for k, (x, r) in enumerate(zip(xs_, op_ranks, strict=True)):
        if x.ndim != nb + r or x.shape[:nb] != batch or x.dtype != dtype:
            raise call.fail(f"with operand {k} of {x.dtype}{list(x.shape)} has no evaluation rule (expected "
                            f"{dtype} with the batch {list(batch)} and {r} more dimensions)")
    for k, (s, r) in enumerate(zip(shapes, res_ranks, strict=True)):
        if len(s) != nb + r or s[:nb] != batch:
            raise call.fail(f"with result {k} of shape {list(s)} has no evaluation rule (expected the batch "
                            f"{list(batch)} and {r} more dimensions)")
    for which, ranks, n in (("operand", [x.ndim for x in xs_], len(xs_)), ("result", [len(s) for s in shapes],
                                                                          len(shapes))):
        layouts = ev.attr(o, f"{which}_layouts")
        if not isinstance(layouts, (list, tuple)) or len(layouts) != n or not all(
                _layout_ok(la, r, r == nb + 2) for la, r in zip(layouts, ranks, strict=True)):
            raise call.fail(f"with {which}_layouts {layouts!r} has no evaluation rule (expected matrices "
                            "column-major, the batch major)")
    outs = [np.zeros(s, dtype_of(sh)) for s, sh in zip(shapes, res_shapes, strict=True)]
    per = [s[nb:] for s in shapes]
    with np.errstate(all="ignore"):
        for idx in np.ndindex(*batch):
            got = fn(call, [x[idx] for x in xs_], per)
            for out, g in zip(outs, got, strict=True):
                out[idx] = np.asarray(g).reshape(out[idx].shape) if np.ndim(out[idx]) else g
    values = [as_output(v, s) for v, s in zip(outs, res_shapes, strict=True)]
    return tuple(values) if one_tuple else results_of(o, values)


for _name in _ROUTINES:
    for _t in _ROUTINES[_name][2]:
        CUSTOM_CALL_RULES[f"lapack_{_t}{_name}_ffi"] = _lapack_rule


# -- XLA's own linear-algebra custom calls (the forms other platforms compile LAPACK calls to) ------------------
# ``Qr`` and ``ProductOfElementaryHouseholderReflectors`` (XLA's QrExpander: every platform) and the TPU's
# ``LuDecomposition`` (:mod:`xlasdk.runtime._lapack_lowering`): row-major operands, a tuple or one array out. ``Qr``
# and ``LuDecomposition`` by LAPACK's ``geqrf`` / ``getrf`` through scipy in the operand's precision (the same
# algorithm, so the same Householder vectors and pivots as a correct kernel); the product of reflectors by its
# definition, ``Q = H_0 H_1 ... H_{k-1}`` applied to the identity's first ``n`` columns, in float64/complex128.

_XLA_CALL_TYPES = {np.dtype(np.float32): "s", np.dtype(np.float64): "d", np.dtype(np.complex64): "c",
                   np.dtype(np.complex128): "z"}


def _xla_call_operands(o: XlaOp, a: list[Value], ev: Evaluator, count: int) -> tuple[list[np.ndarray[Any, Any]], str]:
    target = str(ev.attr(o, "call_target_name"))
    xs_ = [np.asarray(v) for v in a]
    t = _XLA_CALL_TYPES.get(xs_[0].dtype) if xs_ else None
    if len(xs_) != count or t is None or xs_[0].ndim < 2:
        got = ", ".join(f"{x.dtype}{list(x.shape)}" for x in xs_)
        raise ev.fail(o, f"to {target!r} with operands ({got}) has no evaluation rule (expected {count}, the first an "
                         "f32, f64, c64 or c128 matrix)")
    return xs_, t


def _lapack_module(o: XlaOp, ev: Evaluator) -> Any:
    mods = _scipy_lapack()
    if mods is None:
        raise ev.fail(o, f"to {ev.attr(o, 'call_target_name')!r} needs scipy for its reference values "
                         "(scipy.linalg.lapack): pip install 'xlasdk[reference]'")
    return mods[0]


def _swaps_to_permutation(piv: np.ndarray[Any, Any], m: int) -> np.ndarray[Any, Any]:
    perm = np.arange(m, dtype=np.int32)
    for i, j in enumerate(piv):
        perm[[i, j]] = perm[[j, i]]
    return perm


def _lu_decomposition(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """The TPU's ``LuDecomposition``: ``(lu, pivots 0-based, permutation)``, LAPACK's ``getrf``."""
    (x,), t = _xla_call_operands(o, a, ev, 1)
    lapack = _lapack_module(o, ev)
    m, n = x.shape[-2:]
    lu = np.array(x, copy=True)
    piv = np.zeros(x.shape[:-2] + (min(m, n),), np.int32)
    perm = np.zeros(x.shape[:-2] + (m,), np.int32)
    with np.errstate(all="ignore"):
        for idx in np.ndindex(*x.shape[:-2]):
            if min(m, n) == 0:
                perm[idx] = np.arange(m)
                continue
            f, p, _ = getattr(lapack, t + "getrf")(x[idx])
            lu[idx], piv[idx], perm[idx] = f, p, _swaps_to_permutation(np.asarray(p), m)
    shapes = result_shapes(o)
    leaves = list(shapes[0].tuple_shapes()) if len(shapes) == 1 and shapes[0].is_tuple() else shapes
    values = [as_output(v, s) for v, s in zip((lu, piv, perm), leaves, strict=True)]
    return tuple(values)


def _qr_call(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """XLA's ``Qr``: ``(q_and_r, taus)`` in LAPACK ``geqrf``'s convention."""
    (x,), t = _xla_call_operands(o, a, ev, 1)
    lapack = _lapack_module(o, ev)
    m, n = x.shape[-2:]
    qr = np.array(x, copy=True)
    taus = np.zeros(x.shape[:-2] + (min(m, n),), x.dtype)
    with np.errstate(all="ignore"):
        for idx in np.ndindex(*x.shape[:-2]):
            if min(m, n) == 0:
                continue
            lwork = max(int(np.real(getattr(lapack, t + "geqrf_lwork")(m, n)[0])), 1)
            f, tau, _, _ = getattr(lapack, t + "geqrf")(x[idx], lwork=lwork)
            qr[idx], taus[idx] = f, tau
    shapes = result_shapes(o)
    leaves = list(shapes[0].tuple_shapes()) if len(shapes) == 1 and shapes[0].is_tuple() else shapes
    return tuple(as_output(v, s) for v, s in zip((qr, taus), leaves, strict=True))


def _householder_product(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """XLA's ``ProductOfElementaryHouseholderReflectors``: the first ``n`` columns of
    ``prod_i (I - taus[i] v_i v_i^H)``, ``v_i`` column ``i`` of ``a`` below the diagonal, 1 on it."""
    (x, taus), _ = _xla_call_operands(o, a, ev, 2)
    m, n = x.shape[-2:]
    k = taus.shape[-1]
    wide = np.complex128 if np.iscomplexobj(x) else np.float64
    out = np.zeros(x.shape, wide)
    with np.errstate(all="ignore"):
        for idx in np.ndindex(*x.shape[:-2]):
            q = np.eye(m, n, dtype=wide)
            for i in reversed(range(k)):
                v = np.zeros(m, wide)
                v[i] = 1
                v[i + 1:] = x[idx][i + 1:, i]
                q = q - np.outer(taus[idx][i] * v, np.conj(v) @ q)
            out[idx] = q
    (shape,) = result_shapes(o)
    return as_output(out, shape)


CUSTOM_CALL_RULES["LuDecomposition"] = _lu_decomposition
CUSTOM_CALL_RULES["Qr"] = _qr_call
CUSTOM_CALL_RULES["ProductOfElementaryHouseholderReflectors"] = _householder_product
