"""Shared machinery of the op wrappers: operand checks, errors naming the user's line, attribute
spelling, and sub-computations.

An op wrapper is: check operands (``operand``/``same_builder``), compute the result shape with
the op's shape rule (raising ``ShapeError``/``DTypeError`` through :func:`shape_error` and
:func:`dtype_error`), then ``builder.add_op(OPDEF, operands, shape, attrs)`` with the op's row of
the op table (:mod:`xlasdk._optable`) and its attributes as typed values.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, Protocol

import numpy as np

from .._optable import GET_TUPLE_ELEMENT, TUPLE
from ..builder import Computation, Region, XlaBuilder, XlaOp, where
from ..errors import DTypeError, ShapeError, XlaSdkError
from ..shape import _WIDTH, MAX_ARRAY_BYTES, Layout, Shape, array_size_problem
from ..types import COMPLEX, FLOATS, INTS, PrimitiveType, show

__all__ = [
    "shape_error",
    "dtype_error",
    "operand",
    "same_builder",
    "any_operand",
    "token_operand",
    "int_list",
    "opt_int_list",
    "int_tuples",
    "enum_arg",
    "dimension_fields",
    "int_arg",
    "bool_arg",
    "is_index",
    "is_sequence",
    "show",
    "INT64_MIN",
    "INT64_MAX",
    "MAX_PARAMETER_NUMBER",
    "MAX_PARTICIPANTS",
    "MAX_INT_LIST",
    "array_shape",
    "subcomputation",
    "ComputationLike",
    "ChannelHandleLike",
    "ChannelIdLike",
    "LayoutLike",
    "LiteralLike",
    "ConditionalArgument",
    "is_computation_like",
    "computation_region",
    "built_by",
    "tuple_node",
    "tuple_element",
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


def token_operand(op: str, name: str, x: Any, builder: XlaBuilder | None = None) -> XlaOp:
    """Check that ``x`` is an XlaOp (of ``builder`` when given) holding a token."""
    t = any_operand(op, name, x, builder)
    if not t.shape.is_token():
        shape_error(op, f"operand {name!r} must be a token, got {t.shape}")
    return t


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


# -- argument normalization ---------------------------------------------------------------------
# Every integer, flag and integer list an op takes goes through these: Python ints and numpy
# integer scalars are accepted, bools, floats, strings, None and other objects are refused with an
# xlasdk error naming the op and the argument, and every int must fit in int64 (XLA's attributes
# are int64). Ops then check their own ranges (dimension numbers, sizes >= 0...).

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
#: Parameter numbers are below 2**31 (MLIR function arguments and XLA's builders index them in 32 bits).
MAX_PARAMETER_NUMBER = 2**31 - 1
#: Collectives: replica, partition and device ids are below 2**20 and groups have at most 2**20
#: members (``shard_count``, ``split_count``). xlasdk writes every id of the groups it makes into
#: the module, so these bound the text a single integer can make it write.
MAX_PARTICIPANTS = 2**20
#: The longest integer list an op takes: its lists hold one entry per dimension of an array
#: (dimension numbers, sizes, strides, permutations, window sizes...). XLA sets no limit on an
#: array's rank, but compiling one grows faster than its rank (a transpose of a rank-1000 array
#: compiles in 0.5 s on XLA:CPU, of rank 4000 in 17 s) and numpy, which holds xlasdk's arguments
#: and results, gives an array at most 64 dimensions. :func:`int_list` checks a list's ``len()``
#: against it before reading its entries (a lazy ``range(2**40)`` was read for a minute, to a
#: ``MemoryError``).
MAX_INT_LIST = 4096


def is_index(value: Any) -> bool:
    """A Python int or numpy integer scalar, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_sequence(value: Any) -> bool:
    """A list, tuple, range or other ``Sequence`` that is not a string, or a numpy array of rank >= 1."""
    if isinstance(value, np.ndarray):
        return value.ndim >= 1
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray))


def _fail(error: type[Exception], op: str, msg: str) -> NoReturn:
    raise error(f"{op}: {msg}{where()}")


def _range_text(lo: int, hi: int) -> str:
    if lo == INT64_MIN and hi == INT64_MAX:
        return "an int64 (in [-2**63, 2**63))"
    if hi == INT64_MAX:
        return f">= {lo}"
    return f"in [{lo}, {hi}]"


