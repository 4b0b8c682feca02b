"""PJRT on top of jaxlib: clients, plugins, compilation, transfers, execution, serialization.

This is the only module of the runtime that touches ``jaxlib.xla_client`` and ``jaxlib._jax``.
Every function takes and returns plain Python / numpy values or opaque jaxlib objects typed
``Any``; every jaxlib exception is re-raised as an xlasdk error (:class:`CompileError` for
compilation, :class:`XlaRuntimeError` for execution and transfers, :class:`FormatError` for
serialized executables) with a one-line message naming what failed.

Fast path
---------
jaxlib retries a failing ``import jax`` (about 70 us each time) whenever an array is created
without an abstract value (DLPack import, ``disassemble_into_single_device_arrays``, the first
readback of a fresh array); the paths below avoid it.

* Host -> device uses ``batched_device_put`` with a real :class:`Aval` (no hidden ``import jax``)
  and ``HostBufferSemantics.IMMUTABLE_ONLY_DURING_CALL`` (the numpy data is copied during the
  call, so the caller may mutate it afterwards).
* Execution uses ``execute_sharded`` + ``consume_with_handlers`` with prebuilt
  ``array_result_handler(aval, sharding, True, _skip_checks=True)`` objects.
* Readback of CPU arrays of the standard numpy element types goes through the Python buffer
  protocol (:func:`host_view`: a zero-copy, read-only view, as ``np.asarray(jax_array)`` does);
  other arrays use ``_single_device_array_to_np_array_did_copy``.
* Without the ``jax`` package, jaxlib still tries ``import jax.core`` /
  ``jax._src.sharding_impls`` while reading an array back, disassembling multi-device results
  and importing DLPack tensors; each failed import costs about 70 us. When
  ``importlib.util.find_spec("jax") is None`` those calls run with three tiny stand-in modules
  placed in ``sys.modules`` *for the duration of the call only* (:func:`_shimmed`), so other
  libraries never see a fake ``jax`` between our calls. Correctness never depends on the
  stand-ins: with them removed, jaxlib takes its (slower) import-failure path.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

import jaxlib
import numpy as np
from jaxlib import xla_client as _xc

from ..errors import CompileError, FormatError, XlaRuntimeError
from . import lapack

__all__ = [
    "JAXLIB_VERSION",
    "XLA_CLIENT_VERSION",
    "JaxRuntimeError",
    "Aval",
    "make_cpu_client",
    "load_plugin",
    "plugin_loaded",
    "make_plugin_client",
    "gpu_plugin_options",
    "client_info",
    "client_devices",
    "device_info",
    "device_memory_stats",
    "dlpack_device_type",
    "make_compile_options",
    "compile_and_load",
    "single_device_sharding",
    "result_handler",
    "put",
    "execute",
    "execute_multi",
    "execute_with_token",
    "execute_multi_with_token",
    "token_wait",
    "token_of_device",
    "array_to_numpy",
    "host_view",
    "array_block",
    "array_delete",
    "array_is_deleted",
    "array_on_device_size",
    "array_pointer",
    "array_shape_dtype",
    "dlpack_export",
    "dlpack_import",
    "executable_devices",
    "executable_num_outputs",
    "executable_hlo_text",
    "executable_hlo_modules",
    "executable_cost_analysis",
    "executable_memory_stats",
    "executable_fingerprint",
    "serialize_executable",
    "deserialize_executable",
    # SPMD
    "executable_shardings",
    "gspmd_sharding",
    "put_sharded",
    "assemble_global",
    "global_shards",
    "execute_spmd",
    # interop
    "ZERO_COPY_ALIGNMENT",
    "put_with_semantics",
    "array_is_ready",
    "dlpack_import_view",
    "array_share",
    "DLPackError",
    "array_minor_to_major",
]

_J: Final[Any] = importlib.import_module("jaxlib._jax")  # untyped extension module

JAXLIB_VERSION: Final[str] = str(getattr(jaxlib, "__version__", "unknown"))
XLA_CLIENT_VERSION: Final[int] = int(getattr(_xc, "_version", 0))
JaxRuntimeError: Final[type[Exception]] = _J.JaxRuntimeError

_T = TypeVar("_T")

_IMMUTABLE_DURING_CALL: Final = _xc.HostBufferSemantics.IMMUTABLE_ONLY_DURING_CALL
_batched_device_put: Final = _xc.batched_device_put
_array_result_handler: Final = _xc.array_result_handler

# jaxlib's batched_device_put asks the sharding for an HloSharding; jax adds this method to
# SingleDeviceSharding in Python. Add the same (replicated) answer when jax has not.
# It is called on every transfer, so the answer is built once.
_REPLICATED: Final = _xc.HloSharding.replicate()
if not hasattr(_xc.SingleDeviceSharding, "_to_xla_hlo_sharding"):

    def _sds_to_xla_hlo_sharding(self: Any, num_dimensions: int) -> Any:
        return _REPLICATED

    _xc.SingleDeviceSharding._to_xla_hlo_sharding = _sds_to_xla_hlo_sharding


def _one_line(e: BaseException) -> str:
    """The first non-empty line of an exception message (jaxlib appends Python stack notes)."""
    for line in str(e).splitlines():
        line = line.strip()
        if line:
            return line
    return type(e).__name__


def _runtime_error(what: str, e: BaseException) -> XlaRuntimeError:
    from .callbacks import callback_failure  # a failing ops.HostCallback: the user's exception

    failed = callback_failure(what, e)
    if failed is not None:
        return failed
    return XlaRuntimeError(f"{what}: {_one_line(e)}")


# -- avals and the import shim ---------------------------------------------------------------
class Aval:
    """The abstract value jaxlib wants beside a buffer: ``shape``, ``dtype``, ``weak_type``, ``ndim``."""

    __slots__ = ("shape", "dtype", "weak_type", "ndim")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
        self.shape = shape
        self.dtype = dtype
        self.weak_type = False
        self.ndim = len(shape)

    def __repr__(self) -> str:
        return f"Aval({self.shape}, {self.dtype})"


class _ShapedArray(Aval):
    """Stand-in for ``jax.core.ShapedArray`` (jaxlib builds one for arrays it creates itself)."""

    __slots__ = ()

    def __init__(self, shape: Sequence[int], dtype: Any, weak_type: bool = False, **_: Any) -> None:
        super().__init__(tuple(int(d) for d in shape), np.dtype(dtype))
        self.weak_type = bool(weak_type)


_sharding_cache: dict[Any, Any] = {}


def single_device_sharding(device: Any) -> Any:
    """``SingleDeviceSharding(device)``, cached per jaxlib device."""
    s = _sharding_cache.get(device)
    if s is None:
        s = _sharding_cache[device] = _xc.SingleDeviceSharding(device)
    return s


def _make_single_device_sharding(device: Any, memory_kind: Any = None) -> Any:
    if memory_kind is None or memory_kind == "device":
        return single_device_sharding(device)
    return _xc.SingleDeviceSharding(device, memory_kind=memory_kind)


def _build_shim() -> dict[str, types.ModuleType] | None:
    try:
        if importlib.util.find_spec("jax") is not None:
            return None
    except (ImportError, ValueError):  # a broken or odd "jax" entry: leave it alone
        return None
    jax = types.ModuleType("jax", "xlasdk stand-in, present only during a jaxlib call")
    jax.__path__ = []
    core = types.ModuleType("jax.core")
    core.ShapedArray = _ShapedArray  # type: ignore[attr-defined]
    src = types.ModuleType("jax._src")
    src.__path__ = []
    impls = types.ModuleType("jax._src.sharding_impls")
    impls.make_single_device_sharding = _make_single_device_sharding  # type: ignore[attr-defined]
    jax.core = core  # type: ignore[attr-defined]
    jax._src = src  # type: ignore[attr-defined]
    src.sharding_impls = impls  # type: ignore[attr-defined]
    return {"jax": jax, "jax.core": core, "jax._src": src, "jax._src.sharding_impls": impls}


_SHIM: Final = _build_shim()
_modules: Final = sys.modules


def _shimmed(fn: Callable[..., _T], *args: Any) -> _T:
    """Call ``fn(*args)`` with the stand-in ``jax`` modules present (when jax is absent)."""
    shim = _SHIM
    if shim is None or "jax" in _modules:
        return fn(*args)
    _modules.update(shim)
    try:
        return fn(*args)
    finally:
        for name, mod in shim.items():
            if _modules.get(name) is mod:
                del _modules[name]


# -- clients and plugins ---------------------------------------------------------------------
def make_cpu_client(num_devices: int | None) -> Any:
    """``xla_client.make_cpu_client(num_devices=...)`` (TFRT CPU client)."""
    try:
        return _xc.make_cpu_client(num_devices=num_devices)
    except Exception as e:
        raise _runtime_error(f"creating a CPU client with num_devices={num_devices}", e) from e


def plugin_loaded(name: str) -> bool:
    """Whether a PJRT plugin ``name`` is registered in this process."""
    try:
        return bool(_xc.pjrt_plugin_loaded(name))
    except Exception:
        return False


def load_plugin(name: str, path: str) -> None:
    """``xla_client.load_pjrt_plugin_dynamically(name, path)`` then ``initialize_pjrt_plugin``."""
    try:
        _xc.load_pjrt_plugin_dynamically(name, path)
    except Exception as e:
        raise _runtime_error(f"loading PJRT plugin {name!r} from {path}", e) from e
    try:
        if not _xc.pjrt_plugin_initialized(name):
            _xc.initialize_pjrt_plugin(name)
    except Exception as e:
        raise _runtime_error(f"initializing PJRT plugin {name!r}", e) from e


def gpu_plugin_options() -> dict[str, Any]:
    """jaxlib's GPU plugin options from ``XLA_PYTHON_CLIENT_*`` environment variables."""
    try:
        return dict(_xc.generate_pjrt_gpu_plugin_options())
    except Exception:
        return {}


