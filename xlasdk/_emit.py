"""Emit an xlasdk graph as a StableHLO module in MLIR's generic operation syntax.

Pure string generation (no MLIR context): each op becomes one line
``%N = "stablehlo.add"(%a, %b) {attrs} : (types) -> type loc(...)``. Tuple-shaped values are kept
*unpacked* (a Python tuple of element values) as long as possible: ``Tuple`` and
``GetTupleElement`` cost nothing, multi-result ops (variadic Reduce, Sort, While) hand out
``%N#i``, and a ``stablehlo.tuple`` is emitted only where a single tuple-typed value is needed.

Regions are emitted with block arguments for their parameters, or, when the region has
``bindings`` (branches of ``stablehlo.if``/``stablehlo.case``), with each parameter standing for
an outer value captured implicitly. The pseudo-op ``call`` (XLA ``Call``) is inlined: its
region's graph is emitted in place with the parameters bound to the operands.

Asked for it (``emit_module(..., record=True)``), the emitter also records ``main`` as it writes
it (:class:`MainRecord`): one node per op of ``main`` and of its regions, in the order written,
where each is the built node when the op written is that node exactly (its operands, attributes
and regions), and a node of its own otherwise (a loop's tuple carry written as its elements, a
tuple packed or unpacked, a host callback's index, a padded dynamic argument). The record is
what a loaded copy of the module would import as (:func:`xlasdk.program.graph_import.import_graph`),
made without printing, parsing or pairing: a built program's instruction index
(:meth:`xlasdk.program.origin.Built.index`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from ._graph import Region
from ._metadata import Location
from ._mlir_attrs import I32, UI64, DictAttr, mlir_str, render_attrs
from ._optable import (
    CALL,
    GET_TUPLE_ELEMENT,
    PARAMETER,
    STABLEHLO_GET_TUPLE_ELEMENT,
    STABLEHLO_TUPLE,
    TUPLE,
    OpDef,
    opaque_row,
)
from .program.walk import reachable, unread
from .shape import Shape
from .sharding import HloSharding
from .sharding._spmd import _result_shardings
from .types import PrimitiveType

if TYPE_CHECKING:  # the graph's node types (this module reads nodes; its record makes them of the graph's type)
    from .builder import XlaBuilder, XlaOp

Val = Union[str, tuple["Val", ...]]

_SYM_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$.]*$")

_REPLICATED = HloSharding.replicate()


def _symbol(name: str) -> str:
    if _SYM_RE.match(name):
        return "@" + name
    return '@"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _types(shapes: list[Shape]) -> str:
    return ", ".join(s.mlir_type() for s in shapes)


def _results(shapes: list[Shape]) -> str:
    if len(shapes) == 1:
        return shapes[0].mlir_type()
    return "(" + _types(shapes) + ")"


#: the location of an op the emitter adds (a tuple it packs or unpacks, a dynamic argument's size
#: set): the module gives it none of its own
_NO_LOC = Location("loc(unknown)", {}, "")


@dataclass(frozen=True)
class MainRecord:
    """``main`` as the emitter wrote it, node by node (see the module docstring).

    Attributes
    ----------
    params: its arguments in order: the built parameters, but a padded dynamic one (a static
        argument of its bounds), then the padded arguments' ``s32[]`` sizes.
    ops: its ops in the order written, each with the op name written (``stablehlo.add``).
    outputs: the values it returns, in order.
    unused: its ops whose values no op and no output reads (the side effects, and any other
        unused op: :func:`xlasdk.program.graph_import.import_graph` keeps the impure ones).
    parts: for each op of several results (in regions too), by node id, a node per result: the
        built ``get_tuple_element`` that reads it, where that is the node written, else one of its own.
    result_attrs: the attributes written on each result (its sharding).
    built: each built node of ``main`` (not a tuple, whose elements are its values) that is not its
        own record, by id: the node of the value it was written as (a parameter's: the argument).
    """

    params: tuple[XlaOp, ...]
    ops: tuple[tuple[XlaOp, str], ...]
    outputs: tuple[XlaOp, ...]
    unused: tuple[XlaOp, ...]
    parts: dict[int, tuple[XlaOp, ...]]
    result_attrs: tuple[dict[str, Any], ...]
    built: dict[int, XlaOp]


@dataclass(frozen=True)
class EmittedModule:
    """What :func:`emit_module` wrote: the module's ``text``, the callables of its host callbacks
    by index (what it must be compiled with), and, when asked for, ``main``'s record."""

    text: str
    host_callbacks: tuple[Any, ...]
    main: MainRecord | None = None


class _Scope:
    """What a block (``main``, a region) defines and reads, by SSA name, and the nodes written in it."""

    __slots__ = ("defined", "used", "nodes")

    def __init__(self) -> None:
        self.defined: set[str] = set()
        self.used: list[str] = []
        self.nodes: list[XlaOp] = []


class _Recorder:
    """Records ``main`` as the :class:`Emitter` writes it (:class:`MainRecord`): each SSA value
    written gets its node, made as the importer makes the module's (a parameter per block
    argument, a node per op, a ``get_tuple_element`` per result of an op of several results),
    where the node written is the built one exactly, that node itself."""

    def __init__(self, root: XlaOp) -> None:
        self.builder: XlaBuilder = root.builder  # the owner of the nodes the emitter adds
        self.node_type = type(root)  # XlaOp (the builder's layer, which the emitters only read)
        self.values: dict[str, XlaOp] = {}  # SSA name -> node
        self.order_of: dict[str, int] = {}  # SSA name -> place in definition order (captures are listed in it)
        self.results: dict[str, tuple[XlaOp, int]] = {}  # "%N#i" -> (op, i)
        self.parts: dict[int, tuple[XlaOp, list[XlaOp | None]]] = {}  # op id -> (op, a node per result)
        self.reused: set[int] = set()  # built nodes that are a record's (each stands once)
        self.scopes = [_Scope()]
        self.ops: list[tuple[XlaOp, str]] = []
        self.built: dict[int, XlaOp] = {}

    @property
    def in_main(self) -> bool:
        return len(self.scopes) == 1

    def _define(self, name: str, node: XlaOp) -> None:
        self.order_of[name] = len(self.order_of)
        if len(self.scopes) > 1:  # (what main defines and reads is asked of regions only)
            self.scopes[-1].defined.add(name)
        self.values[name] = node

    def _claim(self, o: XlaOp) -> bool:
        """Whether built node ``o`` may be a record's (once: a node written twice is copied)."""
        if o.id in self.reused:
            return False
        self.reused.add(o.id)
        return True

    def _part(self, op: XlaOp, i: int) -> XlaOp:
        """The node of result ``i`` of ``op`` (an op of several results): the built node that read
        it as written, else a ``get_tuple_element`` of its own (as the importer gives each result)."""
        slots = self.parts[op.id][1]
        got = slots[i]
        if got is None:
            shape = op.shape.tuple_shapes()[i]
            got = slots[i] = self.node_type(op.builder, GET_TUPLE_ELEMENT, (op,), shape, {}, (), op.loc, i)
        return got

    def node(self, name: str) -> XlaOp:
        """The node of the SSA value ``name``."""
        got = self.values.get(name)
        if got is None:  # a result of an op of several results
            got = self.values[name] = self._part(*self.results[name])
        return got

    def use(self, names: Sequence[str]) -> None:
        """The block being written reads the values ``names`` (a region's captures are those it
        does not define)."""
        if len(self.scopes) > 1:
            self.scopes[-1].used.extend(names)

    def param(self, name: str, p: XlaOp | None, shape: Shape, index: int, pname: str = "",
              attrs: dict[str, Any] | None = None, loc: Location = _NO_LOC) -> XlaOp:
        """The node of block argument ``index`` (of ``main`` or a region): the built parameter ``p``
        where it is that argument, else a parameter of its own."""
        if p is not None and p.extra[0] == index and p.shape == shape and self._claim(p):
            node = p
        else:
            b = self.builder if p is None else p.builder
            node = self.node_type(b, PARAMETER, (), shape, {} if attrs is None else attrs, (), loc, (index, pname))
        self._define(name, node)
        return node

    def line(self, o: XlaOp | None, row: OpDef, name: str, args: Sequence[str], shape: Shape,
             attrs: dict[str, Any], regions: Sequence[Region] = (), loc: Location = _NO_LOC) -> XlaOp:
        """The node of the op just written (``name``: its SSA name; ``o``: the built node it is
        written for, None for an op the emitter adds): ``o`` itself where the op is ``o`` exactly
        (its row, operands, attributes and regions), else a node of its own."""
        if row is STABLEHLO_GET_TUPLE_ELEMENT and shape.is_tuple():  # one result, a tuple: the importer's
            row = opaque_row(row.name, True)  # opaque row of that form, as the module imports
        scope = self.scopes[-1]
        inner = len(self.scopes) > 1  # (what main defines and reads is asked of regions only)
        if inner:
            scope.used.extend(args)
        values = self.values
        operands = tuple([values[a] if a in values else self.node(a) for a in args])
        node: XlaOp
        # (tuples of nodes and of regions compare their items by identity)
        if (o is not None and row is o.opdef and attrs is o.attrs and operands == o.operands
                and tuple(regions) == o.regions and self._claim(o)):
            node = o
        else:
            b = self.builder if o is None else o.builder
            node = self.node_type(b, row, operands, shape, attrs, tuple(regions), o.loc if o is not None else loc, None)
        if shape.is_tuple() and not row.tuple_result:
            k = len(shape.tuple_shapes())
            self.parts[node.id] = (node, [None] * k)
            for i in range(k):
                part = f"{name}#{i}"
                self.order_of[part] = len(self.order_of)
                self.results[part] = (node, i)
                if inner:
                    scope.defined.add(part)
        else:
            self.order_of[name] = len(self.order_of)
            values[name] = node
            if inner:
                scope.defined.add(name)
        scope.nodes.append(node)
        if not inner:
            self.ops.append((node, row.name))
            if o is not None and node is not o:
                self.built[o.id] = node
        return node

    def read(self, o: XlaOp, val: Val) -> None:
        """Built node ``o``, which the emitter writes no op for (a ``get_tuple_element`` of a tuple
        or of an op of several results, a call written in place), is the value ``val`` written
        before: where ``o`` reads that result of an op of several results as the op's own node, it
        is that result's node."""
        if not isinstance(val, str):
            return
        got = self.results.get(val)
        if (got is not None and val not in self.values and o.opdef is GET_TUPLE_ELEMENT and o.operands[0] is got[0]
                and o.extra == got[1] and self._claim(o)):
            self.parts[got[0].id][1][got[1]] = o
            self.values[val] = o
        if self.in_main:
            node = self.node(val)
            if node is not o:
                self.built[o.id] = node

    def open(self) -> None:
        """A region's block is written next."""
        self.scopes.append(_Scope())

    def close(self, r: Region, params: Sequence[XlaOp], rets: Sequence[str]) -> Region:
        """The record of region ``r`` just written (``params``: its block arguments' nodes,
        ``rets``: the values it returns): ``r`` itself where it is that region exactly."""
        self.use(rets)
        scope = self.scopes.pop()
        captured = sorted({n for n in scope.used if n not in scope.defined}, key=self.order_of.__getitem__)
        self.use(captured)  # what a region reads from outside, its op reads
        results = tuple(self.node(n) for n in rets)
        captures = tuple(self.node(n) for n in captured)
        effects = tuple(unread(scope.nodes, results))
        if (r.bindings is None and tuple(params) == r.params and results == r.results and captures == r.captures
                and effects == r.effects):
            return r
        return Region(params, results, captures=captures, effects=effects, terminator=r.terminator)

    def record(self, params: Sequence[XlaOp], rets: Sequence[str], result_attrs: tuple[dict[str, Any], ...]
               ) -> MainRecord:
        """The record of ``main``, written: ``params``, its arguments' nodes; ``rets``, the values
        it returns; ``result_attrs``, the attributes written on each."""
        self.use(rets)
        outputs = tuple(self.node(n) for n in rets)
        parts = {k: tuple(self._part(op, i) for i in range(len(slots))) for k, (op, slots) in self.parts.items()}
        return MainRecord(tuple(params), tuple(self.ops), outputs, tuple(unread(self.scopes[0].nodes, outputs)), parts,
                          result_attrs, self.built)


class Emitter:
    """Turns graphs into generic-syntax MLIR lines."""

    def __init__(self, metadata_table: list[dict[str, Any]] | None = None, record: _Recorder | None = None) -> None:
        self.n = 0
        self.lines: list[str] = []
        self.host_callbacks: list[Any] = []  # the callables of host-callback nodes, by index
        self._callback_index: dict[int, int] = {}  # op id -> index
        self.metadata_table = metadata_table  # see emit_module
        self._marked: dict[Location, str] = {}
        self._entry_index: dict[tuple[tuple[str, Any], ...], int] = {}
        self.rec = record  # main's record, when asked for (emit_module's record)

    def loc(self, loc: Location) -> str:
        """The text of an op's location; with a metadata table, a location whose fields XLA's
        converter drops gets a marker (:meth:`Location.marked`) and its entry in the table."""
        if self.metadata_table is None or not loc.drops_fields:
            return loc.text
        text = self._marked.get(loc)
        if text is None:
            _, entry = loc.marked(0)
            key = tuple(sorted(entry.items()))
            k = self._entry_index.get(key)
            if k is None:
                k = self._entry_index[key] = len(self.metadata_table)
                self.metadata_table.append(entry)
            text = self._marked[loc] = loc.marked(k)[0]
        return text

    def callback_attrs(self, o: XlaOp, callback: Any) -> dict[str, Any]:
        """``o``'s attributes with the index of its host callback ``callback`` (one index per op,
        in emission order)."""
        idx = self._callback_index.get(o.id)
        if idx is None:
            idx = self._callback_index[o.id] = len(self.host_callbacks)
            self.host_callbacks.append(callback)
        return {**o.attrs, "backend_config": DictAttr(index=UI64(idx))}

    def fresh(self) -> str:
        self.n += 1
        return f"%{self.n}"

    # -- values ------------------------------------------------------------------------------
    def ref(self, val: Val, shape: Shape, indent: str) -> str:
        """A single SSA name for ``val``, materializing a ``stablehlo.tuple`` if needed."""
        if isinstance(val, str):
            return val
        elems = shape.tuple_shapes()
        parts = [self.ref(v, s, indent) for v, s in zip(val, elems, strict=False)]
        name = self.fresh()
        self.lines.append(
            f'{indent}{name} = "{STABLEHLO_TUPLE.name}"({", ".join(parts)}) : ({_types(list(elems))}) -> '
            f"{shape.mlir_type()}\n"
        )
        if self.rec is not None:
            self.rec.line(None, STABLEHLO_TUPLE, name, parts, shape, {})
        return name

    def flat(self, val: Val, shape: Shape, indent: str) -> tuple[list[str], list[Shape]]:
        """One level of flattening: a tuple value becomes its elements."""
        if shape.is_tuple():
            elems = list(shape.tuple_shapes())
            if isinstance(val, tuple):
                return [self.ref(v, s, indent) for v, s in zip(val, elems, strict=False)], elems
            names = []
            for i, s in enumerate(elems):
                name = self.fresh()
                self.lines.append(
                    f'{indent}{name} = "{STABLEHLO_GET_TUPLE_ELEMENT.name}"({val}) {{index = {i} : i32}} : '
                    f"({shape.mlir_type()}) -> {s.mlir_type()}\n"
                )
                if self.rec is not None:
                    self.rec.line(None, STABLEHLO_GET_TUPLE_ELEMENT, name, [val], s, {"index": I32(i)})
                names.append(name)
            return names, elems
        return [self.ref(val, shape, indent)], [shape]

    # -- graphs ------------------------------------------------------------------------------
    def graph(self, env: dict[int, Val], roots: list[XlaOp], indent: str) -> list[int]:
        """Emit every op reachable from ``roots`` not yet in ``env``, in creation order.

        Returns the ids of the ops emitted (so a region can drop them from ``env`` afterwards).
        """
        todo = pending(env, roots)
        rec = self.rec
        for o in todo:
            self.op(o, env, indent)
            if rec is not None and (o.opdef is GET_TUPLE_ELEMENT or o.opdef is CALL):  # (the others are written)
                rec.read(o, env[o.id])
        return [o.id for o in todo]

    def op(self, o: XlaOp, env: dict[int, Val], indent: str) -> None:
        d = o.opdef
        code = d.name
        if d.plain_emit and not o.regions and o.shape._tuple is None and o.extra is None:
            # Fast path, the common case: one result, no regions, operands that are single
            # SSA values. Same text as the general path below.
            fast_args: list[str] = []
            fast_types: list[str] = []
            for x in o.operands:
                v = env[x.id]
                if type(v) is not str:
                    break
                fast_args.append(v)
                fast_types.append(x.shape.mlir_type())
            else:
                self.n += 1
                name = f"%{self.n}"
                env[o.id] = name
                attrs = f" {{{render_attrs(o.attrs)}}}" if o.attrs else ""
                self.lines.append(
                    f'{indent}{name} = "{code}"({", ".join(fast_args)}){attrs} : ({", ".join(fast_types)}) -> '
                    f"{o.shape.mlir_type()} {self.loc(o.loc)}\n"
                )
                if self.rec is not None:
                    self.rec.line(o, d, name, fast_args, o.shape, o.attrs)
                return
        if d is TUPLE:
            env[o.id] = tuple(env[x.id] for x in o.operands)
            return
        if d is CALL:
            self.inline(o, env, indent)
            return
        if d is GET_TUPLE_ELEMENT:
            src = o.operands[0]
            sval = env[src.id]
            idx: int = o.extra
            if isinstance(sval, tuple):
                env[o.id] = sval[idx]
                return
            name = self.fresh()
            self.lines.append(
                f'{indent}{name} = "{STABLEHLO_GET_TUPLE_ELEMENT.name}"({sval}) {{index = {idx} : i32}} : '
                f"({src.shape.mlir_type()}) -> {o.shape.mlir_type()} {self.loc(o.loc)}\n"
            )
            env[o.id] = name
            if self.rec is not None:
                self.rec.line(o, STABLEHLO_GET_TUPLE_ELEMENT, name, [sval], o.shape, {"index": I32(idx)}, loc=o.loc)
            return
        variadic = d.variadic
        args: list[str] = []
        in_shapes: list[Shape] = []
        for x in o.operands:
            if variadic and x.shape.is_tuple():
                names, shapes = self.flat(env[x.id], x.shape, indent)
                args.extend(names)
                in_shapes.extend(shapes)
            else:
                args.append(self.ref(env[x.id], x.shape, indent))
                in_shapes.append(x.shape)
        multi = o.shape.is_tuple() and not d.tuple_result
        out_shapes = list(o.shape.tuple_shapes()) if multi else [o.shape]
        region_txt = ""
        regions = [self.region(r, env, indent) for r in o.regions]
        if regions:
            region_txt = " (" + ", ".join(text for text, _ in regions) + ")"
        name = self.fresh()
        if multi:
            lhs = f"{name}:{len(out_shapes)} = " if out_shapes else ""
            env[o.id] = tuple(f"{name}#{i}" for i in range(len(out_shapes)))
        else:
            lhs = f"{name} = "
            env[o.id] = name
        callback = _host_callback(o)
        written = o.attrs if callback is None else self.callback_attrs(o, callback)
        attrs = f" {{{render_attrs(written)}}}" if written else ""
        self.lines.append(
            f'{indent}{lhs}"{code}"({", ".join(args)}){region_txt}{attrs} : ({_types(in_shapes)}) -> '
            f"{_results(out_shapes) if out_shapes else '()'} {self.loc(o.loc)}\n"
        )
        if self.rec is not None:
            self.rec.line(o, d, name, args, o.shape, written, [r for _, r in regions if r is not None])

    def region(self, r: Region, outer: dict[int, Val], indent: str) -> tuple[str, Region | None]:
        """The text of region ``r`` and, with a record, its record (see :meth:`_Recorder.close`)."""
        inner = indent + "  "
        rec = self.rec
        if rec is not None:
            rec.open()
        params: list[XlaOp] = []  # the record's block arguments
        # One env for every scope: op ids are unique across builders, so the region's entries
        # cannot clash with the outer ones; they are dropped at the end so that the same
        # computation can be emitted again as another region (no per-region copy of env).
        env = outer
        bargs: list[str] = []
        for i, p in enumerate(r.params):
            if r.bindings is not None:  # implicit capture: the parameter is an outer value
                env[p.id] = outer[r.bindings[i].id]
            elif p.shape.is_tuple():
                vals = []
                for s in p.shape.tuple_shapes():
                    a = self.fresh()
                    bargs.append(f"{a}: {s.mlir_type()}")
                    vals.append(a)
                    if rec is not None:
                        params.append(rec.param(a, None, s, len(bargs) - 1))
                env[p.id] = tuple(vals)
            else:
                a = self.fresh()
                bargs.append(f"{a}: {p.shape.mlir_type()}")
                env[p.id] = a
                if rec is not None:
                    params.append(rec.param(a, p, p.shape, len(bargs) - 1))
        saved = self.lines
        self.lines = []
        emitted = self.graph(env, list(r.results) + _region_callbacks(r), inner)
        rets: list[str] = []
        rshapes: list[Shape] = []
        for x in r.results:
            names, shapes = self.flat(env[x.id], x.shape, inner)
            rets.extend(names)
            rshapes.extend(shapes)
        body = self.lines
        self.lines = saved
        record = None if rec is None else rec.close(r, params, rets)
        for k in emitted:
            del env[k]
        for p in r.params:
            del env[p.id]
        head = f"{indent}^bb0({', '.join(bargs)}):\n" if bargs else ""
        ret = f'{inner}"{r.terminator}"({", ".join(rets)}) : ({_types(rshapes)}) -> ()\n'
        return "{\n" + head + "".join(body) + ret + indent + "}", record

    def inline(self, o: XlaOp, env: dict[int, Val], indent: str) -> None:
        inline_call(o, env, lambda e, roots: self.graph(e, roots, indent))


def _host_callback(o: XlaOp) -> Any:
    """The Python callable node ``o`` calls on the host (its row's ``host_callback`` hook), or None."""
    hook = o.opdef.host_callback
    return None if hook is None else hook(o)


def _region_callbacks(r: Region) -> list[XlaOp]:
    """The side-effecting host callbacks (``ops.HostCallback``, ``ops.DebugPrint``) built in a
    region's builder: run with the region even when its results do not use them."""
    if not r.results:
        return list(r.effects)
    effects = r.results[0].builder.side_effects()
    return [o for o in effects if _host_callback(o) is not None] + list(r.effects)


def pending(env: Mapping[int, object], roots: list[XlaOp]) -> list[XlaOp]:
    """Every op reachable from ``roots`` (through operands and region bindings) not yet in
    ``env``, in creation order: the ops a graph walk still has to emit."""
    todo = reachable(roots, known=env, regions=True)
    for o in todo:  # a parameter is always in env: one listed has no value
        if o.opdef is PARAMETER:
            raise AssertionError(f"parameter {o.extra} not bound")  # pragma: no cover
    return todo


def inline_call(o: XlaOp, env: dict[int, Any], graph: Callable[[dict[int, Any], list[XlaOp]], list[int]]) -> None:
    """Emit the graph of ``o``'s (a ``call``'s) one region in place with ``graph``, its parameters
    bound to ``o``'s operands; ``env[o.id]`` becomes its result (a tuple for several).

    The region's ops are emitted afresh for each inlined use (their ``env`` entries are dropped
    afterwards), so one computation called twice with different operands yields two copies.
    """
    (r,) = o.regions
    for p, x in zip(r.params, o.operands, strict=True):
        env[p.id] = env[x.id]
    emitted = graph(env, list(r.results))
    vals = tuple(env[x.id] for x in r.results)
    for k in emitted:
        del env[k]
    for p in r.params:
        del env[p.id]
    env[o.id] = vals[0] if len(vals) == 1 else vals


def emit_module(
    name: str,
    params: list[XlaOp],
    root: XlaOp,
    module_attrs: str = "",
    side_effects: Sequence[XlaOp] = (),
    padded_dynamic_params: OpDef | None = None,
    metadata_table: list[dict[str, Any]] | None = None,
    module_body: Sequence[str] = (),
    result_attrs: Sequence[Mapping[str, Any]] | None = None,
    record: bool = False,
) -> EmittedModule:
    """The full StableHLO module text of the graph ``params -> root``, the callables of its host
    callbacks (``ops.HostCallback``) in index order (what the module must be compiled with), and
    with ``record``, ``main``'s record (:class:`MainRecord`, see the module docstring).

    ``side_effects`` are ops emitted even if ``root`` does not depend on them (outfeed, send,
    custom calls with side effects), in their place in creation order.

    With ``padded_dynamic_params`` (the ``set_dimension_size`` row of the op table, which the ops
    layer defines), a parameter with dynamic dimensions (``f32[<=5]``) becomes a
    static argument of its bounds plus one ``s32[]`` size argument per dynamic dimension (after
    all the parameters, in parameter then dimension order), joined by ``set_dimension_size``:
    XLA:CPU cannot take dynamic arguments (no ``PadToStatic``).

    With ``metadata_table`` (a list), the locations whose metadata fields XLA's StableHLO -> HLO
    converter drops are written with markers and their fields appended to the list, for
    :func:`xlasdk._metadata.patch_hlo_proto` after conversion (what
    :func:`xlasdk._metadata.mark_locations` does to module text).

    An imported module's graph (:mod:`xlasdk.program.graph_import`) also gives
    ``module_body``, the module's other top-level ops (private functions, meshes) as MLIR
    text, written before ``main``, and ``result_attrs``, the attributes of each result of
    ``main`` (in place of the root's shardings).
    """
    rec = _Recorder(root) if record else None
    em = Emitter(metadata_table, rec)
    env: dict[int, Val] = {}
    args = []
    size_args: list[str] = []
    arg_nodes: list[XlaOp] = []  # the record's arguments
    padded: list[tuple[int, XlaOp, list[int], OpDef]] = []  # (number, parameter, its dynamic dimensions, row)
    indent = "    "
    for i, p in enumerate(params):
        a = f"%arg{i}"
        pname = p.extra[1] if p.extra[1] else f"p{i}"
        arg_attrs = f" {{{render_attrs(p.attrs)}}}" if p.attrs else ""  # a Parameter built under set_sharding
        shape = p.shape
        dyn = [d for d in range(shape.rank()) if shape.is_array() and shape.is_dynamic_dimension(d)]
        if padded_dynamic_params is not None and dyn:
            static = Shape.array_shape(shape.element_type(), shape.dimensions())
            args.append(f"{a}: {static.mlir_type()}{arg_attrs} loc({mlir_str(pname)})")
            size_args += [f"%arg{i}_size{d}: tensor<i32> loc({mlir_str(f'{pname}_size{d}')})" for d in dyn]
            padded.append((i, p, dyn, padded_dynamic_params))
            if rec is not None:
                loc = Location(f"loc({mlir_str(pname)})", {}, "")
                arg_nodes.append(rec.param(a, None, static, i, pname, p.attrs, loc))
            continue
        args.append(f"{a}: {p.shape.mlir_type()}{arg_attrs} loc({mlir_str(pname)})")
        env[p.id] = a
        if rec is not None:
            arg_nodes.append(rec.param(a, p, p.shape, i, pname, p.attrs))
            if arg_nodes[-1] is not p:
                rec.built[p.id] = arg_nodes[-1]
    args += size_args
    if rec is not None:  # the sizes' arguments, after all the parameters
        s32 = Shape.array_shape(PrimitiveType.S32, ())
        for i, p, dyn, _ in padded:
            pname = p.extra[1] if p.extra[1] else f"p{i}"
            for d in dyn:
                loc = Location(f"loc({mlir_str(f'{pname}_size{d}')})", {}, "")
                arg_nodes.append(rec.param(f"%arg{i}_size{d}", None, s32, len(arg_nodes), f"{pname}_size{d}", loc=loc))
    for i, p, dyn, sds in padded:  # each padded argument joined with its sizes
        shape = p.shape
        et, dims = shape.element_type(), shape.dimensions()
        cur, flags = f"%arg{i}", [False] * len(dims)
        for d in dyn:
            size = f"%arg{i}_size{d}"
            before = Shape.array_shape(et, dims, dynamic_dimensions=flags).mlir_type()
            flags[d] = True
            after = Shape.array_shape(et, dims, dynamic_dimensions=flags)
            nxt = em.fresh()
            em.lines.append(
                f'{indent}{nxt} = "{sds.name}"({cur}, {size}) {{dimension = {d} : i64}} : '
                f"({before}, tensor<i32>) -> {after.mlir_type()}\n"
            )
            if rec is not None:
                rec.line(None, sds, nxt, [cur, size], after, {"dimension": d})
            cur = nxt
        env[p.id] = cur
        if rec is not None:
            rec.built[p.id] = rec.values[f"%arg{i}"]
    em.graph(env, [root, *side_effects], indent)
    rets, rshapes = em.flat(env[root.id], root.shape, indent)
    attrs = f" attributes {{{module_attrs}}}" if module_attrs else ""
    results = _types(rshapes)
    shardings = _result_shardings(root, len(rshapes)) if result_attrs is None else None
    if result_attrs is None and shardings is None and any("mhlo.sharding" in p.attrs for p in params):
        # sharded parameters and no result sharding: the results are replicated, as XLA makes them
        # (measured with jaxlib 0.10.2), said outright: jaxlib 0.12.1's Shardy import aborts the
        # process on such a module ("Expected HloShardingV3 ... but got non-replicated HloShardingV2")
        shardings = [_REPLICATED] * len(rshapes)
    written: list[dict[str, Any]] = [{} for _ in rshapes]  # each result's attributes
    if result_attrs is not None:
        written = [dict(a) for a in result_attrs]
        results = ", ".join(
            t.mlir_type() + (f" {{{render_attrs(a)}}}" if a else "")
            for t, a in zip(rshapes, result_attrs, strict=True)
        )
    elif shardings is not None:  # the root's shardings are the program's result shardings
        written = [{} if sh is None else {"mhlo.sharding": sh} for sh in shardings]
        results = ", ".join(
            t.mlir_type() + (f" {{mhlo.sharding = {sh.to_mlir()}}}" if sh is not None else "")
            for t, sh in zip(rshapes, shardings, strict=True)
        )
    head = (
        f"module {_symbol(name)}{attrs} {{\n"
        + "".join(text.rstrip("\n") + "\n" for text in module_body)
        + f"  func.func public @main({', '.join(args)}) -> ({results}) {{\n"
    )
    tail = f'    "func.return"({", ".join(rets)}) : ({_types(rshapes)}) -> ()\n  }}\n}}\n'
    main = None if rec is None else rec.record(arg_nodes, rets, tuple(written))
    return EmittedModule(head + "".join(em.lines) + tail, tuple(em.host_callbacks), main)
