"""Values matched across modules by XLA's ``origin={...}`` (the original value) before names and
structure (issue 42). jaxlib 0.10.2 and 0.12.1 read and print the attribute, but their CPU pipeline
does not run XLA's ``AddOriginalValue`` pass, so their dumps carry none (checked on a real dump
below): the modules here are hand-written in XLA's syntax (``xla/hlo/ir/hlo_original_value.cc``,
``OriginalValue::ToString``: ``{"name"}``, ``{"name" {0,1}}``, ``{}``, tuples in parentheses, an
optional ``,["call hierarchy"]``).

Oracle: the pairs are known by construction; a planted op must be the one named.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import xlasdk as xs
from xlasdk.errors import FormatError
from xlasdk.reference._against import match_instructions
from xlasdk.reference._origin import OriginalArray, origins, parse_origin

DATA = Path(__file__).resolve().parent / "data"


def test_the_attribute_is_read_as_xla_writes_it() -> None:
    assert parse_origin('{"exponential.3"}').array() == OriginalArray("exponential.3")
    v = parse_origin('({"while.4" {0}}, {"while.4" {1,2}}, {})')
    assert v.tuple and v.leaves == (OriginalArray("while.4", (0,)), OriginalArray("while.4", (1, 2)), None)
    assert v.array() is None
    assert parse_origin('({"a"}, ()),["call.2"]').call_hierarchy == "call.2"
    assert parse_origin("{}").leaves == (None,)


@pytest.mark.parametrize("bad", ['{"a"', '{a}', '{"a" {x}}', '({"a"} {"b"})', '{"a"} junk', '{""}', '{"a"},[b]',
                                 ''])
def test_a_malformed_attribute_is_a_format_error(bad: str) -> None:
    with pytest.raises(FormatError, match="expected"):
        parse_origin(bad)


def test_jaxlib_cpu_dumps_carry_no_origin() -> None:
    # what this venv's jaxlib wrote (tests/data/dumps*): matching falls back to names, then structure
    for d in ("dumps", "dumps_jax012"):
        for f in sorted((DATA / d).glob("*/module.after_optimizations.txt"))[:2]:
            assert "origin={" not in f.read_text()
            assert origins(xs.load_computation(f)) == {}


HEAD = "HloModule m\nENTRY e {\n  p0 = f32[8] parameter(0)\n  p1 = f32[8] parameter(1)\n"
GOOD = HEAD + ("  multiply.1 = f32[8] multiply(p0, p1)\n  add.2 = f32[8] add(multiply.1, p0)\n"
               "  ROOT tanh.3 = f32[8] tanh(add.2)\n}\n")


def _optimized(second: str) -> str:
    """An 'optimized' module whose names mislead: its ``add.2`` is the multiply (origin
    ``multiply.1``), its ``multiply.1`` the add (origin ``add.2``), written with ``second``."""
    return HEAD + ('  add.2 = f32[8] multiply(p0, p1), origin={{"multiply.1"}}\n'
                   f'  multiply.1 = f32[8] {second}(add.2, p0), origin={{{{"add.2"}}}}\n'
                   '  ROOT t = f32[8] tanh(multiply.1), origin={{"tanh.3"}}\n}\n')


def test_origin_wins_over_a_name_that_misleads() -> None:
    good = xs.XlaComputation.from_hlo_text(GOOD)
    bad = xs.XlaComputation.from_hlo_text(_optimized("add"))
    g = {i.name: i for i in good.instructions()}
    match, named, _ = match_instructions(bad, good)
    got = {i.name: match[i.index].name for i in bad.instructions() if i.index in match}
    assert got == {"p0": "p0", "p1": "p1", "add.2": "multiply.1", "multiply.1": "add.2", "t": "tanh.3"}
    assert named == 5 and g["tanh.3"].index in {m.index for m in match.values()}
    # the same module without its origins is matched by name: the misleading pairs
    plain = xs.XlaComputation.from_hlo_text(_optimized("add").replace(', origin={{"multiply.1"}}', "").replace(
        ', origin={{"add.2"}}', "").replace(', origin={{"tanh.3"}}', ""))
    m2, _, _ = match_instructions(plain, good)
    assert {i.name: m2[i.index].name for i in plain.instructions() if i.index in m2}.get("add.2") != "multiply.1"


def test_a_planted_op_is_named_through_origins() -> None:
    good = xs.XlaComputation.from_hlo_text(GOOD)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(8).astype(np.float32) for _ in range(2)]
    assert xs.compare(xs.XlaComputation.from_hlo_text(_optimized("add")), args, against=good, bisect="ops").ok
    report = xs.compare(xs.XlaComputation.from_hlo_text(_optimized("subtract")), args, against=good, bisect="ops")
    assert not report.ok
    b = report.bisect_ops
    assert b.status == "localised" and b.culprit.name == "multiply.1", str(report)


def test_a_malformed_origin_in_a_module_is_refused() -> None:
    good = xs.XlaComputation.from_hlo_text(GOOD)
    bad = xs.XlaComputation.from_hlo_text(_optimized("add"))
    from xlasdk.reference import _origin

    text = bad.as_hlo_text().replace('origin={{"tanh.3"}}', 'origin={{"tanh.3" {x}}}')
    with pytest.raises(FormatError):
        _origin.parse_origin(_origin._attribute(text.splitlines()[-2].strip()) or "")
    del good
