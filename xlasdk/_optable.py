"""The op table: one :class:`OpDef` per opcode of the graph.

Every node of an xlasdk graph (:class:`xlasdk.builder.XlaOp`) points at its ``OpDef``: the
StableHLO/CHLO op it emits, the HLO instruction the direct HLO printer writes for it and how
(``hlo_attrs``, ``hlo_form``), and its flags (side effects, whether its value is a function of
its operands, tuple operands passed element by element). Op families define their rows beside
their wrappers and shape rules with :func:`define` (``ADD = define("stablehlo.add", hlo="add")``)
and build nodes with :meth:`XlaBuilder.add_op <xlasdk.builder.XlaBuilder.add_op>`; the emitters
(:mod:`xlasdk._emit`, :mod:`xlasdk._hlo_emit`) read only the row, never an opcode string.

An opcode is named once, in its ``define`` call: defining one twice raises at import, and
``tests/test_optable.py`` checks every row's name against the StableHLO and CHLO dialects.

This module also holds the rows the graph itself needs (``parameter``, ``tuple``,
``get_tuple_element``, ``call``) and the StableHLO ops the emitters write on their own
(``stablehlo.tuple``, ``stablehlo.get_tuple_element``, ``stablehlo.return``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .builder import XlaOp

__all__ = [
    "OpDef", "HloForm", "HloUnsupported", "define", "OPS",
    "PARAMETER", "TUPLE", "GET_TUPLE_ELEMENT", "CALL", "STABLEHLO_TUPLE", "STABLEHLO_GET_TUPLE_ELEMENT", "RETURN",
    "SET_DIMENSION_SIZE",
    "braces", "hlo_window", "NOT_DEFINED",
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

    def __repr__(self) -> str:
        return f"OpDef({self.name})"


#: Every row, by name.
OPS: dict[str, OpDef] = {}

_NAME = re.compile(r"(?:stablehlo|chlo)\.[a-z][a-z0-9_]*|parameter|tuple|get_tuple_element|call")


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
) -> OpDef:
    """Register and return the row of ``name``.

    ``hlo_form`` defaults to PLAIN when ``hlo`` is given and NONE otherwise.

    Raises
    ------
    ValueError: ``name`` is not a StableHLO/CHLO op name, or it is defined already (at import
        of the family module that defines it twice).
    """
    if not _NAME.fullmatch(name):
        raise ValueError(f"op table: {name!r} is not a StableHLO or CHLO op name")
    if name in OPS:
        raise ValueError(f"op table: {name!r} is defined twice")
    form = hlo_form if hlo_form is not None else (HloForm.PLAIN if hlo else HloForm.NONE)
    plain = not variadic and form is not HloForm.GRAPH
    d = OpDef(name, hlo, form, hlo_attrs, side_effect, constant, variadic, tuple_result, plain)
    OPS[name] = d
    return d


# -- the graph's own rows and the ops the emitters write themselves ------------------------------
PARAMETER = define("parameter", constant=False, hlo_form=HloForm.GRAPH)
TUPLE = define("tuple", hlo_form=HloForm.GRAPH)
GET_TUPLE_ELEMENT = define("get_tuple_element", hlo_form=HloForm.GRAPH)
CALL = define("call", hlo_form=HloForm.GRAPH)
STABLEHLO_TUPLE = define("stablehlo.tuple", tuple_result=True)
STABLEHLO_GET_TUPLE_ELEMENT = define("stablehlo.get_tuple_element")
RETURN = define("stablehlo.return")
SET_DIMENSION_SIZE = define("stablehlo.set_dimension_size")  # emit_module's padded arguments too


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
