"""Executable inspection, serialization and SPMD execution on jaxlib (see :mod:`xlasdk._jaxlib.pjrt`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import numpy as np
from jaxlib import xla_client as _xc

from ..errors import FormatError
from . import lapack
from ._pjrt_base import _IMMUTABLE_DURING_CALL, Aval, _batched_device_put, _one_line, _runtime_error, _shimmed


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


def executable_hlo_text(executable: Any, *, large_constants: bool = True) -> str:
    """The optimized, scheduled HLO of ``LoadedExecutable.hlo_modules()`` with metadata (as
    ``get_hlo_text()`` prints it), large constants written out when ``large_constants``."""
    from .mlir import hlo_modules_text

    try:
        modules = executable.hlo_modules()
    except Exception as e:
        raise _runtime_error("hlo_modules", e) from e
    return hlo_modules_text(modules, large_constants=large_constants)


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
    if lapack.names_a_target(blob):
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
