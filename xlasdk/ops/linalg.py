"""Contractions and the factorizations XLA has ops for: ``Dot``, ``DotGeneral``, ``Cholesky``,
``TriangularSolve``, each beside its shape rule. The decompositions built from other ops or
LAPACK calls (QR, LU, Eigh, SVD...) are in :mod:`xlasdk.ops.decompositions`."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from .._optable import AttrKind, HloUnsupported, define
from ..attrs import DotDimensionNumbers, PrecisionConfig, TriangularSolveOptions_Transpose, make_dot_dimension_numbers
from ..attrs._dimension_numbers import DotDimensionNumbersLike
from ..builder import XlaOp
from ..shape import Shape
from ..types import COMPLEX, FLOATS, INTS, DTypeLike, PrimitiveType, dtype_to_etype
from ._core import array_shape, bool_arg, dtype_error, enum_arg, int_list, same_builder, shape_error, show
from ._core import operand as _operand
from .convert import CONVERT

__all__ = ["Dot", "DotGeneral", "Cholesky", "TriangularSolve"]
# Shape rules (not exported from xlasdk.ops): dot_general_shape, dot_shape, cholesky_shape,
# triangular_solve_shape, matrix_check, expanded_check. What dot and convolution share (the
# result element type, the sub-byte widening XLA:CPU needs, the precision_config attribute) is
# here too, public to xlasdk.ops.conv: precision_attrs, widen_sub_byte, contraction_type,
# narrow_to, preferred_type, NUMERIC.


# -- what dot and convolution share ------------------------------------------------------------------

#: Element types dot and convolution take.
NUMERIC = INTS | FLOATS | COMPLEX | {PrimitiveType.PRED}


def precision_attrs(op: str, precision_config: Any) -> dict[str, Any]:
    """``{"precision_config": PrecisionConfig}`` for the op's attributes (empty for None or no
    precisions), checked; one precision is used for both operands."""
    if precision_config is None:
        return {}
    if not isinstance(precision_config, PrecisionConfig):
        dtype_error(op, f"precision_config must be an xs.PrecisionConfig, got {type(precision_config).__name__}")
    precisions = precision_config.operand_precision
    if not isinstance(precisions, (list, tuple)):  # the field was replaced after construction
        dtype_error(op, f"precision_config.operand_precision must be a list, got {show(precisions)}")
    n = len(precisions)
    if n == 0:
        return {}
    if n not in (1, 2):
        shape_error(op, f"precision_config has {n} operand precisions, expected 2 (lhs, rhs) or 1 (both)")
    members = [enum_arg(op, PrecisionConfig.Precision, p, "precision_config: ") for p in precisions]
    return {"precision_config": PrecisionConfig(members if n == 2 else members * 2)}


_SUB_BYTE = frozenset(
    {PrimitiveType.S2, PrimitiveType.S4, PrimitiveType.U2, PrimitiveType.U4, PrimitiveType.F4E2M1FN}
)
# XLA:CPU has no 2-bit dot/convolution ("unsupported operand type S2 in op dot"): such results are
# computed in 8 bits and converted back (integer wrap-around gives the same 2-bit values).
_TWO_BIT_WIDE = {PrimitiveType.S2: PrimitiveType.S8, PrimitiveType.U2: PrimitiveType.U8}


def widen_sub_byte(x: XlaOp, et: PrimitiveType, rt: PrimitiveType, op: str = "") -> XlaOp:
    """``x`` converted to ``rt`` when it holds 2/4-bit values and the result type differs.

    XLA:CPU rejects a dot/convolution of s4/u4/f4e2m1fn operands with a wider result type (its
    verifier reports "custom element sizes on non-sub-byte types"); converting the operands to
    the result type first computes the same values.
    """
    if et not in _SUB_BYTE or rt is et:
        return x
    return x.builder.add_op(CONVERT, (x,), array_shape(rt, x.shape.dimensions(), op))


def contraction_type(rt: PrimitiveType) -> PrimitiveType:
    """The type a dot/convolution with result type ``rt`` is computed in (s8/u8 for s2/u2)."""
    return _TWO_BIT_WIDE.get(rt, rt)


def narrow_to(r: XlaOp, rt: PrimitiveType, op: str = "") -> XlaOp:
    """``r`` converted to ``rt`` if it was computed in another type (see :func:`contraction_type`)."""
    if r.shape.element_type() is rt:
        return r
    return r.builder.add_op(CONVERT, (r,), array_shape(rt, r.shape.dimensions(), op))


def preferred_type(op: str, et: PrimitiveType, preferred_element_type: Any) -> PrimitiveType:
    """The result element type: ``preferred_element_type`` if given, else the operands' type."""
    if preferred_element_type is None:
        return et
    try:
        pt = dtype_to_etype(preferred_element_type)
    except Exception:
        dtype_error(op, f"preferred_element_type {show(preferred_element_type)} is not an XLA element type")
    if (pt in COMPLEX) != (et in COMPLEX) or (et in FLOATS and pt in INTS):
        dtype_error(op, f"preferred_element_type {pt.name.lower()} is not compatible with {et.name.lower()} operands")
    return pt


