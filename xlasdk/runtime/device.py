"""PJRT clients and devices: ``client``, ``devices``, ``load_pjrt_plugin``, ``Device``, ``Client``.

Clients are created on first use and cached per platform and device count. The built-in
platform is ``"cpu"`` (XLA's TFRT CPU client); other platforms (CUDA, ROCm, TPU, ...) come from
PJRT plugins added with :func:`load_pjrt_plugin`.

Device strings read ``"platform:id"`` (``"cpu:0"``) or just ``"platform"`` (its first device);
they resolve against the platform's *default* client, ``xs.client(platform)``. The default CPU
client has one device unless ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` is set
before it is created; ``xs.client("cpu", num_devices=N)`` is a separate N-device client whose
devices are passed as :class:`Device` objects.
"""

from __future__ import annotations

import operator
import os
import re
import sys
import threading
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol

from .._jaxlib import distributed as _dist
from .._jaxlib import pjrt
from ..errors import DistributedError, FormatError, PluginError, UnknownDeviceError, XlaRuntimeError
from ..types import show

if TYPE_CHECKING:
    from .array import DeviceArray

__all__ = [
    "Device",
    "Client",
    "UnknownDeviceError",
    "devices",
    "local_devices",
    "client",
    "load_pjrt_plugin",
    "default_device",
    "live_arrays",
]


#: The most devices of a CPU client (``xs.client("cpu", num_devices=N)``): XLA:CPU's client takes
#: time and memory that grow faster than the device count (about 3 s and 0.6 GB for 4096), so a
#: larger count would tie up the process instead of failing.
MAX_CPU_DEVICES: Final = 4096


class Device:
    """One device of a PJRT client (a CPU "device", a GPU, a TPU core).

    Attributes
    ----------
    id : int
        The device id within its client (``0 .. n-1``).
    platform : str
        ``"cpu"``, ``"cuda"``, ``"rocm"``, ``"tpu"``...
    device_kind : str
        The hardware kind reported by PJRT (``"cpu"``, ``"NVIDIA H100 80GB HBM3"``...).
    process_index : int
        The process that owns the device: 0 in a single process; under
        ``xs.distributed.initialize`` the index of the process whose device it is (XLA numbers
        the CPU devices of process ``p`` from ``p * 2048``). Only the devices of this process
        (``xs.local_devices()``) hold its arrays.

    ``str(device)`` is ``"cpu:0"`` (for a plugin, its registered name and the id), a string
    that device arguments accept. Devices compare equal when they are the same device of the
    same client; devices of two independent clients are different devices.
    """

    __slots__ = (
        "_d", "_client", "id", "platform", "device_kind", "local_hardware_id", "process_index", "_str", "_sharding",
        "_metas",
    )

    id: int
    platform: str
    device_kind: str
    local_hardware_id: int
    process_index: int
    _d: Any
    _client: Client
    _str: str
    _sharding: Any
    # runtime.array's interned (dtype, shape) records of this device's arrays (array._meta_of)
    _metas: dict[Any, Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("Device objects come from xs.devices(), xs.client().devices() or Client.device(id)")

    @classmethod
    def _make(cls, jax_device: Any, owner: Client) -> Device:
        d = object.__new__(cls)
        d._d = jax_device
        d._client = owner
        d.id, d.platform, d.device_kind, d.local_hardware_id = pjrt.device_info(jax_device)
        d.process_index = _dist.device_process_index(jax_device)
        d._str = f"{owner.name}:{d.id}"  # the name device strings resolve (a plugin's name)
        d._sharding = pjrt.single_device_sharding(jax_device)
        d._metas = {}
        return d

    @property
    def client(self) -> Client:
        """The :class:`Client` this device belongs to."""
        return self._client

    def memory_stats(self) -> dict[str, int] | None:
        """Allocator statistics in bytes (``bytes_in_use``, ``bytes_limit``...); None on CPU.

        Maps to PJRT ``Device::GetAllocatorStats`` (``Device.memory_stats()`` in jaxlib).
        """
        return pjrt.device_memory_stats(self._d)

    def live_buffers(self) -> list[Any]:
        """The :class:`~xlasdk.DeviceArray` objects on this device that are alive and not
        deleted, newest first.

        xlasdk tracks its arrays with weak references (the list does not keep them alive);
        jaxlib's ``Device.live_buffers`` is deprecated and always empty. Arrays whose buffer was
        handed to a DLPack consumer with ``take_ownership`` count as deleted.
        """
        return live_arrays(self)

    def __str__(self) -> str:
        return self._str

    def __repr__(self) -> str:
        return f"Device({self._str}, kind={self.device_kind!r})"

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Device):
            return NotImplemented
        return self._client is other._client and self.id == other.id

    def __hash__(self) -> int:
        return hash((id(self._client), self.id))