def make_plugin_client(name: str, options: Mapping[str, Any] | None) -> Any:
    """``xla_client.make_c_api_client(name, options)`` for a loaded plugin."""
    try:
        return _xc.make_c_api_client(name, dict(options) if options else None)
    except Exception as e:
        raise _runtime_error(f"creating a client for PJRT plugin {name!r}", e) from e


def client_info(client: Any) -> tuple[str, str]:
    """``(platform, platform_version)`` of a client."""
    return str(client.platform), str(client.platform_version)


def client_devices(client: Any) -> list[Any]:
    """The client's addressable devices, in id order."""
    return sorted(client.local_devices(), key=lambda d: int(d.id))


def device_info(device: Any) -> tuple[int, str, str, int]:
    """``(id, platform, device_kind, local_hardware_id)`` of a jaxlib device."""
    hw = getattr(device, "local_hardware_id", None)
    hw_id = int(hw if hw is not None else device.id)
    return int(device.id), str(device.platform), str(device.device_kind), hw_id


def device_memory_stats(device: Any) -> dict[str, int] | None:
    """``Device.memory_stats()``: allocator statistics in bytes, or None (e.g. on CPU)."""
    try:
        stats = device.memory_stats()
    except Exception:
        return None
    return None if stats is None else {str(k): int(v) for k, v in stats.items()}


