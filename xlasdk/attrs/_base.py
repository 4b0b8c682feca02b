"""Shared pieces of the attribute classes: validators, MLIR/HLO list printers and the enum base
(the proto-like base and the int check are :mod:`xlasdk._proto`'s, shared with
:class:`xlasdk.sharding.OpSharding`)."""

from __future__ import annotations

import enum
import operator
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from .._proto import _int
from ..errors import ShapeError

_E = TypeVar("_E", bound="_AttrEnum")
# --------------------------------------------------------------------------------------------
# Small validators shared by every class.


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
