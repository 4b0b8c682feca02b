"""Tokens, side effects and escape hatches: ``CreateToken``, ``AfterAll``,
``OptimizationBarrier``, ``CustomCall``, ``CustomCallWithLayout``, ``InfeedWithToken``,
``OutfeedWithToken``, and Python host callbacks: ``HostCallback``, ``DebugPrint``.

A token orders side-effecting ops: an op that takes a token runs after the op that made it.
Only ops that the computation's root depends on are part of the built computation, so the
token returned by a side-effecting op (``OutfeedWithToken``) must reach the root (for example
``ops.Tuple(b, [result, token])``), and so must the result of a ``CustomCall`` with
``has_side_effect=True``.
"""

from __future__ import annotations

import enum
import math
import operator
import re
import sys
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

import numpy as np

from ..builder import XlaBuilder, XlaOp, where
from ..errors import XlaSdkError
from ..shape import Shape
from ..types import PrimitiveType, mlir_element_type
from ._core import any_operand, bool_arg, dtype_error, is_index, operand, shape_error, show

__all__ = [
    "CreateToken",
    "AfterAll",
    "OptimizationBarrier",
    "CustomCall",
    "CustomCallWithLayout",
    "CustomCallWithAliasing",
    "SendToHost",
    "RecvFromHost",
    "CustomCallApiVersion",
    "CustomCallSchedule",
    "InfeedWithToken",
    "OutfeedWithToken",
    "HostCallback",
    "DebugPrint",
]

_TOKEN = Shape._make(PrimitiveType.TOKEN, ())


# -- tokens ---------------------------------------------------------------------------------------

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
    return builder._add("stablehlo.create_token", (), _TOKEN)


def _token(op: str, name: str, x: Any, builder: XlaBuilder | None = None) -> XlaOp:
    t = any_operand(op, name, x, builder)
    if not t.shape.is_token():
        shape_error(op, f"operand {name!r} must be a token, got {t.shape}")
    return t


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
    toks = tuple(_token(op, f"tokens[{i}]", t, builder) for i, t in enumerate(tokens))
    return builder._add("stablehlo.after_all", toks, _TOKEN)


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
    if x.shape.is_tuple() and any(e.is_tuple() for e in x.shape.tuple_shapes()):
        shape_error(op, f"operand 'operand' must be an array, a token or a flat tuple, got {x.shape}")
    return x.builder._add("stablehlo.optimization_barrier", (x,), x.shape)


# -- custom calls ---------------------------------------------------------------------------------

class CustomCallApiVersion(enum.IntEnum):
    """Calling convention of a custom-call target (XLA ``CustomCallApiVersion``).

    ``API_VERSION_ORIGINAL``: ``void f(void* out, const void** in)`` (CPU);
    ``API_VERSION_STATUS_RETURNING`` and ``..._UNIFIED`` add a status argument (and the opaque
    bytes); ``API_VERSION_TYPED_FFI``: an XLA FFI handler, whose attributes are
    ``backend_config`` as a dict.
    """

    API_VERSION_UNSPECIFIED = 0
    API_VERSION_ORIGINAL = 1
    API_VERSION_STATUS_RETURNING = 2
    API_VERSION_STATUS_RETURNING_UNIFIED = 3
    API_VERSION_TYPED_FFI = 4


class CustomCallSchedule(enum.IntEnum):
    """Scheduling hint of a custom call (XLA ``CustomCallSchedule``). StableHLO has no field
    for it: only ``SCHEDULE_NONE`` is accepted."""

    SCHEDULE_NONE = 0
    SCHEDULE_LATEST = 1
    SCHEDULE_EARLIEST = 2


def _api_version(op: str, value: Any) -> CustomCallApiVersion:
    if isinstance(value, str):
        key = value.strip().upper()
        key = key if key.startswith("API_VERSION_") else "API_VERSION_" + key
        if key in CustomCallApiVersion.__members__:
            v = CustomCallApiVersion[key]
        else:
            names = ", ".join(CustomCallApiVersion.__members__)
            shape_error(op, f"unknown api_version {show(value)}; expected one of {names}")
    else:
        try:
            if isinstance(value, bool):
                raise TypeError
            v = CustomCallApiVersion(operator.index(value))
        except (TypeError, ValueError):
            shape_error(op, f"unknown api_version {show(value)}; expected a CustomCallApiVersion (1-4)")
    if v is CustomCallApiVersion.API_VERSION_UNSPECIFIED:
        shape_error(op, "api_version API_VERSION_UNSPECIFIED cannot be compiled; use API_VERSION_ORIGINAL (1) or later")
    return v


