"""Campaign of issue 31, findings 1-3 and 5: two real users share a cache directory.

A second user (``xlasdk-cache-mallory``, created with ``useradd`` when absent; CI runs as root)
plants entries where the first user's cache looks: in a directory the second user owns (mode
0777 or 0755), in the first user's own directory left at 0777, under a parent directory the
second user owns, and (put there by root, owned by the second user) inside the first user's
private 0700 directory. What is planted, a random pick per trial: the first user's compile entry
and verified-load record of ``x * 1000`` re-labelled as those of ``x + 1`` (sha256 made to hold,
HMAC copied), entries and a key file made with the second user's own key, a record nested 100,000
deep, garbage, a 6 GiB sparse file, a FIFO, symbolic links (to the first user's files, to the key
file) under entry names, ``.tmp-*`` files, a ``CACHEDIR.TAG``. In a fifth place the second user
plants no cache at all, only a symbolic link (in that user's directory, or in a shared sticky one
as ``/tmp``) to the first user's ``~/.ssh``, which the first user's ``XLASDK_CACHE_DIR`` names
(the link, or a directory below it): the cache must be off and write nothing under the home.

Then the first user, in a fresh process, loads and compiles ``x + 1`` and ``x * 1000`` through the
cache (``XLASDK_CACHE_DIR``) and runs them, and runs ``xlasdk cache clear`` and ``cache info``. The
checks: the process exits 0 with values equal to numpy's (no planted entry changes a result or
kills the process), every planted file and every file of the first user's (``model.xlaexe`` in the
directory, the files links point to) is still there and unchanged (cleaning deletes only what the
cache wrote), and a directory the cache may not use is reported in one warning line.

Skipped unless running as root with ``useradd`` available. The quick profile runs one trial of
each of the five places; the long one (``pytest -m campaign``) ``XLASDK_CACHE_USERS_LONG`` trials
(default 100).
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import random
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import path_states

LONG = int(os.environ.get("XLASDK_CACHE_USERS_LONG", "100"))
REPO = str(Path(__file__).resolve().parents[2])
USER = "xlasdk-cache-mallory"
PLACES = ("theirs", "mine-0777", "under-theirs", "mine-private", "linked-by-theirs")
_MAGIC = b"XLASDK-CACHE-ENTRY\n"
_FIXED = len(_MAGIC) + 16 + 64  # magic, version + lengths, sha256, HMAC (xlasdk._cache)

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

# The first user's process: loads and compiles both modules through $XLASDK_CACHE_DIR, twice
# (the second time from a cold memory), checks the values, reports the cache's warnings.
_VICTIM = r"""
import json, sys, warnings
import numpy as np
import xlasdk as xs
from xlasdk.program import load_cache
texts = json.loads(sys.argv[1])
x = np.array([1.5, -2.0, 0.25, 8.0], np.float32)
want = {"plus": x + 1, "times": x * 1000}
ok = True
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(2):
        load_cache.clear()
        for name in ("plus", "times"):
            comp = xs.XlaComputation.from_hlo_text(texts[name])
            got = xs.compile(comp)(x).to_numpy()
            ok = ok and bool(np.array_equal(got, want[name]))
said = [str(w.message) for w in caught if "xlasdk cache" in str(w.message)]
print(json.dumps({"ok": ok, "warnings": said}))
"""

# Run once in a private cache: the keys and bytes the second user is assumed to know (all but the key).
_STAGE = r"""
import json, sys
import numpy as np
import xlasdk as xs
from xlasdk.program import load_cache
texts = json.loads(sys.argv[1])
out = {}
c = xs.CompileCache()
for name in ("plus", "times"):
    before = {e.key for e in c.entries()}
    xs.compile(xs.XlaComputation.from_hlo_text(texts[name]))(np.zeros(4, np.float32))
    (k,) = {e.key for e in c.entries()} - before
    out[name] = {"compile": k, "load": load_cache.key("load_hlo_in_worker", "text", texts[name])}
