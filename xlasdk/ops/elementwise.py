"""Element-wise ops: unary, binary, comparisons, ``Select``, ``Clamp``.

The ops are data: :data:`UNARY` and :data:`BINARY` map each public name to its StableHLO/CHLO
op, the element types it accepts and its result type rule; the functions are generated from the
tables. Binary ops follow XLA's broadcasting: equal shapes, a scalar against anything,
same-rank arrays whose sizes differ only where one of them is 1 (degenerate broadcasting), or
an explicit ``broadcast_dimensions`` mapping the lower-rank operand into the higher-rank one.

Each op's shape rule is a plain function of shapes, element types and attribute values
(:func:`unary_shape`, :func:`binary_element_type`, :func:`binary_shape`, :func:`compare_result`,
:func:`select_shape`, :func:`clamp_shape`) raising ShapeError/DTypeError naming the op; the
special lowerings for some element types sit beside the tables that name them (integer
``Div``/``Rem`` with XLA's defined results for ``x / 0`` and ``INT_MIN / -1``, signed integer
``Pow`` with negative exponents, ``And``/``Or``/``Clz``/``PopulationCount`` of signed integers on
their unsigned bit patterns, pred ``Add``/``Mul``, integer ``Square``, and CHLO ops computed in
f32 for 8- and 4-bit floats). Every row binds its shape rule: :func:`unary_shape` for the unary
rows, :func:`binary_op_shape` for the binary ones. The element-type checks and the operands'
broadcasting the binary ops, comparisons and ``Clamp`` share live in :mod:`xlasdk.ops._operands`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Union

import ml_dtypes
import numpy as np

from .._jaxlib.opset import HAS_EXP2_LOG2_FMA
from .._optable import AttrKind, HloForm, OpDef, define
from ..attrs import ComparisonDirection, ComparisonType, ResultAccuracy
from ..builder import XlaOp
from ..errors import ShapeError
from ..shape import Shape
from ..types import COMPLEX, FLOATS, INTS, SIGNED_INTS, PrimitiveType
from ._core import (
    array_shape,
    dtype_error,
    enum_arg,
    is_index,
    same_builder,
    shape_error,
    show,
)
from ._core import operand as _operand

# the element-type classes and the operands' checks and broadcasting, re-exported (ew.binary_shape...)
from ._operands import (
    _ALL,
    _BOOL,
    _FC,
    _FLOAT,
    _INT,
    _INTBOOL,
    _NUM,
    _P,
    _REAL,
    _SNUM,
    _check_dtype,
    _is_scalar,
    _kind,
    binary_element_type,
    binary_operands,
    binary_shape,
)
from ._operands import broadcast_to as broadcast_to
from .convert import BITCAST_CONVERT, CONVERT
from .sources import constant_like

if TYPE_CHECKING:
    from ..attrs import ComparisonDirection, ComparisonType, ResultAccuracy

#: A Python or numpy scalar, accepted beside an XlaOp by the binary ops (it becomes a constant of
#: the other operand's element type).
Scalar = Union[bool, int, float, complex, np.generic]

__all__ = [
    "Abs", "Acos", "Acosh", "Add", "And", "Asin", "Asinh", "Atan", "Atan2", "Atanh", "BesselI1e", "Cbrt", "Ceil",
    "Clamp", "Clz", "Compare", "Complex", "Conj", "Cos", "Cosh", "Digamma", "Div", "Eq", "Erf", "Erfc", "ErfInv",
    "Exp", "Exp2", "Expm1", "Floor", "Ge", "Gt", "Imag", "IsFinite", "Le", "Lgamma", "Log", "Log1p", "Log2",
    "Logistic", "Lt", "Max", "Min", "Mul", "Ne", "Neg", "NextAfter", "Not", "Or", "Polygamma", "PopulationCount", "Pow",
    "Real", "Reciprocal", "Rem", "Round", "RoundNearestEven", "Rsqrt", "Select", "ShiftLeft", "ShiftRightArithmetic",
    "ShiftRightLogical", "Sign", "Sin", "Sinh", "Sqrt", "Square", "Sub", "Tan", "Tanh", "Xor", "Zeta",
]


class UnaryFn(Protocol):
    """The signature of the generated unary ops (``Exp``, ``Abs``...)."""

    def __call__(self, operand: XlaOp, result_accuracy: ResultAccuracy | None = None) -> XlaOp: ...


class BinaryFn(Protocol):
    """The signature of the generated binary ops and comparisons (``Add``, ``Lt``...)."""

    def __call__(
        self, lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, broadcast_dimensions: Sequence[int] | None = None
    ) -> XlaOp: ...


_BITWISE = ("Bitwise for integers, logical for pred. Signed integers are combined as their unsigned bit patterns "
            "(XLA:CPU crashes compiling some signed forms).")
_COMPLEX_PART = {_P.C64: _P.F32, _P.C128: _P.F64}
_MAKE_COMPLEX = {_P.F32: _P.C64, _P.F64: _P.C128}

# -- unary --------------------------------------------------------------------------------------

# -- special lowerings of unary ops (named in the UNARY table) --
# Signed integer type -> unsigned type of the same width (for bitcasts).
AS_UNSIGNED = {_P.S2: _P.U2, _P.S4: _P.U4, _P.S8: _P.U8, _P.S16: _P.U16, _P.S32: _P.U32, _P.S64: _P.U64}


def square_int(u: UnaryOp, x: XlaOp, et: PrimitiveType, shape: Shape) -> XlaOp:
    """chlo.square takes only float/complex: integers are ``multiply(x, x)``."""
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


def _widened(x: XlaOp, et: PrimitiveType) -> XlaOp:
    """``x`` converted to f32 when its type is a float narrower than f32 (itself otherwise)."""
    if et in (_P.F32, _P.F64) or et in COMPLEX:
        return x
    return x.builder.add_op(CONVERT, (x,), array_shape(_P.F32, x.shape.dimensions()))


def exp2_via_pow(u: UnaryOp, x: XlaOp, et: PrimitiveType, shape: Shape) -> XlaOp:
    """jaxlib before 0.12.1 has no ``stablehlo.exp2``: ``2 ** x`` (``power``), in f32 for the
    floats narrower than f32."""
    w = _widened(x, et)
    y = x.builder.add_op(BINARY["Pow"].opdef, (constant_like(u.name, 2, w), w), w.shape)
    return y if w is x else x.builder.add_op(CONVERT, (y,), shape)


def log2_via_log(u: UnaryOp, x: XlaOp, et: PrimitiveType, shape: Shape) -> XlaOp:
    """jaxlib before 0.12.1 has no ``stablehlo.log2``: ``log(x) * (1 / ln 2)``, in f32 for the
    floats narrower than f32."""
    w = _widened(x, et)
    ln = x.builder.add_op(UNARY["Log"].opdef, (w,), w.shape)
    y = x.builder.add_op(BINARY["Mul"].opdef, (ln, constant_like(u.name, 1 / math.log(2), ln)), w.shape)
    return y if w is x else x.builder.add_op(CONVERT, (y,), shape)


_SIGNED = frozenset(AS_UNSIGNED)  # signed integer types that have an unsigned twin
# stablehlo.exp2 / log2 are built as such from jaxlib 0.12.1 on, lowered for every type before it.
_NO_EXP2_LOG2 = frozenset[PrimitiveType]() if HAS_EXP2_LOG2_FMA else _FC
# CHLO ops XLA cannot lower for 8- and 4-bit floats are computed in f32 and rounded back.
_NARROW_FLOATS = frozenset(e for e in FLOATS if e not in (_P.F16, _P.BF16, _P.F32, _P.F64))


UnaryLowering = Callable[["UnaryOp", XlaOp, PrimitiveType, Shape], XlaOp]


@dataclass(frozen=True)
class UnaryOp:
    """One row of the unary op table.

    ``opdef`` is the op's row of the op table (StableHLO/CHLO name, HLO opcode); ``allowed`` the
    operand element types; ``result`` the result element type rule; ``accuracy`` whether it
    takes ``result_accuracy``; ``lower`` a special lowering used for the element types
    ``lower_for`` (the plain op for the others); ``doc_hlo`` the HLO form named in the docstring.
    """

    name: str
    opdef: OpDef
    allowed: frozenset[PrimitiveType]
    result: Callable[[PrimitiveType], PrimitiveType] = lambda e: e
    accuracy: bool = False
    lower: UnaryLowering | None = None
    lower_for: frozenset[PrimitiveType] = frozenset()
    doc_hlo: str = ""

    @property
    def hlo(self) -> str:
        return self.doc_hlo or self.opdef.hlo


def _part(e: PrimitiveType) -> PrimitiveType:
    return _COMPLEX_PART.get(e, e)


def _u(
    name: str, opcode: str, hlo: str, allowed: frozenset[PrimitiveType],
    result: Callable[[PrimitiveType], PrimitiveType] = lambda e: e, *, accuracy: bool = False,
    lower: tuple[UnaryLowering, frozenset[PrimitiveType]] | None = None,
) -> UnaryOp:
    """A unary row: a StableHLO op printed directly as ``hlo``, or (``chlo.*``) a CHLO op that
    XLA's converter expands, ``hlo`` then naming what it becomes (for the docstring). ``lower``:
    a special lowering and the element types it is for."""
    fn, types = lower if lower is not None else (None, frozenset[PrimitiveType]())
    if opcode.startswith("chlo."):
        return UnaryOp(name, define(opcode, rule=unary_shape), allowed, result, accuracy, fn, types, hlo)
    return UnaryOp(name, define(opcode, hlo, rule=unary_shape), allowed, result, accuracy, fn, types)


def unary_shape(name: str, operand: Shape) -> Shape:
    """Shape rule of the unary op ``name`` (a key of :data:`UNARY`): the operand's dimensions with
    the op's result element type; DTypeError for an element type the op does not take."""
    u = UNARY[name]
    et = _check_dtype(name, "operand", operand, u.allowed)
    res = u.result(et)
    return operand if res is et else array_shape(res, operand.dimensions(), name)


