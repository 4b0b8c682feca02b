"""The reference evaluator (``xs.evaluate``) against StableHLO's reference interpreter
(``stablehlo.eval_module``, an independent implementation of the StableHLO spec) on small
programs covering each op family.

The interpreter aborts the process on ops it does not implement, so every program runs in
xlasdk's worker process (``xlasdk._jaxlib.isolated``: one child serves the whole file; a death
is caught, reported, and a fresh child serves the next program). A program the interpreter dies
on is listed in :data:`ABORTS` with what it lacks; its test is skipped with that reason when it
dies, and checked like any other program when a jaxlib release no longer dies on it;
``test_the_interpreter_aborts_only_on_the_listed_programs`` fails when an unlisted program dies.
Outputs where the interpreter is known to differ from XLA's semantics (:data:`DISAGREE`) are
arbitrated by XLA:CPU when they differ, on every jaxlib: a release that changes or fixes the
interpreter passes, one where XLA stops siding with the evaluator fails.

How values are compared (``Check``), and why:

- ``exact``: integers, booleans, bit and shape ops, and float ops that are correctly rounded in
  both (add, subtract, multiply, divide, sqrt, conversions): the evaluator computes in float64 and
  rounds once to the op's type; the interpreter computes in the op's type with correct rounding.
  Both give the correctly rounded result (float64 has more than twice the bits of f32, bf16 and
  f16, so rounding twice changes nothing). NaN matches NaN; +0 and -0 differ.
- ``ulps(n)``: transcendental functions (exp, log, tanh, ...): the interpreter calls the C
  library in the op's type (or float), which is not correctly rounded; the evaluator rounds the
  float64 result once. Allowed: ``n`` units in the last place of the evaluator's value, NaN and
  Inf at the same places.
- sums, dots and convolutions take small integers as inputs, so that every partial sum is exact
  in the op's type whatever the order: ``exact``. One program (``reduce_f32_rounding``) sums random
  floats: the interpreter adds in f32 one by one, the evaluator in float64 rounded once; allowed:
  ``n * eps * sum(|x|)`` (the classic bound of recursive summation), per output element.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from xlasdk._jaxlib import isolated

BF16 = np.dtype(ml_dtypes.bfloat16)
RNG = np.random.default_rng(19)
F32_EDGES = np.array([0.0, -0.0, 1.0, -1.5, 2.5, 3.5, -2.5, 1e-30, 1e30, 3e38, np.inf, -np.inf, np.nan, 0.1, 7.0,
                      -7.25], np.float32)


@dataclass
class Program:
    """A StableHLO module, its arguments, and how each output is compared (one check per output,
    or one for all): ``"exact"``, ``("ulps", n)``, or ``("bound", fn)`` where ``fn(args)`` gives
    the allowed absolute difference per element of that output."""

    text: str
    args: list[Any]
    checks: Any = "exact"
    why: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _f32(*shape: int, lo: float = -4.0, hi: float = 4.0) -> np.ndarray[Any, Any]:
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def _ints(dtype: Any, *shape: int, lo: int = -5, hi: int = 6) -> np.ndarray[Any, Any]:
    return RNG.integers(lo, hi, shape).astype(dtype)


def _module(sig: str, results: str, body: str) -> str:
    return f"func.func @main({sig}) -> ({results}) {{\n{body}\n}}\n"


# -- the programs --------------------------------------------------------------------------------------------
PROGRAMS: dict[str, Program] = {}

def _elementwise(t: str, n: int, ops: list[str]) -> str:
    """A module of element-wise ops on ``%a`` and ``%b`` (``tensor<NxT>``), each op an output:
    ``"add a b"`` is ``stablehlo.add %a, %b``."""
    ty = f"tensor<{n}x{t}>"
    body = [f"  %{k} = stablehlo.{op.split()[0]} {', '.join('%' + x for x in op.split()[1:])} : {ty}"
            for k, op in enumerate(ops)]
    outs = ", ".join([ty] * len(ops))
    body.append(f"  return {', '.join(f'%{k}' for k in range(len(ops)))} : {outs}")
    return _module(f"%a: {ty}, %b: {ty}", outs, "\n".join(body))


PROGRAMS["elementwise_f32_correctly_rounded"] = Program(_elementwise("f32", 16, [
    "add a b", "subtract a b", "multiply a b", "divide a b", "sqrt a", "maximum a b", "minimum a b", "negate a",
    "abs a", "floor a", "ceil a", "round_nearest_even a", "round_nearest_afz a", "sign a"]),
    [F32_EDGES, F32_EDGES[::-1].copy()])

PROGRAMS["elementwise_f32_transcendental"] = Program(_elementwise("f32", 12, [
    "exponential a", "log b", "tanh a", "sine a", "cosine a", "logistic a", "rsqrt b", "log_plus_one b",
    "exponential_minus_one a", "atan2 a b", "power b a"]),
    [_f32(12), _f32(12, lo=0.01, hi=9.0)], ("ulps", 4),
    "the C library's functions in the op's type: a few ulps from the correctly rounded value")

for _t, _dt in (("bf16", BF16), ("f16", np.dtype(np.float16))):
    _args = [_f32(16).astype(_dt), _f32(16, lo=0.1, hi=300.0).astype(_dt)]
    PROGRAMS[f"elementwise_{_t}"] = Program(_elementwise(_t, 16, [
        "add a b", "multiply a b", "divide a b", "sqrt b", "subtract a b", "maximum a b"]), _args)
    PROGRAMS[f"transcendental_{_t}"] = Program(_elementwise(_t, 16, ["exponential a", "tanh a", "logistic a"]),
                                               _args, ("ulps", 1),
                                               "computed in f32 and rounded once more to the type: within 1 ulp")

_I32 = np.iinfo(np.int32)
# division by zero kills the interpreter (SIGFPE); it and INT_MIN / -1 have programs of their own
_IA = np.array([7, -7, 7, -7, _I32.min, _I32.min, _I32.max, 0, 5, -1, 1 << 30, 3, -3, 123456789, -1, 2], np.int32)
_IB = np.array([2, 2, -2, 3, 2, 1, 1, -4, 5, 33, 2, 31, 32, -1, 64, 1], np.int32)  # shifts past the width, < 0
PROGRAMS["integer_edges_i32"] = Program(_elementwise("i32", 16, [
    "add a a", "multiply a b", "divide a b", "remainder a b", "shift_left a b", "shift_right_arithmetic a b",
    "shift_right_logical a b", "and a b", "or a b", "xor a b", "not a", "popcnt a", "count_leading_zeros a", "abs a",
    "negate a", "subtract b a", "maximum a b", "minimum a b"]), [_IA, _IB])

PROGRAMS["integer_edges_ui8"] = Program(_elementwise("ui8", 8, [
    "add a b", "multiply a b", "divide a b", "remainder a b", "shift_left a b", "shift_right_logical a b",
    "subtract b a"]), [np.array([0, 1, 200, 255, 7, 128, 3, 9], np.uint8), np.array([3, 3, 100, 255, 8, 1, 9, 2],
                                                                                    np.uint8)])

for _case, (_x, _y) in {"by_zero": ([7, -7, 0, _I32.min], [0, 0, 0, 0]),
                        "int_min_by_minus_one": ([_I32.min, _I32.min], [-1, -1])}.items():
    PROGRAMS[f"integer_division_{_case}"] = Program(_module(
        f"%a: tensor<{len(_x)}xi32>, %b: tensor<{len(_x)}xi32>", f"tensor<{len(_x)}xi32>, tensor<{len(_x)}xi32>",
        f"""  %0 = stablehlo.divide %a, %b : tensor<{len(_x)}xi32>
  %1 = stablehlo.remainder %a, %b : tensor<{len(_x)}xi32>
  return %0, %1 : tensor<{len(_x)}xi32>, tensor<{len(_x)}xi32>"""),
        [np.array(_x, np.int32), np.array(_y, np.int32)])

PROGRAMS["compare_select_clamp"] = Program(_module(
    "%a: tensor<16xf32>, %b: tensor<16xf32>, %i: tensor<16xi32>, %j: tensor<16xi32>",
    "tensor<16xi1>, tensor<16xi1>, tensor<16xi1>, tensor<16xi1>, tensor<16xi1>, tensor<16xi1>, tensor<16xi1>, "
    "tensor<16xi1>, tensor<16xf32>, tensor<16xf32>, tensor<16xi32>",
    """  %0 = stablehlo.compare EQ, %a, %b, FLOAT : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xi1>
  %1 = stablehlo.compare NE, %a, %b, FLOAT : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xi1>
  %2 = stablehlo.compare LT, %a, %b, FLOAT : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xi1>
  %3 = stablehlo.compare GE, %a, %b, FLOAT : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xi1>
  %4 = stablehlo.compare LT, %a, %b, TOTALORDER : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xi1>
  %5 = stablehlo.compare LT, %i, %j, SIGNED : (tensor<16xi32>, tensor<16xi32>) -> tensor<16xi1>
  %6 = stablehlo.compare NE, %i, %j, SIGNED : (tensor<16xi32>, tensor<16xi32>) -> tensor<16xi1>
  %7 = stablehlo.compare GT, %i, %j : (tensor<16xi32>, tensor<16xi32>) -> tensor<16xi1>
  %8 = stablehlo.select %2, %a, %b : tensor<16xi1>, tensor<16xf32>
  %9 = stablehlo.clamp %b, %a, %b : tensor<16xf32>
  %lo = stablehlo.constant dense<3> : tensor<i32>
  %hi = stablehlo.constant dense<-2> : tensor<i32>
  %10 = stablehlo.clamp %lo, %i, %hi : (tensor<i32>, tensor<16xi32>, tensor<i32>) -> tensor<16xi32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10 : tensor<16xi1>, tensor<16xi1>, tensor<16xi1>,
    tensor<16xi1>, tensor<16xi1>, tensor<16xi1>, tensor<16xi1>, tensor<16xi1>, tensor<16xf32>, tensor<16xf32>,
    tensor<16xi32>"""),
    [F32_EDGES, np.roll(F32_EDGES, 3), _IA, _IB])

PROGRAMS["convert_and_bitcast"] = Program(_module(
    "%a: tensor<8xf32>, %i: tensor<8xi32>",
    "tensor<8xbf16>, tensor<8xf16>, tensor<8xf64>, tensor<8xf32>, tensor<8xi1>, tensor<8xi32>, tensor<8x2xbf16>, "
    "tensor<8xui32>, tensor<8xf8E4M3FN>, tensor<8xi64>, tensor<8xi8>",
    """  %0 = stablehlo.convert %a : (tensor<8xf32>) -> tensor<8xbf16>
  %1 = stablehlo.convert %a : (tensor<8xf32>) -> tensor<8xf16>
  %2 = stablehlo.convert %a : (tensor<8xf32>) -> tensor<8xf64>
  %3 = stablehlo.convert %i : (tensor<8xi32>) -> tensor<8xf32>
  %4 = stablehlo.convert %i : (tensor<8xi32>) -> tensor<8xi1>
  %5 = stablehlo.bitcast_convert %a : (tensor<8xf32>) -> tensor<8xi32>
  %6 = stablehlo.bitcast_convert %a : (tensor<8xf32>) -> tensor<8x2xbf16>
  %7 = stablehlo.bitcast_convert %i : (tensor<8xi32>) -> tensor<8xui32>
  %8 = stablehlo.convert %a : (tensor<8xf32>) -> tensor<8xf8E4M3FN>
  %9 = stablehlo.convert %i : (tensor<8xi32>) -> tensor<8xi64>
  %10 = stablehlo.convert %i : (tensor<8xi32>) -> tensor<8xi8>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10 : tensor<8xbf16>, tensor<8xf16>, tensor<8xf64>, tensor<8xf32>,
    tensor<8xi1>, tensor<8xi32>, tensor<8x2xbf16>, tensor<8xui32>, tensor<8xf8E4M3FN>, tensor<8xi64>, tensor<8xi8>"""),
    [np.array([1.0, -2.5, 1.00390625, 65504.0, 1e-8, 0.3, 100.0, -0.0], np.float32),
     np.array([0, 1, -1, 16777217, _I32.max, _I32.min, 7, 2], np.int32)])

PROGRAMS["convert_float_to_int_out_of_range"] = Program(_module(
    "%a: tensor<8xf32>", "tensor<8xi32>, tensor<8xui8>",
    """  %0 = stablehlo.convert %a : (tensor<8xf32>) -> tensor<8xi32>
  %1 = stablehlo.convert %a : (tensor<8xf32>) -> tensor<8xui8>
  return %0, %1 : tensor<8xi32>, tensor<8xui8>"""),
    [np.array([1.7, -1.7, 3e9, -3e9, np.nan, np.inf, 300.0, -5.0], np.float32)])

PROGRAMS["shapes"] = Program(_module(
    "%a: tensor<2x3x4xf32>, %b: tensor<2x3x4xf32>",
    "tensor<6x4xf32>, tensor<4x2x3xf32>, tensor<5x2x3x4xf32>, tensor<2x1x2xf32>, tensor<5x3x4xf32>, "
    "tensor<4x3x4xf32>, tensor<2x3x4xf32>, tensor<3x4xi32>",
    """  %0 = stablehlo.reshape %a : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %1 = stablehlo.transpose %a, dims = [2, 0, 1] : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %2 = stablehlo.broadcast_in_dim %a, dims = [1, 2, 3] : (tensor<2x3x4xf32>) -> tensor<5x2x3x4xf32>
  %3 = stablehlo.slice %a [0:2, 1:3:2, 0:4:3] : (tensor<2x3x4xf32>) -> tensor<2x1x2xf32>
  %z = stablehlo.constant dense<-1.0> : tensor<f32>
  %4 = stablehlo.pad %a, %z, low = [1, 0, -1], high = [0, 0, 1], interior = [2, 0, 0]
    : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<5x3x4xf32>
  %5 = stablehlo.concatenate %a, %b, dim = 0 : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<4x3x4xf32>
  %6 = stablehlo.reverse %a, dims = [0, 2] : tensor<2x3x4xf32>
  %7 = stablehlo.iota dim = 1 : tensor<3x4xi32>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<6x4xf32>, tensor<4x2x3xf32>, tensor<5x2x3x4xf32>,
    tensor<2x1x2xf32>, tensor<5x3x4xf32>, tensor<4x3x4xf32>, tensor<2x3x4xf32>, tensor<3x4xi32>"""),
    [_f32(2, 3, 4), _f32(2, 3, 4)])

PROGRAMS["dynamic_slices_clamped"] = Program(_module(
    "%a: tensor<5x6xi32>, %u: tensor<2x3xi32>, %i: tensor<i32>, %j: tensor<i32>",
    "tensor<2x3xi32>, tensor<5x6xi32>, tensor<2x3xi32>, tensor<5x6xi32>",
    """  %0 = stablehlo.dynamic_slice %a, %i, %j, sizes = [2, 3] : (tensor<5x6xi32>, tensor<i32>, tensor<i32>)
    -> tensor<2x3xi32>
  %1 = stablehlo.dynamic_update_slice %a, %u, %i, %j : (tensor<5x6xi32>, tensor<2x3xi32>, tensor<i32>,
    tensor<i32>) -> tensor<5x6xi32>
  %n = stablehlo.negate %i : tensor<i32>
  %2 = stablehlo.dynamic_slice %a, %n, %n, sizes = [2, 3] : (tensor<5x6xi32>, tensor<i32>, tensor<i32>)
    -> tensor<2x3xi32>
  %3 = stablehlo.dynamic_update_slice %a, %u, %n, %j : (tensor<5x6xi32>, tensor<2x3xi32>, tensor<i32>,
    tensor<i32>) -> tensor<5x6xi32>
  return %0, %1, %2, %3 : tensor<2x3xi32>, tensor<5x6xi32>, tensor<2x3xi32>, tensor<5x6xi32>"""),
    [np.arange(30, dtype=np.int32).reshape(5, 6), -np.arange(6, dtype=np.int32).reshape(2, 3), np.int32(4),
     np.int32(5)])

PROGRAMS["gather_scatter"] = Program(_module(
    "%a: tensor<5x4xf32>, %idx: tensor<4x1xi32>, %u: tensor<4x4xf32>",
    "tensor<4x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>",
    """  %0 = "stablehlo.gather"(%a, %idx) {dimension_numbers = #stablehlo.gather<offset_dims = [1],
    collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>,
    slice_sizes = array<i64: 1, 4>, indices_are_sorted = false} : (tensor<5x4xf32>, tensor<4x1xi32>) -> tensor<4x4xf32>
  %1 = "stablehlo.scatter"(%a, %idx, %u) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %s = stablehlo.add %x, %y : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0],
    scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false}
    : (tensor<5x4xf32>, tensor<4x1xi32>, tensor<4x4xf32>) -> tensor<5x4xf32>
  %2 = "stablehlo.scatter"(%a, %idx, %u) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    stablehlo.return %y : tensor<f32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0],
    scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false}
    : (tensor<5x4xf32>, tensor<4x1xi32>, tensor<4x4xf32>) -> tensor<5x4xf32>
  return %0, %1, %2 : tensor<4x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>"""),
    # index 7 is out of range: gather clamps the start, scatter drops the update; 1 appears twice (summed)
    [_ints(np.float32, 5, 4), np.array([[1], [7], [1], [-3]], np.int32), _ints(np.float32, 4, 4)])

PROGRAMS["reduce"] = Program(_module(
    "%a: tensor<4x6xf32>, %i: tensor<4x6xi32>",
    "tensor<6xf32>, tensor<4xf32>, tensor<4xi32>, tensor<6xf32>, tensor<6xi32>",
    """  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zi = stablehlo.constant dense<0> : tensor<i32>
  %0 = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [0]
    : (tensor<4x6xf32>, tensor<f32>) -> tensor<6xf32>
  %1 = stablehlo.reduce(%a init: %m) applies stablehlo.maximum across dimensions = [1]
    : (tensor<4x6xf32>, tensor<f32>) -> tensor<4xf32>
  %2 = stablehlo.reduce(%i init: %zi) applies stablehlo.multiply across dimensions = [1]
    : (tensor<4x6xi32>, tensor<i32>) -> tensor<4xi32>
  %io = stablehlo.iota dim = 0 : tensor<4x6xi32>
  %3:2 = stablehlo.reduce(%a init: %m), (%io init: %zi) across dimensions = [0]
    : (tensor<4x6xf32>, tensor<4x6xi32>, tensor<f32>, tensor<i32>) -> (tensor<6xf32>, tensor<6xi32>)
    reducer(%x: tensor<f32>, %y: tensor<f32>) (%xi: tensor<i32>, %yi: tensor<i32>) {
      %gt = stablehlo.compare GT, %x, %y, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %v = stablehlo.select %gt, %x, %y : tensor<i1>, tensor<f32>
      %k = stablehlo.select %gt, %xi, %yi : tensor<i1>, tensor<i32>
      stablehlo.return %v, %k : tensor<f32>, tensor<i32>
    }
  return %0, %1, %2, %3#0, %3#1 : tensor<6xf32>, tensor<4xf32>, tensor<4xi32>, tensor<6xf32>, tensor<6xi32>"""),
    [_ints(np.float32, 4, 6, lo=-100, hi=100), _ints(np.int32, 4, 6, lo=-9999, hi=9999)])

