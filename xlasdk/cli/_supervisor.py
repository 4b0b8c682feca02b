"""Supervision of the ``xlasdk`` command: the verbs that start XLA run in a child process this one
watches (stages, --timeout, XLA aborts reported as one line); the child's entry points.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import IO, Any, NoReturn

from xlasdk._atomic import remove_pending_temp_files, remove_temp_files

from . import _common
from ._common import _SUPERVISED, EXIT_RUNTIME, UsageError, _ChildLink, _npz_path, failure_exit

# -- supervision ------------------------------------------------------------------------------------
# XLA reports a broken invariant by aborting the process (CHECK failures), and an execution is one
# native call that Python cannot interrupt (a While whose condition stays true, a Sort whose
# comparator is not a strict weak order run forever). So the verbs that start XLA (devices, inspect,
# convert, run) do their work in a child process that this process watches: a child that dies by a
# signal, or that XLA ends with exit(), becomes exit code 1 and one line naming what it was doing and
# XLA's "Check failed" line; --timeout kills the child once compiling and running have taken S
# seconds (exit code 1; reading files and starting up do not count). A watchdog
# thread calling os._exit(1) would handle --timeout only, not aborts, and would end any Python program
# that calls main() in-process; a child process does both and leaves its caller running.
# The child is forked when this process is the xlasdk command itself (main() with no arguments and
# the process's streams, on Linux, nothing of XLA started yet): a fork costs a few milliseconds and
# shares the jaxlib already imported, the child writes to the same stdout, and its stderr passes
# through this process line by line (XLA's fatal line and the stack trace after it are held back
# and summarized, unless --debug). main() called from Python runs in-process, except with
# --timeout, where it starts a fresh interpreter (forking a process that runs XLA can deadlock)
# and copies its output into the given streams. XLASDK_CLI_SUPERVISE=0 turns forking off (to run
# the CLI under a debugger).
# The child is the isolation, so it loads, verifies and compiles the file itself (_Requests: the
# worker's checks and limits, no worker process); should XLA end it in one of those steps, the
# command runs once more with the worker doing them, and reports that run's answer, as it always has.
_STAGES: dict[str, tuple[str, str]] = {  # what the child reports it is doing -> (noun, "while ..." phrase)
    "start": ("the start", "while starting"),
    "client": ("starting the device client", "while starting the device client"),
    "loading": ("loading the module", "while loading the module"),
    "compiling": ("the compilation", "while compiling"),
    "running": ("the run", "while running"),
    "writing": ("writing the output", "while writing the output"),
    "checking": ("checking the written file", "while checking the written file"),
    "comparing": ("the comparison", "while comparing"),
    "bisecting": ("the bisection", "while bisecting"),
}
#: what --timeout bounds: XLA's work, and compare's (its reference evaluation runs the program too)
_TIMED_STAGES = frozenset({"compiling", "running", "checking", "comparing", "bisecting"})
_CHILD_ENV = "XLASDK_CLI_CHILD"
#: What a spawned child runs (``python -c``): the supervisor's entry point, with the command's.
_SPAWN_CODE = "from xlasdk.cli import main; from xlasdk.cli._supervisor import _spawned_child; _spawned_child(main)"
_FATAL_START_RE = re.compile(
    r"^(?:F\d{4} \d\d:\d\d:\d\d|\*\*\* Check failure stack trace|LLVM ERROR|Fatal Python error)"
    r"|Check failed|RET_CHECK failure"
)


class _Requests:
    """The supervised child's :class:`xlasdk._jaxlib.isolated_local.Host`: the worker's requests
    (loads, compiles) run in the child. Before each, the parent is told its time limit and what the
    command prints when the request runs past it (``note {json}``), and after it that it ended
    (``note -``): a child that dies while a note is pending died in such a request."""

    def before(self, deaths: dict[str, BaseException], timeout: float | None, budget: int | None) -> None:
        report = {}
        for kind, e in deaths.items():
            code, label = _common.error_kind(None, e)
            report[kind] = [code == _common.EXIT_USAGE, label, _common._error_line(e)]
        if _common._CHILD is not None:
            _common._CHILD.send("note " + json.dumps({"deaths": report, "timeout": timeout}))

    def after(self) -> None:
        if _common._CHILD is not None:
            _common._CHILD.send("note -")


#: set in a child's environment when the worker's requests must go to the worker (the second run
#: of a command whose child died in a request it ran itself)
_WORKER_ENV = "XLASDK_CLI_CHILD_WORKER"


def _run_requests_here() -> None:
    """The child is the isolation: the worker's requests run in it (one process does the work)."""
    if os.environ.pop(_WORKER_ENV, None) == "1":
        return
    from xlasdk._jaxlib import isolated_local

    isolated_local.install(_Requests())