UNARY: dict[str, UnaryOp] = {
    u.name: u
    for u in [
        _u("Abs", "stablehlo.abs", "abs", _SNUM, _part),
        _u("Neg", "stablehlo.negate", "negate", _NUM),
        _u("Exp", "stablehlo.exponential", "exponential", _FC, accuracy=True),
        _u("Exp2", "stablehlo.exp2", "exp2", _FC, lower=(exp2_via_pow, _NO_EXP2_LOG2)),
        _u("Log2", "stablehlo.log2", "log2", _FC, lower=(log2_via_log, _NO_EXP2_LOG2)),
        _u("Expm1", "stablehlo.exponential_minus_one", "exponential-minus-one", _FC, accuracy=True),
        _u("Log", "stablehlo.log", "log", _FC, accuracy=True),
        _u("Log1p", "stablehlo.log_plus_one", "log-plus-one", _FC, accuracy=True),
        _u("Sqrt", "stablehlo.sqrt", "sqrt", _FC, accuracy=True),
        _u("Rsqrt", "stablehlo.rsqrt", "rsqrt", _FC, accuracy=True),
        _u("Cbrt", "stablehlo.cbrt", "cbrt", _FLOAT, accuracy=True),
        _u("Tanh", "stablehlo.tanh", "tanh", _FC, accuracy=True),
        _u("Logistic", "stablehlo.logistic", "logistic", _FC, accuracy=True),
        _u("Sin", "stablehlo.sine", "sine", _FC, accuracy=True),
        _u("Cos", "stablehlo.cosine", "cosine", _FC, accuracy=True),
        _u("Tan", "stablehlo.tan", "tan", _FC, accuracy=True),
        _u("Floor", "stablehlo.floor", "floor", _FLOAT),
        _u("Ceil", "stablehlo.ceil", "ceil", _FLOAT),
        _u("Round", "stablehlo.round_nearest_afz", "round-nearest-afz", _FLOAT),
        _u("RoundNearestEven", "stablehlo.round_nearest_even", "round-nearest-even", _FLOAT),
        _u("Sign", "stablehlo.sign", "sign", _SNUM),
        _u("Not", "stablehlo.not", "not", _INTBOOL),
        _u("IsFinite", "stablehlo.is_finite", "is-finite", _FLOAT, lambda e: _P.PRED),
        _u("Real", "stablehlo.real", "real", _FC, _part),
        _u("Imag", "stablehlo.imag", "imag", _FC, _part),
        _u("Conj", "chlo.conj", "(complex (real x) (negate (imag x)))", COMPLEX),
        _u("PopulationCount", "stablehlo.popcnt", "popcnt", _INT, lower=(count_unsigned, _SIGNED)),
        _u("Clz", "stablehlo.count_leading_zeros", "count-leading-zeros", _INT, lower=(count_unsigned, _SIGNED)),
        _u("Erf", "chlo.erf", "erf", _FLOAT, accuracy=True),
        _u("Erfc", "chlo.erfc", "erfc (expanded)", _FLOAT, lower=(via_f32, _NARROW_FLOATS)),
        _u("ErfInv", "chlo.erf_inv", "erf-inv (expanded)", _FLOAT),
        _u("Lgamma", "chlo.lgamma", "lgamma (expanded)", _FLOAT),
        _u("Digamma", "chlo.digamma", "digamma (expanded)", _FLOAT),
        _u("Acos", "chlo.acos", "acos (expanded)", _FC),
        _u("Asin", "chlo.asin", "asin (expanded)", _FC),
        _u("Atan", "chlo.atan", "atan (expanded)", _FC),
        _u("Acosh", "chlo.acosh", "acosh (expanded)", _FC),
        _u("Asinh", "chlo.asinh", "asinh (expanded)", _FC),
        _u("Atanh", "chlo.atanh", "atanh (expanded)", _FC),
        _u("Cosh", "chlo.cosh", "cosh (expanded)", _FC),
        _u("Sinh", "chlo.sinh", "sinh (expanded)", _FC),
        _u("Square", "chlo.square", "multiply(x, x)", _NUM, lower=(square_int, INTS)),
        _u("BesselI1e", "chlo.bessel_i1e", "bessel-i1e (expanded)", _FLOAT, lower=(via_f32, _NARROW_FLOATS)),
    ]
}


