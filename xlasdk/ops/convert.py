"""Conversions: ``ConvertElementType`` (``stablehlo.convert``), ``BitcastConvertType``
(``stablehlo.bitcast_convert``) and ``ReducePrecision`` (``stablehlo.reduce_precision``), each
beside its shape rule (:func:`convert_shape`, :func:`bitcast_shape`, :func:`reduce_precision_shape`)."""

from __future__ import annotations

from typing import Any

import ml_dtypes

from .._mlir_attrs import I32
from .._optable import AttrKind, define
from ..builder import XlaOp
from ..errors import DTypeError
from ..shape import Shape
from ..types import COMPLEX, FLOATS, DTypeLike, PrimitiveType, dtype_to_etype, etype_to_dtype
from ._core import array_shape, dtype_error, int_arg, shape_error, show
from ._core import operand as _operand

__all__ = ["BitcastConvertType", "ConvertElementType", "ReducePrecision"]

_P = PrimitiveType


def convert_shape(op: str, operand: Shape, new_element_type: PrimitiveType) -> Shape:
    """Shape rule of ``ConvertElementType``: the operand's dimensions with ``new_element_type``;
    DTypeError for complex to a real type, ShapeError for a result too large."""
    src = operand.element_type()
    if src in COMPLEX and new_element_type not in COMPLEX:
        dtype_error(op, f"cannot convert complex {operand} to {new_element_type.name.lower()}; use Real/Imag first")
    if new_element_type is src:
        return operand
    return array_shape(new_element_type, operand.dimensions(), op)


CONVERT = define("stablehlo.convert", "convert", rule=convert_shape)


def ConvertElementType(operand: XlaOp, new_element_type: DTypeLike) -> XlaOp:
    """Convert each element to ``new_element_type`` (XLA ``convert``; ``stablehlo.convert``).

    Float to integer truncates toward zero and, on XLA:CPU, saturates out-of-range values and
    maps NaN to 0 (StableHLO leaves these implementation-defined). Integer to narrower integer
    wraps; anything to pred is ``x != 0``; float to narrower float rounds to nearest even
    (bf16, f16 and the fp8 types, overflow to inf or NaN as the target type defines).

    Parameters
    ----------
    operand: an array.
    new_element_type: numpy/ml_dtypes dtype, name or :class:`~xlasdk.PrimitiveType`.

    Returns: XlaOp of the operand's dimensions with the new element type.

    Raises
    ------
    DTypeError: unknown element type, or complex to a real type (take ``Real`` first).
    """
    op = "ConvertElementType"
    x = _operand(op, "operand", operand)
    try:
        et = dtype_to_etype(new_element_type)
    except Exception:
        dtype_error(op, f"new_element_type {show(new_element_type)} is not an XLA element type")
    shape = convert_shape(op, x.shape, et)
    if shape is x.shape:
        return x
    return x.builder.add_op(CONVERT, (x,), shape)


def bit_width(et: PrimitiveType) -> int:
    """Storage width in bits of one element of ``et`` as XLA counts it (pred: 1, s4: 4, c64: 64)."""
    if et is _P.PRED:
        return 1
    dt = etype_to_dtype(et)
    if et in COMPLEX:
        return int(dt.itemsize) * 8
    info: Any = ml_dtypes.finfo(dt) if et in FLOATS else ml_dtypes.iinfo(dt)  # type: ignore[no-untyped-call]
    return int(info.bits)


