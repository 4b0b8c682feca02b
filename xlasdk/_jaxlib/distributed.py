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
  it with ``atexit``): a client destroyed without it aborts.
"""

from __future__ import annotations

import importlib
import math
import os
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Callable
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
    "wait_until_alone",
    "client_shutdown",
    "key_value_set",
    "key_value_get",
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
    if proc.poll() is None:
        proc.kill()
    rc = proc.wait()
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
        if rc is None:
            raise DistributedError(f"the coordinator did not start listening on {where} within {startup_timeout:g} s")
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


def _bounded(fn: Callable[[], Any], timeout: float) -> tuple[bool, Any]:
    """Run a blocking jaxlib call in a daemon thread; ``(finished, result_or_exception)``."""
    box: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            box.append(fn())
        except Exception as e:
            box.append(e)
        done.set()

    threading.Thread(target=run, daemon=True, name="xlasdk-distributed-wait").start()
    if not done.wait(timeout):
        return False, None
    return True, box[0]


def wait_until_alone(client: Any, process_id: int, num_processes: int, timeout: float) -> bool:
    """Wait until every other process has disconnected (or died): ``get_live_nodes``.

    jaxlib's ``get_live_nodes`` returns once every live process among those asked has called it
    too, or has gone; the others never call it, so it returns when they have all shut down.
    Returns whether that happened within ``timeout`` seconds.
    """
    ids = list(range(num_processes))
    finished, result = _bounded(lambda: client.get_live_nodes(ids), timeout)
    if not finished or isinstance(result, BaseException):
        return False
    try:
        return set(int(k) for k in result) <= {process_id}
    except Exception:
        return False


def client_shutdown(client: Any, timeout: float) -> str | None:
    """``client.shutdown()`` (disconnect from the service), bounded; None on success."""
    finished, result = _bounded(client.shutdown, timeout)
    if not finished:
        return f"no answer within {timeout:g} s"
    if isinstance(result, BaseException):
        return _one_line(result)
    return None


def key_value_set(client: Any, key: str, value: str) -> None:
    try:
        client.key_value_set(key, value, allow_overwrite=True)
    except Exception as e:
        raise DistributedError(f"key_value_set({key!r}): {_one_line(e)}") from e


def key_value_get(client: Any, key: str, timeout: float) -> str:
    try:
        return str(client.blocking_key_value_get(key, max(1, int(timeout * 1000))))
    except Exception as e:
        raise DistributedError(f"key_value_get({key!r}): {_one_line(e)}") from e


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
    distributed client, plus ``node_id`` / ``num_nodes`` options.

    Raises
    ------
    XlaRuntimeError
        When the plugin cannot create its client.
    """
    opts: dict[str, Any] = {"node_id": process_id, "num_nodes": num_processes}
    opts.update(options or {})
    try:
        return _xc.make_c_api_client(name, opts, client)
    except Exception as e:
        raise XlaRuntimeError(f"creating a client for PJRT plugin {name!r}: {_one_line(e)}") from e
