"""Ops of the former ``jaxlib.xla_client.ops`` that xlasdk added later: ``LU``,
``QrDecomposition``, ``ProductOfElementaryHouseholderReflectors``, ``ApproxTopK`` (and its
fallback and output size), checked against scipy/numpy, natively and through
``xlasdk.xla_client`` in the former style; and their errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.linalg as sl

import xlasdk as xs
from tests.helpers import run, skip_where_device_defines_otherwise
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


# -- ApproxTopK -----------------------------------------------------------------------------------

def _gt(b: xs.XlaBuilder, et: Any, n: int) -> xs.XlaComputation:
    """A former-style comparator computation: ``Gt`` on the first pair, 2 * n parameters."""
    c = xs.XlaBuilder("gt")
    args = [ops.Parameter(c, i, S(et if i < 2 else np.int32, ())) for i in range(2 * n)]
    return c.build(ops.Gt(args[0], args[1]))


@pytest.mark.parametrize("fallback", [False, True])
@pytest.mark.parametrize("reduction_dim", [1, -2, 0])
def test_approx_top_k_max_with_indices(fallback: bool, reduction_dim: int) -> None:
    """The top_k largest values along a dimension with their s32 indices, exactly (XLA:CPU's
    ApproxTopK is its exact fallback), like numpy's sort."""
    x = rand((6, 50, 3), np.float32, seed=4)
    d = reduction_dim % 3
    b = xs.XlaBuilder("approx_top_k")
    p = ops.Parameter(b, 0, S(np.float32, x.shape))
    iota = ops.Iota(b, S(np.int32, x.shape), d)
    init = [ops.Constant(b, np.float32(-np.inf)), ops.Constant(b, np.int32(-1))]
    fn = ops.ApproxTopKFallback if fallback else ops.ApproxTopK
    r = fn(b, [p, iota], init, 4, reduction_dim, _gt(b, np.float32, 2), recall_target=0.95)
    want_dims = list(x.shape)
    want_dims[d] = 4
    assert r.shape == xs.Shape.tuple_shape([S(np.float32, want_dims), S(np.int32, want_dims)])
    vals, idx = run(b.build(r), x)
    order = np.argsort(-x, axis=d, kind="stable")
    np.testing.assert_array_equal(idx, np.take(order, range(4), axis=d))
    np.testing.assert_array_equal(vals, np.take_along_axis(x, idx.astype(np.int64), axis=d))


def test_approx_top_k_output_size_not_aggregated() -> None:
    """Without aggregate_to_topk the result keeps ApproxTopKReductionOutputSize elements, as jax's
    approx_max_k does on CPU (same values)."""
    skip_where_device_defines_otherwise("tpu-approx-top-k")
    jax = pytest.importorskip("jax")
    x = rand((2, 3000), np.float32, seed=5)
    size, log2 = ops.ApproxTopKReductionOutputSize(3000, 2, 10, 0.9, aggregate_to_topk=False)
    assert (size, log2) == (jax._src.lib._jax.approx_top_k_reduction_output_size(3000, 2, 10, 0.9, False, -1))
    b = xs.XlaBuilder("approx_top_k_wide")
    p = ops.Parameter(b, 0, S(np.float32, x.shape))
    r = ops.ApproxTopK(
        b, [p], [ops.Constant(b, np.float32(-np.inf))], 10, 1, lambda a, c: ops.Gt(a, c),
        recall_target=0.9, aggregate_to_topk=False,
    )
    assert r.shape == xs.Shape.tuple_shape([S(np.float32, (2, size))])
    (got,) = run(b.build(r), x)
    want, _ = jax.lax.approx_max_k(x, 10, recall_target=0.9, aggregate_to_topk=False)
    np.testing.assert_array_equal(got, np.asarray(want))
    np.testing.assert_array_equal(got, -np.sort(-x, axis=1)[:, :size])


