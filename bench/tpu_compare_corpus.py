"""``xlasdk compare`` on a TPU (issue 32): each correct program of tests/data/dumps run on the
default device (a TPU when there is one) against the reference evaluator, judged by the device's
own error model and, for contrast, by the CPU's; prints one line per program and the report's
precision notes. Without a TPU it runs on the CPU (then both models agree).

    python bench/tpu_compare_corpus.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import xlasdk as xs  # noqa: E402
from tests.test_real_dumps import recorded  # noqa: E402
from xlasdk.reference._evaluator import run_reference  # noqa: E402
from xlasdk.reference._report import compare_one  # noqa: E402
from xlasdk.reference._runners import reference_for, run_against  # noqa: E402


def main() -> int:
    from xlasdk.runtime.device import default_device

    dev = default_device()
    print("device:", dev, getattr(dev, "device_kind", ""))
    for prog in ("convnet_train", "gru_scan", "int_indexing", "transformer_bf16", "sharded_mlp"):
        t = time.time()
        ins, _ = recorded(f"dumps/{prog}")
        comp = xs.load_computation(ROOT / "tests/data/dumps" / prog / "module.before_optimizations.txt")
        try:
            c = run_against(comp, ins, xs.CompareSettings(), reference_for("reference"))
        except Exception as e:  # noqa: BLE001 - a program this device cannot run: said, not hidden
            print(f"{prog}: {type(e).__name__}: {str(e)[:200]}")
            continue
        want, scales = run_reference(comp, ins, model=("cpu", None, False))
        cpu = [compare_one(i, g, w, None, None, s)
               for i, (g, w, s) in enumerate(zip(c.got, want, scales, strict=True))]
        r = c.report
        print(f"{prog}: {r.device_kind} model: {'MATCH' if r.ok else 'DIVERGENCE'} "
              f"({sum(o.mismatches for o in r.outputs)} elements out); CPU model: "
              f"{'MATCH' if all(o.ok for o in cpu) else 'DIVERGENCE'} ({sum(o.mismatches for o in cpu)} elements out); "
              f"max scaled error {max((o.max_scaled for o in r.outputs), default=0):.3g}; {time.time() - t:.1f} s")
        for n in r.precision_notes[:6]:
            print("   ", n)
        if not r.ok:
            print(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
