"""The proto-like base of xlasdk's attribute classes and the int checks their constructors share.

The classes of :mod:`xlasdk.attrs` (dimension numbers, padding, precision, metadata) and
:class:`xlasdk.sharding.OpSharding` mirror XLA's proto messages: fields given as keyword
arguments, list fields as plain mutable lists, ``==`` and ``repr`` over the fields. Both packages
build on this module, which imports nothing from xlasdk but :mod:`xlasdk.errors` (so neither
package imports the other to share it).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any, ClassVar

from .errors import ShapeError


def _int(value: Any, what: str) -> int:
    """``value`` as a Python int (numpy integers accepted, bools and floats refused)."""
    if isinstance(value, bool):
        raise ShapeError(f"{what} must be an int, got bool {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ShapeError(f"{what} must be an int, got {type(value).__name__} {value!r}") from None


def _int_list(values: Any, what: str, minimum: int) -> list[int]:
    """A list of ints, each ``>= minimum``."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ShapeError(f"{what} must be a sequence of ints, got {values!r}")
    out = [_int(v, f"{what}[{i}]") for i, v in enumerate(values)]
    for i, v in enumerate(out):
        if v < minimum:
            raise ShapeError(f"{what}[{i}] must be >= {minimum}, got {v}")
    return out


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
