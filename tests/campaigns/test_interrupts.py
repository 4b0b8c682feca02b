"""Campaign of issue 17, finding 1: Ctrl-C at random points of loads and compiles never leaves an
answer behind for the next request.

Each trial starts a slow request (loading a 20,000-instruction HLO module, or compiling a loaded
module) and sends this process SIGINT after a random delay (0-400 ms: before the request, while
the worker parses, while it compiles, or after it answered). Then it loads one of four small
modules, picked at random, checks its program shape, compiles it and runs it on fresh inputs,
checking the values against numpy. A desynchronized worker answers with the previous request's
module or executable: a wrong shape or wrong values, counted as a wrong answer.

The verified-load cache is off (``XLASDK_LOAD_CACHE=0``): with it, a load of the slow file after
the first is answered from memory and the interrupt lands after it. A trial counts as interrupted
when the SIGINT reached a request in flight (the request raised ``KeyboardInterrupt``).

The quick profile does 6 trials; the long one (``pytest -m campaign``) runs trials until
``XLASDK_INTERRUPTS_LONG`` (default 200) of them interrupted a request in flight, at most three
times that many trials, and prints its figures. Each interrupted request costs a fresh worker
(about 1-3 s).
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import xlasdk as xs

LONG = int(os.environ.get("XLASDK_INTERRUPTS_LONG", "200"))

SMALL = {  # name -> (element type, n, opcode, numpy of the result)
    "a": ("s32", 7, "add", lambda x: x + x),
    "b": ("f32", 5, "multiply", lambda x: x * x),
    "c": ("f64", 3, "subtract", lambda x: x - x),
    "d": ("s64", 9, "maximum", lambda x: np.maximum(x, x)),
}
DTYPES = {"s32": np.int32, "f32": np.float32, "f64": np.float64, "s64": np.int64}


def _files(tmp: Path) -> tuple[Path, dict[str, Path]]:
    slow = tmp / "slow.hlo"
    lines = ["HloModule slow", "", "ENTRY main {", "  p0 = f32[8] parameter(0)"]
    lines += [f"  p{i} = f32[8] multiply(p{i - 1}, p{i - 1})" for i in range(1, 20000)]
    lines += ["  ROOT r = f32[8] negate(p19999)", "}"]
    slow.write_text("\n".join(lines) + "\n")
    small = {}
    for name, (ty, n, op, _) in SMALL.items():
        path = tmp / f"{name}.hlo"
        path.write_text(f"HloModule {name}\n\nENTRY main {{\n  p = {ty}[{n}] parameter(0)\n"
                        f"  ROOT r = {ty}[{n}] {op}(p, p)\n}}\n")
        small[name] = path
    return slow, small


def _campaign(trials: int, tmp: Path, seed: int, until_interrupted: int = 0) -> tuple[int, int, dict[str, int]]:
    """Runs ``trials`` trials, or with ``until_interrupted`` until that many interrupted a request
    (at most 3x as many trials); returns (trials run, interrupted, interrupted requests by kind)."""
    rng = random.Random(seed)
    slow, small = _files(tmp)
    slow_comp = xs.load_computation(slow)
    wrong: list[str] = []
    interrupted = 0
    by_kind = {"load": 0, "compile": 0}
    ran = 0
    for t in range(3 * until_interrupted if until_interrupted else trials):
        if until_interrupted and interrupted >= until_interrupted:
            break
        ran += 1
        delay = rng.uniform(0.0, 0.4)
        kind = rng.choice(("load", "compile"))
        timer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT))
        try:
            timer.start()
            if kind == "load":
                xs.load_computation(slow)
            else:
                xs.compile(slow_comp, cache=None)
            time.sleep(0.5)  # an interrupt that comes after the request lands here
        except KeyboardInterrupt:
            interrupted += 1
            by_kind[kind] += 1
        finally:
            timer.cancel()
            timer.join()
        name = rng.choice(sorted(SMALL))
        ty, n, _, ref = SMALL[name]
        try:
            comp = xs.load_computation(small[name])
            got_shape = str(comp.program_shape())
            want_shape = f"(p: {ty}[{n}]) -> {ty}[{n}]"
            if got_shape != want_shape:
                wrong.append(f"trial {t} ({kind}, {delay:.3f} s): {name}.hlo loaded as {got_shape}")
                continue
            x = np.arange(1, n + 1).astype(DTYPES[ty]) * (t + 1)
            out = xs.compile(comp, cache=None)(x).to_numpy()
            if not np.array_equal(out, ref(x)):
                wrong.append(f"trial {t} ({kind}, {delay:.3f} s): {name}.hlo computed {out}, want {ref(x)}")
        except KeyboardInterrupt:  # pragma: no cover - the timer was cancelled and joined
            wrong.append(f"trial {t}: a late interrupt")
    assert not wrong, f"{len(wrong)} wrong answers in {ran} trials:\n" + "\n".join(wrong)
    assert interrupted >= 1, f"no trial of {ran} was interrupted: the campaign tested nothing"
    return ran, interrupted, by_kind


def test_interrupts_quick(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLASDK_LOAD_CACHE", "0")
    _campaign(6, tmp_path, seed=17)


@pytest.mark.campaign
def test_interrupts_long(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLASDK_LOAD_CACHE", "0")
    started = time.monotonic()
    ran, interrupted, by_kind = _campaign(0, tmp_path, seed=1700, until_interrupted=LONG)
    print(f"interrupt campaign: {ran} trials, {interrupted} interrupted a request in flight "
          f"({by_kind['load']} loads, {by_kind['compile']} compiles), 0 wrong answers, "
          f"{time.monotonic() - started:.0f} s")
    assert interrupted >= LONG, f"only {interrupted} of {ran} trials interrupted a request in flight"
