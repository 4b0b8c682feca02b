"""Collectives across replicas and partitions: ``AllReduce``, ``AllGather``, ``ReduceScatter``,
``AllToAll``, ``CollectivePermute``, ``CrossReplicaSum``, ``ReplicaId``, ``PartitionId``.

Each wrapper sits beside its shape rule (plain functions of dimensions and attributes). Replica
groups are lists of lists of replica ids (``[[0, 1], [2, 3]]``; ``None`` or ``[]`` means one group
of every replica); they must hold each id ``0..N-1`` exactly once, in groups of equal size. Replica
ids (also in ``CollectivePermute`` pairs) are below 2**20 and ``shard_count`` / ``split_count`` at
most 2**20: xlasdk writes every id of the groups into the module.

A computation using collectives runs on several devices when compiled with ``num_replicas``
(or ``num_partitions``); on one device each collective sees a single participant (AllReduce,
AllGather with ``shard_count=1``, ReduceScatter with ``shard_count=1`` and AllToAll with
``split_count=1`` are the identity, ReplicaId and PartitionId are 0).
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._mlir_attrs import UNIT, I64Elements
from .._optable import AttrKind, HloForm, HloUnsupported, define
from ..attrs import ChannelHandle as ChannelHandle  # defined in attrs since issue 34; its old home keeps the name
from ..attrs import make_replica_groups
from ..builder import Region, XlaBuilder, XlaOp
from ..errors import ShapeError
from ..shape import Layout, Shape
from ..types import PrimitiveType
from ._core import (
    MAX_PARTICIPANTS,
    ChannelIdLike,
    ComputationLike,
    LayoutLike,
    array_shape,
    dtype_error,
    int_arg,
    int_tuples,
    shape_error,
    show,
    subcomputation,
    tuple_element,
)
from ._core import (
    operand as _operand,
)

__all__ = [
    "AllGather",
    "AllReduce",
    "AllToAll",
    "CollectivePermute",
    "CrossReplicaSum",
    "PartitionId",
    "ReduceScatter",
    "ReplicaId",
]


# -- the op table rows of this family, with their HLO spelling ------------------------------------

def _groups_hlo(groups: I64Elements) -> str:
    """``{{0,1},{2,3}}`` (``{}`` for none)."""
    return "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in groups.values.tolist()) + "}"


def _collective_hlo(o: XlaOp) -> str:
    """``replica_groups={{..}}, dimensions={d}, channel_id=n, use_global_device_ids=true`` & co."""
    a = o.attrs
    if o.shape._tuple is not None:  # a variadic collective: XLA's converter writes it
        raise HloUnsupported("variadic collective")
    d = o.opdef
    if d is COLLECTIVE_PERMUTE:
        extra = ", source_target_pairs=" + _groups_hlo(a["source_target_pairs"])
    else:
        extra = ", replica_groups=" + _groups_hlo(a["replica_groups"])
    if d is ALL_GATHER:
        extra += f", dimensions={{{a['all_gather_dim']}}}"
    elif d is REDUCE_SCATTER:
        extra += f", dimensions={{{a['scatter_dimension']}}}"
    elif d is ALL_TO_ALL:
        if a["split_dimension"] != a["concat_dimension"]:  # HLO's array all-to-all uses one dimension
            raise HloUnsupported("all-to-all over two dimensions")
        extra += f", dimensions={{{a['split_dimension']}}}"
    if "channel_handle" in a:
        extra += f", channel_id={a['channel_handle'].handle}"
    if "use_global_device_ids" in a:
        extra += ", use_global_device_ids=true"
    return extra


# -- attribute helpers ----------------------------------------------------------------------------

def _int(op: str, name: str, value: Any) -> int:
    return int_arg(op, name, value)


def _replica_groups(op: str, replica_groups: Any) -> list[list[int]]:
    """Checked groups (``[]`` for "all replicas"): equal sizes, each id 0..N-1 exactly once, ids
    below :data:`~xlasdk.ops._core.MAX_PARTICIPANTS`."""
    if replica_groups is not None:  # ints checked here, the group structure by make_replica_groups
        replica_groups = int_tuples(op, "replica_groups", replica_groups, "a sequence of replica ids")
    try:
        groups = make_replica_groups(replica_groups)
    except ShapeError as e:
        shape_error(op, str(e))
    ids = sorted(i for g in groups for i in g)
    if ids and ids[-1] >= MAX_PARTICIPANTS:
        shape_error(op, f"replica_groups hold the id {ids[-1]}; replica ids must be < 2**20")
    if ids != list(range(len(ids))):
        have = set(ids)
        missing = [i for i in range(ids[-1]) if i not in have][:10]  # ids[-1] < 2**20
        shape_error(
            op,
            f"replica_groups {show(groups)} must hold each replica id 0..{len(ids) - 1} exactly once "
            f"(missing {missing})",
        )
    return groups


def _groups_attr(groups: Sequence[Sequence[int]]) -> I64Elements:
    """``replica_groups`` (``(0, 0)`` for "all replicas")."""
    if not groups:
        return I64Elements(np.zeros((0, 0), dtype=np.int64))
    return I64Elements(groups)


def _channel(
    op: str, channel_id: Any, use_global_device_ids: Any = None, groups: Sequence[Sequence[int]] = ()
) -> dict[str, Any]:
    """Attribute parts for ``channel_id`` (an int >= 1 or an object with ``.handle``) and
    ``use_global_device_ids`` (which needs a channel and explicit ``groups``)."""
    parts: dict[str, Any] = {}
    if channel_id is not None:
        handle = getattr(channel_id, "handle", channel_id) if not isinstance(channel_id, XlaOp) else channel_id
        h = _int(op, "channel_id", handle)
        if h < 1:
            shape_error(op, f"channel_id must be >= 1, got {h}")
        parts["channel_handle"] = ChannelHandle(h)
    if use_global_device_ids is not None and not isinstance(use_global_device_ids, (bool, np.bool_)):
        dtype_error(op, f"use_global_device_ids must be a bool or None, got {show(use_global_device_ids)}")
    if use_global_device_ids:
        if channel_id is None:
            shape_error(
                op, "use_global_device_ids=True needs a channel_id (replica groups then hold global device ids)"
            )
        if not groups:
            shape_error(op, "use_global_device_ids=True needs explicit replica_groups (of global device ids)")
        parts["use_global_device_ids"] = UNIT
    return parts


def _check_layout(op: str, name: str, layout: Any, result: Shape) -> None:
    """Accept ``layout`` (a Shape, a Layout or a minor_to_major sequence) when it agrees with
    ``result`` and is the default row-major layout: StableHLO collectives carry no layout."""
    if layout is None:
        return
    if isinstance(layout, Shape):
        if not layout.is_array():
            shape_error(op, f"{name} must be an array shape, got {layout}")
        if layout.element_type() is not result.element_type() or layout.dimensions() != result.dimensions():
            shape_error(op, f"{name} is {layout}, but the result is {result}")
        lay = layout.layout()
        m2m = None if lay is None else lay.minor_to_major()
    elif isinstance(layout, Layout):
        m2m = layout.minor_to_major()
    else:
        try:
            m2m = tuple(_int(op, name, v) for v in layout)
        except TypeError:
            shape_error(op, f"{name} must be a Shape, a Layout or a minor_to_major sequence, got {show(layout)}")
    default = tuple(range(result.rank() - 1, -1, -1))
    if m2m is not None and tuple(m2m) != default:
        shape_error(
            op,
            f"{name} asks for layout {{{','.join(map(str, m2m))}}}, but only the default layout "
            f"{{{','.join(map(str, default))}}} of {result} can be expressed (StableHLO collectives carry no layout)",
        )


def _dim(op: str, name: str, value: Any, rank: int, shape: Shape) -> int:
    d = _int(op, name, value)
    if not 0 <= d < rank:
        shape_error(op, f"{name} {d} is out of range for operand 'operand' of shape {shape} (rank {rank})")
    return d


def _count(op: str, name: str, value: Any) -> int:
    """A participant count: an int in ``[1, 2**20]`` (xlasdk writes that many ids into the groups)."""
    n = _int(op, name, value)
    if n < 1:
        shape_error(op, f"{name} must be >= 1, got {n}")
    if n > MAX_PARTICIPANTS:
        shape_error(op, f"{name} must be <= 2**20 (the most participants xlasdk writes into replica groups), got {n}")
    return n


def _implicit_groups(op: str, groups: list[list[int]], count: int, count_name: str, channel_id: Any) -> list[list[int]]:
    """Explicit groups must have ``count`` members. Without groups and without a channel (cross-
    replica mode) every replica takes part, so ``count`` replicas: say so explicitly, which lets
    XLA reject a replica count that differs instead of computing on missing shards."""
    if groups:
        if len(groups[0]) != count:
            shape_error(op, f"{count_name} is {count}, but replica_groups {groups} have {len(groups[0])} members each")
        return groups
    if channel_id is None:
        return [list(range(count))]
    return groups


def _reducer(op: str, computation: Any, etype: PrimitiveType, builder: XlaBuilder) -> Region:
    """Region of a binary scalar reducer ``(T, T) -> T``."""
    scalar = Shape._make(etype, ())
    region, results = subcomputation(op, "computation", computation, [scalar, scalar], builder)
    flat: list[Shape] = []
    for r in results:
        flat.extend(r.tuple_shapes() if r.is_tuple() else [r])
    if flat != [scalar]:
        shape_error(
            op, f"computation returns ({', '.join(map(str, flat))}) but must return one {scalar} (the reduction of "
            "its two arguments)"
        )
    return region


# -- shape rules ----------------------------------------------------------------------------------

def all_gather_shape(dims: Sequence[int], all_gather_dimension: int, shard_count: int) -> tuple[int, ...]:
    """AllGather: the gather dimension is multiplied by ``shard_count``."""
    out = list(dims)
    out[all_gather_dimension] *= shard_count
    return tuple(out)


# The attributes every grouped collective declares (beside its own).
_GROUP_ATTRS = {
    "replica_groups": AttrKind.REPLICA_GROUPS, "channel_handle": AttrKind.CHANNEL_HANDLE,
    "use_global_device_ids": AttrKind.UNIT,
}

ALL_GATHER = define(
    "stablehlo.all_gather", "all-gather", hlo_attrs=_collective_hlo, constant=False, rule=all_gather_shape,
    attrs={"all_gather_dim": AttrKind.INT, **_GROUP_ATTRS},
)


def reduce_scatter_shape(op: str, shape: Shape, scatter_dimension: int, shard_count: int) -> tuple[int, ...]:
    """ReduceScatter: the scatter dimension is divided by ``shard_count`` (must divide evenly)."""
    out = list(shape.dimensions())
    if out[scatter_dimension] == 0:
        shape_error(
            op, f"operand 'operand' has shape {shape}: scatter_dimension {scatter_dimension} must not have size 0"
        )
    if out[scatter_dimension] % shard_count:
        shape_error(
            op, f"operand 'operand' has shape {shape}: dimension {scatter_dimension} (size "
            f"{out[scatter_dimension]}) is not divisible by shard_count {shard_count}"
        )
    out[scatter_dimension] //= shard_count
    return tuple(out)


REDUCE_SCATTER = define(
    "stablehlo.reduce_scatter", "reduce-scatter", hlo_form=HloForm.REGION, hlo_attrs=_collective_hlo, constant=False,
    rule=reduce_scatter_shape, attrs={"scatter_dimension": AttrKind.INT, **_GROUP_ATTRS},
)


def all_to_all_shape(
    op: str, shape: Shape, split_dimension: int, concat_dimension: int, split_count: int
) -> tuple[int, ...]:
    """AllToAll: the split dimension is divided by ``split_count`` (must divide evenly), the
    concat dimension multiplied by it."""
    out = list(shape.dimensions())
    if out[split_dimension] % split_count:
        shape_error(
            op, f"operand 'operand' has shape {shape}: split dimension {split_dimension} (size "
            f"{out[split_dimension]}) is not divisible by split_count {split_count}"
        )
    out[split_dimension] //= split_count
    out[concat_dimension] *= split_count
    return tuple(out)


ALL_TO_ALL = define(
    "stablehlo.all_to_all", "all-to-all", hlo_attrs=_collective_hlo, constant=False, rule=all_to_all_shape,
    attrs={
        "split_dimension": AttrKind.INT, "concat_dimension": AttrKind.INT, "split_count": AttrKind.INT,
        "replica_groups": AttrKind.REPLICA_GROUPS, "channel_handle": AttrKind.CHANNEL_HANDLE,
    },
)


def all_reduce_shape(op: str, operand: Shape) -> Shape:
    """AllReduce: the operand's shape, an array or a flat tuple of arrays of one element type
    (ShapeError otherwise)."""
    if operand.is_tuple():
        elems = operand.tuple_shapes()
        if not elems or not all(e.is_array() for e in elems):
            shape_error(op, f"operand 'operand' must be an array or a flat tuple of arrays, got {operand}")
        if any(e.element_type() is not elems[0].element_type() for e in elems):
            shape_error(op, f"operand 'operand' is the tuple {operand}: its elements must share one element type")
    elif not operand.is_array():
        shape_error(op, f"operand 'operand' must be an array, got {operand}")
    return operand


ALL_REDUCE = define(
    "stablehlo.all_reduce", "all-reduce", hlo_form=HloForm.REGION, hlo_attrs=_collective_hlo, constant=False,
    rule=all_reduce_shape, attrs={**_GROUP_ATTRS},
)


def _pair_check(op: str, i: int, source: int, target: int) -> None:
    if not (0 <= source < MAX_PARTICIPANTS and 0 <= target < MAX_PARTICIPANTS):
        shape_error(op, f"source_target_pairs[{i}] = ({source}, {target}): replica ids must be >= 0 and < 2**20")


def collective_permute_shape(op: str, operand: Shape, source_target_pairs: Sequence[tuple[int, int]]) -> Shape:
    """CollectivePermute: the operand's shape; ShapeError for a replica id out of ``[0, 2**20)``
    or a source or target repeated."""
    pairs = list(source_target_pairs)
    for i, (s, t) in enumerate(pairs):
        _pair_check(op, i, s, t)
    for k, what in ((0, "source"), (1, "target")):
        counts = collections.Counter(p[k] for p in pairs)
        dup = sorted(v for v, c in counts.items() if c > 1)
        if dup:
            shape_error(op, f"{what} replica ids {dup} appear more than once in source_target_pairs {pairs}")
    return operand


COLLECTIVE_PERMUTE = define(
    "stablehlo.collective_permute", "collective-permute", hlo_attrs=_collective_hlo, constant=False,
    rule=collective_permute_shape,
    attrs={"source_target_pairs": AttrKind.I64_ELEMENTS, "channel_handle": AttrKind.CHANNEL_HANDLE},
)


# -- ops ------------------------------------------------------------------------------------------

def AllReduce(
    operand: XlaOp,
    computation: ComputationLike,
    replica_groups: Sequence[Sequence[int]] | None = None,
    channel_id: ChannelIdLike | None = None,
    shape_with_layout: Shape | None = None,
    use_global_device_ids: bool | None = None,
) -> XlaOp:
    """Reduce ``operand`` element-wise across the replicas of each group; every member gets the
    result (XLA ``AllReduce``; ``stablehlo.all_reduce``).

    Parameters
    ----------
    operand: array of any shape ``(d0, ..., dn)`` and element type ``T``, or a flat tuple of such
        arrays sharing one element type (each element is reduced; the result is a tuple).
    computation: binary reducer ``(T[], T[]) -> T[]`` (an XlaComputation or a Python callable,
        e.g. ``ops.Add``). The combination order is unspecified: use an associative and
        commutative reducer.
    replica_groups: lists of replica ids reduced together, e.g. ``[[0, 1], [2, 3]]``; ``None``
        (default) reduces across all replicas.
    channel_id: int >= 1 (or an object with ``.handle``): makes the reduction cross-partition
        (across replicas and partitions; with ``use_global_device_ids`` groups hold global
        device ids).
    shape_with_layout: optional Shape equal to the result (only the default layout is
        expressible).
    use_global_device_ids: interpret ``replica_groups`` as global device ids (needs
        ``channel_id`` and explicit ``replica_groups``).

    Returns
    -------
    XlaOp of ``operand``'s shape. With one participant (a single device) it equals ``operand``.

    Raises
    ------
    ShapeError: bad replica groups, a reducer of the wrong signature, a tuple with mixed
    element types or nested tuples, ``use_global_device_ids`` without ``channel_id`` or
    without groups, or a
    ``shape_with_layout`` that differs from the result. DTypeError: ``operand`` is not an XlaOp.
    """
    op = "AllReduce"
    if isinstance(operand, XlaOp) and operand.shape.is_tuple():
        result = all_reduce_shape(op, operand.shape)
        xs = [tuple_element(operand, i) for i in range(len(result.tuple_shapes()))]
    else:
        xs = [_operand(op, "operand", operand)]
        result = all_reduce_shape(op, xs[0].shape)
    b = xs[0].builder
    groups = _replica_groups(op, replica_groups)
    parts = {"replica_groups": _groups_attr(groups), **_channel(op, channel_id, use_global_device_ids, groups)}
    if shape_with_layout is not None:
        if result.is_tuple():
            if not isinstance(shape_with_layout, Shape) or shape_with_layout != result:
                shape_error(op, f"shape_with_layout is {shape_with_layout}, but the result is {result}")
        else:
            _check_layout(op, "shape_with_layout", shape_with_layout, result)
    region = _reducer(op, computation, xs[0].shape.element_type(), b)
    return b.add_op(ALL_REDUCE, tuple(xs), result, parts, (region,))


def CrossReplicaSum(operand: XlaOp, replica_groups: Sequence[Sequence[int]] | None = None) -> XlaOp:
    """Sum ``operand`` across the replicas of each group (XLA ``CrossReplicaSum``): an
    :func:`AllReduce` with ``Add`` as the reducer (logical or for ``pred``).

    Parameters
    ----------
    operand: array ``(d0, ..., dn)`` of any element type.
    replica_groups: as for :func:`AllReduce` (``None``: all replicas).

    Returns
    -------
    XlaOp of ``operand``'s shape (``operand`` itself on a single device).

    Raises
    ------
    ShapeError: bad replica groups. DTypeError: ``operand`` is not an XlaOp.
    """
    from .elementwise import Add

    x = _operand("CrossReplicaSum", "operand", operand)
    groups = _replica_groups("CrossReplicaSum", replica_groups)
    region = _reducer("CrossReplicaSum", Add, x.shape.element_type(), x.builder)
    return x.builder.add_op(ALL_REDUCE, (x,), x.shape, {"replica_groups": _groups_attr(groups)}, (region,))


def AllGather(
    operand: XlaOp,
    all_gather_dimension: int,
    shard_count: int,
    replica_groups: Sequence[Sequence[int]] | None = None,
    channel_id: ChannelIdLike | None = None,
    shape_with_layout: Shape | None = None,
    use_global_device_ids: bool | None = None,
) -> XlaOp:
    """Concatenate the operands of the ``shard_count`` members of each group along
    ``all_gather_dimension``, in group order (XLA ``AllGather``; ``stablehlo.all_gather``).

    Parameters
    ----------
    operand: array ``(d0, ..., dn)`` of any element type.
    all_gather_dimension: the dimension ``k`` to concatenate along (``0 <= k <= n``).
    shard_count: number of participants per group (1 to 2**20). With explicit ``replica_groups`` it
        must equal the group size; without groups and without ``channel_id`` the computation
        must be compiled with ``shard_count`` replicas (the groups are emitted as
        ``[[0, ..., shard_count-1]]``).
    replica_groups: lists of replica ids, e.g. ``[[0, 1], [2, 3]]``; ``None``: all replicas.
    channel_id: int >= 1: gather across replicas and partitions.
    shape_with_layout: optional Shape equal to the result (default layout only).
    use_global_device_ids: groups hold global device ids (needs ``channel_id`` and groups).

    Returns
    -------
    XlaOp of shape ``operand.dims`` with ``d_k * shard_count`` at ``k``; ``operand`` itself for
    ``shard_count=1``.

    Raises
    ------
    ShapeError: dimension out of range or of size 0, ``shard_count < 1`` or different from the
    group size, bad replica groups, ``use_global_device_ids`` without ``channel_id`` or groups,
    or a mismatching ``shape_with_layout``. DTypeError: ``operand`` is not an XlaOp.
    """
    op = "AllGather"
    x = _operand(op, "operand", operand)
    dim = _dim(op, "all_gather_dimension", all_gather_dimension, x.shape.rank(), x.shape)
    n = _count(op, "shard_count", shard_count)
    groups = _implicit_groups(op, _replica_groups(op, replica_groups), n, "shard_count", channel_id)
    channel = _channel(op, channel_id, use_global_device_ids, groups)
    if x.shape.dimensions()[dim] == 0:
        shape_error(op, f"operand 'operand' has shape {x.shape}: all_gather_dimension {dim} must not have size 0")
    result = array_shape(x.shape.element_type(), all_gather_shape(x.shape.dimensions(), dim, n), op)
    _check_layout(op, "shape_with_layout", shape_with_layout, result)
    attrs = {"all_gather_dim": dim, "replica_groups": _groups_attr(groups), **channel}
    return x.builder.add_op(ALL_GATHER, (x,), result, attrs)


def ReduceScatter(
    operand: XlaOp,
    computation: ComputationLike,
    scatter_dimension: int,
    shard_count: int,
    replica_groups: Sequence[Sequence[int]] | None = None,
    channel_id: ChannelIdLike | None = None,
    layout: LayoutLike | None = None,
    use_global_device_ids: bool | None = None,
) -> XlaOp:
    """Reduce ``operand`` across each group like :func:`AllReduce`, then split the result into
    ``shard_count`` blocks along ``scatter_dimension``; member ``i`` of a group gets block ``i``
    (XLA ``ReduceScatter``; ``stablehlo.reduce_scatter``).

    Parameters
    ----------
    operand: array ``(d0, ..., dn)`` of element type ``T``; ``d_k`` must be divisible by
        ``shard_count``.
    computation: binary reducer ``(T[], T[]) -> T[]`` (XlaComputation or callable).
    scatter_dimension: the dimension ``k`` to split.
    shard_count: participants per group (1 to 2**20); equals the group size with explicit
        ``replica_groups``; without groups and ``channel_id`` the computation must run on
        ``shard_count`` replicas (groups are emitted as ``[[0, ..., shard_count-1]]``).
    replica_groups, channel_id, use_global_device_ids: as for :func:`AllReduce`.
    layout: optional Layout / Shape / minor_to_major of the result (default layout only).

    Returns
    -------
    XlaOp of shape ``operand.dims`` with ``d_k / shard_count`` at ``k`` (``operand`` itself for
    ``shard_count=1`` on one device).

    Raises
    ------
    ShapeError: dimension out of range, ``d_k`` zero or not divisible by ``shard_count``, a group size
    different from ``shard_count``, bad replica groups or reducer, or a non-default layout.
    DTypeError: ``operand`` is not an XlaOp.
    """
    op = "ReduceScatter"
    x = _operand(op, "operand", operand)
    dim = _dim(op, "scatter_dimension", scatter_dimension, x.shape.rank(), x.shape)
    n = _count(op, "shard_count", shard_count)
    groups = _implicit_groups(op, _replica_groups(op, replica_groups), n, "shard_count", channel_id)
    channel = _channel(op, channel_id, use_global_device_ids, groups)
    result = array_shape(x.shape.element_type(), reduce_scatter_shape(op, x.shape, dim, n), op)
    _check_layout(op, "layout", layout, result)
    region = _reducer(op, computation, x.shape.element_type(), x.builder)
    attrs = {"scatter_dimension": dim, "replica_groups": _groups_attr(groups), **channel}
    return x.builder.add_op(REDUCE_SCATTER, (x,), result, attrs, (region,))


def AllToAll(
    operand: XlaOp,
    split_dimension: int,
    concat_dimension: int,
    split_count: int,
    replica_groups: Sequence[Sequence[int]] | None = None,
    layout: LayoutLike | None = None,
    channel_id: ChannelIdLike | None = None,
) -> XlaOp:
    """Split ``operand`` into ``split_count`` blocks along ``split_dimension``, send block ``i``
    to member ``i`` of the group, and concatenate the received blocks along
    ``concat_dimension`` in group order (XLA ``AllToAll``; ``stablehlo.all_to_all``).

    Parameters
    ----------
    operand: array ``(d0, ..., dn)`` of any element type; ``d_split`` divisible by
        ``split_count``.
    split_dimension, concat_dimension: dimension numbers (may be equal).
    split_count: participants per group (1 to 2**20). With explicit ``replica_groups`` it must equal
        the group size; without groups the groups are emitted as
        ``[[0, ..., split_count-1]]`` (StableHLO needs explicit groups), so the computation
        must run on ``split_count`` replicas.
    replica_groups: lists of replica ids; ``None``: all replicas.
    layout: optional Layout / Shape / minor_to_major of the result (default layout only).
    channel_id: int >= 1 for a cross-partition exchange.

    Returns
    -------
    XlaOp of shape ``operand.dims`` with ``d_split / split_count`` at ``split_dimension`` and
    then ``* split_count`` at ``concat_dimension`` (``operand`` itself for ``split_count=1``).

    Raises
    ------
    ShapeError: dimensions out of range, ``split_count < 1``, ``d_split`` not divisible,
    a group size different from ``split_count``, bad replica groups, or a non-default layout.
    DTypeError: ``operand`` is not an XlaOp.
    """
    op = "AllToAll"
    x = _operand(op, "operand", operand)
    sd = _dim(op, "split_dimension", split_dimension, x.shape.rank(), x.shape)
    cd = _dim(op, "concat_dimension", concat_dimension, x.shape.rank(), x.shape)
    n = _count(op, "split_count", split_count)
    groups = _replica_groups(op, replica_groups)
    if groups and len(groups[0]) != n:
        shape_error(op, f"split_count is {n}, but replica_groups {groups} have {len(groups[0])} members each")
    groups = groups or [list(range(n))]  # empty groups crash StableHLO's verifier (division by zero)
    channel = _channel(op, channel_id)
    result = array_shape(x.shape.element_type(), all_to_all_shape(op, x.shape, sd, cd, n), op)
    _check_layout(op, "layout", layout, result)
    attrs = {
        "split_dimension": sd, "concat_dimension": cd, "split_count": n, "replica_groups": _groups_attr(groups),
        **channel,
    }
    return x.builder.add_op(ALL_TO_ALL, (x,), result, attrs)


def CollectivePermute(
    operand: XlaOp, source_target_pairs: Sequence[tuple[int, int]], channel_id: ChannelIdLike | None = None
) -> XlaOp:
    """Send ``operand`` from each source replica to its target replica
    (XLA ``CollectivePermute``; ``stablehlo.collective_permute``).

    A replica that is no pair's target receives zeros.

    Parameters
    ----------
    operand: array ``(d0, ..., dn)`` of any element type.
    source_target_pairs: ``[(source, target), ...]`` replica ids >= 0; no source and no target
        may appear twice. ``[]`` sends nothing (every replica gets zeros).
    channel_id: int >= 1 for a cross-partition permute.

    Returns
    -------
    XlaOp of ``operand``'s shape.

    Raises
    ------
    ShapeError: a pair that is not two ints >= 0, or a repeated source or target.
    DTypeError: ``operand`` is not an XlaOp.
    """
    op = "CollectivePermute"
    x = _operand(op, "operand", operand)
    pairs: list[tuple[int, int]] = []
    try:
        items = list(source_target_pairs)
    except TypeError:
        shape_error(
            op, f"source_target_pairs must be a sequence of (source, target) pairs, got {show(source_target_pairs)}"
        )
    for i, p in enumerate(items):
        try:
            s, t = p
        except (TypeError, ValueError):
            shape_error(op, f"source_target_pairs[{i}] must be a (source, target) pair, got {show(p)}")
        s, t = _int(op, f"source_target_pairs[{i}][0]", s), _int(op, f"source_target_pairs[{i}][1]", t)
        _pair_check(op, i, s, t)  # pair by pair, before the next is read
        pairs.append((s, t))
    result = collective_permute_shape(op, x.shape, pairs)
    stp = I64Elements(np.asarray(pairs, dtype=np.int64).reshape(len(pairs), 2))
    attrs = {"source_target_pairs": stp, **_channel(op, channel_id)}
    return x.builder.add_op(COLLECTIVE_PERMUTE, (x,), result, attrs)


def id_shape(op: str) -> Shape:
    """Shape rule of ReplicaId and PartitionId: ``u32[]``."""
    return Shape._make(PrimitiveType.U32, ())


REPLICA_ID = define("stablehlo.replica_id", "replica-id", constant=False, rule=id_shape)
PARTITION_ID = define("stablehlo.partition_id", "partition-id", constant=False, rule=id_shape)


def ReplicaId(builder: XlaBuilder) -> XlaOp:
    """This replica's id, a ``u32[]`` scalar (XLA ``ReplicaId``; ``stablehlo.replica_id``).

    0 on a single device. Raises DTypeError when ``builder`` is not an XlaBuilder.
    """
    if not isinstance(builder, XlaBuilder):
        dtype_error("ReplicaId", f"first argument must be an XlaBuilder, got {type(builder).__name__}")
    return builder.add_op(REPLICA_ID, (), id_shape("ReplicaId"))


def PartitionId(builder: XlaBuilder) -> XlaOp:
    """This partition's id, a ``u32[]`` scalar (XLA ``PartitionId``; ``stablehlo.partition_id``).

    0 on a single device. Raises DTypeError when ``builder`` is not an XlaBuilder.
    """
    if not isinstance(builder, XlaBuilder):
        dtype_error("PartitionId", f"first argument must be an XlaBuilder, got {type(builder).__name__}")
    return builder.add_op(PARTITION_ID, (), id_shape("PartitionId"))


# Ops whose ``channel_id`` makes their ids partition ids: the op's name and the attribute that holds the ids.
_PARTITION_IDS = {
    COLLECTIVE_PERMUTE: ("CollectivePermute", "source_target_pairs"),
    ALL_TO_ALL: ("AllToAll", "replica_groups"),
}


def cross_partition_ids(roots: Sequence[XlaOp]) -> list[tuple[str, str, list[int]]]:
    """``(op, attribute, ids)`` of every ``CollectivePermute`` or ``AllToAll`` with a
    ``channel_id`` reachable from ``roots`` (sub-computations included).

    With a channel these ops exchange data between partitions, so the ids they name are
    partition ids; see :func:`partition_ids_problem`.
    """
    out: list[tuple[str, str, list[int]]] = []
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        o = stack.pop()
        if o.id in seen:
            continue
        seen.add(o.id)
        stack.extend(o.operands)
        for r in o.regions:
            stack.extend(r.results)
            stack.extend(r.bindings or ())
        found = _PARTITION_IDS.get(o.opdef)
        if found is None or "channel_handle" not in o.attrs:
            continue
        name, attr = found
        out.append((name, attr, o.attrs[attr].values.reshape(-1).tolist()))
    return out


def partition_ids_problem(found: Sequence[tuple[str, str, list[int]]], num_partitions: int) -> str | None:
    """Why the collectives ``found`` by :func:`cross_partition_ids` cannot run with
    ``num_partitions`` partitions, or None: XLA:CPU aborts the process (a failed bounds check)
    or fails at run time when a partition id is ``>= num_partitions``. Called by
    :func:`xlasdk.compile` for built computations.
    """
    for name, attr, ids in found:
        bad = sorted({i for i in ids if i >= num_partitions})
        if bad:
            return (
                f"{name} with a channel_id exchanges data between partitions, so its {attr} are partition "
                f"ids, but ids {bad} are >= num_partitions={num_partitions} (XLA:CPU would abort the process "
                "running it); compile with more partitions, or drop channel_id to exchange between replicas"
            )
    return None
