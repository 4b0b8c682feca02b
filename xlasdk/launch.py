r"""Run a script in N local processes joined by ``xs.distributed``: ``python -m xlasdk.launch``.

::

    python -m xlasdk.launch -n 2 examples/two_process_allreduce.py [ARGS...]
    python -m xlasdk.launch -n 4 --timeout 120 -m mypackage.train [ARGS...]
    xlasdk launch -n 2 script.py            # the same

The launcher starts the coordinator (XLA's distributed runtime service) on a free port of
127.0.0.1, then N processes of ``python script.py ARGS`` with ``XLASDK_COORDINATOR``,
``XLASDK_NUM_PROCESSES`` and ``XLASDK_PROCESS_ID`` set (``xs.distributed.initialize()`` reads
them). Each line a process prints is prefixed with ``[i]``. When a process fails (non-zero exit),
the others are stopped (SIGTERM, then SIGKILL after ``--grace`` seconds) unless ``--keep-going``;
``--timeout S`` stops them all after S seconds. The exit code is the first non-zero exit code
(128 + N for a process ended by signal N), 124 after ``--timeout``, 130 after Ctrl-C, 0 when all
succeed; 2 for a usage error.

Ports: the coordinator's port is picked by the kernel and held for the whole run, so launchers
running side by side (tests in parallel) never share one; gloo's own connections use ephemeral
ports.

Multi-host TPU
--------------
The launcher starts processes on this machine only. A TPU pod slice runs one process per host, as
JAX runs it, started on every host by the TPU VM's tools; each process joins the job with
:func:`xlasdk.distributed.initialize` before its first TPU use, and the TPU client it then makes
gets the job's distributed runtime client (``make_c_api_client("tpu", options, distributed_client)``,
as JAX's ``xla_bridge``): ``xs.devices("tpu")`` lists every chip of the slice, ``xs.local_devices("tpu")``
this host's. A TPU client made before ``initialize`` belongs to its host alone: ``initialize`` then
raises. Each host's process id must be its place in the slice as libtpu numbers it (its TPU worker
number; with several slices, ``slice * hosts_per_slice + worker``): the TPU client is refused otherwise.

Compile off the pod, on any machine with libtpu (no chip), and write each host's part::

    topo = xs.topology("v5e:4x4")                     # v5litepod-16: 16 chips, 4 hosts of 4
    exe = xs.compile(comp, device=topo.devices[0], options=xs.CompileOptions(num_partitions=16))
    exe.save_per_host("parts")                        # parts/process_0 .. parts/process_3

``job.py``, the same on every host::

    import xlasdk as xs
    from xlasdk import load_host_part

    xs.distributed.initialize()                       # XLASDK_COORDINATOR, _NUM_PROCESSES, _PROCESS_ID
    exe = load_host_part("parts")                     # this process's part, on the TPU; refuses another's
    mine = [k for k, d in enumerate(exe.devices) if d in exe.local_devices]   # its partitions
    outs = exe.execute_replicated([args_of_partition(k) for k in mine])
    xs.distributed.shutdown()

Run it on every host of a Cloud TPU VM slice (from a workstation with ``gcloud``; port 8476 is
JAX's; the worker number comes from the host's metadata)::

    W0=$(gcloud compute tpus tpu-vm describe NAME --zone=ZONE --format='value(networkEndpoints[0].ipAddress)')
    gcloud compute tpus tpu-vm scp --recurse parts job.py NAME: --zone=ZONE --worker=all
    gcloud compute tpus tpu-vm ssh NAME --zone=ZONE --worker=all --command="
      ID=\$(curl -s -H Metadata-Flavor:Google \
        http://metadata.google.internal/computeMetadata/v1/instance/attributes/agent-worker-number)
      XLASDK_COORDINATOR=$W0:8476 XLASDK_NUM_PROCESSES=4 XLASDK_PROCESS_ID=\$ID python3 job.py"

Several slices: ``xs.topology("v5e:4x4,num_slices=2")`` compiles for both (8 hosts, device ids
``100000 * (slice + 1) + i``); libtpu joins the slices through ``MEGASCALE_COORDINATOR_ADDRESS``,
``MEGASCALE_NUM_SLICES`` and ``MEGASCALE_SLICE_ID``, which the slices' provisioning (GKE, queued
resources) sets. Checked here without a pod: the options and the distributed client libtpu's client
gets, the order, the host parts of ``v5e:4x4`` and of two slices; not yet run on a pod.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, NoReturn

from ._numbers import COUNT, SECONDS, SECONDS_OR_NONE
from .errors import DistributedError

__all__ = ["launch", "LaunchResult", "main", "build_parser", "split_argv", "command_for"]

EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130
EXIT_USAGE = 2


@dataclass
class LaunchResult:
    """What :func:`launch` ran into.

    Attributes
    ----------
    returncode : int
        The launcher's exit code: the first non-zero exit code of a process (128 + N for signal N),
        124 after the timeout, 130 after Ctrl-C, else 0.
    returncodes : list of int or None
        Each process's own exit code (negative: ended by that signal, as ``subprocess`` reports),
        None for a process that did not start.
    first_failure : int or None
        The index of the process that failed first.
    timed_out : bool
        Whether the timeout stopped the run.
    """

    returncode: int
    returncodes: list[int | None]
    first_failure: int | None
    timed_out: bool


def _code(rc: int) -> int:
    return 128 - rc if rc < 0 else rc


class _Pump(threading.Thread):
    """Copies one process's stream to ``out``, each line prefixed with ``prefix``."""

    def __init__(self, src: IO[bytes], out: IO[bytes], prefix: bytes, lock: threading.Lock) -> None:
        super().__init__(daemon=True)
        self.src, self.out, self.prefix, self.lock = src, out, prefix, lock

    def run(self) -> None:
        try:
            for line in iter(self.src.readline, b""):
                if not line.endswith(b"\n"):
                    line += b"\n"
                with self.lock:
                    try:
                        self.out.write(self.prefix + line)
                        self.out.flush()
                    except (OSError, ValueError):
                        pass
        finally:
            self.src.close()


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    except OSError:
        try:
            proc.send_signal(sig)
        except OSError:
            pass