class Client:
    """A PJRT client: one backend (CPU, or a plugin's platform) and its devices.

    Get one with :func:`client`; ``client.devices()`` lists its devices.

    Attributes
    ----------
    platform : str
        ``"cpu"``, ``"cuda"``...
    platform_version : str
        The backend's version string (``"cpu"`` for the built-in CPU client).
    name : str
        The name it is registered under (the platform, or the plugin name).
    """

    __slots__ = (
        "_c", "name", "platform", "platform_version", "_devices", "_local", "_by_id", "process_index", "process_count",
        "compile_only", "__weakref__",
    )

    name: str
    platform: str
    platform_version: str
    _c: Any
    _devices: tuple[Device, ...]
    _local: tuple[Device, ...]
    _by_id: dict[int, Device]
    process_index: int
    process_count: int
    #: the topology name of a compile-only client (``xs.topology``), else None
    compile_only: str | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("use xs.client(platform, num_devices=None) or xs.load_pjrt_plugin(name, path)")

    @classmethod
    def _make(cls, jax_client: Any, name: str) -> Client:
        c = object.__new__(cls)
        c._c = jax_client
        c.name = name
        c.platform, c.platform_version = pjrt.client_info(jax_client)
        c.process_index = _dist.client_process_index(jax_client)
        local = pjrt.client_devices(jax_client)
        try:
            every = _dist.client_global_devices(jax_client)
        except Exception:  # a backend without a global view: its devices are its own
            every = local
        local_ids = {int(d.id) for d in local}
        c._devices = tuple(Device._make(d, c) for d in every)
        c._local = tuple(d for d in c._devices if d.id in local_ids)
        c._by_id = {d.id: d for d in c._devices}
        c.process_count = len({d.process_index for d in c._devices} | {c.process_index})
        c.compile_only = None
        return c

    @classmethod
    def _make_compile_only(cls, jax_client: Any, jax_devices: list[Any], topology: str) -> Client:
        """The client of a topology's compile-only devices (``xs.topology``): every device counts
        as this process's, for placing a compile; nothing runs on them."""
        c = object.__new__(cls)
        c._c = jax_client
        c.name = f"{jax_client.platform}[{topology}]"
        c.platform, c.platform_version = pjrt.client_info(jax_client)
        c.process_index = 0
        c._devices = c._local = tuple(Device._make(d, c) for d in jax_devices)
        c._by_id = {d.id: d for d in c._devices}
        c.process_count = len({d.process_index for d in c._devices})
        c.compile_only = topology
        return c

    def devices(self) -> list[Device]:
        """Every device of the client, in id order: under ``xs.distributed.initialize`` the
        devices of all processes (PJRT ``Client::devices``)."""
        return list(self._devices)

    def local_devices(self) -> list[Device]:
        """The devices this process addresses, in id order (PJRT ``addressable_devices``); the
        same as :meth:`devices` in a single process."""
        return list(self._local)

    @property
    def device_count(self) -> int:
        """Number of devices of this client, in all processes."""
        return len(self._devices)

    @property
    def local_device_count(self) -> int:
        """Number of devices of this process."""
        return len(self._local)

    def device(self, device_id: int) -> Device:
        """The device with id ``device_id``.

        Raises
        ------
        UnknownDeviceError
            If the client has no such device.
        """
        d = self._by_id.get(device_id)
        if d is None:
            raise UnknownDeviceError(
                f"{self.name} client has no device {device_id!r}; its devices are "
                + ", ".join(str(x) for x in self._devices)
            )
        return d

    @property
    def default_device(self) -> Device:
        """The first device of this process."""
        return self._local[0]

    def __repr__(self) -> str:
        return f"Client({self.name!r}, platform={self.platform!r}, devices={len(self._devices)})"


