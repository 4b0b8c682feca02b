"""The former ``jaxlib.xla_client`` build-and-run surface, on top of xlasdk.

Code and test suites written against ``jaxlib.xla_client`` run with only the import changed::

    from xlasdk import xla_client
    ops = xla_client.ops

    c = xla_client.XlaBuilder("add")
    x = ops.Parameter(c, 0, xla_client.shape_from_pyval(np.zeros((2,), np.float32)))
    ops.Add(x, ops.Constant(c, np.float32(1)))
    backend = xla_client.make_cpu_client()
    compiled = backend.compile(c.build())
    [out] = xla_client.execute_with_python_values(compiled, [np.arange(2, dtype=np.float32)], backend)

Everything here is a thin layer over xlasdk's public API: ``XlaBuilder``, ``ops``, ``Shape``,
the attribute classes and the errors are xlasdk's own (or small subclasses of them);
:class:`Client`, :class:`LoadedExecutable` and :class:`Buffer` wrap ``xs.Client``,
``xs.Executable`` and ``xs.DeviceArray`` with the former method names.

Differences from jaxlib
-----------------------
* Bad ops raise ``xs.ShapeError`` / ``xs.DTypeError`` (``ValueError`` / ``TypeError``) from
  the op call itself, not an ``XlaRuntimeError`` from ``build()``.
* Compile failures and unreadable serialized data raise :class:`CompileError` /
  :class:`FormatError`, which are both the xlasdk error and an :class:`XlaRuntimeError`.
* ``buffer_from_pyval`` converts Python scalars as xlasdk does (``float`` -> f32, ``int`` ->
  s32, ``bool`` -> pred); numpy values keep their dtype.
* Tuple parameters are not supported (``CompileOptions.tuple_arguments`` must stay False).
* ``Buffer.device()`` is a method (the former API); ``xs.DeviceArray.device`` is a property.
* ``Shape.element_type()`` is a numpy dtype (as jaxlib's); ``xs.Shape.element_type()`` is the
  ``PrimitiveType``. Use ``xla_client.ops`` with these shapes (native ``ops`` convert them too).
* ``Client.emit_python_callback`` builds an ``ops.HostCallback`` (jaxlib's
  ``xla_ffi_python_cpu_callback``, CPU only): the executable keeps the callable alive, is never
  cached or serialized, and a callback that raises fails the run with a
  :class:`HostCallbackError` carrying the exception. A loaded module that calls Python
  callbacks (``jax.debug.print`` dumps) is refused at compile: the callables do not travel.
* Tokens: ``execute_with_token`` / ``execute_sharded_on_local_devices_with_tokens`` /
  ``execute_sharded(..., with_tokens=True).consume_token()`` give jaxlib's run-completion
  tokens (:class:`Token`, :class:`ShardedToken`).
* ``tracebacks()`` switches jaxlib's (process-wide) traceback recording; ``Traceback`` and
  ``Frame`` are jaxlib's classes.
* Dynamic shapes: XLA:CPU has no ``PadToStatic``, so a dynamic parameter is compiled as its
  bounds plus sizes (the executable pads what it is given), and dynamic results, which jaxlib
  hands back padded, are returned at their real extents.
* Not available on jaxlib 0.10.2 CPU: infeed/outfeed transfers (``InfeedWithToken`` /
  ``OutfeedWithToken`` build, but jaxlib 0.10.2 has no ``transfer_to_infeed`` /
  ``transfer_from_outfeed`` to feed or read them), ``make_gpu_client`` (GPUs come from PJRT
  plugins), multi-process CPU clients through ``make_cpu_client`` (use ``xs.distributed``).
"""

from __future__ import annotations

import abc
import contextlib
import functools
import types
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final

import numpy as np

from . import errors as _errors
from . import ops as _xs_ops
from ._jaxlib import compat as _compat
from ._jaxlib import mlir as _mlir
from ._jaxlib.pjrt import XLA_CLIENT_VERSION
from .attrs import (
    ComparisonDirection,
    ConvolutionDimensionNumbers,
    CurrentSourceInfoMetadata,
    DotDimensionNumbers,
    FftType,
    GatherDimensionNumbers,
    OpMetadata,
    OpSharding,
    PaddingConfig,
    PaddingConfigDimension,
    PaddingType,
    PrecisionConfig,
    RandomAlgorithm,
    ResultAccuracy,
    ScatterDimensionNumbers,
    TriangularSolveOptions_Transpose,
    make_convolution_dimension_numbers,
    make_dot_dimension_numbers,
    make_padding_config,
    make_replica_groups,
    window_padding_type_to_pad_values,
)
from .builder import XlaBuilder as _XlaBuilder
from .builder import XlaOp
from .computation import XlaComputation as _XlaComputation
from .errors import DTypeError, HostCallbackError, ShapeError, XlaRuntimeError
from .runtime import CompileOptions as _CompileOptions
from .runtime import Device, DeviceArray, Executable, ExecutionToken, MemoryStats, UnknownDeviceError, device_put
from .runtime import HostBufferSemantics as HostBufferSemantics
from .runtime import client as _sdk_client
from .runtime import compile as _sdk_compile
from .runtime import deserialize_executable as _sdk_deserialize
from .runtime import from_dlpack as _from_dlpack
from .runtime.device import Client as _SdkClient
from .shape import Layout
from .shape import ProgramShape as _ProgramShape
from .shape import Shape as _Shape
from .shape import shape_from_pyval as _shape_from_pyval
from .types import PrimitiveType, bfloat16, dtype_to_etype, etype_to_dtype

__all__ = [
    "ops", "XlaBuilder", "XlaOp", "XlaComputation", "HloModule",
    "Shape", "ProgramShape", "Layout", "PrimitiveType", "bfloat16", "dtype_to_etype", "shape_from_pyval",
    "XLA_ELEMENT_TYPE_TO_DTYPE", "DTYPE_TO_XLA_ELEMENT_TYPE",
    "PrecisionConfig", "DotDimensionNumbers", "make_dot_dimension_numbers", "ConvolutionDimensionNumbers",
    "make_convolution_dimension_numbers", "GatherDimensionNumbers", "ScatterDimensionNumbers",
    "PaddingConfig", "PaddingConfigDimension", "make_padding_config", "PaddingType",
    "window_padding_type_to_pad_values", "FftType", "RandomAlgorithm", "ComparisonDirection",
    "ResultAccuracy", "OpSharding", "make_replica_groups", "CurrentSourceInfoMetadata", "OpMetadata",
    "CompileOptions", "ExecutableBuildOptions", "DebugOptions", "DeviceAssignment",
    "XlaRuntimeError", "CompileError", "FormatError",
    "Device", "Client", "make_cpu_client", "make_gpu_client",
    "get_local_backend", "LoadedExecutable", "ExecuteResults", "Buffer", "ArrayImpl", "HostBufferSemantics",
    "execute_with_python_values", "execute_with_python_values_replicated",
    "Token", "ShardedToken", "ShardedBuffer", "Traceback", "Frame", "tracebacks", "ShapeIndex",
    "DeviceArrayBase", "HostCallbackError",
]

_version: Final[int] = XLA_CLIENT_VERSION  # jaxlib's xla_client._version, for version checks


# -- errors -----------------------------------------------------------------------------------
class CompileError(_errors.CompileError, XlaRuntimeError):
    """A compilation failure: both ``xs.CompileError`` and :class:`XlaRuntimeError` (as jaxlib
    raised it)."""


class FormatError(_errors.FormatError, XlaRuntimeError):
    """Unreadable HLO protos, MLIR text or serialized executables: both ``xs.FormatError`` and
    :class:`XlaRuntimeError` (as jaxlib raised it)."""


# -- ops --------------------------------------------------------------------------------------
_OPS_EXTRAS: Final[dict[str, Any]] = {
    "TriangularSolveOptions_Transpose": TriangularSolveOptions_Transpose,
    "RandomAlgorithm": RandomAlgorithm,
    "FftType": FftType,
    "ResultAccuracy": ResultAccuracy,
    "ComparisonDirection": ComparisonDirection,
}


