"""One process driving 4 CPU devices: a matmul partitioned 4 ways by XLA's SPMD partitioner.

    python examples/spmd_matmul.py

``y = x @ w`` with ``x`` split into 4 row blocks (one per device) and ``w`` on every device: each
device computes its block of rows of ``y``. The shardings are XLA's notation on the parameters and
the result (``mhlo.sharding`` in StableHLO, ``sharding={...}`` in HLO); ``num_partitions=4``
partitions the program; ``execute_sharded`` takes numpy arrays (split by the shardings) or
device-resident ``xs.ShardedArray``s and returns the result's per-device shards. The global result
is compared with numpy.
"""

from __future__ import annotations

import sys

import numpy as np

import xlasdk as xs
from xlasdk import ops

M, K, N = 256, 128, 64
ROWS = "{devices=[4,1]<=[4]}"  # 4 row blocks: block i on device i


def build() -> xs.XlaComputation:
    f32 = np.float32
    b = xs.XlaBuilder("spmd_matmul")
    with b.sharding(ROWS):
        x = ops.Parameter(b, 0, xs.Shape.array_shape(f32, (M, K)), "x")
    with b.sharding("{replicated}"):
        w = ops.Parameter(b, 1, xs.Shape.array_shape(f32, (K, N)), "w")
    with b.sharding(ROWS):  # the root's sharding is the result's: it stays split by rows
        y = ops.Dot(x, w)
    return b.build(y)


def main() -> int:
    comp = build()
    print("== HLO (parameters and result carry their shardings) ==")
    print("\n".join(line for line in comp.as_hlo_text().splitlines() if "sharding=" in line))

    devices = xs.client("cpu", num_devices=4).devices()
    exe = xs.compile(comp, devices[0], options=xs.CompileOptions(num_partitions=4))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((M, K), dtype=np.float32)
    w = rng.standard_normal((K, N), dtype=np.float32)

    y = exe.execute_sharded([x, w])  # numpy in: x is split into its 4 row blocks
    print(f"\n== result: {y.shape} with sharding {y.sharding} ==")
    for shard in y.shards:
        print(f"  {shard.device}: rows block {shard.shape}")

    # Device-resident inputs: shard once, run many times without copying them again.
    xd, wd = xs.shard(x, ROWS, devices), xs.shard(w, "{replicated}", devices)
    y2 = exe.execute_sharded([xd, wd])

    want = x.astype(np.float64) @ w.astype(np.float64)
    err = max(float(np.max(np.abs(r.to_numpy() - want))) for r in (y, y2))
    ok = err < 1e-3 * float(np.max(np.abs(want)))
    print(f"max |xlasdk - numpy| = {err:.2e} -> {'MATCH' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
