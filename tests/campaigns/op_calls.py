"""Op-call campaign: every public op of ``xlasdk.ops`` called with hostile arguments.

Each call starts from a valid call of one op (:data:`TEMPLATES`, one per public op; the
campaign refuses to run if an op has none) and mutates one or two of its arguments: the whole
argument, one element of a sequence (nested too), or an optional keyword argument the valid
call left out, replaced by a value from :data:`HOSTILE` (wrong Python types, None, bools,
floats, NaN, numpy scalars, negative and huge ints such as 2**31, 2**62 and 2**63, ints where
sequences go and sequences where ints go, nested and ragged lists, strings, shapes whose element
count overflows int64, ops of the wrong kind or of another builder, ...). Call ``i`` of seed
``s`` is a pure function of ``(s, i)`` (:func:`make_call`), so any call can be rebuilt from its
number alone.

Every call is classified:

* ``error``: it raised an :class:`xlasdk.XlaSdkError` (what the op must do with a bad argument);
* ``built``: it returned; its computation is then built, compiled and run on ``cpu:0`` with
  zero inputs (``ran``), or only compiled when its inputs or outputs would be large, hold
  tokens or tuples, or it uses infeed/outfeed (``compiled``). An xlasdk error raised while
  building, compiling or running is a ``late`` error (the op accepted something XLA refused);
* ``raw``: anything else escaped (IndexError, TypeError, OverflowError, RecursionError,
  MemoryError...): a failure, reported with the call that raised it;
* ``death``: the process running it died (an abort inside XLA, a crash, a kill), or ``hang``:
  it made no progress for :data:`CALL_TIMEOUT_S` seconds: failures, reported with the call.

:func:`run_campaign` runs the calls in batches, each batch in a child ``python -c`` process
(with a 6 GiB address-space limit, so that an unbounded allocation ends as a MemoryError
instead of taking the machine down). A child writes one line before and one line after each
call; when it dies, the call it had begun is reported as the killer and a new child carries on
from the next call. ``python tests/campaigns/op_calls.py --calls N --seed S`` runs a campaign
from the command line and prints its summary (``--only OP`` restricts it to some ops,
``--show I`` prints call ``I`` without running it).
"""

from __future__ import annotations

import argparse
import collections
import inspect
import json
import math
import os
import queue
import random
import re
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import xlasdk as xs
from xlasdk import ops

HERE = os.path.dirname(os.path.abspath(__file__))
CALL_TIMEOUT_S = float(os.environ.get("XLASDK_CAMPAIGN_TIMEOUT_S", "120"))  # no progress this long: a hang
#: a child's start-up (its imports, before its first call) may take this long, whatever CALL_TIMEOUT_S is
START_TIMEOUT_S = 120.0
MEMORY_LIMIT = 6 << 30  # address-space limit of each child, bytes
RUN_LIMIT_BYTES = 16 << 20  # computations whose inputs + outputs exceed this are compiled, not run

F32, F16, F64, S32, S8, U64, C64, PRED = (
    np.float32, np.float16, np.float64, np.int32, np.int8, np.uint64, np.complex64, np.bool_,
)


# -- valid calls ---------------------------------------------------------------------------------


class Ctx:
    """The builder of one call and the parameters its valid call made."""

    def __init__(self, name: str, rng: random.Random) -> None:
        self.b = xs.XlaBuilder(name)
        self.rng = rng
        self.n = 0

    def p(self, dtype: Any, dims: Sequence[int]) -> xs.XlaOp:
        """A new parameter of ``dtype[dims]``."""
        op = ops.Parameter(self.b, self.n, xs.Shape.array_shape(dtype, tuple(dims)), f"p{self.n}")
        self.n += 1
        return op

    def c(self, value: Any) -> xs.XlaOp:
        return ops.Constant(self.b, value)


Call = tuple[list[Any], dict[str, Any]]
Template = Callable[[Ctx], Call]


def _unary(dtype: Any) -> Template:
    return lambda c: ([c.p(dtype, (2, 3))], {})


def _binary(dtype: Any) -> Template:
    def make(c: Ctx) -> Call:
        r = c.rng.random()
        if r < 0.5:
            return [c.p(dtype, (2, 3)), c.p(dtype, (2, 3))], {}
        if r < 0.8:
            return [c.p(dtype, (2, 3)), c.p(dtype, (3,))], {"broadcast_dimensions": [1]}
        return [c.p(dtype, (2, 3)), c.p(dtype, (2, 1))], {}

    return make


def _first_dtype(allowed: Any) -> Any:
    for dt in (F32, S32, PRED, C64, np.uint32):
        if xs.dtype_to_etype(dt) in allowed:
            return dt
    raise AssertionError(allowed)


def _gather_dn() -> xs.GatherDimensionNumbers:
    return xs.GatherDimensionNumbers(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1)


def _scatter_dn() -> xs.ScatterDimensionNumbers:
    return xs.ScatterDimensionNumbers(
        update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1
    )


def _while(c: Ctx) -> Call:
    init = ops.Tuple(c.b, [c.c(np.int32(0)), c.p(F32, (2,))])
    return [lambda i, x: ops.Lt(i, ops.Constant(i.builder, np.int32(3))), lambda i, x: (i + 1, x * 2.0), init], {}


def _conditional(c: Ctx) -> Call:
    if c.rng.random() < 0.5:
        return [c.p(PRED, ()), c.p(F32, (2,)), lambda v: v + 1.0, c.p(F32, (2,)), lambda v: v - 1.0], {}
    return [c.p(S32, ()), [lambda v: v + 1.0, lambda v: v * 2.0], [c.p(F32, (2,)), c.p(F32, (2,))]], {}


