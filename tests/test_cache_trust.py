"""The caches are a trust boundary (issue 31, findings 1, 2, 3 and the cache part of 5).

Each test plants what the reliability campaign planted (a verified-load record of another module,
a record nested 100,000 deep, a record of shared structure, garbage, a cache directory of mode
0777 or of another user, foreign entries, a 6 GiB sparse entry, a user's files beside the cache)
and checks the outcome against numpy on the module's own arithmetic: the right values, a miss, one
warning, and no file deleted that the cache did not write. Whatever could kill the process runs in
a subprocess."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
import stat
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import path_states
from xlasdk import _cache as cache_mod
from xlasdk import _cache_trust as trust
from xlasdk.program import _record, load_cache
from xlasdk.runtime.cache import CompileCache

REPO = str(Path(__file__).resolve().parents[1])
KEY_ARGS = {"options": "o", "platform": "cpu", "device_kind": "cpu"}
X = np.array([1.5, -2.0, 0.25, 8.0], np.float32)
# two modules of the same signature, f32[4] -> f32[4]: x + 1 and x * 1000
PLUS = """HloModule plus_one

ENTRY main {
  x = f32[4] parameter(0)
  one = f32[] constant(1)
  b = f32[4] broadcast(one), dimensions={}
  ROOT r = f32[4] add(x, b)
}
"""
TIMES = PLUS.replace("plus_one", "times_k").replace("constant(1)", "constant(1000)").replace("add(x, b)",
                                                                                               "multiply(x, b)")


@pytest.fixture(autouse=True)
def _no_cache_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XLASDK_CACHE_DIR", raising=False)


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    d = tmp_path / "cache"
    monkeypatch.setenv("XLASDK_CACHE_DIR", str(d))
    monkeypatch.delenv("XLASDK_LOAD_CACHE", raising=False)
    load_cache.clear()
    yield d
    load_cache.clear()


def _run(text: str) -> np.ndarray:
    return np.asarray(xs.compile(xs.XlaComputation.from_hlo_text(text), cache=False)(X).to_numpy())


def _forge_under(directory: Path, victim: str, donor: str) -> None:
    """What someone without the key can do: the donor's entry rewritten to name the victim's key,
    its sha256 made to hold again, its HMAC copied, written at the victim's name."""
    raw = (directory / f"{donor}.xlaexe").read_bytes()
    fixed = cache_mod._FIXED
    version, hlen, _ = cache_mod._PREFIX.unpack_from(raw, len(cache_mod._MAGIC))
    header = json.loads(raw[fixed:fixed + hlen])
    header["key"] = victim
    h = json.dumps(header, separators=(",", ":")).encode()
    payload = raw[fixed + hlen:]
    digest = hashlib.sha256(h + payload).digest()
    forged = (cache_mod._MAGIC + cache_mod._PREFIX.pack(version, len(h), len(payload)) + digest
              + raw[fixed - 32:fixed] + h + payload)
    (directory / f"{victim}.xlaexe").write_bytes(forged)


# -- finding 1: the verified-load records ------------------------------------------------------------
def test_a_record_swapped_for_another_modules_gives_the_right_module(cache_dir: Path) -> None:
    np.testing.assert_array_equal(_run(PLUS), X + 1)
    np.testing.assert_array_equal(_run(TIMES), X * 1000)
    victim = load_cache.key("load_hlo_in_worker", "text", PLUS)
    donor = load_cache.key("load_hlo_in_worker", "text", TIMES)
    loads = cache_dir / "loads"
    assert (loads / f"{victim}.xlaexe").exists() and (loads / f"{donor}.xlaexe").exists()
    _forge_under(loads, victim, donor)
    load_cache.clear()  # a fresh process: only the disk remembers
    np.testing.assert_array_equal(_run(PLUS), X + 1)  # not X * 1000: the forged record is a miss
    raw = (loads / f"{victim}.xlaexe").read_bytes()
    assert b"times_k" not in raw and b"plus_one" in raw  # replaced by the real record


