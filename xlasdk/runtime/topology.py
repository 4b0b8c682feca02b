"""Compiling for a TPU without one: ``xs.topology("v5e:2x2")`` and its compile-only devices.

libtpu describes a TPU slice by its topology name and compiles for it on any machine, chip or not.
``xs.compile(comp, device=topo.devices[0])`` then gives a :class:`CompileOnlyExecutable`: the TPU's
optimized HLO (tiled layouts, memory spaces, its fusions), XLA's cost and memory figures, the
serialized executable (which loads on a real chip of that kind with ``xs.deserialize_executable``)
and, with ``XLA_FLAGS=--xla_dump_to=DIR``, XLA's dump files. Calling it raises
:class:`CompileOnlyError`.

The compile is the same as on the chip: the same libtpu and the same passes, with the topology's
device kind; what a compile-only client cannot know is only what the chip reports at run time.

Every program compiles first in xlasdk's worker process, so that an abort of XLA's TPU compiler
cannot end the user's process: XLA's TPU compiler aborts on some programs xlasdk's builder accepts
(on a v5e the op tests' unary ops did), so built programs are not shown safe for it either. A
compile-only client cannot load a serialized executable, so the compile is then repeated here.
``XLASDK_TPU_COMPILE=in-process`` compiles in this process only.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Final

from .._jaxlib import isolated, pjrt
from .._jaxlib import tpu as _tpu
from ..errors import CompileError, CompileOnlyError, PluginError, XlaSdkError
from ..shape import ProgramShape
from ._executable import Executable
from ._options import CompileOptions
from .device import Client, Device, UnknownDeviceError
from .host_parts import HostPart, parts_of

__all__ = ["Topology", "CompileOnlyExecutable", "CompileOnlyError", "topology"]


class Topology:
    """A TPU slice (or several: multi-slice) described by name, and its compile-only devices.

    Attributes
    ----------
    name : str
        The topology name (``"v5e:2x2"``; ``"v5e:4x4,num_slices=2"`` for two slices).
    platform : str
        ``"tpu"``.
    devices : tuple of Device
        One per TPU core of the slice(s), in id order; pass one to :func:`xlasdk.compile`.
    device_kind : str
        The devices' kind as the chip reports it (``"TPU v5 lite"``).
    platform_version : str
        libtpu's version string.
    num_slices : int
        How many slices (1 unless multi-slice).
    process_count : int
        How many hosts (one process each, as JAX runs a pod) drive the devices: libtpu's
        ``process_index`` of each device (4 chips a host by default: ``v5e:4x4`` has 4 hosts).
    """

    __slots__ = ("name", "platform", "platform_version", "devices", "device_kind", "num_slices", "process_count",
                 "_client")

    name: str
    platform: str
    platform_version: str
    devices: tuple[Device, ...]
    device_kind: str
    num_slices: int
    process_count: int
    _client: Client

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("use xs.topology(name)")

    @classmethod
    def _make(cls, name: str, client: Client, num_slices: int) -> Topology:
        t = object.__new__(cls)
        t.name = name
        t._client = client
        t.platform = client.platform
        t.platform_version = client.platform_version
        t.devices = tuple(client.devices())
        t.device_kind = t.devices[0].device_kind
        t.num_slices = num_slices
        t.process_count = len({d.process_index for d in t.devices})
        return t

    @property
    def client(self) -> Client:
        """The compile-only client of the topology's devices."""
        return self._client

    def local_devices(self, process_index: int) -> list[Device]:
        """The devices host ``process_index`` drives, in id order (JAX's
        ``jax.local_devices(process_index=...)``).

        Raises
        ------
        UnknownDeviceError
            For an index outside ``0 .. process_count - 1``.
        """
        if isinstance(process_index, bool) or not isinstance(process_index, int) \
                or not 0 <= process_index < self.process_count:
            raise UnknownDeviceError(
                f"topology {self.name!r} has processes 0 .. {self.process_count - 1}; got process_index "
                f"{process_index!r}"
            )
        return [d for d in self.devices if d.process_index == process_index]

    def __repr__(self) -> str:
        hosts = f", processes={self.process_count}" if self.process_count > 1 else ""
        return f"Topology({self.name!r}, devices={len(self.devices)}{hosts}, kind={self.device_kind!r})"


_lock: Final = threading.Lock()
_topologies: dict[str, Topology] = {}