def _mlir_string(data: str | bytes | bytearray) -> str:
    """An MLIR string literal holding ``data`` byte for byte (``\\XX`` escapes)."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    out = []
    for c in raw:
        if 0x20 <= c < 0x7F and c not in (0x22, 0x5C):
            out.append(chr(c))
        else:
            out.append(f"\\{c:02X}")
    return '"' + "".join(out) + '"'


def _float_literal(x: float, bits: int) -> str:
    if math.isfinite(x):
        s = repr(float(x))
        if "e" in s or "E" in s:
            mant, _, exp = s.lower().partition("e")
            s = (mant if "." in mant else mant + ".0") + "e" + exp
        elif "." not in s:
            s += ".0"
        return s
    dt, u = {16: (np.float16, np.uint16), 32: (np.float32, np.uint32)}.get(bits, (np.float64, np.uint64))
    return hex(int(np.array(x, dtype=dt).view(u)))


_DENSE_ARRAY = {
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "float32": "f32", "float64": "f64", "bool": "i1",
}


def _ffi_attr(op: str, path: str, v: Any, depth: int = 0) -> str:
    """One FFI attribute (typed-FFI ``backend_config`` value) in MLIR syntax."""
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, np.generic) and v.dtype.kind in "iuf":  # before int/float: np.float64 is a float
        et = mlir_element_type(_etype_of(v.dtype))
        if v.dtype.kind == "f":
            return f"{_float_literal(float(v), v.dtype.itemsize * 8)} : {et}"
        return f"{int(v)} : {et}"
    if isinstance(v, str):
        return _mlir_string(v)
    if isinstance(v, int):
        if not -(2**63) <= v < 2**63:
            shape_error(op, f"backend_config{path} = {v} does not fit in i64")
        return f"{v} : i64"
    if isinstance(v, float):
        return f"{_float_literal(v, 32)} : f32"
    if isinstance(v, np.ndarray) and v.ndim == 1 and v.dtype.name in _DENSE_ARRAY:
        et = _DENSE_ARRAY[v.dtype.name]
        if v.size == 0:
            return f"array<{et}>"
        if v.dtype.kind == "f":
            items = ", ".join(_float_literal(float(e), v.dtype.itemsize * 8) for e in v)
        elif v.dtype.kind == "b":
            items = ", ".join("true" if e else "false" for e in v)
        else:
            items = ", ".join(str(int(e)) for e in v)
        return f"array<{et}: {items}>"
    if isinstance(v, Mapping):
        return _ffi_dict(op, path, v, depth + 1)
    shape_error(
        op,
        f"backend_config{path} has unsupported value {show(v)}: use str, bool, int (i64), float (f32), a numpy "
        "scalar, a 1-D numpy array of int8/16/32/64, float32/64 or bool, or a nested dict",
    )


def _etype_of(dt: np.dtype[Any]) -> PrimitiveType:
    from ..types import dtype_to_etype

    return dtype_to_etype(dt)


_FFI_MAX_DEPTH = 64


def _ffi_dict(op: str, path: str, d: Mapping[Any, Any], depth: int = 0) -> str:
    if depth > _FFI_MAX_DEPTH:
        shape_error(op, f"backend_config{path[:80]}... nests dicts more than {_FFI_MAX_DEPTH} levels deep")
    parts = []
    for k, v in d.items():
        if not isinstance(k, str) or not k:
            shape_error(op, f"backend_config{path} keys must be non-empty str, got {show(k)}")
        parts.append(f"{_mlir_string(k)} = {_ffi_attr(op, f'{path}[{k!r}]', v, depth)}")
    return "{" + ", ".join(parts) + "}"


def _shape_arg(op: str, name: str, shape: Any, *, allow_tuple: bool = True, allow_token: bool = True) -> Shape:
    if not isinstance(shape, Shape):
        dtype_error(op, f"{name} must be a Shape, got {type(shape).__name__}")
    leaves = shape.tuple_shapes() if shape.is_tuple() else (shape,)
    if shape.is_tuple() and not allow_tuple:
        shape_error(op, f"{name} must be an array shape, got {shape}")
    for s in leaves:
        if s.is_tuple():
            shape_error(op, f"{name} must be an array, a token or a flat tuple of them, got {shape}")
        if s.is_token() and not allow_token:
            shape_error(op, f"{name} must hold arrays only, got {shape}")
    return shape


# XLA-internal targets the CPU compiler handles itself. Called with other operand counts or
# result shapes than XLA's own passes produce, several of them abort the process inside XLA,
# so their signatures are checked here first.
_ANNOTATIONS_SAME_SHAPE = frozenset(
    {
        "Sharding", "ShardBarrierFrom", "ShardBarrierTo", "MoveToHost", "MoveToDevice",
        "annotate_device_placement", "LayoutConstraint", "SetBound",
    }
)
_ANNOTATIONS_RESHAPE = frozenset({"SPMDFullToShardShape", "SPMDShardToFullShape"})
_INTERNAL_ONLY = re.compile(r"^(SliceToDynamic|__onednn\$.*)$")


def _check_builtin_target(op: str, target: str, operands: Sequence[XlaOp], result: Shape) -> None:
    if "python_cpu_callback" in target or "python_gpu_callback" in target:
        shape_error(
            op,
            f"call_target_name {target!r} is jaxlib's Python host callback: use ops.HostCallback(fn, operands, "
            "result_shapes), which registers fn with the executable (a bare call to it crashes the process)",
        )
    if _INTERNAL_ONLY.match(target):
        shape_error(
            op,
            f"call_target_name {target!r} is internal to XLA's CPU compiler (it needs backend data XLA's own "
            "passes produce, and crashes XLA otherwise); it cannot be called directly",
        )
    if target in _ANNOTATIONS_SAME_SHAPE or target in _ANNOTATIONS_RESHAPE:
        if len(operands) != 1 or not operands[0].shape.is_array():
            got = ", ".join(str(o.shape) for o in operands)
            shape_error(op, f"target {target!r} takes exactly one array operand, got ({got})")
        x = operands[0].shape
        if not result.is_array() or result.element_type() is not x.element_type():
            shape_error(
                op, f"target {target!r} returns an array of its operand's element type ({x}), got shape {result}"
            )
        if target in _ANNOTATIONS_SAME_SHAPE and result.dimensions() != x.dimensions():
            shape_error(op, f"target {target!r} returns its operand's shape {x}, got shape {result}")
    if target == "TopK":
        _check_topk(op, operands, result)


def _check_topk(op: str, operands: Sequence[XlaOp], result: Shape) -> None:
    """XLA CPU's ``TopK``: ``f32[b, n]`` (or ``f32[n]``) -> ``(f32[b, k], s32[b, k])``, ``k <= n``."""
    if len(operands) != 1 or not operands[0].shape.is_array():
        got = ", ".join(str(o.shape) for o in operands)
        shape_error(op, f"target 'TopK' takes one f32[batch, n] or f32[n] operand, got ({got})")
    x = operands[0].shape
    if x.element_type() is not PrimitiveType.F32:
        dtype_error(op, f"target 'TopK' needs an f32 operand, got operand 'operands[0]' of shape {x}")
    if x.rank() not in (1, 2):
        shape_error(op, f"target 'TopK' needs a rank-1 or rank-2 operand, got operand 'operands[0]' of shape {x}")
    elems = result.tuple_shapes() if result.is_tuple() else ()
    ok = (
        len(elems) == 2
        and all(e.is_array() for e in elems)
        and elems[0].element_type() is PrimitiveType.F32
        and elems[1].element_type() is PrimitiveType.S32
        and elems[0].dimensions() == elems[1].dimensions()
        and elems[0].rank() == x.rank()
        and elems[0].dimensions()[:-1] == x.dimensions()[:-1]
        and 0 <= elems[0].dimensions()[-1] <= x.dimensions()[-1]
    )
    if not ok:
        batch = "".join(f"{d}," for d in x.dimensions()[:-1])
        shape_error(
            op,
            f"target 'TopK' on {x} returns (f32[{batch}k], s32[{batch}k]) with 0 <= k <= "
            f"{x.dimensions()[-1]}, got shape {result}",
        )


