"""Indexing ops: ``Gather``, ``Scatter``, ``DynamicSlice``, ``DynamicUpdateSlice``.

Each wrapper sits beside its shape rule (:func:`gather_shape`, :func:`scatter_check`,
:func:`dynamic_slice_shape`, :func:`dynamic_update_slice_check`): plain functions of dimensions
and attributes that raise :class:`~xlasdk.errors.ShapeError` naming the op.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._optable import AttrKind, HloForm, braces, define
from ..attrs import GatherDimensionNumbers, ScatterDimensionNumbers
from ..builder import Region, XlaBuilder, XlaOp
from ..errors import ShapeError
from ..shape import Shape
from ..types import INTS, PrimitiveType
from ._core import (
    ComputationLike,
    array_shape,
    bool_arg,
    dimension_fields,
    dtype_error,
    int_list,
    same_builder,
    shape_error,
    subcomputation,
)
from ._core import (
    operand as _operand,
)

__all__ = ["DynamicSlice", "DynamicUpdateSlice", "Gather", "Scatter"]


def _flags_hlo(o: XlaOp) -> str:
    return "".join(f", {f}=true" for f in ("indices_are_sorted", "unique_indices") if o.attrs.get(f))


# -- shared helpers ---------------------------------------------------------------------------


def _ename(e: PrimitiveType) -> str:
    return e.name.lower()


def _index_operand(op: str, name: str, x: XlaOp) -> PrimitiveType:
    """The element type of ``x``, which must be an integer type (DTypeError otherwise)."""
    e = x.shape.element_type()
    if e not in INTS:
        dtype_error(op, f"operand {name!r} must have an integer element type (s8..s64, u8..u64), got {x.shape}")
    return e


def _flag(op: str, name: str, value: Any) -> bool:
    return bool_arg(op, name, value)


def _dnums(op: str, value: Any, cls: Any, required: tuple[str, ...]) -> Any:
    """A validated copy of ``value`` as ``cls``: an instance, any object with the same fields
    (such as the former ``xla_client`` protos) or a mapping of field names."""
    if isinstance(value, Mapping):
        fields = dict(value)
        unknown = sorted(set(fields) - set(cls._FIELDS))
        if unknown:
            shape_error(op, f"dimension_numbers has unknown fields {unknown}; expected {list(cls._FIELDS)}")
    elif isinstance(value, cls) or all(hasattr(value, f) for f in required):
        fields = {f: getattr(value, f) for f in cls._FIELDS if hasattr(value, f)}
    else:
        dtype_error(op, f"dimension_numbers must be a {cls.__name__}, got {type(value).__name__}")
    fields = dimension_fields(op, {str(k): v for k, v in fields.items()})
    try:
        return cls(**fields)
    except ShapeError as e:
        shape_error(op, f"dimension_numbers: {e}")


def _in_range(op: str, what: str, dims: Sequence[int], rank: int, of: str) -> None:
    bad = [d for d in dims if d >= rank]
    if bad:
        shape_error(
            op, f"dimension_numbers.{what} {list(dims)} has dimensions {bad} out of range for {of} (rank {rank})"
        )


def _index_vector_size(op: str, index_dims: tuple[int, ...], ivd: int, idx_name: str, idx_shape: Shape) -> int:
    """Components of each index vector: ``index_dims[ivd]``, or 1 when ``ivd == rank`` (implicit)."""
    if ivd > len(index_dims):
        shape_error(
            op, f"dimension_numbers.index_vector_dim = {ivd} must be <= the rank of {idx_name!r} "
            f"({idx_shape}, rank {len(index_dims)})"
        )
    return index_dims[ivd] if ivd < len(index_dims) else 1


def _check_index_dims(
    op: str, dn: GatherDimensionNumbers | ScatterDimensionNumbers, operand_shape: Shape, idx_name: str, idx_shape: Shape
) -> None:
    """The checks Gather and Scatter share, on the fields by their role (the order of ``_FIELDS``:
    window, dropped, index map, ``index_vector_dim``, operand batching, index batching): one
    index map entry per index-vector component, every dimension in range of the operand or the
    indices, and the window, dropped and batching dimensions adding up to the operand's rank."""
    window, dropped, index_map, _, op_batching, idx_batching = dn._FIELDS
    xd, idd = operand_shape.dimensions(), idx_shape.dimensions()
    r_op = len(xd)
    ivd = dn.index_vector_dim
    nvec = _index_vector_size(op, idd, ivd, idx_name, idx_shape)
    imap = getattr(dn, index_map)
    if len(imap) != nvec:
        shape_error(
            op, f"dimension_numbers.{index_map} {imap} has {len(imap)} entries, but the index "
            f"vectors of {idx_name!r} {idx_shape} (index_vector_dim = {ivd}) have {nvec} components"
        )
    of_op = f"operand {operand_shape}"
    for what in (dropped, index_map, op_batching):
        _in_range(op, what, getattr(dn, what), r_op, of_op)
    _in_range(op, idx_batching, getattr(dn, idx_batching), len(idd), f"{idx_name!r} {idx_shape}")
    counts = [(what, len(getattr(dn, what))) for what in (window, dropped, op_batching)]
    n_dims = sum(n for _, n in counts)
    if n_dims != r_op:
        terms = " + ".join(f"{what} ({n})" for what, n in counts)
        shape_error(op, f"operand {operand_shape} has rank {r_op}, but {terms} give {n_dims}")


