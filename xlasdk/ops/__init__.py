"""One function per XLA operation, named as in XLA's *operation semantics*.

Each op lives in the module of its family, beside its shape rule:
``sources`` (Parameter, Constant, Iota), ``elementwise`` (unary, binary, comparisons, Select,
Clamp, ConvertElementType), ``shaping`` (Broadcast, Reshape, Transpose, Slice, ConcatInDim...),
``linalg`` (Dot, DotGeneral...), ``conv`` (ConvGeneralDilated, Conv), ``reduce`` (Reduce...),
``control`` (Tuple, GetTupleElement, While, Conditional, Call).
"""

from __future__ import annotations

from ..attrs import TriangularSolveOptions_Transpose
from .collectives import (
    AllGather,
    AllReduce,
    AllToAll,
    CollectivePermute,
    CrossReplicaSum,
    PartitionId,
    ReduceScatter,
    ReplicaId,
)
from .control import Call, Conditional, GetTupleElement, Tuple, While
from .conv import Conv, ConvGeneralDilated
from .convert import BitcastConvertType, ReducePrecision
from .elementwise import (
    Abs,
    Acos,
    Acosh,
    Add,
    And,
    Asin,
    Asinh,
    Atan,
    Atan2,
    Atanh,
    BesselI1e,
    Cbrt,
    Ceil,
    Clamp,
    Clz,
    Compare,
    Complex,
    Conj,
    ConvertElementType,
    Cos,
    Cosh,
    Digamma,
    Div,
    Eq,
    Erf,
    Erfc,
    ErfInv,
    Exp,
    Expm1,
    Floor,
    Ge,
    Gt,
    Imag,
    IsFinite,
    Le,
    Lgamma,
    Log,
    Log1p,
    Logistic,
    Lt,
    Max,
    Min,
    Mul,
    Ne,
    Neg,
    NextAfter,
    Not,
    Or,
    Polygamma,
    PopulationCount,
    Pow,
    Real,
    Reciprocal,
    Rem,
    Round,
    RoundNearestEven,
    Rsqrt,
    Select,
    ShiftLeft,
    ShiftRightArithmetic,
    ShiftRightLogical,
    Sign,
    Sin,
    Sinh,
    Sqrt,
    Square,
    Sub,
    Tan,
    Tanh,
    Xor,
    Zeta,
)
from .fft import Fft
from .indexing import DynamicSlice, DynamicUpdateSlice, Gather, Scatter
from .linalg import QR, SVD, Cholesky, Dot, DotGeneral, Eigh, TriangularSolve
from .random import RngBitGenerator, RngNormal, RngUniform
from .reduce import Map, Reduce
from .shaping import (
    Broadcast,
    BroadcastInDim,
    Collapse,
    ConcatInDim,
    DynamicReshape,
    GetDimensionSize,
    Pad,
    RemoveDynamicDimension,
    Reshape,
    Rev,
    SetDimensionSize,
    Slice,
    SliceInDim,
    Transpose,
)
from .side_effects import (
    AfterAll,
    CreateToken,
    CustomCall,
    CustomCallApiVersion,
    CustomCallSchedule,
    CustomCallWithLayout,
    DebugPrint,
    HostCallback,
    InfeedWithToken,
    OptimizationBarrier,
    OutfeedWithToken,
)
from .sort import Sort, TopK
from .sources import Constant, ConstantLiteral, Iota, Parameter
from .special import BesselI0e, Igamma, Igammac, RegularizedIncompleteBeta
from .window import ReduceWindow, ReduceWindowWithGeneralPadding, SelectAndScatterWithGeneralPadding

__all__ = [
    "Abs", "Acos", "Acosh", "Add", "And", "Asin", "Asinh", "Atan", "Atan2", "Atanh", "BesselI1e",
    "Broadcast", "BroadcastInDim", "Call", "Cbrt", "Ceil", "Clamp", "Clz", "Compare", "Complex",
    "ConcatInDim", "Conditional",
    "Conj", "Constant", "ConstantLiteral", "Conv", "ConvGeneralDilated", "ConvertElementType", "Cos",
    "Cosh", "Digamma", "Div", "Dot", "DotGeneral", "Eq", "Erf", "Erfc", "ErfInv", "Exp", "Expm1",
    "Floor", "Ge", "GetTupleElement", "Gt", "Imag", "Iota", "IsFinite", "Le", "Lgamma", "Log", "Log1p",
    "Logistic", "Lt", "Max", "Min", "Mul", "Ne", "Neg", "NextAfter", "Not", "Or", "Parameter",
    "Polygamma", "PopulationCount", "Pow", "Real", "Reciprocal", "Reduce", "Rem", "Reshape", "Round",
    "RoundNearestEven", "Rsqrt", "Select", "ShiftLeft", "ShiftRightArithmetic", "ShiftRightLogical",
    "Sign", "Sin", "Sinh", "Slice", "Sort", "Sqrt", "Square", "Sub", "Tan", "Tanh", "TopK", "Transpose",
    "Tuple", "While", "Xor",
    "Zeta",
    "Map", "ReduceWindow", "ReduceWindowWithGeneralPadding", "SelectAndScatterWithGeneralPadding",
    "Collapse", "DynamicSlice", "DynamicUpdateSlice", "Gather", "Pad", "Rev", "Scatter", "SliceInDim",
    "AllGather", "AllReduce", "AllToAll", "CollectivePermute", "CrossReplicaSum", "PartitionId", "ReduceScatter",
    "ReplicaId",
    "AfterAll", "CreateToken", "CustomCall", "CustomCallApiVersion", "CustomCallSchedule", "CustomCallWithLayout",
    "InfeedWithToken", "OptimizationBarrier", "OutfeedWithToken", "HostCallback", "DebugPrint",
    "GetDimensionSize", "SetDimensionSize", "DynamicReshape", "RemoveDynamicDimension",
    "Fft", "Cholesky", "TriangularSolve", "TriangularSolveOptions_Transpose", "QR", "Eigh", "SVD",
    "RngBitGenerator", "RngUniform", "RngNormal", "BitcastConvertType", "ReducePrecision",
    "Igamma", "Igammac", "RegularizedIncompleteBeta", "BesselI0e",
]
