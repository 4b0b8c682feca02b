"""DLPack capsules to and from buffers (the former ``_xla`` functions)."""

from __future__ import annotations

from typing import Any

from ..errors import XlaRuntimeError
from ..runtime import Device, DeviceArray
from ..runtime import from_dlpack as _from_dlpack
from ._buffers import Buffer, _unwrap
from ._client import Client, make_cpu_client


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
    XlaRuntimeError
        If the buffer was deleted: "Cannot convert deleted/invalid buffer to DLPack tensor."
        (the former API's error, a ``RuntimeError``).

    Maps to jaxlib ``buffer_to_dlpack_managed_tensor`` (PJRT external reference).
    """
    a = _unwrap(buffer)
    if not isinstance(a, DeviceArray):
        raise TypeError(f"buffer_to_dlpack_managed_tensor: expected a Buffer, got {type(buffer).__name__}")
    if a.is_deleted():
        raise XlaRuntimeError("Cannot convert deleted/invalid buffer to DLPack tensor.")
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

