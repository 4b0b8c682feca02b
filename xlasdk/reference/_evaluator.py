"""The reference evaluator's core: the walk over a program's graph, values and error bounds, and the
per-output comparison.

:func:`evaluate` runs a computation (built or loaded) op by op in numpy, on its instruction graph
(:meth:`XlaComputation.instructions <xlasdk.XlaComputation.instructions>`): floating-point and
complex ops are computed in float64 / complex128 from the op's inputs and rounded once to the op's
element type (bf16, f16 and the fp8 types through ``ml_dtypes``), integer ops are exact with
XLA's wrap-around, and the edges follow XLA's operation semantics (clamped dynamic-slice starts,
integer division by zero, shifts past the bit width, NaN propagation in max/min). An op without a
rule raises :class:`UnsupportedOpError` naming it (a custom call by its target): nothing is
guessed.

:func:`xlasdk.reference.compare` runs the program on a device (XLA) and against the reference and
reports per output with this module's :class:`CompareReport`.

**Rules.** An op's evaluation rule is ``rule(node, operands, ev) -> value``: operands are numpy
arrays (tuples for multi-result ops), ``ev`` (the :class:`_Evaluator`) reads attributes and
evaluates regions. Each rule is bound to its row of the op table (:attr:`OpDef.evaluate
<xlasdk._optable.OpDef.evaluate>`, with :func:`~xlasdk._optable.evaluates`) in the module of this
package that mirrors the op's family (``reference/indexing.py`` for ``ops/indexing.py``'s
gather), and the evaluator dispatches through the node's row; a row the evaluator refuses says why
(:attr:`OpDef.no_evaluate <xlasdk._optable.OpDef.no_evaluate>`). Two kinds of rules have their own
key instead of a row: custom calls, by target name (:data:`CUSTOM_CALL_RULES`: the LAPACK calls of
jaxlib's CPU lowering...), and the ops that a loaded module holds and the table has no row for
(:data:`OPAQUE_RULES`, by op name: ``func.call``, ``mhlo.copy``, ``stablehlo.dot``...).
:data:`RULES` and :data:`REFUSED` are read-only views of all of them by op name.

This module keeps the rules of the graph's own rows (``tuple``, ``get_tuple_element``) and of calls.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import ml_dtypes as _ml_dtypes
import numpy as np

from .._mlir_attrs import symbol_name
from .._optable import (
    CALL,
    GET_TUPLE_ELEMENT,
    OPS,
    PARAMETER,
    RETURN,
    STABLEHLO_GET_TUPLE_ELEMENT,
    STABLEHLO_TUPLE,
    TUPLE,
    evaluates,
    refuse_evaluation,
)
from ..builder import Region, XlaOp
from ..errors import XlaSdkError
from ..shape import Shape
from ._precision import DeviceKind, device_kind, dot_precision, function_ulps, op_bound, round_to

if TYPE_CHECKING:
    from ..computation import XlaComputation

ml_dtypes: Any = _ml_dtypes  # untyped functions (finfo)

__all__ = ["evaluate", "CompareReport", "OutputComparison", "UnsupportedOpError", "RULES", "REFUSED",
           "CUSTOM_CALL_RULES", "OPAQUE_RULES", "default_tolerance"]


class UnsupportedOpError(XlaSdkError):
    """The reference evaluator has no rule for an op of the program (named in the message)."""


Value = Any  # np.ndarray, or a tuple of them for multi-result ops
Rule = Callable[[XlaOp, list[Value], "_Evaluator"], Value]
#: custom calls the evaluator knows, by ``call_target_name`` (the LAPACK targets of jaxlib's CPU lowering, ...)
CUSTOM_CALL_RULES: dict[str, Rule] = {}
#: ops that loaded modules hold and the op table has no row for (an opaque row of their own:
#: ``func.call``, ``mhlo.copy``, ``stablehlo.dot``...), by op name, the only key they have; every
#: op of the table binds its rule to its row instead (:func:`~xlasdk._optable.evaluates`)
OPAQUE_RULES: dict[str, Rule] = {}


def evaluates_opaque(*names: str) -> Callable[[Rule], Rule]:
    """Decorator: the function is the rule of the opaque ops ``names`` (:data:`OPAQUE_RULES`).

    Raises
    ------
    ValueError: a name has a row in the op table (bind the rule to the row), or a rule already.
    """
    def deco(fn: Rule) -> Rule:
        for n in names:
            if n in OPS or n in OPAQUE_RULES:
                why = "is a row of the op table: bind to the row" if n in OPS else "has a rule already"
                raise ValueError(f"reference: the opaque op {n!r} {why}")
            OPAQUE_RULES[n] = fn
        return fn
    return deco


def rule_of(o: XlaOp) -> Rule | None:
    """The evaluation rule of node ``o``: its row's; for an opaque row of a loaded module (an op
    the table lacks, or a table op whose flags did not fit the row), the table row of its name's,
    else :data:`OPAQUE_RULES`' (None: no rule)."""
    rule = o.opdef.evaluate
    if rule is None:
        row = OPS.get(o.opdef.name)
        if row is None:
            return OPAQUE_RULES.get(o.opdef.name)
        rule = row.evaluate
    return rule


