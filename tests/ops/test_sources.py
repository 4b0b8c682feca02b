"""Tests of xlasdk/ops/sources.py: Parameter, Constant, ConstantLiteral, Iota."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import raises, run, skip_where_device_defines_otherwise
from xlasdk import ops
from xlasdk import types as xtypes

P = xs.PrimitiveType


def bits(a: np.ndarray[Any, Any]) -> bytes:
    return np.ascontiguousarray(a).tobytes()


# ---------------------------------------------------------------------------------- Constant


def _sample(et: xs.PrimitiveType) -> np.ndarray[Any, Any]:
    """Every value (narrow types) or the extremes and specials of ``et``, as a numpy array."""
    dt = xs.etype_to_dtype(et)
    if et is P.PRED:
        return np.array([True, False, True])
    if et in xtypes.INTS:
        info = ml_dtypes.iinfo(dt)  # type: ignore[no-untyped-call]
        if dt.itemsize == 1 and int(info.max) - int(info.min) < 256:
            return np.arange(int(info.min), int(info.max) + 1).astype(dt)
        return np.array([int(info.min), -1 if info.min else 0, 0, 1, int(info.max)], dtype=dt)
    if et in xtypes.COMPLEX:
        return np.array([1 + 2j, -0.0 - 1j, np.inf + 0j, np.nan * 1j], dt)
    if dt.itemsize == 1:  # fp8 and fp4: every bit pattern
        n = 1 << ml_dtypes.finfo(dt).bits  # type: ignore[no-untyped-call]
        return np.arange(n, dtype=np.uint8).view(dt)
    fi = ml_dtypes.finfo(dt)  # type: ignore[no-untyped-call]
    return np.array([0.0, -0.0, 1.5, float(fi.max), -float(fi.max), float(fi.tiny), np.inf, -np.inf, np.nan]).astype(dt)


ARRAY_TYPES = sorted(xtypes.ARRAY_TYPES)


def test_constant_every_dtype_round_trips_bits() -> None:
    b = xs.XlaBuilder("consts")
    samples = [_sample(et) for et in ARRAY_TYPES]
    cs = [ops.Constant(b, s) for s in samples]
    for c, s, et in zip(cs, samples, ARRAY_TYPES, strict=True):
        assert c.shape == xs.Shape.array_shape(et, s.shape) and c.dtype == s.dtype
    outs = run(b.build(cs))
    assert len(outs) == len(samples)
    for out, s, et in zip(outs, samples, ARRAY_TYPES, strict=True):
        assert out.dtype == s.dtype, et
        assert out.shape == s.shape, et
        assert bits(out) == bits(s), et


@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        (True, np.bool_),
        (False, np.bool_),
        (7, np.int32),
        (-(2**31), np.int32),
        (2**31 - 1, np.int32),
        (1.5, np.float32),
        (-0.0, np.float32),
        (1 - 2j, np.complex64),
        (np.float64(0.1), np.float64),  # a numpy scalar keeps its dtype
        (np.int64(2**40), np.int64),
        (np.uint64(2**64 - 1), np.uint64),
        (np.complex128(1j), np.complex128),
        (np.bool_(True), np.bool_),
        (ml_dtypes.bfloat16(3.5), ml_dtypes.bfloat16),
        (ml_dtypes.int4(-8), ml_dtypes.int4),
        (ml_dtypes.uint4(15), ml_dtypes.uint4),
        (ml_dtypes.float8_e4m3fn(-448), ml_dtypes.float8_e4m3fn),
        (np.array(5, np.int16), np.int16),
    ],
)
def test_constant_scalars(value: Any, dtype: Any) -> None:
    if np.dtype(dtype) == np.float64:
        skip_where_device_defines_otherwise("tpu-f64-emulated")
    b = xs.XlaBuilder("scalar")
    c = ops.Constant(b, value)
    assert c.shape == xs.Shape.scalar_shape(dtype) and c.dims == () and c.ndim == 0
    (out,) = run(b.build(c))
    expected = np.asarray(value, dtype=dtype)
    assert out.dtype == expected.dtype and out.shape == ()
    assert bits(out) == bits(expected)


def test_constant_lists_and_layouts() -> None:
    b = xs.XlaBuilder("lists")
    f = ops.Constant(b, [[1.0, 2.0], [3.0, 4.5]])  # float lists narrow to f32 like Python floats
    i = ops.Constant(b, [1, -2, 3])  # int lists to s32
    z = ops.Constant(b, [1j, 2])
    bo = ops.Constant(b, [True, False])
    wide = ops.Constant(b, np.array([2**40, -1], np.int64))
    t = ops.Constant(b, (1, 2))  # a tuple of numbers is an array
    nc = np.arange(12, dtype=np.float64).reshape(3, 4)[:, ::2]  # not C-contiguous
    n = ops.Constant(b, nc)
    fortran = np.asfortranarray(np.arange(6, dtype=np.int8).reshape(2, 3))
    fo = ops.Constant(b, fortran)
    assert [str(x.shape) for x in (f, i, z, bo, wide, t, n, fo)] == [
        "f32[2,2]", "s32[3]", "c64[2]", "pred[2]", "s64[2]", "s32[2]", "f64[3,2]", "s8[2,3]"]
    outs = run(b.build([f, i, z, bo, wide, t, n, fo]))
    np.testing.assert_array_equal(outs[0], np.array([[1, 2], [3, 4.5]], np.float32))
    np.testing.assert_array_equal(outs[1], [1, -2, 3])
    np.testing.assert_array_equal(outs[2], np.array([1j, 2], np.complex64))
    np.testing.assert_array_equal(outs[3], [True, False])
    np.testing.assert_array_equal(outs[4], [2**40, -1])
    np.testing.assert_array_equal(outs[5], [1, 2])
    np.testing.assert_array_equal(outs[6], nc)
    np.testing.assert_array_equal(outs[7], fortran)
    assert outs[4].dtype == np.int64 and outs[6].dtype == np.float64


@pytest.mark.parametrize("et", [P.F32, P.S8, P.PRED, P.BF16, P.S4, P.C128, P.F8E5M2], ids=lambda e: e.name)
@pytest.mark.parametrize("dims", [(0,), (2, 0), (0, 3, 1)], ids=str)
def test_constant_empty(et: xs.PrimitiveType, dims: tuple[int, ...]) -> None:
    b = xs.XlaBuilder("empty")
    arr = np.zeros(dims, xs.etype_to_dtype(et))
    c = ops.Constant(b, arr)
    assert c.shape == xs.Shape.array_shape(et, dims)
    (out,) = run(b.build(c))
    assert out.shape == dims and out.dtype == arr.dtype


def test_constant_splat_and_one_element() -> None:
    b = xs.XlaBuilder("one")
    one = ops.Constant(b, np.array([[7]], np.int32))
    big = ops.Constant(b, np.full((3, 2), 2.5, np.float32))
    outs = run(b.build([one, big]))
    np.testing.assert_array_equal(outs[0], [[7]])
    np.testing.assert_array_equal(outs[1], np.full((3, 2), 2.5, np.float32))


def test_constant_literal() -> None:
    b = xs.XlaBuilder("lit")
    t = ops.ConstantLiteral(b, (np.float32(1.5), (np.arange(3, dtype=np.int64),)))
    assert str(t.shape) == "(f32[], (s64[3]))"
    single = ops.ConstantLiteral(b, np.int8(-3))
    assert str(single.shape) == "s8[]"
    outs = run(b.build([single, ops.GetTupleElement(t, 0)]))
    assert outs[0] == -3 and outs[0].dtype == np.int8
    assert outs[1] == np.float32(1.5)


def test_constant_errors() -> None:
    b = xs.XlaBuilder("errs")
    with raises(xs.DTypeError, "Constant", "cannot make a constant of str"):
        ops.Constant(b, "text")
    with raises(xs.DTypeError, "Constant", "cannot make a constant of object"):
        ops.Constant(b, object())
    with raises(xs.DTypeError, "Constant", "NoneType"):
        ops.Constant(b, None)
    with raises(xs.DTypeError, "Constant", "ragged or mixed"):
        ops.Constant(b, [[1], [2, 3]])
    with raises(xs.DTypeError, "Constant", "has no XLA element type"):
        ops.Constant(b, [1, "a"])
    with raises(xs.DTypeError, "Constant", "dtype <U1 has no XLA element type"):
        ops.Constant(b, np.array(["a"]))
    with raises(xs.DTypeError, "Constant", "dtype object"):
        ops.Constant(b, np.array([1, None]))
    with raises(xs.DTypeError, "Constant", "datetime64"):
        ops.Constant(b, np.datetime64("2020-01-01"))
    with raises(xs.DTypeError, "Constant", "Python int 2147483648 does not fit s32"):
        ops.Constant(b, 2**31)
    with raises(xs.DTypeError, "Constant", "does not fit s32"):
        ops.Constant(b, -(2**31) - 1)
    with raises(xs.DTypeError, "Constant", "does not fit s32"):
        ops.Constant(b, [1, 2**40])
    with raises(xs.DTypeError, "Constant", "first argument must be an XlaBuilder, got str"):
        ops.Constant("b", 1)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------- Iota


IOTA_TYPES = [np.int32, np.uint8, np.int64, np.float32, np.float64, np.float16, np.int8, np.uint64]


@pytest.mark.parametrize("dtype", IOTA_TYPES)
def test_iota_vector_form(dtype: Any) -> None:
    b = xs.XlaBuilder("iota")
    x = ops.Iota(b, dtype, 7)
    assert x.shape == xs.Shape.array_shape(dtype, [7])
    (out,) = run(b.build(x))
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, np.arange(7).astype(dtype))


def test_iota_shape_form_every_dimension() -> None:
    b = xs.XlaBuilder("iota2")
    s = xs.Shape.array_shape(np.int32, [2, 3, 4])
    xs_ = [ops.Iota(b, s, d) for d in range(3)]
    kw = ops.Iota(b, s, iota_dimension=1)
    assert all(x.shape == s for x in xs_)
    outs = run(b.build([*xs_, kw]))
    for d in range(3):
        counts = np.arange(s.dimensions()[d]).reshape([-1 if i == d else 1 for i in range(3)])
        expected = np.broadcast_to(counts, (2, 3, 4))
        np.testing.assert_array_equal(outs[d], expected)
    np.testing.assert_array_equal(outs[3], outs[1])


def test_iota_empty_and_names() -> None:
    b = xs.XlaBuilder("iota3")
    e = ops.Iota(b, "s32", 0)
    n = ops.Iota(b, "float32", 3)
    u4 = ops.Iota(b, ml_dtypes.uint4, 16)
    outs = run(b.build([e, n, u4]))
    assert outs[0].shape == (0,)
    np.testing.assert_array_equal(outs[1], np.arange(3, dtype=np.float32))
    assert outs[2].dtype == ml_dtypes.uint4
    np.testing.assert_array_equal(outs[2].astype(np.int32), np.arange(16))


def test_iota_bf16_rounds_to_nearest_even() -> None:
    # (case C-10) integers above 256 are not all representable in bf16: RNE ties go to even.
    b = xs.XlaBuilder("iota_bf16")
    v = ops.Iota(b, ml_dtypes.bfloat16, 300)
    s = ops.Iota(b, xs.Shape.array_shape(P.BF16, [300]), 0)
    o1, o2 = run(b.build([v, s]))
    for out in (o1, o2):
        assert out.dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(out[255:261].astype(np.float32), [255, 256, 256, 258, 260, 260])
        assert float(out[299]) == 300.0
        want = np.arange(300).astype(ml_dtypes.bfloat16).astype(np.float32)  # ml_dtypes rounds to nearest even
        np.testing.assert_array_equal(out.astype(np.float32), want)


def test_iota_errors() -> None:
    b = xs.XlaBuilder("iota_err")
    s23 = xs.Shape.array_shape("f32", [2, 3])
    with raises(xs.ShapeError, "Iota", "size must be an int >= 0, got -1"):
        ops.Iota(b, np.float32, -1)
    with raises(xs.ShapeError, "Iota", "size", "3.0"):
        ops.Iota(b, np.int32, 3.0)  # type: ignore[arg-type]
    with raises(xs.ShapeError, "Iota", "size", "None"):
        ops.Iota(b, np.int32)
    with raises(xs.DTypeError, "Iota", "element type pred is not allowed"):
        ops.Iota(b, "pred", 3)
    with raises(xs.DTypeError, "Iota", "pred"):
        ops.Iota(b, xs.Shape.array_shape("pred", [3]), 0)
    with raises(xs.DTypeError, "Iota", "is neither a Shape nor a dtype"):
        ops.Iota(b, object, 3)
    with raises(xs.ShapeError, "Iota", "iota_dimension 0 out of range for f32[]"):
        ops.Iota(b, xs.Shape.scalar_shape("f32"), 0)
    with raises(xs.ShapeError, "Iota", "iota_dimension 2 out of range for f32[2,3]"):
        ops.Iota(b, s23, 2)
    with raises(xs.ShapeError, "Iota", "iota_dimension -1"):
        ops.Iota(b, s23, -1)
    with raises(xs.ShapeError, "Iota", "shape must be an array shape"):
        ops.Iota(b, xs.Shape.tuple_shape([s23]), 0)
    with raises(xs.DTypeError, "Iota", "first argument must be an XlaBuilder"):
        ops.Iota(None, np.int32, 3)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------- Parameter


def test_parameters_in_any_order() -> None:
    b = xs.XlaBuilder("params")
    y = ops.Parameter(b, 1, xs.Shape.array_shape(np.int32, [2]), "y")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.int32, [2]), "x")
    assert b.parameters() == [x, y]
    comp = b.build(ops.Sub(x, y))
    assert comp.program_shape().parameter_names() == ("x", "y")
    assert [str(s) for s in comp.program_shape().parameter_shapes()] == ["s32[2]", "s32[2]"]
    (out,) = run(comp, np.array([10, 20], np.int32), np.array([1, 2], np.int32))
    np.testing.assert_array_equal(out, [9, 18])


def test_tuple_parameter() -> None:
    b = xs.XlaBuilder("tparam")
    s = xs.Shape.tuple_shape([xs.Shape.array_shape("f32", [2]), xs.Shape.scalar_shape("f32")])
    p = ops.Parameter(b, 0, s)
    assert p.shape == s
    comp = b.build(ops.Mul(ops.GetTupleElement(p, 0), ops.GetTupleElement(p, 1), broadcast_dimensions=None))
    assert comp.program_shape().parameter_shapes() == (s,)


def test_parameter_errors() -> None:
    b = xs.XlaBuilder("perr")
    f32 = xs.Shape.array_shape("f32", [2])
    ops.Parameter(b, 0, f32)
    with raises(xs.ShapeError, "Parameter", "parameter number 0 is already used by builder 'perr'"):
        ops.Parameter(b, 0, f32)
    with raises(xs.ShapeError, "Parameter", "parameter_number must be >= 0, got -1"):
        ops.Parameter(b, -1, f32)
    with raises(xs.DTypeError, "Parameter", "parameter_number must be an int, got 1.0"):
        ops.Parameter(b, 1.0, f32)  # type: ignore[arg-type]
    with raises(xs.DTypeError, "Parameter", "parameter_number must be an int"):
        ops.Parameter(b, True, f32)
    with raises(xs.DTypeError, "Parameter", "shape must be an xlasdk Shape, got str"):
        ops.Parameter(b, 1, "f32[2]")  # type: ignore[arg-type]
    with raises(xs.DTypeError, "Parameter", "name must be a str, got int"):
        ops.Parameter(b, 1, f32, 5)  # type: ignore[arg-type]
    with raises(xs.DTypeError, "Parameter", "first argument must be an XlaBuilder"):
        ops.Parameter("b", 1, f32)  # type: ignore[arg-type]


def test_parameter_gaps_fail_at_build() -> None:
    b = xs.XlaBuilder("gaps")
    f32 = xs.Shape.array_shape("f32", [2])
    ops.Parameter(b, 0, f32)
    p2 = ops.Parameter(b, 2, f32)  # building ops with a gap is fine; build() checks
    with raises(xs.ShapeError, "build", "parameter numbers must be 0..1 without gaps; missing [1]"):
        b.build(p2)
    only1 = xs.XlaBuilder("gaps1")
    p = ops.Parameter(only1, 1, f32)
    with raises(xs.ShapeError, "build", "missing [0]"):
        only1.build(p)
    with raises(xs.ShapeError, "missing [0]"):
        only1.get_program_shape(p)
    ops.Parameter(only1, 0, f32)
    assert only1.build(p).program_shape().parameter_shapes() == (f32, f32)


# ------------------------------------------------------------------------------ pure shape rules


def test_iota_and_constant_rules_without_builder() -> None:
    from xlasdk.ops.sources import constant_shape, iota_shape

    s = xs.Shape.array_shape(np.dtype(np.int32), (2, 5))
    assert iota_shape("Iota", s, 1) is s
    with raises(xs.ShapeError, "Iota: iota_dimension 2 out of range for s32[2,5]"):
        iota_shape("Iota", s, 2)
    with raises(xs.ShapeError, "Iota: iota_dimension 0 out of range for s32[]"):
        iota_shape("Iota", xs.Shape.array_shape(np.dtype(np.int32), ()), 0)
    with raises(xs.DTypeError, "Iota: element type pred is not allowed"):
        iota_shape("Iota", xs.Shape.array_shape(np.dtype(np.bool_), (3,)), 0)
    with raises(xs.ShapeError, "Iota: shape must be an array shape, got (s32[2,5])"):
        iota_shape("Iota", xs.Shape.tuple_shape([s]), 0)
    assert constant_shape("Constant", np.dtype(ml_dtypes.bfloat16), (3, 0)) == xs.Shape.array_shape(
        np.dtype(ml_dtypes.bfloat16), (3, 0)
    )
    with raises(xs.DTypeError, "Constant: dtype <U1 has no XLA element type"):
        constant_shape("Constant", np.dtype("<U1"), (1,))


def test_iota_bf16_both_forms_round_to_nearest_even_above_256() -> None:
    """Case C-10 (shared/cases/cases.md): a bf16 Iota, in the vector and the shape form, rounds the integers above
    256 to nearest even."""
    b = xs.XlaBuilder("c10iota")
    v = ops.Iota(b, ml_dtypes.bfloat16, 300)
    s = ops.Iota(b, xs.Shape.array_shape(ml_dtypes.bfloat16, [300]), 0)
    for r in run(b.build([v, s])):
        assert r.dtype == ml_dtypes.bfloat16 and r.shape == (300,)
        np.testing.assert_array_equal(r[255:261].astype(np.float32), [255, 256, 256, 258, 260, 260])
        assert float(r[299]) == 300.0
