"""Make ``tests/data/dumps/``: real XLA dumps of small real JAX programs, with their inputs and outputs.

Run by hand (it needs ``jax``, a test-only dependency; xlasdk itself never imports it)::

    . .venv/bin/activate
    python tools/make_dump_corpus.py            # every program
    python tools/make_dump_corpus.py gru_scan   # some of them

For each program (see ``PROGRAMS``) the script starts ``python tools/make_dump_corpus.py --child NAME
OUTDIR`` in a fresh process (cwd: the repository root, so source locations in the dumps read
``tools/make_dump_corpus.py``) with

    XLA_FLAGS=--xla_dump_to=TMPDIR --xla_dump_hlo_as_text --xla_dump_hlo_as_proto

so that each program gets its own dump directory. The child jits the program
(``jax.jit(fn, keep_unused=True)``: every input stays a parameter), runs it on ``cpu`` with seeded
inputs and writes into ``tests/data/dumps/<program>/``:

``module.before_optimizations.txt``        XLA's ``module_NNNN.jit_<fn>.before_optimizations.txt``
``module.before_optimizations.hlo.pb``     XLA's ``module_NNNN.jit_<fn>.before_optimizations.hlo.pb``
``module.cpu_after_optimizations.txt``     XLA's ``module_NNNN.jit_<fn>.cpu_after_optimizations.txt``
``module.cpu_after_optimizations.hlo.pb``  XLA's ``module_NNNN.jit_<fn>.cpu_after_optimizations.hlo.pb``
``lowered.mlir``                           ``jitted.lower(*args).as_text()`` (StableHLO text)
``exported.mlirbc``                        ``jax.export.export(jitted)(*args).mlir_module_serialized``
``exported.jax_export``                    ``jax.export.export(jitted)(*args).serialize()`` (JAX's own
                                           flatbuffer: not a module; xlasdk must refuse it)
``io.npz``                                 ``in0``, ``in1``, ... (the jitted entry's flattened pytree
                                           arguments, in parameter order), ``out0``, ... (JAX's outputs,
                                           flattened), and ``in_dtypes`` / ``out_dtypes`` (dtype names:
                                           numpy writes bfloat16 arrays as raw ``|V2``, so readers view
                                           them back with the recorded dtype)

Only the program's own jit module (``jit_<fn>``) is copied: inputs are made with numpy, so no helper
module is compiled, and any other module XLA dumps is ignored. The parent process then prints, per
output, how far ``jax.disable_jit()`` (op by op, no fusion) lands from the jitted result: a measure of
how much float results move when XLA optimizes a module differently (recorded in the README there).

Everything is seeded (numpy ``default_rng(seed)``, a fixed threefry key); rerunning on the same
jax/jaxlib rewrites the same modules and the same ``io.npz``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT_ROOT = REPO / "tests" / "data" / "dumps"
XLA_DUMP_FLAGS = "--xla_dump_hlo_as_text --xla_dump_hlo_as_proto"
# XLA's file name suffix (after module_NNNN.jit_<fn>.) -> the name in the corpus
DUMP_FILES = {
    "before_optimizations.txt": "module.before_optimizations.txt",
    "before_optimizations.hlo.pb": "module.before_optimizations.hlo.pb",
    "cpu_after_optimizations.txt": "module.cpu_after_optimizations.txt",
    "cpu_after_optimizations.hlo.pb": "module.cpu_after_optimizations.hlo.pb",
}


# -- the programs: each returns (fn, args); fn is jitted as jax.jit(fn, keep_unused=True)(*args) ----------

def transformer_bf16() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """One pre-LN transformer block in bf16: layernorm, 2-head causal attention, GELU MLP; forward only."""
    import jax
    import jax.numpy as jnp
    import ml_dtypes

    seq, d, heads, hidden = 8, 16, 2, 32
    rng = np.random.default_rng(0)
    bf16 = ml_dtypes.bfloat16

    def w(*shape: int, scale: float = 1.0) -> np.ndarray[Any, Any]:
        return (rng.standard_normal(shape) * scale / np.sqrt(shape[0])).astype(bf16)

    params = {
        "ln1_g": (1.0 + 0.1 * rng.standard_normal(d)).astype(bf16),
        "ln1_b": (0.1 * rng.standard_normal(d)).astype(bf16),
        "wq": w(d, d), "wk": w(d, d), "wv": w(d, d), "wo": w(d, d),
        "ln2_g": (1.0 + 0.1 * rng.standard_normal(d)).astype(bf16),
        "ln2_b": (0.1 * rng.standard_normal(d)).astype(bf16),
        "w1": w(d, hidden), "b1": (0.1 * rng.standard_normal(hidden)).astype(bf16),
        "w2": w(hidden, d), "b2": (0.1 * rng.standard_normal(d)).astype(bf16),
    }
    x = rng.standard_normal((seq, d)).astype(bf16)

    def layernorm(h: Any, g: Any, b: Any) -> Any:
        h32 = h.astype(jnp.float32)  # statistics in f32, as real bf16 models do
        mean = h32.mean(-1, keepdims=True)
        var = ((h32 - mean) ** 2).mean(-1, keepdims=True)
        return ((h32 - mean) * jax.lax.rsqrt(var + 1e-5)).astype(jnp.bfloat16) * g + b

    def transformer_block(params: dict[str, Any], x: Any) -> Any:
        h = layernorm(x, params["ln1_g"], params["ln1_b"])
        q, k, v = (h @ params[n] for n in ("wq", "wk", "wv"))
        split = lambda t: t.reshape(seq, heads, d // heads).transpose(1, 0, 2)  # noqa: E731
        q, k, v = split(q), split(k), split(v)
        scores = jnp.einsum("hqc,hkc->hqk", q, k, preferred_element_type=jnp.float32) / np.sqrt(d // heads)
        mask = jnp.tril(jnp.ones((seq, seq), bool))
        probs = jax.nn.softmax(jnp.where(mask, scores, -1e9), axis=-1).astype(jnp.bfloat16)
        att = jnp.einsum("hqk,hkc->qhc", probs, v).reshape(seq, d)
        x = x + att @ params["wo"]
        h = layernorm(x, params["ln2_g"], params["ln2_b"])
        h = jax.nn.gelu(h @ params["w1"] + params["b1"], approximate=False)  # erf
        x = x + h @ params["w2"] + params["b2"]
        return x

    return transformer_block, (params, x)


def convnet_train() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """One SGD step of a small conv net (conv, relu, max pool, conv, relu, avg pool, dense, softmax CE), f32."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    rng = np.random.default_rng(1)
    f32 = np.float32
    params = {
        "conv1_w": (rng.standard_normal((3, 3, 1, 4)) / 3).astype(f32), "conv1_b": np.zeros(4, f32) + 0.01,
        "conv2_w": (rng.standard_normal((3, 3, 4, 8)) / 6).astype(f32), "conv2_b": np.zeros(8, f32) + 0.01,
        "dense_w": (rng.standard_normal((8 * 2 * 2, 10)) / np.sqrt(32)).astype(f32), "dense_b": np.zeros(10, f32),
    }
    images = rng.standard_normal((4, 8, 8, 1)).astype(f32)  # NHWC
    labels = rng.integers(0, 10, size=4).astype(np.int32)
    lr = np.float32(0.1)
    dn = ("NHWC", "HWIO", "NHWC")

    def forward(p: dict[str, Any], x: Any) -> Any:
        x = lax.conv_general_dilated(x, p["conv1_w"], (1, 1), "SAME", dimension_numbers=dn) + p["conv1_b"]
        x = jax.nn.relu(x)
        x = lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")  # 8x8 -> 4x4
        x = lax.conv_general_dilated(x, p["conv2_w"], (1, 1), "SAME", dimension_numbers=dn) + p["conv2_b"]
        x = jax.nn.relu(x)
        x = lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0  # 4x4 -> 2x2
        return x.reshape(x.shape[0], -1) @ p["dense_w"] + p["dense_b"]

    def loss_fn(p: dict[str, Any], x: Any, y: Any) -> Any:
        logp = jax.nn.log_softmax(forward(p, x))
        return -jnp.mean(jnp.sum(jax.nn.one_hot(y, 10) * logp, axis=-1))

    def train_step(params: dict[str, Any], images: Any, labels: Any, lr: Any) -> Any:
        loss, grads = jax.value_and_grad(loss_fn)(params, images, labels)
        new_params = jax.tree.map(lambda w, g: w - lr * g, params, grads)
        return loss, new_params

    return train_step, (params, images, labels, lr)