class _OpsNamespace(types.ModuleType):
    """``xla_client.ops``: every function of :mod:`xlasdk.ops` plus the enums the former
    ``ops`` namespace carried (``ops.TriangularSolveOptions_Transpose``...).

    Names are looked up in :mod:`xlasdk.ops` on each access, so ops added there show up here.
    """

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("__"):
            try:
                return _with_native_shapes(getattr(_xs_ops, name))
            except AttributeError:
                pass
            if name in _OPS_EXTRAS:
                return _OPS_EXTRAS[name]
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")

    def __dir__(self) -> list[str]:
        return sorted(set(getattr(_xs_ops, "__all__", ())) | set(_OPS_EXTRAS))


ops: Final = _OpsNamespace(f"{__name__}.ops", _OpsNamespace.__doc__)


@functools.cache
def _with_native_shapes(fn: Any) -> Any:
    """``fn`` taking this module's :class:`Shape` (whose ``element_type()`` is a numpy dtype)
    wherever xlasdk's ops take an ``xs.Shape``: such arguments, alone or in a list, are handed
    on as ``xs.Shape``. Enums and classes pass through unchanged."""
    if not callable(fn) or isinstance(fn, type) or not _takes_shapes(fn):
        return fn  # the op itself: ops.Add is xs.ops.Add

    @functools.wraps(fn)
    def op(*args: Any, **kwargs: Any) -> Any:
        return fn(*[_native_arg(a) for a in args], **{k: _native_arg(v) for k, v in kwargs.items()})

    return op


def _takes_shapes(fn: Any) -> bool:
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    return any("Shape" in str(p.annotation) or p.kind is p.VAR_POSITIONAL for p in params)


def _native_arg(value: Any) -> Any:
    if type(value) is Shape:
        return _native_shape(value)
    if isinstance(value, (list, tuple)) and value and any(type(v) is Shape for v in value):
        return type(value)(_native_shape(v) if type(v) is Shape else v for v in value)
    return value


# -- types ------------------------------------------------------------------------------------
def _element_types() -> dict[PrimitiveType, np.dtype[Any]]:
    out: dict[PrimitiveType, np.dtype[Any]] = {}
    for t in PrimitiveType:
        try:
            out[t] = etype_to_dtype(t)
        except DTypeError:  # TUPLE, TOKEN, INVALID, OPAQUE: no numpy dtype
            pass
    return out


XLA_ELEMENT_TYPE_TO_DTYPE: Final[dict[PrimitiveType, np.dtype[Any]]] = _element_types()
"""numpy dtype of each array element type."""

DTYPE_TO_XLA_ELEMENT_TYPE: Final[dict[str, PrimitiveType]] = {
    str(v): k for k, v in XLA_ELEMENT_TYPE_TO_DTYPE.items()
}
"""Element type of each dtype, keyed by ``str(np.dtype(...))`` as in the former module."""


_SHAPE_SLOTS: Final = _Shape.__slots__  # every field of a shape, whatever xs.Shape adds


class Shape(_Shape):
    """``xs.Shape`` with the former ``element_type()``: the numpy dtype of an array shape (as
    jaxlib's ``xla_client.Shape`` returns it), where ``xs.Shape.element_type()`` gives the
    ``PrimitiveType``. Everything else is ``xs.Shape``'s; ``xla_client.ops`` take these shapes
    and ``XlaBuilder.get_shape``, ``shape_from_pyval`` and program shapes give them.
    """

    __slots__ = ()

    def element_type(self) -> Any:
        """numpy dtype of an array shape; ``PrimitiveType.TUPLE`` / ``TOKEN`` for the others
        (jaxlib 0.10.2 raises there)."""
        et = self._etype
        if self._tuple is not None or et is PrimitiveType.TOKEN:
            return et
        return etype_to_dtype(et)

    def primitive_type(self) -> PrimitiveType:
        """The element type as a ``PrimitiveType`` (what ``xs.Shape.element_type()`` returns)."""
        return self._etype

    def tuple_shapes(self) -> tuple[Shape, ...]:
        return tuple(_compat_shape(x) for x in super().tuple_shapes())

    def with_major_to_minor_layout_if_absent(self) -> Shape:
        return _compat_shape(super().with_major_to_minor_layout_if_absent())

    @staticmethod
    def array_shape(
        dtype_or_etype: Any, dims: Iterable[int] = (), layout: Sequence[int] | Layout | None = None,
        dynamic_dimensions: Sequence[bool] | None = None,
    ) -> Shape:
        return _compat_shape(_Shape.array_shape(dtype_or_etype, dims, layout, dynamic_dimensions))

    @staticmethod
    def scalar_shape(dtype_or_etype: Any) -> Shape:
        return _compat_shape(_Shape.scalar_shape(dtype_or_etype))

    @staticmethod
    def tuple_shape(shapes: Iterable[_Shape]) -> Shape:
        return _compat_shape(_Shape.tuple_shape([_native_shape(x) for x in shapes]))

    @staticmethod
    def token_shape() -> Shape:
        return _compat_shape(_Shape.token_shape())


def _convert_shape(s: _Shape, cls: type[_Shape]) -> Any:
    if type(s) is cls:
        return s
    out = object.__new__(cls)
    for k in _SHAPE_SLOTS:
        object.__setattr__(out, k, getattr(s, k))
    return out


def _compat_shape(s: _Shape) -> Shape:
    """``s`` as this module's :class:`Shape` (same value)."""
    return _convert_shape(s, Shape)  # type: ignore[no-any-return]


def _native_shape(s: _Shape) -> _Shape:
    """``s`` as an ``xs.Shape`` (same value)."""
    return _convert_shape(s, _Shape)  # type: ignore[no-any-return]


class ProgramShape(_ProgramShape):
    """``xs.ProgramShape`` whose shapes are this module's :class:`Shape`."""

    __slots__ = ()

    def __init__(
        self, parameter_shapes: Sequence[_Shape], result_shape: _Shape, parameter_names: Sequence[str] = ()
    ) -> None:
        super().__init__([_compat_shape(p) for p in parameter_shapes], _compat_shape(result_shape), parameter_names)

    @classmethod
    def _of(cls, ps: _ProgramShape) -> ProgramShape:
        return cls(ps.parameter_shapes(), ps.result_shape(), ps.parameter_names())


def shape_from_pyval(pyval: Any, layout: Sequence[int] | None = None) -> Shape:
    """The :class:`Shape` of a Python value (as ``xs.shape_from_pyval``).

    Parameters
    ----------
    pyval:
        numpy array or scalar, Python scalar (``float`` is f32, ``int`` s32, ``bool`` pred), or
        a nested tuple of them (a tuple shape).
    layout:
        Optional ``minor_to_major`` order for an array value.

    Raises
    ------
    DTypeError
        For values of no XLA element type.
    """
    s = _shape_from_pyval(pyval)
    if layout is None or not s.is_array():
        return _compat_shape(s)
    return Shape.array_shape(s.numpy_dtype(), s.dimensions(), list(layout))


# -- computations -----------------------------------------------------------------------------
class _Name(str):
    """A ``str`` that can also be called, so ``comp.name`` and the former ``comp.name()`` both work."""

    __slots__ = ()

    def __call__(self) -> str:
        return str(self)


class HloModule:
    """An HLO module (jaxlib's ``HloModule`` surface): ``to_string()``,
    ``as_serialized_hlo_module_proto()``, ``name``."""

    __slots__ = ("_m",)

    _m: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "HloModule objects come from XlaComputation.get_hlo_module(), LoadedExecutable.hlo_modules() "
            "or HloModule.from_serialized_hlo_module_proto(bytes)"
        )

    @classmethod
    def _wrap(cls, module: Any) -> HloModule:
        m = object.__new__(cls)
        m._m = module
        return m

    @staticmethod
    def from_serialized_hlo_module_proto(data: bytes) -> HloModule:
        """Parse a serialized ``xla.HloModuleProto``.

        Raises
        ------
        FormatError
            If XLA cannot read it.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise FormatError(f"HloModule.from_serialized_hlo_module_proto: expected bytes, got {type(data).__name__}")
        try:
            return HloModule._wrap(_mlir.hlo_module_from_proto(bytes(data)))
        except Exception as e:
            raise FormatError(f"HloModule.from_serialized_hlo_module_proto: {e}") from e

    def to_string(self, options: Any = None) -> str:
        """HLO text; ``options`` may be any object with a ``print_metadata`` attribute (default True)."""
        metadata = True if options is None else bool(getattr(options, "print_metadata", True))
        return _mlir.hlo_module_to_text(self._m, metadata=metadata)

    def as_serialized_hlo_module_proto(self) -> bytes:
        """The module as a serialized ``xla.HloModuleProto``."""
        return _mlir.hlo_module_to_proto(self._m)

    @property
    def name(self) -> str:
        """The module's name (``HloModule <name>`` in the text)."""
        head = self.to_string(_NO_METADATA).split(None, 2)
        return head[1].rstrip(",") if len(head) > 1 else ""

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return f"HloModule({self.name!r})"


