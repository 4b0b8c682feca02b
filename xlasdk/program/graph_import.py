"""A loaded module as the typed graph an :class:`~xlasdk.XlaBuilder` makes; walking and editing it.

:func:`import_graph` reads ``func.func @main`` of a loaded computation's verified MLIR module
through the MLIR bindings (:mod:`xlasdk._jaxlib.mlir_graph`: no text parsing) and builds one
:class:`~xlasdk.XlaOp` per op, each with the op table row of its StableHLO/CHLO name
(:data:`xlasdk._optable.OPS`) and its result :class:`~xlasdk.Shape`. An op the table does not
define (``func.call``, ``sdy.*``, ``mhlo.*`` of optimized dumps, a custom dialect's op) becomes
an *opaque* node with a row of its own (:attr:`Instruction.is_opaque`): it keeps its op whole.
Every node keeps its attributes exactly as the module spelled them (:class:`MlirAttr`) and reads
them as the typed values a built node holds (:meth:`XlaOp.attr <xlasdk.builder.XlaOp.attr>`: each
one its op's row declares read by its kind on first access, :mod:`xlasdk.program.attr_kinds`), its
location (so its metadata), its regions (nested :class:`~xlasdk.Region` graphs), and the
module keeps its other functions, meshes and attributes: emitting the graph again gives the
same program.

:class:`Instruction` is the view users walk (``comp.instructions()``); ``comp.with_outputs``
and ``comp.extract`` (:func:`xlasdk.program.graph_edit.with_outputs`, ``extract``) make new computations from the
graph, which print, save, compile and run like any other.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .._jaxlib import mlir_graph as _mg
from .._metadata import Location
from .._mlir_attrs import UNIT, mlir_unescape, render, symbol_name
from .._optable import GET_TUPLE_ELEMENT, OPS, PARAMETER, TUPLE, HloForm, opaque_row
from ..attrs import OpMetadata
from ..builder import Graph, ModuleContext, Region, XlaBuilder, XlaOp
from ..errors import GraphImportError, XlaSdkError
from ..shape import Shape
from .attr_kinds import MlirAttr
from .program_shape import _shape_from_type
from .walk import unread

__all__ = ["MlirAttr", "Instruction", "InstructionGraph", "Partitioning", "HloNames", "import_graph",
           "partitioning", "hlo_opcode_of"]


_LOC_NAME = re.compile(r'^loc\("((?:[^"\\]|\\.)*)"(?=[()])')
_LOC_FILE = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')


def _location(text: str) -> Location:
    """A node's location: the module's text, and the ``op_name`` / ``source_file`` /
    ``source_line`` / ``source_column`` XLA's converter would read from it."""
    fields: dict[str, Any] = {}
    m = _LOC_NAME.match(text)
    if m:
        fields["op_name"] = mlir_unescape(m.group(1))
    f = _LOC_FILE.search(text)
    if f:
        fields["source_file"] = f.group(1)
        fields["source_line"] = int(f.group(2))
        fields["source_column"] = int(f.group(3))
    return Location(text, fields, str(fields.get("op_name", "")))


