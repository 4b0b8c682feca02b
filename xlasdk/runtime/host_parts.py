"""Each host's part of a program compiled for a whole TPU slice (or several: multi-slice).

A TPU pod runs one process per host (JAX's multi-controller model): every process loads the same
SPMD executable, compiled for every device of the slice, and feeds and reads only its own devices
(``process_index``, its local devices). ``xs.topology("v5e:4x4")`` compiles that executable on any
machine; :meth:`CompileOnlyExecutable.host_parts <xlasdk.CompileOnlyExecutable.host_parts>` says,
per process index, what that host loads: the serialized executable and which devices, and which
(replica, partition) of the program, are its own. ``save_per_host(DIR)`` writes them::

    DIR/process_0/executable.xlasdk   the serialized executable (xs.load_executable reads it)
    DIR/process_0/host.json           the host's part: process_index, its local devices, their
                                      (replica, partition), the executable's sha256
    DIR/process_1/...

On each host of the pod, after ``xs.distributed.initialize()``,
:func:`~xlasdk.runtime.host_load.load_host_part` (``DIR`` or ``DIR/process_K``) loads this process's
part on the TPU client and checks it is the right one: the process index, the number of processes,
the device kind and the local devices must be the part's, else it refuses (a host that loaded
another's part would feed the wrong partitions).

The serialized executable is the same for every host (one SPMD program); what differs is the
devices and partitions each host owns. A compile-only client cannot deserialize (libtpu:
"PjRtCompiler must be constructed with a Client"): :func:`read_host_part` checks a part without a
chip (its files, checksum and the executable's header against the part), ``load_host_part``
loads it on a real TPU client.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any, Final

from .._atomic import atomic_write, file_path, read_regular_file
from ..errors import FormatError
from ._serial_format import _parse
from .device import Device

__all__ = ["HostPart", "read_host_part", "PART_FILE", "EXECUTABLE_FILE"]

PART_FILE: Final = "host.json"
EXECUTABLE_FILE: Final = "executable.xlasdk"
_FORMAT: Final = "xlasdk-host-part"
_VERSION: Final = 1
_MAX_PART_BYTES: Final = 1 << 24


@dataclass(frozen=True)
class HostPart:
    """What the host of one process index loads.

    Attributes
    ----------
    topology : str
        The topology the program was compiled for (``"v5e:4x4"``).
    process_index : int
        The host's process (JAX's ``jax.process_index()``; libtpu's ``process_index`` of its devices).
    process_count : int
        The processes (hosts) of the topology.
    device_kind : str
        The devices' kind (``"TPU v5 lite"``).
    device_ids : tuple of int
        Every device of the program, in its order (replica-major), on every host.
    local_device_ids : tuple of int
        The program's devices this host drives, in the program's device order.
    logical_ids : tuple of (int, int)
        ``(replica, partition)`` of each local device, in the same order.
    executable : bytes
        The serialized executable (:meth:`Executable.serialize`), the same for every host.
    """

    topology: str
    process_index: int
    process_count: int
    device_kind: str
    device_ids: tuple[int, ...]
    local_device_ids: tuple[int, ...]
    logical_ids: tuple[tuple[int, int], ...]
    executable: bytes

    @property
    def sha256(self) -> str:
        """The executable's sha256 (hex)."""
        return hashlib.sha256(self.executable).hexdigest()

    def _json(self) -> dict[str, Any]:
        return {
            "format": _FORMAT, "version": _VERSION, "topology": self.topology,
            "process_index": self.process_index, "process_count": self.process_count,
            "device_kind": self.device_kind, "device_ids": list(self.device_ids),
            "local_device_ids": list(self.local_device_ids),
            "logical_ids": [list(x) for x in self.logical_ids], "executable": EXECUTABLE_FILE,
            "sha256": self.sha256,
        }

    def save(self, directory: str | os.PathLike[str]) -> str:
        """Write the part to ``directory`` (``executable.xlasdk``, then ``host.json``; created if
        missing); returns the directory. Each file is written atomically."""
        d = file_path(directory)
        os.makedirs(d, exist_ok=True)
        atomic_write(os.path.join(d, EXECUTABLE_FILE), self.executable)
        atomic_write(os.path.join(d, PART_FILE), json.dumps(self._json(), indent=1).encode())
        return d

    def __repr__(self) -> str:
        return (f"HostPart(process_index={self.process_index} of {self.process_count}, topology={self.topology!r}, "
                f"local_device_ids={list(self.local_device_ids)}, {len(self.executable)} bytes)")


def parts_of(topology: str, devices: tuple[Device, ...], num_partitions: int, process_count: int,
             executable: bytes) -> tuple[HostPart, ...]:
    """The parts of an executable whose devices (in the program's order: replica-major) are ``devices``."""
    by_host: dict[int, list[tuple[int, tuple[int, int]]]] = {}
    for k, d in enumerate(devices):
        by_host.setdefault(d.process_index, []).append((d.id, divmod(k, num_partitions)))
    return tuple(
        HostPart(topology, p, process_count, devices[0].device_kind, tuple(d.id for d in devices),
                 tuple(i for i, _ in own),
                 tuple(r for _, r in own), executable)
        for p, own in sorted(by_host.items())
    )


