"""Campaign of issue 17, finding 3: a signal at any point of ``xlasdk run`` or of an API script
leaves no process behind.

Each trial starts, in a session of its own and with a marker variable unique to the trial in its
environment, either ``python -m xlasdk.cli run FILE --random-inputs`` (the command, its forked
child that does the work, xlasdk's worker process that loads and compiles) or a Python script that
loads, compiles (in the worker) and runs FILE. FILE is a module whose compile takes a minute (a
chain of 20,000 multiplies) or one that compiles at once and runs for seconds (a While of 10^9
steps). After a random delay the trial sends SIGINT, SIGTERM, SIGHUP or SIGKILL to the command
(or, as a terminal does, to its whole process group), or gives it a time limit instead
(``--timeout S``; ``xs.compile(timeout=S)`` and ``exe.execute(..., timeout=S)``), so the end comes
before the load, during it, during the compile, during the run or after the answer.

Then it checks, besides the exit status each way of ending must give, that no process of the trial
is left: every process whose environment carries the trial's marker (that finds a worker
re-parented to init, which a look at the process group or the parent would miss) must be gone
within a few seconds of the command's end. A survivor is an orphan: the campaign kills it and fails.

The quick profile runs 5 trials chosen to end while the worker compiles (about 15 s); the long one
(``pytest -m campaign``) ``XLASDK_SIGNALS_LONG`` trials (default 200) over every way of ending.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

LONG = int(os.environ.get("XLASDK_SIGNALS_LONG", "200"))
REPO = Path(__file__).resolve().parents[2]
MARK = "XLASDK_SIGNAL_TRIAL"
HANG = 90.0  # seconds a trial's command may take to end after its signal: past it, a hang
GRACE = 5.0  # seconds the trial's other processes may take to go after the command ended

_LOOP = """HloModule loop

cond {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(1000000000)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[8] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = f32[8] multiply(x, x)
  ROOT t = (s32[], f32[8]) tuple(j, y)
}

ENTRY main {
  p = f32[8] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[8]) tuple(z, p)
  w = (s32[], f32[8]) while(init), condition=cond, body=body
  ROOT r = f32[8] get-tuple-element(w), index=1
}
"""

# What the API trials run: load, compile in the worker, run; a line on stdout after each step.
_SCRIPT = r"""
import sys
import numpy as np
import xlasdk as xs
path, limit = sys.argv[1], sys.argv[2]
timeout = float(limit) if limit != "-" else None
print("start", flush=True)
comp = xs.load_computation(path)
print("loaded", flush=True)
try:
    exe = xs.compile(comp, cache=False, timeout=timeout)
    print("compiled", flush=True)
    out = exe.execute(np.ones(8, np.float32), timeout=timeout)
except xs.CompileError as e:
    print("compile-timeout" if "did not finish within" in str(e) else "compile-error " + str(e), flush=True)
    sys.exit(3)
except xs.ExecutionTimeoutError:
    print("run-timeout", flush=True)
    sys.exit(4)
