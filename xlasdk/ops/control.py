"""Tuples and control flow: ``Tuple``, ``GetTupleElement``, ``While``, ``Conditional``, ``Call``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import numpy as np

from .._optable import CALL, HloForm, define
from ..builder import Region, XlaBuilder, XlaOp
from ..shape import Shape
from ..types import PrimitiveType
from ._core import (
    ComputationLike,
    ConditionalArgument,
    any_operand,
    built_by,
    dtype_error,
    is_computation_like,
    operand,
    shape_error,
    show,
    subcomputation,
    tuple_element,
    tuple_node,
)

__all__ = ["Call", "Conditional", "GetTupleElement", "Tuple", "While"]

# Tuple, GetTupleElement and Call are graph-level rows of the op table (xlasdk._optable); the
# rows of While and Conditional sit beside their shape rules below.


def Tuple(builder: XlaBuilder, elements: Sequence[XlaOp]) -> XlaOp:
    """A tuple of ``elements`` (XLA ``tuple``; ``stablehlo.tuple`` where one value is needed).

    Returns: XlaOp of tuple shape ``(s0, s1, ...)``. As a computation's root, each element
    becomes one output of the executable.

    Raises
    ------
    DTypeError: ``builder`` is not an XlaBuilder or an element is not an XlaOp.
    ShapeError: an element belongs to another builder.
    """
    if not isinstance(builder, XlaBuilder):
        dtype_error("Tuple", f"first argument must be an XlaBuilder, got {type(builder).__name__}")
    if isinstance(elements, XlaOp) or not isinstance(elements, (list, tuple)):
        dtype_error("Tuple", f"elements must be a list or tuple of XlaOps, got {type(elements).__name__}")
    elems = tuple(any_operand("Tuple", f"elements[{i}]", e, builder) for i, e in enumerate(elements))
    return tuple_node(builder, elems)


def tuple_shape(elements: Sequence[Shape]) -> Shape:
    """Shape rule of Tuple: the tuple shape ``(s0, s1, ...)`` of ``elements`` (raises nothing)."""
    return Shape.tuple_shape(elements)


def get_tuple_element_shape(op: str, shape: Shape, index: int) -> Shape:
    """Shape rule of GetTupleElement: element ``index`` of the tuple ``shape``; ShapeError when
    ``shape`` is not a tuple or ``index`` is out of range."""
    if not shape.is_tuple():
        shape_error(op, f"operand 'tuple_data' must be a tuple, got {shape}")
    n = shape.leaf_count()
    if not 0 <= index < n:
        shape_error(op, f"index {index} out of range for tuple {shape} of {n} elements")
    return shape.tuple_shapes()[index]


def GetTupleElement(tuple_data: XlaOp, index: int) -> XlaOp:
    """Element ``index`` of a tuple-shaped op (XLA ``get-tuple-element``).

    Raises
    ------
    ShapeError: the operand is not a tuple or ``index`` is out of range.
    """
    op = "GetTupleElement"
    t = any_operand(op, "tuple_data", tuple_data)
    if not t.shape.is_tuple():  # before the index's type, as ever: the rule checks it again
        get_tuple_element_shape(op, t.shape, 0)
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
        dtype_error(op, f"index must be an int, got {show(index)}")
    i = int(index)
    get_tuple_element_shape(op, t.shape, i)  # the rule's errors; the node takes the same shape
    return tuple_element(t, i)


# -- sub-computation results ---------------------------------------------------------------------

def _not_own(op: str, name: str, computation: Any, builder: XlaBuilder) -> None:
    """Reject a computation built by the very builder it would be used in."""
    if built_by(computation, builder):
        shape_error(
            op, f"{name} {computation.name!r} was built by builder {builder.name!r} itself; build "
            "sub-computations with their own XlaBuilder (or pass a Python callable)"
        )


def _one_result(region: Region, shapes: Sequence[Shape]) -> tuple[Region, Shape]:
    """The region with exactly one result op: several returned ops become one ``Tuple``.

    The emitter returns a tuple-shaped result element by element, so the region then returns
    exactly one value per element of the result shape (nested tuples stay single values).
    """
    if len(region.results) == 1:
        return region, shapes[0]
    sub = region.results[0].builder
    t = Tuple(sub, list(region.results))
    return Region(region.params, [t], region.bindings), t.shape


def _fits(got: Shape, expected: Shape) -> bool:
    """``got`` is ``expected``, or the one element of a 1-tuple ``expected``."""
    if got == expected:
        return True
    return expected.is_tuple() and len(expected.tuple_shapes()) == 1 and got == expected.tuple_shapes()[0]


def _computation(
    op: str, name: str, computation: Any, param_shapes: Sequence[Shape], builder: XlaBuilder
) -> tuple[Region, Shape]:
    _not_own(op, name, computation, builder)
    region, shapes = subcomputation(op, name, computation, param_shapes, builder)
    return _one_result(region, shapes)


_PRED_SCALAR = Shape._make(PrimitiveType.PRED, ())


def _nested(shape: Shape) -> bool:
    return shape.is_tuple() and any(s.is_tuple() for s in shape.tuple_shapes())


# -- While -----------------------------------------------------------------------------------------

def while_shape(op: str, carry: Shape, cond_result: Shape | None = None, body_result: Shape | None = None) -> Shape:
    """Shape rule of While: the carry's shape. ShapeError for an empty or nested tuple carry, a
    ``cond_result`` (when given) other than ``pred[]``, a ``body_result`` (when given) other than
    the carry's shape (or its one element)."""
    if carry.is_tuple() and not carry.tuple_shapes():
        shape_error(op, "operand 'init' is an empty tuple; the carry needs at least one element")
    if _nested(carry):
        shape_error(
            op, f"operand 'init' has the nested tuple shape {carry}; stablehlo.while carries arrays and "
            "tokens only, so flatten the carry into one tuple of arrays"
        )
    if cond_result is not None and cond_result != _PRED_SCALAR:
        shape_error(op, f"cond returns {cond_result} but must return pred[]")
    if body_result is not None and not _fits(body_result, carry):
        shape_error(op, f"body returns {body_result} but must return the carry's shape {carry}")
    return carry


