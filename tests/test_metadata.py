"""Op metadata: source file and line by default, set_op_metadata / clear_op_metadata, the
op_metadata context manager, OpMetadata and current_source_info_metadata, as seen in HLO text."""

from __future__ import annotations

import os
import pathlib
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


# -- every OpMetadata field, kept whole ---------------------------------------------------------------

FULL = dict(
    op_type="Dense",
    op_name="jit(f)/layer1",
    source_file="model.py",
    source_line=3,
    source_end_line=5,
    source_column=7,
    source_end_column=9,
    deduplicated_name="dedup",
    scheduling_name="sched",
)
FULL_HLO = (
    'metadata={op_type="Dense" op_name="jit(f)/layer1" source_file="model.py" source_line=3 source_end_line=5 '
    'source_column=7 source_end_column=9 deduplicated_name="dedup" scheduling_name="sched"}'
)
# xla.OpMetadata field numbers (xla_data.proto).
MD_NUMBERS = {
    1: "op_type", 2: "op_name", 3: "source_file", 4: "source_line", 12: "deduplicated_name", 15: "stack_frame_id",
    16: "scheduling_name", 17: "source_end_line", 18: "source_column", 19: "source_end_column",
}


def _wire(b: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) of a protobuf message (varints and length-delimited fields only)."""
    out: list[tuple[int, int | bytes]] = []
    i = 0

    def varint() -> int:
        nonlocal i
        r = shift = 0
        while True:
            c = b[i]
            i += 1
            r |= (c & 0x7F) << shift
            shift += 7
            if c < 0x80:
                return r

    while i < len(b):
        key = varint()
        if key & 7 == 0:
            out.append((key >> 3, varint()))
        elif key & 7 == 2:
            n = varint()
            out.append((key >> 3, b[i : i + n]))
            i += n
        else:
            raise AssertionError(f"wire type {key & 7}")
    return out


def proto_metadata(data: bytes) -> dict[str, dict[str, object]]:
    """Instruction name -> its OpMetadata fields, from a serialized HloModuleProto (read here, with
    the field numbers of hlo.proto / xla_data.proto, independently of xlasdk)."""
    out: dict[str, dict[str, object]] = {}
    for num, comp in _wire(data):
        if num != 3:  # HloModuleProto.computations
            continue
        assert isinstance(comp, bytes)
        for cnum, inst in _wire(comp):
            if cnum != 2:  # HloComputationProto.instructions
                continue
            assert isinstance(inst, bytes)
            fields = dict(_wire(inst))
            name = fields[1]  # HloInstructionProto.name
            assert isinstance(name, bytes)
            md = fields.get(7, b"")  # HloInstructionProto.metadata
            assert isinstance(md, bytes)
            out[name.decode()] = {
                MD_NUMBERS[k]: v.decode() if isinstance(v, bytes) else v for k, v in _wire(md) if k in MD_NUMBERS
            }
    return out


def xla_printed(proto: bytes) -> str:
    """XLA's own HLO text of a serialized HloModuleProto (the oracle)."""
    from jaxlib import _hlo

    return str(_hlo.XlaComputation(proto).get_hlo_module().to_string())


def full_graph(op: str = "Exp") -> xs.XlaComputation:
    b = xs.XlaBuilder("full")
    x = ops.Parameter(b, 0, F32_2, "x")
    b.set_op_metadata(xs.OpMetadata(**FULL))  # type: ignore[arg-type]
    y = getattr(ops, op)(x)
    b.clear_op_metadata()
    return b.build(ops.Neg(y))


def assert_full(hlo: str, opcode: str = "exponential") -> None:
    line = hlo_line(hlo, opcode)
    assert line.endswith(FULL_HLO), line
    assert line.lstrip().removeprefix("ROOT ").startswith("%layer1."), line  # XLA's name: the op_name's last component
    assert "__xlasdk" not in hlo


def assert_full_proto(data: bytes) -> None:
    md = proto_metadata(data)
    (name,) = [k for k in md if k.startswith("layer1")]
    assert md[name] == FULL
    assert FULL_HLO in xla_printed(data)


