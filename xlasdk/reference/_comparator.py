"""Sort comparators read from their structure: the lexicographic order of per-operand keys that a
comparator region computes, when it computes one, so that ``sort`` can run through numpy's stable
``lexsort`` instead of evaluating the comparator on pairs.

A comparator is recognised when its result is a boolean combination (``and``, ``or``, ``xor``,
``not``, ``select``, boolean constants) of *atoms*: ``compare(T(lhs_j), T(rhs_j))`` (either way
round, any direction), where ``lhs_j`` / ``rhs_j`` are the two block arguments of operand ``j`` and
``T`` is one element-wise expression of that argument alone, the same on both sides (JAX's
comparators canonicalize NaN and -0.0 this way before a ``TOTALORDER`` compare). Each operand's
atoms must share one ``T`` and one comparison type. The combination is then a boolean function of
the relations (less, equal, greater) of the keys ``T(lhs_j)`` and ``T(rhs_j)``; it is evaluated on
every combination of those relations and accepted only when it equals "key 1 before, or key 1
equal and key 2 before, or ...", each key ascending or descending, and false when all keys are
equal (a strict weak order). Anything else (arithmetic between operands, a comparison against a
constant, a non-strict comparator) is not recognised and the caller keeps its exact path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._mlir_attrs import DenseElements
from ..attrs import ComparisonDirection, ComparisonType
from ..builder import Region, XlaOp
from ..ops.elementwise import BINARY, COMPARE, SELECT, UNARY
from ..ops.sources import CONSTANT
from ._walk import Evaluator, UnsupportedOpError, Value, dtype_of, is_float, total_order_key

__all__: list[str] = []

_MAX_KEYS = 8  # keys of a recognised comparator (3**8 relation combinations are checked)
_MAX_NODES = 256  # nodes of a key expression


class _Decline(Exception):
    """The comparator is not one this module reads (the caller keeps its exact path)."""


@dataclass(frozen=True)
class SortKey:
    """One key of a recognised comparator: operand ``operand``'s elements through ``expr`` (the
    left-hand side's expression, evaluated with ``param`` bound to the operand), ordered as
    ``kind`` says (``"TOTALORDER"``, ``"FLOAT"``, ``"INT"``), ``descending`` or not."""

    operand: int
    param: XlaOp
    expr: XlaOp
    kind: str
    descending: bool


def _params_of(node: XlaOp, r: Region) -> set[int]:
    """Indices of the block arguments ``node`` depends on; _Decline beyond the region's own."""
    index = {id(p): k for k, p in enumerate(r.params)}
    out: set[int] = set()
    seen: set[int] = set()
    stack = [node]
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if len(seen) > _MAX_NODES or o.regions:
            raise _Decline
        k = index.get(id(o))
        if k is not None:
            out.add(k)
            continue
        if o.opcode == "parameter":
            raise _Decline  # an outer value
        stack.extend(o.operands)
    return out


def _attrs_equal(a: XlaOp, b: XlaOp, ev: Evaluator) -> bool:
    if set(a.attrs) != set(b.attrs):
        return False
    for name in a.attrs:
        try:
            x, y = (v.value() if isinstance(v, DenseElements) else v for v in (ev.attr(a, name), ev.attr(b, name)))
        except UnsupportedOpError:  # an attribute the evaluator cannot read: not known to be the same
            return False
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            xa, ya = np.asarray(x), np.asarray(y)
            if xa.dtype != ya.dtype or xa.shape != ya.shape or xa.tobytes() != ya.tobytes():
                return False
            continue
        try:
            same = x == y
        except Exception:  # noqa: BLE001 - values that cannot be compared are not the same
            return False
        if not isinstance(same, bool) or not same:
            return False
    return True


