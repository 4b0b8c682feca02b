"""Tests of xlasdk/ops/control.py: While, Conditional, Call (and the region bindings they use)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import assert_device_close, raises, run
from xlasdk import ops
from xlasdk.errors import DTypeError, ShapeError
from xlasdk.ops.control import (
    case_index_check,
    conditional_shape,
    get_tuple_element_shape,
    if_pred_check,
    tuple_shape,
    while_shape,
)

S = xs.Shape


def scalar(b: xs.XlaBuilder, v: Any, dtype: Any) -> xs.XlaOp:
    return ops.Constant(b, np.asarray(v, dtype=dtype))


def computation(name: str, shapes: list[S], fn: Any) -> xs.XlaComputation:
    """An XlaComputation built by its own builder, as in xla_client code."""
    sb = xs.XlaBuilder(name)
    params = [ops.Parameter(sb, i, s) for i, s in enumerate(shapes)]
    return sb.build(fn(*params))


# -- C-09 ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32])
def test_C09_while_init_constant_and_parameter(dtype: Any) -> None:
    b = xs.XlaBuilder("c09")
    cond = lambda i: ops.Lt(i, scalar(i.builder, 1, dtype))  # noqa: E731
    body = lambda i: ops.Add(i, scalar(i.builder, 2, dtype))  # noqa: E731
    from_const = ops.While(cond, body, scalar(b, 0, dtype))
    from_param = ops.While(cond, body, ops.Parameter(b, 0, S.scalar_shape(dtype)))
    out = run(b.build([from_const, from_param]), np.asarray(0, dtype))
    for r in out:
        assert r.dtype == np.dtype(dtype) and r == 2


def test_C09_while_tuple_carry() -> None:
    b = xs.XlaBuilder("c09t")
    init = ops.Tuple(b, [scalar(b, 0, np.int32), scalar(b, 1, np.int32)])
    w = ops.While(
        lambda i, acc: ops.Lt(i, scalar(i.builder, 5, np.int32)),
        lambda i, acc: (i + 1, acc * 2),
        init,
    )
    i, acc = run(b.build([ops.GetTupleElement(w, 0), ops.GetTupleElement(w, 1)]))
    assert (int(i), int(acc)) == (5, 32)


def test_C09_while_zero_trip() -> None:
    b = xs.XlaBuilder("c09z")
    p = ops.Parameter(b, 0, S.scalar_shape(np.int32))
    w = ops.While(lambda i: ops.Lt(i, scalar(i.builder, 0, np.int32)), lambda i: i + 1, p)
    (out,) = run(b.build(w), np.int32(7))
    assert out == 7


def test_C09_conditional_index_out_of_range_runs_last_branch() -> None:
    b = xs.XlaBuilder("c09c")
    x = scalar(b, 0, np.int32)
    branches = [lambda v, k=k: v + k for k in (10, 20, 30)]
    indices = [1, -1, 7, 0, 2, 3]
    outs = [
        ops.Conditional(ops.Parameter(b, n, S.scalar_shape(np.int32)), branches, [x, x, x])
        for n in range(len(indices))
    ]
    got = run(b.build(outs), *[np.int32(i) for i in indices])
    assert [int(g) for g in got] == [20, 30, 30, 10, 30, 30]


# -- While -----------------------------------------------------------------------------------------

def test_while_mixed_dtype_tuple_carry_matches_python_loop() -> None:
    """Carry (i s32, x f32[3], acc s64, flag pred), n iterations from a parameter."""
    b = xs.XlaBuilder("mixed")
    n = ops.Parameter(b, 0, S.scalar_shape(np.int32))
    x0 = ops.Parameter(b, 1, S.array_shape(np.float32, (3,)))
    init = ops.Tuple(b, [scalar(b, 0, np.int32), x0, scalar(b, 2**40, np.int64), scalar(b, False, np.bool_), n])

    def body(carry: xs.XlaOp) -> xs.XlaOp:
        sb = carry.builder
        i, x, acc, flag, m = (ops.GetTupleElement(carry, k) for k in range(5))
        acc2 = acc + ops.ConvertElementType(i * i, np.int64)
        return ops.Tuple(sb, [i + 1, x * 0.5 + 1.0, acc2, ops.Not(flag), m])

    w = ops.While(lambda i, x, acc, flag, m: ops.Lt(i, m), body, init)
    outs = run(b.build([ops.GetTupleElement(w, k) for k in range(4)]), np.int32(7), np.array([1, -4, 64], np.float32))
    x = np.array([1, -4, 64], np.float32)
    acc = 2**40
    for i in range(7):
        x = x * np.float32(0.5) + np.float32(1.0)
        acc += i * i
    assert int(outs[0]) == 7
    np.testing.assert_array_equal(outs[1], x)
    assert outs[2].dtype == np.int64 and int(outs[2]) == acc
    assert outs[3].dtype == np.bool_ and bool(outs[3]) is True


def test_while_with_xla_computations_and_one_tuple_argument() -> None:
    carry = S.tuple_shape([S.scalar_shape(np.int32), S.array_shape(np.float32, (2,))])
    cond = computation("cond", [carry], lambda t: ops.Lt(ops.GetTupleElement(t, 0), scalar(t.builder, 3, np.int32)))

    def body_fn(t: xs.XlaOp) -> xs.XlaOp:
        i, v = ops.GetTupleElement(t, 0), ops.GetTupleElement(t, 1)
        return ops.Tuple(t.builder, [i + 1, v * v])

    body = computation("body", [carry], body_fn)
    b = xs.XlaBuilder("comps")
    init = ops.Tuple(b, [scalar(b, 0, np.int32), ops.Parameter(b, 0, S.array_shape(np.float32, (2,)))])
    w = ops.While(cond, body, init)
    w_again = ops.While(cond, body, ops.Tuple(b, [scalar(b, 2, np.int32), ops.GetTupleElement(w, 1)]))
    comp = b.build([ops.GetTupleElement(w, 1), ops.GetTupleElement(w_again, 1)])
    assert comp.as_hlo_text().count(" while(") == 2
    a, c = run(comp, np.array([2, 1.5], np.float32))
    np.testing.assert_array_equal(a, np.array([256, 1.5**8], np.float32))
    np.testing.assert_array_equal(c, a * a)


def test_while_one_element_tuple_carry_and_list_result() -> None:
    b = xs.XlaBuilder("one")
    init = ops.Tuple(b, [scalar(b, 1.0, np.float32)])
    w = ops.While(lambda t: ops.Lt(ops.GetTupleElement(t, 0), scalar(t.builder, 100, np.float32)),
                  lambda t: [ops.GetTupleElement(t, 0) * 3.0], init)
    (out,) = run(b.build(ops.GetTupleElement(w, 0)))
    assert out == 243.0


def test_nested_while_and_conditional_in_body() -> None:
    """sum_{i<n} (i even ? sum_{j<i} j : -i), with an inner While and a Conditional in the body."""
    b = xs.XlaBuilder("nested")
    n = ops.Parameter(b, 0, S.scalar_shape(np.int32))

    def inner_sum(i: xs.XlaOp) -> xs.XlaOp:
        sb = i.builder
        t = ops.While(
            lambda j, s, lim: ops.Lt(j, lim), lambda j, s, lim: (j + 1, s + j, lim),
            ops.Tuple(sb, [scalar(sb, 0, np.int32), scalar(sb, 0, np.int32), i]),
        )
        return ops.GetTupleElement(t, 1)

    def body(i: xs.XlaOp, total: xs.XlaOp, m: xs.XlaOp) -> tuple[xs.XlaOp, ...]:
        even = ops.Eq(i % 2, scalar(i.builder, 0, np.int32))
        term = ops.Conditional(even, i, inner_sum, i, lambda v: -v)
        return (i + 1, total + term, m)

    init = ops.Tuple(b, [scalar(b, 0, np.int32), scalar(b, 0, np.int32), n])
    w = ops.While(lambda i, total, m: ops.Lt(i, m), body, init)
    (out,) = run(b.build(ops.GetTupleElement(w, 1)), np.int32(9))
    expected = sum(sum(range(i)) if i % 2 == 0 else -i for i in range(9))
    assert int(out) == expected


# -- Conditional -----------------------------------------------------------------------------------

def test_conditional_boolean_form_with_different_operands() -> None:
    b = xs.XlaBuilder("ifelse")
    pt = ops.Parameter(b, 0, S.scalar_shape(np.bool_))
    pf = ops.Parameter(b, 1, S.scalar_shape(np.bool_))
    x = ops.Parameter(b, 2, S.array_shape(np.float32, (3,)))
    pair = ops.Tuple(b, [scalar(b, 4, np.int32), x])

    def on_false(k: xs.XlaOp, v: xs.XlaOp) -> xs.XlaOp:
        return ops.ConvertElementType(k, np.float32) - v

    outs = [ops.Conditional(p, x, lambda v: v * v, pair, on_false) for p in (pt, pf)]
    comp = b.build(outs)
    assert "stablehlo.if" in comp.as_stablehlo_text()
    xv = np.array([1, 2, -3], np.float32)
    yes, no = run(comp, np.bool_(True), np.bool_(False), xv)
    np.testing.assert_array_equal(yes, xv * xv)
    np.testing.assert_array_equal(no, 4 - xv)


def test_conditional_keywords_tuple_results_and_identity_branch() -> None:
    b = xs.XlaBuilder("kw")
    x = ops.Parameter(b, 0, S.array_shape(np.int32, (2,)))
    outs = []
    for n in (1, 2):
        c = ops.Conditional(
            pred=ops.Parameter(b, n, S.scalar_shape(np.bool_)),
            true_operand=x, true_computation=lambda v: (v, v + 1),
            false_operand=x, false_computation=lambda v: ops.Tuple(v.builder, [v * 10, v * 20]),
        )
        outs += [ops.GetTupleElement(c, 0), ops.GetTupleElement(c, 1)]
    got = run(b.build(outs), np.array([1, 2], np.int32), np.bool_(True), np.bool_(False))
    for g, e in zip(got, [[1, 2], [2, 3], [10, 20], [20, 40]], strict=True):
        np.testing.assert_array_equal(g, e)


def test_conditional_index_with_computations_and_xla_client_order() -> None:
    shp = S.array_shape(np.float32, (2,))
    double = computation("double", [shp], lambda v: v * 2.0)
    negate = computation("negate", [shp], lambda v: -v)
    b = xs.XlaBuilder("case")
    x = ops.Parameter(b, 0, shp)
    y = ops.Parameter(b, 1, shp)
    i0 = ops.Parameter(b, 2, S.scalar_shape(np.int32))
    i1 = ops.Parameter(b, 3, S.scalar_shape(np.int32))
    first = ops.Conditional(i0, [double, negate, double], [x, y, y])  # xla_client: computations, operands
    second = ops.Conditional(i1, [x, y], [negate, double])  # operands first, also accepted
    third = ops.Conditional(branch_index=i1, branch_computations=[double], branch_operands=[y])
    comp = b.build([first, second, third])
    assert "stablehlo.case" in comp.as_stablehlo_text()
    xv, yv = np.array([1, 2], np.float32), np.array([5, -7], np.float32)
    a, c, d = run(comp, xv, yv, np.int32(1), np.int32(1))
    np.testing.assert_array_equal(a, -yv)
    np.testing.assert_array_equal(c, 2 * yv)
    np.testing.assert_array_equal(d, 2 * yv)


def test_conditional_bindings_count_as_dependencies() -> None:
    """Branch operands are reached through the region bindings (is_constant, emission)."""
    b = xs.XlaBuilder("deps")
    p = ops.Parameter(b, 0, S.scalar_shape(np.float32))
    k = scalar(b, 2.0, np.float32)
    t = scalar(b, True, np.bool_)
    on_param = ops.Conditional(t, p, lambda v: v + 1.0, k, lambda v: v)
    on_const = ops.Conditional(t, k, lambda v: v + 1.0, k, lambda v: v)
    assert not b.is_constant(on_param)
    assert b.is_constant(on_const)
    a, c = run(b.build([on_param, on_const]), np.float32(5))
    assert (float(a), float(c)) == (6.0, 3.0)


# -- Call ------------------------------------------------------------------------------------------

def test_call_computation_and_callable() -> None:
    shp = S.array_shape(np.float32, (2,))
    sumprod = computation("sumprod", [shp, shp], lambda u, v: ops.Tuple(u.builder, [u + v, u * v]))
    b = xs.XlaBuilder("caller")
    x = ops.Parameter(b, 0, shp)
    y = ops.Parameter(b, 1, shp)
    c1 = ops.Call(b, sumprod, [x, y])
    c2 = ops.Call(b, sumprod, [y, y])  # the same callee with other operands
    c3 = ops.Call(b, lambda u: ops.Exp(u) - 1.0, [ops.GetTupleElement(c1, 1)])
    outs = [ops.GetTupleElement(c1, 0), ops.GetTupleElement(c1, 1), ops.GetTupleElement(c2, 1), c3]
    xv, yv = np.array([1, 2], np.float32), np.array([0.5, -1], np.float32)
    got = run(b.build(outs), xv, yv)
    np.testing.assert_array_equal(got[0], xv + yv)
    np.testing.assert_array_equal(got[1], xv * yv)
    np.testing.assert_array_equal(got[2], yv * yv)
    assert_device_close(got[3], np.expm1(xv * yv), rtol=1e-6)


def test_call_of_a_computation_with_a_loop_inside_a_loop_body() -> None:
    shp = S.scalar_shape(np.int32)

    def pow2(e: xs.XlaOp) -> xs.XlaOp:  # 2**e by a While
        sb = e.builder
        t = ops.While(lambda k, v, m: ops.Lt(k, m), lambda k, v, m: (k + 1, v * 2, m),
                      ops.Tuple(sb, [scalar(sb, 0, np.int32), scalar(sb, 1, np.int32), e]))
        return ops.GetTupleElement(t, 1)

    pow2_comp = computation("pow2", [shp], pow2)
    b = xs.XlaBuilder("outer")
    n = ops.Parameter(b, 0, shp)
    w = ops.While(lambda i, acc, m: ops.Lt(i, m),
                  lambda i, acc, m: (i + 1, acc + ops.Call(i.builder, pow2_comp, [i]), m),
                  ops.Tuple(b, [scalar(b, 0, np.int32), scalar(b, 0, np.int32), n]))
    (out,) = run(b.build(ops.GetTupleElement(w, 1)), np.int32(6))
    assert int(out) == 2**6 - 1


# -- errors ----------------------------------------------------------------------------------------

def test_while_body_result_mismatch_names_body() -> None:
    b = xs.XlaBuilder("e")
    init = ops.Tuple(b, [scalar(b, 0, np.int32), scalar(b, 1.0, np.float32)])
    cond = lambda i, x: ops.Lt(i, scalar(i.builder, 3, np.int32))  # noqa: E731
    with raises(ShapeError, "While: body returns s32[] but must return the carry's shape (s32[], f32[])"):
        ops.While(cond, lambda i, x: (i + 1,), init)
    with raises(ShapeError, "While: body returns (s32[], f64[])", "(s32[], f32[])"):
        ops.While(cond, lambda i, x: (i + 1, ops.ConvertElementType(x, np.float64)), init)


def test_while_body_signature_mismatch_names_body() -> None:
    b = xs.XlaBuilder("e")
    x = scalar(b, 0, np.int32)
    cond = lambda i: ops.Lt(i, scalar(i.builder, 3, np.int32))  # noqa: E731
    wrong = computation("wrong_body", [S.scalar_shape(np.float32)], lambda v: v)
    with raises(ShapeError, "While: body 'wrong_body' takes (f32[]) but must take (s32[])"):
        ops.While(cond, wrong, x)
    with raises(ShapeError, "While: body", "takes 2 arguments but 1 are passed (s32[])"):
        ops.While(cond, lambda i, j: i, x)


def test_while_cond_errors() -> None:
    b = xs.XlaBuilder("e")
    x = scalar(b, 0, np.int32)
    with raises(ShapeError, "While: cond returns s32[] but must return pred[]"):
        ops.While(lambda i: i, lambda i: i + 1, x)
    vec = ops.Constant(b, np.zeros(2, np.int32))
    with raises(ShapeError, "While: cond returns pred[2] but must return pred[]"):
        ops.While(lambda v: ops.Lt(v, v), lambda v: v, vec)
    wrong = computation("wrong_cond", [S.scalar_shape(np.int64)], lambda v: ops.Lt(v, v))
    with raises(ShapeError, "While: cond 'wrong_cond' takes (s64[]) but must take (s32[])"):
        ops.While(wrong, lambda i: i, x)


def test_while_bad_init_and_captures() -> None:
    b = xs.XlaBuilder("e")
    with raises(DTypeError, "While: operand 'init' must be an XlaOp, got int"):
        ops.While(lambda i: i, lambda i: i, 3)  # type: ignore[arg-type]
    nested = ops.Tuple(b, [scalar(b, 0, np.int32), ops.Tuple(b, [scalar(b, 0, np.int32)])])
    with raises(ShapeError, "While: operand 'init' has the nested tuple shape (s32[], (s32[]))"):
        ops.While(lambda i, t: ops.Lt(i, i), lambda i, t: (i, t), nested)
    outer = scalar(b, 1, np.int32)
    with raises(ShapeError, "operand 'rhs' belongs to builder 'e', but 'lhs' belongs to 'e.cond'"):
        ops.While(lambda i: ops.Lt(i, outer), lambda i: i, outer)
    with raises(ShapeError, "While: body returned an op of builder 'e'"):
        ops.While(lambda i: ops.Lt(i, i), lambda i: outer, outer)
    with raises(DTypeError, "While: body must be an XlaComputation or a callable, got str"):
        ops.While(lambda i: ops.Lt(i, i), "body", outer)


def test_conditional_errors() -> None:
    b = xs.XlaBuilder("e")
    x = scalar(b, 1.0, np.float32)
    i = scalar(b, 0, np.int32)
    p = scalar(b, True, np.bool_)
    ident = lambda v: v  # noqa: E731
    with raises(ShapeError, "Conditional: branch_computations[1] returns s32[] but branch_computations[0] returns f32[]"):  # noqa: E501
        ops.Conditional(i, [ident, lambda v: ops.ConvertElementType(v, np.int32)], [x, x])
    with raises(ShapeError, "Conditional: false_computation returns s32[] but true_computation returns f32[]"):
        ops.Conditional(p, x, ident, i, ident)
    with raises(DTypeError, "Conditional: operand 'branch_index' must be s32[], got f32[]"):
        ops.Conditional(x, [ident], [x])
    with raises(DTypeError, "Conditional: operand 'branch_index' is pred"):
        ops.Conditional(p, [ident, ident], [x, x])
    with raises(ShapeError, "Conditional: operand 'branch_index' must be a scalar s32[], got s32[2]"):
        ops.Conditional(ops.Constant(b, np.zeros(2, np.int32)), [ident], [x])
    with raises(DTypeError, "Conditional: operand 'pred' must be pred[], got s32[]"):
        ops.Conditional(i, x, ident, x, ident)
    with raises(ShapeError, "Conditional: 2 branch_computations but 1 branch_operands"):
        ops.Conditional(i, [ident, ident], [x])
    with raises(ShapeError, "Conditional: branch_computations is empty"):
        ops.Conditional(i, [], [])
    with raises(DTypeError, "Conditional: takes (branch_index, branch_computations, branch_operands) or (pred,"):
        ops.Conditional(p, x, ident, x)  # type: ignore[call-overload]
    with raises(ShapeError, "Conditional: branch_computations[0] 'takes_s32' takes (s32[]) but must take (f32[])"):
        ops.Conditional(i, [computation("takes_s32", [S.scalar_shape(np.int32)], ident)], [x])


def test_call_errors() -> None:
    b = xs.XlaBuilder("e")
    x = scalar(b, 1.0, np.float32)
    two = computation("two", [S.scalar_shape(np.float32)] * 2, lambda u, v: u + v)
    with raises(ShapeError, "Call: computation 'two' takes (f32[], f32[]) but must take (f32[])"):
        ops.Call(b, two, [x])
    with raises(DTypeError, "Call: operands must be a list or tuple of XlaOps, got XlaOp"):
        ops.Call(b, two, x)  # type: ignore[arg-type]
    own = b.build(x + 1.0)
    with raises(ShapeError, "Call: computation 'e' was built by builder 'e' itself"):
        ops.Call(b, own, [])
    other = scalar(xs.XlaBuilder("other"), 1.0, np.float32)
    with raises(ShapeError, "Call: operand 'operands[1]' belongs to builder 'other'"):
        ops.Call(b, two, [x, other])


# -- the pure shape rules, without a builder -------------------------------------------------------


def test_tuple_rules() -> None:
    f, i = S.array_shape(np.float32, (2,)), S.scalar_shape(np.int32)
    t = tuple_shape([f, i])
    assert t == S.tuple_shape([f, i]) and t.tuple_shapes() == (f, i)
    assert get_tuple_element_shape("GetTupleElement", t, 1) == i
    with raises(ShapeError, "GetTupleElement:", "index 2 out of range for tuple", "of 2 elements"):
        get_tuple_element_shape("GetTupleElement", t, 2)
    with raises(ShapeError, "operand 'tuple_data' must be a tuple, got f32[2]"):
        get_tuple_element_shape("GetTupleElement", f, 0)


def test_while_rule() -> None:
    f, p = S.array_shape(np.float32, (3,)), S.scalar_shape(np.bool_)
    carry = S.tuple_shape([f, S.scalar_shape(np.int32)])
    assert while_shape("While", carry) == carry
    assert while_shape("While", carry, p, carry) == carry
    assert while_shape("While", S.tuple_shape([f]), p, f) == S.tuple_shape([f])  # a 1-tuple's one element
    with raises(ShapeError, "While:", "operand 'init' is an empty tuple"):
        while_shape("While", S.tuple_shape([]))
    with raises(ShapeError, "nested tuple shape"):
        while_shape("While", S.tuple_shape([carry, f]))
    with raises(ShapeError, "cond returns f32[3] but must return pred[]"):
        while_shape("While", f, f)
    with raises(ShapeError, "body returns pred[] but must return the carry's shape f32[3]"):
        while_shape("While", f, p, p)


def test_conditional_rules() -> None:
    f, i = S.array_shape(np.float32, (2,)), S.scalar_shape(np.int32)
    names = ["true_computation", "false_computation"]
    assert conditional_shape("Conditional", [f, f], names) == f
    with raises(ShapeError, "Conditional:", "false_computation returns s32[] but true_computation returns f32[2]"):
        conditional_shape("Conditional", [f, i], names)
    nested = S.tuple_shape([S.tuple_shape([f]), i])
    with raises(ShapeError, "true_computation returns the nested tuple"):
        conditional_shape("Conditional", [nested], names)
    if_pred_check("Conditional", S.scalar_shape(np.bool_))
    with raises(DTypeError, "operand 'pred' must be pred[], got s32[]"):
        if_pred_check("Conditional", i)
    with raises(ShapeError, "operand 'pred' must be a scalar pred[], got pred[2]"):
        if_pred_check("Conditional", S.array_shape(np.bool_, (2,)))
    case_index_check("Conditional", i)
    with raises(DTypeError, "operand 'branch_index' is pred"):
        case_index_check("Conditional", S.scalar_shape(np.bool_))
    with raises(DTypeError, "operand 'branch_index' must be s32[], got s64[]"):
        case_index_check("Conditional", S.scalar_shape(np.int64))
    with raises(ShapeError, "operand 'branch_index' must be a scalar s32[], got s32[2]"):
        case_index_check("Conditional", S.array_shape(np.int32, (2,)))
