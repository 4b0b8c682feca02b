"""What the on-disk caches trust: the directory, each entry, the key that authenticates entries.

A cache entry is believed only because of where it is and who wrote it, so the checks are on
both (:mod:`xlasdk._cache` applies them to every cache of xlasdk: the compile cache and the
verified-load records in its ``loads/`` directory):

* **The directory** is used only if the current user owns it and neither its group nor others
  can write it, and nothing on the way to it lets another user swap it or choose where it
  leads: the path is walked as the system resolves it, so each directory above the path as
  given and above wherever its symbolic links lead must be the user's or root's and not
  writable by everyone without the sticky bit, and each symbolic link on the way the user's or
  root's. Otherwise the cache is off for the process, with one warning saying why and how to
  fix it (as pip does with its cache), and nothing is written (not even the directory); the
  user's work goes on uncached. Directories xlasdk creates are mode 0700, made only below
  directories found trusted.
* **An entry** is opened without following symbolic links (``O_NOFOLLOW``), without blocking
  (a FIFO), and checked on the open descriptor before a byte is read: a regular file, owned by
  the user, not writable by group or others, at most the cache's size limit (a 6 GiB sparse
  file is a miss, never read). Anything else is ignored (one warning per directory), never
  deleted.
* **The key**: each entry carries an HMAC-SHA256, under a per-user key kept in the directory
  (``.xlasdk-cache-key``, 32 random bytes, mode 0600, made with ``O_EXCL``), of its sha256
  checksum, which covers its header (the entry's key: the hash of the bytes it stands for) and
  its payload. An entry copied or forged under another key, or written by someone who cannot
  read the key, fails it: a miss.
* **Cleaning** (eviction, ``xlasdk cache clear``) happens only in a trusted directory tagged
  ``CACHEDIR.TAG`` by xlasdk, and deletes only regular files owned by the user whose name has
  the entry's pattern (64 hex digits + ``.xlaexe``, or ``.tmp-xlasdk-*`` for a writer's
  temporary file) and whose first bytes are the entry's magic. A user's ``model.xlaexe``, a
  symbolic link, or another program's ``.tmp-*`` file stays.

A leaf module (it imports only :mod:`xlasdk._atomic`).
"""

from __future__ import annotations

import errno
import hmac
import os
import re
import secrets
import stat
import tempfile
import warnings
from typing import Final, NamedTuple

from ._atomic import file_kind

__all__ = [
    "KEY_NAME", "TAG_NAME", "ENTRY_NAME", "TMP_NAME", "TMP_PREFIX", "Distrust", "directory_problem", "entry_problem",
    "open_nofollow", "read_fd", "load_key", "make_key", "has_tag", "write_tag", "warn_once", "mac",
]

KEY_NAME: Final = ".xlasdk-cache-key"
TAG_NAME: Final = "CACHEDIR.TAG"
_KEY_BYTES: Final = 32
_TAG_SIGNATURE: Final = b"Signature: 8a477f597d28d172789f06886806bc55"
_TAG: Final = (
    _TAG_SIGNATURE + b"\n# This file is a cache directory tag created by xlasdk (its compile cache).\n"
    b"# For information about cache directory tags, see https://bford.info/cachedir/\n"
)
_MAC_DOMAIN: Final = b"xlasdk-cache-entry/2\0"
#: entry names: 64 hex digits + ``.xlaexe``; a writer's temporary file
ENTRY_NAME: Final = re.compile(r"[0-9a-f]{64}\.xlaexe")
TMP_PREFIX: Final = ".tmp-xlasdk-"
TMP_NAME: Final = re.compile(r"\.tmp-xlasdk-[A-Za-z0-9_]{1,32}")

#: symbolic links followed on the way to a cache directory before it counts as a loop (Linux's limit)
_MAX_LINKS: Final = 40
_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK: Final = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)


def _euid() -> int | None:
    return os.geteuid() if hasattr(os, "geteuid") else None


