"""``bisect="ops"`` inside regions: when the instruction that introduces a divergence is a
``while``, an ``if``/``case`` or a ``func.call`` (a fusion of an optimized dump, a JAX private
function), the search goes on inside the region that runs, on the device's own values.

Each region becomes a program of its own (:func:`region_computation`: the region's arguments,
then the outer values its ops read, as parameters). A ``while`` is unrolled on the reference from
the device's operand values: iteration ``i``'s condition and body are compiled (once) and run on
the device on the carried values of iteration ``i`` and compared with the reference on the same
values; the first iteration whose condition or body departs is bisected as a program of its own
(:func:`xlasdk.reference.bisect.bisect_ops`' search), and so on down nested regions. A branch
(``if``/``case``) is the one the device's predicate or index takes; a call, its function on the
call's operands. The report's path reads ``while.5 > body (iteration 4) > multiply.3``
(iterations counted from 0; names inside a region are those of the region's program:
``XlaComputation.instructions()`` of it). Against a second module the same regions are compared
bad against good (:mod:`._bisect_regions_against`); ``find_nonfinite`` goes inside them too
(:mod:`._bisect_nonfinite`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._optable import PARAMETER
from ..builder import XlaBuilder, XlaOp
from ..ops.control import CASE, IF, WHILE

if TYPE_CHECKING:
    from .._graph import ModuleContext
    from ..builder import Region
    from ..program.computation import XlaComputation
    from ..program.graph_import import Instruction, InstructionGraph
    from ._bisect_core import OpsBisection, _Program

__all__: list[str] = []

#: how many iterations of a ``while`` the search runs before it gives up
MAX_ITERATIONS = 10_000
#: how deep it follows regions inside regions
MAX_DEPTH = 16

_CONTROL = {WHILE: "while", IF: "if", CASE: "case"}  # by row; and a func.call (no row): "call"


def region_computation(source: XlaComputation, graph: InstructionGraph, owner: XlaOp, region: Region,
                       ) -> tuple[XlaComputation, list[XlaOp]]:
    """``region`` of ``owner`` (an op of ``graph``'s main function) as a program of its own: its
    parameters are the region's (its block arguments, or the stand-ins of its bound values), then
    the values of main its ops read (returned, in order; their values are the program's last
    arguments)."""
    from ..program.graph_edit import _carried_names, _copy
    from ..program.graph_import import InstructionGraph

    main = owner.builder
    stops = {id(q) for q in region.params}
    outer: dict[int, XlaOp] = {}
    seen: set[int] = set()
    stack = [*region.results, *region.effects, *region.captures]
    while stack:
        n = stack.pop()
        if id(n) in seen or id(n) in stops:
            continue
        seen.add(id(n))
        if n.builder is main:  # a value of main, read inside
            outer[id(n)] = n
            continue
        stack.extend(n.operands)
        for r in n.regions:
            stack.extend([*r.results, *r.effects, *r.captures, *(r.bindings or ())])
    outside = sorted(outer.values(), key=lambda x: x.id)
    b = XlaBuilder(graph.name)
    subst: dict[int, XlaOp] = {}
    params: list[XlaOp] = []
    for i, x in enumerate([*region.params, *outside]):
        if i < len(region.params):
            name = f"arg{i}"
        else:
            owner_ins = graph.instruction_of(x)
            name = owner_ins.name if x in graph.names else f"{owner_ins.name}#{x.extra}"
        q = b.add_imported(PARAMETER, (), x.shape, {}, (), x.loc, (i, name))
        subst[id(x)] = q
        params.append(q)
    origin: dict[XlaOp, XlaOp] = {}
    results, effects = _copy([*region.results, *region.effects], subst, len(region.results), origin=origin)
    sub = InstructionGraph.graph_of(graph.name, params, results, effects, _region_context(graph))
    return source.edited(sub, _carried_names(graph, params, [*results, *effects], origin)), outside


#: module attributes that describe main's parameters or results one by one (XLA's entry computation
#: layouts, tiled ones of a TPU dump among them; donations; prefetches of parameters): a region's
#: program has parameters and results of its own, laid out as XLA chooses
_ENTRY_ATTRS = ("mhlo.input_output_alias", "mhlo.cross_program_prefetches")
_ENTRY_PREFIX = "mhlo.xla_entry_computation_"
_ENTRY_LISTS = re.compile(r'\s*,?\s*\b(?:arg|out)_(?:layout_modes|memory_spaces) = "[^"\\]*"')


def _region_context(graph: InstructionGraph) -> ModuleContext:
    """The module context of a program made of a region of ``graph``'s main function (or of a
    function it calls): ``graph``'s module attributes but those of main's own parameters and results."""
    from .._graph import ModuleContext

    attrs = []
    for k, v in graph.module_attrs:
        if k in _ENTRY_ATTRS or k.startswith(_ENTRY_PREFIX):
            continue
        if k == "mhlo.frontend_attributes":
            v = _ENTRY_LISTS.sub("", v).replace("{,", "{").replace("{ ,", "{")
            if not v.strip("{} "):
                continue
        attrs.append((k, v))
    return ModuleContext(tuple(attrs), graph.module_body, None)


def _called_computation(p: _Program, ins: Instruction) -> XlaComputation:
    """The function a ``func.call`` calls, as a program of its own (the module's other functions
    along: those it calls in turn)."""
    from ..program.graph_edit import _carried_names
    from ..program.graph_import import InstructionGraph

    g = ins.called_function()
    main = p.graph
    graph = InstructionGraph.graph_of(main.name, g.params, list(g.outputs), list(g.effects), _region_context(main))
    names = _carried_names(g, g.params, [*g.outputs, *g.effects], {})
    return p.comp.edited(graph, names)


def descend(p: _Program, ins: Instruction, env: dict[int, Any], result: OpsBisection, say: Callable[[str], None],
            depth: int = 0) -> OpsBisection:
    """``result`` (``ins`` localised on the device's operand values ``env``) with the search
    carried inside ``ins``'s region when it has one: ``result.region``/``result.inside``."""
    row = ins.op.opdef.table_row
    kind = _CONTROL.get(row) if row is not None else "call" if ins.op.opcode == "func.call" else None
    if kind is None or depth >= MAX_DEPTH:
        return result
    try:
        if kind == "while":
            region, inside = _into_while(p, ins, env, say, depth)
        elif kind == "call":
            comp = _called_computation(p, ins)
            args = [env[id(x)] for x in ins.op.operands]
            region, inside = "called function", _bisect_region(p, comp, args, say, depth)
        else:
            region, inside = _into_branch(p, ins, env, say, depth)
    except Exception as e:  # noqa: BLE001 - the culprit stands; what stopped the descent is said
        result.note = (result.note + "; " if result.note else "") + (
            f"the search could not go inside {ins.name}: {type(e).__name__}: {' '.join(str(e).split())[:200]}")
        return result
    result.region, result.inside = region, inside
    return result


def run_region(p: _Program, comp: XlaComputation) -> Callable[[Sequence[Any]], list[np.ndarray[Any, Any]]]:
    """``comp`` (a region's program) compiled once on ``p``'s device with its options (counted in
    ``p.compiles``): a function of its arguments giving its results as numpy arrays."""
    from ..runtime import compile as _compile

    exe = _compile(comp, p.device, options=p.options)
    p.compiles += 1

    def run(args: Sequence[Any]) -> list[np.ndarray[Any, Any]]:
        out = exe(*args)
        return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]

    return run


