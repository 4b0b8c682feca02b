"""Four mistakes that gave raw Python errors (issue 17, finding 10) now give xlasdk errors that say
what to write instead; and executables take their parameters by name."""

from __future__ import annotations

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops


def _builder() -> tuple[xs.XlaBuilder, xs.XlaOp]:
    b = xs.XlaBuilder("mistakes")
    return b, ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (3,)), "x")


def test_if_on_an_op_names_the_comparison_op_and_select() -> None:
    _, x = _builder()
    with pytest.raises(xs.DTypeError, match=r"write ops\.Gt\(x, y\) — at .*test_user_mistakes\.py"):
        if x > 0:  # noqa: SIM108 - the mistake itself
            pass
    with pytest.raises(xs.DTypeError, match=r"ops\.Le"):
        _ = x <= 1.0
    with pytest.raises(xs.DTypeError, match=r"no truth value .* ops\.Select"):
        bool(x)
    assert isinstance(xs.DTypeError("m"), TypeError)  # still a TypeError for old except clauses


def test_numpy_functions_on_an_op_name_the_op() -> None:
    _, x = _builder()
    with pytest.raises(xs.DTypeError, match=r"numpy\.exp cannot take an XlaOp .* write ops\.Exp\(\.\.\.\)"):
        np.exp(x)
    with pytest.raises(xs.DTypeError, match=r"numpy\.add\.reduce .* ops\.Reduce"):
        np.sum(x)


def test_numpy_scalars_and_arrays_with_operators_build_the_op() -> None:
    b, x = _builder()
    y = np.float32(2.5) * x - np.float32(1)
    exe = xs.compile(b.build(y))
    v = np.array([1.0, -2.0, 4.0], np.float32)
    np.testing.assert_array_equal(exe(v).to_numpy(), np.float32(2.5) * v - 1)
    with pytest.raises(xs.DTypeError, match="Add: operand 'lhs'"):  # was a silent object array of ops
        _ = np.ones(3, np.float32) + x


def test_op_metadata_with_a_wrong_field_says_op_name() -> None:
    b, x = _builder()
    want = r"unknown field\(s\) name \(did you mean op_name=\?\).* — at .*test_user_mistakes"
    with pytest.raises(xs.DTypeError, match=want):
        with b.op_metadata(name="layer1"):
            pass
    with b.op_metadata(op_name="layer1"):
        y = ops.Neg(x)
    assert 'op_name="layer1"' in b.build(y).as_hlo_text()


def test_executables_take_parameters_by_name() -> None:
    b = xs.XlaBuilder("affine")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (2,)), "x")
    w = ops.Parameter(b, 1, xs.Shape.array_shape(np.float32, (2,)), "w")
    exe = xs.compile(b.build(x * w + 1.0))
    xv, wv = np.array([1.0, 2.0], np.float32), np.array([3.0, -4.0], np.float32)
    want = xv * wv + 1
    np.testing.assert_array_equal(exe(x=xv, w=wv).to_numpy(), want)
    np.testing.assert_array_equal(exe(w=wv, x=xv).to_numpy(), want)
    np.testing.assert_array_equal(exe(xv, w=wv).to_numpy(), want)
    with pytest.raises(xs.ShapeError, match=r"no parameter named 'z'; its parameter names are 'x', 'w'"):
        exe(x=xv, z=wv)
    with pytest.raises(xs.ShapeError, match=r"parameter 0 \('x'\) given twice"):
        exe(xv, x=xv, w=wv)
    with pytest.raises(xs.ShapeError, match=r"no argument for parameter\(s\) 1 \('w'\)"):
        exe(x=xv)