def test_every_field_in_direct_hlo_text() -> None:
    comp = full_graph()
    text = comp.as_hlo_text()
    assert comp._direct_hlo_text(True, True) == text  # the direct printer
    assert_full(text)
    assert "metadata" not in comp.as_hlo_text(print_metadata=False)
    assert hlo_line(text, "exponential") == hlo_line(comp._converted_hlo_text(), "exponential")


def test_every_field_through_xla_converter() -> None:
    comp = full_graph("Lgamma")  # a CHLO op: XLA's converter expands it into many instructions
    assert comp._direct_hlo_text(True, True) is None
    text = comp.as_hlo_text()
    with_md = [ln for ln in text.splitlines() if "jit(f)/layer1" in ln]
    assert len(with_md) > 10 and all(ln.endswith(FULL_HLO) for ln in with_md), text
    assert "__xlasdk" not in text
    md = proto_metadata(comp.as_serialized_hlo_module_proto())
    assert sum(v == FULL for v in md.values()) == len(with_md)
    out = xs.compile(comp)(np.array([1.5, 2.5], np.float32))
    assert isinstance(out, xs.DeviceArray)
    np.testing.assert_allclose(out.to_numpy(), -np.array([-0.1207822, 0.2846829]), rtol=1e-5)


def test_every_field_in_the_hlo_proto() -> None:
    assert_full_proto(full_graph().as_serialized_hlo_module_proto())


@pytest.mark.parametrize("suffix", [".hlo", ".pb", ".mlir", ".mlirbc"])
def test_every_field_survives_save_and_load(tmp_path: pathlib.Path, suffix: str) -> None:
    path = os.path.join(tmp_path, "model" + suffix)
    full_graph().save(path)
    if suffix == ".mlir":  # the fields live in the location (see xs.OpMetadata.to_mlir_location)
        with open(path) as f:
            mlir = f.read()
        assert '"Dense:"' in mlir and '"model.py":3:7 to 5:9' in mlir and 'deduplicated_name = "dedup"' in mlir
    loaded = xs.load_computation(path)
    assert_full(loaded.as_hlo_text())
    assert_full_proto(loaded.as_serialized_hlo_module_proto())
    again = os.path.join(tmp_path, "again" + suffix)
    loaded.save(again)
    assert_full(xs.load_computation(again).as_hlo_text())


def test_portable_artifact_keeps_ranges() -> None:
    """A StableHLO portable artifact keeps only the start of a file range; the end is in the
    location's dictionary too."""
    loaded = xs.XlaComputation.from_stablehlo(full_graph().serialize_portable_artifact())
    assert '"model.py":3:7)' in loaded.as_stablehlo_text(debug_info=True)  # the range is gone ...
    assert_full(loaded.as_hlo_text())  # ... but not the fields


def test_op_metadata_context_manager_takes_every_field() -> None:
    b = xs.XlaBuilder("ctx_full")
    x = ops.Parameter(b, 0, F32_2)
    with b.op_metadata(**FULL):  # type: ignore[arg-type]
        assert b.get_op_metadata() == xs.OpMetadata(**FULL)  # type: ignore[arg-type]
        y = ops.Exp(x)
    with b.op_metadata(op_name="blk", op_type="Conv", deduplicated_name="d", scheduling_name="s",
                       source_column=4, source_end_line=99):
        line = here() + 1
        z = ops.Sin(y)  # no source_file: the caller's line, and the numbers are not used
    assert b.get_op_metadata() is None
    hlo = b.build(z).as_hlo_text()
    assert_full(hlo)
    want = (f'metadata={{op_type="Conv" op_name="blk" source_file="{__file__}" source_line={line} '
            f'source_end_line={line} deduplicated_name="d" scheduling_name="s"}}')
    assert hlo_line(hlo, "sine").endswith(want)
    assert hlo_line(b.build(z)._converted_hlo_text(), "sine").endswith(want)


