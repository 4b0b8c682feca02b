"""Property-based fuzzing (hypothesis) of xlasdk's Python shape rules against MLIR's and XLA's.

For each op family a strategy draws operand shapes, element types and attributes, valid ones and
broken ones (out-of-range or repeated dimensions, wrong lengths, negative sizes, mismatched sizes,
wrong element types). Every draw is a :class:`Case`; :func:`fuzz_one` then checks that

* the op call either raises ``xs.ShapeError`` / ``xs.DTypeError`` (never another exception) whose
  message starts with the op's name and points at this file (``" — at test_fuzz_shape_rules.py:N"``),
* or returns an ``XlaOp`` whose computation MLIR parses and verifies (``comp._mlir_module()``, with
  StableHLO's own type inference) and XLA converts to HLO (``comp.as_hlo_text()``); the HLO
  module's ``entry_computation_layout`` and ENTRY ``ROOT`` shape equal the program shape and the
  op's predicted ``.shape``;
* where xlasdk prints the HLO text itself (``xlasdk/_hlo_emit.py``), XLA parses that text and
  it computes the same values as the StableHLO module (``helpers.check_direct_hlo``);
* and both agree with an independent reference written here from XLA's operation semantics and
  the StableHLO specification (``Case.want``): a rule that is too lax (MLIR/XLA errors) and one
  that is too strict (a valid input rejected) both fail.

The ``test_compile_*`` tests also compile and run what the ops accept, so that XLA's HLO verifier
and the CPU backend see it (several cases in one computation, or each op on its own for the
element-type sweep); the ``test_values_*`` tests draw valid cases only and compare the results
with numpy: Slice, Pad, Transpose, Reshape and ConcatInDim, DotGeneral against ``np.einsum``,
ConvGeneralDilated and ReduceWindow against loop references, and data movement (slices, pads,
concatenations, sorts, top-k, iota...) in the 2-/4-bit, fp8 and fp4 types.

Everything is derandomized (``derandomize=True``, no example database), so CI sees the same
examples on every run. The default suite runs the quick profile: :data:`QUICK_SCALE` of each
test's example count (issue 44: the suite's time); the long profile, every count in full, is
``pytest -m campaign tests/campaigns/test_fuzz_long.py``. ``XLASDK_FUZZ_SCALE=10`` multiplies the
full example counts for a deeper local run; ``XLASDK_FUZZ_TRACE=1`` (with ``pytest -s``) prints
each case before it is compiled, so that a process abort inside XLA shows its input.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

import xlasdk as xs
from tests.helpers import check_direct_hlo, run
from xlasdk import ops
from xlasdk._optable import OPS
from xlasdk.ops import (
    collectives,
    control,
    conv,
    convert,
    custom_call,
    elementwise,
    fft,
    fma,
    indexing,
    linalg,
    reduce,
    shaping,
    side_effects,
    sort,
    sources,
    window,
)
from xlasdk.ops import random as rnd

Dims = tuple[int, ...]
Arr = np.ndarray[Any, Any]

# -- settings ------------------------------------------------------------------------------------

#: the share of each test's example count the default suite runs (the quick profile)
QUICK_SCALE = 0.4


def fuzz(max_examples: int) -> settings:
    """Deterministic hypothesis settings (same examples on every run, no database, no deadline).

    ``XLASDK_FUZZ_SCALE=10`` in the environment multiplies the example counts for a deeper local run
    (unset: :data:`QUICK_SCALE`; ``1``: the long profile);
    ``XLASDK_FUZZ_TRACE=1`` prints every case before it is compiled (run with ``-s``), so that a
    process abort inside XLA shows its input.
    """
    return settings(
        max_examples=max(1, round(max_examples * float(os.environ.get("XLASDK_FUZZ_SCALE", QUICK_SCALE)))),
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=True,
        suppress_health_check=[
            HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
            HealthCheck.large_base_example,
        ],
    )


# -- element types (an independent classification, not xlasdk's tables) -----------------------------

DT = np.dtype[Any]


def D(t: Any) -> DT:
    dt: DT = np.dtype(t)
    return dt


PRED = D(np.bool_)
S2, S4, S8, S16, S32, S64 = (D(t) for t in (ml_dtypes.int2, ml_dtypes.int4, np.int8, np.int16, np.int32, np.int64))
U2, U4, U8, U16, U32, U64 = (
    D(t) for t in (ml_dtypes.uint2, ml_dtypes.uint4, np.uint8, np.uint16, np.uint32, np.uint64)
)
F16, BF16, F32, F64 = D(np.float16), D(ml_dtypes.bfloat16), D(np.float32), D(np.float64)
F8 = [
    D(t) for t in (
        ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3b11fnuz, ml_dtypes.float8_e5m2fnuz,
        ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e4m3, ml_dtypes.float8_e3m4, ml_dtypes.float8_e8m0fnu,
    )
]
F4 = D(ml_dtypes.float4_e2m1fn)
C64, C128 = D(np.complex64), D(np.complex128)

SIGNED: frozenset[DT] = frozenset({S2, S4, S8, S16, S32, S64})
UNSIGNED: frozenset[DT] = frozenset({U2, U4, U8, U16, U32, U64})
INTS = SIGNED | UNSIGNED
FLOATS: frozenset[DT] = frozenset({F16, BF16, F32, F64, F4, *F8})
COMPLEX: frozenset[DT] = frozenset({C64, C128})
NUMERIC = INTS | FLOATS | COMPLEX
ALL_TYPES: list[DT] = sorted(NUMERIC | {PRED}, key=str)
# a smaller mix for shape-focused families: every category, sub-byte and fp8 included
MIX = [F32, S32, PRED, BF16, U8, C64, S4, D(ml_dtypes.float8_e4m3fn), F64, U64]
INDEX_TYPES = [S32, S8, U32, S64, U8]
# the types XLA:CPU handles least often: 2- and 4-bit, fp8, fp4 (and a few others for contrast)
NARROW = [S2, U2, S4, U4, F4, *F8[:2], F8[-1], BF16, PRED, C128, U64]


def bits(dt: np.dtype[Any]) -> int:
    """Storage width in bits of one element, as XLA counts it (pred: 1)."""
    if dt == PRED:
        return 1
    if dt in (S2, U2):
        return 2
    if dt in (S4, U4, F4):
        return 4
    return dt.itemsize * 8


def shape_of(dt: np.dtype[Any], dims: Sequence[int]) -> xs.Shape:
    return xs.Shape.array_shape(dt, tuple(dims))


# -- cases ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bad:
    """The reference rejects the input: the op must raise one of ``kinds``."""

    kinds: tuple[type[Exception], ...]


def verdict(
    shape_bad: bool, dtype_bad: bool, dt: np.dtype[Any] | None = None, dims: Sequence[int] | None = None
) -> xs.Shape | Bad:
    """``Bad`` naming the allowed error types, or the expected array shape ``dt[dims]``."""
    if shape_bad or dtype_bad:
        return Bad(((xs.ShapeError,) if shape_bad else ()) + ((xs.DTypeError,) if dtype_bad else ()))
    assert dt is not None and dims is not None
    return shape_of(dt, dims)


def tuple_verdict(shape_bad: bool, dtype_bad: bool, shapes: list[xs.Shape]) -> xs.Shape | Bad:
    """Like :func:`verdict` for an op with one result per operand (a tuple when several)."""
    if shape_bad or dtype_bad:
        return Bad(((xs.ShapeError,) if shape_bad else ()) + ((xs.DTypeError,) if dtype_bad else ()))
    return shapes[0] if len(shapes) == 1 else xs.Shape.tuple_shape(shapes)


Build = Callable[[xs.XlaBuilder, list[xs.XlaOp]], xs.XlaOp]
Ref = Callable[[list[Arr]], list[Any]]  # None entries are not compared


@dataclass
class Case:
    """One drawn op call: its parameters, the call itself, and what the reference expects."""

    op: str  # the name error messages must start with
    params: list[tuple[np.dtype[Any], Dims]]
    build: Build
    want: xs.Shape | Bad
    desc: str
    ref: Ref | None = field(default=None)  # numpy reference of the results (value tests)
    fixed: dict[int, Any] = field(default_factory=dict)  # parameter number -> value (value tests)

    def __repr__(self) -> str:
        ps = ", ".join(str(shape_of(dt, d)) for dt, d in self.params)
        return f"Case({self.op}: params ({ps}); {self.desc}; want {self.want})"


LOCATION = re.compile(r" — at test_fuzz_shape_rules\.py:\d+")


def attempt(case: Case, b: xs.XlaBuilder, ps: list[xs.XlaOp]) -> xs.XlaOp | Exception:
    """Call the op; return its XlaOp or the ShapeError/DTypeError it raised (checked)."""
    try:
        out = case.build(b, ps)
    except (xs.ShapeError, xs.DTypeError) as e:
        msg = str(e)
        assert msg.startswith(f"{case.op}: "), f"the error does not name {case.op}: {msg}"
        assert LOCATION.search(msg), f"the error does not point at this file's line: {msg}"
        return e
    except Exception as e:  # anything else (an MLIR error, IndexError...) is a bug
        raise AssertionError(f"{case!r} raised {type(e).__name__}, not ShapeError/DTypeError: {e}") from e
    assert isinstance(out, xs.XlaOp), out
    return out


def params_of(b: xs.XlaBuilder, specs: list[tuple[np.dtype[Any], Dims]], first: int = 0) -> list[xs.XlaOp]:
    return [ops.Parameter(b, first + i, shape_of(dt, dims)) for i, (dt, dims) in enumerate(specs)]


# -- HLO text ------------------------------------------------------------------------------------


def _strip_layouts(s: str) -> str:
    """HLO shape text without layouts and ``/*index=5*/`` comments (as xlasdk prints shapes)."""
    s = re.sub(r"/\*[^*]*\*/", "", s)
    while True:
        t = re.sub(r"\{[^{}]*\}", "", s)
        if t == s:
            return s
        s = t


def _split_top(s: str, sep: str) -> list[str]:
    """Split ``s`` at ``sep`` outside brackets and parentheses."""
    out, depth, cur, i = [], 0, "", 0
    while i < len(s):
        if depth == 0 and s.startswith(sep, i):
            out.append(cur)
            cur, i = "", i + len(sep)
            continue
        ch = s[i]
        depth += ch in "([{"
        depth -= ch in ")]}"
        cur += ch
        i += 1
    out.append(cur)
    return [p.strip() for p in out]


def _balanced(s: str, start: int) -> str:
    """The bracketed group of ``s`` opening at ``start`` (without the outer brackets)."""
    depth = 0
    for j in range(start, len(s)):
        depth += s[j] in "([{"
        depth -= s[j] in ")]}"
        if depth == 0:
            return s[start + 1 : j]
    raise AssertionError(f"unbalanced: {s[start:]}")


def hlo_shapes(text: str) -> tuple[list[str], str, str]:
    """(parameter shapes, result shape) of ``entry_computation_layout`` and the ENTRY ROOT shape."""
    head = text.split("\n", 1)[0]
    key = "entry_computation_layout="
    body = _strip_layouts(_balanced(head, head.index(key) + len(key)))
    args, result = _split_top(body, "->")
    assert args.startswith("(") and args.endswith(")"), head
    params = [p for p in _split_top(args[1:-1], ",") if p]
    entry = text[text.index("\nENTRY ") :]
    m = re.search(r"\n\s*ROOT [^=]+= ", entry)
    assert m, entry
    rest = entry[m.end() :]
    root = "(" + _balanced(rest, 0) + ")" if rest.startswith("(") else rest.split(" ", 1)[0]
    return params, result, _strip_layouts(root)


def check_hlo(comp: xs.XlaComputation, root_shape: xs.Shape) -> None:
    """MLIR verifies the module, XLA converts it, and both agree with the predicted shapes."""
    comp._mlir_module()  # parse + verify: an XlaSdkError ("internal error") if a shape rule was wrong
    text = comp._converted_hlo_text(print_metadata=False)  # XLA's converter, not xlasdk's direct printer
    params, result, root = hlo_shapes(text)
    ps = comp.program_shape()
    predicted = ps.result_shape()
    if predicted.is_tuple() and len(predicted.tuple_shapes()) == 1:
        predicted = predicted.tuple_shapes()[0]  # a one-element tuple root is one HLO result
    assert predicted == root_shape or ps.result_shape() == root_shape, (ps, root_shape)
    assert result == str(predicted), (result, ps, root_shape)
    assert root == result, (root, result)
    assert params == [str(s) for s in ps.parameter_shapes()], (params, ps)


# -- drivers -------------------------------------------------------------------------------------


def fuzz_one(case: Case) -> None:
    """One op call: a checked error that the reference expects, or an op MLIR/XLA agree with."""
    b = xs.XlaBuilder("fuzz")
    got = attempt(case, b, params_of(b, case.params))
    event(f"{case.op}: {'accepted' if isinstance(got, xs.XlaOp) else type(got).__name__}")
    if isinstance(got, xs.XlaOp):
        check_hlo(b.build(got), got.shape)
        assert not isinstance(case.want, Bad), f"{case!r}: accepted (result {got.shape}), the reference rejects it"
        assert got.shape == case.want, f"{case!r}: predicted {got.shape}"
    else:
        assert isinstance(case.want, Bad), f"{case!r}: a valid input was rejected: {got}"
        assert isinstance(got, case.want.kinds), f"{case!r}: raised {type(got).__name__}: {got}"


def _leaves(x: xs.XlaOp) -> list[xs.XlaOp]:
    if x.shape.is_tuple():
        return [ops.GetTupleElement(x, i) for i in range(len(x.shape.tuple_shapes()))]
    return [x]


def sample(rng: np.random.Generator, dt: np.dtype[Any], dims: Dims) -> Arr:
    """Small integer-valued data of ``dt`` (exact in every type used here)."""
    if dt == PRED:
        return rng.integers(0, 2, dims).astype(bool)
    if dt in COMPLEX:
        return (rng.integers(-3, 4, dims) + 1j * rng.integers(-3, 4, dims)).astype(dt)
    lo, hi = {S2: (-2, 2), U2: (0, 4)}.get(dt, (0 if dt in UNSIGNED else -3, 3 if dt in (S4, U4, F4) else 4))
    return rng.integers(lo, hi, dims).astype(dt)


def ordered(x: Arr) -> Arr:
    """Keys that numpy sorts in XLA's total order: NaN above every number (``sample`` makes no
    infinities, negative NaNs or -0.0), complex by real then imaginary part."""
    if x.dtype in COMPLEX:
        return x.astype(np.complex128)
    v = x.astype(np.float64)
    return np.where(np.isnan(v), np.inf, v)


def fuzz_many(cases: list[Case], seed: int, values: bool) -> None:
    """Build every case into one computation; compile and run it; compare values if ``values``."""
    b = xs.XlaBuilder("fuzz_many")
    rng = np.random.default_rng(seed)
    roots: list[xs.XlaOp] = []
    checks: list[tuple[Case, list[Arr], int, int]] = []
    args: list[Arr] = []
    for case in cases:
        ps = params_of(b, case.params, len(args))
        inputs = [
            np.asarray(case.fixed[i], dt) if i in case.fixed else sample(rng, dt, dims)
            for i, (dt, dims) in enumerate(case.params)
        ]
        args += inputs
        got = attempt(case, b, ps)
        if isinstance(got, Exception):
            assert isinstance(case.want, Bad), f"{case!r}: a valid input was rejected: {got}"
            continue
        assert got.shape == case.want, f"{case!r}: predicted {got.shape}, reference {case.want}"
        leaves = _leaves(got)
        checks.append((case, inputs, len(roots), len(leaves)))
        roots += leaves
    assume(roots)
    if os.environ.get("XLASDK_FUZZ_TRACE"):  # a process abort in XLA then shows the input that caused it
        print("compiling:", *map(repr, cases), sep="\n  ", flush=True)
    comp = b.build(ops.Tuple(b, roots))
    check_hlo(comp, comp.program_shape().result_shape())
    outs = run(comp, *args)
    check_direct_hlo(comp, *args, outs=outs)  # xlasdk's own HLO text, where it prints it, agrees with XLA
    assert len(outs) == len(roots)
    for out, r in zip(outs, roots, strict=True):
        assert out.shape == r.shape.dimensions() and out.dtype == r.dtype, (out.shape, out.dtype, r.shape)
    if not values:
        return
    for case, inputs, start, n in checks:
        assert case.ref is not None
        expected = case.ref(inputs)
        assert len(expected) == n
        for got_v, exp_v in zip(outs[start : start + n], expected, strict=True):
            if exp_v is None:
                continue
            exp_v = np.asarray(exp_v)
            assert got_v.shape == exp_v.shape, (case, got_v.shape, exp_v.shape)
            wide = np.complex128 if got_v.dtype in COMPLEX else np.float64
            np.testing.assert_allclose(
                got_v.astype(wide), np.asarray(exp_v).astype(wide), rtol=1e-6, atol=1e-6, err_msg=repr(case)
            )


# -- strategy helpers ------------------------------------------------------------------------------

SIZE = st.sampled_from([0, 1, 1, 2, 2, 3, 3, 4])
POS_SIZE = st.integers(1, 4)


def dims_st(rmin: int = 0, rmax: int = 4, size: st.SearchStrategy[int] = SIZE) -> st.SearchStrategy[Dims]:
    return st.lists(size, min_size=rmin, max_size=rmax).map(tuple)


def pick_mutation(draw: Any, valid: bool, kinds: Sequence[str]) -> str:
    """"none" (about half of the draws, always when ``valid``) or one of ``kinds``."""
    if valid:
        return "none"
    return str(draw(st.sampled_from(["none"] * len(kinds) + list(kinds))))


def distinct_in(v: Sequence[int], n: int) -> bool:
    return len(set(v)) == len(v) and all(0 <= d < n for d in v)


def np_pad_axis(x: Arr, axis: int, value: Any, lo: int, hi: int, interior: int) -> Arr:
    """XLA Pad of one axis: ``interior`` values between elements, then ``lo``/``hi`` (negative crops)."""
    n = x.shape[axis]
    size = n + max(n - 1, 0) * interior
    shape = list(x.shape)
    shape[axis] = size
    out = np.full(shape, value, dtype=x.dtype)
    idx: list[Any] = [slice(None)] * x.ndim
    idx[axis] = slice(0, size, interior + 1)
    out[tuple(idx)] = x
    pads = [(0, 0)] * x.ndim
    pads[axis] = (max(lo, 0), max(hi, 0))
    out = np.pad(out, pads, constant_values=value)
    idx[axis] = slice(max(-lo, 0), out.shape[axis] - max(-hi, 0))
    cropped: Arr = out[tuple(idx)]
    return cropped


# == element-wise binary ops with broadcast_dimensions ============================================

BINARY_ALLOWED: dict[str, frozenset[np.dtype[Any]]] = {
    "Add": NUMERIC | {PRED}, "Sub": NUMERIC, "Mul": NUMERIC | {PRED}, "Div": NUMERIC,
    "Rem": INTS | FLOATS, "Max": INTS | FLOATS | {PRED}, "Min": INTS | FLOATS | {PRED}, "Pow": NUMERIC,
    "Atan2": FLOATS | COMPLEX, "Complex": frozenset({F32, F64}), "And": INTS | {PRED}, "Or": INTS | {PRED},
    "Xor": INTS | {PRED}, "ShiftLeft": INTS, "ShiftRightArithmetic": INTS,
}
COMPARISONS = ["Eq", "Ne", "Lt", "Ge"]
DIRECTIONS = ["EQ", "NE", "LT", "LE", "GT", "GE"]
COMPARE_TYPES = [None, "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"]
BINARY_TYPES = [F32, S32, PRED, U8, BF16, C64, F64, S4, D(ml_dtypes.float8_e4m3fn), U32, C128, S64, F16]


def ref_broadcast(ld: Dims, rd: Dims, bd: Sequence[int] | None) -> Dims | None:
    """XLA's binary-op broadcasting: the result dimensions, or None if the shapes do not broadcast."""

    def merge(a: int, b: int) -> int | None:
        if a == b or b == 1:
            return a
        return b if a == 1 else None

    if bd:
        if len(ld) == len(rd):
            if list(bd) != list(range(len(ld))):
                return None
            lo, hi = rd, ld
        else:
            lo, hi = (ld, rd) if len(ld) < len(rd) else (rd, ld)
        if len(bd) != len(lo) or not distinct_in(bd, len(hi)) or list(bd) != sorted(bd):
            return None
        res: list[int] = list(hi)
        for i, d in enumerate(bd):
            m = merge(lo[i], hi[d])
            if m is None:
                return None
            res[d] = m
        return tuple(res)
    if ld == rd or not rd:
        return ld
    if not ld:
        return rd
    if len(ld) != len(rd):
        return None
    out = [merge(a, c) for a, c in zip(ld, rd, strict=True)]
    return None if any(m is None for m in out) else tuple(m for m in out if m is not None)


