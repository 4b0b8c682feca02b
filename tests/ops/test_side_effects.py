"""Tests of xlasdk/ops/side_effects.py: CreateToken, AfterAll, OptimizationBarrier, CustomCall,
CustomCallWithLayout, InfeedWithToken, OutfeedWithToken.

Custom calls run against targets XLA's CPU compiler really has (``TopK``, ``Sharding``);
infeed/outfeed need a host transfer runtime, so they are checked as built HLO.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import param, raises, run
from xlasdk import ops
from xlasdk.errors import DTypeError, ShapeError
from xlasdk.ops.custom_call import ShardySharding, custom_call_operand_check, custom_call_target_check, topk_check
from xlasdk.ops.side_effects import infeed_shape, optimization_barrier_shape, outfeed_check

S = xs.Shape


def topk_shape(dims: tuple[int, ...], index_dtype: Any = np.int32) -> xs.Shape:
    """(f32[dims], s32[dims]): the result of XLA CPU's TopK target."""
    return S.tuple_shape([S.array_shape(np.float32, dims), S.array_shape(index_dtype, dims)])


def run_in_subprocess(body: str) -> None:
    code = "import numpy as np, xlasdk as xs\nfrom xlasdk import ops\nS = xs.Shape\n" + textwrap.dedent(body)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().endswith("ok"), r.stdout


# -- tokens and barriers --------------------------------------------------------------------------

def test_tokens_and_optimization_barrier_pass_values_through() -> None:
    b = xs.XlaBuilder("tok")
    x = np.array([[1.5, -2.0, 3.25]], np.float32)
    n = np.array([7, -3], np.int64)
    px, pn = param(b, 0, np.float32, (1, 3)), param(b, 1, np.int64, (2,))
    t0 = ops.CreateToken(b)
    t1 = ops.AfterAll(b, [t0, ops.CreateToken(b)])
    t2 = ops.AfterAll(b, [])
    assert t0.shape == S.token_shape() and t1.shape.is_token() and t2.shape.is_token()
    bar = ops.OptimizationBarrier(ops.Tuple(b, [px, pn, t1, ops.Constant(b, np.array([0.5, 1.0], ml_dtypes.bfloat16))]))
    assert bar.shape.leaf_count() == 4 and bar.shape.tuple_shapes()[2].is_token()
    single = ops.OptimizationBarrier(px)
    assert single.shape == px.shape
    tok_only = ops.OptimizationBarrier(t2)
    assert tok_only.shape.is_token()
    comp = b.build(ops.Tuple(b, [
        ops.GetTupleElement(bar, 0) * 2.0,
        ops.GetTupleElement(bar, 1),
        single,
        ops.ConvertElementType(ops.GetTupleElement(bar, 3), np.float32),
    ]))
    got = run(comp, x, n)
    np.testing.assert_array_equal(got[0], x * 2)
    np.testing.assert_array_equal(got[1], n)
    assert got[1].dtype == np.int64
    np.testing.assert_array_equal(got[2], x)
    np.testing.assert_array_equal(got[3], [0.5, 1.0])
    hlo = b.build(ops.Tuple(b, [ops.GetTupleElement(bar, 0), ops.GetTupleElement(bar, 2), tok_only])).as_hlo_text()
    assert "opt-barrier(" in hlo and "after-all()" in hlo
    assert "token[] after-all(%after-all" in hlo  # AfterAll joining two tokens


