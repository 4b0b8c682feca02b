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
  (:mod:`xlasdk._cache_trust`: a directory and entries of the user's that no one else can
  write, atomic rename, a sha256 checksum over each entry and an HMAC of it under the
  directory's private key, which ties the record to the key of the bytes it stands for; least
  recently used evicted past a quarter of the cache's size limit). The record is a flat
  :mod:`._record` (no pickle), read in one bounded pass; an entry that fails any check is a
  miss (deleted when the cache wrote it) and the file is loaded through the worker.

Failed loads are never remembered: a file that failed fails again, through the worker, with
its own message. ``XLASDK_LOAD_CACHE=0`` turns both levels off.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from typing import Any, Final

from .._cache import CompileCache, resolve_cache
from .._version import __version__
from . import _record

__all__ = ["MEMORY_BYTES", "clear", "key", "lookup", "remember"]

#: the most bytes of results kept in this process (a result larger than a quarter is not kept)
MEMORY_BYTES: Final = 256 << 20
_FORMAT: Final = b"xlasdk-verified-load/2"

_lock = threading.Lock()
_memory: OrderedDict[str, tuple[Any, int]] = OrderedDict()
_memory_bytes = 0
_stamp: bytes | None = None


def _enabled() -> bool:
    return os.environ.get("XLASDK_LOAD_CACHE", "1") != "0"


def _code_stamp() -> bytes:
    """The versions and the loader code that made a result: jaxlib's version, xlasdk's, and the
    size and modification time of each module of ``xlasdk.program`` (this package: the worker's
    services), ``xlasdk.formats`` (the loaders and their checks), ``xlasdk._jaxlib`` and ``xlasdk.ops``
    (whose shape rules the worker runs on loaded modules: ``rule_check``), so an edited source tree
    never reads what older code wrote."""
    global _stamp
    if _stamp is None:
        from .._jaxlib.versions import jaxlib_version

        parts = [_FORMAT, __version__.encode(), jaxlib_version().encode()]
        here = os.path.dirname(os.path.abspath(__file__))
        for folder in (here, *(os.path.join(os.path.dirname(here), sub) for sub in ("formats", "_jaxlib", "ops"))):
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
    raw = disk._load(k)
    if raw is None:
        return None
    try:
        value = _record.decode(raw)
    except _record.RecordError:  # a record this code cannot read back: drop it, load through the worker
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
            disk.put(k, _record.encode(value), name=name)
        except (OSError, _record.RecordError):  # an unwritable cache costs the next load its speed, nothing else
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
    if cache is None or cache._verdict():  # off: the compile cache's directory is not trusted (warned once)
        return None
    directory = os.path.join(cache.directory, "loads")
    store = _stores.get(directory)
    if store is None:
        store = _stores[directory] = CompileCache(directory, max_bytes=max(cache.max_bytes // 4, 1))
    return store


_stores: dict[str, CompileCache] = {}

