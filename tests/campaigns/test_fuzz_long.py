"""The long profile of the shape-rule fuzzing (``tests/test_fuzz_shape_rules.py``): every test's
example count in full, where the default suite runs its quick profile (``QUICK_SCALE`` of each,
issue 44). ``XLASDK_FUZZ_LONG_SCALE`` multiplies the counts further (default 1; 10 for a deep run).

It runs the fuzz module in a child pytest (the counts are read when the module is imported), so a
process abort inside XLA on a drawn case fails this test with the child's output, not the run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCALE = os.environ.get("XLASDK_FUZZ_LONG_SCALE", "1")


@pytest.mark.campaign
def test_fuzz_long() -> None:
    env = dict(os.environ, XLASDK_FUZZ_SCALE=SCALE)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q", "-m", "not campaign",
         str(REPO / "tests" / "test_fuzz_shape_rules.py")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=7200,
    )
    tail = (proc.stdout + proc.stderr)[-6000:]
    print(tail)
    assert proc.returncode == 0, tail
    assert re.search(r"^\d+ passed", proc.stdout, re.M) and " failed" not in proc.stdout, tail
