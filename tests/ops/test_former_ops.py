"""Ops of the former ``jaxlib.xla_client.ops`` that xlasdk added later: ``LU``,
``QrDecomposition``, ``ProductOfElementaryHouseholderReflectors``, ``ApproxTopK`` (and its
fallback and output size), checked against scipy/numpy, natively and through
``xlasdk.xla_client`` in the former style; and their errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.linalg as sl
from helpers import run

import xlasdk as xs
from xlasdk import ops
from xlasdk.errors import DTypeError, ShapeError

S = xs.Shape.array_shape
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
TOL = {np.float32: 2e-4, np.complex64: 2e-4, np.float64: 1e-10, np.complex128: 1e-10}


def rand(shape: tuple[int, ...], dtype: Any, seed: int = 0) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def batches(x: np.ndarray[Any, Any], tail: int) -> np.ndarray[Any, Any]:
    return x.reshape((-1,) + x.shape[x.ndim - tail:])


# -- LU -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 3), (3, 6), (2, 1, 3, 3), (1, 1)])
def test_lu_matches_scipy(dtype: Any, shape: tuple[int, ...]) -> None:
    """lu and 0-based pivots equal scipy's lu_factor; a[perm] = L @ U."""
    a = rand(shape, dtype)
    b = xs.XlaBuilder("lu")
    x = ops.Parameter(b, 0, S(dtype, shape))
    lu, piv, perm = ops.LU(x)
    m, n = shape[-2:]
    k = min(m, n)
    assert lu.shape == x.shape
    assert piv.shape == S(np.int32, shape[:-2] + (k,))
    assert perm.shape == S(np.int32, shape[:-2] + (m,))
    got_lu, got_piv, got_perm = run(b.build(ops.Tuple(b, [lu, piv, perm])), a)
    rows = zip(batches(a, 2), batches(got_lu, 2), batches(got_piv, 1), batches(got_perm, 1), strict=True)
    for ai, lui, pi, qi in rows:
        ref_lu, ref_piv = sl.lu_factor(ai)
        np.testing.assert_allclose(lui, ref_lu, rtol=TOL[dtype], atol=TOL[dtype])
        np.testing.assert_array_equal(pi, ref_piv)
        lower = np.tril(lui[:, :k], -1) + np.eye(m, k)
        upper = np.triu(lui[:k])
        np.testing.assert_allclose(ai[qi], lower @ upper, rtol=10 * TOL[dtype], atol=10 * TOL[dtype])
        assert sorted(qi.tolist()) == list(range(m))


@pytest.mark.filterwarnings("ignore::scipy.linalg.LinAlgWarning")
def test_lu_singular_and_empty() -> None:
    """A singular matrix factors (zero on U's diagonal); an empty one gives identity pivots."""
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    b = xs.XlaBuilder("lu_singular")
    lu, piv, perm = ops.LU(ops.Parameter(b, 0, S(np.float64, (2, 2))))
    got_lu, got_piv, got_perm = run(b.build(ops.Tuple(b, [lu, piv, perm])), a)
    np.testing.assert_allclose(got_lu, sl.lu_factor(a, check_finite=False)[0])
    assert got_lu[1, 1] == 0
    np.testing.assert_array_equal(got_perm, [1, 0])
    b = xs.XlaBuilder("lu_empty")
    lu, piv, perm = ops.LU(ops.Parameter(b, 0, S(np.float32, (3, 0))))
    assert piv.shape == S(np.int32, (0,)) and perm.shape == S(np.int32, (3,))
    _, _, got_perm = run(b.build(ops.Tuple(b, [lu, piv, perm])), np.zeros((3, 0), np.float32))
    np.testing.assert_array_equal(got_perm, [0, 1, 2])


def test_lu_errors() -> None:
    b = xs.XlaBuilder("lu_errors")
    with pytest.raises(ShapeError, match=r"LU: operand 'operand' must have rank >= 2"):
        ops.LU(ops.Parameter(b, 0, S(np.float32, (3,))))
    with pytest.raises(DTypeError, match=r"LU: operand 'operand' must be f32, f64, c64 or c128"):
        ops.LU(ops.Parameter(b, 1, S(np.int32, (3, 3))))
    with pytest.raises(DTypeError, match="LU: operand 'operand' must be an XlaOp"):
        ops.LU(np.eye(3))  # type: ignore[arg-type]


def test_lu_hlo_text_and_reload() -> None:
    """HLO text goes through XLA's converter (a custom call) and loads back and runs."""
    b = xs.XlaBuilder("lu_hlo")
    lu, piv, perm = ops.LU(ops.Parameter(b, 0, S(np.float32, (3, 3))))
    comp = b.build(ops.Tuple(b, [lu, piv, perm]))
    text = comp.as_hlo_text()
    assert 'custom_call_target="lapack_sgetrf_ffi"' in text
    a = rand((3, 3), np.float32)
    want = run(comp, a)
    got = run(xs.XlaComputation.from_hlo_text(text), a)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


