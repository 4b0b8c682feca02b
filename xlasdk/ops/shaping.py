"""Shape-changing ops: ``Broadcast``, ``BroadcastInDim``, ``Reshape``, ``Transpose``, ``Slice``,
``ConcatInDim``, and the dynamic-shape ops ``GetDimensionSize``, ``SetDimensionSize``,
``DynamicReshape``, ``RemoveDynamicDimension``. Each wrapper sits beside its shape rule."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._optable import AttrKind, HloUnsupported, braces, define
from ..attrs import PaddingConfig, PaddingConfigDimension
from ..builder import XlaBuilder, XlaOp
from ..shape import Shape
from ..types import PrimitiveType
from ._core import (
    INT64_MAX,
    INT64_MIN,
    array_shape,
    bool_arg,
    dtype_error,
    int_arg,
    int_list,
    int_tuples,
    same_builder,
    shape_error,
    show,
)
from ._core import (
    operand as _operand,
)
from .convert import CONVERT

__all__ = [
    "Broadcast",
    "BroadcastInDim",
    "ConcatInDim",
    "Reshape",
    "Slice",
    "Transpose",
    "Collapse",
    "Pad",
    "Rev",
    "SliceInDim",
    "GetDimensionSize",
    "SetDimensionSize",
    "DynamicReshape",
    "RemoveDynamicDimension",
]


# -- the HLO spelling of this family's rows (each row sits beside its shape rule below) -----------
def _slice_hlo(o: XlaOp) -> str:
    a = o.attrs
    full = any(c != 1 for c in a["strides"])  # XLA writes every stride once one is not 1
    parts = [
        f"[{lo}:{hi}:{st}]" if full else f"[{lo}:{hi}]"
        for lo, hi, st in zip(a["start_indices"], a["limit_indices"], a["strides"], strict=True)
    ]
    return ", slice={" + ", ".join(parts) + "}"


def _pad_hlo(o: XlaOp) -> str:
    a = o.attrs
    if o.shape.rank() == 0:
        raise HloUnsupported("pad of a scalar")
    full = any(a["interior_padding"])  # XLA writes every interior value once one is not 0
    parts = [
        f"{lo}_{hi}" + (f"_{c}" if full else "")
        for lo, hi, c in zip(a["edge_padding_low"], a["edge_padding_high"], a["interior_padding"], strict=True)
    ]
    return ", padding=" + "x".join(parts)


def broadcast_shape(op: str, operand: Shape, sizes: tuple[int, ...]) -> Shape:
    """Shape rule of Broadcast: ``sizes + operand.dims``; ShapeError for a negative size."""
    if any(s < 0 for s in sizes):
        shape_error(op, f"sizes must be >= 0, got {list(sizes)}")
    return array_shape(operand.element_type(), sizes + operand.dimensions(), op)


def Broadcast(operand: XlaOp, sizes: Sequence[int]) -> XlaOp:
    """Add leading dimensions: result shape is ``sizes + operand.dims`` (XLA ``Broadcast``).

    Maps to ``stablehlo.broadcast_in_dim`` with the operand's dimensions at the end.

    Raises ShapeError for negative sizes.
    """
    x = _operand("Broadcast", "operand", operand)
    sz = int_list("Broadcast", "sizes", sizes)
    result = broadcast_shape("Broadcast", x.shape, sz)
    mapping = tuple(range(len(sz), result.rank()))
    return x.builder.add_op(BROADCAST_IN_DIM, (x,), result, {"broadcast_dimensions": mapping})


def broadcast_in_dim_shape(
    op: str, operand: Shape, shape: tuple[int, ...], broadcast_dimensions: tuple[int, ...]
) -> Shape:
    """Shape rule of BroadcastInDim: ``shape`` of the operand's element type; ShapeError for a
    negative size, ``broadcast_dimensions`` of the wrong length, repeated or out of range, or an
    operand size that is neither 1 nor the result size."""
    out, bd, xd = shape, broadcast_dimensions, operand.dimensions()
    if any(s < 0 for s in out):
        shape_error(op, f"shape must have sizes >= 0, got {list(out)}")
    if len(bd) != len(xd):
        shape_error(op, f"broadcast_dimensions has {len(bd)} entries, expected {len(xd)} (rank of {operand})")
    if len(set(bd)) != len(bd) or any(not 0 <= d < len(out) for d in bd):
        shape_error(op, f"broadcast_dimensions {list(bd)} must be distinct dimension numbers < {len(out)}")
    for i, d in enumerate(bd):
        if xd[i] != 1 and xd[i] != out[d]:
            shape_error(
                op, f"operand dimension {i} has size {xd[i]}, but result dimension {d} has size {out[d]} "
                "(must be equal, or the operand size 1)"
            )
    return array_shape(operand.element_type(), out, op)


BROADCAST_IN_DIM = define(
    "stablehlo.broadcast_in_dim", "broadcast",
    hlo_attrs=lambda o: f", dimensions={braces(o.attrs['broadcast_dimensions'])}",
    rule=broadcast_in_dim_shape, attrs={"broadcast_dimensions": AttrKind.INTS},
)


def BroadcastInDim(operand: XlaOp, shape: Sequence[int], broadcast_dimensions: Sequence[int]) -> XlaOp:
    """Broadcast ``operand`` to dimensions ``shape`` (XLA ``BroadcastInDim``; ``stablehlo.broadcast_in_dim``).

    Operand dimension ``i`` becomes result dimension ``broadcast_dimensions[i]``; its size must
    equal ``shape[broadcast_dimensions[i]]`` or be 1.

    Raises
    ------
    ShapeError: ``broadcast_dimensions`` has the wrong length, repeats or is out of range, or a size
    does not match.
    """
    op = "BroadcastInDim"
    x = _operand(op, "operand", operand)
    out = int_list(op, "shape", shape)
    bd = int_list(op, "broadcast_dimensions", broadcast_dimensions)
    result = broadcast_in_dim_shape(op, x.shape, out, bd)
    return x.builder.add_op(BROADCAST_IN_DIM, (x,), result, {"broadcast_dimensions": bd})


def reshape_shape(op: str, operand: Shape, new_sizes: tuple[int, ...]) -> Shape:
    """Shape rule of Reshape: ``new_sizes`` of the operand's element type; ShapeError for a
    negative size or another element count."""
    if any(s < 0 for s in new_sizes):
        shape_error(op, f"new_sizes must be >= 0, got {list(new_sizes)}")
    n = 1
    for s in new_sizes:
        n *= s
    if n != operand.size():
        shape_error(op, f"cannot reshape {operand} ({operand.size()} elements) to {list(new_sizes)} ({n} elements)")
    if new_sizes == operand.dimensions():
        return operand
    return array_shape(operand.element_type(), new_sizes, op)


RESHAPE = define("stablehlo.reshape", "reshape", rule=reshape_shape)


def _permutation(op: str, name: str, operand: Shape, perm: tuple[int, ...]) -> None:
    if sorted(perm) != list(range(operand.rank())):
        shape_error(op, f"{name} {list(perm)} is not a permutation of range({operand.rank()}) for {operand}")


def transpose_shape(op: str, operand: Shape, permutation: tuple[int, ...]) -> Shape:
    """Shape rule of Transpose: dimension ``i`` is operand dimension ``permutation[i]``;
    ShapeError when ``permutation`` is not a permutation of ``range(rank)``."""
    _permutation(op, "permutation", operand, permutation)
    xd = operand.dimensions()
    return array_shape(operand.element_type(), tuple(xd[p] for p in permutation), op)


TRANSPOSE = define(
    "stablehlo.transpose", "transpose", hlo_attrs=lambda o: f", dimensions={braces(o.attrs['permutation'])}",
    rule=transpose_shape, attrs={"permutation": AttrKind.INTS},
)


def Reshape(operand: XlaOp, dimensions: Sequence[int] | None = None, new_sizes: Sequence[int] | None = None) -> XlaOp:
    """Reshape to ``new_sizes`` (row-major order) (XLA ``Reshape``; ``stablehlo.reshape``).

    Called as ``Reshape(x, new_sizes)`` or, in the former form, ``Reshape(x, dimensions,
    new_sizes)`` where ``dimensions`` first transposes the operand.

    Raises ShapeError if the element counts differ, a size is negative, or ``dimensions`` is not
    a permutation of the operand's dimensions.
    """
    op = "Reshape"
    x = _operand(op, "operand", operand)
    if new_sizes is None:
        if dimensions is None:
            shape_error(op, "new_sizes is required")
        new_sizes, dimensions = dimensions, None
    sizes = int_list(op, "new_sizes", new_sizes)
    if dimensions is not None:
        perm = int_list(op, "dimensions", dimensions)
        _permutation(op, "dimensions", x.shape, perm)
        if perm != tuple(range(x.shape.rank())):
            x = Transpose(x, perm)
    result = reshape_shape(op, x.shape, sizes)
    if sizes == x.shape.dimensions():
        return x
    return x.builder.add_op(RESHAPE, (x,), result)


def Transpose(operand: XlaOp, permutation: Sequence[int]) -> XlaOp:
    """Permute dimensions: result dim ``i`` is operand dim ``permutation[i]`` (``stablehlo.transpose``).

    Raises ShapeError if ``permutation`` is not a permutation of ``range(rank)``.
    """
    op = "Transpose"
    x = _operand(op, "operand", operand)
    perm = int_list(op, "permutation", permutation)
    return x.builder.add_op(TRANSPOSE, (x,), transpose_shape(op, x.shape, perm), {"permutation": perm})


def slice_shape(
    op: str, dims: tuple[int, ...], start: tuple[int, ...], limit: tuple[int, ...], strides: tuple[int, ...]
) -> tuple[int, ...]:
    """Shape rule of Slice: ``ceil((limit - start) / stride)`` per dimension."""
    r = len(dims)
    for name, v in (("start_indices", start), ("limit_indices", limit), ("strides", strides)):
        if len(v) != r:
            shape_error(op, f"{name} has {len(v)} entries, expected {r} (the operand rank)")
    out = []
    for i in range(r):
        if strides[i] < 1:
            shape_error(op, f"strides[{i}] = {strides[i]}, must be >= 1")
        if not 0 <= start[i] <= limit[i] <= dims[i]:
            shape_error(
                op, f"dimension {i}: need 0 <= start ({start[i]}) <= limit ({limit[i]}) <= size ({dims[i]})"
            )
        out.append(-(-(limit[i] - start[i]) // strides[i]))
    return tuple(out)


SLICE = define(
    "stablehlo.slice", "slice", hlo_attrs=_slice_hlo, rule=slice_shape,
    attrs={"start_indices": AttrKind.INTS, "limit_indices": AttrKind.INTS, "strides": AttrKind.INTS},
)


def Slice(
    operand: XlaOp, start_indices: Sequence[int], limit_indices: Sequence[int], strides: Sequence[int] | None = None
) -> XlaOp:
    """Static slice ``operand[start:limit:stride]`` per dimension (XLA ``Slice``; ``stablehlo.slice``).

    Returns: XlaOp with dimension ``i`` of size ``ceil((limit[i] - start[i]) / strides[i])``.

    Raises ShapeError: wrong number of indices, a stride < 1, or indices out of bounds.
    """
    op = "Slice"
    x = _operand(op, "operand", operand)
    st = int_list(op, "start_indices", start_indices)
    li = int_list(op, "limit_indices", limit_indices)
    sr = int_list(op, "strides", strides) if strides is not None else (1,) * x.shape.rank()
    dims = slice_shape(op, x.shape.dimensions(), st, li, sr)
    return x.builder.add_op(
        SLICE, (x,), array_shape(x.shape.element_type(), dims, op),
        {"start_indices": st, "limit_indices": li, "strides": sr},
    )


_TWO_BIT_WIDE = {PrimitiveType.S2: PrimitiveType.S8, PrimitiveType.U2: PrimitiveType.U8}


def concat_shape(op: str, shapes: Sequence[Shape], dimension: int) -> Shape:
    """Shape rule of ConcatInDim: the first shape with the sizes along ``dimension`` added up;
    ShapeError for ``dimension`` out of range or another rank or size, DTypeError for another
    element type."""
    first = shapes[0]
    r, d = first.rank(), dimension
    if not 0 <= d < r:
        shape_error(op, f"dimension {d} out of range for rank {r}")
    total = 0
    for i, s in enumerate(shapes):
        if s.element_type() is not first.element_type():
            want = first.element_type().name.lower()
            dtype_error(op, f"operand 'operands[{i}]' has element type {s}, expected {want}")
        same = s.rank() == r and all(
            a == b for j, (a, b) in enumerate(zip(s.dimensions(), first.dimensions(), strict=True)) if j != d
        )
        if not same:
            shape_error(op, f"operand 'operands[{i}]' has shape {s}, expected {first} except in dimension {d}")
        total += s.dimensions()[d]
    dims = list(first.dimensions())
    dims[d] = total
    return array_shape(first.element_type(), dims, op)


CONCATENATE = define(
    "stablehlo.concatenate", "concatenate", hlo_attrs=lambda o: f", dimensions={{{o.attrs['dimension']}}}",
    rule=concat_shape, attrs={"dimension": AttrKind.INT},
)


def ConcatInDim(builder: XlaBuilder, operands: Sequence[XlaOp], dimension: int) -> XlaOp:
    """Concatenate ``operands`` along ``dimension`` (XLA ``ConcatInDim``; ``stablehlo.concatenate``).

    All operands need the same element type and rank, and equal sizes except in ``dimension``.
    2-bit operands (s2, u2) are joined as s8/u8 and converted back (XLA:CPU crashes on a 2-bit
    concatenate).

    Raises
    ------
    ShapeError: no operands, rank or size mismatch, ``dimension`` out of range.
    DTypeError: element types differ.
    """
    op = "ConcatInDim"
    if not isinstance(builder, XlaBuilder):
        dtype_error(op, f"first argument must be an XlaBuilder, got {type(builder).__name__}")
    if isinstance(operands, XlaOp) or not isinstance(operands, (list, tuple)) or not operands:
        shape_error(op, "operands must be a non-empty list of XlaOps")
    xs = [_operand(op, f"operands[{i}]", o, builder) for i, o in enumerate(operands)]
    same_builder(op, [(f"operands[{i}]", o) for i, o in enumerate(xs)])
    d = int_arg(op, "dimension", dimension)
    shape = concat_shape(op, [o.shape for o in xs], d)
    dims = shape.dimensions()
    wide = _TWO_BIT_WIDE.get(shape.element_type())
    if wide is not None:  # XLA:CPU aborts the process compiling a 2-bit concatenate: join 8-bit copies
        xs = [builder.add_op(CONVERT, (o,), array_shape(wide, o.shape.dimensions(), op)) for o in xs]
        joined = builder.add_op(CONCATENATE, tuple(xs), array_shape(wide, dims, op), {"dimension": d})
        return builder.add_op(CONVERT, (joined,), shape)
    return builder.add_op(CONCATENATE, tuple(xs), shape, {"dimension": d})


# -- Rev, SliceInDim, Pad, Collapse -----------------------------------------------------------


def rev_shape(op: str, operand: Shape, dimensions: tuple[int, ...]) -> Shape:
    """Shape rule of Rev: the operand's shape; ShapeError for a repeated or out-of-range dimension."""
    r = operand.rank()
    if len(set(dimensions)) != len(dimensions) or any(not 0 <= d < r for d in dimensions):
        shape_error(
            op, f"dimensions {list(dimensions)} must be distinct dimension numbers in [0, {r}) for operand {operand}"
        )
    return operand


