"""Convolutions: ``ConvGeneralDilated`` and the NCHW shorthand ``Conv``."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._mlir_attrs import I64Elements
from .._optable import AttrKind, HloUnsupported, define, hlo_window
from ..attrs import (
    ConvolutionDimensionNumbers,
    PaddingType,
    PrecisionConfig,
    convert_padding,
    make_convolution_dimension_numbers,
)
from ..attrs._dimension_numbers import ConvDimensionNumbersLike
from ..attrs._padding import PaddingLike
from ..builder import XlaOp
from ..errors import DTypeError, ShapeError
from ..shape import Shape
from ..types import COMPLEX, FLOATS, INTS, DTypeLike
from ._core import (
    INT64_MAX,
    array_shape,
    bool_arg,
    dimension_fields,
    dtype_error,
    int_arg,
    int_list,
    int_tuples,
    operand,
    opt_int_list,
    same_builder,
    shape_error,
    show,
)
from .linalg import contraction_type, narrow_to, precision_attrs, preferred_type, widen_sub_byte

__all__ = ["Conv", "ConvGeneralDilated"]

_NUMERIC = INTS | FLOATS | COMPLEX


def _convolution_hlo(o: XlaOp) -> str:
    """``, window={...}, dim_labels=..., feature_group_count=.., operand_precision=...``."""
    a = o.attrs
    dn = a["dimension_numbers"]
    n = len(dn.input_spatial_dimensions)
    if n == 0 or n > 10:
        raise HloUnsupported("convolution spatial rank")
    kernel = o.operands[1].shape.dimensions()
    pads = [tuple(p) for p in a["padding"].values.tolist()] if "padding" in a else [(0, 0)] * n
    window = hlo_window(
        tuple(kernel[d] for d in dn.kernel_spatial_dimensions), a["window_strides"], pads,
        a["lhs_dilation"], a["rhs_dilation"],
    )
    extra = f", {window}, dim_labels={dn.to_hlo()}"
    for key in ("feature_group_count", "batch_group_count"):
        if a[key] != 1:
            extra += f", {key}={a[key]}"
    prec = a["precision_config"].to_hlo() if "precision_config" in a else ""
    return extra + (f", operand_precision={prec}" if prec else "")


def conv_output_size(size: int, window: int, stride: int, lo: int, hi: int, lhs_dil: int, rhs_dil: int) -> int:
    """One spatial output size: ``floor((padded_in - dilated_window) / stride) + 1`` (0 if negative)."""
    padded = (size - 1) * lhs_dil + 1 + lo + hi if size > 0 else lo + hi
    dwin = (window - 1) * rhs_dil + 1 if window > 0 else 0
    if padded < dwin or padded <= 0:
        return 0
    return (padded - dwin) // stride + 1


def ConvGeneralDilated(
    lhs: XlaOp,
    rhs: XlaOp,
    window_strides: Sequence[int],
    padding: PaddingLike,
    lhs_dilation: Sequence[int] | None = None,
    rhs_dilation: Sequence[int] | None = None,
    dimension_numbers: ConvDimensionNumbersLike = None,
    feature_group_count: int = 1,
    batch_group_count: int = 1,
    precision_config: PrecisionConfig | None = None,
    preferred_element_type: DTypeLike | None = None,
    window_reversal: Sequence[bool] | None = None,
) -> XlaOp:
    """General dilated, grouped convolution (XLA ``ConvGeneralDilated``; ``stablehlo.convolution``).

    Parameters
    ----------
    lhs: input of rank ``n + 2`` (batch B, feature C, n spatial dims, placed per dimension_numbers).
    rhs: kernel of rank ``n + 2`` (output feature O, input feature I, n spatial window dims).
    window_strides: n strides >= 1.
    padding: ``"SAME"``, ``"VALID"``, an ``xs.PaddingType`` or n ``(lo, hi)`` pairs (negative
        values crop). SAME/VALID are computed on the dilated input and window.
    lhs_dilation, rhs_dilation: n factors >= 1 (input "transposed conv" dilation; atrous window).
    dimension_numbers: ``xs.ConvolutionDimensionNumbers``, layout strings such as
        ``("NCHW", "OIHW", "NCHW")`` or ``("NHWC", "HWIO", "NHWC")``, or None for NC.../OI.../NC...
    feature_group_count: G >= 1 with ``C == I * G`` and ``O % G == 0`` (G == C is depthwise).
    batch_group_count: BG >= 1 with ``B % BG == 0`` and ``O % BG == 0``; the output batch is B / BG.
    precision_config, preferred_element_type: as for :func:`~xlasdk.ops.DotGeneral`.
    window_reversal: n bools (or None): a true entry flips the window along that spatial
        dimension (XLA ``Window.window_reversal``), which is the convolution with the kernel
        reversed there; it is built that way (``stablehlo.reverse`` of ``rhs``, then the
        convolution), which XLA's CPU compiler runs for every combination.

    Returns
    -------
    XlaOp with output batch ``B / batch_group_count``, feature O, and spatial sizes
    ``floor(((in - 1) * lhs_dil + 1 + lo + hi - ((k - 1) * rhs_dil + 1)) / stride) + 1``, laid out
    per the output dimension numbers.

    Raises
    ------
    ShapeError: ranks differ, attribute lengths differ from n, strides/dilations < 1, a kernel spatial
    size < 1, group counts that do not divide, both group counts > 1, or ``window_reversal``
    not n entries.
    DTypeError: element types differ or are not numeric; a ``window_reversal`` entry not a bool.
    """
    if window_reversal is not None:
        rhs = _reverse_window(lhs, rhs, window_reversal, dimension_numbers)
    return _conv_general_dilated(
        "ConvGeneralDilated", lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
        feature_group_count, batch_group_count, precision_config, preferred_element_type,
    )


def _reverse_window(lhs: Any, rhs: Any, window_reversal: Any, dimension_numbers: Any) -> Any:
    """``rhs`` reversed along the kernel spatial dimensions that ``window_reversal`` flags."""
    from .shaping import Rev

    op = "ConvGeneralDilated"
    w = operand(op, "rhs", rhs)
    if isinstance(window_reversal, (str, bytes)) or not isinstance(window_reversal, (list, tuple, np.ndarray)):
        dtype_error(op, f"window_reversal must be a list of bools, got {show(window_reversal)}")
    flags = [bool_arg(op, f"window_reversal[{i}]", v) for i, v in enumerate(window_reversal)]
    n = w.shape.rank() - 2
    if len(flags) != n:
        shape_error(op, f"window_reversal has {len(flags)} entries, expected {n} (spatial dimensions)")
    if not any(flags):
        return w
    try:
        dn = make_convolution_dimension_numbers(dimension_numbers, n)
    except ShapeError as e:
        shape_error(op, f"bad dimension_numbers: {e}")
    dims = [int(d) for d, f in zip(dn.kernel_spatial_dimensions, flags, strict=True) if f]
    return Rev(w, dims)


Pads = tuple[tuple[int, int], ...]


def convolution_rank(op: str, lhs: Shape, rhs: Shape) -> int:
    """The number of spatial dimensions ``n`` (rank - 2); raises DTypeError/ShapeError on operand
    types or ranks that differ, or are not numeric / below 2."""
    et = lhs.element_type()
    if et not in _NUMERIC:
        dtype_error(op, f"operand 'lhs' must be numeric, got {lhs}")
    if rhs.element_type() is not et:
        dtype_error(op, f"operand 'rhs' has element type {rhs}, expected {et.name.lower()} like 'lhs' {lhs}")
    r = lhs.rank()
    if r < 2 or rhs.rank() != r:
        shape_error(op, f"operands must have equal rank >= 2, got 'lhs' {lhs} and 'rhs' {rhs}")
    return r - 2


def convolution_padding(
    op: str, lhs: Shape, rhs: Shape, dn: Any, window_strides: Sequence[int], padding: Any,
    lhs_dilation: Sequence[int], rhs_dilation: Sequence[int],
) -> Pads:
    """The explicit ``(lo, hi)`` padding of a convolution (``padding`` SAME/VALID/PaddingType or
    pairs of ints), window attributes checked; raises ShapeError."""
    n = convolution_rank(op, lhs, rhs)
    r = n + 2
    for part, dims in (
        ("input", [dn.input_batch_dimension, dn.input_feature_dimension, *dn.input_spatial_dimensions]),
        (
            "kernel",
            [dn.kernel_output_feature_dimension, dn.kernel_input_feature_dimension, *dn.kernel_spatial_dimensions],
        ),
        ("output", [dn.output_batch_dimension, dn.output_feature_dimension, *dn.output_spatial_dimensions]),
    ):
        if any(not 0 <= int(d) < r for d in dims):
            listed = [int(d) for d in dims]
            shape_error(op, f"bad dimension_numbers: {part} dimensions {listed} must be < {r} (the rank)")
    xd, wd = lhs.dimensions(), rhs.dimensions()
    for name, v in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation), ("rhs_dilation", rhs_dilation)):
        if len(v) != n:
            shape_error(op, f"{name} has {len(v)} entries, expected {n} (spatial dimensions)")
        if any(s < 1 for s in v):
            shape_error(op, f"{name} {list(v)} must all be >= 1")
    in_sp = [xd[d] for d in dn.input_spatial_dimensions]
    k_sp = [wd[d] for d in dn.kernel_spatial_dimensions]
    if any(k < 1 for k in k_sp):  # StableHLO and XLA need a non-empty window
        shape_error(op, f"kernel spatial sizes {k_sp} of 'rhs' {rhs} must all be >= 1")
    dil_in = [(s - 1) * ld + 1 if s else 0 for s, ld in zip(in_sp, lhs_dilation, strict=False)]
    dil_k = [(k - 1) * rd + 1 for k, rd in zip(k_sp, rhs_dilation, strict=False)]
    if max(dil_in + dil_k, default=0) > INT64_MAX:  # XLA computes these sizes in int64
        shape_error(op, f"dilated input sizes {dil_in} or window sizes {dil_k} do not fit in int64")
    same_valid = isinstance(padding, (str, PaddingType))
    try:
        pads = convert_padding(padding, dil_in if same_valid else in_sp, dil_k if same_valid else k_sp, window_strides)
    except ShapeError as e:
        shape_error(op, str(e))
    for i, (lo, hi) in enumerate(pads):
        if not all(-INT64_MAX <= v <= INT64_MAX for v in (lo, hi, dil_in[i] + lo + hi)):
            shape_error(op, f"padding[{i}] = ({lo}, {hi}) on the dilated input size {dil_in[i]} does not fit in int64")
    return tuple((int(lo), int(hi)) for lo, hi in pads)


def convolution_shape(
    op: str, lhs: Shape, rhs: Shape, dn: Any, window_strides: Sequence[int], padding: Any,
    lhs_dilation: Sequence[int], rhs_dilation: Sequence[int], feature_group_count: int, batch_group_count: int,
    preferred_element_type: Any = None,
) -> Shape:
    """Result shape of a convolution (``dn`` a ConvolutionDimensionNumbers, ``padding`` as for
    :func:`convolution_padding`); raises ShapeError/DTypeError."""
    pads = convolution_padding(op, lhs, rhs, dn, window_strides, padding, lhs_dilation, rhs_dilation)
    g, bg = feature_group_count, batch_group_count
    if g < 1 or bg < 1:
        shape_error(op, f"feature_group_count ({g}) and batch_group_count ({bg}) must be >= 1")
    if g > 1 and bg > 1:
        shape_error(op, "feature_group_count and batch_group_count cannot both be > 1")
    xd, wd = lhs.dimensions(), rhs.dimensions()
    B, C = xd[dn.input_batch_dimension], xd[dn.input_feature_dimension]
    I, O = wd[dn.kernel_input_feature_dimension], wd[dn.kernel_output_feature_dimension]
    if C % g or C // g != I:
        shape_error(
            op, f"input features ({C}, from 'lhs' {lhs}) must equal kernel input features ({I}, from 'rhs' "
            f"{rhs}) times feature_group_count ({g})"
        )
    if O % g:
        shape_error(op, f"kernel output features ({O}) must be divisible by feature_group_count ({g})")
    if B % bg or O % bg:
        shape_error(op, f"batch ({B}) and kernel output features ({O}) must be divisible by batch_group_count ({bg})")
    out = [0] * len(xd)
    out[dn.output_batch_dimension] = B // bg
    out[dn.output_feature_dimension] = O
    for i, d in enumerate(dn.output_spatial_dimensions):
        out[d] = conv_output_size(
            xd[dn.input_spatial_dimensions[i]], wd[dn.kernel_spatial_dimensions[i]], window_strides[i],
            pads[i][0], pads[i][1], lhs_dilation[i], rhs_dilation[i],
        )
    return array_shape(preferred_type(op, lhs.element_type(), preferred_element_type), out, op)


CONVOLUTION = define(
    "stablehlo.convolution", "convolution", hlo_attrs=_convolution_hlo, rule=convolution_shape,
    attrs={  # window_reversal is not declared: no wrapper builds it (a loaded module's stays as spelled)
        "window_strides": AttrKind.INTS, "padding": AttrKind.I64_ELEMENTS, "lhs_dilation": AttrKind.INTS,
        "rhs_dilation": AttrKind.INTS, "dimension_numbers": AttrKind.CONV_DIMENSION_NUMBERS,
        "feature_group_count": AttrKind.INT, "batch_group_count": AttrKind.INT,
        "precision_config": AttrKind.PRECISION_CONFIG,
    },
)


def _conv_general_dilated(
    op: str, lhs: XlaOp, rhs: XlaOp, window_strides: Sequence[int], padding: Any,
    lhs_dilation: Sequence[int] | None, rhs_dilation: Sequence[int] | None, dimension_numbers: Any,
    feature_group_count: int, batch_group_count: int, precision_config: Any, preferred_element_type: Any,
) -> XlaOp:
    """Implementation of ConvGeneralDilated and Conv; errors name ``op``. Every argument is
    passed: the defaults are those of the public functions."""
    x = operand(op, "lhs", lhs)
    w = operand(op, "rhs", rhs)
    same_builder(op, [("lhs", x), ("rhs", w)])
    n = convolution_rank(op, x.shape, w.shape)
    if not (
        dimension_numbers is None
        or isinstance(dimension_numbers, ConvolutionDimensionNumbers)
        or (
            isinstance(dimension_numbers, (list, tuple))
            and len(dimension_numbers) == 3
            and all(isinstance(v, str) for v in dimension_numbers)
        )
    ):
        shape_error(
            op, "bad dimension_numbers: must be 3 layout strings (lhs, rhs, out) such as ('NCHW', 'OIHW', 'NCHW'), "
            f"None or a ConvolutionDimensionNumbers, got {show(dimension_numbers)}"
        )
    if isinstance(dimension_numbers, ConvolutionDimensionNumbers):  # its fields may hold anything
        fields = {f: getattr(dimension_numbers, f, None) for f in ConvolutionDimensionNumbers._FIELDS}
        try:
            dimension_numbers = ConvolutionDimensionNumbers(**dimension_fields(op, fields))
        except ShapeError as e:
            shape_error(op, f"bad dimension_numbers: {e}")
    try:  # an existing ConvolutionDimensionNumbers is validated and its spatial count checked too
        dn = make_convolution_dimension_numbers(dimension_numbers, n)
    except ShapeError as e:
        shape_error(op, f"bad dimension_numbers: {e}")
    strides = int_list(op, "window_strides", window_strides)
    ldil = opt_int_list(op, "lhs_dilation", lhs_dilation, (1,) * n)
    rdil = opt_int_list(op, "rhs_dilation", rhs_dilation, (1,) * n)
    if not isinstance(padding, (str, PaddingType)):
        padding = int_tuples(op, "padding", padding, "a (lo, hi) pair of ints", (2,))
    pads = convolution_padding(op, x.shape, w.shape, dn, strides, padding, ldil, rdil)
    g = int_arg(op, "feature_group_count", feature_group_count, error=DTypeError)
    bg = int_arg(op, "batch_group_count", batch_group_count, error=DTypeError)
    shape = convolution_shape(op, x.shape, w.shape, dn, strides, pads, ldil, rdil, g, bg, preferred_element_type)
    rt, et = shape.element_type(), x.shape.element_type()
    attrs: dict[str, Any] = {"window_strides": tuple(strides)}
    if n:
        attrs["padding"] = I64Elements([list(p) for p in pads])
    attrs.update(
        lhs_dilation=tuple(ldil), rhs_dilation=tuple(rdil), dimension_numbers=copy.deepcopy(dn),
        feature_group_count=g, batch_group_count=bg, **precision_attrs(op, precision_config),
    )
    ct = contraction_type(rt)
    result = shape if ct is rt else array_shape(ct, shape.dimensions(), op)
    x, w = widen_sub_byte(x, et, ct, op), widen_sub_byte(w, et, ct, op)
    return narrow_to(x.builder.add_op(CONVOLUTION, (x, w), result, attrs), rt, op)


def Conv(
    lhs: XlaOp,
    rhs: XlaOp,
    window_strides: Sequence[int],
    padding: PaddingLike,
    feature_group_count: int = 1,
    batch_group_count: int = 1,
    precision_config: PrecisionConfig | None = None,
    preferred_element_type: DTypeLike | None = None,
) -> XlaOp:
    """Convolution in NCHW / OIHW / NCHW layout (any number of spatial dims), no dilation.

    ``padding`` is ``"SAME"``, ``"VALID"`` or a list of ``(lo, hi)``. See
    :func:`ConvGeneralDilated` for shapes and errors.
    """
    return _conv_general_dilated(
        "Conv", lhs, rhs, window_strides, padding, None, None, None, feature_group_count, batch_group_count,
        precision_config, preferred_element_type,
    )