_NO_METADATA: Final = types.SimpleNamespace(print_metadata=False)


class XlaComputation(_XlaComputation):
    """An ``xs.XlaComputation`` with the former constructor and methods.

    ``XlaComputation(serialized_hlo_module_proto)`` loads a serialized ``xla.HloModuleProto``;
    :class:`XlaBuilder` builds return this class. ``name`` is a string that can also be
    called (``comp.name()``, the former method). ``get_hlo_module()`` / ``as_hlo_module()``
    return an :class:`HloModule`.

    Raises
    ------
    FormatError
        For bytes that are not a valid HLO module proto.
    """

    def __new__(cls, serialized_hlo_module_proto: bytes) -> XlaComputation:
        data = serialized_hlo_module_proto
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"XlaComputation(serialized_hlo_module_proto): expected bytes, got {type(data).__name__}; "
                "build computations with XlaBuilder"
            )
        try:
            loaded = _XlaComputation.from_hlo_proto(bytes(data))
        except _errors.FormatError as e:
            raise FormatError(str(e)) from e
        return cls._adopt(loaded)

    def __init__(self, serialized_hlo_module_proto: bytes) -> None:
        pass  # all done in __new__

    def __copy__(self) -> XlaComputation:
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        return new

    @classmethod
    def _adopt(cls, comp: _XlaComputation) -> XlaComputation:
        """``comp`` as this class (same state; ``comp`` itself stays valid)."""
        if isinstance(comp, cls):
            return comp
        new = object.__new__(cls)
        new.__dict__.update(comp.__dict__)
        return new

    @property
    def name(self) -> _Name:
        """The computation's name; also callable, ``comp.name()``, as in the former API."""
        return _Name(super().name)

    def get_hlo_module(self) -> HloModule:
        """The unoptimized program as an :class:`HloModule`."""
        return HloModule._wrap(super().get_hlo_module())

    def program_shape(self) -> ProgramShape:
        """Parameter shapes and result shape, as this module's :class:`Shape`."""
        return ProgramShape._of(super().program_shape())

    def as_hlo_module(self) -> HloModule:
        """Same as :meth:`get_hlo_module`."""
        return self.get_hlo_module()


class XlaBuilder(_XlaBuilder):
    """``xs.XlaBuilder`` whose :meth:`build` returns the compatibility :class:`XlaComputation`."""

    def build(self, root: XlaOp | Sequence[XlaOp] | None = None) -> XlaComputation:
        """Build the computation whose result is ``root`` (default: the last op built).

        Raises
        ------
        ShapeError
            No ops, ``root`` from another builder, or gaps in parameter numbers.
        """
        return XlaComputation._adopt(super().build(root))

    def get_shape(self, op: XlaOp) -> Shape:
        """The Shape of ``op`` (``element_type()`` a numpy dtype, as in the former API)."""
        return _compat_shape(super().get_shape(op))

    def get_program_shape(self, root: XlaOp | None = None) -> ProgramShape:
        """Parameter shapes and the result shape of the computation built so far."""
        return ProgramShape._of(super().get_program_shape(root))


def _as_computation(computation: Any, what: str) -> _XlaComputation:
    if isinstance(computation, _XlaComputation):
        return computation
    if isinstance(computation, (str, bytes, bytearray, memoryview)):
        data = computation if isinstance(computation, str) else bytes(computation)
        try:
            return _XlaComputation.from_stablehlo(data)
        except _errors.FormatError as e:
            raise FormatError(f"{what}: {e}") from e
    raise TypeError(
        f"{what}: expected an XlaComputation or StableHLO module text/bytecode, got {type(computation).__name__}"
    )


def _xla_computation_to_mlir_module(computation: _XlaComputation) -> str:
    """StableHLO text of a computation (with locations), as ``_xla.mlir`` gave it."""
    return computation.as_stablehlo_text(debug_info=True)


def _mlir_module_to_xla_computation(
    mlir_module: str | bytes, use_tuple_args: bool = False, return_tuple: bool = False
) -> XlaComputation:
    """An :class:`XlaComputation` from StableHLO text or bytecode."""
    if use_tuple_args or return_tuple:
        raise FormatError("mlir_module_to_xla_computation: use_tuple_args / return_tuple are not supported")
    return XlaComputation._adopt(_as_computation(mlir_module, "mlir_module_to_xla_computation"))


# ``xla_client._xla.mlir.*``: the two converters test suites call through the private module.
_xla: Final = types.SimpleNamespace(
    mlir=types.SimpleNamespace(
        xla_computation_to_mlir_module=_xla_computation_to_mlir_module,
        mlir_module_to_xla_computation=_mlir_module_to_xla_computation,
    ),
    XlaRuntimeError=XlaRuntimeError,
    hlo_module_cost_analysis=lambda client, module: _hlo_module_cost_analysis(client, module),
    Traceback=_compat.Traceback,
    Frame=_compat.Frame,
)


def _hlo_module_cost_analysis(client: Any, module: Any) -> dict[str, float]:
    """``_xla.hlo_module_cost_analysis(backend, hlo_module)``: XLA's cost analysis (``flops``,
    ``bytes accessed``, ...) of an unoptimized module, for ``backend``'s platform.

    ``client`` is a :class:`Client` or ``xs.Client``; ``module`` an :class:`HloModule` (from
    ``XlaComputation.get_hlo_module()``) or an ``xs.XlaComputation``.

    Raises
    ------
    TypeError
        For other argument types.
    XlaRuntimeError
        When XLA cannot analyse the module.
    """
    sdk = client.sdk_client if isinstance(client, Client) else client
    if not isinstance(sdk, _SdkClient):
        raise TypeError(f"hlo_module_cost_analysis: expected a Client, got {type(client).__name__}")
    if isinstance(module, _XlaComputation):
        module = XlaComputation._adopt(module).get_hlo_module()
    if not isinstance(module, HloModule):
        raise TypeError(f"hlo_module_cost_analysis: expected an HloModule, got {type(module).__name__}")
    return _compat.hlo_module_cost_analysis(sdk._c, module._m)
# ``_xla.buffer_to_dlpack_managed_tensor`` / ``_xla.dlpack_managed_tensor_to_buffer`` and
# ``_xla.HostBufferSemantics`` are set after the Buffer and Client classes below.


# -- compile options --------------------------------------------------------------------------
class DeviceAssignment(tuple[tuple[int, ...], ...]):
    """Device ids per ``[replica][computation]`` (the former ``xla_client.DeviceAssignment``).

    A tuple of rows, so it can be given to ``CompileOptions.device_assignment`` directly.
    """

    @staticmethod
    def create(assignment: Any) -> DeviceAssignment:
        """A DeviceAssignment from an int array of shape ``[replicas, computations]`` (a 1-D
        array is one id per replica).

        Raises
        ------
        ShapeError
            For an empty array, a rank other than 1 or 2, non-integer or negative ids.
        """
        try:
            arr = np.asarray(assignment)
        except Exception:
            arr = np.asarray([], dtype=object)
        if arr.ndim == 1:
            arr = arr.reshape(-1, 1)
        if arr.ndim != 2 or arr.size == 0 or arr.dtype.kind not in "iu" or int(arr.min()) < 0:
            raise ShapeError(
                "DeviceAssignment.create: expected a non-empty 2-D array of device ids >= 0 "
                f"[replicas, computations], got {assignment!r}"
            )
        return DeviceAssignment(tuple(int(x) for x in row) for row in arr)

    def replica_count(self) -> int:
        """Number of replicas (rows)."""
        return len(self)

    def computation_count(self) -> int:
        """Number of computations (partitions) per replica (columns)."""
        return len(self[0]) if self else 0

    def serialize(self) -> bytes:
        """The serialized ``xla.DeviceAssignmentProto`` (as jaxlib's ``DeviceAssignment.serialize``)."""
        return _compat.device_assignment_proto(self)

    def __repr__(self) -> str:
        return f"DeviceAssignment({[list(r) for r in self]})"