def test_approx_top_k_reduction_output_size_matches_xla() -> None:
    from jaxlib import _jax

    for size in [1, 128, 129, 1000, 1025, 5000, 1 << 20]:
        for rank in [1, 2]:
            for k in [1, 10, 1000]:
                for recall in [0.5, 0.95, 1.0]:
                    for override in [-1, 3 * size]:
                        want = tuple(_jax.approx_top_k_reduction_output_size(size, rank, k, recall, False, override))
                        assert ops.ApproxTopKReductionOutputSize(size, rank, k, recall, False, override) == want
    assert ops.ApproxTopKReductionOutputSize(5000, 1, 7, 0.9) == (7, -1)
    with pytest.raises(ShapeError, match="ApproxTopKReductionOutputSize: reduction_input_size_override: 10"):
        ops.ApproxTopKReductionOutputSize(5000, 2, 7, 0.9, False, 10)
    with pytest.raises(ShapeError, match=r"recall_target must be in \(0, 1\]"):
        ops.ApproxTopKReductionOutputSize(5000, 2, 7, 1.5)


def test_approx_top_k_errors() -> None:
    b = xs.XlaBuilder("approx_errors")
    p = ops.Parameter(b, 0, S(np.float32, (4, 8)))
    q = ops.Parameter(b, 1, S(np.int32, (4, 7)))
    f0 = ops.Constant(b, np.float32(0))
    gt = _gt(b, np.float32, 1)
    with pytest.raises(ShapeError, match=r"ApproxTopK: operand 'operands\[1\]' has shape s32\[4,7\]"):
        ops.ApproxTopK(b, [p, q], [f0, ops.Constant(b, np.int32(0))], 2, 1, gt)
    with pytest.raises(ShapeError, match="ApproxTopK: 1 init_values for 2 operands"):
        ops.ApproxTopK(b, [p, p], [f0], 2, 1, gt)
    with pytest.raises(DTypeError, match=r"ApproxTopK: operand 'init_values\[0\]' has element type s32\[\]"):
        ops.ApproxTopK(b, [p], [ops.Constant(b, np.int32(0))], 2, 1, gt)
    with pytest.raises(ShapeError, match=r"ApproxTopKFallback: top_k must be"):
        ops.ApproxTopKFallback(b, [p], [f0], 9, 1, gt)
    with pytest.raises(ShapeError, match=r"ApproxTopK: reduction_dim must be"):
        ops.ApproxTopK(b, [p], [f0], 2, 2, gt)
    with pytest.raises(DTypeError, match="ApproxTopK: comparator must be"):
        ops.ApproxTopK(b, [p], [f0], 2, 1, None)
    with pytest.raises(ShapeError, match="ApproxTopK: recall_target must be in"):
        ops.ApproxTopK(b, [p], [f0], 2, 1, gt, recall_target=0.0)


def test_former_style_approx_top_k() -> None:
    """``xla_client.ops.ApproxTopK`` with positional former arguments; HLO text prints."""
    from xlasdk import xla_client

    xops = xla_client.ops
    x = rand((3, 40), np.float32, seed=6)
    c = xla_client.XlaBuilder("former_approx")
    p = xops.Parameter(c, 0, xla_client.shape_from_pyval(x))
    cmp = xla_client.XlaBuilder("cmp")
    xops.Gt(xops.Parameter(cmp, 0, xla_client.Shape.array_shape(np.float32, ())),
            xops.Parameter(cmp, 1, xla_client.Shape.array_shape(np.float32, ())))
    xops.ApproxTopK(c, [p], [xops.Constant(c, np.float32(-np.inf))], 5, 1, cmp.build(), 0.95, True, -1)
    comp = c.build()
    assert "sort(" in comp.as_hlo_text()
    backend = xla_client.make_cpu_client()
    exe = backend.compile(xla_client._xla.mlir.xla_computation_to_mlir_module(comp))
    (out,) = exe.execute([backend.buffer_from_pyval(x)])
    np.testing.assert_array_equal(np.asarray(out), -np.sort(-x, axis=1)[:, :5])


