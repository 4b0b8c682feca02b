"""Tokens and side effects: ``CreateToken``, ``AfterAll``, ``OptimizationBarrier``,
``InfeedWithToken``, ``OutfeedWithToken`` (and ``SendToHost``/``RecvFromHost``, which
jaxlib cannot run). Custom calls are in :mod:`xlasdk.ops.custom_call`, Python host callbacks
in :mod:`xlasdk.ops.host_callback`.

A token orders side-effecting ops: an op that takes a token runs after the op that made it.
Only ops that the computation's root depends on are part of the built computation, so the
token returned by a side-effecting op (``OutfeedWithToken``) must reach the root (for example
``ops.Tuple(b, [result, token])``), and so must the result of a ``CustomCall`` with
``has_side_effect=True``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._mlir_attrs import AttrList, IntArray
from .._optable import HloForm, define
from ..builder import XlaBuilder, XlaOp, where
from ..errors import XlaSdkError
from ..shape import Shape
from ..types import PrimitiveType
from ._core import ChannelIdLike, any_operand, dtype_error, shape_error, token_operand, tuple_element, tuple_node
from .custom_call import shape_arg

__all__ = [
    "AfterAll",
    "CreateToken",
    "InfeedWithToken",
    "OptimizationBarrier",
    "OutfeedWithToken",
    "SendToHost",
    "RecvFromHost",
]


_TOKEN = Shape._make(PrimitiveType.TOKEN, ())


# -- tokens ---------------------------------------------------------------------------------------

def token_shape(op: str) -> Shape:
    """Shape rule of CreateToken and AfterAll: ``token[]``."""
    return _TOKEN


CREATE_TOKEN = define("stablehlo.create_token", constant=False, rule=token_shape)
AFTER_ALL = define("stablehlo.after_all", constant=False, rule=token_shape)


def CreateToken(builder: XlaBuilder) -> XlaOp:
    """A fresh token, for ordering side-effecting ops (XLA ``CreateToken``;
    ``stablehlo.create_token``, HLO ``after-all()``).

    Returns
    -------
    XlaOp of shape ``token[]``.

    Raises
    ------
    DTypeError: ``builder`` is not an XlaBuilder.
    """
    if not isinstance(builder, XlaBuilder):
        dtype_error("CreateToken", f"first argument must be an XlaBuilder, got {type(builder).__name__}")
    return builder.add_op(CREATE_TOKEN, (), token_shape("CreateToken"))


def AfterAll(builder: XlaBuilder, tokens: Sequence[XlaOp]) -> XlaOp:
    """A token that comes after every token of ``tokens`` (XLA ``AfterAll``;
    ``stablehlo.after_all``): joins several orderings into one.

    Parameters
    ----------
    builder: the XlaBuilder.
    tokens: a list of ``token[]`` ops of ``builder`` (may be empty: a fresh token).

    Returns
    -------
    XlaOp of shape ``token[]``.

    Raises
    ------
    DTypeError: ``builder`` is not an XlaBuilder, ``tokens`` not a list/tuple of XlaOps.
    ShapeError: an element is not a token or belongs to another builder.
    """
    op = "AfterAll"
    if not isinstance(builder, XlaBuilder):
        dtype_error(op, f"first argument must be an XlaBuilder, got {type(builder).__name__}")
    if isinstance(tokens, XlaOp) or not isinstance(tokens, (list, tuple)):
        dtype_error(op, f"tokens must be a list or tuple of token XlaOps, got {type(tokens).__name__}")
    toks = tuple(token_operand(op, f"tokens[{i}]", t, builder) for i, t in enumerate(tokens))
    return builder.add_op(AFTER_ALL, toks, token_shape("AfterAll"))


def optimization_barrier_shape(op: str, operand: Shape) -> Shape:
    """Shape rule of OptimizationBarrier: the operand's shape; ShapeError for a nested tuple."""
    if operand.is_tuple() and any(e.is_tuple() for e in operand.tuple_shapes()):
        shape_error(op, f"operand 'operand' must be an array, a token or a flat tuple, got {operand}")
    return operand


OPTIMIZATION_BARRIER = define(
    "stablehlo.optimization_barrier", "opt-barrier", hlo_form=HloForm.TUPLE_RESULT, variadic=True,
    rule=optimization_barrier_shape,
)


