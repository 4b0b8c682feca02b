"""A ``while`` whose trip count a float comparison decides, judged op by op (``compare``'s step on
the device's own operands): rounding may make a correct device run one iteration more or fewer than
the reference, so its integer counter differs by one while every value agrees. That is no
divergence where the comparison that decided the last iteration may come out the other way within
its operands' bounds; a loop that counts wrong or computes a wrong value still is one, named.

The rounding is planted in the reference: its ``exp`` 2 ulps high (within XLA:CPU's exp bound), so
``exp(x) > 1`` at ``x = 0`` is true in the reference and false on the device (the oracle: the loop
counts ``x = 1, 0.75, 0.5, 0.25, 0`` down, 4 iterations on the device, 5 in the reference).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
import xlasdk.reference  # noqa: F401  - binds the evaluation rules to the rows
from xlasdk import _optable, ops
from xlasdk._optable import OpDef
from xlasdk.ops.elementwise import BINARY, UNARY

F32 = np.float32


def _loop() -> xs.XlaComputation:
    """``i, x = 0, x0; while exp(x) > 1: i, x = i + 1, x - 0.25``; outputs (i, x)."""
    b = xs.XlaBuilder("float_decided_loop")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(F32, ()), "x")
    carry = ops.Tuple(b, [ops.Constant(b, np.int32(0)), x])
    loop = ops.While(lambda i, v: ops.Gt(ops.Exp(v), F32(1.0)),
                     lambda i, v: [ops.Add(i, np.int32(1)), ops.Sub(v, F32(0.25))], carry)
    return b.build(ops.Tuple(b, [ops.GetTupleElement(loop, 0), ops.GetTupleElement(loop, 1)]))


def _plant(monkeypatch: pytest.MonkeyPatch, row: OpDef, wrong: Callable[[Any], Any]) -> None:
    right = _optable._EVALUATE[row]
    monkeypatch.setitem(_optable._EVALUATE, row, lambda o, a, ev: np.asarray(wrong(right(o, a, ev))))


def _exp_two_ulps_high(monkeypatch: pytest.MonkeyPatch) -> None:
    _plant(monkeypatch, UNARY["Exp"].opdef, lambda v: (np.asarray(v, np.float64) * (1 + 2.0 ** -22)).astype(v.dtype))


def _judged(comp: xs.XlaComputation) -> Any:
    report = xs.compare(comp, [np.array(1.0, F32)], device="cpu:0", bisect="ops")
    got = [np.asarray(o.got) for o in report.outputs]
    assert int(got[0]) == 4 and float(got[1]) == 0.0  # the device: four iterations (the oracle above)
    assert report.judged_op_by_op is not None
    return report.judged_op_by_op


def test_one_iteration_more_where_the_deciding_comparison_may_flip_is_no_divergence(
        monkeypatch: pytest.MonkeyPatch) -> None:
    comp = _loop()
    _exp_two_ulps_high(monkeypatch)
    lines: list[str] = []
    report = xs.compare(comp, [np.array(1.0, F32)], device="cpu:0", bisect="ops", progress=lines.append)
    assert [int(np.asarray(o.want)) if k == 0 else float(np.asarray(o.want)) for k, o in enumerate(report.outputs)] \
        == [5, -0.25]  # the reference ran one iteration more
    per_op = report.judged_op_by_op
    assert per_op is not None and per_op.verdict == "MATCH", str(report)
    assert any("stablehlo.while matches the reference stopped after 4 iterations" in ln for ln in lines)


def test_a_loop_that_counts_wrong_is_still_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """The counter's add planted one too high in the reference (i += 2): no trip count explains it."""
    comp = _loop()
    _exp_two_ulps_high(monkeypatch)
    _plant(monkeypatch, BINARY["Add"].opdef, lambda v: v + 1 if np.asarray(v).dtype.kind == "i" else v)
    per_op = _judged(comp)
    assert per_op.verdict == "DIVERGENCE" and per_op.opcode == "stablehlo.while", per_op.lines()


def test_a_wrong_float_op_in_the_body_is_still_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """The body's subtract planted 1e-3 relative off in the reference: no trip count explains it."""
    comp = _loop()
    _exp_two_ulps_high(monkeypatch)
    _plant(monkeypatch, BINARY["Sub"].opdef,
           lambda v: (np.asarray(v, np.float64) * (1 + 1e-3)).astype(v.dtype) if np.asarray(v).dtype.kind == "f"
           else v)
    per_op = _judged(comp)
    assert per_op.verdict == "DIVERGENCE" and per_op.opcode == "stablehlo.while", per_op.lines()


def test_without_the_planted_rounding_the_loop_matches() -> None:
    report = xs.compare(_loop(), [np.array(1.0, F32)], device="cpu:0")
    assert report.ok, str(report)
