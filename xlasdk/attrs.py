"""Attribute types of XLA operations: dimension numbers, precision, padding, enums, metadata.

The classes mirror XLA's protos (``xla_data.proto``) and the former ``jaxlib.xla_client`` classes:
each takes its fields as keyword arguments, or can be built empty and filled in the former proto
style (``dn.lhs_contracting_dimensions.append(1)``): list fields are plain mutable Python lists.
Each knows how to print itself as the StableHLO attribute it maps to (``to_mlir()``, MLIR
attribute syntax, exactly what goes inside an op's attribute dictionary).

Every enum value is checked in Python against the names StableHLO knows before any text reaches
MLIR: jaxlib's enum attribute builders abort the whole process on an unknown string.

Validation here needs no shapes (an unknown enum name, a negative or repeated dimension number,
mismatched list lengths) and raises :class:`~xlasdk.errors.ShapeError`; checks against operand
shapes are made by the ops.
"""

from __future__ import annotations

import enum
import math
import operator
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, TypeVar

from .errors import ShapeError

_E = TypeVar("_E", bound="_AttrEnum")

__all__ = [
    "ComparisonDirection",
    "ComparisonType",
    "ConvolutionDimensionNumbers",
    "CurrentSourceInfoMetadata",
    "DotDimensionNumbers",
    "FftType",
    "GatherDimensionNumbers",
    "OpMetadata",
    "OpSharding",
    "PaddingConfig",
    "PaddingConfigDimension",
    "PaddingType",
    "Precision",
    "PrecisionConfig",
    "RandomAlgorithm",
    "RandomDistribution",
    "ResultAccuracy",
    "ScatterDimensionNumbers",
    "TriangularSolveOptions_Transpose",
    "convert_padding",
    "current_source_info_metadata",
    "make_convolution_dimension_numbers",
    "make_dot_dimension_numbers",
    "make_padding_config",
    "make_replica_groups",
    "replica_groups_to_mlir",
    "window_padding_type_to_pad_values",
]

# --------------------------------------------------------------------------------------------
# Small validators shared by every class.