# -- reading -------------------------------------------------------------------------------------------
def _part_dir(path: str, process_index: int | None) -> str:
    """The directory of a part: ``path`` itself when it holds ``host.json``, else its ``process_K``."""
    if os.path.isfile(os.path.join(path, PART_FILE)) or process_index is None:
        return path
    return os.path.join(path, f"process_{process_index}")


def _ints(value: Any, what: str, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        raise FormatError(f"{where}: corrupt: {what} must be a list of ints, got {str(value)[:80]}")
    return tuple(value)


def read_host_part(path: str | os.PathLike[str], process_index: int | None = None) -> HostPart:
    """A host's part as :meth:`HostPart.save` wrote it, checked without loading it (no chip needed).

    Parameters
    ----------
    path:
        The part's directory (``DIR/process_K``), or ``DIR`` with ``process_index``.
    process_index:
        Which part of ``DIR`` to read.

    Raises
    ------
    FormatError
        A missing or unreadable file, a part of another format or version, a checksum that does not
        match the executable, or an executable whose header disagrees with the part (platform, device
        ids, partitions).
    """
    try:
        base = file_path(path)
    except (TypeError, ValueError) as e:
        raise FormatError(f"read_host_part: {e}") from None
    d = _part_dir(base, process_index)
    where = f"host part {d!r}"
    try:
        raw = read_regular_file(os.path.join(d, PART_FILE), limit=_MAX_PART_BYTES)
        meta = json.loads(raw.decode())
    except OSError as e:
        subs = sorted(n for n in (os.listdir(d) if os.path.isdir(d) else []) if re.fullmatch(r"process_\d+", n))
        hint = (f" (it holds the parts {', '.join(subs[:4])}{', ...' if len(subs) > 4 else ''}: give process_index=K "
                "or the part's own directory)" if subs and process_index is None else "")
        raise FormatError(f"{where}: cannot read {PART_FILE}: {e.strerror or e}{hint}") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise FormatError(f"{where}: {PART_FILE} is not JSON: {e}") from None
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
        raise FormatError(f"{where}: {PART_FILE} is not an xlasdk host part (format {_FORMAT!r})")
    if meta.get("version") != _VERSION:
        raise FormatError(f"{where}: version {meta.get('version')!r} is unsupported (xlasdk reads {_VERSION})")
    try:
        pidx, pcount = meta["process_index"], meta["process_count"]
        every = _ints(meta["device_ids"], "device_ids", where)
        local = _ints(meta["local_device_ids"], "local_device_ids", where)
        logical = tuple(tuple(_ints(x, "logical_ids", where)) for x in meta["logical_ids"])
        topo, kind, digest = str(meta["topology"]), str(meta["device_kind"]), str(meta["sha256"])
    except (KeyError, TypeError) as e:
        raise FormatError(f"{where}: corrupt: {type(e).__name__}: {e}") from None
    if not (isinstance(pidx, int) and isinstance(pcount, int) and 0 <= pidx < pcount) or len(logical) != len(local) \
            or any(len(x) != 2 for x in logical) or not local:
        raise FormatError(f"{where}: corrupt: process {pidx!r} of {pcount!r}, {len(local)} devices, "
                          f"{len(logical)} logical ids")
    if process_index is not None and pidx != process_index:
        raise FormatError(f"{where}: holds the part of process {pidx}, not of process {process_index}")
    named = re.fullmatch(r"process_(\d+)", os.path.basename(os.path.normpath(d)))
    if named is not None and int(named.group(1)) != pidx:  # save_per_host names each part's directory by its process
        raise FormatError(f"{where}: holds the part of process {pidx}, but its directory is process "
                          f"{named.group(1)}'s (a part moved or edited)")
    try:
        exe = read_regular_file(os.path.join(d, EXECUTABLE_FILE))
    except OSError as e:
        raise FormatError(f"{where}: cannot read {EXECUTABLE_FILE}: {e.strerror or e}") from None
    if hashlib.sha256(exe).hexdigest() != digest:
        raise FormatError(f"{where}: {EXECUTABLE_FILE} does not match the part's sha256 (another host's "
                          "executable, or a file cut short)")
    header, _ = _parse(exe, f"{where}: {EXECUTABLE_FILE}")
    try:
        ids, npart = [int(i) for i in header["device_ids"]], int(header["num_partitions"])
    except (KeyError, TypeError, ValueError) as e:
        raise FormatError(f"{where}: {EXECUTABLE_FILE}: corrupt header: {e}") from None
    if list(every) != ids:
        raise FormatError(f"{where}: the executable's devices {ids} are not the part's {list(every)}")
    positions = {i: divmod(k, npart) for k, i in enumerate(ids)}
    if any(positions.get(i) != tuple(r) for i, r in zip(local, logical, strict=True)):
        raise FormatError(f"{where}: the executable's devices {ids} do not give this part's devices {list(local)} "
                          f"the (replica, partition) {[list(x) for x in logical]}")
    return HostPart(topo, pidx, pcount, kind, every, local, logical, exe)  # type: ignore[arg-type]
