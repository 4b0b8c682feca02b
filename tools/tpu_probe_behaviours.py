"""Record what a device computes where it defines a value otherwise than XLA:CPU (the BEHAVIOURS rows of
xlasdk.runtime.capabilities): each probe program runs on DEVICE and on cpu:0 with the same inputs,
and every input, both outputs and the elements where they differ are written to OUT.

    python tools/tpu_probe_behaviours.py [--device tpu:0] [--out DIR]

OUT/behaviours.npz (PROBE.in, PROBE.device, PROBE.cpu) and OUT/behaviours.txt (per probe: how many
elements differ, and the first few as "input -> device / cpu").
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import ml_dtypes
import numpy as np

import xlasdk as xs
from xlasdk import ops


def unary(name: str, x: np.ndarray, fn: Callable[[xs.XlaOp], xs.XlaOp]) -> tuple[str, xs.XlaComputation, np.ndarray]:
    b = xs.XlaBuilder(name)
    p = ops.Parameter(b, 0, xs.Shape.array_shape(x.dtype, x.shape), "x")
    return name, b.build(fn(p)), x


def probes() -> list[tuple[str, xs.XlaComputation, np.ndarray]]:
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 3e9, -3e9, 1e20, -1e20, 2.5e9, 4.3e9, -0.5, 0.7,
                         127.5, 128.0, -129.0, 255.9, 256.0, 32768.0, -32769.0, 65536.0, 2147483520.0,
                         2147483648.0, -2147483904.0, 9.3e18, -9.3e18, 2.9, -2.9, -2147483648.0], np.float32)
    out = []
    for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
        out.append(unary(f"f32_to_{np.dtype(t).name}", specials,
                         lambda p, t=t: ops.ConvertElementType(p, np.dtype(t))))
    grid = np.concatenate([np.linspace(-500, 500, 4001, dtype=np.float32),
                           np.array([1e-3, 1e-6, 3e-3, 0.0137, 448.0, 464.0, 480.0, 57344.0, 61440.0, 465.0, 1000.0,
                                     -1000.0, np.inf, -np.inf, np.nan, 2.0**-9, 2.0**-10, 0.0029296875, -0.0,
                                     2.0**-7 * 1.0625, 2.0**-8 * 1.5, 2.0**-16, 2.0**-17, 1.5 * 2.0**-16], np.float32)])
    for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2):
        out.append(unary(f"f32_to_{np.dtype(t).name}", grid,
                         lambda p, t=t: ops.ConvertElementType(p, np.dtype(t))))
    for t in (ml_dtypes.int4, np.int8, np.int16):
        info = ml_dtypes.iinfo(t) if t is ml_dtypes.int4 else np.iinfo(t)
        x = np.arange(info.min, info.max + 1).astype(t)
        out.append(unary(f"popcnt_{np.dtype(t).name}", x, ops.PopulationCount))
    rng = np.random.default_rng(0)
    for t in (np.float32, np.float16, ml_dtypes.bfloat16):
        a = (rng.standard_normal(2048) * 1e3).astype(t)
        bb = (rng.standard_normal(2048) * 3).astype(t)
        b = xs.XlaBuilder(f"rem_{np.dtype(t).name}")
        pa = ops.Parameter(b, 0, xs.Shape.array_shape(a.dtype, a.shape), "a")
        pb = ops.Constant(b, bb)
        out.append((f"rem_{np.dtype(t).name}", b.build(ops.Rem(pa, pb)), a))
    return out


UNARY_ULPS = ("Exp", "Exp2", "Log2", "Expm1", "Log", "Log1p", "Sqrt", "Rsqrt", "Cbrt", "Tanh", "Logistic", "Sin",
              "Cos", "Tan", "Erf", "Erfc", "ErfInv", "Lgamma", "Digamma", "Acos", "Asin", "Atan", "Acosh", "Asinh",
              "Atanh", "Cosh", "Sinh", "BesselI1e")
BINARY_ULPS = ("Pow", "Atan2", "Div", "Polygamma", "Zeta")


def ulps_grid() -> np.ndarray:
    """f32 operands over many scales, both signs: where an op is undefined the f64 oracle says NaN
    and the element is not counted."""
    mags = np.concatenate([np.logspace(-30, 30, 3001), np.linspace(0, 12, 3001)[1:], [1.0, 2.0, 0.5, 10.0]])
    return np.concatenate([mags, -mags, [0.0]]).astype(np.float32)


def ulps_error(dev: np.ndarray, ref64: np.ndarray) -> tuple[float, float, float, int, int, int]:
    """(max and 99.9th percentile f32 ulps of dev from the f64 oracle, the max absolute error where
    |oracle| < 1, elements counted, elements whose finiteness differs, the operand index of the max).
    Counted: where the oracle is a normal f32 (XLA flushes subnormal results to zero)."""
    ref = ref64.astype(np.float32)
    ok = np.isfinite(ref) & (np.abs(ref) >= np.finfo(np.float32).tiny)
    bad_finite = int(np.count_nonzero(np.isfinite(ref) & ~np.isfinite(dev)))
    use = ok & np.isfinite(dev)
    ulp = np.spacing(np.abs(ref[use]).astype(np.float32)).astype(np.float64)
    diff = np.abs(dev[use].astype(np.float64) - ref64[use])
    err = diff / ulp
    if err.size == 0:
        return 0.0, 0.0, 0.0, 0, bad_finite, -1
    small = np.abs(ref64[use]) < 1
    i = int(np.argmax(err))
    return (float(err[i]), float(np.percentile(err, 99.9)), float(diff[small].max()) if small.any() else 0.0,
            int(use.sum()), bad_finite, int(np.flatnonzero(use)[i]))


def ulps_lines(device: str, saved: dict[str, np.ndarray]) -> list[str]:
    """The f32 error of each transcendental op on ``device``, in ulps of the f64 result (XLA:CPU's f64)."""
    x = ulps_grid()
    lines = []
    for name in UNARY_ULPS + BINARY_ULPS:
        fn = getattr(ops, name)
        two = name in BINARY_ULPS
        if two:
            rng = np.random.default_rng(1)
            a = x[rng.permutation(x.size)]
            y = (np.round(np.abs(x) % 6) if name == "Polygamma" else x).astype(np.float32)
            if name == "Zeta":
                a = np.abs(a) + 1.0
            args = (y, a) if name == "Polygamma" else (a, y)
        else:
            args = (x,)
        def build(dt: type, name: str = name, fn: Callable[..., xs.XlaOp] = fn,
                  args: tuple[np.ndarray, ...] = args) -> xs.XlaComputation:
            b = xs.XlaBuilder(f"ulps_{name}_{np.dtype(dt).name}")
            ps = [ops.Parameter(b, i, xs.Shape.array_shape(np.dtype(dt), v.shape), f"p{i}")
                  for i, v in enumerate(args)]
            return b.build(fn(*ps))
        try:
            dev = np.asarray(xs.compile(build(np.float32), device=device)(*args).to_numpy())
            wide = tuple(v.astype(np.float64) for v in args)
            ref = np.asarray(xs.compile(build(np.float64), device="cpu:0")(*wide).to_numpy())
        except Exception as e:
            lines.append(f"ulps {name}: ERROR {type(e).__name__}: {str(e).splitlines()[0][:300]}")
            continue
        worst, p999, absmax, n, nonfinite, at = ulps_error(dev, ref)
        where = "" if at < 0 else (f" at {', '.join(repr(float(v[at])) for v in args)}: "
                                    f"{float(dev[at])!r} vs {float(ref[at])!r}")
        lines.append(f"ulps {name}: max {worst:.1f}, 99.9% {p999:.1f}, abs below 1 {absmax:.3g} over {n} elements; "
                     f"{nonfinite} not finite where f64 is{where}")
        for i, v in enumerate(args):
            saved[f"ulps_{name}.in{i}"] = v
        saved[f"ulps_{name}.device"], saved[f"ulps_{name}.f64"] = dev, ref
    return lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="tpu:0")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/probe"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    saved: dict[str, np.ndarray] = {}
    lines = []
    for name, comp, x in probes():
        try:
            dev = np.asarray(xs.compile(comp, device=a.device)(x).to_numpy())
            cpu = np.asarray(xs.compile(comp, device="cpu:0")(x).to_numpy())
        except Exception as e:  # a probe the device refuses is a finding too
            lines.append(f"{name}: ERROR {type(e).__name__}: {str(e).splitlines()[0][:300]}")
            continue
        saved[f"{name}.in"], saved[f"{name}.device"], saved[f"{name}.cpu"] = x, dev, cpu
        same = (dev.view(np.uint8).reshape(dev.shape + (-1,)) == cpu.view(np.uint8).reshape(cpu.shape + (-1,))).all(-1)
        bad = np.flatnonzero(~same)
        first = "; ".join(f"{x.ravel()[i]!r} -> {dev.ravel()[i]!r} / {cpu.ravel()[i]!r}" for i in bad[:12])
        lines.append(f"{name}: {bad.size} of {same.size} differ{': ' + first if bad.size else ''}")
    lines += ulps_lines(a.device, saved)
    np.savez(os.path.join(a.out, "behaviours.npz"), **saved)
    with open(os.path.join(a.out, "behaviours.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
