"""Reference rules of linear algebra (``xlasdk/reference/linalg.py``): Cholesky, triangular solves
and batch norms against numpy formulas in float64; the LAPACK custom calls of jaxlib's CPU lowering
(every ``jnp.linalg`` / ``jax.scipy.linalg`` program, as StableHLO and as XLA's optimized HLO)
against numpy's own decompositions (identities such as ``Q R = A``) and against XLA:CPU through
``xs.compare``; convolutions with ``batch_group_count`` against a numpy loop; and the refusals."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jsl = pytest.importorskip("jax.scipy.linalg")
pytest.importorskip("scipy.linalg")

RNG = np.random.default_rng(19)


def _p(b: xs.XlaBuilder, i: int, dt: Any, shape: tuple[int, ...]) -> xs.XlaOp:
    return ops.Parameter(b, i, xs.Shape.array_shape(dt, shape))


def _matrix(shape: tuple[int, ...], dt: Any, spd: bool = False) -> np.ndarray[Any, Any]:
    """Well-conditioned test matrices: ``A A^H + n I`` (Hermitian positive definite) or ``A + n I``."""
    a = RNG.standard_normal(shape)
    if np.dtype(dt).kind == "c":
        a = a + 1j * RNG.standard_normal(shape)
    n = shape[-1]
    eye = np.eye(shape[-2], n)
    out = a @ np.conj(np.swapaxes(a, -1, -2)) + n * eye if spd else a + n * eye
    return np.asarray(out.astype(dt))


def _ok(comp: xs.XlaComputation, *args: Any) -> list[np.ndarray[Any, Any]]:
    """The reference's outputs, after checking that XLA:CPU matches them (no false alarm)."""
    report = xs.compare(comp, list(args))
    assert report.ok, str(report)
    return [o.want for o in report.outputs]  # what xs.evaluate gives (evaluated once here)


# -- stablehlo.cholesky --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_reads_one_triangle_zeroes_the_other_and_gives_nan_when_not_definite(lower: bool) -> None:
    b = xs.XlaBuilder("chol")
    comp = b.build(ops.Cholesky(_p(b, 0, np.float32, (3, 4, 4)), lower))
    a = _matrix((3, 4, 4), np.float32, spd=True)
    want = np.linalg.cholesky(a[:2].astype(np.float64))  # numpy, from the whole Hermitian matrices
    a[:, 0, 3] += 50.0 if lower else 0.0  # garbage in the triangle not read
    a[:, 3, 0] += 0.0 if lower else 50.0
    a[2] = np.diag([1.0, -2.0, 3.0, 4.0]).astype(np.float32)  # not positive definite
    (got,) = _ok(comp, a)
    np.testing.assert_allclose(got[:2], want if lower else np.swapaxes(want, -1, -2), rtol=1e-6, atol=1e-6)
    assert np.all(np.isnan(got[2]))


def test_cholesky_within_rounding_of_singular_is_refused() -> None:
    b = xs.XlaBuilder("chol_edge")
    comp = b.build(ops.Cholesky(_p(b, 0, np.float32, (2, 2)), True))
    a = np.array([[1.0, 1.0], [1.0, 1.0 + 1e-9]], np.float32)  # singular in f32, definite in f64
    with pytest.raises(xs.UnsupportedOpError, match=r"stablehlo.cholesky .*positive definite only within rounding"):
        xs.evaluate(comp, a)


