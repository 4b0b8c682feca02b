"""The reference evaluator on single ops that real models hit, at the sizes they hit them: each
``xs.evaluate`` of a one-op HLO module (hand-written here, in the forms JAX writes them) on random
inputs, timed alone (median of a few runs), against numpy's own work for the same op where that is
one call (``np.sort`` / ``np.lexsort``, ``np.add.at``, ``np.take``; the peer column), and against
the issue's targets.

* sort of 10,000 f32 elements with JAX's comparator (NaN and -0.0 canonicalized, ``LT`` in
  ``TOTALORDER``) and an iota payload (``jnp.argsort``): target 0.5 s;
* sort of 10,000 rows by two keys (f32 then s32, JAX's lexicographic comparator): target 0.5 s;
* select_and_scatter of max-pool's gradient (``GE`` select, ``add`` scatter) on a 1M-element
  operand (f32[16,256,256,1], 2x2 windows, stride 2): target 2 s;
* scatter-add of 100,000 rows of 16 into f32[1000,16], gather of 100,000 rows of 64 from
  f32[1000,64], reduce_window (3x3 max, stride 1, SAME padding) on 1M elements: no target (info).

``--exact`` times the evaluator's exact paths instead (the comparator evaluated on pairs, scatter
and gather one index vector at a time, select_and_scatter's combiner one window at a time): the
figures before issue 35's numpy paths.

    python bench/evaluate_ops.py [--rounds N] [--exact] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _timing as tm  # noqa: E402
import numpy as np  # noqa: E402

import xlasdk as xs  # noqa: E402

N_SORT = 10_000

SORT_ARGSORT = f"""HloModule argsort

cmp {{
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  p2 = s32[] parameter(2)
  p3 = s32[] parameter(3)
  qnan = f32[] constant(nan)
  zero = f32[] constant(0)
  ne0 = pred[] compare(p0, p0), direction=NE
  eq0 = pred[] compare(p0, zero), direction=EQ
  sel0 = f32[] select(eq0, zero, p0)
  c0 = f32[] select(ne0, qnan, sel0)
  ne1 = pred[] compare(p1, p1), direction=NE
  eq1 = pred[] compare(p1, zero), direction=EQ
  sel1 = f32[] select(eq1, zero, p1)
  c1 = f32[] select(ne1, qnan, sel1)
  ROOT lt = pred[] compare(c0, c1), direction=LT, type=TOTALORDER
}}

ENTRY main {{
  x = f32[{N_SORT}] parameter(0)
  i = s32[{N_SORT}] iota(), iota_dimension=0
  s = (f32[{N_SORT}], s32[{N_SORT}]) sort(x, i), dimensions={{0}}, is_stable=true, to_apply=cmp
  ROOT r = s32[{N_SORT}] get-tuple-element(s), index=1
}}
"""

SORT_TWO_KEYS = f"""HloModule sort2

cmp {{
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  p2 = s32[] parameter(2)
  p3 = s32[] parameter(3)
  lt0 = pred[] compare(p0, p1), direction=LT, type=TOTALORDER
  eq0 = pred[] compare(p0, p1), direction=EQ, type=TOTALORDER
  lt1 = pred[] compare(p2, p3), direction=LT
  a = pred[] and(eq0, lt1)
  ROOT o = pred[] or(lt0, a)
}}

ENTRY main {{
  x = f32[{N_SORT}] parameter(0)
  y = s32[{N_SORT}] parameter(1)
  ROOT s = (f32[{N_SORT}], s32[{N_SORT}]) sort(x, y), dimensions={{0}}, is_stable=true, to_apply=cmp
}}
"""

SORT_ROWS = """HloModule sort_rows

cmp {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  ROOT gt = pred[] compare(p0, p1), direction=GT, type=TOTALORDER
}

ENTRY main {
  x = f32[64,10000] parameter(0)
  ROOT s = f32[64,10000] sort(x), dimensions={1}, is_stable=true, to_apply=cmp
}
"""

SORT_FLOAT_NAN = f"""HloModule sort_float

cmp {{
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  ROOT lt = pred[] compare(p0, p1), direction=LT
}}

ENTRY main {{
  x = f32[{N_SORT}] parameter(0)
  ROOT s = f32[{N_SORT}] sort(x), dimensions={{0}}, is_stable=true, to_apply=cmp
}}
"""

SORT_BIG = SORT_ARGSORT.replace(str(N_SORT), "100000")

SELECT_AND_SCATTER = """HloModule maxpool_grad

ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

ENTRY main {
  x = f32[16,256,256,1] parameter(0)
  g = f32[16,128,128,1] parameter(1)
  zero = f32[] constant(0)
  ROOT s = f32[16,256,256,1] select-and-scatter(x, g, zero),
      window={size=1x2x2x1 stride=1x2x2x1}, select=ge, scatter=add
}
"""

SCATTER_ADD = """HloModule scatter_add

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

ENTRY main {
  t = f32[1000,16] parameter(0)
  i = s32[100000,1] parameter(1)
  u = f32[100000,16] parameter(2)
  ROOT s = f32[1000,16] scatter(t, i, u), update_window_dims={1}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}
"""

GATHER = """HloModule gather

ENTRY main {
  t = f32[1000,64] parameter(0)
  i = s32[100000,1] parameter(1)
  ROOT g = f32[100000,64] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0},
      index_vector_dim=1, slice_sizes={1,64}
}
"""

SELECT_AND_SCATTER_MAX = SELECT_AND_SCATTER.replace("ROOT c = f32[] add(a, b)", "ROOT c = f32[] maximum(a, b)")

REDUCE_WINDOW = """HloModule maxpool