def test_a_record_under_its_own_name_but_another_key_file_is_a_miss(cache_dir: Path, tmp_path: Path) -> None:
    """A whole cache directory of the user's (key file included) copied elsewhere keeps working;
    an entry carried into a directory with another key does not."""
    np.testing.assert_array_equal(_run(PLUS), X + 1)
    k = load_cache.key("load_hlo_in_worker", "text", PLUS)
    other = CompileCache(tmp_path / "other" / "loads")
    other.put("ab" * 32, b"x")  # makes that directory's own key
    os.replace(cache_dir / "loads" / f"{k}.xlaexe", tmp_path / "other" / "loads" / f"{k}.xlaexe")
    assert other.get(k) is None


_PLANT = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    import xlasdk as xs
    from xlasdk.program import load_cache
    text = sys.argv[1]
    record = bytes.fromhex(sys.stdin.read().strip())
    store = load_cache._disk()
    k = load_cache.key("load_hlo_in_worker", "text", text)
    store.put(k, record, name="planted")  # authenticated: the parser itself must hold
    load_cache.clear()
    t = time.monotonic()
    comp = xs.XlaComputation.from_hlo_text(text)
    x = np.array([1.5, -2.0, 0.25, 8.0], np.float32)
    got = xs.compile(comp, cache=False)(x).to_numpy()
    print(bool(np.array_equal(got, x + 1)), round(time.monotonic() - t, 1))
