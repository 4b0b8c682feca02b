"""Editing a loaded module's graph: new computations from its instructions.

``comp.with_outputs`` and ``comp.extract`` (:func:`with_outputs`, :func:`extract`) make new
computations from the graph :mod:`xlasdk.program.graph_import` imports, which print, save, compile
and run like any other; ``XlaBuilder.from_computation`` (:func:`builder_from`) makes a builder that
rewrites it (``b.replace(old, new)``). :func:`region_hint` says where an HLO instruction name
lives that ``main`` does not hold (``comp.instruction(name)``'s error).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .._optable import GET_TUPLE_ELEMENT, PARAMETER, TUPLE
from ..builder import Computation, ModuleContext, Region, XlaBuilder, XlaOp
from ..errors import XlaSdkError
from .graph_import import HloNames, Instruction, InstructionGraph
from .walk import reachable
from .walk import users as users_of

if TYPE_CHECKING:
    from .computation import XlaComputation

__all__ = ["with_outputs", "extract", "builder_from"]


_NAME_HINT = (
    "names are those of comp.instructions(): in a module loaded from HLO the HLO instruction names (dot.3), "
    "else a parameter's name or <opcode>.<index>; find an instruction by ins.metadata.op_name or by its opcode; "
    "ops inside regions (loop bodies, reducers, branches) are not main's: reach them through ins.op.regions"
)


def _resolve(
    graph: InstructionGraph, items: Iterable[Instruction | XlaOp | str | int] | Instruction | XlaOp | str | int,
    what: str, *, outputs: bool = True,
) -> list[XlaOp]:
    """The nodes ``items`` name. With ``outputs``, each must be one value (a single result, or one
    result of a multi-result instruction)."""
    if isinstance(items, (Instruction, XlaOp, str, int)):
        items = [items]
    by_name = {**graph.aliases, **{ins.name: ins for ins in graph.instructions}}
    out: list[XlaOp] = []
    for it in items:
        if isinstance(it, Instruction):
            if it._graph is not graph:
                raise XlaSdkError(f"{what}: instruction {it.name!r} belongs to another computation")
            out.append(it.op)
        elif isinstance(it, XlaOp):
            out.append(graph.node_of(it))
        elif isinstance(it, str):
            if it not in by_name:
                near = [i.name for i in graph.instructions if i.name.split(".")[0] == it.split(".")[0]][:8]
                raise XlaSdkError(
                    f"{what}: no instruction named {it!r} in computation {graph.name!r}"
                    + (f" (instructions of that kind: {', '.join(near)})" if near else f"; {_NAME_HINT}")
                )
            out.append(by_name[it].op)
        elif isinstance(it, int) and not isinstance(it, bool):
            n = len(graph.instructions)
            if not -n <= it < n:  # (negative: from the end, as Python indexes)
                raise XlaSdkError(f"{what}: instruction index {it} is out of range (0..{n - 1}, or -{n}..-1)")
            out.append(graph.instructions[it].op)
        else:
            raise XlaSdkError(f"{what}: expected an Instruction, its name or its index, got {type(it).__name__}")
    if outputs:
        for op in out:
            if _multi(op):
                n = len(op.shape.tuple_shapes())
                name = graph.instruction_of(op).name
                raise XlaSdkError(
                    f"{what}: instruction {name!r} ({op.opcode}) has {n} results; an output is one value: "
                    f"pass one of them, comp.instruction({name!r}).result(k) for k in 0..{n - 1}"
                )
    return out


# -- where a name lives that main does not hold ------------------------------------------------------
_COMPUTATION = re.compile(r"^(ENTRY\s+)?%?([^\s(%{]+)\s*(?:\(.*)?\{\s*$")
_INSTRUCTION = re.compile(r"^\s+(?:ROOT\s+)?%?([^\s=%]+)\s*=\s*\S+.*?\s([a-z][a-z0-9\-]*)\(")
_CALLS = re.compile(r"\b(to_apply|body|condition|calls|true_computation|false_computation|branch_computations)="
                    r"(\{[^}]*\}|%?[^\s,{}]+)")


def region_hint(hlo_text: str, name: str) -> str | None:
    """Where HLO instruction ``name`` lives when it is not one of the entry computation's: the
    computation that holds it and the chain of instructions that call that computation, up to
    one of the entry's, with how to walk it (``op.regions`` of a while, reduce, sort, conditional...;
    ``called_function()`` of a fusion or call). None when no computation of the text holds it."""
    holder: dict[str, str] = {}  # instruction name -> its computation
    callers: dict[str, tuple[str, str, str]] = {}  # computation -> (instruction, its opcode, its computation)
    entry, current = "", ""
    for line in hlo_text.splitlines():
        head = _COMPUTATION.match(line)
        if head is not None and not line.startswith((" ", "\t")):
            current = head.group(2)
            if head.group(1):
                entry = current
            continue
        ins = _INSTRUCTION.match(line)
        if ins is None or not current:
            continue
        holder.setdefault(ins.group(1), current)
        for _, called in _CALLS.findall(line):
            for c in called.strip("{}").split(","):
                if c.strip():
                    callers.setdefault(c.strip().lstrip("%"), (ins.group(1), ins.group(2), current))
    where = holder.get(name)
    if where is None or where == entry:
        return None
    chain: list[str] = []
    comp, top = where, None
    for _ in range(64):  # nested regions, up to the entry computation
        call = callers.get(comp)
        if call is None:
            break
        chain.append(f"called by {call[0]!r} ({call[1]}) in {call[2]!r}")
        top, comp = call, call[2]
        if comp == entry:
            break
    msg = f"{name!r} is an instruction of the HLO computation {where!r}"
    if chain:
        msg += ", " + ", ".join(chain)
    if top is not None and comp == entry:
        walk = "called_function()" if top[1] in ("fusion", "call") else "op.regions"
        msg += f": walk it through comp.instruction({top[0]!r}).{walk}"
    return msg


def _multi(op: XlaOp) -> bool:
    """Whether ``op`` is an instruction with several results (its value is not one array)."""
    return op.shape.is_tuple() and op.opdef is not GET_TUPLE_ELEMENT and not op.opdef.tuple_result


# Argument attributes that tie an argument to a result of the original program.
_RESULT_TIED = ("tf.aliasing_output", "jax.buffer_donor")


def _edited_params(graph: InstructionGraph, params: Sequence[XlaOp]) -> list[XlaOp]:
    out = []
    for p in params:
        if any(k in p.attrs for k in _RESULT_TIED):
            p = XlaOp(p.builder, PARAMETER, (), p.shape, {k: v for k, v in p.attrs.items() if k not in _RESULT_TIED},
                      (), p.loc, p.extra)
        out.append(p)
    return out


# Module attributes that describe main's parameters, or its results, one entry each (XLA's
# entry_computation_layout, as the HLO importer writes it; the cross-program prefetches name parameters).
_PARAM_ATTRS = ("mhlo.xla_entry_computation_parameter_layouts", "mhlo.xla_entry_computation_parameter_tiles",
                "mhlo.cross_program_prefetches")
_RESULT_ATTRS = ("mhlo.xla_entry_computation_result_layout", "mhlo.xla_entry_computation_result_tiles")
# mhlo.frontend_attributes entries with one ';'-separated item per parameter / result, and their defaults
_FRONTEND_LISTS = {"arg_layout_modes": (True, "default"), "arg_memory_spaces": (True, "0"),
                   "out_layout_modes": (False, "default"), "out_memory_spaces": (False, "0")}
_FRONTEND_ITEM = re.compile(r'(\w+) = "([^"\\]*)"')


def _module_attrs(
    graph: InstructionGraph, param_from: Sequence[int | None], result_from: Sequence[int | None],
) -> tuple[tuple[str, str], ...]:
    """The module attributes of an edited graph whose parameter ``k`` is the original's parameter
    ``param_from[k]`` and whose result ``k`` its result ``result_from[k]`` (None: a new one).

    What describes the original's parameters or results one by one stays only where they stayed:
    the entry computation's layouts (tiled ones of a TPU dump among them) are dropped where the
    parameters or results changed (the new ones get XLA's default layouts, which hold the same
    values), and the ``*_layout_modes`` / ``*_memory_spaces`` lists of ``mhlo.frontend_attributes``
    are rebuilt entry by entry (an original's entry, else the default). Donations
    (``mhlo.input_output_alias``) never stay."""
    same_params = list(param_from) == list(range(len(graph.params)))
    same_results = list(result_from) == list(range(len(graph.outputs)))
    out: list[tuple[str, str]] = []
    for k, v in graph.module_attrs:
        if k == "mhlo.input_output_alias" or (k in _PARAM_ATTRS and not same_params) or (
                k in _RESULT_ATTRS and not same_results):
            continue
        if k == "mhlo.frontend_attributes" and not (same_params and same_results):
            v = _frontend_lists(v, param_from, result_from)
        out.append((k, v))
    return tuple(out)


def _frontend_lists(text: str, param_from: Sequence[int | None], result_from: Sequence[int | None]) -> str:
    """``mhlo.frontend_attributes`` (``{arg_layout_modes = "default;default", ...}``) with its
    per-parameter and per-result lists rebuilt for the edited graph (an entry the original lacks:
    the default); its other entries as they were."""

    def rebuilt(m: re.Match[str]) -> str:
        key, value = m.group(1), m.group(2)
        spec = _FRONTEND_LISTS.get(key)
        if spec is None:
            return m.group(0)
        per_param, default = spec
        items = value.split(";") if value else []
        where = param_from if per_param else result_from
        got = [items[i] if i is not None and i < len(items) else default for i in where]
        return f'{key} = "{";".join(got)}"'

    return _FRONTEND_ITEM.sub(rebuilt, text)


def _edited(
    source: XlaComputation, graph: InstructionGraph, params: Sequence[XlaOp], outputs: Sequence[XlaOp],
    effects: Sequence[XlaOp],
    result_attrs: tuple[dict[str, Any], ...] | None = None,
    origin: dict[XlaOp, XlaOp] | None = None,
    *, param_from: Sequence[int | None], result_from: Sequence[int | None],
) -> XlaComputation:
    module_attrs = _module_attrs(graph, param_from, result_from)
    kept = result_attrs if result_attrs and any(result_attrs) else None
    context = ModuleContext(module_attrs, graph.module_body, kept)
    return source.edited(  # the computation of an edited graph keeps what it was edited from
        InstructionGraph.graph_of(graph.name, params, outputs, effects, context),
        _carried_names(graph, params, [*outputs, *effects], origin or {}),
    )


def _carried_names(
    source: InstructionGraph, params: Sequence[XlaOp], roots: list[XlaOp], origin: dict[XlaOp, XlaOp]
) -> HloNames:
    """The names the instructions of an edited graph had in ``source`` (``""`` for new nodes;
    ``origin``: copy -> the node of ``source`` it copies), in the order the emitter writes its ops,
    to pair with its instruction graph as a loaded HLO module's names are
    (:func:`xlasdk.program.graph_import._names`: a list that does not pair one to one is not used)."""
    from .._emit import pending  # the emitter's order of a graph's ops

    def instruction(op: XlaOp) -> Instruction | None:
        op = origin.get(op, op)
        ins = source.names.get(op)
        return ins if ins is not None and ins.op is op else None

    ops = [o for o in pending({p.id: None for p in params}, roots) if o.opdef not in (GET_TUPLE_ELEMENT, TUPLE)]
    found = [instruction(o) for o in ops]
    opcodes = {ins.name: ins.hlo_opcode for ins in found if ins is not None}
    args = tuple(ins.name if (ins := instruction(p)) is not None else "" for p in params)
    return HloNames(args, tuple((o.opcode, ins.name if ins is not None else "") for o, ins in zip(ops, found,
                                                                                              strict=True)), opcodes)


def with_outputs(source: XlaComputation, graph: InstructionGraph, items: Any) -> XlaComputation:
    """See :meth:`XlaComputation.with_outputs`."""
    outs = _resolve(graph, items, "with_outputs")
    if not outs:
        raise XlaSdkError("with_outputs: give at least one instruction")
    params = _edited_params(graph, graph.params)
    # An original output keeps its result attributes (its sharding above all).
    kept: dict[int, dict[str, Any]] = {}
    for o, a in zip(graph.outputs, graph.result_attrs, strict=False):
        kept.setdefault(id(o), a)
    result_attrs = tuple(kept.get(id(o), {}) for o in outs)
    result_from = _positions(graph.outputs, outs)
    subst = {id(a): b for a, b in zip(graph.params, params, strict=True) if a is not b}
    origin: dict[XlaOp, XlaOp] = {a: b for b, a in zip(graph.params, params, strict=True) if a is not b}
    if subst:
        outs, effects = _copy([*outs, *graph.effects], subst, len(outs), origin=origin)
    else:
        effects = list(graph.effects)
    return _edited(source, graph, params, outs, effects, result_attrs, origin=origin,
                   param_from=range(len(params)), result_from=result_from)


def _positions(originals: Sequence[XlaOp], nodes: Sequence[XlaOp]) -> list[int | None]:
    """For each of ``nodes``, its first position in ``originals`` (None where it is not there)."""
    first: dict[int, int] = {}
    for i, o in enumerate(originals):
        first.setdefault(id(o), i)
    return [first.get(id(n)) for n in nodes]


def extract(source: XlaComputation, graph: InstructionGraph, items: Any) -> XlaComputation:
    """See :meth:`XlaComputation.extract`."""
    chosen = _resolve(graph, items, "extract", outputs=False)
    if not chosen:
        raise XlaSdkError("extract: give at least one instruction")
    inside = {id(o) for o in chosen}
    # Inputs: the values the chosen instructions read from outside the set, in instruction order.
    inputs: dict[int, XlaOp] = {}
    for o in sorted(chosen, key=lambda x: x.id):
        if o.opdef is PARAMETER:  # a parameter chosen: it stays an input
            inputs.setdefault(id(o), o)
            continue
        for x in [*o.operands, *(c for r in o.regions for c in r.captures)]:
            src = x.operands[0] if x.opdef is GET_TUPLE_ELEMENT and x not in graph.names else x
            if id(src) not in inside and id(x) not in inside:
                inputs.setdefault(id(x), x)
    b = XlaBuilder(graph.name)
    subst: dict[int, XlaOp] = {}
    params: list[XlaOp] = []
    for i, x in enumerate(inputs.values()):
        owner = graph.instruction_of(x)
        pname = owner.name if x in graph.names else f"{owner.name}#{x.extra}"
        p = b.add_imported(PARAMETER, (), x.shape, {}, (), x.loc, (i, pname))
        subst[id(x)] = p
        params.append(p)
    used = {id(x) for o in chosen for x in o.operands} | {
        id(x.operands[0]) for o in chosen for x in o.operands if x.opdef is GET_TUPLE_ELEMENT
    }
    outs = [o for o in chosen if id(o) not in used] or list(chosen)
    # an instruction with several results gives them all
    outs = [p for o in outs for p in (graph.parts.get(o.id, (o,)) if _multi(o) else (o,))]
    origin: dict[XlaOp, XlaOp] = {}
    result_from = _positions(graph.outputs, outs)
    param_from = _positions(graph.params, list(inputs.values()))
    copied, _ = _copy(outs, subst, len(outs), origin=origin)
    return _edited(source, graph, params, copied, [], origin=origin, param_from=param_from, result_from=result_from)


def _copy(
    roots: Sequence[XlaOp], subst: dict[int, XlaOp], n_out: int, *, builder: XlaBuilder | None = None,
    only: XlaBuilder | None = None, origin: dict[XlaOp, XlaOp] | None = None,
) -> tuple[list[XlaOp], list[XlaOp]]:
    """Copies of ``roots`` with the nodes in ``subst`` (by id) replaced, through regions; split
    into the first ``n_out`` copies and the rest. With ``builder``, the copies of nodes of
    ``only`` (the main graph's builder) belong to ``builder``; ``subst`` then also receives every
    copy (by the original's id). ``origin`` receives each copy's original (copy -> original)."""
    memo: dict[int, XlaOp] = subst if builder is not None else dict(subst)

    def cp(o: XlaOp) -> XlaOp:
        got = memo.get(id(o))
        if got is not None:
            return got
        stack = [(o, False)]
        while stack:
            node, ready = stack.pop()
            if id(node) in memo:
                continue
            deps = [*node.operands, *(c for r in node.regions for c in (*r.captures, *(r.bindings or ())))]
            if not ready:
                stack.append((node, True))
                stack.extend((d, False) for d in deps if id(d) not in memo)
                continue
            regions = tuple(_copy_region(r, memo) for r in node.regions)
            owner = builder if builder is not None and node.builder is only else node.builder
            ops_ = tuple(memo[id(x)] for x in node.operands)
            if owner is builder:  # the rewrite's builder: counted towards its size limit
                new = owner.add_imported(node.opdef, ops_, node.shape, node.attrs, regions, node.loc, node.extra)
            else:
                new = XlaOp(owner, node.opdef, ops_, node.shape, node.attrs, regions, node.loc, node.extra)
            memo[id(node)] = new
            if origin is not None:
                origin[new] = node
        return memo[id(o)]

    def _copy_region(r: Region, memo: dict[int, XlaOp]) -> Region:
        # The region's ops read outer values directly (captures): copied when one of those changed.
        if not any(memo.get(id(c), c) is not c for c in (*r.captures, *(r.bindings or ()))):
            return r
        for p in r.params:
            memo.setdefault(id(p), p)
        return Region(
            r.params, tuple(cp(x) for x in r.results), None if r.bindings is None else tuple(cp(x) for x in r.bindings),
            captures=tuple(cp(x) for x in r.captures), effects=tuple(cp(x) for x in r.effects),
            terminator=r.terminator,
        )

    copied = [cp(o) for o in roots]
    return copied[:n_out], copied[n_out:]


class _Rewrite:
    """The state of a builder made by :meth:`XlaBuilder.from_computation`: the copied program."""

    def __init__(self, source: XlaComputation, graph: InstructionGraph, b: XlaBuilder, memo: dict[int, XlaOp]) -> None:
        self.source = source
        self.graph = graph
        self.builder = b
        self.copies = memo  # id of an original node -> its copy in the builder
        self.outputs = [memo[id(o)] for o in graph.outputs]
        self.original_outputs = list(self.outputs)
        self.effects = [memo[id(o)] for o in graph.effects]
        self.imported = {id(o) for o in memo.values()}
        self.user_count = len(b.side_effects())
        self.replaced: set[int] = set()
        self.names = {id(memo[id(ins.op)]): ins.name for ins in graph.instructions}

    def _name(self, op: XlaOp) -> str:
        name = self.names.get(id(op))
        return f"{name!r} ({op.opcode})" if name else op.opcode

    def instruction(self, name: str | int) -> XlaOp:
        (original,) = _resolve(self.graph, [name], "instruction", outputs=False)
        return self.copies[id(original)]

    def _nodes(self) -> list[XlaOp]:
        """Every node of the copied program's main graph reachable from its outputs and effects, in
        creation order."""
        return reachable([*self.outputs, *self.effects], regions=True)

    def replace(self, old: XlaOp, new: XlaOp) -> None:
        from ..errors import DTypeError, ShapeError

        for what, op in (("old", old), ("new", new)):
            if not isinstance(op, XlaOp) or op.builder is not self.builder:
                raise ShapeError(f"replace: {what} must be an XlaOp of builder {self.builder.name!r}")
        if id(old) not in self.imported:
            raise ShapeError("replace: old must be an instruction of the original program (builder.instruction(...))")
        if id(old) in self.replaced:
            raise ShapeError(
                f"replace: {self._name(old)} was replaced already; its readers now read the value it was replaced "
                "with: replace that value instead"
            )
        if new.shape != old.shape:
            same_dims = (new.shape.is_array() and old.shape.is_array()
                         and new.shape.dimensions() == old.shape.dimensions())
            kind = DTypeError if same_dims else ShapeError
            raise kind(f"replace: the new value has shape {new.shape}, the instruction it replaces ({self._name(old)}) "
                       f"{old.shape}")
        if new is old:
            return
        users = [o for o in users_of(self._nodes()).get(old.id, ()) if id(o) in self.imported]
        # new must not be computed from a user of old (the program would read its own result)
        cone = {id(o) for o in reachable([new], regions=True)}
        bad = [u for u in users if id(u) in cone]
        if bad:
            raise ShapeError(
                f"replace: the new value is computed from {self._name(bad[0])}, which reads {self._name(old)}, the "
                "value it replaces (the program would read its own result)"
            )
        self.replaced.add(id(old))
        # ops inside regions (loop bodies, branches) may read old directly: they read new too
        holders = [o for o in self._nodes() if id(o) in self.imported and any(
            any(c is old for c in r.captures) for r in o.regions)]
        for h in holders:
            _replace_in_regions(h, old, new)
        for u in users:
            u.operands = tuple(new if x is old else x for x in u.operands)
        self.outputs = [new if o is old else o for o in self.outputs]
        self.effects = [new if o is old else o for o in self.effects]
        # The emitters write a graph in creation order: everything downstream of the rewired ops
        # is renumbered after new, keeping its own order.
        downstream: dict[int, XlaOp] = {id(u): u for u in (*users, *holders)}
        changed = True
        nodes = [o for o in self._nodes() if id(o) in self.imported]
        while changed:
            changed = False
            for o in nodes:
                if id(o) not in downstream and any(id(x) in downstream for x in o.operands) or (
                    id(o) not in downstream and any(id(c) in downstream for r in o.regions for c in r.captures)
                ):
                    downstream[id(o)] = o
                    changed = True
        for o in sorted(downstream.values(), key=lambda n: n.id):
            o.id = self.builder._next_id()

    def build(self, root: Any) -> XlaComputation:
        if root is None:
            outs = list(self.outputs)
        elif isinstance(root, (list, tuple)):
            outs = list(root)
        else:
            outs = [root]
        from ..errors import ShapeError

        if not outs:
            raise ShapeError("build: no outputs")
        for o in outs:
            if not isinstance(o, XlaOp) or o.builder is not self.builder:
                raise ShapeError(f"build: outputs must be XlaOps of builder {self.builder.name!r}")
            if _multi(o):
                raise ShapeError(f"build: output {o.opcode} has several results; give one (ops.GetTupleElement)")
        kept: dict[int, dict[str, Any]] = {}
        for o, orig, a in zip(self.outputs, self.original_outputs, self.graph.result_attrs, strict=False):
            if o is orig:
                kept.setdefault(id(o), a)
        result_attrs = tuple(kept.get(id(o), {}) for o in outs)
        effects = [*self.effects, *self.builder.side_effects()[self.user_count:]]
        params = self.builder.parameters()
        originals = [self.copies[id(p)] for p in self.graph.params]
        return _edited(self.source, self.graph, params, outs, effects, result_attrs,
                       param_from=_positions(originals, params), result_from=_positions(self.original_outputs, outs))


def _replace_in_regions(owner: XlaOp, old: XlaOp, new: XlaOp) -> None:
    """Every op inside ``owner``'s regions (nested ones included) reads ``new`` where it read ``old``."""
    for r in owner.regions:
        r.captures = tuple(new if c is old else c for c in r.captures)
        seen: set[int] = set()
        stack = [*r.results, *r.effects]
        while stack:
            o = stack.pop()
            if id(o) in seen or o.opdef is PARAMETER:
                continue
            seen.add(id(o))
            if any(x is old for x in o.operands):
                o.operands = tuple(new if x is old else x for x in o.operands)
            stack.extend(x for x in o.operands if x is not new)
            if any(c is old for r2 in o.regions for c in r2.captures):
                _replace_in_regions(o, old, new)


def builder_from(source: XlaComputation) -> XlaBuilder:
    """See :meth:`XlaBuilder.from_computation`."""
    from ..errors import DTypeError

    if not isinstance(source, Computation):
        raise DTypeError(
            f"XlaBuilder.from_computation: expected an XlaComputation (xs.load_computation(path) loads a file), "
            f"got {type(source).__name__}"
        )
    graph = source.instruction_graph()
    b = XlaBuilder(graph.name)
    memo: dict[int, XlaOp] = {}
    for p in graph.params:
        attrs = {k: v for k, v in p.attrs.items() if k not in _RESULT_TIED}
        memo[id(p)] = b.add_imported(PARAMETER, (), p.shape, attrs, (), p.loc, p.extra)
    main = graph.params[0].builder if graph.params else (graph.outputs[0].builder if graph.outputs else None)
    _copy([*graph.outputs, *graph.effects, *(i.op for i in graph.instructions)], memo, 0,
          builder=b, only=main)
    b.set_rewrite(_Rewrite(source, graph, b, memo))
    return b


def inline_function(b: XlaBuilder, function: InstructionGraph, operands: Sequence[XlaOp]) -> list[XlaOp]:
    """The outputs of the called function ``function`` (:meth:`InstructionGraph.callee`) computed
    in the rewrite builder ``b`` from ``operands`` (nodes of ``b``, one per parameter): a copy of
    its graph, what replacing a ``func.call`` by its body needs.

    Raises
    ------
    XlaSdkError
        The operands do not match the parameters, or the function has side effects (which an
        inlined copy could reorder).
    """
    if len(operands) != len(function.params) or any(
            o.shape != p.shape for o, p in zip(operands, function.params, strict=True)):
        raise XlaSdkError(f"inline_function: function {function.name!r} takes "
                          f"{[str(p.shape) for p in function.params]}, got {[str(o.shape) for o in operands]}")
    if function.effects:
        raise XlaSdkError(f"inline_function: function {function.name!r} has side effects")
    owner = function.params[0].builder if function.params else (
        function.outputs[0].builder if function.outputs else None)
    memo: dict[int, XlaOp] = {id(p): o for p, o in zip(function.params, operands, strict=True)}
    copied, _ = _copy(list(function.outputs), memo, len(function.outputs), builder=b, only=owner)
    return copied