def int_arg(
    op: str,
    name: str,
    value: Any,
    *,
    lo: int = INT64_MIN,
    hi: int = INT64_MAX,
    error: type[Exception] = ShapeError,
    show_type: bool = True,
) -> int:
    """One int argument (a Python int or numpy integer, or an object with ``__index__``), in
    ``[lo, hi]``. A wrong type raises ``error``, an out-of-range value ShapeError."""
    v: int | None = None
    if not isinstance(value, (bool, np.bool_)):
        try:
            v = operator.index(value)
        except Exception:  # TypeError, or anything a user __index__ raises
            v = None
    if v is None:
        got = f"{type(value).__name__} {show(value)}" if show_type else show(value)
        _fail(error, op, f"{name} must be an int, got {got}")
    if not lo <= v <= hi:
        shape_error(op, f"{name} must be {_range_text(lo, hi)}, got {v}")
    return v


def bool_arg(op: str, name: str, value: Any, error: type[Exception] = DTypeError) -> bool:
    """A flag: a Python or numpy bool (ints, None and other objects raise ``error``)."""
    if not isinstance(value, (bool, np.bool_)):
        _fail(error, op, f"{name} must be a bool, got {show(value)}")
    return bool(value)


def _check_length(op: str, name: str, value: Any) -> None:
    """ShapeError for a sequence of more than :data:`MAX_INT_LIST` entries, from its ``len()``."""
    try:
        n = len(value)
    except OverflowError:  # range(2**70): more entries than an index holds
        n = None
    except Exception:  # noqa: BLE001 - a user Sequence whose __len__ fails: not read further
        shape_error(op, f"{name} must be a sequence of ints with a length, got {show(value)}")
    if n is None or n > MAX_INT_LIST:
        count = "more than 2**63" if n is None else str(n)
        shape_error(op, f"{name} has {count} entries, expected at most {MAX_INT_LIST} (one per dimension of an "
                        f"array), got {show(value)}")


def int_list(
    op: str,
    name: str,
    value: Any,
    *,
    lo: int = INT64_MIN,
    hi: int = INT64_MAX,
    error: type[Exception] = ShapeError,
) -> tuple[int, ...]:
    """A tuple of ints from a sequence of ints (list, tuple, range, 1-D integer numpy array; a
    single int is a one-element list), each in ``[lo, hi]``.

    Anything else (strings, sets, dicts, generators, nested lists, floats, bools, None inside)
    raises ``error`` ("NAME must be a sequence of ints"), an int out of range ShapeError naming
    its position, a sequence of more than :data:`MAX_INT_LIST` entries ShapeError (before any
    entry is read).
    """
    if is_sequence(value):
        _check_length(op, name, value)
    if type(value) is tuple or type(value) is list:  # the common case: Python ints in range
        for v in value:
            if type(v) is not int or not lo <= v <= hi:
                break
        else:
            return tuple(value)
    if is_index(value):
        items: Any = (value,)
    elif not is_sequence(value):
        _fail(error, op, f"{name} must be a sequence of ints, got {show(value)}")
    else:
        items = value
    out: list[int] = []
    try:
        for v in items:
            if not is_index(v):
                _fail(error, op, f"{name} must be a sequence of ints, got {show(value)}")
            out.append(int(v))
    except TypeError:  # a 0-d numpy array, or a Sequence whose iteration fails
        _fail(error, op, f"{name} must be a sequence of ints, got {show(value)}")
    for i, v in enumerate(out):
        if not lo <= v <= hi:
            what = name if is_index(value) else f"{name}[{i}]"
            shape_error(op, f"{what} must be {_range_text(lo, hi)}, got {v}")
    return tuple(out)


def int_tuples(
    op: str, name: str, value: Any, what: str, sizes: tuple[int, ...] | None = None
) -> list[tuple[int, ...]]:
    """A list of int tuples from a sequence of sequences of ints (paddings, replica groups),
    each of a length in ``sizes`` when given (``what`` describes one entry for the messages:
    "a (lo, hi) pair of ints"). Every int must fit in int64. ShapeError otherwise, naming the
    entry (``padding[1]``) or the element (``padding[1][0]``)."""
    if not is_sequence(value):
        shape_error(op, f"{name} must be a sequence of entries, each {what}, got {show(value)}")
    out: list[tuple[int, ...]] = []
    for i, entry in enumerate(value):
        if not is_sequence(entry):
            shape_error(op, f"{name}[{i}] must be {what}, got {show(entry)}")
        items = list(entry)
        if sizes is not None and len(items) not in sizes:
            shape_error(op, f"{name}[{i}] must be {what}, got {show(entry)}")
        out.append(tuple(int_arg(op, f"{name}[{i}][{j}]", v) for j, v in enumerate(items)))
    return out


