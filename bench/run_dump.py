"""Time to first result: ``xlasdk run DUMP --random-inputs`` against the same work written directly on
jaxlib's calls, each in a fresh process, in interleaved rounds.

The peer (``bench/_peer_run.py``) is what a user of jaxlib alone would write, with none of xlasdk's
safety, and it imports jaxlib and numpy only (nothing of xlasdk, whose package import it would
otherwise pay): parse the HLO text with XLA's parser, convert it to StableHLO, make a CPU client,
compile, draw random inputs with numpy, transfer them, run, read every result back (the buffer
protocol; bfloat16 through DLPack, as ``xlasdk run`` does). ``xlasdk run`` does the same work after
its own: a supervised child process that imports xlasdk's loaders and runtime, checks the file,
and parses, imports, verifies and compiles it with the worker's checks and limits (before issue
35's change, the load and the compile ran in a third process, the worker). ``--baseline REV``
times git revision REV's xlasdk in the same rounds (a before/after figure within one run).

Each figure is taken twice, with Python's bytecode cache on and off. The timed xlasdk is a copy of
this source tree in a temporary folder, put first on ``PYTHONPATH``: with the cache on, the first
(untimed) run writes its bytecode there; with ``PYTHONDONTWRITEBYTECODE=1`` (some images set it)
the copy never gets any, so each of the CLI's processes compiles every xlasdk module it imports,
as an editable install in such an image does. The peer's jaxlib and numpy have the bytecode pip
wrote when it installed them, in both cases.

Target (issue 35): the wall-time ratio xlasdk / peer at most 1.2 with the bytecode cache on, on
the project's real dumps (``tests/data/dumps``); the figure without the cache is shown, no target.

    python bench/run_dump.py [--rounds N] [--bytecode on|off|both] [--baseline REV] [--dump NAME] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _timing as tm  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DUMPS = ("transformer_bf16", "convnet_train")
TARGET = 1.2
PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_peer_run.py")


def source_copy(into: str, ref: str | None = None) -> str:
    """A copy of the xlasdk package (no bytecode) under ``into``: this tree's, or git revision
    ``ref``'s; returns the folder to put on the path."""
    if ref is None:
        shutil.copytree(os.path.join(ROOT, "xlasdk"), os.path.join(into, "xlasdk"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        return into
    os.makedirs(into, exist_ok=True)
    archive = subprocess.run(["git", "-C", ROOT, "archive", "--format=tar", ref, "xlasdk"], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return into


def child_env(tree: str, bytecode: bool) -> dict[str, str]:
    """The environment of the timed processes: this one's, the copy ``tree`` first on the path, and
    Python's bytecode cache on or off (``PYTHONDONTWRITEBYTECODE``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (tree, env.get("PYTHONPATH")) if p)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _wall(argv: list[str], env: dict[str, str], cwd: str) -> float:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False,
                       cwd=cwd, env=env)  # not the source tree: the copy on the path runs
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed: {r.stderr.decode()[-2000:]}")
    return time.perf_counter() - t0


def _check_copy_runs(env: dict[str, str], cwd: str, tree: str) -> None:
    r = subprocess.run([sys.executable, "-c", "import xlasdk; print(xlasdk.__file__)"],
                       capture_output=True, text=True, env=env, cwd=cwd, check=True)
    where = r.stdout.strip()
    if not where.startswith(tree):
        raise SystemExit(f"the timed xlasdk would be {where}, not the copy in {tree}")


def run(rounds: int = 5, modes: tuple[bool, ...] = (True, False), baseline: str | None = None,
        dumps: tuple[str, ...] = DUMPS) -> list[dict[str, Any]]:
    """The rows of the table; with ``baseline`` (a git revision), that revision's xlasdk runs as a
    third contender in the same interleaved rounds (its ratio to the peer is the row's ``baseline``)."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="xlasdk-run-dump-") as tmp:
        for bytecode in modes:
            tag = "on" if bytecode else "off"
            tree = source_copy(os.path.join(tmp, tag))
            envs = {"xlasdk": child_env(tree, bytecode), "peer": child_env(tree, bytecode)}
            _check_copy_runs(envs["xlasdk"], tmp, tree)
            if baseline is not None:
                base = source_copy(os.path.join(tmp, f"{tag}-baseline"), baseline)
                envs["baseline"] = child_env(base, bytecode)
                _check_copy_runs(envs["baseline"], tmp, base)
            for name in dumps:
                path = os.path.join(ROOT, "tests", "data", "dumps", name, "module.before_optimizations.txt")
                cli = ["-m", "xlasdk.cli", "run", path, "--random-inputs"]
                contenders = {"xlasdk": cli, "peer": [PEER, path]}
                if baseline is not None:
                    contenders["baseline"] = cli
                times: dict[str, list[float]] = {k: [] for k in contenders}
                for k in contenders:  # warm the file cache (and, cache on, write the copy's bytecode)
                    _wall(contenders[k], envs[k], tmp)
                for r in range(rounds):
                    order = list(contenders) if r % 2 == 0 else list(reversed(contenders))
                    for k in order:
                        times[k].append(_wall(contenders[k], envs[k], tmp))
                ratio = tm.ratio(times["xlasdk"], times["peer"])
                target = TARGET if bytecode else None
                extra: dict[str, Any] = {}
                if baseline is not None:
                    extra = {"baseline": round(tm.ratio(times["baseline"], times["peer"]), 3),
                             "baseline_s": round(tm.median(times["baseline"]), 3)}
                rows.append(tm.row(
                    f"xlasdk run {name} --random-inputs (wall, bytecode {tag})", "s",
                    round(tm.median(times["xlasdk"]), 3), round(tm.median(times["peer"]), 3),
                    "jaxlib + numpy alone", round(ratio, 3), target,
                    f"<= {TARGET}x" if bytecode else "(info)",
                    ratios=[round(m / p, 3) for m, p in zip(times["xlasdk"], times["peer"], strict=True)], **extra))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--bytecode", choices=("on", "off", "both"), default="both")
    ap.add_argument("--json", default=None)
    ap.add_argument("--baseline", default=None, metavar="REV",
                    help="also time git revision REV's xlasdk in the same rounds (before/after a change)")
    ap.add_argument("--dump", action="append", choices=DUMPS, help="only these dumps (repeatable)")
    ns = ap.parse_args()
    modes = {"on": (True,), "off": (False,), "both": (True, False)}[ns.bytecode]
    rows = run(ns.rounds, modes, ns.baseline, tuple(ns.dump) if ns.dump else DUMPS)
    for r in rows:
        verdict = {True: "ok", False: "MISSED", None: "info"}[r["ok"]]
        base = f"  {ns.baseline}: {r['baseline_s']:.3f} s, ratio {r['baseline']:.2f}" if "baseline" in r else ""
        print(f"{r['figure']:<68} {r['xlasdk']:>7.3f} s  peer {r['peer']:.3f} s  ratio {r['ratio']:.2f}  "
              f"{verdict} ({r['target_text']}); per round {r['ratios']}{base}")
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
