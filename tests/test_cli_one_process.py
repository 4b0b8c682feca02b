"""The ``xlasdk`` command does its work in one process (issue 35): its supervised child loads,
verifies and compiles the file itself, with the worker's checks and limits
(:mod:`xlasdk._jaxlib.isolated_local`), and starts no worker; a death there is reported as the
worker's was (the abort tests of ``test_cli.py`` and ``test_untrusted_files.py`` hold unchanged).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xlasdk._jaxlib import isolated, isolated_local

REPO = str(Path(__file__).resolve().parents[1])

_HLO = """\
HloModule one_process_{tag}

ENTRY main {{
  a = f32[4] parameter(0)
  c = f32[4] constant({{1, 2, 3, {tag}}})
  ROOT r = f32[4] add(a, c)
}}
"""

#: runs the command with hooks: a worker start is reported on stderr; "abort-local" aborts the
#: first compile the child runs itself, as XLA does on a failed CHECK (the worker's is left alone)
_HOOKED = """\
import os, sys
import xlasdk.cli as cli
from xlasdk._jaxlib import isolated, isolated_local, pjrt

started = isolated._Worker.__init__
def worker(self):
    os.write(2, b"WORKER STARTED\\n")
    started(self)
isolated._Worker.__init__ = worker
if sys.argv[1] == "abort-local":
    compile_and_load = pjrt.compile_and_load
    def aborting(*args, **kwargs):
        if isolated_local.active():
            os.write(2, b"F0000 00:00:00.000000   123 fake.cc:2] Check failed: 1 == 2 (synthetic)\\n")
            os.abort()
        return compile_and_load(*args, **kwargs)
    pjrt.compile_and_load = aborting
sys.argv = ["xlasdk", *sys.argv[2:]]
sys.exit(cli.main())
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XLASDK_", "TF_CPP"))}
    env["PYTHONPATH"] = REPO
    env["XLASDK_LOAD_CACHE"] = "0"  # every load goes through the worker's steps
    env.update(extra)
    return env


def _hlo(tmp_path: Path, tag: int) -> Path:
    p = tmp_path / f"m{tag}.hlo"
    p.write_text(_HLO.format(tag=tag))
    return p


def _hooked(tmp_path: Path, mode: str, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "hooked.py"
    script.write_text(_HOOKED)
    return subprocess.run([sys.executable, str(script), mode, *argv], capture_output=True, text=True,
                          env=_env(**env), timeout=300, check=False)


def test_the_child_loads_and_compiles_without_a_worker(tmp_path: Path) -> None:
    out = tmp_path / "o.npz"
    np.save(tmp_path / "a.npy", np.arange(4, dtype=np.float32))
    r = _hooked(tmp_path, "plain", "run", str(_hlo(tmp_path, 7)), "--input", f"0={tmp_path / 'a.npy'}", "--output",
                str(out))
    assert r.returncode == 0, r.stderr
    assert "WORKER STARTED" not in r.stderr
    got = np.load(out)
    np.testing.assert_array_equal(got[next(iter(got.files))], np.arange(4, dtype=np.float32) + [1, 2, 3, 7])
    # without supervision (XLASDK_CLI_SUPERVISE=0) the command is the user's process: the worker goes first
    r = _hooked(tmp_path, "plain", "run", str(_hlo(tmp_path, 8)), "--random-inputs", XLASDK_CLI_SUPERVISE="0")
    assert r.returncode == 0 and "WORKER STARTED" in r.stderr, r.stderr


def test_a_death_in_the_child_runs_the_command_again_with_the_worker(tmp_path: Path) -> None:
    """The child aborts in its own compile: the command runs once more with the worker doing the
    loads and compiles, whose compile survives here; so the answer comes, as it did before."""
    out = tmp_path / "o.npz"
    np.save(tmp_path / "a.npy", np.ones(4, dtype=np.float32))
    r = _hooked(tmp_path, "abort-local", "run", str(_hlo(tmp_path, 9)), "--input", f"0={tmp_path / 'a.npy'}",
                "--output", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("WORKER STARTED") == 1 and "Check failed" not in r.stderr, r.stderr
    got = np.load(out)
    np.testing.assert_array_equal(got[next(iter(got.files))], [2, 3, 4, 10])


@pytest.mark.parametrize("supervise", ["1", "0"])
def test_a_load_past_its_time_limit_is_reported_as_the_workers(tmp_path: Path, supervise: str) -> None:
    """The same line and exit code whether the child ran the load (its parent enforces the limit)
    or the worker did (XLASDK_CLI_SUPERVISE=0)."""
    hlo = _hlo(tmp_path, 11)
    r = subprocess.run([sys.executable, "-m", "xlasdk.cli", "run", str(hlo), "--random-inputs"], capture_output=True,
                       text=True, env=_env(XLASDK_LOAD_TIMEOUT="0.000001", XLASDK_CLI_SUPERVISE=supervise),
                       timeout=300, check=False)
    assert (r.returncode, r.stdout) == (2, ""), r.stderr
    assert r.stderr.splitlines()[-1] == (
        f"xlasdk run: error: {hlo}: loading the module did not finish within 1e-06 s and was stopped (corrupt "
        "input makes MLIR's and XLA's readers spin; XLASDK_LOAD_TIMEOUT sets the limit)"), r.stderr


class _Host:
    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, BaseException], float | None, int | None]] = []
        self.ended = 0

    def before(self, deaths: dict[str, BaseException], timeout: float | None, budget: int | None) -> None:
        self.calls.append((deaths, timeout, budget))

    def after(self) -> None:
        self.ended += 1


