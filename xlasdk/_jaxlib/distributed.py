"""XLA's distributed runtime on top of jaxlib: the coordinator, clients, gloo collectives.

The only module that touches ``jaxlib``'s distributed runtime (``get_distributed_runtime_client``,
``make_gloo_tcp_collectives``, ``make_cpu_client(distributed_client=...)``); the service itself
runs in a separate process (``_coordinator.py``, started by :func:`start_coordinator`).

What keeps a failure in one process from aborting the others (jaxlib 0.10.2, measured, see
``shared/design/distributed-facts.md``):

* the service is created with ``recoverable=True``: a peer that dies is not reported to the
  others as a fatal error (without it every survivor is SIGABRTed after the heartbeat timeout);
* the service runs in its own process, which outlives every client (a client whose service goes
  away aborts);
* clients get a ``missed_heartbeat_callback``: jaxlib cannot call it (its argument has no Python
  converter) but with one set, a failing ``connect()`` raises (``std::bad_cast``) instead of
  aborting the process, so a peer that never joins gives an exception;
* every client calls ``shutdown()`` before its process exits (``xlasdk.distributed`` registers
  it with ``atexit``): a client destroyed without it aborts;
* no jaxlib call runs in a helper thread that could outlive the interpreter: such a thread aborts
  the process (``FATAL: exception not rethrown``) when its call returns during finalization.

Also here: the key-value store calls the processes' agreement uses, :func:`quiet` (XLA's log
lines to stderr kept for the error message), and :class:`LinkGuard` (keepalive on gloo's TCP
connections, so that a host that goes silent fails the collectives instead of hanging them).
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import re
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Final

from jaxlib import xla_client as _xc

from ..errors import DistributedError, XlaRuntimeError
from ._pjrt_base import _one_line

__all__ = [
    "CoordinatorProcess",
    "start_coordinator",
    "make_client",
    "connect",
    "make_cpu_client",
    "barrier",
    "client_shutdown",
    "key_value_claim",
    "key_value_try_get",
    "key_value_dir",
    "XlaLog",
    "quiet",
    "LinkGuard",
    "source_address",
    "device_process_index",
    "device_is_local",
    "client_process_index",
    "client_global_devices",
    "make_plugin_client",
]

_J: Final[Any] = importlib.import_module("jaxlib._jax")  # untyped extension module
_SCRIPT: Final = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_coordinator.py")


def _seconds(value: float) -> int:
    """jaxlib's service and client timeouts are whole seconds (at least 1)."""
    return max(1, int(math.ceil(value)))


# -- the coordinator process ------------------------------------------------------------------
class CoordinatorProcess:
    """A running coordinator (XLA distributed runtime service) in a child process."""

    def __init__(self, proc: subprocess.Popen[bytes], host: str, port: int) -> None:
        self._proc = proc
        self.host = host
        self.port = port

    @property
    def pid(self) -> int:
        return self._proc.pid

    def running(self) -> bool:
        return self._proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """Shut the service down now (every client must have shut down) and wait for the process."""
        self._send(b"stop\n")
        self._wait_or_kill(timeout)

    def release(self) -> None:
        """Let go without stopping: the service lingers (``--linger`` seconds), then exits."""
        stdin = self._proc.stdin
        if stdin is not None:
            try:
                stdin.close()
            except OSError:
                pass

    def kill(self) -> None:
        if self._proc.poll() is None:
            try:
                self._proc.kill()
            except OSError:
                pass
        self._wait_or_kill(5.0)

    def _send(self, data: bytes) -> None:
        stdin = self._proc.stdin
        if stdin is None:
            return
        try:
            stdin.write(data)
            stdin.flush()
            stdin.close()
        except OSError:  # it is gone already
            pass

    def _wait_or_kill(self, timeout: float) -> None:
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()


