"""Each op judged against its own bound on the device's own operand values (the error model of
:mod:`._precision`): what ``--bisect ops`` checks an instruction by, and the report's lines that
say why an op that differs is right ("convolution.3: up to 1.9e-3 relative, within TPU v5e DEFAULT
precision (bf16 inputs; bound 7.8e-3 of |A|·|B|)").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..builder import XlaOp
from ._precision import DeviceKind, dot_precision, op_bound

__all__: list[str] = []


def own_bound(comp: Any, node: XlaOp, env: dict[int, Any], out: Any, kind: DeviceKind,
              precision: str | None) -> Any:
    """How far a correct device's value of ``node`` may be from its rule's value ``out`` on the
    operand values of ``env`` (per element, float64), by ``kind``'s model; None when it cannot be
    computed (the caller keeps the default tolerance)."""
    from ._bounds import is_float_array, own_rounding
    from ._walk import Evaluator

    if not is_float_array(out) or any(id(x) not in env for x in node.operands):
        return None
    ev = Evaluator(comp)
    ev.model, ev.precision = kind, precision
    saved = ev.current
    ev.current = env
    try:
        with np.errstate(all="ignore"):
            b = own_rounding(node, [env[id(x)] for x in node.operands], np.asarray(out), ev)
    except Exception:  # noqa: BLE001 - a rule that cannot give magnitudes: no bound of its own
        return None
    finally:
        ev.current = saved
    return np.asarray(b, np.float64) if np.shape(b) == np.shape(out) else None


#: how many iterations past the reference's exit a device may run while the loop's condition may come out
#: the other way (each one a sweep whose decision rounding could change), and the most iterations followed
MORE_TRIPS = 4
MAX_TRIPS = 4096


def other_trip_counts(comp: Any, o: XlaOp, init: list[Any], env: dict[int, Any], kind: DeviceKind,
                      precision: str | None) -> list[tuple[int, list[Any], list[Any]]]:
    """The states a correct device may leave loop ``o`` (a ``while`` of scope ``env``) in, started
    from the device's values ``init`` of its operands (taken as exact): the reference's own exit
    state, and those after the iterations where the loop's condition may come out the other way (a
    float comparison, in the condition or carried into it as a predicate by the body, whose operands
    are within ``BOUND_MARGIN`` times their carried bounds of each other: :func:`._bounds._flips`):
    fewer iterations (the device stopped where the condition may be false), or up to
    :data:`MORE_TRIPS` more (it went on where it may be true). Each as ``(iterations, values,
    bounds)``: per result its reference value and its carried bound (float: the rounding the body's
    ops carried from ``init``; integer or boolean: where it may differ, 1.0, or None), the
    reference's own trip count first. Empty when the loop runs over :data:`MAX_TRIPS` iterations."""
    from ._bounds import _region_bounds, is_float_array
    from ._walk import Evaluator

    cond, body = o.regions
    ev = Evaluator(comp)
    ev.model, ev.precision = kind, precision
    saved = ev.current

    def decide(state: list[Any], errs: list[Any]) -> tuple[bool, bool]:  # (goes on, may come out otherwise)
        ev.current = env  # the scope the condition's region reads
        c, ce = _region_bounds(cond, state, errs, env, ev, {})
        return bool(np.asarray(c[0])), isinstance(ce[0], np.ndarray) and bool(np.any(ce[0]))

    def step(state: list[Any], errs: list[Any]) -> tuple[list[Any], list[Any]]:
        ev.current = env
        return _region_bounds(body, state, errs, env, ev, {})

    state = list(init)
    errs: list[Any] = [np.zeros(np.shape(v)) if is_float_array(v) else None for v in state]
    states: list[tuple[list[Any], list[Any], bool, bool]] = []
    try:
        with np.errstate(all="ignore"):
            while True:
                go, flips = decide(state, errs)
                states.append((state, errs, go, flips))
                if not go:
                    break
                if len(states) > MAX_TRIPS:
                    return []
                state, errs = step(state, errs)
            n = len(states) - 1
            while len(states) - 1 < n + MORE_TRIPS and (states[-1][2] or states[-1][3]):
                state, errs = step(*states[-1][:2])
                states.append((state, errs, *decide(state, errs)))
    finally:
        ev.current = saved
    fewer = [m for m in range(n) if states[m][3]]  # the device stopped where the condition may be false
    more = []  # the device went on past n where the condition may be true, and stopped where it may be false
    for m in range(n + 1, len(states)):
        if not states[m - 1][3] and not states[m - 1][2]:
            break
        if not states[m][2] or states[m][3]:
            more.append(m)
    order = sorted([*fewer, *more], key=lambda m: (abs(m - n), m))
    return [(m, states[m][0], states[m][1]) for m in [n, *order]]


