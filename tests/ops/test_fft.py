"""Fft (FFT, IFFT, RFFT, IRFFT over 1 to 3 dimensions) against numpy.fft, its shape rule and errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import raises, run
from xlasdk import ops
from xlasdk.errors import DTypeError, ShapeError

S = xs.Shape.array_shape
REAL = {np.complex64: np.float32, np.complex128: np.float64}


@pytest.mark.parametrize("cdt", [np.complex64, np.complex128])
def test_fft_types_against_numpy(cdt: Any) -> None:
    """All four transforms over 1, 2 and 3 trailing dimensions, even and odd lengths, with a
    batch dimension, in one computation per precision."""
    rdt = REAL[cdt]
    rng = np.random.default_rng(0)
    shapes = [(2, 8), (3, 4, 6), (2, 3, 5, 4), (7,)]
    cases: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = []  # (kind, input shape, lengths)
    for shp in shapes:
        for n in (1, 2, 3):
            if n <= len(shp):
                cases.append(("FFT", shp, shp[-n:]))
                cases.append(("IFFT", shp, shp[-n:]))
                cases.append(("RFFT", shp, shp[-n:]))
                lengths = shp[-n:]
                cases.append(("IRFFT", shp[:-1] + (lengths[-1] // 2 + 1,), lengths))
    b = xs.XlaBuilder("fft")
    args, outs, wants = [], [], []
    for i, (kind, shp, lengths) in enumerate(cases):
        real_in = kind == "RFFT"
        a = rng.standard_normal(shp)
        if not real_in:
            a = a + 1j * rng.standard_normal(shp)
        a = a.astype(rdt if real_in else cdt)
        p = ops.Parameter(b, i, S(a.dtype, shp))
        outs.append(ops.Fft(p, getattr(xs.FftType, kind), lengths))
        axes = tuple(range(len(shp) - len(lengths), len(shp)))
        a64 = a.astype(np.complex128 if not real_in else np.float64)
        fn: Any = {"FFT": np.fft.fftn, "IFFT": np.fft.ifftn, "RFFT": np.fft.rfftn, "IRFFT": np.fft.irfftn}[kind]
        want = fn(a64, s=lengths, axes=axes)
        wants.append(want)
        args.append(a)
        assert outs[-1].dims == want.shape, (kind, shp, lengths)
        assert outs[-1].dtype == (rdt if kind == "IRFFT" else cdt)
    got = run(b.build(ops.Tuple(b, outs)), *args)
    tol = 2e-5 if cdt == np.complex64 else 1e-12
    for (kind, shp, lengths), g, w in zip(cases, got, wants, strict=True):
        assert g.dtype == (rdt if kind == "IRFFT" else cdt)
        scale = max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(g, w, rtol=0, atol=tol * scale, err_msg=f"{kind} {shp} {lengths}")


def test_fft_round_trips_and_names() -> None:
    """IFFT(FFT(x)) = x and IRFFT(RFFT(x)) = x; fft_type given as a name, a number or the enum."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 6)).astype(np.float64)
    b = xs.XlaBuilder("round_trip")
    p = ops.Parameter(b, 0, S(np.float64, (4, 6)))
    r = ops.Fft(p, "rfft", [4, 6])
    back = ops.Fft(r, 3, (4, 6))
    c = ops.Complex(p, p)
    cc = ops.Fft(ops.Fft(c, xs.FftType.FFT, [6]), "IFFT", [6])
    assert r.dims == (4, 4) and back.dims == (4, 6)
    comp = b.build(ops.Tuple(b, [back, cc]))
    assert "fft" in comp.as_hlo_text()
    assert "RFFT" in comp.as_stablehlo_text() and "IRFFT" in comp.as_stablehlo_text()
    got_back, got_cc = run(comp, x)
    np.testing.assert_allclose(got_back, x, atol=1e-12)
    np.testing.assert_allclose(got_cc, x + 1j * x, atol=1e-12)


def test_irfft_ignores_imaginary_dc_like_numpy() -> None:
    """IRFFT of a spectrum that is not Hermitian (imaginary DC and Nyquist parts) equals numpy's."""
    rng = np.random.default_rng(2)
    spec = (rng.standard_normal((3, 5)) + 1j * rng.standard_normal((3, 5))).astype(np.complex64)
    b = xs.XlaBuilder("irfft")
    p = ops.Parameter(b, 0, S(np.complex64, (3, 5)))
    got = run(b.build(ops.Fft(p, "IRFFT", [8])), spec)[0]
    np.testing.assert_allclose(got, np.fft.irfft(spec.astype(np.complex128), 8), atol=1e-5)


