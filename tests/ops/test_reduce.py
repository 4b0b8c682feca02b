"""Tests of xlasdk/ops/reduce.py: Reduce (single and variadic reductions, reducers, errors), Map's
shape rule, and the batch normalizations against numpy oracles."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import PARAM_AND_CONST, case_inputs, check_direct_hlo, param, raises, run, run_case
from xlasdk import _mlir_attrs as ma
from xlasdk import ops
from xlasdk.errors import DTypeError

S = xs.Shape
NAN, INF = np.nan, np.inf


def scalar_computation(name: str, dtype: Any, fn: Callable[[xs.XlaOp, xs.XlaOp], xs.XlaOp]) -> xs.XlaComputation:
    sb = xs.XlaBuilder(name)
    a = ops.Parameter(sb, 0, S.scalar_shape(dtype))
    c = ops.Parameter(sb, 1, S.scalar_shape(dtype))
    return sb.build(fn(a, c))


def test_reduce_single_operand_dims() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5
    xi = (np.arange(24, dtype=np.int32) * 7 % 11).reshape(2, 3, 4)
    add = scalar_computation("add", np.float32, ops.Add)
    b = xs.XlaBuilder("reduce")
    X, XI = ops.Parameter(b, 0, xs.shape_from_pyval(x)), ops.Parameter(b, 1, xs.shape_from_pyval(xi))
    zero = ops.Constant(b, np.float32(0))
    outs = [
        ops.Reduce(b, X, zero, add, [0]),  # an XlaComputation reducer
        ops.Reduce(b, X, zero, lambda a, c: a + c, [1]),  # a callable
        ops.Reduce(b, X, zero, ops.Add, (0, 2)),  # several dims
        ops.Reduce(b, X, zero, add, [2, 0]),  # unsorted dims
        ops.Reduce(b, X, zero, add, [0, 1, 2]),  # to a scalar
        ops.Reduce(b, X, zero, add, []),  # nothing reduced
        ops.Reduce(b, X, ops.Constant(b, np.float32(-np.inf)), ops.Max, [1, 2]),
        ops.Reduce(b, XI, ops.Constant(b, np.int32(1)), lambda a, c: ops.Mul(a, c), [2]),
        ops.Reduce(b, XI, ops.Constant(b, np.int32(2**31 - 1)), ops.Min, [0]),
        ops.Reduce(b, ops.Gt(X, 0.0), ops.Constant(b, False), ops.Or, [2]),  # pred "any"
    ]
    wants = [x.sum(0), x.sum(1), x.sum((0, 2)), x.sum((0, 2)), x.sum(), x, x.max((1, 2)),
             np.prod(xi, axis=2, dtype=np.int64).astype(np.int32), xi.min(0), (x > 0).any(2)]
    assert [o.dims for o in outs] == [w.shape for w in wants]
    for k, (o, w) in enumerate(zip(run(b.build(outs), x, xi), wants, strict=True)):
        assert o.dtype == w.dtype, k
        np.testing.assert_allclose(o, w, rtol=1e-6, err_msg=str(k))


def test_reduce_empty_dimension_gives_init() -> None:
    x = np.zeros((0, 3), np.float32)
    b = xs.XlaBuilder("reduce0")
    X = ops.Parameter(b, 0, xs.shape_from_pyval(x))
    (o,) = run(b.build(ops.Reduce(b, X, ops.Constant(b, np.float32(5)), ops.Add, [0])), x)
    np.testing.assert_array_equal(o, [5, 5, 5])


def _argmax_reducer(av: xs.XlaOp, ai: xs.XlaOp, xv: xs.XlaOp, xi: xs.XlaOp) -> tuple[xs.XlaOp, xs.XlaOp]:
    """(value, index) max with the smaller index on ties; parameters in XLA's order (accs, then xs)."""
    take_x = ops.Or(ops.Gt(xv, av), ops.And(ops.Eq(xv, av), ops.Lt(xi, ai)))
    return ops.Select(take_x, xv, av), ops.Select(take_x, xi, ai)


