"""xlasdk: build XLA computations op by op, read their HLO, save them, compile and run them.

``import xlasdk as xs`` and ``from xlasdk import ops``.
"""

from __future__ import annotations

from . import distributed, ops
from .attrs import (
    ComparisonDirection,
    ComparisonType,
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
    current_source_info_metadata,
    make_convolution_dimension_numbers,
    make_dot_dimension_numbers,
    make_padding_config,
    make_replica_groups,
    window_padding_type_to_pad_values,
)
from .builder import XlaBuilder, XlaOp
from .computation import XlaComputation
from .distributed import process_count, process_index
from .errors import (
    CompileError,
    DistributedError,
    DTypeError,
    FormatError,
    GraphImportError,
    HostCallbackError,
    PluginError,
    ShapeError,
    XlaRuntimeError,
    XlaSdkError,
)
from .formats import load_computation
from .formats.graph_import import Instruction
from .formats.snapshot import Snapshot, load_snapshot, write_snapshot
from .inputs import random_inputs
from .reducer import NotReproducedError, ReduceResult, reduce
from .reference import CompareReport, UnsupportedOpError, compare, evaluate
from .runtime import (
    Client,
    CompileCache,
    CompileOptions,
    Device,
    DeviceArray,
    Executable,
    ExecutionToken,
    HostBufferSemantics,
    JaxlibVersion,
    MemoryStats,
    UnknownDeviceError,
    aligned_empty,
    client,
    compile,
    default_device,
    deserialize_executable,
    device_put,
    devices,
    from_dlpack,
    jaxlib_version_info,
    load_executable,
    load_pjrt_plugin,
    local_devices,
    register_custom_call_target,
)
from .runtime.sharded import ShardedArray, shard
from .shape import Layout, ProgramShape, Shape, shape_from_pyval
from .sharding import HloSharding
from .types import PrimitiveType, bfloat16, dtype_to_etype, etype_to_dtype

__version__ = "0.1.0"

__all__ = [
    "ops", "XlaBuilder", "XlaOp", "XlaComputation",
    "Shape", "ProgramShape", "Layout", "shape_from_pyval", "PrimitiveType", "bfloat16", "dtype_to_etype",
    "etype_to_dtype",
    "XlaSdkError", "ShapeError", "DTypeError", "CompileError", "XlaRuntimeError", "FormatError",
    "ComparisonDirection", "ComparisonType", "ConvolutionDimensionNumbers", "CurrentSourceInfoMetadata",
    "DotDimensionNumbers", "FftType", "GatherDimensionNumbers", "OpMetadata", "OpSharding", "PaddingConfig",
    "PaddingConfigDimension", "PaddingType", "PrecisionConfig", "RandomAlgorithm", "ResultAccuracy",
    "ScatterDimensionNumbers", "current_source_info_metadata", "make_convolution_dimension_numbers",
    "make_dot_dimension_numbers", "make_padding_config", "make_replica_groups",
    "window_padding_type_to_pad_values",
    "Client", "CompileOptions", "Device", "DeviceArray", "Executable", "ExecutionToken", "MemoryStats",
    "UnknownDeviceError", "HostCallbackError",
    "client", "compile", "default_device", "deserialize_executable", "device_put", "devices", "load_executable",
    "load_pjrt_plugin", "load_computation", "CompileCache",
    "distributed", "local_devices", "process_index", "process_count", "DistributedError", "PluginError",
    "HloSharding", "ShardedArray", "shard",
    "HostBufferSemantics", "aligned_empty", "from_dlpack", "JaxlibVersion", "jaxlib_version_info",
    "register_custom_call_target",
    "Instruction", "GraphImportError",
    "evaluate", "compare", "CompareReport", "UnsupportedOpError",
    "reduce", "ReduceResult", "NotReproducedError",
    "Snapshot", "load_snapshot", "write_snapshot", "random_inputs",
    "__version__",
]
