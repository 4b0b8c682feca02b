"""The graph walker: what a set of nodes needs, who uses a node, what a relation reaches.

Every tool that walks a graph (the reference evaluator, the emitters, the bisections, the
reducer, the graph edits) asks one of three questions, answered here once:

* :func:`reachable`: the nodes some roots need, in creation order. A node's id
  (:attr:`XlaOp.id <xlasdk.builder.XlaOp>`) grows with its creation, and a node is created after
  its operands, so creation order is a topological order: walking the list evaluates or emits each
  node after everything it reads.
* :func:`users`: per node, the nodes that read it.
* :func:`closure`: everything a relation reaches from some starts (for graphs that are not made of
  nodes, such as instruction indices and the indices each reads).

What a node needs: its operands, and with ``regions=True`` also the outer values its regions read
(``Region.captures``, values an imported region's ops use directly, and ``Region.bindings``, the
values a built ``if``/``case`` binds to its branches' parameters): the dependencies the evaluator
and the emitters honour. The ops inside a region are not walked: they run with their owner.

The walks use an explicit stack, never recursion, so a chain of a hundred thousand nodes is fine.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, TypeVar

from .._optable import GET_TUPLE_ELEMENT

if TYPE_CHECKING:
    from ..builder import XlaOp

__all__ = ["reachable", "users", "closure", "unread"]

T = TypeVar("T", bound=Hashable)


def reachable(
    roots: Iterable[XlaOp], *, known: Container[int] = (), stop: Callable[[XlaOp], bool] | None = None,
    regions: bool = False,
) -> list[XlaOp]:
    """Every node ``roots`` need (the roots included), each once, in creation (= topological) order.

    Parameters
    ----------
    roots: the nodes to start from (their order does not matter).
    known: the ids (:attr:`XlaOp.id <xlasdk.builder.XlaOp>`) of nodes already done (an emitter's
        values, by node id): neither listed nor gone past. The same as ``stop=lambda o: o.id in
        known``, without a call per node (the emitters' and the evaluator's walks are hot paths).
    stop: ``stop(node)`` true: the node is neither listed nor gone past (a parameter, a value already
        evaluated or emitted, the boundary of a region). It may raise, to refuse a node (a parameter
        that has no value); it is asked once per edge until the node is listed, so keep it cheap.
    regions: also follow what the nodes' regions read from outside: their captures and bindings.

    Returns
    -------
    The nodes, sorted by :attr:`XlaOp.id`: each after every node it reads.
    """
    found: dict[int, XlaOp] = {}
    stack = list(roots)
    pop, push = stack.pop, stack.extend
    while stack:
        o = pop()
        k = o.id
        if k in found or k in known:
            continue
        if stop is not None and stop(o):
            continue
        found[k] = o
        push(o.operands)
        if regions and o.regions:
            for r in o.regions:
                push(r.captures)
                if r.bindings:
                    push(r.bindings)
    return [found[k] for k in sorted(found)]


def users(nodes: Iterable[XlaOp]) -> dict[int, list[XlaOp]]:
    """Per node id (:attr:`XlaOp.id <xlasdk.builder.XlaOp>`), the nodes of ``nodes`` that have it as an
    operand, in the order of ``nodes``, each once (an op that reads a value twice uses it once).
    Only operands count, not what regions capture. A node no one reads has no entry."""
    out: dict[int, list[XlaOp]] = {}
    for u in nodes:
        done: set[int] = set()
        for x in u.operands:
            k = x.id
            if k not in done:
                done.add(k)
                out.setdefault(k, []).append(u)
    return out


def closure(starts: Iterable[T], step: Callable[[T], Iterable[T]]) -> set[T]:
    """Everything ``starts`` reach through ``step`` (an item's neighbours), ``starts`` included.

    For graphs given by a relation rather than by nodes: ``closure([k], lambda i: reads[i])`` is
    instruction ``k`` and every instruction it reads, directly or not. To leave the starts out,
    start from their neighbours: ``closure(step(s), step)`` (in an acyclic graph)."""
    seen = set(starts)
    stack = list(seen)
    while stack:
        for y in step(stack.pop()):
            if y not in seen:
                seen.add(y)
                stack.append(y)
    return seen


def unread(nodes: Sequence[XlaOp], results: Sequence[XlaOp]) -> list[XlaOp]:
    """The ``nodes`` of a block whose values no node of it reads, nor its ``results``: read through an
    operand, a result's op through a ``get_tuple_element`` of it, a region's captures (a block's side
    effects, as the importer and the emitter's record find them)."""
    used: set[int] = set()
    for o in nodes:
        used.update(x.id for x in o.operands)
        used.update(x.operands[0].id for x in o.operands if x.opdef is GET_TUPLE_ELEMENT)
        for r in o.regions:
            used.update(x.id for x in r.captures)
    used.update(x.id for x in results)
    used.update(x.operands[0].id for x in results if x.opdef is GET_TUPLE_ELEMENT)
    return [o for o in nodes if o.id not in used]