def _layout_attr(op: str, name: str, shape: Shape) -> str:
    """``dense<[1, 0]> : tensor<2xindex>`` for an array shape's layout (default row-major)."""
    if not shape.is_array():
        shape_error(op, f"{name} must be an array shape to carry a layout, got {shape}")
    lay = shape.layout()
    m2m = lay.minor_to_major() if lay is not None else tuple(range(shape.rank() - 1, -1, -1))
    if not m2m:
        return "dense<> : tensor<0xindex>"
    return f"dense<[{', '.join(map(str, m2m))}]> : tensor<{len(m2m)}xindex>"


def _custom_call(
    op: str,
    builder: XlaBuilder,
    call_target_name: Any,
    operands: Any,
    shape: Any,
    opaque: Any,
    has_side_effect: Any,
    schedule: Any,
    api_version: Any,
    backend_config: Any,
    operand_shapes_with_layout: Sequence[Shape] | None,
    output_operand_aliasing: Any = None,
) -> XlaOp:
    if not isinstance(builder, XlaBuilder):
        dtype_error(op, f"first argument must be an XlaBuilder, got {type(builder).__name__}")
    if isinstance(call_target_name, bytes):
        try:
            call_target_name = call_target_name.decode("utf-8")
        except UnicodeDecodeError:
            shape_error(op, f"call_target_name {show(call_target_name)} is not UTF-8")
    if not isinstance(call_target_name, str) or not call_target_name:
        dtype_error(op, f"call_target_name must be a non-empty str, got {show(call_target_name)}")
    if isinstance(operands, XlaOp) or not isinstance(operands, (list, tuple)):
        dtype_error(op, f"operands must be a list or tuple of XlaOps, got {type(operands).__name__}")
    xs = tuple(any_operand(op, f"operands[{i}]", x, builder) for i, x in enumerate(operands))
    result = _shape_arg(op, "shape", shape)
    version = _api_version(op, api_version)
    if not (schedule is None or (is_index(schedule) and schedule == CustomCallSchedule.SCHEDULE_NONE)):
        shape_error(
            op, f"schedule {show(schedule)} cannot be expressed in StableHLO; only SCHEDULE_NONE is supported"
        )
    if not isinstance(opaque, (bytes, bytearray, str)):
        dtype_error(op, f"opaque must be bytes or str, got {type(opaque).__name__}")
    if backend_config is not None and len(opaque):
        shape_error(op, "give either opaque or backend_config, not both")
    parts = [f"call_target_name = {_mlir_string(call_target_name)}"]
    config: Any = opaque if backend_config is None else backend_config
    if version is CustomCallApiVersion.API_VERSION_TYPED_FFI:
        if isinstance(config, Mapping):
            parts.append(f"backend_config = {_ffi_dict(op, '', config)}")
        elif not isinstance(config, (bytes, bytearray, str)):
            dtype_error(op, f"backend_config must be a dict, bytes or str, got {type(config).__name__}")
        elif len(config):
            shape_error(
                op, "with api_version API_VERSION_TYPED_FFI the backend_config must be a dict of attributes "
                f"(got {type(config).__name__})"
            )
    else:
        if isinstance(config, Mapping):
            shape_error(
                op, f"a dict backend_config needs api_version API_VERSION_TYPED_FFI (got {version.name}); "
                "pass bytes or str for other versions"
            )
        if not isinstance(config, (bytes, bytearray, str)):
            dtype_error(op, f"backend_config must be bytes, str or a dict, got {type(config).__name__}")
        if len(config):
            parts.append(f"backend_config = {_mlir_string(config)}")
    if bool_arg(op, "has_side_effect", has_side_effect):
        parts.append("has_side_effect = true")
    parts.append(f"api_version = {int(version)} : i32")
    if operand_shapes_with_layout is not None:
        if isinstance(operand_shapes_with_layout, Shape) or not isinstance(operand_shapes_with_layout, (list, tuple)):
            dtype_error(op, "operand_shapes_with_layout must be a list of Shapes, one per operand")
        if len(operand_shapes_with_layout) != len(xs):
            n = len(operand_shapes_with_layout)
            shape_error(op, f"operand_shapes_with_layout has {n} shapes for {len(xs)} operands")
        op_layouts = []
        for i, (x, s) in enumerate(zip(xs, operand_shapes_with_layout, strict=True)):
            s = _shape_arg(op, f"operand_shapes_with_layout[{i}]", s, allow_tuple=False, allow_token=False)
            if s != x.shape:
                shape_error(
                    op, f"operand_shapes_with_layout[{i}] is {s}, but operand 'operands[{i}]' has shape {x.shape}"
                )
            op_layouts.append(_layout_attr(op, f"operand 'operands[{i}]'", s))
        res_leaves = result.tuple_shapes() if result.is_tuple() else (result,)
        res_layouts = [_layout_attr(op, "shape_with_layout", s) for s in res_leaves]
        parts.append(f"operand_layouts = [{', '.join(op_layouts)}]")
        parts.append(f"result_layouts = [{', '.join(res_layouts)}]")
    if output_operand_aliasing is not None:
        aliases = _aliases(op, output_operand_aliasing, xs, result)
        if aliases:
            parts.append(f"output_operand_aliases = [{', '.join(aliases)}]")
    _check_builtin_target(op, call_target_name, xs, result)
    return builder._add("stablehlo.custom_call", xs, result, ", ".join(parts))


