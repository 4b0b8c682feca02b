"""The checks of an :class:`~xlasdk.HloSharding` against devices and shapes, and where its tiles
fall: ``validate``, ``tile_shape``, ``device_tiles``, ``shard_slices``.

Split from :mod:`xlasdk.sharding._hlo_sharding`: each function here is that method of
:class:`~xlasdk.HloSharding` (assigned in its class body), so ``self`` is the sharding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ShapeError
from ._fields import _are, _dims_of, _int, _shape_text

if TYPE_CHECKING:
    from ..shape import Shape
    from ._hlo_sharding import HloSharding

__all__ = ["validate", "tile_shape", "device_tiles", "shard_slices"]


def validate(self: HloSharding, num_devices: int, shape: Shape | Sequence[int] | None = None) -> None:
    """Check that the sharding fits ``num_devices`` partitions (and ``shape``, if given).

    A tiled sharding must name every device ``0 .. num_devices - 1`` exactly once (XLA's
    rule: add ``last_tile_dim_replicate`` to replicate tiles over the rest), a maximal one a
    device below ``num_devices``; with ``shape``, a tiled sharding must have one tile
    dimension per array dimension (plus its subgroup dimensions) and a tuple sharding one
    element per tuple element.

    Parameters
    ----------
    num_devices:
        The number of partitions (``CompileOptions.num_partitions``).
    shape:
        An ``xs.Shape`` or the array's dimensions.

    Raises
    ------
    ShapeError
        Naming the sharding, what does not fit, and what would.
    """
    n = _int(num_devices, "num_devices", 1)
    if self._kind == "tuple":
        elem_shapes: Sequence[Any] | None = None
        if shape is not None and not isinstance(shape, Sequence):
            if not shape.is_tuple():
                raise ShapeError(f"sharding {self} is a tuple sharding, but the value has shape {shape}")
            elem_shapes = shape.tuple_shapes()
            if len(elem_shapes) != len(self._elements):
                raise ShapeError(
                    f"tuple sharding {self} has {len(self._elements)} elements, but the value {shape} has "
                    f"{len(elem_shapes)}"
                )
        for i, e in enumerate(self._elements):
            e.validate(n, None if elem_shapes is None else elem_shapes[i])
        return
    if self._kind == "maximal":
        if self._device >= n:
            raise ShapeError(
                f"sharding {self} names device {self._device}, but there {_are(n)} (0..{n - 1})"
            )
    elif self._kind == "tiled":
        devs = self.tile_assignment_devices
        bad = max(devs)
        if bad >= n:
            raise ShapeError(f"sharding {self} names device {bad}, but there {_are(n)} (0..{n - 1})")
        if len(devs) != n:
            hint = ""
            if n % len(devs) == 0 and not self._subgroups:
                tiles = ",".join(map(str, (*self._dims, n // len(devs))))
                hint = (f"; to replicate each tile over {n // len(devs)} devices write "
                        f"{{devices=[{tiles}]<=[{n}] last_tile_dim_replicate}}")
            raise ShapeError(
                f"sharding {self} tiles over {len(devs)} device{'s' if len(devs) != 1 else ''}, but there "
                f"{_are(n)}: XLA needs every device in the tile assignment{hint}"
            )
    if shape is None:
        return
    dims = _dims_of(shape)
    if dims is None:
        if self._kind == "tiled":
            raise ShapeError(f"sharding {self} tiles an array, but the value has shape {shape}")
        return
    if self._kind == "tiled" and self.tiled_data_rank != len(dims):
        raise ShapeError(
            f"sharding {self} splits {self.tiled_data_rank} dimension{'s' if self.tiled_data_rank != 1 else ''}"
            f", but {_shape_text(shape)} has rank {len(dims)}"
        )


def tile_shape(self: HloSharding, shape: Shape | Sequence[int]) -> tuple[int, ...]:
    """The dimensions of one device's piece of an array of ``shape``.

    Each tiled dimension is divided by its tile count, rounded up (XLA pads the last tiles
    of a dimension that does not divide evenly); other kinds keep the whole shape (a
    ``{manual}`` value is already per device).

    Raises
    ------
    ShapeError
        For a tuple sharding, or a tiled sharding of another rank.
    """
    dims = _dims_of(shape)
    if dims is None or self._kind == "tuple":
        raise ShapeError(f"tile_shape: sharding {self} of {_shape_text(shape)}: expected an array and a "
                         "non-tuple sharding")
    if self._kind != "tiled":
        return dims
    counts = self.tile_counts
    if len(counts) != len(dims):
        raise ShapeError(f"tile_shape: sharding {self} splits {len(counts)} dimensions, but "
                         f"{_shape_text(shape)} has rank {len(dims)}")
    return tuple(-(-d // c) for d, c in zip(dims, counts, strict=True))


def device_tiles(self: HloSharding, num_devices: int) -> list[tuple[int, ...] | None]:
    """For each device ``0 .. num_devices - 1``, the index of the tile it holds (one entry
    per array dimension), or None where the device holds no data (the other devices of a
    maximal sharding). Replicated, manual and unknown shardings give every device the
    single tile ``()``.

    Raises
    ------
    ShapeError
        If the sharding does not fit ``num_devices`` (see :meth:`validate`) or is a tuple.
    """
    if self._kind == "tuple":
        raise ShapeError(f"device_tiles: {self} is a tuple sharding; take one of its tuple_elements")
    self.validate(num_devices)
    if self._kind == "maximal":
        return [() if d == self._device else None for d in range(num_devices)]
    if self._kind != "tiled":
        return [() for _ in range(num_devices)]
    out: list[tuple[int, ...] | None] = [None] * num_devices
    rank = self.tiled_data_rank
    for index, dev in np.ndenumerate(self._assignment()):
        out[int(dev)] = tuple(int(i) for i in index[:rank])
    return out


def shard_slices(self: HloSharding, shape: Shape | Sequence[int], num_devices: int) -> list[tuple[slice, ...] | None]:
    """For each device, the part of a global array of ``shape`` it holds, as slices (clipped
    to the array: the last tiles of an unevenly divided dimension are shorter, or empty,
    and XLA pads them to :meth:`tile_shape`). None for a device that holds nothing.

    Raises
    ------
    ShapeError
        As :meth:`validate` with ``shape``; for a ``{manual}`` sharding, which has no global
        array.
    """
    dims = _dims_of(shape)
    if dims is None:
        raise ShapeError(f"shard_slices: {_shape_text(shape)} is not an array shape")
    if self._kind in ("manual", "unreduced"):
        raise ShapeError(f"a {{{self._kind}}} sharding has no global array to slice: pass one value per device")
    self.validate(num_devices, dims)
    tile = self.tile_shape(dims)
    out: list[tuple[slice, ...] | None] = []
    for index in self.device_tiles(num_devices):
        if index is None:
            out.append(None)
        elif not index:
            out.append(tuple(slice(0, d) for d in dims))
        else:
            out.append(tuple(slice(min(i * t, d), min((i + 1) * t, d)) for i, t, d in zip(index, tile, dims,
                                                                                           strict=True)))
    return out