def _check_batching_sizes(
    op: str, dn: GatherDimensionNumbers | ScatterDimensionNumbers, operand_shape: Shape, idx_name: str, idx_shape: Shape
) -> None:
    """Each operand batching dimension has the size of its paired batching dimension of the indices."""
    *_, op_batching, idx_batching = dn._FIELDS
    xd, idd = operand_shape.dimensions(), idx_shape.dimensions()
    for a, b in zip(getattr(dn, op_batching), getattr(dn, idx_batching), strict=True):
        if xd[a] != idd[b]:
            shape_error(
                op, f"batching dimensions differ in size: operand {operand_shape} dimension {a} has {xd[a]}, "
                f"{idx_name!r} {idx_shape} dimension {b} has {idd[b]}"
            )


# -- Gather -----------------------------------------------------------------------------------


def gather_shape(
    op: str,
    operand_shape: Shape,
    indices_shape: Shape,
    dn: GatherDimensionNumbers,
    slice_sizes: tuple[int, ...],
) -> tuple[int, ...]:
    """Shape rule of Gather (StableHLO ``gather`` constraints C1-C22): the result dimensions.

    Raises ShapeError naming ``op`` on any inconsistency between the operand, the indices, the
    dimension numbers and ``slice_sizes``.
    """
    _check_index_dims(op, dn, operand_shape, "start_indices", indices_shape)
    xd, idd = operand_shape.dimensions(), indices_shape.dimensions()
    r_op, ivd = len(xd), dn.index_vector_dim
    if len(slice_sizes) != r_op:
        shape_error(
            op, f"slice_sizes has {len(slice_sizes)} entries, expected {r_op} (the rank of operand {operand_shape})"
        )
    for i, s in enumerate(slice_sizes):
        if not 0 <= s <= xd[i]:
            shape_error(
                op, f"slice_sizes[{i}] = {s} must be in [0, {xd[i]}] (dimension {i} of operand {operand_shape})"
            )
    for what, dims in (
        ("collapsed_slice_dims", dn.collapsed_slice_dims),
        ("operand_batching_dims", dn.operand_batching_dims),
    ):
        for d in dims:
            if slice_sizes[d] != 1:
                # StableHLO also allows 0 here, but then the slice is empty while the result is not:
                # XLA:CPU returns zeros there, the specification the operand's elements.
                shape_error(op, f"slice_sizes[{d}] = {slice_sizes[d]} must be 1: dimension {d} is in {what}")
    _check_batching_sizes(op, dn, operand_shape, "start_indices", indices_shape)
    batch_sizes = [s for i, s in enumerate(idd) if i != ivd]
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    offset_sizes = [s for i, s in enumerate(slice_sizes) if i not in dropped]
    rank = len(batch_sizes) + len(dn.offset_dims)
    _in_range(op, "offset_dims", dn.offset_dims, rank, "the result")
    offsets, batches = iter(offset_sizes), iter(batch_sizes)
    offset_set = set(dn.offset_dims)
    return tuple(next(offsets) if r in offset_set else next(batches) for r in range(rank))


