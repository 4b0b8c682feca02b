"""``bisect="ops"`` between two environments where exposing the values hides the difference: suffix
cuts (``xlasdk compare FILE --against-jaxlib 0.12.0.1 --bisect ops``).

:func:`._against.compare_programs` runs the module on both sides with every value exposed. A
difference XLA makes only when it compiles two instructions together (jaxlib 0.12.0.1's XLA:CPU
rewrites a bf16 ``dot`` and the ``transpose`` after it into one ``dot`` and computes it five bf16
ulps off) is gone then: an exposed value is materialised, the rewrite no longer happens, and that
search ends "not localised". This one cuts the module the other way. For an instruction k (live
instructions, in topological order) the *suffix* from k is k and every live instruction after it
(:meth:`~xlasdk.XlaComputation.extract`): what it reads from before k becomes parameters, fed this
environment's values of them (one run here with every value exposed: the same values on both
sides), and it is compiled and run in both environments and judged as compare judges the two
environments' outputs (:meth:`~._other_env.OtherEnvironment.scales`: each release's value within its
device's error model of the exact one). The suffix from the first instruction (the module) differs, the
empty one does not; a binary search over k finds a k whose suffix differs while the suffix from
the next instruction matches (about log2 of the live instructions' count runs on each side).
Instruction k is where the difference starts, compiled together with what follows it.

Then the evidence: both cuts are run again (a difference that does not come back twice is not
blamed); k compiled alone (its operands fed); when alone it matches, the shortest run of
instructions from k that still differs (a second binary search), narrowed to the instructions on
the way from k to the last of them (the group, checked again on its own); on the CPU, the optimized
HLO XLA makes of the group in each environment (which instructions it made of them).

Fail closed: a cut that does not compile or run on a side, a module that matches once rebuilt from
its parameters, a difference between two cuts that cannot be told apart (the values between them
are no arrays: they cannot be fed), or a verification that does not come back the same is "not
localised", saying what was found; no instruction is named then. The two sides agreeing on the
whole module is no divergence: nothing is blamed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..program.walk import closure
from ._bisect_core import OpsBisection, _CutFailed, _extract_inputs, _Program

if TYPE_CHECKING:
    from ..program.computation import XlaComputation
    from ..program.graph_import import Instruction
    from ..runtime import CompileOptions, Device
    from ._report import OutputComparison
    from ._settings import CompareSettings

__all__ = ["Side", "HereSide", "Scales", "bisect_suffixes", "METHOD"]

#: the scales a module's outputs are judged by: ``scales(module, arguments, number of outputs)``
#: (:meth:`~._other_env.OtherEnvironment.scales`: the device's error model, doubled)
Scales = Callable[["XlaComputation", Sequence[Any], int], list[Any]]

METHOD = ("suffix cuts: the module from an instruction to its outputs, what it reads before it fed this "
          "environment's values, run in both environments; binary search over the topological order")


class Side(Protocol):
    """One environment of the search: it compiles and runs a module on given arguments."""

    @property
    def label(self) -> str:
        """The environment, as the report names it."""
        ...

    def run(self, comp: XlaComputation, args: Sequence[np.ndarray[Any, Any]]) -> list[np.ndarray[Any, Any]]:
        """``comp``'s outputs on ``args`` there.

        Raises :class:`~._bisect_core._CutFailed` when it does not compile or run there."""
        ...

    def optimized(self, comp: XlaComputation) -> str | None:
        """The optimized HLO text XLA makes of ``comp`` there; None where it is not asked (a device
        other than the CPU)."""
        ...


class HereSide:
    """This environment: compiled for ``device`` with ``options`` (the comparison's)."""

    label = "this environment"

    def __init__(self, device: Device, options: CompileOptions | None) -> None:
        self.device = device
        self.options = options

    def run(self, comp: XlaComputation, args: Sequence[np.ndarray[Any, Any]]) -> list[np.ndarray[Any, Any]]:
        from ..runtime import compile as _compile

        try:
            out = _compile(comp, self.device, options=self.options)(*args)
        except Exception as e:  # noqa: BLE001 - what stopped the search, never a culprit
            raise _CutFailed(f"here: {type(e).__name__}: {' '.join(str(e).split())[:300]}") from e
        return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]

    def optimized(self, comp: XlaComputation) -> str | None:
        from ._optimized_diff import optimized_hlo_here

        if self.device.platform != "cpu":
            return None
        overrides = dict(self.options.env_option_overrides) if self.options is not None else {}
        return optimized_hlo_here(comp, None, overrides)


