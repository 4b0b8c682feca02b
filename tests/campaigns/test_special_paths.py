"""Campaign of issue 17, findings 4 and 5: every kind of path through every reader and writer gives
the exact outcome its kind calls for, never a raw exception, a hang, or a special file replaced.

Each trial makes one path of a random kind in a fresh directory (a new name, a regular file, an
empty one, a 17 GiB sparse one, a directory, a FIFO, a copy of /dev/null's device node, a UNIX
socket, links to each of them, a link to itself, a dangling link, a chain of links, a name in a
missing directory or under a regular file, a 300-byte name; for inputs also /dev/zero and
/dev/null themselves; through the API also ``None``, ``bytes``, an ``int`` and a name holding NUL)
and hands it to one operation: ``XlaComputation.save``, ``Executable.save``, ``xs.load_computation``,
``xs.load_executable``, the compile cache (``xs.compile(cache=PATH)`` and ``CompileCache(PATH)``),
or, through the command line, ``xlasdk convert IN OUT`` and ``xlasdk run --output OUT``.

The checks: a writer succeeds exactly on regular files, new names and links to those, and then the
file (the link's target) holds exactly what was saved and no temporary file is left; it refuses
every other kind with an xlasdk error (exit 2 on the command line) and leaves the path as it was
(the same inode, type and device). A reader succeeds exactly on a regular file of the right
content (or a link to one). The compile cache never fails a compile (right values on any path)
and never replaces what is there. The API calls run in a harness child (a hang or a death is
recorded); each command-line run has a time limit.

The quick profile does 80 API trials and 2 command-line runs; the long one (``pytest -m
campaign``) ``XLASDK_SPECIAL_PATHS_LONG`` API trials (default 2,000) and a tenth as many runs.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import stat
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import harness
import numpy as np
import pytest

LONG = int(os.environ.get("XLASDK_SPECIAL_PATHS_LONG", "2000"))
REPO = Path(__file__).resolve().parents[2]

_SOURCE = r'''
import hashlib, os
import numpy as np
import xlasdk as xs
from xlasdk import ops
from xlasdk.errors import XlaSdkError

def _comp():
    b = xs.XlaBuilder("neg")
    return b.build(ops.Neg(ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (2,)), "x")))

COMP = _comp()
EXE = xs.compile(COMP, cache=False)
X = np.array([1.5, -2.0], np.float32)

def contents(_):
    return COMP.as_hlo_text().encode(), EXE.serialize()

def _guard(fn):
    try:
        return ("ok", fn())
    except XlaSdkError as e:
        return ("xlasdk", type(e).__name__, str(e)[:300])
    except Exception as e:
        return ("raw", type(e).__name__, str(e)[:300])

def _written(path, want):
    with open(os.path.realpath(path), "rb") as f:
        return f.read() == want

def main(arg):
    op, path = arg
    if op == "save_hlo":
        return _guard(lambda: (COMP.save(path, format="hlo"), _written(path, COMP.as_hlo_text().encode()))[1])
    if op == "save_exe":
        return _guard(lambda: (EXE.save(path), _written(path, EXE.serialize()))[1])
    if op == "load_comp":
        return _guard(lambda: str(xs.load_computation(path, format="hlo").program_shape()))
    if op == "load_exe":
        return _guard(lambda: np.array_equal(xs.load_executable(path)(X).to_numpy(), -X))
    if op == "cache":
        compiled = _guard(lambda: np.array_equal(xs.compile(COMP, cache=path)(X).to_numpy(), -X))
        listed = _guard(lambda: len(xs.CompileCache(path).entries()))
        return ("ok", (compiled, listed))
    raise ValueError(op)
'''

_SPECIAL = {"dir", "fifo", "chardev", "socket"}
_REGULAR_OUT = {"new", "regular", "empty", "sparse", "link-regular", "link-new", "link-chain"}
_KINDS = ("new", "regular", "empty", "sparse", "dir", "fifo", "chardev", "socket", "link-regular", "link-new",
          "link-chain", "link-dir", "link-fifo", "link-chardev", "link-socket", "self-link", "link-missing-dir",
          "missing-dir", "under-file", "long-name")
# Executable.save documents OSError for a write that fails (XlaComputation.save: FormatError)
_WRITE_FAILURES = {"missing-dir", "under-file", "long-name", "link-missing-dir"}
_OS_ERRORS = {"FileNotFoundError", "NotADirectoryError", "OSError"}
_INPUT_ONLY = ("/dev/zero", "/dev/null")
_BAD_TYPES = ("None", "bytes", "int", "nul")


def _make(kind: str, d: Path, content: bytes, name: str = "target") -> Any:
    """Create a path of ``kind`` named ``name`` in the empty directory ``d``; returns the path (or a
    non-path)."""
    p = d / name
    if kind in _INPUT_ONLY:
        return kind
    if kind in _BAD_TYPES:
        return {"None": None, "bytes": os.fsencode(p), "int": 3, "nul": str(p) + "\0x"}[kind]
    base = kind.removeprefix("link-")
    real = d / "real"
    if base == "regular":
        real.write_bytes(content)
    elif base == "empty":
        real.write_bytes(b"")
    elif base == "sparse":
        with open(real, "wb") as f:
            f.truncate(17 << 30)  # past the default read limit of 16 GiB
    elif base == "dir":
        real.mkdir()
    elif base == "fifo":
        os.mkfifo(real)
    elif base == "chardev":
        try:
            os.mknod(real, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a copy of /dev/null
        except PermissionError:  # not root: a FIFO stands in
            os.mkfifo(real)
    elif base == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(real))
        s.close()
    elif base == "chain":
        real.write_bytes(content)
        (d / "middle").symlink_to(real)
        p.symlink_to(d / "middle")
        return str(p)
    elif kind == "self-link":
        p.symlink_to(p)
        return str(p)
    elif kind == "link-missing-dir":
        p.symlink_to(d / "missing" / "x")
        return str(p)
    elif kind == "missing-dir":
        return str(d / "missing" / name)
    elif kind == "under-file":
        real.write_bytes(content)
        return str(real / name)
    elif kind == "long-name":
        return str(d / ("n" * 300 + name))
    if kind == "new":
        return str(p)
    if kind == "link-new":
        p.symlink_to(d / "fresh")
        return str(p)
    if kind.startswith("link-"):
        p.symlink_to(real)
        return str(p)
    real.rename(p)
    return str(p)


def _identity(d: Path) -> dict[str, tuple[int, int, int]]:
    """(type, inode, device) of every name in ``d``, links not followed."""
    out = {}
    for q in d.iterdir():
        st = os.lstat(q)
        out[q.name] = (stat.S_IFMT(st.st_mode), st.st_ino, st.st_rdev)
    return out


def _expected(op: str, kind: str) -> str:
    """"ok" or "error": what ``op`` must give on a path of ``kind``."""
    if op in ("save_hlo", "save_exe", "convert_out", "run_out"):
        return "ok" if kind in _REGULAR_OUT else "error"
    if op in ("load_comp", "load_exe", "convert_in"):
        return "ok" if kind in ("regular", "link-regular", "link-chain") else "error"
    return "error" if kind in _BAD_TYPES else "ok"  # the cache: the compile works on any path


def _check(op: str, kind: str, result: Any, before: dict[str, tuple[int, int, int]], d: Path) -> str | None:
    """What is wrong with ``result`` (None: nothing)."""
    after = _identity(d)
    temps = [n for n in after if n.startswith(".") and n.endswith(".tmp")]
    if temps:
        return f"temporary files left: {temps}"
    if op == "cache":
        compiled, listed = result[1]
        if kind in _BAD_TYPES:  # an argument error (xs.compile documents TypeError for other types than paths)
            if not (compiled[0] == "xlasdk" or compiled[:2] == ("raw", "TypeError") and kind in ("bytes", "int")):
                return f"the compile through the cache gave {compiled}"
            if listed[0] != "xlasdk":
                return f"CompileCache(path).entries() gave {listed}"
        elif compiled != ("ok", True):
            return f"the compile through the cache gave {compiled}"
        if listed[0] == "raw":
            return f"CompileCache(path).entries() raised {listed}"
    else:
        want = _expected(op, kind)
        got = "ok" if result[0] == "ok" else result[0]
        if result[0] == "raw" and not (op == "save_exe" and kind in _WRITE_FAILURES and result[1] in _OS_ERRORS):
            return f"a raw exception: {result[1:]}"
        if got == "ok" and want == "error":
            return f"succeeded: {result}"
        if got != "ok" and want == "ok":
            return f"refused: {result}"
        if got == "ok" and op in ("save_hlo", "save_exe", "load_exe") and result[1] is not True:
            return f"the file does not hold what was saved: {result}"
    # what was there stays, except a regular file (or a link's regular target) a writer replaced
    replaced_ok = op in ("save_hlo", "save_exe", "convert_out", "run_out", "cache") and result[0] == "ok"
    for name, (fmt, ino, rdev) in before.items():
        now = after.get(name)
        if now is None:
            return f"{name} ({stat.filemode(fmt)[0]}) was removed"
        if now != (fmt, ino, rdev) and not (replaced_ok and stat.S_ISREG(fmt) and stat.S_ISREG(now[0])):
            return f"{name} was replaced: {before[name]} -> {now}"
    return None


def _api_campaign(n: int, tmp: Path, seed: int) -> Counter[str]:
    rng = random.Random(seed)
    ops = ("save_hlo", "save_exe", "load_comp", "load_exe", "cache")
    problems: list[str] = []
    seen: Counter[str] = Counter()
    with harness.Worker(timeout=60) as w:
        first = w.run(harness.Task(_SOURCE, None, entry="contents", key="contents"))
        assert first.status == "ok", first.describe()
        hlo, exe = first.value
        for i in range(n):
            op = rng.choice(ops)
            kinds = _KINDS + (_INPUT_ONLY if op.startswith("load") else ()) + (_BAD_TYPES[1:] if op == "cache"
                                                                                else _BAD_TYPES)  # None: the default
            kind = rng.choice(kinds)
            d = tmp / f"t{i}"
            d.mkdir(parents=True)
            path = _make(kind, d, exe if op == "load_exe" else hlo)
            before = _identity(d)
            o = w.run(harness.Task(_SOURCE, (op, path), key=f"{op} on {kind}"))
            if o.status != "ok":
                problems.append(o.describe())
                continue
            wrong = _check(op, kind, o.value, before, d)
            if wrong:
                problems.append(f"trial {i}: {op} on {kind} ({path!r:.80}): {wrong}")
            seen[f"{op}:{_expected(op, kind)}"] += 1
            shutil.rmtree(d, ignore_errors=True)
    assert not problems, f"{len(problems)} problems in {n} trials:\n" + "\n".join(problems[:15])
    return seen


def _cli(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    env.pop("XLASDK_CACHE_DIR", None)
    return subprocess.run([sys.executable, "-m", "xlasdk.cli", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=180, env=env, check=False)


def _cli_campaign(n: int, tmp: Path, seed: int) -> Counter[str]:
    rng = random.Random(seed)
    src = tmp / "m.hlo"
    src.write_text("HloModule neg\n\nENTRY main {\n  x = f32[2] parameter(0)\n  ROOT r = f32[2] negate(x)\n}\n")
    problems: list[str] = []
    seen: Counter[str] = Counter()
    kinds = tuple(k for k in _KINDS if k != "long-name")
    for i in range(n):
        # the first three: a refused output, a written one through a link, a refused --output
        op = ("convert_out", "convert_in", "run_out")[i] if i < 3 else rng.choice(("convert_out", "run_out",
                                                                                    "convert_in"))
        kind = ("fifo", "link-regular", "chardev")[i] if i < 3 else kinds[rng.randrange(len(kinds))]
        d = tmp / f"c{i}"
        d.mkdir()
        path = _make(kind, d, src.read_bytes(), "target.npz" if op == "run_out" else "target")  # --output's name
        before = _identity(d)
        t0 = time.monotonic()
        if op == "convert_out":
            r = _cli(["convert", str(src), path, "--to", "hlo"], d)
        elif op == "run_out":
            r = _cli(["run", str(src), "--random-inputs", "--output", path], d)
        else:
            r = _cli(["convert", path, str(d / "out.hlo"), "--from", "hlo"], d)
        want = _expected(op, kind)
        result: tuple[Any, ...] = ("ok", True) if r.returncode == 0 else ("xlasdk",)
        wrong = None
        if r.returncode not in (0, 2) or "internal error" in r.stderr or "Traceback" in r.stderr:
            wrong = f"exit {r.returncode}: {r.stderr[-800:]}"
        elif (r.returncode == 0) != (want == "ok"):
            wrong = f"exit {r.returncode}, want {'0' if want == 'ok' else '2'}: {r.stderr[-800:]}"
        elif r.returncode == 0 and op == "convert_out":
            text = Path(os.path.realpath(path)).read_text()
            if not text.startswith("HloModule") or "negate(" not in text:
                wrong = f"wrote {text[:200]!r}"
        elif r.returncode == 0 and op == "run_out":
            with np.load(os.path.realpath(path)) as z:
                if sorted(z.files) != ["output_0"] or z["output_0"].shape != (2,):
                    wrong = f"wrote {z.files}"
        wrong = wrong or _check(op, kind, result, before, d)
        if wrong:
            problems.append(f"cli trial {i}: {op} on {kind}: {wrong} ({time.monotonic() - t0:.1f} s)")
        seen[f"{op}:{want}"] += 1
        shutil.rmtree(d, ignore_errors=True)
    assert not problems, f"{len(problems)} problems in {n} runs:\n" + "\n".join(problems[:15])
    return seen


def _report(label: str, seen: Counter[str], seconds: float) -> None:
    print(f"{label}: {sum(seen.values())} trials in {seconds:.0f} s, each as expected: {dict(sorted(seen.items()))}")
    # a campaign that only succeeded, or only refused, tested half of the promise
    assert any(k.endswith(":ok") for k in seen) and any(k.endswith(":error") for k in seen), seen


def test_special_paths_quick(tmp_path: Path) -> None:
    t0 = time.monotonic()
    _report("API", _api_campaign(80, tmp_path / "api", seed=45), time.monotonic() - t0)
    t0 = time.monotonic()
    _report("CLI", _cli_campaign(2, tmp_path, seed=46), time.monotonic() - t0)


@pytest.mark.campaign
def test_special_paths_long(tmp_path: Path) -> None:
    t0 = time.monotonic()
    _report("API", _api_campaign(LONG, tmp_path / "api", seed=450), time.monotonic() - t0)
    t0 = time.monotonic()
    _report("CLI", _cli_campaign(max(LONG // 10, 3), tmp_path, seed=460), time.monotonic() - t0)
