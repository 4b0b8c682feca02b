"""Writes that cannot lose data, and reads that cannot block or run away.

Every file xlasdk writes goes through :func:`atomic_write`, and every file it reads whole (a
computation, an executable, a compile-cache entry) through :func:`read_regular_file`.

The bytes go to a temporary file in the target's directory (``.NAME.PID-RANDOM.tmp``), are
flushed and ``fsync``-ed, optionally checked, and the temporary file is then renamed over the
target with :func:`os.replace` (atomic on POSIX and Windows), after which the directory is
``fsync``-ed so that the rename survives a power loss. Readers see the old file or the new one,
never half of one; a serialization, write or check that fails leaves the old file exactly as it
was and removes the temporary file.

The temporary file is created with mode 0666 less the umask (what ``open(path, "w")`` gives a
new file) or with the mode of the file it replaces. A target that is a symbolic link is written
through: the file it points to is replaced and the link stays. Only regular files (or new names)
are replaced: a device node, FIFO, socket or directory, or a symbolic link to one (or a link that
loops), is refused with an ``OSError`` naming it, before anything is written.

Reads take regular files only (a FIFO or a device such as ``/dev/zero`` is refused at once, never
opened in a way that blocks or read without end) and at most ``XLASDK_MAX_FILE_BYTES`` bytes
(default 16 GiB).

A leaf module: it imports nothing from xlasdk.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import secrets
import stat
from collections.abc import Callable
from typing import BinaryIO

__all__ = [
    "atomic_write", "temp_path", "remove_temp_files", "remove_pending_temp_files", "read_regular_file", "file_path",
    "file_kind", "MAX_FILE_BYTES",
]

_TEMP_SUFFIX = ".tmp"


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words (``"a FIFO"``, ``"a character device"``)."""
    for test, name in (
        (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISREG, "a regular file"),
    ):
        if test(mode):
            return name
    return "not a regular file"  # pragma: no cover


def _target(path: str | os.PathLike[str]) -> str:
    """The file to replace: ``path``, or what it points to when it is a symbolic link."""
    p = os.path.abspath(os.fspath(path))
    if os.path.islink(p):
        try:
            p = os.path.realpath(p, strict=True)
        except FileNotFoundError:  # a link to a name not yet taken: write that name
            p = os.path.realpath(p)
        except OSError:  # a loop
            raise OSError(errno.ELOOP, "a symbolic link that loops", os.fspath(path)) from None
    return p


def _check_replaceable(target: str, path: str | os.PathLike[str]) -> os.stat_result | None:
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        via = "" if os.path.abspath(os.fspath(path)) == target else f" (through the link to {target})"
        raise OSError(
            errno.EEXIST, f"it is {file_kind(st.st_mode)}{via}: xlasdk replaces only regular files", os.fspath(path)
        )
    return st


def file_path(path: object) -> str:
    """``path`` (a ``str`` or ``os.PathLike`` of one) as a ``str``.

    Raises
    ------
    TypeError
        Another type (``bytes``, ``None``...).
    ValueError
        The path holds a NUL character.
    """
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"a path must be a str or os.PathLike, got {type(path).__name__} {path!r:.80}")
    spath = os.fspath(path)
    if not isinstance(spath, str):
        raise TypeError(f"a path must be a str or os.PathLike of a str, got {spath!r:.80}")
    if "\0" in spath:
        raise ValueError(f"the path {spath!r:.200} holds a NUL character")
    return spath


#: The largest file :func:`read_regular_file` reads (``XLASDK_MAX_FILE_BYTES`` overrides it).
MAX_FILE_BYTES = 16 << 30


def read_regular_file(path: str | os.PathLike[str], limit: int | None = None) -> bytes:
    """The bytes of the regular file ``path``.

    The file is opened without blocking (a FIFO would block ``open``) and checked on the open
    descriptor: anything but a regular file, or one larger than ``limit`` (default
    ``XLASDK_MAX_FILE_BYTES``, else 16 GiB), is refused before a byte is read.

    Raises
    ------
    TypeError
        ``path`` is not a ``str`` or ``os.PathLike`` of one.
    ValueError
        ``path`` holds a NUL character.
    OSError
        The file is missing or unreadable; or it is not a regular file, or too large (``strerror``
        says which, with the size and the limit).
    """
    spath = file_path(path)
    if limit is None:
        try:
            limit = int(os.environ.get("XLASDK_MAX_FILE_BYTES", "") or MAX_FILE_BYTES)
        except ValueError:
            limit = MAX_FILE_BYTES
    fd = os.open(spath, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"it is {file_kind(st.st_mode)}, not a regular file", spath)
        if st.st_size > limit:
            raise OSError(
                errno.EFBIG, f"it holds {st.st_size} bytes, more than the limit of {limit} (XLASDK_MAX_FILE_BYTES)",
                spath,
            )
        chunks = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 24, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # it grew while being read
                raise OSError(errno.EFBIG, f"it grew past the limit of {limit} bytes while read", spath)
        return b"".join(chunks)
    finally:
        os.close(fd)


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


#: The temporary files :func:`atomic_write` is writing now in this process (each is named here
#: before it is created and until it is renamed or removed).
_PENDING: set[str] = set()


def remove_pending_temp_files() -> list[str]:
    """Remove the temporary files this process is writing now; returns their names.

    For a signal handler that ends the process at once (the ``xlasdk`` command's child on SIGINT,
    SIGTERM or SIGHUP), where :func:`atomic_write`'s own cleanup never runs."""
    removed = []
    for name in list(_PENDING):
        _PENDING.discard(name)
        with contextlib.suppress(OSError):
            os.unlink(name)
            removed.append(name)
    return removed


def _create_temp(target: str) -> tuple[int, str]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        name = temp_path(target)
        _PENDING.add(name)  # before the file exists: a handler that runs in between finds no file
        try:
            return os.open(name, flags, 0o666), name  # 0666 less the umask, as open() would create it
        except FileExistsError:  # pragma: no cover - 32 random bits collided
            _PENDING.discard(name)
            continue
        except BaseException:
            _PENDING.discard(name)
            raise
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
        The file could not be written, or ``path`` is (or links to) something other than a
        regular file (``strerror`` says what); whatever ``data`` or ``check`` raised passes through.
        In every case the old file is unchanged and no temporary file is left.
    """
    target = _target(path)
    st = _check_replaceable(target, path)
    mode = None if st is None else stat.S_IMODE(st.st_mode)
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
    finally:
        _PENDING.discard(tmp)
    if fsync:
        _fsync_dir(os.path.dirname(target))
