"""Campaign of issue 17, finding 6: random damage to executable headers and compile-cache entries
gives xlasdk errors (or skipped entries) and right answers, never a raw exception, a death or a hang.

Executables: the JSON header of a saved executable (``Executable.serialize()``) gets a random
mutation (a field set to a huge or non-finite number, a deep nesting, a long or odd string, a wrong
type; a field removed or added; a shape with odd dims, element types or tuple depth), then a
random framing (lengths and crc32 made consistent again, so only the content is wrong; or a wrong
crc32, header length, body length or version; or cut / extended; or XLA's blob itself damaged under
a crc32 made to hold: native code from a hostile file, which may kill the process as the README's
security notes say, so those deaths are counted and reported, not failed). The bytes go through
``xs.deserialize_executable`` or ``xs.load_executable``. What loads is run on arguments of the
shapes it claims: the right values (2x + 1) where it claims the original shapes, else a result
or an xlasdk error.

Cache entries: a directory of three valid entries gets random damage: entries renamed to junk
names (not hex, wrong length, with dots, spaces, control characters, 255 bytes), their header
rewritten (mutations as above, the sha256 made to hold or not), their bytes cut or flipped,
replaced by a FIFO, a directory, an empty file or a link to nowhere or to itself; junk
``.xlaexe`` files added. Then ``CompileCache.entries()``, ``info()``, ``get()``, ``evict()`` and
``xs.compile(..., cache=...)`` of the three programs (each must give its own values), and in some
trials ``xlasdk cache info --list``: exit 0, one line per entry, nothing fatal.

Everything runs in a harness child (tests/campaigns/harness.py): a death or a hang is recorded
with a reproducer. The quick profile: 60 executables and 8 cache directories (2 through the CLI);
the long one (``pytest -m campaign``): ``XLASDK_HEADERS_LONG`` executables (default 2,000) and a
tenth as many cache directories.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import subprocess
import sys
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import harness
import pytest

LONG = int(os.environ.get("XLASDK_HEADERS_LONG", "2000"))
REPO = Path(__file__).resolve().parents[2]
_EXE_MAGIC = b"XLASDK-EXECUTABLE\n"
_EXE_PREFIX = struct.Struct("<IIQI")
_CACHE_MAGIC = b"XLASDK-CACHE-ENTRY\n"
_CACHE_PREFIX = struct.Struct("<IIQ")
_CACHE_VERSION = 2  # magic, prefix, sha256, HMAC of the sha256 (issue 31), header, payload
_CACHE_FIXED = len(_CACHE_MAGIC) + _CACHE_PREFIX.size + 64

# The child's side: three programs, a valid serialized executable; load, run and judge.
_SOURCE = r'''
import os, stat
import numpy as np
import xlasdk as xs
from xlasdk import ops
from xlasdk.errors import XlaSdkError

def _program(name, scale, offset):
    b = xs.XlaBuilder(name)
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (3,)), "x")
    return b.build(ops.Add(ops.Mul(x, ops.Constant(b, np.float32(scale))), ops.Constant(b, np.float32(offset))))

PROGRAMS = {"affine": (2.0, 1.0), "twice": (2.0, 0.0), "shift": (1.0, 5.0)}
COMPS = {n: _program(n, *p) for n, p in PROGRAMS.items()}
X = np.array([1.0, -2.0, 0.5], np.float32)

def blob(_):
    return xs.compile(COMPS["affine"], cache=False).serialize()

def _guard(fn):
    try:
        return ("ok", fn())
    except XlaSdkError as e:
        return ("xlasdk", type(e).__name__, str(e)[:400])
    except Exception as e:
        return ("raw", type(e).__name__, str(e)[:400])

def _run_claimed(exe):
    ps = exe.program_shape()
    shapes = list(ps.parameter_shapes())
    if str(ps) == "(x: f32[3]) -> f32[3]":
        out = exe(X).to_numpy()
        return ("same", bool(np.array_equal(out, X * 2 + 1)))
    args = []
    for s in shapes:
        if s.is_tuple() or s.is_token():
            return ("skipped", str(ps)[:200])
        dims = tuple(s.dimensions())
        if any(d < 0 for d in dims) or int(np.prod(dims, dtype=np.float64)) > 10**6:
            return ("skipped", str(ps)[:200])
        args.append(np.zeros(dims, s.numpy_dtype()))
    r = _guard(lambda: exe(*args))
    return ("claimed", r[0], str(ps)[:200])

def load_exe(arg):
    how, data, path = arg
    if how == "bytes":
        r = _guard(lambda: xs.deserialize_executable(data))
    else:
        with open(path, "wb") as f:
            f.write(data)
        r = _guard(lambda: xs.load_executable(path))
    if r[0] != "ok":
        return r
    ran = _guard(lambda: _run_claimed(r[1]))
    return ("loaded", ran)

def cache_ops(arg):
    d, probe_keys = arg
    c = xs.CompileCache(d)
    out = {}
    ents = _guard(lambda: [(e.key, e.name, e.size) for e in c.entries()])
    out["entries"] = ents
    out["info"] = _guard(lambda: c.info().entries)
    out["get"] = [_guard(lambda k=k: None if c.get(k) is None else "bytes") for k in probe_keys]
    values = {}
    for name, (scale, offset) in PROGRAMS.items():
        def one(name=name, scale=scale, offset=offset):
            got = xs.compile(COMPS[name], cache=c)(X).to_numpy()
            return bool(np.array_equal(got, X * scale + offset))
        values[name] = _guard(one)
    out["values"] = values
    out["hits"] = c.hits
    out["evict"] = _guard(lambda: c.evict())
    return out
'''

_KEYS = ("name", "jaxlib", "xla_client_version", "platform", "num_replicas", "num_partitions", "device_ids",
         "parameter_names", "parameters", "result")


def _deep(rng: random.Random) -> str:
    depth = rng.choice((50, 200, 999, 1000, 3000, 100000))
    if rng.random() < 0.5:
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


def _value(rng: random.Random) -> str:
    """A JSON value's text, picked to break a parser or a conversion."""
    return rng.choice((
        lambda: "1e400", lambda: "-1e400", lambda: "NaN", lambda: "Infinity", lambda: "-Infinity",
        lambda: "-1", lambda: "0", lambda: "1", lambda: "3.5", lambda: str(2**64 + 1), lambda: str(2**31),
        lambda: "1" + "0" * rng.choice((400, 5000)), lambda: '"x"', lambda: '""', lambda: "null",
        lambda: "true", lambda: "[]", lambda: "{}", lambda: _deep(rng), lambda: '"' + "A" * 200000 + '"',
        lambda: '"\\u0000\\n\\u001b[2J\\ud800"', lambda: "[1e400]", lambda: "[-5]", lambda: "[2147483648]",
        lambda: '[{"etype": 11, "dims": [3]}]', lambda: '{"etype": 11, "dims": [3]}',
        lambda: '{"token": true}', lambda: '{"tuple": []}',
    ))()