PROGRAMS["reduce_f32_rounding"] = Program(_module(
    "%a: tensor<3x200xf32>", "tensor<3xf32>",
    """  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [1]
    : (tensor<3x200xf32>, tensor<f32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>"""),
    [_f32(3, 200)],
    [("bound", lambda args: 200 * np.finfo(np.float32).eps * np.abs(args[0].astype(np.float64)).sum(axis=1))],
    "summed in f32 one by one against float64 rounded once: n * eps * sum |x|")

PROGRAMS["reduce_window"] = Program(_module(
    "%a: tensor<1x5x6x1xf32>",
    "tensor<1x3x3x1xf32>, tensor<1x2x2x1xf32>",
    """  %m = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = "stablehlo.reduce_window"(%a, %m) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %r = stablehlo.maximum %x, %y : tensor<f32>
    stablehlo.return %r : tensor<f32>
  }) {window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, 1>,
      padding = dense<[[0, 0], [0, 1], [0, 0], [0, 0]]> : tensor<4x2xi64>} : (tensor<1x5x6x1xf32>, tensor<f32>)
      -> tensor<1x3x3x1xf32>
  %1 = "stablehlo.reduce_window"(%a, %z) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %r = stablehlo.add %x, %y : tensor<f32>
    stablehlo.return %r : tensor<f32>
  }) {window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 2, 3, 1>,
      window_dilations = array<i64: 1, 2, 2, 1>, base_dilations = array<i64: 1, 1, 1, 1>}
      : (tensor<1x5x6x1xf32>, tensor<f32>) -> tensor<1x2x2x1xf32>
  return %0, %1 : tensor<1x3x3x1xf32>, tensor<1x2x2x1xf32>"""),
    [_ints(np.float32, 1, 5, 6, 1, lo=-50, hi=50)])