class DebugOptions:
    """``executable_build_options.debug_options``: setting ``xla_*`` fields adds XLA options to
    the owning :class:`CompileOptions` ``env_option_overrides``; reading gives the value set
    (AttributeError when unset: XLA's default applies)."""

    __slots__ = ("_owner",)

    _owner: CompileOptions

    def __init__(self, owner: CompileOptions) -> None:
        object.__setattr__(self, "_owner", owner)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("xla_"):
            for k, v in self._owner.env_option_overrides:
                if k == name:
                    return v
        raise AttributeError(f"debug option {name!r} is not set (XLA's default applies)")

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("xla_"):
            raise AttributeError(f"DebugOptions has no field {name!r}; XLA debug options start with 'xla_'")
        env = [p for p in self._owner.env_option_overrides if p[0] != name]
        self._owner.env_option_overrides = [*env, (name, value)]


class ExecutableBuildOptions:
    """``CompileOptions.executable_build_options``: a view of the owning options' replica,
    partition and device-assignment fields, plus ``debug_options``."""

    __slots__ = ("_owner", "use_spmd_partitioning", "use_auto_spmd_partitioning")

    def __init__(self, owner: CompileOptions) -> None:
        self._owner = owner
        self.use_spmd_partitioning = False  # informational: xlasdk partitions when num_partitions > 1
        self.use_auto_spmd_partitioning = False

    @property
    def num_replicas(self) -> int:
        return self._owner.num_replicas

    @num_replicas.setter
    def num_replicas(self, value: int) -> None:
        self._owner.num_replicas = value

    @property
    def num_partitions(self) -> int:
        return self._owner.num_partitions

    @num_partitions.setter
    def num_partitions(self, value: int) -> None:
        self._owner.num_partitions = value

    @property
    def device_assignment(self) -> DeviceAssignment | None:
        a = self._owner.device_assignment
        return None if a is None else DeviceAssignment(a)

    @device_assignment.setter
    def device_assignment(self, value: Any) -> None:
        self._owner.device_assignment = value

    @property
    def debug_options(self) -> DebugOptions:
        return DebugOptions(self._owner)


class CompileOptions(_CompileOptions):
    """``xs.CompileOptions`` with the former fields.

    ``CompileOptions()``, then set ``num_replicas``, ``num_partitions``, ``device_assignment``
    (a :class:`DeviceAssignment` or an int array), ``env_option_overrides`` (``(name, value)``
    pairs), or the same through ``executable_build_options`` (and its ``debug_options``).
    ``tuple_arguments`` / ``parameter_is_tupled_arguments`` must stay False and
    ``argument_layouts`` None (compiling otherwise raises :class:`CompileError`);
    ``compile_portable_executable`` and ``profile_version`` are accepted and ignored.
    """

    __slots__ = (
        "tuple_arguments", "parameter_is_tupled_arguments", "argument_layouts", "compile_portable_executable",
        "profile_version", "_build",
    )

    def __init__(
        self,
        num_replicas: int = 1,
        num_partitions: int = 1,
        device_assignment: Any = None,
        env_option_overrides: Any = None,
        *,
        xla_dump_to: str | None = None,
    ) -> None:
        super().__init__(num_replicas, num_partitions, device_assignment, env_option_overrides, xla_dump_to=xla_dump_to)
        self.tuple_arguments = False
        self.parameter_is_tupled_arguments = False
        self.argument_layouts: Any = None
        self.compile_portable_executable = False
        self.profile_version = 0
        self._build = ExecutableBuildOptions(self)

    @property
    def executable_build_options(self) -> ExecutableBuildOptions:
        return self._build

    def _check_supported(self, what: str) -> None:
        if self.tuple_arguments or self.parameter_is_tupled_arguments:
            raise CompileError(f"{what}: tuple_arguments is not supported; pass one argument per parameter")
        if self.argument_layouts is not None:
            raise CompileError(f"{what}: argument_layouts is not supported; parameters use the default layout")


# -- buffers ----------------------------------------------------------------------------------
class Buffer:
    """An array on one device (the former ``xla_client`` buffer / ``ArrayImpl``).

    Wraps an ``xs.DeviceArray`` (:attr:`device_array`). ``np.asarray(buf)`` reads it back
    (read-only, as :meth:`xs.DeviceArray.to_numpy`).

    Attributes
    ----------
    shape : tuple of int
    dtype : numpy.dtype
    """

    __slots__ = ("_a", "_client", "_traceback", "__weakref__")

    _a: DeviceArray
    _client: Client
    _traceback: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("Buffers are made by Client.buffer_from_pyval(value, device) or LoadedExecutable.execute")

    @classmethod
    def _make(cls, array: DeviceArray, owner: Client) -> Buffer:
        b = object.__new__(cls)
        b._a = array
        b._client = owner
        b._traceback = _compat.current_traceback()
        owner._track(b)
        return b

    @property
    def traceback(self) -> Any:
        """Where the buffer was made: a :class:`Traceback`, or None when tracebacks were off
        (see :func:`tracebacks`)."""
        return self._traceback

    @property
    def device_array(self) -> DeviceArray:
        """The ``xs.DeviceArray`` behind this buffer."""
        return self._a

    @property
    def client(self) -> Client:
        return self._client

    @property
    def shape(self) -> tuple[int, ...]:
        return self._a.shape

    @property
    def dtype(self) -> np.dtype[Any]:
        return self._a.dtype

    @property
    def ndim(self) -> int:
        return self._a.ndim

    @property
    def size(self) -> int:
        return self._a.size

    @property
    def nbytes(self) -> int:
        return self._a.nbytes

    def device(self) -> Device:
        """The device holding the buffer."""
        return self._a.device

    def devices(self) -> set[Device]:
        return {self._a.device}

    def platform(self) -> str:
        return self._a.device.platform

    def xla_shape(self) -> Shape:
        """The XLA :class:`Shape` (``f32[2,3]``)."""
        return _compat_shape(self._a.xla_shape())

    def on_device_size_in_bytes(self) -> int:
        """Bytes the buffer occupies on the device.

        Raises
        ------
        XlaRuntimeError
            If the buffer was deleted.
        """
        return self._a.on_device_size_in_bytes()

    def unsafe_buffer_pointer(self) -> int:
        """Device address of the buffer (valid while it is alive and not deleted).

        Raises
        ------
        XlaRuntimeError
            If the buffer was deleted.
        """
        return self._a.unsafe_buffer_pointer()

    def is_ready(self) -> bool:
        """Whether the value is computed (never waits).

        Raises
        ------
        XlaRuntimeError
            If the buffer was deleted (where jaxlib's ``is_ready`` crashes the process).
        """
        return self._a.is_ready()

    def clone(self) -> Buffer:
        """A second buffer object over the **same** device memory, as jaxlib's ``clone``
        (``unsafe_buffer_pointer()`` is equal). The memory is freed when both are gone:
        :meth:`delete` on either then only drops that object. For an independent copy use
        ``xs.DeviceArray.clone()`` (``buf.device_array.clone()``).

        Raises
        ------
        XlaRuntimeError
            If the buffer was deleted.
        """
        return Buffer._make(self._a._share(), self._client)

    def block_until_ready(self) -> Buffer:
        """Wait until the value is computed; return ``self``.

        Raises
        ------
        XlaRuntimeError
            If the buffer was deleted or the computation producing it failed.
        """
        self._a.block_until_ready()
        return self

    def copy_to_host_async(self) -> None:
        """Start reading the value back (here: checks the buffer is alive; the copy happens on
        first numpy conversion).

        Raises
        ------
        XlaRuntimeError
            If the buffer was deleted.
        """
        if self._a.is_deleted():
            raise XlaRuntimeError(f"copy_to_host_async: {self._describe()} has been deleted")

    def copy_to_device(self, device: Device) -> Buffer:
        """A copy of the value on ``device`` (a new buffer, via the host)."""
        return self._client.buffer_from_pyval(self._a.to_numpy(), device)

    def delete(self) -> None:
        """Free the device memory now (deleting twice is allowed)."""
        self._a.delete()

    def is_deleted(self) -> bool:
        return self._a.is_deleted()

    def to_py(self) -> np.ndarray[Any, Any]:
        """The value as a numpy array (the former name of ``np.asarray(buf)``)."""
        return self._a.to_numpy()

    def item(self) -> Any:
        return self._a.item()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray[Any, Any]:
        return self._a.__array__(dtype, copy)

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._a.__dlpack_device__()

    def __len__(self) -> int:
        return len(self._a)

    def _describe(self) -> str:
        return f"buffer {self._a.xla_shape()} on {self._a.device}"

    def __repr__(self) -> str:
        return repr(self._a).replace("DeviceArray(", "Buffer(", 1)

    def __str__(self) -> str:
        return str(self._a)


