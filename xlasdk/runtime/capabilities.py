"""What each platform's compiler takes: the capability table, checked before XLA sees a program.

XLA's TPU compiler does not take every program XLA:CPU takes. Some it refuses with its own words
("While rewriting computation to not contain X{64|128} element types ..."), some it aborts on
(SIGABRT in its precision rewriter, caught by xlasdk's worker). :func:`capabilities` gives a
device's table; ``xs.compile`` checks the program against it when it compiles for a TPU (a chip,
or the compile-only devices of ``xs.topology``), before XLA sees the program, and raises
:class:`~xlasdk.errors.UnsupportedOnDeviceError` naming the instruction, its source line, what XLA
says and what to do instead::

    >>> caps = xs.capabilities(xs.topology("v5e:1x1").devices[0])
    >>> caps.refusals(comp)              # [] when the table refuses nothing of comp
    >>> caps.check(comp)                 # raises UnsupportedOnDeviceError where it does
    >>> caps.custom_call_available("lapack_sgetrf_ffi")   # False: LAPACK is jaxlib's CPU kernels
    >>> ok = caps.supports(comp)         # a Support, true when the table refuses nothing (no compile)
    >>> ok.reason                        # else why: the first refusal's words

:data:`BEHAVIOURS` holds the other kind of row: values a platform's compiled code defines otherwise than
XLA:CPU (XLA:TPU's emulated f64, its float-to-int of NaN...), which the op tests skip by on that platform.

The table holds only what was measured (``xs.topology("v5e:1x1")``, libtpu 0.0.42.1 and 0.0.52)
or documented, as typed rows (:class:`Unsupported`): the ops, element types and attributes XLA:TPU
fails on. A row names an op and a condition exact enough that it never refuses what the device
runs: XLA:TPU compiles f64, s64 and c64 arithmetic through its X64 rewriter (an f64 ``add``, a
``convert`` from f64), so "the TPU has no f64" is not a rule; an f64 ``rng`` or ``fft`` is. Every
row is backed by a test that compiles its probe program for ``v5e:1x1`` without the table and sees
XLA fail (tests/test_capabilities.py; skipped, naming the release, where a newer libtpu no longer
fails), and tests/test_tpu_compile_only.py compiles every op test's program for ``v5e:1x1`` and
fails on any that XLA refuses and the table does not name.

The table is about the compiler, not values: a program that compiles and computes other values
than the CPU (the TPU's f32 dot at DEFAULT precision, its transcendental functions) is the error
model's business (``xs.compare``).

The CPU's table refuses nothing: every op xlasdk builds compiles for XLA:CPU. The TPU rows were
measured with libtpu 0.0.52 on ``v4``, ``v5e``, ``v5p`` and ``v6e`` topologies, which fail alike
but for 2-bit integers (none on v4), and with libtpu 0.0.42.1 on ``v5e``; a row holds for every
generation unless it names some (a generation xlasdk does not know gets every row: fail closed),
and for every libtpu release before its ``fixed_in`` (an unknown release gets every row).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from ..builder import XlaOp
from ..errors import GraphImportError, UnsupportedOnDeviceError, XlaSdkError
from ..program.called_ops import every_called_op as every_called_op
from ..program.computation import XlaComputation
from ..shape import Shape
from ..types import PrimitiveType
from .device import Device

__all__ = ["Behaviour", "BEHAVIOURS", "Capabilities", "Refusal", "Support", "Unsupported", "Platform", "capabilities",
           "check_capabilities", "TABLE"]

P = PrimitiveType


class Platform(enum.Enum):
    """The compilers the table knows."""

    CPU = "cpu"
    TPU = "tpu"
    OTHER = "other"  # a platform the table has no rows for (cuda, rocm, a plugin)


# -- what an op holds ---------------------------------------------------------------------------
def _leaves(s: Shape) -> tuple[Shape, ...]:
    return s.tuple_shapes() if s.is_tuple() else (s,)


def _types(op: XlaOp) -> set[PrimitiveType]:
    """The element types of ``op``'s results and operands (tuples flattened; tokens left out)."""
    out: set[PrimitiveType] = set()
    for s in (op.shape, *(x.shape for x in op.operands)):
        for leaf in _leaves(s):
            if leaf.is_array():
                out.add(leaf.element_type())
    return out


def _target(op: XlaOp) -> str:
    t = op.attr("call_target_name", "")
    return t.decode("utf-8", "replace") if isinstance(t, (bytes, bytearray)) else str(t)


