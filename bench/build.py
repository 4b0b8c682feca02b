"""Graph-building speed: build an N-op element-wise chain and get its HLO text.

Prints, for N in (1k, 10k, 100k): build time, ops/s, time to StableHLO text, to HLO text; and, if
`jax` is importable, `jax.jit(f).lower(x)` + `as_text()` of the same chain, with the ratio.

    python bench/build.py [--sizes 1000,10000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

import xlasdk as xs
from xlasdk import ops


def build_chain(n: int) -> tuple[xs.XlaComputation, float]:
    t0 = time.perf_counter()
    b = xs.XlaBuilder(f"chain{n}")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (128,)), "x")
    y = x
    for i in range(n):
        y = ops.Add(y, x) if i % 2 == 0 else ops.Mul(y, x)
    comp = b.build(y)
    return comp, time.perf_counter() - t0


def bench_xlasdk(n: int) -> dict[str, float]:
    comp, t_build = build_chain(n)
    t0 = time.perf_counter()
    comp._mlir_module_text()
    t_emit = time.perf_counter() - t0
    t0 = time.perf_counter()
    comp.as_hlo_text()
    t_hlo = time.perf_counter() - t0
    return {
        "ops": n,
        "build_s": t_build,
        "ops_per_s": n / t_build,
        "emit_stablehlo_s": t_emit,
        "to_hlo_text_s": t_hlo,
        "total_s": t_build + t_emit + t_hlo,
    }


def bench_jax(n: int) -> float | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None

    def f(x: Any) -> Any:
        y = x
        for i in range(n):
            y = y + x if i % 2 == 0 else y * x
        return y

    t0 = time.perf_counter()
    jax.jit(f).lower(jnp.zeros((128,), jnp.float32)).as_text()
    return time.perf_counter() - t0


def run(sizes: list[int]) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        r: dict[str, Any] = bench_xlasdk(n)
        jt = bench_jax(n) if n <= 20000 else None
        r["jax_lower_as_text_s"] = jt
        r["ratio_vs_jax"] = (r["total_s"] / jt) if jt else None
        rows.append(r)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--json", help="write the figures to this JSON file")
    a = ap.parse_args()
    rows = run([int(s) for s in a.sizes.split(",")])
    print(f"{'ops':>8} {'build ms':>9} {'ops/s':>10} {'emit ms':>8} {'HLO ms':>8} {'total ms':>9} {'jax ms':>8} {'ratio':>6}")
    for r in rows:
        jt = r["jax_lower_as_text_s"]
        ratio = r["ratio_vs_jax"]
        print(
            f"{r['ops']:>8} {r['build_s'] * 1e3:>9.1f} {r['ops_per_s']:>10.0f} {r['emit_stablehlo_s'] * 1e3:>8.1f} "
            f"{r['to_hlo_text_s'] * 1e3:>8.1f} {r['total_s'] * 1e3:>9.1f} "
            f"{(jt * 1e3 if jt else float('nan')):>8.1f} {(ratio if ratio else float('nan')):>6.2f}"
        )
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
