"""Bisection of a divergence to the op and to the XLA pass, and the first NaN/Inf (``xs.compare(...,
bisect="ops"|"passes", find_nonfinite=True)``, ``xlasdk compare --bisect``).

Oracles: a known XLA:CPU wrong value spliced into a real JAX dump (``x / broadcast(2**127)``: XLA
multiplies by the reciprocal, a subnormal flushed to zero, so the quotient is 0 where numpy gives
a normal number), whose instruction we know independently (by its spliced source line); XLA itself
with the named passes disabled (the divergence must go away: compared again against the
reference); numpy's ``nextafter`` for ulp distances; and every correct real dump of both corpora,
on which nothing may be blamed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from tests.test_real_dumps import recorded
from tests.test_reference import SUPPORTED
from xlasdk import ops
from xlasdk.reference._evaluator import run_reference
from xlasdk.reference._report import STRICT_PRECISION, compare_one
from xlasdk.reference.bisect import local_divergences

DATA = Path(__file__).resolve().parent / "data"
BIG = "1.70141183e+38"  # 2**127


def _splice(corpus: str, tmp_path: Path, kind: str = "divide") -> tuple[xs.XlaComputation, list[Any]]:
    """The convnet training step of ``corpus`` (HLO text before optimizations) with one op spliced in
    after the per-example loss (values -2.6..-2.1), marked ``spliced.py:7``:
    ``divide``: ``-(x**4 / broadcast(2**127))`` (right: 1e-37..3e-37, normal numbers; XLA:CPU 0,
    with jaxlib 0.10.2 and 0.12: the loss output diverges);
    ``log``: ``x + log(x) * 0`` (log of a negative number: NaN)."""
    src = (DATA / corpus / "convnet_train/module.before_optimizations.txt").read_text()
    m = re.search(r"\n  %(\S+) = f32\[4\]\{0\} reduce\(%mul\.16,[^\n]*", src)
    assert m is not None
    x = m.group(1)
    src = re.sub(rf"%{re.escape(x)}([,)])", r"%rescaled\1", src)  # its users read the spliced value
    line = m.group(0).replace(f"%{x},", "%rescaled,").replace(f"%{x})", "%rescaled)")
    md = 'metadata={op_name="spliced" source_file="spliced.py" source_line=7}'
    if kind == "divide":
        extra = (f"\n  %sq = f32[4]{{0}} multiply(%{x}, %{x})\n  %q4 = f32[4]{{0}} multiply(%sq, %sq)"
                 f"\n  %cbig = f32[] constant({BIG})\n  %bbig = f32[4]{{0}} broadcast(%cbig), dimensions={{}}"
                 f"\n  %spliced = f32[4]{{0}} divide(%q4, %bbig), {md}"
                 "\n  %rescaled = f32[4]{0} negate(%spliced)")
    else:
        extra = (f"\n  %spliced = f32[4]{{0}} log(%{x}), {md}\n  %czero = f32[] constant(0)"
                 "\n  %bzero = f32[4]{0} broadcast(%czero), dimensions={}"
                 "\n  %zeroed = f32[4]{0} multiply(%spliced, %bzero)"
                 f"\n  %rescaled = f32[4]{{0}} add(%{x}, %zeroed)")
    assert line in src
    src = src.replace(line, m.group(0) + extra)
    path = tmp_path / f"spliced_{kind}.txt"
    path.write_text(src)
    return xs.load_computation(path), recorded(f"{corpus}/convnet_train")[0]


def _spliced_instruction(comp: xs.XlaComputation) -> xs.Instruction:
    (ins,) = [i for i in comp.instructions() if i.metadata.source_file == "spliced.py"]
    return ins


@pytest.mark.parametrize("corpus", ["dumps", "dumps_jax012"])
def test_bisect_ops_names_the_spliced_divide_in_a_real_dump(corpus: str, tmp_path: Path) -> None:
    comp, ins = _splice(corpus, tmp_path)
    div = _spliced_instruction(comp)
    x = np.asarray(xs.evaluate(comp.with_outputs([div.operands[0]]), *ins)[0])
    right = x / np.float32(2.0**127)
    assert np.all(np.abs(right) >= np.finfo(np.float32).tiny)  # numpy: normal numbers, not 0
    report = xs.compare(comp, ins, bisect="ops")
    b = report.bisect_ops
    if report.ok:  # an XLA that computes it right: nothing to bisect
        assert b.status == "no divergence"
        return
    assert b.status == "localised", str(report)
    c = b.culprit
    assert (c.name, c.opcode, c.index, c.source) == (div.name, "stablehlo.divide", div.index, "spliced.py:7")
    names = [o.name for o in div.operands]
    assert c.hlo_line.startswith(f"{div.name} = f32[4]") and f"divide({names[0]}, {names[1]})" in c.hlo_line
    assert c.error is not None and c.error.mismatches == 4 and c.error.max_rel == 1.0  # every element 0
    assert list(c.operands) == names and c.value.endswith("[0.0, 0.0, 0.0, 0.0]")
    # alone on its operands it is right: the group with the broadcast of the constant diverges
    assert b.isolation == "group" and b.group[-1] == div.name and names[1] in b.group, str(report)
    assert b.compiles <= 2 * int(np.log2(len(comp.instructions()))) + 8  # O(log N)
    text = str(report)
    assert f"{div.name} (stablehlo.divide, instruction {div.index}) at spliced.py:7" in text
    assert "HLO: " + c.hlo_line in text
    doc = report.as_dict()
    assert doc["bisect_ops"]["culprit"]["name"] == div.name and doc["bisect_ops"]["culprit"]["source"] == "spliced.py:7"
    json.dumps(doc)


def test_bisect_passes_names_a_set_whose_disabling_removes_the_divergence(tmp_path: Path) -> None:
    comp, ins = _splice("dumps", tmp_path)
    report = xs.compare(comp, ins, bisect="passes")
    b = report.bisect_passes
    if report.ok:
        assert b.status == "no divergence"
        return
    assert b.status == "found", str(report)
    assert b.passes and set(b.passes) <= set(b.candidates) and "algsimp" in b.candidates
    # XLA compiled with that set disabled matches the reference (compared again, output by output)
    ref, scales = run_reference(comp, ins)
    flags = [*STRICT_PRECISION, ("xla_disable_hlo_passes", ",".join(b.passes))]
    got = xs.compile(comp, options=xs.CompileOptions(env_option_overrides=flags), cache=False)(*ins)
    assert all(compare_one(i, np.asarray(g), w, None, None, sc).ok
               for i, (g, w, sc) in enumerate(zip(got, ref, scales, strict=True)))
    # 1-minimal: leaving any pass of the set enabled brings the divergence back
    for p in b.passes:
        rest = [q for q in b.passes if q != p]
        flags = [*STRICT_PRECISION, ("xla_disable_hlo_passes", ",".join(rest))] if rest else list(STRICT_PRECISION)
        out = xs.compile(comp, options=xs.CompileOptions(env_option_overrides=flags), cache=False)(*ins)
        assert not all(compare_one(i, np.asarray(g), w, None, None, sc).ok
                       for i, (g, w, sc) in enumerate(zip(out, ref, scales, strict=True)))
    assert b.compiles < 60 and f"disabling {', '.join(b.passes)} removes the divergence" in str(report)


def test_bisect_on_a_built_program_names_the_divide_and_the_algebraic_simplifier() -> None:
    """x = exp(p) / 2**127 * 2**100: XLA:CPU's algebraic simplifier rewrites the division into a
    multiplication by the (subnormal, flushed) reciprocal."""
    b = xs.XlaBuilder("div_big")
    p = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (4,)), "p")
    q = ops.Div(ops.Exp(p), ops.Broadcast(ops.Constant(b, np.float32(2.0**127)), [4]))
    comp = b.build(ops.Mul(q, ops.Constant(b, np.float32(2.0**100))))
    a = np.array([1, 2, 3, 4], np.float32)
    report = xs.compare(comp, [a], bisect="ops")
    if report.ok:
        return
    (div,) = [i for i in comp.instructions() if i.opcode == "stablehlo.divide"]
    c = report.bisect_ops.culprit
    assert c is not None and c.name == div.name and c.source.endswith(f"test_bisect.py:{_line_of('ops.Div(')}")
    passes = xs.compare(comp, [a], bisect="passes").bisect_passes
    assert passes.status == "found" and passes.passes == ["algsimp"], str(passes)


def _log_exp(b: xs.XlaBuilder, p: xs.XlaOp) -> xs.XlaOp:
    return ops.Log(ops.Exp(p))  # folded to p: exp(100) overflows to inf in f32, so log gives inf


def _max_clamp(b: xs.XlaBuilder, p: xs.XlaOp) -> xs.XlaOp:
    lo = ops.Broadcast(ops.Constant(b, np.float32(5)), [3])  # lo > hi: Clamp gives hi, Max(hi, lo) gives lo
    return ops.Max(ops.Clamp(lo, p, ops.Broadcast(ops.Constant(b, np.float32(1)), [3])), lo)


@pytest.mark.parametrize(("build", "args", "want", "culprit", "partner"), [
    (_log_exp, [1.0, 100.0, -200.0], None, "stablehlo.log", "stablehlo.exponential"),
    (_max_clamp, [0.0, 3.0, 7.0], [5.0, 5.0, 5.0], "stablehlo.maximum", "stablehlo.clamp"),
])
def test_bisect_names_other_xla_cpu_wrong_values(build: Any, args: list[float], want: Any, culprit: str,
                                                 partner: str) -> None:
    """Two more XLA:CPU wrong values this project's campaigns found: each op is right alone and
    wrong compiled with the op before it (the algebraic simplifier merges them)."""
    b = xs.XlaBuilder("wrong")
    comp = b.build(build(b, ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (3,)), "p")))
    a = np.array(args, np.float32)
    if want is None:  # numpy, each op rounded to f32: exp(100) is inf, exp(-200) is 0
        with np.errstate(all="ignore"):
            want = np.log(np.exp(a.astype(np.float64)).astype(np.float32).astype(np.float64)).astype(np.float32)
        assert np.isinf(want[1:]).all()
    np.testing.assert_array_equal(xs.evaluate(comp, a)[0], np.array(want, np.float32))  # hand-computed / numpy
    report = xs.compare(comp, [a], bisect="ops")
    if report.ok:  # an XLA that computes it right
        return
    bo = report.bisect_ops
    names = {i.opcode: i.name for i in comp.instructions()}
    assert bo.status == "localised" and bo.culprit is not None and bo.culprit.name == names[culprit], str(bo)
    assert bo.isolation == "group" and bo.group[-1] == names[culprit] and names[partner] in bo.group, str(bo)
    passes = xs.compare(comp, [a], bisect="passes").bisect_passes
    assert passes.status == "found" and passes.passes == ["algsimp"], str(passes)


def _line_of(text: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, ln in enumerate(lines, 1) if text in ln and "q = " in ln)


# -- never cries wolf ------------------------------------------------------------------------------------------
# (test_reference.py's sweep of every real program runs compare with bisect="ops" too: "no divergence")
def _no_alarm(corpus: str, program: str, fname: str) -> None:
    ins, _ = recorded(f"{corpus}/{program}")
    comp = xs.load_computation(DATA / corpus / program / fname)
    report = xs.compare(comp, ins, bisect="ops", find_nonfinite=True)
    assert report.ok and report.bisect_ops.status == "no divergence" and report.bisect_ops.culprit is None
    assert "bisect ops: no divergence" in str(report)
    nf = report.nonfinite
    assert nf.status in ("none", "found"), str(nf)
    if nf.status == "found":  # an Inf a correct program makes on the way (erfc's polynomial) and drops
        assert nf.reference.startswith("also non-finite") and not nf.in_outputs, str(nf)
        assert "every output is finite" in str(nf)
    elif program == "transformer_bf16" and fname.startswith("module.before"):  # erfc overflows in f32 here
        raise AssertionError(f"the Inf of the transformer's erfc was not found: {nf}")


@pytest.mark.parametrize("program", ["transformer_bf16", "convnet_train", "gru_scan"])
def test_no_bisection_blames_anything_on_a_real_program(program: str) -> None:
    _no_alarm("dumps", program, "module.before_optimizations.txt")


@pytest.mark.campaign
@pytest.mark.parametrize("corpus", ["dumps", "dumps_jax012"])
@pytest.mark.parametrize(("program", "fname"), SUPPORTED)
def test_no_bisection_blames_anything_on_any_real_program(corpus: str, program: str, fname: str) -> None:
    _no_alarm(corpus, program, fname)


@pytest.mark.parametrize("program", ["transformer_bf16", "convnet_train", "gru_scan"])
def test_every_instruction_of_a_real_program_agrees_with_its_rule_on_the_devices_operands(program: str) -> None:
    """The test that blames an instruction, applied to every instruction of correct programs."""
    ins, _ = recorded(f"dumps/{program}")
    comp = xs.load_computation(DATA / "dumps" / program / "module.before_optimizations.txt")
    opts = xs.CompileOptions(env_option_overrides=STRICT_PRECISION)
    assert local_divergences(comp, ins, options=opts) == []


# -- NaN / Inf ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("corpus", ["dumps_jax012"])
def test_find_nonfinite_names_the_spliced_log_of_a_negative_value(corpus: str, tmp_path: Path) -> None:
    comp, ins = _splice(corpus, tmp_path, "log")
    log = _spliced_instruction(comp)
    x = np.asarray(xs.evaluate(comp.with_outputs([log.operands[0]]), *ins)[0])
    assert np.all(x < 0) and np.all(np.isfinite(x))  # numpy: log of these is NaN
    report = xs.compare(comp, ins, find_nonfinite=True)
    assert report.ok  # NaN on both sides: a match, but where does it come from?
    nf = report.nonfinite
    assert nf.status == "found" and nf.culprit is not None, str(nf)
    assert (nf.culprit.name, nf.culprit.opcode, nf.culprit.source) == (log.name, "stablehlo.log", "spliced.py:7")
    assert nf.culprit.hlo_line.startswith(f"{log.name} = f32[4]") and "log(" in nf.culprit.hlo_line
    assert nf.reference.startswith("also non-finite") and nf.culprit.value.endswith("[nan, nan, nan, nan]")
    assert nf.in_outputs and nf.outputs and all(np.isnan(np.asarray(xs.evaluate(comp, *ins)[k])).any()
                                                for k in nf.outputs)
    assert f"output {nf.outputs[0]} holds NaN/Inf" in str(nf) or "outputs" in str(nf)


def test_find_nonfinite_on_arguments_and_on_xla_s_own() -> None:
    b = xs.XlaBuilder("nf")
    p = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (3,)), "p")
    comp = b.build(ops.Sqrt(ops.Sub(p, ops.Constant(b, np.float32(1)))))
    r = xs.compare(comp, [np.array([1, 2, np.nan], np.float32)], find_nonfinite=True)
    assert r.nonfinite.status == "from inputs" and "p" in r.nonfinite.note
    r = xs.compare(comp, [np.array([0, 2, 5], np.float32)], find_nonfinite=True)
    (sqrt,) = [i for i in comp.instructions() if i.opcode == "stablehlo.sqrt"]
    assert r.nonfinite.status == "found" and r.nonfinite.culprit.name == sqrt.name  # sqrt(-1)
    r = xs.compare(comp, [np.array([1, 2, 5], np.float32)], find_nonfinite=True)
    assert r.nonfinite.status == "none"


# -- ulps -----------------------------------------------------------------------------------------------------
def test_ulps_tolerance() -> None:
    b = xs.XlaBuilder("f")
    comp = b.build(ops.Neg(ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (3,)), "p")))
    a = np.array([1.0, 3.0, 1e30], np.float32)
    want = -a
    for _ in range(3):  # three ulps away (numpy's nextafter), in each element
        want = np.nextafter(want, np.float32(-np.inf))
    strict = xs.compare(comp, [a], against=[want], rtol=0, atol=0)
    assert strict.outputs[0].mismatches == 3
    assert xs.compare(comp, [a], against=[want], rtol=0, atol=0, ulps=4).ok
    assert xs.compare(comp, [a], against=[want], rtol=0, atol=0, ulps=2).outputs[0].mismatches == 3
    with pytest.raises(xs.ShapeError, match="ulps must be a finite number >= 0, got -1"):
        xs.compare(comp, [a], ulps=-1)
    with pytest.raises(xs.XlaSdkError, match="bisect='op'"):
        xs.compare(comp, [a], bisect="op")


# -- the command line -----------------------------------------------------------------------------------------
def test_cli_bisect_ops_and_usage(tmp_path: Path) -> None:
    from tests.test_cli import cli

    b = xs.XlaBuilder("div_big")
    p = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (4,)), "p")
    comp = b.build(ops.Mul(ops.Div(ops.Exp(p), ops.Broadcast(ops.Constant(b, np.float32(2.0**127)), [4])),
                           ops.Constant(b, np.float32(2.0**100))))
    (div,) = [i for i in comp.instructions() if i.opcode == "stablehlo.divide"]
    path = str(tmp_path / "div_big.hlo")
    Path(path).write_text(comp.as_hlo_text())
    np.savez(tmp_path / "in.npz", p=np.array([1, 2, 3, 4], np.float32))
    code, out, err = cli("compare", path, "--inputs", str(tmp_path / "in.npz"), "--bisect", "ops", "--json",
                         str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html"))
    if "MATCH" in out:  # an XLA that computes it right
        assert code == 0
        return
    rows = _html_rows((tmp_path / "r.html").read_text())
    marked = {cells[1]: cls for cls, cells in rows if cls}
    loaded = xs.load_computation(path)
    (ldiv,) = [i.name for i in loaded.instructions() if i.opcode == "stablehlo.divide"]
    (lmul,) = [i.name for i in loaded.instructions() if i.opcode == "stablehlo.multiply"]
    assert marked.get(ldiv) == "culprit" and marked.get(lmul) == "carries", marked
    # the output row, its value summaries (device, expected), then every instruction
    assert len(rows) == 1 + 2 + len(loaded.instructions())

    assert code == 1 and "(stablehlo.divide, instruction" in out and "bisect_ops.py" not in out, (out, err)
    assert "bisect ops: instructions" in err  # progress, a line per step
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["bisect_ops"]["status"] == "localised" and doc["bisect_ops"]["culprit"]["opcode"] == "stablehlo.divide"
    assert doc["bisect_ops"]["culprit"]["index"] == div.index
    code, out, err = cli("compare", path, "--inputs", str(tmp_path / "in.npz"), "--bisect", "passes",
                         "--find-nonfinite")
    assert code == 1 and "disabling algsimp removes the divergence" in out and "find nonfinite: none" in out, out
    code, _, err = cli("compare", path, "--inputs", str(tmp_path / "in.npz"), "--bisect", "passes", "--against",
                       "cpu:0")
    assert code == 2 and "--bisect / --find-nonfinite compare against the reference" in err, err
    code, out, err = cli("compare", path, "--inputs", str(tmp_path / "in.npz"), "--bisect", "ops", "--against",
                         "cpu:0")  # another device (issue 32): the same device here, so nothing to bisect
    assert code == 0 and "bisect ops: no divergence" in out, (out, err)
    code, _, err = cli("compare", path, "--inputs", str(tmp_path / "in.npz"), "--bisect", "nope")
    assert code == 2
    code, _, err = cli("compare", path, "--inputs", str(tmp_path / "in.npz"), "--ulps", "-1")
    assert code == 2 and "argument --ulps: must be a finite number >= 0, got '-1'" in err, err


def assert_self_contained(page: str) -> None:
    """The page's text names nothing outside it and runs nothing: no scripts, no embedded
    documents, no URLs (links only to its own ``#fragments``), no CSS imports or url()."""
    low = page.lower()
    for bad in ("<script", "<link", "<iframe", "<object", "<embed", "<img", "@import", "url(", "://", "javascript:"):
        assert bad not in low, bad
    refs = re.findall(r"""\b(?:src|href|action|srcset|data|poster|background)\s*=\s*["']?([^"'\s>]*)""", low)
    assert all(r.startswith("#") for r in refs), refs
    assert "content-security-policy" in low and "default-src 'none'" in low  # a browser refuses anything else


def _html_rows(page: str) -> list[tuple[str, list[str]]]:
    """(class, cells) of every data row of a page's tables; the page must be self-contained."""
    from html.parser import HTMLParser

    assert_self_contained(page)
    rows: list[tuple[str, list[str]]] = []

    class P(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "tr":
                rows.append((dict(attrs).get("class") or "", []))
            elif tag == "td":
                rows[-1][1].append("")

        def handle_data(self, data: str) -> None:
            if rows and rows[-1][1]:
                rows[-1][1][-1] += data

    P().feed(page)
    return [r for r in rows if r[1]]


def test_ulp_error_is_counted_in_the_output_type_at_the_reference_value() -> None:
    """numpy's nextafter is one ulp; the count holds across binades and for subnormals."""
    from xlasdk.reference._report import ulps_apart

    w = np.array([1.0, 3.0, 1e30, 1e-40, 0.0], np.float32)
    g = w.copy()
    for _ in range(5):
        g = np.nextafter(g, np.float32(np.inf))
    np.testing.assert_allclose(ulps_apart(g, w), 5.0)
    bf = np.dtype(xs.bfloat16)
    wb = np.array([1.0, 3.0, -7.0], bf)
    gb = (wb.astype(np.float64) + np.array([2.0**-7, 2 * 2.0**-6, -3 * 2.0**-5])).astype(bf)  # 1, 2, 3 ulps
    np.testing.assert_allclose(ulps_apart(gb, wb), [1.0, 2.0, 3.0])


def test_bisect_ops_blames_nobody_when_the_divergence_needs_ops_compiled_together() -> None:
    """p / 2**127 * 2**127 with p = 0.5: the quotient 2**-128 is subnormal. XLA:CPU gives 0 for it
    (flushed), which is within the tolerance of a value (the smallest normal number), so every
    exposed value agrees; the product then diverges (0 against 0.5) while being right on its
    operands. No op introduces it alone: nobody is blamed, and the group is named."""
    b = xs.XlaBuilder("ftz")
    p = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (2,)), "p")
    c = ops.Broadcast(ops.Constant(b, np.float32(2.0**127)), [2])
    comp = b.build(ops.Mul(ops.Div(p, c), c))
    a = np.array([0.5, 0.25], np.float32)
    (ref,) = xs.evaluate(comp, a)
    np.testing.assert_array_equal(ref, a)  # exact in numpy: subnormals kept
    report = xs.compare(comp, [a], bisect="ops")
    if report.ok:
        return
    bo = report.bisect_ops
    assert bo.status == "not localised" and bo.culprit is None, str(bo)
    assert "no instruction is blamed" in str(bo)
    names = {i.opcode: i.name for i in comp.instructions()}
    if bo.isolation == "group":
        assert bo.group[-1] == names["stablehlo.multiply"] and names["stablehlo.divide"] in bo.group


