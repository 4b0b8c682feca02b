"""The reference evaluator's walk (split from :mod:`xlasdk.reference._evaluator`, which re-exports
the public ones; rules and tools import the others from here): the rule tables
(:data:`CUSTOM_CALL_RULES`, :data:`OPAQUE_RULES`, :func:`rule_of`), the element types of values, the
:class:`Evaluator` that walks a program's graph, the helpers the families' rules share, and the rules
of the graph's own rows (``tuple``, ``get_tuple_element``) and of calls."""


from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
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
from ..errors import GraphImportError, UnsupportedOpError, XlaSdkError
from ..ops.convert import BITCAST_CONVERT
from ..ops.elementwise import BINARY
from ..ops.sources import CONSTANT
from ..shape import Shape
from ._precision import DeviceKind, device_kind, dot_precision, round_to

if TYPE_CHECKING:
    from ..program.computation import XlaComputation

ml_dtypes: Any = _ml_dtypes  # untyped functions (finfo)

__all__: list[str] = ["UnsupportedOpError", "RULES", "REFUSED", "CUSTOM_CALL_RULES", "OPAQUE_RULES"]


Value = Any  # np.ndarray, or a tuple of them for multi-result ops
Rule = Callable[[XlaOp, list[Value], "Evaluator"], Value]
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
def dtype_of(shape: Shape) -> np.dtype[Any]:
    return np.dtype(shape.numpy_dtype())


