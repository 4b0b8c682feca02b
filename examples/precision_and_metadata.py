"""Precision config, preferred element types, result accuracy and op metadata, as they show in HLO.

    python examples/precision_and_metadata.py
"""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np

import xlasdk as xs
from xlasdk import ops


def main() -> int:
    b = xs.XlaBuilder("precision_demo")
    a = ops.Parameter(b, 0, xs.Shape.array_shape(ml_dtypes.bfloat16, (4, 8)), "a")
    w = ops.Parameter(b, 1, xs.Shape.array_shape(ml_dtypes.bfloat16, (8, 3)), "w")

    # bf16 x bf16 accumulated and returned in f32, at the highest precision.
    with b.op_metadata(op_name="projection", op_type="dot"):
        p = ops.Dot(
            a, w,
            precision_config=xs.PrecisionConfig(["HIGHEST", "HIGHEST"]),
            preferred_element_type=np.float32,
        )
    # A transcendental with an explicit accuracy requirement.
    e = ops.Exp(p, result_accuracy=xs.ResultAccuracy(mode="TOLERANCE", atol=1e-5, rtol=0.0, ulps=2))
    # Explicit metadata, as a framework would attach it.
    b.set_op_metadata(xs.OpMetadata(op_name="framework/softplus", source_file="model.py", source_line=42))
    out = ops.Log1p(e)
    b.clear_op_metadata()
    comp = b.build(out)

    hlo = comp.as_hlo_text()
    print(hlo)
    checks = {
        "operand_precision={highest,highest}": "operand_precision={highest,highest}" in hlo,
        "dot accumulates in f32": any("f32[4,3]{1,0} dot(" in line for line in hlo.splitlines()),
        "result_accuracy on exp": "result_accuracy={tolerance={atol=1e-05" in hlo,
        'op_name="projection"': 'op_name="projection"' in hlo,
        "model.py:42": 'source_file="model.py" source_line=42' in hlo,
    }

    rng = np.random.default_rng(2)
    av = rng.standard_normal((4, 8)).astype(ml_dtypes.bfloat16)
    wv = rng.standard_normal((8, 3)).astype(ml_dtypes.bfloat16)
    got = xs.compile(comp)(av, wv).to_numpy()
    want = np.log1p(np.exp(av.astype(np.float64) @ wv.astype(np.float64)))
    checks["value vs numpy (bf16 inputs, f32 accumulation)"] = bool(np.allclose(got, want, rtol=1e-5, atol=1e-5))
    checks["result dtype f32"] = got.dtype == np.float32
    for name, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    ok = all(checks.values())
    print("MATCH" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