def _result_accuracy(u: UnaryOp, result_accuracy: Any) -> dict[str, Any]:
    """The op's attributes for ``result_accuracy`` (none for DEFAULT), checked."""
    if not u.accuracy:
        shape_error(u.name, "result_accuracy is not supported by this op")
    if not isinstance(result_accuracy, ResultAccuracy):
        got = type(result_accuracy).__name__
        dtype_error(u.name, f"result_accuracy must be an xs.ResultAccuracy, got {got}")
    enum_arg(u.name, ResultAccuracy.Mode, result_accuracy.mode, "result_accuracy: ")
    for field in ("atol", "rtol"):
        v = getattr(result_accuracy, field)
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
            dtype_error(u.name, f"result_accuracy.{field} must be a float, got {show(v)}")
    if not is_index(result_accuracy.ulps):
        dtype_error(u.name, f"result_accuracy.ulps must be an int, got {show(result_accuracy.ulps)}")
    try:
        mode = result_accuracy.validate()[0]
    except ShapeError as e:  # fields set to bad values after construction
        shape_error(u.name, f"result_accuracy: {e}")
    if mode.name == "DEFAULT":
        return {}
    frozen = ResultAccuracy(mode, float(result_accuracy.atol), float(result_accuracy.rtol), int(result_accuracy.ulps))
    return {"result_accuracy": frozen}


