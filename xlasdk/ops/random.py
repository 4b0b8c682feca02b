"""Random numbers: ``RngBitGenerator`` (counter-based, with explicit state), and the legacy
stateful ``RngUniform`` / ``RngNormal`` (XLA ``Rng``; ``stablehlo.rng``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._optable import AttrKind, HloForm, define
from ..attrs import RandomAlgorithm, RandomDistribution
from ..builder import XlaOp
from ..shape import Shape
from ..types import FLOATS, INTS, UNSIGNED_INTS, PrimitiveType
from ._core import array_shape, dtype_error, enum_arg, operand, same_builder, shape_error
from .sources import Constant

__all__ = ["RngBitGenerator", "RngUniform", "RngNormal"]

_P = PrimitiveType

# State sizes (u64 words) each algorithm accepts. DEFAULT is Philox on XLA's CPU and GPU backends.
_STATE_SIZES = {
    RandomAlgorithm.THREE_FRY: (2,),
    RandomAlgorithm.PHILOX: (2, 3),
    RandomAlgorithm.DEFAULT: (2, 3),
}
# Sub-byte unsigned types are stored unpacked and are not produced by XLA's bit generators.
_BIT_TYPES = frozenset(e for e in UNSIGNED_INTS if e not in (_P.U2, _P.U4))


def _result_shape(op: str, shape: Any) -> Shape:
    if not isinstance(shape, Shape):
        dtype_error(op, f"shape must be an xlasdk Shape (xs.Shape.array_shape(...)), got {type(shape).__name__}")
    if not shape.is_array():
        shape_error(op, f"shape must be an array shape, got {shape}")
    return shape


def rng_bit_generator_shape(op: str, algorithm: RandomAlgorithm, state: Shape, shape: Shape) -> Shape:
    """Shape rule of RngBitGenerator: the tuple ``(state, shape)``; DTypeError for a non-u64 state or
    a ``shape`` not of u8/u16/u32/u64, ShapeError for a state not of a size ``algorithm`` takes."""
    if state.element_type() is not _P.U64:
        dtype_error(op, f"operand 'initial_state' must be u64, got {state}")
    sizes = _STATE_SIZES[algorithm]
    if state.rank() != 1 or state.dimensions()[0] not in sizes:
        want = " or ".join(f"u64[{s}]" for s in sizes)
        shape_error(op, f"operand 'initial_state' must be {want} for {algorithm.name}, got {state}")
    if shape.element_type() not in _BIT_TYPES:
        dtype_error(op, f"shape must have element type u8, u16, u32 or u64, got {shape}")
    return Shape.tuple_shape([state, shape])


RNG_BIT_GENERATOR = define(
    "stablehlo.rng_bit_generator", "rng-bit-generator", hlo_form=HloForm.TUPLE_RESULT, constant=False,
    hlo_attrs=lambda o: f", algorithm={o.attrs['rng_algorithm'].to_hlo()}",
    rule=rng_bit_generator_shape, attrs={"rng_algorithm": AttrKind.RNG_ALGORITHM},
)


def rng_shape(op: str, dist: RandomDistribution, p0: tuple[str, Shape], p1: tuple[str, Shape], shape: Shape) -> Shape:
    """Shape rule of RngUniform/RngNormal on the named bound operands: ``shape`` (as an array of
    its element type); ShapeError for non-scalar bounds, DTypeError for bounds or ``shape`` of
    other or unsupported element types (NORMAL: floats; UNIFORM: floats and 8-64 bit integers)."""
    (n0, a), (n1, b) = p0, p1
    for name, v in ((n0, a), (n1, b)):
        if v.rank() != 0:
            shape_error(op, f"operand {name!r} must be a scalar, got {v}")
    et = a.element_type()
    allowed = FLOATS if dist is RandomDistribution.NORMAL else FLOATS | (INTS - {_P.S2, _P.S4, _P.U2, _P.U4})
    if et not in allowed:
        kind = "floating-point" if dist is RandomDistribution.NORMAL else "floating-point or integer"
        dtype_error(op, f"operand {n0!r} must be {kind}, got {a}")
    if b.element_type() is not et:
        dtype_error(op, f"operand {n1!r} has element type {b}, expected {et.name.lower()} like {n0!r}")
    if shape.element_type() is not et:
        dtype_error(op, f"shape has element type {shape}, expected {et.name.lower()} like operand {n0!r}")
    return array_shape(et, shape.dimensions(), op)


RNG = define(
    "stablehlo.rng", constant=False, rule=rng_shape, attrs={"rng_distribution": AttrKind.RNG_DISTRIBUTION}
)


def RngBitGenerator(algorithm: RandomAlgorithm | str | int, initial_state: XlaOp, shape: Shape) -> XlaOp:
    """Random bits from a counter-based generator with explicit state (XLA ``RngBitGenerator``;
    ``stablehlo.rng_bit_generator``).

    The same algorithm and ``initial_state`` always give the same bits (on a given backend);
    feed the returned state into the next call to continue the stream.

    Parameters
    ----------
    algorithm: ``xs.RandomAlgorithm`` (DEFAULT, THREE_FRY, PHILOX), or its name (``"PHILOX"``,
        ``"RNG_PHILOX"``) or number. DEFAULT lets the backend choose (Philox on CPU and GPU).
    initial_state: ``(2,)`` u64 for THREE_FRY; ``(2,)`` or ``(3,)`` u64 for PHILOX and DEFAULT.
    shape: the output :class:`~xlasdk.Shape`, of element type u8, u16, u32 or u64 (any dimensions).

    Returns
    -------
    A tuple-shaped XlaOp ``(new_state, bits)``: ``new_state`` of ``initial_state``'s shape and
    ``bits`` of ``shape``; take them with ``GetTupleElement(r, 0)`` and ``GetTupleElement(r, 1)``.

    Raises
    ------
    ShapeError: unknown algorithm, a state that is not a vector of the size the algorithm needs,
        or a non-array ``shape``.
    DTypeError: a state that is not u64, an output type that is not u8/u16/u32/u64, or ``shape``
        not a Shape.
    """
    op = "RngBitGenerator"
    alg = enum_arg(op, RandomAlgorithm, algorithm, "bad algorithm: ")
    st = operand(op, "initial_state", initial_state)
    out = _result_shape(op, shape)
    result = rng_bit_generator_shape(op, alg, st.shape, out)
    return st.builder.add_op(RNG_BIT_GENERATOR, (st,), result, {"rng_algorithm": alg})


def _rng(op: str, dist: RandomDistribution, p0: tuple[str, Any], p1: tuple[str, Any], shape: Any) -> XlaOp:
    a = operand(op, p0[0], p0[1])
    b = operand(op, p1[0], p1[1])
    builder = same_builder(op, [(p0[0], a), (p1[0], b)])
    out = _result_shape(op, shape)
    result = rng_shape(op, dist, (p0[0], a.shape), (p1[0], b.shape), out)
    dims = Constant(builder, np.asarray(out.dimensions(), dtype=np.int64))
    return builder.add_op(RNG, (a, b, dims), result, {"rng_distribution": dist})


def RngUniform(a: XlaOp, b: XlaOp, shape: Shape) -> XlaOp:
    """Uniform random numbers in ``[a, b)`` (XLA ``RngUniform``; ``stablehlo.rng`` UNIFORM).

    The legacy stateful generator: its seed is implementation-defined (XLA keeps a per-module
    state), so values may differ between runs and compilations. For reproducible streams use
    :func:`RngBitGenerator`. Results for ``b <= a`` are implementation-defined.

    Parameters
    ----------
    a, b: scalars of one floating-point or integer element type (the bounds).
    shape: the output :class:`~xlasdk.Shape`, of the same element type as ``a``.

    Returns
    -------
    XlaOp of ``shape``.

    Raises
    ------
    ShapeError: ``a`` or ``b`` is not a scalar, or ``shape`` is not an array shape.
    DTypeError: element types differ or are not numeric (pred, complex and 2/4-bit types are
        rejected), or ``shape`` is not a Shape.
    """
    return _rng("RngUniform", RandomDistribution.UNIFORM, ("a", a), ("b", b), shape)


def RngNormal(mu: XlaOp, sigma: XlaOp, shape: Shape) -> XlaOp:
    """Normally distributed random numbers with mean ``mu`` and standard deviation ``sigma``
    (XLA ``RngNormal``; ``stablehlo.rng`` NORMAL).

    The legacy stateful generator (see :func:`RngUniform` on seeding).

    Parameters
    ----------
    mu, sigma: floating-point scalars of one element type.
    shape: the output :class:`~xlasdk.Shape`, of the same element type.

    Returns
    -------
    XlaOp of ``shape``.

    Raises
    ------
    ShapeError: ``mu`` or ``sigma`` is not a scalar, or ``shape`` is not an array shape.
    DTypeError: element types differ or are not floating-point, or ``shape`` is not a Shape.
    """
    return _rng("RngNormal", RandomDistribution.NORMAL, ("mu", mu), ("sigma", sigma), shape)
