"""Fast Fourier transforms: ``Fft`` (XLA ``Fft``; ``stablehlo.fft``) with its shape rule."""

from __future__ import annotations

from collections.abc import Sequence

from .._optable import AttrKind, braces, define
from ..attrs import FftType
from ..builder import XlaOp
from ..types import PrimitiveType
from ._core import array_shape, dtype_error, enum_arg, int_list, shape_error
from ._core import operand as _operand

__all__ = ["Fft"]

_P = PrimitiveType

_TO_COMPLEX = {_P.F32: _P.C64, _P.F64: _P.C128}
_TO_REAL = {_P.C64: _P.F32, _P.C128: _P.F64}


def fft_shape(
    op: str, et: PrimitiveType, dims: tuple[int, ...], kind: FftType, lengths: tuple[int, ...]
) -> tuple[PrimitiveType, tuple[int, ...]]:
    """Shape rule of ``Fft``: the result element type and dimensions.

    The transform runs over the last ``len(lengths)`` dimensions (1 to 3). FFT/IFFT keep the
    complex shape; RFFT takes f32/f64 whose last dimensions equal ``lengths`` and gives
    c64/c128 with the last dimension ``lengths[-1] // 2 + 1``; IRFFT takes c64/c128 whose last
    dimensions equal ``lengths`` except the last, which is ``lengths[-1] // 2 + 1``, and gives
    f32/f64 with the last dimension ``lengths[-1]``.
    """
    n = len(lengths)
    if not 1 <= n <= 3:
        shape_error(op, f"fft_lengths must have 1 to 3 entries, got {list(lengths)}")
    if any(v < 1 for v in lengths):
        shape_error(op, f"fft_lengths must be >= 1, got {list(lengths)}")
    if len(dims) < n:
        shape_error(op, f"operand 'operand' of rank {len(dims)} has fewer dimensions than fft_lengths {list(lengths)}")
    lead, last = dims[: len(dims) - n], dims[len(dims) - n:]
    name = et.name.lower()
    if kind in (FftType.FFT, FftType.IFFT):
        if et not in _TO_REAL:
            dtype_error(op, f"{kind.name} needs a complex operand (c64 or c128), got {name}")
        expected = lengths
        out_et, out_last = et, lengths
    elif kind is FftType.RFFT:
        if et not in _TO_COMPLEX:
            dtype_error(op, f"RFFT needs a real operand (f32 or f64), got {name}")
        expected = lengths
        out_et, out_last = _TO_COMPLEX[et], lengths[:-1] + (lengths[-1] // 2 + 1,)
    else:
        if et not in _TO_REAL:
            dtype_error(op, f"IRFFT needs a complex operand (c64 or c128), got {name}")
        expected = lengths[:-1] + (lengths[-1] // 2 + 1,)
        out_et, out_last = _TO_REAL[et], lengths
    if last != expected:
        shape_error(
            op, f"operand 'operand' has trailing dimensions {list(last)}, but {kind.name} with fft_lengths "
            f"{list(lengths)} needs {list(expected)}"
        )
    return out_et, lead + out_last


FFT = define(
    "stablehlo.fft", "fft",
    hlo_attrs=lambda o: f", fft_type={o.attrs['fft_type'].to_hlo()}, fft_length={braces(o.attrs['fft_length'])}",
    rule=fft_shape, attrs={"fft_type": AttrKind.FFT_TYPE, "fft_length": AttrKind.INTS},
)


def Fft(operand: XlaOp, fft_type: FftType | str | int, fft_length: Sequence[int]) -> XlaOp:
    """Discrete Fourier transform over the last 1 to 3 dimensions (XLA ``Fft``; ``stablehlo.fft``).

    FFT is the forward complex transform (``numpy.fft.fftn`` over those axes), IFFT its inverse
    (scaled by ``1/prod(fft_lengths)``, like ``numpy.fft.ifftn``), RFFT the forward transform of
    a real array keeping the ``n // 2 + 1`` non-negative frequencies of the last axis
    (``numpy.fft.rfftn``), IRFFT the inverse of RFFT (``numpy.fft.irfftn``; the imaginary parts
    of the zero and, for even ``n``, Nyquist frequencies are ignored).

    Parameters
    ----------
    operand: ``(..., *fft_lengths)`` c64/c128 for FFT and IFFT; ``(..., *fft_lengths)`` f32/f64
        for RFFT; ``(..., l0, .., n // 2 + 1)`` c64/c128 for IRFFT where ``n = fft_lengths[-1]``.
    fft_type: ``xs.FftType`` (FFT, IFFT, RFFT, IRFFT), or its name or number.
    fft_length: 1 to 3 lengths (>= 1), the sizes of the transformed dimensions (``fft_lengths`` below).

    Returns
    -------
    XlaOp: FFT/IFFT the operand's shape; RFFT ``(..., l0, .., n // 2 + 1)`` of c64/c128;
    IRFFT ``(..., l0, .., n)`` of f32/f64.

    Raises
    ------
    ShapeError: unknown fft_type, 0 or more than 3 lengths, a length < 1, an operand of too low
        rank, or trailing dimensions that do not match ``fft_lengths`` as above.
    DTypeError: a real operand for FFT/IFFT/IRFFT, a complex or non-f32/f64 one for RFFT.
    """
    op = "Fft"
    x = _operand(op, "operand", operand)
    kind = enum_arg(op, FftType, fft_type, "bad fft_type: ")
    lengths = int_list(op, "fft_lengths", fft_length)
    et, dims = fft_shape(op, x.shape.element_type(), x.shape.dimensions(), kind, lengths)
    return x.builder.add_op(FFT, (x,), array_shape(et, dims, op), {"fft_type": kind, "fft_length": lengths})