def test_token_errors() -> None:
    b = xs.XlaBuilder("e")
    p = param(b, 0, np.float32, (2,))
    t = ops.CreateToken(b)
    with raises(ShapeError, "AfterAll", "operand 'tokens[1]' must be a token", "f32[2]"):
        ops.AfterAll(b, [t, p])
    with raises(DTypeError, "AfterAll", "tokens must be a list or tuple"):
        ops.AfterAll(b, t)  # type: ignore[arg-type]
    other = ops.CreateToken(xs.XlaBuilder("other"))
    with raises(ShapeError, "AfterAll", "operand 'tokens[0]' belongs to builder 'other'"):
        ops.AfterAll(b, [other])
    with raises(DTypeError, "CreateToken", "XlaBuilder"):
        ops.CreateToken("b")  # type: ignore[arg-type]
    nested = ops.Tuple(b, [p, ops.Tuple(b, [p])])
    with raises(ShapeError, "OptimizationBarrier", "operand 'operand'", "flat tuple", "(f32[2], (f32[2]))"):
        ops.OptimizationBarrier(nested)
    with raises(DTypeError, "OptimizationBarrier", "operand 'operand' must be an XlaOp"):
        ops.OptimizationBarrier(3)  # type: ignore[arg-type]


# -- custom calls that XLA's CPU compiler implements ------------------------------------------------

def test_custom_call_topk_target_values() -> None:
    rng = np.random.default_rng(1)
    x = rng.permutation(40).astype(np.float32).reshape(4, 10) - 17.5
    v = rng.permutation(7).astype(np.float32)
    b = xs.XlaBuilder("topk")
    px, pv = param(b, 0, np.float32, (4, 10)), param(b, 1, np.float32, (7,))
    r2 = ops.CustomCall(b, b"TopK", [px], topk_shape((4, 3)))
    r1 = ops.CustomCall(b, "TopK", [pv], topk_shape((7,)))
    got = run(b.build(ops.Tuple(b, [ops.GetTupleElement(r2, 0), ops.GetTupleElement(r2, 1),
                                    ops.GetTupleElement(r1, 0), ops.GetTupleElement(r1, 1)])), x, v)
    idx = np.argsort(-x, axis=1, kind="stable")[:, :3]
    np.testing.assert_array_equal(got[1], idx)
    np.testing.assert_array_equal(got[0], np.take_along_axis(x, idx, axis=1))
    assert got[1].dtype == np.int32
    np.testing.assert_array_equal(got[2], np.sort(v)[::-1])
    np.testing.assert_array_equal(got[3], np.argsort(-v))


def test_custom_call_sharding_annotation_is_identity() -> None:
    b = xs.XlaBuilder("shard")
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    p = param(b, 0, np.int32, (3, 4))
    r = ops.CustomCall(b, "Sharding", [p], p.shape, has_side_effect=False)
    np.testing.assert_array_equal(run(b.build(r), x)[0], x)


def test_custom_call_with_layout_topk_runs() -> None:
    b = xs.XlaBuilder("topk_layout")
    x = np.array([[3, 1, 4, 1.5, 5], [9, 2, 6, 5.5, 3.5]], np.float32)
    p = param(b, 0, np.float32, (2, 5))
    res = S.tuple_shape([S.array_shape(np.float32, (2, 2), layout=(1, 0)), S.array_shape(np.int32, (2, 2))])
    r = ops.CustomCallWithLayout(b, "TopK", [p], res, [S.array_shape(np.float32, (2, 5), layout=(1, 0))])
    comp = b.build(ops.Tuple(b, [ops.GetTupleElement(r, 0), ops.GetTupleElement(r, 1)]))
    assert "operand_layout_constraints={f32[2,5]{1,0}}" in comp.as_hlo_text()
    got = run(comp, x)
    np.testing.assert_array_equal(got[0], [[5, 4], [9, 6]])
    np.testing.assert_array_equal(got[1], [[4, 2], [0, 2]])


def test_unknown_target_fails_at_compile_naming_it() -> None:
    b = xs.XlaBuilder("unknown")
    p = param(b, 0, np.float32, (2, 5))
    comp = b.build(ops.CustomCall(b, "my_missing_target", [p], p.shape, opaque=b"cfg"))
    assert 'custom_call_target="my_missing_target"' in comp.as_hlo_text()
    with pytest.raises(xs.CompileError, match="my_missing_target"):
        xs.compile(comp)


