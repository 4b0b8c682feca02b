"""Which ops of a program compute below f32 on a device kind, for ``compare``'s report: the notes
"d: up to ..., within TPU v5e DEFAULT precision (bf16 inputs; bound ...)". It walks the program with
the evaluator's graph readers, so it sits above both the error model (:mod:`._precision`) and the
evaluator (which reads that model)."""

from __future__ import annotations

import math
from typing import Any

from ..program.walk import reachable
from ._precision import DeviceKind, _elements, dot_precision, op_bound, strength_reduced
from ._walk import Evaluator, callee_name, dtype_of

__all__ = ["precision_notes"]


def precision_notes(comp: Any, kind: DeviceKind, precision: str | None = None, emulated: bool = False,
                    limit: int = 20) -> list[str]:
    """The ops of ``comp``'s main graph whose bound on ``kind`` is more than a rounding (dots and
    convolutions below f32, functions of tens of ulps or more), each with that bound, at most
    ``limit`` of them (then how many more)."""
    out: list[str] = []
    ev = Evaluator(comp)
    todo: list[tuple[str, Any]] = [(ins.name, ins.op) for ins in comp.instructions()]
    seen: set[str] = set()
    for name, o in todo:  # the main graph's ops, then those of the functions it calls (XLA's fusions)
        if o.opdef.props.calls_function:
            try:
                callee = callee_name(o, ev)
                if callee not in seen:
                    seen.add(callee)
                    todo.extend((f"{name}/{n.opcode.split('.')[-1]}", n) for n in _nodes(ev.callee(callee)))
            except Exception:  # noqa: BLE001 - a call the evaluator cannot read: its ops are not named here
                pass
            continue
        row = op_bound(o, kind)
        if row is None or not o.shape.is_array() or dtype_of(o.shape).kind not in "fc":
            continue
        if row.kind == "dot" and len(o.operands) == 2:
            sizes = [_elements(x.shape) for x in o.operands]
            k = int(round(math.sqrt(max(sizes[0] * sizes[1] / max(_elements(o.shape), 1), 1.0))))
            dp = dot_precision(o, tuple(dtype_of(x.shape) for x in o.operands), kind, precision, emulated)
            if dp.round_inputs is not None or dp.product_rel > 0:  # inputs below f32
                note = ", inputs rounded as the device does" if emulated and dp.round_inputs else ""
                if note and strength_reduced(
                        o, o.operands[0].shape.dimensions(), o.operands[1].shape.dimensions()):
                    note += (", or its f32 inputs as they are (a vector's dot or an outer product: XLA's dot "
                             "strength reduction)")
                out.append(f"{name}: {dp.describe(k)}{note}")
        elif row.kind == "ulps" and row.ulps > 8:
            out.append(f"{name}: {kind.label} {o.opcode.split('.')[-1]} {row.within()} ({row.cited})")
    if len(out) > limit:
        out = [*out[:limit], f"... and {len(out) - limit} more"]
    return out


def _nodes(graph: Any) -> list[Any]:
    """The nodes a called function's outputs read, in creation order."""
    return reachable(graph.outputs)
