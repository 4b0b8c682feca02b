"""Several processes, several hosts: XLA's distributed runtime and gloo CPU collectives.

Every process of a job calls :func:`initialize` once, before its first computation; then
``xs.client("cpu")`` is one client spanning all processes: :func:`xlasdk.devices` lists the
devices of every process (the same list everywhere), :func:`xlasdk.local_devices` this
process's own. A program compiled for several devices (``CompileOptions(num_replicas=...)``)
is compiled by every process, and each runs it with the arguments of its own devices
(``exe.execute_replicated``), getting back its own devices' results; the cross-process
collectives (``AllReduce``, ``AllGather``...) go over TCP (gloo).

::

    import xlasdk as xs
    xs.distributed.initialize()           # reads XLASDK_COORDINATOR, _NUM_PROCESSES, _PROCESS_ID
    print(xs.process_index(), xs.process_count(), xs.devices(), xs.local_devices())
    ...
    xs.distributed.shutdown()             # also run at exit

``python -m xlasdk.launch -n 2 script.py`` (or ``xlasdk launch``) runs a script in N local
processes with those variables set.

Failures (each gives a :class:`~xlasdk.DistributedError`, never a hang or an abort):

* processes that disagree (on ``num_processes``, on the job's devices, or two with one
  ``process_id``): every process checks at join, through the coordinator's key-value store, and
  :func:`initialize` fails in every process, naming the disagreement (at once once all have
  joined; at most ``join_timeout``). Such a job never runs. A repeated ``process_id`` that joins
  after the job formed is refused alone (see the limits below);
* a process that never joins: :func:`initialize` fails in every other process after
  ``join_timeout`` seconds (about; at most ``join_timeout + 10``);
* a process that dies: an execution whose collectives wait for it fails at once when it dies
  mid-run, or after 30 s (gloo's fixed rendezvous timeout) when it died before the program's
  first collective. The collectives of the survivors cannot be used again (jaxlib keeps the
  error): shut down and exit. :func:`shutdown` then returns at once (within 2 s);
* a host that becomes unreachable (its link or its power goes): the others' execution fails after
  about ``heartbeat_timeout`` seconds (at most ``heartbeat_timeout + 5``): xlasdk turns on TCP
  keepalive with that timeout on the collectives' connections to the job's hosts (Linux), which
  gloo alone would wait on forever;
* process 0 may die too: the coordinator (XLA's distributed runtime service) runs in a process of
  its own, started by process 0 (or by the launcher) and kept until the others have left.

XLA's own multi-line log of the coordination service stays off stderr (the errors name its
reason in one line); ``verbose=True`` or ``XLASDK_DISTRIBUTED_VERBOSE=1`` lets it through.

Limits (XLA's, measured with jaxlib 0.10.2 and 0.12): a process that loses the coordinator (the
coordinator's host goes down, or its own link does) is ended by XLA (SIGABRT); nothing in the
process can catch that. A second process with the same ``process_id`` that joins after the job
formed replaces the first at the coordinator, and XLA then ends the first the same way. A process
whose ``process_id`` is not below process 0's ``num_processes`` is refused by XLA's coordinator
before it can tell the others (its client cannot reach the key-value store), so it is refused
alone: the others, who agree among themselves, form their job (process 0 with ``num_processes=1``
beside a process 1 of 2 runs alone). A second coordinator on a port where one listens is refused
when it starts (gRPC would share the port and split the job's connections between the two).

Maps to jaxlib's ``get_distributed_runtime_service`` / ``get_distributed_runtime_client``,
``make_gloo_tcp_collectives`` and ``make_cpu_client(distributed_client=..., node_id=...,
num_nodes=..., collectives=...)``, as ``jax.distributed.initialize`` does on CPU.
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final

from ._jaxlib import distributed as _dist
from .errors import DistributedError
from .runtime import device as _device

__all__ = [
    "initialize",
    "shutdown",
    "is_initialized",
    "process_index",
    "process_count",
    "barrier",
    "DistributedError",
    "ENV_COORDINATOR",
    "ENV_NUM_PROCESSES",
    "ENV_PROCESS_ID",
    "ENV_LOCAL_DEVICE_COUNT",
    "ENV_START_COORDINATOR",
]

ENV_COORDINATOR: Final = "XLASDK_COORDINATOR"
ENV_NUM_PROCESSES: Final = "XLASDK_NUM_PROCESSES"
ENV_PROCESS_ID: Final = "XLASDK_PROCESS_ID"
ENV_LOCAL_DEVICE_COUNT: Final = "XLASDK_LOCAL_DEVICE_COUNT"
ENV_START_COORDINATOR: Final = "XLASDK_START_COORDINATOR"  # "0": the launcher runs it
ENV_JOIN_TIMEOUT: Final = "XLASDK_JOIN_TIMEOUT"
ENV_HEARTBEAT_TIMEOUT: Final = "XLASDK_HEARTBEAT_TIMEOUT"
ENV_SHUTDOWN_TIMEOUT: Final = "XLASDK_SHUTDOWN_TIMEOUT"
ENV_GLOO_INTERFACE: Final = "XLASDK_GLOO_INTERFACE"
#: seconds process 0 waits for the coordinator it starts to listen, at least (its own interpreter
#: and jaxlib import: seconds on a loaded machine); a join_timeout above it is used instead
COORDINATOR_STARTUP_TIMEOUT: Final = 30.0
ENV_VERBOSE: Final = "XLASDK_DISTRIBUTED_VERBOSE"  # "1": let XLA's coordination-service log through

DEFAULT_JOIN_TIMEOUT: Final = 120.0
DEFAULT_SHUTDOWN_TIMEOUT: Final = 30.0
AGREE_SETTLE: Final = 0.2  # seconds every process keeps listening for a refusal once its checks passed
_POLL: Final = 0.02  # seconds between two looks at the key-value store
_LEAVE_MARGIN: Final = 0.1  # seconds process 0 gives the others' disconnection before stopping the coordinator
_KEYS: Final = "xlasdk/join"  # the agreement's keys in the coordinator's key-value store


@dataclass
class _State:
    address: str
    num_processes: int
    process_id: int
    join_timeout: float
    heartbeat_timeout: float
    shutdown_timeout: float
    dc: Any
    client: _device.Client
    coordinator: _dist.CoordinatorProcess | None
    verbose: bool = False
    guard: _dist.LinkGuard | None = None
    broken: str | None = None  # why the collectives can no longer be used
    barriers: dict[str, int] = field(default_factory=dict)


_lock: Final = threading.RLock()
_state: _State | None = None
_failing = False  # an uncaught exception is ending the process
_hooked = False


# -- argument handling ------------------------------------------------------------------------------
def _env_int(name: str) -> int | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise DistributedError(f"initialize: ${name} must be an integer, got {raw!r}") from None


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise DistributedError(f"initialize: ${name} must be a number of seconds, got {raw!r}") from None


def _check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise DistributedError(f"initialize: {name} must be an int >= {low}, got {value!r}")
    return value


def _check_seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value != value:
        raise DistributedError(f"initialize: {name} must be a positive number of seconds, got {value!r}")
    return float(value)


def _split_address(address: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) -> (host, port)."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise DistributedError(
            f"initialize: coordinator_address must be 'host:port' such as '10.0.0.1:1234', got {address!r}"
        )
    return host.strip("[]"), int(port)


# -- initialize / shutdown ----------------------------------------------------------------------------
def initialize(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    local_device_count: int | None = None,
    join_timeout: float | None = None,
    heartbeat_timeout: float | None = None,
    shutdown_timeout: float | None = None,
    start_coordinator: bool | None = None,
    coordinator_bind_address: str | None = None,
    gloo_interface: str | None = None,
    verbose: bool | None = None,
) -> None:
    """Join this process to a job of ``num_processes`` processes; call once in each, first.

    Parameters
    ----------
    coordinator_address:
        ``"host:port"`` of the coordinator, the same in every process: the host of process 0 and
        a free port there (process 0 starts the coordinator on it). Default: ``$XLASDK_COORDINATOR``.
    num_processes:
        How many processes take part. Default: ``$XLASDK_NUM_PROCESSES``.
    process_id:
        This process's index, ``0 .. num_processes - 1``, unique. Default: ``$XLASDK_PROCESS_ID``.
    local_device_count:
        CPU devices in this process (default ``$XLASDK_LOCAL_DEVICE_COUNT``, else 1). Device
        ids are ``process_index * 2048 + local index``.
    join_timeout:
        Seconds to wait for every process to join (default ``$XLASDK_JOIN_TIMEOUT``, else
        120). A process that has not joined by then makes :func:`initialize` fail everywhere.
    heartbeat_timeout:
        Seconds of silence after which the coordinator counts a process as dead (default
        ``$XLASDK_HEARTBEAT_TIMEOUT``, else 30).
    shutdown_timeout:
        Seconds :func:`shutdown` waits for the other processes to finish (default
        ``$XLASDK_SHUTDOWN_TIMEOUT``, else 30).
    start_coordinator:
        Whether process 0 starts the coordinator (default: yes, unless
        ``$XLASDK_START_COORDINATOR`` is ``0``, as the launcher sets, which runs it itself).
    coordinator_bind_address:
        Where process 0's coordinator listens (default ``[::]:PORT``: every interface, the port of
        ``coordinator_address``).
    gloo_interface:
        The network interface the CPU collectives (gloo) use between hosts, e.g. ``"eth0"``
        (default ``$XLASDK_GLOO_INTERFACE``, else the interface of this host's name). Set it when the
        host name resolves to a loopback address (``127.0.1.1`` in many ``/etc/hosts``).
    verbose:
        Let XLA's own log lines about the coordination service (multi-line errors when a join or
        a shutdown fails) through to stderr (default ``$XLASDK_DISTRIBUTED_VERBOSE`` is ``1``, else
        no: the errors raised name the reason in one line).

    Raises
    ------
    DistributedError
        For missing or invalid arguments, when already initialized, when this process has already
        made a TPU's (or another plugin's) client, which cannot join a job, when the coordinator cannot
        start (port taken), when not every process joined within ``join_timeout`` seconds (also: a
        wrong address), or when the processes disagree: on ``num_processes``, on the job's devices,
        or two processes with one ``process_id``. Every process checks this at join through the
        coordinator's key-value store, and every process of a job that disagrees raises (within
        ``join_timeout`` seconds; at once when all have joined), naming the disagreement: such a job
        never runs. A repeated ``process_id`` is refused in the process that came second; the
        others raise too when they can still see it (it joined with them), else they formed a job
        without it (which agrees; XLA then ends the process it displaced: see the module's limits).

    After it, ``xs.client("cpu")``, ``xs.devices()`` and device strings use the multi-process
    client; devices obtained before belong to a separate single-process client. A TPU (or other
    plugin) client made after it joins the job as JAX's does: the plugin gets the distributed
    runtime client (``make_c_api_client("tpu", options, distributed_client)``), and its devices are
    those of every host of the slice (see :mod:`xlasdk.launch` for a multi-host TPU run). :func:`shutdown`
    runs at exit. Maps to jaxlib's distributed runtime service and client (``recoverable=True``)
    and ``make_cpu_client(distributed_client=..., collectives=make_gloo_tcp_collectives(...))``.
    """
    global _state
    with _lock:
        if _state is not None:
            raise DistributedError(
                f"initialize: already initialized (process {_state.process_id} of {_state.num_processes}, "
                f"coordinator {_state.address}); call xs.distributed.shutdown() first"
            )
        made = _device._single_process_plugin_clients()
        if made:  # as JAX's: its backends must not exist yet
            raise DistributedError(
                f"initialize: must be called before the first use of a TPU or other accelerator: this process "
                f"has already made its {', '.join(repr(m) for m in made)} client, which belongs to this host "
                f"alone and cannot join the job (xs.devices(), xs.client(), a device string, xs.compile and "
                f"xs.device_put make it); call xs.distributed.initialize() first in every process"
            )
        address = coordinator_address if coordinator_address is not None else os.environ.get(ENV_COORDINATOR)
        n = num_processes if num_processes is not None else _env_int(ENV_NUM_PROCESSES)
        pid = process_id if process_id is not None else _env_int(ENV_PROCESS_ID)
        missing = [
            f"{arg} (or ${env})"
            for arg, env, v in (
                ("coordinator_address", ENV_COORDINATOR, address),
                ("num_processes", ENV_NUM_PROCESSES, n),
                ("process_id", ENV_PROCESS_ID, pid),
            )
            if v is None
        ]
        if missing:
            raise DistributedError(
                "initialize: missing " + ", ".join(missing)
                + "; run under 'python -m xlasdk.launch -n N script.py' or pass them"
            )
        assert address is not None and n is not None and pid is not None
        if not isinstance(address, str):
            raise DistributedError(f"initialize: coordinator_address must be a 'host:port' string, got {address!r}")
        host, port = _split_address(address.strip())
        n = _check_int("num_processes", n, 1)
        pid = _check_int("process_id", pid, 0)
        if pid >= n:
            raise DistributedError(f"initialize: process_id {pid} is not below num_processes {n}")
        ldc = local_device_count if local_device_count is not None else _env_int(ENV_LOCAL_DEVICE_COUNT)
        if ldc is not None:
            ldc = _check_int("local_device_count", ldc, 1)
        join = _check_seconds(
            "join_timeout",
            join_timeout if join_timeout is not None else _env_float(ENV_JOIN_TIMEOUT, DEFAULT_JOIN_TIMEOUT),
        )
        beat = _check_seconds(
            "heartbeat_timeout",
            heartbeat_timeout if heartbeat_timeout is not None
            else _env_float(ENV_HEARTBEAT_TIMEOUT, _device.DEFAULT_HEARTBEAT_TIMEOUT),
        )
        down = _check_seconds(
            "shutdown_timeout",
            shutdown_timeout if shutdown_timeout is not None
            else _env_float(ENV_SHUTDOWN_TIMEOUT, DEFAULT_SHUTDOWN_TIMEOUT),
        )
        if start_coordinator is None:
            start_coordinator = os.environ.get(ENV_START_COORDINATOR, "1").strip() != "0"
        if verbose is None:
            verbose = os.environ.get(ENV_VERBOSE, "").strip() == "1"
        who = f"process {pid} of {n}"
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

        coordinator: _dist.CoordinatorProcess | None = None
        if pid == 0 and start_coordinator:
            bind_host, bind_port = (
                _split_address(coordinator_bind_address) if coordinator_bind_address is not None else ("::", port)
            )
            try:
                coordinator = _dist.start_coordinator(
                    bind_host, bind_port, n,
                    heartbeat_timeout=beat, register_timeout=join, shutdown_timeout=down,
                    # its start (an interpreter and jaxlib) is not the join: a short join_timeout on a
                    # loaded machine must not kill a coordinator that is still importing
                    linger=down + beat + 10.0, startup_timeout=max(join, COORDINATOR_STARTUP_TIMEOUT),
                )
            except DistributedError as e:
                raise DistributedError(f"initialize: {who}: {e}") from None
        dc = None
        t0 = time.monotonic()
        try:
            dc = _dist.make_client(
                address, pid, join_timeout=join, heartbeat_timeout=beat, shutdown_timeout=down
            )
            with _dist.quiet(verbose) as log:
                why = _dist.connect(dc)
            if why is not None:
                waited = time.monotonic() - t0
                unreachable = _unreachable(host, port) if coordinator is None else None
                if coordinator is not None:  # nobody is connected to it now: it can go
                    coordinator.stop()
                    coordinator = None
                with _dist.quiet(verbose) as log_down:  # jaxlib logs the cause when the client leaves
                    _dist.client_shutdown(dc)
                dc = None
                reason = log.reason() or log_down.reason() or why
                if "Unexpected task" in reason:
                    raise DistributedError(
                        f"initialize: {who}: the coordinator at {address} refused process_id {pid}: its job has "
                        f"fewer processes (the processes disagree on num_processes, or process_id is out of range) "
                        f"[jaxlib: {reason}]"
                    )
                if "ALREADY_EXISTS" in reason:
                    raise DistributedError(
                        f"initialize: {who}: process_id {pid} is taken by two processes: another process joined "
                        f"the coordinator at {address} with it; give each process its own process_id in "
                        f"0 .. {n - 1} [jaxlib: {reason}]"
                    )
                if unreachable is not None:
                    raise DistributedError(
                        f"initialize: {who}: the coordinator at {address} was not reachable for {waited:.0f} s "
                        f"(join_timeout={join:g} s; now: {unreachable}): process 0 starts it (or the launcher); "
                        f"check the address and that process 0 runs [jaxlib: {reason}]"
                    )
                raise DistributedError(
                    f"initialize: {who}: not every process joined the coordinator at {address} within "
                    f"{waited:.0f} s (join_timeout={join:g} s): a process did not start or crashed before "
                    f"initialize(), or the processes disagree on num_processes or process ids [jaxlib: {reason}]"
                )
            agreement = _Agreement(dc, n, pid, t0 + join, _dist.source_address(host, port))
            try:
                agreement.processes()
                interface = gloo_interface if gloo_interface is not None else os.environ.get(ENV_GLOO_INTERFACE)
                jclient = _dist.make_cpu_client(dc, pid, n, ldc, join, interface or None)
                agreement.devices(jclient)
            except _Refused as e:
                raise DistributedError(f"initialize: {who}: {e}; the job does not run") from None
        except BaseException:
            if dc is not None:
                with _dist.quiet(verbose):
                    _dist.client_shutdown(dc)
            if coordinator is not None:  # others may be connected: keep it up a while for them
                coordinator.release()
            raise
        client = _device._install_distributed(jclient)
        guard = _dist.LinkGuard(agreement.addresses, port, beat)
        guard.start()
        _state = _State(address, n, pid, join, beat, down, dc, client, coordinator, verbose, guard)
        _device._set_job(_state)  # what a failed execution across processes reports (and marks broken)
        _hook_exit()


def shutdown() -> None:
    """Leave the job: wait for the other processes (at most ``shutdown_timeout`` seconds),
    disconnect, and (process 0) stop the coordinator once everyone has left.

    Call it in every process when done; it also runs at exit (``atexit``), and a second call
    does nothing. Afterwards ``xs.client("cpu")`` is a single-process client again.

    After an execution raised :class:`~xlasdk.DistributedError` (a process died or left), or when
    an uncaught exception ends the process, it does not wait for the others: it returns within
    about 2 s (process 0 then leaves the coordinator running for the others, for at most
    ``shutdown_timeout + heartbeat_timeout + 10`` seconds).

    Never raises: a process that does not arrive in time is left behind (the coordinator stays up
    for it as above). Maps to jaxlib's ``wait_at_barrier`` + ``DistributedRuntimeClient.shutdown``
    + the service's ``shutdown``.
    """
    global _state
    with _lock:
        st = _state
        if st is None:
            return
        _state = None
        _device._set_job(None)
        if st.guard is not None:
            st.guard.stop()
        deadline = time.monotonic() + st.shutdown_timeout
        with _dist.quiet(st.verbose):
            # Wait for the others only when they can all come: not after a failure.
            together = st.broken is None and not _failing and st.num_processes > 1
            late = together and _dist.barrier(st.dc, "xlasdk/shutdown", st.shutdown_timeout) is not None
            together = together and not late
            alone = st.num_processes == 1
            if together and st.coordinator is None:
                try:  # tell process 0 (which stops the coordinator) that this process is leaving
                    _dist.key_value_claim(st.dc, f"xlasdk/left/{st.process_id}", "1")
                except DistributedError:
                    pass
            if together and st.coordinator is not None:
                alone = _others_left(st, deadline)
            _dist.client_shutdown(st.dc)
        if late:
            _warn(f"shutdown: not every process reached shutdown within {st.shutdown_timeout:g} s; leaving")
        _device._uninstall_distributed(st.client)
        if st.coordinator is not None:
            if alone:
                st.coordinator.stop()
            else:  # others may still be connected: it lingers for them, then exits
                st.coordinator.release()


# -- the processes' agreement -------------------------------------------------------------------------
class _Refused(Exception):
    """A disagreement between the processes (its text names it), or another process's refusal."""


def _describe(view: dict[str, Any]) -> str:
    return f"process {view.get('process_id')} (host {view.get('host')}, pid {view.get('pid')})"


def _parse(raw: str, key: str) -> dict[str, Any]:
    try:
        view = json.loads(raw)
    except ValueError:
        view = None
    if not isinstance(view, dict):
        raise _Refused(f"the coordinator holds {raw[:200]!r} under {key!r}: not an xlasdk process's report "
                       "(another program, or another xlasdk version, uses this coordinator)")
    return view


class _Agreement:
    """Every process of a job checks, through the coordinator's key-value store, that they agree.

    Each process publishes what it believes (``num_processes``, its ``process_id``, later the job's
    devices) under its own key and reads every other's; a disagreement found by any process is written
    under one ``refused`` key, which every process watches, so that all of them raise. The checks run
    in every process over the same published values, so they reach the same verdict; only a repeated
    ``process_id`` is seen by one side (the process whose key was taken), hence the ``refused`` key and
    the short settle time (:data:`AGREE_SETTLE`) each process listens for it once its own checks passed.
    """

    def __init__(self, dc: Any, n: int, pid: int, deadline: float, address: str | None) -> None:
        self.dc, self.n, self.pid, self.deadline = dc, n, pid, deadline
        self.me: dict[str, Any] = {
            "token": secrets.token_hex(8), "num_processes": n, "process_id": pid,
            "host": socket.gethostname(), "pid": os.getpid(), "address": address,
        }
        self.addresses: set[str] = set()  # every process's address towards the coordinator

    def refuse(self, why: str) -> _Refused:
        """Tell every process why the job is refused (the first reason stays) and return the error."""
        try:
            _dist.key_value_claim(self.dc, f"{_KEYS}/refused", why)
        except DistributedError:
            pass  # the others then find this process's report missing
        return _Refused(why)

    def _check_refused(self) -> None:
        why = _dist.key_value_try_get(self.dc, f"{_KEYS}/refused")
        if why is not None:
            raise _Refused(f"another process refused the job: {why}")

    def gather(self, stage: str, value: dict[str, Any], what: str) -> dict[int, dict[str, Any]]:
        """Publish ``value`` under ``stage/<process_id>`` and wait for every process's.

        Raises _Refused for a repeated process id, a refusal, or a process missing at the deadline.
        """
        mine = dict(value, token=self.me["token"], process_id=self.pid)
        first = _dist.key_value_claim(self.dc, f"{_KEYS}/{stage}/{self.pid}", json.dumps(mine))
        if first is not None:
            other = _parse(first, f"{_KEYS}/{stage}/{self.pid}")
            raise self.refuse(
                f"process_id {self.pid} is taken by two processes: {_describe(other)} and {_describe(self.me)}; "
                f"give each process its own process_id in 0 .. {self.n - 1}"
            )
        views: dict[int, dict[str, Any]] = {self.pid: mine}
        while True:
            self._check_refused()
            for key, raw in _dist.key_value_dir(self.dc, f"{_KEYS}/{stage}").items():
                k = key.rpartition("/")[2]
                if k.isdigit() and int(k) < self.n and int(k) not in views:
                    views[int(k)] = _parse(raw, key)
                    self.check(stage, views[int(k)])
            if len(views) == self.n:
                return views
            if time.monotonic() >= self.deadline:
                late = [k for k in range(self.n) if k not in views]
                raise self.refuse(
                    f"process(es) {late} did not report {what} within join_timeout (they failed or left)"
                )
            time.sleep(_POLL)

    def check(self, stage: str, view: dict[str, Any]) -> None:
        """Compare another process's report with this one's (the same comparison in every process)."""
        if stage == "process" and view.get("num_processes") != self.n:
            raise self.refuse("the processes disagree on num_processes: " + self._pair(view, "num_processes", "says"))
        if stage == "devices" and view.get("devices") != self.me.get("devices"):
            raise self.refuse("the processes disagree on the job's devices: " + self._pair(view, "devices", "sees"))

    def _pair(self, view: dict[str, Any], field: str, verb: str) -> str:
        """The two processes' values of ``field``, the lower process id first (the same text everywhere)."""
        a, b = sorted((view, self.me), key=lambda v: (str(v.get("process_id")).zfill(12), str(v.get("pid"))))
        return f"{_describe(a)} {verb} {a.get(field)}, {_describe(b)} {verb} {b.get(field)}"

    def settle(self) -> None:
        """Listen for a refusal a little longer (a process whose id was taken may be reporting it)."""
        end = min(self.deadline, time.monotonic() + AGREE_SETTLE)
        while True:
            self._check_refused()
            if time.monotonic() >= end:
                return
            time.sleep(_POLL)

    def processes(self) -> None:
        """Stage 1, before the devices are exchanged: ``num_processes`` and unique process ids."""
        views = self.gather("process", {k: self.me[k] for k in ("num_processes", "host", "pid", "address")},
                            "its process id")
        self.addresses = {str(v["address"]) for v in views.values() if v.get("address")}
        self.gather("checked", {}, "its checks")
        self.settle()

    def devices(self, jclient: Any) -> None:
        """Stage 2, after the exchange: every process sees the same devices, each its own ``local`` ones,
        and the processes that own them are exactly ``0 .. num_processes - 1``."""
        every = [[int(d.id), _dist.device_process_index(d)] for d in _dist.client_global_devices(jclient)]
        self.me["devices"] = every
        owners = sorted({p for _, p in every})
        if owners != list(range(self.n)):
            raise self.refuse(
                f"the job's devices belong to processes {owners}, not to 0 .. {self.n - 1} "
                f"({_describe(self.me)} sees devices {every})"
            )
        self.gather("devices", {"devices": every}, "its devices")
        self.settle()


def _others_left(st: _State, deadline: float) -> bool:
    """Whether every other process said it is leaving (``xlasdk/left/<id>``) before ``deadline``;
    then a moment more for their disconnection to reach the coordinator (the key comes just before)."""
    waiting = set(range(st.num_processes)) - {st.process_id}
    while waiting:
        try:
            waiting -= {int(k.rpartition("/")[2]) for k in _dist.key_value_dir(st.dc, "xlasdk/left")}
        except (DistributedError, ValueError):
            return False
        if waiting:
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL)
    time.sleep(_LEAVE_MARGIN)
    return True