def test_custom_call_hlo_attributes() -> None:
    b = xs.XlaBuilder("cc")
    p = param(b, 0, np.float32, (2, 5))
    t = ops.CreateToken(b)
    raw = ops.CustomCall(b, "foo", [p, t], p.shape, opaque=b'\x00\xffa"b\\', has_side_effect=True)
    ffi = ops.CustomCall(
        b, "bar", [p], S.tuple_shape([p.shape, S.array_shape(np.int8, (3,))]),
        api_version=ops.CustomCallApiVersion.API_VERSION_TYPED_FFI,
        backend_config={"n": 3, "x": 2.5, "s": "hi", "flag": True, "arr": np.array([1, 2], np.int32),
                        "d": np.float64(0.125), "u": np.uint8(7), "inner": {"k": -1}},
    )
    status = ops.CustomCall(
        b, "baz", [], S.array_shape(np.int32, ()), backend_config="text", api_version="STATUS_RETURNING"
    )
    lay = ops.CustomCallWithLayout(
        b, "qux", [p], S.array_shape(np.float32, (5, 2), layout=(0, 1)),
        [S.array_shape(np.float32, (2, 5), layout=(0, 1))],
    )
    assert ffi.shape.leaf_count() == 2
    hlo = b.build(ops.Tuple(b, [raw, ops.GetTupleElement(ffi, 1), status, lay])).as_hlo_text(print_metadata=False)
    assert 'custom_call_target="foo", custom_call_has_side_effect=true, backend_config="\\000\\377a\\"b\\\\"' in hlo
    assert "custom-call(%p0.1, %after-all" in hlo
    assert 'custom_call_target="bar", api_version=API_VERSION_TYPED_FFI' in hlo
    for frag in ("n = 3 : i64", "x = 2.500000e+00 : f32", 's = "hi"', "flag = true", "arr = array<i32: 1, 2>",
                 "d = 1.250000e-01 : f64", "u = 7 : ui8", "inner = {k = -1 : i64}"):
        assert frag in hlo, frag
    assert 'custom_call_target="baz", api_version=API_VERSION_STATUS_RETURNING, backend_config="text"' in hlo
    qux = 'f32[5,2]{0,1} custom-call(%p0.1), custom_call_target="qux", operand_layout_constraints={f32[2,5]{0,1}}'
    assert qux in hlo


def test_custom_call_errors() -> None:
    b = xs.XlaBuilder("e")
    p = param(b, 0, np.float32, (2, 5))
    f = p.shape
    with raises(DTypeError, "CustomCall", "call_target_name must be a non-empty str"):
        ops.CustomCall(b, "", [p], f)
    with raises(DTypeError, "CustomCall", "operands must be a list or tuple"):
        ops.CustomCall(b, "t", p, f)  # type: ignore[arg-type]
    with raises(DTypeError, "CustomCall", "shape must be a Shape"):
        ops.CustomCall(b, "t", [p], (2, 5))  # type: ignore[arg-type]
    with raises(ShapeError, "CustomCall", "shape must be an array, a token or a flat tuple"):
        ops.CustomCall(b, "t", [p], S.tuple_shape([f, S.tuple_shape([f])]))
    with raises(ShapeError, "CustomCall", "operand 'operands[0]' belongs to builder 'o'"):
        ops.CustomCall(b, "t", [param(xs.XlaBuilder("o"), 0, np.float32, (1,))], f)
    for bad in (0, 9, "bogus", True):
        with raises(ShapeError, "CustomCall", "api_version"):
            ops.CustomCall(b, "t", [p], f, api_version=bad)
    with raises(ShapeError, "CustomCall", "schedule", "SCHEDULE_NONE"):
        ops.CustomCall(b, "t", [p], f, schedule=ops.CustomCallSchedule.SCHEDULE_LATEST)
    with raises(ShapeError, "CustomCall", "dict backend_config needs api_version API_VERSION_TYPED_FFI"):
        ops.CustomCall(b, "t", [p], f, backend_config={"a": 1})
    with raises(ShapeError, "CustomCall", "API_VERSION_TYPED_FFI the backend_config must be a dict"):
        ops.CustomCall(b, "t", [p], f, opaque=b"x", api_version=4)
    with raises(ShapeError, "CustomCall", "either opaque or backend_config"):
        ops.CustomCall(b, "t", [p], f, opaque=b"x", backend_config="y")
    with raises(ShapeError, "CustomCall", "backend_config['a'] has unsupported value [1, 2]"):
        ops.CustomCall(b, "t", [p], f, api_version=4, backend_config={"a": [1, 2]})
    with raises(ShapeError, "CustomCall", "does not fit in i64"):
        ops.CustomCall(b, "t", [p], f, api_version=4, backend_config={"a": 2**70})
    with raises(DTypeError, "CustomCall", "opaque must be bytes or str"):
        ops.CustomCall(b, "t", [p], f, opaque=3)  # type: ignore[arg-type]
    with raises(ShapeError, "CustomCallWithLayout", "2 shapes for 1 operands"):
        ops.CustomCallWithLayout(b, "t", [p], f, [f, f])
    with raises(ShapeError, "CustomCallWithLayout", "operand_shapes_with_layout[0] is f32[5,2]", "operand 'operands[0]'"):  # noqa: E501
        ops.CustomCallWithLayout(b, "t", [p], f, [S.array_shape(np.float32, (5, 2))])
    with raises(ShapeError, "CustomCallWithLayout", "shape_with_layout must be an array shape to carry a layout"):
        ops.CustomCallWithLayout(b, "t", [p], S.tuple_shape([f, S.token_shape()]), [f])


