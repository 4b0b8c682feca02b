"""The op table: one :class:`OpDef` per opcode of the graph.

Every node of an xlasdk graph (:class:`xlasdk.builder.XlaOp`) points at its ``OpDef``: the
StableHLO/CHLO op it emits, the HLO instruction the direct HLO printer writes for it and how
(``hlo_attrs``, ``hlo_form``), and its flags (side effects, whether its value is a function of
its operands, tuple operands passed element by element) and, in :attr:`OpDef.props`, what the
tools know of it (:class:`OpProps`, declared in :mod:`xlasdk.ops._props`). Op families define their rows beside
their wrappers and shape rules with :func:`define` (``ADD = define("stablehlo.add", hlo="add")``)
and build nodes with :meth:`XlaBuilder.add_op <xlasdk.builder.XlaBuilder.add_op>`; the emitters
(:mod:`xlasdk._emit`, :mod:`xlasdk._hlo_emit`) read only the row, never an opcode string.

An opcode is named once, in its ``define`` call: defining one twice raises at import, and
``tests/test_optable.py`` checks every row's name against the StableHLO and CHLO dialects.

**A row knows its op whole.** Besides how it prints, each row binds the op's **shape rule**:
``define(name, ..., rule=reverse_shape)``, the plain function of shapes and attribute values that
the op's wrapper calls (``rule(op_name, operand_shapes..., attribute_values...)``, returning the
result shape, or the result dimensions, or nothing for a rule that only checks and keeps an
operand's shape; it raises ``ShapeError`` / ``DTypeError`` naming the op). The family defines the
rule first and the row right after it, then the wrapper. Tools and tests enumerate the rules from
:data:`OPS` (``tests/test_fuzz_shape_rules.py`` fuzzes them, ``tests/test_optable.py`` checks that
every row has one).

**Each row binds its evaluation rule too** (:attr:`OpDef.evaluate`): the reference evaluator's
``rule(node, operands, ev) -> value`` that computes the op in numpy, or, in
:attr:`OpDef.no_evaluate`, why the evaluator refuses the op. Those rules sit in
:mod:`xlasdk.reference`, one module per op family (``reference/indexing.py`` beside
``ops/indexing.py``), which the op families must not import (they are a layer below the tools):
so the reference side binds them, to the row object, with :func:`evaluates` (a decorator) or
:func:`bind_evaluation` / :func:`refuse_evaluation`. A row is bound once (a second binding
raises), and only a row of :data:`OPS` can be bound. ``tests/test_reference_rules.py`` checks that
every row has a rule or a refusal.

A row without a rule says why, with ``no_rule=`` one of the reasons of :data:`NO_RULE` (nothing
else is accepted, and ``define`` refuses a row that gives neither or both):

- :data:`GRAPH_SHAPE`: the graph gives the shape: ``parameter`` (its declared shape), ``tuple``
  (its elements'), ``get_tuple_element`` (an element of its operand's), ``call`` (its
  computation's result), ``stablehlo.return`` (a region's results);
- :data:`EMITTER_ONLY`: written by the emitters themselves from values they already typed, never
  a node that a wrapper builds (``stablehlo.tuple``, ``stablehlo.get_tuple_element``).

Special lowerings (an op built from other ops for some element types) sit beside their rows in
the family module too. A row may also carry a ``host_callback`` hook (the custom-call row does):
the emitters ask it for the Python callable a node calls on the host, and never look at a
family's own data.

This module also holds the rows the graph itself needs (``parameter``, ``tuple``,
``get_tuple_element``, ``call``) and the StableHLO ops the emitters write on their own
(``stablehlo.tuple``, ``stablehlo.get_tuple_element``, ``stablehlo.return``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from .builder import XlaOp

__all__ = [
    "OpDef", "HloForm", "HloUnsupported", "define", "OPS", "NO_RULE", "GRAPH_SHAPE", "EMITTER_ONLY",
    "PARAMETER", "TUPLE", "GET_TUPLE_ELEMENT", "CALL", "STABLEHLO_TUPLE", "STABLEHLO_GET_TUPLE_ELEMENT", "RETURN",
    "braces", "hlo_window", "NOT_DEFINED", "evaluates", "bind_evaluation", "refuse_evaluation", "AttrKind",
    "OpProps", "declare", "OPAQUE_PROPS", "ROW_ALIASES", "opaque_row",
]


class HloUnsupported(Exception):
    """The direct HLO printer does not handle this op (or these attribute values): the caller
    converts the StableHLO module with XLA's converter instead."""


