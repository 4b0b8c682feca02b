"""Record a TPU's outputs of three small f32 programs where transcendental functions feed dots at
DEFAULT precision (the TPU rounds each dot's inputs to bf16), for tests/test_tpu_recorded_mlps.py:
off the chip, ``compare --outputs --device-kind tpu-v5e`` of these correct runs must say MATCH.

Run on a TPU machine from the project root (jaxlib, libtpu and numpy; no jax):

    python3 tools/make_tpu_mlp_outputs.py --out tests/data/tpu_mlp/recorded.npz

Writes the inputs (``x``, ``w1``, ``w2``) and, per program, ``<name>`` (its output) and the device
kind it ran on (``device_kind``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import xlasdk as xs  # noqa: E402
from xlasdk import ops  # noqa: E402

#: the programs: the function between the two dots
FUNCTIONS = {"tanh": ops.Tanh, "logistic": ops.Logistic, "exp": ops.Exp}


def program(fn: str) -> xs.XlaComputation:
    """``dot(f(dot(x, w1)), w2)`` in f32 at DEFAULT precision."""
    b = xs.XlaBuilder(f"mlp_{fn}")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (64, 128)), "x")
    w1 = ops.Parameter(b, 1, xs.Shape.array_shape(np.float32, (128, 128)), "w1")
    w2 = ops.Parameter(b, 2, xs.Shape.array_shape(np.float32, (128, 32)), "w2")
    return b.build(ops.Dot(FUNCTIONS[fn](ops.Dot(x, w1)), w2))


def inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(43)
    return [(rng.standard_normal(s) * 0.3).astype(np.float32) for s in ((64, 128), (128, 128), (128, 32))]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--device", default=None)
    a = p.parse_args()
    dev = xs.devices()[0] if a.device is None else a.device
    args = inputs()
    rec: dict[str, np.ndarray] = dict(zip(("x", "w1", "w2"), args, strict=True))
    for fn in FUNCTIONS:
        rec[fn] = xs.compile(program(fn), dev)(*args).to_numpy()
        print(fn, rec[fn].shape, float(np.abs(rec[fn]).max()))
    rec["device_kind"] = np.array(xs.compile(program("tanh"), dev).devices[0].device_kind)
    np.savez(a.out, **rec)
    print("wrote", a.out, rec["device_kind"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
