"""xlasdk: build XLA computations op by op, read their HLO, save them, compile and run them.

``import xlasdk as xs`` and ``from xlasdk import ops``.

The package imports lazily (PEP 562): ``import xlasdk`` loads only this file, and each public name
imports its module (and so jaxlib, numpy and ml_dtypes) on first use, so that ``xlasdk --help``,
``xlasdk version`` and the usage errors of the command answer without loading jaxlib. Type
checkers see the plain imports below.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import distributed, formats, ops, reference, sharding
    from ._cache import CompileCache
    from ._triage import TriageReport, triage
    from ._version import __version__
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
    from .builder import Graph, ModuleContext, XlaBuilder, XlaOp
    from .distributed import process_count, process_index
    from .errors import (
        CollectiveTimeoutError,
        CompareArgumentError,
        CompileError,
        CompileOnlyError,
        DeviceCountError,
        DistributedError,
        DLPackError,
        DTypeError,
        ExecutionTimeoutError,
        FormatError,
        GraphImportError,
        HostCallbackError,
        NotReproducedError,
        OtherEnvironmentError,
        PlatformLoweringError,
        PluginError,
        ShapeError,
        ToleranceError,
        UnknownDeviceError,
        UnsupportedOnDeviceError,
        UnsupportedOpError,
        XlaRuntimeError,
        XlaSdkError,
    )
    from .formats import load_computation
    from .formats.snapshot import Snapshot, load_snapshot, write_snapshot
    from .inputs import random_inputs
    from .program.computation import XlaComputation
    from .program.graph_import import Instruction
    from .reducer import ReduceResult, reduce
    from .reference import CompareReport, CompareSettings, compare, evaluate
    from .reference._other_env import OtherEnvironment
    from .reference.collectives import evaluate_spmd
    from .runtime import (
        Client,
        CompileOptions,
        Device,
        DeviceArray,
        Executable,
        ExecutionToken,
        HostBufferSemantics,
        JaxlibVersion,
        MemoryStats,
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
    from .runtime.capabilities import Capabilities, Support, capabilities
    from .runtime.host_load import load_host_part
    from .runtime.host_parts import HostPart, read_host_part
    from .runtime.jax_interop import share_with_jax
    from .runtime.per_partition import PerPartitionPlan, run_per_partition
    from .runtime.sharded import ShardedArray, shard
    from .runtime.topology import CompileOnlyExecutable, Topology, topology
    from .shape import Layout, ProgramShape, Shape, shape_from_pyval
    from .sharding import HloSharding
    from .types import PrimitiveType, bfloat16, dtype_to_etype, etype_to_dtype

# public name -> (module relative to this package, attribute; None: the module itself)
_LAZY: dict[str, tuple[str, str | None]] = {
    "distributed": ("distributed", None),
    "formats": ("formats", None),
    "ops": ("ops", None),
    "reference": ("reference", None),
    "sharding": ("sharding", None),
    "ComparisonDirection": ("attrs", "ComparisonDirection"),
    "ComparisonType": ("attrs", "ComparisonType"),
    "ConvolutionDimensionNumbers": ("attrs", "ConvolutionDimensionNumbers"),
    "CurrentSourceInfoMetadata": ("attrs", "CurrentSourceInfoMetadata"),
    "DotDimensionNumbers": ("attrs", "DotDimensionNumbers"),
    "FftType": ("attrs", "FftType"),
    "GatherDimensionNumbers": ("attrs", "GatherDimensionNumbers"),
    "OpMetadata": ("attrs", "OpMetadata"),
    "OpSharding": ("attrs", "OpSharding"),
    "PaddingConfig": ("attrs", "PaddingConfig"),
    "PaddingConfigDimension": ("attrs", "PaddingConfigDimension"),
    "PaddingType": ("attrs", "PaddingType"),
    "PrecisionConfig": ("attrs", "PrecisionConfig"),
    "RandomAlgorithm": ("attrs", "RandomAlgorithm"),
    "ResultAccuracy": ("attrs", "ResultAccuracy"),
    "ScatterDimensionNumbers": ("attrs", "ScatterDimensionNumbers"),
    "current_source_info_metadata": ("attrs", "current_source_info_metadata"),
    "make_convolution_dimension_numbers": ("attrs", "make_convolution_dimension_numbers"),
    "make_dot_dimension_numbers": ("attrs", "make_dot_dimension_numbers"),
    "make_padding_config": ("attrs", "make_padding_config"),
    "make_replica_groups": ("attrs", "make_replica_groups"),
    "window_padding_type_to_pad_values": ("attrs", "window_padding_type_to_pad_values"),
    "XlaBuilder": ("builder", "XlaBuilder"),
    "Graph": ("builder", "Graph"),
    "ModuleContext": ("builder", "ModuleContext"),
    "XlaOp": ("builder", "XlaOp"),
    "XlaComputation": ("program.computation", "XlaComputation"),
    "process_count": ("distributed", "process_count"),
    "process_index": ("distributed", "process_index"),
    "CompareArgumentError": ("errors", "CompareArgumentError"),
    "CompileError": ("errors", "CompileError"),
    "DeviceCountError": ("errors", "DeviceCountError"),
    "UnsupportedOnDeviceError": ("errors", "UnsupportedOnDeviceError"),
    "PlatformLoweringError": ("errors", "PlatformLoweringError"),
    "OtherEnvironmentError": ("errors", "OtherEnvironmentError"),
    "OtherEnvironment": ("reference._other_env", "OtherEnvironment"),
    "PerPartitionPlan": ("runtime.per_partition", "PerPartitionPlan"),
    "run_per_partition": ("runtime.per_partition", "run_per_partition"),
    "triage": ("_triage", "triage"),
    "TriageReport": ("_triage", "TriageReport"),
    "DistributedError": ("errors", "DistributedError"),
    "ExecutionTimeoutError": ("errors", "ExecutionTimeoutError"),
    "DTypeError": ("errors", "DTypeError"),
    "FormatError": ("errors", "FormatError"),
    "GraphImportError": ("errors", "GraphImportError"),
    "HostCallbackError": ("errors", "HostCallbackError"),
    "PluginError": ("errors", "PluginError"),
    "ShapeError": ("errors", "ShapeError"),
    "ToleranceError": ("errors", "ToleranceError"),
    "XlaRuntimeError": ("errors", "XlaRuntimeError"),
    "XlaSdkError": ("errors", "XlaSdkError"),
    "load_computation": ("formats", "load_computation"),
    "Instruction": ("program.graph_import", "Instruction"),
    "Snapshot": ("formats.snapshot", "Snapshot"),
    "load_snapshot": ("formats.snapshot", "load_snapshot"),
    "write_snapshot": ("formats.snapshot", "write_snapshot"),
    "random_inputs": ("inputs", "random_inputs"),
    "NotReproducedError": ("errors", "NotReproducedError"),
    "ReduceResult": ("reducer", "ReduceResult"),
    "reduce": ("reducer", "reduce"),
    "CompareReport": ("reference", "CompareReport"),
    "CompareSettings": ("reference", "CompareSettings"),
    "UnsupportedOpError": ("errors", "UnsupportedOpError"),
    "compare": ("reference", "compare"),
    "evaluate": ("reference", "evaluate"),
    "evaluate_spmd": ("reference.collectives", "evaluate_spmd"),
    "CollectiveTimeoutError": ("errors", "CollectiveTimeoutError"),
    "Client": ("runtime", "Client"),
    "CompileCache": ("_cache", "CompileCache"),
    "CompileOptions": ("runtime", "CompileOptions"),
    "Device": ("runtime", "Device"),
    "DeviceArray": ("runtime", "DeviceArray"),
    "Executable": ("runtime", "Executable"),
    "ExecutionToken": ("runtime", "ExecutionToken"),
    "HostBufferSemantics": ("runtime", "HostBufferSemantics"),
    "JaxlibVersion": ("runtime", "JaxlibVersion"),
    "MemoryStats": ("runtime", "MemoryStats"),
    "UnknownDeviceError": ("errors", "UnknownDeviceError"),
    "aligned_empty": ("runtime", "aligned_empty"),
    "client": ("runtime", "client"),
    "compile": ("runtime", "compile"),
    "default_device": ("runtime", "default_device"),
    "deserialize_executable": ("runtime", "deserialize_executable"),
    "device_put": ("runtime", "device_put"),
    "devices": ("runtime", "devices"),
    "from_dlpack": ("runtime", "from_dlpack"),
    "jaxlib_version_info": ("runtime", "jaxlib_version_info"),
    "load_executable": ("runtime", "load_executable"),
    "load_pjrt_plugin": ("runtime", "load_pjrt_plugin"),
    "local_devices": ("runtime", "local_devices"),
    "register_custom_call_target": ("runtime", "register_custom_call_target"),
    "share_with_jax": ("runtime.jax_interop", "share_with_jax"),
    "topology": ("runtime.topology", "topology"),
    "capabilities": ("runtime.capabilities", "capabilities"),
    "Capabilities": ("runtime.capabilities", "Capabilities"),
    "Support": ("runtime.capabilities", "Support"),
    "HostPart": ("runtime.host_parts", "HostPart"),
    "load_host_part": ("runtime.host_load", "load_host_part"),
    "read_host_part": ("runtime.host_parts", "read_host_part"),
    "DLPackError": ("errors", "DLPackError"),
    "Topology": ("runtime.topology", "Topology"),
    "CompileOnlyExecutable": ("runtime.topology", "CompileOnlyExecutable"),
    "CompileOnlyError": ("errors", "CompileOnlyError"),
    "ShardedArray": ("runtime.sharded", "ShardedArray"),
    "shard": ("runtime.sharded", "shard"),
    "Layout": ("shape", "Layout"),
    "ProgramShape": ("shape", "ProgramShape"),
    "Shape": ("shape", "Shape"),
    "shape_from_pyval": ("shape", "shape_from_pyval"),
    "HloSharding": ("sharding", "HloSharding"),
    "PrimitiveType": ("types", "PrimitiveType"),
    "bfloat16": ("types", "bfloat16"),
    "dtype_to_etype": ("types", "dtype_to_etype"),
    "etype_to_dtype": ("types", "etype_to_dtype"),
    "__version__": ("_version", "__version__"),
}

__all__ = [
    "ops", "formats", "sharding", "XlaBuilder", "XlaOp", "XlaComputation",
    "Shape", "ProgramShape", "Layout", "shape_from_pyval", "PrimitiveType", "bfloat16", "dtype_to_etype",
    "etype_to_dtype",
    "XlaSdkError", "ShapeError", "DTypeError", "CompileError", "XlaRuntimeError", "FormatError",
    "CompareArgumentError", "ToleranceError",
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
    "ExecutionTimeoutError", "DeviceCountError", "UnsupportedOnDeviceError", "PlatformLoweringError",
    "PerPartitionPlan", "run_per_partition",
    "HloSharding", "ShardedArray", "shard",
    "share_with_jax", "topology", "Topology", "CompileOnlyExecutable", "CompileOnlyError",
    "capabilities", "Capabilities", "Support", "HostPart", "load_host_part", "read_host_part", "DLPackError",
    "HostBufferSemantics", "aligned_empty", "from_dlpack", "JaxlibVersion", "jaxlib_version_info",
    "register_custom_call_target",
    "Instruction", "GraphImportError", "Graph", "ModuleContext",
    "reference", "evaluate", "compare", "CompareReport", "CompareSettings", "UnsupportedOpError", "evaluate_spmd",
    "CollectiveTimeoutError", "OtherEnvironment", "OtherEnvironmentError",
    "reduce", "triage", "TriageReport", "ReduceResult", "NotReproducedError",
    "Snapshot", "load_snapshot", "write_snapshot", "random_inputs",
    "__version__",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562), and keep the value here."""
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'xlasdk' has no attribute {name!r}") from None
    value = importlib.import_module(f".{module}", __name__)
    if attr is not None:
        value = getattr(value, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (``__all__``) and the submodules imported so far, not this module's own
    helpers (``importlib``, ``Any``...)."""
    prefix = __name__ + "."
    subs = {n for n, v in globals().items() if isinstance(v, type(importlib)) and v.__name__.startswith(prefix)}
    return sorted(set(__all__) | subs)
