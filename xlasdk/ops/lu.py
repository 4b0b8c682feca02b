"""LU decomposition with partial pivoting: ``LU`` (jaxlib's LAPACK ``getrf`` on the CPU, the
platform's own LU elsewhere) and :func:`lu_from_ops`, the same factorization built from XLA ops."""

from __future__ import annotations

import numpy as np

from .._jaxlib import lapack as _lapack
from .._mlir_attrs import I32, AttrList, DictAttr, IndexLayout
from ..builder import XlaOp
from ..shape import Shape
from ..types import COMPLEX, PrimitiveType
from . import elementwise as ew
from ._core import array_shape
from ._core import operand as _operand
from .control import GetTupleElement
from .custom_call import CUSTOM_CALL, OutputOperandAlias
from .decompositions import _iota, _sum, _zeros
from .linalg import matrix_check
from .reduce import Reduce
from .sources import Constant, Iota, constant_like
from .special import while_loop

__all__ = ["LU"]


def lu_shapes(op: str, a: Shape) -> tuple[Shape, Shape, Shape]:
    """Shapes ``(lu, pivots, permutation)`` of LU; raises DTypeError/ShapeError on a bad matrix."""
    d = matrix_check(op, "operand", a, square=False)
    lead, (m, n) = d[:-2], d[-2:]
    s32 = PrimitiveType.S32
    return a, array_shape(s32, lead + (min(m, n),), op), array_shape(s32, lead + (m,), op)


def _col_major(rank: int) -> IndexLayout:
    """``operand_layouts``/``result_layouts`` entry: the last two dimensions column-major."""
    return IndexLayout((rank - 2, rank - 1, *range(rank - 3, -1, -1)))


def _row_major(rank: int) -> IndexLayout:
    return IndexLayout(range(rank - 1, -1, -1))


def _pivots_to_permutation(pivots: XlaOp, m: int) -> XlaOp:
    """s32 ``(..., m)``: the row permutation made by applying the 0-based row swaps
    ``pivots (..., k)`` in order to ``iota(m)`` (a While loop over the k swaps)."""
    b = pivots.builder
    dims = pivots.shape.dimensions()
    lead, k = dims[:-1], dims[-1]
    perm = _iota(b, lead + (m,), len(lead))
    if k == 0 or m == 0:
        return perm
    counter = Constant(b, np.int32(0))

    def cond(v: list[XlaOp]) -> XlaOp:
        return ew.Lt(v[0], constant_like("LU", k, v[0]))

    def body(v: list[XlaOp]) -> list[XlaOp]:
        i, piv, p = v
        sb = i.builder
        r = len(lead)
        at_i_k = ew.Eq(_iota(sb, lead + (k,), r), ew.broadcast_to(i, lead + (k,), ()))
        j = _sum(ew.Select(at_i_k, piv, _zeros(piv)), -1)  # (...,): the row swapped with row i
        at_i = ew.Eq(_iota(sb, lead + (m,), r), ew.broadcast_to(i, lead + (m,), ()))
        at_j = ew.Eq(_iota(sb, lead + (m,), r), ew.broadcast_to(j, lead + (m,), tuple(range(r))))
        x = _sum(ew.Select(at_i, p, _zeros(p)), -1)
        y = _sum(ew.Select(at_j, p, _zeros(p)), -1)
        p = ew.Select(at_i, ew.broadcast_to(y, lead + (m,), tuple(range(r))), p)
        p = ew.Select(at_j, ew.broadcast_to(x, lead + (m,), tuple(range(r))), p)
        return [ew.Add(i, constant_like("LU", 1, i)), piv, p]

    return while_loop([counter, pivots, perm], cond, body)[2]


