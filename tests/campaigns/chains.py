"""Random chains of XLA ops checked against numpy (reliability campaign 3 of issue 9).

A single-op fuzzer never sees what XLA's algebraic simplifier and constant folder do to
*compositions* (``exp(a) * exp(b) -> exp(a + b)``, slices of pads of concatenations, converts
of converts, reductions of broadcasts...). This module draws random chains of 2 to 12 ops over
f32, f64, bf16, s32, u8 and pred operands, renders each as the xlasdk code that builds it, runs
it (in a child process, see ``harness.py``) twice: with the inputs as parameters and with the
same data as constants (so constant folding, a different code path, computes it), and checks
both results against an oracle written here in numpy from XLA's operation semantics.

The op table
------------
Element-wise unary (Abs Neg Exp Log Sqrt Tanh Floor Ceil Not), binary (Add Sub Mul Div Rem Max
Min And Or Xor ShiftLeft ShiftRightArithmetic ShiftRightLogical; the second operand a fresh
parameter, an earlier value, the same value, a Python scalar, or a lower-rank/size-1 operand
that broadcasts), Compare (six directions), Select (array or scalar predicate), Clamp (scalar or
array bounds, sometimes min > max), ConvertElementType (between all six types), Reshape,
Transpose, Broadcast, Slice (with strides), Rev, ConcatInDim, Pad (negative and interior
padding), Reduce (sum and max, any set of dimensions) and Dot (vector and matrix forms).
Integer semantics are XLA's (``shared/cases/cases.md``): wrap-around arithmetic; ``x / 0`` is -1
(signed) or all ones (unsigned), ``x % 0`` is ``x``, ``INT_MIN / -1`` is ``INT_MIN`` (C-03);
shifts by the bit width or more (the amount read as unsigned) give 0, or the sign fill for an
arithmetic right shift, which treats u8 as its signed bit pattern (C-05); float to integer
converts truncate, saturate and map NaN to 0, to pred is ``x != 0`` (C-04); Max, Min, Clamp and
max-reductions propagate NaN (C-01, C-02); pred Add/Mul/Max/Min are or/and/or/and.

Tolerances
----------
Integer and pred results, and everything shape ops move, are compared exactly. A float value is
represented by an *enclosure*: per element an interval ``[lo, hi]`` (float64) and a NaN state
(never / maybe / surely NaN); a result is accepted iff it is NaN where NaN is possible, and a
number inside ``[lo, hi]`` where a number is possible. Each op maps its operands' enclosures
through the op's exact (real) semantics, which is monotone piecewise for every op in the table,
then widens the bounds by the op's own error in units in the last place of the result type:

* correctly rounded ops (+ - * sqrt, narrowing converts): 1 ulp (0.5 for the rounding, 0.5
  for a fused multiply-add or a reassociation by the simplifier); Div: 2 ulps (XLA rewrites
  ``x / c`` to ``x * (1 / c)``, two roundings); Exp, Log, Tanh: 4 ulps (XLA:CPU's polynomial
  approximations and the constant folder's libm both stay within this);
* the continuous ops (+ - * / exp log sqrt tanh, sums and dots) first widen their inputs by 1
  ulp of the input type: a rewrite may round an intermediate differently (``exp(a) * exp(b) ->
  exp(a + b)`` rounds ``a + b`` once more), which the op's condition number then amplifies;
* sums and dots of n terms: ``n * eps * sum(|terms|)`` (the classic bound for any order of
  summation; XLA may reorder or split reductions and may accumulate bf16 in f32);
* bf16 arithmetic: XLA:CPU computes bf16 ops in f32 and may drop intermediate roundings (excess
  precision); enclosures of the real result widened by bf16 ulps contain both;
* XLA:CPU runs with flush-to-zero and denormals-are-zero, its constant folder without: a
  subnormal result may be 0, and a subnormal input may be read as 0;
* a comparison-based op (Max, Min, Clamp, max-reduce) may return a subnormal operand of either
  sign where the exact result is 0: XLA folds ``max(clamp(-1e-40, c, 2), 0)`` for a constant
  ``c = -0.5`` to -1e-40 (the max is lost; with ``c`` a parameter it gives 0). Reported as an XLA
  finding; allowed here;
* XLA rewrites ``x / broadcast(y)`` and ``x / constant`` to ``x * (1 / y)``, and at run time a
  subnormal ``1 / y`` is flushed to 0: for ``|y| >= 2**126`` (f32, bf16; ``2**1022`` for f64)
  the quotient may be ``x * 0`` (0, or NaN for an infinite ``x``) instead of ``x / y``
  (``1.7e9 / 3e38`` gives 0, ``inf / 3e38`` NaN). Reported as an XLA finding; allowed here so
  that the campaign can look past it;
* XLA:CPU compiles ``exp`` of a value that LLVM can prove is NaN into a store of ``poison``: the
  output stays uninitialized memory, different on each run (``exp(log(c - 1))`` where ``c`` is
  ``convert(p & ~p)``; ``exp(0 / 0)`` where the zero is ``p % p``). Reported as an XLA finding;
  an Exp of a surely-NaN value may give anything here;
* XLA's simplifier folds ``log(exp(x))`` to ``x`` even where ``exp(x)`` overflows or underflows
  (``log(exp(-1000.0))`` is -1000, not -inf): a Log of an Exp may also give the Exp's operand;
* a bound's rounding never crosses zero (the sign of a rounded result is the sign of the exact
  one) and rounding past the largest finite value gives infinity.

One XLA bug is kept out of the chains instead: XLA rewrites ``max(clamp(lo, x, hi), lo)`` to
``clamp(lo, x, hi)``, which is wrong where ``lo > hi`` (the clamp gives ``hi``, the max must give
``lo``; XLA returns ``hi``, for floats and integers, when ``lo`` is a parameter). The generator
does not make a Max of a Clamp with the Clamp's own lower bound.

Zero signs are not compared: -0.0 and +0.0 are the same number to the interval check. XLA does
not promise the sign of a zero through its rewrites (a simplifier that folds ``x + 0.0`` to ``x``
turns ``-0.0 + 0.0 = +0.0`` into -0.0), and IEEE comparisons (Compare, Max, Min, Clamp) do not
see it. Where the sign could matter downstream (a division by a zero), the divisor's enclosure
contains 0 and the quotient's enclosure is all of ``[-inf, inf]``, so it is not over-constrained
either.

Where an enclosure is too wide to decide a discrete result (a Compare whose operands' intervals
overlap, a float to integer convert whose interval spans an integer, a Select on such a
predicate), the element is *unknown* and not compared; the campaign reports the fraction of
elements compared.

Each executable runs twice; results that differ between the two runs (uninitialized or racy
output) are failures, except where the chain takes the Exp of a surely-NaN value (the XLA:CPU
bug above), which is counted apart as "known".

Public API: :func:`generate` (a seed to a :class:`Chain`), :meth:`Chain.source` (the xlasdk code),
:func:`evaluate` (the oracle), :func:`check` (an output against the oracle), :data:`CHILD_SOURCE`
(the child-process entry for ``harness``), :func:`run_campaign` (all of it, with figures).
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
from harness import Outcome, Task, run_batch

Arr = np.ndarray[Any, Any]
Shape = tuple[int, ...]

# -- element types ---------------------------------------------------------------------------------

DT: dict[str, Any] = {
    "f32": np.dtype(np.float32), "f64": np.dtype(np.float64), "bf16": np.dtype(ml_dtypes.bfloat16),
    "s32": np.dtype(np.int32), "u8": np.dtype(np.uint8), "pred": np.dtype(np.bool_),
}
FLOATS = ("f32", "f64", "bf16")
INTS = ("s32", "u8")
ALL = FLOATS + INTS + ("pred",)
_NPNAME = {"f32": "float32", "f64": "float64", "bf16": "bfloat16", "s32": "int32", "u8": "uint8", "pred": "bool"}
_CTOR = {
    "f32": "np.float32", "f64": "np.float64", "bf16": "ml_dtypes.bfloat16", "s32": "np.int32", "u8": "np.uint8",
    "pred": "np.bool_",
}
# (stored mantissa bits, minimum normal exponent, largest finite value)
_FINFO = {
    "f32": (23, -126, float(np.finfo(np.float32).max)),
    "f64": (52, -1022, float(np.finfo(np.float64).max)),
    "bf16": (7, -126, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)),
}
_IRANGE = {"s32": (-(2**31), 2**31 - 1), "u8": (0, 255), "pred": (0, 1)}
_BITS = {"s32": 32, "u8": 8}

MAX_SIZE = 256  # elements per value
MAX_RANK = 4

# ulps of the result type each op may add to the exact result (see the module docstring)
_K = {"Add": 1, "Sub": 1, "Mul": 1, "Div": 2, "Sqrt": 1, "Exp": 4, "Log": 4, "Tanh": 4}

# -- chains ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lit:
    """A scalar literal operand (a Python scalar beside an XlaOp, a Clamp bound, a Pad value)."""

    dt: str
    value: Any

    def render(self) -> str:
        v = self.value
        if self.dt in FLOATS:
            text = "float('nan')" if math.isnan(v) else ("float('inf')" if v == math.inf else (
                "-float('inf')" if v == -math.inf else repr(float(v))))
        elif self.dt == "pred":
            text = repr(bool(v))
        else:
            text = repr(int(v))
        return f"{_CTOR[self.dt]}({text})"

    def array(self) -> Arr:
        return np.asarray(self.value, dtype=DT[self.dt])


Ref = str | Lit


@dataclass
class Step:
    """``out = op(*ins, **attrs)``, a value of element type ``dt`` and dimensions ``shape``."""

    out: str
    op: str
    ins: tuple[Ref, ...]
    attrs: dict[str, Any]
    dt: str
    shape: Shape

    def render(self) -> str:
        a = [r.render() if isinstance(r, Lit) else r for r in self.ins]
        op, at = self.op, self.attrs
        if op in _UNARY_ALL or op in _BINARY_ALL:
            call = f"ops.{op}({', '.join(a)})"
        elif op == "Compare":
            call = f"ops.Compare({a[0]}, {a[1]}, {at['direction']!r})"
        elif op == "Select":
            call = f"ops.Select({a[0]}, {a[1]}, {a[2]})"
        elif op == "Clamp":
            call = f"ops.Clamp({a[0]}, {a[1]}, {a[2]})"
        elif op == "Convert":
            call = f"ops.ConvertElementType({a[0]}, np.dtype({_NPNAME[at['to']]!r}))"
        elif op == "Reshape":
            call = f"ops.Reshape({a[0]}, {list(at['dims'])})"
        elif op == "Transpose":
            call = f"ops.Transpose({a[0]}, {list(at['perm'])})"
        elif op == "Broadcast":
            call = f"ops.Broadcast({a[0]}, {list(at['sizes'])})"
        elif op == "Slice":
            call = f"ops.Slice({a[0]}, {list(at['start'])}, {list(at['limit'])}, {list(at['strides'])})"
        elif op == "Rev":
            call = f"ops.Rev({a[0]}, {list(at['dims'])})"
        elif op == "Concat":
            call = f"ops.ConcatInDim(b, [{', '.join(a)}], {at['dim']})"
        elif op == "Pad":
            cfg = [tuple(c) for c in at["config"]]
            call = f"ops.Pad({a[0]}, ops.Constant(b, {at['value'].render()}), {cfg})"
        elif op == "Reduce":
            fn = "Add" if at["kind"] == "sum" else "Max"
            call = (
                f"ops.Reduce(b, {a[0]}, ops.Constant(b, {at['init'].render()}), "
                f"lambda acc, x: ops.{fn}(acc, x), {list(at['dims'])})"
            )
        elif op == "Dot":
            call = f"ops.Dot({a[0]}, {a[1]})"
        else:  # pragma: no cover - the generator makes only the ops above
            raise AssertionError(op)
        return f"{self.out} = {call}"


@dataclass
class Chain:
    """A random chain: the leaves (parameters ``x0, x1, ...``) and the steps; the last step is the result."""

    seed: int
    leaves: list[Arr]
    steps: list[Step]

    @property
    def root(self) -> Step:
        return self.steps[-1]

    def source(self) -> str:
        """The xlasdk code that builds the chain: ``def build(b, x0, x1, ...)`` returning the root op."""
        args = ", ".join(["b"] + [f"x{i}" for i in range(len(self.leaves))])
        body = "\n".join("    " + s.render() for s in self.steps)
        return f"def build({args}):\n{body}\n    return {self.root.out}\n"

    def describe(self) -> str:
        leaves = "\n".join(
            f"# x{i}: {_NPNAME[_dt_name(a.dtype)]}{list(a.shape)} = {_short(a)}" for i, a in enumerate(self.leaves)
        )
        return f"# chain seed {self.seed}\n{leaves}\n{self.source()}"


def _dt_name(d: Any) -> str:
    for k, v in DT.items():
        if v == np.dtype(d):
            return k
    raise KeyError(d)


def _short(a: Arr) -> str:
    a = np.asarray(a).astype(np.float64) if a.dtype == DT["bf16"] else np.asarray(a)
    text = np.array2string(a, threshold=64, max_line_width=10**6, precision=9, separator=", ")
    return " ".join(text.split())


# -- generation ---------------------------------------------------------------------------------------

_UNARY = {
    "f32": ("Abs", "Neg", "Exp", "Log", "Sqrt", "Tanh", "Floor", "Ceil"),
    "s32": ("Abs", "Neg", "Not"),
    "u8": ("Neg", "Not"),
    "pred": ("Not",),
}
_UNARY["f64"] = _UNARY["bf16"] = _UNARY["f32"]
_BINARY = {
    "f32": ("Add", "Sub", "Mul", "Div", "Max", "Min"),
    "s32": ("Add", "Sub", "Mul", "Div", "Rem", "Max", "Min", "And", "Or", "Xor", "ShiftLeft",
            "ShiftRightArithmetic", "ShiftRightLogical"),
    "pred": ("Add", "Mul", "Max", "Min", "And", "Or", "Xor"),
}
_BINARY["f64"] = _BINARY["bf16"] = _BINARY["f32"]
_BINARY["u8"] = _BINARY["s32"]
_UNARY_ALL = frozenset(n for v in _UNARY.values() for n in v)
_BINARY_ALL = frozenset(n for v in _BINARY.values() for n in v)
_DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")

_FLOAT_SPECIALS = (0.0, -0.0, 1.0, -1.0, 0.5, 2.0, math.inf, -math.inf, math.nan, 1e30, -1e30, 1e-40, -1e-40,
                   88.5, 3e38, 1e-30, 65504.0)
_S32_SPECIALS = (-(2**31), 2**31 - 1, -1, 0, 1, 2, 7, 8, 31, 32, 33, 40, 255, 256)
_U8_SPECIALS = (0, 1, 7, 8, 9, 127, 128, 255)
# integer right-hand sides around the edge cases of Div/Rem (C-03) and shifts (C-05)
_EDGES = {
    "divisor": {"s32": (0, 0, -1, -1, 1, 2, -2, 3, -(2**31)), "u8": (0, 0, 1, 2, 3, 255)},
    "shift": {
        "s32": (0, 1, 7, 30, 31, 32, 33, 64, -1, -32, 2**31 - 1, -(2**31)),
        "u8": (0, 1, 6, 7, 8, 9, 16, 128, 255),
    },
}


def _size(shape: Shape) -> int:
    return math.prod(shape)


class _Gen:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.r = random.Random(seed)
        self.g = np.random.default_rng(seed)
        self.leaves: list[Arr] = []
        self.values: dict[str, tuple[str, Shape]] = {}
        self.steps: list[Step] = []

    # data
    def data(self, dt: str, shape: Shape, kind: str | None = None) -> Arr:
        """Random data; ``kind`` "divisor" or "shift" draws integers around the edge cases of Div/Rem or shifts."""
        n = _size(shape)
        r, g = self.r, self.g
        if kind is not None and dt in INTS:
            edges = _EDGES[kind][dt]
            out = np.array(edges, dtype=np.int64)[g.integers(0, len(edges), n)]
            lo, hi = _IRANGE[dt]
            wide = g.integers(lo, hi + 1, n, dtype=np.int64)
            return np.where(g.random(n) < 0.75, out, wide).astype(DT[dt]).reshape(shape)
        if dt == "pred":
            return (g.random(n) < r.choice((0.2, 0.5, 0.8))).reshape(shape)
        special = r.choice((0.0, 0.0, 0.05, 0.2))
        if dt in FLOATS:
            out = g.normal(0.0, 2.0, n)
            pick = g.random(n)
            small = g.integers(-3, 4, n).astype(np.float64)
            wide = g.choice((-1.0, 1.0), n) * 10.0 ** g.uniform(-6, 6, n)
            out = np.where(pick < 0.2, small, out)
            out = np.where((pick >= 0.2) & (pick < 0.3), wide, out)
            sp = np.array(_FLOAT_SPECIALS)[g.integers(0, len(_FLOAT_SPECIALS), n)]
            out = np.where(g.random(n) < special, sp, out)
            with np.errstate(over="ignore"):
                return out.astype(DT[dt]).reshape(shape)
        lo, hi = _IRANGE[dt]
        specials = _S32_SPECIALS if dt == "s32" else _U8_SPECIALS
        full = g.integers(lo, hi + 1, n, dtype=np.int64)
        small = g.integers(-10 if dt == "s32" else 0, 11, n, dtype=np.int64)
        sp = np.array(specials, dtype=np.int64)[g.integers(0, len(specials), n)]
        pick = g.random(n)
        out = np.where(pick < 0.5, small, full)
        out = np.where(g.random(n) < max(special, 0.05), sp, out)
        return out.astype(DT[dt]).reshape(shape)

    def scalar(self, dt: str, allow_nan: bool = True, kind: str | None = None) -> Lit:
        while True:
            v = self.data(dt, (), kind).item()
            if dt in FLOATS:
                v = float(v)
                if math.isnan(v) and not allow_nan:
                    continue
            return Lit(dt, v)

    # values
    def leaf(self, dt: str, shape: Shape, kind: str | None = None) -> str:
        name = f"x{len(self.leaves)}"
        self.leaves.append(self.data(dt, shape, kind))
        self.values[name] = (dt, shape)
        return name

    def emit(self, op: str, ins: Sequence[Ref], attrs: dict[str, Any], dt: str, shape: Shape) -> str:
        name = f"v{len(self.steps)}"
        self.steps.append(Step(name, op, tuple(ins), attrs, dt, tuple(shape)))
        self.values[name] = (dt, tuple(shape))
        return name

    def step_of(self, name: str) -> Step | None:
        """The step that made value ``name`` (None for a leaf)."""
        return next((s for s in self.steps if s.out == name), None)

    def same(self, dt: str, shape: Shape, exclude: str | None = None) -> str | None:
        """An earlier value of this type and shape, if any."""
        names = [n for n, v in self.values.items() if v == (dt, shape) and n != exclude]
        return self.r.choice(names) if names else None

    def operand(self, cur: str, kind: str | None = None) -> Ref:
        """A second operand for an element-wise op on ``cur`` (new data drawn as ``kind``, see :meth:`data`)."""
        dt, shape = self.values[cur]
        x = self.r.random()
        if x < 0.45:
            return self.leaf(dt, shape, kind)
        if x < 0.6:
            return self.same(dt, shape, exclude=cur) or self.leaf(dt, shape, kind)
        if x < 0.7:
            return cur
        if x < 0.85:
            return self.scalar(dt, kind=kind)
        if shape and self.r.random() < 0.7:  # same rank with some sizes 1 (degenerate broadcasting)
            return self.leaf(dt, tuple(1 if self.r.random() < 0.5 else d for d in shape), kind)
        return self.leaf(dt, (), kind)


def _factor(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


def _step_unary(g: _Gen, cur: str) -> str | None:
    dt, shape = g.values[cur]
    return g.emit(g.r.choice(_UNARY[dt]), [cur], {}, dt, shape)


def _step_binary(g: _Gen, cur: str) -> str | None:
    dt, shape = g.values[cur]
    names = _BINARY[dt]
    # integers: the ops with edge cases (x / 0, INT_MIN / -1, shifts by >= the width) twice as often
    op = g.r.choices(names, [2.0 if n in ("Div", "Rem") or n.startswith("Shift") else 1.0 for n in names])[0]
    kind = "divisor" if op in ("Div", "Rem") else ("shift" if op.startswith("Shift") else None)
    other = g.operand(cur, kind if dt in INTS else None)
    clamp = g.step_of(cur)
    if op == "Max" and clamp is not None and clamp.op == "Clamp" and other == clamp.ins[0]:
        # XLA rewrites max(clamp(lo, x, hi), lo) to clamp(lo, x, hi), wrong where lo > hi (a known
        # XLA finding, see the module docstring): another operand instead
        other = g.leaf(dt, shape)
    ins = [cur, other]
    if g.r.random() < (0.1 if kind else 0.3):
        ins.reverse()
    return g.emit(op, ins, {}, dt, shape)


def _step_compare(g: _Gen, cur: str) -> str | None:
    dt, shape = g.values[cur]
    ins = [cur, g.operand(cur)]
    if g.r.random() < 0.3:
        ins.reverse()
    return g.emit("Compare", ins, {"direction": g.r.choice(_DIRECTIONS)}, "pred", shape)


def _step_select(g: _Gen, cur: str) -> str | None:
    dt, shape = g.values[cur]
    r = g.r
    if dt == "pred":  # cur is the predicate; the branches are new values of any type
        bdt = r.choice(ALL)
        bshape = shape if shape or r.random() < 0.5 else tuple(r.randint(1, 4) for _ in range(r.randint(1, 2)))
        t = g.same(bdt, bshape) if r.random() < 0.3 else None
        t = t or g.leaf(bdt, bshape)
        f = g.leaf(bdt, bshape)
        return g.emit("Select", [cur, t, f], {}, bdt, bshape)
    pshape = shape if r.random() < 0.8 else ()
    p = (g.same("pred", pshape) if r.random() < 0.4 else None) or g.leaf("pred", pshape)
    other = g.same(dt, shape, exclude=cur) if r.random() < 0.3 else None
    other = other or g.leaf(dt, shape)
    ins = [p, cur, other] if r.random() < 0.5 else [p, other, cur]
    return g.emit("Select", ins, {}, dt, shape)


def _step_clamp(g: _Gen, cur: str) -> str | None:
    dt, shape = g.values[cur]
    if dt == "pred":
        return None
    if g.r.random() < 0.8:
        lo, hi = g.scalar(dt, allow_nan=False), g.scalar(dt, allow_nan=False)
        if (lo.value > hi.value) == (g.r.random() < 0.8):  # mostly lo <= hi; sometimes swapped
            lo, hi = hi, lo
        return g.emit("Clamp", [lo, cur, hi], {}, dt, shape)
    return g.emit("Clamp", [g.leaf(dt, shape), cur, g.leaf(dt, shape)], {}, dt, shape)


def _step_convert(g: _Gen, cur: str) -> str | None:
    dt, shape = g.values[cur]
    to = g.r.choice([d for d in ALL if d != dt])
    return g.emit("Convert", [cur], {"to": to}, to, shape)


def _step_reshape(g: _Gen, cur: str) -> str | None:
    dt, shape = g.values[cur]
    n = _size(shape)
    k = g.r.randint(0 if n == 1 else 1, MAX_RANK)
    dims = [1] * k
    for p in _factor(n):
        dims[g.r.randrange(k)] *= p
    return g.emit("Reshape", [cur], {"dims": tuple(dims)}, dt, tuple(dims))


def _step_transpose(g: _Gen, cur: str) -> str | None:
    dt, shape = g.values[cur]
    if len(shape) < 2:
        return None
    perm = list(range(len(shape)))
    g.r.shuffle(perm)
    return g.emit("Transpose", [cur], {"perm": tuple(perm)}, dt, tuple(shape[p] for p in perm))


def _step_broadcast(g: _Gen, cur: str) -> str | None:
    dt, shape = g.values[cur]
    if len(shape) >= MAX_RANK:
        return None
    sizes = tuple(g.r.randint(1, 3) for _ in range(g.r.randint(1, MAX_RANK - len(shape))))
    if _size(sizes + shape) > MAX_SIZE:
        return None
    return g.emit("Broadcast", [cur], {"sizes": sizes}, dt, sizes + shape)


def _step_slice(g: _Gen, cur: str) -> str | None:
    dt, shape = g.values[cur]
    if not shape:
        return None
    start, limit, strides = [], [], []
    for d in shape:
        s = g.r.randint(0, d - 1)
        lim = g.r.randint(s + 1, d)
        start.append(s)
        limit.append(lim)
        strides.append(g.r.choice((1, 1, 2, 3)))
    out = tuple(-(-(lim - s) // st) for s, lim, st in zip(start, limit, strides, strict=True))
    return g.emit("Slice", [cur], {"start": tuple(start), "limit": tuple(limit), "strides": tuple(strides)}, dt, out)


def _step_rev(g: _Gen, cur: str) -> str | None:
    dt, shape = g.values[cur]
    if not shape:
        return None
    dims = sorted(g.r.sample(range(len(shape)), g.r.randint(1, len(shape))))
    return g.emit("Rev", [cur], {"dims": tuple(dims)}, dt, shape)


def _step_concat(g: _Gen, cur: str) -> str | None:
    dt, shape = g.values[cur]
    if not shape:
        return None
    d = g.r.randrange(len(shape))
    x = g.r.random()
    if x < 0.25:
        other = cur
    else:
        oshape = shape[:d] + (g.r.randint(1, 3),) + shape[d + 1:]
        other = (g.same(dt, oshape) if x < 0.4 else None) or g.leaf(dt, oshape)
    out = list(shape)
    out[d] += g.values[other][1][d]
    if _size(tuple(out)) > MAX_SIZE:
        return None
    ins = [cur, other] if g.r.random() < 0.6 else [other, cur]
    return g.emit("Concat", ins, {"dim": d}, dt, tuple(out))


def _step_pad(g: _Gen, cur: str) -> str | None:
    dt, shape = g.values[cur]
    if not shape:
        return None
    for _ in range(20):
        cfg, out = [], []
        for d in shape:
            interior = g.r.choice((0, 0, 1, 2))
            base = d + (d - 1) * interior
            lo = g.r.randint(-(base - 1), 2)
            hi = g.r.randint(-(base - 1 + min(lo, 0)), 2)
            cfg.append((lo, hi, interior))
            out.append(lo + hi + base)
        if all(o >= 1 for o in out) and _size(tuple(out)) <= MAX_SIZE:
            return g.emit("Pad", [cur], {"config": tuple(cfg), "value": g.scalar(dt)}, dt, tuple(out))
    return None


def _step_reduce(g: _Gen, cur: str) -> str | None:
    dt, shape = g.values[cur]
    if not shape:
        return None
    dims = tuple(sorted(g.r.sample(range(len(shape)), g.r.randint(1, len(shape)))))
    kind = g.r.choice(("sum", "max"))
    if kind == "sum":
        init = Lit(dt, False if dt == "pred" else 0)
    elif dt in FLOATS:
        init = Lit(dt, -math.inf)
    else:
        init = Lit(dt, _IRANGE[dt][0] if dt != "pred" else False)
    out = tuple(s for i, s in enumerate(shape) if i not in dims)
    return g.emit("Reduce", [cur], {"dims": dims, "kind": kind, "init": init}, dt, out)


def _step_dot(g: _Gen, cur: str) -> str | None:
    dt, shape = g.values[cur]
    if dt == "pred" or len(shape) not in (1, 2):
        return None
    r = g.r
    if r.random() < 0.6:  # cur on the left: (.., k) . (k[, n])
        k = shape[-1]
        oshape = (k,) if r.random() < 0.4 else (k, r.randint(1, 4))
        other = g.leaf(dt, oshape)
        out = shape[:-1] + oshape[1:]
        ins = [cur, other]
    else:  # cur on the right: ([m,] k) . (k[, n])
        k = shape[0]
        oshape = (k,) if r.random() < 0.4 else (r.randint(1, 4), k)
        other = g.leaf(dt, oshape)
        out = oshape[:-1] + shape[1:]
        ins = [other, cur]
    return g.emit("Dot", ins, {}, dt, out)


_STEPS: list[tuple[Callable[[_Gen, str], str | None], float]] = [
    (_step_unary, 3.0), (_step_binary, 5.0), (_step_compare, 1.2), (_step_select, 1.2), (_step_clamp, 0.8),
    (_step_convert, 1.5), (_step_reshape, 1.0), (_step_transpose, 0.8), (_step_broadcast, 0.6),
    (_step_slice, 1.0), (_step_rev, 0.6), (_step_concat, 0.8), (_step_pad, 0.8), (_step_reduce, 1.0),
    (_step_dot, 0.8),
]


# the first operand's type (f32, f64, bf16, s32, u8, pred): Compare and Convert make many pred values anyway
_FIRST_WEIGHTS = (2.0, 1.0, 1.0, 2.0, 1.5, 0.5)


def generate(seed: int) -> Chain:
    """The chain for ``seed``: 2 to 12 steps on a first parameter of a random type and shape."""
    g = _Gen(seed)
    r = g.r
    rank = r.choice((0, 1, 1, 2, 2, 2, 3, 3, 4))
    shape = tuple(r.randint(1, 4) for _ in range(rank))
    cur = g.leaf(r.choices(ALL, _FIRST_WEIGHTS)[0], shape)
    depth = r.randint(2, 12)
    fns, weights = zip(*_STEPS, strict=True)
    while len(g.steps) < depth:
        fn = r.choices(fns, weights)[0]
        nxt = fn(g, cur)
        if nxt is not None:
            cur = nxt
    return Chain(seed, g.leaves, g.steps)


# -- the oracle: enclosures for floats, known values for integers and pred ---------------------------


@dataclass
class FVal:
    """A float value: per element an interval ``[lo, hi]`` and a NaN state (0 never, 1 maybe, 2 surely)."""

    dt: str
    lo: Arr
    hi: Arr
    nan: Arr

    def map(self, f: Callable[[Arr], Arr]) -> FVal:
        return FVal(self.dt, f(self.lo), f(self.hi), f(self.nan))

    @property
    def shape(self) -> Shape:
        return tuple(self.lo.shape)


@dataclass
class IVal:
    """An integer or pred value: the values, and which elements the oracle knows exactly."""

    dt: str
    val: Arr
    known: Arr

    def map(self, f: Callable[[Arr], Arr]) -> IVal:
        return IVal(self.dt, f(self.val), f(self.known))

    @property
    def shape(self) -> Shape:
        return tuple(self.val.shape)


Val = FVal | IVal


def _ulp(x: Arr, dt: str) -> Arr:
    nmant, minexp, _ = _FINFO[dt]
    a = np.abs(x)
    _, e = np.frexp(np.where(np.isfinite(a), a, 1.0))
    u = np.ldexp(1.0, (e - 1 - nmant).astype(np.int64))
    u = np.maximum(u, 2.0 ** (minexp - nmant))
    return np.where(a == 0, 2.0 ** (minexp - nmant), u)


def _round_bounds(lo: Arr, hi: Arr, dt: str, k: float) -> tuple[Arr, Arr]:
    """Widen ``[lo, hi]`` by ``k`` ulps of ``dt``, never across zero; overflow and flush-to-zero."""
    _, minexp, maxf = _FINFO[dt]
    tiny = 2.0**minexp
    lo2 = lo - k * _ulp(lo, dt) if k else lo.copy()
    hi2 = hi + k * _ulp(hi, dt) if k else hi.copy()
    lo2 = np.where(lo >= 0, np.maximum(lo2, 0.0), lo2)
    hi2 = np.where(hi <= 0, np.minimum(hi2, 0.0), hi2)
    hi2 = np.where(hi2 > maxf, np.inf, hi2)
    lo2 = np.where(lo2 < -maxf, -np.inf, lo2)
    lo2 = np.where(np.isfinite(lo) & (lo2 > maxf), maxf, lo2)
    hi2 = np.where(np.isfinite(hi) & (hi2 < -maxf), -maxf, hi2)
    lo2 = np.where((lo2 > 0) & (lo2 < tiny), 0.0, lo2)
    hi2 = np.where((hi2 < 0) & (hi2 > -tiny), 0.0, hi2)
    return lo2, hi2


def _finish(dt: str, lo: Arr, hi: Arr, nan: Arr, k: float) -> FVal:
    lo, hi, nan = np.broadcast_arrays(lo, hi, nan)
    lo, hi = _round_bounds(np.asarray(lo, np.float64), np.asarray(hi, np.float64), dt, k)
    nan = np.asarray(nan, np.uint8).copy()
    bad = np.isnan(lo) | np.isnan(hi)
    nan[bad & (nan == 0)] = 1
    sure = nan == 2
    return FVal(dt, np.where(sure | bad, -np.inf, lo), np.where(sure | bad, np.inf, hi), nan)


def _slack(v: FVal) -> tuple[Arr, Arr]:
    """The input widened by one ulp of its type (rewrites may round an intermediate differently)."""
    lo, hi = _round_bounds(v.lo, v.hi, v.dt, 1)
    return lo, hi


def _leaf(a: Arr) -> Val:
    dt = _dt_name(a.dtype)
    if dt in FLOATS:
        x = a.astype(np.float64)
        nan = np.isnan(x)
        tiny = 2.0 ** _FINFO[dt][1]
        sub = (np.abs(x) < tiny) & (x != 0)  # may be read as zero (denormals-are-zero)
        lo = np.where(nan, -np.inf, np.where(sub, np.minimum(x, 0.0), x))
        hi = np.where(nan, np.inf, np.where(sub, np.maximum(x, 0.0), x))
        return FVal(dt, lo, hi, nan.astype(np.uint8) * 2)
    return IVal(dt, a.copy(), np.ones(a.shape, bool))


def _combine_nan(*nans: Arr) -> Arr:
    return np.maximum.reduce(np.broadcast_arrays(*nans)) if len(nans) > 1 else nans[0]


def _candidates(f: Callable[[Arr, Arr], Arr], alo: Arr, ahi: Arr, blo: Arr, bhi: Arr) -> tuple[Arr, Arr, Arr]:
    """Bounds of ``f`` over a box, from its corners (``f`` monotone in each argument).

    An interval with an infinite end and more than one point also holds finite values, where
    ``f`` may not be NaN though it is at the infinite corner (``0 * x``, ``x / inf``): the largest
    finite numbers stand in for such ends as extra corners.
    """
    big = np.finfo(np.float64).max

    def ends(lo: Arr, hi: Arr) -> list[Arr]:
        wide = lo != hi
        return [lo, hi, np.where(wide & (lo == -np.inf), -big, lo), np.where(wide & (hi == np.inf), big, hi)]

    c = np.stack(np.broadcast_arrays(*(f(x, y) for x in ends(alo, ahi) for y in ends(blo, bhi))))
    isn = np.isnan(c)
    alln = isn.all(0)
    filled_lo = np.where(isn, np.inf, c).min(0)
    filled_hi = np.where(isn, -np.inf, c).max(0)
    nan = np.where(alln, 2, np.where(isn.any(0), 1, 0)).astype(np.uint8)
    return np.where(alln, -np.inf, filled_lo), np.where(alln, np.inf, filled_hi), nan


def _ties(dt: str, lo: Arr, hi: Arr, *vals: FVal) -> tuple[Arr, Arr]:
    """Comparison-based ops (Max, Min, Clamp, max-reductions) where a subnormal meets zero.

    Where the result is (near) zero it may be a subnormal operand of either sign: XLA folds
    ``max(clamp(-1e-40, c, 2), 0)`` with a constant ``c = -0.5`` to -1e-40 (see the module docstring).
    """
    tiny = 2.0 ** _FINFO[dt][1]
    neg = np.minimum.reduce(np.broadcast_arrays(*(np.where((v.lo < 0) & (v.lo > -tiny), v.lo, 0.0) for v in vals)))
    pos = np.maximum.reduce(np.broadcast_arrays(*(np.where((v.hi > 0) & (v.hi < tiny), v.hi, 0.0) for v in vals)))
    lo = np.where((lo >= 0) & (lo < tiny), np.minimum(lo, neg), lo)
    hi = np.where((hi <= 0) & (hi > -tiny), np.maximum(hi, pos), hi)
    return lo, hi


def _mul_nan(alo: Arr, ahi: Arr, blo: Arr, bhi: Arr) -> Arr:
    """Where a product may be ``0 * inf`` (NaN): one interval holds 0 (inside, where the corners miss it)
    and the other reaches an infinity."""
    a0, b0 = (alo <= 0) & (ahi >= 0), (blo <= 0) & (bhi >= 0)
    ainf, binf = np.isinf(alo) | np.isinf(ahi), np.isinf(blo) | np.isinf(bhi)
    return np.where((a0 & binf) | (b0 & ainf), 1, 0).astype(np.uint8)


def _f_binary(op: str, a: FVal, b: FVal) -> FVal:
    dt = a.dt
    nan_in = _combine_nan(a.nan, b.nan)
    if op in ("Max", "Min"):
        f = np.maximum if op == "Max" else np.minimum
        return _finish(dt, *_ties(dt, f(a.lo, b.lo), f(a.hi, b.hi), a, b), nan_in, 0)
    alo, ahi = _slack(a)
    blo, bhi = _slack(b)
    if op == "Div":
        zero_in = (blo <= 0) & (bhi >= 0)
        lo, hi, nan = _candidates(np.divide, alo, ahi, np.where(zero_in, 1.0, blo), np.where(zero_in, 1.0, bhi))
        num_zero_or_inf = ((alo <= 0) & (ahi >= 0)) | np.isinf(alo) | np.isinf(ahi)
        lo = np.where(zero_in, -np.inf, lo)
        hi = np.where(zero_in, np.inf, hi)
        zero_by_zero = (alo == 0) & (ahi == 0) & (blo == 0) & (bhi == 0)  # 0 / 0, whatever the signs
        nan = np.where(zero_in, np.where(zero_by_zero, 2, np.where(num_zero_or_inf, 1, 0)), nan)
        # XLA rewrites x / broadcast(y) to x * broadcast(1 / y) (and x / c to x * (1 / c)); XLA:CPU then
        # flushes a subnormal 1 / y to zero, so x / 3e38 is 0 at run time even for x = 1e9. Allowed here:
        # where 1 / y can be subnormal, the result may also be x times 0 (NaN for an infinite x).
        _, minexp, _ = _FINFO[dt]
        big = ~zero_in & (np.maximum(np.abs(blo), np.abs(bhi)) * 2.0**minexp >= 0.5)
        if big.any():
            rlo, rhi = 1.0 / np.where(zero_in, 1.0, bhi), 1.0 / np.where(zero_in, 1.0, blo)
            rlo, rhi = np.minimum(rlo, 0.0), np.maximum(rhi, 0.0)  # 1 / y or a flushed 0
            plo, phi, pnan = _candidates(np.multiply, alo, ahi, rlo, rhi)
            pnan = np.maximum(pnan, _mul_nan(alo, ahi, rlo, rhi))
            lo, hi = np.where(big, np.minimum(lo, plo), lo), np.where(big, np.maximum(hi, phi), hi)
            nan = np.where(big, np.maximum(nan, pnan), nan)
    else:
        f = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}[op]
        lo, hi, nan = _candidates(f, alo, ahi, blo, bhi)
        if op == "Mul":
            nan = np.maximum(nan, _mul_nan(alo, ahi, blo, bhi))
    return _finish(dt, lo, hi, _combine_nan(nan_in, nan), _K[op])


def _f_unary(op: str, a: FVal) -> FVal:
    dt = a.dt
    if op == "Neg":
        return _finish(dt, -a.hi, -a.lo, a.nan, 0)
    if op == "Abs":
        lo = np.where(a.lo >= 0, a.lo, np.where(a.hi <= 0, -a.hi, 0.0))
        hi = np.maximum(np.abs(a.lo), np.abs(a.hi))
        return _finish(dt, lo, hi, a.nan, 0)
    if op in ("Floor", "Ceil"):
        f = np.floor if op == "Floor" else np.ceil
        return _finish(dt, f(a.lo), f(a.hi), a.nan, 0)
    lo, hi = _slack(a)
    if op in ("Exp", "Tanh"):
        f = np.exp if op == "Exp" else np.tanh
        r = _finish(dt, f(lo), f(hi), a.nan, _K[op])
        if op == "Exp":
            # XLA:CPU bug: exp of a value LLVM can prove is NaN stores poison, i.e. leaves the output
            # uninitialized (exp(log(c - 1)) for a provable c = 0). Anything goes where the input is surely NaN.
            sure = r.nan == 2
            r = FVal(dt, np.where(sure, -np.inf, r.lo), np.where(sure, np.inf, r.hi), np.where(sure, 1, r.nan))
        return r
    # Log and Sqrt: NaN below zero
    f = np.log if op == "Log" else np.sqrt
    neg_all = hi < 0
    neg_some = lo < 0
    nan = np.where(neg_all, 2, np.where(neg_some, 1, 0)).astype(np.uint8)
    flo = np.where(neg_some, -np.inf if op == "Log" else 0.0, f(np.maximum(lo, 0.0)))
    fhi = f(np.maximum(hi, 0.0))
    return _finish(dt, flo, fhi, _combine_nan(a.nan, nan), _K[op])


def _f_compare(d: str, a: FVal, b: FVal) -> IVal:
    a_lo, a_hi, b_lo, b_hi = np.broadcast_arrays(a.lo, a.hi, b.lo, b.hi)
    if d in ("LT", "GT"):
        x_lo, x_hi, y_lo, y_hi = (a_lo, a_hi, b_lo, b_hi) if d == "LT" else (b_lo, b_hi, a_lo, a_hi)
        yes, no = x_hi < y_lo, x_lo >= y_hi
    elif d in ("LE", "GE"):
        x_lo, x_hi, y_lo, y_hi = (a_lo, a_hi, b_lo, b_hi) if d == "LE" else (b_lo, b_hi, a_lo, a_hi)
        yes, no = x_hi <= y_lo, x_lo > y_hi
    else:
        eq_yes = (a_lo == a_hi) & (b_lo == b_hi) & (a_lo == b_lo)
        eq_no = (a_hi < b_lo) | (b_hi < a_lo)
        yes, no = (eq_yes, eq_no) if d == "EQ" else (eq_no, eq_yes)
    nan = _combine_nan(a.nan, b.nan)
    nan, yes, no = np.broadcast_arrays(nan, yes, no)
    val = np.where(nan == 2, d == "NE", yes)
    known = np.where(nan == 2, True, np.where(nan == 1, False, yes | no))
    return IVal("pred", val.astype(bool), known.astype(bool))


def _int_binary(op: str, dt: str, a: Arr, b: Arr) -> Arr:
    if dt == "pred":
        if op in ("Add", "Max", "Or"):
            return a | b
        if op in ("Mul", "Min", "And"):
            return a & b
        return a ^ b  # Xor
    a64, b64 = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
    signed = dt == "s32"
    w = _BITS[dt]
    mask = (1 << w) - 1
    if op == "Add":
        r = a64 + b64
    elif op == "Sub":
        r = a64 - b64
    elif op == "Mul":
        r = (a64.astype(np.uint64) * b64.astype(np.uint64)).astype(np.int64)  # mod 2^64, exact mod 2^w
    elif op in ("Div", "Rem"):
        zero = b64 == 0
        safe = np.where(zero, 1, b64)
        q = np.abs(a64) // np.abs(safe) * np.sign(a64) * np.sign(safe)  # truncates toward zero
        if op == "Div":
            r = np.where(zero, -1 if signed else mask, q)
        else:
            r = np.where(zero, a64, a64 - q * safe)
    elif op == "Max":
        r = np.maximum(a64, b64)
    elif op == "Min":
        r = np.minimum(a64, b64)
    elif op == "And":
        r = a64 & b64
    elif op == "Or":
        r = a64 | b64
    elif op == "Xor":
        r = a64 ^ b64
    else:  # shifts: the amount is read as unsigned, the operand's bits as unsigned (logical) or signed
        amount = b64 & mask
        ua = a64 & mask
        sa = np.where(ua >= 1 << (w - 1), ua - (1 << w), ua)
        s = np.minimum(amount, w - 1)
        big = amount >= w
        if op == "ShiftLeft":
            r = np.where(big, 0, (ua << s) & mask)
        elif op == "ShiftRightLogical":
            r = np.where(big, 0, ua >> s)
        else:
            r = np.where(big, np.where(sa < 0, -1, 0), sa >> s)
    return (np.asarray(r, np.int64) & mask).astype(np.uint64).astype(DT[dt]) if not signed else \
        np.asarray(r, np.int64).astype(np.int32)


def _to_val(env: dict[str, Val], ref: Ref) -> Val:
    if isinstance(ref, Lit):
        return _leaf(ref.array())
    return env[ref]


def _convert(v: Val, to: str) -> Val:
    if isinstance(v, IVal):
        if to in FLOATS:
            exact = v.val.astype(np.float64)
            if v.dt == "s32" and to == "f32":
                lo = hi = exact.astype(np.float32).astype(np.float64)  # round to nearest even, as XLA
                k = 0.0
            else:
                lo = hi = exact
                k = 0.0 if v.dt != "s32" or to == "f64" else 1.0  # s32 -> bf16 may round twice
            rlo, rhi = _IRANGE[v.dt]
            lo = np.where(v.known, lo, rlo)
            hi = np.where(v.known, hi, rhi)
            return _finish(to, lo, hi, np.zeros(v.shape, np.uint8), k)
        if to == "pred":
            return IVal(to, v.val != 0, v.known.copy())
        wide = v.val.astype(np.int64)
        val = (wide & 0xFF).astype(np.uint8) if to == "u8" else wide.astype(np.int32)
        return IVal(to, val, v.known.copy())
    if to in FLOATS:
        if _FINFO[to][0] >= _FINFO[v.dt][0]:  # widening: exact
            return FVal(to, v.lo.copy(), v.hi.copy(), v.nan.copy())
        with np.errstate(all="ignore"):
            lo = v.lo.astype(DT[to]).astype(np.float64)
            hi = v.hi.astype(DT[to]).astype(np.float64)
        k = 1.0 if (v.dt, to) == ("f64", "bf16") else 0.0  # f64 -> bf16 may round twice (through f32)
        return _finish(to, lo, hi, v.nan, k)
    if to == "pred":  # x != 0; NaN is true
        yes = (v.lo > 0) | (v.hi < 0) | (v.nan == 2)
        no = (v.lo == 0) & (v.hi == 0) & (v.nan == 0)
        return IVal(to, yes, yes | no)
    rlo, rhi = _IRANGE[to]

    def g(x: Arr) -> Arr:
        return np.clip(np.trunc(np.nan_to_num(x, nan=0.0, posinf=rhi, neginf=rlo)), rlo, rhi)

    glo, ghi = g(v.lo), g(v.hi)
    same = glo == ghi
    known = ((v.nan == 0) & same) | (v.nan == 2) | ((v.nan == 1) & same & (glo == 0))
    val = np.where(v.nan == 2, 0, glo).astype(np.int64)
    return IVal(to, val.astype(DT[to]), known)


def _pad_array(a: Arr, fill: Any, config: Sequence[tuple[int, int, int]]) -> Arr:
    for axis, (lo, hi, interior) in enumerate(config):
        d = a.shape[axis]
        base = d + max(d - 1, 0) * interior
        shape = list(a.shape)
        shape[axis] = base + max(lo, 0) + max(hi, 0)
        out = np.full(shape, fill, dtype=a.dtype)
        idx = [slice(None)] * a.ndim
        idx[axis] = slice(max(lo, 0), max(lo, 0) + base, interior + 1)
        out[tuple(idx)] = a
        idx[axis] = slice(max(-lo, 0), shape[axis] - max(-hi, 0))
        a = out[tuple(idx)]
    return a


def _reduce(v: Val, dims: tuple[int, ...], kind: str) -> Val:
    ax = tuple(dims)
    if isinstance(v, IVal):
        known = v.known.all(axis=ax)
        if v.dt == "pred":
            return IVal("pred", v.val.any(axis=ax), known)
        if kind == "max":
            return IVal(v.dt, v.val.max(axis=ax), known)
        s = v.val.astype(np.int64).sum(axis=ax)
        return IVal(v.dt, (s & 0xFF).astype(np.uint8) if v.dt == "u8" else s.astype(np.int32), known)
    nan = v.nan.max(axis=ax)
    if kind == "max":
        tiny = 2.0 ** _FINFO[v.dt][1]
        sub = FVal(v.dt, np.where((v.lo < 0) & (v.lo > -tiny), v.lo, 0.0).min(axis=ax),
                   np.where((v.hi > 0) & (v.hi < tiny), v.hi, 0.0).max(axis=ax), nan)
        return _finish(v.dt, *_ties(v.dt, v.lo.max(axis=ax), v.hi.max(axis=ax), sub), nan, 0)
    lo, hi = _slack(v)
    n = math.prod(v.lo.shape[i] for i in ax)
    return _sum_bounds(v.dt, lo, hi, nan, ax, n, v.lo)


def _sum_bounds(dt: str, lo: Arr, hi: Arr, nan: Arr, ax: tuple[int, ...], n: int, _like: Arr) -> FVal:
    """Enclosure of a sum of ``n`` terms over axes ``ax`` in any order: ``n * eps * sum(|terms|)``."""
    nmant, minexp, _ = _FINFO[dt]
    mag = np.maximum(np.abs(lo), np.abs(hi))
    mag = np.where(np.isfinite(mag), mag, 0.0)
    err = (n + 1) * 2.0**-nmant * mag.sum(axis=ax) + n * 2.0**minexp
    slo, shi = lo.sum(axis=ax), hi.sum(axis=ax)
    sure = (lo == np.inf).any(axis=ax) & (hi == -np.inf).any(axis=ax)
    # +inf + -inf: possible if one term can be +inf and another term -inf
    pinf, ninf = hi == np.inf, lo == -np.inf
    n_p, n_n, n_b = pinf.sum(axis=ax), ninf.sum(axis=ax), (pinf & ninf).sum(axis=ax)
    maybe = np.isnan(slo) | np.isnan(shi) | ((n_p >= 1) & (n_n >= 1) & ~((n_p == 1) & (n_n == 1) & (n_b == 1)))
    nan = np.maximum(nan, np.where(sure, 2, np.where(maybe, 1, 0)).astype(np.uint8))
    return _finish(dt, slo - err, shi + err, nan, 0)


def _dot(a: Val, b: Val) -> Val:
    a2 = a.map(lambda x: x.reshape((1,) + x.shape) if x.ndim == 1 else x)
    b2 = b.map(lambda x: x.reshape(x.shape + (1,)) if x.ndim == 1 else x)
    m, k = a2.shape
    n = b2.shape[1]
    out_shape = ((m,) if len(a.shape) == 2 else ()) + ((n,) if len(b.shape) == 2 else ())
    if isinstance(a2, IVal):
        assert isinstance(b2, IVal)
        prod = a2.val.astype(np.int64)[:, :, None].astype(np.uint64) * b2.val.astype(np.int64)[None, :, :].astype(
            np.uint64)
        s = prod.sum(axis=1).astype(np.int64)
        val = (s & 0xFF).astype(np.uint8) if a.dt == "u8" else s.astype(np.int32)
        known = a2.known.all(axis=1)[:, None] & b2.known.all(axis=0)[None, :]
        return IVal(a.dt, val.reshape(out_shape), known.reshape(out_shape))
    assert isinstance(a2, FVal) and isinstance(b2, FVal)
    alo, ahi = _slack(a2)
    blo, bhi = _slack(b2)
    plo, phi, pnan = _candidates(np.multiply, alo[:, :, None], ahi[:, :, None], blo[None], bhi[None])
    pnan = np.maximum(pnan, _mul_nan(alo[:, :, None], ahi[:, :, None], blo[None], bhi[None]))
    pnan = _combine_nan(pnan, a2.nan[:, :, None], b2.nan[None])
    r = _sum_bounds(a.dt, plo, phi, pnan.max(axis=1), (1,), k, plo)
    return r.map(lambda x: x.reshape(out_shape))


def _hull(t: Val, f: Val, p: IVal) -> Val:
    """Select: the chosen branch where the predicate is known, else anything either branch allows."""
    if isinstance(t, IVal):
        assert isinstance(f, IVal)
        pv, pk, tv, tk, fv, fk = np.broadcast_arrays(p.val, p.known, t.val, t.known, f.val, f.known)
        val = np.where(pv, tv, fv)
        known = np.where(pk, np.where(pv, tk, fk), tk & fk & (tv == fv))
        return IVal(t.dt, val.copy(), known.copy())
    assert isinstance(f, FVal)
    pv, pk, tlo, thi, tn, flo, fhi, fn = np.broadcast_arrays(p.val, p.known, t.lo, t.hi, t.nan, f.lo, f.hi, f.nan)
    lo = np.where(pk, np.where(pv, tlo, flo), np.minimum(tlo, flo))
    hi = np.where(pk, np.where(pv, thi, fhi), np.maximum(thi, fhi))
    nan_u = np.where(tn == fn, tn, 1)
    nan = np.where(pk, np.where(pv, tn, fn), nan_u)
    return FVal(t.dt, lo, hi, nan.astype(np.uint8))


def _clamp(lo: Val, x: Val, hi: Val) -> Val:
    if isinstance(x, IVal):
        assert isinstance(lo, IVal) and isinstance(hi, IVal)
        v = np.minimum(np.maximum(x.val, lo.val), hi.val)
        known = np.broadcast_arrays(x.known & lo.known & hi.known, v)[0]
        return IVal(x.dt, v, known.copy())
    assert isinstance(lo, FVal) and isinstance(hi, FVal)
    rlo = np.minimum(np.maximum(x.lo, lo.lo), hi.lo)
    rhi = np.minimum(np.maximum(x.hi, lo.hi), hi.hi)
    return _finish(x.dt, *_ties(x.dt, rlo, rhi, x, lo, hi), _combine_nan(x.nan, lo.nan, hi.nan), 0)


def evaluate(chain: Chain, notes: set[str] | None = None) -> Val:
    """The oracle's value of the chain's result.

    ``notes`` collects what the chain does that XLA is known to get wrong: "exp-of-nan" (an Exp of
    a surely-NaN element, whose output XLA:CPU may leave uninitialized).
    """
    env: dict[str, Val] = {f"x{i}": _leaf(a) for i, a in enumerate(chain.leaves)}
    steps = {s.out: s for s in chain.steps}
    with np.errstate(all="ignore"):
        for s in chain.steps:
            if notes is not None and s.op == "Exp":
                x = _to_val(env, s.ins[0])
                if isinstance(x, FVal) and (x.nan == 2).any():
                    notes.add("exp-of-nan")
            got = _eval_step(env, s)
            src = steps.get(s.ins[0]) if s.op == "Log" and isinstance(s.ins[0], str) else None
            if src is not None and src.op == "Exp":
                # XLA's simplifier folds log(exp(x)) to x, also where exp overflows or underflows
                # (log(exp(-1000)) is -1000, not -inf). Reported as an XLA finding; allowed here.
                x = env[src.ins[0]]
                assert isinstance(got, FVal) and isinstance(x, FVal)
                got = FVal(got.dt, np.minimum(got.lo, x.lo), np.maximum(got.hi, x.hi),
                           np.where(got.nan == x.nan, got.nan, 1).astype(np.uint8))
            env[s.out] = got
            assert got.shape == s.shape and got.dt == s.dt, (s, got.shape, got.dt)
    return env[chain.root.out]


def _eval_step(env: dict[str, Val], s: Step) -> Val:
    ins = [_to_val(env, r) for r in s.ins]
    op, at = s.op, s.attrs
    if op in _UNARY_ALL and len(ins) == 1:
        a = ins[0]
        if isinstance(a, FVal):
            return _f_unary(op, a)
        if op == "Not":
            return IVal(a.dt, ~a.val if a.dt == "pred" else np.invert(a.val), a.known.copy())
        wide = a.val.astype(np.int64)
        r = np.abs(wide) if op == "Abs" else -wide
        return IVal(a.dt, (r & 0xFF).astype(np.uint8) if a.dt == "u8" else r.astype(np.int32), a.known.copy())
    if op in _BINARY_ALL:
        a, b = ins
        if isinstance(a, FVal):
            assert isinstance(b, FVal)
            return _f_binary(op, a, b)
        assert isinstance(b, IVal)
        val = _int_binary(op, a.dt, a.val, b.val)
        known = np.broadcast_arrays(a.known & b.known, val)[0].copy()
        return IVal(a.dt, np.asarray(val), known)
    if op == "Compare":
        a, b = ins
        if isinstance(a, FVal):
            assert isinstance(b, FVal)
            return _f_compare(at["direction"], a, b)
        assert isinstance(b, IVal)
        f = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal, "GT": np.greater,
             "GE": np.greater_equal}[at["direction"]]
        val = f(a.val, b.val)
        return IVal("pred", np.asarray(val), np.broadcast_arrays(a.known & b.known, val)[0].copy())
    if op == "Select":
        p, t, f = ins
        assert isinstance(p, IVal)
        return _hull(t, f, p)
    if op == "Clamp":
        return _clamp(*ins)
    if op == "Convert":
        return _convert(ins[0], at["to"])
    if op == "Reshape":
        return ins[0].map(lambda x: x.reshape(at["dims"]))
    if op == "Transpose":
        return ins[0].map(lambda x: np.transpose(x, at["perm"]))
    if op == "Broadcast":
        return ins[0].map(lambda x: np.broadcast_to(x, tuple(at["sizes"]) + x.shape).copy())
    if op == "Slice":
        sl = tuple(slice(a, b, c) for a, b, c in zip(at["start"], at["limit"], at["strides"], strict=True))
        return ins[0].map(lambda x: x[sl].copy())
    if op == "Rev":
        return ins[0].map(lambda x: np.flip(x, at["dims"]).copy())
    if op == "Concat":
        a, b = ins
        if isinstance(a, FVal):
            assert isinstance(b, FVal)
            return FVal(a.dt, *(np.concatenate([getattr(a, c), getattr(b, c)], at["dim"]) for c in ("lo", "hi", "nan")))
        assert isinstance(b, IVal)
        return IVal(a.dt, *(np.concatenate([getattr(a, c), getattr(b, c)], at["dim"]) for c in ("val", "known")))
    if op == "Pad":
        a, fill = ins[0], _leaf(at["value"].array())
        cfg = at["config"]
        if isinstance(a, FVal):
            assert isinstance(fill, FVal)
            return FVal(a.dt, _pad_array(a.lo, fill.lo.item(), cfg), _pad_array(a.hi, fill.hi.item(), cfg),
                        _pad_array(a.nan, fill.nan.item(), cfg))
        assert isinstance(fill, IVal)
        return IVal(a.dt, _pad_array(a.val, fill.val.item(), cfg), _pad_array(a.known, True, cfg))
    if op == "Reduce":
        return _reduce(ins[0], at["dims"], at["kind"])
    if op == "Dot":
        return _dot(ins[0], ins[1])
    raise AssertionError(op)  # pragma: no cover


@dataclass
class Check:
    """How an output compared with the oracle."""

    compared: int = 0
    unknown: int = 0
    problems: list[str] = field(default_factory=list)


def check(want: Val, got: Arr, what: str = "") -> Check:
    """Compare an output with the oracle's value (see the module docstring for what is accepted)."""
    c = Check()
    got = np.asarray(got)
    if got.dtype != DT[want.dt] or tuple(got.shape) != want.shape:
        c.problems.append(f"{what}: got {got.dtype}{list(got.shape)}, expected {_NPNAME[want.dt]}{list(want.shape)}")
        return c
    if isinstance(want, IVal):
        c.compared = int(want.known.sum())
        c.unknown = want.known.size - c.compared
        bad = want.known & (got != want.val)
        for idx in [tuple(i) for i in np.argwhere(bad)][:5]:
            c.problems.append(f"{what}[{', '.join(map(str, idx))}]: got {got[idx]!r}, expected {want.val[idx]!r}")
        if bad.any():
            c.problems.append(f"{what}: {int(bad.sum())} of {bad.size} elements differ")
        return c
    g = got.astype(np.float64)
    gn = np.isnan(g)
    ok = np.where(gn, want.nan >= 1, (want.nan <= 1) & (want.lo <= g) & (g <= want.hi))
    free = (want.nan == 1) & (want.lo == -np.inf) & (want.hi == np.inf)
    c.unknown = int(free.sum())
    c.compared = free.size - c.unknown
    for idx in [tuple(i) for i in np.argwhere(~ok)][:5]:
        state = ("", " or NaN", "NaN")[int(want.nan[idx])]
        expect = "NaN" if want.nan[idx] == 2 else f"[{want.lo[idx]!r}, {want.hi[idx]!r}]{state}"
        c.problems.append(f"{what}[{', '.join(map(str, idx))}]: got {g[idx]!r}, expected {expect}")
    if not ok.all():
        c.problems.append(f"{what}: {int((~ok).sum())} of {ok.size} elements outside the enclosure")
    return c


