"""Evaluation rules of :mod:`xlasdk.ops.window`: reduce_window, and the select_and_scatter of loaded
modules (``ops.SelectAndScatter`` is built from other ops, so the table has no row for it: opaque,
bound by name), every window at once; select_and_scatter's usual combiners (:mod:`._at`) scatter
every window's update at once too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._mlir_attrs import I64Elements
from .._optable import evaluates
from ..builder import XlaOp
from ..ops.window import REDUCE_WINDOW
from ._at import apply_at, combiner_at
from ._walk import (
    Evaluator,
    Value,
    as_output,
    check_elementwise,
    combiner,
    evaluates_opaque,
    numpy_reducer,
    result_shapes,
    results_of,
    widened,
)

__all__: list[str] = []

_VECTORIZED = True  # select_and_scatter's usual combiners through numpy's ufunc.at (tests turn it off)


def _windows(x: np.ndarray[Any, Any], window: Sequence[int], strides: Sequence[int],
             dilation: Sequence[int]) -> np.ndarray[Any, Any]:
    """``x``'s windows: shape ``out_dims + window`` (``x`` already padded and base-dilated); where a
    dilated window is larger than ``x`` there is none along that dimension (an empty result, as XLA
    computes it)."""
    span = [(w - 1) * d + 1 for w, d in zip(window, dilation, strict=True)]
    if any(s > n for s, n in zip(span, x.shape, strict=True)):
        out = [(n - s) // st + 1 if n >= s else 0 for n, s, st in zip(x.shape, span, strides, strict=True)]
        return np.zeros((*out, *window), x.dtype)
    view = np.lib.stride_tricks.sliding_window_view(x, span)
    view = view[tuple(slice(None, None, s) for s in strides)]
    picks: tuple[Any, ...] = (Ellipsis, *(slice(None, None, d) for d in dilation))
    return np.asarray(view[picks])


def _dilate_pad(x: np.ndarray[Any, Any], base: Sequence[int], pads: Sequence[tuple[int, int]],
                value: Any) -> np.ndarray[Any, Any]:
    """``x`` with ``base - 1`` copies of ``value`` between elements and ``pads`` (low, high) around it
    (negative pads cut)."""
    shape = [d + (d - 1) * (b - 1) if d else 0 for d, b in zip(x.shape, base, strict=True)]
    grown = np.full(shape, value, x.dtype)
    grown[tuple(slice(None, None, b) for b in base)] = x
    full = np.full([s + max(lo, 0) + max(hi, 0) for s, (lo, hi) in zip(shape, pads, strict=True)], value, x.dtype)
    full[tuple(slice(max(lo, 0), max(lo, 0) + s) for s, (lo, _) in zip(shape, pads, strict=True))] = grown
    return full[tuple(slice(max(-lo, 0), full.shape[k] - max(-hi, 0)) for k, (lo, hi) in enumerate(pads))]


@evaluates(REDUCE_WINDOW)
def _reduce_window(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    n = len(a) // 2
    xs, inits = a[:n], a[n:]
    rank = xs[0].ndim
    window: tuple[int, ...] = ev.attr(o, "window_dimensions")
    strides: tuple[int, ...] = ev.attr(o, "window_strides", (1,) * rank)
    base: tuple[int, ...] = ev.attr(o, "base_dilations", (1,) * rank)
    wdil: tuple[int, ...] = ev.attr(o, "window_dilations", (1,) * rank)
    pad: I64Elements | None = ev.attr(o, "padding")
    pads = [(0, 0)] * rank if pad is None else [(int(lo), int(hi)) for lo, hi in pad.values.reshape(rank, 2)]
    (body,) = o.regions
    shapes = result_shapes(o)
    wins = [_windows(_dilate_pad(x, base, pads, i), window, strides, wdil) for x, i in zip(xs, inits, strict=True)]
    fn = numpy_reducer(body, xs[0].dtype) if n == 1 else None
    if fn is not None:
        w = wins[0] if wins[0].dtype.kind in "iub" else widened(wins[0])
        with np.errstate(all="ignore"):
            acc = fn.reduce(w.reshape(w.shape[:rank] + (-1,)), axis=-1) if w.size else None
            res = fn(widened(inits[0]), acc) if acc is not None else np.broadcast_to(inits[0], shapes[0].dimensions())
        return as_output(res, shapes[0])
    check_elementwise(body, o, ev)
    flat = [w.reshape(w.shape[:rank] + (math.prod(w.shape[rank:]),)) for w in wins]  # (no -1: may be empty)
    acc_vals = [np.broadcast_to(i, f.shape[:rank]).copy() for i, f in zip(inits, flat, strict=True)]
    for k in range(flat[0].shape[-1]):
        acc_vals = [np.asarray(v) for v in ev.region(body, [*acc_vals, *(f[..., k] for f in flat)])]
    return results_of(o, [as_output(v, sh) for v, sh in zip(acc_vals, shapes, strict=True)])


@evaluates_opaque("stablehlo.select_and_scatter")
def _select_and_scatter(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    x, src, init = a
    select, scatter = o.regions
    check_elementwise(select, o, ev)
    combine = combiner(scatter, o, ev)
    rank = x.ndim
    window = tuple(ev.attr(o, "window_dimensions"))
    strides = tuple(ev.attr(o, "window_strides", (1,) * rank))
    pad = ev.attr(o, "padding")
    pads = [(0, 0)] * rank if pad is None else [(int(lo), int(hi)) for lo, hi in np.asarray(pad).reshape(rank, 2)]
    res = np.broadcast_to(init, x.shape).astype(x.dtype)
    # the select phase, every window at once: scan the window's positions in order and keep the
    # current pick unless select(pick, candidate) is false (padding is never selected)
    grid = np.indices(src.shape)
    best = [np.zeros(src.shape, np.int64) for _ in range(rank)]
    best_val = np.zeros(src.shape, x.dtype)
    has = np.zeros(src.shape, bool)
    for k in np.ndindex(*window):
        pos = [grid[d] * strides[d] + k[d] - pads[d][0] for d in range(rank)]
        valid = np.ones(src.shape, bool)
        for d in range(rank):
            valid &= (pos[d] >= 0) & (pos[d] < x.shape[d])
        clipped = tuple(np.clip(p_, 0, max(n - 1, 0)) for p_, n in zip(pos, x.shape, strict=True))
        cand = x[clipped] if x.size else np.zeros(src.shape, x.dtype)
        keep = np.asarray(ev.region(select, [best_val, cand])[0], dtype=bool) if has.any() else np.ones(src.shape, bool)
        take = valid & (~has | ~keep)
        for d in range(rank):
            best[d] = np.where(take, clipped[d], best[d])
        best_val = np.where(take, cand, best_val)
        has |= valid
    # the scatter phase, in the windows' order
    if numpy_reducer(scatter, np.dtype(x.dtype)) is np.add:
        acc = widened(res).copy()
        np.add.at(acc, tuple(b[has] for b in best), widened(src)[has])
        return as_output(acc, o.shape)
    fn = combiner_at(scatter, np.dtype(x.dtype)) if _VECTORIZED else None
    if fn is not None and x.size:  # the usual combiners: every window's update at once, in the same order
        target = np.ascontiguousarray(res)
        flat = np.ravel_multi_index(tuple(b[has] for b in best), x.shape)
        apply_at(target, flat, src[has].astype(x.dtype, copy=False), fn)
        return as_output(target, o.shape)
    for w in zip(*np.nonzero(has), strict=True):
        at = tuple(int(b[w]) for b in best)
        res[at] = np.asarray(combine([res[at]], [src[w]])[0]).astype(x.dtype)
    return as_output(res, o.shape)