GATHER = define(
    "stablehlo.gather", "gather",
    hlo_attrs=lambda o: f", {o.attrs['dimension_numbers'].to_hlo()}, slice_sizes={braces(o.attrs['slice_sizes'])}"
    + _flags_hlo(o),
    rule=gather_shape,
    attrs={
        "dimension_numbers": AttrKind.GATHER_DIMENSION_NUMBERS, "slice_sizes": AttrKind.INTS,
        "indices_are_sorted": AttrKind.BOOL,
    },
)


def Gather(
    a: XlaOp,
    start_indices: XlaOp,
    dimension_numbers: GatherDimensionNumbers | Mapping[str, Any],
    slice_sizes: Sequence[int],
    indices_are_sorted: bool = False,
) -> XlaOp:
    """Gather slices of ``operand`` at the positions held in ``start_indices`` (XLA ``Gather``).

    For every batch position (every index of ``start_indices`` except along ``index_vector_dim``)
    an index vector is read, mapped onto operand dimensions by ``start_index_map``, **clamped**
    to ``[0, operand_dims[d] - slice_sizes[d]]`` so that the whole slice is in bounds, and the
    slice of sizes ``slice_sizes`` starting there is copied out. ``collapsed_slice_dims`` (size-1
    slice dimensions) are dropped; the remaining slice dimensions go to the result dimensions
    ``offset_dims``. With ``operand_batching_dims`` / ``start_indices_batching_dims``, batch ``b``
    of the indices reads from batch ``b`` of the operand (those operand dimensions are dropped
    too, with slice size 1).

    Examples: ``x[idx]`` for ``x`` of shape ``(N, D)`` and ``idx`` of shape ``(K,)`` is
    ``GatherDimensionNumbers(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
    index_vector_dim=1)`` with ``slice_sizes=(1, D)``.

    Parameters
    ----------
    a: array ``(d0, ..., dr-1)`` of any element type.
    start_indices: integer array (s8..s64, u8..u64); its dimension ``index_vector_dim`` holds the
        index vectors (``index_vector_dim == rank`` means scalars: vectors of one component).
    dimension_numbers: :class:`xlasdk.GatherDimensionNumbers` (or an object or mapping with
        the same fields, such as the former ``xla_client`` proto).
    slice_sizes: one size per operand dimension, ``0 <= slice_sizes[i] <= d_i``; exactly 1 in
        collapsed and operand batching dimensions.
    indices_are_sorted: a promise that the indices are sorted (ascending, after mapping); if it
        is false in fact, the result is undefined.

    Returns
    -------
    XlaOp of the operand's element type: the batch dimensions of ``start_indices`` (without
    ``index_vector_dim``) in order, with the kept slice dimensions at positions ``offset_dims``.

    Raises
    ------
    ShapeError: dimension numbers out of range or inconsistent with the ranks, wrong number of
        ``slice_sizes``, a slice size larger than the operand, batching dimension sizes differ.
    DTypeError: ``start_indices`` not of an integer type, ``dimension_numbers`` of a wrong type,
        ``indices_are_sorted`` not a bool.

    Maps to HLO ``gather`` / ``stablehlo.gather``.
    """
    op = "Gather"
    x = _operand(op, "operand", a)
    idx = _operand(op, "start_indices", start_indices)
    b = same_builder(op, [("operand", x), ("start_indices", idx)])
    _index_operand(op, "start_indices", idx)
    dn: GatherDimensionNumbers = _dnums(
        op, dimension_numbers, GatherDimensionNumbers, ("offset_dims", "collapsed_slice_dims", "start_index_map")
    )
    sizes = int_list(op, "slice_sizes", slice_sizes)
    sorted_ = _flag(op, "indices_are_sorted", indices_are_sorted)
    dims = gather_shape(op, x.shape, idx.shape, dn, sizes)
    attrs = {"dimension_numbers": copy.deepcopy(dn), "indices_are_sorted": sorted_, "slice_sizes": tuple(sizes)}
    return b.add_op(GATHER, (x, idx), array_shape(x.shape.element_type(), dims, op), attrs)


