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

from .._jaxlib import compat as _compat
from .._jaxlib import pjrt as _pjrt
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
from ..builder import XlaOp
from ..errors import HostCallbackError, XlaRuntimeError
from ..runtime import Device, HostBufferSemantics
from ..shape import Layout
from ..types import PrimitiveType, bfloat16, dtype_to_etype
from . import _client, _computations, _dlpack
from ._buffers import ArrayImpl, Buffer, DeviceArrayBase
from ._client import (
    Client,
    execute_with_python_values,
    execute_with_python_values_replicated,
    get_local_backend,
    make_cpu_client,
    make_gpu_client,
    register_custom_call_target,
)
from ._computations import HloModule, XlaBuilder, XlaComputation
from ._executables import ExecuteResults, LoadedExecutable, ShardedBuffer, ShardedToken, Token
from ._ops import ops
from ._options import CompileOptions, DebugOptions, DeviceAssignment, ExecutableBuildOptions
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

# The private names of jaxlib's ``xla_client`` that test suites use, defined here (not in ``__all__``,
# as in jaxlib): ``_version``, the extension version JAX gates on, and ``_xla``, the namespace of the
# former extension module (``_xla.mlir.*`` converters, cost analysis, DLPack functions).
_version: int = _pjrt.XLA_CLIENT_VERSION
_xla = _types.SimpleNamespace(
    mlir=_types.SimpleNamespace(
        xla_computation_to_mlir_module=_computations._xla_computation_to_mlir_module,
        mlir_module_to_xla_computation=_computations._mlir_module_to_xla_computation,
    ),
    XlaRuntimeError=XlaRuntimeError,
    hlo_module_cost_analysis=_client._hlo_module_cost_analysis,
    Traceback=_compat.Traceback,
    Frame=_compat.Frame,
    buffer_to_dlpack_managed_tensor=_dlpack.buffer_to_dlpack_managed_tensor,
    dlpack_managed_tensor_to_buffer=_dlpack.dlpack_managed_tensor_to_buffer,
    HostBufferSemantics=HostBufferSemantics,
)
