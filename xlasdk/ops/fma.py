"""``Fma``: the fused multiply-add ``a * b + c``, rounded once (XLA ``fma``; ``stablehlo.fma``).

jaxlib 0.12.1 added the op (JAX 0.12.1 lowers ``erf_inv``, and so ``jax.random.normal``, with it),
for f32 and f64 on XLA:CPU ("Fma is not supported for element type f16 on CPU"). :func:`Fma` builds
the op for f32 and f64 where jaxlib has it (:data:`xlasdk._jaxlib.opset.HAS_EXP2_LOG2_FMA`), and
the same value from other ops for the other float types, and for f32 on older jaxlib
(:func:`fma_by_round_to_odd`); f64 has no exact lowering without the op and is refused there.
"""

from __future__ import annotations

from typing import Union

import numpy as np

from .._jaxlib.opset import FIRST_WITH_EXP2_LOG2_FMA, HAS_EXP2_LOG2_FMA
from .._optable import OpDef, define
from ..builder import XlaOp
from ..shape import Shape
from ..types import PrimitiveType
from ._core import array_shape, dtype_error, same_builder, shape_error
from ._core import operand as _operand
from ._operands import _FLOAT, _check_dtype, _is_scalar
from .convert import BITCAST_CONVERT, CONVERT
from .elementwise import BINARY, COMPARE, SELECT, UNARY, compare_attrs, default_compare_type
from .sources import constant_like

__all__ = ["Fma"]

_P = PrimitiveType
Scalar = Union[bool, int, float, np.generic]


def fma_shape(op: str, a: Shape, b: Shape, c: Shape) -> Shape:
    """Shape rule of Fma: ``a``'s shape; DTypeError for a non-float ``a`` or operands of another
    element type, ShapeError for operands of another shape."""
    et = _check_dtype(op, "a", a, _FLOAT)
    for name, v in (("b", b), ("c", c)):
        if v.element_type() is not et:
            dtype_error(op, f"operand {name!r} has element type {v}, expected {et.name.lower()} like 'a' {a}")
        if v.dimensions() != a.dimensions():
            shape_error(op, f"operand {name!r} has shape {v}, expected {a} like 'a'")
    return a


FMA = define("stablehlo.fma", "fma", rule=fma_shape)


def Fma(a: XlaOp, b: XlaOp | Scalar, c: XlaOp | Scalar) -> XlaOp:
    """Element-wise fused multiply-add ``a * b + c`` with one rounding (XLA ``fma``; ``stablehlo.fma``).

    Parameters
    ----------
    a: an array of a float element type, any shape.
    b, c: arrays of ``a``'s shape and element type, or Python scalars (made constants of ``a``'s type).

    Returns
    -------
    XlaOp of ``a``'s shape and element type.

    Raises
    ------
    DTypeError: ``a`` is not a float array, ``b`` or ``c`` has another element type, or (on jaxlib
        before 0.12.1, which has no ``fma``) ``a`` is f64.
    ShapeError: ``b`` or ``c`` has another shape.

    Notes
    -----
    For the types narrower than f32 (XLA:CPU's ``fma`` takes f32 and f64 only), and for f32 on
    jaxlib before 0.12.1, the result is computed from other ops with the same value: the product in
    f64 (exact for types of up to 24 significant bits), the sum rounded to odd and then to the type
    (:func:`fma_by_round_to_odd`).
    """
    x = _operand("Fma", "a", a)
    y = constant_like("Fma", b, x) if _is_scalar(b) else _operand("Fma", "b", b)
    z = constant_like("Fma", c, x) if _is_scalar(c) else _operand("Fma", "c", c)
    same_builder("Fma", [("a", x), ("b", y), ("c", z)])
    shape = fma_shape("Fma", x.shape, y.shape, z.shape)
    et = shape.element_type()
    if HAS_EXP2_LOG2_FMA and et in (_P.F32, _P.F64):
        return x.builder.add_op(FMA, (x, y, z), shape)
    if et is _P.F64:
        dtype_error("Fma", f"f64 needs jaxlib {FIRST_WITH_EXP2_LOG2_FMA} or newer (stablehlo.fma); this jaxlib has no "
                           "fused multiply-add and f64 has no exact lowering without one")
    return fma_by_round_to_odd(x, y, z, shape)


