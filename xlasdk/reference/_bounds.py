"""How far XLA may be from the reference at each output (split from
:mod:`xlasdk.reference._evaluator`; import its names from here): the term scale of the op that
made an output (:func:`output_scale`) and the first-order running error bound carried through the
graph (:func:`error_bounds`, each op's own rounding :func:`own_rounding`)."""


from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import ml_dtypes as _ml_dtypes
import numpy as np

from .._optable import (
    GET_TUPLE_ELEMENT,
    PARAMETER,
)
from ..builder import Region, XlaOp
from ..ops.control import IF, WHILE
from ..ops.convert import CONVERT
from ..ops.elementwise import COMPARE, SELECT
from ..ops.fft import FFT
from ..ops.reduce import REDUCE
from ..ops.sources import CONSTANT
from ..program.walk import reachable
from ..shape import Shape
from ._precision import dot_precision, function_ulps, op_bound, round_to, strength_reduced
from ._walk import (
    ELEMENTWISE_OPS,
    Evaluator,
    Rule,
    Value,
    as_output,
    callee_name,
    is_float,
    is_ml_float,
    numpy_reducer,
    results_of,
    rule_of,
    widened,
)

ml_dtypes: Any = _ml_dtypes  # untyped functions (finfo)

__all__: list[str] = []


# The ops' properties these bounds read (what moves data, what adds terms, what is exact...) are
# the rows' (:class:`xlasdk._optable.OpProps`, declared in :mod:`xlasdk.ops._props`).


def _term_scale(o: XlaOp, args: list[Value]) -> float:
    """The largest magnitude among the terms ``o`` added (0 when it does not apply)."""
    arrays = [np.asarray(a) for a in args if isinstance(a, np.ndarray) and is_float(a.dtype)]
    if not arrays:
        return 0.0
    with np.errstate(all="ignore"):
        if o.opdef.props.bilinear and len(arrays) == 2:
            # a product's terms: |x| |y| summed is at most max|x| max|y| times the contraction size
            x, y = (np.abs(widened(a)) for a in arrays)
            big = float(np.max(x, initial=0.0)) * float(np.max(y, initial=0.0))
            return big * max(x.size, y.size) ** 0.5 if np.isfinite(big) else 0.0
        m = max(float(np.max(np.abs(widened(a)), initial=0.0, where=np.isfinite(widened(a)))) for a in arrays)
        if o.opdef.same_op(FFT):  # each output sums n terms, through log2(n) stages of rounding
            length: tuple[int, ...] = o.attr("fft_length", ())
            n = max(int(np.prod(length or (1,))), 1)
            return float(m * n ** 0.5 * max(1.0, math.log2(n)))
    return m


def output_scale(node: XlaOp, env: dict[int, Value], ev: Evaluator | None = None) -> float:
    """The term scale of the additive op (add, subtract, a sum, a dot, a convolution) that produced
    an output, looking through ops that only move or convert values and, with ``ev`` (which
    recorded the calls made from ``env``), into the function a call ran: the scale of its rounding
    error, whatever the result's size (a difference of two large numbers can be 0 in one correct
    rounding and 8 in another). Computed for the outputs only, from the main graph's values."""
    k = 0  # which result of a multi-result op the value is
    for _ in range(64):
        props = node.opdef.props
        if props.additive:
            return _term_scale(node, [env[id(x)] for x in node.operands])
        if props.calls_function and ev is not None and (id(env), id(node)) in ev.called:
            g, env = ev.called[id(env), id(node)]
            node, k = g.outputs[k if len(g.outputs) > 1 else 0], 0
            continue
        if not (props.moves_data or node.opdef is GET_TUPLE_ELEMENT) or not node.operands:
            return 0.0
        k = node.extra if node.opdef is GET_TUPLE_ELEMENT else 0
        node = node.operands[0]
    return 0.0


