"""Index outputs judged by the order they give, and bounds too loose to judge by.

- An index output of a ``top_k`` (``mhlo.topk``, ``chlo.top_k``, XLA:CPU's ``TopK``) whose keys
  carry rounding error from the ops before it: where two keys are within their error bounds of each
  other, a correct device may rank them either way. Such an output is judged by whether the
  device's indices are a valid top-k of the reference's keys under those bounds (each selected key
  not below the next one beyond their bounds, no key left out above a selected one beyond theirs),
  not bit for bit (:func:`judge_order`).
- A carried error bound that reaches an output's largest magnitude would accept zeros, or any value
  of the output's size, for it: such elements are counted as not judged (:func:`vacuous`), and the
  report says "cannot judge", never MATCH.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__: list[str] = []

_TOPK = ("mhlo.topk", "chlo.top_k", "stablehlo.top_k")


@dataclass
class OrderKeys:
    """The reference's keys of a top_k index output and the error bound each key carries (float64,
    the keys' shape; the last axis is the one ranked), largest first."""

    keys: np.ndarray[Any, Any]
    bound: np.ndarray[Any, Any]
    #: the largest magnitude of the program's arguments (:func:`with_order`)
    reach: float = 0.0


def order_keys(node: Any, env: dict[int, Any], bounds: dict[int, Any]) -> OrderKeys | None:
    """The keys ``node`` (an output of the graph) ranks, when it is the index result of a top_k
    whose float keys carry an error bound; None otherwise."""
    from .._optable import GET_TUPLE_ELEMENT
    from ._bounds import is_float_array

    if node.opdef is not GET_TUPLE_ELEMENT or node.extra != 1 or not node.operands:
        return None
    t = node.operands[0]
    target = str((getattr(t, "attrs", {}) or {}).get("custom_call_target", ""))
    if not (t.opcode in _TOPK or t.opcode.endswith("custom_call") and "TopK" in target) or len(t.operands) != 1:
        return None
    keys, bound = env.get(id(t.operands[0])), bounds.get(id(t.operands[0]))
    if not isinstance(keys, np.ndarray) or not is_float_array(keys) or not isinstance(bound, np.ndarray) \
            or bound.shape != keys.shape:
        return None
    return OrderKeys(np.asarray(keys).astype(np.float64), np.asarray(bound, np.float64))


def judge_order(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any], keys: OrderKeys | None,
                margin: float) -> tuple[np.ndarray[Any, Any], tuple[int, float]]:
    """Per element of the device's index output ``got`` (``[..., k]``), whether it breaks a valid
    top-k order of the reference's keys under ``margin`` times their bounds (True: a mismatch; a
    row equal to the reference's ``want`` is right), and ``(elements not judged, the largest key
    tolerance among them)``: rows that differ where a key's tolerance reaches the keys' and the
    program's arguments' largest magnitude (any order would pass). ``keys`` None: bit for bit."""
    if keys is None:
        return np.asarray(got != want), (0, 0.0)
    x, e = keys.keys, margin * keys.bound
    if got.shape != want.shape or got.shape[:-1] != x.shape[:-1] or got.shape[-1] > x.shape[-1]:
        return np.asarray(got != want), (0, 0.0)
    n, k = x.shape[-1], got.shape[-1]
    bad = np.zeros(got.shape, bool)
    unjudged, loosest = 0, 0.0
    big = max(float(np.max(np.abs(x), initial=0.0, where=np.isfinite(x))), keys.reach)
    for idx in np.ndindex(*got.shape[:-1]):
        d = np.asarray(got[idx]).astype(np.int64)
        if np.array_equal(d, want[idx]):
            continue
        row, err = x[idx], e[idx]
        if np.any((d < 0) | (d >= n)) or len(np.unique(d)) != k or not np.all(np.isfinite(row)):
            bad[idx] = d != want[idx]  # out of range, repeated, or NaN keys: bit for bit
            continue
        if big > 0 and float(np.max(err, initial=0.0)) >= big:
            unjudged, loosest = unjudged + k, max(loosest, float(np.max(err)))
            continue
        sel, sel_e = row[d], err[d]
        # each selected key not below the next one beyond both bounds
        broken = sel[:-1] + sel_e[:-1] < sel[1:] - sel_e[1:]
        rest = np.ones(n, bool)
        rest[d] = False
        b = np.zeros(k, bool)
        b[:-1] |= broken
        b[1:] |= broken
        # no key left out above a selected one beyond both bounds
        if np.any(row[rest] - err[rest] > np.min(sel + sel_e)):
            b[int(np.argmin(sel + sel_e))] = True
        bad[idx] = b
    return bad, (unjudged, loosest)


