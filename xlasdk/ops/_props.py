"""What the tools know of each op (:class:`xlasdk._optable.OpProps`), declared on the rows.

One table, by row object, beside the families that define the rows: the reference evaluator's
error bounds, bisect, the reducer and input generation read a node's ``node.opdef.props`` and
never test opcode strings. Adding an op: declare its props here (a flag left out is False); see
"Adding an op" in CONTRIBUTING.md. Ops the table has no row for (``mhlo.copy``, ``func.call``...)
get theirs from :data:`xlasdk._optable.OPAQUE_PROPS`.
"""

from __future__ import annotations

from .._optable import STABLEHLO_GET_TUPLE_ELEMENT, STABLEHLO_TUPLE, declare
from .control import CASE, IF, WHILE
from .conv import CONVOLUTION
from .convert import BITCAST_CONVERT, CONVERT, REDUCE_PRECISION
from .elementwise import BINARY, CLAMP, COMPARE, SELECT, UNARY
from .fft import FFT
from .indexing import DYNAMIC_SLICE, DYNAMIC_UPDATE_SLICE, GATHER, SCATTER
from .linalg import DOT_GENERAL
from .reduce import REDUCE
from .shaping import BROADCAST_IN_DIM, CONCATENATE, PAD, RESHAPE, REVERSE, SLICE, TRANSPOSE
from .side_effects import OPTIMIZATION_BARRIER
from .sources import CONSTANT, IOTA
from .window import REDUCE_WINDOW

__all__: list[str] = []

_U = {k: u.opdef for k, u in UNARY.items()}
_B = {k: b.opdef for k, b in BINARY.items()}

declare(RESHAPE, TRANSPOSE, BROADCAST_IN_DIM, SLICE, CONVERT, REVERSE, _U["Neg"], DYNAMIC_SLICE, CONCATENATE,
        OPTIMIZATION_BARRIER, moves_data=True)
declare(PAD, GATHER, DYNAMIC_UPDATE_SLICE, SELECT, _U["Real"], _U["Imag"], _B["Complex"], linear=True)
declare(_B["Add"], _B["Sub"], REDUCE, DOT_GENERAL, CONVOLUTION, REDUCE_WINDOW, FFT, additive=True)
declare(REDUCE, REDUCE_WINDOW, sums=True)
declare(DOT_GENERAL, CONVOLUTION, bilinear=True)
declare(_B["Add"], _B["Sub"], _B["Mul"], _B["Div"], _U["Sqrt"], _B["Rem"], REDUCE_PRECISION, _U["Abs"], _B["Max"],
        _B["Min"], CLAMP, SELECT, _U["Floor"], _U["Ceil"], _U["RoundNearestEven"], _U["Round"], _U["Sign"], PAD,
        GATHER, DYNAMIC_UPDATE_SLICE, SCATTER, _U["Real"], _U["Imag"], _B["Complex"], CONSTANT, IOTA,
        BITCAST_CONVERT, _U["Square"], _B["NextAfter"], matches_reference=True)
declare(_B["Mul"], _B["Div"], _U["Sqrt"], _U["Abs"], _B["Rem"], _U["Square"], inexact_complex=True)
declare(WHILE, IF, CASE, control_flow=True)
declare(_B["And"], _B["Or"], _B["Xor"], _U["Not"], logical=True)
declare(RESHAPE, TRANSPOSE, BROADCAST_IN_DIM, SLICE, DYNAMIC_SLICE, DYNAMIC_UPDATE_SLICE, CONCATENATE, PAD, GATHER,
        REVERSE, IOTA, CONSTANT, OPTIMIZATION_BARRIER, SELECT, CLAMP, COMPARE, _B["And"], _B["Or"], _B["Xor"],
        _U["Not"], _B["ShiftLeft"], _B["ShiftRightArithmetic"], _B["ShiftRightLogical"], _U["PopulationCount"],
        _U["Clz"], BITCAST_CONVERT, CONVERT, REDUCE_PRECISION, _U["Neg"], _U["Abs"], _U["Sign"], _B["Max"],
        _B["Min"], _U["Floor"], _U["Ceil"], _U["RoundNearestEven"], _U["Round"], _U["IsFinite"], _U["Real"],
        _U["Imag"], _B["Complex"], STABLEHLO_GET_TUPLE_ELEMENT, STABLEHLO_TUPLE, _B["NextAfter"], bit_exact=True)
declare(_B["Add"], _B["Sub"], _B["Mul"], _U["Square"], _B["Rem"], correctly_rounded=True)
for row in (CONVERT, RESHAPE, BROADCAST_IN_DIM, TRANSPOSE, SLICE, REVERSE, DYNAMIC_SLICE, GATHER, PAD):
    declare(row, passes_operands=(0,))
declare(SELECT, passes_operands=(1, 2))
declare(CONCATENATE, OPTIMIZATION_BARRIER, passes_operands=None)
declare(_U["Log"], _U["Log1p"], _U["Sqrt"], _U["Rsqrt"], _B["Pow"], positive_operands=(0,))
declare(_B["Div"], _B["Rem"], positive_operands=(1,))
