"""The optimized HLO of one module under two environments, instruction by instruction
(:mod:`xlasdk.reference._optimized_diff`, ``xlasdk compare FILE --optimized-hlo --against-python PATH
[--topology v5e:1x1]``): libtpu releases compared without a chip.

Oracles: hand-written optimized texts whose differences are known (a fusion kind, a layout, an
instruction only on one side, a changed opcode); on real compiles, XLA's texts counted by an
independent line scan (per opcode, the count here minus the count there equals what the diff says
was added, removed or changed to and from that opcode); the releases named are the ones installed
(package metadata). Across releases needs ``XLASDK_OTHER_PYTHON`` (CI: the other end of the jaxlib
range); the TPU compile needs libtpu on both sides.
"""

from __future__ import annotations

import importlib.metadata
import io
import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

import xlasdk as xs
from tests.helpers import raises
from xlasdk.reference._optimized_diff import OptimizedDiff, diff_optimized, optimized_hlo_here, parse_optimized
from xlasdk.reference._other_env import OtherEnvironment

A = """HloModule m, is_scheduled=true

%fused_computation (param_0: f32[8,128]) -> f32[8,128] {
  %param_0 = f32[8,128]{1,0:T(8,128)} parameter(0)
  ROOT %tanh.0 = f32[8,128]{1,0:T(8,128)} tanh(%param_0), metadata={op_name="jit(f)/tanh"}
}

ENTRY %main.1 (a.1: f32[8,128]) -> (f32[8,128], f32[128,8]) {
  %a.1 = f32[8,128]{1,0:T(8,128)} parameter(0), metadata={op_name="a"}
  %copy-start = (f32[8,128]{1,0:T(8,128)S(1)}, f32[8,128]{1,0:T(8,128)}, u32[]{:S(2)}) copy-start(%a.1)
  %copy-done = f32[8,128]{1,0:T(8,128)S(1)} copy-done(%copy-start)
  %tanh_fusion = f32[8,128]{1,0:T(8,128)} fusion(%copy-done), kind=kLoop, calls=%fused_computation, \
metadata={op_name="jit(f)/tanh"}
  %transpose.3 = f32[128,8]{1,0:T(8,128)} transpose(%a.1), dimensions={1,0}, metadata={op_name="jit(f)/transpose"}
  ROOT %tuple = (f32[8,128]{1,0:T(8,128)}, f32[128,8]{1,0:T(8,128)}) tuple(%tanh_fusion, %transpose.3)
}
"""
#: another release's: the fusion an output fusion, the transpose a copy with another layout, no copy-start/done
B = """HloModule m, is_scheduled=true

%fused_computation.2 (param_0.1: f32[8,128]) -> f32[8,128] {
  %param_0.1 = f32[8,128]{1,0:T(8,128)} parameter(0)
  ROOT %tanh.7 = f32[8,128]{1,0:T(8,128)} tanh(%param_0.1), metadata={op_name="jit(f)/tanh"}
}

ENTRY %main.9 (a.2: f32[8,128]) -> (f32[8,128], f32[128,8]) {
  %a.2 = f32[8,128]{1,0:T(8,128)} parameter(0), metadata={op_name="a"}
  %tanh_fusion.1 = f32[8,128]{1,0:T(8,128)} fusion(%a.2), kind=kOutput, calls=%fused_computation.2, \
metadata={op_name="jit(f)/tanh"}
  %copy.4 = f32[128,8]{0,1:T(8,128)} copy(%a.2), metadata={op_name="jit(f)/transpose"}
  ROOT %tuple.1 = (f32[8,128]{1,0:T(8,128)}, f32[128,8]{0,1:T(8,128)}) tuple(%tanh_fusion.1, %copy.4)
}
"""


def test_parse_reads_opcodes_shapes_layouts_kinds_and_skips_fused_parameters() -> None:
    rows = {i.name: i for i in parse_optimized(A)}
    assert "param_0" not in rows and len(rows) == 7  # 8 instruction lines, one a fusion body's parameter
    assert rows["copy-start"].shape == "(f32[8,128], f32[8,128], u32[])"
    assert rows["copy-start"].layout == "({1,0:T(8,128)S(1)}, {1,0:T(8,128)}, {:S(2)})"
    assert rows["tanh_fusion"].fusion_kind == "kLoop" and rows["tanh_fusion"].op_name == "jit(f)/tanh"
    assert rows["tanh.0"].fused and not rows["tanh_fusion"].fused
    with raises(xs.XlaSdkError, "no instruction found"):
        parse_optimized("not HLO at all")