# -- the lowering for jaxlib before 0.12.1 ---------------------------------------------------------
def _cmp(x: XlaOp, y: XlaOp, direction: str) -> XlaOp:
    pred = array_shape(_P.PRED, x.shape.dimensions())
    ctype = default_compare_type(x.shape.element_type())
    return x.builder.add_op(COMPARE, (x, y), pred, compare_attrs(direction, ctype))


_ADD, _SUB, _MUL, _AND = (BINARY[k].opdef for k in ("Add", "Sub", "Mul", "And"))
_ABS, _IS_FINITE = UNARY["Abs"].opdef, UNARY["IsFinite"].opdef


def _op(row: OpDef, *xs: XlaOp) -> XlaOp:
    """The element-wise op ``row`` of ``xs``, of the first operand's shape."""
    return xs[0].builder.add_op(row, xs, xs[0].shape)


def _to_odd(r: XlaOp, inexact: XlaOp, away_from_zero: XlaOp) -> XlaOp:
    """``r`` (f64 or f32), the nearest rounding of a value, made its rounding to odd: where the
    value was not exact (``inexact``) and ``r``'s last significand bit is 0, ``r`` moves one ulp
    toward the value (``away_from_zero``: the value's magnitude is above ``r``'s). Infinities stay."""
    b = r.builder
    bits_et = _P.S64 if r.shape.element_type() is _P.F64 else _P.S32
    ishape = array_shape(bits_et, r.shape.dimensions())
    bits = b.add_op(BITCAST_CONVERT, (r,), ishape)
    one = constant_like("Fma", 1, bits)
    even = _cmp(_op(_AND, bits, one), constant_like("Fma", 0, bits), "EQ")
    moved = b.add_op(SELECT, (away_from_zero, _op(_ADD, bits, one), _op(_SUB, bits, one)), ishape)
    nudge = _op(_AND, _op(_AND, inexact, even), b.add_op(_IS_FINITE, (r,), inexact.shape))
    return b.add_op(BITCAST_CONVERT, (b.add_op(SELECT, (nudge, moved, bits), ishape),), r.shape)


def fma_by_round_to_odd(a: XlaOp, b: XlaOp, c: XlaOp, shape: Shape) -> XlaOp:
    """``fma(a, b, c)`` for floats of up to 32 bits without an ``fma`` op, correctly rounded.

    The product of two such floats is exact in f64; the sum ``s = p + c`` is rounded to odd in f64
    (TwoSum gives its exact error); for types narrower than f32 that is rounded to odd again in f32.
    A rounding to odd at 2 or more bits beyond the target's precision, then to nearest even, is the
    rounding to nearest even of the exact value (Boldo and Melquiond); XLA:CPU converts f64 to
    16-bit and 8-bit floats through f32, which the second step makes exact too.
    """
    bld = a.builder
    f64 = array_shape(_P.F64, shape.dimensions())
    x, y, z = (bld.add_op(CONVERT, (v,), f64) for v in (a, b, c))
    p = _op(_MUL, x, y)
    s = _op(_ADD, p, z)
    bb = _op(_SUB, s, p)  # TwoSum: err = (p - (s - bb)) + (z - bb) is exactly p + z - s
    err = _op(_ADD, _op(_SUB, p, _op(_SUB, s, bb)), _op(_SUB, z, bb))
    zero64 = constant_like("Fma", 0, err)
    odd = _to_odd(s, _cmp(err, zero64, "NE"), _cmp(_cmp(err, zero64, "GT"), _cmp(s, zero64, "GT"), "EQ"))
    if shape.element_type() is _P.F32:
        return bld.add_op(CONVERT, (odd,), shape)
    f32 = array_shape(_P.F32, shape.dimensions())
    r = bld.add_op(CONVERT, (odd,), f32)
    back = bld.add_op(CONVERT, (r,), f64)
    odd32 = _to_odd(r, _cmp(back, odd, "NE"), _cmp(_op(_ABS, odd), _op(_ABS, back), "GT"))
    return bld.add_op(CONVERT, (odd32,), shape)
