"""Evaluation rule of :mod:`xlasdk.ops.custom_call`: a custom call is evaluated by its target's rule
(:data:`~xlasdk.reference.CUSTOM_CALL_RULES`, by ``call_target_name``: the LAPACK calls in
:mod:`xlasdk.reference.linalg`, ``TopK`` in :mod:`xlasdk.reference.sort`); a sharding annotation is
the value itself on one device; any other target raises :class:`UnsupportedOpError` naming it.
"""

from __future__ import annotations

import numpy as np

from .._optable import evaluates
from ..builder import XlaOp
from ..ops.custom_call import CUSTOM_CALL
from ._walk import CUSTOM_CALL_RULES, Evaluator, Value, dtype_of

__all__: list[str] = []


#: custom calls that only annotate a value's sharding (JAX's ``jax.lax.with_sharding_constraint``,
#: typed PRNG keys, shard_map's shape changes, Shardy's marks of a function's result sharding in the
#: HLO of a Shardy-partitioned program): on one device, where the shape stays, the value itself
_SHARDING_MARKERS = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",
                               "xla.sdy.FuncResultSharding"})


@evaluates(CUSTOM_CALL)
def _custom_call(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    target = ev.attr(o, "call_target_name", "?")
    rule = CUSTOM_CALL_RULES.get(target)
    if rule is not None:
        return rule(o, a, ev)
    if target in _SHARDING_MARKERS and len(a) == 1 and not o.shape.is_tuple() \
            and np.shape(a[0]) == tuple(o.shape.dimensions()) and np.asarray(a[0]).dtype == dtype_of(o.shape):
        return a[0]  # a sharding annotation: the value itself on one device (a shape change is refused below)
    raise ev.fail(o, f"to {target!r} has no evaluation rule yet (the reference evaluator cannot check this program)")
