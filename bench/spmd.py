"""SPMD on 4 CPU devices in one process: xlasdk's ``execute_sharded`` against ``jax.jit`` with a
``NamedSharding``, in the same run.

Figures (medians of interleaved rounds, see ``_timing.py``):

- 2048x2048 f32 matmul partitioned 4 ways (rows of ``x`` and of the result split over a 4-device
  mesh, ``w`` replicated), device-resident inputs, ``block_until_ready``: xlasdk
  ``exe.execute_sharded([xa, wa])`` with ``xs.ShardedArray`` inputs against
  ``jax.jit(matmul, out_shardings=NamedSharding(mesh, P("x", None)))`` with ``jax.Array`` inputs
  placed by ``NamedSharding`` (target: within 1.1x of JAX);
- per-call dispatch of a small sharded program (``tanh(x) * y`` on f32[8,128] split 4 ways),
  device-resident shards, ``block_until_ready`` (target: within 1.3x of JAX).

Both sides compile the same program with XLA's Shardy partitioner. The results are checked
against numpy before timing. JAX needs its 4 CPU devices before it starts, so this script sets
``XLA_FLAGS=--xla_force_host_platform_device_count=4`` when run as a program; ``run_all.py``
runs it in a child process.

    python bench/spmd.py [--n 2048] [--calls 1] [--rounds 9] [--dispatch-calls 300] [--dispatch-rounds 25]
                         [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

DEVICES = 4
if __name__ == "__main__" and "jax" not in sys.modules:
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={DEVICES}".strip()

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _timing as tm  # noqa: E402

import xlasdk as xs  # noqa: E402
from xlasdk import ops  # noqa: E402

ROWS = "{devices=[4,1]<=[4]}"


def _matmul(n: int) -> xs.XlaComputation:
    b = xs.XlaBuilder("spmd_matmul")
    s = xs.Shape.array_shape(np.float32, (n, n))
    with b.sharding(ROWS):
        x = ops.Parameter(b, 0, s, "x")
    with b.sharding("{replicated}"):
        w = ops.Parameter(b, 1, s, "w")
    with b.sharding(ROWS):
        y = ops.Dot(x, w)
    return b.build(y)


def _small() -> xs.XlaComputation:
    b = xs.XlaBuilder("spmd_small")
    s = xs.Shape.array_shape(np.float32, (8, 128))
    with b.sharding(ROWS):
        x = ops.Parameter(b, 0, s, "x")
        y = ops.Parameter(b, 1, s, "y")
        z = ops.Mul(ops.Tanh(x), y)
    return b.build(z)


def _close(got: Any, want: np.ndarray[Any, Any], tol: float = 1e-4) -> bool:
    got = np.asarray(got, np.float64)
    return bool(np.max(np.abs(got - want)) <= tol * max(1.0, float(np.max(np.abs(want)))))


def run(
    n: int = 2048, calls: int = 1, dispatch_calls: int = 300, rounds: int = 9, dispatch_rounds: int = 25
) -> list[dict[str, Any]]:
    """The two SPMD rows of the table."""
    devices = xs.client("cpu", num_devices=DEVICES).devices()
    opts = xs.CompileOptions(num_partitions=DEVICES)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    c = rng.standard_normal((n, n), dtype=np.float32)
    want = a.astype(np.float64) @ c.astype(np.float64)
    mm = xs.compile(_matmul(n), devices[0], options=opts)
    xa, wa = xs.shard(a, ROWS, devices), xs.shard(c, "{replicated}", devices)
    assert _close(mm.execute_sharded([xa, wa]).to_numpy(), want)

    sx = rng.standard_normal((8, 128), dtype=np.float32)
    sy = rng.standard_normal((8, 128), dtype=np.float32)
    small = xs.compile(_small(), devices[0], options=opts)
    sxa, sya = xs.shard(sx, ROWS, devices), xs.shard(sy, ROWS, devices)
    assert _close(small.execute_sharded([sxa, sya]).to_numpy(), np.tanh(sx) * sy, 1e-5)

    big: dict[str, Any] = {"x": lambda: mm.execute_sharded([xa, wa]).block_until_ready()}
    tiny: dict[str, Any] = {"x": lambda: small.execute_sharded([sxa, sya]).block_until_ready()}
    jax = tm.jax_or_none()
    jname = "jax (not installed)"
    if jax is not None and len(jax.devices("cpu")) >= DEVICES:
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        jnp = jax.numpy
        mesh = jax.make_mesh((DEVICES,), ("x",), devices=jax.devices("cpu")[:DEVICES])
        rows, rep = NamedSharding(mesh, P("x", None)), NamedSharding(mesh, P())
        jmm = jax.jit(jnp.matmul, out_shardings=rows)
        ja, jc = jax.device_put(a, rows), jax.device_put(c, rep)
        assert _close(jmm(ja, jc), want)
        jsmall = jax.jit(lambda x, y: jnp.tanh(x) * y, out_shardings=rows)
        jx, jy = jax.device_put(sx, rows), jax.device_put(sy, rows)
        assert _close(jsmall(jx, jy), np.tanh(sx) * sy, 1e-5)
        big["j"] = lambda: jmm(ja, jc).block_until_ready()
        tiny["j"] = lambda: jsmall(jx, jy).block_until_ready()
        jname = f"jax {jax.__version__} jit+NamedSharding"
    elif jax is not None:
        jname = "jax (fewer than 4 CPU devices)"
    tb = tm.interleaved(big, calls, rounds, warmup=2)
    td = tm.interleaved(tiny, dispatch_calls, dispatch_rounds, warmup=100)
    has = "j" in tb
    return [
        tm.row(
            f"{n}x{n} f32 matmul split 4 ways, 4 CPU devices", "ms", tm.median(tb["x"]) * 1e3,
            tm.median(tb["j"]) * 1e3 if has else None, jname, tm.ratio(tb["x"], tb["j"]) if has else None,
            1.1, "<= 1.1x",
        ),
        tm.row(
            "sharded dispatch, 4 devices, device-resident", "us", tm.median(td["x"]) * 1e6,
            tm.median(td["j"]) * 1e6 if has else None, jname, tm.ratio(td["x"], td["j"]) if has else None,
            1.3, "<= 1.3x",
        ),
    ]


def table_rows(quick: bool = False) -> list[dict[str, Any]]:
    """The rows, measured in a child process (JAX must see 4 CPU devices from its start)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "spmd.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--json", out]
        if quick:
            cmd += ["--rounds", "5", "--dispatch-calls", "100", "--dispatch-rounds", "11"]
        env = dict(os.environ)
        env.pop("XLA_FLAGS", None)
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
        if r.returncode != 0 or not os.path.exists(out):
            tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"bench/spmd.py failed (exit {r.returncode}): {tail[0]}")
        with open(out) as fh:
            rows: list[dict[str, Any]] = json.load(fh)
        return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--calls", type=int, default=1, help="matmul calls per timed batch")
    ap.add_argument("--dispatch-calls", type=int, default=300, help="dispatch calls per timed batch")
    ap.add_argument("--rounds", type=int, default=9, help="interleaved matmul rounds (medians are taken)")
    ap.add_argument("--dispatch-rounds", type=int, default=25, help="interleaved dispatch rounds")
    ap.add_argument("--json", help="write the rows to this JSON file")
    a = ap.parse_args()
    rows = run(a.n, a.calls, a.dispatch_calls, a.rounds, a.dispatch_rounds)
    tm.print_rows(rows)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