def _templates() -> dict[str, Template]:
    from xlasdk.ops import elementwise as ew

    t: dict[str, Template] = {}
    for name, u in ew.UNARY.items():
        t[name] = _unary(_first_dtype(u.allowed))
    t["Reciprocal"] = _unary(F32)
    for name, bo in ew.BINARY.items():
        t[name] = _binary(_first_dtype(bo.allowed))
    for name in ("Eq", "Ne", "Lt", "Le", "Gt", "Ge"):
        t[name] = _binary(F32)
    t.update(
        {
            "Compare": lambda c: ([c.p(F32, (2, 3)), c.p(F32, (2, 3)), "LT"], {"compare_type": "FLOAT"}),
            "Select": lambda c: ([c.p(PRED, (2, 3)), c.p(F32, (2, 3)), c.p(F32, (2, 3))], {}),
            "Clamp": lambda c: ([0.0, c.p(F32, (2, 3)), 1.0], {}),
            "Fma": lambda c: ([c.p(F32, (2, 3)), c.p(F32, (2, 3)), 1.0], {}),
            "ConvertElementType": lambda c: ([c.p(F32, (2, 3)), np.int32], {}),
            "BitcastConvertType": lambda c: ([c.p(F32, (2, 3)), np.int32], {}),
            "ReducePrecision": lambda c: ([c.p(F32, (2, 3)), 5, 10], {}),
            "Broadcast": lambda c: ([c.p(F32, (2,)), [3]], {}),
            "BroadcastInDim": lambda c: ([c.p(F32, (3,)), [2, 3], [1]], {}),
            "Reshape": lambda c: (
                [c.p(F32, (2, 3)), [3, 2]] if c.rng.random() < 0.5 else [c.p(F32, (2, 3)), [1, 0], [6]], {}
            ),
            "Transpose": lambda c: ([c.p(F32, (2, 3)), [1, 0]], {}),
            "Rev": lambda c: ([c.p(F32, (2, 3)), [0]], {}),
            "Slice": lambda c: ([c.p(F32, (4, 6)), [0, 1], [4, 5], [1, 2]], {}),
            "SliceInDim": lambda c: ([c.p(F32, (4, 6)), 1, 3, 1, 0], {}),
            "DynamicSlice": lambda c: ([c.p(F32, (4, 6)), [c.p(S32, ()), 1], [2, 2]], {}),
            "DynamicUpdateSlice": lambda c: ([c.p(F32, (4, 6)), c.p(F32, (2, 2)), [1, c.p(S32, ())]], {}),
            "ConcatInDim": lambda c: ([c.b, [c.p(F32, (2, 3)), c.p(F32, (4, 3))], 0], {}),
            "Pad": lambda c: ([c.p(F32, (2, 3)), c.c(np.float32(0)), [(1, 1, 0), (0, 2, 1)]], {}),
            "Collapse": lambda c: ([c.p(F32, (2, 3, 4)), [1, 2]], {}),
            "Iota": lambda c: (
                [c.b, S32, 5] if c.rng.random() < 0.5 else [c.b, xs.Shape.array_shape(S32, (2, 3)), 1], {}
            ),
            "Parameter": lambda c: ([c.b, c.n, xs.Shape.array_shape(F32, (2,))], {"name": "x"}),
            "Constant": lambda c: ([c.b, np.arange(6, dtype=F32).reshape(2, 3)], {}),
            "ConstantLiteral": lambda c: ([c.b, (1.5, np.int32(2))], {}),
            "Dot": lambda c: ([c.p(F32, (2, 3)), c.p(F32, (3, 4))], {"preferred_element_type": F32}),
            "DotGeneral": lambda c: (
                [c.p(F32, (2, 3, 4)), c.p(F32, (2, 4, 5)), (([2], [1]), ([0], [0]))],
                {"precision_config": xs.PrecisionConfig(["HIGHEST", "DEFAULT"])},
            ),
            "ConvGeneralDilated": lambda c: (
                [c.p(F32, (1, 2, 5, 5)), c.p(F32, (3, 2, 3, 3)), [1, 1], [(1, 1), (1, 1)], [1, 1], [1, 1],
                 ("NCHW", "OIHW", "NCHW")],
                {},
            ),
            "Conv": lambda c: (
                [c.p(F32, (1, 2, 5, 5)), c.p(F32, (4, 1, 3, 3)), [1, 1], "SAME"], {"feature_group_count": 2}
            ),
            "Reduce": lambda c: ([c.b, c.p(F32, (2, 3)), c.c(np.float32(0)), ops.Add, [1]], {}),
            "BatchNormTraining": lambda c: ([c.p(F32, (2, 3)), c.p(F32, (3,)), c.p(F32, (3,)), 1e-3, 1], {}),
            "BatchNormInference": lambda c: (
                [c.p(F32, (2, 3)), c.p(F32, (3,)), c.p(F32, (3,)), c.p(F32, (3,)), c.p(F32, (3,)), 1e-3, 1], {}
            ),
            "BatchNormGrad": lambda c: (
                [c.p(F32, (2, 3)), c.p(F32, (3,)), c.p(F32, (3,)), c.p(F32, (3,)), c.p(F32, (2, 3)), 1e-3, 1], {}
            ),
            "ReduceWindow": lambda c: ([c.p(F32, (4, 4)), c.c(np.float32(0)), ops.Add, [2, 2], [1, 1], "VALID"], {}),
            "ReduceWindowWithGeneralPadding": lambda c: (
                [c.p(F32, (4, 4)), c.c(np.float32(0)), ops.Max, [2, 2], [1, 1], [1, 1], [1, 1], [(0, 0), (1, 0)]], {}
            ),
            "SelectAndScatterWithGeneralPadding": lambda c: (
                [c.p(F32, (4, 4)), ops.Ge, [2, 2], [2, 2], [(0, 0), (0, 0)], c.p(F32, (2, 2)),
                 c.c(np.float32(0)), ops.Add],
                {},
            ),
            "Map": lambda c: ([c.b, [c.p(F32, (2, 3)), c.p(F32, (2, 3))], ops.Mul, [0, 1]], {}),
            "Gather": lambda c: ([c.p(F32, (5, 3)), c.p(S32, (2, 1)), _gather_dn(), [1, 3]], {}),
            "Scatter": lambda c: (
                [c.p(F32, (5, 3)), c.p(S32, (2, 1)), c.p(F32, (2, 3)), ops.Add, _scatter_dn()], {}
            ),
            "Sort": lambda c: ([c.b, [c.p(F32, (2, 3)), c.p(S32, (2, 3))]], {"dimension": -1, "is_stable": True}),
            "TopK": lambda c: ([c.p(F32, (2, 5)), 2], {"largest": True}),
            "While": _while,
            "Conditional": _conditional,
            "Call": lambda c: ([c.b, lambda a, d: a + d, [c.p(F32, (2,)), c.p(F32, (2,))]], {}),
            "Tuple": lambda c: ([c.b, [c.p(F32, (2,)), c.p(S32, ())]], {}),
            "GetTupleElement": lambda c: ([ops.Tuple(c.b, [c.p(F32, (2,)), c.p(S32, ())]), 1], {}),
            "RngBitGenerator": lambda c: (["PHILOX", c.p(U64, (2,)), xs.Shape.array_shape(np.uint32, (2, 3))], {}),
            "RngUniform": lambda c: ([c.c(np.float32(0)), c.c(np.float32(1)), xs.Shape.array_shape(F32, (2, 3))], {}),
            "RngNormal": lambda c: ([c.c(np.float32(0)), c.c(np.float32(1)), xs.Shape.array_shape(F32, (2, 3))], {}),
            "Fft": lambda c: (
                [c.p(C64, (4, 8)), xs.FftType.FFT, [8]] if c.rng.random() < 0.5 else [c.p(F32, (4, 8)), "RFFT", [4, 8]],
                {},
            ),
            "Cholesky": lambda c: ([c.p(F32, (3, 3))], {"lower": True}),
            "TriangularSolve": lambda c: (
                [c.p(F32, (3, 3)), c.p(F32, (3, 2))], {"left_side": True, "lower": True, "transpose_a": False}
            ),
            "QR": lambda c: ([c.p(F32, (4, 3))], {"full_matrices": True}),
            "Eigh": lambda c: ([c.p(F32, (3, 3))], {"max_iter": 10}),
            "SVD": lambda c: ([c.p(F32, (3, 2))], {"max_iter": 10}),
            "AllReduce": lambda c: ([c.p(F32, (2, 3)), ops.Add], {"replica_groups": [[0]]}),
            "AllGather": lambda c: ([c.p(F32, (2, 3)), 0, 1], {"replica_groups": [[0]]}),
            "ReduceScatter": lambda c: ([c.p(F32, (2, 3)), ops.Add, 0, 1], {}),
            "AllToAll": lambda c: ([c.p(F32, (2, 3)), 0, 1, 1], {}),
            "CollectivePermute": lambda c: ([c.p(F32, (2, 3)), [(0, 0)]], {}),
            "CrossReplicaSum": lambda c: ([c.p(F32, (2, 3))], {"replica_groups": [[0]]}),
            "ReplicaId": lambda c: ([c.b], {}),
            "PartitionId": lambda c: ([c.b], {}),
            "CreateToken": lambda c: ([c.b], {}),
            "AfterAll": lambda c: ([c.b, [ops.CreateToken(c.b), ops.CreateToken(c.b)]], {}),
            "OptimizationBarrier": lambda c: ([ops.Tuple(c.b, [c.p(F32, (2,)), c.p(S32, ())])], {}),
            "CustomCall": lambda c: (
                [c.b, "Sharding", [c.p(F32, (2, 3))], xs.Shape.array_shape(F32, (2, 3))], {"opaque": b""}
            ),
            "CustomCallWithLayout": lambda c: (
                [c.b, "Sharding", [c.p(F32, (2, 3))], xs.Shape.array_shape(F32, (2, 3)),
                 [xs.Shape.array_shape(F32, (2, 3), (1, 0))]],
                {},
            ),
            "InfeedWithToken": lambda c: ([ops.CreateToken(c.b), xs.Shape.array_shape(F32, (2,))], {"config": ""}),
            "OutfeedWithToken": lambda c: (
                [c.p(F32, (2,)), ops.CreateToken(c.b), xs.Shape.array_shape(F32, (2,))], {"outfeed_config": ""}
            ),
            "HostCallback": lambda c: (
                [lambda a: a * 2, [c.p(F32, (2, 3))], xs.Shape.array_shape(F32, (2, 3))], {"has_side_effect": False}
            ),
            "DebugPrint": lambda c: (["x={} y={:d}", c.p(F32, (2,)), c.p(S32, ())], {}),
            "GetDimensionSize": lambda c: ([c.p(F32, (2, 3)), 1], {}),
            "SetDimensionSize": lambda c: ([c.p(F32, (4, 3)), c.p(S32, ()), 0], {}),
            "DynamicReshape": lambda c: ([c.p(F32, (2, 3)), [c.p(S32, ()), 3], [2, 3], [True, False]], {}),
            "RemoveDynamicDimension": lambda c: ([ops.SetDimensionSize(c.p(F32, (4, 3)), 2, 0), 0], {}),
            "LU": lambda c: ([c.p(F32, (3, 3))], {}),
            "QrDecomposition": lambda c: ([c.p(F32, (4, 3))], {}),
            "ProductOfElementaryHouseholderReflectors": lambda c: ([c.p(F32, (4, 3)), c.p(F32, (3,))], {}),
            "ApproxTopK": lambda c: (
                [c.b, [c.p(F32, (2, 16))], [c.c(np.float32(-np.inf))], 2, 1, ops.Gt], {"recall_target": 0.9}
            ),
            "ApproxTopKFallback": lambda c: (
                [c.b, [c.p(F32, (2, 16))], [c.c(np.float32(-np.inf))], 2, 1, ops.Gt], {"recall_target": 0.9}
            ),
            "ApproxTopKReductionOutputSize": lambda c: ([16, 2, 2, 0.9], {"aggregate_to_topk": True}),
            "CustomCallWithAliasing": lambda c: (
                [c.b, "Sharding", [c.p(F32, (2, 3))], xs.Shape.array_shape(F32, (2, 3)),
                 [xs.Shape.array_shape(F32, (2, 3), (1, 0))]],
                {},
            ),
            "IgammaGradA": lambda c: ([c.p(F32, (2,)), c.p(F32, (2,))], {}),
            "RandomGammaGrad": lambda c: ([c.p(F32, (2,)), c.p(F32, (2,))], {}),
            "SendToHost": lambda c: ([c.p(F32, (2,)), ops.CreateToken(c.b), xs.Shape.array_shape(F32, (2,)), 1], {}),
            "RecvFromHost": lambda c: ([ops.CreateToken(c.b), xs.Shape.array_shape(F32, (2,)), 1], {}),
            "Igamma": lambda c: ([c.p(F32, (2,)), c.p(F32, (2,))], {}),
            "Igammac": lambda c: ([c.p(F32, (2,)), 2.0], {}),
            "RegularizedIncompleteBeta": lambda c: ([c.p(F32, (2,)), c.p(F32, (2,)), c.p(F32, (2,))], {}),
            "BesselI0e": lambda c: ([c.p(F32, (2,))], {}),
        }
    )
    return t