def _same_expr(a: XlaOp, b: XlaOp, pa: XlaOp, pb: XlaOp, ev: Evaluator) -> bool:
    """Whether ``b`` is ``a`` with the block argument ``pa`` replaced by ``pb``, node for node."""
    memo: dict[tuple[int, int], bool] = {}

    def same(x: XlaOp, y: XlaOp) -> bool:
        if x is pa:
            return y is pb
        if x is y:
            return x is not pb
        key = (id(x), id(y))
        if key in memo:
            return memo[key]
        ok = (x.opdef is y.opdef and x.shape == y.shape and len(x.operands) == len(y.operands)
              and x.extra == y.extra and not x.regions and not y.regions and _attrs_equal(x, y, ev)
              and all(same(u, v) for u, v in zip(x.operands, y.operands, strict=True)))
        memo[key] = ok
        return ok

    return same(a, b)


def _kind(node: XlaOp, compare: XlaOp, ev: Evaluator) -> str:
    dt = dtype_of(node.shape)
    if dt.kind == "c":
        raise _Decline
    if is_float(dt):
        return "TOTALORDER" if ev.attr(compare, "compare_type") is ComparisonType.TOTALORDER else "FLOAT"
    if dt.kind not in "iub":
        raise _Decline
    return "INT"


class _Reader:
    """Reads one comparator: its keys, and its value on every combination of their relations."""

    def __init__(self, r: Region, ev: Evaluator) -> None:
        self.r = r
        self.ev = ev
        self.keys: list[tuple[int, XlaOp, str]] = []  # (operand, lhs-side expression, kind)
        self.atoms: list[tuple[int, bool, ComparisonDirection]] = []  # (key, lhs on the left, direction)
        self.memo: dict[int, Any] = {}

    def key_of(self, a: XlaOp, b: XlaOp, compare: XlaOp) -> tuple[int, bool]:
        """The key an atom ``compare(a, b)`` compares, and whether ``a`` is the left-hand side."""
        pa, pb = self._params_of(a), self._params_of(b)
        if len(pa) != 1 or len(pb) != 1:
            raise _Decline
        (ka,), (kb,) = pa, pb
        if ka // 2 != kb // 2 or ka == kb:
            raise _Decline
        lhs_first = ka % 2 == 0
        lhs, rhs = (a, b) if lhs_first else (b, a)
        j = ka // 2
        p_l, p_r = self.r.params[2 * j], self.r.params[2 * j + 1]
        if not _same_expr(lhs, rhs, p_l, p_r, self.ev):
            raise _Decline
        kind = _kind(lhs, compare, self.ev)
        for i, (op, expr, k) in enumerate(self.keys):
            if op == j:
                if k != kind or not (expr is lhs or _same_expr(expr, lhs, p_l, p_l, self.ev)):
                    raise _Decline  # one operand compared two ways
                return i, lhs_first
        self.keys.append((j, lhs, kind))
        if len(self.keys) > _MAX_KEYS:
            raise _Decline
        return len(self.keys) - 1, lhs_first

    def _params_of(self, node: XlaOp) -> set[int]:
        return _params_of(node, self.r)

    def collect(self, o: XlaOp) -> None:
        """Find the atoms under ``o`` (the boolean structure), in a first pass."""
        if id(o) in self.memo:
            return
        self.memo[id(o)] = None
        if dtype_of(o.shape) != np.bool_ or o.shape.dimensions() != ():
            raise _Decline
        op = o.opdef
        if op.same_op(COMPARE):
            a, b = o.operands
            if dtype_of(a.shape) == np.bool_ and (a.opdef.same_op(COMPARE) or b.opdef.same_op(COMPARE)):
                raise _Decline  # a comparison of comparisons
            key, lhs_first = self.key_of(a, b, o)
            direction: ComparisonDirection = self.ev.attr(o, "comparison_direction")
            self.atoms.append((key, lhs_first, direction))
            self.memo[id(o)] = len(self.atoms) - 1
        elif op.props.logical or op.same_op(SELECT):
            for x in o.operands:
                self.collect(x)
        elif op.same_op(CONSTANT):
            if o.regions:
                raise _Decline
        else:
            raise _Decline

    def value(self, o: XlaOp, rel: list[np.ndarray[Any, Any]], seen: dict[int, Any]) -> Any:
        """The comparator's value on every combination (``rel[k]``: 0 less, 1 equal, 2 greater)."""
        got = seen.get(id(o))
        if got is not None:
            return got
        op = o.opdef
        if op.same_op(COMPARE):
            key, lhs_first, direction = self.atoms[self.memo[id(o)]]
            r = rel[key] if lhs_first else 2 - rel[key]
            v = {"EQ": r == 1, "NE": r != 1, "LT": r == 0, "LE": r <= 1, "GT": r == 2, "GE": r >= 1}[direction.name]
        elif op.same_op(CONSTANT):
            v = np.broadcast_to(bool(self.ev.attr(o, "value").value()), rel[0].shape if rel else (1,))
        else:
            xs = [self.value(x, rel, seen) for x in o.operands]
            if op.same_op(BINARY["And"].opdef):
                v = xs[0] & xs[1]
            elif op.same_op(BINARY["Or"].opdef):
                v = xs[0] | xs[1]
            elif op.same_op(BINARY["Xor"].opdef):
                v = xs[0] ^ xs[1]
            elif op.same_op(UNARY["Not"].opdef):
                v = ~xs[0]
            else:
                v = np.where(xs[0], xs[1], xs[2])
        seen[id(o)] = v
        return v


