"""Ops with no operands: ``Parameter``, ``Constant``, ``ConstantLiteral``, ``Iota``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np

from .._mlir_attrs import DenseElements
from .._optable import AttrKind, HloForm, define
from ..builder import XlaBuilder, XlaOp
from ..errors import DTypeError
from ..shape import Shape
from ..types import DTypeLike, PrimitiveType, canonical_dtype, dtype_to_etype
from ._core import MAX_PARAMETER_NUMBER, LiteralLike, array_shape, dtype_error, int_arg, shape_error, show

__all__ = ["Constant", "ConstantLiteral", "Iota", "Parameter"]


def _check_builder(op: str, builder: Any) -> XlaBuilder:
    if not isinstance(builder, XlaBuilder):
        dtype_error(op, f"first argument must be an XlaBuilder, got {type(builder).__name__}")
    return builder


def Parameter(
    builder: XlaBuilder, parameter_number: int, shape: Shape, name: str = "",
    replicated_at_leaf_buffers: Sequence[bool] | None = None,
) -> XlaOp:
    """Declare input ``parameter_number`` of the computation, of shape ``shape``.

    Parameters
    ----------
    builder: the XlaBuilder.
    parameter_number: 0-based position among the computation's parameters, ``< 2**31``; numbers
        must end up contiguous (0..n-1) when the computation is built.
    shape: an array, tuple or token :class:`~xlasdk.Shape`.
    name: optional name shown in the program shape and in error messages of executables.

    Returns: an XlaOp of ``shape``. Maps to an HLO ``parameter`` / a ``func.func`` argument.

    Raises
    ------
    ShapeError: ``parameter_number`` negative, ``>= 2**31`` or reused. DTypeError: ``shape`` is not a
    Shape, ``parameter_number`` not an int, ``name`` not a str.
    """
    b = _check_builder("Parameter", builder)
    if isinstance(parameter_number, (bool, np.bool_)) or not isinstance(parameter_number, (int, np.integer)):
        dtype_error("Parameter", f"parameter_number must be an int, got {show(parameter_number)}")
    if parameter_number < 0:
        shape_error("Parameter", f"parameter_number must be >= 0, got {parameter_number}")
    if parameter_number > MAX_PARAMETER_NUMBER:
        shape_error(
            "Parameter", f"parameter_number must be < 2**31, got {parameter_number} (the numbers of a computation's "
            "parameters are 0..n-1)"
        )
    if not isinstance(shape, Shape):
        dtype_error("Parameter", f"shape must be an xlasdk Shape, got {type(shape).__name__}")
    if not isinstance(name, str):
        dtype_error("Parameter", f"name must be a str, got {type(name).__name__}")
    return b._add_parameter(int(parameter_number), shape, name)


def _as_array(op: str, value: Any) -> np.ndarray[Any, Any]:
    if isinstance(value, (np.ndarray, np.generic)):  # before the Python types: np.float64 is a float
        return _checked(op, np.asarray(value))
    if isinstance(value, bool):
        return np.asarray(value, dtype=np.bool_)
    if isinstance(value, int):
        if not -(2**31) <= value < 2**31:
            dtype_error(op, f"Python int {value} does not fit s32; pass a numpy scalar such as np.int64({value})")
        return np.asarray(value, dtype=np.int32)
    if isinstance(value, float):
        return np.asarray(value, dtype=np.float32)
    if isinstance(value, complex):
        return np.asarray(value, dtype=np.complex64)
    if isinstance(value, (list, tuple)):
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError, OverflowError, RecursionError):  # ragged, mixed, too large, too deep
            arr = np.empty(0, dtype=object)
        if arr.dtype == object:
            dtype_error(op, f"cannot make a constant of ragged or mixed value {show(value)}")
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        elif arr.dtype == np.int64:
            if arr.size and not (-(2**31) <= int(arr.min()) and int(arr.max()) < 2**31):
                dtype_error(op, "list of Python ints does not fit s32; pass a numpy array of dtype int64")
            arr = arr.astype(np.int32)
        elif arr.dtype == np.complex128:
            arr = arr.astype(np.complex64)
    elif hasattr(value, "__array__"):
        try:
            arr = np.asarray(value)
        except Exception as e:  # whatever the object's __array__ raises
            dtype_error(op, f"cannot make a constant of {type(value).__name__}: __array__ raised {type(e).__name__}")
    else:
        dtype_error(op, f"cannot make a constant of {type(value).__name__}")
    return _checked(op, arr)


def _checked(op: str, arr: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    try:
        dtype_to_etype(arr.dtype)
    except DTypeError:
        dtype_error(op, f"dtype {arr.dtype} has no XLA element type")
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def _iota_hlo(o: XlaOp) -> str:
    return f", iota_dimension={o.attrs['iota_dimension']}"


def _constant(b: XlaBuilder, arr: np.ndarray[Any, Any], shape: Shape) -> XlaOp:
    """The constant node of ``arr`` (a one-element ``arr`` is a splat of ``shape``): a read-only
    copy, so that changing the caller's array later does not change the graph."""
    data = arr.copy()
    data.flags.writeable = False
    return b.add_op(CONSTANT, (), shape, {"value": DenseElements(data, shape)})