print(json.dumps(out))
"""


def _second_user() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        pytest.skip("the two-user cache campaign runs as root (it creates a second user)")
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        pass
    useradd = shutil.which("useradd") or ("/usr/sbin/useradd" if os.path.exists("/usr/sbin/useradd") else None)
    if useradd is None:
        pytest.skip("useradd is not available to create a second user")
    r = subprocess.run([useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        pytest.skip(f"useradd {USER} failed: {r.stderr.strip()}")
    return pwd.getpwnam(USER)


def _env(cache: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XLASDK_CACHE_DIR", "XLASDK_LOAD_CACHE")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)
    if cache is not None:
        env["XLASDK_CACHE_DIR"] = str(cache)
    return env


def _py(script: str, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=_env(cache),
                          timeout=600)


def _relabel(raw: bytes, key: str) -> bytes:
    """An entry rewritten to name ``key``, its sha256 made to hold, its HMAC copied."""
    version, hlen, _ = struct.unpack_from("<IIQ", raw, len(_MAGIC))
    header = json.loads(raw[_FIXED:_FIXED + hlen])
    header["key"] = key
    h = json.dumps(header, separators=(",", ":")).encode()
    payload = raw[_FIXED + hlen:]
    digest = hashlib.sha256(h + payload).digest()
    return _MAGIC + struct.pack("<IIQ", version, len(h), len(payload)) + digest + raw[_FIXED - 32:_FIXED] + h + payload


def _as_user(pw: pwd.struct_passwd, script: str) -> None:
    r = subprocess.run(["/bin/sh", "-ec", script], user=pw.pw_uid, group=pw.pw_gid, extra_groups=[],
                       capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, f"the second user's planting failed: {r.stderr}"


def _theirs(d: Path, pw: pwd.struct_passwd, mode: int) -> None:
    """A directory of the second user's (made by root in a directory that user cannot write)."""
    d.mkdir()
    os.chown(d, pw.pw_uid, pw.pw_gid)
    os.chmod(d, mode)


def _snapshot(paths: list[Path]) -> dict[str, Any]:
    out = {}
    for p in paths:
        st = os.lstat(p)
        content = hashlib.sha256(p.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) and st.st_size < 1 << 24 \
            else None
        out[str(p)] = (st.st_ino, stat.S_IFMT(st.st_mode), st.st_uid, st.st_size, content)
    return out


