"""Contractions: ``Dot`` and ``DotGeneral`` (with ``DotDimensionNumbers``, ``PrecisionConfig`` and
``preferred_element_type``)."""

from __future__ import annotations

from typing import Any

from ..builder import XlaOp
from ..types import COMPLEX, FLOATS, INTS, PrimitiveType, dtype_to_etype
from ._core import array_shape, dtype_error, operand, same_builder, shape_error

__all__ = ["Dot", "DotGeneral", "precision_attr", "preferred_type"]

_NUMERIC = INTS | FLOATS | COMPLEX | {PrimitiveType.PRED}


def precision_attr(op: str, precision_config: Any) -> str:
    """``, precision_config = [...]`` for the op's attribute dictionary ('' for None)."""
    if precision_config is None:
        return ""
    from ..attrs import PrecisionConfig

    if not isinstance(precision_config, PrecisionConfig):
        dtype_error(op, f"precision_config must be an xs.PrecisionConfig, got {type(precision_config).__name__}")
    n = len(precision_config.operand_precision)
    if n == 0:
        return ""
    if n not in (1, 2):
        shape_error(op, f"precision_config has {n} operand precisions, expected 2 (lhs, rhs) or 1 (both)")
    pc = precision_config if n == 2 else PrecisionConfig([precision_config.operand_precision[0]] * 2)
    return f", precision_config = {pc.to_mlir()}"


def preferred_type(op: str, et: PrimitiveType, preferred_element_type: Any) -> PrimitiveType:
    """The result element type: ``preferred_element_type`` if given, else the operands' type."""
    if preferred_element_type is None:
        return et
    try:
        pt = dtype_to_etype(preferred_element_type)
    except Exception:
        dtype_error(op, f"preferred_element_type {preferred_element_type!r} is not an XLA element type")
    if (pt in COMPLEX) != (et in COMPLEX) or (et in FLOATS and pt in INTS):
        dtype_error(op, f"preferred_element_type {pt.name.lower()} is not compatible with {et.name.lower()} operands")
    return pt


def _check_dims(op: str, name: str, dims: Any, rank: int) -> tuple[int, ...]:
    out = tuple(int(d) for d in dims)
    if len(set(out)) != len(out) or any(not 0 <= d < rank for d in out):
        shape_error(op, f"{name} {list(out)} must be distinct dimension numbers < {rank}")
    return out


def DotGeneral(
    lhs: XlaOp,
    rhs: XlaOp,
    dimension_numbers: Any,
    precision_config: Any = None,
    preferred_element_type: Any = None,
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
    from ..attrs import DotDimensionNumbers, make_dot_dimension_numbers

    x = operand(op, "lhs", lhs)
    y = operand(op, "rhs", rhs)
    same_builder(op, [("lhs", x), ("rhs", y)])
    dn = dimension_numbers if isinstance(dimension_numbers, DotDimensionNumbers) else None
    if dn is None:
        try:
            dn = make_dot_dimension_numbers(dimension_numbers)
        except Exception as e:
            shape_error(op, f"bad dimension_numbers {dimension_numbers!r}: {e}")
    return _dot_general(op, x, y, dn, precision_config, preferred_element_type)


def _dot_general(op: str, x: XlaOp, y: XlaOp, dn: Any, precision_config: Any, preferred_element_type: Any) -> XlaOp:
    et = x.shape.element_type()
    if et not in _NUMERIC:
        dtype_error(op, f"operand 'lhs' must be numeric, got {x.shape}")
    if y.shape.element_type() is not et:
        dtype_error(op, f"operand 'rhs' has element type {y.shape}, expected {et.name.lower()} like 'lhs' {x.shape}")
    xd, yd = x.shape.dimensions(), y.shape.dimensions()
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
        for a, b in zip(ls, rs):
            if xd[a] != yd[b]:
                shape_error(
                    op, f"{kind} dimension {a} of 'lhs' {x.shape} has size {xd[a]}, but {kind} dimension {b} of "
                    f"'rhs' {y.shape} has size {yd[b]}"
                )
    out = [xd[d] for d in lb]
    out += [s for i, s in enumerate(xd) if i not in lc and i not in lb]
    out += [s for i, s in enumerate(yd) if i not in rc and i not in rb]
    rt = preferred_type(op, et, preferred_element_type)
    attrs = f"dot_dimension_numbers = {dn.to_mlir()}" + precision_attr(op, precision_config)
    return x.builder._add("stablehlo.dot_general", (x, y), array_shape(rt, out), attrs)


def Dot(lhs: XlaOp, rhs: XlaOp, precision_config: Any = None, preferred_element_type: Any = None) -> XlaOp:
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
    from ..attrs import DotDimensionNumbers

    x = operand(op, "lhs", lhs)
    y = operand(op, "rhs", rhs)
    same_builder(op, [("lhs", x), ("rhs", y)])
    for name, v in (("lhs", x), ("rhs", y)):
        if v.shape.rank() not in (1, 2):
            shape_error(op, f"operand {name!r} must have rank 1 or 2, got {v.shape} (use DotGeneral)")
    k_l = x.shape.rank() - 1
    if x.shape.dimensions()[k_l] != y.shape.dimensions()[0]:
        shape_error(
            op, f"operand 'rhs' has shape {y.shape}; its first dimension must equal the last dimension of "
            f"'lhs' {x.shape} ({x.shape.dimensions()[k_l]})"
        )
    dn = DotDimensionNumbers(lhs_contracting_dimensions=[k_l], rhs_contracting_dimensions=[0])
    return _dot_general(op, x, y, dn, precision_config, preferred_element_type)
