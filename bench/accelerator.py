"""xlasdk against JAX on the default device (a TPU when there is one), in one process, one client.

JAX is used first and xlasdk adopts JAX's client (one client per platform per process), so both
sides run on the same device and runtime; contenders are interleaved round by round and a ratio
is the median of the per-round ratios (``_timing``).

Rows:
- dispatch, device-resident: ``exe(a, b)`` against ``jit(add)(a, b)`` on f32[2,3] (target <= 1.0x);
- dispatch, numpy in/out: ``exe(a, b).to_numpy()`` against ``np.asarray(jit(add)(a, b))``;
- host -> device and device -> host, 256 MiB (target: within 2%);
- an 8192^3 bf16 matmul built with ``ops.Dot`` against ``jit(u @ v)`` (TFLOP/s; target within 2%);
  on the CPU 1024^3 so the bench stays short;
- first-call compile of a 3-layer f32 MLP (a new program each round; target <= 1.05x).

    python bench/accelerator.py [--rounds 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _timing as tm  # noqa: E402


def _mlp(xs: Any, ops: Any, scale: float) -> Any:
    b = xs.XlaBuilder("mlp")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (256, 512)), "x")
    h = x
    for i in range(3):
        w = ops.Parameter(b, i + 1, xs.Shape.array_shape(np.float32, (512, 512)), f"w{i}")
        h = ops.Tanh(ops.Dot(h, w) * scale)
    return b.build()


def run(rounds: int = 7) -> list[dict[str, Any]]:
    jax = tm.jax_or_none()
    if jax is None:
        return [tm.row("accelerator bench", "", None, None, "JAX", None, None, "needs jax")]
    import jax.numpy as jnp

    jax.devices()  # JAX first: xlasdk adopts its client
    import xlasdk as xs
    from xlasdk import ops

    dev = xs.default_device()
    jdev = jax.devices()[0]
    assert dev.client._c is jdev.client, "xlasdk did not adopt JAX's client"
    platform = dev.platform
    rows: list[dict[str, Any]] = []

    # -- dispatch ----------------------------------------------------------------------------
    b = xs.XlaBuilder("add")
    s = xs.Shape.array_shape(np.float32, (2, 3))
    ops.Add(ops.Parameter(b, 0, s, "a"), ops.Parameter(b, 1, s, "b"))
    exe = xs.compile(b.build(), dev)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = np.ones((2, 3), np.float32)
    da, dc = xs.device_put(a, dev), xs.device_put(c, dev)
    f = jax.jit(lambda x, y: x + y)
    ja, jc = jax.device_put(a, jdev), jax.device_put(c, jdev)
    t = tm.interleaved({
        "xlasdk": lambda: exe(da, dc).block_until_ready(),  # type: ignore[union-attr]
        "jax": lambda: f(ja, jc).block_until_ready(),
    }, calls=500, rounds=rounds * 2, warmup=100)
    rows.append(tm.row(f"dispatch, device-resident ({platform})", "us/call", tm.median(t["xlasdk"]) * 1e6,
                       tm.median(t["jax"]) * 1e6, "JAX", tm.ratio(t["xlasdk"], t["jax"]), 1.0, "<= 1.0x JAX"))
    t = tm.interleaved({
        "xlasdk": lambda: exe(a, c).to_numpy(),  # type: ignore[union-attr]
        "jax": lambda: np.asarray(f(a, c)),
    }, calls=200, rounds=rounds * 2, warmup=50)
    rows.append(tm.row(f"dispatch, numpy in/out ({platform})", "us/call", tm.median(t["xlasdk"]) * 1e6,
                       tm.median(t["jax"]) * 1e6, "JAX", tm.ratio(t["xlasdk"], t["jax"]), None, "info"))

    # -- transfers ---------------------------------------------------------------------------
    big = np.random.default_rng(0).standard_normal(64 * 1024 * 1024, dtype=np.float32)  # 256 MiB
    gib = big.nbytes / 2**30
    t = tm.interleaved({
        "xlasdk": lambda: xs.device_put(big, dev).block_until_ready(),
        "jax": lambda: jax.device_put(big, jdev).block_until_ready(),
    }, calls=1, rounds=rounds, warmup=1)
    rows.append(tm.row(f"host -> device 256 MiB ({platform})", "GiB/s", gib / tm.median(t["xlasdk"]),
                       gib / tm.median(t["jax"]), "JAX", tm.ratio(t["xlasdk"], t["jax"]), 1.02,
                       "time within 2% of JAX"))
    if platform != "cpu":  # (on the CPU a readback is a view for both: not a transfer)
        t = tm.interleaved({"xlasdk": lambda: xs.device_put(big, dev).to_numpy(),
                            "jax": lambda: np.asarray(jax.device_put(big, jdev))}, calls=1, rounds=rounds, warmup=1)
        rows.append(tm.row(f"host -> device -> host 256 MiB ({platform})", "GiB/s",
                           2 * gib / tm.median(t["xlasdk"]), 2 * gib / tm.median(t["jax"]), "JAX",
                           tm.ratio(t["xlasdk"], t["jax"]), 1.02, "time within 2% of JAX"))
    big = np.empty(0, np.float32)  # (free the 256 MiB)

    # -- matmul ------------------------------------------------------------------------------
    n = 8192 if platform != "cpu" else 1024
    b = xs.XlaBuilder("matmul")
    ms = xs.Shape.array_shape(xs.bfloat16, (n, n))
    ops.Dot(ops.Parameter(b, 0, ms, "u"), ops.Parameter(b, 1, ms, "v"))
    mm = xs.compile(b.build(), dev)
    rng = np.random.default_rng(1)
    u = rng.standard_normal((n, n), dtype=np.float32).astype(xs.bfloat16)
    v = rng.standard_normal((n, n), dtype=np.float32).astype(xs.bfloat16)
    du, dv = xs.device_put(u, dev), xs.device_put(v, dev)
    jm = jax.jit(lambda p, q: p @ q)
    ju, jv = jax.device_put(u, jdev), jax.device_put(v, jdev)
    calls = 20 if platform != "cpu" else 2
    t = tm.interleaved({
        "xlasdk": lambda: mm(du, dv).block_until_ready(),  # type: ignore[union-attr]
        "jax": lambda: jm(ju, jv).block_until_ready(),
    }, calls=calls, rounds=rounds, warmup=3)
    flop = 2 * n**3 / 1e12
    rows.append(tm.row(f"{n}^3 bf16 matmul ({platform})", "TFLOP/s", flop / tm.median(t["xlasdk"]),
                       flop / tm.median(t["jax"]), "JAX", tm.ratio(t["xlasdk"], t["jax"]), 1.02,
                       "time within 2% of JAX"))
    got = np.asarray(mm(du, dv).to_numpy(), np.float32)[:4, :4]  # type: ignore[union-attr]
    want = np.asarray(jm(ju, jv), np.float32)[:4, :4]
    assert np.array_equal(got, want), "the two matmuls disagree"

    # -- first-call compile ------------------------------------------------------------------
    xt: list[float] = []
    jt: list[float] = []
    xw = np.zeros((256, 512), np.float32)
    ww = np.zeros((512, 512), np.float32)
    for r in range(rounds):
        scale = 1.0 + r / 1000.0
        comp = _mlp(xs, ops, scale)  # built outside the clock: xlasdk's compile of a built program
        order = [0, 1] if r % 2 == 0 else [1, 0]
        for who in order:
            if who == 0:
                xt.append(tm.once(lambda comp=comp: xs.compile(comp, dev)))
            else:
                def jf(x: Any, w0: Any, w1: Any, w2: Any, scale: float = scale) -> Any:
                    h = x
                    for w in (w0, w1, w2):
                        h = jnp.tanh((h @ w) * scale)
                    return h
                jt.append(tm.once(lambda: jax.jit(jf).lower(xw, ww, ww, ww).compile()))
    rows.append(tm.row(f"first-call compile, 3-layer MLP ({platform})", "ms", tm.median(xt) * 1e3,
                       tm.median(jt) * 1e3, "JAX (lower + compile)", tm.ratio(xt, jt), 1.05, "<= 1.05x JAX"))
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    t0 = time.perf_counter()
    rows = run(args.rounds)
    for r in rows:
        print(json.dumps(r))
    print(f"# {time.perf_counter() - t0:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