def _shape_value(rng: random.Random) -> str:
    """A shape's JSON, odd in one way."""
    kind = rng.randrange(6)
    if kind == 0:
        return json.dumps({"etype": rng.choice((-1, 0, 11, 13, 99, 2**40)), "dims": [3]})
    if kind == 1:
        return '{"etype": 11, "dims": [' + rng.choice(("-1", "1e400", "NaN", str(2**63), "3, 3", "0", str(10**12))) \
            + "]}"
    if kind == 2:
        depth = rng.choice((2, 63, 64, 65, 250, 5000))
        return '{"tuple": [' * depth + '{"etype": 11, "dims": [3]}' + "]}" * depth
    if kind == 3:
        return '{"tuple": [' + ", ".join(['{"etype": 11, "dims": []}'] * rng.choice((2, 1000, 100000))) + "]}"
    if kind == 4:
        return '{"etype": 11, "dims": ' + _deep(rng) + "}"
    return '{"etype": 11}'


def _mutate_header(header: dict[str, Any], rng: random.Random) -> tuple[bytes, str]:
    """The header's new JSON bytes and a label of the mutation."""
    h = dict(header)
    kind = rng.randrange(9)
    if kind == 0:
        key = rng.choice(tuple(h))
        h[key] = "\0PLACEHOLDER\0"
        v = _value(rng)
        label = f"{key}={v[:20]}"
    elif kind == 1:
        key = rng.choice(("parameters", "result"))
        v = _shape_value(rng)
        h[key] = ["\0PLACEHOLDER\0"] if key == "parameters" else "\0PLACEHOLDER\0"
        label = f"{key} shape {v[:30]}"
    elif kind == 2:
        key = rng.choice(tuple(h))
        del h[key]
        return json.dumps(h).encode(), f"no {key}"
    elif kind == 3:
        h[rng.choice(("junk", "x" * 300, ""))] = rng.choice((1, None, [1, 2], "y" * 1000))
        return json.dumps(h).encode(), "extra key"
    elif kind == 4:
        return _value(rng).encode(), "not an object"
    elif kind == 5:
        text = json.dumps(h).encode()
        return text[: rng.randrange(len(text))], "cut"
    elif kind == 6:
        text = bytearray(json.dumps(h).encode())
        for _ in range(rng.randint(1, 4)):
            text[rng.randrange(len(text))] = rng.randrange(256)
        return bytes(text), "bytes flipped"
    elif kind == 7:
        h["parameter_names"] = [] if rng.random() < 0.5 else ["x", "y", "z"]
        return json.dumps(h).encode(), "parameter names of another count"
    else:
        h["device_ids"] = rng.choice(([], [0, 0], [1], [7, 8, 9, 10], [-1], list(range(5000))))
        h["num_replicas"] = rng.choice((1, 2, 4, 0))
        return json.dumps(h).encode(), "devices"
    text = json.dumps(h).replace('"\\u0000PLACEHOLDER\\u0000"', v)
    return text.encode(), label