def _accuracy_mode(op: XlaOp) -> str | None:
    """The mode of ``op``'s ``result_accuracy`` (``"HIGHEST"``, ``"TOLERANCE"``), None when it has
    none or DEFAULT; a spelling this reader does not know counts as set (fail closed)."""
    from ..attrs import ResultAccuracy

    attr = op.attr("result_accuracy")  # a built op's ResultAccuracy, a loaded one's spelling (undeclared)
    if attr is None:
        return None
    if isinstance(attr, ResultAccuracy):
        mode = attr.mode.name
    else:
        text = str(attr)
        mode = next((m.name for m in ResultAccuracy.Mode if f"result_accuracy_mode<{m.name}>" in text), "UNKNOWN")
    return None if mode == "DEFAULT" else mode


# -- the rows -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Unsupported:
    """One thing a platform's compiler fails on: a row of the capability table.

    Attributes
    ----------
    name: the row's short name (``"f64-rng"``), as tests and messages cite it.
    platform: the :class:`Platform` whose compiler fails.
    what: what is not supported, as the message starts (``"f64 rng"``).
    opcodes: the StableHLO/CHLO ops it concerns (``stablehlo.rng``); empty: any op.
    element_types: the row holds where the op has one of these element types among its results and
        operands; empty: any.
    when: a further condition on the op (an attribute, a target, a shape), None for none; ``when_text``
        says it in words.
    xla_says: what XLA says (its message, or the check it aborts on).
    instead: what to do instead.
    measured: the releases seen failing (``"libtpu 0.0.42.1"``).
    generations: the TPU generations it holds for, None for every one (the rows of libtpu 0.0.52
        were measured on v4, v5e, v5p and v6e alike; those of 0.0.42.1 on v5e).
    fixed_in: the first libtpu release seen compiling it (``(0, 0, 52)``), None while every
        measured release fails.
    """

    name: str
    platform: Platform
    what: str
    opcodes: frozenset[str]
    element_types: frozenset[PrimitiveType]
    xla_says: str
    instead: str
    measured: tuple[str, ...]
    when: Callable[[XlaOp], bool] | None = None
    when_text: str = ""
    generations: tuple[str, ...] | None = None
    fixed_in: tuple[int, ...] | None = None

    def applies_to(self, release: tuple[int, ...] | None, generation: str | None = None) -> bool:
        """Whether the row holds for the compiler release ``release`` (libtpu's version as numbers;
        None when unknown: every row holds, fail closed) on TPU ``generation`` (None when unknown:
        every row holds): a row with ``fixed_in`` (the first release seen compiling it) holds for
        the releases before it, one with ``generations`` only on those."""
        if self.generations is not None and generation is not None and generation not in self.generations:
            return False
        return self.fixed_in is None or release is None or release < self.fixed_in

    def matches(self, op: XlaOp) -> bool:
        """Whether ``op`` is what this row refuses."""
        if self.opcodes and op.opcode not in self.opcodes:
            return False
        if self.element_types and not (self.element_types & _types(op)):
            return False
        return self.when is None or self.when(op)


@dataclass(frozen=True)
class Refusal:
    """A row of the table that refuses an instruction of a program.

    Attributes: ``row`` (the :class:`Unsupported` row), ``instruction`` (its name, opcode and shape, as
    ``rng.3 (stablehlo.rng -> f64[64,1024])``), ``source`` (``file.py:LINE`` of the op, ``""`` when unknown),
    ``device`` (``"TPU v5e"``), ``opcode`` (``stablehlo.rng``; ``parameter`` for a parameter)."""

    row: Unsupported
    instruction: str
    source: str
    device: str
    opcode: str = ""

    def __str__(self) -> str:
        at = f" at {self.source}" if self.source else ""
        return (f"{self.row.what} is not supported on {self.device} (XLA:{self.row.platform.name} fails on "
                f"{self.instruction}{at}; what it said of such a program when measured: {self.row.xla_says}): "
                f"{self.row.instead}")


@dataclass(frozen=True)
class Support:
    """The answer of :meth:`Capabilities.supports`: whether the device's
    compiler takes ``what``, as its capability table knows (nothing is compiled). True in a boolean
    context when it does.

    Attributes
    ----------
    supported: whether the table refuses nothing of ``what``.
    device: how messages name the device (``"TPU v5e"``, ``"cpu"``).
    what: what was asked about (``"computation 'f'"``, ``"op stablehlo.rng -> f64[4]"``, ``"element type F64"``).
    refusals: for a computation or an op, every :class:`Refusal` (empty when supported).
    reasons: why not, one line each (a refusal's words, or what the platform's lowering says); empty when
        supported.
    limits: for an element type the device supports, the rows that refuse some ops or shapes of it
        (``f64 rng``, ``f64/c128 FFT``): what to expect of it there.
    """

    supported: bool
    device: str
    what: str
    refusals: tuple[Refusal, ...] = ()
    reasons: tuple[str, ...] = ()
    limits: tuple[Unsupported, ...] = ()

    def __bool__(self) -> bool:
        return self.supported

    @property
    def reason(self) -> str:
        """The first reason (``""`` when supported)."""
        return self.reasons[0] if self.reasons else ""

    def __str__(self) -> str:
        if not self.supported:
            more = f" (and {len(self.reasons) - 1} more)" if len(self.reasons) > 1 else ""
            return f"{self.what} is not supported on {self.device}: {self.reason}{more}"
        if self.limits:
            return (f"{self.what} is supported on {self.device}, except: "
                    + "; ".join(f"{r.what} ({r.name})" for r in self.limits))
        return f"{self.what} is supported on {self.device}"


