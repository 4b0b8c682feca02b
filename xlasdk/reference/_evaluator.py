"""The reference evaluator: XLA programs evaluated op by op in numpy, and the per-output comparison.

:func:`evaluate` runs a computation (built or loaded) op by op in numpy, on its instruction graph
(:meth:`XlaComputation.instructions <xlasdk.XlaComputation.instructions>`): floating-point and
complex ops are computed in float64 / complex128 from the op's inputs and rounded once to the op's
element type (bf16, f16 and the fp8 types through ``ml_dtypes``), integer ops are exact with
XLA's wrap-around, and the edges follow XLA's operation semantics (clamped dynamic-slice starts,
integer division by zero, shifts past the bit width, NaN propagation in max/min). An op without a
rule here raises :class:`UnsupportedOpError` naming it (a custom call by its target): nothing is
guessed.

:func:`xlasdk.reference.compare` runs the program on a device (XLA) and against the reference and
reports per output with this module's :class:`CompareReport`.

Rules: ``RULES`` maps an op name to ``rule(node, operands, ev) -> value``; operands are numpy
arrays (tuples for multi-result ops), ``ev`` reads attributes and evaluates regions. (They live
here, keyed by op name; families with rules of their own have a module in this package:
:mod:`xlasdk.reference.linalg`, ... which the package imports.) ``REFUSED`` names the ops the
evaluator refuses on purpose, with the reason.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import ml_dtypes as _ml_dtypes
import numpy as np

from .._optable import GET_TUPLE_ELEMENT, PARAMETER, TUPLE
from ..builder import Region, XlaOp
from ..errors import XlaSdkError
from ..shape import Shape

if TYPE_CHECKING:
    from ..computation import XlaComputation

ml_dtypes: Any = _ml_dtypes  # untyped functions (finfo)

__all__ = ["evaluate", "CompareReport", "OutputComparison", "UnsupportedOpError", "RULES", "REFUSED",
           "CUSTOM_CALL_RULES",
           "default_tolerance"]


class UnsupportedOpError(XlaSdkError):
    """The reference evaluator has no rule for an op of the program (named in the message)."""


Value = Any  # np.ndarray, or a tuple of them for multi-result ops
Rule = Callable[[XlaOp, list[Value], "_Evaluator"], Value]
RULES: dict[str, Rule] = {}
#: custom calls the evaluator knows, by ``call_target_name`` (the LAPACK targets of jaxlib's CPU lowering, ...)
CUSTOM_CALL_RULES: dict[str, Rule] = {}
#: ops the evaluator refuses on purpose, with the reason its error gives (every row of the op table has a
#: rule here or an entry there: ``tests/test_reference_rules.py`` checks it)
REFUSED: dict[str, str] = {
    "stablehlo.infeed": "reads the device's infeed queue, which only the device has",
    "stablehlo.outfeed": "writes to the device's outfeed queue, which only the device has",
    "stablehlo.rng": "draws from XLA's own unspecified generator (RngBitGenerator is reproducible: use it)",
    "stablehlo.return": "only ends a region (its operands are the region's results)",
}


def _rule(*names: str) -> Callable[[Rule], Rule]:
    def deco(fn: Rule) -> Rule:
        for n in names:
            RULES[n] = fn
        return fn
    return deco


# -- element types ------------------------------------------------------------------------------------------
def _dtype(shape: Shape) -> np.dtype[Any]:
    return np.dtype(shape.numpy_dtype())


def _wide(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A float operand as float64 (complex as complex128); others as they are."""
    if x.dtype.kind == "c":
        return x.astype(np.complex128)
    if x.dtype.kind == "f" or x.dtype.kind == "V" or _is_ml_float(x.dtype):
        return x.astype(np.float64)
    return x


def _is_ml_float(dt: np.dtype[Any]) -> bool:
    try:
        ml_dtypes.finfo(dt)
        return dt.kind not in "iub"
    except (ValueError, TypeError):
        return False


def _is_float(dt: np.dtype[Any]) -> bool:
    return dt.kind in "fc" or _is_ml_float(dt)


def _out(x: Any, shape: Shape) -> np.ndarray[Any, Any]:
    """``x`` rounded once to the result's element type (and broadcast to its shape when it has
    fewer dimensions; inside a region folded element-wise (:func:`_reduce`) values carry the
    batch of folds as leading dimensions)."""
    dt = _dtype(shape)
    with np.errstate(all="ignore"):
        a = np.asarray(x)
        if a.dtype != dt:
            a = a.astype(dt)
    dims = tuple(shape.dimensions())
    return np.broadcast_to(a, dims).copy() if a.ndim < len(dims) else a


# -- the evaluator --------------------------------------------------------------------------------------------
#: the graphs of each computation's called functions (fusions, private functions), imported once per
#: computation, not once per evaluation (an import reads the module: ~25 ms a function on the dumps)
_CALLEES: weakref.WeakKeyDictionary[XlaComputation, dict[str, Any]] = weakref.WeakKeyDictionary()


class _Evaluator:
    def __init__(self, comp: XlaComputation) -> None:
        self.comp = comp
        self.callees: dict[str, Any] = _CALLEES.setdefault(comp, {})
        self.current: dict[int, Value] = {}  # the values of the scope being evaluated (regions read it)
        # the graph and the values inside each call made from a recorded scope (:meth:`record_calls`),
        # by ``(id(caller's scope), id(call node))``: the error bounds follow a call's ops on them
        self.called: dict[tuple[int, int], tuple[Any, dict[int, Value]]] = {}
        self._recorded: set[int] = set()
        self._attrs: dict[tuple[int, str], tuple[Any, Any]] = {}  # the ops' attribute values read (:meth:`attr`)

    def record_calls(self, scope: dict[int, Value]) -> None:
        """Keep the values inside the calls made from ``scope`` (an env about to be evaluated, the
        main graph's) and, in turn, from those calls' scopes; not from regions (a loop's body runs
        many times). The scope must stay alive while this evaluator is used (ids are keys)."""
        self._recorded.add(id(scope))

    def forget(self, scope: dict[int, Value]) -> None:
        """Drop what was recorded of the calls made from ``scope`` (and, in turn, from theirs), before
        ``scope`` goes (one iteration of a loop's body): a later scope may get its id."""
        self._recorded.discard(id(scope))
        for key in [k for k in self.called if k[0] == id(scope)]:
            self.forget(self.called.pop(key)[1])

    def attr(self, node: XlaOp, name: str, default: Any = None) -> Any:
        # a loaded module's attribute is parsed from its text: once per op and evaluator, not per iteration
        attrs = node.attrs
        seen = self._attrs.get((id(attrs), name))
        if seen is not None and seen[0] is attrs:  # (the op's attributes kept: their id is not another's)
            v = seen[1]
        else:
            v = attrs.get(name)
            v = None if v is None else v.value if hasattr(v, "value") else v
            self._attrs[id(attrs), name] = (attrs, v)
        return default if v is None else v

    def fail(self, node: XlaOp, why: str) -> UnsupportedOpError:
        return UnsupportedOpError(f"reference evaluator: {node.opcode} {why}")

    def run_graph(self, roots: Sequence[XlaOp], env: dict[int, Value]) -> list[Value]:
        """Evaluate every node ``roots`` need that ``env`` lacks (creation order is topological)."""
        todo: dict[int, XlaOp] = {}
        stack = list(roots)
        while stack:
            o = stack.pop()
            if id(o) in env or id(o) in todo:
                continue
            if o.opdef is PARAMETER:
                raise XlaSdkError(f"reference evaluator: parameter {o.extra} has no value")  # pragma: no cover
            todo[id(o)] = o
            stack.extend(o.operands)
            for r in o.regions:
                stack.extend(r.captures)
                stack.extend(r.bindings or ())
        saved = self.current
        self.current = env
        try:
            for o in sorted(todo.values(), key=lambda n: n.id):
                env[id(o)] = self.node(o, env)
        finally:
            self.current = saved
        return [env[id(r)] for r in roots]

    def node(self, o: XlaOp, env: dict[int, Value]) -> Value:
        args = [env[id(x)] for x in o.operands]
        if o.opdef is GET_TUPLE_ELEMENT:
            return args[0][o.extra]
        if o.opdef is TUPLE:
            return tuple(args)
        rule = RULES.get(o.opcode)
        if rule is None:
            why = REFUSED.get(o.opcode)
            if why is not None:
                raise self.fail(o, f"is not evaluated by the reference: it {why}")
            raise self.fail(o, "has no evaluation rule yet (the reference evaluator cannot check this program)")
        return rule(o, args, self)

    def region(self, r: Region, args: Sequence[Value]) -> list[Value]:
        """The results of region ``r`` run on ``args`` (its block arguments); the outer values it
        reads come from the scope being evaluated."""
        env = self.current
        inner = dict(env)
        if r.bindings is not None:
            for p, b in zip(r.params, r.bindings, strict=True):
                inner[id(p)] = env[id(b)]
        else:
            if len(args) != len(r.params):
                raise XlaSdkError(f"reference evaluator: a region of {len(r.params)} arguments got {len(args)}")
            for p, a in zip(r.params, args, strict=True):
                inner[id(p)] = a
        return self.run_graph([*r.results, *r.effects], inner)[: len(r.results)]

    def callee(self, name: str) -> Any:
        """The graph of the function ``name`` of the module (imported once)."""
        from ..formats.graph_import import import_graph

        g = self.callees.get(name)
        if g is None:
            g = self.callees[name] = import_graph(self.comp.compiler_ir(), self.comp.name, name)
        return g

    def call(self, o: XlaOp, callee: str, args: list[Value]) -> Value:
        g = self.callee(callee)
        env: dict[int, Value] = {id(p): _out(a, p.shape) for p, a in zip(g.params, args, strict=True)}
        if id(self.current) in self._recorded:
            self.called[id(self.current), id(o)] = (g, env)
            self._recorded.add(id(env))
        outs = self.run_graph([*g.outputs, *g.effects], env)[: len(g.outputs)]
        return outs[0] if len(outs) == 1 else tuple(outs)


_ADDITIVE = frozenset({"stablehlo.add", "stablehlo.subtract", "stablehlo.reduce", "stablehlo.dot_general",
                       "stablehlo.dot", "stablehlo.convolution", "stablehlo.reduce_window", "stablehlo.fft"})
#: ops that run a function of the module (an XLA fusion is loaded as such a call): bounds and scales follow its ops
_CALLS = frozenset({"func.call", "stablehlo.composite"})


def _term_scale(o: XlaOp, args: list[Value]) -> float:
    """The largest magnitude among the terms ``o`` added (0 when it does not apply)."""
    arrays = [np.asarray(a) for a in args if isinstance(a, np.ndarray) and _is_float(a.dtype)]
    if not arrays:
        return 0.0
    with np.errstate(all="ignore"):
        if o.opcode in ("stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution") and len(arrays) == 2:
            # a product's terms: |x| |y| summed is at most max|x| max|y| times the contraction size
            x, y = (np.abs(_wide(a)) for a in arrays)
            big = float(np.max(x, initial=0.0)) * float(np.max(y, initial=0.0))
            return big * max(x.size, y.size) ** 0.5 if np.isfinite(big) else 0.0
        m = max(float(np.max(np.abs(_wide(a)), initial=0.0, where=np.isfinite(_wide(a)))) for a in arrays)
        if o.opcode == "stablehlo.fft":  # each output sums n terms, through log2(n) stages of rounding
            length = o.attrs.get("fft_length", ())
            length = getattr(length, "value", length)  # a loaded module's attribute holds its value
            n = max(int(np.prod([int(v) for v in length] or [1])), 1)
            return float(m * n ** 0.5 * max(1.0, math.log2(n)))
    return m


