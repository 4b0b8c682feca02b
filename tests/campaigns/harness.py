"""Run Python work in child processes that may die, and keep going (shared by the campaigns).

XLA aborts or crashes the whole process on some inputs (C-03, C-06, C-08 in
``shared/cases/cases.md``). A campaign that compiles thousands of random programs therefore
runs them in a child process: a death by a signal, or a hang, is recorded with the input that
caused it, a fresh child is started, and the batch goes on.

API
---
``Task(source, input=None, entry="main", key=None)``
    ``source`` is Python source that defines the function ``entry`` (default ``main``) of one
    argument; the child runs ``entry(input)`` and sends back its return value. ``input`` and the
    return value must pickle (numpy arrays, ml_dtypes arrays, tuples, dicts... do). A child
    execs each distinct source once and reuses its functions, so put imports and set-up at the
    top of ``source`` and keep ``input`` small. ``key`` names the task in reports (default: its
    index in the batch).

``run_batch(tasks, timeout=60.0, *, env=None, cwd=None, max_tasks_per_child=None, on_outcome=None) -> Report``
    Runs the tasks in order in one child process, restarting it after a death, a timeout or
    every ``max_tasks_per_child`` tasks. ``timeout`` is per task (seconds, from sending the
    input to receiving the result; for a child's first task that includes the interpreter's
    start-up and the source's imports). ``env`` adds to (or with
    a value of None removes from) the parent's environment; ``on_outcome(outcome)`` is called
    after each task (for progress lines or an early stop: return ``False`` to stop the batch).

``Report``
    ``outcomes`` (one per task run, in order), ``ok`` / ``errors`` / ``deaths`` / ``timeouts``
    (lists of outcomes), ``seconds``, ``summary()`` (one line of figures), ``describe_failures()``
    (every death and timeout with its signal, stderr tail and a reproducing script), and
    ``write_reproducers(directory)`` (one ``.py`` per death or timeout).

``Outcome``
    ``task``, ``status`` (``"ok"``, ``"error"``: ``entry`` raised, ``"died"``: the child was
    killed by a signal or exited, ``"timeout"``: the harness killed it after ``timeout``),
    ``value`` (the return value when ok), ``error`` (``"Type: message"``) and ``traceback``
    (when error), ``signal`` (the signal number for a death, e.g. 6 for SIGABRT, 11 for SIGSEGV),
    ``returncode``, ``stderr`` (the child's stderr while it ran this task, last 8,000
    characters), ``seconds``; ``signal_name``, ``describe()`` and ``reproducer()`` (a standalone
    script: ``python repro.py`` reruns the task in the current process, so it dies the same way).

``Worker(timeout=60.0, *, env=None, cwd=None)``
    The child process behind ``run_batch``, for callers that want to interleave their own work:
    ``with Worker() as w: outcome = w.run(task)``; it restarts the child after a death.

Example::

    from harness import Task, run_batch
    src = "import numpy as np\\ndef main(x):\\n    return np.sqrt(x)"
    report = run_batch([Task(src, np.arange(4.0), key=f"case{i}") for i in range(3)], timeout=30)
    print(report.summary())   # "3 tasks: 3 ok, 0 errors, 0 deaths, 0 timeouts in 0.4 s"
    assert not report.deaths, report.describe_failures()

The child's stdout goes to its stderr (the protocol uses a private copy of the stdout pipe), and
its stderr goes to a temporary file, so a task may print freely. Core dumps are disabled in the
child. Tests import this module as ``harness`` (``tests/campaigns`` has no ``__init__.py``; pytest
puts the directory on ``sys.path``).
"""

from __future__ import annotations

import ast
import base64
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Task", "Outcome", "Report", "Worker", "run_batch"]

_HEADER = struct.Struct("<Q")
_STDERR_TAIL = 8000

# The child's main loop: read (source, entry, input) frames, answer ("ok", value) or ("error", ...).
_CHILD = r"""
import os, pickle, struct, sys, traceback
_H = struct.Struct("<Q")
_in = os.fdopen(os.dup(0), "rb", buffering=0)
_out = os.fdopen(os.dup(1), "wb", buffering=0)
_null = os.open(os.devnull, os.O_RDONLY)
os.dup2(_null, 0)
os.dup2(2, 1)  # a task's prints go to stderr, never into the protocol pipe
def _read(n):
    buf = bytearray()
    while len(buf) < n:
        chunk = _in.read(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)
_fns = {}
while True:
    head = _read(_H.size)
    if head is None:
        break
    source, entry, key, data = pickle.loads(_read(_H.unpack(head)[0]))
    sys.stderr.write(f"[harness] task {key}\n")
    sys.stderr.flush()
    try:
        fn = _fns.get((source, entry))
        if fn is None:
            ns = {"__name__": "__harness_task__"}
            exec(compile(source, "<task>", "exec"), ns)
            fn = _fns[(source, entry)] = ns[entry]
        result = ("ok", fn(pickle.loads(data)))
    except BaseException as e:
        result = ("error", f"{type(e).__name__}: {e}", traceback.format_exc())
    try:
        payload = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:
        payload = pickle.dumps(("error", f"result does not pickle: {type(e).__name__}: {e}", ""))
    sys.stdout.flush()
    sys.stderr.flush()
    _out.write(_H.pack(len(payload)) + payload)
"""