def test_reduce_variadic_argmax() -> None:
    x = np.array([[3, 9, 1, 9], [-2, -5, -1, -7], [4, 4, 4, 4]], np.float32)
    idx = np.broadcast_to(np.arange(4, dtype=np.int32), x.shape).copy()
    # the same reducer as an XlaComputation with a tuple root
    sb = xs.XlaBuilder("argmax")
    ps = [ops.Parameter(sb, k, S.scalar_shape(t)) for k, t in enumerate((np.float32, np.int32, np.float32, np.int32))]
    comp = sb.build(list(_argmax_reducer(*ps)))
    b = xs.XlaBuilder("variadic")
    X, I = ops.Parameter(b, 0, xs.shape_from_pyval(x)), ops.Parameter(b, 1, xs.shape_from_pyval(idx))
    inits = [ops.Constant(b, np.float32(-np.inf)), ops.Constant(b, np.int32(-1))]
    r1 = ops.Reduce(b, [X, I], inits, _argmax_reducer, [1])
    r2 = ops.Reduce(b, (X, I), inits, comp, [1])
    r3 = ops.Reduce(b, [X, I], inits, lambda a, c, d, e: ops.Tuple(a.builder, list(_argmax_reducer(a, c, d, e))), [1])
    assert str(r1.shape) == "(f32[3], s32[3])"
    outs = [ops.GetTupleElement(r, k) for r in (r1, r2, r3) for k in (0, 1)]
    res = run(b.build(outs), x, idx)
    for k in range(3):
        np.testing.assert_array_equal(res[2 * k], x.max(1))
        np.testing.assert_array_equal(res[2 * k + 1], np.argmax(x, 1).astype(np.int32))  # first index on ties


def test_reduce_variadic_mixed_types_over_two_dims() -> None:
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    n = np.ones((3, 4), np.int32)
    b = xs.XlaBuilder("sumcount")
    X, N = ops.Parameter(b, 0, xs.shape_from_pyval(x)), ops.Parameter(b, 1, xs.shape_from_pyval(n))
    r = ops.Reduce(b, [X, N], [ops.Constant(b, np.float64(0)), ops.Constant(b, np.int32(0))],
                   lambda s, c, xv, nv: (s + xv, c + nv), [0, 1])
    total, count = run(b.build(r), x, n)  # a tuple root gives two outputs
    assert total == x.sum() and total.dtype == np.float64
    assert count == 12 and count.dtype == np.int32


