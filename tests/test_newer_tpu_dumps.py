"""TPU dumps of a newer libtpu load under an older jaxlib (issue 43).

``tests/data/dumps_tpu/fori_loop_libtpu052/``: a ``jax.lax.fori_loop`` compiled for a v5e by libtpu 0.0.52
(jaxlib 0.12.1). Its optimized module reads the loop's tuple parameter with ``%t#k`` operands, which
jaxlib 0.10.2's parser lacks: xlasdk writes each as a ``get-tuple-element`` on the tuple's line, and
wrote its shape with an empty layout where the element was a tiled scalar (``s32[]{:T(128)}`` became
``s32[]{}``), which the older parser refuses ("HLO syntax error: line 17, column 137: expects opcode").
The element's layout is now written as the file wrote it. An operand ``name#k`` that does not name a
tuple's element is refused, naming the line and the construct.

Oracle: JAX 0.12.1's CPU outputs of the same program (``io.npz``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import xlasdk as xs
from tests.test_real_dumps import recorded
from xlasdk.formats.hlo_rewrite import _backported_hlo_text

DIR = Path(__file__).resolve().parent / "data" / "dumps_tpu" / "fori_loop_libtpu052"


@pytest.mark.parametrize("fname", ["module.before_optimizations.txt", "module.after_optimizations.txt"])
def test_a_libtpu_0_0_52_dump_loads_and_runs_here(fname: str) -> None:
    ins, want = recorded("dumps_tpu/fori_loop_libtpu052")
    text = (DIR / fname).read_text()
    assert "#0" in text and "{:T(128)}" in text  # the newer syntax, and tiled scalars
    comp = xs.load_computation(DIR / fname)
    got = [np.asarray(o.to_numpy()) for o in xs.compile(comp, device="cpu:0")(*ins)]
    np.testing.assert_allclose(got[0], want[0], rtol=2e-7)  # sin of this XLA: within an ulp of JAX 0.12's
    np.testing.assert_array_equal(got[1], want[1])


_TILED = """HloModule m, is_scheduled=true

%body (t: (s32[], f32[8])) -> (s32[], f32[8]) {
  %t = (s32[]{:T(128)}, f32[8]{0:T(128)S(1)}) parameter(0)
  %one = s32[]{:T(128)} constant(1)
  %i = s32[]{:T(128)} add(%t#0, %one)
  %x = f32[8]{0:T(128)S(1)} add(%t#1, %t#1)
  ROOT %r = (s32[]{:T(128)}, f32[8]{0:T(128)S(1)}) tuple(%i, %x)
}

%cond (c: (s32[], f32[8])) -> pred[] {
  %c = (s32[]{:T(128)}, f32[8]{0:T(128)S(1)}) parameter(0)
  %three = s32[]{:T(128)} constant(3)
  ROOT %lt = pred[]{:T(512)} compare(%c#0, %three), direction=LT
}

ENTRY %e (x: f32[8]) -> (s32[], f32[8]) {
  %x = f32[8]{0:T(128)} parameter(0)
  %zero = s32[]{:T(128)} constant(0)
  %init = (s32[]{:T(128)}, f32[8]{0:T(128)S(1)}) tuple(%zero, %x)
  ROOT %w = (s32[]{:T(128)}, f32[8]{0:T(128)S(1)}) while(%init), condition=%cond, body=%body
}
"""


def test_tuple_elements_of_tiled_scalars_are_written_as_the_older_parser_reads_them() -> None:
    """The rewrite for the older parser writes the elements' layouts as the file did, never ``s32[]{}``;
    the rewritten text loads (on either jaxlib) and computes what the original does: x doubled 3 times."""
    back = _backported_hlo_text(_TILED)
    assert back is not None
    assert "s32[]{}" not in back and "s32[]{:T(128)} get-tuple-element(%t), index=0" in back
    assert back.count("\n") == _TILED.count("\n")  # errors keep naming the file's own lines
    x = np.arange(8, dtype=np.float32)
    for text in (_TILED, back):
        i, y = xs.compile(xs.XlaComputation.from_hlo_text(text), device="cpu:0")(x)
        assert int(i.to_numpy()) == 3
        np.testing.assert_array_equal(y.to_numpy(), x * 8)


@pytest.mark.parametrize(("operand", "why"), [
    ("%t#2", r"'t' has 2 elements"),
    ("%one#0", r"'one' has no tuple shape"),
    ("%nowhere#0", r"has no instruction 'nowhere'"),
])
def test_an_operand_that_names_no_tuple_element_is_refused_naming_its_line(operand: str, why: str) -> None:
    bad = _TILED.replace("add(%t#0, %one)", f"add({operand}, %one)")
    with pytest.raises(xs.FormatError, match=rf"line 6: operand '{operand[1:]}' of 'i' \(add\) reads element .*{why}"):
        _backported_hlo_text(bad)
    with pytest.raises(xs.FormatError):  # by this rewrite (jaxlib 0.10) or by XLA's parser (jaxlib 0.12)
        xs.XlaComputation.from_hlo_text(bad)