PROGRAMS["dot_general"] = Program(_module(
    "%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>, %i: tensor<3x4xi32>, %j: tensor<4x2xi32>, %h: tensor<3x4xbf16>, "
    "%k: tensor<4x2xbf16>",
    "tensor<2x3x5xf32>, tensor<3x2xi32>, tensor<3x2xbf16>",
    """  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1]
    : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  %1 = stablehlo.dot_general %i, %j, contracting_dims = [1] x [0] : (tensor<3x4xi32>, tensor<4x2xi32>)
    -> tensor<3x2xi32>
  %2 = stablehlo.dot_general %h, %k, contracting_dims = [1] x [0] : (tensor<3x4xbf16>, tensor<4x2xbf16>)
    -> tensor<3x2xbf16>
  return %0, %1, %2 : tensor<2x3x5xf32>, tensor<3x2xi32>, tensor<3x2xbf16>"""),
    [_ints(np.float32, 2, 3, 4, lo=-20, hi=20), _ints(np.float32, 2, 4, 5, lo=-20, hi=20),
     _ints(np.int32, 3, 4, lo=-70000, hi=70000), _ints(np.int32, 4, 2, lo=-70000, hi=70000),
     _ints(BF16, 3, 4, lo=-5, hi=6), _ints(BF16, 4, 2, lo=-5, hi=6)])