def OptimizationBarrier(operand: XlaOp) -> XlaOp:
    """Pass ``operand`` through unchanged while keeping XLA from moving computations across
    this point (XLA ``OptimizationBarrier``; ``stablehlo.optimization_barrier``).

    Everything ``operand`` depends on is computed before anything that uses the result.

    Parameters
    ----------
    operand: an array, a token, or a flat tuple of them (for example ``ops.Tuple(b, [x, y])``).

    Returns
    -------
    XlaOp of ``operand``'s shape and value (a tuple stays a tuple).

    Raises
    ------
    DTypeError: ``operand`` is not an XlaOp. ShapeError: a tuple nested in the tuple.
    """
    op = "OptimizationBarrier"
    x = any_operand(op, "operand", operand)
    return x.builder.add_op(OPTIMIZATION_BARRIER, (x,), optimization_barrier_shape(op, x.shape))


_NO_HOST_TRANSFER = (
    "device-to-host transfers (HLO send/recv with is_host_transfer) cannot run with jaxlib 0.10.2: "
    "XLA:CPU rejects the program (UNIMPLEMENTED: HLO opcode `send` is not supported by XLA:CPU "
    "ThunkEmitter), and jaxlib offers no way to attach the host-side send/recv callbacks to an "
    "execution from Python. Use ops.HostCallback(fn, operands, result_shapes) to hand values to "
    "Python during a run (or ops.OutfeedWithToken / ops.DebugPrint)"
)


def SendToHost(operand: XlaOp, token: XlaOp, shape_with_layout: Shape, handle: ChannelIdLike) -> XlaOp:
    """Send ``operand`` to the host (the former ``xla_client.ops.SendToHost``; XLA ``Send`` with
    ``is_host_transfer``, ``stablehlo.send``). Not available: see Raises.

    Parameters
    ----------
    operand: the array to send.
    token: orders the send after earlier side effects.
    shape_with_layout: ``operand``'s shape with the layout the host receives.
    handle: the DEVICE_TO_HOST channel handle.

    Returns
    -------
    Never returns.

    Raises
    ------
    XlaSdkError: always. XLA:CPU in jaxlib 0.10.2 cannot compile ``send``/``recv``
        ("HLO opcode `send` is not supported by XLA:CPU ThunkEmitter", checked), and jaxlib has
        no Python API to pass the host-side send callbacks an execution needs. Use
        :func:`HostCallback` instead.
    """
    raise XlaSdkError(f"SendToHost: {_NO_HOST_TRANSFER}{where()}")


def RecvFromHost(token: XlaOp, shape: Shape, handle: ChannelIdLike) -> XlaOp:
    """Receive a value of ``shape`` from the host (the former ``xla_client.ops.RecvFromHost``;
    XLA ``Recv`` with ``is_host_transfer``, ``stablehlo.recv``). Not available: see Raises.

    Parameters
    ----------
    token: orders the receive after earlier side effects.
    shape: the array shape (with layout) to receive.
    handle: the HOST_TO_DEVICE channel handle.

    Returns
    -------
    Never returns.

    Raises
    ------
    XlaSdkError: always, for the reasons given in :func:`SendToHost`. Use :func:`HostCallback`
        (its callable returns the values) instead.
    """
    raise XlaSdkError(f"RecvFromHost: {_NO_HOST_TRANSFER}{where()}")


# -- infeed / outfeed -----------------------------------------------------------------------------

def infeed_shape(op: str, shape: Shape) -> Shape:
    """Shape rule of InfeedWithToken: the ``stablehlo.infeed`` result ``(leaves..., token[])`` of
    ``shape`` (an array or a flat tuple); ShapeError for a dynamic dimension."""
    leaves = list(shape.tuple_shapes()) if shape.is_tuple() else [shape]
    if any(not x.is_static() for x in leaves):
        shape_error(op, f"shape must have static dimensions (stablehlo.infeed reads static shapes), got {shape}")
    return Shape.tuple_shape(leaves + [_TOKEN])


INFEED = define("stablehlo.infeed", side_effect=True, constant=False, rule=infeed_shape)


