"""1024x1024 f32 matmul: XLA's compiled dot, called through xlasdk, JAX and numpy.

Figures (median milliseconds per call, contenders interleaved in the same process):

- device-resident: ``exe(da, db).block_until_ready()`` against
  ``jax.jit(jnp.matmul)(ja, jb).block_until_ready()`` (target: within 10% of JAX) and numpy's
  ``a @ b`` (OpenBLAS or whatever numpy links);
- numpy in/out: ``exe(a, b).to_numpy()`` against ``np.asarray(jax.jit(jnp.matmul)(a, b))``
  (information: it adds two 4 MiB transfers).

The results are checked against numpy (relative error < 1e-4) before timing.

    python bench/matmul.py [--n 1024] [--calls 3] [--rounds 15] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _timing as tm  # noqa: E402

import xlasdk as xs  # noqa: E402
from xlasdk import ops  # noqa: E402


def _matmul_executable(n: int) -> xs.Executable:
    b = xs.XlaBuilder("matmul")
    s = xs.Shape.array_shape(np.float32, (n, n))
    ops.Dot(ops.Parameter(b, 0, s, "a"), ops.Parameter(b, 1, s, "b"))
    return xs.compile(b.build())


def _close(got: Any, want: np.ndarray[Any, Any]) -> bool:
    got = np.asarray(got, np.float64)
    return bool(np.max(np.abs(got - want)) <= 1e-4 * np.max(np.abs(want)))


def _one(out: xs.DeviceArray | tuple[xs.DeviceArray, ...]) -> xs.DeviceArray:
    assert isinstance(out, xs.DeviceArray)
    return out


def run(n: int = 1024, calls: int = 3, rounds: int = 15) -> list[dict[str, Any]]:
    """The matmul rows of the table: device-resident (target) and numpy in/out (information)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    c = rng.standard_normal((n, n), dtype=np.float32)
    want = a.astype(np.float64) @ c.astype(np.float64)
    exe = _matmul_executable(n)
    da, dc = xs.device_put(a), xs.device_put(c)
    assert _close(_one(exe(da, dc)).to_numpy(), want) and _close(a @ c, want)
    fns: dict[str, Any] = {
        "x_dev": lambda: _one(exe(da, dc)).block_until_ready(),
        "x_np": lambda: _one(exe(a, c)).to_numpy(),
        "numpy": lambda: a @ c,
    }
    jax = tm.jax_or_none()
    if jax is not None:
        f = jax.jit(jax.numpy.matmul)
        ja, jc = jax.device_put(a), jax.device_put(c)
        assert _close(f(ja, jc), want)
        fns["j_dev"] = lambda: f(ja, jc).block_until_ready()
        fns["j_np"] = lambda: np.asarray(f(a, c))
    t = tm.interleaved(fns, calls, rounds, warmup=3)
    ms = {k: tm.median(v) * 1e3 for k, v in t.items()}
    jname = f"jax {jax.__version__} jit(matmul)" if jax is not None else "jax (not installed)"
    has_jax = "j_dev" in t
    return [
        tm.row(
            f"{n}x{n} f32 matmul, device-resident", "ms", ms["x_dev"], ms.get("j_dev"), jname,
            tm.ratio(t["x_dev"], t["j_dev"]) if has_jax else None, 1.1, "<= 1.1x",
            numpy_ms=ms["numpy"], ratio_vs_numpy=tm.ratio(t["x_dev"], t["numpy"]),
        ),
        tm.row(
            f"{n}x{n} f32 matmul, numpy in/out (info)", "ms", ms["x_np"], ms.get("j_np"), jname,
            tm.ratio(t["x_np"], t["j_np"]) if has_jax else None, None, "-",
            numpy_ms=ms["numpy"], ratio_vs_numpy=tm.ratio(t["x_np"], t["numpy"]),
        ),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--calls", type=int, default=3, help="calls per timed batch")
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds (medians are taken)")
    ap.add_argument("--json", help="write the rows to this JSON file")
    a = ap.parse_args()
    rows = run(a.n, a.calls, a.rounds)
    tm.print_rows(rows)
    for r in rows:
        print(f"  numpy a @ b: {r['numpy_ms']:.2f} ms; xlasdk / numpy = {r['ratio_vs_numpy']:.3f} ({r['figure']})")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