def widened(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A float operand as float64 (complex as complex128); others as they are."""
    if x.dtype.kind == "c":
        return x.astype(np.complex128)
    if x.dtype.kind == "f" or x.dtype.kind == "V" or is_ml_float(x.dtype):
        return x.astype(np.float64)
    return x


def is_ml_float(dt: np.dtype[Any]) -> bool:
    try:
        ml_dtypes.finfo(dt)
        return dt.kind not in "iub"
    except (ValueError, TypeError):
        return False


def is_float(dt: np.dtype[Any]) -> bool:
    return dt.kind in "fc" or is_ml_float(dt)


def as_output(x: Any, shape: Shape) -> np.ndarray[Any, Any]:
    """``x`` rounded once to the result's element type (and broadcast to its shape when it has
    fewer dimensions; inside a region folded element-wise (:func:`_reduce`) values carry the
    batch of folds as leading dimensions)."""
    dt = dtype_of(shape)
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


class Evaluator:
    """The walk over a program's graph, and the interface every evaluation rule receives as ``ev``
    (``rule(node, operands, ev) -> value``) and the tools (bisect, compare op by op) drive.

    What rules may use:

    - :meth:`attr` (``ev.attr(node, name, default)``): an attribute's value (one the op's row declares
      as the typed value the builder stores, on built and loaded nodes alike), read once per op;
    - :meth:`fail` (``raise ev.fail(node, why)``): the :class:`UnsupportedOpError` naming the op;
    - :meth:`region` (``ev.region(r, args)``): a region's results on its block arguments, the outer
      values it reads taken from :attr:`current`, the scope being evaluated;
    - :meth:`call` / :meth:`callee`: a called function's results, its graph (imported once);
    - :attr:`model`, :attr:`precision`, :attr:`emulate`: the error model the bounds follow.

    What the tools use as well: :meth:`run_graph` (evaluate the nodes some roots need into an env),
    :meth:`node` (one node's value), :meth:`record_calls` / :meth:`forget` and :attr:`called` (the
    values inside calls, which the error bounds follow), :attr:`callees` (the called functions'
    graphs, shared by several evaluators of one computation).
    """

    def __init__(self, comp: XlaComputation) -> None:
        self.comp = comp
        self.callees: dict[str, Any] = _CALLEES.setdefault(comp, {})
        self.current: dict[int, Value] = {}  # the values of the scope being evaluated (regions read it)
        # the graph and the values inside each call made from a recorded scope (:meth:`record_calls`),
        # by ``(id(caller's scope), id(call node))``: the error bounds follow a call's ops on them
        self.called: dict[tuple[int, int], tuple[Any, dict[int, Value]]] = {}
        self._recorded: set[int] = set()
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
        """Attribute ``name`` of ``node`` as a typed value (``default`` when it has none):
        :meth:`XlaOp.attr <xlasdk.builder.XlaOp.attr>` (a loaded node's read once from its spelling).

        Raises
        ------
        UnsupportedOpError: a declared attribute whose spelling does not fit its kind (naming the
        op and the attribute).
        """
        try:
            return node.attr(name, default)
        except GraphImportError as e:
            raise self.fail(node, f"with an attribute the reference evaluator cannot read ({e})") from None

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
        if self.emulate and o.opdef.props.bilinear and len(args) == 2:  # as the device computes it
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
        from ..program.graph_import import import_graph

        g = self.callees.get(name)
        if g is None:
            g = self.callees[name] = import_graph(self.comp.compiler_ir(), self.comp.name, name)
        return g

    def call(self, o: XlaOp, callee: str, args: list[Value]) -> Value:
        g = self.callee(callee)
        env: dict[int, Value] = {id(p): as_output(a, p.shape) for p, a in zip(g.params, args, strict=True)}
        if id(self.current) in self._recorded:
            self.called[id(self.current), id(o)] = (g, env)
            self._recorded.add(id(env))
        outs = self.run_graph([*g.outputs, *g.effects], env)[: len(g.outputs)]
        return outs[0] if len(outs) == 1 else tuple(outs)


# -- helpers the families' rules share ------------------------------------------------------------------------
def total_order_key(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Integers ordered as XLA's TOTALORDER orders floats (-NaN < -inf < ... < -0 < +0 < ... < NaN)."""
    bits = np.ascontiguousarray(x.astype(np.float64)).view(np.int64)
    return bits ^ ((bits >> np.int64(63)) & np.int64(0x7FFF_FFFF_FFFF_FFFF))


def result_shapes(o: XlaOp) -> list[Shape]:
    """One shape per result of ``o`` (several results make a tuple shape)."""
    return list(o.shape.tuple_shapes()) if o.shape.is_tuple() and not o.opdef.tuple_result else [o.shape]


def results_of(o: XlaOp, values: Sequence[Value]) -> Value:
    """``o``'s value from its results: the one result, or a tuple of several."""
    return values[0] if len(values) == 1 and len(result_shapes(o)) == 1 else tuple(values)


#: the usual reducers' numpy ufuncs, by row
_REDUCERS = {BINARY[name].opdef: fn for name, fn in (
    ("Add", np.add), ("Mul", np.multiply), ("Max", np.maximum), ("Min", np.minimum), ("And", np.logical_and),
    ("Or", np.logical_or))}


def numpy_reducer(r: Region, dtype: np.dtype[Any]) -> Any:
    """numpy's ufunc for a region that is one of the usual reducers of its two parameters (add,
    multiply, max, min, and, or: bitwise for integers), else None."""
    if len(r.results) != 1 or len(r.params) != 2:
        return None
    res = r.results[0]
    table_row = OPS.get(res.opdef.name)  # an opaque row of a loaded module reads as its name's row
    fn = _REDUCERS.get(table_row) if table_row is not None else None
    if fn is None or len(res.operands) != 2 or set(map(id, res.operands)) != set(map(id, r.params)):
        return None
    if dtype.kind in "iu" and fn in (np.logical_and, np.logical_or):
        return np.bitwise_and if fn is np.logical_and else np.bitwise_or
    return fn


#: the ops a region run on whole slices may hold (:func:`check_elementwise`), and whose error bounds
#: are carried by probing their rule (:func:`_carried`): the graph's own here, the element-wise ops
#: added by the family modules that bind them (:mod:`xlasdk.reference.elementwise`, ``convert``)
ELEMENTWISE_OPS: set[str] = {"get_tuple_element", "tuple", "parameter"}


def check_elementwise(r: Region, owner: XlaOp, ev: Evaluator) -> None:
    """Refuse a region that is not element-wise on scalars (it cannot run on whole slices)."""
    seen: set[int] = set()
    stack = list(r.results)
    while stack:
        o = stack.pop()
        if id(o) in seen or o in r.params:
            continue
        seen.add(id(o))
        scalar_const = o.opdef.same_op(CONSTANT) and not o.shape.is_tuple() and o.shape.dimensions() == ()
        same_width_bitcast = o.opdef.same_op(BITCAST_CONVERT) and (
            dtype_of(o.shape).itemsize == dtype_of(o.operands[0].shape).itemsize)
        if o.opcode not in ELEMENTWISE_OPS and not scalar_const and not same_width_bitcast:
            raise ev.fail(owner, f"with a region holding {o.opcode} (only element-wise regions are evaluated)")
        if o.regions:
            raise ev.fail(owner, "with a region holding nested regions")
        stack.extend(o.operands)


def combiner(r: Region, owner: XlaOp, ev: Evaluator) -> Callable[[list[Any], list[Any]], list[Any]]:
    """How an update region combines current values with updates: numpy's function for the usual
    ones (and plain assignment), else the region run element-wise."""
    if len(r.results) == 1 and len(r.params) == 2:
        res = r.results[0]
        if res is r.params[1]:
            return lambda cur, upd: [upd[0]]
        fn = numpy_reducer(r, dtype_of(r.params[0].shape))
        if fn is not None:
            def numpy_fn(cur: list[Any], upd: list[Any]) -> list[Any]:
                c, u = cur[0], upd[0]
                with np.errstate(all="ignore"):
                    return [fn(c, u) if c.dtype.kind in "iub" else fn(widened(c), widened(u))]
            return numpy_fn
    check_elementwise(r, owner, ev)
    return lambda cur, upd: [np.asarray(v) for v in ev.region(r, [*cur, *upd])]


# -- rules: the graph's own rows (xlasdk/_optable.py) and calls -----------------------------------------------------
@evaluates(TUPLE, STABLEHLO_TUPLE)
def _tuple(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    return tuple(a)


@evaluates(GET_TUPLE_ELEMENT)
def _graph_gte(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    return a[0][o.extra]


@evaluates(STABLEHLO_GET_TUPLE_ELEMENT)
def _gte(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    return a[0][int(ev.attr(o, "index"))]


refuse_evaluation(PARAMETER, "is given its value: an argument of the evaluation, or of the region it belongs to")
refuse_evaluation(CALL, "is a built graph's call, which the instruction graph the evaluator walks holds as func.call")
refuse_evaluation(RETURN, "only ends a region (its operands are the region's results)")


def callee_name(o: XlaOp, ev: Evaluator) -> str:
    """The function a ``func.call`` calls, or a ``stablehlo.composite``'s decomposition."""
    return symbol_name(ev.attr(o, "callee" if o.opcode == "func.call" else "decomposition"))


@evaluates_opaque("func.call")
def _call(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    return ev.call(o, callee_name(o, ev), a)


@evaluates_opaque("stablehlo.composite")
def _composite(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """A named op (``chlo.top_k``, ``erf_inv``... as JAX exports them) is its decomposition."""
    return ev.call(o, callee_name(o, ev), a)