class _NameView(Mapping[str, Any]):
    """A read-only mapping by op name, read from the op table each time (the rules bind at import)."""

    def __init__(self, read: Callable[[], dict[str, Any]]) -> None:
        self._read = read

    def __getitem__(self, name: str) -> Any:
        return self._read()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())

    def __repr__(self) -> str:
        return repr(self._read())


def _rules_by_name() -> dict[str, Any]:
    table = {name: row.evaluate for name, row in OPS.items() if row.evaluate is not None}
    return {**table, **OPAQUE_RULES}


#: every rule by op name, read-only: the table's rows' (:attr:`OpDef.evaluate
#: <xlasdk._optable.OpDef.evaluate>`) and :data:`OPAQUE_RULES`
RULES: Mapping[str, Rule] = _NameView(_rules_by_name)
#: the ops the evaluator refuses on purpose, with the reason its error gives, read-only: the rows'
#: :attr:`OpDef.no_evaluate <xlasdk._optable.OpDef.no_evaluate>` (every row of the op table has a
#: rule or a refusal: ``tests/test_reference_rules.py`` checks it)
REFUSED: Mapping[str, str] = _NameView(lambda: {n: r.no_evaluate for n, r in OPS.items() if r.no_evaluate})


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
        # the error model the bounds follow (:mod:`._precision`): the device kind, every dot forced
        # to a precision (``--precision``), and whether dots compute as that device does (emulate)
        self.model: DeviceKind = device_kind(None)
        self.precision: str | None = None
        self.emulate = False

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
        rule = o.opdef.evaluate  # the op's row binds its rule
        if rule is None:
            rule = rule_of(o)
            if rule is None:
                row = OPS.get(o.opdef.name)
                why = row.no_evaluate if row is not None else ""
                if why:
                    raise self.fail(o, f"is not evaluated by the reference: it {why}")
                raise self.fail(o, "has no evaluation rule yet (the reference evaluator cannot check this program)")
        if self.emulate and o.opcode in _BILINEAR and len(args) == 2:  # as the device computes it
            dp = dot_precision(o, tuple(np.asarray(a).dtype for a in args), self.model, self.precision)
            if dp.round_inputs is not None:
                args = [round_to(a, dp.round_inputs) if np.asarray(a).dtype == np.float32 else a for a in args]
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
    rule = rule_of(o)
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
    row = op_bound(o, ev.model)  # the device kind's error model (:mod:`._precision`)
    if (row is not None and row.kind == "exact" and not cplx) or (
            op in _EXACT and not (cplx and op in _INEXACT_COMPLEX) and (row is None or row.kind != "ulps")):
        return zero
    rule = rule_of(o)
    eps_out = _eps(out.dtype)
    if rule is None or not all(isinstance(v, np.ndarray) for v in vals):
        return eps_out * _magnitude(out)
    eps = _compute_eps(out.dtype)
    with np.errstate(all="ignore"):
        wide: Any = _Widened(o)  # the op with a float64 result: its rule gives magnitudes
        exact_op: Any = _Widened(o, np.complex128) if out.dtype.kind == "c" else wide  # and the exact value
        if op in _BILINEAR and len(vals) == 2:
            terms = _magnitude(rule(wide, [_magnitude(v) for v in vals], ev))
            k = max(vals[0].size * vals[1].size / max(out.size, 1), 1.0) ** 0.5  # the contraction size
            exact = np.asarray(rule(exact_op, vals, ev))
            if ev.model.platform == "cpu" and ev.precision is None:  # f32 products, f32 sums
                return _flip(exact, eps * k ** 0.5 * terms, out.dtype)
            dp = dot_precision(o, (vals[0].dtype, vals[1].dtype), ev.model, ev.precision, ev.emulate)
            acc = max(dp.acc_eps, eps if out.dtype.itemsize < 8 else 0.0)
            return _flip(exact, (dp.product_rel + acc * k ** 0.5) * terms, out.dtype)
        if row is not None and row.kind == "ulps" and op in _ELEMENTWISE and not cplx:  # real functions
            exact = np.asarray(rule(exact_op, vals, ev))
            ulps, r_atol, r_rtol = function_ulps(o, ev.model, row)  # result_accuracy where set
            mag = _magnitude(exact)
            return _flip(exact, np.maximum(ulps * eps * mag, np.maximum(r_atol, r_rtol * mag)), out.dtype)
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
    #: the value is a dot's or a convolution's (through moves): the default tolerance is its bound
    #: (relative to |A|·|B|, :mod:`._precision`) and one ulp, not a fraction of the output's scale
    modeled: bool

    #: the value's op is bit-exact on the device's operands (moves, comparisons, selects...)
    exact: bool

    def __new__(cls, value: float, bound: Any = None, modeled: bool = False, exact: bool = False) -> _OutputScale:
        self = super().__new__(cls, value)
        self.bound = bound if isinstance(bound, np.ndarray) else None
        self.modeled = modeled or exact
        self.exact = exact
        return self