# -- how far rounding can move each value: a first-order running error bound -----------------------------------
# XLA and the reference round differently at every op; an output's tolerance must cover what those
# roundings can do by the time they reach it. Each float value of the main graph gets a per-element
# bound of the error it may carry (:func:`error_bounds`): its own rounding (:func:`own_rounding`)
# plus its operands' bounds carried through the op: element-wise ops (:data:`ELEMENTWISE_OPS`, the ops
# a region may hold) by evaluating the op's rule on the operands moved by their bounds
# (each sign); moves, slices, gathers and maxima (``OpProps.moves_data`` / ``linear`` / ``sums``)
# by running the op's rule on the bounds themselves;
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
# off by BOUND_MARGIN times its bound (a margin applied once, at the end, not per op).
BOUND_MARGIN = 4.0  # how many times its carried error bound an output may be off by


def type_eps(dtype: np.dtype[Any]) -> float:
    dt = np.dtype(dtype)
    if dt.kind == "c":
        dt = np.dtype(np.float32 if dt.itemsize == 8 else np.float64)
    return float(ml_dtypes.finfo(dt).eps) if is_ml_float(dt) else float(np.finfo(dt).eps)


def is_float_array(v: Any) -> bool:
    return isinstance(v, np.ndarray) and is_float(v.dtype)


def _is_complex(v: Any) -> bool:
    return isinstance(v, np.ndarray) and v.dtype.kind == "c"


def magnitude(v: Value) -> np.ndarray[Any, Any]:
    with np.errstate(all="ignore"):
        m = np.abs(widened(np.asarray(v))).astype(np.float64)
    return np.asarray(np.where(np.isfinite(m), m, 0.0))


def _sum_kind(o: XlaOp) -> str | None:
    """``"add"`` or ``"max"`` for a reduce / reduce_window whose region is one such binary op."""
    if not o.regions:
        return None
    fn = numpy_reducer(o.regions[0], np.dtype(np.float64))
    return {np.add: "add", np.maximum: "max", np.minimum: "max"}.get(fn)


def _carried(o: XlaOp, vals: list[Value], errs: list[np.ndarray[Any, Any] | None], out: np.ndarray[Any, Any],
             ev: Evaluator) -> np.ndarray[Any, Any] | None:
    """The operands' error bounds carried through ``o`` to its value ``out`` (None: not carried)."""
    op = o.opcode
    props = o.opdef.props
    rule = rule_of(o)
    if rule is None:
        return None
    with np.errstate(all="ignore"):
        if op in ELEMENTWISE_OPS and (out.dtype.kind == "c" or any(_is_complex(v) for v in vals)):
            return _spread(rule, o, vals, errs, out, ev)
        if op in ELEMENTWISE_OPS:
            worst = np.zeros(out.shape, np.float64)
            moved = [k for k, e in enumerate(errs) if e is not None]
            for signs in range(1 << len(moved)):
                moves = {k: (-1.0 if signs >> bit & 1 else 1.0) * errs[k] for bit, k in enumerate(moved)}  # type: ignore[operator]
                worst = np.maximum(worst, _probe(rule, o, vals, moves, out, ev))
            return worst
        summing = props.sums and _sum_kind(o) == "add"
        if props.moves_data or props.linear or (props.sums and _sum_kind(o) is not None):
            # a sum of terms with errors: their root sum of squares (rounding errors of different
            # terms do not line up); moves and maxima carry the bounds as they are
            carry: list[Any] = []
            for e, v in zip(errs, vals, strict=True):
                if e is not None:
                    carry.append(e * e if summing else e)
                else:
                    carry.append(np.zeros(np.shape(v), np.float64) if is_float_array(v) else v)
            if props.sums and len(vals) == 2:  # (operand, init): the init's error counts once
                carry[1] = np.zeros(np.shape(vals[1]), np.float64)
            spread = magnitude(rule(Widened(o), carry, ev))  # type: ignore[arg-type]
            return np.sqrt(spread) if summing else spread
        if props.bilinear and len(vals) == 2:
            wide_o = Widened(o)
            squares = [magnitude(v) ** 2 for v in vals]
            total = np.zeros(out.shape, np.float64)
            if errs[0] is not None:
                total += magnitude(rule(wide_o, [errs[0] ** 2, squares[1]], ev))  # type: ignore[arg-type]
            if errs[1] is not None:
                total += magnitude(rule(wide_o, [squares[0], errs[1] ** 2], ev))  # type: ignore[arg-type]
            return np.sqrt(total)
    return None


