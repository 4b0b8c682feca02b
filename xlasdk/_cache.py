"""The byte store behind the compile cache: an on-disk cache of compiled executables, shared by processes.

A leaf module: what it stores are bytes (the compile cache stores serialized executables,
:mod:`xlasdk.program.load_cache` the records of verified loads); compiling and loading the
executables is :mod:`xlasdk.runtime.cache`'s (:func:`~xlasdk.runtime.cache.compile_cached`), which
is also the public home of the names defined here.

What is stored, under which key, and how much: see :mod:`xlasdk.runtime.cache`.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import importlib.metadata
import json
import os
import struct
import tempfile
import time
import warnings
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Union

from . import _cache_trust as trust
from ._atomic import MAX_FILE_BYTES, file_path
from .errors import XlaSdkError

__all__ = [
    "CompileCache",
    "CacheInfo",
    "CacheEntry",
    "CacheArg",
    "default_cache_dir",
    "module_fingerprint",
    "resolve_cache",
]

#: Environment variable naming the cache directory (and turning the cache on by default).
ENV_DIR: Final = "XLASDK_CACHE_DIR"
#: Environment variable with the size limit in bytes.
ENV_MAX_BYTES: Final = "XLASDK_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES: Final = 1 << 30

_MAGIC: Final = b"XLASDK-CACHE-ENTRY\n"
_PREFIX: Final = struct.Struct("<IIQ")  # entry format version, header length, payload length
_FORMAT_VERSION: Final = 2  # 2: an HMAC of the checksum under the directory's key (xlasdk._cache_trust)
#: bytes before the header: magic, prefix, sha256 of header + payload, HMAC of that sha256
_FIXED: Final = len(_MAGIC) + _PREFIX.size + 32 + 32
_SUFFIX: Final = ".xlaexe"
_TMP_PREFIX: Final = trust.TMP_PREFIX
_STALE_TMP_SECONDS: Final = 3600.0

#: per directory, for this process: "" when the cache may use it, else why not (the cache is off)
_verdicts: dict[str, str] = {}
#: per directory: its entry key (xlasdk._cache_trust.load_key), once read or made
_mac_keys: dict[str, bytes] = {}

CacheArg = Union[bool, str, "os.PathLike[str]", "CompileCache", None]


def default_cache_dir() -> str:
    """``$XLASDK_CACHE_DIR``, else ``$XDG_CACHE_HOME/xlasdk``, else ``~/.cache/xlasdk``."""
    env = os.environ.get(ENV_DIR)
    if env:
        return os.path.abspath(os.path.expanduser(env))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "xlasdk")


def _default_max_bytes() -> int:
    env = os.environ.get(ENV_MAX_BYTES)
    if env:
        try:
            v = int(env)
        except ValueError:
            raise XlaSdkError(f"{ENV_MAX_BYTES}={env!r} is not an integer number of bytes") from None
        if v < 0:
            raise XlaSdkError(f"{ENV_MAX_BYTES}={env!r} must be >= 0")
        return v
    return DEFAULT_MAX_BYTES


def module_fingerprint(module_text: str | bytes) -> str:
    """sha256 (hex) of the StableHLO module text: the module part of a cache key."""
    data = module_text.encode("utf-8") if isinstance(module_text, str) else bytes(module_text)
    return hashlib.sha256(data).hexdigest()


#: ``computation -> (module text, its fingerprint)``, for as long as the computation lives.
_fingerprints: weakref.WeakKeyDictionary[Any, tuple[str, str]] = weakref.WeakKeyDictionary()


def _fingerprint_of(source: object, module_text: str) -> str:
    """:func:`module_fingerprint` of ``module_text``, remembered per ``source`` computation.

    The memo is used only while the computation hands back the very same text object (its
    text is made once and never changes), so a changed text is always hashed afresh. Objects
    that cannot be weakly referenced are hashed every time.
    """
    try:
        memo = _fingerprints.get(source)
    except TypeError:  # not weakly referenceable, or unhashable
        return module_fingerprint(module_text)
    if memo is not None and memo[0] is module_text:
        return memo[1]
    fp = module_fingerprint(module_text)
    _fingerprints[source] = (module_text, fp)
    return fp


_jaxlib_version: str | None = None  # _running_jaxlib's memo


def _running_jaxlib() -> str:
    """The installed jaxlib's version, from its package metadata (what ``xlasdk version`` shows;
    read without importing jaxlib, which only :mod:`xlasdk._jaxlib` does), ``"unknown"`` without it."""
    global _jaxlib_version
    if _jaxlib_version is None:
        try:
            _jaxlib_version = importlib.metadata.version("jaxlib")
        except importlib.metadata.PackageNotFoundError:
            _jaxlib_version = "unknown"
    return _jaxlib_version


_keys: dict[tuple[Any, ...], str] = {}  # _key's memo
_KEYS_MAX: Final = 1024


def _key(
    fingerprint: str,
    *,
    options: str,
    platform: str,
    device_kind: str,
    device_ids: Sequence[int] = (),
    jaxlib_version: str | None = None,
    xla_flags: str | None = None,
) -> str:
    """:meth:`CompileCache.key` from the module's :func:`module_fingerprint` (memoised: a pure
    function of its arguments, with ``$XLA_FLAGS`` read on every call)."""
    if jaxlib_version is None:
        jaxlib_version = _running_jaxlib()
    if xla_flags is None:
        xla_flags = os.environ.get("XLA_FLAGS", "")
    ids = [int(i) for i in device_ids]
    inputs = (fingerprint, options, platform, device_kind, tuple(ids), jaxlib_version, xla_flags)
    key = _keys.get(inputs)
    if key is None:
        material = {
            "format": _FORMAT_VERSION,
            "module": fingerprint,
            "options": options,
            "platform": platform,
            "device_kind": device_kind,
            "device_ids": ids,
            "jaxlib": jaxlib_version,
            "xla_flags": xla_flags,
        }
        key = hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()
        if len(_keys) >= _KEYS_MAX:
            _keys.clear()
        _keys[inputs] = key
    return key


@dataclass(frozen=True)
class CacheEntry:
    """One cached executable: ``key``, computation ``name``, ``size`` in bytes, ``last_used`` (epoch s)."""

    key: str
    name: str
    size: int
    last_used: float
    path: str


@dataclass(frozen=True)
class CacheInfo:
    """Summary of a cache directory."""

    directory: str
    entries: int
    total_bytes: int
    max_bytes: int

    def __str__(self) -> str:
        return (
            f"directory: {self.directory}\nentries:   {self.entries}\n"
            f"size:      {_human(self.total_bytes)} of {_human(self.max_bytes)}"
        )


def _human(n: int) -> str:
    f = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if f < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{f:.1f} {unit}"
        f /= 1024
    return f"{n} B"  # pragma: no cover


class CompileCache:
    """A directory of compiled executables keyed by :meth:`key`.

    Parameters
    ----------
    directory:
        Where entries live (created on first store): a ``str`` or ``os.PathLike`` of one (anything
        else, or a name holding NUL, is an :class:`~xlasdk.XlaSdkError`). Default:
        :func:`default_cache_dir`.
    max_bytes:
        Size limit of all entries together; least recently used entries are evicted past it.
        Default: ``$XLASDK_CACHE_MAX_BYTES`` or 1 GiB.

    Safe for several threads and processes at once: entries appear by atomic rename, readers
    validate every entry, and eviction tolerates files vanishing under it.

    The directory is a trust boundary (:mod:`xlasdk._cache_trust`): it is used only if you own it,
    no one else can write it, and no one else's directory or symbolic link is on the way to it
    (else the cache is off for the process, with one warning, and nothing is written), an
    entry only if it is a regular file of yours that no one else can write, at most ``max_bytes``,
    whose HMAC under the directory's private key holds; cleaning deletes only what the cache wrote.

    ``hits`` and ``misses`` count the compiles this object served from disk and the ones XLA
    had to do, in this process (pass your own ``CompileCache`` to ``xs.compile(cache=...)`` to
    read them).
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None, *, max_bytes: int | None = None) -> None:
        if directory is None:
            self._dir = default_cache_dir()
        else:
            try:
                self._dir = os.path.abspath(file_path(directory))
            except (TypeError, ValueError) as e:
                raise XlaSdkError(f"CompileCache: the directory: {e}") from None
        if max_bytes is None:
            max_bytes = _default_max_bytes()
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise XlaSdkError(f"CompileCache: max_bytes must be an int >= 0, got {max_bytes!r}")
        self._max = max_bytes
        self._warned = False
        self.hits = 0
        self.misses = 0

    @property
    def directory(self) -> str:
        return self._dir

    @property
    def max_bytes(self) -> int:
        return self._max

    def __repr__(self) -> str:
        return f"CompileCache({self._dir!r}, max_bytes={self._max}, hits={self.hits}, misses={self.misses})"

    # -- keys ------------------------------------------------------------------------------------
    @staticmethod
    def key(
        module_text: str | bytes,
        *,
        options: str,
        platform: str,
        device_kind: str,
        device_ids: Sequence[int] = (),
        jaxlib_version: str | None = None,
        xla_flags: str | None = None,
    ) -> str:
        """The cache key (64 hex digits) of compiling ``module_text`` with these settings.

        ``options`` is a canonical text of the compile options (``repr(CompileOptions)``);
        ``jaxlib_version`` defaults to the running jaxlib, ``xla_flags`` to ``$XLA_FLAGS``.
        """
        return _key(
            module_fingerprint(module_text),
            options=options,
            platform=platform,
            device_kind=device_kind,
            device_ids=device_ids,
            jaxlib_version=jaxlib_version,
            xla_flags=xla_flags,
        )

    def _path(self, key: str) -> str:
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise XlaSdkError(f"CompileCache: not a cache key: {key!r}")
        return os.path.join(self._dir, key + _SUFFIX)

    # -- trust (xlasdk._cache_trust) ---------------------------------------------------------------
    def _verdict(self) -> str | None:
        """``""`` when the directory may be used, why not when it may not (the cache is then off
        for this process, said once by a warning), None when it does not exist yet."""
        v = _verdicts.get(self._dir)
        if v is None:
            try:
                problem = trust.directory_problem(self._dir)
            except FileNotFoundError:
                return None
            v = _verdicts[self._dir] = "" if problem is None else problem.why
            if problem is not None:  # said once per cause: a cache and its loads/ are off for one reason
                trust.warn_once(problem.at, "directory", f"xlasdk cache {self._dir} is off in this process: {v}")
        return v

    def _distrust(self, problem: str) -> None:
        _verdicts[self._dir] = problem
        trust.warn_once(self._dir, "directory", f"xlasdk cache {self._dir} is off in this process: {problem}")

    def _mac_key(self, *, make: bool) -> bytes | None:
        """The directory's entry key (made when ``make``); None without one, or when the key file
        cannot be trusted (the cache is then off)."""
        k = _mac_keys.get(self._dir)
        if k is None:
            try:
                k = trust.make_key(self._dir) if make else trust.load_key(self._dir)
            except OSError as e:
                self._distrust(e.strerror or str(e))
                return None
            if k is None:
                return None
            _mac_keys[self._dir] = k
        return k

    def _entry_limit(self) -> int:
        """The largest entry read: the cache's size limit (an entry past it is evicted as soon as it
        is stored) and ``XLASDK_MAX_FILE_BYTES``."""
        try:
            file_limit = int(os.environ.get("XLASDK_MAX_FILE_BYTES", "") or MAX_FILE_BYTES)
        except ValueError:
            file_limit = MAX_FILE_BYTES
        return min(self._max, file_limit)

    def _foreign(self, name: str, problem: str) -> None:
        trust.warn_once(
            self._dir, "entry",
            f"xlasdk cache {self._dir}: {name} is ignored: {problem}. Only regular files of yours that no one "
            "else can write are read; delete it (xlasdk cache clear leaves files it did not write)",
        )

    # -- reading ---------------------------------------------------------------------------------
    def get(self, key: str) -> bytes | None:
        """The stored bytes for ``key``, or None (missing, corrupt, forged or not trusted; a
        damaged entry the cache wrote is deleted).

        A hit refreshes the entry's last-used time.
        """
        payload = self._load(key)
        return None if payload is None else bytes(payload)

    def _load(self, key: str) -> memoryview | None:
        """:meth:`get` without copying: a view of the verified payload inside the file's bytes."""
        path = self._path(key)
        if self._verdict() != "":
            return None
        mkey = self._mac_key(make=False)
        if mkey is None:
            return None
        try:
            fd = trust.open_nofollow(path)  # never through a link, never blocking on a FIFO
        except FileNotFoundError:
            return None
        except OSError as e:
            self._foreign(os.path.basename(path), "it is a symbolic link" if e.errno == errno.ELOOP else
                          f"it cannot be opened ({e.strerror})")
            return None
        try:
            st = os.fstat(fd)
            problem = trust.entry_problem(st)
            if problem is not None:
                self._foreign(os.path.basename(path), problem)
                return None
            if st.st_size > self._entry_limit():  # a miss, never read (a 6 GiB sparse file)
                return None
            raw = trust.read_fd(fd, st.st_size)
            if raw is None:
                return None
            payload = _decode(raw, key, mkey)
            if payload is None:
                if raw.startswith(_MAGIC) and trust.has_tag(self._dir):  # one of the cache's own, damaged: drop it
                    self._unlink(path)
                return None
            try:
                os.utime(fd)
            except (OSError, NotImplementedError):
                pass
            return payload
        except OSError:
            return None
        finally:
            os.close(fd)

    def discard(self, key: str) -> None:
        """Delete the entry for ``key`` if there is one (and it is one the cache wrote)."""
        path = self._path(key)
        if self._cleanable() and self._own_entry(path) is not None:
            self._unlink(path)

    # -- writing ---------------------------------------------------------------------------------
    def put(self, key: str, data: bytes, *, name: str = "") -> None:
        """Store ``data`` under ``key`` (atomically), then evict down to ``max_bytes``.

        A directory the cache may not use (see :mod:`xlasdk._cache_trust`) stores nothing: one
        warning said why.

        Raises
        ------
        OSError
            When the directory cannot be created or written.
        """
        path = self._path(key)
        if self._verdict():  # off (said once): nothing is created, not even the directory
            return
        _make_private_dirs(self._dir)  # below directories the verdict found trusted
        if self._verdict() != "":
            return
        mkey = self._mac_key(make=True)
        if mkey is None:
            return
        if os.path.lexists(path) and self._own_entry(path) is None:  # never replace a file the cache did not write
            self._foreign(os.path.basename(path), "it is not an entry the cache wrote")
            return
        trust.write_tag(self._dir)
        blob = _encode(key, name, bytes(data), mkey)
        fd, tmp = tempfile.mkstemp(dir=self._dir, prefix=_TMP_PREFIX)  # mode 0600
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, path)
        except BaseException:
            self._unlink(tmp)
            raise
        self.evict()

    def evict(self, max_bytes: int | None = None) -> int:
        """Delete least recently used entries until the total is at most ``max_bytes``.

        Also removes the cache's own temporary files left for over an hour by writers that died.
        Only what the cache wrote is deleted (see :meth:`clear`). Returns the number of entries
        deleted.
        """
        if not self._cleanable():
            return 0
        limit = self._max if max_bytes is None else max_bytes
        entries = self._scan(include_names=False)
        total = sum(e.size for e in entries)
        removed = 0
        for e in sorted(entries, key=lambda e: e.last_used):
            if total <= limit:
                break
            if self._unlink(e.path):
                removed += 1
            total -= e.size
        self._clean_tmp()
        return removed

    def clear(self) -> int:
        """Delete every entry (and the cache's stray temporary files); returns the number of entries
        deleted.

        Only what the cache wrote goes, in a directory it uses and tagged ``CACHEDIR.TAG``: regular
        files of the user's named as entries (64 hex digits + ``.xlaexe``, or ``.tmp-xlasdk-*``)
        that begin with the entry's magic bytes. Symbolic links, a user's ``model.xlaexe`` and
        other programs' files stay."""
        if not self._cleanable():
            return 0
        n = 0
        for e in self._scan(include_names=False):
            if self._unlink(e.path):
                n += 1
        self._clean_tmp(max_age=0.0)
        return n

    # -- listing ---------------------------------------------------------------------------------
    def entries(self) -> list[CacheEntry]:
        """Every entry, least recently used first.

        Each entry is read whole and its checksum checked: the name of one that fails (corrupt,
        forged, too large) is ``"?"``; characters of a name that are not printable show as ``?``."""
        return sorted(self._scan(include_names=True), key=lambda e: e.last_used)

    def info(self) -> CacheInfo:
        """Entry count and total size."""
        entries = self._scan(include_names=False)
        return CacheInfo(self._dir, len(entries), sum(e.size for e in entries), self._max)

    # -- helpers ---------------------------------------------------------------------------------
    def _cleanable(self) -> bool:
        """Whether the cache may delete in its directory: one it uses and made (``CACHEDIR.TAG``)."""
        return self._verdict() == "" and trust.has_tag(self._dir)

    def _own_entry(self, path: str) -> os.stat_result | None:
        """The ``fstat`` of ``path`` when it is a file the cache wrote: a regular file (not a link)
        of the user's that no one else can write, beginning with the entry's magic; else None."""
        try:
            fd = trust.open_nofollow(path)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if trust.entry_problem(st) is not None or st.st_size < len(_MAGIC):
                return None
            return st if os.read(fd, len(_MAGIC)) == _MAGIC else None
        except OSError:
            return None
        finally:
            os.close(fd)

    def _scan(self, *, include_names: bool) -> list[CacheEntry]:
        out: list[CacheEntry] = []
        if self._verdict() != "":
            return out
        try:
            it = os.scandir(self._dir)
        except OSError:
            return out
        mkey = self._mac_key(make=False) if include_names else None
        with it:
            for de in it:
                if not trust.ENTRY_NAME.fullmatch(de.name):
                    continue
                st = self._own_entry(de.path)
                if st is None:
                    continue
                key = de.name[: -len(_SUFFIX)]
                name = self._read_name(de.path, key, mkey) if include_names else ""
                out.append(CacheEntry(key, name, st.st_size, st.st_mtime, de.path))
        return out

    def _clean_tmp(self, max_age: float = _STALE_TMP_SECONDS) -> None:
        now = time.time()
        try:
            it = os.scandir(self._dir)
        except OSError:
            return
        with it:
            for de in it:
                if trust.TMP_NAME.fullmatch(de.name):
                    st = self._own_entry(de.path)
                    if st is not None and now - st.st_mtime >= max_age:
                        self._unlink(de.path)

    def _read_name(self, path: str, key: str, mkey: bytes | None) -> str:
        """The name recorded in an entry's header, for display only: ``"?"`` unless the whole
        entry's sha256 and HMAC hold and its header names ``key`` (an entry is trusted for nothing,
        not even its name, before that), with every character that is not printable (a newline, a
        terminal's escape sequence) shown as ``?`` and at most 200 characters.

        Read as :meth:`get` reads (no link followed, never blocking, within the size bound), the
        header parsed within bounds; anything odd gives ``"?"``."""
        if mkey is None:
            return "?"
        try:
            fd = trust.open_nofollow(path)
        except OSError:
            return "?"
        try:
            st = os.fstat(fd)
            if trust.entry_problem(st) is not None or st.st_size > self._entry_limit():
                return "?"
            raw = trust.read_fd(fd, st.st_size)
        except OSError:
            return "?"
        finally:
            os.close(fd)
        parts = None if raw is None else _split(raw, mkey)
        if parts is None:
            return "?"
        try:
            header = json.loads(bytes(parts[0]).decode())
        except (ValueError, UnicodeDecodeError, RecursionError, OverflowError):
            return "?"
        if not isinstance(header, dict) or header.get("key") != key:
            return "?"
        name = header.get("name", "")
        if not isinstance(name, str):
            return "?"
        return "".join(c if c.isprintable() else "?" for c in name[:200])

    @staticmethod
    def _unlink(path: str) -> bool:
        try:
            os.unlink(path)
            return True
        except OSError:
            return False

    def _warn_once(self, msg: str) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(msg, RuntimeWarning, stacklevel=4)