# -- Dot, DotGeneral -----------------------------------------------------------------------------------


def _dot_hlo(o: XlaOp) -> str:
    a = o.attrs
    if set(a) - {"dot_dimension_numbers", "precision_config"}:  # an algorithm, or anything else
        raise HloUnsupported(str(list(a)))
    extra: str = ", " + a["dot_dimension_numbers"].to_hlo()
    prec: str = a["precision_config"].to_hlo() if "precision_config" in a else ""
    return extra + (f", operand_precision={prec}" if prec else "")


def _triangular_solve_hlo(o: XlaOp) -> str:
    a = o.attrs
    flags = "".join(f", {f}=true" for f in ("left_side", "lower", "unit_diagonal") if a[f])
    return f"{flags}, transpose_a={a['transpose_a'].to_hlo()}"


def _check_dims(op: str, name: str, dims: Any, rank: int) -> tuple[int, ...]:
    out = int_list(op, f"dimension_numbers.{name}", dims)
    if len(set(out)) != len(out) or any(not 0 <= d < rank for d in out):
        shape_error(op, f"{name} {list(out)} must be distinct dimension numbers < {rank}")
    return out


def dot_general_shape(op: str, lhs: Shape, rhs: Shape, dn: Any, preferred_element_type: Any) -> Shape:
    """Result shape of DotGeneral (``dn`` a DotDimensionNumbers); raises ShapeError/DTypeError."""
    et = lhs.element_type()
    if et not in NUMERIC:
        dtype_error(op, f"operand 'lhs' must be numeric, got {lhs}")
    if rhs.element_type() is not et:
        dtype_error(op, f"operand 'rhs' has element type {rhs}, expected {et.name.lower()} like 'lhs' {lhs}")
    xd, yd = lhs.dimensions(), rhs.dimensions()
    lc = _check_dims(op, "lhs_contracting_dimensions", dn.lhs_contracting_dimensions, len(xd))
    rc = _check_dims(op, "rhs_contracting_dimensions", dn.rhs_contracting_dimensions, len(yd))
    lb = _check_dims(op, "lhs_batch_dimensions", dn.lhs_batch_dimensions, len(xd))
    rb = _check_dims(op, "rhs_batch_dimensions", dn.rhs_batch_dimensions, len(yd))
    if len(lc) != len(rc):
        shape_error(op, f"{len(lc)} lhs contracting dimensions but {len(rc)} rhs contracting dimensions")
    if len(lb) != len(rb):
        shape_error(op, f"{len(lb)} lhs batch dimensions but {len(rb)} rhs batch dimensions")
    if set(lc) & set(lb) or set(rc) & set(rb):
        shape_error(op, "a dimension cannot be both a batch and a contracting dimension")
    for kind, ls, rs in (("contracting", lc, rc), ("batch", lb, rb)):
        for a, b in zip(ls, rs, strict=True):
            if xd[a] != yd[b]:
                shape_error(
                    op, f"{kind} dimension {a} of 'lhs' {lhs} has size {xd[a]}, but {kind} dimension {b} of "
                    f"'rhs' {rhs} has size {yd[b]}"
                )
    out = [xd[d] for d in lb]
    out += [s for i, s in enumerate(xd) if i not in lc and i not in lb]
    out += [s for i, s in enumerate(yd) if i not in rc and i not in rb]
    return array_shape(preferred_type(op, et, preferred_element_type), out, op)


DOT_GENERAL = define(
    "stablehlo.dot_general", "dot", hlo_attrs=_dot_hlo, rule=dot_general_shape,
    attrs={"dot_dimension_numbers": AttrKind.DOT_DIMENSION_NUMBERS, "precision_config": AttrKind.PRECISION_CONFIG},
)


