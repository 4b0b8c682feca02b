"""Rank records by score: a variadic Sort carries ids along with the keys, TopK picks the best,
and Gather fetches the feature rows of the ranked ids. Everything is checked against numpy.

    python examples/sort_and_gather.py
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

import xlasdk as xs
from xlasdk import ops

N, D, K = 10, 3, 4  # records, features per record, how many best to keep


def take_rows(table: xs.XlaOp, ids: xs.XlaOp) -> xs.XlaOp:
    """``table[ids]`` for a (N, D) table and (M,) ids, as an XLA Gather."""
    dn = xs.GatherDimensionNumbers(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1)
    return ops.Gather(table, ids, dn, [1, table.dims[1]])


def build() -> xs.XlaComputation:
    b = xs.XlaBuilder("rank_records")
    scores = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (N,)), "scores")
    features = ops.Parameter(b, 1, xs.Shape.array_shape(np.float32, (N, D)), "features")
    ids = ops.Iota(b, np.int32, N)

    # Descending by score; equal scores keep ascending id order (is_stable). The comparator takes
    # (lhs_score, rhs_score, lhs_id, rhs_id) in XLA's order; the ids ride along as payload.
    by_score = ops.Sort(
        b, [scores, ids], dimension=0, is_stable=True,
        comparator=lambda ls, rs, li, ri: ops.Compare(ls, rs, "GT", "TOTALORDER"),
    )
    sorted_scores, sorted_ids = ops.GetTupleElement(by_score, 0), ops.GetTupleElement(by_score, 1)
    best = ops.TopK(scores, K)
    best_scores, best_ids = ops.GetTupleElement(best, 0), ops.GetTupleElement(best, 1)
    return b.build(
        [
            sorted_scores, sorted_ids, best_scores, best_ids,
            take_rows(features, sorted_ids), take_rows(features, best_ids),
        ]
    )


def execute(comp: xs.XlaComputation, *args: Any) -> list[np.ndarray[Any, Any]]:
    """Compile for the default CPU device, run, and return every output as numpy."""
    out = xs.compile(comp)(*args)
    return [o.to_numpy() for o in (out if isinstance(out, tuple) else (out,))]


def main() -> int:
    comp = build()
    print(comp.as_hlo_text())
    rng = np.random.default_rng(7)
    scores = rng.integers(0, 6, N).astype(np.float32)  # small integers: plenty of ties
    features = rng.standard_normal((N, D)).astype(np.float32)
    got = execute(comp, scores, features)

    order = np.argsort(-scores, kind="stable")  # descending, ties by ascending id
    ids = order.astype(np.int32)
    want = [scores[order], ids, scores[order[:K]], ids[:K], features[order], features[order[:K]]]
    names = ["sorted scores", "sorted ids", "top-k scores", "top-k ids", "rows by score", "top-k rows"]
    ok = True
    for name, g, w in zip(names, got, want, strict=True):
        same = g.shape == w.shape and g.dtype == w.dtype and np.array_equal(g, w)
        ok &= same
        print(f"{name:14s} {'ok' if same else 'MISMATCH'}  {g.tolist() if g.ndim == 1 else g.shape}")
    print("MATCH" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
