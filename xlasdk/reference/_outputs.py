"""Comparing outputs already computed with expected ones (:func:`compare_outputs`): per output the
largest absolute, relative and ulp error, the elements outside the tolerance and the first of them.
(Running a program on a device and comparing its outputs is :func:`._runners.run_against`.)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._numbers import tolerances
from ._report import CompareReport, compare_one
from ._runners import both_models, given_outputs

__all__ = ["compare_outputs", "both_models"]


def compare_outputs(
    got: Sequence[Any],
    want: Sequence[Any],
    *,
    name: str = "outputs",
    against: str = "expected outputs",
    rtol: float | None = None,
    atol: float | None = None,
    scales: Sequence[Any] | None = None,
) -> CompareReport:
    """Compare outputs already computed (``got``) with expected ones (``want``, e.g. a snapshot's
    recorded result or another run's ``--output``), element by element with :func:`compare`'s
    rule and default tolerances (the magnitude of each output stands for the terms of the op that
    made it, which are unknown here). ``scales``: per output, the error bounds of the devices'
    models (:func:`both_models`), as ``xlasdk run --expect OUT.npz --expect-device-kind KIND`` gives them.

    Raises
    ------
    ToleranceError
        A tolerance that is not a finite number >= 0 (a ShapeError).
    CompareArgumentError
        Another number of outputs, or an output of another shape or element type (raw-byte arrays
        of the element's size, as numpy saves bf16, are read as the output's type).
    """
    rtol, atol, _ = tolerances("compare", rtol, atol)
    g_list = [np.asarray(g) for g in got]
    w_list = given_outputs(g_list, want, against)
    sc = list(scales) if scales is not None and len(scales) == len(g_list) else [0.0] * len(g_list)
    return CompareReport(name, against, [compare_one(i, g, w, rtol, atol, s)
                                         for i, (g, w, s) in enumerate(zip(g_list, w_list, sc, strict=True))])

