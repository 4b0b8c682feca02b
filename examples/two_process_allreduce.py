"""All-reduce across processes: each process adds its own vector, every process gets the sum.

Run it in two local processes (the launcher starts them and the coordinator):

    python -m xlasdk.launch -n 2 examples/two_process_allreduce.py

Each process computes, for its own devices, ``sum over replicas r of x_r`` and ``max of replica ids``
with one XLA program that spans every process (gloo carries the all-reduce over TCP), and checks
the result against numpy. Exit code 0 on a match. Also runs with more processes (``-n 4``), more
devices per process (``XLASDK_LOCAL_DEVICE_COUNT=2``) or on several hosts (see the README).
"""

from __future__ import annotations

import sys

import numpy as np

import xlasdk as xs
from xlasdk import ops


def replica_input(replica: int) -> np.ndarray:
    """The vector replica ``replica`` contributes (every process can compute every replica's)."""
    return (np.arange(8, dtype=np.float32) + 1.0) * (replica + 1)


def main() -> int:
    xs.distributed.initialize()  # XLASDK_COORDINATOR, XLASDK_NUM_PROCESSES, XLASDK_PROCESS_ID
    me, count = xs.process_index(), xs.process_count()
    replicas = len(xs.devices())  # every device of every process
    print(f"process {me} of {count}: devices {[str(d) for d in xs.devices()]}, "
          f"mine {[str(d) for d in xs.local_devices()]}")

    b = xs.XlaBuilder("allreduce")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (8,)), "x")
    total = ops.CrossReplicaSum(x)
    rid = ops.ConvertElementType(ops.ReplicaId(b), xs.PrimitiveType.S32)
    top = ops.AllReduce(rid, lambda p, q: ops.Max(p, q))
    exe = xs.compile(b.build(ops.Tuple(b, [total, top])), options=xs.CompileOptions(num_replicas=replicas))

    # Replica k runs on exe.devices[k]; this process gives the arguments of its own devices.
    position = {d: k for k, d in enumerate(exe.devices)}
    mine = [position[d] for d in exe.local_devices]
    results = exe.execute_replicated([[replica_input(k)] for k in mine])

    want = sum(replica_input(k) for k in range(replicas))
    ok = True
    for k, (got_total, got_top) in zip(mine, results, strict=True):
        ok &= bool(np.array_equal(got_total.to_numpy(), want)) and int(got_top.to_numpy()) == replicas - 1
        print(f"process {me}, replica {k}: sum {got_total.to_numpy().tolist()}, max replica id {got_top.to_numpy()}")
    print(f"process {me}: {'MATCH' if ok else 'MISMATCH'} (numpy: {want.tolist()})")
    xs.distributed.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