# -- Scatter ----------------------------------------------------------------------------------


def scatter_check(
    op: str, operand_shape: Shape, indices_shape: Shape, updates_shape: Shape, dn: ScatterDimensionNumbers
) -> None:
    """Shape rule of Scatter (StableHLO ``scatter`` constraints C2-C21): checks ``updates``.

    ``updates`` must have the scatter (batch) dimensions of ``scatter_indices`` (without
    ``index_vector_dim``) in order, and at positions ``update_window_dims`` window sizes no
    larger than the operand dimensions outside ``inserted_window_dims`` and
    ``input_batching_dims``. Raises ShapeError naming ``op``.
    """
    _check_index_dims(op, dn, operand_shape, "scatter_indices", indices_shape)
    _check_batching_sizes(op, dn, operand_shape, "scatter_indices", indices_shape)
    xd, idd, ud = operand_shape.dimensions(), indices_shape.dimensions(), updates_shape.dimensions()
    r_upd, ivd = len(ud), dn.index_vector_dim
    of_op = f"operand {operand_shape}"
    scatter_sizes = [s for i, s in enumerate(idd) if i != ivd]
    dropped = set(dn.inserted_window_dims) | set(dn.input_batching_dims)
    window_bounds = [s for i, s in enumerate(xd) if i not in dropped]
    expected_rank = len(scatter_sizes) + len(dn.update_window_dims)
    if r_upd != expected_rank:
        shape_error(
            op, f"operand 'updates' {updates_shape} has rank {r_upd}, expected {expected_rank}: "
            f"{len(scatter_sizes)} scatter dimensions {scatter_sizes} of 'scatter_indices' {indices_shape} plus "
            f"{len(dn.update_window_dims)} update_window_dims"
        )
    _in_range(op, "update_window_dims", dn.update_window_dims, r_upd, f"'updates' {updates_shape}")
    windows, scatters = iter(window_bounds), iter(scatter_sizes)
    wset = set(dn.update_window_dims)
    for d, size in enumerate(ud):
        if d in wset:
            bound = next(windows)
            if size > bound:
                shape_error(
                    op, f"operand 'updates' {updates_shape}: window dimension {d} has size {size}, larger than the "
                    f"operand's window bound {bound} ({of_op})"
                )
        else:
            want = next(scatters)
            if size != want:
                shape_error(
                    op, f"operand 'updates' {updates_shape}: scatter dimension {d} has size {size}, expected {want} "
                    f"from 'scatter_indices' {indices_shape}"
                )


def scatter_shape(
    op: str, operand_shape: Shape, indices_shape: Shape, updates_shape: Shape, dn: ScatterDimensionNumbers
) -> Shape:
    """Shape rule of Scatter: the operand's shape, after :func:`scatter_check` (ShapeError)."""
    scatter_check(op, operand_shape, indices_shape, updates_shape, dn)
    return operand_shape