@st.composite
def binary_cases(draw: Any, valid: bool = False, types: Sequence[np.dtype[Any]] = BINARY_TYPES) -> Case:
    name = draw(st.sampled_from(sorted(BINARY_ALLOWED) + COMPARISONS + ["Compare"] * 5))
    allowed = BINARY_ALLOWED.get(name, frozenset(NUMERIC | {PRED}))
    pool = [t for t in types if t in allowed] if valid else types
    assume(pool)
    dt = draw(st.sampled_from(pool))
    fixed = {"Eq": "EQ", "Ne": "NE", "Lt": "LT", "Ge": "GE"}
    direction = fixed.get(name) or draw(st.sampled_from(DIRECTIONS))
    ctype = None
    if name == "Compare":
        ctype = draw(st.sampled_from(COMPARE_TYPES))
        if valid:
            ctype = None
            if dt in COMPLEX:
                direction = draw(st.sampled_from(["EQ", "NE"]))
    elif valid and dt in COMPLEX and name in COMPARISONS:
        assume(direction in ("EQ", "NE"))
    hi = draw(dims_st(0, 4))
    mode = draw(st.sampled_from(["same", "scalar_lhs", "scalar_rhs", "degenerate", "bdims", "bdims"]))
    bd: list[int] | None = None
    ld, rd = hi, hi
    if mode == "same":
        bd = list(range(len(hi))) if draw(st.booleans()) else None
    elif mode == "scalar_lhs":
        ld = ()
    elif mode == "scalar_rhs":
        rd = ()
    elif mode == "degenerate":
        ld = tuple(1 if draw(st.booleans()) else s for s in hi)
        rd = tuple(1 if draw(st.booleans()) else s for s in hi)
    else:
        k = draw(st.integers(0, len(hi)))
        bd = sorted(draw(st.permutations(range(len(hi))))[:k])
        lo = tuple(1 if draw(st.booleans()) else hi[d] for d in bd)
        if draw(st.booleans()):
            ld, rd = lo, hi
        else:
            ld, rd = hi, lo
    rdt = dt
    mutation = pick_mutation(
        draw, valid, ["size", "bd_len", "bd_order", "bd_range", "no_bd", "dtype", "shapes", "direction", "ctype"]
    )
    if mutation == "size" and ld and rd:
        i = draw(st.integers(0, len(rd) - 1))
        rd = rd[:i] + (rd[i] + 2,) + rd[i + 1 :]
    elif mutation == "bd_len":
        bd = (bd or [])[:-1] if bd and draw(st.booleans()) else (bd or []) + [draw(st.integers(0, 4))]
    elif mutation == "bd_order" and bd and len(bd) >= 2:
        bd = bd[::-1]
    elif mutation == "bd_range" and bd:
        bd = bd[:-1] + [draw(st.sampled_from([-1, max(len(ld), len(rd)), bd[-1]]))]
    elif mutation == "no_bd":
        bd = None
    elif mutation == "dtype":
        rdt = draw(st.sampled_from(types))
    elif mutation == "shapes":
        ld, rd = draw(dims_st(0, 3)), draw(dims_st(0, 3))
    elif mutation == "direction" and name == "Compare":
        direction = draw(st.sampled_from(["FOO", "lt", ""]))
    elif mutation == "ctype" and name == "Compare":
        ctype = draw(st.sampled_from(["SIGNED", "UNSIGNED", "FLOAT", "TOTALORDER", "BAR"]))

    is_cmp = name in COMPARISONS or name == "Compare"
    shape_bad = ref_broadcast(ld, rd, bd) is None
    dtype_bad = rdt != dt or dt not in allowed
    if is_cmp:
        if direction.upper() not in DIRECTIONS or ctype == "BAR":
            shape_bad = True
        if dt in COMPLEX and direction.upper() in DIRECTIONS and direction.upper() not in ("EQ", "NE"):
            dtype_bad = True
        if ctype in ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"):
            fitting = {
                "FLOAT": FLOATS | COMPLEX, "TOTALORDER": FLOATS, "SIGNED": SIGNED, "UNSIGNED": UNSIGNED | {PRED},
            }[ctype]
            dtype_bad |= dt not in fitting
    out_dt = PRED if is_cmp else ({F32: C64, F64: C128}.get(dt, dt) if name == "Complex" else dt)
    want = verdict(shape_bad, dtype_bad, out_dt, ref_broadcast(ld, rd, bd))
    fn = getattr(ops, name)
    desc = f"broadcast_dimensions={bd}, direction={direction}, compare_type={ctype}"
    if name == "Compare":
        return Case("Compare", [(dt, ld), (rdt, rd)], lambda b, p: ops.Compare(p[0], p[1], direction, ctype, bd),
                    want, desc)
    return Case("Compare" if is_cmp else name, [(dt, ld), (rdt, rd)], lambda b, p: fn(p[0], p[1], bd), want, desc)