def gru_scan() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A GRU over time with ``lax.scan`` and threefry dropout inside, a ``while_loop``, and a float ``jnp.sort``."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    steps, batch, n_in, n_h = 6, 2, 3, 4
    rng = np.random.default_rng(2)
    f32 = np.float32
    params = {}
    for gate in ("z", "r", "h"):
        params[f"w{gate}"] = (rng.standard_normal((n_in, n_h)) / np.sqrt(n_in)).astype(f32)
        params[f"u{gate}"] = (rng.standard_normal((n_h, n_h)) / np.sqrt(n_h)).astype(f32)
        params[f"b{gate}"] = (0.1 * rng.standard_normal(n_h)).astype(f32)
    xs = rng.standard_normal((steps, batch, n_in)).astype(f32)
    h0 = (0.5 * rng.standard_normal((batch, n_h))).astype(f32)
    key_data = np.array([0, 42], np.uint32)  # jax.random.key_data(jax.random.key(42)), made without jax

    def gru_forward(params: dict[str, Any], xs: Any, h0: Any, key_data: Any) -> Any:
        key = jax.random.wrap_key_data(key_data, impl="threefry2x32")

        def cell(carry: Any, x: Any) -> Any:
            h, key = carry
            key, sub = jax.random.split(key)
            z = jax.nn.sigmoid(x @ params["wz"] + h @ params["uz"] + params["bz"])
            r = jax.nn.sigmoid(x @ params["wr"] + h @ params["ur"] + params["br"])
            cand = jnp.tanh(x @ params["wh"] + (r * h) @ params["uh"] + params["bh"])
            h = (1 - z) * h + z * cand
            keep = jax.random.bernoulli(sub, 0.8, h.shape)  # dropout on the output
            return (h, key), jnp.where(keep, h / 0.8, 0.0)

        (h, key), ys = lax.scan(cell, (h0, key), xs)

        def cond(state: Any) -> Any:
            i, v, _ = state
            return (i < 20) & (jnp.max(jnp.abs(v)) > 0.05)

        def body(state: Any) -> Any:
            i, v, acc = state
            return i + 1, v * 0.5, acc + jnp.tanh(v)  # halving is exact: the trip count cannot move

        count, _, acc = lax.while_loop(cond, body, (jnp.int32(0), h, jnp.zeros_like(h)))
        ordered = jnp.sort(ys.reshape(-1))  # float total order: XLA bitcasts f32 -> s32 in the comparator
        noise = jax.random.normal(key, (3,))
        return ys, h, ordered, count, acc, jax.random.key_data(key), noise

    return gru_forward, (params, xs, h0, key_data)