""")


def _deep_pickle(n: int) -> bytes:
    return b"\x80\x02N" + b"\x85" * n + b"."  # None, then TUPLE1 n times: ((((None,),),),...)


def _shared_pickle(n: int) -> bytes:
    a: tuple[object, ...] = ()
    for _ in range(n):
        a = (a, a)  # 2**n leaves, n memo entries: a small pickle
    return pickle.dumps(a, protocol=2)


@pytest.mark.parametrize("record", [
    pytest.param(b"\x01" + b"t\x01\x00\x00\x00" * 100_000 + b"N", id="record-nested-100000"),
    pytest.param(_deep_pickle(100_000), id="pickle-nested-100000"),
    pytest.param(_shared_pickle(40), id="pickle-shared-structure"),
    pytest.param(b"\x01t\xff\xff\xff\xff" + b"N" * 64, id="record-claims-4G-items"),
    pytest.param(b"\x01s" + (1 << 62).to_bytes(8, "little"), id="record-claims-huge-string"),
    pytest.param(b"\x01" + b"S" * 300, id="record-shapes-nested-300"),
    pytest.param(bytes(random.Random(31).randrange(256) for _ in range(4096)), id="garbage"),
])
def test_a_planted_record_is_a_miss_in_a_process_that_survives(tmp_path: Path, record: bytes) -> None:
    assert len(record) < 2_000_000
    env = {**os.environ, "XLASDK_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": REPO}
    env.pop("XLASDK_LOAD_CACHE", None)
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-c", _PLANT, PLUS], input=record.hex(), capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])  # no SIGSEGV, no raw exception
    ok, seconds = r.stdout.split()
    assert ok == "True", r.stdout  # the module of the file, through the worker
    assert float(seconds) < 60 and time.monotonic() - t < 240  # no hang (a loose bound)


def test_record_round_trip_and_every_damaged_record_is_a_record_error() -> None:
    ps = xs.ProgramShape(
        [xs.Shape.array_shape(np.float32, (2, 3), layout=(0, 1)),
         xs.Shape.array_shape(np.int8, (4,), dynamic_dimensions=[True])],
        xs.Shape.tuple_shape([xs.Shape.scalar_shape(np.bool_), xs.Shape.token_shape(),
                              xs.Shape.tuple_shape([xs.Shape.array_shape(np.complex64, (0, 5))])]),
        ["a", "b\udcff"],
    )
    names = (("arg", "x"), ("op.1", "caf\u00e9"), ("op.2", ""))  # a run of string pairs (hlo_names' form)
    value = (b"\x00proto", b"bytecode", "m\u00e9", ps, (("mhlo.num_partitions", 2), ("n", -(1 << 63))), None, True,
             names, ("a", "b"), ((), ("x",)))
    data = _record.encode(value)
    back = _record.decode(data)
    assert back == value and str(back[3]) == str(ps) and back[3].parameter_names() == ps.parameter_names()
    assert back[3].parameter_shapes()[0].layout() == ps.parameter_shapes()[0].layout()
    assert back[3].parameter_shapes()[1].is_dynamic_dimension(0)
    rng = random.Random(2026)
    for i in range(3000):  # any damage: the value again, another value, or RecordError; nothing else
        b = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(b) or 1)
            if i % 3 == 0 and at < len(b):
                b[at] = rng.randrange(256)
            elif i % 3 == 1:
                del b[at:]
                b += bytes(rng.randrange(256) for _ in range(rng.randint(0, 8)))
            else:
                b[at:at] = bytes([rng.choice(b"NTFistbuSP")])
        try:
            _record.decode(bytes(b))
        except _record.RecordError:
            pass
    for claim in (b"u" + b"\xff" * 8, b"u\x01\x00\x00\x00\xff\xff\xff\xff",  # runs of strings claiming too much
                  b"u\x01\x00\x00\x00\x00\x00\x00\x00" + (1 << 62).to_bytes(8, "little") + b"abc",
                  b"u\x00\x00\x00\x00\x00\x00\x00\x00",
                  b"u\x01\x00\x00\x00\x00\x00\x00\x00\x01" + b"\x00" * 7 + b"\xff"):  # not UTF-8
        with pytest.raises(_record.RecordError):
            _record.decode(b"\x01" + claim)
    for bad in (object(), 1 << 64, np.int32(3), [1], {"a": 1}):
        with pytest.raises(_record.RecordError):
            _record.encode(bad)
    deep: object = None
    for _ in range(_record.MAX_DEPTH + 2):
        deep = (deep,)
    with pytest.raises(_record.RecordError, match="nested too deep"):
        _record.encode(deep)


# -- finding 2: whose directory, whose entries -------------------------------------------------------
def _entry_and_comp(d: Path) -> tuple[xs.XlaComputation, str]:
    comp = xs.XlaComputation.from_hlo_text(PLUS)
    np.testing.assert_array_equal(np.asarray(xs.compile(comp, cache=d)(X).to_numpy()), X + 1)
    (e,) = CompileCache(d).entries()
    return comp, e.key


def _compiles(comp: xs.XlaComputation, d: Path) -> tuple[int, int, list[str]]:
    """(hits, misses) of two compiles through a fresh CompileCache of ``d``, and the warnings."""
    c = CompileCache(d)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            np.testing.assert_array_equal(np.asarray(xs.compile(comp, cache=c)(X).to_numpy()), X + 1)
    return c.hits, c.misses, [str(w.message) for w in caught if "xlasdk cache" in str(w.message)]


def test_a_directory_others_can_write_is_off_with_one_warning(tmp_path: Path) -> None:
    d = tmp_path / "open"
    comp, _ = _entry_and_comp(d)
    os.chmod(d, 0o777)
    other = tmp_path / "open2"  # a fresh path: the verdict of a directory is kept for the process
    os.rename(d, other)
    before = sorted(os.listdir(other))
    hits, misses, said = _compiles(comp, other)
    assert (hits, misses) == (0, 2)  # off: its entry is not read, nothing is stored
    assert len(said) == 1 and "is off in this process" in said[0] and "0777" in said[0]
    assert f"chmod go-w {other}" in said[0]
    assert sorted(os.listdir(other)) == before
    assert CompileCache(other).clear() == 0 and sorted(os.listdir(other)) == before


def test_a_group_writable_directory_is_off(tmp_path: Path) -> None:
    d = tmp_path / "grp"
    comp, _ = _entry_and_comp(d)
    os.chmod(d, 0o770)
    os.rename(d, tmp_path / "grp2")
    hits, misses, said = _compiles(comp, tmp_path / "grp2")
    assert (hits, misses) == (0, 2) and len(said) == 1 and "lets its group write" in said[0]


def test_a_directory_of_another_user_is_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "theirs"
    comp, _ = _entry_and_comp(d)
    if os.geteuid() == 0:
        os.chown(d, 4242, 4242)
        os.rename(d, tmp_path / "theirs2")
    else:  # not root: another user is simulated by our own uid being another
        os.rename(d, tmp_path / "theirs2")
        real = trust._euid()
        assert real is not None
        monkeypatch.setattr(trust, "_euid", lambda: real + 1)
    hits, misses, said = _compiles(comp, tmp_path / "theirs2")
    assert (hits, misses) == (0, 2)
    # as root the directory is another user's; otherwise every directory of ours is, and the walk
    # from / down names the first of them (the way to the directory is checked before it)
    fix = "a directory of your own" if os.geteuid() == 0 else "a cache directory inside one of your own"
    assert len(said) == 1 and "is owned by" in said[0] and fix in said[0]


def test_a_directory_under_a_world_writable_one_without_sticky_bit_is_off(tmp_path: Path) -> None:
    top = tmp_path / "open-top"
    top.mkdir()
    os.chmod(top, 0o777)
    comp = xs.XlaComputation.from_hlo_text(PLUS)
    hits, misses, said = _compiles(comp, top / "cache")
    assert (hits, misses) == (0, 2) and len(said) == 1 and f"the directory above it, {top}" in said[0]
    os.chmod(top, 0o1777)  # a sticky directory (/tmp): no one else can rename ours
    hits, misses, said = _compiles(comp, top / "cache2")
    assert (hits, misses) == (1, 1) and said == []


def test_a_new_cache_directory_is_private(tmp_path: Path) -> None:
    comp = xs.XlaComputation.from_hlo_text(PLUS)
    old = os.umask(0)
    try:
        xs.compile(comp, cache=tmp_path / "a" / "b" / "cache")
    finally:
        os.umask(old)
    for d in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "cache"):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d
    key = tmp_path / "a" / "b" / "cache" / trust.KEY_NAME
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600 and key.stat().st_size == 32


# -- symbolic links on the way: who chooses where the cache is ---------------------------------------
OTHER = 65534  # nobody: another user, for the tests that run as root


def _theirs(d: Path, mode: int = 0o755) -> Path:
    """A directory of another user's (made by root, handed over)."""
    d.mkdir()
    os.chown(d, OTHER, OTHER)
    os.chmod(d, mode)
    return d