def _output_scale(node: XlaOp, env: dict[int, Value], ev: _Evaluator | None = None) -> float:
    """The term scale of the additive op (add, subtract, a sum, a dot, a convolution) that produced
    an output, looking through ops that only move or convert values and, with ``ev`` (which
    recorded the calls made from ``env``), into the function a call ran: the scale of its rounding
    error, whatever the result's size (a difference of two large numbers can be 0 in one correct
    rounding and 8 in another). Computed for the outputs only, from the main graph's values."""
    k = 0  # which result of a multi-result op the value is
    for _ in range(64):
        if node.opcode in _ADDITIVE:
            return _term_scale(node, [env[id(x)] for x in node.operands])
        if node.opcode in _CALLS and ev is not None and (id(env), id(node)) in ev.called:
            g, env = ev.called[id(env), id(node)]
            node, k = g.outputs[k if len(g.outputs) > 1 else 0], 0
            continue
        if not (node.opcode in _MOVES or node.opdef is GET_TUPLE_ELEMENT) or not node.operands:
            return 0.0
        k = node.extra if node.opdef is GET_TUPLE_ELEMENT else 0
        node = node.operands[0]
    return 0.0


_MOVES = frozenset({"stablehlo.reshape", "stablehlo.transpose", "stablehlo.broadcast_in_dim", "stablehlo.slice",
                    "stablehlo.convert", "stablehlo.copy", "mhlo.copy", "stablehlo.reverse", "stablehlo.negate",
                    "stablehlo.dynamic_slice", "stablehlo.concatenate", "stablehlo.optimization_barrier"})


# -- how far rounding can move each value: a first-order running error bound -----------------------------------
# XLA and the reference round differently at every op; an output's tolerance must cover what those
# roundings can do by the time they reach it. Each float value of the main graph gets a per-element
# bound of the error it may carry (:func:`_error_bounds`): its own rounding (:func:`_own_rounding`)
# plus its operands' bounds carried through the op: element-wise ops (:data:`_ELEMENTWISE`, the ops
# a region may hold) by evaluating the op's rule on the operands moved by their bounds
# (each sign); moves, slices, gathers and maxima by running the op's rule on the bounds themselves;
# sums, dots and convolutions as the root sum of squares of their terms' errors (e_x**2 * y**2 +
# x**2 * e_y**2 summed: rounding errors of different terms do not line up; the worst case, all of
# them with one sign, grows ~50x per layer of a tanh network whose real error grows ~4x). A call (an
# XLA fusion loaded from HLO, a private function of JAX's StableHLO) is followed op by op through
# the function it runs, from its operands' bounds (:func:`_call_bounds`); a loop through its body,
# every iteration the evaluator runs, each iteration's results' bounds the next one's operands'
# (:func:`_while_bounds`), a conditional through the branch it took (:func:`_branch_bounds`). Other
# ops (sorts, custom calls...) carry their operands' largest bound to every element. Complex values carry a
# bound of the modulus of their error (|z_xla - z_ref|, which bounds each component's error too):
# an element-wise op moves each operand alone by +-e and +-ie (:func:`_spread`). An output may be
# off by _BOUND_MARGIN times its bound (a margin applied once, at the end, not per op).
_LINEAR = _MOVES | frozenset({
    "stablehlo.pad", "stablehlo.gather", "stablehlo.dynamic_update_slice", "stablehlo.select",
    "stablehlo.real", "stablehlo.imag", "stablehlo.complex",
})
_BILINEAR = frozenset({"stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution"})
_SUMS = frozenset({"stablehlo.reduce", "stablehlo.reduce_window"})
_BOUND_MARGIN = 4.0  # how many times its carried error bound an output may be off by


def _eps(dtype: np.dtype[Any]) -> float:
    dt = np.dtype(dtype)
    if dt.kind == "c":
        dt = np.dtype(np.float32 if dt.itemsize == 8 else np.float64)
    return float(ml_dtypes.finfo(dt).eps) if _is_ml_float(dt) else float(np.finfo(dt).eps)


def _is_float_array(v: Any) -> bool:
    return isinstance(v, np.ndarray) and _is_float(v.dtype)


def _is_complex(v: Any) -> bool:
    return isinstance(v, np.ndarray) and v.dtype.kind == "c"


def _magnitude(v: Value) -> np.ndarray[Any, Any]:
    with np.errstate(all="ignore"):
        m = np.abs(_wide(np.asarray(v))).astype(np.float64)
    return np.asarray(np.where(np.isfinite(m), m, 0.0))


def _sum_kind(o: XlaOp) -> str | None:
    """``"add"`` or ``"max"`` for a reduce / reduce_window whose region is one such binary op."""
    if not o.regions:
        return None
    fn = _numpy_reducer(o.regions[0], np.dtype(np.float64))
    return {np.add: "add", np.maximum: "max", np.minimum: "max"}.get(fn)


def _carried(o: XlaOp, vals: list[Value], errs: list[np.ndarray[Any, Any] | None], out: np.ndarray[Any, Any],
             ev: _Evaluator) -> np.ndarray[Any, Any] | None:
    """The operands' error bounds carried through ``o`` to its value ``out`` (None: not carried)."""
    op = o.opcode
    rule = RULES.get(op)
    if rule is None:
        return None
    with np.errstate(all="ignore"):
        if op in _ELEMENTWISE and (out.dtype.kind == "c" or any(_is_complex(v) for v in vals)):
            return _spread(rule, o, vals, errs, out, ev)
        if op in _ELEMENTWISE:
            worst = np.zeros(out.shape, np.float64)
            moved = [k for k, e in enumerate(errs) if e is not None]
            for signs in range(1 << len(moved)):
                moves = {k: (-1.0 if signs >> bit & 1 else 1.0) * errs[k] for bit, k in enumerate(moved)}  # type: ignore[operator]
                worst = np.maximum(worst, _probe(rule, o, vals, moves, out, ev))
            return worst
        summing = op in _SUMS and _sum_kind(o) == "add"
        if op in _LINEAR or (op in _SUMS and _sum_kind(o) is not None):
            # a sum of terms with errors: their root sum of squares (rounding errors of different
            # terms do not line up); moves and maxima carry the bounds as they are
            carry: list[Any] = []
            for e, v in zip(errs, vals, strict=True):
                if e is not None:
                    carry.append(e * e if summing else e)
                else:
                    carry.append(np.zeros(np.shape(v), np.float64) if _is_float_array(v) else v)
            if op in _SUMS and len(vals) == 2:  # (operand, init): the init's error counts once
                carry[1] = np.zeros(np.shape(vals[1]), np.float64)
            spread = _magnitude(rule(_Widened(o), carry, ev))  # type: ignore[arg-type]
            return np.sqrt(spread) if summing else spread
        if op in _BILINEAR and len(vals) == 2:
            wide_o = _Widened(o)
            squares = [_magnitude(v) ** 2 for v in vals]
            total = np.zeros(out.shape, np.float64)
            if errs[0] is not None:
                total += _magnitude(rule(wide_o, [errs[0] ** 2, squares[1]], ev))  # type: ignore[arg-type]
            if errs[1] is not None:
                total += _magnitude(rule(wide_o, [squares[0], errs[1] ** 2], ev))  # type: ignore[arg-type]
            return np.sqrt(total)
    return None


def _probe(rule: Rule, o: Any, vals: list[Value], moves: Mapping[int, Any], base: np.ndarray[Any, Any],
           ev: _Evaluator) -> np.ndarray[Any, Any]:
    """``|rule(vals + moves) - base|`` per element for an element-wise op ``o`` whose value on
    ``vals`` is ``base``. Where a move takes an operand out of the op's domain (a non-finite value
    where ``base`` is finite: the square root of a sum of squares moved below 0), the move is
    halved there until it is inside: the device's operands, for which it gave a finite value, lie
    within."""
    wide_base = _wide(np.asarray(base))
    t: Any = 1.0
    shrink = all(np.shape(vals[k]) == wide_base.shape for k in moves)
    for _ in range(64):
        args = list(vals)
        for k, d in moves.items():
            args[k] = _wide(np.asarray(vals[k])) + t * np.broadcast_to(d, np.shape(vals[k]))
        got = _wide(np.asarray(rule(o, args, ev)))
        outside = ~np.isfinite(got) & np.isfinite(wide_base)
        if not shrink or not outside.any():
            break
        t = np.where(outside, 0.5 * t, t)
    diff = np.abs(got - wide_base)
    return np.asarray(np.where(np.isnan(diff), 0.0, diff))


def _spread(rule: Rule, o: Any, vals: list[Value], errs: Sequence[np.ndarray[Any, Any] | None],
            base: np.ndarray[Any, Any], ev: _Evaluator) -> np.ndarray[Any, Any]:
    """How far the element-wise op ``o`` (its value ``base`` on ``vals``) can move when its operands
    move by up to ``errs`` (a bound of each element's modulus; None: not moved), to first order:
    each operand alone moved by +-e, and a complex one by +-ie too. An operand's error d (|d| <= e)
    changes the value by L(d) for a map L linear over the reals, and |L(a + ib)| <= |a||L(1)| +
    |b||L(i)| <= hypot(|L(1)|, |L(i)|) when a^2 + b^2 <= 1 (Cauchy-Schwarz): the two directions
    combine as hypot, the operands add."""
    total = np.zeros(np.shape(base), np.float64)
    for k, e in enumerate(errs):
        if e is None:
            continue
        v = _wide(np.asarray(vals[k]))
        step = np.broadcast_to(e, v.shape)
        parts = []
        for direction in ((1.0, 1j) if v.dtype.kind == "c" else (1.0,)):
            worst = np.zeros(np.shape(base), np.float64)
            for sign in (1.0, -1.0):
                worst = np.maximum(worst, _probe(rule, o, vals, {k: (sign * direction) * step}, base, ev))
            parts.append(worst)
        total += np.hypot(parts[0], parts[1]) if len(parts) == 2 else parts[0]
    return total


def _call_bounds(o: XlaOp, vals: list[Value], errs: list[Any], env: dict[int, Value], ev: _Evaluator) -> Any:
    """The bounds of the results of call ``o`` (of scope ``env``, on ``vals`` carrying ``errs``): the
    function's ops followed one by one (:func:`_error_bounds`), on the values the evaluator
    recorded in this call, or, when it recorded none (an evaluator made without
    :meth:`_Evaluator.record_calls`), on the call evaluated again."""
    recorded = ev.called.get((id(env), id(o)))
    if recorded is None:
        g = ev.callee(_callee_name(o, ev))
        inner = {id(p): _out(a, p.shape) for p, a in zip(g.params, vals, strict=True)}
        ev.called[id(env), id(o)] = (g, inner)  # kept alive with its id, a key of the calls it makes
        ev.record_calls(inner)
        ev.run_graph([*g.outputs, *g.effects], inner)
    else:
        g, inner = recorded
    seeds = {id(p): e for p, e in zip(g.params, errs, strict=True) if e is not None}
    inside = _error_bounds(g.outputs, inner, ev, seeds)
    res = tuple(inside.get(id(x)) for x in g.outputs)
    return res[0] if len(res) == 1 else res


def _region_bounds(r: Region, args: Sequence[Value], arg_errs: Sequence[Any], env: dict[int, Value],
                   ev: _Evaluator, outer: Mapping[int, Any]) -> tuple[list[Value], list[Any]]:
    """Region ``r`` run on ``args`` (its block arguments, carrying ``arg_errs``; a branch's bound
    values instead, when it has bindings) in scope ``env`` (whose values carry the bounds ``outer``):
    the values of its results and their bounds, its ops followed one by one (:func:`_error_bounds`)."""
    inner = dict(env)
    seeds: dict[int, Any] = {id(c): outer.get(id(c)) for c in r.captures}
    if r.bindings is not None:
        for p, b in zip(r.params, r.bindings, strict=True):
            inner[id(p)], seeds[id(p)] = env[id(b)], outer.get(id(b))
    else:
        for p, a, e in zip(r.params, args, arg_errs, strict=True):
            inner[id(p)], seeds[id(p)] = a, e
    ev.record_calls(inner)  # the bounds follow the calls the region makes on the values they had
    try:
        vals = ev.run_graph([*r.results, *r.effects], inner)[: len(r.results)]
        inside = _error_bounds(r.results, inner, ev, seeds)
    finally:
        ev.forget(inner)
    return vals, [inside.get(id(x)) for x in r.results]


