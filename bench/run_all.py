"""Every benchmark figure of the fast-path targets in one table, with the peer's figure and the ratio.

Runs, in this process: ``dispatch.py`` (two rows), ``build.py`` (HLO and StableHLO rows, plus ops/s
at 1k, 10k and 100k ops), ``compile_cache.py`` (if present; else an n/a row) and ``matmul.py``; and
``spmd.py`` (two rows: 4-device SPMD matmul and sharded dispatch) in a child process, and
``cli_start.py`` (the CPU time of ``xlasdk --help``, ``version`` and a usage error), ``load_hlo.py``
(loading HLO text against XLA's bare parse: first loads, the same bytes again, the worker's cold
start) and ``run_dump.py`` (``xlasdk run DUMP --random-inputs`` against jaxlib's calls alone, each
in fresh processes), ``evaluate.py`` (``xs.evaluate`` of each dump against XLA:CPU's compile of
it, and the evaluator's overhead per op beyond numpy's own work), ``evaluate_ops.py`` (``xs.evaluate``
of single ops at real models' sizes: sort, select_and_scatter, scatter, gather, reduce_window, against
the issue-35 targets) and ``bisection.py`` (``compare
--bisect ops`` and ``--bisect passes`` on a 1,000-instruction module with a planted XLA:CPU wrong
value, against their wall-time targets; ``--quick``: ops only).
The peer is JAX (``pip install jax==<jaxlib's version>`` in the same environment; it is never an
xlasdk dependency); without it the peer columns are n/a. Ratios are xlasdk / peer, medians of
interleaved rounds, and a target holds when ``ratio <= target``.

    python bench/run_all.py [--json out.json] [--quick] [--check]
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _timing as tm  # noqa: E402


def _machine() -> dict[str, Any]:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    import jaxlib

    jax = tm.jax_or_none()
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "load_average_1m_at_start": None if load is None else round(load[0], 2),
        "python": platform.python_version(),
        "jaxlib": getattr(jaxlib, "__version__", "?"),
        "jax": None if jax is None else jax.__version__,
        "platform": platform.platform(),
    }


def _compile_cache_rows() -> list[dict[str, Any]]:
    """Rows from ``bench/compile_cache.py`` when it exists and exposes ``table_rows()`` or ``run()``."""
    label = "compile, warm on-disk cache, 1000-op module"
    na = [tm.row(label, "ms", None, None, "cold compile", None, 1 / 30, "<= 1/30")]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compile_cache.py")
    if not os.path.exists(path):
        na[0]["note"] = "bench/compile_cache.py not present"
        return na
    try:
        mod = importlib.import_module("compile_cache")
        fn = getattr(mod, "table_rows", None) or getattr(mod, "run", None)
        if fn is None:
            raise AttributeError("compile_cache.py has neither table_rows() nor run()")
        rows = fn()
        rows = [rows] if isinstance(rows, dict) else list(rows)
        if not rows or not all(isinstance(r, dict) and "figure" in r and "ratio" in r for r in rows):
            raise TypeError("compile_cache rows must be dicts with at least 'figure' and 'ratio'")
        out = []
        for r in rows:
            base = tm.row(label, "ms", None, None, "cold compile", None, 1 / 30, "<= 1/30")
            base.update(r)
            if base.get("ok") is None and base.get("ratio") is not None and base.get("target") is not None:
                base["ok"] = bool(base["ratio"] <= base["target"])
            out.append(base)
        return out
    except Exception as e:  # report, do not hide the other figures
        na[0]["note"] = f"compile_cache.py failed: {type(e).__name__}: {e}"
        return na


def _spmd_rows(quick: bool) -> list[dict[str, Any]]:
    """Rows from ``bench/spmd.py`` (measured in a child process: JAX needs 4 CPU devices from its start)."""
    try:
        import spmd

        return spmd.table_rows(quick)
    except Exception as e:  # report, do not hide the other figures
        na = [
            tm.row("2048x2048 f32 matmul split 4 ways, 4 CPU devices", "ms", None, None, "jax", None, 1.1, "<= 1.1x"),
            tm.row("sharded dispatch, 4 devices, device-resident", "us", None, None, "jax", None, 1.3, "<= 1.3x"),
        ]
        for r in na:
            r["note"] = f"spmd.py failed: {type(e).__name__}: {e}"
        return na


def run(quick: bool = False) -> dict[str, Any]:
    import bisection
    import cli_start
    import dispatch
    import evaluate
    import evaluate_ops
    import load_hlo
    import matmul
    import run_dump

    # bench/build.py; by importlib, since the name is also a pip package's, which ruff's import sorting
    # places differently in environments that have it
    build = importlib.import_module("build")
    info = _machine()
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    rows += dispatch.run(calls=1000 if quick else 2000, rounds=9 if quick else 15)
    sizes = [1000, 10000] if quick else [1000, 10000, 100000]
    built = build.run(sizes, repeats=1 if quick else 3)
    rows += build.table_rows(built)
    rows += _compile_cache_rows()
    rows += matmul.run(calls=2 if quick else 3, rounds=7 if quick else 15)
    rows += _spmd_rows(quick)
    rows += cli_start.run(rounds=3 if quick else 7)
    rows += load_hlo.run([1000, 10000] if quick else [1000, 100000], rounds=2 if quick else 3)
    rows += run_dump.run(rounds=2 if quick else 5)
    rows += evaluate.run(rounds=2 if quick else 3)
    rows += evaluate_ops.run(rounds=1 if quick else 3)
    rows += bisection.run(rounds=1, which=("ops",) if quick else ("ops", "passes"))
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    info["load_average_1m_at_end"] = None if load is None else round(load[0], 2)
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": info,
        "seconds": round(time.perf_counter() - t0, 1),
        "rows": rows,
        "build_sizes": [
            {"ops": r["ops"], "build_ms": r["build_s"] * 1e3, "ops_per_s": r["ops_per_s"]} for r in built
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the table (and the machine description) to this JSON file")
    ap.add_argument("--quick", action="store_true", help="fewer rounds and no 100k-op graph (a smoke run)")
    ap.add_argument("--check", action="store_true", help="exit with status 1 when a target does not hold")
    a = ap.parse_args()
    res = run(a.quick)
    m = res["machine"]
    print(
        f"{res['date']}  {m['cpu']}, {m['cores']} cores, load {m['load_average_1m_at_start']} -> "
        f"{m['load_average_1m_at_end']}; python {m['python']}, jaxlib {m['jaxlib']}, jax {m['jax'] or 'not installed'}"
    )
    tm.print_rows(res["rows"])
    for r in res["rows"]:
        if r.get("note"):
            print(f"  note ({r['figure']}): {r['note']}")
    print("graph building (no quadratic behaviour: ops/s must not fall with size):")
    for s in res["build_sizes"]:
        print(f"  {s['ops']:>7} ops: {s['build_ms']:8.1f} ms, {s['ops_per_s']:>9.0f} ops/s")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(res, fh, indent=2)
        print(f"wrote {a.json}")
    missed = [r["figure"] for r in res["rows"] if r["ok"] is False]
    if missed:
        print(f"targets not met: {'; '.join(missed)}")
    if a.check and missed:
        sys.exit(1)


if __name__ == "__main__":
    main()
