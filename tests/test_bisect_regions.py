"""``bisect="ops"`` inside regions: a divergence introduced inside a ``while`` body, a branch of a
``cond`` or a called function is localised to the instruction there, with the iteration.

Oracle: a planted bug. The reference's rule of ``multiply`` is made wrong (``a * b + 1``), so the
device (XLA, right) departs from it exactly at the multiplies whose value the program keeps; the
programs are real JAX programs (``lax.fori_loop``, ``lax.cond``) whose one multiply is known, and the
iteration at which its value is first kept is chosen by the program (``i == 3``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import _optable, ops

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def wrong_multiply(monkeypatch: pytest.MonkeyPatch) -> None:
    import xlasdk.reference  # noqa: F401 - binds the rules

    b = xs.XlaBuilder("row")
    p = ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, ()), "p")
    row = ops.Mul(p, p).opdef
    right = _optable._EVALUATE[row]
    monkeypatch.setitem(_optable._EVALUATE, row, lambda o, a, ev: np.asarray(right(o, a, ev)) + np.float32(1))


def _load(f: Any, *args: Any) -> xs.XlaComputation:
    return xs.XlaComputation.from_hlo_text(jax.jit(f).lower(*args).as_text(dialect="hlo"))


def _deepest(b: Any) -> Any:
    while b.inside is not None:
        b = b.inside
    return b


X = np.linspace(0, 1, 8).astype(np.float32)
W = np.float32(1.5)


def _loop(x: Any, w: Any) -> Any:
    return jax.lax.fori_loop(0, 6, lambda i, c: jnp.where(i == 3, c * w, c) + 1.0, x)


def test_a_bug_inside_a_while_body_is_localised_there_with_its_iteration(wrong_multiply: None) -> None:
    comp = _load(_loop, X, W)
    report = xs.compare(comp, [X, W], bisect="ops")
    b = report.bisect_ops
    assert not report.ok and b.status == "localised", str(b)
    (loop,) = [i for i in comp.instructions() if i.opcode == "stablehlo.while"]
    assert b.culprit is not None and b.culprit.name == loop.name and b.region == "body (iteration 3)", str(b)
    inner = _deepest(b)
    assert inner.status == "localised" and inner.culprit.opcode == "stablehlo.multiply", str(b)
    assert inner.culprit.op_name.startswith("mul"), str(b)  # the HLO instruction, by its metadata
    assert b.path.startswith(f"{loop.name} > body (iteration 3) > ") and b.path.endswith(inner.culprit.name)
    assert f"path: {b.path}" in str(report)
    d = b.as_dict()
    assert d["path"] == b.path and d["inside"]["status"] == "localised"


def test_a_bug_in_the_taken_branch_of_a_cond_is_localised_there(wrong_multiply: None) -> None:
    def f(x: Any, w: Any) -> Any:
        return jax.lax.cond(w > 1, lambda c: c * w + 2.0, lambda c: c - w, x)

    comp = _load(f, X, W)
    b = xs.compare(comp, [X, W], bisect="ops").bisect_ops
    assert b.status == "localised" and b.culprit is not None, str(b)
    assert b.culprit.opcode in ("stablehlo.case", "stablehlo.if"), str(b)
    assert b.region in ("branch 1", "true branch"), str(b)  # w > 1: the first lambda (case index 1)
    assert _deepest(b).culprit.opcode == "stablehlo.multiply", str(b)


def test_no_false_alarm_in_a_right_loop_nor_inside_one_that_is_not_the_culprit(wrong_multiply: None) -> None:
    # the multiply after the loop is the only one whose value is kept: nothing inside the loop is blamed
    def f(x: Any, w: Any) -> Any:
        return jax.lax.fori_loop(0, 4, lambda i, c: jnp.sin(c) + w, x) * w

    comp = _load(f, X, W)
    b = xs.compare(comp, [X, W], bisect="ops").bisect_ops
    assert b.status == "localised" and b.culprit is not None and b.culprit.opcode == "stablehlo.multiply", str(b)
    assert b.inside is None and b.path == b.culprit.name


def test_a_right_loop_gives_no_divergence() -> None:
    comp = _load(_loop, X, W)
    report = xs.compare(comp, [X, W], bisect="ops")
    assert report.ok and report.bisect_ops.status == "no divergence" and report.bisect_ops.inside is None


def test_nested_loops_are_followed_down_to_the_inner_body(wrong_multiply: None) -> None:
    def f(x: Any, w: Any) -> Any:
        def outer(i: Any, c: Any) -> Any:
            inner = jax.lax.fori_loop(0, 3, lambda j, d: jnp.where((i == 2) & (j == 1), d * w, d) + 1.0, c)
            return inner - 0.5

        return jax.lax.fori_loop(0, 4, outer, x)

    comp = _load(f, X, W)
    b = xs.compare(comp, [X, W], bisect="ops").bisect_ops
    assert b.status == "localised" and b.region == "body (iteration 2)", str(b)
    regions = []
    r = b
    while r.inside is not None:
        regions.append(r.region)
        r = r.inside
    assert "body (iteration 1)" in regions[1:], b.path  # the inner loop's second iteration
    assert r.culprit.opcode == "stablehlo.multiply", str(b)


@pytest.mark.parametrize(("fname", "top"), [
    ("module.cpu_after_optimizations.txt", "func.call"),  # a fusion of XLA:CPU's optimized dump
    ("module.before_optimizations.txt", "stablehlo.while"),  # the GRU's lax.scan
])
def test_a_real_dump_is_followed_into_its_fusion_or_its_scan(wrong_multiply: None, fname: str, top: str) -> None:
    from tests.test_real_dumps import recorded

    comp = xs.load_computation(f"{DATA}/dumps/gru_scan/{fname}")
    b = xs.compare(comp, recorded("dumps/gru_scan")[0], bisect="ops").bisect_ops
    assert b.status == "localised" and b.culprit is not None and b.culprit.opcode == top, str(b)
    assert b.region == ("called function" if top == "func.call" else "body (iteration 0)"), str(b)
    inner = _deepest(b)
    assert inner.status == "localised" and inner.culprit.opcode == "stablehlo.multiply", str(b)
