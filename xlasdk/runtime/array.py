"""``DeviceArray`` (an array in device memory), ``device_put``, ``from_dlpack`` and host buffers.

A :class:`DeviceArray` owns one PJRT buffer on one device. Values move to a device with
:func:`device_put` (or implicitly when an :class:`~xlasdk.Executable` is called with numpy
arguments) and back with :meth:`DeviceArray.to_numpy`, ``np.asarray(x)`` or DLPack.

Zero-copy on CPU
----------------
* ``device_put(x, semantics=HostBufferSemantics.ZERO_COPY)`` makes the device buffer *alias*
  the numpy data when XLA:CPU can: ``x`` is C-contiguous, its data address is a multiple of 64
  bytes (:data:`ZERO_COPY_ALIGNMENT`) and its element type is not a 4-bit one (int4, uint4,
  float4_e2m1fn are repacked). Otherwise the data is copied. numpy aligns its allocations to 16
  bytes only, so an ordinary array is aliased only by chance; :func:`aligned_empty` allocates
  aligned arrays on purpose. The DeviceArray keeps the numpy array alive.
* ``np.asarray(device_array)`` / :meth:`DeviceArray.to_numpy` is a read-only view of the device
  buffer (no copy) for the element types of the Python buffer protocol.
* DLPack both ways: ``np.from_dlpack(a)`` / ``torch.from_dlpack(a)`` alias the buffer;
  :func:`from_dlpack` aliases 64-byte-aligned CPU tensors (torch's allocations always are).
"""

from __future__ import annotations

import enum
import weakref
from typing import Any, Final

import numpy as np

from .._jaxlib import jax_bridge, pjrt
from ..errors import DTypeError, XlaRuntimeError, XlaSdkError
from ..shape import Shape
from ..types import canonical_dtype
from .device import Device, _live, _resolve_device

__all__ = [
    "DeviceArray",
    "device_put",
    "from_dlpack",
    "HostBufferSemantics",
    "aligned_empty",
    "ZERO_COPY_ALIGNMENT",
    "DELETED_MESSAGE",
]

#: Alignment in bytes of host data that XLA:CPU can use in place (``ZERO_COPY``, DLPack import).
ZERO_COPY_ALIGNMENT: Final = pjrt.ZERO_COPY_ALIGNMENT
#: The wording jaxlib and the former ``xla_client`` used for a deleted buffer, kept inside
#: xlasdk's message so code matching it keeps working.
DELETED_MESSAGE: Final = "BlockHostUntilReady() called on deleted or donated buffer"


class HostBufferSemantics(enum.Enum):
    """How a transfer from host memory may use the host data (PJRT ``HostBufferSemantics``).

    * ``IMMUTABLE_ONLY_DURING_CALL``: the data is copied before the call returns; the caller
      may change or free it afterwards (the default).
    * ``IMMUTABLE_UNTIL_TRANSFER_COMPLETES``: the data is copied, possibly after the call
      returns; the array is kept alive (and must not change) until the copy is done.
    * ``ZERO_COPY``: the device buffer may alias the host data for its whole life (on CPU when
      the data is C-contiguous and 64-byte aligned, see :data:`ZERO_COPY_ALIGNMENT`); changes to
      the numpy array then show in the DeviceArray. The numpy array is kept alive while the
      DeviceArray is; after that, jaxlib lets it go at its next host-to-device transfer at the
      latest (it keeps the last zero-copied array until then).
    """

    IMMUTABLE_ONLY_DURING_CALL = "IMMUTABLE_ONLY_DURING_CALL"
    IMMUTABLE_UNTIL_TRANSFER_COMPLETES = "IMMUTABLE_UNTIL_TRANSFER_COMPLETES"
    ZERO_COPY = "ZERO_COPY"


# Every DeviceArray made in this process is appended to runtime.device's weak list of them
# (Device.live_buffers reads it); it is pruned here once it grows past _live_prune_at[0] (a list:
# the executables' generated call paths read it too).
_live_prune_at: Final = [1024]
_ref: Final = weakref.ref
_live_append: Final = _live.append

_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1
# DLPack device types whose memory the host can read directly.
_DL_HOST_READABLE: Final = frozenset({1, 3, 11, 13})  # kDLCPU, kDLCUDAHost, kDLROCMHost, kDLCUDAManaged

_avals: dict[tuple[tuple[int, ...], np.dtype[Any]], pjrt.Aval] = {}
_array_block: Final = pjrt.array_block
# Element types the Python buffer protocol can export (the fast readback, pjrt.host_view).
_BUFFER_DTYPES: Final = frozenset(
    np.dtype(t)
    for t in (
        np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
        np.float16, np.float32, np.float64, np.complex64, np.complex128,
    )
)


