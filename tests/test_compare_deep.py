"""``compare`` on deep models (issue 32): a wrong output is never within a bound carried through
many layers (a bound that reaches the output's size says "cannot judge", never MATCH), and a
top_k whose keys are near ties is judged by the order it gives, not bit for bit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlasdk as xs

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

D, SEQ, LAYERS = 16, 8, 12


def _lower(fn: Any, *args: Any) -> xs.XlaComputation:
    return xs.XlaComputation.from_hlo_text(jax.jit(fn).lower(*args).as_text(dialect="hlo"))


def _model(planted_at: int | None) -> Any:
    """A small transformer-like chain: layer norm, softmax attention and an MLP per layer;
    ``planted_at``: h zeroed after that layer (the bug a device could have)."""

    def norm(x: Any) -> Any:
        m = x.mean(-1, keepdims=True)
        return (x - m) * jax.lax.rsqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5)

    def forward(h: Any, ws: Any) -> Any:
        for i in range(LAYERS):
            x = norm(h)
            s = (x @ ws[i, 0]) @ (x @ ws[i, 1]).T / 4.0
            h = h + jax.nn.softmax(s, axis=-1) @ (x @ ws[i, 2])
            h = h + jnp.tanh(norm(h) @ ws[i, 3])
            if planted_at == i:
                h = h * 0.0
        return h, jax.lax.top_k(h[-1], 4)[0]

    return forward


def _inputs() -> list[np.ndarray[Any, Any]]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal((SEQ, D)).astype(np.float32),
            (rng.standard_normal((LAYERS, 4, D, D)) / np.sqrt(D)).astype(np.float32)]


def test_zeroing_deep_in_a_chain_is_never_a_match() -> None:
    args = _inputs()
    clean = _lower(_model(None), *args)
    wrong = xs.evaluate(_lower(_model(LAYERS // 2), *args), *args)  # what a device with the bug computes
    right = xs.evaluate(clean, *args)
    assert all(np.abs(w).max() < 0.1 * np.abs(r).max() for w, r in zip(wrong, right, strict=True))  # 100% wrong
    report = xs.compare(clean, args, outputs=wrong, device_kind="cpu")
    assert not report.ok
    for o in report.outputs:  # every wrong output flagged: outside its bound, or its bound too loose to judge
        assert o.mismatches or o.unjudged, str(report)
    assert "MATCH" not in str(report).splitlines()[0]
    assert report.as_dict()["verdict"] in ("DIVERGENCE", "CANNOT JUDGE")


def test_cli_says_cannot_judge_and_exits_3(tmp_path: Any, capsys: Any) -> None:
    """``xlasdk compare --outputs`` on the deep chain's wrong outputs: never exit 0; exit 3 and the
    verdict where no element is outside a bound that can judge it."""
    import json

    from xlasdk.cli import main

    args = _inputs()
    clean = _lower(_model(None), *args)
    wrong = xs.evaluate(_lower(_model(LAYERS // 2), *args), *args)
    report = xs.compare(clean, args, outputs=wrong, device_kind="cpu")
    (tmp_path / "m.hlo").write_text(clean.as_hlo_text())
    np.savez(tmp_path / "in.npz", **{str(i): a for i, a in enumerate(args)})
    np.savez(tmp_path / "out.npz", **{f"output_{i}": a for i, a in enumerate(wrong)})
    rc = main(["compare", str(tmp_path / "m.hlo"), "--inputs", str(tmp_path / "in.npz"), "--outputs",
               str(tmp_path / "out.npz"), "--device-kind", "cpu", "--json", str(tmp_path / "r.json")])
    doc = json.loads((tmp_path / "r.json").read_text())
    assert rc == (3 if doc["verdict"] == "CANNOT JUDGE" else 1) and doc["verdict"] == report.as_dict()["verdict"]
    assert not doc["match"] and any(o["unjudged"] for o in doc["outputs"]), capsys.readouterr().out


def test_zeroing_in_a_shallow_chain_is_a_divergence() -> None:
    """Where the bound stays tight (one layer), the zeroing is outside it, element by element."""
    global LAYERS
    saved, LAYERS = LAYERS, 1
    try:
        args = _inputs()
        clean = _lower(_model(None), *args)
        wrong = xs.evaluate(_lower(_model(0), *args), *args)
    finally:
        LAYERS = saved
    report = xs.compare(clean, args, outputs=wrong, device_kind="cpu")
    assert report.as_dict()["verdict"] == "DIVERGENCE"
    assert all(o.mismatches > 0 and not o.unjudged for o in report.outputs), str(report)


def _near_ties() -> tuple[xs.XlaComputation, list[np.ndarray[Any, Any]]]:
    """top_k of a long dot whose columns come in pairs whose exact values differ by far less than
    the dot's rounding: the device's f32 sums may rank a pair either way."""
    rng = np.random.default_rng(1)
    rows, k_dim, cols = 64, 512, 32
    x = rng.standard_normal((rows, k_dim)).astype(np.float32)
    w = rng.standard_normal((k_dim, cols)).astype(np.float32)
    w[:, 1::2] = w[:, 0::2]
    w[0, 1::2] = np.nextafter(w[0, 0::2], np.float32(np.inf))  # one ulp of one term apart
    comp = _lower(lambda a, b: jax.lax.top_k(a @ b, 6), x, w)
    return comp, [x, w]


def test_near_tie_top_k_indices_are_a_match() -> None:
    comp, args = _near_ties()
    report = xs.compare(comp, args, device="cpu:0")
    want = xs.evaluate(comp, *args)[1]
    got = report.outputs[1].got
    assert (got != want).any(), "the device ranks no near tie another way: the test would prove nothing"
    assert report.ok, str(report)
    assert report.outputs[1].mismatches == 0 and report.outputs[1].unjudged == 0


def test_top_k_indices_out_of_order_beyond_the_bound_are_a_divergence() -> None:
    """The order judgment still catches a wrong order: indices swapped where the keys are far apart."""
    from xlasdk.reference._orders import OrderKeys, judge_order

    keys = OrderKeys(np.array([[5.0, 1.0, 3.0, 2.0]]), np.full((1, 4), 1e-6))
    want = np.array([[0, 2, 3]])
    assert not judge_order(want, want, keys, 4.0)[0].any()
    assert judge_order(np.array([[2, 0, 3]]), want, keys, 4.0)[0].any()  # 3 before 5
    assert judge_order(np.array([[0, 2, 1]]), want, keys, 4.0)[0].any()  # 1 selected, 2 left out
    close = OrderKeys(np.array([[5.0, 1.0, 3.0, 3.0 + 1e-7]]), np.full((1, 4), 1e-7))
    assert not judge_order(np.array([[0, 2, 3]]), np.array([[0, 3, 2]]), close, 4.0)[0].any()  # a tie either way


def test_reduce_until_diverge_does_not_take_cannot_judge_for_a_divergence() -> None:
    """``reduce --until diverge`` keeps a candidate only where compare finds an element outside its
    bound: the clean deep chain (CANNOT JUDGE on the CPU: bounds of ~100 on errors of 1e-6) is not
    one, the shallow one with the zeroing is."""
    from xlasdk.reducer import _Diverge

    args = _inputs()
    clean = _lower(_model(None), *args)
    assert xs.compare(clean, args).as_dict()["outputs_verdict"] == "CANNOT JUDGE"  # MATCH judged op by op
    assert _Diverge(None, None, False).holds(clean.as_hlo_text(), args, 60.0)[0] is False