# -- registry ---------------------------------------------------------------------------------
_lock: Final = threading.RLock()
_clients: dict[tuple[str, int], Client] = {}
_defaults: dict[str, Client] = {}
_plugins: dict[str, tuple[str, dict[str, Any] | None]] = {}  # name -> (path, options)
_failed_plugins: dict[str, PluginError] = {}  # name -> why loading it failed (jaxlib keeps the name)
_default_device: Device | None = None

_NAME_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DEVICE_RE: Final = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?::\s*(\d+))?\s*$")
_GPU_ALIASES: Final = ("cuda", "rocm")


def _canonical_platform(platform: str) -> str:
    p = platform.strip().lower()
    if p == "host":
        return "cpu"
    if p == "gpu":
        with _lock:
            for alias in _GPU_ALIASES:
                if alias in _plugins or alias in _defaults:
                    return alias
    return p


_auto_platform: str | None = None


def _default_platform() -> str:
    """The default platform (:mod:`xlasdk.runtime.accelerators`): ``XLASDK_PLATFORMS`` /
    ``JAX_PLATFORMS``, else the first plugin added in this process, else an attached accelerator
    whose plugin is installed, else ``"cpu"``."""
    global _auto_platform
    from .accelerators import attached_accelerator, requested_platforms

    asked = requested_platforms()
    if asked is not None:
        return _canonical_platform(asked[0][0])
    with _lock:
        for name in _plugins:
            return name
        if _auto_platform is None:
            from .plugins import plugins

            # (a plugin with a problem counts: its error is the answer, never a quiet move to the CPU)
            _auto_platform = attached_accelerator(lambda: {p.name for p in plugins()}) or "cpu"
        return _auto_platform


def _new_client(platform: str, num_devices: int | None, *, adopt: bool = False) -> Client:
    """A new client of ``platform``; with ``adopt`` (a platform's default client), JAX's client of
    that platform when JAX has made one in this process (one client per platform, shared)."""
    if adopt:
        from .._jaxlib.jax_bridge import jax_backend

        shared = jax_backend(platform)
        if shared is not None:
            return Client._make(shared, platform)
    if platform == "cpu":
        return Client._make(pjrt.make_cpu_client(num_devices), "cpu")
    if platform == "proxy":  # jaxlib's IFRT Proxy client (Pathways): runtime/proxy.py
        from .proxy import proxy_client

        return Client._make(proxy_client(), "proxy")
    if platform in _plugins:
        path, options = _plugins[platform]
        try:
            return Client._make(_make_plugin_client(platform, options), platform)
        except XlaRuntimeError as e:
            from .plugins import explain_client_error

            raise explain_client_error(platform, path, str(e)) from e
    from .plugins import find_plugin, install_hint

    found = find_plugin(platform)
    if found is not None:
        if found.problem is not None or found.library_path is None:
            raise PluginError(f"PJRT plugin {found.name!r} ({found.source}): {found.problem}")
        return load_pjrt_plugin(found.name, found.library_path, options=found.options)
    if pjrt.plugin_loaded(platform):  # loaded by another framework (JAX) from a path we did not find
        return _adopt_loaded_plugin(platform, None)
    loaded = ", ".join(["cpu", *_plugins])
    raise UnknownDeviceError(
        f"no PJRT client for platform {platform!r}: available are {loaded}, and no installed PJRT plugin "
        f"provides it; {install_hint(platform)}; or add a plugin with "
        f"xs.load_pjrt_plugin({platform!r}, '/path/to/pjrt_plugin.so')"
    )


def _make_plugin_client(name: str, options: dict[str, Any] | None) -> Any:
    """The plugin's client; under ``xs.distributed`` it joins the job (``distributed_client``)."""
    dist = sys.modules.get("xlasdk.distributed")
    state = getattr(dist, "_state", None)
    if state is not None:
        return _dist.make_plugin_client(name, options, state.dc, state.process_id, state.num_processes)
    return pjrt.make_plugin_client(name, options)