def _make_private_dirs(path: str) -> None:
    """``os.makedirs(path)``, each directory it creates of mode 0700 (not only the last)."""
    missing = []
    p = path
    while not os.path.isdir(p):
        missing.append(p)
        up = os.path.dirname(p)
        if up == p:
            break
        p = up
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass


def _encode(key: str, name: str, payload: bytes, mkey: bytes) -> bytes:
    header = json.dumps({"key": key, "name": name, "created": time.time()}, separators=(",", ":")).encode()
    digest = hashlib.sha256(header + payload).digest()
    return (_MAGIC + _PREFIX.pack(_FORMAT_VERSION, len(header), len(payload)) + digest + trust.mac(mkey, digest)
            + header + payload)


def _split(raw: bytes, mkey: bytes) -> tuple[memoryview, memoryview] | None:
    """(header, payload) views into ``raw`` once its length, sha256 and HMAC under ``mkey`` check
    out, else None."""
    if len(raw) < _FIXED or not raw.startswith(_MAGIC):
        return None
    version, hlen, plen = _PREFIX.unpack_from(raw, len(_MAGIC))
    if version != _FORMAT_VERSION or len(raw) != _FIXED + hlen + plen:
        return None
    body = memoryview(raw)[_FIXED:]
    digest = hashlib.sha256(body).digest()
    if digest != raw[_FIXED - 64 : _FIXED - 32] or not hmac.compare_digest(trust.mac(mkey, digest),
                                                                             raw[_FIXED - 32 : _FIXED]):
        return None
    return body[:hlen], body[hlen:]


