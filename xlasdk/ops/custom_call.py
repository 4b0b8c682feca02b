"""Custom calls: ``CustomCall``, ``CustomCallWithLayout``, ``CustomCallWithAliasing``
(``stablehlo.custom_call``), with the checks that keep XLA's own targets from aborting the
process, and the typed-FFI ``backend_config`` dictionary."""

from __future__ import annotations

import copy
import enum
import math
import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from .._mlir_attrs import I32, AttrList, IndexLayout, mlir_bytes
from .._optable import define
from ..builder import XlaBuilder, XlaOp
from ..shape import Shape
from ..types import PrimitiveType, dtype_to_etype, mlir_element_type
from ._core import LiteralLike, any_operand, bool_arg, dtype_error, is_index, shape_error, show
from .lapack_contracts import is_lapack_target, lapack_check

__all__ = [
    "CustomCall",
    "CustomCallApiVersion",
    "CustomCallSchedule",
    "CustomCallWithLayout",
    "CustomCallWithAliasing",
]

class HostCallbackSpec:
    """``XlaOp.extra`` of a host-callback custom call (``ops.HostCallback``): the callable jaxlib
    runs. Its index in the executable's ``host_callbacks`` list is given when the module is
    emitted (``backend_config = {index = N : ui64}``, in emission order), so one op can sit in
    several computations; :func:`xlasdk._emit.emit_module` hands the list back in that order."""

    __slots__ = ("callback",)

    def __init__(self, callback: Any) -> None:
        self.callback = callback


def _host_callback(o: XlaOp) -> Any:
    """The row's ``host_callback`` hook: the callable of a host-callback custom call, else None."""
    extra = o.extra
    return extra.callback if type(extra) is HostCallbackSpec else None


#: ``stablehlo.custom_call``: XLA's converter writes its HLO (its value may depend on anything).


class FfiAttributes:
    """A typed-FFI custom call's ``backend_config`` dictionary, checked when the op is built
    (a private copy of the user's mapping, spelled in MLIR when the module is emitted)."""

    __slots__ = ("_op", "mapping")

    def __init__(self, op: str, mapping: Mapping[Any, Any]) -> None:
        _ffi_dict(op, "", mapping)  # raises for values that have no FFI attribute form
        self._op = op
        self.mapping = copy.deepcopy(dict(mapping))

    def to_mlir(self) -> str:
        return _ffi_dict(self._op, "", self.mapping)


class OutputOperandAlias:
    """``#stablehlo.output_operand_alias<...>``: result ``output_tuple_indices`` shares the
    buffer of operand ``operand_index`` at ``operand_tuple_indices``."""

    __slots__ = ("output_tuple_indices", "operand_index", "operand_tuple_indices")

    def __init__(
        self, output_tuple_indices: tuple[int, ...], operand_index: int, operand_tuple_indices: tuple[int, ...]
    ) -> None:
        self.output_tuple_indices = output_tuple_indices
        self.operand_index = operand_index
        self.operand_tuple_indices = operand_tuple_indices

    def to_mlir(self) -> str:
        return (
            "#stablehlo.output_operand_alias<output_tuple_indices = "
            f"[{', '.join(map(str, self.output_tuple_indices))}], "
            f"operand_index = {self.operand_index}, "
            f"operand_tuple_indices = [{', '.join(map(str, self.operand_tuple_indices))}]>"
        )


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
        return mlir_bytes(v)
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
    return dtype_to_etype(dt)


_FFI_MAX_DEPTH = 64


def _ffi_dict(op: str, path: str, d: Mapping[Any, Any], depth: int = 0) -> str:
    if depth > _FFI_MAX_DEPTH:
        shape_error(op, f"backend_config{path[:80]}... nests dicts more than {_FFI_MAX_DEPTH} levels deep")
    parts = []
    for k, v in d.items():
        if not isinstance(k, str) or not k:
            shape_error(op, f"backend_config{path} keys must be non-empty str, got {show(k)}")
        parts.append(f"{mlir_bytes(k)} = {_ffi_attr(op, f'{path}[{k!r}]', v, depth)}")
    return "{" + ", ".join(parts) + "}"