def int_indexing() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """argmax, cumsum, dynamic_update_slice, gather, top_k and integer arithmetic (s32, u8)."""
    import jax.numpy as jnp
    from jax import lax

    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    a = rng.integers(-50, 50, size=8).astype(np.int32)
    b = rng.integers(-4, 5, size=8).astype(np.int32)
    u = rng.integers(0, 256, size=8).astype(np.uint8)
    pos = np.int32(3)

    def int_ops(x: Any, a: Any, b: Any, u: Any, pos: Any) -> Any:
        am = jnp.argmax(x, axis=1)
        cs = jnp.cumsum(a)
        cm = lax.cummax(a)
        patch = jnp.full((2, 3), 1.0, jnp.float32) * a[0].astype(jnp.float32)
        upd = lax.dynamic_update_slice(x, patch, (pos, pos + 1))  # start clamped to 3, 3
        safe_b = jnp.where(b == 0, 1, b)
        arith = jnp.stack([(a << 2) ^ (b >> 1), a // safe_b, a % safe_b, jnp.clip(a, -5, 5), a * b - 7])
        ubits = jnp.stack([lax.population_count(u), u + u, u >> 3, ~u, lax.shift_right_logical(u, jnp.uint8(1))])
        picked = jnp.take(x, jnp.abs(a) % 5, axis=0)  # gather rows
        vals, idx = lax.top_k(x, 2)
        return am, cs, cm, upd, arith, ubits, picked, vals, idx

    return int_ops, (x, a, b, u, pos)


def sharded_mlp() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A 2-layer MLP on 4 CPU devices: the batch split 4 ways (``NamedSharding``, ``P("x")``), weights
    replicated, and a global sum of squares (a cross-device reduction), f32. Its modules carry
    ``num_partitions=4`` and shardings (Shardy's under jax 0.12, GSPMD's ``mhlo.sharding`` before)."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()[:4]), ("x",))
    rng = np.random.default_rng(5)
    f32 = np.float32
    x = jax.device_put(rng.standard_normal((16, 8)).astype(f32), NamedSharding(mesh, P("x")))
    w1 = jax.device_put((rng.standard_normal((8, 32)) / 3).astype(f32), NamedSharding(mesh, P()))
    w2 = jax.device_put((rng.standard_normal((32, 4)) / 6).astype(f32), NamedSharding(mesh, P()))

    def sharded_mlp(x: Any, w1: Any, w2: Any) -> Any:
        y = jax.nn.relu(x @ w1) @ w2
        return y, jnp.sum(y * y)

    return sharded_mlp, (x, w1, w2)


PROGRAMS: dict[str, Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]]] = {
    "transformer_bf16": transformer_bf16,
    "convnet_train": convnet_train,
    "gru_scan": gru_scan,
    "int_indexing": int_indexing,
    "sharded_mlp": sharded_mlp,
}
# Programs that run on several CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=N).
DEVICES = {"sharded_mlp": 4}


# -- the child: jit, run, save the lowering, the export and the inputs/outputs ------------------------------