_X64_UNIMPLEMENTED: Final = ("While rewriting computation to not contain X{64|128} element types, XLA encountered "
                             "an HLO for which this rewriting is not implemented")
_MEASURED: Final = ("libtpu 0.0.42.1", "libtpu 0.0.52")
_TWO_BIT: Final = frozenset({P.S2, P.U2})
_X64_INTS: Final = frozenset({P.S64, P.U64})


def _two_bit_tile_too_small(op: XlaOp) -> bool:
    """A 2-bit array among ``op``'s values whose rank is below 2, or whose two minor dimensions are
    below 16 (XLA:TPU tiles INT2 16 sublanes deep: s2[16,16] and s2[17,128] compile, s2[16,8],
    s2[8,128], s2[128] do not)."""
    for s in (op.shape, *(x.shape for x in op.operands)):
        for leaf in _leaves(s):
            if leaf.is_array() and leaf.element_type() in _TWO_BIT:
                d = leaf.dimensions()
                if len(d) < 2 or d[-2] < 16 or d[-1] < 16:
                    return True
    return False


def _lapack_call(op: XlaOp) -> bool:
    from ..ops.lapack_contracts import is_lapack_target

    return is_lapack_target(_target(op))


def _reducer_not_add(op: XlaOp) -> bool:
    """An all-reduce whose reducer's result is not one ``add`` of its two parameters."""
    from ..ops.elementwise import BINARY

    add = BINARY["Add"].opdef.name
    for r in op.regions:
        if len(r.results) != 1 or r.results[0].opcode != add:
            return True
    return not op.regions


#: c128 ops XLA:TPU of libtpu 0.0.42.1 aborts on (0.0.52 compiles each of them)
_C128_ABORTS: Final = ("Abs", "Exp2", "Expm1", "Rsqrt", "Tanh", "Logistic", "Sin", "Cos", "Tan", "Sign", "Div",
                       "Pow", "Atan2")


def _changes_c128(op: XlaOp) -> bool:
    """A convert between c128 and another type."""
    kinds = {leaf.element_type() for x in (op, *op.operands) for leaf in _leaves(x.shape) if leaf.is_array()}
    return P.C128 in kinds and len(kinds) > 1


def _default_rng_odd_state(op: XlaOp) -> bool:
    from ..attrs import RandomAlgorithm

    algorithm = op.attr("rng_algorithm")
    state = op.operands[0].shape if op.operands else None
    default = not isinstance(algorithm, RandomAlgorithm) or algorithm is RandomAlgorithm.DEFAULT  # unread: refused
    return default and (state is None or not state.is_array() or state.dimensions() != (2,))


def _rank3(op: XlaOp) -> bool:
    return op.shape.is_array() and op.shape.rank() >= 3


def _qr_call(op: XlaOp) -> bool:
    return _target(op) == "Qr"


def _topk_rank1(op: XlaOp) -> bool:
    return _target(op) == "TopK" and any(x.shape.is_array() and x.shape.rank() == 1 for x in op.operands)


def _tolerance_accuracy(op: XlaOp) -> bool:
    return _accuracy_mode(op) not in (None, "HIGHEST")


def _any_accuracy(op: XlaOp) -> bool:
    return _accuracy_mode(op) is not None


def _names(*ops: str) -> frozenset[str]:
    """The StableHLO names of the elementwise ops ``ops`` (their rows' names: no spelling typed here)."""
    from ..ops.elementwise import BINARY, UNARY

    return frozenset((UNARY.get(o) or BINARY[o]).opdef.name for o in ops)


