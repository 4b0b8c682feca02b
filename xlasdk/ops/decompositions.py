"""Matrix decompositions built from other ops or from XLA's own custom calls: ``QR``,
``QrDecomposition``, ``ProductOfElementaryHouseholderReflectors``, ``Eigh`` (Jacobi sweeps),
``SVD`` (one-sided Jacobi); ``LU`` lives in :mod:`xlasdk.ops.lu`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._mlir_attrs import I32
from ..builder import XlaBuilder, XlaOp
from ..shape import Shape
from ..types import COMPLEX, PrimitiveType, etype_to_dtype
from . import elementwise as ew
from ._core import array_shape, bool_arg, dtype_error, shape_error, show
from ._core import operand as _operand
from .control import GetTupleElement
from .custom_call import CUSTOM_CALL
from .linalg import REAL_OF, expanded_check, matrix_check, matrix_operand
from .reduce import Reduce
from .shaping import BroadcastInDim, ConcatInDim, Pad, Slice, Transpose
from .sort import Sort
from .sources import Constant, Iota, constant_like
from .special import any_true, while_loop

__all__ = ["QR", "Eigh", "SVD", "QrDecomposition", "ProductOfElementaryHouseholderReflectors"]


# -- small building blocks of the decompositions ----------------------------------------------------

def _iota(b: XlaBuilder, dims: tuple[int, ...], dim: int) -> XlaOp:
    return Iota(b, array_shape(PrimitiveType.S32, dims, "linalg"), dim)


def _tri_mask(b: XlaBuilder, dims: tuple[int, ...], direction: str) -> XlaOp:
    """pred ``(..., m, n)``: ``row <direction> col`` on the last two dimensions."""
    r = len(dims)
    return ew.Compare(_iota(b, dims, r - 2), _iota(b, dims, r - 1), direction)


def _zeros(like: XlaOp) -> XlaOp:
    return constant_like("linalg", 0, like)


def _eye(b: XlaBuilder, et: PrimitiveType, dims: tuple[int, ...]) -> XlaOp:
    proto = Constant(b, np.zeros((), dtype=etype_to_dtype(et)))
    one = ew.broadcast_to(constant_like("linalg", 1, proto), dims, ())
    return ew.Select(_tri_mask(b, dims, "EQ"), one, ew.broadcast_to(proto, dims, ()))


def _sum(x: XlaOp, axis: int) -> XlaOp:
    b = x.builder
    zero = Constant(b, np.zeros((), dtype=x.dtype))
    return Reduce(b, x, zero, ew.Add, [axis % x.shape.rank()])


def _conj(x: XlaOp) -> XlaOp:
    return ew.Conj(x) if x.shape.element_type() in COMPLEX else x


def _abs2(x: XlaOp) -> XlaOp:
    """``|x|^2`` in the real type."""
    if x.shape.element_type() in COMPLEX:
        return ew.Square(ew.Real(x)) + ew.Square(ew.Imag(x))
    return x * x


def _to(x: XlaOp, et: PrimitiveType) -> XlaOp:
    """A real array as element type ``et`` (complex with zero imaginary part when ``et`` is)."""
    if et in COMPLEX and x.shape.element_type() not in COMPLEX:
        return ew.Complex(x, _zeros(x))
    return x


def _adjoint(x: XlaOp) -> XlaOp:
    r = x.shape.rank()
    return _conj(Transpose(x, list(range(r - 2)) + [r - 1, r - 2]))


def _diag(x: XlaOp) -> XlaOp:
    """The diagonal ``(..., k)`` of square matrices ``(..., k, k)``."""
    return _sum(ew.Select(_tri_mask(x.builder, x.shape.dimensions(), "EQ"), x, _zeros(x)), -1)


def _slice2(x: XlaOp, rows: tuple[int, int], cols: tuple[int, int]) -> XlaOp:
    d = x.shape.dimensions()
    lead = len(d) - 2
    return Slice(x, [0] * lead + [rows[0], cols[0]], list(d[:lead]) + [rows[1], cols[1]], [1] * len(d))


def _split(x: XlaOp, axis: int, k: int) -> tuple[XlaOp, XlaOp]:
    """``x`` cut along ``axis`` (-2 rows, -1 columns) into the first ``k`` and the rest."""
    d = x.shape.dimensions()
    rows, cols = (0, d[-2]), (0, d[-1])
    if axis == -2:
        return _slice2(x, (0, k), cols), _slice2(x, (k, d[-2]), cols)
    return _slice2(x, rows, (0, k)), _slice2(x, rows, (k, d[-1]))


def _concat(parts: list[XlaOp], axis: int) -> XlaOp:
    parts = [p for p in parts if p.shape.dimensions()[axis] > 0]
    if len(parts) == 1:
        return parts[0]
    return ConcatInDim(parts[0].builder, parts, parts[0].shape.rank() + axis)


def _permute(x: XlaOp, axis: int, runs: list[tuple[int, int]]) -> XlaOp:
    """Rows (axis -2) or columns (axis -1) of ``x`` reordered: the ranges ``runs`` (``[start, stop)``
    of old positions) placed one after the other (see :func:`_round_robin`)."""
    if len(runs) <= 1:
        return x
    d = x.shape.dimensions()
    full = (0, d[-2]), (0, d[-1])
    parts = [_slice2(x, r, full[1]) if axis == -2 else _slice2(x, full[0], r) for r in runs]
    return _concat(parts, axis)


def _round_robin(k: int) -> list[tuple[int, int]]:
    """One step of the round-robin tournament on positions ``[top 0..k-1 | bottom k..2k-1]``
    (pairs ``(i, k + i)``): position 0 stays, the other ``2k - 1`` move one place around the
    circle. After ``2k - 1`` steps every two indices have been paired once and the order is back.

    The new order is ``0, k, 1..k-2 | k+1..2k-1, k-1``, returned as runs of consecutive old
    positions (at most five, whatever ``k``: nothing here grows with the matrix size)."""
    if k <= 1:
        return [(0, 2 * k)]
    runs: list[tuple[int, int]] = []
    for start, stop in ((0, 1), (k, k + 1), (1, k - 1), (k + 1, 2 * k), (k - 1, k)):
        if stop <= start:
            continue
        if runs and runs[-1][1] == start:
            runs[-1] = (runs[-1][0], stop)
        else:
            runs.append((start, stop))
    return runs


def _rows_vec(v: XlaOp, dims: tuple[int, ...], axis: int) -> XlaOp:
    """``(..., k)`` broadcast to ``dims`` = ``(..., k, N)`` (axis -2) or ``(..., N, k)`` (axis -1)."""
    lead = len(dims) - 2
    return BroadcastInDim(v, dims, list(range(lead)) + [len(dims) + axis])


def _jacobi_rotation(
    app: XlaOp, aqq: XlaOp, apq: XlaOp, tol: float
) -> tuple[XlaOp, XlaOp, XlaOp, XlaOp]:
    """Rotation ``J = [[c, s z], [-s conj(z), c]]`` with ``J^H [[app, apq], [conj(apq), aqq]] J``
    diagonal (Golub & Van Loan's symmetric Schur 2x2, with the phase ``z = apq / |apq|``).

    ``app``/``aqq`` are real ``(..., k)``; ``apq`` real or complex. Pairs with ``|apq| <= tol *
    sqrt(|app| |aqq|)`` are left alone (``c = 1, s = 0``). Returns ``(c, s*z, s*conj(z), active)``
    in ``apq``'s type, ``active`` a pred of the pairs rotated.
    """
    et = apq.shape.element_type()
    ap = ew.Sqrt(_abs2(apq)) if et in COMPLEX else ew.Abs(apq)
    thresh = ew.Sqrt(ew.Abs(app)) * ew.Sqrt(ew.Abs(aqq)) * tol
    active = ew.Gt(ap, thresh)
    safe_ap = ew.Select(active, ap, constant_like("linalg", 1, ap))
    tau = (aqq - app) / (safe_ap * 2.0)
    sign = ew.Select(ew.Ge(tau, 0.0), constant_like("linalg", 1, tau), constant_like("linalg", -1, tau))
    t = sign / (ew.Abs(tau) + ew.Sqrt(tau * tau + 1.0))
    t = ew.Select(active, t, _zeros(t))
    active = ew.And(active, ew.Ne(t, 0.0))
    c = ew.Rsqrt(t * t + 1.0)
    s = t * c
    if et in COMPLEX:
        z = apq / _to(safe_ap, et)
        sz = z * _to(s, et)
        return _to(c, et), sz, _conj(sz), active
    z = ew.Select(ew.Ge(apq, 0.0), constant_like("linalg", 1, apq), constant_like("linalg", -1, apq))
    sz = s * z
    return c, sz, sz, active


def _rotate(x: XlaOp, axis: int, k: int, c: XlaOp, s_p: XlaOp, s_q: XlaOp) -> XlaOp:
    """Rotate the pairs ``(i, k + i)`` of rows (axis -2) or columns (axis -1) of ``x``:
    ``p' = c p - s_p q`` and ``q' = s_q p + c q`` (with per-pair ``c, s_p, s_q`` of shape (..., k))."""
    p, q = _split(x, axis, k)
    dims = p.shape.dimensions()
    cb, pb, qb = (_rows_vec(v, dims, axis) for v in (c, s_p, s_q))
    return _concat([cb * p - pb * q, qb * p + cb * q], axis)


def _jacobi_sweeps(
    x: XlaOp, v: XlaOp, k: int, max_iter: int, round_body: Callable[[list[XlaOp]], list[XlaOp]]
) -> tuple[XlaOp, XlaOp]:
    """The sweep loop of the Jacobi methods: sweeps of ``2k - 1`` rounds of
    ``round_body([x, v, moved, i]) -> [x', v', moved or rotated, i + 1]``, in nested
    ``stablehlo.while`` loops, until a sweep rotates nothing or ``max_iter`` sweeps ran."""
    rounds = 2 * k - 1
    b = x.builder
    zero = Constant(b, np.int32(0))

    def sweep(vals: list[XlaOp]) -> list[XlaOp]:
        x, v, _, n = vals
        no = Constant(x.builder, np.bool_(False))
        x, v, moved, _ = while_loop(
            [x, v, no, Constant(x.builder, np.int32(0))], lambda u: ew.Lt(u[3], rounds), round_body
        )
        return [x, v, moved, n + 1]

    def more(vals: list[XlaOp]) -> XlaOp:
        return ew.And(vals[2], ew.Lt(vals[3], max_iter))

    x, v, _, _ = while_loop([x, v, Constant(b, np.bool_(True)), zero], more, sweep)
    return x, v


def _eigh_sweeps(a: XlaOp, v: XlaOp, k: int, tol: float, max_iter: int) -> tuple[XlaOp, XlaOp]:
    """Cyclic two-sided Jacobi on Hermitian ``a (..., 2k, 2k)``, accumulating ``v``: sweeps of
    ``2k - 1`` rounds of ``k`` disjoint rotations (round-robin order) until a sweep rotates nothing
    or ``max_iter`` sweeps ran. The pairing order is back to the start after each sweep."""
    perm = _round_robin(k)

    def round_body(vals: list[XlaOp]) -> list[XlaOp]:
        a, v, moved, i = vals
        dims = a.shape.dimensions()
        r = len(dims)
        row, col = _iota(a.builder, dims, r - 2), _iota(a.builder, dims, r - 1)
        pivots = ew.Or(ew.Eq(col, row + k), ew.Eq(row, col + k))
        tl, br = _diag(_slice2(a, (0, k), (0, k))), _diag(_slice2(a, (k, 2 * k), (k, 2 * k)))
        tr = _diag(_slice2(a, (0, k), (k, 2 * k)))
        if tl.shape.element_type() in COMPLEX:
            tl, br = ew.Real(tl), ew.Real(br)
        c, sz, szc, active = _jacobi_rotation(tl, br, tr, tol)
        a = _rotate(a, -2, k, c, sz, szc)     # J^H a: p' = c p - s z q, q' = s conj(z) p + c q
        a = _rotate(a, -1, k, c, szc, sz)     # (J^H a) J: p' = c p - s conj(z) q, q' = s z p + c q
        a = ew.Select(pivots, _zeros(a), a)   # the rotated entries are zero; drop their rounding noise
        v = _rotate(v, -1, k, c, szc, sz)
        a = _permute(_permute(a, -2, perm), -1, perm)
        v = _permute(v, -1, perm)
        return [a, v, ew.Or(moved, any_true(active)), i + 1]

    return _jacobi_sweeps(a, v, k, max_iter, round_body)


def _svd_sweeps(w: XlaOp, v: XlaOp, k: int, tol: float, max_iter: int) -> tuple[XlaOp, XlaOp]:
    """One-sided (Hestenes) Jacobi on the columns of ``w (..., m, 2k)``, accumulating ``v``:
    rotates column pairs until all are orthogonal to ``tol`` (relative) or ``max_iter`` sweeps."""
    perm = _round_robin(k)

    def round_body(vals: list[XlaOp]) -> list[XlaOp]:
        w, v, moved, i = vals
        p, q = _split(w, -1, k)
        alpha = _sum(_abs2(p), -2)
        beta = _sum(_abs2(q), -2)
        gamma = _sum(_conj(p) * q, -2)
        c, sz, szc, active = _jacobi_rotation(alpha, beta, gamma, tol)
        w = _permute(_rotate(w, -1, k, c, szc, sz), -1, perm)
        v = _permute(_rotate(v, -1, k, c, szc, sz), -1, perm)
        return [w, v, ew.Or(moved, any_true(active)), i + 1]

    return _jacobi_sweeps(w, v, k, max_iter, round_body)


def _scale(x: XlaOp) -> tuple[XlaOp, XlaOp]:
    """``(x / m, m)`` with ``m (...)`` the largest magnitude of each matrix (1 where it is 0 or
    not finite), so that sums of squares neither overflow nor underflow."""
    b = x.builder
    mag = ew.Abs(x)
    zero = Constant(b, np.zeros((), dtype=mag.dtype))
    r = x.shape.rank()
    m = Reduce(b, mag, zero, ew.Max, [r - 2, r - 1])
    m = ew.Select(ew.And(ew.IsFinite(m), ew.Gt(m, 0.0)), m, constant_like("linalg", 1, m))
    mb = BroadcastInDim(_to(m, x.shape.element_type()), x.shape.dimensions(), list(range(r - 2)))
    return x / mb, m


def _pad_last2(x: XlaOp, rows: int, cols: int) -> XlaOp:
    if rows == 0 and cols == 0:
        return x
    r = x.shape.rank()
    zero = Constant(x.builder, np.zeros((), dtype=x.dtype))
    return Pad(x, zero, [(0, 0, 0)] * (r - 2) + [(0, rows, 0), (0, cols, 0)])


def _sort_columns(keys: XlaOp, mats: list[XlaOp], descending: bool) -> tuple[XlaOp, list[XlaOp]]:
    """Sort ``keys (..., N)`` (stable) and reorder the columns of each ``(..., r, N)`` matrix alike."""
    b = keys.builder

    def cmp(*args: XlaOp) -> XlaOp:
        return ew.Gt(args[0], args[1]) if descending else ew.Lt(args[0], args[1])

    out = []
    for m in mats:
        kb = _rows_vec(keys, m.shape.dimensions(), -1)
        out.append(GetTupleElement(Sort(b, [kb, m], -1, True, cmp), 1))
    return Sort(b, [keys], -1, True, lambda x, y: cmp(x, y)), out


_MAX_ITER = 2**31 - 1  # the sweep counter is an s32


def _check_iter(op: str, max_iter: Any, epsilon: Any) -> tuple[int, float | None]:
    if isinstance(max_iter, (bool, np.bool_)) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        shape_error(op, f"max_iter must be an int >= 1, got {show(max_iter)}")
    if max_iter > _MAX_ITER:
        shape_error(op, f"max_iter must be < 2**31 (the sweep counter is an s32), got {max_iter}")
    eps: float | None = None
    if epsilon is not None:
        if isinstance(epsilon, (bool, np.bool_)) or not isinstance(epsilon, (int, float, np.integer, np.floating)):
            dtype_error(op, f"epsilon must be a float, got {show(epsilon)}")
        try:
            eps = float(epsilon)
        except OverflowError:  # an int too large for a float
            eps = float("inf")
        if not 0 <= eps < 1:
            shape_error(op, f"epsilon must be in [0, 1), got {show(epsilon)}")
    return int(max_iter), eps


# -- shape rules ------------------------------------------------------------------------------------

def qr_shapes(op: str, a: Shape, full_matrices: bool) -> tuple[Shape, Shape]:
    """Shapes ``(q, r)`` of QR; raises DTypeError/ShapeError on a bad or too large matrix."""
    d = matrix_check(op, "operand", a, square=False)
    lead, (m, n) = d[:-2], d[-2:]
    k = min(m, n)
    expanded_check(op, "operand", a, m if full_matrices else k,
                   "number of rows" if full_matrices else "smaller dimension")
    et = a.element_type()
    q = array_shape(et, lead + ((m, m) if full_matrices else (m, k)), op)
    array_shape(et, lead + (k,), op)  # the Householder scale factors
    return q, (a if full_matrices else array_shape(et, lead + (k, n), op))


def qr_decomposition_shapes(op: str, a: Shape) -> tuple[Shape, Shape]:
    """Shapes ``(q_and_r, taus)`` of QrDecomposition; raises DTypeError/ShapeError on a bad matrix."""
    d = matrix_check(op, "operand", a, square=False)
    expanded_check(op, "operand", a, min(d[-2:]), "smaller dimension")
    return a, array_shape(a.element_type(), d[:-2] + (min(d[-2:]),), op)


def householder_product_shape(op: str, a: Shape, taus: Shape) -> Shape:
    """Result shape of ProductOfElementaryHouseholderReflectors (``a``'s); raises
    DTypeError/ShapeError when ``a`` is not ``(..., m >= n)`` or ``taus`` not ``(..., k <= n)``."""
    d = matrix_check(op, "a", a, square=False)
    if d[-2] < d[-1]:
        shape_error(op, f"operand 'a' must have m >= n in its last two dimensions (..., m, n), got {a}")
    expanded_check(op, "a", a, d[-1], "number of columns")
    if taus.element_type() != a.element_type():
        dtype_error(
            op, f"operand 'taus' has element type {taus}, expected {show(a.numpy_dtype())} like "
            f"'a' {a}"
        )
    td = taus.dimensions()
    if len(td) != len(d) - 1 or td[:-1] != d[:-2]:
        shape_error(op, f"operand 'taus' has shape {taus}, expected (..., k) with the batch dimensions of 'a' {a}")
    if td[-1] > d[-1]:
        shape_error(op, f"operand 'taus' has {td[-1]} reflectors, more than the {d[-1]} columns of 'a' {a}")
    return a


def eigh_shapes(op: str, a: Shape) -> tuple[Shape, Shape]:
    """Shapes ``(v, w)`` of Eigh; raises DTypeError/ShapeError on a bad matrix or a too large padded one."""
    d = matrix_check(op, "a", a)
    n, et = d[-1], a.element_type()
    array_shape(et, d[:-2] + (n + n % 2, n + n % 2), op)  # the padded matrix the sweeps work on
    return a, array_shape(REAL_OF[et], d[:-2] + (n,), op)


def svd_shapes(op: str, a: Shape, full_matrices: bool) -> tuple[Shape, Shape, Shape]:
    """Shapes ``(u, s, v)`` of SVD; raises DTypeError/ShapeError on a bad matrix or too large work matrices."""
    d = matrix_check(op, "a", a, square=False)
    m, n = d[-2:]
    full = full_matrices
    expanded_check(op, "a", a, max(m, n) if full else min(m, n), "larger dimension" if full else "smaller dimension")
    lead, (big, small), et = d[:-2], (max(m, n), min(m, n)), a.element_type()
    for dims in (lead + (big, small + 1), lead + (small + 1, small + 1), lead + ((big, big) if full else (big, small))):
        array_shape(et, dims, op)  # the work matrices and u: checked before building anything
    u = array_shape(et, lead + ((m, m) if full else (m, small)), op)
    v = array_shape(et, lead + ((n, n) if full else (n, small)), op)
    return u, array_shape(REAL_OF[et], lead + (small,), op), v


def QR(operand: XlaOp, full_matrices: bool = True) -> tuple[XlaOp, XlaOp]:
    """QR decomposition ``a = q @ r`` by Householder reflections (the former XLA ``QR``).

    Lowered to XLA's ``Qr`` and ``ProductOfElementaryHouseholderReflectors`` custom calls, which
    XLA expands into ops (its ``QrExpander``), plus slicing and masking.

    Parameters
    ----------
    operand: ``(..., m, n)`` of f32, f64, c64 or c128.
    full_matrices: True for ``q (..., m, m)`` and ``r (..., m, n)``; False for the reduced
        ``q (..., m, k)`` and ``r (..., k, n)`` with ``k = min(m, n)``.

    Returns
    -------
    A Python tuple ``(q, r)``: ``q`` with orthonormal columns (``q^H q = I``), ``r`` upper
    triangular (zeros below the diagonal). The signs of ``r``'s diagonal are not normalized.

    Raises
    ------
    ShapeError: rank < 2, or more than 65536 rows with ``full_matrices`` (without, a smaller
        dimension over 65536; :data:`MAX_EXPANDED_DIM`).
    DTypeError: another element type, or ``full_matrices`` not a bool.
    """
    op = "QR"
    x = _operand(op, "operand", operand)
    full = bool_arg(op, "full_matrices", full_matrices)
    qr_shapes(op, x.shape, full)
    b = x.builder
    d = x.shape.dimensions()
    lead, (m, n) = d[:-2], d[-2:]
    k = min(m, n)
    taus_shape = array_shape(x.shape.element_type(), lead + (k,), op)
    qr = b.add_op(CUSTOM_CALL, (x,), Shape.tuple_shape([x.shape, taus_shape]), _legacy_call("Qr"))
    fact, taus = GetTupleElement(qr, 0), GetTupleElement(qr, 1)
    if m > n and full:
        refl = _pad_last2(fact, 0, m - n)
    elif m < n:
        refl = _slice2(fact, (0, m), (0, m))
    else:
        refl = fact
    q = b.add_op(CUSTOM_CALL, (refl, taus), refl.shape, _legacy_call("ProductOfElementaryHouseholderReflectors"))
    r = fact if full else _slice2(fact, (0, k), (0, n))
    r = ew.Select(_tri_mask(b, r.shape.dimensions(), "LE"), r, _zeros(r))
    return q, r


def _legacy_call(target: str) -> dict[str, Any]:
    """The attributes of a call of one of XLA:CPU's own targets (API_VERSION_ORIGINAL)."""
    return {"call_target_name": target, "api_version": I32(1)}


def QrDecomposition(operand: XlaOp) -> tuple[XlaOp, XlaOp]:
    """Householder QR in compact form (the former ``xla_client.ops.QrDecomposition``, XLA's
    ``Qr``): ``R`` and the Householder vectors packed in one matrix, plus their scale factors.

    Lowered to XLA's ``Qr`` custom call, which XLA expands into ops (its ``QrExpander``).
    ``q`` follows from ``ProductOfElementaryHouseholderReflectors(q_and_r, taus)`` (see
    :func:`QR` for the explicit ``(q, r)``).

    Parameters
    ----------
    operand: ``(..., m, n)`` of f32, f64, c64 or c128.

    Returns
    -------
    A Python tuple ``(q_and_r, taus)``: ``q_and_r (..., m, n)`` of the operand's type, ``R`` in
    its upper triangle and the essential parts of the Householder vectors ``v_i`` (unit leading
    entry implied) below the diagonal; ``taus (..., min(m, n))`` of the same type, with
    ``Q = prod_i (I - taus[i] v_i v_i^H)`` (LAPACK ``geqrf``'s convention).

    Raises
    ------
    ShapeError: rank < 2, or both dimensions larger than 65536 (:data:`MAX_EXPANDED_DIM`).
    DTypeError: another element type, or ``operand`` not an XlaOp.
    """
    op = "QrDecomposition"
    x = _operand(op, "operand", operand)
    _, taus_shape = qr_decomposition_shapes(op, x.shape)
    qr = x.builder.add_op(CUSTOM_CALL, (x,), Shape.tuple_shape([x.shape, taus_shape]), _legacy_call("Qr"))
    return GetTupleElement(qr, 0), GetTupleElement(qr, 1)


def ProductOfElementaryHouseholderReflectors(a: XlaOp, taus: XlaOp) -> XlaOp:
    """``Q = prod_i (I - taus[i] v_i v_i^H)`` from Householder vectors stored below the diagonal of
    ``a`` (XLA's ``ProductOfElementaryHouseholderReflectors``, LAPACK ``orgqr``/``ungqr``).

    Lowered to XLA's ``ProductOfElementaryHouseholderReflectors`` custom call, which XLA expands
    into ops (its ``QrExpander``).

    Parameters
    ----------
    a: ``(..., m, n)`` of f32, f64, c64 or c128 with ``m >= n``; column ``i`` below the
        diagonal holds ``v_i`` (its unit leading entry implied); the rest is not read.
    taus: ``(..., k)`` of ``a``'s element type, same batch dimensions, ``k <= n``.

    Returns
    -------
    XlaOp ``(..., m, n)`` of ``a``'s type: the first ``n`` columns of ``Q`` (columns past ``k``
    are those of the identity, transformed).

    Raises
    ------
    ShapeError: rank < 2, ``m < n``, ``taus`` of another rank or batch dimensions, or ``k > n``.
    DTypeError: another element type, or ``taus`` of a different element type than ``a``.
    """
    op = "ProductOfElementaryHouseholderReflectors"
    x = matrix_operand(op, "a", a, square=False)
    t = _operand(op, "taus", taus, x.builder)
    shape = householder_product_shape(op, x.shape, t.shape)
    return x.builder.add_op(CUSTOM_CALL, (x, t), shape, _legacy_call("ProductOfElementaryHouseholderReflectors"))


def _hermitian(x: XlaOp, lower: bool) -> XlaOp:
    """The Hermitian matrix given by one triangle of ``x`` (diagonal: its real part)."""
    b = x.builder
    dims = x.shape.dimensions()
    keep = _tri_mask(b, dims, "GT" if lower else "LT")
    full = ew.Select(keep, x, _adjoint(x))
    if x.shape.element_type() in COMPLEX:
        full = ew.Select(_tri_mask(b, dims, "EQ"), ew.Complex(ew.Real(full), _zeros(ew.Real(full))), full)
    return full


def Eigh(
    a: XlaOp,
    lower: bool = True,
    max_iter: int = 100,
    epsilon: float | None = None,
    sort_eigenvalues: bool = True,
) -> tuple[XlaOp, XlaOp]:
    """Eigendecomposition of Hermitian (real symmetric) matrices, ``a = v @ diag(w) @ v^H``
    (the former XLA ``Eigh``).

    Built from XLA ops: cyclic two-sided Jacobi with a round-robin (parallel) ordering, each
    sweep ``n - 1`` rounds of ``n / 2`` independent rotations, in a ``stablehlo.while`` that ends
    after a sweep that rotated nothing or after ``max_iter`` sweeps. Pairs whose off-diagonal
    entry is at most ``epsilon * sqrt(|a_pp a_qq|)`` count as converged, which gives eigenvalues
    with small relative error for well-scaled matrices and orthonormal eigenvectors to working
    precision. Sorting uses a stable ``stablehlo.sort``.

    Parameters
    ----------
    a: ``(..., n, n)`` of f32, f64, c64 or c128. Only the triangle named by ``lower`` is read
        (the diagonal's imaginary part is ignored).
    lower: read the lower (True) or upper (False) triangle.
    max_iter: the most sweeps (>= 1).
    epsilon: the relative threshold above; default the element type's machine epsilon.
    sort_eigenvalues: sort ascending (with their eigenvectors); otherwise the order is
        unspecified.

    Returns
    -------
    A Python tuple ``(v, w)`` in the former xla_client order: eigenvectors ``v (..., n, n)`` as
    columns, of ``a``'s type, and eigenvalues ``w (..., n)`` of the real type (f32 for c64).
    Eigenvectors are defined up to a phase (sign), and within a repeated eigenvalue up to a
    rotation of its eigenspace.

    Raises
    ------
    ShapeError: rank < 2, non-square matrices, ``max_iter`` outside [1, 2**31) or ``epsilon``
        outside [0, 1).
    DTypeError: another element type, or flags that are not bools.
    """
    op = "Eigh"
    x = matrix_operand(op, "a", a)
    lo = bool_arg(op, "lower", lower)
    srt = bool_arg(op, "sort_eigenvalues", sort_eigenvalues)
    iters, eps_given = _check_iter(op, max_iter, epsilon)
    eigh_shapes(op, x.shape)
    b = x.builder
    et = x.shape.element_type()
    rt = REAL_OF[et]
    d = x.shape.dimensions()
    n = d[-1]
    if n == 0:
        return x, ew.Real(_diag(x)) if et in COMPLEX else _diag(x)
    tol = eps_given if eps_given is not None else float(np.finfo(etype_to_dtype(rt)).eps)
    pad = n % 2
    h, scale = _scale(_hermitian(x, lo))
    h = _pad_last2(h, pad, pad)
    big = h.shape.dimensions()
    k = big[-1] // 2
    a_out, v = _eigh_sweeps(h, _eye(b, et, big), k, tol, iters)
    w = _diag(a_out)
    if et in COMPLEX:
        w = ew.Real(w)
    w = w * BroadcastInDim(scale, w.shape.dimensions(), list(range(w.shape.rank() - 1)))
    if srt:
        if pad:
            last = ew.Eq(_iota(b, w.shape.dimensions(), w.shape.rank() - 1), big[-1] - 1)
            w = ew.Select(last, constant_like(op, float("inf"), w), w)
        w, (v,) = _sort_columns(w, [v], descending=False)
    if pad:
        v = _slice2(v, (0, n), (0, n))
        w = Slice(w, [0] * w.shape.rank(), list(d[:-2]) + [n], [1] * w.shape.rank())
    return v, w


def SVD(
    a: XlaOp,
    max_iter: int = 100,
    epsilon: float | None = None,
    full_matrices: bool = True,
) -> tuple[XlaOp, XlaOp, XlaOp]:
    """Singular value decomposition ``a = u @ diag(s) @ v^H`` (the former XLA ``SVD``).

    Built from XLA ops: one-sided (Hestenes) Jacobi on the columns of ``a`` (of ``a^H`` when
    ``m < n``), with a round-robin ordering of column pairs, in a ``stablehlo.while`` that ends
    after a sweep that rotated nothing or after ``max_iter`` sweeps; pairs whose columns are
    orthogonal to ``epsilon`` (relative) count as converged. The singular values are the final
    column norms (accurate to working precision relative to ``s_max``); the left vectors are
    the normalized columns, made exactly orthonormal, and completed to a square ``u`` when
    ``full_matrices``, by a Householder QR.

    Parameters
    ----------
    a: ``(..., m, n)`` of f32, f64, c64 or c128.
    max_iter: the most sweeps (>= 1).
    epsilon: the relative orthogonality threshold; default ``sqrt(max(m, n))`` times the
        element type's machine epsilon.
    full_matrices: True for ``u (..., m, m)`` and ``v (..., n, n)``; False for ``u (..., m, k)``
        and ``v (..., n, k)``, ``k = min(m, n)``.

    Returns
    -------
    A Python tuple ``(u, s, v)``: ``u`` and ``v`` with orthonormal columns, of ``a``'s type;
    ``s (..., k)`` of the real type, non-negative and descending. Note ``v``, not ``v^H``. Singular
    vectors are defined up to a phase (sign) shared by ``u[:, i]`` and ``v[:, i]``, and within a
    repeated singular value up to a rotation; the columns of ``u`` or ``v`` beyond those of
    nonzero singular values are any orthonormal completion.

    Raises
    ------
    ShapeError: rank < 2, ``max_iter`` outside [1, 2**31) or ``epsilon`` outside [0, 1), or a
        larger dimension (``full_matrices``) or smaller one over 65536 (:data:`MAX_EXPANDED_DIM`).
    DTypeError: another element type, or ``full_matrices`` not a bool.
    """
    op = "SVD"
    x = matrix_operand(op, "a", a, square=False)
    full = bool_arg(op, "full_matrices", full_matrices)
    iters, eps_given = _check_iter(op, max_iter, epsilon)
    svd_shapes(op, x.shape, full)  # u comes from a QR of the (larger, smaller) matrix of normalized columns
    b = x.builder
    et = x.shape.element_type()
    d = x.shape.dimensions()
    m, n = d[-2:]
    wide = m < n
    if wide:
        x, m, n = _adjoint(x), n, m
    lead = d[:-2]
    rt = REAL_OF[et]
    if n == 0:  # no singular values: u is any orthonormal basis, v is empty
        s = Constant(b, np.zeros(lead + (0,), dtype=etype_to_dtype(rt)))
        u0 = _eye(b, et, lead + ((m, m) if full else (m, 0)))
        v0 = _eye(b, et, lead + (0, 0))
        return (v0, s, u0) if wide else (u0, s, v0)
    tol = eps_given if eps_given is not None else float(np.finfo(etype_to_dtype(rt)).eps) * float(np.sqrt(m))
    pad = n % 2
    w, scale = _scale(x)
    w = _pad_last2(w, 0, pad)
    big_n = n + pad
    k = big_n // 2
    w, v = _svd_sweeps(w, _eye(b, et, lead + (big_n, big_n)), k, tol, iters)
    norms = ew.Sqrt(_sum(_abs2(w), -2))
    if pad:
        last = ew.Eq(_iota(b, norms.shape.dimensions(), norms.shape.rank() - 1), big_n - 1)
        norms = ew.Select(last, constant_like(op, -1.0, norms), norms)
    s, (w, v) = _sort_columns(norms, [w, v], descending=True)
    if pad:
        s = Slice(s, [0] * s.shape.rank(), list(lead) + [n], [1] * s.shape.rank())
        w = _slice2(w, (0, m), (0, n))
        v = _slice2(v, (0, n), (0, n))
    pos = ew.Gt(s, 0.0)
    safe = ew.Select(pos, s, constant_like(op, 1.0, s))
    wd = w.shape.dimensions()
    u = ew.Select(_rows_vec(pos, wd, -1), w / _rows_vec(_to(safe, et), wd, -1), _zeros(w))
    q, r = QR(u, full_matrices=full)
    rd = _diag(_slice2(r, (0, n), (0, n)))
    if et in COMPLEX:
        mag = ew.Sqrt(_abs2(rd))
        nz = ew.Gt(mag, 0.0)
        phase = ew.Select(nz, rd / _to(ew.Select(nz, mag, constant_like(op, 1.0, mag)), et), constant_like(op, 1, rd))
    else:
        phase = ew.Select(ew.Lt(rd, 0.0), constant_like(op, -1, rd), constant_like(op, 1, rd))
    qd = q.shape.dimensions()
    if qd[-1] > n:  # a broadcast scalar: no host array the size of the matrix
        ones = ew.broadcast_to(Constant(b, np.ones((), dtype=etype_to_dtype(et))), lead + (qd[-1] - n,), (), op)
        phase = _concat([phase, ones], -1)
    u = q * _rows_vec(phase, qd, -1)
    s = s * BroadcastInDim(scale, s.shape.dimensions(), list(range(s.shape.rank() - 1)))
    if wide:
        return v, s, u
    return u, s, v


