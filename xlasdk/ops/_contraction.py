"""What dot and convolution share: the result element type (``preferred_element_type``), the
sub-byte widening XLA:CPU needs, and the ``precision_config`` attribute."""

from __future__ import annotations

from typing import Any

from ..attrs import PrecisionConfig
from ..builder import XlaOp
from ..types import COMPLEX, FLOATS, INTS, PrimitiveType, dtype_to_etype
from ._core import array_shape, dtype_error, enum_arg, shape_error, show
from .convert import CONVERT

__all__ = ["precision_attrs", "widen_sub_byte", "contraction_type", "narrow_to", "preferred_type", "NUMERIC"]

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
