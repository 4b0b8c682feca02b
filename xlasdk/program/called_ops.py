"""Every op a program runs: ``main``'s, its regions', and those of the functions it calls, at any
depth (what the capability table checks, and what the platform lowering must have reached)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..errors import GraphImportError, XlaSdkError
from .graph_import import callee_of

if TYPE_CHECKING:
    from ..builder import XlaOp
    from .graph_import import Instruction, InstructionGraph

__all__ = ["every_called_op", "describe_op"]


def _every_op(instructions: list[Instruction]) -> Iterator[XlaOp]:
    """Every op of ``main`` and of its ops' regions (loop bodies, reducers, branches), each once."""
    seen: set[int] = set()
    stack: list[XlaOp] = [i.op for i in reversed(instructions)]
    order: list[XlaOp] = []
    while stack:
        o = stack.pop()
        if o.id in seen:
            continue
        seen.add(o.id)
        order.append(o)
        stack.extend(o.operands)
        for r in o.regions:
            stack.extend((*r.results, *r.effects, *r.captures, *(r.bindings or ())))
    order.sort(key=lambda o: o.id)
    return iter(order)


def every_called_op(graph: InstructionGraph) -> Iterator[tuple[XlaOp, str]]:
    """Every op of ``main`` and of the functions it calls (``func.call``, an HLO ``call``, a
    composite's decomposition, at any depth, from regions too; each function once), with its
    description (:func:`_describe`): ``main``'s first, then each function's in the order first called.

    Raises
    ------
    GraphImportError
        A called function the instruction graph cannot hold (the check cannot read it).
    """
    done: set[str] = set()
    todo: list[tuple[str | None, InstructionGraph]] = [(None, graph)]
    while todo:
        function, g = todo.pop(0)
        names = {i.op.id: i.name for i in g.instructions}
        for op in _every_op(list(g.instructions)):
            yield op, describe_op(op, names.get(op.id), function)
            callee = callee_of(op)
            if callee is not None and callee not in done:
                done.add(callee)
                try:
                    todo.append((callee, graph.callee(callee)))
                except XlaSdkError as e:
                    raise GraphImportError(f"capabilities: function {callee!r}: {e}") from None


def describe_op(op: XlaOp, name: str | None, function: str | None = None) -> str:
    """``rng.3 (stablehlo.rng -> f64[4,4])``; an op of a region (no instruction of ``main``) by its
    op; ``... in function 'fft.1'`` for one of a called function."""
    what = f"{op.opcode} -> {op.shape}"
    found = f"{name} ({what})" if name is not None else f"{what} (in a region)"
    return found if function is None else f"{found} in function {function!r}"
