"""Campaign 5 of issue 9: resident memory over many build + compile + execute cycles.

A child process (``harness.py``) repeats a cycle: build one computation (a random op chain from
``chains.py``, taken in turn from a pool of 24, alternately with its inputs as parameters and as
constants), print its HLO text, compile it, run it, copy the result to numpy and drop
everything. It reads its resident set size from ``/proc/self/statm`` (after ``gc.collect()``)
every 10 cycles.

The bound. Everything a cycle creates is garbage when the next cycle starts, so after a warm-up
(the first third of the cycles: every pool entry built and compiled several times, XLA's and
Python's caches and the allocator's arenas filled) the RSS must stay flat. Allowed growth from
the end of the warm-up to the end: ``8 MiB + 1 KiB per cycle``. Measured on jaxlib 0.10.2:

* without a leak, RSS grows 217 -> 223 MiB during the warm-up and then stays within a few
  tenths of a MiB: +0.15 MiB over the long profile's 6,667 post-warm-up cycles, +0.2 to +1.5 MiB
  over the quick profile's 200 (the samples step by 0.1-0.5 MiB at a time: allocator arenas).
  The 8 MiB floor absorbs such steps many times over; the 1 KiB/cycle slope is 50 times the
  long-run creep (0.02 KiB/cycle);
* keeping each cycle's computation, executable and result alive (a leak of one compiled
  program per cycle; ``test_rss_bound_detects_a_leak``) costs ~155 KiB per cycle: +31 MiB over
  the quick profile's 200 post-warm-up cycles, which the bound (8.2 MiB) rejects.

So the quick profile catches a leak of more than ~40 KiB per cycle (a computation, an
executable), and the long profile, over 6,667 post-warm-up cycles (bound 14.5 MiB), one of more
than ~2.5 KiB per cycle. The figure compared is the median of the last five samples minus the
median of the five samples after warm-up.

Quick profile: 300 cycles (default suite); long profile: 10,000 cycles (``pytest -m campaign``;
``XLASDK_RSS_LONG`` overrides).
"""

from __future__ import annotations

import os
import statistics
import time

import chains
import pytest
from harness import Task, run_batch

POOL = 24
SAMPLE_EVERY = 10
LONG_CYCLES = int(os.environ.get("XLASDK_RSS_LONG", "10000"))
MIB = 1 << 20

SOURCE = '''
import gc
import os
import time

import ml_dtypes
import numpy as np
import xlasdk as xs
from xlasdk import ops

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def cycle(source, leaves, mode, keep):
    ns = {"np": np, "ml_dtypes": ml_dtypes, "xs": xs, "ops": ops}
    exec(source, ns)
    b = xs.XlaBuilder("cycle")
    if mode == "param":
        args = [ops.Parameter(b, i, xs.Shape.array_shape(a.dtype, a.shape), f"x{i}") for i, a in enumerate(leaves)]
    else:
        args = [ops.Constant(b, a) for a in leaves]
    comp = b.build(ns["build"](b, *args))
    comp.as_hlo_text()
    exe = xs.compile(comp, device="cpu:0")
    out = exe(*leaves) if mode == "param" else exe()
    host = out.to_numpy()
    if keep is not None:  # a deliberate leak, to calibrate the bound
        keep.append((comp, exe, out))
    return host.nbytes


def main(inp):
    pool, cycles, every, leak = inp
    keep = [] if leak else None
    samples = []
    t0 = time.perf_counter()
    for i in range(cycles):
        source, leaves = pool[i % len(pool)]
        cycle(source, leaves, ("param", "const")[(i // len(pool)) % 2], keep)
        if (i + 1) % every == 0:
            gc.collect()
            samples.append((i + 1, rss()))
    return {"samples": samples, "seconds": time.perf_counter() - t0}
'''


def _pool() -> list[tuple[str, list]]:
    out = []
    for seed in range(3_000_000, 3_000_000 + POOL):
        c = chains.generate(seed)
        out.append((c.source(), c.leaves))
    return out


def _run(cycles: int, leak: bool = False) -> dict:
    rep = run_batch([Task(SOURCE, (_pool(), cycles, SAMPLE_EVERY, leak), key=f"rss{cycles}")],
                    timeout=60 + 2.0 * cycles, env={"XLASDK_CACHE_DIR": None})  # every cycle compiles
    assert not rep.deaths and not rep.timeouts, rep.describe_failures()
    assert not rep.errors, rep.errors[0].traceback
    return rep.ok[0].value


def _growth(samples: list[tuple[int, int]]) -> tuple[int, int, int]:
    """(RSS after warm-up, RSS at the end, growth) from medians of five samples."""
    rss = [r for _, r in samples]
    warm = len(rss) // 3
    start = int(statistics.median(rss[warm:warm + 5]))
    end = int(statistics.median(rss[-5:]))
    return start, end, end - start


def allowed(cycles: int) -> int:
    """The allowed growth after warm-up over ``cycles`` cycles (see the module docstring)."""
    post = cycles - cycles // 3
    return 8 * MIB + 1024 * post


def _campaign(cycles: int, capsys: pytest.CaptureFixture[str]) -> None:
    t0 = time.monotonic()
    v = _run(cycles)
    start, end, growth = _growth(v["samples"])
    first = v["samples"][0][1]
    line = (
        f"rss: {cycles} build+compile+execute cycles, RSS {first / MIB:.1f} MiB after {SAMPLE_EVERY} cycles, "
        f"{start / MIB:.1f} MiB after warm-up ({cycles // 3} cycles), {end / MIB:.1f} MiB at the end: growth "
        f"{growth / MIB:+.2f} MiB ({growth / (cycles - cycles // 3) / 1024:+.2f} KiB/cycle; bound "
        f"{allowed(cycles) / MIB:.1f} MiB), failures: {int(growth > allowed(cycles))}, deaths: 0, "
        f"time: {time.monotonic() - t0:.1f} s"
    )
    with capsys.disabled():
        print(f"\n[campaign] {line}", flush=True)
    assert growth <= allowed(cycles), line + "\nsamples (cycle, bytes): " + repr(v["samples"])


def test_rss_quick(capsys: pytest.CaptureFixture[str]) -> None:
    _campaign(300, capsys)


@pytest.mark.campaign
def test_rss_long(capsys: pytest.CaptureFixture[str]) -> None:
    _campaign(LONG_CYCLES, capsys)


@pytest.mark.campaign
def test_rss_bound_detects_a_leak(capsys: pytest.CaptureFixture[str]) -> None:
    """Keeping each cycle's computation, executable and result alive must break the quick profile's bound.

    (A calibration of the bound rather than a campaign; in the campaign set to keep the default suite short.)
    """
    cycles = 300
    v = _run(cycles, leak=True)
    _, _, growth = _growth(v["samples"])
    post = cycles - cycles // 3
    with capsys.disabled():
        print(f"\n[campaign] rss calibration: keeping every cycle's computation, executable and result grows RSS "
              f"{growth / MIB:+.1f} MiB over {post} post-warm-up cycles ({growth / post / 1024:.0f} KiB/cycle; "
              f"bound {allowed(cycles) / MIB:.1f} MiB)", flush=True)
    assert growth > allowed(cycles), (growth, allowed(cycles), v["samples"])