def _made_by_dot(node: XlaOp) -> bool:
    """Whether ``node`` is a dot's or a convolution's value, seen through ops that only move values."""
    for _ in range(64):
        if node.opcode in _BILINEAR:
            return True
        if not (node.opcode in _MOVES and node.opcode != "stablehlo.convert") or not node.operands:
            return False
        node = node.operands[0]
    return False


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
        errs = [bounds.get(id(x)) if isinstance(bounds.get(id(x)), np.ndarray) and _is_float_array(v) else None
                for x, v in zip(o.operands, vals, strict=True)]
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
        flips = _flips(o, vals, bounds)
        if flips is not None and not _is_float_array(out):
            bounds[id(o)] = flips  # a predicate that may come out the other way
            continue
        if not _is_float_array(out):
            continue
        own = _own_rounding(o, vals, out, ev) if o.opdef is not PARAMETER and o.opcode != "stablehlo.constant" \
            else np.zeros(out.shape, np.float64)
        branch = _branch_flips(o, vals, bounds, out)
        if branch is not None:
            own = own + branch
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


_BOOLEAN = frozenset({"stablehlo.and", "stablehlo.or", "stablehlo.xor", "stablehlo.not"})


def _flips(o: XlaOp, vals: list[Value], bounds: dict[int, Any]) -> np.ndarray[Any, Any] | None:
    """Where a predicate may come out the other way on a device whose operands are off by their
    bounds (1.0 there, 0.0 elsewhere: a comparison whose float operands are within ``_BOUND_MARGIN``
    times their bounds of each other; a boolean op of such predicates), or None (never). A
    ``select`` of such a predicate may take either branch (:func:`_branch_flips`), a ReLU's gradient
    for one: first-order bounds do not see a branch change."""
    masks = [bounds.get(id(x)) for x in o.operands]
    if o.opcode == "stablehlo.compare" and len(vals) == 2 and all(_is_float_array(v) for v in vals):
        errs = [m if isinstance(m, np.ndarray) else np.zeros(()) for m in masks]
        if not any(e.any() for e in errs):
            return None
        with np.errstate(all="ignore"):
            wide = np.complex128 if any(_is_complex(v) for v in vals) else np.float64
            gap = np.abs(_wide(np.asarray(vals[0])).astype(wide) - _wide(np.asarray(vals[1])).astype(wide)).real
            reach = _BOUND_MARGIN * (errs[0] + errs[1])
            return np.asarray(np.where(~(gap > reach), 1.0, 0.0))
    if o.opcode in _BOOLEAN and all(isinstance(v, np.ndarray) and v.dtype == np.bool_ for v in vals):
        found = [m for m in masks if isinstance(m, np.ndarray)]
        if found and any(m.any() for m in found):
            return np.asarray(np.maximum.reduce([np.broadcast_to(m, np.shape(vals[0])) for m in found]), np.float64)
    return None