PROGRAMS["convolution"] = Program(_module(
    "%x: tensor<1x6x6x4xf32>, %w: tensor<3x3x2x6xf32>",
    "tensor<1x3x1x6xf32>",
    """  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
    window = {stride = [2, 3], pad = [[1, 1], [0, 1]], rhs_dilate = [1, 2]}
    {batch_group_count = 1 : i64, feature_group_count = 2 : i64}
    : (tensor<1x6x6x4xf32>, tensor<3x3x2x6xf32>) -> tensor<1x3x1x6xf32>
  return %0 : tensor<1x3x1x6xf32>"""),
    [_ints(np.float32, 1, 6, 6, 4, lo=-9, hi=10), _ints(np.float32, 3, 3, 2, 6, lo=-9, hi=10)])

PROGRAMS["sort"] = Program(_module(
    "%a: tensor<2x8xf32>, %b: tensor<2x8xi32>",
    "tensor<2x8xf32>, tensor<2x8xi32>",
    """  %0:2 = "stablehlo.sort"(%a, %b) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>, %xi: tensor<i32>, %yi: tensor<i32>):
    %lt = stablehlo.compare LT, %x, %y, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }) {dimension = 1 : i64, is_stable = true} : (tensor<2x8xf32>, tensor<2x8xi32>) -> (tensor<2x8xf32>, tensor<2x8xi32>)
  return %0#0, %0#1 : tensor<2x8xf32>, tensor<2x8xi32>"""),
    [np.array([[3, 1, np.nan, -0.0, 0.0, 1, -np.inf, 2], [5, 5, 5, 1, 1, 9, -3, 0]], np.float32),
     np.arange(16, dtype=np.int32).reshape(2, 8)])