def test_builtin_targets_are_checked_before_xla_sees_them() -> None:
    b = xs.XlaBuilder("e")
    p = param(b, 0, np.float32, (2, 5))
    f = p.shape
    topk = S.tuple_shape([S.array_shape(np.float32, (2, 3)), S.array_shape(np.int32, (2, 3))])
    with raises(ShapeError, "CustomCall", "target 'TopK' on f32[2,5] returns (f32[2,k], s32[2,k])", "got shape f32[2,5]"):  # noqa: E501
        ops.CustomCall(b, "TopK", [p], f)
    with raises(ShapeError, "CustomCall", "0 <= k <= 5"):
        ops.CustomCall(b, "TopK", [p], topk_shape((2, 7)))
    with raises(ShapeError, "CustomCall", "s32[2,k]"):
        ops.CustomCall(b, "TopK", [p], topk_shape((2, 3), np.int64))
    with raises(ShapeError, "CustomCall", "target 'TopK' takes one f32[batch, n]"):
        ops.CustomCall(b, "TopK", [p, p], topk)
    with raises(DTypeError, "CustomCall", "target 'TopK' needs an f32 operand", "operand 'operands[0]'"):
        ops.CustomCall(b, "TopK", [param(b, 1, np.float64, (2, 5))], topk)
    with raises(ShapeError, "CustomCall", "rank-1 or rank-2"):
        ops.CustomCall(b, "TopK", [param(b, 2, np.float32, (1, 2, 5))], topk)
    with raises(ShapeError, "CustomCall", "target 'Sharding' takes exactly one array operand"):
        ops.CustomCall(b, "Sharding", [p, p], f)
    with raises(ShapeError, "CustomCall", "target 'LayoutConstraint' returns an array"):
        ops.CustomCall(b, "LayoutConstraint", [p], S.tuple_shape([f, f]))
    with raises(ShapeError, "CustomCall", "returns its operand's shape f32[2,5]"):
        ops.CustomCall(b, "MoveToHost", [p], S.array_shape(np.float32, (5, 2)))
    assert ops.CustomCall(b, "SPMDFullToShardShape", [p], S.array_shape(np.float32, (1, 5))).dims == (1, 5)
    for name in ("SliceToDynamic", "__onednn$matmul"):
        with raises(ShapeError, "CustomCall", f"call_target_name {name!r} is internal"):
            ops.CustomCall(b, name, [p], f)


