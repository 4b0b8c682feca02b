"""Tests of Reduce in xlasdk/ops/reduce.py: single and variadic reductions, reducers, errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import xlasdk as xs
from tests.helpers import raises, run
from xlasdk import ops

S = xs.Shape


def scalar_computation(name: str, dtype: Any, fn: Callable[[xs.XlaOp, xs.XlaOp], xs.XlaOp]) -> xs.XlaComputation:
    sb = xs.XlaBuilder(name)
    a = ops.Parameter(sb, 0, S.scalar_shape(dtype))
    c = ops.Parameter(sb, 1, S.scalar_shape(dtype))
    return sb.build(fn(a, c))


def test_reduce_single_operand_dims() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5
    xi = (np.arange(24, dtype=np.int32) * 7 % 11).reshape(2, 3, 4)
    add = scalar_computation("add", np.float32, ops.Add)
    b = xs.XlaBuilder("reduce")
    X, XI = ops.Parameter(b, 0, xs.shape_from_pyval(x)), ops.Parameter(b, 1, xs.shape_from_pyval(xi))
    zero = ops.Constant(b, np.float32(0))
    outs = [
        ops.Reduce(b, X, zero, add, [0]),  # an XlaComputation reducer
        ops.Reduce(b, X, zero, lambda a, c: a + c, [1]),  # a callable
        ops.Reduce(b, X, zero, ops.Add, (0, 2)),  # several dims
        ops.Reduce(b, X, zero, add, [2, 0]),  # unsorted dims
        ops.Reduce(b, X, zero, add, [0, 1, 2]),  # to a scalar
        ops.Reduce(b, X, zero, add, []),  # nothing reduced
        ops.Reduce(b, X, ops.Constant(b, np.float32(-np.inf)), ops.Max, [1, 2]),
        ops.Reduce(b, XI, ops.Constant(b, np.int32(1)), lambda a, c: ops.Mul(a, c), [2]),
        ops.Reduce(b, XI, ops.Constant(b, np.int32(2**31 - 1)), ops.Min, [0]),
        ops.Reduce(b, ops.Gt(X, 0.0), ops.Constant(b, False), ops.Or, [2]),  # pred "any"
    ]
    wants = [x.sum(0), x.sum(1), x.sum((0, 2)), x.sum((0, 2)), x.sum(), x, x.max((1, 2)),
             np.prod(xi, axis=2, dtype=np.int64).astype(np.int32), xi.min(0), (x > 0).any(2)]
    assert [o.dims for o in outs] == [w.shape for w in wants]
    for k, (o, w) in enumerate(zip(run(b.build(outs), x, xi), wants, strict=True)):
        assert o.dtype == w.dtype, k
        np.testing.assert_allclose(o, w, rtol=1e-6, err_msg=str(k))


def test_reduce_empty_dimension_gives_init() -> None:
    x = np.zeros((0, 3), np.float32)
    b = xs.XlaBuilder("reduce0")
    X = ops.Parameter(b, 0, xs.shape_from_pyval(x))
    (o,) = run(b.build(ops.Reduce(b, X, ops.Constant(b, np.float32(5)), ops.Add, [0])), x)
    np.testing.assert_array_equal(o, [5, 5, 5])


def _argmax_reducer(av: xs.XlaOp, ai: xs.XlaOp, xv: xs.XlaOp, xi: xs.XlaOp) -> tuple[xs.XlaOp, xs.XlaOp]:
    """(value, index) max with the smaller index on ties; parameters in XLA's order (accs, then xs)."""
    take_x = ops.Or(ops.Gt(xv, av), ops.And(ops.Eq(xv, av), ops.Lt(xi, ai)))
    return ops.Select(take_x, xv, av), ops.Select(take_x, xi, ai)


def test_reduce_variadic_argmax() -> None:
    x = np.array([[3, 9, 1, 9], [-2, -5, -1, -7], [4, 4, 4, 4]], np.float32)
    idx = np.broadcast_to(np.arange(4, dtype=np.int32), x.shape).copy()
    # the same reducer as an XlaComputation with a tuple root
    sb = xs.XlaBuilder("argmax")
    ps = [ops.Parameter(sb, k, S.scalar_shape(t)) for k, t in enumerate((np.float32, np.int32, np.float32, np.int32))]
    comp = sb.build(list(_argmax_reducer(*ps)))
    b = xs.XlaBuilder("variadic")
    X, I = ops.Parameter(b, 0, xs.shape_from_pyval(x)), ops.Parameter(b, 1, xs.shape_from_pyval(idx))
    inits = [ops.Constant(b, np.float32(-np.inf)), ops.Constant(b, np.int32(-1))]
    r1 = ops.Reduce(b, [X, I], inits, _argmax_reducer, [1])
    r2 = ops.Reduce(b, (X, I), inits, comp, [1])
    r3 = ops.Reduce(b, [X, I], inits, lambda a, c, d, e: ops.Tuple(a.builder, list(_argmax_reducer(a, c, d, e))), [1])
    assert str(r1.shape) == "(f32[3], s32[3])"
    outs = [ops.GetTupleElement(r, k) for r in (r1, r2, r3) for k in (0, 1)]
    res = run(b.build(outs), x, idx)
    for k in range(3):
        np.testing.assert_array_equal(res[2 * k], x.max(1))
        np.testing.assert_array_equal(res[2 * k + 1], np.argmax(x, 1).astype(np.int32))  # first index on ties


