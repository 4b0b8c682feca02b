"""``bisect="ops"`` against a second module inside regions: when the instruction that departs from
its match (:mod:`._against`) is a ``while``, an ``if``/``case`` or a ``func.call`` (a fusion of an
optimized dump, a JAX private function) whose operands agree with their matches, the search goes on
inside it, as it does against the reference (:mod:`._bisect_regions`).

The matched region of each side (the same region of the instruction and of its match, of the same
kind) becomes a program of its own (:func:`~._bisect_regions.region_computation`), each side run on
its own device with its own options, and both are fed the *good* run's values: its values of the
operands (the bad side's operands agree with them, within the tolerances, or the search would not
have stopped here), so a difference inside is made there and not carried in. A ``while`` runs
iteration by iteration from the good run's carried state: the first iteration whose condition or
body gives other values on the two sides from the same carried values is compared as a pair of
programs (the same matching, by name then by structure, and the same descent below it, down to
:data:`~._bisect_regions.MAX_DEPTH` regions); a branch is the one the good run's predicate or index
takes; a call, the two called functions on the call's operands. The report's path reads
``while.6 > body (iteration 3) > subtract.12`` (iterations from 0; names inside a region are those
of the region's program, the HLO name it came from in each culprit's ``op_name``).

A side that runs elsewhere (:class:`RunsElsewhere`: the other Python environment of
``--against-python``) runs its region programs and makes its pair sides itself; the search is the same.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ._bisect_regions import (
    _CONTROL,
    MAX_DEPTH,
    MAX_ITERATIONS,
    _called_computation,
    region_computation,
    run_region,
    side_program,
    taken_branch,
)

if TYPE_CHECKING:
    from ..builder import Region, XlaOp
    from ..program.computation import XlaComputation
    from ..program.graph_import import Instruction
    from ._bisect_core import OpsBisection, _Program

__all__: list[str] = []

#: what a pair's inner report says it was fed
FED_GOOD = "the good run's values"

#: the search of a pair of region programs: (bad side, good side, depth) -> its bisection
Search = Callable[["_Program", "_Program", int], "OpsBisection"]


def region_kind(ins: Instruction) -> str | None:
    """``"while"``, ``"if"``, ``"case"`` or ``"call"`` (a ``func.call``: a fusion or a called
    function) for an instruction with regions the searches go into; None for any other."""
    row = ins.op.opdef.table_row
    kind = _CONTROL.get(row) if row is not None else None
    return kind if kind is not None else "call" if ins.op.opcode == "func.call" else None


class _NoDescent(Exception):
    """Why the search cannot go inside a pair of regions (said in the report; the culprit stands)."""


class RunsElsewhere(abc.ABC):
    """A side whose programs run somewhere else than this process's devices (another Python
    environment: :class:`~._other_env._ThereProgram`): it runs its regions' programs itself and
    makes its own side of a pair of region programs."""

    @abc.abstractmethod
    def region_runner(self, comp: XlaComputation) -> Callable[[Sequence[Any]], list[np.ndarray[Any, Any]]]:
        """``comp`` (a region's program) as a function of its arguments giving its results."""

    @abc.abstractmethod
    def side(self, comp: XlaComputation, args: Sequence[Any]) -> _Program:
        """``comp`` on ``args`` as this side of a pair of region programs."""


def _runner(p: _Program, comp: XlaComputation) -> Callable[[Sequence[Any]], list[np.ndarray[Any, Any]]]:
    return p.region_runner(comp) if isinstance(p, RunsElsewhere) else run_region(p, comp)


def _side(p: _Program, comp: XlaComputation, args: Sequence[Any]) -> _Program:
    return p.side(comp, args) if isinstance(p, RunsElsewhere) else side_program(p, comp, args)


def descend_pair(pb: _Program, pg: _Program, ins: Instruction, m: Instruction, fed_b: dict[int, Any],
                 fed_g: dict[int, Any], result: OpsBisection, depth: int, search: Search) -> OpsBisection:
    """``result`` (``ins`` of ``pb`` departs from ``m`` of ``pg`` on agreeing values) with the search
    carried inside their regions when both have them, of one kind: ``result.region``/``result.inside``.
    ``fed_b``: by ``pb``'s nodes, the good run's values of their matches; ``fed_g``: by ``pg``'s
    nodes, its values (what ``m`` reads and is not there is read with one more compile). ``search``:
    the search of a pair of region programs (the bad side, the good side, their depth):
    :func:`._against.compare_programs` with its tolerances to blame."""
    kind = region_kind(ins)
    if kind is None or depth >= MAX_DEPTH:
        return result
    say = pb.settings.say
    try:
        if region_kind(m) != kind or len(ins.op.regions) != len(m.op.regions):
            raise _NoDescent(f"its match {m.name} ({m.opcode}) is not a {kind} of as many regions")
        missing = [y for y in pg.main_inputs(m.op) if y.shape.is_array() and id(y) not in fed_g]
        if missing:
            fed_g.update({id(y): v for y, v in zip(missing, pg.run(missing), strict=True)})
        if kind == "while":
            region, inside = _into_whiles(pb, pg, ins, m, fed_b, fed_g, depth, search)
        elif kind == "call":
            comp_b, comp_g = _called_computation(pb, ins), _called_computation(pg, m)
            args_b = [_value(fed_b, x, ins) for x in ins.op.operands]
            args_g = [_value(fed_g, y, m) for y in m.op.operands]
            say(f"bisect ops: {ins.name}: inside its called function")
            region, inside = "called function", _pair(pb, pg, comp_b, comp_g, args_b, args_g, depth,
                                                         search)
        else:
            region, inside = _into_branches(pb, pg, ins, m, fed_b, fed_g, depth, search)
    except Exception as e:  # noqa: BLE001 - the culprit stands; what stopped the descent is said
        why = str(e) if isinstance(e, _NoDescent) else f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
        result.note = (result.note + "; " if result.note else "") + f"the search could not go inside {ins.name}: {why}"
        return result
    result.region, result.inside, result.inside_on = region, inside, FED_GOOD
    return result


def _value(fed: dict[int, Any], x: XlaOp, owner: Instruction) -> Any:
    try:
        return fed[id(x)]
    except KeyError:
        raise _NoDescent(f"a value {owner.name} reads has no value from the good run (it has no match)") from None


def _region_args(p: _Program, owner: Instruction, region: Region, lead: Sequence[Any], fed: dict[int, Any],
                 ) -> tuple[XlaComputation, list[Any]]:
    """``region`` of ``owner`` as a program of its own and its arguments: ``lead`` (the region's own
    arguments), then the good run's values of the outer values it reads."""
    comp, outside = region_computation(p.comp, p.graph, owner.op, region)
    return comp, [*lead, *(_value(fed, x, owner) for x in outside)]


def _pair(pb: _Program, pg: _Program, comp_b: XlaComputation, comp_g: XlaComputation, args_b: Sequence[Any],
          args_g: Sequence[Any], depth: int, search: Search) -> OpsBisection:
    """The bad region's program against the good one's (``search``: :func:`._against.compare_programs`),
    its compiles counted in ``pb``."""
    qb, qg = _side(pb, comp_b, args_b), _side(pg, comp_g, args_g)
    r = search(qb, qg, depth + 1)
    pb.compiles += r.compiles
    return r


def differ(p: _Program, got: Sequence[np.ndarray[Any, Any]], want: Sequence[np.ndarray[Any, Any]]) -> bool:
    """Whether two runs' values differ at ``p``'s settings' tolerances (another shape or element type
    differs)."""
    from ._report import compare_one

    s = p.settings
    if len(got) != len(want):
        return True
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or g.dtype != w.dtype or not compare_one(0, g, w, s.rtol, s.atol, 0.0, s.ulps).ok:
            return True
    return False


def _into_whiles(pb: _Program, pg: _Program, ins: Instruction, m: Instruction, fed_b: dict[int, Any],
                 fed_g: dict[int, Any], depth: int, search: Search) -> tuple[str, OpsBisection]:
    from ._bisect_core import OpsBisection

    if len(ins.op.operands) != len(m.op.operands):
        raise _NoDescent(f"its match {m.name} carries {len(m.op.operands)} values, it carries {len(ins.op.operands)}")
    say = pb.settings.say
    state = [_value(fed_g, y, m) for y in m.op.operands]  # the good run's carried values, fed to both
    (cond_b, cx_b), (body_b, bx_b) = (_region_args(pb, ins, r, [], fed_b) for r in ins.op.regions)
    (cond_g, cx_g), (body_g, bx_g) = (_region_args(pg, m, r, [], fed_g) for r in m.op.regions)
    run_cb, run_bb = _runner(pb, cond_b), _runner(pb, body_b)
    run_cg, run_bg = _runner(pg, cond_g), _runner(pg, body_g)
    for it in range(MAX_ITERATIONS):
        if it & (it - 1) == 0:  # iterations 0, 1, 2, 4, 8...: a long loop does not flood the progress
            say(f"bisect ops: {ins.name}, iteration {it}: its condition and body, bad and good, on the same values")
        c_b, c_g = run_cb([*state, *cx_b]), run_cg([*state, *cx_g])
        if differ(pb, c_b, c_g):
            return f"condition (iteration {it})", _pair(pb, pg, cond_b, cond_g, [*state, *cx_b], [*state, *cx_g],
                                                        depth, search)
        if not bool(np.asarray(c_g[0])):
            return (f"iterations 0..{it - 1}", OpsBisection(
                "not localised", note=f"each of the {it} iterations of {ins.name}'s condition and body gives the "
                                      f"values of {m.name}'s on the same carried values: their differences, each "
                                      "within tolerance, add up over the iterations, or the loop differs only "
                                      "compiled whole; nothing inside is blamed"))
        b_b, b_g = run_bb([*state, *bx_b]), run_bg([*state, *bx_g])
        if differ(pb, b_b, b_g):
            return f"body (iteration {it})", _pair(pb, pg, body_b, body_g, [*state, *bx_b], [*state, *bx_g], depth,
                                                   search)
        state = b_g
    return (f"iterations 0..{MAX_ITERATIONS - 1}", OpsBisection(
        "not localised", note=f"no iteration of the first {MAX_ITERATIONS} differs; the search stopped there"))


def _into_branches(pb: _Program, pg: _Program, ins: Instruction, m: Instruction, fed_b: dict[int, Any],
                   fed_g: dict[int, Any], depth: int, search: Search) -> tuple[str, OpsBisection]:
    k, label = taken_branch(m.op, _value(fed_g, m.op.operands[0], m))
    rb, rg = ins.op.regions[k], m.op.regions[k]
    lead_b = [_value(fed_b, x, ins) for x in rb.bindings] if rb.bindings is not None else []
    lead_g = [_value(fed_g, y, m) for y in rg.bindings] if rg.bindings is not None else []
    comp_b, args_b = _region_args(pb, ins, rb, lead_b, fed_b)
    comp_g, args_g = _region_args(pg, m, rg, lead_g, fed_g)
    pb.settings.say(f"bisect ops: {ins.name}: inside its {label}")
    return label, _pair(pb, pg, comp_b, comp_g, args_b, args_g, depth, search)
