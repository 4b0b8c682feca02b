"""Writes the files of a sharded JAX training step, fresh, for tests/test_mesh_dumps.py (run in a child
process: ``python tests/jax_sharded_programs.py OUT_DIR MESH``, MESH ``2x2`` or ``4x4``, under
``XLA_FLAGS=--xla_force_host_platform_device_count=N --xla_dump_to=OUT_DIR/xla ...`` and
``JAX_PLATFORMS=cpu``; jax is a test-only peer, never imported by pytest's process).

The program: an MLP's SGD step (loss, grad, update) with its parameters and batch given as
NamedShardings over a 2-D ``("data", "model")`` mesh. XLA's all-reduce combiner makes tuple
all-reduces of its gradients (of 2 and of 5 operands), and XLA of jaxlib 0.12 writes replica groups
and shardings in mesh notation (``mesh['data'=2,'model'=2] {'data'}``, ``{mesh[...], [{'model'}, {}]}``).

Written into OUT_DIR:
  jit/module.before_optimizations.txt      ``lowered.as_text(dialect="hlo")``
  jit/module.cpu_after_optimizations.txt   ``compiled.as_text()``
  io.npz                                   in0..in5 (global inputs), out0..out4 (JAX's global outputs)
  meta.json                                jax's version and the partition count
and XLA's own dump files under OUT_DIR/xla (the caller renames them).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def main() -> None:
    out, mesh_text = Path(sys.argv[1]), sys.argv[2]
    shape = tuple(int(v) for v in mesh_text.split("x"))
    mesh = jax.make_mesh(shape, ("data", "model"))

    def mlp(params: tuple[jax.Array, ...], x: jax.Array) -> jax.Array:
        w1, b1, w2, b2 = params
        return jax.nn.relu(x @ w1 + b1) @ w2 + b2

    def loss(params: tuple[jax.Array, ...], x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.mean((mlp(params, x) - y) ** 2)

    def step(params: tuple[jax.Array, ...], x: jax.Array, y: jax.Array) -> tuple[tuple[jax.Array, ...], jax.Array]:
        value, grads = jax.value_and_grad(loss)(params, x, y)
        return tuple(p - 0.1 * g for p, g in zip(params, grads, strict=True)), value

    rng = np.random.default_rng(46)
    batch, d_in, hidden, d_out = 16, 8, 32, 8
    f32 = np.float32
    params = (rng.standard_normal((d_in, hidden)).astype(f32), rng.standard_normal((hidden,)).astype(f32),
              (rng.standard_normal((hidden, d_out)) / 4).astype(f32), rng.standard_normal((d_out,)).astype(f32))
    x = rng.standard_normal((batch, d_in)).astype(f32)
    y = rng.standard_normal((batch, d_out)).astype(f32)
    specs = (P("model", None), P("model"), P(None, "model"), P())
    param_shardings = tuple(NamedSharding(mesh, s) for s in specs)
    batch_sharding = NamedSharding(mesh, P("data", "model"))
    jitted = jax.jit(step, in_shardings=(param_shardings, batch_sharding, batch_sharding))
    lowered = jitted.lower(params, x, y)
    compiled = lowered.compile()
    (out / "jit").mkdir(parents=True, exist_ok=True)
    (out / "jit" / "module.before_optimizations.txt").write_text(lowered.as_text(dialect="hlo"))
    (out / "jit" / "module.cpu_after_optimizations.txt").write_text(compiled.as_text())
    outs = [np.asarray(o) for o in jax.tree.leaves(compiled(params, x, y))]
    ins = [*params, x, y]
    np.savez(out / "io.npz", **{f"in{i}": a for i, a in enumerate(ins)}, **{f"out{i}": a for i, a in enumerate(outs)})
    (out / "meta.json").write_text(json.dumps({"jax": jax.__version__, "partitions": int(np.prod(shape))}))


if __name__ == "__main__":
    main()
