"""Compiling programs that xlasdk did not build: XLA's compiler runs first in the worker process.

XLA's compiler ``CHECK``-fails (aborts the process) on some modules that load and verify, for
example optimized HLO whose layouts its passes do not expect, or overflows the native stack on
very deep graphs. A computation loaded from a file (or from text or bytes) is therefore compiled
for the CPU in :mod:`xlasdk._jaxlib.isolated`'s worker process, and the executable it makes is
serialized there and deserialized here (PJRT ``SerializeExecutable`` / ``DeserializeExecutable``:
no second compile). Built computations, whose every op xlasdk has checked, compile in-process.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

import numpy as np

from .._jaxlib import isolated, manual_collectives, per_partition, pjrt
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
    module_text = _optimized_dump_for_compile(module_text, num_replicas, num_partitions, name)
    try:
        exe = pjrt.compile_and_load(client, module_text, devices, options, name)
    except CompileError as e:
        raise isolated.Failed("compile", str(e)) from None
    return pjrt.serialize_executable(exe, name)


def _optimized_dump_for_compile(module_text: str, num_replicas: int, num_partitions: int, name: str) -> str:
    """``module_text`` as XLA:CPU compiles it again when it is one of XLA's optimized dumps (runs
    in the worker process); any other module unchanged.

    * ``mhlo.fusion`` ops (XLA's fusions, imported without the CPU backend's configs, on which
      XLA stops with ``Fusion must have backend config``) are replaced by their bodies.
    * A per-partition program (the optimized dump of a program XLA's SPMD partitioner split over
      several devices: :class:`~xlasdk._jaxlib.per_partition.PerPartitionFacts`) compiles for
      as many devices as its collectives span, with its parameters and results marked
      ``{manual}`` so that the partitioner does not split it again: each device runs it on its
      own arguments (``execute_replicated``). Compiled for another device count it is refused.
      Its variadic all-reduces (which the partitioner refuses in manual mode) become one
      all-reduce per operand (:mod:`~xlasdk._jaxlib.manual_collectives`).
    """
    try:
        facts = per_partition.per_partition_facts(module_text)
    except Exception:
        return module_text  # not parseable here: XLA says why
    per_partition_program = facts.per_partition(num_partitions)
    if per_partition_program:
        devices = num_replicas * num_partitions
        span = facts.mesh_devices
        if num_partitions == 1 or (span is not None and span != devices):
            need = span if span is not None else "several"
            raise isolated.Failed("per-partition", per_partition_problem(name, need, num_replicas, num_partitions))
    elif facts.fusions == 0:
        return module_text
    try:
        text = per_partition.rewrite_for_compile(module_text, manual=per_partition_program)
        # in manual mode the partitioner refuses a variadic all-reduce (XLA's combiner writes them)
        return manual_collectives.split_in_text(text) if per_partition_program else text
    except Exception as e:
        raise isolated.Failed("per-partition", f"compiling {name!r} failed: XLA's optimized module could not be "
                              f"made compilable again ({type(e).__name__}: {str(e)[:300]}); load the program's "
                              "before_optimizations file instead") from None


def optimized_dump_text_in_worker(module_text: str, num_replicas: int, num_partitions: int, name: str) -> str:
    """:func:`_optimized_dump_for_compile` of ``module_text``, in the worker process."""
    return _optimized_dump_for_compile(module_text, num_replicas, num_partitions, name)


def optimized_dump_for_device(module_text: str, num_replicas: int, num_partitions: int, name: str,
                              timeout: float | None = None) -> str:
    """``module_text`` as a device other than the CPU compiles it when it is one of XLA's optimized
    dumps (a per-partition program marked ``{manual}``, fusions inlined: what
    :func:`compile_in_worker` compiles for the CPU; libtpu's Shardy import refuses the program's
    own tiled shardings, ``Expected HloShardingV3 ... but got non-replicated HloShardingV2``),
    rewritten in the worker; any other module unchanged, without a parse.

    Raises
    ------
    CompileError
        When the module is a per-partition program compiled for another device count, or cannot be
        rewritten (the worker's message); when the worker dies on it.
    """
    if per_partition_devices(module_text) is None and "mhlo.fusion" not in module_text \
            and per_partition.marked_partitions(module_text) is None:
        return module_text
    try:
        text: str = isolated.request("xlasdk.runtime.isolated_compile:optimized_dump_text_in_worker",
                                     module_text, num_replicas, num_partitions, name, timeout=timeout)
    except isolated.Failed as e:
        raise CompileError(e.message) from None
    except isolated.WorkerDied as e:
        raise CompileError(f"rewriting {name!r} for the compile failed: XLA aborted on this program ({e.reason})"
                           ) from None
    return text


_MESH: Final = re.compile(r"#sdy\.mesh<\[([^\]]*)\]")


def per_partition_devices(module_text: str) -> int | None:
    """The device count of an optimized per-partition dump, read from its text without parsing it
    (for :func:`xlasdk.compile`'s default options): the partition count the HLO loader marked it
    with (:data:`~xlasdk._jaxlib.per_partition.SPMD_PARTITIONS`), else the size of its ``sdy.mesh``
    when it holds collectives of XLA's SPMD partitioner (``is_spmd_generated``, or replica groups
    given as mesh axes); None for any other module. The worker checks the module itself before
    compiling it."""
    marked = per_partition.marked_partitions(module_text)
    if marked is not None and marked > 1:
        return marked
    if "replica_group_mesh_axes" not in module_text and "is_spmd_generated" not in module_text:
        return None
    sizes = [per_partition.mesh_devices(axes) for axes in _MESH.findall(module_text)]
    return max(sizes) if sizes and max(sizes) > 1 else None


def per_partition_problem(name: str, need: int | str, num_replicas: int, num_partitions: int) -> str:
    """Why an optimized per-partition dump does not compile for ``num_replicas`` x ``num_partitions``."""
    count = f"num_partitions={need}" if isinstance(need, int) else "num_partitions > 1"
    return (
        f"compile: {name!r} is an optimized per-partition dump (XLA's after_optimizations module of a "
        f"program its SPMD partitioner split over {need} devices: parameters and results are one device's "
        f"shards, and its collectives join {need} devices), but it was asked to compile for "
        f"num_replicas={num_replicas} x num_partitions={num_partitions}; compile it with "
        f"xs.CompileOptions({count}) and run it with exe.execute_replicated([args of partition 0, ...]) "
        "(each partition's own arguments), or load the program's before_optimizations file (module."
        "before_optimizations.txt / .hlo.pb) to compile and run it from global arrays"
    )


def compile_isolated(
    client: Any, module_text: str, devices: Sequence[Any], options: Any,
    num_replicas: int, num_partitions: int, overrides: Sequence[tuple[str, str | bool | int | float]], name: str,
    *, timeout: float | None = None,
) -> tuple[Any, bytes | None]:
    """The jaxlib executable of ``module_text`` on ``devices``, compiled in the worker and loaded
    here, and XLA's serialized executable it was loaded from. In a watched process (the ``xlasdk``
    command's supervised child, :mod:`xlasdk._jaxlib.isolated_local`) it is compiled here, with
    the worker's checks and limits, and no serialized executable comes with it (None).

    Raises
    ------
    CompileError
        When XLA rejects the module, or aborts on it (the message then carries XLA's
        ``Check failed:`` line).
    """
    def died(e: isolated.WorkerDied) -> CompileError:
        if e.timed_out:
            return CompileError(
                f"compiling {name!r} did not finish within {timeout:g} s and was stopped (xs.compile(timeout=...), "
                "XLASDK_COMPILE_TIMEOUT)"
            )
        if e.killed:
            return CompileError(f"compiling {name!r} was stopped: {e.reason}")
        return CompileError(f"compiling {name!r} failed: XLA aborted on this program ({e.reason})")

    if isolated._here():  # a watched process (the xlasdk command's child): compiled here, on this client
        from .._jaxlib import isolated_local

        def here() -> Any:
            text = _optimized_dump_for_compile(module_text, num_replicas, num_partitions, name)
            try:
                return pjrt.compile_and_load(client, text, devices, options, name)
            except CompileError as e:
                raise isolated.Failed("compile", str(e)) from None

        try:
            return isolated_local.call(here, (), timeout, died), None
        except isolated.Failed as e:
            raise CompileError(e.message) from None
    try:
        blob = isolated.request(
            "xlasdk.runtime.isolated_compile:compile_in_worker",
            module_text, num_replicas, num_partitions, tuple(overrides), name, timeout=timeout,
        )
    except isolated.Failed as e:
        raise CompileError(e.message) from None
    except isolated.WorkerDied as e:
        raise died(e) from None
    return pjrt.deserialize_executable(client, blob, devices, options, name), blob