def constant_shape(op: str, dtype: np.dtype[Any], dims: tuple[int, ...]) -> Shape:
    """Shape rule of Constant: the array shape of a value of ``dtype`` and ``dims``; DTypeError for
    a dtype with no XLA element type, ShapeError for an array too large."""
    try:
        et = dtype_to_etype(dtype)
    except DTypeError:
        dtype_error(op, f"dtype {dtype} has no XLA element type")
    return array_shape(et, dims, op)


CONSTANT = define(
    "stablehlo.constant", "constant", hlo_form=HloForm.CONSTANT, rule=constant_shape,
    attrs={"value": AttrKind.ELEMENTS},
)


def iota_shape(op: str, shape: Shape, iota_dimension: int) -> Shape:
    """Shape rule of Iota: ``shape``; ShapeError for a non-array shape or an ``iota_dimension``
    out of range, DTypeError for a pred iota."""
    if not shape.is_array():
        shape_error(op, f"shape must be an array shape, got {shape}")
    if not 0 <= iota_dimension < max(shape.rank(), 1) or shape.rank() == 0:
        shape_error(op, f"iota_dimension {iota_dimension} out of range for {shape}")
    if shape.element_type() is PrimitiveType.PRED:
        dtype_error(op, "element type pred is not allowed (use an integer or float type)")
    return shape


IOTA = define("stablehlo.iota", "iota", hlo_attrs=_iota_hlo, rule=iota_shape, attrs={"iota_dimension": AttrKind.INT})


def Constant(builder: XlaBuilder, value: LiteralLike) -> XlaOp:
    """A constant array.

    Parameters
    ----------
    builder: the XlaBuilder.
    value: a numpy array or scalar of any XLA dtype (including ml_dtypes bfloat16, float8_*,
        int4), a Python scalar (``bool`` -> pred, ``int`` -> s32, ``float`` -> f32, ``complex``
        -> c64) or a nested list of numbers (float64/int64 lists narrow to f32/s32 as Python
        scalars do; pass a numpy array to keep 64 bits).

    Returns: an XlaOp of the value's shape. Maps to HLO ``constant`` / ``stablehlo.constant``.

    Raises
    ------
    DTypeError: a value with no XLA element type (strings, objects) or a Python int outside s32.
    """
    b = _check_builder("Constant", builder)
    arr = _as_array("Constant", value)
    return _constant(b, arr, constant_shape("Constant", arr.dtype, tuple(int(d) for d in arr.shape)))


def ConstantLiteral(builder: XlaBuilder, literal: LiteralLike) -> XlaOp:
    """Same as :func:`Constant` (the former API's name for literals); tuples give a Tuple."""
    if isinstance(literal, tuple):
        from .control import Tuple

        return Tuple(builder, [ConstantLiteral(builder, v) for v in literal])
    return Constant(builder, literal)


