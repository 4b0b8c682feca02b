"""Op metadata: source file and line by default, set_op_metadata / clear_op_metadata, the
op_metadata context manager, OpMetadata and current_source_info_metadata, as seen in HLO text."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops

HERE = os.path.basename(__file__)
F32_2 = xs.Shape.array_shape("f32", [2])


def here() -> int:
    """The caller's line number."""
    return sys._getframe(1).f_lineno


def hlo_line(hlo: str, opcode: str, nth: int = 0) -> str:
    """The ``nth`` HLO instruction line whose opcode is ``opcode`` (e.g. ``exponential``)."""
    lines = [ln for ln in hlo.splitlines() if f" {opcode}(" in ln]
    assert len(lines) > nth, (opcode, hlo)
    return lines[nth]


def src(line: int, file: str = __file__) -> str:
    return f'source_file="{file}" source_line={line} '


def test_default_metadata_is_the_callers_line() -> None:
    b = xs.XlaBuilder("md")
    x = ops.Parameter(b, 0, F32_2, "x_in")
    l_exp = here() + 1
    y = ops.Exp(x)
    l_add = here() + 1
    z = y + 1.0
    l_red = here() + 1
    r = ops.Reduce(b, z, ops.Constant(b, np.float32(0)), lambda a, c: ops.Max(a, c), [0])
    hlo = b.build(r).as_hlo_text()
    assert src(l_exp) in hlo_line(hlo, "exponential")
    assert src(l_add) in hlo_line(hlo, "add")
    assert src(l_red) in hlo_line(hlo, "reduce")
    assert src(l_red) in hlo_line(hlo, "maximum")  # ops of the reducer: the line that defined them
    assert '%x_in.1 = f32[2]{0} parameter(0), metadata={op_name="x_in"}' in hlo
    bare = b.build(r).as_hlo_text(print_metadata=False)
    assert "metadata=" not in bare and "source_file" not in bare


def test_op_metadata_context_manager() -> None:
    b = xs.XlaBuilder("ctx")
    x = ops.Parameter(b, 0, F32_2)
    with b.op_metadata(op_name="layer1", op_type="Dense"):
        l_mul = here() + 1
        m = ops.Mul(x, x)
        assert b.get_op_metadata() == xs.OpMetadata(op_type="Dense", op_name="layer1")
        with b.op_metadata(op_name="layer1/inner"):
            l_sin = here() + 1
            s = ops.Sin(m)
        l_sub = here() + 1
        d = ops.Sub(s, m)
    assert b.get_op_metadata() is None
    l_neg = here() + 1
    n = ops.Neg(d)
    hlo = b.build(n).as_hlo_text()
    mul, sin, sub, neg = (hlo_line(hlo, k) for k in ("multiply", "sine", "subtract", "negate"))
    assert 'op_name="layer1" ' + src(l_mul) in mul
    assert 'op_name="layer1/inner" ' + src(l_sin) in sin
    assert 'op_name="layer1" ' + src(l_sub) in sub  # the outer metadata is restored
    assert "op_name" not in neg and src(l_neg) in neg
    assert "%layer1." in mul  # XLA names the instruction after the op_name
    assert "%inner." in sin


def test_op_metadata_with_source_file_and_exception_safety() -> None:
    b = xs.XlaBuilder("ctx2")
    x = ops.Parameter(b, 0, F32_2)
    with b.op_metadata(op_name="blk", source_file="model.py", source_line=7):
        e = ops.Exp(x)
    with pytest.raises(RuntimeError):
        with b.op_metadata(op_name="boom"):
            raise RuntimeError("inside")
    assert b.get_op_metadata() is None  # restored after the exception
    l_log = here() + 1
    lg = ops.Log(e)
    hlo = b.build(lg).as_hlo_text()
    assert 'op_name="blk" source_file="model.py" source_line=7 ' in hlo_line(hlo, "exponential")
    assert "op_name" not in hlo_line(hlo, "log") and src(l_log) in hlo_line(hlo, "log")


