"""Running computations on PJRT devices: clients, devices, arrays, compilation, execution.

``xs.compile(computation, device)`` gives an :class:`Executable`; calling it with numpy arrays,
Python scalars or :class:`DeviceArray` values runs it. ``xs.device_put`` moves values to a
device; ``xs.devices()`` / ``xs.client()`` list the devices; ``xs.load_pjrt_plugin`` adds a
backend (CUDA, ROCm, TPU...) from its PJRT plugin library.
"""

from __future__ import annotations

from .._cache import CompileCache
from .._jaxlib.custom_calls import register_custom_call_target, registered_custom_call_targets
from ._compile import compile, deserialize_executable, load_executable
from ._executable import Executable, ExecutionToken
from ._options import CompileOptions, MemoryStats
from .array import (
    ZERO_COPY_ALIGNMENT,
    DeviceArray,
    HostBufferSemantics,
    aligned_empty,
    device_put,
    from_dlpack,
)
from .device import (
    Client,
    Device,
    JaxlibVersion,
    UnknownDeviceError,
    client,
    default_device,
    devices,
    jaxlib_version_info,
    load_pjrt_plugin,
    local_devices,
)

__all__ = [
    "register_custom_call_target",
    "registered_custom_call_targets",
    "JaxlibVersion",
    "jaxlib_version_info",
    "CompileCache",
    "Device",
    "Client",
    "devices",
    "local_devices",
    "client",
    "default_device",
    "load_pjrt_plugin",
    "UnknownDeviceError",
    "DeviceArray",
    "device_put",
    "from_dlpack",
    "HostBufferSemantics",
    "aligned_empty",
    "ZERO_COPY_ALIGNMENT",
    "CompileOptions",
    "Executable",
    "ExecutionToken",
    "MemoryStats",
    "compile",
    "deserialize_executable",
    "load_executable",
]
