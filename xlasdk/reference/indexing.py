"""Evaluation rules of :mod:`xlasdk.ops.indexing`: dynamic_slice and dynamic_update_slice (starts
clamped as XLA clamps them), gather (out-of-range starts clamped) and scatter (an update whose
window leaves the operand skipped, as XLA skips it). Gather, and a scatter of one operand with one
of the usual combiners (:mod:`._at`), compute every index at once with numpy; the exact paths,
one index vector at a time, do the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._optable import evaluates
from ..attrs import GatherDimensionNumbers, ScatterDimensionNumbers
from ..builder import XlaOp
from ..ops.indexing import DYNAMIC_SLICE, DYNAMIC_UPDATE_SLICE, GATHER, SCATTER
from ._at import apply_at, combiner_at
from ._walk import Evaluator, Value, as_output, combiner, result_shapes, results_of

__all__: list[str] = []

_VECTORIZED = True  # gather and scatter through numpy's vectorized calls where they apply (tests turn it off)


def _clamped_starts(x: np.ndarray[Any, Any], starts: Sequence[Any], sizes: Sequence[int]) -> list[int]:
    """XLA clamps each start to [0, dim - size]."""
    return [int(min(max(int(np.asarray(s)), 0), d - n)) for s, d, n in zip(starts, x.shape, sizes, strict=True)]


@evaluates(DYNAMIC_SLICE)
def _dynamic_slice(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    sizes: tuple[int, ...] = ev.attr(o, "slice_sizes")
    starts = _clamped_starts(a[0], a[1:], sizes)
    return as_output(a[0][tuple(slice(s, s + n) for s, n in zip(starts, sizes, strict=True))], o.shape)


@evaluates(DYNAMIC_UPDATE_SLICE)
def _dynamic_update_slice(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    x, upd = a[0].copy(), a[1]
    starts = _clamped_starts(x, a[2:], upd.shape)
    x[tuple(slice(s, s + n) for s, n in zip(starts, upd.shape, strict=True))] = upd
    return as_output(x, o.shape)


def _starts(idx_m: np.ndarray[Any, Any], rank: int, index_map: Sequence[int], operand_batching: Sequence[int],
            index_batching: Sequence[int], ivd: int) -> np.ndarray[Any, Any]:
    """The start of every index vector's window (shape ``batch + (rank,)``, int64; unclamped):
    ``idx_m``'s components on the mapped dimensions, the batch position on the batching ones."""
    batch = idx_m.shape[:-1]
    start = np.zeros(batch + (rank,), np.int64)
    # far-out starts are cut to +-2**62 (still out of range, or clamped the same), so no sum overflows
    vec = (np.minimum(idx_m, 1 << 62).astype(np.int64) if idx_m.dtype == np.uint64
           else np.clip(idx_m.astype(np.int64), -(1 << 62), 1 << 62))
    for k, d in enumerate(index_map):
        start[..., d] = vec[..., k]
    if operand_batching:
        grid = np.indices(batch, np.int64)
        for od, sd in zip(operand_batching, index_batching, strict=True):
            start[..., od] = grid[sd if sd < ivd else sd - 1]
    return start


def _offsets(shape: Sequence[int], full: Sequence[int]) -> np.ndarray[Any, Any]:
    """Flat offsets (C order, in an array of ``shape``) of every position of a window of ``full``."""
    strides = np.array([int(np.prod(shape[k + 1:])) for k in range(len(shape))], np.int64)
    grid = np.indices(tuple(full), np.int64).reshape(len(full), -1)
    return np.asarray(strides @ grid, np.int64) if len(full) else np.zeros(1, np.int64)


