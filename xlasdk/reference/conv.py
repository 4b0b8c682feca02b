"""Evaluation rule of :mod:`xlasdk.ops.conv`: convolution, with feature groups, with
``batch_group_count`` (the weight gradient of a grouped convolution) and with window reversal (the
kernel flipped along the flagged spatial dimensions: what XLA's CPU compiler writes for the
gradient of a transposed convolution), in float64 (integers in 64 bits, wrapped to the result type)
through ``numpy.einsum`` over the windows, any number of spatial dimensions; a window larger than
the padded input gives the empty result.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._mlir_attrs import I64Elements
from .._optable import evaluates
from ..attrs import ConvolutionDimensionNumbers
from ..builder import XlaOp
from ..ops.conv import CONVOLUTION
from ._walk import Evaluator, Value, as_output, widened
from .window import _dilate_pad, _windows

__all__: list[str] = []

#: the most spatial dimensions numpy's view of the windows holds: it has 4 + 2 * spatial dimensions
#: (each of the input's, then each of the window's), and numpy 2 holds 64 (numpy 1: 32)
_MAX_SPATIAL = ((64 if np.lib.NumpyVersion(np.__version__) >= "2.0.0" else 32) - 4) // 2


def _window_reversal(o: XlaOp, ev: Evaluator, nsp: int) -> tuple[bool, ...]:
    """The convolution's ``window_reversal`` flags, one per spatial dimension (none: all false).
    The builder never writes the attribute (``ConvGeneralDilated(window_reversal=)`` reverses the
    kernel with an op of its own); a loaded module's (``array<i1: ...>``, HLO's ``rhs_reversal=``)
    is read as the MLIR bindings read it."""
    flags = ev.attr(o, "window_reversal", ())
    if not isinstance(flags, tuple) or any(type(f) is not bool for f in flags) or len(flags) not in (0, nsp):
        raise ev.fail(o, f"with a window_reversal that is not {nsp} booleans (got {flags!r:.80})")
    return flags or (False,) * nsp


def _wide(v: Value) -> np.ndarray[Any, Any]:
    """An operand as the rule computes it: floats in float64, complex in complex128, integers in
    64 bits (their products and sums wrap to the result type as XLA's narrower ones do)."""
    w = widened(np.asarray(v))
    return w.astype(np.int64) if w.dtype.kind in "iub" else w


def _feature_grouped(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    x, w = a
    dn: ConvolutionDimensionNumbers = ev.attr(o, "dimension_numbers")
    if ev.attr(o, "batch_group_count", 1) != 1:
        raise ev.fail(o, "with batch_group_count > 1")
    groups: int = ev.attr(o, "feature_group_count", 1)
    sp_in, sp_k, sp_out = (tuple(dn.input_spatial_dimensions), tuple(dn.kernel_spatial_dimensions),
                           tuple(dn.output_spatial_dimensions))
    nsp = len(sp_in)
    if nsp > _MAX_SPATIAL:
        raise ev.fail(o, f"with {nsp} spatial dimensions (numpy's view of its windows holds at most {_MAX_SPATIAL})")
    reversal = _window_reversal(o, ev, nsp)
    # to (batch, feature, spatial...) and (out feature, in feature, spatial...)
    xt = np.transpose(_wide(x), (dn.input_batch_dimension, dn.input_feature_dimension, *sp_in))
    wt = np.transpose(_wide(w), (dn.kernel_output_feature_dimension, dn.kernel_input_feature_dimension, *sp_k))
    # window reversal: the kernel flipped along the flagged spatial dimensions, then correlated
    wt = np.flip(wt, tuple(2 + i for i, r in enumerate(reversal) if r))
    strides = tuple(ev.attr(o, "window_strides", (1,) * nsp))
    lhs_dil = tuple(ev.attr(o, "lhs_dilation", (1,) * nsp))
    rhs_dil = tuple(ev.attr(o, "rhs_dilation", (1,) * nsp))
    pad: I64Elements | None = ev.attr(o, "padding")
    pads = [(0, 0)] * nsp if pad is None else [(int(lo), int(hi)) for lo, hi in pad.values.reshape(nsp, 2)]
    xp = _dilate_pad(xt, (1, 1, *lhs_dil), [(0, 0), (0, 0), *pads], 0)
    win = _windows(xp, (1, 1, *wt.shape[2:]), (1, 1, *strides), (1, 1, *rhs_dil))  # n, c, out..., 1, 1, k...
    win = win.reshape(win.shape[:2 + nsp] + wt.shape[2:])
    cin_g, cout = wt.shape[1], wt.shape[0]
    cout_g = cout // groups
    # einsum's labels as integers: batch 0, input feature 1, output feature 2, the kernel's spatial
    # dimensions 3.., the output's spatial dimensions the ellipsis (no label is shared by two)
    n_, c_, o_ = 0, 1, 2
    k_ = list(range(3, 3 + nsp))
    outs = []
    for g in range(groups):
        xg = win[:, g * cin_g:(g + 1) * cin_g]
        wg = wt[g * cout_g:(g + 1) * cout_g]
        with np.errstate(all="ignore"):
            outs.append(np.einsum(xg, [n_, c_, ..., *k_], wg, [o_, c_, *k_], [n_, o_, ...]))
    r = np.concatenate(outs, axis=1)
    order = (dn.output_batch_dimension, dn.output_feature_dimension, *sp_out)
    return as_output(np.moveaxis(r, range(2 + nsp), order), o.shape)


# -- convolution with batch_group_count ------------------------------------------------------------------------
class _Regrouped:
    """A convolution node seen with its batch groups moved into feature groups."""

    def __init__(self, o: Any, groups: int) -> None:
        self._o = o
        self.attrs = dict(o.attrs)
        self.attrs["batch_group_count"] = 1
        self.attrs["feature_group_count"] = groups

    def attr(self, name: str, default: Any = None) -> Any:
        """The node's attribute, with the group counts above (:meth:`XlaOp.attr <xlasdk.builder.XlaOp.attr>`)."""
        return self.attrs[name] if name in ("batch_group_count", "feature_group_count") else self._o.attr(name, default)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._o, name)


@evaluates(CONVOLUTION)
def _convolution(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """The convolution with feature groups (:func:`_feature_grouped`), and with ``batch_group_count
    = G > 1``: the input batch (``G * N``, group-major) splits into G groups, group ``g`` feeding
    the ``g``-th group of output features; computed as a convolution of ``N`` batch elements with
    ``G`` feature groups over the input features regrouped as ``(G, C)`` (what the weight gradient
    of a grouped convolution is)."""
    groups: int = ev.attr(o, "batch_group_count", 1)
    if groups == 1:
        return _feature_grouped(o, a, ev)
    dn: ConvolutionDimensionNumbers = ev.attr(o, "dimension_numbers")
    if ev.attr(o, "feature_group_count", 1) != 1:
        raise ev.fail(o, "with both feature_group_count and batch_group_count > 1 (XLA rejects it)")
    x = np.asarray(a[0])
    bd, fd = dn.input_batch_dimension, dn.input_feature_dimension
    xt = np.moveaxis(x, (bd, fd), (0, 1))
    n, c = xt.shape[:2]
    if n % groups:
        raise ev.fail(o, f"with batch_group_count {groups} not dividing the batch size {n}")
    xt = xt.reshape((groups, n // groups, c) + xt.shape[2:]).swapaxes(0, 1).reshape((n // groups, groups * c)
                                                                                    + xt.shape[2:])
    return _feature_grouped(_Regrouped(o, groups), [np.moveaxis(xt, (0, 1), (bd, fd)), a[1]], ev)  # type: ignore[arg-type]
