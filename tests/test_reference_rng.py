"""The reference rule of RngBitGenerator (``xlasdk/reference/rng.py``): the block functions against
Random123's published known-answer vectors, every algorithm, state size, output type and shape
against XLA:CPU's bits (exactly), and real JAX programs (``impl='rbg'`` / ``'unsafe_rbg'`` keys
lower to rng_bit_generator) against JAX's own output."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import run
from xlasdk import ops
from xlasdk.reference.rng import philox4x32, rng_bits, threefry2x32

M32 = 0xFFFF_FFFF
PI_WORDS = (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344, 0xA4093822, 0x299F31D0)  # pi's hex digits


def _u32(*words: int) -> list[np.ndarray[Any, Any]]:
    return [np.array([w], np.uint32) for w in words]


# Random123's kat_vectors (Salmon et al.): (counter, key) -> output, for threefry2x32_20 and philox4x32_10
@pytest.mark.parametrize(("ctr", "key", "want"), [
    ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
    ((M32, M32), (M32, M32), (0x1CB996FC, 0xBB002BE7)),
    (PI_WORDS[:2], PI_WORDS[2:4], (0xC4923A9C, 0x483DF7A0)),
])
def test_threefry2x32_known_answers(ctr: tuple[int, int], key: tuple[int, int], want: tuple[int, int]) -> None:
    got = threefry2x32(*_u32(*ctr), key)  # type: ignore[call-arg]
    assert [int(g[0]) for g in got] == list(want)


@pytest.mark.parametrize(("ctr", "key", "want"), [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((M32,) * 4, (M32, M32), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (PI_WORDS[:4], PI_WORDS[4:], (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
])
def test_philox4x32_known_answers(ctr: tuple[int, ...], key: tuple[int, int], want: tuple[int, ...]) -> None:
    lanes = _u32(*ctr)
    got = philox4x32((lanes[0], lanes[1], lanes[2], lanes[3]), key)
    assert [int(g[0]) for g in got] == list(want)


def _rbg(algorithm: str, words: int, dtype: Any, dims: tuple[int, ...]) -> xs.XlaComputation:
    b = xs.XlaBuilder("rbg")
    s = ops.Parameter(b, 0, xs.Shape.array_shape(np.uint64, (words,)))
    return b.build(ops.RngBitGenerator(algorithm, s, xs.Shape.array_shape(dtype, dims)))


STATES = {2: [np.array([5, 7], np.uint64), np.array([2**64 - 1, 2**64 - 3], np.uint64)],  # the counter wraps
          3: [np.array([0x1234_5678_9ABC_DEF0, 2**64 - 2, 9], np.uint64)]}  # a carry into the high word
SHAPES = [(), (1,), (7,), (6,), (3, 5), (0, 4), (3, 1, 5), (2, 3, 5)]
CASES = [(alg, words, dt, dims) for alg in ("THREE_FRY", "PHILOX", "DEFAULT") for words in (2, 3)
         for dt in (np.uint8, np.uint16, np.uint32, np.uint64) for dims in SHAPES
         if not (alg == "THREE_FRY" and words == 3) and (dt in (np.uint32, np.uint64) or len(dims) < 2)]


@pytest.mark.parametrize(("algorithm", "words", "dtype", "dims"), CASES,
                         ids=[f"{a}-u64[{w}]-{np.dtype(d).name}-{list(s)}" for a, w, d, s in CASES])
def test_rng_bit_generator_matches_xla_cpu_bit_for_bit(algorithm: str, words: int, dtype: Any,
                                                       dims: tuple[int, ...]) -> None:
    comp = _rbg(algorithm, words, dtype, dims)
    for state in STATES[words]:
        device = run(comp, state)
        ref = xs.evaluate(comp, state)
        for d, r in zip(device, ref, strict=True):
            assert r.dtype == d.dtype and r.shape == d.shape
            np.testing.assert_array_equal(r, d)


def test_default_is_philox_and_the_state_advances_by_the_blocks_used() -> None:
    state = np.array([11, 2**64 - 1], np.uint64)
    new_p, bits_p = rng_bits("PHILOX", state, np.uint32, (9,))
    new_d, bits_d = rng_bits("DEFAULT", state, np.uint32, (9,))
    np.testing.assert_array_equal(bits_p, bits_d)
    np.testing.assert_array_equal(new_p, new_d)
    assert new_p.tolist() == [11, 2]  # ceil(9 / 4) = 3 blocks of 4 words, the low word wrapping
    new_t, _ = rng_bits("THREE_FRY", np.array([11, 40], np.uint64), np.uint32, (3, 5))
    assert new_t.tolist() == [11, 40 + 3 * 3]  # f32[3,5] splits dimension 1 (the largest): 3 x 3 blocks
    # u8 is the low byte of u32's bits, s32 the same bits as u32
    _, b8 = rng_bits("THREE_FRY", np.array([1, 2], np.uint64), np.uint8, (5,))
    _, b32 = rng_bits("THREE_FRY", np.array([1, 2], np.uint64), np.uint32, (5,))
    _, s32 = rng_bits("THREE_FRY", np.array([1, 2], np.uint64), np.int32, (5,))
    np.testing.assert_array_equal(b8, (b32 & 0xFF).astype(np.uint8))
    np.testing.assert_array_equal(s32.view(np.uint32), b32)


def test_a_chain_of_generators_in_a_loop_matches_xla_cpu() -> None:
    """The state threads through a while loop (3 draws): the reference's and XLA's final states and sums agree."""
    b = xs.XlaBuilder("chain")
    s = ops.Parameter(b, 0, xs.Shape.array_shape(np.uint64, (3,)))
    st = xs.Shape.tuple_shape([xs.Shape.array_shape(np.int32, ()), xs.Shape.array_shape(np.uint64, (3,)),
                               xs.Shape.array_shape(np.uint64, (4,))])
    cb = xs.XlaBuilder("cond")
    cp = ops.Parameter(cb, 0, st)
    cond = cb.build(ops.Lt(ops.GetTupleElement(cp, 0), ops.Constant(cb, np.int32(3))))
    bb = xs.XlaBuilder("body")
    bp = ops.Parameter(bb, 0, st)
    r = ops.RngBitGenerator("PHILOX", ops.GetTupleElement(bp, 1), xs.Shape.array_shape(np.uint64, (4,)))
    body = bb.build(ops.Tuple(bb, [ops.Add(ops.GetTupleElement(bp, 0), ops.Constant(bb, np.int32(1))),
                                   ops.GetTupleElement(r, 0),
                                   ops.Xor(ops.GetTupleElement(bp, 2), ops.GetTupleElement(r, 1))]))
    init = ops.Tuple(b, [ops.Constant(b, np.int32(0)), s, ops.Broadcast(ops.Constant(b, np.uint64(0)), [4])])
    comp = b.build(ops.While(cond, body, init))
    state = np.array([3, 2**64 - 5, 0], np.uint64)
    device = run(comp, state)
    ref = xs.evaluate(comp, state)
    for d, r_ in zip(device, ref, strict=True):
        np.testing.assert_array_equal(r_, d)
    assert ref[1].tolist() == [3, 1, 1]  # 3 draws of 2 blocks: the low word wrapped, carrying 1


def test_rng_bit_generator_refusals_name_the_op() -> None:
    txt = """module @m {{ func.func public @main(%arg0: tensor<{n}xui64>) -> (tensor<{n}xui64>, tensor<5x{t}>) {{
    %s, %o = stablehlo.rng_bit_generator %arg0, algorithm = {a}
        : (tensor<{n}xui64>) -> (tensor<{n}xui64>, tensor<5x{t}>)
    return %s, %o : tensor<{n}xui64>, tensor<5x{t}> }} }}"""
    # XLA:CPU hands back random bits declared f32 as a u32 array: nothing the reference could match
    comp = xs.XlaComputation.from_stablehlo(txt.format(n=2, t="f32", a="THREE_FRY"))
    with pytest.raises(xs.UnsupportedOpError, match="stablehlo.rng_bit_generator with output f32"):
        xs.evaluate(comp, np.array([1, 2], np.uint64))
    comp = xs.XlaComputation.from_stablehlo(txt.format(n=4, t="ui32", a="PHILOX"))
    with pytest.raises(xs.UnsupportedOpError, match=r"rng_bit_generator with a state of uint64\[4\], expected"):
        xs.evaluate(comp, np.array([1, 2, 3, 4], np.uint64))
    with pytest.raises(ValueError, match="unknown algorithm 'MT19937'"):
        rng_bits("MT19937", np.array([1, 2], np.uint64), np.uint32, (2,))


# -- real JAX programs: keys of impl 'rbg' and 'unsafe_rbg' draw through rng_bit_generator (DEFAULT) ---------
jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


@pytest.mark.parametrize("impl", ["rbg", "unsafe_rbg"])
@pytest.mark.parametrize(("dims", "dtype"), [((3, 5), "uint32"), ((7,), "uint8"), ((), "uint16"),
                                             ((2, 3, 5), "uint32")])
def test_jax_random_bits_with_rbg_keys(impl: str, dims: tuple[int, ...], dtype: str) -> None:
    key = np.asarray(jax.random.key_data(jax.random.key(2024, impl=impl)))

    def draw(k: Any) -> Any:
        return jax.random.bits(jax.random.wrap_key_data(k, impl=impl), dims, jnp.dtype(dtype))

    comp = xs.XlaComputation.from_stablehlo(jax.jit(draw).lower(key).as_text())
    assert "rng_bit_generator" in comp.as_stablehlo_text()
    (got,) = xs.evaluate(comp, key)
    want = np.asarray(jax.jit(draw)(key))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert xs.compare(comp, [key]).ok


def test_jax_uniform_and_normal_with_an_rbg_key_match() -> None:
    key = np.asarray(jax.random.key_data(jax.random.key(7, impl="rbg")))

    def draw(k: Any) -> Any:
        kk = jax.random.wrap_key_data(k, impl="rbg")
        k1, k2 = jax.random.split(kk)
        return jax.random.uniform(k1, (4, 8)), jax.random.normal(k2, (5,))

    comp = xs.XlaComputation.from_stablehlo(jax.jit(draw).lower(key).as_text())
    report = xs.compare(comp, [key])
    assert report.ok, str(report)
    uni, nor = xs.evaluate(comp, key)
    want_u, want_n = (np.asarray(v) for v in jax.jit(draw)(key))
    np.testing.assert_array_equal(uni, want_u)  # bits -> [1, 2) -> minus 1: exact in f32
    np.testing.assert_allclose(nor, want_n, rtol=1e-5, atol=1e-6)
