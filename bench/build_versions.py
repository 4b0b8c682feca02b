"""Graph building and HLO/StableHLO printing of two xlasdk source trees, measured in the same run.

Compares the working tree with another checkout (for example the commit before a change:
``git worktree add /tmp/base HEAD~1``). Each measurement runs in a fresh child process with
``PYTHONPATH`` pointing at one tree, alternating between the trees, so that both see the same
machine load; the figures are medians and the ratio is new / old (below 1: the new tree is
faster).

Two graphs of N ops each:

- ``chain``: ``y = y + x`` / ``y = y * x`` on f32[128] (ops without attributes; bench/build.py's graph);
- ``mixed``: steps of transpose, reshape, compare, select, pad, slice, dot, reduce and
  broadcast_in_dim on f32[16, 8] (ops whose attributes the printers spell).

For each: ``build`` (the graph and ``b.build``), ``hlo`` (``as_hlo_text()``: xlasdk's direct HLO
printer) and ``stablehlo`` (emitting the StableHLO module text).

    python bench/build_versions.py --old /tmp/base [--new .] [--ops 20000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Any

_CHILD = r"""
import json, sys, time
import numpy as np
import xlasdk as xs
from xlasdk import ops

def chain(n):
    b = xs.XlaBuilder("chain")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (128,)), "x")
    y = x
    for i in range(n):
        y = ops.Add(y, x) if i % 2 == 0 else ops.Mul(y, x)
    return b.build(y)

def mixed(n):
    b = xs.XlaBuilder("mixed")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (16, 8)), "x")
    w = ops.Parameter(b, 1, xs.Shape.array_shape(np.float32, (8, 8)), "w")
    zero = ops.Constant(b, np.float32(0))
    y = x
    for _ in range(max(1, n // 11)):
        t = ops.Reshape(ops.Transpose(ops.Add(y, x), (1, 0)), (16, 8))
        s = ops.Select(ops.Lt(t, x), t, x)
        p = ops.Slice(ops.Pad(s, zero, [(0, 1, 0), (0, 0, 0)]), (0, 0), (16, 8))
        d = ops.Dot(p, w)
        r = ops.Reduce(b, [d], [zero], ops.Add, [1])
        y = ops.Max(d, ops.BroadcastInDim(r, (16, 8), (0,)))
    return b.build(y)

kind, n = sys.argv[1], int(sys.argv[2])
make = chain if kind == "chain" else mixed
make(200).as_hlo_text()  # imports and first calls are not measured
t0 = time.perf_counter()
comp = make(n)
t1 = time.perf_counter()
text = comp._direct_hlo_text(True, True)
t2 = time.perf_counter()
assert text is not None, "the graph should take the direct HLO printer"
comp._mlir_module_text()
t3 = time.perf_counter()
print(json.dumps({"build": t1 - t0, "hlo": t2 - t1, "stablehlo": t3 - t2}))
"""


def measure(tree: str, kind: str, n: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree), TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, kind, str(n)], env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True, help="the other xlasdk source tree (a git worktree)")
    ap.add_argument("--new", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--ops", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", help="write the figures to this JSON file")
    a = ap.parse_args()
    rows: list[dict[str, Any]] = []
    print(f"{'graph':>6} {'step':>10} {'old ms':>9} {'new ms':>9} {'new/old':>8}")
    for kind in ("chain", "mixed"):
        runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
        for _ in range(a.repeats):  # interleaved
            runs["old"].append(measure(a.old, kind, a.ops))
            runs["new"].append(measure(a.new, kind, a.ops))
        for step in ("build", "hlo", "stablehlo"):
            old = statistics.median(r[step] for r in runs["old"])
            new = statistics.median(r[step] for r in runs["new"])
            ratio = statistics.median(n[step] / o[step] for n, o in zip(runs["new"], runs["old"], strict=True))
            rows.append({"graph": kind, "step": step, "old_s": old, "new_s": new, "ratio": ratio})
            print(f"{kind:>6} {step:>10} {old * 1e3:>9.1f} {new * 1e3:>9.1f} {ratio:>8.2f}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"ops": a.ops, "repeats": a.repeats, "rows": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