def test_builtin_target_misuse_no_longer_aborts_the_process() -> None:
    # Each of these calls, compiled, aborted the process inside XLA's CPU compiler (SIGABRT or
    # SIGSEGV); they must stop at the op call with a ShapeError instead.
    run_in_subprocess(
        """
        b = xs.XlaBuilder("crash")
        p = ops.Parameter(b, 0, S.array_shape(np.float32, (4, 4)))
        f = p.shape
        bad = [
            ("TopK", [p], f),
            ("TopK", [], f),
            ("TopK", [ops.Parameter(b, 1, S.array_shape(np.float32, (2, 5)))],
             S.tuple_shape([S.array_shape(np.float32, (2, 7)), S.array_shape(np.int32, (2, 7))])),
            ("Sharding", [], f),
            ("Sharding", [p, p], f),
            ("LayoutConstraint", [p], S.tuple_shape([f, S.array_shape(np.int32, (4, 4))])),
            ("SetBound", [], f),
            ("SliceToDynamic", [p], f),
            ("__onednn$softmax", [], f),
            ("xla.sdy.FuncResultSharding", [p], f),
            ("xla.sdy.PropagationBarrier", [], f),
            ("xla.sdy.ShardingGroup", [p, p], f),
            ("Eigh", [], f),
            ("Qr", [], f),
            ("ProductOfElementaryHouseholderReflectors", [p], f),
        ]
        for target, operands, shape in bad:
            try:
                comp = b.build(ops.CustomCall(b, target, operands, shape))
            except xs.ShapeError:
                continue
            xs.compile(comp)  # would abort the process
            raise AssertionError(target)
        print("ok")
        """
    )


# -- infeed / outfeed -----------------------------------------------------------------------------

def test_infeed_outfeed_build_and_hlo() -> None:
    b = xs.XlaBuilder("feed")
    t = ops.CreateToken(b)
    arr = S.array_shape(np.float32, (2, 3))
    inf1 = ops.InfeedWithToken(t, arr)
    assert inf1.shape == S.tuple_shape([arr, S.token_shape()])
    data_shape = S.tuple_shape(
        [S.array_shape(np.int32, (4,), layout=(0,)), S.array_shape(np.float32, (2, 2), layout=(0, 1))]
    )
    inf2 = ops.InfeedWithToken(ops.GetTupleElement(inf1, 1), data_shape, config="cfg")
    assert inf2.shape == S.tuple_shape([data_shape, S.token_shape()])
    data = ops.GetTupleElement(inf2, 0)
    assert data.shape == data_shape
    out1 = ops.OutfeedWithToken(ops.GetTupleElement(inf1, 0), ops.GetTupleElement(inf2, 1), arr)
    out2 = ops.OutfeedWithToken(data, out1, data_shape, outfeed_config="oc")
    assert out2.shape.is_token()
    comp = b.build(ops.Tuple(b, [ops.GetTupleElement(inf1, 0), out2]))
    hlo = comp.as_hlo_text()
    assert "((f32[2,3]{1,0}), token[]) infeed(" in hlo
    assert "((s32[4]{0}, f32[2,2]{0,1}), token[]) infeed(" in hlo and 'infeed_config="cfg"' in hlo
    assert "outfeed_shape=(f32[2,3]{1,0})" in hlo
    assert "outfeed_shape=(s32[4]{0}, f32[2,2]{1,0}), outfeed_config=\"oc\"" in hlo
    assert comp.program_shape().result_shape() == S.tuple_shape([arr, S.token_shape()])


