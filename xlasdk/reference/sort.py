"""Evaluation rules of :mod:`xlasdk.ops.sort`: sort (numpy's stable ``lexsort`` when the comparator
is read as a lexicographic order of keys (:mod:`._comparator`), else the comparator evaluated on
every pair at once, pair by pair when it is no strict weak order), top_k (``chlo.top_k``;
``mhlo.topk`` of loaded modules, bound by name) and XLA:CPU's ``TopK`` custom call
(:data:`~xlasdk.reference.CUSTOM_CALL_RULES`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._mlir_attrs import symbol_name
from .._optable import evaluates
from ..builder import Region, XlaOp
from ..ops.sort import SORT, TOP_K
from ._comparator import key_values, read_comparator
from ._walk import (
    CUSTOM_CALL_RULES,
    Evaluator,
    Value,
    as_output,
    check_elementwise,
    evaluates_opaque,
    is_float,
    result_shapes,
    results_of,
    total_order_key,
)

__all__: list[str] = []


_SORT_BLOCK = 1 << 22  # comparator evaluations per vectorized block (elements of the pairwise arrays)


def _sorted_order(cmp: Region, rows: list[np.ndarray[Any, Any]], ev: Evaluator) -> np.ndarray[Any, Any] | None:
    """The stable sorted order of one row, from the comparator evaluated on every pair at once (in
    blocks): the position of ``i`` is the number of ``j`` that come before it (``cmp(j, i)``), plus
    the equal ones (neither before the other) of smaller index. None when those positions are not
    a permutation (the comparator is no strict weak order): the caller sorts pair by pair."""
    n = rows[0].shape[0]
    if n == 0:
        return np.zeros(0, np.int64)
    pos = np.zeros(n, np.int64)
    step = max(1, _SORT_BLOCK // n)
    cols = np.arange(n)
    for start in range(0, n, step):
        i = np.arange(start, min(n, start + step))[:, None]  # the elements placed, against every j
        before = np.asarray(ev.region(cmp, [v for r in rows for v in (r[cols][None, :], r[i])])[0], dtype=bool)
        after = np.asarray(ev.region(cmp, [v for r in rows for v in (r[i], r[cols][None, :])])[0], dtype=bool)
        if before.shape != (i.shape[0], n) or after.shape != before.shape:
            return None
        tied_earlier = ~before & ~after & (cols[None, :] < i)
        pos[start:start + i.shape[0]] = before.sum(axis=1) + tied_earlier.sum(axis=1)
    if not np.array_equal(np.sort(pos), cols):
        return None
    order = np.empty(n, np.int64)
    order[pos] = cols
    return order


def _lexsorted(cmp: Region, moved: list[np.ndarray[Any, Any]], ev: Evaluator) -> list[np.ndarray[Any, Any]] | None:
    """The operands (sorted dimension last) sorted along it by numpy's stable ``lexsort`` of the keys
    the comparator orders by, every row at once; None when the comparator is not read as a
    lexicographic order of keys or a key has no total order on these values (the exact path)."""
    keys = read_comparator(cmp, ev)
    if keys is None:
        return None
    if not keys:  # no element before another: every one equal, the order kept
        return [m.copy() for m in moved]
    values = []
    for k in keys:
        v = key_values(k, moved[k.operand], ev)
        if v is None:
            return None
        values.append(v)
    order = np.lexsort(values[::-1], axis=-1)  # lexsort: the last key is the primary one
    return [np.take_along_axis(m, order, axis=-1) for m in moved]


@evaluates(SORT)
def _sort(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    import functools

    dim = int(ev.attr(o, "dimension", -1))
    dim = dim % a[0].ndim if a[0].ndim else 0
    stable = bool(ev.attr(o, "is_stable", False))
    (cmp,) = o.regions
    check_elementwise(cmp, o, ev)
    moved = [np.moveaxis(x, dim, -1) for x in a]
    fast = _lexsorted(cmp, moved, ev)
    if fast is not None:
        if not stable and len(a) > 1:
            _refuse_ties(o, cmp, fast, ev)
        return results_of(o, [as_output(np.moveaxis(x, -1, dim), sh)
                              for x, sh in zip(fast, result_shapes(o), strict=True)])
    lead = moved[0].shape[:-1]
    n = moved[0].shape[-1]
    outs = [np.empty_like(m) for m in moved]
    for idx in np.ndindex(*lead):
        rows = [m[idx] for m in moved]
        order_fast = _sorted_order(cmp, rows, ev)
        if order_fast is not None:
            for out, r in zip(outs, rows, strict=True):
                out[idx] = r[order_fast]
            continue

        def less(i: int, j: int, rows: list[np.ndarray[Any, Any]] = rows) -> int:
            args = [v for r in rows for v in (r[i], r[j])]
            if bool(np.asarray(ev.region(cmp, args)[0])):
                return -1
            args = [v for r in rows for v in (r[j], r[i])]
            return 1 if bool(np.asarray(ev.region(cmp, args)[0])) else 0

        order = sorted(range(n), key=functools.cmp_to_key(less))
        for out, r in zip(outs, rows, strict=True):
            out[idx] = r[order]
    if not stable and len(a) > 1:
        _refuse_ties(o, cmp, outs, ev)
    return results_of(o, [as_output(np.moveaxis(x, -1, dim), sh) for x, sh in zip(outs, result_shapes(o), strict=True)])


def _refuse_ties(o: XlaOp, cmp: Region, ordered: list[np.ndarray[Any, Any]], ev: Evaluator) -> None:
    """A sort that is not stable and carries payloads is determined only where no two keys tie
    (neither orders before the other): the order of equal keys is XLA's choice, and the payloads
    would show it. ``ordered``: the operands sorted (stably) along their last dimension; each
    neighbour must come strictly before the next, by the comparator run on them all at once."""
    if ordered[0].shape[-1] < 2:
        return
    args = [v for m in ordered for v in (m[..., :-1], m[..., 1:])]
    before = np.asarray(ev.region(cmp, args)[0], dtype=bool)
    if not before.all():
        raise ev.fail(o, "that is not stable and carries payloads, on keys that tie (the order of equal keys is "
                         "XLA's choice)")


@evaluates(TOP_K)
@evaluates_opaque("mhlo.topk")
def _top_k(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """The ``k`` largest along the last dimension, largest first, ties by the lower index (XLA's
    TopK: floats in total order, so NaN is the largest)."""
    x = a[0]
    k = int(ev.attr(o, "k"))
    if ev.attr(o, "largest", True) is False:
        raise ev.fail(o, "with largest=false")
    if is_float(x.dtype):
        key = total_order_key(x)
    elif x.dtype == np.uint64:
        key = (x ^ np.uint64(1 << 63)).view(np.int64)  # order-preserving into int64
    else:
        key = x.astype(np.int64)
    order = np.argsort(~key, axis=-1, kind="stable")[..., :k]  # ~key: largest first, ties by index
    vals = np.take_along_axis(x, order, axis=-1)
    shapes = o.shape.tuple_shapes()
    return (as_output(vals, shapes[0]), as_output(order, shapes[1]))


def _topk_custom_call(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """XLA:CPU's ``TopK`` custom call (how its optimized HLO spells top_k): the ``k`` (the result's
    last dimension) largest along the last dimension, as :func:`_top_k`; its comparator (the
    function it calls) must be greater-than in total order, which is checked by running it on every
    pair of probe values (NaN, infinities, signed zeros included)."""
    if len(a) != 1 or not o.shape.is_tuple():
        raise ev.fail(o, "to 'TopK' has no evaluation rule yet (the reference evaluator cannot check this program)")
    called = ev.attr(o, "called_computations", ())
    names = [symbol_name(c) for c in (called if isinstance(called, (list, tuple)) else [called])]
    if len(names) != 1:
        raise ev.fail(o, "to 'TopK' without one comparator has no evaluation rule")
    g = ev.callee(names[0])
    x = a[0]
    if not is_float(x.dtype) or len(g.params) not in (2, 4):
        raise ev.fail(o, "to 'TopK' on this operand has no evaluation rule (floats only)")
    # the comparator must be "greater than" in total order: checked on every pair of probe values
    probe = np.array([-np.inf, -2.5, -1.0, -0.0, 0.0, 1e-30, 1.0, 3.0, np.inf, np.nan, -np.nan], np.float64)
    probe = probe.astype(x.dtype)
    lhs, rhs = np.meshgrid(probe, probe, indexing="ij")
    idx = np.zeros(lhs.shape, np.int32)
    args = [lhs, rhs] if len(g.params) == 2 else [lhs, rhs, idx, idx]
    env: dict[int, Value] = {id(p): v for p, v in zip(g.params, args, strict=True)}
    got = np.asarray(ev.run_graph(g.outputs, env)[0], dtype=bool)
    key = total_order_key(probe)
    if got.shape != lhs.shape or not np.array_equal(got, key[:, None] > key[None, :]):
        raise ev.fail(o, "to 'TopK' whose comparator is not greater-than in total order has no evaluation rule")
    k = int(o.shape.tuple_shapes()[0].dimensions()[-1])
    order = np.argsort(~total_order_key(x), axis=-1, kind="stable")[..., :k]  # largest first, ties by index
    shapes = o.shape.tuple_shapes()
    return (as_output(np.take_along_axis(x, order, axis=-1), shapes[0]), as_output(order, shapes[1]))


CUSTOM_CALL_RULES["TopK"] = _topk_custom_call
