"""Linear algebra on every platform (issue 43): xlasdk's wrappers (LU, QR, Eigh, SVD, Cholesky,
TriangularSolve) and loaded CPU programs calling jaxlib's LAPACK kernels compile for a TPU
(``v5e:1x1``, compile-only, no chip), and the program the TPU compiles (the compile step's
rewrite, :mod:`xlasdk.runtime._platform_lowering`) gives values that satisfy each decomposition's
identities against numpy: run on the CPU where that form runs there (XLA's own ops and
expanders, LU from ops for f64), evaluated by the reference evaluator where it holds the TPU's
``LuDecomposition`` custom call. The CPU program is the one built, untouched.

Tolerances: every check is a backward error relative to ``max |a|`` (or an orthogonality error),
computed in float64 from the factors. For these matrices (n <= 6, random normal, well
conditioned, pivoted) LU, Householder QR, Cholesky and triangular solves are backward stable with
errors of a few ``n * eps``; Jacobi Eigh/SVD converge to ``eps``-level residuals. ``50 * eps`` of
the element type bounds them with margin and still fails on any wrong pivot, sign or factor
(errors of order 1).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops
from xlasdk.errors import PlatformLoweringError
from xlasdk.runtime._lapack_lowering import lapack_target
from xlasdk.runtime._platform_lowering import for_platform

S = xs.Shape.array_shape
Arr = np.ndarray[Any, Any]
EPS = {np.float32: 1.2e-7, np.complex64: 1.2e-7, np.float64: 2.3e-16, np.complex128: 2.3e-16}
needs_libtpu = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason="libtpu is not installed")


def H(x: Arr) -> Arr:
    return np.conj(np.swapaxes(x, -1, -2))


def rand(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> Arr:
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return np.asarray(x.astype(dtype))


def rel(x: Arr, ref: Arr) -> float:
    return float(np.abs(x - ref).max() / max(float(np.abs(ref).max()), 1e-30))


def eye_err(q: Arr) -> float:
    return float(np.abs(H(q) @ q - np.eye(q.shape[-1])).max())


def tpu_device() -> Any:
    return xs.topology("v5e:1x1").devices[0]


# -- the wrappers: one builder, one program per platform -----------------------------------------------

def _spd(rng: np.random.Generator, shape: tuple[int, ...], dt: Any) -> Arr:
    g = rand(rng, shape, dt)
    return np.asarray((g @ H(g) + shape[-1] * np.eye(shape[-1])).astype(dt))


def _lu_check(a: Arr, out: list[Arr], tol: float) -> None:
    lu, piv, perm = out
    m, n = a.shape[-2:]
    k = min(m, n)
    l_ = np.tril(lu, -1)[..., :, :k] + np.eye(m, k)
    u = np.triu(lu)[..., :k, :]
    assert rel(l_ @ u, np.take_along_axis(a, perm[..., None].astype(np.int64), axis=-2)) < tol
    swapped = np.broadcast_to(np.arange(m), perm.shape).copy()  # the permutation the pivots make
    for idx in np.ndindex(*piv.shape[:-1]):
        for i, j in enumerate(piv[idx]):
            swapped[idx][[i, j]] = swapped[idx][[j, i]]
    np.testing.assert_array_equal(swapped, perm)
    # partial pivoting: |L| <= 1 (complex: LAPACK compares |re| + |im|, so |L| <= sqrt(2))
    assert np.all(np.abs(l_) <= (np.sqrt(2) if np.iscomplexobj(a) else 1) + tol)


def _qr_check(a: Arr, out: list[Arr], tol: float) -> None:
    q, r = out
    assert rel(q @ r, a) < tol and eye_err(q) < tol
    assert np.all(np.tril(r, -1) == 0)


def _eigh_check(a: Arr, out: list[Arr], tol: float) -> None:
    v, w = out
    assert rel((v * w[..., None, :]) @ H(v), a) < tol and eye_err(v) < tol
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), atol=tol * float(np.abs(a).max()))


def _svd_check(a: Arr, out: list[Arr], tol: float) -> None:
    u, s, v = out
    k = s.shape[-1]
    assert rel((u[..., :, :k] * s[..., None, :]) @ H(v[..., :, :k]), a) < tol
    assert eye_err(u) < tol and eye_err(v) < tol
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), atol=tol * float(np.abs(a).max()))


def _cholesky_check(a: Arr, out: list[Arr], tol: float) -> None:
    l_ = np.tril(out[0])
    assert rel(l_ @ H(l_), a) < tol


def _trsm_check(a: Arr, out: list[Arr], tol: float) -> None:
    l_ = np.tril(a)
    b = a[..., :, :3]
    assert rel(l_ @ out[0], b) < tol * np.linalg.cond(l_).max()


Case = tuple[tuple[int, ...], Callable[[xs.XlaOp], Any], Callable[[np.random.Generator, tuple[int, ...], Any], Arr],
             Callable[[Arr, list[Arr], float], None]]
CASES: dict[str, Case] = {
    "LU": ((2, 6, 5), ops.LU, rand, _lu_check),
    "QR": ((2, 6, 4), ops.QR, rand, _qr_check),
    "Eigh": ((2, 5, 5), ops.Eigh, lambda r, s, d: _spd(r, s, d) - 5 * np.eye(s[-1]).astype(d), _eigh_check),
    "SVD": ((2, 6, 4), ops.SVD, rand, _svd_check),
    "Cholesky": ((2, 5, 5), ops.Cholesky, _spd, _cholesky_check),
    "TriangularSolve": ((2, 5, 5), lambda p: ops.TriangularSolve(p, ops.Slice(p, [0, 0, 0], [2, 5, 3], [1, 1, 1])),
                        lambda r, s, d: rand(r, s, d) + 4 * np.eye(s[-1]).astype(d), _trsm_check),
}
PARAMS = [(op, dt) for op in CASES for dt in (np.float32, np.complex64)] + [("LU", np.float64), ("LU", np.complex128)]


def _build(op: str, dt: Any) -> xs.XlaComputation:
    shape, fn, _, _ = CASES[op]
    b = xs.XlaBuilder(op.lower())
    out = fn(ops.Parameter(b, 0, S(dt, shape)))
    return b.build(ops.Tuple(b, list(out)) if isinstance(out, tuple) else out)


@pytest.mark.parametrize(("op", "dt"), PARAMS, ids=[f"{o}-{np.dtype(d).name}" for o, d in PARAMS])
def test_the_tpu_form_gives_the_decomposition(op: str, dt: Any) -> None:
    comp = _build(op, dt)
    tpu = for_platform(comp, "tpu")
    text = tpu.as_stablehlo_text()
    assert "lapack_" not in text
    shape, _, make, check = CASES[op]
    a = make(np.random.default_rng(43), shape, dt)
    if "LuDecomposition" in text:  # the TPU's own LU: no CPU kernel, the reference evaluates it
        assert op == "LU" and dt in (np.float32, np.complex64)
        got = xs.reference.evaluate(tpu, a)
    else:  # XLA's ops and expanders: run on the CPU as the TPU compiles them
        got = xs.compile(tpu, device="cpu:0")(a)
    outs = [np.asarray(g) for g in (got if isinstance(got, (list, tuple)) else [got])]
    check(a.astype(np.complex128 if np.dtype(dt).kind == "c" else np.float64), outs, 50 * EPS[dt])
    if op != "LU":
        assert tpu is comp  # nothing platform-specific to lower: the program built


def test_the_cpu_program_is_the_one_built() -> None:
    comp = _build("LU", np.float32)
    assert for_platform(comp, "cpu") is comp
    assert "lapack_sgetrf_ffi" in comp.as_stablehlo_text()
    a = rand(np.random.default_rng(1), (2, 6, 5), np.float32)
    got = xs.compile(comp, device="cpu:0")(a)  # LAPACK's getrf, bit for bit the reference's
    want = xs.reference.evaluate(comp, a)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@needs_libtpu
@pytest.mark.parametrize(("op", "dt"), PARAMS, ids=[f"{o}-{np.dtype(d).name}" for o, d in PARAMS])
def test_the_wrappers_compile_for_a_tpu(op: str, dt: Any) -> None:
    """Before: LU failed, "Custom emitter for lapack_sgetrf_ffi not found" (f64/c128: XLA's X64 rewriter).
    XLA:TPU of libtpu 0.0.42 dies on c128 programs (its precision rewriter, as on the op suite's
    c128 Cholesky): skipped there naming the release, run where libtpu compiles them (0.0.52)."""
    try:
        exe = xs.compile(_build(op, dt), device=tpu_device())
    except xs.UnsupportedOnDeviceError as e:  # the capability table's row for this release (c128 on 0.0.42)
        if dt is not np.complex128:
            raise
        pytest.skip(f"capability table: {e}")
    except xs.CompileError as e:
        if dt is not np.complex128 or "XLA aborted" not in str(e):
            raise
        from tests.xla_faults import release

        pytest.skip(f"XLA:TPU of {release()} dies compiling c128 linear algebra: {str(e)[-160:]}")
    assert "lapack_" not in exe.hlo_text()


# -- loaded CPU programs (JAX's jnp.linalg lowered for the CPU) -------------------------------------------

_COL = "dense<[0, 1]> : tensor<2xindex>"
_VEC = "dense<0> : tensor<1xindex>"
_SCALAR = "dense<> : tensor<0xindex>"


def _module(target: str, operands: list[str], results: list[str], config: str, layouts: tuple[list[str], list[str]],
            ) -> str:
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(operands))
    refs = ", ".join(f"%a{i}" for i in range(len(operands)))
    n = len(results)
    res = f"%0:{n}" if n > 1 else "%0"
    outs = ", ".join(f"%0#{i}" for i in range(n)) if n > 1 else "%0"
    return (f"func.func @main({args}) -> ({', '.join(results)}) {{\n"
            f"  {res} = stablehlo.custom_call @{target}({refs}) {{api_version = 4 : i32, "
            f"backend_config = {{{config}}}, "
            f"operand_layouts = [{', '.join(layouts[0])}], result_layouts = [{', '.join(layouts[1])}]}} : "
            f"({', '.join(operands)}) -> ({', '.join(results)})\n"
            f"  return {outs} : {', '.join(results)}\n}}\n")


M44, M53, M33, M55 = "tensor<4x4xf32>", "tensor<5x3xf32>", "tensor<3x3xf32>", "tensor<5x5xf32>"
LOADED: dict[str, tuple[str, Callable[[np.random.Generator], list[Arr]], Callable[[list[Arr], list[Arr]], None]]] = {
    "potrf": (_module("lapack_spotrf_ffi", [M44], [M44, "tensor<i32>"], "uplo = 76 : ui8", ([_COL], [_COL, _SCALAR])),
              lambda r: [_spd(r, (4, 4), np.float32)],
              lambda a, o: (_cholesky_check(a[0], [o[0]], 50 * EPS[np.float32]), o[1] == 0)),
    "trsm": (_module("lapack_strsm_ffi", [M44, "tensor<4x3xf32>"], ["tensor<4x3xf32>"],
                     "diag = 78 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 76 : ui8", ([_COL, _COL], [_COL])),
             lambda r: [rand(r, (4, 4), np.float32) + 4 * np.eye(4, dtype=np.float32), rand(r, (4, 3), np.float32)],
             lambda a, o: None if rel(np.tril(a[0]) @ o[0], a[1]) < 500 * EPS[np.float32] else pytest.fail("trsm")),
    "geqrf": (_module("lapack_sgeqrf_ffi", [M53], [M53, "tensor<3xf32>"], "", ([_COL], [_COL, _VEC])),
              lambda r: [rand(r, (5, 3), np.float32)], lambda a, o: None),  # checked with orgqr below
    "syevd": (_module("lapack_ssyevd_ffi", [M44], [M44, "tensor<4xf32>", "tensor<i32>"],
                      "mode = 86 : ui8, uplo = 76 : ui8", ([_COL], [_COL, _VEC, _SCALAR])),
              lambda r: [_spd(r, (4, 4), np.float32)],
              lambda a, o: _eigh_check(a[0], [o[0], o[1]], 50 * EPS[np.float32])),
    "gesdd": (_module("lapack_sgesdd_ffi", [M53], [M53, "tensor<3xf32>", M55, M33, "tensor<i32>"], "mode = 65 : ui8",
                      ([_COL], [_COL, _VEC, _COL, _COL, _SCALAR])),
              lambda r: [rand(r, (5, 3), np.float32)],
              lambda a, o: _svd_check(a[0], [o[2], o[1], H(o[3])], 50 * EPS[np.float32])),
}


@pytest.mark.parametrize("routine", list(LOADED))
def test_a_loaded_cpu_program_gets_the_tpu_form(routine: str) -> None:
    text, make, check = LOADED[routine]
    comp = xs.XlaComputation.from_stablehlo(text)
    tpu = for_platform(comp, "tpu")
    assert "lapack_" not in tpu.as_stablehlo_text()
    args = make(np.random.default_rng(7))
    out = xs.compile(tpu, device="cpu:0")(*args)  # XLA's ops: they run on the CPU too
    got = [np.asarray(g) for g in (out if isinstance(out, (list, tuple)) else [out])]
    check([x.astype(np.float64) for x in args], got)
    if routine == "geqrf":  # R and the reflectors: Q R = a with Q from XLA's product of reflectors
        qr_text = _module("lapack_sorgqr_ffi", [M53, "tensor<3xf32>"], [M53], "", ([_COL, _VEC], [_COL]))
        q = np.asarray(xs.compile(for_platform(xs.XlaComputation.from_stablehlo(qr_text), "tpu"),
                                  device="cpu:0")(got[0], got[1]))
        _qr_check(args[0].astype(np.float64), [q, np.triu(got[0][:3])], 50 * EPS[np.float32])


def test_a_loaded_lu_gets_the_tpus_lu() -> None:
    comp = xs.XlaComputation.from_stablehlo(_build("LU", np.float32).as_stablehlo_text())
    tpu = for_platform(comp, "tpu")
    assert "LuDecomposition" in tpu.as_stablehlo_text()
    a = rand(np.random.default_rng(3), (2, 6, 5), np.float32)
    _lu_check(a.astype(np.float64), [np.asarray(g) for g in xs.reference.evaluate(tpu, a)], 50 * EPS[np.float32])


def test_lapack_info_of_a_singular_matrix_is_the_first_zero_pivot() -> None:
    """getrf's info: the (1-based) column of U's first zero diagonal entry, as LAPACK says."""
    b = xs.XlaBuilder("getrf")
    p = ops.Parameter(b, 0, S(np.float32, (4, 4)))
    text = _module("lapack_sgetrf_ffi", [M44], [M44, "tensor<4xi32>", "tensor<i32>"], "",
                   ([_COL], [_COL, _VEC, _SCALAR]))
    del b, p
    comp = xs.XlaComputation.from_stablehlo(text)
    a = np.array([[1, 2, 3, 4], [2, 4, 6, 8], [0, 0, 1, 0], [0, 0, 0, 1]], np.float32)  # rank 3: U[1, 1] = 0
    cpu = [np.asarray(g) for g in xs.compile(comp, device="cpu:0")(a)]
    tpu = [np.asarray(g) for g in xs.reference.evaluate(for_platform(comp, "tpu"), a)]
    assert int(cpu[2]) == int(tpu[2]) == 2
    np.testing.assert_array_equal(cpu[1], tpu[1])  # 1-based pivots both


@needs_libtpu
@pytest.mark.parametrize("routine", ["getrf", *LOADED])
def test_a_loaded_cpu_program_compiles_for_a_tpu(routine: str) -> None:
    text = _build("LU", np.float32).as_stablehlo_text() if routine == "getrf" else LOADED[routine][0]
    xs.compile(xs.XlaComputation.from_stablehlo(text), device=tpu_device())


def test_a_kernel_the_tpu_has_no_form_of_is_refused_naming_it() -> None:
    text = _module("lapack_sgeev_ffi", [M44],
                   ["tensor<4xf32>", "tensor<4xf32>", "tensor<4x4xcomplex<f32>>", "tensor<4x4xcomplex<f32>>",
                    "tensor<i32>"], "compute_left = 78 : ui8, compute_right = 86 : ui8",
                   ([_COL], [_VEC, _VEC, _COL, _COL, _SCALAR]))
    comp = xs.XlaComputation.from_stablehlo(text)
    with pytest.raises(PlatformLoweringError, match=r"'lapack_sgeev_ffi' .* cannot be compiled for tpu"):
        for_platform(comp, "tpu")
    with pytest.raises(xs.CompileError, match="lapack_sgeev_ffi"):
        for_platform(comp, "cuda")
    assert for_platform(comp, "cpu") is comp


def test_a_call_inside_a_loop_is_refused_not_left_to_xla() -> None:
    from xlasdk.ops.special import while_loop

    b = xs.XlaBuilder("loop")
    a = ops.Parameter(b, 0, S(np.float32, (3, 3)))
    i0 = ops.Constant(b, np.int32(0))
    _, out = while_loop([i0, a], lambda v: ops.Lt(v[0], 2), lambda v: [v[0] + 1, ops.LU(v[1])[0]])
    with pytest.raises(PlatformLoweringError, match="lapack_sgetrf_ffi.*inside a loop body"):
        for_platform(b.build(out), "tpu")


def test_a_loaded_lu_hlo_text_compiles_for_a_tpu() -> None:
    """ops.LU written as HLO text and loaded: its tuple-result custom call (another op row than a
    built one's) is found and lowered, not refused as out of reach."""
    comp = xs.XlaComputation.from_hlo_text(_build("LU", np.float32).as_hlo_text())
    tpu = for_platform(comp, "tpu")
    assert "lapack_" not in tpu.as_stablehlo_text() and "LuDecomposition" in tpu.as_stablehlo_text()
    a = rand(np.random.default_rng(5), (2, 6, 5), np.float32)
    _lu_check(a.astype(np.float64), [np.asarray(g) for g in xs.reference.evaluate(tpu, a)], 50 * EPS[np.float32])
    if importlib.util.find_spec("libtpu") is not None:
        xs.compile(comp, device=tpu_device())


def _jax_cases() -> dict[str, tuple[Callable[..., Any], Callable[[np.random.Generator], list[Arr]],
                                    Callable[[list[Arr], list[Arr], float], None]]]:
    jnp = pytest.importorskip("jax.numpy")
    jsl = pytest.importorskip("jax.scipy.linalg")

    def spd(rng: np.random.Generator) -> list[Arr]:
        return [_spd(rng, (5, 5), np.float32)]

    def solve(args: list[Arr], out: list[Arr], tol: float) -> None:
        a, b = args
        assert rel(a @ out[0], b) < tol * np.linalg.cond(a)

    def lu_factor(args: list[Arr], out: list[Arr], tol: float) -> None:
        lu, piv = out
        perm = np.arange(5)
        for i, j in enumerate(piv):
            perm[[i, j]] = perm[[j, i]]
        _lu_check(args[0], [lu, piv, perm], tol)

    return {
        "solve": (jnp.linalg.solve, lambda r: [rand(r, (5, 5), np.float32), rand(r, (5, 2), np.float32)], solve),
        "cholesky": (jnp.linalg.cholesky, spd, lambda a, o, t: _cholesky_check(a[0], o, t)),
        "qr": (jnp.linalg.qr, lambda r: [rand(r, (5, 4), np.float32)], lambda a, o, t: _qr_check(a[0], o, t)),
        "eigh": (jnp.linalg.eigh, spd, lambda a, o, t: _eigh_check(a[0], [o[1], o[0]], t)),
        "lu_factor": (jsl.lu_factor, lambda r: [rand(r, (5, 5), np.float32)], lu_factor),
    }


@pytest.mark.parametrize("name", ["solve", "cholesky", "qr", "eigh", "lu_factor"])
def test_a_jax_cpu_dump_of_jnp_linalg_gets_the_tpu_form(name: str) -> None:
    """JAX's CPU dumps of jnp.linalg call the LAPACK kernel inside a private function (HLO
    ``call`` to ``cholesky.1``...): the call is lowered there too, the program compiles for a TPU
    and its values satisfy the decomposition."""
    jax = pytest.importorskip("jax")
    f, make, check = _jax_cases()[name]
    args = make(np.random.default_rng(11))
    text = jax.jit(f).lower(*args).as_text(dialect="hlo")
    assert "lapack_" in text
    comp = xs.XlaComputation.from_hlo_text(text)
    tpu = for_platform(comp, "tpu")
    lowered = tpu.as_stablehlo_text()
    assert [t for op in _called_ops(tpu) if (t := lapack_target(op)) is not None] == []
    got: Any
    if "LuDecomposition" in lowered:  # the TPU's own LU: the reference evaluator computes it
        got = xs.reference.evaluate(tpu, *args)
    else:  # XLA's ops and expanders: run on the CPU as the TPU compiles them
        got = xs.compile(tpu, device="cpu:0")(*args)
    outs = [np.asarray(g) for g in (got if isinstance(got, (list, tuple)) else [got])]
    check([a.astype(np.float64) for a in args], outs, 50 * EPS[np.float32])
    if importlib.util.find_spec("libtpu") is not None:
        xs.compile(comp, device=tpu_device())


def _called_ops(comp: xs.XlaComputation) -> list[Any]:
    """Every op of ``comp``'s main and of the functions it calls."""
    from xlasdk.runtime.capabilities import every_called_op

    return [op for op, _ in every_called_op(comp.instruction_graph())]