@dataclass
class Task:
    """One unit of work: ``entry(input)`` with ``entry`` defined by ``source``."""

    source: str
    input: Any = None
    entry: str = "main"
    key: Any = None


@dataclass
class Outcome:
    """What became of one task (see the module docstring)."""

    task: Task
    status: str
    value: Any = None
    error: str = ""
    traceback: str = ""
    signal: int | None = None
    returncode: int | None = None
    stderr: str = ""
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        """The child died or hung (an exception raised by the task is not a failure here)."""
        return self.status in ("died", "timeout")

    @property
    def signal_name(self) -> str:
        if self.signal is None:
            return ""
        try:
            return signal.Signals(self.signal).name
        except ValueError:
            return f"signal {self.signal}"

    def describe(self) -> str:
        """A paragraph: key, status (signal or exit code), time, stderr tail and for failures the reproducer."""
        head = f"task {self.task.key!r}: {self.status}"
        if self.status == "died":
            head += f" by {self.signal_name}" if self.signal is not None else f" (exit code {self.returncode})"
        elif self.status == "error":
            head += f": {self.error}"
        head += f" after {self.seconds:.2f} s"
        parts = [head]
        tail = "\n".join(self.stderr.strip().splitlines()[-15:])
        if tail and self.status != "ok":
            parts.append("stderr (tail):\n" + tail)
        if self.failed:
            parts.append("reproducer:\n" + self.reproducer())
        return "\n".join(parts)

    def reproducer(self) -> str:
        """A standalone script that reruns this task in its own process (so it dies the same way)."""
        how = f"{self.status} by {self.signal_name}" if self.signal is not None else self.status
        lines = [f"# reproducer for harness task {self.task.key!r} ({how})", ""]
        lines.append(self.task.source.rstrip())
        lines.append("")
        lines.append("")
        literal = _literal(self.task.input)
        if literal is not None:
            lines.append(f"INPUT = {literal}")
        else:
            blob = base64.b64encode(pickle.dumps(self.task.input, protocol=pickle.HIGHEST_PROTOCOL)).decode()
            lines.append("import base64 as _b64, pickle as _pickle")
            wrapped = "\n".join(f"    {blob[i:i + 96]!r}" for i in range(0, len(blob), 96)) or "    ''"
            lines.append(f"INPUT = _pickle.loads(_b64.b64decode(\n{wrapped}\n))")
        lines.append(f"print({self.task.entry}(INPUT))")
        return "\n".join(lines) + "\n"


def _literal(value: Any) -> str | None:
    """``repr(value)`` when it reads back as an equal Python literal, else None."""
    try:
        text = repr(value)
        if len(text) <= 2000 and ast.literal_eval(text) == value:
            return text
    except Exception:
        pass
    return None


@dataclass
class Report:
    """The outcomes of a batch, with figures for a campaign's summary line."""

    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    def _with(self, status: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == status]

    @property
    def ok(self) -> list[Outcome]:
        return self._with("ok")

    @property
    def errors(self) -> list[Outcome]:
        return self._with("error")

    @property
    def deaths(self) -> list[Outcome]:
        return self._with("died")

    @property
    def timeouts(self) -> list[Outcome]:
        return self._with("timeout")

    def summary(self) -> str:
        signals: dict[str, int] = {}
        for o in self.deaths:
            name = o.signal_name or f"exit {o.returncode}"
            signals[name] = signals.get(name, 0) + 1
        by_signal = f" ({', '.join(f'{k}: {v}' for k, v in sorted(signals.items()))})" if signals else ""
        return (
            f"{len(self.outcomes)} tasks: {len(self.ok)} ok, {len(self.errors)} errors, {len(self.deaths)} deaths"
            f"{by_signal}, {len(self.timeouts)} timeouts in {self.seconds:.1f} s"
        )

    def describe_failures(self, limit: int = 10) -> str:
        failed = [o for o in self.outcomes if o.failed]
        text = "\n\n".join(o.describe() for o in failed[:limit])
        if len(failed) > limit:
            text += f"\n\n... and {len(failed) - limit} more"
        return text

    def write_reproducers(self, directory: str | os.PathLike[str]) -> list[str]:
        """Write ``<key>.py`` for each death and timeout into ``directory``; returns the paths."""
        os.makedirs(directory, exist_ok=True)
        paths = []
        for i, o in enumerate(o for o in self.outcomes if o.failed):
            name = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(o.task.key)) or f"task{i}"
            path = os.path.join(directory, f"{name}.py")
            with open(path, "w") as f:
                f.write(o.reproducer())
            paths.append(path)
        return paths