# -- running chains in a child process ---------------------------------------------------------------

CHILD_SOURCE = '''
import numpy as np
import ml_dtypes
import xlasdk as xs
from xlasdk import ops


def main(inp):
    """Build the chain with its leaves as parameters and as constants; compile, run twice, return the outputs."""
    source, leaves, modes = inp
    ns = {"np": np, "ml_dtypes": ml_dtypes, "xs": xs, "ops": ops}
    exec(source, ns)
    out, again = {}, {}
    for mode in modes:
        b = xs.XlaBuilder("chain")
        if mode == "param":
            args = [ops.Parameter(b, i, xs.Shape.array_shape(a.dtype, a.shape), f"x{i}") for i, a in enumerate(leaves)]
        else:
            args = [ops.Constant(b, a) for a in leaves]
        root = ns["build"](b, *args)
        exe = xs.compile(b.build(root), device="cpu:0")
        out[mode] = (exe(*leaves) if mode == "param" else exe()).to_numpy()
        again[mode] = (exe(*leaves) if mode == "param" else exe()).to_numpy()
    return {"outputs": out, "again": again}
'''

MODES = ("param", "const")


@dataclass
class CampaignResult:
    """Figures of a chain campaign."""

    chains: int = 0
    ops: int = 0
    runs: int = 0
    mismatches: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    deaths: list[str] = field(default_factory=list)
    timeouts: list[str] = field(default_factory=list)
    nondeterministic: list[str] = field(default_factory=list)  # two runs of one executable differ
    known: list[str] = field(default_factory=list)  # ... where the chain has an Exp of a surely-NaN value
    compared: int = 0
    unknown: int = 0
    seconds: float = 0.0
    op_counts: dict[str, int] = field(default_factory=dict)
    outputs: list[tuple[Chain, dict[str, Arr]]] = field(default_factory=list)  # with keep_outputs=True

    @property
    def failures(self) -> int:
        return (
            len(self.mismatches) + len(self.errors) + len(self.deaths) + len(self.timeouts) + len(self.nondeterministic)
        )

    def summary(self) -> str:
        total = self.compared + self.unknown
        pct = 100.0 * self.compared / total if total else 0.0
        return (
            f"chains: {self.chains} chains ({self.ops} ops, {self.runs} compiled runs: parameters and constants), "
            f"failures: {self.failures} ({len(self.mismatches)} mismatches, {len(self.errors)} errors, "
            f"{len(self.nondeterministic)} nondeterministic), deaths: {len(self.deaths)}, timeouts: "
            f"{len(self.timeouts)}, time: {self.seconds:.1f} s, elements compared: {self.compared}/{total} "
            f"({pct:.1f}%), known XLA exp-of-NaN garbage: {len(self.known)}"
        )

    def report(self, limit: int = 5) -> str:
        parts = [self.summary()]
        for name in ("deaths", "timeouts", "errors", "nondeterministic", "mismatches", "known"):
            items = getattr(self, name)
            for text in items[:limit]:
                parts.append(f"--- {name} ---\n{text}")
            if len(items) > limit:
                parts.append(f"... and {len(items) - limit} more {name}")
        return "\n".join(parts)


