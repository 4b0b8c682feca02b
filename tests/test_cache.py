"""Tests of xlasdk/runtime/cache.py: keys, entries, corruption, LRU eviction, concurrent writers,
and compile_cached (the hook behind ``xs.compile(..., cache=True)``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import _cache as cache_mod
from xlasdk import ops
from xlasdk.runtime.cache import CompileCache, compile_cached, module_fingerprint, resolve_cache

REPO = str(Path(__file__).resolve().parents[1])
F32 = np.float32


def chain(n: int, name: str = "chain") -> xs.XlaComputation:
    """x -> sin(x) * 1.0001 + 0.5, n times, on f32[64]."""
    b = xs.XlaBuilder(name)
    x = ops.Parameter(b, 0, xs.Shape.array_shape(F32, (64,)), "x")
    y = x
    for _ in range(n):
        y = ops.Sin(y) * F32(1.0001) + F32(0.5)
    return b.build(y)


def chain_oracle(x: np.ndarray[Any, Any], n: int) -> np.ndarray[Any, Any]:
    y = x.astype(F32)
    for _ in range(n):
        y = (np.sin(y) * F32(1.0001) + F32(0.5)).astype(F32)
    return y


KEY_ARGS: dict[str, Any] = dict(options="CompileOptions(num_replicas=1, num_partitions=1)", platform="cpu",
                                device_kind="cpu", device_ids=[0], jaxlib_version="0.10.2", xla_flags="")


# -- keys ------------------------------------------------------------------------------------------------
def test_key_depends_on_every_component() -> None:
    base = CompileCache.key("module text", **KEY_ARGS)
    assert len(base) == 64 and base == CompileCache.key("module text", **KEY_ARGS)
    variants = {
        "module": CompileCache.key("module text ", **KEY_ARGS),
        **{k: CompileCache.key("module text", **{**KEY_ARGS, k: v}) for k, v in {
            "options": "CompileOptions(num_replicas=2, num_partitions=1)",
            "platform": "cuda",
            "device_kind": "NVIDIA H200",
            "device_ids": [1],
            "jaxlib_version": "0.10.3",
            "xla_flags": "--xla_cpu_enable_fast_math=true",
        }.items()},
    }
    assert len(set(variants.values()) | {base}) == len(variants) + 1, variants
    assert module_fingerprint("abc") == module_fingerprint(b"abc") == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")


def test_key_reads_xla_flags_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    args = {k: v for k, v in KEY_ARGS.items() if k != "xla_flags"}
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    k1 = CompileCache.key("m", **args)
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    assert CompileCache.key("m", **args) != k1


# -- entries ---------------------------------------------------------------------------------------------
def test_put_get_info_clear(tmp_path: Path) -> None:
    c = CompileCache(tmp_path / "c", max_bytes=1 << 20)
    k = CompileCache.key("m1", **KEY_ARGS)
    assert c.get(k) is None
    c.put(k, b"payload-1", name="m1")
    assert c.get(k) == b"payload-1"
    k2 = CompileCache.key("m2", **KEY_ARGS)
    c.put(k2, b"x" * 1000, name="m2")
    info = c.info()
    assert info.entries == 2 and info.directory == str(tmp_path / "c") and info.max_bytes == 1 << 20
    assert info.total_bytes > 1000
    assert {e.name for e in c.entries()} == {"m1", "m2"}
    assert "entries:   2" in str(info)
    c.discard(k)
    assert c.get(k) is None and c.info().entries == 1
    assert c.clear() == 1 and c.info().entries == 0
    with pytest.raises(xs.XlaSdkError, match="not a cache key"):
        c.get("../../etc/passwd")


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage", "empty", "other_key"])
def test_corrupt_entries_are_discarded(tmp_path: Path, damage: str) -> None:
    c = CompileCache(tmp_path)
    k = CompileCache.key("m", **KEY_ARGS)
    c.put(k, bytes(range(256)) * 10, name="m")
    path = tmp_path / f"{k}.xlaexe"
    raw = path.read_bytes()
    if damage == "flip":
        b = bytearray(raw)
        b[len(b) // 2] ^= 1
        path.write_bytes(bytes(b))
    elif damage == "truncate":
        path.write_bytes(raw[: len(raw) - 7])
    elif damage == "garbage":
        path.write_bytes(b"garbage" * 100)
    elif damage == "empty":
        path.write_bytes(b"")
    else:  # a valid entry stored under another key's name
        k2 = CompileCache.key("m2", **KEY_ARGS)
        c.put(k2, b"other", name="m2")
        os.replace(tmp_path / f"{k2}.xlaexe", path)
    assert c.get(k) is None
    # a damaged entry of the cache's (its magic bytes) is deleted; a file without them is not the cache's: left
    assert path.exists() == (damage in ("garbage", "empty"))


def test_lru_eviction_keeps_recently_used_entries(tmp_path: Path) -> None:
    payload = b"p" * 4000
    c = CompileCache(tmp_path, max_bytes=3 * 4300)  # three entries (4000 bytes + 212 of header) fit, four do not
    keys = [CompileCache.key(f"m{i}", **KEY_ARGS) for i in range(4)]
    now = time.time()
    for i, k in enumerate(keys[:3]):
        c.put(k, payload, name=f"m{i}")
        os.utime(tmp_path / f"{k}.xlaexe", (now - 100 + i, now - 100 + i))  # m0 oldest
    assert c.get(keys[0]) == payload  # a hit makes m0 the most recently used
    c.put(keys[3], payload, name="m3")  # over the limit: the least recently used (m1) goes
    assert c.get(keys[1]) is None
    for k in (keys[0], keys[2], keys[3]):
        assert c.get(k) == payload
    assert c.info().total_bytes <= c.max_bytes
    assert c.evict(0) == 3 and c.info().entries == 0


def test_stale_temporary_files_are_cleaned(tmp_path: Path) -> None:
    """A writer's temporary file (its name and the entry's magic bytes) left for over an hour goes;
    a fresh one stays until ``clear``; another program's ``.tmp-*`` file always stays (issue 31)."""
    c = CompileCache(tmp_path)
    stale = tmp_path / ".tmp-xlasdk-deadwrit"
    stale.write_bytes(cache_mod._MAGIC + b"half an entry")
    old = time.time() - 7200
    os.utime(stale, (old, old))
    fresh = tmp_path / ".tmp-xlasdk-livewrit"
    fresh.write_bytes(cache_mod._MAGIC + b"being written")
    foreign = tmp_path / ".tmp-dead-writer"  # not the cache's name
    foreign.write_bytes(cache_mod._MAGIC + b"someone else's")
    os.utime(foreign, (old, old))
    c.put(CompileCache.key("m", **KEY_ARGS), b"x")
    assert not stale.exists() and fresh.exists() and foreign.exists()
    c.clear()
    assert sorted(os.listdir(tmp_path)) == [".tmp-dead-writer", ".xlasdk-cache-key", "CACHEDIR.TAG"]


