"""``DeviceArray`` (an array in device memory), ``device_put``, ``from_dlpack`` and host buffers.

:class:`DeviceArray` itself is defined in :mod:`xlasdk.runtime._device_array` and re-exported here.

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
from typing import Any, Final

import numpy as np

from .._jaxlib import jax_bridge, pjrt
from ..errors import DTypeError, XlaRuntimeError
from ..types import canonical_dtype

# DeviceArray lives in _device_array; its public names and what the call paths and tests read are
# re-exported here, where they always were.
from ._device_array import _DL_HOST_READABLE, _aval, _put_numpy
from ._device_array import _READ_BUFFER as _READ_BUFFER
from ._device_array import _READ_DLPACK as _READ_DLPACK
from ._device_array import _READ_JAXLIB as _READ_JAXLIB
from ._device_array import DELETED_MESSAGE as DELETED_MESSAGE
from ._device_array import DeviceArray as DeviceArray
from ._device_array import _live_prune_at as _live_prune_at
from ._device_array import _meta_of as _meta_of
from ._device_array import _prune_live as _prune_live
from .device import Device, _resolve_device

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


_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1


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


def _dlpack_device_of(value: Any) -> int | None:
    """The DLPack device type of ``value``'s memory: 1 (the host) for a producer with no
    ``__dlpack_device__``; None where it has one that fails (a ``jax.Array`` on a TPU: XLA:TPU
    exports no DLPack, jaxlib raises "... cannot be used as a DLPack device")."""
    method = getattr(value, "__dlpack_device__", None)
    if method is None:
        return 1
    try:
        return int(method()[0])
    except Exception:
        return None


def _through_host(value: Any, device: Device, what: str, copy: bool | None, why: str) -> DeviceArray:
    """``value`` copied through the host (its ``__array__``) to ``device``, where DLPack cannot
    carry it (``why``); ``copy=False`` or a producer the host cannot read: an error that says what
    to do instead."""
    advice = ("for no copy between JAX and xlasdk, call xs.share_with_jax() before JAX's first use "
              "(then JAX and xlasdk use one client and its arrays pass as they are)")
    if copy is False:
        raise BufferError(f"{what}: {why}; it cannot be used without a copy: {advice}")
    if not hasattr(value, "__array__"):
        raise XlaRuntimeError(f"{what}: {why}, and the {type(value).__name__} cannot be read by the host "
                              f"(no __array__): copy it to the host first; {advice}")
    try:
        host = np.asarray(value)
    except Exception as e:
        raise XlaRuntimeError(f"{what}: {why}, and copying it to the host failed: {e}") from e
    return _put_numpy(_native(host, what), device)


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
    if dev_type is None:
        return _through_host(value, device, what, copy,
                             f"a {type(value).__name__} whose memory DLPack cannot describe "
                             "(its __dlpack_device__ failed)")
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