class HloForm(enum.Enum):
    """How the direct HLO printer (:mod:`xlasdk._hlo_emit`) writes an op."""

    NONE = "none"
    """Not printed directly (CHLO ops, custom calls, side effects): XLA's converter is used."""
    PLAIN = "plain"
    """``hlo(operands)`` followed by ``hlo_attrs(op)``."""
    FULL_SHAPE_OPERANDS = "full_shape_operands"
    """As PLAIN, scalar operands first broadcast to the result shape (``select``, ``clamp``)."""
    REGION = "region"
    """As PLAIN plus ``to_apply=`` its one region; several results become get-tuple-elements."""
    TUPLE_RESULT = "tuple_result"
    """An op with several results (a tuple shape; StableHLO gives each result its own value):
    HLO writes one tuple-shaped instruction whose elements become get-tuple-elements; tuple
    operands are passed as tuples."""
    CONSTANT = "constant"
    """``constant(literal)`` from the op's ``value`` attribute (a splat becomes a broadcast)."""
    WHILE = "while"
    """``while(carry), condition=, body=``."""
    CONDITIONAL = "conditional"
    """``conditional(...)`` with one computation per branch."""
    GRAPH = "graph"
    """A graph-level op (``tuple``, ``get_tuple_element``, ``call``) printed by the walker."""


class AttrKind(enum.Enum):
    """The kind of an op's declared attribute (:attr:`OpDef.attrs`): the typed value the op's wrapper
    stores, which the emitters print (:func:`xlasdk._mlir_attrs.render`) and the importer reads
    back (one reader per kind, :mod:`xlasdk.program.attr_kinds`), as StableHLO's ODS declares each
    attribute's type for its generated builder."""

    INT = "int"
    """``3 : i64``: an ``int``."""
    I32 = "i32"
    """``3 : i32``: an :class:`~xlasdk._mlir_attrs.I32`."""
    BOOL = "bool"
    """``true``: a ``bool``."""
    INTS = "ints"
    """``array<i64: 0, 1>`` (DenseI64ArrayAttr): a tuple of ``int``."""
    I64_ELEMENTS = "i64_elements"
    """``dense<[[0, 1]]> : tensor<1x2xi64>``: an :class:`~xlasdk._mlir_attrs.I64Elements` (padding)."""
    ELEMENTS = "elements"
    """A constant's ``dense<...>``: a :class:`~xlasdk._mlir_attrs.DenseElements` of the op's shape."""
    COMPARISON_DIRECTION = "comparison_direction"
    """``#stablehlo<comparison_direction LT>``: an :class:`~xlasdk.attrs.ComparisonDirection`."""
    COMPARISON_TYPE = "comparison_type"
    """``#stablehlo<comparison_type FLOAT>``: an :class:`~xlasdk.attrs.ComparisonType`."""
    DOT_DIMENSION_NUMBERS = "dot_dimension_numbers"
    """``#stablehlo.dot<...>``: a :class:`~xlasdk.attrs.DotDimensionNumbers`."""
    CONV_DIMENSION_NUMBERS = "conv_dimension_numbers"
    """``#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>``: a
    :class:`~xlasdk.attrs.ConvolutionDimensionNumbers`."""
    GATHER_DIMENSION_NUMBERS = "gather_dimension_numbers"
    """``#stablehlo.gather<...>``: a :class:`~xlasdk.attrs.GatherDimensionNumbers`."""
    SCATTER_DIMENSION_NUMBERS = "scatter_dimension_numbers"
    """``#stablehlo.scatter<...>``: a :class:`~xlasdk.attrs.ScatterDimensionNumbers`."""
    F32 = "f32"
    """``1.000000e-03 : f32``: an :class:`~xlasdk._mlir_attrs.F32`."""
    FFT_TYPE = "fft_type"
    """``#stablehlo<fft_type FFT>``: an :class:`~xlasdk.attrs.FftType`."""
    RNG_ALGORITHM = "rng_algorithm"
    """``#stablehlo<rng_algorithm THREE_FRY>``: a :class:`~xlasdk.attrs.RandomAlgorithm`."""
    RNG_DISTRIBUTION = "rng_distribution"
    """``#stablehlo<rng_distribution UNIFORM>``: a :class:`~xlasdk.attrs.RandomDistribution`."""
    TRANSPOSE = "transpose"
    """``#stablehlo<transpose NO_TRANSPOSE>``: a :class:`~xlasdk.attrs.TriangularSolveOptions_Transpose`."""
    REPLICA_GROUPS = "replica_groups"
    """A collective's ``replica_groups``: ``dense<[[0, 1]]> : tensor<1x2xi64>`` as an
    :class:`~xlasdk._mlir_attrs.I64Elements`; the mesh-axes form
    (``#stablehlo.replica_group_mesh_axes<...>``), which no wrapper builds, stays as spelled."""
    UNIT = "unit"
    """A unit attribute (present or absent): :data:`~xlasdk._mlir_attrs.UNIT`."""
    CHANNEL_HANDLE = "channel_handle"
    """``#stablehlo.channel_handle<handle = 1, type = 1>``: a collective's
    :class:`~xlasdk.ops.collectives.ChannelHandle`."""
    PRECISION_CONFIG = "precision_config"
    """``[#stablehlo<precision DEFAULT>, ...]``: a :class:`~xlasdk.attrs.PrecisionConfig`."""


