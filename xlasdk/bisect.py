"""Where a divergence comes from: the bisections of :mod:`xlasdk.reference.bisect` (their home
since they joined the reference evaluator's package), under the name they had before."""

from __future__ import annotations

from .reference.bisect import (
    BISECT_MODES,
    ERROR_CLASSES,
    Culprit,
    NonFinite,
    NonFiniteSource,
    OpError,
    OpsBisection,
    PassBisection,
    bisect_ops,
    bisect_passes,
    find_nonfinite,
    html_report,
    local_divergences,
    pass_names,
)

__all__ = ["Culprit", "OpsBisection", "PassBisection", "NonFinite", "NonFiniteSource", "bisect_ops",
           "bisect_passes", "find_nonfinite", "local_divergences", "pass_names", "html_report", "BISECT_MODES",
           "OpError", "ERROR_CLASSES"]