# How to_numpy reads an array back (DeviceArray._meta.readback).
_READ_BUFFER: Final = 0  # a CPU buffer of a PEP 3118 element type: pjrt.host_view
_READ_DLPACK: Final = 1  # a CPU buffer of bfloat16, float8...: a view through DLPack
_READ_JAXLIB: Final = 2  # anything else: jaxlib's readback (a copy)


class _Meta:
    """A DeviceArray's ``(dtype, shape)`` on its device and how it reads back, interned per device.

    Arrays and call plans of the same device, dtype and shape share one object (:func:`_meta_of`),
    so checking a device-resident argument on the call path is one identity test,
    ``a._meta is expected``; an array whose meta is another object of an equal triple (after the
    device's table was cleared) takes the checked path, which compares the fields.
    """

    __slots__ = ("dtype", "shape", "readback")

    def __init__(self, platform: str, dtype: np.dtype[Any], shape: tuple[int, ...]) -> None:
        self.dtype = dtype
        self.shape = shape
        if platform != "cpu":
            self.readback = _READ_JAXLIB
        else:
            self.readback = _READ_BUFFER if dtype in _BUFFER_DTYPES else _READ_DLPACK


#: The most metas a device keeps (its table is cleared past it: a program of ever new shapes).
_METAS_MAX: Final = 1 << 16


def _meta_of(device: Device, dtype: np.dtype[Any], shape: tuple[int, ...]) -> _Meta:
    """The interned :class:`_Meta` of ``(dtype, shape)`` on ``device`` (kept by the device, so it
    lives as long as the device and holds nothing alive itself)."""
    table = device._metas
    key = (dtype, shape)
    m: _Meta | None = table.get(key)
    if m is None:
        if len(table) >= _METAS_MAX:
            table.clear()
        m = table[key] = _Meta(device.platform, dtype, shape)
    return m


def _aval(shape: tuple[int, ...], dtype: np.dtype[Any]) -> pjrt.Aval:
    """A cached :class:`pjrt.Aval` for ``(shape, dtype)``."""
    key = (shape, dtype)
    a = _avals.get(key)
    if a is None:
        if len(_avals) >= 4096:
            _avals.clear()
        a = _avals[key] = pjrt.Aval(shape, dtype)
    return a