def _probe(rule: Rule, o: Any, vals: list[Value], moves: Mapping[int, Any], base: np.ndarray[Any, Any],
           ev: Evaluator) -> np.ndarray[Any, Any]:
    """``|rule(vals + moves) - base|`` per element for an element-wise op ``o`` whose value on
    ``vals`` is ``base``. Where a move takes an operand out of the op's domain (a non-finite value
    where ``base`` is finite: the square root of a sum of squares moved below 0), the move is
    halved there until it is inside: the device's operands, for which it gave a finite value, lie
    within."""
    wide_base = widened(np.asarray(base))
    t: Any = 1.0
    shrink = all(np.shape(vals[k]) == wide_base.shape for k in moves)
    for _ in range(64):
        args = list(vals)
        for k, d in moves.items():
            args[k] = widened(np.asarray(vals[k])) + t * np.broadcast_to(d, np.shape(vals[k]))
        got = widened(np.asarray(rule(o, args, ev)))
        outside = ~np.isfinite(got) & np.isfinite(wide_base)
        if not shrink or not outside.any():
            break
        t = np.where(outside, 0.5 * t, t)
    diff = np.abs(got - wide_base)
    return np.asarray(np.where(np.isnan(diff), 0.0, diff))


def _spread(rule: Rule, o: Any, vals: list[Value], errs: Sequence[np.ndarray[Any, Any] | None],
            base: np.ndarray[Any, Any], ev: Evaluator) -> np.ndarray[Any, Any]:
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
        v = widened(np.asarray(vals[k]))
        step = np.broadcast_to(e, v.shape)
        parts = []
        for direction in ((1.0, 1j) if v.dtype.kind == "c" else (1.0,)):
            worst = np.zeros(np.shape(base), np.float64)
            for sign in (1.0, -1.0):
                worst = np.maximum(worst, _probe(rule, o, vals, {k: (sign * direction) * step}, base, ev))
            parts.append(worst)
        total += np.hypot(parts[0], parts[1]) if len(parts) == 2 else parts[0]
    return total


def _call_bounds(o: XlaOp, vals: list[Value], errs: list[Any], env: dict[int, Value], ev: Evaluator) -> Any:
    """The bounds of the results of call ``o`` (of scope ``env``, on ``vals`` carrying ``errs``): the
    function's ops followed one by one (:func:`error_bounds`), on the values the evaluator
    recorded in this call, or, when it recorded none (an evaluator made without
    :meth:`Evaluator.record_calls`), on the call evaluated again."""
    recorded = ev.called.get((id(env), id(o)))
    if recorded is None:
        g = ev.callee(callee_name(o, ev))
        inner = {id(p): as_output(a, p.shape) for p, a in zip(g.params, vals, strict=True)}
        ev.called[id(env), id(o)] = (g, inner)  # kept alive with its id, a key of the calls it makes
        ev.record_calls(inner)
        ev.run_graph([*g.outputs, *g.effects], inner)
    else:
        g, inner = recorded
    seeds = {id(p): e for p, e in zip(g.params, errs, strict=True) if e is not None}
    inside = error_bounds(g.outputs, inner, ev, seeds)
    res = tuple(inside.get(id(x)) for x in g.outputs)
    return res[0] if len(res) == 1 else res


def _region_bounds(r: Region, args: Sequence[Value], arg_errs: Sequence[Any], env: dict[int, Value],
                   ev: Evaluator, outer: Mapping[int, Any]) -> tuple[list[Value], list[Any]]:
    """Region ``r`` run on ``args`` (its block arguments, carrying ``arg_errs``; a branch's bound
    values instead, when it has bindings) in scope ``env`` (whose values carry the bounds ``outer``):
    the values of its results and their bounds, its ops followed one by one (:func:`error_bounds`)."""
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
        inside = error_bounds(r.results, inner, ev, seeds)
    finally:
        ev.forget(inner)
    return vals, [inside.get(id(x)) for x in r.results]