_DLPACK_TYPES: Final = {"cpu": 1, "cuda": 2, "gpu": 2, "rocm": 10}


def dlpack_device_type(platform: str) -> int | None:
    """DLPack ``DLDeviceType`` of a platform (kDLCPU=1, kDLCUDA=2, kDLROCM=10), None if unknown."""
    return _DLPACK_TYPES.get(platform.lower())


# -- compilation -----------------------------------------------------------------------------
def make_compile_options(
    num_replicas: int,
    num_partitions: int,
    device_assignment: np.ndarray[Any, Any] | None,
    env_option_overrides: Sequence[tuple[str, str | bool | int | float]],
) -> Any:
    """A jaxlib ``CompileOptions``; SPMD partitioning is switched on when ``num_partitions > 1``.

    Partitioned programs go through XLA's Shardy partitioner (``use_shardy_partitioner``, JAX's
    default since 0.7): it imports the GSPMD ``mhlo.sharding`` attributes xlasdk writes, and it
    also compiles the dumps of Shardy-partitioned JAX programs (whose ``xla.sdy.*`` custom calls
    the GSPMD partitioner refuses).
    """
    opts = _xc.CompileOptions()
    opts.num_replicas = num_replicas
    opts.num_partitions = num_partitions
    if device_assignment is not None:
        opts.device_assignment = _xc.DeviceAssignment.create(np.asarray(device_assignment, dtype=np.int64))
    if num_partitions > 1:
        opts.executable_build_options.use_spmd_partitioning = True
        opts.executable_build_options.use_shardy_partitioner = True
    if env_option_overrides:
        opts.env_option_overrides = list(env_option_overrides)
    return opts


