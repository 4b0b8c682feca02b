"""The worker process (xlasdk._jaxlib.isolated): interrupts never desynchronize it, and it never
outlives the process that started it (issue 17, findings 1 and 3)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import xlasdk as xs
from xlasdk._jaxlib import isolated

_MODULE = """HloModule {name}

ENTRY main {{
  p = {ty}[{n}] parameter(0)
  ROOT r = {ty}[{n}] {op}(p, p)
}}
"""


def _interrupt_after(seconds: float) -> threading.Timer:
    t = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    t.start()
    return t


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie that nobody waits for is gone for our purpose
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _wait_gone(pid: int, limit: float) -> bool:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return not _alive(pid)


def test_ctrl_c_during_a_request_replaces_the_worker_and_the_next_answer_is_its_own() -> None:
    isolated.request("os:getpid")
    first = isolated.worker_pid()
    assert first is not None
    timer = _interrupt_after(0.3)
    with pytest.raises(KeyboardInterrupt):
        isolated.request("time:sleep", 5)
    timer.join()
    # the interrupted request's reply (None, after 5 s) must never answer a later request
    assert isolated.request("math:sqrt", 81.0) == 9.0
    assert isolated.request("operator:add", 2, 3) == 5
    assert isolated.worker_pid() != first
    assert _wait_gone(first, 5.0)


def test_ctrl_c_during_a_load_then_every_later_load_is_the_file_it_names(tmp_path: Path) -> None:
    # The finding: after an interrupted load, load_computation(b.hlo) returned the interrupted module.
    slow = tmp_path / "slow.hlo"
    lines = ["HloModule slow", "", "ENTRY main {", "  p0 = f32[8] parameter(0)"]
    lines += [f"  p{i} = f32[8] multiply(p{i - 1}, p{i - 1})" for i in range(1, 30000)]
    lines += ["  ROOT r = f32[8] negate(p29999)", "}"]
    slow.write_text("\n".join(lines) + "\n")
    b = tmp_path / "b.hlo"
    b.write_text(_MODULE.format(name="b", ty="s32", n=7, op="add"))
    d = tmp_path / "d.hlo"
    d.write_text(_MODULE.format(name="d", ty="f64", n=3, op="multiply"))
    isolated.request("os:getpid")  # a warm worker, so the interrupt lands inside the load
    timer = _interrupt_after(0.2)
    try:
        xs.load_computation(slow)
    except KeyboardInterrupt:
        pass
    else:  # pragma: no cover - the machine loaded 30,000 instructions in 0.2 s: still check below
        time.sleep(0.5)
    timer.join()
    cb = xs.load_computation(b)
    assert str(cb.program_shape()) == "(p: s32[7]) -> s32[7]"
    cd = xs.load_computation(d)
    exe = xs.compile(cd)
    import numpy as np

    x = np.array([1.5, -2.0, 3.0])
    np.testing.assert_array_equal(exe(x).to_numpy(), x * x)
    out = xs.compile(cb)(np.arange(7, dtype=np.int32)).to_numpy()
    np.testing.assert_array_equal(out, np.arange(7, dtype=np.int32) * 2)


_CHILD = textwrap.dedent(
    """
    import sys, threading, time
    from xlasdk._jaxlib import isolated
    how = sys.argv[1]
    if how == "thread":  # the worker is started by a thread that then ends
        t = threading.Thread(target=isolated.request, args=("os:getpid",))
        t.start(); t.join()
    else:
        isolated.request("os:getpid")
    print(isolated.worker_pid(), flush=True)
    if how == "thread":
        time.sleep(1.0)  # the worker must survive its starting thread's end
        print(isolated.request("math:sqrt", 49.0), flush=True)
    isolated.request("time:sleep", 120)
    """
)


_ENDING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _default_signals() -> None:
    """In the child before it runs: the ending signals' default actions, unblocked. The child must
    not inherit what an earlier test of this pytest process left (an ignored SIGHUP, a blocked mask):
    under ``-n 2`` the SIGHUP case then waited 30 s for a child that could not die."""
    for sig in _ENDING:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _ENDING)


def _start_child(how: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, how], stdout=subprocess.PIPE, text=True, env=dict(os.environ),
        preexec_fn=_default_signals,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip().isdigit(), line
    return proc, int(line)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP])
def test_the_worker_dies_with_the_process_that_started_it(sig: signal.Signals) -> None:
    proc, worker = _start_child("main")
    assert _alive(worker)
    time.sleep(0.3)  # the child is now blocked in its 120 s request
    proc.send_signal(sig)
    proc.wait(timeout=30)
    assert _wait_gone(worker, 3.0), f"worker {worker} outlived its parent (killed with {sig.name})"


def test_a_worker_started_by_a_thread_outlives_the_thread_not_the_process() -> None:
    proc, worker = _start_child("thread")
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "7.0"
    assert _alive(worker)
    proc.kill()
    proc.wait(timeout=30)
    assert _wait_gone(worker, 3.0)


def test_a_forked_child_gets_its_own_worker_and_spawner() -> None:
    # After os.fork the parent's spawner thread does not exist in the child (a submit would wait
    # forever) and the parent's worker must not answer the child.
    parent_worker = isolated.request("os:getpid")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.close(r)
            child_worker = isolated.request("os:getpid")
            ok = child_worker != parent_worker and isolated.request("math:sqrt", 25.0) == 5.0
            os.write(w, b"ok" if ok else b"bad")
            code = 0
        finally:
            isolated.shutdown()
            os._exit(code)
    os.close(w)
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung starting its worker")
        assert os.read(r, 16) == b"ok" and os.waitstatus_to_exitcode(status) == 0
    finally:
        os.close(r)
    assert isolated.request("os:getpid") == parent_worker  # the parent's worker is untouched


def _kill_workers(times: int) -> threading.Thread:
    """A thread that SIGKILLs the next ``times`` workers it sees serving a request (as the OOM killer would)."""
    def run() -> None:
        killed: set[int] = set()
        deadline = time.monotonic() + 60
        while len(killed) < times and time.monotonic() < deadline:
            w = isolated._worker  # read without the lock, which a request in flight holds
            pid = w.proc.pid if w is not None else None
            if pid is not None and pid not in killed:
                time.sleep(0.3)  # let it take the request
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            time.sleep(0.02)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_a_worker_killed_from_outside_is_retried_not_blamed_on_the_request() -> None:
    """Finding 9: an outside SIGKILL (the OOM killer) failed a valid request as "XLA aborted"; it is run
    once more in a fresh worker, and a second SIGKILL is reported as a kill from outside."""
    isolated.shutdown()
    isolated.request("time:sleep", 0.0)  # a worker is up
    t = _kill_workers(1)
    assert isolated.request("time:sleep", 1.5) is None  # killed once, retried, finished
    t.join()
    t = _kill_workers(2)
    with pytest.raises(isolated.WorkerDied, match="killed from outside .SIGKILL. twice") as info:
        isolated.request("time:sleep", 1.5)
    assert info.value.killed and not info.value.timed_out
    t.join()
    # and the next request is served as usual
    assert isolated.request("builtins:len", "abc") == 3


def test_compile_of_a_loaded_module_is_bounded_in_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding 7: a loaded module's compile had no time limit in the API. Past ``timeout=`` (or
    XLASDK_COMPILE_TIMEOUT) the worker is stopped with a CompileError, and the next compile works."""
    data = Path(__file__).resolve().parent / "data/dumps/transformer_bf16"
    comp = xs.load_computation(data / "module.before_optimizations.txt")
    t0 = time.monotonic()
    with pytest.raises(xs.CompileError, match=r"did not finish within 0.01 s and was stopped"):
        xs.compile(comp, timeout=0.01, cache=False)
    assert time.monotonic() - t0 < 30
    monkeypatch.setenv("XLASDK_COMPILE_TIMEOUT", "0.01")
    with pytest.raises(xs.CompileError, match="XLASDK_COMPILE_TIMEOUT"):
        xs.compile(comp, cache=False)
    monkeypatch.setenv("XLASDK_COMPILE_TIMEOUT", "0")  # no limit
    exe = xs.compile(comp, cache=False)
    assert exe.program_shape() == comp.program_shape()
    monkeypatch.setenv("XLASDK_COMPILE_TIMEOUT", "soon")
    with pytest.raises(xs.CompileError, match="must be a number of seconds"):
        xs.compile(comp, cache=False)


