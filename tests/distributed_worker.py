"""One process of the multi-process tests (tests/test_distributed.py); not a test module itself.

    python tests/distributed_worker.py SCENARIO [ARG]

Reads the job from XLASDK_* variables (the launcher's, or set by the test). Prints one line
``RESULT {json}`` that the test reads. Scenarios:

* ``allreduce``: all-reduce (sum, max of replica ids) over every device of every process, twice;
  checks devices, process index and count; result values for the test to compare with numpy.
* ``kill K``: all-reduce once; then process K SIGKILLs itself and the others run again: they must
  get a DistributedError (exit code 3, with the time it took).
* ``join``: initialize only (the test leaves a process out): exit code 3 with the error and time.
* ``agree``: initialize (after ``XLASDK_TEST_DELAY`` seconds), all-reduce, wait ``XLASDK_TEST_HOLD``
  seconds, shutdown (for jobs whose processes disagree): exit code 3 with the error and its time,
  else the values.
* ``kill_shutdown K``: as ``kill K``, then the survivors time ``xs.distributed.shutdown()``.
* ``partition``: all-reduce once, write ``ready<process>`` in ``$XLASDK_TEST_DIR``, wait for the
  file ``go`` there (the test cuts a host's network link meanwhile), all-reduce again: exit code 3
  with the error and its time, or 0 with both results.

Each process ends itself after ``XLASDK_TEST_ALARM`` seconds (SIGALRM, default action) so that no
worker outlives a broken test.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

signal.alarm(int(os.environ.get("XLASDK_TEST_ALARM", "90")))

import numpy as np  # noqa: E402

import xlasdk as xs  # noqa: E402
from xlasdk import ops  # noqa: E402


def result(**kw: object) -> None:
    print("RESULT " + json.dumps(kw), flush=True)


def replica_input(k: int) -> np.ndarray:
    return np.arange(6, dtype=np.float32) * (k + 1) + k


def allreduce_exe() -> xs.Executable:
    b = xs.XlaBuilder("allreduce")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (6,)), "x")
    rid = ops.ConvertElementType(ops.ReplicaId(b), xs.PrimitiveType.S32)
    root = ops.Tuple(b, [ops.CrossReplicaSum(x), ops.AllReduce(rid, lambda p, q: ops.Max(p, q))])
    return xs.compile(b.build(root), options=xs.CompileOptions(num_replicas=len(xs.devices())))


def run(exe: xs.Executable) -> list[dict[str, object]]:
    position = {d: k for k, d in enumerate(exe.devices)}
    mine = [position[d] for d in exe.local_devices]
    outs = exe.execute_replicated([[replica_input(k)] for k in mine])
    return [
        {"replica": k, "sum": s.to_numpy().tolist(), "max_id": int(m.to_numpy())}
        for k, (s, m) in zip(mine, outs, strict=True)
    ]


def main() -> int:
    scenario = sys.argv[1]
    t0 = time.monotonic()
    if scenario in ("join", "agree"):
        time.sleep(float(os.environ.get("XLASDK_TEST_DELAY", "0")))  # join late
        t0 = time.monotonic()
        try:
            xs.distributed.initialize()
        except xs.DistributedError as e:
            result(error=str(e), seconds=time.monotonic() - t0, type=type(e).__name__)
            return 3
        if scenario == "join":
            result(error=None)
            return 0
        me, count = xs.process_index(), xs.process_count()
        try:
            sums = run(allreduce_exe())
        except xs.DistributedError as e:  # a partner was refused after this process agreed
            result(error=str(e), seconds=time.monotonic() - t0, type="run")
            return 3
        time.sleep(float(os.environ.get("XLASDK_TEST_HOLD", "0")))  # stay in the job a while
        xs.distributed.shutdown()
        result(error=None, process=me, count=count, first=sums)
        return 0
    xs.distributed.initialize()
    me = xs.process_index()
    exe = allreduce_exe()
    first = run(exe)
    if scenario == "allreduce":
        second = run(exe)
        local = xs.local_devices()
        result(
            process=me, count=xs.process_count(), devices=[d.id for d in xs.devices()],
            device_processes=[d.process_index for d in xs.devices()], local=[d.id for d in local],
            replicas=len(exe.devices), first=first, second=second,
            single=xs.compile(single_exe_comp())(np.float32(2.0)).to_numpy().tolist(),
        )
        xs.distributed.shutdown()
        return 0
    if scenario in ("kill", "kill_shutdown"):
        victim = int(sys.argv[2])
        if me == victim:
            os.kill(os.getpid(), signal.SIGKILL)
        t1 = time.monotonic()
        try:
            run(exe)
        except xs.DistributedError as e:
            seconds = time.monotonic() - t1
            if scenario == "kill_shutdown":
                t2 = time.monotonic()
                xs.distributed.shutdown()
                result(process=me, error=str(e), seconds=seconds, shutdown_seconds=time.monotonic() - t2)
                return 3
            result(process=me, error=str(e), seconds=seconds)
            return 3
        result(process=me, error=None)
        return 0
    if scenario == "partition":
        folder = os.environ["XLASDK_TEST_DIR"]
        open(os.path.join(folder, f"ready{me}"), "w").close()
        while not os.path.exists(os.path.join(folder, "go")):  # the test cuts a link meanwhile
            time.sleep(0.02)
        t1 = time.monotonic()
        try:
            again = run(exe)
        except xs.DistributedError as e:
            seconds = time.monotonic() - t1
            t2 = time.monotonic()
            xs.distributed.shutdown()
            result(process=me, error=str(e), seconds=seconds, shutdown_seconds=time.monotonic() - t2, first=first)
            return 3
        result(process=me, error=None, first=first, second=again)
        return 0
    raise SystemExit(f"unknown scenario {scenario!r}")


def single_exe_comp() -> xs.XlaComputation:
    """A one-device program: each process runs it on its own first device."""
    b = xs.XlaBuilder("square")
    x = ops.Parameter(b, 0, xs.Shape.scalar_shape(np.float32), "x")
    return b.build(x * x + 1.0)


if __name__ == "__main__":
    sys.exit(main())