def side_program(p: _Program, comp: XlaComputation, args: Sequence[Any]) -> _Program:
    """``comp`` on ``args`` as one side of a pair compared with another module's (no reference
    values): ``p``'s settings, device and options."""
    from ._bisect_core import _Program

    q = _Program(comp, args, p.settings, p.options, need_reference=False)
    q.device = p.device
    return q


def taken_branch(op: XlaOp, pick: Any) -> tuple[int, str]:
    """The branch of an ``if``/``case`` ``op`` that predicate or index ``pick`` takes, and its label
    (an index out of range takes the last branch, as XLA does)."""
    p = int(np.asarray(pick))
    if op.opdef.same_op(IF):
        return (0, "true branch") if p else (1, "false branch")
    n = len(op.regions)
    k = p if 0 <= p < n else n - 1
    return k, f"branch {k}"


def _program(p: _Program, comp: XlaComputation, args: Sequence[Any]) -> _Program:
    from ._bisect_core import _Program

    return _Program(comp, args, p.settings, p.options)


def _outs(q: _Program) -> list[XlaOp]:
    return [o for o in q.graph.outputs if o.shape.is_array()]


def _bisect_region(p: _Program, comp: XlaComputation, args: Sequence[Any], say: Callable[[str], None], depth: int,
                   q: _Program | None = None) -> OpsBisection:
    """The ops bisection of ``comp`` (a region's program) on ``args``, its compiles counted in ``p``."""
    from ._bisect_core import _OPS_METHOD, OpsBisection, _bisect_ops, _CutFailed

    q = q if q is not None else _program(p, comp, args)
    try:
        r = _bisect_ops(q, True, say, depth + 1, descend=descend)
    except _CutFailed as e:
        r = OpsBisection("not localised", compiles=q.compiles, method=_OPS_METHOD,
                         note=f"a program cut out of the region could not be compiled or run ({e}); nothing is "
                              "blamed")
    p.compiles += q.compiles
    return r