def _while_bounds(o: XlaOp, vals: list[Value], errs: list[Any], env: dict[int, Value], ev: _Evaluator,
                  outer: Mapping[int, Any]) -> Any:
    """The bounds of the results of loop ``o`` (of scope ``env``, whose values carry ``outer``; its
    operands ``vals`` carry ``errs``): its body followed op by op (:func:`_region_bounds`) on every
    iteration the evaluator runs, the bounds of an iteration's results carried into the next; the
    condition is run on the values alone (a loop whose trip count the device's rounding could change
    is not a loop the reference can check element by element anyway)."""
    cond, body = o.regions
    state, state_errs = list(vals), list(errs)
    saved = ev.current
    ev.current = env  # the scope the condition's region reads
    try:
        while bool(np.asarray(ev.region(cond, state)[0])):
            state, state_errs = _region_bounds(body, state, state_errs, env, ev, outer)
            ev.current = env
    finally:
        ev.current = saved
    return tuple(state_errs) if isinstance(_results(o, state), tuple) else state_errs[0]


def _branch_bounds(o: XlaOp, vals: list[Value], env: dict[int, Value], ev: _Evaluator,
                   outer: Mapping[int, Any]) -> Any:
    """The bounds of the results of conditional ``o`` (``stablehlo.if`` / ``case``, of scope ``env``
    whose values carry ``outer``): the branch it took (as its rule picks it) followed op by op."""
    i = int(np.asarray(vals[0]))
    n = len(o.regions)
    if o.opcode == "stablehlo.if":
        branch = o.regions[0] if bool(np.asarray(vals[0])) else o.regions[1]
    else:
        branch = o.regions[i if 0 <= i < n else n - 1]
    outs, errs = _region_bounds(branch, [], [], env, ev, outer)
    return tuple(errs) if isinstance(_results(o, outs), tuple) else errs[0]


#: ops with regions whose bounds follow their regions' ops
_CONTROL = frozenset({"stablehlo.while", "stablehlo.if", "stablehlo.case"})


class _Widened:
    """An op seen with a float64 result type (``dtype``), so that its rule computes error bounds in
    float64 (a bound is a magnitude, not a value of the op's type); with complex128, the exact
    value of a complex op."""

    def __init__(self, o: XlaOp, dtype: Any = np.float64) -> None:
        self._o = o
        shape = o.shape
        self.shape = Shape.array_shape(dtype, tuple(shape.dimensions())) if shape.is_array() else shape

    def __getattr__(self, name: str) -> Any:
        return getattr(self._o, name)


# Ops XLA computes correctly rounded (IEEE), or only moves: on the same inputs they give the reference's
# value exactly, and add no rounding of their own.
_EXACT = _MOVES | frozenset({
    "stablehlo.add", "stablehlo.subtract", "stablehlo.multiply", "stablehlo.divide", "stablehlo.sqrt",
    "stablehlo.remainder", "stablehlo.reduce_precision", "stablehlo.abs", "stablehlo.maximum", "stablehlo.minimum",
    "stablehlo.clamp", "stablehlo.select",
    "stablehlo.floor", "stablehlo.ceil", "stablehlo.round_nearest_even", "stablehlo.round_nearest_afz",
    "stablehlo.sign", "stablehlo.pad", "stablehlo.gather", "stablehlo.dynamic_update_slice", "stablehlo.scatter",
    "stablehlo.real", "stablehlo.imag", "stablehlo.complex", "stablehlo.constant", "stablehlo.iota",
    "stablehlo.bitcast_convert", "chlo.square", "chlo.next_after",
})
#: of those, the ops that round on complex numbers (a product's a*c - b*d, a modulus's hypot)
_INEXACT_COMPLEX = frozenset({"stablehlo.multiply", "stablehlo.divide", "stablehlo.sqrt", "stablehlo.abs",
                              "stablehlo.remainder", "chlo.square"})
_IMPL_ULPS = 4.0  # how far XLA's transcendental functions may be from the exact value, in ulps of f32/f64