max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] maximum(a, b)
}

ENTRY main {
  x = f32[16,256,256,1] parameter(0)
  init = f32[] constant(-inf)
  ROOT r = f32[16,256,256,1] reduce-window(x, init), window={size=1x3x3x1 pad=0_0x1_1x1_1x0_0}, to_apply=max
}
"""


def _cases(rng: np.random.Generator) -> list[tuple[str, str, list[Any], Callable[[], Any] | None, float | None]]:
    x = rng.standard_normal(N_SORT).astype(np.float32)
    x[rng.integers(0, N_SORT, 100)] = np.nan
    x[rng.integers(0, N_SORT, 100)] = -0.0
    k1 = rng.integers(0, 50, N_SORT).astype(np.float32)  # many ties on the first key
    k2 = rng.integers(0, 1000, N_SORT).astype(np.int32)
    big = rng.standard_normal(100_000).astype(np.float32)
    rows64 = rng.standard_normal((64, N_SORT)).astype(np.float32)
    pool = rng.standard_normal((16, 256, 256, 1)).astype(np.float32)
    grad = rng.standard_normal((16, 128, 128, 1)).astype(np.float32)
    table = rng.standard_normal((1000, 16)).astype(np.float32)
    rows = rng.integers(0, 1000, (100_000, 1)).astype(np.int32)
    upd = rng.standard_normal((100_000, 16)).astype(np.float32)
    emb = rng.standard_normal((1000, 64)).astype(np.float32)

    def add_at() -> Any:
        t = table.astype(np.float64)
        np.add.at(t, rows[:, 0], upd)
        return t

    return [
        (f"sort f32[{N_SORT}] + iota (jnp.argsort's comparator)", SORT_ARGSORT, [x],
         lambda: np.argsort(x, kind="stable"), 0.5),
        (f"sort f32[{N_SORT}], s32[{N_SORT}] by two keys", SORT_TWO_KEYS, [k1, k2],
         lambda: np.lexsort((k2, k1)), 0.5),
        ("sort f32[100000] + iota (jnp.argsort's comparator)", SORT_BIG, [big],
         lambda: np.argsort(big, kind="stable"), None),
        (f"sort f32[64,{N_SORT}] along its rows (GT, TOTALORDER)", SORT_ROWS, [rows64],
         lambda: np.sort(rows64, axis=1), None),
        (f"sort f32[{N_SORT}] with NaNs, FLOAT LT (not read: the exact path)", SORT_FLOAT_NAN, [x],
         lambda: np.sort(x), None),
        ("select_and_scatter f32[16,256,256,1] (max-pool grad)", SELECT_AND_SCATTER, [pool, grad], None, 2.0),
        ("select_and_scatter f32[16,256,256,1], max combiner", SELECT_AND_SCATTER_MAX, [pool, grad], None, None),
        ("scatter-add 100k x 16 into f32[1000,16]", SCATTER_ADD, [table, rows, upd], add_at, None),
        ("gather 100k rows of f32[1000,64]", GATHER, [emb, rows], lambda: np.take(emb, rows[:, 0], axis=0), None),
        ("reduce_window 3x3 max on f32[16,256,256,1]", REDUCE_WINDOW, [pool], None, None),
    ]


def _seconds(fn: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def exact_paths_only() -> None:
    """Switch the numpy paths of the reference evaluator off (a benchmark's comparison only)."""
    from xlasdk.reference import indexing, sort, window

    sort._lexsorted = lambda cmp, moved, ev: None  # type: ignore[assignment]
    indexing._VECTORIZED = False
    window._VECTORIZED = False


def run(rounds: int = 3, only: str | None = None) -> list[dict[str, Any]]:
    rows = []
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="xlasdk-evaluate-ops-") as tmp:
        for k, (label, text, args, peer, target) in enumerate(_cases(rng)):
            if only is not None and only not in label:
                continue
            path = os.path.join(tmp, f"case{k}.hlo")
            with open(path, "w") as f:
                f.write(text)
            comp = xs.load_computation(path)
            comp.instructions()  # the graph import is not the op's evaluation
            xs.evaluate(comp, *args)  # nor is the first call's import of the evaluator
            mine = _seconds(lambda comp=comp, args=args: xs.evaluate(comp, *args), rounds)
            theirs = _seconds(peer, rounds) if peer is not None else None
            rows.append(tm.row(f"evaluate {label}", "s", round(mine, 4),
                               None if theirs is None else round(theirs, 5), "numpy's call" if peer else "",
                               round(mine / theirs, 1) if theirs else None, None,
                               f"< {target} s" if target is not None else "(info)"))
            rows[-1]["ok"] = None if target is None else mine < target
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default=None, help="only the cases whose label holds this text")
    ap.add_argument("--exact", action="store_true", help="the evaluator's exact paths (before issue 35)")
    ap.add_argument("--json", default=None)
    ns = ap.parse_args()
    if ns.exact:
        exact_paths_only()
    rows = run(ns.rounds, ns.only)
    for r in rows:
        verdict = {True: "ok", False: "MISSED", None: "info"}[r["ok"]]
        peer = "" if r["peer"] is None else f"  numpy {r['peer']:.4f} s"
        print(f"{r['figure']:<70} {r['xlasdk']:>8.3f} s{peer}  {verdict} ({r['target_text']})")
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