def _link(link: Path, target: Path, owner: int | None = None) -> Path:
    link.symlink_to(target)
    if owner is not None:
        os.lchown(link, owner, owner)
    return link


def _through_env(cache: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int, list[str]]:
    """(hits, misses) of two loads and compiles of PLUS with ``$XLASDK_CACHE_DIR`` = ``cache`` (the
    compile cache and its loads/), from a cold memory each time, and the cache's warnings."""
    monkeypatch.setenv("XLASDK_CACHE_DIR", str(cache))
    monkeypatch.delenv("XLASDK_LOAD_CACHE", raising=False)
    c = cache_mod.resolve_cache(None)
    assert c is not None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            load_cache.clear()
            comp = xs.XlaComputation.from_hlo_text(PLUS)
            np.testing.assert_array_equal(np.asarray(xs.compile(comp)(X).to_numpy()), X + 1)
    load_cache.clear()
    return c.hits, c.misses, [str(w.message) for w in caught if "xlasdk cache" in str(w.message)]


def _victim_home(tmp_path: Path) -> Path:
    """The current user's private directory, with a ``.ssh`` in it."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / ".ssh").mkdir(mode=0o700)
    (home / ".ssh" / "authorized_keys").write_text("ssh-ed25519 AAAA me\n")
    return home


@pytest.mark.parametrize("below", [False, True], ids=["the-link", "below-the-link"])
@pytest.mark.parametrize("where", ["their-directory", "sticky-directory"])
def test_another_users_link_to_the_users_directory_turns_the_cache_off_and_writes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, below: bool) -> None:
    """Another user's link (in their directory, or in a shared sticky one as /tmp) to the user's
    ``~/.ssh``: the cache is off with one warning, and nothing is written there (no CACHEDIR.TAG,
    key, entry or loads/), nor is a directory made below the link."""
    if os.geteuid() != 0:
        pytest.skip("another user's directory and link need root to make")
    home = _victim_home(tmp_path)
    if where == "their-directory":
        holder = _theirs(tmp_path / "theirs")
    else:
        holder = tmp_path / "shared-tmp"  # root's, mode 1777: anyone may add a link, only its owner replace it
        holder.mkdir()
        os.chmod(holder, 0o1777)
    link = _link(holder / "xlasdk-cache", home / ".ssh", owner=OTHER)
    cache = link / "xlasdk" if below else link
    before = path_states(home)
    hits, misses, said = _through_env(cache, monkeypatch)
    assert (hits, misses) == (0, 2)
    assert len(said) == 1 and f"xlasdk cache {cache} is off in this process" in said[0], said
    culprit = str(holder) if where == "their-directory" else str(link)
    assert culprit in said[0] and "nobody" in said[0], said[0]
    assert path_states(home) == before  # nothing written at the target
    assert CompileCache(cache).clear() == 0 and CompileCache(cache).entries() == [] and path_states(home) == before


@pytest.mark.parametrize("below", [False, True], ids=["the-link", "below-the-link"])
def test_the_users_own_link_to_the_users_directory_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         below: bool) -> None:
    """No crying wolf: a link of the user's, in the user's directory, to a directory of the user's
    (the common ``~/.cache -> /data/me/cache``) is a cache like any other."""
    real = tmp_path / "data" / "cache"
    real.mkdir(parents=True, mode=0o700)
    link = _link(tmp_path / "dot-cache", real)
    cache = link / "xlasdk" if below else link
    hits, misses, said = _through_env(cache, monkeypatch)
    assert (hits, misses) == (1, 1) and said == []
    stored = real / "xlasdk" if below else real
    assert (stored / trust.TAG_NAME).is_file() and (stored / trust.KEY_NAME).is_file()
    assert len(CompileCache(cache).entries()) == 1 and CompileCache(cache / "loads").entries() != []
    assert link.is_symlink()  # written through, not replaced


@pytest.mark.parametrize("how", ["their-directory-above-the-given-path", "their-link-in-the-users-directory",
                                 "their-link-on-the-way-only"])
def test_another_users_directory_or_link_on_the_way_turns_the_cache_off(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          how: str) -> None:
    """The resolved path is all the user's; the way to it is not: another user's directory above
    the path as given (holding a link of the user's), a link of another user's in the user's own
    directory, or another user's link met only on the way (the user's link leads to it, it leads
    back to the user's directory: neither the path as given nor the resolved one names it)."""
    if os.geteuid() != 0:
        pytest.skip("another user's directory and link need root to make")
    home = _victim_home(tmp_path)
    target = home / "cache"
    target.mkdir(mode=0o700)
    if how == "their-directory-above-the-given-path":
        theirs = _theirs(tmp_path / "theirs")
        cache = _link(theirs / "c", target)  # the link is the user's: its directory is not
        culprit = f"the directory above it, {theirs}, is owned by"
    elif how == "their-link-in-the-users-directory":
        cache = _link(home / "c", target, owner=OTHER)
        culprit = f"the symbolic link {cache} on the way to it is owned by"
    else:
        theirs = _theirs(tmp_path / "theirs")
        hop = _link(theirs / "hop", target, owner=OTHER)
        cache = _link(home / "c", hop)
        assert not {str(theirs), str(hop)} & {*map(str, cache.parents), *map(str, cache.resolve().parents)}
        culprit = f"the directory {theirs}, on the way to it through a symbolic link, is owned by"
    assert cache.resolve() == target
    before = path_states(home)
    hits, misses, said = _through_env(cache, monkeypatch)
    assert (hits, misses) == (0, 2)
    assert len(said) == 1 and culprit in said[0] and "nobody" in said[0], said
    assert path_states(home) == before


def test_the_way_to_a_cache_directory_is_walked_as_the_system_resolves_it(tmp_path: Path) -> None:
    """directory_problem on links with ``..``, links to links, a loop and a dangling link: the
    verdict the walk gives, and FileNotFoundError only where nothing on the way is untrusted."""
    base = tmp_path / "b"
    (base / "x" / "y").mkdir(parents=True, mode=0o700)
    _link(base / "up", Path("x/y/.."))  # relative, with ..: base/x
    assert trust.directory_problem(str(base / "up")) is None
    _link(base / "chain", base / "up")
    assert trust.directory_problem(str(base / "chain" / "y")) is None
    with pytest.raises(FileNotFoundError):
        trust.directory_problem(str(base / "chain" / "new" / "deeper"))
    _link(base / "dangling", base / "gone")
    with pytest.raises(FileNotFoundError):
        trust.directory_problem(str(base / "dangling"))
    _link(base / "loop", base / "loop")
    problem = trust.directory_problem(str(base / "loop"))
    assert problem is not None and "cannot be examined" in problem.why
    open_top = tmp_path / "open"
    open_top.mkdir()
    os.chmod(open_top, 0o777)
    _link(base / "to-open", open_top / "missing")
    problem = trust.directory_problem(str(base / "to-open"))  # not there, but the way to it is untrusted
    assert problem is not None and problem.at == str(open_top) and "without the sticky bit" in problem.why
    assert not (open_top / "missing").exists()


@pytest.mark.parametrize("how", ["group-writable", "other-owner", "symlink"])
def test_an_entry_that_is_not_the_users_is_ignored_not_deleted(tmp_path: Path, how: str) -> None:
    d = tmp_path / "c"
    comp, key = _entry_and_comp(d)
    path = d / f"{key}.xlaexe"
    if how == "group-writable":
        os.chmod(path, 0o660)
    elif how == "other-owner":
        if os.geteuid() != 0:
            pytest.skip("changing a file's owner needs root")
        os.chown(path, 4242, 4242)
    else:
        real = tmp_path / "elsewhere.xlaexe"
        os.replace(path, real)
        path.symlink_to(real)
    before = os.lstat(path)
    hits, misses, said = _compiles(comp, d)
    assert (hits, misses) == (0, 2) and len(said) == 1 and "is ignored" in said[0], said
    after = os.lstat(path)  # not the cache's to delete, nor to replace
    assert (after.st_ino, after.st_mode, after.st_uid) == (before.st_ino, before.st_mode, before.st_uid)


def test_a_key_file_others_can_read_turns_the_cache_off(tmp_path: Path) -> None:
    d = tmp_path / "c"
    comp, _ = _entry_and_comp(d)
    os.chmod(d / trust.KEY_NAME, 0o644)
    os.rename(d, tmp_path / "c2")
    hits, misses, said = _compiles(comp, tmp_path / "c2")
    assert (hits, misses) == (0, 2) and len(said) == 1 and "not a private key file" in said[0]


def test_loads_are_off_with_the_compile_cache(cache_dir: Path) -> None:
    cache_dir.mkdir(mode=0o777)
    os.chmod(cache_dir, 0o777)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            np.testing.assert_array_equal(_run(PLUS), X + 1)
            load_cache.clear()
    said = [str(w.message) for w in caught if "xlasdk cache" in str(w.message)]
    assert len(said) == 1 and str(cache_dir) in said[0]
    assert os.listdir(cache_dir) == []


# -- finding 5 (the cache's part): a huge entry ---------------------------------------------------------
def test_a_sparse_6_gib_entry_is_a_miss_and_is_not_read(tmp_path: Path) -> None:
    d = tmp_path / "c"
    comp, key = _entry_and_comp(d)
    path = d / f"{key}.xlaexe"
    with open(path, "r+b") as f:
        f.truncate(6 << 30)  # sparse: no disk used
    t = time.monotonic()
    hits, misses, said = _compiles(comp, d)
    assert misses >= 1 and said == []
    assert time.monotonic() - t < 60  # a whole read of 6 GiB is far slower (and a MemoryError on small machines)
    c = CompileCache(d)
    big = d / ("ee" * 32 + ".xlaexe")
    with open(big, "wb") as f:
        f.truncate(6 << 30)
    assert c.get("ee" * 32) is None and big.exists()


# -- finding 3: cleaning deletes only what the cache wrote ------------------------------------------------
def test_cache_clear_leaves_the_users_files(tmp_path: Path) -> None:
    d = tmp_path / "c"
    comp, key = _entry_and_comp(d)
    exe = xs.compile(comp, cache=False)
    model = d / "model.xlaexe"
    exe.save(model)
    outside = tmp_path / "mine.xlaexe"
    exe.save(outside)
    saved = model.read_bytes()
    (d / "link.xlaexe").symlink_to(model)
    (d / ("ab" * 32 + ".xlaexe")).symlink_to(outside)  # a link with an entry's name
    real_entry = tmp_path / "entry-copy"
    real_entry.write_bytes((d / f"{key}.xlaexe").read_bytes())
    (d / ("cd" * 32 + ".xlaexe")).symlink_to(real_entry)  # a link to a real entry's bytes
    (d / ("ef" * 32 + ".xlaexe")).write_bytes(saved)  # an entry's name, not the cache's bytes
    foreign_tmp = d / ".tmp-editor-swap"
    foreign_tmp.write_bytes(cache_mod._MAGIC + b"not the cache's name")
    old = time.time() - 7200
    os.utime(foreign_tmp, (old, old))
    ours_tmp = d / ".tmp-xlasdk-abcdefgh"
    ours_tmp.write_bytes(cache_mod._MAGIC + b"a writer that died")
    os.utime(ours_tmp, (old, old))
    os.chmod(ours_tmp, 0o600)
    env = {**os.environ, "PYTHONPATH": REPO}
    env.pop("XLASDK_CACHE_DIR", None)
    r = subprocess.run([sys.executable, "-m", "xlasdk.cli", "cache", "clear", "--dir", str(d)], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"removed 1 entry from {d}"), r.stdout
    left = sorted(os.listdir(d))
    assert left == sorted([".tmp-editor-swap", ".xlasdk-cache-key", "CACHEDIR.TAG", "ab" * 32 + ".xlaexe",
                           "cd" * 32 + ".xlaexe", "ef" * 32 + ".xlaexe", "link.xlaexe", "model.xlaexe"])
    assert model.read_bytes() == saved and outside.read_bytes() == saved and real_entry.exists()
    np.testing.assert_array_equal(np.asarray(xs.load_executable(model)(X).to_numpy()), X + 1)
    # eviction, too: a limit of 0 bytes evicts every entry and nothing else
    c = CompileCache(d, max_bytes=1 << 20)
    c.put("12" * 32, b"payload")
    assert c.evict(0) == 1 and sorted(os.listdir(d)) == left


def test_clear_deletes_nothing_in_a_directory_the_cache_did_not_make(tmp_path: Path) -> None:
    d = tmp_path / "c"
    c = CompileCache(d)
    c.put("12" * 32, b"payload")
    os.unlink(d / trust.TAG_NAME)
    assert c.clear() == 0 and (d / ("12" * 32 + ".xlaexe")).exists()
    assert c.get("12" * 32) == b"payload"  # still read: the tag marks what may be cleaned, not what is read


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": REPO}
    env.pop("XLASDK_CACHE_DIR", None)
    return subprocess.run([sys.executable, "-m", "xlasdk.cli", "cache", *argv], capture_output=True, text=True,
                          env=env, timeout=300)


def test_the_cli_says_once_why_a_cache_is_off_and_touches_nothing(tmp_path: Path) -> None:
    d = tmp_path / "c"
    c = CompileCache(d)
    c.put("12" * 32, b"payload")
    os.chmod(d, 0o777)
    before = sorted(os.listdir(d))
    for verb in (["info", "--list"], ["clear"]):
        r = _cli(*verb, "--dir", str(d))
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"xlasdk cache: warning: xlasdk cache {d} is off"), lines
        assert "chmod go-w" in lines[0]
    assert "entries:   0" in _cli("info", "--dir", str(d)).stdout
    assert sorted(os.listdir(d)) == before


