"""Special lowerings of element-wise ops for the element types XLA gets wrong or cannot lower.

Integer ``Div``/``Rem`` with XLA's defined results for ``x / 0`` and ``INT_MIN / -1``, signed
integer ``Pow`` with negative exponents, ``And``/``Or``/``Clz``/``PopulationCount`` of signed
integers on their unsigned bit patterns, pred ``Add``/``Mul``, integer ``Square``, and CHLO ops
computed in f32 for 8- and 4-bit floats. :mod:`xlasdk.ops.elementwise` names them in its
tables; they build their nodes with its rows (imported when called, after it is loaded).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import ml_dtypes

from ..builder import XlaOp
from ..shape import Shape
from ..types import SIGNED_INTS, PrimitiveType
from ._core import array_shape
from .convert import BITCAST_CONVERT, CONVERT
from .sources import constant_like

if TYPE_CHECKING:
    from .._optable import OpDef
    from .elementwise import BinaryOp, UnaryOp

_P = PrimitiveType

# Signed integer type -> unsigned type of the same width (for bitcasts).
AS_UNSIGNED = {_P.S2: _P.U2, _P.S4: _P.U4, _P.S8: _P.U8, _P.S16: _P.U16, _P.S32: _P.U32, _P.S64: _P.U64}


def square_int(u: UnaryOp, x: XlaOp, et: PrimitiveType, shape: Shape) -> XlaOp:
    """chlo.square takes only float/complex: integers are ``multiply(x, x)``."""
    from .elementwise import BINARY

    return x.builder.add_op(BINARY["Mul"].opdef, (x, x), shape)


def count_unsigned(u: UnaryOp, x: XlaOp, et: PrimitiveType, shape: Shape) -> XlaOp:
    """Clz / PopulationCount of signed integers counted on their unsigned bit patterns.

    XLA's constant folder gets these wrong for negative signed values (Clz of s8 -1 is -56, not
    0; PopulationCount of s2 -1 is 0); counting on the unsigned bit pattern is right both at run
    time and when folded.
    """
    b = x.builder
    ushape = array_shape(AS_UNSIGNED[et], x.shape.dimensions())
    xu = b.add_op(BITCAST_CONVERT, (x,), ushape)
    return b.add_op(BITCAST_CONVERT, (b.add_op(u.opdef, (xu,), ushape),), shape)


def via_f32(u: UnaryOp, x: XlaOp, et: PrimitiveType, shape: Shape) -> XlaOp:
    """No XLA lowering of this CHLO op for 8/4-bit floats: computed in f32 and rounded back."""
    b = x.builder
    f32 = array_shape(_P.F32, x.shape.dimensions())
    wide = b.add_op(CONVERT, (x,), f32)
    return b.add_op(CONVERT, (b.add_op(u.opdef, (wide,), f32),), shape)


def pred_add_mul(bo: BinaryOp, x: XlaOp, y: XlaOp, et: PrimitiveType) -> XlaOp:
    """XLA:CPU computes pred add as or, but its constant folder as xor (true + true = false):
    pred Add is built as Or, pred Mul as And."""
    from .elementwise import BINARY

    return x.builder.add_op(BINARY["Or" if bo.name == "Add" else "And"].opdef, (x, y), x.shape)


def int_div_rem(bo: BinaryOp, x: XlaOp, y: XlaOp, et: PrimitiveType) -> XlaOp:
    """Integer Div/Rem with XLA's defined results for x/0 and INT_MIN/-1, never trapping."""
    from .elementwise import BINARY, COMPARE, SELECT, compare_attrs

    b = x.builder
    pred = array_shape(_P.PRED, x.shape.dimensions())

    def cmp(a: XlaOp, c: XlaOp, d: str, t: str) -> XlaOp:
        return b.add_op(COMPARE, (a, c), pred, compare_attrs(d, t))

    ctype = "SIGNED" if et in SIGNED_INTS else "UNSIGNED"
    zero = constant_like(bo.name, 0, x)
    one = constant_like(bo.name, 1, x)
    bad = cmp(y, zero, "EQ", ctype)
    if et in SIGNED_INTS:
        int_min = constant_like(bo.name, int(ml_dtypes.iinfo(x.dtype).min), x)  # type: ignore[no-untyped-call]
        minus1 = constant_like(bo.name, -1, x)
        overflow = b.add_op(BINARY["And"].opdef, (cmp(x, int_min, "EQ", ctype), cmp(y, minus1, "EQ", ctype)), pred)
        bad = b.add_op(BINARY["Or"].opdef, (bad, overflow), pred)
    # With the divisor 1 in place of 0 and -1: INT_MIN / 1 = INT_MIN and INT_MIN % 1 = 0, as XLA
    # defines INT_MIN / -1 and INT_MIN % -1; the x / 0 and x % 0 lanes are replaced below.
    safe_y = b.add_op(SELECT, (bad, one, y), y.shape)
    res = b.add_op(bo.opdef, (x, safe_y), x.shape)
    by_zero = cmp(y, zero, "EQ", ctype)
    if bo.name == "Div":
        all_ones = -1 if et in SIGNED_INTS else int(ml_dtypes.iinfo(x.dtype).max)  # type: ignore[no-untyped-call]
        return b.add_op(SELECT, (by_zero, constant_like(bo.name, all_ones, x), res), x.shape)
    return b.add_op(SELECT, (by_zero, x, res), x.shape)