def _flip(exact: np.ndarray[Any, Any], err: np.ndarray[Any, Any] | float, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """How far rounding ``exact`` moved by up to ``err`` to ``dtype`` can land from rounding
    ``exact`` itself: 0 away from a rounding boundary, a whole ulp of ``dtype`` next to one."""
    if exact.dtype.kind == "c":  # each component rounds alone; their moves combine in the modulus
        part = np.dtype(np.float32 if np.dtype(dtype).itemsize == 8 else np.float64)
        return np.asarray(np.hypot(_flip(exact.real, err, part), _flip(exact.imag, err, part)))
    with np.errstate(all="ignore"):
        base = exact.astype(dtype).astype(np.float64)
        up = np.abs((exact + err).astype(dtype).astype(np.float64) - base)
        down = np.abs((exact - err).astype(dtype).astype(np.float64) - base)
    return np.asarray(np.where(np.isfinite(up) & np.isfinite(down), np.maximum(up, down), 0.0))


def _compute_eps(dtype: np.dtype[Any]) -> float:
    """The precision XLA:CPU computes an op of ``dtype`` in: f32 for the types narrower than it (and
    complex64, of f32 components)."""
    dt = np.dtype(dtype)
    wide = dt.itemsize >= (16 if dt.kind == "c" else 8)
    return _eps(np.dtype(np.float64)) if wide else _eps(np.dtype(np.float32))


def _own_rounding(o: XlaOp, vals: list[Value], out: np.ndarray[Any, Any], ev: _Evaluator) -> np.ndarray[Any, Any]:
    """How far XLA's value of ``o`` may be from the reference's on the same operands: nothing for
    an op XLA rounds correctly (add, multiply, divide, sqrt, convert, moves...); for a sum, a dot or
    a convolution, an error of sqrt(terms) ulps (of its accumulation type) of the magnitude of its
    terms, for a transcendental function 4 ulps of the exact value, each then rounded to the
    result's type (where that rounding may land one ulp apart: only next to a rounding boundary);
    one ulp of the value for the ops whose work is not followed here (loops, sorts, custom calls).
    Complex: the modulus of the error, 4 ulps of the exact value's modulus for a product, a
    quotient, a modulus or a complex function (XLA:CPU's complex64 log(1 + z/1000), exp, sqrt, tanh
    and products stay within 1.6 ulps of it)."""
    op = o.opcode
    zero = np.zeros(out.shape, np.float64)
    cplx = out.dtype.kind == "c" or any(_is_complex(v) for v in vals)
    if op in _EXACT and not (cplx and op in _INEXACT_COMPLEX):
        return zero
    rule = RULES.get(op)
    eps_out = _eps(out.dtype)
    if rule is None or not all(isinstance(v, np.ndarray) for v in vals):
        return eps_out * _magnitude(out)
    eps = _compute_eps(out.dtype)
    with np.errstate(all="ignore"):
        wide: Any = _Widened(o)  # the op with a float64 result: its rule gives magnitudes
        exact_op: Any = _Widened(o, np.complex128) if out.dtype.kind == "c" else wide  # and the exact value
        if op in _BILINEAR and len(vals) == 2:
            terms = _magnitude(rule(wide, [_magnitude(v) for v in vals], ev))
            k = max(vals[0].size * vals[1].size / max(out.size, 1), 1.0) ** 0.25  # sqrt of the contraction size
            exact = np.asarray(rule(exact_op, vals, ev))
            return _flip(exact, eps * k * terms, out.dtype)
        if op in _SUMS and _sum_kind(o) == "add" and len(vals) == 2:
            terms = _magnitude(rule(wide, [_magnitude(vals[0]), np.zeros(np.shape(vals[1]))], ev))
            k = max(vals[0].size / max(out.size, 1), 1.0) ** 0.5
            exact = np.asarray(rule(exact_op, vals, ev))
            return _flip(exact, eps * k * terms, out.dtype)
        if op in _ELEMENTWISE:
            exact = np.asarray(rule(exact_op, vals, ev))
            return _flip(exact, _IMPL_ULPS * eps * _magnitude(exact), out.dtype)
    return eps_out * _magnitude(out)


class _OutputScale(float):
    """An output's term scale (a float, as :func:`_output_scale` gives it) with the per-element
    error bound (:func:`_error_bounds`) its value carries, or None, in ``bound``."""

    bound: np.ndarray[Any, Any] | None

    def __new__(cls, value: float, bound: Any = None) -> _OutputScale:
        self = super().__new__(cls, value)
        self.bound = bound if isinstance(bound, np.ndarray) else None
        return self


def _error_bounds(outputs: Sequence[XlaOp], env: dict[int, Value], ev: _Evaluator,
                  seeds: Mapping[int, Any] | None = None) -> dict[int, Any]:
    """Per float or complex node of the graph that ``outputs`` read (``env``: its values): a
    per-element bound (float64 array of the value's shape; a tuple of them for several results) of
    the rounding error its value may carry (see the comment above :data:`_LINEAR`). ``seeds``: the
    bounds its parameters carry in (a called function's, from the call's operands; else none)."""
    nodes: dict[int, XlaOp] = {}
    bounds: dict[int, Any] = dict(seeds or {})
    stack = list(outputs)
    while stack:
        o = stack.pop()
        if id(o) in nodes or id(o) not in env:
            continue
        nodes[id(o)] = o
        if id(o) in bounds:  # a seeded value (a parameter, or an outer value a region reads)
            continue
        stack.extend(o.operands)
        for r in o.regions:  # the outer values a region reads (a loop's body, a branch)
            stack.extend(r.captures)
            stack.extend(r.bindings or ())
    saved = ev.current
    ev.current = env  # the scope the regions of the ops' rules read
    try:
        _follow(nodes, bounds, env, ev)
    finally:
        ev.current = saved
    return bounds


def _follow(nodes: dict[int, XlaOp], bounds: dict[int, Any], env: dict[int, Value], ev: _Evaluator) -> None:
    """The bounds of ``nodes`` (of scope ``env``) into ``bounds``, in creation order (see :func:`_error_bounds`)."""
    for o in sorted(nodes.values(), key=lambda n: n.id):
        if id(o) in bounds:  # a seeded parameter
            continue
        out = env[id(o)]
        vals = [env[id(x)] for x in o.operands]
        errs = [bounds.get(id(x)) if isinstance(bounds.get(id(x)), np.ndarray) else None for x in o.operands]
        if o.opdef is GET_TUPLE_ELEMENT:
            e = bounds.get(id(o.operands[0]))
            if isinstance(e, tuple) and o.extra < len(e):
                bounds[id(o)] = e[o.extra]
            continue
        if o.opcode in _CALLS:
            bounds[id(o)] = _call_bounds(o, vals, [bounds.get(id(x)) for x in o.operands], env, ev)
            continue
        if o.opcode == "stablehlo.while" and len(o.regions) == 2:
            bounds[id(o)] = _while_bounds(o, vals, [bounds.get(id(x)) for x in o.operands], env, ev, bounds)
            continue
        if o.opcode in _CONTROL and o.regions and vals:
            bounds[id(o)] = _branch_bounds(o, vals, env, ev, bounds)
            continue
        if isinstance(out, tuple):  # several results: each carries the largest bound in
            top = max((float(np.max(e, initial=0.0)) for e in errs if e is not None), default=0.0)
            bounds[id(o)] = tuple(np.full(np.shape(r), top) + _eps(r.dtype) * _magnitude(r) if _is_float_array(r)
                                  else None for r in out)
            continue
        if not _is_float_array(out):
            continue
        own = _own_rounding(o, vals, out, ev) if o.opdef is not PARAMETER and o.opcode != "stablehlo.constant" \
            else np.zeros(out.shape, np.float64)
        if not any(e is not None and e.any() for e in errs):
            bounds[id(o)] = own
            continue
        try:
            carried = _carried(o, vals, errs, out, ev)
        except Exception:  # noqa: BLE001 - a rule that cannot take bounds: carry the largest
            carried = None
        if carried is None:
            carried = np.full(out.shape, max(float(np.max(e, initial=0.0)) for e in errs if e is not None))
        total = own + np.broadcast_to(np.asarray(carried, np.float64), out.shape)
        bounds[id(o)] = np.where(np.isnan(total), 0.0, total)


def evaluate(computation: XlaComputation, *args: Any) -> list[np.ndarray[Any, Any]]:
    """The outputs of ``computation`` on ``args``, computed by the reference evaluator.

    Parameters
    ----------
    computation: an :class:`~xlasdk.XlaComputation`, built or loaded.
    args: one array (or scalar) per parameter, of the parameter's shape and element type.

    Returns
    -------
    list of numpy arrays, one per output (a tuple result is flattened), in the outputs' element
    types (``ml_dtypes`` types for bf16 and fp8).

    Raises
    ------
    UnsupportedOpError
        An op of the program has no rule here (the message names it).
    ShapeError, DTypeError
        Wrong number of arguments, or one of the wrong shape or element type.
    """
    return _reference(computation, args, scales=False)[0]


def _reference(computation: XlaComputation, args: Sequence[Any], scales: bool = True,
               callees: dict[str, Any] | None = None) -> tuple[list[np.ndarray[Any, Any]], list[float]]:
    """The reference outputs and, per output (``scales``; else none), the term scale of the op that
    produced it with the per-element error bound its value carries (:class:`_OutputScale`).
    ``callees``: the called functions' graphs, shared by the evaluators of several simulated devices."""
    from ..errors import DTypeError, ShapeError

    g = computation.instruction_graph()
    if len(args) != len(g.params):
        raise ShapeError(f"evaluate: {computation.name!r} takes {len(g.params)} arguments, got {len(args)}")
    env: dict[int, Value] = {}
    for i, (p, a) in enumerate(zip(g.params, args, strict=True)):
        arr = np.asarray(a)
        want = _dtype(p.shape)
        if arr.shape != tuple(p.shape.dimensions()):
            raise ShapeError(f"evaluate: argument {i} has shape {arr.shape}, parameter {i} is {p.shape}")
        if arr.dtype != want and not isinstance(a, (bool, int, float, complex)):  # as exe(...) checks them
            raise DTypeError(f"evaluate: argument {i} has element type {arr.dtype}, parameter {i} is {p.shape}")
        env[id(p)] = arr.astype(want, copy=False)
    ev = _Evaluator(computation)
    if callees is not None:
        ev.callees = callees
    if scales:  # the bounds follow the calls' ops on the values they had
        ev.record_calls(env)
    outs = ev.run_graph([*g.outputs, *g.effects], env)[: len(g.outputs)]
    if not scales:  # the values alone (evaluate): no error bounds to carry
        return [np.asarray(o) for o in outs], []
    bounds = _error_bounds(g.outputs, env, ev)
    return [np.asarray(o) for o in outs], [_OutputScale(_output_scale(o, env, ev), bounds.get(id(o)))
                                           for o in g.outputs]


# -- rules: element-wise ----------------------------------------------------------------------------------------
def _unary(fn: Callable[[Any], Any]) -> Rule:
    def rule(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
        with np.errstate(all="ignore"):
            return _out(fn(_wide(a[0])), o.shape)
    return rule


_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _erfinv(y: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The inverse of erf in float64: a first guess refined by Newton's method to full precision;
    +-1 give +-inf and |y| > 1 NaN."""
    y = np.asarray(y, dtype=np.float64)
    with np.errstate(all="ignore"):
        w = -np.log((1.0 - y) * (1.0 + y))
        x = np.sign(y) * np.sqrt(np.maximum(w, 0.0) * 0.5 + 1e-300) * np.where(np.abs(y) < 0.9, 1.0, 1.0)
        x = np.where(np.abs(y) < 0.5, y * np.sqrt(np.pi) / 2, x)
        for _ in range(60):
            err = _erf(x) - y
            step = err / (2.0 / np.sqrt(np.pi) * np.exp(-x * x))
            x = np.where(np.isfinite(step), x - step, x)
    return np.where(np.abs(y) == 1, np.sign(y) * np.inf, np.where(np.abs(y) > 1, np.nan, x))

_UNARY: dict[str, Callable[[Any], Any]] = {
    "stablehlo.abs": np.abs, "stablehlo.negate": np.negative, "stablehlo.exponential": np.exp,
    "stablehlo.exponential_minus_one": np.expm1, "stablehlo.log": np.log, "stablehlo.log_plus_one": np.log1p,
    "stablehlo.sqrt": np.sqrt, "stablehlo.rsqrt": lambda x: 1.0 / np.sqrt(x), "stablehlo.cbrt": np.cbrt,
    "stablehlo.sine": np.sin, "stablehlo.cosine": np.cos, "stablehlo.tan": np.tan, "stablehlo.tanh": np.tanh,
    "stablehlo.logistic": lambda x: 1.0 / (1.0 + np.exp(-x)), "stablehlo.floor": np.floor,
    "stablehlo.ceil": np.ceil, "stablehlo.round_nearest_even": np.rint,
    "stablehlo.round_nearest_afz": lambda x: np.copysign(np.floor(np.abs(x) + 0.5), x),
    "stablehlo.is_finite": np.isfinite, "stablehlo.real": np.real, "stablehlo.imag": np.imag,
    "chlo.erf": _erf, "chlo.erfc": _erfc, "chlo.erf_inv": _erfinv,
    "mhlo.erf": _erf,  # what XLA's HLO -> StableHLO import makes of HLO's erf
}
_lgamma = np.vectorize(lambda v: math.lgamma(v) if not (v <= 0 and v == math.floor(v)) else math.inf,
                       otypes=[np.float64])


def _digamma(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """psi(x) in float64: the reflection psi(1 - x) - pi / tan(pi x) below 1/2, the recurrence
    psi(x) = psi(x + 1) - 1/x up to x >= 10, then the asymptotic series (error < 1e-15); NaN at
    the poles 0, -1, -2, ... (XLA's CHLO decomposition gives NaN there too)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        reflect = x < 0.5
        y = np.where(reflect, 1.0 - x, x)
        acc = np.zeros_like(y)
        for _ in range(10):
            small = y < 10
            acc = np.where(small, acc - 1.0 / y, acc)
            y = np.where(small, y + 1.0, y)
        inv2 = 1.0 / (y * y)
        series = (np.log(y) - 0.5 / y - inv2 * (1.0 / 12 - inv2 * (1.0 / 120 - inv2 * (1.0 / 252 - inv2 * (
            1.0 / 240 - inv2 * (1.0 / 132))))))
        psi = series + acc
        psi = np.where(reflect, psi - np.pi / np.tan(np.pi * x), psi)
        return np.where((x <= 0) & (x == np.floor(x)), np.nan, psi)


def _next_after(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    """The float of the result's type next to x in the direction of y, from the bits (for every
    float type, bf16 and fp8 included): y when they are equal, NaN when either is."""
    x, y = np.asarray(a[0]), np.asarray(a[1])
    dt = _dtype(o.shape)
    x, y = np.broadcast_arrays(x.astype(dt), y.astype(dt))
    width = dt.itemsize
    bits = np.ascontiguousarray(x).view(np.dtype(f"u{width}")).astype(np.int64)
    xf, yf = _wide(x), _wide(y)
    sign_bit = np.int64(1) << np.int64(8 * width - 1)
    with np.errstate(all="ignore"):
        toward_bigger_magnitude = (xf < yf) == (xf > 0)
        step = np.where(toward_bigger_magnitude, bits + 1, bits - 1)
        tiny = np.where(yf < 0, sign_bit | 1, 1)  # from +-0: the smallest subnormal on y's side
        out = np.where(xf == 0, tiny, step)
    res = out.astype(np.dtype(f"u{width}")).view(dt)
    res = np.where(xf == yf, y, res)
    return _out(np.where(np.isnan(xf) | np.isnan(yf), np.nan, _wide(np.asarray(res))), o.shape)


def _scipy_special(name: str) -> Callable[..., Any] | None:
    try:
        import scipy.special  # an optional dependency: pip install "xlasdk[reference]"
    except ImportError:
        return None
    fn: Callable[..., Any] = getattr(scipy.special, name)
    return fn


def _needs_scipy(name: str, nargs: int) -> Rule:
    def rule(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
        fn = _scipy_special(name)
        if fn is None:
            raise ev.fail(o, f"needs scipy for its reference values (scipy.special.{name}): pip install "
                             "'xlasdk[reference]'")
        with np.errstate(all="ignore"):
            return _out(fn(*(_wide(v) for v in a[:nargs])), o.shape)
    return rule


_UNARY.update({
    "chlo.sinh": np.sinh, "chlo.cosh": np.cosh, "chlo.asinh": np.arcsinh, "chlo.acosh": np.arccosh,
    "chlo.atanh": np.arctanh, "chlo.asin": np.arcsin, "chlo.acos": np.arccos, "chlo.atan": np.arctan,
    "chlo.tan": np.tan, "chlo.square": lambda x: x * x, "chlo.conj": np.conj, "chlo.lgamma": _lgamma,
    "chlo.digamma": _digamma, "chlo.is_inf": np.isinf, "chlo.is_pos_inf": np.isposinf,
    "chlo.is_neg_inf": np.isneginf,
})
for _name, _fn in _UNARY.items():
    RULES[_name] = _unary(_fn)
RULES["chlo.next_after"] = _next_after
RULES["chlo.bessel_i1e"] = _needs_scipy("i1e", 1)
RULES["chlo.zeta"] = _needs_scipy("zeta", 2)
RULES["chlo.polygamma"] = _needs_scipy("polygamma", 2)


@_rule("stablehlo.fft")
def _fft(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    """FFT / IFFT / RFFT / IRFFT over the last ``len(fft_length)`` dimensions, in complex128
    (numpy.fft), rounded once to the result type."""
    kind = str(ev.attr(o, "fft_type", "FFT"))
    lengths = [int(v) for v in ev.attr(o, "fft_length", ())]
    axes = tuple(range(-len(lengths), 0))
    x = _wide(a[0])
    y: np.ndarray[Any, Any]
    with np.errstate(all="ignore"):
        if kind == "FFT":
            y = np.fft.fftn(x, axes=axes)
        elif kind == "IFFT":
            y = np.fft.ifftn(x, axes=axes)
        elif kind == "RFFT":
            y = np.fft.rfftn(x, s=lengths, axes=axes)
        elif kind == "IRFFT":
            y = np.fft.irfftn(x, s=lengths, axes=axes)
        else:
            raise ev.fail(o, f"of type {kind} has no evaluation rule")
    return _out(y, o.shape)


@_rule("stablehlo.reduce_precision")
def _reduce_precision(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    """Round to ``mantissa_bits`` (to nearest, ties to even) and clamp to ``exponent_bits``:
    past the largest exponent to +-inf, at or below the smallest normal one to +-0 (no
    subnormals); NaN stays as it is (a NaN when no mantissa bit is kept). On the value's bits, as
    XLA defines the op."""
    x = np.asarray(a[0])
    dt = x.dtype
    info = ml_dtypes.finfo(dt) if _is_ml_float(dt) else np.finfo(dt)
    width = dt.itemsize * 8
    src_mant = int(info.nmant)
    src_exp = width - 1 - src_mant
    mant = int(ev.attr(o, "mantissa_bits"))
    exp = int(ev.attr(o, "exponent_bits"))
    u = np.dtype(f"u{dt.itemsize}")
    bits = np.ascontiguousarray(x).view(u).astype(np.uint64)
    one = np.uint64(1)
    if mant < src_mant:
        shift = np.uint64(src_mant - mant)
        last = one << shift
        bias = (last >> one) - one + ((bits & last) >> shift)
        bits = (bits + bias) & ~(last - one) & np.uint64((1 << width) - 1)
    if exp < src_exp:
        sign = one << np.uint64(width - 1)
        exp_mask = np.uint64(((1 << src_exp) - 1) << src_mant)
        src_bias = (1 << (src_exp - 1)) - 1
        reduced_bias = (1 << (exp - 1)) - 1
        x_exp = bits & exp_mask
        overflow = x_exp > np.uint64((src_bias + reduced_bias) << src_mant)
        underflow = x_exp <= np.uint64((src_bias - reduced_bias) << src_mant)
        signed_zero = bits & sign
        bits = np.where(overflow, signed_zero | exp_mask, np.where(underflow, signed_zero, bits))
    out = bits.astype(u).view(dt)
    nan = np.isnan(_wide(x))
    if nan.any():
        out = np.where(nan, x if mant > 0 else np.asarray(np.nan, dt), out)
    return _out(out, o.shape)


@_rule("stablehlo.map")
def _map(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    """The region applied element by element (all elements at once: it must be element-wise)."""
    (body,) = o.regions
    _check_elementwise(body, o, ev)
    return _results(o, ev.region(body, list(a)))


@_rule("stablehlo.sign")
def _sign(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    x = _wide(a[0])
    if x.dtype.kind == "c":
        with np.errstate(all="ignore"):
            m = np.abs(x)
            return _out(np.where(m == 0, 0, x / np.where(m == 0, 1, m)), o.shape)
    if x.dtype.kind == "f":  # NaN stays NaN and -0 stays -0
        return _out(np.where(np.isnan(x) | (x == 0), x, np.sign(x)), o.shape)
    return _out(np.sign(x), o.shape)


@_rule("stablehlo.not")
def _not(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    x = a[0]
    return _out(np.logical_not(x) if x.dtype == np.bool_ else np.invert(x), o.shape)


@_rule("stablehlo.popcnt")
def _popcnt(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    x = a[0]
    u = x.view(np.dtype(f"u{x.dtype.itemsize}"))
    bits = np.unpackbits(u.reshape(-1, 1).view(np.uint8), axis=1).sum(axis=1)
    return _out(bits.reshape(x.shape), o.shape)


@_rule("stablehlo.count_leading_zeros")
def _clz(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    x = a[0]
    width = x.dtype.itemsize * 8
    u = x.view(np.dtype(f"u{x.dtype.itemsize}")).astype(np.uint64)
    n = np.full(x.shape, width, np.int64)
    for k in range(width):
        n = np.where((u >> np.uint64(k)) & np.uint64(1), width - 1 - k, n)
    return _out(n, o.shape)


def _binary(fn: Callable[[Any, Any], Any]) -> Rule:
    def rule(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
        with np.errstate(all="ignore"):
            return _out(fn(_wide(a[0]), _wide(a[1])), o.shape)
    return rule


def _int_div(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """XLA's integer division: toward zero; x / 0 is -1 (all ones); INT_MIN / -1 is INT_MIN."""
    dt = x.dtype
    zero = y == 0
    safe = np.where(zero, 1, y)
    if dt.kind == "i":
        overflow = (x == np.iinfo(dt).min) & (safe == -1)
        safe = np.where(overflow, 1, safe)
        q = np.abs(x.astype(np.int64)) // np.abs(safe.astype(np.int64))
        q = np.where((x < 0) != (safe < 0), -q, q).astype(dt)
        q = np.where(overflow, x, q)
        return np.where(zero, np.array(-1, dt), q)
    return np.where(zero, np.array(np.iinfo(dt).max, dt), x // safe)


def _int_rem(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """XLA's integer remainder: the sign of the dividend; x % 0 is x; INT_MIN % -1 is 0."""
    zero = y == 0
    safe = np.where(zero, 1, y)
    if x.dtype.kind == "i":
        safe = np.where((x == np.iinfo(x.dtype).min) & (safe == -1), 1, safe)
        r = np.fmod(x.astype(np.int64), safe.astype(np.int64)).astype(x.dtype)
    else:
        r = x % safe
    return np.where(zero, x, r)


def _shift(kind: str) -> Rule:
    def rule(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
        x, s = a
        dt = x.dtype
        width = dt.itemsize * 8
        u = x.view(np.dtype(f"u{dt.itemsize}"))
        su = s.astype(np.int64)
        past = (su < 0) | (su >= width)
        sc = np.where(past, 0, su).astype(u.dtype)
        with np.errstate(all="ignore"):
            if kind == "left":
                r = np.where(past, 0, u << sc).astype(u.dtype).view(dt)
            elif kind == "logical":
                r = np.where(past, 0, u >> sc).astype(u.dtype).view(dt)
            else:  # arithmetic: fill with the sign bit
                xi = x.astype(np.int64) if dt.kind == "i" else x.view(np.dtype(f"i{dt.itemsize}")).astype(np.int64)
                r64 = np.where(past, np.where(xi < 0, -1, 0), xi >> np.where(past, 0, su))
                r = r64.astype(np.dtype(f"i{dt.itemsize}")).view(dt)
        return _out(r, o.shape)
    return rule


RULES["stablehlo.shift_left"] = _shift("left")
RULES["stablehlo.shift_right_logical"] = _shift("logical")
RULES["stablehlo.shift_right_arithmetic"] = _shift("arithmetic")


def _arith(fn: Callable[[Any, Any], Any], int_fn: Callable[[Any, Any], Any] | None = None) -> Rule:
    def rule(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
        x, y = a
        with np.errstate(all="ignore"):
            if x.dtype.kind in "iub":
                return _out((int_fn or fn)(x, y), o.shape)
            return _out(fn(_wide(x), _wide(y)), o.shape)
    return rule


def _maxmin(fn: Callable[[Any, Any], Any]) -> Rule:
    def rule(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
        x, y = a
        if x.dtype.kind == "c":  # XLA orders complex numbers lexicographically (real, then imaginary)
            pick_x = (x.real > y.real) | ((x.real == y.real) & (x.imag >= y.imag))
            if fn is np.minimum:
                pick_x = ~pick_x | ((x.real == y.real) & (x.imag == y.imag))
            return _out(np.where(pick_x, x, y), o.shape)
        wx, wy = _wide(x), _wide(y)
        r = fn(wx, wy)  # NaN propagates, as in XLA
        if wx.dtype.kind == "f":  # max(+0, -0) is +0 and min(+0, -0) is -0, whatever the order
            both = (wx == 0) & (wy == 0)
            neg = np.signbit(wx) & np.signbit(wy) if fn is np.maximum else np.signbit(wx) | np.signbit(wy)
            r = np.where(both, np.where(neg, -0.0, 0.0), r)
        return _out(r, o.shape)
    return rule


RULES.update({
    "stablehlo.add": _arith(np.add), "stablehlo.subtract": _arith(np.subtract),
    "stablehlo.multiply": _arith(np.multiply), "stablehlo.divide": _arith(np.divide, _int_div),
    "stablehlo.remainder": _arith(np.fmod, _int_rem), "stablehlo.power": _arith(np.power),
    "stablehlo.atan2": _binary(np.arctan2),
    "stablehlo.maximum": _maxmin(np.maximum), "stablehlo.minimum": _maxmin(np.minimum),
    "stablehlo.and": _arith(np.logical_and, np.bitwise_and), "stablehlo.or": _arith(np.logical_or, np.bitwise_or),
    "stablehlo.xor": _arith(np.logical_xor, np.bitwise_xor),  # bool operands take the bitwise form too
    "stablehlo.complex": _binary(lambda x, y: x + 1j * y),
})


def _total_order_key(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Integers ordered as XLA's TOTALORDER orders floats (-NaN < -inf < ... < -0 < +0 < ... < NaN)."""
    bits = np.ascontiguousarray(x.astype(np.float64)).view(np.int64)
    return bits ^ ((bits >> np.int64(63)) & np.int64(0x7FFF_FFFF_FFFF_FFFF))


@_rule("stablehlo.compare")
def _compare(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    x, y = a
    direction = ev.attr(o, "comparison_direction")
    ctype = ev.attr(o, "compare_type")
    if ctype == "TOTALORDER" and _is_float(x.dtype):
        x, y = _total_order_key(x), _total_order_key(y)
    elif x.dtype.kind == "c":
        if direction not in ("EQ", "NE"):
            raise ev.fail(o, f"{direction} of complex numbers is not an XLA comparison")
    else:
        x, y = _wide(x), _wide(y)
    fn = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal, "GT": np.greater,
          "GE": np.greater_equal}.get(str(direction))
    if fn is None:
        raise ev.fail(o, f"with comparison direction {direction!r}")
    return _out(fn(x, y), o.shape)


@_rule("stablehlo.select")
def _select(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    return _out(np.where(a[0], a[1], a[2]), o.shape)


@_rule("stablehlo.clamp")
def _clamp(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    lo, x, hi = (_wide(v) for v in a)
    return _out(np.minimum(np.maximum(x, lo), hi), o.shape)


def _result_shapes(o: XlaOp) -> list[Shape]:
    """One shape per result of ``o`` (several results make a tuple shape)."""
    return list(o.shape.tuple_shapes()) if o.shape.is_tuple() and not o.opdef.tuple_result else [o.shape]


def _results(o: XlaOp, values: Sequence[Value]) -> Value:
    """``o``'s value from its results: the one result, or a tuple of several."""
    return values[0] if len(values) == 1 and len(_result_shapes(o)) == 1 else tuple(values)


def _numpy_reducer(r: Region, dtype: np.dtype[Any]) -> Any:
    """numpy's ufunc for a region that is one of the usual reducers of its two parameters (add,
    multiply, max, min, and, or: bitwise for integers), else None."""
    if len(r.results) != 1 or len(r.params) != 2:
        return None
    res = r.results[0]
    fn = _REDUCERS.get(res.opcode)
    if fn is None or len(res.operands) != 2 or set(map(id, res.operands)) != set(map(id, r.params)):
        return None
    if dtype.kind in "iu" and fn in (np.logical_and, np.logical_or):
        return np.bitwise_and if fn is np.logical_and else np.bitwise_or
    return fn


# -- rules: conversions and constants -----------------------------------------------------------------------------
@_rule("stablehlo.constant")
def _constant(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    v = ev.attr(o, "value")
    if not isinstance(v, np.ndarray):
        raise ev.fail(o, f"of element type {o.shape.element_type().name} (its literal is not readable here)")
    return _out(v, o.shape)


@_rule("stablehlo.iota")
def _iota(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    d = int(ev.attr(o, "iota_dimension"))
    dims = o.shape.dimensions()
    idx = np.arange(dims[d]).reshape([-1 if k == d else 1 for k in range(len(dims))])
    return _out(np.broadcast_to(idx, dims), o.shape)


@_rule("stablehlo.convert")
def _convert(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    x = a[0]
    dt = _dtype(o.shape)
    if dt.kind in "iu" and _is_float(x.dtype):
        w = _wide(x)
        if w.dtype.kind == "c":
            w = w.real
        info = np.iinfo(dt)
        t = np.trunc(np.where(np.isnan(w), 0.0, w))  # XLA:CPU: NaN -> 0, out of range saturates
        hi, lo = t >= float(info.max), t <= float(info.min)
        mid = np.where(hi | lo, 0.0, t).astype(np.uint64 if dt.kind == "u" else np.int64)
        r = np.where(hi, np.array(info.max, dt), np.where(lo, np.array(info.min, dt), mid.astype(dt)))
        return _out(r, o.shape)
    if dt == np.bool_:
        return _out(x != 0, o.shape)
    if x.dtype.kind == "c" and dt.kind != "c":
        return _out(_wide(x).real, o.shape)
    return _out(_wide(x), o.shape)


@_rule("stablehlo.bitcast_convert")
def _bitcast(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    x = np.ascontiguousarray(a[0])
    dt = _dtype(o.shape)
    if dt.itemsize == x.dtype.itemsize:  # the same width: element by element (also in folded regions)
        return x.view(dt)
    return _out(x.view(dt).reshape(o.shape.dimensions()), o.shape)


@_rule("mhlo.copy", "stablehlo.copy")
def _copy(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    return a[0]


@_rule("stablehlo.optimization_barrier")
def _barrier(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    return a[0] if len(a) == 1 else tuple(a)


# -- rules: shapes -----------------------------------------------------------------------------------------------
@_rule("stablehlo.broadcast_in_dim")
def _bcast(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    dims = tuple(ev.attr(o, "broadcast_dimensions", ()))
    out = o.shape.dimensions()
    x = a[0]
    shape = [1] * len(out)
    for i, d in enumerate(dims):
        shape[d] = x.shape[i]
    return _out(np.broadcast_to(x.reshape(shape), out), o.shape)


@_rule("stablehlo.reshape")
def _reshape(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    return _out(a[0].reshape(o.shape.dimensions()), o.shape)


@_rule("stablehlo.transpose")
def _transpose(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    return _out(np.transpose(a[0], tuple(ev.attr(o, "permutation"))), o.shape)


@_rule("stablehlo.reverse")
def _reverse(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    return _out(np.flip(a[0], tuple(ev.attr(o, "dimensions"))), o.shape)


@_rule("stablehlo.slice")
def _slice(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    starts, limits, strides = (ev.attr(o, k) for k in ("start_indices", "limit_indices", "strides"))
    return _out(a[0][tuple(slice(s, e, t) for s, e, t in zip(starts, limits, strides, strict=True))], o.shape)


def _clamped_starts(x: np.ndarray[Any, Any], starts: Sequence[Any], sizes: Sequence[int]) -> list[int]:
    """XLA clamps each start to [0, dim - size]."""
    return [int(min(max(int(np.asarray(s)), 0), d - n)) for s, d, n in zip(starts, x.shape, sizes, strict=True)]


@_rule("stablehlo.dynamic_slice")
def _dynamic_slice(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    sizes = tuple(ev.attr(o, "slice_sizes"))
    starts = _clamped_starts(a[0], a[1:], sizes)
    return _out(a[0][tuple(slice(s, s + n) for s, n in zip(starts, sizes, strict=True))], o.shape)


@_rule("stablehlo.dynamic_update_slice")
def _dynamic_update_slice(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    x, upd = a[0].copy(), a[1]
    starts = _clamped_starts(x, a[2:], upd.shape)
    x[tuple(slice(s, s + n) for s, n in zip(starts, upd.shape, strict=True))] = upd
    return _out(x, o.shape)


@_rule("stablehlo.concatenate")
def _concat(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    return _out(np.concatenate(a, axis=int(ev.attr(o, "dimension"))), o.shape)


@_rule("stablehlo.pad")
def _pad(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    x, value = a
    lo, hi, interior = (tuple(ev.attr(o, k)) for k in ("edge_padding_low", "edge_padding_high", "interior_padding"))
    # interior padding first, then edges (negative edges cut)
    shape = [d + max(d - 1, 0) * i for d, i in zip(x.shape, interior, strict=True)]
    grown = np.full(shape, value, x.dtype)
    grown[tuple(slice(None, None, i + 1) for i in interior)] = x
    full = np.full([s + max(lo_, 0) + max(hi_, 0) for s, lo_, hi_ in zip(shape, lo, hi, strict=True)], value, x.dtype)
    full[tuple(slice(max(lo_, 0), max(lo_, 0) + s) for s, lo_ in zip(shape, lo, strict=True))] = grown
    cut = tuple(slice(max(-lo_, 0), full.shape[k] - max(-hi_, 0)) for k, (lo_, hi_) in enumerate(zip(lo, hi,
                                                                                                    strict=True)))
    return _out(full[cut], o.shape)


# -- rules: contractions and reductions ---------------------------------------------------------------------------
def _dot(o: XlaOp, x: np.ndarray[Any, Any], y: np.ndarray[Any, Any], dn: dict[str, tuple[int, ...]]) -> Value:
    lb, rb = dn.get("lhs_batching_dimensions", ()), dn.get("rhs_batching_dimensions", ())
    lc, rc = dn.get("lhs_contracting_dimensions", ()), dn.get("rhs_contracting_dimensions", ())
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    ls = [next(letters) for _ in range(x.ndim)]
    rs = [next(letters) for _ in range(y.ndim)]
    for i, j in zip(lb, rb, strict=True):
        rs[j] = ls[i]
    for i, j in zip(lc, rc, strict=True):
        rs[j] = ls[i]
    out = [ls[i] for i in lb] + [ls[i] for i in range(x.ndim) if i not in lb and i not in lc] + [
        rs[j] for j in range(y.ndim) if j not in rb and j not in rc]
    wide_x, wide_y = _wide(x), _wide(y)
    if wide_x.dtype.kind in "iub":  # integers: exact in int64, wrapped to the result type
        wide_x, wide_y = wide_x.astype(np.int64), wide_y.astype(np.int64)
    with np.errstate(all="ignore"):
        r = np.einsum(f"{''.join(ls)},{''.join(rs)}->{''.join(out)}", wide_x, wide_y)
    return _out(r, o.shape)


@_rule("stablehlo.dot_general")
def _dot_general(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    return _dot(o, a[0], a[1], ev.attr(o, "dot_dimension_numbers"))


@_rule("stablehlo.dot")
def _plain_dot(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    x, y = a
    return _dot(o, x, y, {"lhs_contracting_dimensions": (x.ndim - 1,), "rhs_contracting_dimensions": (0,)})


_REDUCERS = {"stablehlo.add": np.add, "stablehlo.multiply": np.multiply, "stablehlo.maximum": np.maximum,
             "stablehlo.minimum": np.minimum, "stablehlo.and": np.logical_and, "stablehlo.or": np.logical_or}


@_rule("stablehlo.reduce")
def _reduce(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    n = len(a) // 2
    xs, inits = a[:n], a[n:]
    dims = tuple(sorted(ev.attr(o, "dimensions")))
    (body,) = o.regions
    shapes = _result_shapes(o)
    fn = _numpy_reducer(body, xs[0].dtype) if n == 1 else None
    if fn is not None:  # one of the usual reducers: numpy's reduction in the wide type
        with np.errstate(all="ignore"):
            if xs[0].dtype.kind in "iub":
                acc = fn.reduce(xs[0], axis=dims, dtype=xs[0].dtype) if xs[0].size else None
            else:
                acc = fn.reduce(_wide(xs[0]), axis=dims) if xs[0].size else None
            init = inits[0]
            res = fn(_wide(init), acc) if acc is not None else np.broadcast_to(init, shapes[0].dimensions())
        return _out(res, shapes[0])
    # any other reducer: folded element by element along the reduced dimensions, the region run
    # on whole slices at once; only element-wise regions can run that way
    _check_elementwise(body, o, ev)
    moved = [np.moveaxis(x, dims, tuple(range(len(dims)))).reshape((-1,) + tuple(
        s for k, s in enumerate(x.shape) if k not in dims)) for x in xs]
    acc_vals = [np.broadcast_to(i, m.shape[1:]).copy() for i, m in zip(inits, moved, strict=True)]
    for k in range(moved[0].shape[0]):
        outs = ev.region(body, [*acc_vals, *(m[k] for m in moved)])
        acc_vals = [np.asarray(v) for v in outs]
    return _results(o, [_out(v, sh) for v, sh in zip(acc_vals, shapes, strict=True)])


_ELEMENTWISE = frozenset(
    [*_UNARY, "stablehlo.sign", "stablehlo.not", "stablehlo.popcnt", "stablehlo.count_leading_zeros",
     "stablehlo.add", "stablehlo.subtract", "stablehlo.multiply", "stablehlo.divide", "stablehlo.remainder",
     "stablehlo.power", "stablehlo.atan2", "stablehlo.maximum", "stablehlo.minimum", "stablehlo.and",
     "stablehlo.or", "stablehlo.xor", "stablehlo.complex", "stablehlo.shift_left", "stablehlo.shift_right_logical",
     "stablehlo.shift_right_arithmetic", "stablehlo.compare", "stablehlo.select", "stablehlo.clamp",
     "stablehlo.convert", "get_tuple_element", "tuple", "parameter"]
)


def _check_elementwise(r: Region, owner: XlaOp, ev: _Evaluator) -> None:
    """Refuse a region that is not element-wise on scalars (it cannot run on whole slices)."""
    seen: set[int] = set()
    stack = list(r.results)
    while stack:
        o = stack.pop()
        if id(o) in seen or o in r.params:
            continue
        seen.add(id(o))
        scalar_const = o.opcode == "stablehlo.constant" and not o.shape.is_tuple() and o.shape.dimensions() == ()
        same_width_bitcast = o.opcode == "stablehlo.bitcast_convert" and (
            _dtype(o.shape).itemsize == _dtype(o.operands[0].shape).itemsize)
        if o.opcode not in _ELEMENTWISE and not scalar_const and not same_width_bitcast:
            raise ev.fail(owner, f"with a region holding {o.opcode} (only element-wise regions are evaluated)")
        if o.regions:
            raise ev.fail(owner, "with a region holding nested regions")
        stack.extend(o.operands)


def _windows(x: np.ndarray[Any, Any], window: Sequence[int], strides: Sequence[int],
             dilation: Sequence[int]) -> np.ndarray[Any, Any]:
    """``x``'s windows: shape ``out_dims + window`` (``x`` already padded and base-dilated)."""
    span = [(w - 1) * d + 1 for w, d in zip(window, dilation, strict=True)]
    view = np.lib.stride_tricks.sliding_window_view(x, span)
    view = view[tuple(slice(None, None, s) for s in strides)]
    picks: tuple[Any, ...] = (Ellipsis, *(slice(None, None, d) for d in dilation))
    return np.asarray(view[picks])


def _dilate_pad(x: np.ndarray[Any, Any], base: Sequence[int], pads: Sequence[tuple[int, int]],
                value: Any) -> np.ndarray[Any, Any]:
    """``x`` with ``base - 1`` copies of ``value`` between elements and ``pads`` (low, high) around it
    (negative pads cut)."""
    shape = [d + (d - 1) * (b - 1) if d else 0 for d, b in zip(x.shape, base, strict=True)]
    grown = np.full(shape, value, x.dtype)
    grown[tuple(slice(None, None, b) for b in base)] = x
    full = np.full([s + max(lo, 0) + max(hi, 0) for s, (lo, hi) in zip(shape, pads, strict=True)], value, x.dtype)
    full[tuple(slice(max(lo, 0), max(lo, 0) + s) for s, (lo, _) in zip(shape, pads, strict=True))] = grown
    return full[tuple(slice(max(-lo, 0), full.shape[k] - max(-hi, 0)) for k, (lo, hi) in enumerate(pads))]


@_rule("stablehlo.reduce_window")
def _reduce_window(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    n = len(a) // 2
    xs, inits = a[:n], a[n:]
    rank = xs[0].ndim
    window = tuple(ev.attr(o, "window_dimensions"))
    strides = tuple(ev.attr(o, "window_strides", (1,) * rank))
    base = tuple(ev.attr(o, "base_dilations", (1,) * rank))
    wdil = tuple(ev.attr(o, "window_dilations", (1,) * rank))
    pad = ev.attr(o, "padding")
    pads = [(0, 0)] * rank if pad is None else [(int(lo), int(hi)) for lo, hi in np.asarray(pad).reshape(rank, 2)]
    (body,) = o.regions
    shapes = _result_shapes(o)
    wins = [_windows(_dilate_pad(x, base, pads, i), window, strides, wdil) for x, i in zip(xs, inits, strict=True)]
    fn = _numpy_reducer(body, xs[0].dtype) if n == 1 else None
    if fn is not None:
        w = wins[0] if wins[0].dtype.kind in "iub" else _wide(wins[0])
        with np.errstate(all="ignore"):
            acc = fn.reduce(w.reshape(w.shape[:rank] + (-1,)), axis=-1) if w.size else None
            res = fn(_wide(inits[0]), acc) if acc is not None else np.broadcast_to(inits[0], shapes[0].dimensions())
        return _out(res, shapes[0])
    _check_elementwise(body, o, ev)
    flat = [w.reshape(w.shape[:rank] + (-1,)) for w in wins]
    acc_vals = [np.broadcast_to(i, f.shape[:rank]).copy() for i, f in zip(inits, flat, strict=True)]
    for k in range(flat[0].shape[-1]):
        acc_vals = [np.asarray(v) for v in ev.region(body, [*acc_vals, *(f[..., k] for f in flat)])]
    return _results(o, [_out(v, sh) for v, sh in zip(acc_vals, shapes, strict=True)])


@_rule("stablehlo.convolution")
def _convolution(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    x, w = a
    dn = ev.attr(o, "dimension_numbers")
    if not isinstance(dn, dict):
        raise ev.fail(o, "whose dimension numbers are not readable")
    if int(ev.attr(o, "batch_group_count", 1)) != 1:
        raise ev.fail(o, "with batch_group_count > 1")
    if any(ev.attr(o, "window_reversal", ()) or ()):
        raise ev.fail(o, "with window_reversal")
    groups = int(ev.attr(o, "feature_group_count", 1))
    sp_in, sp_k, sp_out = (tuple(dn[k]) for k in ("input_spatial_dimensions", "kernel_spatial_dimensions",
                                                   "output_spatial_dimensions"))
    nsp = len(sp_in)
    # to (batch, feature, spatial...) and (out feature, in feature, spatial...)
    xt = np.transpose(_wide(x), (dn["input_batch_dimension"], dn["input_feature_dimension"], *sp_in))
    wt = np.transpose(_wide(w), (dn["kernel_output_feature_dimension"], dn["kernel_input_feature_dimension"], *sp_k))
    strides = tuple(ev.attr(o, "window_strides", (1,) * nsp))
    lhs_dil = tuple(ev.attr(o, "lhs_dilation", (1,) * nsp))
    rhs_dil = tuple(ev.attr(o, "rhs_dilation", (1,) * nsp))
    pad = ev.attr(o, "padding")
    pads = [(0, 0)] * nsp if pad is None else [(int(lo), int(hi)) for lo, hi in np.asarray(pad).reshape(nsp, 2)]
    xp = _dilate_pad(xt, (1, 1, *lhs_dil), [(0, 0), (0, 0), *pads], 0)
    win = _windows(xp, (1, 1, *wt.shape[2:]), (1, 1, *strides), (1, 1, *rhs_dil))  # n, c, out..., 1, 1, k...
    win = win.reshape(win.shape[:2 + nsp] + wt.shape[2:])
    cin_g, cout = wt.shape[1], wt.shape[0]
    cout_g = cout // groups
    outs = []
    letters = "abcdefghij"[:nsp]
    klet = "pqrstuvwxy"[:nsp]
    for g in range(groups):
        xg = win[:, g * cin_g:(g + 1) * cin_g]
        wg = wt[g * cout_g:(g + 1) * cout_g]
        with np.errstate(all="ignore"):
            outs.append(np.einsum(f"nc{letters}{klet},oc{klet}->no{letters}", xg, wg))
    r = np.concatenate(outs, axis=1)
    order = (dn["output_batch_dimension"], dn["output_feature_dimension"], *sp_out)
    return _out(np.moveaxis(r, range(2 + nsp), order), o.shape)


_SORT_BLOCK = 1 << 22  # comparator evaluations per vectorized block (elements of the pairwise arrays)


def _sorted_order(cmp: Region, rows: list[np.ndarray[Any, Any]], ev: _Evaluator) -> np.ndarray[Any, Any] | None:
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


@_rule("stablehlo.sort")
def _sort(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    import functools

    dim = int(ev.attr(o, "dimension", -1))
    dim = dim % a[0].ndim if a[0].ndim else 0
    stable = bool(ev.attr(o, "is_stable", False))
    if not stable and len(a) > 1:  # the order of equal keys is XLA's choice, and the payloads would show it
        raise ev.fail(o, "that is not stable and carries payloads (the order of equal keys is XLA's choice)")
    (cmp,) = o.regions
    _check_elementwise(cmp, o, ev)
    moved = [np.moveaxis(x, dim, -1) for x in a]
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
    return _results(o, [_out(np.moveaxis(x, -1, dim), sh) for x, sh in zip(outs, _result_shapes(o), strict=True)])


@_rule("stablehlo.gather")
def _gather(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    x, idx = a
    g = ev.attr(o, "dimension_numbers")
    sizes = tuple(ev.attr(o, "slice_sizes"))
    ivd = int(g["index_vector_dim"])
    idx_m = np.moveaxis(idx, ivd, -1) if ivd < idx.ndim else idx[..., None]
    out_dims = tuple(o.shape.dimensions())
    offset_dims = tuple(g["offset_dims"])
    batch_out = [d for d in range(len(out_dims)) if d not in offset_dims]
    dropped = set(g["collapsed_slice_dims"]) | set(g["operand_batching_dims"])
    kept = [d for d in range(x.ndim) if d not in dropped]
    res = np.empty(out_dims, x.dtype)
    for b in np.ndindex(*idx_m.shape[:-1]):
        vec = idx_m[b]
        start = [0] * x.ndim
        for k, d in enumerate(g["start_index_map"]):
            start[d] = int(vec[k])
        for od, sd in zip(g["operand_batching_dims"], g["start_indices_batching_dims"], strict=True):
            start[od] = b[sd if sd < ivd else sd - 1]
        start = [min(max(v, 0), x.shape[d] - sizes[d]) for d, v in enumerate(start)]  # XLA clamps
        piece = x[tuple(slice(v, v + n) for v, n in zip(start, sizes, strict=True))].reshape([sizes[d] for d in kept])
        where: list[Any] = [slice(None)] * len(out_dims)
        for pos, d in enumerate(batch_out):
            where[d] = b[pos]
        res[tuple(where)] = piece
    return _out(res, o.shape)


def _combine(r: Region, owner: XlaOp, ev: _Evaluator) -> Callable[[list[Any], list[Any]], list[Any]]:
    """How an update region combines current values with updates: numpy's function for the usual
    ones (and plain assignment), else the region run element-wise."""
    if len(r.results) == 1 and len(r.params) == 2:
        res = r.results[0]
        if res is r.params[1]:
            return lambda cur, upd: [upd[0]]
        fn = _numpy_reducer(r, _dtype(r.params[0].shape))
        if fn is not None:
            def numpy_fn(cur: list[Any], upd: list[Any]) -> list[Any]:
                c, u = cur[0], upd[0]
                with np.errstate(all="ignore"):
                    return [fn(c, u) if c.dtype.kind in "iub" else fn(_wide(c), _wide(u))]
            return numpy_fn
    _check_elementwise(r, owner, ev)
    return lambda cur, upd: [np.asarray(v) for v in ev.region(r, [*cur, *upd])]


@_rule("stablehlo.scatter")
def _scatter(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    n = (len(a) - 1) // 2
    inputs, idx, updates = [x.copy() for x in a[:n]], a[n], a[n + 1:]
    sd = ev.attr(o, "scatter_dimension_numbers")
    (body,) = o.regions
    combine = _combine(body, o, ev)
    ivd = int(sd["index_vector_dim"])
    idx_m = np.moveaxis(idx, ivd, -1) if ivd < idx.ndim else idx[..., None]
    uwd = tuple(sd["update_window_dims"])
    upd_scatter = [d for d in range(updates[0].ndim) if d not in uwd]
    dropped = set(sd["inserted_window_dims"]) | set(sd["input_batching_dims"])
    window_to_operand = [d for d in range(inputs[0].ndim) if d not in dropped]
    wsizes = [updates[0].shape[d] for d in uwd]
    for b in np.ndindex(*idx_m.shape[:-1]):
        vec = idx_m[b]
        start = [0] * inputs[0].ndim
        for k, d in enumerate(sd["scattered_dims_to_operand_dims"]):
            start[d] = int(vec[k])
        for od, sdim in zip(sd["input_batching_dims"], sd["scatter_indices_batching_dims"], strict=True):
            start[od] = b[sdim if sdim < ivd else sdim - 1]
        full = [1] * inputs[0].ndim
        for d, w in zip(window_to_operand, wsizes, strict=True):
            full[d] = w
        if any(v < 0 or v + f > inputs[0].shape[d] for d, (v, f) in enumerate(zip(start, full, strict=True))):
            continue  # XLA skips an update whose window leaves the operand
        where: list[Any] = [slice(None)] * updates[0].ndim
        for pos, d in enumerate(upd_scatter):
            where[d] = b[pos]
        target = tuple(slice(v, v + f) for v, f in zip(start, full, strict=True))
        cur = [x[target] for x in inputs]
        upd = [u[tuple(where)].reshape(cur[0].shape) for u in updates]
        for x, v in zip(inputs, combine(cur, upd), strict=True):
            x[target] = np.asarray(v).astype(x.dtype)
    return _results(o, [_out(x, sh) for x, sh in zip(inputs, _result_shapes(o), strict=True)])


@_rule("stablehlo.select_and_scatter")
def _select_and_scatter(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    x, src, init = a
    select, scatter = o.regions
    _check_elementwise(select, o, ev)
    combine = _combine(scatter, o, ev)
    rank = x.ndim
    window = tuple(ev.attr(o, "window_dimensions"))
    strides = tuple(ev.attr(o, "window_strides", (1,) * rank))
    pad = ev.attr(o, "padding")
    pads = [(0, 0)] * rank if pad is None else [(int(lo), int(hi)) for lo, hi in np.asarray(pad).reshape(rank, 2)]
    res = np.broadcast_to(init, x.shape).astype(x.dtype)
    # the select phase, every window at once: scan the window's positions in order and keep the
    # current pick unless select(pick, candidate) is false (padding is never selected)
    grid = np.indices(src.shape)
    best = [np.zeros(src.shape, np.int64) for _ in range(rank)]
    best_val = np.zeros(src.shape, x.dtype)
    has = np.zeros(src.shape, bool)
    for k in np.ndindex(*window):
        pos = [grid[d] * strides[d] + k[d] - pads[d][0] for d in range(rank)]
        valid = np.ones(src.shape, bool)
        for d in range(rank):
            valid &= (pos[d] >= 0) & (pos[d] < x.shape[d])
        clipped = tuple(np.clip(p_, 0, max(n - 1, 0)) for p_, n in zip(pos, x.shape, strict=True))
        cand = x[clipped] if x.size else np.zeros(src.shape, x.dtype)
        keep = np.asarray(ev.region(select, [best_val, cand])[0], dtype=bool) if has.any() else np.ones(src.shape, bool)
        take = valid & (~has | ~keep)
        for d in range(rank):
            best[d] = np.where(take, clipped[d], best[d])
        best_val = np.where(take, cand, best_val)
        has |= valid
    # the scatter phase, in the windows' order
    if _numpy_reducer(scatter, np.dtype(x.dtype)) is np.add:
        acc = _wide(res).copy()
        np.add.at(acc, tuple(b[has] for b in best), _wide(src)[has])
        return _out(acc, o.shape)
    for w in zip(*np.nonzero(has), strict=True):
        at = tuple(int(b[w]) for b in best)
        res[at] = np.asarray(combine([res[at]], [src[w]])[0]).astype(x.dtype)
    return _out(res, o.shape)


@_rule("chlo.top_k", "mhlo.topk")
def _top_k(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    """The ``k`` largest along the last dimension, largest first, ties by the lower index (XLA's
    TopK: floats in total order, so NaN is the largest)."""
    x = a[0]
    k = int(ev.attr(o, "k"))
    if ev.attr(o, "largest", True) is False:
        raise ev.fail(o, "with largest=false")
    if _is_float(x.dtype):
        key = _total_order_key(x)
    elif x.dtype == np.uint64:
        key = (x ^ np.uint64(1 << 63)).view(np.int64)  # order-preserving into int64
    else:
        key = x.astype(np.int64)
    order = np.argsort(~key, axis=-1, kind="stable")[..., :k]  # ~key: largest first, ties by index
    vals = np.take_along_axis(x, order, axis=-1)
    shapes = o.shape.tuple_shapes()
    return (_out(vals, shapes[0]), _out(order, shapes[1]))


# -- rules: control flow -----------------------------------------------------------------------------------------
def _values(v: Value) -> list[Value]:
    return list(v) if isinstance(v, tuple) else [v]


@_rule("stablehlo.while")
def _while(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    cond, body = o.regions
    state = list(a)
    while bool(np.asarray(ev.region(cond, state)[0])):
        state = ev.region(body, state)
    return _results(o, state)


@_rule("stablehlo.if")
def _if(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    branch = o.regions[0] if bool(np.asarray(a[0])) else o.regions[1]
    outs = ev.region(branch, [])
    return _results(o, outs)


@_rule("stablehlo.case")
def _case(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    i = int(np.asarray(a[0]))
    n = len(o.regions)
    branch = o.regions[i if 0 <= i < n else n - 1]  # out of range: the last branch, as XLA does
    outs = ev.region(branch, [])
    return _results(o, outs)


#: custom calls that only annotate a value's sharding (JAX's ``jax.lax.with_sharding_constraint``,
#: typed PRNG keys, shard_map's shape changes): on one device, where the shape stays, the value itself
_SHARDING_MARKERS = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"})


@_rule("stablehlo.custom_call")
def _custom_call(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    target = ev.attr(o, "call_target_name", "?")
    if target == "TopK" and len(a) == 1 and o.shape.is_tuple():
        return _topk_custom_call(o, a, ev)
    rule = CUSTOM_CALL_RULES.get(target)
    if rule is not None:
        return rule(o, a, ev)
    if target in _SHARDING_MARKERS and len(a) == 1 and not o.shape.is_tuple() \
            and np.shape(a[0]) == tuple(o.shape.dimensions()) and np.asarray(a[0]).dtype == _dtype(o.shape):
        return a[0]  # a sharding annotation: the value itself on one device (a shape change is refused below)
    raise ev.fail(o, f"to {target!r} has no evaluation rule yet (the reference evaluator cannot check this program)")


def _topk_custom_call(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    """XLA:CPU's ``TopK`` custom call (how its optimized HLO spells top_k): the ``k`` (the result's
    last dimension) largest along the last dimension, as :func:`_top_k`; its comparator (the
    function it calls) must be greater-than in total order, which is checked by running it on every
    pair of probe values (NaN, infinities, signed zeros included)."""
    called = ev.attr(o, "called_computations", ())
    names = [_symbol(c) for c in (called if isinstance(called, (list, tuple)) else [called])]
    if len(names) != 1:
        raise ev.fail(o, "to 'TopK' without one comparator has no evaluation rule")
    g = ev.callee(names[0])
    x = a[0]
    if not _is_float(x.dtype) or len(g.params) not in (2, 4):
        raise ev.fail(o, "to 'TopK' on this operand has no evaluation rule (floats only)")
    # the comparator must be "greater than" in total order: checked on every pair of probe values
    probe = np.array([-np.inf, -2.5, -1.0, -0.0, 0.0, 1e-30, 1.0, 3.0, np.inf, np.nan, -np.nan], np.float64)
    probe = probe.astype(x.dtype)
    lhs, rhs = np.meshgrid(probe, probe, indexing="ij")
    idx = np.zeros(lhs.shape, np.int32)
    args = [lhs, rhs] if len(g.params) == 2 else [lhs, rhs, idx, idx]
    env: dict[int, Value] = {id(p): v for p, v in zip(g.params, args, strict=True)}
    got = np.asarray(ev.run_graph(g.outputs, env)[0], dtype=bool)
    key = _total_order_key(probe)
    if got.shape != lhs.shape or not np.array_equal(got, key[:, None] > key[None, :]):
        raise ev.fail(o, "to 'TopK' whose comparator is not greater-than in total order has no evaluation rule")
    k = int(o.shape.tuple_shapes()[0].dimensions()[-1])
    order = np.argsort(~_total_order_key(x), axis=-1, kind="stable")[..., :k]  # largest first, ties by index
    shapes = o.shape.tuple_shapes()
    return (_out(np.take_along_axis(x, order, axis=-1), shapes[0]), _out(order, shapes[1]))


@_rule("stablehlo.tuple")
def _tuple(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    return tuple(a)


@_rule("stablehlo.get_tuple_element")
def _gte(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    return a[0][int(ev.attr(o, "index"))]


def _symbol(ref: Any) -> str:
    name = str(ref)
    name = name[1:] if name.startswith("@") else name
    return name[1:-1] if name.startswith('"') and name.endswith('"') else name


def _callee_name(o: XlaOp, ev: _Evaluator) -> str:
    """The function a ``func.call`` calls, or a ``stablehlo.composite``'s decomposition."""
    return _symbol(ev.attr(o, "callee" if o.opcode == "func.call" else "decomposition"))


@_rule("func.call")
def _call(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    return ev.call(o, _callee_name(o, ev), a)


@_rule("stablehlo.composite")
def _composite(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    """A named op (``chlo.top_k``, ``erf_inv``... as JAX exports them) is its decomposition."""
    return ev.call(o, _callee_name(o, ev), a)


# -- comparing ---------------------------------------------------------------------------------------------------
def default_tolerance(dtype: np.dtype[Any]) -> tuple[float, float]:
    """``(rtol, atol_fraction)`` for an output of ``dtype``: an element matches when
    ``|got - want| <= atol_fraction * max|want| + rtol * |want|`` (integers, bool: exactly)."""
    dt = np.dtype(dtype)
    if dt.kind in "iub":
        return 0.0, 0.0
    name = dt.name
    if name in ("float64", "complex128"):
        return 1e-12, 1e-13
    if name in ("float32", "complex64"):
        return 1e-5, 1e-6
    if name == "float16":
        return 2.0**-9, 2.0**-9
    if name == "bfloat16":
        return 2.0**-6, 2.0**-6
    return 2.0**-2, 2.0**-3  # the fp8 types: 1-2 ulp of their 2-3 mantissa bits


@dataclass
class OutputComparison:
    """How one output of the program compares (see :func:`compare`)."""

    index: int
    shape: tuple[int, ...]
    dtype: str
    max_abs: float
    max_rel: float
    max_ulp: float
    mismatches: int
    first_mismatch: tuple[int, ...] | None
    got: Any = field(repr=False, default=None)
    want: Any = field(repr=False, default=None)

    @property
    def ok(self) -> bool:
        return self.mismatches == 0


@dataclass
class CompareReport:
    """The result of :func:`compare`: one :class:`OutputComparison` per output, and ``ok``."""

    name: str
    against: str
    outputs: list[OutputComparison]
    #: ``bisect="ops"``: :class:`xlasdk.bisect.OpsBisection`; ``bisect="passes"``:
    #: :class:`xlasdk.bisect.PassBisection`; ``find_nonfinite=True``: :class:`xlasdk.bisect.NonFinite`.
    bisect_ops: Any = None
    bisect_passes: Any = None
    nonfinite: Any = None

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs)

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready values (what ``xlasdk compare --json`` writes)."""
        doc: dict[str, Any] = {"name": self.name, "against": self.against, "match": self.ok, "outputs": [
            {"index": o.index, "shape": list(o.shape), "dtype": o.dtype, "max_abs": o.max_abs, "max_rel": o.max_rel,
             "max_ulp": o.max_ulp, "mismatches": o.mismatches,
             "first_mismatch": None if o.first_mismatch is None else list(o.first_mismatch)}
            for o in self.outputs]}
        for key, part in (("bisect_ops", self.bisect_ops), ("bisect_passes", self.bisect_passes),
                          ("nonfinite", self.nonfinite)):
            if part is not None:
                doc[key] = part.as_dict()
        return doc

    def __str__(self) -> str:
        head = f"{self.name}: device vs {self.against}: {'MATCH' if self.ok else 'DIVERGENCE'}"
        rows = [f"  {'output':<7}{'shape':<18}{'dtype':<10}{'max abs':>12}{'max rel':>12}{'max ulp':>10}"
                f"{'mismatches':>12}  first"]
        for o in self.outputs:
            rows.append(
                f"  {o.index:<7}{str(list(o.shape)):<18}{o.dtype:<10}{o.max_abs:>12.3g}{o.max_rel:>12.3g}"
                f"{o.max_ulp:>10.3g}{o.mismatches:>12}  {'' if o.first_mismatch is None else list(o.first_mismatch)}"
            )
        extra = [str(x) for x in (self.bisect_ops, self.bisect_passes, self.nonfinite) if x is not None]
        return "\n".join([head, *rows, *extra])


def _ulps(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    dt = want.dtype
    if not _is_float(dt) or dt.kind == "c":
        if dt.kind == "b":
            return np.asarray(got != want, dtype=np.float64)
        return np.asarray(np.abs(_wide(got).astype(np.complex128) - _wide(want).astype(np.complex128)).real)
    eps = float(ml_dtypes.finfo(dt).eps) if _is_ml_float(dt) else float(np.finfo(dt).eps)
    w = _wide(want)
    with np.errstate(all="ignore"):  # the spacing of the type at |want| (its subnormal spacing below the normals)
        _, e = np.frexp(np.maximum(np.abs(w), _tiny(dt)))
        spacing = np.ldexp(eps, e - 1)
    return np.asarray(np.abs(_wide(got) - w) / spacing)


def _tiny(dt: np.dtype[Any]) -> float:
    """The smallest normal number of a float type (0 for others)."""
    if dt.kind == "c":
        return float(np.finfo(dt).tiny)
    if not _is_float(dt):
        return 0.0
    return float(ml_dtypes.finfo(dt).smallest_normal) if _is_ml_float(dt) else float(np.finfo(dt).tiny)


def _compare_one(i: int, got: np.ndarray[Any, Any], want: np.ndarray[Any, Any], rtol: float | None,
                 atol: float | None, scale: float = 0.0, ulps: float | None = None) -> OutputComparison:
    """How output ``i`` compares. An element matches when ``|got - want| <= tol_abs + rtol * |want|``
    with ``tol_abs = atol`` or, by default, the type's fraction of the larger of the output's largest
    magnitude and ``scale`` (the terms the op that made it added), and never below the type's
    smallest normal number (XLA:CPU flushes subnormal results to zero); with ``ulps``, a float
    element also matches when it is at most ``ulps`` units in the last place of ``want`` away (the
    spacing of the output's type at ``|want|``; the report's ``max_ulp``)."""
    d_rtol, d_atol = default_tolerance(want.dtype)
    rtol = d_rtol if rtol is None else rtol
    w, g = _wide(want), _wide(got)
    with np.errstate(all="ignore"):
        if want.dtype.kind in "iub":
            bad = got != want
            diff = np.abs(g.astype(np.float64) - w.astype(np.float64)) if want.dtype.kind != "b" else bad.astype(float)
            rel = diff / np.maximum(np.abs(w.astype(np.float64)), 1) if want.dtype.kind != "b" else diff
        else:
            finite_w = np.isfinite(w)
            big = float(np.max(np.abs(w[finite_w]), initial=0.0))
            tol_abs = max(d_atol * max(big, scale), _tiny(want.dtype)) if atol is None else atol
            nan_g, nan_w = np.isnan(g), np.isnan(w)
            same = (nan_g & nan_w) | (np.isinf(w) & (g == w))
            diff = np.where(same, 0.0, np.abs(np.where(nan_g | nan_w, np.inf, g - w)))
            rel = np.where(np.abs(w) > 0, diff / np.where(np.abs(w) > 0, np.abs(w), 1.0), np.where(diff > 0, np.inf, 0))
            carried = getattr(scale, "bound", None) if atol is None else None
            if carried is not None and carried.shape == w.shape:
                tol_abs = tol_abs + _BOUND_MARGIN * carried  # the rounding the ops before it may have moved it by
            bad = ~same & ~(diff <= tol_abs + rtol * np.abs(np.where(finite_w, w, 0)))
        ulp = _ulps(got, want) if want.size else np.zeros(0)
        ulp = np.where(np.isfinite(ulp), ulp, np.inf)
        if ulps is not None and _is_float(want.dtype) and want.dtype.kind != "c":
            bad = bad & ~(ulp <= ulps)
    idx = np.argwhere(bad)
    finite = np.isfinite(np.real(diff))
    return OutputComparison(
        i, tuple(want.shape), str(want.dtype),
        float(np.max(np.real(diff), initial=0.0, where=finite)) if bad.any() or finite.any() else 0.0,
        float(np.max(np.real(rel), initial=0.0, where=np.isfinite(np.real(rel)))),
        float(np.max(ulp, initial=0.0, where=np.isfinite(ulp))), int(bad.sum()),
        tuple(int(k) for k in idx[0]) if len(idx) else None, got, want,
    )


#: What the device side of a comparison against the reference compiles with: XLA may otherwise keep
#: values of bf16/f16 ops in f32 between ops (``xla_allow_excess_precision``, on by default), which
#: the per-op rounding of the reference does not do.
STRICT_PRECISION = (("xla_allow_excess_precision", False),)