class DeviceArray:
    """An array in the memory of one device.

    Attributes
    ----------
    shape : tuple of int
    dtype : numpy.dtype
        numpy or ml_dtypes dtype (``float32``, ``bfloat16``, ``int4``...).
    device : Device

    Values are computed asynchronously: a DeviceArray returned by an executable may still be
    in flight; reading it (:meth:`to_numpy`) or :meth:`block_until_ready` waits.

    Using a deleted array raises :class:`~xlasdk.XlaRuntimeError`.
    """

    __slots__ = ("_arr", "_shape", "_dtype", "_device", "_meta", "_exported", "_host", "__weakref__")

    _arr: Any
    _meta: _Meta  # its (dtype, shape) record, interned on its device: the call path's identity check
    _host: np.ndarray[Any, Any] | None  # the cached read-only host value (to_numpy)
    _shape: tuple[int, ...]
    _dtype: np.dtype[Any]
    _device: Device
    _exported: bool

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("DeviceArray objects are made by xs.device_put(value, device) or executables")

    @classmethod
    def _wrap(cls, arr: Any, shape: tuple[int, ...], dtype: np.dtype[Any], device: Device) -> DeviceArray:
        a = object.__new__(cls)
        a._arr = arr
        a._shape = shape
        a._dtype = dtype
        a._device = device
        a._meta = _meta_of(device, dtype, shape)
        a._exported = False
        a._host = None
        _live_append(_ref(a))
        if len(_live) >= _live_prune_at[0]:
            _prune_live()
        return a

    # -- metadata ------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """Dimension sizes."""
        return self._shape

    @property
    def dtype(self) -> np.dtype[Any]:
        """Element type as a numpy / ml_dtypes dtype."""
        return self._dtype

    @property
    def device(self) -> Device:
        """The device holding the buffer."""
        return self._device

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        n = 1
        for d in self._shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        """Logical size in bytes, ``size * dtype.itemsize`` (as numpy counts it; 4-bit types
        count one byte per element). See :meth:`on_device_size_in_bytes` for the device's figure."""
        return self.size * self._dtype.itemsize

    def xla_shape(self) -> Shape:
        """The XLA :class:`~xlasdk.Shape` (``f32[2,3]``)."""
        return Shape.array_shape(self._dtype, self._shape)

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d DeviceArray")
        return self._shape[0]

    # -- lifetime ------------------------------------------------------------------------------
    def _live(self, what: str = "") -> Any:
        """The jaxlib array; XlaRuntimeError (naming ``what``) once deleted."""
        arr = self._arr
        if arr is None:
            raise self._deleted_error(what)
        return arr

    def _deleted_error(self, what: str = "") -> XlaRuntimeError:
        prefix = f"{what}: " if what else ""
        return XlaRuntimeError(
            f"{prefix}{self._describe()} has been deleted (or donated): INVALID_ARGUMENT: {DELETED_MESSAGE}"
        )

    def _describe(self) -> str:
        return f"DeviceArray {self.xla_shape()} on {self._device}"

    def is_deleted(self) -> bool:
        """Whether :meth:`delete` was called (the buffer is gone)."""
        arr = self._arr
        return arr is None or pjrt.array_is_deleted(arr)

    def delete(self) -> None:
        """Free the device buffer now instead of when the array is garbage collected.

        Deleting twice is allowed. If the buffer was exported with DLPack (``__dlpack__``, or
        :meth:`to_numpy` of a bfloat16 or float8 array, whose view is a DLPack export), the memory
        is released when the last consumer lets go of it. Maps to PJRT ``Buffer::Delete``.
        """
        with pjrt.HOLD_LOCK:  # the exported mark is set (to_numpy) and read under the same lock
            arr = self._arr
            if arr is None:
                return
            self._arr = None
            self._host = None  # views already handed out keep their memory alive
            if not self._exported:  # deleting under a live DLPack consumer aborts the process in XLA
                pjrt.array_delete(arr)

    def _share(self) -> DeviceArray:
        """A second DeviceArray over the same buffer (jaxlib ``ArrayImpl.clone``). Neither deletes
        the buffer any more: the memory is freed when both are gone."""
        other = DeviceArray._wrap(pjrt.array_share(self._live()), self._shape, self._dtype, self._device)
        self._exported = other._exported = True
        return other

    def _drop(self) -> None:
        """Forget the buffer without deleting it (it is freed when jaxlib lets go of it)."""
        self._arr = None
        self._host = None

    def block_until_ready(self) -> DeviceArray:
        """Wait until the value is computed; return ``self``.

        Raises
        ------
        XlaRuntimeError
            If the array was deleted or the computation producing it failed.
        """
        arr = self._arr  # (self._live, inline: this is on the dispatch path)
        if arr is None:
            raise self._deleted_error("block_until_ready")
        _array_block(arr)
        return self

    def is_ready(self) -> bool:
        """Whether the value is computed (True) or still in flight (False); never waits.

        Raises
        ------
        XlaRuntimeError
            If the array was deleted (jaxlib's ``ArrayImpl.is_ready`` would crash the process
            there), or the computation producing it failed.

        Maps to PJRT ``Buffer::GetReadyFuture().IsReady()``.
        """
        return pjrt.array_is_ready(self._live())

    def clone(self) -> DeviceArray:
        """A new DeviceArray on the same device holding a copy of the value (its own buffer:
        deleting either leaves the other intact).

        Raises
        ------
        XlaRuntimeError
            If the array was deleted.
        """
        self._live()
        return _put_numpy(np.array(self.to_numpy()), self._device)

    def on_device_size_in_bytes(self) -> int:
        """Bytes the buffer occupies on the device (``PjRtBuffer::GetOnDeviceSizeInBytes``)."""
        return pjrt.array_on_device_size(self._live())

    def unsafe_buffer_pointer(self) -> int:
        """Device address of the buffer as an int (valid while the array is alive and not
        deleted). On CPU it is a host address: equal to ``x.ctypes.data`` for an array put with
        ``ZERO_COPY`` that was aliased, and to ``np.asarray(a).ctypes.data``.

        Raises
        ------
        XlaRuntimeError
            If the array was deleted.

        Maps to PJRT ``Buffer::UnsafeBufferPointer``.
        """
        return pjrt.array_pointer(self._live())

    # -- host access ---------------------------------------------------------------------------
    def to_numpy(self) -> np.ndarray[Any, Any]:
        """The value as a numpy array, waiting for it if needed.

        The result is **read-only** (``flags.writeable`` is False): it is a cached host copy
        (on CPU, a zero-copy view: through the buffer protocol, or, for bfloat16 and float8,
        through DLPack, after which :meth:`delete` leaves the memory to the view) shared by every
        call. Use ``np.array(x)`` or ``x.to_numpy().copy()`` for a writable copy. It stays valid
        after :meth:`delete`.

        Raises
        ------
        XlaRuntimeError
            If the array was deleted or the computation producing it failed.
        """
        arr = self._arr  # (self._live, inline: this is on the dispatch path)
        if arr is None:
            raise self._deleted_error("to_numpy")
        v = self._host
        if v is None:
            readback = self._meta.readback
            if readback == _READ_BUFFER:
                v = pjrt.host_view(arr)  # the fast path: ~1 us, no hidden `import jax`
            elif readback == _READ_DLPACK:  # bfloat16, float8...: without jaxlib's `import jax`
                v = self._dlpack_view()
            if v is None:
                v = pjrt.array_to_numpy(arr)
            self._host = v
        return v

    def _dlpack_view(self) -> np.ndarray[Any, Any] | None:
        """:func:`pjrt.dlpack_host_view` of the buffer, which it keeps alive: from then on the
        array is exported (``delete`` lets it go instead of freeing it under the view)."""
        arr = self._arr
        try:
            if arr is None:
                return None
            pjrt.array_block(arr)  # not under the lock: a long computation must not hold up deletes
        except XlaRuntimeError:
            return None  # the readback reports it
        with pjrt.HOLD_LOCK:
            arr = self._arr
            if arr is None:
                return None  # deleted meanwhile: the readback says so
            was, self._exported = self._exported, True
            v = pjrt.dlpack_host_view(arr, self._shape, self._dtype)
            if v is None:
                self._exported = was
            return v

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray[Any, Any]:
        """numpy conversion: ``np.asarray(x)`` is read-only (see :meth:`to_numpy`); ``np.array(x)``
        (``copy=True``) is a writable copy; ``copy=False`` raises ValueError if a cast is needed."""
        v = self.to_numpy()
        if dtype is not None and np.dtype(dtype) != v.dtype:
            if copy is False:
                raise ValueError(f"cannot convert {self._describe()} to {np.dtype(dtype)} without a copy")
            return v.astype(dtype)
        return v.copy() if copy else v

    def item(self) -> Any:
        """The single element as a Python scalar."""
        return self.to_numpy().item()

    def __float__(self) -> float:
        return float(self.to_numpy())

    def __int__(self) -> int:
        return int(self.to_numpy())

    def __complex__(self) -> complex:
        return complex(self.to_numpy())

    def __bool__(self) -> bool:
        return bool(self.to_numpy())

    def __index__(self) -> int:
        return self.to_numpy().__index__()

    # -- DLPack --------------------------------------------------------------------------------
    def to_jax(self) -> Any:
        """This array as a ``jax.Array`` over the same device buffer (no copy). JAX and xlasdk must
        share the device's client: JAX came first, or ``xs.share_with_jax()`` before JAX's first use.

        Raises
        ------
        XlaSdkError
            When JAX uses another client for this platform, or JAX is not installed.
        """
        arr = self._live("to_jax")
        client = self._device._client
        if jax_bridge.jax_backend(client.platform) is not client._c:
            raise XlaSdkError(
                f"to_jax: {self._device} belongs to a client JAX does not use; call xs.share_with_jax() before "
                "JAX's first use (or use JAX first: xlasdk then adopts its client), or copy through the host "
                "(jax.numpy.asarray(array.to_numpy()))"
            )
        return jax_bridge.as_jax_array(arr, self._shape, self._dtype, self._device._d)

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(device_type, device_id)`` for DLPack: ``(1, 0)`` on CPU, ``(2, id)`` on CUDA."""
        t = pjrt.dlpack_device_type(self._device.platform)
        if t is None:
            raise BufferError(f"platform {self._device.platform!r} has no DLPack device type")
        return (t, 0 if t == 1 else self._device.local_hardware_id)

    def __dlpack__(
        self,
        *,
        stream: int | Any | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """Export as a DLPack capsule (``np.from_dlpack(x)``, ``torch.from_dlpack(x)``).

        The capsule aliases the device buffer (no copy) unless ``copy=True``. A legacy
        (unversioned) capsule is returned whatever ``max_version`` asks, as the standard allows.

        Raises
        ------
        BufferError
            If ``dl_device`` asks for another device, or the array was deleted.
        """
        if self._arr is None:
            raise BufferError(f"{self._describe()} has been deleted")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"cannot export {self._describe()} to DLPack device {tuple(dl_device)}")
        if copy:
            fresh = _put_numpy(np.array(self.to_numpy()), self._device)
            fresh._exported = True
            return pjrt.dlpack_export(fresh._arr, None if stream is None else int(stream))
        self._exported = True
        return pjrt.dlpack_export(self._arr, None if stream is None else int(stream))

    # -- printing ------------------------------------------------------------------------------
    def __repr__(self) -> str:
        if self._arr is None:
            return f"DeviceArray(<deleted>, shape={self._shape}, dtype={self._dtype}, device={self._device})"
        try:
            v = self.to_numpy()
        except XlaRuntimeError as e:
            return f"DeviceArray(<error: {e}>, dtype={self._dtype}, device={self._device})"
        body = np.array2string(v, separator=", ", prefix="DeviceArray(")
        return f"DeviceArray({body}, dtype={self._dtype}, device={self._device})"

    def __str__(self) -> str:
        if self._arr is None:
            return "<deleted>"
        return str(self.to_numpy())


# -- device_put -----------------------------------------------------------------------------
def _python_scalar(value: bool | int | float | complex, what: str) -> np.ndarray[Any, Any]:
    """A Python scalar as a 0-d array of its default XLA type (pred, s32, f32, c64)."""
    if isinstance(value, bool):
        return np.asarray(value, np.bool_)
    if isinstance(value, int):
        if not _INT32_MIN <= value <= _INT32_MAX:
            raise DTypeError(
                f"{what}: the Python int {value} does not fit s32 (Python ints become s32); "
                "pass np.int64(...) or np.uint32(...) to choose a wider type"
            )
        return np.asarray(value, np.int32)
    if isinstance(value, float):
        return np.asarray(value, np.float32)
    return np.asarray(value, np.complex64)


def _from_list(value: list[Any] | tuple[Any, ...], what: str) -> np.ndarray[Any, Any]:
    try:
        arr = np.asarray(value)
    except ValueError as e:
        raise DTypeError(f"{what}: cannot make an array of {type(value).__name__} value: {e}") from None
    if arr.dtype == np.int64:
        if arr.size and (arr.min() < _INT32_MIN or arr.max() > _INT32_MAX):
            raise DTypeError(f"{what}: list values do not fit s32 (Python ints become s32); pass an array")
        return arr.astype(np.int32)
    if arr.dtype == np.float64:
        return arr.astype(np.float32)
    if arr.dtype == np.complex128:
        return arr.astype(np.complex64)
    return arr


_canonical: dict[np.dtype[Any], np.dtype[Any]] = {}


def _native(arr: np.ndarray[Any, Any], what: str) -> np.ndarray[Any, Any]:
    """``arr`` with an XLA dtype in native byte order (DTypeError for object/str arrays)."""
    dt = arr.dtype
    canon = _canonical.get(dt)
    if canon is dt:
        return arr
    if not dt.isnative:
        arr = arr.astype(dt.newbyteorder("="))
        dt = arr.dtype
    try:
        canon = canonical_dtype(dt)
    except DTypeError:
        raise DTypeError(f"{what}: dtype {dt} is not an XLA element type") from None
    if canon is dt:
        _canonical[dt] = canon
    else:
        arr = arr.view(canon) if canon == dt else arr.astype(canon)
    return arr


def _put_numpy(arr: np.ndarray[Any, Any], device: Device) -> DeviceArray:
    """Copy a numpy array with a canonical, native dtype to ``device``."""
    shape = arr.shape
    dtype = arr.dtype
    aval = _aval(shape, dtype)
    buf = pjrt.put(arr, aval, device._sharding, device._d)
    return DeviceArray._wrap(buf, shape, dtype, device)


def _to_host(value: Any, what: str) -> np.ndarray[Any, Any]:
    """Any accepted non-DeviceArray value as a host numpy array of an XLA dtype."""
    if isinstance(value, np.ndarray):
        return _native(value, what)
    if isinstance(value, np.generic):
        return _native(np.asarray(value), what)
    if isinstance(value, (bool, int, float, complex)):
        return _python_scalar(value, what)
    if isinstance(value, (list, tuple)):
        return _native(_from_list(value, what), what)
    if hasattr(value, "__array__"):
        return _native(np.asarray(value), what)
    raise DTypeError(
        f"{what}: cannot put a {type(value).__name__} on a device; expected a numpy array, a Python "
        "or numpy scalar, a DeviceArray or an object with __dlpack__"
    )


def _dlpack_host(value: Any, what: str) -> np.ndarray[Any, Any] | None:
    """A host numpy copy of a DLPack producer whose memory the host can read, else None."""
    try:
        dev_type = int(value.__dlpack_device__()[0])
    except Exception:
        dev_type = 1
    if dev_type not in _DL_HOST_READABLE:
        return None
    try:
        return _native(np.from_dlpack(value), what)
    except (BufferError, TypeError, ValueError, RuntimeError):
        return None  # e.g. bfloat16 / fp8, which numpy's DLPack import does not know


def _import_capsule(capsule: Any, device: Device, copy: bool | None, what: str) -> DeviceArray:
    """A DeviceArray over a DLPack capsule on ``device`` (a CPU device for host memory).

    ``copy=False`` aliases or raises BufferError; ``copy=None`` aliases aligned data; ``copy=True``
    always gives a buffer of its own (jaxlib's importer aliases aligned data even when asked to
    copy, so the copy is made here).
    """
    arr = pjrt.dlpack_import_view(capsule, device._d, False if copy is False else None)
    meta = pjrt.array_shape_dtype(arr)
    if meta is None:  # no aval (cannot happen with the stand-in or real jax): read it back
        host = _native(pjrt.array_to_numpy(arr), what)
        return _put_numpy(host, device)
    a = DeviceArray._wrap(arr, meta[0], canonical_dtype(meta[1]), device)
    m2m = pjrt.array_minor_to_major(arr)
    row_major = m2m is None or m2m == tuple(range(len(meta[0]) - 1, -1, -1))
    if not row_major and copy is False:
        a._drop()
        raise pjrt.DLPackError(
            f"{what}: the tensor's strides are not row-major (layout minor_to_major={m2m}); "
            "it cannot be used without a copy"
        )
    if copy or not row_major:  # a transposed view: executables expect row-major buffers
        fresh = _put_numpy(np.ascontiguousarray(a.to_numpy()), device)
        a._drop()
        return fresh
    return a


def _dlpack_device_of(value: Any) -> int:
    try:
        return int(value.__dlpack_device__()[0])
    except Exception:
        return 1


def _capsule_of(value: Any, what: str) -> Any:
    try:
        return value.__dlpack__()
    except BufferError:
        raise
    except Exception as e:
        raise XlaRuntimeError(f"{what}: __dlpack__() failed: {e}") from e


def _put_dlpack(value: Any, device: Device, what: str, copy: bool | None = True) -> DeviceArray:
    """A DLPack producer on ``device``: a copy (``copy=True``), an alias (``False``, or raise),
    or an alias when XLA can and a copy otherwise (``None``)."""
    if isinstance(value, DeviceArray):
        return value if copy is not True and value._device == device else _put_numpy(value.to_numpy(), device)
    dev_type = _dlpack_device_of(value)
    host_ok = dev_type in _DL_HOST_READABLE
    if host_ok and copy is True and device.platform == "cpu":
        host = _dlpack_host(value, what)  # numpy reads it: one copy, by the transfer
        if host is not None:
            return _put_numpy(host, device)
    if host_ok and device.platform != "cpu":
        if copy is False:
            raise BufferError(f"{what}: a host DLPack tensor cannot be used on {device} without a copy")
        host = _dlpack_host(value, what)
        if host is not None:
            return _put_numpy(host, device)
        from .device import client as _client

        on_cpu = _import_capsule(_capsule_of(value, what), _client("cpu").default_device, None, what)
        return _put_numpy(on_cpu.to_numpy(), device)
    if not host_ok and pjrt.dlpack_device_type(device.platform) != dev_type:
        raise XlaRuntimeError(
            f"{what}: cannot import a DLPack tensor of device type {dev_type} to {device}; "
            "copy it to the host (or to a device of that platform) first"
        )
    try:
        return _import_capsule(_capsule_of(value, what), device, copy, what)
    except XlaRuntimeError as e:
        if "striding" not in str(e) or not host_ok:
            raise
        # Non-compact strides (a slice with steps): XLA cannot alias them; numpy reads them.
        if copy is False:
            raise pjrt.DLPackError(f"{what}: a strided (non-compact) tensor cannot be used without a copy") from e
        host = _dlpack_host(value, what)
        if host is None:
            raise
        return _put_numpy(np.ascontiguousarray(host), device)


def _shared_jax(value: Any, device: Device) -> DeviceArray | None:
    """A ``jax.Array`` on ``device`` itself (JAX and xlasdk share the client): the same buffer, no copy."""
    buf = jax_bridge.single_device_buffer(value, device._d)
    if buf is None:
        return None
    meta = pjrt.array_shape_dtype(buf)
    return None if meta is None else DeviceArray._wrap(buf, meta[0], meta[1], device)


def _is_capsule(value: Any) -> bool:
    return type(value).__name__ == "PyCapsule"


def from_dlpack(obj: Any, device: Device | str | None = None, *, copy: bool | None = None) -> DeviceArray:
    """A DeviceArray over a DLPack tensor (the array API's ``from_dlpack``).

    Parameters
    ----------
    obj:
        An object with ``__dlpack__`` / ``__dlpack_device__`` (numpy, torch, jax, cupy arrays,
        another DeviceArray) or a legacy DLPack capsule (``"dltensor"`` PyCapsule). Every element
        type DLPack carries: bool, int8-64, uint8-64, float16/32/64, bfloat16, complex64/128
        (and ml_dtypes float8 types from producers that export them).
    device:
        Where the array should live (default: the default device). A CPU tensor on a CPU
        device, or a device tensor on a device of its platform, is imported in place.
    copy:
        None (default): alias the tensor's memory when XLA can (on CPU: the data is
        64-byte aligned; torch allocations always are, numpy's only by chance) and copy
        otherwise. False: alias or raise BufferError. True: always a buffer of its own.

    Returns
    -------
    DeviceArray
        Of the tensor's shape and dtype. When aliased, ``unsafe_buffer_pointer()`` equals the
        producer's data pointer and the producer's memory stays alive as long as the array;
        writes to the producer show in the array.

    Raises
    ------
    BufferError
        If ``copy=False`` and the data cannot be aliased, or a capsule is used a second time
        (a capsule is consumed once).
    XlaRuntimeError
        For a tensor on a device this client cannot import from, or a failed import.
    DTypeError
        For an object with neither ``__dlpack__`` nor a capsule.

    Maps to PJRT ``Client::CreateViewOfDeviceBuffer`` (jaxlib ``dlpack_managed_tensor_to_buffer``).
    """
    dev = _resolve_device(device)
    what = "from_dlpack"
    if _is_capsule(obj):
        if dev.platform != "cpu" and copy is not False:
            from .device import client as _client

            on_cpu = _import_capsule(obj, _client("cpu").default_device, None, what)
            return _put_numpy(on_cpu.to_numpy(), dev)
        return _import_capsule(obj, dev, copy, what)
    if not hasattr(obj, "__dlpack__"):
        raise DTypeError(f"{what}: a {type(obj).__name__} has no __dlpack__ method and is not a DLPack capsule")
    if isinstance(obj, DeviceArray):
        obj._live()
        if copy is not True and obj._device == dev:
            return obj
        if copy is False:
            raise BufferError(f"{what}: {obj._describe()} cannot move to {dev} without a copy")
        return _put_numpy(obj.to_numpy(), dev)
    return _put_dlpack(obj, dev, what, copy)


def aligned_empty(
    shape: int | tuple[int, ...], dtype: Any = np.float32, alignment: int = ZERO_COPY_ALIGNMENT
) -> np.ndarray[Any, Any]:
    """An uninitialized, writable, C-contiguous numpy array whose data starts at a multiple of
    ``alignment`` bytes, so that ``device_put(x, semantics=ZERO_COPY)`` and DLPack import use it
    in place on CPU.

    Parameters
    ----------
    shape:
        Dimension sizes, e.g. ``(1024, 1024)``.
    dtype:
        Any XLA element type that numpy knows (incl. ml_dtypes ``bfloat16``, ``float8_*``).
    alignment:
        A power of two (default 64, :data:`ZERO_COPY_ALIGNMENT`).

    Returns
    -------
    numpy.ndarray
        ``x.ctypes.data % alignment == 0`` (when ``x.size > 0``). It is a view of a slightly larger byte buffer
        (``x.base``), which it keeps alive.

    Raises
    ------
    ValueError
        If ``alignment`` is not a positive power of two or a dimension is negative.
    """
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"aligned_empty: alignment must be a positive power of two, got {alignment!r}")
    dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    dims = tuple(int(d) for d in dims)
    if any(d < 0 for d in dims):
        raise ValueError(f"aligned_empty: negative dimension in {dims}")
    dt = np.dtype(dtype)
    nbytes = dt.itemsize
    for d in dims:
        nbytes *= d
    raw = np.empty(nbytes + alignment, np.uint8)
    start = (-raw.ctypes.data) % alignment
    out: np.ndarray[Any, Any] = raw[start : start + nbytes].view(dt).reshape(dims)
    return out


def _prune_live() -> None:
    _live[:] = [r for r in _live if (a := r()) is not None and a._arr is not None]
    _live_prune_at[0] = max(1024, 2 * len(_live))


def _semantics(value: Any) -> HostBufferSemantics:
    if isinstance(value, HostBufferSemantics):
        return value
    name = getattr(value, "name", value)  # jaxlib's / the compatibility enum
    try:
        return HostBufferSemantics[str(name)]
    except KeyError:
        raise ValueError(
            f"device_put: unknown host buffer semantics {value!r}; expected one of "
            f"{', '.join(m.name for m in HostBufferSemantics)}"
        ) from None


def device_put(
    value: Any,
    device: Device | str | None = None,
    *,
    semantics: HostBufferSemantics = HostBufferSemantics.IMMUTABLE_ONLY_DURING_CALL,
    force_copy: bool = False,
) -> DeviceArray:
    """Put ``value`` on ``device`` and return it as a :class:`DeviceArray`.

    Parameters
    ----------
    value:
        * a numpy array of any XLA element type (incl. ml_dtypes ``bfloat16``, ``float8_*``,
          ``int4``); non-contiguous and non-native byte order arrays are fine (copied);
        * a numpy scalar (keeps its dtype) or a Python scalar: ``bool`` -> pred, ``int`` -> s32
          (must fit), ``float`` -> f32, ``complex`` -> c64 (as :func:`~xlasdk.shape_from_pyval`);
        * a (nested) list, converted like Python scalars (float -> f32, int -> s32);
        * a :class:`DeviceArray`: returned as is on the same device (unless ``force_copy``),
          else copied;
        * anything with ``__dlpack__`` (torch, cupy, jax arrays...), or with ``__array__``.
    device:
        A :class:`Device`, a ``"cpu:0"``-style string, or None for the default device.
    semantics:
        :class:`HostBufferSemantics` of the transfer (PJRT ``HostBufferSemantics``). The default
        copies during the call. ``ZERO_COPY`` aliases a C-contiguous, 64-byte-aligned numpy
        array (see :func:`aligned_empty`) or DLPack tensor on CPU instead of copying, and copies
        anything else.
    force_copy:
        Copy even under ``ZERO_COPY`` or for a DeviceArray already on ``device``.

    Returns
    -------
    DeviceArray
        A new buffer, aliasing the host data only under ``ZERO_COPY`` (then
        ``a.unsafe_buffer_pointer() == value.ctypes.data``; the numpy array is kept alive and
        must not be changed while a computation reads it).

    Raises
    ------
    DTypeError
        For values of no XLA element type (strings, objects) or a Python int outside s32.
    UnknownDeviceError
        For an unknown device.
    ValueError
        For an unknown ``semantics``.
    XlaRuntimeError
        If the transfer fails or ``value`` is a deleted DeviceArray.

    Maps to ``xla_client.batched_device_put`` (``PjRtClient::BufferFromHostBuffer``) and, for
    DLPack producers, ``dlpack_managed_tensor_to_buffer``.
    """
    dev = _resolve_device(device)
    what = "device_put"
    sem = semantics if semantics.__class__ is HostBufferSemantics else _semantics(semantics)
    if sem is HostBufferSemantics.IMMUTABLE_ONLY_DURING_CALL:
        if isinstance(value, np.ndarray):
            return _put_numpy(_native(value, what), dev)
        if isinstance(value, DeviceArray):
            value._live()
            if value._device == dev and not force_copy:
                return value
            return _put_numpy(value.to_numpy(), dev)
        if not isinstance(value, np.generic) and hasattr(value, "__dlpack__"):
            if not force_copy and (shared := _shared_jax(value, dev)) is not None:
                return shared
            return _put_dlpack(value, dev, what, True)
        return _put_numpy(_to_host(value, what), dev)
    zero_copy = sem is HostBufferSemantics.ZERO_COPY and not force_copy
    if isinstance(value, DeviceArray):
        value._live()
        if value._device == dev and not force_copy:
            return value
        return _put_numpy(value.to_numpy(), dev)
    if not isinstance(value, (np.ndarray, np.generic)) and hasattr(value, "__dlpack__"):
        if not force_copy and (shared := _shared_jax(value, dev)) is not None:
            return shared
        return _put_dlpack(value, dev, what, None if zero_copy else True)
    host = _native(value, what) if isinstance(value, np.ndarray) else _to_host(value, what)
    buf = pjrt.put_with_semantics(host, _aval(host.shape, host.dtype), dev._sharding, dev._d, sem.name, not zero_copy)
    return DeviceArray._wrap(buf, host.shape, host.dtype, dev)
