"""Reference rule of ``stablehlo.rng_bit_generator``: XLA's THREE_FRY and PHILOX bit generators,
bit for bit as XLA:CPU computes them.

XLA expands RngBitGenerator into plain ops (``RngBitGeneratorExpander`` over the generators of
``xla/hlo/builder/lib/prng.cc``); what follows is that arithmetic written again in numpy, from
the layout those files define:

- the state is ``u64[2]`` (THREE_FRY, PHILOX) or ``u64[3]`` (PHILOX); word 0 is the key, which
  the output state keeps;
- THREE_FRY (Threefry-2x32, 20 rounds, Salmon et al., SC 2011): word 1 is a 64-bit counter; each
  output element (for 32-bit and narrower outputs: each *pair* of elements along a split
  dimension) is the block of counter ``state[1] + i`` (``i`` its row-major index), its two 32-bit
  halves the block's two words; the new state's counter is ``state[1] + blocks``;
- PHILOX (Philox-4x32, 10 rounds): the counter is 128 bits, low word ``state[1]`` and high word
  ``state[2]`` (``u64[3]``) or ``state[0]``, the key itself (``u64[2]``, whose new state keeps the
  low word only); block ``i`` (counter + ``i``, with carry) gives four consecutive 32-bit outputs
  (two consecutive 64-bit ones);
- outputs narrower than 32 bits are the low bits of the 32-bit output of the same shape; signed
  outputs are the unsigned output's bits.

DEFAULT is PHILOX: the algorithm XLA's CPU (and GPU) backend expands DEFAULT to.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._optable import evaluates, refuse_evaluation
from ..attrs import RandomAlgorithm
from ..builder import XlaOp
from ..ops.random import RNG, RNG_BIT_GENERATOR
from ._walk import Evaluator, Value, result_shapes

__all__ = ["threefry2x32", "philox4x32", "rng_bits"]

_U32 = np.uint32
_U64 = np.uint64
_MASK32 = _U64(0xFFFF_FFFF)
_THREEFRY_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
_THREEFRY_PARITY = 0x1BD11BDA
_PHILOX_MUL = (0xD2511F53, 0xCD9E8D57)
_PHILOX_WEYL = (0x9E3779B9, 0xBB67AE85)
_STATE_WORDS = {"THREE_FRY": (2,), "PHILOX": (2, 3)}

U32Array = np.ndarray[Any, np.dtype[np.uint32]]
U64Array = np.ndarray[Any, np.dtype[np.uint64]]


def _rotl(v: U32Array, r: int) -> U32Array:
    return (v << _U32(r)) | (v >> _U32(32 - r))


def threefry2x32(x0: U32Array, x1: U32Array, key: tuple[int, int]) -> tuple[U32Array, U32Array]:
    """Threefry-2x32 with 20 rounds on blocks ``(x0, x1)`` (u32 arrays of one shape) under the
    32-bit key words ``key`` (low, high); returns the two u32 output words of each block."""
    k = (_U32(key[0]), _U32(key[1]), _U32(_THREEFRY_PARITY ^ key[0] ^ key[1]))
    with np.errstate(over="ignore"):  # u32 arithmetic wraps around
        a = x0.astype(_U32) + k[0]
        b = x1.astype(_U32) + k[1]
        for group in range(5):  # 5 groups of 4 rounds, the key injected after each
            rots = _THREEFRY_ROTATIONS[:4] if group % 2 == 0 else _THREEFRY_ROTATIONS[4:]
            for r in rots:
                a = a + b
                b = _rotl(b, r) ^ a
            a = a + k[(group + 1) % 3]
            b = b + k[(group + 2) % 3] + _U32(group + 1)
    return a, b


def philox4x32(lanes: tuple[U32Array, U32Array, U32Array, U32Array],
               key: tuple[int, int]) -> tuple[U32Array, U32Array, U32Array, U32Array]:
    """Philox-4x32 with 10 rounds on the counter words ``lanes`` (u32 arrays of one shape, least
    significant first) under the 32-bit key words ``key`` (low, high)."""
    x = [v.astype(_U32) for v in lanes]
    k0, k1 = _U32(key[0]), _U32(key[1])
    with np.errstate(over="ignore"):  # the key's u32 increments wrap around
        for _ in range(10):
            p0 = x[0].astype(_U64) * _U64(_PHILOX_MUL[0])
            p1 = x[2].astype(_U64) * _U64(_PHILOX_MUL[1])
            hi0, lo0 = (p0 >> _U64(32)).astype(_U32), p0.astype(_U32)
            hi1, lo1 = (p1 >> _U64(32)).astype(_U32), p1.astype(_U32)
            x = [hi1 ^ x[1] ^ k0, lo1, hi0 ^ x[3] ^ k1, lo0]
            k0, k1 = k0 + _U32(_PHILOX_WEYL[0]), k1 + _U32(_PHILOX_WEYL[1])
    return x[0], x[1], x[2], x[3]


def _halves(v: U64Array) -> tuple[U32Array, U32Array]:
    return (v & _MASK32).astype(_U32), (v >> _U64(32)).astype(_U32)


def _join(lo: U32Array, hi: U32Array) -> U64Array:
    return lo.astype(_U64) | (hi.astype(_U64) << _U64(32))


def _split_dim(dims: tuple[int, ...]) -> int:
    """The dimension THREE_FRY's 32-bit generator halves: the first of even size, else the first
    of the largest size."""
    for i, d in enumerate(dims):
        if d % 2 == 0:
            return i
    return max(range(len(dims)), key=lambda i: (dims[i], -i))


def _threefry(state: U64Array, dims: tuple[int, ...], bits: int) -> tuple[U64Array, np.ndarray[Any, Any]]:
    key = _halves(state[:1])
    kw = (int(key[0][0]), int(key[1][0]))
    counter = state[1]
    if bits == 64:
        n = int(np.prod(dims, dtype=np.int64))
        a, b = threefry2x32(*_halves(counter + np.arange(n, dtype=_U64)), kw)
        out: np.ndarray[Any, Any] = _join(a, b).reshape(dims)
    elif not dims:  # a scalar: the first word of one block
        n = 1
        a, _ = threefry2x32(*_halves(np.array([counter], _U64)), kw)
        out = a.reshape(())
    else:  # one block per pair of elements along the split dimension
        s = _split_dim(dims)
        half = dims[:s] + ((dims[s] + 1) // 2,) + dims[s + 1:]
        n = int(np.prod(half, dtype=np.int64))
        a, b = threefry2x32(*_halves(counter + np.arange(n, dtype=_U64)), kw)
        pairs = np.stack([a.reshape(half), b.reshape(half)], axis=s + 1)
        out = pairs.reshape(dims[:s] + (2 * half[s],) + dims[s + 1:])
        out = np.take(out, np.arange(dims[s]), axis=s)
    with np.errstate(over="ignore"):
        new = np.array([state[0], counter + _U64(n)], _U64)
    return new, out


def _philox(state: U64Array, dims: tuple[int, ...], bits: int) -> tuple[U64Array, np.ndarray[Any, Any]]:
    key = _halves(state[:1])
    kw = (int(key[0][0]), int(key[1][0]))
    lo, hi = state[1], (state[2] if state.size == 3 else state[0])
    count = int(np.prod(dims, dtype=np.int64))
    words = count * (2 if bits == 64 else 1)
    blocks = (words + 3) // 4
    lows = lo + np.arange(blocks, dtype=_U64)
    highs = np.where(lows < lo, hi + _U64(1), hi).astype(_U64)  # the carry into the high word
    lanes = philox4x32((*_halves(lows), *_halves(highs)), kw)
    if bits == 64:
        flat: np.ndarray[Any, Any] = np.stack([_join(lanes[0], lanes[1]), _join(lanes[2], lanes[3])], axis=1)
    else:
        flat = np.stack(lanes, axis=1)
    out = flat.reshape(-1)[:count].reshape(dims)
    new_lo = lo + _U64(blocks)
    new_hi = hi + _U64(1) if new_lo < lo else hi
    new = np.array([state[0], new_lo] if state.size == 2 else [state[0], new_lo, new_hi], _U64)
    return new, out


def rng_bits(algorithm: str, state: np.ndarray[Any, Any], dtype: Any,
             dims: tuple[int, ...]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """``(new_state, bits)`` of RngBitGenerator, as XLA:CPU computes them.

    Parameters
    ----------
    algorithm: ``"THREE_FRY"``, ``"PHILOX"`` or ``"DEFAULT"`` (PHILOX, as on XLA:CPU).
    state: u64 vector, ``(2,)`` for THREE_FRY, ``(2,)`` or ``(3,)`` for PHILOX.
    dtype: the output's numpy integer type (8 to 64 bits, signed or unsigned).
    dims: the output's dimensions.

    Returns
    -------
    The new state (u64, of ``state``'s shape) and the bits, of ``dims`` and ``dtype``.

    Raises
    ------
    ValueError: an unknown algorithm, a state of another size, or an output type that is not an
    integer of 8, 16, 32 or 64 bits (the rule turns these into UnsupportedOpError).
    """
    alg = "PHILOX" if algorithm == "DEFAULT" else algorithm
    sizes = _STATE_WORDS.get(alg)
    if sizes is None:
        raise ValueError(f"unknown algorithm {algorithm!r} (expected THREE_FRY, PHILOX or DEFAULT)")
    st = np.asarray(state)
    if st.dtype != _U64 or st.ndim != 1 or st.size not in sizes:
        want = " or ".join(f"u64[{s}]" for s in sizes)
        raise ValueError(f"with a state of {st.dtype}{list(st.shape)}, expected {want} for {algorithm}")
    dt = np.dtype(dtype)
    if dt.kind not in "iu" or dt.itemsize not in (1, 2, 4, 8):
        raise ValueError(f"with output element type {dt}, expected an integer type of 8, 16, 32 or 64 bits")
    bits = 64 if dt.itemsize == 8 else 32
    with np.errstate(over="ignore"):
        new, out = (_threefry if alg == "THREE_FRY" else _philox)(st, tuple(int(d) for d in dims), bits)
    unsigned = np.dtype(f"u{dt.itemsize}")
    return new, out.astype(unsigned).view(dt)  # narrower: the low bits (astype copies: contiguous)


@evaluates(RNG_BIT_GENERATOR)
def _rng_bit_generator(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    algorithm = ev.attr(o, "rng_algorithm", RandomAlgorithm.DEFAULT).name
    state_shape, out_shape = result_shapes(o)
    dt = np.dtype(out_shape.numpy_dtype())
    if dt.kind not in "iu":
        raise ev.fail(o, f"with output {out_shape}: XLA:CPU returns random bits of a non-integer type as an unsigned "
                         "integer array, not as the program's type (the reference cannot say what is right)")
    try:
        new, out = rng_bits(algorithm, np.asarray(a[0]), dt, tuple(out_shape.dimensions()))
    except ValueError as e:
        raise ev.fail(o, str(e)) from None
    return new, out


refuse_evaluation(RNG, "draws from XLA's own unspecified generator (RngBitGenerator is reproducible: use it)")
