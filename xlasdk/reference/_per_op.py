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
own keys (:func:`._orders.judge_order`), so a tie ranked either way is no departure. A ``while``
that departs is judged again against the states a correct device may leave it in where a float
comparison decides its trip count (:func:`_judge_loop`): rounding may run one iteration more or fewer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .._optable import GET_TUPLE_ELEMENT
from ..ops.control import WHILE
from ._report import OutputComparison

if TYPE_CHECKING:
    from ..program.computation import XlaComputation
    from ..runtime import CompileOptions
    from ._settings import CompareSettings

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
    #: the ops not exposed that the first departing instruction was judged together with
    group: list[str] = field(default_factory=list)
    #: instructions read only by data movement, not exposed (exposing them changed how XLA computed
    #: the outputs): each judged with the op that moves it, over the bound carried across that group
    hidden: int = 0
    #: the steps it was made of, each named (against another device: both runs; against a second
    #: module: its run and the two modules in the reference evaluator; :mod:`._per_op_runners`)
    parts: list[tuple[str, OpByOp]] = field(default_factory=list)
    #: per instruction judged, its score (largest error over largest magnitude against its rule on its
    #: operands) and whether a NaN/Inf stood against another value: the report's score histogram
    scores: dict[str, tuple[float, bool]] = field(default_factory=dict)
    #: how it was judged, in words (the report's lines)
    method: str = _METHOD

    def deciding(self) -> list[str]:
        """The ops (or outputs) that decide the verdict: the first departing one on a DIVERGENCE, the
        one whose bound is too loose on a CANNOT JUDGE (with every step's), none on a MATCH."""
        own = [self.first] if self.first is not None and self.verdict != "MATCH" else []
        return own + [d for _, p in self.parts for d in p.deciding() if d not in own]

    def as_dict(self) -> dict[str, Any]:
        e = self.error
        return {"verdict": self.verdict, "instructions": self.instructions, "first": self.first,
                "opcode": self.opcode, "departing": self.departing, "why": self.why, "group": list(self.group),
                "hidden": self.hidden, "deciding": self.deciding(),
                "parts": [{"step": w, **p.as_dict()} for w, p in self.parts],
                "error": None if e is None else {"max_abs": e.max_abs, "max_rel": e.max_rel, "max_ulp": e.max_ulp,
                                                 "mismatches": e.mismatches, "first_mismatch": None if
                                                 e.first_mismatch is None else list(e.first_mismatch)}}

    def lines(self) -> list[str]:
        if self.parts:
            head = {"MATCH": "each step matches", "DIVERGENCE": f"DIVERGENCE ({self.why})",
                    "CANNOT JUDGE": "CANNOT JUDGE"}[self.verdict]
            out = [f"  the outputs' carried bounds were too loose to judge them; the op-by-op step: {head}"]
            for w, p in self.parts:
                out.append(f"  - {w}: {p.verdict}")
                out.extend("  " + ln for ln in p.lines())
            return out
        if self.verdict == "MATCH" and self.why:
            return [f"  {self.why}"]
        if self.verdict == "MATCH":
            hid = (f"; {self.hidden} values read only by data movement were not exposed (exposing them changed how "
                   "XLA computed the outputs): each judged with the op that moves it") if self.hidden else ""
            return [f"  {_METHOD}: {self.instructions} instructions, each within its own bound (the outputs' "
                    "carried bounds were too loose to judge them; the compile with the values exposed gave "
                    f"bit-identical outputs{hid})"]
        if self.verdict == "DIVERGENCE":
            e = self.error
            err = "" if e is None else (f" ({e.mismatches} element{'s' if e.mismatches != 1 else ''} outside it, max "
                                        f"abs {e.max_abs:.3g}, max rel {e.max_rel:.3g}, first at "
                                        f"{[] if e.first_mismatch is None else list(e.first_mismatch)})")
            if not self.opcode:  # an output of a step that compares whole programs (._per_op_runners)
                return [f"  {self.first}: {self.why}{err}"]
            more = f"; {self.departing - 1} more after it" if self.departing > 1 else ""
            with_ = f" (judged with {', '.join(self.group)}, not exposed)" if self.group else ""
            return [f"  {_METHOD}: {self.first} ({self.opcode}){with_} departs from its own bound on the device's "
                    f"values of its operands{err}{more}; --bisect ops localises it on the original compile"]
        return [f"  not {self.method}: {self.why}"]