def _lexicographic(f: np.ndarray[Any, Any], rel: list[np.ndarray[Any, Any]]) -> list[tuple[int, bool]] | None:
    """The keys (index, descending) in order when ``f`` is their lexicographic order, else None."""
    mask = np.ones(f.shape, bool)
    left = list(range(len(rel)))
    order: list[tuple[int, bool]] = []
    while f[mask].any():
        for k in left:
            r = rel[k]
            lt, gt = mask & (r == 0), mask & (r == 2)
            if f[lt].all() and not f[gt].any():
                order.append((k, False))
            elif f[gt].all() and not f[lt].any():
                order.append((k, True))
            else:
                continue
            left.remove(k)
            mask &= r == 1
            break
        else:
            return None
    return order


def read_comparator(r: Region, ev: Evaluator) -> list[SortKey] | None:
    """The lexicographic keys comparator ``r`` orders by (most significant first), or None when it
    is not read (see the module's docstring)."""
    if r.bindings is not None or r.captures or r.effects or len(r.results) != 1 or len(r.params) % 2:
        return None
    reader = _Reader(r, ev)
    try:
        reader.collect(r.results[0])
    except _Decline:
        return None
    n = len(reader.keys)
    codes = np.arange(3 ** n)
    rel = [(codes // 3 ** k) % 3 for k in range(n)]
    f = np.broadcast_to(np.asarray(reader.value(r.results[0], rel, {}), dtype=bool), codes.shape)
    order = _lexicographic(f, rel)
    if order is None:
        return None
    return [SortKey(reader.keys[k][0], r.params[2 * reader.keys[k][0]], reader.keys[k][1], reader.keys[k][2], desc)
            for k, desc in order]


def key_values(key: SortKey, operand: np.ndarray[Any, Any], ev: Evaluator) -> np.ndarray[Any, Any] | None:
    """int64 values of ``operand`` (any shape) that order as ``key`` orders its elements (ascending:
    reversed for a descending key), or None when no such values exist (a ``FLOAT`` comparison of a
    NaN, which is unordered against everything: the caller keeps its exact path)."""
    if key.expr is key.param:
        v: Value = operand
    else:
        env = dict(ev.current)
        env[id(key.param)] = operand
        v = ev.run_graph([key.expr], env)[0]
    v = np.broadcast_to(np.asarray(v), operand.shape)
    if key.kind == "TOTALORDER":
        out = total_order_key(v)
    elif key.kind == "FLOAT":
        w = v.astype(np.float64)
        if np.isnan(w).any():
            return None
        out = total_order_key(np.where(w == 0, 0.0, w))  # -0.0 == +0.0
    elif v.dtype == np.uint64:
        out = (v ^ np.uint64(1 << 63)).view(np.int64)  # order-preserving into int64
    else:
        out = v.astype(np.int64)
    return ~out if key.descending else out