SCATTER = define(
    "stablehlo.scatter", "scatter", hlo_form=HloForm.REGION,
    hlo_attrs=lambda o: f", {o.attrs['scatter_dimension_numbers'].to_hlo()}" + _flags_hlo(o),
    rule=scatter_shape,
    attrs={
        "scatter_dimension_numbers": AttrKind.SCATTER_DIMENSION_NUMBERS, "indices_are_sorted": AttrKind.BOOL,
        "unique_indices": AttrKind.BOOL,
    },
)


def _update_region(op: str, computation: Any, et: PrimitiveType, builder: XlaBuilder) -> Region:
    """Region of ``update_computation(old, new) -> combined`` on scalars of type ``et``."""
    scalar = Shape._make(et, ())
    region, results = subcomputation(op, "update_computation", computation, [scalar, scalar], builder)
    flat: list[Shape] = []
    for r in results:
        flat.extend(r.tuple_shapes() if r.is_tuple() else [r])
    if len(flat) != 1 or flat[0].rank() != 0 or not flat[0].is_array():
        shape_error(
            op, f"update_computation returns ({', '.join(map(str, flat))}) but must return one scalar {scalar}"
        )
    if flat[0].element_type() is not et:
        dtype_error(op, f"update_computation returns {flat[0]} but must return {scalar} (the operand's element type)")
    return region


