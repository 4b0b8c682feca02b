"""Make ``tests/data/pod/<jax>_p<N>/``: a pod's SPMD training step (64 or 256 partitions) made by JAX on
as many CPU devices of one process, for ``tests/test_pod_partitions.py`` (issue 46).

Run by hand with the jax of each end of the range (jax is a test-only peer; xlasdk never imports it)::

    /work/v312/bin/python tools/make_pod_fixture.py 8x8      # jax 0.12: tests/data/pod/jax012_p64
    /work/v311/bin/python tools/make_pod_fixture.py 8x8      # jax 0.10: tests/data/pod/jax010_p64
    /work/v312/bin/python tools/make_pod_fixture.py 16x16    # jax 0.12: tests/data/pod/jax012_p256

The child process runs with ``XLA_FLAGS=--xla_force_host_platform_device_count=N --xla_dump_to=TMP
--xla_dump_hlo_as_text --xla_dump_hlo_as_proto --xla_dump_large_constants`` and ``JAX_PLATFORMS=cpu``,
and jits an MLP's SGD step (loss, grad, update) with its parameters and batch as NamedShardings over a
``("data", "model")`` mesh of shape ``D x M``::

    w1: f32[M, 4M]  P("model", None)    b1: f32[4M]  P("model")    w2: f32[4M, M]  P(None, "model")
    b2: f32[M]      P()                 x:  f32[2D, M]  P("data", "model")       y: f32[2D, M]  same

XLA's all-reduce combiner makes tuple all-reduces of the gradients; XLA of jaxlib 0.12 writes the
replica groups and shardings in mesh notation (``replica_groups=mesh['data'=8,'model'=8] {'data'}``).

It writes into the fixture directory (a few KB each):

``module.before_optimizations.txt``, ``.hlo.pb``       XLA's dump before optimizations (global shapes)
``module.cpu_after_optimizations.txt``, ``.hlo.pb``    XLA's optimized dump (one partition's program)
``in.npz``    the program's global inputs, keyed by parameter number ``0`` .. ``5``
``out.npz``   JAX's global outputs ``output_0`` .. ``output_4`` (the oracle)
``meta.json`` jax's version, the mesh, the partition count, the maker's wall time and peak RSS
"""

from __future__ import annotations

import glob
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
KINDS = ("before_optimizations", "cpu_after_optimizations")


def child(outdir: str, mesh_text: str) -> None:
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    d, m = (int(v) for v in mesh_text.split("x"))
    mesh = jax.make_mesh((d, m), ("data", "model"))

    def mlp(params: tuple[jax.Array, ...], x: jax.Array) -> jax.Array:
        w1, b1, w2, b2 = params
        return jax.nn.relu(x @ w1 + b1) @ w2 + b2

    def loss(params: tuple[jax.Array, ...], x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.mean((mlp(params, x) - y) ** 2)

    def step(params: tuple[jax.Array, ...], x: jax.Array, y: jax.Array) -> tuple[tuple[jax.Array, ...], jax.Array]:
        value, grads = jax.value_and_grad(loss)(params, x, y)
        return tuple(p - 0.1 * g for p, g in zip(params, grads, strict=True)), value

    rng = np.random.default_rng(4664)
    batch, d_in, hidden, d_out = 2 * d, m, 4 * m, m
    f32 = np.float32
    params = (rng.standard_normal((d_in, hidden)).astype(f32), rng.standard_normal((hidden,)).astype(f32),
              (rng.standard_normal((hidden, d_out)) / 4).astype(f32), rng.standard_normal((d_out,)).astype(f32))
    x = rng.standard_normal((batch, d_in)).astype(f32)
    y = rng.standard_normal((batch, d_out)).astype(f32)
    specs = (P("model", None), P("model"), P(None, "model"), P())
    param_shardings = tuple(NamedSharding(mesh, s) for s in specs)
    batch_sharding = NamedSharding(mesh, P("data", "model"))
    jitted = jax.jit(step, in_shardings=(param_shardings, batch_sharding, batch_sharding))
    t0 = time.perf_counter()
    compiled = jitted.lower(params, x, y).compile()
    outs = [np.asarray(o) for o in jax.tree.leaves(compiled(params, x, y))]
    seconds = time.perf_counter() - t0
    ins = [*params, x, y]
    np.savez(os.path.join(outdir, "in.npz"), **{str(i): a for i, a in enumerate(ins)})
    np.savez(os.path.join(outdir, "out.npz"), **{f"output_{i}": a for i, a in enumerate(outs)})
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    meta = {"jax": jax.__version__, "jaxlib": jax.lib.__version__ if hasattr(jax.lib, "__version__") else "",
            "mesh": [d, m], "partitions": d * m, "jax_compile_and_run_s": round(seconds, 2),
            "jax_peak_rss_mb": round(rss_mb)}
    Path(outdir, "meta.json").write_text(json.dumps(meta, indent=1) + "\n")


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        return
    if len(sys.argv) != 2:
        raise SystemExit("usage: python tools/make_pod_fixture.py DxM   (8x8: 64 partitions, 16x16: 256)")
    mesh_text = sys.argv[1]
    d, m = (int(v) for v in mesh_text.split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "dump")
        env = dict(os.environ, JAX_PLATFORMS="cpu",
                   XLA_FLAGS=f"--xla_force_host_platform_device_count={d * m} --xla_dump_to={dump} "
                             "--xla_dump_hlo_as_text --xla_dump_hlo_as_proto --xla_dump_large_constants")
        subprocess.run([sys.executable, __file__, "--child", tmp, mesh_text], check=True, env=env, cwd=REPO)
        meta = json.loads(Path(tmp, "meta.json").read_text())
        major, minor = (int(v) for v in meta["jax"].split(".")[:2])
        out = REPO / "tests" / "data" / "pod" / f"jax{major}{minor:02d}_p{d * m}"
        out.mkdir(parents=True, exist_ok=True)
        for kind in KINDS:
            for ext in ("txt", "hlo.pb"):
                [found] = glob.glob(os.path.join(dump, f"module_*.jit_step.{kind}.{ext}"))
                shutil.copy(found, out / f"module.{kind}.{ext}")
        for name in ("in.npz", "out.npz", "meta.json"):
            shutil.copy(os.path.join(tmp, name), out / name)
    text = (out / "module.cpu_after_optimizations.txt").read_text()
    assert "= (" in text and ") all-reduce(" in text, "no tuple all-reduce in the optimized module"
    print(f"wrote {out}: {sorted(p.name for p in out.iterdir())}")


if __name__ == "__main__":
    main()
