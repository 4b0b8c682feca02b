"""The ``xlasdk`` command: list devices, inspect, convert and run XLA computations.

A thin argparse layer over the public API. Verbs: ``devices``, ``version``, ``inspect``,
``convert``, ``run``, ``cache info|clear``, ``launch``; ``xlasdk VERB --help`` documents each.

Exit codes: 0 success; 1 runtime failure (compilation or execution, XLA aborting, ``--timeout``);
2 usage or input error (bad arguments, unreadable or invalid files, inputs that do not match the
program). Run as the ``xlasdk`` command, the verbs that start XLA work in a supervised child
process (see "supervision" below), so that an abort in XLA is an error line, not a crash. Errors are
one line on stderr, ``xlasdk VERB: error: ...``; ``--debug`` adds the Python traceback and XLA's own
log output. Output piped into a reader that leaves early (``xlasdk inspect f.hlo | head -1``) ends
the command quietly with exit code 0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import zipfile
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import IO, Any, NoReturn

import numpy as np

__all__ = ["main", "build_parser"]

EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """A bad command line or input file (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``xlasdk VERB: error: ... (see --help)``), exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


# -- small helpers ---------------------------------------------------------------------------------
def _api() -> Any:
    """The public API module: ``xlasdk`` once it exports the runtime, else ``xlasdk.runtime``."""
    import xlasdk

    if hasattr(xlasdk, "compile"):
        return xlasdk
    from xlasdk import runtime

    return runtime


@contextmanager
def _quiet_native_logs(enabled: bool) -> Iterator[None]:
    """Silence XLA's C++ log lines (fd 2) while a client starts, unless ``--debug``.

    In a supervised child the lines go to a file the parent reads if XLA ends the process there
    (an unknown flag in ``XLA_FLAGS`` does), so that its message is not lost."""
    if not enabled:
        yield
        return
    saved = None
    try:
        sys.stderr.flush()
        saved = os.dup(2)
        if _CHILD is not None:
            os.dup2(_CHILD.quiet_fd, 2)
        else:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            os.close(devnull)
    except OSError:  # pragma: no cover - no fd 2
        saved = None
    try:
        yield
    finally:
        if saved is not None:
            os.dup2(saved, 2)
            os.close(saved)


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
_SUPERVISED = frozenset({"devices", "inspect", "convert", "run"})
_STAGES: dict[str, tuple[str, str]] = {  # what the child reports it is doing -> (noun, "while ..." phrase)
    "start": ("the start", "while starting"),
    "client": ("starting the device client", "while starting the device client"),
    "loading": ("loading the module", "while loading the module"),
    "compiling": ("the compilation", "while compiling"),
    "running": ("the run", "while running"),
    "writing": ("writing the output", "while writing the output"),
    "checking": ("checking the written file", "while checking the written file"),
}
_TIMED_STAGES = frozenset({"compiling", "running", "checking"})  # what --timeout bounds: XLA's work
_CHILD_ENV = "XLASDK_CLI_CHILD"
_FATAL_START_RE = re.compile(
    r"^(?:F\d{4} \d\d:\d\d:\d\d|\*\*\* Check failure stack trace|LLVM ERROR|Fatal Python error)"
    r"|Check failed|RET_CHECK failure"
)


class _ChildLink:
    """The child's end: it reports stages and its exit code on ``status_fd``; XLA's muted start-up
    log goes to ``quiet_fd``."""

    def __init__(self, status_fd: int, quiet_fd: int) -> None:
        self.status_fd = status_fd
        self.quiet_fd = quiet_fd

    def send(self, line: str) -> None:
        try:
            os.write(self.status_fd, (line + "\n").encode())
        except OSError:  # the parent is gone
            pass


_CHILD: _ChildLink | None = None


def _stage(name: str) -> None:
    """Tell the supervising parent what the command does now (for its timeout / crash messages)."""
    if _CHILD is not None:
        _CHILD.send(f"stage {name}")


def _child_exit(code: int) -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if _CHILD is not None:
        _CHILD.send(f"exit {code}")
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


def _forked_child(argv: list[str], status_fd: int, quiet_fd: int, err_fd: int, parent_fds: tuple[int, ...]) -> NoReturn:
    global _CHILD
    code = EXIT_RUNTIME
    try:
        for fd in parent_fds:
            os.close(fd)
        os.dup2(err_fd, 2)
        os.close(err_fd)
        _CHILD = _ChildLink(status_fd, quiet_fd)
        code = main(argv)
    except BaseException:  # never return into the parent's code
        traceback.print_exc()
    finally:
        _child_exit(code)


def _spawned_child() -> NoReturn:
    """Entry point of a child started by :func:`_supervise` with a fresh interpreter."""
    global _CHILD
    code = EXIT_RUNTIME
    _die_with_parent(os.getppid())
    try:
        status_fd, quiet_fd = (int(x) for x in os.environ.pop(_CHILD_ENV).split(","))
        _CHILD = _ChildLink(status_fd, quiet_fd)
        code = main(sys.argv[1:])
    except BaseException:
        traceback.print_exc()
    finally:
        _child_exit(code)


def _xla_started() -> bool:
    """Whether this process already runs XLA (a client, the loader's worker): then it must not fork."""
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
    if _CHILD is not None or args.command not in _SUPERVISED:
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
                    elif kind == "exit" and value.lstrip("-").isdigit():
                        self.exit_code = int(value)
                    self.changed.notify_all()
        finally:
            with self.changed:
                self.ended = True
                self.changed.notify_all()

    def wait(self, timeout: float | None) -> bool:
        """Wait for the child's end; False when ``timeout`` seconds of timed stages passed first."""
        with self.changed:
            while not self.ended and self.exit_code is None:  # "exit N" comes last, after every output
                if timeout is None or self.clock is None:
                    self.changed.wait()
                    continue
                remaining = self.clock + timeout - time.monotonic()
                if remaining <= 0:
                    return False
                self.changed.wait(remaining)
        return True

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


