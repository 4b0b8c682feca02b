"""Tests of xlasdk/builder.py: XlaBuilder.build and its roots, shapes, program shapes, XlaOp
properties and is_constant."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import raises, run
from xlasdk import ops

S = xs.Shape


def test_build_default_root_is_last_op() -> None:
    b = xs.XlaBuilder("last")
    x = ops.Parameter(b, 0, S.array_shape("f32", [3]))
    ops.Mul(x, x)
    last = ops.Add(x, 1.0)
    comp = b.build()
    assert comp.name == "last"
    assert comp.program_shape().result_shape() == last.shape
    (out,) = run(comp, np.array([1, 2, 3], np.float32))
    np.testing.assert_array_equal(out, [2, 3, 4])  # the Add, not the Mul
    hlo = comp.as_hlo_text()
    assert "ROOT" in hlo and "multiply" not in hlo  # ops the root does not use are dropped


def test_build_explicit_and_tuple_roots() -> None:
    b = xs.XlaBuilder("roots")
    x = ops.Parameter(b, 0, S.array_shape("s32", [2]))
    m = ops.Mul(x, x)
    n = ops.Neg(x)
    a = ops.Add(m, n)
    c_m = b.build(m)  # an earlier op as root
    c_list = b.build([m, n])  # a list: tuple result
    c_tuple = b.build(ops.Tuple(b, [a, x, m]))
    c_nested = b.build([a, ops.Tuple(b, [m, n])])
    arg = np.array([2, -3], np.int32)
    np.testing.assert_array_equal(run(c_m, arg)[0], [4, 9])
    assert str(c_list.program_shape().result_shape()) == "(s32[2], s32[2])"
    r = run(c_list, arg)
    assert len(r) == 2
    np.testing.assert_array_equal(r[0], [4, 9])
    np.testing.assert_array_equal(r[1], [-2, 3])
    r = run(c_tuple, arg)
    assert [list(v) for v in r] == [[2, 12], [2, -3], [4, 9]]
    assert str(c_nested.program_shape().result_shape()) == "(s32[2], (s32[2], s32[2]))"


def test_get_shape_and_program_shape() -> None:
    b = xs.XlaBuilder("shapes")
    x = ops.Parameter(b, 0, S.array_shape("f32", [2, 3]), "x")
    y = ops.Parameter(b, 1, S.scalar_shape("s8"))
    ops.Parameter(b, 2, S.tuple_shape([S.array_shape("f32", [4]), S.scalar_shape("pred")]), "t")
    r = ops.Reduce(b, x, ops.Constant(b, np.float32(0)), ops.Add, [1])
    assert b.get_shape(x) == S.array_shape("f32", [2, 3]) == x.shape
    assert b.get_shape(r) == S.array_shape("f32", [2])
    ps = b.get_program_shape()  # root: the last op
    assert ps.result_shape() == r.shape
    assert [str(s) for s in ps.parameter_shapes()] == ["f32[2,3]", "s8[]", "(f32[4], pred[])"]
    assert ps.parameter_names() == ("x", "p1", "t")
    assert b.get_program_shape(y).result_shape() == S.scalar_shape("s8")
    comp = b.build(r)
    assert comp.program_shape() == ps
    assert str(comp.program_shape()) == "(x: f32[2,3], p1: s8[], t: (f32[4], pred[])) -> f32[2]"


def test_xla_op_properties() -> None:
    b = xs.XlaBuilder("props")
    x = ops.Parameter(b, 0, S.array_shape("bf16", [2, 3, 4]))
    s = ops.Constant(b, np.int16(3))
    t = ops.Tuple(b, [x, s])
    assert x.shape == S.array_shape("bfloat16", [2, 3, 4])
    assert x.dtype == np.dtype(xs.bfloat16) and x.dims == (2, 3, 4) and x.ndim == 3
    assert x.builder is b
    assert s.dtype == np.int16 and s.dims == () and s.ndim == 0
    assert repr(x) == "XlaOp(parameter: bf16[2,3,4], builder='props')"
    assert repr(ops.Neg(x)) == "XlaOp(negate: bf16[2,3,4], builder='props')"
    assert t.shape.is_tuple() and t.ndim == 0
    with pytest.raises(xs.DTypeError):
        t.dtype  # noqa: B018 - a tuple has no dtype
    assert x == x and x != s and len({x, s, x}) == 2  # identity equality, hashable
    with pytest.raises(TypeError, match="XlaOp has no truth value"):
        if x:
            pass
    assert repr(xs.XlaBuilder("r")) == "XlaBuilder('r', 0 ops)"


def test_is_constant() -> None:
    b = xs.XlaBuilder("const")
    x = ops.Parameter(b, 0, S.array_shape("f32", [2]))
    c = ops.Constant(b, np.array([1.0, 2.0], np.float32))
    i = ops.Iota(b, np.float32, 2)
    folded = ops.Mul(ops.Add(c, i), 2.0)
    mixed = ops.Add(folded, x)
    red = ops.Reduce(b, folded, ops.Constant(b, np.float32(0)), ops.Add, [0])
    assert b.is_constant(c) and b.is_constant(i) and b.is_constant(folded) and b.is_constant(red)
    assert not b.is_constant(x) and not b.is_constant(mixed)
    assert b.is_constant(ops.Tuple(b, [c, i])) and not b.is_constant(ops.Tuple(b, [c, x]))


def test_builder_errors() -> None:
    b = xs.XlaBuilder("berr")
    o = xs.XlaBuilder("other")
    x = ops.Parameter(b, 0, S.array_shape("f32", [2]))
    y = ops.Parameter(o, 0, S.array_shape("f32", [2]))
    with raises(xs.ShapeError, "build: builder 'empty' has no ops"):
        xs.XlaBuilder("empty").build()
    with raises(xs.ShapeError, "builder 'empty' has no ops"):
        xs.XlaBuilder("empty").get_program_shape()
    with raises(xs.ShapeError, "build: op belongs to builder 'other', not 'berr'"):
        b.build(y)
    with raises(xs.DTypeError, "build: expected an XlaOp, got int"):
        b.build(5)  # type: ignore[arg-type]
    with raises(xs.ShapeError, "Tuple", "belongs to builder 'other'"):
        b.build([x, y])
    with raises(xs.ShapeError, "get_shape: op belongs to builder 'other', not 'berr'"):
        b.get_shape(y)
    with raises(xs.DTypeError, "get_shape: expected an XlaOp, got str"):
        b.get_shape("x")  # type: ignore[arg-type]
    with raises(xs.ShapeError, "is_constant: op belongs to builder 'other'"):
        b.is_constant(y)
    with raises(xs.ShapeError, "XlaBuilder: name must be a non-empty str, got ''"):
        xs.XlaBuilder("")
    with raises(xs.DTypeError, "XlaBuilder: name must be a non-empty str, got int 3"):
        xs.XlaBuilder(3)
    with raises(xs.ShapeError, "Add: operand 'rhs' belongs to builder 'other', but 'lhs' belongs to 'berr'"):
        ops.Add(x, y)


def test_names_with_odd_characters_build() -> None:
    b = xs.XlaBuilder("my model/v1 (test)")
    x = ops.Parameter(b, 0, S.array_shape("f32", [2]), 'in "quoted"')
    comp = b.build(ops.Exp(x))
    assert comp.name == "my model/v1 (test)"
    np.testing.assert_allclose(run(comp, np.array([0.0, 1.0], np.float32))[0], [1.0, np.e], rtol=1e-6)


@pytest.mark.parametrize("route", ["built", "loaded"])
def test_a_chain_of_4000_ops_compiles_and_runs(route: str, tmp_path: Any) -> None:
    """Issue 17, finding 2: a 4,000-multiply chain failed with "Unknown MLIR failure" after 42-61 s,
    built op by op and loaded from HLO text alike. It compiles in about a second now."""
    n = 4000
    b = xs.XlaBuilder("chain")
    h = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (4,)), "x")
    c = ops.Constant(b, np.float32(1.0001))
    for _ in range(n):
        h = ops.Mul(h, c)
    comp = b.build(h)
    if route == "loaded":
        path = tmp_path / "chain.hlo"
        path.write_text(comp.as_hlo_text())
        comp = xs.load_computation(path)
    got = xs.compile(comp, "cpu:0")(np.full(4, 2.0, np.float32)).to_numpy()
    np.testing.assert_allclose(got, 2.0 * 1.0001**n, rtol=2e-4)  # 4,000 roundings of f32, in some order


def test_a_chain_of_10000_mixed_elementwise_ops_compiles_and_runs() -> None:
    """Issue 36, item 4: a 10,000-op chain (multiply, add, subtract, maximum, negate twice) built op
    by op compiles (about 2 s here) and computes what numpy computes step by step in f32."""
    n = 10_000
    b = xs.XlaBuilder("chain10k")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (5,)), "x")
    half, quarter = ops.Constant(b, np.float32(0.5)), ops.Constant(b, np.float32(0.25))
    v = np.array([-3.0, -0.5, 0.0, 1.25, 7.0], np.float32)
    h, want = x, v.copy()
    for i in range(n):
        k = i % 5
        if k == 0:
            h, want = ops.Mul(h, half), want * np.float32(0.5)
        elif k == 1:
            h, want = ops.Add(h, x), want + v
        elif k == 2:
            h, want = ops.Sub(h, quarter), want - np.float32(0.25)
        elif k == 3:
            h, want = ops.Max(h, ops.Neg(x)), np.maximum(want, -v)
        else:
            h, want = ops.Neg(ops.Neg(h)), want
    comp = b.build(h)
    got = xs.compile(comp, "cpu:0")(v).to_numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)
