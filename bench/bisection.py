"""(Named bisection.py, not bisect.py: bench/ is on sys.path and would hide the standard library's bisect.)

Bisecting a 1,000-instruction module with a planted XLA:CPU wrong value (``--bisect ops`` and
``--bisect passes``, through ``xs.compare(comp, args, bisect=...)`` as ``xlasdk compare`` calls it).

The module is ``bench/reduce.py``'s model-like graph (layers of dot, add, scaling, maximum,
transpose and reductions over f32[16,16] values from four parameters, a sum of each layer as an
output) with XLA:CPU's known wrong value spliced into its middle: ``(p0 * 1000) / 2**127`` by a
broadcast constant, which XLA:CPU's algebraic simplifier rewrites as a multiplication by the
reciprocal, a subnormal flushed to zero (``tests/test_xla_wrong_values.py``). Each figure is the
wall time of the whole answer a user waits for (the comparison, then the bisection), in this
process, the XLA compiles in xlasdk's worker; each is checked: ``--bisect ops`` must blame the
division, ``--bisect passes`` must name ``algsimp``. Printed per run: wall time, compiles, and the
time per step (from the bisection's progress lines).

    python bench/bisection.py [--instructions 1000] [--rounds 1] [--which ops,passes] [--json out.json]

Targets (issue 19): ``--bisect ops`` under 60 s and ``--bisect passes`` under 5 minutes, on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _timing as tm  # noqa: E402
from reduce import module_text  # noqa: E402 - bench/reduce.py: the same 1,000-instruction module

import xlasdk as xs  # noqa: E402

TARGET_S = {"ops": 60.0, "passes": 300.0}


def program(n: int = 1000) -> tuple[xs.XlaComputation, list[np.ndarray[Any, Any]]]:
    """The module (about ``n`` instructions, the wrong division in its middle) and its inputs."""
    comp = xs.XlaComputation.from_hlo_text(module_text(n, "diverge"))
    rng = np.random.default_rng(0)
    args = [rng.uniform(0.25, 1.0, (16, 16)).astype(np.float32) for _ in range(4)]
    return comp, args


def bisect_once(comp: xs.XlaComputation, args: list[np.ndarray[Any, Any]], which: str,
                verbose: bool = False) -> dict[str, Any]:
    """One ``xs.compare(..., bisect=which)`` from scratch: its wall time, compiles, what it found,
    and the seconds between its progress lines (where the time goes)."""
    steps: list[tuple[float, str]] = []
    t0 = time.perf_counter()

    def progress(line: str) -> None:
        steps.append((time.perf_counter() - t0, line))
        if verbose:
            print(f"    {steps[-1][0]:7.1f} s  {line}", flush=True)

    report = xs.compare(comp, args, bisect=which, progress=progress)
    wall = time.perf_counter() - t0
    res = report.bisect_ops if which == "ops" else report.bisect_passes
    if which == "ops":
        culprit = res.culprit
        found = None if culprit is None else culprit.opcode
        ok = culprit is not None and culprit.opcode in ("stablehlo.divide", "divide")
    else:
        found = ",".join(res.passes) if res.passes else res.status
        ok = res.status == "found" and "algsimp" in res.passes
    times = [b - a for (a, _), (b, _) in zip([(0.0, "start"), *steps], [*steps, (wall, "end")], strict=False)]
    slowest = sorted(zip(times, ["start", *(s for _, s in steps)], strict=False), reverse=True)[:3]
    return {"which": which, "wall_s": wall, "diverged": not report.ok, "found": found, "right": ok,
            "compiles": getattr(res, "compiles", None), "steps": len(steps),
            "slowest_steps": [(round(t, 2), s[:90]) for t, s in slowest]}


def run(rounds: int = 1, n: int = 1000, which: tuple[str, ...] = ("ops", "passes"),
        verbose: bool = False) -> list[dict[str, Any]]:
    """The rows of ``run_all.py``: one per bisection, the median wall time over ``rounds`` (each
    from a fresh load of the module, so no cache of an earlier round helps)."""
    rows = []
    for w in which:
        runs = []
        for _ in range(rounds):
            comp, args = program(n)
            runs.append(bisect_once(comp, args, w, verbose))
        wall = statistics.median(r["wall_s"] for r in runs)
        right = all(r["right"] for r in runs)
        size = len(program(n)[0].instructions())
        row = tm.row(f"compare --bisect {w}, {size}-instruction module", "s", wall, TARGET_S[w], "target",
                     wall / TARGET_S[w] if right else None, 1.0, f"<= {TARGET_S[w]:g} s",
                     runs=runs)
        if not right:
            row["ok"] = False
            row["note"] = f"--bisect {w} did not find the planted division: {runs[-1]['found']}"
        rows.append(row)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instructions", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--which", default="ops,passes")
    ap.add_argument("--json", default=None)
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    a = ap.parse_args()
    which = tuple(w for w in a.which.split(",") if w)
    rows = run(a.rounds, a.instructions, which, verbose=not a.quiet)
    tm.print_rows(rows)
    for r in rows:
        for k, one in enumerate(r["runs"]):
            print(f"  {r['figure']} run {k}: {one['wall_s']:.1f} s, {one['compiles']} compiles, found {one['found']}, "
                  f"slowest steps {one['slowest_steps']}")
    doc = {"rows": rows, "jaxlib": ".".join(map(str, xs.jaxlib_version_info())), "cpus": os.cpu_count(),
           "load_average_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=2, default=str)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