def test_diff_names_each_known_difference() -> None:
    d = diff_optimized(parse_optimized(B), parse_optimized(A), here_name="new", there_name="old", target="v5e:1x1")
    changed = {(c.there.name, c.here.name): c.what for c in d.changed}
    assert changed == {("tanh_fusion", "tanh_fusion.1"): ("fusion kind",),
                       ("transpose.3", "copy.4"): ("opcode", "layout"),
                       ("tuple", "tuple.1"): ("layout",)}, changed
    assert [i.name for i in d.only_there] == ["copy-start", "copy-done"] and not d.only_here
    assert not d.same and d.matched == 5
    text = d.text()
    assert "fusion kind kLoop -> kOutput" in text and "opcode transpose -> copy" in text
    assert "- %copy-start in main.1" in text and "[jit(f)/transpose]" in text
    assert json.loads(json.dumps(d.as_dict()))["only_there"][1]["opcode"] == "copy-done"
    same = diff_optimized(parse_optimized(A), parse_optimized(A.replace("%a.1", "%x.5")))
    assert same.same and "the same instructions" in same.text()


SHARED_OP_NAME = """HloModule m, is_scheduled=true

ENTRY %main (a: f32[8,64], b: f32[8,16]) -> (f32[8,64], f32[8,16]) {
  %a = f32[8,64]{1,0} parameter(0)
  %b = f32[8,16]{1,0} parameter(1)
  %mul.8 = f32[8,64]{1,0} multiply(%a, %a), metadata={op_name="jit(f)/jvp()/mul"}
  %mul.23 = f32[8,16]{1,0} multiply(%b, %b), metadata={op_name="jit(f)/jvp()/mul"}
  ROOT %t = (f32[8,64]{1,0}, f32[8,16]{1,0}) tuple(%mul.8, %mul.23)
}
"""


def test_instructions_sharing_an_op_name_are_paired_by_shape_and_name() -> None:
    """Many instructions share an op_name (``jvp()/mul``): one release's extra instruction of that
    op_name must not take another's partner (a new user's diff said ``mul.8 -> mul.23: shape
    f32[8,64] -> f32[8,16]`` and listed ``mul.8`` as only here)."""
    extra = SHARED_OP_NAME.replace(
        '  %mul.8 = ', '  %mul.5 = f32[8,16]{1,0} multiply(%b, %b), metadata={op_name="jit(f)/jvp()/mul"}\n  %mul.8 = ')
    d = diff_optimized(parse_optimized(SHARED_OP_NAME), parse_optimized(extra))
    assert not d.changed and not d.only_here and [i.name for i in d.only_there] == ["mul.5"], d.text()
    d = diff_optimized(parse_optimized(extra), parse_optimized(SHARED_OP_NAME))
    assert not d.changed and [i.name for i in d.only_here] == ["mul.5"] and not d.only_there, d.text()


_LINE = re.compile(r"^\s*(?:ROOT )?%?[\w.-]+ = (?:\(.*?\)|\S+) ([a-z][\w-]*)\(")


def _opcodes(text: str) -> Counter[str]:
    """Per opcode, the instruction lines of ``text`` (fusion bodies' parameters left out), by a
    plain line scan independent of the parser."""
    bodies = set(re.findall(r"calls=%?([\w.-]+)", text))
    out: Counter[str] = Counter()
    comp = None
    for line in text.splitlines():
        if (h := re.match(r"^(?:ENTRY )?%?([\w.-]+) \(", line)) is not None and line.rstrip().endswith("{"):
            comp = h.group(1)
        elif (m := _LINE.match(line)) is not None and not (comp in bodies and m.group(1) == "parameter"):
            out[m.group(1)] += 1
    return out


