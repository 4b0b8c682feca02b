"""Interop of buffers: numpy in / numpy out dispatch, zero-copy arguments, zero-copy readback.

Figures (contenders interleaved in the same process; medians of the rounds):

- small add: ``exe(a, b).to_numpy()`` with numpy f32[2,3] arguments, against
  ``np.asarray(f(a, b))`` for ``f = jax.jit(lambda x, y: x + y)`` (target: <= 1.2x JAX);
- 256 MiB argument: ``exe(xs.device_put(x, semantics=ZERO_COPY))`` for a 64-byte-aligned f32
  numpy ``x`` (``xs.aligned_empty``), against ``exe(d)`` with ``d`` already on the device
  (target: <= 1.10x); the default copying ``exe(x)`` is shown for reference;
- 256 MiB result: ``np.asarray(out)`` of a fresh f32 result, against ``np.copy`` of the same
  256 MiB (what a copying readback would cost); the view's pointer equals the buffer's
  (target: <= 0.01x, i.e. no copy).

Without ``jax`` installed the small-add peer is n/a.

    python bench/interop.py [--calls 2000] [--rounds 15] [--big-rounds 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _timing as tm  # noqa: E402

import xlasdk as xs  # noqa: E402
from xlasdk import ops  # noqa: E402

BIG = 64 << 20  # f32 elements: 256 MiB


def _one(out: xs.DeviceArray | tuple[xs.DeviceArray, ...]) -> xs.DeviceArray:
    assert isinstance(out, xs.DeviceArray)
    return out


def _add() -> xs.Executable:
    b = xs.XlaBuilder("add")
    s = xs.Shape.array_shape(np.float32, (2, 3))
    ops.Add(ops.Parameter(b, 0, s, "a"), ops.Parameter(b, 1, s, "b"))
    return xs.compile(b.build())


def _sum_big() -> xs.Executable:
    """f32[BIG] -> f32[]: reads the whole argument, writes 4 bytes."""
    b = xs.XlaBuilder("sum_big")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (BIG,)), "x")
    s = xs.XlaBuilder("add_f32")
    ops.Add(ops.Parameter(s, 0, xs.Shape.array_shape(np.float32, ()), "p"),
            ops.Parameter(s, 1, xs.Shape.array_shape(np.float32, ()), "q"))
    ops.Reduce(b, [x], [ops.Constant(b, np.float32(0))], s.build(), [0])
    return xs.compile(b.build())


def _inc_big() -> xs.Executable:
    """f32[BIG] -> f32[BIG]: x + 1 (a 256 MiB result)."""
    b = xs.XlaBuilder("inc_big")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (BIG,)), "x")
    ops.Add(x, ops.Constant(b, np.float32(1)))
    return xs.compile(b.build())


def small_add(calls: int, rounds: int) -> dict[str, Any]:
    exe = _add()
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = np.ones((2, 3), np.float32)
    assert np.array_equal(_one(exe(a, c)).to_numpy(), a + c)
    fns: dict[str, Any] = {"x": lambda: _one(exe(a, c)).to_numpy()}
    jax = tm.jax_or_none()
    if jax is not None:
        f = jax.jit(lambda x, y: x + y)
        assert np.array_equal(np.asarray(f(a, c)), a + c)
        fns["j"] = lambda: np.asarray(f(a, c))
    t = tm.interleaved(fns, calls, rounds)
    us = {k: tm.median(v) * 1e6 for k, v in t.items()}
    jname = f"jax {jax.__version__} jit" if jax is not None else "jax (not installed)"
    r = tm.ratio(t["x"], t["j"]) if "j" in t else None
    label = "interop: exe(*numpy) + to_numpy(), f32[2,3] add"
    return tm.row(label, "us", us["x"], us.get("j"), jname, r, 1.2, "<= 1.2x")


def _timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def big_argument(rounds: int) -> list[dict[str, Any]]:
    exe = _sum_big()
    x = xs.aligned_empty((BIG,), np.float32)
    x[:] = 1.0
    d = xs.device_put(x)  # a copy on the device
    zc = xs.device_put(x, semantics=xs.HostBufferSemantics.ZERO_COPY)
    assert zc.unsafe_buffer_pointer() == x.ctypes.data  # aliased, not copied
    del zc
    want = float(BIG)
    assert float(_one(exe(d)).to_numpy()) == want

    def run_zero_copy() -> None:
        _one(exe(xs.device_put(x, semantics=xs.HostBufferSemantics.ZERO_COPY))).block_until_ready()

    def run_resident() -> None:
        _one(exe(d)).block_until_ready()

    def run_copy() -> None:
        _one(exe(x)).block_until_ready()

    fns = {"zc": run_zero_copy, "dev": run_resident, "copy": run_copy}
    for f in fns.values():
        f()
    t: dict[str, list[float]] = {k: [] for k in fns}
    names = list(fns)
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            t[name].append(_timed(fns[name]))
    ms = {k: tm.median(v) * 1e3 for k, v in t.items()}
    return [
        tm.row("interop: exe(ZERO_COPY put of 256 MiB f32 numpy)", "ms", ms["zc"], ms["dev"],
               "exe(device-resident arg)", tm.ratio(t["zc"], t["dev"]), 1.10, "<= 1.10x"),
        tm.row("interop: exe(256 MiB f32 numpy), default copy", "ms", ms["copy"], ms["dev"],
               "exe(device-resident arg)", tm.ratio(t["copy"], t["dev"]), None, "(reference)"),
    ]


def big_result(rounds: int) -> dict[str, Any]:
    exe = _inc_big()
    d = xs.device_put(np.zeros(BIG, np.float32))
    t_view: list[float] = []
    t_copy: list[float] = []
    for _ in range(rounds):
        out = _one(exe(d)).block_until_ready()
        t0 = time.perf_counter()
        v = np.asarray(out)
        t1 = time.perf_counter()
        assert v.ctypes.data == out.unsafe_buffer_pointer() and v[0] == 1.0
        t_view.append(t1 - t0)
        t0 = time.perf_counter()
        np.copy(v)
        t_copy.append(time.perf_counter() - t0)
        del v, out
    us_view, us_copy = tm.median(t_view) * 1e6, tm.median(t_copy) * 1e6
    return tm.row("interop: np.asarray(256 MiB f32 result)", "us", us_view, us_copy, "np.copy of 256 MiB",
                  tm.ratio(t_view, t_copy), 0.01, "<= 0.01x")


def run(calls: int = 2000, rounds: int = 15, big_rounds: int = 7) -> list[dict[str, Any]]:
    return [small_add(calls, rounds), *big_argument(big_rounds), big_result(big_rounds)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=2000, help="calls per timed batch (small add)")
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds of the small add")
    ap.add_argument("--big-rounds", type=int, default=7, help="rounds of the 256 MiB figures")
    ap.add_argument("--json", help="write the rows to this JSON file")
    a = ap.parse_args()
    rows = run(a.calls, a.rounds, a.big_rounds)
    tm.print_rows(rows)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