TEMPLATES: dict[str, Template] = _templates()

#: Ops that raise an xlasdk error whatever they are given (not available on this jaxlib): their
#: valid call is an error too.
ALWAYS_RAISE = frozenset({"SendToHost", "RecvFromHost"})


def public_ops() -> list[str]:
    """Every public op function of ``xlasdk.ops`` (its ``__all__`` without the enum classes)."""
    return [n for n in ops.__all__ if callable(getattr(ops, n)) and not inspect.isclass(getattr(ops, n))]


def missing_templates() -> list[str]:
    return [n for n in public_ops() if n not in TEMPLATES]


# -- hostile values ------------------------------------------------------------------------------


def _deep(n: int) -> list[Any]:
    v: list[Any] = [0]
    for _ in range(n):
        v = [v]
    return v


def _cycle() -> list[Any]:
    v: list[Any] = [1]
    v.append(v)
    return v


def _other_builder_op() -> xs.XlaOp:
    return ops.Parameter(xs.XlaBuilder("other"), 0, xs.Shape.array_shape(F32, (2, 3)))


def _reducer() -> xs.XlaComputation:
    b = xs.XlaBuilder("reducer")
    x = ops.Parameter(b, 0, xs.Shape.scalar_shape(F32))
    y = ops.Parameter(b, 1, xs.Shape.scalar_shape(F32))
    return b.build(ops.Add(x, y))