def compile_and_load(client: Any, module_text: str, devices: Sequence[Any], options: Any, name: str) -> Any:
    """``client.compile_and_load(module_text, DeviceList(devices), options)``.

    Raises
    ------
    CompileError
        When XLA rejects the module or the options; the message names the computation.
    """
    if "lapack_" in module_text:  # jaxlib's LAPACK custom calls (ops.LU, jax dumps): register them
        lapack.ensure_registered()
    try:
        return client.compile_and_load(module_text, _xc.DeviceList(tuple(devices)), options)
    except Exception as e:
        msg = str(e).strip()
        if "Suspected Python Code Location" in msg:
            msg = msg.split("Suspected Python Code Location")[0].strip()
        raise CompileError(f"compiling {name!r} failed: {msg}") from e


# -- transfers and execution -----------------------------------------------------------------
def result_handler(aval: Aval, sharding: Any) -> Any:
    """``array_result_handler(aval, sharding, committed=True, _skip_checks=True)``."""
    return _array_result_handler(aval, sharding, True, _skip_checks=True)


def put(value: np.ndarray[Any, Any], aval: Aval, sharding: Any, device: Any) -> Any:
    """Copy a numpy array (native byte order) to ``device``: ``batched_device_put``.

    The data is copied during the call (``IMMUTABLE_ONLY_DURING_CALL``).

    Raises
    ------
    XlaRuntimeError
        When the transfer fails (for example, out of device memory).
    """
    try:
        return _batched_device_put(
            aval, sharding, [value], [device], True, False, _IMMUTABLE_DURING_CALL, enable_x64=True
        )
    except Exception as e:
        raise _runtime_error(f"transfer of {aval.dtype}{list(aval.shape)} to {device}", e) from e


def execute(executable: Any, buffers: list[Any], handlers: list[Any], name: str) -> list[Any]:
    """Run a single-device executable: ``execute_sharded`` + ``consume_with_handlers``.

    Returns one jaxlib array per output, typed by ``handlers``.
    """
    try:
        return executable.execute_sharded(buffers).consume_with_handlers(handlers)  # type: ignore[no-any-return]
    except Exception as e:
        raise _runtime_error(f"executing {name!r}", e) from e


def execute_multi(
    executable: Any,
    shards_per_param: Sequence[Sequence[Any]],
    avals: Sequence[Aval],
    devices: Sequence[Any],
    name: str,
) -> list[list[Any]]:
    """Run on several devices (replicas / partitions). Returns ``[output][device]`` arrays.

    Each parameter becomes one global array made of the per-device buffers (labelled
    replicated, with checks skipped, so the shards may hold different data).
    """
    return _execute_multi(executable, shards_per_param, avals, devices, name, False)[0]


def _execute_multi(
    executable: Any,
    shards_per_param: Sequence[Sequence[Any]],
    avals: Sequence[Aval],
    devices: Sequence[Any],
    name: str,
    with_tokens: bool,
) -> tuple[list[list[Any]], Any]:
    try:
        sharding = _xc.GSPMDSharding(tuple(devices), _xc.HloSharding.replicate())
        args = [
            _xc.ArrayImpl(aval, sharding, list(shards), True, True)
            for aval, shards in zip(avals, shards_per_param, strict=True)
        ]
        results = executable.execute_sharded(args, with_tokens=with_tokens)
        token = results.consume_token() if with_tokens else None
        return _shimmed(results.disassemble_into_single_device_arrays), token
    except Exception as e:
        raise _runtime_error(f"executing {name!r} on {len(devices)} devices", e) from e


