"""Special files as inputs and outputs (issue 17, findings 4, 5 and 6): only regular files are read or
replaced. Each test reproduced its finding first: writing over a FIFO, a device node or a link to one
replaced it with a regular file; reading a FIFO blocked forever and /dev/zero grew memory without end;
paths of other types gave raw TypeError / ValueError; a cache entry with a deeply nested header made
``entries()`` fail with RecursionError.

Every read here runs under an alarm: a read that blocks fails the test instead of hanging the suite.
"""

from __future__ import annotations

import os
import signal
import stat
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _alarm() -> Iterator[None]:
    def _blocked(signum: int, frame: object) -> None:
        raise TimeoutError("blocked for 20 s: a special file was opened in a way that waits")

    old = signal.signal(signal.SIGALRM, _blocked)
    signal.alarm(20)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _comp() -> xs.XlaComputation:
    b = xs.XlaBuilder("neg")
    return b.build(ops.Neg(ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (2,)), "x")))


def _char_device(path: Path) -> bool:
    """A copy of /dev/null's device node at ``path`` (needs root; False when not allowed)."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        return False
    return True


def test_save_refuses_a_fifo_and_leaves_it(tmp_path: Path) -> None:
    fifo = tmp_path / "out.hlo"
    os.mkfifo(fifo)
    with pytest.raises(xs.FormatError, match=r"FIFO.*replaces only regular files"):
        _comp().save(fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["out.hlo"]  # no temporary file left


def test_save_refuses_a_device_node_and_links_to_special_files(tmp_path: Path) -> None:
    dev = tmp_path / "null"
    if _char_device(dev):
        with pytest.raises(xs.FormatError, match="character device"):
            _comp().save(dev, format="hlo")
        assert stat.S_ISCHR(os.lstat(dev).st_mode)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link.hlo"
    link.symlink_to(fifo)
    with pytest.raises(xs.FormatError, match="through the link to"):
        _comp().save(link)
    assert link.is_symlink() and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    loop = tmp_path / "loop.hlo"
    loop.symlink_to(loop)
    with pytest.raises(xs.FormatError, match="loops"):
        _comp().save(loop)
    assert loop.is_symlink()
    d = tmp_path / "dir.hlo"
    d.mkdir()
    with pytest.raises(xs.FormatError, match="directory"):
        _comp().save(d)


def test_save_through_a_link_to_a_regular_file_writes_the_file(tmp_path: Path) -> None:
    real = tmp_path / "real.hlo"
    real.write_text("old")
    link = tmp_path / "link.hlo"
    link.symlink_to(real)
    comp = _comp()
    comp.save(link)
    assert link.is_symlink() and real.read_text() == comp.as_hlo_text()


def test_cli_convert_to_a_fifo_exits_2_and_leaves_it(tmp_path: Path) -> None:
    src = tmp_path / "m.hlo"
    _comp().save(src)
    fifo = tmp_path / "out.mlir"
    os.mkfifo(fifo)
    r = subprocess.run([sys.executable, "-m", "xlasdk.cli", "convert", str(src), str(fifo)], cwd=REPO,
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "FIFO" in r.stderr and stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_load_refuses_fifos_devices_and_big_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fifo = tmp_path / "in.hlo"
    os.mkfifo(fifo)  # no writer: open() without O_NONBLOCK would wait forever
    with pytest.raises(xs.FormatError, match=r"in\.hlo: cannot read the file: it is a FIFO, not a regular file"):
        xs.load_computation(fifo)
    with pytest.raises(xs.FormatError, match="character device"):
        xs.load_computation("/dev/zero", format="hlo")
    with pytest.raises(xs.FormatError, match="FIFO"):
        xs.load_executable(fifo)
    good = tmp_path / "m.hlo"
    _comp().save(good)
    monkeypatch.setenv("XLASDK_MAX_FILE_BYTES", "100")
    size = good.stat().st_size
    with pytest.raises(xs.FormatError, match=f"it holds {size} bytes, more than the limit of 100"):
        xs.load_computation(good)
    monkeypatch.delenv("XLASDK_MAX_FILE_BYTES")
    x = np.array([1.0, -2.0], np.float32)
    np.testing.assert_array_equal(xs.compile(xs.load_computation(good))(x).to_numpy(), -x)


@pytest.mark.parametrize("path", [None, b"f.hlo", 3, "a\0b.hlo"])
def test_load_refuses_paths_that_are_not_paths(path: object) -> None:
    with pytest.raises(xs.FormatError, match="load_computation: (a path must be a str|the path .* NUL)"):
        xs.load_computation(path)  # type: ignore[arg-type]


def test_cache_skips_special_and_junk_entries(tmp_path: Path) -> None:
    cache = xs.CompileCache(tmp_path)
    key = "ab" * 32
    os.mkfifo(tmp_path / f"{key}.xlaexe")  # a FIFO where an entry would be: a miss, never a hang
    assert cache.get(key) is None
    deep = b"[" * 5000 + b"]" * 5000
    junk = b"XLASDK-CACHE-ENTRY\n" + struct.pack("<IIQ", 1, len(deep), 0) + b"\0" * 32 + deep
    (tmp_path / ("cd" * 32 + ".xlaexe")).write_bytes(junk)
    names = {e.key: e.name for e in cache.entries()}
    assert names.get("cd" * 32) == "?"
    assert cache.get("cd" * 32) is None  # its checksum does not hold: a miss
    comp = _comp()
    exe = xs.compile(comp, cache=cache)  # the cache still works around them
    x = np.array([3.0, 4.0], np.float32)
    np.testing.assert_array_equal(exe(x).to_numpy(), -x)
    np.testing.assert_array_equal(xs.compile(comp, cache=cache)(x).to_numpy(), -x)
    assert cache.hits == 1


def _with_header(data: bytes, edit: object) -> bytes:
    """``data`` (an ``Executable.serialize()`` blob) with its JSON header replaced by ``edit(header)``
    (a str), the lengths and crc32 made consistent again, so only the header's content is wrong."""
    import json
    import zlib

    magic = b"XLASDK-EXECUTABLE\n"
    prefix = struct.Struct("<IIQI")
    version, hlen, blen, _ = prefix.unpack_from(data, len(magic))
    fixed = len(magic) + prefix.size
    header = json.loads(data[fixed:fixed + hlen])
    new = edit(header).encode()  # type: ignore[operator]
    body = data[fixed + hlen:]
    return magic + prefix.pack(version, len(new), blen, zlib.crc32(body, zlib.crc32(new))) + new + body


@pytest.mark.parametrize("case", ["huge number", "deep nesting", "deep tuple result"])
def test_executable_headers_are_parsed_within_bounds(case: str) -> None:
    import json

    exe = xs.compile(_comp())
    data = exe.serialize()
    assert xs.deserialize_executable(_with_header(data, json.dumps)).program_shape() == exe.program_shape()

    def edit(h: dict[str, object]) -> str:
        if case == "huge number":
            return json.dumps(h).replace('"num_replicas": 1', '"num_replicas": 1e400')
        if case == "deep nesting":
            return json.dumps(h)[:-1] + ', "x": ' + "[" * 5000 + "]" * 5000 + "}"
        result: object = h["result"]
        for _ in range(100):
            result = {"tuple": [result]}
        return json.dumps({**h, "result": result})

    with pytest.raises(xs.FormatError, match="corrupt header"):
        xs.deserialize_executable(_with_header(data, edit))