def _diverging(q: _Program, got: Sequence[np.ndarray[Any, Any]]) -> bool:
    from ._bisect_core import _diverges

    arrays = [g for o, g in zip(q.graph.outputs, got, strict=False) if o.shape.is_array()]
    return _diverges(q, _outs(q), arrays) is not None


def _into_while(p: _Program, ins: Instruction, env: dict[int, Any], say: Callable[[str], None], depth: int,
                ) -> tuple[str, OpsBisection | None]:
    from ._bisect_core import OpsBisection

    cond, body = ins.op.regions
    cond_c, cond_out = region_computation(p.comp, p.graph, ins.op, cond)
    body_c, body_out = region_computation(p.comp, p.graph, ins.op, body)
    state = [env[id(x)] for x in ins.op.operands]
    cond_x = [env[id(x)] for x in cond_out]
    body_x = [env[id(x)] for x in body_out]
    run_cond, run_body = run_region(p, cond_c), run_region(p, body_c)
    for it in range(MAX_ITERATIONS):
        if it & (it - 1) == 0:  # iterations 0, 1, 2, 4, 8...: a long loop does not flood the progress
            say(f"bisect ops: {ins.name}, iteration {it}: its condition and body on the device and on the reference")
        c = _program(p, cond_c, [*state, *cond_x])
        if _diverging(c, run_cond(c.args)):
            return f"condition (iteration {it})", _bisect_region(p, cond_c, c.args, say, depth, c)
        if not bool(np.asarray(c.ref[id(_outs(c)[0])])):
            return (f"iterations 0..{it - 1}", OpsBisection(
                "not localised", note=f"each of the {it} iterations of {ins.name}'s condition and body computes on "
                                      "the device what the reference does on the same carried values: their "
                                      "errors, each within tolerance, add up over the iterations, or the loop "
                                      "diverges only compiled whole (bisect=\"passes\" may name the XLA passes); "
                                      "nothing inside is blamed"))
        q = _program(p, body_c, [*state, *body_x])
        if _diverging(q, run_body(q.args)):
            return f"body (iteration {it})", _bisect_region(p, body_c, q.args, say, depth, q)
        state = [q.ref[id(o)] for o in q.graph.outputs]
    return (f"iterations 0..{MAX_ITERATIONS - 1}", OpsBisection(
        "not localised", note=f"no iteration of the first {MAX_ITERATIONS} diverges on the device; the search "
                              "stopped there"))


def _into_branch(p: _Program, ins: Instruction, env: dict[int, Any], say: Callable[[str], None], depth: int,
                 ) -> tuple[str, OpsBisection | None]:
    op = ins.op
    k, label = taken_branch(op, env[id(op.operands[0])])
    region = op.regions[k]
    comp, outside = region_computation(p.comp, p.graph, op, region)
    bound = [env[id(x)] for x in region.bindings] if region.bindings is not None else []
    args = [*bound, *(env[id(x)] for x in outside)]
    say(f"bisect ops: {ins.name}: inside its {label}")
    return label, _bisect_region(p, comp, args, say, depth)