def _supervise(args: argparse.Namespace, argv: list[str], out: IO[str], err: IO[str], fork: bool) -> int:
    """Run the command in a child process and report how it ended (see "supervision" above)."""
    from xlasdk._atomic import remove_temp_files

    timeout: float | None = getattr(args, "timeout", None)
    watch = _Watch(err, args.debug)
    with tempfile.TemporaryFile() as quiet:
        status_r, status_w = os.pipe()
        err_r, err_w = os.pipe()
        out_r: int | None = None
        try:
            if fork:
                out.flush()
                err.flush()
                parent = os.getpid()
                pid = os.fork()
                if pid == 0:
                    _die_with_parent(parent)
                    _forked_child(argv, status_w, quiet.fileno(), err_w, (status_r, err_r))
                child = _Child(pid=pid)
            else:
                import xlasdk

                out_r, out_w = os.pipe()
                env = dict(os.environ)
                env[_CHILD_ENV] = f"{status_w},{quiet.fileno()}"
                root = os.path.dirname(os.path.dirname(os.path.abspath(xlasdk.__file__)))
                env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
                try:
                    popen = subprocess.Popen(
                        [sys.executable, "-c", "from xlasdk.cli import _spawned_child; _spawned_child()", *argv],
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
        timed_out = interrupted = False
        restore = _forward_termination(child)
        try:
            if not watch.wait(timeout):
                child.kill()
                timed_out = watch.exit_code is None
        except KeyboardInterrupt:  # Ctrl-C reached both; a child inside XLA cannot stop by itself
            interrupted = True
            readers[0].join(2.0)
            child.kill()
        finally:
            restore()
        rc = child.wait()
        for t in readers[1:]:
            t.join(5.0)
        if watch.exit_code is None:  # killed, or died: it may have left a temporary file
            for target in _output_targets(args):
                remove_temp_files(target, child.pid)
        if interrupted:
            if watch.exit_code != 130:
                err.write("xlasdk: interrupted\n")
            return 130
        if watch.exit_code is not None:
            watch.release()
            return watch.exit_code
        noun, during = _STAGES.get(watch.stage, (watch.stage, f"while {watch.stage}"))
        if timed_out:
            assert timeout is not None
            err.write(f"xlasdk {args.command}: error: {_subject(args)}{noun} did not finish within "
                      f"{timeout:g} s (--timeout)\n")
            return EXIT_RUNTIME
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
            else:
                how = f"XLA crashed {during} ({sig})"
        else:
            how = f"XLA ended the process {during} (exit status {rc})"
        msg = f"{how}: {fatal}" if fatal else how + ("" if args.debug else "; rerun with --debug to see XLA's log")
        err.write(f"xlasdk {args.command}: error: {_subject(args)}{' '.join(msg.split())}\n")
        return EXIT_RUNTIME


def _forward_termination(child: _Child) -> Any:
    """Kill the child when this process is told to end (SIGTERM, SIGHUP); returns the undo function."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    saved: dict[int, Any] = {}

    def handler(signum: int, frame: Any) -> None:
        child.kill()
        raise SystemExit(128 + signum)

    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            saved[sig] = signal.signal(sig, handler)

    def restore() -> None:
        for sig, old in saved.items():
            signal.signal(sig, old)

    return restore


def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def _human_time(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1:
        return f"{s * 1e3:.3f} ms"
    return f"{s:.3f} s"


def _table(rows: list[list[str]], out: IO[str]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")


def _device(args: argparse.Namespace) -> Any:
    rt = _api()
    from xlasdk.runtime.device import UnknownDeviceError, _resolve_device

    _stage("client")
    with _quiet_native_logs(not args.debug):
        if args.device is None:
            return rt.devices()[0]
        try:
            return _resolve_device(args.device)
        except UnknownDeviceError:
            # The API's message points at xs.client(...) / xs.load_pjrt_plugin(...); say it in CLI terms.
            raise UsageError(_unknown_device_message(args.device)) from None


def _unknown_device_message(spec: str) -> str:
    """Why ``--device SPEC`` names no device, the devices there are, and how to get more CPU devices."""
    from xlasdk.runtime.device import UnknownDeviceError

    rt = _api()
    known = ", ".join(str(d) for d in rt.devices())
    more = (
        " (for more CPU devices set XLA_FLAGS=--xla_force_host_platform_device_count=N; "
        "see 'xlasdk devices')"
    )
    m = re.match(r"^\s*([A-Za-z_]\w*)\s*(?::\s*(\d+))?\s*$", spec)
    if m is None:
        return f"--device {spec!r}: expected PLATFORM:ID such as cpu:0; the devices are {known} (see 'xlasdk devices')"
    platform = m.group(1)
    try:
        devs = rt.devices(platform)
    except UnknownDeviceError:
        return f"--device {spec}: no platform {platform!r}; the devices are {known} (see 'xlasdk devices')"
    names = ", ".join(str(d) for d in devs)
    count = f"{len(devs)} device{'s' if len(devs) != 1 else ''}"
    hint = more if devs and devs[0].platform == "cpu" else " (see 'xlasdk devices')"
    return f"--device {spec}: no such device; the {platform} platform has {count}: {names}{hint}"


def _load(path: str, fmt: str | None = None, option: str = "--format") -> Any:
    """``load_computation(path, fmt)``; errors about the forced format name ``option`` (``--from``...)."""
    from xlasdk.errors import FormatError
    from xlasdk.formats import load_computation

    try:
        return load_computation(path, fmt)
    except FormatError as e:
        msg = str(e)
        if fmt is not None and msg.startswith("unknown format "):
            raise UsageError(f"{option} {fmt}: {msg}") from None
        if fmt is not None and ": the suffix says " in msg:  # the API's name for its format= argument
            raise UsageError(
                msg.replace(": the suffix says ", f": {option} {fmt} says ", 1) + f"; drop {option} to detect it"
            ) from None
        raise


def _check_writable(path: str, label: str) -> None:
    """Reject an output ``path`` that cannot be written (missing directory...) before any work is done.

    ``label`` starts the message, e.g. ``--output out.npz``.
    """
    full = os.path.abspath(path)
    parent = os.path.dirname(full)
    if os.path.isdir(full):
        raise UsageError(f"{label}: cannot write: it is a directory")
    if not os.path.exists(parent):
        raise UsageError(f"{label}: cannot write: directory {parent} does not exist")
    if not os.path.isdir(parent):
        raise UsageError(f"{label}: cannot write: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK) or (os.path.exists(full) and not os.access(full, os.W_OK)):
        raise UsageError(f"{label}: cannot write: permission denied")


# -- devices / version --------------------------------------------------------------------------------
def _cmd_devices(args: argparse.Namespace, out: IO[str]) -> int:
    rt = _api()
    from xlasdk import distributed
    from xlasdk.runtime.device import UnknownDeviceError

    _stage("client")
    joined = False
    if os.environ.get(distributed.ENV_COORDINATOR) and not distributed.is_initialized():
        # Under 'xlasdk launch' (or with the variables set by hand): join the job, list every process's devices.
        distributed.initialize()
        joined = True
    try:
        with _quiet_native_logs(not args.debug):
            try:
                devs = rt.devices(args.platform)
            except UnknownDeviceError:
                known = ", ".join(str(d) for d in rt.devices())
                raise UsageError(f"--platform {args.platform}: no such platform; the devices are {known}") from None
        if distributed.is_initialized():
            me = distributed.process_index()
            out.write(f"process {me} of {distributed.process_count()}\n")
            rows = [["DEVICE", "PLATFORM", "ID", "PROCESS", "LOCAL", "KIND"]]
            for d in devs:
                local = "yes" if d.process_index == me else "no"
                rows.append([str(d), str(d.platform), str(d.id), str(d.process_index), local, str(d.device_kind)])
        else:
            rows = [["DEVICE", "PLATFORM", "ID", "KIND"]]
            for d in devs:
                rows.append([str(d), str(d.platform), str(d.id), str(d.device_kind)])
        _table(rows, out)
        out.flush()
    finally:
        if joined:
            distributed.shutdown()
    return EXIT_OK


class _BinarySink:
    """A binary stream writing into a text stream (``main(stdout=StringIO())``)."""

    def __init__(self, text: IO[str]) -> None:
        self.text = text

    def write(self, data: bytes) -> int:
        self.text.write(data.decode("utf-8", "replace"))
        return len(data)

    def flush(self) -> None:
        self.text.flush()


def _binary(stream: IO[str]) -> Any:
    buffer = getattr(stream, "buffer", None)
    return buffer if buffer is not None else _BinarySink(stream)


def _cmd_launch(args: argparse.Namespace, out: IO[str]) -> int:
    from xlasdk.launch import command_for, launch

    if args.num_processes < 1:
        raise UsageError(f"-n must be >= 1, got {args.num_processes}")
    if args.local_device_count is not None and args.local_device_count < 1:
        raise UsageError(f"--local-device-count must be >= 1, got {args.local_device_count}")
    if args.grace < 0:
        raise UsageError(f"--grace must be >= 0 seconds, got {args.grace:g}")
    try:
        command = command_for(args.launch_module, args.launch_script, args.launch_args)
    except ValueError as e:
        raise UsageError(str(e)) from None
    out.flush()
    result = launch(
        command, args.num_processes, timeout=args.timeout, local_device_count=args.local_device_count,
        join_timeout=args.join_timeout, keep_going=args.keep_going, grace=args.grace, prefix=not args.no_prefix,
        stdout=_binary(out), stderr=_binary(_ERR_STREAM[0] if _ERR_STREAM else sys.stderr),
    )
    return result.returncode


_ERR_STREAM: list[IO[str]] = []  # the error stream of the running main() (launch copies stderr there)


def _cmd_version(args: argparse.Namespace, out: IO[str]) -> int:
    from xlasdk import __version__
    from xlasdk._jaxlib import mlir

    out.write(
        f"xlasdk {__version__}\njaxlib {mlir.JAXLIB_VERSION}\n"
        f"stablehlo {mlir.stablehlo_current_version()} (writes portable artifacts back to "
        f"{mlir.stablehlo_minimum_version()})\npython {sys.version.split()[0]}\n"
    )
    return EXIT_OK


# -- inspect ------------------------------------------------------------------------------------------
def _format_label(comp: Any, path: str) -> str:
    from xlasdk.formats import Format, portable_artifact_version

    fmt = comp.source_format
    label = Format(fmt).description if fmt else "?"
    if fmt == Format.PORTABLE_ARTIFACT.value:
        try:
            with open(path, "rb") as f:
                v = portable_artifact_version(f.read(64))
        except OSError:
            v = None
        label += f", StableHLO v{v}" if v else " (plain MLIR bytecode)"
    return label


_COMP_HEADER_RE = re.compile(r"^(ENTRY\s+)?%?([^\s(]+)\s*\(.*\{\s*$")


def _op_counts(hlo_text: str) -> tuple[Counter[str], list[tuple[str, Counter[str]]]]:
    """Opcode counts of the entry computation, and ``(name, counts)`` of every other computation.

    Sub-computations are reducer / comparator / loop-body regions the entry computation calls;
    their parameters and instructions are not the program's, so they are counted apart.
    """
    from xlasdk.formats import hlo_opcode_counts
    from xlasdk.formats.hlo_text import _parse_hlo_text

    mod = _parse_hlo_text(hlo_text)
    comps: list[tuple[str, bool, Counter[str]]] = []
    if mod is not None:
        for c in mod.comps:
            comps.append((c.name, c.entry, Counter(i.opcode for i in c.instrs)))
    else:  # text the small parser does not follow: XLA prints one computation block per header line
        name, entry = "", False
        body: list[str] = []
        for line in hlo_text.splitlines():
            m = _COMP_HEADER_RE.match(line)
            if m is not None:
                name, entry, body = m.group(2), m.group(1) is not None, []
            elif line.startswith("}") and name:
                comps.append((name, entry, hlo_opcode_counts("\n".join(body))))
                name = ""
            elif name:
                body.append(line)
    if not comps:
        return hlo_opcode_counts(hlo_text), []
    entry_idx = next((i for i, c in enumerate(comps) if c[1]), len(comps) - 1)  # HLO: ENTRY, else the last
    subs = [(n, c) for i, (n, _, c) in enumerate(comps) if i != entry_idx]
    return comps[entry_idx][2], subs


def _sorted_counts(counts: Counter[str]) -> dict[str, int]:
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _cmd_inspect(args: argparse.Namespace, out: IO[str]) -> int:
    _stage("loading")
    comp = _load(args.file, args.format)
    ps = comp.program_shape()
    counts, subs = _op_counts(comp.as_hlo_text(print_metadata=False))
    sub_counts: Counter[str] = Counter()
    for _, c in subs:
        sub_counts.update(c)
    report: dict[str, Any] = {
        "file": args.file,
        "format": _format_label(comp, args.file),
        "name": comp.name,
        "program_shape": str(ps),
        "parameters": [
            {"index": i, "name": n, "shape": str(s)}
            for i, (n, s) in enumerate(zip(ps.parameter_names(), ps.parameter_shapes(), strict=True))
        ],
        "result": str(ps.result_shape()),
        "op_counts": _sorted_counts(counts),
        "sub_computations": {
            "count": len(subs),
            "names": [n for n, _ in subs],
            "op_counts": _sorted_counts(sub_counts),
        },
    }
    exe = None
    if not args.no_compile:
        dev = _device(args)
        rt = _api()
        _stage("compiling")
        exe = rt.compile(comp, dev)
        report["device"] = str(dev)
        report["cost_analysis"] = exe.cost_analysis()
        report["memory"] = exe.memory_stats().as_dict()
    if args.json:
        if args.optimized and exe is not None:
            report["optimized_hlo"] = exe.hlo_text()
        if args.hlo:
            report["hlo"] = comp.as_hlo_text()
        if args.stablehlo:
            report["stablehlo"] = comp.as_stablehlo_text()
        out.write(json.dumps(report, indent=2) + "\n")
        return EXIT_OK
    out.write(f"file:          {args.file} ({report['format']})\n")
    out.write(f"name:          {comp.name}\n")
    out.write(f"program shape: {ps}\n")
    out.write("parameters:\n")
    if not report["parameters"]:
        out.write("  (none)\n")
    for p in report["parameters"]:
        out.write(f"  {p['index']:>3}  {p['name']:<20} {p['shape']}\n")
    out.write(f"result:        {ps.result_shape()}\n")
    out.write(f"ops:           {sum(counts.values())} HLO instructions in the entry computation\n")
    for op, n in report["op_counts"].items():
        out.write(f"  {op:<28} {n}\n")
    if subs:
        label = f"in {len(subs)} sub-computation{'s' if len(subs) != 1 else ''}:"
        shown = ", ".join(n for n, _ in subs[:4]) + (", ..." if len(subs) > 4 else "")
        out.write(f"  {label:<28} {sum(sub_counts.values())} more ({shown})\n")
        for op, n in report["sub_computations"]["op_counts"].items():
            out.write(f"    {op:<26} {n}\n")
    if exe is not None:
        out.write(f"cost analysis ({report['device']}):\n")
        for k, v in sorted(report["cost_analysis"].items()):
            if "{" in k:  # per-operand / per-output breakdowns
                continue
            out.write(f"  {k:<28} {v:,.0f}\n")
        out.write("memory:\n")
        for k, v in report["memory"].items():
            if v or not k.startswith("host_"):
                out.write(f"  {k:<34} {_human_bytes(v)}\n")
    if args.hlo:
        out.write("\nHLO:\n" + comp.as_hlo_text())
    if args.stablehlo:
        out.write("\nStableHLO:\n" + comp.as_stablehlo_text())
    if args.optimized:
        if exe is None:
            raise UsageError("--optimized needs compilation; drop --no-compile")
        out.write("\noptimized HLO:\n" + exe.hlo_text())
    return EXIT_OK


# -- convert ------------------------------------------------------------------------------------------
class CheckFailed(Exception):
    """What ``convert`` wrote does not load back or compile (exit code 1; nothing is written)."""


def _save_error(e: Exception, output: str) -> UsageError:
    """A FormatError of the save API in the CLI's words: ``OUT: ...``, ``--to``, ``--target-version``."""
    msg = str(e)
    prefix = f"save({output!r}): "
    if msg.startswith(prefix):
        msg = f"{output}: " + msg[len(prefix):]
    msg = msg.replace("target_version", "--target-version").replace("pass format=", "pass --to FORMAT")
    return UsageError(msg)


def _shape_signature(comp: Any) -> tuple[list[str], str]:
    ps = comp.program_shape()
    return [str(s) for s in ps.parameter_shapes()], str(ps.result_shape())


def _check_written(args: argparse.Namespace, comp: Any, fmt: Any, tmp: str) -> str:
    """Load the file ``convert`` wrote (still at its temporary name ``tmp``) and, when the source
    compiles, compile it: a file that fails either is not renamed into place. Returns what was
    checked, for the report."""
    from xlasdk.errors import CompileError, FormatError, XlaRuntimeError
    from xlasdk.formats import load_computation

    _stage("checking")
    out_name = args.output
    try:
        back = load_computation(tmp, fmt)
    except FormatError as e:
        msg = _error_line(e).replace(tmp, out_name).replace(os.path.basename(tmp), os.path.basename(out_name))
        raise CheckFailed(f"{out_name}: the written file does not load back ({msg}); nothing was written") from None
    want, got = _shape_signature(comp), _shape_signature(back)
    if want != got:
        raise CheckFailed(
            f"{out_name}: the written file loads back with another program shape ({', '.join(got[0])} -> {got[1]}, "
            f"expected {', '.join(want[0])} -> {want[1]}); nothing was written"
        )
    if args.no_compile:
        return "loads back"
    rt = _api()
    with _quiet_native_logs(not args.debug):
        dev = rt.devices()[0]
    try:
        rt.compile(back, dev, cache=False)
    except (CompileError, XlaRuntimeError) as e:
        try:
            rt.compile(comp, dev, cache=False)
        except (CompileError, XlaRuntimeError):
            # the source does not compile here either (a custom call, another platform): nothing lost
            return f"loads back; like {args.input}, it does not compile on {dev}"
        raise CheckFailed(
            f"{out_name}: the written {fmt.description} does not compile, though {args.input} does "
            f"({_error_line(e)}); nothing was written"
        ) from None
    return "loads back and compiles"


def _cmd_convert(args: argparse.Namespace, out: IO[str]) -> int:
    from xlasdk.errors import FormatError
    from xlasdk.formats import Format, _parse_format, format_from_suffix, portable_artifact_version
    from xlasdk.formats.saving import save_format, write_computation
    from xlasdk.formats.sniff import _SUFFIX_LIST

    to = args.to_format
    if to is not None:
        try:
            _parse_format(to)
        except FormatError as e:
            raise UsageError(f"--to {to}: {e}") from None
    elif format_from_suffix(args.output) is None and not args.output.lower().endswith(".txt"):
        raise UsageError(
            f"{args.output}: unknown suffix; use one of {_SUFFIX_LIST}, or pass --to FORMAT (hlo, mlir, mlirbc or pb)"
        )
    _check_writable(args.output, args.output)
    try:
        fmt = save_format(args.output, to, args.target_version)
    except FormatError as e:
        raise _save_error(e, args.output) from None
    _stage("loading")
    comp = _load(args.input, args.from_format, "--from")
    _stage("writing")

    checked: list[str] = []

    def check(tmp: str) -> None:
        if not args.no_check:
            checked.append(_check_written(args, comp, fmt, tmp))

    try:
        write_computation(comp, args.output, fmt, target_version=args.target_version, check=check)
    except FormatError as e:  # the API's wording: save('OUT'): ..., format=, target_version
        raise _save_error(e, args.output) from None
    size = os.path.getsize(args.output)
    label = fmt.description
    if fmt is Format.PORTABLE_ARTIFACT:
        with open(args.output, "rb") as f:
            v = portable_artifact_version(f.read(64))
        label += f", StableHLO v{v}" if v else ""
    out.write(f"wrote {args.output} ({label}, {size} bytes{''.join(', ' + c for c in checked)})\n")
    return EXIT_OK


# -- run: arrays in and out ------------------------------------------------------------------------
# numpy has no bf16, fp8, int4 or int2: ml_dtypes adds them, and np.save writes such arrays with a
# raw-bytes descriptor ('|V2', '|V1', and '<f1' for float8_e5m2, which np.load then refuses). Inputs
# holding raw bytes of the right size are read as the parameter's element type; outputs of those
# types are written as raw bytes ('|V2'...) that plain numpy loads, with their ml_dtypes names in a
# '__dtypes__' entry of the .npz, so that `xlasdk run --inputs out.npz` reads them back exactly.
_DTYPES_KEY = "__dtypes__"


def _is_extension(dt: np.dtype[Any]) -> bool:
    """A dtype numpy does not know (ml_dtypes' bfloat16, float8_*, int4, ...): user-defined type numbers."""
    return dt.num >= 256


def _is_raw(dt: np.dtype[Any]) -> bool:
    """Plain bytes (``|V2``): what numpy reads back from an ml_dtypes array's file."""
    return dt.kind == "V" and not _is_extension(dt) and dt.names is None and dt.subdtype is None


def _describe_array(a: np.ndarray[Any, Any]) -> str:
    from xlasdk.types import dtype_to_etype, hlo_element_name

    dims = ",".join(str(d) for d in a.shape)
    if _is_raw(a.dtype):
        return f"raw {a.dtype.itemsize}-byte values ({a.dtype.str}[{dims}])"
    try:
        et = hlo_element_name(dtype_to_etype(a.dtype))
    except Exception:
        et = str(a.dtype)
    return f"{et}[{dims}]"


def _param_index(name: str, names: Sequence[str]) -> int | None:
    if name in names:
        return list(names).index(name)
    for prefix in ("", "p", "arg", "arr_", "param", "output_"):  # output_N: another run's --output
        rest = name[len(prefix) :] if name.startswith(prefix) else None
        if rest is not None and rest.isdigit() and int(rest) < len(names):
            return int(rest)
    return None


def _read_raw_npy(f: IO[bytes]) -> np.ndarray[Any, Any]:
    """An .npy whose descriptor numpy does not accept (``'<f1'``, np.save's descriptor of
    ml_dtypes.float8_e5m2) as raw bytes of its item size; anything else raises ValueError."""
    import ast

    magic = f.read(8)
    if len(magic) != 8 or magic[:6] != b"\x93NUMPY":
        raise ValueError("not an .npy file")
    major = magic[6]
    size_len = 2 if major == 1 else 4
    size_bytes = f.read(size_len)
    if len(size_bytes) != size_len:
        raise ValueError("truncated header")
    header = f.read(int.from_bytes(size_bytes, "little")).decode("utf-8" if major >= 3 else "latin1")
    d = ast.literal_eval(header)
    if not isinstance(d, dict) or not {"descr", "shape", "fortran_order"} <= d.keys():
        raise ValueError("malformed header")
    descr, shape = d["descr"], d["shape"]
    m = re.fullmatch(r"[<>|=]?[a-zA-Z](\d+)", descr) if isinstance(descr, str) else None
    if m is None or not isinstance(shape, tuple) or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise ValueError(f"unsupported header {header.strip()!r}")
    itemsize = int(m.group(1))
    count = int(np.prod(shape, dtype=np.int64))
    data = f.read(count * itemsize)
    if len(data) != count * itemsize:
        raise ValueError(f"truncated data: {len(data)} of {count * itemsize} bytes")
    raw = np.frombuffer(data, dtype=f"V{itemsize}")
    return raw.reshape(shape, order="F" if d["fortran_order"] else "C")


def _unknown_descr(e: BaseException) -> bool:
    return isinstance(e, ValueError) and "descr" in str(e)


def _load_npy(path: str, what: str) -> np.ndarray[Any, Any]:
    try:
        a = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise UsageError(f"{what}: {path}: no such file") from None
    except (OSError, ValueError, EOFError) as e:
        if not _unknown_descr(e):
            raise UsageError(f"{what}: {path}: not a readable .npy file ({e})") from None
        try:
            with open(path, "rb") as f:
                a = _read_raw_npy(f)
        except (OSError, ValueError, SyntaxError) as e2:
            raise UsageError(f"{what}: {path}: not a readable .npy file ({e}; {e2})") from None
    if not isinstance(a, np.ndarray):
        raise UsageError(f"{what}: {path}: holds several arrays; use --inputs for .npz files")
    return a


def _npz_arrays(path: str, what: str) -> tuple[list[tuple[str, np.ndarray[Any, Any]]], dict[str, str]]:
    """The arrays of an .npz in file order, and its ``__dtypes__`` manifest (key -> ml_dtypes name)."""
    try:
        npz = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise UsageError(f"{what}: {path}: no such file") from None
    except (OSError, ValueError, EOFError) as e:
        raise UsageError(f"{what}: {path}: not a readable .npz file ({e})") from None
    if isinstance(npz, np.ndarray):
        raise UsageError(f"{what}: {path}: a single array; use --input NAME={path}")
    arrays: list[tuple[str, np.ndarray[Any, Any]]] = []
    manifest: dict[str, str] = {}
    with npz:
        for key in npz.files:
            try:
                a = npz[key]
            except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
                if not _unknown_descr(e):
                    raise UsageError(f"{what}: {path}[{key}]: not a readable array ({e})") from None
                try:
                    with npz.zip.open(key + ".npy") as f:
                        a = _read_raw_npy(f)
                except (OSError, KeyError, ValueError, SyntaxError, zipfile.BadZipFile) as e2:
                    raise UsageError(f"{what}: {path}[{key}]: not a readable array ({e}; {e2})") from None
            if key == _DTYPES_KEY:
                try:
                    m = json.loads(str(a[()]))
                except (ValueError, TypeError, IndexError):
                    m = None
                if not isinstance(m, dict):
                    raise UsageError(f"{what}: {path}[{key}]: not a dtype manifest (JSON {{key: ml_dtypes name}})")
                manifest = {str(k): str(v) for k, v in m.items()}
                continue
            arrays.append((key, a))
    return arrays, manifest


def _manifest_dtype(name: str | None, itemsize: int) -> np.dtype[Any] | None:
    """The ml_dtypes dtype a manifest names, if it is one and has ``itemsize``-byte items."""
    if name is None:
        return None
    import ml_dtypes

    t = getattr(ml_dtypes, name, None)
    try:
        dt = np.dtype(t) if t is not None else None
    except TypeError:
        return None
    return dt if dt is not None and _is_extension(dt) and dt.itemsize == itemsize else None


def _typed_input(arr: np.ndarray[Any, Any], tag: str | None, want: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """``arr`` with raw bytes read as the element type the manifest names, else as ``want`` when
    the item sizes agree (else still raw: the caller reports it)."""
    if not _is_raw(arr.dtype):
        return arr
    tagged = _manifest_dtype(tag, arr.dtype.itemsize)
    if tagged is not None:
        return arr.view(tagged)
    return arr.view(want) if arr.dtype.itemsize == want.itemsize else arr


def _random_value(shape: Any, rng: np.random.Generator) -> np.ndarray[Any, Any]:
    import ml_dtypes as _ml

    ml_dtypes: Any = _ml  # untyped functions (iinfo)

    dt = np.dtype(shape.numpy_dtype())
    dims = tuple(shape.dimensions())
    kind = dt.kind
    if kind == "b":
        return rng.random(dims) < 0.5
    info: Any = None
    if kind in "iu":
        info = np.iinfo(dt)
    elif _is_extension(dt):
        try:
            info = ml_dtypes.iinfo(dt)  # int4, uint4, int2, uint2
        except (TypeError, ValueError):
            info = None
    if info is not None:
        return rng.integers(0, min(10, int(info.max) + 1), size=dims).astype(dt)
    if kind == "c":
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(dt)
    values = rng.standard_normal(dims)
    if _is_extension(dt) and np.isnan(np.array(-1.0).astype(dt).astype(np.float32)):  # no sign: f8e8m0fnu
        values = np.abs(values)
    return values.astype(dt)


def _gather_inputs(args: argparse.Namespace, ps: Any) -> list[np.ndarray[Any, Any]]:
    names = list(ps.parameter_names())
    shapes = list(ps.parameter_shapes())
    given: dict[int, tuple[np.ndarray[Any, Any], str, str | None]] = {}

    listing = ", ".join(f"{i}:{n}" for i, n in enumerate(names))

    def assign(key: str, arr: np.ndarray[Any, Any], source: str, where: str, tag: str | None = None) -> None:
        idx = _param_index(key, names)
        if idx is None and key.isdigit():
            have = f"{len(names)} parameter{'s' if len(names) != 1 else ''}"
            raise UsageError(
                f"{where}: parameter index {int(key)} is out of range; the program has {have}"
                + (f": {listing}" if names else "")
            )
        if idx is None:
            raise UsageError(f"{where}: no parameter named {key!r}; parameters are {listing or '(none)'}")
        if idx in given:
            raise UsageError(f"{where}: parameter {idx} ({names[idx]!r}) is given twice")
        given[idx] = (arr, source, tag)

    if args.inputs is not None:
        arrays, manifest = _npz_arrays(args.inputs, "--inputs")
        for key, a in arrays:
            assign(key, a, f"{args.inputs}[{key}]", f"--inputs {args.inputs}[{key}]", manifest.get(key))
    for spec in args.input or []:
        if "=" not in spec:
            raise UsageError(f"--input {spec!r}: expected NAME=FILE.npy")
        key, path = spec.split("=", 1)
        member = None
        head, sep, tail = path.rpartition(":")
        if sep and head.lower().endswith(".npz") and tail and not os.path.exists(path):  # FILE.npz:KEY
            path, member = head, tail
        if member is None:
            assign(key, _load_npy(path, f"--input {key}"), path, f"--input {spec}")
            continue
        arrays, manifest = _npz_arrays(path, f"--input {key}")
        found = dict(arrays)
        if member not in found:
            raise UsageError(f"--input {spec}: {path} has no array {member!r}; it holds {', '.join(found) or 'none'}")
        assign(key, found[member], f"{path}[{member}]", f"--input {spec}", manifest.get(member))
    rng = np.random.default_rng(args.seed)
    values: list[np.ndarray[Any, Any]] = []
    for i, (n, s) in enumerate(zip(names, shapes, strict=True)):
        if not s.is_array():
            raise UsageError(f"parameter {i} ({n!r}) has shape {s}: only array parameters can be given as inputs")
        if i not in given:
            if not args.random_inputs:
                raise UsageError(
                    f"missing input for parameter {i} ({n!r}, {s}); give --input {n}=FILE.npy, --inputs FILE.npz "
                    "or --random-inputs"
                )
            values.append(_random_value(s, rng))
            continue
        arr, source, tag = given[i]
        want_dt = np.dtype(s.numpy_dtype())
        arr = _typed_input(arr, tag, want_dt)
        if _is_raw(arr.dtype):
            raise UsageError(
                f"input for parameter {i} ({n!r}) must be {s} ({want_dt.itemsize}-byte elements), but {source} "
                f"holds {_describe_array(arr)}"
            )
        if tuple(arr.shape) != tuple(s.dimensions()) or arr.dtype != want_dt:
            raise UsageError(f"input for parameter {i} ({n!r}) must be {s}, but {source} holds {_describe_array(arr)}")
        values.append(arr)
    return values


def _npz_entries(host: Sequence[np.ndarray[Any, Any]]) -> dict[str, np.ndarray[Any, Any]]:
    """What ``--output`` writes: ``output_N`` per output; ml_dtypes arrays as raw bytes plus a
    ``__dtypes__`` manifest (JSON ``{"output_N": "bfloat16", ...}``), only when there are any."""
    entries: dict[str, np.ndarray[Any, Any]] = {}
    manifest: dict[str, str] = {}
    for i, a in enumerate(host):
        key = f"output_{i}"
        if _is_extension(a.dtype):
            entries[key] = np.ascontiguousarray(a).view(f"V{a.dtype.itemsize}")
            manifest[key] = a.dtype.name
        else:
            entries[key] = a
    if manifest:
        entries[_DTYPES_KEY] = np.array(json.dumps(manifest, sort_keys=True))
    return entries


def _summary(a: np.ndarray[Any, Any]) -> str:
    if a.size == 0:
        return "(empty)"
    flat = a.reshape(-1)
    try:
        f = flat.astype(np.float64) if a.dtype.kind not in "bc" else None
    except (TypeError, ValueError):
        f = None
    if f is not None:
        with np.errstate(all="ignore"):
            stats = f"min {np.nanmin(f):.6g}  max {np.nanmax(f):.6g}  mean {np.nanmean(f):.6g}"
        nan = int(np.isnan(f).sum())
        if nan:
            stats += f"  nan {nan}"
    elif a.dtype.kind == "b":
        stats = f"true {int(flat.sum())} of {flat.size}"
    else:
        stats = f"abs max {float(np.abs(flat).max()):.6g}"
    head = np.array2string(flat[:6], max_line_width=sys.maxsize, precision=6, separator=", ", threshold=6)
    if flat.size > 6:
        head = head[:-1] + ", ...]"
    return f"{stats}  {head}"


def _npz_path(output: str) -> str:
    return output if output.endswith(".npz") else output + ".npz"  # the name np.savez would give


def _spmd_counts(args: argparse.Namespace, comp: Any) -> tuple[int, int]:
    """``(replicas, partitions)``: the flags, else what the module records (its HLO header's
    ``replica_count`` / ``num_partitions``, its StableHLO ``mhlo.num_replicas`` /
    ``mhlo.num_partitions``, or the device count its shardings need), else 1."""
    from xlasdk.sharding import module_spmd_counts

    header = None
    if getattr(comp, "source_format", None) == "hlo":
        try:
            with open(args.file, "rb") as f:
                header = f.read(1 << 16).decode("utf-8", "replace")
        except OSError:
            header = None
    replicas, partitions = args.replicas, args.partitions
    if replicas is None or partitions is None:
        found_r, found_p = module_spmd_counts(comp, header)
        replicas = replicas if replicas is not None else found_r or 1
        partitions = partitions if partitions is not None else found_p or 1
    return replicas, partitions


def _spmd_device(args: argparse.Namespace, needed: int) -> Any:
    """The first device of a program on ``needed`` devices: of a CPU client with ``--devices`` (default:
    ``needed``) devices, or of ``--device``'s platform."""
    rt = _api()
    from xlasdk.runtime.device import UnknownDeviceError

    count = args.devices if args.devices is not None else needed
    if count < needed:
        raise UsageError(
            f"--devices {count}: the program runs on replicas x partitions = {needed} devices "
            "(see --replicas / --partitions)"
        )
    platform, index = "cpu", 0
    if args.device is not None:
        m = re.match(r"^\s*([A-Za-z_]\w*)\s*(?::\s*(\d+))?\s*$", args.device)
        if m is None:
            raise UsageError(f"--device {args.device!r}: expected PLATFORM or PLATFORM:ID such as cpu:0")
        platform, index = m.group(1), int(m.group(2) or 0)
    _stage("client")
    with _quiet_native_logs(not args.debug):
        try:
            devs = rt.client(platform, num_devices=count).devices()
        except UnknownDeviceError as e:
            raise UsageError(f"--devices {count}: {e}") from None
    if index + needed > len(devs):
        raise UsageError(
            f"--device {args.device}: the program needs {needed} devices from there, but the {platform} client has "
            f"{len(devs)} ({', '.join(str(d) for d in devs)})"
        )
    return devs[index]


def _cmd_run(args: argparse.Namespace, out: IO[str]) -> int:
    from xlasdk._atomic import atomic_write

    if args.repeat < 1:
        raise UsageError(f"--repeat must be >= 1, got {args.repeat}")
    if args.output is not None:  # before the (slow) load and compile
        _check_writable(_npz_path(args.output), f"--output {args.output}")
    for flag in ("devices", "replicas", "partitions"):
        v = getattr(args, flag, None)
        if v is not None and v < 1:
            raise UsageError(f"--{flag} must be >= 1, got {v}")
    _stage("loading")
    comp = _load(args.file, args.format)
    ps = comp.program_shape()
    inputs = _gather_inputs(args, ps)
    replicas, partitions = _spmd_counts(args, comp)
    spmd = replicas * partitions > 1 or args.devices is not None
    rt = _api()
    if spmd:
        dev = _spmd_device(args, replicas * partitions)
        where = (f"{replicas * partitions} {dev.platform} devices ({replicas} replica{'s' if replicas > 1 else ''} x "
                 f"{partitions} partition{'s' if partitions > 1 else ''})")
    else:
        dev = _device(args)
        where = str(dev)
    _stage("compiling")
    t0 = time.perf_counter()
    if spmd:
        exe = rt.compile(comp, dev, options=rt.CompileOptions(num_replicas=replicas, num_partitions=partitions))
    else:
        exe = rt.compile(comp, dev)
    compile_s = time.perf_counter() - t0
    _stage("running")

    def call() -> Any:
        return exe.execute_sharded(inputs) if spmd else exe(*inputs)

    result = call()
    outs = list(result) if isinstance(result, tuple) else [result]
    host = [np.asarray(o) for o in outs]
    out.write(
        f"{comp.name} on {where}: {len(inputs)} input(s), {len(host)} output(s); "
        f"compiled in {_human_time(compile_s)}\n"
    )
    for i, a in enumerate(host):
        sharding = f"  sharding {outs[i].sharding}" if spmd else ""
        out.write(f"  output {i}: {_describe_array(a):<16} {_summary(a)}{sharding}\n")
    if args.repeat > 1:
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            r = call()
            for o in r if isinstance(r, tuple) else (r,):
                o.block_until_ready()
            times.append(time.perf_counter() - t)
        out.write(
            f"  time per run over {args.repeat} runs: min {_human_time(min(times))}, "
            f"median {_human_time(statistics.median(times))}\n"
        )
    if args.output is not None:
        _stage("writing")
        npz = _npz_path(args.output)
        entries = _npz_entries(host)
        savez: Any = np.savez
        try:
            atomic_write(npz, lambda f: savez(f, **entries))
        except OSError as e:
            raise UsageError(f"--output {args.output}: cannot write: {e.strerror or e}") from None
        out.write(f"  wrote {npz}\n")
    return EXIT_OK


# -- cache --------------------------------------------------------------------------------------------
def _cmd_cache(args: argparse.Namespace, out: IO[str]) -> int:
    from xlasdk.runtime.cache import CompileCache

    cache = CompileCache(args.dir)
    if args.cache_command == "info":
        out.write(str(cache.info()) + "\n")
        if args.list:
            for e in reversed(cache.entries()):
                stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.last_used))
                out.write(f"  {e.key[:16]}  {_human_bytes(e.size):>10}  {stamp}  {e.name}\n")
        return EXIT_OK
    n = cache.clear()
    out.write(f"removed {n} entr{'y' if n == 1 else 'ies'} from {cache.directory}\n")
    return EXIT_OK


