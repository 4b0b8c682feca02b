"""Combining many updates into an array at once, in their order, as the exact paths of scatter and
select_and_scatter combine them one by one (:func:`~xlasdk.reference._walk.combiner`: the
combiner computed in the wide type, the result rounded to the operand's type after each update).

numpy's unbuffered ``ufunc.at`` applies the updates in the order given, in the operand's own type.
That is the exact path's value, bit for bit, where one operation in the narrow type is the wide
operation rounded once: add and multiply of float16, float32 and float64 (the exact result of an
add or a multiply of two such values rounds the same from float64 as in the type: float64 has more
than twice their precision, plus two bits), minimum and maximum of float32 and float64 (numpy's
float16 loops pick the other signed zero of a tie than its float64 ones), add of complex numbers
(component by component), and every integer and boolean one (the exact path computes those in
the type too). A plain assignment (the combiner returns the update) keeps each
position's last update. Other element types (bfloat16, float8) and combiners keep the exact path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..builder import Region
from ._walk import numpy_reducer

__all__: list[str] = []

_ADD_MUL = frozenset({np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)})
_MIN_MAX = frozenset({np.dtype(np.float32), np.dtype(np.float64)})
_COMPLEX = frozenset({np.dtype(np.complex64), np.dtype(np.complex128)})

REPLACE = "replace"


def combiner_at(r: Region, dtype: np.dtype[Any]) -> Any:
    """numpy's ufunc that combines updates of ``dtype`` as region ``r`` does, :data:`REPLACE` for
    a plain assignment, or None (the exact path)."""
    if len(r.results) != 1 or len(r.params) != 2:
        return None
    if r.results[0] is r.params[1]:
        return REPLACE
    fn = numpy_reducer(r, dtype)
    if fn is None:
        return None
    if dtype.kind in "iub":
        return fn
    if dtype in _ADD_MUL and fn in (np.add, np.multiply) or dtype in _MIN_MAX and fn in (np.maximum, np.minimum):
        return fn
    if dtype in _COMPLEX and fn is np.add:
        return fn
    return None


def apply_at(target: np.ndarray[Any, Any], flat_index: np.ndarray[Any, Any], values: np.ndarray[Any, Any],
             fn: Any) -> None:
    """Combine ``values`` into ``target`` (C-contiguous, written in place) at ``flat_index`` (its
    flat positions), in that order: ``fn`` from :func:`combiner_at`."""
    flat = target.reshape(-1)
    if flat_index.size == 0:
        return
    if fn is REPLACE:  # the last update of each position: the first one seen from the end
        rev = flat_index[::-1]
        _, first = np.unique(rev, return_index=True)
        flat[rev[first]] = values[::-1][first]
        return
    with np.errstate(all="ignore"):
        fn.at(flat, flat_index, values)