def _child_preexec() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash must not leave a core file behind


class Worker:
    """One child process that runs tasks; restarted after a death or a timeout."""

    def __init__(
        self, timeout: float = 60.0, *, env: Mapping[str, str | None] | None = None, cwd: str | None = None
    ) -> None:
        self.timeout = timeout
        self.env = dict(os.environ)
        self.env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
        for k, v in (env or {}).items():
            if v is None:
                self.env.pop(k, None)
            else:
                self.env[k] = v
        self.cwd = cwd
        self.tasks_run = 0  # by the current child
        self._proc: subprocess.Popen[bytes] | None = None
        self._err: Any = None

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> subprocess.Popen[bytes]:
        self._err = tempfile.TemporaryFile(buffering=0)
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
            env=self.env, cwd=self.cwd, preexec_fn=_child_preexec,
        )
        self.tasks_run = 0
        return self._proc

    def close(self) -> None:
        """Stop the child (it exits when its input closes; killed if it does not within 10 s)."""
        p, self._proc = self._proc, None
        if p is not None:
            try:
                assert p.stdin is not None
                p.stdin.close()
                p.wait(10)
            except Exception:
                p.kill()
                p.wait()
            if p.stdout is not None:
                p.stdout.close()
        if self._err is not None:
            self._err.close()
            self._err = None

    def _stderr_since(self, offset: int) -> str:
        self._err.flush()
        self._err.seek(offset)
        data = self._err.read()
        self._err.seek(0, os.SEEK_END)
        return data.decode(errors="replace")[-_STDERR_TAIL:]

    def _read_frame(self, fd: int, deadline: float) -> bytes | None:
        """One length-prefixed frame from ``fd``; None on EOF; raises TimeoutError past ``deadline``."""
        def read_exact(n: int) -> bytes | None:
            buf = bytearray()
            while len(buf) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                ready, _, _ = select.select([fd], [], [], left)
                if not ready:
                    continue
                chunk = os.read(fd, min(n - len(buf), 1 << 20))
                if not chunk:
                    return None
                buf += chunk
            return bytes(buf)

        head = read_exact(_HEADER.size)
        if head is None:
            return None
        return read_exact(_HEADER.unpack(head)[0])

    def run(self, task: Task, timeout: float | None = None) -> Outcome:
        """Run ``task`` in the child (starting one if needed) and return its outcome."""
        p = self._proc if self._proc is not None and self._proc.poll() is None else None
        if p is None:
            self.close()
            p = self._start()
        assert p.stdin is not None and p.stdout is not None
        self._err.seek(0, os.SEEK_END)
        offset = self._err.tell()
        frame = pickle.dumps(
            (task.source, task.entry, task.key, pickle.dumps(task.input, protocol=pickle.HIGHEST_PROTOCOL)),
            protocol=pickle.HIGHEST_PROTOCOL,
        )
        t0 = time.monotonic()
        deadline = t0 + (self.timeout if timeout is None else timeout)
        self.tasks_run += 1
        try:
            p.stdin.write(_HEADER.pack(len(frame)) + frame)
            p.stdin.flush()
            reply = self._read_frame(p.stdout.fileno(), deadline)
        except TimeoutError:
            p.kill()
            p.wait()
            out = Outcome(task, "timeout", stderr=self._stderr_since(offset), seconds=time.monotonic() - t0)
            self.close()
            return out
        except (BrokenPipeError, ConnectionResetError):
            reply = None
        if reply is None:  # the child is gone
            try:
                rc = p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = p.wait()
            out = Outcome(
                task, "died", signal=-rc if rc < 0 else None, returncode=rc,
                stderr=self._stderr_since(offset), seconds=time.monotonic() - t0,
            )
            self.close()
            return out
        seconds = time.monotonic() - t0
        msg = pickle.loads(reply)
        if msg[0] == "ok":
            return Outcome(task, "ok", value=msg[1], seconds=seconds)
        return Outcome(
            task, "error", error=msg[1], traceback=msg[2], stderr=self._stderr_since(offset), seconds=seconds
        )


def run_batch(
    tasks: Iterable[Task],
    timeout: float = 60.0,
    *,
    env: Mapping[str, str | None] | None = None,
    cwd: str | None = None,
    max_tasks_per_child: int | None = None,
    on_outcome: Callable[[Outcome], bool | None] | None = None,
) -> Report:
    """Run ``tasks`` in order in a child process, surviving deaths and hangs (see the module docstring)."""
    report = Report()
    t0 = time.monotonic()
    with Worker(timeout, env=env, cwd=cwd) as w:
        for i, task in enumerate(tasks):
            if task.key is None:
                task.key = i
            if max_tasks_per_child is not None and w.tasks_run >= max_tasks_per_child:
                w.close()
            outcome = w.run(task)
            report.outcomes.append(outcome)
            if on_outcome is not None and on_outcome(outcome) is False:
                break
    report.seconds = time.monotonic() - t0
    return report