def LU(operand: XlaOp) -> tuple[XlaOp, XlaOp, XlaOp]:
    """LU decomposition with partial pivoting, ``a[..., permutation, :] = L @ U`` (the former
    ``xla_client.ops.LU``).

    Lowered as jax lowers ``lax.linalg.lu`` on CPU: jaxlib's LAPACK ``getrf`` kernel as a typed-FFI
    custom call (``lapack_{s,d,c,z}getrf_ffi``, column-major operand layout; xlasdk registers
    jaxlib's LAPACK targets with XLA:CPU when this op is built), then the 1-based LAPACK pivots
    made 0-based and turned into a permutation by a ``While`` loop. Compiled for another platform
    the call is replaced by that platform's LU (:mod:`xlasdk.runtime._platform_lowering`): on a TPU
    XLA:TPU's ``LuDecomposition`` custom call for f32/c64, :func:`lu_from_ops` (partial pivoting
    in a ``While`` loop of XLA ops) for f64/c128, which XLA:TPU's ``LuDecomposition`` lacks.

    Parameters
    ----------
    operand: ``(..., m, n)`` of f32, f64, c64 or c128.

    Returns
    -------
    A Python tuple ``(lu, pivots, permutation)``: ``lu (..., m, n)`` of the operand's type with
    ``U`` in its upper triangle and the unit-diagonal ``L`` strictly below it; ``pivots`` s32
    ``(..., min(m, n))``, 0-based: row ``i`` was swapped with row ``pivots[i]`` in step ``i``;
    ``permutation`` s32 ``(..., m)``: the row order those swaps produce. A singular matrix
    factors without error (zeros on ``U``'s diagonal), as LAPACK does.

    Raises
    ------
    ShapeError: rank < 2.
    DTypeError: another element type, or ``operand`` not an XlaOp.
    """
    op = "LU"
    x = _operand(op, "operand", operand)
    _, piv_shape, _ = lu_shapes(op, x.shape)
    b = x.builder
    d = x.shape.dimensions()
    lead, (m, n) = d[:-2], d[-2:]
    k = min(m, n)
    et = x.shape.element_type()
    if k == 0:  # nothing to factor: LAPACK is not called
        return x, Iota(b, piv_shape, len(lead)), _iota(b, lead + (m,), len(lead))
    _lapack.ensure_registered()
    info_shape = array_shape(PrimitiveType.S32, lead, op)
    r = len(d)
    attrs = {
        "call_target_name": _lapack.target_name("getrf", et),
        "api_version": I32(4),
        "backend_config": DictAttr(),
        "operand_layouts": AttrList([_col_major(r)]),
        "result_layouts": AttrList([_col_major(r), _row_major(r - 1), _row_major(r - 2)]),
        "output_operand_aliases": AttrList([OutputOperandAlias((0,), 0, ())]),
    }
    res = b.add_op(CUSTOM_CALL, (x,), Shape.tuple_shape([x.shape, piv_shape, info_shape]), attrs)
    lu = GetTupleElement(res, 0)
    pivots = ew.Sub(GetTupleElement(res, 1), constant_like(op, 1, GetTupleElement(res, 1)))
    return lu, pivots, _pivots_to_permutation(pivots, m)


def _abs1(x: XlaOp) -> XlaOp:
    """The magnitude LAPACK's pivot search compares: ``|x|`` (``|re| + |im|`` for complex, as
    ``i?amax`` does)."""
    if x.shape.element_type() in COMPLEX:
        return ew.Abs(ew.Real(x)) + ew.Abs(ew.Imag(x))
    return ew.Abs(x)