def dot_shape(op: str, lhs: Shape, rhs: Shape, preferred_element_type: Any) -> Shape:
    """Result shape of Dot (ranks 1 or 2, last of lhs against first of rhs); raises ShapeError/DTypeError."""
    for name, v in (("lhs", lhs), ("rhs", rhs)):
        if v.rank() not in (1, 2):
            shape_error(op, f"operand {name!r} must have rank 1 or 2, got {v} (use DotGeneral)")
    k_l = lhs.rank() - 1
    if lhs.dimensions()[k_l] != rhs.dimensions()[0]:
        shape_error(
            op, f"operand 'rhs' has shape {rhs}; its first dimension must equal the last dimension of "
            f"'lhs' {lhs} ({lhs.dimensions()[k_l]})"
        )
    return dot_general_shape(op, lhs, rhs, _dot_dnums(k_l), preferred_element_type)


def _dot_dnums(k_l: int) -> Any:
    return DotDimensionNumbers(lhs_contracting_dimensions=[k_l], rhs_contracting_dimensions=[0])


def DotGeneral(
    lhs: XlaOp,
    rhs: XlaOp,
    dimension_numbers: DotDimensionNumbersLike,
    precision_config: PrecisionConfig | None = None,
    preferred_element_type: DTypeLike | None = None,
) -> XlaOp:
    """General tensor contraction (XLA ``DotGeneral``; ``stablehlo.dot_general``).

    Parameters
    ----------
    lhs, rhs: arrays of the same numeric element type.
    dimension_numbers: :class:`~xlasdk.DotDimensionNumbers`, or the former tuple form
        ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``.
    precision_config: optional :class:`~xlasdk.PrecisionConfig` (one entry per operand).
    preferred_element_type: optional result element type (e.g. f32 for bf16 operands, s32 for s8).

    Returns
    -------
    XlaOp of shape ``batch dims + lhs free dims + rhs free dims`` (free dims in operand order).

    Raises
    ------
    ShapeError: dimension numbers out of range or repeated, unequal counts, or sizes of paired
    batch/contracting dimensions that differ.
    DTypeError: element types differ or are not numeric; incompatible preferred_element_type.
    """
    op = "DotGeneral"
    x = _operand(op, "lhs", lhs)
    y = _operand(op, "rhs", rhs)
    same_builder(op, [("lhs", x), ("rhs", y)])
    dn = dimension_numbers if isinstance(dimension_numbers, DotDimensionNumbers) else None
    if dn is None:
        try:
            dn = make_dot_dimension_numbers(dimension_numbers)
        except Exception as e:
            shape_error(op, f"bad dimension_numbers {show(dimension_numbers)}: {str(e)[:300]}")
    shape = dot_general_shape(op, x.shape, y.shape, dn, preferred_element_type)
    return _add_dot(op, x, y, dn, shape, precision_config)


def _add_dot(op: str, x: XlaOp, y: XlaOp, dn: Any, shape: Shape, precision_config: Any) -> XlaOp:
    """The dot_general node of result ``shape`` (computed in 8 bits for 2-bit results)."""
    et, rt = x.shape.element_type(), shape.element_type()
    ct = contraction_type(rt)
    attrs = {"dot_dimension_numbers": copy.deepcopy(dn), **precision_attrs(op, precision_config)}
    result = shape if ct is rt else array_shape(ct, shape.dimensions(), op)
    x, y = widen_sub_byte(x, et, ct, op), widen_sub_byte(y, et, ct, op)
    return narrow_to(x.builder.add_op(DOT_GENERAL, (x, y), result, attrs), rt, op)


def Dot(
    lhs: XlaOp,
    rhs: XlaOp,
    precision_config: PrecisionConfig | None = None,
    preferred_element_type: DTypeLike | None = None,
) -> XlaOp:
    """Vector/matrix product (XLA ``Dot``; ``stablehlo.dot_general``).

    ``lhs`` of rank 1 ``(K,)`` or 2 ``(M, K)``, ``rhs`` of rank 1 ``(K,)`` or 2 ``(K, N)``; the
    last dimension of ``lhs`` is contracted with the first of ``rhs``. Results: vector . vector
    -> scalar, matrix . vector -> ``(M,)``, vector . matrix -> ``(N,)``, matrix . matrix ->
    ``(M, N)``. Also ``lhs @ rhs``.

    Raises
    ------
    ShapeError: a rank other than 1 or 2, or contracted sizes that differ.
    DTypeError: element types differ or are not numeric.
    """
    op = "Dot"
    x = _operand(op, "lhs", lhs)
    y = _operand(op, "rhs", rhs)
    same_builder(op, [("lhs", x), ("rhs", y)])
    shape = dot_shape(op, x.shape, y.shape, preferred_element_type)
    return _add_dot(op, x, y, _dot_dnums(x.shape.rank() - 1), shape, precision_config)


