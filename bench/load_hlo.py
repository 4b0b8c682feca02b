"""Loading HLO text that xlasdk did not write, against XLA's own parser on the same text.

``xs.XlaComputation.from_hlo_text`` runs every native step on file content in xlasdk's worker
process first (fail closed: XLA aborts on some inconsistent modules): XLA's parser, XLA's
HLO -> StableHLO import, MLIR's verifier, the program shape and the module's text. The peer is
XLA's HLO text parser alone (``hlo_module_from_text``), in this process, on the same text, which
neither verifies nor imports. Also printed: the round trip of a tiny module through the warm
worker (the fixed cost of the child-process step per file), the worker's cold start, and the
import of a loaded module into the typed graph (``comp.instructions()``'s first call: the walk of
the verified module through the MLIR bindings, and the HLO names from the worker).

    python bench/load_hlo.py [--sizes 1000,10000,100000] [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _timing as tm  # noqa: E402

import xlasdk as xs  # noqa: E402
from xlasdk._jaxlib import isolated  # noqa: E402
from xlasdk._jaxlib import mlir as _mlir  # noqa: E402
from xlasdk.program import load_cache  # noqa: E402

_TINY = "HloModule tiny\n\nENTRY main {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p)\n}\n"


def chain_text(n: int) -> str:
    """A valid HLO module of ``n`` element-wise instructions in a chain (with metadata, as dumps have)."""
    lines = ["HloModule chain", "", "ENTRY main {", "  p0 = f32[8]{0} parameter(0)", "  p1 = f32[8]{0} parameter(1)"]
    prev = "p0"
    ops = ("add", "multiply", "subtract", "maximum")
    for i in range(n):
        lines.append(f'  v{i} = f32[8]{{0}} {ops[i % 4]}({prev}, p1), metadata={{op_name="jit(f)/op{i}"}}')
        prev = f"v{i}"
    lines += [f"  ROOT r = f32[8]{{0}} negate({prev})", "}", ""]
    return "\n".join(lines)


COLD_BUDGET_MS = 1000.0  # issue "time to first result": worker cold start + first tiny load, quiet machine


def run(sizes: list[int], rounds: int = 3) -> list[dict[str, Any]]:
    """The table's rows: a tiny load through the warm worker, the worker's cold start, and per size a
    first load and the same bytes again, each against XLA's bare parse in the same rounds."""
    os.environ.pop("XLASDK_CACHE_DIR", None)  # the in-process level of the verified-load cache only
    isolated.shutdown()
    load_cache.clear()
    cold = tm.once(lambda: xs.XlaComputation.from_hlo_text(_TINY))
    rows: list[dict[str, Any]] = []
    def tiny_first() -> Any:
        load_cache.clear()
        return xs.XlaComputation.from_hlo_text(_TINY)

    tiny = tm.interleaved(
        {"xlasdk": tiny_first, "xla": lambda: _mlir.hlo_module_from_text(_TINY)},
        calls=20, rounds=max(rounds, 5), warmup=5,
    )
    rows.append(tm.row("load 2-instruction HLO text (warm worker)", "ms", tm.median(tiny["xlasdk"]) * 1e3,
                       tm.median(tiny["xla"]) * 1e3, "XLA's parser, in-process", tm.ratio(tiny["xlasdk"], tiny["xla"]),
                       None, "-"))
    rows.append(tm.row("worker cold start + first tiny load", "ms", round(cold * 1e3, 1), None, "-",
                       round(cold * 1e3 / COLD_BUDGET_MS, 2), 1.0, f"<= {COLD_BUDGET_MS:g} ms (quiet)"))
    for n in sizes:
        text = chain_text(n)
        mine: list[float] = []
        again: list[float] = []
        peer: list[float] = []
        graph: list[float] = []
        for r in range(rounds):
            order = ("xla", "xlasdk", "again", "graph") if r % 2 == 0 else ("graph", "again", "xlasdk", "xla")
            for name in order:
                if name == "xlasdk":
                    load_cache.clear()  # a first load: through the worker
                comp = xs.XlaComputation.from_hlo_text(text) if name == "graph" else None  # loaded, not walked
                t0 = time.perf_counter()
                if name == "xla":
                    _mlir.hlo_module_from_text(text)
                elif comp is not None:
                    comp.instructions()  # the import into the typed graph, on first need
                else:
                    xs.XlaComputation.from_hlo_text(text)
                {"xla": peer, "xlasdk": mine, "again": again, "graph": graph}[name].append(time.perf_counter() - t0)
        big = n == 100000
        rows.append(tm.row(f"load {n}-instruction HLO text (parse+import+verify+shape)", "ms", tm.median(mine) * 1e3,
                           tm.median(peer) * 1e3, "XLA's parser, in-process", tm.ratio(mine, peer),
                           3.0 if big else None, "<= 3" if big else "-"))
        rows.append(tm.row(f"load the same {n}-instruction text again (verified-load cache)", "ms",
                           tm.median(again) * 1e3, tm.median(peer) * 1e3, "XLA's parser, in-process",
                           tm.ratio(again, peer), 1.2 if big else None, "<= 1.2" if big else "-"))
        rows.append(tm.row(f"import the loaded {n}-instruction module into the graph (first instructions())",
                           "ms", tm.median(graph) * 1e3, tm.median(peer) * 1e3, "XLA's parser, in-process",
                           tm.ratio(graph, peer), 1.5 if big else None, "<= 1.5" if big else "-"))
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rows = run([int(s) for s in args.sizes.split(",")], args.rounds)
    tm.print_rows(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
