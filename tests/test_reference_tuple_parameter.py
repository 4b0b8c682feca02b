"""``xs.evaluate`` of a program with a tuple parameter: its argument is a tuple of the elements' arrays
(nested as the parameter is), the value the reference gives checked against numpy and XLA; a wrong
argument is an xlasdk ShapeError naming the element (it was numpy's "inhomogeneous shape")."""

from __future__ import annotations

import numpy as np

import xlasdk as xs
from tests.helpers import raises
from xlasdk import ops

S = xs.Shape.array_shape


def _program() -> xs.XlaComputation:
    b = xs.XlaBuilder("tp")
    inner = xs.Shape.tuple_shape([S(np.float32, (3,)), S(np.int32, ())])
    t = ops.Parameter(b, 0, xs.Shape.tuple_shape([S(np.float32, (2,)), inner]), "t")
    y = ops.Parameter(b, 1, S(np.float32, (2,)), "y")
    a = ops.GetTupleElement(t, 0)
    c = ops.GetTupleElement(ops.GetTupleElement(t, 1), 0)
    return b.build(ops.Tuple(b, [ops.Mul(a, y), ops.Neg(c)]))


def test_a_tuple_parameter_takes_a_tuple_of_its_elements() -> None:
    a, c, y = np.array([1.5, -2], np.float32), np.array([1, 2, 3], np.float32), np.array([2, 3], np.float32)
    got = xs.evaluate(_program(), (a, (c, np.int32(7))), y)
    np.testing.assert_array_equal(got[0], a * y)
    np.testing.assert_array_equal(got[1], -c)


def test_a_wrong_tuple_argument_names_the_element() -> None:
    a, c, y = np.ones(2, np.float32), np.ones(3, np.float32), np.ones(2, np.float32)
    with raises(xs.ShapeError, "argument 0 must be a tuple of 2 values", "got ndarray"):
        xs.evaluate(_program(), a, y)
    with raises(xs.ShapeError, "argument 0[1] must be a tuple of 2 values", "got a tuple of 1"):
        xs.evaluate(_program(), (a, (c,)), y)
    with raises(xs.ShapeError, "argument 0[1][0] has shape (2,)", "f32[3]"):
        xs.evaluate(_program(), (a, (np.ones(2, np.float32), np.int32(1))), y)
