"""Evaluation rule of :mod:`xlasdk.ops.fft`: FFT, IFFT, RFFT and IRFFT through ``numpy.fft`` in
complex128, rounded once to the result's type.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._optable import evaluates
from ..attrs import FftType
from ..builder import XlaOp
from ..ops.fft import FFT
from ._walk import Evaluator, Value, as_output, widened

__all__: list[str] = []


@evaluates(FFT)
def _fft(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """FFT / IFFT / RFFT / IRFFT over the last ``len(fft_length)`` dimensions, in complex128
    (numpy.fft), rounded once to the result type."""
    kind = ev.attr(o, "fft_type", FftType.FFT).name
    lengths: list[int] = list(ev.attr(o, "fft_length", ()))
    axes = tuple(range(-len(lengths), 0))
    x = widened(a[0])
    y: np.ndarray[Any, Any]
    with np.errstate(all="ignore"):
        if kind == "FFT":
            y = np.fft.fftn(x, axes=axes)
        elif kind == "IFFT":
            y = np.fft.ifftn(x, axes=axes)
        elif kind == "RFFT":
            y = np.fft.rfftn(x, s=lengths, axes=axes)
        elif kind == "IRFFT":
            y = np.fft.irfftn(x, s=lengths, axes=axes)
        else:
            raise ev.fail(o, f"of type {kind} has no evaluation rule")
    return as_output(y, o.shape)
