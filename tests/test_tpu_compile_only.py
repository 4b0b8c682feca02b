"""The compile-only TPU tier: the op tests' programs compiled for a TPU v5e without a chip.

The op tests' programs are recorded as they run on the CPU (``XLASDK_RECORD_PROGRAMS``, a hook of
tests.helpers.run), each distinct module text once; each is then made for the TPU as ``xs.compile``
makes it (the LAPACK lowering of runtime/_platform_lowering.py), checked against the capability
table (``xs.capabilities``), and compiled for ``xs.topology("v5e:1x1")`` by XLA:TPU without the table,
in xlasdk's worker (an abort ends the worker, not pytest). Every program must be one of:

- compiled by XLA:TPU and not refused by the table;
- refused by the table (with its reason), and XLA:TPU really fails or aborts on it.

A program XLA:TPU fails on that the table does not name fails the test ("capability table misses"),
so the table stays complete; one the table refuses and XLA:TPU compiles fails it too ("refuses what
XLA:TPU compiles"). A compile that outlasts :data:`PER_PROGRAM_S` is reported, not judged.

The quick profile (every run) records the programs of :data:`QUICK_FILES` (about 100 programs: 22 s
on 2 cores, recording included, with libtpu 0.0.42.1 and 0.0.52 alike; 2 minutes when other jobs
share the cores). ``pytest -m campaign tests/test_tpu_compile_only.py`` records every file of
tests/ops (449 distinct programs, recorded in about 70 s; XLA:TPU's compiles add up to 10 minutes
with libtpu 0.0.42.1 and 22 with 0.0.52 on 2 busy cores, the median 0.1 s, a few programs of
test_linalg_decomp and test_elementwise 30-150 s each). ``XLASDK_TPU_PROGRAMS=DIR`` compiles the
programs already recorded in DIR instead (``XLASDK_RECORD_PROGRAMS=DIR pytest tests/ops`` records
them). Skipped cleanly where libtpu is not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import xlasdk as xs
from tests.test_capabilities import xla_tpu_says
from tests.xla_faults import REPO, release
from xlasdk.runtime._platform_lowering import for_device

#: op test files whose programs the quick profile compiles: the ones the capability table has rows
#: for (collectives, convert, sort, linalg, reduce, fft, random's rng-bit-generator) and quick to compile
QUICK_FILES = ("test_collectives.py", "test_convert.py", "test_sort.py", "test_linalg.py", "test_reduce.py",
               "test_fft.py", "test_side_effects.py", "test_shaping.py", "test_control.py")

PER_PROGRAM_S = 240


@dataclass(frozen=True)
class Verdict:
    program: str  # the recorded file
    refused: str  # the table's reason ("" when it refuses nothing)
    xla_says: str | None  # XLA:TPU's error or death, None when it compiled


def _device() -> xs.Device:
    try:
        return xs.topology("v5e:1x1").devices[0]
    except xs.PluginError as e:
        pytest.skip(f"no libtpu: {e}")


def _record(out: Path, files: list[str]) -> Path:
    """Run the op test ``files`` on the CPU, recording their programs into ``out``."""
    env = {**os.environ, "XLASDK_RECORD_PROGRAMS": str(out), "XLASDK_TEST_PLATFORM": "cpu"}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q", "-x",
           *[str(REPO / "tests" / "ops" / f) for f in files]]
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def _judge(path: Path, dev: xs.Device) -> Verdict:
    comp = xs.XlaComputation.from_stablehlo(path.read_text())
    try:
        lowered = for_device(comp, dev)
    except xs.CompileError as e:  # a LAPACK call with no TPU form: refused, naming it
        return Verdict(path.name, f"lowering: {e}", xla_tpu_says(comp, PER_PROGRAM_S) or "")
    found = xs.capabilities(dev).refusals(lowered)
    return Verdict(path.name, str(found[0]) if found else "", xla_tpu_says(lowered, PER_PROGRAM_S))


def _source(path: Path) -> str:
    """The op test lines a recorded program came from (its locations), for the failure message."""
    import re

    lines = sorted(set(re.findall(r'tests/ops/(test_\w+\.py)":(\d+)', path.read_text())))
    return ", ".join(f"{f}:{n}" for f, n in lines[:3]) or "?"


def _check(directory: Path) -> None:
    dev = _device()
    programs = sorted(directory.glob("*.mlir"))
    assert programs, f"no program was recorded in {directory}"
    misses, over, slow = [], [], []
    for p in programs:
        v = _judge(p, dev)
        if v.xla_says is not None and "did not finish within" in v.xla_says:
            slow.append(p.name)
        elif v.xla_says is not None and not v.refused:
            misses.append(f"{p.name} ({_source(p)}): {v.xla_says[:300]}")
        elif v.xla_says is None and v.refused:
            over.append(f"{p.name} ({_source(p)}): {v.refused[:300]}")
    assert not misses, f"capability table misses ({release()}): " + "\n".join(misses)
    assert not over, f"capability table refuses what XLA:TPU of {release()} compiles: " + "\n".join(over)
    if slow:
        print(f"not judged (XLA:TPU took over {PER_PROGRAM_S} s): {', '.join(slow)}")


def test_quick_profile_of_op_programs_compiles_for_v5e_or_is_refused(tmp_path: Path) -> None:
    _device()
    given = os.environ.get("XLASDK_TPU_PROGRAMS", "").strip()
    _check(Path(given) if given else _record(tmp_path / "programs", list(QUICK_FILES)))


@pytest.mark.campaign
def test_every_op_program_compiles_for_v5e_or_is_refused(tmp_path: Path) -> None:
    _device()
    given = os.environ.get("XLASDK_TPU_PROGRAMS", "").strip()
    files = sorted(p.name for p in (REPO / "tests" / "ops").glob("test_*.py"))
    _check(Path(given) if given else _record(tmp_path / "programs", files))
