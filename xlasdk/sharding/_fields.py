"""Argument checks and constants shared by the sharding modules (no HloSharding here)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

import numpy as np

from ..errors import DTypeError, ShapeError

# Subgroup kinds of ``last_tile_dims``, in the order XLA sorts them.
_SUBGROUP_ORDER: Final = {"manual": 0, "replicated": 1, "unreduced": 2}
_SIMPLE: Final = ("replicated", "manual", "unknown", "unreduced")
_MAX_DEVICES: Final = 1 << 20  # bound on tile assignments built here (XLA's own are far smaller)


def _int(v: Any, what: str, minimum: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise ShapeError(f"HloSharding: {what} must be an int, got {type(v).__name__} {v!r}")
    i = int(v)
    if i < minimum:
        raise ShapeError(f"HloSharding: {what} must be >= {minimum}, got {i}")
    return i


def _ints(values: Any, what: str, minimum: int) -> tuple[int, ...]:
    if isinstance(values, np.ndarray):
        values = values.reshape(-1).tolist()
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ShapeError(f"HloSharding: {what} must be a sequence of ints, got {values!r}")
    return tuple(_int(v, f"{what}[{i}]", minimum) for i, v in enumerate(values))

def _are(n: int) -> str:
    return "is 1 device" if n == 1 else f"are {n} devices"


def _dims_of(shape: Any) -> tuple[int, ...] | None:
    """The dimensions of an array ``xs.Shape`` or a sequence of ints; None for tuples/tokens."""
    if isinstance(shape, Sequence) and not isinstance(shape, (str, bytes)):
        return _ints(shape, "shape", 0)
    if hasattr(shape, "is_array"):
        return tuple(shape.dimensions()) if shape.is_array() else None
    raise DTypeError(f"expected an xs.Shape or a sequence of dimension sizes, got {type(shape).__name__}")


def _shape_text(shape: Any) -> str:
    if isinstance(shape, Sequence) and not isinstance(shape, (str, bytes)):
        return f"shape {list(shape)}"
    return str(shape)


def _subgroup_kinds(last_tile_dims: Sequence[str], replicate: bool) -> tuple[str, ...]:
    if isinstance(last_tile_dims, str) or not isinstance(last_tile_dims, Iterable):
        raise ShapeError(f"HloSharding: last_tile_dims must be a sequence of kinds, got {last_tile_dims!r}")
    kinds = []
    for k in last_tile_dims:
        name = getattr(k, "name", k)
        if not isinstance(name, str) or name.strip().lower() not in _SUBGROUP_ORDER:
            raise ShapeError(
                f"HloSharding: unknown last_tile_dims kind {k!r}; expected one of {', '.join(_SUBGROUP_ORDER)}"
            )
        kinds.append(name.strip().lower())
    if replicate:
        if kinds:
            raise ShapeError("HloSharding: give last_tile_dim_replicate or last_tile_dims, not both")
        kinds = ["replicated"]
    return tuple(kinds)