def shape_arg(op: str, name: str, shape: Any, *, allow_tuple: bool = True, allow_token: bool = True) -> Shape:
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
#: Shardy's marks, which XLA's sharding remover replaces by their one operand (it aborts on another
#: count: ``sharding_remover.cc`` ``Sharding instruction must have exactly one operand``).
_SDY_ONE_OPERAND: Final = frozenset({"xla.sdy.FuncResultSharding", "xla.sdy.PropagationBarrier",
                                     "xla.sdy.ShardingGroup"})
#: Targets XLA's expanders rewrite, reading their first operands unchecked (fewer: SIGSEGV).
_MIN_OPERANDS: Final = {"Eigh": (1, "the matrix"), "Qr": (1, "the matrix"),
                        "ProductOfElementaryHouseholderReflectors": (2, "the reflectors and their scales (taus)")}


@dataclass(frozen=True)
class ShardySharding:
    """The frontend attribute ``xla.sdy.sharding`` of a loaded ``xla.sdy.FuncResultSharding``
    call, as XLA's HLO exporter reads it (read by :mod:`xlasdk.formats.rule_check`).

    ``text``: its string. ``shardings``: how many shardings the ``#sdy.sharding_per_value`` it
    spells holds (C escapes undone); None when it spells none. ``mesh``: the mesh its sharding
    names (``"@mesh"``; ``""`` for an inline mesh). ``mesh_axes``: that mesh's axis names; None when
    the module does not define that mesh as every jaxlib reads it (an entry of the module's
    frontend attribute ``xla.sdy.meshes``, which jaxlib 0.12.1 reads, and, where the module has
    ``sdy.mesh`` ops, one of them alike, which jaxlib 0.10.2 reads instead). ``axes``: the axis
    names its dimension shardings and unreduced axes use.
    """

    text: str
    shardings: int | None = None
    mesh: str = ""
    mesh_axes: tuple[str, ...] | None = ()
    axes: tuple[str, ...] = ()


def _func_result_sharding(op: str, sharding: ShardySharding | None, entry_result: bool | None) -> None:
    """XLA's HLO exporter reads the sharding of each result of the entry function that an
    ``xla.sdy.FuncResultSharding`` call gives from the call's frontend attribute, and aborts the
    process (``attribute_exporter.cc``) when there is none, when it is not one
    ``#sdy.sharding_per_value`` sharding, or when its mesh or an axis it shards along is unknown."""
    t = "target 'xla.sdy.FuncResultSharding'"
    need = ("the frontend attribute xla.sdy.sharding, a #sdy.sharding_per_value holding the result's one sharding "
            '(as JAX writes it: frontend_attributes={xla.sdy.sharding="#sdy.sharding_per_value<[<@mesh, [{}, {}]>]>"})')
    if sharding is None:
        if entry_result is None:
            shape_error(op, f"{t} needs {need} when it gives a result of the entry computation, and "
                        "CustomCall attaches no frontend attributes: build the result without Shardy's mark")
        shape_error(op, f"{t} gives a result of the entry function, so it needs {need}; this call has none")
    where = f"{t} gives a result of the entry function: its frontend attribute xla.sdy.sharding = {sharding.text!r}"
    if sharding.shardings is None:
        shape_error(op, f"{where} is not a string spelling a #sdy.sharding_per_value (XLA reads it with its C escapes "
                    "undone)")
    if sharding.shardings != 1:
        shape_error(op, f"{where} holds {sharding.shardings} shardings; XLA takes exactly one (the result's)")
    if sharding.mesh_axes is None:
        shape_error(op, f"{where} names mesh {sharding.mesh}, which the module does not define as XLA reads it: an "
                    "entry of its frontend attribute xla.sdy.meshes (jaxlib 0.12.1 reads that), and an sdy.mesh op "
                    "alike where it has sdy.mesh ops (jaxlib 0.10.2 reads those)")
    unknown = [a for a in sharding.axes if a not in sharding.mesh_axes]
    if sharding.mesh_axes and unknown:
        mesh = f"mesh {sharding.mesh}" if sharding.mesh else "its inline mesh"
        shape_error(op, f"{where} shards along axis {unknown[0]!r}, which {mesh} (axes "
                    f"{', '.join(map(repr, sharding.mesh_axes))}) does not have")


