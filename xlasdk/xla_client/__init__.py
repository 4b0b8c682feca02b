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

import types as _types
import weakref as weakref
from collections.abc import Callable as Callable
from collections.abc import Iterable as Iterable
from collections.abc import Iterator as Iterator
from collections.abc import Sequence as Sequence
from typing import Any as Any
from typing import Final as Final

import numpy as np  # noqa: F401 - class annotations resolve here

from .._jaxlib.pjrt import XLA_CLIENT_VERSION as XLA_CLIENT_VERSION
from ..attrs import (
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
    make_convolution_dimension_numbers,
    make_dot_dimension_numbers,
    make_padding_config,
    make_replica_groups,
    window_padding_type_to_pad_values,
)
from ..attrs import TriangularSolveOptions_Transpose as TriangularSolveOptions_Transpose
from ..builder import XlaOp
from ..errors import DTypeError as DTypeError
from ..errors import HostCallbackError, XlaRuntimeError
from ..errors import ShapeError as ShapeError
from ..runtime import Device, HostBufferSemantics
from ..runtime import DeviceArray as DeviceArray
from ..runtime import Executable as Executable
from ..runtime import ExecutionToken as ExecutionToken
from ..runtime import MemoryStats as MemoryStats
from ..runtime import UnknownDeviceError as UnknownDeviceError
from ..runtime import device_put as device_put
from ..runtime.device import Client as _SdkClient  # noqa: F401 - class annotations resolve here
from ..shape import Layout
from ..types import PrimitiveType, bfloat16, dtype_to_etype
from ..types import etype_to_dtype as etype_to_dtype
from ._buffers import ArrayImpl, Buffer, DeviceArrayBase
from ._buffers import _unwrap as _unwrap
from ._client import (
    Client,
    execute_with_python_values,
    execute_with_python_values_replicated,
    get_local_backend,
    make_cpu_client,
    make_gpu_client,
    register_custom_call_target,
)
from ._computations import _NO_METADATA as _NO_METADATA
from ._computations import HloModule, XlaBuilder, XlaComputation
from ._computations import _as_computation as _as_computation
from ._computations import _hlo_module_cost_analysis as _hlo_module_cost_analysis
from ._computations import _mlir_module_to_xla_computation as _mlir_module_to_xla_computation
from ._computations import _Name as _Name
from ._computations import _xla as _xla
from ._computations import _xla_computation_to_mlir_module as _xla_computation_to_mlir_module
from ._dlpack import buffer_to_dlpack_managed_tensor as buffer_to_dlpack_managed_tensor
from ._dlpack import dlpack_managed_tensor_to_buffer as dlpack_managed_tensor_to_buffer
from ._executables import ExecuteResults, LoadedExecutable, ShardedBuffer, ShardedToken, Token
from ._executables import _per_device as _per_device
from ._ops import _OPS_EXTRAS as _OPS_EXTRAS
from ._ops import _native_arg as _native_arg
from ._ops import _OpsNamespace as _OpsNamespace
from ._ops import _takes_shapes as _takes_shapes
from ._ops import _with_native_shapes as _with_native_shapes
from ._ops import ops
from ._options import CompileOptions, DebugOptions, DeviceAssignment, ExecutableBuildOptions
from ._shapes import _SHAPE_SLOTS as _SHAPE_SLOTS
from ._shapes import (
    DTYPE_TO_XLA_ELEMENT_TYPE,
    XLA_ELEMENT_TYPE_TO_DTYPE,
    CompileError,
    FormatError,
    ProgramShape,
    Shape,
    ShapeIndex,
    shape_from_pyval,
)
from ._shapes import _compat_shape as _compat_shape
from ._shapes import _convert_shape as _convert_shape
from ._shapes import _element_types as _element_types
from ._shapes import _native_shape as _native_shape
from ._shapes import _version as _version
from ._tracebacks import Frame, Traceback, tracebacks

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
    "Device", "Client", "make_cpu_client", "make_gpu_client", "register_custom_call_target",
    "get_local_backend", "LoadedExecutable", "ExecuteResults", "Buffer", "ArrayImpl", "HostBufferSemantics",
    "execute_with_python_values", "execute_with_python_values_replicated",
    "Token", "ShardedToken", "ShardedBuffer", "Traceback", "Frame", "tracebacks", "ShapeIndex",
    "DeviceArrayBase", "HostCallbackError",
]

# The classes and functions keep the module they had when this was one file (reprs, pickles, docs).
for _obj in list(globals().values()):
    if isinstance(_obj, (type, _types.FunctionType)) and _obj.__module__.startswith(__name__ + "._"):
        _obj.__module__ = __name__
del _obj
