"""XLA and MLIR work on untrusted input, done in a child process that may die instead of this one.

XLA's HLO parser, its HLO -> StableHLO importer, MLIR's parsers and XLA's compiler ``CHECK``-fail
(abort the process) or overflow the native stack on many inputs that a user can hand to xlasdk:
files from other tools, cut-down repros, broken files. Nothing from a file reaches such a code
path in the user's process until this module has run the very same steps on the very same bytes
in a child process (the *worker*) and the child survived. The steps are deterministic, so the
parent can then repeat them (or deserialize what the child made) safely.

One worker process is started on first use, or earlier by :func:`prestart` (about 1 s: it imports
jaxlib and xlasdk's loaders before it reads its first request, so that a start requested early
overlaps the caller's own work) and serves every later request over a pipe (a few ms per small
request); a worker that dies is replaced on the next request. A death becomes
:class:`WorkerDied` carrying the signal and XLA's own ``Check failed:`` line from the child's stderr.

The worker runs under a memory budget (its ``RLIMIT_DATA``, set in the worker only: half of the
machine's memory, at least 4 GiB; ``XLASDK_WORKER_MEMORY`` overrides it, see :func:`memory_budget`):
a module whose load or compile needs more fails with a message that says the budget ran out and
how to raise it (:func:`budget_exceeded`), never as a corrupt file, and is not retried.

A request names a function (``"xlasdk.formats.untrusted:load_hlo"``) that the worker imports
and calls; this module knows nothing of what the functions do (``xlasdk.formats.untrusted``
and ``xlasdk.program._worker`` hold them), so ``_jaxlib`` depends on nothing above it.
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Final

from ..errors import XlaRuntimeError, XlaSdkError

__all__ = [
    "Failed", "WorkerDied", "check_xla_flags", "memory_budget", "prestart", "request", "shutdown", "worker_pid",
]

_LEN: Final = struct.Struct("<Q")
#: what the worker imports as soon as it starts (every request needs jaxlib and the loaders; they import
#: ``xlasdk.program._worker``)
_PRELOAD: Final = ("xlasdk.formats.untrusted",)
_DEATH_TAIL: Final = 64 * 1024  # bytes of the child's stderr searched for XLA's fatal line


class Failed(Exception):  # noqa: N818 - a reply, not a bug
    """The worker ran the request and it failed cleanly: ``stage`` and XLA's / MLIR's message."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage
        self.message = message