ArrayImpl = Buffer


def _unwrap(value: Any) -> Any:
    return value._a if isinstance(value, Buffer) else value


# -- executables ------------------------------------------------------------------------------
class Token:
    """The completion of a run on one device (the former ``xla_client.Token``), from
    :meth:`LoadedExecutable.execute_with_token`: ready when the run and its side effects (host
    callbacks, ``ops.DebugPrint``) are done. Wraps an ``xs.ExecutionToken``."""

    __slots__ = ("_t",)

    def __init__(self, token: ExecutionToken) -> None:
        self._t = token

    def block_until_ready(self) -> None:
        """Wait for the run. Raises :class:`XlaRuntimeError` if it failed."""
        self._t.block_until_ready()

    def __repr__(self) -> str:
        return f"Token({self._t!r})"


class ShardedToken:
    """The completion of a run on several devices (the former ``xla_client.ShardedToken``)."""

    __slots__ = ("_t",)

    def __init__(self, token: ExecutionToken) -> None:
        self._t = token

    def block_until_ready(self) -> None:
        """Wait for the run on every device. Raises :class:`XlaRuntimeError` if it failed."""
        self._t.block_until_ready()

    def get_token(self, device_index: int) -> Token:
        """The :class:`Token` of the ``device_index``-th device (ShapeError out of range)."""
        return Token(self._t.get_token(device_index))

    def __repr__(self) -> str:
        return f"ShardedToken({self._t!r})"


class ShardedBuffer:
    """One output (or argument) of a multi-device run: one :class:`Buffer` per device, in device
    order (the former ``xla_client.ShardedBuffer``)."""

    __slots__ = ("_bufs",)

    def __init__(self, buffers: Sequence[Buffer]) -> None:
        bufs = list(buffers)
        if not bufs or not all(isinstance(b, Buffer) for b in bufs):
            raise DTypeError("ShardedBuffer: expected a non-empty list of Buffers")
        self._bufs = bufs

    @staticmethod
    def from_pybuffers(buffers: Sequence[Buffer]) -> ShardedBuffer:
        """A ShardedBuffer of ``buffers`` (one per device)."""
        return ShardedBuffer(buffers)

    def get_pybuffers(self) -> list[Buffer]:
        """The per-device buffers."""
        return list(self._bufs)

    get_device_buffers = get_pybuffers

    @property
    def shape(self) -> tuple[int, ...]:
        return self._bufs[0].shape

    @property
    def dtype(self) -> np.dtype[Any]:
        return self._bufs[0].dtype

    def block_until_ready(self) -> ShardedBuffer:
        for b in self._bufs:
            b.block_until_ready()
        return self

    def delete(self) -> None:
        for b in self._bufs:
            b.delete()

    def is_deleted(self) -> bool:
        return any(b.is_deleted() for b in self._bufs)

    def __len__(self) -> int:
        return len(self._bufs)

    def __getitem__(self, i: int) -> Buffer:
        return self._bufs[i]

    def __iter__(self) -> Iterator[Buffer]:
        return iter(self._bufs)

    def __repr__(self) -> str:
        return f"ShardedBuffer({self.dtype}{list(self.shape)} on {len(self._bufs)} devices)"


def _per_device(arg: Any) -> Any:
    return arg.get_pybuffers() if isinstance(arg, ShardedBuffer) else arg


class ExecuteResults:
    """Results of :meth:`LoadedExecutable.execute_sharded`."""

    __slots__ = ("_outs", "_token")

    def __init__(self, outputs: list[list[Buffer]], token: ShardedToken | None = None) -> None:
        self._outs = outputs
        self._token = token

    def consume_token(self) -> ShardedToken:
        """The run's :class:`ShardedToken` (``execute_sharded(..., with_tokens=True)`` only).

        Raises
        ------
        XlaRuntimeError
            When the run was made without ``with_tokens=True``.
        """
        if self._token is None:
            raise XlaRuntimeError("consume_token: run execute_sharded(..., with_tokens=True) to get a token")
        return self._token

    def disassemble_into_single_device_arrays(self) -> list[list[Buffer]]:
        """``[output][device]`` buffers."""
        return [list(o) for o in self._outs]

    def disassemble_prefix_into_single_device_arrays(self, n: int) -> list[list[Buffer]]:
        """The first ``n`` outputs, ``[output][device]``."""
        return [list(o) for o in self._outs[:n]]