# -- the report in a real browser ------------------------------------------------------------------------------
def _chromium() -> str | None:
    """A Chromium binary: ``$XLASDK_CHROMIUM``, else one on PATH (Debian's package is ``chromium``)."""
    import os
    import shutil

    given = os.environ.get("XLASDK_CHROMIUM")
    if given:
        return given
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome", "headless_shell"))
                 if p), None)


# Loaded beside the report (an iframe of the same origin: --allow-file-access-from-files), it reads
# what the browser rendered: each box's geometry (getBBox) and computed fill and outline, each edge's
# end points (getPointAtLength), the legend's colors, the report's resource-timing entries (what it
# fetched); then it asks the report's document to load an outside image, which the report's
# Content-Security-Policy must refuse (a control: the browser enforces the policy, and a refusal
# shows on the console). It writes everything as JSON into the DOM that --dump-dom prints.
_PROBE = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>
<iframe id="r" src="report.html" width="1600" height="1200" style="border:0"></iframe><pre id="probe"></pre>
<script>
window.addEventListener("load", () => {
  const out = {errors: [], violations: []};
  const f = document.getElementById("r"), d = f.contentDocument, w = f.contentWindow;
  try {
    const style = (e) => w.getComputedStyle(e);
    d.addEventListener("securitypolicyviolation", (e) => out.violations.push(e.blockedURI + " " + e.violatedDirective));
    out.title = d.title;
    out.scripts = d.scripts.length;
    const svg = d.querySelector("svg.program"), sb = svg.getBoundingClientRect();
    out.svg = {w: sb.width, h: sb.height};
    out.nodes = [...svg.querySelectorAll("g.op")].map((g) => {
      const r = g.querySelector("rect"), b = r.getBBox(), s = style(r);
      return {name: g.dataset.name, opcode: g.dataset.opcode, error: g.dataset.error, classes: [...g.classList],
              fill: s.fill, stroke: s.stroke, strokeWidth: parseFloat(s.strokeWidth),
              x: b.x, y: b.y, w: b.width, h: b.height, text: g.querySelector("text").textContent};
    });
    out.edges = [...svg.querySelectorAll("path.edge")].map((p) => {
      const n = p.getTotalLength(), a = p.getPointAtLength(0), z = p.getPointAtLength(n), s = style(p);
      return {from: p.dataset.from, to: p.dataset.to, classes: [...p.classList], stroke: s.stroke,
              width: parseFloat(s.strokeWidth), fill: s.fill, x1: a.x, y1: a.y, x2: z.x, y2: z.y, length: n};
    });
    out.legend = {};
    for (const r of d.querySelectorAll(".legend [data-class] rect")) {
      out.legend[r.closest("[data-class]").dataset.class] = style(r).fill;
    }
    out.resources = w.performance.getEntriesByType("resource").map((e) => e.name);
    const img = d.createElement("img");
    img.src = "http://example.invalid/control.png";
    d.body.appendChild(img);
    console.log("xlasdk-probe-ran");
  } catch (e) { out.errors.push(String(e)); }
  setTimeout(() => { document.getElementById("probe").textContent = JSON.stringify(out); }, 500);
});
</script></body></html>
"""


def _render(chromium: str, page: str, tmp_path: Path) -> tuple[dict[str, Any], str]:
    """Render ``page`` in headless Chromium with networking off; the probe's JSON and the console."""
    import subprocess

    (tmp_path / "report.html").write_text(page)
    (tmp_path / "probe.html").write_text(_PROBE)
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", "--allow-file-access-from-files",
           # networking off: no name resolves, and any connection goes to a closed local port
           "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=socks5://127.0.0.1:9",
           "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--window-size=1600,1200",
           "--dump-dom", (tmp_path / "probe.html").as_uri()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    m = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout, re.S)
    assert done.returncode == 0 and m is not None and m.group(1), (done.returncode, done.stdout[-2000:],
                                                                   done.stderr[-3000:])
    from html import unescape

    return json.loads(unescape(m.group(1))), done.stderr


