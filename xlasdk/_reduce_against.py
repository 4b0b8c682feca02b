"""A small repro of a program bug (``reduce(BAD, against=GOOD)``, ``xlasdk reduce BAD --against
GOOD``): the instruction of BAD that first departs from its match in GOOD, cut out of the program
(out of the region it sits in, when it is inside a ``while`` body, a called function, a fusion or
a branch) with the values it reads as parameters, fed the GOOD run's values of them; beside it the
matching cut of GOOD, on the same inputs.

The search is the ops bisection against a second module (:func:`xlasdk.compare` with
``against=GOOD, bisect="ops"``: :mod:`xlasdk.reference._against`), level by level: at each level
(the modules, then the matched regions of a culprit that holds regions, both fed the good run's
values, a ``while`` iteration by iteration) the first matched instruction that departs on agreeing
values is found; when it holds regions the search goes inside, as the bisection does. The repro is
the deepest culprit (with the users it feeds when it reads nothing: a constant and what reads it)
and its match, each extracted with its inputs as parameters
(:meth:`~xlasdk.XlaComputation.extract`). A repro is kept only when both cuts, printed as HLO
text and loaded back from it, take the same inputs and :func:`xlasdk.compare` of the bad cut
against the good cut on them says DIVERGENCE (compare's tolerances: a repro never cries wolf).

The steps, each tried when the one before gives no repro:

1. the bisection at compare's tolerances, and the deepest culprit's cut;
2. the same with every difference counted (tolerances 0): a planted difference hidden, at compare's
   tolerances, under a larger value of the same output (a wrong scale of attention scores masked
   by -1e9) is still followed to its instruction; the cut is still judged at compare's tolerances;
3. the whole program of the deepest level reached (a region's program, on the good run's values);
4. the modules themselves, on the arguments (they differ: checked first).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ._where import where
from .errors import NotReproducedError, XlaSdkError

if TYPE_CHECKING:
    from ._reduce_graph import ReduceResult, ReduceStep
    from .builder import XlaOp
    from .program.computation import XlaComputation
    from .program.graph_import import Instruction
    from .reference._bisect_core import _Program
    from .reference._settings import CompareSettings
    from .runtime import CompileOptions

__all__ = ["AgainstRepro", "NotDifferent", "reduce_against", "reduce_to_repro"]

#: how many users of a culprit that reads nothing (a constant, an iota) the repro takes along
MAX_CHAIN = 3


class NotDifferent(XlaSdkError):
    """BAD and GOOD agree on the arguments (or cannot be told apart): nothing to reduce."""


@dataclass
class AgainstRepro:
    """What :func:`reduce_against` found: the bad cut and the good cut (loaded from their HLO text),
    the inputs both take, where it was found, and how."""

    bad: XlaComputation
    bad_text: str
    good: XlaComputation
    good_text: str
    arguments: list[np.ndarray[Any, Any]]
    path: str  # the bisection's path down to the repro's instruction ('' for a whole program)
    how: str  # which step gave it (the module's docstring): "cut", "cut (every difference)", ...
    compiles: int
    checked: int  # repros checked (cuts compared)
    timed_out: bool


class _NoCut(Exception):
    """Why a level or a cut cannot be had (the next step is tried)."""


@dataclass
class _Found:
    """The deepest culprit the walk reached: its level's two programs (with their arguments), the
    instruction and its match (None when it has no counterpart), the path down to it."""

    pb: _Program
    pg: _Program
    ins: Instruction | None
    m: Instruction | None
    path: list[str]
    programs: list[_Program]  # every program of the walk, whose compiles it counts

    @property
    def compiles(self) -> int:
        return sum(p.compiles for p in self.programs)


# -- the walk down the levels ------------------------------------------------------------------------------------
def _counterparts(pb: _Program, pg: _Program) -> dict[int, Instruction]:
    """By instruction index of ``pb``: its match in ``pg`` (by name, then structure), else, for one
    that makes outputs of ``pb``, what makes the outputs of ``pg`` at the same positions
    (:func:`xlasdk.reference._against.at_outputs`), else the guess its users' matches give
    (:func:`xlasdk.reference._against.inferred_by_users`)."""
    from .reference._against import at_outputs, inferred_by_users, match_instructions

    match, _, _ = match_instructions(pb.comp, pg.comp)
    outputs = at_outputs(pb.graph, pg.graph)
    placed: dict[int, Instruction] = {}  # without a match, making outputs: the maker of the other's there
    for ins in pb.instrs:
        slots = pb.slots.get(ins.index, [])
        if ins.index in match or not slots or any(id(n) not in outputs for n in slots):
            continue
        there = [outputs[id(n)] for n in slots]
        g = pg.graph.instruction_of(there[0])
        if [id(n) for n in pg.slots.get(g.index, [])] == [id(n) for n in there]:
            placed[ins.index] = g
    return {**inferred_by_users(pb.comp, match), **placed, **match}


def _good_node(pb: _Program, pg: _Program, x: XlaOp, cp: dict[int, Instruction]) -> XlaOp:
    """The node of ``pg`` that ``x`` (a value of ``pb``'s main) is matched with."""
    for k, q in enumerate(pb.graph.params):
        if q is x:
            return pg.graph.params[k]
    i = pb.graph.instruction_of(x)
    m = cp.get(i.index)
    slots_b = pb.slots.get(i.index, [])
    j = next((k for k, n in enumerate(slots_b) if n is x), None)
    if m is None or j is None or len(pg.slots.get(m.index, [])) != len(slots_b):
        raise _NoCut(f"{i.name}, which the cut reads, has no counterpart in the good program")
    return pg.slots[m.index][j]


def _good_values(pg: _Program, nodes: Sequence[XlaOp]) -> dict[int, np.ndarray[Any, Any]]:
    """The good run's values of ``nodes`` of ``pg`` (parameters: its arguments; the rest from one run)."""
    from .reference._bisect_core import _CutFailed

    out: dict[int, np.ndarray[Any, Any]] = {}
    for q, a in zip(pg.graph.params, pg.args, strict=True):
        out[id(q)] = np.asarray(a)
    todo = list({id(n): n for n in nodes if id(n) not in out}.values())
    if todo:
        try:
            out.update({id(n): v for n, v in zip(todo, pg.run(todo), strict=True)})
        except _CutFailed as e:
            raise _NoCut(f"the good program with those values exposed could not be run: {e}") from None
    return out


def _fed(pb: _Program, pg: _Program, ins: Instruction, m: Instruction, cp: dict[int, Instruction],
         ) -> tuple[dict[int, Any], dict[int, Any]]:
    """The good run's values of what ``ins`` (of ``pb``) and ``m`` (of ``pg``) read: by ``pb``'s
    nodes (their matches' values) and by ``pg``'s."""
    in_b = [x for x in pb.main_inputs(ins.op) if x.shape.is_array()]
    in_g = [y for y in pg.main_inputs(m.op) if y.shape.is_array()]
    pairs = [(x, _good_node(pb, pg, x, cp)) for x in in_b]
    values = _good_values(pg, [*in_g, *(y for _, y in pairs)])
    return {id(x): values[id(y)] for x, y in pairs}, {id(y): values[id(y)] for y in in_g}


def _value(fed: dict[int, Any], x: XlaOp) -> Any:
    try:
        return fed[id(x)]
    except KeyError:
        raise _NoCut("a value the region reads has no value from the good run") from None


def _region(p: _Program, owner: Instruction, k: int, lead: Sequence[Any], fed: dict[int, Any],
            ) -> tuple[XlaComputation, list[Any]]:
    from .reference._bisect_regions import region_computation

    comp, outside = region_computation(p.comp, p.graph, owner.op, owner.op.regions[k])
    return comp, [*lead, *(_value(fed, x) for x in outside)]


def _inside(pb: _Program, pg: _Program, ins: Instruction, m: Instruction, kind: str,
            ) -> tuple[str, _Program, _Program]:
    """The pair of region programs the bisection goes into (``ins`` of ``pb`` departs from ``m``
    of ``pg`` on agreeing values), both fed the good run's values: (label, bad side, good side)."""
    from .reference._bisect_regions import (
        MAX_ITERATIONS,
        _called_computation,
        run_region,
        side_program,
        taken_branch,
    )
    from .reference._bisect_regions_against import differ

    cp = _counterparts(pb, pg)
    fed_b, fed_g = _fed(pb, pg, ins, m, cp)
    if kind == "call":
        args_b = [_value(fed_b, x) for x in ins.op.operands]
        args_g = [_value(fed_g, y) for y in m.op.operands]
        return ("called function", side_program(pb, _called_computation(pb, ins), args_b),
                side_program(pg, _called_computation(pg, m), args_g))
    if kind == "while":
        if len(ins.op.operands) != len(m.op.operands):
            raise _NoCut(f"{m.name} carries other values than {ins.name}")
        state = [_value(fed_g, y) for y in m.op.operands]
        (cond_b, cx_b), (body_b, bx_b) = (_region(pb, ins, k, [], fed_b) for k in (0, 1))
        (cond_g, cx_g), (body_g, bx_g) = (_region(pg, m, k, [], fed_g) for k in (0, 1))
        run_cb, run_bb, run_cg, run_bg = (run_region(p, c) for p, c in ((pb, cond_b), (pb, body_b), (pg, cond_g),
                                                                      (pg, body_g)))
        for it in range(MAX_ITERATIONS):
            c_b, c_g = run_cb([*state, *cx_b]), run_cg([*state, *cx_g])
            if differ(pb, c_b, c_g):
                return (f"condition (iteration {it})", side_program(pb, cond_b, [*state, *cx_b]),
                        side_program(pg, cond_g, [*state, *cx_g]))
            if not bool(np.asarray(c_g[0])):
                raise _NoCut(f"no iteration of {ins.name} differs from {m.name}'s on the same carried values")
            b_b, b_g = run_bb([*state, *bx_b]), run_bg([*state, *bx_g])
            if differ(pb, b_b, b_g):
                return (f"body (iteration {it})", side_program(pb, body_b, [*state, *bx_b]),
                        side_program(pg, body_g, [*state, *bx_g]))
            state = b_g
        raise _NoCut(f"no iteration of the first {MAX_ITERATIONS} of {ins.name} differs")
    k, label = taken_branch(m.op, _value(fed_g, m.op.operands[0]))
    rb, rg = ins.op.regions[k], m.op.regions[k]
    lead_b = [_value(fed_b, x) for x in rb.bindings] if rb.bindings is not None else []
    lead_g = [_value(fed_g, y) for y in rg.bindings] if rg.bindings is not None else []
    comp_b, args_b = _region(pb, ins, k, lead_b, fed_b)
    comp_g, args_g = _region(pg, m, k, lead_g, fed_g)
    return label, side_program(pb, comp_b, args_b), side_program(pg, comp_g, args_g)


def _walk(pb: _Program, pg: _Program, say: Callable[[str], None], step: Callable[[str, int], None],
          deadline: float | None) -> _Found:
    """The deepest culprit of the ops bisection of ``pb`` against ``pg``, level by level."""
    from .reference._against import compare_programs
    from .reference._bisect_regions import MAX_DEPTH
    from .reference._bisect_regions_against import region_kind

    programs = [pb, pg]
    found = _Found(pb, pg, None, None, [], programs)
    path: list[str] = []
    for _ in range(MAX_DEPTH + 1):
        if deadline is not None and time.monotonic() > deadline:
            break
        r = compare_programs(pb, pg, MAX_DEPTH)  # this level only: the descent is the walk's own
        if r.status != "localised" or r.culprit is None:
            break
        ins = pb.instrs[r.culprit.index]
        m = _counterparts(pb, pg).get(ins.index)
        found = _Found(pb, pg, ins, m, list(path), programs)
        kind = region_kind(ins)
        if kind is None or m is None or region_kind(m) != kind or len(ins.op.regions) != len(m.op.regions):
            break
        try:
            label, qb, qg = _inside(pb, pg, ins, m, kind)
        except Exception as e:  # noqa: BLE001 - the culprit stands; the cut of it is tried
            say(f"reduce: the search stops at {ins.name}: {type(e).__name__}: {' '.join(str(e).split())[:200]}")
            break
        step(f"into {ins.name} > {label}", len(qb.instrs))
        path.append(f"{ins.name} > {label}")
        programs.extend((qb, qg))
        pb, pg = qb, qg
    return found


# -- the cut and its check -----------------------------------------------------------------------------------------
def _chain(p: _Program, ins: Instruction) -> list[Instruction]:
    """``ins`` with the constants it reads (a constant is part of the repro, not an input: a changed
    constant and what broadcasts it), and when those read no value (a constant, an iota) the users
    they feed, up to :data:`MAX_CHAIN`, until the cut reads one."""
    from .ops.sources import CONSTANT
    from .reference._bisect_core import _extract_inputs

    out = [ins]

    def constants() -> None:
        taken = {c.index for c in out}
        for x in _extract_inputs(p, out):
            c = p.graph.instruction_of(x)
            if c.index not in taken and c.op.opdef.same_op(CONSTANT):
                out.append(c)
                taken.add(c.index)
        out.sort(key=lambda c: c.index)

    constants()
    for _ in range(MAX_CHAIN):
        if _extract_inputs(p, out):
            break
        taken = {c.index for c in out}
        users = sorted((u for c in out for u in c.users if u.index not in taken), key=lambda u: u.index)
        if not users:
            break
        out.append(users[0])
        constants()
    return out


def _constants_read(chosen: Sequence[Instruction], cp: dict[int, Instruction]) -> dict[int, Instruction]:
    """The counterparts of the constants of ``chosen`` that another of ``chosen`` reads: what that
    one's counterpart reads at the same operand position (the matching pairs constants by value,
    so a changed constant may be paired with another of the good program's of the same value)."""
    out: dict[int, Instruction] = {}
    for u in chosen:
        mu = cp.get(u.index)
        if mu is None or len(mu.operands) != len(u.operands):
            continue
        for x, y in zip(u.operands, mu.operands, strict=True):
            if any(c.index == x.index for c in chosen) and x.index not in out and not x.operands:
                out[x.index] = y
    return out


@dataclass
class _Cut:
    bad: XlaComputation
    good: XlaComputation
    args: list[np.ndarray[Any, Any]]


def _cut(found: _Found) -> _Cut:
    """The culprit (:func:`_chain`) and its counterparts, extracted, with the good run's values of
    their inputs; refused (:class:`_NoCut`) when the two cuts do not take the same inputs."""
    from .reference._bisect_core import _extract_inputs

    pb, pg, ins = found.pb, found.pg, found.ins
    if ins is None:
        raise _NoCut("no instruction was found")
    cp = _counterparts(pb, pg)
    chosen_b = _chain(pb, ins)
    cp = {**cp, **_constants_read(chosen_b, cp)}
    if any(c.index not in cp for c in chosen_b):
        raise _NoCut(f"{', '.join(c.name for c in chosen_b if c.index not in cp)}: no counterpart in the good "
                     "program")
    chosen_g = [cp[c.index] for c in chosen_b]
    xs_b, xs_g = _extract_inputs(pb, chosen_b), _extract_inputs(pg, chosen_g)
    if len(xs_b) != len(xs_g):
        raise _NoCut("the two cuts read different numbers of values")
    values = _good_values(pg, [*xs_g, *(_good_node(pb, pg, x, cp) for x in xs_b)])
    args_b = [values[id(_good_node(pb, pg, x, cp))] for x in xs_b]
    args_g = [values[id(y)] for y in xs_g]
    if any(a.shape != b.shape or a.dtype != b.dtype or not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
           for a, b in zip(args_b, args_g, strict=True)):
        raise _NoCut("the two cuts' inputs are not the same values")
    return _Cut(pb.comp.extract([c.name for c in chosen_b]), pg.comp.extract([c.name for c in chosen_g]), args_b)


def _whole(found: _Found) -> _Cut:
    pb, pg = found.pb, found.pg
    if len(pb.args) != len(pg.args) or any(
            a.shape != b.shape or a.dtype != b.dtype or not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
            for a, b in zip(pb.args, pg.args, strict=True)):
        raise _NoCut("the two programs' arguments are not the same values")
    return _Cut(pb.comp, pg.comp, [np.asarray(a) for a in pb.args])


def _printed(comp: XlaComputation) -> tuple[str, XlaComputation]:
    from .program.computation import XlaComputation

    text = comp.as_hlo_text()
    return text, XlaComputation.from_hlo_text(text)


def _differs(bad: XlaComputation, good: XlaComputation, args: Sequence[Any], settings: CompareSettings) -> str | None:
    """``compare``'s report of ``bad`` against ``good`` on ``args`` when it says DIVERGENCE, else None."""
    from .reference import compare
    from .reference._orders import verdict

    report = compare(bad, list(args), against=good, settings=replace(settings, progress=None))
    return str(report) if verdict(report) == "DIVERGENCE" else None


# -- the entry point -----------------------------------------------------------------------------------------------
def reduce_against(bad: XlaComputation, good: XlaComputation, args: Sequence[np.ndarray[Any, Any]],
                   settings: CompareSettings, options: CompileOptions | None, deadline: float | None,
                   say: Callable[[str], None], step: Callable[[str, int], None]) -> AgainstRepro:
    """The smallest repro the steps of the module's docstring find; :class:`NotDifferent` when
    ``bad`` and ``good`` agree on ``args`` (compare's verdict is not DIVERGENCE). ``say``: a line
    of text per event of the search; ``step``: (what was done, the bad side's instruction count)
    for each level gone into and for the repro kept."""
    from ._reduce_text import count_instructions
    from .reference._bisect_core import _Program

    n_b, n_g = len(bad.program_shape().parameter_shapes()), len(good.program_shape().parameter_shapes())
    if n_b != n_g:
        raise XlaSdkError(f"reduce: the module compared against, {good.name!r}, takes {n_g} arguments, "
                          f"{bad.name!r} takes {n_b}")
    if _differs(bad, good, args, settings) is None:
        raise NotDifferent(f"nothing to reduce: {bad.name!r} and {good.name!r} agree on the arguments (compare "
                           "finds no divergence)")
    compiles, checked = 2, 1
    bt, bc = _printed(bad)
    gt, gc = _printed(good)
    most = count_instructions(bt)
    exact = replace(settings, rtol=0.0, atol=0.0, ulps=None)
    deepest: _Found | None = None

    def out_of_time() -> bool:
        return deadline is not None and time.monotonic() > deadline

    for how, s in (("cut", settings), ("cut (every difference followed)", exact)):
        if out_of_time():
            break
        say(f"reduce: the ops bisection against {good.name!r}" + (", every difference followed" if s is exact else ""))
        found = _walk(_Program(bad, args, s, options, need_reference=False),
                      _Program(good, args, s, options, need_reference=False), say, step, deadline)
        if deepest is None or len(found.path) > len(deepest.path):
            deepest = found
        where = " > ".join([*found.path, found.ins.name]) if found.ins is not None else ""
        try:
            cut = _cut(found)
            compiles, checked = compiles + found.compiles + 2, checked + 1
            got = _check(cut, settings, most)
        except _NoCut as e:
            compiles += found.compiles
            say(f"reduce: no cut at {where or 'the top'}: {e}")
            continue
        if got is not None:
            step(how, len(got[1].instructions()))
            return AgainstRepro(got[1], got[0], got[3], got[2], cut.args, where, how, compiles, checked, False)
        say(f"reduce: the cut at {where} gives the good cut's values on the good run's inputs")
    if deepest is not None and deepest.path and not out_of_time():
        try:
            cut = _whole(deepest)
            compiles, checked = compiles + 2, checked + 1
            got = _check(cut, settings, most)
            if got is None:
                say(f"reduce: the program of {' > '.join(deepest.path)} gives the good one's values")
            else:
                step("the whole program of the deepest region", len(got[1].instructions()))
                return AgainstRepro(got[1], got[0], got[3], got[2], cut.args, " > ".join(deepest.path),
                                    "the whole program of the deepest region", compiles, checked, False)
        except _NoCut as e:
            say(f"reduce: no repro of the deepest region's whole program: {e}")
    return AgainstRepro(bc, bt, gc, gt, [np.asarray(a) for a in args], "", "the modules themselves", compiles,
                        checked, out_of_time())


def _check(cut: _Cut, settings: CompareSettings, most: int) -> tuple[str, XlaComputation, str, XlaComputation] | None:
    """Both cuts printed as HLO text and loaded back from it (so what is written is what was checked),
    when the bad one diverges from the good one on the cut's inputs; else None. Refused
    (:class:`_NoCut`) when the bad cut counts more than ``most`` instructions (the module's own)."""
    from ._reduce_text import count_instructions

    try:
        bt, bc = _printed(cut.bad)
        gt, gc = _printed(cut.good)
    except XlaSdkError as e:
        raise _NoCut(f"a cut cannot be printed and loaded back: {e}") from None
    if count_instructions(bt) > most:
        raise _NoCut(f"the cut counts {count_instructions(bt)} instructions, more than the module's {most}")
    try:
        differs = _differs(bc, gc, cut.args, settings)
    except XlaSdkError as e:  # a cut that cannot be compiled or run proves nothing
        raise _NoCut(f"the cuts cannot be compared: {type(e).__name__}: {' '.join(str(e).split())[:200]}") from None
    return (bt, bc, gt, gc) if differs is not None else None


def _loaded(what: str, value: Any) -> XlaComputation:
    from .program.computation import XlaComputation

    if isinstance(value, (str, os.PathLike)):
        from .formats.load import load_computation

        return load_computation(os.fspath(value))
    if not isinstance(value, XlaComputation):
        raise XlaSdkError(f"reduce: {what}: expected an XlaComputation or the path of a module file, got "
                          f"{type(value).__name__}{where()}")
    return value


def reduce_to_repro(computation: Any, against: Any, arguments: Sequence[Any] | None, seed: int,
                    max_time: float | None, rtol: float | None, atol: float | None, device: Any,
                    progress: Callable[[ReduceStep], None] | None, started: float) -> ReduceResult:
    """:func:`xlasdk.reduce` with ``against=GOOD`` (its arguments checked there but these)."""
    from ._reduce_graph import ReduceResult, ReduceStep, _arguments, _random_arguments
    from ._reduce_partitions import refuse_against
    from ._reduce_text import count_instructions
    from .reference._settings import CompareSettings
    from .runtime.per_partition import PerPartitionPlan

    if isinstance(computation, PerPartitionPlan):
        computation = computation.computation
    bad, good = _loaded("the module", computation), _loaded("against", against)
    refuse_against(bad, good)
    args = _arguments(bad, arguments) if arguments is not None else _random_arguments(bad, seed)
    settings = CompareSettings(device=device, rtol=rtol, atol=atol)
    deadline = None if max_time is None else started + max_time
    history: list[ReduceStep] = []

    def step(strategy: str, instructions: int) -> None:
        history.append(ReduceStep(len(history) + 1, strategy, instructions, 0, 0, time.monotonic() - started))
        if progress is not None:
            progress(history[-1])

    try:
        r = reduce_against(bad, good, args, settings, settings.flag_options(), deadline, lambda line: None, step)
    except NotDifferent as e:
        raise NotReproducedError(f"reduce: {e}{where()}") from None
    before = count_instructions(bad.as_hlo_text())  # every computation's, regions' too
    after = count_instructions(r.bad_text)
    return ReduceResult(
        computation=r.bad, hlo_text=r.bad_text, arguments=r.arguments, condition=f"differs from {good.name!r}",
        instructions_before=before, instructions_after=after, steps=len(history), candidates=r.checked,
        compiles=r.compiles, cache_hits=0, unprintable=0, invalid=0, wall_s=time.monotonic() - started,
        timed_out=r.timed_out, history=history, good_computation=r.good, good_hlo_text=r.good_text, located=r.path)