def _child(name: str, out_dir: Path) -> None:
    import jax

    jax.config.update("jax_platforms", "cpu")
    fn, args = PROGRAMS[name]()
    jitted = jax.jit(fn, keep_unused=True)
    lowered = jitted.lower(*args)
    (out_dir / "lowered.mlir").write_text(lowered.as_text())
    outs = jax.tree.leaves(lowered.compile()(*args))
    ins = jax.tree.leaves(args)
    arrays = {f"in{i}": np.asarray(a) for i, a in enumerate(ins)}
    arrays.update({f"out{i}": np.asarray(o) for i, o in enumerate(outs)})
    np.savez(
        out_dir / "io.npz",
        **arrays,
        in_dtypes=np.array([np.asarray(a).dtype.name for a in ins]),
        out_dtypes=np.array([np.asarray(o).dtype.name for o in outs]),
    )
    exp = jax.export.export(jitted)(*args)
    (out_dir / "exported.mlirbc").write_bytes(exp.mlir_module_serialized)
    (out_dir / "exported.jax_export").write_bytes(exp.serialize())
    with jax.disable_jit():  # op by op: how far float results move when XLA fuses differently
        eager = jax.tree.leaves(fn(*args))
    drift = []
    for i, (o, e) in enumerate(zip(outs, eager, strict=True)):
        o64, e64 = np.asarray(o).astype(np.float64), np.asarray(e).astype(np.float64)
        diff = float(np.max(np.abs(o64 - e64))) if o64.size else 0.0
        scale = float(np.max(np.abs(o64))) if o64.size else 0.0
        drift.append({"out": i, "dtype": np.asarray(o).dtype.name, "shape": list(np.shape(o)), "max_abs_diff": diff,
                      "max_abs": scale})
    print("DRIFT " + json.dumps({"module": f"jit_{fn.__name__}", "drift": drift}))


# -- the parent: one child per program, each with its own dump directory ------------------------------------

def _make(name: str, out_root: Path = OUT_ROOT) -> None:
    out_dir = out_root / name
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix=f"dump-{name}-") as dump:
        flags = f"--xla_dump_to={dump} {XLA_DUMP_FLAGS}"
        if name in DEVICES:
            flags += f" --xla_force_host_platform_device_count={DEVICES[name]}"
        env = dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu")
        r = subprocess.run([sys.executable, "tools/make_dump_corpus.py", "--child", name, str(out_dir)], cwd=REPO,
                           env=env, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            sys.exit(f"{name}: the child failed (exit {r.returncode}):\n{r.stdout}\n{r.stderr}")
        info = json.loads(next(ln[6:] for ln in r.stdout.splitlines() if ln.startswith("DRIFT ")))
        module = info["module"]
        for suffix, target in DUMP_FILES.items():
            found = sorted(glob.glob(os.path.join(dump, f"module_*.{module}.{suffix}")))
            if len(found) != 1:
                others = sorted(os.listdir(dump))
                sys.exit(f"{name}: expected one {module}.{suffix} in the dump, found {found}; the dump has {others}")
            shutil.copyfile(found[0], out_dir / target)
            print(f"  {os.path.basename(found[0])} -> {out_dir.relative_to(REPO) / target}")
    total = sum(p.stat().st_size for p in out_dir.iterdir())
    print(f"{name}: {len(list(out_dir.iterdir()))} files, {total} bytes")
    for d in info["drift"]:
        rel = d["max_abs_diff"] / d["max_abs"] if d["max_abs"] else 0.0
        print(f"  out{d['out']} {d['dtype']}{d['shape']}: jit vs op-by-op max |diff| {d['max_abs_diff']:.3g} "
              f"(max |out| {d['max_abs']:.3g}, {rel:.3g} of it)")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("programs", nargs="*", help=f"programs to make (default: all of {', '.join(PROGRAMS)})")
    p.add_argument("--child", nargs=2, metavar=("NAME", "OUTDIR"), help=argparse.SUPPRESS)
    p.add_argument("--out-root", type=Path, default=OUT_ROOT,
                   help="where the program folders go (default tests/data/dumps, the jax 0.10.2 corpus; "
                        "tests/data/dumps_jax012 holds the jax 0.12 one)")
    args = p.parse_args(argv)
    if args.child:
        _child(args.child[0], Path(args.child[1]))
        return
    unknown = [n for n in args.programs if n not in PROGRAMS]
    if unknown:
        p.error(f"unknown program(s) {unknown}; choose from {list(PROGRAMS)}")
    import jax

    print(f"jax {jax.__version__}, XLA_FLAGS=--xla_dump_to=DIR {XLA_DUMP_FLAGS}")
    for name in args.programs or PROGRAMS:
        _make(name, args.out_root.resolve())


if __name__ == "__main__":
    main()