# -- run-time tokens ---------------------------------------------------------------------------
# ``execute_sharded(args, with_tokens=True)`` hands back, with the outputs, a ``ShardedToken``
# (``ExecuteResults.consume_token()``): ``block_until_ready()`` waits until the run and its side
# effects (host callbacks, ...) are done on every device; ``get_token(i)`` is device ``i``'s
# ``Token`` (an index past the devices raises IndexError).
def execute_with_token(executable: Any, buffers: list[Any], handlers: list[Any], name: str) -> tuple[list[Any], Any]:
    """:func:`execute` that also returns the run's ``ShardedToken``."""
    try:
        results = executable.execute_sharded(buffers, with_tokens=True)
        token = results.consume_token()
        return results.consume_with_handlers(handlers), token
    except Exception as e:
        raise _runtime_error(f"executing {name!r}", e) from e


def execute_multi_with_token(
    executable: Any,
    shards_per_param: Sequence[Sequence[Any]],
    avals: Sequence[Aval],
    devices: Sequence[Any],
    name: str,
) -> tuple[list[list[Any]], Any]:
    """:func:`execute_multi` that also returns the run's ``ShardedToken``."""
    return _execute_multi(executable, shards_per_param, avals, devices, name, True)


def token_wait(token: Any, what: str) -> None:
    """``token.block_until_ready()`` (a ``ShardedToken`` or a ``Token``).

    Raises
    ------
    XlaRuntimeError
        When the run failed (a failing host callback gives its HostCallbackError).
    """
    try:
        token.block_until_ready()
    except Exception as e:
        raise _runtime_error(what, e) from e


def token_of_device(token: Any, index: int) -> Any:
    """Device ``index``'s ``Token`` of a ``ShardedToken`` (the caller checks the index)."""
    return token.get_token(index)


def _readback(array: Any) -> np.ndarray[Any, Any]:
    return array._single_device_array_to_np_array_did_copy()[0]  # type: ignore[no-any-return]


_memoryview: Final = memoryview
_asarray: Final = np.asarray


def host_view(array: Any) -> np.ndarray[Any, Any] | None:
    """A zero-copy, read-only numpy view of a CPU array through the buffer protocol, or None.

    Waits for the value. This is how ``np.asarray(jax_array)`` reads back, and it needs no
    ``jax`` module (about 1 us against 4-5 us for :func:`array_to_numpy` on a fresh array).
    None when the array cannot be exported this way (non-CPU memory; element types outside
    PEP 3118 such as bfloat16, float8 and int4; a failed computation): use
    :func:`array_to_numpy`, which also reports errors. The view holds an external reference on
    the device buffer, so the memory stays valid while the view lives, even after a delete.
    """
    try:
        return _asarray(_memoryview(array))
    except Exception:
        return None


def array_to_numpy(array: Any) -> np.ndarray[Any, Any]:
    """The array's host value: a read-only numpy array cached on the jaxlib array.

    Maps to ``ArrayImpl._single_device_array_to_np_array_did_copy`` (waits for the value).
    """
    try:
        return _shimmed(_readback, array)
    except Exception as e:
        raise _runtime_error("reading the array back to the host", e) from e


def array_block(array: Any) -> None:
    """``ArrayImpl.block_until_ready()``: wait until the value is computed."""
    try:
        array.block_until_ready()
    except Exception as e:
        raise _runtime_error("waiting for the array", e) from e


def array_delete(array: Any) -> None:
    """``ArrayImpl.delete()``: free the device buffer now."""
    try:
        array.delete()
    except Exception as e:
        raise _runtime_error("deleting the array", e) from e


def array_is_deleted(array: Any) -> bool:
    return bool(array.is_deleted())


def array_on_device_size(array: Any) -> int:
    """``ArrayImpl.on_device_size_in_bytes()``."""
    try:
        return int(array.on_device_size_in_bytes())
    except Exception as e:
        raise _runtime_error("on_device_size_in_bytes", e) from e


def array_pointer(array: Any) -> int:
    """``ArrayImpl.unsafe_buffer_pointer()``: the device address of the buffer."""
    try:
        return int(array.unsafe_buffer_pointer())
    except Exception as e:
        raise _runtime_error("unsafe_buffer_pointer", e) from e


