"""An NCHW convolution + bias + ReLU + 2x2 max pooling (a max-style Reduce), checked against numpy.

    python examples/conv2d.py
"""

from __future__ import annotations

import sys

import numpy as np

import xlasdk as xs
from xlasdk import ops

N, C, H, W = 2, 3, 8, 8   # input (N, C, H, W)
O, KH, KW = 4, 3, 3       # kernel (O, C, KH, KW)


def build() -> xs.XlaComputation:
    f32 = np.float32
    b = xs.XlaBuilder("conv_relu_pool")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(f32, (N, C, H, W)), "x")
    k = ops.Parameter(b, 1, xs.Shape.array_shape(f32, (O, C, KH, KW)), "kernel")
    bias = ops.Parameter(b, 2, xs.Shape.array_shape(f32, (O,)), "bias")
    y = ops.ConvGeneralDilated(
        x, k, window_strides=(1, 1), padding="SAME",
        dimension_numbers=("NCHW", "OIHW", "NCHW"),
        precision_config=xs.PrecisionConfig([xs.PrecisionConfig.Precision.HIGHEST] * 2),
    )
    y = ops.Max(ops.Add(y, bias, broadcast_dimensions=[1]), 0.0)          # bias + ReLU, (N, O, H, W)
    # 2x2 max pooling as a Reduce: split H and W into (H/2, 2) and (W/2, 2), reduce the 2s.
    y = ops.Reshape(y, (N, O, H // 2, 2, W // 2, 2))
    pooled = ops.Reduce(b, y, ops.Constant(b, np.float32(-np.inf)), ops.Max, [3, 5])
    return b.build(pooled)


def reference(x: np.ndarray, k: np.ndarray, bias: np.ndarray) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((N, O, H, W))
    for i in range(KH):
        for j in range(KW):
            out += np.einsum("nchw,oc->nohw", xp[:, :, i:i + H, j:j + W], k[:, :, i, j])
    out = np.maximum(out + bias[None, :, None, None], 0)
    return out.reshape(N, O, H // 2, 2, W // 2, 2).max(axis=(3, 5))


# --device tpu:0 (or another): where it runs. An f32 dot or convolution at DEFAULT precision rounds
# its inputs to bf16 on a TPU (8 significant bits), so the check there allows bf16's rounding.
DEVICE = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv[:-1] else "cpu:0"
TOLERANCE = 1e-4 if DEVICE.startswith("cpu") else 3e-2


def main() -> int:
    comp = build()
    print(comp.as_hlo_text())
    rng = np.random.default_rng(1)
    x = rng.standard_normal((N, C, H, W), dtype=np.float32)
    k = rng.standard_normal((O, C, KH, KW), dtype=np.float32)
    bias = rng.standard_normal(O, dtype=np.float32)
    got = xs.compile(comp, device=DEVICE)(x, k, bias).to_numpy()
    want = reference(x.astype(np.float64), k.astype(np.float64), bias.astype(np.float64))
    err = float(np.max(np.abs(got - want)))
    print("output shape", got.shape, f"max |xlasdk - numpy| = {err:.2e}")
    ok = got.shape == want.shape and err < TOLERANCE
    print("MATCH" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