print("ran", out.to_numpy().tolist(), flush=True)
"""

# the exit statuses each way of ending may give (besides 0: the command finished first)
_CLI_EXITS = {
    "SIGINT": {130, -signal.SIGINT},  # 130: xlasdk's own handler; -2: before it, Python's re-raise
    "SIGTERM": {128 + signal.SIGTERM, -signal.SIGTERM},  # 143: forwarded to the child, else the default
    "SIGHUP": {128 + signal.SIGHUP, -signal.SIGHUP},
    "SIGKILL": {-signal.SIGKILL},
    "timeout": {1},
}
_API_EXITS = {
    "SIGINT": {-signal.SIGINT},  # an uncaught KeyboardInterrupt ends Python by SIGINT
    "SIGTERM": {-signal.SIGTERM},
    "SIGHUP": {-signal.SIGHUP},
    "SIGKILL": {-signal.SIGKILL},
    "timeout": {3, 4},
}


@dataclass
class Proc:
    pid: int
    ppid: int
    role: str
    cmdline: str


@dataclass
class Trial:
    n: int
    kind: str  # "cli" or "api"
    module: str  # "chain" (a minute of compile) or "loop" (seconds of run)
    how: str  # a signal name or "timeout"
    target: str  # "pid" or "group" (as a terminal sends Ctrl-C / hangup)
    delay: float  # seconds before the signal, or the time limit
    roles: tuple[str, ...] = ()  # the trial's processes when the signal went
    rc: int | None = None
    outcome: str = ""
    stdout: str = ""
    stderr: str = ""
    orphans: list[Proc] = field(default_factory=list)
    seconds: float = 0.0

    def describe(self) -> str:
        tail = "\n".join(self.stderr.strip().splitlines()[-6:])
        return (f"trial {self.n}: {self.kind} on {self.module}, {self.how} to {self.target} after {self.delay:.2f} s "
                f"(processes then: {', '.join(self.roles) or 'none seen'}): exit {self.rc}, {self.outcome}"
                + (f"; orphans: {[(p.pid, p.role, p.cmdline[:80]) for p in self.orphans]}" if self.orphans else "")
                + (f"\n  stdout: {self.stdout.strip()[-300:]!r}\n  stderr: {tail}" if self.outcome != "ok" else ""))


def _files(tmp: Path) -> dict[str, Path]:
    chain = tmp / "chain.hlo"
    lines = ["HloModule chain", "", "ENTRY main {", "  p0 = f32[8] parameter(0)"]
    lines += [f"  p{i} = f32[8] multiply(p{i - 1}, p{i - 1})" for i in range(1, 20000)]
    lines += ["  ROOT r = f32[8] negate(p19999)", "}"]
    chain.write_text("\n".join(lines) + "\n")
    loop = tmp / "loop.hlo"
    loop.write_text(_LOOP)
    return {"chain": chain, "loop": loop}


def _state_and_ppid(pid: int) -> tuple[str, int]:
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return rest[0], int(rest[1])


def _marked(value: str, leader: int) -> list[Proc]:
    """Every live (not zombie) process whose environment holds ``MARK=value``."""
    needle = f"{MARK}={value}".encode() + b"\0"
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
            if needle not in env + b"\0":
                continue
            state, ppid = _state_and_ppid(pid)
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if state == "Z":
            continue
        if "xlasdk._jaxlib.isolated" in cmd:
            role = "worker"
        elif pid == leader:
            role = "command"
        else:
            role = "child"
        found.append(Proc(pid, ppid, role, cmd))
    return found


def _default_signals() -> None:
    """In the trial's process before it runs Python: the signals the trials send take their default
    action (a runner started in the background, ``cmd &``, hands its children SIGINT ignored)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _run_trial(t: Trial, files: dict[str, Path], tmp: Path) -> Trial:
    value = uuid.uuid4().hex
    env = dict(os.environ)
    env[MARK] = value
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    env.pop("XLASDK_CACHE_DIR", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    path = str(files[t.module])
    if t.kind == "cli":
        argv = [sys.executable, "-m", "xlasdk.cli", "run", path, "--random-inputs"]
        if t.how == "timeout":
            argv += ["--timeout", f"{t.delay:.3f}"]
    else:
        argv = [sys.executable, "-c", _SCRIPT, path, f"{t.delay:.3f}" if t.how == "timeout" else "-"]
    t0 = time.monotonic()
    with tempfile.TemporaryFile(dir=tmp) as out, tempfile.TemporaryFile(dir=tmp) as err:
        # files, not pipes: an orphan would hold a pipe open and block the reading of it
        proc = subprocess.Popen(argv, cwd=tmp, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                start_new_session=True, preexec_fn=_default_signals)
        try:
            if t.how != "timeout":
                time.sleep(t.delay)
                if proc.poll() is None:
                    t.roles = tuple(sorted(p.role for p in _marked(value, proc.pid)))
                    sig = signal.Signals[t.how]
                    try:
                        if t.target == "group":
                            os.killpg(proc.pid, sig)
                        else:
                            os.kill(proc.pid, sig)
                    except ProcessLookupError:  # it ended in between
                        pass
            try:
                t.rc = proc.wait(HANG + (t.delay if t.how == "timeout" else 0.0))
            except subprocess.TimeoutExpired:
                t.outcome = "hang"
        finally:
            end = time.monotonic() + GRACE
            left = _marked(value, proc.pid)
            while left and time.monotonic() < end:
                time.sleep(0.05)
                left = _marked(value, proc.pid)
            t.orphans = [p for p in left if p.pid != proc.pid or t.outcome == "hang"]
            for p in left:  # clean up whatever is left, the campaign goes on
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except OSError:
                    pass
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        out.seek(0)
        err.seek(0)
        t.stdout = out.read().decode(errors="replace")
        t.stderr = err.read().decode(errors="replace")
    t.seconds = time.monotonic() - t0
    if not t.outcome:
        t.outcome = _judge(t)
    if t.orphans and t.outcome == "ok":
        t.outcome = "orphan"
    return t


def _judge(t: Trial) -> str:
    """"ok" when the exit status and output are what this way of ending must give, else what is wrong."""
    rc = t.rc
    if rc == 0:  # finished before the end came: then it must have computed the answer
        done = ("output 0: f32[8]" in t.stdout) if t.kind == "cli" else ("\nran [" in t.stdout)
        return "ok" if done else "exit 0 without the answer"
    allowed = (_CLI_EXITS if t.kind == "cli" else _API_EXITS)[t.how]
    if rc not in allowed:
        return f"exit {rc} (want one of {sorted(allowed)} or 0)"
    if "internal error" in t.stderr:
        return "internal error"
    if t.how == "timeout":
        if t.kind == "cli" and f"did not finish within {float(f'{t.delay:.3f}'):g} s (--timeout)" not in t.stderr:
            return "exit 1 without the --timeout message"
        if t.kind == "api" and not any(w in t.stdout for w in ("compile-timeout", "run-timeout")):
            return f"exit {rc} without a timeout"
    return "ok"


def _plan(n: int, rng: random.Random) -> list[Trial]:
    trials = []
    for i in range(n):
        kind = rng.choice(("cli", "cli", "api"))
        module = rng.choice(("chain", "loop"))
        how = rng.choice(("SIGINT", "SIGTERM", "SIGHUP", "SIGKILL", "timeout"))
        target = "pid" if how in ("SIGKILL", "timeout") else rng.choice(("pid", "group"))
        # 0-4 s: before the load (the interpreter's start), during it (the worker starts at once and
        # parses for about a second), during the compile, and for the loop during the run (about
        # 1.5-4.5 s) and after the answer
        delay = rng.uniform(0.0, 3.5) if module == "chain" else rng.uniform(0.0, 6.0)
        if how == "timeout":
            delay = max(0.05, delay - 1.0)  # the limit counts from the compile's start
        trials.append(Trial(i, kind, module, how, target, delay))
    return trials


def _quick_plan(rng: random.Random) -> list[Trial]:
    """Five trials that end while the worker compiles: the case of the finding."""
    return [
        Trial(0, "cli", "chain", "SIGTERM", "pid", rng.uniform(2.0, 2.6)),
        Trial(1, "cli", "chain", "SIGINT", "pid", rng.uniform(2.0, 2.6)),
        Trial(2, "cli", "chain", "SIGHUP", "group", rng.uniform(2.0, 2.6)),
        Trial(3, "cli", "chain", "timeout", "pid", rng.uniform(0.3, 0.8)),
        Trial(4, "api", "chain", "SIGTERM", "pid", rng.uniform(2.4, 3.0)),
    ]


def _campaign(trials: list[Trial], tmp: Path) -> None:
    files = _files(tmp)
    t0 = time.monotonic()
    done = [_run_trial(t, files, tmp) for t in trials]
    wall = time.monotonic() - t0
    bad = [t for t in done if t.outcome != "ok"]
    outcomes = Counter(
        "finished" if t.rc == 0 else ("timed out" if t.how == "timeout" else f"ended by {t.how}")
        for t in done if t.outcome == "ok"
    )
    with_worker = [t for t in done if "worker" in t.roles or (t.how == "timeout" and t.rc != 0)]
    orphans = sum(len(t.orphans) for t in done)
    summary = (f"{len(done)} trials in {wall:.0f} s: {dict(sorted(outcomes.items()))}; {len(bad)} wrong, "
               f"{orphans} orphans; signalled with the worker alive: "
               f"{sum('worker' in t.roles for t in done)}, processes at the signal: "
               f"{dict(Counter(','.join(t.roles) for t in done if t.roles))}")
    print(summary)
    assert not bad, summary + "\n" + "\n".join(t.describe() for t in bad[:20])
    # a campaign that ended nothing while the worker was alive tested nothing
    assert len(with_worker) >= 1, summary
    assert sum(t.rc != 0 for t in done) >= 1, summary


def test_signals_quick(tmp_path: Path) -> None:
    trials = _quick_plan(random.Random(17))
    _campaign(trials, tmp_path)


@pytest.mark.campaign
def test_signals_long(tmp_path: Path) -> None:
    _campaign(_plan(LONG, random.Random(1703)), tmp_path)


def test_the_marker_scan_finds_a_re_parented_process(tmp_path: Path) -> None:
    """The campaign's check itself: a grandchild left behind by its parent (re-parented to init) is
    found by the marker in its environment, and is not found once killed."""
    value = uuid.uuid4().hex
    env = {**os.environ, MARK: value}
    code = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
            "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(p.pid, flush=True)")
    out = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True, timeout=60,
                         check=True)
    orphan = int(out.stdout)
    try:
        found = _marked(value, -1)
        assert [p.pid for p in found] == [orphan]
        assert found[0].ppid != os.getpid() and found[0].role == "child"
    finally:
        os.kill(orphan, signal.SIGKILL)
    end = time.monotonic() + 5
    while _marked(value, -1) and time.monotonic() < end:
        time.sleep(0.05)
    assert _marked(value, -1) == []