class LoadedExecutable:
    """A compiled program loaded on its devices (the former ``LoadedExecutable``).

    Wraps an ``xs.Executable`` (:attr:`executable`). Run it with :meth:`execute` (one device)
    or :meth:`execute_sharded_on_local_devices` (replicas / partitions).
    """

    __slots__ = ("_e", "_client", "_traceback", "__weakref__")

    _e: Executable | None
    _client: Client
    _traceback: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("LoadedExecutable objects are made by Client.compile(computation)")

    @classmethod
    def _make(cls, exe: Executable, owner: Client) -> LoadedExecutable:
        e = object.__new__(cls)
        e._e = exe
        e._client = owner
        e._traceback = _compat.current_traceback()
        return e

    @property
    def traceback(self) -> Any:
        """Where the executable was compiled: a :class:`Traceback`, or None when tracebacks were
        off (see :func:`tracebacks`)."""
        return self._traceback

    @property
    def executable(self) -> Executable:
        """The ``xs.Executable`` behind this one.

        Raises
        ------
        XlaRuntimeError
            After :meth:`delete`.
        """
        if self._e is None:
            raise XlaRuntimeError("the executable has been deleted")
        return self._e

    @property
    def client(self) -> Client:
        return self._client

    @property
    def name(self) -> str:
        return self.executable.name

    def local_devices(self) -> list[Device]:
        """The devices it runs on, replica-major."""
        return list(self.executable.devices)

    def execute(self, arguments: Sequence[Any], device: Device | None = None) -> list[Buffer]:
        """Run on the executable's single device.

        Parameters
        ----------
        arguments:
            One per parameter: :class:`Buffer` (or anything ``xs.Executable`` accepts: numpy
            arrays, ``xs.DeviceArray``...).
        device:
            Must be None or the executable's device.

        Returns
        -------
        list of Buffer
            The outputs; a tuple result gives one buffer per element.

        Raises
        ------
        ShapeError, DTypeError
            Wrong number of arguments, or an argument of the wrong shape or dtype.
        XlaRuntimeError
            A deleted buffer argument, a multi-device executable, or a failure while running.
        """
        exe = self.executable
        if device is not None and device not in exe.devices:
            raise XlaRuntimeError(f"execute: {exe.name} is loaded on {list(map(str, exe.devices))}, not {device}")
        out = exe(*[_unwrap(a) for a in arguments])
        outs = out if isinstance(out, tuple) else (out,)
        return [Buffer._make(a, self._client) for a in outs]

    def execute_with_token(self, arguments: Sequence[Any], device: Device | None = None) -> tuple[list[Buffer], Token]:
        """:meth:`execute`, also returning the run's :class:`Token` (ready when the run and its
        side effects are done).

        Raises
        ------
        As :meth:`execute`.
        """
        exe = self.executable
        if device is not None and device not in exe.devices:
            raise XlaRuntimeError(f"execute: {exe.name} is loaded on {list(map(str, exe.devices))}, not {device}")
        out, token = exe.execute_with_token(*[_unwrap(a) for a in arguments])
        outs = out if isinstance(out, tuple) else (out,)
        return [Buffer._make(a, self._client) for a in outs], Token(token)

    def execute_sharded_on_local_devices_with_tokens(
        self, arguments: Sequence[Sequence[Any]]
    ) -> tuple[list[list[Buffer]], ShardedToken]:
        """:meth:`execute_sharded_on_local_devices`, also returning the run's :class:`ShardedToken`."""
        outs, token = self._execute_sharded(arguments, True)
        assert token is not None
        return outs, ShardedToken(token)

    def execute_sharded_on_local_devices(self, arguments: Sequence[Sequence[Any]]) -> list[list[Buffer]]:
        """Run on every device of the executable.

        Parameters
        ----------
        arguments:
            ``arguments[i][d]``: parameter ``i`` on device ``d`` (devices as
            :meth:`local_devices`).

        Returns
        -------
        list of list of Buffer
            ``[output][device]``.

        Raises
        ------
        ShapeError
            When a parameter's list does not have one entry per device, or as for :meth:`execute`.
        """
        return self._execute_sharded(arguments, False)[0]

    def _execute_sharded(
        self, arguments: Sequence[Sequence[Any]], with_tokens: bool
    ) -> tuple[list[list[Buffer]], ExecutionToken | None]:
        exe = self.executable
        n = len(exe.devices)
        arguments = [_per_device(a) for a in arguments]
        for i, per_dev in enumerate(arguments):
            if isinstance(per_dev, (str, bytes)) or not isinstance(per_dev, Sequence) or len(per_dev) != n:
                raise ShapeError(
                    f"execute_sharded_on_local_devices: argument {i} must be a list of {n} buffers "
                    f"(one per device), got {type(per_dev).__name__}"
                    + (f" of length {len(per_dev)}" if isinstance(per_dev, Sequence) else "")
                )
        per_device = [[_unwrap(arg[d]) for arg in arguments] for d in range(n)]
        token: ExecutionToken | None = None
        if with_tokens:
            results, token = exe.execute_replicated_with_tokens(per_device)
        else:
            results = exe.execute_replicated(per_device)
        rows = [r if isinstance(r, tuple) else (r,) for r in results]
        nout = len(rows[0]) if rows else 0
        return [[Buffer._make(rows[d][j], self._client) for d in range(n)] for j in range(nout)], token

    def execute_sharded(self, arguments: Sequence[Any], with_tokens: bool = False) -> ExecuteResults:
        """Like :meth:`execute_sharded_on_local_devices`; an argument may also be a single
        buffer when the executable has one device.

        Returns
        -------
        ExecuteResults
            ``disassemble_into_single_device_arrays()`` gives ``[output][device]`` buffers.
        """
        args: list[Any] = [a if isinstance(a, (list, tuple, ShardedBuffer)) else [a] for a in arguments]
        outs, token = self._execute_sharded(args, bool(with_tokens))
        return ExecuteResults(outs, ShardedToken(token) if token is not None else None)

    def hlo_modules(self) -> list[HloModule]:
        """The optimized HLO module(s)."""
        return [HloModule._wrap(m) for m in self.executable._hlo_modules()]

    def get_hlo_text(self) -> str:
        """Optimized HLO text."""
        return self.executable.hlo_text()

    as_text = get_hlo_text

    @property
    def fingerprint(self) -> str | None:
        """XLA's fingerprint of the compiled program (None if the backend has none)."""
        return self.executable.fingerprint

    def cost_analysis(self) -> dict[str, float]:
        return self.executable.cost_analysis()

    def get_compiled_memory_stats(self) -> MemoryStats:
        return self.executable.memory_stats()

    def size_of_generated_code_in_bytes(self) -> int:
        return self.executable.memory_stats().generated_code_size_in_bytes

    def serialize(self) -> bytes:
        """Same as ``client.serialize_executable(self)``."""
        return self.executable.serialize()

    def delete(self) -> None:
        """Drop the executable (running it afterwards raises :class:`XlaRuntimeError`)."""
        self._e = None

    def is_deleted(self) -> bool:
        return self._e is None

    def __repr__(self) -> str:
        return "LoadedExecutable(<deleted>)" if self._e is None else f"Loaded{self._e!r}"