def Scatter(
    input: XlaOp,  # noqa: A002 - the former name
    scatter_indices: XlaOp,
    updates: XlaOp,
    update_computation: ComputationLike,
    dimension_numbers: ScatterDimensionNumbers | Mapping[str, Any],
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
) -> XlaOp:
    """Combine ``updates`` into a copy of ``operand`` at the positions in ``scatter_indices``
    (XLA ``Scatter``).

    The dual of :func:`Gather`: each update window (the ``update_window_dims`` of ``updates``) is
    placed at the start position read from the index vector of its scatter position, mapped onto
    operand dimensions by ``scatter_dims_to_operand_dims`` (``inserted_window_dims`` are operand
    dimensions of window size 1 absent from ``updates``; ``input_batching_dims`` pair operand
    batch dimensions with ``scatter_indices_batching_dims``). Each target element becomes
    ``update_computation(current, update)``; when several updates hit the same element they
    are all applied, in an unspecified order (so the combiner should be associative and
    commutative; with a non-commutative one, such as "replace", the result is undefined).

    Out-of-bounds windows: XLA:CPU skips an update window whose start is out of range (so that
    the window does not fit in the operand); the StableHLO specification leaves this
    implementation-defined. Scatter indices are **not** clamped (unlike Gather).

    Index vectors with zero components (``scatter_indices`` of size 0 along
    ``index_vector_dim``) put every window at the origin. XLA:CPU applies only the last update
    in that form; xlasdk lowers it as an equivalent scatter with one-component zero indices into
    a size-1 leading dimension, which XLA applies correctly.

    Parameters
    ----------
    input: array ``(d0, ..., dr-1)`` of any element type.
    scatter_indices: integer array (s8..s64, u8..u64); its dimension ``index_vector_dim`` holds
        the index vectors (``index_vector_dim == rank`` means scalar indices).
    updates: array of the operand's element type: the scatter dimensions of ``scatter_indices``
        in order, with window dimensions at ``update_window_dims``.
    update_computation: ``(old, new) -> combined`` on scalars of the operand's element type: an
        XlaComputation, or a Python callable of two XlaOps returning one XlaOp.
    dimension_numbers: :class:`xlasdk.ScatterDimensionNumbers` (or an object or mapping with the
        same fields, such as the former ``xla_client`` proto).
    indices_are_sorted: a promise that the indices are sorted; if false in fact, the result is
        undefined.
    unique_indices: a promise that no two updates hit the same element; if false in fact, the
        result is undefined.

    Returns
    -------
    XlaOp of the operand's shape and element type.

    Raises
    ------
    ShapeError: dimension numbers out of range or inconsistent with the ranks, ``updates`` of
        the wrong shape, batching sizes differ, ``update_computation`` taking other than two
        scalars or returning other than one scalar.
    DTypeError: ``scatter_indices`` not of an integer type, ``updates`` of another element type,
        ``update_computation`` neither an XlaComputation nor a callable, or returning another
        element type; flags not bools.

    Maps to HLO ``scatter`` / ``stablehlo.scatter``.
    """
    op = "Scatter"
    x = _operand(op, "operand", input)
    idx = _operand(op, "scatter_indices", scatter_indices)
    upd = _operand(op, "updates", updates)
    b = same_builder(op, [("operand", x), ("scatter_indices", idx), ("updates", upd)])
    _index_operand(op, "scatter_indices", idx)
    et = x.shape.element_type()
    if upd.shape.element_type() is not et:
        dtype_error(op, f"operand 'updates' is {upd.shape}, expected element type {_ename(et)} like operand {x.shape}")
    dn: ScatterDimensionNumbers = _dnums(
        op, dimension_numbers, ScatterDimensionNumbers,
        ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims"),
    )
    sorted_ = _flag(op, "indices_are_sorted", indices_are_sorted)
    unique = _flag(op, "unique_indices", unique_indices)
    scatter_shape(op, x.shape, idx.shape, upd.shape, dn)
    region = _update_region(op, update_computation, et, b)
    xd, idd = x.shape.dimensions(), idx.shape.dimensions()
    ivd = dn.index_vector_dim

    def emit(operand_op: XlaOp, indices_op: XlaOp, d: ScatterDimensionNumbers, dims: tuple[int, ...]) -> XlaOp:
        attrs = {
            "indices_are_sorted": sorted_, "scatter_dimension_numbers": copy.deepcopy(d), "unique_indices": unique
        }
        return b.add_op(SCATTER, (operand_op, indices_op, upd), array_shape(et, dims, op), attrs, (region,))

    if ivd < len(idd) and idd[ivd] == 0:
        # Empty index vectors: every window starts at the origin. XLA:CPU keeps only the last
        # update here (C-07), so scatter instead into a new leading operand dimension of size 1
        # (an inserted window dimension) with one-component all-zero index vectors.
        from .shaping import BroadcastInDim, Reshape
        from .sources import Constant

        x1 = Reshape(x, (1,) + xd)
        zero_dims = list(idd)
        zero_dims[ivd] = 1
        zeros = BroadcastInDim(Constant(b, np.zeros((), idx.dtype)), zero_dims, ())
        d1 = ScatterDimensionNumbers(
            update_window_dims=dn.update_window_dims,
            inserted_window_dims=[0] + [d + 1 for d in dn.inserted_window_dims],
            scatter_dims_to_operand_dims=[0],
            index_vector_dim=ivd,
            input_batching_dims=[d + 1 for d in dn.input_batching_dims],
            scatter_indices_batching_dims=dn.scatter_indices_batching_dims,
        )
        return Reshape(emit(x1, zeros, d1, (1,) + xd), xd)
    return emit(x, idx, dn, xd)


# -- DynamicSlice / DynamicUpdateSlice --------------------------------------------------------


