"""A verdict is never a dead end (issue 42): where the outputs' carried bounds cannot judge them,
the op-by-op step runs against any runner (against a second module: this module's run op by op and
both modules in the reference evaluator) and says which step decides; recorded outputs of another
device say what model judged them and why they diverge; every report carries per-value summaries
(min, max, mean, a CRC-32 of the bytes) and a histogram of per-value scores.

Oracles: numpy and zlib for the summaries; bugs planted in real JAX programs (an RK4 integrator of
the Lorenz system in a ``fori_loop``, a 12-layer transformer-like chain whose hidden state is zeroed
half way) and their own correct versions (XLA:CPU's optimized dump of the same program).
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk.reference._per_op import OpByOp
from xlasdk.reference._per_op_runners import combined, same_program
from xlasdk.reference._summaries import SCORE_BUCKETS, bucket

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from tests.test_compare_deep import LAYERS, _inputs, _lower, _model  # noqa: E402


def _lorenz(steps: int, planted: bool = False) -> Any:
    def rhs(y: Any) -> Any:
        x, yy, z = y[0], y[1], y[2]
        return jnp.stack([10.0 * (yy - x), x * ((28.0 + z) if planted else (28.0 - z)) - yy, x * yy - 8.0 / 3.0 * z])

    def f(y0: Any) -> Any:
        h = 0.01

        def step(i: Any, y: Any) -> Any:
            k1 = rhs(y)
            k2 = rhs(y + h / 2 * k1)
            k3 = rhs(y + h / 2 * k2)
            k4 = rhs(y + h * k3)
            return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)

        return jax.lax.fori_loop(0, steps, step, y0)

    return f


@pytest.fixture(scope="module")
def ode() -> tuple[xs.XlaComputation, xs.XlaComputation, xs.XlaComputation, list[np.ndarray[Any, Any]]]:
    """The integrator's before file, XLA:CPU's optimized dump of it, a planted bug, and its input."""
    x = np.array([1.0, 1.0, 1.0], np.float32)
    low = jax.jit(_lorenz(300)).lower(x)
    before = xs.XlaComputation.from_hlo_text(low.as_text(dialect="hlo"))
    after = xs.XlaComputation.from_hlo_text(low.compile().as_text())
    bug = xs.XlaComputation.from_hlo_text(jax.jit(_lorenz(300, planted=True)).lower(x).as_text(dialect="hlo"))
    return before, after, bug, [x]


def test_an_optimized_integrator_against_its_before_file_matches_and_a_bug_diverges(ode: Any) -> None:
    before, after, bug, args = ode
    r = xs.compare(after, args, against=before)
    assert r.ok and r.as_dict()["verdict"] == "MATCH", str(r)
    bad = xs.compare(bug, args, against=before)
    assert bad.as_dict()["verdict"] == "DIVERGENCE", str(bad)


def test_the_two_modules_in_the_reference_evaluator(ode: Any) -> None:
    before, after, bug, args = ode
    s = xs.CompareSettings()
    same = same_program(after, before, args, [0.0], s)
    assert same.verdict == "MATCH" and "bit-identical" in same.why
    diff = same_program(bug, before, args, [0.0], s)
    assert diff.verdict == "DIVERGENCE" and diff.first == "output 0" and diff.error is not None
    assert "programs differ" in "\n".join(diff.lines())


def test_a_planted_bug_in_a_deep_chain_against_its_good_module_is_never_a_match() -> None:
    args = _inputs()
    good = _lower(_model(None), *args)
    bad = _lower(_model(LAYERS // 2), *args)
    lines: list[str] = []
    report = xs.compare(bad, args, against=good, progress=lines.append)
    d = report.as_dict()
    assert d["outputs_verdict"] == "CANNOT JUDGE" and d["verdict"] != "MATCH", str(report)
    per_op = d["judged_op_by_op"]  # CANNOT JUDGE only with the op-by-op step's reason
    assert per_op is not None and per_op["why"], str(report)
    steps = {p["step"]: p for p in per_op["parts"]}
    assert steps["this module's run"]["verdict"] == "MATCH"  # the device runs the buggy program right
    assert steps["the two modules in the reference evaluator"]["verdict"] != "MATCH"  # but it is another program
    assert "the op-by-op step" in str(report) and any("op-by-op step" in ln for ln in lines)
    json.dumps(d)


def test_steps_combine_divergence_first_then_every_reason() -> None:
    m = OpByOp("MATCH", 3)
    c = OpByOp("CANNOT JUDGE", why="too loose")
    dv = OpByOp("DIVERGENCE", 2, "add.3", "add", 1, why="")
    assert combined([("a", m), ("b", m)]).verdict == "MATCH"
    both = combined([("a", m), ("b", c)])
    assert both.verdict == "CANNOT JUDGE" and both.why == "b: too loose" and [w for w, _ in both.parts] == ["a", "b"]
    first = combined([("a", c), ("b", dv)])
    assert first.verdict == "DIVERGENCE" and first.first == "add.3" and first.why == "b"
    assert first.deciding() == ["add.3"]


def test_recorded_outputs_of_another_kind_say_what_judged_them_and_why_they_diverge(ode: Any) -> None:
    before, _, _, args = ode
    want = xs.evaluate(before, *args)
    wrong = [np.asarray(w) * np.float32(1.5) for w in want]
    r = xs.compare(before, args, outputs=wrong, device_kind="tpu-v5e")
    text = "\n".join(r.judged_by)
    assert not r.ok and "TPU v5e" in r.as_dict()["against"] and "computing as tpu-v5e" in text, str(r)
    assert "output 0:" in text and "outside the bound" in text and "carried bound" in text
    ok = xs.compare(before, args, outputs=[np.asarray(w) for w in want], device_kind="tpu-v5e")
    assert ok.ok and ok.judged_by and "output 0:" not in "\n".join(ok.judged_by)


def test_per_value_summaries_and_score_histogram(ode: Any) -> None:
    before, _, bug, args = ode
    want0 = [np.asarray(w) for w in xs.evaluate(before, *args)]
    r = xs.compare(before, args, outputs=[w * np.float32(1.5) for w in want0])
    d = json.loads(json.dumps(r.as_dict()))
    got, want = np.asarray(r.outputs[0].got), np.asarray(r.outputs[0].want)
    s = d["summaries"][0]
    for side, a in (("got", got), ("want", want)):
        assert s[side]["checksum"] == f"{zlib.crc32(np.ascontiguousarray(a).tobytes()) & 0xFFFFFFFF:08x}"
        assert s[side]["min"] == float(a.min()) and s[side]["max"] == float(a.max())
        assert s[side]["mean"] == pytest.approx(float(a.astype(np.float64).mean()), rel=1e-12)
    hist = d["score_histogram"]["outputs"]
    assert list(hist) == list(SCORE_BUCKETS) and sum(hist.values()) == 1 and hist[">=1e-1"] == 1
    assert "crc32" in str(r) and "scores" in str(r)
    same = xs.compare(before, args, against=before)
    assert same.score_histogram()["outputs"]["identical"] == 1 and "(both)" in str(same)
    blown = xs.compare(bug, args, against=before).as_dict()  # the planted bug's state overflows to NaN
    assert blown["verdict"] == "DIVERGENCE" and blown["summaries"][0]["got"]["nonfinite"] == 3
    assert blown["summaries"][0]["got"]["min"] is None and blown["score_histogram"]["outputs"]["nonfinite"] == 1


@pytest.mark.parametrize(("score", "name"), [(0.0, "identical"), (5e-8, "<1e-7"), (2e-7, "1e-7..1e-6"),
                                             (0.05, "1e-2..1e-1"), (0.1, ">=1e-1"), (float("nan"), "nonfinite")])
def test_score_buckets(score: float, name: str) -> None:
    assert bucket(score) == name


def test_the_html_page_holds_the_summaries_and_the_histogram(ode: Any) -> None:
    from xlasdk.reference._bisect_html import html_report

    before, _, _, args = ode
    want0 = [np.asarray(w) for w in xs.evaluate(before, *args)]
    r = xs.compare(before, args, outputs=[w * np.float32(1.5) for w in want0])
    page = html_report(before, r)
    crc = f"{zlib.crc32(np.ascontiguousarray(r.outputs[0].got).tobytes()) & 0xFFFFFFFF:08x}"
    assert "<h2>Values</h2>" in page and crc in page and "&gt;=1e-1 1" in page