# -- client -----------------------------------------------------------------------------------
class Client:
    """A backend with the former ``xla_client.Client`` methods (from :func:`make_cpu_client`).

    Wraps an ``xs.Client`` (:attr:`sdk_client`). Buffers and executables it makes remember
    it; :meth:`live_buffers` lists its buffers that are still alive.
    """

    __slots__ = ("_c", "_live", "__weakref__")

    _c: _SdkClient
    _live: list[weakref.ref[Buffer]]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("use xla_client.make_cpu_client()")

    @classmethod
    def _make(cls, sdk_client: _SdkClient) -> Client:
        c = object.__new__(cls)
        c._c = sdk_client
        c._live = []
        return c

    # -- description ---------------------------------------------------------------------------
    @property
    def sdk_client(self) -> _SdkClient:
        """The ``xs.Client`` behind this one."""
        return self._c

    @property
    def platform(self) -> str:
        return self._c.platform

    @property
    def platform_version(self) -> str:
        return self._c.platform_version

    def devices(self) -> list[Device]:
        return self._c.devices()

    def local_devices(self) -> list[Device]:
        return self._c.devices()

    def device_count(self) -> int:
        return self._c.device_count

    def local_device_count(self) -> int:
        return self._c.device_count

    def process_index(self) -> int:
        return 0

    host_id = process_index

    def get_default_device_assignment(
        self, num_replicas: int, num_partitions: int | None = None
    ) -> list[Device] | list[list[Device]]:
        """The first ``num_replicas * num_partitions`` devices: a list per replica, or (when
        ``num_partitions`` is None) one device per replica.

        Raises
        ------
        XlaRuntimeError
            If the client has too few devices.
        """
        parts = 1 if num_partitions is None else num_partitions
        devs = self._c.devices()
        if num_replicas < 1 or parts < 1 or num_replicas * parts > len(devs):
            raise XlaRuntimeError(
                f"get_default_device_assignment: {num_replicas} x {parts} devices requested, "
                f"the client has {len(devs)}"
            )
        if num_partitions is None:
            return devs[:num_replicas]
        return [devs[r * parts : (r + 1) * parts] for r in range(num_replicas)]

    def __repr__(self) -> str:
        return f"xla_client.Client({self._c!r})"

    # -- buffers -------------------------------------------------------------------------------
    def _track(self, buf: Buffer) -> None:
        live = self._live
        live.append(weakref.ref(buf))
        if len(live) >= 256 and len(live) & (len(live) - 1) == 0:  # prune at powers of two
            live[:] = [r for r in live if r() is not None]

    def live_buffers(self) -> list[Buffer]:
        """Buffers made through this client that are alive and not deleted, newest first."""
        out: list[Buffer] = []
        keep: list[weakref.ref[Buffer]] = []
        for r in self._live:
            b = r()
            if b is not None and not b.is_deleted():
                keep.append(r)
                out.append(b)
        self._live = keep
        out.reverse()
        return out

    live_arrays = live_buffers

    def buffer_from_pyval(
        self,
        pyval: Any,
        device: Device | None = None,
        force_copy: bool = False,
        host_buffer_semantics: Any = None,
    ) -> Buffer:
        """Copy a value to ``device`` (default: the client's first device).

        Parameters
        ----------
        pyval:
            numpy array or scalar (keeps its dtype), Python scalar (``float`` -> f32, ``int``
            -> s32, ``bool`` -> pred), :class:`Buffer`, ``xs.DeviceArray`` or a DLPack producer.
        device:
            A device of this client (from :meth:`devices`).
        force_copy:
            Copy even under ``HostBufferSemantics.ZERO_COPY``.
        host_buffer_semantics:
            A :class:`HostBufferSemantics` (default ``ZERO_COPY``, as the former client):
            ``ZERO_COPY`` aliases a C-contiguous numpy array whose data is 64-byte aligned
            (``xs.aligned_empty`` makes one) on CPU, and copies anything else;
            ``IMMUTABLE_ONLY_DURING_CALL`` / ``IMMUTABLE_UNTIL_TRANSFER_COMPLETES`` copy.

        Returns
        -------
        Buffer
            A new buffer; it aliases ``pyval`` only under ``ZERO_COPY`` (then
            ``unsafe_buffer_pointer() == pyval.ctypes.data`` and the buffer keeps ``pyval``
            alive).

        Raises
        ------
        DTypeError
            For values of no XLA element type, or a Python int outside s32.
        ValueError
            For an unknown ``host_buffer_semantics``.

        Maps to PJRT ``Client::BufferFromHostBuffer``.
        """
        dev = device if device is not None else self._c.default_device
        value = _unwrap(pyval)
        if isinstance(value, DeviceArray):
            value = value.to_numpy()  # a fresh buffer, never an alias
        sem = HostBufferSemantics.ZERO_COPY if host_buffer_semantics is None else host_buffer_semantics
        return Buffer._make(device_put(value, dev, semantics=sem, force_copy=bool(force_copy)), self)

    # -- compiling -----------------------------------------------------------------------------
    def compile(self, computation: Any, compile_options: Any = None) -> LoadedExecutable:
        """Compile ``computation`` for this client's devices.

        Parameters
        ----------
        computation:
            An :class:`XlaComputation` (from :class:`XlaBuilder` or ``xs``), or StableHLO
            module text / bytecode.
        compile_options:
            :class:`CompileOptions` (or ``xs.CompileOptions``), or a list of devices to run on
            (the newer ``compile(module, executable_devices, ...)`` form). Default: one
            replica on the client's first device.

        Raises
        ------
        CompileError
            When XLA rejects the program or options (also an :class:`XlaRuntimeError`).
        FormatError
            For unreadable StableHLO text.
        """
        if isinstance(compile_options, Sequence) and not isinstance(compile_options, (str, bytes)):
            return self.compile_and_load(computation, compile_options)
        return self.compile_and_load(computation, None, compile_options)

    def compile_and_load(
        self, computation: Any, executable_devices: Sequence[Device] | None = None, compile_options: Any = None
    ) -> LoadedExecutable:
        """Compile ``computation`` and load it on ``executable_devices`` (default: as the
        options' device assignment says, else the client's first devices).

        Raises
        ------
        CompileError
            When XLA rejects the program or options, or ``executable_devices`` does not match
            ``num_replicas * num_partitions``.
        """
        what = "compile"
        comp = _as_computation(computation, what)
        opts = compile_options if compile_options is not None else CompileOptions()
        if not isinstance(opts, _CompileOptions):
            raise TypeError(f"{what}: compile_options must be a CompileOptions, got {type(opts).__name__}")
        if isinstance(opts, CompileOptions):
            opts._check_supported(what)
        devs = list(executable_devices) if executable_devices is not None else []
        if devs:
            if len(devs) != opts.num_devices:
                raise CompileError(
                    f"{what}: {len(devs)} executable_devices for num_replicas={opts.num_replicas} x "
                    f"num_partitions={opts.num_partitions}"
                )
            ids = np.asarray([d.id for d in devs], dtype=np.int64).reshape(opts.num_replicas, opts.num_partitions)
            opts = _CompileOptions(opts.num_replicas, opts.num_partitions, ids, opts.env_option_overrides)
            base = devs[0]
        else:
            base = self._c.default_device
        try:
            if opts.device_assignment is not None and not devs:
                base = self._c.device(opts.device_assignment[0][0])
            exe = _sdk_compile(comp, base, options=opts)
        except UnknownDeviceError as e:
            raise CompileError(f"{what}: {e}") from e
        except _errors.CompileError as e:
            if isinstance(e, XlaRuntimeError):
                raise
            raise CompileError(str(e)) from e
        return LoadedExecutable._make(exe, self)

    def emit_python_callback(
        self,
        callable: Callable[..., Any],  # noqa: A002 - the former name
        builder: _XlaBuilder,
        operands: Sequence[XlaOp],
        result_shapes: Sequence[_Shape],
        operand_layouts: Sequence[Any] | None = None,
        has_side_effects: bool = False,
    ) -> tuple[XlaOp, Any]:
        """Build a call of the Python function ``callable`` (the former
        ``Client.emit_python_callback``), over ``ops.HostCallback``.

        ``callable`` receives one numpy array per operand and returns a tuple (or list) with one
        array per shape of ``result_shapes``.

        Parameters
        ----------
        builder: the XlaBuilder; operands: its array XlaOps; result_shapes: array Shapes.
        operand_layouts: None, or one entry per operand that is None, the operand's Shape or a
            row-major ``minor_to_major`` order (jaxlib passes row-major arrays; others are
            refused).
        has_side_effects: keep the call even when its results are unused.

        Returns
        -------
        ``(op, keepalive)``: a tuple-shaped XlaOp of the results, and the callback object
        (executables keep their callbacks alive themselves; holding it is harmless).

        Raises
        ------
        DTypeError, ShapeError
            As ``ops.HostCallback``; ShapeError for a non-row-major operand layout.
        """
        if operand_layouts is not None:
            if len(operand_layouts) != len(operands):
                raise ShapeError(
                    f"emit_python_callback: {len(operand_layouts)} operand_layouts for {len(operands)} operands"
                )
            for i, (lay, x) in enumerate(zip(operand_layouts, operands, strict=True)):
                rank = x.shape.rank() if isinstance(x, XlaOp) else 0
                m2m: Any = lay
                if isinstance(lay, _Shape):
                    layout = lay.layout()
                    m2m = None if layout is None else layout.minor_to_major()
                if m2m is not None and tuple(m2m) != tuple(range(rank - 1, -1, -1)):
                    raise ShapeError(
                        f"emit_python_callback: operand_layouts[{i}] = {m2m!r} is not row-major; "
                        "host callbacks receive row-major (C-contiguous) arrays"
                    )
        shapes = [_native_shape(s) if isinstance(s, _Shape) else s for s in result_shapes]
        op = _xs_ops.HostCallback(
            callable, list(operands), shapes, has_side_effect=has_side_effects, builder=builder
        )
        return op, getattr(op.extra, "callback", None)

    def serialize_executable(self, executable: LoadedExecutable) -> bytes:
        """The executable as bytes for :meth:`deserialize_executable` (same jaxlib version and
        platform only; load only blobs you trust)."""
        return executable.executable.serialize()

    def deserialize_executable(
        self, serialized: bytes, executable_devices: Any = None, compile_options: Any = None
    ) -> LoadedExecutable:
        """Load an executable from :meth:`serialize_executable`, without compiling.

        ``executable_devices`` (a list of devices; its first one is used) or the client's
        first device says where; ``compile_options`` is accepted for compatibility.

        Raises
        ------
        FormatError
            For empty, truncated, corrupt or foreign data (also an :class:`XlaRuntimeError`).
        """
        if isinstance(executable_devices, _CompileOptions):  # the former (serialized, options) order
            executable_devices = None
        base = self._c.default_device
        if isinstance(executable_devices, Device):
            base = executable_devices
        elif isinstance(executable_devices, Iterable):
            devs = list(executable_devices)
            if devs:
                base = devs[0]
        try:
            exe = _sdk_deserialize(serialized, base)
        except _errors.FormatError as e:
            if isinstance(e, XlaRuntimeError):
                raise
            raise FormatError(str(e)) from e
        return LoadedExecutable._make(exe, self)


def make_cpu_client(
    asynchronous: bool = True,
    distributed_client: Any = None,
    node_id: int = 0,
    num_nodes: int = 1,
    collectives: Any = None,
    num_devices: int | None = None,
) -> Client:
    """A CPU :class:`Client` (the former ``xla_client.make_cpu_client``).

    Parameters
    ----------
    num_devices:
        Number of CPU devices (default: 1, or ``--xla_force_host_platform_device_count`` from
        ``XLA_FLAGS``).
    asynchronous:
        Accepted for compatibility (xlasdk's CPU client is always asynchronous).
    distributed_client, node_id, num_nodes, collectives:
        Multi-process CPU clients are not supported: these must keep their defaults.

    Returns
    -------
    Client
        A new wrapper (its own :meth:`Client.live_buffers`) over xlasdk's cached CPU client
        for that device count.

    Raises
    ------
    XlaRuntimeError
        For multi-process arguments.
    UnknownDeviceError
        For a bad ``num_devices``.
    """
    if distributed_client is not None or num_nodes != 1 or node_id != 0 or collectives is not None:
        raise XlaRuntimeError("make_cpu_client: multi-process CPU clients are not supported by xlasdk")
    return Client._make(_sdk_client("cpu", num_devices))