@dataclass(frozen=True, eq=False)
class OpDef:
    """One row of the op table.

    Attributes
    ----------
    name: the StableHLO or CHLO op name (``stablehlo.add``), or a graph-level pseudo-op
        (``parameter``, ``tuple``, ``get_tuple_element``, ``call``).
    hlo: the HLO opcode the direct printer writes (``add``); '' when it does not print it.
    hlo_form: how the direct printer writes it (:class:`HloForm`).
    hlo_attrs: ``(op) -> ", dimensions={0}"``: the HLO attribute text from the op's typed
        attributes (raise :class:`HloUnsupported` for values HLO text cannot hold); None: none.
    side_effect: kept in a built computation even when its root does not use it.
    constant: its value is a function of its operands alone (``XlaBuilder.is_constant``).
    variadic: tuple-shaped operands are passed element by element (``stablehlo.while``).
    tuple_result: the op yields one tuple-typed value rather than several results.
    plain_emit: derived: one StableHLO op line of its operands (not variadic, not a graph op),
        what :mod:`xlasdk._emit`'s fast path needs to know.
    rule: the op's shape rule (see the module docstring), None when ``no_rule`` says why.
    no_rule: why the row has no shape rule: one of :data:`NO_RULE` ('' when it has one).
    host_callback: ``(op) -> callable or None``: the Python callable a node of this row calls
        on the host while the program runs (``ops.HostCallback``). The emitter numbers such
        nodes in the module's host-callback list (``backend_config = {index = N : ui64}``) and
        runs those built in a sub-computation with it even when no result uses them.
    evaluate: (property) the op's reference evaluation rule, ``rule(node, operands, ev) ->
        value`` (see the module docstring), None until :mod:`xlasdk.reference` binds it, or when
        the evaluator refuses the op (then ``no_evaluate`` says why), or for a row outside the
        table (an opaque op of a loaded module).
    no_evaluate: (property) why the reference evaluator refuses the op ('' when it does not).
    attrs: the op's declared attributes and their kinds (:class:`AttrKind`), as ``(name, kind)``
        pairs: the importer reads each into the typed value the wrapper stores; an attribute not
        declared (or an op outside the table) is kept as the module spelled it.
    """

    name: str
    hlo: str = ""
    hlo_form: HloForm = HloForm.NONE
    hlo_attrs: Callable[[XlaOp], str] | None = None
    side_effect: bool = False
    constant: bool = True
    variadic: bool = False
    tuple_result: bool = False
    plain_emit: bool = True
    rule: Callable[..., Any] | None = None
    no_rule: str = ""
    host_callback: Callable[[XlaOp], Any] | None = None
    attrs: tuple[tuple[str, AttrKind], ...] = ()

    def attr_kind(self, name: str) -> AttrKind | None:
        """The declared kind of attribute ``name`` (None: not declared)."""
        return next((k for n, k in self.attrs if n == name), None)

    def __repr__(self) -> str:
        return f"OpDef({self.name})"

    @property
    def evaluate(self) -> Callable[..., Any] | None:
        return _EVALUATE.get(self)

    @property
    def no_evaluate(self) -> str:
        return _NO_EVALUATE.get(self, "")

    @property
    def table_row(self) -> OpDef | None:
        """The table's row this op reads as: the row itself, or for an opaque row of a loaded module
        (one the importer made because the table's row of its name did not fit this use, or an op
        the table does not define) the table's row of its name or of its :data:`ROW_ALIASES` alias;
        None: none."""
        if OPS.get(self.name) is self:
            return self
        return OPS.get(ROW_ALIASES.get(self.name, self.name))

    @property
    def props(self) -> OpProps:
        """What the tools know of the op (:class:`OpProps`, declared with :func:`declare`): those
        :data:`OPAQUE_PROPS` gives its name, else its :attr:`table_row`'s, else none."""
        opaque = OPAQUE_PROPS.get(self.name)
        if opaque is not None:
            return opaque
        row = self.table_row
        found = _PROPS.get(row) if row is not None else None
        return found if found is not None else _NO_PROPS

    def same_op(self, row: OpDef) -> bool:
        """Whether this is the op of table row ``row``: ``row`` itself, or an opaque row of a loaded
        module that reads as it (:attr:`table_row`; the importer keeps a ``stablehlo.while`` of
        tuple operands as such a row)."""
        return self is row or self.table_row is row