@pytest.mark.parametrize(
    "md, want",
    [
        (dict(op_name="a@b"), 'op_name="a@b" {src}'),  # XLA's converter cuts names at "@"
        (dict(op_type="T@U", op_name="n"), 'op_type="T@U" op_name="n" {src}'),
        (dict(op_name="ends:", op_type="K"), 'op_type="K" op_name="ends:" {src}'),  # ends in ":": a type to XLA
        (dict(op_type="x:"), 'op_type="x:" {src}'),
        (dict(op_type="q\"uo\\te é", deduplicated_name="dq\"\n", scheduling_name="sé'q"),  # as XLA prints them
         'op_type="q\\"uo\\\\te \\303\\251" {src} deduplicated_name="dq\\"\\n" scheduling_name="sé\'q"'),
        (dict(op_name="r", source_file="f.py", source_line=4, source_column=2),
         'op_name="r" source_file="f.py" source_line=4 source_end_line=4 source_column=2 source_end_column=2'),
        (dict(source_file="f.py", source_line=4, source_end_column=6),
         'source_file="f.py" source_line=4 source_end_line=4 source_end_column=6'),
        (dict(source_file="f.py", source_line=4, source_end_line=2, source_column=3),  # as given, even backwards
         'source_file="f.py" source_line=4 source_end_line=2 source_column=3 source_end_column=3'),
    ],
)
def test_names_and_ranges_xla_would_change(md: dict[str, object], want: str) -> None:
    b = xs.XlaBuilder("odd")
    x = ops.Parameter(b, 0, F32_2, "x")
    b.set_op_metadata(xs.OpMetadata(**md))  # type: ignore[arg-type]
    n = here() + 1
    comp = b.build(ops.Exp(x))
    direct, converted = comp.as_hlo_text(), comp._converted_hlo_text()
    assert comp._direct_hlo_text(True, True) == direct
    line = hlo_line(direct, "exponential")
    want = want.replace("{src}", f'source_file="{__file__}" source_line={n} source_end_line={n}')
    assert line.endswith(f"metadata={{{want}}}"), line
    assert line == hlo_line(converted, "exponential")  # same name and metadata both ways
    assert line.strip() in xla_printed(comp.as_serialized_hlo_module_proto())
    xs.XlaComputation.from_hlo_text(direct)


def test_new_fields_are_checked() -> None:
    b = xs.XlaBuilder("md_err2")
    for field in ("source_end_line", "source_column", "source_end_column"):
        line = here() + 2
        with pytest.raises(xs.ShapeError) as e:
            b.set_op_metadata(xs.OpMetadata(source_file="f.py", **{field: -1}))  # type: ignore[arg-type]
        want = f"set_op_metadata: {field} must be an int in [0, 2**31) (HLO holds an int32), got -1 — at {HERE}:{line}"
        assert want in str(e.value)
    with pytest.raises(xs.ShapeError, match="source_column must be an int"):
        b.set_op_metadata(xs.OpMetadata(source_column=2**31))
    with pytest.raises(xs.DTypeError, match="set_op_metadata: scheduling_name must be a str, got int 3"):
        b.set_op_metadata(xs.OpMetadata(scheduling_name=3))  # type: ignore[arg-type]
    for bad in ('a"b', "a\\b", "a\nb"):  # XLA's HLO printer writes scheduling_name unescaped
        with pytest.raises(xs.ShapeError, match="scheduling_name must not hold quotes, backslashes or control"):
            b.set_op_metadata(xs.OpMetadata(scheduling_name=bad))
    with pytest.raises(xs.ShapeError, match="OpMetadata.source_end_column"):
        xs.OpMetadata(source_end_column=-2).to_mlir_location()
    assert b.get_op_metadata() is None