def vacuous(carried: Any, equal: np.ndarray[Any, Any], tol: Any, w: np.ndarray[Any, Any],
            finite_w: np.ndarray[Any, Any], big: float) -> tuple[int, float]:
    """How many finite elements of an output, not ``equal`` to the reference's, have a tolerance
    ``tol`` that the error bound ``carried`` in (None: none, nothing counted) makes at least ``big``:
    the largest of the output's largest magnitude, the terms the op that made it added and the
    program's arguments (there a zero, a sign flip or any value of the size the program computes
    with would pass; a result that cancels to rounding noise, as a residual of an exact solve,
    keeps a bound far below that), and the largest such tolerance."""
    if big <= 0 or carried is None or np.shape(carried) != w.shape:
        return 0, 0.0
    t = np.where(equal, 0.0, np.broadcast_to(np.asarray(tol, np.float64), w.shape))
    loose = finite_w & (t >= big)
    return int(np.count_nonzero(loose)), float(np.max(t, initial=0.0, where=loose))


def with_order(scale: Any, node: Any, env: dict[int, Any], bounds: dict[int, Any], params: Any = ()) -> Any:
    """``scale`` (an output's :class:`~._bounds.OutputScale`) with the keys its index output
    ranks in ``order`` (:func:`order_keys`; None for other outputs) and in ``reach`` the largest
    finite magnitude of the program's float arguments ``params`` (their values in ``env``)."""
    from ._bounds import is_float_array

    scale.order = order_keys(node, env, bounds)
    mags = [np.abs(v) for v in (env.get(id(p)) for p in params)
            if isinstance(v, np.ndarray) and is_float_array(v) and v.size]
    scale.reach = max((float(np.max(m, initial=0.0, where=np.isfinite(m))) for m in mags), default=0.0)
    if scale.order is not None:
        scale.order.reach = scale.reach
    return scale


def reach(scale: Any) -> float:
    """The largest magnitude of the program's arguments an output's ``scale`` carries (0: unknown)."""
    return float(getattr(scale, "reach", 0.0) or 0.0)


def verdict(report: Any) -> str:
    """``MATCH``, ``DIVERGENCE`` (an element outside its bound) or ``CANNOT JUDGE`` (none outside,
    but some element's bound reaches its output's largest magnitude), that last one settled by the
    report's ``judged_op_by_op`` where it has one (:mod:`._per_op`)."""
    outputs = outputs_verdict(report)
    per_op = getattr(report, "judged_op_by_op", None)
    return str(per_op.verdict) if outputs == "CANNOT JUDGE" and per_op is not None else outputs


def outputs_verdict(report: Any) -> str:
    """:func:`verdict` on the outputs alone (their carried bounds), without the op-by-op judgment."""
    if any(o.mismatches for o in report.outputs):
        return "DIVERGENCE"
    return "CANNOT JUDGE" if any(o.unjudged for o in report.outputs) else "MATCH"


def unjudged_lines(outputs: Any) -> list[str]:
    """The report's lines for the outputs whose bound is too loose to judge some elements."""
    return [f"  output {o.index}: {o.unjudged} element{'s' if o.unjudged != 1 else ''} not judged: the error the "
            f"ops before it may carry in (bound up to {o.loosest:.3g}) reaches "
            + ("its keys'" if o.dtype.startswith(("int", "uint")) else "the output's") + " and the arguments' largest "
            "magnitude, so any value would pass; "
            "--bisect ops judges each op on the device's own operands" for o in outputs if o.unjudged]


def _scaled(diff: Any, w: np.ndarray[Any, Any], finite: np.ndarray[Any, Any]) -> float:
    """The largest finite error over the largest finite magnitude of the wanted values."""
    with np.errstate(all="ignore"):
        mag = np.abs(w.astype(np.complex128) if w.dtype.kind == "c" else w.astype(np.float64))
        big = float(np.max(mag, initial=0.0, where=np.isfinite(mag)))
        top = float(np.max(np.real(diff), initial=0.0, where=finite))
    return top / big if big > 0 else (0.0 if top == 0 else math.inf)
