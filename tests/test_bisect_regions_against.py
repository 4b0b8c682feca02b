"""``bisect="ops"`` against a second module goes inside regions (issue 42): when the instruction
that departs from its match is a ``while``, a call (a JAX private function such as ``jnp.tril``, a
fusion of an optimized dump) or a conditional, the matched regions of the bad and the good module
are compared on the good run's values, a ``while`` iteration by iteration, down to the planted
instruction; ``find_nonfinite`` goes inside the same way.

Oracle: bugs planted by hand in real JAX programs (one instruction of the module text edited: an
opcode, a compare direction, a constant), so the instruction to be named is known (its HLO name is
the ``op_name`` of the culprit found inside a region's program, the module's metadata stripped),
and so is the iteration (the program changes only where ``i == 3``); a correct program compared
with its twin must never be called divergent. The NaN's iteration is computed with numpy.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

DATA = Path(__file__).resolve().parent / "data"
X = np.linspace(0, 1, 8).astype(np.float32)
W = np.float32(1.5)


def _text(f: Any, *args: Any, debug: bool = False) -> str:
    """The HLO text JAX lowers ``f`` to; without ``debug`` its metadata stripped (so each op's
    ``op_name`` inside a region's program is its HLO name)."""
    lowered = jax.jit(f).lower(*args)
    if debug:
        return str(lowered.as_text(dialect="hlo", debug_info=True))
    return _strip(str(lowered.as_text(dialect="hlo")))


def _strip(text: str) -> str:
    return re.sub(r", metadata=\{[^{}]*\}", "", text)


def _plant(text: str, pattern: str, new: str) -> tuple[str, str]:
    """``text`` with the one instruction line matching ``pattern`` edited (``pattern`` -> ``new``),
    and that instruction's HLO name."""
    lines = [ln for ln in text.splitlines() if re.search(pattern, ln)]
    assert len(lines) == 1, (pattern, lines)
    name = re.match(r"\s*(?:ROOT )?%?(\S+) =", lines[0])
    assert name is not None
    return text.replace(lines[0], re.sub(pattern, new, lines[0])), name.group(1)


def _pair(text: str, bad_text: str) -> tuple[xs.XlaComputation, xs.XlaComputation]:
    return xs.XlaComputation.from_hlo_text(bad_text), xs.XlaComputation.from_hlo_text(text)


def _named(report: Any, planted: str, top_opcode: str, regions: list[str]) -> Any:
    """The report names ``planted`` (the deepest culprit's HLO name) through ``regions`` (then the
    functions a region calls, as some JAX versions wrap a loop's body in one), the first culprit
    being of ``top_opcode``; the deepest bisection."""
    b = report.bisect_ops
    assert not report.ok and b.status == "localised", str(report)
    assert b.culprit.opcode == top_opcode, str(b)
    deep = b.deepest
    assert deep.culprit.op_name == planted, str(b)
    steps = []
    r = b
    while r.inside is not None:
        steps.append(r.region)
        r = r.inside
    assert steps[:len(regions)] == regions and set(steps[len(regions):]) <= {"called function"}, b.path
    assert b.path.startswith(f"{b.culprit.name} > {regions[0]}") and b.path.endswith(deep.culprit.name), b.path
    text = str(report)
    assert f"path: {b.path} ({planted}" in text and "on the good run's values there" in text, text
    doc = b.as_dict()
    assert doc["path"] == b.path and doc["where"].startswith(planted), doc["where"]
    return deep


def _no_alarm(text: str, args: list[Any]) -> None:
    """A correct program against its twin (loaded again from the same text): no divergence."""
    a, b = xs.XlaComputation.from_hlo_text(text), xs.XlaComputation.from_hlo_text(text)
    report = xs.compare(a, args, against=b, bisect="ops")
    assert report.ok and report.bisect_ops.status == "no divergence", str(report)


# -- a while body (lax.fori_loop) ----------------------------------------------------------------------------------
def _loop(x: Any, w: Any) -> Any:
    def body(i: Any, c: Any) -> Any:
        d = jnp.where(i == 3,
                      c - w,  # the planted line: subtract -> add (only at iteration 3)
                      c)
        return d * 0.5 + 1.0

    return jax.lax.fori_loop(0, 6, body, x)


def test_an_op_in_a_while_body_is_named_with_its_iteration_and_source_line() -> None:
    text = _text(_loop, X, W, debug=True)
    bad_text, _ = _plant(text, r" subtract\(", " add(")
    bad, good = _pair(text, bad_text)
    assert xs.compare(bad, [X, W]).ok  # the reference evaluates the buggy program too: it cannot see it
    report = xs.compare(bad, [X, W], against=good, bisect="ops")
    b = report.bisect_ops
    assert not report.ok and b.status == "localised" and b.culprit.opcode == "stablehlo.while", str(report)
    assert b.region == "body (iteration 3)", str(b)
    deep = b.deepest
    assert deep.culprit.opcode == "stablehlo.add", str(b)
    line = inspect.getsourcelines(_loop)[1] + next(
        k for k, ln in enumerate(inspect.getsourcelines(_loop)[0]) if "c - w," in ln)
    assert deep.culprit.source.endswith(f"test_bisect_regions_against.py:{line}"), str(b)
    assert f"test_bisect_regions_against.py:{line})" in str(report).splitlines()[4], str(report)  # the path line
    _no_alarm(text, [X, W])


def test_the_planted_op_is_named_by_its_hlo_name_inside_the_loop() -> None:
    text = _text(_loop, X, W)
    bad_text, planted = _plant(text, r" subtract\(", " add(")
    bad, good = _pair(text, bad_text)
    report = xs.compare(bad, [X, W], against=good, bisect="ops")
    path = report.bisect_ops.path.split(" > ")
    assert path[1] == "body (iteration 3)", report.bisect_ops.path
    assert report.bisect_ops.deepest.culprit.op_name == planted, str(report)


# -- a called function (jnp.tril's mask) --------------------------------------------------------------------------
def _tril(m: Any) -> Any:
    return jnp.tril(m) * 2.0


def test_a_mask_compare_inside_a_called_function_is_named() -> None:
    m = np.arange(1, 26, dtype=np.float32).reshape(5, 5)
    text = _text(_tril, m)
    bad_text, planted = _plant(text, r"direction=GE", "direction=GT")  # tril keeps the diagonal: GE
    bad, good = _pair(text, bad_text)
    report = xs.compare(bad, [m], against=good, bisect="ops")
    deep = _named(report, planted, "func.call", ["called function"])
    assert deep.culprit.opcode == "stablehlo.compare"
    _no_alarm(text, [m])


# -- a constant in a lax.scan body --------------------------------------------------------------------------------
def _scan(x: Any, xs_: Any) -> Any:
    def cell(c: Any, xi: Any) -> Any:
        c = jnp.tanh(c * 0.75 + xi)
        return c, c

    return jax.lax.scan(cell, x, xs_)


def test_a_constant_in_a_scan_body_is_named() -> None:
    seq = np.linspace(-1, 1, 24).astype(np.float32).reshape(3, 8)
    text = _text(_scan, X, seq)
    bad_text, planted = _plant(text, r"constant\(0\.75\)", "constant(0.7)")
    bad, good = _pair(text, bad_text)
    report = xs.compare(bad, [X, seq], against=good, bisect="ops")
    deep = _named(report, planted, "stablehlo.while", ["body (iteration 0)"])
    # paired with the constant its users' matches read at its operand position (0.75), not left unmatched
    assert deep.culprit.opcode == "stablehlo.constant" and "which holds float32[] [0.75]" in deep.note, str(report)
    _no_alarm(text, [X, seq])


# -- a multiply in a backward pass (jax.grad of a loop) -----------------------------------------------------------
def _loss(w: Any, x: Any) -> Any:
    return jnp.sum(jax.lax.fori_loop(0, 4, lambda i, c: jnp.sin(c * w), x))


def test_a_multiply_in_the_backward_loop_of_a_gradient_is_named() -> None:
    text = _text(jax.grad(_loss), W, X)
    bodies = re.findall(r"while\([^)]*\), condition=%?([\w.]+), body=%?([\w.]+)", text)
    assert len(bodies) == 2, bodies  # the forward loop and its transpose
    first_mul = next(ln for ln in _reachable(text, bodies[-1][1]) if re.search(r" multiply\(", ln))
    bad_text, planted = _plant(text, re.escape(first_mul), first_mul.replace(" multiply(", " add("))
    bad, good = _pair(text, bad_text)
    report = xs.compare(bad, [W, X], against=good, bisect="ops")
    b = report.bisect_ops
    assert b.status == "localised" and b.deepest.culprit.op_name == planted, str(report)
    assert b.deepest.culprit.opcode == "stablehlo.add" and " > body (iteration " in b.path, str(b)
    _no_alarm(text, [W, X])


def _reachable(text: str, computation: str) -> list[str]:
    """The instruction lines of ``computation`` of HLO ``text`` and of the computations it calls."""
    blocks = {m.group(1): m.group(2) for m in re.finditer(r"^%?([\w.\-]+) [^\n]*\{\n(.*?)^\}", text, re.M | re.S)}
    out: list[str] = []
    todo, seen = [computation], set()
    while todo:
        c = todo.pop(0)
        if c in seen or c not in blocks:
            continue
        seen.add(c)
        out.extend(blocks[c].splitlines())
        todo.extend(re.findall(r"(?:to_apply|calls|body|condition)=%?([\w.\-]+)", blocks[c]))
    return out


# -- a branch of a conditional ------------------------------------------------------------------------------------
def _cond(x: Any, w: Any) -> Any:
    return jax.lax.cond(w > 1, lambda c: c * w + 2.0, lambda c: c - w, x)


def test_an_op_in_the_taken_branch_of_a_conditional_is_named() -> None:
    text = _text(_cond, X, W)
    bad_text, planted = _plant(text, r" multiply\(", " add(")
    bad, good = _pair(text, bad_text)
    report = xs.compare(bad, [X, W], against=good, bisect="ops")
    b = report.bisect_ops
    assert b.status == "localised" and b.culprit.opcode in ("stablehlo.case", "stablehlo.if"), str(b)
    assert b.region in ("branch 1", "true branch") and b.deepest.culprit.op_name == planted, str(b)
    _no_alarm(text, [X, W])


# -- a fusion of an optimized dump --------------------------------------------------------------------------------
GRU_FUSED_MUL = "%mul.64 = f32[2,4]{1,0} multiply(%sub.104, %param_3.64)"  # in the GRU cell's fusion


def test_a_multiply_in_a_fusion_of_xla_cpu_s_optimized_dump_is_named() -> None:
    from tests.test_real_dumps import recorded

    text = _strip((DATA / "dumps/gru_scan/module.cpu_after_optimizations.txt").read_text())
    bad_text, planted = _plant(text, re.escape(GRU_FUSED_MUL), GRU_FUSED_MUL.replace(" multiply(", " add("))
    bad, good = _pair(text, bad_text)
    args = recorded("dumps/gru_scan")[0]
    report = xs.compare(bad, args, against=good, bisect="ops")
    b = report.bisect_ops
    assert b.status == "localised" and b.culprit.opcode == "stablehlo.while", str(report)
    assert b.region == "body (iteration 0)" and "called function" in b.path, b.path
    assert b.deepest.culprit.op_name == planted == "mul.64" and b.deepest.culprit.opcode == "stablehlo.add", str(b)
    # the optimized module against its own module before optimizations: a correct pair, never divergent
    before = xs.load_computation(DATA / "dumps/gru_scan/module.before_optimizations.txt")
    assert xs.compare(good, args, against=before, bisect="ops").ok


def test_a_multiply_in_a_fusion_of_a_tpu_optimized_dump_is_named() -> None:
    from tests.test_real_dumps import recorded

    text = _strip((DATA / "dumps_tpu/gru_scan/module.after_optimizations.txt").read_text())
    bad_text, planted = _plant(text, r"(%mul\.39\.clone\.3 = \S+) multiply\(", r"\1 add(")  # a fusion of the body
    bad, good = _pair(text, bad_text)
    report = xs.compare(bad, recorded("dumps/gru_scan")[0], against=good, bisect="ops")
    b = report.bisect_ops
    assert b.status == "localised" and b.culprit.opcode == "stablehlo.while", str(report)
    assert b.region == "body (iteration 0)" and "called function" in b.path, b.path
    assert b.deepest.culprit.op_name == planted and b.deepest.culprit.opcode == "stablehlo.add", str(b)


# -- an op whose only user is its region's root (its value is an output of the region's program) ----------------
A4 = np.linspace(-1, 1, 16).astype(np.float32).reshape(4, 4)
B4 = np.linspace(0, 2, 16).astype(np.float32).reshape(4, 4)


def _root_loop(a: Any, b: Any) -> Any:
    return jax.lax.fori_loop(0, 4, lambda i, c: (c[0], jnp.tanh(c[0]) + c[1] * 0.5), (a, b))


def _root_loop_sub(a: Any, b: Any) -> Any:
    return jax.lax.fori_loop(0, 4, lambda i, c: (c[0], jnp.tanh(c[0]) - c[1] * 0.5), (a, b))


def root_loop_planted() -> tuple[str, str, str]:
    """The fori_loop whose body's ``add`` (read only by the body's ROOT tuple) is planted as a
    ``subtract``: (good text, bad text, the planted instruction's HLO name)."""
    text = _text(_root_loop, A4, B4)
    return (text, *_plant(text, r"f32\[4,4\]\{1,0\} add\(", "f32[4,4]{1,0} subtract("))


def root_fused_planted() -> tuple[str, str, str]:
    """XLA:CPU's optimized module of the loop with ``subtract``, the ``subtract`` at the ROOT of a
    fused computation planted as an ``add``: (good text, bad text, the planted instruction's HLO name)."""
    text = _strip(jax.jit(_root_loop_sub).lower(A4, B4).compile().as_text())
    blocks = re.findall(r"^%?(fused_computation[\w.]*) [^\n]*\{\n(.*?)^\}", text, re.M | re.S)
    root = re.compile(r"\s*ROOT \S+ = f32\[4,4\]\S* subtract\(")
    roots = [ln for _, body in blocks for ln in body.splitlines() if root.match(ln)]
    assert len(roots) == 1, text
    return (text, *_plant(text, re.escape(roots[0]), roots[0].replace(" subtract(", " add(")))


def test_an_op_read_only_by_the_root_of_a_loop_body_is_named() -> None:
    text, bad_text, planted = root_loop_planted()
    bad, good = _pair(text, bad_text)
    report = xs.compare(bad, [A4, B4], against=good, bisect="ops")
    deep = _named(report, planted, "stablehlo.while", ["body (iteration 0)"])
    assert deep.culprit.opcode == "stablehlo.subtract" and "output it makes departs" in deep.note, str(report)
    _no_alarm(text, [A4, B4])


def test_an_op_at_the_root_of_a_fused_computation_of_xla_cpu_s_optimized_module_is_named() -> None:
    text, bad_text, planted = root_fused_planted()
    bad, good = _pair(text, bad_text)
    report = xs.compare(bad, [A4, B4], against=good, bisect="ops")
    b = report.bisect_ops
    assert not report.ok and b.status == "localised", str(report)
    assert " > body (iteration 0) > " in b.path and "called function" in b.path, b.path
    assert b.deepest.culprit.op_name == planted and b.deepest.culprit.opcode == "stablehlo.add", str(b)
    assert f"path: {b.path} ({planted}" in str(report), str(report)
    _no_alarm(text, [A4, B4])


# -- find_nonfinite -----------------------------------------------------------------------------------------------
def _nan_loop(x: Any) -> Any:
    return jax.lax.fori_loop(0, 6, lambda i, c: jnp.log(c - 0.3) + 1.0 - 0.1 * i, x)


X1 = np.linspace(1, 2, 8).astype(np.float32)


def _first_nan_iteration(x: np.ndarray[Any, Any]) -> int:
    c = x.astype(np.float64)
    for i in range(6):
        with np.errstate(invalid="ignore", divide="ignore"):
            c = np.log(c - 0.3) + 1.0 - 0.1 * i
        if not np.all(np.isfinite(c)):
            return i
    raise AssertionError("no NaN")


def test_find_nonfinite_goes_into_the_iteration_that_makes_the_nan() -> None:
    comp = xs.XlaComputation.from_hlo_text(_text(_nan_loop, X1))
    nf = xs.compare(comp, [X1], find_nonfinite=True).nonfinite
    assert nf.status == "found" and nf.culprit.opcode == "stablehlo.while", str(nf)
    assert nf.region == f"body (iteration {_first_nan_iteration(X1)})", str(nf)
    assert nf.deepest.culprit.opcode == "stablehlo.log" and nf.inside.status == "found", str(nf)
    assert nf.path.endswith(nf.deepest.culprit.name) and f"path: {nf.path}" in str(nf)
    assert nf.as_dict()["path"] == nf.path


# -- the CLI ------------------------------------------------------------------------------------------------------
def test_cli_names_the_planted_op_inside_the_loop(tmp_path: Path) -> None:
    from tests.test_cli import cli

    text = _text(_loop, X, W)
    bad_text, planted = _plant(text, r" subtract\(", " add(")
    (tmp_path / "bad.hlo").write_text(bad_text)
    (tmp_path / "good.hlo").write_text(text)
    names = [i.name for i in xs.XlaComputation.from_hlo_text(text).instructions() if i.opcode == "parameter"]
    np.savez(tmp_path / "in.npz", **dict(zip(names, [X, W], strict=True)))
    code, out, err = cli("compare", str(tmp_path / "bad.hlo"), "--inputs", str(tmp_path / "in.npz"), "--against",
                         str(tmp_path / "good.hlo"), "--bisect", "ops", "--json", str(tmp_path / "r.json"))
    assert code == 1 and "DIVERGENCE" in out and "> body (iteration 3) > " in out, (out, err)
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["bisect_ops"]["path"].split(" > ")[1] == "body (iteration 3)"
    assert doc["bisect_ops"]["where"] == planted, doc["bisect_ops"]["where"]
    code, out, err = cli("compare", str(tmp_path / "good.hlo"), "--inputs", str(tmp_path / "in.npz"), "--against",
                         str(tmp_path / "good.hlo"), "--bisect", "ops", "--find-nonfinite")
    assert code == 0 and "bisect ops: no divergence" in out and "find nonfinite: none" in out, (out, err)
