"""Timing helpers shared by the benchmark scripts.

The benchmarks compare xlasdk with a peer (JAX, numpy) *in the same process and the same run*.
On a small shared machine the load changes from second to second, so the contenders are
interleaved: each round times a batch of every contender back to back, the figure of a
contender is the median of its batches, and a ratio is the median of the per-round ratios
(both sides of one round saw about the same load).
"""

from __future__ import annotations

import importlib
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any


def interleaved(
    fns: Mapping[str, Callable[[], Any]], calls: int, rounds: int = 15, warmup: int = 200
) -> dict[str, list[float]]:
    """Per-call seconds of each function, one entry per round (``calls`` calls per batch).

    The order of the contenders rotates from round to round so none always runs first.
    """
    names = list(fns)
    for name in names:
        f = fns[name]
        for _ in range(warmup):
            f()
    out: dict[str, list[float]] = {n: [] for n in names}
    clock = time.perf_counter
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            f = fns[name]
            t0 = clock()
            for _ in range(calls):
                f()
            out[name].append((clock() - t0) / calls)
    return out


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def ratio(mine: list[float], peer: list[float]) -> float:
    """Median of the per-round ratios ``mine / peer``."""
    return statistics.median(m / p for m, p in zip(mine, peer, strict=True))


def once(fn: Callable[[], Any]) -> float:
    """Seconds taken by one call of ``fn``."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def jax_or_none() -> Any:
    """The ``jax`` module, or None when it is not installed (the peer figures become n/a)."""
    try:
        jax = importlib.import_module("jax")
        importlib.import_module("jax.numpy")
    except ImportError:
        return None
    return jax


def row(
    figure: str,
    unit: str,
    mine: float | None,
    peer: float | None,
    peer_name: str,
    ratio_: float | None,
    target: float | None,
    target_text: str,
    **extra: Any,
) -> dict[str, Any]:
    """One line of a benchmark table (what ``run_all.py`` prints and writes as JSON).

    ``ratio`` is xlasdk / peer; the target holds when ``ratio <= target``.
    """
    ok = None if ratio_ is None or target is None else bool(ratio_ <= target)
    return {
        "figure": figure,
        "unit": unit,
        "xlasdk": mine,
        "peer": peer,
        "peer_name": peer_name,
        "ratio": ratio_,
        "target": target,
        "target_text": target_text,
        "ok": ok,
        **extra,
    }


def fmt(v: float | None, digits: int = 1) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"


def print_rows(rows: list[dict[str, Any]]) -> None:
    """Print rows as a fixed-width table."""
    print(f"{'figure':<54} {'unit':>4} {'xlasdk':>9} {'peer':>9} {'peer is':<26} {'ratio':>6} {'target':>8} {'ok':>3}")
    for r in rows:
        ok = {True: "yes", False: "NO", None: "-"}[r["ok"]]
        print(
            f"{r['figure']:<54} {r['unit']:>4} {fmt(r['xlasdk']):>9} {fmt(r['peer']):>9} {r['peer_name']:<26} "
            f"{fmt(r['ratio'], 3):>6} {r['target_text']:>8} {ok:>3}"
        )
