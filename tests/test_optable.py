"""Tests of the op table (xlasdk/_optable.py) and of the typed attributes every op carries
(xlasdk/_mlir_attrs.py): each row names a real StableHLO/CHLO op, an opcode is defined once,
and the attributes of the ops the builder makes are Python values, not text."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import _mlir_attrs as ma
from xlasdk import _optable, ops
from xlasdk._jaxlib import mlir as _mlir
from xlasdk._jaxlib.opset import HAS_EXP2_LOG2_FMA
from xlasdk._optable import OPS, HloForm

#: rows of ops a jaxlib release added (xlasdk._jaxlib.opset): registered there, lowered before it
_NEW_IN_0_12_1 = {"stablehlo.exp2", "stablehlo.log2", "stablehlo.fma"}


def test_every_row_names_a_registered_stablehlo_or_chlo_op() -> None:
    ctx = _mlir.context()
    rows = [d for d in OPS.values() if "." in d.name]
    assert len(rows) > 100  # every family registered its rows on import of xlasdk.ops
    unknown = [d.name for d in rows if not ctx.is_registered_operation(d.name)]
    assert unknown == ([] if HAS_EXP2_LOG2_FMA else sorted(_NEW_IN_0_12_1, key=unknown.index))


def test_the_new_ops_flag_agrees_with_the_dialect_registry() -> None:
    """``HAS_EXP2_LOG2_FMA`` (decided from jaxlib's extension version) says what the registry says."""
    ctx = _mlir.context()
    assert {ctx.is_registered_operation(n) for n in _NEW_IN_0_12_1} == {HAS_EXP2_LOG2_FMA}


def test_an_opcode_is_defined_once_and_must_be_a_stablehlo_name() -> None:
    with pytest.raises(ValueError, match="defined twice"):
        _optable.define("stablehlo.add", "add")
    with pytest.raises(ValueError, match="not a StableHLO or CHLO op name"):
        _optable.define("stablehlo.Add")
    with pytest.raises(ValueError, match="not a StableHLO or CHLO op name"):
        _optable.define("mhlo.add")
    assert "stablehlo.Add" not in OPS and "mhlo.add" not in OPS


def test_rows_printed_directly_name_their_hlo_opcode() -> None:
    for d in OPS.values():
        if d.hlo_form in (HloForm.NONE, HloForm.GRAPH):
            continue
        assert d.hlo and d.hlo == d.hlo.lower() and " " not in d.hlo, d


def _varied_graph() -> tuple[xs.XlaBuilder, list[xs.XlaOp]]:
    b = xs.XlaBuilder("varied")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (2, 3)), "x")
    i = ops.Parameter(b, 1, xs.Shape.array_shape(np.int32, (4,)), "i")
    made = [
        ops.Add(x, 1.0), ops.Lt(x, x), ops.Select(ops.Lt(x, x), x, x), ops.Transpose(x, (1, 0)),
        ops.Reshape(x, (3, 2)), ops.Slice(x, (0, 0), (2, 2), (1, 2)), ops.BroadcastInDim(i, (3, 4), (1,)),
        ops.Pad(x, ops.Constant(b, np.float32(0)), [(1, 0, 1), (0, 2, 0)]), ops.Rev(x, (0,)),
        ops.ConcatInDim(b, [x, x], 1), ops.Dot(x, ops.Transpose(x, (1, 0))), ops.Iota(b, np.int32, 5),
        ops.Reduce(b, [x], [ops.Constant(b, np.float32(0))], ops.Add, [1]),
        ops.ReduceWindowWithGeneralPadding(
            x, ops.Constant(b, np.float32(0)), ops.Add, (1, 2), (1, 1), (), (), [(0, 0), (0, 1)]
        ),
        ops.Sort(b, [i]), ops.DynamicSlice(x, [ops.Constant(b, np.int32(1)), ops.Constant(b, np.int32(0))], (1, 2)),
        ops.ReducePrecision(x, 5, 10), ops.Cholesky(ops.Dot(x, ops.Transpose(x, (1, 0)))),
        ops.Exp(x, result_accuracy=xs.ResultAccuracy(mode="HIGHEST")),
        ops.CustomCall(b, "Sharding", [x], x.shape, has_side_effect=False),
    ]
    return b, made


def _reachable(roots: list[xs.XlaOp]) -> list[xs.XlaOp]:
    seen: dict[int, xs.XlaOp] = {}
    stack = list(roots)
    while stack:
        o = stack.pop()
        if o.id not in seen:
            seen[o.id] = o
            stack.extend(o.operands)
            for r in o.regions:
                stack.extend(r.results)
    return list(seen.values())


