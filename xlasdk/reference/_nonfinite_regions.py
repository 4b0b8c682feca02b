"""``find_nonfinite`` inside regions: when the first instruction whose value holds a NaN or Inf
while its operands hold none is a ``while``, an ``if``/``case`` or a ``func.call`` (a fusion, a JAX
private function), the search goes on inside it on the device's values, as ``bisect="ops"`` does
(:mod:`._bisect_regions`).

A ``while`` is run iteration by iteration on the device from its operands' device values (its
condition and body compiled once each, as programs of their own): the first iteration whose body
gives a NaN/Inf from a finite carried state is searched as a program of its own; a branch is the
one the device's predicate or index takes; a call, its function on the call's operands. The path
reads ``while.6 > body (iteration 3) > log.4``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ._bisect_regions import MAX_DEPTH, MAX_ITERATIONS, _called_computation, region_computation
from ._bisect_regions_against import region_kind

if TYPE_CHECKING:
    from ..program.computation import XlaComputation
    from ..program.graph_import import Instruction
    from ._bisect_core import _Program
    from ._bisect_nonfinite import NonFinite

__all__: list[str] = []


def descend_nonfinite(p: _Program, ins: Instruction, dev: dict[int, Any], result: NonFinite,
                      depth: int) -> NonFinite:
    """``result`` (``ins`` of ``p`` introduces a NaN/Inf; ``dev``: the device's values by node) with
    the search carried inside ``ins``'s region when it has one: ``result.region``/``result.inside``."""
    kind = region_kind(ins)
    if kind is None or depth >= MAX_DEPTH:
        return result
    try:
        if kind == "while":
            region, comp, args = _into_while(p, ins, dev)
        elif kind == "call":
            region = "called function"
            comp, args = _called_computation(p, ins), [dev[id(x)] for x in ins.op.operands]
        else:
            region, comp, args = _into_branch(p, ins, dev)
        if comp is None:
            result.note = (result.note + "; " if result.note else "") + region
            return result
        from ._bisect_nonfinite import search_nonfinite

        p.settings.say(f"find nonfinite: inside {ins.name}, its {region}")
        inside = search_nonfinite(comp, args, p.settings, p.options, None, depth + 1)
    except Exception as e:  # noqa: BLE001 - the culprit stands; what stopped the descent is said
        result.note = (result.note + "; " if result.note else "") + (
            f"the search could not go inside {ins.name}: {type(e).__name__}: {' '.join(str(e).split())[:200]}")
        return result
    result.compiles = p.compiles + inside.compiles
    result.region, result.inside = region, inside
    return result


def _into_while(p: _Program, ins: Instruction, dev: dict[int, Any]) -> tuple[str, XlaComputation | None, list[Any]]:
    """The first iteration of ``ins`` whose body makes a NaN/Inf, its body's program and its
    arguments; or why none is searched (and None)."""
    from ..runtime import compile as _compile
    from ._bisect_nonfinite import _nonfinite

    cond, body = ins.op.regions
    cond_c, cond_out = region_computation(p.comp, p.graph, ins.op, cond)
    body_c, body_out = region_computation(p.comp, p.graph, ins.op, body)
    state = [dev[id(x)] for x in ins.op.operands]
    cx, bx = [dev[id(x)] for x in cond_out], [dev[id(x)] for x in body_out]
    run_cond, run_body = (_compile(c, p.device, options=p.options) for c in (cond_c, body_c))
    p.compiles += 2
    for it in range(MAX_ITERATIONS):
        if it & (it - 1) == 0:
            p.settings.say(f"find nonfinite: {ins.name}, iteration {it}: its condition and body on the device")
        go = run_cond(*state, *cx)
        if not bool(np.asarray(go[0] if isinstance(go, (list, tuple)) else go)):
            return (f"none of the {it} iterations of {ins.name} makes a NaN/Inf from finite values when its body "
                    "runs alone (exposing the values changes what XLA fuses); nothing inside is named", None, [])
        out = run_body(*state, *bx)
        vals = [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]
        if any(_nonfinite(v) for v in vals):
            return f"body (iteration {it})", body_c, [*state, *bx]
        state = vals
    return f"no NaN/Inf in the first {MAX_ITERATIONS} iterations of {ins.name}; the search stopped there", None, []


def _into_branch(p: _Program, ins: Instruction, dev: dict[int, Any]) -> tuple[str, XlaComputation | None, list[Any]]:
    from ..ops.control import IF

    op = ins.op
    pick = int(np.asarray(dev[id(op.operands[0])]))
    n = len(op.regions)
    if op.opdef.same_op(IF):
        k, label = (0, "true branch") if pick else (1, "false branch")
    else:
        k = pick if 0 <= pick < n else n - 1  # out of range: the last branch, as XLA does
        label = f"branch {k}"
    region = op.regions[k]
    comp, outside = region_computation(p.comp, p.graph, op, region)
    bound = [dev[id(x)] for x in region.bindings] if region.bindings is not None else []
    return label, comp, [*bound, *(dev[id(x)] for x in outside)]