#: The signals that end a command: blocked from before the child is made until each side has its
#: handlers (the parent's: :func:`_forward_termination`; the child's: :func:`_child_signals`), so
#: that one sent in between waits for them instead of meeting Python's own (a traceback).
_ENDING_SIGNALS = frozenset(s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP"))
                            if s is not None)


def _child_interrupted(signum: int, frame: Any) -> None:
    """The child's SIGINT handler: end at once, exit status 130, the parent saying the one line
    "xlasdk: interrupted". A KeyboardInterrupt raised into whatever the child does could not be
    caught everywhere: in an import it left half-made modules (an ImportError or RecursionError
    later, an internal error), in a native extension's start or callback an abort (reported as XLA
    aborting on the user's file), before the command's own handler a traceback."""
    _child_ends()
    for stream in (sys.stdout, sys.stderr):  # what the command printed before the interrupt
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - the handler interrupted a write to this stream
            pass
    if _common._CHILD is not None:
        _common._CHILD.send("interrupted")
    os._exit(130)


def _child_terminated(signum: int, frame: Any) -> None:
    """The child's SIGTERM / SIGHUP handler: its temporary files removed, then the signal's own end."""
    _child_ends()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _child_ends() -> None:
    """What every end of the child does first: no second signal handled, temporary files removed."""
    for sig in _ENDING_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    remove_pending_temp_files()


def _child_signals() -> None:
    """Install the child's handlers and take the ending signals (blocked since before the child
    was made: one that came meanwhile is handled now). A signal the command was started with
    ignored (``nohup``, a background job's SIGINT) stays ignored."""
    for sig in _ENDING_SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _child_interrupted if sig == signal.SIGINT else _child_terminated)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _ENDING_SIGNALS)


def _child_exit(code: int) -> NoReturn:
    for sig in _ENDING_SIGNALS:  # the answer is complete: a signal now changes nothing
        signal.signal(sig, signal.SIG_IGN)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    child = _common._CHILD
    if child is not None:
        child.send(f"exit {code}")
    os._exit(code)


