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
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Union

from ._metadata import Location
from ._mlir_attrs import UI64, DictAttr, mlir_str, render_attrs
from ._optable import (
    CALL,
    GET_TUPLE_ELEMENT,
    PARAMETER,
    STABLEHLO_GET_TUPLE_ELEMENT,
    STABLEHLO_TUPLE,
    TUPLE,
    OpDef,
)
from .program.walk import reachable
from .shape import Shape
from .sharding import HloSharding
from .sharding._spmd import _result_shardings

if TYPE_CHECKING:  # the graph's node types (this module reads nodes; the builder makes them)
    from ._graph import Region
    from .builder import XlaOp

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


class Emitter:
    """Turns graphs into generic-syntax MLIR lines."""

    def __init__(self, metadata_table: list[dict[str, Any]] | None = None) -> None:
        self.n = 0
        self.lines: list[str] = []
        self.host_callbacks: list[Any] = []  # the callables of host-callback nodes, by index
        self._callback_index: dict[int, int] = {}  # op id -> index
        self.metadata_table = metadata_table  # see emit_module
        self._marked: dict[Location, str] = {}
        self._entry_index: dict[tuple[tuple[str, Any], ...], int] = {}
        # with emit_module's node_lines: node id -> position of its op among main's ops (self.top: main's indent)
        self.node_lines: dict[int, int] | None = None
        self.top = ""

    def _placed(self, o: XlaOp, indent: str) -> None:
        """Note that node ``o`` is main's op just written (see ``emit_module``'s ``node_lines``)."""
        if self.node_lines is not None and indent == self.top:
            self.node_lines[o.id] = len(self.lines) - 1

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

    def callback_attrs(self, o: XlaOp, callback: Any) -> str:
        """``o``'s attributes with the index of its host callback ``callback`` (one index per op,
        in emission order)."""
        idx = self._callback_index.get(o.id)
        if idx is None:
            idx = self._callback_index[o.id] = len(self.host_callbacks)
            self.host_callbacks.append(callback)
        return render_attrs({**o.attrs, "backend_config": DictAttr(index=UI64(idx))})

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
                names.append(name)
            return names, elems
        return [self.ref(val, shape, indent)], [shape]

    # -- graphs ------------------------------------------------------------------------------
    def graph(self, env: dict[int, Val], roots: list[XlaOp], indent: str) -> list[int]:
        """Emit every op reachable from ``roots`` not yet in ``env``, in creation order.

        Returns the ids of the ops emitted (so a region can drop them from ``env`` afterwards).
        """
        todo = pending(env, roots)
        for o in todo:
            self.op(o, env, indent)
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
                if self.node_lines is not None:
                    self._placed(o, indent)
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
            self._placed(o, indent)
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
        if o.regions:
            region_txt = " (" + ", ".join(self.region(r, env, indent) for r in o.regions) + ")"
        name = self.fresh()
        if multi:
            lhs = f"{name}:{len(out_shapes)} = " if out_shapes else ""
            env[o.id] = tuple(f"{name}#{i}" for i in range(len(out_shapes)))
        else:
            lhs = f"{name} = "
            env[o.id] = name
        callback = _host_callback(o)
        if callback is not None:
            attrs = f" {{{self.callback_attrs(o, callback)}}}"
        else:
            attrs = f" {{{render_attrs(o.attrs)}}}" if o.attrs else ""
        self.lines.append(
            f'{indent}{lhs}"{code}"({", ".join(args)}){region_txt}{attrs} : ({_types(in_shapes)}) -> '
            f"{_results(out_shapes) if out_shapes else '()'} {self.loc(o.loc)}\n"
        )
        self._placed(o, indent)

    def region(self, r: Region, outer: dict[int, Val], indent: str) -> str:
        inner = indent + "  "
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
                env[p.id] = tuple(vals)
            else:
                a = self.fresh()
                bargs.append(f"{a}: {p.shape.mlir_type()}")
                env[p.id] = a
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
        for k in emitted:
            del env[k]
        for p in r.params:
            del env[p.id]
        head = f"{indent}^bb0({', '.join(bargs)}):\n" if bargs else ""
        ret = f'{inner}"{r.terminator}"({", ".join(rets)}) : ({_types(rshapes)}) -> ()\n'
        return "{\n" + head + "".join(body) + ret + indent + "}"

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
    host_callbacks: list[Any] | None = None,
    padded_dynamic_params: OpDef | None = None,
    metadata_table: list[dict[str, Any]] | None = None,
    module_body: Sequence[str] = (),
    result_attrs: Sequence[Mapping[str, Any]] | None = None,
    node_lines: dict[int, int] | None = None,
) -> str:
    """The full StableHLO module text of the graph ``params -> root``.

    ``side_effects`` are ops emitted even if ``root`` does not depend on them (outfeed, send,
    custom calls with side effects), in their place in creation order. ``host_callbacks``, when
    given, receives the callables of the module's host callbacks (``ops.HostCallback``) in index
    order: what the module must be compiled with.

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
    # node_lines, when given, receives for each node written as one op of main (not a tuple, which
    # becomes its elements, nor an inlined call) its position among main's ops: what pairs a built
    # graph's nodes with the instructions of the module's import
    em = Emitter(metadata_table)
    em.node_lines, em.top = node_lines, "    "
    env: dict[int, Val] = {}
    args = []
    size_args: list[str] = []
    indent = "    "
    for i, p in enumerate(params):
        a = f"%arg{i}"
        pname = p.extra[1] if p.extra[1] else f"p{i}"
        arg_attrs = f" {{{render_attrs(p.attrs)}}}" if p.attrs else ""  # a Parameter built under set_sharding
        shape = p.shape
        dyn = [d for d in range(shape.rank()) if shape.is_array() and shape.is_dynamic_dimension(d)]
        if padded_dynamic_params is not None and dyn:
            et, dims = shape.element_type(), shape.dimensions()
            args.append(f"{a}: {Shape.array_shape(et, dims).mlir_type()}{arg_attrs} loc({mlir_str(pname)})")
            cur, flags = a, [False] * len(dims)
            for d in dyn:
                size = f"%arg{i}_size{d}"
                size_args.append(f"{size}: tensor<i32> loc({mlir_str(f'{pname}_size{d}')})")
                before = Shape.array_shape(et, dims, dynamic_dimensions=flags).mlir_type()
                flags[d] = True
                after = Shape.array_shape(et, dims, dynamic_dimensions=flags).mlir_type()
                nxt = em.fresh()
                em.lines.append(
                    f'{indent}{nxt} = "{padded_dynamic_params.name}"({cur}, {size}) {{dimension = {d} : i64}} : '
                    f"({before}, tensor<i32>) -> {after}\n"
                )
                cur = nxt
            env[p.id] = cur
            continue
        args.append(f"{a}: {p.shape.mlir_type()}{arg_attrs} loc({mlir_str(pname)})")
        env[p.id] = a
    args += size_args
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
    if result_attrs is not None:
        results = ", ".join(
            t.mlir_type() + (f" {{{render_attrs(a)}}}" if a else "")
            for t, a in zip(rshapes, result_attrs, strict=True)
        )
    elif shardings is not None:  # the root's shardings are the program's result shardings
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
    if host_callbacks is not None:
        host_callbacks.extend(em.host_callbacks)
    return head + "".join(em.lines) + tail
