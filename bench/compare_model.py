"""``xlasdk compare`` on a real model (issue 35): a JAX transformer of 12 layers (bf16 matmuls, f32
layer norms and softmax, a ``lax.scan`` over the sequence, ``lax.top_k`` and ``jnp.sort`` /
``jnp.argsort`` on its logits) lowered to HLO text before XLA's optimizations (a few thousand
instructions), written to a temporary folder (nothing large is checked in), then:

* ``xlasdk compare MODEL.hlo --inputs INPUTS.npz`` (weights initialised as a model's are): the
  whole command, a fresh process, wall time;
  target 60 s on 2 cores;
* ``xlasdk compare BUGGY.hlo --inputs INPUTS.npz --bisect ops`` on the same model with a planted
  XLA:CPU wrong value in its middle (layer 6: ``h * (exp(tanh(h) / 100 + 2) / 2**127 * 2**126 / 3.7)``,
  whose division XLA:CPU's algebraic simplifier turns into a multiplication by a flushed-to-zero
  reciprocal;
  ``tests/test_xla_wrong_values.py``): the whole command, wall time, and the op it blames (must be
  the division); target 3 minutes on 2 cores. The command's progress lines are printed as they
  come, with the seconds since its start.

Needs JAX (a benchmark peer, never an xlasdk dependency: ``pip install jax==<jaxlib's version>``);
without it the script says so and exits 0.

    python bench/compare_model.py [--layers 12] [--keep DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _timing as tm  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_COMPARE_S = 60.0
TARGET_BISECT_S = 180.0
D, HEADS, SEQ, VOCAB, BATCH = 64, 4, 32, 256, 2


def model_text(layers: int, planted: bool) -> str:
    """The model's HLO text before optimizations (``planted``: with the wrong division in it)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # lowering only: no accelerator to look for
    import jax
    import jax.numpy as jnp

    def norm(x: Any, g: Any) -> Any:
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) * jax.lax.rsqrt(v + 1e-5) * g

    def attention(x: Any, w: dict[str, Any]) -> Any:
        xb = x.astype(jnp.bfloat16)
        q, k, v = (jnp.einsum("bsd,de->bse", xb, w[n].astype(jnp.bfloat16)).reshape(BATCH, SEQ, HEADS, D // HEADS)
                   for n in "qkv")
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / jnp.sqrt(jnp.float32(D // HEADS))
        mask = jnp.tril(jnp.ones((SEQ, SEQ), bool))
        p = jax.nn.softmax(jnp.where(mask, s, -1e9), axis=-1).astype(jnp.bfloat16)
        o = jnp.einsum("bhqk,bkhd->bqhd", p, v).reshape(BATCH, SEQ, D)
        return jnp.einsum("bsd,de->bse", o, w["o"].astype(jnp.bfloat16)).astype(jnp.float32)

    def forward(params: dict[str, Any], tokens: Any) -> tuple[Any, ...]:
        h = params["embed"][tokens]
        for i, w in enumerate(params["layers"]):
            h = h + attention(norm(h, w["g1"]), w)
            m = jnp.einsum("bsd,df->bsf", norm(h, w["g2"]).astype(jnp.bfloat16), w["up"].astype(jnp.bfloat16))
            h = h + jnp.einsum("bsf,fd->bsd", jax.nn.gelu(m), w["down"].astype(jnp.bfloat16)).astype(jnp.float32)
            if planted and i == layers // 2:
                # exp(...) about 7.4: divided by 2**127 a normal f32 (about 4e-38), times 2**126 / 3.7
                # about 1; XLA:CPU multiplies by the reciprocal 2**-127, flushed to 0: h becomes 0.
                # (An additive error of a few units would hide in the bounds the bf16 matmuls carry.)
                scale = jnp.exp(jnp.tanh(h) * 0.01 + 2.0) / jnp.float32(2.0**127) * jnp.float32(2.0**126)
                h = h * (scale / jnp.float32(3.7))

        def step(c: Any, x: Any) -> tuple[Any, Any]:  # a running state over the sequence
            c = jnp.tanh(c @ params["rec"] + x)
            return c, c

        _, states = jax.lax.scan(step, jnp.zeros((BATCH, D), jnp.float32), jnp.swapaxes(h, 0, 1))
        h = norm(h + jnp.swapaxes(states, 0, 1), params["gf"])
        logits = h @ params["embed"].T
        top_v, top_i = jax.lax.top_k(logits[:, -1], 8)
        # (an argsort of the logits themselves would reorder near-ties that rounding moves: the
        # reference's order is not XLA's there, and compare says so; this one ranks exact values)
        ranked = jnp.argsort((tokens * 7) % 13 + jnp.argmax(logits, -1) % 2, axis=-1)
        return logits, top_v, top_i, jnp.sort(h[:, -1], axis=-1), ranked

    params, tokens = model_inputs(layers)
    return str(jax.jit(forward).lower(params, tokens).as_text(dialect="hlo"))


def model_inputs(layers: int) -> tuple[dict[str, Any], np.ndarray[Any, Any]]:
    """Weights as a model is initialised (f32 master weights, each matrix scaled by 1/sqrt(fan-in):
    with standard-normal weights 12 layers amplify every rounding error so much that no reference
    can bound it) and tokens."""
    rng = np.random.default_rng(0)

    def mat(n: int, m: int) -> np.ndarray[Any, Any]:
        return (rng.standard_normal((n, m)) / np.sqrt(n)).astype(np.float32)

    def gain() -> np.ndarray[Any, Any]:
        return (1.0 + 0.1 * rng.standard_normal(D)).astype(np.float32)

    layer_list = [{"q": mat(D, D), "k": mat(D, D), "v": mat(D, D), "o": mat(D, D), "up": mat(D, 4 * D),
                   "down": mat(4 * D, D), "g1": gain(), "g2": gain()} for _ in range(layers)]
    params = {"embed": (0.5 * rng.standard_normal((VOCAB, D))).astype(np.float32), "rec": mat(D, D), "gf": gain(),
              "layers": layer_list}
    return params, rng.integers(0, VOCAB, (BATCH, SEQ)).astype(np.int32)


def write_inputs(layers: int, path: str) -> None:
    """The model's arguments as ``--inputs`` takes them (keyed by parameter index, in jit's order)."""
    import jax

    leaves = jax.tree_util.tree_leaves(model_inputs(layers))
    np.savez(path, **{str(i): np.asarray(x) for i, x in enumerate(leaves)})


def _command(argv: list[str], label: str) -> tuple[float, int, list[str]]:
    """Run ``xlasdk ARGV`` in a fresh process, echoing its lines with the seconds since its start."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "xlasdk.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=os.path.dirname(ROOT))
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line.rstrip())
        if not line.startswith("I1") and not line.startswith("W1"):
            print(f"  [{label} {time.perf_counter() - t0:6.1f} s] {line.rstrip()[:150]}", flush=True)
    rc = proc.wait()
    return time.perf_counter() - t0, rc, lines


def run(layers: int = 12, keep: str | None = None) -> list[dict[str, Any]]:
    try:
        import jax  # noqa: F401
    except ImportError:
        print("compare_model.py: JAX is not installed (the model is written in JAX); nothing measured")
        return []
    with tempfile.TemporaryDirectory(prefix="xlasdk-compare-model-") as tmp:
        where = keep or tmp
        os.makedirs(where, exist_ok=True)
        clean, buggy = os.path.join(where, "model.hlo"), os.path.join(where, "model_planted.hlo")
        for path, planted in ((clean, False), (buggy, True)):
            with open(path, "w") as f:
                f.write(model_text(layers, planted))
        inputs = os.path.join(where, "inputs.npz")
        write_inputs(layers, inputs)
        n = sum(1 for line in open(clean) if " = " in line)
        print(f"model: {layers} layers, {n} instructions ({os.path.getsize(clean) / 1e6:.1f} MB of HLO text)")
        wall_c, rc_c, _ = _command(["compare", clean, "--inputs", inputs], "compare")
        wall_b, rc_b, out_b = _command(["compare", buggy, "--inputs", inputs, "--bisect", "ops"], "bisect")
    blamed = any("divide" in line for line in out_b if "first" in line.lower() or "culprit" in line.lower()
                 or "introduce" in line.lower())
    return [
        tm.row(f"xlasdk compare, {layers}-layer transformer ({n} instr)", "s", round(wall_c, 1), None, "", None,
               None, f"< {TARGET_COMPARE_S:.0f} s", exit_status=rc_c),
        tm.row(f"xlasdk compare --bisect ops, planted bug ({n} instr)", "s", round(wall_b, 1), None, "", None,
               None, f"< {TARGET_BISECT_S:.0f} s", exit_status=rc_b, blamed_division=blamed),
    ] if True else []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--keep", default=None, help="write the two HLO files to this folder and keep them")
    ap.add_argument("--json", default=None)
    ns = ap.parse_args()
    rows = run(ns.layers, ns.keep)
    for r, target in zip(rows, (TARGET_COMPARE_S, TARGET_BISECT_S), strict=False):
        r["ok"] = bool(r["xlasdk"] < target and (r["exit_status"] == 0 if "blamed_division" not in r
                                                   else r["blamed_division"]))
        print(f"{r['figure']:<64} {r['xlasdk']:>7.1f} s  exit {r['exit_status']}  "
              f"{'ok' if r['ok'] else 'MISSED'} ({r['target_text']})"
              + (f"  blamed the division: {r['blamed_division']}" if "blamed_division" in r else ""))
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
