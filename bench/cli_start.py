"""CPU time of the ``xlasdk`` command's answers that need no XLA: ``--help``, ``version`` and a usage
error (a missing file), each in a fresh process, against a bare Python start (``python -c pass``) in
the same rounds (with Python's bytecode cache on: ``run_dump.child_env``).

Target (issue "time to first result"): at most 0.3 s of CPU each on a quiet machine; the row's
ratio is the command's CPU seconds / 0.3, so it holds when ``ratio <= 1``.

    python bench/cli_start.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _timing as tm  # noqa: E402
import run_dump  # noqa: E402

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # this checkout: its xlasdk is timed

BUDGET_S = 0.3
COMMANDS = {
    "xlasdk --help": ["-m", "xlasdk.cli", "--help"],
    "xlasdk version": ["-m", "xlasdk.cli", "version"],
    "xlasdk run MISSING.hlo (usage error)": ["-m", "xlasdk.cli", "run", "/nonexistent/missing.hlo"],
}


def _cpu(argv: list[str]) -> float:
    """User + system CPU seconds of one child process running ``python ARGV``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                   env={**run_dump.child_env(_REPO, True), "XLASDK_CLI_SUPERVISE": "1"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run(rounds: int = 7) -> list[dict[str, Any]]:
    """One row per command: median CPU seconds over ``rounds`` interleaved rounds."""
    cpu: dict[str, list[float]] = {name: [] for name in ["python -c pass", *COMMANDS]}
    for argv in COMMANDS.values():  # a first run writes the bytecode (run_dump.child_env)
        _cpu(argv)
    for _ in range(rounds):
        cpu["python -c pass"].append(_cpu(["-c", "pass"]))
        for name, argv in COMMANDS.items():
            cpu[name].append(_cpu(argv))
    bare = statistics.median(cpu["python -c pass"])
    rows = []
    for name in COMMANDS:
        mine = statistics.median(cpu[name])
        rows.append(tm.row(f"{name}: CPU time", "s", round(mine, 3), round(bare, 3), "python -c pass",
                           round(mine / BUDGET_S, 2), 1.0, "<= 0.3 s CPU"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ns = ap.parse_args()
    for r in run(ns.rounds):
        print(f"{r['figure']:<52} {r['xlasdk']:>7.3f} s   (python -c pass {r['peer']:.3f} s)   "
              f"{'ok' if r['ok'] else 'MISSED'} ({r['target_text']})")


if __name__ == "__main__":
    main()