def _judge(res: CampaignResult, chain: Chain, outcome: Outcome) -> None:
    head = f"seed {chain.seed}"
    if outcome.status == "died":
        res.deaths.append(f"{head}: died by {outcome.signal_name or outcome.returncode}\n{chain.describe()}\n"
                          f"stderr: {outcome.stderr.strip()[-1500:]}\n{outcome.reproducer()}")
        return
    if outcome.status == "timeout":
        res.timeouts.append(f"{head}: timed out after {outcome.seconds:.0f} s\n{chain.describe()}")
        return
    if outcome.status == "error":
        res.errors.append(f"{head}: {outcome.error}\n{chain.describe()}\n{outcome.traceback[-2000:]}")
        return
    notes: set[str] = set()
    want = evaluate(chain, notes)
    problems = []
    again = outcome.value["again"]
    for mode, got in outcome.value["outputs"].items():
        if got.tobytes() != again[mode].tobytes():
            text = f"{head} ({mode}): two runs of one executable differ\n{chain.describe()}"
            (res.known if "exp-of-nan" in notes else res.nondeterministic).append(text)
        res.runs += 1
        c = check(want, got, mode)
        res.compared += c.compared
        res.unknown += c.unknown
        problems += c.problems
    if problems:
        res.mismatches.append(f"{head}:\n" + "\n".join(problems) + f"\n{chain.describe()}")


