"""Window ops: ``ReduceWindow`` (variadic), ``ReduceWindowWithGeneralPadding`` and
``SelectAndScatterWithGeneralPadding``.

Shape rule (per dimension, shared by both ops): the operand of size ``n`` is base-dilated to
``(n - 1) * base_dilation + 1`` elements (0 when ``n == 0``), padded by ``lo + hi`` (negative
values crop), and a window of ``(w - 1) * window_dilation + 1`` elements slides over it with the
stride: ``floor((padded - dilated_window) / stride) + 1`` windows (0 when the window does not fit).

Negative padding is lowered as a ``stablehlo.slice`` of the operand followed by the window op
with the remaining non-negative padding (mathematically identical): XLA:CPU aborts the process
on some negative-padding reduce windows (its algebraic simplifier, case C-06).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._mlir_attrs import I64Elements
from .._optable import AttrKind, HloForm, HloUnsupported, define, hlo_window
from ..attrs import PaddingType, ScatterDimensionNumbers, convert_padding
from ..builder import Computation, Region, XlaBuilder, XlaOp
from ..errors import ShapeError
from ..shape import Shape
from ..types import PrimitiveType, etype_to_dtype
from ._core import (
    INT64_MAX,
    INT64_MIN,
    ComputationLike,
    array_shape,
    dtype_error,
    int_list,
    int_tuples,
    opt_int_list,
    same_builder,
    shape_error,
    subcomputation,
    tuple_element,
)
from ._core import (
    operand as _operand,
)
from .indexing import SCATTER
from .reduce import as_op_list, reducer_region
from .shaping import BROADCAST_IN_DIM, Slice

__all__ = ["ReduceWindow", "ReduceWindowWithGeneralPadding", "SelectAndScatterWithGeneralPadding"]

Pads = tuple[tuple[int, int], ...]


def _reduce_window_hlo(o: XlaOp) -> str:
    a = o.attrs
    rank = o.operands[0].shape.rank()
    if rank == 0:
        raise HloUnsupported("reduce-window of scalars")
    pads = [tuple(p) for p in a["padding"].values.tolist()] if "padding" in a else [(0, 0)] * rank
    window = hlo_window(
        a["window_dimensions"], a["window_strides"], pads, a["base_dilations"], a["window_dilations"]
    )
    return ", " + window


# -- shape rule ----------------------------------------------------------------------------------

def _dilated(size: int, factor: int) -> int:
    return (size - 1) * factor + 1 if size > 0 else 0


def reduce_window_shape(
    dims: Sequence[int],
    window_dimensions: Sequence[int],
    window_strides: Sequence[int],
    base_dilations: Sequence[int],
    window_dilations: Sequence[int],
    padding: Sequence[tuple[int, int]],
) -> tuple[int, ...]:
    """Output dimensions of a window op (attributes already checked; padded sizes >= 0)."""
    out = []
    for n, w, s, bd, wd, (lo, hi) in zip(
        dims, window_dimensions, window_strides, base_dilations, window_dilations, padding, strict=True
    ):
        padded = _dilated(n, bd) + lo + hi
        dwin = _dilated(w, wd)
        out.append(0 if padded < dwin else (padded - dwin) // s + 1)
    return tuple(out)


def split_negative_padding(
    dims: Sequence[int], base_dilations: Sequence[int], padding: Sequence[tuple[int, int]]
) -> tuple[tuple[int, ...], tuple[int, ...], Pads]:
    """Rewrite padding with negative entries as a slice of the operand plus non-negative padding.

    Returns ``(start, limit, pads)``: padding the base-dilated ``operand[start:limit]`` by
    ``pads`` (all ``>= 0``) gives the same array as padding the base-dilated operand by
    ``padding`` (both fill with the init value, as base-dilation holes are). Needs
    ``dilated(n) + lo + hi >= 0`` in each dimension.
    """
    starts, limits, pads = [], [], []
    for n, d, (lo, hi) in zip(dims, base_dilations, padding, strict=True):
        size = _dilated(n, d)
        total = size + lo + hi
        a, b = max(0, -lo), min(size, size + hi)  # kept range of dilated positions [a, b)
        i0 = min(-(-a // d), n)
        i1 = max(min(-(-b // d), n), i0) if b > a else i0
        m = i1 - i0
        new_lo = i0 * d + lo if m else total  # i0 * d >= a >= -lo, so new_lo >= 0
        new_hi = total - new_lo - _dilated(m, d)
        starts.append(i0)
        limits.append(i1)
        pads.append((new_lo, new_hi))
    return tuple(starts), tuple(limits), tuple(pads)


def window_padding(
    op: str,
    operand: Shape,
    xname: str,
    window_dimensions: Sequence[int],
    window_strides: Sequence[int],
    base_dilations: Sequence[int],
    window_dilations: Sequence[int],
    padding: Any,
) -> Pads:
    """The explicit ``(lo, hi)`` padding of a window op over ``operand`` (``padding`` SAME/VALID/
    PaddingType or pairs of ints), the window attributes checked; raises ShapeError."""
    dims = operand.dimensions()
    r = len(dims)
    win, strides, bdil, wdil = window_dimensions, window_strides, base_dilations, window_dilations
    for name, v in (
        ("window_dimensions", win), ("window_strides", strides),
        ("base_dilations", bdil), ("window_dilations", wdil),
    ):
        if len(v) != r:
            shape_error(op, f"{name} has {len(v)} entries, expected {r} (the rank of operand {xname!r} {operand})")
        if any(s < 1 for s in v):
            shape_error(op, f"{name} {list(v)} must all be >= 1 (operand {xname!r} {operand})")
    dil_in = [_dilated(n, d) for n, d in zip(dims, bdil, strict=True)]
    dil_win = [_dilated(w, d) for w, d in zip(win, wdil, strict=True)]
    if max(dil_in + dil_win, default=0) > INT64_MAX:  # XLA computes these sizes in int64
        shape_error(
            op, f"base-dilated operand sizes {dil_in} or dilated window sizes {dil_win} do not fit in int64 "
            f"(operand {xname!r} {operand})"
        )
    same_valid = isinstance(padding, (str, PaddingType))
    try:
        pads = tuple(
            (int(lo), int(hi))
            for lo, hi in convert_padding(padding, dil_in if same_valid else dims, dil_win if same_valid else win,
                                          strides)
        )
    except ShapeError as e:
        shape_error(op, f"{e} (operand {xname!r} {operand})")
    for i, (n, d, (lo, hi)) in enumerate(zip(dims, bdil, pads, strict=True)):
        if not all(INT64_MIN <= v <= INT64_MAX for v in (lo, hi, _dilated(n, d) + lo + hi)):
            shape_error(
                op, f"padding ({lo}, {hi}) of dimension {i} does not fit in int64 (operand {xname!r} {operand})"
            )
        if _dilated(n, d) + lo + hi < 0:
            shape_error(
                op, f"padding ({lo}, {hi}) of dimension {i} crops more than the {_dilated(n, d)} elements of the "
                f"(base-dilated) operand {xname!r} {operand}"
            )
    return pads


def _window_lists(
    op: str, rank: int, window_dimensions: Any, window_strides: Any, base_dilations: Any, window_dilations: Any,
    padding: Any,
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], Any]:
    """The window attributes parsed (dilations default to 1; padding pairs parsed, SAME/VALID kept)."""
    win = int_list(op, "window_dimensions", window_dimensions)
    strides = int_list(op, "window_strides", window_strides)
    bdil = opt_int_list(op, "base_dilations", base_dilations, (1,) * rank)
    wdil = opt_int_list(op, "window_dilations", window_dilations, (1,) * rank)
    if not isinstance(padding, (str, PaddingType)):
        padding = int_tuples(op, "padding", padding, "a (lo, hi) pair of ints", (2,))
    return win, strides, bdil, wdil, padding


def reduce_window_op_shape(
    op: str,
    operands: Sequence[Shape],
    inits: Sequence[Shape],
    window_dimensions: Sequence[int],
    window_strides: Sequence[int],
    base_dilations: Sequence[int],
    window_dilations: Sequence[int],
    padding: Any,
    operand_names: Sequence[str] | None = None,
    init_names: Sequence[str] | None = None,
) -> Shape:
    """Result shape of ReduceWindow (a tuple for several operands; names default to
    ``operands[i]``/``init_values[i]``); raises ShapeError/DTypeError."""
    xnames = operand_names if operand_names is not None else [f"operands[{i}]" for i in range(len(operands))]
    inames = init_names if init_names is not None else [f"init_values[{i}]" for i in range(len(inits))]
    if len(inits) != len(operands):
        shape_error(op, f"{len(operands)} operands but {len(inits)} init values")
    dims = operands[0].dimensions()
    for i, (x, v) in enumerate(zip(operands, inits, strict=True)):
        if x.dimensions() != dims:
            shape_error(
                op, f"operand {xnames[i]!r} has shape {x}, expected dimensions {list(dims)} like {xnames[0]!r}"
            )
        if v.rank() != 0:
            shape_error(op, f"operand {inames[i]!r} must be a scalar, got {v}")
        if v.element_type() is not x.element_type():
            dtype_error(
                op, f"operand {inames[i]!r} is {v}, expected {x.element_type().name.lower()}[] like "
                f"operand {xnames[i]!r} {x}"
            )
    pads = window_padding(
        op, operands[0], xnames[0], window_dimensions, window_strides, base_dilations, window_dilations, padding
    )
    out_dims = reduce_window_shape(dims, window_dimensions, window_strides, base_dilations, window_dilations, pads)
    outs = [array_shape(x.element_type(), out_dims, op) for x in operands]
    return outs[0] if len(outs) == 1 else Shape.tuple_shape(outs)


REDUCE_WINDOW = define(
    "stablehlo.reduce_window", "reduce-window", hlo_form=HloForm.REGION, hlo_attrs=_reduce_window_hlo,
    rule=reduce_window_op_shape,
    attrs={
        "window_dimensions": AttrKind.INTS, "window_strides": AttrKind.INTS, "base_dilations": AttrKind.INTS,
        "window_dilations": AttrKind.INTS, "padding": AttrKind.I64_ELEMENTS,
    },
)


def select_and_scatter_shape(
    op: str,
    operand: Shape,
    source: Shape,
    init: Shape,
    window_dimensions: Sequence[int],
    window_strides: Sequence[int],
    padding: Any,
) -> Shape:
    """Result shape of SelectAndScatter (the operand's); raises ShapeError/DTypeError on a bad
    init value, window or ``source`` shape."""
    et = operand.element_type()
    if init.rank() != 0:
        shape_error(op, f"operand 'init_value' must be a scalar, got {init}")
    for name, v in (("source", source), ("init_value", init)):
        if v.element_type() is not et:
            dtype_error(op, f"operand {name!r} is {v}, expected element type {et.name.lower()} like operand "
                        f"'operand' {operand}")
    dims = operand.dimensions()
    ones = (1,) * len(dims)
    pads = window_padding(op, operand, "operand", window_dimensions, window_strides, ones, ones, padding)
    expect = reduce_window_shape(dims, window_dimensions, window_strides, ones, ones, pads)
    if source.dimensions() != expect:
        shape_error(
            op, f"operand 'source' has shape {source}, expected {array_shape(et, expect, op)} (one element per "
            f"window position over operand {operand})"
        )
    return operand


def _crop(xs: list[XlaOp], start: tuple[int, ...], limit: tuple[int, ...]) -> list[XlaOp]:
    if start == (0,) * len(start) and limit == xs[0].shape.dimensions():
        return xs
    return [Slice(x, start, limit) for x in xs]


# -- ReduceWindow --------------------------------------------------------------------------------

def ReduceWindow(
    operand: XlaOp | Sequence[XlaOp],
    init_value: XlaOp | Sequence[XlaOp],
    computation: ComputationLike,
    window_dimensions: Sequence[int],
    window_strides: Sequence[int],
    padding: PaddingType | str | Sequence[tuple[int, int]],
    base_dilations: Sequence[int] = (),
    window_dilations: Sequence[int] = (),
) -> XlaOp:
    """Reduce each window of an array with a reducer (XLA ``ReduceWindow``; ``stablehlo.reduce_window``).

    Each output element is the reduction, by ``computation`` starting from ``init_value``, of the
    elements under one window position over the base-dilated, padded operand (the padding and
    the dilation holes hold ``init_value``). Pooling is ReduceWindow: max-pool with ``Max`` and
    ``-inf``, sum-pool with ``Add`` and 0.

    Parameters
    ----------
    operand: array of rank r, shape ``(d0, ..., dr-1)``, any element type; or a list of N such
        arrays of equal dimensions (element types may differ) for a variadic reduction (for
        example an argmax over (value, index) pairs).
    init_value: scalar of the operand's element type (or a list of N, one per operand); the
        reducer's identity (0 for add, -inf for max), as XLA may apply it any number of times.
    computation: reducer taking ``(acc_0..acc_{N-1}, x_0..x_{N-1})`` scalars (XLA's order) and
        returning N scalars: an XlaComputation, or a Python callable of XlaOps. The order in
        which elements of a window are combined is unspecified: use an associative and
        commutative reducer.
    window_dimensions: r window sizes >= 1.
    window_strides: r strides >= 1.
    padding: ``"SAME"``, ``"VALID"``, an ``xs.PaddingType``, or r ``(lo, hi)`` pairs; negative
        values crop. SAME gives ``ceil(dilated_in / stride)`` windows, computed on the
        base-dilated input and the dilated window.
    base_dilations: r factors >= 1 (``()`` for all 1): ``d - 1`` holes between input elements.
    window_dilations: r factors >= 1 (``()`` for all 1): the window skips ``d - 1`` elements.

    Returns
    -------
    XlaOp of shape ``(o0, ..., or-1)`` with ``o_i = floor((padded_i - dilated_window_i) /
    stride_i) + 1`` (0 when the window does not fit), where ``padded_i = (d_i - 1) *
    base_dilation_i + 1 + lo_i + hi_i``; for N > 1 operands a tuple-shaped XlaOp of N such
    arrays, of the operands' element types (take them with ``GetTupleElement``).

    Raises
    ------
    ShapeError: an attribute's length differs from the operand rank, a size, stride or dilation
        < 1, a padding that is not r pairs or crops more than the operand, operands of different
        dimensions, init values that are not scalars, a different number of operands and init
        values, or a reducer whose parameters or results do not match.
    DTypeError: an init value's element type differs from its operand's, or a non-XlaOp operand.

    Notes
    -----
    Negative padding is lowered as a ``stablehlo.slice`` of the operand and a reduce window
    with the remaining non-negative padding (same values; XLA:CPU aborts on some windows with
    negative padding otherwise).
    """
    return _reduce_window(
        "ReduceWindow", operand, init_value, computation, window_dimensions, window_strides,
        padding, base_dilations, window_dilations,
    )


def ReduceWindowWithGeneralPadding(
    operand: XlaOp | Sequence[XlaOp] | None = None,
    init_value: XlaOp | Sequence[XlaOp] | None = None,
    computation: ComputationLike | None = None,
    window_dimensions: Sequence[int] | None = None,
    window_strides: Sequence[int] | None = None,
    base_dilations: Sequence[int] | None = None,
    window_dilations: Sequence[int] | None = None,
    padding: Sequence[tuple[int, int]] | None = None,
    *,
    operands: Sequence[XlaOp] | None = None,
    init_values: Sequence[XlaOp] | None = None,
) -> XlaOp:
    """:func:`ReduceWindow` in the former ``xla_client`` argument order (``stablehlo.reduce_window``).

    ``padding`` is r ``(lo, hi)`` pairs (negative values crop); ``base_dilations`` and
    ``window_dilations`` are r factors >= 1 (empty means all 1). Parameters, result shape and
    errors are those of :func:`ReduceWindow`. The former variadic form's keywords
    ``operands=`` / ``init_values=`` may stand for ``operand`` / ``init_value``; every
    parameter but the dilations must be given (a ``DTypeError`` names a missing one).
    """
    op = "ReduceWindowWithGeneralPadding"
    operand = _one_of(op, "operand", operand, "operands", operands)
    init_value = _one_of(op, "init_value", init_value, "init_values", init_values)
    for name, v in (("computation", computation), ("window_dimensions", window_dimensions),
                    ("window_strides", window_strides), ("padding", padding)):
        if v is None:
            dtype_error(op, f"missing argument {name!r}")
    return _reduce_window(
        op, operand, init_value, computation, window_dimensions,
        window_strides, padding, base_dilations if base_dilations is not None else (),
        window_dilations if window_dilations is not None else (),
    )


def _one_of(op: str, name: str, value: Any, alias: str, alias_value: Any) -> Any:
    """``value`` or, under its former variadic keyword ``alias``, ``alias_value`` (one of them)."""
    if value is not None and alias_value is not None:
        dtype_error(op, f"give {name!r} or {alias!r}, not both")
    if value is None and alias_value is None:
        dtype_error(op, f"missing argument {name!r} (or {alias!r})")
    return value if value is not None else alias_value


def _reduce_window(
    op: str,
    operand: Any,
    init_value: Any,
    computation: Any,
    window_dimensions: Any,
    window_strides: Any,
    padding: Any,
    base_dilations: Any,
    window_dilations: Any,
) -> XlaOp:
    variadic = isinstance(operand, (list, tuple))
    xs = as_op_list(op, "operands", operand, None) if variadic else [_operand(op, "operand", operand)]
    vlist = isinstance(init_value, (list, tuple))
    inits = as_op_list(op, "init_values", init_value, None) if vlist else [_operand(op, "init_value", init_value)]
    xnames = [f"operands[{i}]" for i in range(len(xs))] if variadic else ["operand"]
    inames = [f"init_values[{i}]" for i in range(len(inits))] if vlist else ["init_value"]
    builder: XlaBuilder = same_builder(op, list(zip(xnames, xs, strict=True)) + list(zip(inames, inits, strict=True)))
    dims = xs[0].shape.dimensions()
    win, strides, bdil, wdil, padding = _window_lists(
        op, len(dims), window_dimensions, window_strides, base_dilations, window_dilations, padding
    )
    shape = reduce_window_op_shape(
        op, [x.shape for x in xs], [v.shape for v in inits], win, strides, bdil, wdil, padding, xnames, inames
    )
    pads = window_padding(op, xs[0].shape, xnames[0], win, strides, bdil, wdil, padding)
    region = reducer_region(op, computation, inits, builder)
    if any(lo < 0 or hi < 0 for lo, hi in pads):
        start, limit, pads = split_negative_padding(dims, bdil, pads)
        xs = _crop(xs, start, limit)
    attrs: dict[str, Any] = {
        "window_dimensions": tuple(win), "window_strides": tuple(strides), "base_dilations": tuple(bdil),
        "window_dilations": tuple(wdil),
    }
    if pads:
        attrs["padding"] = I64Elements([list(p) for p in pads])
    return builder.add_op(REDUCE_WINDOW, tuple(xs) + tuple(inits), shape, attrs, (region,))


# -- SelectAndScatter ----------------------------------------------------------------------------

def SelectAndScatterWithGeneralPadding(
    operand: XlaOp,
    select: ComputationLike,
    window_dimensions: Sequence[int],
    window_strides: Sequence[int],
    padding: PaddingType | str | Sequence[tuple[int, int]],
    source: XlaOp,
    init_value: XlaOp,
    scatter: ComputationLike,
) -> XlaOp:
    """Scatter ``source`` to the element each window selects (XLA ``SelectAndScatter``): the
    gradient of a pooling op. Lowered to ``stablehlo.reduce_window`` + ``stablehlo.scatter``
    (see Notes), not ``stablehlo.select_and_scatter``.

    For each window position (as in :func:`ReduceWindow`, no dilation), one operand element is
    selected by scanning the window in row-major order: the current choice ``a`` is kept while
    ``select(a, b)`` is true and replaced by ``b`` otherwise (with ``Ge``: the first maximum in
    row-major order wins ties). The matching ``source`` element is combined into the output at
    the selected position with ``scatter``; the output starts as ``init_value`` everywhere. With
    ``Ge`` and ``Add`` this is the max-pool gradient. Padding positions are never selected; a
    window that holds only padding drops its source element.

    Parameters
    ----------
    operand: array of rank r, shape ``(d0, ..., dr-1)``.
    select: ``(a, b) -> pred`` over two scalars of the operand's element type (XlaComputation
        or Python callable); should be a total order such as ``Ge`` / ``Le``.
    window_dimensions: r window sizes >= 1.
    window_strides: r strides >= 1.
    padding: r ``(lo, hi)`` pairs (negative values crop: cropped elements are never selected),
        or ``"SAME"`` / ``"VALID"`` / an ``xs.PaddingType``.
    source: array of the operand's element type and of the ReduceWindow output shape for these
        window attributes (one element per window position).
    init_value: scalar of the operand's element type, the output's initial value.
    scatter: reducer ``(acc, x) -> scalar`` over the element type (usually ``Add``).

    Returns
    -------
    XlaOp of the operand's shape ``(d0, ..., dr-1)`` and element type.

    Raises
    ------
    ShapeError: attribute lengths differ from r, sizes or strides < 1, bad padding, ``source``
        not of the window output shape, ``init_value`` not a scalar, or ``select`` / ``scatter``
        with the wrong parameters or results.
    DTypeError: ``source`` or ``init_value`` of another element type than the operand.

    Notes
    -----
    XLA documents that ``select(a, b)`` is called with ``a`` before ``b`` in row-major order and
    must be transitive, so the choice does not depend on the scan order. XLA:CPU does not keep
    that order (its expansion picks another of several tied elements), so xlasdk lowers the op
    itself: a variadic ``stablehlo.reduce_window`` over (operand, linear index) whose reducer
    calls ``select`` with the lower index first, then a ``stablehlo.scatter`` of ``source`` at
    the selected indices. The order in which several source values reaching one element are
    combined is unspecified (it only matters for a non-associative ``scatter``).
    """
    op = "SelectAndScatterWithGeneralPadding"
    x = _operand(op, "operand", operand)
    src = _operand(op, "source", source)
    init = _operand(op, "init_value", init_value)
    b: XlaBuilder = same_builder(op, [("operand", x), ("source", src), ("init_value", init)])
    et = x.shape.element_type()
    win, strides, _, _, padding = _window_lists(op, x.shape.rank(), window_dimensions, window_strides, (), (), padding)
    select_and_scatter_shape(op, x.shape, src.shape, init.shape, win, strides, padding)
    ones = (1,) * x.shape.rank()
    pads = window_padding(op, x.shape, "operand", win, strides, ones, ones, padding)
    scalar = Shape._make(et, ())
    sel_region, sel_out = subcomputation(op, "select", select, [scalar, scalar], b)
    pred = Shape._make(PrimitiveType.PRED, ())
    if sel_out != [pred]:
        shape_error(op, f"select returns ({', '.join(map(str, sel_out))}) but must return one pred[]")
    sc_region = reducer_region(op, scatter, [init], b)
    return _select_and_scatter(b, x, src, init, select, sel_region, sc_region, win, strides, pads)


def _inline(region: Region, args: Sequence[XlaOp], builder: XlaBuilder) -> list[XlaOp]:
    """Copy a closed region's graph into ``builder`` with its parameters bound to ``args``."""
    env: dict[int, XlaOp] = {p.id: a for p, a in zip(region.params, args, strict=True)}
    todo: dict[int, XlaOp] = {}
    stack = list(region.results)
    while stack:
        o = stack.pop()
        if o.id not in env and o.id not in todo:
            todo[o.id] = o
            stack.extend(o.operands)
    for i in sorted(todo):
        o = todo[i]
        new = builder.add_op(o.opdef, tuple(env[x.id] for x in o.operands), o.shape, dict(o.attrs), o.regions, o.extra)
        new.loc = o.loc
        env[i] = new
    return [env[r.id] for r in region.results]


def _select_and_scatter(
    b: XlaBuilder,
    x: XlaOp,
    src: XlaOp,
    init: XlaOp,
    select: Any,
    sel_region: Region,
    sc_region: Region,
    win: tuple[int, ...],
    strides: tuple[int, ...],
    pads: Pads,
) -> XlaOp:
    """Lowering with XLA's documented selection rule (see the Notes of the public op).

    A variadic reduce window over ``(operand, row-major linear index)`` finds each window's
    selected element, with a reducer that calls ``select`` with the lower index first; padding
    carries the index ``n`` (never selected). A scatter of ``source`` into ``n + 1`` elements
    (the last one collects windows of padding only) combines the values with ``scatter``.
    """
    from .elementwise import And, Eq, Lt, Ne, Not, Or, Select
    from .shaping import Reshape
    from .sources import Constant, Iota

    dims = x.shape.dimensions()
    et = x.shape.element_type()
    n = 1
    for d in dims:
        n *= d
    idt = np.dtype(np.int32 if n < 2**31 - 1 else np.int64)
    idx = Reshape(Iota(b, idt, n), dims)
    value_init = Constant(b, np.zeros((), etype_to_dtype(et)))
    absent = Constant(b, np.asarray(n, idt))

    def choose(av: XlaOp, ai: XlaOp, bv: XlaOp, bi: XlaOp) -> tuple[XlaOp, XlaOp]:
        if callable(select) and not isinstance(select, Computation):
            ab, ba = select(av, bv), select(bv, av)
        else:
            ab, ba = _inline(sel_region, (av, bv), av.builder)[0], _inline(sel_region, (bv, av), av.builder)[0]
        rule = Select(Lt(ai, bi), ab, Not(ba))
        none = Constant(av.builder, np.asarray(n, idt))
        take_a = Or(Eq(bi, none), And(Ne(ai, none), rule))
        return Select(take_a, av, bv), Select(take_a, ai, bi)

    chosen = _reduce_window(
        "SelectAndScatterWithGeneralPadding", [x, idx], [value_init, absent], choose, win, strides, pads, (), ()
    )
    sel = tuple_element(chosen, 1)
    m = 1
    for d in src.shape.dimensions():
        m *= d
    shape = array_shape(et, (n + 1,), "SelectAndScatterWithGeneralPadding")
    base = b.add_op(BROADCAST_IN_DIM, (init,), shape, {"broadcast_dimensions": ()})
    dn = ScatterDimensionNumbers(inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1)
    scattered = b.add_op(
        SCATTER, (base, Reshape(sel, (m, 1)), Reshape(src, (m,))), base.shape,
        {"scatter_dimension_numbers": dn, "indices_are_sorted": False, "unique_indices": False}, (sc_region,),
    )
    return Reshape(Slice(scattered, (0,), (n,)), dims)