def _unary(u: UnaryOp) -> UnaryFn:
    def op(operand: XlaOp, result_accuracy: ResultAccuracy | None = None) -> XlaOp:
        x = _operand(u.name, "operand", operand)
        shape = unary_shape(u.name, x.shape)
        et = x.shape.element_type()
        attrs = None if result_accuracy is None else _result_accuracy(u, result_accuracy)
        if et in u.lower_for:
            assert u.lower is not None
            return u.lower(u, x, et, shape)
        return x.builder.add_op(u.opdef, (x,), shape, attrs)

    erf = ("\n    It is kept on ``chlo.erf`` in StableHLO, but HLO has no accuracy field for erf, so XLA's\n"
           "    result does not change.")
    accuracy = (  # a parameter of its own, level with ``operand`` (numpydoc)
        "\nresult_accuracy: optional :class:`~xlasdk.ResultAccuracy` (DEFAULT, HIGHEST or a TOLERANCE)."
        + (erf if u.name == "Erf" else "") if u.accuracy else ""
    )
    op.__name__ = op.__qualname__ = u.name
    op.__doc__ = (
        f"Element-wise {u.name} (XLA ``{u.hlo}``; ``{u.opdef.name}``).\n\n"
        f"Parameters\n----------\noperand: an array of {_kind(u.allowed)} element type, any shape.{accuracy}\n\n"
        f"Returns\n-------\nXlaOp of the operand's shape"
        + (" (element type: the real part type for complex)" if u.result is _part else "")
        + (" and element type pred" if u.name == "IsFinite" else "")
        + ".\n\nRaises\n------\nDTypeError: the operand is not an XlaOp or has an element type outside "
        f"{_kind(u.allowed)}.\nShapeError: the operand is a tuple or token."
    )
    return op


# -- binary -------------------------------------------------------------------------------------


BinaryLowering = Callable[["BinaryOp", XlaOp, XlaOp, PrimitiveType], XlaOp]


@dataclass(frozen=True)
class BinaryOp:
    """One row of the binary op table (fields as :class:`UnaryOp`; ``semantics`` is docstring
    text on edge cases)."""

    name: str
    opdef: OpDef
    allowed: frozenset[PrimitiveType]
    result: Callable[[PrimitiveType], PrimitiveType] = lambda e: e
    lower: BinaryLowering | None = None
    lower_for: frozenset[PrimitiveType] = frozenset()
    doc_hlo: str = ""
    semantics: str = ""

    @property
    def hlo(self) -> str:
        return self.doc_hlo or self.opdef.hlo


def _b(
    name: str, opcode: str, hlo: str, allowed: frozenset[PrimitiveType],
    result: Callable[[PrimitiveType], PrimitiveType] = lambda e: e, *,
    lower: tuple[BinaryLowering, frozenset[PrimitiveType]] | None = None, semantics: str = "",
) -> BinaryOp:
    fn, types = lower if lower is not None else (None, frozenset[PrimitiveType]())
    if opcode.startswith("chlo."):
        return BinaryOp(name, define(opcode, rule=binary_op_shape), allowed, result, fn, types, hlo, semantics)
    return BinaryOp(name, define(opcode, hlo, rule=binary_op_shape), allowed, result, fn, types, "", semantics)


# -- special lowerings of binary ops (named in the BINARY table) --
def pred_add_mul(bo: BinaryOp, x: XlaOp, y: XlaOp, et: PrimitiveType) -> XlaOp:
    """XLA:CPU computes pred add as or, but its constant folder as xor (true + true = false):
    pred Add is built as Or, pred Mul as And."""
    return x.builder.add_op(BINARY["Or" if bo.name == "Add" else "And"].opdef, (x, y), x.shape)