def array_shape_dtype(array: Any) -> tuple[tuple[int, ...], np.dtype[Any]] | None:
    """Shape and dtype of a jaxlib array from its aval; None when jaxlib made it without one
    (arrays jaxlib creates itself get no aval once its ``import jax.core`` has failed)."""
    aval = getattr(array, "aval", None)
    if aval is None:
        return None
    return tuple(int(d) for d in aval.shape), np.dtype(aval.dtype)


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


# -- executables -----------------------------------------------------------------------------
def executable_devices(executable: Any) -> list[Any]:
    """``LoadedExecutable.local_devices()`` (in device-assignment order)."""
    return list(executable.local_devices())


def executable_num_outputs(executable: Any) -> int | None:
    """Number of outputs per device, from ``get_output_memory_kinds()``; None if unknown."""
    try:
        kinds = executable.get_output_memory_kinds()
        return len(kinds[0]) if kinds else 0
    except Exception:
        return None


def executable_hlo_text(executable: Any) -> str:
    """``LoadedExecutable.get_hlo_text()``: optimized, scheduled HLO with metadata."""
    try:
        return str(executable.get_hlo_text())
    except Exception as e:
        raise _runtime_error("get_hlo_text", e) from e


def executable_hlo_modules(executable: Any) -> list[Any]:
    """``LoadedExecutable.hlo_modules()``: jaxlib ``HloModule`` objects (optimized)."""
    try:
        return list(executable.hlo_modules())
    except Exception as e:
        raise _runtime_error("hlo_modules", e) from e


def executable_cost_analysis(executable: Any) -> dict[str, float]:
    """``LoadedExecutable.cost_analysis()``: ``flops``, ``transcendentals``, ``bytes accessed``..."""
    try:
        raw = executable.cost_analysis()
    except Exception as e:
        raise _runtime_error("cost_analysis", e) from e
    if isinstance(raw, (list, tuple)):  # older jaxlibs: one dict per HLO module
        raw = raw[0] if raw else {}
    return {str(k): float(v) for k, v in dict(raw).items()}


_MEMORY_FIELDS: Final = (
    "argument_size_in_bytes",
    "output_size_in_bytes",
    "temp_size_in_bytes",
    "alias_size_in_bytes",
    "generated_code_size_in_bytes",
    "peak_memory_in_bytes",
    "host_argument_size_in_bytes",
    "host_output_size_in_bytes",
    "host_temp_size_in_bytes",
    "host_alias_size_in_bytes",
    "host_generated_code_size_in_bytes",
)


def executable_memory_stats(executable: Any) -> dict[str, int]:
    """``LoadedExecutable.get_compiled_memory_stats()`` as a dict of byte counts."""
    try:
        stats = executable.get_compiled_memory_stats()
    except Exception as e:
        raise _runtime_error("get_compiled_memory_stats", e) from e
    return {f: int(getattr(stats, f, 0) or 0) for f in _MEMORY_FIELDS}


def executable_fingerprint(executable: Any) -> bytes | None:
    """``LoadedExecutable.fingerprint`` (a property in jaxlib 0.10); None when the backend has none."""
    try:
        fp = executable.fingerprint
        if callable(fp):  # a method in some jaxlib versions
            fp = fp()
    except Exception:
        return None
    return None if fp is None else bytes(fp)


def serialize_executable(executable: Any, name: str) -> bytes:
    """``LoadedExecutable.serialize()``: XLA's own executable blob."""
    try:
        return bytes(executable.serialize())
    except Exception as e:
        raise _runtime_error(f"serializing {name!r}", e) from e


def deserialize_executable(client: Any, blob: bytes, devices: Sequence[Any], options: Any, what: str) -> Any:
    """``client.deserialize_executable(blob, DeviceList(devices), options)``.

    ``options`` (from :func:`make_compile_options`) carries the device assignment to load onto;
    without it the executable keeps the device ids it was compiled for.

    Raises
    ------
    FormatError
        When XLA cannot parse the blob.
    """
    if b"lapack_" in blob:
        lapack.ensure_registered()
    try:
        return client.deserialize_executable(blob, _xc.DeviceList(tuple(devices)), options)
    except Exception as e:
        raise FormatError(f"{what}: XLA could not load the executable: {_one_line(e)}") from e