def start_coordinator(
    host: str,
    port: int,
    num_processes: int,
    *,
    heartbeat_timeout: float,
    register_timeout: float,
    shutdown_timeout: float,
    linger: float,
    startup_timeout: float = 60.0,
) -> CoordinatorProcess:
    """Start the distributed runtime service in a child process listening on ``host:port``.

    ``port=0`` picks a free port (``CoordinatorProcess.port`` tells which). Waits until it
    listens, at most ``startup_timeout`` seconds.

    Raises
    ------
    DistributedError
        When the service cannot start (address taken, unknown host...).
    """
    argv = [
        sys.executable, _SCRIPT, "--host", host, "--port", str(port), "--num-processes", str(num_processes),
        "--heartbeat-timeout", str(_seconds(heartbeat_timeout)),
        "--register-timeout", str(_seconds(register_timeout)),
        "--shutdown-timeout", str(_seconds(shutdown_timeout)),
        "--linger", repr(float(linger)),
    ]
    log = os.environ.get("XLASDK_COORDINATOR_LOG")
    err: Any = subprocess.DEVNULL
    if log:
        err = open(log, "ab")  # noqa: SIM115 - handed to the child
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, start_new_session=True,
            close_fds=True,
        )
    except OSError as e:
        raise DistributedError(f"could not start the coordinator process: {e}") from e
    finally:
        if err is not subprocess.DEVNULL:
            err.close()
    where = f"{host}:{port}" if port else f"{host} (a free port)"
    line = _read_line(proc, startup_timeout)
    if line.startswith("ready "):
        return CoordinatorProcess(proc, host, int(line.split()[1]))
    timed_out = line == "" and proc.poll() is None  # still starting: killed here, not crashed
    if proc.poll() is None:
        proc.kill()
    rc = proc.wait()
    if timed_out:
        raise DistributedError(f"the coordinator did not start listening on {where} within {startup_timeout:g} s")
    if line.startswith("error "):
        why = line[6:]
        if "Failed to start RPC server" in why:
            why = f"the address is taken or not on this host ({why})"
        raise DistributedError(f"the coordinator could not listen on {where}: {why}")
    if line == "":
        if rc is not None and rc < 0:
            raise DistributedError(
                f"the coordinator process crashed (signal {-rc}) while binding {where}: is the port taken?"
            )
    raise DistributedError(f"the coordinator process exited with code {rc} before listening on {where}")