def _shape(t: Any, where: str) -> Shape:
    try:
        return _shape_from_type(t)
    except ValueError as e:
        raise GraphImportError(f"{where}: {e}") from None


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Python's cycle collector off while a graph of many nodes is built (each collection would
    scan every node made so far: two thirds of a 100,000-instruction import), back on after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class Instruction:
    """One instruction of a computation: a view of its graph node (:attr:`op`).

    Attributes
    ----------
    name: unique in the computation. A parameter's name (the program shape's: ``x``,
        ``params['w']``, ``Arg_0.1``). Any other instruction of a module loaded from HLO (text,
        proto, snapshot, XLA's dumps before and after optimizations): the HLO instruction's name,
        as the dump prints it without its ``%`` (``dot.3``, ``fusion.2``); elsewhere
        ``<opcode>.<position>`` (``add.7``: the 7th instruction, parameters counted). An op that
        XLA's importer made beside another of the same HLO instruction (the elements of a
        tuple-shaped ``custom-call``) keeps the ``<opcode>.<position>`` form.
        :meth:`XlaComputation.instruction` also finds the instructions of a module loaded from
        HLO by a parameter's HLO name (``params__w__.1``) and by the ``<opcode>.<position>``
        names, where no instruction has that name.
    opcode: the op's name in the module: the StableHLO/CHLO op name (``stablehlo.add``), another
        dialect's op name for opaque instructions (``func.call``, ``mhlo.copy``), and
        ``parameter`` for parameters (arguments of ``main``: no op of their own). The module's
        spelling, for walking the module and matching ops with the op table.
    hlo_opcode: XLA's HLO opcode, as HLO text spells it (``add``, ``dot``, ``broadcast``,
        ``parameter``, ``get-tuple-element``, ``custom-call``, ``call``): what an XLA user finds in
        a dump. For a module loaded from HLO, the opcode of the HLO instruction the op came from
        (``fusion`` for a fusion the import made a ``func.call``, ``bitcast`` for a bitcast it
        made a ``stablehlo.reshape``); otherwise the opcode XLA writes for the op
        (``stablehlo.dot_general``: ``dot``, ``stablehlo.if``: ``conditional``), or for ops XLA
        writes as several instructions (most ``chlo.*`` ops) the op's name without its dialect,
        ``_`` spelled ``-`` (``chlo.acosh``: ``acosh``).
    shape: the result :class:`~xlasdk.Shape` (a tuple shape when the op has several results).
    op: the :class:`~xlasdk.XlaOp` node (an operand for builder ops).
    index: position in :meth:`XlaComputation.instructions` (topological order).
    """

    __slots__ = ("name", "op", "index", "_graph")

    def __init__(self, name: str, op: XlaOp, index: int, graph: InstructionGraph) -> None:
        self.name = name
        self.op = op
        self.index = index
        self._graph = graph

    @property
    def opcode(self) -> str:
        return self.op.opcode

    @property
    def hlo_opcode(self) -> str:
        got = self._graph.hlo_opcodes.get(self.index)
        return got if got is not None else hlo_opcode_of(self.op.opcode)

    @property
    def shape(self) -> Shape:
        return self.op.shape

    @property
    def is_opaque(self) -> bool:
        """True when the op table does not define this op: it is kept whole (printed, saved,
        compiled as loaded), and tools that need its semantics name it in their errors."""
        return self.op.opdef is not OPS.get(self.op.opcode)

    @property
    def operands(self) -> tuple[Instruction, ...]:
        """The instructions whose values this one reads, in operand order (an operand that is
        result ``k`` of a multi-result op is that op's instruction; see :attr:`operand_indices`)."""
        return tuple(self._graph.instruction_of(x) for x in self.op.operands)

    @property
    def operand_indices(self) -> tuple[int | None, ...]:
        """For each operand, which result of its instruction it reads (None: the only result)."""
        return tuple(x.extra if x.opdef is GET_TUPLE_ELEMENT and x not in self._graph.names else None
                     for x in self.op.operands)

    @property
    def users(self) -> tuple[Instruction, ...]:
        """The instructions that read this one's value(s), in order."""
        return self._graph.users_of(self)

    @property
    def attributes(self) -> dict[str, Any]:
        """The op's attributes as Python values, read through the MLIR bindings: ``int``,
        ``float``, ``bool``, ``str``, tuples (``array<i64: ...>``), numpy arrays
        (``dense<...>``), lists and dicts of those; StableHLO's structured attributes as dicts of
        their fields (``dot_dimension_numbers``: ``{"lhs_contracting_dimensions": (1,), ...}``) and
        its enums by name (``comparison_direction``: ``"LT"``); other dialects' attributes as their
        MLIR spelling. ``ins.op.attr(name)`` reads one as the typed value a built op holds
        (:class:`~xlasdk.attrs.DotDimensionNumbers`, :class:`~xlasdk.attrs.ComparisonDirection`...).

        A rank-1/2 HLO ``dot`` with the default dimensions imports as ``stablehlo.dot``, which has no
        ``dot_dimension_numbers``: it contracts the lhs's last dimension with the rhs's first (a
        ``precision_config`` when the HLO had one); ``ops.Dot`` builds ``stablehlo.dot_general``."""
        return {k: (v.value if isinstance(v, MlirAttr) else _mg.attribute_value(_mg.attribute_text(_spelling(v))))
                for k, v in self.op.attrs.items()}

    @property
    def attribute_text(self) -> dict[str, str]:
        """The op's attributes as the module spells them: a dict from each attribute's name to its
        MLIR text (``{"comparison_direction": "#stablehlo<comparison_direction LT>"}``), where
        :attr:`attributes` gives Python values."""
        return {k: (v.text if isinstance(v, MlirAttr) else _mg.attribute_text(_spelling(v)))
                for k, v in self.op.attrs.items()}

    @property
    def metadata(self) -> OpMetadata:
        """``op_name``, ``source_file``, ``source_line``, ``source_column`` read from the op's location
        (empty for parameters and ops without one)."""
        f = self.op.loc.fields
        return OpMetadata(
            op_name=str(f.get("op_name", "")),
            source_file=str(f.get("source_file", "")),
            source_line=int(f.get("source_line", 0)),
            source_column=int(f.get("source_column", 0)),
        )

    @property
    def location(self) -> str:
        """The op's MLIR location, as the module spelled it."""
        return self.op.loc.text

    def result(self, k: int) -> XlaOp:
        """The node of result ``k`` of a multi-result instruction (``while``, variadic ``reduce``,
        ``sort``...): an operand for builder ops, an output for :meth:`XlaComputation.with_outputs`.

        Raises
        ------
        XlaSdkError
            ``k`` out of range, or the instruction has one result (use :attr:`op`).
        """
        parts = self._graph.parts.get(self.op.id)
        if parts is None:
            raise XlaSdkError(f"instruction {self.name!r} ({self.opcode}) has one result: use .op")
        if not isinstance(k, int) or not 0 <= k < len(parts):
            raise XlaSdkError(f"instruction {self.name!r} has {len(parts)} results; result {k!r} does not exist")
        return parts[k]

    def called_function(self) -> InstructionGraph:
        """The function a ``func.call`` instruction calls (a fusion of an optimized dump, a JAX
        private function such as ``_where``), or a ``stablehlo.composite``'s decomposition, as the
        same instruction index as the program's: its ``instructions()`` in topological order (named
        ``<opcode>.<index>`` and by their parameters), each with its operands, attributes and
        location, and its own calls walkable the same way. Imported once per function.

        Raises
        ------
        XlaSdkError
            The instruction calls no function, or the module has no function of that name.
        """
        name = callee_of(self.op)
        if name is None:
            raise XlaSdkError(f"instruction {self.name!r} ({self.opcode}) calls no function: only func.call and "
                              "stablehlo.composite instructions do")
        return self._graph.callee(name)

    def __repr__(self) -> str:
        return f"Instruction({self.name}: {self.opcode} -> {self.shape})"