def _who(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


class Distrust(NamedTuple):
    """Why a cache directory cannot be trusted: ``why`` (with how to fix it), caused by ``at``.

    ``at`` is the directory or symbolic link at fault (the cache directory itself as resolved, or
    one on the way to it): the warning is said once per ``at``, so a cache and its ``loads/``,
    off for one reason, say it once.
    """

    at: str
    why: str


def directory_problem(path: str) -> Distrust | None:
    """Why the cache directory ``path`` cannot be trusted, with how to fix it; None when it can.

    ``path`` is checked the way the system resolves it, from ``/`` down (:func:`_way_problem`):
    every directory a name is looked up in, above the path as given and above wherever its
    symbolic links lead, must be the user's or root's and not writable by everyone without the
    sticky bit; every symbolic link on the way must be the user's or root's. Then the directory
    itself (where the links lead) must be the user's and writable by no one else.

    Raises FileNotFoundError when ``path`` does not exist and nothing on the way to it is
    untrusted (a store then creates it, mode 0700, and checks it again): a path through another
    user's directory or link is refused before anything is created.
    """
    path = os.path.abspath(path)
    try:
        st: os.stat_result | None = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):  # not there (a store creates it, or fails saying why)
        st = None
    except OSError as e:
        return Distrust(path, f"it cannot be examined ({e.strerror}). Check its permissions")
    me = _euid()
    if me is not None:  # POSIX (Windows has no owners or mode bits to check)
        problem = _way_problem(path, me)
        if problem is not None:
            return problem
    if st is None:
        raise FileNotFoundError(path)
    real = os.path.realpath(path)
    if not stat.S_ISDIR(st.st_mode):
        return Distrust(real, f"it is {file_kind(st.st_mode)}, not a directory. Set XLASDK_CACHE_DIR to a "
                        "directory of your own")
    if me is None:
        return None
    if st.st_uid != me:
        return Distrust(real, f"it is owned by {_who(st.st_uid)}, not by you ({_who(me)}), and its entries would "
                        "run as your code. Set XLASDK_CACHE_DIR (or cache=) to a directory of your own")
    if st.st_mode & 0o022:
        who = "its group and others" if st.st_mode & 0o022 == 0o022 else ("others" if st.st_mode & 0o002 else
                                                                         "its group")
        return Distrust(real, f"its mode {stat.S_IMODE(st.st_mode):04o} lets {who} write entries that would run as "
                        f"your code. Run `chmod go-w {path}` if only you write there, or use a directory of your own")
    return None


def _names(path: str) -> list[str]:
    return [n for n in path.split("/") if n not in ("", ".")]


def _above(path: str) -> set[str]:
    """The directories above ``path`` (absolute), ``/`` included."""
    out: set[str] = set()
    while True:
        up = os.path.dirname(path)
        if up == path:
            return out
        out.add(up)
        path = up


def _way_problem(path: str, me: int) -> Distrust | None:
    """What on the way to the absolute ``path`` lets another user choose where it leads; None if nothing.

    Walks ``path`` as the system resolves it, one name at a time from ``/``, following each
    symbolic link (a link's own owner counts: in a sticky directory such as ``/tmp`` its owner
    can replace it). Each directory a name is looked up in is checked: owned by the user or root,
    not writable by everyone without the sticky bit. The last directory, the cache directory
    itself, is left to :func:`directory_problem`'s stricter rule; the walk stops at the first name
    that does not exist (what the store creates below it is the user's, mode 0700).
    """
    above = _above(path) | _above(os.path.realpath(path))
    todo = _names(path)[::-1]  # a stack: the next name last
    current = "/"
    links = 0
    if todo:
        problem = _lookup_problem("/", "/" in above, me)
        if problem is not None:
            return problem
    while todo:
        name = todo.pop()
        if name == "..":
            current = os.path.dirname(current)
            continue
        step = os.path.join(current, name)
        try:
            st = os.lstat(step)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            return Distrust(step, f"{_directory(step, step in above)} cannot be examined ({e.strerror})")
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid not in (me, 0):
                return Distrust(step, f"the symbolic link {step} on the way to it is owned by {_who(st.st_uid)}, who "
                                "could point it elsewhere. Use a cache directory inside one of your own, reached "
                                "through no one else's links")
            links += 1
            try:
                if links > _MAX_LINKS:
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
                target = os.readlink(step)
            except OSError as e:
                return Distrust(step, f"the symbolic link {step} on the way to it cannot be followed ({e.strerror})")
            if target.startswith("/"):
                current = "/"
            todo.extend(reversed(_names(target)))
            continue
        if not stat.S_ISDIR(st.st_mode):  # a file on the way: there is no directory (a store fails saying why)
            return None
        current = step
        if todo:  # a directory a name is looked up in (the last one is the cache directory itself)
            problem = _lookup_problem(step, step in above, me, st)
            if problem is not None:
                return problem
    return None


def _directory(path: str, above: bool) -> str:
    return (f"the directory above it, {path}," if above
            else f"the directory {path}, on the way to it through a symbolic link,")