def bitcast_shape(op: str, src: PrimitiveType, dims: tuple[int, ...], dst: PrimitiveType) -> tuple[int, ...]:
    """Shape rule of ``BitcastConvertType``.

    Same width: the same dimensions. To a narrower type (ratio ``r = src_bits / dst_bits``): a
    new minor dimension of size ``r``. To a wider type: the operand's last dimension must be
    ``dst_bits / src_bits`` and is removed. Complex types bitcast only to complex types of the
    same width; pred and sub-byte types only to types of their own width.
    """
    if (src in COMPLEX) != (dst in COMPLEX):
        dtype_error(op, f"cannot bitcast between complex and real types ({src.name.lower()} to {dst.name.lower()})")
    sb, db = bit_width(src), bit_width(dst)
    if sb == db:
        return dims
    for et in (src, dst):
        if et is _P.PRED or et in COMPLEX or bit_width(et) < 8:
            dtype_error(
                op, f"cannot bitcast {src.name.lower()} to {dst.name.lower()}: {et.name.lower()} only bitcasts to "
                f"a type of the same width ({bit_width(et)} bits)"
            )
    if sb > db:
        return dims + (sb // db,)
    ratio = db // sb
    if not dims or dims[-1] != ratio:
        shape_error(
            op, f"bitcasting {src.name.lower()}{list(dims)} to the wider {dst.name.lower()} needs a last dimension "
            f"of size {ratio} (= {db} / {sb} bits), got {list(dims)}"
        )
    return dims[:-1]


BITCAST_CONVERT = define("stablehlo.bitcast_convert", "bitcast-convert", rule=bitcast_shape)


def BitcastConvertType(operand: XlaOp, new_element_type: DTypeLike) -> XlaOp:
    """Reinterpret the bits of each element as another element type (XLA ``BitcastConvertType``;
    ``stablehlo.bitcast_convert``), like numpy's ``x.view(dtype)`` on little-endian machines.

    Parameters
    ----------
    operand: an array ``(...)`` of any element type.
    new_element_type: numpy/ml_dtypes dtype, name or :class:`~xlasdk.PrimitiveType`.

    Returns
    -------
    XlaOp: same width: the operand's dimensions; to a narrower type ``(..., r)`` with
    ``r = old_bits / new_bits`` (element ``[..., k]`` holds the ``k``-th least significant
    piece); to a wider type the operand must be ``(..., r)`` and the result is ``(...)``.

    Raises
    ------
    DTypeError: an unknown element type, complex to real or back, or a width change involving
        pred, complex or sub-byte (2/4-bit) types.
    ShapeError: to a wider type, the operand's last dimension is not the width ratio.
    """
    op = "BitcastConvertType"
    x = _operand(op, "operand", operand)
    try:
        et = dtype_to_etype(new_element_type)
    except Exception:
        dtype_error(op, f"new_element_type {show(new_element_type)} is not an XLA element type")
    src = x.shape.element_type()
    dims = bitcast_shape(op, src, x.shape.dimensions(), et)
    if et is src:
        return x
    return x.builder.add_op(BITCAST_CONVERT, (x,), array_shape(et, dims, op))


_MAX_BITS = 2**31 - 1


def _float_operand(op: str, operand: Shape) -> None:
    if operand.element_type() not in FLOATS:
        dtype_error(op, f"operand 'operand' must be floating-point, got {operand}")


def reduce_precision_shape(op: str, operand: Shape, exponent_bits: int, mantissa_bits: int) -> Shape:
    """Shape rule of ``ReducePrecision``: the operand's shape; DTypeError for a non-float operand,
    ShapeError for ``exponent_bits < 1``, ``mantissa_bits < 0`` or either ``>= 2**31``."""
    _float_operand(op, operand)
    e, m = exponent_bits, mantissa_bits
    if e < 1:
        shape_error(op, f"exponent_bits must be >= 1, got {e}")
    if m < 0:
        shape_error(op, f"mantissa_bits must be >= 0, got {m}")
    if e > _MAX_BITS or m > _MAX_BITS:  # i32 attributes
        shape_error(op, f"exponent_bits and mantissa_bits must be < 2**31, got {e} and {m}")
    return operand


REDUCE_PRECISION = define(
    "stablehlo.reduce_precision", "reduce-precision",
    hlo_attrs=lambda o: f", exponent_bits={o.attrs['exponent_bits']}, mantissa_bits={o.attrs['mantissa_bits']}",
    rule=reduce_precision_shape, attrs={"exponent_bits": AttrKind.I32, "mantissa_bits": AttrKind.I32},
)


def ReducePrecision(operand: XlaOp, exponent_bits: int, mantissa_bits: int) -> XlaOp:
    """Round floating-point values to a narrower format and back (XLA ``ReducePrecision``;
    ``stablehlo.reduce_precision``).

    Each value is rounded to the nearest value of a format with ``exponent_bits`` exponent bits
    and ``mantissa_bits`` explicit mantissa bits (ties to even), keeping the operand's element
    type. The mantissa is rounded at the value's own exponent; then, if ``exponent_bits`` is
    narrower than the computation type's (8 for f16, bf16 and f32, which XLA:CPU computes in
    f32; 11 for f64), results beyond the format's largest finite value become +-inf and results
    below its smallest normal become +-0 (denormals of the narrow format are flushed). Otherwise
    denormals are rounded like other values. NaN stays NaN (its bits are implementation-defined).
    ``(8, 7)`` on f32 is exactly bfloat16 rounding; ``(5, 10)`` is float16 rounding for results
    that are normal float16 numbers.

    Parameters
    ----------
    operand: a floating-point array ``(...)``.
    exponent_bits: >= 1. mantissa_bits: >= 0.

    Returns
    -------
    XlaOp of the operand's shape and element type.

    Raises
    ------
    DTypeError: a non-floating-point operand, or non-int bit counts.
    ShapeError: ``exponent_bits < 1`` or ``mantissa_bits < 0``.
    """
    op = "ReducePrecision"
    x = _operand(op, "operand", operand)
    _float_operand(op, x.shape)  # before the bit counts are read, as the rule checks it first
    e = int_arg(op, "exponent_bits", exponent_bits, error=DTypeError, show_type=False)
    m = int_arg(op, "mantissa_bits", mantissa_bits, error=DTypeError, show_type=False)
    shape = reduce_precision_shape(op, x.shape, e, m)
    return x.builder.add_op(REDUCE_PRECISION, (x,), shape, {"exponent_bits": I32(e), "mantissa_bits": I32(m)})