def _trial(i: int, place: str, rng: random.Random, base: Path, pw: pwd.struct_passwd, keys: dict[str, Any],
           staged: dict[str, bytes]) -> list[str]:
    t = base / f"t{i}"
    t.mkdir(mode=0o711)
    os.chmod(t, 0o711)
    if place == "linked-by-theirs":
        return _linked_trial(i, rng, t, pw)
    mine = t / "mine"  # the first user's own files, outside the cache
    mine.mkdir(mode=0o755)
    secret = mine / "secret.xlaexe"
    secret.write_bytes(b"the first user's file " * 10)
    pub = t / "pub"  # what the second user copies from (0644)
    pub.mkdir(mode=0o755)
    for name, data in staged.items():
        (pub / name).write_bytes(data)
        os.chmod(pub / name, 0o644)
    if place == "theirs":
        cache = t / "shared"
        _theirs(cache, pw, rng.choice((0o777, 0o755)))
        _as_user(pw, f"mkdir -m 0777 {cache}/loads")
    elif place == "mine-0777":
        cache = t / "shared"
        cache.mkdir()
        (cache / "loads").mkdir()
        os.chmod(cache, 0o777)
        os.chmod(cache / "loads", 0o777)
    elif place == "under-theirs":
        _theirs(t / "theirs", pw, 0o755)  # the second user could swap what is in it
        cache = t / "theirs" / "cache"
        cache.mkdir(mode=0o777)
        (cache / "loads").mkdir(mode=0o777)
        os.chmod(cache, 0o777)
        os.chmod(cache / "loads", 0o777)
    else:
        cache = t / "private"
        cache.mkdir(mode=0o777)
        (cache / "loads").mkdir()
        os.chmod(cache, 0o777)
        os.chmod(cache / "loads", 0o777)
    model = cache / "model.xlaexe"
    model.write_bytes(staged["model.xlaexe"])  # the first user's own file in the directory
    plus_c, plus_l = keys["plus"]["compile"], keys["plus"]["load"]
    times_c, times_l = keys["times"]["compile"], keys["times"]["load"]
    plants = [
        f"cp {pub}/forged-compile {cache}/{plus_c}.xlaexe",
        f"cp {pub}/forged-load {cache}/loads/{plus_l}.xlaexe",
        f"cp {pub}/theirs-key {cache}/.xlasdk-cache-key && chmod 600 {cache}/.xlasdk-cache-key",
        f"cp {pub}/theirs-entry {cache}/{times_c}.xlaexe",
        f"cp {pub}/deep {cache}/loads/{times_l}.xlaexe",
        f"head -c 4096 /dev/urandom > {cache}/{'ab' * 32}.xlaexe",
        f"truncate -s 6G {cache}/{'cd' * 32}.xlaexe",
        f"mkfifo {cache}/{'ef' * 32}.xlaexe",
        f"ln -s {secret} {cache}/{'12' * 32}.xlaexe",
        f"ln -s {secret} {cache}/link.xlaexe",
        f"ln -s {model} {cache}/{'34' * 32}.xlaexe",
        f"cp {pub}/forged-compile {cache}/.tmp-xlasdk-abcdefgh && touch -d '2 hours ago' {cache}/.tmp-xlasdk-abcdefgh",
        f"echo junk > {cache}/.tmp-editor && touch -d '2 hours ago' {cache}/.tmp-editor",
        f"cp {pub}/tag {cache}/CACHEDIR.TAG",
    ]
    chosen = [p for p in plants if rng.random() < 0.7] or plants[:2]
    _as_user(pw, "\n".join(chosen))
    if place in ("mine-private", "under-theirs"):  # planted while open (or by swapping it), then closed
        os.chmod(cache, 0o700)
        os.chmod(cache / "loads", 0o700)
    planted = sorted(p for p in [*cache.iterdir(), *(cache / "loads").iterdir()] if os.lstat(p).st_uid == pw.pw_uid)
    keep = _snapshot([*planted, model, secret])
    problems: list[str] = []
    what = f"trial {i} ({place}; {len(chosen)} plants: {[c.split()[0] + ' ' + c.split()[-1][-20:] for c in chosen]})"
    got = _victim(cache, what, problems)
    if got is not None:
        # off: a directory the second user can write or swap, or a key file that is not the first user's
        off = place != "mine-private" or any("theirs-key" in c for c in chosen)
        dir_warnings = [w for w in got["warnings"] if "is off in this process" in w]
        if off and len(dir_warnings) != 1:
            problems.append(f"{what}: {len(dir_warnings)} warnings that the directory is off: {got['warnings']}")
        if not off and dir_warnings:
            problems.append(f"{what}: the private directory was turned off: {dir_warnings}")
    for verb in (["clear"], ["info", "--list"]):
        c = subprocess.run([sys.executable, "-m", "xlasdk.cli", "cache", *verb, "--dir", str(cache)],
                           capture_output=True, text=True, env=_env(None), timeout=300)
        if c.returncode != 0 or "Traceback" in c.stderr:
            problems.append(f"{what}: cache {verb[0]} exited {c.returncode}: {c.stderr[-1500:]}")
    lost = [p for p in keep if not os.path.lexists(p)]
    if lost:
        problems.append(f"{what}: files the cache did not write were deleted: {lost}")
    else:
        changed = [p for p, v in _snapshot([Path(p) for p in keep]).items() if v != keep[p]]
        if changed:
            problems.append(f"{what}: files the cache did not write were changed: {changed}")
    return problems


def _victim(cache: Path, what: str, problems: list[str]) -> dict[str, Any] | None:
    """The first user's process on ``cache``: its report, or None (the problem noted) when it failed;
    wrong values are noted too."""
    r = _py(_VICTIM, cache, json.dumps({"plus": PLUS, "times": TIMES}))
    if r.returncode != 0:
        problems.append(f"{what}: the first user's process exited {r.returncode}: {r.stderr[-2000:]}")
        return None
    got: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    if not got["ok"]:
        problems.append(f"{what}: wrong values")
    return got


