"""Reductions: ``Reduce`` (variadic), ``Map``, and the batch normalizations, which reduce over
every dimension but the feature one: ``BatchNormTraining``, ``BatchNormInference``,
``BatchNormGrad``. Window reductions are in :mod:`xlasdk.ops.window`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._mlir_attrs import F32
from .._optable import AttrKind, HloForm, HloUnsupported, OpDef, braces, define
from ..builder import XlaBuilder, XlaOp
from ..shape import Shape
from ..types import FLOATS, PrimitiveType
from ._core import (
    ComputationLike,
    array_shape,
    dtype_error,
    int_arg,
    int_list,
    operand,
    same_builder,
    shape_error,
    show,
    subcomputation,
)

__all__ = ["Reduce", "Map", "BatchNormTraining", "BatchNormInference", "BatchNormGrad"]


def _batch_norm_hlo(o: XlaOp) -> str:
    """``, epsilon=0.001, feature_index=1`` (XLA's spelling; HLO text has no non-finite epsilon)."""
    eps = o.attrs["epsilon"]
    if not np.isfinite(eps):
        raise HloUnsupported(f"epsilon {eps}")
    return f", epsilon={str(np.float32(eps))}, feature_index={o.attrs['feature_index']}"


def as_op_list(op: str, name: str, v: Any, builder: XlaBuilder | None) -> list[XlaOp]:
    """A non-empty list of array XlaOps from one op or a sequence of them."""
    items = [v] if isinstance(v, XlaOp) else v
    if not isinstance(items, (list, tuple)) or not items:
        shape_error(op, f"{name} must be an XlaOp or a non-empty list of XlaOps, got {show(v)}")
    return [operand(op, f"{name}[{i}]", x, builder) for i, x in enumerate(items)]


def same_float_precision(op: str, names: Sequence[str], shapes: Sequence[Shape]) -> None:
    """DTypeError unless the floating-point operands share one type: XLA's HLO verifier rejects
    ``reduce`` and ``map`` instructions that mix precisions (f32 with bf16, f16, f64, fp8...)."""
    floats = [(n, x) for n, x in zip(names, shapes, strict=True) if x.element_type() in FLOATS]
    for n, x in floats[1:]:
        if x.element_type() is not floats[0][1].element_type():
            dtype_error(
                op, f"operand {n!r} is {x} but {floats[0][0]!r} is {floats[0][1]}: floating-point "
                "operands of different precisions cannot be combined (XLA rejects mixed precision); "
                "ConvertElementType them to one type"
            )


def same_dimensions(op: str, shapes: Sequence[Shape], names: Sequence[str] | None = None) -> tuple[int, ...]:
    """The common dimensions of ``shapes``; ShapeError naming the first that differs."""
    names = names if names is not None else [f"operands[{i}]" for i in range(len(shapes))]
    dims0 = shapes[0].dimensions()
    for i, x in enumerate(shapes):
        if x.dimensions() != dims0:
            shape_error(
                op, f"operand {names[i]!r} has shape {x}, expected dimensions {list(dims0)} like {names[0]}"
            )
    return dims0


def reduce_shape(op: str, operands: Sequence[Shape], inits: Sequence[Shape], dimensions: Sequence[int]) -> Shape:
    """Result shape of Reduce (a tuple for several operands); raises ShapeError/DTypeError on
    operands, init values or dimensions that do not match."""
    if len(inits) != len(operands):
        shape_error(op, f"{len(operands)} operands but {len(inits)} init_values")
    same_float_precision(op, [f"operands[{i}]" for i in range(len(operands))], operands)
    two_bit = [i for i, x in enumerate(operands) if x.element_type() in (PrimitiveType.S2, PrimitiveType.U2)]
    if two_bit and len(two_bit) != len(operands):  # XLA:CPU fails compiling it (a RET_CHECK on the layouts)
        dtype_error(
            op, f"operand 'operands[{two_bit[0]}]' is {operands[two_bit[0]]}: 2-bit operands (s2, u2) can be "
            "reduced together only with other 2-bit operands; ConvertElementType them to s8/u8 first"
        )
    dims0 = operands[0].dimensions()
    for i, (x, v) in enumerate(zip(operands, inits, strict=True)):
        if x.dimensions() != dims0:
            shape_error(
                op, f"operand 'operands[{i}]' has shape {x}, expected dimensions {list(dims0)} like operands[0]"
            )
        if v.rank() != 0:
            shape_error(op, f"operand 'init_values[{i}]' must be a scalar, got {v}")
        if v.element_type() is not x.element_type():
            want = x.element_type().name.lower()
            dtype_error(op, f"operand 'init_values[{i}]' is {v}, expected {want}[] like operands[{i}]")
    dims = tuple(dimensions)
    if len(set(dims)) != len(dims) or any(not 0 <= d < len(dims0) for d in dims):
        shape_error(op, f"dimensions_to_reduce {list(dims)} must be distinct dimension numbers < {len(dims0)}")
    out_dims = tuple(s for i, s in enumerate(dims0) if i not in dims)
    outs = [array_shape(x.element_type(), out_dims, op) for x in operands]
    return outs[0] if len(outs) == 1 else Shape.tuple_shape(outs)


REDUCE = define(
    "stablehlo.reduce", "reduce", hlo_form=HloForm.REGION,
    hlo_attrs=lambda o: f", dimensions={braces(o.attrs['dimensions'])}",
    rule=reduce_shape, attrs={"dimensions": AttrKind.INTS},
)


def map_shape(op: str, operands: Sequence[Shape], dimensions: Sequence[int]) -> tuple[int, ...]:
    """Result dimensions of Map (the operands'; the element type is the computation's); raises
    ShapeError/DTypeError on operands that differ or ``dimensions`` other than all in order."""
    dims0 = same_dimensions(op, operands)
    same_float_precision(op, [f"operands[{i}]" for i in range(len(operands))], operands)
    if list(dimensions) != list(range(len(dims0))):
        shape_error(
            op, f"dimensions {list(dimensions)} must be all dimensions in order, {list(range(len(dims0)))}, for "
            f"operand 'operands[0]' {operands[0]}"
        )
    return dims0


MAP = define("stablehlo.map", rule=map_shape, attrs={"dimensions": AttrKind.INTS})


def reducer_region(op: str, computation: Any, inits: Sequence[XlaOp], builder: XlaBuilder) -> Any:
    """Region of a reducer ``(acc_0..acc_n-1, x_0..x_n-1) -> (acc_0..acc_n-1)`` over scalars.

    Raises ShapeError/DTypeError naming the op when the computation's signature or results do
    not match the init values' scalar shapes.
    """
    scalars = [Shape._make(i.shape.element_type(), ()) for i in inits]
    region, results = subcomputation(op, "computation", computation, scalars + scalars, builder)
    flat: list[Shape] = []
    for r in results:
        flat.extend(r.tuple_shapes() if r.is_tuple() else [r])
    if flat != scalars:
        shape_error(
            op, f"computation returns ({', '.join(map(str, flat))}) but must return "
            f"({', '.join(map(str, scalars))}), one scalar per operand"
        )
    return region


def Reduce(
    builder: XlaBuilder,
    operands: XlaOp | Sequence[XlaOp],
    init_values: XlaOp | Sequence[XlaOp],
    computation: ComputationLike,
    dimensions_to_reduce: Sequence[int],
) -> XlaOp:
    """Reduce arrays over dimensions with a reducer (XLA ``Reduce``; ``stablehlo.reduce``).

    Parameters
    ----------
    builder: the XlaBuilder.
    operands: N arrays of equal dimensions ``(d0, ..., dr-1)`` (element types may differ, but the
        floating-point ones must share one type: XLA rejects mixed precisions).
    init_values: N scalars, ``init_values[i]`` of ``operands[i]``'s element type; the identity of
        the reducer (0 for add, -inf for max...), since XLA may apply it any number of times.
    computation: reducer taking ``(acc_0..acc_{N-1}, x_0..x_{N-1})`` scalars (XLA's order) and
        returning N scalars: an XlaComputation, or a Python callable of XlaOps returning an XlaOp
        or a tuple/list of them. The reduction order is unspecified, so the reducer should be
        associative and commutative.
    dimensions_to_reduce: distinct dimension numbers to remove.

    Returns
    -------
    For N = 1 an XlaOp of the operand's dimensions without ``dimensions_to_reduce``; for N > 1
    a tuple-shaped XlaOp of N such arrays (take them with ``GetTupleElement``).

    Raises
    ------
    ShapeError: operand dimensions differ, bad dimensions, init values not scalars, or a reducer
    whose parameters or results do not match. DTypeError: an init value's type differs from
    its operand's, floating-point operands of different types, or 2-bit (s2, u2) operands
    beside operands of other widths (XLA:CPU cannot compile either).
    """
    op = "Reduce"
    if not isinstance(builder, XlaBuilder):
        dtype_error(op, f"first argument must be an XlaBuilder, got {type(builder).__name__}")
    xs = as_op_list(op, "operands", operands, builder)
    inits = as_op_list(op, "init_values", init_values, builder)
    named = [(f"operands[{i}]", x) for i, x in enumerate(xs)] + [(f"init_values[{i}]", v) for i, v in enumerate(inits)]
    same_builder(op, named)
    dims = int_list(op, "dimensions_to_reduce", dimensions_to_reduce)
    shape = reduce_shape(op, [x.shape for x in xs], [v.shape for v in inits], dims)
    region = reducer_region(op, computation, inits, builder)
    return builder.add_op(REDUCE, tuple(xs) + tuple(inits), shape, {"dimensions": tuple(sorted(dims))}, (region,))


def Map(
    builder: XlaBuilder,
    operands: XlaOp | Sequence[XlaOp],
    computation: ComputationLike,
    dimensions: Sequence[int],
    static_operands: Sequence[XlaOp] = (),
) -> XlaOp:
    """Apply a scalar computation element-wise across arrays (XLA ``Map``; ``stablehlo.map``).

    Output element ``[i...]`` is ``computation(operands[0][i...], ..., operands[N-1][i...])``.

    Parameters
    ----------
    builder: the XlaBuilder.
    operands: N >= 1 arrays of equal dimensions ``(d0, ..., dr-1)`` (element types may differ, but
        the floating-point ones must share one type: XLA rejects mixed precisions).
    computation: takes N scalars, one of each operand's element type, and returns one scalar:
        an XlaComputation, or a Python callable of XlaOps returning an XlaOp.
    dimensions: the mapped dimensions; must be all of them in order, ``[0, 1, ..., r-1]``.
    static_operands: must be empty (XLA's Map has no static operands; the former API kept the
        parameter).

    Returns
    -------
    XlaOp of shape ``(d0, ..., dr-1)`` with the computation's result element type.

    Raises
    ------
    ShapeError: no operands, operands of different dimensions, ``dimensions`` other than
        ``[0..r-1]``, non-empty ``static_operands``, or a computation whose parameters do not
        match or that does not return exactly one scalar.
    DTypeError: ``builder`` is not an XlaBuilder, an operand is not an XlaOp, or floating-point
        operands of different types.
    """
    op = "Map"
    if not isinstance(builder, XlaBuilder):
        dtype_error(op, f"first argument must be an XlaBuilder, got {type(builder).__name__}")
    xs = as_op_list(op, "operands", operands, builder)
    dims = int_list(op, "dimensions", dimensions)
    dims0 = map_shape(op, [x.shape for x in xs], dims)
    if static_operands is not None and not (isinstance(static_operands, (list, tuple)) and not static_operands):
        shape_error(op, f"static_operands are not supported (XLA's Map takes none), got {show(static_operands)}")
    scalars = [Shape._make(x.shape.element_type(), ()) for x in xs]
    region, results = subcomputation(op, "computation", computation, scalars, builder)
    if len(results) != 1 or not results[0].is_array() or results[0].rank() != 0:
        shape_error(
            op, f"computation returns ({', '.join(map(str, results))}) but must return one scalar"
        )
    return builder.add_op(
        MAP, tuple(xs), array_shape(results[0].element_type(), dims0, op), {"dimensions": tuple(dims)}, (region,)
    )


# -- batch normalization ------------------------------------------------------------------------


def batch_norm_check(
    op: str, operand: Shape, feature_index: int, vectors: Sequence[tuple[str, Shape]]
) -> Shape:
    """The checks the three batch norms share: the feature-size vector shape ``etype[F]``.

    ``operand`` must be floating-point with ``0 <= feature_index < rank`` (ShapeError
    otherwise), and each named vector (scale, offset, mean, variance) 1-D of size
    ``F = operand.dimensions()[feature_index]`` (ShapeError) and of the operand's element type
    (DTypeError).
    """
    et = operand.element_type()
    if et not in FLOATS:
        dtype_error(op, f"operand 'operand' must be floating-point, got {operand}")
    r = operand.rank()
    if not 0 <= feature_index < r:
        shape_error(op, f"feature_index must be a dimension number in [0, {r}) of operand 'operand' {operand}, "
                    f"got {feature_index}")
    vector = array_shape(et, (operand.dimensions()[feature_index],), op)
    for name, v in vectors:
        if v.dimensions() != vector.dimensions():
            shape_error(
                op, f"operand {name!r} must be {vector} (1-D, the size of dimension {feature_index} of operand "
                f"'operand' {operand}), got {v}"
            )
        if v.element_type() is not et:
            dtype_error(op, f"operand {name!r} is {v}, expected {vector} like operand 'operand' {operand}")
    return vector


def batch_norm_training_shape(op: str, operand: Shape, scale: Shape, offset: Shape, feature_index: int) -> Shape:
    """Shape rule of BatchNormTraining: the tuple ``(operand, etype[F], etype[F])`` (output,
    batch mean, batch variance); the errors of :func:`batch_norm_check`."""
    vector = batch_norm_check(op, operand, feature_index, [("scale", scale), ("offset", offset)])
    return Shape.tuple_shape([operand, vector, vector])


BATCH_NORM_TRAINING = define(
    "stablehlo.batch_norm_training", "batch-norm-training", hlo_form=HloForm.TUPLE_RESULT,
    hlo_attrs=_batch_norm_hlo,
    rule=batch_norm_training_shape, attrs={"epsilon": AttrKind.F32, "feature_index": AttrKind.INT},
)


def batch_norm_inference_shape(
    op: str, operand: Shape, scale: Shape, offset: Shape, mean: Shape, variance: Shape, feature_index: int
) -> Shape:
    """Shape rule of BatchNormInference: the operand's shape; the errors of :func:`batch_norm_check`."""
    named = [("scale", scale), ("offset", offset), ("mean", mean), ("variance", variance)]
    batch_norm_check(op, operand, feature_index, named)
    return operand


BATCH_NORM_INFERENCE = define(
    "stablehlo.batch_norm_inference", "batch-norm-inference", hlo_attrs=_batch_norm_hlo,
    rule=batch_norm_inference_shape, attrs={"epsilon": AttrKind.F32, "feature_index": AttrKind.INT},
)


def batch_norm_grad_shape(
    op: str, operand: Shape, scale: Shape, mean: Shape, variance: Shape, grad_output: Shape, feature_index: int
) -> Shape:
    """Shape rule of BatchNormGrad: the tuple ``(operand, etype[F], etype[F])`` (grad_operand,
    grad_scale, grad_offset); the errors of :func:`batch_norm_check`, and ShapeError/DTypeError for
    a ``grad_output`` of other dimensions/element type than the operand."""
    vector = batch_norm_check(op, operand, feature_index, [("scale", scale), ("mean", mean), ("variance", variance)])
    if grad_output.dimensions() != operand.dimensions():
        shape_error(op, f"operand 'grad_output' has shape {grad_output}, expected the shape of operand 'operand' "
                    f"{operand}")
    if grad_output.element_type() is not operand.element_type():
        dtype_error(op, f"operand 'grad_output' is {grad_output}, expected {operand} like operand 'operand'")
    return Shape.tuple_shape([operand, vector, vector])


BATCH_NORM_GRAD = define(
    "stablehlo.batch_norm_grad", "batch-norm-grad", hlo_form=HloForm.TUPLE_RESULT, hlo_attrs=_batch_norm_hlo,
    rule=batch_norm_grad_shape, attrs={"epsilon": AttrKind.F32, "feature_index": AttrKind.INT},
)


def _epsilon(op: str, value: Any) -> F32:
    """``epsilon`` as an f32 attribute: a Python or numpy real number (bools and other objects raise
    DTypeError; finite values beyond the f32 range ShapeError)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        dtype_error(op, f"epsilon must be a float, got {type(value).__name__} {show(value)}")
    eps = F32(float(value))
    if np.isinf(eps) and np.isfinite(float(value)):
        shape_error(op, f"epsilon {float(value)!r} is beyond the range of f32")
    return eps


def _batch_norm(
    op: str, row: OpDef, named: list[tuple[str, Any]], epsilon: Any, feature_index: Any, rule: Callable[..., Shape]
) -> XlaOp:
    """Check the named operands, ``feature_index`` and ``epsilon``; add the node of ``row`` with
    the shape ``rule(op, *operand shapes, feature_index)`` computes."""
    xs = [(n, operand(op, n, x)) for n, x in named]
    builder = same_builder(op, xs)
    fi = int_arg(op, "feature_index", feature_index)
    eps = _epsilon(op, epsilon)
    shape = rule(op, *(x.shape for _, x in xs), fi)
    return builder.add_op(row, tuple(x for _, x in xs), shape, {"epsilon": eps, "feature_index": fi})


def BatchNormTraining(operand: XlaOp, scale: XlaOp, offset: XlaOp, epsilon: float, feature_index: int) -> XlaOp:
    """Normalize an array over every dimension but ``feature_index``, with the batch's own
    statistics (XLA ``BatchNormTraining``; ``stablehlo.batch_norm_training``).

    For each feature ``f`` (index ``f`` of dimension ``feature_index``), with ``mean[f]`` and
    ``var[f]`` the mean and (biased, divided by the element count) variance of ``operand`` over
    every other dimension: ``output = (operand - mean) / sqrt(var + epsilon) * scale + offset``.

    Parameters
    ----------
    operand: ``(d0, ..., dr-1)`` array (rank >= 1) of a floating-point type (f16, bf16, f32,
        f64...); ``F = d[feature_index]`` below.
    scale: ``(F,)`` of the operand's element type (gamma).
    offset: ``(F,)`` of the operand's element type (beta).
    epsilon: a float (Python or numpy real number), added to the variance; kept as an f32
        attribute (rounded to the nearest f32).
    feature_index: the feature dimension, in ``[0, r)``.

    Returns
    -------
    A tuple-shaped XlaOp ``(output, batch_mean, batch_var)``: ``output`` of the operand's shape,
    ``batch_mean`` and ``batch_var`` ``(F,)`` of its element type; take them with
    ``GetTupleElement(r, 0..2)``.

    Raises
    ------
    ShapeError: ``feature_index`` not an int or not in ``[0, r)``, ``scale``/``offset`` not of
        shape ``(F,)``, operands of different builders or not arrays, or a finite ``epsilon``
        beyond the f32 range.
    DTypeError: a non-floating-point operand, ``scale``/``offset`` of another element type,
        an argument that is not an XlaOp, or ``epsilon`` not a real number.
    """
    op = "BatchNormTraining"
    named = [("operand", operand), ("scale", scale), ("offset", offset)]
    return _batch_norm(op, BATCH_NORM_TRAINING, named, epsilon, feature_index, batch_norm_training_shape)


def BatchNormInference(
    operand: XlaOp,
    scale: XlaOp,
    offset: XlaOp,
    mean: XlaOp,
    variance: XlaOp,
    epsilon: float,
    feature_index: int,
) -> XlaOp:
    """Normalize an array with given per-feature statistics (XLA ``BatchNormInference``;
    ``stablehlo.batch_norm_inference``).

    ``output = (operand - mean) / sqrt(variance + epsilon) * scale + offset``, each ``(F,)``
    vector broadcast along dimension ``feature_index``.

    Parameters
    ----------
    operand: ``(d0, ..., dr-1)`` array (rank >= 1) of a floating-point type (f16, bf16, f32,
        f64...); ``F = d[feature_index]`` below.
    scale: ``(F,)`` of the operand's element type (gamma).
    offset: ``(F,)`` of the operand's element type (beta).
    mean: ``(F,)`` of the operand's element type.
    variance: ``(F,)`` of the operand's element type.
    epsilon: a float (Python or numpy real number), added to the variance; kept as an f32
        attribute (rounded to the nearest f32).
    feature_index: the feature dimension, in ``[0, r)``.

    Returns
    -------
    XlaOp of the operand's shape and element type.

    Raises
    ------
    ShapeError: ``feature_index`` not an int or not in ``[0, r)``, a vector operand not of shape
        ``(F,)``, operands of different builders or not arrays, or a finite ``epsilon`` beyond
        the f32 range.
    DTypeError: a non-floating-point operand, a vector operand of another element type, an
        argument that is not an XlaOp, or ``epsilon`` not a real number.
    """
    op = "BatchNormInference"
    named = [("operand", operand), ("scale", scale), ("offset", offset), ("mean", mean), ("variance", variance)]
    return _batch_norm(op, BATCH_NORM_INFERENCE, named, epsilon, feature_index, batch_norm_inference_shape)


def BatchNormGrad(
    operand: XlaOp,
    scale: XlaOp,
    mean: XlaOp,
    variance: XlaOp,
    grad_output: XlaOp,
    epsilon: float,
    feature_index: int,
) -> XlaOp:
    """The gradients of a batch normalization (XLA ``BatchNormGrad``; ``stablehlo.batch_norm_grad``).

    With ``N`` the element count per feature, ``sums`` over every dimension but
    ``feature_index`` and the ``(F,)`` vectors broadcast along it,
    ``xhat = (operand - mean) / sqrt(variance + epsilon)``:
    ``grad_offset = sum(grad_output)``, ``grad_scale = sum(grad_output * xhat)``,
    ``grad_operand = scale / sqrt(variance + epsilon) / N * (N * grad_output - grad_offset -
    xhat * grad_scale)``.

    Parameters
    ----------
    operand: ``(d0, ..., dr-1)`` array (rank >= 1) of a floating-point type (f16, bf16, f32,
        f64...); ``F = d[feature_index]`` below.
    scale: ``(F,)`` of the operand's element type (gamma).
    mean: ``(F,)`` of the operand's element type (the batch mean).
    variance: ``(F,)`` of the operand's element type (the batch variance).
    grad_output: the gradient of the normalized output, of the operand's shape and element type.
    epsilon: a float (Python or numpy real number), added to the variance; kept as an f32
        attribute (rounded to the nearest f32).
    feature_index: the feature dimension, in ``[0, r)``.

    Returns
    -------
    A tuple-shaped XlaOp ``(grad_operand, grad_scale, grad_offset)``: ``grad_operand`` of the
    operand's shape, ``grad_scale`` and ``grad_offset`` ``(F,)`` of its element type; take them
    with ``GetTupleElement(r, 0..2)``.

    Raises
    ------
    ShapeError: ``feature_index`` not an int or not in ``[0, r)``, a vector operand not of shape
        ``(F,)``, ``grad_output`` of other dimensions than the operand, operands of different
        builders or not arrays, or a finite ``epsilon`` beyond the f32 range.
    DTypeError: a non-floating-point operand, a vector operand or ``grad_output`` of another
        element type, an argument that is not an XlaOp, or ``epsilon`` not a real number.
    """
    op = "BatchNormGrad"
    named = [("operand", operand), ("scale", scale), ("mean", mean), ("variance", variance),
             ("grad_output", grad_output)]
    return _batch_norm(op, BATCH_NORM_GRAD, named, epsilon, feature_index, batch_norm_grad_shape)