# -- stablehlo.triangular_solve --------------------------------------------------------------------------------------
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose", ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"])
def test_triangular_solve_every_form(left: bool, lower: bool, transpose: str) -> None:
    unit = left != lower  # both, over the cases
    dt = np.complex64 if transpose == "ADJOINT" else np.float32
    a = _matrix((2, 4, 4), dt)
    rhs = _matrix((2, 4, 3) if left else (2, 3, 4), dt)
    b = xs.XlaBuilder("trsv")
    comp = b.build(ops.TriangularSolve(_p(b, 0, dt, a.shape), _p(b, 1, dt, rhs.shape), left, lower, unit, transpose))
    t = (np.tril(a) if lower else np.triu(a)).astype(np.complex128)  # the other triangle is not read
    if unit:
        t[..., range(4), range(4)] = 1.0
    tt = np.swapaxes(t, -1, -2)
    op_t = {"NO_TRANSPOSE": t, "TRANSPOSE": tt, "ADJOINT": np.conj(tt)}[transpose]
    want = np.linalg.solve(op_t, rhs) if left else np.swapaxes(
        np.linalg.solve(np.swapaxes(op_t, -1, -2), np.swapaxes(rhs, -1, -2)), -1, -2)
    (got,) = _ok(comp, a, rhs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# -- batch norms -----------------------------------------------------------------------------------------------------
def test_batch_norms_match_the_formulas_and_xla() -> None:
    x = RNG.standard_normal((4, 3, 5)).astype(np.float32) * 2 + 1
    scale, offset = np.array([0.5, 2.0, -1.0], np.float32), np.array([0.1, -0.3, 2.0], np.float32)
    mean, var = np.array([0.2, 1.0, -0.5], np.float32), np.array([1.5, 0.25, 4.0], np.float32)
    dy = RNG.standard_normal(x.shape).astype(np.float32)
    b = xs.XlaBuilder("bn")
    px, ps, po, pm, pv, pd = (_p(b, i, np.float32, s) for i, s in enumerate([x.shape, (3,), (3,), (3,), (3,),
                                                                                x.shape]))
    train = ops.BatchNormTraining(px, ps, po, 1e-3, 1)
    grad = ops.BatchNormGrad(px, ps, pm, pv, pd, 1e-3, 1)
    comp = b.build([ops.GetTupleElement(train, k) for k in range(3)]
                   + [ops.BatchNormInference(px, ps, po, pm, pv, 1e-3, 1)]
                   + [ops.GetTupleElement(grad, k) for k in range(3)])
    y, bm, bv, inf, gx, gs, go = _ok(comp, x, scale, offset, mean, var, dy)
    x64, sh = x.astype(np.float64), (1, 3, 1)
    m64 = x64.mean(axis=(0, 2))
    v64 = x64.var(axis=(0, 2))  # numpy's biased variance
    np.testing.assert_allclose(bm, m64, rtol=1e-6)
    np.testing.assert_allclose(bv, v64, rtol=1e-6)
    np.testing.assert_allclose(y, (x64 - m64.reshape(sh)) / np.sqrt(v64.reshape(sh) + 1e-3) * scale.reshape(sh)
                               + offset.reshape(sh), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(inf, (x64 - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + 1e-3) * scale.reshape(sh)
                               + offset.reshape(sh), rtol=1e-6, atol=1e-6)
    # the gradient, against JAX's autodiff of the training formula (a test-only peer)
    def loss(xv: Any, sv: Any) -> Any:
        xh = (xv - mean.reshape(sh)) / jnp.sqrt(var.reshape(sh) + 1e-3)
        return jnp.sum(dy * (xh * sv.reshape(sh)))

    jgx, jgs = jax.grad(loss, argnums=(0, 1))(x64, scale.astype(np.float64))
    np.testing.assert_allclose(gs, jgs, rtol=1e-5, atol=1e-5)  # JAX sums in f32 (x64 off)
    np.testing.assert_allclose(go, dy.astype(np.float64).sum(axis=(0, 2)), rtol=1e-5, atol=1e-5)
    n = x.size // 3  # XLA's grad_operand also subtracts the mean's and the variance's dependence on x
    xh = (x64 - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + 1e-3)
    want = scale.reshape(sh) / np.sqrt(var.reshape(sh) + 1e-3) / n * (
        n * dy - dy.sum(axis=(0, 2)).reshape(sh) - xh * (dy * xh).sum(axis=(0, 2)).reshape(sh))
    np.testing.assert_allclose(gx, want, rtol=1e-4, atol=1e-5)


# -- dimension sizes and tokens --------------------------------------------------------------------------------------
def test_dimension_sizes_on_static_shapes() -> None:
    b = xs.XlaBuilder("dims")
    x = _p(b, 0, np.float32, (2, 5))
    n = _p(b, 1, np.int32, ())
    full = ops.SetDimensionSize(x, n, 1)
    comp = b.build([ops.GetDimensionSize(x, 0), ops.GetDimensionSize(full, 1), ops.Neg(full)])
    a = np.arange(10, dtype=np.float32).reshape(2, 5)
    d0, d1, neg = _ok(comp, a, np.int32(5))
    assert (int(d0), int(d1)) == (2, 5)
    np.testing.assert_array_equal(neg, -a)
    with pytest.raises(xs.UnsupportedOpError, match=r"set_dimension_size to size 3 of dimension 1 \(bound 5\)"):
        xs.evaluate(comp, a, np.int32(3))  # XLA:CPU returns a [2, 3] array: dynamic sizes are not followed


def test_tokens_flow_through() -> None:
    from xlasdk.reference.side_effects import TOKEN

    b = xs.XlaBuilder("tokens")
    x = _p(b, 0, np.float32, (3,))
    t = ops.AfterAll(b, [ops.CreateToken(b), ops.CreateToken(b)])
    comp = b.build(ops.Tuple(b, [x, t]))
    got, tok = xs.evaluate(comp, np.ones(3, np.float32))
    np.testing.assert_array_equal(got, np.ones(3, np.float32))
    assert tok is TOKEN and tok.size == 0


# -- LAPACK custom calls ---------------------------------------------------------------------------------------------
def _check_qr(a: Any, out: list[Any]) -> None:
    q, r = out
    np.testing.assert_allclose(q @ r, a, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(r, np.triu(r))


def _check_eigh(a: Any, out: list[Any]) -> None:
    w, v = out
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a.astype(np.complex128)), rtol=1e-5)
    np.testing.assert_allclose(a @ v, v * w[..., None, :], rtol=1e-4, atol=1e-4)


def _check_svd(a: Any, out: list[Any]) -> None:
    u, s, vh = out
    np.testing.assert_allclose(s, np.linalg.svd(a.astype(np.complex128), compute_uv=False), rtol=1e-5)
    np.testing.assert_allclose((u * s[..., None, :]) @ vh, a, rtol=1e-4, atol=1e-4)


def _check_lu(a: Any, out: list[Any]) -> None:
    p, lo, up = out
    np.testing.assert_allclose(p @ lo @ up, a, rtol=1e-5, atol=1e-5)


def _check_eig(a: Any, out: list[Any]) -> None:
    w, v = out
    want = np.linalg.eigvals(a.astype(np.complex128))
    nearest = np.min(np.abs(w[..., :, None] - want[..., None, :]), axis=-1)  # each eigenvalue is one of numpy's
    np.testing.assert_allclose(nearest, 0, atol=1e-4)
    np.testing.assert_allclose(a @ v, v * w[..., None, :], rtol=1e-4, atol=1e-4)


def _check_schur(a: Any, out: list[Any]) -> None:
    t, z = out
    np.testing.assert_allclose(z @ t @ np.conj(z.T), a, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.tril(t, -2), 0, atol=1e-6)  # quasi-triangular (real Schur form)


def _check_hess(a: Any, out: list[Any]) -> None:
    h, q = out
    np.testing.assert_allclose(q @ h @ np.conj(q.T), a, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.tril(h, -2), 0, atol=1e-6)


def _close(oracle: Callable[[Any], Any], rtol: float = 1e-4) -> Callable[[Any, list[Any]], None]:
    def check(a: Any, out: list[Any]) -> None:
        want = oracle(a.astype(np.complex128) if a.dtype.kind == "c" else a.astype(np.float64))
        for g, w in zip(out, want if isinstance(want, tuple) else (want,), strict=True):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)
    return check