def _shape_index(op: str, name: str, v: Any) -> tuple[int, ...]:
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        dtype_error(op, f"{name} must be a shape index (a sequence of ints), got {show(v)}")
    out = []
    for i in v:
        if isinstance(i, (bool, np.bool_)) or not is_index(i):
            dtype_error(op, f"{name} must be a shape index (a sequence of ints), got {show(v)}")
        out.append(int(i))
    return tuple(out)


def _subshape(op: str, name: str, shape: Shape, index: tuple[int, ...]) -> Shape:
    s = shape
    for depth, i in enumerate(index):
        if not s.is_tuple() or not 0 <= i < len(s.tuple_shapes()):
            shape_error(op, f"{name} {list(index)} does not index into {shape} (at position {depth})")
        s = s.tuple_shapes()[i]
    return s


def _aliases(op: str, aliasing: Any, xs: Sequence[XlaOp], result: Shape) -> list[str]:
    """``#stablehlo.output_operand_alias<...>`` for each ``(output_index, (operand, operand_index))``."""
    if isinstance(aliasing, (str, bytes)) or not isinstance(aliasing, (list, tuple)):
        dtype_error(
            op, "output_operand_aliasing must be a list of (output_shape_index, (operand_number, "
            f"operand_shape_index)) pairs, got {show(aliasing)}"
        )
    out = []
    seen: set[tuple[int, ...]] = set()
    for k, pair in enumerate(aliasing):
        name = f"output_operand_aliasing[{k}]"
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and isinstance(pair[1], (list, tuple))
                and len(pair[1]) == 2):
            dtype_error(
                op, f"{name} must be (output_shape_index, (operand_number, operand_shape_index)), got {show(pair)}"
            )
        out_index = _shape_index(op, f"{name} output index", pair[0])
        if not is_index(pair[1][0]) or isinstance(pair[1][0], (bool, np.bool_)):
            dtype_error(op, f"{name} operand number must be an int, got {show(pair[1][0])}")
        number = int(pair[1][0])
        if not 0 <= number < len(xs):
            shape_error(op, f"{name} names operand {number}, but the call has {len(xs)} operands")
        in_index = _shape_index(op, f"{name} operand index", pair[1][1])
        out_shape = _subshape(op, f"{name} output index", result, out_index)
        in_shape = _subshape(op, f"{name} operand index", xs[number].shape, in_index)
        if not out_shape.is_array() or out_shape != in_shape:
            shape_error(
                op, f"{name}: output {list(out_index)} is {out_shape} but operand 'operands[{number}]' at "
                f"{list(in_index)} is {in_shape}; an output can alias only an array of the same shape"
            )
        if out_index in seen:
            shape_error(op, f"{name}: output {list(out_index)} is aliased twice")
        seen.add(out_index)
        out.append(
            f"#stablehlo.output_operand_alias<output_tuple_indices = [{', '.join(map(str, out_index))}], "
            f"operand_index = {number}, operand_tuple_indices = [{', '.join(map(str, in_index))}]>"
        )
    return out


