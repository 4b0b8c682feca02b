"""Tuples and control flow: ``Tuple``, ``GetTupleElement`` (``While``, ``Conditional``, ``Call``
live here too once built)."""

from __future__ import annotations

from collections.abc import Sequence


import numpy as np

from ..builder import XlaBuilder, XlaOp
from ..shape import Shape
from ._core import any_operand, dtype_error, shape_error

__all__ = ["Tuple", "GetTupleElement"]


def Tuple(builder: XlaBuilder, elements: Sequence[XlaOp]) -> XlaOp:
    """A tuple of ``elements`` (XLA ``tuple``; ``stablehlo.tuple`` where one value is needed).

    Returns: XlaOp of tuple shape ``(s0, s1, ...)``. As a computation's root, each element
    becomes one output of the executable.

    Raises
    ------
    DTypeError: ``builder`` is not an XlaBuilder or an element is not an XlaOp.
    ShapeError: an element belongs to another builder.
    """
    if not isinstance(builder, XlaBuilder):
        dtype_error("Tuple", f"first argument must be an XlaBuilder, got {type(builder).__name__}")
    if isinstance(elements, XlaOp) or not isinstance(elements, (list, tuple)):
        dtype_error("Tuple", f"elements must be a list or tuple of XlaOps, got {type(elements).__name__}")
    elems = tuple(any_operand("Tuple", f"elements[{i}]", e, builder) for i, e in enumerate(elements))
    return builder._add("tuple", elems, Shape.tuple_shape(e.shape for e in elems))


def GetTupleElement(tuple_data: XlaOp, index: int) -> XlaOp:
    """Element ``index`` of a tuple-shaped op (XLA ``get-tuple-element``).

    Raises
    ------
    ShapeError: the operand is not a tuple or ``index`` is out of range.
    """
    t = any_operand("GetTupleElement", "tuple_data", tuple_data)
    if not t.shape.is_tuple():
        shape_error("GetTupleElement", f"operand 'tuple_data' must be a tuple, got {t.shape}")
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
        dtype_error("GetTupleElement", f"index must be an int, got {index!r}")
    n = t.shape.leaf_count()
    if not 0 <= int(index) < n:
        shape_error("GetTupleElement", f"index {index} out of range for tuple {t.shape} of {n} elements")
    return t.builder._add("get_tuple_element", (t,), t.shape.tuple_shapes()[int(index)], extra=int(index))