def _libtpu() -> str:
    """The libtpu library, found as JAX finds it; PluginError saying how to get it otherwise."""
    from .plugins import find_plugin

    found = find_plugin("tpu")
    if found is None or found.library_path is None:
        raise PluginError(
            "compiling for a TPU needs libtpu: pip install 'xlasdk[tpu]' (the libtpu release that matches "
            f"jaxlib {pjrt.JAXLIB_VERSION}), or set TPU_LIBRARY_PATH to a libtpu.so"
        )
    if found.problem is not None:
        raise PluginError(f"libtpu ({found.source}): {found.problem}")
    return found.library_path


_SLICES: Final = ",num_slices="


def _split_slices(name: str, num_slices: int | None) -> tuple[str, int]:
    """``("v5e:4x4", 2)`` from ``"v5e:4x4,num_slices=2"`` or ``("v5e:4x4", num_slices=2)``."""
    base, sep, count = name.strip().partition(_SLICES)
    written: int | None = None
    if sep:
        if not count.isdigit():
            raise UnknownDeviceError(
                f"topology {name!r}: the number of slices must be written as 'NAME,num_slices=N' "
                "('v5e:4x4,num_slices=2')"
            )
        written = int(count)
    if num_slices is not None and (isinstance(num_slices, bool) or not isinstance(num_slices, int)):
        raise UnknownDeviceError(f"topology: num_slices must be an int >= 1, got {num_slices!r}")
    if written is not None and num_slices is not None and written != num_slices:
        raise UnknownDeviceError(f"topology {name!r} has {written} slices, but num_slices={num_slices}")
    n = written if written is not None else (num_slices if num_slices is not None else 1)
    if n < 1:
        raise UnknownDeviceError(f"topology {name!r}: num_slices must be at least 1, got {n}")
    return base.strip(), n


def topology(name: str, platform: str = "tpu", *, num_slices: int | None = None) -> Topology:
    """The compile-only devices of a TPU slice, on any machine (no chip needed).

    Parameters
    ----------
    name:
        The topology name, as JAX's ``jax.experimental.topologies.get_topology_desc`` and libtpu
        take it: ``"v5e:1x1"``, ``"v5e:2x2"``, ``"v5e:4x4"``, ``"v6e:2x2"``, ``"v5p:2x2x1"``,
        ``"v4:2x2x1"``; ``"v5e:4x4,num_slices=2"`` for several slices (the form ``--topology`` takes).
    platform:
        ``"tpu"`` (the only platform whose plugin compiles without its hardware).
    num_slices:
        Slices joined by the data-center network (multi-slice; JAX's and libtpu's ``num_slices``);
        default 1, or the count written in ``name``.

    Returns
    -------
    Topology
        Made once per name and process. Its devices belong to ``process_count`` hosts (libtpu's
        4 chips a host): :meth:`CompileOnlyExecutable.host_parts` splits a program among them.

    Raises
    ------
    UnknownDeviceError
        For a name libtpu does not know, or another platform.
    PluginError
        When libtpu is not installed, or cannot be loaded.
    """
    if not isinstance(platform, str) or platform.strip().lower() != "tpu":
        raise UnknownDeviceError(f"topology: only the TPU compiles without its hardware; got platform {platform!r}")
    if not isinstance(name, str):
        raise UnknownDeviceError(f"topology: name must be a string such as 'v5e:1x1', got {type(name).__name__}")
    base, slices = _split_slices(name, num_slices)
    key = base if slices == 1 else f"{base}{_SLICES}{slices}"
    with _lock:
        topo = _topologies.get(key)
        if topo is not None:
            return topo
        try:
            _tpu.parse_topology_name(base)
        except _tpu.TopologyNameError as e:
            raise UnknownDeviceError(str(e)) from None
        path = _libtpu()
        from .accelerators import tpu_chips

        try:
            _tpu.ensure_plugin(path, chips_present=tpu_chips()[0] > 0)
        except XlaSdkError as e:
            from .plugins import explain_load_error

            raise explain_load_error("tpu", path, str(e)) from None
        try:
            jax_topology = _tpu.make_topology(base, slices)
        except _tpu.TopologyNameError as e:
            raise UnknownDeviceError(str(e)) from None
        jax_client, jax_devices = _tpu.topology_devices(jax_topology)
        client = Client._make_compile_only(jax_client, jax_devices, key)
        topo = _topologies[key] = Topology._make(key, client, slices)
        return topo


