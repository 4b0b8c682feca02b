"""A reference evaluator for XLA programs, and comparing a device's results against it.

:func:`evaluate` runs a computation (built or loaded) op by op in numpy, on its instruction graph
(:meth:`XlaComputation.instructions <xlasdk.XlaComputation.instructions>`); :func:`compare` runs it
on a device and against the reference (or another device, or recorded outputs), its settings one
record (:class:`CompareSettings`), and reports per output (:class:`CompareReport`);
:mod:`xlasdk.reference.bisect` finds where a divergence comes from. The evaluator's core (the walk,
values, error bounds, the comparison) is :mod:`xlasdk.reference._evaluator`; the evaluation rules
sit in one module per op family, mirroring :mod:`xlasdk.ops` (``reference/indexing.py`` holds the
rules of ``ops/indexing.py``'s gather, scatter and dynamic slices), each rule bound to its row of
the op table (:attr:`OpDef.evaluate <xlasdk._optable.OpDef.evaluate>`). They are imported below,
which binds their rules.
"""

from __future__ import annotations

# the family modules: importing each binds its rules to the op table's rows
from . import collectives as collectives
from . import control as control
from . import conv as conv
from . import convert as convert
from . import custom_call as custom_call
from . import elementwise as elementwise
from . import fft as fft
from . import fma as fma
from . import indexing as indexing
from . import linalg as linalg
from . import reduce as reduce
from . import rng as rng
from . import shaping as shaping
from . import side_effects as side_effects
from . import sort as sort
from . import sources as sources
from . import window as window
from ._compare import compare
from ._evaluator import (
    CUSTOM_CALL_RULES,
    OPAQUE_RULES,
    REFUSED,
    RULES,
    CompareReport,
    OutputComparison,
    UnsupportedOpError,
    default_tolerance,
    evaluate,
)
from ._outputs import compare_outputs
from ._settings import CompareSettings

__all__ = ["evaluate", "compare", "compare_outputs", "CompareSettings", "CompareReport", "OutputComparison",
           "UnsupportedOpError",
           "RULES", "REFUSED", "CUSTOM_CALL_RULES", "OPAQUE_RULES", "default_tolerance",
           "collectives", "control", "conv", "convert", "custom_call", "elementwise", "fft", "indexing", "linalg",
           "reduce", "rng", "shaping", "side_effects", "sort", "sources", "window"]