WHILE = define("stablehlo.while", "while", hlo_form=HloForm.WHILE, variadic=True, rule=while_shape)


def While(condition: ComputationLike, body: ComputationLike, init: XlaOp) -> XlaOp:
    """Repeat ``carry = body(carry)`` while ``condition(carry)`` holds (XLA ``While``; ``stablehlo.while``).

    Parameters
    ----------
    condition: the loop condition: takes the carry, returns a ``pred[]`` scalar.
    body: the loop body: takes the carry, returns the next carry (the carry's shape).
        Both are XlaComputations built by other builders with one parameter of the carry's
        shape, or Python callables of XlaOps. A callable given a tuple carry receives either one
        tuple-shaped op (if it takes one argument) or one op per element (if it takes as many
        arguments as the tuple has elements); a body returns the next carry as an XlaOp, an
        ``ops.Tuple`` or a tuple/list of XlaOps. Values of the enclosing computation cannot be
        used inside: pass them in the carry.
    init: the initial carry: an array, or a flat tuple (``ops.Tuple``) of arrays and tokens of
        any shapes and element types (nested tuples are rejected: ``stablehlo.while`` takes flat
        operands).

    Returns
    -------
    XlaOp of the carry's shape: the carry once ``condition`` is false (``init`` if it is false at
    once). For a tuple carry take the elements with ``GetTupleElement``.

    Raises
    ------
    ShapeError: ``condition`` or ``body`` does not take the carry, ``condition`` does not return
        ``pred[]``, or ``body`` does not return the carry's shape (the message names which and
        gives expected versus got); an empty or nested tuple carry.
    DTypeError: ``init`` is not an XlaOp, or ``condition``/``body`` is neither a callable nor an
        XlaComputation.
    """
    op = "While"
    x = any_operand(op, "init", init)
    b = x.builder
    carry = while_shape(op, x.shape)
    cond_region, cond_got = _computation(op, "cond", condition, [carry], b)
    while_shape(op, carry, cond_got)
    body_region, body_got = _computation(op, "body", body, [carry], b)
    result = while_shape(op, carry, cond_got, body_got)
    return b.add_op(WHILE, (x,), result, None, (cond_region, body_region))


# -- Conditional -----------------------------------------------------------------------------------

@overload
def Conditional(
    branch_index: XlaOp, branch_computations: Sequence[ComputationLike], branch_operands: Sequence[XlaOp]
) -> XlaOp: ...


@overload
def Conditional(
    pred: XlaOp, true_operand: XlaOp, true_computation: ComputationLike, false_operand: XlaOp,
    false_computation: ComputationLike,
) -> XlaOp: ...