def test_reduce_variadic_mixed_types_over_two_dims() -> None:
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    n = np.ones((3, 4), np.int32)
    b = xs.XlaBuilder("sumcount")
    X, N = ops.Parameter(b, 0, xs.shape_from_pyval(x)), ops.Parameter(b, 1, xs.shape_from_pyval(n))
    r = ops.Reduce(b, [X, N], [ops.Constant(b, np.float64(0)), ops.Constant(b, np.int32(0))],
                   lambda s, c, xv, nv: (s + xv, c + nv), [0, 1])
    total, count = run(b.build(r), x, n)  # a tuple root gives two outputs
    assert total == x.sum() and total.dtype == np.float64
    assert count == 12 and count.dtype == np.int32


def test_reduce_errors() -> None:
    b = xs.XlaBuilder("reduce_err")
    x = ops.Parameter(b, 0, S.array_shape("f32", [2, 3]))
    i = ops.Parameter(b, 1, S.array_shape("s32", [2, 3]))
    z, zi = ops.Constant(b, np.float32(0)), ops.Constant(b, np.int32(0))
    addf = scalar_computation("addf", np.float32, ops.Add)
    addi = scalar_computation("addi", np.int32, ops.Add)
    sb = xs.XlaBuilder("vec")
    v0, v1 = ops.Parameter(sb, 0, S.array_shape("f32", [2])), ops.Parameter(sb, 1, S.array_shape("f32", [2]))
    vec = sb.build(ops.Add(v0, v1))
    R = ops.Reduce
    # reducer signatures
    with raises(xs.ShapeError, "Reduce: computation 'addi' takes (s32[], s32[]) but must take (f32[], f32[])"):
        R(b, x, z, addi, [0])
    with raises(xs.ShapeError, "Reduce: computation 'vec' takes (f32[2], f32[2]) but must take (f32[], f32[])"):
        R(b, x, z, vec, [0])
    with raises(xs.ShapeError, "Reduce: computation <lambda> takes 1 arguments but 2 are passed (f32[], f32[])"):
        R(b, x, z, lambda a: a, [0])
    with raises(xs.ShapeError, "Reduce: computation <lambda> takes 3 arguments but 2 are passed"):
        R(b, x, z, lambda a, c, d: a, [0])
    with raises(xs.ShapeError, "Reduce: computation returns (s32[]) but must return (f32[]), one scalar per operand"):
        R(b, x, z, lambda a, c: ops.ConvertElementType(a, np.int32), [0])
    with raises(xs.ShapeError, "Reduce: computation returns (f32[], f32[]) but must return (f32[])"):
        R(b, x, z, lambda a, c: (a, c), [0])
    with raises(xs.ShapeError, "Reduce: computation returns (f32[2]) but must return (f32[])"):
        R(b, x, z, lambda a, c: ops.Broadcast(a, [2]), [0])
    with raises(xs.DTypeError, "Reduce: computation must return an XlaOp or a tuple/list of XlaOps, got NoneType"):
        R(b, x, z, lambda a, c: None, [0])
    with raises(xs.ShapeError, "Reduce: computation returned an op of builder 'reduce_err'", "cannot be captured"):
        R(b, x, z, lambda a, c: z, [0])
    with raises(xs.DTypeError, "Reduce: computation must be an XlaComputation or a callable, got int"):
        R(b, x, z, 5, [0])
    with raises(xs.ShapeError, "Reduce: computation returns (f32[]) but must return (f32[], s32[])"):
        R(b, [x, i], [z, zi], lambda a, c, d, e: a, [0])
    with raises(xs.ShapeError, "Reduce: computation returns (s32[], f32[]) but must return (f32[], s32[])"):
        R(b, [x, i], [z, zi], lambda a, c, d, e: (c, a), [0])
    with raises(xs.ShapeError, "Reduce: computation 'addf' takes (f32[], f32[]) but must take (f32[], s32[], f32[], s32[])"):  # noqa: E501
        R(b, [x, i], [z, zi], addf, [0])
    # operands, init values and dimensions
    with raises(xs.ShapeError, "Reduce: dimensions_to_reduce [0, 0] must be distinct dimension numbers < 2"):
        R(b, x, z, addf, [0, 0])
    with raises(xs.ShapeError, "Reduce: dimensions_to_reduce [2] must be distinct"):
        R(b, x, z, addf, [2])
    with raises(xs.ShapeError, "Reduce: dimensions_to_reduce [-1]"):
        R(b, x, z, addf, [-1])
    with raises(xs.ShapeError, "Reduce: operand 'init_values[0]' must be a scalar, got f32[2]"):
        R(b, x, ops.Constant(b, np.zeros(2, np.float32)), addf, [0])
    with raises(xs.DTypeError, "Reduce: operand 'init_values[0]' is s32[], expected f32[] like operands[0]"):
        R(b, x, zi, addf, [0])
    with raises(xs.ShapeError, "Reduce: 2 operands but 1 init_values"):
        R(b, [x, i], [z], addf, [0])
    with raises(xs.ShapeError, "Reduce: operand 'operands[1]' has shape s32[3,2], expected dimensions [2, 3] like operands[0]"):  # noqa: E501
        R(b, [x, ops.Transpose(i, [1, 0])], [z, zi], lambda a, c, d, e: (a, c), [0])
    with raises(xs.ShapeError, "Reduce: operands must be an XlaOp or a non-empty list of XlaOps"):
        R(b, [], [], addf, [0])
    with raises(xs.DTypeError, "Reduce: first argument must be an XlaBuilder, got XlaOp"):
        R(x, x, z, addf, [0])  # type: ignore[arg-type]
    with raises(xs.ShapeError, "Reduce: operand 'init_values[0]' belongs to builder 'o', but the op is built in 'reduce_err'"):  # noqa: E501
        R(b, x, ops.Constant(xs.XlaBuilder("o"), np.float32(0)), addf, [0])
    with raises(xs.DTypeError, "Reduce: operand 'operands[1]' must be an XlaOp, got str"):
        R(b, [x, "y"], [z, z], addf, [0])


