"""Loading this host's part of a slice's program on the pod (written by
:meth:`CompileOnlyExecutable.save_per_host <xlasdk.CompileOnlyExecutable.save_per_host>`, read by
:func:`~xlasdk.runtime.host_parts.read_host_part`): the compile step's deserializer with the
checks that the part is this process's."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .._atomic import file_path
from ..errors import DistributedError, FormatError
from ._compile import deserialize_executable
from .device import Device, UnknownDeviceError, _resolve_device
from .host_parts import _part_dir, read_host_part

if TYPE_CHECKING:
    from ._executable import Executable

__all__ = ["load_host_part"]


def load_host_part(path: str | os.PathLike[str], device: Device | str | None = None) -> Executable:
    """Load this process's part (written by ``save_per_host``) on the TPU of a multi-host job.

    Parameters
    ----------
    path:
        ``DIR`` (this process's ``DIR/process_K`` is read, K its process index) or ``DIR/process_K``.
    device:
        A device of the client to load on (default: the default device; after
        ``xs.distributed.initialize()`` on a TPU host, the job's TPU client).

    Returns
    -------
    Executable
        Compiled for every device of the slice; this process runs it on its own devices
        (``execute_replicated`` with its local devices' arguments, as a multi-process job does).

    Raises
    ------
    DistributedError
        The part is another process's, or the job has another number of processes (run
        ``xs.distributed.initialize()`` on every host first).
    UnknownDeviceError
        This process's devices are not the part's (another topology, another kind of device).
    FormatError
        As :func:`read_host_part`; or the executable does not load (another platform or jaxlib).
    """
    base = _resolve_device(device)
    client = base.client
    try:
        where = file_path(path)
    except (TypeError, ValueError) as e:
        raise FormatError(f"load_host_part: {e}") from None
    part = read_host_part(_part_dir(where, client.process_index))
    if client.process_count != part.process_count or client.process_index != part.process_index:
        raise DistributedError(
            f"load_host_part: the part is process {part.process_index}'s of {part.process_count} ({part.topology}), "
            f"but this is process {client.process_index} of {client.process_count} of {client.name!r}: run "
            "xs.distributed.initialize() on every host of the slice before its first TPU use, and load DIR "
            "(each process reads its own process_K)"
        )
    if base.device_kind != part.device_kind:
        raise UnknownDeviceError(f"load_host_part: the part is for {part.device_kind!r} devices ({part.topology}); "
                                 f"{base} is a {base.device_kind!r}")
    mine = sorted(d.id for d in client.local_devices() if d.id in set(part.device_ids))
    if mine != sorted(part.local_device_ids):
        raise UnknownDeviceError(
            f"load_host_part: process {part.process_index}'s part drives devices {list(part.local_device_ids)} "
            f"of {part.topology}; this process drives {mine} of them (of its devices "
            f"{[d.id for d in client.local_devices()]})"
        )
    return deserialize_executable(part.executable, base, _what=f"load_host_part({path!s})")
