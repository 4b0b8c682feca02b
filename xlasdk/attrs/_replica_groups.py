"""Replica groups and channel handles of the collectives (``replica_groups`` lists and their StableHLO
attribute; ``#stablehlo.channel_handle<...>``)."""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import ShapeError
from ._base import _dim, _mlir_list


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


class ChannelHandle:
    """``#stablehlo.channel_handle<handle = N, type = T>`` (type 1: device to device)."""

    __slots__ = ("handle", "type")

    def __init__(self, handle: int, type: int = 1) -> None:  # noqa: A002 - the field's name
        self.handle = handle
        self.type = type

    def to_mlir(self) -> str:
        return f"#stablehlo.channel_handle<handle = {self.handle}, type = {self.type}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChannelHandle) and (other.handle, other.type) == (self.handle, self.type)

    def __hash__(self) -> int:
        return hash((self.handle, self.type))

    def __repr__(self) -> str:
        return f"ChannelHandle({self.handle}, type={self.type})"