_RUN_DESCRIPTION = """\
Compile and run a module (any format, XLA dumps included) on a device; print each output's shape
and a summary of its values, and with --repeat the min/median time per run. Inputs come from .npy
files (--input NAME=FILE, NAME being a parameter name or index), an .npz (--inputs, keyed by
parameter names) or random values (--random-inputs).

A partitioned (SPMD) program runs on replicas x partitions devices: XLA's dumps of such programs
record num_partitions (and replica_count) in their HloModule line, JAX's StableHLO mhlo.num_partitions,
and --partitions / --replicas override them. Inputs and outputs are then the global arrays: each
input is split by its parameter's sharding, each output is assembled from its shards (and printed
with its sharding). --devices N gives the CPU client N devices (default: replicas x partitions)."""

_RUN_EPILOG = """\
element types:
  Every XLA array type goes through .npy and .npz files: bf16, the fp8 types (f8e4m3fn, f8e5m2,
  ...), f4e2m1fn, s4/u4 and s2/u2 too. numpy has no such types; ml_dtypes adds them and np.save
  writes them as raw bytes ('|V2', '|V1'). An input holding raw bytes of the parameter's element
  size is read as the parameter's type; other sizes are an error naming the parameter.
  --output writes those outputs as raw bytes too, and their types (ml_dtypes names) in a
  '__dtypes__' entry, so the file loads in plain numpy and is the --inputs of another run as it is.
  In numpy:
    z = np.load("out.npz")
    z["output_0"].view(ml_dtypes.bfloat16)              # a bf16 output
    types = json.loads(str(z["__dtypes__"]))            # {"output_0": "bfloat16", ...}
    z["output_0"].view(getattr(ml_dtypes, types["output_0"]))

crashes and --timeout:
  The work runs in a child process: if XLA aborts, the command reports its "Check failed" line
  (exit code 1) instead of dying. --timeout S bounds compiling and running (reading the files
  and starting up are not counted): past S seconds the child is killed, exit code 1,
  "FILE: the run did not finish within S s (--timeout)". --debug shows XLA's full log.

exit codes: 0 success, 1 runtime failure (compile, execute, XLA abort, --timeout), 2 usage or input error
"""


