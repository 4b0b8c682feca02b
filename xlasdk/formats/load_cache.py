"""Verified loads, remembered by content: loading the same bytes again skips the worker.

A file is loaded by running every native step on it in the worker process first
(:mod:`xlasdk.formats.untrusted`): XLA's parser, the StableHLO import, MLIR's verifier. What the
worker hands back (the module proto, the module's text, its name and program shape) depends on
nothing but the bytes, the kind of input, the jaxlib that did the work and xlasdk's own loader
code. So it is kept under a key made of exactly those, and a later load of the same bytes takes
it instead of asking the worker again: the module is verified once, not at every load.

Two levels:

* in this process, always: the most recently used results, up to :data:`MEMORY_BYTES` in all;
* on disk, when the compile cache is on (``$XLASDK_CACHE_DIR``, see :mod:`xlasdk.runtime.cache`):
  entries in its ``loads/`` subdirectory, written and checked as compile-cache entries are
  (atomic rename, a sha256 checksum over each entry, least recently used evicted past a quarter
  of the cache's size limit). The record is decoded by an unpickler that builds nothing but
  bytes, strings, tuples and xlasdk's shape classes; an entry that fails any check is deleted
  and the file loaded through the worker. Like compiled code, a cache directory must be
  writable only by people you trust.

Failed loads are never remembered: a file that failed fails again, through the worker, with
its own message. ``XLASDK_LOAD_CACHE=0`` turns both levels off.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import threading
from collections import OrderedDict
from typing import Any, Final

from .._cache import CompileCache, resolve_cache
from .._version import __version__

__all__ = ["MEMORY_BYTES", "clear", "key", "lookup", "remember"]

#: the most bytes of results kept in this process (a result larger than a quarter is not kept)
MEMORY_BYTES: Final = 256 << 20
_FORMAT: Final = b"xlasdk-verified-load/1"
_ALLOWED: Final = frozenset({
    ("xlasdk.shape", "Shape"), ("xlasdk.shape", "ProgramShape"), ("xlasdk.shape", "Layout"),
    ("xlasdk.types", "PrimitiveType"),
})

_lock = threading.Lock()
_memory: OrderedDict[str, tuple[Any, int]] = OrderedDict()
_memory_bytes = 0
_stamp: bytes | None = None


def _enabled() -> bool:
    return os.environ.get("XLASDK_LOAD_CACHE", "1") != "0"


def _code_stamp() -> bytes:
    """The versions and the loader code that made a result: jaxlib's version, xlasdk's, and the
    size and modification time of each module of ``xlasdk.formats`` and ``xlasdk._jaxlib`` (so an
    edited source tree never reads what older code wrote)."""
    global _stamp
    if _stamp is None:
        from .._jaxlib.versions import jaxlib_version

        parts = [_FORMAT, __version__.encode(), jaxlib_version().encode()]
        here = os.path.dirname(os.path.abspath(__file__))
        for folder in (here, os.path.join(os.path.dirname(here), "_jaxlib")):
            for name in sorted(os.listdir(folder)):
                if name.endswith(".py"):
                    st = os.stat(os.path.join(folder, name))
                    parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}".encode())
        _stamp = b"\0".join(parts)
    return _stamp


def key(step: str, kind: str, data: str | bytes) -> str:
    """The content key (64 hex digits) of ``step`` (the worker function) on ``data`` of ``kind``."""
    h = hashlib.sha256(_code_stamp())
    h.update(f"\0{step}\0{kind}\0{type(data).__name__}\0".encode())
    h.update(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    return h.hexdigest()


def _size(value: Any) -> int:
    if isinstance(value, (bytes, str)):
        return len(value)
    if isinstance(value, tuple):
        return sum(_size(v) for v in value) + 64
    return 512


def lookup(k: str) -> Any:
    """The remembered result for key ``k``, or None."""
    if not _enabled():
        return None
    with _lock:
        hit = _memory.get(k)
        if hit is not None:
            _memory.move_to_end(k)
            return hit[0]
    disk = _disk()
    if disk is None:
        return None
    raw = disk.get(k)
    if raw is None:
        return None
    try:
        value = _Unpickler(io.BytesIO(raw)).load()
    except Exception:  # a record this code cannot read back: drop it, load through the worker
        disk.discard(k)
        return None
    _keep(k, value)
    return value


def remember(k: str, value: Any, name: str = "") -> None:
    """Keep ``value`` (a successful worker result) under key ``k``, in memory and on disk."""
    if not _enabled():
        return
    _keep(k, value)
    disk = _disk()
    if disk is not None:
        try:
            disk.put(k, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), name=name)
        except OSError:  # an unwritable cache costs the next load its speed, nothing else
            pass


def clear() -> None:
    """Forget every result kept in this process (the disk entries stay)."""
    global _memory_bytes
    with _lock:
        _memory.clear()
        _memory_bytes = 0


def _keep(k: str, value: Any) -> None:
    global _memory_bytes
    size = _size(value)
    if size > MEMORY_BYTES // 4:
        return
    with _lock:
        if k in _memory:
            return
        _memory[k] = (value, size)
        _memory_bytes += size
        while _memory_bytes > MEMORY_BYTES:
            _, (_, dropped) = _memory.popitem(last=False)
            _memory_bytes -= dropped


def _disk() -> CompileCache | None:
    """The ``loads/`` store beside the compile cache, when that cache is on."""
    cache = resolve_cache(None)
    if cache is None:
        return None
    directory = os.path.join(cache.directory, "loads")
    store = _stores.get(directory)
    if store is None:
        store = _stores[directory] = CompileCache(directory, max_bytes=max(cache.max_bytes // 4, 1))
    return store


_stores: dict[str, CompileCache] = {}


class _Unpickler(pickle.Unpickler):
    """Builds bytes, strings, numbers, tuples and xlasdk's shape classes; any other global is refused."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"a verified-load record may not name {module}.{name}")
        return super().find_class(module, name)