# name: (jax function, batched, Hermitian positive definite input, oracle check of its outputs, square only)
PROGRAMS: dict[str, tuple[Callable[..., Any], bool, bool, Callable[[Any, list[Any]], None]]] = {
    "cholesky": (jnp.linalg.cholesky, True, True, _close(np.linalg.cholesky)),
    "qr": (jnp.linalg.qr, True, False, _check_qr),
    "eigh": (jnp.linalg.eigh, True, True, _check_eigh),
    "eigvalsh": (jnp.linalg.eigvalsh, True, True, _close(np.linalg.eigvalsh)),
    "svd": (lambda v: jnp.linalg.svd(v, full_matrices=False), True, False, _check_svd),
    "svdvals": (lambda v: jnp.linalg.svd(v, compute_uv=False), True, False,
                _close(lambda v: np.linalg.svd(v, compute_uv=False))),
    "inv": (jnp.linalg.inv, True, False, _close(np.linalg.inv)),
    "solve": (lambda v: jnp.linalg.solve(v, v[..., :2] + 1), True, False,
              _close(lambda v: np.linalg.solve(v, v[..., :2] + 1))),
    "det": (jnp.linalg.det, True, False, _close(np.linalg.det)),
    "slogdet": (lambda v: tuple(jnp.linalg.slogdet(v)), True, False, _close(lambda v: tuple(np.linalg.slogdet(v)))),
    "lu": (jsl.lu, False, False, _check_lu),
    "eig": (jnp.linalg.eig, True, False, _check_eig),
    "schur": (jsl.schur, False, False, _check_schur),
    "hessenberg": (lambda v: jsl.hessenberg(v, calc_q=True), False, False, _check_hess),
    "pinv": (jnp.linalg.pinv, True, False, _close(np.linalg.pinv)),
    "cho_solve": (lambda v: jsl.cho_solve(jsl.cho_factor(v, lower=True), v[..., :1]), False, True,
                  _close(lambda v: np.linalg.solve(v, v[..., :1]))),
    "tridiagonal": (lambda v: jax.lax.linalg.tridiagonal(v)[1:3], True, True, lambda a, out: None),
}


