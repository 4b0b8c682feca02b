"""Writes that cannot lose data: every file xlasdk writes goes through :func:`atomic_write`.

The bytes go to a temporary file in the target's directory (``.NAME.PID-RANDOM.tmp``), are
flushed and ``fsync``-ed, optionally checked, and the temporary file is then renamed over the
target with :func:`os.replace` (atomic on POSIX and Windows), after which the directory is
``fsync``-ed so that the rename survives a power loss. Readers see the old file or the new one,
never half of one; a serialization, write or check that fails leaves the old file exactly as it
was and removes the temporary file.

The temporary file is created with mode 0666 less the umask (what ``open(path, "w")`` gives a
new file) or with the mode of the file it replaces. A target that is a symbolic link is written
through: the file it points to is replaced and the link stays.

A leaf module: it imports nothing from xlasdk.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import stat
from collections.abc import Callable
from typing import BinaryIO

__all__ = ["atomic_write", "temp_path", "remove_temp_files"]

_TEMP_SUFFIX = ".tmp"


def _target(path: str | os.PathLike[str]) -> str:
    """The file to replace: ``path``, or what it points to when it is a symbolic link."""
    p = os.path.abspath(os.fspath(path))
    if os.path.islink(p):
        p = os.path.realpath(p)
    return p


def temp_path(path: str | os.PathLike[str], pid: int | None = None, token: str | None = None) -> str:
    """The name of a temporary file for ``path``: ``DIR/.NAME.PID-TOKEN.tmp``."""
    d, base = os.path.split(_target(path))
    pid = os.getpid() if pid is None else pid
    token = secrets.token_hex(4) if token is None else token
    return os.path.join(d, f".{base}.{pid}-{token}{_TEMP_SUFFIX}")


def remove_temp_files(path: str | os.PathLike[str], pid: int) -> list[str]:
    """Remove the temporary files that process ``pid`` left for ``path`` (it was killed while
    writing); returns their names. Files of other processes are left alone."""
    d, base = os.path.split(_target(path))
    pattern = os.path.join(glob.escape(d), glob.escape(f".{base}.{pid}-") + "*" + glob.escape(_TEMP_SUFFIX))
    removed = []
    for name in glob.glob(pattern):
        with contextlib.suppress(OSError):
            os.unlink(name)
            removed.append(name)
    return removed


def _create_temp(target: str) -> tuple[int, str]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        name = temp_path(target)
        try:
            return os.open(name, flags, 0o666), name  # 0666 less the umask, as open() would create it
        except FileExistsError:  # pragma: no cover - 32 random bits collided
            continue
    raise FileExistsError(f"cannot create a temporary file next to {target}")  # pragma: no cover


def _fsync_dir(d: str) -> None:
    if os.name != "posix":  # pragma: no cover - directories cannot be opened for fsync there
        return
    try:
        fd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # pragma: no cover
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some file systems do not sync directories
        pass
    finally:
        os.close(fd)


def atomic_write(
    path: str | os.PathLike[str],
    data: bytes | bytearray | memoryview | Callable[[BinaryIO], object],
    *,
    check: Callable[[str], object] | None = None,
    fsync: bool = True,
) -> None:
    """Replace ``path`` with ``data`` atomically.

    Parameters
    ----------
    path:
        The file to write (its directory must exist).
    data:
        The bytes, or a function that writes them to the binary file object it is given
        (``lambda f: np.savez(f, **arrays)``); an exception it raises aborts the write.
    check:
        Called with the temporary file's path once it is complete and synced, before the rename;
        an exception it raises aborts the write (the target is not touched).
    fsync:
        Sync the file and its directory (default). Off only for data that may be lost.

    Raises
    ------
    OSError
        The file could not be written; whatever ``data`` or ``check`` raised passes through.
        In every case the old file is unchanged and no temporary file is left.
    """
    target = _target(path)
    mode = None
    try:
        st = os.stat(target)
        if stat.S_ISREG(st.st_mode):
            mode = stat.S_IMODE(st.st_mode)
    except OSError:
        pass
    fd, tmp = _create_temp(target)
    try:
        with os.fdopen(fd, "wb") as f:
            if isinstance(data, (bytes, bytearray, memoryview)):
                f.write(data)
            else:
                data(f)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        if check is not None:
            check(tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if fsync:
        _fsync_dir(os.path.dirname(target))