def test_infeed_outfeed_errors() -> None:
    b = xs.XlaBuilder("e")
    p = param(b, 0, np.float32, (2,))
    t = ops.CreateToken(b)
    with raises(ShapeError, "InfeedWithToken", "operand 'token' must be a token", "f32[2]"):
        ops.InfeedWithToken(p, p.shape)
    with raises(ShapeError, "InfeedWithToken", "shape must hold arrays only"):
        ops.InfeedWithToken(t, S.tuple_shape([p.shape, S.token_shape()]))
    with raises(DTypeError, "InfeedWithToken", "shape must be a Shape"):
        ops.InfeedWithToken(t, "f32[2]")  # type: ignore[arg-type]
    with raises(ShapeError, "OutfeedWithToken", "shape_with_layout is f32[3]", "operand 'operand' has shape f32[2]"):
        ops.OutfeedWithToken(p, t, S.array_shape(np.float32, (3,)))
    with raises(ShapeError, "OutfeedWithToken", "shape_with_layout must hold arrays only"):
        ops.OutfeedWithToken(t, t, S.token_shape())
    with raises(ShapeError, "OutfeedWithToken", "operand 'token' must be a token"):
        ops.OutfeedWithToken(p, p, p.shape)
    with raises(ShapeError, "OutfeedWithToken", "operand 'token' belongs to builder 'o'"):
        ops.OutfeedWithToken(p, ops.CreateToken(xs.XlaBuilder("o")), p.shape)
    with raises(DTypeError, "OutfeedWithToken", "outfeed_config must be a str"):
        ops.OutfeedWithToken(p, t, p.shape, outfeed_config=1)  # type: ignore[arg-type]


# -- the pure shape rules, without a builder -------------------------------------------------------


def test_side_effect_rules() -> None:
    f, i = xs.Shape.array_shape(np.float32, (2,)), xs.Shape.scalar_shape(np.int32)
    tok = xs.Shape.token_shape()
    flat = xs.Shape.tuple_shape([f, i])
    assert infeed_shape("InfeedWithToken", f) == xs.Shape.tuple_shape([f, tok])
    assert infeed_shape("InfeedWithToken", flat) == xs.Shape.tuple_shape([f, i, tok])
    dyn = xs.Shape.array_shape(np.float32, (4,), dynamic_dimensions=[True])
    with raises(ShapeError, "InfeedWithToken:", "shape must have static dimensions"):
        infeed_shape("InfeedWithToken", dyn)
    outfeed_check("OutfeedWithToken", flat, flat)
    with raises(ShapeError, "OutfeedWithToken:", "must be an array or a tuple of arrays, got token[]"):
        outfeed_check("OutfeedWithToken", tok, tok)
    with raises(ShapeError, "must be an array or a flat tuple of arrays"):
        outfeed_check("OutfeedWithToken", xs.Shape.tuple_shape([flat]), flat)
    with raises(ShapeError, "shape_with_layout is s32[], but operand 'operand' has shape f32[2]"):
        outfeed_check("OutfeedWithToken", f, i)
    assert optimization_barrier_shape("OptimizationBarrier", flat) == flat
    assert optimization_barrier_shape("OptimizationBarrier", tok) == tok
    with raises(ShapeError, "OptimizationBarrier:", "must be an array, a token or a flat tuple"):
        optimization_barrier_shape("OptimizationBarrier", xs.Shape.tuple_shape([flat]))


def test_custom_call_target_rules() -> None:
    x = xs.Shape.array_shape(np.float32, (3, 8))
    topk = xs.Shape.tuple_shape([xs.Shape.array_shape(np.float32, (3, 2)), xs.Shape.array_shape(np.int32, (3, 2))])
    topk_check("CustomCall", [x], topk)
    custom_call_target_check("CustomCall", "TopK", [x], topk)
    custom_call_target_check("CustomCall", "my_target", [x, x], x)  # unknown targets: not checked
    with raises(ShapeError, "CustomCall:", "target 'TopK' on f32[3,8] returns"):
        topk_check("CustomCall", [x], x)
    with raises(DTypeError, "target 'TopK' needs an f32 operand"):
        topk_check("CustomCall", [xs.Shape.array_shape(np.int32, (8,))], topk)
    with raises(ShapeError, "target 'TopK' takes one f32[batch, n] or f32[n] operand"):
        topk_check("CustomCall", [x, x], topk)
    with raises(ShapeError, "target 'Sharding' returns its operand's shape f32[3,8], got shape f32[8,3]"):
        custom_call_target_check("CustomCall", "Sharding", [x], xs.Shape.array_shape(np.float32, (8, 3)))
    with raises(ShapeError, "is internal to XLA's CPU compiler"):
        custom_call_target_check("CustomCall", "SliceToDynamic", [x], x)