def test_op_metadata_object_every_field() -> None:
    md = xs.OpMetadata(**FULL)  # type: ignore[arg-type]
    assert (md.source_end_line, md.source_column, md.source_end_column) == (5, 7, 9)
    assert (md.deduplicated_name, md.scheduling_name) == ("dedup", "sched")
    assert md != xs.OpMetadata(**{**FULL, "scheduling_name": "other"})  # type: ignore[arg-type]
    empty = xs.OpMetadata()
    assert (empty.source_end_line, empty.source_column, empty.source_end_column) == (0, 0, 0)
    assert (empty.deduplicated_name, empty.scheduling_name) == ("", "")
    assert repr(xs.OpMetadata(op_name="n", scheduling_name="s")) == (
        "OpMetadata(op_type='', op_name='n', source_file='', source_line=0, scheduling_name='s')"
    )
    with pytest.raises(TypeError):
        xs.OpMetadata("T", "n", "f.py", 3, 5)  # type: ignore[call-arg]  # the new fields are keyword-only
    loc = md.to_mlir_location()
    assert loc == (
        'loc(fused<{deduplicated_name = "dedup", scheduling_name = "sched", source_end_column = 9, '
        'source_end_line = 5}>["Dense:", "jit(f)/layer1", "model.py":3:7 to 5:9])'
    )
    assert xs.OpMetadata(op_type="T", op_name="n").to_mlir_location() == 'loc(fused["T:", "n"])'
    assert xs.OpMetadata(scheduling_name="s").to_mlir_location() == 'loc(fused<{scheduling_name = "s"}>[unknown])'
    module = (
        'module @m {\n  func.func public @main(%arg0: tensor<2xf32> loc("x")) -> tensor<2xf32> {\n'
        f'    %0 = "stablehlo.exponential"(%arg0) : (tensor<2xf32>) -> tensor<2xf32> {loc}\n'
        '    "func.return"(%0) : (tensor<2xf32>) -> ()\n  }\n}\n'
    )
    assert_full(xs.XlaComputation.from_stablehlo(module).as_hlo_text())  # MLIR and XLA read it


def test_stablehlo_from_other_tools() -> None:
    """Locations written by hand or by other tools (aliases, pretty syntax, other fused metadata)."""
    text = (
        "module @m {\n"
        "  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {\n"
        "    %0 = stablehlo.exponential %arg0 : tensor<2xf32> loc(#loc3)\n"
        "    %1 = stablehlo.sine %0 : tensor<2xf32> loc(#loc4)\n"
        "    %2 = stablehlo.cosine %1 : tensor<2xf32> loc(#loc5)\n"
        '    %3 = stablehlo.tanh %2 : tensor<2xf32> loc(fused<"other">["t", "g.py":1:2])\n'
        '    %4 = stablehlo.abs %3 : tensor<2xf32> loc(fused<{op_type = 3 : i32, scheduling_name = "ok"}>["a"])\n'
        "    return %4 : tensor<2xf32>\n"
        "  }\n"
        "}\n"
        '#loc1 = loc("Dense:")\n'
        '#loc2 = loc("model.py":3:7 to 5:9)\n'
        '#loc3 = loc(fused<{scheduling_name = "sched", deduplicated_name = "dedup"}>[#loc1, "jit(f)/layer1", #loc2])\n'
        '#loc4 = loc(fused<{unrelated = 1 : i32}>["s", "fused<{ in a string"])\n'
        '#loc5 = loc(callsite(fused<{scheduling_name = "inner"}>["c"] at "h.py":4:0))\n'
    )
    hlo = xs.XlaComputation.from_stablehlo(text).as_hlo_text()
    assert_full(hlo)
    assert hlo_line(hlo, "sine").endswith('metadata={op_name="s;fused<{ in a string"}')
    assert 'scheduling_name="inner"' in hlo_line(hlo, "cosine")
    assert hlo_line(hlo, "abs").endswith('metadata={op_name="a" scheduling_name="ok"}')  # op_type = 3: ignored
    assert hlo_line(hlo, "tanh").endswith(
        'metadata={op_name="t" source_file="g.py" source_line=1 source_end_line=1 source_column=2 source_end_column=2}'
    )