def test_reduce_errors() -> None:
    b = xs.XlaBuilder("reduce_err")
    x = ops.Parameter(b, 0, S.array_shape("f32", [2, 3]))
    i = ops.Parameter(b, 1, S.array_shape("s32", [2, 3]))
    z, zi = ops.Constant(b, np.float32(0)), ops.Constant(b, np.int32(0))
    addf = scalar_computation("addf", np.float32, ops.Add)
    addi = scalar_computation("addi", np.int32, ops.Add)
    sb = xs.XlaBuilder("vec")
    v0, v1 = ops.Parameter(sb, 0, S.array_shape("f32", [2])), ops.Parameter(sb, 1, S.array_shape("f32", [2]))
    vec = sb.build(ops.Add(v0, v1))
    R = ops.Reduce
    # reducer signatures
    with raises(xs.ShapeError, "Reduce: computation 'addi' takes (s32[], s32[]) but must take (f32[], f32[])"):
        R(b, x, z, addi, [0])
    with raises(xs.ShapeError, "Reduce: computation 'vec' takes (f32[2], f32[2]) but must take (f32[], f32[])"):
        R(b, x, z, vec, [0])
    with raises(xs.ShapeError, "Reduce: computation <lambda> takes 1 arguments but 2 are passed (f32[], f32[])"):
        R(b, x, z, lambda a: a, [0])
    with raises(xs.ShapeError, "Reduce: computation <lambda> takes 3 arguments but 2 are passed"):
        R(b, x, z, lambda a, c, d: a, [0])
    with raises(xs.ShapeError, "Reduce: computation returns (s32[]) but must return (f32[]), one scalar per operand"):
        R(b, x, z, lambda a, c: ops.ConvertElementType(a, np.int32), [0])
    with raises(xs.ShapeError, "Reduce: computation returns (f32[], f32[]) but must return (f32[])"):
        R(b, x, z, lambda a, c: (a, c), [0])
    with raises(xs.ShapeError, "Reduce: computation returns (f32[2]) but must return (f32[])"):
        R(b, x, z, lambda a, c: ops.Broadcast(a, [2]), [0])
    with raises(xs.DTypeError, "Reduce: computation must return an XlaOp or a tuple/list of XlaOps, got NoneType"):
        R(b, x, z, lambda a, c: None, [0])
    with raises(xs.ShapeError, "Reduce: computation returned an op of builder 'reduce_err'", "cannot be captured"):
        R(b, x, z, lambda a, c: z, [0])
    with raises(xs.DTypeError, "Reduce: computation must be an XlaComputation or a callable, got int"):
        R(b, x, z, 5, [0])
    with raises(xs.ShapeError, "Reduce: computation returns (f32[]) but must return (f32[], s32[])"):
        R(b, [x, i], [z, zi], lambda a, c, d, e: a, [0])
    with raises(xs.ShapeError, "Reduce: computation returns (s32[], f32[]) but must return (f32[], s32[])"):
        R(b, [x, i], [z, zi], lambda a, c, d, e: (c, a), [0])
    with raises(xs.ShapeError, "Reduce: computation 'addf' takes (f32[], f32[]) but must take (f32[], s32[], f32[], s32[])"):  # noqa: E501
        R(b, [x, i], [z, zi], addf, [0])
    # operands, init values and dimensions
    with raises(xs.ShapeError, "Reduce: dimensions_to_reduce [0, 0] must be distinct dimension numbers < 2"):
        R(b, x, z, addf, [0, 0])
    with raises(xs.ShapeError, "Reduce: dimensions_to_reduce [2] must be distinct"):
        R(b, x, z, addf, [2])
    with raises(xs.ShapeError, "Reduce: dimensions_to_reduce [-1]"):
        R(b, x, z, addf, [-1])
    with raises(xs.ShapeError, "Reduce: operand 'init_values[0]' must be a scalar, got f32[2]"):
        R(b, x, ops.Constant(b, np.zeros(2, np.float32)), addf, [0])
    with raises(xs.DTypeError, "Reduce: operand 'init_values[0]' is s32[], expected f32[] like operands[0]"):
        R(b, x, zi, addf, [0])
    with raises(xs.ShapeError, "Reduce: 2 operands but 1 init_values"):
        R(b, [x, i], [z], addf, [0])
    with raises(xs.ShapeError, "Reduce: operand 'operands[1]' has shape s32[3,2], expected dimensions [2, 3] like operands[0]"):  # noqa: E501
        R(b, [x, ops.Transpose(i, [1, 0])], [z, zi], lambda a, c, d, e: (a, c), [0])
    with raises(xs.ShapeError, "Reduce: operands must be an XlaOp or a non-empty list of XlaOps"):
        R(b, [], [], addf, [0])
    with raises(xs.DTypeError, "Reduce: first argument must be an XlaBuilder, got XlaOp"):
        R(x, x, z, addf, [0])  # type: ignore[arg-type]
    with raises(xs.ShapeError, "Reduce: operand 'init_values[0]' belongs to builder 'o', but the op is built in 'reduce_err'"):  # noqa: E501
        R(b, x, ops.Constant(xs.XlaBuilder("o"), np.float32(0)), addf, [0])
    with raises(xs.DTypeError, "Reduce: operand 'operands[1]' must be an XlaOp, got str"):
        R(b, [x, "y"], [z, z], addf, [0])


# -- pure shape rules (no builder) ----------------------------------------------------------------

def test_reduce_and_map_shape_rules() -> None:
    from xlasdk.ops.reduce import map_shape, reduce_shape

    f32, s32 = xs.Shape.array_shape(np.float32, (2, 3, 4)), xs.Shape.array_shape(np.int32, (2, 3, 4))
    sf, si = xs.Shape.array_shape(np.float32, ()), xs.Shape.array_shape(np.int32, ())
    assert reduce_shape("Reduce", [f32], [sf], (1,)) == xs.Shape.array_shape(np.float32, (2, 4))
    assert reduce_shape("Reduce", [f32], [sf], ()) == f32
    both = reduce_shape("Reduce", [f32, s32], [sf, si], (0, 2))
    assert both == xs.Shape.tuple_shape([xs.Shape.array_shape(np.float32, (3,)), xs.Shape.array_shape(np.int32, (3,))])
    with raises(xs.ShapeError, "Reduce: dimensions_to_reduce [1, 1] must be distinct dimension numbers < 3"):
        reduce_shape("Reduce", [f32], [sf], (1, 1))
    with raises(xs.ShapeError, "Reduce: 2 operands but 1 init_values"):
        reduce_shape("Reduce", [f32, s32], [sf], (0,))
    with raises(xs.DTypeError, "Reduce: operand 'init_values[0]' is s32[], expected f32[] like operands[0]"):
        reduce_shape("Reduce", [f32], [si], (0,))
    with raises(xs.ShapeError, "Reduce: operand 'init_values[0]' must be a scalar, got f32[2,3,4]"):
        reduce_shape("Reduce", [f32], [f32], (0,))
    assert map_shape("Map", [f32, s32], (0, 1, 2)) == (2, 3, 4)
    with raises(xs.ShapeError, "Map: dimensions [0, 1] must be all dimensions in order, [0, 1, 2]"):
        map_shape("Map", [f32], (0, 1))
    with raises(xs.ShapeError, "Map: operand 'operands[1]' has shape f32[2], expected dimensions [2, 3, 4]"):
        map_shape("Map", [f32, xs.Shape.array_shape(np.float32, (2,))], (0, 1, 2))
    with raises(xs.DTypeError, "Map: operand 'operands[1]' is f64[2,3,4] but 'operands[0]' is f32[2,3,4]"):
        map_shape("Map", [f32, xs.Shape.array_shape(np.float64, (2, 3, 4))], (0, 1, 2))