def _split_exe(blob: bytes) -> tuple[dict[str, Any], bytes]:
    fixed = len(_EXE_MAGIC) + _EXE_PREFIX.size
    _, hlen, _, _ = _EXE_PREFIX.unpack_from(blob, len(_EXE_MAGIC))
    return json.loads(blob[fixed:fixed + hlen]), blob[fixed + hlen:]


def _frame_exe(header: bytes, body: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Header and body framed as an executable: consistent (most often) or wrong in one way."""
    version, hlen, blen, crc = 1, len(header), len(body), zlib.crc32(body, zlib.crc32(header))
    kind = rng.choices(("consistent", "crc", "hlen", "blen", "version", "cut", "extended", "body"),
                       (60, 6, 6, 6, 4, 6, 4, 8))[0]
    if kind == "crc":
        crc ^= 1 << rng.randrange(32)
    elif kind == "hlen":
        hlen = rng.choice((0, hlen - 1, hlen + 1, 2**32 - 1, 1 << 25))
    elif kind == "blen":
        blen = rng.choice((0, blen - 1, 2**64 - 1))
    elif kind == "version":
        version = rng.choice((0, 2, 2**32 - 1))
    elif kind == "body":  # XLA's blob itself damaged, the crc32 made to hold
        b = bytearray(body)
        for _ in range(rng.randint(1, 3)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        body = bytes(b)
        crc = zlib.crc32(body, zlib.crc32(header))
    data = _EXE_MAGIC + _EXE_PREFIX.pack(version, hlen, blen, crc) + header + body
    if kind == "cut":
        data = data[: rng.randrange(len(data))]
    elif kind == "extended":
        data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    return data, kind


def _exe_campaign(n: int, tmp: Path, seed: int) -> None:
    rng = random.Random(seed)
    with harness.Worker(timeout=120) as w:
        first = w.run(harness.Task(_SOURCE, None, entry="blob", key="blob"))
        assert first.status == "ok", first.describe()
        blob: bytes = first.value
        header, body = _split_exe(blob)
        # the unmutated executable loads and runs right: the campaign's measure is sound
        ok = w.run(harness.Task(_SOURCE, ("bytes", blob, ""), entry="load_exe", key="pristine"))
        assert ok.status == "ok" and ok.value == ("loaded", ("ok", ("same", True))), ok.describe()
        tasks = []
        for i in range(n):
            hbytes, label = _mutate_header(header, rng) if rng.random() < 0.9 else (json.dumps(header).encode(), "-")
            data, framing = _frame_exe(hbytes, body, rng)
            how = rng.choice(("bytes", "file"))
            tasks.append(harness.Task(_SOURCE, (how, data, str(tmp / f"e{i}.xlaexe")), entry="load_exe",
                                      key=f"exe{i}: {label} / {framing} / {how}"))
        t0 = time.monotonic()
        report = harness.Report()
        for t in tasks:
            report.outcomes.append(w.run(t))
        report.seconds = time.monotonic() - t0
    # A damaged XLA blob under a crc32 made to hold is native code from a hostile file: loading it may
    # abort or crash (README, "Security notes": load executables only from sources you trust). Its
    # deaths are counted, not failed; any other death fails.
    native = [o for o in report.outcomes if o.failed and " / body / " in str(o.task.key)]
    native_ids = {id(o) for o in native}
    bad = [o for o in report.outcomes if o.status != "ok" and id(o) not in native_ids]
    assert not bad, report.summary() + "\n" + "\n\n".join(o.describe() for o in bad[:10])
    report.outcomes = [o for o in report.outcomes if id(o) not in native_ids]
    results = [o.value for o in report.outcomes]

    def label(v: Any) -> str:
        """``xlasdk``, ``raw``, or ``loaded, then <how its run went>``."""
        if v[0] != "loaded":
            return str(v[0])
        ran = v[1]
        if ran[0] != "ok":  # the run itself raised outside _run_claimed's guard
            return f"loaded, then {ran[0]}"
        if ran[1][0] == "claimed":  # ("claimed", what calling it on the claimed shapes gave, the shape)
            return f"loaded, then called on its claimed shapes: {ran[1][1]}"
        return f"loaded, then {ran[1][0]}" + ("" if ran[1][0] != "same" else f" shapes, right values: {ran[1][1]}")

    labels = [label(v) for v in results]
    pairs = list(zip(report.outcomes, labels, strict=True))
    raw = [(o.task.key, o.value) for o, lb in pairs if lb.endswith("raw")]
    wrong = [(o.task.key, o.value) for o, lb in pairs if lb.endswith("right values: False")]
    outcomes = Counter(labels)
    errors = Counter(v[1] for v in results if v[0] == "xlasdk")
    print(f"executables: {report.summary()} (besides {len(native)} deaths on a damaged XLA blob under a forged "
          f"crc32: {Counter(o.signal_name for o in native)}); outcomes {dict(outcomes)}; xlasdk errors {dict(errors)}; "
          f"raw {len(raw)}, wrong values {len(wrong)}")
    assert not raw, "\n".join(f"{k}: {v}" for k, v in raw[:20])
    assert not wrong, "\n".join(f"{k}: {v}" for k, v in wrong[:20])
    # a campaign where nothing was refused, or nothing loaded, tested nothing
    assert outcomes["xlasdk"] >= n // 4 and sum(v[0] == "loaded" for v in results) >= 1, dict(outcomes)


# -- cache directories ---------------------------------------------------------------------------------
_JUNK_NAMES = ("zz" * 32, "AB" * 32, "ab" * 31, "ab" * 33, "not a key", "a.b.c", "..", "x\ny", "\x1b[2J" + "a" * 60,
               "é" * 32, "a" * 248, "")


def _damage(d: Path, rng: random.Random) -> list[str]:
    """Random damage to the entries of cache directory ``d``; returns what was done."""
    entries = sorted(p for p in d.iterdir() if p.name.endswith(".xlaexe"))  # each damaged once at most
    done = []
    for _ in range(rng.randint(1, 4)):
        if not entries:
            break
        kind = rng.randrange(8)
        p = entries.pop(rng.randrange(len(entries)))
        raw = p.read_bytes()
        if kind == 0:  # renamed to a junk name
            new = d / (rng.choice(_JUNK_NAMES) + ".xlaexe")
            if not new.exists():
                p.rename(new)
                done.append(f"renamed to {new.name[:20]!r}")
        elif kind in (1, 2):  # header rewritten, sha256 made to hold (kind 1) or not
            fixed = _CACHE_FIXED
            _, hlen, plen = _CACHE_PREFIX.unpack_from(raw, len(_CACHE_MAGIC))
            header = json.loads(raw[fixed:fixed + hlen])
            payload = raw[fixed + hlen:]
            if rng.random() < 0.5:
                new_h, label = _mutate_header(header, rng)
            else:
                header["name"] = rng.choice(_JUNK_NAMES + ("\0\0", "a" * 100000))
                new_h, label = json.dumps(header).encode(), "name"
            if rng.random() < 0.3:  # the payload: a damaged executable
                exe_h, exe_b = _split_exe(payload)
                payload = _frame_exe(_mutate_header(exe_h, rng)[0], exe_b, rng)[0]
                label += " + payload"
            import hashlib

            # the sha256 made to hold cannot make the HMAC hold (no key): every rewrite is a miss
            digest = hashlib.sha256(new_h + payload).digest() if kind == 1 else raw[fixed - 64:fixed - 32]
            p.write_bytes(_CACHE_MAGIC + _CACHE_PREFIX.pack(_CACHE_VERSION, len(new_h), len(payload)) + digest
                          + raw[fixed - 32:fixed] + new_h + payload)
            done.append(f"header {label[:30]} ({'sha256 holds' if kind == 1 else 'old sha256'})")
        elif kind == 3:
            p.write_bytes(raw[: rng.randrange(len(raw))])
            done.append("cut")
        elif kind == 4:
            b = bytearray(raw)
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
            p.write_bytes(bytes(b))
            done.append("bit flipped")
        elif kind == 5:
            p.unlink()
            what = rng.randrange(5)
            if what == 0:
                os.mkfifo(p)
            elif what == 1:
                p.mkdir()
            elif what == 2:
                p.write_bytes(b"")
            elif what == 3:
                p.symlink_to(d / "nowhere")
            else:
                p.symlink_to(p)
            done.append(("FIFO", "directory", "empty", "dangling link", "self link")[what])
        elif kind == 6:
            hlen = rng.choice((2**32 - 1, 0, 1 << 20))
            lengths = _CACHE_PREFIX.pack(_CACHE_VERSION, hlen, 2**64 - 1)
            p.write_bytes(raw[: len(_CACHE_MAGIC)] + lengths + raw[len(_CACHE_MAGIC) + _CACHE_PREFIX.size:])
            done.append(f"lengths {hlen}")
        else:  # a junk file with an entry's suffix
            name = rng.choice(_JUNK_NAMES) + ".xlaexe"
            if not (d / name).exists():
                (d / name).write_bytes(rng.choice((b"", b"junk", _CACHE_MAGIC + b"\xff" * 60,
                                                   _CACHE_MAGIC + _CACHE_PREFIX.pack(_CACHE_VERSION, 9, 0) + b"\0" * 64
                                                   + b"[" * 9)))
                done.append(f"junk file {name[:20]!r}")
    return done


def _cli_list(d: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run([sys.executable, "-m", "xlasdk.cli", "cache", "info", "--list", "--dir", str(d)],
                          capture_output=True, text=True, timeout=120, env=env, check=False)


def _cache_campaign(n: int, cli_every: int, tmp: Path, seed: int) -> None:
    rng = random.Random(seed)
    pristine = tmp / "pristine"
    problems: list[str] = []
    damaged = hits_after_damage = cli_runs = 0
    with harness.Worker(timeout=180) as w:
        first = w.run(harness.Task(_SOURCE, (str(pristine), []), entry="cache_ops", key="fill"))
        assert first.status == "ok", first.describe()
        assert first.value["values"] == {n: ("ok", True) for n in ("affine", "twice", "shift")}, first.value
        keys = sorted(p.name[:-7] for p in pristine.iterdir() if p.name.endswith(".xlaexe"))
        assert len(keys) == 3, keys
        for i in range(n):
            d = tmp / f"c{i}"
            shutil.copytree(pristine, d, symlinks=True)
            done = _damage(d, rng)
            damaged += bool(done)
            o = w.run(harness.Task(_SOURCE, (str(d), keys + ["cd" * 32]), entry="cache_ops", key=f"cache{i}: {done}"))
            if o.status != "ok":
                problems.append(o.describe())
                continue
            v = o.value
            raws = [k for k, r in (("entries", v["entries"]), ("info", v["info"]), ("evict", v["evict"]),
                                   *(("get", g) for g in v["get"]), *v["values"].items()) if r[0] != "ok"]
            if raws:
                problems.append(f"cache{i} {done}: not ok: {raws}: {v}")
            elif any(r != ("ok", True) for r in v["values"].values()):
                problems.append(f"cache{i} {done}: wrong values {v['values']}")
            else:
                hits_after_damage += v["hits"]
                names = [name for _, name, _ in v["entries"][1]]
                if any(not name.isprintable() for name in names):
                    problems.append(f"cache{i} {done}: an entry's name is not printable: {names}")
            if cli_every and i % cli_every == 0:
                cli_runs += 1
                r = _cli_list(d)
                lines = r.stdout.splitlines()
                count = next((int(ln.split()[1]) for ln in lines if ln.startswith("entries:")), None)
                listed = [ln for ln in lines if ln.startswith("  ")]
                if r.returncode != 0 or "error" in r.stderr or count is None or len(listed) != count:
                    problems.append(f"cache{i} {done}: cache info --list exit {r.returncode}, {count} entries, "
                                    f"{len(listed)} lines listed\n{r.stdout}{r.stderr[-1500:]}")
            shutil.rmtree(d, ignore_errors=True)
    print(f"cache directories: {n} ({damaged} damaged), {cli_runs} through the CLI, {hits_after_damage} hits on "
          f"surviving entries, {len(problems)} problems")
    assert not problems, "\n\n".join(problems[:10])
    assert damaged >= 1 and (cli_runs >= 1 or not cli_every)


def test_headers_quick(tmp_path: Path) -> None:
    _exe_campaign(60, tmp_path, seed=617)


def test_cache_entries_quick(tmp_path: Path) -> None:
    _cache_campaign(8, 4, tmp_path, seed=618)


@pytest.mark.campaign
def test_headers_long(tmp_path: Path) -> None:
    _exe_campaign(LONG, tmp_path, seed=6170)


@pytest.mark.campaign
def test_cache_entries_long(tmp_path: Path) -> None:
    _cache_campaign(max(LONG // 10, 1), 10, tmp_path, seed=6180)