def custom_call_operand_check(
    op: str, target: str, operands: Sequence[str], sharding: ShardySharding | None = None,
    entry_result: bool | None = None,
) -> None:
    """The part of CustomCall's target rule that needs no operand shapes (``operands``: their
    spellings, such as ``f32[4,4]``): Shardy's marks take exactly one operand, XLA's
    ``Eigh`` / ``Qr`` / ``ProductOfElementaryHouseholderReflectors`` the operands their expanders
    read, and ``xla.sdy.FuncResultSharding``, where it gives a result of the entry function
    (``entry_result``: True, False, or None when not known, as when it is built), needs its
    frontend attribute ``sharding`` (:class:`ShardySharding`). ShapeError when they do not:
    XLA's verifier lets all of these through, and its compiler aborts on them."""
    if target == "xla.sdy.FuncResultSharding" and entry_result is not False:
        _func_result_sharding(op, sharding, entry_result)
    got = f"({', '.join(operands)})" if operands else "no operand"
    if target in _SDY_ONE_OPERAND and len(operands) != 1:
        shape_error(op, f"target {target!r} takes exactly one operand, got {got}")
    if target in _MIN_OPERANDS and len(operands) < _MIN_OPERANDS[target][0]:
        k, what = _MIN_OPERANDS[target]
        shape_error(op, f"target {target!r} takes {'one operand' if k == 1 else f'{k} operands'} ({what}), got {got}")


def custom_call_target_check(
    op: str, target: str, operands: Sequence[Shape], result: Shape, config: Mapping[str, Any] | None = None,
    layouts: tuple[Sequence[Sequence[int]], Sequence[Sequence[int]]] | None = None,
    aliases: Sequence[tuple[tuple[int, ...], int, tuple[int, ...]]] = (),
    sharding: ShardySharding | None = None, entry_result: bool | None = None,
) -> None:
    """Shape rule of CustomCall for the targets xlasdk knows (sharding annotations, Shardy's marks
    and XLA's decompositions: :func:`custom_call_operand_check`, which also reads ``sharding`` and
    ``entry_result``; ``TopK``, the forbidden internal ones, jaxlib's LAPACK kernels:
    :mod:`~xlasdk.ops.lapack_contracts`, which also reads the typed-FFI attributes ``config``, the
    ``(operand, result)`` ``layouts``, None when the call has none, and the
    ``output_operand_aliases``): ShapeError/DTypeError when the operand shapes or ``result`` do not
    fit."""
    custom_call_operand_check(op, target, [str(s) for s in operands], sharding, entry_result)
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
        if len(operands) != 1 or not operands[0].is_array():
            got = ", ".join(str(o) for o in operands)
            shape_error(op, f"target {target!r} takes exactly one array operand, got ({got})")
        x = operands[0]
        if not result.is_array() or result.element_type() is not x.element_type():
            shape_error(
                op, f"target {target!r} returns an array of its operand's element type ({x}), got shape {result}"
            )
        if target in _ANNOTATIONS_SAME_SHAPE and result.dimensions() != x.dimensions():
            shape_error(op, f"target {target!r} returns its operand's shape {x}, got shape {result}")
    if target == "TopK":
        topk_check(op, operands, result)
    if is_lapack_target(target):
        lapack_check(op, target, operands, result, config, layouts, aliases)


CUSTOM_CALL = define(
    "stablehlo.custom_call", constant=False, host_callback=_host_callback, rule=custom_call_target_check,
)


def topk_check(op: str, operands: Sequence[Shape], result: Shape) -> None:
    """Shape rule of XLA CPU's ``TopK`` custom call: ``f32[b, n]`` (or ``f32[n]``) ->
    ``(f32[b, k], s32[b, k])``, ``k <= n`` (ShapeError, DTypeError for a non-f32 operand)."""
    if len(operands) != 1 or not operands[0].is_array():
        got = ", ".join(str(o) for o in operands)
        shape_error(op, f"target 'TopK' takes one f32[batch, n] or f32[n] operand, got ({got})")
    x = operands[0]
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