def _unreachable(host: str, port: int) -> str | None:
    """Why a TCP connection to the coordinator fails now, or None when it succeeds."""
    try:
        with socket.create_connection((host, port), timeout=2.0):
            return None
    except OSError as e:
        return e.strerror or str(e)


def _warn(msg: str) -> None:
    try:
        sys.stderr.write(f"xlasdk.distributed: {msg}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _hook_exit() -> None:
    """Shut down at exit; skip the final wait for the others when an exception ends the process."""
    global _hooked
    if _hooked:
        return
    _hooked = True
    previous = sys.excepthook

    def excepthook(t: type[BaseException], v: BaseException, tb: TracebackType | None) -> None:
        global _failing
        _failing = True
        previous(t, v, tb)

    sys.excepthook = excepthook
    atexit.register(shutdown)


# -- queries --------------------------------------------------------------------------------------------
def is_initialized() -> bool:
    """Whether :func:`initialize` has run (and :func:`shutdown` not yet)."""
    return _state is not None


def process_index() -> int:
    """This process's index in the job (0 without :func:`initialize`)."""
    st = _state
    return st.process_id if st is not None else 0


def process_count() -> int:
    """The number of processes in the job (1 without :func:`initialize`)."""
    st = _state
    return st.num_processes if st is not None else 1


def barrier(name: str = "barrier", timeout: float = 60.0) -> None:
    """Wait until every process has called ``barrier(name)``, at most ``timeout`` seconds.

    Calling it several times with the same name is fine (each call is numbered).

    Raises
    ------
    DistributedError
        When not every process arrived in time, or without :func:`initialize`.

    Maps to the distributed runtime client's ``wait_at_barrier``.
    """
    st = _state
    if st is None:
        raise DistributedError("barrier: xs.distributed.initialize() has not been called")
    seconds = _check_seconds("timeout", timeout)
    k = st.barriers.get(name, 0)
    st.barriers[name] = k + 1
    why = _dist.barrier(st.dc, f"user/{name}/{k}", seconds)
    if why is not None:
        raise DistributedError(
            f"barrier {name!r}: process {st.process_id} of {st.num_processes}: not every process arrived "
            f"within {seconds:g} s [{why}]"
        )
