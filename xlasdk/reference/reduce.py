"""Evaluation rules of :mod:`xlasdk.ops.reduce`: reduce (numpy's reduction for the usual reducers,
else the region folded on whole slices) and map. The batch norms of that family are computed with
the linear algebra, in :mod:`xlasdk.reference.linalg`.
"""

from __future__ import annotations

import numpy as np

from .._optable import evaluates
from ..builder import XlaOp
from ..ops.reduce import MAP, REDUCE
from ._walk import Evaluator, Value, as_output, check_elementwise, numpy_reducer, result_shapes, results_of, widened

__all__: list[str] = []


@evaluates(MAP)
def _map(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """The region applied element by element (all elements at once: it must be element-wise)."""
    (body,) = o.regions
    check_elementwise(body, o, ev)
    return results_of(o, ev.region(body, list(a)))


@evaluates(REDUCE)
def _reduce(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    n = len(a) // 2
    xs, inits = a[:n], a[n:]
    dims = tuple(sorted(ev.attr(o, "dimensions")))
    (body,) = o.regions
    shapes = result_shapes(o)
    fn = numpy_reducer(body, xs[0].dtype) if n == 1 else None
    if fn is not None:  # one of the usual reducers: numpy's reduction in the wide type
        with np.errstate(all="ignore"):
            if xs[0].dtype.kind in "iub":
                acc = fn.reduce(xs[0], axis=dims, dtype=xs[0].dtype) if xs[0].size else None
            else:
                acc = fn.reduce(widened(xs[0]), axis=dims) if xs[0].size else None
            init = inits[0]
            res = fn(widened(init), acc) if acc is not None else np.broadcast_to(init, shapes[0].dimensions())
        return as_output(res, shapes[0])
    # any other reducer: folded element by element along the reduced dimensions, the region run
    # on whole slices at once; only element-wise regions can run that way
    check_elementwise(body, o, ev)
    moved = [np.moveaxis(x, dims, tuple(range(len(dims)))).reshape((-1,) + tuple(
        s for k, s in enumerate(x.shape) if k not in dims)) for x in xs]
    acc_vals = [np.broadcast_to(i, m.shape[1:]).copy() for i, m in zip(inits, moved, strict=True)]
    for k in range(moved[0].shape[0]):
        outs = ev.region(body, [*acc_vals, *(m[k] for m in moved)])
        acc_vals = [np.asarray(v) for v in outs]
    return results_of(o, [as_output(v, sh) for v, sh in zip(acc_vals, shapes, strict=True)])
