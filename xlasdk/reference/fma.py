"""Evaluation rule of :func:`xlasdk.ops.Fma` (``stablehlo.fma``): ``a * b + c`` rounded once.

For floats of up to 32 bits the product is exact in float64 and the sum is rounded once there,
far below the result's ulp. For f64 the product's rounding error (Dekker's TwoProduct, by
splitting) and the sum's (TwoSum) are added back before the last rounding: within an ulp of the
fused result, as the evaluator's other f64 rules are of theirs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._optable import evaluates
from ..builder import XlaOp
from ..ops.fma import FMA
from ._walk import Evaluator, Value, as_output, dtype_of, widened

__all__: list[str] = []

_SPLIT = 134217729.0  # 2**27 + 1: Veltkamp's splitting constant for float64


def _split(x: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    t = _SPLIT * x
    hi = t - (t - x)
    return hi, x - hi


def fma64(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any], c: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``a * b + c`` in float64 with the product's and the sum's rounding errors added back (the
    plain ``a * b + c`` where a term is not finite or the splitting would overflow)."""
    with np.errstate(all="ignore"):
        p = a * b
        ah, al = _split(a)
        bh, bl = _split(b)
        e = ((ah * bh - p) + ah * bl + al * bh) + al * bl  # p + e == a * b exactly
        s = p + c
        bb = s - p
        t = (p - (s - bb)) + (c - bb)  # s + t == p + c exactly
        fused = s + (t + e)
        plain = p + c
        ok = np.isfinite(fused) & (np.abs(a) < 1e300) & (np.abs(b) < 1e300) & np.isfinite(plain)
        out: np.ndarray[Any, Any] = np.where(ok, fused, plain)
        return out


@evaluates(FMA)
def _fma(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    x, y, z = (widened(v) for v in a[:3])
    if dtype_of(o.shape) == np.float64:
        return as_output(fma64(x, y, z), o.shape)
    with np.errstate(all="ignore"):
        return as_output(x * y + z, o.shape)