def _check_against_counts(d: OptimizedDiff, here: str, there: str) -> None:
    h, t = _opcodes(here), _opcodes(there)
    assert sum(h.values()) == d.count_here and sum(t.values()) == d.count_there
    for op in set(h) | set(t):
        added = sum(i.opcode == op for i in d.only_here) + sum(
            c.here.opcode == op and c.there.opcode != op for c in d.changed)
        removed = sum(i.opcode == op for i in d.only_there) + sum(
            c.there.opcode == op and c.here.opcode != op for c in d.changed)
        assert h[op] - t[op] == added - removed, (op, h[op], t[op], added, removed)


def _other() -> str:
    other = os.environ.get("XLASDK_OTHER_PYTHON")
    if not other:
        pytest.skip("XLASDK_OTHER_PYTHON names no other environment (CI: the other end of the jaxlib range)")
    return other


def _program() -> xs.XlaComputation:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def f(x: object, w: object) -> object:
        a = x
        for _ in range(3):
            a = jax.nn.gelu(a @ w) + jnp.cumsum(a, axis=1) * 0.1
            a = a / jnp.linalg.norm(a, axis=-1, keepdims=True)
        return jax.nn.softmax(a, axis=-1)

    x = jnp.ones((16, 128), jnp.float32)
    return xs.XlaComputation.from_stablehlo(jax.jit(f).lower(x, jnp.ones((128, 128))).as_text())


def test_cpu_compiles_of_two_jaxlib_releases_compared(tmp_path: Path) -> None:
    env = OtherEnvironment(_other())
    comp = _program()
    here = optimized_hlo_here(comp, None)
    there = env.optimized_hlo(comp, None)
    d = diff_optimized(parse_optimized(here), parse_optimized(there))
    _check_against_counts(d, here, there)
    assert d.same == (_opcodes(here) == _opcodes(there) and not d.changed)
    path = tmp_path / "p.hlo"
    path.write_text(comp.as_hlo_text())
    from xlasdk.cli import main

    out, err = io.StringIO(), io.StringIO()
    rc = main(["compare", str(path), "--optimized-hlo", "--against-python", env.python, "--json",
               str(tmp_path / "d.json")], stdout=out, stderr=err)
    assert rc == (0 if d.same else 1), err.getvalue()
    doc = json.loads((tmp_path / "d.json").read_text())
    assert doc["target"] == "cpu" and doc["instructions_here"] == d.count_here
    assert env.versions is not None and f"jaxlib {env.versions.jaxlib}" in out.getvalue()


def test_libtpu_releases_compared_for_a_v5e_without_a_chip() -> None:
    other = _other()
    try:
        release = importlib.metadata.version("libtpu")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("libtpu is not installed here: no compile for a TPU without a chip")
    env = OtherEnvironment(other)
    comp = _program()
    here = optimized_hlo_here(comp, "v5e:1x1")
    assert "T(8,128)" in here  # a TPU's tiled layouts: XLA:TPU's compile
    there = env.optimized_hlo(comp, "v5e:1x1")
    assert env.versions is not None and env.versions.libtpu
    d = diff_optimized(parse_optimized(here), parse_optimized(there), here_name=f"libtpu {release}",
                       there_name=f"libtpu {env.versions.libtpu}", target="v5e:1x1")
    _check_against_counts(d, here, there)
    assert f"libtpu {release}" in d.text() and f"libtpu {env.versions.libtpu}" in d.text()


def test_cli_flags_are_checked(tmp_path: Path) -> None:
    from xlasdk.cli import main

    f = tmp_path / "m.hlo"
    f.write_text("HloModule m\n\nENTRY main {\n  ROOT p = f32[2] parameter(0)\n}\n")
    for argv, said in ((["--optimized-hlo"], "give --against-python PATH or --against-jaxlib"),
                       (["--topology", "v5e:1x1"], "give --optimized-hlo"),
                       (["--optimized-hlo", "--against-python", str(f), "--bisect", "ops"], "no --bisect")):
        err = io.StringIO()
        rc = main(["compare", str(f), *argv], stdout=io.StringIO(), stderr=err)
        assert rc == 2 and said in err.getvalue(), err.getvalue()