def _branch_flips(o: XlaOp, vals: list[Value], bounds: dict[int, Any], out: np.ndarray[Any, Any]) -> Any:
    """What a predicate that may flip (:func:`_flips`) adds to the bound of ``o``'s value: for a
    ``select``, the distance between its branches there; for a bool converted to a number, 1 there."""
    if not o.operands:
        return None
    mask = bounds.get(id(o.operands[0]))
    if not isinstance(mask, np.ndarray) or not isinstance(vals[0], np.ndarray) or vals[0].dtype != np.bool_ \
            or not mask.any():
        return None
    with np.errstate(all="ignore"):
        if o.opcode == "stablehlo.select" and len(vals) == 3:
            t, f = (_wide(np.asarray(v)).astype(np.float64) for v in vals[1:])
            gap = np.abs(np.broadcast_to(t, out.shape) - np.broadcast_to(f, out.shape))
            # the branches' distance, once: an output's tolerance is _BOUND_MARGIN times its bound
            return np.where(np.broadcast_to(mask, out.shape) > 0, np.where(np.isfinite(gap), gap, 0.0),
                            0.0) / _BOUND_MARGIN
        if o.opcode == "stablehlo.convert":
            return np.broadcast_to(mask, out.shape).astype(np.float64) / _BOUND_MARGIN
    return None


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
               callees: dict[str, Any] | None = None, model: Any = None) -> tuple[list[np.ndarray[Any, Any]],
                                                                               list[float]]:
    """The reference outputs and, per output (``scales``; else none), the term scale of the op that
    produced it with the per-element error bound its value carries (:class:`_OutputScale`).
    ``callees``: the called functions' graphs, shared by the evaluators of several simulated devices.
    ``model``: ``(device kind, precision or None, emulate)``, the error model the bounds follow
    (:mod:`._precision`; default: the CPU's)."""
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
    if model is not None:
        ev.model, ev.precision, ev.emulate = device_kind(model[0]), model[1], bool(model[2])
    if callees is not None:
        ev.callees = callees
    if scales:  # the bounds follow the calls' ops on the values they had
        ev.record_calls(env)
    outs = ev.run_graph([*g.outputs, *g.effects], env)[: len(g.outputs)]
    if not scales:  # the values alone (evaluate): no error bounds to carry
        return [np.asarray(o) for o in outs], []
    bounds = _error_bounds(g.outputs, env, ev)
    return [np.asarray(o) for o in outs], [with_order(_OutputScale(_output_scale(o, env, ev), bounds.get(id(o)),
                                                                   _made_by_dot(o)), o, env, bounds, g.params)
                                           for o in g.outputs]


