"""Graph-building speed: build an N-op element-wise chain and get its HLO text.

For each N (default 1k, 10k, 100k) it prints the time to build the graph (and ops/s, which
must not fall as N grows: no quadratic behaviour), then the time xlasdk's direct HLO printer
takes (``xlasdk/_hlo_emit.py``, what ``as_hlo_text()`` uses for graphs of ops that map one to
one onto HLO instructions), and, for comparison, the steps of the route through XLA's converter
(which ``as_hlo_text()`` takes for the other graphs): emitting the StableHLO module text,
parsing + verifying it, converting it, printing HLO; and ``comp.as_hlo_text()`` end to end.
If ``jax`` is importable, the peer is
``jax.jit(f).lower(x).as_text()`` of the same chain (traced afresh each time), for N <= 20k.

The chain alternates ``y = y + x`` and ``y = y * x`` on f32[128], as the JAX function does.

    python bench/build.py [--sizes 1000,10000,100000] [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _timing as tm  # noqa: E402

import xlasdk as xs  # noqa: E402
from xlasdk import ops  # noqa: E402
from xlasdk._jaxlib import mlir as _mlir  # noqa: E402

JAX_MAX_OPS = 20000
_STEPS = (
    "build_s", "print_hlo_direct_s", "emit_stablehlo_s", "parse_verify_s", "convert_from_bytecode_s",
    "convert_from_text_s", "print_hlo_s",
)


def build_chain(n: int) -> tuple[xs.XlaComputation, float]:
    """The computation of an ``n``-op chain and the seconds it took to build."""
    t0 = time.perf_counter()
    b = xs.XlaBuilder(f"chain{n}")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (128,)), "x")
    y = x
    for i in range(n):
        y = ops.Add(y, x) if i % 2 == 0 else ops.Mul(y, x)
    comp = b.build(y)
    return comp, time.perf_counter() - t0


def xlasdk_end_to_end(n: int) -> float:
    """Seconds to build the chain and get ``as_hlo_text()`` (the public path)."""
    t0 = time.perf_counter()
    comp, _ = build_chain(n)
    comp.as_hlo_text()
    return time.perf_counter() - t0


def xlasdk_stablehlo(n: int) -> float:
    """Seconds to build the chain and get ``as_stablehlo_text()`` (what JAX's ``as_text`` gives)."""
    t0 = time.perf_counter()
    comp, _ = build_chain(n)
    comp.as_stablehlo_text()
    return time.perf_counter() - t0


def xlasdk_steps(n: int) -> dict[str, float]:
    """Seconds of each step from graph to HLO text, done one by one."""
    comp, t_build = build_chain(n)
    t0 = time.perf_counter()
    direct = comp._direct_hlo_text(True, True)
    t_direct = time.perf_counter() - t0
    assert direct is not None, "the chain should take the direct HLO printer"
    t0 = time.perf_counter()
    text = comp._mlir_module_text()
    t_emit = time.perf_counter() - t0
    t0 = time.perf_counter()
    module = _mlir.parse_module(text)
    t_parse = time.perf_counter() - t0
    t0 = time.perf_counter()
    xla = _mlir.parsed_module_to_hlo(module)
    t_conv_bc = time.perf_counter() - t0
    t0 = time.perf_counter()
    _mlir.module_to_hlo(text)
    t_conv_text = time.perf_counter() - t0
    t0 = time.perf_counter()
    _mlir.hlo_text(xla)
    t_print = time.perf_counter() - t0
    return {
        "build_s": t_build,
        "ops_per_s": n / t_build,
        "print_hlo_direct_s": t_direct,
        "emit_stablehlo_s": t_emit,
        "parse_verify_s": t_parse,
        "convert_from_bytecode_s": t_conv_bc,
        "convert_from_text_s": t_conv_text,
        "print_hlo_s": t_print,
    }


def jax_lower(n: int) -> float | None:
    """Seconds for ``jax.jit(f).lower(x).as_text()`` of the chain (a fresh ``f``), or None."""
    jax = tm.jax_or_none()
    if jax is None:
        return None
    jnp = jax.numpy

    def f(x: Any) -> Any:
        y = x
        for i in range(n):
            y = y + x if i % 2 == 0 else y * x
        return y

    t0 = time.perf_counter()
    jax.jit(f).lower(jnp.zeros((128,), jnp.float32)).as_text()
    return time.perf_counter() - t0


def run(sizes: list[int], repeats: int = 3) -> list[dict[str, Any]]:
    """One entry per size: the steps, the end-to-end figures and JAX's, medians of ``repeats``."""
    build_chain(100)  # imports and first-call set-up are not part of any figure
    _mlir.hlo_text(_mlir.parsed_module_to_hlo(_mlir.parse_module(build_chain(10)[0]._mlir_module_text())))
    jax_lower(10)
    out = []
    for n in sizes:
        reps = repeats if n <= JAX_MAX_OPS else 1
        steps = [xlasdk_steps(n) for _ in range(reps)]
        r: dict[str, Any] = {"ops": n}
        for k in steps[0]:
            r[k] = statistics.median(s[k] for s in steps)
        mine, hlo_ratios, shlo, peer = [], [], [], []
        for _ in range(reps):  # interleaved, so both sides see the same load
            mine.append(xlasdk_end_to_end(n))
            shlo.append(xlasdk_stablehlo(n))
            p = jax_lower(n) if n <= JAX_MAX_OPS else None
            if p is not None:
                peer.append(p)
                hlo_ratios.append(mine[-1] / p)
        r["build_to_hlo_text_s"] = statistics.median(mine)
        r["build_to_stablehlo_text_s"] = statistics.median(shlo)
        r["jax_lower_as_text_s"] = statistics.median(peer) if peer else None
        r["ratio_hlo_vs_jax"] = statistics.median(hlo_ratios) if hlo_ratios else None
        r["ratio_stablehlo_vs_jax"] = (
            statistics.median(s / p for s, p in zip(shlo, peer, strict=True)) if peer else None
        )
        out.append(r)
    return out


def table_rows(results: list[dict[str, Any]], n: int = 10000) -> list[dict[str, Any]]:
    """The rows for ``run_all.py``: the HLO figure (the issue's target) and the StableHLO one."""
    r = next(x for x in results if x["ops"] == n)
    jax = tm.jax_or_none()
    jname = f"jax {jax.__version__} lower+as_text" if jax is not None else "jax (not installed)"
    peer = None if r["jax_lower_as_text_s"] is None else r["jax_lower_as_text_s"] * 1e3
    return [
        tm.row(
            f"build {n // 1000}k-op graph + as_hlo_text()", "ms", r["build_to_hlo_text_s"] * 1e3, peer, jname,
            r["ratio_hlo_vs_jax"], 0.2, "<= 0.2x",
            steps_ms={k[:-2]: r[k] * 1e3 for k in _STEPS},
            ops_per_s=r["ops_per_s"],
        ),
        tm.row(
            f"build {n // 1000}k-op graph + as_stablehlo_text() (info)", "ms", r["build_to_stablehlo_text_s"] * 1e3,
            peer, jname, r["ratio_stablehlo_vs_jax"], None, "-",
        ),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeats", type=int, default=3, help="repetitions per size up to 20k ops (medians)")
    ap.add_argument("--json", help="write the figures to this JSON file")
    a = ap.parse_args()
    res = run([int(s) for s in a.sizes.split(",")], a.repeats)
    print(
        f"{'ops':>7} {'build ms':>9} {'ops/s':>9} {'direct':>7} | {'emit':>7} {'parse':>7} {'conv bc':>8} "
        f"{'conv txt':>8} "
        f"{'print':>7} | {'->HLO ms':>9} {'->SHLO ms':>9} {'jax ms':>8} {'HLO/jax':>7} {'SHLO/jax':>8}"
    )
    for r in res:
        jt = r["jax_lower_as_text_s"]
        print(
            f"{r['ops']:>7} {r['build_s'] * 1e3:>9.1f} {r['ops_per_s']:>9.0f} {r['print_hlo_direct_s'] * 1e3:>7.1f} | "
            f"{r['emit_stablehlo_s'] * 1e3:>7.1f} "
            f"{r['parse_verify_s'] * 1e3:>7.1f} {r['convert_from_bytecode_s'] * 1e3:>8.1f} "
            f"{r['convert_from_text_s'] * 1e3:>8.1f} {r['print_hlo_s'] * 1e3:>7.1f} | "
            f"{r['build_to_hlo_text_s'] * 1e3:>9.1f} {r['build_to_stablehlo_text_s'] * 1e3:>9.1f} "
            f"{tm.fmt(jt * 1e3 if jt else None):>8} {tm.fmt(r['ratio_hlo_vs_jax'], 3):>7} "
            f"{tm.fmt(r['ratio_stablehlo_vs_jax'], 3):>8}"
        )
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(res, fh, indent=2)


if __name__ == "__main__":
    main()
