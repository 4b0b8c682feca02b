"""``xlasdk reduce`` inside regions: the instructions of a ``while`` body shrink too, the module
stays one XLA loads and runs, and what the loop's condition reads (its counter) is left alone (the
loop still ends). Oracle: the script condition (grep), XLA loading and running the result."""

from __future__ import annotations

import numpy as np

import xlasdk as xs
from xlasdk import ops


def _body(i: xs.XlaOp, x: xs.XlaOp) -> xs.XlaOp:
    two = ops.Broadcast(ops.Constant(i.builder, np.float32(2)), [8])
    y = ops.Sub(ops.Add(ops.Sin(ops.Mul(x, two)), ops.Cos(x)), ops.Exp(x))
    return ops.Tuple(i.builder, [ops.Add(i, ops.Constant(i.builder, np.int32(1))), y])


def _cond(i: xs.XlaOp, x: xs.XlaOp) -> xs.XlaOp:
    return ops.Lt(i, ops.Constant(i.builder, np.int32(5)))


def test_reduce_shrinks_a_while_body_and_keeps_the_loop_finite() -> None:
    b = xs.XlaBuilder("loop")
    p = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (8,)), "x")
    w = ops.While(_cond, _body, ops.Tuple(b, [ops.Constant(b, np.int32(0)), p]))
    comp = b.build(ops.Mul(ops.GetTupleElement(w, 1), p))
    text = comp.as_hlo_text()
    assert all(f" {op}(" in text for op in ("sine", "cosine", "exponential", "subtract"))
    res = xs.reduce(comp, script="grep -q ' sine('")
    out = res.hlo_text
    assert " sine(" in out and " while(" in out, out  # the loop stays: the sine is only in its body
    for gone in ("cosine", "exponential", "subtract"):  # in the body only: the region pass removed them
        assert f" {gone}(" not in out, out
    assert any(s.strategy.startswith("region instruction") for s in res.history), res.history
    # the result loads and runs, and its loop ends (the counter the condition reads was kept)
    final = xs.XlaComputation.from_hlo_text(out)
    args = [np.ones(a.dimensions(), np.float32) for a in final.program_shape().parameter_shapes()]
    xs.compile(final)(*args)