# -- factorizations XLA has ops for: Cholesky, TriangularSolve ---------------------------------------

_DECOMP_TYPES = frozenset({PrimitiveType.F32, PrimitiveType.F64, PrimitiveType.C64, PrimitiveType.C128})
REAL_OF = {
    PrimitiveType.F32: PrimitiveType.F32, PrimitiveType.F64: PrimitiveType.F64,
    PrimitiveType.C64: PrimitiveType.F32, PrimitiveType.C128: PrimitiveType.F64,
}


def _flag(op: str, name: str, value: Any) -> bool:
    return bool_arg(op, name, value)


#: The most rows or columns XLA:CPU's Cholesky, TriangularSolve and QR expanders are given:
#: they unroll one block of ops per 128 rows or columns, so compiling takes time and memory that
#: grow with the size (about 4 minutes and 2 GB at 65536; a (2**27, 2**27) QR never finished).
MAX_EXPANDED_DIM = 2**16


def expanded_check(op: str, name: str, shape: Shape, size: int, what: str) -> None:
    """ShapeError when ``size`` (the rows/columns an XLA expander unrolls over) exceeds 2**16."""
    if size > MAX_EXPANDED_DIM:
        shape_error(
            op, f"operand {name!r} is {shape}: its {what} ({size}) must be at most 65536 (2**16); XLA expands "
            "this op into a block of ops per 128 rows or columns, so compiling a larger one takes time and "
            "memory without bound"
        )


def matrix_check(op: str, name: str, shape: Shape, square: bool = True) -> tuple[int, ...]:
    """The dimensions of an ``(..., m, n)`` f32/f64/c64/c128 operand (square when asked);
    raises DTypeError/ShapeError otherwise."""
    et = shape.element_type()
    if et not in _DECOMP_TYPES:
        dtype_error(op, f"operand {name!r} must be f32, f64, c64 or c128, got {shape}")
    d = shape.dimensions()
    if len(d) < 2:
        shape_error(op, f"operand {name!r} must have rank >= 2 (..., m, n), got {shape}")
    if square and d[-1] != d[-2]:
        shape_error(op, f"operand {name!r} must be square in its last two dimensions (..., n, n), got {shape}")
    return d


def matrix_operand(op: str, name: str, a: Any, square: bool = True) -> XlaOp:
    """An ``(..., m, n)`` f32/f64/c64/c128 operand (square when asked)."""
    x = _operand(op, name, a)
    matrix_check(op, name, x.shape, square)
    return x


def cholesky_shape(op: str, a: Shape) -> Shape:
    """Result shape of Cholesky (``a``'s); raises DTypeError/ShapeError on a bad or too large matrix."""
    d = matrix_check(op, "a", a)
    expanded_check(op, "a", a, d[-1], "size")
    return a


CHOLESKY = define(
    "stablehlo.cholesky", "cholesky", hlo_attrs=lambda o: ", lower=true" if o.attrs["lower"] else "",
    rule=cholesky_shape, attrs={"lower": AttrKind.BOOL},
)


def triangular_solve_shape(op: str, a: Shape, b: Shape, left_side: bool) -> Shape:
    """Result shape of TriangularSolve (``b``'s); raises DTypeError/ShapeError on mismatched operands."""
    ad = matrix_check(op, "a", a)
    expanded_check(op, "a", a, ad[-1], "size")
    bd = matrix_check(op, "b", b, square=False)
    if b.element_type() is not a.element_type():
        dtype_error(op, f"operand 'b' has element type {b}, expected {a.element_type().name.lower()} like 'a'")
    if len(bd) != len(ad) or bd[:-2] != ad[:-2]:
        shape_error(op, f"operand 'b' has shape {b}; expected the batch dimensions {list(ad[:-2])} of 'a' {a}")
    m = ad[-1]
    solved = bd[-2] if left_side else bd[-1]
    if solved != m:
        which = "second-to-last" if left_side else "last"
        shape_error(
            op, f"operand 'b' has shape {b}; with left_side={left_side} its {which} dimension must be {m} "
            f"(the size of 'a' {a})"
        )
    return b