def test_the_cli_leaves_a_directory_without_the_tag_and_says_so(tmp_path: Path) -> None:
    d = tmp_path / "c"
    CompileCache(d).put("12" * 32, b"payload")
    os.unlink(d / trust.TAG_NAME)
    r = _cli("clear", "--dir", str(d))
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.splitlines()[0].startswith(f"removed 0 entries from {d}")
    assert f"left alone: {d} (no CACHEDIR.TAG" in r.stdout
    assert (d / ("12" * 32 + ".xlaexe")).exists()


def test_the_cli_says_a_cache_is_off_in_one_plain_line(tmp_path: Path) -> None:
    """`xlasdk run` with an untrusted cache: one `xlasdk run: warning:` line (a new user saw Python's
    warning form, naming xlasdk's own file and source line), and the run goes on."""
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(0o777)
    hlo = tmp_path / "plus.hlo"
    hlo.write_text(PLUS)
    env = dict(os.environ, XLASDK_CACHE_DIR=str(d))
    r = subprocess.run([sys.executable, "-m", "xlasdk.cli", "run", str(hlo), "--random-inputs"], capture_output=True,
                       text=True, timeout=300, cwd=REPO, env=env)
    assert r.returncode == 0, r.stderr[-800:]
    lines = [ln for ln in r.stderr.splitlines() if "warning" in ln.lower()]
    assert len(lines) == 1 and lines[0].startswith(f"xlasdk run: warning: xlasdk cache {d} is off"), r.stderr
    assert "RuntimeWarning" not in r.stderr and ".py:" not in r.stderr, r.stderr