def _start_indices(op: str, x: XlaOp, start_indices: Any) -> list[XlaOp]:
    """One integer scalar XlaOp per operand dimension, all of the same element type.

    Accepts a sequence of scalar XlaOps and Python ints (ints become constants of the XlaOps'
    type, s32 if there are none), or one rank-1 integer XlaOp of length ``rank``, alone or as the
    only element of a list (the former API's legacy spelling).
    """
    b = x.builder
    r = x.shape.rank()
    if isinstance(start_indices, (list, tuple)) and len(start_indices) == 1:  # the former legacy form:
        only = start_indices[0]  # a one-element list holding the index vector
        if isinstance(only, XlaOp) and only.shape.is_array() and only.shape.rank() == 1:
            start_indices = only
    if isinstance(start_indices, XlaOp):
        v = _operand(op, "start_indices", start_indices, b)
        _index_operand(op, "start_indices", v)
        if v.shape.dimensions() != (r,):
            shape_error(
                op, f"operand 'start_indices' {v.shape} must be a list of {r} scalars or a vector of {r} "
                f"(the rank of operand {x.shape})"
            )
        from .shaping import Reshape, Slice

        return [Reshape(Slice(v, [i], [i + 1], [1]), ()) for i in range(r)]
    if not isinstance(start_indices, (list, tuple)):
        dtype_error(op, f"start_indices must be a sequence of scalar XlaOps, got {type(start_indices).__name__}")
    if len(start_indices) != r:
        shape_error(
            op, f"start_indices has {len(start_indices)} entries, expected {r} (the rank of operand {x.shape})"
        )
    ops: dict[int, XlaOp] = {}
    for i, s in enumerate(start_indices):
        name = f"start_indices[{i}]"
        if isinstance(s, XlaOp):
            v = _operand(op, name, s, b)
            _index_operand(op, name, v)
            if v.shape.rank() != 0:
                shape_error(op, f"operand {name!r} must be a scalar, got {v.shape}")
            ops[i] = v
        elif not isinstance(s, (int, np.integer)) or isinstance(s, (bool, np.bool_)):
            dtype_error(op, f"operand {name!r} must be a scalar integer XlaOp or an int, got {type(s).__name__}")
    etypes = sorted({v.shape.element_type() for v in ops.values()}, key=lambda e: e.name)
    if len(etypes) > 1:
        dtype_error(
            op, "start_indices must all have the same element type, got "
            + ", ".join(f"{i}: {v.shape}" for i, v in ops.items())
        )
    dt = ops[min(ops)].dtype if ops else np.dtype(np.int32)
    out: list[XlaOp] = []
    from .sources import Constant

    for i, s in enumerate(start_indices):
        if i in ops:
            out.append(ops[i])
            continue
        try:
            c = np.asarray(int(s)).astype(dt)
            ok = int(c) == int(s)
        except (OverflowError, ValueError):
            ok = False
        if not ok:
            shape_error(op, f"start_indices[{i}] = {int(s)} does not fit the index type {dt}")
        out.append(Constant(b, c))
    return out


def dynamic_slice_shape(op: str, operand_shape: Shape, slice_sizes: tuple[int, ...]) -> tuple[int, ...]:
    """Shape rule of DynamicSlice: ``slice_sizes`` (one per dimension, ``0 <= size <= dim``)."""
    xd = operand_shape.dimensions()
    if len(slice_sizes) != len(xd):
        shape_error(
            op, f"slice_sizes has {len(slice_sizes)} entries, expected {len(xd)} (the rank of operand {operand_shape})"
        )
    for i, (s, d) in enumerate(zip(slice_sizes, xd, strict=True)):
        if not 0 <= s <= d:
            shape_error(op, f"slice_sizes[{i}] = {s} must be in [0, {d}] (dimension {i} of operand {operand_shape})")
    return slice_sizes


DYNAMIC_SLICE = define(
    "stablehlo.dynamic_slice", "dynamic-slice",
    hlo_attrs=lambda o: f", dynamic_slice_sizes={braces(o.attrs['slice_sizes'])}",
    rule=dynamic_slice_shape, attrs={"slice_sizes": AttrKind.INTS},
)


