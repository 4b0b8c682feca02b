"""Make ``tests/data/spmd/``: XLA's dump of a JAX program partitioned over 8 CPU devices.

Run by hand (it needs ``jax``, a test-only dependency; xlasdk itself never imports it)::

    . .venv/bin/activate
    python tools/make_spmd_fixture.py

The child process runs with ``XLA_FLAGS=--xla_force_host_platform_device_count=8
--xla_dump_to=TMP --xla_dump_hlo_as_text`` and jits, on a 2x4 mesh ``("x", "y")``::

    f(a, w, v) = (tanh(a @ w).sum(axis=0), v * 2)
    a: f32[8,16]  P("x", None)    -> {devices=[2,1,4]<=[8] last_tile_dim_replicate}
    w: f32[16,8]  P(None, "y")    -> {devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}
    v: f32[8,4]   P("x", "y")     -> {devices=[2,4]<=[8]}
    outputs: P("y") and P("x", "y")

It writes ``tests/data/spmd/``:

``module.before_optimizations.txt``  XLA's ``before_optimizations`` dump (``num_partitions=8`` in the
                                      header, GSPMD shardings on the parameters and the root)
``module.after_optimizations.txt``   XLA's ``cpu_after_optimizations`` dump (the partitioned program)
``shardings.json``                   the text of every ``sharding={...}`` in both files, and what
                                      ``jax`` reports for each input and output (``_to_xla_hlo_sharding``)
``io.npz``                           ``in0..in2`` and ``out0..out1`` (global arrays)
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "data" / "spmd"


def child(outdir: str) -> None:
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((2, 4), ("x", "y"))
    specs = [P("x", None), P(None, "y"), P("x", "y")]
    rng = np.random.default_rng(7)
    args = [rng.standard_normal(s).astype(np.float32) for s in [(8, 16), (16, 8), (8, 4)]]
    placed = [jax.device_put(a, NamedSharding(mesh, s)) for a, s in zip(args, specs, strict=True)]

    def f(a: jax.Array, w: jax.Array, v: jax.Array) -> tuple[jax.Array, jax.Array]:
        return jnp.tanh(a @ w).sum(axis=0), v * 2

    out_specs = (NamedSharding(mesh, P("y")), NamedSharding(mesh, P("x", "y")))
    outs = jax.jit(f, out_shardings=out_specs)(*placed)
    np.savez(
        os.path.join(outdir, "io.npz"),
        **{f"in{i}": a for i, a in enumerate(args)},
        **{f"out{i}": np.asarray(o) for i, o in enumerate(outs)},
    )
    jax_shardings = {
        "inputs": [str(p.sharding._to_xla_hlo_sharding(p.ndim)) for p in placed],
        "outputs": [str(o.sharding._to_xla_hlo_sharding(o.ndim)) for o in outs],
    }
    with open(os.path.join(outdir, "jax_shardings.json"), "w") as fh:
        json.dump(jax_shardings, fh)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
        return
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "dump")
        env = dict(os.environ)
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count=8 --xla_dump_to={dump} --xla_dump_hlo_as_text"
        subprocess.run([sys.executable, __file__, "--child", tmp], check=True, env=env, cwd=REPO)
        [before] = glob.glob(os.path.join(dump, "*jit_f.before_optimizations.txt"))
        [after] = glob.glob(os.path.join(dump, "*jit_f.cpu_after_optimizations.txt"))
        shutil.copy(before, OUT / "module.before_optimizations.txt")
        shutil.copy(after, OUT / "module.after_optimizations.txt")
        shutil.copy(os.path.join(tmp, "io.npz"), OUT / "io.npz")
        with open(os.path.join(tmp, "jax_shardings.json")) as fh:
            info = json.load(fh)
    texts: list[str] = []
    for name in ("module.before_optimizations.txt", "module.after_optimizations.txt"):
        for m in re.finditer(r"sharding=(\{(?:[^{}]|\{[^{}]*\})*\})", (OUT / name).read_text()):
            if m.group(1) not in texts:
                texts.append(m.group(1))
    info["hlo_text"] = texts
    (OUT / "shardings.json").write_text(json.dumps(info, indent=1) + "\n")
    print(f"wrote {OUT}: {len(texts)} distinct shardings")


if __name__ == "__main__":
    main()