# == BroadcastInDim =============================================================================


@st.composite
def broadcast_in_dim_cases(draw: Any, valid: bool = False, types: Sequence[np.dtype[Any]] = MIX) -> Case:
    out = list(draw(dims_st(0, 4)))
    k = draw(st.integers(0, len(out)))
    bd = list(draw(st.permutations(range(len(out))))[:k])
    if draw(st.booleans()):
        bd.sort()
    xd = [1 if draw(st.booleans()) else out[d] for d in bd]
    dt = draw(st.sampled_from(types))
    mutation = pick_mutation(draw, valid, ["len", "repeat", "range", "size", "negative"])
    if mutation == "len":
        bd = bd[:-1] if bd and draw(st.booleans()) else bd + [len(bd)]
    elif mutation == "repeat" and bd:
        bd = bd + [bd[0]]
        xd = xd + [1]
    elif mutation == "range" and bd:
        bd[-1] = draw(st.sampled_from([-1, len(out), len(out) + 2]))
    elif mutation == "size" and bd:
        xd[0] = out[bd[0]] + 2
    elif mutation == "negative" and out:
        out[draw(st.integers(0, len(out) - 1))] = -1
    shape_bad = (
        any(s < 0 for s in out)
        or len(bd) != len(xd)
        or not distinct_in(bd, len(out))
        or any(xd[i] not in (1, out[d]) for i, d in enumerate(bd))
    )

    def ref(a: list[Arr]) -> list[Arr]:
        order = sorted(range(len(bd)), key=lambda i: bd[i])  # operand dims in result order
        x = np.transpose(a[0], order).reshape([out[d] if d in bd and xd[bd.index(d)] != 1 else 1
                                                for d in range(len(out))])
        return [np.broadcast_to(x, out)]
    return Case(
        "BroadcastInDim", [(dt, tuple(xd))], lambda b, p: ops.BroadcastInDim(p[0], out, bd),
        verdict(shape_bad, False, dt, out), f"shape={out}, broadcast_dimensions={bd}", ref,
    )


# == Reshape ====================================================================================


def prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


@st.composite
def reshape_cases(draw: Any, valid: bool = False, types: Sequence[np.dtype[Any]] = MIX) -> Case:
    xd = draw(dims_st(0, 4))
    dt = draw(st.sampled_from(types))
    total = math.prod(xd)
    if total == 0:
        new = draw(st.lists(st.integers(0, 3), min_size=1, max_size=4))
        new[draw(st.integers(0, len(new) - 1))] = 0
    else:
        k = draw(st.integers(0 if total == 1 else 1, 4))
        new = [1] * k
        for f in prime_factors(total):
            new[draw(st.integers(0, k - 1))] *= f
    perm: list[int] | None = list(draw(st.permutations(range(len(xd))))) if draw(st.booleans()) else None
    mutation = pick_mutation(draw, valid, ["count", "negative", "perm"])
    if mutation == "count":
        new = new + [2] if not new or draw(st.booleans()) else [new[0] + 1] + new[1:]
    elif mutation == "negative":
        new = new + [-1]
    elif mutation == "perm":
        perm = (perm or list(range(len(xd)))) + [draw(st.sampled_from([0, len(xd), -1]))]
    shape_bad = (
        (perm is not None and sorted(perm) != list(range(len(xd))))
        or any(s < 0 for s in new)
        or math.prod(new) != total
    )

    def ref(a: list[Arr]) -> list[Arr]:
        x = a[0] if perm is None else np.transpose(a[0], perm)
        return [x.reshape(new)]

    if perm is None:
        return Case("Reshape", [(dt, xd)], lambda b, p: ops.Reshape(p[0], new), verdict(shape_bad, False, dt, new),
                    f"new_sizes={new}", ref)
    return Case("Reshape", [(dt, xd)], lambda b, p: ops.Reshape(p[0], perm, new),
                verdict(shape_bad, False, dt, new), f"dimensions={perm}, new_sizes={new}", ref)


# == Transpose ==================================================================================


@st.composite
def transpose_cases(draw: Any, valid: bool = False, types: Sequence[np.dtype[Any]] = MIX) -> Case:
    xd = draw(dims_st(0, 4))
    dt = draw(st.sampled_from(types))
    perm = list(draw(st.permutations(range(len(xd)))))
    mutation = pick_mutation(draw, valid, ["repeat", "range", "short", "long"])
    if mutation == "repeat" and len(perm) >= 2:
        perm[0] = perm[1]
    elif mutation == "range" and perm:
        perm[-1] = draw(st.sampled_from([-1, len(perm)]))
    elif mutation == "short" and perm:
        perm = perm[:-1]
    elif mutation == "long":
        perm = perm + [len(perm)]
    ok = sorted(perm) == list(range(len(xd)))
    out = [xd[d] for d in perm] if ok else None
    return Case("Transpose", [(dt, xd)], lambda b, p: ops.Transpose(p[0], perm), verdict(not ok, False, dt, out),
                f"permutation={perm}", lambda a: [np.transpose(a[0], perm)])


# == Slice (with strides) =======================================================================


@st.composite
def slice_cases(draw: Any, valid: bool = False, types: Sequence[np.dtype[Any]] = MIX) -> Case:
    xd = draw(dims_st(0, 4, st.integers(0, 6)))
    dt = draw(st.sampled_from(types))
    start, limit, strides = [], [], []
    for d in xd:
        s = draw(st.integers(0, d))
        start.append(s)
        limit.append(draw(st.integers(s, d)))
        strides.append(draw(st.integers(1, 3)))
    no_strides = draw(st.booleans()) and all(s == 1 for s in strides)
    mutation = pick_mutation(draw, valid, ["start_gt_limit", "limit_big", "negative", "stride", "len"])
    if xd:
        i = draw(st.integers(0, len(xd) - 1))
        if mutation == "start_gt_limit":
            start[i] = limit[i] + 1
        elif mutation == "limit_big":
            limit[i] = xd[i] + draw(st.integers(1, 2))
        elif mutation == "negative":
            start[i] = -1
        elif mutation == "stride":
            strides[i] = draw(st.sampled_from([0, -1]))
            no_strides = False
    if mutation == "len":
        which = draw(st.sampled_from(["start", "limit", "strides"]))
        lst = {"start": start, "limit": limit, "strides": strides}[which]
        if lst and draw(st.booleans()):
            lst.pop()
        else:
            lst.append(1)
        no_strides = False
    r = len(xd)
    ok = len(start) == len(limit) == len(strides) == r and all(
        0 <= start[i] <= limit[i] <= xd[i] and strides[i] >= 1 for i in range(r)
    )
    out = [len(range(start[i], limit[i], strides[i])) for i in range(r)] if ok else None
    idx = tuple(slice(a, z, s) for a, z, s in zip(start, limit, strides, strict=False))
    desc = f"start={start}, limit={limit}, strides={None if no_strides else strides}"
    if no_strides:
        return Case("Slice", [(dt, xd)], lambda b, p: ops.Slice(p[0], start, limit), verdict(not ok, False, dt, out),
                    desc, lambda a: [a[0][idx]])
    return Case("Slice", [(dt, xd)], lambda b, p: ops.Slice(p[0], start, limit, strides),
                verdict(not ok, False, dt, out), desc, lambda a: [a[0][idx]])


# == Pad (negative and interior) ================================================================


@st.composite
def pad_cases(draw: Any, valid: bool = False, types: Sequence[np.dtype[Any]] = MIX) -> Case:
    xd = draw(dims_st(0, 3))
    dt = draw(st.sampled_from(types))
    config: list[tuple[int, ...]] = []
    for _ in xd:
        lo, hi, interior = draw(st.integers(-3, 3)), draw(st.integers(-3, 3)), draw(st.integers(0, 2))
        config.append((lo, hi) if interior == 0 and draw(st.booleans()) else (lo, hi, interior))
    pv_dt, pv_dims = dt, tuple[int, ...]()
    mutation = pick_mutation(draw, valid, ["interior", "len", "value_dtype", "value_shape", "entry"])
    if mutation == "interior" and config:
        lo, hi = config[0][:2]
        config[0] = (lo, hi, -1)
    elif mutation == "len":
        config = config[:-1] if config and draw(st.booleans()) else config + [(0, 0, 0)]
    elif mutation == "value_dtype":
        pv_dt = draw(st.sampled_from(types))
    elif mutation == "value_shape":
        pv_dims = (1,)
    elif mutation == "entry" and config:
        config[0] = draw(st.sampled_from([(1,), (0, 0, 0, 0)]))
    triples = [tuple(c) + (0,) * (3 - len(c)) for c in config]
    shape_bad = (
        pv_dims != ()
        or len(config) != len(xd)
        or any(len(c) not in (2, 3) for c in config)
        or any(t[2] < 0 for t in triples if len(t) == 3)
    )
    out: list[int] = []
    if not shape_bad:
        for d, (lo, hi, interior) in zip(xd, triples, strict=True):
            out.append(lo + hi + d + max(d - 1, 0) * interior)
        shape_bad = any(n < 0 for n in out)

    def ref(a: list[Arr]) -> list[Arr]:
        x = a[0]
        for axis, (lo, hi, interior) in enumerate(triples):
            x = np_pad_axis(x, axis, a[1][()], lo, hi, interior)
        return [x]

    return Case("Pad", [(dt, xd), (pv_dt, pv_dims)], lambda b, p: ops.Pad(p[0], p[1], config),
                verdict(shape_bad, pv_dt != dt, dt, out), f"padding_config={config}", ref)


# == ConcatInDim ================================================================================


@st.composite
def concat_cases(draw: Any, valid: bool = False, types: Sequence[np.dtype[Any]] = MIX) -> Case:
    base = list(draw(dims_st(1, 3)))
    d = draw(st.integers(0, len(base) - 1))
    dt = draw(st.sampled_from(types))
    n = draw(st.integers(1, 4))
    shapes = []
    for _ in range(n):
        s = list(base)
        s[d] = draw(st.integers(0, 3))
        shapes.append(s)
    dts = [dt] * n
    dim = d
    mutation = pick_mutation(draw, valid, ["dtype", "size", "rank", "dim", "empty"])
    if mutation == "dtype":
        dts[-1] = draw(st.sampled_from(types))
    elif mutation == "size" and len(base) > 1:
        j = (d + 1) % len(base)
        shapes[-1][j] += 1
    elif mutation == "rank":
        shapes[-1] = shapes[-1] + [1] if draw(st.booleans()) else shapes[-1][:-1]
    elif mutation == "dim":
        dim = draw(st.sampled_from([-1, len(base), len(base) + 1]))
    empty = mutation == "empty"
    r = len(shapes[0])
    shape_bad = empty or not 0 <= dim < r or any(
        len(s) != r or any(a != c for j, (a, c) in enumerate(zip(s, shapes[0], strict=False)) if j != dim)
        for s in shapes
    )
    dtype_bad = not empty and any(t != dts[0] for t in dts)
    out = list(shapes[0])
    if not shape_bad:
        out[dim] = sum(s[dim] for s in shapes)
    params = [(t, tuple(s)) for t, s in zip(dts, shapes, strict=True)]
    return Case("ConcatInDim", params, lambda b, p: ops.ConcatInDim(b, [] if empty else p, dim),
                verdict(shape_bad, dtype_bad, dts[0], out), f"dimension={dim}, empty={empty}",
                lambda a: [np.concatenate(a, axis=dim)])