def _tpu_rows() -> tuple[Unsupported, ...]:
    from ..ops.collectives import ALL_REDUCE, REDUCE_SCATTER
    from ..ops.convert import CONVERT, REDUCE_PRECISION
    from ..ops.custom_call import CUSTOM_CALL
    from ..ops.fft import FFT
    from ..ops.fma import FMA
    from ..ops.linalg import CHOLESKY, DOT_GENERAL, TRIANGULAR_SOLVE
    from ..ops.random import RNG, RNG_BIT_GENERATOR
    from ..ops.shaping import REVERSE

    tpu = Platform.TPU
    dots = frozenset({DOT_GENERAL.name, "stablehlo.dot"})  # stablehlo.dot: a loaded HLO dot (not built)
    return (
        Unsupported(
            "tpu-int2-tile", tpu, "a 2-bit integer array (s2/u2) of rank below 2 or with a minor dimension below 16",
            frozenset(), _TWO_BIT,
            "INT2 is not supported for rank 1 / for second minor size 2, expected to be greater than or equal to "
            "sublane count * multichunk factor (16); or it aborts (pipeline_emitter.cc: Check failed: "
            "operand.span_size.RawSize() > 0; shape.h: Check failed: buffer != nullptr)",
            "keep 2-bit arrays at least [16, 16], convert them to s8/u8, or run on cpu:0", _MEASURED,
            when=_two_bit_tile_too_small, when_text="rank < 2, or either of the two minor dimensions < 16"),
        Unsupported(
            "tpu-int2-v4", tpu, "a 2-bit integer array (s2/u2) on TPU v4", frozenset(), _TWO_BIT,
            "LLO_CHECK failure (llo_region_builder.cc) target().SupportsVectorUnpackOps(VpackFormat::kCompressedB2)",
            "convert 2-bit arrays to s4/s8, or run on cpu:0", _MEASURED, generations=("v4",)),
        Unsupported(
            "tpu-lapack", tpu, "a LAPACK custom call (jaxlib's CPU kernels lapack_*_ffi)",
            frozenset({CUSTOM_CALL.name}), frozenset(),
            "Custom emitter for lapack_sgetrf_ffi not found; for 64-bit and complex types: " + _X64_UNIMPLEMENTED,
            "build the decomposition for the TPU (XLA's expanders) or run on cpu:0", _MEASURED,
            when=_lapack_call, when_text="call_target_name is a LAPACK kernel"),
        Unsupported(
            "tpu-fft-x64", tpu, "an f64/c128 FFT", frozenset({FFT.name}), frozenset({P.F64, P.C128}),
            "Unexpected operand type for FFT: c128[2,8]", "convert to f32/c64 or run on cpu:0", _MEASURED),
        Unsupported(
            "tpu-rng-f64", tpu, "an f64 rng", frozenset({RNG.name}), frozenset({P.F64}),
            _X64_UNIMPLEMENTED + ": rng f64[64,1024]", "draw f32 values and convert, or run on cpu:0", _MEASURED),
        Unsupported(
            "tpu-dot-s64", tpu, "a 64-bit integer dot", dots, _X64_INTS,
            _X64_UNIMPLEMENTED + ": dot s64[]", "convert to s32 (or f64) or run on cpu:0", _MEASURED),
        Unsupported(
            "tpu-all-reduce-x64-not-sum", tpu, "a 64-bit all-reduce other than a sum", frozenset({ALL_REDUCE.name}),
            frozenset({P.F64, P.S64, P.U64}),
            "Supported lowering only of Sum all reduce", "reduce in 32 bits, or run on cpu:0", _MEASURED,
            when=_reducer_not_add, when_text="the reducer is not one add"),
        Unsupported(
            "tpu-reduce-scatter-x64", tpu, "an f64/c64/c128 reduce-scatter", frozenset({REDUCE_SCATTER.name}),
            frozenset({P.F64, P.C64, P.C128}),
            "Supported lowering only of Sum reduce-scatter (f64, even of an add); c64/c128: " + _X64_UNIMPLEMENTED,
            "reduce-scatter in f32 (real and imaginary parts apart), or run on cpu:0", _MEASURED),
        Unsupported(
            "tpu-topk-rank1", tpu, "a TopK custom call of a rank-1 operand", frozenset({CUSTOM_CALL.name}),
            frozenset(), "SIGILL (XLA:TPU dies of an illegal instruction compiling it)",
            "reshape the operand to [1, N] and back, or run on cpu:0", _MEASURED,
            when=_topk_rank1, when_text="call_target_name TopK, operand of rank 1"),
        Unsupported(
            "tpu-f8-erf", tpu, "an fp8 erf", _names("Erf"), frozenset({P.F8E4M3FN, P.F8E5M2}),
            "CHLO => [StableHLO+Shape] => StableHLO failed: failed to legalize operation 'chlo.erf' that was "
            "explicitly marked illegal", "compute erf in f32 or bf16 and convert, or run on cpu:0", _MEASURED),
        Unsupported(
            "tpu-reduce-precision-f64", tpu, "an f64 reduce-precision", frozenset({REDUCE_PRECISION.name}),
            frozenset({P.F64}), _X64_UNIMPLEMENTED + ": reduce-precision f64[6005]",
            "reduce the precision of an f32 value, or run on cpu:0", _MEASURED),
        Unsupported(
            "tpu-fma-f64", tpu, "an f64 fma", frozenset({FMA.name}), frozenset({P.F64}),
            _X64_UNIMPLEMENTED + ": fma f64[8] (what JAX 0.12's erf_inv, so an f64 jax.random.normal, holds)",
            "compute a * b + c unfused, or in f32, or run on cpu:0", ("libtpu 0.0.52",)),
        Unsupported(
            "tpu-rng-bit-generator-default-state", tpu, "rng-bit-generator DEFAULT with a state other than u64[2]",
            frozenset({RNG_BIT_GENERATOR.name}), frozenset(),
            "RET_CHECK failure (hlo_computation.cc) ShapeUtil::Compatible(old_instruction->shape(), "
            "new_instruction->shape()) get-tuple-element (u32[3]) vs concatenate (u32[2])",
            "give the DEFAULT algorithm a u64[2] state, or name THREE_FRY / PHILOX, or run on cpu:0", _MEASURED,
            when=_default_rng_odd_state, when_text="algorithm DEFAULT and a state that is not u64[2]"),
        Unsupported(
            "tpu-convert-c128", tpu, "a convert to or from c128", frozenset({CONVERT.name}), frozenset({P.C128}),
            "SIGABRT: xprecision_rewriter.cc:2101] Unsupported CVT X{64|128} expansion from f32[16] to c128[16] "
            "(and from c128[16] to f32[16], from pred, s32, f64, c64...)",
            "compute in c64, or run on cpu:0", ("libtpu 0.0.42.1",),
            when=_changes_c128, when_text="one side is c128, the other is not", fixed_in=(0, 0, 52)),
        Unsupported(
            "tpu-c128-math", tpu, "c128 " + "/".join(_C128_ABORTS), _names(*_C128_ABORTS), frozenset({P.C128}),
            "SIGABRT: xprecision_rewriter.cc:3271] Check failed: operand->shape().IsTuple() (sign: its RET_CHECK "
            "operand->shape().IsTuple() && TupleElementCount == 2)",
            "compute in c64, or run on cpu:0", ("libtpu 0.0.42.1",), fixed_in=(0, 0, 52)),
        Unsupported(
            "tpu-c128-reverse-rank3", tpu, "a c128 reverse of rank 3 or more", frozenset({REVERSE.name}),
            frozenset({P.C128}),
            "RET_CHECK failure (xprecision_emitters.cc:78) Layout::Equal().IgnoreMemorySpace()(operand_shape.layout(), "
            "hlo_instruction_->shape().layout()) f64[2,3,4] vs c128[2,3,4]",
            "reverse a c64 array, or run on cpu:0", ("libtpu 0.0.42.1",),
            when=_rank3, when_text="rank >= 3", fixed_in=(0, 0, 52)),
        Unsupported(
            "tpu-c128-qr", tpu, "a c128 Qr custom call (XLA's QR expander)", frozenset({CUSTOM_CALL.name}),
            frozenset({P.C128}),
            "SIGABRT: xprecision_rewriter.cc:2101] Unsupported CVT X{64|128} expansion from pred[3,1] to c128[3,1]",
            "decompose a c64 matrix, or run on cpu:0", ("libtpu 0.0.42.1",),
            when=_qr_call, when_text="call_target_name Qr", fixed_in=(0, 0, 52)),
        Unsupported(
            "tpu-c128-cholesky", tpu, "a c128 cholesky / triangular-solve",
            frozenset({CHOLESKY.name, TRIANGULAR_SOLVE.name}), frozenset({P.C128}),
            "SIGABRT: xprecision_rewriter.cc:3271] Check failed: operand->shape().IsTuple() (triangular-solve: "
            "xprecision_rewriter.cc:2101] Unsupported CVT X{64|128} expansion from pred[4,4] to c128[4,4])",
            "factor a c64 matrix, or run on cpu:0", ("libtpu 0.0.42.1",), fixed_in=(0, 0, 52)),
        Unsupported(
            "tpu-f64-nextafter", tpu, "an f64 nextafter", _names("NextAfter"), frozenset({P.F64}),
            "Binary op and with different element types: s32[16] and u32[16]",
            "compute it in f32, or run on cpu:0", ("libtpu 0.0.42.1",), fixed_in=(0, 0, 52)),
        Unsupported(
            "tpu-accuracy-tolerance", tpu, "result_accuracy TOLERANCE on exp/expm1/sqrt/rsqrt/tan",
            _names("Exp", "Expm1", "Sqrt", "Rsqrt", "Tan"), frozenset(),
            "No implementation found for requested accuracy: tolerance ... (select_accuracy.cc:44)",
            "leave result_accuracy DEFAULT or ask for HIGHEST, or run on cpu:0", _MEASURED,
            when=_tolerance_accuracy, when_text="result_accuracy mode TOLERANCE"),
        Unsupported(
            "tpu-accuracy-cbrt", tpu, "result_accuracy on cbrt", _names("Cbrt"), frozenset(),
            "Accuracy analysis for cbrt is not implemented yet (llo_region_builder.cc)",
            "leave result_accuracy DEFAULT, or run on cpu:0", _MEASURED,
            when=_any_accuracy, when_text="any result_accuracy but DEFAULT"),
    )


