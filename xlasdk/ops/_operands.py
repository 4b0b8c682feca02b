"""Element-type classes and the operands of element-wise ops: the type checks with their
wording (:func:`_check_dtype`), a Python scalar beside an XlaOp made a constant of its type
(:func:`_coerce`), and XLA's broadcasting of two operands (:func:`binary_element_type`,
:func:`binary_shape`, :func:`broadcast_to`, :func:`binary_operands`).

Split from :mod:`xlasdk.ops.elementwise` (the op tables and the generated ops), which re-exports
these names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._mlir_attrs import DenseElements
from ..builder import XlaOp
from ..shape import Shape
from ..types import COMPLEX, FLOATS, INTS, SIGNED_INTS, PrimitiveType
from ._core import array_shape, dtype_error, int_list, same_builder, shape_error
from ._core import operand as _operand
from .shaping import BROADCAST_IN_DIM
from .sources import CONSTANT, constant_like

_P = PrimitiveType
_BOOL = frozenset({_P.PRED})
_FLOAT, _INT = FLOATS, INTS
_FC = FLOATS | COMPLEX
_NUM = INTS | FLOATS | COMPLEX
_SNUM = SIGNED_INTS | FLOATS | COMPLEX
_INTBOOL = INTS | _BOOL
_ALL = _NUM | _BOOL
_REAL = INTS | FLOATS | _BOOL

_KIND_NAMES = [
    (_FC, "floating-point or complex"), (_FLOAT, "floating-point"),
    (_SNUM, "signed integer, floating-point or complex"), (_NUM, "numeric"), (_INT, "integer"),
    (_INTBOOL, "integer or pred"), (_ALL, "array"), (_REAL, "real (non-complex)"), (COMPLEX, "complex"),
]


def _kind(allowed: frozenset[PrimitiveType]) -> str:
    for s, n in _KIND_NAMES:
        if s == allowed:
            return n
    return "/".join(sorted(e.name.lower() for e in allowed))


def _check_dtype(op: str, name: str, x: Shape, allowed: frozenset[PrimitiveType]) -> PrimitiveType:
    """The element type of ``x``; DTypeError unless it is in ``allowed``."""
    et = x.element_type()
    if et not in allowed:
        dtype_error(op, f"operand {name!r} must be {_kind(allowed)}, got {x}")
    return et


def _coerce(op: str, lhs: Any, rhs: Any) -> tuple[XlaOp, XlaOp]:
    """Turn a Python/numpy scalar on one side into a constant of the other side's dtype."""
    l_is = isinstance(lhs, XlaOp)
    r_is = isinstance(rhs, XlaOp)
    if l_is and r_is:
        return lhs, rhs
    if l_is and _is_scalar(rhs):
        x = _operand(op, "lhs", lhs)
        return x, constant_like(op, rhs, x, scalar=True)
    if r_is and _is_scalar(lhs):
        y = _operand(op, "rhs", rhs)
        return constant_like(op, lhs, y, scalar=True), y
    bad = "lhs" if not l_is else "rhs"
    got = type(lhs if bad == "lhs" else rhs).__name__
    dtype_error(op, f"operand {bad!r} must be an XlaOp (or a scalar beside one), got {got}")


def _is_scalar(v: Any) -> bool:
    return isinstance(v, (bool, int, float, complex, np.generic))


def binary_element_type(op: str, lhs: Shape, rhs: Shape, allowed: frozenset[PrimitiveType]) -> PrimitiveType:
    """Element-type rule of a binary op: the operands' common element type; DTypeError when
    ``lhs``'s is not in ``allowed`` or ``rhs``'s differs."""
    ex = _check_dtype(op, "lhs", lhs, allowed)
    ey = rhs.element_type()
    if ex is not ey:
        want = f"expected {ex.name.lower()} like 'lhs' ({lhs})"
        dtype_error(op, f"operand 'rhs' has element type {ey.name.lower()} ({rhs}), {want}")
    return ex