def test_set_and_clear_op_metadata() -> None:
    b = xs.XlaBuilder("set")
    x = ops.Parameter(b, 0, F32_2)
    md = xs.OpMetadata(op_type="MyOp", op_name="named", source_file="f.py", source_line=42)
    b.set_op_metadata(md)
    assert b.get_op_metadata() is md
    a = ops.Abs(x)
    c = ops.Ceil(a)
    b.set_op_metadata(xs.OpMetadata(op_name="only_name"))
    l_floor = here() + 1
    f = ops.Floor(c)
    b.clear_op_metadata()
    assert b.get_op_metadata() is None
    l_sqrt = here() + 1
    s = ops.Sqrt(f)
    hlo = b.build(s).as_hlo_text()
    for k in ("abs", "ceil"):
        assert 'op_name="named" source_file="f.py" source_line=42 ' in hlo_line(hlo, k)
    assert 'op_name="only_name" ' + src(l_floor) in hlo_line(hlo, "floor")  # no file: the caller's line
    assert "op_name" not in hlo_line(hlo, "sqrt") and src(l_sqrt) in hlo_line(hlo, "sqrt")


def test_current_source_info_metadata() -> None:
    line = here() + 1
    md = xs.current_source_info_metadata(op_type="T", op_name="n")
    assert md == xs.OpMetadata(op_type="T", op_name="n", source_file=HERE, source_line=line)
    assert (md.op_type, md.op_name, md.source_file, md.source_line) == ("T", "n", HERE, line)
    assert xs.CurrentSourceInfoMetadata is xs.current_source_info_metadata

    def helper() -> xs.OpMetadata:
        return xs.current_source_info_metadata(skip_frames=2)  # the helper's caller

    line2 = here() + 1
    md2 = helper()
    assert md2.source_line == line2 and md2.source_file == HERE and md2.op_name == "" and md2.op_type == ""
    b = xs.XlaBuilder("cur")
    x = ops.Parameter(b, 0, F32_2)
    b.set_op_metadata(md)
    hlo = b.build(ops.Tanh(x)).as_hlo_text()
    assert f'op_name="n" source_file="{HERE}" source_line={line} ' in hlo_line(hlo, "tanh")
    with pytest.raises(xs.ShapeError, match="skip_frames"):
        xs.current_source_info_metadata(skip_frames=-1)
    with pytest.raises(xs.ShapeError, match="deeper than the call stack"):
        xs.current_source_info_metadata(skip_frames=10_000)


def test_op_metadata_object() -> None:
    md = xs.OpMetadata()
    assert (md.op_type, md.op_name, md.source_file, md.source_line) == ("", "", "", 0)
    md.op_name = "x"
    assert md == xs.OpMetadata(op_name="x") and md != xs.OpMetadata(op_name="y")
    loc = xs.OpMetadata(op_name="a", source_file="f.py", source_line=3).to_mlir_location()
    assert loc == 'loc(fused["a", "f.py":3:0])'


def test_set_op_metadata_errors() -> None:
    b = xs.XlaBuilder("md_err")
    line = here() + 2
    with pytest.raises(xs.DTypeError) as e1:
        b.set_op_metadata("layer1")  # type: ignore[arg-type]
    assert f"set_op_metadata: expected an xs.OpMetadata, got str — at {HERE}:{line}" in str(e1.value)
    line = here() + 2
    with pytest.raises(xs.ShapeError) as e2:
        b.set_op_metadata(xs.OpMetadata(op_name="a", source_file="f.py", source_line=-3))
    want = f"set_op_metadata: source_line must be an int in [0, 2**31) (HLO holds an int32), got -3 — at {HERE}:{line}"
    assert want in str(e2.value)
    line = here() + 2
    with pytest.raises(xs.ShapeError) as e3:
        b.set_op_metadata(xs.OpMetadata(op_name="a", source_file="f.py", source_line=2**31))
    assert f"got {2**31} — at {HERE}:{line}" in str(e3.value)
    with b.op_metadata(op_name="a", source_file="f.py", source_line=2**31 - 1):  # the largest that fits
        x = ops.Neg(ops.Parameter(b, 0, F32_2))
    text = b.build(x).as_hlo_text()
    assert f"source_line={2**31 - 1}" in text
    xs.XlaComputation.from_hlo_text(text)
    assert b.get_op_metadata() is None