def test_concurrent_writers_and_readers_never_see_a_broken_entry(tmp_path: Path) -> None:
    """4 processes write the same 5 keys 40 times each (payloads of 0.2-1 MB) while reading them."""
    code = textwrap.dedent(
        f"""
        import hashlib, sys
        sys.path.insert(0, {REPO!r})
        from xlasdk.runtime.cache import CompileCache
        c = CompileCache({str(tmp_path)!r}, max_bytes=1 << 30)
        keys = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(5)]
        me = int(sys.argv[1])
        bad = 0
        for it in range(40):
            k = keys[(it + me) % 5]
            n = 200_000 + 20_000 * ((it * 7 + me) % 40)
            c.put(k, k.encode() * (n // 64), name=f"w{{me}}")
            for k2 in keys:
                got = c.get(k2)
                if got is not None and got != k2.encode() * (len(got) // 64) or got is not None and len(got) % 64:
                    bad += 1
        print("bad", bad)
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(i)], stdout=subprocess.PIPE, text=True)
             for i in range(4)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert all(o.strip() == "bad 0" for o in outs), outs
    c = CompileCache(tmp_path)
    assert c.info().entries == 5
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".tmp-")]
    for e in c.entries():
        data = c.get(e.key)
        assert data is not None and data == e.key.encode() * (len(data) // 64)


# -- resolve_cache / environment ---------------------------------------------------------------------------
def test_resolve_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("XLASDK_CACHE_DIR", raising=False)
    monkeypatch.delenv("XLASDK_CACHE_MAX_BYTES", raising=False)
    assert resolve_cache(None) is None
    assert resolve_cache(False) is None
    d = resolve_cache(tmp_path / "d")
    assert d is not None and d.directory == str(tmp_path / "d")
    mine = CompileCache(tmp_path / "e")
    assert resolve_cache(mine) is mine
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    on = resolve_cache(True)
    assert on is not None and on.directory == str(tmp_path / "xdg" / "xlasdk")
    monkeypatch.setenv("XLASDK_CACHE_DIR", str(tmp_path / "env"))
    env = resolve_cache(None)
    assert env is not None and env.directory == str(tmp_path / "env")
    assert resolve_cache(False) is None
    monkeypatch.setenv("XLASDK_CACHE_MAX_BYTES", "12345")
    assert CompileCache(tmp_path).max_bytes == 12345
    monkeypatch.setenv("XLASDK_CACHE_MAX_BYTES", "lots")
    with pytest.raises(xs.XlaSdkError, match="XLASDK_CACHE_MAX_BYTES='lots' is not an integer"):
        CompileCache(tmp_path)
    with pytest.raises(TypeError, match="cache must be True, False, None, a directory or an xs.CompileCache"):
        resolve_cache(3)  # type: ignore[arg-type]
    with pytest.raises(xs.XlaSdkError, match="max_bytes must be an int >= 0"):
        CompileCache(tmp_path, max_bytes=-1)


# -- compile through the cache --------------------------------------------------------------------------------
def _compile_via_cache(cache: Any, comp: xs.XlaComputation, builds: list[int]) -> Any:
    dev = xs.devices()[0]
    opts = xs.CompileOptions()

    def build() -> Any:
        builds.append(1)
        return xs.compile(comp, dev, options=opts)

    return compile_cached(cache, comp._mlir_module_text(), opts, [dev], build)


def test_compile_cached_miss_hit_and_corrupt_entry(tmp_path: Path) -> None:
    comp = chain(20, "cached20")
    x = np.linspace(-2, 2, 64).astype(F32)
    want = chain_oracle(x, 20)
    c = CompileCache(tmp_path)
    builds: list[int] = []
    exe = _compile_via_cache(c, comp, builds)
    assert len(builds) == 1 and c.info().entries == 1
    np.testing.assert_allclose(np.asarray(exe(x)), want, rtol=1e-5, atol=1e-6)
    hit = _compile_via_cache(c, comp, builds)
    assert len(builds) == 1  # served from the cache
    assert hit.name == "cached20" and hit.program_shape() == comp.program_shape()
    np.testing.assert_array_equal(np.asarray(hit(x)), np.asarray(exe(x)))
    # an entry damaged on disk is dropped and the program recompiled and stored again
    (entry,) = c.entries()
    raw = bytearray(Path(entry.path).read_bytes())
    raw[-100] ^= 0xFF
    Path(entry.path).write_bytes(bytes(raw))
    again = _compile_via_cache(c, comp, builds)
    assert len(builds) == 2 and c.info().entries == 1
    np.testing.assert_array_equal(np.asarray(again(x)), np.asarray(exe(x)))
    # a well-formed entry whose payload is not an executable: discarded, recompiled
    c.put(entry.key, b"not an executable", name="bogus")
    fixed = _compile_via_cache(c, comp, builds)
    assert len(builds) == 3
    np.testing.assert_array_equal(np.asarray(fixed(x)), np.asarray(exe(x)))
    assert c.get(entry.key) != b"not an executable"
    # another module is another entry
    _compile_via_cache(c, chain(3, "cached3"), builds)
    assert len(builds) == 4 and c.info().entries == 2
    # no cache: always compiles
    _compile_via_cache(False, comp, builds)
    assert len(builds) == 5


def test_compile_cached_unwritable_directory_warns_and_still_compiles(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    builds: list[int] = []
    with pytest.warns(RuntimeWarning, match="cannot store the executable"):
        exe = _compile_via_cache(CompileCache(blocker / "sub"), chain(2, "w"), builds)
    x = np.zeros(64, F32)
    np.testing.assert_allclose(np.asarray(exe(x)), chain_oracle(x, 2), rtol=1e-6)


def test_warm_hit_is_much_faster_than_compiling(tmp_path: Path) -> None:
    comp = chain(400, "big")
    c = CompileCache(tmp_path)
    builds: list[int] = []
    t0 = time.perf_counter()
    _compile_via_cache(c, comp, builds)
    cold = time.perf_counter() - t0
    warm = min(_timed(lambda: _compile_via_cache(c, comp, builds)) for _ in range(3))
    assert len(builds) == 1
    assert warm * 3 < cold, (warm, cold)


def _timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def test_cache_env_var_turns_the_cache_on_for_compile_cached(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XLASDK_CACHE_DIR", str(tmp_path / "envcache"))
    builds: list[int] = []
    _compile_via_cache(None, chain(2, "env"), builds)
    _compile_via_cache(None, chain(2, "env"), builds)
    assert len(builds) == 1
    assert CompileCache(tmp_path / "envcache").info().entries == 1
    cache_mod._caches.clear()


def _compile_takes_cache() -> bool:
    import inspect

    return "cache" in inspect.signature(xs.compile).parameters


@pytest.mark.skipif(not _compile_takes_cache(), reason="xs.compile(..., cache=) is not wired yet")
def test_xs_compile_cache_argument(tmp_path: Path) -> None:
    compile_: Any = xs.compile
    comp = chain(5, "wired")
    x = np.ones(64, F32)
    e1 = compile_(comp, cache=tmp_path)
    assert CompileCache(tmp_path).info().entries == 1
    e2 = compile_(comp, cache=tmp_path)
    np.testing.assert_array_equal(np.asarray(e1(x)), np.asarray(e2(x)))
    np.testing.assert_allclose(np.asarray(e2(x)), chain_oracle(x, 5), rtol=1e-5)


# -- the hit path: what a warm hit does and does not do -----------------------------------------------------
def test_a_hit_does_not_rehash_the_text_of_the_same_computation(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    hashed: list[int] = []
    real = cache_mod.module_fingerprint

    def counting(text: str | bytes) -> str:
        hashed.append(len(text))
        return real(text)

    monkeypatch.setattr(cache_mod, "module_fingerprint", counting)
    comp = chain(4, "memo")
    x = np.linspace(-1, 1, 64).astype(F32)
    first = xs.compile(comp, cache=tmp_path)  # miss: hashes the text once
    assert len(hashed) == 1
    for _ in range(3):
        hit = xs.compile(comp, cache=tmp_path)
        np.testing.assert_allclose(np.asarray(hit(x)), chain_oracle(x, 4), rtol=1e-5)
    assert len(hashed) == 1, "a hit on the same computation hashed its module text again"
    np.testing.assert_array_equal(np.asarray(first(x)), np.asarray(hit(x)))
    # another computation object with the same text is hashed (once), and hits the same entry
    twin = chain(4, "memo")
    assert twin._mlir_module_text() == comp._mlir_module_text()
    xs.compile(twin, cache=tmp_path)
    xs.compile(twin, cache=tmp_path)
    assert len(hashed) == 2 and CompileCache(tmp_path).info().entries == 1
    # without a source object (compile_cached called directly) the text is hashed every time
    builds: list[int] = []
    _compile_via_cache(tmp_path, comp, builds)
    _compile_via_cache(tmp_path, comp, builds)
    assert len(hashed) == 4 and builds == []


def test_fingerprint_memo_follows_the_text_object_and_dies_with_the_computation() -> None:
    import gc

    class Comp:  # any weakly referenceable object
        pass

    src = Comp()
    a, b = "module A", "module B"
    assert cache_mod._fingerprint_of(src, a) == module_fingerprint(a)
    assert cache_mod._fingerprint_of(src, b) == module_fingerprint(b)  # another text: not the memo
    assert cache_mod._fingerprint_of(src, a) == module_fingerprint(a)
    assert cache_mod._fingerprint_of(3, a) == module_fingerprint(a)  # not weakly referenceable
    assert src in cache_mod._fingerprints
    n = len(cache_mod._fingerprints)
    del src
    gc.collect()
    assert len(cache_mod._fingerprints) == n - 1


def test_a_hit_neither_compiles_nor_builds_compile_options(monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    from xlasdk._jaxlib import pjrt

    comp = chain(3, "nocompile")
    xs.compile(comp, cache=tmp_path)
    xs.compile(comp, cache=tmp_path)  # the first hit may build the (memoised) load options
    calls: list[str] = []

    def forbid(name: str) -> Any:
        def f(*a: Any, **k: Any) -> Any:
            calls.append(name)
            raise AssertionError(f"{name} called on a cache hit")
        return f

    monkeypatch.setattr(pjrt, "compile_and_load", forbid("compile_and_load"))
    monkeypatch.setattr(pjrt, "make_compile_options", forbid("make_compile_options"))
    x = np.full(64, 0.25, F32)
    hit = xs.compile(comp, cache=tmp_path)
    assert calls == []
    np.testing.assert_allclose(np.asarray(hit(x)), chain_oracle(x, 3), rtol=1e-5)


@pytest.mark.parametrize("where", ["entry header", "executable header", "blob start", "blob middle", "last byte"])
def test_a_corrupt_entry_is_still_a_miss_through_xs_compile(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           where: str) -> None:
    """The hit path skips the executable's own crc32 because the entry's sha256 covers the same
    bytes: a flipped bit anywhere in the file must still be caught, dropped and recompiled."""
    from xlasdk._jaxlib import pjrt

    comp = chain(6, "flip")
    x = np.linspace(-3, 3, 64).astype(F32)
    want = np.asarray(xs.compile(comp, cache=tmp_path)(x))
    (entry,) = CompileCache(tmp_path).entries()
    raw = bytearray(Path(entry.path).read_bytes())
    cache_fixed = cache_mod._FIXED
    hlen = cache_mod._PREFIX.unpack_from(raw, len(cache_mod._MAGIC))[1]
    payload = cache_fixed + hlen  # where the xlasdk executable (its own magic, header, blob) starts
    at = {
        "entry header": cache_fixed + 3,
        "executable header": payload + 40,
        "blob start": len(raw) - 2000,
        "blob middle": payload + (len(raw) - payload) // 2,
        "last byte": len(raw) - 1,
    }[where]
    raw[at] ^= 0x10
    Path(entry.path).write_bytes(bytes(raw))
    compiled: list[int] = []
    real = pjrt.compile_and_load

    def counting(*a: Any) -> Any:
        compiled.append(1)
        return real(*a)

    monkeypatch.setattr(pjrt, "compile_and_load", counting)
    again = xs.compile(comp, cache=tmp_path)
    assert compiled == [1], "a damaged entry was loaded instead of recompiled"
    np.testing.assert_array_equal(np.asarray(again(x)), want)
    assert Path(entry.path).read_bytes() != bytes(raw)  # replaced by a good entry
    xs.compile(comp, cache=tmp_path)
    assert compiled == [1]  # which now hits


def test_deserialize_takes_any_bytes_like_and_keeps_no_view_of_mutable_input() -> None:
    from xlasdk.runtime.executable import deserialize_executable

    comp = chain(2, "bytes_like")
    exe = xs.compile(comp)
    data = exe.serialize()
    x = np.linspace(0, 1, 64).astype(F32)
    want = chain_oracle(x, 2)
    spread = np.zeros(2 * len(data), np.uint8)
    spread[::2] = np.frombuffer(data, np.uint8)
    strided = spread.data[::2]  # not contiguous
    assert not strided.c_contiguous
    for form in (data, bytearray(data), memoryview(data), memoryview(data)[0:], strided):
        np.testing.assert_allclose(np.asarray(deserialize_executable(form)(x)), want, rtol=1e-5)
    bad = bytearray(data)
    bad[-1] ^= 1
    with pytest.raises(xs.FormatError, match="checksum mismatch"):
        deserialize_executable(bad)
    bad.extend(b"resizable")  # no buffer export left behind
    with pytest.raises(xs.FormatError, match="checksum mismatch"):
        deserialize_executable(memoryview(bytes(bad))[: len(data)])


def test_hits_and_misses_are_counted(tmp_path: Path) -> None:
    cache = xs.CompileCache(tmp_path / "counted")
    comp = chain(4, "counted")
    x = np.full(64, 0.5, F32)
    first = xs.compile(comp, cache=cache)
    assert (cache.hits, cache.misses) == (0, 1)
    second = xs.compile(comp, cache=cache)
    third = xs.compile(chain(4, "counted"), cache=cache)  # the same module built again
    assert (cache.hits, cache.misses) == (2, 1)
    assert "hits=2, misses=1" in repr(cache)
    for exe in (first, second, third):
        np.testing.assert_allclose(np.asarray(exe(x)), chain_oracle(x, 4), rtol=1e-5)
    (path,) = (tmp_path / "counted").rglob("*.xlaexe")  # a damaged entry is a miss, compiled again
    with open(path, "r+b") as fh:
        fh.seek(-1, os.SEEK_END)
        last = fh.read(1)
        fh.seek(-1, os.SEEK_END)
        fh.write(bytes([last[0] ^ 1]))
    xs.compile(comp, cache=cache)
    assert (cache.hits, cache.misses) == (2, 2)


_RUN_BLOB = textwrap.dedent("""
    import sys
    import numpy as np
    import xlasdk as xs
    exe = xs.deserialize_executable(open(sys.argv[1], "rb").read())
    x = np.array([1.5, -2.0, 4.0], np.float32)
    print(np.array_equal(exe(x).to_numpy(), x * x - x))
""")
_SQUARE_MINUS = """HloModule sq

ENTRY main {
  x = f32[3] parameter(0)
  m = f32[3] multiply(x, x)
  ROOT r = f32[3] subtract(m, x)
}
"""


def _runs_in_a_fresh_process(blob: bytes, tmp_path: Path) -> bool:
    path = tmp_path / f"exe{len(list(tmp_path.iterdir()))}.bin"
    path.write_bytes(blob)
    out = subprocess.run([sys.executable, "-c", _RUN_BLOB, str(path)], capture_output=True, text=True, timeout=120)
    return out.stdout.strip() == "True"


def test_an_executable_loaded_from_bytes_serializes_to_bytes_that_run(tmp_path: Path) -> None:
    """XLA:CPU re-serializes a deserialized executable without its kernels: loaded in another
    process, it fails at its first run ("Function ... not found"). An xlasdk executable that was
    loaded from bytes (deserialize_executable, a cache hit, a loaded module compiled in the
    worker) serializes to the bytes it was loaded from."""
    built = xs.compile(xs.XlaComputation.from_hlo_text(_SQUARE_MINUS))  # compiled in the worker
    first = built.serialize()
    assert _runs_in_a_fresh_process(first, tmp_path)
    again = xs.deserialize_executable(first).serialize()
    assert _runs_in_a_fresh_process(again, tmp_path)


def test_a_loaded_module_hits_the_compile_cache_in_a_fresh_process(tmp_path: Path) -> None:
    mod = tmp_path / "sq.hlo"
    mod.write_text(_SQUARE_MINUS)
    code = textwrap.dedent(f"""
        import numpy as np
        import xlasdk as xs
        c = xs.CompileCache({str(tmp_path / 'cache')!r})
        exe = xs.compile(xs.load_computation({str(mod)!r}), cache=c)
        x = np.array([1.5, -2.0, 4.0], np.float32)
        print(c.hits, c.misses, np.array_equal(exe(x).to_numpy(), x * x - x))
    """)
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120) for _ in range(2)]
    assert [r.stdout.strip() for r in runs] == ["0 1 True", "1 0 True"], runs[-1].stderr[-2000:]
