"""RngBitGenerator (determinism, state handling, bit statistics), RngUniform and RngNormal
(range and moments at fixed sample sizes), and their errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import raises, run
from xlasdk import ops
from xlasdk.errors import DTypeError, ShapeError

S = xs.Shape.array_shape
N = 1 << 16  # samples per statistical check


ALGORITHMS = [("THREE_FRY", 2), ("PHILOX", 2), ("PHILOX", 3), ("DEFAULT", 2), ("DEFAULT", 3)]


@pytest.mark.parametrize("algorithm,state_size", ALGORITHMS)
def test_rng_bit_generator_determinism_and_state(algorithm: str, state_size: int) -> None:
    """Same state -> same bits (within a run and across runs); another state or the returned
    state -> other bits; the returned state has the initial state's shape and differs from it."""
    b = xs.XlaBuilder("bits")
    s0 = ops.Parameter(b, 0, S(np.uint64, (state_size,)))
    s1 = ops.Parameter(b, 1, S(np.uint64, (state_size,)))
    shape = S(np.uint32, (4, 64))
    r0 = ops.RngBitGenerator(algorithm, s0, shape)
    r0_again = ops.RngBitGenerator(getattr(xs.RandomAlgorithm, algorithm), s0, shape)
    r1 = ops.RngBitGenerator(algorithm, s1, shape)
    new_state = ops.GetTupleElement(r0, 0)
    r_next = ops.RngBitGenerator(algorithm, new_state, shape)
    assert r0.shape == xs.Shape.tuple_shape([S(np.uint64, (state_size,)), shape])
    outs = [new_state, ops.GetTupleElement(r0, 1), ops.GetTupleElement(r0_again, 1), ops.GetTupleElement(r1, 1),
            ops.GetTupleElement(r_next, 1)]
    comp = b.build(ops.Tuple(b, outs))
    state0 = np.array([42, 7, 3][:state_size], np.uint64)
    state1 = np.array([43, 7, 3][:state_size], np.uint64)
    st, bits, bits_again, bits_other, bits_next = run(comp, state0, state1)
    assert st.shape == (state_size,) and st.dtype == np.uint64 and not np.array_equal(st, state0)
    assert bits.shape == (4, 64) and bits.dtype == np.uint32
    np.testing.assert_array_equal(bits, bits_again)
    assert np.mean(bits != bits_other) > 0.99
    assert np.mean(bits != bits_next) > 0.99
    second = run(comp, state0, state1)  # a second execution gives the same values
    for g, w in zip(second, [st, bits, bits_again, bits_other, bits_next], strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("algorithm,state_size", [("THREE_FRY", 2), ("PHILOX", 3)])
def test_rng_bit_generator_statistics(algorithm: str, state_size: int) -> None:
    """Each of the 32 bit positions of u32 output is set about half the time, u8 output is
    uniform over 0..255 (chi-square), u64 output as fractions of 2^64 has mean 1/2 and variance 1/12,
    and u16 output covers its range; 6-sigma bounds at N samples."""
    b = xs.XlaBuilder("stats")
    s = ops.Parameter(b, 0, S(np.uint64, (state_size,)))
    outs = [ops.GetTupleElement(ops.RngBitGenerator(algorithm, s, S(dt, (N,))), 1)
            for dt in (np.uint32, np.uint8, np.uint64, np.uint16)]
    u32, u8, u64, u16 = run(b.build(ops.Tuple(b, outs)), np.array([1234, 5678, 9][:state_size], np.uint64))
    assert (u32.dtype, u8.dtype, u64.dtype, u16.dtype) == (np.uint32, np.uint8, np.uint64, np.uint16)
    ones = ((u32[:, None] >> np.arange(32, dtype=np.uint32)) & 1).mean(axis=0)
    assert np.all(np.abs(ones - 0.5) < 6 * 0.5 / np.sqrt(N)), ones
    counts = np.bincount(u8, minlength=256)
    chi2 = float(((counts - N / 256) ** 2 / (N / 256)).sum())
    assert chi2 < 255 + 6 * np.sqrt(2 * 255), chi2
    frac = u64.astype(np.float64) / 2.0**64
    assert abs(frac.mean() - 0.5) < 6 * np.sqrt(1 / 12 / N)
    assert abs(frac.var() - 1 / 12) < 0.005
    assert u16.min() < 100 and u16.max() > 65435
    assert len(np.unique(u64)) == N  # 64-bit values do not repeat at this size


def test_rng_bit_generator_shapes() -> None:
    """Scalar and empty outputs."""
    b = xs.XlaBuilder("shapes")
    s = ops.Parameter(b, 0, S(np.uint64, (2,)))
    r = ops.RngBitGenerator("RNG_THREE_FRY", s, S(np.uint64, ()))
    e = ops.RngBitGenerator(1, s, S(np.uint8, (0, 3)))
    comp = b.build(ops.Tuple(b, [ops.GetTupleElement(r, 1), ops.GetTupleElement(e, 1)]))
    got = run(comp, np.array([1, 2], np.uint64))
    assert got[0].shape == () and got[0].dtype == np.uint64
    assert got[1].shape == (0, 3) and got[1].dtype == np.uint8


def test_rng_uniform_and_normal_statistics() -> None:
    """RngUniform lies in [a, b) with mean (a + b) / 2 and variance (b - a)^2 / 12 (f32, f64);
    integer RngUniform hits every value of [a, b) about equally; RngNormal has the given mean and
    standard deviation and about 68.27% of its mass within one sigma. 6-sigma bounds at N samples."""
    b = xs.XlaBuilder("rng")

    def c(v: Any) -> xs.XlaOp:
        return ops.Constant(b, v)

    outs = [
        ops.RngUniform(c(np.float32(-2.0)), c(np.float32(3.0)), S(np.float32, (N,))),
        ops.RngUniform(c(np.float64(10.0)), c(np.float64(10.5)), S(np.float64, (64, N // 64))),
        ops.RngUniform(c(np.int32(-3)), c(np.int32(4)), S(np.int32, (N,))),
        ops.RngNormal(c(np.float32(1.5)), c(np.float32(2.0)), S(np.float32, (N,))),
        ops.RngNormal(c(np.float64(-4.0)), c(np.float64(0.25)), S(np.float64, (N,))),
        ops.RngNormal(c(np.float32(0.0)), c(np.float32(1.0)), S(np.float32, ())),
    ]
    assert [o.dims for o in outs] == [(N,), (64, N // 64), (N,), (N,), (N,), ()]
    uf, ud, ui, nf, nd, scalar = run(b.build(ops.Tuple(b, outs)))
    dtypes = (uf.dtype, ud.dtype, ui.dtype, nf.dtype, nd.dtype)
    assert dtypes == (np.float32, np.float64, np.int32, np.float32, np.float64)
    for u, lo, hi in ((uf, -2.0, 3.0), (ud, 10.0, 10.5)):
        w = hi - lo
        assert u.min() >= lo and u.max() < hi
        assert abs(u.mean() - (lo + hi) / 2) < 6 * w * np.sqrt(1 / 12 / N)
        assert abs(u.var() - w * w / 12) < 0.01 * w * w
    assert ui.min() == -3 and ui.max() == 3
    counts = np.bincount(ui + 3, minlength=7)
    assert np.all(np.abs(counts - N / 7) < 6 * np.sqrt(N / 7))
    for n, mu, sigma in ((nf, 1.5, 2.0), (nd, -4.0, 0.25)):
        assert abs(n.mean() - mu) < 6 * sigma / np.sqrt(N)
        assert abs(n.std() - sigma) < 6 * sigma / np.sqrt(2 * N)
        within = np.mean(np.abs(n - mu) < sigma)
        assert abs(within - 0.6827) < 6 * np.sqrt(0.6827 * 0.3173 / N)
    assert scalar.shape == () and np.isfinite(scalar)


def test_rng_errors() -> None:
    b = xs.XlaBuilder("errors")
    s2 = ops.Parameter(b, 0, S(np.uint64, (2,)))
    s3 = ops.Parameter(b, 1, S(np.uint64, (3,)))
    s4 = ops.Parameter(b, 2, S(np.uint64, (4,)))
    si = ops.Parameter(b, 3, S(np.int64, (2,)))
    smat = ops.Parameter(b, 4, S(np.uint64, (1, 2)))
    u32 = S(np.uint32, (8,))
    rbg, name, st = ops.RngBitGenerator, "RngBitGenerator", "operand 'initial_state'"
    with raises(ShapeError, name, st, "u64[2]"):
        rbg("THREE_FRY", s3, u32)
    with raises(ShapeError, name, st, "u64[3]"):
        rbg("PHILOX", s4, u32)
    with raises(ShapeError, name, st):
        rbg("DEFAULT", smat, u32)
    with raises(DTypeError, name, st, "u64"):
        rbg("PHILOX", si, u32)
    with raises(DTypeError, name, "shape", "f32"):
        rbg("PHILOX", s2, S(np.float32, (8,)))
    with raises(DTypeError, name, "shape", "s32"):
        rbg("PHILOX", s2, S(np.int32, (8,)))
    with raises(DTypeError, name, "shape", "Shape"):
        rbg("PHILOX", s2, (8,))  # type: ignore[arg-type]
    with raises(ShapeError, name, "algorithm", "MERSENNE"):
        rbg("MERSENNE", s2, u32)
    with raises(ShapeError, name, "algorithm", "9"):
        rbg(9, s2, u32)
    with raises(DTypeError, name, st):
        rbg("PHILOX", np.zeros(2, np.uint64), u32)  # type: ignore[arg-type]
    f = ops.Constant(b, np.float32(0))
    g = ops.Constant(b, np.float32(1))
    d = ops.Constant(b, np.float64(1))
    i = ops.Constant(b, np.int32(1))
    v = ops.Constant(b, np.zeros(2, np.float32))
    f8 = S(np.float32, (8,))
    with raises(ShapeError, "RngUniform", "operand 'a'", "scalar"):
        ops.RngUniform(v, g, f8)
    with raises(ShapeError, "RngUniform", "operand 'b'", "scalar"):
        ops.RngUniform(f, v, f8)
    with raises(DTypeError, "RngUniform", "operand 'b'", "f64"):
        ops.RngUniform(f, d, f8)
    with raises(DTypeError, "RngUniform", "shape", "f64"):
        ops.RngUniform(f, g, S(np.float64, (8,)))
    with raises(DTypeError, "RngUniform", "shape", "Shape"):
        ops.RngUniform(f, g, [8])  # type: ignore[arg-type]
    with raises(ShapeError, "RngUniform", "shape", "array"):
        ops.RngUniform(f, g, xs.Shape.tuple_shape([f8]))
    t = ops.Constant(b, True)
    with raises(DTypeError, "RngUniform", "operand 'a'", "pred"):
        ops.RngUniform(t, t, S(np.bool_, (2,)))
    with raises(DTypeError, "RngNormal", "operand 'mu'", "floating-point"):
        ops.RngNormal(i, i, S(np.int32, (8,)))
    with raises(ShapeError, "RngNormal", "operand 'sigma'", "scalar"):
        ops.RngNormal(f, v, f8)
    with raises(DTypeError, "RngNormal", "operand 'sigma'", "XlaOp"):
        ops.RngNormal(f, 1.0, f8)  # type: ignore[arg-type]
    other = xs.XlaBuilder("other")
    h = ops.Constant(other, np.float32(1))
    with raises(ShapeError, "RngNormal", "operand 'sigma'", "builder"):
        ops.RngNormal(f, h, f8)


# ------------------------------------------------------------------------------ pure shape rules


def test_rng_rules_without_builder() -> None:
    from xlasdk.attrs import RandomAlgorithm, RandomDistribution
    from xlasdk.ops.random import rng_bit_generator_shape, rng_shape

    def sh(dt: Any, dims: tuple[int, ...]) -> xs.Shape:
        return xs.Shape.array_shape(np.dtype(dt), dims)

    st, out = sh(np.uint64, (3,)), sh(np.uint32, (4, 4))
    assert rng_bit_generator_shape("RngBitGenerator", RandomAlgorithm.PHILOX, st, out) == xs.Shape.tuple_shape(
        [st, out]
    )
    with raises(ShapeError, "RngBitGenerator: operand 'initial_state' must be u64[2] for THREE_FRY, got u64[3]"):
        rng_bit_generator_shape("RngBitGenerator", RandomAlgorithm.THREE_FRY, st, out)
    with raises(DTypeError, "RngBitGenerator: operand 'initial_state' must be u64, got s64[2]"):
        rng_bit_generator_shape("RngBitGenerator", RandomAlgorithm.PHILOX, sh(np.int64, (2,)), out)
    with raises(DTypeError, "RngBitGenerator: shape must have element type u8, u16, u32 or u64, got s32[4]"):
        rng_bit_generator_shape("RngBitGenerator", RandomAlgorithm.PHILOX, st, sh(np.int32, (4,)))
    f = sh(np.float32, ())
    uni = RandomDistribution.UNIFORM
    assert rng_shape("RngUniform", uni, ("a", f), ("b", f), sh(np.float32, (2, 3))) == sh(np.float32, (2, 3))
    i = sh(np.int8, ())
    assert rng_shape("RngUniform", uni, ("a", i), ("b", i), sh(np.int8, (7,))) == sh(np.int8, (7,))
    with raises(DTypeError, "RngNormal: operand 'mu' must be floating-point, got s8[]"):
        rng_shape("RngNormal", RandomDistribution.NORMAL, ("mu", i), ("sigma", i), sh(np.int8, (7,)))
    with raises(ShapeError, "RngUniform: operand 'b' must be a scalar, got f32[1]"):
        rng_shape("RngUniform", uni, ("a", f), ("b", sh(np.float32, (1,))), sh(np.float32, (2,)))
    with raises(DTypeError, "RngUniform: shape has element type f64[2], expected f32 like operand 'a'"):
        rng_shape("RngUniform", uni, ("a", f), ("b", f), sh(np.float64, (2,)))
