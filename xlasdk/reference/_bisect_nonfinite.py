"""``find_nonfinite=True`` (:func:`find_nonfinite`): the first instruction whose value holds a NaN or
an Inf while its operands hold none (see :mod:`xlasdk.reference.bisect`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import XlaSdkError
from ..ops.sources import CONSTANT
from ..program.walk import closure
from ._bisect_core import Culprit, _CutFailed, _Program, _where
from ._bisect_regions import (
    MAX_DEPTH,
    MAX_ITERATIONS,
    _called_computation,
    region_computation,
    run_region,
    taken_branch,
)
from ._bisect_regions_against import region_kind
from ._settings import CompareSettings, refuse_both

if TYPE_CHECKING:
    from ..program.computation import XlaComputation
    from ..program.graph_import import Instruction
    from ..runtime import CompileOptions
    from ._settings import DeviceLike

__all__ = ["NonFinite", "NonFiniteSource", "find_nonfinite", "search_nonfinite"]


@dataclass
class NonFiniteSource:
    """Where the NaN/Inf of one output comes from: ``culprit`` is the first instruction
    (topological order) whose value has a NaN or Inf while its operands have none, and from which a
    NaN/Inf flows to ``output`` through instructions that all hold one (``None`` when no such
    instruction is found); ``constant``: it is a constant of the program (its ``-inf``, say, is
    written there, not computed); ``reference``: as :attr:`NonFinite.reference`."""

    output: int
    culprit: Culprit | None
    reference: str = ""
    constant: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"output": self.output, "culprit": None if self.culprit is None else self.culprit.as_dict(),
                "reference": self.reference, "constant": self.constant}


@dataclass
class NonFinite:
    """The result of ``find_nonfinite=True``. ``status``: ``"none"`` (no NaN/Inf on the device
    anywhere it looked), ``"found"`` (``culprit`` is the first instruction whose value has one while
    its operands have none), ``"from inputs"`` (the arguments hold NaN/Inf), ``"not localised"``
    (``note`` says why; when only constants hold NaN/Inf, ``sources`` names them). ``reference``: what
    the reference rule gives on the same operands (``"also non-finite"``: the operands call for it,
    e.g. log of a negative number; ``"finite"``: XLA's own; ``""``: no rule). ``in_outputs``: whether
    an output holds a NaN/Inf (a correct program may make an Inf on the way and drop it, as erfc's
    polynomial does in a select); ``outputs``: which do. ``reaches``: the outputs the culprit's
    NaN/Inf flows to (through instructions that all hold a NaN/Inf; empty when the program drops it,
    e.g. in a select).
    ``sources``: for each output in ``outputs``, the first instruction that introduces a NaN/Inf
    that flows to it (:class:`NonFiniteSource`; the culprit itself for the outputs it reaches)."""

    status: str
    culprit: Culprit | None = None
    reference: str = ""
    compiles: int = 0
    note: str = ""
    in_outputs: bool = False
    outputs: tuple[int, ...] = ()  # the outputs that hold a NaN/Inf
    reaches: tuple[int, ...] = ()  # those the culprit's NaN/Inf flows to
    sources: list[NonFiniteSource] = field(default_factory=list)
    #: when the culprit is a while, if, case or call (a fusion): the part of it the search went into
    #: (``"body (iteration 3)"``, iterations from 0; ``"true branch"``, ``"branch 2"``, ``"called
    #: function"``) and the search there, on the device's values, as a program of its own
    region: str = ""
    inside: NonFinite | None = None

    @property
    def path(self) -> str:
        """Where the first NaN/Inf is made, down the regions: ``while.6 > body (iteration 3) > log.4``."""
        parts: list[str] = []
        r: NonFinite | None = self
        while r is not None and r.culprit is not None:
            parts.append(r.culprit.name + (f" > {r.region}" if r.inside is not None else ""))
            r = r.inside
        return " > ".join(parts)

    @property
    def deepest(self) -> NonFinite:
        """The search down the regions that names the instruction itself (``self`` without regions)."""
        r = self
        while r.inside is not None and r.inside.culprit is not None:
            r = r.inside
        return r

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "culprit": None if self.culprit is None else self.culprit.as_dict(),
                "reference": self.reference, "in_outputs": self.in_outputs, "outputs": list(self.outputs),
                "reaches": list(self.reaches), "sources": [x.as_dict() for x in self.sources],
                "compiles": self.compiles, "note": self.note, "path": self.path, "region": self.region,
                "inside": None if self.inside is None else self.inside.as_dict(),
                "where": _where(self.deepest.culprit)}

    def __str__(self) -> str:
        out = [f"find nonfinite: {self.status}"]
        if self.inside is not None:
            where = _where(self.deepest.culprit)
            out.append(f"  path: {self.path}" + (f" ({where})" if where else ""))
        if self.culprit is not None:
            out.append("  the first instruction whose value has a NaN or Inf while its operands have none:")
            out.extend(self.culprit.lines())
            if self.reference:
                out.append(f"    the reference on the same operands: {self.reference}")
            if self.reaches:
                out.append(f"    {_outputs_text(self.reaches)} NaN/Inf: its value reaches "
                           f"{'them' if len(self.reaches) > 1 else 'it'}")
            elif self.outputs:
                out.append("    its NaN/Inf reaches no output (the program drops it later)")
            elif self.in_outputs:
                out.append("    an output holds NaN/Inf")
            else:
                out.append("    every output is finite (the program drops this value later)")
        # the other outputs' NaN/Inf, grouped by the instruction that introduces it
        groups: dict[str, list[NonFiniteSource]] = {}
        for src in self.sources:
            if src.output in self.reaches:
                continue
            groups.setdefault("" if src.culprit is None else src.culprit.name, []).append(src)
        for srcs in groups.values():
            which = _outputs_text(tuple(x.output for x in srcs))
            first = srcs[0]
            if first.culprit is None:
                out.append(f"  {which} NaN/Inf; no instruction that introduces it was found on its path")
                continue
            out.append(f"  {which} NaN/Inf; " + ("it comes from a constant of the program:" if first.constant else
                                                  f"the first instruction on {'their' if len(srcs) > 1 else 'its'} "
                                                  "path whose value has one while its operands have none:"))
            out.extend(first.culprit.lines())
            if first.reference:
                out.append(f"    the reference on the same operands: {first.reference}")
        if self.note:
            out.append(f"  {self.note}")
        if self.inside is not None and self.culprit is not None:
            out.append(f"  inside {self.culprit.name}, its {self.region}, on the device's values there:")
            out.extend("  " + x for x in str(self.inside).splitlines()[1:])
        return "\n".join(out)


def _outputs_text(outputs: Sequence[int]) -> str:
    """``output 1 holds`` / ``outputs 0, 2 hold``."""
    many = len(outputs) > 1
    return f"output{'s' if many else ''} {', '.join(str(k) for k in outputs)} hold{'' if many else 's'}"


# -- non-finite values -------------------------------------------------------------------------------------------
def _nonfinite(a: np.ndarray[Any, Any]) -> bool:
    from ._walk import is_float, widened

    if not is_float(a.dtype):
        return False
    with np.errstate(all="ignore"):
        return not bool(np.all(np.isfinite(widened(a))))


def find_nonfinite(comp: XlaComputation, args: Sequence[Any], *, device: DeviceLike = None,
                   options: CompileOptions | None = None, outputs: Sequence[Any] | None = None,
                   progress: Callable[[str], None] | None = None, settings: CompareSettings | None = None,
                   ) -> NonFinite:
    """The first instruction (topological order) whose device value holds a NaN or Inf while its
    operands hold none (XLA's own NaN checker is GPU-only), whether its NaN/Inf flows to an output,
    and for each output that holds one the first instruction whose NaN/Inf flows to it; see
    :class:`NonFinite`. A NaN/Inf *flows* from an instruction to a user that reads it and holds a
    NaN/Inf too (a select that drops it stops it). Constants are not computed: their NaN/Inf (a
    max-pool's ``-inf`` start value) are the program's own inputs, named only as an output's source
    when nothing computed is. ``outputs``: the program's outputs on the device when the caller has
    them (else one more compile gets them when no intermediate value holds a NaN/Inf). ``settings``:
    ``device`` and ``progress`` as one :class:`~xlasdk.CompareSettings` (as :func:`xlasdk.compare`
    hands them on; ``options`` left out: its ``xla_flags``), else the keywords; CompareArgumentError
    for both."""
    refuse_both("find_nonfinite", settings, device=device, progress=progress)
    s = settings if settings is not None else CompareSettings(device=device, progress=progress)
    if settings is not None and options is None:
        options = settings.flag_options()
    return search_nonfinite(comp, args, s, options, outputs)


def search_nonfinite(comp: XlaComputation, args: Sequence[Any], s: CompareSettings, options: CompileOptions | None,
                     outputs: Sequence[Any] | None = None, depth: int = 0) -> NonFinite:
    """:func:`find_nonfinite` on settings ``s``, ``depth`` regions down (a region's program: its
    search goes on inside the culprit's regions while ``depth`` < ``MAX_DEPTH``)."""
    say = s.say
    p = _Program(comp, args, s, options, need_reference=False)
    if any(_nonfinite(a) for a in p.args):
        bad = [p.instrs[i].name for i, a in enumerate(p.args) if _nonfinite(a)]
        return NonFinite("from inputs", note=f"the arguments hold NaN/Inf: {', '.join(bad)}")
    nodes = [n for i in p.instrs[p.nparams:] for n in p.slots[i.index]]
    if not nodes:
        return NonFinite("none")
    say(f"find nonfinite: one compile with {len(nodes)} values exposed")
    try:
        got = p.run(nodes)
    except _CutFailed as e:
        return NonFinite("not localised", compiles=p.compiles,
                         note=f"the program with every value exposed could not be compiled or run ({e})")
    dev = {id(n): g for n, g in zip(nodes, got, strict=True)}
    dev.update({id(q): a for q, a in zip(p.graph.params, p.args, strict=True)})
    bad_outputs = tuple(k for k, o in enumerate(p.graph.outputs) if id(o) in dev and _nonfinite(dev[id(o)]))
    # instructions holding a NaN/Inf; those that introduce one (their operands hold none)
    holds = {ins.index for ins in p.instrs[p.nparams:]
             if any(id(n) in dev and _nonfinite(dev[id(n)]) for n in p.slots[ins.index])}
    introduces = [ins for ins in p.instrs[p.nparams:] if ins.index in holds
                  and not any(id(x) in dev and _nonfinite(dev[id(x)]) for x in p.main_inputs(ins.op))]
    computed = [ins for ins in introduces if not ins.op.opdef.same_op(CONSTANT)]
    flows = _flows_to_outputs(p, holds, bad_outputs)
    cache: dict[int, tuple[Culprit, str]] = {}

    def described(ins: Instruction) -> tuple[Culprit, str]:
        if ins.index not in cache:
            cache[ins.index] = _nonfinite_culprit(p, ins, dev)
        return cache[ins.index]

    sources = []
    for k in bad_outputs:  # the first computed instruction whose NaN/Inf flows there, else a constant's
        first = next((i for i in computed if i.index in flows[k]), None)
        const = first is None
        first = first or next((i for i in introduces if i.index in flows[k]), None)
        sources.append(NonFiniteSource(k, None) if first is None else NonFiniteSource(k, *described(first), const))
    if computed:
        ins = computed[0]
        c, reference = described(ins)
        reaches = tuple(k for k in bad_outputs if ins.index in flows[k])
        found = NonFinite("found", c, reference, p.compiles, in_outputs=bool(bad_outputs), outputs=bad_outputs,
                          reaches=reaches, sources=sources)
        return descend_nonfinite(p, ins, dev, found, depth)
    if bad_outputs:
        return NonFinite("not localised", compiles=p.compiles, in_outputs=True, outputs=bad_outputs, sources=sources,
                         note="no computed value introduces a NaN/Inf: the outputs' NaN/Inf come from constants "
                              "written in the program")
    if outputs is None:
        from ..runtime import compile as _compile

        out = _compile(comp, p.device, options=options)(*p.args)
        p.compiles += 1
        outputs = out if isinstance(out, (list, tuple)) else [out]
    direct = [np.asarray(o) for o in outputs]
    if any(_nonfinite(v) for v in direct):
        return NonFinite("not localised", compiles=p.compiles,
                         note="the outputs hold NaN/Inf, but with every intermediate value exposed no value does "
                              "(exposing them changes what XLA fuses); bisect=\"ops\" and bisect=\"passes\" "
                              "(--bisect ops|passes) may help")
    return NonFinite("none", compiles=p.compiles)


def _nonfinite_culprit(p: _Program, ins: Instruction, dev: dict[int, Any]) -> tuple[Culprit, str]:
    """``ins`` (its device value holds a NaN/Inf) as a :class:`Culprit`, and what its reference
    rule gives on the device's operand values (``""`` without a rule)."""
    inputs = p.main_inputs(ins.op)
    env = {id(x): dev[id(x)] for x in inputs if id(x) in dev}
    mine = [dev[id(n)] for n in p.slots[ins.index] if id(n) in dev]
    reference = ""
    if not ins.op.opdef.same_op(CONSTANT):
        try:
            from ._walk import Evaluator

            renv = dict(env)
            Evaluator(p.comp).run_graph(p.slots[ins.index] or [ins.op], renv)
            reference = ("also non-finite (its operands call for it)"
                         if any(_nonfinite(np.asarray(renv[id(n)])) for n in p.slots[ins.index])
                         else "finite (the NaN/Inf is XLA's own)")
        except Exception:  # noqa: BLE001 - the reference is extra information here
            reference = ""
    value = next((v for v in mine if _nonfinite(v)), mine[0] if mine else None)
    return p.culprit(ins, env, value, None), reference


def _flows_to_outputs(p: _Program, holds: set[int], outputs: Sequence[int]) -> dict[int, set[int]]:
    """For each of ``outputs`` (their values hold a NaN/Inf), the instructions a NaN/Inf can flow to
    it from: those reached backwards from the output through operands that hold one (``holds``:
    the instructions whose device value does)."""
    out: dict[int, set[int]] = {}
    for k in outputs:
        try:
            start = p.graph.instruction_of(p.graph.outputs[k]).index
        except XlaSdkError:
            out[k] = set()
            continue
        out[k] = closure([start] if start in holds else [],
                         lambda i: [s for s in p.reads.get(i, ()) if s in holds])
    return out


# -- inside regions --------------------------------------------------------------------------------
# ``find_nonfinite`` inside regions: when the first instruction whose value holds a NaN or Inf
# while its operands hold none is a ``while``, an ``if``/``case`` or a ``func.call`` (a fusion, a JAX
# private function), the search goes on inside it on the device's values, as ``bisect="ops"`` does
# (:mod:`._bisect_regions`).
#
# A ``while`` is run iteration by iteration on the device from its operands' device values (its
# condition and body compiled once each, as programs of their own): the first iteration whose body
# gives a NaN/Inf from a finite carried state is searched as a program of its own; a branch is the
# one the device's predicate or index takes; a call, its function on the call's operands. The path
# reads ``while.6 > body (iteration 3) > log.4``.
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
    cond, body = ins.op.regions
    cond_c, cond_out = region_computation(p.comp, p.graph, ins.op, cond)
    body_c, body_out = region_computation(p.comp, p.graph, ins.op, body)
    state = [dev[id(x)] for x in ins.op.operands]
    cx, bx = [dev[id(x)] for x in cond_out], [dev[id(x)] for x in body_out]
    run_cond, run_body = run_region(p, cond_c), run_region(p, body_c)
    for it in range(MAX_ITERATIONS):
        if it & (it - 1) == 0:
            p.settings.say(f"find nonfinite: {ins.name}, iteration {it}: its condition and body on the device")
        if not bool(run_cond([*state, *cx])[0]):
            return (f"none of the {it} iterations of {ins.name} makes a NaN/Inf from finite values when its body "
                    "runs alone (exposing the values changes what XLA fuses); nothing inside is named", None, [])
        vals = run_body([*state, *bx])
        if any(_nonfinite(v) for v in vals):
            return f"body (iteration {it})", body_c, [*state, *bx]
        state = vals
    return f"no NaN/Inf in the first {MAX_ITERATIONS} iterations of {ins.name}; the search stopped there", None, []


def _into_branch(p: _Program, ins: Instruction, dev: dict[int, Any]) -> tuple[str, XlaComputation | None, list[Any]]:
    op = ins.op
    k, label = taken_branch(op, dev[id(op.operands[0])])
    region = op.regions[k]
    comp, outside = region_computation(p.comp, p.graph, op, region)
    bound = [dev[id(x)] for x in region.bindings] if region.bindings is not None else []
    return label, comp, [*bound, *(dev[id(x)] for x in outside)]