def _edited(obj: Any, field_name: str, value: Any) -> Callable[[Ctx], Any]:
    """A proto-style attribute object with one field replaced after construction."""

    def make(c: Ctx) -> Any:
        o = obj()
        target = o.dimensions[0] if field_name.startswith("dimensions[0].") else o
        setattr(target, field_name.rsplit(".", 1)[-1], value() if callable(value) else value)
        return o

    return make


def _big_shape(dtype: Any, dims: tuple[int, ...]) -> Callable[[Ctx], Any]:
    return lambda c: xs.Shape.array_shape(dtype, dims)


def _op(dtype: Any, dims: tuple[int, ...]) -> Callable[[Ctx], Any]:
    return lambda c: c.p(dtype, dims)


# (label, factory): factories run inside the call's try block, so a value that cannot even be
# made (a Shape over the size limit) counts as an error of the call.
def _const(v: Any) -> Callable[[Ctx], Any]:
    return lambda c: v


HOSTILE: list[tuple[str, Callable[[Ctx], Any]]] = [
    (repr(v), _const(v))
    for v in [
        None, True, False, 0, 1, -1, 2, 3, -7, 2**31 - 1, 2**31, -(2**31) - 1, 2**32, 2**62, 2**63 - 1, 2**63,
        -(2**63), -(2**63) - 1, 2**64, 10**40, 1.5, 0.0, -0.0, math.nan, math.inf, -math.inf, 1e300, 2.0,
        complex(1, 2), "", "a", "SAME", "f32", "LT", "0", b"", b"\xff\xfe", bytearray(b"x"),
        [], (), [0], [1], [-1], [0, 0], [1, 0], [2**31], [2**62], [2**63], [2**62, 2**62], [2**31, 2**31, 2**31],
        [1.5], [math.nan], [None], ["a"], [[0]], [[1, 2], [3]], [[]], [0, [1]], [True], [False, True], [b"x"],
        [(0, 0)], [(1, 2, 3, 4)], [(-1, -1)], [(2**62, 2**62)], [(0, 2**63)], [[0, 1], [1, 0]], [[2**62]],
        [[0], [1]], [(0, 1), (1, 0)], ((0,), (1,)), [[-1]], {}, {"a": 1}, {1: 2}, {0, 1}, frozenset(),
        range(3), range(0), slice(1), Ellipsis, NotImplemented, object(), print, int, float, str, type,
        np.int64(1), np.int32(2), np.int8(-1), np.uint8(255), np.uint64(2**64 - 1), np.int64(2**62),
        np.int64(-(2**63)), np.float32(1.0), np.float64(math.nan), np.float16(2), np.bool_(True), np.bool_(False),
        np.complex64(1j), np.array(2), np.array([1, 2]), np.array([[0]]), np.zeros((0,)), np.array(["a"]),
        np.array([1.5]), np.array([2**62, 2**62]), np.array(None, dtype=object), np.float32, np.int32, np.uint64,
        np.dtype("float32"), np.dtype(object), np.dtype("U3"), "bfloat16", "float128", "token",
        xs.PrimitiveType.TUPLE, xs.PrimitiveType.TOKEN, xs.PrimitiveType.PRED, xs.PrimitiveType.S4,
        xs.PaddingType.SAME, xs.FftType.IRFFT, xs.RandomAlgorithm.THREE_FRY, xs.ComparisonDirection.GT,
        xs.PrecisionConfig(), xs.PrecisionConfig(["HIGH"]), xs.DotDimensionNumbers(), xs.GatherDimensionNumbers(),
        xs.ScatterDimensionNumbers(), xs.PaddingConfig(), xs.ResultAccuracy(),
        xs.ResultAccuracy(mode="HIGHEST"), xs.Shape.array_shape(F32, (2,)),
        xs.Shape.array_shape(F32, ()), xs.Shape.array_shape(S32, (2, 3)), xs.Shape.array_shape(np.uint8, (0, 3)),
        xs.Shape.tuple_shape([xs.Shape.array_shape(F32, (2,))]), xs.Shape.tuple_shape([]), xs.Shape.token_shape(),
        xs.Shape.array_shape(F32, (2,), dynamic_dimensions=[True]),
        ops.Add, ops.Lt, ops.Tuple, lambda *a: None, lambda: 1, lambda x, y: (x, y), lambda x, y: x,
    ]
] + [
    ("deep list (3000 levels)", lambda c: _deep(3000)),
    ("self-referencing list", lambda c: _cycle()),
    ("generator (0, 1)", lambda c: (i for i in range(2))),
    ("iter([1])", lambda c: iter([1])),
    ("XlaBuilder", lambda c: c.b),
    ("another XlaBuilder", lambda c: xs.XlaBuilder("another")),
    ("XlaComputation (f32, f32) -> f32", lambda c: _reducer()),
    ("op of another builder", lambda c: _other_builder_op()),
    ("CreateToken op", lambda c: ops.CreateToken(c.b)),
    ("Tuple op", lambda c: ops.Tuple(c.b, [c.p(F32, (2,)), c.p(S32, ())])),
    ("empty Tuple op", lambda c: ops.Tuple(c.b, [])),
    ("f32[] op", _op(F32, ())),
    ("f32[2,3] op", _op(F32, (2, 3))),
    ("f32[0,3] op", _op(F32, (0, 3))),
    ("f16[2,3] op", _op(F16, (2, 3))),
    ("f64[3,3] op", _op(F64, (3, 3))),
    ("s32[] op", _op(S32, ())),
    ("s32[2] op", _op(S32, (2,))),
    ("s8[2,3] op", _op(S8, (2, 3))),
    ("u64[2] op", _op(U64, (2,))),
    ("pred[] op", _op(PRED, ())),
    ("c64[2,3] op", _op(C64, (2, 3))),
    ("f32[1,1,1,1] op", _op(F32, (1, 1, 1, 1))),
    # the largest arrays allowed (2**62 bytes, alone in their computation), and arrays of 2**56
    # bytes, a few of which fit in one computation: built and compiled, never run
    ("s8[2**62] op", _op(S8, (2**62,))),
    ("f32[2**30,2**30] op", _op(F32, (2**30, 2**30))),
    ("s8[2**56] op", _op(S8, (2**56,))),
    ("s8[2**28,2**28] op", _op(S8, (2**28, 2**28))),
    ("f32[2**54] op", _op(F32, (2**54,))),
    ("f32[2**27,2**27] op", _op(F32, (2**27, 2**27))),
    ("f32[2**18,2**18,2**18] op", _op(F32, (2**18, 2**18, 2**18))),
    ("c64[2**26,2**27] op", _op(C64, (2**26, 2**27))),
    ("pred[2**56] op", _op(PRED, (2**56,))),
    ("s32[2**54] op", _op(S32, (2**54,))),
    ("s8[2**62] Shape", _big_shape(S8, (2**62,))),
    ("f32[2**27,2**27] Shape", _big_shape(F32, (2**27, 2**27))),
    # attribute objects whose fields were set to anything after construction (proto style)
    ("GatherDimensionNumbers, offset_dims = deep list", _edited(_gather_dn, "offset_dims", lambda: _deep(3000))),
    ("ScatterDimensionNumbers, index_vector_dim = None", _edited(_scatter_dn, "index_vector_dim", None)),
    ("ConvolutionDimensionNumbers, input_batch_dimension = [0]", _edited(
        lambda: xs.make_convolution_dimension_numbers(("NCHW", "OIHW", "NCHW"), 2), "input_batch_dimension", [0])),
    ("DotDimensionNumbers, lhs_contracting_dimensions = 'ab'", _edited(
        xs.DotDimensionNumbers, "lhs_contracting_dimensions", "ab")),
    ("PaddingConfig, edge_padding_low = cycle", _edited(
        lambda: xs.make_padding_config([(0, 0), (0, 0)]), "dimensions[0].edge_padding_low", _cycle)),
    ("PrecisionConfig, operand_precision = [deep list]", _edited(
        xs.PrecisionConfig, "operand_precision", lambda: [_deep(3000)])),
    ("ResultAccuracy, mode = cycle", _edited(xs.ResultAccuracy, "mode", _cycle)),
    ("[f32[] op, 1]", lambda c: [c.p(F32, ()), 1]),
    ("[s32[] op, s8[] op]", lambda c: [c.p(S32, ()), c.p(S8, ())]),
    ("list of 2 f32[2,3] ops", lambda c: [c.p(F32, (2, 3)), c.p(F32, (2, 3))]),
    ("f32[2**62,4] Shape", _big_shape(F32, (2**62, 4))),
    ("s8[2**63-1] Shape", _big_shape(S8, (2**63 - 1,))),
    ("f32[2**31,2**31,2**31] Shape", _big_shape(F32, (2**31, 2**31, 2**31))),
    ("f32[2**40] Shape", _big_shape(F32, (2**40,))),
    ("f32[0,2**62,2**62] Shape", _big_shape(F32, (0, 2**62, 2**62))),
]