def Conditional(*args: ConditionalArgument, **kwargs: ConditionalArgument) -> XlaOp:
    """Run one of several computations, chosen at run time (XLA ``Conditional``).

    Two forms, as in the former API:

    * ``Conditional(branch_index, branch_computations, branch_operands)``: runs
      ``branch_computations[i](branch_operands[i])`` with ``i = branch_index``; an index < 0 or
      >= N runs the last branch (N-1), as XLA does. Maps to ``stablehlo.case``. The two lists may
      also be given in the order ``(branch_index, branch_operands, branch_computations)``; they
      are told apart by their contents.
    * ``Conditional(pred, true_operand, true_computation, false_operand, false_computation)``:
      runs ``true_computation(true_operand)`` if ``pred`` else
      ``false_computation(false_operand)``. Maps to ``stablehlo.if``.

    Parameters
    ----------
    branch_index: ``s32[]`` scalar. pred: ``pred[]`` scalar (keyword ``pred`` or ``predicate``).
    branch_operands / true_operand / false_operand: one XlaOp per branch (array or tuple), the
        branch computation's single argument.
    branch_computations / true_computation / false_computation: XlaComputations built by other
        builders, or Python callables, each taking its operand and returning an XlaOp or a
        tuple/list of XlaOps; all branches must return the same shape.

    Returns
    -------
    XlaOp of the branches' result shape (a tuple shape when they return several values).

    Raises
    ------
    ShapeError: branch count mismatch, no branches, a non-scalar index/predicate, a branch
        whose parameter does not match its operand, branches returning different shapes, or a
        branch returning a nested tuple.
    DTypeError: wrong number of arguments, an index that is not s32 (in the first form) or a
        predicate that is not pred (in the second), or a computation that is neither a callable
        nor an XlaComputation.
    """
    op = "Conditional"
    names3 = ("branch_index", "branch_computations", "branch_operands")
    names5 = ("pred", "true_operand", "true_computation", "false_operand", "false_computation")
    kw = dict(kwargs)
    if "predicate" in kw:
        kw["pred"] = kw.pop("predicate")
    five = len(args) + len(kw) == 5 or any(k in kw for k in names5)
    names = names5 if five else names3
    unknown = [k for k in kw if k not in names]
    if unknown or len(args) > len(names):
        dtype_error(
            op, f"takes (branch_index, branch_computations, branch_operands) or (pred, true_operand, "
            f"true_computation, false_operand, false_computation); got {len(args)} positional arguments"
            + (f" and unknown keywords {unknown}" if unknown else "")
        )
    vals: dict[str, Any] = dict(zip(names, args, strict=False))  # fewer args: rest by keyword
    for k, v in kw.items():
        if k in vals:
            dtype_error(op, f"got multiple values for argument {k!r}")
        vals[k] = v
    missing = [k for k in names if k not in vals]
    if missing:
        dtype_error(op, f"missing arguments {missing} (form ({', '.join(names)}))")
    if five:
        return _conditional_pred(
            vals["pred"], [vals["true_operand"], vals["false_operand"]],
            [vals["true_computation"], vals["false_computation"]],
        )
    comps, opnds = vals["branch_computations"], vals["branch_operands"]
    if (
        isinstance(comps, (list, tuple)) and comps and all(isinstance(c, XlaOp) for c in comps)
        and isinstance(opnds, (list, tuple)) and all(is_computation_like(c) for c in opnds)
    ):  # (branch_index, branch_operands, branch_computations) given positionally
        comps, opnds = opnds, comps
    return _conditional_index(vals["branch_index"], opnds, comps)


def conditional_shape(op: str, branch_results: Sequence[Shape], names: Sequence[str]) -> Shape:
    """Shape rule of Conditional: the branches' one result shape; ShapeError when a branch
    (``names[k]`` returns ``branch_results[k]``) returns another shape than the first, or a
    nested tuple."""
    first = branch_results[0]
    for got, cname in zip(branch_results, names, strict=False):
        if got != first:
            shape_error(
                op, f"{cname} returns {got} but {names[0]} returns {first}; all branches must return the same shape"
            )
        if _nested(got):
            shape_error(
                op, f"{cname} returns the nested tuple {got}; branches return arrays and tokens only, so "
                "flatten the result into one tuple of arrays"
            )
    return first


IF = define("stablehlo.if", "conditional", hlo_form=HloForm.CONDITIONAL, rule=conditional_shape)
CASE = define("stablehlo.case", "conditional", hlo_form=HloForm.CONDITIONAL, rule=conditional_shape)


def if_pred_check(op: str, pred: Shape) -> None:
    """Shape rule of Conditional's predicate: ``pred[]`` (DTypeError for another element type,
    ShapeError for another rank)."""
    if pred.element_type() is not PrimitiveType.PRED:
        dtype_error(
            op, f"operand 'pred' must be pred[], got {pred} (the indexed form takes an s32 index and lists "
            "of branches)"
        )
    if pred.rank() != 0:
        shape_error(op, f"operand 'pred' must be a scalar pred[], got {pred}")