# -- CustomCallWithAliasing -----------------------------------------------------------------------

def _geqrf_call(
    b: xs.XlaBuilder, p: xs.XlaOp, aliasing: Any, fn: Any = ops.CustomCallWithAliasing, shape_cls: Any = xs.Shape,
) -> xs.XlaOp:
    """jaxlib's LAPACK dgeqrf (typed FFI, column-major) over ``p`` f64[4,3], result 0 over operand 0."""
    cm = shape_cls.array_shape(np.float64, (4, 3), (0, 1))
    res = shape_cls.tuple_shape([cm, shape_cls.array_shape(np.float64, (3,))])
    out: xs.XlaOp = fn(
        b, b"lapack_dgeqrf_ffi", [p], res, [cm], b"", False, aliasing, None,
        ops.CustomCallSchedule.SCHEDULE_NONE, ops.CustomCallApiVersion.API_VERSION_TYPED_FFI,
    )
    return out


def test_custom_call_with_aliasing() -> None:
    """The aliasing reaches HLO as output_to_operand_aliasing, and the call computes scipy's raw QR."""
    a = rand((4, 3), np.float64, seed=7)
    b = xs.XlaBuilder("aliasing")
    r = _geqrf_call(b, ops.Parameter(b, 0, S(np.float64, (4, 3))), [((0,), (0, ()))])
    comp = b.build(r)
    assert "output_to_operand_aliasing={{0}: (0, {})}" in comp.as_hlo_text()
    got_qr, got_tau = run(comp, a)
    (ref_qr, ref_tau), _ = sl.qr(a, mode="raw")
    np.testing.assert_allclose(got_qr, ref_qr, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_tau, ref_tau, rtol=1e-12, atol=1e-12)


def test_former_style_custom_call_with_aliasing() -> None:
    from xlasdk import xla_client

    a = rand((4, 3), np.float64, seed=8)
    c = xla_client.XlaBuilder("former_alias")
    p = xla_client.ops.Parameter(c, 0, xla_client.shape_from_pyval(a))
    alias = [(xla_client.ShapeIndex([0]), (0, xla_client.ShapeIndex([])))]
    _geqrf_call(c, p, alias, xla_client.ops.CustomCallWithAliasing, xla_client.Shape)  # type: ignore[arg-type]
    backend = xla_client.make_cpu_client()
    exe = backend.compile(xla_client._xla.mlir.xla_computation_to_mlir_module(c.build()))
    got_qr, _ = (np.asarray(o) for o in exe.execute([backend.buffer_from_pyval(a)]))
    np.testing.assert_allclose(got_qr, sl.qr(a, mode="raw")[0][0], rtol=1e-12, atol=1e-12)


def test_custom_call_with_aliasing_errors() -> None:
    b = xs.XlaBuilder("aliasing_errors")
    p = ops.Parameter(b, 0, S(np.float64, (4, 3)))
    op = "CustomCallWithAliasing"
    with pytest.raises(ShapeError, match=rf"{op}: output_operand_aliasing\[0\] names operand 1"):
        _geqrf_call(b, p, [((0,), (1, ()))])
    with pytest.raises(ShapeError, match=rf"{op}: output_operand_aliasing\[0\]: output \[1\] is f64\[3\]"):
        _geqrf_call(b, p, [((1,), (0, ()))])
    with pytest.raises(ShapeError, match=r"output index \[2\] does not index into"):
        _geqrf_call(b, p, [((2,), (0, ()))])
    with pytest.raises(ShapeError, match=r"output \[0\] is aliased twice"):
        _geqrf_call(b, p, [((0,), (0, ())), ((0,), (0, ()))])
    with pytest.raises(DTypeError, match=rf"{op}: output_operand_aliasing\[0\] must be"):
        _geqrf_call(b, p, [(0, 0)])
    with pytest.raises(ShapeError, match=f"{op}: literal is not supported"):
        ops.CustomCallWithAliasing(b, "f", [p], p.shape, [p.shape], literal=np.float32(1))


