"""Denoise signals with a low-pass filter in the frequency domain, and convolve circularly via FFT.

A batch of noisy signals goes through RFFT, every frequency above a cutoff is zeroed, and IRFFT
brings them back; the same graph also computes a circular convolution as
IRFFT(RFFT(x) * RFFT(kernel)). Both results are checked against numpy, and the filter must bring
the signals closer to the clean ones. Exits non-zero on a mismatch.

    python examples/fft.py
"""

from __future__ import annotations

import sys

import numpy as np

import xlasdk as xs
from xlasdk import ops

B, N = 4, 256       # batch of signals, samples per signal
CUTOFF = 12         # keep frequency bins 0..CUTOFF-1


def build() -> xs.XlaComputation:
    f32 = np.float32
    b = xs.XlaBuilder("fft_lowpass")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(f32, (B, N)), "noisy")
    k = ops.Parameter(b, 1, xs.Shape.array_shape(f32, (N,)), "kernel")
    spec = ops.Fft(x, xs.FftType.RFFT, [N])                            # (B, N // 2 + 1) complex64
    bins = ops.Iota(b, xs.Shape.array_shape(np.int32, spec.dims), 1)   # frequency index of each bin
    keep = ops.Lt(bins, ops.Constant(b, np.int32(CUTOFF)))
    zero = ops.Broadcast(ops.Constant(b, np.complex64(0)), spec.dims)
    filtered = ops.Fft(ops.Select(keep, spec, zero), xs.FftType.IRFFT, [N])        # (B, N) float32
    kspec = ops.Fft(k, xs.FftType.RFFT, [N])                                         # (N // 2 + 1,)
    conv = ops.Fft(ops.Mul(spec, kspec, broadcast_dimensions=[1]), xs.FftType.IRFFT, [N])
    return b.build(ops.Tuple(b, [filtered, conv]))


def main() -> int:
    rng = np.random.default_rng(0)
    t = np.arange(N) / N
    freqs = rng.integers(1, CUTOFF, size=(B, 3))
    clean = np.sum([np.sin(2 * np.pi * freqs[:, j:j + 1] * t + j) for j in range(3)], axis=0).astype(np.float32)
    noisy = (clean + 0.8 * rng.standard_normal((B, N))).astype(np.float32)
    kernel = np.zeros(N, np.float32)
    kernel[:5] = [0.1, 0.2, 0.4, 0.2, 0.1]

    comp = build()
    result = xs.compile(comp)(noisy, kernel)
    assert isinstance(result, tuple)
    filtered, conv = (np.asarray(o) for o in result)

    spec = np.fft.rfft(noisy.astype(np.float64), axis=1)
    spec[:, CUTOFF:] = 0
    want_filtered = np.fft.irfft(spec, N, axis=1)
    want_conv = np.stack([[sum(noisy[i, (n - m) % N] * kernel[m] for m in range(5)) for n in range(N)]
                          for i in range(B)])
    err_filter = float(np.abs(filtered - want_filtered).max())
    err_conv = float(np.abs(conv - want_conv).max())
    rms_before = float(np.sqrt(np.mean((noisy - clean) ** 2)))
    rms_after = float(np.sqrt(np.mean((filtered - clean) ** 2)))
    print(f"low-pass: max |xlasdk - numpy| = {err_filter:.2e}; rms error vs clean {rms_before:.3f} -> {rms_after:.3f}")
    print(f"circular convolution: max |xlasdk - numpy| = {err_conv:.2e}")
    ok = err_filter < 1e-4 and err_conv < 1e-4 and rms_after < rms_before / 2
    print("MATCH" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