def _forms(fn: Callable[..., Any], a: np.ndarray[Any, Any], tmp_path: Path) -> list[xs.XlaComputation]:
    """The program as JAX lowers it (StableHLO, the LAPACK calls inside private functions) and as
    XLA:CPU optimized it (HLO, inlined)."""
    lowered = jax.jit(fn).lower(a)
    path = tmp_path / "optimized.hlo"
    path.write_text(lowered.compile().as_text())
    return [xs.XlaComputation.from_stablehlo(lowered.as_text()), xs.load_computation(path)]


@pytest.mark.parametrize("dt", [np.float32, np.complex64])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_lapack_programs_match_numpy_and_xla(name: str, dt: Any, tmp_path: Path) -> None:
    fn, batched, spd, check = PROGRAMS[name]
    if name == "tridiagonal" and dt is np.complex64:
        pytest.skip("hetrd: d and e are real, checked with the float case")
    a = _matrix((2, 4, 4) if batched else (4, 4), dt, spd)
    for comp in _forms(fn, a, tmp_path):
        text = comp.as_hlo_text()
        assert "lapack_" in text and "_ffi" in text, "the program has no LAPACK call: nothing checked"
        got = _ok(comp, a)
        check(a, got)
        want = [np.asarray(v) for v in jax.tree_util.tree_leaves(jax.jit(fn)(a))]
        for g, w in zip(got, want, strict=True):  # the same LAPACK routine: XLA's values, to rounding
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("name", ["cholesky", "qr", "eigh", "svd", "inv", "eig", "schur", "hessenberg", "tridiagonal"])
def test_lapack_double_precision_targets(name: str, tmp_path: Path) -> None:
    fn, batched, spd, check = PROGRAMS[name]
    with jax.enable_x64(True):
        for dt in (np.float64, np.complex128):
            a = _matrix((2, 4, 4) if batched else (4, 4), dt, spd)
            comp = _forms(fn, a, tmp_path)[1]
            assert f"lapack_{'z' if dt is np.complex128 else 'd'}" in comp.as_hlo_text()
            check(a, _ok(comp, a))