def _decode(raw: bytes, key: str, mkey: bytes) -> memoryview | None:
    parts = _split(raw, mkey)
    if parts is None:
        return None
    header, payload = parts
    try:
        if json.loads(bytes(header)).get("key") != key:
            return None
    except (ValueError, UnicodeDecodeError, AttributeError, RecursionError):
        return None
    return payload


# -- the cache a compile uses ----------------------------------------------------------------------
_caches: dict[tuple[str, int], CompileCache] = {}


def resolve_cache(cache: CacheArg) -> CompileCache | None:
    """The cache ``xs.compile(..., cache=...)`` uses.

    ``None`` (the default): the cache in ``$XLASDK_CACHE_DIR`` if that variable is set, else no
    cache. ``True``: the default directory (:func:`default_cache_dir`). ``False``: no cache. A
    path: a cache in that directory. A :class:`CompileCache`: that cache.
    """
    if cache is None:
        if not os.environ.get(ENV_DIR):
            return None
        cache = True
    if cache is False:
        return None
    if isinstance(cache, CompileCache):
        return cache
    if cache is True:
        directory = default_cache_dir()
    elif isinstance(cache, (str, os.PathLike)):
        directory = os.path.abspath(os.fspath(cache))
    else:
        raise TypeError(
            f"compile: cache must be True, False, None, a directory or an xs.CompileCache, got {type(cache).__name__}"
        )
    max_bytes = _default_max_bytes()
    c = _caches.get((directory, max_bytes))
    if c is None:
        c = _caches[(directory, max_bytes)] = CompileCache(directory, max_bytes=max_bytes)
    return c
