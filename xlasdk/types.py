"""XLA element types and their numpy / ml_dtypes counterparts.

``PrimitiveType`` mirrors XLA's ``xla::PrimitiveType`` (same names, same proto numbers).
``dtype_to_etype`` and ``etype_to_dtype`` convert in both directions; anything that is not a
known element type raises :class:`~xlasdk.errors.DTypeError`.
"""

from __future__ import annotations

import enum
import reprlib
from typing import Any, Final

import ml_dtypes
import numpy as np

from .errors import DTypeError

__all__ = [
    "PrimitiveType",
    "dtype_to_etype",
    "etype_to_dtype",
    "canonical_dtype",
    "byte_width",
    "show",
    "bfloat16",
    "DTypeLike",
]

bfloat16: Final = ml_dtypes.bfloat16


class PrimitiveType(enum.IntEnum):
    """XLA element types (values are the ``xla_data.proto`` numbers)."""

    PRIMITIVE_TYPE_INVALID = 0
    PRED = 1
    S2 = 26
    S4 = 21
    S8 = 2
    S16 = 3
    S32 = 4
    S64 = 5
    U2 = 27
    U4 = 22
    U8 = 6
    U16 = 7
    U32 = 8
    U64 = 9
    F16 = 10
    BF16 = 16
    F32 = 11
    F64 = 12
    C64 = 15
    C128 = 18
    F8E5M2 = 19
    F8E4M3FN = 20
    F8E4M3B11FNUZ = 23
    F8E5M2FNUZ = 24
    F8E4M3FNUZ = 25
    F8E4M3 = 28
    F8E3M4 = 29
    F4E2M1FN = 32
    F8E8M0FNU = 33
    TUPLE = 13
    OPAQUE_TYPE = 14
    TOKEN = 17


#: What xlasdk takes as an element type: a numpy or ml_dtypes dtype (``np.dtype("float32")``,
#: ``x.dtype``), a type object (``np.float32``, ``ml_dtypes.bfloat16``), a name (``"bfloat16"``,
#: ``"float32"``, HLO's ``"f32"``) or a :class:`PrimitiveType`.
DTypeLike = np.dtype[Any] | type[Any] | str | PrimitiveType

_P = PrimitiveType

# element type -> (numpy dtype, MLIR element type, HLO short name)
_TABLE: Final[dict[PrimitiveType, tuple[np.dtype[Any], str, str]]] = {
    _P.PRED: (np.dtype(np.bool_), "i1", "pred"),
    _P.S2: (np.dtype(ml_dtypes.int2), "i2", "s2"),
    _P.S4: (np.dtype(ml_dtypes.int4), "i4", "s4"),
    _P.S8: (np.dtype(np.int8), "i8", "s8"),
    _P.S16: (np.dtype(np.int16), "i16", "s16"),
    _P.S32: (np.dtype(np.int32), "i32", "s32"),
    _P.S64: (np.dtype(np.int64), "i64", "s64"),
    _P.U2: (np.dtype(ml_dtypes.uint2), "ui2", "u2"),
    _P.U4: (np.dtype(ml_dtypes.uint4), "ui4", "u4"),
    _P.U8: (np.dtype(np.uint8), "ui8", "u8"),
    _P.U16: (np.dtype(np.uint16), "ui16", "u16"),
    _P.U32: (np.dtype(np.uint32), "ui32", "u32"),
    _P.U64: (np.dtype(np.uint64), "ui64", "u64"),
    _P.F16: (np.dtype(np.float16), "f16", "f16"),
    _P.BF16: (np.dtype(ml_dtypes.bfloat16), "bf16", "bf16"),
    _P.F32: (np.dtype(np.float32), "f32", "f32"),
    _P.F64: (np.dtype(np.float64), "f64", "f64"),
    _P.C64: (np.dtype(np.complex64), "complex<f32>", "c64"),
    _P.C128: (np.dtype(np.complex128), "complex<f64>", "c128"),
    _P.F8E5M2: (np.dtype(ml_dtypes.float8_e5m2), "f8E5M2", "f8e5m2"),
    _P.F8E4M3FN: (np.dtype(ml_dtypes.float8_e4m3fn), "f8E4M3FN", "f8e4m3fn"),
    _P.F8E4M3B11FNUZ: (np.dtype(ml_dtypes.float8_e4m3b11fnuz), "f8E4M3B11FNUZ", "f8e4m3b11fnuz"),
    _P.F8E5M2FNUZ: (np.dtype(ml_dtypes.float8_e5m2fnuz), "f8E5M2FNUZ", "f8e5m2fnuz"),
    _P.F8E4M3FNUZ: (np.dtype(ml_dtypes.float8_e4m3fnuz), "f8E4M3FNUZ", "f8e4m3fnuz"),
    _P.F8E4M3: (np.dtype(ml_dtypes.float8_e4m3), "f8E4M3", "f8e4m3"),
    _P.F8E3M4: (np.dtype(ml_dtypes.float8_e3m4), "f8E3M4", "f8e3m4"),
    _P.F4E2M1FN: (np.dtype(ml_dtypes.float4_e2m1fn), "f4E2M1FN", "f4e2m1fn"),
    _P.F8E8M0FNU: (np.dtype(ml_dtypes.float8_e8m0fnu), "f8E8M0FNU", "f8e8m0fnu"),
}