def _read_line(proc: subprocess.Popen[bytes], timeout: float) -> str:
    out = proc.stdout
    assert out is not None
    deadline = time.monotonic() + timeout
    buf = b""
    with selectors.DefaultSelector() as sel:
        sel.register(out, selectors.EVENT_READ)
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                return ""
            chunk = os.read(out.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
    return buf.split(b"\n", 1)[0].decode("utf-8", "replace").strip()


# -- clients ------------------------------------------------------------------------------------
def _no_callback(*args: Any) -> None:  # jaxlib never calls it; its presence makes connect() raise
    return None


def make_client(
    address: str, process_id: int, *, join_timeout: float, heartbeat_timeout: float, shutdown_timeout: float
) -> Any:
    """``get_distributed_runtime_client`` with bounded timeouts and the abort-to-exception callback."""
    try:
        return _J.get_distributed_runtime_client(
            address,
            process_id,
            rpc_timeout=_seconds(max(10.0, heartbeat_timeout)),
            init_timeout=_seconds(join_timeout),
            shutdown_timeout=_seconds(shutdown_timeout),
            heartbeat_timeout=_seconds(heartbeat_timeout),
            missed_heartbeat_callback=_no_callback,
            shutdown_on_destruction=False,
        )
    except Exception as e:
        raise DistributedError(f"creating the distributed runtime client for {address}: {_one_line(e)}") from e


def connect(client: Any) -> str | None:
    """``client.connect()``: registers with the service and waits for every process.

    Returns None on success, else jaxlib's one-line reason (``std::bad_cast`` is all jaxlib says
    when the wait ends without every process: its error handler cannot reach Python).
    """
    try:
        client.connect()
    except Exception as e:
        return _one_line(e)
    return None


def make_cpu_client(
    client: Any,
    process_id: int,
    num_processes: int,
    local_device_count: int | None,
    topology_timeout: float,
    gloo_interface: str | None = None,
) -> Any:
    """The multi-process TFRT CPU client: gloo TCP collectives over the distributed client.

    Raises
    ------
    DistributedError
        When the devices of all processes cannot be exchanged in time.
    """
    minutes = max(1, int(math.ceil(topology_timeout / 60.0)))
    try:
        if gloo_interface:
            collectives = _J.make_gloo_tcp_collectives(distributed_client=client, interface=gloo_interface)
        else:
            collectives = _J.make_gloo_tcp_collectives(distributed_client=client)
        return _xc.make_cpu_client(
            distributed_client=client,
            node_id=process_id,
            num_nodes=num_processes,
            collectives=collectives,
            num_devices=local_device_count,
            get_local_topology_timeout_minutes=minutes,
            get_global_topology_timeout_minutes=minutes,
        )
    except Exception as e:
        raise DistributedError(
            f"process {process_id} of {num_processes}: exchanging the device topology failed: {_one_line(e)}"
        ) from e


def barrier(client: Any, name: str, timeout: float, process_ids: list[int] | None = None) -> str | None:
    """``wait_at_barrier(name, ms)``: None when every process arrived, else jaxlib's reason."""
    try:
        if process_ids is None:
            client.wait_at_barrier(name, max(1, int(timeout * 1000)))
        else:
            client.wait_at_barrier(name, max(1, int(timeout * 1000)), process_ids)
    except Exception as e:
        return _one_line(e)
    return None


def client_shutdown(client: Any) -> str | None:
    """``client.shutdown()`` (disconnect from the service); None on success, else jaxlib's reason.

    Called in the caller's thread, never in a helper thread: jaxlib bounds it (the client's
    ``shutdown_timeout``), and a helper thread still inside jaxlib when the interpreter exits aborts
    the process (``FATAL: exception not rethrown``) when the call returns.
    """
    try:
        client.shutdown()
    except Exception as e:
        return _one_line(e)
    return None


def _store(what: str, call: Callable[[], Any], tolerate: str | None = None) -> tuple[bool, Any]:
    """``(True, call())``, or ``(False, None)`` when it fails with an error naming ``tolerate``.

    Raises
    ------
    DistributedError
        For any other failure (the coordinator cannot be asked).
    """
    try:
        return True, call()
    except Exception as e:
        if tolerate is not None and tolerate in str(e):
            return False, None
        raise DistributedError(f"{what} in the coordinator's key-value store: {_one_line(e)}") from e


def key_value_claim(client: Any, key: str, value: str) -> str | None:
    """Set ``key`` to ``value`` unless it is set already: None when this call set it, else the
    value someone else set first (``key_value_set(..., allow_overwrite=False)``); DistributedError
    when the coordinator cannot be asked."""
    done, _ = _store(
        f"setting {key!r}", lambda: client.key_value_set(key, value, allow_overwrite=False), "ALREADY_EXISTS"
    )
    return None if done else (key_value_try_get(client, key) or "")


def key_value_try_get(client: Any, key: str) -> str | None:
    """The value of ``key`` in the coordinator's key-value store, None when it is not set (no wait);
    DistributedError when the coordinator cannot be asked."""
    found, value = _store(f"reading {key!r}", lambda: client.key_value_try_get(key), "NOT_FOUND")
    return str(value) if found else None


def key_value_dir(client: Any, directory: str) -> dict[str, str]:
    """Every key under ``directory/`` in the coordinator's key-value store, with its value (no wait);
    DistributedError when the coordinator cannot be asked."""
    _, items = _store(f"listing {directory!r}", lambda: client.key_value_dir_get(directory.rstrip("/") + "/"))
    return {str(k): str(v) for k, v in items}


# -- XLA's log lines ----------------------------------------------------------------------------------
_LOG_LINE: Final = re.compile(r"^[EF]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\] (.*)$")
_STATUS: Final = re.compile(r"((?:INVALID_ARGUMENT|ALREADY_EXISTS|DEADLINE_EXCEEDED|UNAVAILABLE|INTERNAL|"
                            r"FAILED_PRECONDITION|NOT_FOUND|ABORTED|CANCELLED|UNKNOWN): [^\n\[]*)")
_MAX_LOG: Final = 64 * 1024


class XlaLog:
    """What jaxlib's C++ code wrote to stderr (file descriptor 2) during a :func:`quiet` block."""

    def __init__(self) -> None:
        self.text = ""

    def reason(self) -> str | None:
        """The first error status in the error lines (``E...``/``F...``) of the text, one line."""
        for line in self.text.splitlines():
            m = _LOG_LINE.match(line)
            if m is None:
                continue
            status = _STATUS.search(m.group(1))
            return " ".join((status.group(1) if status else m.group(1)).split()).rstrip(". ")
        return None


@contextlib.contextmanager
def quiet(verbose: bool) -> Iterator[XlaLog]:
    """Keep what jaxlib writes to file descriptor 2 during the block (the coordination service's
    multi-line errors) off the user's stderr, in the yielded :class:`XlaLog`; ``verbose``: write it
    to stderr too, after the block.

    The whole process's descriptor 2 is redirected meanwhile (a Python thread writing to stderr at the same
    moment is kept too); it is restored even when the block raises.
    """
    log = XlaLog()
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    with tempfile.TemporaryFile() as tmp:
        saved = os.dup(2)
        try:
            os.dup2(tmp.fileno(), 2)
            try:
                yield log
            finally:
                os.dup2(saved, 2)
        finally:
            os.close(saved)
        tmp.seek(0)
        log.text = tmp.read(_MAX_LOG).decode("utf-8", "replace")
    if verbose and log.text:
        try:
            os.write(2, log.text.encode("utf-8", "replace"))
        except OSError:
            pass


# -- dead links: TCP keepalive on the collectives' connections -----------------------------------------
_ESTABLISHED: Final = "01"


def _proc_ip(hex_addr: str) -> str:
    """An address of ``/proc/net/tcp{,6}`` (host-order 32-bit words in hex) as text."""
    raw = bytes.fromhex(hex_addr)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    if len(words) == 4:
        return socket.inet_ntop(socket.AF_INET, words)
    text = socket.inet_ntop(socket.AF_INET6, words)
    return text[7:] if text.startswith("::ffff:") and "." in text else text


def _tcp_connections() -> dict[int, tuple[str, int]]:
    """The established TCP connections of this network namespace: socket inode -> (remote ip, port)."""
    found: dict[int, tuple[str, int]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) < 10 or cols[3] != _ESTABLISHED:
                continue
            ip, _, port = cols[2].partition(":")
            try:
                found[int(cols[9])] = (_proc_ip(ip), int(port, 16))
            except ValueError:
                continue
    return found


def _socket_fds() -> dict[int, int]:
    """This process's sockets: inode -> file descriptor."""
    fds: dict[int, int] = {}
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return fds
    for name in names:
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:["):
            fds[int(target[8:-1])] = int(name)
    return fds


def _keepalive(fd: int, inode: int, seconds: int) -> bool:
    """Keepalive every second and a user timeout of ``seconds`` on the socket ``fd`` (if still ``inode``)."""
    try:
        dup = os.dup(fd)
    except OSError:
        return False
    try:
        if os.fstat(dup).st_ino != inode:  # closed and reused meanwhile
            return False
        sock = socket.socket(fileno=dup)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, max(1, seconds))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, seconds * 1000)
        finally:
            sock.detach()  # the duplicate is closed below
        return True
    except OSError:
        return False
    finally:
        os.close(dup)