@dataclass(frozen=True)
class OpProps:
    """What the tools (the reference evaluator's error bounds, bisect, the reducer, input
    generation) know of an op beyond its shape and evaluation rules: each a flag, False unless the
    op's row declares it (:func:`declare`, in :mod:`xlasdk.ops._props`); read as
    ``node.opdef.props.moves_data``. ``tests/test_op_props.py`` pins each field's set of ops."""

    moves_data: bool = False
    """The op only moves, copies, converts or negates its operand's elements (reshape, transpose,
    slice, convert, negate...): the error bounds look through it to the op that made the values
    (an output's term scale, whether a value is a dot's), carry bounds by running its rule on them,
    and take it as exact (it adds no rounding of its own beyond a convert's)."""
    linear: bool = False
    """Besides the ops that move data, the op's elements are its operands' elements picked or placed
    (pad, gather, select, real/imag/complex, dynamic_update_slice): an error bound is carried by
    running the op's rule on the operands' bounds."""
    additive: bool = False
    """The op's outputs are sums of terms (add, subtract, a reduce, a dot, a convolution, an FFT): the
    scale of its rounding error is that of its largest term, not of its result."""
    sums: bool = False
    """A reduction whose region is the op applied (reduce, reduce_window): an ``add`` region's error
    is the root sum of squares of its terms', a ``max``/``min`` region carries the bounds as they are."""
    bilinear: bool = False
    """A product of its two operands summed over a contraction (dot_general, convolution): the error
    bounds and the dot precision model treat it as a dot."""
    matches_reference: bool = False
    """Besides the ops that move data, XLA computes the op correctly rounded (IEEE) or exactly: on the
    reference's operands it gives the reference's value, and the error bounds add no rounding of
    its own (unless the device kind's error model gives it ulps)."""
    bit_exact: bool = False
    """The precision model's "exact" row on every device kind: data movement, integer and bitwise
    ops, comparisons, selects, the ops that round on purpose (``reduce_precision``, ``convert``)."""
    correctly_rounded: bool = False
    """The precision model's "rounded" row on every device kind: IEEE arithmetic, correctly rounded
    (add, subtract, multiply, square, remainder)."""
    inexact_complex: bool = False
    """Of the ops that match the reference, one that rounds on complex numbers (a product's
    ``a*c - b*d``, a modulus's hypot): not exact on complex operands."""
    control_flow: bool = False
    """An op with regions whose error bounds follow the ops of the regions it ran (while, if, case)."""
    calls_function: bool = False
    """The op runs a function of the module (``func.call``, a loaded XLA fusion; a composite's
    decomposition): bounds and term scales follow the called function's ops."""
    logical: bool = False
    """A boolean op (and, or, xor, not): on predicates that may come out the other way on the
    device, its result may too."""
    passes_operands: tuple[int, ...] | None = ()
    """The operand positions whose values reach the result unchanged (convert, reshape, a select's
    branches...; None: every operand, as a concatenate's): the range ``--random-inputs`` must keep
    for the result (an index, a positive value) is followed back through them to the parameters."""
    positive_operands: tuple[int, ...] = ()
    """The operand positions ``--random-inputs`` keeps > 0 (a log's, a sqrt's operand, a divisor)."""