def int_div_rem(bo: BinaryOp, x: XlaOp, y: XlaOp, et: PrimitiveType) -> XlaOp:
    """Integer Div/Rem with XLA's defined results for x/0 and INT_MIN/-1, never trapping."""
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


def binary_op_shape(name: str, lhs: Shape, rhs: Shape, broadcast_dimensions: tuple[int, ...] = ()) -> Shape:
    """Shape rule of the binary op ``name`` (a key of :data:`BINARY`): the operands' common element
    type (:func:`binary_element_type`), their broadcast dimensions (:func:`binary_shape`) and the op's
    result element type (:func:`binary_result_shape`); DTypeError/ShapeError as those raise."""
    binary_element_type(name, lhs, rhs, BINARY[name].allowed)
    dims, _, _ = binary_shape(name, lhs, rhs, broadcast_dimensions)
    return binary_result_shape(name, array_shape(lhs.element_type(), dims, name))


BINARY: dict[str, BinaryOp] = {
    b.name: b
    for b in [
        _b("Add", "stablehlo.add", "add", _ALL, lower=(pred_add_mul, _BOOL),
           semantics="lhs + rhs (logical or for pred)"),
        _b("Sub", "stablehlo.subtract", "subtract", _NUM),
        _b("Mul", "stablehlo.multiply", "multiply", _ALL, lower=(pred_add_mul, _BOOL),
           semantics="lhs * rhs (logical and for pred)"),
        _b("Div", "stablehlo.divide", "divide", _NUM, lower=(int_div_rem, INTS),
           semantics="Integer division truncates toward zero. As XLA defines it, x / 0 is -1 for signed "
           "and all ones for unsigned types, and INT_MIN / -1 is INT_MIN (lowered with a guarded divisor "
           "so that constant folding never traps)."),
        _b("Rem", "stablehlo.remainder", "remainder", _REAL - _BOOL, lower=(int_div_rem, INTS),
           semantics="The result takes the dividend's sign (C fmod). As XLA defines it, x % 0 is x and "
           "INT_MIN % -1 is 0 for integers; a float x % 0 is NaN."),
        _b("Max", "stablehlo.maximum", "maximum", _REAL, semantics="NaN propagates."),
        _b("Min", "stablehlo.minimum", "minimum", _REAL, semantics="NaN propagates."),
        _b("Pow", "stablehlo.power", "power", _NUM, lower=(int_pow, SIGNED_INTS),
           semantics="For integers a negative exponent gives 0, except 1**n = 1 and (-1)**n = +-1 "
           "(-1 for odd n), as XLA:CPU computes it; these lanes are lowered with selects so that XLA's "
           "constant folding, which gives 0 for (-1)**-n, agrees. 0**0 is 1."),
        _b("Atan2", "stablehlo.atan2", "atan2", _FC),
        _b("Complex", "stablehlo.complex", "complex", frozenset(_MAKE_COMPLEX), _MAKE_COMPLEX.__getitem__),
        _b("And", "stablehlo.and", "and", _INTBOOL, lower=(bitwise, _SIGNED),
           semantics=_BITWISE),
        _b("Or", "stablehlo.or", "or", _INTBOOL, lower=(bitwise, _SIGNED),
           semantics=_BITWISE),
        _b("Xor", "stablehlo.xor", "xor", _INTBOOL),
        _b("ShiftLeft", "stablehlo.shift_left", "shift-left", _INT,
           semantics="A shift by the bit width or more (or a negative amount, read as unsigned) gives 0."),
        _b("ShiftRightArithmetic", "stablehlo.shift_right_arithmetic", "shift-right-arithmetic", _INT,
           semantics="A shift by the bit width or more fills with the sign bit."),
        _b("ShiftRightLogical", "stablehlo.shift_right_logical", "shift-right-logical", _INT,
           semantics="A shift by the bit width or more gives 0."),
        _b("NextAfter", "chlo.next_after", "next-after (expanded)", _FLOAT),
        _b("Polygamma", "chlo.polygamma", "polygamma (expanded)", _FLOAT),
        _b("Zeta", "chlo.zeta", "zeta (expanded)", _FLOAT),
    ]
}


def binary_result_shape(name: str, operand: Shape) -> Shape:
    """Result shape of the binary op ``name`` (a key of :data:`BINARY`) on operands broadcast to
    ``operand``: its dimensions with the op's result element type (ShapeError if too large)."""
    et = operand.element_type()
    res = BINARY[name].result(et)
    return operand if res is et else array_shape(res, operand.dimensions(), name)


