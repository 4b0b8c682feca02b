"""Evaluation rules of :mod:`xlasdk.ops.indexing`: dynamic_slice and dynamic_update_slice (starts
clamped as XLA clamps them), gather (out-of-range starts clamped) and scatter (an update whose
window leaves the operand skipped, as XLA skips it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._optable import evaluates
from ..builder import XlaOp
from ..ops.indexing import DYNAMIC_SLICE, DYNAMIC_UPDATE_SLICE, GATHER, SCATTER
from ._evaluator import Value, _combine, _Evaluator, _out, _result_shapes, _results

__all__: list[str] = []


def _clamped_starts(x: np.ndarray[Any, Any], starts: Sequence[Any], sizes: Sequence[int]) -> list[int]:
    """XLA clamps each start to [0, dim - size]."""
    return [int(min(max(int(np.asarray(s)), 0), d - n)) for s, d, n in zip(starts, x.shape, sizes, strict=True)]


@evaluates(DYNAMIC_SLICE)
def _dynamic_slice(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    sizes = tuple(ev.attr(o, "slice_sizes"))
    starts = _clamped_starts(a[0], a[1:], sizes)
    return _out(a[0][tuple(slice(s, s + n) for s, n in zip(starts, sizes, strict=True))], o.shape)


@evaluates(DYNAMIC_UPDATE_SLICE)
def _dynamic_update_slice(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    x, upd = a[0].copy(), a[1]
    starts = _clamped_starts(x, a[2:], upd.shape)
    x[tuple(slice(s, s + n) for s, n in zip(starts, upd.shape, strict=True))] = upd
    return _out(x, o.shape)


@evaluates(GATHER)
def _gather(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    x, idx = a
    g = ev.attr(o, "dimension_numbers")
    sizes = tuple(ev.attr(o, "slice_sizes"))
    ivd = int(g["index_vector_dim"])
    idx_m = np.moveaxis(idx, ivd, -1) if ivd < idx.ndim else idx[..., None]
    out_dims = tuple(o.shape.dimensions())
    offset_dims = tuple(g["offset_dims"])
    batch_out = [d for d in range(len(out_dims)) if d not in offset_dims]
    dropped = set(g["collapsed_slice_dims"]) | set(g["operand_batching_dims"])
    kept = [d for d in range(x.ndim) if d not in dropped]
    res = np.empty(out_dims, x.dtype)
    for b in np.ndindex(*idx_m.shape[:-1]):
        vec = idx_m[b]
        start = [0] * x.ndim
        for k, d in enumerate(g["start_index_map"]):
            start[d] = int(vec[k])
        for od, sd in zip(g["operand_batching_dims"], g["start_indices_batching_dims"], strict=True):
            start[od] = b[sd if sd < ivd else sd - 1]
        start = [min(max(v, 0), x.shape[d] - sizes[d]) for d, v in enumerate(start)]  # XLA clamps
        piece = x[tuple(slice(v, v + n) for v, n in zip(start, sizes, strict=True))].reshape([sizes[d] for d in kept])
        where: list[Any] = [slice(None)] * len(out_dims)
        for pos, d in enumerate(batch_out):
            where[d] = b[pos]
        res[tuple(where)] = piece
    return _out(res, o.shape)


@evaluates(SCATTER)
def _scatter(o: XlaOp, a: list[Value], ev: _Evaluator) -> Value:
    n = (len(a) - 1) // 2
    inputs, idx, updates = [x.copy() for x in a[:n]], a[n], a[n + 1:]
    sd = ev.attr(o, "scatter_dimension_numbers")
    (body,) = o.regions
    combine = _combine(body, o, ev)
    ivd = int(sd["index_vector_dim"])
    idx_m = np.moveaxis(idx, ivd, -1) if ivd < idx.ndim else idx[..., None]
    uwd = tuple(sd["update_window_dims"])
    upd_scatter = [d for d in range(updates[0].ndim) if d not in uwd]
    dropped = set(sd["inserted_window_dims"]) | set(sd["input_batching_dims"])
    window_to_operand = [d for d in range(inputs[0].ndim) if d not in dropped]
    wsizes = [updates[0].shape[d] for d in uwd]
    for b in np.ndindex(*idx_m.shape[:-1]):
        vec = idx_m[b]
        start = [0] * inputs[0].ndim
        for k, d in enumerate(sd["scattered_dims_to_operand_dims"]):
            start[d] = int(vec[k])
        for od, sdim in zip(sd["input_batching_dims"], sd["scatter_indices_batching_dims"], strict=True):
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
    return _results(o, [_out(x, sh) for x, sh in zip(inputs, _result_shapes(o), strict=True)])