def callee_of(op: XlaOp) -> str | None:
    """The name of the function ``op`` calls: a ``func.call``'s callee (an HLO ``call``'s
    ``to_apply``, a fusion of an optimized dump), a ``stablehlo.composite``'s decomposition; None
    for any other op."""
    attr = {"func.call": "callee", "stablehlo.composite": "decomposition"}.get(op.opcode)
    if attr is None or attr not in op.attrs:
        return None
    ref = op.attrs[attr]
    return symbol_name(ref.value if isinstance(ref, MlirAttr) else ref)


def _spelling(value: Any) -> str:
    """The MLIR spelling of a typed attribute value (a built node's), as the emitter writes it."""
    return "unit" if value is UNIT else render(value)


class InstructionList(tuple[Instruction, ...]):
    """The instructions of a graph, in topological order: a tuple that can also be called, so that
    a called function's ``fn.instructions()`` (a list) is spelled as ``comp.instructions()``."""

    __slots__ = ()

    def __call__(self) -> list[Instruction]:
        return list(self)


@dataclass
class InstructionGraph:
    """The graph of a loaded computation: ``params`` (Parameter nodes), ``outputs`` (the nodes
    ``main`` returns, in order), ``effects`` (nodes kept though no output uses them), every
    instruction in order, and what the module holds around ``main`` (``module_body``: empty in
    the graph of a called function, which is read, never emitted as a module)."""

    name: str
    params: tuple[XlaOp, ...]
    outputs: tuple[XlaOp, ...]
    effects: tuple[XlaOp, ...]
    instructions: InstructionList  # call it as comp.instructions(): fn.instructions() is a list too
    names: dict[XlaOp, Instruction]
    module_attrs: tuple[tuple[str, str], ...]
    module_body: tuple[str, ...]
    result_attrs: tuple[dict[str, Any], ...]
    parts: dict[int, tuple[XlaOp, ...]]  # op id of a multi-result op -> a node per result
    meshes: tuple[tuple[str, str], ...] = ()  # Shardy meshes of the module: (name, #sdy.mesh<...>)
    _users: dict[int, list[Instruction]] | None = None
    # other names that find an instruction (a module imported from HLO: the <opcode>.<index> names)
    aliases: dict[str, Instruction] = field(default_factory=dict)
    hlo_opcodes: dict[int, str] = field(default_factory=dict)  # index -> the HLO instruction's opcode
    module: Any = field(default=None, repr=False)  # the verified module it was read from (for its calls)
    _callees: dict[str, InstructionGraph] = field(default_factory=dict, repr=False)
    # a built program (its emitter's record, see origin.index_of_record): the ids of its builder's nodes
    # that the module writes otherwise -> the nodes of the values they were written as
    built: dict[int, XlaOp] = field(default_factory=dict, repr=False)

    def node_of(self, op: XlaOp) -> XlaOp:
        """This graph's node for ``op``: ``op`` itself (an instruction's node, or a result of a
        multi-result one), or for a built program the node of the value its builder's node ``op``
        was written as (a tuple's element for a ``get_tuple_element`` of a tuple).

        Raises
        ------
        XlaSdkError
            ``op`` is not an instruction of the computation (a region's node, a tuple, another
            computation's node).
        """
        if op in self.names:
            return op
        if op.opdef is GET_TUPLE_ELEMENT and op.operands[0] in self.names:
            return op
        mapped = self.built.get(op.id)
        if mapped is not None:
            return mapped
        if op.opdef is GET_TUPLE_ELEMENT and self.built:
            src = op.operands[0]
            if src.opdef is TUPLE and 0 <= op.extra < len(src.operands):
                return self.node_of(src.operands[int(op.extra)])
            whole = self.built.get(src.id)
            parts = None if whole is None else self.parts.get(whole.id)
            if parts is not None and 0 <= op.extra < len(parts):
                return parts[int(op.extra)]
        what = "a tuple, whose elements are instructions" if op.opdef is TUPLE else "not an instruction"
        raise XlaSdkError(f"the node {op!r} is {what} of computation {self.name!r}")

    def callee(self, function: str) -> InstructionGraph:
        """The graph of the module's function ``function`` (see :meth:`Instruction.called_function`)."""
        got = self._callees.get(function)
        if got is None:
            if self.module is None:
                raise XlaSdkError(f"computation {self.name!r}: its module is not known, so its functions are not")
            try:
                got = import_graph(self.module, function, function)
            except GraphImportError as e:
                raise XlaSdkError(f"computation {self.name!r}: function {function!r}: {e}") from None
            self._callees[function] = got
        return got

    def as_graph(self) -> Graph:
        """The typed graph of ``main``: its parameters, one root (a tuple node when ``main``
        returns several values), its side effects and the module around it."""
        context = ModuleContext(self.module_attrs, self.module_body, self.result_attrs or None)
        return self.graph_of(self.name, self.params, self.outputs, self.effects, context)

    @staticmethod
    def graph_of(
        name: str, params: Sequence[XlaOp], outputs: Sequence[XlaOp], effects: Sequence[XlaOp], context: ModuleContext
    ) -> Graph:
        """A :class:`~xlasdk.Graph` of imported nodes: one root, a tuple node for several outputs."""
        if len(outputs) == 1:
            root = outputs[0]
        else:
            b = params[0].builder if params else outputs[0].builder
            loc = outputs[0].loc if outputs else Location("loc(unknown)", {}, "")
            root = XlaOp(b, TUPLE, tuple(outputs), Shape.tuple_shape([o.shape for o in outputs]), {}, (), loc, None)
        return Graph(name, tuple(params), root, tuple(effects), context)

    def instruction_of(self, op: XlaOp) -> Instruction:
        got = self.names.get(op)
        if got is None and op.opdef is GET_TUPLE_ELEMENT:
            got = self.names.get(op.operands[0])
        if got is None and self.built:  # a built program's node, in the import of its module
            node = self.node_of(op)
            got = self.names.get(node)
            if got is None and node.opdef is GET_TUPLE_ELEMENT:
                got = self.names.get(node.operands[0])
        if got is None:
            raise XlaSdkError(f"the node {op!r} is not an instruction of computation {self.name!r}")
        return got

    def users_of(self, instr: Instruction) -> tuple[Instruction, ...]:
        if self._users is None:
            users: dict[int, list[Instruction]] = {}
            for ins in self.instructions:
                seen: set[int] = set()
                for x in ins.op.operands:
                    src = self.instruction_of(x)
                    if src.index not in seen:
                        seen.add(src.index)
                        users.setdefault(src.index, []).append(ins)
            self._users = users
        return tuple(self._users.get(instr.index, ()))