# -- parser -------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the ``xlasdk`` command."""
    common = _Parser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show Python tracebacks and XLA's log output on errors")
    p = _Parser(
        prog="xlasdk",
        description="Build, inspect, convert and run XLA computations.",
        epilog="Exit codes: 0 success, 1 runtime failure, 2 usage or input error.",
        parents=[common],
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="VERB", parser_class=_Parser)

    s = sub.add_parser("devices", parents=[common], help="list the devices of a platform",
                       description="A table of the devices of a platform (default: the default platform).")
    s.add_argument("--platform", default=None, help="platform name, e.g. cpu, cuda (default: the default platform)")
    s.set_defaults(verb_parser=s)

    s = sub.add_parser("version", parents=[common], help="print the xlasdk, jaxlib and StableHLO versions",
                       description="Print the xlasdk, jaxlib, StableHLO and Python versions.")
    s.set_defaults(verb_parser=s)

    fmt_help = "force the input format: hlo, mlir, mlirbc or pb (default: by suffix, then by content)"
    timeout_help = "stop when compiling takes more than S seconds (exit code 1)"
    s = sub.add_parser(
        "inspect", parents=[common], help="program shape, op counts, cost and memory of a module",
        description="Print a module's program shape, HLO op counts by opcode, XLA's cost analysis and memory "
                    "figures (compiled for --device), and optionally its HLO, StableHLO or optimized HLO. "
                    "FILE is HLO text, StableHLO text, a portable artifact or an HLO proto, including XLA dump files.",
    )
    s.add_argument("file", metavar="FILE", help="the module file")
    s.add_argument("--format", default=None, help=fmt_help)
    s.add_argument("--device", default=None, help="device to compile for, e.g. cpu:0 (default: the first device)")
    s.add_argument("--optimized", action="store_true", help="print the optimized HLO XLA compiled")
    s.add_argument("--hlo", action="store_true", help="print the (unoptimized) HLO text")
    s.add_argument("--stablehlo", action="store_true", help="print the StableHLO text")
    s.add_argument("--no-compile", action="store_true", help="skip compiling (no cost or memory figures)")
    s.add_argument("--json", action="store_true", help="print the report as JSON")
    s.add_argument("--timeout", type=float, default=None, metavar="S", help=timeout_help)
    s.set_defaults(verb_parser=s)

    s = sub.add_parser(
        "convert", parents=[common], help="convert a module between file formats",
        description="Convert a module between HLO text (.hlo, .hlo.txt, .txt), StableHLO text (.mlir), StableHLO "
                    "portable artifacts (.mlirbc) and HLO module protos (.pb). Formats follow the suffixes. The "
                    "file is written under a temporary name, loaded back and, when IN compiles, compiled; only "
                    "then is it renamed to OUT (a file that fails the check is removed, exit code 1, and an "
                    "existing OUT is left as it was).",
    )
    s.add_argument("input", metavar="IN", help="the module to read")
    s.add_argument("output", metavar="OUT", help="the file to write (format from its suffix)")
    s.add_argument("--target-version", default=None,
                   help="StableHLO version of a .mlirbc artifact, e.g. 1.9.0, or WEEK_4, WEEK_12, MAX, current "
                        "(default: the oldest version that holds every op)")
    s.add_argument("--from", dest="from_format", default=None, help=fmt_help)
    s.add_argument("--to", dest="to_format", default=None, help="force the output format: hlo, mlir, mlirbc or pb")
    s.add_argument("--no-compile", action="store_true", help="load the written file back, but do not compile it")
    s.add_argument("--no-check", action="store_true", help="do not load the written file back (nor compile it)")
    s.add_argument("--timeout", type=float, default=None, metavar="S", help=timeout_help)
    s.set_defaults(verb_parser=s)

    s = sub.add_parser(
        "run", parents=[common], help="run a module on a device and summarize its outputs",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=_RUN_DESCRIPTION,
        epilog=_RUN_EPILOG,
    )
    s.add_argument("file", metavar="FILE", help="the module file")
    s.add_argument("--format", default=None, help=fmt_help)
    s.add_argument("--device", default=None, help="device to run on, e.g. cpu:0 (default: the first device)")
    s.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                   help="one parameter's value (repeatable); FILE.npz:KEY takes one array of an .npz")
    s.add_argument("--inputs", metavar="FILE.npz", default=None,
                   help="parameter values keyed by parameter name or index (output_N of another run's --output "
                        "is parameter N)")
    s.add_argument("--random-inputs", action="store_true", help="random values for parameters not given")
    s.add_argument("--seed", type=int, default=0, help="seed of --random-inputs (default 0)")
    s.add_argument("--output", metavar="OUT.npz", default=None,
                   help="save the outputs as output_0, output_1, ... (written atomically; see below for bf16, "
                        "fp8, int4)")
    s.add_argument("--repeat", type=int, default=1, metavar="N", help="run N times and report min/median time")
    s.add_argument("--devices", type=int, default=None, metavar="N",
                   help="run on a CPU client of N devices (default: replicas x partitions when that is above 1)")
    s.add_argument("--replicas", type=int, default=None, metavar="R",
                   help="number of replicas (default: the module's replica_count / mhlo.num_replicas, else 1)")
    s.add_argument("--partitions", type=int, default=None, metavar="P",
                   help="number of SPMD partitions (default: the module's num_partitions / mhlo.num_partitions, "
                        "else the device count of its shardings, else 1)")
    s.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="stop when compiling and running take more than S seconds, with exit code 1: a While whose "
                        "condition stays true, or a Sort whose comparator is not a strict weak order, never ends")
    s.set_defaults(verb_parser=s)

    s = sub.add_parser("cache", parents=[common], help="inspect or clear the compile cache",
                       description="The on-disk compile cache (XLASDK_CACHE_DIR, default ~/.cache/xlasdk).")
    csub = s.add_subparsers(dest="cache_command", required=True, metavar="ACTION", parser_class=_Parser)
    for name, hlp in (("info", "entry count and size (--list: every entry)"), ("clear", "delete every entry")):
        c = csub.add_parser(name, parents=[common], help=hlp, description=hlp[0].upper() + hlp[1:] + ".")
        c.add_argument("--dir", default=None,
                       help="the cache directory (default: $XLASDK_CACHE_DIR or ~/.cache/xlasdk)")
        if name == "info":
            c.add_argument("--list", action="store_true", help="list the entries, most recently used first")
        c.set_defaults(verb_parser=c)

    from xlasdk.launch import build_parser as launch_options

    s = sub.add_parser(
        "launch", parents=[common], help="run a Python script in N local processes of one xs.distributed job",
        usage="xlasdk launch -n N [OPTIONS] (SCRIPT | -m MODULE) [ARGS...]",
        description="Run 'python SCRIPT ARGS' (or 'python -m MODULE ARGS') in N local processes with "
                    "XLASDK_COORDINATOR, XLASDK_NUM_PROCESSES and XLASDK_PROCESS_ID set, so that "
                    "xs.distributed.initialize() joins them; the same as 'python -m xlasdk.launch'. Output lines "
                    "are prefixed with [i]; when a process fails the others are stopped.",
    )
    launch_options(s)
    s.set_defaults(verb_parser=s)
    return p