PROGRAMS["control_flow"] = Program(_module(
    "%n: tensor<i32>, %p: tensor<i1>, %k: tensor<i32>, %x: tensor<3xf32>",
    "tensor<i32>, tensor<i32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>",
    """  %zero = stablehlo.constant dense<0> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %0:3 = stablehlo.while(%i = %zero, %a = %zero, %b = %one) : tensor<i32>, tensor<i32>, tensor<i32>
    cond {
      %c = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    } do {
      %i1 = stablehlo.add %i, %one : tensor<i32>
      %s = stablehlo.add %a, %b : tensor<i32>
      stablehlo.return %i1, %b, %s : tensor<i32>, tensor<i32>, tensor<i32>
    }
  %1 = "stablehlo.if"(%p) ({
    %e = stablehlo.exponential %x : tensor<3xf32>
    stablehlo.return %e : tensor<3xf32>
  }, {
    %m = stablehlo.negate %x : tensor<3xf32>
    stablehlo.return %m : tensor<3xf32>
  }) : (tensor<i1>) -> tensor<3xf32>
  %2 = "stablehlo.case"(%k) ({
    %a0 = stablehlo.add %x, %x : tensor<3xf32>
    stablehlo.return %a0 : tensor<3xf32>
  }, {
    %a1 = stablehlo.multiply %x, %x : tensor<3xf32>
    stablehlo.return %a1 : tensor<3xf32>
  }, {
    %a2 = stablehlo.abs %x : tensor<3xf32>
    stablehlo.return %a2 : tensor<3xf32>
  }) : (tensor<i32>) -> tensor<3xf32>
  %k9 = stablehlo.constant dense<9> : tensor<i32>
  %3 = "stablehlo.case"(%k9) ({
    %a0 = stablehlo.add %x, %x : tensor<3xf32>
    stablehlo.return %a0 : tensor<3xf32>
  }, {
    %a2 = stablehlo.abs %x : tensor<3xf32>
    stablehlo.return %a2 : tensor<3xf32>
  }) : (tensor<i32>) -> tensor<3xf32>
  return %0#0, %0#1, %1, %2, %3 : tensor<i32>, tensor<i32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>"""),
    [np.int32(20), np.bool_(False), np.int32(1), np.array([1.5, -2.0, 0.25], np.float32)])