class _Importer:
    def __init__(self, name: str) -> None:
        self.values: dict[int, XlaOp] = {}  # MLIR value number -> node
        self.parts: dict[int, tuple[XlaOp, ...]] = {}
        self.order: list[tuple[XlaOp, str]] = []  # main's nodes, with their kind for names
        self.name = name
        self.shapes: dict[str, Shape] = {}  # a type's MLIR text -> its Shape (Shapes are immutable)

    def shape(self, t: Any, text: str, where: str) -> Shape:
        """The Shape of a type (``text`` its MLIR spelling): made once per distinct type."""
        shape = self.shapes.get(text)
        if shape is None:
            shape = self.shapes[text] = _shape(t, where)
        return shape

    def node(self, b: XlaBuilder, rec: _mg.OpRecord, where: str) -> XlaOp:
        operands = tuple(self.values[k] for k in rec.operands)
        shapes = [self.shape(t, text, f"{where}: {rec.name} result") for _, t, text in rec.results]
        single = len(shapes) == 1
        shape = shapes[0] if single else Shape.tuple_shape(shapes)
        tuple_result = single and shape.is_tuple()
        row = OPS.get(rec.name)
        if row is None or row.tuple_result != tuple_result or row.hlo_form is HloForm.GRAPH or (
            row.variadic and any(x.shape.is_tuple() for x in operands)
        ):
            row = opaque_row(rec.name, tuple_result)
        # each region's captures: the outer values its ops read directly (dependencies of the op)
        regions = tuple(self.region(r, f"{where} > {rec.name}") for r in rec.regions)
        attrs = {n: MlirAttr(t) for n, t in rec.attrs}
        op = b.add_imported(row, operands, shape, attrs, regions, _location(rec.loc))
        if single:
            self.values[rec.results[0][0]] = op
        else:
            parts = []
            for i, (k, _, _) in enumerate(rec.results):
                gte = XlaOp(b, GET_TUPLE_ELEMENT, (op,), shapes[i], {}, (), op.loc, i)
                self.values[k] = gte
                parts.append(gte)
            self.parts[op.id] = tuple(parts)
        return op

    def block(
        self, b: XlaBuilder, rec: _mg.RegionRecord, where: str, top: bool
    ) -> tuple[list[XlaOp], list[XlaOp], list[XlaOp]]:
        """``(params, results, effects)`` of a block built into ``b``."""
        params = []
        for i, (k, t, text, loc) in enumerate(rec.args):
            m = _LOC_NAME.match(loc)
            pname = mlir_unescape(m.group(1)) if (m and top and loc.endswith('")')) else ""
            shape = self.shape(t, text, f"{where}: argument {i}")
            p = b.add_imported(PARAMETER, (), shape, {}, (), Location(loc, {}, ""), (i, pname))
            self.values[k] = p
            params.append(p)
        nodes = []
        for orec in rec.ops:
            op = self.node(b, orec, where)
            nodes.append(op)
            if top:
                self.order.append((op, orec.name))
        results = [self.values[k] for k in rec.returns]
        effects = [op for op in unread(nodes, results) if op.opdef.name not in _PURE]
        return params, results, effects

    def region(self, rec: _mg.RegionRecord, where: str) -> Region:
        sub = XlaBuilder(f"{self.name}.region")
        params, results, effects = self.block(sub, rec, where, top=False)
        captures = tuple(self.values[k] for k in rec.captures)
        return Region(params, results, captures=captures, effects=effects, terminator=rec.terminator)


