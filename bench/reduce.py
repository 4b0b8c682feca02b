"""Shrinking a 1,000-instruction module to its failing core (``xs.reduce``, ``xlasdk reduce``).

The module is a model-like graph (layers of dot, add, scaling, maximum, transpose and reductions
over f32[16,16] values from four parameters, with a sum of each layer as an output) into whose
middle XLA's known abort has been spliced: a reduce-window whose padding is all negative
(cases.md C-06; XLA's algebraic simplifier aborts on it, in jaxlib 0.10.2 and 0.12). ``--until
crash`` must end at that reduce-window and what it reads. Printed: instructions before and
after, accepted steps, candidates checked, compiles (in the worker process), wall time, and the
time per strategy.

    python bench/reduce.py [--until crash|diverge] [--instructions 1000] [--max-time 300] [--json out.json]

Target (issue 20): under 5 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import xlasdk as xs  # noqa: E402
from xlasdk.reducer import ReduceStep  # noqa: E402


def module_text(n: int, until: str = "crash") -> str:
    """A valid HLO module of about ``n`` instructions with the spliced problem in its middle: XLA's
    abort (``crash``), or XLA:CPU's wrong ``1000 * x / 2**127`` (``diverge``: the reciprocal of the
    broadcast constant is subnormal and flushed to zero)."""
    lines = ["HloModule bench_reduce", "",
             "add {", "  x = f32[] parameter(0)", "  y = f32[] parameter(1)", "  ROOT s = f32[] add(x, y)", "}", "",
             "ENTRY main {"]
    for k in range(4):
        lines.append(f"  p{k} = f32[16,16]{{1,0}} parameter({k})")
    lines.append("  zero = f32[] constant(0)")
    lines.append("  q = f32[] constant(0.25)")
    lines.append("  qb = f32[16,16]{1,0} broadcast(q), dimensions={}")
    outs: list[tuple[str, str]] = []
    prev, count, layer = "p0", 7, 0
    bad_at = n // 2
    while count < n - 2:
        w = f"p{1 + layer % 3}"
        t = f"l{layer}"
        body = [
            f"  {t}_d = f32[16,16]{{1,0}} dot({prev}, {w}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
            f"  {t}_a = f32[16,16]{{1,0}} add({t}_d, {prev})",
            f"  {t}_h = f32[16,16]{{1,0}} multiply({t}_a, qb)",
            f"  {t}_t = f32[16,16]{{1,0}} transpose({t}_h), dimensions={{1,0}}",
            f"  {t}_m = f32[16,16]{{1,0}} maximum({t}_t, {t}_h)",
            f"  {t}_s = f32[16]{{0}} reduce({t}_m, zero), dimensions={{1}}, to_apply=add",
        ]
        lines.extend(body)
        outs.append((f"{t}_s", "f32[16]{0}"))
        count += len(body)
        if count >= bad_at and not any(name == "bad" for name, _ in outs):
            if until == "crash":
                lines.append(f"  bad = f32[16,15]{{1,0}} reduce-window({t}_m, zero), "
                             "window={size=1x1 pad=0_0x-1_0}, to_apply=add")
                outs.append(("bad", "f32[16,15]{1,0}"))
                count += 1
            else:
                lines += ["  k = f32[] constant(1000)", "  kb = f32[16,16]{1,0} broadcast(k), dimensions={}",
                          # on a parameter: deep in the chain the values can reach inf or 0, where the
                          # flushed reciprocal gives the right answer and nothing diverges
                          "  big = f32[16,16]{1,0} multiply(p0, kb)", "  c = f32[] constant(1.70141183e+38)",
                          "  cb = f32[16,16]{1,0} broadcast(c), dimensions={}",
                          "  bad = f32[16,16]{1,0} divide(big, cb)"]
                outs.append(("bad", "f32[16,16]{1,0}"))
                count += 6
        prev = f"{t}_m"
        layer += 1
    lines.append(f"  ROOT out = ({', '.join(s for _, s in outs)}) tuple({', '.join(n_ for n_, _ in outs)})")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instructions", type=int, default=1000)
    ap.add_argument("--until", choices=("crash", "diverge"), default="crash")
    ap.add_argument("--max-time", type=float, default=300.0)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()

    comp = xs.XlaComputation.from_hlo_text(module_text(a.instructions, a.until))
    per_strategy: Counter[str] = Counter()
    last = [0.0]

    def progress(step: ReduceStep) -> None:
        per_strategy[step.strategy] += 1
        print(f"  step {step.step:3d}  {step.strategy:<28} {step.instructions:5d} instructions  "
              f"{step.candidates:4d} candidates  {step.elapsed_s:7.1f} s (+{step.elapsed_s - last[0]:.1f})", flush=True)
        last[0] = step.elapsed_s

    t0 = time.perf_counter()
    res = xs.reduce(comp, a.until, max_time=a.max_time, progress=progress)
    wall = time.perf_counter() - t0
    opcodes = [i.opcode for i in res.computation.instructions()]
    print(res)
    print("left:", ", ".join(opcodes))
    doc = {
        "instructions_before": res.instructions_before, "instructions_after": res.instructions_after,
        "until": a.until, "steps": res.steps, "candidates": res.candidates, "compiles": res.compiles,
        "cache_hits": res.cache_hits,
        "wall_s": round(wall, 1), "timed_out": res.timed_out, "steps_per_strategy": dict(per_strategy),
        "opcodes_left": opcodes, "jaxlib": ".".join(map(str, xs.jaxlib_version_info())),
        "cpus": os.cpu_count(),
    }
    print(json.dumps(doc))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=2)
    core = "stablehlo.reduce_window" if a.until == "crash" else "stablehlo.divide"
    ok = core in opcodes and res.instructions_after <= 10 and not res.timed_out
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