def _mutate_value(v: Any, rng: random.Random, c: Ctx) -> tuple[Any, str]:
    """A hostile variant of the valid value ``v`` and a label of what changed."""
    r = rng.random()
    if isinstance(v, (list, tuple)) and v and r < 0.45:
        items = list(v)
        k = rng.randrange(len(items))
        r2 = rng.random()
        if r2 < 0.6:
            new, what = _mutate_value(items[k], rng, c)
            items[k] = new
            label = f"[{k}] {what}"
        elif r2 < 0.75:
            items.append(_pick(rng, c)[0])
            label = "one more element"
        elif r2 < 0.85:
            del items[k]
            label = f"[{k}] removed"
        else:
            return [v], "nested one level"
        return (tuple(items) if isinstance(v, tuple) else items), label
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and r < 0.3:
        variants: list[Callable[[int], Any]] = [
            lambda v: [v], lambda v: (v, v), lambda v: v + 2**62, lambda v: -v - 1, lambda v: v * 2**31,
            lambda v: float(v), lambda v: np.int64(v) if -(2**63) <= v < 2**63 else np.uint64(v % 2**64),
            lambda v: str(v),
        ]
        choice = rng.choice(variants)(int(v))
        return choice, f"int {v} -> {_describe(choice)}"
    value, label = _pick(rng, c)
    return value, label