REVERSE = define(
    "stablehlo.reverse", "reverse", hlo_attrs=lambda o: f", dimensions={braces(o.attrs['dimensions'])}",
    rule=rev_shape, attrs={"dimensions": AttrKind.INTS},
)


def Rev(operand: XlaOp, dimensions: Sequence[int]) -> XlaOp:
    """Reverse the order of elements along ``dimensions`` (XLA ``Rev``; ``stablehlo.reverse``).

    Parameters
    ----------
    operand: array ``(d0, ..., dr-1)`` of any element type.
    dimensions: distinct dimension numbers in ``[0, r)`` (may be empty: a copy).

    Returns
    -------
    XlaOp of the operand's shape and element type.

    Raises
    ------
    ShapeError: a dimension repeated or out of range.
    """
    op = "Rev"
    x = _operand(op, "operand", operand)
    dims = int_list(op, "dimensions", dimensions)
    return x.builder.add_op(REVERSE, (x,), rev_shape(op, x.shape, dims), {"dimensions": dims})


def slice_in_dim_shape(
    op: str, operand: Shape, start_index: int, limit_index: int, stride: int, dimno: int
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Shape rule of SliceInDim: the full ``(start, limit, strides)`` of the slice and its result
    dimensions (:func:`slice_shape`); ShapeError for ``dimno`` out of range or bad indices."""
    dims = operand.dimensions()
    if not 0 <= dimno < len(dims):
        shape_error(op, f"dimno {dimno} out of range for operand {operand} (rank {len(dims)})")
    start, limit, strides = [0] * len(dims), list(dims), [1] * len(dims)
    start[dimno], limit[dimno], strides[dimno] = start_index, limit_index, stride
    out = slice_shape(op, dims, tuple(start), tuple(limit), tuple(strides))
    return tuple(start), tuple(limit), tuple(strides), out


def SliceInDim(operand: XlaOp, start_index: int, limit_index: int, stride: int, dimno: int) -> XlaOp:
    """Static slice ``start_index:limit_index:stride`` of dimension ``dimno`` only, the other
    dimensions whole (XLA ``SliceInDim``; ``stablehlo.slice``).

    Parameters
    ----------
    operand: array ``(d0, ..., dr-1)`` of any element type.
    start_index, limit_index: ``0 <= start_index <= limit_index <= d_dimno``.
    stride: >= 1.
    dimno: the dimension to slice, in ``[0, r)``.

    Returns
    -------
    XlaOp with dimension ``dimno`` of size ``ceil((limit_index - start_index) / stride)``.

    Raises
    ------
    ShapeError: ``dimno`` out of range, indices out of bounds or decreasing, stride < 1, a
        non-int argument.
    """
    op = "SliceInDim"
    x = _operand(op, "operand", operand)
    st = int_arg(op, "start_index", start_index)
    li = int_arg(op, "limit_index", limit_index)
    sr = int_arg(op, "stride", stride)
    d = int_arg(op, "dimno", dimno)
    start, limit, strides, dims = slice_in_dim_shape(op, x.shape, st, li, sr, d)
    return x.builder.add_op(
        SLICE, (x,), array_shape(x.shape.element_type(), dims, op),
        {"start_indices": start, "limit_indices": limit, "strides": strides},
    )


def pad_shape(op: str, dims: tuple[int, ...], config: Sequence[tuple[int, int, int]]) -> tuple[int, ...]:
    """Shape rule of Pad: ``lo + hi + d + max(d - 1, 0) * interior`` per dimension, each >= 0."""
    if len(config) != len(dims):
        shape_error(op, f"padding_config has {len(config)} dimensions, expected {len(dims)} (the operand rank)")
    out = []
    for i, (d, (lo, hi, interior)) in enumerate(zip(dims, config, strict=True)):
        inner = d + max(d - 1, 0) * interior
        if not all(INT64_MIN <= v <= INT64_MAX for v in (lo, hi, interior, inner)):
            shape_error(
                op, f"padding_config dimension {i} (lo {lo}, hi {hi}, interior {interior}) on size {d}: the "
                "paddings and the interior-padded size must fit in int64"
            )
        n = lo + hi + inner
        if n < 0:
            shape_error(
                op, f"padding_config dimension {i} (lo {lo}, hi {hi}, interior {interior}) on size {d} gives a "
                f"negative size {n}"
            )
        out.append(n)
    return tuple(out)


PAD = define(
    "stablehlo.pad", "pad", hlo_attrs=_pad_hlo, rule=pad_shape,
    attrs={"edge_padding_low": AttrKind.INTS, "edge_padding_high": AttrKind.INTS, "interior_padding": AttrKind.INTS},
)


def Pad(operand: XlaOp, padding_value: XlaOp, padding_config: PaddingConfig | Sequence[Sequence[int]]) -> XlaOp:
    """Pad ``operand`` with ``padding_value`` at the edges and between elements (XLA ``Pad``;
    ``stablehlo.pad``).

    Per dimension, ``interior`` copies of the value go between neighbouring elements, then
    ``lo`` before and ``hi`` after; a negative ``lo``/``hi`` removes that many elements from
    that end of the interior-padded array (it may cut into the padding of the other end).
    Result element ``j`` of a dimension is operand element ``(j - lo) / (interior + 1)`` when that
    is a whole number in range, else ``padding_value``.

    Parameters
    ----------
    operand: array ``(d0, ..., dr-1)`` of any element type.
    padding_value: scalar of the operand's element type.
    padding_config: :class:`xlasdk.PaddingConfig` (see :func:`xlasdk.make_padding_config`) or a
        sequence of ``(lo, hi, interior)`` / ``(lo, hi)`` per dimension; ``interior >= 0``.

    Returns
    -------
    XlaOp with dimension ``i`` of size ``lo + hi + d_i + max(d_i - 1, 0) * interior``.

    Raises
    ------
    ShapeError: ``padding_value`` not a scalar, ``padding_config`` malformed or of another rank,
        a negative interior padding, or a negative result size.
    DTypeError: ``padding_value`` of another element type.
    """
    op = "Pad"
    x = _operand(op, "operand", operand)
    pv = _operand(op, "padding_value", padding_value)
    same_builder(op, [("operand", x), ("padding_value", pv)])
    if pv.shape.rank() != 0:
        shape_error(op, f"operand 'padding_value' must be a scalar, got {pv.shape}")
    et = x.shape.element_type()
    if pv.shape.element_type() is not et:
        dtype_error(op, f"operand 'padding_value' is {pv.shape}, expected {et.name.lower()}[] like operand {x.shape}")
    triples = padding_triples(op, padding_config)
    dims = pad_shape(op, x.shape.dimensions(), triples)
    attrs = {
        "edge_padding_low": tuple(t[0] for t in triples),
        "edge_padding_high": tuple(t[1] for t in triples),
        "interior_padding": tuple(t[2] for t in triples),
    }
    return x.builder.add_op(PAD, (x, pv), array_shape(et, dims, op), attrs)


def padding_triples(op: str, padding_config: Any) -> list[tuple[int, int, int]]:
    """``(lo, hi, interior)`` per dimension from a PaddingConfig (its fields read and checked
    here) or a sequence of ``(lo, hi)`` / ``(lo, hi, interior)``; interior >= 0 (ShapeError)."""
    name = "padding_config"
    if isinstance(padding_config, PaddingConfig):
        entries = padding_config.dimensions
        name = "padding_config.dimensions"
        if not isinstance(entries, (list, tuple)):
            shape_error(op, f"{name} must be a list of PaddingConfigDimension, got {show(entries)}")
    else:
        entries = padding_config
    rows: list[tuple[int, ...]] = []
    if isinstance(entries, (list, tuple)) and any(isinstance(e, PaddingConfigDimension) for e in entries):
        for i, e in enumerate(entries):
            if not isinstance(e, PaddingConfigDimension):
                shape_error(op, f"{name}[{i}] must be a PaddingConfigDimension like the others, got {show(e)}")
            rows.append(tuple(
                int_arg(op, f"{name}[{i}].{f}", getattr(e, f, None))
                for f in ("edge_padding_low", "edge_padding_high", "interior_padding")
            ))
    else:
        rows = int_tuples(op, name, entries, "(lo, hi) or (lo, hi, interior)", (2, 3))
    out = []
    for i, r in enumerate(rows):
        lo, hi, interior = r if len(r) == 3 else (r[0], r[1], 0)
        if interior < 0:
            shape_error(op, f"{name}[{i}]: interior_padding must be >= 0, got {interior}")
        out.append((lo, hi, interior))
    return out


def collapse_shape(op: str, operand: Shape, dimensions: tuple[int, ...]) -> Shape:
    """Shape rule of Collapse: dimensions ``k..m`` replaced by their product (the operand's shape
    for zero or one dimension); ShapeError for dimensions out of range or not consecutive."""
    xd, dims = operand.dimensions(), dimensions
    if any(not 0 <= d < len(xd) for d in dims):
        shape_error(op, f"dimensions {list(dims)} out of range for operand {operand} (rank {len(xd)})")
    if dims and list(dims) != list(range(dims[0], dims[0] + len(dims))):
        shape_error(op, f"dimensions {list(dims)} must be consecutive and ascending")
    if len(dims) <= 1:
        return operand
    n = 1
    for d in dims:
        n *= xd[d]
    return array_shape(operand.element_type(), xd[: dims[0]] + (n,) + xd[dims[-1] + 1 :], op)


def Collapse(operand: XlaOp, dimensions: Sequence[int]) -> XlaOp:
    """Merge the consecutive dimensions ``dimensions`` into one (XLA ``Collapse``; a
    ``stablehlo.reshape``).

    ``Collapse(x[2,3,4], [1, 2])`` has shape ``(2, 12)``; zero or one dimension returns the
    operand itself.

    Parameters
    ----------
    operand: array ``(d0, ..., dr-1)`` of any element type.
    dimensions: ascending consecutive dimension numbers ``[k, k+1, ..., m]`` in ``[0, r)``.

    Returns
    -------
    XlaOp of the operand's element type with dimensions ``k..m`` replaced by their product.

    Raises
    ------
    ShapeError: dimensions out of range, not ascending or not consecutive.
    """
    op = "Collapse"
    x = _operand(op, "operand", operand)
    dims = int_list(op, "dimensions", dimensions)
    result = collapse_shape(op, x.shape, dims)
    if len(dims) <= 1:
        return x
    return Reshape(x, result.dimensions())


# -- dynamic shapes -------------------------------------------------------------------------------
# Bounded dynamic dimensions (``f32[<=5]``): a static bound and a size known at run time. What
# jaxlib 0.10.2's CPU compiler does with them (checked): SetDimensionSize, GetDimensionSize and the
# ops after them respect the run-time size (a Reduce sums only the first ``n`` elements); a
# dynamic *result* comes back padded to its bound, written densely in its real extents
# (xs.compile returns the real extents); a dynamic *parameter* does not compile (``Custom call
# target PadToStatic is not implemented``), so xs.compile takes it as a static argument of its
# bounds plus s32[] sizes joined by set_dimension_size (see xlasdk.runtime.dynamic).

def _dimension_check(op: str, operand: Shape, dimension: int) -> None:
    if not 0 <= dimension < operand.rank():
        shape_error(op, f"dimension {dimension} out of range for operand {operand} (rank {operand.rank()})")


def _with_dynamic(operand: Shape, dimension: int, dynamic: bool) -> Shape:
    dyn = [operand.is_dynamic_dimension(i) for i in range(operand.rank())]
    dyn[dimension] = dynamic
    return Shape.array_shape(operand.element_type(), operand.dimensions(), dynamic_dimensions=dyn)


def get_dimension_size_shape(op: str, operand: Shape, dimension: int) -> Shape:
    """Shape rule of GetDimensionSize: ``s32[]``; ShapeError for ``dimension`` out of range."""
    _dimension_check(op, operand, dimension)
    return array_shape(PrimitiveType.S32, (), op)


GET_DIMENSION_SIZE = define(
    "stablehlo.get_dimension_size", rule=get_dimension_size_shape, attrs={"dimension": AttrKind.INT}
)


def set_dimension_size_shape(op: str, operand: Shape, dimension: int) -> Shape:
    """Shape rule of SetDimensionSize: the operand's shape with ``dimension`` dynamic; ShapeError
    for ``dimension`` out of range or of a size (the bound) of 2**31 or more."""
    _dimension_check(op, operand, dimension)
    bound = operand.dimensions()[dimension]
    if bound > 2**31 - 1:  # the size is an s32: XLA rejects larger bounds when compiling
        shape_error(
            op, f"dimension {dimension} of {operand} has size {bound}; a dynamic dimension's bound must be < 2**31"
        )
    return _with_dynamic(operand, dimension, True)


SET_DIMENSION_SIZE = define(  # also written by emit_module for padded dynamic arguments
    "stablehlo.set_dimension_size", rule=set_dimension_size_shape
)


def remove_dynamic_dimension_shape(op: str, operand: Shape, dimension: int) -> Shape:
    """Shape rule of RemoveDynamicDimension: the operand's shape with ``dimension`` static (at its
    bound); ShapeError for ``dimension`` out of range."""
    _dimension_check(op, operand, dimension)
    return _with_dynamic(operand, dimension, False)


def _size_operand(op: str, name: str, x: XlaOp, value: Any) -> XlaOp:
    from .sources import Constant

    if isinstance(value, XlaOp):
        v = _operand(op, name, value, x.builder)
        if v.shape.rank() != 0 or v.shape.element_type() is not PrimitiveType.S32:
            dtype_error(op, f"operand {name!r} must be an s32[] scalar, got {v.shape}")
        return v
    return Constant(x.builder, np.int32(int_arg(op, name, value, lo=0, hi=2**31 - 1)))


def GetDimensionSize(operand: XlaOp, dimension: int) -> XlaOp:
    """The run-time size of one dimension (XLA ``GetDimensionSize``; ``stablehlo.get_dimension_size``).

    Parameters
    ----------
    operand: an array; dimension: ``0 <= dimension < rank``.

    Returns
    -------
    XlaOp ``s32[]``: the size (for a static dimension, the size itself; for a bounded dynamic
    one, ``<= bound``, as set by :func:`SetDimensionSize` or :func:`DynamicReshape`).

    Raises
    ------
    DTypeError: ``operand`` not an XlaOp, ``dimension`` not an int.
    ShapeError: ``dimension`` out of range.
    """
    op = "GetDimensionSize"
    x = _operand(op, "operand", operand)
    d = int_arg(op, "dimension", dimension)
    return x.builder.add_op(GET_DIMENSION_SIZE, (x,), get_dimension_size_shape(op, x.shape, d), {"dimension": d})


def SetDimensionSize(operand: XlaOp, val: XlaOp | int, dimension: int) -> XlaOp:
    """Make one dimension dynamic with run-time size ``val`` (XLA ``SetDimensionSize``;
    ``stablehlo.set_dimension_size``).

    The data stays as it is: the first ``val`` entries along ``dimension`` are the array, the
    rest padding that later ops ignore.

    Parameters
    ----------
    operand: an array ``(..., d, ...)``; its size ``d`` along ``dimension`` (or its bound, if
        that dimension is already dynamic) becomes the bound.
    val: an ``s32[]`` XlaOp (or an int) with ``0 <= val <= d`` (a larger value is undefined
        behaviour in XLA; xlasdk checks ints).
    dimension: ``0 <= dimension < rank``.

    Returns
    -------
    XlaOp of the operand's shape with ``dimension`` dynamic: ``f32[<=d, ...]``.

    Raises
    ------
    DTypeError: ``val`` not an s32 scalar or int. ShapeError: ``dimension`` out of range or of
    size 2**31 or more, an int ``val`` outside ``[0, d]``, operands of different builders.
    """
    op = "SetDimensionSize"
    x = _operand(op, "operand", operand)
    d = int_arg(op, "dimension", dimension)
    result = set_dimension_size_shape(op, x.shape, d)
    bound = x.shape.dimensions()[d]
    if not isinstance(val, XlaOp):
        n = int_arg(op, "val", val)
        if not 0 <= n <= bound:
            shape_error(op, f"val {n} out of range [0, {bound}] for dimension {d} of {x.shape}")
    v = _size_operand(op, "val", x, val)
    return x.builder.add_op(SET_DIMENSION_SIZE, (x, v), result, {"dimension": d})


def DynamicReshape(
    operand: XlaOp,
    dim_sizes: Sequence[XlaOp | int],
    new_size_bounds: Sequence[int],
    dims_are_dynamic: Sequence[bool],
) -> XlaOp:
    """Reshape to ``new_size_bounds``, with the dimensions flagged in ``dims_are_dynamic`` of
    run-time size ``dim_sizes[i]`` (XLA ``DynamicReshape``).

    Built as a static ``Reshape`` to the bounds (which must hold the operand's elements exactly,
    as XLA requires) followed by :func:`SetDimensionSize` on each dynamic dimension, which is what
    XLA's ``DynamicReshape`` computes for a static operand.

    Parameters
    ----------
    operand: a static array (a dynamic one raises: reshaping its padded data would mix padding
        into the values).
    dim_sizes: one ``s32[]`` XlaOp or int per output dimension (used for the dynamic ones).
    new_size_bounds: the output's bounds, with ``prod(new_size_bounds)`` equal to the operand's
        element count.
    dims_are_dynamic: one bool per output dimension.

    Returns
    -------
    XlaOp ``(b0, b1, ...)`` with the flagged dimensions dynamic (``f32[<=b0, b1]``).

    Raises
    ------
    ShapeError: lists of different lengths, an element count that differs, a dynamic operand, a
    size outside ``[0, bound]``. DTypeError: a size that is not an s32 scalar or int, a flag that
    is not a bool.
    """
    op = "DynamicReshape"
    x = _operand(op, "operand", operand)
    if not x.shape.is_static():
        shape_error(op, f"operand {x.shape} must be static (set its sizes after reshaping)")
    bounds = int_list(op, "new_size_bounds", new_size_bounds)
    if isinstance(dims_are_dynamic, (str, bytes)) or not isinstance(dims_are_dynamic, (list, tuple)):
        dtype_error(op, f"dims_are_dynamic must be a list of bools, got {show(dims_are_dynamic)}")
    flags = [bool_arg(op, f"dims_are_dynamic[{i}]", f) for i, f in enumerate(dims_are_dynamic)]
    if isinstance(dim_sizes, XlaOp) or not isinstance(dim_sizes, (list, tuple)):
        dtype_error(op, f"dim_sizes must be a list of s32[] XlaOps or ints, got {show(dim_sizes)}")
    if not len(dim_sizes) == len(bounds) == len(flags):
        shape_error(
            op, f"dim_sizes ({len(dim_sizes)}), new_size_bounds ({len(bounds)}) and dims_are_dynamic "
            f"({len(flags)}) must have one entry per output dimension"
        )
    y = Reshape(x, bounds)
    for i, (size, dyn) in enumerate(zip(dim_sizes, flags, strict=True)):
        if dyn:
            if not isinstance(size, XlaOp):
                n = int_arg(op, f"dim_sizes[{i}]", size)
                if not 0 <= n <= bounds[i]:
                    shape_error(op, f"dim_sizes[{i}] = {n} out of range [0, {bounds[i]}]")
            y = SetDimensionSize(y, _size_operand(op, f"dim_sizes[{i}]", x, size), i)
    return y


def RemoveDynamicDimension(operand: XlaOp, dimension: int) -> XlaOp:
    """Make a dynamic dimension static again at its bound (XLA ``RemoveDynamicDimension``):
    the padding past the run-time size becomes part of the array (its values are unspecified).

    Built as ``stablehlo.set_dimension_size`` to the bound, whose result type is static.

    Returns
    -------
    XlaOp of the operand's bounds with ``dimension`` static.

    Raises
    ------
    ShapeError: ``dimension`` out of range. DTypeError: ``operand`` not an XlaOp.
    """
    op = "RemoveDynamicDimension"
    x = _operand(op, "operand", operand)
    d = int_arg(op, "dimension", dimension)
    result = remove_dynamic_dimension_shape(op, x.shape, d)
    if not x.shape.is_dynamic_dimension(d):
        return x
    from .sources import Constant

    size = Constant(x.builder, np.int32(x.shape.dimensions()[d]))
    return x.builder.add_op(SET_DIMENSION_SIZE, (x, size), result, {"dimension": d})
