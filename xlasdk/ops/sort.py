"""Sorting: ``Sort`` (variadic, with a comparator) and ``TopK``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import numpy as np

from .._optable import AttrKind, HloForm, define
from ..builder import Region, XlaBuilder, XlaOp
from ..errors import DTypeError
from ..shape import Shape
from ..types import COMPLEX, FLOATS, PrimitiveType
from ._core import (
    ComputationLike,
    array_shape,
    bool_arg,
    dtype_error,
    int_arg,
    is_computation_like,
    shape_error,
    show,
    subcomputation,
    tuple_element,
    tuple_node,
)
from ._core import operand as _operand
from .convert import CONVERT
from .reduce import as_op_list, same_dimensions


def _sort_hlo(o: XlaOp) -> str:
    return f", dimensions={{{o.attrs['dimension']}}}" + (", is_stable=true" if o.attrs["is_stable"] else "")


__all__ = ["Sort", "TopK", "ApproxTopK", "ApproxTopKFallback", "ApproxTopKReductionOutputSize"]

_PRED_SCALAR = Shape._make(PrimitiveType.PRED, ())
_TWO_BIT = frozenset({PrimitiveType.S2, PrimitiveType.U2})
# Sub-byte types TopK widens (XLA:CPU's top_k and sort reject them); the values are exact in the wider type.
_TOPK_WIDE = {
    PrimitiveType.S2: PrimitiveType.S8, PrimitiveType.U2: PrimitiveType.U8, PrimitiveType.S4: PrimitiveType.S8,
    PrimitiveType.U4: PrimitiveType.U8, PrimitiveType.F4E2M1FN: PrimitiveType.F32,
}


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _less(lhs: XlaOp, rhs: XlaOp) -> XlaOp:
    """``lhs < rhs`` in XLA's total order (floats: -NaN < -inf < ... < -0 < +0 < ... < inf < NaN;
    complex: lexicographic on (real, imag) in that order)."""
    from .elementwise import And, Compare, Eq, Imag, Or, Real

    et = lhs.shape.element_type()
    if et in COMPLEX:
        lr, rr = Real(lhs), Real(rhs)
        return Or(
            Compare(lr, rr, "LT", "TOTALORDER"),
            And(Eq(lr, rr), Compare(Imag(lhs), Imag(rhs), "LT", "TOTALORDER")),
        )
    return Compare(lhs, rhs, "LT", "TOTALORDER" if et in FLOATS else None)


def default_comparator(*args: XlaOp) -> XlaOp:
    """XLA's default sort order: ascending on the first operand in total order.

    Takes ``(lhs_0, rhs_0, lhs_1, rhs_1, ...)`` scalars and returns ``lhs_0 < rhs_0`` with
    :func:`_less` (the other operands ride along as payloads).
    """
    return _less(args[0], args[1])


def _comparator_region(op: str, comparator: Any, xs: Sequence[XlaOp], builder: XlaBuilder) -> Region:
    scalars: list[Shape] = []
    for x in xs:
        s = Shape._make(x.shape.element_type(), ())
        scalars += [s, s]
    region, results = subcomputation(op, "comparator", comparator, scalars, builder)
    if len(results) != 1 or results[0] != _PRED_SCALAR:
        shape_error(
            op, f"comparator returns ({', '.join(map(str, results))}) but must return one pred[] "
            "(true when lhs sorts before rhs)"
        )
    return region


def sort_shape(op: str, operands: Sequence[Shape], dimension: int) -> Shape:
    """Result shape of Sort (a tuple for several operands); raises ShapeError/DTypeError on operands
    that differ, scalars, 2-bit types or ``dimension`` out of range."""
    dims0 = same_dimensions(op, operands)
    rank = len(dims0)
    if rank == 0:
        shape_error(op, f"operand 'operands[0]' is the scalar {operands[0]}; sorting needs rank >= 1")
    two_bit = [k for k, x in enumerate(operands) if x.element_type() in _TWO_BIT]
    if two_bit:  # XLA:CPU sorts them wrongly, or fails to compile beside other widths
        dtype_error(
            op, f"operand 'operands[{two_bit[0]}]' is {operands[two_bit[0]]}: XLA:CPU cannot sort 2-bit types "
            "(s2, u2); ConvertElementType them to s8/u8 first"
        )
    if not -rank <= dimension < rank:
        shape_error(op, f"dimension {dimension} out of range for rank {rank} operands {operands[0]}")
    return operands[0] if len(operands) == 1 else Shape.tuple_shape(list(operands))


SORT = define(
    "stablehlo.sort", "sort", hlo_form=HloForm.REGION, hlo_attrs=_sort_hlo, rule=sort_shape,
    attrs={"dimension": AttrKind.INT, "is_stable": AttrKind.BOOL},
)


@overload
def Sort(
    builder: XlaBuilder,
    operands: XlaOp | Sequence[XlaOp],
    dimension: int = -1,
    is_stable: bool = False,
    comparator: ComputationLike | None = None,
) -> XlaOp: ...


@overload
def Sort(
    builder: XlaBuilder,
    operands: XlaOp | Sequence[XlaOp],
    comparator: ComputationLike,
    dimension: int = -1,
    is_stable: bool = False,
    /,
) -> XlaOp: ...  # the former xla_client order


def Sort(
    builder: XlaBuilder,
    operands: XlaOp | Sequence[XlaOp],
    dimension: int | ComputationLike = -1,  # the comparator, in the former order
    is_stable: bool | int = False,  # the dimension, in the former order
    comparator: ComputationLike | bool | None = None,  # is_stable, in the former order
) -> XlaOp:
    """Sort arrays along one dimension, together, by a comparator (XLA ``Sort``; ``stablehlo.sort``).

    Parameters
    ----------
    builder: the XlaBuilder.
    operands: one array or a list of N arrays of equal dimensions ``(d0, ..., dr-1)``, r >= 1
        (element types may differ). All are permuted the same way: operands after the first
        ride along as payloads unless the comparator looks at them.
    dimension: the dimension to sort along; negative counts from the end (default -1, the last).
    is_stable: keep the original order of elements the comparator finds equivalent. When
        false the order of equivalent elements is unspecified.
    comparator: XlaComputation (built by another builder) or Python callable taking ``2 * N``
        scalars ``(lhs_0, rhs_0, lhs_1, rhs_1, ...)`` in XLA's order (``lhs_i``/``rhs_i`` of
        ``operands[i]``'s element type) and returning ``pred[]``: true when lhs sorts strictly
        before rhs. It must be a strict weak order, otherwise the result is unspecified. Default:
        ascending on ``operands[0]`` in XLA's total order (floats: -NaN < -inf < ... < -0.0 <
        +0.0 < ... < +inf < +NaN; complex: by real part, then imaginary part; integers and pred
        by value).

        For the former ``xla_client`` argument order ``Sort(builder, operands, comparator,
        dimension, is_stable)``, a computation given third is recognised as the comparator.

    Returns
    -------
    For N = 1 an XlaOp of the operand's shape; for N > 1 a tuple-shaped XlaOp of the N sorted
    arrays (take them with ``GetTupleElement``).

    Raises
    ------
    ShapeError: no operands, operand dimensions differ, a rank-0 operand, ``dimension`` out of
        range, or a comparator whose parameters or result do not match.
    DTypeError: an operand is not an XlaOp, ``dimension`` is not an int, ``is_stable`` is not a
        bool, ``comparator`` is neither a callable nor an XlaComputation, or a 2-bit (s2, u2)
        operand (XLA:CPU sorts them wrongly; convert them to s8/u8 first).
    """
    op = "Sort"
    if not isinstance(builder, XlaBuilder):
        dtype_error(op, f"first argument must be an XlaBuilder, got {type(builder).__name__}")
    # checked below, whatever the caller passed: the types above are what the forms accept
    dim: Any = dimension
    stable: Any = is_stable
    comp: Any = comparator
    if is_computation_like(dim):  # former order: (builder, operands, comparator, dimension, is_stable)
        dim, stable, comp = (stable if _is_int(stable) else -1, comp if comp is not None else False, dim)
    xs = as_op_list(op, "operands", operands, builder)
    if not _is_int(dim):
        dtype_error(op, f"dimension must be an int, got {show(dim)}")
    d = int(dim)
    shape = sort_shape(op, [x.shape for x in xs], d)
    d %= len(xs[0].shape.dimensions())
    if not isinstance(stable, (bool, np.bool_)):
        dtype_error(op, f"is_stable must be a bool, got {show(stable)}")
    region = _comparator_region(op, default_comparator if comp is None else comp, xs, builder)
    return builder.add_op(SORT, tuple(xs), shape, {"dimension": d, "is_stable": bool(stable)}, (region,))


def top_k_shape(op: str, operand: Shape, k: int) -> Shape:
    """Result shape ``(values, indices)`` of TopK; raises DTypeError on pred/complex operands,
    ShapeError on scalars or ``k`` outside ``[0, n]``."""
    et = operand.element_type()
    if et is PrimitiveType.PRED or et in COMPLEX:
        dtype_error(op, f"operand 'operand' is {operand}; TopK needs an integer or floating-point type")
    dims = operand.dimensions()
    if not dims:
        shape_error(op, f"operand 'operand' is the scalar {operand}; TopK needs rank >= 1")
    if not 0 <= k <= dims[-1]:
        shape_error(op, f"k = {k} out of range [0, {dims[-1]}] for operand {operand}")
    out_dims = dims[:-1] + (k,)
    return Shape.tuple_shape([array_shape(et, out_dims, op), array_shape(PrimitiveType.S32, out_dims, op)])


TOP_K = define("chlo.top_k", rule=top_k_shape, attrs={"k": AttrKind.INT})


def TopK(input: XlaOp, k: int, largest: bool = True) -> XlaOp:  # noqa: A002 - the former name
    """The ``k`` largest (or smallest) elements along the last dimension, with their indices.

    Parameters
    ----------
    input: array ``(..., n)`` of an integer or floating-point type, rank >= 1.
    k: how many elements to keep, ``0 <= k <= n``.
    largest: true (default) for the k largest, first the largest; false for the k smallest,
        first the smallest.

    Elements are ordered in XLA's total order (+NaN above +inf, -NaN below -inf, +0.0 above
    -0.0); equal elements keep their original order (lower index first).

    Returns
    -------
    A tuple-shaped XlaOp ``(values, indices)``: ``values`` of shape ``(..., k)`` and the
    operand's type, ``indices`` s32 ``(..., k)`` positions in the last dimension.

    Maps to ``chlo.top_k`` (XLA ``TopK``) when ``largest``; otherwise to a stable
    ``stablehlo.sort`` of (operand, iota) followed by slices. 2- and 4-bit operands (s2, u2, s4,
    u4, f4e2m1fn) are converted to s8/u8/f32 first and the values back (XLA:CPU cannot compile
    either form on them).

    Raises
    ------
    ShapeError: rank-0 operand, or ``k`` outside ``[0, n]``.
    DTypeError: ``k`` is not an int, or a pred or complex operand.
    """
    op = "TopK"
    x = _operand(op, "operand", input)
    if not _is_int(k):
        dtype_error(op, f"k must be an int, got {show(k)}")
    result = top_k_shape(op, x.shape, int(k))
    if not isinstance(largest, (bool, np.bool_)):
        dtype_error(op, f"largest must be a bool, got {show(largest)}")
    et, dims, kk = x.shape.element_type(), x.shape.dimensions(), int(k)
    values = result.tuple_shapes()[0]
    out_dims = values.dimensions()
    b = x.builder
    wide = _TOPK_WIDE.get(et)
    if wide is not None:  # computed in a wider type, then the values converted back (exact)
        t = TopK(b.add_op(CONVERT, (x,), array_shape(wide, dims, op)), kk, largest)
        return tuple_node(b, [b.add_op(CONVERT, (tuple_element(t, 0),), values), tuple_element(t, 1)])
    if largest:
        return b.add_op(TOP_K, (x,), result, {"k": kk})
    from .shaping import Slice
    from .sources import Iota

    iota = Iota(b, array_shape(PrimitiveType.S32, dims, op), len(dims) - 1)
    s = Sort(b, [x, iota], dimension=-1, is_stable=True)
    start, limit = (0,) * len(dims), out_dims
    return tuple_node(b, [Slice(tuple_element(s, i), start, limit) for i in range(2)])


# -- ApproxTopK ------------------------------------------------------------------------------------

def _recall(op: str, recall_target: Any) -> float:
    if isinstance(recall_target, (bool, np.bool_)) or not isinstance(recall_target, (int, float, np.number)):
        dtype_error(op, f"recall_target must be a float, got {show(recall_target)}")
    r = float(np.float32(recall_target))  # a C++ float in XLA
    if not 0 < r <= 1:
        shape_error(op, f"recall_target must be in (0, 1], got {show(recall_target)}")
    return r


def _reduction_output_size(
    op: str, input_size: int, rank: int, top_k: int, recall_target: float, aggregate_to_topk: bool,
    input_size_override: int,
) -> tuple[int, int]:
    """XLA's ``ApproxTopKReductionOutputSize`` (jaxlib's binding of it), its errors as ShapeError."""
    from .._jaxlib.approx_topk import reduction_output_size

    try:
        return reduction_output_size(input_size, rank, top_k, recall_target, aggregate_to_topk, input_size_override)
    except ValueError as e:
        shape_error(op, str(e))


def ApproxTopKReductionOutputSize(
    input_size: int,
    rank: int,
    top_k: int,
    recall_target: float,
    aggregate_to_topk: bool = True,
    input_size_override: int = -1,
) -> tuple[int, int]:
    """The size :func:`ApproxTopK` gives its reduction dimension, and the log2 of the reduction
    XLA's TPU kernel applies (XLA's ``ApproxTopKReductionOutputSize``; no op is built).

    Parameters
    ----------
    input_size: the operands' size in the reduction dimension, >= 0.
    rank: the operands' rank, >= 1.
    top_k: the number of elements asked for, >= 0.
    recall_target: the wanted recall, in (0, 1] (read as an f32, as XLA does).
    aggregate_to_topk: when true the output size is ``top_k`` (log2 reduction -1).
    input_size_override: the logical input size when the operands are a shard of a larger
        input (-1: ``input_size``); must be >= ``input_size``.

    Returns
    -------
    A tuple ``(output_size, log2_reduction)`` of ints.

    Raises
    ------
    ShapeError: a value out of range, or ``input_size_override`` below ``input_size``.
    DTypeError: an argument of the wrong type.
    """
    op = "ApproxTopKReductionOutputSize"
    n = int_arg(op, "input_size", input_size, lo=0, error=DTypeError)
    r = int_arg(op, "rank", rank, lo=1, error=DTypeError)
    k = int_arg(op, "top_k", top_k, lo=0, error=DTypeError)
    override = int_arg(op, "input_size_override", input_size_override, lo=-1, error=DTypeError)
    recall = _recall(op, recall_target)
    return _reduction_output_size(op, n, r, k, recall, bool_arg(op, "aggregate_to_topk", aggregate_to_topk), override)


def approx_top_k_shape(
    op: str, operands: Sequence[Shape], inits: Sequence[Shape], top_k: int, reduction_dim: int,
    recall_target: float, aggregate_to_topk: bool, input_size_override: int,
) -> Shape:
    """Result shape of ApproxTopK (a tuple: the operands cut to the output size along
    ``reduction_dim``); raises ShapeError/DTypeError on operands, init values or values out of range."""
    if len(inits) != len(operands):
        shape_error(op, f"{len(inits)} init_values for {len(operands)} operands; give one scalar per operand")
    dims0 = same_dimensions(op, operands)
    for i, (x, v) in enumerate(zip(operands, inits, strict=True)):
        if v.rank() != 0:
            shape_error(op, f"operand 'init_values[{i}]' has shape {v}, expected a scalar")
        if v.element_type() != x.element_type():
            dtype_error(
                op, f"operand 'init_values[{i}]' has element type {v}, expected {show(x.numpy_dtype())} like "
                f"'operands[{i}]' {x}"
            )
    rank = len(dims0)
    if rank == 0:
        shape_error(op, f"operand 'operands[0]' is the scalar {operands[0]}; ApproxTopK needs rank >= 1")
    d = int_arg(op, "reduction_dim", reduction_dim, lo=-rank, hi=rank - 1, error=DTypeError) % rank
    n = dims0[d]
    k = int_arg(op, "top_k", top_k, lo=0, hi=n, error=DTypeError)
    if not 0 < recall_target <= 1:
        shape_error(op, f"recall_target must be in (0, 1], got {show(recall_target)}")
    override = int_arg(op, "reduction_input_size_override", input_size_override, lo=-1, error=DTypeError)
    size, _ = _reduction_output_size(op, n, rank, k, recall_target, aggregate_to_topk, override)
    out = dims0[:d] + (min(size, n),) + dims0[d + 1:]
    return Shape.tuple_shape([array_shape(x.element_type(), out, op) for x in operands])


def _approx_top_k(
    op: str, builder: Any, operands: Any, init_values: Any, top_k: Any, reduction_dim: Any, comparator: Any,
    recall_target: Any, aggregate_to_topk: Any, reduction_input_size_override: Any,
) -> XlaOp:
    from .shaping import SliceInDim

    if not isinstance(builder, XlaBuilder):
        dtype_error(op, f"first argument must be an XlaBuilder, got {type(builder).__name__}")
    xs = as_op_list(op, "operands", operands, builder)
    inits = as_op_list(op, "init_values", init_values, builder)
    d = int_arg(op, "reduction_dim", reduction_dim, error=DTypeError)
    k = int_arg(op, "top_k", top_k, error=DTypeError)
    recall = _recall(op, recall_target)
    aggregate = bool_arg(op, "aggregate_to_topk", aggregate_to_topk)
    override = int_arg(op, "reduction_input_size_override", reduction_input_size_override, error=DTypeError)
    shape = approx_top_k_shape(op, [x.shape for x in xs], [v.shape for v in inits], k, d, recall, aggregate, override)
    if comparator is None:
        dtype_error(
            op, "comparator must be an XlaComputation or a callable (e.g. Gt on operands[0] for the top-k largest)"
        )
    d %= len(xs[0].shape.dimensions())
    size = shape.tuple_shapes()[0].dimensions()[d]
    s = Sort(builder, xs, dimension=d, is_stable=True, comparator=comparator)
    sorted_ = [s] if len(xs) == 1 else [tuple_element(s, i) for i in range(len(xs))]
    return tuple_node(builder, [SliceInDim(x, 0, size, 1, d) for x in sorted_])


def ApproxTopK(
    builder: XlaBuilder,
    operands: Sequence[XlaOp],
    init_values: Sequence[XlaOp],
    top_k: int,
    reduction_dim: int,
    comparator: ComputationLike,
    recall_target: float = 0.9,
    aggregate_to_topk: bool = True,
    reduction_input_size_override: int = -1,
) -> XlaOp:
    """The ``top_k`` first elements along ``reduction_dim`` in the comparator's order, of
    ``operands[0]`` with the others as payloads (XLA's ``ApproxTopK``; the former
    ``xla_client.ops.ApproxTopK``).

    XLA runs the approximate algorithm on TPU only; on CPU and GPU it runs its exact fallback,
    which this op builds directly: a stable ``stablehlo.sort`` by ``comparator`` and a
    ``stablehlo.slice`` to the output size. The results are therefore exact (recall 1), in the
    comparator's order.

    Parameters
    ----------
    builder: the XlaBuilder.
    operands: N arrays of equal dimensions ``(d0, ..., dr-1)``, r >= 1 (element types may differ,
        e.g. values and an s32 iota for their indices).
    init_values: N scalars, ``init_values[i]`` of ``operands[i]``'s element type (the identity
        of the reduction, e.g. -inf for a max-k; checked, not used by the fallback).
    top_k: how many elements, ``0 <= top_k <= d[reduction_dim]``.
    reduction_dim: the dimension to reduce; negative counts from the end.
    comparator: XlaComputation or callable of ``2 * N`` scalars ``(lhs_0, rhs_0, ...)`` returning
        pred[]: true when lhs comes first (``Gt`` on the first pair for a max-k).
    recall_target: wanted recall in (0, 1].
    aggregate_to_topk: true: keep ``top_k`` elements; false: keep
        ``ApproxTopKReductionOutputSize(...)[0]`` elements (what XLA's TPU kernel returns before
        its final aggregation).
    reduction_input_size_override: the logical size of ``reduction_dim`` when the operands are a
        shard (-1: none).

    Returns
    -------
    A tuple-shaped XlaOp of N arrays: the operands' dimensions with ``reduction_dim`` cut to the
    output size, sorted by the comparator (take them with ``GetTupleElement``).

    Raises
    ------
    ShapeError: operand dimensions differ, a rank-0 operand, the init value count or shapes differ,
        ``top_k``, ``reduction_dim``, ``recall_target`` or the override out of range, or a
        comparator whose parameters or result do not match.
    DTypeError: an argument of the wrong type, an init value of another element type, or no
        comparator.
    """
    return _approx_top_k(
        "ApproxTopK", builder, operands, init_values, top_k, reduction_dim, comparator, recall_target,
        aggregate_to_topk, reduction_input_size_override,
    )


def ApproxTopKFallback(
    builder: XlaBuilder,
    operands: Sequence[XlaOp],
    init_values: Sequence[XlaOp],
    top_k: int,
    reduction_dim: int,
    comparator: ComputationLike,
    recall_target: float = 0.9,
    aggregate_to_topk: bool = True,
    reduction_input_size_override: int = -1,
) -> XlaOp:
    """XLA's exact fallback of :func:`ApproxTopK` on every platform (the former
    ``xla_client.ops.ApproxTopKFallback``): a stable ``stablehlo.sort`` by ``comparator`` and a
    ``stablehlo.slice`` to ``ApproxTopKReductionOutputSize(...)[0]`` elements along
    ``reduction_dim`` (``top_k`` when ``aggregate_to_topk``).

    Parameters, Returns and Raises: as :func:`ApproxTopK`.
    """
    return _approx_top_k(
        "ApproxTopKFallback", builder, operands, init_values, top_k, reduction_dim, comparator, recall_target,
        aggregate_to_topk, reduction_input_size_override,
    )