def test_shardys_marks_and_xlas_decompositions_take_the_operands_xla_reads() -> None:
    """XLA's sharding remover aborts on Shardy's marks with other than one operand, its expanders
    crash on Eigh / Qr without their operands, and its exporter aborts on an
    ``xla.sdy.FuncResultSharding`` giving a result of the entry function without the frontend
    attribute it reads: one rule refuses them where they are built and where they are loaded."""
    x = xs.Shape.array_shape(np.float32, (3, 3))
    frs = "xla.sdy.FuncResultSharding"
    for target in ("xla.sdy.PropagationBarrier", "xla.sdy.ShardingGroup"):
        custom_call_target_check("CustomCall", target, [x], x)
        with raises(ShapeError, f"target {target!r} takes exactly one operand, got no operand"):
            custom_call_target_check("CustomCall", target, [], x)
        with raises(ShapeError, f"target {target!r} takes exactly one operand, got (f32[3,3], f32[3,3])"):
            custom_call_target_check("CustomCall", target, [x, x], x)
    for target in ("Eigh", "Qr"):
        custom_call_target_check("CustomCall", target, [x], x)  # XLA says what else is wrong, cleanly
        with raises(ShapeError, f"target {target!r} takes one operand (the matrix), got no operand"):
            custom_call_target_check("CustomCall", target, [], x)
    with raises(ShapeError, "takes 2 operands (the reflectors and their scales (taus)), got (f32[3,3])"):
        custom_call_target_check("CustomCall", "ProductOfElementaryHouseholderReflectors", [x], x)
    # the builder attaches no frontend attributes, and cannot know whether the call ends up a result
    b = xs.XlaBuilder("frs")
    p = ops.Parameter(b, 0, x)
    with raises(ShapeError, f"target {frs!r} needs the frontend attribute xla.sdy.sharding",
                "CustomCall attaches no frontend attributes"):
        ops.CustomCall(b, frs, [p], x)
    # a loaded call: what the loader read of its attribute (xlasdk/formats/rule_check.py)
    sharding = ShardySharding('#sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>', 1, "@mesh", ("x",), ("x",))
    custom_call_target_check("CustomCall", frs, [x], x, sharding=sharding, entry_result=True)
    custom_call_target_check("CustomCall", frs, [x], x, entry_result=False)  # main does not return it: no attribute
    with raises(ShapeError, "gives a result of the entry function, so it needs the frontend attribute"):
        custom_call_target_check("CustomCall", frs, [x], x, entry_result=True)
    with raises(ShapeError, "= 'garbage' is not a string spelling a #sdy.sharding_per_value"):
        custom_call_operand_check("CustomCall", frs, ["f32[3,3]"], ShardySharding("garbage"), True)
    with raises(ShapeError, "holds 2 shardings; XLA takes exactly one"):
        custom_call_operand_check("CustomCall", frs, ["f32[3,3]"], ShardySharding("two", 2), True)
    with raises(ShapeError, "names mesh @m, which the module does not define as XLA reads it"):
        custom_call_operand_check("CustomCall", frs, ["f32[3,3]"], ShardySharding("m", 1, "@m", None), True)
    with raises(ShapeError, "shards along axis 'q', which mesh @m (axes 'x') does not have"):
        custom_call_operand_check("CustomCall", frs, ["f32[3,3]"], ShardySharding("q", 1, "@m", ("x",), ("q",)), True)
    # an empty mesh (or a maximal one) takes any axis: XLA replicates the value
    custom_call_operand_check("CustomCall", frs, ["f32[3,3]"], ShardySharding("q", 1, "", (), ("q",)), True)
    with raises(ShapeError, f"target {frs!r} takes exactly one operand, got no operand"):
        custom_call_operand_check("CustomCall", frs, [], sharding, True)
