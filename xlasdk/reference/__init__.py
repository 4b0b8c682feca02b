"""A reference evaluator for XLA programs, and comparing a device's results against it.

:func:`evaluate` runs a computation (built or loaded) op by op in numpy, on its instruction graph
(:meth:`XlaComputation.instructions <xlasdk.XlaComputation.instructions>`); :func:`compare` runs
it on a device and against the reference (or another device, or recorded outputs) and reports per
output (:class:`CompareReport`); :mod:`xlasdk.reference.bisect` finds where a divergence comes
from. The evaluator and its rules are in :mod:`xlasdk.reference._evaluator`; families with rules
of their own have a module here (:mod:`~xlasdk.reference.linalg`, :mod:`~xlasdk.reference.rng`,
:mod:`~xlasdk.reference.collectives`), imported below so that their rules are registered.
"""

from __future__ import annotations

from . import collectives as collectives  # its rules register in RULES
from . import linalg as linalg  # the linear algebra rules: Cholesky, batch norm, LAPACK calls
from . import rng as rng  # its rules register in RULES
from ._compare import compare
from ._evaluator import (
    CUSTOM_CALL_RULES,
    REFUSED,
    RULES,
    CompareReport,
    OutputComparison,
    UnsupportedOpError,
    default_tolerance,
    evaluate,
)
from ._outputs import compare_outputs

__all__ = ["evaluate", "compare", "compare_outputs", "CompareReport", "OutputComparison", "UnsupportedOpError",
           "RULES", "REFUSED", "CUSTOM_CALL_RULES", "default_tolerance", "collectives", "linalg", "rng"]
