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
            f"{row.ulps:g} ulp (JAX's docs/accuracy.md)")


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