_DTYPE_TO_ETYPE: Final[dict[np.dtype[Any], PrimitiveType]] = {v[0]: k for k, v in _TABLE.items()}
_MLIR_TO_ETYPE: Final[dict[str, PrimitiveType]] = {v[1]: k for k, v in _TABLE.items()}
_HLO_TO_ETYPE: Final[dict[str, PrimitiveType]] = {v[2]: k for k, v in _TABLE.items()}

#: Element types by category (used by the shape and dtype rules).
SIGNED_INTS: Final = frozenset({_P.S2, _P.S4, _P.S8, _P.S16, _P.S32, _P.S64})
UNSIGNED_INTS: Final = frozenset({_P.U2, _P.U4, _P.U8, _P.U16, _P.U32, _P.U64})
INTS: Final = SIGNED_INTS | UNSIGNED_INTS
COMPLEX: Final = frozenset({_P.C64, _P.C128})
FLOATS: Final = frozenset(
    {
        _P.F16, _P.BF16, _P.F32, _P.F64, _P.F8E5M2, _P.F8E4M3FN, _P.F8E4M3B11FNUZ,
        _P.F8E5M2FNUZ, _P.F8E4M3FNUZ, _P.F8E4M3, _P.F8E3M4, _P.F4E2M1FN, _P.F8E8M0FNU,
    }
)
INEXACT: Final = FLOATS | COMPLEX
ARRAY_TYPES: Final = frozenset(_TABLE)


_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxstring = 60
_REPR.maxother = 80
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxdict = 8


def show(value: Any) -> str:
    """A short ``repr`` of a user value for error messages: bounded in length and nesting (a
    deeply nested or self-referencing list cannot raise RecursionError), never raising."""
    try:
        return _REPR.repr(value)
    except Exception:  # a user object whose __repr__ raises
        return f"<{type(value).__name__} object>"


def _lookup_dtype(dtype: DTypeLike | int) -> PrimitiveType | None:
    if isinstance(dtype, PrimitiveType):
        return dtype if dtype in _TABLE else None  # TUPLE, TOKEN... are not element types
    if isinstance(dtype, str):
        key = dtype.strip()
        low = key.lower()
        if low in _HLO_TO_ETYPE:
            return _HLO_TO_ETYPE[low]
        if key.upper() in PrimitiveType.__members__ and PrimitiveType[key.upper()] in _TABLE:
            return PrimitiveType[key.upper()]
    if isinstance(dtype, (bool, int, float, complex)) or dtype is None:
        return None
    try:
        npd = np.dtype(dtype)
        return _DTYPE_TO_ETYPE.get(npd)
    except Exception:  # numpy raises TypeError, ValueError, KeyError, RecursionError... for non-dtypes
        return None


def dtype_to_etype(dtype: DTypeLike) -> PrimitiveType:
    """Return the XLA element type of ``dtype``.

    Parameters
    ----------
    dtype:
        A numpy or ml_dtypes dtype, a type object (``np.float32``, ``ml_dtypes.bfloat16``), a
        name (``"bfloat16"``, ``"float32"``, HLO's ``"f32"``) or a :class:`PrimitiveType`.

    Raises
    ------
    DTypeError
        If ``dtype`` names no XLA array element type (e.g. ``object``, ``str``, ``"foo"``).
    """
    et = _lookup_dtype(dtype)
    if et is None:
        raise DTypeError(
            f"dtype_to_etype: {show(dtype)} is not an XLA element type; expected one of "
            + ", ".join(sorted(str(v[0]) for v in _TABLE.values()))
        )
    return et


def etype_to_dtype(etype: PrimitiveType | int | DTypeLike) -> np.dtype[Any]:
    """Return the numpy dtype of XLA element type ``etype``.

    Raises
    ------
    DTypeError
        For ``TUPLE``, ``TOKEN``, ``OPAQUE_TYPE``, ``PRIMITIVE_TYPE_INVALID`` or an unknown value.
    """
    if isinstance(etype, int) and not isinstance(etype, (bool, PrimitiveType)):
        try:
            etype = PrimitiveType(etype)
        except ValueError:
            raise DTypeError(f"etype_to_dtype: {etype} is not an XLA PrimitiveType number") from None
    et = _lookup_dtype(etype)
    if et is None or et not in _TABLE:
        raise DTypeError(f"etype_to_dtype: {show(etype)} has no numpy dtype (it is not an array element type)")
    return _TABLE[et][0]


def canonical_dtype(dtype: DTypeLike) -> np.dtype[Any]:
    """Return the numpy dtype of anything :func:`dtype_to_etype` accepts."""
    return _TABLE[dtype_to_etype(dtype)][0]


def byte_width(etype: PrimitiveType) -> int:
    """Bytes XLA counts per element of an array element type (``ShapeUtil::ByteSizeOfPrimitiveType``):
    1 for pred and the 2/4-bit types, 16 for c128."""
    return _WIDTH[etype]


_WIDTH: Final[dict[PrimitiveType, int]] = {k: max(1, int(v[0].itemsize)) for k, v in _TABLE.items()}


def mlir_element_type(etype: PrimitiveType) -> str:
    """MLIR spelling of an element type (``f32``, ``ui8``, ``complex<f32>``)."""
    return _TABLE[etype][1]


def hlo_element_name(etype: PrimitiveType) -> str:
    """HLO spelling of an element type (``f32``, ``u8``, ``pred``)."""
    if etype == PrimitiveType.TOKEN:
        return "token"
    return _TABLE[etype][2]


def etype_from_mlir(name: str) -> PrimitiveType:
    """Inverse of :func:`mlir_element_type`."""
    return _MLIR_TO_ETYPE[name]
