"""An on-disk cache of compiled executables, shared by processes.

``xs.compile(computation, cache=True)`` looks the program up here before compiling, and stores
what it compiles. Setting the ``XLASDK_CACHE_DIR`` environment variable turns the cache on for
every ``xs.compile`` that does not say ``cache=False``.

Key
    sha256 over the module fingerprint (sha256 of the StableHLO text given to XLA), the compile
    options, the platform, the device kind, the device ids, the jaxlib version and the
    ``XLA_FLAGS`` environment variable. Any change to one of them is a different entry.
    ``xs.compile`` remembers the fingerprint of each computation's text (which never changes)
    for as long as the computation lives, so compiling it again does not hash the text again.
Entries
    One file per key: a small header (name, key, sizes) and XLA's serialized executable, under a
    sha256 checksum. Files are written under a temporary name and renamed into place
    (``os.replace``), so concurrent writers never leave half an entry and readers never see one.
    An entry that fails its checks (torn, truncated, flipped bits, another format) is deleted
    and the program recompiled.
Size
    ``max_bytes`` (default 1 GiB, or ``XLASDK_CACHE_MAX_BYTES``): after each store the least
    recently used entries (by modification time, refreshed on every hit) are deleted until the
    total fits.

Trust
    The directory is used only if the current user owns it and no one else can write it (else
    the cache is off for the process, with one warning); an entry only if it is a regular file of
    the user's that no one else can write, within ``max_bytes``, opened without following links,
    whose HMAC under the directory's private key (``.xlasdk-cache-key``, mode 0600) holds.
    Cleaning deletes only what the cache wrote, in a directory it tagged ``CACHEDIR.TAG``. See
    :mod:`xlasdk._cache_trust` and the README's "What the caches trust".

This module is the public home of the cache's names; the byte store (:class:`CompileCache`,
:func:`resolve_cache`, ...) is defined in the leaf module :mod:`xlasdk._cache`, which
:mod:`xlasdk.program.load_cache` uses too. :func:`compile_cached` (compiling and loading
executables through the store) is defined with ``xs.compile`` in :mod:`xlasdk.runtime._compile`.
"""

from __future__ import annotations

from .._cache import (
    CacheArg,
    CacheEntry,
    CacheInfo,
    CompileCache,
    default_cache_dir,
    module_fingerprint,
    resolve_cache,
)
from ._compile import compile_cached

__all__ = [
    "CompileCache",
    "CacheInfo",
    "CacheEntry",
    "CacheArg",
    "default_cache_dir",
    "module_fingerprint",
    "resolve_cache",
    "compile_cached",
]