# -- IgammaGradA and RandomGammaGrad --------------------------------------------------------------

def _dp_da(a: np.ndarray[Any, Any], x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """dP(a, x)/da by central differences of scipy, on P or on Q = 1 - P, whichever is small."""
    import scipy.special as sp

    h = 1e-5 * np.maximum(a, 1.0)
    dp = (sp.gammainc(a + h, x) - sp.gammainc(a - h, x)) / (2 * h)
    dq = -(sp.gammaincc(a + h, x) - sp.gammaincc(a - h, x)) / (2 * h)
    out: np.ndarray[Any, Any] = np.where(sp.gammainc(a, x) < 0.5, dp, dq)
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_igamma_grad_a_and_random_gamma_grad(dtype: Any) -> None:
    """IgammaGradA = dP/da (finite differences of scipy.special.gammainc); RandomGammaGrad =
    -(dP/da) / (dP/dx); edge values 0 at x = 0 and NaN outside the domain; both as jax's."""
    import scipy.special as sp

    rng = np.random.default_rng(9)
    a = np.concatenate([rng.uniform(0.1, 20, 300), [0.5, 1.0, 2.0, 0.0, -1.0, np.nan, 2.0]]).astype(dtype)
    x = np.concatenate([rng.uniform(0.01, 30, 300), [1e-3, 0.7, 0.0, 1.0, 1.0, 1.0, -1.0]]).astype(dtype)
    b = xs.XlaBuilder("igamma_grads")
    pa, px = ops.Parameter(b, 0, S(dtype, a.shape)), ops.Parameter(b, 1, S(dtype, x.shape))
    g, r = ops.IgammaGradA(pa, px), ops.RandomGammaGrad(pa, px)
    assert g.shape == pa.shape and r.shape == pa.shape
    got_g, got_r = run(b.build(ops.Tuple(b, [g, r])), a, x)
    a64, x64 = a.astype(np.float64), x.astype(np.float64)
    ok = (a64 > 0) & (x64 > 0)
    fd = _dp_da(a64[ok], x64[ok])
    tol = 2e-3 if dtype == np.float32 else 1e-5
    np.testing.assert_allclose(got_g[ok], fd, rtol=tol, atol=tol * 1e-2)
    dp_dx = np.exp((a64[ok] - 1) * np.log(x64[ok]) - x64[ok] - sp.gammaln(a64[ok]))
    big = dp_dx > 1e-6
    np.testing.assert_allclose(got_r[ok][big], -fd[big] / dp_dx[big], rtol=10 * tol, atol=tol)
    assert got_g[302] == 0 and got_r[302] == 0  # x = 0
    assert np.isnan(got_g[-4:]).all() and np.isnan(got_r[-4:]).all()  # a <= 0, NaN, x < 0
    jax_special = pytest.importorskip("jax._src.lax.special")
    if dtype == np.float32:  # jax computes in f32 without x64
        np.testing.assert_allclose(got_g, np.asarray(jax_special.igamma_grad_a(a, x)), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(got_r, np.asarray(jax_special.random_gamma_grad(a, x)), rtol=1e-5, atol=1e-7)


def test_igamma_grads_errors_and_former_style() -> None:
    from xlasdk import xla_client

    b = xs.XlaBuilder("igamma_grad_errors")
    f = ops.Parameter(b, 0, S(np.float32, (3,)))
    with pytest.raises(DTypeError, match=r"IgammaGradA: operand 'x' has element type f64\[3\]"):
        ops.IgammaGradA(f, ops.Parameter(b, 1, S(np.float64, (3,))))
    with pytest.raises(ShapeError, match=r"RandomGammaGrad: operand 'x' has shape f32\[4\]"):
        ops.RandomGammaGrad(f, ops.Parameter(b, 2, S(np.float32, (4,))))
    with pytest.raises(DTypeError, match="IgammaGradA: operand 'a' must be f16, bf16, f32 or f64"):
        ops.IgammaGradA(ops.Parameter(b, 3, S(np.int32, (3,))), f)
    c = xla_client.XlaBuilder("former_igamma")
    xops = xla_client.ops
    a = np.array([0.5, 2.0, 7.0], np.float64)
    x = np.array([0.3, 2.5, 4.0], np.float64)
    pa = xops.Parameter(c, 0, xla_client.shape_from_pyval(a))
    px = xops.Parameter(c, 1, xla_client.shape_from_pyval(x))
    xops.Tuple(c, [xops.IgammaGradA(a=pa, x=px), xops.RandomGammaGrad(pa, px)])
    backend = xla_client.make_cpu_client()
    exe = backend.compile(xla_client._xla.mlir.xla_computation_to_mlir_module(c.build()))
    g, _ = (np.asarray(o) for o in exe.execute([backend.buffer_from_pyval(a), backend.buffer_from_pyval(x)]))
    np.testing.assert_allclose(g, _dp_da(a, x), rtol=1e-5)


# -- SendToHost / RecvFromHost --------------------------------------------------------------------

def test_send_recv_host_refused_with_reason() -> None:
    """XLA:CPU in jaxlib 0.10.2 cannot compile host send/recv: the ops exist (also in the former
    namespace) and say so, pointing to HostCallback."""
    from xlasdk import xla_client

    b = xs.XlaBuilder("host_transfer")
    p = ops.Parameter(b, 0, S(np.float32, (3,)))
    tok = ops.CreateToken(b)
    with pytest.raises(xs.XlaSdkError, match=r"SendToHost: .*not supported by XLA:CPU.*ops\.HostCallback"):
        ops.SendToHost(p, tok, p.shape, None)
    with pytest.raises(xs.XlaSdkError, match=r"RecvFromHost: .*ops\.HostCallback"):
        xla_client.ops.RecvFromHost(tok, p.shape, None)


# -- HLO text of every new op ---------------------------------------------------------------------

def test_new_ops_print_hlo_and_reload() -> None:
    """One computation with each new op: ``as_hlo_text()`` (XLA's converter for the custom calls)
    loads back with ``from_hlo_text`` and computes the same values."""
    a = rand((5, 4), np.float64, seed=10)
    g = np.abs(rand((6,), np.float64, seed=11)) + 0.5
    b = xs.XlaBuilder("former_ops_hlo")
    pa = ops.Parameter(b, 0, S(np.float64, a.shape))
    pg = ops.Parameter(b, 1, S(np.float64, g.shape))
    lu, piv, perm = ops.LU(pa)
    qr, taus = ops.QrDecomposition(pa)
    q = ops.ProductOfElementaryHouseholderReflectors(qr, taus)
    top = ops.GetTupleElement(
        ops.ApproxTopK(b, [pg], [ops.Constant(b, np.float64(-np.inf))], 3, 0, lambda x, y: ops.Gt(x, y)), 0
    )
    grads = [ops.IgammaGradA(pg, pg), ops.RandomGammaGrad(pg, 2.0)]
    comp = b.build(ops.Tuple(b, [lu, piv, perm, q, top, *grads]))
    text = comp.as_hlo_text()
    for needle in ["lapack_dgetrf_ffi", "ProductOfElementaryHouseholderReflectors", "sort(", "while("]:
        assert needle in text, needle
    want = run(comp, a, g)
    got = run(xs.XlaComputation.from_hlo_text(text), a, g)
    for w, h in zip(want, got, strict=True):
        np.testing.assert_allclose(h, w, rtol=1e-12, atol=1e-12)
