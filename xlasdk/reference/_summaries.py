"""Per-value summaries and a histogram of per-value scores, as XLA's comparison tool gives them for
the tensors it compares (issue 42), on any device: for each compared value its minimum, maximum,
mean and a checksum on each side (:class:`ValueSummary`), and how many values fall in each decade of
score (:func:`score_histogram`; a value's score is its largest error over its largest magnitude,
:attr:`~._report.OutputComparison.max_scaled`).

The checksum is the CRC-32 of the value's bytes (row-major, its element type's own bytes), written
as 8 hex digits: two values have the same one when they are (almost surely) bit-identical, whatever
their element type. Min, max and mean are over the finite elements, in float64 (complex: of the
magnitudes); ``nonfinite`` counts the others.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._walk import widened

__all__ = ["ValueSummary", "summarize", "score_histogram", "SCORE_BUCKETS"]


@dataclass(frozen=True)
class ValueSummary:
    """One value's summary (see the module's docstring)."""

    min: float
    max: float
    mean: float
    checksum: str
    nonfinite: int

    def as_dict(self) -> dict[str, Any]:
        return {"min": _json(self.min), "max": _json(self.max), "mean": _json(self.mean), "checksum": self.checksum,
                "nonfinite": self.nonfinite}

    def __str__(self) -> str:
        return f"min {self.min:.6g} max {self.max:.6g} mean {self.mean:.6g} crc32 {self.checksum}" + (
            f" ({self.nonfinite} NaN/Inf)" if self.nonfinite else "")


def _json(x: float) -> float | None:
    return x if math.isfinite(x) else None  # JSON has no NaN (a value with no finite element)


def summarize(value: Any) -> ValueSummary:
    """The summary of one array (numpy, or anything ``np.asarray`` reads; ml_dtypes' bf16 and fp8 too)."""
    a = np.ascontiguousarray(np.asarray(value))
    crc = f"{zlib.crc32(a.tobytes()) & 0xFFFFFFFF:08x}"
    if a.dtype.kind == "c":
        x = np.abs(a.astype(np.complex128))
    elif a.dtype.kind == "b":
        x = a.astype(np.float64)
    else:
        x = np.asarray(widened(a)).astype(np.float64)
    with np.errstate(all="ignore"):
        fin = np.isfinite(x)
        n = int(np.count_nonzero(fin))
        if n == 0:
            return ValueSummary(math.nan, math.nan, math.nan, crc, int(x.size))
        v = x[fin]
        return ValueSummary(float(v.min()), float(v.max()), float(v.mean()), crc, int(x.size - n))


#: The histogram's buckets, by score: bit-identical, then decades up to 1e-1, then at least that;
#: a value with a NaN/Inf where the other side has another value counts as ``"nonfinite"``.
SCORE_BUCKETS: tuple[str, ...] = ("identical", "<1e-7", "1e-7..1e-6", "1e-6..1e-5", "1e-5..1e-4", "1e-4..1e-3",
                                  "1e-3..1e-2", "1e-2..1e-1", ">=1e-1", "nonfinite")


def bucket(score: float, nonfinite: bool = False) -> str:
    """The bucket of one score (see :data:`SCORE_BUCKETS`)."""
    if nonfinite or math.isnan(score):
        return "nonfinite"
    if score == 0:
        return "identical"
    if score >= 0.1:
        return ">=1e-1"
    if score < 1e-7:
        return "<1e-7"
    e = math.floor(math.log10(score))  # -7 .. -2
    return f"1e{e}..1e{e + 1}"


def score_histogram(scores: Iterable[tuple[float, bool]]) -> dict[str, int]:
    """How many ``(score, has a NaN/Inf mismatch)`` pairs fall in each bucket, every bucket listed."""
    out = dict.fromkeys(SCORE_BUCKETS, 0)
    for s, nf in scores:
        out[bucket(s, nf)] += 1
    return out


def histogram_line(hist: dict[str, int]) -> str:
    """The histogram in one line, its non-empty buckets: ``identical 3, 1e-7..1e-6 1``."""
    return ", ".join(f"{k} {v}" for k, v in hist.items() if v) or "no values"