_NO_PROPS = OpProps()

#: Ops the table has no row for that the tools read as a row's op (:attr:`OpDef.table_row`): a
#: loaded module may hold them (XLA's ``mhlo.copy`` and ``stablehlo.copy`` in converted HLO, the
#: legacy ``stablehlo.dot``), and the importer keeps them as opaque rows.
ROW_ALIASES: dict[str, str] = {
    "stablehlo.dot": "stablehlo.dot_general",
    "mhlo.copy": "stablehlo.reshape",
    "stablehlo.copy": "stablehlo.reshape",
}

#: The props of ops the table has no row for, by name (the ``func.call`` of an XLA fusion or of a
#: private function, a ``stablehlo.composite``; ``mhlo.copy``, whose props are these rather than its
#: alias's: the input ranges do not follow it): with :data:`ROW_ALIASES`, the only place outside
#: the rows where the tools' op properties are named.
OPAQUE_PROPS: dict[str, OpProps] = {
    "mhlo.copy": OpProps(moves_data=True),
    "func.call": OpProps(calls_function=True),
    "stablehlo.composite": OpProps(calls_function=True),
}


#: Every row, by name.
OPS: dict[str, OpDef] = {}

# The evaluation rules bound to the rows (:attr:`OpDef.evaluate`, :attr:`OpDef.no_evaluate`), by row
# object. A side table rather than fields of the row: a row is frozen when its family defines it,
# and its evaluation rule comes later, from a layer above (:mod:`xlasdk.reference` imports the op
# families, never the reverse), so the binding is a relation the table keeps, written once per row
# by :func:`bind_evaluation` / :func:`refuse_evaluation` (the only writers) and read through the
# row's properties. Rows hash by identity (``eq=False``): an opaque row of a loaded module that
# shares a row's name is another key.
_EVALUATE: dict[OpDef, Callable[..., Any]] = {}
_NO_EVALUATE: dict[OpDef, str] = {}
# The props declared for the rows (:attr:`OpDef.props`), by row object: a side table for the same
# reason (the props are declared in one table beside the families, :mod:`xlasdk.ops._props`, after
# the rows are frozen), written only by :func:`declare`.
_PROPS: dict[OpDef, OpProps] = {}

#: ``no_rule`` reason: the graph gives the op's shape (parameter, tuple, get_tuple_element, call, return).
GRAPH_SHAPE = (
    "the graph gives its shape: a parameter's declared shape, a tuple's elements, an element of its tuple "
    "operand, a called computation's result, a region's results"
)
#: ``no_rule`` reason: the emitters write the op themselves; no wrapper builds it.
EMITTER_ONLY = "written by the emitters themselves from values they already typed; no wrapper builds it"
#: Every reason a row may give for having no shape rule (``define(..., no_rule=...)``).
NO_RULE: frozenset[str] = frozenset({GRAPH_SHAPE, EMITTER_ONLY})

