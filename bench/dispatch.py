"""Per-call dispatch time of a tiny computation (f32[2,3] add).

Figures (median microseconds per call):
- numpy in -> ``exe(a, b)`` -> ``to_numpy()``;
- device-resident ``DeviceArray`` args -> ``exe(a, b)`` -> ``block_until_ready()``;
and, if ``jax`` is importable, the same with ``jax.jit`` (numpy args + ``np.asarray``; ``jax.Array``
args + ``block_until_ready``), with the ratio xlasdk / JAX.

    python bench/dispatch.py [--calls 3000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import xlasdk as xs
from xlasdk import ops


def median_us(fn: Callable[[], Any], calls: int, repeats: int = 5) -> float:
    """Median over ``repeats`` batches of the mean per-call time of ``calls`` calls, in us."""
    for _ in range(min(200, calls)):
        fn()
    batches = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        batches.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(batches)


def xlasdk_figures(calls: int) -> dict[str, float]:
    b = xs.XlaBuilder("add")
    s = xs.Shape.array_shape(np.float32, (2, 3))
    ops.Add(ops.Parameter(b, 0, s, "a"), ops.Parameter(b, 1, s, "b"))
    exe = xs.compile(b.build())
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = np.ones((2, 3), np.float32)
    da, dc = xs.device_put(a), xs.device_put(c)
    assert np.array_equal(exe(a, c).to_numpy(), a + c)
    return {
        "numpy_in_out_us": median_us(lambda: exe(a, c).to_numpy(), calls),
        "device_resident_us": median_us(lambda: exe(da, dc).block_until_ready(), calls),
    }


def jax_figures(calls: int) -> dict[str, float] | None:
    try:
        import jax
        import jax.numpy as jnp  # noqa: F401
    except ImportError:
        return None
    f = jax.jit(lambda x, y: x + y)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = np.ones((2, 3), np.float32)
    ja, jc = jax.device_put(a), jax.device_put(c)
    return {
        "numpy_in_out_us": median_us(lambda: np.asarray(f(a, c)), calls),
        "device_resident_us": median_us(lambda: f(ja, jc).block_until_ready(), calls),
    }


def run(calls: int) -> list[dict[str, Any]]:
    mine = xlasdk_figures(calls)
    peer = jax_figures(calls)
    rows = []
    for key, label in (("device_resident_us", "exe(*device_arrays) + ready"), ("numpy_in_out_us", "exe(*numpy) + to_numpy()")):
        p = peer[key] if peer else None
        rows.append({"figure": label, "xlasdk_us": mine[key], "jax_us": p, "ratio": mine[key] / p if p else None})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = run(a.calls)
    print(f"{'figure':<32} {'xlasdk us':>10} {'jax us':>8} {'ratio':>6}")
    for r in rows:
        j = f"{r['jax_us']:.1f}" if r["jax_us"] else "n/a"
        ratio = f"{r['ratio']:.2f}" if r["ratio"] else "n/a"
        print(f"{r['figure']:<32} {r['xlasdk_us']:>10.1f} {j:>8} {ratio:>6}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