class WorkerDied(Exception):  # noqa: N818
    """The worker process died on the request (an abort, a segfault, a stack overflow) or ran
    past its time limit. ``reason`` is one line: the signal and XLA's ``Check failed:`` line."""

    def __init__(self, reason: str, *, timed_out: bool = False, killed: bool = False,
                 out_of_memory: bool = False, unavailable: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out
        # not the request's fault: SIGKILL from outside (twice: the request was retried once), or
        # the worker's memory budget ran out (then ``out_of_memory`` too, and no retry), or no
        # worker to ask (then ``unavailable`` too: it could not start, or it ended with an exit
        # status of its own, as Python does when its start-up fails; XLA's deaths are signals)
        self.killed = killed or out_of_memory or unavailable
        self.out_of_memory = out_of_memory
        self.unavailable = unavailable


# -- the worker's memory budget ----------------------------------------------------------------
#: The worker's memory budget when ``XLASDK_WORKER_MEMORY`` is unset: this share of the machine's
#: memory (or of the memory its control group may use, when less), and at least
#: :data:`MIN_MEMORY_BUDGET`. xlasdk's whole test suite passes with a budget of 2 GiB.
MEMORY_BUDGET_SHARE: Final = 0.5
MIN_MEMORY_BUDGET: Final = 4 << 30
_UNITS: Final = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
#: words in the log of a worker that died because an allocation failed
_OOM_MARKS: Final = ("std::bad_alloc", "Cannot allocate memory", "out of memory", "Out of memory",
                     "MemoryError", "Failed to allocate", "failed to allocate", "pthread_create() failed",
                     "failed to map segment",
                     # glibc's, starting a thread past RLIMIT_AS (exit 127): "cannot allocate memory for
                     # thread-local data: ABORT"
                     "cannot allocate memory")


def _machine_memory() -> int | None:
    """Bytes of physical memory, or of the control group's limit (cgroup v2 ``memory.max``) when less."""
    try:
        total = int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return None
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            cg = f.read().strip()
        if cg.isdigit():
            total = min(total, int(cg))
    except OSError:
        pass
    return total


def memory_budget() -> int | None:
    """Bytes the worker process may allocate (its ``RLIMIT_DATA``), None for no limit.

    ``XLASDK_WORKER_MEMORY`` (bytes, or with a K/M/G/T suffix: ``8G``; ``0`` or ``none``: no
    limit), else half of the machine's memory (or its control group's), at least 4 GiB.

    Raises
    ------
    XlaSdkError
        ``XLASDK_WORKER_MEMORY`` holds something else.
    """
    env = os.environ.get("XLASDK_WORKER_MEMORY", "").strip()
    if env:
        if env.lower() in ("0", "none", "unlimited"):
            return None
        text = env.upper().removesuffix("IB").removesuffix("B")
        unit = text[-1:] if text[-1:] in _UNITS and text[-1:] else ""
        try:
            value = float(text[: len(text) - len(unit)] if unit else text) * _UNITS[unit]
        except ValueError:
            value = -1.0
        if not value > 0 or value != value or value > 1 << 62:
            raise XlaSdkError(f"XLASDK_WORKER_MEMORY must be a size such as 8G or 8589934592 (bytes; 0: no limit), "
                              f"got {env!r}")
        return int(value)
    total = _machine_memory()
    if total is None:  # pragma: no cover - not POSIX
        return None
    return max(MIN_MEMORY_BUDGET, int(total * MEMORY_BUDGET_SHARE))


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MiB"


def budget_exceeded(limit: int | None) -> str:
    """The one line that says the worker's memory budget (``limit`` bytes) ran out."""
    size = f"of {_gib(limit)} " if limit else ""
    return (f"xlasdk's worker process ran past its memory budget {size}(XLASDK_WORKER_MEMORY raises it); "
            "this says nothing about whether the input is valid")


def is_out_of_memory(message: str) -> bool:
    """Whether XLA's / MLIR's message says an allocation failed (``RESOURCE_EXHAUSTED``...)."""
    return "RESOURCE_EXHAUSTED" in message or any(m in message for m in _OOM_MARKS)


# -- the parent side ---------------------------------------------------------------------------
class _Worker:
    def __init__(self) -> None:
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # keep 'F'atal and 'E'rror lines: they name the cause
        env["XLASDK_WORKER"] = "1"
        env["XLASDK_WORKER_PARENT"] = str(os.getpid())
        self.memory_env = os.environ.get("XLASDK_WORKER_MEMORY")
        self.memory = memory_budget()
        env["XLASDK_WORKER_RLIMIT_DATA"] = str(self.memory or 0)
        self.xla_flags = env.get("XLA_FLAGS")  # XLA reads them once, when the process first needs them
        self.log = tempfile.TemporaryFile()
        self.next_id = 0
        # Started from one long-lived thread: the worker's PR_SET_PDEATHSIG fires when the *thread*
        # that started it ends, so a user thread that happened to start it must not take it along.
        started = _spawner().submit(
            subprocess.Popen,
            [sys.executable, "-c", "from xlasdk._jaxlib.isolated import _serve; _serve()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env=env,
            close_fds=True,
        )
        try:
            self.proc: subprocess.Popen[bytes] = started.result()
        except BaseException:  # interrupted while starting: the new worker must not linger
            started.add_done_callback(_kill_started)
            self.log.close()
            raise

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.log.closed:
            return
        try:
            self.proc.kill()
        except OSError:  # pragma: no cover - already gone
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:  # pragma: no cover
                pass
        self.log.close()

    def call(self, target: str, args: tuple[Any, ...], timeout: float | None) -> Any:
        """Send one request and wait for its reply.

        Every request carries an id that its reply must echo. Any exception while a request is in
        flight (``KeyboardInterrupt`` included) kills the worker before it propagates: its reply
        could otherwise stay in the pipe and answer the next request.
        """
        assert self.proc.stdin is not None and self.proc.stdout is not None
        start = self.log.seek(0, os.SEEK_END)
        self.next_id += 1
        rid = self.next_id
        payload = pickle.dumps((rid, target, args), protocol=pickle.HIGHEST_PROTOCOL)
        timer = None
        timed_out = threading.Event()
        if timeout is not None:
            def expire() -> None:
                timed_out.set()
                try:
                    self.proc.kill()
                except OSError:  # pragma: no cover
                    pass

            timer = threading.Timer(timeout, expire)
            timer.daemon = True
            timer.start()
        done = False
        try:
            try:
                self.proc.stdin.write(_LEN.pack(len(payload)) + payload)
                self.proc.stdin.flush()
                head = _read_exact(self.proc.stdout, _LEN.size)
                reply = pickle.loads(_read_exact(self.proc.stdout, _LEN.unpack(head)[0]))
            except (OSError, EOFError, pickle.UnpicklingError, struct.error):
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:  # pragma: no cover - alive but the pipe broke
                    self.proc.kill()
                    self.proc.wait()
                if timed_out.is_set():
                    raise WorkerDied(f"did not finish within {timeout:g} s", timed_out=True) from None
                reason, oom = self._death(start)
                if oom:
                    raise WorkerDied(budget_exceeded(self.memory), out_of_memory=True) from None
                if self.proc.returncode is not None and self.proc.returncode > 0:  # not XLA: it dies of a signal
                    raise WorkerDied(f"xlasdk's worker process ended before it answered ({reason}; "
                                     f"{self._last_line(start)})", unavailable=True) from None
                raise WorkerDied(reason, killed=self.proc.returncode == -signal.SIGKILL) from None
            done = True
        finally:
            if timer is not None:
                timer.cancel()
            if not done:  # interrupted (or died) with the request in flight: this worker is finished
                self.kill()
        if not (isinstance(reply, tuple) and len(reply) >= 2 and reply[0] == rid):
            self.kill()
            got = reply[0] if isinstance(reply, tuple) and reply else type(reply).__name__
            raise WorkerDied(f"protocol error: the reply to request {rid} came as {got!r}; the worker was replaced")
        kind = reply[1]
        if kind == "ok":
            return reply[2]
        raise Failed(reply[2], reply[3])

    def _last_line(self, start: int) -> str:
        """The last line the worker wrote to its log since ``start`` (a Python traceback's last)."""
        self.log.seek(max(start, self.log.seek(0, os.SEEK_END) - _DEATH_TAIL))
        lines = [ln.strip() for ln in self.log.read().decode("utf-8", "replace").splitlines() if ln.strip()]
        return f"its last words: {lines[-1][:300]}" if lines else "it wrote nothing"

    def _death(self, start: int) -> tuple[str, bool]:
        """The reason the worker died (the signal and XLA's fatal line), and whether an allocation
        failed (the worker's memory budget ran out)."""
        rc = self.proc.returncode
        if rc is not None and rc < 0:
            try:
                how = f"it died with {signal.Signals(-rc).name}"
            except ValueError:  # pragma: no cover
                how = f"it died with signal {-rc}"
        else:
            how = f"it exited with status {rc}"
        self.log.seek(max(start, self.log.seek(0, os.SEEK_END) - _DEATH_TAIL))
        err = self.log.read().decode("utf-8", "replace")
        line = fatal_line(err)
        oom = self.memory is not None and rc != -signal.SIGKILL and any(m in err for m in _OOM_MARKS)
        return (f"{how}: {line}" if line else how), oom


def _kill_started(f: Future[subprocess.Popen[bytes]]) -> None:
    try:
        proc = f.result()
    except BaseException:  # pragma: no cover - nothing was started
        return
    proc.kill()
    proc.wait()


def fatal_line(stderr_text: str) -> str | None:
    """XLA's fatal log line (``... Check failed: ...``), without the log prefix, from stderr text."""
    lines = [ln.strip() for ln in stderr_text.splitlines() if ln.strip()]
    for key in ("Check failed", "Fatal Python error", "LLVM ERROR", "RET_CHECK failure"):
        for ln in lines:
            if key in ln:
                return _strip_log_prefix(ln)
    for ln in lines:
        if ln[:1] == "F" and ln[1:5].isdigit():  # absl FATAL: F1201 12:00:00.000000  1234 file.cc:12] msg
            return _strip_log_prefix(ln)
    return None


def _strip_log_prefix(line: str) -> str:
    head, sep, rest = line.partition("] ")
    if sep and (head[:1] in "FEWI" and head[1:5].isdigit()):
        src = head.rsplit(" ", 1)[-1]
        return f"{src}] {rest.strip()}"
    return line[:500]


def _read_exact(f: Any, n: int) -> bytes:
    chunks = []
    while n:
        b = f.read(n)
        if not b:
            raise EOFError
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


_lock = threading.Lock()
_worker: _Worker | None = None
_spawn_pool: ThreadPoolExecutor | None = None


def _spawner() -> ThreadPoolExecutor:
    """The one thread that starts workers (it lives as long as the process)."""
    global _spawn_pool
    if _spawn_pool is None:
        _spawn_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="xlasdk-worker-spawner")
    return _spawn_pool


def request(target: str, *args: Any, timeout: float | None = None,
            on_death: Callable[[WorkerDied], BaseException] | None = None) -> Any:
    """Call ``target`` (``"package.module:function"``) with ``args`` in the worker process and
    return what it returns (arguments and results are pickled; the function raises
    :class:`Failed` for a clean failure).

    ``on_death`` is what the caller raises when the worker dies on the request: with it, a process
    that another watches (the ``xlasdk`` command's supervised child, :mod:`.isolated_local`) runs
    the request itself, with the worker's checks and limits, and the watcher reports its death so.

    Raises
    ------
    Failed
        The request failed cleanly in the worker (``.stage``, ``.message``).
    WorkerDied
        The worker died on it (or ran past ``timeout`` seconds and was killed); a fresh worker
        serves the next request. A worker killed with SIGKILL (from outside: XLA itself aborts
        with SIGABRT) is not the request's fault: the request runs once more in a fresh worker,
        and a second SIGKILL raises with ``killed`` set.
    """
    if on_death is not None and _local_runner is not None:
        return _local_runner(target, args, timeout, on_death)
    try:
        return _request_once(target, args, timeout)
    except WorkerDied as e:
        _raise_if_xla_flags(e)
        if not e.killed or e.out_of_memory or e.unavailable:  # the same budget would run out again, no worker start
            raise
    # SIGKILL comes from outside (XLA aborts with SIGABRT or faults with SIGSEGV): the out-of-memory
    # killer, a user's kill -9. The file is not to blame for that: run the request once more.
    try:
        return _request_once(target, args, timeout)
    except WorkerDied as e:
        if not e.killed or e.out_of_memory:
            raise
        raise WorkerDied(
            "the worker process was killed from outside (SIGKILL) twice while doing this, once on a retry: "
            "the system's out-of-memory killer or a kill -9, not an error XLA reported",
            killed=True,
        ) from None


#: XLA's fatal line for unknown flags in XLA_FLAGS ("Unknown flag in ...: --a", "Unknown flags in ...: --a --b")
_XLA_FLAGS_DEATH: Final = re.compile(r"Unknown flags? in XLA_FLAGS: ((?:-+\w+(?:=[^\s;)]*)?[ \t]*)+)")


def _raise_if_xla_flags(e: WorkerDied) -> None:
    """A worker that died of a flag in ``XLA_FLAGS`` XLA does not know: the environment's fault, not
    the request's (the file, the program); every process that starts XLA with it dies the same way."""
    found = _XLA_FLAGS_DEATH.findall(e.reason)
    if found:
        what = " ".join(dict.fromkeys(f for group in found for f in group.split()))
        raise XlaRuntimeError(
            f"XLA_FLAGS holds a flag this XLA does not know: {what}; XLA ends any process that reads it "
            "(xlasdk read it in its worker process first, so this one lives): fix or unset XLA_FLAGS"
        ) from None


def _request_once(target: str, args: tuple[Any, ...], timeout: float | None) -> Any:
    global _worker
    with _lock:
        if _worker is not None and (_worker.xla_flags != os.environ.get("XLA_FLAGS")
                                    or _worker.memory_env != os.environ.get("XLASDK_WORKER_MEMORY")):
            _worker.kill()  # XLA_FLAGS or the budget changed since it started: a fresh worker, as a new process
            _worker = None
        if _worker is None or not _worker.alive():
            if _worker is not None:
                _worker.kill()
            try:
                _worker = _Worker()
            except OSError as e:  # cannot start a Python process (no such program, no processes left)
                raise WorkerDied(f"cannot start xlasdk's worker process ({sys.executable}): {e.strerror or e}",
                                 unavailable=True) from None
        w = _worker
        try:
            return w.call(target, args, timeout)
        except Failed:
            raise
        except BaseException:  # died, timed out, or interrupted mid-request: never reuse it
            w.kill()
            _worker = None
            raise


#: Runs a request that says what its death means in this process, set by :func:`.isolated_local.install`
#: (``runner(target, args, timeout, on_death)``); None: every request goes to the worker.
_local_runner: Callable[[str, tuple[Any, ...], float | None, Callable[[WorkerDied], BaseException]], Any] | None = None


def _here() -> bool:
    """Whether requests that say what their death means run in this process (:mod:`.isolated_local`)."""
    return _local_runner is not None


def prestart() -> None:
    """Start the worker now, in the background, unless one is running or a request is in flight.

    Returns at once (starting the process takes milliseconds; its imports, about 1 s, then run
    beside the caller's work): the loaders call it before they read and pre-check a file, and
    the CLI before it imports jaxlib. A worker that cannot start is left for the first request
    to report."""
    global _worker
    if os.environ.get("XLASDK_WORKER") == "1" or _here() or not _lock.acquire(blocking=False):
        return
    try:
        if _worker is None or not _worker.alive():
            if _worker is not None:
                _worker.kill()
            try:
                _worker = _Worker()
            except (OSError, XlaSdkError):  # the first request reports it
                _worker = None
    finally:
        _lock.release()


_flags_checked: str | None = None


def check_xla_flags() -> None:
    """Have XLA read ``XLA_FLAGS`` in the worker first, once per value: XLA ends the process that
    reads a flag it does not know (at its first client), so the process that creates clients must
    not be the first to read them. Nothing to do when ``XLA_FLAGS`` is unset or empty, or in the
    worker itself.

    Raises
    ------
    XlaRuntimeError
        A flag XLA does not know (named), or the worker could not be started.
    """
    global _flags_checked
    flags = os.environ.get("XLA_FLAGS", "")
    if not flags.strip() or flags == _flags_checked or os.environ.get("XLASDK_WORKER") == "1":
        return
    try:
        request("xlasdk._jaxlib.isolated:_read_xla_flags_in_worker", timeout=300.0)
    except WorkerDied as e:
        raise XlaRuntimeError(f"checking XLA_FLAGS in xlasdk's worker process: it died ({e.reason})") from None
    except Failed as e:  # pragma: no cover - a client that cannot start for another reason: XLA says why later
        if _XLA_FLAGS_DEATH.search(e.message):
            raise XlaRuntimeError(f"XLA_FLAGS: {e.message}") from None
    _flags_checked = flags


def _read_xla_flags_in_worker() -> None:  # pragma: no cover - runs in the worker process
    """XLA reads ``XLA_FLAGS`` when the process makes its first client (and dies on an unknown flag)."""
    from jaxlib import xla_client as _xc

    try:
        _xc.make_cpu_client(num_devices=1)
    except Exception as e:
        raise Failed("client", str(e)) from None


def worker_pid() -> int | None:
    """The worker's process id, or None when none is running (for tests and diagnostics)."""
    with _lock:
        return _worker.proc.pid if _worker is not None and _worker.alive() else None


def shutdown() -> None:
    """Stop the worker (a new one starts on the next request)."""
    global _worker
    with _lock:
        if _worker is not None:
            _worker.kill()
            _worker = None


def _after_fork_in_child() -> None:
    """A forked child must not share its parent's worker (their replies would cross) nor wait on
    the parent's spawner thread (it does not exist in the child): it starts its own."""
    global _lock, _worker, _spawn_pool
    _lock = threading.Lock()
    _worker = None
    _spawn_pool = None


import atexit  # noqa: E402

atexit.register(shutdown)
os.register_at_fork(after_in_child=_after_fork_in_child)


# -- the child side ----------------------------------------------------------------------------
def _die_with_parent() -> None:  # pragma: no cover - runs in the worker process
    """End this worker when the process that started it ends, however it ends (SIGKILL included).

    Linux ``PR_SET_PDEATHSIG`` (SIGKILL) acts at once, even while native code holds the GIL; a
    thread that watches ``getppid()`` covers other systems and the moment before the ``prctl``.
    """
    parent = int(os.environ.get("XLASDK_WORKER_PARENT", "0") or 0)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(1)
            time.sleep(0.25)

    if parent:
        if os.getppid() != parent:
            os._exit(1)
        threading.Thread(target=watch, name="xlasdk-parent-watch", daemon=True).start()


def _limit_memory() -> int | None:  # pragma: no cover - runs in the worker process
    """Apply the budget the parent chose (:func:`memory_budget`) to this process's ``RLIMIT_DATA``
    (its heap and private writable mappings: an allocation past it fails, Python's with a
    ``MemoryError``, XLA's with ``std::bad_alloc``); its address space, which XLA's thread stacks
    and reservations inflate, is left alone. The limit, or None."""
    limit = int(os.environ.get("XLASDK_WORKER_RLIMIT_DATA", "0") or 0)
    if limit <= 0:
        return None
    try:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    except (ImportError, OSError, ValueError):
        return None
    return limit


def _one_line(message: str) -> str:  # pragma: no cover - runs in the worker process
    return " ".join(message.split())[:300]


def _serve() -> None:  # pragma: no cover - runs in the worker process (tests exercise it there)
    """The worker's loop: read a request from stdin, run it, write the reply (with the request's
    id) to stdout. Ctrl-C reaches the whole terminal's process group: the worker ignores it, and
    the parent, which owns the request, decides (it replaces the worker)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    limit = _limit_memory()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed by native code goes to the log, never into the protocol
    inp = sys.stdin.buffer
    import importlib

    for name in _PRELOAD:  # before the first request, which may already be waiting in the pipe
        try:
            importlib.import_module(name)
        except Exception:  # noqa: S110 - the request that needs it reports the error
            pass
    while True:
        try:
            head = _read_exact(inp, _LEN.size)
        except EOFError:
            return
        rid, target, args = pickle.loads(_read_exact(inp, _LEN.unpack(head)[0]))
        try:
            modname, _, fname = target.partition(":")
            fn = getattr(importlib.import_module(modname), fname)
            reply: tuple[Any, ...] = (rid, "ok", fn(*args))
        except Failed as e:
            reply = (rid, "failed", e.stage, e.message)
        except RecursionError:
            reply = (rid, "failed", "recursion", "nested too deeply")
        except MemoryError:
            reply = (rid, "failed", "memory", budget_exceeded(limit))
        except Exception as e:  # a bug in the worker: report it, do not hang the parent
            reply = (rid, "failed", "internal", f"{type(e).__name__}: {e}")
        if limit is not None and reply[1] == "failed" and reply[2] != "memory" and is_out_of_memory(reply[3]):
            # an allocation failed cleanly (XLA's RESOURCE_EXHAUSTED, a caught std::bad_alloc)
            reply = (rid, "failed", "memory", f"{budget_exceeded(limit)} ({_one_line(reply[3])})")
        data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        out.write(_LEN.pack(len(data)) + data)
        out.flush()