TABLE: tuple[Unsupported, ...] = _tpu_rows()
"""Every row, every platform. The CPU has none: every op xlasdk builds compiles for XLA:CPU."""


@dataclass(frozen=True)
class Behaviour:
    """A value a platform's compiled code defines otherwise than XLA:CPU (StableHLO leaves it to the
    implementation, or the platform approximates what XLA:CPU computes exactly): the platform compiles
    the program, but a check of XLA:CPU's values cannot hold there (op tests skip it, naming the row).

    Attributes
    ----------
    name: the row's short name (``"tpu-float-to-int-nan"``).
    platform: the :class:`Platform` that defines it otherwise.
    what: the behaviour (``"convert of NaN and out-of-range floats to integers"``).
    cpu: what XLA:CPU gives.
    device: what the platform gives, as far as measured or documented.
    measured: where it was seen.
    """

    name: str
    platform: Platform
    what: str
    cpu: str
    device: str
    measured: tuple[str, ...]

    def __str__(self) -> str:
        return (f"{self.what}: XLA:CPU gives {self.cpu}; XLA:{self.platform.name} {self.device} "
                f"(seen: {'; '.join(self.measured)})")


_V5E_OPS: Final = "a TPU v5e, libtpu 0.0.42.1, the op suite of main e94d0b0 (tpu-ops-failures.txt)"
_V5E_PROBE: Final = "a TPU v5e, libtpu 0.0.42.1, tools/tpu_probe_behaviours.py (2026-12-06)"