def test_html_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    """The page of a real divergence (XLA:CPU's ``x / 2**127`` spliced into the convnet training
    step), rendered by Chromium with networking off: every instruction drawn as a box, every
    operand an edge from its box down to its user's, each box filled with its error class's
    legend color, where the class is recomputed here from XLA's and the reference's values of
    every instruction; the spliced divide outlined as the first divergent op and exactly the
    instructions and edges that carry its value to an output outlined in red; nothing fetched, no
    script of its own, no JavaScript error, and the page's CSP enforced."""
    from xlasdk.reference.bisect import html_report

    chromium = _chromium()
    if chromium is None:
        pytest.skip("no Chromium binary (apt-get install chromium, or set XLASDK_CHROMIUM): the report is not "
                    "rendered in a browser here")
    comp, ins = _splice("dumps", tmp_path)
    report = xs.compare(comp, ins, bisect="ops")
    if report.ok:  # an XLA that computes it right: nothing to draw in red
        pytest.skip("this XLA computes x / 2**127 right")
    page = html_report(comp, report)
    assert_self_contained(page)
    probe, console = _render(chromium, page, tmp_path)
    assert probe["errors"] == [] and probe["title"] == f"{report.name}: DIVERGENCE", probe["errors"]

    # the graph: one box per instruction, and one edge per operand
    instrs = comp.instructions()
    nodes = {n["name"]: n for n in probe["nodes"]}
    assert len(probe["nodes"]) == len(nodes) == len(instrs) and set(nodes) == {i.name for i in instrs}
    assert probe["svg"]["w"] > 500 and probe["svg"]["h"] > 500
    for i in instrs:
        n = nodes[i.name]
        assert n["opcode"] == i.opcode and n["w"] > 100 and n["h"] > 20, n
        assert i.name.startswith(n["text"].rstrip("\u2026")), n
    boxes = sorted((n["x"], n["y"], n["x"] + n["w"], n["y"] + n["h"]) for n in probe["nodes"])
    for k, a in enumerate(boxes):  # no two boxes overlap
        for b in boxes[k + 1:]:
            if b[0] >= a[2]:
                break
            assert b[1] >= a[3] or a[1] >= b[3], (a, b)
    want_edges = {(o.name, i.name) for i in instrs for o in i.operands}
    edges = {(e["from"], e["to"]): e for e in probe["edges"]}
    assert len(probe["edges"]) == len(edges) and set(edges) == want_edges
    for (a, b), e in edges.items():  # from the bottom of the operand's box to the top of its user's, downwards
        na, nb = nodes[a], nodes[b]
        assert abs(e["x1"] - (na["x"] + na["w"] / 2)) < 1 and abs(e["y1"] - (na["y"] + na["h"])) < 1, (e, na)
        assert abs(e["x2"] - (nb["x"] + nb["w"] / 2)) < 1 and abs(e["y2"] - nb["y"]) < 1, (e, nb)
        assert e["y2"] > e["y1"] and e["length"] > 0 and e["fill"] == "none"

    # each box's color: its error class, recomputed from every value of XLA (same flags) and the reference
    arrays = [i for i in instrs if i.opcode != "parameter" and i.shape.is_array()]
    sub = comp.with_outputs([i.name for i in arrays])
    got = xs.compile(sub, options=xs.CompileOptions(env_option_overrides=STRICT_PRECISION), cache=False)(*ins)
    want = xs.evaluate(sub, *ins)
    legend = probe["legend"]
    assert set(legend) == {"exact", "rounding", "diverges", "unmeasured"} and len(set(legend.values())) == 4
    kinds: dict[str, int] = {}
    for i, g, w in zip(arrays, got, want, strict=True):
        g64, w64 = np.asarray(g).astype(np.float64), np.asarray(w).astype(np.float64)
        n = nodes[i.name]
        kinds[n["error"]] = kinds.get(n["error"], 0) + 1
        assert n["fill"] == legend[n["error"]] and f"err-{n['error']}" in n["classes"], n
        if np.array_equal(g64, w64, equal_nan=True):
            assert n["error"] == "exact", (n, g64, w64)
            continue
        with np.errstate(all="ignore"):
            rel = np.abs(g64 - w64) / np.maximum(np.abs(w64), np.finfo(np.float32).tiny)
        if np.nanmax(rel) >= 0.5:  # a wrong value, not a rounding
            assert n["error"] == "diverges", (n, g64, w64)
        else:  # off by a rounding: within 1e-3 of the output's magnitude (f32 tolerance: 1e-5 relative + ...)
            assert n["error"] == "rounding", (n, g64, w64)
            assert np.max(np.abs(g64 - w64)) <= 1e-3 * max(1.0, float(np.max(np.abs(w64)))), (n, g64, w64)
    for p in (i for i in instrs if i.opcode == "parameter"):
        assert nodes[p.name]["error"] == "exact" and nodes[p.name]["fill"] == legend["exact"]
    assert kinds.get("diverges", 0) >= 3 and kinds.get("exact", 0) > 10 and kinds.get("rounding", 0) > 10, kinds

    # the first divergent op (the spliced divide, known by its source line) and its path to the outputs
    div = _spliced_instruction(comp)
    graph = comp.instruction_graph()
    outs = {graph.instruction_of(o).name for o in graph.outputs}

    def reach(start: xs.Instruction, step: str) -> set[str]:
        seen, stack = {start.name}, [start]
        while stack:
            for u in getattr(stack.pop(), step):
                if u.name not in seen:
                    seen.add(u.name)
                    stack.append(u)
        return seen

    feeds = set().union(*(reach(comp.instruction(o), "operands") for o in outs))
    path = reach(div, "users") & feeds
    assert div.name in path and path & outs, path
    firsts = [n for n in probe["nodes"] if "first" in n["classes"]]
    assert [n["name"] for n in firsts] == [div.name]
    assert firsts[0]["strokeWidth"] > max(n["strokeWidth"] for n in probe["nodes"] if n["name"] != div.name)
    red = "rgb(204, 0, 0)"
    assert {n["name"] for n in probe["nodes"] if "path" in n["classes"]} == path
    assert all((n["stroke"] == red) == (n["name"] in path - {div.name}) for n in probe["nodes"])
    assert all(nodes[n]["error"] == "diverges" for n in path)
    path_edges = {(a, b) for a, b in want_edges if a in path and b in path}
    assert path_edges and {k for k, e in edges.items() if "path" in e["classes"]} == path_edges
    assert all((e["stroke"] == red and e["width"] >= 3) == (k in path_edges) for k, e in edges.items())

    # self-contained: nothing fetched with networking off, no script, no JavaScript error; the CSP holds
    assert probe["resources"] == [] and probe["scripts"] == 0
    assert "xlasdk-probe-ran" in console  # the console is read (so the absence of errors below means something)
    assert probe["violations"] and all(v.startswith("http://example.invalid/control.png") for v in probe["violations"])
    lines = [ln for ln in console.splitlines() if ":CONSOLE" in ln]
    assert not [ln for ln in lines if "Uncaught" in ln or "Error" in ln], lines
    refused = [ln for ln in lines if "Refused" in ln or "Content Security Policy" in ln]
    assert refused and all("example.invalid/control.png" in ln for ln in refused), refused


def test_layered_layout_puts_every_edge_downwards_and_no_two_nodes_in_one_place() -> None:
    """Properties of the report's graph layout on random DAGs (what the browser test sees drawn)."""
    from xlasdk._graph_layout import layered_layout

    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 40, 120):
        edges = sorted({(int(s), int(t)) for t in range(1, n) for s in rng.choice(t, size=min(t, 2), replace=False)
                        if rng.random() < 0.8})
        pinned = [0]
        layer, col = layered_layout(n, edges, pinned=pinned)
        assert all(layer[t] > layer[s] for s, t in edges)
        assert len({(layer[v], col[v]) for v in range(n)}) == n  # distinct places
        for k in set(layer):
            assert sorted(col[v] for v in range(n) if layer[v] == k) == list(range(layer.count(k)))
        assert layer[0] == 0
        users = {s: [t for s2, t in edges if s2 == s] for s in range(n)}
        for v in range(1, n):  # as late as possible: just above the first user
            if users[v]:
                assert layer[v] == min(layer[t] for t in users[v]) - 1
    with pytest.raises(ValueError, match="does not go forward"):
        layered_layout(3, [(2, 1)])