def enum_arg(op: str, cls: Any, value: Any, prefix: str = "") -> Any:
    """The member of the attribute enum ``cls`` (``xs.ComparisonDirection``, ``xs.FftType``...)
    that ``value`` names: a member, its name (any case) or its number. Anything else, or an
    unknown name, raises ShapeError "Op: {prefix}..." listing the valid names."""
    if isinstance(value, cls):
        return value
    if isinstance(value, str) or is_index(value):
        try:
            return cls.parse(value)
        except ShapeError as e:
            shape_error(op, f"{prefix}{e}")
    names = ", ".join(cls.__members__)
    shape_error(op, f"{prefix}{cls.__name__} must be one of {names}, got {type(value).__name__} {show(value)}")


def dimension_fields(op: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The fields of a dimension-numbers object (Gather, Scatter, Convolution; proto-style
    objects can hold anything), checked: ``*_dimension`` and ``index_vector_dim`` an int, the
    others a sequence of ints (ShapeError "Op: dimension_numbers.FIELD must be ...")."""
    out: dict[str, Any] = {}
    for k, v in fields.items():
        if k.endswith("_dimension") or k == "index_vector_dim":
            out[k] = int_arg(op, f"dimension_numbers.{k}", v)
        else:
            out[k] = list(int_list(op, f"dimension_numbers.{k}", v))
    return out


def opt_int_list(op: str, name: str, value: Any, default: tuple[int, ...], **kw: Any) -> tuple[int, ...]:
    """:func:`int_list`, or ``default`` when ``value`` is None or empty."""
    if value is None:
        return default
    out = int_list(op, name, value, **kw)
    return out if out else default


def array_shape(etype: PrimitiveType, dims: Sequence[int], op: str = "") -> Shape:
    """The array shape ``etype[dims]`` of an op's result (or of a value it makes).

    Raises ShapeError naming ``op`` when the array is too large for XLA (more than 2**62 bytes,
    see :data:`xlasdk.shape.MAX_ARRAY_BYTES`): nothing with such a shape reaches XLA, which
    aborts the process on it.
    """
    d = tuple(dims)
    n = _WIDTH[etype]
    for x in d:
        if x > 1:
            n *= x
    if n > MAX_ARRAY_BYTES:
        shape_error(op or "xlasdk", f"the result shape {array_size_problem(etype, d)}")
    s = Shape._make(etype, d)
    s._nbytes = n
    return s


def is_float(e: PrimitiveType) -> bool:
    return e in FLOATS


def is_int(e: PrimitiveType) -> bool:
    return e in INTS


def is_complex(e: PrimitiveType) -> bool:
    return e in COMPLEX


# -- graph plumbing ---------------------------------------------------------------------------------
# The nodes of the op table's graph-level TUPLE and GET_TUPLE_ELEMENT rows, for op families that
# pack or unpack tuples of ops they already checked. The public ``ops.Tuple`` and
# ``ops.GetTupleElement`` check their arguments (with the user's error messages), then call these.


def tuple_node(builder: XlaBuilder, elements: Sequence[XlaOp]) -> XlaOp:
    """A ``TUPLE`` node of ``elements``, of tuple shape ``(s0, s1, ...)``.

    No checks: ``builder`` must be an XlaBuilder and ``elements`` XlaOps of that builder.
    """
    elems = tuple(elements)
    return builder.add_op(TUPLE, elems, Shape.tuple_shape([e.shape for e in elems]))


def tuple_element(op: XlaOp, index: int) -> XlaOp:
    """A ``GET_TUPLE_ELEMENT`` node: element ``index`` of the tuple-shaped ``op``.

    No checks: ``op`` must be tuple-shaped and ``0 <= index <`` its number of elements.
    """
    return op.builder.add_op(GET_TUPLE_ELEMENT, (op,), op.shape.tuple_shapes()[index], extra=index)


# -- sub-computations ----------------------------------------------------------------------------
# The op wing knows computations through the interface :class:`xlasdk.builder.Computation` (name,
# source_format, graph()); it never imports ``xlasdk.program.computation``.


#: What an op takes as a sub-computation (reducer, comparator, loop body, branch): a built
#: :class:`~xlasdk.builder.Computation` (an ``XlaComputation``) or a Python callable of XlaOps
#: returning an XlaOp or a tuple/list of them.
ComputationLike = Computation | Callable[..., Any]


# -- the other forms op arguments take (named, so signatures say what goes in) --------------------


class ChannelHandleLike(Protocol):
    """A channel handle: anything with an int ``handle`` (``xla_client.ChannelHandle``, the
    former API's ``ChannelHandle`` proto, :class:`xlasdk.ops.collectives.ChannelHandle`)."""

    @property
    def handle(self) -> int: ...


#: A collective's ``channel_id``: an int >= 1 or a channel handle.
ChannelIdLike = int | np.integer[Any] | ChannelHandleLike

#: A result layout the collectives accept (the default row-major one only): a
#: :class:`~xlasdk.Shape` with its layout, a :class:`~xlasdk.Layout`, or the minor_to_major
#: dimension numbers.
LayoutLike = Shape | Layout | Sequence[int]

#: A constant's value: a numpy array or scalar of any XLA dtype, a Python scalar (``bool``,
#: ``int``, ``float``, ``complex``) or a nested list of numbers (``ConstantLiteral`` makes a tuple
#: of a Python tuple).
LiteralLike = np.ndarray[Any, Any] | np.generic | bool | int | float | complex | Sequence[Any]

#: One argument of ``Conditional``'s two forms: an operand or a predicate/index (an XlaOp), a
#: branch (:data:`ComputationLike`), or a list of operands or branches.
ConditionalArgument = XlaOp | ComputationLike | Sequence[XlaOp] | Sequence[ComputationLike]


def is_computation_like(value: Any) -> bool:
    """A sub-computation argument: a :class:`~xlasdk.builder.Computation` or a Python callable
    (an XlaOp is not one)."""
    return isinstance(value, Computation) or (callable(value) and not isinstance(value, XlaOp))


def computation_region(computation: Computation) -> Region:
    """The graph of a built ``computation`` as a region body (a reducer, comparator, loop body).

    Raises
    ------
    XlaSdkError: ``computation`` was loaded from a file (or made from a loaded or imported graph):
        only computations built with an XlaBuilder can be used as sub-computations.
    """
    if computation.source_format is not None:
        raise XlaSdkError(
            f"computation {computation.name!r} was loaded from a file; only computations built with an "
            "XlaBuilder can be used as sub-computations"
        )
    return computation.graph().region()


def built_by(computation: Any, builder: XlaBuilder) -> bool:
    """Whether ``computation`` is a computation built by ``builder`` itself (which cannot be its
    own sub-computation)."""
    return (
        isinstance(computation, Computation)
        and computation.source_format is None
        and computation.graph().root.builder is builder
    )



def subcomputation(
    op: str,
    name: str,
    computation: Any,
    param_shapes: Sequence[Shape],
    parent: XlaBuilder,
) -> tuple[Region, list[Shape]]:
    """A region from a :class:`~xlasdk.builder.Computation` (an ``XlaComputation``) or a Python
    callable, checked against ``param_shapes``.

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
    if isinstance(computation, Computation):
        region = computation_region(computation)
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
        args = [tuple_element(params[0], i) for i in range(nparams)]
    elif not has_var and nparams != len(args):
        shape_error(
            op,
            f"{name} {getattr(computation, '__name__', 'callable')} takes {nparams} arguments but "
            f"{len(args)} are passed ({', '.join(map(str, param_shapes))})",
        )
    try:
        out = computation(*args)
    except XlaSdkError:
        raise
    except Exception as e:  # the callable cannot be called with these arguments, or failed
        what = getattr(computation, "__name__", type(computation).__name__)
        dtype_error(
            op, f"{name} {what} raised {type(e).__name__} when called with ({', '.join(map(str, param_shapes))}): "
            f"{str(e)[:300]}"
        )
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