# == DotGeneral =================================================================================

DOT_TYPES = [F32, S32, BF16, C64, PRED, S8, S4, F64, D(ml_dtypes.float8_e4m3fn), U8]
PREFERRED = [None, None, None, F32, S32, C64, F64, BF16]


def preferred_ok(dt: np.dtype[Any], pref: np.dtype[Any]) -> bool:
    """A ``preferred_element_type`` for operands of ``dt``: complex only for complex operands, and no
    integer result for floating-point operands."""
    return (pref in COMPLEX) == (dt in COMPLEX) and not (dt in FLOATS and pref in INTS)


@st.composite
def dot_general_cases(draw: Any, valid: bool = False, types: Sequence[np.dtype[Any]] = DOT_TYPES) -> Case:
    nb, nc = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    fl, fr = draw(st.integers(0, 4 - nb - nc)), draw(st.integers(0, 4 - nb - nc))
    bsz = [draw(SIZE) for _ in range(nb)]
    csz = [draw(SIZE) for _ in range(nc)]
    lsz = [draw(SIZE) for _ in range(fl)]
    rsz = [draw(SIZE) for _ in range(fr)]
    lperm = list(draw(st.permutations(range(nb + nc + fl))))
    rperm = list(draw(st.permutations(range(nb + nc + fr))))
    lb, lc = lperm[:nb], lperm[nb : nb + nc]
    rb, rc = rperm[:nb], rperm[nb : nb + nc]
    ld, rd = [0] * len(lperm), [0] * len(rperm)
    for pos, s in zip(lperm, bsz + csz + lsz, strict=True):
        ld[pos] = s
    for pos, s in zip(rperm, bsz + csz + rsz, strict=True):
        rd[pos] = s
    dt = draw(st.sampled_from(types))
    rdt = dt
    pref = draw(st.sampled_from(PREFERRED))
    if valid and pref is not None and not preferred_ok(dt, pref):
        pref = None
    mutation = pick_mutation(draw, valid, ["csize", "bsize", "range", "repeat", "len", "overlap", "dtype"])
    if mutation == "csize" and nc:
        rd[rc[0]] += 1
    elif mutation == "bsize" and nb:
        rd[rb[0]] += 2
    elif mutation == "range":
        lc = lc + [len(ld) + draw(st.integers(0, 1))]
        rc = rc + [0]
    elif mutation == "repeat" and lc:
        lc = lc + [lc[0]]
        rc = rc + [rc[0]]
    elif mutation == "len" and rc:
        rc = rc[:-1]
    elif mutation == "overlap" and lc:
        lb = lb + [lc[0]]
        rb = rb + [rc[0]]
    elif mutation == "dtype":
        rdt = draw(st.sampled_from(types))
    dn = ((lc, rc), (lb, rb))

    def dims_ok(v: list[int], r: int) -> bool:
        return distinct_in(v, r)

    shape_bad = (
        not all(dims_ok(v, len(ld)) for v in (lc, lb))
        or not all(dims_ok(v, len(rd)) for v in (rc, rb))
        or len(lc) != len(rc) or len(lb) != len(rb)
        or bool(set(lc) & set(lb)) or bool(set(rc) & set(rb))
        or any(ld[a] != rd[c] for a, c in zip(lc + lb, rc + rb, strict=False))
    )
    dtype_bad = rdt != dt or dt not in NUMERIC | {PRED}
    if pref is not None:
        dtype_bad |= not preferred_ok(dt, pref)
    out: list[int] = []
    if not shape_bad:
        out = [ld[d] for d in lb] + [s for i, s in enumerate(ld) if i not in lb + lc]
        out += [s for i, s in enumerate(rd) if i not in rb + rc]
    out_dt = pref if pref is not None else dt

    def ref(a: list[Arr]) -> list[Arr]:
        letters = iter("abcdefghijklmnop")
        lhs = [""] * len(ld)
        rhs = [""] * len(rd)
        for x, y in zip(lb + lc, rb + rc, strict=True):
            lhs[x] = rhs[y] = next(letters)
        for i in range(len(ld)):
            lhs[i] = lhs[i] or next(letters)
        for i in range(len(rd)):
            rhs[i] = rhs[i] or next(letters)
        res = [lhs[d] for d in lb] + [lhs[i] for i in range(len(ld)) if i not in lb + lc]
        res += [rhs[i] for i in range(len(rd)) if i not in rb + rc]
        spec = f"{''.join(lhs)},{''.join(rhs)}->{''.join(res)}"
        return [np.einsum(spec, a[0].astype(np.float64), a[1].astype(np.float64))]

    return Case("DotGeneral", [(dt, tuple(ld)), (rdt, tuple(rd))],
                lambda b, p: ops.DotGeneral(p[0], p[1], dn, preferred_element_type=pref),
                verdict(shape_bad, dtype_bad, out_dt, out), f"dimension_numbers={dn}, preferred={pref}", ref)


# == ConvGeneralDilated =========================================================================

CONV_TYPES = [F32, S32, BF16, C64, S8, F64, PRED]