_TEXT_ATTRS = {"call_target_name"}  # a name, not MLIR syntax


def _typed(value: Any) -> bool:
    if isinstance(value, str):
        return False
    if isinstance(value, (tuple, list)):
        return all(_typed(v) for v in value)
    return True


def test_op_attributes_are_typed_values_that_render_to_mlir() -> None:
    b, made = _varied_graph()
    nodes = _reachable(made)
    kinds = {o.opcode for o in nodes}
    assert {"stablehlo.compare", "stablehlo.pad", "stablehlo.reduce_window", "stablehlo.dot_general"} <= kinds
    for o in nodes:
        assert isinstance(o.attrs, dict), o
        for name, value in o.attrs.items():
            if name not in _TEXT_ATTRS:
                assert _typed(value), (o, name, value)
            ma.render(value)  # every value has an MLIR spelling
    pad = next(o for o in nodes if o.opcode == "stablehlo.pad")
    assert pad.attrs == {"edge_padding_low": (1, 0), "edge_padding_high": (0, 2), "interior_padding": (1, 0)}
    cmp = next(o for o in nodes if o.opcode == "stablehlo.compare" and o.operands[0].dtype == np.float32)
    assert cmp.attrs["comparison_direction"] is xs.ComparisonDirection.LT
    assert cmp.attrs["compare_type"] is xs.ComparisonType.FLOAT
    # the module built from them is valid StableHLO with the same values
    text = b.build(ops.Tuple(b, made)).as_stablehlo_text()
    assert "low = [1, 0], high = [0, 2], interior = [1, 0]" in text
    assert "stablehlo.compare LT, %arg0, %arg0, FLOAT" in text


def test_attribute_objects_are_copied_when_the_op_is_built() -> None:
    """Editing a dimension-numbers object after building an op does not change the op."""
    b = xs.XlaBuilder("dn")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (2, 3)), "x")
    y = ops.Parameter(b, 1, xs.Shape.array_shape(np.float32, (3, 4)), "y")
    dn = xs.DotDimensionNumbers(lhs_contracting_dimensions=[1], rhs_contracting_dimensions=[0])
    r = ops.DotGeneral(x, y, dn)
    dn.lhs_contracting_dimensions = [0]
    assert list(r.attrs["dot_dimension_numbers"].lhs_contracting_dimensions) == [1]
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = np.ones((3, 4), np.float32)
    out = xs.compile(b.build(r))(a, c).to_numpy()
    np.testing.assert_array_equal(out, a @ c)


def test_a_constant_keeps_the_value_it_was_built_with() -> None:
    """The numpy array a Constant was made from can change later; the graph does not."""
    b = xs.XlaBuilder("const")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = ops.Constant(b, a)
    a[0, 0] = 100.0
    comp = b.build(ops.Add(c, c))
    np.testing.assert_array_equal(xs.compile(comp)().to_numpy(), 2 * np.arange(6, dtype=np.float32).reshape(2, 3))
    assert "constant({ { 0, 1, 2 }, { 3, 4, 5 } })" in comp.as_hlo_text()


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "true"), (3, "3 : i64"), (ma.I32(3), "3 : i32"), (ma.UI64(7), "7 : ui64"), ((), "array<i64>"),
        ((1, 2), "array<i64: 1, 2>"), (ma.BoolArray((True, False)), "array<i1: true, false>"),
        (ma.I64Elements([[0, 1], [2, 3]]), "dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>"),
        (ma.I64Elements(np.zeros((0, 2), np.int64)), "dense<> : tensor<0x2xi64>"),
        (ma.IndexLayout((1, 0)), "dense<[1, 0]> : tensor<2xindex>"), (ma.IndexLayout(()), "dense<> : tensor<0xindex>"),
        (ma.IntArray((1, 0)), "[1, 0]"), ("a\"b", '"a\\"b"'), (b"\x00z", '"\\00z"'),
        (ma.DictAttr(index=ma.UI64(0)), "{index = 0 : ui64}"),
        (
            ma.AttrList([ma.IndexLayout((0,)), ma.IndexLayout(())]),
            "[dense<[0]> : tensor<1xindex>, dense<> : tensor<0xindex>]",
        ),
        (xs.FftType.RFFT, "#stablehlo<fft_type RFFT>"),
    ],
)
def test_render_spells_each_value_kind(value: Any, text: str) -> None:
    assert ma.render(value) == text


