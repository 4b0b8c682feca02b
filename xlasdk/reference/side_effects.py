"""Evaluation rules of :mod:`xlasdk.ops.side_effects`: tokens (:data:`TOKEN`), the optimization
barrier; infeed and outfeed are refused (only the device has its queues).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._optable import evaluates, refuse_evaluation
from ..builder import XlaOp
from ..ops.side_effects import AFTER_ALL, CREATE_TOKEN, INFEED, OPTIMIZATION_BARRIER, OUTFEED
from ._walk import Evaluator, Value

__all__ = ["TOKEN"]


@evaluates(OPTIMIZATION_BARRIER)
def _barrier(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    return a[0] if len(a) == 1 else tuple(a)


#: a token's value (``stablehlo.create_token``, ``stablehlo.after_all``): tokens order side
#: effects and carry no data; ops that pass values through (while, if, optimization_barrier) pass it.
TOKEN: np.ndarray[Any, Any] = np.zeros((0,), np.bool_)
TOKEN.flags.writeable = False


@evaluates(CREATE_TOKEN, AFTER_ALL)
def _token(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    return TOKEN


refuse_evaluation(INFEED, "reads the device's infeed queue, which only the device has")
refuse_evaluation(OUTFEED, "writes to the device's outfeed queue, which only the device has")