def conv_ref(
    x: Arr, w: Arr, strides: Sequence[int], pads: Sequence[tuple[int, int]], ldil: Sequence[int],
    rdil: Sequence[int], g: int, bg: int,
) -> Arr:
    """Convolution of ``x (B, C, *S)`` with ``w (O, I, *K)`` per the StableHLO specification."""
    n = x.ndim - 2
    xp = x.astype(np.float64)
    for i in range(n):
        xp = np_pad_axis(xp, 2 + i, 0.0, pads[i][0], pads[i][1], ldil[i] - 1)
    b_, o_, i_ = x.shape[0], w.shape[0], w.shape[1]
    ks = w.shape[2:]
    out_sp = []
    for i in range(n):
        dwin = (ks[i] - 1) * rdil[i] + 1
        out_sp.append((xp.shape[2 + i] - dwin) // strides[i] + 1 if xp.shape[2 + i] >= dwin else 0)
    bo = b_ // bg
    out = np.zeros((bo, o_, *out_sp))
    if 0 in out.shape:
        return out
    og, ob = o_ // g, o_ // bg
    wf = w.astype(np.float64)
    for oc in range(o_):
        grp, bgrp = oc // og, oc // ob
        xs_ = xp[bgrp * bo : (bgrp + 1) * bo, grp * i_ : (grp + 1) * i_]
        for k in itertools.product(*[range(s) for s in ks]):
            sl = tuple(
                slice(k[i] * rdil[i], k[i] * rdil[i] + (out_sp[i] - 1) * strides[i] + 1, strides[i]) for i in range(n)
            )
            patch = xs_[(slice(None), slice(None), *sl)]
            index: tuple[Any, ...] = (oc, slice(None), *k)
            kernel: Arr = wf[index]
            out[:, oc] += np.tensordot(patch, kernel, axes=([1], [0]))
    return out


@st.composite
def conv_cases(draw: Any, valid: bool = False, types: Sequence[np.dtype[Any]] = CONV_TYPES) -> Case:
    n = draw(st.sampled_from([1, 1, 2, 2, 0, 3] if not valid else [1, 2, 2, 0]))
    letters = "HWD"[:n]
    lhs_spec = "".join(draw(st.permutations("NC" + letters)))
    rhs_spec = "".join(draw(st.permutations("OI" + letters)))
    out_spec = "".join(draw(st.permutations("NC" + letters)))
    groups = draw(st.sampled_from(["none", "none", "feature", "batch"]))
    g = draw(st.integers(2, 3)) if groups == "feature" else 1
    bg = draw(st.integers(2, 3)) if groups == "batch" else 1
    i_ = draw(st.integers(1, 3))
    c = i_ * g
    o_ = g * bg * draw(st.integers(1, 2))
    b_ = bg * draw(st.sampled_from([0, 1, 1, 2]))
    in_sp = [draw(st.sampled_from([0, 1, 2, 3, 4, 5, 5])) for _ in range(n)]
    k_sp = [draw(st.integers(1, 3)) for _ in range(n)]
    strides = [draw(st.integers(1, 3)) for _ in range(n)]
    ldil = [draw(st.integers(1, 3)) for _ in range(n)]
    rdil = [draw(st.integers(1, 3)) for _ in range(n)]
    padding: Any = draw(st.sampled_from(["pairs", "pairs", "SAME", "VALID"]))
    if padding == "pairs":
        padding = [(draw(st.integers(-2, 3)), draw(st.integers(-2, 3))) for _ in range(n)]
    dt = draw(st.sampled_from(types))
    rdt = dt
    pref = draw(st.sampled_from(PREFERRED))
    if valid and pref is not None and not preferred_ok(dt, pref):
        pref = None
    mutation = pick_mutation(
        draw, valid,
        ["features", "out_features", "batch", "both_groups", "zero_group", "stride", "dilation", "attr_len",
         "pad_len", "layout", "kernel0", "dtype", "rank"],
    )
    rank_delta = 0
    if mutation == "features":
        c += 1
    elif mutation == "out_features" and g > 1:
        o_ += 1
    elif mutation == "batch" and bg > 1:
        b_ += 1
    elif mutation == "both_groups":
        g, bg = 2, 2
        c, o_, b_ = 2 * i_, 4, 2
    elif mutation == "zero_group":
        g = 0 if draw(st.booleans()) else g
        bg = 0 if g else bg
    elif mutation == "stride" and n:
        strides[0] = 0
    elif mutation == "dilation" and n:
        (ldil if draw(st.booleans()) else rdil)[0] = draw(st.sampled_from([0, -1]))
    elif mutation == "attr_len":
        which = draw(st.sampled_from(["strides", "ldil", "rdil"]))
        lst = {"strides": strides, "ldil": ldil, "rdil": rdil}[which]
        lst.append(1)
    elif mutation == "pad_len" and isinstance(padding, list):
        padding = padding + [(0, 0)]
    elif mutation == "layout":
        which = draw(st.sampled_from(["lhs", "rhs", "out"]))
        bad = draw(st.sampled_from(["repeat", "short", "letter"]))
        spec = {"lhs": lhs_spec, "rhs": rhs_spec, "out": out_spec}[which]
        spec = spec[:-1] + spec[0] if bad == "repeat" else spec[:-1] if bad == "short" else spec[:-1] + "X"
        lhs_spec, rhs_spec, out_spec = (
            spec if which == "lhs" else lhs_spec, spec if which == "rhs" else rhs_spec,
            spec if which == "out" else out_spec,
        )
    elif mutation == "kernel0" and n:
        k_sp[0] = 0
    elif mutation == "dtype":
        rdt = draw(st.sampled_from(types))
    elif mutation == "rank":
        rank_delta = 1

    sp = [ch for ch in "OI" + letters if ch not in "OI"]
    sp = [ch for ch in rhs_spec if ch in letters] if sorted(rhs_spec) == sorted("OI" + letters) else sp
    canon_x = {"N": b_, "C": c, **dict(zip(sp, in_sp, strict=False))}
    canon_w = {"O": o_, "I": i_, **dict(zip(sp, k_sp, strict=False))}
    xd = tuple(canon_x.get(ch, 1) for ch in lhs_spec)
    wd = tuple(canon_w.get(ch, 1) for ch in rhs_spec) + (1,) * rank_delta

    layouts_ok = (
        all(len(s) == n + 2 and len(set(s)) == len(s) for s in (lhs_spec, rhs_spec, out_spec))
        and set(lhs_spec) == set(out_spec) == set("NC" + letters)
        and set(rhs_spec) == set("OI" + letters)
    )
    attrs_ok = all(len(v) == n and all(s >= 1 for s in v) for v in (strides, ldil, rdil))
    pads: list[tuple[int, int]] = []
    if isinstance(padding, list):
        pads_ok = len(padding) == n
        pads = list(padding)
    else:
        pads_ok = True
        if attrs_ok:
            for s, k, st_, ld_, rd_ in zip(in_sp, k_sp, strides, ldil, rdil, strict=True):
                din = (s - 1) * ld_ + 1 if s else 0
                dk = (k - 1) * rd_ + 1 if k else 0
                if padding == "VALID":
                    pads.append((0, 0))
                else:
                    total = max((-(-din // st_) - 1) * st_ + dk - din, 0)
                    pads.append((total // 2, total - total // 2))
    groups_ok = (
        g >= 1 and bg >= 1 and (g == 1 or bg == 1) and c % g == 0 and c // g == i_ and o_ % g == 0
        and b_ % bg == 0 and o_ % bg == 0
    )
    shape_bad = rank_delta != 0 or not (layouts_ok and attrs_ok and pads_ok and groups_ok and all(k >= 1 for k in k_sp))
    dtype_bad = rdt != dt or dt not in NUMERIC
    if pref is not None:
        dtype_bad |= not preferred_ok(dt, pref)
    out: list[int] = []
    if not shape_bad:
        osp = []
        for i in range(n):
            din = (in_sp[i] - 1) * ldil[i] + 1 if in_sp[i] else 0
            padded = din + pads[i][0] + pads[i][1]
            dk = (k_sp[i] - 1) * rdil[i] + 1
            osp.append((padded - dk) // strides[i] + 1 if padded >= dk else 0)
        canon_o = {"N": b_ // bg, "C": o_, **dict(zip(sp, osp, strict=True))}
        out = [canon_o[ch] for ch in out_spec]

    def ref(a: list[Arr]) -> list[Arr]:
        x = np.transpose(a[0], [lhs_spec.index(ch) for ch in "NC" + "".join(sp)])
        w = np.transpose(a[1], [rhs_spec.index(ch) for ch in "OI" + "".join(sp)])
        res = conv_ref(x, w, strides, pads, ldil, rdil, g, bg)
        canon = "NC" + "".join(sp)
        return [np.transpose(res, [canon.index(ch) for ch in out_spec])]

    dn = (lhs_spec, rhs_spec, out_spec)
    return Case(
        "ConvGeneralDilated", [(dt, xd), (rdt, wd)],
        lambda b, p: ops.ConvGeneralDilated(p[0], p[1], strides, padding, ldil, rdil, dn, g, bg,
                                            preferred_element_type=pref),
        verdict(shape_bad, dtype_bad, dt if pref is None else pref, out),
        f"strides={strides}, padding={padding}, lhs_dilation={ldil}, rhs_dilation={rdil}, dimension_numbers={dn}, "
        f"feature_group_count={g}, batch_group_count={bg}, preferred={pref}", ref,
    )


# == Reduce =====================================================================================


@st.composite
def reduce_cases(draw: Any, valid: bool = False) -> Case:
    xd = draw(dims_st(0, 4))
    n = draw(st.integers(1, 2))
    dts = [draw(st.sampled_from(MIX)) for _ in range(n)]
    k = draw(st.integers(0, len(xd)))
    dims = list(draw(st.permutations(range(len(xd))))[:k])
    shapes = [xd] * n
    init_dts = list(dts)
    init_dims: list[Dims] = [()] * n
    n_inits = n
    reducer_n = n
    mutation = pick_mutation(
        draw, valid, ["repeat", "range", "negative", "operand_dims", "init_shape", "init_dtype", "inits", "reducer"]
    )
    if mutation == "repeat" and dims:
        dims = dims + [dims[0]]
    elif mutation == "range":
        dims = dims + [len(xd) + draw(st.integers(0, 1))]
    elif mutation == "negative":
        dims = dims + [-1]
    elif mutation == "operand_dims" and n == 2:
        shapes = [xd, xd + (2,)]
    elif mutation == "init_shape":
        init_dims[-1] = (1,)
    elif mutation == "init_dtype":
        init_dts[-1] = draw(st.sampled_from(MIX))
    elif mutation == "inits":
        n_inits = n + 1 if n == 1 else 1
    elif mutation == "reducer":
        reducer_n = n + 1
    init_dts = (init_dts + [dts[0]])[:n_inits]
    init_dims = (init_dims + [()])[:n_inits]
    shape_bad = (
        n_inits != n or any(s != xd for s in shapes) or any(d != () for d in init_dims)
        or not distinct_in(dims, len(xd)) or reducer_n != n
    )
    dtype_bad = n_inits == n and any(a != c for a, c in zip(init_dts, dts, strict=True))
    dtype_bad |= len({t for t in dts if t in FLOATS}) > 1  # XLA rejects mixed float precisions in a reduce
    dtype_bad |= 0 < sum(t in (S2, U2) for t in dts) < n  # and XLA:CPU 2-bit operands beside other widths
    out = [s for i, s in enumerate(xd) if i not in dims]
    want = tuple_verdict(shape_bad, dtype_bad, [shape_of(t, out) for t in dts])
    specs = [(t, s) for t, s in zip(dts, shapes, strict=True)] + list(zip(init_dts, init_dims, strict=True))

    def reducer(*a: xs.XlaOp) -> tuple[xs.XlaOp, ...]:
        m = len(a) // 2
        res = tuple(ops.Add(a[i], a[m + i]) for i in range(m))
        return res + a[:1] if reducer_n != n else res

    return Case("Reduce", specs, lambda b, p: ops.Reduce(b, p[:n], p[n:], reducer, dims), want,
                f"dimensions_to_reduce={dims}, inits={n_inits}, reducer results={reducer_n}")


# == ReduceWindow ===============================================================================


def same_pads(dims: Sequence[int], win: Sequence[int], strides: Sequence[int]) -> list[tuple[int, int]]:
    out = []
    for size, w, s in zip(dims, win, strides, strict=True):
        total = max((-(-size // s) - 1) * s + w - size, 0)
        out.append((total // 2, total - total // 2))
    return out


def dilated(n: int, d: int) -> int:
    return (n - 1) * d + 1 if n > 0 else 0


def reduce_window_ref(
    x: Arr, init: Any, fn: Callable[[Arr, Arr], Arr], win: Sequence[int], strides: Sequence[int],
    pads: Sequence[tuple[int, int]], bdil: Sequence[int], wdil: Sequence[int],
) -> Arr:
    xp = x
    for axis in range(x.ndim):
        xp = np_pad_axis(xp, axis, init, pads[axis][0], pads[axis][1], bdil[axis] - 1)
    osz = []
    for axis in range(x.ndim):
        dw = dilated(win[axis], wdil[axis])
        osz.append((xp.shape[axis] - dw) // strides[axis] + 1 if xp.shape[axis] >= dw else 0)
    out = np.full(osz, init, dtype=x.dtype)
    if 0 in osz:
        return out
    for k in itertools.product(*[range(w) for w in win]):
        sl = tuple(
            slice(k[a] * wdil[a], k[a] * wdil[a] + (osz[a] - 1) * strides[a] + 1, strides[a]) for a in range(x.ndim)
        )
        out = fn(out, xp[sl])
    return np.asarray(out)


@st.composite
def reduce_window_cases(draw: Any, valid: bool = False, types: Sequence[np.dtype[Any]] = MIX) -> Case:
    xd = draw(dims_st(0, 3, st.integers(0, 5)))
    r = len(xd)
    n = draw(st.sampled_from([1, 1, 2])) if not valid else 1
    dts = [draw(st.sampled_from(types)) for _ in range(n)]
    win = [draw(st.integers(1, 3)) for _ in range(r)]
    strides = [draw(st.integers(1, 3)) for _ in range(r)]
    bdil = [draw(st.integers(1, 2)) for _ in range(r)] if draw(st.booleans()) else []
    wdil = [draw(st.integers(1, 2)) for _ in range(r)] if draw(st.booleans()) else []
    padding: Any = draw(st.sampled_from(["pairs", "pairs", "SAME", "VALID"]))
    if padding == "pairs":
        padding = [(draw(st.integers(-2, 2)), draw(st.integers(-2, 2))) for _ in range(r)]
    init_dts = list(dts)
    init_dims: list[Dims] = [()] * n
    shapes = [xd] * n
    mutation = pick_mutation(
        draw, valid, ["zero", "negative", "len", "pad_len", "crop", "operand_dims", "init_dtype", "init_shape"]
    )
    if r and mutation in ("zero", "negative", "len"):
        which = draw(st.sampled_from(["win", "strides", "bdil", "wdil"]))
        lst = {"win": win, "strides": strides, "bdil": bdil, "wdil": wdil}[which]
        if mutation == "len":
            lst.append(1)
        elif lst:
            lst[0] = 0 if mutation == "zero" else -1
    elif mutation == "pad_len" and isinstance(padding, list):
        padding = padding + [(0, 0)]
    elif mutation == "crop" and r:
        padding = [(-3, -3)] + [(0, 0)] * (r - 1)
    elif mutation == "operand_dims" and n == 2:
        shapes = [xd, xd + (1,)]
    elif mutation == "init_dtype":
        init_dts[0] = draw(st.sampled_from(types))
    elif mutation == "init_shape":
        init_dims[0] = (1,)
    bd_ = bdil or [1] * r
    wd_ = wdil or [1] * r
    attrs_ok = all(len(v) == r and all(s >= 1 for s in v) for v in (win, strides, bd_, wd_))
    pads: list[tuple[int, int]] = []
    pads_ok = True
    if isinstance(padding, list):
        pads = list(padding)
        pads_ok = len(pads) == r
    elif attrs_ok:
        din = [dilated(s, d) for s, d in zip(xd, bd_, strict=True)]
        dw = [dilated(w, d) for w, d in zip(win, wd_, strict=True)]
        pads = same_pads(din, dw, strides) if padding == "SAME" else [(0, 0)] * r
    shape_bad = not (attrs_ok and pads_ok) or any(s != xd for s in shapes) or any(d != () for d in init_dims)
    if not shape_bad:
        shape_bad = any(dilated(s, d) + lo + hi < 0 for s, d, (lo, hi) in zip(xd, bd_, pads, strict=True))
    dtype_bad = any(a != c for a, c in zip(init_dts, dts, strict=True))
    out: list[int] = []
    if not shape_bad:
        for s, w, st_, d1, d2, (lo, hi) in zip(xd, win, strides, bd_, wd_, pads, strict=True):
            padded, dwin = dilated(s, d1) + lo + hi, dilated(w, d2)
            out.append((padded - dwin) // st_ + 1 if padded >= dwin else 0)
    use_max = draw(st.booleans()) and not any(t in COMPLEX for t in dts)  # Max has no complex form
    want = tuple_verdict(shape_bad, dtype_bad, [shape_of(t, out) for t in dts])
    identity: dict[int, Any] = {}
    if n == 1 and dts[0] in (F32, S32):  # value tests: the reducer's identity as init value
        identity[1] = (-np.inf if dts[0] == F32 else np.iinfo(np.int32).min) if use_max else 0

    def reducer(*a: xs.XlaOp) -> tuple[xs.XlaOp, ...]:
        m = len(a) // 2
        return tuple((ops.Max if use_max else ops.Add)(a[i], a[m + i]) for i in range(m))

    def ref(a: list[Arr]) -> list[Arr]:
        fn: Callable[[Arr, Arr], Arr] = np.maximum if use_max else np.add
        return [reduce_window_ref(a[0], a[1][()], fn, win, strides, pads, bd_, wd_)]

    specs = [(t, s) for t, s in zip(dts, shapes, strict=True)] + list(zip(init_dts, init_dims, strict=True))
    variadic = n > 1 or draw(st.booleans())

    def build(b: xs.XlaBuilder, p: list[xs.XlaOp]) -> xs.XlaOp:
        operands: Any = p[:n] if variadic else p[0]
        inits: Any = p[n:] if variadic else p[n]
        return ops.ReduceWindow(operands, inits, reducer, win, strides, padding, bdil, wdil)

    return Case("ReduceWindow", specs, build, want,
                f"window={win}, strides={strides}, padding={padding}, base_dilations={bdil}, window_dilations={wdil}, "
                f"{'max' if use_max else 'add'}", ref, identity)


# == Gather and Scatter =========================================================================


def _dnums_ok(window: list[int], dropped: list[int], imap: list[int], ivd: int, ob: list[int], ib: list[int]) -> bool:
    """The checks on gather/scatter dimension numbers alone (StableHLO C4, C6, C7, C10, C13, C15, C16, C18)."""
    lists = (window, dropped, imap, ob, ib)
    if any(len(set(v)) != len(v) or any(d < 0 for d in v) for v in lists) or ivd < 0:
        return False
    if window != sorted(window) or dropped != sorted(dropped) or ob != sorted(ob):
        return False
    if set(dropped) & set(ob) or set(imap) & set(ob):
        return False
    return ivd not in ib and len(ob) == len(ib)


def _index_layout(draw: Any, xd: Sequence[int], ob: list[int], nvec: int) -> tuple[list[int], int, list[int]]:
    """Indices dimensions, index_vector_dim and the indices batching dims paired with ``ob``."""
    m = draw(st.integers(len(ob), len(ob) + 2))
    batch = [draw(SIZE) for _ in range(m)]
    pos = list(draw(st.permutations(range(m))))[: len(ob)]
    for j, p in enumerate(pos):
        batch[p] = xd[ob[j]]
    if nvec == 1 and draw(st.booleans()):
        return batch, m, pos
    ivd = draw(st.integers(0, m))
    return batch[:ivd] + [nvec] + batch[ivd:], ivd, [p if p < ivd else p + 1 for p in pos]


@st.composite
def gather_cases(draw: Any, valid: bool = False) -> Case:
    r = draw(st.sampled_from([1, 1, 2, 2, 3, 3, 4, 0]))
    xd = list(draw(dims_st(r, r, st.integers(0, 4))))
    perm = list(draw(st.permutations(range(r))))
    nob = draw(st.integers(0, min(1, r)))
    ncoll = draw(st.integers(0, r - nob))
    ob, coll = sorted(perm[:nob]), sorted(perm[nob : nob + ncoll])
    window = [d for d in range(r) if d not in ob + coll]
    cand = [d for d in range(r) if d not in ob]
    nvec = draw(st.integers(0, len(cand)))
    sim = list(draw(st.permutations(cand)))[:nvec]
    idd, ivd, sib = _index_layout(draw, xd, ob, nvec)
    sizes = [1 if d in ob + coll else draw(st.integers(0, xd[d])) for d in range(r)]
    rank = len(idd) - (1 if ivd < len(idd) else 0) + len(window)
    offset = sorted(list(draw(st.permutations(range(rank))))[: len(window)])
    idt = draw(st.sampled_from(INDEX_TYPES))
    mutation = pick_mutation(
        draw, valid,
        ["offset_order", "offset_range", "rank_sum", "map_len", "map_range", "ivd", "slice_big", "slice_len",
         "slice_collapsed", "batch_size", "ivd_batching", "index_dtype", "overlap", "sorted_flag"],
    )
    sorted_flag: Any = False
    if mutation == "offset_order" and len(offset) >= 2:
        offset = offset[::-1]
    elif mutation == "offset_range" and offset:
        offset[-1] = rank
    elif mutation == "rank_sum":
        if coll:
            coll = coll[:-1]
        elif window:
            coll = [window[0]]
    elif mutation == "map_len":
        sim = sim[:-1] if sim else [window[0] if window else 0]
    elif mutation == "map_range" and sim:
        sim[-1] = r
    elif mutation == "ivd":
        ivd = len(idd) + 1
    elif mutation == "slice_big" and r:
        d = draw(st.integers(0, r - 1))
        sizes[d] = xd[d] + 1
    elif mutation == "slice_len":
        sizes = sizes + [1]
    elif mutation == "slice_collapsed" and coll:
        sizes[coll[0]] = draw(st.sampled_from([0, 2]))
    elif mutation == "batch_size" and sib:
        idd[sib[0]] += 1
    elif mutation == "ivd_batching" and sib:
        ivd = sib[0]
    elif mutation == "index_dtype":
        idt = draw(st.sampled_from([F32, PRED, BF16]))
    elif mutation == "overlap" and ob:
        coll = sorted(set(coll) | {ob[0]})
    elif mutation == "sorted_flag":
        sorted_flag = 1
    dn = {
        "offset_dims": offset, "collapsed_slice_dims": coll, "start_index_map": sim, "index_vector_dim": ivd,
        "operand_batching_dims": ob, "start_indices_batching_dims": sib,
    }
    dt = draw(st.sampled_from(MIX))
    out = gather_ref_shape(xd, idd, offset, coll, sim, ivd, ob, sib, sizes)
    dtype_bad = idt not in INTS or sorted_flag is not False
    return Case("Gather", [(dt, tuple(xd)), (idt, tuple(idd))],
                lambda b, p: ops.Gather(p[0], p[1], dn, sizes, sorted_flag),
                verdict(out is None, dtype_bad, dt, out), f"dimension_numbers={dn}, slice_sizes={sizes}")


def gather_ref_shape(
    xd: list[int], idd: list[int], offset: list[int], coll: list[int], sim: list[int], ivd: int, ob: list[int],
    sib: list[int], sizes: list[int],
) -> list[int] | None:
    """StableHLO ``gather`` C1-C22 (with xlasdk's documented rule: slice size exactly 1 in collapsed and
    batching dimensions); the result dimensions or None."""
    r, ri = len(xd), len(idd)
    if not _dnums_ok(offset, coll, sim, ivd, ob, sib) or ivd > ri:
        return None
    if len(sim) != (idd[ivd] if ivd < ri else 1):
        return None
    if not all(d < r for d in coll + sim + ob) or not all(d < ri for d in sib):
        return None
    if len(offset) + len(coll) + len(ob) != r or len(sizes) != r:
        return None
    if any(not 0 <= s <= xd[i] for i, s in enumerate(sizes)) or any(sizes[d] != 1 for d in coll + ob):
        return None
    if any(xd[a] != idd[c] for a, c in zip(ob, sib, strict=True)):
        return None
    batch = [s for i, s in enumerate(idd) if i != ivd]
    rank = len(batch) + len(offset)
    if any(d >= rank for d in offset):
        return None
    offs = iter([sizes[d] for d in range(r) if d not in coll + ob])
    bats = iter(batch)
    return [next(offs) if i in offset else next(bats) for i in range(rank)]


@st.composite
def scatter_cases(draw: Any, valid: bool = False) -> Case:
    r = draw(st.sampled_from([1, 1, 2, 2, 3, 3, 0]))
    xd = list(draw(dims_st(r, r, st.integers(0, 4))))
    perm = list(draw(st.permutations(range(r))))
    nib = draw(st.integers(0, min(1, r)))
    nins = draw(st.integers(0, r - nib))
    ib, ins = sorted(perm[:nib]), sorted(perm[nib : nib + nins])
    window = [d for d in range(r) if d not in ib + ins]
    cand = [d for d in range(r) if d not in ib]
    nvec = draw(st.integers(0, len(cand)))
    sdod = list(draw(st.permutations(cand)))[:nvec]
    idd, ivd, sib = _index_layout(draw, xd, ib, nvec)
    scatter_sizes = [s for i, s in enumerate(idd) if i != ivd]
    urank = len(scatter_sizes) + len(window)
    uwd = sorted(list(draw(st.permutations(range(urank))))[: len(window)])
    wsizes = iter([draw(st.integers(0, xd[d])) for d in window])
    ssizes = iter(scatter_sizes)
    ud = [next(wsizes) if i in uwd else next(ssizes) for i in range(urank)]
    dt = draw(st.sampled_from(MIX))
    udt, idt = dt, draw(st.sampled_from(INDEX_TYPES))
    result_dt: np.dtype[Any] | None = None
    n_results = 1
    mutation = pick_mutation(
        draw, valid,
        ["uwd_order", "uwd_range", "rank_sum", "map_len", "map_range", "ivd", "window_big", "scatter_size",
         "update_rank", "batch_size", "update_dtype", "index_dtype", "computation_dtype", "computation_count"],
    )
    if mutation == "uwd_order" and len(uwd) >= 2:
        uwd = uwd[::-1]
    elif mutation == "uwd_range" and uwd:
        uwd[-1] = urank
    elif mutation == "rank_sum":
        ins = ins[:-1] if ins else ([window[0]] if window else ins)
    elif mutation == "map_len":
        sdod = sdod[:-1] if sdod else [window[0] if window else 0]
    elif mutation == "map_range" and sdod:
        sdod[-1] = r
    elif mutation == "ivd":
        ivd = len(idd) + 1
    elif mutation == "window_big" and uwd:
        ud[uwd[0]] = xd[window[0]] + 1
    elif mutation == "scatter_size" and len(uwd) < urank:
        j = next(i for i in range(urank) if i not in uwd)
        ud[j] += 1
    elif mutation == "update_rank":
        ud = ud + [1]
    elif mutation == "batch_size" and sib:
        idd[sib[0]] += 1
    elif mutation == "update_dtype":
        udt = draw(st.sampled_from(MIX))
    elif mutation == "index_dtype":
        idt = draw(st.sampled_from([F32, PRED]))
    elif mutation == "computation_dtype":  # complex converts to complex only (else ConvertElementType raises)
        result_dt = draw(st.sampled_from([C64, C128] if dt in COMPLEX else [S32, F32, PRED, U8]))
    elif mutation == "computation_count":
        n_results = 2
    dn = {
        "update_window_dims": uwd, "inserted_window_dims": ins, "scatter_dims_to_operand_dims": sdod,
        "index_vector_dim": ivd, "input_batching_dims": ib, "scatter_indices_batching_dims": sib,
    }
    ok = scatter_ref_ok(xd, idd, ud, uwd, ins, sdod, ivd, ib, sib)
    dtype_bad = udt != dt or idt not in INTS or (result_dt is not None and result_dt != dt)

    def update(a: xs.XlaOp, x: xs.XlaOp) -> Any:
        s = ops.Add(a, x)
        if result_dt is not None:
            s = ops.ConvertElementType(s, result_dt)
        return s if n_results == 1 else (s, s)

    return Case("Scatter", [(dt, tuple(xd)), (idt, tuple(idd)), (udt, tuple(ud))],
                lambda b, p: ops.Scatter(p[0], p[1], p[2], update, dn),
                verdict(not ok or n_results != 1, dtype_bad, dt, xd), f"dimension_numbers={dn}")


def scatter_ref_ok(
    xd: list[int], idd: list[int], ud: list[int], uwd: list[int], ins: list[int], sdod: list[int], ivd: int,
    ib: list[int], sib: list[int],
) -> bool:
    """StableHLO ``scatter`` constraints on shapes and dimension numbers."""
    r, ri = len(xd), len(idd)
    if not _dnums_ok(uwd, ins, sdod, ivd, ib, sib) or ivd > ri:
        return False
    if len(sdod) != (idd[ivd] if ivd < ri else 1):
        return False
    if not all(d < r for d in ins + sdod + ib) or not all(d < ri for d in sib):
        return False
    if len(uwd) + len(ins) + len(ib) != r:
        return False
    if any(xd[a] != idd[c] for a, c in zip(ib, sib, strict=True)):
        return False
    scatter_sizes = [s for i, s in enumerate(idd) if i != ivd]
    if len(ud) != len(scatter_sizes) + len(uwd) or any(d >= len(ud) for d in uwd):
        return False
    bounds = iter([xd[d] for d in range(r) if d not in ins + ib])
    sizes = iter(scatter_sizes)
    return all(s <= next(bounds) if i in uwd else s == next(sizes) for i, s in enumerate(ud))


# == DynamicSlice ===============================================================================


@st.composite
def dynamic_slice_cases(draw: Any, valid: bool = False) -> Case:
    xd = draw(dims_st(0, 3))
    r = len(xd)
    dt = draw(st.sampled_from(MIX))
    sizes = [draw(st.integers(0, d)) for d in xd]
    form = draw(st.sampled_from(["ints", "params", "mixed", "vector"]))
    idt = draw(st.sampled_from(INDEX_TYPES))
    kinds = ["int" if form == "ints" else "param" if form == "params" else draw(st.sampled_from(["int", "param"]))
             for _ in range(r)]
    ints = [draw(st.integers(-2, 6)) for _ in range(r)]
    pdts = [idt] * r
    pdims: list[Dims] = [()] * r
    vec_len = r
    mutation = pick_mutation(draw, valid, ["size_big", "size_neg", "sizes_len", "starts_len", "mixed_types",
                                           "float_index", "non_scalar", "too_big"])
    if r and mutation in ("size_big", "size_neg"):
        i = draw(st.integers(0, r - 1))
        sizes[i] = xd[i] + 1 if mutation == "size_big" else -1
    elif mutation == "sizes_len":
        sizes = sizes + [0]
    elif mutation == "starts_len":
        kinds = kinds + ["int"]
        ints = ints + [0]
        pdts, pdims = pdts + [idt], pdims + [()]
        vec_len = r + 1
    elif r and mutation == "mixed_types":
        pdts[0] = S16
    elif r and mutation == "float_index":
        pdts[0] = draw(st.sampled_from([F32, PRED]))
    elif r and mutation == "non_scalar":
        pdims[0] = (1,)
    elif r and mutation == "too_big":
        ints[0] = 300
        kinds[0] = "int"
    n = len(kinds)
    if form == "vector":
        vdt = pdts[0] if pdts else idt
        specs = [(dt, xd), (vdt, (vec_len,))]
        shape_bad = vec_len != r
        dtype_bad = vdt not in INTS
    else:
        params = [i for i in range(n) if kinds[i] == "param"]
        specs = [(dt, xd)] + [(pdts[i], pdims[i]) for i in params]
        # a one-element list holding a rank-1 index vector is the former API's legacy spelling of
        # the vector form (xlasdk.ops.indexing._start_indices): valid where that vector is (r,)
        legacy = n == 1 and kinds[0] == "param" and pdims[0] == (1,)
        shape_bad = n != r or (any(pdims[i] != () for i in params) and not (legacy and r == 1))
        ptypes = {pdts[i] for i in params}
        dtype_bad = any(t not in INTS for t in ptypes) or len(ptypes) > 1
        if not shape_bad and not dtype_bad:
            it = pdts[params[0]] if params else S32
            shape_bad = any(
                kinds[i] == "int" and int(np.asarray(ints[i]).astype(it)) != ints[i] for i in range(n)
            )
    shape_bad = shape_bad or len(sizes) != r or any(not 0 <= s <= d for s, d in zip(sizes, xd, strict=False))

    def build(b: xs.XlaBuilder, p: list[xs.XlaOp]) -> xs.XlaOp:
        if form == "vector":
            return ops.DynamicSlice(p[0], p[1], sizes)
        it = iter(p[1:])
        starts = [next(it) if k == "param" else ints[i] for i, k in enumerate(kinds)]
        return ops.DynamicSlice(p[0], starts, sizes)

    def ref(a: list[Arr]) -> list[Arr]:
        if form == "vector":
            starts = [int(v) for v in a[1]]
        else:
            vals = iter(a[1:])
            starts = [int(next(vals)) if k == "param" else ints[i] for i, k in enumerate(kinds)]
        starts = [min(max(st_, 0), d - z) for st_, d, z in zip(starts, xd, sizes, strict=True)]  # clamped
        return [a[0][tuple(slice(st_, st_ + z) for st_, z in zip(starts, sizes, strict=True))]]

    return Case("DynamicSlice", specs, build, verdict(shape_bad, dtype_bad, dt, sizes),
                f"form={form}, kinds={kinds}, ints={ints}, slice_sizes={sizes}", ref)


# == Iota =======================================================================================


@st.composite
def iota_cases(draw: Any, valid: bool = False) -> Case:
    dt = draw(st.sampled_from([t for t in ALL_TYPES if t != PRED] if valid else ALL_TYPES))
    if draw(st.booleans()):
        size = draw(st.integers(0 if valid else -2, 5))
        return Case("Iota", [], lambda b, p: ops.Iota(b, dt, size), verdict(size < 0, dt == PRED, dt, [size]),
                    f"dtype={dt}, size={size}", lambda a: [np.arange(size).astype(dt)])
    dims = draw(dims_st(1 if valid else 0, 3))
    dim = draw(st.integers(0, len(dims) - 1)) if valid else draw(st.integers(-1, len(dims)))
    shape = shape_of(dt, dims)

    def ref(a: list[Arr]) -> list[Arr]:
        counts = np.arange(dims[dim]).reshape([-1 if i == dim else 1 for i in range(len(dims))])
        return [np.broadcast_to(counts, dims).astype(dt)]

    return Case("Iota", [], lambda b, p: ops.Iota(b, shape, dim),
                verdict(not 0 <= dim < len(dims), dt == PRED, dt, dims), f"shape={shape}, iota_dimension={dim}", ref)


# == ConvertElementType / BitcastConvertType ====================================================


@st.composite
def convert_cases(draw: Any, valid: bool = False) -> Case:
    src, dst = draw(st.sampled_from(ALL_TYPES)), draw(st.sampled_from(ALL_TYPES))
    dims = draw(dims_st(0, 3))
    if draw(st.booleans()):
        target: Any = dst
        bad_name = False
    else:
        target = draw(st.sampled_from([dst.name, str(dst), "foo", object]))
        bad_name = target in ("foo", object)
    if draw(st.booleans()):
        return Case("ConvertElementType", [(src, dims)], lambda b, p: ops.ConvertElementType(p[0], target),
                    verdict(False, bad_name or (src in COMPLEX and dst not in COMPLEX), dst, dims),
                    f"new_element_type={target!r}")
    sb, db = bits(src), bits(dst)
    if db > sb and db % sb == 0 and draw(st.booleans()):
        dims = dims[:-1] + (db // sb,)
    shape_bad, dtype_bad = False, bad_name or (src in COMPLEX) != (dst in COMPLEX)
    out: Dims = dims
    if not dtype_bad and sb != db:
        if any(t == PRED or t in COMPLEX or bits(t) < 8 for t in (src, dst)):
            dtype_bad = True
        elif sb > db:
            out = dims + (sb // db,)
        elif not dims or dims[-1] != db // sb:
            shape_bad = True
        else:
            out = dims[:-1]
    return Case("BitcastConvertType", [(src, dims)], lambda b, p: ops.BitcastConvertType(p[0], target),
                verdict(shape_bad, dtype_bad, dst, out), f"new_element_type={target!r}")


# == Rev, Collapse, TopK, Sort ==================================================================


@st.composite
def rev_cases(draw: Any, valid: bool = False, types: Sequence[np.dtype[Any]] = MIX) -> Case:
    xd = draw(dims_st(0, 4))
    dt = draw(st.sampled_from(types))
    dims = list(draw(st.permutations(range(len(xd)))))[: draw(st.integers(0, len(xd)))]
    mutation = pick_mutation(draw, valid, ["repeat", "range", "negative"])
    if mutation == "repeat" and dims:
        dims = dims + [dims[0]]
    elif mutation == "range":
        dims = dims + [len(xd)]
    elif mutation == "negative":
        dims = dims + [-1]
    return Case("Rev", [(dt, xd)], lambda b, p: ops.Rev(p[0], dims),
                verdict(not distinct_in(dims, len(xd)), False, dt, xd), f"dimensions={dims}",
                lambda a: [np.flip(a[0], tuple(dims)) if dims else a[0]])


@st.composite
def collapse_cases(draw: Any, valid: bool = False, types: Sequence[np.dtype[Any]] = MIX) -> Case:
    xd = draw(dims_st(0, 4))
    r = len(xd)
    dt = draw(st.sampled_from(types))
    dims: list[int] = []
    if r and draw(st.integers(0, 4)):
        k = draw(st.integers(0, r - 1))
        dims = list(range(k, draw(st.integers(k, r - 1)) + 1))
    mutation = pick_mutation(draw, valid, ["reversed", "gap", "range", "negative"])
    if mutation == "reversed" and len(dims) >= 2:
        dims = dims[::-1]
    elif mutation == "gap" and r >= 3:
        dims = [0, 2]
    elif mutation == "range":
        dims = dims + [r]
    elif mutation == "negative":
        dims = [-1] + dims
    ok = all(0 <= d < r for d in dims) and (not dims or dims == list(range(dims[0], dims[0] + len(dims))))
    out = list(xd)
    if ok and len(dims) > 1:
        out = list(xd[: dims[0]]) + [math.prod(xd[d] for d in dims)] + list(xd[dims[-1] + 1 :])
    return Case("Collapse", [(dt, xd)], lambda b, p: ops.Collapse(p[0], dims), verdict(not ok, False, dt, out),
                f"dimensions={dims}")


@st.composite
def topk_cases(draw: Any, valid: bool = False, types: Sequence[np.dtype[Any]] = ALL_TYPES) -> Case:
    xd = draw(dims_st(1 if valid else 0, 3))
    pool = [t for t in types if t != PRED and t not in COMPLEX]
    dt = draw(st.sampled_from(pool if valid else types))
    n = xd[-1] if xd else 0
    k = draw(st.integers(0, n) if valid else st.integers(-1, n + 1))
    largest = draw(st.booleans())
    shape_bad = not xd or not 0 <= k <= n
    dtype_bad = dt == PRED or dt in COMPLEX
    out = list(xd[:-1]) + [k]
    want = tuple_verdict(shape_bad, dtype_bad, [] if shape_bad else [shape_of(dt, out), shape_of(S32, out)])

    def ref(a: list[Arr]) -> list[Arr | None]:
        keys = ordered(a[0])
        order = np.argsort(-keys if largest else keys, axis=-1, kind="stable")[..., :k]  # ties: lower index first
        return [np.take_along_axis(a[0], order, -1), order.astype(np.int32)]

    return Case("TopK", [(dt, xd)], lambda b, p: ops.TopK(p[0], k, largest), want, f"k={k}, largest={largest}", ref)


@st.composite
def sort_cases(draw: Any, valid: bool = False, types: Sequence[np.dtype[Any]] = MIX) -> Case:
    xd = draw(dims_st(1 if valid else 0, 3))
    r = len(xd)
    n = draw(st.integers(1, 2))
    dts = [draw(st.sampled_from(types)) for _ in range(n)]
    shapes = [xd] * n
    dim = draw(st.integers(-r, r - 1) if valid and r else st.integers(-r - 1, r))
    stable = draw(st.booleans())
    if not valid and n == 2 and draw(st.integers(0, 5)) == 0:
        shapes = [xd, xd + (1,)]
    shape_bad = r == 0 or not -r <= dim < r or shapes[-1] != xd
    dtype_bad = any(t in (S2, U2) for t in dts)  # XLA:CPU sorts 2-bit types wrongly: rejected
    want = tuple_verdict(shape_bad, dtype_bad, [shape_of(t, xd) for t in dts])

    def ref(a: list[Arr]) -> list[Arr | None]:
        keys = ordered(a[0])
        order = np.argsort(keys, axis=dim, kind="stable")
        # equal keys may come in any order unless stable: then only the keys are compared
        return [np.take_along_axis(a[0], order, dim)] + [
            np.take_along_axis(x, order, dim) if stable else None for x in a[1:]
        ]

    return Case("Sort", list(zip(dts, shapes, strict=True)),
                lambda b, p: ops.Sort(b, p if n > 1 else p[0], dim, stable), want, f"dimension={dim}, stable={stable}",
                ref)


# == the tests ==================================================================================

Strategy = Callable[..., st.SearchStrategy[Case]]

#: The shape rules of the op table (``OPS``: every row binds its rule), each once.
TABLE_RULES: list[Callable[..., Any]] = list(dict.fromkeys(d.rule for d in OPS.values() if d.rule is not None))

#: The strategies that fuzz each rule of the table (through the public ops whose rows bind it).
FUZZED: dict[Callable[..., Any], tuple[Strategy, ...]] = {
    elementwise.binary_op_shape: (binary_cases,),
    elementwise.compare_result: (binary_cases,),
    shaping.broadcast_in_dim_shape: (broadcast_in_dim_cases,),
    shaping.reshape_shape: (reshape_cases, collapse_cases),
    shaping.transpose_shape: (transpose_cases,),
    shaping.slice_shape: (slice_cases,),
    shaping.pad_shape: (pad_cases,),
    shaping.concat_shape: (concat_cases,),
    shaping.rev_shape: (rev_cases,),
    linalg.dot_general_shape: (dot_general_cases,),
    conv.convolution_shape: (conv_cases,),
    reduce.reduce_shape: (reduce_cases,),
    window.reduce_window_op_shape: (reduce_window_cases,),
    indexing.gather_shape: (gather_cases,),
    indexing.scatter_shape: (scatter_cases,),
    indexing.dynamic_slice_shape: (dynamic_slice_cases,),
    sources.iota_shape: (iota_cases,),
    convert.convert_shape: (convert_cases,),
    convert.bitcast_shape: (convert_cases,),
    sort.top_k_shape: (topk_cases,),
    sort.sort_shape: (sort_cases,),
}

_OPS_TESTS = "checked case by case (values and every error) in tests/ops/"
#: The rules of the table not fuzzed here, and why.
NOT_FUZZED: dict[Callable[..., Any], str] = {
    elementwise.unary_shape: "an element-type check per op: tests/ops/test_elementwise.py runs every unary op on "
    "every element type",
    elementwise.select_shape: _OPS_TESTS + "test_elementwise.py",
    elementwise.clamp_shape: _OPS_TESTS + "test_elementwise.py",
    fma.fma_shape: _OPS_TESTS + "test_fma.py",
    collectives.all_gather_shape: _OPS_TESTS + "test_collectives.py (they need several devices to run)",
    collectives.reduce_scatter_shape: _OPS_TESTS + "test_collectives.py (they need several devices to run)",
    collectives.all_to_all_shape: _OPS_TESTS + "test_collectives.py (they need several devices to run)",
    collectives.all_reduce_shape: _OPS_TESTS + "test_collectives.py (they need several devices to run)",
    collectives.collective_permute_shape: _OPS_TESTS + "test_collectives.py (they need several devices to run)",
    collectives.id_shape: "a constant shape (u32[])",
    control.while_shape: _OPS_TESTS + "test_control.py (the shapes come from sub-computations)",
    control.conditional_shape: _OPS_TESTS + "test_control.py (the shapes come from sub-computations)",
    convert.reduce_precision_shape: _OPS_TESTS + "test_convert.py",
    linalg.cholesky_shape: _OPS_TESTS + "test_linalg.py",
    linalg.triangular_solve_shape: _OPS_TESTS + "test_linalg.py",
    custom_call.custom_call_target_check: _OPS_TESTS + "test_sources.py and tests/test_custom_call_targets.py "
    "(the shapes are the caller's)",
    shaping.get_dimension_size_shape: _OPS_TESTS + "test_dynamic.py",
    shaping.set_dimension_size_shape: _OPS_TESTS + "test_dynamic.py",
    sources.constant_shape: "the shape of the numpy value (tests/ops/test_sources.py)",
    reduce.map_shape: _OPS_TESTS + "test_map.py",
    reduce.batch_norm_training_shape: _OPS_TESTS + "test_reduce.py",
    reduce.batch_norm_inference_shape: _OPS_TESTS + "test_reduce.py",
    reduce.batch_norm_grad_shape: _OPS_TESTS + "test_reduce.py",
    fft.fft_shape: _OPS_TESTS + "test_fft.py",
    side_effects.token_shape: "a constant shape (token[])",
    side_effects.optimization_barrier_shape: _OPS_TESTS + "test_side_effects.py",
    side_effects.infeed_shape: _OPS_TESTS + "test_side_effects.py",
    side_effects.outfeed_check: _OPS_TESTS + "test_side_effects.py",
    indexing.dynamic_update_slice_check: _OPS_TESTS + "test_indexing.py",
    rnd.rng_bit_generator_shape: _OPS_TESTS + "test_random.py",
    rnd.rng_shape: _OPS_TESTS + "test_random.py",
}

#: Every strategy, once, in table order (``test_compile_accepted_ops`` draws from each).
FAMILIES: list[Strategy] = list(dict.fromkeys(s for r in TABLE_RULES for s in FUZZED.get(r, ())))


def test_every_rule_of_the_table_is_fuzzed_or_says_why_not() -> None:
    """The rules come from the op table: a new row's rule is fuzzed here or listed with a reason."""
    assert len(TABLE_RULES) > 40
    assert not set(FUZZED) & set(NOT_FUZZED)
    missing = [f"{r.__module__}.{r.__name__}" for r in TABLE_RULES if r not in FUZZED and r not in NOT_FUZZED]
    assert missing == []
    stale = [f"{r.__module__}.{r.__name__}" for r in [*FUZZED, *NOT_FUZZED] if r not in TABLE_RULES]
    assert stale == []  # every entry is the rule of some row
    assert all(reason.strip() for reason in NOT_FUZZED.values())


@fuzz(300)
@given(data=st.data())
def test_fuzz_binary_rows_rule_from_the_table(data: st.DataObject) -> None:
    """Each binary row's rule, as the table binds it (``BINARY[name].opdef.rule``), agrees with the
    public op: the same result shape, or an error of the same type."""
    name = data.draw(st.sampled_from(sorted(elementwise.BINARY)))
    rule = elementwise.BINARY[name].opdef.rule
    assert rule is OPS[elementwise.BINARY[name].opdef.name].rule is elementwise.binary_op_shape
    ldt = data.draw(st.sampled_from(BINARY_TYPES))
    rdt = ldt if data.draw(st.booleans()) else data.draw(st.sampled_from(BINARY_TYPES))
    ld = data.draw(dims_st(0, 3))
    rd = data.draw(st.sampled_from([ld, (), ld[1:], tuple(1 for _ in ld)])) if data.draw(st.booleans()) else \
        data.draw(dims_st(0, 3))
    bd: tuple[int, ...] = ()
    if len(ld) != len(rd) and min(len(ld), len(rd)) > 0:
        bd = tuple(data.draw(st.lists(st.integers(0, 3), min_size=min(len(ld), len(rd)),
                                      max_size=min(len(ld), len(rd)))))
    lhs, rhs = shape_of(ldt, ld), shape_of(rdt, rd)
    b = xs.XlaBuilder("rule")
    x, y = ops.Parameter(b, 0, lhs), ops.Parameter(b, 1, rhs)
    try:
        built: xs.Shape | Exception = getattr(ops, name)(x, y, bd or None).shape
    except (xs.ShapeError, xs.DTypeError) as e:
        built = e
    try:
        ruled: xs.Shape | Exception = rule(name, lhs, rhs, bd)
    except (xs.ShapeError, xs.DTypeError) as e:
        ruled = e
    if isinstance(built, Exception) or isinstance(ruled, Exception):
        assert type(built) is type(ruled), (name, lhs, rhs, bd, built, ruled)
    else:
        assert built == ruled, (name, lhs, rhs, bd, built, ruled)


@fuzz(600)
@given(binary_cases())
def test_fuzz_binary_broadcasting(case: Case) -> None:
    fuzz_one(case)


@fuzz(200)
@given(broadcast_in_dim_cases())
def test_fuzz_broadcast_in_dim(case: Case) -> None:
    fuzz_one(case)


@fuzz(200)
@given(reshape_cases())
def test_fuzz_reshape(case: Case) -> None:
    fuzz_one(case)


@fuzz(100)
@given(transpose_cases())
def test_fuzz_transpose(case: Case) -> None:
    fuzz_one(case)


@fuzz(250)
@given(slice_cases())
def test_fuzz_slice(case: Case) -> None:
    fuzz_one(case)


@fuzz(250)
@given(pad_cases())
def test_fuzz_pad(case: Case) -> None:
    fuzz_one(case)


@fuzz(150)
@given(concat_cases())
def test_fuzz_concat_in_dim(case: Case) -> None:
    fuzz_one(case)


@fuzz(400)
@given(dot_general_cases())
def test_fuzz_dot_general(case: Case) -> None:
    fuzz_one(case)


@fuzz(600)
@given(conv_cases())
def test_fuzz_conv_general_dilated(case: Case) -> None:
    fuzz_one(case)


@fuzz(300)
@given(reduce_cases())
def test_fuzz_reduce(case: Case) -> None:
    fuzz_one(case)


@fuzz(500)
@given(reduce_window_cases())
def test_fuzz_reduce_window(case: Case) -> None:
    fuzz_one(case)


@fuzz(600)
@given(gather_cases())
def test_fuzz_gather(case: Case) -> None:
    fuzz_one(case)


@fuzz(600)
@given(scatter_cases())
def test_fuzz_scatter(case: Case) -> None:
    fuzz_one(case)


@fuzz(250)
@given(dynamic_slice_cases())
def test_fuzz_dynamic_slice(case: Case) -> None:
    fuzz_one(case)


@fuzz(100)
@given(iota_cases())
def test_fuzz_iota(case: Case) -> None:
    fuzz_one(case)


@fuzz(400)
@given(convert_cases())
def test_fuzz_convert_and_bitcast(case: Case) -> None:
    fuzz_one(case)


@fuzz(100)
@given(rev_cases())
def test_fuzz_rev(case: Case) -> None:
    fuzz_one(case)


@fuzz(100)
@given(collapse_cases())
def test_fuzz_collapse(case: Case) -> None:
    fuzz_one(case)


@fuzz(200)
@given(topk_cases())
def test_fuzz_topk(case: Case) -> None:
    fuzz_one(case)


@fuzz(150)
@given(sort_cases())
def test_fuzz_sort_dimension(case: Case) -> None:
    fuzz_one(case)


# -- compile and run: XLA's HLO verifier and the CPU backend see every accepted op -----------------


@fuzz(12)
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_compile_accepted_ops(data: st.DataObject, seed: int) -> None:
    """Several draws of every family (valid ones mostly) in one computation, compiled and run."""
    cases = []
    for strategy in FAMILIES:
        cases += data.draw(st.lists(strategy(valid=data.draw(st.booleans())), min_size=1, max_size=3))
    fuzz_many(cases, seed, values=False)


@fuzz(25)
@given(
    cases=st.lists(
        st.one_of(
            convert_cases(valid=True), iota_cases(valid=True), topk_cases(valid=True),
            sort_cases(valid=True, types=ALL_TYPES), binary_cases(valid=True, types=ALL_TYPES),
            dot_general_cases(valid=True, types=ALL_TYPES),
            conv_cases(valid=True, types=[t for t in ALL_TYPES if t != PRED]),
        ),
        min_size=4, max_size=10,
    ),
    seed=st.integers(0, 2**16),
)
def test_compile_element_types(cases: list[Case], seed: int) -> None:
    """Conversions, iotas, sorts, top-k, binary ops, dots and convolutions of every element type,
    each op compiled on its own (XLA:CPU emits a lone op differently from one in a larger graph)."""
    for i, case in enumerate(cases):
        fuzz_many([case], seed + i, values=False)


# -- values against numpy, valid draws only ------------------------------------------------------

SHAPING_VALUE_TYPES = [F32, S32, U8, PRED, F64, C64]


@fuzz(25)
@given(
    cases=st.lists(
        st.one_of(*(f(valid=True, types=SHAPING_VALUE_TYPES) for f in (
            slice_cases, pad_cases, transpose_cases, reshape_cases, concat_cases,
        ))),
        min_size=2, max_size=8,
    ),
    seed=st.integers(0, 2**16),
)
def test_values_slice_pad_transpose_reshape(cases: list[Case], seed: int) -> None:
    fuzz_many(cases, seed, values=True)


@fuzz(25)
@given(cases=st.lists(dot_general_cases(valid=True, types=[F32, S32, F64]), min_size=1, max_size=4),
       seed=st.integers(0, 2**16))
def test_values_dot_general_vs_einsum(cases: list[Case], seed: int) -> None:
    fuzz_many(cases, seed, values=True)


@fuzz(25)
@given(cases=st.lists(conv_cases(valid=True, types=[F32, S32]), min_size=1, max_size=3), seed=st.integers(0, 2**16))
def test_values_conv_vs_loop_reference(cases: list[Case], seed: int) -> None:
    fuzz_many(cases, seed, values=True)


@fuzz(25)
@given(cases=st.lists(reduce_window_cases(valid=True, types=[F32, S32]), min_size=1, max_size=4),
       seed=st.integers(0, 2**16))
def test_values_reduce_window_vs_loop_reference(cases: list[Case], seed: int) -> None:
    fuzz_many(cases, seed, values=True)


@fuzz(25)
@given(
    cases=st.lists(
        st.one_of(
            *(f(valid=True, types=NARROW) for f in (
                slice_cases, pad_cases, transpose_cases, reshape_cases, concat_cases, rev_cases,
                broadcast_in_dim_cases, sort_cases, topk_cases,
            )),
            iota_cases(valid=True), dynamic_slice_cases(valid=True),
        ),
        min_size=4, max_size=10,
    ),
    seed=st.integers(0, 2**16),
)
def test_values_data_movement_of_narrow_types(cases: list[Case], seed: int) -> None:
    """Slicing, padding, concatenation, sorting... move values unchanged in the narrow types (2- and
    4-bit integers, fp8, fp4), as numpy moves them. Each op is its own computation (XLA:CPU
    emits a lone op differently from one inside a larger graph)."""
    for i, case in enumerate(cases):
        fuzz_many([case], seed + i, values=True)