def run_campaign(
    count: int,
    first_seed: int = 0,
    timeout: float = 120.0,
    progress: bool = False,
    modes: Sequence[str] = MODES,
    keep_outputs: bool = False,
) -> CampaignResult:
    """Generate ``count`` chains (seeds ``first_seed``...), run each in a child process, check, and count.

    ``keep_outputs`` keeps each chain with its outputs in ``outputs`` (to check them again, e.g.
    against a deliberately broken oracle).
    """
    here = os.path.dirname(os.path.abspath(__file__))
    res = CampaignResult()
    chains: dict[str, Chain] = {}
    t0 = time.monotonic()

    def tasks() -> Any:
        for seed in range(first_seed, first_seed + count):
            chain = generate(seed)
            res.chains += 1
            res.ops += len(chain.steps)
            for s in chain.steps:
                res.op_counts[s.op] = res.op_counts.get(s.op, 0) + 1
            key = f"chain_seed{seed}"
            chains[key] = chain
            yield Task(CHILD_SOURCE, (chain.source(), chain.leaves, tuple(modes)), key=key)

    def on_outcome(o: Outcome) -> None:
        chain = chains.pop(o.task.key)
        _judge(res, chain, o)
        if keep_outputs and o.status == "ok":
            res.outputs.append((chain, o.value["outputs"]))
        if progress and res.chains % 250 == 0:
            res.seconds = time.monotonic() - t0
            print(f"  ... {res.summary()}", flush=True)

    run_batch(tasks(), timeout=timeout, cwd=here, max_tasks_per_child=500, on_outcome=on_outcome,
              env={"XLASDK_CACHE_DIR": None})  # compile every chain (no executables from a disk cache)
    res.seconds = time.monotonic() - t0
    return res


