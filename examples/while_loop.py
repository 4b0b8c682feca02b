"""Square roots by Newton's method, iterated inside one XLA While loop until nothing changes.

The loop carries ``(y, previous y, iteration count, x)``; each step replaces ``y`` by
``min(y, (y + x / y) / 2)`` -- starting from ``y0 = max(x, 1) >= sqrt(x)`` the iterates can only
go down, so in floating point they reach a fixed point -- and the condition stops the loop once
no element changed (or after ``MAX_ITERS`` steps). The result is checked against ``np.sqrt``.

    python examples/while_loop.py
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

import xlasdk as xs
from xlasdk import ops

N = 12
MAX_ITERS = 200


def build() -> xs.XlaComputation:
    f32 = np.float32
    b = xs.XlaBuilder("newton_sqrt")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(f32, (N,)), "x")
    y0 = ops.Max(x, 1.0)

    def cond(y: xs.XlaOp, prev: xs.XlaOp, it: xs.XlaOp, x_: xs.XlaOp) -> xs.XlaOp:
        sb = y.builder
        changed = ops.Reduce(sb, ops.Ne(y, prev), ops.Constant(sb, False), ops.Or, [0])  # any(y != prev)
        return ops.And(changed, ops.Lt(it, ops.Constant(sb, np.int32(MAX_ITERS))))

    def body(y: xs.XlaOp, prev: xs.XlaOp, it: xs.XlaOp, x_: xs.XlaOp) -> tuple[xs.XlaOp, ...]:
        newton = (y + x_ / y) * 0.5
        return (ops.Min(y, newton), y, it + 1, x_)

    # prev starts as 0 (differs from y0 >= 1), so the loop runs at least once.
    init = ops.Tuple(b, [y0, ops.Constant(b, np.zeros(N, f32)), ops.Constant(b, np.int32(0)), x])
    loop = ops.While(cond, body, init)
    return b.build([ops.GetTupleElement(loop, 0), ops.GetTupleElement(loop, 2)])


def execute(comp: xs.XlaComputation, *args: Any) -> list[np.ndarray[Any, Any]]:
    """Compile for the default CPU device, run, and return every output as numpy."""
    out = xs.compile(comp)(*args)
    return [o.to_numpy() for o in (out if isinstance(out, tuple) else (out,))]


def main() -> int:
    comp = build()
    print(comp.as_hlo_text())
    rng = np.random.default_rng(0)
    x = np.concatenate([[1.0, 2.0, 0.25, 1e-6, 1e6, 12345.678], 10.0 ** rng.uniform(-4, 6, N - 6)]).astype(np.float32)
    y, iters = execute(comp, x)
    want = np.sqrt(x)
    ulps = np.abs(y.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))
    print("x          ", x)
    print("sqrt(x)    ", y)
    print(f"iterations {int(iters)}, max distance from np.sqrt: {int(ulps.max())} ulp")
    ok = y.shape == want.shape and int(ulps.max()) <= 1 and int(iters) < MAX_ITERS
    print("MATCH" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