#: Every behaviour row, by name.
BEHAVIOURS: dict[str, Behaviour] = {b.name: b for b in (
    Behaviour("tpu-float-to-int-nan", Platform.TPU, "convert of infinities and out-of-range floats to s64 / u64",
              "0 for NaN and the integer type's bounds beyond them (saturation)",
              "gives -1 for +inf and 1e20, 1 for -inf, wraps 9.3e18 (to -9146743772980183040) and negative values "
              "into u64 (-129 to 18446744073709551487); to 8-, 16- and 32-bit integers it gives the CPU's values, "
              "NaN included. StableHLO leaves the result implementation-defined", (_V5E_OPS, _V5E_PROBE)),
    Behaviour("tpu-fp8-nan-sign", Platform.TPU, "convert of -inf and of negative values beyond its range to "
              "f8e4m3fn (which has no infinity)", "the NaN with the sign bit set (0xff)",
              "gives the NaN without it (0x7f) for -inf, and for -1000 where XLA folds a constant (0xff from a "
              "parameter); every other value of a 4,025-value grid (ties, subnormals, beyond 448, NaN) and every "
              "f8e5m2 value as the CPU's", (_V5E_OPS, _V5E_PROBE)),
    Behaviour("tpu-float-remainder", Platform.TPU, "remainder of f16 / bf16 / f32 values",
              "the exact remainder (fmod), as numpy's",
              "computes it through its approximate division: some results are far from the exact one, "
              "beyond any ulp bound of the error model (which has no row for remainder): 1,971 of 2,048 f32 "
              "remainders of |x| < 4e3 by |y| < 10 differed (fmod(125.730225, y) 0.680542 for 0.68054104), "
              "17 of 2,048 f16, 1 of 2,048 bf16", (_V5E_OPS, _V5E_PROBE)),
    Behaviour("tpu-f64-emulated", Platform.TPU, "f64 values (XLA:TPU has no 64-bit float unit: its X64 rewriter "
              "emulates f64 in 32-bit pieces)", "IEEE binary64 values",
              "gives values that are not binary64's: f64 arrays moved, floored, rounded, sorted and the f64 "
              "decompositions failed their checks; xlasdk's error model has no row for the emulation", (_V5E_OPS,)),
    Behaviour("tpu-x64-collectives", Platform.TPU, "collectives of f64, s64 and c64 values on one device",
              "each operand itself (one participant)", "gave other values for some of them", (_V5E_OPS,)),
    Behaviour("tpu-s64-dynamic-slice-starts", Platform.TPU, "dynamic-slice / dynamic-update-slice with s64 "
              "start indices out of range", "the starts clamped into the operand",
              "gave other elements", (_V5E_OPS,)),
    Behaviour("tpu-popcnt-narrow-signed", Platform.TPU, "population-count of s4 / s8 / s16 values",
              "the number of set bits in the value's own width",
              "counts the bits of a negative value sign-extended to 32 bits, wrapped to the result's width "
              "(s8 -128 gives 25, s16 -32768 gives 17, s4 -8 gives -3); non-negative values as the CPU",
              (_V5E_OPS, _V5E_PROBE)),
    Behaviour("tpu-approx-top-k", Platform.TPU, "approx-top-k (ApproxTopK)",
              "the exact top k (XLA:CPU sorts)", "an approximation at the call's recall target, as documented "
              "for the TPU (XLA's ApproxTopK)", (_V5E_OPS,)),
)}