# -- QrDecomposition and ProductOfElementaryHouseholderReflectors --------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 4), (3, 6)])
def test_qr_decomposition_and_householder_product(dtype: Any, shape: tuple[int, ...]) -> None:
    """triu of q_and_r is R, and with Q from the Householder product a = Q R; R matches scipy's
    up to the signs of its rows."""
    a = rand(shape, dtype, seed=1)
    m, n = shape[-2:]
    k = min(m, n)
    b = xs.XlaBuilder("qr_compact")
    x = ops.Parameter(b, 0, S(dtype, shape))
    qr, taus = ops.QrDecomposition(x)
    assert qr.shape == x.shape and taus.shape == S(dtype, shape[:-2] + (k,))
    refl = qr if m >= n else ops.SliceInDim(qr, 0, m, 1, len(shape) - 1)
    q = ops.ProductOfElementaryHouseholderReflectors(refl, taus)
    assert q.shape == refl.shape
    got_qr, got_taus, got_q = run(b.build(ops.Tuple(b, [qr, taus, q])), a)
    tol = 20 * TOL[dtype]
    for ai, qri, qi in zip(batches(a, 2), batches(got_qr, 2), batches(got_q, 2), strict=True):
        r = np.triu(qri)[:k]
        np.testing.assert_allclose(qi[:, :k] @ r, ai, rtol=tol, atol=tol)
        np.testing.assert_allclose(np.conj(qi.T) @ qi, np.eye(qi.shape[1]), atol=tol)
        ref_r = sl.qr(ai, mode="economic")[1]
        np.testing.assert_allclose(np.abs(r), np.abs(ref_r), rtol=tol, atol=tol)
    # scipy's raw geqrf output agrees too (same Householder convention)
    if len(shape) == 2:
        (ref_qr, ref_taus), _ = sl.qr(a, mode="raw")
        np.testing.assert_allclose(got_qr, ref_qr, rtol=tol, atol=tol)
        np.testing.assert_allclose(got_taus, ref_taus, rtol=tol, atol=tol)


def test_householder_product_errors() -> None:
    b = xs.XlaBuilder("pehr_errors")
    a = ops.Parameter(b, 0, S(np.float32, (2, 5, 3)))
    op = "ProductOfElementaryHouseholderReflectors"
    with pytest.raises(ShapeError, match=rf"{op}: operand 'a' must have m >= n"):
        wide, t3 = ops.Parameter(b, 1, S(np.float32, (3, 5))), ops.Parameter(b, 2, S(np.float32, (3,)))
        ops.ProductOfElementaryHouseholderReflectors(wide, t3)
    with pytest.raises(ShapeError, match=rf"{op}: operand 'taus' has shape f32\[3,3\]"):
        ops.ProductOfElementaryHouseholderReflectors(a, ops.Parameter(b, 3, S(np.float32, (3, 3))))
    with pytest.raises(ShapeError, match=rf"{op}: operand 'taus' has 4 reflectors"):
        ops.ProductOfElementaryHouseholderReflectors(a, ops.Parameter(b, 4, S(np.float32, (2, 4))))
    with pytest.raises(DTypeError, match=rf"{op}: operand 'taus' has element type f64"):
        ops.ProductOfElementaryHouseholderReflectors(a, ops.Parameter(b, 5, S(np.float64, (2, 3))))
    with pytest.raises(ShapeError, match="QrDecomposition: operand 'operand' must have rank >= 2"):
        ops.QrDecomposition(ops.Parameter(b, 6, S(np.float32, (4,))))


# -- the former style -----------------------------------------------------------------------------

def test_former_style_lu_and_qr() -> None:
    """``xla_client.ops.LU`` / ``QrDecomposition`` / ``ProductOfElementaryHouseholderReflectors``
    built with ``xla_client.XlaBuilder`` and run through ``backend.compile``."""
    from xlasdk import xla_client

    xops = xla_client.ops
    a = rand((4, 3), np.float64, seed=3)
    c = xla_client.XlaBuilder("former")
    p = xops.Parameter(c, 0, xla_client.shape_from_pyval(a))
    lu, piv, perm = xops.LU(operand=p)
    qr, taus = xops.QrDecomposition(p)
    q = xops.ProductOfElementaryHouseholderReflectors(a=qr, taus=taus)
    xops.Tuple(c, [lu, piv, perm, qr, q])
    backend = xla_client.make_cpu_client()
    exe = backend.compile(xla_client._xla.mlir.xla_computation_to_mlir_module(c.build()))
    outs = [np.asarray(o) for o in exe.execute([backend.buffer_from_pyval(a)])]
    ref_lu, ref_piv = sl.lu_factor(a)
    np.testing.assert_allclose(outs[0], ref_lu, rtol=1e-12)
    np.testing.assert_array_equal(outs[1], ref_piv)
    np.testing.assert_allclose(outs[4] @ np.triu(outs[3])[:3], a, atol=1e-12)