_NAME = re.compile(r"(?:stablehlo|chlo)\.[a-z][a-z0-9_]*|parameter|tuple|get_tuple_element|call")


_OPAQUE_ROWS: dict[tuple[str, bool], OpDef] = {}


def opaque_row(name: str, tuple_result: bool) -> OpDef:
    """The row of an op the table does not define (or whose row's flags do not fit this use: a
    ``stablehlo.get_tuple_element`` whose one result is a tuple), one per name and form: the
    importer's and the emitter's record's alike."""
    key = (name, tuple_result)
    d = _OPAQUE_ROWS.get(key)
    if d is None:
        d = _OPAQUE_ROWS[key] = OpDef(name, constant=False, tuple_result=tuple_result, plain_emit=not tuple_result)
    return d


def define(
    name: str,
    hlo: str = "",
    *,
    hlo_form: HloForm | None = None,
    hlo_attrs: Callable[[XlaOp], str] | None = None,
    side_effect: bool = False,
    constant: bool = True,
    variadic: bool = False,
    tuple_result: bool = False,
    rule: Callable[..., Any] | None = None,
    no_rule: str | None = None,
    host_callback: Callable[[XlaOp], Any] | None = None,
    attrs: dict[str, AttrKind] | None = None,
) -> OpDef:
    """Register and return the row of ``name``.

    ``hlo_form`` defaults to PLAIN when ``hlo`` is given and NONE otherwise. ``rule`` is the op's
    shape rule; a row without one gives ``no_rule``, one of :data:`NO_RULE` (see the module
    docstring). ``host_callback``: see :class:`OpDef`. ``attrs``: the op's attributes and their kinds
    (:attr:`OpDef.attrs`).

    Raises
    ------
    ValueError: ``name`` is not a StableHLO/CHLO op name, or it is defined already (at import
        of the family module that defines it twice), or the row gives neither a rule nor a
        reason of :data:`NO_RULE` (or both).
    """
    if not _NAME.fullmatch(name):
        raise ValueError(f"op table: {name!r} is not a StableHLO or CHLO op name")
    if name in OPS:
        raise ValueError(f"op table: {name!r} is defined twice")
    if (rule is None) == (no_rule is None) or (no_rule is not None and no_rule not in NO_RULE):
        raise ValueError(
            f"op table: {name!r} must give its shape rule (rule=) or, without one, a reason of NO_RULE (no_rule=)"
        )
    form = hlo_form if hlo_form is not None else (HloForm.PLAIN if hlo else HloForm.NONE)
    plain = not variadic and form is not HloForm.GRAPH
    d = OpDef(
        name, hlo, form, hlo_attrs, side_effect, constant, variadic, tuple_result, plain,
        rule=rule, no_rule=no_rule or "", host_callback=host_callback, attrs=tuple((attrs or {}).items()),
    )
    OPS[name] = d
    return d


def _check_binding(row: OpDef, what: str) -> None:
    if not isinstance(row, OpDef) or OPS.get(row.name) is not row:
        raise ValueError(f"op table: {what} binds to a row of the table (OPS), not to {row!r}")
    if row in _EVALUATE or row in _NO_EVALUATE:
        how = "an evaluation rule" if row in _EVALUATE else "a refusal"
        raise ValueError(f"op table: {row.name!r} already has {how}: a row's evaluation is bound once")


def bind_evaluation(row: OpDef, rule: Callable[..., Any]) -> None:
    """Bind ``rule`` as ``row``'s reference evaluation rule (:attr:`OpDef.evaluate`).

    Raises
    ------
    ValueError: ``row`` is not a row of :data:`OPS`, or it has a rule or a refusal already.
    """
    _check_binding(row, "an evaluation rule")
    _EVALUATE[row] = rule


def refuse_evaluation(row: OpDef, reason: str) -> None:
    """Record why the reference evaluator refuses ``row``'s op (:attr:`OpDef.no_evaluate`): the
    reason completes "it ..." in the evaluator's error (``"reads the device's infeed queue, ..."``).

    Raises
    ------
    ValueError: ``row`` is not a row of :data:`OPS`, or it has a rule or a refusal already, or
        ``reason`` is empty.
    """
    if not reason:
        raise ValueError(f"op table: refusing {row.name!r} needs a reason")
    _check_binding(row, "a refusal")
    _NO_EVALUATE[row] = reason


