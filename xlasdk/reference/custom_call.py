"""Evaluation rule of :mod:`xlasdk.ops.custom_call`: a custom call is evaluated by its target's rule
(:data:`~xlasdk.reference.CUSTOM_CALL_RULES`, by ``call_target_name``: the LAPACK calls in
:mod:`xlasdk.reference.linalg`, ``TopK`` in :mod:`xlasdk.reference.sort`; XLA:TPU's ``Cholesky``,
``InvertDiagBlocks{Lower,Upper}Triangular`` and ``GatherScatterIndicesBitpacked`` here, whose CPU meaning
:mod:`xlasdk.formats.tpu_meaning` also writes in HLO); a sharding annotation is the value itself on one
device; any other target raises :class:`UnsupportedOpError` naming it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._optable import evaluates
from ..builder import XlaOp
from ..ops.custom_call import CUSTOM_CALL
from ._walk import CUSTOM_CALL_RULES, Evaluator, Value, as_output, dtype_of

__all__: list[str] = []


#: custom calls that only annotate a value's sharding (JAX's ``jax.lax.with_sharding_constraint``,
#: typed PRNG keys, shard_map's shape changes, Shardy's marks of a function's result sharding in the
#: HLO of a Shardy-partitioned program): on one device, where the shape stays, the value itself
_SHARDING_MARKERS = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",
                               "xla.sdy.FuncResultSharding"})


@evaluates(CUSTOM_CALL)
def _custom_call(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    target = ev.attr(o, "call_target_name", "?")
    if isinstance(target, (bytes, bytearray)):  # a built op's target (a loaded one's is text)
        target = target.decode("utf-8", "replace")
    rule = CUSTOM_CALL_RULES.get(target)
    if rule is not None:
        return rule(o, a, ev)
    if target in _SHARDING_MARKERS and len(a) == 1 and not o.shape.is_tuple() \
            and np.shape(a[0]) == tuple(o.shape.dimensions()) and np.asarray(a[0]).dtype == dtype_of(o.shape):
        return a[0]  # a sharding annotation: the value itself on one device (a shape change is refused below)
    raise ev.fail(o, f"to {target!r} has no evaluation rule yet (the reference evaluator cannot check this program)")


# -- XLA:TPU's custom calls of its optimized modules (xlasdk.formats.tpu_meaning gives their CPU meaning) --
def _square_f32(o: XlaOp, a: list[Value], ev: Evaluator, target: str) -> np.ndarray[Any, Any]:
    """The one operand of ``target``: an f32 array of square matrices of the result's shape (else refused)."""
    x = np.asarray(a[0]) if len(a) == 1 else None
    if (x is None or o.shape.is_tuple() or x.dtype != np.float32 or x.ndim < 2 or x.shape[-1] != x.shape[-2]
            or x.shape != tuple(o.shape.dimensions())):
        got = ", ".join(f"{np.asarray(v).dtype}{list(np.shape(v))}" for v in a)
        raise ev.fail(o, f"to {target!r} with operands ({got}) -> {o.shape} has no evaluation rule (xlasdk knows it "
                         "for one f32 array of square matrices of the result's shape, as XLA:TPU writes it)")
    return x


def _tpu_cholesky(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """XLA:TPU's ``Cholesky``: the lower Cholesky factor of each matrix whose lower triangle is the
    operand's, in float64; NaN for a matrix that is not positive definite; the other triangle, which
    XLA:TPU leaves unspecified and its modules never read, NaN. A matrix positive definite only within
    f32 rounding has no reference value (refused rather than guessed)."""
    x = _square_f32(o, a, ev, "Cholesky").astype(np.float64)
    n = x.shape[-1]
    flat = x.reshape((-1, n, n))
    out = np.full(flat.shape, np.nan)
    eps = float(np.finfo(np.float32).eps)
    for k, m in enumerate(flat):
        low = np.tril(m)
        h = low + np.tril(m, -1).T
        if not np.all(np.isfinite(h)):
            continue
        scale = float(np.max(np.abs(np.diagonal(h)), initial=0.0))
        with np.errstate(all="ignore"):
            w = np.linalg.eigvalsh(h)
        if abs(float(np.min(w, initial=np.inf))) <= 64.0 * n * eps * scale:
            raise ev.fail(o, f"to 'Cholesky' of a matrix (batch element {k}) positive definite only within f32 "
                             "rounding has no reference value (XLA:TPU may give its factor or NaN)")
        if float(np.min(w, initial=np.inf)) > 0:
            out[k] = np.where(np.tri(n, dtype=bool), np.linalg.cholesky(h), np.nan)
    return as_output(out.reshape(x.shape), o.shape)


def _tpu_invert_diag_blocks(lower: bool) -> Any:
    target = f"InvertDiagBlocks{'Lower' if lower else 'Upper'}Triangular"

    def rule(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
        """The inverse of each ``lower`` (upper) triangular matrix ``[..., k, k]`` of the operand (its other
        triangle not read), in float64 by substitution (a zero on the diagonal gives inf/NaN)."""
        x = _square_f32(o, a, ev, target).astype(np.float64)
        t = np.tril(x) if lower else np.triu(x)
        n = x.shape[-1]
        inv = np.zeros(x.shape)
        eye = np.broadcast_to(np.eye(n), x.shape)
        order = range(n) if lower else range(n - 1, -1, -1)
        with np.errstate(all="ignore"):
            for i in order:
                acc = eye[..., i, :] - np.einsum("...k,...kj->...j", t[..., i, :], inv)
                inv[..., i, :] = acc / t[..., i, i][..., None]
        return as_output(inv, o.shape)

    return rule


def _tpu_index_mark(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """XLA:TPU's ``GatherScatterIndicesBitpacked``: its operand (integer indices of the result's shape)."""
    x = np.asarray(a[0]) if len(a) == 1 else None
    if x is None or o.shape.is_tuple() or x.dtype.kind not in "iu" or x.dtype != dtype_of(o.shape) \
            or x.shape != tuple(o.shape.dimensions()):
        raise ev.fail(o, "to 'GatherScatterIndicesBitpacked' has an evaluation rule for one integer operand of the "
                         "result's shape only")
    return x


CUSTOM_CALL_RULES["Cholesky"] = _tpu_cholesky
CUSTOM_CALL_RULES["InvertDiagBlocksLowerTriangular"] = _tpu_invert_diag_blocks(True)
CUSTOM_CALL_RULES["InvertDiagBlocksUpperTriangular"] = _tpu_invert_diag_blocks(False)
CUSTOM_CALL_RULES["GatherScatterIndicesBitpacked"] = _tpu_index_mark