def triage(seed: int) -> str:
    """Run every prefix of chain ``seed`` in this process and name the first step whose result leaves the oracle.

    For a human looking at a reported mismatch (a crash here kills the process: use it on mismatches).
    """
    import xlasdk as xs
    from xlasdk import ops

    c = generate(seed)
    lines = [c.describe()]
    for n in range(1, len(c.steps) + 1):
        sub = Chain(c.seed, c.leaves, c.steps[:n])
        ns: dict[str, Any] = {"np": np, "ml_dtypes": ml_dtypes, "xs": xs, "ops": ops}
        exec(sub.source(), ns)
        want = evaluate(sub)
        for mode in MODES:
            b = xs.XlaBuilder("chain")
            if mode == "param":
                args = [ops.Parameter(b, i, xs.Shape.array_shape(a.dtype, a.shape)) for i, a in enumerate(c.leaves)]
            else:
                args = [ops.Constant(b, a) for a in c.leaves]
            exe = xs.compile(b.build(ns["build"](b, *args)), device="cpu:0")
            got = (exe(*c.leaves) if mode == "param" else exe()).to_numpy()
            problems = check(want, got, mode).problems
            if problems:
                lines.append(f"first divergence at step {n}: {c.steps[n - 1].render()} ({mode})")
                lines += problems
                return "\n".join(lines)
    lines.append("no divergence")
    return "\n".join(lines)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="Random op chains against numpy (campaign 3 of issue 9).")
    ap.add_argument("--count", type=int, default=100, help="chains to run (default 100)")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--triage", type=int, metavar="SEED", help="find the first diverging step of one chain")
    ap.add_argument("--show", type=int, metavar="SEED", help="print one chain as xlasdk code")
    ns_ = ap.parse_args()
    if ns_.triage is not None:
        print(triage(ns_.triage))
    elif ns_.show is not None:
        print(generate(ns_.show).describe())
    else:
        result = run_campaign(ns_.count, ns_.first_seed, progress=True)
        print(result.report(limit=20))
        raise SystemExit(1 if result.failures else 0)
