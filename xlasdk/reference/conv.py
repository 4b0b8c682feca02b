"""Evaluation rule of :mod:`xlasdk.ops.conv`: convolution, with feature groups and with
``batch_group_count`` (the weight gradient of a grouped convolution), in float64 through
``numpy.einsum`` over the windows.
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


def _feature_grouped(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    x, w = a
    dn: ConvolutionDimensionNumbers = ev.attr(o, "dimension_numbers")
    if ev.attr(o, "batch_group_count", 1) != 1:
        raise ev.fail(o, "with batch_group_count > 1")
    if any(ev.attr(o, "window_reversal", ()) or ()):
        raise ev.fail(o, "with window_reversal")
    groups: int = ev.attr(o, "feature_group_count", 1)
    sp_in, sp_k, sp_out = (tuple(dn.input_spatial_dimensions), tuple(dn.kernel_spatial_dimensions),
                           tuple(dn.output_spatial_dimensions))
    nsp = len(sp_in)
    # to (batch, feature, spatial...) and (out feature, in feature, spatial...)
    xt = np.transpose(widened(x), (dn.input_batch_dimension, dn.input_feature_dimension, *sp_in))
    wt = np.transpose(widened(w), (dn.kernel_output_feature_dimension, dn.kernel_input_feature_dimension, *sp_k))
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
    outs = []
    letters = "abcdefghij"[:nsp]
    klet = "pqrstuvwxy"[:nsp]
    for g in range(groups):
        xg = win[:, g * cin_g:(g + 1) * cin_g]
        wg = wt[g * cout_g:(g + 1) * cout_g]
        with np.errstate(all="ignore"):
            outs.append(np.einsum(f"nc{letters}{klet},oc{klet}->no{letters}", xg, wg))
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