def declare(*rows: OpDef, **flags: Any) -> None:
    """Set the :class:`OpProps` fields ``flags`` on ``rows`` (:attr:`OpDef.props`): a flag True, an
    operand-position field a tuple of ints (or None where the field allows it); a row's props may
    come from several calls.

    Raises
    ------
    ValueError: a row is not a row of :data:`OPS`, or a flag is not a field of :class:`OpProps`,
        or its value is not one the field takes (or is the field's default).
    """
    for name, value in flags.items():
        default = getattr(_NO_PROPS, name, ...)
        ok = value is True if isinstance(default, bool) else (
            (value is None and name == "passes_operands")
            or (isinstance(value, tuple) and all(isinstance(k, int) and k >= 0 for k in value)))
        if default is ... or not ok or value == default:
            raise ValueError(f"op table: declare takes OpProps fields (flags set to True, operand positions), "
                             f"not {name}={value!r}")
    for row in rows:
        if not isinstance(row, OpDef) or OPS.get(row.name) is not row:
            raise ValueError(f"op table: props are declared on rows of the table (OPS), not on {row!r}")
        _PROPS[row] = replace(_PROPS.get(row, _NO_PROPS), **flags)


_F = TypeVar("_F", bound=Callable[..., Any])


def evaluates(*rows: OpDef) -> Callable[[_F], _F]:
    """Decorator: the function is the evaluation rule of ``rows`` (:func:`bind_evaluation`)."""

    def deco(fn: _F) -> _F:
        for row in rows:
            bind_evaluation(row, fn)
        return fn

    return deco


# -- the graph's own rows and the ops the emitters write themselves ------------------------------
PARAMETER = define("parameter", constant=False, hlo_form=HloForm.GRAPH, no_rule=GRAPH_SHAPE)
TUPLE = define("tuple", hlo_form=HloForm.GRAPH, no_rule=GRAPH_SHAPE)
GET_TUPLE_ELEMENT = define("get_tuple_element", hlo_form=HloForm.GRAPH, no_rule=GRAPH_SHAPE)
CALL = define("call", hlo_form=HloForm.GRAPH, no_rule=GRAPH_SHAPE)
STABLEHLO_TUPLE = define("stablehlo.tuple", tuple_result=True, no_rule=EMITTER_ONLY)
STABLEHLO_GET_TUPLE_ELEMENT = define("stablehlo.get_tuple_element", no_rule=EMITTER_ONLY)
RETURN = define("stablehlo.return", no_rule=GRAPH_SHAPE)


# -- HLO spelling shared by the families' hlo_attrs -------------------------------------------------
def braces(values: tuple[int, ...] | list[int]) -> str:
    """``{1,2}``."""
    return "{" + ",".join(str(v) for v in values) + "}"


def hlo_window(
    sizes: tuple[int, ...],
    strides: tuple[int, ...],
    pads: list[tuple[int, int]],
    lhs: tuple[int, ...],
    rhs: tuple[int, ...],
) -> str:
    """XLA's ``window={size=.. stride=.. pad=.. lhs_dilate=.. rhs_dilate=..}`` (defaults left out)."""
    if not sizes:
        raise HloUnsupported("empty window")
    parts = ["size=" + "x".join(map(str, sizes))]
    if any(s != 1 for s in strides):
        parts.append("stride=" + "x".join(map(str, strides)))
    if any(p != (0, 0) for p in pads):
        parts.append("pad=" + "x".join(f"{a}_{b}" for a, b in pads))
    if any(d != 1 for d in lhs):
        parts.append("lhs_dilate=" + "x".join(map(str, lhs)))
    if any(d != 1 for d in rhs):
        parts.append("rhs_dilate=" + "x".join(map(str, rhs)))
    return "window={" + " ".join(parts) + "}"