def constant_like(op: str, value: Any, like: XlaOp, *, scalar: bool = False) -> XlaOp:
    """A splat constant of ``like``'s shape and dtype from a Python/numpy scalar (a rank-0
    constant of ``like``'s element type when ``scalar``).

    Raises DTypeError if ``value`` does not fit the dtype exactly in kind (a float for an
    integer operand, a negative or too-large int for the type, a complex for a real type).
    """
    dt = like.dtype
    kind = dt.kind
    v = value.item() if isinstance(value, np.generic) else value
    ok = not ((isinstance(v, complex) and kind != "c") or (isinstance(v, float) and kind in "iub"))
    if ok and isinstance(v, int) and not isinstance(v, bool):
        if kind in "iu":
            info = ml_dtypes.iinfo(dt)  # type: ignore[no-untyped-call]
            ok = int(info.min) <= v <= int(info.max)
        elif kind == "b":
            ok = v in (0, 1)
    if ok and not isinstance(v, (bool, int, float, complex)):  # np.str_, np.datetime64, np.void...
        ok = False
    arr: np.ndarray[Any, Any] | None = None
    if ok:
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                arr = np.asarray(v).astype(dt)
        except (OverflowError, ValueError, TypeError):  # an int too large for a float type
            arr = None
    if arr is None:
        dtype_error(op, f"scalar {show(value)} cannot be represented as {like.shape.element_type().name.lower()}")
    shape = array_shape(like.shape.element_type(), ()) if scalar else like.shape
    return _constant(like.builder, arr.reshape(()), shape)


def Iota(
    builder: XlaBuilder,
    shape_or_dtype: Shape | DTypeLike | None = None,
    size_or_dimension: int | None = None,
    iota_dimension: int | None = None,
    *,
    shape: Shape | None = None,
    type: DTypeLike | None = None,  # noqa: A002 - the former keyword name
    size: int | None = None,
) -> XlaOp:
    """Values ``0, 1, 2, ...`` along one dimension.

    Two forms, as in the former API: ``Iota(b, dtype, size)`` gives a 1-D array of ``size``
    elements; ``Iota(b, shape, iota_dimension)`` gives an array of ``shape`` counting along
    ``iota_dimension``. The former keywords work too: ``Iota(b, shape=s, iota_dimension=d)``,
    ``Iota(b, type=dtype, size=n)``.

    Returns: XlaOp of the requested shape. Maps to HLO ``iota`` / ``stablehlo.iota``.

    Raises
    ------
    ShapeError: negative size, dimension out of range, or a non-array shape.
    DTypeError: unknown dtype or a PRED iota.
    """
    b = _check_builder("Iota", builder)
    for alias, value in (("shape", shape), ("type", type)):
        if value is not None:
            if shape_or_dtype is not None:
                dtype_error("Iota", f"give the shape or dtype once (shape_or_dtype or {alias}=)")
            shape_or_dtype = value
    if shape_or_dtype is None:
        dtype_error("Iota", "missing argument: a Shape (shape=) or a dtype (type=)")
    if size is not None:
        if size_or_dimension is not None:
            dtype_error("Iota", "give the size once (size_or_dimension or size=)")
        size_or_dimension = size
    if isinstance(shape_or_dtype, Shape):
        shape = shape_or_dtype
        if iota_dimension is not None and size_or_dimension is not None:
            shape_error("Iota", "give the iota dimension once (size_or_dimension or iota_dimension)")
        dim_arg = iota_dimension if iota_dimension is not None else size_or_dimension
        name = "iota_dimension" if iota_dimension is not None or size_or_dimension is None else "size_or_dimension"
        # a non-array shape is refused (by the rule) before the dimension is read
        dim = 0 if dim_arg is None or not shape.is_array() else int_arg("Iota", name, dim_arg)
    else:
        try:
            dt = canonical_dtype(shape_or_dtype)
        except DTypeError:
            dtype_error("Iota", f"{show(shape_or_dtype)} is neither a Shape nor a dtype")
        size = size_or_dimension
        if isinstance(size, (bool, np.bool_)) or not isinstance(size, (int, np.integer)) or size < 0:
            shape_error("Iota", f"size must be an int >= 0, got {show(size)}")
        if iota_dimension is not None and int_arg("Iota", "iota_dimension", iota_dimension) != 0:
            shape_error("Iota", f"iota_dimension must be 0 (or None) for a 1-D iota, got {iota_dimension}")
        shape = array_shape(dtype_to_etype(dt), (int(size),), "Iota")
        dim = 0
    return b.add_op(IOTA, (), iota_shape("Iota", shape, dim), {"iota_dimension": int(dim)})