def _binary(bo: BinaryOp) -> BinaryFn:
    def op(lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, broadcast_dimensions: Sequence[int] | None = None) -> XlaOp:
        x, y, et = binary_operands(bo.name, lhs, rhs, broadcast_dimensions, bo.allowed)
        if et in bo.lower_for:
            assert bo.lower is not None
            return bo.lower(bo, x, y, et)
        return x.builder.add_op(bo.opdef, (x, y), binary_result_shape(bo.name, x.shape))

    op.__name__ = op.__qualname__ = bo.name
    op.__doc__ = (
        f"Element-wise {bo.name} of two arrays (XLA ``{bo.hlo}``; ``{bo.opdef.name}``).\n\n"
        + (bo.semantics + "\n\n" if bo.semantics else "")
        + "Parameters\n----------\n"
        f"lhs, rhs: arrays of the same {_kind(bo.allowed)} element type; one may be a Python scalar, which "
        "becomes a constant of the other's element type. Shapes must be equal, or one a scalar, or of "
        "equal rank with sizes differing only where one is 1.\n"
        "broadcast_dimensions: for operands of different rank, the dimensions of the higher-rank operand "
        "that the lower-rank operand's dimensions map to (strictly increasing).\n\n"
        "Returns\n-------\nXlaOp of the broadcast shape"
        + (", element type " + ("complex" if bo.name == "Complex" else "") if bo.name == "Complex" else "")
        + ".\n\nRaises\n------\nDTypeError: element types differ, are not allowed, or a scalar does not fit.\n"
        "ShapeError: shapes cannot be broadcast together, or bad broadcast_dimensions."
    )
    return op


# -- comparisons --------------------------------------------------------------------------------

_DEFAULT_COMPARE = {  # XLA's Comparison::DefaultComparisonType, where the HLO printer leaves out type=
    **{t: "FLOAT" for t in (_P.F16, _P.BF16, _P.F32, _P.F64, _P.C64, _P.C128)},
    **{t: "SIGNED" for t in (_P.S2, _P.S4, _P.S8, _P.S16, _P.S32, _P.S64)},
    **{t: "UNSIGNED" for t in (_P.PRED, _P.U2, _P.U4, _P.U8, _P.U16, _P.U32, _P.U64)},
}


def _compare_hlo(o: XlaOp) -> str:
    """``, direction=LT`` (and ``, type=TOTALORDER`` when it is not the element type's default)."""
    direction, ctype = o.attrs["comparison_direction"], o.attrs["compare_type"]
    extra = f", direction={direction.to_hlo()}"
    if ctype.name != _DEFAULT_COMPARE.get(o.operands[0].shape.element_type()):
        extra += f", type={ctype.to_hlo()}"
    return extra




def compare_attrs(direction: str, compare_type: str) -> dict[str, Any]:
    """The attributes of a ``stablehlo.compare``: direction and type by their names."""
    return {
        "comparison_direction": ComparisonDirection[direction],
        "compare_type": ComparisonType[compare_type],
    }



def default_compare_type(et: PrimitiveType) -> str:
    """XLA's default comparison type for an element type."""
    if et in FLOATS or et in COMPLEX:
        return "FLOAT"
    if et in SIGNED_INTS:
        return "SIGNED"
    return "UNSIGNED"


def compare_result(
    operand: Shape, direction: ComparisonDirection, compare_type: ComparisonType | None
) -> tuple[str, Shape]:
    """Shape rule of Compare on operands broadcast to ``operand``: the comparison type's name (the
    element type's default when None) and the pred result shape; DTypeError for a comparison type
    or (complex) direction the element type does not take."""
    et = operand.element_type()
    if compare_type is None:
        ct = default_compare_type(et)
    else:
        ct = compare_type.name
        is_fp = et in FLOATS or et in COMPLEX
        if (
            is_fp != (ct in ("FLOAT", "TOTALORDER"))
            or (et in COMPLEX and ct != "FLOAT")
            or (et is _P.PRED and ct != "UNSIGNED")  # XLA's verifier rejects SIGNED pred compares
            or (et in INTS and ct != ("SIGNED" if et in SIGNED_INTS else "UNSIGNED"))  # and the other sign
        ):
            dtype_error("Compare", f"compare_type {ct} does not apply to element type {et.name.lower()}")
    if et in COMPLEX and direction.name not in ("EQ", "NE"):
        # XLA:CPU orders complex lexicographically at run time, but its constant folder aborts
        # the process on such a compare; like JAX, only EQ/NE are offered.
        dtype_error(
            "Compare", f"direction {direction.name} is not defined for complex {operand}; only EQ and NE are "
            "(compare Real/Imag parts instead)"
        )
    return ct, array_shape(_P.PRED, operand.dimensions())


COMPARE = define(
    "stablehlo.compare", "compare", hlo_attrs=_compare_hlo, rule=compare_result,
    attrs={"comparison_direction": AttrKind.COMPARISON_DIRECTION, "compare_type": AttrKind.COMPARISON_TYPE},
)