# -- batch normalization --------------------------------------------------------------------------

def _bn_stats(x: np.ndarray[Any, Any], fi: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The per-feature mean and biased variance over every dimension but ``fi`` (float64)."""
    axes = tuple(d for d in range(x.ndim) if d != fi)
    x64 = x.astype(np.float64)
    return x64.mean(axis=axes), x64.var(axis=axes)


def _along(v: np.ndarray[Any, Any], ndim: int, fi: int) -> np.ndarray[Any, Any]:
    """The (F,) vector ``v`` shaped to broadcast along dimension ``fi`` of a rank-``ndim`` array."""
    return v.astype(np.float64).reshape([-1 if d == fi else 1 for d in range(ndim)])


def bn_inference_oracle(x: Any, scale: Any, offset: Any, mean: Any, var: Any, eps: float, fi: int) -> Any:
    n = x.ndim
    inv = 1.0 / np.sqrt(_along(var, n, fi) + eps)
    return (x.astype(np.float64) - _along(mean, n, fi)) * inv * _along(scale, n, fi) + _along(offset, n, fi)


def bn_grad_oracle(x: Any, scale: Any, mean: Any, var: Any, dy: Any, eps: float, fi: int) -> tuple[Any, Any, Any]:
    """The standard backward pass: xhat = (x - mean) / sqrt(var + eps); d_offset = sum(dy);
    d_scale = sum(dy * xhat); dx = scale / sqrt(var + eps) * (dy - d_offset / N - xhat * d_scale / N)."""
    n = x.ndim
    axes = tuple(d for d in range(n) if d != fi)
    count = x.size // x.shape[fi]
    inv = 1.0 / np.sqrt(_along(var, n, fi) + eps)
    xhat = (x.astype(np.float64) - _along(mean, n, fi)) * inv
    dy64 = dy.astype(np.float64)
    d_offset = dy64.sum(axis=axes)
    d_scale = (dy64 * xhat).sum(axis=axes)
    dx = _along(scale, n, fi) * inv * (dy64 - _along(d_offset, n, fi) / count - xhat * _along(d_scale, n, fi) / count)
    return dx, d_scale, d_offset


def _close(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any], dtype: Any) -> None:
    assert got.dtype == np.dtype(dtype) and got.shape == want.shape
    tol = 1e-4 if np.dtype(dtype) == np.float32 else 1e-10
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


@pytest.mark.parametrize(("dtype", "dims", "fi"), [
    (np.float32, (2, 3, 4), 1), (np.float32, (2, 3, 4), 0), (np.float32, (5, 2), 1), (np.float64, (4, 3), 1),
    (np.float32, (6,), 0),
])
def test_batch_norm_training_values(dtype: Any, dims: tuple[int, ...], fi: int) -> None:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(dims) * 3 + 1).astype(dtype)
    f = dims[fi]
    scale, offset = rng.uniform(0.5, 2, f).astype(dtype), rng.standard_normal(f).astype(dtype)
    b = xs.XlaBuilder("bn_training")
    X, Sc, Of = (ops.Parameter(b, i, xs.shape_from_pyval(a)) for i, a in enumerate((x, scale, offset)))
    r = ops.BatchNormTraining(X, Sc, Of, 1e-3, fi)
    assert r.shape == S.tuple_shape([X.shape, Sc.shape, Sc.shape])
    assert r.attrs == {"epsilon": ma.F32(1e-3), "feature_index": fi} and type(r.attrs["epsilon"]) is ma.F32
    comp = b.build(r)
    assert "epsilon = 1.000000e-03 : f32" in comp.as_stablehlo_text()
    assert f"batch-norm-training(%p0.1, %p1.1, %p2.1), epsilon=0.001, feature_index={fi}" in comp.as_hlo_text()
    out, mean, var = run(comp, x, scale, offset)
    want_mean, want_var = _bn_stats(x, fi)
    _close(mean, want_mean, dtype)
    _close(var, want_var, dtype)
    _close(out, bn_inference_oracle(x, scale, offset, want_mean, want_var, float(np.float32(1e-3)), fi), dtype)
    assert check_direct_hlo(comp, x, scale, offset)


@pytest.mark.parametrize(("dtype", "dims", "fi"), [(np.float32, (2, 3, 4), 2), (np.float64, (3, 2), 0)])
def test_batch_norm_inference_values(dtype: Any, dims: tuple[int, ...], fi: int) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal(dims).astype(dtype)
    f = dims[fi]
    vecs = [rng.uniform(0.5, 2, f).astype(dtype), rng.standard_normal(f).astype(dtype),
            rng.standard_normal(f).astype(dtype), rng.uniform(0.1, 3, f).astype(dtype)]
    b = xs.XlaBuilder("bn_inference")
    params = [ops.Parameter(b, i, xs.shape_from_pyval(a)) for i, a in enumerate([x, *vecs])]
    r = ops.BatchNormInference(*params, np.float32(0.25), fi)
    assert r.shape == params[0].shape and r.attrs == {"epsilon": 0.25, "feature_index": fi}
    comp = b.build(r)
    (got,) = run(comp, x, *vecs)
    _close(got, bn_inference_oracle(x, *vecs, 0.25, fi), dtype)
    assert check_direct_hlo(comp, x, *vecs)


@pytest.mark.parametrize(("dtype", "dims", "fi"), [(np.float32, (2, 3, 4), 1), (np.float64, (5, 3), 0)])
def test_batch_norm_grad_values(dtype: Any, dims: tuple[int, ...], fi: int) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal(dims).astype(dtype)
    dy = rng.standard_normal(dims).astype(dtype)
    f = dims[fi]
    scale = rng.uniform(0.5, 2, f).astype(dtype)
    m, v = _bn_stats(x, fi)
    mean, var = m.astype(dtype), v.astype(dtype)
    b = xs.XlaBuilder("bn_grad")
    params = [ops.Parameter(b, i, xs.shape_from_pyval(a)) for i, a in enumerate([x, scale, mean, var, dy])]
    r = ops.BatchNormGrad(*params, 1e-2, fi)
    assert r.shape == S.tuple_shape([params[0].shape, params[1].shape, params[1].shape])
    comp = b.build(r)
    got = run(comp, x, scale, mean, var, dy)
    eps = float(np.float32(1e-2))
    for g, w in zip(got, bn_grad_oracle(x, scale, mean, var, dy, eps, fi), strict=True):
        _close(g, w, dtype)
    assert check_direct_hlo(comp, x, scale, mean, var, dy)


def test_batch_norm_grad_oracle_matches_finite_differences() -> None:
    """The oracle above is the gradient of the training normalization (sum(out * dy)) in float64."""
    rng = np.random.default_rng(3)
    x, dy, scale = rng.standard_normal((3, 2)), rng.standard_normal((3, 2)), np.array([1.5, 0.5])
    eps, h = 1e-3, 1e-6

    def loss(xx: Any) -> float:
        m, v = _bn_stats(xx, 1)
        return float((bn_inference_oracle(xx, scale, np.zeros(2), m, v, eps, 1) * dy).sum())

    m, v = _bn_stats(x, 1)
    dx, _, _ = bn_grad_oracle(x, scale, m, v, dy, eps, 1)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = h
        assert abs((loss(x + e) - loss(x - e)) / (2 * h) - dx[idx]) < 1e-6


def test_batch_norm_non_finite_epsilon_uses_xla_converter() -> None:
    b = xs.XlaBuilder("bn_inf_eps")
    x = ops.Parameter(b, 0, S.array_shape(np.float32, (2, 2)))
    v = [ops.Parameter(b, i, S.array_shape(np.float32, (2,))) for i in range(1, 5)]
    comp = b.build(ops.BatchNormInference(x, *v, float("inf"), 1))
    assert "epsilon = 0x7F800000 : f32" in comp.as_stablehlo_text()
    assert "batch-norm-inference" in comp.as_hlo_text()
    args = [np.ones((2, 2), np.float32)] + [np.full(2, k, np.float32) for k in (2, 3, 0, 1)]
    (got,) = run(comp, *args)
    np.testing.assert_array_equal(got, np.full((2, 2), 3, np.float32))  # (x - mean) / inf * scale + offset
    assert not check_direct_hlo(comp, *args)  # HLO text has no inf epsilon: XLA's converter prints it


def test_f32_attribute_value() -> None:
    assert ma.render(ma.F32(1e-3)) == "1.000000047e-03 : f32"
    assert ma.render(ma.F32(-2.5)) == "-2.500000000e+00 : f32"
    assert ma.render(ma.F32(float("-inf"))) == "0xFF800000 : f32"
    assert ma.render(ma.F32(float("nan"))) == "0x7FC00000 : f32"
    assert ma.F32(0.1) == float(np.float32(0.1))


def test_batch_norm_shape_rules() -> None:
    from xlasdk.ops.reduce import batch_norm_grad_shape, batch_norm_inference_shape, batch_norm_training_shape

    x, v3, v4 = S.array_shape(np.float32, (2, 3, 4)), S.array_shape(np.float32, (3,)), S.array_shape(np.float32, (4,))
    h3, i3 = S.array_shape(np.float16, (3,)), S.array_shape(np.int32, (2, 3, 4))
    T, I, G = batch_norm_training_shape, batch_norm_inference_shape, batch_norm_grad_shape
    assert T("BatchNormTraining", x, v3, v3, 1) == S.tuple_shape([x, v3, v3])
    assert T("BatchNormTraining", x, v4, v4, 2) == S.tuple_shape([x, v4, v4])
    assert I("BatchNormInference", x, v3, v3, v3, v3, 1) == x
    assert G("BatchNormGrad", x, v4, v4, v4, x, 2) == S.tuple_shape([x, v4, v4])
    with raises(xs.DTypeError, "BatchNormTraining: operand 'operand' must be floating-point, got s32[2,3,4]"):
        T("BatchNormTraining", i3, v3, v3, 1)
    with raises(xs.ShapeError, "BatchNormTraining: feature_index must be a dimension number in [0, 3)", "got 3"):
        T("BatchNormTraining", x, v3, v3, 3)
    with raises(xs.ShapeError, "feature_index must be a dimension number in [0, 3)", "got -1"):
        I("BatchNormInference", x, v3, v3, v3, v3, -1)
    with raises(xs.ShapeError, "BatchNormTraining: feature_index must be a dimension number in [0, 0)"):
        T("BatchNormTraining", S.array_shape(np.float32, ()), v3, v3, 0)
    with raises(xs.ShapeError, "BatchNormTraining: operand 'offset' must be f32[3] (1-D, the size of dimension 1",
                "got f32[4]"):
        T("BatchNormTraining", x, v3, v4, 1)
    with raises(xs.ShapeError, "operand 'scale' must be f32[3]", "got f32[1,3]"):
        T("BatchNormTraining", x, S.array_shape(np.float32, (1, 3)), v3, 1)
    with raises(xs.DTypeError, "BatchNormInference: operand 'variance' is f16[3], expected f32[3] like operand"):
        I("BatchNormInference", x, v3, v3, v3, h3, 1)
    with raises(xs.ShapeError, "BatchNormInference: operand 'mean' must be f32[3]", "got f32[4]"):
        I("BatchNormInference", x, v3, v3, v4, v3, 1)
    with raises(xs.ShapeError, "BatchNormGrad: operand 'grad_output' has shape f32[2,3], expected the shape"):
        G("BatchNormGrad", x, v3, v3, v3, S.array_shape(np.float32, (2, 3)), 1)
    with raises(xs.DTypeError, "BatchNormGrad: operand 'grad_output' is f64[2,3,4], expected f32[2,3,4]"):
        G("BatchNormGrad", x, v3, v3, v3, S.array_shape(np.float64, (2, 3, 4)), 1)
    with raises(xs.DTypeError, "BatchNormGrad: operand 'mean' is f16[3]"):
        G("BatchNormGrad", x, v3, h3, v3, x, 1)


def test_batch_norm_errors() -> None:
    b = xs.XlaBuilder("bn_err")
    x = ops.Parameter(b, 0, S.array_shape("f32", [2, 3]))
    v = ops.Parameter(b, 1, S.array_shape("f32", [3]))
    i = ops.Parameter(b, 2, S.array_shape("s32", [2, 3]))
    h = ops.Parameter(b, 3, S.array_shape("f16", [3]))
    w = ops.Parameter(b, 4, S.array_shape("f32", [2]))
    other = ops.Parameter(xs.XlaBuilder("other"), 0, S.array_shape("f32", [3]))
    tok = ops.CreateToken(b)
    with raises(xs.DTypeError, "BatchNormTraining: operand 'scale' must be an XlaOp, got ndarray"):
        ops.BatchNormTraining(x, np.ones(3, np.float32), v, 1e-3, 1)
    with raises(xs.ShapeError, "BatchNormTraining: operand 'offset' must be an array, got token[]"):
        ops.BatchNormTraining(x, v, tok, 1e-3, 1)
    with raises(xs.ShapeError, "BatchNormInference: operand 'mean' belongs to builder 'other'"):
        ops.BatchNormInference(x, v, v, other, v, 1e-3, 1)
    with raises(xs.ShapeError, "BatchNormTraining: feature_index must be an int, got str '1'"):
        ops.BatchNormTraining(x, v, v, 1e-3, "1")
    with raises(xs.ShapeError, "BatchNormTraining: feature_index must be an int, got bool True"):
        ops.BatchNormTraining(x, v, v, 1e-3, True)
    with raises(xs.ShapeError, "BatchNormGrad: feature_index must be a dimension number in [0, 2)", "got 2"):
        ops.BatchNormGrad(x, v, v, v, x, 1e-3, 2)
    with raises(xs.DTypeError, "BatchNormTraining: epsilon must be a float, got str '0.1'"):
        ops.BatchNormTraining(x, v, v, "0.1", 1)
    with raises(xs.DTypeError, "BatchNormInference: epsilon must be a float, got bool True"):
        ops.BatchNormInference(x, v, v, v, v, True, 1)
    with raises(xs.DTypeError, "BatchNormGrad: epsilon must be a float, got NoneType"):
        ops.BatchNormGrad(x, v, v, v, x, None, 1)
    with raises(xs.ShapeError, "BatchNormTraining: epsilon 1e+40 is beyond the range of f32"):
        ops.BatchNormTraining(x, v, v, 1e40, 1)
    with raises(xs.DTypeError, "BatchNormTraining: operand 'operand' must be floating-point, got s32[2,3]"):
        ops.BatchNormTraining(i, v, v, 1e-3, 1)
    with raises(xs.DTypeError, "BatchNormInference: operand 'scale' is f16[3], expected f32[3]"):
        ops.BatchNormInference(x, h, v, v, v, 1e-3, 1)
    with raises(xs.ShapeError, "BatchNormInference: operand 'offset' must be f32[2]", "got f32[3]"):
        ops.BatchNormInference(x, w, v, w, w, 1e-3, 0)
    with raises(xs.ShapeError, "BatchNormGrad: operand 'grad_output' has shape f32[3]"):
        ops.BatchNormGrad(x, v, v, v, v, 1e-3, 1)
    assert ops.BatchNormTraining(x, v, v, 1, np.int64(1)).attrs == {"epsilon": 1.0, "feature_index": 1}


@PARAM_AND_CONST
def test_max_min_reduce_propagate_nan(const: bool) -> None:
    """Case C-01 (shared/cases/cases.md): a Max/Min reduction with a NaN anywhere in the operand is NaN, as
    parameters and as folded constants."""
    cases: list[tuple[np.ndarray[Any, Any], str]] = [
        (np.array([NAN, 1.0], np.float32), "max"),
        (np.array([1.0, NAN], np.float32), "max"),
        (np.array([NAN, 1.0], np.float64), "max"),
        (np.array([NAN, 1.0], np.float32), "min"),
        (np.array([7, NAN, -2.5, 11, 0.25], np.float32), "max"),
    ]
    b = xs.XlaBuilder("c01")
    xs_ = case_inputs(b, [c[0] for c in cases], const)
    outs = []
    for x, (a, kind) in zip(xs_, cases, strict=True):
        init = ops.Constant(b, a.dtype.type(-INF if kind == "max" else INF))
        f = ops.Max if kind == "max" else ops.Min
        outs.append(ops.Reduce(b, x, init, lambda p, q, f=f: f(p, q), [0]))
    res = run_case(b, outs, [c[0] for c in cases], const)
    for r, (a, _) in zip(res, cases, strict=True):
        assert r.shape == () and r.dtype == a.dtype
        assert np.isnan(r), (a, r)


def test_reduce_and_map_reject_mixed_float_precisions() -> None:
    """Found by the shape-rule fuzzer: Reduce and Map of floating-point operands of different precisions are
    rejected: Reduce(f32[3], bf16[3]) failed in XLA's HLO verifier ("Seen floating point types of different
    precisions in %reduce.1 = (f32[], bf16[]) reduce(...), but mixed precision is disallowed"). Float beside integer
    or complex operands stays allowed."""
    b = xs.XlaBuilder("mixed")
    x, y = param(b, 0, np.float32, (3,)), param(b, 1, ml_dtypes.bfloat16, (3,))
    ix, iy = param(b, 2, np.float32, ()), param(b, 3, ml_dtypes.bfloat16, ())

    def add2(a0: xs.XlaOp, a1: xs.XlaOp, x0: xs.XlaOp, x1: xs.XlaOp) -> tuple[xs.XlaOp, xs.XlaOp]:
        return ops.Add(a0, x0), ops.Add(a1, x1)

    with raises(DTypeError, "Reduce", "operands[1]", "bf16[3]", "f32[3]", "different precisions"):
        ops.Reduce(b, [x, y], [ix, iy], add2, [0])
    with raises(DTypeError, "Map", "operands[1]", "bf16[3]"):
        ops.Map(b, [x, y], lambda u, v: u, [0])
    # other mixes stay allowed: float with integer or complex operands
    n, c = param(b, 4, np.int32, (3,)), param(b, 5, np.complex64, (3,))
    i_n, i_c = param(b, 6, np.int32, ()), param(b, 7, np.complex64, ())
    r = ops.Reduce(b, [x, n, c], [ix, i_n, i_c], lambda *a: tuple(ops.Add(a[i], a[3 + i]) for i in range(3)), [0])
    m = ops.Map(b, [x, n], lambda u, v: ops.Add(u, ops.ConvertElementType(v, np.float32)), [0])
    outs = run(
        b.build(ops.Tuple(b, [ops.GetTupleElement(r, i) for i in range(3)] + [m])),
        np.array([1, 2, 3], np.float32), np.zeros(3, ml_dtypes.bfloat16), np.float32(0), ml_dtypes.bfloat16(0),
        np.array([4, 5, 6], np.int32), np.array([1j, 2, 3], np.complex64), np.int32(0), np.complex64(0),
    )
    assert outs[0] == 6 and outs[1] == 15 and outs[2] == 5 + 1j
    np.testing.assert_array_equal(outs[3], [5, 7, 9])


def test_reduce_rejects_two_bit_beside_other_widths() -> None:
    """Found by the shape-rule fuzzer: a variadic Reduce of a 2-bit operand beside operands of other widths is
    rejected (it failed to compile on XLA:CPU); 2-bit operands together still reduce, wrapping around."""
    # Reduce(u2[1,2,4], u64[1,2,4], dimensions [0, 1, 2]) failed to compile on XLA:CPU: "RET_CHECK
    # failure (reduce_decomposer.cc:95) reduce->case_inputs()[i]->shape().layout() == ...".
    b = xs.XlaBuilder("r2")
    x, y = param(b, 0, ml_dtypes.uint2, (1, 2, 4)), param(b, 1, np.uint64, (1, 2, 4))
    ix, iy = param(b, 2, ml_dtypes.uint2, ()), param(b, 3, np.uint64, ())

    def add2(a0: xs.XlaOp, a1: xs.XlaOp, x0: xs.XlaOp, x1: xs.XlaOp) -> tuple[xs.XlaOp, xs.XlaOp]:
        return ops.Add(a0, x0), ops.Add(a1, x1)

    with raises(DTypeError, "Reduce", "operands[0]", "u2[1,2,4]", "2-bit"):
        ops.Reduce(b, [x, y], [ix, iy], add2, [0, 1, 2])
    # 2-bit operands together still reduce (sums wrap around modulo 4)
    z, iz = param(b, 4, ml_dtypes.int2, (1, 2, 4)), param(b, 5, ml_dtypes.int2, ())
    r = ops.Reduce(b, [x, z], [ix, iz], add2, [0, 1, 2])
    xv = np.array([[[1, 2, 3, 0], [1, 1, 1, 1]]], ml_dtypes.uint2)
    zv = np.array([[[1, -2, 1, 0], [-1, 1, 1, 1]]], ml_dtypes.int2)
    outs = run(b.build(ops.Tuple(b, [ops.GetTupleElement(r, 0), ops.GetTupleElement(r, 1)])), xv,
               np.zeros((1, 2, 4), np.uint64), ml_dtypes.uint2(0), np.uint64(0), zv, ml_dtypes.int2(0))
    assert int(outs[0]) == 10 % 4 and int(outs[1]) == (2 + 2) % 4 - 2