def CustomCall(
    builder: XlaBuilder,
    call_target_name: str | bytes,
    operands: Sequence[XlaOp],
    shape: Shape,
    opaque: bytes | str = b"",
    has_side_effect: bool = False,
    schedule: CustomCallSchedule | int | None = None,
    api_version: CustomCallApiVersion | int | str = CustomCallApiVersion.API_VERSION_ORIGINAL,
    backend_config: bytes | str | Mapping[str, Any] | None = None,
) -> XlaOp:
    """Call a function registered with XLA under ``call_target_name`` (XLA ``CustomCall``;
    ``stablehlo.custom_call``).

    The target is looked up when the computation is compiled: an unknown name fails then
    (``xs.CompileError`` naming the target), not here. What the call computes is up to the
    target; a target given operands or a result shape it does not expect has undefined
    behaviour. XLA's CPU compiler handles some targets itself (``TopK``, ``Sharding``...); their
    signatures are checked here, since wrong ones crash XLA.

    Parameters
    ----------
    builder: the XlaBuilder.
    call_target_name: the registered name (str, or bytes as in the former API).
    operands: list of XlaOps (arrays, tuples or tokens) passed to the target.
    shape: result Shape: an array, a token, or a flat tuple of them (several results, taken
        with ``GetTupleElement``).
    opaque: bytes (or str) handed to the target verbatim (the HLO ``backend_config``).
    has_side_effect: keep the call even if its result looked unused, and never merge or
        reorder it with other side effects. The result must still reach the root to be built.
    schedule: ``CustomCallSchedule.SCHEDULE_NONE`` only (StableHLO has no schedule).
    api_version: a :class:`CustomCallApiVersion` (or its value or name); default
        ``API_VERSION_ORIGINAL``.
    backend_config: instead of ``opaque``: bytes/str, or for ``API_VERSION_TYPED_FFI`` a dict of
        FFI attributes (str, bool, int -> i64, float -> f32, numpy scalars keep their type,
        1-D numpy arrays become dense arrays, nested dicts).

    Returns
    -------
    XlaOp of ``shape``.

    Raises
    ------
    DTypeError: ``builder`` not an XlaBuilder, an operand not an XlaOp, ``shape`` not a Shape,
    or a bad ``call_target_name``/``opaque`` type.
    ShapeError: nested tuple shapes, operands of another builder, an unknown or unspecified
    api_version, a schedule other than NONE, a backend_config not matching the api_version,
    or a built-in CPU target called with the wrong signature.
    """
    return _custom_call(
        "CustomCall", builder, call_target_name, operands, shape, opaque, has_side_effect, schedule,
        api_version, backend_config, None,
    )