for _alg in ("THREE_FRY", "PHILOX"):
    PROGRAMS[f"rng_bit_generator_{_alg.lower()}"] = Program(_module(
        "%s: tensor<2xui64>", "tensor<2xui64>, tensor<3x5xui32>",
        f"""  %0:2 = stablehlo.rng_bit_generator %s, algorithm = {_alg} : (tensor<2xui64>)
    -> (tensor<2xui64>, tensor<3x5xui32>)
  return %0#0, %0#1 : tensor<2xui64>, tensor<3x5xui32>"""),
        [np.array([42, 7], np.uint64)])

PROGRAMS["fft"] = Program(_module(
    "%a: tensor<8xcomplex<f32>>", "tensor<8xcomplex<f32>>",
    """  %0 = stablehlo.fft %a, type = FFT, length = [8] : (tensor<8xcomplex<f32>>) -> tensor<8xcomplex<f32>>
  return %0 : tensor<8xcomplex<f32>>"""),
    [(_ints(np.float32, 8) + 1j * _ints(np.float32, 8)).astype(np.complex64)],
    [("bound", lambda args: 3 * 8 * np.finfo(np.float32).eps * float(np.abs(args[0].real).sum()
                                                                     + np.abs(args[0].imag).sum()))],
    "an FFT in complex<f32> (log2(8) = 3 rounds of butterflies): its error is relative to the size of its terms, "
    "3 * n * eps * sum |x|, not to each output")

PROGRAMS["select_and_scatter"] = Program(_module(
    "%a: tensor<4x6xf32>, %s: tensor<2x3xf32>", "tensor<4x6xf32>",
    """  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = "stablehlo.select_and_scatter"(%a, %s, %z) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %ge = stablehlo.compare GE, %x, %y, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %ge : tensor<i1>
  }, {
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %r = stablehlo.add %x, %y : tensor<f32>
    stablehlo.return %r : tensor<f32>
  }) {window_dimensions = array<i64: 2, 2>, window_strides = array<i64: 2, 2>}
    : (tensor<4x6xf32>, tensor<2x3xf32>, tensor<f32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>"""),
    [_ints(np.float32, 4, 6, lo=-50, hi=50), _ints(np.float32, 2, 3)])