# -- the table of a device ----------------------------------------------------------------------
@dataclass(frozen=True)
class Capabilities:
    """A device's capability table.

    Attributes
    ----------
    platform: the :class:`Platform`.
    generation: the TPU generation (``"v5e"``, ``"v4"``...; None for the CPU, or a TPU whose kind
        xlasdk does not know).
    device: how messages name the device (``"TPU v5e"``, ``"cpu"``).
    release: the compiler's release as numbers (libtpu's ``(0, 0, 52)``), None when not known.
    rows: the rows that hold for that release (:class:`Unsupported`).
    target: the device the table was made for (:func:`capabilities`), whose platform's lowering of
        LAPACK calls :meth:`supports` applies first; None for a table made by hand.
    """

    platform: Platform
    generation: str | None
    device: str
    release: tuple[int, ...] | None
    rows: tuple[Unsupported, ...]
    target: Device | None = field(default=None, compare=False, repr=False)

    def table(self) -> str:
        """The table as text: a line naming the device and its compiler's release, then one line per
        row (its name, what is not supported, what to do instead)."""
        release = ".".join(map(str, self.release)) if self.release else "unknown"
        head = (f"{self.device}: {len(self.rows)} thing{'s' if len(self.rows) != 1 else ''} its compiler refuses"
                f" (release {release})" if self.rows else f"{self.device}: no refusals known")
        width = max((len(r.name) for r in self.rows), default=0)
        return "\n".join([head, *(f"  {r.name.ljust(width)}  {r.what}: {r.instead}" for r in self.rows)])

    def __str__(self) -> str:
        return self.table()

    def refusals(self, computation: XlaComputation) -> list[Refusal]:
        """Every instruction of ``computation`` (its regions' too) that a row refuses, in program order."""
        if not isinstance(computation, XlaComputation):
            raise TypeError(f"refusals: expected an XlaComputation, got {type(computation).__name__}")
        if not self.rows:
            return []
        out = []
        for op, where in every_called_op(computation.instruction_graph()):
            for row in self.rows:
                if row.matches(op):
                    out.append(Refusal(row, where, _source(op), self.device, op.opcode))
        return out

    def check(self, computation: XlaComputation) -> None:
        """Raise :class:`~xlasdk.errors.UnsupportedOnDeviceError` for the first refused instruction.

        Raises
        ------
        UnsupportedOnDeviceError
            Naming the instruction, its source line, what XLA says and what to do instead; its
            ``refusals`` attribute lists every refused instruction.
        """
        found = self.refusals(computation)
        if found:
            first = next((f for f in found if f.opcode != "parameter"), found[0])  # the op that uses it
            more = f" (and {len(found) - 1} more refused instructions)" if len(found) > 1 else ""
            raise UnsupportedOnDeviceError(f"compile: {first}{more}", refusals=tuple(found))

    def supports(self, what: Any, *, as_written: bool = False) -> Support:
        """Whether this device's compiler takes ``what``, by the table (nothing is compiled).

        Parameters
        ----------
        what:
            An :class:`~xlasdk.XlaComputation` (checked as ``xs.compile`` checks it: every instruction,
            of every called function, after the platform's own lowering of LAPACK calls), an
            :class:`~xlasdk.XlaOp` (that op as written, its operands' and results' types), or an
            element type (a numpy / ml_dtypes dtype, ``"f64"``, a :class:`~xlasdk.PrimitiveType`):
            unsupported when a row refuses every array of it; else supported, with the rows that
            refuse some ops of it in ``limits``.
        as_written:
            Check a computation as written, without its platform's lowering of LAPACK calls (which
            ``xs.compile`` applies first, and so does this check by default).

        Example::

            >>> ok = xs.capabilities(xs.topology("v5e:1x1").devices[0]).supports(comp)
            >>> if not ok: print(ok.reason)   # "f64 rng is not supported on TPU v5e (...): ..."

        Raises
        ------
        DTypeError
            ``what`` is none of these.
        GraphImportError
            A computation the check cannot read (it does not guess).
        """
        from ..errors import PlatformLoweringError
        from ..types import dtype_to_etype

        if isinstance(what, XlaComputation):
            label = f"computation {what.name!r}"
            if self.target is not None and not as_written:
                from ._platform_lowering import for_platform

                try:
                    what = for_platform(what, str(self.target.platform))
                except PlatformLoweringError as e:
                    return Support(False, self.device, label, (), (str(e),))
            found = tuple(self.refusals(what))
            return Support(not found, self.device, label, found, tuple(str(f) for f in found))
        if isinstance(what, XlaOp):
            label = f"op {what.opcode} -> {what.shape}"
            where = _source(what)
            hits = tuple(Refusal(r, label, where, self.device, what.opcode) for r in self.rows if r.matches(what))
            return Support(not hits, self.device, label, hits, tuple(str(h) for h in hits))
        if not isinstance(what, PrimitiveType) and (isinstance(what, (bool, int, float, complex)) or what is None):
            from ..errors import DTypeError

            raise DTypeError(f"supports: expected an XlaComputation, an XlaOp or an element type, got {what!r}")
        try:
            etype = dtype_to_etype(what)
        except XlaSdkError as e:
            from ..errors import DTypeError

            raise DTypeError(f"supports: expected an XlaComputation, an XlaOp or an element type; {e}") from None
        label = f"element type {etype.name}"
        rows = tuple(r for r in self.rows if etype in r.element_types)
        every = tuple(r for r in rows if not r.opcodes and r.when is None)
        if every:
            return Support(False, self.device, label, (), tuple(
                f"{r.what} is not supported on {self.device} ({r.xla_says}): {r.instead}" for r in every), every)
        return Support(True, self.device, label, limits=rows)

    def custom_call_available(self, target: str) -> bool:
        """Whether a custom call to ``target`` compiles here, as far as the table knows (False for
        the targets a row refuses on this platform: jaxlib's LAPACK kernels off the CPU)."""
        from ..ops.lapack_contracts import is_lapack_target

        return not (self.platform is Platform.TPU and is_lapack_target(target))


