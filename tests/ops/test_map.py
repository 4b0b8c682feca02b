"""Map: a scalar computation applied element-wise, against numpy; and its errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import raises, run
from xlasdk import ops
from xlasdk.errors import DTypeError, ShapeError


def param(b: xs.XlaBuilder, n: int, a: np.ndarray[Any, Any]) -> xs.XlaOp:
    return ops.Parameter(b, n, xs.Shape.array_shape(a.dtype, a.shape))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8, np.int64])
def test_map_binary_callable_matches_numpy(dtype: Any) -> None:
    dt = np.dtype(dtype)
    rng = np.random.default_rng(1)
    a = rng.integers(0, 50, size=(3, 4)).astype(dt)
    c = rng.integers(0, 50, size=(3, 4)).astype(dt)
    b = xs.XlaBuilder("map2")
    x, y = param(b, 0, a), param(b, 1, c)
    m = ops.Map(b, [x, y], lambda p, q: ops.Max(p, q) * 2 + q, [0, 1])
    assert m.shape == x.shape
    got = run(b.build(m), a, c)[0]
    exp = np.maximum(a, c) * dt.type(2) + c  # uint8 wraps like XLA
    assert got.dtype == dt
    np.testing.assert_array_equal(got, exp)


def test_map_mixed_types_result_type_from_computation_and_xla_computation() -> None:
    sub = xs.XlaBuilder("lt")
    p0 = ops.Parameter(sub, 0, xs.Shape.scalar_shape(np.float32))
    p1 = ops.Parameter(sub, 1, xs.Shape.scalar_shape(np.int32))
    lt = sub.build(ops.Lt(p0, ops.ConvertElementType(p1, np.float32)))
    a = np.array([[0.5, 2.0, -1.0], [3.0, 3.0, 7.5]], np.float32)
    c = np.array([[1, 1, -2], [4, 3, 7]], np.int32)
    b = xs.XlaBuilder("map_mixed")
    x, y = param(b, 0, a), param(b, 1, c)
    m1 = ops.Map(b, [x, y], lt, [0, 1])
    assert str(m1.shape) == "pred[2,3]"
    m2 = ops.Map(b, (x, y), lambda p, q: p * ops.ConvertElementType(q, np.float32), (0, 1))
    m3 = ops.Map(b, x, lambda p: ops.Sqrt(ops.Abs(p)), [0, 1])  # one operand, not in a list
    got = run(b.build(ops.Tuple(b, [m1, m2, m3])), a, c)
    np.testing.assert_array_equal(got[0], a < c.astype(np.float32))
    np.testing.assert_array_equal(got[1], a * c.astype(np.float32))
    np.testing.assert_allclose(got[2], np.sqrt(np.abs(a)), rtol=1e-6)


def test_map_three_operands_rank0_and_rank3() -> None:
    a = np.float32(2.5)
    c3 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = xs.XlaBuilder("map_ranks")
    s = param(b, 0, np.asarray(a))
    t = param(b, 1, c3)
    m0 = ops.Map(b, [s, s, s], lambda p, q, r: p * q - r, [])
    m3 = ops.Map(b, [t, t, t], lambda p, q, r: ops.Select(ops.Gt(p, 10.0), q, -r), [0, 1, 2])
    got = run(b.build(ops.Tuple(b, [m0, m3])), np.asarray(a), c3)
    np.testing.assert_array_equal(got[0], a * a - a)
    np.testing.assert_array_equal(got[1], np.where(c3 > 10, c3, -c3))


def test_map_errors() -> None:
    b = xs.XlaBuilder("map_errs")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, [2, 3]))
    y = ops.Parameter(b, 1, xs.Shape.array_shape(np.float32, [3, 2]))
    add = ops.Add
    with raises(ShapeError, "Map", "'operands[1]'", "f32[3,2]"):
        ops.Map(b, [x, y], add, [0, 1])
    with raises(ShapeError, "Map", "dimensions", "[0, 1]"):
        ops.Map(b, [x, x], add, [0])
    with raises(ShapeError, "Map", "dimensions"):
        ops.Map(b, [x, x], add, [1, 0])
    with raises(ShapeError, "Map", "static_operands"):
        ops.Map(b, [x, x], add, [0, 1], [x])
    with raises(ShapeError, "Map", "computation", "takes 1"):
        ops.Map(b, [x, x], lambda p: p, [0, 1])
    with raises(ShapeError, "Map", "computation", "one scalar"):
        ops.Map(b, [x, x], lambda p, q: (p, q), [0, 1])
    with raises(ShapeError, "Map", "operands"):
        ops.Map(b, [], add, [0, 1])
    with raises(DTypeError, "Map", "'operands[1]'", "XlaOp"):
        ops.Map(b, [x, 3.0], add, [0, 1])  # type: ignore[list-item]
    with raises(DTypeError, "Map", "XlaBuilder"):
        ops.Map(x, [x, x], add, [0, 1])  # type: ignore[arg-type]
    with raises(DTypeError, "Map", "computation"):
        ops.Map(b, [x, x], "add", [0, 1])
    other = ops.Parameter(xs.XlaBuilder("other"), 0, xs.Shape.array_shape(np.float32, [2, 3]))
    with raises(ShapeError, "Map", "'operands[1]'", "builder"):
        ops.Map(b, [x, other], add, [0, 1])
