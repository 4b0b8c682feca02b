"""Shared machinery of the op wrappers: operand checks, errors naming the user's line, attribute
spelling, and sub-computations.

An op wrapper is: check operands (``operand``/``same_builder``), compute the result shape with
the op's shape rule (raising ``ShapeError``/``DTypeError`` through :func:`shape_error` and
:func:`dtype_error`), then ``builder._add(opcode, operands, shape, attrs)``.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any, NoReturn

import numpy as np

from ..builder import Region, XlaBuilder, XlaOp, where
from ..errors import DTypeError, ShapeError
from ..shape import Shape
from ..types import COMPLEX, FLOATS, INTS, PrimitiveType

__all__ = [
    "shape_error",
    "dtype_error",
    "operand",
    "same_builder",
    "int_list",
    "i64_array",
    "i64",
    "dense_i64",
    "array_shape",
    "subcomputation",
    "is_float",
    "is_int",
    "is_complex",
    "PRED",
]

PRED = PrimitiveType.PRED


def shape_error(op: str, msg: str) -> NoReturn:
    """Raise ``ShapeError("Op: msg — at file.py:42")``."""
    raise ShapeError(f"{op}: {msg}{where()}")


def dtype_error(op: str, msg: str) -> NoReturn:
    """Raise ``DTypeError("Op: msg — at file.py:42")``."""
    raise DTypeError(f"{op}: {msg}{where()}")


def operand(op: str, name: str, x: Any, builder: XlaBuilder | None = None) -> XlaOp:
    """Check that ``x`` is an XlaOp (of ``builder`` when given) holding an array."""
    if not isinstance(x, XlaOp):
        dtype_error(op, f"operand {name!r} must be an XlaOp, got {type(x).__name__}")
    if builder is not None and x.builder is not builder:
        shape_error(
            op, f"operand {name!r} belongs to builder {x.builder.name!r}, but the op is built in {builder.name!r}"
        )
    if not x.shape.is_array():
        shape_error(op, f"operand {name!r} must be an array, got {x.shape}")
    return x


def any_operand(op: str, name: str, x: Any, builder: XlaBuilder | None = None) -> XlaOp:
    """Like :func:`operand` but tuples and tokens are accepted."""
    if not isinstance(x, XlaOp):
        dtype_error(op, f"operand {name!r} must be an XlaOp, got {type(x).__name__}")
    if builder is not None and x.builder is not builder:
        shape_error(
            op, f"operand {name!r} belongs to builder {x.builder.name!r}, but the op is built in {builder.name!r}"
        )
    return x


def same_builder(op: str, named: Sequence[tuple[str, XlaOp]]) -> XlaBuilder:
    """The common builder of the named operands (ShapeError when they differ)."""
    b = named[0][1].builder
    for name, x in named[1:]:
        if x.builder is not b:
            shape_error(
                op,
                f"operand {name!r} belongs to builder {x.builder.name!r}, but {named[0][0]!r} belongs to "
                f"{b.name!r}",
            )
    return b


def int_list(op: str, name: str, value: Any) -> tuple[int, ...]:
    """A tuple of Python ints from a sequence of ints (ShapeError otherwise)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),)
    try:
        out = tuple(int(v) for v in value if not isinstance(v, bool) and isinstance(v, (int, np.integer)))
        if len(out) != len(value):
            raise TypeError
    except TypeError:
        shape_error(op, f"{name} must be a sequence of ints, got {value!r}")
    return out


def i64_array(values: Sequence[int]) -> str:
    """MLIR ``array<i64: 1, 2>`` (DenseI64ArrayAttr)."""
    if not values:
        return "array<i64>"
    return "array<i64: " + ", ".join(str(int(v)) for v in values) + ">"


def i64(value: int) -> str:
    return f"{int(value)} : i64"


def dense_i64(values: Sequence[int] | Sequence[Sequence[int]]) -> str:
    """MLIR ``dense<[..]> : tensor<Nxi64>`` for a flat or 2-D list of ints."""
    arr = np.asarray(values, dtype=np.int64)
    dims = "".join(f"{d}x" for d in arr.shape)
    return f"dense<{arr.tolist()}> : tensor<{dims}i64>".replace("'", "")


def array_shape(etype: PrimitiveType, dims: Sequence[int]) -> Shape:
    return Shape._make(etype, tuple(dims))


def is_float(e: PrimitiveType) -> bool:
    return e in FLOATS


def is_int(e: PrimitiveType) -> bool:
    return e in INTS


def is_complex(e: PrimitiveType) -> bool:
    return e in COMPLEX


# -- sub-computations ----------------------------------------------------------------------------

def subcomputation(
    op: str,
    name: str,
    computation: Any,
    param_shapes: Sequence[Shape],
    parent: XlaBuilder,
) -> tuple[Region, list[Shape]]:
    """A region from an ``XlaComputation`` or a Python callable, checked against ``param_shapes``.

    A callable is called with one Parameter op per entry of ``param_shapes`` (a tuple-shaped
    entry is passed as a single tuple-shaped op if the callable takes exactly as many
    arguments as there are entries, else unpacked when it takes one argument per element).
    It may return an XlaOp or a tuple/list of them. Returns the region and the result shapes
    (one per returned value; a tuple-shaped returned value stays one entry).

    Raises
    ------
    ShapeError: the computation's parameters do not match ``param_shapes``.
    DTypeError: ``computation`` is neither a callable nor an XlaComputation, or the callable
    returned something other than XlaOps.
    """
    from ..computation import XlaComputation

    if isinstance(computation, XlaComputation):
        region = computation._region()
        got = [p.shape for p in region.params]
        if len(got) != len(param_shapes) or any(g != e for g, e in zip(got, param_shapes, strict=False)):
            shape_error(
                op,
                f"{name} {computation.name!r} takes ({', '.join(map(str, got))}) but must take "
                f"({', '.join(map(str, param_shapes))})",
            )
        return region, [r.shape for r in region.results]
    if not callable(computation):
        dtype_error(op, f"{name} must be an XlaComputation or a callable, got {type(computation).__name__}")
    sub = XlaBuilder(f"{parent.name}.{name}")
    params = [sub._add_parameter(i, s, f"p{i}") for i, s in enumerate(param_shapes)]
    args: list[XlaOp] = params
    try:
        sig = inspect.signature(computation)
        nparams = len(
            [
                p
                for p in sig.parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
            ]
        )
        has_var = any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values())
    except (TypeError, ValueError):
        nparams, has_var = len(params), True
    if (
        len(params) == 1
        and params[0].shape.is_tuple()
        and not has_var
        and nparams == params[0].shape.leaf_count()
        and nparams != 1
    ):
        from .control import GetTupleElement

        args = [GetTupleElement(params[0], i) for i in range(nparams)]
    elif not has_var and nparams != len(args):
        shape_error(
            op,
            f"{name} {getattr(computation, '__name__', 'callable')} takes {nparams} arguments but "
            f"{len(args)} are passed ({', '.join(map(str, param_shapes))})",
        )
    out = computation(*args)
    if isinstance(out, XlaOp):
        results = [out]
    elif isinstance(out, (tuple, list)) and out and all(isinstance(o, XlaOp) for o in out):
        results = list(out)
    else:
        dtype_error(op, f"{name} must return an XlaOp or a tuple/list of XlaOps, got {type(out).__name__}")
    for r in results:
        if r.builder is not sub:
            shape_error(
                op,
                f"{name} returned an op of builder {r.builder.name!r}; build sub-computation ops from its "
                "arguments (values of the enclosing computation cannot be captured)",
            )
    return Region(params, results), [r.shape for r in results]
