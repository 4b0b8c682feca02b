"""Python inside a running computation: ``ops.DebugPrint`` to watch a loop, ``ops.HostCallback``
to call numpy where XLA has no op.

Power iteration for the largest eigenvalue of a symmetric matrix runs in a While loop that prints
its estimate every step (``ops.DebugPrint``, numpy formatting, in order); the result is then
checked by a host callback calling ``np.linalg.eigvalsh`` on the same matrix. The script compares
both with numpy and exits 0 when they match.

    python examples/host_callback.py
"""

from __future__ import annotations

import io
import sys

import numpy as np

import xlasdk as xs
from xlasdk import ops

N = 6
STEPS = 60


def build(log: io.StringIO) -> xs.XlaComputation:
    f32 = np.float32
    b = xs.XlaBuilder("power_iteration")
    a = ops.Parameter(b, 0, xs.Shape.array_shape(f32, (N, N)), "a")
    v0 = ops.Broadcast(ops.Constant(b, f32(1.0 / np.sqrt(N))), [N])
    carry = ops.Tuple(b, [ops.Constant(b, np.int32(0)), v0, ops.Constant(b, f32(0)), a])

    def cond(c: xs.XlaOp) -> xs.XlaOp:
        return ops.Lt(ops.GetTupleElement(c, 0), ops.Constant(c.builder, np.int32(STEPS)))

    def body(c: xs.XlaOp) -> xs.XlaOp:
        bb = c.builder
        i, v = ops.GetTupleElement(c, 0), ops.GetTupleElement(c, 1)
        w = ops.GetTupleElement(c, 3) @ v
        norm = ops.Sqrt(ops.Reduce(bb, [w * w], [ops.Constant(bb, f32(0))], lambda x, y: x + y, [0]))
        estimate = ops.Reduce(bb, [v * w], [ops.Constant(bb, f32(0))], lambda x, y: x + y, [0])
        ops.DebugPrint("step {:2d}: lambda ~ {:.6f}", i, estimate, file=log)  # runs every iteration
        return ops.Tuple(bb, [i + 1, w / norm, estimate, ops.GetTupleElement(c, 3)])

    lam = ops.GetTupleElement(ops.While(cond, body, carry), 2)
    exact = ops.HostCallback(lambda m: np.linalg.eigvalsh(m)[-1].astype(f32), [a], xs.Shape.scalar_shape(f32))
    return b.build(ops.Tuple(b, [lam, exact]))


def main() -> int:
    rng = np.random.default_rng(0)
    m = rng.standard_normal((N, N)).astype(np.float32)
    a = (m + m.T) / 2 + np.diag(np.arange(N, dtype=np.float32) * 3)
    log = io.StringIO()
    exe = xs.compile(build(log))
    lam, exact = (o.to_numpy() for o in exe(a))  # type: ignore[union-attr]
    lines = log.getvalue().splitlines()
    print("\n".join(lines[:3] + ["..."] + lines[-2:]))
    ref = np.linalg.eigvalsh(a.astype(np.float64))[-1]
    print(f"power iteration {float(lam):.6f}, host eigvalsh {float(exact):.6f}, numpy {ref:.6f}")
    ok = len(lines) == STEPS and lines[0].startswith("step  0") and abs(float(exact) - ref) < 1e-4 * abs(ref)
    ok = ok and abs(float(lam) - ref) < 1e-3 * abs(ref)
    print("MATCH" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