def InfeedWithToken(token: XlaOp, shape: Shape, config: str = "") -> XlaOp:
    """Read a value of ``shape`` from the device's infeed queue, after ``token``
    (XLA ``InfeedWithToken``; ``stablehlo.infeed``).

    Parameters
    ----------
    token: a ``token[]`` op.
    shape: the value's Shape: an array or a flat tuple of arrays (layouts, when set, are kept
        in the ``layout`` attribute).
    config: backend-specific configuration string.

    Returns
    -------
    XlaOp of tuple shape ``(shape, token[])``: take the data with ``GetTupleElement(r, 0)`` and
    the token that orders later side effects with ``GetTupleElement(r, 1)``.

    Raises
    ------
    DTypeError: ``token`` not an XlaOp, ``shape`` not a Shape, ``config`` not a str.
    ShapeError: ``token`` is not a token, ``shape`` holds tokens, nested tuples or dynamic
    dimensions (``stablehlo.infeed`` reads static shapes only).
    """
    op = "InfeedWithToken"
    t = token_operand(op, "token", token)
    s = shape_arg(op, "shape", shape, allow_token=False)
    if not isinstance(config, str):
        dtype_error(op, f"config must be a str, got {type(config).__name__}")
    raw_shape = infeed_shape(op, s)
    leaves = list(raw_shape.tuple_shapes())[:-1]
    attrs: dict[str, Any] = {"infeed_config": config.encode("utf-8")}
    if any(x.layout() is not None for x in leaves):
        lays = []
        for x in leaves:
            lay = x.layout()
            lays.append(IntArray(lay.minor_to_major() if lay is not None else range(x.rank() - 1, -1, -1)))
        attrs["layout"] = AttrList(lays)
    b = t.builder
    raw = b.add_op(INFEED, (t,), raw_shape, attrs)
    if not s.is_tuple():
        return raw
    data = tuple_node(b, [tuple_element(raw, i) for i in range(len(leaves))])
    return tuple_node(b, [data, tuple_element(raw, len(leaves))])


def outfeed_check(op: str, operand: Shape, shape_with_layout: Shape) -> None:
    """Shape rule of OutfeedWithToken: ShapeError when ``operand`` is a token or a tuple that is
    not flat of arrays, or ``shape_with_layout`` differs from it."""
    if operand.is_token():
        shape_error(op, "operand 'operand' must be an array or a tuple of arrays, got token[]")
    if operand.is_tuple():
        for e in operand.tuple_shapes():
            if not e.is_array():
                shape_error(op, f"operand 'operand' must be an array or a flat tuple of arrays, got {operand}")
    if shape_with_layout != operand:
        shape_error(op, f"shape_with_layout is {shape_with_layout}, but operand 'operand' has shape {operand}")


OUTFEED = define("stablehlo.outfeed", side_effect=True, constant=False, rule=outfeed_check)


def OutfeedWithToken(operand: XlaOp, token: XlaOp, shape_with_layout: Shape, outfeed_config: str = "") -> XlaOp:
    """Write ``operand`` to the device's outfeed queue, after ``token``
    (XLA ``OutfeedWithToken``; ``stablehlo.outfeed``).

    Parameters
    ----------
    operand: an array or a flat tuple of arrays.
    token: a ``token[]`` op of the same builder.
    shape_with_layout: ``operand``'s Shape (its layout, if any, is how the host reads it).
    outfeed_config: backend-specific configuration string.

    Returns
    -------
    XlaOp of shape ``token[]``. It must reach the computation's root (e.g. in a tuple with
    the result), otherwise the outfeed is not part of the built computation.

    Raises
    ------
    DTypeError: an argument of the wrong type. ShapeError: ``token`` is not a token,
    ``operand`` is a token or a nested tuple, operands of different builders, or
    ``shape_with_layout`` differs from ``operand``'s shape.
    """
    op = "OutfeedWithToken"
    x = any_operand(op, "operand", operand)
    t = token_operand(op, "token", token, x.builder)
    s = shape_arg(op, "shape_with_layout", shape_with_layout, allow_token=False)
    if not isinstance(outfeed_config, str):
        dtype_error(op, f"outfeed_config must be a str, got {type(outfeed_config).__name__}")
    outfeed_check(op, x.shape, s)
    if x.shape.is_tuple():
        inputs = [tuple_element(x, i) for i in range(x.shape.leaf_count())]
    else:
        inputs = [x]
    return x.builder.add_op(OUTFEED, tuple(inputs) + (t,), _TOKEN, {"outfeed_config": outfeed_config.encode("utf-8")})