PROGRAMS["chlo_erf"] = Program(_module(
    "%a: tensor<4xf32>", "tensor<4xf32>",
    """  %0 = chlo.erf %a : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>"""),
    [_f32(4)], ("ulps", 4), "a CHLO op: not StableHLO, the interpreter has no rule for it")

#: Programs the interpreter may die on (it aborts the process; caught in the worker), with why. A
#: release whose interpreter no longer dies on one runs it like the others (jaxlib 0.12.1's divides
#: by zero without SIGFPE).
ABORTS: dict[str, str] = {
    "chlo_erf": "CHLO ops are not StableHLO; the interpreter aborts on an op it does not know",
    "integer_division_by_zero": "it divides in C++: SIGFPE (XLA defines x / 0 = -1, x % 0 = x); jaxlib 0.10.2 "
                                "through 0.12.0.1",
    "rng_bit_generator_three_fry": "rng_bit_generator is unsupported (openxla/stablehlo#1571)",
    "rng_bit_generator_philox": "rng_bit_generator is unsupported (openxla/stablehlo#1571)",
    "fft": "its FFT aborts on complex<f32> ('Semantics mismatch between provided type and complex value'); jaxlib "
           "0.10.2",
}

#: Outputs where the interpreter has differed from XLA's semantics on some jaxlib release, ``(program,
#: output): what``: where they differ from the evaluator's, XLA:CPU's value must equal the
#: evaluator's, element for element (the interpreter's bug, or a case StableHLO leaves to the
#: implementation); where they agree, the output is checked as any other.
DISAGREE: dict[tuple[str, int], str] = {
    ("compare_select_clamp", 4): "compare LT TOTALORDER of a number and +NaN: the interpreter says false; in the "
                                 "total order +NaN is above every number",
    ("gather_scatter", 1): "scatter with an add combiner, index 1 updated twice, out-of-range indices dropped: the "
                           "interpreter of jaxlib 0.10.2 gives row 1 the last update alone, not operand + both updates",
    ("sort", 0): "the interpreter of jaxlib 0.12.1 sorts NaN among the numbers under a TOTALORDER comparator",
    ("sort", 1): "the indices carried by that sort",
    **{(f"integer_division_{case}", k): f"the interpreter of jaxlib 0.12.1 gives 0 for {what}; XLA defines x / 0 = "
       "-1 (all ones), x % 0 = x, INT_MIN / -1 = INT_MIN and INT_MIN % -1 = 0 (StableHLO leaves them to the "
       "implementation)"
       for case, what in (("by_zero", "x / 0 and x % 0"), ("int_min_by_minus_one", "INT_MIN / -1")) for k in (0, 1)},
}


# -- running them --------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    ours: list[np.ndarray[Any, Any]] | None = None
    theirs: list[np.ndarray[Any, Any]] | None = None
    died: str = ""
    failed: str = ""  # the interpreter (or the bindings) refused the program cleanly
    ours_error: str = ""
    path: str = ""


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Every program through the evaluator (this process) and the interpreter (the worker process)."""
    root = tmp_path_factory.mktemp("interp")
    out: dict[str, Outcome] = {}
    for name, prog in PROGRAMS.items():
        o = out[name] = Outcome()
        try:
            o.theirs = isolated.request("xlasdk._jaxlib.mlir:interpret_module", prog.text, prog.args, timeout=120)
        except isolated.WorkerDied as e:  # the interpreter aborted: a fresh worker serves the next program
            o.died = e.reason
        except isolated.Failed as e:
            o.failed = f"{e.stage}: {e.message}"
        path = root / f"{name}.mlir"
        path.write_text(prog.text)
        o.path = str(path)
        try:
            o.ours = [np.asarray(v) for v in xs.evaluate(xs.load_computation(path), *prog.args)]
        except xs.XlaSdkError as e:
            o.ours_error = f"{type(e).__name__}: {e}"
    return out


def _same(ours: np.ndarray[Any, Any], theirs: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Elements that are the same value: equal bits, or NaN in both (a float's -0 is not +0)."""
    if ours.dtype.kind in "iub":
        return np.asarray(ours == theirs)
    bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
    if ours.dtype.kind == "c":
        return _same(ours.real.copy(), theirs.real.copy()) & _same(ours.imag.copy(), theirs.imag.copy())
    u = bits[ours.dtype.itemsize]
    wide_o, wide_t = ours.astype(np.float64), theirs.astype(np.float64)
    return np.asarray((ours.view(u) == theirs.view(u)) | (np.isnan(wide_o) & np.isnan(wide_t)))