def CustomCallWithLayout(
    builder: XlaBuilder,
    call_target_name: str | bytes,
    operands: Sequence[XlaOp],
    shape_with_layout: Shape,
    operand_shapes_with_layout: Sequence[Shape],
    opaque: bytes | str = b"",
    has_side_effect: bool = False,
    schedule: CustomCallSchedule | int | None = None,
    api_version: CustomCallApiVersion | int | str = CustomCallApiVersion.API_VERSION_ORIGINAL,
    backend_config: bytes | str | Mapping[str, Any] | None = None,
) -> XlaOp:
    """:func:`CustomCall` with the memory layouts of the operands and results fixed
    (XLA ``CustomCallWithLayout``; ``stablehlo.custom_call`` with ``operand_layouts`` and
    ``result_layouts``).

    Parameters
    ----------
    shape_with_layout: result Shape (array, or flat tuple of arrays); each array's
        ``layout`` (``minor_to_major``) is what the target writes; an array without layout
        means row-major.
    operand_shapes_with_layout: one array Shape per operand, equal to the operand's shape, with
        the layout the target reads.
    Other parameters: as for :func:`CustomCall`.

    Returns
    -------
    XlaOp of ``shape_with_layout`` (values as the target writes them; XLA converts layouts).

    Raises
    ------
    As :func:`CustomCall`; also ShapeError when the operand shapes differ from the operands,
    their count differs, or an operand or result is a tuple or token (no layout possible).
    """
    if operand_shapes_with_layout is None:
        dtype_error("CustomCallWithLayout", "operand_shapes_with_layout must be a list of Shapes, one per operand")
    return _custom_call(
        "CustomCallWithLayout", builder, call_target_name, operands, shape_with_layout, opaque, has_side_effect,
        schedule, api_version, backend_config, operand_shapes_with_layout,
    )