_COMMANDS = {
    "devices": _cmd_devices,
    "version": _cmd_version,
    "inspect": _cmd_inspect,
    "convert": _cmd_convert,
    "run": _cmd_run,
    "cache": _cmd_cache,
    "launch": _cmd_launch,
}


def _error_line(e: BaseException) -> str:
    msg = " ".join(str(e).split()) or type(e).__name__
    return msg


def _unrecognized(parser: argparse.ArgumentParser, args: argparse.Namespace, extras: list[str]) -> NoReturn:
    """Report arguments no parser took as the verb's usage error (``xlasdk run: error: ...``)."""
    verb_parser: argparse.ArgumentParser = getattr(args, "verb_parser", parser)
    msg = f"unrecognized arguments: {' '.join(extras)}"
    bad = [spec for spec in getattr(args, "input", None) or [] if "=" not in spec]
    if bad:
        msg += f"; --input takes NAME=FILE.npy as one argument, e.g. --input {bad[0]}={extras[0]}"
    verb_parser.error(msg)


def _silence_stdout(*streams: IO[str]) -> None:
    """After a BrokenPipeError: point the streams' file descriptors at /dev/null so that nothing more,
    not even the interpreter's final flush, writes into the closed pipe (Python docs, "Note on SIGPIPE")."""
    fds = set()
    for stream in streams:
        try:
            fds.add(stream.fileno())
        except (AttributeError, OSError, ValueError):
            continue
    for fd in fds:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
        except OSError:  # pragma: no cover
            pass