TRIANGULAR_SOLVE = define(
    "stablehlo.triangular_solve", "triangular-solve", hlo_attrs=_triangular_solve_hlo, rule=triangular_solve_shape,
    attrs={"left_side": AttrKind.BOOL, "lower": AttrKind.BOOL, "unit_diagonal": AttrKind.BOOL,
           "transpose_a": AttrKind.TRANSPOSE},
)


def Cholesky(a: XlaOp, lower: bool = True) -> XlaOp:
    """Cholesky factor of Hermitian positive-definite matrices (XLA ``Cholesky``;
    ``stablehlo.cholesky``).

    ``lower=True`` gives ``L`` with ``a = L @ L^H``, reading only the lower triangle of ``a``;
    ``lower=False`` gives ``U`` with ``a = U^H @ U``, reading only the upper triangle. The other
    triangle of the result is implementation-defined (take ``tril``/``triu`` of it), and so is the
    whole result when ``a`` is not positive definite (XLA:CPU fills it with NaN).

    Parameters
    ----------
    a: ``(..., n, n)`` of f32, f64, c64 or c128.
    lower: which triangle to read and produce.

    Returns
    -------
    XlaOp of ``a``'s shape and element type.

    Raises
    ------
    ShapeError: rank < 2, non-square matrices, or matrices larger than 65536 (2**16; see
        :data:`MAX_EXPANDED_DIM`).
    DTypeError: another element type, or ``lower`` not a bool.
    """
    op = "Cholesky"
    x = _operand(op, "a", a)
    shape = cholesky_shape(op, x.shape)
    lo = _flag(op, "lower", lower)
    return x.builder.add_op(CHOLESKY, (x,), shape, {"lower": lo})


def TriangularSolve(
    a: XlaOp,
    b: XlaOp,
    left_side: bool = True,
    lower: bool = True,
    unit_diagonal: bool = False,
    transpose_a: TriangularSolveOptions_Transpose | str | int = False,
) -> XlaOp:
    """Solve a triangular system (XLA ``TriangularSolve``; ``stablehlo.triangular_solve``).

    ``left_side=True`` solves ``op(a) @ x = b``, ``left_side=False`` solves ``x @ op(a) = b``,
    where ``op(a)`` is ``a``, ``a^T`` or ``a^H`` by ``transpose_a``. Only the triangle of ``a``
    named by ``lower`` is read; with ``unit_diagonal`` its diagonal is taken to be ones (and not
    read). A singular ``a`` gives implementation-defined values (inf/NaN on XLA:CPU).

    Parameters
    ----------
    a: ``(..., m, m)`` of f32, f64, c64 or c128.
    b: ``(..., m, n)`` if ``left_side`` else ``(..., n, m)``, same batch dimensions and element
        type as ``a``.
    left_side, lower, unit_diagonal: bools.
    transpose_a: ``ops.TriangularSolveOptions_Transpose`` (NO_TRANSPOSE, TRANSPOSE, ADJOINT), its
        name, or a bool (True: TRANSPOSE, False: NO_TRANSPOSE).

    Returns
    -------
    XlaOp ``x`` of ``b``'s shape.

    Raises
    ------
    ShapeError: non-square ``a`` or one larger than 65536 (:data:`MAX_EXPANDED_DIM`), ranks or
        batch dimensions that differ, ``b``'s solved dimension not ``m``, or an unknown
        ``transpose_a``.
    DTypeError: element types outside f32/f64/c64/c128 or different, or flags that are not bools.
    """
    op = "TriangularSolve"
    x = _operand(op, "a", a)
    y = _operand(op, "b", b)
    same_builder(op, [("a", x), ("b", y)])
    ls = _flag(op, "left_side", left_side)
    lo = _flag(op, "lower", lower)
    ud = _flag(op, "unit_diagonal", unit_diagonal)
    if isinstance(transpose_a, (bool, np.bool_)):
        tso = TriangularSolveOptions_Transpose
        tr = tso.TRANSPOSE if transpose_a else tso.NO_TRANSPOSE
    else:
        tr = enum_arg(op, TriangularSolveOptions_Transpose, transpose_a, "bad transpose_a: ")
    shape = triangular_solve_shape(op, x.shape, y.shape, ls)
    attrs = {"left_side": ls, "lower": lo, "unit_diagonal": ud, "transpose_a": tr}
    return x.builder.add_op(TRIANGULAR_SOLVE, (x, y), shape, attrs)
