"""Evaluation rules of :mod:`xlasdk.ops.control`: while, if and case (an index out of range takes the
last branch, as XLA does). The graph's ``call`` row is the evaluator's (:mod:`._evaluator`).
"""

from __future__ import annotations

import numpy as np

from .._optable import evaluates
from ..builder import XlaOp
from ..ops.control import CASE, IF, WHILE
from ._walk import Evaluator, Value, results_of

__all__: list[str] = []


@evaluates(WHILE)
def _while(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    cond, body = o.regions
    state = list(a)
    while bool(np.asarray(ev.region(cond, state)[0])):
        state = ev.region(body, state)
    return results_of(o, state)


@evaluates(IF)
def _if(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    branch = o.regions[0] if bool(np.asarray(a[0])) else o.regions[1]
    outs = ev.region(branch, [])
    return results_of(o, outs)


@evaluates(CASE)
def _case(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    i = int(np.asarray(a[0]))
    n = len(o.regions)
    branch = o.regions[i if 0 <= i < n else n - 1]  # out of range: the last branch, as XLA does
    outs = ev.region(branch, [])
    return results_of(o, outs)
