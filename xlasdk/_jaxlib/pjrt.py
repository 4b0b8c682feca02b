"""PJRT on top of jaxlib: clients, plugins, compilation, transfers, execution, serialization.

This module and the ones whose names it re-exports (``_pjrt_base``: handles, errors, ``Aval``, the
import shim; ``executables``: inspection, serialization, SPMD; ``dlpack``: DLPack and host-buffer
interop) are the only ones of the runtime that touch ``jaxlib.xla_client`` and ``jaxlib._jax``;
callers use them through this module (``pjrt.<name>``), so patching ``pjrt.<name>`` takes effect.
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

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import numpy as np
from jaxlib import xla_client as _xc

from ..errors import CompileError
from ..errors import FormatError as FormatError
from ..errors import XlaRuntimeError as XlaRuntimeError
from . import isolated, lapack
from ._pjrt_base import _IMMUTABLE_DURING_CALL as _IMMUTABLE_DURING_CALL
from ._pjrt_base import _J as _J
from ._pjrt_base import _REPLICATED as _REPLICATED
from ._pjrt_base import _SHIM as _SHIM
from ._pjrt_base import _T as _T
from ._pjrt_base import (
    JAXLIB_VERSION,
    XLA_CLIENT_VERSION,
    Aval,
    JaxRuntimeError,
    single_device_sharding,
)
from ._pjrt_base import RESULT_HANDLER_SKIP_CHECKS as RESULT_HANDLER_SKIP_CHECKS
from ._pjrt_base import _array_result_handler as _array_result_handler
from ._pjrt_base import _batched_device_put as _batched_device_put
from ._pjrt_base import _build_shim as _build_shim
from ._pjrt_base import _make_single_device_sharding as _make_single_device_sharding
from ._pjrt_base import _modules as _modules
from ._pjrt_base import _one_line as _one_line
from ._pjrt_base import _runtime_error as _runtime_error
from ._pjrt_base import _sharding_cache as _sharding_cache
from ._pjrt_base import _shimmed as _shimmed
from .dlpack import _SEMANTICS as _SEMANTICS
from .dlpack import (
    HOLD_LOCK,
    ZERO_COPY_ALIGNMENT,
    DLPackError,
    array_is_ready,
    array_minor_to_major,
    array_share,
    dlpack_export,
    dlpack_host_view,
    dlpack_import,
    dlpack_import_view,
    put_with_semantics,
)
from .executables import _MEMORY_FIELDS as _MEMORY_FIELDS
from .executables import _arrays_of as _arrays_of
from .executables import _gspmd_cache as _gspmd_cache
from .executables import (
    assemble_global,
    deserialize_executable,
    executable_cost_analysis,
    executable_devices,
    executable_fingerprint,
    executable_hlo_modules,
    executable_hlo_text,
    executable_memory_stats,
    executable_num_outputs,
    executable_shardings,
    execute_spmd,
    global_shards,
    gspmd_sharding,
    put_sharded,
    serialize_executable,
)

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
    "runner",
    "execute_multi",
    "execute_with_token",
    "execute_multi_with_token",
    "token_wait",
    "token_of_device",
    "array_to_numpy",
    "dlpack_host_view",
    "host_view",
    "array_block",
    "HOLD_LOCK",
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



# -- clients and plugins ---------------------------------------------------------------------
def make_cpu_client(num_devices: int | None) -> Any:
    """``xla_client.make_cpu_client(num_devices=...)`` (TFRT CPU client); ``XLA_FLAGS`` is read in
    the worker process first (``isolated.check_xla_flags``: XLA ends a process on an unknown flag)."""
    isolated.check_xla_flags()
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


def make_plugin_client(name: str, options: Mapping[str, Any] | None, distributed_client: Any = None) -> Any:
    """``xla_client.make_c_api_client(name, options, distributed_client)`` for a loaded plugin
    (``XLA_FLAGS`` read in the worker first, as for :func:`make_cpu_client`).

    Every plugin client xlasdk makes is made here: a multi-process job's client (``xs.distributed``)
    passes the distributed runtime client, which the plugin uses to exchange its topology with the
    other processes (as JAX's ``xla_bridge`` makes its TPU client: ``make_c_api_client("tpu",
    options, distributed.global_state.client)``).
    """
    isolated.check_xla_flags()
    try:
        return _xc.make_c_api_client(name, dict(options) if options else None, distributed_client)
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
    if lapack.names_a_target(module_text):  # jaxlib's CPU custom calls (ops.LU, jax dumps): register them
        lapack.ensure_registered()
    try:
        return client.compile_and_load(module_text, _xc.DeviceList(tuple(devices)), options)
    except Exception as e:
        msg = str(e).strip()
        if "Suspected Python Code Location" in msg:
            msg = msg.split("Suspected Python Code Location")[0].strip()
        raise CompileError(f"compiling {name!r} failed: {msg}{lapack.missing_kernel_hint(msg)}") from e


# -- transfers and execution -----------------------------------------------------------------
if RESULT_HANDLER_SKIP_CHECKS:  # jaxlib <= 0.10.2

    def result_handler(aval: Aval, sharding: Any) -> Any:
        """``array_result_handler(aval, sharding, committed=True, _skip_checks=True)``."""
        return _array_result_handler(aval, sharding, True, _skip_checks=True)

else:  # jaxlib 0.11.0 dropped _skip_checks (the handler no longer checks the shard count)

    def result_handler(aval: Aval, sharding: Any) -> Any:
        """``array_result_handler(aval, sharding, committed=True)``."""
        return _array_result_handler(aval, sharding, True)


def put(value: np.ndarray[Any, Any], aval: Aval, sharding: Any, device: Any) -> Any:
    """Copy a numpy array (native byte order) to ``device``: ``batched_device_put``.

    The data is copied during the call (``IMMUTABLE_ONLY_DURING_CALL``).

    Raises
    ------
    XlaRuntimeError
        When the transfer fails (for example, out of device memory).
    """
    try:  # (enable_x64 positional: nanobind parses a keyword argument at every call)
        return _batched_device_put(aval, sharding, [value], [device], True, False, _IMMUTABLE_DURING_CALL, True)
    except Exception as e:
        raise _runtime_error(f"transfer of {aval.dtype}{list(aval.shape)} to {device}", e) from e


def runner(executable: Any, handlers: list[Any], name: str) -> Callable[[list[Any]], list[Any]]:
    """:func:`execute` bound to one executable (``run(buffers)``): the per-call path of
    ``Executable.__call__``, with jaxlib's bound method and the handlers looked up once."""
    execute_sharded = executable.execute_sharded

    def run(buffers: list[Any]) -> list[Any]:
        try:
            return execute_sharded(buffers).consume_with_handlers(handlers)  # type: ignore[no-any-return]
        except Exception as e:
            raise _runtime_error(f"executing {name!r}", e) from e

    return run


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
    """``ArrayImpl.delete()``: free the device buffer now (the caller has checked, holding
    :data:`HOLD_LOCK`, that no DLPack capsule of it is alive: that would abort the process)."""
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