def _ulp(x: np.ndarray[Any, Any], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """The spacing of ``dtype`` at |x| (at least its smallest subnormal spacing)."""
    info = ml_dtypes.finfo(dtype)
    _, e = np.frexp(np.maximum(np.abs(x), float(info.smallest_normal)))
    return np.asarray(np.ldexp(float(info.eps), e - 1))


def _check(name: str, k: int, check: Any, args: list[Any], ours: np.ndarray[Any, Any],
           theirs: np.ndarray[Any, Any]) -> None:
    where = f"{name}: output {k}"
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, (where, ours.dtype, theirs.dtype)
    same = _same(ours, theirs)
    if check == "exact" or bool(same.all()):
        assert same.all(), (where, ours[~same], theirs[~same], np.argwhere(~same)[:5].tolist())
        return
    kind, param = check
    if ours.dtype.kind == "c":
        o = np.stack([ours.real, ours.imag]).astype(np.float64)
        t = np.stack([theirs.real, theirs.imag]).astype(np.float64)
        dt = np.dtype(np.float32 if ours.dtype == np.complex64 else np.float64)
    else:
        o, t, dt = ours.astype(np.float64), theirs.astype(np.float64), ours.dtype
    assert np.array_equal(np.isnan(o), np.isnan(t)), (where, "NaN at other places", o, t)
    assert np.array_equal(np.where(np.isinf(o), o, 0), np.where(np.isinf(t), t, 0)), (where, "Inf elsewhere", o, t)
    fin = np.isfinite(o)
    diff = np.where(fin, np.abs(o - t), 0.0)
    if kind == "ulps":
        allowed = param * _ulp(o, dt)
    else:
        allowed = np.asarray(param(args), np.float64)
    assert (diff <= allowed).all(), (where, kind, o[diff > allowed], t[diff > allowed])


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_evaluator_agrees_with_stablehlo_s_reference_interpreter(name: str, outcomes: dict[str, Outcome]) -> None:
    prog, o = PROGRAMS[name], outcomes[name]
    if o.died:
        assert name in ABORTS, f"the interpreter died on {name}: {o.died}"
        pytest.skip(f"StableHLO's interpreter aborts on {name} ({ABORTS[name]}): {o.died}")
    assert not o.failed, f"the interpreter refused {name}: {o.failed}"
    assert not o.ours_error, f"the evaluator refused {name}: {o.ours_error}"
    assert o.theirs is not None and o.ours is not None, name
    assert len(o.ours) == len(o.theirs), name
    checks = prog.checks if isinstance(prog.checks, list) else [prog.checks] * len(o.ours)
    xla: list[np.ndarray[Any, Any]] | None = None
    for k, (ours, theirs, check) in enumerate(zip(o.ours, o.theirs, checks, strict=True)):
        if (name, k) not in DISAGREE or (ours.shape == theirs.shape and _same(ours, theirs).all()):
            _check(name, k, check, prog.args, ours, theirs)
            continue
        if xla is None:  # the arbiter
            xla = [np.asarray(v) for v in xs.compile(xs.load_computation(o.path))(*prog.args)]
        assert _same(ours, xla[k]).all(), (name, k, ours, xla[k], theirs)


def test_the_interpreter_aborts_only_on_the_listed_programs(outcomes: dict[str, Outcome]) -> None:
    """The ledger of what the interpreter cannot run: each listed program killed the worker (the
    death was caught: this process is alive), and no other program did."""
    died = {n for n, o in outcomes.items() if o.died}
    assert died <= set(ABORTS), {n: outcomes[n].died for n in died - set(ABORTS)}
    assert {"chlo_erf", "rng_bit_generator_three_fry"} <= died  # ops it has no rule for: the worker caught it
    assert all("signal" in outcomes[n].died.lower() or "died" in outcomes[n].died.lower() for n in died), died


def test_the_checks_can_fail() -> None:
    """Each comparison rejects a value one ulp off (exact), five ulps off (ulps 4) and outside its bound."""
    a = np.array([1.0, 2.0, np.nan], np.float32)
    b = a.copy()
    b[1] = np.nextafter(b[1], np.float32(3))
    with pytest.raises(AssertionError):
        _check("t", 0, "exact", [], a, b)
    for _ in range(4):
        b[1] = np.nextafter(b[1], np.float32(3))
    with pytest.raises(AssertionError):
        _check("t", 0, ("ulps", 4), [], a, b)
    _check("t", 0, ("ulps", 5), [], a, b)
    with pytest.raises(AssertionError):
        _check("t", 0, ("bound", lambda args: np.full(3, 1e-9)), [], a, b)
    with pytest.raises(AssertionError):  # -0 is not +0
        _check("t", 0, "exact", [], np.array([0.0], np.float32), np.array([-0.0], np.float32))
    with pytest.raises(AssertionError):  # NaN where the other has a number
        _check("t", 0, ("ulps", 4), [], np.array([np.nan], np.float32), np.array([1.0], np.float32))

