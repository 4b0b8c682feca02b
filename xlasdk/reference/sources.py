"""Evaluation rules of :mod:`xlasdk.ops.sources`: constant (a complex literal the attribute reader
does not read is read here from its spelling) and iota.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .._mlir_attrs import DenseElements
from .._optable import evaluates
from ..builder import XlaOp
from ..ops.sources import CONSTANT, IOTA
from ._walk import Evaluator, UnsupportedOpError, Value, as_output

__all__: list[str] = []


@evaluates(IOTA)
def _iota(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    d = int(ev.attr(o, "iota_dimension"))
    dims = o.shape.dimensions()
    idx = np.arange(dims[d]).reshape([-1 if k == d else 1 for k in range(len(dims))])
    return as_output(np.broadcast_to(idx, dims), o.shape)


# -- complex constants (jnp.linalg.eig's NaN fill): the literal spelled (re, im) ----------------------------------
_PAIR = re.compile(r"\(\s*([^,()\s]+)\s*,\s*([^,()\s]+)\s*\)")


def _part(text: str, real: np.dtype[Any]) -> float:
    """One part of a complex literal: a decimal number, or a hexadecimal bit pattern of ``real``."""
    if text.lower().startswith("0x"):
        bits = int(text, 16)
        return float(np.array(bits, np.uint64).astype(np.dtype(f"u{real.itemsize}")).view(real))
    return float(text)


@evaluates(CONSTANT)
def _constant(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """The constant's elements (:class:`~xlasdk._mlir_attrs.DenseElements`); a complex literal the
    attribute reader does not read (``dense<(re,im)>``, or a list of such pairs, one per element) is
    read here from its spelling. Any other literal it does not read (a hexadecimal blob, ``i4``)
    raises :class:`UnsupportedOpError`."""
    try:
        v: DenseElements | None = ev.attr(o, "value")
    except UnsupportedOpError:  # a literal the reader of its kind does not read
        v = None
    if v is not None:
        return as_output(v.value(), o.shape)
    dt = np.dtype(o.shape.numpy_dtype()) if o.shape.is_array() else None
    if dt is None or dt.kind != "c":
        raise ev.fail(o, f"of element type {o.shape.element_type().name} (its literal is not readable here)")
    text = str(getattr(o.attrs.get("value"), "text", "")).split(":")[0]
    real = np.dtype(np.float32 if dt.itemsize == 8 else np.float64)
    pairs = _PAIR.findall(text)
    dims = tuple(o.shape.dimensions())
    size = int(np.prod(dims, dtype=np.int64))
    if not text.strip().startswith("dense<") or len(pairs) not in (1, size) or "0x" in text.replace(
            "(0x", "").replace(",0x", "").replace(", 0x", ""):
        raise ev.fail(o, f"of element type {o.shape.element_type().name} spelled {text[:60]!r} (its literal is not "
                         "readable here: expected dense<(re,im)> pairs)")
    vals = np.array([complex(_part(r, real), _part(i, real)) for r, i in pairs], np.complex128)
    return as_output(np.broadcast_to(vals[0], dims) if len(pairs) == 1 else vals.reshape(dims), o.shape)
