"""The coordinator process: XLA's distributed runtime *service*, alone in a process of its own.

Run by path (``python .../_coordinator.py ARGS``, never imported by xlasdk), so that starting it
imports jaxlib only, not xlasdk. :func:`xlasdk._jaxlib.distributed.start_coordinator` starts it.

Why a process of its own (measured with jaxlib 0.10.2, see distributed-facts.md):

* every client aborts (SIGABRT) as soon as the service goes away, so the service must outlive
  every client; in a separate process it survives the death of any worker, process 0 included;
* binding a port that is taken sometimes crashes the process (SIGSEGV) instead of raising.

Protocol: one line on stdout, ``ready PORT`` once the service listens (``error MESSAGE`` if it
could not start), then it reads stdin: the line ``stop`` shuts the service down and exits 0 (sent
once every client has shut down); end of input without ``stop`` (its starter exited or died)
keeps the service up for ``--linger`` seconds more, so that the other processes can still shut
down cleanly, then exits. SIGINT is ignored (a Ctrl-C in the terminal reaches the workers, which
then shut down through this service).

A port of 0 picks a free port: a socket with ``SO_REUSEPORT`` is bound to port 0 and kept open
while the service runs (gRPC binds with ``SO_REUSEPORT`` too, so it shares that port), which
keeps the kernel from handing the same port to anyone else who asks for a free one.

One coordinator per port: gRPC's ``SO_REUSEPORT`` also lets a *second* service bind a port where
one listens already (measured with jaxlib 0.10.2 and 0.12.1: both start), and the kernel then hands
each client's connection to either of them at random, so that the processes of one job split
between two services (two processes that both say ``process_id`` 0, or two jobs on one address):
which process joins which job depends on timing. On Linux the service is therefore refused when a
socket listens on the port before it starts, and refused again (stopped at once) when another one
listens there once it has started (two that start at the same moment both refuse).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading


def _reserve(host: str) -> tuple[socket.socket, int]:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if hasattr(socket, "SO_REUSEPORT"):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind((host, 0))
    return s, int(s.getsockname()[1])


def _own_sockets() -> set[int]:
    """The inodes of this process's sockets."""
    found = set()
    try:
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                found.add(int(target[8:-1]))
    except OSError:
        pass
    return found


def _listeners(port: int) -> int | None:
    """How many sockets of other processes listen on TCP ``port`` in this network namespace (None:
    unknown, not Linux). This process's own (the service's, however many it binds) are not counted."""
    found = None
    own = _own_sockets()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        found = found or 0
        for row in rows:
            cols = row.split()
            if (len(cols) > 9 and cols[3] == "0A" and cols[1].rpartition(":")[2] == f"{port:04X}"
                    and cols[9].isdigit() and int(cols[9]) not in own):
                found += 1
    return found


def _taken(port: int) -> str:
    return (f"another process listens on port {port} already (a coordinator of another job, or two processes "
            f"that both say process_id 0): the address is taken")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--num-processes", type=int, required=True)
    p.add_argument("--heartbeat-timeout", type=int, required=True)
    p.add_argument("--register-timeout", type=int, required=True)
    p.add_argument("--shutdown-timeout", type=int, required=True)
    p.add_argument("--linger", type=float, required=True)
    a = p.parse_args()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    host = a.host.strip("[]")
    reservation = None
    port = a.port
    try:
        if port == 0:
            reservation, port = _reserve(host)
        elif (_listeners(port) or 0) > 0:
            raise OSError(_taken(port))
        import importlib

        jax_ext = importlib.import_module("jaxlib._jax")
        bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        service = jax_ext.get_distributed_runtime_service(
            bind,
            a.num_processes,
            heartbeat_timeout=a.heartbeat_timeout,
            cluster_register_timeout=a.register_timeout,
            shutdown_timeout=a.shutdown_timeout,
            recoverable=True,
        )
    except Exception as e:
        msg = " ".join(str(e).split()) or type(e).__name__
        sys.stdout.write(f"error {msg}\n")
        sys.stdout.flush()
        return 3
    if (_listeners(port) or 0) > 0:  # another service bound it too, meanwhile (SO_REUSEPORT)
        worker = threading.Thread(target=service.shutdown, daemon=True)
        worker.start()
        worker.join(5.0)
        sys.stdout.write(f"error {_taken(port)}\n")
        sys.stdout.flush()
        os._exit(3)
    sys.stdout.write(f"ready {port}\n")
    sys.stdout.flush()
    stop = False
    for line in sys.stdin:
        if line.strip() == "stop":
            stop = True
            break
    if stop:
        # Every client has shut down: the service goes, bounded in time.
        worker = threading.Thread(target=service.shutdown, daemon=True)
        worker.start()
        worker.join(10.0)
    else:
        # The starter is gone: serve the others a while longer, then leave without a shutdown
        # (a shutdown with clients still connected only makes it wait, then abort them anyway).
        threading.Event().wait(max(0.0, a.linger))
    if reservation is not None:
        reservation.close()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
