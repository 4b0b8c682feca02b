"""Judging a program op by op when its outputs cannot be judged (issue 32).

On a deep program the error bound carried through every op to an output grows worst-case (about
4-5x per layer of a transformer) until it reaches the output's size, and :func:`~xlasdk.compare`
says CANNOT JUDGE. The device's own values of every instruction then settle it: one compile of the
program with every value exposed, each instruction's device value checked against its evaluation
rule applied to the device's own operand values, within that op's own bound (as ``--bisect ops``
judges a candidate), so error carried along a chain never counts against an op that only carries it.

That judgment covers the original compile only where XLA computed it the same way: the exposed
compile's outputs must be bit-identical to the original compile's, else the verdict stays CANNOT
JUDGE and says why. Index outputs of a ``top_k`` are judged by the order they give on the device's
own keys (:func:`._orders.judge_order`), so a tie ranked either way is no departure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ._report import OutputComparison

if TYPE_CHECKING:
    from ..computation import XlaComputation

__all__ = ["OpByOp", "judge_op_by_op"]

_METHOD = "judged op by op on the device's own operands"


@dataclass
class OpByOp:
    """What judging a program op by op found (``CompareReport.judged_op_by_op``)."""

    #: ``MATCH`` (every instruction within its own bound), ``DIVERGENCE`` (one departs from it) or
    #: ``CANNOT JUDGE`` (``why``: the exposed compile failed or computed the outputs differently)
    verdict: str
    #: the instructions judged (each one's values on the device's values of its operands)
    instructions: int = 0
    #: the first (topological order) instruction that departs from its own bound, its opcode
    first: str | None = None
    opcode: str = ""
    #: how many instructions depart from their own bound
    departing: int = 0
    #: how the first departing instruction's device value compares with its rule on its operands
    error: OutputComparison | None = None
    why: str = ""

    def as_dict(self) -> dict[str, Any]:
        e = self.error
        return {"verdict": self.verdict, "instructions": self.instructions, "first": self.first,
                "opcode": self.opcode, "departing": self.departing, "why": self.why,
                "error": None if e is None else {"max_abs": e.max_abs, "max_rel": e.max_rel, "max_ulp": e.max_ulp,
                                                 "mismatches": e.mismatches, "first_mismatch": None if
                                                 e.first_mismatch is None else list(e.first_mismatch)}}

    def lines(self) -> list[str]:
        if self.verdict == "MATCH":
            return [f"  {_METHOD}: {self.instructions} instructions, each within its own bound (the outputs' "
                    "carried bounds were too loose to judge them; the compile with every value exposed gave "
                    "bit-identical outputs)"]
        if self.verdict == "DIVERGENCE":
            e = self.error
            err = "" if e is None else (f" ({e.mismatches} element{'s' if e.mismatches != 1 else ''} outside it, max "
                                        f"abs {e.max_abs:.3g}, max rel {e.max_rel:.3g}, first at "
                                        f"{[] if e.first_mismatch is None else list(e.first_mismatch)})")
            more = f"; {self.departing - 1} more after it" if self.departing > 1 else ""
            return [f"  {_METHOD}: {self.first} ({self.opcode}) departs from its own bound on the device's values "
                    f"of its operands{err}{more}; --bisect ops localises it on the original compile"]
        return [f"  not {_METHOD}: {self.why}"]


def judge_op_by_op(
    comp: XlaComputation,
    args: Sequence[Any],
    got: Sequence[np.ndarray[Any, Any]],
    *,
    device: Any = None,
    options: Any = None,
    rtol: float | None = None,
    atol: float | None = None,
    ulps: float | None = None,
    device_kind: str | None = None,
    precision: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> OpByOp:
    """Judge ``comp`` op by op on ``device`` (compiled with ``options``, as the compile whose
    outputs were ``got``): see the module's docstring."""
    from ._bisect_core import _CutFailed, _Program, _Settings  # the engine sits above the comparison
    from ._evaluator import _Evaluator

    def say(line: str) -> None:
        if progress is not None:
            progress(line)

    p = _Program(comp, args, _Settings(device, options, rtol, atol, ulps, device_kind, precision),
                 need_reference=False)
    nodes = [n for i in p.instrs[p.nparams:] for n in p.slots[i.index]]
    say(f"op by op: one compile with every value exposed ({len(nodes)} values)")
    try:
        values = p.run(nodes) if nodes else []
    except _CutFailed as e:
        return OpByOp("CANNOT JUDGE", why=f"the compile with every value exposed failed ({e})")
    dev: dict[int, Any] = {id(q): a for q, a in zip(p.graph.params, p.args, strict=True)}
    dev.update({id(n): g for n, g in zip(nodes, values, strict=True)})
    outs = [o for o in p.graph.outputs if o.shape.is_array()]
    if len(outs) != len(got) or len(outs) != len(p.graph.outputs):
        return OpByOp("CANNOT JUDGE", why=f"the program's {len(got)} outputs could not be matched with its "
                                          f"{len(p.graph.outputs)} output values")
    for k, (o, g) in enumerate(zip(outs, got, strict=True)):
        d = dev.get(id(o))
        if d is None:
            return OpByOp("CANNOT JUDGE", why=f"output {k}'s value was not exposed")
        d, g = np.asarray(d), np.asarray(g)
        if d.shape != g.shape or d.dtype != g.dtype or d.tobytes() != g.tobytes():
            return OpByOp("CANNOT JUDGE", why=f"the compile with every value exposed computed output {k} differently "
                          "from the original compile (not bit-identical), so judging its ops would not cover the "
                          "original; --bisect ops judges cuts of the original program")
    say("op by op: its outputs are bit-identical to the original compile's")
    judged, departing = 0, []
    body = p.instrs[p.nparams:]
    step = max(1, len(body) // 4)
    for j, ins in enumerate(body, 1):
        inputs = [x for x in p.main_inputs(ins.op) if x.shape.is_array()]
        if p.slots[ins.index] and all(id(x) in dev for x in inputs):
            env = {id(x): dev[id(x)] for x in inputs}
            _Evaluator(comp).run_graph(p.slots[ins.index], env)
            judged += 1
            for n in p.slots[ins.index]:
                c = _check(p, n, np.asarray(dev[id(n)]), np.asarray(env[id(n)]), env)
                if not c.ok:
                    departing.append((ins, c))
                    break
        if j % step == 0 or j == len(body):
            say(f"op by op: {j}/{len(body)} instructions, {len(departing)} departing from their own bound")
    if not departing:
        return OpByOp("MATCH", judged)
    ins, c = departing[0]
    return OpByOp("DIVERGENCE", judged, ins.name, ins.opcode, len(departing), c)


def _check(p: Any, node: Any, got: np.ndarray[Any, Any], want: np.ndarray[Any, Any],
           env: dict[int, Any]) -> OutputComparison:
    """``node``'s device value against its rule on the device's operand values ``env``, within the
    op's own bound; a top_k's index output by the order it gives on the device's own keys."""
    from ._evaluator import _compare_one, _OutputScale
    from ._orders import order_keys

    if want.dtype.kind in "iu":
        keys = order_keys(node, env, {k: np.zeros(np.shape(v)) for k, v in env.items() if isinstance(v, np.ndarray)})
        if keys is not None:
            scale = _OutputScale(0.0)
            scale.order = keys  # type: ignore[attr-defined]
            return _compare_one(0, got, want, None, None, scale, None)
    return p.check(node, got, want, env)  # type: ignore[no-any-return]