def judge_op_by_op(
    comp: XlaComputation,
    args: Sequence[Any],
    got: Sequence[np.ndarray[Any, Any]],
    *,
    settings: CompareSettings,
    options: CompileOptions | None,
) -> OpByOp:
    """Judge ``comp`` op by op on the settings' device (compiled with ``options``, as the compile
    whose outputs were ``got``), each op by the settings' tolerances and device kind: see the
    module's docstring."""
    from ._bisect_core import _CutFailed, _Program  # the engine sits above the comparison

    say = settings.say
    p = _Program(comp, args, settings, options, need_reference=False)
    outs = [o for o in p.graph.outputs if o.shape.is_array()]
    if len(outs) != len(got) or len(outs) != len(p.graph.outputs):
        return OpByOp("CANNOT JUDGE", why=f"the program's {len(got)} outputs could not be matched with its "
                                          f"{len(p.graph.outputs)} output values")
    body = [i for i in p.instrs[p.nparams:] if p.slots[i.index]]  # live instructions with array values
    hidden: set[int] = set()
    dev: dict[int, Any] = {}
    for attempt in ("every value", "every value not read only by data movement"):
        if attempt != "every value":  # exposing a value that only a transpose/reshape/broadcast reads changes its
            hidden = _read_only_by_moves(p, body)  # layout or fusion: those are judged with the op that moves them
        nodes = [n for i in body if i.index not in hidden for n in p.slots[i.index]]
        say(f"op by op: one compile with {attempt} exposed ({len(nodes)} values)")
        try:
            values = p.run(nodes) if nodes else []
        except _CutFailed as e:
            return OpByOp("CANNOT JUDGE", why=f"the compile with {attempt} exposed failed ({e})")
        dev = {id(q): a for q, a in zip(p.graph.params, p.args, strict=True)}
        dev.update({id(n): g for n, g in zip(nodes, values, strict=True)})
        differs = _differing_output(outs, got, dev)
        if differs is None:
            break
        say(f"op by op: output {differs} of that compile is not bit-identical to the original compile's")
    else:
        return OpByOp("CANNOT JUDGE", why=f"the compile with every value exposed (and the one with every value not "
                      f"read only by data movement) computed output {differs} differently from the original compile "
                      "(not bit-identical), so judging its ops would not cover the original; --bisect ops judges "
                      "cuts of the original program")
    say("op by op: its outputs are bit-identical to the original compile's")
    judged, unjudged = 0, []
    scores: dict[str, tuple[float, bool]] = {}
    departing: list[tuple[Any, OutputComparison, list[str]]] = []
    step = max(1, len(body) // 4)
    for j, ins in enumerate(body, 1):
        if ins.index not in hidden:
            judged += 1
            r = _judge(p, ins, dev, hidden)
            if r is None:
                unjudged.append(ins.name)
            else:
                scores[ins.name] = (r[0].max_scaled, r[0].nonfinite_mismatches > 0)
                if not r[0].ok or r[0].unjudged:
                    departing.append((ins, *r))
        if j % step == 0 or j == len(body):
            say(f"op by op: {j}/{len(body)} instructions, {len(departing)} departing from their own bound")
    if departing:  # the first outside its bound; else the first whose bound is too loose to judge it
        ins, c, group = next((d for d in departing if not d[1].ok), departing[0])
        return OpByOp("DIVERGENCE" if not c.ok else "CANNOT JUDGE", judged, ins.name, ins.opcode,
                      sum(1 for d in departing if not d[1].ok), c,
                      "" if not c.ok else f"{ins.name}'s bound over {', '.join(group) or 'its operands'} is too "
                      "loose to judge it", group=group, hidden=len(hidden), scores=scores)
    if unjudged:
        return OpByOp("CANNOT JUDGE", judged, why=f"{len(unjudged)} instructions could not be judged on the device's "
                      f"values of their operands ({', '.join(unjudged[:3])}{', ...' if len(unjudged) > 3 else ''})",
                      scores=scores)
    return OpByOp("MATCH", judged + len(hidden), hidden=len(hidden), scores=scores)


def _differing_output(outs: Sequence[Any], got: Sequence[Any], dev: dict[int, Any]) -> int | None:
    """The first output whose exposed value is not bit-identical to the original compile's (None: none)."""
    for k, (o, g) in enumerate(zip(outs, got, strict=True)):
        d = dev.get(id(o))
        if d is None:
            return k
        d, g = np.asarray(d), np.asarray(g)
        if d.shape != g.shape or d.dtype != g.dtype or d.tobytes() != g.tobytes():
            return k
    return None


def _read_only_by_moves(p: Any, body: Sequence[Any]) -> set[int]:
    """The instructions (indices) of ``body`` read only by data movement (transpose, reshape,
    broadcast), none of the program's outputs: XLA folds a transpose into its producer's layout and
    a reduce into its broadcast's fusion, which exposing the value undoes."""
    readers: dict[int, list[str]] = {}
    for ins in body:
        for src in p.reads.get(ins.index, ()):
            readers.setdefault(src, []).append(ins.opcode)
    end = len(p.instrs)
    return {i.index for i in body if readers.get(i.index) and p.last_use[i.index] < end
            and all(r in _MOVES for r in readers[i.index])}


def _judge(p: Any, ins: Any, dev: dict[int, Any], hidden: set[int]) -> tuple[OutputComparison, list[str]] | None:
    """The worst of ``ins``'s values against its rule on the device's values of its operands,
    within its own bound; where some operands are not exposed (``hidden``), against the rules of
    it and the ops that make them from the exposed values before, within the bound carried over
    that group. None where an operand's value cannot be reached."""
    from ._walk import Evaluator

    group: list[Any] = []
    env: dict[int, Any] = {}
    stack = [x for x in p.main_inputs(ins.op) if x.shape.is_array()]
    while stack:
        x = stack.pop()
        if id(x) in env:
            continue
        if id(x) in dev:
            env[id(x)] = dev[id(x)]
            continue
        try:
            owner = p.graph.instruction_of(x)
        except Exception:  # noqa: BLE001 - a value the exposed compile does not hold: not judged
            return None
        if owner.index not in hidden:
            return None
        if owner in group:
            continue
        group.append(owner)
        stack.extend(y for y in p.main_inputs(owner.op) if y.shape.is_array())
    roots = p.slots[ins.index]
    ev = Evaluator(p.comp)
    ev.run_graph(roots, env)
    worst: OutputComparison | None = None
    for n in roots:
        c = _check(p, n, np.asarray(dev[id(n)]), np.asarray(env[id(n)]), env) if not group else \
            _check_group(p, n, np.asarray(dev[id(n)]), env, ev, group)
        if worst is None or not c.ok or c.unjudged:
            worst = c
            if not c.ok or c.unjudged:
                break
    assert worst is not None
    if not worst.ok and not group and ins.op.opdef.same_op(WHILE) and len(ins.op.regions) == 2:
        worst = _judge_loop(p, ins.op, roots, dev, env) or worst
    return worst, [g.name for g in sorted(group, key=lambda g: g.index)]


def _judge_loop(p: Any, o: Any, roots: Sequence[Any], dev: dict[int, Any], env: dict[int, Any]
                ) -> OutputComparison | None:
    """A ``while`` whose device values depart from its rule on the device's operands, judged again
    against every state a correct device may leave it in (:func:`._judge.other_trip_counts`: where
    the float comparison deciding an iteration may come out the other way, one iteration more or
    fewer): floats as the loop's values are (its own bound), integers and booleans exactly but where
    they may differ (made from such a comparison). The first state every result
    matches (None: none does, the departure stands). Its iteration counter is judged exactly: a loop
    that counts wrong, or computes a wrong value, matches none."""
    from ._bounds import OutputScale, is_float_array
    from ._judge import other_trip_counts
    from ._report import compare_one

    s = p.settings
    results = [n.extra if n.opdef is GET_TUPLE_ELEMENT else 0 for n in roots]
    try:
        states = other_trip_counts(p.comp, o, [env[id(x)] for x in o.operands], env, s.kind, s.precision)
    except Exception:  # noqa: BLE001 - a loop the bounds cannot follow: the departure stands
        return None
    for m, values, bounds in states:
        worst: OutputComparison | None = None
        for n, k in zip(roots, results, strict=True):
            got, want, bound = np.asarray(dev[id(n)]), np.asarray(values[k]), bounds[k]
            if got.shape != want.shape or got.dtype != want.dtype:
                return None
            if is_float_array(want):  # as the loop's own values are judged (:meth:`._Program.check`)
                c = p.check(n, got, want, env)
            else:  # where it may differ, the device's own value
                may = np.broadcast_to(np.asarray(bound) > 0, want.shape) if isinstance(bound, np.ndarray) \
                    else np.zeros(want.shape, bool)
                c = compare_one(0, got, np.where(may, got, want), None, None, OutputScale(0.0), None)
            if worst is None or not c.ok or c.unjudged:
                worst = c
            if not c.ok or c.unjudged:
                break
        if worst is not None and worst.ok and not worst.unjudged:
            s.say(f"op by op: {o.opcode} matches the reference stopped after {m} iterations (its condition's float "
                  "comparison may come out the other way there)")
            return worst
    return None


def _check_group(p: Any, node: Any, got: np.ndarray[Any, Any], env: dict[int, Any], ev: Any,
                 group: Sequence[Any]) -> OutputComparison:
    """``node``'s device value against the rules of it and ``group`` (the hidden ops before it)
    from the exposed values, within the bound carried from those (seeded exact) over the group."""
    from ._bounds import OutputScale, error_bounds, made_by_dot, output_scale
    from ._report import compare_one

    inner = {id(n) for g in group for n in p.slots[g.index]} | {id(n) for n in p.slots[
        p.graph.instruction_of(node).index]}
    seeds = {k: np.zeros(np.shape(v)) if isinstance(v, np.ndarray) else None for k, v in env.items()
             if k not in inner}  # every exposed value read: the device's, taken as exact
    bounds = error_bounds([node], env, ev, seeds)
    try:
        scale: float = output_scale(node, env)
    except KeyError:
        scale = 0.0
    s = p.settings
    return compare_one(0, got, np.asarray(env[id(node)]), s.rtol, s.atol,
                        OutputScale(scale, bounds.get(id(node)), made_by_dot(node)), s.ulps)


_MOVES = frozenset({"stablehlo.transpose", "stablehlo.reshape", "stablehlo.broadcast_in_dim", "stablehlo.broadcast"})


def _check(p: Any, node: Any, got: np.ndarray[Any, Any], want: np.ndarray[Any, Any],
           env: dict[int, Any]) -> OutputComparison:
    """``node``'s device value against its rule on the device's operand values ``env``, within the
    op's own bound; a top_k's index output by the order it gives on the device's own keys."""
    from ._bounds import OutputScale
    from ._orders import order_keys
    from ._report import compare_one

    if want.dtype.kind in "iu":
        keys = order_keys(node, env, {k: np.zeros(np.shape(v)) for k, v in env.items() if isinstance(v, np.ndarray)})
        if keys is not None:
            scale = OutputScale(0.0)
            scale.order = keys  # type: ignore[attr-defined]
            return compare_one(0, got, want, None, None, scale, None)
    return p.check(node, got, want, env)  # type: ignore[no-any-return]