def case_index_check(op: str, index: Shape) -> None:
    """Shape rule of Conditional's branch index: ``s32[]`` (DTypeError for another element type,
    ShapeError for another rank)."""
    if index.element_type() is PrimitiveType.PRED:
        dtype_error(
            op, "operand 'branch_index' is pred; use the form (pred, true_operand, true_computation, "
            "false_operand, false_computation) for a boolean choice"
        )
    if index.element_type() is not PrimitiveType.S32:
        dtype_error(op, f"operand 'branch_index' must be s32[], got {index}")
    if index.rank() != 0:
        shape_error(op, f"operand 'branch_index' must be a scalar s32[], got {index}")


def _branch_regions(
    op: str, b: XlaBuilder, operands: Sequence[XlaOp], computations: Sequence[Any], names: Sequence[str]
) -> tuple[list[Region], Shape]:
    regions: list[Region] = []
    results: list[Shape] = []
    for x, c, cname in zip(operands, computations, names, strict=True):
        region, got = _computation(op, cname, c, [x.shape], b)
        results.append(got)
        conditional_shape(op, results, names)  # branch by branch, before the next is built
        regions.append(region.with_bindings([x]))
    return regions, conditional_shape(op, results, names)


def _conditional_pred(pred: Any, operands: list[Any], computations: list[Any]) -> XlaOp:
    op = "Conditional"
    p = operand(op, "pred", pred)
    b = p.builder
    if_pred_check(op, p.shape)
    t = any_operand(op, "true_operand", operands[0], b)
    f = any_operand(op, "false_operand", operands[1], b)
    regions, shape = _branch_regions(op, b, [t, f], computations, ["true_computation", "false_computation"])
    return b.add_op(IF, (p,), shape, None, tuple(regions))


def _conditional_index(index: Any, operands: Any, computations: Any) -> XlaOp:
    op = "Conditional"
    i = operand(op, "branch_index", index)
    b = i.builder
    case_index_check(op, i.shape)
    if isinstance(operands, XlaOp) or not isinstance(operands, (list, tuple)):
        dtype_error(op, f"branch_operands must be a list of XlaOps, got {type(operands).__name__}")
    if not isinstance(computations, (list, tuple)):
        dtype_error(op, f"branch_computations must be a list of computations, got {type(computations).__name__}")
    if not computations:
        shape_error(op, "branch_computations is empty; at least one branch is needed")
    if len(operands) != len(computations):
        shape_error(op, f"{len(computations)} branch_computations but {len(operands)} branch_operands")
    xs = [any_operand(op, f"branch_operands[{k}]", x, b) for k, x in enumerate(operands)]
    regions, shape = _branch_regions(
        op, b, xs, computations, [f"branch_computations[{k}]" for k in range(len(xs))]
    )
    return b.add_op(CASE, (i,), shape, None, tuple(regions))


# -- Call ------------------------------------------------------------------------------------------

def Call(builder: XlaBuilder, computation: ComputationLike, operands: Sequence[XlaOp] = ()) -> XlaOp:
    """Apply ``computation`` to ``operands`` (XLA ``Call``).

    Parameters
    ----------
    builder: the XlaBuilder of the caller.
    computation: an XlaComputation built by another builder, or a Python callable of XlaOps,
        taking one argument per operand (of the operand's shape) and returning an XlaOp or a
        tuple/list of XlaOps.
    operands: XlaOps of ``builder`` (arrays or tuples).

    Returns
    -------
    XlaOp of the computation's result shape (a tuple shape for several results).

    The callee's graph is inlined into the caller when the module is emitted (each Call gets
    its own copy), so the HLO shows the callee's instructions rather than a ``call``.

    Raises
    ------
    ShapeError: the computation's parameters do not match the operands' shapes, an operand of
        another builder, or a computation built by ``builder`` itself.
    DTypeError: ``builder`` is not an XlaBuilder, an operand is not an XlaOp, or
        ``computation`` is neither a callable nor an XlaComputation.
    """
    op = "Call"
    if not isinstance(builder, XlaBuilder):
        dtype_error(op, f"first argument must be an XlaBuilder, got {type(builder).__name__}")
    if isinstance(operands, XlaOp) or not isinstance(operands, (list, tuple)):
        dtype_error(op, f"operands must be a list or tuple of XlaOps, got {type(operands).__name__}")
    xs = tuple(any_operand(op, f"operands[{k}]", x, builder) for k, x in enumerate(operands))
    region, shape = _computation(op, "computation", computation, [x.shape for x in xs], builder)
    return builder.add_op(CALL, xs, shape, None, (region,))