# -- the ledger: StableHLO/CHLO ops jaxlib registers that the table does not define ------------------
_BROADCASTING = (
    "CHLO's implicitly broadcasting form: xlasdk's element-wise ops broadcast explicitly (the op without broadcast_)"
)
_UNBOUNDED = (
    "unbounded dynamic shapes: XLA:CPU compiles static and bounded shapes only (xlasdk's dynamic ops are bounded)"
)
_DEPRECATED = "deprecated StableHLO op, outside XLA's operation semantics"
_NEXT = "next: a real XLA op xlasdk does not build yet (a loaded module keeps it as an opaque instruction)"

#: Why each StableHLO/CHLO op that jaxlib's MLIR bindings define has no row here (checked against
#: the bindings of the running jaxlib by ``tests/test_optable.py``; a loaded module that uses one
#: keeps it whole as an opaque instruction).
NOT_DEFINED: dict[str, str] = {
    **{f"chlo.broadcast_{n}": _BROADCASTING for n in (
        "add", "and", "atan2", "compare", "complex", "divide", "maximum", "minimum", "multiply", "next_after", "or",
        "polygamma", "power", "remainder", "select", "shift_left", "shift_right_arithmetic",
        "shift_right_logical", "subtract", "xor", "zeta",
    )},
    "chlo._asin_acos_kernel": "an internal step of CHLO's own asin/acos expansion",
    "chlo.constant": "stablehlo.constant (ops.Constant) covers it",
    "chlo.constant_like": "stablehlo.constant of the operand's shape (ops.Constant, ops.Broadcast)",
    "chlo.is_inf": _NEXT + "; today ops.IsFinite and a compare",
    "chlo.is_neg_inf": _NEXT + "; today a compare with -inf",
    "chlo.is_pos_inf": _NEXT + "; today a compare with +inf",
    "chlo.mulhi": _NEXT,
    "chlo.ragged_dot": _NEXT + " (XLA's RaggedDot)",
    "chlo.scan": _NEXT,
    "chlo.tan": "ops.Tan emits stablehlo.tan",
    "stablehlo.async_start": "XLA's asynchronous wrapper, made by XLA's scheduler rather than by programs",
    "stablehlo.async_done": "XLA's asynchronous wrapper, made by XLA's scheduler rather than by programs",
    "stablehlo.broadcast": "ops.Broadcast emits stablehlo.broadcast_in_dim",
    "stablehlo.collective_broadcast": _NEXT + " (XLA's CollectiveBroadcast)",
    "stablehlo.collective_reduce": _NEXT,
    "stablehlo.composite": _NEXT + " (a named op with its decomposition)",
    "stablehlo.cross-replica-sum": _DEPRECATED + " (ops.AllReduce / ops.CrossReplicaSum emit all_reduce)",
    "stablehlo.dot": "ops.Dot emits stablehlo.dot_general",
    "stablehlo.dynamic_broadcast_in_dim": _UNBOUNDED,
    "stablehlo.dynamic_conv": _UNBOUNDED,
    "stablehlo.dynamic_gather": _UNBOUNDED,
    "stablehlo.dynamic_iota": _UNBOUNDED,
    "stablehlo.dynamic_pad": _UNBOUNDED,
    "stablehlo.dynamic_reshape": _UNBOUNDED,
    "stablehlo.real_dynamic_slice": _UNBOUNDED,
    "stablehlo.einsum": _DEPRECATED,
    "stablehlo.unary_einsum": _DEPRECATED,
    "stablehlo.torch_index_select": _DEPRECATED,
    "stablehlo.send": "host transfers: ops.Send / ops.Recv are refused (no host-side channel on XLA:CPU)",
    "stablehlo.recv": "host transfers: ops.Send / ops.Recv are refused (no host-side channel on XLA:CPU)",
    "stablehlo.select_and_scatter": "ops.SelectAndScatter is built from other ops (see ops/window.py)",
    "stablehlo.uniform_quantize": "quantized element types, which xlasdk's Shape does not have",
    "stablehlo.uniform_dequantize": "quantized element types, which xlasdk's Shape does not have",
}