def make_gpu_client(*args: Any, **kwargs: Any) -> Client:
    """Not provided: GPU backends come from PJRT plugins.

    Raises
    ------
    XlaRuntimeError
        Always, explaining how to get a GPU client: load the CUDA or ROCm PJRT plugin with
        ``xs.load_pjrt_plugin(name, path)`` and use the returned ``xs.Client``.
    """
    raise XlaRuntimeError(
        "make_gpu_client: xlasdk runs GPUs through PJRT plugins; load one with "
        "xs.load_pjrt_plugin('cuda', '/path/to/xla_cuda_plugin.so') and compile for its devices"
    )


def get_local_backend(name: str | None = None) -> Client:
    """The former ``xla_client.get_local_backend``: ``"cpu"`` (or None) gives :func:`make_cpu_client`.

    Raises
    ------
    XlaRuntimeError
        For any other backend name (GPU and TPU backends come from PJRT plugins).
    """
    if name in (None, "cpu"):
        return make_cpu_client()
    raise XlaRuntimeError(
        f"get_local_backend: backend {name!r} is not built in; load its PJRT plugin with xs.load_pjrt_plugin"
    )


# -- DLPack (the former ``_xla`` functions) ---------------------------------------------------
def buffer_to_dlpack_managed_tensor(buffer: Any, stream: int | None = None, take_ownership: bool = False) -> Any:
    """A DLPack capsule (``"dltensor"``) aliasing ``buffer``'s memory (no copy).

    Parameters
    ----------
    buffer:
        A :class:`Buffer` or ``xs.DeviceArray``.
    stream:
        Accepted for compatibility (None on CPU).
    take_ownership:
        The former semantics: the buffer hands its memory to the capsule and becomes deleted
        (``is_deleted()`` is True; using it raises). The memory lives until the consumer
        frees it. Without it the buffer stays usable and the two share the memory.

    Raises
    ------
    BufferError
        If the buffer was deleted.

    Maps to jaxlib ``buffer_to_dlpack_managed_tensor`` (PJRT external reference).
    """
    a = _unwrap(buffer)
    if not isinstance(a, DeviceArray):
        raise TypeError(f"buffer_to_dlpack_managed_tensor: expected a Buffer, got {type(buffer).__name__}")
    capsule = a.__dlpack__(stream=stream)
    if take_ownership:
        a._drop()  # deleting it now would abort in XLA while the capsule lives
    return capsule


def dlpack_managed_tensor_to_buffer(
    tensor: Any, device: Any = None, stream: int | None = None, copy: bool | None = None
) -> Buffer:
    """A :class:`Buffer` over a DLPack capsule (or an object with ``__dlpack__``).

    Parameters
    ----------
    tensor:
        A ``"dltensor"`` capsule (consumed: a second use raises BufferError) or a DLPack
        producer (numpy, torch, jax arrays).
    device:
        A device, or a :class:`Client` (the former ``(tensor, cpu_backend, gpu_backend)`` form;
        its first device), or None for the default CPU device.
    stream:
        Accepted for compatibility.
    copy:
        None: alias when XLA can (64-byte-aligned CPU data), else copy; False: alias or raise
        BufferError; True: always copy.

    Raises
    ------
    BufferError
        For a capsule used twice, or ``copy=False`` with unaligned data.

    Maps to jaxlib ``dlpack_managed_tensor_to_buffer`` (PJRT ``CreateViewOfDeviceBuffer``).
    """
    owner: Client
    if isinstance(device, Client):
        owner, dev = device, device._c.default_device
    elif isinstance(device, Device):
        owner, dev = Client._make(device.client), device
    else:
        owner = make_cpu_client()
        dev = owner._c.default_device
    return Buffer._make(_from_dlpack(_unwrap(tensor), dev, copy=copy), owner)


_xla.buffer_to_dlpack_managed_tensor = buffer_to_dlpack_managed_tensor
_xla.dlpack_managed_tensor_to_buffer = dlpack_managed_tensor_to_buffer
_xla.HostBufferSemantics = HostBufferSemantics


# -- running with Python values ---------------------------------------------------------------
def execute_with_python_values(
    executable: LoadedExecutable, arguments: Sequence[Any], backend: Client
) -> list[np.ndarray[Any, Any]]:
    """Run on one device with Python/numpy values in and numpy arrays out.

    Each argument is copied with ``backend.buffer_from_pyval`` to the executable's first
    device; every output (one per tuple element for a tuple result) comes back as a read-only
    numpy array.

    Raises
    ------
    ShapeError, DTypeError
        Wrong number of arguments, or an argument of the wrong shape or dtype.
    """
    device = executable.local_devices()[0]
    buffers = [backend.buffer_from_pyval(a, device=device) for a in arguments]
    return [np.asarray(x) for x in executable.execute(buffers)]


def execute_with_python_values_replicated(
    executable: LoadedExecutable, arguments: Sequence[Sequence[Any]], backend: Client
) -> list[list[np.ndarray[Any, Any]]]:
    """Run on every device with Python values: ``arguments[replica][arg]`` in,
    ``[replica][output]`` numpy arrays out.

    Raises
    ------
    ShapeError
        When ``arguments`` does not have one list per device, or lists of unequal length.
    """
    devices = executable.local_devices()
    if len(arguments) != len(devices):
        raise ShapeError(
            f"execute_with_python_values_replicated: {len(arguments)} argument lists for {len(devices)} devices"
        )
    nargs = {len(a) for a in arguments}
    if len(nargs) > 1:
        raise ShapeError(f"execute_with_python_values_replicated: argument lists of unequal lengths {sorted(nargs)}")
    per_param = [
        [backend.buffer_from_pyval(arguments[d][i], device=devices[d]) for d in range(len(devices))]
        for i in range(nargs.pop() if nargs else 0)
    ]
    outs = executable.execute_sharded_on_local_devices(per_param)
    return [[np.asarray(o[d]) for o in outs] for d in range(len(devices))]


# -- tracebacks ---------------------------------------------------------------------------------
Traceback: Final = _compat.Traceback
"""jaxlib's ``Traceback``: ``Traceback.get_traceback()`` (None while tracebacks are off),
``frames``, ``raw_frames()``, ``as_python_traceback()``, ``traceback_from_frames(frames)``."""

Frame: Final = _compat.Frame
"""jaxlib's ``Frame(file_name, function_name, function_start_line, line_num)``."""


@contextlib.contextmanager
def tracebacks(enabled: bool = True) -> Iterator[None]:
    """Turn the recording of Python tracebacks on (or off) inside a ``with`` block: then
    ``Traceback.get_traceback()``, ``Buffer.traceback`` and ``LoadedExecutable.traceback`` give
    where things were made (None while off). The setting is process-wide (jaxlib's)."""
    saved = _compat.tracebacks_enabled()
    _compat.set_tracebacks_enabled(bool(enabled))
    try:
        yield
    finally:
        _compat.set_tracebacks_enabled(saved)


# -- other former names -------------------------------------------------------------------------
class ShapeIndex:
    """A path into a tuple shape (the former ``xla_client.ShapeIndex``): ``ShapeIndex([0, 1])``
    is element 1 of element 0. Compares and hashes by value."""

    __slots__ = ("_indices",)

    def __init__(self, indices: Sequence[int] = ()) -> None:
        from .ops._core import int_list

        self._indices = int_list("ShapeIndex", "indices", list(indices))
        if any(i < 0 for i in self._indices):
            raise ShapeError(f"ShapeIndex: indices must be >= 0, got {list(self._indices)}")

    def __iter__(self) -> Iterator[int]:
        return iter(self._indices)

    def __len__(self) -> int:
        return len(self._indices)

    def __getitem__(self, i: int) -> int:
        return self._indices[i]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShapeIndex) and other._indices == self._indices

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(("ShapeIndex", self._indices))

    def __repr__(self) -> str:
        return f"ShapeIndex({{{', '.join(map(str, self._indices))}}})"


class DeviceArrayBase(abc.ABC):  # noqa: B024 - a marker base, as in the former API
    """The former base class of device arrays: ``isinstance(x, DeviceArrayBase)`` holds for
    :class:`Buffer` and ``xs.DeviceArray``."""


DeviceArrayBase.register(Buffer)
DeviceArrayBase.register(DeviceArray)
