"""The reducer's structural strategies (:func:`xlasdk.reduce` on a module that loads): candidates
made from the typed instruction graph (cuts, replacements, simplifications of shapes and
attributes), printed as HLO text and checked by the search of :mod:`xlasdk.reducer`."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ._where import where
from .errors import XlaSdkError
from .program.walk import closure

if TYPE_CHECKING:
    from .builder import Region, XlaBuilder, XlaOp
    from .program.computation import XlaComputation
    from .program.graph_import import Instruction
    from .reducer import _Search
    from .shape import Shape

#: Arrays larger than this (elements) are not written into the module as constants.
MAX_CONSTANT_ELEMENTS = 4096

# -- candidates ------------------------------------------------------------------------------------
@dataclass
class _Module:
    comp: XlaComputation
    text: str
    args: list[np.ndarray[Any, Any]] | None
    size: tuple[int, int, int, int]  # instructions, parameters, elements, text length: smaller is better
    instrs: list[Instruction]
    #: a per-partition module's partition count (its :attr:`args` each that many partitions' arrays
    #: stacked on a leading axis, its :meth:`values` too), None for one device's module
    partitions: int | None = None
    _values: dict[str, np.ndarray[Any, Any]] | None = None

    def values(self) -> dict[str, np.ndarray[Any, Any]]:
        """Every instruction's value on :attr:`args` (reference evaluator; a per-partition module's
        on every simulated partition, stacked), by the names ``extract`` gives the parameters it
        makes; empty when unknown."""
        if self._values is not None:
            return self._values
        from .reference import evaluate

        run: Callable[..., list[np.ndarray[Any, Any]]] = (
            evaluate if self.partitions is None else partial(_evaluate_per_partition, self.partitions))

        vals: dict[str, np.ndarray[Any, Any]] = {}
        if self.args is not None:
            names: list[str] = []
            outs: list[Any] = []
            for ins in self.instrs:
                if ins.opcode == "parameter":
                    continue
                if not ins.shape.is_tuple():
                    names.append(ins.name)
                    outs.append(ins)
                    continue
                try:
                    parts = [ins.result(k) for k in range(len(ins.shape.tuple_shapes()))]
                except XlaSdkError:
                    continue
                names.extend(f"{ins.name}#{k}" for k in range(len(parts)))
                outs.extend(parts)
            try:
                got = run(self.comp.with_outputs(outs), *self.args) if outs else []
            except Exception:  # noqa: BLE001 - no rule, or a value it cannot read: values unknown
                got = []
            if len(got) == len(names):
                vals = dict(zip(names, got, strict=True))
            params = [i.name for i in self.instrs if i.opcode == "parameter"]
            vals.update(zip(params, self.args, strict=True))
        self._values = vals
        return vals


class _Unprintable(Exception):
    """Neither XLA's converter nor the direct printer could print the candidate."""


class _Invalid(Exception):
    """The candidate is not a valid module (xlasdk's own check of the graph rejected it)."""


def _hlo_text(comp: XlaComputation) -> str:
    """The candidate's HLO text: XLA's StableHLO -> HLO converter's, or, where the converter fails or
    dies (jaxlib 0.10.2 dies folding a constant integer division by zero), xlasdk's direct printer's
    (:func:`direct_hlo_text`)."""
    from ._hlo_emit import Unsupported

    try:
        return comp.as_hlo_text()
    except XlaSdkError as e:
        if str(e).startswith("internal error: xlasdk produced an invalid StableHLO module"):
            raise _Invalid(str(e)) from None
    try:
        return direct_hlo_text(comp)
    except Unsupported as e:
        raise _Unprintable(str(e)) from None


def _elements(instrs: Sequence[Instruction]) -> int:
    """Elements of every instruction's result (tuples: of each element)."""
    n = 0
    for i in instrs:
        n += sum(a.size() for a in _arrays(i.shape))
    return n