def _layout_attr(op: str, name: str, shape: Shape) -> IndexLayout:
    """An array shape's layout, minor to major (default row-major)."""
    if not shape.is_array():
        shape_error(op, f"{name} must be an array shape to carry a layout, got {shape}")
    lay = shape.layout()
    m2m = lay.minor_to_major() if lay is not None else tuple(range(shape.rank() - 1, -1, -1))
    return IndexLayout(m2m)


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
    result = shape_arg(op, "shape", shape)
    version = _api_version(op, api_version)
    if not (schedule is None or (is_index(schedule) and schedule == CustomCallSchedule.SCHEDULE_NONE)):
        shape_error(
            op, f"schedule {show(schedule)} cannot be expressed in StableHLO; only SCHEDULE_NONE is supported"
        )
    if not isinstance(opaque, (bytes, bytearray, str)):
        dtype_error(op, f"opaque must be bytes or str, got {type(opaque).__name__}")
    if backend_config is not None and len(opaque):
        shape_error(op, "give either opaque or backend_config, not both")
    attrs: dict[str, Any] = {"call_target_name": call_target_name.encode("utf-8")}
    config: Any = opaque if backend_config is None else backend_config
    if version is CustomCallApiVersion.API_VERSION_TYPED_FFI:
        if isinstance(config, Mapping):
            attrs["backend_config"] = FfiAttributes(op, config)
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
            attrs["backend_config"] = bytes(config.encode("utf-8") if isinstance(config, str) else config)
    if bool_arg(op, "has_side_effect", has_side_effect):
        attrs["has_side_effect"] = True
    attrs["api_version"] = I32(int(version))
    if operand_shapes_with_layout is not None:
        if isinstance(operand_shapes_with_layout, Shape) or not isinstance(operand_shapes_with_layout, (list, tuple)):
            dtype_error(op, "operand_shapes_with_layout must be a list of Shapes, one per operand")
        if len(operand_shapes_with_layout) != len(xs):
            n = len(operand_shapes_with_layout)
            shape_error(op, f"operand_shapes_with_layout has {n} shapes for {len(xs)} operands")
        op_layouts = []
        for i, (x, s) in enumerate(zip(xs, operand_shapes_with_layout, strict=True)):
            s = shape_arg(op, f"operand_shapes_with_layout[{i}]", s, allow_tuple=False, allow_token=False)
            if s != x.shape:
                shape_error(
                    op, f"operand_shapes_with_layout[{i}] is {s}, but operand 'operands[{i}]' has shape {x.shape}"
                )
            op_layouts.append(_layout_attr(op, f"operand 'operands[{i}]'", s))
        res_leaves = result.tuple_shapes() if result.is_tuple() else (result,)
        res_layouts = [_layout_attr(op, "shape_with_layout", s) for s in res_leaves]
        attrs["operand_layouts"] = AttrList(op_layouts)
        attrs["result_layouts"] = AttrList(res_layouts)
    aliases: list[OutputOperandAlias] = []
    if output_operand_aliasing is not None:
        aliases = _aliases(op, output_operand_aliasing, xs, result)
        if aliases:
            attrs["output_operand_aliases"] = AttrList(aliases)
    ffi_config = attrs["backend_config"].mapping if isinstance(attrs.get("backend_config"), FfiAttributes) else None
    layouts = None
    if operand_shapes_with_layout is not None:
        layouts = ([tuple(v) for v in op_layouts], [tuple(v) for v in res_layouts])
    custom_call_target_check(op, call_target_name, [x.shape for x in xs], result, _plain(ffi_config), layouts,
                             [(a.output_tuple_indices, a.operand_index, a.operand_tuple_indices) for a in aliases])
    return builder.add_op(CUSTOM_CALL, xs, result, attrs)


def _plain(config: Mapping[Any, Any] | None) -> dict[str, Any] | None:
    """A typed-FFI attribute dict with numpy scalars as Python ``int`` / ``bool`` (as a loaded
    module's attributes read), for the targets' contracts."""
    if config is None:
        return None
    out: dict[str, Any] = {}
    for k, v in config.items():
        if isinstance(v, (bool, np.bool_)):
            out[str(k)] = bool(v)
        elif isinstance(v, np.integer):
            out[str(k)] = int(v)
        else:
            out[str(k)] = v
    return out


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


def _aliases(op: str, aliasing: Any, xs: Sequence[XlaOp], result: Shape) -> list[OutputOperandAlias]:
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
        out.append(OutputOperandAlias(out_index, number, in_index))
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
    behaviour. XLA's CPU compiler handles some targets itself (``TopK``, ``Sharding``, Shardy's
    ``xla.sdy.*`` marks, ``Eigh``, ``Qr``...); their signatures are checked here, since wrong ones
    crash XLA. ``xla.sdy.FuncResultSharding`` is refused: XLA needs a frontend attribute on it
    that CustomCall does not attach.

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
    literal: LiteralLike | None = None,
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
