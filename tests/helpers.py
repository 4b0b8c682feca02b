"""Test helpers: run a computation on the CPU and get numpy results."""

from __future__ import annotations

from typing import Any

import numpy as np

import xlasdk as xs


def run(comp: xs.XlaComputation, *args: Any) -> list[np.ndarray[Any, Any]]:
    """Compile ``comp`` for cpu:0, run it on ``args`` and return every output as numpy."""
    from xlasdk._jaxlib import pjrt_testing

    return pjrt_testing.run(comp, *args)