def _module(comp: XlaComputation, args: list[np.ndarray[Any, Any]] | None, text: str | None = None,
            partitions: int | None = None) -> _Module:
    text = _hlo_text(comp) if text is None else text
    if partitions is not None:
        # the text says what it is, as XLA's dump of it does: one partition's program of ``partitions``
        # (the header's count, the entry computation named ``*_spmd``), loaded as one and never
        # partitioned again (XLA's SPMD partitioner refuses a partition-id)
        head, nl, body = text.partition("\n")
        if head.startswith("HloModule ") and "num_partitions=" not in head:
            text = f"{head}, num_partitions={partitions}{nl}{body}"
        text = _SPMD_ENTRY.sub(
            lambda m: m.group(0) if m.group(2).endswith("_spmd") else f"{m.group(1)}{m.group(2)}_spmd", text, count=1)
    instrs = comp.instructions()
    n_params = sum(1 for i in instrs if i.opcode == "parameter")
    return _Module(comp, text, args, (len(instrs), n_params, _elements(instrs), len(text)), instrs, partitions)


_SPMD_ENTRY = re.compile(r"^(ENTRY\s+%?)([^\s(]+)", re.M)


def _evaluate_per_partition(n: int, comp: XlaComputation, *stacked: np.ndarray[Any, Any]
                            ) -> list[np.ndarray[Any, Any]]:
    """The reference outputs of the per-partition module ``comp`` on each of ``n`` simulated
    partitions (their collectives meeting, ``partition-id`` each its own), from each argument's
    ``n`` arrays stacked on a leading axis; each output stacked the same way."""
    from .reference._evaluator import run_reference
    from .reference.collectives import on_every_device

    def body(k: int, callees: Any) -> list[np.ndarray[Any, Any]]:
        return run_reference(comp, [a[k] for a in stacked], scales=False, callees=callees)[0]

    rows = on_every_device(comp, body, 1, n)
    return [np.stack([np.asarray(r[j]) for r in rows]) for j in range(len(rows[0]))] if rows else []


# Attributes a simplification may drop: what the program computes does not depend on them, or their
# default is the trivial value (a window without strides, dilations or padding).
_DROPPABLE = frozenset({
    "mhlo.frontend_attributes", "mhlo.sharding", "sdy.sharding", "backend_config", "mhlo.backend_config",
    "result_layout", "xla_shape", "operand_layouts", "result_layouts", "precision_config", "window_strides",
    "base_dilations", "window_dilations", "padding", "lhs_dilation", "rhs_dilation", "window_reversal",
})


# What dropping the metadata removes from a module's HLO text: op metadata and the stack-frame tables.
_HAS_METADATA = re.compile(r"metadata=\{|^(?:FileNames|FunctionNames|FileLocations|StackFrames)$", re.M)


def _arrays(shape: Shape) -> list[Shape]:
    """The array shapes of ``shape`` (its elements when a tuple)."""
    if shape.is_tuple():
        return [a for e in shape.tuple_shapes() for a in _arrays(e)]
    return [shape] if shape.is_array() else []


def _is_constant(op: XlaOp) -> bool:
    """Whether ``op`` is a ``stablehlo.constant`` (its row's op)."""
    from .ops.sources import CONSTANT

    return op.opdef.same_op(CONSTANT)


def _value_of(op: XlaOp) -> np.ndarray[Any, Any] | None:
    """The literal of a ``stablehlo.constant`` node (as loaded, or as a simplification wrote it);
    None for one its kind's reader does not read (complex pairs, ``i4``)."""
    from ._mlir_attrs import DenseElements
    from .errors import GraphImportError

    if not _is_constant(op):
        return None
    try:
        v = op.attr("value")
    except GraphImportError:
        return None
    return v.value() if isinstance(v, DenseElements) else None


def _literal(ins: Instruction) -> np.ndarray[Any, Any] | None:
    return _value_of(ins.op) if ins.shape.is_array() and ins.shape.size() > 1 else None


def _cone(roots: Sequence[Instruction], stop: set[str]) -> set[str]:
    """Names of the non-parameter instructions ``roots`` read, transitively, not looking past ``stop``."""
    def kept(ins: Sequence[Instruction]) -> list[Instruction]:
        return [i for i in ins if i.name not in stop and i.opcode != "parameter"]

    return {i.name for i in closure(kept(roots), lambda i: kept(i.operands))}