def binary_shape(
    op: str, lhs: Shape, rhs: Shape, broadcast_dimensions: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Shape rule of the binary ops (XLA's broadcasting): ``(result_dims, lhs_map, rhs_map)``, the
    result dimensions and, per operand, the result dimension each of its dimensions maps to (for
    ``broadcast_in_dim``); ShapeError for shapes that do not broadcast or bad ``broadcast_dimensions``."""
    ld, rd = lhs.dimensions(), rhs.dimensions()
    bd = broadcast_dimensions
    if bd:
        lo_is_lhs = len(ld) < len(rd)
        lo, hi = (ld, rd) if lo_is_lhs else (rd, ld)
        lo_name = "lhs" if lo_is_lhs else "rhs"
        if len(ld) == len(rd):
            if bd != tuple(range(len(ld))):
                shape_error(
                    op, f"broadcast_dimensions {list(bd)} given for operands of equal rank {len(ld)}; "
                    f"expected {list(range(len(ld)))} or none"
                )
            lo_is_lhs, lo, hi, lo_name = False, rd, ld, "rhs"
        if len(bd) != len(lo):
            shape_error(
                op, f"broadcast_dimensions has {len(bd)} entries, expected {len(lo)} (the rank of operand "
                f"{lo_name!r}, {lhs if lo_is_lhs else rhs})"
            )
        if len(set(bd)) != len(bd) or any(not 0 <= d < len(hi) for d in bd) or list(bd) != sorted(bd):
            shape_error(
                op, f"broadcast_dimensions {list(bd)} must be strictly increasing dimension numbers < {len(hi)}"
            )
        res = list(hi)
        for i, d in enumerate(bd):
            if lo[i] != hi[d] and lo[i] != 1 and hi[d] != 1:
                shape_error(
                    op, f"operand {lo_name!r} dimension {i} has size {lo[i]}, but it maps to dimension {d} of "
                    f"size {hi[d]} (sizes must match or one must be 1)"
                )
            res[d] = hi[d] if lo[i] == 1 else lo[i]  # a size-1 side takes the other's size (even 0)
        hmap = tuple(range(len(hi)))
        return (tuple(res), bd, hmap) if lo_is_lhs else (tuple(res), hmap, bd)
    if ld == rd:
        ident = tuple(range(len(ld)))
        return ld, ident, ident
    if not rd:
        return ld, tuple(range(len(ld))), ()
    if not ld:
        return rd, (), tuple(range(len(rd)))
    if len(ld) == len(rd):
        res = []
        for i, (a, b) in enumerate(zip(ld, rd, strict=False)):
            if a != b and a != 1 and b != 1:
                shape_error(
                    op, f"operand 'rhs' has shape {rhs}, incompatible with 'lhs' {lhs} in dimension "
                    f"{i} ({b} vs {a}; sizes must match or one must be 1)"
                )
            res.append(b if a == 1 else a)  # a size-1 side takes the other's size (even 0)
        ident = tuple(range(len(ld)))
        return tuple(res), ident, ident
    shape_error(
        op, f"operand 'rhs' has shape {rhs}, expected {lhs} (or a scalar, or set broadcast_dimensions "
        f"to map the rank-{min(len(ld), len(rd))} operand into the rank-{max(len(ld), len(rd))} one)"
    )


def broadcast_to(x: XlaOp, dims: tuple[int, ...], mapping: tuple[int, ...], op: str = "") -> XlaOp:
    """``stablehlo.broadcast_in_dim`` of ``x`` to ``dims`` (no-op when already that shape)."""
    if x.shape.dimensions() == dims and mapping == tuple(range(len(dims))):
        return x
    if x.opdef is CONSTANT and x.shape.rank() == 0:
        # a splat constant: re-emit at the full shape instead of broadcasting
        shape = array_shape(x.shape.element_type(), dims, op)
        return x.builder.add_op(CONSTANT, (), shape, {"value": DenseElements(x.attrs["value"].array, shape)})
    shape = array_shape(x.shape.element_type(), dims, op)
    return x.builder.add_op(BROADCAST_IN_DIM, (x,), shape, {"broadcast_dimensions": mapping})


def binary_operands(
    op: str, lhs: Any, rhs: Any, broadcast_dimensions: Sequence[int] | None, allowed: frozenset[PrimitiveType]
) -> tuple[XlaOp, XlaOp, PrimitiveType]:
    """Check, coerce and broadcast the two operands of an element-wise binary op."""
    if type(lhs) is XlaOp and type(rhs) is XlaOp and broadcast_dimensions is None:
        # Fast path: two arrays of one builder with identical shapes (the common case).
        ls, rs = lhs.shape, rhs.shape
        et = ls._etype
        if (
            lhs.builder is rhs.builder
            and et is rs._etype
            and et in allowed
            and ls._dims == rs._dims
            and ls._tuple is None
            and rs._tuple is None
        ):
            return lhs, rhs, et
    x, y = _coerce(op, lhs, rhs)
    x = _operand(op, "lhs", x)
    y = _operand(op, "rhs", y)
    same_builder(op, [("lhs", x), ("rhs", y)])
    ex = binary_element_type(op, x.shape, y.shape, allowed)
    bd = () if broadcast_dimensions is None else int_list(op, "broadcast_dimensions", broadcast_dimensions)
    dims, lmap, rmap = binary_shape(op, x.shape, y.shape, bd)
    return broadcast_to(x, dims, lmap, op), broadcast_to(y, dims, rmap, op), ex
