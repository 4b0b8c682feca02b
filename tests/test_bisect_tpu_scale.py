"""``compare BAD --against GOOD --bisect ops`` names a planted attention scale in XLA's TPU dumps of
a bf16 transformer block, run on the CPU (issue 42).

After optimizations the scale (``constant.189``, 0.353553385, made 0.5) sits in a fusion whose output
masks the scaled scores with -1e9: at compare's tolerances (a fraction of the output's largest
magnitude) the masked scores agree, so the search stopped at the next fusion and said "not
localised"; the search again with every difference counted follows the values into the fusion that
holds the scale, where the constant itself departs at compare's tolerances. Before optimizations
the divisor (``constant.71``, 2.82842708, made 2) was paired by value with an unrelated
``constant(2)`` of the good module, so its broadcast was blamed; constants are now paired by their
position among their users' operands, and the constant is the culprit.

Oracle: the planted instruction is known (one line of the dump edited by hand); a correct module
against its twin is never divergent; a constant one float off, whose difference only the loop's
iterations make large, is never blamed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs

jax = pytest.importorskip("jax")

from tests.test_bisect_regions_against import DATA, _plant, _strip, _text  # noqa: E402 - after the skip

DUMPS = DATA / "dumps_tpu/transformer_bf16"


def _args() -> list[Any]:
    from tests.test_real_dumps import recorded

    return list(recorded("dumps/transformer_bf16")[0])


def _after() -> tuple[str, str, str]:
    text = _strip((DUMPS / "module.after_optimizations.txt").read_text())
    bad_text, planted = _plant(text, r"constant\(0\.353553385\)", "constant(0.5)")
    return text, bad_text, planted


def _before() -> tuple[str, str, str]:
    text = _strip((DUMPS / "module.before_optimizations.txt").read_text())
    bad_text, planted = _plant(text, r"constant\(2\.82842708\)", "constant(2)")
    return text, bad_text, planted


def test_the_scale_inside_a_fusion_of_the_tpu_optimized_module_is_named() -> None:
    text, bad_text, planted = _after()
    assert planted == "constant.189"
    bad, good = xs.XlaComputation.from_hlo_text(bad_text), xs.XlaComputation.from_hlo_text(text)
    report = xs.compare(bad, _args(), against=good, bisect="ops")
    b = report.bisect_ops
    assert not report.ok and b.status == "localised", str(report)
    deep = b.deepest
    assert deep.culprit.op_name == planted and deep.culprit.opcode == "stablehlo.constant", str(b)
    assert deep.culprit.hlo_line.endswith("constant(0.5)"), deep.culprit.hlo_line
    assert "which holds float32[] [0.3535533845424652]" in deep.note, deep.note  # the good module's scale
    assert b.culprit.opcode == "func.call" and b.region == "called function", str(b)  # the fusion that holds it
    assert b.path == f"{b.culprit.name} > called function > {deep.culprit.name}", b.path
    assert "at compare's tolerances the search stopped at fusion.172 > called function" in b.note, b.note
    assert "every difference counted" in b.method and f"({planted})" in str(report), str(report)
    assert b.as_dict()["where"] == planted
    # the correct module against its twin: no divergence, nobody blamed
    twin = xs.compare(good, _args(), against=xs.XlaComputation.from_hlo_text(text), bisect="ops")
    assert twin.ok and twin.bisect_ops.status == "no divergence", str(twin)


def test_the_divisor_of_the_module_before_optimizations_is_the_culprit_not_its_broadcast() -> None:
    text, bad_text, planted = _before()
    assert planted == "constant.71"
    bad, good = xs.XlaComputation.from_hlo_text(bad_text), xs.XlaComputation.from_hlo_text(text)
    assert "%constant.58 = f32[] constant(2)" in text  # the unrelated constant the value pairing took
    report = xs.compare(bad, _args(), against=good, bisect="ops")
    b = report.bisect_ops
    assert not report.ok and b.status == "localised" and b.inside is None, str(report)
    assert b.culprit.name == planted and b.culprit.opcode == "stablehlo.constant", str(b)
    assert b.culprit.hlo_line == f"{planted} = f32[] constant(2)", b.culprit.hlo_line
    assert "which holds float32[] [2.8284270763397217]" in b.note, b.note  # its counterpart, not a constant(2)
    assert b.path == planted and b.as_dict()["path"] == planted


def test_the_command_names_the_divisor_with_its_line(tmp_path: Path) -> None:
    from tests.test_cli import cli

    text, bad_text, planted = _before()
    (tmp_path / "bad.hlo").write_text(bad_text)
    (tmp_path / "good.hlo").write_text(text)
    names = [i.name for i in xs.XlaComputation.from_hlo_text(text).instructions() if i.opcode == "parameter"]
    np.savez(tmp_path / "in.npz", **dict(zip(names, _args(), strict=True)))
    code, out, err = cli("compare", str(tmp_path / "bad.hlo"), "--inputs", str(tmp_path / "in.npz"), "--against",
                         str(tmp_path / "good.hlo"), "--bisect", "ops", "--json", str(tmp_path / "r.json"))
    assert code == 1 and "DIVERGENCE" in out, (out, err)
    assert f"HLO: {planted} = f32[] constant(2)" in out, out
    doc = json.loads((tmp_path / "r.json").read_text())["bisect_ops"]
    assert doc["status"] == "localised" and doc["path"] == planted and doc["culprit"]["opcode"] == "stablehlo.constant"


def _logistic(x: Any) -> Any:
    return jax.lax.fori_loop(0, 40, lambda i, c: 3.9 * c * (1.0 - c), x)


def test_a_constant_one_float_off_is_not_blamed_with_every_difference_counted() -> None:
    """The logistic map's rate 3.9 -> 3.9000003: the outputs diverge, but no iteration on the same
    state departs at compare's tolerances, and the constant, one float off, is within them: the
    search with every difference counted blames nobody (its users read a differing value)."""
    x = np.linspace(0.1, 0.9, 8).astype(np.float32)
    text = _text(_logistic, x)
    bad_text, _ = _plant(text, r"constant\(3\.9\)", "constant(3.9000003)")
    bad, good = xs.XlaComputation.from_hlo_text(bad_text), xs.XlaComputation.from_hlo_text(text)
    report = xs.compare(bad, [x], against=good, bisect="ops")
    b = report.bisect_ops
    assert not report.ok, str(report)
    assert b.deepest.culprit is None or b.deepest.culprit.opcode == "stablehlo.while", str(b)
    last = b
    while last.inside is not None:
        last = last.inside
    assert last.status == "not localised", str(b)
    assert "with every difference counted, the search finds no instruction" in b.note, b.note