# -- pure shape rules (no builder) ----------------------------------------------------------------

def test_reduce_and_map_shape_rules() -> None:
    from xlasdk.ops.reduce import map_shape, reduce_shape

    f32, s32 = xs.Shape.array_shape(np.float32, (2, 3, 4)), xs.Shape.array_shape(np.int32, (2, 3, 4))
    sf, si = xs.Shape.array_shape(np.float32, ()), xs.Shape.array_shape(np.int32, ())
    assert reduce_shape("Reduce", [f32], [sf], (1,)) == xs.Shape.array_shape(np.float32, (2, 4))
    assert reduce_shape("Reduce", [f32], [sf], ()) == f32
    both = reduce_shape("Reduce", [f32, s32], [sf, si], (0, 2))
    assert both == xs.Shape.tuple_shape([xs.Shape.array_shape(np.float32, (3,)), xs.Shape.array_shape(np.int32, (3,))])
    with raises(xs.ShapeError, "Reduce: dimensions_to_reduce [1, 1] must be distinct dimension numbers < 3"):
        reduce_shape("Reduce", [f32], [sf], (1, 1))
    with raises(xs.ShapeError, "Reduce: 2 operands but 1 init_values"):
        reduce_shape("Reduce", [f32, s32], [sf], (0,))
    with raises(xs.DTypeError, "Reduce: operand 'init_values[0]' is s32[], expected f32[] like operands[0]"):
        reduce_shape("Reduce", [f32], [si], (0,))
    with raises(xs.ShapeError, "Reduce: operand 'init_values[0]' must be a scalar, got f32[2,3,4]"):
        reduce_shape("Reduce", [f32], [f32], (0,))
    assert map_shape("Map", [f32, s32], (0, 1, 2)) == (2, 3, 4)
    with raises(xs.ShapeError, "Map: dimensions [0, 1] must be all dimensions in order, [0, 1, 2]"):
        map_shape("Map", [f32], (0, 1))
    with raises(xs.ShapeError, "Map: operand 'operands[1]' has shape f32[2], expected dimensions [2, 3, 4]"):
        map_shape("Map", [f32, xs.Shape.array_shape(np.float32, (2,))], (0, 1, 2))
    with raises(xs.DTypeError, "Map: operand 'operands[1]' is f64[2,3,4] but 'operands[0]' is f32[2,3,4]"):
        map_shape("Map", [f32, xs.Shape.array_shape(np.float64, (2, 3, 4))], (0, 1, 2))
