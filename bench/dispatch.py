"""Per-call dispatch time of a tiny computation: f32[2,3] add.

Figures (median microseconds per call, contenders interleaved in the same process):

- device-resident: ``exe(da, db).block_until_ready()`` with ``DeviceArray`` arguments, against
  ``f(ja, jb).block_until_ready()`` for ``f = jax.jit(lambda x, y: x + y)`` and ``jax.Array``
  arguments (target: <= 1.5x JAX);
- numpy in/out: ``exe(a, b).to_numpy()`` with numpy arguments, against ``np.asarray(f(a, b))``
  (target: <= 2.0x JAX);
- the same two paths written directly against jaxlib (``execute_sharded`` + result handlers,
  ``batched_device_put``, buffer-protocol readback): the floor for any Python-level dispatcher;
  two more rows give xlasdk's ratio to it (target: <= 1.1x), and an info row the least any API
  returning its own array object adds to the device-resident floor (one object, one method).

Without ``jax`` installed the JAX columns are n/a.

    python bench/dispatch.py [--calls 2000] [--rounds 15] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _timing as tm  # noqa: E402

import xlasdk as xs  # noqa: E402
from xlasdk import ops  # noqa: E402

#: issue "time to first result": xlasdk's call within this factor of the same work written on jaxlib's calls
FLOOR_TARGET = 1.1


def _add_executable() -> xs.Executable:
    b = xs.XlaBuilder("add")
    s = xs.Shape.array_shape(np.float32, (2, 3))
    ops.Add(ops.Parameter(b, 0, s, "a"), ops.Parameter(b, 1, s, "b"))
    return xs.compile(b.build())


def _one(out: xs.DeviceArray | tuple[xs.DeviceArray, ...]) -> xs.DeviceArray:
    assert isinstance(out, xs.DeviceArray)
    return out


def run(calls: int = 2000, rounds: int = 15) -> list[dict[str, Any]]:
    """The two dispatch rows (and two reference rows) of the table."""
    exe = _add_executable()
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = np.ones((2, 3), np.float32)
    da, dc = xs.device_put(a), xs.device_put(c)
    assert np.array_equal(_one(exe(a, c)).to_numpy(), a + c)
    assert np.array_equal(_one(exe(da, dc)).to_numpy(), a + c)

    # The floor: the same work written directly against jaxlib (what exe() does, minus checks).
    from xlasdk._jaxlib import pjrt

    plan = exe._plan
    jexe, handlers, bufs = exe._exe, plan.handlers, [da._arr, dc._arr]
    aval, sharding, jdev = plan.params[0].aval, plan.sharding, plan.jdevice

    def raw_dev() -> Any:
        return jexe.execute_sharded(bufs).consume_with_handlers(handlers)[0].block_until_ready()

    def raw_np() -> Any:
        x = pjrt._batched_device_put(aval, sharding, [a], [jdev], True, False, pjrt._IMMUTABLE_DURING_CALL, True)
        y = pjrt._batched_device_put(aval, sharding, [c], [jdev], True, False, pjrt._IMMUTABLE_DURING_CALL, True)
        return np.asarray(memoryview(jexe.execute_sharded([x, y]).consume_with_handlers(handlers)[0]))

    class _Wrapper:  # the least an API returning its own array object adds: one object, one method
        __slots__ = ("arr",)
        arr: Any

        def block_until_ready(self) -> Any:
            self.arr.block_until_ready()
            return self

    def wrapper_dev() -> Any:
        w = _Wrapper()
        w.arr = jexe.execute_sharded([da._arr, dc._arr]).consume_with_handlers(handlers)[0]
        return w.block_until_ready()

    fns: dict[str, Any] = {
        # (no _one() here: the timed call is exactly what a user writes)
        "x_dev": lambda: exe(da, dc).block_until_ready(),  # type: ignore[union-attr]
        "x_np": lambda: exe(a, c).to_numpy(),  # type: ignore[union-attr]
        "raw_dev": raw_dev,
        "raw_np": raw_np,
        "wrapper_dev": wrapper_dev,
    }
    jax = tm.jax_or_none()
    if jax is not None:
        f = jax.jit(lambda x, y: x + y)
        ja, jc = jax.device_put(a), jax.device_put(c)
        assert np.array_equal(np.asarray(f(a, c)), a + c)
        fns["j_dev"] = lambda: f(ja, jc).block_until_ready()
        fns["j_np"] = lambda: np.asarray(f(a, c))
    t = tm.interleaved(fns, calls, rounds)
    us = {k: tm.median(v) * 1e6 for k, v in t.items()}
    jname = f"jax {jax.__version__} jit" if jax is not None else "jax (not installed)"
    rows = []
    for key, label, target, raw in (
        ("dev", "dispatch: exe(*device_arrays) + ready, f32[2,3] add", 1.5, "raw_dev"),
        ("np", "dispatch: exe(*numpy) + to_numpy(), f32[2,3] add", 2.0, "raw_np"),
    ):
        peer = us.get(f"j_{key}")
        r = tm.ratio(t[f"x_{key}"], t[f"j_{key}"]) if peer is not None else None
        rows.append(
            tm.row(label, "us", us[f"x_{key}"], peer, jname, r, target, f"<= {target}x", raw_jaxlib_us=us[raw])
        )
    for key, label in (
        ("dev", "dispatch: exe(*device_arrays) + ready vs the raw-jaxlib floor"),
        ("np", "dispatch: exe(*numpy) + to_numpy() vs the raw-jaxlib floor"),
    ):
        rows.append(tm.row(label, "us", us[f"x_{key}"], us[f"raw_{key}"], "the same on jaxlib's calls",
                           tm.ratio(t[f"x_{key}"], t[f"raw_{key}"]), FLOOR_TARGET, f"<= {FLOOR_TARGET}x"))
    rows.append(tm.row("dispatch floor of any wrapper: raw calls + one object and one method (info)", "us",
                       us["wrapper_dev"], us["raw_dev"], "the same on jaxlib's calls",
                       tm.ratio(t["wrapper_dev"], t["raw_dev"]), None, "-"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=2000, help="calls per timed batch")
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds (medians are taken)")
    ap.add_argument("--json", help="write the rows to this JSON file")
    a = ap.parse_args()
    rows = run(a.calls, a.rounds)
    tm.print_rows(rows)
    for r in rows:
        if "raw_jaxlib_us" not in r:
            continue
        what = r["figure"].split(": ")[1].split(",")[0]
        print(f"  reference, the same with raw jaxlib calls, {what}: {r['raw_jaxlib_us']:.1f} us")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