class CompileOnlyExecutable(Executable):
    """A program compiled for a topology's compile-only devices: inspect it, serialize it; it
    cannot run (calling or executing it raises :class:`CompileOnlyError`).

    ``hlo_text()``, ``cost_analysis()``, ``memory_stats()``, ``serialize()`` and ``save()`` are
    those of :class:`~xlasdk.Executable`; ``xs.deserialize_executable(data, "tpu:0")`` loads the
    serialized bytes on a chip of the topology's kind.
    """

    __slots__ = ()

    @classmethod
    def _make_compile_only(cls, exe: Any, name: str, program_shape: ProgramShape, devices: list[Device],
                           num_replicas: int, num_partitions: int) -> CompileOnlyExecutable:
        self = object.__new__(cls)
        self._exe, self._name, self._program_shape = exe, name, program_shape
        self._devices = tuple(devices)
        self._num_replicas, self._num_partitions = num_replicas, num_partitions
        self._xla_blob = None
        self._host_callbacks = ()
        self._computation = None
        self._spmd = None
        self._run = self._fast = self._refuse
        return self

    @property
    def topology(self) -> str:
        """The topology it was compiled for (``"v5e:1x1"``)."""
        return str(self._devices[0].client.compile_only)

    def hlo_text(self, print_large_constants: bool = True) -> str:
        """The optimized HLO the TPU compiler made (tiled layouts ``{1,0:T(8,128)}``, memory spaces).

        Parameters
        ----------
        print_large_constants: as :meth:`Executable.hlo_text <xlasdk.Executable.hlo_text>`: every
            constant written out by default (the text loads back); False: ``{...}`` for constants of
            more than 10 elements.
        """
        return _tpu.unloaded_hlo_text(self._exe, large_constants=print_large_constants)

    def host_parts(self) -> tuple[HostPart, ...]:
        """What each host of the topology loads to run this program (a TPU pod runs one process per
        host, as JAX does): per process index, the serialized executable (the same for every host:
        one SPMD program) and which of its devices, and which (replica, partition), are that host's.

        Returns
        -------
        tuple of HostPart
            One per host that drives a device of the program, by process index (``v5e:4x4``: 4 hosts
            of 4 chips each, libtpu's ``process_index``).

        Raises
        ------
        XlaRuntimeError
            As :meth:`serialize`.
        """
        return parts_of(self.topology, self._devices, self._num_partitions, self._topology_processes(),
                        self.serialize())

    def save_per_host(self, directory: str | os.PathLike[str]) -> list[str]:
        """Write :meth:`host_parts` to ``directory/process_K`` (``executable.xlasdk`` and ``host.json``
        each); returns the part directories, by process index. On each host, after
        ``xs.distributed.initialize()``, ``xs.load_host_part(directory)`` loads its own
        (see :mod:`xlasdk.launch` for a multi-host TPU run).

        Raises
        ------
        OSError
            A write failed.
        """
        root = os.fspath(directory)
        return [part.save(os.path.join(root, f"process_{part.process_index}")) for part in self.host_parts()]

    def _topology_processes(self) -> int:
        return len({d.process_index for d in self._devices[0].client.devices()})

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise CompileOnlyError(
            f"{self._name!r} was compiled for the compile-only devices of topology {self.topology!r}: it cannot "
            "run; inspect it (hlo_text, cost_analysis, memory_stats), or serialize() it and load it on a chip with "
            "xs.deserialize_executable(data, 'tpu:0'), or compile for a real device"
        )

    __call__ = _refuse
    execute = _refuse
    execute_with_token = _refuse
    execute_replicated = _refuse
    execute_replicated_with_tokens = _refuse
    execute_sharded = _refuse
    record = _refuse

    def __repr__(self) -> str:
        return f"CompileOnlyExecutable({self._name!r}, topology={self.topology!r}, devices={len(self._devices)})"


def _worker_blob(module_text: str, topo: str, ids: list[int], options: CompileOptions, name: str,
                 timeout: float | None) -> bytes:
    """XLA's serialized TPU executable of ``module_text`` for ``topo``, compiled in the worker
    (an abort of XLA's TPU compiler ends the worker, not this process)."""
    try:
        blob: bytes = isolated.request(
            "xlasdk.runtime.topology:compile_for_topology_in_worker", module_text, topo, ids,
            options.num_replicas, options.num_partitions, tuple(options.env_option_overrides), name, timeout=timeout,
        )
    except isolated.Failed as e:
        raise CompileError(e.message) from None
    except isolated.WorkerDied as e:
        if e.timed_out:
            raise CompileError(
                f"compiling {name!r} for {topo} did not finish within {timeout:g} s and was stopped"
            ) from None
        raise CompileError(f"compiling {name!r} for {topo} failed: XLA aborted on this program ({e.reason})") from None
    return blob