def CustomCallWithAliasing(
    builder: XlaBuilder,
    call_target_name: str | bytes,
    operands: Sequence[XlaOp],
    shape_with_layout: Shape,
    operand_shapes_with_layout: Sequence[Shape],
    opaque: bytes | str = b"",
    has_side_effect: bool = False,
    output_operand_aliasing: Sequence[tuple[Sequence[int], tuple[int, Sequence[int]]]] = (),
    literal: Any = None,
    schedule: CustomCallSchedule | int | None = None,
    api_version: CustomCallApiVersion | int | str = CustomCallApiVersion.API_VERSION_ORIGINAL,
    backend_config: bytes | str | Mapping[str, Any] | None = None,
) -> XlaOp:
    """:func:`CustomCallWithLayout` whose results may reuse operand buffers (XLA
    ``CustomCallWithAliasing``; ``stablehlo.custom_call`` with ``output_operand_aliases``; HLO
    ``output_to_operand_aliasing``).

    Parameters
    ----------
    output_operand_aliasing: ``(output_shape_index, (operand_number, operand_shape_index))``
        pairs: the result array at ``output_shape_index`` (``()`` for an array result, ``(i,)``
        for tuple element i) is written in place over the operand array at
        ``operand_shape_index`` of ``operands[operand_number]``; both must have the same shape.
        Shape indices are sequences of ints (``xla_client.ShapeIndex`` too).
    literal: must be None: StableHLO's ``custom_call`` has no literal attribute, so a literal
        cannot reach XLA (pass it as a constant operand or in ``backend_config``).
    Other parameters: as for :func:`CustomCallWithLayout`.

    Returns
    -------
    XlaOp of ``shape_with_layout``.

    Raises
    ------
    As :func:`CustomCallWithLayout`; also ShapeError for an alias whose indices do not index
    into the result or operand, whose shapes differ, or an output aliased twice, or a literal;
    DTypeError for an aliasing entry of the wrong form.
    """
    op = "CustomCallWithAliasing"
    if literal is not None:
        shape_error(
            op, "literal is not supported: StableHLO's custom_call has no literal attribute (pass it as a "
            "constant operand or in backend_config)"
        )
    if operand_shapes_with_layout is None:
        dtype_error(op, "operand_shapes_with_layout must be a list of Shapes, one per operand")
    return _custom_call(
        op, builder, call_target_name, operands, shape_with_layout, opaque, has_side_effect,
        schedule, api_version, backend_config, operand_shapes_with_layout,
        output_operand_aliasing if output_operand_aliasing is not None else (),
    )


_NO_HOST_TRANSFER = (
    "device-to-host transfers (HLO send/recv with is_host_transfer) cannot run with jaxlib 0.10.2: "
    "XLA:CPU rejects the program (UNIMPLEMENTED: HLO opcode `send` is not supported by XLA:CPU "
    "ThunkEmitter), and jaxlib offers no way to attach the host-side send/recv callbacks to an "
    "execution from Python. Use ops.HostCallback(fn, operands, result_shapes) to hand values to "
    "Python during a run (or ops.OutfeedWithToken / ops.DebugPrint)"
)


def SendToHost(operand: XlaOp, token: XlaOp, shape_with_layout: Shape, handle: Any) -> XlaOp:
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


def RecvFromHost(token: XlaOp, shape: Shape, handle: Any) -> XlaOp:
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
    t = _token(op, "token", token)
    s = _shape_arg(op, "shape", shape, allow_token=False)
    if not isinstance(config, str):
        dtype_error(op, f"config must be a str, got {type(config).__name__}")
    leaves = list(s.tuple_shapes()) if s.is_tuple() else [s]
    if any(not x.is_static() for x in leaves):
        shape_error(op, f"shape must have static dimensions (stablehlo.infeed reads static shapes), got {s}")
    parts = [f"infeed_config = {_mlir_string(config)}"]
    if any(x.layout() is not None for x in leaves):
        lays = []
        for x in leaves:
            lay = x.layout()
            m2m = lay.minor_to_major() if lay is not None else tuple(range(x.rank() - 1, -1, -1))
            lays.append("[" + ", ".join(map(str, m2m)) + "]")
        parts.append(f"layout = [{', '.join(lays)}]")
    b = t.builder
    raw = b._add("stablehlo.infeed", (t,), Shape.tuple_shape(leaves + [_TOKEN]), ", ".join(parts))
    if not s.is_tuple():
        return raw
    from .control import GetTupleElement, Tuple

    data = Tuple(b, [GetTupleElement(raw, i) for i in range(len(leaves))])
    return Tuple(b, [data, GetTupleElement(raw, len(leaves))])


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
    t = _token(op, "token", token, x.builder)
    s = _shape_arg(op, "shape_with_layout", shape_with_layout, allow_token=False)
    if not isinstance(outfeed_config, str):
        dtype_error(op, f"outfeed_config must be a str, got {type(outfeed_config).__name__}")
    if x.shape.is_token():
        shape_error(op, "operand 'operand' must be an array or a tuple of arrays, got token[]")
    if x.shape.is_tuple():
        from .control import GetTupleElement

        for e in x.shape.tuple_shapes():
            if not e.is_array():
                shape_error(op, f"operand 'operand' must be an array or a flat tuple of arrays, got {x.shape}")
        inputs = [GetTupleElement(x, i) for i in range(x.shape.leaf_count())]
    else:
        inputs = [x]
    if s != x.shape:
        shape_error(op, f"shape_with_layout is {s}, but operand 'operand' has shape {x.shape}")
    return x.builder._add(
        "stablehlo.outfeed", tuple(inputs) + (t,), _TOKEN, f"outfeed_config = {_mlir_string(outfeed_config)}"
    )



