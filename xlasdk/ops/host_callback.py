"""Python host callbacks: ``HostCallback`` (a Python function called during execution, through
jaxlib's ``xla_ffi_python_cpu_callback`` FFI custom call) and ``DebugPrint`` built on it."""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import numpy as np

from .._mlir_attrs import I32
from ..builder import XlaBuilder, XlaOp
from ..shape import Shape
from ..types import PrimitiveType
from ._core import bool_arg, dtype_error, operand, shape_error, show, token_operand, tuple_element, tuple_node
from .custom_call import CUSTOM_CALL, CustomCallApiVersion, HostCallbackSpec
from .side_effects import CreateToken

__all__ = ["HostCallback", "DebugPrint"]

_TOKEN = Shape._make(PrimitiveType.TOKEN, ())


def _callback_name(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    return repr(str(name)[:200])


def _result_specs(op: str, result_shapes: Any) -> tuple[list[Shape], bool]:
    """The result Shapes of a host callback and whether ``result_shapes`` was a single Shape."""
    if isinstance(result_shapes, Shape):
        shapes, single = [result_shapes], True
    elif isinstance(result_shapes, (list, tuple)):
        shapes, single = list(result_shapes), False
    else:
        dtype_error(op, f"result_shapes must be a Shape or a list of Shapes, got {type(result_shapes).__name__}")
    for i, s in enumerate(shapes):
        what = "result_shapes" if single else f"result_shapes[{i}]"
        if not isinstance(s, Shape):
            dtype_error(op, f"{what} must be a Shape, got {type(s).__name__}")
        if not s.is_array():
            shape_error(op, f"{what} must be an array shape, got {s}")
        if not s.is_static():
            shape_error(op, f"{what} must be a static shape, got {s}")
    return shapes, single


def HostCallback(
    fn: Callable[..., Any],
    operands: Sequence[XlaOp],
    result_shapes: Shape | Sequence[Shape],
    *,
    has_side_effect: bool = False,
    token: XlaOp | None = None,
    builder: XlaBuilder | None = None,
) -> XlaOp:
    """Call the Python function ``fn`` on the host while the computation runs (XLA ``CustomCall``
    to jaxlib's typed-FFI target ``xla_ffi_python_cpu_callback``; ``stablehlo.custom_call``).

    ``fn`` receives one read-only, C-contiguous numpy array per operand (a copy: it may keep
    them) and returns the results: one array-like when ``result_shapes`` is a single Shape, else
    a tuple or list with one per Shape (``None`` or ``()`` for no results). numpy arrays must
    have the result's dtype and shape exactly; Python scalars and lists are converted to the
    result's dtype when that keeps the kind of number. Strided, transposed and Fortran-ordered
    arrays are fine. ``fn`` runs on an XLA thread, once per execution (once per device with
    replicas), holding the GIL.

    Parameters
    ----------
    fn: the Python callable.
    operands: list of array XlaOps of one builder (any shape and element type).
    result_shapes: a static array Shape (the op is that array), or a list of them (the op is a
        tuple of them, taken with ``GetTupleElement``).
    has_side_effect: XLA keeps the call even when nothing uses its results, never merges two
        calls and never calls it speculatively. A call with no results and no token always
        has a side effect. With no token, side-effecting calls are not ordered among
        themselves.
    token: a ``token[]`` op: the call runs after the side effects that made the token, and the
        op's last tuple element is a new token for what must come after it.
    builder: the builder, needed only when there are no operands and no token.

    Returns
    -------
    XlaOp: the result array (single Shape, no token), or a tuple ``(r0, r1, ..., token[])``
    of the results followed by the new token when ``token`` is given.

    Raises
    ------
    DTypeError: ``fn`` not callable, operands not XlaOps, result_shapes not Shapes.
    ShapeError: operands of several builders, a tuple or token operand, a tuple or dynamic
    result shape, ``token`` not a token.
    At run time (from the executable's call) :class:`xlasdk.errors.HostCallbackError`
    (an ``xs.XlaRuntimeError``) when ``fn`` raises or returns values of the wrong number,
    shape or dtype; ``.exception`` holds the exception. Executables that call host
    callbacks run on CPU, are compiled in this process, and are never cached or serialized.
    """
    op = "HostCallback"
    if not callable(fn):
        dtype_error(op, f"fn must be callable, got {type(fn).__name__}")
    if isinstance(operands, XlaOp) or not isinstance(operands, (list, tuple)):
        dtype_error(op, f"operands must be a list or tuple of XlaOps, got {type(operands).__name__}")
    b = _callback_builder(op, builder, operands, token)
    xs = [operand(op, f"operands[{i}]", x, b) for i, x in enumerate(operands)]
    tok = None if token is None else token_operand(op, "token", token, b)
    shapes, single = _result_specs(op, result_shapes)
    side_effect = bool_arg(op, "has_side_effect", has_side_effect) or (not shapes and tok is None)
    from .._jaxlib.callbacks import CALL_TARGET, PyCallback

    specs = [(s.dimensions(), s.numpy_dtype()) for s in shapes]
    cb = PyCallback(fn, _callback_name(fn), specs, single=single, token=tok is not None)
    leaves = ([_TOKEN] if tok is not None else []) + shapes
    raw_shape = leaves[0] if len(leaves) == 1 else Shape.tuple_shape(leaves)
    attrs: dict[str, Any] = {"call_target_name": CALL_TARGET.encode("utf-8")}
    if side_effect:
        attrs["has_side_effect"] = True
    attrs["api_version"] = I32(int(CustomCallApiVersion.API_VERSION_TYPED_FFI))
    ins = tuple(([tok] if tok is not None else []) + xs)
    raw = b.add_op(CUSTOM_CALL, ins, raw_shape, attrs, extra=HostCallbackSpec(cb))
    if tok is None:
        return raw if (single or len(leaves) != 1) else tuple_node(b, [raw])
    if len(leaves) == 1:  # only the token
        return tuple_node(b, [raw])
    parts = [tuple_element(raw, i) for i in range(len(leaves))]
    return tuple_node(b, parts[1:] + parts[:1])


def _callback_builder(op: str, builder: Any, operands: Sequence[Any], token: Any) -> XlaBuilder:
    """The builder of a callback op: ``builder``, else that of ``operands[0]``, else of ``token``
    (DTypeError when none is an XlaBuilder / XlaOp)."""
    if builder is not None and not isinstance(builder, XlaBuilder):
        dtype_error(op, f"builder must be an XlaBuilder, got {type(builder).__name__}")
    b = builder
    if b is None and operands:
        first = operands[0]
        b = first.builder if isinstance(first, XlaOp) else None
    if b is None and token is not None:
        b = token.builder if isinstance(token, XlaOp) else None
    if b is None and operands:
        operand(op, "operands[0]", operands[0])  # not an XlaOp: say so
    if b is None:
        dtype_error(op, "give builder= when there are no operands and no token")
    return b


_print_chain: weakref.WeakKeyDictionary[XlaBuilder, XlaOp] = weakref.WeakKeyDictionary()


def DebugPrint(
    fmt: str,
    *operands: XlaOp,
    token: XlaOp | None = None,
    file: TextIO | None = None,
    builder: XlaBuilder | None = None,
) -> XlaOp:
    """Print ``fmt.format(*values)`` when the computation runs, each value the numpy array of
    an operand (a :func:`HostCallback` with a side effect).

    ``ops.DebugPrint("step {}: loss={:.4f} w=\\n{}", i, loss, w)`` prints with numpy's
    formatting (``str`` of the array, or the format spec applied to a 0-d value, so ``{:.4f}``
    works on scalars). Prints of one builder come out in the order they were built: each
    takes the token of the builder's previous print (or ``token`` when given) and returns the
    next one. Inside a sub-computation (a While body, a branch) the prints run each time it
    runs.

    Parameters
    ----------
    fmt: a ``str.format`` string with one ``{}`` field per operand (``{0}``, ``{1:.3f}``...).
    *operands: array XlaOps of one builder.
    token: order after this token instead of after the builder's previous print.
    file: a text stream to write to (default ``sys.stdout`` at run time); each print is
        one ``write`` of the line and a newline, then ``flush``.
    builder: the builder, needed only when there are no operands and no token.

    Returns
    -------
    XlaOp ``token[]``: the print's token (order later side effects after it, if you wish;
    the print runs whether or not it is used). A print does not become the default root of
    ``b.build()``: that stays the last other op built.

    Raises
    ------
    DTypeError: ``fmt`` not a str, an operand not an XlaOp. ShapeError: ``fmt`` does not format
    with the operands (a field without an operand, a bad spec...), operands of several
    builders, or a tuple or token operand.
    At run time, a failing format (say ``{:d}`` of a float array) raises
    :class:`xlasdk.errors.HostCallbackError` from the call.
    """
    op = "DebugPrint"
    if not isinstance(fmt, str):
        dtype_error(op, f"fmt must be a str, got {type(fmt).__name__}")
    if file is not None and not callable(getattr(file, "write", None)):
        dtype_error(op, f"file must be a text stream with write(), got {type(file).__name__}")
    b = _callback_builder(op, builder, operands, token)
    xs = [operand(op, f"operands[{i}]", x, b) for i, x in enumerate(operands)]
    try:  # check the fields now, with zero values of the operands' shapes (broadcast: no memory)
        fmt.format(*(_PrintValue(np.broadcast_to(np.zeros((), x.dtype), x.shape.dimensions())) for x in xs))
    except (IndexError, KeyError, ValueError, TypeError) as e:
        shape_error(op, f"fmt {show(fmt)} does not format {len(xs)} operands: {type(e).__name__}: {e}")
    last = b._last  # restored below: a print is not the default root
    tok = token_operand(op, "token", token, b) if token is not None else _print_chain.get(b)
    if tok is None:
        tok = CreateToken(b)

    def debug_print(*values: np.ndarray[Any, Any]) -> None:
        stream = file if file is not None else sys.stdout
        stream.write(fmt.format(*(_PrintValue(v) for v in values)) + "\n")
        stream.flush()

    debug_print.__qualname__ = f"DebugPrint({fmt[:60]!r})"
    out = tuple_element(HostCallback(debug_print, xs, [], has_side_effect=True, token=tok, builder=b), 0)
    _print_chain[b] = out
    b._last = last  # a print is not the default root of b.build()
    return out


class _PrintValue:
    """A numpy array as a ``str.format`` argument: ``{}`` gives ``str(array)``, a format spec
    applies to a 0-d array's item (``{:.3f}``) or to every element of a larger one."""

    __slots__ = ("a",)

    def __init__(self, a: np.ndarray[Any, Any]) -> None:
        self.a = a

    def __format__(self, spec: str) -> str:
        if not spec:
            return str(self.a)
        if self.a.ndim == 0:
            return format(self.a.item(), spec)
        return np.array2string(self.a, formatter={"all": lambda v: format(v, spec)})

    def __str__(self) -> str:
        return str(self.a)

    def __repr__(self) -> str:
        return repr(self.a)

    def __getattr__(self, name: str) -> Any:  # {0.shape}, {0.dtype}
        return getattr(self.a, name)

    def __getitem__(self, i: Any) -> Any:  # {0[1]}
        return self.a[i]