def _raise(exc: BaseException) -> None:
    raise exc


def test_requests_run_here_with_the_workers_replies(monkeypatch: pytest.MonkeyPatch) -> None:
    host = _Host()
    isolated_local.install(host)
    try:
        monkeypatch.setenv("XLASDK_WORKER_MEMORY", "5G")
        joined = isolated.request("os.path:join", "a", "b", on_death=lambda e: RuntimeError("dead"))
        assert joined == os.path.join("a", "b")
        assert host.calls[0][1:] == (None, 5 << 30) and host.ended == 1
        died = isolated.request.__module__  # any request with a time limit hands over its timed-out message
        isolated.request("os.path:basename", died, timeout=2.5, on_death=lambda e: RuntimeError(e.reason))
        assert str(host.calls[1][0]["timed_out"]) == "did not finish within 2.5 s" and host.calls[1][1] == 2.5
        cases = [(RecursionError(), "recursion", "nested too deeply"),
                 (MemoryError(), "memory", "ran past its memory budget of 5.0 GiB"),
                 (ValueError("bug"), "internal", "ValueError: bug"),
                 (isolated.Failed("compile", "RESOURCE_EXHAUSTED: no room"), "memory", "(RESOURCE_EXHAUSTED: no room)"),
                 (isolated.Failed("parse", "syntax"), "parse", "syntax")]
        for exc, stage, words in cases:
            with pytest.raises(isolated.Failed) as info:
                isolated_local.call(_raise, (exc,), None, lambda e: RuntimeError("dead"))
            assert info.value.stage == stage and words in info.value.message, (exc, info.value.message)
        assert host.ended == 2 + len(cases)
        import resource

        before = resource.getrlimit(resource.RLIMIT_DATA)
        seen = isolated_local.call(resource.getrlimit, (resource.RLIMIT_DATA,), None, lambda e: RuntimeError("dead"))
        assert seen[0] == min([5 << 30, *(b for b in before if b != resource.RLIM_INFINITY)])
        assert resource.getrlimit(resource.RLIMIT_DATA) == before  # put back after the request
        # without on_death a request goes to the worker (its caller relies on surviving a death)
        assert isolated.request("os:getpid") != os.getpid()
    finally:
        isolated_local.install(None)
    assert not isolated_local.active()


def test_native_diagnostics_of_a_clean_failure_stay_off_the_terminal(tmp_path: Path) -> None:
    """A truncated ``.mlirbc``: MLIR prints ``loc("-":0:0): error: ...`` lines on fd 2 before the
    deserialization error the request replies with. In the worker they went to its log; run in the
    child they must not reach the user's terminal either: one line, exit 2 (a new user's finding)."""
    src = _hlo(tmp_path, 5)
    full = tmp_path / "m.mlirbc"
    r = _hooked(tmp_path, "plain", "convert", str(src), str(full))
    assert r.returncode == 0, r.stderr
    cut = tmp_path / "cut.mlirbc"
    cut.write_bytes(full.read_bytes()[: len(full.read_bytes()) * 3 // 4])
    r = _hooked(tmp_path, "plain", "run", str(cut), "--random-inputs")
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("xlasdk run: error: ") and "cut.mlirbc" in lines[0], r.stderr
