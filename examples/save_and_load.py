"""Build a computation, save it in every file format, load each file back, run it, compare.

    python examples/save_and_load.py [DIR]

Formats (chosen by the suffix): .hlo (HLO text), .mlir (StableHLO text), .mlirbc (StableHLO
portable artifact, by default for the oldest StableHLO version that holds every op), .pb (HLO
module proto). A compiled executable is saved and loaded too (.xlaexe), skipping compilation.
"""

from __future__ import annotations

import os
import sys
import tempfile

import numpy as np

import xlasdk as xs
from xlasdk import formats, ops

load_computation = getattr(xs, "load_computation", formats.load_computation)


def build() -> xs.XlaComputation:
    """softmax(x @ w + b) over the last axis, for x: (4, 3), w: (3, 5), b: (5,)."""
    f32 = np.float32
    bld = xs.XlaBuilder("dense_softmax")
    x = ops.Parameter(bld, 0, xs.Shape.array_shape(f32, (4, 3)), "x")
    w = ops.Parameter(bld, 1, xs.Shape.array_shape(f32, (3, 5)), "w")
    b = ops.Parameter(bld, 2, xs.Shape.array_shape(f32, (5,)), "b")
    logits = ops.Add(ops.Dot(x, w), b, broadcast_dimensions=[1])
    peak = ops.Reduce(bld, logits, ops.Constant(bld, f32(-np.inf)), ops.Max, [1])
    e = ops.Exp(ops.Sub(logits, peak, broadcast_dimensions=[0]))
    total = ops.Reduce(bld, e, ops.Constant(bld, f32(0)), ops.Add, [1])
    return bld.build(ops.Div(e, total, broadcast_dimensions=[0]))


def reference(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    logits = x @ w + b
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    out: np.ndarray = e / e.sum(axis=1, keepdims=True)
    return out


def main() -> int:
    out_dir = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="xlasdk-formats-")
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s, dtype=np.float32) for s in ((4, 3), (3, 5), (5,))]

    comp = build()
    want = np.asarray(xs.compile(comp)(*args))
    print(f"built {comp.name}: {comp.program_shape()}")
    ok = bool(np.allclose(want, reference(*args), rtol=1e-5, atol=1e-6))
    print(f"  matches numpy: {ok}")

    for suffix in (".hlo", ".mlir", ".mlirbc", ".pb"):
        path = os.path.join(out_dir, comp.name + suffix)
        comp.save(path)
        loaded = load_computation(path)
        got = np.asarray(xs.compile(loaded)(*args))
        same = bool(np.array_equal(got, want))
        ok &= same
        extra = ""
        if suffix == ".mlirbc":
            with open(path, "rb") as f:
                extra = f", StableHLO v{formats.portable_artifact_version(f.read(64))}"
        print(f"  {os.path.basename(path):<22} {os.path.getsize(path):>6} bytes{extra:<22} "
              f"loaded as {loaded.program_shape()}  identical results: {same}")

    # An older consumer: write the artifact for the StableHLO version of 12 weeks ago.
    old = os.path.join(out_dir, comp.name + ".week12.mlirbc")
    comp.save(old, target_version="WEEK_12")
    with open(old, "rb") as f:
        print(f"  {os.path.basename(old):<22} for StableHLO v{formats.portable_artifact_version(f.read(64))}")

    # A compiled executable: saved once, loaded without compiling.
    exe_path = os.path.join(out_dir, comp.name + ".xlaexe")
    xs.compile(comp).save(exe_path)
    exe = xs.load_executable(exe_path)
    same = bool(np.array_equal(np.asarray(exe(*args)), want))
    ok &= same
    print(f"  {os.path.basename(exe_path):<22} {os.path.getsize(exe_path):>6} bytes  identical results: {same}")

    # A damaged file is an error that names the file, never a crash.
    bad = os.path.join(out_dir, "damaged.mlirbc")
    with open(os.path.join(out_dir, comp.name + ".mlirbc"), "rb") as f:
        data = f.read()
    with open(bad, "wb") as f:
        f.write(data[: len(data) // 2])
    try:
        load_computation(bad)
        ok = False
    except xs.FormatError as e:
        print(f"  damaged file -> FormatError: {e}")

    print("files in", out_dir)
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