def lu_from_ops(a: XlaOp) -> tuple[XlaOp, XlaOp, XlaOp]:
    """LU with partial pivoting of ``a (..., m, n)`` built from XLA ops, LAPACK ``getf2``'s
    algorithm (right-looking, unblocked): step ``j`` of ``min(m, n)`` (a ``While`` loop) picks the
    first row ``p >= j`` of largest ``|a[p, j]|`` (``|re| + |im|`` for complex), swaps whole rows
    ``j`` and ``p``, divides the column below the diagonal by the pivot (not when it is 0: the
    column is then zero below it) and subtracts the outer product from the trailing matrix. Runs
    on every platform; XLA:TPU's ``LuDecomposition`` takes f32/c64 only, so f64/c128 LU on a
    TPU is this.

    Returns ``(lu, pivots, permutation)`` as :func:`LU`: pivots 0-based.
    """
    op = "LU"
    x = _operand(op, "operand", a)
    _, piv_shape, perm_shape = lu_shapes(op, x.shape)
    b = x.builder
    d = x.shape.dimensions()
    lead, (m, n) = d[:-2], d[-2:]
    k = min(m, n)
    r = len(d)
    if k == 0:
        return x, Iota(b, piv_shape, len(lead)), _iota(b, lead + (m,), len(lead))

    def cond(v: list[XlaOp]) -> XlaOp:
        return ew.Lt(v[0], constant_like(op, k, v[0]))

    def body(v: list[XlaOp]) -> list[XlaOp]:
        j, lu, piv, perm = v
        sb = j.builder
        rows, cols = _iota(sb, d, r - 2), _iota(sb, d, r - 1)
        jm = ew.broadcast_to(j, d, ())
        col = _sum(ew.Select(ew.Eq(cols, jm), lu, _zeros(lu)), -1)  # (..., m): column j
        mag = _abs1(col)
        vec_rows = _iota(sb, lead + (m,), len(lead))
        below = ew.Ge(vec_rows, ew.broadcast_to(j, lead + (m,), ()))
        mag = ew.Select(below, mag, constant_like(op, -1, mag))
        best = Reduce(sb, mag, Constant(sb, np.zeros((), mag.dtype) - 1), ew.Max, [len(lead)])
        hit = ew.And(below, ew.Eq(mag, ew.broadcast_to(best, lead + (m,), tuple(range(len(lead))))))
        none = constant_like(op, m, vec_rows)
        p = Reduce(sb, ew.Select(hit, vec_rows, none), Constant(sb, np.int32(m)), ew.Min, [len(lead)])
        p = ew.Select(ew.Eq(p, m), ew.broadcast_to(j, p.shape.dimensions(), ()), p)  # NaN column: no swap
        pm = ew.broadcast_to(p, d, tuple(range(len(lead))))
        at_j, at_p = ew.Eq(rows, jm), ew.Eq(rows, pm)
        row_j = ew.broadcast_to(_sum(ew.Select(at_j, lu, _zeros(lu)), -2), d, (*range(len(lead)), r - 1))
        row_p = ew.broadcast_to(_sum(ew.Select(at_p, lu, _zeros(lu)), -2), d, (*range(len(lead)), r - 1))
        lu = ew.Select(at_j, row_p, ew.Select(at_p, row_j, lu))
        pv = ew.broadcast_to(p, lead + (m,), tuple(range(len(lead))))
        jv = ew.broadcast_to(j, lead + (m,), ())
        pj = _sum(ew.Select(ew.Eq(vec_rows, jv), perm, _zeros(perm)), -1)
        pp = _sum(ew.Select(ew.Eq(vec_rows, pv), perm, _zeros(perm)), -1)
        lead_dims = tuple(range(len(lead)))
        perm = ew.Select(ew.Eq(vec_rows, jv), ew.broadcast_to(pp, lead + (m,), lead_dims),
                         ew.Select(ew.Eq(vec_rows, pv), ew.broadcast_to(pj, lead + (m,), lead_dims), perm))
        kv = _iota(sb, lead + (k,), len(lead))
        piv = ew.Select(ew.Eq(kv, ew.broadcast_to(j, lead + (k,), ())),
                        ew.broadcast_to(p, lead + (k,), lead_dims), piv)
        on_col = ew.Eq(cols, jm)
        col = _sum(ew.Select(on_col, lu, _zeros(lu)), -1)  # column j after the swap
        pivot = _sum(ew.Select(ew.Eq(vec_rows, jv), col, _zeros(col)), -1)
        safe = ew.Select(ew.Eq(pivot, constant_like(op, 0, pivot)), constant_like(op, 1, pivot), pivot)
        under = ew.Gt(rows, jm)
        mult = ew.Select(under, ew.broadcast_to(col, d, (*lead_dims, r - 2))
                         / ew.broadcast_to(safe, d, lead_dims), _zeros(lu))
        right = ew.Gt(cols, jm)
        urow = ew.Select(ew.And(at_j, right), lu, _zeros(lu))
        urow = ew.broadcast_to(_sum(urow, -2), d, (*lead_dims, r - 1))
        update = ew.And(under, right)
        lu = ew.Select(update, lu - mult * urow, lu)
        lu = ew.Select(ew.And(under, on_col), mult, lu)
        return [j + 1, lu, piv, perm]

    piv0 = Constant(b, np.zeros(tuple(piv_shape.dimensions()), np.int32))
    perm0 = _iota(b, tuple(perm_shape.dimensions()), len(lead))
    _, lu, piv, perm = while_loop([Constant(b, np.int32(0)), x, piv0, perm0], cond, body)
    return lu, piv, perm