class _Reducer:
    def __init__(self, search: _Search, start: _Module) -> None:
        self.s = search
        self.cur = start
        self.dd_n = 2

    # a candidate: made, printed, checked, kept when smaller and still interesting
    def _candidate(self, made: tuple[XlaComputation, list[np.ndarray[Any, Any]] | None] | None) -> _Module | None:
        """The candidate as a module, when it is one to check: printable as HLO, smaller than the
        current module, with arguments where the condition needs them."""
        if made is None:
            return None
        comp, args = made
        if self.s.cond.needs_arguments and args is None:
            return None
        try:
            cand = _module(comp, args, partitions=self.cur.partitions)
        except _Invalid:  # a simplification that made an invalid module
            self.s.invalid += 1
            return None
        except _Unprintable:  # XLA's converter failed or died on it, and the direct printer cannot print it
            self.s.unprintable += 1
            return None
        except XlaSdkError:  # the graph of the printed module cannot be walked
            self.s.invalid += 1
            return None
        return cand if cand.size < self.cur.size else None

    def _holds(self, made: tuple[XlaComputation, list[np.ndarray[Any, Any]] | None] | None) -> bool:
        cand = self._candidate(made)
        return cand is not None and self.s.check(cand.text, cand.args if self.s.cond.needs_arguments else None)

    def _try(self, strategy: str, make: Callable[[], tuple[XlaComputation, list[np.ndarray[Any, Any]] | None] | None]
             ) -> bool:
        try:
            made = make()
        except XlaSdkError:  # a cut the graph cannot express (an opaque op's operand...): not a candidate
            return False
        cand = self._candidate(made)
        if cand is None or not self.s.check(cand.text, cand.args if self.s.cond.needs_arguments else None):
            return False
        self.cur = cand
        self.s.accept(strategy, cand.size[0])
        return True

    def _extract(self, keep: set[str]) -> tuple[XlaComputation, list[np.ndarray[Any, Any]] | None] | None:
        """The current module cut down to the instructions ``keep`` (values they read from
        elsewhere become parameters; those no kept instruction reads are the outputs)."""
        chosen = [i for i in self.cur.instrs if i.name in keep and i.opcode != "parameter"]
        if not chosen:
            return None
        comp = self.cur.comp.extract(chosen)
        return comp, self._args_for(comp)

    def _args_for(self, comp: XlaComputation) -> list[np.ndarray[Any, Any]] | None:
        if self.cur.args is None:
            return None
        names = list(comp.program_shape().parameter_names())
        if not names:
            return []
        vals = self.cur.values()
        if not all(n in vals for n in names):
            return None
        return [vals[n] for n in names]

    def ops(self) -> list[Instruction]:
        return [i for i in self.cur.instrs if i.opcode != "parameter"]

    def sinks(self) -> list[Instruction]:
        return [i for i in self.ops() if not i.users]

    # strategies
    def drop_outputs(self) -> bool:
        """One move of delta debugging (ddmin) over the outputs: keep one chunk of them, or drop
        one; the granularity carries over between calls (the kept outputs stay in order)."""
        while True:
            sinks = self.sinks()
            if len(sinks) < 2:
                return False
            n = min(self.dd_n, len(sinks))
            size = -(-len(sinks) // n)
            chunks = [sinks[k : k + size] for k in range(0, len(sinks), size)]
            for c in chunks:
                if self._try("drop outputs", partial(self._extract, _cone(c, set()))):
                    self.dd_n = 2
                    return True
            if len(chunks) > 2:
                for c in chunks:
                    rest = [x for x in sinks if x not in c]
                    if self._try("drop outputs", partial(self._extract, _cone(rest, set()))):
                        self.dd_n = max(len(chunks) - 1, 2)
                        return True
            if len(chunks) >= len(sinks):
                self.dd_n = 2
                return False
            self.dd_n = min(len(sinks), 2 * len(chunks))

    def cut_prefix(self) -> bool:
        """Bisect for the shortest prefix of the instruction sequence that still shows the problem."""
        ops = self.ops()
        lo, hi = 0, len(ops) - 1  # the whole sequence is known to show it
        best: tuple[XlaComputation, list[np.ndarray[Any, Any]] | None] | None = None
        found = False
        while lo < hi:
            mid = (lo + hi) // 2
            made = self._extract({i.name for i in ops[: mid + 1]})
            if made is not None and self._holds(made):
                hi, best, found = mid, made, True
            else:
                lo = mid + 1
        return found and best is not None and self._try("cut the sequence (prefix)", lambda: best)

    def cut_suffix(self) -> bool:
        """Bisect for the shortest suffix (what it reads from before the cut made parameters)."""
        ops = self.ops()
        lo, hi = 0, len(ops) - 1  # start index: 0 is the whole sequence
        best: tuple[XlaComputation, list[np.ndarray[Any, Any]] | None] | None = None
        while lo < hi:
            mid = (lo + hi + 1) // 2
            made = self._extract({i.name for i in ops[mid:]})
            if made is not None and self._holds(made):
                lo, best = mid, made
            else:
                hi = mid - 1
        return best is not None and self._try("cut the sequence (suffix)", lambda: best)

    def to_parameters(self) -> bool:
        """Replace one instruction by a parameter, the last instructions first; restart after each
        success (the names change)."""
        for ins in reversed(self.ops()):
            if all(o.opcode == "parameter" for o in ins.operands) and not ins.shape.is_tuple():
                continue  # nothing to drop behind it
            keep = _cone(self.sinks(), {ins.name})
            if self._try("instruction -> parameter", partial(self._extract, keep)):
                return True
        return False

    def to_constants(self) -> bool:
        """Replace one instruction (or parameter) by a constant of its value on the arguments
        (zeros when unknown), the last first; restart after each success."""
        for ins in reversed(self.cur.instrs):
            if _is_constant(ins.op) or ins.shape.is_tuple() or not ins.shape.is_array():
                continue
            if int(np.prod(ins.shape.dimensions(), dtype=np.int64)) > MAX_CONSTANT_ELEMENTS:
                continue
            if self._try("instruction -> constant", partial(self._constant, ins)):
                return True
        return False

    def _constant(self, ins: Instruction) -> tuple[XlaComputation, list[np.ndarray[Any, Any]] | None] | None:
        from . import ops
        from .builder import XlaBuilder

        dtype = np.dtype(ins.shape.numpy_dtype())
        value = self.cur.values().get(ins.name)
        if value is not None and self.cur.partitions is not None:
            # one constant in every partition's program: only a value all partitions share
            value = value[0] if all(v.tobytes() == value[0].tobytes() for v in value) else None
        if value is None:
            if self.s.cond.needs_arguments:
                return None
            value = np.zeros(ins.shape.dimensions(), dtype)
        b = XlaBuilder.from_computation(self.cur.comp)
        node = b.instruction(ins.name)
        const = ops.Constant(b, np.asarray(value, dtype))
        const.loc = node.loc  # it stands where the instruction stood (not at a line of the caller's)
        b.replace(node, const)
        edited = b.build()
        rest = [i for i in edited.instructions() if i.opcode != "parameter"]
        comp = edited.extract(rest)
        if self.cur.args is None:
            return comp, None
        by_name = dict(zip(self.cur.comp.program_shape().parameter_names(), self.cur.args, strict=True))
        names = list(comp.program_shape().parameter_names())
        if not all(n in by_name for n in names):
            return comp, None
        return comp, [by_name[n] for n in names]

    # simplifications (C-Reduce's and hlo_bisect's shape and attribute passes): same instructions,
    # smaller shapes or shorter text; an edit that makes an invalid module is rejected when loaded
    def _rewritten(self, edit: Callable[[XlaBuilder, dict[str, XlaOp]], list[np.ndarray[Any, Any]] | None]
                   ) -> tuple[XlaComputation, list[np.ndarray[Any, Any]] | None] | None:
        """The current module copied (:meth:`XlaBuilder.from_computation`) with ``edit`` applied to the
        copies of its instructions (by name); ``edit`` returns the arguments of the edited module."""
        from .builder import XlaBuilder

        b = XlaBuilder.from_computation(self.cur.comp)
        nodes = {i.name: b.instruction(i.name) for i in self.cur.instrs}
        args = edit(b, nodes)
        return b.build(), args

    def shrink_dimensions(self) -> bool:
        """Replace one dimension size D by 1, then by D // 2: everywhere in the module, then only in
        one axis of the shapes of one rank (constants and arguments keep their leading elements);
        the largest sizes first."""
        shapes = [sh for i in self.cur.instrs for sh in _arrays(i.shape)]
        sizes = sorted({d for sh in shapes for d in sh.dimensions() if d > 1}, reverse=True)
        axes = sorted({(d, sh.rank(), k) for sh in shapes for k, d in enumerate(sh.dimensions()) if d > 1},
                      key=lambda t: (-t[0], t[1], t[2]))
        where: list[tuple[int, tuple[int, int] | None]] = [(d, None) for d in sizes]
        where += [(d, (r, k)) for d, r, k in axes]
        for d, at in where:
            for new in sorted({1, d // 2} - {d}):
                what = "" if at is None else f" in axis {at[1]} of rank-{at[0]} shapes"
                if self._try(f"simplify: dimension {d} -> {new}{what}", partial(self._rewritten, partial(
                        self._resize, d, new, at))):
                    return True
        return False

    def _resize(self, old: int, new: int, at: tuple[int, int] | None, b: XlaBuilder, nodes: dict[str, XlaOp]
                ) -> list[np.ndarray[Any, Any]] | None:
        from ._mlir_attrs import DenseElements
        from .shape import Shape

        def dims(ds: Sequence[int]) -> list[int]:
            return [new if x == old and (at is None or (len(ds), k) == at) else x for k, x in enumerate(ds)]

        def resized(sh: Shape) -> Shape:
            if sh.is_tuple():
                return Shape.tuple_shape([resized(e) for e in sh.tuple_shapes()])
            if not sh.is_array():
                return sh
            return Shape.array_shape(sh.element_type(), dims(sh.dimensions()))

        for node in nodes.values():
            shape = resized(node.shape)
            if shape == node.shape:
                continue
            if _is_constant(node):
                arr = _value_of(node)
                if arr is None:
                    raise XlaSdkError("a constant whose value is not read here")
                if arr.ndim == 0 or arr.size == 1:
                    flat = arr.reshape(-1)[:1]
                elif arr.shape == node.shape.dimensions():
                    flat = np.ascontiguousarray(arr[tuple(slice(0, n) for n in shape.dimensions())]).reshape(-1)
                else:
                    raise XlaSdkError("a constant of another shape")
                node.attrs = {**node.attrs, "value": DenseElements(flat, shape)}
            node.shape = shape
        if self.cur.args is None:
            return None
        lead = () if self.cur.partitions is None else (slice(None),)  # the partitions' axis stays
        return [a[(*lead, *(slice(0, n) for n in dims(a.shape[len(lead):])))] for a in self.cur.args]

    def drop_attributes(self) -> bool:
        """Drop the metadata (every op's source location) at once, then one attribute of one
        instruction at a time (frontend attributes, shardings, backend configs, layouts, precision;
        window strides, dilations and padding: their defaults are the trivial window)."""

        if _HAS_METADATA.search(self.cur.text) and self._try("simplify: drop metadata", self._no_metadata):
            return True
        for ins in reversed(self.cur.instrs):
            for key in [k for k in ins.op.attrs if k in _DROPPABLE]:
                if self._try(f"simplify: drop attribute {key} of {ins.name}",
                             partial(self._rewritten, partial(self._drop_attribute, ins.name, key))):
                    return True
        return False

    def _no_metadata(self) -> tuple[XlaComputation, list[np.ndarray[Any, Any]] | None] | None:
        """The current module with no location anywhere: every op of ``main``, of its regions and of
        the functions it calls (so its HLO has no ``metadata=`` and no stack-frame tables, which
        XLA's converter builds from call-site locations). Read back from its StableHLO text with
        every location ``loc(unknown)`` (loaded in the worker, like a file); where that text does
        not load, only ``main``'s own ops lose their locations."""
        from ._jaxlib.mlir import text_without_locations
        from .program.computation import XlaComputation

        try:
            text = text_without_locations(self.cur.comp.compiler_ir())
            return XlaComputation.from_stablehlo(text), self.cur.args
        except XlaSdkError:
            return self._rewritten(self._no_locations)

    def _no_locations(self, b: XlaBuilder, nodes: dict[str, XlaOp]) -> list[np.ndarray[Any, Any]] | None:
        from ._metadata import Location

        for node in nodes.values():  # the copies of main's ops (its regions are shared with the original)
            node.loc = Location("loc(unknown)", {}, "")
        return self.cur.args

    def _drop_attribute(self, name: str, key: str, b: XlaBuilder, nodes: dict[str, XlaOp]
                        ) -> list[np.ndarray[Any, Any]] | None:
        node = nodes[name]
        node.attrs = {k: v for k, v in node.attrs.items() if k != key}
        return self.cur.args

    def splat_constants(self) -> bool:
        """Replace a constant's literal by its first element, broadcast (a splat); the largest first."""
        for ins in sorted(self.cur.instrs, key=lambda i: -i.shape.size() if i.shape.is_array() else 0):
            arr = _literal(ins)
            if arr is None or arr.size <= 1 or bool(np.all(arr == arr.reshape(-1)[0])):
                continue
            if self._try("simplify: constant -> splat",
                         partial(self._rewritten, partial(self._splat, ins.name, arr.reshape(-1)[:1].copy()))):
                return True
        return False

    def _splat(self, name: str, first: np.ndarray[Any, Any], b: XlaBuilder, nodes: dict[str, XlaOp]
               ) -> list[np.ndarray[Any, Any]] | None:
        from ._mlir_attrs import DenseElements

        node = nodes[name]
        node.attrs = {**node.attrs, "value": DenseElements(first, node.shape)}
        return self.cur.args

    def run(self) -> None:
        """The cutting strategies until none shrinks the module, then the simplifications; again while
        a simplification shrinks it."""
        cuts = (self.drop_outputs, self.cut_prefix, self.cut_suffix, self.to_parameters, self.to_constants)
        simplifications = (self.shrink_dimensions, self.drop_attributes, self.splat_constants)
        while True:
            progressed = True
            while progressed:
                progressed = False
                for strategy in cuts:
                    while strategy():
                        progressed = True
            simplified = False
            for strategy in simplifications:
                while strategy():
                    simplified = True
            if not simplified:
                return


# -- the direct printer of a loaded graph ----------------------------------------------------------
# Attributes that change nothing a printed HLO instruction computes (layouts XLA's dumps record).
_DROPPED = frozenset({"mhlo.frontend_attributes", "result_layout", "xla_shape"})


def _hlo_attributes(o: XlaOp) -> dict[str, Any]:
    """``o``'s attributes as the builder would hold them: each one read as a typed value
    (:meth:`XlaOp.attr <xlasdk.builder.XlaOp.attr>`), the defaults a module leaves out filled in
    as the wrappers store them; :class:`~xlasdk._hlo_emit.Unsupported` for a loaded attribute its
    op's row does not declare, or declares and no wrapper builds in that form."""
    from ._hlo_emit import Unsupported
    from ._mlir_attrs import SpelledAttr
    from .errors import GraphImportError
    from .ops.elementwise import COMPARE, default_compare_type
    from .ops.sort import SORT
    from .ops.window import REDUCE_WINDOW

    vals: dict[str, Any] = {}
    undeclared: list[str] = []
    for k, v in o.attrs.items():
        if k in _DROPPED:
            continue
        if isinstance(v, SpelledAttr) and o.opdef.attr_kind(k) is None:  # as spelled: no typed value to print
            undeclared.append(k)
            continue
        try:
            vals[k] = o.attr(k)
        except GraphImportError as e:
            raise Unsupported(str(e)) from None
        if isinstance(vals[k], SpelledAttr):  # a declared one in a form no wrapper builds
            undeclared.append(k)
    undeclared.sort()
    if undeclared:
        raise Unsupported(f"{o.opdef.name} attributes {undeclared}")
    if o.opdef is COMPARE and vals and "compare_type" not in vals:
        from .attrs import ComparisonType

        try:
            vals["compare_type"] = ComparisonType[default_compare_type(o.operands[0].shape.element_type())]
        except (KeyError, ValueError, XlaSdkError):
            raise Unsupported(f"compare of {o.operands[0].shape.element_type().name}") from None
    elif o.opdef is REDUCE_WINDOW and vals:
        for k in ("window_strides", "base_dilations", "window_dilations"):
            vals.setdefault(k, (1,) * o.operands[0].shape.rank())
    elif o.opdef is SORT and vals:
        vals.setdefault("dimension", -1)
        vals.setdefault("is_stable", False)
    return vals


class _Copier:
    """Copies of a graph's nodes (through regions) with typed attributes."""

    def __init__(self) -> None:
        self.memo: dict[int, XlaOp] = {}

    def node(self, o: XlaOp) -> XlaOp:
        from ._hlo_emit import Unsupported
        from .builder import XlaOp

        stack: list[tuple[XlaOp, bool]] = [(o, False)]
        while stack:
            n, ready = stack.pop()
            if id(n) in self.memo:
                continue
            deps = [*n.operands, *(c for r in n.regions for c in (*r.captures, *(r.bindings or ())))]
            if not ready:
                stack.append((n, True))
                stack.extend((d, False) for d in reversed(deps) if id(d) not in self.memo)
                continue
            if n.attrs and n.opdef.name == "parameter":
                raise Unsupported("parameter attributes")
            attrs = _hlo_attributes(n) if n.attrs else {}
            regions = tuple(self.region(r) for r in n.regions)
            self.memo[id(n)] = XlaOp(n.builder, n.opdef, tuple(self.memo[id(x)] for x in n.operands), n.shape, attrs,
                                     regions, n.loc, n.extra)
        return self.memo[id(o)]

    def region(self, r: Region) -> Region:
        from ._hlo_emit import Unsupported
        from .builder import Region

        if r.effects:
            raise Unsupported("a region with side effects")
        for p in r.params:
            self.memo.setdefault(id(p), p)
        return Region(r.params, tuple(self.node(x) for x in r.results),
                      None if r.bindings is None else tuple(self.node(x) for x in r.bindings),
                      captures=tuple(self.node(x) for x in r.captures), terminator=r.terminator)


def direct_hlo_text(comp: XlaComputation) -> str:
    """HLO text of ``comp``'s graph printed without XLA (:func:`xlasdk._hlo_emit.print_hlo_module`),
    default layouts, with metadata: the reducer's printer where XLA's StableHLO -> HLO converter
    fails or dies (it folds constants; jaxlib 0.10.2 dies with SIGFPE on a constant integer division
    by zero, cases.md C-03). Each node is copied with its attributes read as the typed values the
    builder makes (:func:`_hlo_attributes`). The module's other attributes (``mhlo.*`` module
    attributes) are not printed. Nothing here is trusted to be the same program as the converter
    would give beyond what the reducer's check of every candidate on the very text printed shows.

    Raises
    ------
    Unsupported
        ``comp`` holds an attribute its op's row does not declare (custom calls, gather,
        convolution, ``func.call``, shardings...), a parameter attribute, side effects, or is not a
        graph (a computation as loaded prints its own text).
    """
    from ._hlo_emit import Unsupported, print_hlo_module

    g = comp.graph()
    root, params = g.root, g.parameters
    if g.side_effects:
        raise Unsupported("side effects")
    c = _Copier()
    for p in params:
        if p.attrs:
            raise Unsupported("parameter attributes")
        c.memo[id(p)] = p
    try:
        return print_hlo_module(comp.name, list(params), c.node(root))
    except Unsupported:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:  # a value not as the rows expect
        raise Unsupported(f"{type(e).__name__}: {e}") from None


# -- what the reducer returns (here, below both xlasdk.reducer and xlasdk._reduce_against) -----
@dataclass(frozen=True)
class ReduceStep:
    """One accepted reduction: what made it and where the search stands."""

    step: int
    strategy: str
    instructions: int
    candidates: int
    compiles: int
    elapsed_s: float


@dataclass
class ReduceResult:
    """What :func:`reduce` found.

    Attributes
    ----------
    computation: the smallest module found that still satisfies the condition, loaded back from
        :attr:`hlo_text`; None for a module XLA's loader dies on (reduced as text: it never loads).
    hlo_text: its HLO text (what ``xlasdk reduce --output`` writes; XLA's tools read it).
    arguments: the arguments it shows the problem on (one array per parameter), or None when the
        condition needs none or none were known.
    condition: the condition, as given (``"crash"``, ``"diverge"``, ``"script: CMD"``...).
    instructions_before, instructions_after: ``len(comp.instructions())`` (parameters counted)
        of the module given and of the result, both as loaded back from their HLO text (a splat
        constant prints as a scalar constant and a broadcast). When the result would count more
        than the module given, the module given is the result. With ``against=GOOD``: the
        instructions of every computation of the HLO text (a loop body's, a fusion's, a called
        function's too).
    steps: accepted reductions; candidates: modules checked (cache hits not counted; with
        ``against``: the pairs of cuts compared);
    compiles: XLA compiles those checks made; cache_hits: candidates met again and not rechecked;
    unprintable: candidates skipped because XLA's StableHLO -> HLO converter failed or died on
        them (under jaxlib 0.10.2 it dies folding a constant integer division by zero) and
        xlasdk's direct printer (:func:`xlasdk._reduce_graph.direct_hlo_text`, which prints
        such candidates) has no form for one of their ops (a custom call, a ``func.call``...).
    invalid: candidates that are not valid modules (a simplification of shapes or attributes that
        XLA's loader or xlasdk's verification rejects): rejected, and counted here.
    wall_s: seconds spent; timed_out: the ``max_time`` budget ran out before the search ended
        (the result is then the smallest module found so far).
    history: one :class:`ReduceStep` per accepted reduction.
    good_computation, good_hlo_text: with ``against=GOOD``, the cut of GOOD that matches
        :attr:`computation` (the same parameters, fed :attr:`arguments`; its values are what the
        reduced module's should be); None otherwise.
    located: with ``against=GOOD``, where the ops bisection found the difference, down the regions
        (``while.6 > body (iteration 3) > add.12``; names inside a region are those of the region's
        program, each instruction's HLO name its ``op_name``); '' when the repro is the modules.
    """

    computation: XlaComputation | None
    hlo_text: str
    arguments: list[np.ndarray[Any, Any]] | None
    condition: str
    instructions_before: int
    instructions_after: int
    steps: int
    candidates: int
    compiles: int
    cache_hits: int
    unprintable: int
    invalid: int
    wall_s: float
    timed_out: bool
    history: list[ReduceStep] = field(default_factory=list, repr=False)
    good_computation: XlaComputation | None = field(default=None, repr=False)
    good_hlo_text: str | None = field(default=None, repr=False)
    located: str = ""

    def __str__(self) -> str:
        budget = " (time budget reached)" if self.timed_out else ""
        skipped = (f"; {self.unprintable} candidates skipped: neither XLA nor xlasdk could print them as HLO"
                   if self.unprintable else "")
        invalid = f"; {self.invalid} invalid candidates rejected" if self.invalid else ""
        located = f"; the difference from {self.condition.removeprefix('differs from ')} is at {self.located}" if (
            self.located) else ""
        return (f"reduced {self.instructions_before} -> {self.instructions_after} instructions in {self.steps} steps: "
                f"{self.candidates} candidates, {self.compiles} compiles, {self.wall_s:.1f} s"
                f"{budget}{skipped}{invalid}{located}")


def _random_arguments(comp: XlaComputation, seed: int) -> list[np.ndarray[Any, Any]]:
    """Seeded values for every parameter, inside the ranges its uses need (:func:`xlasdk.random_inputs`)."""
    from .inputs import random_inputs

    return random_inputs(comp, seed)


def _arguments(comp: XlaComputation, arguments: Sequence[Any]) -> list[np.ndarray[Any, Any]]:
    shapes = list(comp.program_shape().parameter_shapes())
    if len(arguments) != len(shapes):
        raise XlaSdkError(f"reduce: {comp.name!r} takes {len(shapes)} arguments, {len(arguments)} were given{where()}")
    out = []
    for i, (a, s) in enumerate(zip(arguments, shapes, strict=True)):
        arr = np.asarray(a)
        want = np.dtype(s.numpy_dtype())
        if arr.shape != tuple(s.dimensions()) or arr.dtype != want:
            raise XlaSdkError(f"reduce: argument {i} is {arr.dtype}{list(arr.shape)}, parameter {i} is {s}{where()}")
        out.append(arr)
    return out