def _int(value: Any, what: str) -> int:
    """``value`` as a Python int (numpy integers accepted, bools and floats refused)."""
    if isinstance(value, bool):
        raise ShapeError(f"{what} must be an int, got bool {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ShapeError(f"{what} must be an int, got {type(value).__name__} {value!r}") from None


def _dim(value: Any, what: str) -> int:
    """A dimension number: an int >= 0."""
    v = _int(value, what)
    if v < 0:
        raise ShapeError(f"{what} must be >= 0, got {v}")
    return v


def _dims(values: Any, what: str, *, sort: bool = False) -> list[int]:
    """A list of distinct dimension numbers (ascending if ``sort``)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ShapeError(f"{what} must be a sequence of ints, got {type(values).__name__} {values!r}")
    out = [_dim(v, f"{what}[{i}]") for i, v in enumerate(values)]
    if len(set(out)) != len(out):
        raise ShapeError(f"{what} has repeated dimensions: {out}")
    if sort and out != sorted(out):
        raise ShapeError(f"{what} must be sorted in ascending order, got {out}")
    return out


def _disjoint(a: list[int], b: list[int], what_a: str, what_b: str) -> None:
    common = sorted(set(a) & set(b))
    if common:
        raise ShapeError(f"{what_a} {a} and {what_b} {b} share dimensions {common}")


def _same_len(a: list[int], b: list[int], what_a: str, what_b: str) -> None:
    if len(a) != len(b):
        raise ShapeError(f"{what_a} {a} and {what_b} {b} must have the same length")


def _mlir_list(values: Sequence[int]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def _hlo_list(values: Sequence[int]) -> str:
    return "{" + ",".join(str(v) for v in values) + "}"


def _mlir_float(x: float) -> str:
    """An exact MLIR float literal (MLIR wants a '.' in the mantissa: ``1.0e-05``)."""
    r = repr(float(x))
    mant, sep, exp = r.partition("e")
    if "." not in mant:
        mant += ".0"
    return mant + sep + exp


class _ProtoLike:
    """Shared ``__repr__`` / ``__eq__`` of the proto-like classes, driven by ``_FIELDS``."""

    _FIELDS: ClassVar[tuple[str, ...]] = ()
    __hash__ = None  # type: ignore[assignment]  # mutable, like a proto message

    def _values(self) -> tuple[Any, ...]:
        return tuple(
            list(v) if isinstance(v, (list, tuple)) else v for v in (getattr(self, f) for f in self._FIELDS)
        )

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()

    def __repr__(self) -> str:
        args = ", ".join(f"{f}={v!r}" for f, v in zip(self._FIELDS, self._values(), strict=True))
        return f"{type(self).__name__}({args})"


# --------------------------------------------------------------------------------------------
# Enums.


class _AttrEnum(enum.Enum):
    """An XLA / StableHLO enum: ``parse`` accepts a member, its name (any case) or its value."""

    @classmethod
    def _mlir_format(cls) -> str:  # pragma: no cover - every concrete enum overrides it
        raise NotImplementedError

    @classmethod
    def _aliases(cls) -> dict[str, str]:
        """Extra accepted spellings (upper case) -> member name."""
        return {}

    @classmethod
    def parse(cls: type[_E], value: Any) -> _E:
        """The member named or numbered by ``value``.

        Parameters
        ----------
        value : the enum itself, its name as a string (case-insensitive) or its int value.

        Raises
        ------
        ShapeError
            If ``value`` names no member; the message lists the valid names.
        """
        if isinstance(value, cls):
            return value
        names = ", ".join(cls.__members__)
        if isinstance(value, str):
            key = value.strip().upper()
            key = cls._aliases().get(key, key)
            if key in cls.__members__:
                return cls.__members__[key]
            raise ShapeError(f"unknown {cls.__name__} {value!r}; expected one of {names}")
        if not isinstance(value, bool):
            try:
                number = operator.index(value)
            except TypeError:
                pass
            else:
                for member in cls:
                    if member.value == number:
                        return member
                raise ShapeError(f"unknown {cls.__name__} value {number}; expected one of {names}")
        raise ShapeError(f"{cls.__name__} must be one of {names}, got {type(value).__name__} {value!r}")

    def to_mlir(self) -> str:
        """The StableHLO enum attribute, e.g. ``#stablehlo<comparison_direction LT>``."""
        return self._mlir_format().format(self.name)

    def to_hlo(self) -> str:
        """The value as HLO text writes it (``direction=LT``, ``fft_type=RFFT``): the name."""
        return self.name


class ComparisonDirection(_AttrEnum):
    """Direction of ``Compare`` (StableHLO ``#stablehlo<comparison_direction ...>``).

    Values are StableHLO's ``ComparisonDirection`` numbers (XLA's ``Comparison::Direction``).
    """

    EQ = 0
    NE = 1
    GE = 2
    GT = 3
    LE = 4
    LT = 5

    @classmethod
    def _mlir_format(cls) -> str:
        return "#stablehlo<comparison_direction {}>"


class ComparisonType(_AttrEnum):
    """How ``Compare`` orders values (StableHLO ``#stablehlo<comparison_type ...>``).

    FLOAT (IEEE partial order), TOTALORDER (IEEE total order), SIGNED, UNSIGNED; values are
    StableHLO's ``ComparisonType`` numbers.
    """

    FLOAT = 1
    TOTALORDER = 2
    SIGNED = 3
    UNSIGNED = 4

    @classmethod
    def _mlir_format(cls) -> str:
        return "#stablehlo<comparison_type {}>"


class FftType(_AttrEnum):
    """Kind of ``Fft`` (XLA ``FftType`` proto enum; StableHLO ``#stablehlo<fft_type ...>``)."""

    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3

    @classmethod
    def _mlir_format(cls) -> str:
        return "#stablehlo<fft_type {}>"


class RandomAlgorithm(_AttrEnum):
    """Algorithm of ``RngBitGenerator`` (XLA ``RandomAlgorithm``; ``#stablehlo<rng_algorithm ...>``).

    The proto names ``RNG_DEFAULT``, ``RNG_THREE_FRY``, ``RNG_PHILOX`` are accepted by ``parse``.
    """

    DEFAULT = 0
    THREE_FRY = 1
    PHILOX = 2
    # The former xla_client's names (XLA's proto names) are set below the class: attributes that
    # are the members above, without being members of their own (``__members__`` and iteration
    # list each algorithm once).
    RNG_DEFAULT: ClassVar[RandomAlgorithm]
    RNG_THREE_FRY: ClassVar[RandomAlgorithm]
    RNG_PHILOX: ClassVar[RandomAlgorithm]

    @classmethod
    def _mlir_format(cls) -> str:
        return "#stablehlo<rng_algorithm {}>"

    @classmethod
    def _aliases(cls) -> dict[str, str]:
        return {"RNG_DEFAULT": "DEFAULT", "RNG_THREE_FRY": "THREE_FRY", "RNG_PHILOX": "PHILOX"}

    def to_hlo(self) -> str:
        """HLO's spelling: ``algorithm=rng_three_fry``."""
        return f"rng_{self.name.lower()}"


for _alias, _name in RandomAlgorithm._aliases().items():
    setattr(RandomAlgorithm, _alias, RandomAlgorithm[_name])


class TriangularSolveOptions_Transpose(_AttrEnum):
    """Transposition of ``a`` in ``TriangularSolve`` (XLA ``TriangularSolveOptions.Transpose``;
    StableHLO ``#stablehlo<transpose ...>``)."""

    NO_TRANSPOSE = 1
    TRANSPOSE = 2
    ADJOINT = 3

    @classmethod
    def _mlir_format(cls) -> str:
        return "#stablehlo<transpose {}>"


class RandomDistribution(_AttrEnum):
    """Distribution of the legacy ``Rng`` op (XLA ``RandomDistribution``;
    ``#stablehlo<rng_distribution ...>``). ``RNG_UNIFORM`` / ``RNG_NORMAL`` are accepted too."""

    UNIFORM = 1
    NORMAL = 2

    @classmethod
    def _mlir_format(cls) -> str:
        return "#stablehlo<rng_distribution {}>"

    @classmethod
    def _aliases(cls) -> dict[str, str]:
        return {"RNG_UNIFORM": "UNIFORM", "RNG_NORMAL": "NORMAL"}


class PaddingType(_AttrEnum):
    """Window padding policy of the former ``xla_client.PaddingType``.

    ``VALID``: no padding. ``SAME``: pad so the output has ``ceil(input / stride)`` elements along
    each spatial dimension. There is no StableHLO attribute for it: use
    :func:`window_padding_type_to_pad_values` to get explicit ``(lo, hi)`` pairs.
    """

    VALID = 1
    SAME = 2

    def to_mlir(self) -> str:
        """Always raises: padding types become explicit pads before reaching StableHLO."""
        raise ShapeError(
            "PaddingType has no StableHLO form; convert it with window_padding_type_to_pad_values"
        )


# --------------------------------------------------------------------------------------------
# Metadata.


class OpMetadata(_ProtoLike):
    """Debug metadata of an op: XLA's ``OpMetadata`` proto, ``metadata={...}`` in HLO text.

    Set it on a builder with :meth:`XlaBuilder.set_op_metadata <xlasdk.XlaBuilder.set_op_metadata>`
    or ``with b.op_metadata(...)``. Every field below is kept whole in ``as_hlo_text()`` (both
    the direct printer and XLA's converter), ``as_serialized_hlo_module_proto()``, and files
    saved as ``.hlo``, ``.pb``, ``.mlir`` and ``.mlirbc`` and loaded back. In StableHLO it is the
    op's location (see :meth:`to_mlir_location`), in the form XLA's converter reads.

    XLA's other ``OpMetadata`` fields are not user input: ``stack_frame_id`` indexes the stack
    frame table of XLA-made modules (HLO loaded from XLA's dumps keeps it, as HLO text and
    protos), ``profile_type`` / ``profile_info`` / ``size_of_*`` are compiler outputs, and
    ``preserve_layout`` is not read by XLA's HLO text parser.

    Attributes
    ----------
    op_type : str
        The framework-level op type (for example ``"Add"`` or ``"dot_general"``).
    op_name : str
        The framework-level op name (for example ``"jit(f)/add"``); XLA names the HLO
        instruction after its last ``/`` component.
    source_file : str
        The file that created the op.
    source_line : int
        The line in ``source_file``.
    source_end_line, source_column, source_end_column : int
        Where the op's source ends, and the columns (``0`` for the end line / column: the same
        as the start, as MLIR file locations and XLA's converter have it).
    deduplicated_name : str
        XLA's ``deduplicated_name`` (the name shared by instructions XLA deduplicated).
    scheduling_name : str
        XLA's ``scheduling_name`` (the name schedulers and scheduling annotations refer to).

    The first four may be given by position (as in the former ``xla_client.OpMetadata``), the
    others by keyword. Line and column numbers must be ints in ``[0, 2**31)`` (int32 in HLO).
    """

    _FIELDS = (
        "op_type",
        "op_name",
        "source_file",
        "source_line",
        "source_end_line",
        "source_column",
        "source_end_column",
        "deduplicated_name",
        "scheduling_name",
    )

    def __init__(
        self,
        op_type: str = "",
        op_name: str = "",
        source_file: str = "",
        source_line: int = 0,
        *,
        source_end_line: int = 0,
        source_column: int = 0,
        source_end_column: int = 0,
        deduplicated_name: str = "",
        scheduling_name: str = "",
    ):
        self.op_type = op_type
        self.op_name = op_name
        self.source_file = source_file
        self.source_line = source_line
        self.source_end_line = source_end_line
        self.source_column = source_column
        self.source_end_column = source_end_column
        self.deduplicated_name = deduplicated_name
        self.scheduling_name = scheduling_name

    def __repr__(self) -> str:
        """The first four fields always, the others when set."""
        shown = [
            f"{f}={v!r}"
            for i, (f, v) in enumerate(zip(self._FIELDS, self._values(), strict=True))
            if i < 4 or v
        ]
        return f"OpMetadata({', '.join(shown)})"

    def to_mlir_location(self) -> str:
        """The MLIR location carrying this metadata, e.g. ``loc(fused["n", "f.py":3:0])``.

        ``loc(fused<{EXTRA}>["OP_TYPE:", "OP_NAME", "FILE":LINE:COL to END_LINE:END_COL])``:
        a name ending in ``:`` is XLA's ``op_type``, another name its ``op_name``, the file
        range the ``source_*`` fields (no file part without ``source_file``); ``EXTRA`` holds
        what XLA's converter would drop or mangle (``deduplicated_name``, ``scheduling_name``,
        names holding an ``@``, ``op_name`` ending in ``:``, and the end of a range, which StableHLO
        portable artifacts do not keep). Parts not set are left out; ``loc(unknown)`` when
        nothing is set.

        Raises
        ------
        ShapeError
            If a line or column number is not an int >= 0.
        """
        from ._metadata import INT_FIELDS, location

        fields: dict[str, Any] = {
            f: _dim(getattr(self, f), f"OpMetadata.{f}") if f in INT_FIELDS else str(getattr(self, f) or "")
            for f in self._FIELDS
        }
        return location(**fields)


def _mlir_str(s: str) -> str:
    """A double-quoted MLIR string literal."""
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.extend(f"\\{b:02X}" for b in ch.encode("utf-8"))
    return '"' + "".join(out) + '"'


def current_source_info_metadata(
    op_type: str | None = None, op_name: str | None = None, skip_frames: int = 1
) -> OpMetadata:
    """``OpMetadata`` holding the file (base name) and line of a caller.

    Parameters
    ----------
    op_type, op_name : str or None
        Copied into the metadata (None becomes ``""``).
    skip_frames : int
        How many frames up to look: 1 (default) is the function calling this one.

    Raises
    ------
    ShapeError
        If ``skip_frames`` is negative or deeper than the stack.
    """
    depth = _dim(skip_frames, "skip_frames")
    try:
        frame = sys._getframe(depth)
    except ValueError:
        raise ShapeError(f"skip_frames={depth} is deeper than the call stack") from None
    return OpMetadata(
        op_type=op_type or "",
        op_name=op_name or "",
        source_file=os.path.basename(frame.f_code.co_filename),
        source_line=frame.f_lineno,
    )


CurrentSourceInfoMetadata = current_source_info_metadata


# --------------------------------------------------------------------------------------------
# Precision and result accuracy.


class _Precision(_AttrEnum):
    """Precision of one operand of Dot / Conv (XLA ``PrecisionConfig.Precision``;
    StableHLO ``#stablehlo<precision ...>``)."""

    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _mlir_format(cls) -> str:
        return "#stablehlo<precision {}>"


_Precision.__name__, _Precision.__qualname__ = "Precision", "PrecisionConfig.Precision"


class PrecisionConfig(_ProtoLike):
    """Per-operand precision of Dot, DotGeneral and Conv (XLA ``PrecisionConfig`` proto).

    Attributes
    ----------
    operand_precision : list
        One entry per operand: ``PrecisionConfig.Precision`` members, or their names as strings
        (``"DEFAULT"``, ``"HIGH"``, ``"HIGHEST"``, any case); appendable.

    Raises
    ------
    ShapeError
        On an unknown precision name (at construction or in :meth:`to_mlir`).
    """

    Precision = _Precision
    _FIELDS = ("operand_precision",)

    def __init__(self, operand_precision: Iterable[_Precision | str | int] | None = None):
        self.operand_precision: list[Any] = [
            _Precision.parse(p) for p in (operand_precision if operand_precision is not None else ())
        ]

    def precisions(self) -> list[_Precision]:
        """``operand_precision`` with every entry as a ``Precision`` (validated)."""
        return [_Precision.parse(p) for p in self.operand_precision]

    def _values(self) -> tuple[Any, ...]:
        return (self.precisions(),)

    def to_mlir(self) -> str:
        """The ``precision_config`` array attribute: ``[#stablehlo<precision DEFAULT>, ...]``."""
        return "[" + ", ".join(p.to_mlir() for p in self.precisions()) + "]"

    def to_hlo(self) -> str:
        """HLO's ``operand_precision={default,highest}`` value ('' when every entry is DEFAULT,
        which HLO text leaves out)."""
        precs = self.precisions()
        if all(p.name == "DEFAULT" for p in precs):
            return ""
        return "{" + ",".join(p.name.lower() for p in precs) + "}"


Precision = PrecisionConfig.Precision


class _Mode(_AttrEnum):
    """Accuracy mode of a transcendental op (XLA ``ResultAccuracy.Mode``;
    StableHLO ``#stablehlo.result_accuracy_mode<...>``)."""

    DEFAULT = 0
    HIGHEST = 1
    TOLERANCE = 2

    @classmethod
    def _mlir_format(cls) -> str:
        return "#stablehlo.result_accuracy_mode<{}>"


_Mode.__name__, _Mode.__qualname__ = "Mode", "ResultAccuracy.Mode"


class ResultAccuracy(_ProtoLike):
    """Requested accuracy of a transcendental op (XLA ``ResultAccuracy`` proto;
    StableHLO ``#stablehlo.result_accuracy<...>``).

    Attributes
    ----------
    mode : ResultAccuracy.Mode or str
        ``DEFAULT``, ``HIGHEST`` or ``TOLERANCE`` (strings in any case).
    atol, rtol : float
        Absolute and relative tolerance, finite and >= 0 (only with ``TOLERANCE``).
    ulps : int
        Tolerance in units in the last place, >= 0 (only with ``TOLERANCE``).

    Raises
    ------
    ShapeError
        On an unknown mode, a negative or non-finite tolerance, or a non-zero tolerance with
        mode ``DEFAULT`` or ``HIGHEST``.
    """

    Mode = _Mode
    _FIELDS = ("mode", "atol", "rtol", "ulps")

    def __init__(self, mode: _Mode | str = "TOLERANCE", atol: float = 0.0, rtol: float = 0.0, ulps: int = 0):
        self.mode: Any = _Mode.parse(mode)
        self.atol = atol
        self.rtol = rtol
        self.ulps = ulps
        self.validate()

    def validate(self) -> tuple[_Mode, float, float, int]:
        """The fields, normalized and checked; raises ShapeError if they are invalid."""
        mode = _Mode.parse(self.mode)
        tols = []
        for name in ("atol", "rtol"):
            raw = getattr(self, name)
            if isinstance(raw, bool) or not isinstance(raw, (int, float)) and not hasattr(raw, "__float__"):
                raise ShapeError(f"ResultAccuracy.{name} must be a float, got {type(raw).__name__} {raw!r}")
            value = float(raw)
            if not math.isfinite(value) or value < 0:
                raise ShapeError(f"ResultAccuracy.{name} must be finite and >= 0, got {raw!r}")
            tols.append(value)
        ulps = _dim(self.ulps, "ResultAccuracy.ulps")
        if mode is not _Mode.TOLERANCE and (tols[0] or tols[1] or ulps):
            raise ShapeError(
                f"ResultAccuracy with mode {mode.name} takes no tolerances "
                f"(got atol={tols[0]}, rtol={tols[1]}, ulps={ulps}); use mode TOLERANCE"
            )
        return mode, tols[0], tols[1], ulps

    def _values(self) -> tuple[Any, ...]:
        try:
            return self.validate()
        except ShapeError:
            return super()._values()

    def to_mlir(self) -> str:
        """``#stablehlo.result_accuracy<atol = ..., rtol = ..., ulps = ..., mode = ...>``."""
        mode, atol, rtol, ulps = self.validate()
        return (
            f"#stablehlo.result_accuracy<atol = {_mlir_float(atol)}, rtol = {_mlir_float(rtol)}, "
            f"ulps = {ulps}, mode = {mode.to_mlir()}>"
        )


# --------------------------------------------------------------------------------------------
# Dot.


class DotDimensionNumbers(_ProtoLike):
    """Contracting and batch dimensions of DotGeneral (XLA ``DotDimensionNumbers`` proto;
    StableHLO ``#stablehlo.dot<...>``).

    Attributes
    ----------
    lhs_contracting_dimensions, rhs_contracting_dimensions : list of int
        Dimensions summed over, paired in order (equal lengths).
    lhs_batch_dimensions, rhs_batch_dimensions : list of int
        Batch dimensions, paired in order (equal lengths), disjoint from the contracting ones.

    Raises
    ------
    ShapeError
        On a negative or repeated dimension, unequal lhs/rhs lengths, or a dimension that is
        both batch and contracting.
    """

    _FIELDS = (
        "lhs_contracting_dimensions",
        "rhs_contracting_dimensions",
        "lhs_batch_dimensions",
        "rhs_batch_dimensions",
    )

    def __init__(
        self,
        lhs_contracting_dimensions: Iterable[int] = (),
        rhs_contracting_dimensions: Iterable[int] = (),
        lhs_batch_dimensions: Iterable[int] = (),
        rhs_batch_dimensions: Iterable[int] = (),
    ):
        self.lhs_contracting_dimensions = _dims(lhs_contracting_dimensions, "lhs_contracting_dimensions")
        self.rhs_contracting_dimensions = _dims(rhs_contracting_dimensions, "rhs_contracting_dimensions")
        self.lhs_batch_dimensions = _dims(lhs_batch_dimensions, "lhs_batch_dimensions")
        self.rhs_batch_dimensions = _dims(rhs_batch_dimensions, "rhs_batch_dimensions")
        self.validate()

    def validate(self) -> None:
        """Check the fields (they may have been edited in place); raises ShapeError."""
        lc = _dims(self.lhs_contracting_dimensions, "lhs_contracting_dimensions")
        rc = _dims(self.rhs_contracting_dimensions, "rhs_contracting_dimensions")
        lb = _dims(self.lhs_batch_dimensions, "lhs_batch_dimensions")
        rb = _dims(self.rhs_batch_dimensions, "rhs_batch_dimensions")
        _same_len(lc, rc, "lhs_contracting_dimensions", "rhs_contracting_dimensions")
        _same_len(lb, rb, "lhs_batch_dimensions", "rhs_batch_dimensions")
        _disjoint(lb, lc, "lhs_batch_dimensions", "lhs_contracting_dimensions")
        _disjoint(rb, rc, "rhs_batch_dimensions", "rhs_contracting_dimensions")

    def to_mlir(self) -> str:
        """``#stablehlo.dot<lhs_batching_dimensions = [...], ...>`` (empty lists omitted)."""
        self.validate()
        fields = (
            ("lhs_batching_dimensions", self.lhs_batch_dimensions),
            ("rhs_batching_dimensions", self.rhs_batch_dimensions),
            ("lhs_contracting_dimensions", self.lhs_contracting_dimensions),
            ("rhs_contracting_dimensions", self.rhs_contracting_dimensions),
        )
        return "#stablehlo.dot<" + ", ".join(f"{k} = {_mlir_list(v)}" for k, v in fields if len(v)) + ">"

    def to_hlo(self) -> str:
        """HLO's attributes: ``lhs_batch_dims={..}`` (when not empty), ``lhs_contracting_dims={..}``
        (always), then the same for rhs."""
        self.validate()
        parts = []
        for side in ("lhs", "rhs"):
            batch = getattr(self, f"{side}_batch_dimensions")
            if len(batch):
                parts.append(f"{side}_batch_dims={_hlo_list(batch)}")
            parts.append(f"{side}_contracting_dims={_hlo_list(getattr(self, f'{side}_contracting_dimensions'))}")
        return ", ".join(parts)


DotDimensionNumbersLike = (
    DotDimensionNumbers
    | tuple[tuple[Sequence[int], Sequence[int]], tuple[Sequence[int], Sequence[int]]]
    | Sequence[Any]
)


def make_dot_dimension_numbers(dimension_numbers: DotDimensionNumbersLike) -> DotDimensionNumbers:
    """A ``DotDimensionNumbers`` from ``((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))``.

    A ``DotDimensionNumbers`` is returned as it is (after validation).

    Raises
    ------
    ShapeError
        If the nesting is not two pairs of int sequences, or the dimensions are invalid.
    """
    if isinstance(dimension_numbers, DotDimensionNumbers):
        dimension_numbers.validate()
        return dimension_numbers
    try:
        (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    except (TypeError, ValueError):
        raise ShapeError(
            "dot dimension_numbers must be ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)) "
            f"or a DotDimensionNumbers, got {dimension_numbers!r}"
        ) from None
    return DotDimensionNumbers(
        lhs_contracting_dimensions=lhs_contract,
        rhs_contracting_dimensions=rhs_contract,
        lhs_batch_dimensions=lhs_batch,
        rhs_batch_dimensions=rhs_batch,
    )


# --------------------------------------------------------------------------------------------
# Convolution.


class ConvolutionDimensionNumbers(_ProtoLike):
    """Layout of the operands of a convolution (XLA ``ConvolutionDimensionNumbers`` proto;
    StableHLO ``#stablehlo.conv<...>``).

    Attributes
    ----------
    input_batch_dimension, input_feature_dimension : int
        Batch (N) and feature (C) dimensions of the input (lhs).
    input_spatial_dimensions : list of int
        Spatial dimensions of the input, in window order.
    kernel_input_feature_dimension, kernel_output_feature_dimension : int
        Input (I) and output (O) feature dimensions of the kernel (rhs).
    kernel_spatial_dimensions : list of int
        Spatial dimensions of the kernel, in window order.
    output_batch_dimension, output_feature_dimension : int
        Batch and feature dimensions of the output.
    output_spatial_dimensions : list of int
        Spatial dimensions of the output, in window order.

    Raises
    ------
    ShapeError
        On a negative dimension, a dimension used twice within one operand, or spatial lists
        of different lengths.
    """

    _FIELDS = (
        "input_batch_dimension",
        "input_feature_dimension",
        "input_spatial_dimensions",
        "kernel_input_feature_dimension",
        "kernel_output_feature_dimension",
        "kernel_spatial_dimensions",
        "output_batch_dimension",
        "output_feature_dimension",
        "output_spatial_dimensions",
    )

    def __init__(
        self,
        input_batch_dimension: int = 0,
        input_feature_dimension: int = 0,
        input_spatial_dimensions: Iterable[int] = (),
        kernel_input_feature_dimension: int = 0,
        kernel_output_feature_dimension: int = 0,
        kernel_spatial_dimensions: Iterable[int] = (),
        output_batch_dimension: int = 0,
        output_feature_dimension: int = 0,
        output_spatial_dimensions: Iterable[int] = (),
    ):
        # Scalar fields default to 0 like proto fields; so an empty object is only checked on use.
        self.input_batch_dimension = _dim(input_batch_dimension, "input_batch_dimension")
        self.input_feature_dimension = _dim(input_feature_dimension, "input_feature_dimension")
        self.input_spatial_dimensions = _dims(input_spatial_dimensions, "input_spatial_dimensions")
        self.kernel_input_feature_dimension = _dim(
            kernel_input_feature_dimension, "kernel_input_feature_dimension"
        )
        self.kernel_output_feature_dimension = _dim(
            kernel_output_feature_dimension, "kernel_output_feature_dimension"
        )
        self.kernel_spatial_dimensions = _dims(kernel_spatial_dimensions, "kernel_spatial_dimensions")
        self.output_batch_dimension = _dim(output_batch_dimension, "output_batch_dimension")
        self.output_feature_dimension = _dim(output_feature_dimension, "output_feature_dimension")
        self.output_spatial_dimensions = _dims(output_spatial_dimensions, "output_spatial_dimensions")

    def validate(self) -> None:
        """Check the fields as a whole (each operand's dimensions distinct); raises ShapeError."""
        groups = (
            ("input", ("input_batch_dimension", "input_feature_dimension"), "input_spatial_dimensions"),
            (
                "kernel",
                ("kernel_input_feature_dimension", "kernel_output_feature_dimension"),
                "kernel_spatial_dimensions",
            ),
            ("output", ("output_batch_dimension", "output_feature_dimension"), "output_spatial_dimensions"),
        )
        n_spatial = set()
        for operand, scalars, spatial in groups:
            dims = [_dim(getattr(self, f), f) for f in scalars] + _dims(getattr(self, spatial), spatial)
            if len(set(dims)) != len(dims):
                listed = ", ".join(f"{f}={getattr(self, f)}" for f in scalars)
                raise ShapeError(
                    f"ConvolutionDimensionNumbers: the {operand} dimensions repeat a dimension "
                    f"({listed}, {spatial}={list(getattr(self, spatial))})"
                )
            n_spatial.add(len(dims) - 2)
        if len(n_spatial) != 1:
            raise ShapeError(
                "ConvolutionDimensionNumbers: input, kernel and output spatial dimensions must have the same "
                f"length, got {list(self.input_spatial_dimensions)}, {list(self.kernel_spatial_dimensions)}, "
                f"{list(self.output_spatial_dimensions)}"
            )

    def to_mlir(self) -> str:
        """``#stablehlo.conv<raw input_batch_dimension = 0, ...>`` (every field spelled out)."""
        self.validate()
        body = ", ".join(
            f"{f} = {_mlir_list(v) if isinstance(v, (list, tuple)) else v}"
            for f, v in zip(self._FIELDS, self._values(), strict=True)
        )
        return f"#stablehlo.conv<raw {body}>"

    def to_hlo(self) -> str:
        """HLO's ``dim_labels`` value: ``b01f_01io->b01f`` (batch/feature/spatial letters by position)."""
        self.validate()
        n = len(self.input_spatial_dimensions)

        def labels(first: tuple[int, str], second: tuple[int, str], spatial: Sequence[int]) -> str:
            out = [""] * (n + 2)
            out[first[0]], out[second[0]] = first[1], second[1]
            for k, d in enumerate(spatial):
                out[d] = str(k)
            return "".join(out)

        return (
            labels(
                (self.input_batch_dimension, "b"), (self.input_feature_dimension, "f"), self.input_spatial_dimensions
            )
            + "_"
            + labels(
                (self.kernel_output_feature_dimension, "o"), (self.kernel_input_feature_dimension, "i"),
                self.kernel_spatial_dimensions,
            )
            + "->"
            + labels(
                (self.output_batch_dimension, "b"), (self.output_feature_dimension, "f"), self.output_spatial_dimensions
            )
        )


ConvDimensionNumbersLike = ConvolutionDimensionNumbers | Sequence[str] | None


def _layout_positions(spec: Any, what: str, required: str, rank: int) -> tuple[dict[str, int], list[str]]:
    """Positions of the ``required`` letters in a layout string and its other (spatial) letters."""
    if not isinstance(spec, str):
        raise ShapeError(f"{what} layout must be a string like 'NCHW', got {type(spec).__name__} {spec!r}")
    if len(spec) != rank:
        raise ShapeError(
            f"{what} layout {spec!r} must have {rank} letters (2 + number of spatial dimensions)"
        )
    if len(set(spec)) != len(spec):
        raise ShapeError(f"{what} layout {spec!r} repeats a letter")
    missing = [c for c in required if c not in spec]
    if missing:
        raise ShapeError(f"{what} layout {spec!r} must contain each of {', '.join(required)} exactly once")
    return {c: spec.index(c) for c in required}, [c for c in spec if c not in required]


def make_convolution_dimension_numbers(
    dimension_numbers: ConvDimensionNumbersLike, num_spatial_dimensions: int
) -> ConvolutionDimensionNumbers:
    """``ConvolutionDimensionNumbers`` from layout strings, like the former xla_client.

    Parameters
    ----------
    dimension_numbers : (lhs, rhs, out) strings, None or ConvolutionDimensionNumbers
        Layout strings such as ``("NCHW", "OIHW", "NCHW")`` or ``("NHWC", "HWIO", "NHWC")``.
        In ``lhs`` and ``out``, ``N`` is the batch and ``C`` the feature dimension; in ``rhs``,
        ``O`` is the output and ``I`` the input feature dimension; any other letters are
        spatial. The kernel's spatial dimensions are taken in the order their letters appear in
        ``rhs``, and the input and output spatial dimensions are matched to them by letter
        (so all three strings must use the same spatial letters). None means ``NC`` + spatial,
        ``OI`` + spatial, ``NC`` + spatial.
    num_spatial_dimensions : int
        Number of spatial dimensions (each string has ``num_spatial_dimensions + 2`` letters).

    Raises
    ------
    ShapeError
        On a string of the wrong length, missing or repeated letters, spatial letters that
        differ between the strings, or an existing object with the wrong number of spatial
        dimensions.
    """
    nd = _dim(num_spatial_dimensions, "num_spatial_dimensions")
    if dimension_numbers is None:
        spatial = list(range(2, 2 + nd))
        return ConvolutionDimensionNumbers(
            input_batch_dimension=0,
            input_feature_dimension=1,
            input_spatial_dimensions=spatial,
            kernel_output_feature_dimension=0,
            kernel_input_feature_dimension=1,
            kernel_spatial_dimensions=spatial,
            output_batch_dimension=0,
            output_feature_dimension=1,
            output_spatial_dimensions=spatial,
        )
    if isinstance(dimension_numbers, ConvolutionDimensionNumbers):
        dimension_numbers.validate()
        if len(dimension_numbers.input_spatial_dimensions) != nd:
            raise ShapeError(
                f"ConvolutionDimensionNumbers has {len(dimension_numbers.input_spatial_dimensions)} spatial "
                f"dimensions, expected num_spatial_dimensions={nd}"
            )
        return dimension_numbers
    if isinstance(dimension_numbers, str) or not isinstance(dimension_numbers, Sequence):
        raise ShapeError(
            "convolution dimension_numbers must be (lhs, rhs, out) layout strings such as "
            f"('NCHW', 'OIHW', 'NCHW'), None or a ConvolutionDimensionNumbers, got {dimension_numbers!r}"
        )
    if len(dimension_numbers) != 3:
        raise ShapeError(
            "convolution dimension_numbers must be 3 layout strings (lhs, rhs, out), "
            f"got {dimension_numbers!r}"
        )
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    lhs, lhs_sp = _layout_positions(lhs_spec, "lhs", "NC", nd + 2)
    rhs, rhs_sp = _layout_positions(rhs_spec, "rhs", "OI", nd + 2)
    out, out_sp = _layout_positions(out_spec, "out", "NC", nd + 2)
    for what, spec, letters in (("lhs", lhs_spec, lhs_sp), ("out", out_spec, out_sp)):
        if set(letters) != set(rhs_sp):
            raise ShapeError(
                f"{what} layout {spec!r} has spatial letters {''.join(letters)!r} but rhs layout "
                f"{rhs_spec!r} has {''.join(rhs_sp)!r}; they must be the same letters"
            )
    return ConvolutionDimensionNumbers(
        input_batch_dimension=lhs["N"],
        input_feature_dimension=lhs["C"],
        input_spatial_dimensions=[lhs_spec.index(c) for c in rhs_sp],
        kernel_output_feature_dimension=rhs["O"],
        kernel_input_feature_dimension=rhs["I"],
        kernel_spatial_dimensions=[rhs_spec.index(c) for c in rhs_sp],
        output_batch_dimension=out["N"],
        output_feature_dimension=out["C"],
        output_spatial_dimensions=[out_spec.index(c) for c in rhs_sp],
    )


# --------------------------------------------------------------------------------------------
# Gather and scatter.


class _GatherScatterDimensionNumbers(_ProtoLike):
    """What Gather and Scatter dimension numbers share: six fields of the same roles under
    different names, checked the same way and printed as ``#stablehlo.<_MNEMONIC><...>``.

    A subclass lists its fields in ``_FIELDS`` in this order of roles: the window dimensions
    (ascending), the operand dimensions absent from the window (ascending), the operand dimension
    each index-vector component indexes, ``index_vector_dim``, the operand batching dimensions
    (ascending) and the batching dimensions of the indices.
    """

    _MNEMONIC: ClassVar[str]

    def validate(self) -> None:
        """Check the fields (they may have been edited in place); raises ShapeError."""
        window, dropped, index_map, ivd_name, op_batching, idx_batching = self._FIELDS
        _dims(getattr(self, window), window, sort=True)
        dropped_dims = _dims(getattr(self, dropped), dropped, sort=True)
        index_map_dims = _dims(getattr(self, index_map), index_map)
        ivd = _dim(getattr(self, ivd_name), ivd_name)
        op_batch = _dims(getattr(self, op_batching), op_batching, sort=True)
        idx_batch = _dims(getattr(self, idx_batching), idx_batching)
        _disjoint(dropped_dims, op_batch, dropped, op_batching)
        _disjoint(index_map_dims, op_batch, index_map, op_batching)
        if ivd in idx_batch:
            raise ShapeError(f"{idx_batching} {idx_batch} must not contain {ivd_name} {ivd}")
        _same_len(op_batch, idx_batch, op_batching, idx_batching)

    def to_mlir(self) -> str:
        """``#stablehlo.gather<...>`` / ``#stablehlo.scatter<...>``: the window, dropped and
        batching lists, the index map, then ``index_vector_dim = n`` (empty lists omitted)."""
        self.validate()
        window, dropped, index_map, ivd_name, op_batching, idx_batching = self._FIELDS
        lists = (window, dropped, op_batching, idx_batching, index_map)
        parts = [f"{k} = {_mlir_list(v)}" for k in lists if len(v := getattr(self, k))]
        parts.append(f"{ivd_name} = {_dim(getattr(self, ivd_name), ivd_name)}")
        return f"#stablehlo.{self._MNEMONIC}<" + ", ".join(parts) + ">"

    def to_hlo(self) -> str:
        """HLO's attributes: the window, dropped and index-map lists (always), the batching lists
        (when not empty), then ``index_vector_dim=n``."""
        self.validate()
        window, dropped, index_map, ivd_name, op_batching, idx_batching = self._FIELDS
        parts = [f"{k}={_hlo_list(getattr(self, k))}" for k in (window, dropped, index_map)]
        parts += [f"{k}={_hlo_list(v)}" for k in (op_batching, idx_batching) if len(v := getattr(self, k))]
        parts.append(f"{ivd_name}={_dim(getattr(self, ivd_name), ivd_name)}")
        return ", ".join(parts)


class GatherDimensionNumbers(_GatherScatterDimensionNumbers):
    """Dimension numbers of Gather (XLA ``GatherDimensionNumbers`` proto;
    StableHLO ``#stablehlo.gather<...>``).

    Attributes
    ----------
    offset_dims : list of int
        Output dimensions that index into a slice (ascending).
    collapsed_slice_dims : list of int
        Operand dimensions whose slice size is 1 and which are dropped (ascending).
    start_index_map : list of int
        Operand dimension each start-index component indexes.
    index_vector_dim : int
        Dimension of ``start_indices`` holding the index vectors.
    operand_batching_dims : list of int
        Operand batch dimensions (ascending), paired with ``start_indices_batching_dims``.
    start_indices_batching_dims : list of int
        Batch dimensions of ``start_indices``.

    Raises
    ------
    ShapeError
        On negative or repeated dimensions, unsorted lists that must be ascending, an operand
        dimension both collapsed / mapped and batching, ``index_vector_dim`` among the batching
        dimensions of the indices, or batching lists of unequal length.
    """

    _FIELDS = (
        "offset_dims",
        "collapsed_slice_dims",
        "start_index_map",
        "index_vector_dim",
        "operand_batching_dims",
        "start_indices_batching_dims",
    )
    _MNEMONIC = "gather"

    def __init__(
        self,
        offset_dims: Iterable[int] = (),
        collapsed_slice_dims: Iterable[int] = (),
        start_index_map: Iterable[int] = (),
        index_vector_dim: int = 0,
        operand_batching_dims: Iterable[int] = (),
        start_indices_batching_dims: Iterable[int] = (),
    ):
        self.offset_dims = _dims(offset_dims, "offset_dims")
        self.collapsed_slice_dims = _dims(collapsed_slice_dims, "collapsed_slice_dims")
        self.start_index_map = _dims(start_index_map, "start_index_map")
        self.index_vector_dim = _dim(index_vector_dim, "index_vector_dim")
        self.operand_batching_dims = _dims(operand_batching_dims, "operand_batching_dims")
        self.start_indices_batching_dims = _dims(start_indices_batching_dims, "start_indices_batching_dims")
        self.validate()


class ScatterDimensionNumbers(_GatherScatterDimensionNumbers):
    """Dimension numbers of Scatter (XLA ``ScatterDimensionNumbers`` proto;
    StableHLO ``#stablehlo.scatter<...>``).

    Attributes
    ----------
    update_window_dims : list of int
        Dimensions of ``updates`` that are window dimensions (ascending).
    inserted_window_dims : list of int
        Operand dimensions with window size 1 absent from ``updates`` (ascending).
    scatter_dims_to_operand_dims : list of int
        Operand dimension each scatter-index component indexes.
    index_vector_dim : int
        Dimension of ``scatter_indices`` holding the index vectors.
    input_batching_dims : list of int
        Operand batch dimensions (ascending), paired with ``scatter_indices_batching_dims``.
    scatter_indices_batching_dims : list of int
        Batch dimensions of ``scatter_indices``.

    Raises
    ------
    ShapeError
        The same checks as :class:`GatherDimensionNumbers`, on the scatter fields.
    """

    _FIELDS = (
        "update_window_dims",
        "inserted_window_dims",
        "scatter_dims_to_operand_dims",
        "index_vector_dim",
        "input_batching_dims",
        "scatter_indices_batching_dims",
    )
    _MNEMONIC = "scatter"

    def __init__(
        self,
        update_window_dims: Iterable[int] = (),
        inserted_window_dims: Iterable[int] = (),
        scatter_dims_to_operand_dims: Iterable[int] = (),
        index_vector_dim: int = 0,
        input_batching_dims: Iterable[int] = (),
        scatter_indices_batching_dims: Iterable[int] = (),
    ):
        self.update_window_dims = _dims(update_window_dims, "update_window_dims")
        self.inserted_window_dims = _dims(inserted_window_dims, "inserted_window_dims")
        self.scatter_dims_to_operand_dims = _dims(
            scatter_dims_to_operand_dims, "scatter_dims_to_operand_dims"
        )
        self.index_vector_dim = _dim(index_vector_dim, "index_vector_dim")
        self.input_batching_dims = _dims(input_batching_dims, "input_batching_dims")
        self.scatter_indices_batching_dims = _dims(
            scatter_indices_batching_dims, "scatter_indices_batching_dims"
        )
        self.validate()


# --------------------------------------------------------------------------------------------
# Padding.


class PaddingConfigDimension(_ProtoLike):
    """Padding of one dimension for Pad (XLA ``PaddingConfig.PaddingConfigDimension`` proto).

    Attributes
    ----------
    edge_padding_low, edge_padding_high : int
        Elements added before / after (negative values remove elements).
    interior_padding : int
        Elements inserted between each pair of elements, >= 0.

    Raises
    ------
    ShapeError
        On a non-int value or a negative ``interior_padding``.
    """

    _FIELDS = ("edge_padding_low", "edge_padding_high", "interior_padding")

    def __init__(self, edge_padding_low: int = 0, edge_padding_high: int = 0, interior_padding: int = 0):
        self.edge_padding_low = _int(edge_padding_low, "edge_padding_low")
        self.edge_padding_high = _int(edge_padding_high, "edge_padding_high")
        self.interior_padding = _dim(interior_padding, "interior_padding")

    def validate(self) -> tuple[int, int, int]:
        """``(low, high, interior)`` checked; raises ShapeError."""
        return (
            _int(self.edge_padding_low, "edge_padding_low"),
            _int(self.edge_padding_high, "edge_padding_high"),
            _dim(self.interior_padding, "interior_padding"),
        )


class PaddingConfig(_ProtoLike):
    """Padding of every dimension for Pad (XLA ``PaddingConfig`` proto).

    StableHLO has no single attribute for it: ``stablehlo.pad`` takes three ``array<i64: ...>``
    attributes, given by :meth:`to_mlir`.

    Attributes
    ----------
    dimensions : list of PaddingConfigDimension
        One entry per operand dimension; appendable.

    Raises
    ------
    ShapeError
        If an entry is not a ``PaddingConfigDimension`` or holds invalid values.
    """

    _FIELDS = ("dimensions",)

    def __init__(self, dimensions: Iterable[PaddingConfigDimension] | None = None):
        self.dimensions: list[PaddingConfigDimension] = list(dimensions if dimensions is not None else ())
        self.validate()

    def validate(self) -> list[tuple[int, int, int]]:
        """``(low, high, interior)`` per dimension, checked; raises ShapeError."""
        out = []
        for i, d in enumerate(self.dimensions):
            if not isinstance(d, PaddingConfigDimension):
                raise ShapeError(
                    f"PaddingConfig.dimensions[{i}] must be a PaddingConfigDimension, got {type(d).__name__}"
                )
            out.append(d.validate())
        return out

    def lows(self) -> list[int]:
        """``edge_padding_low`` of every dimension."""
        return [t[0] for t in self.validate()]

    def highs(self) -> list[int]:
        """``edge_padding_high`` of every dimension."""
        return [t[1] for t in self.validate()]

    def interiors(self) -> list[int]:
        """``interior_padding`` of every dimension."""
        return [t[2] for t in self.validate()]

    def to_mlir(self) -> str:
        """The three attribute-dictionary entries of ``stablehlo.pad``:
        ``edge_padding_low = array<i64: ...>, edge_padding_high = ..., interior_padding = ...``."""
        triples = self.validate()

        def arr(values: Iterable[int]) -> str:
            body = ", ".join(str(v) for v in values)
            return f"array<i64: {body}>" if body else "array<i64>"

        return (
            f"edge_padding_low = {arr(t[0] for t in triples)}, "
            f"edge_padding_high = {arr(t[1] for t in triples)}, "
            f"interior_padding = {arr(t[2] for t in triples)}"
        )


def make_padding_config(padding_config: PaddingConfig | Iterable[Sequence[int]]) -> PaddingConfig:
    """A ``PaddingConfig`` from ``(lo, hi, interior)`` triples or ``(lo, hi)`` pairs (interior 0).

    A ``PaddingConfig`` is returned as it is (after validation).

    Raises
    ------
    ShapeError
        If an entry is not a pair or triple of ints, or an interior padding is negative.
    """
    if isinstance(padding_config, PaddingConfig):
        padding_config.validate()
        return padding_config
    if isinstance(padding_config, (str, bytes)) or not isinstance(padding_config, Iterable):
        raise ShapeError(f"padding_config must be a sequence of (lo, hi[, interior]), got {padding_config!r}")
    dims: list[PaddingConfigDimension] = []
    for i, entry in enumerate(padding_config):
        if isinstance(entry, PaddingConfigDimension):
            dims.append(entry)
            continue
        if isinstance(entry, (str, bytes)) or not isinstance(entry, Iterable):
            raise ShapeError(f"padding_config[{i}] must be (lo, hi) or (lo, hi, interior), got {entry!r}")
        values = list(entry)
        if len(values) not in (2, 3):
            raise ShapeError(f"padding_config[{i}] must be (lo, hi) or (lo, hi, interior), got {entry!r}")
        dims.append(
            PaddingConfigDimension(*(_int(v, f"padding_config[{i}][{j}]") for j, v in enumerate(values)))
        )
    return PaddingConfig(dims)


def _spatial_ints(values: Any, what: str, minimum: int) -> list[int]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ShapeError(f"{what} must be a sequence of ints, got {values!r}")
    out = [_int(v, f"{what}[{i}]") for i, v in enumerate(values)]
    for i, v in enumerate(out):
        if v < minimum:
            raise ShapeError(f"{what}[{i}] must be >= {minimum}, got {v}")
    return out


def window_padding_type_to_pad_values(
    padding_type: PaddingType | str,
    lhs_dims: Sequence[int],
    rhs_dims: Sequence[int],
    window_strides: Sequence[int],
) -> list[tuple[int, int]]:
    """Explicit ``(lo, hi)`` padding per spatial dimension for a ``PaddingType``, as in XLA.

    ``SAME`` makes the output ``ceil(in / stride)`` long: the total padding is
    ``max((ceil(in / stride) - 1) * stride + window - in, 0)``, split as
    ``(total // 2, total - total // 2)`` (the extra element on the high side). ``VALID`` is all
    zeros.

    Parameters
    ----------
    padding_type : PaddingType or "SAME" / "VALID"
    lhs_dims : sequence of int
        Input sizes of the spatial dimensions.
    rhs_dims : sequence of int
        Window (kernel) sizes of the spatial dimensions.
    window_strides : sequence of int
        Strides, >= 1.

    Raises
    ------
    ShapeError
        On an unknown padding type, sequences of different lengths, negative sizes or strides < 1.
    """
    kind = PaddingType.parse(padding_type)
    ins = _spatial_ints(lhs_dims, "lhs_dims", 0)
    windows = _spatial_ints(rhs_dims, "rhs_dims", 0)
    strides = _spatial_ints(window_strides, "window_strides", 1)
    if not len(ins) == len(windows) == len(strides):
        raise ShapeError(
            f"lhs_dims {ins}, rhs_dims {windows} and window_strides {strides} must have the same length"
        )
    if kind is PaddingType.VALID:
        return [(0, 0)] * len(strides)
    pads = []
    for size, window, stride in zip(ins, windows, strides, strict=True):
        out_size = -(-size // stride)
        total = max((out_size - 1) * stride + window - size, 0)
        pads.append((total // 2, total - total // 2))
    return pads


def convert_padding(
    padding: PaddingType | str | Iterable[Iterable[int]],
    lhs_dims: Sequence[int],
    rhs_dims: Sequence[int],
    window_strides: Sequence[int],
) -> list[tuple[int, int]]:
    """``(lo, hi)`` per spatial dimension from a ``PaddingType``, ``"SAME"``/``"VALID"`` or pairs.

    Pairs may be negative (cropping). ``lhs_dims``, ``rhs_dims`` and ``window_strides`` are the
    spatial input sizes, window sizes and strides (see :func:`window_padding_type_to_pad_values`).

    Raises
    ------
    ShapeError
        On an unknown padding name, a number of pairs different from ``len(lhs_dims)``, or an
        entry that is not a pair of ints.
    """
    if isinstance(padding, (PaddingType, str)):
        return window_padding_type_to_pad_values(padding, lhs_dims, rhs_dims, window_strides)
    if not isinstance(padding, Iterable):
        raise ShapeError(
            f"padding must be 'SAME', 'VALID', a PaddingType or a sequence of (lo, hi), got {padding!r}"
        )
    pairs = []
    for i, entry in enumerate(padding):
        if isinstance(entry, (str, bytes)) or not isinstance(entry, Iterable):
            raise ShapeError(f"padding[{i}] must be a (lo, hi) pair of ints, got {entry!r}")
        values = list(entry)
        if len(values) != 2:
            raise ShapeError(f"padding[{i}] must be a (lo, hi) pair of ints, got {entry!r}")
        pairs.append((_int(values[0], f"padding[{i}][0]"), _int(values[1], f"padding[{i}][1]")))
    n = len(lhs_dims)
    if len(pairs) != n:
        raise ShapeError(f"padding has {len(pairs)} (lo, hi) pairs, expected one per spatial dimension ({n})")
    return pairs


# --------------------------------------------------------------------------------------------
# Sharding and replica groups.


class _ShardingType(enum.Enum):
    """Kind of an ``OpSharding`` (XLA ``OpSharding.Type``)."""

    REPLICATED = 0
    MAXIMAL = 1
    TUPLE = 2
    OTHER = 3
    MANUAL = 4
    UNKNOWN = 5
    UNREDUCED = 6


_ShardingType.__name__, _ShardingType.__qualname__ = "Type", "OpSharding.Type"


class OpSharding(_ProtoLike):
    """How an op's value is split over devices (XLA's ``OpSharding`` proto).

    Attributes
    ----------
    type : OpSharding.Type
        ``REPLICATED`` (every device holds all), ``MAXIMAL`` (one device, the first of
        ``tile_assignment_devices``), ``TUPLE`` (``tuple_shardings`` per element), ``OTHER``
        (tiled by ``tile_assignment_dimensions`` over ``tile_assignment_devices``), ``MANUAL``,
        ``UNKNOWN``, ``UNREDUCED``.
    tile_assignment_dimensions : list of int
        Number of tiles along each dimension (plus trailing subgroup dimensions if
        ``replicate_on_last_tile_dim`` or ``last_tile_dims``).
    tile_assignment_devices : list of int
        Device ids, row-major over ``tile_assignment_dimensions`` (empty with an iota).
    tuple_shardings : list of OpSharding
        Per-element shardings of a tuple.
    replicate_on_last_tile_dim : bool
        The last tile dimension replicates instead of splitting.
    last_tile_dims : list of OpSharding.Type
        Kinds of the trailing subgroup dimensions (``REPLICATED``, ``MANUAL``, ``UNREDUCED``).
    iota_reshape_dims, iota_transpose_perm : list of int
        The devices as an iota: ``arange(n).reshape(iota_reshape_dims).transpose(iota_transpose_perm)``.

    ``to_hlo_string()`` gives XLA's sharding text (``{devices=[2,1]0,1}``), which is what the
    ``mhlo.sharding`` attribute holds in StableHLO; :class:`xlasdk.HloSharding` parses that text
    (``xs.HloSharding.parse(text).to_op_sharding()``).
    """

    Type = _ShardingType
    _FIELDS = (
        "type",
        "tile_assignment_dimensions",
        "tile_assignment_devices",
        "tuple_shardings",
        "replicate_on_last_tile_dim",
        "last_tile_dims",
        "iota_reshape_dims",
        "iota_transpose_perm",
    )

    def __init__(
        self,
        type: _ShardingType | str = _ShardingType.REPLICATED,
        tile_assignment_dimensions: Iterable[int] = (),
        tile_assignment_devices: Iterable[int] = (),
        tuple_shardings: Iterable[OpSharding] = (),
        replicate_on_last_tile_dim: bool = False,
        last_tile_dims: Iterable[_ShardingType | str] = (),
        iota_reshape_dims: Iterable[int] = (),
        iota_transpose_perm: Iterable[int] = (),
    ):
        self.type: Any = _sharding_type(type)
        self.tile_assignment_dimensions = _spatial_ints(
            tile_assignment_dimensions, "tile_assignment_dimensions", 1
        )
        self.tile_assignment_devices = _spatial_ints(tile_assignment_devices, "tile_assignment_devices", 0)
        self.tuple_shardings: list[OpSharding] = list(tuple_shardings)
        self.replicate_on_last_tile_dim = bool(replicate_on_last_tile_dim)
        self.last_tile_dims: list[Any] = [_sharding_type(t) for t in last_tile_dims]
        self.iota_reshape_dims = _spatial_ints(iota_reshape_dims, "iota_reshape_dims", 1)
        self.iota_transpose_perm = _spatial_ints(iota_transpose_perm, "iota_transpose_perm", 0)

    def to_hlo_string(self) -> str:
        """XLA's sharding text: ``{replicated}``, ``{maximal device=0}``, ``{devices=[2,1]0,1}``,
        ``{manual}`` or ``{{...}, {...}}`` for a tuple.

        Raises
        ------
        ShapeError
            If the fields do not describe a valid sharding of their type.
        """
        from .sharding import HloSharding

        return HloSharding.from_op_sharding(self).to_hlo()

    def to_mlir(self) -> str:
        """The ``mhlo.sharding`` string attribute: ``"{devices=[2,1]0,1}"``."""
        return _mlir_str(self.to_hlo_string())

    def __str__(self) -> str:
        try:
            return self.to_hlo_string()
        except ShapeError:
            return repr(self)


def _sharding_type(value: Any) -> _ShardingType:
    if isinstance(value, _ShardingType):
        return value
    names = ", ".join(_ShardingType.__members__)
    if isinstance(value, str) and value.strip().upper() in _ShardingType.__members__:
        return _ShardingType[value.strip().upper()]
    if isinstance(value, int) and not isinstance(value, bool):
        for m in _ShardingType:
            if m.value == value:
                return m
    raise ShapeError(f"unknown OpSharding.Type {value!r}; expected one of {names}")


def make_replica_groups(replica_groups: Iterable[Iterable[int]] | None) -> list[list[int]]:
    """Replica groups for the collectives, as a list of lists of replica ids.

    ``None`` or an empty sequence means one group of every replica (returned as ``[]``).

    Raises
    ------
    ShapeError
        If a group is empty or not a sequence of ints >= 0, an id appears twice, or the groups
        have different sizes.
    """
    if replica_groups is None:
        return []
    if isinstance(replica_groups, (str, bytes)) or not isinstance(replica_groups, Iterable):
        raise ShapeError(f"replica_groups must be a sequence of sequences of ints, got {replica_groups!r}")
    groups = []
    for i, group in enumerate(replica_groups):
        if isinstance(group, (str, bytes)) or not isinstance(group, Iterable):
            raise ShapeError(f"replica_groups[{i}] must be a sequence of ints, got {group!r}")
        ids = [_dim(v, f"replica_groups[{i}][{j}]") for j, v in enumerate(group)]
        if not ids:
            raise ShapeError(f"replica_groups[{i}] is empty")
        groups.append(ids)
    seen: set[int] = set()
    for i, ids in enumerate(groups):
        if len(ids) != len(groups[0]):
            raise ShapeError(
                f"replica groups must all have the same size: group 0 has {len(groups[0])} ids, "
                f"group {i} has {len(ids)}"
            )
        repeated = sorted(seen.intersection(ids) | {v for v in ids if ids.count(v) > 1})
        if repeated:
            raise ShapeError(f"replica ids {repeated} appear more than once in replica_groups {groups}")
        seen.update(ids)
    return groups


def replica_groups_to_mlir(groups: Iterable[Iterable[int]] | None) -> str:
    """The ``replica_groups`` attribute: ``dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>``.

    No groups give ``dense<> : tensor<0x0xi64>``. Groups are validated by
    :func:`make_replica_groups` (ShapeError).
    """
    checked = make_replica_groups(groups)
    if not checked:
        return "dense<> : tensor<0x0xi64>"
    body = ", ".join(_mlir_list(g) for g in checked)
    return f"dense<[{body}]> : tensor<{len(checked)}x{len(checked[0])}xi64>"