def launch(
    command: Sequence[str],
    num_processes: int,
    *,
    timeout: float | None = None,
    local_device_count: int | None = None,
    join_timeout: float | None = None,
    keep_going: bool = False,
    grace: float = 3.0,
    env: Mapping[str, str] | None = None,
    host: str = "127.0.0.1",
    prefix: bool = True,
    verbose: bool = False,
    stdout: IO[bytes] | None = None,
    stderr: IO[bytes] | None = None,
) -> LaunchResult:
    """Run ``command`` in ``num_processes`` local processes of one ``xs.distributed`` job.

    Parameters
    ----------
    command:
        The program and its arguments, e.g. ``[sys.executable, "script.py", "--steps", "3"]``.
    num_processes:
        How many processes (each gets ``XLASDK_PROCESS_ID`` 0 .. N-1).
    timeout:
        Seconds after which every process is stopped (exit code 124); None: no limit.
    local_device_count:
        CPU devices per process (``XLASDK_LOCAL_DEVICE_COUNT``); None: 1.
    join_timeout:
        Seconds ``initialize()`` waits for every process (``XLASDK_JOIN_TIMEOUT``).
    keep_going:
        Do not stop the others when a process fails.
    grace:
        Seconds between SIGTERM and SIGKILL when stopping processes.
    env:
        The processes' environment (default: this process's), to which the job's variables are added.
    host:
        The address the coordinator listens on and the processes connect to.
    prefix:
        Prefix each output line with ``[i]``.
    verbose:
        Let XLA's coordination-service log lines through to the processes' stderr
        (``XLASDK_DISTRIBUTED_VERBOSE=1``); by default the errors raised name the reason in one line.
    stdout, stderr:
        Binary streams receiving the processes' output (default: this process's).

    Returns
    -------
    LaunchResult

    Raises
    ------
    DistributedError
        When the coordinator cannot start.
    ValueError
        For a bad ``num_processes``, ``timeout`` or empty ``command``.
    """
    from ._jaxlib.distributed import start_coordinator

    if isinstance(num_processes, bool) or not isinstance(num_processes, int) or num_processes < 1:
        raise ValueError(f"launch: num_processes must be an int >= 1, got {num_processes!r}")
    if timeout is not None and not timeout > 0:
        raise ValueError(f"launch: timeout must be > 0 seconds, got {timeout!r}")
    if not command:
        raise ValueError("launch: empty command")
    out = stdout if stdout is not None else sys.stdout.buffer
    err = stderr if stderr is not None else sys.stderr.buffer
    lock = threading.Lock()
    base = dict(os.environ if env is None else env)
    shutdown_timeout = float(base.get("XLASDK_SHUTDOWN_TIMEOUT", "30") or 30)
    heartbeat_timeout = float(base.get("XLASDK_HEARTBEAT_TIMEOUT", "30") or 30)
    join = join_timeout if join_timeout is not None else float(base.get("XLASDK_JOIN_TIMEOUT", "120") or 120)
    coordinator = start_coordinator(
        host, 0, num_processes,
        heartbeat_timeout=heartbeat_timeout, register_timeout=join, shutdown_timeout=shutdown_timeout,
        linger=shutdown_timeout + heartbeat_timeout + 10.0,
    )
    address = f"[{host}]:{coordinator.port}" if ":" in host else f"{host}:{coordinator.port}"

    def say(msg: str) -> None:
        with lock:
            try:
                err.write(f"xlasdk launch: {msg}\n".encode())
                err.flush()
            except (OSError, ValueError):
                pass

    procs: list[subprocess.Popen[bytes] | None] = [None] * num_processes
    pumps: list[_Pump] = []
    codes: list[int | None] = [None] * num_processes
    first: int | None = None
    timed_out = interrupted = False
    try:
        for i in range(num_processes):
            penv = dict(base)
            penv.update({
                "XLASDK_COORDINATOR": address,
                "XLASDK_NUM_PROCESSES": str(num_processes),
                "XLASDK_PROCESS_ID": str(i),
                "XLASDK_START_COORDINATOR": "0",
                "XLASDK_JOIN_TIMEOUT": repr(float(join)),
                "PYTHONUNBUFFERED": "1",
            })
            if local_device_count is not None:
                penv["XLASDK_LOCAL_DEVICE_COUNT"] = str(local_device_count)
            if verbose:
                penv["XLASDK_DISTRIBUTED_VERBOSE"] = "1"
            tag = f"[{i}] ".encode() if prefix else b""
            try:
                p = subprocess.Popen(
                    list(command), env=penv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, start_new_session=True,
                )
            except OSError as e:
                say(f"cannot start process {i}: {e}")
                codes[i] = None
                first = i if first is None else first
                break
            procs[i] = p
            assert p.stdout is not None and p.stderr is not None
            pumps += [_Pump(p.stdout, out, tag, lock), _Pump(p.stderr, err, tag, lock)]
            pumps[-2].start()
            pumps[-1].start()
        deadline = None if timeout is None else time.monotonic() + timeout
        stopping_since: float | None = None
        if first is not None:
            stopping_since = time.monotonic()
            for q in procs:
                if q is not None:
                    _signal_group(q, signal.SIGTERM)
        while any(q is not None and q.poll() is None for q in procs):
            now = time.monotonic()
            for i, q in enumerate(procs):
                if q is None or codes[i] is not None:
                    continue
                rc = q.poll()
                if rc is None:
                    continue
                codes[i] = rc
                if rc != 0 and first is None and not timed_out and not interrupted:
                    first = i
                    how = f"signal {-rc}" if rc < 0 else f"exit code {rc}"
                    if keep_going:
                        say(f"process {i} failed ({how})")
                    else:
                        say(f"process {i} failed ({how}); stopping the others")
                        stopping_since = now
                        for other in procs:
                            if other is not None and other.poll() is None:
                                _signal_group(other, signal.SIGTERM)
            if deadline is not None and now >= deadline and stopping_since is None:
                timed_out = True
                say(f"timed out after {timeout:g} s; stopping every process")
                stopping_since = now
                for q in procs:
                    if q is not None and q.poll() is None:
                        _signal_group(q, signal.SIGTERM)
            if stopping_since is not None and now - stopping_since >= grace:
                for q in procs:
                    if q is not None and q.poll() is None:
                        _signal_group(q, signal.SIGKILL)
            try:
                time.sleep(0.02)
            except KeyboardInterrupt:
                if not interrupted:
                    interrupted = True
                    say("interrupted; stopping every process")
                    stopping_since = time.monotonic()
                    for q in procs:
                        if q is not None and q.poll() is None:
                            _signal_group(q, signal.SIGINT)
    finally:
        for q in procs:  # whatever happened above, leave no process behind
            if q is not None and q.poll() is None:
                _signal_group(q, signal.SIGKILL)
                q.wait()
        for i, q in enumerate(procs):
            if q is not None:
                codes[i] = q.wait()
        for t in pumps:
            t.join(5.0)
        coordinator.stop()
    if first is None and not timed_out and not interrupted:
        first = next((i for i, c in enumerate(codes) if c), None)
    if interrupted:
        code = EXIT_INTERRUPTED
    elif timed_out and first is None:
        code = EXIT_TIMEOUT
    elif first is not None:
        rc0 = codes[first]
        code = 1 if rc0 is None else _code(rc0)
    else:
        code = 0
    return LaunchResult(code, codes, first, timed_out)