def _pick(rng: random.Random, c: Ctx) -> tuple[Any, str]:
    label, make = rng.choice(HOSTILE)
    return make(c), label


@dataclass
class CallSpec:
    """One campaign call: op, arguments and what was mutated."""

    index: int
    op: str
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    mutations: list[str] = field(default_factory=list)
    ctx: Ctx | None = None

    def describe(self) -> str:
        parts = [_describe(a) for a in self.args] + [f"{k}={_describe(v)}" for k, v in self.kwargs.items()]
        return f"ops.{self.op}({', '.join(parts)})  # call {self.index}: " + "; ".join(self.mutations)


def _describe(v: Any, depth: int = 0) -> str:
    if isinstance(v, xs.XlaOp):
        return f"<{v.opcode.rsplit('.', 1)[-1]} {v.shape}>"
    if isinstance(v, xs.XlaBuilder):
        return f"<XlaBuilder {v.name!r}>"
    if isinstance(v, (list, tuple)) and depth < 4:
        inner = ", ".join(_describe(x, depth + 1) for x in v[:8]) + (", ..." if len(v) > 8 else "")
        return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
    if inspect.isfunction(v) and v.__name__ == "<lambda>":
        return "<lambda>"
    try:
        s = repr(v)
    except Exception as e:  # noqa: BLE001 - describing must never fail
        s = f"<{type(v).__name__}: repr raised {type(e).__name__}>"
    return s if len(s) <= 80 else s[:77] + "..."


def make_call(seed: int, index: int, only: Sequence[str] | None = None) -> CallSpec:
    """Call ``index`` of the campaign ``seed``: one op, its valid call, one or two mutations.

    Values are made here (a Shape over the size limit raises here: the caller counts it as the
    call's error). Call 0, 1, ... of a seed go through the ops in order, then at random.
    """
    names = list(only) if only else public_ops()
    rng = random.Random(seed * 1_000_003 + index)
    name = names[index] if index < len(names) else rng.choice(names)
    spec = CallSpec(index, name)
    c = Ctx(f"call{index}", rng)
    spec.ctx = c
    args, kwargs = TEMPLATES[name](c)
    spec.args, spec.kwargs = args, kwargs
    if index < len(names) or rng.random() < 0.03:
        spec.mutations.append("valid call")
        return spec
    fn = getattr(ops, name)
    try:
        optional = [
            p.name for i, p in enumerate(inspect.signature(fn).parameters.values())
            if p.default is not p.empty and p.name not in kwargs and i >= len(args)
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
    except (TypeError, ValueError):
        optional = []
    n_mut = 1 if rng.random() < 0.8 else 2
    for _ in range(n_mut):
        slots = [("arg", i) for i in range(len(args))] + [("kw", k) for k in kwargs] + [("new", k) for k in optional]
        kind, key = rng.choice(slots)
        if kind == "arg":
            assert isinstance(key, int)
            args[key], what = _mutate_value(args[key], rng, c)
            spec.mutations.append(f"argument {key}: {what}")
        elif kind == "kw":
            assert isinstance(key, str)
            kwargs[key], what = _mutate_value(kwargs[key], rng, c)
            spec.mutations.append(f"{key}: {what}")
        else:
            assert isinstance(key, str)
            kwargs[key], what = _pick(rng, c)
            optional.remove(key)
            spec.mutations.append(f"{key} (added): {what}")
    return spec


#: Outcomes of a call that built and then compiled and ran, or compiled (see :func:`run_call`).
BUILT_OK = ("built: ran", "built: compiled", "built: value")


# -- running one call ------------------------------------------------------------------------------

_FEED = re.compile(r"stablehlo\.(infeed|outfeed|send|recv)")
_LOC = re.compile(r"loc\([^()]*(\([^()]*\)[^()]*)*\)")


def _nbytes(s: xs.Shape) -> int:
    if s.is_tuple():
        return sum(_nbytes(e) for e in s.tuple_shapes())
    if s.is_token():
        return 0
    return s.size() * max(1, s.numpy_dtype().itemsize)


def _input(s: xs.Shape) -> Any:
    return np.zeros(s.dimensions(), dtype=s.numpy_dtype())


def _root(result: Any) -> tuple[xs.XlaBuilder, Any]:
    """The builder the op built into and the root to build (a list for QR/Eigh/SVD's tuples)."""
    if isinstance(result, xs.XlaOp):
        return result.builder, result
    if isinstance(result, tuple) and result and all(isinstance(r, xs.XlaOp) for r in result):
        return result[0].builder, list(result)
    raise TypeError(f"the op returned {type(result).__name__}, not an XlaOp")


def _holds_ops(result: Any) -> bool:
    return isinstance(result, xs.XlaOp) or (
        isinstance(result, (tuple, list)) and any(isinstance(r, xs.XlaOp) for r in result)
    )


def _has_token(s: xs.Shape) -> bool:
    return s.is_token() or (s.is_tuple() and any(_has_token(e) for e in s.tuple_shapes()))


def _exc_name(e: BaseException) -> str:
    return f"{type(e).__module__}.{type(e).__qualname__}".replace("builtins.", "")


def _where(e: BaseException) -> str:
    """The innermost frame of the traceback inside xlasdk (file:line in function)."""
    frames = traceback.extract_tb(e.__traceback__)
    inside = [f for f in frames if f"{os.sep}xlasdk{os.sep}" in f.filename]
    f = (inside or frames or [None])[-1]
    return "" if f is None else f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}"


