"""Print a loaded (imported) graph as HLO text with xlasdk's direct printer (:mod:`xlasdk._hlo_emit`).

A computation made from a loaded module (``comp.extract``, ``comp.with_outputs``,
``XlaBuilder.from_computation``) keeps each op's attributes as the module spelled them
(:class:`~xlasdk.formats.graph_import.MlirAttr`), and its ``as_hlo_text()`` goes through XLA's
StableHLO -> HLO converter, which folds constants and can die doing so (jaxlib 0.10.2 dies with
SIGFPE on a constant integer division by zero, cases.md C-03). :func:`direct_hlo_text` prints
such a graph without XLA: each node is copied with its attributes read as the typed values the
builder makes (``array<i64: 0, 1>`` -> ``(0, 1)``, ``#stablehlo<comparison_direction LT>`` ->
``ComparisonDirection.LT``, ``dense<...>`` -> :class:`~xlasdk._mlir_attrs.DenseElements`...), and
the copy is printed by :func:`xlasdk._hlo_emit.print_hlo_module`.

Only the ops whose attributes are read here are printed (element-wise ops, compare, select,
clamp, conversions, constants, iota, broadcast_in_dim, reshape, transpose, slice, dynamic slices,
concatenate, pad, reverse, dot_general, reduce, reduce_window, sort, reduce_precision); anything
else (custom calls, gather, convolution, ``func.call``, shardings, an attribute not listed) raises
:class:`~xlasdk._hlo_emit.Unsupported`. The module's other attributes (``mhlo.*`` module
attributes) are not printed. The text is for the reducer (:mod:`xlasdk.reducer`), which checks
every candidate on the very text printed; nothing here is trusted to be the same program as the
converter would give beyond what that check shows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .._hlo_emit import Unsupported, print_hlo_module
from .._mlir_attrs import DenseElements, I64Elements
from ..attrs import ComparisonDirection, ComparisonType, DotDimensionNumbers, PrecisionConfig
from ..builder import Region, XlaOp
from ..types import PrimitiveType
from .graph_import import MlirAttr

if TYPE_CHECKING:
    from ..computation import XlaComputation

__all__ = ["direct_hlo_text"]

_P = PrimitiveType

# Attributes that hold only tuples of ints (``array<i64: ...>``) or ints, by op.
_INT_ATTRS: dict[str, frozenset[str]] = {
    "stablehlo.broadcast_in_dim": frozenset({"broadcast_dimensions"}),
    "stablehlo.transpose": frozenset({"permutation"}),
    "stablehlo.slice": frozenset({"start_indices", "limit_indices", "strides"}),
    "stablehlo.pad": frozenset({"edge_padding_low", "edge_padding_high", "interior_padding"}),
    "stablehlo.reverse": frozenset({"dimensions"}),
    "stablehlo.reduce": frozenset({"dimensions"}),
    "stablehlo.concatenate": frozenset({"dimension"}),
    "stablehlo.iota": frozenset({"iota_dimension"}),
    "stablehlo.dynamic_slice": frozenset({"slice_sizes"}),
    "stablehlo.reduce_precision": frozenset({"exponent_bits", "mantissa_bits"}),
    "stablehlo.reduce_window": frozenset({"window_dimensions", "window_strides", "base_dilations",
                                          "window_dilations"}),
    "stablehlo.sort": frozenset({"dimension"}),
}
# Attributes that change nothing a printed HLO instruction computes (layouts XLA's dumps record).
_DROPPED = frozenset({"mhlo.frontend_attributes", "result_layout", "xla_shape"})


def _ints(v: Any) -> Any:
    if isinstance(v, (bool, np.bool_)):
        raise Unsupported("a flag where ints were expected")
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, tuple):
        return tuple(_ints(x) for x in v)
    raise Unsupported(f"attribute value {type(v).__name__}")


def _default_compare(et: PrimitiveType) -> ComparisonType:
    """XLA's default comparison type of an element type (what a compare without ``type=`` means)."""
    if et in (_P.F16, _P.BF16, _P.F32, _P.F64, _P.C64, _P.C128):
        return ComparisonType.FLOAT
    if et in (_P.S2, _P.S4, _P.S8, _P.S16, _P.S32, _P.S64):
        return ComparisonType.SIGNED
    if et in (_P.PRED, _P.U2, _P.U4, _P.U8, _P.U16, _P.U32, _P.U64):
        return ComparisonType.UNSIGNED
    raise Unsupported(f"compare of {et.name}")


def _constant(o: XlaOp, vals: dict[str, Any]) -> dict[str, Any]:
    if set(vals) != {"value"}:
        raise Unsupported("constant attributes")
    arr = np.asarray(vals["value"])
    size = o.shape.size()
    dtype = np.dtype(o.shape.numpy_dtype())
    if arr.dtype != dtype or arr.size not in (1, size):
        raise Unsupported(f"constant of {arr.dtype}")
    return {"value": DenseElements(np.ascontiguousarray(arr).reshape(-1), o.shape)}