def test_prestart_starts_one_worker_in_the_background_that_serves_the_next_load(tmp_path: Path) -> None:
    """``isolated.prestart()`` returns at once with a worker started (issue 21): the loaders call it
    before their checks, so the worker's imports overlap them. A second call keeps that worker;
    the next load is served by it and gives the file's own values."""
    isolated.shutdown()
    t0 = time.perf_counter()
    isolated.prestart()
    started_in = time.perf_counter() - t0
    pid = isolated.worker_pid()
    assert pid is not None and started_in < 0.5  # the process started; its imports run on their own
    isolated.prestart()
    assert isolated.worker_pid() == pid
    path = tmp_path / "m.hlo"
    path.write_text(_MODULE.format(name="pre", ty="f32", n=3, op="multiply"))
    exe = xs.compile(xs.load_computation(path))
    x = np.array([1.5, -2.0, 3.0], np.float32)
    np.testing.assert_array_equal(exe(x).to_numpy(), x * x)
    assert isolated.worker_pid() == pid


def test_prestart_in_the_worker_itself_does_nothing() -> None:
    code = ("import os; os.environ['XLASDK_WORKER'] = '1'\nfrom xlasdk._jaxlib import isolated\n"
            "isolated.prestart(); print(isolated.worker_pid())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "None"
