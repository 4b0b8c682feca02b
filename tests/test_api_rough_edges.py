"""Rough edges of the API a new user met (issue 36, item 5): one spelling for instruction lists,
attribute texts, rank-2 dots, names inside regions, integer summaries, padding-config errors, a second
build(), docstrings, ``.mlirbc`` of optimized dumps."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops

DUMP = Path(__file__).parent / "data" / "dumps" / "convnet_train" / "module.cpu_after_optimizations.txt"

WHILE_HLO = """HloModule w

cond.1 {
  p.2 = (s32[], f32[4]) parameter(0)
  i.3 = s32[] get-tuple-element(p.2), index=0
  c.4 = s32[] constant(3)
  ROOT lt.5 = pred[] compare(i.3, c.4), direction=LT
}

body.6 {
  p.7 = (s32[], f32[4]) parameter(0)
  i.8 = s32[] get-tuple-element(p.7), index=0
  one.9 = s32[] constant(1)
  add.10 = s32[] add(i.8, one.9)
  x.11 = f32[4] get-tuple-element(p.7), index=1
  mul.16 = f32[4] multiply(x.11, x.11)
  ROOT t.14 = (s32[], f32[4]) tuple(add.10, mul.16)
}

ENTRY main.20 {
  x.21 = f32[4] parameter(0)
  z.22 = s32[] constant(0)
  t.23 = (s32[], f32[4]) tuple(z.22, x.21)
  w.24 = (s32[], f32[4]) while(t.23), condition=cond.1, body=body.6
  ROOT r.25 = f32[4] get-tuple-element(w.24), index=1
}
"""


def test_instructions_is_called_the_same_on_a_computation_and_on_a_called_function() -> None:
    comp = xs.load_computation(DUMP)
    call = next(i for i in comp.instructions() if i.opcode == "func.call")
    fn = call.called_function()
    listed = fn.instructions()  # as comp.instructions(): a list
    assert isinstance(listed, list) and isinstance(comp.instructions(), list)
    assert listed == list(fn.instructions) and len(listed) > 1  # the tuple spelling still works
    assert [i.index for i in listed] == list(range(len(listed)))


def test_attribute_text_is_a_dict_of_mlir_texts_and_rank_2_dots_are_documented() -> None:
    b = xs.XlaBuilder("cmp")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (3,)))
    comp = b.build(ops.Lt(x, x))
    lt = comp.instructions()[-1]
    assert lt.attributes["comparison_direction"] == "LT"
    assert "LT" in lt.attribute_text["comparison_direction"] and lt.attribute_text["comparison_direction"] != "LT"
    assert "dict" in (type(lt).attribute_text.__doc__ or "")
    dot = xs.XlaComputation.from_hlo_text(
        "HloModule d\nENTRY main {\n  a = f32[2,3] parameter(0)\n  b = f32[3,4] parameter(1)\n"
        "  ROOT d.1 = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n"
    ).instruction("d.1")
    assert dot.opcode == "stablehlo.dot" and "dot_dimension_numbers" not in dot.attributes
    assert "stablehlo.dot" in (type(dot).attributes.__doc__ or "")  # help(Instruction) says so


def test_a_name_inside_a_while_body_says_where_it_lives() -> None:
    comp = xs.XlaComputation.from_hlo_text(WHILE_HLO)
    with pytest.raises(xs.XlaSdkError, match=r"'mul.16' is an instruction of the HLO computation 'body.6', called "
                       r"by 'w.24' \(while\) in 'main.20': walk it through comp.instruction\('w.24'\).op.regions"):
        comp.instruction("mul.16")
    with pytest.raises(xs.XlaSdkError, match="cond.1"):
        comp.instruction("lt.5")
    with pytest.raises(xs.XlaSdkError, match="no instruction named 'nope'.*reach them through ins.op.regions"):
        comp.instruction("nope")  # a name no computation holds: the generic hint says where region ops are
    assert comp.instruction("w.24").op.regions  # where the hint points


def test_a_name_inside_a_fusion_points_at_called_function() -> None:
    comp = xs.load_computation(DUMP)
    with pytest.raises(xs.XlaSdkError, match=r"\(fusion\) in '[^']+': walk it through comp.instruction\('[^']+'\)"
                       r".called_function\(\)"):
        comp.instruction("param_0")


def test_run_summarises_integers_in_integer_notation() -> None:
    from xlasdk.cli._arrays import _summary

    line = _summary(np.array([-(2**31), 5, 2**31 - 1], np.int32))
    assert line.startswith("min -2147483648  max 2147483647  mean "), line
    assert _summary(np.array([2**64 - 1, 0], np.uint64)).startswith("min 0  max 18446744073709551615")
    assert _summary(np.array([0.5, 2.0], np.float32)).startswith("min 0.5  max 2  mean 1.25")


def test_make_padding_config_names_the_dimension_and_the_callers_line() -> None:
    with pytest.raises(xs.ShapeError) as ei:
        xs.make_padding_config([(0, 0), (0, 0, -1)])
    msg = str(ei.value)
    assert "make_padding_config: padding_config[1] (dimension 1): interior_padding must be >= 0, got -1" in msg
    assert f"— at {os.path.basename(__file__)}:" in msg
    with pytest.raises(xs.ShapeError, match=r"padding_config\[0\] \(dimension 0\) must be \(lo, hi\)"):
        xs.make_padding_config([(1,)])


def test_a_second_build_gives_an_independent_computation() -> None:
    b = xs.XlaBuilder("twice")
    x = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (3,)))
    y = ops.Add(x, x)
    first = b.build()
    ops.Mul(y, y)
    second = b.build()
    v = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_array_equal(xs.compile(first, "cpu:0")(v).to_numpy(), v + v)
    np.testing.assert_array_equal(xs.compile(second, "cpu:0")(v).to_numpy(), (v + v) ** 2)
    assert len(first.instructions()) == 2 and "may be called again" in (xs.XlaBuilder.build.__doc__ or "")


@pytest.mark.parametrize("name", ["Logistic", "Erf", "Exp"])
def test_result_accuracy_is_a_parameter_level_with_operand(name: str) -> None:
    doc = getattr(ops, name).__doc__ or ""
    assert "\noperand: " in doc and "\nresult_accuracy: optional" in doc, doc


def test_mlirbc_refuses_an_optimized_dump_naming_the_ops(tmp_path: Path) -> None:
    comp = xs.load_computation(DUMP)
    with pytest.raises(xs.FormatError, match=r"not StableHLO \(mhlo\.copy\).*save it as \.mlir, \.hlo or \.pb"):
        comp.save(tmp_path / "o.mlirbc")
    assert not (tmp_path / "o.mlirbc").exists()
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    assert "StableHLO ops only: an optimized dump" in readme