def _lookup_problem(directory: str, above: bool, me: int, st: os.stat_result | None = None) -> Distrust | None:
    """Why a name looked up in ``directory`` cannot be trusted (another user could replace it), or None."""
    where = _directory(directory, above)
    if st is None:
        try:
            st = os.stat(directory)
        except OSError as e:
            return Distrust(directory, f"{where} cannot be examined ({e.strerror})")
    if st.st_uid not in (me, 0):
        return Distrust(directory, f"{where} is owned by {_who(st.st_uid)}, who could replace it. "
                        "Use a cache directory inside one of your own")
    if st.st_mode & 0o002 and not st.st_mode & stat.S_ISVTX:
        return Distrust(directory, f"{where} is writable by everyone (mode {stat.S_IMODE(st.st_mode):04o}) without "
                        "the sticky bit, so anyone could replace it. Use a cache directory inside one of your own")
    return None


def open_nofollow(path: str) -> int:
    """A read-only descriptor of ``path``, not following a symbolic link (``ELOOP``) nor blocking."""
    return os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC)


def entry_problem(st: os.stat_result) -> str | None:
    """Why the file of ``fstat`` ``st`` cannot be a cache entry (its size aside), or None."""
    if not stat.S_ISREG(st.st_mode):
        return f"it is {file_kind(st.st_mode)}"
    me = _euid()
    if me is None:  # not POSIX: no owners or mode bits to check
        return None
    if st.st_uid != me:
        return f"it is owned by {_who(st.st_uid)}"
    if st.st_mode & 0o022:
        return f"its mode {stat.S_IMODE(st.st_mode):04o} lets others write it"
    return None


def read_fd(fd: int, size: int) -> bytes | None:
    """The ``size`` bytes of the open regular file ``fd``; None when it holds another number."""
    chunks = []
    total = 0
    while total <= size:
        chunk = os.read(fd, min(1 << 24, size + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks) if total == size else None


def load_key(directory: str) -> bytes | None:
    """The directory's entry key; None when there is none yet.

    Raises
    ------
    OSError
        The key file is there but cannot be trusted (``strerror`` says why and how to fix it).
    """
    path = os.path.join(directory, KEY_NAME)
    try:
        fd = open_nofollow(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OSError(errno.EPERM, f"{path} is a symbolic link. Delete it", path) from None
        raise OSError(e.errno, f"{path} cannot be read ({e.strerror}). Delete it", path) from None
    try:
        st = os.fstat(fd)
        me = _euid()
        if (not stat.S_ISREG(st.st_mode) or st.st_size != _KEY_BYTES
                or (me is not None and (st.st_uid != me or st.st_mode & 0o077))):
            raise OSError(errno.EPERM, f"{path} is not a private key file of yours (a 32-byte regular file "
                          "of mode 0600). Delete it (the cache then makes a new key)", path)
        data = read_fd(fd, _KEY_BYTES)
    finally:
        os.close(fd)
    if data is None:
        raise OSError(errno.EPERM, f"{path} changed while read. Delete it", path)
    return data


def make_key(directory: str) -> bytes:
    """The directory's entry key, made (32 random bytes, mode 0600, ``O_EXCL``) if there is none.

    The key is written whole to a temporary file and linked into place, so a concurrent process
    sees no key or the whole key: the first link wins, the others read it.
    """
    got = load_key(directory)
    if got is not None:
        return got
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".key-")  # O_EXCL, mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(_KEY_BYTES))
        try:
            os.link(tmp, os.path.join(directory, KEY_NAME))
        except FileExistsError:
            pass
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass
    got = load_key(directory)
    if got is None:  # pragma: no cover - deleted between the link and the read
        raise OSError(errno.ENOENT, "the cache key vanished while made", directory)
    return got


def mac(key: bytes, digest: bytes) -> bytes:
    """HMAC-SHA256 under ``key`` of an entry's sha256 ``digest``."""
    return hmac.new(key, _MAC_DOMAIN + digest, "sha256").digest()


def has_tag(directory: str) -> bool:
    """Whether ``directory`` holds xlasdk's ``CACHEDIR.TAG`` (a regular file of the user's)."""
    try:
        fd = open_nofollow(os.path.join(directory, TAG_NAME))
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if entry_problem(st) is not None or st.st_size < len(_TAG_SIGNATURE):
            return False
        return os.read(fd, len(_TAG_SIGNATURE)) == _TAG_SIGNATURE
    except OSError:
        return False
    finally:
        os.close(fd)


def write_tag(directory: str) -> None:
    """Create ``directory``'s ``CACHEDIR.TAG`` unless there is one (the mark of a directory the
    cache made or stored into: cleaning happens only there)."""
    path = os.path.join(directory, TAG_NAME)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "wb") as f:
        f.write(_TAG)


_warned: set[tuple[str, str]] = set()


def warn_once(directory: str, topic: str, message: str) -> None:
    """A RuntimeWarning ``message``, once per process for ``directory`` and ``topic``."""
    if (directory, topic) in _warned:
        return
    _warned.add((directory, topic))
    warnings.warn(message, RuntimeWarning, stacklevel=3)
