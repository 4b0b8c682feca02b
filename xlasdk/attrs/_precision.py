"""``PrecisionConfig`` and ``ResultAccuracy``."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .._proto import _ProtoLike
from ..errors import ShapeError
from ._base import _AttrEnum, _dim, _mlir_float

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
