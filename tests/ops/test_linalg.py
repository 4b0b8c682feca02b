"""Tests of Dot and DotGeneral in xlasdk/ops/linalg.py (precision, preferred element type, errors)."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import PerTestRng, assert_device_close, param, raises, run, skip_where_device_defines_otherwise
from xlasdk import ops

RNG = PerTestRng(7)  # per test: values that do not depend on the order of the suite


def sample(shape: tuple[int, ...], dtype: Any) -> np.ndarray[Any, Any]:
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        return RNG.integers(-5 if dt.kind == "i" else 0, 6, shape).astype(dt)
    if dt.kind == "c":
        return (RNG.normal(size=shape) + 1j * RNG.normal(size=shape)).astype(dt)
    if dt.kind == "b":
        return RNG.random(shape) < 0.5
    return RNG.normal(size=shape).astype(dt)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.complex64, np.uint8])
def test_dot_all_rank_combinations(dtype: Any) -> None:
    if dtype is np.float64:
        skip_where_device_defines_otherwise("tpu-f64-emulated")
    v3, w3 = sample((3,), dtype), sample((3,), dtype)
    m23, m34 = sample((2, 3), dtype), sample((3, 4), dtype)
    b = xs.XlaBuilder("dot")
    V, W, A, B = (ops.Parameter(b, i, xs.shape_from_pyval(a)) for i, a in enumerate((v3, w3, m23, m34)))
    outs = [ops.Dot(V, W), ops.Dot(A, V), ops.Dot(V, B), ops.Dot(A, B), A @ B, V @ W]
    assert [o.dims for o in outs] == [(), (2,), (4,), (2, 4), (2, 4), ()]
    r = run(b.build(outs), v3, w3, m23, m34)
    wants = [v3 @ w3, m23 @ v3, v3 @ m34, m23 @ m34, m23 @ m34, v3 @ w3]
    for o, want in zip(r, wants, strict=True):
        assert o.dtype == np.dtype(dtype)
        if np.dtype(dtype).kind in "fc":
            assert_device_close(o, want, rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_array_equal(o, want)


def test_dot_pred_and_bf16() -> None:
    p, q = sample((2, 3), np.bool_), sample((3, 2), np.bool_)
    x = np.array([[1.0, 2.0], [3.0, 4.0]], ml_dtypes.bfloat16)
    b = xs.XlaBuilder("dot2")
    Pp, Q = ops.Parameter(b, 0, xs.shape_from_pyval(p)), ops.Parameter(b, 1, xs.shape_from_pyval(q))
    X = ops.Constant(b, x)
    o1, o2 = run(b.build([ops.Dot(Pp, Q), ops.Dot(X, X)]), p, q)
    np.testing.assert_array_equal(o1, (p.astype(int) @ q.astype(int)) > 0)  # or of ands
    assert o2.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(o2.astype(np.float32), [[7, 10], [15, 22]])


EINSUMS = [
    # (lhs shape, rhs shape, ((lc, rc), (lb, rb)), einsum)
    ((2, 3, 4), (2, 4, 5), (([2], [1]), ([0], [0])), "bij,bjk->bik"),
    ((2, 3, 4), (2, 5, 4), (([2], [2]), ([0], [0])), "bij,bkj->bik"),
    ((3, 2, 4), (4, 2, 5), (([2], [0]), ([1], [1])), "ibj,jbk->bik"),  # batch dims not leading
    ((2, 3, 4, 5), (2, 4, 5, 6), (([2, 3], [1, 2]), ([0], [0])), "bijk,bjkl->bil"),  # two contracting dims
    ((2, 3, 4), (3, 2, 5), (([], []), ([0, 1], [1, 0])), "abi,baj->abij"),  # two batch dims, nothing contracted
    ((3, 4), (5, 6), (([], []), ([], [])), "ij,kl->ijkl"),  # outer product
    ((3, 4), (4, 3), (([0, 1], [1, 0]), ([], [])), "ij,ji->"),  # full contraction
]


@pytest.mark.parametrize(("ls", "rs", "dn", "spec"), EINSUMS, ids=[e[3] for e in EINSUMS])
def test_dot_general_vs_einsum(ls: tuple[int, ...], rs: tuple[int, ...], dn: Any, spec: str) -> None:
    x, y = sample(ls, np.float32), sample(rs, np.float32)
    xi, yi = sample(ls, np.int32), sample(rs, np.int32)
    (lc, rc), (lb, rb) = dn
    obj = xs.DotDimensionNumbers(lhs_contracting_dimensions=lc, rhs_contracting_dimensions=rc, lhs_batch_dimensions=lb,
                                 rhs_batch_dimensions=rb)
    proto = xs.DotDimensionNumbers()  # former proto style: fill the lists
    for field, vals in (("lhs_contracting_dimensions", lc), ("rhs_contracting_dimensions", rc),
                        ("lhs_batch_dimensions", lb), ("rhs_batch_dimensions", rb)):
        getattr(proto, field).extend(vals)
    b = xs.XlaBuilder("dg")
    X, Y, XI, YI = (ops.Parameter(b, i, xs.shape_from_pyval(a)) for i, a in enumerate((x, y, xi, yi)))
    outs = [ops.DotGeneral(X, Y, dn), ops.DotGeneral(X, Y, obj), ops.DotGeneral(X, Y, proto),
            ops.DotGeneral(XI, YI, dn)]
    want = np.einsum(spec, x.astype(np.float64), y.astype(np.float64))
    assert all(o.dims == want.shape for o in outs)
    r = run(b.build(outs), x, y, xi, yi)
    for o in r[:3]:
        assert_device_close(o, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(r[3], np.einsum(spec, xi, yi))


def test_precision_config_in_hlo() -> None:
    b = xs.XlaBuilder("prec")
    x = ops.Parameter(b, 0, xs.Shape.array_shape("f32", [2, 3]))
    y = ops.Parameter(b, 1, xs.Shape.array_shape("f32", [3, 4]))
    Pr = xs.PrecisionConfig.Precision
    d1 = ops.Dot(x, y, precision_config=xs.PrecisionConfig([Pr.HIGHEST, Pr.DEFAULT]))
    pc = xs.PrecisionConfig()  # proto style
    pc.operand_precision.append(Pr.HIGH)  # one entry applies to both operands
    d2 = ops.Dot(x, y, precision_config=pc)
    d3 = ops.DotGeneral(x, y, (([1], [0]), ([], [])), precision_config=xs.PrecisionConfig(["highest", "high"]))
    d4 = ops.Dot(x, y, precision_config=xs.PrecisionConfig())  # empty: no attribute
    hlo = b.build([d1, d2, d3, d4]).as_hlo_text()
    dots = [ln for ln in hlo.splitlines() if " dot(" in ln]
    assert len(dots) == 4
    assert "operand_precision={highest,default}" in dots[0]
    assert "operand_precision={high,high}" in dots[1]
    assert "operand_precision={highest,high}" in dots[2]
    assert "operand_precision" not in dots[3]


def test_preferred_element_type() -> None:
    a = np.array([[100, -100, 127], [1, 2, 3]], np.int8)
    c = np.array([[100, 1], [100, 2], [127, 3]], np.int8)
    u4 = np.array([[15, 7], [1, 0]], ml_dtypes.uint4)
    s4 = np.array([[-8, 7], [3, -1]], ml_dtypes.int4)
    bf = np.array([[256.0, 1.0]], ml_dtypes.bfloat16)
    ones = np.array([[1.0], [1.0]], ml_dtypes.bfloat16)
    b = xs.XlaBuilder("pref")
    A, C = ops.Parameter(b, 0, xs.shape_from_pyval(a)), ops.Parameter(b, 1, xs.shape_from_pyval(c))
    outs = [
        ops.Dot(A, C, preferred_element_type=np.int32),
        ops.DotGeneral(A, C, (([1], [0]), ([], [])), preferred_element_type="s32"),
        ops.Dot(A, C, preferred_element_type=np.float32),
        ops.Dot(ops.Constant(b, bf), ops.Constant(b, ones), preferred_element_type=np.float32),
        ops.Dot(ops.Constant(b, bf), ops.Constant(b, ones)),  # accumulates in bf16: 257 -> 256
        ops.Dot(ops.Constant(b, u4), ops.Constant(b, u4), preferred_element_type=np.int32),  # sub-byte operands
        ops.Dot(ops.Constant(b, s4), ops.Constant(b, s4), preferred_element_type=xs.PrimitiveType.S32),
    ]
    assert [str(o.shape) for o in outs] == ["s32[2,2]", "s32[2,2]", "f32[2,2]", "f32[1,1]", "bf16[1,1]", "s32[2,2]",
                                            "s32[2,2]"]
    r = run(b.build(outs), a, c)
    want = a.astype(np.int64) @ c.astype(np.int64)
    assert want.max() > 127  # would overflow s8
    np.testing.assert_array_equal(r[0], want)
    np.testing.assert_array_equal(r[1], want)
    np.testing.assert_array_equal(r[2], want.astype(np.float32))
    assert r[3].dtype == np.float32 and r[3][0, 0] == 257.0
    assert float(r[4][0, 0]) == 256.0
    np.testing.assert_array_equal(r[5], u4.astype(np.int32) @ u4.astype(np.int32))
    np.testing.assert_array_equal(r[6], s4.astype(np.int32) @ s4.astype(np.int32))


def test_dot_errors() -> None:
    b = xs.XlaBuilder("dot_err")
    x = ops.Parameter(b, 0, xs.Shape.array_shape("f32", [2, 3]))
    y = ops.Parameter(b, 1, xs.Shape.array_shape("f32", [3, 4]))
    i = ops.Parameter(b, 2, xs.Shape.array_shape("s32", [3, 4]))
    x3 = ops.Parameter(b, 3, xs.Shape.array_shape("f32", [1, 2, 3]))
    s = ops.Parameter(b, 4, xs.Shape.array_shape("f32", []))
    other = ops.Parameter(xs.XlaBuilder("other"), 0, xs.Shape.array_shape("f32", [3, 4]))
    with raises(xs.ShapeError, "Dot: operand 'lhs' must have rank 1 or 2, got f32[1,2,3] (use DotGeneral)"):
        ops.Dot(x3, y)
    with raises(xs.ShapeError, "Dot: operand 'rhs' must have rank 1 or 2, got f32[]"):
        ops.Dot(x, s)
    with raises(xs.ShapeError, "Dot: operand 'rhs' has shape f32[2,3]; its first dimension must equal", "the last dimension of 'lhs' f32[2,3] (3)"):  # noqa: E501
        ops.Dot(x, x)
    with raises(xs.DTypeError, "Dot: operand 'rhs' has element type s32[3,4], expected f32 like 'lhs' f32[2,3]"):
        ops.Dot(x, i)
    with raises(xs.ShapeError, "Dot: operand 'rhs' belongs to builder 'other'"):
        ops.Dot(x, other)
    with raises(xs.DTypeError, "Dot: operand 'rhs' must be an XlaOp, got str"):
        ops.Dot(x, "y")  # type: ignore[arg-type]
    with raises(xs.DTypeError, "Dot: preferred_element_type s32 is not compatible with f32 operands"):
        ops.Dot(x, y, preferred_element_type=np.int32)
    with raises(xs.DTypeError, "Dot: preferred_element_type c64 is not compatible"):
        ops.Dot(x, y, preferred_element_type=np.complex64)
    with raises(xs.DTypeError, "Dot: preferred_element_type 'foo' is not an XLA element type"):
        ops.Dot(x, y, preferred_element_type="foo")
    with raises(xs.ShapeError, "Dot: precision_config has 3 operand precisions"):
        ops.Dot(x, y, precision_config=xs.PrecisionConfig(["HIGH"] * 3))
    with raises(xs.DTypeError, "Dot: precision_config must be an xs.PrecisionConfig, got str"):
        ops.Dot(x, y, precision_config="HIGH")
    bad = xs.PrecisionConfig()
    bad.operand_precision.append("FOO")
    with raises(xs.ShapeError, "Dot: precision_config: unknown Precision 'FOO'"):
        ops.Dot(x, y, precision_config=bad)


def test_dot_general_errors() -> None:
    b = xs.XlaBuilder("dg_err")
    x = ops.Parameter(b, 0, xs.Shape.array_shape("f32", [2, 3]))
    y = ops.Parameter(b, 1, xs.Shape.array_shape("f32", [3, 4]))
    z = ops.Parameter(b, 2, xs.Shape.array_shape("f32", [5, 3, 4]))
    DN = xs.DotDimensionNumbers
    with raises(xs.ShapeError, "DotGeneral: lhs_contracting_dimensions [2] must be distinct dimension numbers < 2"):
        ops.DotGeneral(x, y, (([2], [0]), ([], [])))
    with raises(xs.ShapeError, "DotGeneral: bad dimension_numbers", "must have the same length"):
        ops.DotGeneral(x, y, (([1], [0, 1]), ([], [])))
    with raises(xs.ShapeError, "DotGeneral: contracting dimension 0 of 'lhs' f32[2,3] has size 2,", "but contracting dimension 0 of 'rhs' f32[3,4] has size 3"):  # noqa: E501
        ops.DotGeneral(x, y, (([0], [0]), ([], [])))
    with raises(xs.ShapeError, "DotGeneral: batch dimension 0 of 'lhs' f32[2,3] has size 2,", "but batch dimension 0 of 'rhs' f32[5,3,4] has size 5"):  # noqa: E501
        ops.DotGeneral(x, z, (([1], [1]), ([0], [0])))
    with raises(xs.ShapeError, "DotGeneral: bad dimension_numbers", "share dimensions [0]"):
        ops.DotGeneral(x, x, (([0], [0]), ([0], [0])))
    with raises(xs.ShapeError, "DotGeneral: bad dimension_numbers 'junk'"):
        ops.DotGeneral(x, y, "junk")
    with raises(xs.ShapeError, "DotGeneral: bad dimension_numbers", "repeated"):
        ops.DotGeneral(x, y, (([1, 1], [0, 0]), ([], [])))
    with raises(xs.ShapeError, "DotGeneral: rhs_contracting_dimensions [7] must be distinct dimension numbers < 2"):
        ops.DotGeneral(x, y, DN(lhs_contracting_dimensions=[1], rhs_contracting_dimensions=[7]))
    with raises(xs.DTypeError, "DotGeneral: operand 'rhs' has element type f64[3,4]"):
        ops.DotGeneral(x, ops.ConvertElementType(y, np.float64), (([1], [0]), ([], [])))
    tup = ops.Parameter(b, 3, xs.Shape.tuple_shape([]))
    with raises(xs.ShapeError, "DotGeneral: operand 'lhs' must be an array, got ()"):
        ops.DotGeneral(tup, y, (([1], [0]), ([], [])))


# -- pure shape rules (no builder) ----------------------------------------------------------------

def _s(dtype: Any, *dims: int) -> xs.Shape:
    return xs.Shape.array_shape(np.dtype(dtype), dims)


def test_dot_general_shape_rule() -> None:
    from xlasdk.ops.linalg import dot_general_shape

    dn = xs.DotDimensionNumbers(
        lhs_contracting_dimensions=[2], rhs_contracting_dimensions=[1],
        lhs_batch_dimensions=[0], rhs_batch_dimensions=[0],
    )
    lhs, rhs = _s(np.float32, 5, 2, 3), _s(np.float32, 5, 3, 4)
    assert dot_general_shape("DotGeneral", lhs, rhs, dn, None) == _s(np.float32, 5, 2, 4)
    assert dot_general_shape("DotGeneral", lhs, rhs, dn, np.float64) == _s(np.float64, 5, 2, 4)
    s8 = _s(np.int8, 5, 2, 3), _s(np.int8, 5, 3, 4)
    assert dot_general_shape("DotGeneral", *s8, dn, np.int32) == _s(np.int32, 5, 2, 4)
    with raises(xs.ShapeError, "DotGeneral: contracting dimension 2 of 'lhs' f32[5,2,3] has size 3", "size 4"):
        dot_general_shape("DotGeneral", lhs, _s(np.float32, 5, 4, 4), dn, None)
    with raises(xs.DTypeError, "DotGeneral: operand 'rhs' has element type s32[5,3,4], expected f32"):
        dot_general_shape("DotGeneral", lhs, _s(np.int32, 5, 3, 4), dn, None)
    bad = xs.DotDimensionNumbers(lhs_contracting_dimensions=[3], rhs_contracting_dimensions=[1])
    with raises(xs.ShapeError, "DotGeneral: lhs_contracting_dimensions [3] must be distinct dimension numbers < 3"):
        dot_general_shape("DotGeneral", lhs, rhs, bad, None)


def test_dot_shape_rule() -> None:
    from xlasdk.ops.linalg import dot_shape

    assert dot_shape("Dot", _s(np.float32, 3), _s(np.float32, 3), None) == _s(np.float32)
    assert dot_shape("Dot", _s(np.float32, 2, 3), _s(np.float32, 3), None) == _s(np.float32, 2)
    assert dot_shape("Dot", _s(np.float32, 3), _s(np.float32, 3, 4), None) == _s(np.float32, 4)
    assert dot_shape("Dot", _s(np.float32, 2, 3), _s(np.float32, 3, 4), None) == _s(np.float32, 2, 4)
    with raises(xs.ShapeError, "Dot: operand 'lhs' must have rank 1 or 2, got f32[1,2,3] (use DotGeneral)"):
        dot_shape("Dot", _s(np.float32, 1, 2, 3), _s(np.float32, 3), None)
    with raises(xs.ShapeError, "Dot: operand 'rhs' has shape f32[2,3]; its first dimension must equal"):
        dot_shape("Dot", _s(np.float32, 2, 3), _s(np.float32, 2, 3), None)


def test_cholesky_triangular_solve_shape_rules() -> None:
    from xlasdk.ops.linalg import cholesky_shape, triangular_solve_shape

    a = _s(np.float32, 2, 4, 4)
    assert cholesky_shape("Cholesky", a) == a
    with raises(xs.ShapeError, "Cholesky: operand 'a' must be square in its last two dimensions", "f32[4,3]"):
        cholesky_shape("Cholesky", _s(np.float32, 4, 3))
    with raises(xs.DTypeError, "Cholesky: operand 'a' must be f32, f64, c64 or c128, got s32[4,4]"):
        cholesky_shape("Cholesky", _s(np.int32, 4, 4))
    with raises(xs.ShapeError, "Cholesky: operand 'a' is f32[65537,65537]", "at most 65536"):
        cholesky_shape("Cholesky", xs.Shape.array_shape(np.float32, (65537, 65537)))
    b = _s(np.float32, 2, 4, 7)
    assert triangular_solve_shape("TriangularSolve", a, b, True) == b
    assert triangular_solve_shape("TriangularSolve", a, _s(np.float32, 2, 7, 4), False) == _s(np.float32, 2, 7, 4)
    with raises(xs.ShapeError, "TriangularSolve: operand 'b' has shape f32[2,4,7]; with left_side=False its last"):
        triangular_solve_shape("TriangularSolve", a, b, False)
    with raises(xs.ShapeError, "TriangularSolve: operand 'b' has shape f32[3,4,7]; expected the batch dimensions [2]"):
        triangular_solve_shape("TriangularSolve", a, _s(np.float32, 3, 4, 7), True)
    with raises(xs.DTypeError, "TriangularSolve: operand 'b' has element type f64[2,4,7], expected f32 like 'a'"):
        triangular_solve_shape("TriangularSolve", a, _s(np.float64, 2, 4, 7), True)


def test_two_bit_dot_general_and_conv_wrap_around() -> None:
    """Found by the shape-rule fuzzer: DotGeneral (and ConvGeneralDilated) of 2-bit integer operands compile, and the
    2-bit result wraps around like any integer result."""
    # DotGeneral(s2[2,3], s2[3,2]) failed to compile: "UNIMPLEMENTED: unsupported operand type S2 in
    # op dot" (the same for convolution); the 2-bit result wraps around like any integer result.
    s2 = ml_dtypes.int2
    b = xs.XlaBuilder("s2")
    p, q = param(b, 0, s2, (2, 3)), param(b, 1, s2, (3, 2))
    d = ops.DotGeneral(p, q, (([1], [0]), ([], [])))
    x, w = param(b, 2, ml_dtypes.uint2, (1, 2, 3)), param(b, 3, ml_dtypes.uint2, (2, 2, 2))
    c = ops.ConvGeneralDilated(x, w, [1], [(0, 0)])
    assert d.shape == xs.Shape.array_shape(s2, (2, 2)) and c.shape == xs.Shape.array_shape(ml_dtypes.uint2, (1, 2, 2))
    pv = np.array([[1, -2, 1], [-1, 0, 1]], s2)
    qv = np.array([[1, 1], [-1, 0], [1, -2]], s2)
    xv = np.array([[[1, 2, 3], [0, 1, 2]]], ml_dtypes.uint2)
    wv = np.array([[[1, 1], [2, 0]], [[3, 1], [0, 1]]], ml_dtypes.uint2)
    outs = run(b.build(ops.Tuple(b, [d, c])), pv, qv, xv, wv)
    exact = pv.astype(np.int64) @ qv.astype(np.int64)
    np.testing.assert_array_equal(outs[0].astype(np.int64), (exact + 2) % 4 - 2)
    xi, wi = xv.astype(np.int64), wv.astype(np.int64)
    conv = np.array([[[sum(xi[0, ci, t + k] * wi[o, ci, k] for ci in range(2) for k in range(2)) for t in range(2)]
                      for o in range(2)]])
    np.testing.assert_array_equal(outs[1].astype(np.int64), conv % 4)
