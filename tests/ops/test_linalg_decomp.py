"""Cholesky, TriangularSolve, QR, Eigh and SVD checked by reconstruction (and against numpy's
eigenvalues and singular values), for f32, f64, c64 and c128, with batch dimensions, odd and
even sizes, rank-deficient, zero, repeated-eigenvalue and badly scaled matrices; and errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import raises, run, skip_where_device_defines_otherwise
from xlasdk import ops
from xlasdk.errors import DTypeError, ShapeError

S = xs.Shape.array_shape
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
EPS = {np.float32: 1.2e-7, np.complex64: 1.2e-7, np.float64: 2.3e-16, np.complex128: 2.3e-16}
T = ops.TriangularSolveOptions_Transpose


def H(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return np.conj(np.swapaxes(x, -1, -2))


def rand(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray[Any, Any]:
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def hermitian(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray[Any, Any]:
    x = rand(rng, shape, dtype)
    out: np.ndarray[Any, Any] = ((x + H(x)) / 2).astype(dtype)
    return out


def with_eigenvalues(rng: np.random.Generator, w: list[float], dtype: Any) -> np.ndarray[Any, Any]:
    """A Hermitian matrix with the given eigenvalues (random unitary eigenvectors)."""
    q, _ = np.linalg.qr(rand(rng, (len(w), len(w)), np.complex128 if np.dtype(dtype).kind == "c" else np.float64))
    out: np.ndarray[Any, Any] = ((q * np.asarray(w)) @ H(q)).astype(dtype)
    return out


def eye_err(q: np.ndarray[Any, Any]) -> float:
    return float(np.abs(H(q) @ q - np.eye(q.shape[-1])).max())


def rel(x: np.ndarray[Any, Any], ref: np.ndarray[Any, Any]) -> float:
    return float(np.abs(x - ref).max() / max(float(np.abs(ref).max()), 1e-30))


# -- Cholesky and TriangularSolve ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky(dtype: Any) -> None:
    """tril(L) tril(L)^H = a and triu(U)^H triu(U) = a; only the named triangle is read."""
    if dtype in (np.float64, np.complex128):
        skip_where_device_defines_otherwise("tpu-f64-emulated")
    rng = np.random.default_rng(0)
    g = rand(rng, (3, 5, 5), dtype)
    a = (g @ H(g) + 5 * np.eye(5)).astype(dtype)
    junk_upper = np.where(np.triu(np.ones((5, 5), bool), 1), rand(rng, (3, 5, 5), dtype) * 100, a).astype(dtype)
    junk_lower = np.where(np.tril(np.ones((5, 5), bool), -1), rand(rng, (3, 5, 5), dtype) * 100, a).astype(dtype)
    b = xs.XlaBuilder("cholesky")
    pl = ops.Parameter(b, 0, S(dtype, a.shape))
    pu = ops.Parameter(b, 1, S(dtype, a.shape))
    lo, up = ops.Cholesky(pl), ops.Cholesky(pu, lower=False)
    assert lo.shape == pl.shape and up.shape == pu.shape
    got_l, got_u = run(b.build(ops.Tuple(b, [lo, up])), junk_upper, junk_lower)
    l, u = np.tril(got_l), np.triu(got_u)
    tol = 50 * EPS[dtype]
    assert rel(l @ H(l), a) < tol
    assert rel(H(u) @ u, a) < tol
    np.testing.assert_allclose(np.diagonal(l, axis1=1, axis2=2).imag, 0, atol=tol)
    assert np.all(np.diagonal(l, axis1=1, axis2=2).real > 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_triangular_solve_all_options(dtype: Any) -> None:
    """Every combination of left_side, lower, unit_diagonal and transpose_a (enum, name and bool
    forms) solves op(a) x = b or x op(a) = b; the unread triangle and, for unit_diagonal, the
    diagonal hold junk that would change the answer if read."""
    rng = np.random.default_rng(1)
    m, n = 4, 3
    a = rand(rng, (2, m, m), dtype) + (3 * np.eye(m)).astype(dtype)
    bl = rand(rng, (2, m, n), dtype)
    br = rand(rng, (2, n, m), dtype)
    bld = xs.XlaBuilder("trsm")
    pa = ops.Parameter(bld, 0, S(dtype, a.shape))
    pl = ops.Parameter(bld, 1, S(dtype, bl.shape))
    pr = ops.Parameter(bld, 2, S(dtype, br.shape))
    combos, outs = [], []
    transposes: list[tuple[Any, str]] = [(T.NO_TRANSPOSE, "N"), (T.TRANSPOSE, "T"), ("ADJOINT", "H"), (True, "T"),
                                         (False, "N")]
    for left in (True, False):
        for lower in (True, False):
            for unit in (True, False):
                for tr, kind in transposes:
                    combos.append((left, lower, unit, kind))
                    outs.append(ops.TriangularSolve(pa, pl if left else pr, left, lower, unit, tr))
    got = run(bld.build(ops.Tuple(bld, outs)), a, bl, br)
    tol = 200 * EPS[dtype]
    for (left, lower, unit, kind), x in zip(combos, got, strict=True):
        tri = np.tril(a) if lower else np.triu(a)
        if unit:
            tri = tri - np.diagonal(tri, axis1=1, axis2=2)[..., None] * np.eye(m) + np.eye(m)
        op_a = {"N": tri, "T": np.swapaxes(tri, -1, -2), "H": H(tri)}[kind]
        lhs, rhs = (op_a @ x, bl) if left else (x @ op_a, br)
        assert x.shape == rhs.shape
        assert rel(lhs, rhs) < tol, (left, lower, unit, kind)


# -- QR ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_qr(dtype: Any) -> None:
    """q r = a, q^H q = I, r upper triangular, with full and reduced shapes."""
    if dtype in (np.float64, np.complex128):
        skip_where_device_defines_otherwise("tpu-f64-emulated")
    rng = np.random.default_rng(2)
    shapes = [(5, 3), (3, 5), (2, 4, 4)]
    mats = [rand(rng, s, dtype) for s in shapes]
    b = xs.XlaBuilder("qr")
    params = [ops.Parameter(b, i, S(dtype, m.shape)) for i, m in enumerate(mats)]
    outs, cases = [], []
    for p, m in zip(params, mats, strict=True):
        for full in (True, False):
            q, r = ops.QR(p, full_matrices=full)
            rows, cols = m.shape[-2:]
            k = min(rows, cols)
            assert q.dims == m.shape[:-2] + ((rows, rows) if full else (rows, k))
            assert r.dims == m.shape[:-2] + ((rows, cols) if full else (k, cols))
            assert q.dtype == dtype and r.dtype == dtype
            outs += [q, r]
            cases.append((m, full))
    comp = b.build(ops.Tuple(b, outs))
    assert 'custom_call_target="Qr"' in comp.as_hlo_text()
    got = run(comp, *mats)
    for i, (m, full) in enumerate(cases):
        qn, rn = got[2 * i], got[2 * i + 1]
        assert rel(qn @ rn, m) < 50 * EPS[dtype], (m.shape, full)
        assert eye_err(qn) < 50 * EPS[dtype]
        assert np.all(np.tril(rn, -1) == 0)


# -- Eigh ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh(dtype: Any) -> None:
    """v diag(w) v^H = a, v^H v = I, w ascending and equal to numpy's eigenvalues: random,
    repeated-eigenvalue, zero and diagonal matrices in one batch of odd size; an even size read
    from the upper triangle (junk below); a 1x1; the unsorted variant."""
    if dtype in (np.float64, np.complex128):
        skip_where_device_defines_otherwise("tpu-f64-emulated")
    rng = np.random.default_rng(3)
    batch = np.stack([
        hermitian(rng, (5, 5), dtype),
        with_eigenvalues(rng, [2, 2, 2, -1, -1], dtype),
        np.zeros((5, 5), dtype),
        np.diag([3.0, -1.0, 0.0, 7.0, 3.0]).astype(dtype),
    ])
    even = hermitian(rng, (6, 6), dtype)
    even_junk = np.where(np.tril(np.ones((6, 6), bool), -1), rand(rng, (6, 6), dtype) * 100, even).astype(dtype)
    one = np.array([[-2.5]], dtype)
    b = xs.XlaBuilder("eigh")
    p0 = ops.Parameter(b, 0, S(dtype, batch.shape))
    p1 = ops.Parameter(b, 1, S(dtype, even.shape))
    p2 = ops.Parameter(b, 2, S(dtype, one.shape))
    v0, w0 = ops.Eigh(p0)
    v1, w1 = ops.Eigh(p1, lower=False)
    v2, w2 = ops.Eigh(p2)
    v3, w3 = ops.Eigh(p0, sort_eigenvalues=False)
    real = np.float32 if EPS[dtype] > 1e-10 else np.float64
    assert v0.dims == (4, 5, 5) and w0.dims == (4, 5) and v0.dtype == dtype and w0.dtype == real
    got = run(b.build(ops.Tuple(b, [v0, w0, v1, w1, v2, w2, v3, w3])), batch, even_junk, one)
    tol = 100 * EPS[dtype]
    for (v, w), a, sort in zip(zip(got[0::2], got[1::2], strict=True), [batch, even, one, batch],
                               [True, True, True, False], strict=True):
        for vi, wi, ai in zip(v.reshape((-1,) + v.shape[-2:]), w.reshape(-1, w.shape[-1]),
                              a.reshape((-1,) + a.shape[-2:]), strict=True):
            assert np.abs((vi * wi) @ H(vi) - ai).max() <= tol * max(1.0, float(np.abs(ai).max()))
            assert eye_err(vi) < tol
            want = np.linalg.eigvalsh(ai.astype(np.complex128 if np.iscomplexobj(ai) else np.float64))
            scale = max(1.0, float(np.abs(want).max()))
            np.testing.assert_allclose(np.sort(wi) if not sort else wi, want, atol=tol * scale)
            if sort:
                assert np.all(np.diff(wi) >= 0)


def test_eigh_and_svd_extreme_scales() -> None:
    """f32 matrices of magnitude 1e30 and 1e-30 (whose squares overflow or underflow f32)."""
    rng = np.random.default_rng(4)
    big = hermitian(rng, (4, 4), np.float64) * 1e30
    small = rand(rng, (5, 3), np.float64) * 1e-30
    b = xs.XlaBuilder("scales")
    pb = ops.Parameter(b, 0, S(np.float32, big.shape))
    ps = ops.Parameter(b, 1, S(np.float32, small.shape))
    v, w = ops.Eigh(pb)
    u, s, vs = ops.SVD(ps)
    v_, w_, u_, s_, vs_ = run(b.build(ops.Tuple(b, [v, w, u, s, vs])), big.astype(np.float32), small.astype(np.float32))
    assert np.all(np.isfinite(w_)) and rel((v_ * w_) @ v_.T, big) < 1e-5
    np.testing.assert_allclose(w_, np.linalg.eigvalsh(big), rtol=1e-5, atol=1e-5 * np.abs(big).max())
    assert np.all(np.isfinite(s_)) and rel((u_[:, :3] * s_) @ vs_.T, small) < 1e-5
    np.testing.assert_allclose(s_, np.linalg.svd(small, compute_uv=False), rtol=1e-5)


# -- SVD -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_svd(dtype: Any) -> None:
    """u diag(s) v^H = a, u and v orthonormal, s descending, >= 0 and equal to numpy's: tall
    (random, rank-deficient and zero in one batch; full and reduced), wide (full) and 1x1."""
    if dtype in (np.float64, np.complex128):
        skip_where_device_defines_otherwise("tpu-f64-emulated")
    rng = np.random.default_rng(5)
    deficient = rand(rng, (6, 4), dtype)
    deficient[:, 2] = 2 * deficient[:, 0]
    deficient[:, 3] = 0
    tall = np.stack([rand(rng, (6, 4), dtype), deficient, np.zeros((6, 4), dtype)])
    wide = rand(rng, (3, 5), dtype)
    one = np.array([[-4.0]], dtype)
    mats = [tall, wide, one]
    b = xs.XlaBuilder("svd")
    params = [ops.Parameter(b, i, S(dtype, m.shape)) for i, m in enumerate(mats)]
    outs, cases = [], []
    for p, m in zip(params, mats, strict=True):
        for full in (True, False) if m is tall else (True,):
            u, s, v = ops.SVD(p, full_matrices=full)
            rows, cols = m.shape[-2:]
            k = min(rows, cols)
            lead = m.shape[:-2]
            assert u.dims == lead + ((rows, rows) if full else (rows, k))
            assert v.dims == lead + ((cols, cols) if full else (cols, k))
            assert s.dims == lead + (k,)
            assert u.dtype == dtype and v.dtype == dtype
            outs += [u, s, v]
            cases.append(m)
    got = run(b.build(ops.Tuple(b, outs)), *mats)
    tol = 100 * EPS[dtype]
    for i, m in enumerate(cases):
        un, sn, vn = got[3 * i: 3 * i + 3]
        k = sn.shape[-1]
        scale = max(1.0, float(np.abs(m).max()))
        rec = (un[..., :, :k] * sn[..., None, :]) @ H(vn[..., :, :k])
        assert np.abs(rec - m).max() <= tol * scale, (m.shape, un.shape)
        for qn in (un, vn):
            for qi in qn.reshape((-1,) + qn.shape[-2:]):
                assert eye_err(qi) < tol
        assert np.all(sn >= 0) and np.all(np.diff(sn, axis=-1) <= 0)
        want = np.linalg.svd(m.astype(np.complex128 if np.iscomplexobj(m) else np.float64), compute_uv=False)
        np.testing.assert_allclose(sn, want, atol=tol * scale)


def test_decompositions_not_converged_stay_orthonormal() -> None:
    """With max_iter=1 the factors are not yet exact, but v (a product of rotations) stays
    orthonormal, and a diagonal input is exact after one sweep."""
    skip_where_device_defines_otherwise("tpu-f64-emulated")  # f64 matrices
    rng = np.random.default_rng(6)
    a = hermitian(rng, (8, 8), np.float64)
    d = np.diag(np.arange(8.0)[::-1])
    b = xs.XlaBuilder("one_sweep")
    pa = ops.Parameter(b, 0, S(np.float64, a.shape))
    pd = ops.Parameter(b, 1, S(np.float64, d.shape))
    v, w = ops.Eigh(pa, max_iter=1, epsilon=1e-12)
    vd, wd = ops.Eigh(pd, max_iter=1)
    got_v, got_w, got_vd, got_wd = run(b.build(ops.Tuple(b, [v, w, vd, wd])), a, d)
    assert eye_err(got_v) < 1e-13
    assert rel((got_v * got_w) @ got_v.T, a) > 1e-12  # one sweep of 8x8 does not converge
    np.testing.assert_array_equal(got_wd, np.arange(8.0))
    np.testing.assert_array_equal(np.abs(got_vd), np.eye(8)[::-1])


def test_empty_matrices() -> None:
    """Zero-size matrices and batches give results of the documented shapes; a full u of an
    (m, 0) matrix is still orthonormal."""
    b = xs.XlaBuilder("empty")
    p0 = ops.Parameter(b, 0, S(np.float32, (3, 0)))
    p1 = ops.Parameter(b, 1, S(np.float64, (0, 3, 3)))
    p2 = ops.Parameter(b, 2, S(np.float32, (2, 0, 4)))
    outs = [*ops.QR(p0), *ops.Eigh(p1), *ops.SVD(p2), *ops.SVD(p0), ops.Cholesky(p1)]
    assert [o.dims for o in outs] == [(3, 3), (3, 0), (0, 3, 3), (0, 3), (2, 0, 0), (2, 0), (2, 4, 4),
                                      (3, 3), (0,), (0, 0), (0, 3, 3)]
    got = run(b.build(ops.Tuple(b, outs)), np.zeros((3, 0), np.float32), np.zeros((0, 3, 3)),
              np.zeros((2, 0, 4), np.float32))
    assert [g.shape for g in got] == [o.dims for o in outs]
    assert eye_err(got[0]) < 1e-6 and eye_err(got[7]) < 1e-6
    assert all(eye_err(v) < 1e-6 for v in got[6])


# -- errors --------------------------------------------------------------------------------------

def test_decomposition_errors() -> None:
    b = xs.XlaBuilder("errors")
    sq = ops.Parameter(b, 0, S(np.float32, (3, 3)))
    rect = ops.Parameter(b, 1, S(np.float32, (3, 4)))
    vec = ops.Parameter(b, 2, S(np.float32, (3,)))
    ints = ops.Parameter(b, 3, S(np.int32, (3, 3)))
    f16 = ops.Parameter(b, 4, S(np.float16, (3, 3)))
    d = ops.Parameter(b, 5, S(np.float64, (3, 3)))
    batched = ops.Parameter(b, 6, S(np.float32, (2, 3, 4)))
    with raises(ShapeError, "Cholesky", "operand 'a'", "square"):
        ops.Cholesky(rect)
    with raises(ShapeError, "Cholesky", "operand 'a'", "rank >= 2"):
        ops.Cholesky(vec)
    with raises(DTypeError, "Cholesky", "operand 'a'", "s32"):
        ops.Cholesky(ints)
    with raises(DTypeError, "Cholesky", "operand 'a'", "f16"):
        ops.Cholesky(f16)
    with raises(DTypeError, "Cholesky", "lower", "bool"):
        ops.Cholesky(sq, lower=1)  # type: ignore[arg-type]
    ts, name = ops.TriangularSolve, "TriangularSolve"
    with raises(ShapeError, name, "operand 'a'", "square"):
        ts(rect, sq, True, True, False, False)
    with raises(ShapeError, name, "operand 'b'", "last dimension must be 3"):
        ts(sq, rect, False, True, False, False)
    with raises(ShapeError, name, "operand 'b'", "batch"):
        ts(sq, batched, True, True, False, False)
    with raises(DTypeError, name, "operand 'b'", "f64"):
        ts(sq, d, True, True, False, False)
    with raises(ShapeError, name, "transpose_a", "CONJUGATE"):
        ts(sq, sq, True, True, False, "CONJUGATE")
    with raises(DTypeError, name, "left_side", "bool"):
        ts(sq, sq, "yes", True, False, False)  # type: ignore[arg-type]
    with raises(ShapeError, "QR", "operand 'operand'", "rank >= 2"):
        ops.QR(vec)
    with raises(DTypeError, "QR", "operand 'operand'", "s32"):
        ops.QR(ints)
    with raises(DTypeError, "QR", "full_matrices", "bool"):
        ops.QR(sq, full_matrices=None)  # type: ignore[arg-type]
    with raises(ShapeError, "Eigh", "operand 'a'", "square"):
        ops.Eigh(rect)
    with raises(ShapeError, "Eigh", "max_iter", ">= 1"):
        ops.Eigh(sq, max_iter=0)
    with raises(ShapeError, "Eigh", "epsilon", "[0, 1)"):
        ops.Eigh(sq, epsilon=2.0)
    with raises(DTypeError, "Eigh", "epsilon", "float"):
        ops.Eigh(sq, epsilon="tiny")  # type: ignore[arg-type]
    with raises(DTypeError, "Eigh", "sort_eigenvalues", "bool"):
        ops.Eigh(sq, sort_eigenvalues="no")  # type: ignore[arg-type]
    with raises(DTypeError, "Eigh", "operand 'a'", "f16"):
        ops.Eigh(f16)
    with raises(ShapeError, "SVD", "operand 'a'", "rank >= 2"):
        ops.SVD(vec)
    with raises(DTypeError, "SVD", "operand 'a'", "s32"):
        ops.SVD(ints)
    with raises(ShapeError, "SVD", "max_iter"):
        ops.SVD(rect, max_iter=-1)
    with raises(DTypeError, "SVD", "full_matrices", "bool"):
        ops.SVD(rect, full_matrices="yes")  # type: ignore[arg-type]


# -- pure shape rules (no builder) ----------------------------------------------------------------

def _s(dtype: Any, *dims: int) -> xs.Shape:
    return xs.Shape.array_shape(np.dtype(dtype), dims)


def test_qr_lu_shape_rules() -> None:
    from xlasdk.ops.decompositions import householder_product_shape, qr_decomposition_shapes, qr_shapes
    from xlasdk.ops.lu import lu_shapes

    a = _s(np.float32, 2, 5, 3)
    assert qr_shapes("QR", a, True) == (_s(np.float32, 2, 5, 5), a)
    assert qr_shapes("QR", a, False) == (_s(np.float32, 2, 5, 3), _s(np.float32, 2, 3, 3))
    assert qr_shapes("QR", _s(np.complex64, 3, 5), False) == (_s(np.complex64, 3, 3), _s(np.complex64, 3, 5))
    assert qr_decomposition_shapes("QrDecomposition", a) == (a, _s(np.float32, 2, 3))
    assert lu_shapes("LU", a) == (a, _s(np.int32, 2, 3), _s(np.int32, 2, 5))
    assert householder_product_shape("H", a, _s(np.float32, 2, 2)) == a
    with raises(ShapeError, "QR: operand 'operand' must have rank >= 2 (..., m, n), got f32[5]"):
        qr_shapes("QR", _s(np.float32, 5), True)
    with raises(DTypeError, "LU: operand 'operand' must be f32, f64, c64 or c128, got s32[2,2]"):
        lu_shapes("LU", _s(np.int32, 2, 2))
    with raises(ShapeError, "QR: operand 'operand' is f32[70000,2]: its number of rows (70000)", "at most 65536"):
        qr_shapes("QR", _s(np.float32, 70000, 2), True)
    with raises(ShapeError, "H: operand 'taus' has 4 reflectors, more than the 3 columns of 'a' f32[2,5,3]"):
        householder_product_shape("H", a, _s(np.float32, 2, 4))
    with raises(ShapeError, "H: operand 'a' must have m >= n in its last two dimensions (..., m, n), got f32[3,5]"):
        householder_product_shape("H", _s(np.float32, 3, 5), _s(np.float32, 3))
    with raises(DTypeError, "H: operand 'taus' has element type f64[2,2]", "expected dtype('float32') like 'a'"):
        householder_product_shape("H", a, _s(np.float64, 2, 2))


def test_eigh_svd_shape_rules() -> None:
    from xlasdk.ops.decompositions import eigh_shapes, svd_shapes

    a = _s(np.complex64, 2, 3, 3)
    assert eigh_shapes("Eigh", a) == (a, _s(np.float32, 2, 3))
    with raises(ShapeError, "Eigh: operand 'a' must be square in its last two dimensions (..., n, n), got f32[3,4]"):
        eigh_shapes("Eigh", _s(np.float32, 3, 4))
    w = _s(np.float64, 4, 6)
    assert svd_shapes("SVD", w, True) == (_s(np.float64, 4, 4), _s(np.float64, 4), _s(np.float64, 6, 6))
    assert svd_shapes("SVD", w, False) == (_s(np.float64, 4, 4), _s(np.float64, 4), _s(np.float64, 6, 4))
    t = _s(np.complex128, 6, 4)
    assert svd_shapes("SVD", t, False) == (_s(np.complex128, 6, 4), _s(np.float64, 4), _s(np.complex128, 4, 4))
    with raises(ShapeError, "SVD: operand 'a' is f64[70000,3]: its larger dimension (70000)", "at most 65536"):
        svd_shapes("SVD", _s(np.float64, 70000, 3), True)