def _gather_fast(o: XlaOp, x: np.ndarray[Any, Any], idx_m: np.ndarray[Any, Any], g: GatherDimensionNumbers,
                 sizes: Sequence[int],
                 ivd: int, kept: list[int], batch_out: list[int], out_dims: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """Every slice at once: the clamped starts of all index vectors, plus the window's offsets."""
    start = _starts(idx_m, x.ndim, g.start_index_map, g.operand_batching_dims, g.start_indices_batching_dims, ivd)
    hi = np.array([x.shape[d] - sizes[d] for d in range(x.ndim)], np.int64)
    start = np.clip(start, 0, hi)  # XLA clamps
    strides = np.array([int(np.prod(x.shape[k + 1:])) for k in range(x.ndim)], np.int64)
    base = start @ strides if x.ndim else np.zeros(start.shape[:-1], np.int64)
    flat = base[..., None] + _offsets(x.shape, sizes)
    pieces = np.ascontiguousarray(x).reshape(-1)[flat]  # batch + (slice elements,)
    batch = idx_m.shape[:-1]
    pieces = pieces.reshape(batch + tuple(sizes[d] for d in kept))
    axes = [0] * len(out_dims)
    for pos, d in enumerate(batch_out):
        axes[d] = pos
    for pos, d in enumerate(d for d in range(len(out_dims)) if d not in batch_out):
        axes[d] = len(batch) + pos
    return np.transpose(pieces, axes)


@evaluates(GATHER)
def _gather(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    x, idx = a
    g: GatherDimensionNumbers = ev.attr(o, "dimension_numbers")
    sizes: tuple[int, ...] = ev.attr(o, "slice_sizes")
    ivd = g.index_vector_dim
    idx_m = np.moveaxis(idx, ivd, -1) if ivd < idx.ndim else idx[..., None]
    out_dims = tuple(o.shape.dimensions())
    offset_dims = g.offset_dims
    batch_out = [d for d in range(len(out_dims)) if d not in offset_dims]
    dropped = set(g.collapsed_slice_dims) | set(g.operand_batching_dims)
    kept = [d for d in range(x.ndim) if d not in dropped]
    if _VECTORIZED and x.size and idx_m.size:
        return as_output(_gather_fast(o, x, idx_m, g, sizes, ivd, kept, batch_out, out_dims), o.shape)
    res = np.empty(out_dims, x.dtype)
    for b in np.ndindex(*idx_m.shape[:-1]):
        vec = idx_m[b]
        start = [0] * x.ndim
        for k, d in enumerate(g.start_index_map):
            start[d] = int(vec[k])
        for od, sd in zip(g.operand_batching_dims, g.start_indices_batching_dims, strict=True):
            start[od] = b[sd if sd < ivd else sd - 1]
        start = [min(max(v, 0), x.shape[d] - sizes[d]) for d, v in enumerate(start)]  # XLA clamps
        piece = x[tuple(slice(v, v + n) for v, n in zip(start, sizes, strict=True))].reshape([sizes[d] for d in kept])
        where: list[Any] = [slice(None)] * len(out_dims)
        for pos, d in enumerate(batch_out):
            where[d] = b[pos]
        res[tuple(where)] = piece
    return as_output(res, o.shape)


def _scatter_fast(x: np.ndarray[Any, Any], idx_m: np.ndarray[Any, Any], updates: np.ndarray[Any, Any],
                  sd: ScatterDimensionNumbers,
                  ivd: int, upd_scatter: list[int], window_to_operand: list[int], wsizes: list[int],
                  fn: Any) -> np.ndarray[Any, Any]:
    """Every update at once (one operand, a combiner of :func:`._at.combiner_at`), in the exact
    path's order: index vectors in row-major order, each window whole."""
    full = [1] * x.ndim
    for d, w in zip(window_to_operand, wsizes, strict=True):
        full[d] = w
    start = _starts(idx_m, x.ndim, sd.scatter_dims_to_operand_dims, sd.input_batching_dims,
                    sd.scatter_indices_batching_dims, ivd)
    dims = np.array(x.shape, np.int64)
    valid = ((start >= 0) & (start + np.array(full, np.int64) <= dims)).all(axis=-1)  # else skipped, as XLA
    strides = np.array([int(np.prod(x.shape[k + 1:])) for k in range(x.ndim)], np.int64)
    flat = (start[valid] @ strides)[:, None] + _offsets(x.shape, full)
    upd = np.moveaxis(updates, upd_scatter, range(len(upd_scatter)))  # batch dimensions first, the window's after
    vals = upd.reshape(valid.shape + (-1,))[valid]
    target = np.array(x, order="C")
    apply_at(target, flat.reshape(-1), vals.reshape(-1).astype(target.dtype, copy=False), fn)
    return target


@evaluates(SCATTER)
def _scatter(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    n = (len(a) - 1) // 2
    inputs, idx, updates = [x.copy() for x in a[:n]], a[n], a[n + 1:]
    sd: ScatterDimensionNumbers = ev.attr(o, "scatter_dimension_numbers")
    (body,) = o.regions
    combine = combiner(body, o, ev)
    ivd = sd.index_vector_dim
    idx_m = np.moveaxis(idx, ivd, -1) if ivd < idx.ndim else idx[..., None]
    uwd = sd.update_window_dims
    upd_scatter = [d for d in range(updates[0].ndim) if d not in uwd]
    dropped = set(sd.inserted_window_dims) | set(sd.input_batching_dims)
    window_to_operand = [d for d in range(inputs[0].ndim) if d not in dropped]
    wsizes = [updates[0].shape[d] for d in uwd]
    fn = combiner_at(body, inputs[0].dtype) if n == 1 and _VECTORIZED else None
    if fn is not None and inputs[0].size and idx_m.size:
        return results_of(o, [as_output(_scatter_fast(inputs[0], idx_m, updates[0], sd, ivd, upd_scatter,
                                                      window_to_operand, wsizes, fn), result_shapes(o)[0])])
    for b in np.ndindex(*idx_m.shape[:-1]):
        vec = idx_m[b]
        start = [0] * inputs[0].ndim
        for k, d in enumerate(sd.scatter_dims_to_operand_dims):
            start[d] = int(vec[k])
        for od, sdim in zip(sd.input_batching_dims, sd.scatter_indices_batching_dims, strict=True):
            start[od] = b[sdim if sdim < ivd else sdim - 1]
        full = [1] * inputs[0].ndim
        for d, w in zip(window_to_operand, wsizes, strict=True):
            full[d] = w
        if any(v < 0 or v + f > inputs[0].shape[d] for d, (v, f) in enumerate(zip(start, full, strict=True))):
            continue  # XLA skips an update whose window leaves the operand
        where: list[Any] = [slice(None)] * updates[0].ndim
        for pos, d in enumerate(upd_scatter):
            where[d] = b[pos]
        target = tuple(slice(v, v + f) for v, f in zip(start, full, strict=True))
        cur = [x[target] for x in inputs]
        upd = [u[tuple(where)].reshape(cur[0].shape) for u in updates]
        for x, v in zip(inputs, combine(cur, upd), strict=True):
            x[target] = np.asarray(v).astype(x.dtype)
    return results_of(o, [as_output(x, sh) for x, sh in zip(inputs, result_shapes(o), strict=True)])