# -- helpers the families' rules share ------------------------------------------------------------------------
def _total_order_key(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Integers ordered as XLA's TOTALORDER orders floats (-NaN < -inf < ... < -0 < +0 < ... < NaN)."""
    bits = np.ascontiguousarray(x.astype(np.float64)).view(np.int64)
    return bits ^ ((bits >> np.int64(63)) & np.int64(0x7FFF_FFFF_FFFF_FFFF))


def _result_shapes(o: XlaOp) -> list[Shape]:
    """One shape per result of ``o`` (several results make a tuple shape)."""
    return list(o.shape.tuple_shapes()) if o.shape.is_tuple() and not o.opdef.tuple_result else [o.shape]


def _results(o: XlaOp, values: Sequence[Value]) -> Value:
    """``o``'s value from its results: the one result, or a tuple of several."""
    return values[0] if len(values) == 1 and len(_result_shapes(o)) == 1 else tuple(values)


_REDUCERS = {"stablehlo.add": np.add, "stablehlo.multiply": np.multiply, "stablehlo.maximum": np.maximum,
             "stablehlo.minimum": np.minimum, "stablehlo.and": np.logical_and, "stablehlo.or": np.logical_or}


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


#: the ops a region run on whole slices may hold (:func:`_check_elementwise`), and whose error bounds
#: are carried by probing their rule (:func:`_carried`): the graph's own here, the element-wise ops
#: added by the family modules that bind them (:mod:`xlasdk.reference.elementwise`, ``convert``)
_ELEMENTWISE: set[str] = {"get_tuple_element", "tuple", "parameter"}


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


# -- rules: the graph's own rows (xlasdk/_optable.py) and calls -----------------------------------------------------
@evaluates(TUPLE, STABLEHLO_TUPLE)
def _tuple(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    return tuple(a)


@evaluates(GET_TUPLE_ELEMENT)
def _graph_gte(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    return a[0][o.extra]


@evaluates(STABLEHLO_GET_TUPLE_ELEMENT)
def _gte(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    return a[0][int(ev.attr(o, "index"))]


refuse_evaluation(PARAMETER, "is given its value: an argument of the evaluation, or of the region it belongs to")
refuse_evaluation(CALL, "is a built graph's call, which the instruction graph the evaluator walks holds as func.call")
refuse_evaluation(RETURN, "only ends a region (its operands are the region's results)")


def _callee_name(o: XlaOp, ev: _Evaluator) -> str:
    """The function a ``func.call`` calls, or a ``stablehlo.composite``'s decomposition."""
    return symbol_name(ev.attr(o, "callee" if o.opcode == "func.call" else "decomposition"))


@evaluates_opaque("func.call")
def _call(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    return ev.call(o, _callee_name(o, ev), a)


@evaluates_opaque("stablehlo.composite")
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
    #: mismatches where one side is NaN or infinite and the other is not (or is the other
    #: infinity): the max columns, taken over finite differences, do not show them
    nonfinite_mismatches: int = 0
    #: the largest absolute error relative to the output's scale (its largest finite magnitude):
    #: unlike ``max_rel``, not dominated by elements near zero
    max_scaled: float = 0.0
    #: elements whose carried bound is too loose to judge them (:func:`._orders.vacuous`), the loosest
    unjudged: int = 0
    loosest: float = 0.0

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
    #: the device kind whose error model judged the values (``"cpu"``, ``"tpu-v5e"``...)
    device_kind: str = "cpu"
    #: the precision-limited ops of the program and the bound each is judged by
    #: (``"convolution.3: TPU v5e DEFAULT precision (bf16 inputs; bound 7.8e-3 of |A|·|B|)"``)
    precision_notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(o.ok and not o.unjudged for o in self.outputs)

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready values (what ``xlasdk compare --json`` writes)."""
        doc: dict[str, Any] = {"name": self.name, "against": self.against, "match": self.ok, "verdict": verdict(self),
                               "outputs": [
            {"index": o.index, "shape": list(o.shape), "dtype": o.dtype, "max_abs": o.max_abs, "max_rel": o.max_rel,
             "max_ulp": o.max_ulp, "max_scaled": o.max_scaled, "mismatches": o.mismatches,
             "nonfinite_mismatches": o.nonfinite_mismatches, "unjudged": o.unjudged,
             "first_mismatch": None if o.first_mismatch is None else list(o.first_mismatch)}
            for o in self.outputs], "device_kind": self.device_kind, "precision_notes": list(self.precision_notes)}
        for key, part in (("bisect_ops", self.bisect_ops), ("bisect_passes", self.bisect_passes),
                          ("nonfinite", self.nonfinite)):
            if part is not None:
                doc[key] = part.as_dict()
        return doc

    def __str__(self) -> str:
        head = f"{self.name}: device vs {self.against}: {verdict(self)}"
        rows = [f"  {'output':<7}{'shape':<18}{'dtype':<10}{'max abs':>12}{'max rel':>12}{'max ulp':>10}"
                f"{'mismatches':>12}  first"]
        for o in self.outputs:
            rows.append(
                f"  {o.index:<7}{str(list(o.shape)):<18}{o.dtype:<10}{o.max_abs:>12.3g}{o.max_rel:>12.3g}"
                f"{o.max_ulp:>10.3g}{o.mismatches:>12}  {'' if o.first_mismatch is None else list(o.first_mismatch)}"
                + (f"  ({o.nonfinite_mismatches} NaN/Inf against a different value)" if o.nonfinite_mismatches else "")
            )
        scaled = [f"  output {o.index}: largest error {o.max_scaled:.3g} of the output's scale" for o in self.outputs
                  if o.max_scaled > 0 and o.max_rel > 10 * o.max_scaled]  # where near-zero elements dominate max rel
        notes = ([f"  precision-limited ops on {self.device_kind} (each within its bound):"]
                 + [f"    {n}" for n in self.precision_notes]) if self.precision_notes else []
        extra = [str(x) for x in (self.bisect_ops, self.bisect_passes, self.nonfinite) if x is not None]
        return "\n".join([head, *rows, *scaled, *unjudged_lines(self.outputs), *notes, *extra])


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
            bad, loose = judge_order(got, want, getattr(scale, "order", None), _BOUND_MARGIN)
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
            if carried is not None and carried.shape == w.shape and getattr(scale, "modeled", False) and (
                    rtol == d_rtol and _is_float(want.dtype) and want.dtype.kind != "c"):
                # a dot's value: its model's bound (relative to |A|·|B|, with what it carries in) and one
                # ulp, not a fraction of the output's scale, which a wrong value hides under
                tol_abs, rtol = _tiny(want.dtype), 0.0 if getattr(scale, "exact", False) else _eps(want.dtype)
            if carried is not None and carried.shape == w.shape:
                tol_abs = tol_abs + _BOUND_MARGIN * carried  # the rounding the ops before it may have moved it by
            bad = ~same & ~(diff <= (tol := tol_abs + rtol * np.abs(np.where(finite_w, w, 0))))
            loose = vacuous(carried, same | (diff == 0), tol, w, finite_w, max(big, scale, reach(scale)))
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
        int(np.count_nonzero(bad & ~finite)), _scaled(diff, w, finite), *loose)


#: What the device side of a comparison against the reference compiles with: XLA may otherwise keep
#: values of bf16/f16 ops in f32 between ops (``xla_allow_excess_precision``, on by default), which
#: the per-op rounding of the reference does not do.
STRICT_PRECISION = (("xla_allow_excess_precision", False),)


from ._orders import _scaled, judge_order, reach, unjudged_lines, vacuous, verdict, with_order  # noqa: E402