def unsigned_bitwise(opdef: OpDef, x: XlaOp, y: XlaOp) -> XlaOp:
    """``and``/``or`` of signed integers computed on their unsigned bit patterns.

    XLA:CPU (jaxlib 0.10.2) segfaults while compiling ``and``/``or`` of a narrowing signed
    convert (s32 -> s8, s64 -> s32...) and another operand; bitcasting to unsigned first gives
    the same bits and avoids the crashing rewrite.
    """
    b = x.builder
    ushape = array_shape(AS_UNSIGNED[x.shape.element_type()], x.shape.dimensions())
    xu = b.add_op(BITCAST_CONVERT, (x,), ushape)
    yu = b.add_op(BITCAST_CONVERT, (y,), ushape)
    return b.add_op(BITCAST_CONVERT, (b.add_op(opdef, (xu, yu), ushape),), x.shape)


def bitwise(bo: BinaryOp, x: XlaOp, y: XlaOp, et: PrimitiveType) -> XlaOp:
    """Signed And/Or: :func:`unsigned_bitwise` with the op's row."""
    return unsigned_bitwise(bo.opdef, x, y)


def int_pow(bo: BinaryOp, x: XlaOp, y: XlaOp, et: PrimitiveType) -> XlaOp:
    """Signed integer Pow whose negative-exponent lanes do not depend on XLA's evaluator.

    XLA:CPU gives ``x ** -n`` = 0 except ``1 ** -n`` = 1 and ``(-1) ** -n`` = +-1, but XLA's
    constant folder (HloEvaluator) gives 0 for ``(-1) ** -n``; the exponent is clamped to 0 in
    those lanes and the defined result selected in.
    """
    from .elementwise import BINARY, COMPARE, SELECT, compare_attrs

    b = x.builder
    pred = array_shape(_P.PRED, x.shape.dimensions())

    def cmp(a: XlaOp, c: XlaOp, d: str) -> XlaOp:
        return b.add_op(COMPARE, (a, c), pred, compare_attrs(d, "SIGNED"))

    zero = constant_like("Pow", 0, x)
    one = constant_like("Pow", 1, x)
    minus1 = constant_like("Pow", -1, x)
    neg = cmp(y, zero, "LT")
    powered = b.add_op(BINARY["Pow"].opdef, (x, b.add_op(SELECT, (neg, zero, y), y.shape)), x.shape)
    odd = cmp(unsigned_bitwise(BINARY["And"].opdef, y, one), one, "EQ")
    of_minus1 = b.add_op(SELECT, (odd, minus1, one), x.shape)
    neg_val = b.add_op(
        SELECT,
        (cmp(x, one, "EQ"), one, b.add_op(SELECT, (cmp(x, minus1, "EQ"), of_minus1, zero), x.shape)),
        x.shape,
    )
    return b.add_op(SELECT, (neg, neg_val, powered), x.shape)
