"""``Buffer`` (``ArrayImpl``) and ``DeviceArrayBase`` of the former ``xla_client``."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

import numpy as np

from .._jaxlib import compat as _compat
from ..errors import XlaRuntimeError
from ..runtime import Device, DeviceArray
from ._shapes import Shape, _compat_shape

if TYPE_CHECKING:
    from ._client import Client


# -- buffers ----------------------------------------------------------------------------------
class Buffer:
    """An array on one device (the former ``xla_client`` buffer / ``ArrayImpl``).

    Wraps an ``xs.DeviceArray`` (:attr:`device_array`). ``np.asarray(buf)`` reads it back
    (read-only, as :meth:`xs.DeviceArray.to_numpy`).

    Attributes
    ----------
    shape : tuple of int
    dtype : numpy.dtype
    aval, _device : None
        Free slots that JAX once filled on the former buffers (its abstract value and committed
        device); None until set, unused by xlasdk.
    """

    __slots__ = ("_a", "_client", "_traceback", "aval", "_device", "__weakref__")

    _a: DeviceArray
    _client: Client
    _traceback: Any
    aval: Any
    _device: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("Buffers are made by Client.buffer_from_pyval(value, device) or LoadedExecutable.execute")

    @classmethod
    def _make(cls, array: DeviceArray, owner: Client) -> Buffer:
        b = object.__new__(cls)
        b._a = array
        b._client = owner
        b._traceback = _compat.current_traceback()
        b.aval = None
        b._device = None
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

    __array_priority__ = 100  # numpy defers binary operators to the buffer (the former ArrayImpl's value)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray[Any, Any]:
        return self._a.__array__(dtype, copy)

    def __buffer__(self, flags: int) -> memoryview:
        """``memoryview(buffer)`` (Python 3.12+, PEP 688): a read-only view of the value on the
        host, at its real extents for a dynamic result. On Python 3.11 ``memoryview()`` does
        not ask objects for ``__buffer__`` and raises ``TypeError``; use
        ``memoryview(np.asarray(buffer))`` there.

        Raises
        ------
        XlaRuntimeError
            If the buffer was deleted.
        BufferError
            When a writable view is asked for (the host copy is read-only), or for an element
            type the buffer protocol has no format for (bfloat16, the float8 and 4-bit types),
            as jaxlib's buffers did.
        """
        if flags & 1:  # PyBUF_WRITABLE (inspect.BufferFlags.WRITABLE, Python 3.12+)
            raise BufferError("memoryview of an xla_client Buffer is read-only")
        host: Any = self._a.to_numpy()  # numpy arrays export the buffer protocol (typed so from numpy 2.x)
        try:
            return memoryview(host)
        except ValueError as e:  # numpy: "cannot include dtype 'E' in a buffer"
            raise BufferError(
                f"buffers of type {self._a.xla_shape().element_type().name} are not supported by the "
                f"Python buffer protocol ({self._describe()})"
            ) from e

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



class DeviceArrayBase(abc.ABC):  # noqa: B024 - a marker base, as in the former API
    """The former base class of device arrays: ``isinstance(x, DeviceArrayBase)`` holds for
    :class:`Buffer` and ``xs.DeviceArray``."""


DeviceArrayBase.register(Buffer)
DeviceArrayBase.register(DeviceArray)
