"""``DeviceArray``: an array in the memory of one device, and what its call paths share.

Split from :mod:`xlasdk.runtime.array` (host data onto devices: ``device_put``, ``from_dlpack``,
``aligned_empty``), which re-exports :class:`DeviceArray` and :data:`DELETED_MESSAGE`: import them
from there or from :mod:`xlasdk`.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from .._jaxlib import jax_bridge, pjrt
from ..errors import XlaRuntimeError, XlaSdkError
from ..shape import Shape
from .device import Device, _live

__all__ = ["DeviceArray", "DELETED_MESSAGE"]

#: The wording jaxlib and the former ``xla_client`` used for a deleted buffer, kept inside
#: xlasdk's message so code matching it keeps working.
DELETED_MESSAGE: Final = "BlockHostUntilReady() called on deleted or donated buffer"


# Every DeviceArray made in this process is appended to runtime.device's weak list of them
# (Device.live_buffers reads it); it is pruned here once it grows past _live_prune_at[0] (a list:
# the executables' generated call paths read it too).
_live_prune_at: Final = [1024]
_ref: Final = weakref.ref
_live_append: Final = _live.append

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


#: A new DeviceArray's slots and what each starts as, written once: ``DeviceArray.__slots__``,
#: ``DeviceArray._wrap`` and the executables' generated call path (``runtime._dispatch``, through
#: :func:`init_slots`) are all made from it, so a slot added here is set on every path that makes
#: an array. Each value is a Python expression over the new array's inputs, :data:`_SLOT_INPUTS`.
_SLOTS: Final = (
    ("_arr", "arr"), ("_shape", "shape"), ("_dtype", "dtype"), ("_device", "device"), ("_meta", "meta"),
    ("_exported", "False"), ("_host", "None"),
)
#: The inputs of a new array: the jaxlib array, its dims, dtype, Device and interned _Meta.
_SLOT_INPUTS: Final = frozenset({"arr", "shape", "dtype", "device", "meta"})


def init_slots(target: str, **inputs: str) -> list[str]:
    """Python statements that set every slot of the new DeviceArray named ``target``, from
    :data:`_SLOTS`; ``inputs`` give the expressions of the inputs that the generating code holds
    under other names (``arr="outs[0]"``)."""
    unknown = set(inputs) - _SLOT_INPUTS
    if unknown:
        raise ValueError(f"init_slots: {sorted(unknown)} are not inputs of a DeviceArray ({sorted(_SLOT_INPUTS)})")
    return [f"{target}.{slot} = {inputs.get(value, value)}" for slot, value in _SLOTS]


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

    __slots__ = (*(slot for slot, _ in _SLOTS), "__weakref__")

    _arr: Any
    _meta: _Meta  # its (dtype, shape) record, interned on its device: the call path's identity check
    _host: np.ndarray[Any, Any] | None  # the cached read-only host value (to_numpy)
    _shape: tuple[int, ...]
    _dtype: np.dtype[Any]
    _device: Device
    _exported: bool

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("DeviceArray objects are made by xs.device_put(value, device) or executables")

    if TYPE_CHECKING:  # generated from _SLOTS below the class

        @classmethod
        def _wrap(cls, arr: Any, shape: tuple[int, ...], dtype: np.dtype[Any], device: Device) -> DeviceArray:
            """A new DeviceArray over the jaxlib array ``arr`` of ``shape`` and ``dtype`` on ``device``."""
            ...

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
        try:
            shared = jax_bridge.jax_uses(client.platform, client._c)  # after xs.share_with_jax(), JAX starts here
        except XlaSdkError as e:
            raise XlaSdkError(f"to_jax: {e}") from None
        if not shared:
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


def _put_numpy(arr: np.ndarray[Any, Any], device: Device) -> DeviceArray:
    """Copy a numpy array with a canonical, native dtype to ``device``."""
    shape = arr.shape
    dtype = arr.dtype
    aval = _aval(shape, dtype)
    buf = pjrt.put(arr, aval, device._sharding, device._d)
    return DeviceArray._wrap(buf, shape, dtype, device)


def _prune_live() -> None:
    _live[:] = [r for r in _live if (a := r()) is not None and a._arr is not None]
    _live_prune_at[0] = max(1024, 2 * len(_live))


def _generate_wrap() -> Any:
    """``DeviceArray._wrap``, generated from :data:`_SLOTS` (as fast as if written out)."""
    lines = [
        "def _wrap(cls, arr, shape, dtype, device):",
        "    a = object.__new__(cls)",
        "    meta = _meta_of(device, dtype, shape)",
        *(f"    {line}" for line in init_slots("a")),
        "    _live_append(_ref(a))",
        "    if len(_live) >= _live_prune_at[0]:",
        "        _prune_live()",
        "    return a",
    ]
    namespace: dict[str, Any] = {}
    exec("\n".join(lines), globals(), namespace)  # generated from _SLOTS (no user text)
    wrap = namespace["_wrap"]
    wrap.__qualname__ = "DeviceArray._wrap"
    wrap.__doc__ = "A new DeviceArray over the jaxlib array ``arr`` of ``shape`` and ``dtype`` on ``device``."
    return classmethod(wrap)


DeviceArray._wrap = _generate_wrap()  # type: ignore[method-assign]