def _linked_trial(i: int, rng: random.Random, t: Path, pw: pwd.struct_passwd) -> list[str]:
    """The second user's link to the first user's ``~/.ssh``, named by the first user's
    ``XLASDK_CACHE_DIR``: off with one warning, nothing written under the home (no CACHEDIR.TAG,
    key, entry, ``loads/`` or directory below the link), by the compiles nor by ``cache clear``/``info``."""
    home = t / "home"  # the first user's, private
    home.mkdir(mode=0o700)
    (home / ".ssh").mkdir(mode=0o700)
    (home / ".ssh" / "authorized_keys").write_text("ssh-ed25519 AAAA the-first-user\n")
    if rng.random() < 0.5:
        holder = t / "theirs"
        _theirs(holder, pw, 0o755)
    else:
        holder = t / "tmp"  # a shared sticky directory, as /tmp
        holder.mkdir()
        os.chmod(holder, 0o1777)
    _as_user(pw, f"ln -s {home}/.ssh {holder}/xlasdk-cache")
    cache = holder / "xlasdk-cache"
    if rng.random() < 0.5:
        cache = cache / "xlasdk"
    before = path_states(home)
    what = f"trial {i} (linked-by-theirs: {cache} -> {home}/.ssh)"
    problems: list[str] = []
    got = _victim(cache, what, problems)
    if got is not None:
        dir_warnings = [w for w in got["warnings"] if "is off in this process" in w]
        if len(dir_warnings) != 1:
            problems.append(f"{what}: {len(dir_warnings)} warnings that the directory is off: {got['warnings']}")
    for verb in (["clear"], ["info", "--list"]):
        c = subprocess.run([sys.executable, "-m", "xlasdk.cli", "cache", *verb, "--dir", str(cache)],
                           capture_output=True, text=True, env=_env(None), timeout=300)
        if c.returncode != 0 or "Traceback" in c.stderr:
            problems.append(f"{what}: cache {verb[0]} exited {c.returncode}: {c.stderr[-1500:]}")
    after = path_states(home)
    if after != before:
        problems.append(f"{what}: written under the first user's home: "
                        f"{sorted(set(after) ^ set(before)) or [p for p in after if after[p] != before.get(p)]}")
    return problems


def _stage(base: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    private = base / "stage"
    r = _py(_STAGE, private, json.dumps({"plus": PLUS, "times": TIMES}))
    assert r.returncode == 0, r.stderr[-3000:]
    keys = json.loads(r.stdout.strip().splitlines()[-1])
    other = base / "stage-other"  # a cache of another key: what the second user's own xlasdk would write
    r = _py(_STAGE, other, json.dumps({"plus": PLUS, "times": TIMES}))
    assert r.returncode == 0, r.stderr[-3000:]
    entry = (private / f"{keys['times']['compile']}.xlaexe").read_bytes()
    record = (private / "loads" / f"{keys['times']['load']}.xlaexe").read_bytes()
    staged = {
        "forged-compile": _relabel(entry, keys["plus"]["compile"]),
        "forged-load": _relabel(record, keys["plus"]["load"]),
        "theirs-key": (other / ".xlasdk-cache-key").read_bytes(),
        "theirs-entry": (other / f"{keys['times']['compile']}.xlaexe").read_bytes(),
        "tag": (private / "CACHEDIR.TAG").read_bytes(),
        "model.xlaexe": entry,
    }
    # a record nested 100,000 deep in a well-formed entry (the second user's HMAC cannot hold)
    deep_payload = b"\x01" + b"t\x01\x00\x00\x00" * 100_000 + b"N"
    header = json.dumps({"key": keys["times"]["load"], "name": "", "created": time.time()},
                        separators=(",", ":")).encode()
    digest = hashlib.sha256(header + deep_payload).digest()
    staged["deep"] = (_MAGIC + struct.pack("<IIQ", 2, len(header), len(deep_payload)) + digest
                      + os.urandom(32) + header + deep_payload)
    return keys, staged


def _campaign(places: list[str], seed: int) -> None:
    pw = _second_user()
    base = Path(tempfile.mkdtemp(prefix="xlasdk-cache-users-", dir="/tmp"))
    os.chmod(base, 0o711)  # the second user may pass through, not list or write
    rng = random.Random(seed)
    try:
        keys, staged = _stage(base)
        problems: list[str] = []
        t0 = time.monotonic()
        for i, place in enumerate(places):
            problems += _trial(i, place, rng, base, pw, keys, staged)
        print(f"\ncache users: {len(places)} trials ({', '.join(f'{p} {places.count(p)}' for p in PLACES)}), "
              f"{len(problems)} problems ({time.monotonic() - t0:.0f} s)")
        assert not problems, "\n\n".join(problems[:10])
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_cache_users_quick() -> None:
    _campaign(list(PLACES), seed=31)


@pytest.mark.campaign
def test_cache_users_long() -> None:
    rng = random.Random(3100)
    _campaign([rng.choice(PLACES) for _ in range(LONG)], seed=3101)
