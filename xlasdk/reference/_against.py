"""Comparing a program with a second module that computes what it should (``compare(...,
against=GOOD)``, ``xlasdk compare BAD.hlo --against GOOD.hlo``) and localising where they part
(``bisect="ops"``): a program bug (a ``multiply`` turned into ``add`` deep in a backward pass) that
the reference evaluator cannot see, since it evaluates the buggy program too.

The instructions of the two modules are matched by name (same name, same shape), then by structure
(same opcode and shape reading matched instructions; parameters by number). Both run on the device
once each with every matched value exposed; the culprit is the first instruction, in topological
order, whose value departs from its match while every value it reads agrees with its match (an
error carried along a chain never counts against an op that only carries it), or an instruction
without a match that reads agreeing values and whose users depart. When it is a ``while``, a call
(a fusion) or a conditional, the search goes on inside its matched regions, both fed the good run's
values, a ``while`` iteration by iteration (:mod:`._bisect_regions_against`). A search that stops
short of an instruction at compare's tolerances (a difference hidden under a larger value of the
same output) runs again with every difference counted; what it blames must still depart from its
match at compare's tolerances on exactly the same values, or the first result stands.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import CompareArgumentError
from ..ops.sources import CONSTANT

if TYPE_CHECKING:
    from ..builder import XlaOp
    from ..program.computation import XlaComputation
    from ..program.graph_import import Instruction, InstructionGraph
    from ..runtime import CompileOptions
    from ._settings import CompareSettings

__all__ = ["match_instructions"]

_METHOD = "the two modules' values compared instruction by instruction (matched by name, then by structure)"


def match_instructions(bad: XlaComputation, good: XlaComputation) -> tuple[dict[int, Instruction], int, int]:
    """For each instruction of ``bad`` (by index) its match in ``good``, and how many were matched
    by name (an ``origin`` naming it counted among them) and by structure.

    Where the dumps carry XLA's ``origin={...}`` (the original value: :mod:`._origin`), an
    instruction of ``bad`` matches first the one of ``good`` its array's origin names, or that
    carries the same origin, or whose origin names it (``good`` optimized from ``bad``); then
    by name; then by structure (same opcode and shape, reading matched instructions). A constant
    is then paired with the constant its users' matches read at its operand position, whatever
    its value (so a changed constant departs from the one it replaced), else by value.

    Raises
    ------
    FormatError
        An ``origin`` attribute of another form than XLA writes.
    """
    from ._origin import origins

    g_ins = good.instructions()
    by_name = {i.name: i for i in g_ins}
    g_params = {i.op.extra: i for i in g_ins if i.opcode == "parameter"}
    o_bad, o_good = origins(bad), origins(good)
    by_origin: dict[str, Instruction] = {}  # good's instructions by the original array they hold
    for gi in g_ins:
        arr = o_good[gi.name].array() if gi.name in o_good else None
        if arr is not None and not arr.shape_index:
            by_origin.setdefault(arr.instruction, gi)

    def candidates(ins: Instruction) -> list[Instruction | None]:
        if ins.opcode == "parameter":
            return [g_params.get(ins.op.extra)]
        if ins.name in o_bad:  # its origin is what it is: a name that happens to agree is not asked
            arr = o_bad[ins.name].array()
            if arr is None or arr.shape_index:
                return []
            return [by_name.get(arr.instruction), by_origin.get(arr.instruction)]
        return [by_origin.get(ins.name), by_name.get(ins.name)]

    out: dict[int, Instruction] = {}
    named = structural = 0
    by_key: dict[tuple[Any, ...], list[Instruction]] = {}
    g_index = {id(i.op): i for i in g_ins}

    def key(ins: Instruction, matched: dict[int, Any]) -> tuple[Any, ...] | None:
        srcs = []
        for x in ins.operands:
            m = matched.get(x.index)
            if m is None:
                return None
            srcs.append(m)
        return (ins.opcode, str(ins.shape), tuple(srcs), tuple(ins.operand_indices), _literal(ins))

    g_matched = {i.index: i.index for i in g_ins}
    for gi in g_ins:
        k = key(gi, g_matched)
        if k is not None:
            by_key.setdefault(k, []).append(gi)
    used: set[int] = set()
    for ins in bad.instructions():
        cand = next((c for c in candidates(ins) if c is not None and str(c.shape) == str(ins.shape)
                     and c.index not in used and (ins.opcode != "parameter" or c.opcode == "parameter")
                     and _literal(c) == _literal(ins)), None)
        if cand is not None:
            out[ins.index] = cand
            used.add(cand.index)
            named += 1
            continue
        k = key(ins, {i: m.index for i, m in out.items()})
        for gi in by_key.get(k, []) if k is not None else []:
            if gi.index not in used:
                out[ins.index] = gi
                used.add(gi.index)
                structural += 1
                break
    del g_index
    _constants_by_position(bad.instructions(), out)
    return out, named, structural


def _constants_by_position(bad_ins: Sequence[Instruction], out: dict[int, Instruction]) -> None:
    """Pairs each constant of ``bad`` with the constant its first matched user's match (same opcode,
    as many operands) reads at the same operand position, whatever its value: the value matching
    above pairs a changed constant (``constant(2)`` where ``constant(2.82842708)`` was) with an
    unrelated constant of the same value, which agrees and so hides it. A constant of ``good``
    taken so is no longer the value match of another constant of ``bad`` (that one is matched by
    its own users, or left to the users' guess)."""
    def constant(i: Instruction) -> bool:
        return i.op.opdef.same_op(CONSTANT)

    want: dict[int, Instruction] = {}
    for u in bad_ins:
        mu = out.get(u.index)
        if mu is None or mu.opcode != u.opcode or len(mu.operands) != len(u.operands):
            continue
        for x, y in zip(u.operands, mu.operands, strict=True):
            if x.index not in want and constant(x) and constant(y) and str(x.shape) == str(y.shape):
                want[x.index] = y
    claimed = {y.index for y in want.values()}
    for i in [i for i, m in out.items() if i not in want and m.index in claimed]:
        del out[i]
    out.update(want)


def inferred_by_users(bad: XlaComputation, match: dict[int, Instruction]) -> dict[int, Instruction]:
    """For instructions of ``bad`` without a match, the instruction of the other module at the same
    operand position of a matched (or so inferred) user's match, of the same shape: a guess (an
    optimized module renames, copies and re-tuples what it reads) used only as evidence that a value
    agrees, never to blame one."""
    out: dict[int, Instruction] = {}
    for ins in reversed(bad.instructions()):
        m = match.get(ins.index) or out.get(ins.index)
        if m is None or len(ins.operands) != len(m.operands):
            continue
        for x, y in zip(ins.operands, m.operands, strict=True):
            if x.index in match or x.index in out or str(x.shape) != str(y.shape):
                continue
            out[x.index] = y  # one value of the other module may be read under several names here
    return out


def at_outputs(bad: InstructionGraph, good: InstructionGraph) -> dict[int, XlaOp]:
    """By id of each array output of ``bad`` (a program or a region's program): the output of
    ``good`` at the same position, of the same shape, as compare pairs outputs. The counterpart of
    an output made by an instruction without a match (an op changed where its only user is the
    root: a loop body's tuple, a fusion's root), whose value would else be exposed nowhere; none
    when the two programs have other numbers of outputs."""
    outs_b, outs_g = list(bad.outputs), list(good.outputs)
    out: dict[int, XlaOp] = {}
    if len(outs_b) != len(outs_g):
        return out
    for x, y in zip(outs_b, outs_g, strict=True):
        if x.shape.is_array() and str(x.shape) == str(y.shape):
            out.setdefault(id(x), y)
    return out


def _literal(ins: Instruction) -> bytes | None:
    """A constant's value (constants match by value: an optimized module renames and reuses them);
    None for one its kind's reader does not read (complex pairs, ``i4``)."""
    from .._mlir_attrs import DenseElements
    from ..errors import GraphImportError

    if not ins.op.opdef.same_op(CONSTANT):
        return None
    try:
        value = ins.op.attr("value")
    except GraphImportError:
        return None
    return np.ascontiguousarray(value.value()).tobytes() if isinstance(value, DenseElements) else None


def compare_modules(bad: XlaComputation, good: XlaComputation, args: Sequence[Any], settings: CompareSettings,
                    options: CompileOptions | None) -> Any:
    """``bisect="ops"`` against a second module (see the module's docstring), both run on the
    settings' device with ``options`` and compared at its tolerances: an
    :class:`~xlasdk.reference.bisect.OpsBisection`. When the instruction named is a ``while``, a
    call (a fusion), an ``if`` or a ``case`` whose operands agree, the search goes on inside it,
    the matched regions of both modules fed the good run's values
    (:mod:`._bisect_regions_against`)."""
    from ._bisect_core import _Program

    if len(bad.instruction_graph().params) != len(good.instruction_graph().params):
        raise CompareArgumentError(f"compare: the module compared against takes {len(good.instruction_graph().params)} "
                          f"arguments, {bad.name!r} takes {len(bad.instruction_graph().params)}")
    pb = _Program(bad, args, settings, options, need_reference=False)
    pg = _Program(good, args, settings, options, need_reference=False)
    r = compare_programs(pb, pg)
    stop = _stop(r)
    if stop is None:
        return r
    # A difference hidden, at compare's tolerances, under a larger value of the same output (a wrong
    # attention scale under the -1e9 of the mask): the search again, every difference counted, so it
    # is followed down to the instruction that makes it; what it blames must still depart at compare's
    # tolerances from its match on exactly the same values, or nothing is blamed.
    settings.say("bisect ops: not localised at compare's tolerances; the search again with every difference "
                 "counted")
    exact = replace(settings, rtol=0.0, atol=0.0, ulps=None)
    e = compare_programs(_Program(bad, args, exact, options, need_reference=False),
                         _Program(good, args, exact, options, need_reference=False), blame=settings)
    if _stop(e) is not None:
        r.compiles += e.compiles
        r.note = (r.note + "; " if r.note else "") + (
            "followed with every difference counted, the search finds no instruction that departs from its "
            "match at compare's tolerances on the same values either")
        return r
    e.compiles += r.compiles
    e.method = _METHOD + "; every difference counted (tolerances 0) to follow the values down"
    e.note = (f"at compare's tolerances the search stopped at {stop} (not localised): the difference is "
              "hidden there under a larger value of the same output; every difference counted, it is followed "
              "to an instruction that departs at compare's tolerances from its match on exactly the same values"
              + ("; " + e.note if e.note else ""))
    return e


def _stop(r: Any) -> str | None:
    """Where a search that did not get down to an instruction stopped (its path, or 'the top'); None
    when it names an instruction without regions gone into."""
    last = r
    while last.inside is not None:
        last = last.inside
    if last.status == "localised":
        return None
    return r.path or "the top"


def compare_programs(pb: Any, pg: Any, depth: int = 0, *, blame: CompareSettings | None = None) -> Any:
    """The first instruction of ``pb`` (a ``_Program``, the bad side, with its arguments) whose value
    departs from its match in ``pg`` (the good side) while every value it reads agrees, each side
    run on its own device with its own options, one compile each with every matched value exposed;
    then inside it, when it holds regions (``depth``: how deep this search is already).

    ``blame``: other tolerances than ``pb``'s settings' at which an instruction without regions (or
    the users of one without a match) must depart to be blamed; one that departs only at ``pb``'s
    (every difference counted) is passed over, and what reads it then reads a differing value."""
    from ._bisect_core import OpsBisection, _CutFailed, _summary
    from ._bisect_regions_against import descend_pair, region_kind
    from ._report import compare_one

    settings = pb.settings
    say, rtol, atol, ulps = settings.say, settings.rtol, settings.atol, settings.ulps
    j = blame if blame is not None else settings
    bad, good = pb.comp, pg.comp
    match, named, structural = match_instructions(bad, good)
    say(f"bisect ops: {named} instructions matched by name, {structural} by structure; one compile of each "
        f"{'module' if depth == 0 else 'region'} with every matched value exposed")
    guessed = inferred_by_users(bad, match)
    outputs = at_outputs(pb.graph, pg.graph)
    pairs: list[tuple[Any, Any]] = []
    guesses: set[int] = set()  # ids of the values paired by a guess: agreement counts, a difference does not
    placed: set[int] = set()  # ids of outputs without a match paired by position with the other's outputs
    for ins in pb.instrs[pb.nparams:]:
        at = [(n, outputs[id(n)]) for n in pb.slots[ins.index] if id(n) in outputs]
        if ins.index not in match and at:
            pairs.extend(at)
            placed.update(id(n) for n, _ in at)
            continue
        m = match.get(ins.index) or guessed.get(ins.index)
        if m is not None and len(pb.slots[ins.index]) == len(pg.slots[m.index]):
            pairs.extend(zip(pb.slots[ins.index], pg.slots[m.index], strict=True))
            if ins.index not in match:
                guesses.update(id(n) for n in pb.slots[ins.index])
    try:
        got_b = pb.run([b for b, _ in pairs]) if pairs else []
        got_g = pg.run([g for _, g in pairs]) if pairs else []
    except _CutFailed as e:
        return OpsBisection("not localised", compiles=pb.compiles + pg.compiles, method=_METHOD,
                            note=f"a {'module' if depth == 0 else 'region'} with every matched value exposed could "
                                 f"not be compiled or run ({e})")
    val_b = {id(b): v for (b, _), v in zip(pairs, got_b, strict=True)}
    val_g = {id(b): v for (b, _), v in zip(pairs, got_g, strict=True)}
    own_g = {id(g): v for (_, g), v in zip(pairs, got_g, strict=True)}  # the good side's values, by its nodes
    for q, a in zip(pb.graph.params, pb.args, strict=True):
        val_b[id(q)] = a
    for q, qg, a in zip(pb.graph.params, pg.graph.params, pg.args, strict=True):
        val_g[id(q)] = own_g[id(qg)] = a
    differs: dict[int, bool] = {}

    def departs(node: Any) -> bool | None:
        if id(node) not in val_b:
            return None
        if id(node) not in differs:
            g, w = np.asarray(val_b[id(node)]), np.asarray(val_g[id(node)])
            differs[id(node)] = g.shape != w.shape or g.dtype != w.dtype or not compare_one(
                0, g, w, rtol, atol, 0.0, ulps).ok
        if differs[id(node)] and id(node) in guesses:
            return None  # a guessed pair that differs proves nothing (the guess may be wrong)
        return differs[id(node)]

    def blamed(node: Any) -> bool:
        """Whether ``node``'s difference counts against it at the ``blame`` tolerances."""
        if blame is None:
            return bool(departs(node))
        g, w = np.asarray(val_b[id(node)]), np.asarray(val_g[id(node)])
        return bool(departs(node)) and (g.shape != w.shape or g.dtype != w.dtype or not compare_one(
            0, g, w, j.rtol, j.atol, 0.0, j.ulps).ok)

    what = "module" if depth == 0 else "region"
    for ins in pb.instrs[pb.nparams:]:
        slots = pb.slots[ins.index]
        if not slots:
            continue
        inputs = [x for x in pb.main_inputs(ins.op) if x.shape.is_array()]
        fed_right = all(departs(x) is False for x in inputs)
        if ins.index not in match:
            if ins.index in guessed and all(departs(n) is False for n in slots):
                continue  # agrees with its users' counterpart's operand: nothing to blame here
            users_depart = any(blamed(n) for u in ins.users if u.index in match for n in pb.slots[u.index])
            out_slot = next((n for n in slots if id(n) in placed and blamed(n)), None)
            if fed_right and (users_depart or out_slot is not None):
                culprit = pb.culprit(ins, {id(x): val_b[id(x)] for x in inputs}, None, None)
                which = "its users' depart" if users_depart else (
                    f"the {what}'s output it makes departs from the one at the same position of the {what} "
                    "compared against")
                return OpsBisection("localised", culprit, "", [], pb.compiles + pg.compiles, _METHOD,
                                    first_divergent=ins.name,
                                    note=f"{ins.name} ({ins.opcode}) has no counterpart in the {what} compared "
                                         f"against; the values it reads agree and {which}")
            continue
        bad_slot = next((n for n in slots if departs(n)), None)
        if bad_slot is None:
            continue
        if not fed_right:
            continue  # carries an error made upstream (or reads a value without a match)
        if blame is not None and region_kind(ins) is None:
            bad_slot = next((n for n in slots if blamed(n)), None)
            if bad_slot is None:
                continue  # departs only with every difference counted: not blamed, its users read it
        g, w = np.asarray(val_b[id(bad_slot)]), np.asarray(val_g[id(bad_slot)])
        error = compare_one(0, g, w, j.rtol, j.atol, 0.0, j.ulps) if g.shape == w.shape and g.dtype == w.dtype else None
        culprit = pb.culprit(ins, {id(x): val_b[id(x)] for x in inputs}, g, error)
        other = match[ins.index]
        same = (f"which holds {_summary(w)} (it reads nothing; {other.name} is what its users' matches read in its "
                "place)") if not inputs and ins.op.opdef.same_op(CONSTANT) else "on the same values"
        note = (f"{ins.name} ({ins.opcode}) gives another value than {other.name} ({other.opcode}) of the {what} "
                f"compared against, {same} ({named} instructions matched by name, {structural} by structure)")
        found = OpsBisection("localised", culprit, "", [], 0, _METHOD, note, first_divergent=ins.name)
        found = descend_pair(pb, pg, ins, other, val_g, own_g, found, depth,
                             lambda qb, qg, d: compare_programs(qb, qg, d, blame=blame))
        found.compiles += pb.compiles + pg.compiles
        return found
    return OpsBisection("not localised", compiles=pb.compiles + pg.compiles, method=_METHOD,
                        note=f"no matched instruction departs from its match on agreeing values ({named} matched by "
                             f"name, {structural} by structure, of {len(pb.instrs)}): the difference is in values "
                             "that were not matched")
