"""Compiling programs that xlasdk did not build: XLA's compiler runs first in the worker process.

XLA's compiler ``CHECK``-fails (aborts the process) on some modules that load and verify, for
example optimized HLO whose layouts its passes do not expect, or overflows the native stack on
very deep graphs. A computation loaded from a file (or from text or bytes) is therefore compiled
for the CPU in :mod:`xlasdk._jaxlib.isolated`'s worker process, and the executable it makes is
serialized there and deserialized here (PJRT ``SerializeExecutable`` / ``DeserializeExecutable``:
no second compile). Built computations, whose every op xlasdk has checked, compile in-process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._jaxlib import isolated, pjrt
from ..errors import CompileError

_clients: dict[int, Any] = {}


def compile_in_worker(
    module_text: str,
    num_replicas: int,
    num_partitions: int,
    overrides: Sequence[tuple[str, str | bool | int | float]],
    name: str,
) -> bytes:
    """XLA's serialized CPU executable of ``module_text`` (runs in the worker process)."""
    n = num_replicas * num_partitions
    client = _clients.get(n)
    if client is None:
        client = _clients[n] = pjrt.make_cpu_client(max(n, 1))
    devices = pjrt.client_devices(client)[:n]
    assignment = np.arange(n, dtype=np.int64).reshape(num_replicas, num_partitions)
    options = pjrt.make_compile_options(num_replicas, num_partitions, assignment, overrides)
    try:
        exe = pjrt.compile_and_load(client, module_text, devices, options, name)
    except CompileError as e:
        raise isolated.Failed("compile", str(e)) from None
    return pjrt.serialize_executable(exe, name)


def compile_isolated(
    client: Any, module_text: str, devices: Sequence[Any], options: Any,
    num_replicas: int, num_partitions: int, overrides: Sequence[tuple[str, str | bool | int | float]], name: str,
    *, timeout: float | None = None,
) -> tuple[Any, bytes]:
    """The jaxlib executable of ``module_text`` on ``devices``, compiled in the worker and loaded
    here, and XLA's serialized executable it was loaded from.

    Raises
    ------
    CompileError
        When XLA rejects the module, or aborts on it (the message then carries XLA's
        ``Check failed:`` line).
    """
    try:
        blob = isolated.request(
            "xlasdk.runtime.isolated_compile:compile_in_worker",
            module_text, num_replicas, num_partitions, tuple(overrides), name, timeout=timeout,
        )
    except isolated.Failed as e:
        raise CompileError(e.message) from None
    except isolated.WorkerDied as e:
        if e.timed_out:
            raise CompileError(
                f"compiling {name!r} did not finish within {timeout:g} s and was stopped (xs.compile(timeout=...), "
                "XLASDK_COMPILE_TIMEOUT)"
            ) from None
        if e.killed:
            raise CompileError(f"compiling {name!r} was stopped: {e.reason}") from None
        raise CompileError(f"compiling {name!r} failed: XLA aborted on this program ({e.reason})") from None
    return pjrt.deserialize_executable(client, blob, devices, options, name), blob