def _die_with_parent(parent: int) -> None:
    """Have the kernel kill this child when the supervising parent ends, however it ends (an
    interrupted parent cannot always kill a child that is inside XLA, which ignores Python's
    signal handlers): Linux ``PR_SET_PDEATHSIG``; elsewhere nothing."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - no prctl: the parent's own kill remains
        return
    if os.getppid() != parent:  # the parent ended before the request took effect
        os._exit(EXIT_RUNTIME)


def _forked_child(
    entry: Callable[[list[str]], int],
    argv: list[str],
    status_fd: int,
    quiet_fd: int,
    err_fd: int,
    parent_fds: tuple[int, ...],
) -> NoReturn:
    """The forked child: runs the command through ``entry`` (``xlasdk.cli.main``), then exits."""
    code = EXIT_RUNTIME
    try:
        for fd in parent_fds:
            os.close(fd)
        os.dup2(err_fd, 2)
        os.close(err_fd)
        _common._CHILD = _ChildLink(status_fd, quiet_fd)
        _child_signals()
        _run_requests_here()
        code = entry(argv)
    except BaseException:  # never return into the parent's code
        traceback.print_exc()
    finally:
        _child_exit(code)


def _spawned_child(entry: Callable[[list[str]], int]) -> NoReturn:
    """Entry point of a child started by :func:`_supervise` with a fresh interpreter: runs the
    command through ``entry`` (``xlasdk.cli.main``, which the child's command line passes)."""
    code = EXIT_RUNTIME
    _die_with_parent(os.getppid())
    try:
        status_fd, quiet_fd = (int(x) for x in os.environ.pop(_CHILD_ENV).split(","))
        _common._CHILD = _ChildLink(status_fd, quiet_fd)
        _child_signals()  # the parent started this interpreter with them blocked
        _run_requests_here()
        code = entry(sys.argv[1:])
    except BaseException:
        traceback.print_exc()
    finally:
        _child_exit(code)


def _xla_started() -> bool:
    """Whether this process already runs XLA (a client, the loader's worker, JAX's backends when
    JAX is used beside xlasdk): then it must not fork."""
    from xlasdk._jaxlib.jax_peer import jax_backends_started  # light: imports neither jax nor jaxlib

    if jax_backends_started():
        return True
    device = sys.modules.get("xlasdk.runtime.device")
    if getattr(device, "_clients", None):
        return True
    isolated = sys.modules.get("xlasdk._jaxlib.isolated")
    try:
        return getattr(isolated, "worker_pid", lambda: None)() is not None
    except Exception:  # pragma: no cover - a changed internal API: be safe
        return True


def _supervision(args: argparse.Namespace, own_process: bool) -> str | None:
    """``"fork"``, ``"spawn"`` or None (in-process) for this command."""
    if _common._CHILD is not None or args.command not in _SUPERVISED:
        return None
    if (
        own_process
        and sys.platform.startswith("linux")
        and os.environ.get("XLASDK_CLI_SUPERVISE", "1") != "0"
        and not _xla_started()
    ):
        return "fork"
    if getattr(args, "timeout", None) is None:
        return None
    if os.name != "posix":  # pragma: no cover
        raise UsageError("--timeout needs a POSIX system")
    return "spawn"


def _fatal_line(text: str) -> str | None:
    """XLA's fatal log line (``file.cc:12] Check failed: ...``, without the log prefix) in ``text``."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("xlasdk ")]
    found = next((ln for key in ("Check failed", "RET_CHECK failure", "LLVM ERROR", "Fatal Python error")
                  for ln in lines if key in ln), None)
    if found is None:
        found = next((ln for ln in lines if ln[:1] == "F" and ln[1:5].isdigit()), None)
    if found is None:
        return None
    head, sep, rest = found.partition("] ")
    if sep and head[:1] in "FEWI" and head[1:5].isdigit():  # F1201 12:00:00.000000  1234 file.cc:12] msg
        found = f"{head.rsplit(' ', 1)[-1]}] {rest.strip()}"
    return found[:1000]


class _Watch:
    """The parent's view of a supervised child: its stage and exit code (status pipe), its
    stderr passed on line by line, XLA's fatal line and what follows held back."""

    def __init__(self, err: IO[str], debug: bool) -> None:
        self.err = err
        self.debug = debug
        self.stage = "start"
        self.exit_code: int | None = None
        self.changed = threading.Condition()
        self.ended = False  # the status pipe closed: the child is gone
        self.clock: float | None = None  # when the timed stages began
        self.holding = False
        self.held: list[str] = []
        self.tail: list[str] = []
        self.note: dict[str, Any] | None = None  # a request the child runs now (_Requests), its deadline
        self.interrupted = False  # the child ended on SIGINT (_child_interrupted)

    @staticmethod
    def _lines(fd: int) -> Iterator[tuple[str, bool]]:
        buf = b""
        try:
            while True:
                try:
                    data = os.read(fd, 65536)
                except OSError:
                    break
                if not data:
                    break
                buf += data
                *lines, buf = buf.split(b"\n")
                for ln in lines:
                    yield ln.decode("utf-8", "replace"), True
            if buf:
                yield buf.decode("utf-8", "replace"), False
        finally:
            os.close(fd)

    def read_status(self, fd: int) -> None:
        try:
            for line, _ in self._lines(fd):
                kind, _, value = line.partition(" ")
                with self.changed:
                    if kind == "stage":
                        self.stage = value
                        if value in _TIMED_STAGES and self.clock is None:
                            self.clock = time.monotonic()
                    elif kind == "note":
                        self.note = None if value == "-" else json.loads(value)
                        if self.note is not None and self.note.get("timeout") is not None:
                            self.note["deadline"] = time.monotonic() + float(self.note["timeout"])
                    elif kind == "exit" and value.lstrip("-").isdigit():
                        self.exit_code = int(value)
                    elif kind == "interrupted":
                        self.interrupted = True
                    self.changed.notify_all()
        finally:
            with self.changed:
                self.ended = True
                self.changed.notify_all()

    def wait(self, timeout: float | None) -> str | None:
        """Wait for the child's end (None); ``"timeout"`` when ``timeout`` seconds of timed stages
        passed first, ``"limit"`` when a request the child runs (:class:`_Requests`) ran past its own."""
        with self.changed:
            while not self.ended and self.exit_code is None:  # "exit N" comes last, after every output
                deadlines = []
                if timeout is not None and self.clock is not None:
                    deadlines.append((self.clock + timeout, "timeout"))
                if self.note is not None and "deadline" in self.note:
                    deadlines.append((self.note["deadline"], "limit"))
                if not deadlines:
                    self.changed.wait()
                    continue
                when, what = min(deadlines)
                remaining = when - time.monotonic()
                if remaining <= 0:
                    return what
                self.changed.wait(remaining)
        return None

    def read_stderr(self, fd: int) -> None:
        for line, newline in self._lines(fd):
            if not self.holding and not self.debug and not line.startswith("xlasdk ") and _FATAL_START_RE.search(line):
                self.holding = True
            if self.holding:
                self.held.append(line)
                continue
            self.tail = [*self.tail[-199:], line]
            self._write(line + ("\n" if newline else ""))

    def read_stdout(self, fd: int, out: IO[str]) -> None:
        import codecs

        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        try:
            while True:
                data = os.read(fd, 65536)
                if not data:
                    break
                out.write(decoder.decode(data))
            out.write(decoder.decode(b"", final=True))
        except (OSError, ValueError):
            pass
        finally:
            os.close(fd)

    def _write(self, text: str) -> None:
        try:
            self.err.write(text)
            self.err.flush()
        except (OSError, ValueError):
            pass

    def release(self) -> None:
        """Pass on the held lines (the child went on after them: they were no fatal error)."""
        for line in self.held:
            self._write(line + "\n")
        self.held = []


class _Child:
    """A forked (``pid``) or spawned (``popen``) child: kill and reap."""

    def __init__(self, pid: int | None = None, popen: subprocess.Popen[bytes] | None = None) -> None:
        self.pid = pid if pid is not None else popen.pid if popen is not None else -1
        self.popen = popen
        self.returncode: int | None = None

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass

    def wait(self) -> int:
        if self.returncode is None:
            if self.popen is not None:
                self.returncode = self.popen.wait()
            else:
                while True:
                    try:
                        _, status = os.waitpid(self.pid, 0)
                        break
                    except InterruptedError:  # pragma: no cover
                        continue
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def _subject(args: argparse.Namespace) -> str:
    name = getattr(args, "file", None) or getattr(args, "input", None)
    return f"{name}: " if name else ""


def _output_targets(args: argparse.Namespace) -> list[str]:
    if args.command == "run" and getattr(args, "output", None):
        return [_npz_path(args.output)]
    if args.command == "convert":
        return [args.output]
    return []


def _supervise(
    args: argparse.Namespace,
    argv: list[str],
    out: IO[str],
    err: IO[str],
    fork: bool,
    entry: Callable[[list[str]], int],
    by_worker: bool = False,
) -> int:
    """Run the command in a child process and report how it ended (see "supervision" above).
    The child runs the worker's requests itself (:class:`_Requests`), unless ``by_worker``.

    ``entry`` runs the command in a forked child (``xlasdk.cli.main``); a spawned child imports
    ``xlasdk.cli.main`` itself (its command line names it)."""
    timeout: float | None = getattr(args, "timeout", None)
    watch = _Watch(err, args.debug)
    with tempfile.TemporaryFile() as quiet:
        status_r, status_w = os.pipe()
        err_r, err_w = os.pipe()
        out_r: int | None = None
        # The ending signals wait (blocked) until both sides have their handlers: the child takes
        # them in _child_signals (a spawned interpreter inherits the mask), this process in the try below.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _ENDING_SIGNALS)
        try:
            try:
                if fork:
                    out.flush()
                    err.flush()
                    parent = os.getpid()
                    pid = os.fork()
                    if pid == 0:
                        _die_with_parent(parent)
                        if by_worker:
                            os.environ[_WORKER_ENV] = "1"
                        _forked_child(entry, argv, status_w, quiet.fileno(), err_w, (status_r, err_r))
                    child = _Child(pid=pid)
                else:
                    import xlasdk

                    out_r, out_w = os.pipe()
                    env = dict(os.environ)
                    env[_CHILD_ENV] = f"{status_w},{quiet.fileno()}"
                    if by_worker:
                        env[_WORKER_ENV] = "1"
                    root = os.path.dirname(os.path.dirname(os.path.abspath(xlasdk.__file__)))
                    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
                    try:
                        popen = subprocess.Popen(
                            [sys.executable, "-c", _SPAWN_CODE, *argv],
                            stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w, env=env,
                            pass_fds=(status_w, quiet.fileno()),
                        )
                    except BaseException:
                        for fd in (out_r, status_r, err_r):
                            os.close(fd)
                        raise
                    finally:
                        os.close(out_w)
                    child = _Child(popen=popen)
            finally:
                os.close(status_w)
                os.close(err_w)
            readers = [
                threading.Thread(target=watch.read_status, args=(status_r,), daemon=True),
                threading.Thread(target=watch.read_stderr, args=(err_r,), daemon=True),
            ]
            if out_r is not None:
                readers.append(threading.Thread(target=watch.read_stdout, args=(out_r, out), daemon=True))
            for t in readers:
                t.start()
            ending = _forward_termination(child)
        except BaseException:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            raise
        timed_out = interrupted = False
        expired: str | None = None
        try:
            try:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a signal that came meanwhile lands here
                expired = watch.wait(timeout)
                if expired is not None:
                    child.kill()
                    timed_out = watch.exit_code is None
            except KeyboardInterrupt:  # Ctrl-C reached this process; a child inside XLA cannot stop by itself
                interrupted = True
                readers[0].join(2.0)
                child.kill()
            except _Terminated:  # SIGTERM / SIGHUP: the handler killed the child
                pass
            # The child's end is reaped and cleaned up whole: a signal now waits until that is done
            # (one raised between waitpid and its result, or in a temporary file's removal, left
            # an "internal error" or a reaped child waited for again; the reader threads were
            # started with these signals blocked, so only this thread takes them).
            settling = signal.pthread_sigmask(signal.SIG_BLOCK, _ENDING_SIGNALS)
            try:
                rc = child.wait()
                for t in readers[1:]:
                    t.join(5.0)
                if watch.exit_code is None:  # killed, or died: it may have left a temporary file
                    for target in _output_targets(args):
                        remove_temp_files(target, child.pid)
            finally:
                try:
                    signal.pthread_sigmask(signal.SIG_SETMASK, settling)  # a signal that came meanwhile lands here
                except _Terminated:
                    pass
                except KeyboardInterrupt:
                    interrupted = True
        finally:
            ending.restore()
        if ending.signum is not None:
            raise SystemExit(128 + ending.signum)
        if interrupted or watch.interrupted:
            if watch.exit_code != 130:  # 130: the command's own handler said it
                err.write("xlasdk: interrupted\n")
            return 130
        if watch.exit_code is not None:
            watch.release()
            return watch.exit_code
        noun, during = _STAGES.get(watch.stage, (watch.stage, f"while {watch.stage}"))
        note = watch.note
        if timed_out and expired == "limit" and note is not None:
            return _report_timed_out(args, err, note)
        if note is not None and not timed_out and watch.exit_code is None and not by_worker:
            # died in a load or compile it ran itself: the command runs once more with the worker
            # doing those (an abort is deterministic), so that it reports the death as it always
            # has (the file's pre-checks name the line XLA died on, a kill from outside is retried)
            return _supervise(args, argv, out, err, fork, entry, by_worker=True)
        if timed_out:
            assert timeout is not None
            err.write(f"xlasdk {args.command}: error: {_subject(args)}{noun} did not finish within "
                      f"{timeout:g} s (--timeout)\n")
            return failure_exit(args.command)
        quiet.seek(0)
        logged = "\n".join([*watch.held, *watch.tail]) + "\n" + quiet.read()[-65536:].decode("utf-8", "replace")
        if args.debug:
            watch.release()
        fatal = _fatal_line(logged)
        if rc < 0:
            try:
                sig = signal.Signals(-rc).name
            except ValueError:
                sig = f"signal {-rc}"
            if sig == "SIGABRT":
                how = f"XLA aborted {during} ({sig})"
            elif sig == "SIGKILL":
                how = f"the process was killed {during} (SIGKILL; out of memory?)"
            elif sig in ("SIGTERM", "SIGHUP", "SIGQUIT"):  # sent from outside: not XLA's doing
                how = f"the process was ended by {sig} {during}"
            else:
                how = f"XLA crashed {during} ({sig})"
        else:
            how = f"XLA ended the process {during} (exit status {rc})"
        msg = f"{how}: {fatal}" if fatal else how + ("" if args.debug else "; rerun with --debug to see XLA's log")
        err.write(f"xlasdk {args.command}: error: {_subject(args)}{' '.join(msg.split())}\n")
        return failure_exit(args.command)


def _report_timed_out(args: argparse.Namespace, err: IO[str], note: dict[str, Any]) -> int:
    """Write the error line the command prints when a request the child ran itself (``note``) ran
    past its time limit (what the caller raises when the worker is stopped so)."""
    usage, label, message = note["deaths"]["timed_out"]
    err.write(f"xlasdk {args.command}: {label}: {' '.join(message.split())}\n")
    return _common.EXIT_USAGE if usage else failure_exit(args.command)


class _Terminated(BaseException):
    """SIGTERM or SIGHUP reached the supervising process (raised by :class:`_Ending`'s handler)."""


class _Ending:
    """How the supervising process ends while its child runs. SIGTERM, SIGHUP: the child is
    killed and :class:`_Terminated` raised, once (the child's temporary files are removed before the
    process exits with 128 + the signal); SIGINT: KeyboardInterrupt, once. A second signal only
    kills the child again, so that the cleanup runs to its end. :meth:`restore` puts the previous
    handlers back. Handlers are only installed in the main thread."""

    def __init__(self, child: _Child) -> None:
        self.child = child
        self.signum: int | None = None
        self.interrupted = False
        self.saved: dict[int, Any] = {}
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in _ENDING_SIGNALS:
            if signal.getsignal(sig) is not signal.SIG_IGN:  # nohup's SIGHUP, a background job's SIGINT
                self.saved[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        if signum == signal.SIGINT:
            if not self.interrupted and self.signum is None:
                self.interrupted = True
                raise KeyboardInterrupt
            return
        self.child.kill()
        if self.signum is None and not self.interrupted:
            self.signum = signum
            raise _Terminated(signum)

    def restore(self) -> None:
        for sig, old in self.saved.items():
            signal.signal(sig, old)


def _forward_termination(child: _Child) -> _Ending:
    """Kill the child when this process is told to end (SIGTERM, SIGHUP); undone by ``restore()``."""
    return _Ending(child)
