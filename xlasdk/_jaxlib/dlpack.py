"""DLPack and host-buffer interop on jaxlib (see :mod:`xlasdk._jaxlib.pjrt`)."""

from __future__ import annotations

from typing import Any, Final

import numpy as np
from jaxlib import xla_client as _xc

from ..errors import XlaRuntimeError
from ._pjrt_base import _J, Aval, _batched_device_put, _one_line, _runtime_error, _shimmed


def dlpack_export(array: Any, stream: int | None) -> Any:
    """``buffer_to_dlpack_managed_tensor``: a DLPack capsule aliasing the device buffer."""
    try:
        return _J.buffer_to_dlpack_managed_tensor(array, stream=stream)
    except Exception as e:
        raise BufferError(f"DLPack export failed: {_one_line(e)}") from e


def dlpack_import(capsule: Any, device: Any) -> Any:
    """``dlpack_managed_tensor_to_buffer(capsule, device, None, copy=True)``.

    Not supported by PJRT C API (plugin) clients; import host tensors with numpy instead.
    """
    try:
        return _shimmed(_J.dlpack_managed_tensor_to_buffer, capsule, device, None, True)
    except Exception as e:
        raise _runtime_error(f"DLPack import to {device}", e) from e


# -- interop -----------------------------------------------------------------------------------
# Host buffers under each ``HostBufferSemantics``, readiness, and zero-copy DLPack import.
# Checked on jaxlib 0.10.2 (CPU):
# * ``ZERO_COPY`` aliases the numpy data exactly when it is C-contiguous and its address is a
#   multiple of 64 (``ZERO_COPY_ALIGNMENT``), for every element type except the 4-bit ones (int4,
#   uint4, float4 are repacked); jaxlib then holds a reference on the numpy array until the buffer
#   is freed. Otherwise it copies. The other two semantics always copy.
# * ``dlpack_managed_tensor_to_buffer(..., copy=False)`` aliases 64-byte-aligned tensors and
#   raises ``Can't create a view of buffer with unaligned data`` for others; ``copy=True`` *also
#   aliases* aligned data (so a copy must be made by the caller); ``copy=None`` aliases aligned
#   data and copies the rest. A capsule can be consumed once (jaxlib renames it ``used_dltensor``).
# * ``ArrayImpl.is_ready()`` on a deleted array segfaults, and ``ArrayImpl.delete()`` while a DLPack
#   capsule or consumer of the array is alive aborts the process: callers check first.
ZERO_COPY_ALIGNMENT: Final = 64

_SEMANTICS: Final[dict[str, Any]] = {
    name: getattr(_xc.HostBufferSemantics, name)
    for name in ("IMMUTABLE_ONLY_DURING_CALL", "IMMUTABLE_UNTIL_TRANSFER_COMPLETES", "ZERO_COPY")
}


def put_with_semantics(
    value: np.ndarray[Any, Any], aval: Aval, sharding: Any, device: Any, semantics: str, force_copy: bool
) -> Any:
    """``batched_device_put`` of a numpy array (native byte order) under ``semantics`` (one of
    ``IMMUTABLE_ONLY_DURING_CALL``, ``IMMUTABLE_UNTIL_TRANSFER_COMPLETES``, ``ZERO_COPY``);
    ``force_copy`` copies even under ``ZERO_COPY``.

    Raises
    ------
    XlaRuntimeError
        When the transfer fails.
    """
    try:
        return _batched_device_put(
            aval, sharding, [value], [device], True, force_copy, _SEMANTICS[semantics], enable_x64=True
        )
    except Exception as e:
        raise _runtime_error(f"transfer of {aval.dtype}{list(aval.shape)} to {device} ({semantics})", e) from e


class DLPackError(XlaRuntimeError, BufferError):
    """A DLPack capsule that cannot be imported as asked (used twice, or not aliasable): both
    the ``BufferError`` of the array API standard and the ``RuntimeError`` jaxlib raised."""


def array_is_ready(array: Any) -> bool:
    """``ArrayImpl.is_ready()``, checking first that the array is not deleted (jaxlib segfaults
    on a deleted one).

    Raises
    ------
    XlaRuntimeError
        For a deleted array (with jaxlib's wording for deleted buffers), or if the computation
        failed.
    """
    try:
        if array.is_deleted():
            raise RuntimeError("INVALID_ARGUMENT: BlockHostUntilReady() called on deleted or donated buffer")
        return bool(array.is_ready())
    except Exception as e:
        raise _runtime_error("is_ready", e) from e


def dlpack_import_view(capsule: Any, device: Any, copy: bool | None) -> Any:
    """``dlpack_managed_tensor_to_buffer(capsule, device, None, copy)`` (see the notes above:
    ``copy=False`` aliases or fails, ``None`` and ``True`` alias aligned data).

    Raises
    ------
    DLPackError
        (a ``BufferError`` and an :class:`XlaRuntimeError`) when the capsule was already
        consumed, or ``copy=False`` and the data is not aligned.
    XlaRuntimeError
        For any other failure (an unsupported dtype or device, a plugin client).
    """
    try:
        return _shimmed(_J.dlpack_managed_tensor_to_buffer, capsule, device, None, copy)
    except Exception as e:
        msg = _one_line(e)
        if "consumed at most once" in msg or "used_dltensor" in msg:
            raise DLPackError(
                "DLPack import: this capsule was already consumed (a DLPack tensor may be consumed at most "
                "once; call __dlpack__() again for a new capsule)"
            ) from e
        if "unaligned" in msg:
            raise DLPackError(
                f"DLPack import without a copy needs data aligned to {ZERO_COPY_ALIGNMENT} bytes: {msg}"
            ) from e
        raise _runtime_error(f"DLPack import to {device}", e) from e


def array_share(array: Any) -> Any:
    """``ArrayImpl.clone()``: a second jaxlib array over the **same** device buffer."""
    try:
        return array.clone()
    except Exception as e:
        raise _runtime_error("clone", e) from e


def array_minor_to_major(array: Any) -> tuple[int, ...] | None:
    """The buffer's layout as XLA's ``minor_to_major`` (``(n-1, ..., 0)`` is row-major), or None
    when jaxlib does not say. DLPack import keeps a producer's strides as a layout, and an
    executable reads such a buffer as if it were row-major (silently wrong values)."""
    try:
        return tuple(int(d) for d in array._pjrt_layout._xla_layout().minor_to_major())
    except Exception:
        return None