def _while_bounds(o: XlaOp, vals: list[Value], errs: list[Any], env: dict[int, Value], ev: Evaluator,
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
    return tuple(state_errs) if isinstance(results_of(o, state), tuple) else state_errs[0]


def _branch_bounds(o: XlaOp, vals: list[Value], env: dict[int, Value], ev: Evaluator,
                   outer: Mapping[int, Any]) -> Any:
    """The bounds of the results of conditional ``o`` (``stablehlo.if`` / ``case``, of scope ``env``
    whose values carry ``outer``): the branch it took (as its rule picks it) followed op by op."""
    i = int(np.asarray(vals[0]))
    n = len(o.regions)
    if o.opdef.same_op(IF):
        branch = o.regions[0] if bool(np.asarray(vals[0])) else o.regions[1]
    else:
        branch = o.regions[i if 0 <= i < n else n - 1]
    outs, errs = _region_bounds(branch, [], [], env, ev, outer)
    return tuple(errs) if isinstance(results_of(o, outs), tuple) else errs[0]


class Widened:
    """An op seen with a float64 result type (``dtype``), so that its rule computes error bounds in
    float64 (a bound is a magnitude, not a value of the op's type); with complex128, the exact
    value of a complex op."""

    def __init__(self, o: XlaOp, dtype: Any = np.float64) -> None:
        self._o = o
        shape = o.shape
        self.shape = Shape.array_shape(dtype, tuple(shape.dimensions())) if shape.is_array() else shape

    def __getattr__(self, name: str) -> Any:
        return getattr(self._o, name)


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
    return type_eps(np.dtype(np.float64)) if wide else type_eps(np.dtype(np.float32))


#: A complex dot on a device that rounds its f32 inputs (a TPU at DEFAULT precision) is real dots of
#: the parts: each part rounded to bf16, each real dot within the real bound of its |A|·|B|, and
#: |ar||br| + |ai||bi| <= |a||b|: the real bound of the moduli covers it (the chip is checked by
#: tests/ops/test_linalg.py's complex64 dots).
_COMPLEX_PARTS = 1.0


def own_rounding(o: XlaOp, vals: list[Value], out: np.ndarray[Any, Any], ev: Evaluator) -> np.ndarray[Any, Any]:
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
    props = o.opdef.props
    zero = np.zeros(out.shape, np.float64)
    cplx = out.dtype.kind == "c" or any(_is_complex(v) for v in vals)
    row = op_bound(o, ev.model)  # the device kind's error model (:mod:`._precision`)
    if (row is not None and row.kind == "exact" and not cplx) or (
            (props.moves_data or props.matches_reference) and not (cplx and props.inexact_complex)
            and (row is None or row.kind != "ulps")):
        return zero
    rule = rule_of(o)
    eps_out = type_eps(out.dtype)
    if rule is None or not all(isinstance(v, np.ndarray) for v in vals):
        return eps_out * magnitude(out)
    eps = _compute_eps(out.dtype)
    with np.errstate(all="ignore"):
        wide: Any = Widened(o)  # the op with a float64 result: its rule gives magnitudes
        exact_op: Any = Widened(o, np.complex128) if out.dtype.kind == "c" else wide  # and the exact value
        if props.bilinear and len(vals) == 2:
            terms = magnitude(rule(wide, [magnitude(v) for v in vals], ev))
            k = max(vals[0].size * vals[1].size / max(out.size, 1), 1.0) ** 0.5  # the contraction size
            exact = np.asarray(rule(exact_op, vals, ev))
            if ev.model.platform == "cpu" and ev.precision is None:  # f32 products, f32 sums
                return _flip(exact, eps * k ** 0.5 * terms, out.dtype)
            dp = dot_precision(o, (vals[0].dtype, vals[1].dtype), ev.model, ev.precision, ev.emulate)
            acc = max(dp.acc_eps, eps if out.dtype.itemsize < 8 else 0.0)
            bound = (dp.product_rel + acc * k ** 0.5) * terms
            if ev.emulate and (rounds := dot_precision(o, (vals[0].dtype, vals[1].dtype), ev.model,
                                                       ev.precision)).round_inputs is not None:
                if cplx:  # the device's real dots of the parts (or of their sums) round them: no emulation
                    bound = bound + _COMPLEX_PARTS * rounds.product_rel * terms
                elif strength_reduced(o, np.shape(vals[0]), np.shape(vals[1])):  # f32 inputs as they are
                    bound = bound + np.abs(exact - np.asarray(out, np.float64))
            return _flip(exact, bound, out.dtype)
        if row is not None and row.kind == "ulps" and op in ELEMENTWISE_OPS and not cplx:  # real functions
            exact = np.asarray(rule(exact_op, vals, ev))
            ulps, r_atol, r_rtol = function_ulps(o, ev.model, row)  # result_accuracy where set
            mag = magnitude(exact)
            return _flip(exact, np.maximum(ulps * eps * mag, np.maximum(r_atol, r_rtol * mag)), out.dtype)
        if props.sums and _sum_kind(o) == "add" and len(vals) == 2:
            terms = magnitude(rule(wide, [magnitude(vals[0]), np.zeros(np.shape(vals[1]))], ev))
            k = max(vals[0].size / max(out.size, 1), 1.0) ** 0.5
            exact = np.asarray(rule(exact_op, vals, ev))
            return _flip(exact, eps * k * terms, out.dtype)
        if op in ELEMENTWISE_OPS:
            exact = np.asarray(rule(exact_op, vals, ev))
            return _flip(exact, _IMPL_ULPS * eps * magnitude(exact), out.dtype)
    return eps_out * magnitude(out)


class OutputScale(float):
    """An output's term scale (a float, as :func:`output_scale` gives it) with the per-element
    error bound (:func:`error_bounds`) its value carries, or None, in ``bound``."""

    bound: np.ndarray[Any, Any] | None
    #: the value is a dot's or a convolution's (through moves): the default tolerance is its bound
    #: (relative to |A|·|B|, :mod:`._precision`) and one ulp, not a fraction of the output's scale
    modeled: bool

    #: the value's op is bit-exact on the device's operands (moves, comparisons, selects...)
    exact: bool

    def __new__(cls, value: float, bound: Any = None, modeled: bool = False, exact: bool = False) -> OutputScale:
        self = super().__new__(cls, value)
        self.bound = bound if isinstance(bound, np.ndarray) else None
        self.modeled = modeled or exact
        self.exact = exact
        return self


def made_by_dot(node: XlaOp) -> bool:
    """Whether ``node`` is a dot's or a convolution's value, seen through ops that only move values."""
    for _ in range(64):
        if node.opdef.props.bilinear:
            return True
        if not (node.opdef.props.moves_data and not node.opdef.same_op(CONVERT)) or not node.operands:
            return False
        node = node.operands[0]
    return False


def error_bounds(outputs: Sequence[XlaOp], env: dict[int, Value], ev: Evaluator,
                  seeds: Mapping[int, Any] | None = None) -> dict[int, Any]:
    """Per float or complex node of the graph that ``outputs`` read (``env``: its values): a
    per-element bound (float64 array of the value's shape; a tuple of them for several results) of
    the rounding error its value may carry (see the comment above :data:`BOUND_MARGIN`). ``seeds``: the
    bounds its parameters carry in (a called function's, from the call's operands; else none)."""
    bounds: dict[int, Any] = dict(seeds or {})
    # not past a seeded value (a parameter, or an outer value a region reads), nor one not evaluated
    nodes = reachable(outputs, stop=lambda o: id(o) not in env or id(o) in bounds, regions=True)
    saved = ev.current
    ev.current = env  # the scope the regions of the ops' rules read
    try:
        _follow(nodes, bounds, env, ev)
    finally:
        ev.current = saved
    return bounds


def _follow(nodes: list[XlaOp], bounds: dict[int, Any], env: dict[int, Value], ev: Evaluator) -> None:
    """The bounds of ``nodes`` (of scope ``env``, in creation order) into ``bounds`` (see :func:`error_bounds`)."""
    for o in nodes:
        if id(o) in bounds:  # already known
            continue
        out = env[id(o)]
        vals = [env[id(x)] for x in o.operands]
        errs = [bounds.get(id(x)) if isinstance(bounds.get(id(x)), np.ndarray) and is_float_array(v) else None
                for x, v in zip(o.operands, vals, strict=True)]
        if o.opdef is GET_TUPLE_ELEMENT:
            e = bounds.get(id(o.operands[0]))
            if isinstance(e, tuple) and o.extra < len(e):
                bounds[id(o)] = e[o.extra]
            continue
        props = o.opdef.props
        if props.calls_function:
            bounds[id(o)] = _call_bounds(o, vals, [bounds.get(id(x)) for x in o.operands], env, ev)
            continue
        if o.opdef.same_op(WHILE) and len(o.regions) == 2:
            bounds[id(o)] = _while_bounds(o, vals, [bounds.get(id(x)) for x in o.operands], env, ev, bounds)
            continue
        if props.control_flow and o.regions and vals:
            bounds[id(o)] = _branch_bounds(o, vals, env, ev, bounds)
            continue
        if isinstance(out, tuple):  # several results: each carries the largest bound in
            top = max((float(np.max(e, initial=0.0)) for e in errs if e is not None), default=0.0)
            bounds[id(o)] = tuple(np.full(np.shape(r), top) + type_eps(r.dtype) * magnitude(r) if is_float_array(r)
                                  else None for r in out)
            continue
        flips = _flips(o, vals, bounds)
        if flips is not None and not is_float_array(out):
            bounds[id(o)] = flips  # a predicate that may come out the other way
            continue
        if not is_float_array(out):
            moved = _moved_flips(o, vals, bounds, out, ev)
            if moved is not None:  # an integer or boolean value made from one that may come out otherwise
                bounds[id(o)] = moved
            continue
        own = own_rounding(o, vals, out, ev) if o.opdef is not PARAMETER and not o.opdef.same_op(CONSTANT) \
            else np.zeros(out.shape, np.float64)
        branch = _branch_flips(o, vals, bounds, out)
        if branch is not None:
            own = own + branch
        if not any(e is not None and e.any() for e in errs):
            bounds[id(o)] = own
            continue
        errs = _through_input_rounding(o, vals, errs, ev)
        try:
            carried = _carried(o, vals, errs, out, ev)
        except Exception:  # noqa: BLE001 - a rule that cannot take bounds: carry the largest
            carried = None
        if carried is None:
            carried = np.full(out.shape, max(float(np.max(e, initial=0.0)) for e in errs if e is not None))
        total = own + np.broadcast_to(np.asarray(carried, np.float64), out.shape)
        bounds[id(o)] = np.where(np.isnan(total), 0.0, total)


def _through_input_rounding(o: XlaOp, vals: list[Value], errs: list[np.ndarray[Any, Any] | None],
                            ev: Evaluator) -> list[np.ndarray[Any, Any] | None]:
    """The errors of a dot's (a convolution's) operands after the device rounds them, where the
    reference computes as the device does (``ev.emulate``: f32 inputs rounded to bf16 or tf32): an
    operand off by up to ``e`` may round to a neighbouring value, one unit of the narrow type away,
    where ``[x - e, x + e]`` holds a rounding boundary, and to the reference's own rounded value
    where it does not. The device's product takes ``r(y)``, the reference's ``r(x)``, ``|y - x| <= e``;
    rounding is monotonic, so the interval's ends bound ``|r(y) - r(x)|``:
    ``max(|r(x + e) - r(x)|, |r(x - e) - r(x)|)``. Other ops' errors pass unchanged."""
    if not (ev.emulate and o.opdef.props.bilinear and len(vals) == 2):
        return errs
    dp = dot_precision(o, tuple(np.asarray(v).dtype for v in vals), ev.model, ev.precision)
    if dp.round_inputs is None:
        return errs
    out: list[np.ndarray[Any, Any] | None] = []
    for v, e in zip(vals, errs, strict=True):
        x = np.asarray(v)
        if e is None or x.dtype != np.float32:
            out.append(e)
            continue
        with np.errstate(all="ignore"):
            wide = x.astype(np.float64)
            r = round_to(x, dp.round_inputs).astype(np.float64)
            ends = [np.abs(round_to((wide + s * e).astype(np.float32), dp.round_inputs).astype(np.float64) - r)
                    for s in (1.0, -1.0)]
            moved = np.maximum(ends[0], ends[1])
        out.append(np.where(np.isfinite(moved), moved, e))
    return out


def _flips(o: XlaOp, vals: list[Value], bounds: dict[int, Any]) -> np.ndarray[Any, Any] | None:
    """Where a predicate may come out the other way on a device whose operands are off by their
    bounds (1.0 there, 0.0 elsewhere: a comparison whose float operands are within ``BOUND_MARGIN``
    times their bounds of each other), or None (never; a boolean op of such predicates carries
    them on as any integer or boolean value does: :func:`_moved_flips`). A
    ``select`` of such a predicate may take either branch (:func:`_branch_flips`), a ReLU's gradient
    for one: first-order bounds do not see a branch change."""
    masks = [bounds.get(id(x)) for x in o.operands]
    if o.opdef.same_op(COMPARE) and len(vals) == 2 and all(is_float_array(v) for v in vals):
        errs = [m if isinstance(m, np.ndarray) else np.zeros(()) for m in masks]
        if not any(e.any() for e in errs):
            return None
        with np.errstate(all="ignore"):
            wide = np.complex128 if any(_is_complex(v) for v in vals) else np.float64
            gap = np.abs(widened(np.asarray(vals[0])).astype(wide) - widened(np.asarray(vals[1])).astype(wide)).real
            reach = BOUND_MARGIN * (errs[0] + errs[1])
            return np.asarray(np.where(~(gap > reach), 1.0, 0.0))
    return None


def _moved_flips(o: XlaOp, vals: list[Value], bounds: dict[int, Any], out: Any, ev: Evaluator
                 ) -> np.ndarray[Any, Any] | None:
    """Where an integer or boolean value may differ on the device because an operand may (1.0 there,
    0.0 elsewhere): a predicate that may flip (:func:`_flips`) carried through the integer ops XLA
    writes around it (a TPU-optimized module packs a ReLU's mask into the bits of a ``u8`` with
    ``convert``, ``shift-left`` and an or-``reduce``, and unpacks it with ``broadcast``, ``and`` and
    ``convert``); None: no operand may. Element-wise ops: where any operand may; one-operand moves
    (broadcast, reshape, transpose, slice...): the operand's mask moved by the op; a ``reduce``: where
    any element it reduces may; anything else: everywhere."""
    if not isinstance(out, np.ndarray):
        return None
    masks = [bounds.get(id(x)) if isinstance(v, np.ndarray) and not is_float_array(v) else None
             for x, v in zip(o.operands, vals, strict=True)]
    if not any(isinstance(m, np.ndarray) and m.any() for m in masks):
        return None
    found = [(k, np.asarray(m, np.float64)) for k, m in enumerate(masks) if isinstance(m, np.ndarray)]
    try:
        with np.errstate(all="ignore"):
            if o.opcode in ELEMENTWISE_OPS:
                return np.asarray(np.maximum.reduce([np.broadcast_to(m, out.shape) for _, m in found]), np.float64)
            rule = rule_of(o)
            if o.opdef.props.moves_data and len(vals) == 1 and rule is not None:
                moved = magnitude(rule(Widened(o), [found[0][1]], ev))  # type: ignore[arg-type]
                return np.asarray(np.where(moved > 0, 1.0, 0.0))
            if o.opdef.same_op(REDUCE) and len(vals) == 2 and [k for k, _ in found] == [0]:
                dims = tuple(int(d) for d in ev.attr(o, "dimensions", ()))
                return np.asarray(np.max(found[0][1], axis=dims, initial=0.0).reshape(out.shape), np.float64)
    except Exception:  # noqa: BLE001 - a rule that cannot take a mask: everywhere
        pass
    return np.ones(out.shape, np.float64)


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
        if o.opdef.same_op(SELECT) and len(vals) == 3:
            t, f = (widened(np.asarray(v)).astype(np.float64) for v in vals[1:])
            gap = np.abs(np.broadcast_to(t, out.shape) - np.broadcast_to(f, out.shape))
            # the branches' distance, once: an output's tolerance is BOUND_MARGIN times its bound
            return np.where(np.broadcast_to(mask, out.shape) > 0, np.where(np.isfinite(gap), gap, 0.0),
                            0.0) / BOUND_MARGIN
        if o.opdef.same_op(CONVERT):
            return np.broadcast_to(mask, out.shape).astype(np.float64) / BOUND_MARGIN
    return None