def _compare(o: XlaOp, vals: dict[str, Any]) -> dict[str, Any]:
    if set(vals) - {"comparison_direction", "compare_type"}:
        raise Unsupported("compare attributes")
    direction = ComparisonDirection[str(vals["comparison_direction"])]
    ctype = vals.get("compare_type")
    kind = ComparisonType[str(ctype)] if ctype is not None else _default_compare(o.operands[0].shape.element_type())
    return {"comparison_direction": direction, "compare_type": kind}


def _dot_general(o: XlaOp, vals: dict[str, Any]) -> dict[str, Any]:
    if set(vals) - {"dot_dimension_numbers", "precision_config"}:
        raise Unsupported("dot_general attributes")
    d = vals["dot_dimension_numbers"]
    if not isinstance(d, dict):
        raise Unsupported("dot_dimension_numbers")
    out: dict[str, Any] = {"dot_dimension_numbers": DotDimensionNumbers(
        lhs_contracting_dimensions=list(d["lhs_contracting_dimensions"]),
        rhs_contracting_dimensions=list(d["rhs_contracting_dimensions"]),
        lhs_batch_dimensions=list(d["lhs_batching_dimensions"]),
        rhs_batch_dimensions=list(d["rhs_batching_dimensions"]),
    )}
    if "precision_config" in vals:
        out["precision_config"] = PrecisionConfig([str(p) for p in vals["precision_config"]])
    return out


def _reduce_window(o: XlaOp, vals: dict[str, Any]) -> dict[str, Any]:
    rank = o.operands[0].shape.rank()
    out = {k: _ints(v) for k, v in vals.items() if k != "padding"}
    if set(out) - _INT_ATTRS["stablehlo.reduce_window"]:
        raise Unsupported("reduce_window attributes")
    for k in ("window_strides", "base_dilations", "window_dilations"):
        out.setdefault(k, (1,) * rank)
    if "padding" in vals:
        out["padding"] = I64Elements(np.asarray(vals["padding"]).reshape(rank, 2))
    return out


def _sort(o: XlaOp, vals: dict[str, Any]) -> dict[str, Any]:
    out = {"dimension": _ints(vals.get("dimension", -1)), "is_stable": bool(vals.get("is_stable", False))}
    if set(vals) - {"dimension", "is_stable"}:
        raise Unsupported("sort attributes")
    return out


_SPECIAL: dict[str, Callable[[XlaOp, dict[str, Any]], dict[str, Any]]] = {
    "stablehlo.constant": _constant,
    "stablehlo.compare": _compare,
    "stablehlo.dot_general": _dot_general,
    "stablehlo.reduce_window": _reduce_window,
    "stablehlo.sort": _sort,
}


def typed_attributes(o: XlaOp) -> dict[str, Any]:
    """``o``'s attributes as the builder would hold them; :class:`Unsupported` for what is not read here."""
    vals = {k: (v.value if isinstance(v, MlirAttr) else v) for k, v in o.attrs.items() if k not in _DROPPED}
    if not vals:
        return {}
    name = o.opdef.name
    special = _SPECIAL.get(name)
    if special is not None:
        return special(o, vals)
    allowed = _INT_ATTRS.get(name)
    if allowed is None or set(vals) - allowed:
        raise Unsupported(f"{name} attributes {sorted(vals)}")
    return {k: _ints(v) for k, v in vals.items()}


class _Copier:
    """Copies of a graph's nodes (through regions) with typed attributes."""

    def __init__(self) -> None:
        self.memo: dict[int, XlaOp] = {}

    def node(self, o: XlaOp) -> XlaOp:
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
            attrs = typed_attributes(n) if n.attrs else {}
            regions = tuple(self.region(r) for r in n.regions)
            self.memo[id(n)] = XlaOp(n.builder, n.opdef, tuple(self.memo[id(x)] for x in n.operands), n.shape, attrs,
                                     regions, n.loc, n.extra)
        return self.memo[id(o)]

    def region(self, r: Region) -> Region:
        if r.effects:
            raise Unsupported("a region with side effects")
        for p in r.params:
            self.memo.setdefault(id(p), p)
        return Region(r.params, tuple(self.node(x) for x in r.results),
                      None if r.bindings is None else tuple(self.node(x) for x in r.bindings),
                      captures=tuple(self.node(x) for x in r.captures), terminator=r.terminator)


def direct_hlo_text(comp: XlaComputation) -> str:
    """HLO text of ``comp``'s graph printed without XLA (see the module docstring), default layouts,
    with metadata.

    Raises
    ------
    Unsupported
        ``comp`` holds an op, attribute or parameter attribute this printer does not read, side
        effects, or is not a graph (a computation as loaded prints its own text).
    """
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