def client(platform: str = "cpu", num_devices: int | None = None, *, cached: bool = True) -> Client:
    """The PJRT client of ``platform``, created on first use.

    Parameters
    ----------
    platform:
        ``"cpu"`` (built in) or the name of a plugin added with :func:`load_pjrt_plugin`
        (``"gpu"`` means whichever of ``"cuda"``/``"rocm"`` is loaded).
    num_devices:
        For ``"cpu"``: the number of CPU devices, at most :data:`MAX_CPU_DEVICES` (4096).
        ``None`` gives the platform's default client
        (for CPU: 1 device, or ``--xla_force_host_platform_device_count`` from ``XLA_FLAGS``),
        which device strings such as ``"cpu:0"`` refer to. Another count gives a separate
        client, cached per ``(platform, num_devices)``. Plugins have a fixed device count.
    cached:
        ``False`` creates a new, independent client every call (its devices and buffers are
        separate from every other client's).

    Returns
    -------
    Client

    Raises
    ------
    UnknownDeviceError
        For an unknown platform or a bad ``num_devices``.
    XlaRuntimeError
        When PJRT fails to create the client.

    Maps to ``xla_client.make_cpu_client(num_devices=...)`` or ``make_c_api_client(plugin)``.
    """
    if not isinstance(platform, str):
        raise UnknownDeviceError(f"client: platform must be a string such as 'cpu', got {platform!r}")
    if num_devices is not None:
        try:
            n = None if isinstance(num_devices, bool) else operator.index(num_devices)  # numpy ints too
        except TypeError:
            n = None
        if n is None or not 1 <= n <= MAX_CPU_DEVICES:
            raise UnknownDeviceError(
                f"client: num_devices must be an int in [1, {MAX_CPU_DEVICES}] or None, got {show(num_devices)}"
            )
        num_devices = n
    p = _canonical_platform(platform)
    with _lock:
        if not cached and (p == "cpu" or num_devices is None):
            return _new_client(p, num_devices)
        default = _defaults.get(p)
        if default is None:
            default = _new_client(p, None, adopt=True)
            default = _defaults.setdefault(p, default)  # (a plugin's load may have set it)
        if num_devices is None or num_devices == len(default._local):
            return default if cached else _new_client(p, None)
        if p != "cpu":
            raise UnknownDeviceError(
                f"client({platform!r}, num_devices={num_devices}): the {p} plugin has "
                f"{len(default._local)} devices and cannot be given another count"
            )
        c = _clients.get((p, num_devices))
        if c is None:
            c = _clients[(p, num_devices)] = _new_client(p, num_devices)
        return c


def devices(platform: str | None = None) -> list[Device]:
    """The devices of ``platform``'s default client.

    ``None`` means the default platform: the first plugin added with :func:`load_pjrt_plugin`,
    else ``"cpu"``. Under ``xs.distributed.initialize`` these are the devices of every process
    (global); :func:`local_devices` lists this process's own.
    """
    return client(platform if platform is not None else _default_platform()).devices()


def local_devices(platform: str | None = None) -> list[Device]:
    """The devices of ``platform``'s default client that this process addresses.

    The same as :func:`devices` in a single process; under ``xs.distributed.initialize`` only
    this process's devices (PJRT ``addressable_devices``).
    """
    return client(platform if platform is not None else _default_platform()).local_devices()


def default_device() -> Device:
    """The first device of this process on the default platform's default client."""
    global _default_device
    d = _default_device
    if d is None:
        d = _default_device = client(_default_platform()).default_device
    return d


def _install_distributed(jax_client: Any) -> Client:
    """Make the multi-process CPU client the default ``"cpu"`` client (``xs.distributed``)."""
    global _default_device
    with _lock:
        c = Client._make(jax_client, "cpu")
        _defaults["cpu"] = c
        for key in [k for k in _clients if k[0] == "cpu"]:
            del _clients[key]
        _default_device = None
        return c


def _uninstall_distributed(c: Client) -> None:
    """Forget the multi-process client (after ``xs.distributed.shutdown``): the next use of
    ``"cpu"`` makes a single-process client again."""
    global _default_device
    with _lock:
        if _defaults.get("cpu") is c:
            del _defaults["cpu"]
            _default_device = None


def _single_process_plugin_clients() -> list[str]:
    """The platforms whose plugin clients (TPU, GPU...) this process has made: made before
    ``xs.distributed.initialize``, each is a client of this host alone, which the job cannot join."""
    with _lock:
        return sorted({c.name for c in (*_defaults.values(), *_clients.values()) if c.name != "cpu"})


# -- the multi-process job (xs.distributed) -----------------------------------------------------------
DEFAULT_HEARTBEAT_TIMEOUT: Final = 30.0
"""Seconds of silence after which the coordination service declares a process gone (``xs.distributed``)."""
GLOO_RENDEZVOUS_TIMEOUT: Final = 30.0  # fixed inside jaxlib 0.10.2's gloo collectives


