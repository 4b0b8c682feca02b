"""Evaluation rules of :mod:`xlasdk.ops.convert`: convert (XLA:CPU's saturating float to integer,
NaN to 0), bitcast_convert and reduce_precision (on the value's bits, as XLA defines it).
"""

from __future__ import annotations

import numpy as np

from .._optable import evaluates
from ..builder import XlaOp
from ..ops.convert import BITCAST_CONVERT, CONVERT, REDUCE_PRECISION
from ._walk import ELEMENTWISE_OPS, Evaluator, Value, as_output, dtype_of, is_float, is_ml_float, ml_dtypes, widened

__all__: list[str] = []


@evaluates(REDUCE_PRECISION)
def _reduce_precision(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    """Round to ``mantissa_bits`` (to nearest, ties to even) and clamp to ``exponent_bits``:
    past the largest exponent to +-inf, at or below the smallest normal one to +-0 (no
    subnormals); NaN stays as it is (a NaN when no mantissa bit is kept). On the value's bits, as
    XLA defines the op."""
    x = np.asarray(a[0])
    dt = x.dtype
    info = ml_dtypes.finfo(dt) if is_ml_float(dt) else np.finfo(dt)
    width = dt.itemsize * 8
    src_mant = int(info.nmant)
    src_exp = width - 1 - src_mant
    mant = int(ev.attr(o, "mantissa_bits"))
    exp = int(ev.attr(o, "exponent_bits"))
    u = np.dtype(f"u{dt.itemsize}")
    bits = np.ascontiguousarray(x).view(u).astype(np.uint64)
    one = np.uint64(1)
    if mant < src_mant:
        shift = np.uint64(src_mant - mant)
        last = one << shift
        bias = (last >> one) - one + ((bits & last) >> shift)
        bits = (bits + bias) & ~(last - one) & np.uint64((1 << width) - 1)
    if exp < src_exp:
        sign = one << np.uint64(width - 1)
        exp_mask = np.uint64(((1 << src_exp) - 1) << src_mant)
        src_bias = (1 << (src_exp - 1)) - 1
        reduced_bias = (1 << (exp - 1)) - 1
        x_exp = bits & exp_mask
        overflow = x_exp > np.uint64((src_bias + reduced_bias) << src_mant)
        underflow = x_exp <= np.uint64((src_bias - reduced_bias) << src_mant)
        signed_zero = bits & sign
        bits = np.where(overflow, signed_zero | exp_mask, np.where(underflow, signed_zero, bits))
    out = bits.astype(u).view(dt)
    nan = np.isnan(widened(x))
    if nan.any():
        out = np.where(nan, x if mant > 0 else np.asarray(np.nan, dt), out)
    return as_output(out, o.shape)


@evaluates(CONVERT)
def _convert(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    x = a[0]
    dt = dtype_of(o.shape)
    if dt.kind in "iu" and is_float(x.dtype):
        w = widened(x)
        if w.dtype.kind == "c":
            w = w.real
        info = np.iinfo(dt)
        t = np.trunc(np.where(np.isnan(w), 0.0, w))  # XLA:CPU: NaN -> 0, out of range saturates
        hi, lo = t >= float(info.max), t <= float(info.min)
        mid = np.where(hi | lo, 0.0, t).astype(np.uint64 if dt.kind == "u" else np.int64)
        r = np.where(hi, np.array(info.max, dt), np.where(lo, np.array(info.min, dt), mid.astype(dt)))
        return as_output(r, o.shape)
    if dt == np.bool_:
        return as_output(x != 0, o.shape)
    if x.dtype.kind == "c" and dt.kind != "c":
        return as_output(widened(x).real, o.shape)
    return as_output(widened(x), o.shape)


@evaluates(BITCAST_CONVERT)
def _bitcast(o: XlaOp, a: list[Value], ev: Evaluator) -> Value:
    x = np.ascontiguousarray(a[0])
    dt = dtype_of(o.shape)
    if dt.itemsize == x.dtype.itemsize:  # the same width: element by element (also in folded regions)
        return x.view(dt)
    return as_output(x.view(dt).reshape(o.shape.dimensions()), o.shape)


ELEMENTWISE_OPS.add(CONVERT.name)  # a region run on whole slices may convert