class LinkGuard:
    """Makes the collectives' TCP connections (gloo's) fail when a peer's host becomes unreachable.

    gloo waits for a silent peer forever (a host whose link went down never answers, nor resets
    the connection: measured, the others' all-reduce hung more than 100 s). Every ``interval``
    seconds a daemon thread (Python only: it never calls into jaxlib) finds this process's TCP
    connections opened since :meth:`start` to one of ``peers`` (the job's hosts), other than to
    the coordinator's ``port``, and turns on keepalive probes every second with a user timeout of
    ``seconds`` (``TCP_KEEPIDLE``, ``TCP_KEEPINTVL``, ``TCP_KEEPCNT``, ``TCP_USER_TIMEOUT``): the
    kernel then ends a connection whose peer stays silent that long, and the collective waiting
    on it fails. Linux only (it reads ``/proc``); elsewhere it does nothing.
    """

    def __init__(self, peers: set[str], coordinator_port: int, seconds: float, interval: float = 0.5) -> None:
        self.peers, self.port = peers, coordinator_port
        self.seconds, self.interval = _seconds(seconds), interval
        self._stop = threading.Event()
        self._seen: set[int] = set()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if not os.path.isdir("/proc/self/fd") or not hasattr(socket, "TCP_USER_TIMEOUT"):
            return
        self._seen = set(_socket_fds())  # sockets older than the job are not its
        self._thread = threading.Thread(target=self._run, daemon=True, name="xlasdk-link-guard")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)

    def scan(self) -> int:
        """Guard the connections that appeared since the last scan; how many were guarded."""
        fds = _socket_fds()
        fresh = {inode: fd for inode, fd in fds.items() if inode not in self._seen}
        if not fresh:
            return 0
        connections = _tcp_connections()
        done = 0
        for inode, fd in fresh.items():
            remote = connections.get(inode)
            if remote is None:  # not (yet) an established TCP connection: look again next time
                continue
            self._seen.add(inode)
            if remote[0] in self.peers and remote[1] != self.port:
                done += _keepalive(fd, inode, self.seconds)
        return done

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.scan()
            except Exception:  # never let the guard end the process
                pass


