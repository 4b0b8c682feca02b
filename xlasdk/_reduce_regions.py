"""The reducer inside regions: the instructions of a ``while``'s body and condition, of an ``if``'s
or ``case``'s branches, of a reducer or a comparator shrink too (:func:`shrink_regions`).

One instruction of a region (the last ones first, those nearest the region's results) is replaced
by one of its operands of the same shape (it is bypassed), else by zeros of its shape (a scalar
constant, broadcast); what only it read goes with it. The module stays one XLA loads: the
replacement has the instruction's shape, every candidate is loaded and checked as the other
strategies' are (:meth:`xlasdk._reduce_graph._Reducer._try`), and a candidate is kept only when it
is smaller (a shorter module: the region's instructions are fewer) and still shows the problem.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ._optable import PARAMETER, TUPLE
from .program.walk import reachable

if TYPE_CHECKING:
    from ._reduce_graph import _Reducer
    from .builder import Region, XlaBuilder, XlaOp

__all__: list[str] = []

def _kept(n: XlaOp) -> bool:
    """An instruction the regions' pass never replaces: a constant, a parameter, a tuple."""
    from .ops.sources import CONSTANT

    return n.opdef.same_op(CONSTANT) or n.opdef.same_op(PARAMETER) or n.opdef.same_op(TUPLE)


def run_with_regions(r: _Reducer) -> None:
    """The reducer's rounds (:meth:`_Reducer.run`), then the regions' pass, again while it shrinks."""
    r.run()
    while shrink_regions(r):
        r.run()


def _inner(region: Region) -> list[XlaOp]:
    """The instructions of ``region`` itself (not of regions nested in them), operands before
    users, in a fixed order (depth first from its results): the same for a copy of the region."""
    stops = {id(x) for x in (*region.params, *region.captures, *(region.bindings or ()))}
    seen: set[int] = set()
    out: list[XlaOp] = []
    stack: list[tuple[XlaOp, bool]] = [(x, False) for x in reversed([*region.results, *region.effects])]
    while stack:
        n, ready = stack.pop()
        if ready:
            out.append(n)
            continue
        if id(n) in seen or id(n) in stops or n.opdef is PARAMETER:
            continue
        seen.add(id(n))
        stack.append((n, True))
        stack.extend((x, False) for x in reversed(n.operands))
    return out


def _candidates(r: _Reducer) -> list[tuple[str, int, int, int | None]]:
    """``(owner, region, position, operand)`` of each replacement to try, the owner's last
    instruction first and each region's last instructions first; ``operand`` None: zeros."""
    from .ops.control import WHILE

    out: list[tuple[str, int, int, int | None]] = []
    for ins in reversed(r.cur.instrs):
        loop = ins.op.opdef.same_op(WHILE) and len(ins.op.regions) == 2
        for k, region in enumerate(ins.op.regions):
            inner = _inner(region)
            counted = _counter(ins.op.regions) if loop and k == 1 else set()
            for j in reversed(range(len(inner))):
                n = inner[j]
                if _kept(n) or not n.shape.is_array() or id(n) in counted:
                    continue
                if loop and k == 0:  # the condition: only its result, to false (the loop stops)
                    if any(n is x for x in region.results):
                        out.append((ins.name, k, j, None))
                    continue
                same = [i for i, x in enumerate(n.operands) if x.shape == n.shape]
                out.extend((ins.name, k, j, i) for i in same[:1])
                out.append((ins.name, k, j, None))
    return out


def _counter(regions: tuple[Region, ...]) -> set[int]:
    """The instructions of a ``while``'s body that compute a carried value its condition reads
    (``regions``: condition, body): changing one could make the loop endless (a check that runs
    until its timeout), so they are left alone."""
    cond, body = regions
    read = {id(x) for n in _inner(cond) for x in n.operands if x.opdef is PARAMETER} | {
        id(x) for x in cond.results if x.opdef is PARAMETER}
    carried = [k for k, q in enumerate(cond.params) if id(q) in read]
    stops = {id(x) for x in (*body.params, *body.captures)}
    roots = [body.results[k] for k in carried if k < len(body.results)]
    return {id(n) for n in reachable(roots, stop=lambda n: id(n) in stops or n.opdef is PARAMETER)}


def shrink_regions(r: _Reducer) -> bool:
    """One replacement inside a region that keeps the problem (see the module's docstring);
    whether one was kept."""
    for owner, k, j, operand in _candidates(r):
        what = "bypassed" if operand is not None else "-> zeros"
        if r._try(f"region instruction {what}", partial(r._rewritten, partial(_edit, r, owner, k, j, operand))):
            return True
    return False


def _edit(r: _Reducer, owner: str, k: int, j: int, operand: int | None, b: XlaBuilder, nodes: dict[str, XlaOp],
          ) -> list[np.ndarray[Any, Any]] | None:
    from .builder import Region

    op = nodes[owner]
    region = op.regions[k]
    target = _inner(region)[j]
    new = target.operands[operand] if operand is not None else _zeros(target)
    memo: dict[int, XlaOp] = {id(target): new}
    stops = {id(x) for x in (*region.params, *region.captures, *(region.bindings or ()))}

    def cp(n: XlaOp) -> XlaOp:
        got = memo.get(id(n))
        if got is not None:
            return got
        if id(n) in stops or n.opdef is PARAMETER:
            return n
        operands = tuple(cp(x) for x in n.operands)
        if all(a is x for a, x in zip(operands, n.operands, strict=True)):
            memo[id(n)] = n
        else:
            from .builder import XlaOp

            memo[id(n)] = XlaOp(n.builder, n.opdef, operands, n.shape, n.attrs, n.regions, n.loc, n.extra)
        return memo[id(n)]

    # depth first from the results, operands before users (the region's order): no deep recursion
    for n in _inner(region):
        cp(n)
    copied = Region(region.params, tuple(cp(x) for x in region.results), region.bindings,
                    captures=region.captures, effects=tuple(cp(x) for x in region.effects),
                    terminator=region.terminator)
    op.regions = tuple(copied if i == k else x for i, x in enumerate(op.regions))
    return r.cur.args


def _zeros(like: XlaOp) -> XlaOp:
    """Zeros of ``like``'s shape in ``like``'s region: a scalar constant, broadcast."""
    from . import ops
    from .builder import XlaBuilder, XlaOp

    scratch = XlaBuilder("zeros")
    dtype = np.dtype(like.shape.numpy_dtype())
    c = ops.Constant(scratch, np.zeros((), dtype))
    zero = XlaOp(like.builder, c.opdef, (), c.shape, c.attrs, (), like.loc, c.extra)
    dims = list(like.shape.dimensions())
    if not dims:
        return zero
    bc = ops.Broadcast(c, dims)
    return XlaOp(like.builder, bc.opdef, (zero,), bc.shape, bc.attrs, (), like.loc, bc.extra)