def is_exact(node: XlaOp, kind: DeviceKind) -> bool:
    """The model says ``node`` is bit-exact on ``kind`` (moves, integers, comparisons, selects...)."""
    row = op_bound(node, kind)
    return row is not None and row.kind == "exact"


def why_within(comp: Any, name: str, node: XlaOp, env: dict[int, Any], got: Any, kind: DeviceKind,
               precision: str | None) -> str:
    """``"dot.3: up to 1.9e-3 relative, within TPU v5e DEFAULT precision (bf16 inputs; bound
    7.8e-3 of |A|·|B|)"`` for a dot/convolution or a function of tens of ulps whose device value
    ``got`` (on the device's operand values in ``env``) differs from its rule's; '' otherwise."""
    from ._bounds import Widened, magnitude
    from ._walk import Evaluator, rule_of, widened

    ev = Evaluator(comp)
    row = op_bound(node, kind)
    rule = rule_of(node)
    if row is None or rule is None or row.kind not in ("dot", "ulps") or any(id(x) not in env for x in node.operands):
        return ""
    vals = [env[id(x)] for x in node.operands]
    g = np.asarray(got)
    if g.dtype.kind not in "fV" or not all(isinstance(v, np.ndarray) for v in vals):
        return ""
    with np.errstate(all="ignore"):
        exact = np.asarray(rule(Widened(node), vals, ev))  # type: ignore[arg-type]
        err = np.abs(widened(g).astype(np.float64) - exact)
        if row.kind == "dot" and node.opdef.props.bilinear and len(vals) == 2:
            terms = magnitude(rule(Widened(node), [magnitude(v) for v in vals], ev))  # type: ignore[arg-type]
            rel = float(np.max(np.where(terms > 0, err / np.where(terms > 0, terms, 1.0), 0.0), initial=0.0))
            k = int(round(math.sqrt(max(vals[0].size * vals[1].size / max(g.size, 1), 1.0))))
            dp = dot_precision(node, (vals[0].dtype, vals[1].dtype), kind, precision)
            if not np.isfinite(rel) or rel == 0.0:
                return ""
            return f"{name}: up to {rel:.2g} relative, within {dp.describe(k)}"
        if row.ulps <= 8:
            return ""
        spacing = 2.0 ** -23 * np.maximum(np.abs(exact), 2.0 ** -126)
        ulps = float(np.max(np.where(np.isfinite(err), err / spacing, 0.0), initial=0.0))
    if ulps == 0.0:
        return ""
    return (f"{name}: up to {ulps:.3g} f32 ulp, within {kind.label}'s {node.opcode.split('.')[-1]} bound of "
            f"{row.ulps:g} ulp{f' or {row.atol:g} absolutely' if row.atol else ''} ({row.cited})")


# -- --bisect passes when passes interact ------------------------------------------------------------------------
def search_parts(cands: list[str], test: Any) -> tuple[list[str] | None, str]:
    """A set of passes whose disabling fixes the divergence when disabling all of ``cands`` does
    not (passes interact: without one, another's rewrite is missing and the program goes another
    wrong way): each pass alone, then windows of 2, 4, 8... consecutive passes of the pipeline
    (overlapping by half).
    Returns the set (None when none fixes it) and what was tried, in words."""
    tried = 0
    for name in cands:
        tried += 1
        if test([name]) == "fixed":
            return [name], f"disabling all {len(cands)} passes does not remove it; disabling {name} alone does"
    groups = 0
    width = 2
    while width < len(cands):  # windows of consecutive passes, overlapping by half
        for start in range(0, len(cands) - width + 1, max(1, width // 2)):
            ch = cands[start:start + width]
            groups += 1
            if test(ch) == "fixed":
                return ch, (f"disabling all {len(cands)} passes does not remove it, nor any single one; disabling "
                            f"the {len(ch)} consecutive passes {ch[0]} .. {ch[-1]} does")
        width *= 2
    return None, (f"disabling all {len(cands)} passes does not remove the divergence, nor does disabling any "
                  f"single one ({tried} compiles) or any of {groups} groups of consecutive passes (windows of 2, "
                  "4, 8... passes of the pipeline, overlapping by half): it is not an optimization's doing, or "
                  "comes from code generation")