def source_address(host: str, port: int) -> str | None:
    """The local address this host uses to reach ``host:port`` (no packet is sent), or None."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
        family, _, _, _, addr = infos[0]
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect(addr)
            local = str(s.getsockname()[0])
    except (OSError, IndexError):
        return None
    return local[7:] if local.startswith("::ffff:") and "." in local else local


# -- global and local devices ---------------------------------------------------------------------
def device_process_index(device: Any) -> int:
    """``Device.process_index``: the process that owns the device (0 in a single process)."""
    return int(getattr(device, "process_index", 0) or 0)


def device_is_local(device: Any, client_process: int) -> bool:
    """Whether this process can address the device (its ``process_index`` is the client's)."""
    return device_process_index(device) == client_process


def client_process_index(client: Any) -> int:
    """``Client.process_index()``: this process's index (0 in a single process)."""
    try:
        return int(client.process_index())
    except Exception:
        return 0


def client_global_devices(client: Any) -> list[Any]:
    """``Client.devices()``: every device of every process, in id order."""
    return sorted(client.devices(), key=lambda d: int(d.id))


def make_plugin_client(
    name: str, options: dict[str, Any] | None, client: Any, process_id: int, num_processes: int
) -> Any:
    """``make_c_api_client`` of a loaded PJRT plugin joined to the job, as JAX makes it: the
    distributed client, plus ``node_id`` / ``num_nodes`` options; for the TPU (libtpu) the
    distributed client alone, as JAX's ``make_tpu_client``: libtpu refuses those options
    (``INVALID_ARGUMENT: Unexpected option name passed to PJRT_Client_Create: num_nodes``,
    libtpu 0.0.42.1 and 0.0.52) and learns its host's place in the slice from its environment
    (``TPU_WORKER_ID``, ``TPU_WORKER_HOSTNAMES``, ``MEGASCALE_*``) and the distributed client.

    Raises
    ------
    XlaRuntimeError
        When the plugin cannot create its client, or its client places this host at another process
        index than the job's ``process_id`` (a TPU host's process id must be its TPU worker number).
    """
    from . import pjrt

    opts: dict[str, Any] = {} if name == "tpu" else {"node_id": process_id, "num_nodes": num_processes}
    opts.update(options or {})
    made = pjrt.make_plugin_client(name, opts, client)
    placed = client_process_index(made)
    if placed != process_id:
        raise XlaRuntimeError(
            f"the {name} client places this host at process index {placed}, but the job gave it process_id "
            f"{process_id}: give each host its own place in the slice as its process id (on a TPU host its TPU "
            "worker number, TPU_WORKER_ID; with several slices, slice * hosts per slice + worker number)"
        )
    return made
