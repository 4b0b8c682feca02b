"""Run xlasdk's linear algebra on a TPU against numpy: one verdict line per op (issue 43).

Usage, on a TPU machine from the project root (jaxlib, libtpu, numpy and xlasdk only; no jax,
no pytest)::

    PYTHONPATH=$PYTHONPATH:$PWD python3 tools/tpu_linalg_check.py --out DIR [--device tpu:0]

Each op (LU, QR, Eigh, SVD, Cholesky, TriangularSolve in f32; LU in f64 through the from-ops LU the
TPU gets for it, when the platform compiles f64) is built with xlasdk's wrappers, compiled for the
device (the compile step lowers LAPACK calls to the platform's forms), run on random well
conditioned matrices (a batch of 2, sizes 6x5 to 64x64), and its factors checked in float64
against the decomposition's identities (``P A = L U``, ``Q R = A`` with ``Q^H Q = I``,
``V diag(w) V^H = A``, ``U diag(s) V^H = A``, ``L L^H = A``, ``L X = B``) and numpy's eigen- and
singular values. The bound is ``TOL_ULPS * n * eps`` relative to ``max |A|`` (the backward
error of these algorithms grows like ``n * eps``; ``TOL_ULPS`` leaves room for the TPU's f32
arithmetic), the measured error printed beside it. ``DIR/linalg.json`` holds every figure;
``DIR/linalg.txt`` the lines printed. Exit status 0 when every op passes, 1 otherwise. Runs in well
under 2 minutes (one process, a few seconds of compiles per op).

``--device cpu:0`` runs the same checks on the CPU (LAPACK), to try the script anywhere.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

import xlasdk as xs  # noqa: E402
from xlasdk import ops  # noqa: E402

Arr = np.ndarray[Any, Any]
TOL_ULPS = 64.0


def H(x: Arr) -> Arr:
    return np.conj(np.swapaxes(x, -1, -2))


def rel(x: Arr, ref: Arr) -> float:
    return float(np.abs(x - ref).max() / max(float(np.abs(ref).max()), 1e-30))


def eye_err(q: Arr) -> float:
    return float(np.abs(H(q) @ q - np.eye(q.shape[-1])).max())


def _lu(a: Arr, out: list[Arr]) -> dict[str, float]:
    lu, piv, perm = out
    m, n = a.shape[-2:]
    k = min(m, n)
    low = np.tril(lu, -1)[..., :, :k] + np.eye(m, k)
    up = np.triu(lu)[..., :k, :]
    swapped = np.broadcast_to(np.arange(m), perm.shape).copy()
    for idx in np.ndindex(*piv.shape[:-1]):
        for i, j in enumerate(piv[idx]):
            swapped[idx][[i, j]] = swapped[idx][[j, i]]
    return {"|LU-PA|": rel(low @ up, np.take_along_axis(a, perm[..., None].astype(np.int64), axis=-2)),
            "pivots!=perm": float(np.any(swapped != perm)), "max|L|-1": max(float(np.abs(low).max()) - 1, 0.0)}


def _qr(a: Arr, out: list[Arr]) -> dict[str, float]:
    q, r = out
    return {"|QR-A|": rel(q @ r, a), "|QhQ-I|": eye_err(q), "|tril(R)|": float(np.abs(np.tril(r, -1)).max())}


def _eigh(a: Arr, out: list[Arr]) -> dict[str, float]:
    v, w = out
    scale = float(np.abs(a).max())
    return {"|VwVh-A|": rel((v * w[..., None, :]) @ H(v), a), "|VhV-I|": eye_err(v),
            "|w-numpy|": float(np.abs(w - np.linalg.eigvalsh(a)).max()) / scale}


def _svd(a: Arr, out: list[Arr]) -> dict[str, float]:
    u, s, v = out
    k = s.shape[-1]
    scale = float(np.abs(a).max())
    return {"|USVh-A|": rel((u[..., :, :k] * s[..., None, :]) @ H(v[..., :, :k]), a), "|UhU-I|": eye_err(u),
            "|VhV-I|": eye_err(v), "|s-numpy|": float(np.abs(s - np.linalg.svd(a, compute_uv=False)).max()) / scale}


def _cholesky(a: Arr, out: list[Arr]) -> dict[str, float]:
    low = np.tril(out[0])
    return {"|LLh-A|": rel(low @ H(low), a)}


def _trsm(a: Arr, out: list[Arr]) -> dict[str, float]:
    low, b = np.tril(a), a[..., :, :3]
    return {"|LX-B|/cond": rel(low @ out[0], b) / float(np.linalg.cond(low).max())}


def _random(shape: tuple[int, ...], dt: Any, rng: np.random.Generator) -> Arr:
    return np.asarray(rng.standard_normal(shape).astype(dt))


def _spd(shape: tuple[int, ...], dt: Any, rng: np.random.Generator) -> Arr:
    g = rng.standard_normal(shape)
    return np.asarray((g @ H(g) + shape[-1] * np.eye(shape[-1])).astype(dt))


def _sym(shape: tuple[int, ...], dt: Any, rng: np.random.Generator) -> Arr:
    g = rng.standard_normal(shape)
    return np.asarray(((g + H(g)) / 2).astype(dt))


def _triangular(shape: tuple[int, ...], dt: Any, rng: np.random.Generator) -> Arr:
    return np.asarray((rng.standard_normal(shape) + 2 * np.sqrt(shape[-1]) * np.eye(shape[-1])).astype(dt))


def _trsm_op(p: Any) -> Any:
    d = p.shape.dimensions()
    return ops.TriangularSolve(p, ops.Slice(p, [0] * len(d), [*d[:-1], 3], [1] * len(d)))


#: name -> (dtype, shape, wrapper, input maker, identity check)
Case = tuple[str, Any, tuple[int, ...], Callable[[Any], Any], Callable[..., Arr], Callable[..., dict[str, float]]]
CASES: list[Case] = [
    ("LU", np.float32, (2, 64, 48), ops.LU, _random, _lu),
    ("LU", np.float32, (2, 6, 5), ops.LU, _random, _lu),
    ("QR", np.float32, (2, 64, 48), ops.QR, _random, _qr),
    ("Eigh", np.float32, (2, 32, 32), ops.Eigh, _sym, _eigh),
    ("SVD", np.float32, (2, 40, 24), ops.SVD, _random, _svd),
    ("Cholesky", np.float32, (2, 64, 64), ops.Cholesky, _spd, _cholesky),
    ("TriangularSolve", np.float32, (2, 64, 64), _trsm_op, _triangular, _trsm),
    ("LU", np.float64, (2, 6, 5), ops.LU, _random, _lu),
]


def run_case(device: Any, name: str, dt: Any, shape: tuple[int, ...], fn: Callable[[Any], Any],
             make: Callable[..., Arr], check: Callable[..., dict[str, float]]) -> dict[str, Any]:
    rng = np.random.default_rng(43)
    b = xs.XlaBuilder(name.lower())
    out = fn(ops.Parameter(b, 0, xs.Shape.array_shape(dt, shape)))
    comp = b.build(ops.Tuple(b, list(out)) if isinstance(out, tuple) else out)
    a = make(shape, dt, rng)
    t0 = time.perf_counter()
    exe = xs.compile(comp, device=device)
    t1 = time.perf_counter()
    got = exe(a)
    outs = [np.asarray(g) for g in (got if isinstance(got, (list, tuple)) else [got])]
    t2 = time.perf_counter()
    errors = check(a.astype(np.float64), outs)
    tol = TOL_ULPS * shape[-1] * float(np.finfo(dt).eps)
    worst = max(v for k, v in errors.items() if k != "pivots!=perm")
    ok = worst <= tol and errors.get("pivots!=perm", 0.0) == 0.0
    return {"op": name, "dtype": np.dtype(dt).name, "shape": list(shape), "ok": ok, "tol": tol, "errors": errors,
            "compile_s": round(t1 - t0, 3), "run_s": round(t2 - t1, 3),
            "custom_calls": sorted({w for w in ("LuDecomposition", "lapack_", "Qr", "cholesky", "triangular-solve")
                                    if w in exe.hlo_text()})}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="directory for linalg.json and linalg.txt")
    ap.add_argument("--device", default="tpu:0", help="the device to run on (default tpu:0)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    device = xs.device(args.device) if hasattr(xs, "device") else args.device
    lines = [f"xlasdk linear algebra on {device} (jaxlib {xs.jaxlib_version_info().release})"]
    print(lines[0], flush=True)
    rows = []
    for name, dt, shape, fn, make, check in CASES:
        label = f"{name} {np.dtype(dt).name} {'x'.join(map(str, shape))}"
        try:
            row = run_case(device, name, dt, shape, fn, make, check)
            errs = " ".join(f"{k}={v:.2e}" for k, v in row["errors"].items())
            line = (f"{'PASS' if row['ok'] else 'FAIL'} {label}: {errs} (tol {row['tol']:.1e}; compile "
                    f"{row['compile_s']:.1f}s, run {row['run_s']:.3f}s)")
        except Exception as e:  # one op's failure is its verdict; the others still run
            row = {"op": name, "dtype": np.dtype(dt).name, "shape": list(shape), "ok": False,
                   "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
            line = f"FAIL {label}: {type(e).__name__}: {str(e)[:300]}"
        rows.append(row)
        lines.append(line)
        print(line, flush=True)
    passed = sum(bool(r["ok"]) for r in rows)
    lines.append(f"{passed}/{len(rows)} passed in {time.perf_counter() - start:.1f}s")
    print(lines[-1], flush=True)
    (out / "linalg.json").write_text(json.dumps({"device": str(device), "rows": rows}, indent=1, default=str))
    (out / "linalg.txt").write_text("\n".join(lines) + "\n")
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
