"""Hostile inputs files given to ``xlasdk run`` (issue 31, finding 6); see ``hostile_inputs.py``.

Every generated .npy / .npz (headers that lie about their size, shape or dtype, archives cut
short or failing their CRC, zip bombs, members without ``.npy``, ``__dtypes__`` nested 100,000
deep, random byte flips...), and the special files (a FIFO, ``/dev/zero``, a directory), is
given as ``--input x=FILE`` or ``--inputs FILE`` to a one-parameter program, in a child process
(:mod:`harness`): each must end with exit 2 and one ``xlasdk run: error:`` line naming the file,
never a traceback, an ``internal error``, a death or a hang (a random mutation that leaves a valid
file may also run: exit 0). The quick profile (two of each kind, about 120 files) runs in the
default suite; the long one (``XLASDK_INPUTS_CAMPAIGN_LONG`` files, default 3,000) under
``pytest -m campaign``.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import hostile_inputs as hi
import pytest
from harness import Outcome, Task, run_batch

LONG = int(os.environ.get("XLASDK_INPUTS_CAMPAIGN_LONG", "3000"))

_SOURCE = '''
import io, os, tempfile
from xlasdk.cli import main as cli_main

D = tempfile.mkdtemp(prefix="inputs-campaign-")
PROGRAM = os.path.join(D, "add.hlo")
with open(PROGRAM, "w") as f:
    f.write(PROGRAM_TEXT)


def main(arg):
    key, suffix, data = arg
    if data is None:  # a special file: key is its path
        path = key
    else:
        path = os.path.join(D, key + suffix)
        with open(path, "wb") as f:
            f.write(data)
    argv = ["run", PROGRAM, "--input", "x=" + path] if suffix == ".npy" else ["run", PROGRAM, "--inputs", path]
    out, err = io.StringIO(), io.StringIO()
    try:
        code = cli_main(argv, stdout=out, stderr=err)
    finally:
        if data is not None:
            os.unlink(path)
    return code, out.getvalue(), err.getvalue()
'''.replace("PROGRAM_TEXT", repr(hi.PROGRAM))


def _check(o: Outcome, name: str, valid_possible: bool) -> str | None:
    """None when the outcome is what the campaign expects, else why not."""
    if o.status != "ok":
        return f"{o.status}: {o.error or o.signal_name}"
    code, out, err = o.value
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    if code == 0 and valid_possible:
        return None
    if code != 2:
        return f"exit {code}: {err.strip()[-300:]}"
    if len(lines) != 1 or not lines[0].startswith("xlasdk run: error: "):
        return f"not one error line: {err.strip()[-300:]}"
    if "Traceback" in err or "internal error" in err:
        return f"an internal error: {lines[0]}"
    if name not in lines[0]:
        return f"the line does not name the file {name}: {lines[0]}"
    return None


def _specials(d: Path) -> list[tuple[str, str]]:
    fifo = d / "fifo.npz"
    os.mkfifo(fifo)
    folder = d / "folder.npz"
    folder.mkdir()
    out = [(str(fifo), ".npz"), (str(fifo), ".npy"), (str(folder), ".npz"), (str(folder), ".npy")]
    if os.path.exists("/dev/zero"):
        out += [("/dev/zero", ".npy"), ("/dev/zero", ".npz")]
    return out


def _campaign(n: int, tmp_path: Path, seed: int) -> Counter[str]:
    source = _SOURCE
    cases = [hi.make(seed, i) for i in range(n)]
    tasks = [Task(source, (c.key, c.suffix, c.data), key=c.key) for c in cases]
    specials = _specials(tmp_path)
    tasks += [Task(source, (path, suffix, None), key=f"special {path} as {suffix}") for path, suffix in specials]
    t0 = time.monotonic()
    report = run_batch(tasks, timeout=60.0, env={"XLASDK_LOAD_CACHE": None})
    seconds = time.monotonic() - t0
    failures: list[str] = []
    seen: Counter[str] = Counter()
    for o in report.outcomes:
        if isinstance(o.task.input[2], bytes):
            key, suffix = o.task.input[0], o.task.input[1]
            case = cases[int(key[:5])]
            name, valid_possible = key + suffix, case.valid_possible
        else:
            name, valid_possible = os.path.basename(o.task.input[0]), False
        why = _check(o, name, valid_possible)
        seen["failed" if why else ("ran" if o.status == "ok" and o.value[0] == 0 else "refused")] += 1
        if why:
            failures.append(f"{o.task.key}: {why}")
    for o in report.outcomes[:: max(1, len(report.outcomes) // 12)]:  # a sample of what users read
        print("   ", o.task.key, "->", o.value[2].strip()[:160] if o.status == "ok" else o.status)
    print(f"\ninputs files campaign: {len(report.outcomes)} files in {seconds:.1f} s: {dict(seen)}")
    assert len(report.outcomes) == len(tasks)
    assert not failures, f"{len(failures)} of {len(tasks)} failed:\n" + "\n".join(failures[:60])
    return seen


def test_inputs_files_quick(tmp_path: Path, capsys: Any) -> None:
    with capsys.disabled():
        seen = _campaign(2 * len(hi.kinds()), tmp_path, seed=310)
    assert seen["refused"] >= 2 * len(hi.kinds())


@pytest.mark.campaign
def test_inputs_files_long(tmp_path: Path, capsys: Any) -> None:
    with capsys.disabled():
        _campaign(LONG, tmp_path, seed=311)