_VALUED = frozenset({"-n", "--num-processes", "--timeout", "--local-device-count", "--join-timeout", "--grace"})


def split_argv(argv: Sequence[str]) -> tuple[list[str], str | None, str | None, list[str]]:
    """``(launcher options, module, script, the program's arguments)``: everything after the
    script (or ``-m MODULE``) belongs to the program, even what looks like a launcher option."""
    argv = list(argv)
    opts: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return opts, None, (argv[i + 1] if i + 1 < len(argv) else None), argv[i + 2 :]
        if a == "-m":
            return opts, (argv[i + 1] if i + 1 < len(argv) else ""), None, argv[i + 2 :]
        if a.startswith("-m") and not a.startswith("--"):
            return opts, a[2:], None, argv[i + 1 :]
        if not a.startswith("-") or a == "-":
            return opts, None, a, argv[i + 1 :]
        opts.append(a)
        if a in _VALUED and i + 1 < len(argv):
            opts.append(argv[i + 1])
            i += 1
        i += 1
    return opts, None, None, []


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The launcher's options (also those of ``xlasdk launch``); the script and its arguments
    are split off first by :func:`split_argv`."""
    p = parser if parser is not None else argparse.ArgumentParser(
        prog="python -m xlasdk.launch",
        usage="python -m xlasdk.launch -n N [OPTIONS] (SCRIPT | -m MODULE) [ARGS...]",
        description="Run a Python script in N local processes of one xs.distributed job.",
    )
    p.add_argument("-n", "--num-processes", type=COUNT.parse, required=True, metavar="N", help="number of processes")
    p.add_argument("--timeout", type=SECONDS.parse, default=None, metavar="S",
                   help="stop every process after S seconds (exit code 124)")
    p.add_argument("--local-device-count", type=COUNT.parse, default=None, metavar="K",
                   help="CPU devices per process (default 1)")
    p.add_argument("--join-timeout", type=SECONDS.parse, default=None, metavar="S",
                   help="seconds initialize() waits for every process (default 120)")
    p.add_argument("--keep-going", action="store_true", help="do not stop the others when a process fails")
    p.add_argument("--grace", type=SECONDS_OR_NONE.parse, default=3.0, metavar="S",
                   help="seconds between SIGTERM and SIGKILL when stopping processes (default 3)")
    p.add_argument("--no-prefix", action="store_true", help="do not prefix output lines with [i]")
    p.add_argument("--verbose", action="store_true",
                   help="show XLA's coordination-service log lines (kept off stderr by default)")
    p.epilog = (
        "SCRIPT [ARGS...] runs 'python SCRIPT ARGS'; -m MODULE [ARGS...] runs 'python -m MODULE ARGS'. "
        "Exit code: the first non-zero exit code of a process (128+N for signal N), 124 after --timeout, "
        "130 after Ctrl-C, 2 for a usage error."
    )
    return p


def command_for(module: str | None, script: str | None, rest: Sequence[str]) -> list[str]:
    """The command a process runs: ``python -m MODULE ARGS``, ``python SCRIPT ARGS``, or for a
    SCRIPT that is not a file but a Python command on ``PATH`` (``xlasdk``), ``python $(which SCRIPT) ARGS``.

    Raises
    ------
    ValueError
        For a missing module or script.
    """
    if module is not None:
        if not module:
            raise ValueError("-m needs a module name")
        return [sys.executable, "-m", module, *rest]
    if script is None:
        raise ValueError("a script to run is required (or -m MODULE)")
    if os.path.isfile(script):
        return [sys.executable, script, *rest]
    found = shutil.which(script) if os.sep not in script else None
    if found is not None:
        try:
            with open(found, "rb") as f:
                python = b"python" in f.readline()
        except OSError:
            python = False
        if python:
            return [sys.executable, found, *rest]
    raise ValueError(f"no such script: {script}")


def run_args(
    args: argparse.Namespace, module: str | None, script: str | None, rest: list[str], error: Any
) -> int:
    """Run a parsed command line; ``error(message)`` reports a usage error (and exits)."""
    try:  # the numbers were checked as they were parsed (xlasdk._numbers)
        command = command_for(module, script, rest)
    except ValueError as e:
        error(str(e))
    result = launch(
        command, args.num_processes, timeout=args.timeout, local_device_count=args.local_device_count,
        join_timeout=args.join_timeout, keep_going=args.keep_going, grace=args.grace, prefix=not args.no_prefix,
        verbose=args.verbose,
    )
    return result.returncode


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m xlasdk.launch``: returns the exit code."""
    parser = build_parser()

    def error(msg: str) -> NoReturn:
        parser.exit(EXIT_USAGE, f"{parser.prog}: error: {msg}\n")

    opts, module, script, rest = split_argv(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(opts)
    try:
        return run_args(args, module, script, rest, error)
    except DistributedError as e:
        sys.stderr.write(f"xlasdk launch: error: {e}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
