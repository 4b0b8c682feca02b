"""The StableHLO emitter: shared sub-computations, inlined calls, tuples."""

from __future__ import annotations

import numpy as np

import xlasdk as xs
from xlasdk import ops


def _adder() -> xs.XlaComputation:
    r = xs.XlaBuilder("add")
    s = xs.Shape.scalar_shape(np.float32)
    ops.Add(ops.Parameter(r, 0, s), ops.Parameter(r, 1, s))
    return r.build()


def test_one_computation_used_as_two_regions_and_two_inlined_calls() -> None:
    add = _adder()
    b = xs.XlaBuilder("t")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (2, 3)))
    one = ops.Constant(b, np.float32(1))
    cols = ops.Reduce(b, x, one, add, [0])
    rows = ops.Reduce(b, x, one, add, [1])
    c1 = ops.Call(b, add, [one, one])
    c2 = ops.Call(b, add, [c1, c1])
    outs = xs.compile(b.build([cols, rows, c1, c2]))(np.arange(6, dtype=np.float32).reshape(2, 3))
    got = [o.to_numpy() for o in outs]
    v = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(got[0], v.sum(0) + 1)
    np.testing.assert_array_equal(got[1], v.sum(1) + 1)
    assert float(got[2]) == 2.0 and float(got[3]) == 4.0


def test_tuple_and_get_tuple_element_cost_nothing() -> None:
    b = xs.XlaBuilder("t")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.int32, (3,)))
    t = ops.Tuple(b, [x, ops.Neg(x)])
    y = ops.Add(ops.GetTupleElement(t, 0), ops.GetTupleElement(t, 1))
    comp = b.build(y)
    assert "stablehlo.tuple" not in comp._mlir_module_text()
    np.testing.assert_array_equal(xs.compile(comp)(np.array([1, 2, 3], np.int32)).to_numpy(), [0, 0, 0])


def test_side_effects_not_reachable_from_root_are_kept() -> None:
    b = xs.XlaBuilder("t")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (2,)))
    tok = ops.CreateToken(b)
    ops.OutfeedWithToken(x, tok, xs.Shape.array_shape(np.float32, (2,)))
    root = ops.Neg(x)
    hlo = b.build(root).as_hlo_text()
    assert "outfeed(" in hlo
    assert "negate(" in hlo


def test_list_root_does_not_change_the_default_root() -> None:
    b = xs.XlaBuilder("t")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (2,)))
    y = ops.Neg(x)
    both = b.build([x, y])
    assert both.program_shape().result_shape().is_tuple()
    assert b.build().program_shape().result_shape() == y.shape


def test_nested_tuple_root_and_tuple_parameter_give_a_clear_compile_error() -> None:
    import pytest

    b = xs.XlaBuilder("nested")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (2,)))
    comp = b.build(ops.Tuple(b, [x, ops.Tuple(b, [x, x])]))
    assert "(f32[2], (f32[2], f32[2]))" in str(comp.program_shape())
    with pytest.raises(xs.CompileError, match="nested tuple"):
        xs.compile(comp)
    b2 = xs.XlaBuilder("tuple_param")
    t = ops.Parameter(b2, 0, xs.Shape.tuple_shape([xs.Shape.array_shape(np.float32, (2,))]))
    with pytest.raises(xs.CompileError, match="parameter 0"):
        xs.compile(b2.build(ops.GetTupleElement(t, 0)))