class _Job(Protocol):
    """What an execution needs of the multi-process job this process is in (``xs.distributed``'s state)."""

    process_id: int
    num_processes: int
    heartbeat_timeout: float
    broken: str | None  # why the collectives can no longer be used


_job: _Job | None = None


def _set_job(job: _Job | None) -> None:
    """``xs.distributed.initialize`` sets its state here, ``shutdown`` clears it."""
    global _job
    _job = job


def _execution_failed(name: str, e: XlaRuntimeError) -> DistributedError:
    """The error for an execution of a multi-process program that failed: say what it means."""
    msg = str(e)
    st = _job
    why = "another process died or left" if "Gloo" in msg or "peer" in msg or "Connection" in msg else "it failed"
    if "timed out" in msg and "Gloo" in msg:
        why = ("another process died or left, or its host became unreachable (silent for "
               f"{st.heartbeat_timeout if st is not None else DEFAULT_HEARTBEAT_TIMEOUT:g} s)")
    if "GetKeyValue() timed out" in msg or "context initialization failed" in msg:
        why = f"another process did not take part within {GLOO_RENDEZVOUS_TIMEOUT:g} s (it died or left)"
    where = f"process {st.process_id} of {st.num_processes}: " if st is not None else ""
    err = DistributedError(
        f"{where}executing {name!r} across processes failed because {why}; this process's collectives "
        f"cannot be used again: call xs.distributed.shutdown() and exit [{msg}]"
    )
    if st is not None and st.broken is None:
        st.broken = str(err)
    return err


# -- live arrays ----------------------------------------------------------------------------------------
# Every DeviceArray made in this process, as weak references, oldest first: runtime.array appends each
# new one (and prunes the list as it grows); Device.live_buffers reads them (jaxlib's own live-buffer
# list is deprecated and empty).
_live: list[weakref.ref[DeviceArray]] = []


def live_arrays(device: Device | None = None) -> list[DeviceArray]:
    """DeviceArrays of this process that are alive and not deleted (on ``device``, or all),
    newest first. xlasdk tracks them with weak references; the list does not keep them alive."""
    out = []
    for r in reversed(_live):
        a = r()
        if a is not None and a._arr is not None and (device is None or a._device == device):
            out.append(a)
    _live[:] = [r for r in _live if (a := r()) is not None and a._arr is not None]
    return out


def load_pjrt_plugin(
    name: str, path: str | os.PathLike[str], *, options: Mapping[str, Any] | None = None
) -> Client:
    """Add a PJRT plugin (CUDA, ROCm, TPU, another CPU backend) from its shared library.

    Parameters
    ----------
    name:
        The platform name to register it under (``"cuda"``, ``"tpu"``...); :func:`client` and
        device strings (``"cuda:0"``) then use this name.
    path:
        Path of the plugin library exporting ``GetPjrtApi`` (e.g. ``xla_cuda_plugin.so``).
    options:
        Client creation options passed to the plugin. For ``"cuda"``/``"rocm"`` the default is
        jaxlib's GPU options read from ``XLA_PYTHON_CLIENT_*`` environment variables.

    Returns
    -------
    Client
        The plugin's client (also returned later by ``xs.client(name)``). Loading the same
        name and path again returns the same client.

    Raises
    ------
    FormatError
        If ``path`` is not a file.
    UnknownDeviceError
        For an invalid name, or a name already loaded from another path.
    PluginError
        (an ``XlaRuntimeError``) When the library cannot be loaded (not a shared library, no
        ``GetPjrtApi``, a missing dependency such as the CUDA runtime), its PJRT C API version
        does not match jaxlib's, or its client cannot be created (no GPU...).

    Installed plugins (``jax-cuda12-pjrt``...) and ``PJRT_NAMES_AND_LIBRARY_PATHS`` need no call:
    ``xs.client("cuda")`` finds and loads them (:mod:`xlasdk.runtime.plugins`).

    Maps to ``xla_client.load_pjrt_plugin_dynamically`` and ``make_c_api_client``. A GPU
    plugin needs its CUDA/ROCm runtime libraries loadable (installed system-wide or preloaded).
    """
    global _default_device
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise UnknownDeviceError(f"load_pjrt_plugin: name must be an identifier such as 'cuda', got {name!r}")
    key = name.lower()
    if key in ("cpu", "host"):
        raise UnknownDeviceError(
            "load_pjrt_plugin: 'cpu' is the built-in client; register a CPU plugin under another name"
        )
    spath = os.fspath(path)
    if not os.path.isfile(spath):
        raise FormatError(f"load_pjrt_plugin({name!r}): no such file: {spath}")
    real = os.path.realpath(spath)
    with _lock:
        if key in _plugins:
            prev = _plugins[key][0]
            if prev != real:
                raise UnknownDeviceError(f"load_pjrt_plugin: {name!r} is already loaded from {prev}")
            return client(key)
        failed = _failed_plugins.get(key)
        if failed is not None:
            raise PluginError(f"{failed} (an earlier attempt in this process; restart to retry)")
        opts: dict[str, Any] | None = dict(options) if options is not None else None
        if opts is None and key in _GPU_ALIASES:
            opts = pjrt.gpu_plugin_options() or None
        if pjrt.plugin_loaded(key):  # JAX (or another framework) loaded it: share it, and its client
            return _adopt_loaded_plugin(key, opts, real)
        from .plugins import explain_load_error, preload_gpu_libraries

        preload_gpu_libraries(key)
        try:
            if key == "tpu":
                from .._jaxlib import tpu
                from .accelerators import tpu_chips

                tpu.ensure_plugin(real, chips_present=tpu_chips()[0] > 0)
            else:
                pjrt.load_plugin(key, real)
        except XlaRuntimeError as e:
            err = explain_load_error(key, real, str(e))
            if pjrt.plugin_loaded(key):  # loaded but not initialized: jaxlib keeps the name
                _failed_plugins[key] = err
            raise err from e
        _plugins[key] = (real, opts)
        _default_device = None
        return client(key)