XLA_DUMP = """HloModule jit_f, entry_computation_layout={(f32[2,3]{1,0}, f32[3,4]{1,0})->f32[2,4]{1,0}}

FileNames
1 "/src/model.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=20 end_column=25}

StackFrames
1 {file_location_id=1 parent_frame_id=1}


ENTRY %main.1 (a.1: f32[2,3], b.1: f32[3,4]) -> f32[2,4] {
  %a.1 = f32[2,3]{1,0} parameter(0), metadata={op_name="a"}
  %b.1 = f32[3,4]{1,0} parameter(1), metadata={op_name="b"}
  %dot_general.1 = f32[2,4]{1,0} dot(%a.1, %b.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, \
metadata={op_type="dot_general" op_name="jit(f)/dot_general" source_file="/src/model.py" source_line=3 \
source_end_line=4 source_column=20 source_end_column=25 stack_frame_id=1}
  ROOT %tanh.1 = f32[2,4]{1,0} tanh(%dot_general.1), metadata={op_type="tanh" op_name="jit(f)/tanh" \
source_file="x.py" source_line=5 profile_type={1} deduplicated_name="fus" scheduling_name="sch"}
}

"""


@pytest.mark.parametrize("suffix", ["", ".hlo", ".pb"])
def test_loaded_hlo_prints_back_with_all_its_metadata(tmp_path: pathlib.Path, suffix: str) -> None:
    comp = xs.XlaComputation.from_hlo_text(XLA_DUMP)
    if suffix:
        path = os.path.join(tmp_path, "dump" + suffix)
        comp.save(path)
        comp = xs.load_computation(path)
    text = comp.as_hlo_text()
    assert text == XLA_DUMP
    md = proto_metadata(comp.as_serialized_hlo_module_proto())
    assert md["dot_general.1"] == {
        "op_type": "dot_general", "op_name": "jit(f)/dot_general", "source_file": "/src/model.py", "source_line": 3,
        "source_end_line": 4, "source_column": 20, "source_end_column": 25, "stack_frame_id": 1,
    }
    assert md["tanh.1"] == {
        "op_type": "tanh", "op_name": "jit(f)/tanh", "source_file": "x.py", "source_line": 5,
        "deduplicated_name": "fus", "scheduling_name": "sch",
    }


def test_loaded_hlo_saved_as_stablehlo_keeps_what_xla_imports(tmp_path: pathlib.Path) -> None:
    """XLA's HLO -> StableHLO importer keeps op_name, source_file and source_line (the rest is
    not in the module it makes)."""
    path = os.path.join(tmp_path, "dump.mlir")
    xs.XlaComputation.from_hlo_text(XLA_DUMP).save(path)
    line = hlo_line(xs.load_computation(path).as_hlo_text(), "tanh")
    assert 'op_name="jit(f)/tanh" source_file="x.py" source_line=5' in line


@pytest.mark.parametrize(
    "md",
    [
        dict(op_name="a@b"), dict(op_type="T@U", op_name="n"), dict(op_name="ends:", op_type="K"),
        dict(op_type="q\"uo", deduplicated_name="d", scheduling_name="s"),
        dict(source_file="f.py", source_line=4, source_end_line=9, source_column=3, source_end_column=1),
        dict(op_name="plain", op_type="Plain"),
    ],
)
def test_built_graphs_mark_the_locations_xla_would_change_as_mark_locations_does(md: dict[str, object]) -> None:
    """A built graph's module is emitted with the converter markers directly; the text and the
    table are those mark_locations derives from the plain module text (which loaded files use)."""
    from xlasdk import _metadata
    from xlasdk._emit import emit_module

    b = xs.XlaBuilder("marks")
    x = ops.Parameter(b, 0, F32_2, "x")
    with b.op_metadata(op_name="first", deduplicated_name="dd"):
        y = ops.Exp(x)
    b.set_op_metadata(xs.OpMetadata(**md))  # type: ignore[arg-type]
    z = ops.Add(ops.Sin(y), y)
    b.clear_op_metadata()
    root = ops.Cos(z)
    table: list[dict[str, object]] = []
    direct = emit_module("marks", [x], root, metadata_table=table).text
    from_text = _metadata.mark_locations(emit_module("marks", [x], root).text)
    if from_text is None:
        assert table == [] and direct == emit_module("marks", [x], root).text
    else:
        assert (direct, table) == from_text
        assert len(table) >= 1  # the first op's deduplicated_name at least
