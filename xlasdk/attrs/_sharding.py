"""``OpSharding`` and replica groups."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

from ..errors import ShapeError
from ._base import _dim, _mlir_list, _ProtoLike
from ._metadata import _mlir_str
from ._padding import _spatial_ints

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
        from ..sharding import HloSharding

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