def run_call(spec_or_index: CallSpec | int, seed: int = 0, compile_run: bool = True,
             only: Sequence[str] | None = None, seen: dict[str, tuple[str, str]] | None = None) -> dict[str, Any]:
    """Make and run one call; returns ``{"kind", "detail", ...}`` (see the module docstring).

    ``seen`` caches compile/run outcomes by module text, so identical computations are compiled
    once per process.
    """
    out: dict[str, Any] = {}
    try:
        spec = spec_or_index if isinstance(spec_or_index, CallSpec) else make_call(seed, spec_or_index, only)
        out["op"] = spec.op
        result = getattr(ops, spec.op)(*spec.args, **spec.kwargs)
    except xs.XlaSdkError as e:
        msg = str(e)
        out.update(kind="error", detail=type(e).__name__, message=msg[:300])
        return out
    except BaseException as e:  # noqa: BLE001 - a raw exception is what the campaign looks for
        if isinstance(e, KeyboardInterrupt):
            raise
        out.update(kind="raw", detail=_exc_name(e), message=f"{str(e)[:300]} (at {_where(e)})")
        return out
    out["kind"] = "built"
    if not _holds_ops(result):  # a plain function (ApproxTopKReductionOutputSize): nothing to compile
        out["detail"] = "value"
        return out
    if not compile_run:
        out["detail"] = "built"
        return out
    stage = "build"
    key = ""
    try:
        builder, root = _root(result)
        comp = builder.build(root)
        text = comp._mlir_module_text()
        key = _LOC.sub("", text)
        if seen is not None and key in seen:
            out["detail"], out["message"] = seen[key]
            return out
        ps = comp.program_shape()
        leaves = list(ps.parameter_shapes()) + [ps.result_shape()]
        runnable = (
            not _FEED.search(text)
            and all(s.is_array() for s in ps.parameter_shapes())
            and not _has_token(ps.result_shape())  # an executable cannot return a token
            and sum(_nbytes(s) for s in leaves) <= RUN_LIMIT_BYTES
        )
        stage = "compile"
        exe = xs.compile(comp, device="cpu:0")
        if runnable:
            stage = "run"
            res = exe(*(_input(s) for s in ps.parameter_shapes()))
            for r in res if isinstance(res, tuple) else (res,):
                r.block_until_ready()
            detail, message = "ran", ""
        else:
            detail, message = "compiled", ""
    except xs.XlaSdkError as e:
        detail, message = f"late {stage} {type(e).__name__}", str(e)[:300]
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, KeyboardInterrupt):
            raise
        out.update(kind="raw", detail=f"{stage}: {_exc_name(e)}", message=f"{str(e)[:300]} (at {_where(e)})")
        return out
    if seen is not None and key:
        seen[key] = (detail, message)
    out["detail"], out["message"] = detail, message
    return out


# -- the child-process harness -----------------------------------------------------------------------


def _child_main(argv: Sequence[str]) -> None:
    """``python -c`` entry point of a batch: ``seed start stop compile_run only``."""
    import resource

    seed, start, stop, compile_run = int(argv[0]), int(argv[1]), int(argv[2]), argv[3] == "1"
    only = [o for o in argv[4].split(",") if o] if len(argv) > 4 else None
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    sys.setrecursionlimit(3000)
    seen: dict[str, tuple[str, str]] = {}
    # the protocol goes to the original stdout; anything the calls print goes to stderr
    w = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # test hooks of the harness itself (tests/campaigns/test_op_calls.py): die, hang or raise at a call
    die, hang = os.environ.get("XLASDK_CAMPAIGN_ABORT_AT"), os.environ.get("XLASDK_CAMPAIGN_HANG_AT")
    for i in range(start, stop):
        w.write(f"B {i}\n")
        w.flush()
        if str(i) == die:
            os.abort()
        if str(i) == hang:
            time.sleep(3600)
        res = run_call(i, seed, compile_run, only, seen)
        w.write(f"E {i} {json.dumps(res)}\n")
        w.flush()