def Compare(
    lhs: XlaOp | Scalar,
    rhs: XlaOp | Scalar,
    direction: ComparisonDirection | str | int,
    compare_type: ComparisonType | str | int | None = None,
    broadcast_dimensions: Sequence[int] | None = None,
) -> XlaOp:
    """Element-wise comparison giving pred (XLA ``compare``; ``stablehlo.compare``).

    Parameters
    ----------
    lhs, rhs: arrays of the same element type (broadcast as for binary ops).
    direction: ``xs.ComparisonDirection`` or one of ``"EQ" "NE" "LT" "LE" "GT" "GE"``.
    compare_type: ``xs.ComparisonType`` or ``"FLOAT" "TOTALORDER" "SIGNED" "UNSIGNED"``; default
        FLOAT for floating and complex types (IEEE: NaN compares unequal to everything and
        -0.0 == +0.0), SIGNED/UNSIGNED for integers, UNSIGNED for pred. TOTALORDER orders
        -NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN.

    Returns: XlaOp of element type pred and the broadcast shape.

    Raises
    ------
    ShapeError: unknown direction/compare type, shapes that do not broadcast.
    DTypeError: element types differ, or TOTALORDER/FLOAT on integers, SIGNED/UNSIGNED on floats,
    SIGNED on pred or unsigned integers, UNSIGNED on signed integers (XLA's verifier rejects
    those), or complex operands with a direction other than EQ/NE or a compare type other
    than FLOAT.
    """
    d = enum_arg("Compare", ComparisonDirection, direction)
    parsed_ct = None if compare_type is None else enum_arg("Compare", ComparisonType, compare_type)
    x, y, _ = binary_operands("Compare", lhs, rhs, broadcast_dimensions, _ALL)
    ct, shape = compare_result(x.shape, d, parsed_ct)
    return x.builder.add_op(COMPARE, (x, y), shape, compare_attrs(d.name, ct))


def _comparison(direction: str) -> BinaryFn:
    def op(lhs: XlaOp | Scalar, rhs: XlaOp | Scalar, broadcast_dimensions: Sequence[int] | None = None) -> XlaOp:
        return Compare(lhs, rhs, direction, None, broadcast_dimensions)

    op.__name__ = op.__qualname__ = direction.capitalize()
    op.__doc__ = (
        f"Element-wise ``lhs {direction} rhs`` giving pred (``stablehlo.compare`` {direction}, with the "
        "default comparison type: IEEE FLOAT for floating types, SIGNED/UNSIGNED for integers).\n\n"
        "See :func:`Compare` for shapes, broadcasting and errors."
    )
    return op


# -- generated public functions (in table order; tests check each name) --------------------------
(Abs, Neg, Exp, Exp2, Log2, Expm1, Log, Log1p, Sqrt, Rsqrt, Cbrt, Tanh, Logistic, Sin, Cos, Tan, Floor, Ceil, Round,
 RoundNearestEven, Sign, Not, IsFinite, Real, Imag, Conj, PopulationCount, Clz, Erf, Erfc, ErfInv, Lgamma, Digamma,
 Acos, Asin, Atan, Acosh, Asinh, Atanh, Cosh, Sinh, Square, BesselI1e) = (
    _unary(u) for u in UNARY.values()
)
(Add, Sub, Mul, Div, Rem, Max, Min, Pow, Atan2, Complex, And, Or, Xor, ShiftLeft, ShiftRightArithmetic,
 ShiftRightLogical, NextAfter, _polygamma, _zeta) = (
    _binary(b) for b in BINARY.values()
)


def Polygamma(n: XlaOp | Scalar, x: XlaOp | Scalar, broadcast_dimensions: Sequence[int] | None = None) -> XlaOp:
    """Element-wise polygamma function of order ``n`` at ``x`` (XLA ``polygamma``, expanded;
    ``chlo.polygamma``): the ``n``-th derivative of digamma.

    Parameters
    ----------
    n, x: arrays of the same floating-point element type (``n`` holds non-negative integer
        values); one may be a Python scalar. Shapes broadcast as for :func:`Add`.
    broadcast_dimensions: as for :func:`Add`.

    Returns
    -------
    XlaOp of the broadcast shape (NaN where ``n`` is not a non-negative integer).

    Raises
    ------
    DTypeError, ShapeError: as for :func:`Add` (floating-point types only).
    """
    return _polygamma(n, x, broadcast_dimensions)


def Zeta(x: XlaOp | Scalar, q: XlaOp | Scalar, broadcast_dimensions: Sequence[int] | None = None) -> XlaOp:
    """Element-wise Hurwitz zeta function ``sum_k (k + q) ** -x`` (XLA ``zeta``, expanded;
    ``chlo.zeta``).

    Parameters
    ----------
    x, q: arrays of the same floating-point element type; one may be a Python scalar. Shapes
        broadcast as for :func:`Add`.
    broadcast_dimensions: as for :func:`Add`.

    Returns
    -------
    XlaOp of the broadcast shape.

    Raises
    ------
    DTypeError, ShapeError: as for :func:`Add` (floating-point types only).
    """
    return _zeta(x, q, broadcast_dimensions)

