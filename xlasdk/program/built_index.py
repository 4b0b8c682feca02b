"""The instruction index of a built computation, over the nodes its builder made.

A computation built op by op (:meth:`XlaBuilder.build <xlasdk.XlaBuilder.build>`) is walked on its
own nodes: :func:`index_built` lists them with the conventions the importer gives a loaded module
(:mod:`.graph_import`), so that every tool reads a built and a loaded program the same way, and
``comp.instructions()[-1].op is comp.graph().root`` for a program of one result:

* the parameters first, then every node the result and the side effects need, in creation order
  (the order the emitter writes them, so the order a loaded copy of the module has);
* a node of several results (``while``, a variadic ``reduce``, ``sort``...) is one instruction,
  and the ``get_tuple_element`` nodes that read its results are its parts (:attr:`InstructionGraph.parts`),
  not instructions of their own;
* a result tuple (the root of a program of several results) is not an instruction: its elements
  are the program's outputs, as ``main`` returns them (a root of several results: its parts).

Where the built graph holds a tuple that the emitted module does not (a tuple carried into a loop or
a branch, a tuple-shaped parameter, a ``call`` the emitter inlines, a region returning a tuple) or
writes something its nodes do not hold (a host callback's index, dynamic parameters written as
padded arguments), the two would not be the same walk: :func:`index_built` returns None and the
computation indexes the module it emits instead (:func:`.graph_import.import_graph`), where the
builder's nodes still find their instructions (:meth:`.graph_import.InstructionGraph.pair_built`).
"""

from __future__ import annotations

from .._optable import CALL, GET_TUPLE_ELEMENT, OPS, PARAMETER, TUPLE, HloForm
from ..builder import Graph, Region, XlaOp
from ..sharding._spmd import _result_shardings
from .attr_kinds import MlirAttr
from .graph_import import _PURE, Instruction, InstructionGraph, InstructionList, _names
from .walk import reachable

__all__ = ["index_built", "indexable"]


def _multi(o: XlaOp) -> bool:
    """Whether ``o`` is one op of several results (a tuple shape that the module spells as results)."""
    return o.shape.is_tuple() and not o.opdef.tuple_result and o.opdef is not TUPLE and o.opdef is not PARAMETER


def _dynamic(o: XlaOp) -> bool:
    s = o.shape
    return s.is_array() and any(s.is_dynamic_dimension(d) for d in range(s.rank()))


def _node_fits(o: XlaOp) -> bool:
    """Whether the module writes node ``o`` as one op the importer reads back as this node."""
    d = o.opdef
    if d is PARAMETER:
        return not o.shape.is_tuple() and not _dynamic(o)
    if d is GET_TUPLE_ELEMENT:
        return _multi(o.operands[0])
    if d is TUPLE or d is CALL or d.hlo_form is HloForm.GRAPH or OPS.get(d.name) is not d:
        return False
    if d.tuple_result or (d.host_callback is not None and d.host_callback(o) is not None):
        return False  # (a host callback's module has the index of its callable, which the node does not)
    if _dynamic(o):
        return False
    return all(not x.shape.is_tuple() for x in o.operands)  # (the emitter spreads or packs a tuple operand)


def _region_fits(r: Region) -> bool:
    if r.bindings is not None or any(x.shape.is_tuple() for x in r.results):
        return False
    if any(p.opdef is not PARAMETER or p.shape.is_tuple() for p in r.params):
        return False
    return all(_fits(o) for o in reachable([*r.results, *r.effects], known={p.id for p in r.params}))


def _fits(o: XlaOp) -> bool:
    if o.opdef is PARAMETER:  # a region's own parameters are checked with it; another's is read from outside
        return True
    return _node_fits(o) and all(_region_fits(r) for r in o.regions)


def _own_instructions(graph: Graph) -> list[XlaOp] | None:
    """The nodes of ``main`` but its parameters and a result tuple, in creation order, when every node
    (regions included) is an op of the module the graph emits (see :func:`indexable`); else None."""
    if graph.context is not None:
        return None
    root = graph.root
    outputs = list(root.operands) if root.opdef is TUPLE else [root]
    if any(x.shape.is_tuple() for x in outputs) and not (root.opdef is not TUPLE and _multi(root)):
        return None
    if not all(_node_fits(p) for p in graph.parameters):
        return None
    nodes = reachable([*outputs, *graph.side_effects], known={p.id for p in graph.parameters})
    return nodes if all(_fits(o) for o in nodes) else None


def indexable(graph: Graph) -> bool:
    """Whether a built graph's own nodes are the instructions of the module it emits (see the module
    docstring): no tuple but the result tuple, no tuple-shaped or dynamic parameter, no ``call``, no
    host callback, no region with bound parameters or a tuple result, anywhere."""
    return _own_instructions(graph) is not None


def index_built(graph: Graph) -> InstructionGraph | None:
    """The :class:`~.graph_import.InstructionGraph` of a built graph's own nodes, or None when
    :func:`indexable` says they are not the module's instructions."""
    nodes = _own_instructions(graph)
    if nodes is None:
        return None
    root = graph.root
    params = tuple(graph.parameters)
    parts: dict[int, list[XlaOp | None]] = {}
    order: list[tuple[XlaOp, str]] = []
    for o in nodes:
        if o.opdef is GET_TUPLE_ELEMENT:
            src = o.operands[0]
            slot = parts.setdefault(src.id, [None] * len(src.shape.tuple_shapes()))
            if slot[o.extra] is None:
                slot[o.extra] = o
        else:
            order.append((o, o.opdef.name))
            if _multi(o):
                parts.setdefault(o.id, [None] * len(o.shape.tuple_shapes()))
    ops = {o.id: o for o, _ in order}
    full: dict[int, tuple[XlaOp, ...]] = {}
    for k, slot in parts.items():  # a result no node reads gets a node of its own, as the importer gives it
        src = ops[k]
        full[k] = tuple(x if x is not None else XlaOp(src.builder, GET_TUPLE_ELEMENT, (src,), s, {}, (), src.loc, i)
                        for i, (x, s) in enumerate(zip(slot, src.shape.tuple_shapes(), strict=True)))
    used: set[int] = set()
    for o, _ in order:
        used.update(x.id for x in o.operands)
        used.update(x.operands[0].id for x in o.operands if x.opdef is GET_TUPLE_ELEMENT)
        for r in o.regions:
            used.update(x.id for x in r.captures)
    # the outputs: a result tuple's elements, a multi-result root's parts, or the root
    outputs = tuple(root.operands) if root.opdef is TUPLE else full[root.id] if root.id in full else (root,)
    used.update(x.id for x in outputs)
    used.update(x.operands[0].id for x in outputs if x.opdef is GET_TUPLE_ELEMENT)
    effects = tuple(o for o, _ in order if o.id not in used and o.opdef.name not in _PURE)
    shardings = _result_shardings(root, len(outputs))
    result_attrs: tuple[dict[str, object], ...] = () if shardings is None else tuple(
        {} if sh is None else {"mhlo.sharding": MlirAttr(sh.to_mlir())} for sh in shardings)
    own, _, _ = _names(params, order, None)
    names: dict[XlaOp, Instruction] = {}
    instrs = [Instruction(n, op, i, None) for i, (n, op) in enumerate(own)]  # type: ignore[arg-type]
    index = InstructionGraph(graph.name, params, outputs, effects, InstructionList(instrs), names, (), (),
                             result_attrs, full)
    for ins in instrs:
        ins._graph = index
        names[ins.op] = ins
    return index