def _source(op: XlaOp) -> str:
    import os

    f = op.loc.fields
    file, line = str(f.get("source_file", "")), int(f.get("source_line", 0) or 0)
    return f"{os.path.basename(file)}:{line}" if file and line else ""


def check_capabilities(computation: XlaComputation, device: Device) -> None:
    """The compile step's check (:func:`xlasdk.compile`, for a chip or a topology's compile-only
    devices): :meth:`Capabilities.check` where ``device``'s platform has rows (the TPU's), nothing
    to do elsewhere. A module the instruction graph cannot hold (:class:`GraphImportError`) is left
    to XLA's compiler, which runs in xlasdk's worker for a TPU (an abort ends the worker, not the
    user's process).

    Raises
    ------
    UnsupportedOnDeviceError
        As :meth:`Capabilities.check`.
    """
    if device.platform != "tpu":
        return
    try:
        capabilities(device).check(computation)
    except GraphImportError:
        return


def capabilities(device: Any) -> Capabilities:
    """The capability table of ``device`` (a :class:`~xlasdk.Device`, ``"cpu:0"``-style string, or
    None for the default device): what its compiler refuses, as measured.

    Raises
    ------
    UnknownDeviceError
        For an unknown device.
    """
    from .device import _resolve_device
    from .topology import _GENERATIONS

    dev = _resolve_device(device)
    if dev.platform == "cpu":
        return Capabilities(Platform.CPU, None, "cpu", None, tuple(r for r in TABLE if r.platform is Platform.CPU),
                            dev)
    if dev.platform == "tpu":
        gen = _GENERATIONS.get(dev.device_kind)
        name = f"TPU {gen}" if gen is not None else str(dev.device_kind)
        release = _libtpu_release()
        rows = tuple(r for r in TABLE if r.platform is Platform.TPU and r.applies_to(release, gen))
        return Capabilities(Platform.TPU, gen, name, release, rows, dev)
    return Capabilities(Platform.OTHER, None, str(dev.platform), None, (), dev)


def _libtpu_release() -> tuple[int, ...] | None:
    """The installed libtpu's release (``(0, 0, 52)``), None when libtpu is not a wheel xlasdk can read
    (a ``TPU_LIBRARY_PATH`` library: every row then holds)."""
    from .plugins import _release, find_plugin

    found = find_plugin("tpu")
    if found is None or found.version is None or found.library_path is None:
        return None
    return _release(found.version) or None