def compile_for_topology(
    module_text: str, name: str, program_shape: ProgramShape, devs: list[Device], options: CompileOptions,
    jax_options: Any, *, isolate: bool, timeout: float | None,
) -> CompileOnlyExecutable:
    """Compile for compile-only devices; in the worker first when ``isolate``."""
    topo = str(devs[0].client.compile_only)
    client = devs[0].client._c
    if isolate:
        # A compile-only client cannot deserialize (libtpu: "PjRtCompiler must be constructed with a
        # Client"); the worker's compile showed that XLA's TPU compiler survives this module, and the
        # compile is deterministic, so it is repeated here.
        _worker_blob(module_text, topo, [d.id for d in devs], options, name, timeout)
    exe = _tpu.compile_only(client, module_text, [d._d for d in devs], jax_options, name)
    return CompileOnlyExecutable._make_compile_only(exe, name, program_shape, devs, options.num_replicas,
                                                    options.num_partitions)


#: PJRT device kinds of TPU chips and their names in topology names
_GENERATIONS: Final = {
    "TPU v2": "v2", "TPU v3": "v3", "TPU v4": "v4", "TPU v5 lite": "v5e", "TPU v5e": "v5e", "TPU v5": "v5p",
    "TPU v5p": "v5p", "TPU v6 lite": "v6e", "TPU v6e": "v6e", "TPU7x": "tpu7x",
}


def chip_topology(devs: list[Device]) -> str | None:
    """The topology name of the slice ``devs``'s client drives (``"v5e:1x1"`` for one v5e chip),
    from the device kind and the chips' coordinates; None when either is unknown."""
    gen = _GENERATIONS.get(devs[0].device_kind)
    coords = [_tpu.device_coords(d._d) for d in devs[0].client.devices()]
    known = [c for c in coords if c is not None]
    if gen is None or not known or len(known) != len(coords):
        return None
    dims = [max(c[i] for c in known) + 1 for i in range(3)]
    shape = "x".join(str(d) for d in (dims if gen in ("v4", "v5p", "tpu7x") else dims[:2]))
    return f"{gen}:{shape}" if gen in ("v4", "v5p", "tpu7x") or dims[2] == 1 else None


def compile_for_chip(module_text: str, name: str, devs: list[Device], options: CompileOptions, jax_options: Any,
                     timeout: float | None) -> tuple[Any, bytes]:
    """A program for a TPU chip: compiled in the worker by libtpu's compile-only client for the
    chip's topology, and the executable loaded here on the chip (no second compile).

    Raises
    ------
    CompileError
        When XLA rejects or aborts on the module, or the chip's topology cannot be named
        (``XLASDK_TPU_COMPILE=in-process`` then compiles in this process, unprotected).
    """
    topo = chip_topology(devs)
    if topo is None:
        raise CompileError(
            f"compile: {name!r} is compiled for a TPU in xlasdk's worker so that an abort of XLA "
            f"cannot end this process, but the topology of {devs[0].device_kind!r} devices is not known to xlasdk; "
            "set XLASDK_TPU_COMPILE=in-process to compile it here without that protection"
        )
    blob = _worker_blob(module_text, topo, [d.id for d in devs], options, name, timeout)
    return pjrt.deserialize_executable(devs[0].client._c, blob, [d._d for d in devs], jax_options, name), blob


def compile_for_topology_in_worker(
    module_text: str, topo: str, ids: list[int], num_replicas: int, num_partitions: int,
    overrides: tuple[tuple[str, str | bool | int | float], ...], name: str,
) -> bytes:  # pragma: no cover - runs in the worker process
    """XLA's serialized TPU executable of ``module_text`` for topology ``topo`` (in the worker)."""
    import numpy as np

    # libtpu takes a lock file per process that loads it; this process only compiles (the user's
    # process may hold the lock, and the chip): JAX's multi-process switch lets it load beside it
    os.environ["ALLOW_MULTIPLE_LIBTPU_LOAD"] = "1"
    t = topology(topo)
    devs = [t.client.device(i) for i in ids]
    assignment = np.asarray(ids, dtype=np.int64).reshape(num_replicas, num_partitions)
    options = pjrt.make_compile_options(num_replicas, num_partitions, assignment, overrides)
    try:
        exe = _tpu.compile_only(t.client._c, module_text, [d._d for d in devs], options, name)
    except CompileError as e:
        raise isolated.Failed("compile", str(e)) from None
    return pjrt.serialize_executable(exe, name)