@dataclass
class Report:
    """What a campaign found."""

    calls: int = 0
    seconds: float = 0.0
    kinds: collections.Counter[str] = field(default_factory=collections.Counter)
    details: collections.Counter[str] = field(default_factory=collections.Counter)
    failures: list[dict[str, Any]] = field(default_factory=list)
    late: list[dict[str, Any]] = field(default_factory=list)
    by_op: dict[str, collections.Counter[str]] = field(default_factory=dict)
    outcomes: dict[int, str] = field(default_factory=dict)  # call index -> "kind: detail"

    def add(self, i: int, res: dict[str, Any], seed: int, only: Sequence[str] | None) -> None:
        self.calls += 1
        self.outcomes[i] = f"{res['kind']}: {res.get('detail', '')}"
        kind = res["kind"]
        self.kinds[kind] += 1
        self.details[f"{kind}: {res.get('detail', '')}"] += 1
        self.by_op.setdefault(res.get("op", "?"), collections.Counter())[kind] += 1
        if kind in ("raw", "death", "hang"):
            self.failures.append({"index": i, **res, "call": _describe_call(seed, i, only)})
        elif str(res.get("detail", "")).startswith("late"):
            if len(self.late) < 200:
                self.late.append({"index": i, **res, "call": _describe_call(seed, i, only)})

    def summary(self) -> str:
        lines = [f"{self.calls} calls in {self.seconds:.1f} s"]
        for k, n in sorted(self.details.items(), key=lambda kv: -kv[1]):
            lines.append(f"  {n:7d}  {k}")
        lines.append(
            f"failures: {len(self.failures)} (raw {self.kinds['raw']}, deaths {self.kinds['death']}, "
            f"hangs {self.kinds['hang']}); late errors: {sum(n for k, n in self.details.items() if ': late' in k)}"
        )
        for f in self.failures[:50]:
            lines.append(f"  FAIL {f['kind']} {f.get('detail', '')}: {f.get('message', '')}\n      {f['call']}")
        return "\n".join(lines)


def _describe_call(seed: int, i: int, only: Sequence[str] | None) -> str:
    try:
        return make_call(seed, i, only).describe()
    except BaseException as e:  # noqa: BLE001 - the description is best effort (making it may raise)
        return f"call {i} of seed {seed} (its values raise {type(e).__name__} when made)"


def _reader(stream: Any, q: queue.Queue[str | None]) -> None:
    for line in stream:
        q.put(line)
    q.put(None)


def run_campaign(
    calls: int,
    seed: int = 0,
    batch: int = 500,
    compile_run: bool = True,
    only: Sequence[str] | None = None,
    progress: Callable[[Report], None] | None = None,
) -> Report:
    """Run calls ``0 .. calls-1`` of ``seed`` in child processes of ``batch`` calls each.

    A child that dies or hangs is reported with the call it had begun, and a new child goes on
    from the next call.
    """
    if missing_templates():
        raise AssertionError(f"ops without a valid call in TEMPLATES: {missing_templates()}")
    only = list(only) if only else public_ops()  # the children call these, whatever is added meanwhile
    report = Report()
    t0 = time.perf_counter()
    nxt = 0
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONFAULTHANDLER="1")
    startup_failures = 0
    while nxt < calls:
        stop = min(calls, nxt + batch)
        code = f"import sys; sys.path.insert(0, {HERE!r}); import op_calls; op_calls._child_main(sys.argv[1:])"
        cmd = [sys.executable, "-c", code, str(seed), str(nxt), str(stop), "1" if compile_run else "0",
               ",".join(only or [])]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        q: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, q), daemon=True).start()
        err_lines: collections.deque[str] = collections.deque(maxlen=30)
        threading.Thread(target=err_lines.extend, args=(proc.stderr or [],), daemon=True).start()
        begun: int | None = None
        hung = False
        started = False
        while True:
            try:
                line = q.get(timeout=CALL_TIMEOUT_S if started else max(CALL_TIMEOUT_S, START_TIMEOUT_S))
                started = True
            except queue.Empty:
                hung = True
                proc.kill()
                break
            if line is None:
                break
            tag, _, rest = line.rstrip("\n").partition(" ")
            if tag == "B":
                begun = int(rest)
            elif tag == "E":
                i_s, _, payload = rest.partition(" ")
                report.add(int(i_s), json.loads(payload), seed, only)
                nxt = int(i_s) + 1
                begun = None
                if progress is not None and report.calls % 1000 == 0:
                    report.seconds = time.perf_counter() - t0
                    progress(report)
        rc = proc.wait()
        if begun is not None:  # died (or hung) inside call `begun`
            time.sleep(0.2)
            tail = " | ".join(x.strip() for x in list(err_lines)[-6:])[:600]
            kind = "hang" if hung else "death"
            report.add(begun, {"kind": kind, "detail": f"rc={rc}", "message": tail}, seed, only)
            nxt = begun + 1
        elif rc != 0 and nxt < stop:  # failed before its first call (an import error): retry a few times
            startup_failures += 1
            if startup_failures > 3:
                raise RuntimeError(f"campaign child failed outside a call (rc={rc}): {' '.join(err_lines)}")
            time.sleep(10)
    report.seconds = time.perf_counter() - t0
    return report


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--no-compile", action="store_true", help="only call the ops (no build/compile/run)")
    ap.add_argument("--only", default="", help="comma-separated op names")
    ap.add_argument("--show", type=int, default=None, help="print call SHOW and exit")
    ap.add_argument("--json", default=None, help="write the report as JSON to this file")
    a = ap.parse_args(argv)
    only = [o for o in a.only.split(",") if o] or None
    if a.show is not None:
        print(_describe_call(a.seed, a.show, only))
        return 0

    def progress(r: Report) -> None:
        print(f"... {r.calls} calls, {r.seconds:.0f} s, failures {len(r.failures)}", flush=True)

    report = run_campaign(a.calls, a.seed, a.batch, not a.no_compile, only, progress)
    print(report.summary())
    if a.json:
        with open(a.json, "w") as f:
            json.dump(
                {"calls": report.calls, "seconds": report.seconds, "kinds": dict(report.kinds),
                 "details": dict(report.details), "failures": report.failures, "late": report.late,
                 "by_op": {k: dict(v) for k, v in report.by_op.items()}},
                f, indent=1,
            )
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