def test_fft_empty_batch() -> None:
    """A zero-size batch dimension gives an empty result of the right shape."""
    b = xs.XlaBuilder("empty")
    p = ops.Parameter(b, 0, S(np.float32, (0, 8)))
    r = ops.Fft(p, "RFFT", [8])
    back = ops.Fft(r, "IRFFT", [8])
    got = run(b.build(ops.Tuple(b, [r, back])), np.zeros((0, 8), np.float32))
    assert got[0].shape == (0, 5) and got[0].dtype == np.complex64
    assert got[1].shape == (0, 8) and got[1].dtype == np.float32


def test_fft_errors() -> None:
    b = xs.XlaBuilder("errors")
    c = ops.Parameter(b, 0, S(np.complex64, (4, 8)))
    r = ops.Parameter(b, 1, S(np.float32, (4, 8)))
    i = ops.Parameter(b, 2, S(np.int32, (8,)))
    h = ops.Parameter(b, 3, S(np.float16, (8,)))
    with raises(DTypeError, "Fft", "FFT", "complex", "f32"):
        ops.Fft(r, "FFT", [8])
    with raises(DTypeError, "Fft", "IFFT", "complex"):
        ops.Fft(r, "IFFT", [8])
    with raises(DTypeError, "Fft", "RFFT", "real", "c64"):
        ops.Fft(c, "RFFT", [8])
    with raises(DTypeError, "Fft", "RFFT", "s32"):
        ops.Fft(i, "RFFT", [8])
    with raises(DTypeError, "Fft", "RFFT", "f16"):
        ops.Fft(h, "RFFT", [8])
    with raises(DTypeError, "Fft", "IRFFT", "complex"):
        ops.Fft(r, "IRFFT", [8])
    with raises(ShapeError, "Fft", "operand 'operand'", "[8]", "[4]"):
        ops.Fft(c, "FFT", [4])
    with raises(ShapeError, "Fft", "operand 'operand'", "[5]"):
        ops.Fft(c, "IRFFT", [8])
    with raises(ShapeError, "Fft", "operand 'operand'", "[4, 8]"):
        ops.Fft(r, "RFFT", [4, 4])
    with raises(ShapeError, "Fft", "fft_lengths", "1 to 3"):
        ops.Fft(c, "FFT", [2, 2, 4, 8])
    with raises(ShapeError, "Fft", "fft_lengths", "1 to 3"):
        ops.Fft(c, "FFT", [])
    with raises(ShapeError, "Fft", "fft_lengths", ">= 1"):
        ops.Fft(c, "FFT", [0])
    with raises(ShapeError, "Fft", "operand 'operand'", "rank 2"):
        ops.Fft(c, "FFT", [3, 4, 8])
    with raises(ShapeError, "Fft", "fft_type", "DCT"):
        ops.Fft(c, "DCT", [8])
    with raises(ShapeError, "Fft", "fft_type", "7"):
        ops.Fft(c, 7, [8])
    with raises(DTypeError, "Fft", "operand 'operand'", "XlaOp"):
        ops.Fft(np.zeros(8), "FFT", [8])  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ pure shape rules


def test_fft_rule_without_builder() -> None:
    from xlasdk.ops.fft import fft_shape
    from xlasdk.types import PrimitiveType as P

    assert fft_shape("Fft", P.F32, (2, 8, 6), xs.FftType.RFFT, (8, 6)) == (P.C64, (2, 8, 4))
    assert fft_shape("Fft", P.C128, (2, 8, 4), xs.FftType.IRFFT, (8, 6)) == (P.F64, (2, 8, 6))
    assert fft_shape("Fft", P.C64, (5, 3), xs.FftType.IFFT, (3,)) == (P.C64, (5, 3))
    with raises(ShapeError, "Fft: operand 'operand' has trailing dimensions [8, 6], but IRFFT", "needs [8, 4]"):
        fft_shape("Fft", P.C64, (8, 6), xs.FftType.IRFFT, (8, 6))
    with raises(DTypeError, "Fft: RFFT needs a real operand (f32 or f64), got c64"):
        fft_shape("Fft", P.C64, (8,), xs.FftType.RFFT, (8,))
    with raises(ShapeError, "Fft: fft_lengths must have 1 to 3 entries, got []"):
        fft_shape("Fft", P.C64, (8,), xs.FftType.FFT, ())