# Ops whose unused results may be dropped with them (everything else unused is kept as an effect).
_PURE = frozenset(
    n for n, d in OPS.items()
    if not d.side_effect and n not in ("stablehlo.custom_call", "stablehlo.outfeed", "stablehlo.send",
                                      "stablehlo.recv", "stablehlo.infeed", "stablehlo.optimization_barrier")
)


@dataclass(frozen=True)
class HloNames:
    """The HLO instruction name of each argument of ``main`` and of each op of its body (with the
    op's name, ``stablehlo.dot_general``, to pair it with), in order; ``""`` where the location
    names no instruction. ``opcodes``: the HLO opcode of each named instruction, as the module
    held it (``fusion`` for a fusion the import made a ``func.call``)."""

    args: tuple[str, ...]
    ops: tuple[tuple[str, str], ...]
    opcodes: dict[str, str]


def import_graph(
    module: Any, name: str, function: str = "main", *, hlo_names: HloNames | None = None
) -> InstructionGraph:
    """The :class:`InstructionGraph` of a parsed, verified module's ``main`` (or of the function
    named ``function``: what a ``func.call`` calls).

    ``hlo_names`` (:func:`xlasdk.formats.hlo_names.hlo_names`, for a module imported from HLO):
    the HLO instruction name of each argument and op, paired with them in order; instructions are
    named by them where the pairing is one to one (see :func:`_names`).

    Raises
    ------
    GraphImportError
        A region with several blocks, an unbounded dynamic dimension, a type XLA has no shape
        for, or ``main`` returning a tuple-typed value; the message names the op.
    """
    with _gc_paused():
        return _import_graph(module, name, function, hlo_names)