def _adopt_loaded_plugin(key: str, options: dict[str, Any] | None, path: str | None = None) -> Client:
    """The client of a plugin another framework loaded in this process: JAX's own client when JAX
    has made it (one client per platform per process, arrays shared), else a client of ours on it."""
    global _default_device
    from .._jaxlib.jax_bridge import jax_backend

    with _lock:
        _plugins[key] = (path or "(loaded by another framework in this process)", options)
        _default_device = None
        shared = jax_backend(key)
        if shared is not None and key not in _defaults:
            _defaults[key] = Client._make(shared, key)
        return client(key)


def _resolve_device(device: Device | str | int | None) -> Device:
    """A :class:`Device` from a Device, a ``"cpu:0"`` / ``"cpu"`` string, an id or None.

    ``None`` is :func:`default_device`; an int is a device id of the default platform.

    Raises
    ------
    UnknownDeviceError
        For an unknown platform or device id, or a value of another type.
    """
    if isinstance(device, Device):
        return device
    if device is None:
        return default_device()
    if isinstance(device, str):
        m = _DEVICE_RE.match(device)
        if m is None:
            raise UnknownDeviceError(f"device {device!r} is not of the form 'cpu:0' or 'cpu'")
        c = client(m.group(1))
        if m.group(2) is None:
            return c.default_device
        try:
            return c.device(int(m.group(2)))
        except UnknownDeviceError as e:
            hint = ""
            if c.platform == "cpu":
                hint = (
                    "; devices of xs.client('cpu', num_devices=N) are passed as Device objects, or set "
                    "XLA_FLAGS=--xla_force_host_platform_device_count=N before the first use"
                )
            raise UnknownDeviceError(f"unknown device {device!r}: {e}{hint}") from None
    if isinstance(device, int) and not isinstance(device, bool):
        return client(_default_platform()).device(device)
    raise UnknownDeviceError(
        f"device must be an xs.Device, a 'cpu:0'-style string, an int id or None; got {type(device).__name__}"
    )


class JaxlibVersion(NamedTuple):
    """The jaxlib under xlasdk: ``release`` (``"0.12.0.1"``) and ``xla_client`` (the extension
    version that JAX gates on: 467 is 0.10.2, 505 is 0.12.0.1)."""

    release: str
    xla_client: int


def jaxlib_version_info() -> JaxlibVersion:
    """The running jaxlib's release and extension version (supported: 0.10.2 through 0.12.x).

    Useful to ask "did this change between jaxlib releases?": run the same script in two
    environments and compare. Serialized executables and compile-cache entries record both and
    are refused (cache entries: recompiled) under another jaxlib.
    """
    return JaxlibVersion(pjrt.JAXLIB_VERSION, pjrt.XLA_CLIENT_VERSION)
