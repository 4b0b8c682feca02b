"""Evaluation rules of :mod:`xlasdk.ops.shaping`: broadcast_in_dim, reshape, transpose, reverse,
slice, concatenate, pad, and the dimension sizes (the reference follows static sizes only); and
the copies of loaded modules (``mhlo.copy``, ``stablehlo.copy``: opaque, bound by name).
"""

from __future__ import annotations

import numpy as np

from .._optable import evaluates
from ..builder import XlaOp
from ..ops.shaping import (
    BROADCAST_IN_DIM,
    CONCATENATE,
    GET_DIMENSION_SIZE,
    PAD,
    RESHAPE,
    REVERSE,
    SET_DIMENSION_SIZE,
    SLICE,
    TRANSPOSE,
)
from ._walk import Evaluator, Value, as_output, evaluates_opaque

__all__: list[str] = []


@evaluates_opaque("mhlo.copy", "stablehlo.copy")
def _copy(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    return a[0]


@evaluates(BROADCAST_IN_DIM)
def _bcast(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    dims = tuple(ev.attr(o, "broadcast_dimensions", ()))
    out = o.shape.dimensions()
    x = a[0]
    shape = [1] * len(out)
    for i, d in enumerate(dims):
        shape[d] = x.shape[i]
    return as_output(np.broadcast_to(x.reshape(shape), out), o.shape)


@evaluates(RESHAPE)
def _reshape(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    return as_output(a[0].reshape(o.shape.dimensions()), o.shape)


@evaluates(TRANSPOSE)
def _transpose(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    return as_output(np.transpose(a[0], tuple(ev.attr(o, "permutation"))), o.shape)


@evaluates(REVERSE)
def _reverse(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    return as_output(np.flip(a[0], tuple(ev.attr(o, "dimensions"))), o.shape)


@evaluates(SLICE)
def _slice(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    starts, limits, strides = (ev.attr(o, k) for k in ("start_indices", "limit_indices", "strides"))
    return as_output(a[0][tuple(slice(s, e, t) for s, e, t in zip(starts, limits, strides, strict=True))], o.shape)


@evaluates(CONCATENATE)
def _concat(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    return as_output(np.concatenate(a, axis=int(ev.attr(o, "dimension"))), o.shape)


@evaluates(PAD)
def _pad(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    x, value = a
    lo, hi, interior = (tuple(ev.attr(o, k)) for k in ("edge_padding_low", "edge_padding_high", "interior_padding"))
    # interior padding first, then edges (negative edges cut)
    shape = [d + max(d - 1, 0) * i for d, i in zip(x.shape, interior, strict=True)]
    grown = np.full(shape, value, x.dtype)
    grown[tuple(slice(None, None, i + 1) for i in interior)] = x
    full = np.full([s + max(lo_, 0) + max(hi_, 0) for s, lo_, hi_ in zip(shape, lo, hi, strict=True)], value, x.dtype)
    full[tuple(slice(max(lo_, 0), max(lo_, 0) + s) for s, lo_ in zip(shape, lo, strict=True))] = grown
    cut = tuple(slice(max(-lo_, 0), full.shape[k] - max(-hi_, 0)) for k, (lo_, hi_) in enumerate(zip(lo, hi,
                                                                                                    strict=True)))
    return as_output(full[cut], o.shape)


# -- dimension sizes: the reference follows static sizes only ----------------------------------------------
@evaluates(GET_DIMENSION_SIZE)
def _get_dimension_size(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """The size of the operand's value along ``dimension`` (s32): the reference holds values at
    their full size only (see :func:`_set_dimension_size`), so this is the static size or bound."""
    d = int(ev.attr(o, "dimension"))
    return as_output(np.int32(np.shape(a[0])[d]), o.shape)


@evaluates(SET_DIMENSION_SIZE)
def _set_dimension_size(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """The operand, when the size set is the dimension's whole bound. XLA:CPU returns a smaller
    size as an array cut to that size, and later ops ignore (or pad with their own identity) the
    rest: the reference does not follow dynamic sizes, so a smaller size raises."""
    d = int(ev.attr(o, "dimension"))
    x, size = a[0], int(np.asarray(a[1]))
    if size != x.shape[d]:
        raise ev.fail(o, f"to size {size} of dimension {d} (bound {x.shape[d]}) has no evaluation rule: the "
                         "reference evaluator follows static sizes only (expected the whole bound)")
    return x
