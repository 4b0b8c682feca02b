"""Tests of xlasdk/types.py: PrimitiveType and the dtype <-> element type conversions."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from xlasdk import types as xtypes

P = xs.PrimitiveType

# (element type, numpy dtype, names that must map to it)
TABLE: list[tuple[xs.PrimitiveType, Any, list[Any]]] = [
    (P.PRED, np.bool_, ["bool", "pred", "PRED", bool]),
    (P.S2, ml_dtypes.int2, ["int2", "s2"]),
    (P.S4, ml_dtypes.int4, ["int4", "s4", "S4"]),
    (P.S8, np.int8, ["int8", "s8", "i1"]),
    (P.S16, np.int16, ["int16", "s16"]),
    (P.S32, np.int32, ["int32", "s32", "i4"]),
    (P.S64, np.int64, ["int64", "s64", int]),
    (P.U2, ml_dtypes.uint2, ["uint2", "u2"]),
    (P.U4, ml_dtypes.uint4, ["uint4", "u4", "U4"]),
    (P.U8, np.uint8, ["uint8", "u8"]),
    (P.U16, np.uint16, ["uint16", "u16"]),
    (P.U32, np.uint32, ["uint32", "u32"]),
    (P.U64, np.uint64, ["uint64", "u64"]),
    (P.F16, np.float16, ["float16", "f16", "half"]),
    (P.BF16, ml_dtypes.bfloat16, ["bfloat16", "bf16", "BF16", xs.bfloat16]),
    (P.F32, np.float32, ["float32", "f32", "F32", "f4", "single"]),
    (P.F64, np.float64, ["float64", "f64", "double", float]),
    (P.C64, np.complex64, ["complex64", "c64"]),
    (P.C128, np.complex128, ["complex128", "c128", complex]),
    (P.F8E5M2, ml_dtypes.float8_e5m2, ["float8_e5m2", "f8e5m2"]),
    (P.F8E4M3FN, ml_dtypes.float8_e4m3fn, ["float8_e4m3fn", "f8e4m3fn", "F8E4M3FN"]),
    (P.F8E4M3B11FNUZ, ml_dtypes.float8_e4m3b11fnuz, ["float8_e4m3b11fnuz", "f8e4m3b11fnuz"]),
    (P.F8E5M2FNUZ, ml_dtypes.float8_e5m2fnuz, ["float8_e5m2fnuz", "f8e5m2fnuz"]),
    (P.F8E4M3FNUZ, ml_dtypes.float8_e4m3fnuz, ["float8_e4m3fnuz", "f8e4m3fnuz"]),
    (P.F8E4M3, ml_dtypes.float8_e4m3, ["float8_e4m3", "f8e4m3"]),
    (P.F8E3M4, ml_dtypes.float8_e3m4, ["float8_e3m4", "f8e3m4"]),
    (P.F4E2M1FN, ml_dtypes.float4_e2m1fn, ["float4_e2m1fn", "f4e2m1fn"]),
    (P.F8E8M0FNU, ml_dtypes.float8_e8m0fnu, ["float8_e8m0fnu", "f8e8m0fnu"]),
]


def test_primitive_type_numbers_match_xla_proto() -> None:
    # xla_data.proto numbers, so protos and the former API interoperate
    expected = {
        "PRIMITIVE_TYPE_INVALID": 0, "PRED": 1, "S8": 2, "S16": 3, "S32": 4, "S64": 5, "U8": 6, "U16": 7,
        "U32": 8, "U64": 9, "F16": 10, "F32": 11, "F64": 12, "TUPLE": 13, "OPAQUE_TYPE": 14, "C64": 15,
        "BF16": 16, "TOKEN": 17, "C128": 18, "F8E5M2": 19, "F8E4M3FN": 20, "S4": 21, "U4": 22,
        "F8E4M3B11FNUZ": 23, "F8E5M2FNUZ": 24, "F8E4M3FNUZ": 25, "S2": 26, "U2": 27, "F8E4M3": 28,
        "F8E3M4": 29, "F4E2M1FN": 32, "F8E8M0FNU": 33,
    }
    assert {m.name: m.value for m in P} == expected


@pytest.mark.parametrize(("etype", "dtype", "names"), TABLE, ids=[t[0].name for t in TABLE])
def test_dtype_etype_round_trip(etype: xs.PrimitiveType, dtype: Any, names: list[Any]) -> None:
    npd = np.dtype(dtype)
    assert xs.dtype_to_etype(npd) is etype  # numpy dtype object
    assert xs.dtype_to_etype(dtype) is etype  # type object (np.float32, ml_dtypes.bfloat16)
    assert xs.dtype_to_etype(npd.name) is etype  # numpy name ("bfloat16", "float8_e4m3fn")
    assert xs.dtype_to_etype(etype) is etype  # a PrimitiveType passes through
    assert xs.dtype_to_etype(np.zeros(2, npd).dtype) is etype
    for name in names:
        assert xs.dtype_to_etype(name) is etype, name
    got = xs.etype_to_dtype(etype)
    assert isinstance(got, np.dtype) and got == npd
    assert xs.etype_to_dtype(int(etype.value)) == npd  # proto number
    assert xs.etype_to_dtype(npd) == npd  # a dtype is accepted too
    assert xtypes.canonical_dtype(names[0]) == npd


def test_every_array_type_is_covered() -> None:
    covered = {t[0] for t in TABLE}
    assert covered == set(xtypes.ARRAY_TYPES)
    non_array = {P.PRIMITIVE_TYPE_INVALID, P.TUPLE, P.TOKEN, P.OPAQUE_TYPE}
    assert covered | non_array == set(P)


def test_categories() -> None:
    assert xtypes.SIGNED_INTS == {P.S2, P.S4, P.S8, P.S16, P.S32, P.S64}
    assert xtypes.UNSIGNED_INTS == {P.U2, P.U4, P.U8, P.U16, P.U32, P.U64}
    assert xtypes.COMPLEX == {P.C64, P.C128}
    assert P.BF16 in xtypes.FLOATS and P.F8E4M3FN in xtypes.FLOATS and P.F4E2M1FN in xtypes.FLOATS
    assert P.PRED not in xtypes.INTS | xtypes.FLOATS | xtypes.COMPLEX
    assert xtypes.INEXACT == xtypes.FLOATS | xtypes.COMPLEX


def test_mlir_and_hlo_spellings() -> None:
    assert xtypes.mlir_element_type(P.U8) == "ui8"
    assert xtypes.mlir_element_type(P.S4) == "i4"
    assert xtypes.mlir_element_type(P.PRED) == "i1"
    assert xtypes.mlir_element_type(P.C128) == "complex<f64>"
    assert xtypes.mlir_element_type(P.F8E4M3FN) == "f8E4M3FN"
    assert xtypes.hlo_element_name(P.PRED) == "pred"
    assert xtypes.hlo_element_name(P.BF16) == "bf16"
    assert xtypes.hlo_element_name(P.TOKEN) == "token"
    for et in xtypes.ARRAY_TYPES:
        assert xtypes.etype_from_mlir(xtypes.mlir_element_type(et)) is et


def test_bfloat16_export() -> None:
    assert xs.bfloat16 is ml_dtypes.bfloat16


BAD_DTYPES: list[Any] = [object, np.object_, str, np.str_, "U5", "S3", "foo", "", "tuple", "token", None, 3.5,
                         "datetime64[s]",
                         np.dtype("V4"), P.TUPLE, P.TOKEN, P.OPAQUE_TYPE, P.PRIMITIVE_TYPE_INVALID]


@pytest.mark.parametrize("bad", BAD_DTYPES, ids=repr)
def test_dtype_to_etype_rejects(bad: Any) -> None:
    with pytest.raises(xs.DTypeError, match="dtype_to_etype: .* is not an XLA element type"):
        xs.dtype_to_etype(bad)


@pytest.mark.parametrize("bad", [P.TUPLE, P.TOKEN, P.OPAQUE_TYPE, P.PRIMITIVE_TYPE_INVALID, 13, 17, 0, 99, -1, "tuple",
                                 object, True], ids=repr)
def test_etype_to_dtype_rejects(bad: Any) -> None:
    with pytest.raises(xs.DTypeError, match="etype_to_dtype: "):
        xs.etype_to_dtype(bad)


def test_dtype_error_is_type_error() -> None:
    with pytest.raises(TypeError):
        xs.dtype_to_etype(object)
    assert issubclass(xs.DTypeError, xs.XlaSdkError)