def test_lstsq_of_an_overdetermined_system(tmp_path: Path) -> None:
    a = RNG.standard_normal((6, 3)).astype(np.float32)
    rhs = RNG.standard_normal((6, 2)).astype(np.float32)
    lowered = jax.jit(lambda u, v: jnp.linalg.lstsq(u, v)).lower(a, rhs)
    path = tmp_path / "lstsq.hlo"
    path.write_text(lowered.compile().as_text())
    for comp in (xs.XlaComputation.from_stablehlo(lowered.as_text()), xs.load_computation(path)):
        x, resid, rank, s = _ok(comp, a, rhs)
        wx, wr, wrank, ws = np.linalg.lstsq(a.astype(np.float64), rhs.astype(np.float64), rcond=None)
        np.testing.assert_allclose(x, wx, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(resid, wr, rtol=1e-4)
        assert int(rank) == wrank
        np.testing.assert_allclose(s, ws, rtol=1e-5)


# -- fail closed -----------------------------------------------------------------------------------------------------
def _cholesky_text() -> str:
    a = _matrix((4, 4), np.float32, spd=True)
    text: str = jax.jit(jnp.linalg.cholesky).lower(a).as_text()
    assert "lapack_spotrf_ffi" in text and "uplo = 76 : ui8" in text
    return text


def test_unknown_targets_attributes_and_layouts_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from xlasdk.reference import linalg

    a = _matrix((4, 4), np.float32, spd=True)
    text = _cholesky_text()
    bad = text.replace("uplo = 76 : ui8", "uplo = 76 : ui8, blocksize = 8 : i32")
    assert bad != text
    with pytest.raises(xs.UnsupportedOpError, match=r"'lapack_spotrf_ffi' with backend_config .*blocksize"):
        xs.evaluate(xs.XlaComputation.from_stablehlo(bad), a)
    # a target, attribute or layout the kernel's contract refuses does not load (xlasdk.ops.lapack_contracts)
    refused = [
        (text.replace("lapack_spotrf_ffi", "lapack_spotri_ffi"), r"'lapack_spotri_ffi' is a jaxlib LAPACK kernel"),
        (text.replace("uplo = 76 : ui8", "uplo = 88 : ui8"), r"'lapack_spotrf_ffi' needs attribute uplo .* got 88"),
        (text.replace("operand_layouts = [dense<[0, 1]>", "operand_layouts = [dense<[1, 0]>"),
         r"'lapack_spotrf_ffi' needs operand 0 in layout \{0,1\}"),
    ]
    for bad, words in refused:
        assert bad != text
        with pytest.raises(xs.FormatError, match=words):
            xs.XlaComputation.from_stablehlo(bad)
    monkeypatch.setattr(linalg, "_scipy_lapack", lambda: None)
    with pytest.raises(xs.UnsupportedOpError, match=r"lapack_spotrf_ffi' needs scipy .*xlasdk\[reference\]"):
        xs.evaluate(xs.XlaComputation.from_stablehlo(text), a)


# -- convolution with batch_group_count ------------------------------------------------------------------------------
def test_convolution_with_batch_groups_matches_numpy_and_xla() -> None:
    x = RNG.standard_normal((4, 3, 7)).astype(np.float32)  # (N = G * N', C, W), G = 2
    w = RNG.standard_normal((6, 3, 3)).astype(np.float32)  # (O = G * O', C, K)
    fn = lambda u, v: jax.lax.conv_general_dilated(u, v, (1,), "VALID", batch_group_count=2)  # noqa: E731
    comp = xs.XlaComputation.from_stablehlo(jax.jit(fn).lower(x, w).as_text())
    assert "batch_group_count = 2" in comp.as_stablehlo_text()
    (got,) = _ok(comp, x, w)
    want = np.zeros((2, 6, 5))
    for g in range(2):  # the batch group g (batch elements 2g, 2g+1) feeds output features 3g..3g+2
        for n in range(2):
            for o in range(3 * g, 3 * g + 3):
                for p in range(5):
                    want[n, o, p] = np.sum(x[g * 2 + n, :, p:p + 3].astype(np.float64) * w[o])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # the weight gradient of a grouped convolution lowers to one
    xg = RNG.standard_normal((2, 4, 8)).astype(np.float32)
    wg = RNG.standard_normal((6, 2, 3)).astype(np.float32)

    def loss(v: Any) -> Any:
        return jnp.sum(jax.lax.conv_general_dilated(xg, v, (1,), "SAME", feature_group_count=2) ** 2)

    grad = xs.XlaComputation.from_stablehlo(jax.jit(jax.grad(loss)).lower(wg).as_text())
    (gw,) = _ok(grad, wg)
    np.testing.assert_allclose(gw, np.asarray(jax.jit(jax.grad(loss))(wg)), rtol=1e-4, atol=1e-4)