def main(argv: Sequence[str] | None = None, *, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    """Entry point of the ``xlasdk`` console script; returns the exit code.

    ``stdout`` / ``stderr`` default to the process streams (tests pass buffers). When the reader
    of stdout goes away (``xlasdk inspect f.hlo | head -1``) the command stops quietly, exit code 0.
    Called with no arguments (as the console script is), the verbs that start XLA run in a child
    process that this one supervises (see "supervision" above); called from Python with ``argv``
    they run in this process, except with ``--timeout``.
    """
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    own_process = argv is None and stdout is None and stderr is None
    try:
        code = _main(argv, out, err, own_process)
        out.flush()
        return code
    except BrokenPipeError:
        _silence_stdout(out)
        return EXIT_OK


def _main(argv: Sequence[str] | None, out: IO[str], err: IO[str], own_process: bool = False) -> int:
    parser = build_parser()
    try:
        raw = list(argv) if argv is not None else sys.argv[1:]
        verb_at = next((i for i, t in enumerate(raw) if not t.startswith("-")), None)
        launch_program: tuple[str | None, str | None, list[str]] | None = None
        if verb_at is not None and raw[verb_at] == "launch":  # the program's arguments are not ours
            from xlasdk.launch import split_argv

            opts, module, script, rest = split_argv(raw[verb_at + 1 :])
            raw = raw[: verb_at + 1] + opts
            launch_program = (module, script, rest)
        args, extras = parser.parse_known_args(raw)
        if launch_program is not None:
            args.launch_module, args.launch_script, args.launch_args = launch_program
        if extras:
            _unrecognized(parser, args, extras)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2), already printed
        return int(e.code) if isinstance(e.code, int) else EXIT_USAGE
    if not hasattr(args, "debug"):
        args.debug = False
    from xlasdk.errors import CompileError, DTypeError, FormatError, ShapeError, XlaRuntimeError, XlaSdkError
    from xlasdk.runtime.device import UnknownDeviceError

    try:
        timeout = getattr(args, "timeout", None)
        if timeout is not None and not timeout > 0:
            raise UsageError(f"--timeout must be > 0 seconds, got {timeout:g}")
        _ERR_STREAM[:] = [err]
        mode = _supervision(args, own_process)
        if mode is not None:
            child_argv = list(argv) if argv is not None else sys.argv[1:]
            return _supervise(args, child_argv, out, err, fork=mode == "fork")
        return _COMMANDS[args.command](args, out)
    except KeyboardInterrupt:
        err.write("xlasdk: interrupted\n")
        return 130
    except BrokenPipeError:
        raise
    except BaseException as e:
        if isinstance(e, SystemExit):
            raise
        if isinstance(e, (UsageError, FormatError, ShapeError, DTypeError, UnknownDeviceError)):
            code, kind = EXIT_USAGE, "error"
        elif isinstance(e, (CheckFailed, CompileError, XlaRuntimeError, XlaSdkError)):
            code, kind = EXIT_RUNTIME, "error"
        else:
            code, kind = EXIT_RUNTIME, f"internal error ({type(e).__name__})"
        if args.debug:
            traceback.print_exception(type(e), e, e.__traceback__, file=err)
        err.write(f"xlasdk {args.command}: {kind}: {_error_line(e)}\n")
        return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