def bisect_suffixes(comp: XlaComputation, args: Sequence[Any], settings: CompareSettings, here: Side,
                    there: Side, *, scales: Scales) -> OpsBisection:
    """The instruction where ``here`` and ``there`` start to differ on ``comp``, found by suffix cuts
    (see the module), as an :class:`~xlasdk.reference.bisect.OpsBisection`: ``"localised"`` with
    the culprit, ``isolation`` ``"alone"`` or ``"group"`` (``group``: the culprit and what it must be
    compiled with) and the evidence in ``note``; else ``"not localised"`` saying what was found.
    Each cut's outputs are compared at the settings' tolerances, by the ``scales`` of its outputs
    (as the comparison judged the two environments' outputs).

    Raises
    ------
    OtherEnvironmentError
        No answer from the other environment (it could not be started, died, ran past its time).
    """
    search = _Search(comp, args, settings, here, there, scales)
    try:
        return search.run()
    except _CutFailed as e:
        return search.stop(f"a cut could not be compiled or run ({e})")


class _Search:
    """The state of one suffix search: the program, the values fed, the runs made."""

    def __init__(self, comp: XlaComputation, args: Sequence[Any], settings: CompareSettings, here: Side,
                 there: Side, scales: Scales) -> None:
        self.p = _Program(comp, args, settings, None, need_reference=False)
        self.comp, self.settings, self.here, self.there, self.scales = comp, settings, here, there, scales
        end = len(self.p.instrs)
        live = closure([i for i, u in self.p.last_use.items() if u == end], lambda k: self.p.reads.get(k, ()))
        self.cands: list[Instruction] = [i for i in self.p.instrs[self.p.nparams:] if i.index in live]
        self.values: dict[int, Any] = {}
        self.runs = 0
        self.memo: dict[tuple[int, ...], OutputComparison | None] = {}

    def stop(self, why: str, first: str = "") -> OpsBisection:
        return OpsBisection("not localised", compiles=self.runs, method=METHOD, first_divergent=first,
                            note=f"suffix cuts: {why}; no instruction is named")

    # -- one cut on both sides
    def feedable(self, chosen: Sequence[Instruction]) -> bool:
        """Whether every value ``chosen`` reads from outside it has a value to feed (an array)."""
        return all(id(x) in self.values for x in _extract_inputs(self.p, chosen))

    def differs(self, chosen: Sequence[Instruction], *, again: bool = False) -> OutputComparison | None:
        """The first output of ``chosen`` (extracted, fed this environment's values) that differs
        between the sides, as compare judges two environments; None when all match. ``again``: run
        it anew (the verification), not from an earlier run."""
        key = tuple(i.index for i in chosen)
        if again or key not in self.memo:
            self.memo[key] = self._differs(chosen)
        return self.memo[key]

    def _differs(self, chosen: Sequence[Instruction]) -> OutputComparison | None:
        from ._report import compare_one

        s = self.settings
        inputs = _extract_inputs(self.p, chosen)
        sub = self.comp.extract(list(chosen))
        params = sub.instruction_graph().params
        if len(params) != len(inputs) or any(q.shape != x.shape for q, x in zip(params, inputs, strict=False)):
            raise _CutFailed(f"the cut from {chosen[0].name} reads other values than its parameters")
        feed = [np.asarray(self.values[id(x)]) for x in inputs]
        self.runs += 2
        got, want = self.here.run(sub, feed), self.there.run(sub, feed)
        if len(got) != len(want):
            raise _CutFailed(f"the cut from {chosen[0].name} gives {len(got)} outputs here, {len(want)} there")
        scales = self.scales(sub, feed, len(got))
        for k, (g, w, scale) in enumerate(zip(got, want, scales, strict=True)):
            g, w = np.asarray(g), np.asarray(w)
            if g.shape != w.shape or g.dtype != w.dtype:
                raise _CutFailed(f"the cut from {chosen[0].name}: output {k} is {g.dtype}{list(g.shape)} here, "
                                 f"{w.dtype}{list(w.shape)} there")
            c = compare_one(k, g, w, s.rtol, s.atol, scale, s.ulps)
            if not c.ok:
                return c
        return None

    # -- the search
    def run(self) -> OpsBisection:
        p, cands, say = self.p, self.cands, self.settings.say
        if not cands:
            return self.stop("the module computes nothing from its parameters")
        say("bisect ops: suffix cuts: one run here with every value exposed, to feed both sides the same values")
        nodes = [n for i in cands for n in p.slots[i.index]]
        self.runs += 1
        got = self.here.run(self.comp.with_outputs(nodes), p.args) if nodes else []
        self.values = {id(n): v for n, v in zip(nodes, got, strict=True)}
        self.values.update({id(q): a for q, a in zip(p.graph.params, p.args, strict=True)})
        m = len(cands)
        say(f"bisect ops: suffix cuts: the module rebuilt from its {m} live instructions, run in both environments")
        if self.differs(cands) is None:
            return self.stop("the module rebuilt from its parameters (its live instructions extracted) matches in "
                             "both environments: the difference does not come back once it is rebuilt")
        lo, hi = 0, m  # the suffix from cands[lo] differs; the one from cands[hi] matches (from m: empty)
        while hi - lo > 1:
            mid = self._feedable_between(lo, hi)
            if mid is None:
                names = ", ".join(i.name for i in cands[lo:hi][:12])
                return self.stop(f"the difference starts among {names} (the suffix from {cands[lo].name} differs, "
                                 + (f"the one from {cands[hi].name} matches" if hi < m else "the last one alone "
                                    "does not") + "), whose values cannot be fed one by one (not arrays)",
                                 cands[lo].name)
            say(f"bisect ops: suffix cuts: instructions {lo + 1}..{hi} of {m} left, trying the suffix from "
                f"{cands[mid].name}")
            if self.differs(cands[mid:]) is not None:
                lo = mid
            else:
                hi = mid
        ins = cands[lo]
        say(f"bisect ops: suffix cuts: the difference starts at {ins.name}; running both cuts again")
        first = self.differs(cands[lo:], again=True)
        if first is None or (hi < m and self.differs(cands[hi:], again=True) is not None):
            return self.stop(f"the search stopped at {ins.name}, but run again the suffix from it "
                             + ("matches" if first is None else f"differs and the one from {cands[hi].name} too")
                             + ": the two environments' results do not come back the same", ins.name)
        return self._evidence(lo, hi, first)

    def _feedable_between(self, lo: int, hi: int) -> int | None:
        """A position strictly between ``lo`` and ``hi`` whose suffix can be fed, nearest the middle."""
        mid = (lo + hi) // 2
        for d in range(hi - lo):
            for k in (mid - d, mid + d):
                if lo < k < hi and self.feedable(self.cands[k:]):
                    return k
        return None

    def _evidence(self, lo: int, hi: int, first: OutputComparison) -> OpsBisection:
        """The culprit ``cands[lo]``: alone, or the group it must be compiled with, and what XLA makes
        of them."""
        from ..types import hlo_element_name

        cands, ins, say = self.cands, self.cands[lo], self.settings.say
        after = cands[hi].name if hi < len(cands) else ""
        what = (f"{hlo_element_name(ins.shape.element_type())} {ins.hlo_opcode}" if ins.shape.is_array()
                else ins.hlo_opcode)
        suffix = (f"the module from {ins.name} to its outputs, fed this environment's values of what it reads, "
                  f"differs between the environments ({_said(first)})"
                  + (f"; from {after} on it matches" if after else ""))
        say(f"bisect ops: suffix cuts: compiling {ins.name} alone in both environments")
        try:
            alone = self.differs([ins])
        except _CutFailed as e:
            return self._found(ins, "", [], f"first differing: %{ins.name} ({what}); compiled alone it could not "
                               f"be run ({e})\n{suffix}")
        if alone is not None:
            return self._found(ins, "alone", [], f"first differing: %{ins.name} ({what}) — differs compiled alone "
                               f"on the same operand values ({_said(alone)})\n{suffix}")
        say(f"bisect ops: suffix cuts: {ins.name} alone matches; looking for what it must be compiled with")
        try:
            group = self._group(lo)
        except _CutFailed as e:
            return self._found(ins, "", [], f"first differing: %{ins.name} ({what}) — alone it matches; what it "
                               f"must be compiled with could not be narrowed ({e})\n{suffix}")
        others = ", ".join(f"%{g.name} ({g.hlo_opcode})" for g in group[1:])
        made = self._made_of(group)
        return self._found(ins, "group", [g.name for g in group],
                           f"first differing: %{ins.name} ({what}) — differs only when compiled together with "
                           f"{others}; alone it matches\n{suffix}" + (f"\n{made}" if made else ""))

    def _group(self, lo: int) -> list[Instruction]:
        """The shortest run ``cands[lo..j]`` that still differs (binary search over j: the one up to j
        differs, up to j - 1 matches), narrowed to ``cands[lo]``, what reads it on the way to
        ``cands[j]``, and ``cands[j]``, when that group differs on its own; else the whole run."""
        cands, p = self.cands, self.p
        a, b = lo, len(cands) - 1  # the run up to a matches (cands[lo] alone); up to b differs (the suffix)
        while b - a > 1:
            mid = (a + b) // 2
            self.settings.say(f"bisect ops: suffix cuts: {cands[lo].name} compiled with the instructions up to "
                              f"{cands[mid].name}")
            if self.differs(cands[lo:mid + 1]) is not None:
                b = mid
            else:
                a = mid
        run = cands[lo:b + 1]
        users: dict[int, list[int]] = {}
        for i in run:
            for r in p.reads.get(i.index, ()):
                users.setdefault(r, []).append(i.index)
        below = closure([run[0].index], lambda k: users.get(k, ()))
        above = closure([run[-1].index], lambda k: p.reads.get(k, ()))
        group = [i for i in run if i.index in below and i.index in above]
        if group[-1] is not run[-1]:
            group.append(run[-1])  # the last one does not read it (a sibling XLA compiles with it)
        if len(group) < len(run) and self.feedable(group) and self.differs(group) is not None:
            return group
        return run

    def _made_of(self, group: Sequence[Instruction]) -> str:
        """What XLA makes of ``group`` compiled together (its optimized HLO's instructions) there and
        here; '' when not asked (not the CPU) or not readable: a note, never a failure."""
        from ._optimized_diff import parse_optimized

        try:
            sub = self.comp.extract(list(group))
            text_there, text_here = self.there.optimized(sub), self.here.optimized(sub)
            if text_there is None or text_here is None:
                return ""
            self.runs += 2
            there, here = _entry(parse_optimized(text_there)), _entry(parse_optimized(text_here))
        except Exception:  # noqa: BLE001 - the note is left out, the finding stands
            return ""
        head = f"compiled together, XLA's optimized HLO of {', '.join(g.name for g in group)}:"
        if here == there:
            return (f"{head} {there} in both environments (the same HLO: the difference is in the code each "
                    "release emits for it)")
        return f"{head} there {there}; here {here}"

    def _found(self, ins: Instruction, isolation: str, group: list[str], note: str) -> OpsBisection:
        operands = {id(x): self.values[id(x)] for x in ins.op.operands if id(x) in self.values}
        culprit = self.p.culprit(ins, operands, None, None)
        return OpsBisection("localised", culprit, isolation, group, self.runs, METHOD, note, first_divergent=ins.name)


def _said(c: OutputComparison) -> str:
    return (f"output {c.index}: {c.mismatches} of {int(np.prod(c.shape))} elements, max abs {c.max_abs:.3g}, "
            f"max rel {c.max_rel:.3g}")


def _entry(instrs: Sequence[Any]) -> str:
    """The entry computation's instructions of an optimized module (printed last), parameters left out:
    ``%dot = dot bf16[256,128]{1,0} (from t)``; what fusions hold, by the names they came from."""
    entry = next((i.computation for i in reversed(instrs) if not i.fused), "")
    own = [f"%{i.name} = {i.describe()}" + (f" (from {i.op_name})" if i.op_name else "")
           for i in instrs if i.computation == entry and i.opcode != "parameter"]
    fused = sorted({i.op_name for i in instrs if i.fused and i.op_name})
    return "; ".join(own) + (f" (fused: {', '.join(fused)})" if fused else "")