def _import_graph(module: Any, name: str, function: str, hlo_names: HloNames | None) -> InstructionGraph:
    try:
        rec = _mg.read_main(module, function)
    except _mg.GraphReadError as e:
        raise GraphImportError(f"computation {name!r}: {e}") from None
    imp = _Importer(name)
    b = XlaBuilder(name)
    params, results, effects = imp.block(b, rec.body, function, top=True)
    for p, attrs in zip(params, rec.arg_attrs, strict=True):  # shardings, layouts, donation, ...
        if attrs:
            p.attrs = {n: MlirAttr(t) for n, t in attrs}
    for t, _ in rec.result_types:
        if t[0] == "tuple":
            raise GraphImportError(f"computation {name!r}: main returns a tuple-typed value (the graph holds "
                                   "flat results)")
    names: dict[XlaOp, Instruction] = {}
    own, aliases, opcodes = _names(params, imp.order, hlo_names)
    instrs = [Instruction(n, op, i, None) for i, (n, op) in enumerate(own)]  # type: ignore[arg-type]
    graph = InstructionGraph(
        name, tuple(params), tuple(results), tuple(effects), InstructionList(instrs), names,
        tuple(rec.module_attrs), tuple(rec.others), tuple({n: MlirAttr(t) for n, t in a} for a in rec.res_attrs),
        imp.parts, tuple(rec.meshes), module=module,
    )
    for ins in instrs:
        ins._graph = graph
        names[ins.op] = ins
    graph.aliases = {a: instrs[i] for a, i in aliases.items()}
    graph.hlo_opcodes = opcodes
    return graph


# HLO opcodes of ops whose HLO spelling is not their name without the dialect, '_' spelled '-'
_HLO_OPCODES = {
    "parameter": "parameter", "call": "call", "func.call": "call", "stablehlo.composite": "call",
    "tuple": "tuple", "get_tuple_element": "get-tuple-element", "stablehlo.create_token": "after-all",
    "chlo.top_k": "topk", "stablehlo.exponential": "exponential",
}


def hlo_opcode_of(opname: str) -> str:
    """The HLO opcode XLA writes for an op named ``opname`` (see :attr:`Instruction.hlo_opcode`)."""
    got = _HLO_OPCODES.get(opname)
    if got is not None:
        return got
    row = OPS.get(opname)
    if row is not None and row.hlo:
        return row.hlo
    return opname.split(".", 1)[-1].replace("_", "-")