def DynamicSlice(
    operand: XlaOp, start_indices: Sequence[XlaOp | int] | XlaOp, slice_sizes: Sequence[int]
) -> XlaOp:
    """Slice of static sizes at run-time start positions (XLA ``DynamicSlice``).

    ``result = operand[s0 : s0 + slice_sizes[0], s1 : ...]`` where each start ``s_i`` is first
    **clamped** to ``[0, d_i - slice_sizes[i]]``: a negative start reads from 0, a start too
    large reads the last ``slice_sizes[i]`` elements (unsigned starts compare as unsigned).

    Parameters
    ----------
    operand: array ``(d0, ..., dr-1)`` of any element type.
    start_indices: ``r`` integer scalars (XlaOps of one integer type; Python ints are turned into
        constants of that type), or one integer vector ``(r,)``.
    slice_sizes: ``r`` static sizes, ``0 <= slice_sizes[i] <= d_i``.

    Returns
    -------
    XlaOp ``(slice_sizes[0], ..., slice_sizes[r-1])`` of the operand's element type.

    Raises
    ------
    ShapeError: wrong number of start indices or slice sizes, a start index not a scalar, a
        slice size negative or larger than the operand.
    DTypeError: a start index not of an integer type, or start indices of different types.

    Maps to HLO ``dynamic-slice`` / ``stablehlo.dynamic_slice``.
    """
    op = "DynamicSlice"
    x = _operand(op, "operand", operand)
    starts = _start_indices(op, x, start_indices)
    sizes = dynamic_slice_shape(op, x.shape, int_list(op, "slice_sizes", slice_sizes))
    return x.builder.add_op(
        DYNAMIC_SLICE, (x, *starts), array_shape(x.shape.element_type(), sizes, op), {"slice_sizes": tuple(sizes)}
    )


def dynamic_update_slice_check(op: str, operand_shape: Shape, update_shape: Shape) -> None:
    """Shape rule of DynamicUpdateSlice: same rank, ``update`` no larger than ``operand``."""
    xd, ud = operand_shape.dimensions(), update_shape.dimensions()
    if len(ud) != len(xd):
        shape_error(
            op, f"operand 'update' {update_shape} has rank {len(ud)}, expected {len(xd)} like operand {operand_shape}"
        )
    for i, (u, d) in enumerate(zip(ud, xd, strict=True)):
        if u > d:
            shape_error(
                op, f"operand 'update' {update_shape} dimension {i} has size {u}, larger than dimension {i} of "
                f"operand {operand_shape} ({d})"
            )


DYNAMIC_UPDATE_SLICE = define("stablehlo.dynamic_update_slice", "dynamic-update-slice", rule=dynamic_update_slice_check)


def DynamicUpdateSlice(operand: XlaOp, update: XlaOp, start_indices: Sequence[XlaOp | int] | XlaOp) -> XlaOp:
    """Overwrite a block of ``operand`` with ``update`` at run-time start positions
    (XLA ``DynamicUpdateSlice``).

    Each start ``s_i`` is first **clamped** to ``[0, d_i - update_dims[i]]``, so the whole
    ``update`` always lands inside the operand.

    Parameters
    ----------
    operand: array ``(d0, ..., dr-1)`` of any element type.
    update: array ``(u0, ..., ur-1)`` of the same element type, ``u_i <= d_i``.
    start_indices: ``r`` integer scalars (XlaOps of one integer type; Python ints are turned into
        constants of that type), or one integer vector ``(r,)``.

    Returns
    -------
    XlaOp of the operand's shape and element type.

    Raises
    ------
    ShapeError: ``update`` of another rank or larger than the operand, wrong number of start
        indices, a start index not a scalar.
    DTypeError: ``update`` of another element type, a start index not of an integer type, or
        start indices of different types.

    Maps to HLO ``dynamic-update-slice`` / ``stablehlo.dynamic_update_slice``.
    """
    op = "DynamicUpdateSlice"
    x = _operand(op, "operand", operand)
    u = _operand(op, "update", update)
    same_builder(op, [("operand", x), ("update", u)])
    if u.shape.element_type() is not x.shape.element_type():
        dtype_error(
            op, f"operand 'update' is {u.shape}, expected element type {_ename(x.shape.element_type())} like "
            f"operand {x.shape}"
        )
    dynamic_update_slice_check(op, x.shape, u.shape)
    starts = _start_indices(op, x, start_indices)
    return x.builder.add_op(DYNAMIC_UPDATE_SLICE, (x, u, *starts), x.shape)