# -- SPMD --------------------------------------------------------------------------------------
# Sharded execution in one process: global arrays made of per-device buffers (``ArrayImpl`` with a
# ``GSPMDSharding``), ``execute_sharded`` on them, and the shardings XLA chose for a compiled
# program. xlasdk's own sharding type is :class:`xlasdk.sharding.HloSharding`; here shardings
# travel as XLA's text notation.
_gspmd_cache: dict[tuple[tuple[Any, ...], str | None], Any] = {}


def executable_shardings(executable: Any) -> tuple[list[str] | None, list[str] | None]:
    """``(parameter shardings, output shardings)`` of a compiled SPMD program, in XLA's
    notation (one per parameter / per output), or None where the program is not partitioned.

    Maps to ``LoadedExecutable.get_parameter_shardings()`` / ``get_output_shardings()``.
    """

    def texts(protos: Any) -> list[str] | None:
        if protos is None:
            return None
        return [str(_xc.HloSharding.from_proto(p)) for p in protos]

    try:
        return texts(executable.get_parameter_shardings()), texts(executable.get_output_shardings())
    except Exception as e:
        raise _runtime_error("reading the shardings of the compiled program", e) from e


def gspmd_sharding(devices: Sequence[Any], hlo_sharding: str | None) -> Any:
    """``GSPMDSharding(devices, HloSharding.from_string(text))`` (None: replicated), cached.

    Device numbers of the sharding are positions in ``devices``.
    """
    key = (tuple(devices), hlo_sharding)
    s = _gspmd_cache.get(key)
    if s is None:
        try:
            hs = _xc.HloSharding.replicate() if hlo_sharding is None else _xc.HloSharding.from_string(hlo_sharding)
            s = _xc.GSPMDSharding(key[0], hs)
        except Exception as e:
            raise _runtime_error(f"making the sharding {hlo_sharding} over {len(devices)} devices", e) from e
        if len(_gspmd_cache) >= 1024:
            _gspmd_cache.clear()
        _gspmd_cache[key] = s
    return s


def put_sharded(aval: Aval, sharding: Any, values: Sequence[np.ndarray[Any, Any]], devices: Sequence[Any]) -> Any:
    """One global array from host pieces, ``values[k]`` copied to ``devices[k]``, in one
    ``batched_device_put`` (the data is copied during the call).

    Raises
    ------
    XlaRuntimeError
        When a transfer fails.
    """
    try:
        return _batched_device_put(
            aval, sharding, list(values), list(devices), True, False, _IMMUTABLE_DURING_CALL, enable_x64=True
        )
    except Exception as e:
        raise _runtime_error(f"transfer of {aval.dtype}{list(aval.shape)} to {len(devices)} devices", e) from e


def assemble_global(aval: Aval, sharding: Any, buffers: Sequence[Any]) -> Any:
    """``ArrayImpl(aval, sharding, buffers, committed=True, _skip_checks=True)``: one global array
    over existing single-device buffers (``buffers[k]`` on the sharding's ``k``-th device).

    Raises
    ------
    XlaRuntimeError
        When a buffer is not on the device the sharding puts it on, or is deleted.
    """
    try:
        return _xc.ArrayImpl(aval, sharding, list(buffers), True, True)
    except Exception as e:
        raise _runtime_error(f"assembling a global {aval.dtype}{list(aval.shape)} from {len(buffers)} shards", e) from e


def _arrays_of(array: Any) -> list[Any]:
    return list(array._arrays)


def global_shards(array: Any) -> list[Any]:
    """The per-device buffers of a global array, in its sharding's device order."""
    try:
        return _shimmed(_arrays_of, array)
    except Exception as e:
        raise _runtime_error("reading the shards of a global array", e) from e


def execute_spmd(executable: Any, arrays: list[Any], handlers: list[Any], name: str) -> list[Any]:
    """Run a multi-device program on global arrays: ``execute_sharded`` +
    ``consume_with_handlers``. Returns one global array per output, typed by ``handlers``
    (``result_handler(global aval, gspmd_sharding(...))``).
    """
    try:
        return executable.execute_sharded(arrays).consume_with_handlers(handlers)  # type: ignore[no-any-return]
    except Exception as e:
        raise _runtime_error(f"executing {name!r}", e) from e


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
