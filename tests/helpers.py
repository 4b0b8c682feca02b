"""Test helpers: run a computation on the CPU and get numpy results."""

from __future__ import annotations

from typing import Any

import numpy as np

import xlasdk as xs


def run(comp: xs.XlaComputation, *args: Any) -> list[np.ndarray[Any, Any]]:
    """Compile ``comp`` for cpu:0, run it on ``args`` and return every output as numpy."""
    out = xs.compile(comp, device="cpu:0")(*(np.asarray(a) for a in args))
    outs = out if isinstance(out, tuple) else (out,)
    return [o.to_numpy() for o in outs]