def test_render_refuses_values_without_a_spelling() -> None:
    with pytest.raises(TypeError, match="no MLIR spelling"):
        ma.render(1.5)
    attrs = {"use_global_device_ids": ma.UNIT, "dimension": 2}
    assert ma.render_attrs(attrs) == "use_global_device_ids, dimension = 2 : i64"


def test_ledger_names_every_registered_op_the_table_lacks() -> None:
    """Every StableHLO/CHLO op jaxlib's bindings define either has a row or a reason in
    ``_optable.NOT_DEFINED``; no reason is kept for an op that has a row."""
    import xlasdk.ops  # noqa: F401  (every family defines its rows on import)
    from xlasdk._jaxlib.mlir_graph import registered_op_names
    from xlasdk._optable import NOT_DEFINED, OPS

    registered = registered_op_names()
    assert len(registered) > 150  # the bindings were read
    lacking = registered - set(OPS)
    assert lacking <= set(NOT_DEFINED), sorted(lacking - set(NOT_DEFINED))
    assert not set(NOT_DEFINED) & set(OPS), sorted(set(NOT_DEFINED) & set(OPS))
    assert all(reason.strip() for reason in NOT_DEFINED.values())


def test_every_row_binds_its_shape_rule_or_gives_a_documented_reason() -> None:
    """``define(..., rule=...)``: every row built by a wrapper binds its shape rule; the rows
    whose shape the graph gives (or that only the emitters write) say so with a reason of
    ``NO_RULE``, and no other row lacks a rule."""
    import xlasdk.ops  # noqa: F401  (every family defines its rows on import)
    from xlasdk._optable import EMITTER_ONLY, GRAPH_SHAPE, NO_RULE

    assert NO_RULE == {GRAPH_SHAPE, EMITTER_ONLY}
    for d in OPS.values():
        if d.rule is None:
            assert d.no_rule in NO_RULE, d
        else:
            assert callable(d.rule) and d.no_rule == "", d
    without = {d.name: d.no_rule for d in OPS.values() if d.rule is None}
    assert without == {
        "parameter": GRAPH_SHAPE, "tuple": GRAPH_SHAPE, "get_tuple_element": GRAPH_SHAPE, "call": GRAPH_SHAPE,
        "stablehlo.return": GRAPH_SHAPE, "stablehlo.tuple": EMITTER_ONLY,
        "stablehlo.get_tuple_element": EMITTER_ONLY,
    }


def test_a_rule_is_a_documented_function_of_the_family_that_defines_the_row() -> None:
    """A row's rule is a public, documented module-level function of an ``xlasdk.ops`` family (the
    module that defines the row, or the family module of the elementwise tables)."""
    import inspect

    import xlasdk.ops  # noqa: F401

    for d in OPS.values():
        if d.rule is None:
            continue
        mod = inspect.getmodule(d.rule)
        assert mod is not None and mod.__name__.startswith("xlasdk.ops."), d
        assert not d.rule.__name__.startswith("_") and getattr(mod, d.rule.__name__) is d.rule, d
        assert (d.rule.__doc__ or "").strip(), d
        assert any(v is d for v in vars(mod).values()) or mod.__name__ == "xlasdk.ops.elementwise", d


def test_define_refuses_a_row_without_a_rule_or_with_an_undocumented_reason() -> None:
    from xlasdk._optable import GRAPH_SHAPE

    def rule(op: str) -> xs.Shape:
        """A rule."""
        return xs.Shape.array_shape(np.float32, ())

    for kwargs in ({}, {"no_rule": "some other reason"}, {"rule": rule, "no_rule": GRAPH_SHAPE}):
        with pytest.raises(ValueError, match="shape rule"):
            _optable.define("stablehlo.not_an_op_xyz", **kwargs)  # type: ignore[arg-type]
    assert "stablehlo.not_an_op_xyz" not in OPS


def test_the_emitters_know_host_callbacks_only_through_the_row() -> None:
    """The custom-call row carries the ``host_callback`` hook; the emitter reads no family data."""
    import inspect

    from xlasdk import _emit
    from xlasdk.ops import custom_call

    row = custom_call.CUSTOM_CALL
    assert row.host_callback is not None
    assert all(d.host_callback is None for d in OPS.values() if d is not row)
    b = xs.XlaBuilder("cc")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (2,)), "x")
    plain = ops.CustomCall(b, "Sharding", [x], x.shape, has_side_effect=False)
    assert row.host_callback(plain) is None
    cb = ops.HostCallback(lambda a: a, [x], x.shape)
    assert row.host_callback(cb) is not None
    assert "HostCallbackSpec" not in inspect.getsource(_emit)