# -- host callbacks -------------------------------------------------------------------------------

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
    xs = [operand(op, f"operands[{i}]", x, b) for i, x in enumerate(operands)]
    tok = None if token is None else _token(op, "token", token, b)
    shapes, single = _result_specs(op, result_shapes)
    side_effect = bool_arg(op, "has_side_effect", has_side_effect) or (not shapes and tok is None)
    from .._emit import HostCallbackSpec
    from .._jaxlib.callbacks import CALL_TARGET, PyCallback

    specs = [(s.dimensions(), s.numpy_dtype()) for s in shapes]
    cb = PyCallback(fn, _callback_name(fn), specs, single=single, token=tok is not None)
    leaves = ([_TOKEN] if tok is not None else []) + shapes
    raw_shape = leaves[0] if len(leaves) == 1 else Shape.tuple_shape(leaves)
    attrs = f"call_target_name = {_mlir_string(CALL_TARGET)}, "
    attrs += "has_side_effect = true, " if side_effect else ""
    attrs += f"api_version = {int(CustomCallApiVersion.API_VERSION_TYPED_FFI)} : i32"
    ins = tuple(([tok] if tok is not None else []) + xs)
    raw = b._add("stablehlo.custom_call", ins, raw_shape, attrs, extra=HostCallbackSpec(cb))
    if tok is None:
        return raw if (single or len(leaves) != 1) else _tuple_of(b, [raw])
    from .control import GetTupleElement

    if len(leaves) == 1:  # only the token
        return _tuple_of(b, [raw])
    parts = [GetTupleElement(raw, i) for i in range(len(leaves))]
    return _tuple_of(b, parts[1:] + parts[:1])


def _tuple_of(b: XlaBuilder, elements: list[XlaOp]) -> XlaOp:
    from .control import Tuple

    return Tuple(b, elements)


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
    if builder is not None and not isinstance(builder, XlaBuilder):
        dtype_error(op, f"builder must be an XlaBuilder, got {type(builder).__name__}")
    b = builder
    if b is None and operands:
        b = operands[0].builder if isinstance(operands[0], XlaOp) else None
    if b is None and token is not None:
        b = token.builder if isinstance(token, XlaOp) else None
    if b is None and operands:
        operand(op, "operands[0]", operands[0])  # not an XlaOp: say so
    if b is None:
        dtype_error(op, "give builder= when there are no operands and no token")
    xs = [operand(op, f"operands[{i}]", x, b) for i, x in enumerate(operands)]
    try:  # check the fields now, with zero values of the operands' shapes (broadcast: no memory)
        fmt.format(*(_PrintValue(np.broadcast_to(np.zeros((), x.dtype), x.shape.dimensions())) for x in xs))
    except (IndexError, KeyError, ValueError, TypeError) as e:
        shape_error(op, f"fmt {show(fmt)} does not format {len(xs)} operands: {type(e).__name__}: {e}")
    last = b._last  # restored below: a print is not the default root
    tok = _token(op, "token", token, b) if token is not None else _print_chain.get(b)
    if tok is None:
        tok = CreateToken(b)

    def debug_print(*values: np.ndarray[Any, Any]) -> None:
        stream = file if file is not None else sys.stdout
        stream.write(fmt.format(*(_PrintValue(v) for v in values)) + "\n")
        stream.flush()

    debug_print.__qualname__ = f"DebugPrint({fmt[:60]!r})"
    from .control import GetTupleElement

    out = GetTupleElement(HostCallback(debug_print, xs, [], has_side_effect=True, token=tok, builder=b), 0)
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
