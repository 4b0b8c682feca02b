"""Make ``tests/data/spmd/mesh2x2/``: XLA's dumps of a JAX program on a 2x2 mesh of 4 CPU devices whose
optimized module holds a variadic all-reduce.

Run by hand (it needs ``jax``, a test-only dependency; xlasdk itself never imports it)::

    . .venv/bin/activate
    python tools/make_spmd_mesh_fixture.py

The child process runs with ``XLA_FLAGS=--xla_force_host_platform_device_count=4
--xla_dump_to=TMP --xla_dump_hlo_as_text`` and jits, on the mesh ``("x", "y")`` of shape (2, 2)::

    f(x, w) = (sum(h), sum(h, axis=0), h)   with h = tanh(x @ w)
    x: f32[16,8]  P("x", None)      w: f32[8,6]  P(None, "y")

XLA's all-reduce combiner joins the two sums over the "x" axis into one
``(f32[], f32[3]) all-reduce(a, b)`` in the optimized module (one partition's program).

It writes ``tests/data/spmd/mesh2x2/``:

``module.before_optimizations.txt``      XLA's ``before_optimizations`` dump (global shapes, GSPMD shardings)
``module.cpu_after_optimizations.txt``   XLA's ``cpu_after_optimizations`` dump (per-partition shapes)
``io.npz``   ``in0``, ``in1`` (global inputs), ``out0`` .. ``out2`` (JAX's global outputs) and
             ``out{i}_d{k}``: output ``i``'s shard on device ``k`` (what each partition computed)
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "data" / "spmd" / "mesh2x2"


def child(outdir: str) -> None:
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((2, 2), ("x", "y"))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 8)).astype(np.float32)
    w = rng.standard_normal((8, 6)).astype(np.float32)
    placed = [jax.device_put(x, NamedSharding(mesh, P("x", None))),
              jax.device_put(w, NamedSharding(mesh, P(None, "y")))]

    @jax.jit
    def f(x: jax.Array, w: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        h = jnp.tanh(x @ w)
        return h.sum(), h.sum(axis=0), h

    outs = f(*placed)
    arrays = {"in0": x, "in1": w, **{f"out{i}": np.asarray(o) for i, o in enumerate(outs)}}
    for i, o in enumerate(outs):
        for s in o.addressable_shards:
            arrays[f"out{i}_d{s.device.id}"] = np.asarray(s.data)
    np.savez(os.path.join(outdir, "io.npz"), **arrays)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
        return
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "dump")
        env = dict(os.environ)
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count=4 --xla_dump_to={dump} --xla_dump_hlo_as_text"
        env["JAX_PLATFORMS"] = "cpu"
        subprocess.run([sys.executable, __file__, "--child", tmp], check=True, env=env, cwd=REPO)
        [before] = glob.glob(os.path.join(dump, "*jit_f.before_optimizations.txt"))
        [after] = glob.glob(os.path.join(dump, "*jit_f.cpu_after_optimizations.txt"))
        shutil.copy(before, OUT / "module.before_optimizations.txt")
        shutil.copy(after, OUT / "module.cpu_after_optimizations.txt")
        shutil.copy(os.path.join(tmp, "io.npz"), OUT / "io.npz")
    text = (OUT / "module.cpu_after_optimizations.txt").read_text()
    assert ") all-reduce(" in text, "no variadic all-reduce in the optimized module"
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
