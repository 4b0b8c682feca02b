"""Quickstart: a 2-layer MLP built op by op, printed as HLO, run on cpu:0, checked against numpy.

    python examples/quickstart.py [--device tpu:0]
"""

from __future__ import annotations

import sys

import numpy as np

import xlasdk as xs
from xlasdk import ops

BATCH, IN, HIDDEN, OUT = 8, 16, 32, 4


def build_mlp() -> xs.XlaComputation:
    """logits = relu(x @ w1 + b1) @ w2 + b2, then a numerically stable softmax over the classes."""
    f32 = np.float32
    b = xs.XlaBuilder("mlp")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(f32, (BATCH, IN)), "x")
    w1 = ops.Parameter(b, 1, xs.Shape.array_shape(f32, (IN, HIDDEN)), "w1")
    b1 = ops.Parameter(b, 2, xs.Shape.array_shape(f32, (HIDDEN,)), "b1")
    w2 = ops.Parameter(b, 3, xs.Shape.array_shape(f32, (HIDDEN, OUT)), "w2")
    b2 = ops.Parameter(b, 4, xs.Shape.array_shape(f32, (OUT,)), "b2")

    with b.op_metadata(op_name="layer1"):
        h = ops.Max(ops.Add(x @ w1, b1, broadcast_dimensions=[1]), 0.0)  # ReLU
    with b.op_metadata(op_name="layer2"):
        logits = ops.Add(h @ w2, b2, broadcast_dimensions=[1])

    # softmax: exp(l - max(l)) / sum(exp(l - max(l))) along the class dimension
    row_max = ops.Reduce(b, logits, ops.Constant(b, np.float32(-np.inf)), ops.Max, [1])
    e = ops.Exp(ops.Sub(logits, row_max, broadcast_dimensions=[0]))
    total = ops.Reduce(b, e, ops.Constant(b, np.float32(0)), ops.Add, [1])
    probs = ops.Div(e, total, broadcast_dimensions=[0])
    return b.build(ops.Tuple(b, [logits, probs]))


def numpy_mlp(*args: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x, w1, b1, w2, b2 = args
    logits = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return logits, e / e.sum(axis=1, keepdims=True)


# --device tpu:0 (or another): where it runs. An f32 dot or convolution at DEFAULT precision rounds
# its inputs to bf16 on a TPU (8 significant bits), so the check there allows bf16's rounding.
DEVICE = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv[:-1] else "cpu:0"
TOLERANCE = 1e-4 if DEVICE.startswith("cpu") else 3e-2


def main() -> int:
    comp = build_mlp()
    print("== program shape ==")
    print(comp.program_shape())
    print("== HLO text ==")
    print(comp.as_hlo_text())

    rng = np.random.default_rng(0)
    args = [
        rng.standard_normal((BATCH, IN), dtype=np.float32),
        rng.standard_normal((IN, HIDDEN), dtype=np.float32) / np.float32(np.sqrt(IN)),
        rng.standard_normal(HIDDEN, dtype=np.float32) * np.float32(0.1),
        rng.standard_normal((HIDDEN, OUT), dtype=np.float32) / np.float32(np.sqrt(HIDDEN)),
        rng.standard_normal(OUT, dtype=np.float32) * np.float32(0.1),
    ]
    exe = xs.compile(comp, device=DEVICE)
    logits, probs = exe(*args)
    want_logits, want_probs = numpy_mlp(*(a.astype(np.float64) for a in args))

    print("== result on", exe.devices[0], "==")
    print("probabilities (first 3 rows):")
    print(np.array2string(probs.to_numpy()[:3], precision=4))
    err = max(
        float(np.max(np.abs(logits.to_numpy() - want_logits))),
        float(np.max(np.abs(probs.to_numpy() - want_probs))),
    )
    ok = err < TOLERANCE and np.allclose(probs.to_numpy().sum(axis=1), 1.0, atol=1e-5)
    print(f"max |xlasdk - numpy| = {err:.2e} -> {'MATCH' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