def _names(
    params: Sequence[XlaOp], order: Sequence[tuple[XlaOp, str]], hlo: HloNames | None
) -> tuple[list[tuple[str, XlaOp]], dict[str, int], dict[int, str]]:
    """Each instruction's name, in order, the other names that find one (name -> index), and the
    HLO opcode of each instruction named after its HLO instruction (index -> opcode).

    Without ``hlo``: a parameter's name (``p<i>`` when it has none), else ``<opcode>.<index>``.
    With ``hlo`` (a module imported from HLO), when its arguments and ops pair one to one with
    ``params`` and ``order`` (same count, same op names): each op's HLO instruction name
    (``dot.3``); an op that shares its HLO name with an earlier op or a parameter (the importer
    made several ops of one instruction: a tuple-shaped ``custom-call`` and its elements), or
    whose location names none, keeps the name it would have without ``hlo``. Parameters keep
    their names (the program shape's). The names ops would have had without ``hlo``, and the
    parameters' HLO names, are aliases where they name no instruction."""
    plain: list[str] = []
    taken: set[str] = set()
    for i, p in enumerate(params):
        pname = p.extra[1] or f"p{i}"
        if pname in taken:
            pname = f"{pname}.{i}"
        taken.add(pname)
        plain.append(pname)
    for _, opname in order:
        plain.append(f"{opname.rsplit('.', 1)[-1]}.{len(plain)}")
    nodes = [*params, *(op for op, _ in order)]
    if hlo is None or len(hlo.args) != len(params) or len(hlo.ops) != len(order) or any(
        got != want for (got, _), (_, want) in zip(hlo.ops, order, strict=True)
    ):
        return list(zip(plain, nodes, strict=True)), {}, {}
    # parameters keep their names (the program shape's parameter names, which say what to pass)
    chosen: list[str | None] = list(plain[:len(params)])
    used: set[str] = set(plain[:len(params)])
    for _, w in hlo.ops:
        if w and w not in used:
            used.add(w)
            chosen.append(w)
        else:
            chosen.append(None)
    final: list[str] = []
    opcodes: dict[int, str] = {}
    for i, c in enumerate(chosen):
        if c is not None and c in hlo.opcodes:
            opcodes[i] = hlo.opcodes[c]
        if c is None:  # not one to one: the plain name, made unique against the HLO names
            c = plain[i]
            k = 1
            while c in used:
                c, k = f"{plain[i]}.{k}", k + 1
            used.add(c)
        final.append(c)
    aliases = {p: i for i, p in enumerate(plain) if p not in used}
    for i, a in enumerate(hlo.args):  # a parameter's HLO name finds it too
        if a and a not in used:
            aliases.setdefault(a, i)
    return list(zip(final, nodes, strict=True)), aliases, opcodes


@dataclass(frozen=True)
class Partitioning:
    """How a module says it is partitioned: what ``comp.partitioning()`` returns.

    Attributes
    ----------
    num_partitions, num_replicas: the module's ``mhlo.num_partitions`` / ``mhlo.num_replicas``
        (None where the module does not say).
    meshes: Shardy meshes, as the module spells them (``@mesh = #sdy.mesh<["x"=4]>``).
    parameter_shardings, result_shardings: each parameter's and result's sharding as the module
        spells it (``#sdy.sharding<@mesh, [{"x"}, {}]>`` or GSPMD's ``{devices=[4,1]<=[4]}``), or None.
    """

    num_partitions: int | None
    num_replicas: int | None
    meshes: tuple[str, ...]
    parameter_shardings: tuple[str | None, ...]
    result_shardings: tuple[str | None, ...]

    @property
    def is_partitioned(self) -> bool:
        """Whether anything above says the program runs on more than one device."""
        return bool(
            (self.num_partitions or 1) > 1 or (self.num_replicas or 1) > 1 or self.meshes
            or any(self.parameter_shardings) or any(self.result_shardings)
        )


_SHARDING_ATTRS = ("sdy.sharding", "mhlo.sharding")


def _int_attr(text: str | None) -> int | None:
    if text is None:
        return None
    head = text.split(":", 1)[0].strip()
    return int(head) if head.lstrip("-").isdigit() else None


def _sharding_of(attrs: dict[str, Any]) -> str | None:
    for k in _SHARDING_ATTRS:
        v = attrs.get(k)
        if v is not None:
            text = v.text if isinstance(v, MlirAttr) else str(v)
            return text[1:-1] if k == "mhlo.sharding" and text.startswith('"') else text
    return None


def partitioning(graph: InstructionGraph) -> Partitioning:
    """See :meth:`XlaComputation.partitioning`."""
    attrs = dict(graph.module_attrs)
    meshes = [f"@{name} = {mesh}" for name, mesh in graph.meshes]
    return Partitioning(
        _int_attr(attrs.get("mhlo.num_partitions")),
        _int_attr(attrs.get("mhlo.num_replicas")),
        tuple(meshes),
        tuple(_sharding_of(p.attrs) for p in graph.params),
        tuple(_sharding_of(a) for a in graph.result_attrs) if any(graph.result_attrs) else (None,) * len(graph.outputs),
    )
