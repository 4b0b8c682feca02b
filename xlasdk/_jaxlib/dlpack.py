"""DLPack and host-buffer interop on jaxlib (see :mod:`xlasdk._jaxlib.pjrt`)."""

from __future__ import annotations

import ctypes
import math
import threading
from typing import Any, Final

import numpy as np
from jaxlib import xla_client as _xc

from ..errors import DLPackError as DLPackError  # defined in errors; importable from here as before
from ._pjrt_base import _J, Aval, _batched_device_put, _one_line, _runtime_error, _shimmed


def dlpack_export(array: Any, stream: int | None) -> Any:
    """``buffer_to_dlpack_managed_tensor``: a DLPack capsule aliasing the device buffer."""
    try:
        return _J.buffer_to_dlpack_managed_tensor(array, stream=stream)
    except Exception as e:
        raise BufferError(f"DLPack export failed: {_one_line(e)}") from e


# -- host views through DLPack -----------------------------------------------------------------
# jaxlib's own readback (``_single_device_array_to_np_array_did_copy``) makes a second jaxlib array
# for the shard it reads, which needs ``jax.core.ShapedArray``: with jax installed and not yet
# imported, the first readback of a bfloat16 or float8 array imports all of jax (0.35-0.5 s). The
# buffer protocol (:func:`xlasdk._jaxlib.pjrt.host_view`) does not know those element types; DLPack
# does (checked on jaxlib 0.10.2 and 0.12.0.1: bfloat16, float16, float8 export; int4/uint4 are
# refused; float4 exports with 4 bits an element, which :func:`dlpack_host_view` leaves to jaxlib).
# Deleting an array while a DLPack capsule of it is alive aborts the process (see above): the
# caller marks the array exported (never deleted, freed when the last reference goes, as after
# ``__dlpack__``) under HOLD_LOCK, and checks that mark under the same lock before it deletes.
HOLD_LOCK: Final = threading.Lock()
_DLCPU: Final = 1


class _DLDevice(ctypes.Structure):
    _fields_ = (("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32))


class _DLDataType(ctypes.Structure):
    _fields_ = (("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16))


class _DLTensor(ctypes.Structure):
    _fields_ = (
        ("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    )


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = (ctypes.py_object, ctypes.c_char_p)


def dlpack_host_view(array: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray[Any, Any] | None:
    """A zero-copy, read-only numpy view of a CPU array of ``shape`` and ``dtype`` through DLPack
    (no ``jax`` import, unlike jaxlib's readback), or None when DLPack cannot say exactly that
    (another device, a sub-byte element type, a tensor whose shape or element size differs, an
    export jaxlib refuses): the caller then uses jaxlib's readback, which also reports errors.

    The caller has waited for the value. The view keeps the DLPack capsule (and so the device
    buffer) alive: the caller holds :data:`HOLD_LOCK` and marks the array as exported (never to
    be deleted explicitly) before calling. The view follows the tensor's strides, so a buffer in
    a non-row-major layout reads in its logical order.
    """
    try:
        capsule = _J.buffer_to_dlpack_managed_tensor(array, stream=None)
        t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    except Exception:
        return None  # the readback reports the failure
    if (t.device.device_type != _DLCPU or t.dtype.lanes != 1 or dtype.itemsize not in (1, 2, 4, 8)
            or t.dtype.bits != dtype.itemsize * 8
            or t.ndim != len(shape) or tuple(t.shape[i] for i in range(t.ndim)) != shape):
        return None  # the capsule, unconsumed, releases the buffer when it goes
    item = dtype.itemsize
    if math.prod(shape) == 0:
        out = np.empty(shape, dtype)
    else:
        strides = (tuple(t.strides[i] for i in range(t.ndim)) if t.strides
                   else tuple(math.prod(shape[i + 1:]) for i in range(len(shape))))
        if any(s < 0 for s in strides):
            return None
        extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=True))
        raw = (ctypes.c_char * (extent * item)).from_address(int(t.data or 0) + int(t.byte_offset))
        raw._xlasdk_capsule = capsule  # type: ignore[attr-defined]  # the memory lives as long as the view
        # strided over unsigned integers of the element's size (numpy's stride tricks do not know
        # ml_dtypes' types), then seen as the element type (same size: any strides allowed)
        flat = np.frombuffer(memoryview(raw).cast("B"), dtype=np.dtype(f"u{item}"))
        out = np.lib.stride_tricks.as_strided(flat, shape, tuple(s * item for s in strides), writeable=False)
        out = out.view(dtype)
    out.flags.writeable = False
    return out


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
