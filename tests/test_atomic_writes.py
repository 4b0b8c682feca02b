"""Every file xlasdk writes is replaced atomically: a temporary file in the same directory, synced,
renamed over the target. A serialization or write that fails leaves the old file byte for byte and
no temporary file."""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import _atomic, ops
from xlasdk._atomic import atomic_write, remove_temp_files, temp_path
from xlasdk.cli import main
from xlasdk.errors import FormatError
from xlasdk.formats import saving
from xlasdk.runtime.executable import Executable

F32 = np.float32
OLD = b"the old file\n"


def build() -> xs.XlaComputation:
    bld = xs.XlaBuilder("atomic")
    x = ops.Parameter(bld, 0, xs.Shape.array_shape(F32, (3,)), "x")
    return bld.build(ops.Exp(x) + 1.0)


def names(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def old_file(d: Path, name: str) -> Path:
    p = d / name
    p.write_bytes(OLD)
    return p


def full_disk(*args: Any) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


# -- the helper --------------------------------------------------------------------------------------------
def test_atomic_write_replaces_and_syncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(_atomic.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    target = old_file(tmp_path, "f.bin")
    atomic_write(target, b"new bytes")
    assert target.read_bytes() == b"new bytes" and names(tmp_path) == ["f.bin"]
    assert len(synced) == 2  # the file, then its directory
    atomic_write(tmp_path / "g.bin", lambda f: f.write(b"streamed"))
    assert (tmp_path / "g.bin").read_bytes() == b"streamed"


@pytest.mark.parametrize("where", ["writer", "fsync", "check", "replace"])
def test_a_failed_write_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    target = old_file(tmp_path, "f.bin")

    def writer(f: BinaryIO) -> None:
        f.write(b"half of the new")
        if where == "writer":
            raise RuntimeError("serialization failed")
        f.write(b" file")

    def check(tmp: str) -> None:
        assert Path(tmp).read_bytes() == b"half of the new file"  # complete before the check
        assert Path(tmp).parent == tmp_path and Path(tmp).name.startswith(".f.bin.")
        if where == "check":
            raise ValueError("does not load back")

    if where == "fsync":
        monkeypatch.setattr(_atomic.os, "fsync", full_disk)
    if where == "replace":
        monkeypatch.setattr(_atomic.os, "replace", full_disk)
    with pytest.raises((RuntimeError, ValueError, OSError)):
        atomic_write(target, writer, check=check)
    assert target.read_bytes() == OLD
    assert names(tmp_path) == ["f.bin"]


def test_modes_links_and_directories(tmp_path: Path) -> None:
    target = old_file(tmp_path, "f.bin")
    os.chmod(target, 0o640)
    atomic_write(target, b"x")
    assert (os.stat(target).st_mode & 0o777) == 0o640  # the replaced file's mode
    umask = os.umask(0o022)
    os.umask(umask)
    atomic_write(tmp_path / "new.bin", b"x")
    assert (os.stat(tmp_path / "new.bin").st_mode & 0o777) == 0o666 & ~umask  # as open() would make it
    link = tmp_path / "link.bin"
    link.symlink_to(target)
    atomic_write(link, b"through the link")
    assert link.is_symlink() and target.read_bytes() == b"through the link"
    (tmp_path / "d").mkdir()
    with pytest.raises(OSError):
        atomic_write(tmp_path / "d", b"x")
    with pytest.raises(OSError):
        atomic_write(tmp_path / "missing" / "f", b"x")
    assert names(tmp_path) == ["d", "f.bin", "link.bin", "new.bin"]


def test_remove_temp_files_of_a_dead_writer(tmp_path: Path) -> None:
    target = tmp_path / "out.npz"
    mine = Path(temp_path(target, 4242))
    other = Path(temp_path(target, 4243))
    for p in (mine, other, target):
        p.write_bytes(b"x")
    assert mine.name.startswith(".out.npz.4242-") and mine.name.endswith(".tmp")
    assert remove_temp_files(target, 4242) == [str(mine)]
    assert names(tmp_path) == sorted(["out.npz", other.name])


# -- XlaComputation.save ---------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".hlo", ".mlir", ".mlirbc", ".pb"])
def test_computation_save_failures_keep_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     suffix: str) -> None:
    comp = build()
    target = old_file(tmp_path, "m" + suffix)

    def broken(*args: Any, **kwargs: Any) -> bytes:
        raise FormatError("serialization failed")

    monkeypatch.setattr(saving, "computation_bytes", broken)
    with pytest.raises(FormatError, match="serialization failed"):
        comp.save(target)
    assert target.read_bytes() == OLD and names(tmp_path) == [target.name]
    monkeypatch.undo()
    monkeypatch.setattr(_atomic.os, "fsync", full_disk)
    with pytest.raises(FormatError, match="cannot write the file: No space left on device"):
        comp.save(target)
    assert target.read_bytes() == OLD and names(tmp_path) == [target.name]
    monkeypatch.undo()
    comp.save(target)
    assert target.read_bytes() != OLD and names(tmp_path) == [target.name]
    got = xs.compile(xs.load_computation(target))(np.zeros(3, F32))
    np.testing.assert_allclose(np.asarray(got), np.full(3, 2.0, F32))


# -- Executable.save ---------------------------------------------------------------------------------------
def test_executable_save_failures_keep_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = xs.compile(build())
    target = old_file(tmp_path, "m.xlaexe")

    def broken(self: Executable) -> bytes:
        raise RuntimeError("serialization failed")

    monkeypatch.setattr(Executable, "serialize", broken)
    with pytest.raises(RuntimeError, match="serialization failed"):
        exe.save(target)
    assert target.read_bytes() == OLD and names(tmp_path) == ["m.xlaexe"]
    monkeypatch.undo()
    monkeypatch.setattr(_atomic.os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        exe.save(target)
    assert target.read_bytes() == OLD and names(tmp_path) == ["m.xlaexe"]
    monkeypatch.undo()
    exe.save(target)
    assert names(tmp_path) == ["m.xlaexe"]
    got = xs.load_executable(target)(np.zeros(3, F32))
    np.testing.assert_allclose(np.asarray(got), np.full(3, 2.0, F32))


# -- the CLI's outputs -------------------------------------------------------------------------------------
def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_run_output_failures_keep_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build().save(tmp_path / "m.hlo")
    target = old_file(tmp_path, "o.npz")

    def half_savez(f: BinaryIO, **arrays: Any) -> None:
        f.write(b"PK half a zip")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "savez", half_savez)
    code, _, err = cli("run", str(tmp_path / "m.hlo"), "--random-inputs", "--output", str(target))
    assert code == 2 and f"--output {target}: cannot write: No space left on device" in err
    assert target.read_bytes() == OLD and names(tmp_path) == ["m.hlo", "o.npz"]
    monkeypatch.undo()
    code, out, err = cli("run", str(tmp_path / "m.hlo"), "--random-inputs", "--output", str(target))
    assert code == 0, err
    assert f"wrote {target}" in out and names(tmp_path) == ["m.hlo", "o.npz"]
    with np.load(target) as z:
        assert z.files == ["output_0"] and z["output_0"].shape == (3,)


def test_cli_convert_failures_keep_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build().save(tmp_path / "m.hlo")
    target = old_file(tmp_path, "m.mlirbc")

    def broken(*args: Any, **kwargs: Any) -> bytes:
        raise FormatError(f"save({str(target)!r}): serialization failed")

    monkeypatch.setattr(saving, "computation_bytes", broken)
    code, _, err = cli("convert", str(tmp_path / "m.hlo"), str(target))
    assert code == 2 and f"{target}: serialization failed" in err
    assert target.read_bytes() == OLD and names(tmp_path) == ["m.hlo", "m.mlirbc"]
    monkeypatch.undo()
    monkeypatch.setattr(_atomic.os, "fsync", full_disk)
    code, _, err = cli("convert", str(tmp_path / "m.hlo"), str(target))
    assert code == 2 and "cannot write the file: No space left on device" in err
    assert target.read_bytes() == OLD and names(tmp_path) == ["m.hlo", "m.mlirbc"]
    monkeypatch.undo()
    code, _, err = cli("convert", str(tmp_path / "m.hlo"), str(target))
    assert code == 0, err
    assert target.read_bytes() != OLD and names(tmp_path) == ["m.hlo", "m.mlirbc"]


def test_pending_temp_files_are_known_until_renamed(tmp_path: Path) -> None:
    """While ``atomic_write`` writes, its temporary file is listed for a signal handler that ends the
    process at once (remove_pending_temp_files); once renamed, nothing is."""
    target = tmp_path / "out.bin"
    seen: list[str] = []

    def write(f: BinaryIO) -> None:
        f.write(b"x")
        (name,) = _atomic._PENDING
        seen.append(name)
        assert os.path.exists(name)
        assert _atomic.remove_pending_temp_files() == [name]
        assert not os.path.exists(name) and not _atomic._PENDING

    with pytest.raises(OSError):  # its file removed under it: the rename fails, the target stays absent
        atomic_write(target, write)
    assert seen and not target.exists() and not _atomic._PENDING
    atomic_write(target, b"y")
    assert target.read_bytes() == b"y" and not _atomic._PENDING and _atomic.remove_pending_temp_files() == []


def _big_hlo(path: Path, n: int = 3000) -> None:
    lines = ["HloModule big", "", "ENTRY main {", "  p0 = f32[8] parameter(0)"]
    lines += [f"  p{i} = f32[8] multiply(p{i - 1}, p{i - 1})" for i in range(1, n)]
    lines += [f"  ROOT r = f32[8] negate(p{n - 1})", "}"]
    path.write_text("\n".join(lines) + "\n")


def test_sigterm_during_convert_leaves_no_temporary_file(tmp_path: Path) -> None:
    """Issue 47: a SIGTERM while ``xlasdk convert`` wrote and checked its output (the supervising
    command killed the child and exited, past the removal of the child's temporary file) left
    ``.out.mlir.PID-HEX.tmp`` beside the output. The signal goes to the command or to its whole
    group, from the moment the temporary file exists to a second later (while the written file is
    loaded back and compiled)."""
    import random
    import signal
    import subprocess
    import sys
    import time

    src = tmp_path / "big.hlo"
    _big_hlo(src)
    rng = random.Random(47)
    repo = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["PYTHONPATH"] = str(repo)

    def default_signals() -> None:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)

    left = []
    for i, (target, delay) in enumerate([("command", 0.0), ("group", 0.0)] + [
            (("command", "group")[k % 2], rng.uniform(0.05, 1.0)) for k in range(4)]):
        out = tmp_path / f"out{i}.mlir"
        proc = subprocess.Popen([sys.executable, "-m", "xlasdk.cli", "convert", str(src), str(out)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=repo,
                                start_new_session=True, preexec_fn=default_signals)
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob(f".{out.name}.*.tmp")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(delay)
        (os.killpg if target == "group" else os.kill)(proc.pid, signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
        assert proc.returncode in (0, 128 + signal.SIGTERM, -signal.SIGTERM), (target, delay, proc.returncode, err)
        time.sleep(0.1)  # a child killed by the kernel after its parent: give it its moment
        temps = sorted(p.name for p in tmp_path.glob(f".{out.name}.*"))
        if temps:
            left.append(f"SIGTERM to the {target} {delay:.2f} s after the temporary file appeared "
                        f"(exit {proc.returncode}): {temps}")
    assert not left, "\n".join(left)
