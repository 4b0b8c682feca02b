"""Tests of xlasdk/shape.py: Shape, Layout, ProgramShape and shape_from_pyval."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs

P = xs.PrimitiveType
S = xs.Shape


def test_array_shape_queries() -> None:
    s = S.array_shape(np.float32, [2, 3])
    assert str(s) == "f32[2,3]" and repr(s) == "Shape(f32[2,3])"
    assert s.dimensions() == (2, 3) and isinstance(s.dimensions()[0], int)
    assert s.rank() == 2 and s.size() == 6
    assert s.element_type() is P.F32
    assert s.numpy_dtype() == np.dtype(np.float32)
    assert s.is_array() and not s.is_tuple() and not s.is_token()
    assert s.layout() is None
    assert s.is_static() and not s.is_dynamic_dimension(0) and not s.is_dynamic_dimension(1)
    assert s.mlir_type() == "tensor<2x3xf32>"


@pytest.mark.parametrize(
    ("dtype", "dims", "text", "mlir"),
    [
        (P.S32, [], "s32[]", "tensor<i32>"),
        ("bfloat16", [4], "bf16[4]", "tensor<4xbf16>"),
        (ml_dtypes.int4, [2, 0], "s4[2,0]", "tensor<2x0xi4>"),
        (np.uint8, (1, 2, 3), "u8[1,2,3]", "tensor<1x2x3xui8>"),
        (np.bool_, [5], "pred[5]", "tensor<5xi1>"),
        (np.complex64, [2], "c64[2]", "tensor<2xcomplex<f32>>"),
        (ml_dtypes.float8_e4m3fn, [3], "f8e4m3fn[3]", "tensor<3xf8E4M3FN>"),
        ("f64", np.array([7]), "f64[7]", "tensor<7xf64>"),
        (P.U4, [np.int64(2)], "u4[2]", "tensor<2xui4>"),
    ],
)
def test_array_shape_text(dtype: Any, dims: Any, text: str, mlir: str) -> None:
    s = S.array_shape(dtype, dims)
    assert str(s) == text
    assert s.mlir_type() == mlir


def test_scalar_shape() -> None:
    s = S.scalar_shape(np.int8)
    assert str(s) == "s8[]" and s.rank() == 0 and s.dimensions() == () and s.size() == 1
    assert s == S.array_shape(P.S8, [])


def test_tuple_and_token_shapes() -> None:
    a, b = S.array_shape("f32", [2]), S.scalar_shape("s32")
    t = S.tuple_shape([a, b, S.tuple_shape([])])
    assert str(t) == "(f32[2], s32[], ())"
    assert t.is_tuple() and not t.is_array() and not t.is_token()
    assert t.tuple_shapes() == (a, b, S.tuple_shape([]))
    assert t.element_type() is P.TUPLE
    assert t.mlir_type() == "tuple<tensor<2xf32>, tensor<i32>, tuple<>>"
    nested = S.tuple_shape([t, a])
    assert str(nested) == "((f32[2], s32[], ()), f32[2])"
    tok = S.token_shape()
    assert str(tok) == "token[]" and tok.is_token() and not tok.is_array() and not tok.is_tuple()
    assert tok.element_type() is P.TOKEN and tok.mlir_type() == "!stablehlo.token"
    assert tok == S.token_shape()
    with pytest.raises(xs.ShapeError, match="tuple_shapes: f32\\[2\\] is not a tuple shape"):
        a.tuple_shapes()
    with pytest.raises(xs.DTypeError):
        t.numpy_dtype()
    with pytest.raises(xs.DTypeError):
        tok.numpy_dtype()


def test_equality_and_hash() -> None:
    a = S.array_shape(np.float32, [2, 3])
    assert a == S.array_shape("f32", (2, 3))
    assert hash(a) == hash(S.array_shape(P.F32, [2, 3]))
    assert a != S.array_shape(np.float32, [3, 2])
    assert a != S.array_shape(np.float64, [2, 3])
    assert a != S.tuple_shape([a])
    assert a != "f32[2,3]"
    t1 = S.tuple_shape([a, S.scalar_shape(np.int32)])
    t2 = S.tuple_shape([S.array_shape("float32", [2, 3]), S.scalar_shape("s32")])
    assert t1 == t2 and hash(t1) == hash(t2)
    assert len({a, S.array_shape("f32", [2, 3]), t1, t2}) == 2
    # dynamic dimensions are part of the value
    d = S.array_shape("f32", [2, 3], dynamic_dimensions=[True, False])
    assert d != a


def test_layout() -> None:
    s = S.array_shape(np.float32, [2, 3], layout=[0, 1])
    assert str(s) == "f32[2,3]{0,1}"
    lay = s.layout()
    assert lay is not None and lay.minor_to_major() == (0, 1)
    assert lay == xs.Layout([0, 1]) and lay != xs.Layout([1, 0]) and hash(lay) == hash(xs.Layout((0, 1)))
    assert S.array_shape(np.float32, [2, 3], layout=xs.Layout([1, 0])).layout() == xs.Layout([1, 0])
    # shapes differ only if both have a layout and the layouts differ
    assert s != S.array_shape(np.float32, [2, 3], layout=[1, 0])
    assert s == S.array_shape(np.float32, [2, 3])
    default = S.array_shape(np.float32, [2, 3, 4]).with_major_to_minor_layout_if_absent()
    assert str(default) == "f32[2,3,4]{2,1,0}"
    assert s.with_major_to_minor_layout_if_absent() is s
    t = S.tuple_shape([S.array_shape("s8", [5]), s]).with_major_to_minor_layout_if_absent()
    assert str(t) == "(s8[5]{0}, f32[2,3]{0,1})"
    assert S.token_shape().with_major_to_minor_layout_if_absent() == S.token_shape()


def test_dynamic_dimensions() -> None:
    s = S.array_shape("f32", [4, 3], dynamic_dimensions=[True, False])
    assert str(s) == "f32[<=4,3]"
    assert s.is_dynamic_dimension(0) and not s.is_dynamic_dimension(1)
    assert not s.is_static()
    assert s.dimensions() == (4, 3)


@pytest.mark.parametrize(
    ("args", "kw", "err", "msg"),
    [
        (("f32", [-1]), {}, xs.ShapeError, "dimension sizes must be >= 0, got -1"),
        (("f32", [2.0]), {}, xs.ShapeError, "dims must be a sequence of ints"),
        (("f32", [True]), {}, xs.ShapeError, "dims must be a sequence of ints"),
        (("f32", 3), {}, xs.ShapeError, "dims must be a sequence of ints"),
        (("f32", [2, 3]), {"layout": [0, 0]}, xs.ShapeError, "layout \\[0, 0\\] is not a permutation of range\\(2\\)"),
        (("f32", [2, 3]), {"layout": [0]}, xs.ShapeError, "is not a permutation"),
        (("f32", [2, 3]), {"dynamic_dimensions": [True]}, xs.ShapeError,
         "dynamic_dimensions has 1 entries, expected 2"),
        ((object, [2]), {}, xs.DTypeError, "is not an XLA element type"),
        ((np.str_, [2]), {}, xs.DTypeError, "is not an XLA element type"),
        (("nope", [2]), {}, xs.DTypeError, "is not an XLA element type"),
        ((P.TUPLE, [2]), {}, xs.DTypeError, "is not an XLA element type"),
        ((P.TOKEN, []), {}, xs.DTypeError, "is not an XLA element type"),
    ],
)
def test_array_shape_errors(args: tuple[Any, ...], kw: dict[str, Any], err: type[Exception], msg: str) -> None:
    with pytest.raises(err, match=msg):
        S.array_shape(*args, **kw)


def test_constructor_errors() -> None:
    with pytest.raises(TypeError, match="use Shape.array_shape"):
        S()
    with pytest.raises(xs.ShapeError, match="element 1 is int, expected Shape"):
        S.tuple_shape([S.scalar_shape("f32"), 3])  # type: ignore[list-item]
    with pytest.raises(xs.DTypeError):
        S.scalar_shape(object)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.5, "f32[]"),
        (3, "s32[]"),
        (-(2**31), "s32[]"),
        (True, "pred[]"),
        (1 + 2j, "c64[]"),
        (np.float64(1.5), "f64[]"),  # numpy scalars keep their dtype (np.float64 is a float subclass)
        (np.complex128(1j), "c128[]"),
        (np.int64(3), "s64[]"),
        (np.bool_(True), "pred[]"),
        (np.uint8(3), "u8[]"),
        (ml_dtypes.bfloat16(1), "bf16[]"),
        (np.zeros((2, 3), np.int8), "s8[2,3]"),
        (np.zeros((0,), ml_dtypes.float8_e5m2), "f8e5m2[0]"),
        (np.zeros((4,), ml_dtypes.int4), "s4[4]"),
        ([1.0, 2.0], "f32[2]"),
        ([[1, 2], [3, 4]], "s32[2,2]"),
        ([True, False], "pred[2]"),
        ((1, 2.0), "(s32[], f32[])"),
        ((np.ones(3, np.float64), (True, (np.int16(1),)), ()), "(f64[3], (pred[], (s16[])), ())"),
    ],
)
def test_shape_from_pyval(value: Any, text: str) -> None:
    assert str(xs.shape_from_pyval(value)) == text


def test_shape_from_pyval_duck_typed() -> None:
    class Duck:
        shape = (2, 5)
        dtype = np.dtype("uint16")

    assert str(xs.shape_from_pyval(Duck())) == "u16[2,5]"


@pytest.mark.parametrize(
    ("value", "msg"),
    [
        ("text", "str value has no XLA shape"),
        (object(), "object value has no XLA shape"),
        (None, "NoneType value has no XLA shape"),
        ([[1], [2, 3]], "ragged"),
        (2**31, "Python int 2147483648 does not fit s32"),
        ([2**40], "does not fit s32"),
        (np.array(["a"]), "is not an XLA element type"),
        ((1, "x"), "str value has no XLA shape"),
    ],
)
def test_shape_from_pyval_errors(value: Any, msg: str) -> None:
    with pytest.raises(xs.DTypeError, match=msg):
        xs.shape_from_pyval(value)


def test_program_shape() -> None:
    a, r = S.array_shape("f32", [2]), S.scalar_shape("s32")
    ps = xs.ProgramShape([a, a], r, ["x", "y"])
    assert ps.parameter_shapes() == (a, a) and ps.result_shape() == r
    assert ps.parameter_names() == ("x", "y")
    assert str(ps) == "(x: f32[2], y: f32[2]) -> s32[]"
    assert ps == xs.ProgramShape([a, a], r) and hash(ps) == hash(xs.ProgramShape([a, a], r))
    assert ps != xs.ProgramShape([a], r)
    assert xs.ProgramShape([a], r).parameter_names() == ("p0",)


# -- hostile arguments (issue 9) -------------------------------------------------------------------


def _cycle() -> list[Any]:
    v: list[Any] = [1]
    v.append(v)
    return v


@pytest.mark.parametrize(
    ("args", "kw", "msg"),
    [
        (("f32", [2**62, 4]), {}, "f32\\[4611686018427387904,4\\] is too large"),
        (("s8", [2**62 + 1]), {}, "is too large"),
        (("c128", [2**60, 0]), {}, "16 byte\\(s\\) per element"),
        (("f32", "23"), {}, "dims must be a sequence of ints"),
        (("f32", _cycle()), {}, "dims must be a sequence of ints, got \\[1, \\[1, \\[1, \\[...\\]\\]\\]\\]"),
        (("f32", [2, 3]), {"layout": ["a", "b"]}, "layout must be a Layout or a minor_to_major sequence of ints"),
        (("f32", [2, 3]), {"layout": 5}, "layout must be a Layout"),
        (("f32", [2, 3]), {"layout": [1.0, 0.0]}, "layout must be a Layout"),
        (("f32", [2, 3]), {"dynamic_dimensions": 5}, "dynamic_dimensions must be a sequence of bools"),
        (("f32", [2, 3]), {"dynamic_dimensions": [None, "x"]}, "dynamic_dimensions must be a sequence of bools"),
    ],
)
def test_array_shape_hostile_arguments(args: tuple[Any, ...], kw: dict[str, Any], msg: str) -> None:
    with pytest.raises(xs.ShapeError, match=msg) as info:
        S.array_shape(*args, **kw)
    assert " — at test_shape.py:" in str(info.value)


def test_array_shape_limit_edges() -> None:
    assert S.array_shape("s8", [2**62]).dimensions() == (2**62,)
    assert S.array_shape("f32", [2**60]).dimensions() == (2**60,)
    assert S.array_shape("f32", [2**60, 0]).size() == 0  # a size of 0 counts as 1 for the limit
    assert S.array_shape("f32", [2, 3], dynamic_dimensions=[1, 0]).is_dynamic_dimension(0)
    assert S.array_shape("f32", [2, 3], layout=np.array([0, 1])).layout() == xs.Layout([0, 1])


def test_dtype_errors_never_raise_other_exceptions() -> None:
    for bad in (_cycle(), {"a": 1}, [[1, 2], [3]], object(), 10**400):
        with pytest.raises(xs.DTypeError, match="is not an XLA element type"):
            xs.dtype_to_etype(bad)