Eq, Ne, Lt, Le, Gt, Ge = (_comparison(d) for d in ("EQ", "NE", "LT", "LE", "GT", "GE"))


def Reciprocal(operand: XlaOp) -> XlaOp:
    """Element-wise ``1 / x`` for floating-point or complex arrays (XLA ``divide``).

    Raises DTypeError for other element types.
    """
    x = _operand("Reciprocal", "operand", operand)
    _check_dtype("Reciprocal", "operand", x.shape, _FC)
    return Div(1, x)


# -- Select, Clamp --------------------------------------------------------------------------


def select_shape(op: str, pred: Shape, on_true: Shape, on_false: Shape) -> Shape:
    """Shape rule of Select: ``on_true``'s shape; DTypeError for a non-pred ``pred`` or branches of
    other element types, ShapeError for branches of other shapes or a ``pred`` neither a scalar
    nor of their shape."""
    if pred.element_type() is not _P.PRED:
        dtype_error(op, f"operand 'pred' must have element type pred, got {pred}")
    if on_true.element_type() is not on_false.element_type():
        dtype_error(op, f"operand 'on_false' has element type {on_false}, expected that of 'on_true' {on_true}")
    if on_true.dimensions() != on_false.dimensions():
        shape_error(op, f"operand 'on_false' has shape {on_false}, expected {on_true} like 'on_true'")
    if pred.rank() != 0 and pred.dimensions() != on_true.dimensions():
        shape_error(op, f"operand 'pred' has shape {pred}, expected pred{list(on_true.dimensions())} or pred[]")
    return on_true


def clamp_shape(op: str, min: Shape, operand: Shape, max: Shape) -> Shape:  # noqa: A002
    """Shape rule of Clamp: ``operand``'s shape; DTypeError for a complex operand or bounds of
    another element type, ShapeError for a bound neither a scalar nor of the operand's shape."""
    et = _check_dtype(op, "operand", operand, _REAL)
    for name, v in (("min", min), ("max", max)):
        if v.element_type() is not et:
            dtype_error(op, f"operand {name!r} has element type {v}, expected {et.name.lower()}")
        if v.rank() != 0 and v.dimensions() != operand.dimensions():
            shape_error(op, f"operand {name!r} has shape {v}, expected a scalar or {operand}")
    return operand


SELECT = define("stablehlo.select", "select", hlo_form=HloForm.FULL_SHAPE_OPERANDS, rule=select_shape)
CLAMP = define("stablehlo.clamp", "clamp", hlo_form=HloForm.FULL_SHAPE_OPERANDS, rule=clamp_shape)


def Select(pred: XlaOp, on_true: XlaOp, on_false: XlaOp) -> XlaOp:
    """Element-wise choice ``pred ? on_true : on_false`` (XLA ``select``; ``stablehlo.select``).

    Parameters
    ----------
    pred: pred array of the operands' shape, or a pred scalar (selects whole operands).
    on_true, on_false: arrays of the same shape and element type.

    Returns: XlaOp of ``on_true``'s shape.

    Raises
    ------
    DTypeError: ``pred`` is not pred, or the branches' element types differ.
    ShapeError: the branches' shapes differ, or ``pred`` has another non-scalar shape.
    """
    p = _operand("Select", "pred", pred)
    t = _operand("Select", "on_true", on_true)
    f = _operand("Select", "on_false", on_false)
    same_builder("Select", [("pred", p), ("on_true", t), ("on_false", f)])
    return t.builder.add_op(SELECT, (p, t, f), select_shape("Select", p.shape, t.shape, f.shape))


def Clamp(min: XlaOp | Scalar, operand: XlaOp, max: XlaOp | Scalar) -> XlaOp:  # noqa: A002 - XLA's parameter names
    """Element-wise ``min(max(operand, min), max)`` (XLA ``clamp``; ``stablehlo.clamp``).

    ``min`` and ``max`` may be scalars or arrays of the operand's shape (or Python scalars); if
    ``min > max`` every element becomes ``max``. A NaN operand stays NaN.

    Raises
    ------
    DTypeError: element types differ. ShapeError: a bound is neither a scalar nor the operand's shape.
    """
    x = _operand("Clamp", "operand", operand)
    lo = constant_like("Clamp", min, x, scalar=True) if _is_scalar(min) else _operand("Clamp", "min", min)
    hi = constant_like("Clamp", max, x, scalar=True) if _is_scalar(max) else _operand("Clamp", "max", max)
    same_builder("Clamp", [("operand", x), ("min", lo), ("max", hi)])
    return x.builder.add_op(CLAMP, (lo, x, hi), clamp_shape("Clamp", lo.shape, x.shape, hi.shape))
