"""Campaign 3 of issue 9: random chains of ops run by XLA and checked against numpy (see chains.py).

The quick profile (default suite) runs chains with seeds 0..99, about 15 s; the long profile
(``pytest -m campaign``) runs ``XLASDK_CHAINS_LONG`` chains (default 5,000) from seed
``XLASDK_CHAINS_SEED`` (default 1,000,000), so that it explores chains the quick profile never
sees. Each chain runs in a child process (``harness.py``) with its inputs as parameters and as
constants. A failure lists the seed, the chain as xlasdk code with its inputs, and the first
elements outside the oracle's enclosure; ``python tests/campaigns/chains.py --triage SEED`` finds the
first step whose result leaves it.

The other tests here check the oracle itself against the integer semantics written down in
``shared/cases/cases.md`` and check that it rejects wrong answers, and check the harness.
"""

from __future__ import annotations

import math
import os
import sys

import chains
import ml_dtypes
import numpy as np
import pytest
from chains import FVal, IVal, Lit, Step
from harness import Task, run_batch

QUICK_CHAINS = 100
LONG_CHAINS = int(os.environ.get("XLASDK_CHAINS_LONG", "5000"))
LONG_SEED = int(os.environ.get("XLASDK_CHAINS_SEED", "1000000"))


def _figures(capsys: pytest.CaptureFixture[str], line: str) -> None:
    with capsys.disabled():
        print(f"\n[campaign] {line}", flush=True)


def test_chains_quick(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    res = chains.run_campaign(QUICK_CHAINS, first_seed=0, keep_outputs=True)
    _figures(capsys, res.summary())
    assert res.failures == 0, res.report()
    assert res.chains == QUICK_CHAINS and res.runs == 2 * QUICK_CHAINS
    total = res.compared + res.unknown
    assert res.compared >= 0.9 * total, res.summary()  # the enclosures stay tight enough to test something
    # The same outputs against oracles with one deliberate mistake each: every mistake must show.
    for name, patch in MUTANTS.items():
        with monkeypatch.context() as m:
            patch(m)
            caught = sum(
                1 for chain, outs in res.outputs
                if any(chains.check(chains.evaluate(chain), got).problems for got in outs.values())
            )
        assert caught >= 1, f"an oracle with {name} accepts every output of the quick profile"


def _mutate_int(m: pytest.MonkeyPatch, op: str, change: object) -> None:
    real = chains._int_binary

    def fake(o: str, dt: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = real(o, dt, a, b)
        return change(out, dt, a, b) if o == op else out  # type: ignore[operator]

    m.setattr(chains, "_int_binary", fake)


def _mutate_float(m: pytest.MonkeyPatch, op: str, factor: float) -> None:
    real = chains._f_unary if op in chains._UNARY_ALL else chains._f_binary
    name = "_f_unary" if op in chains._UNARY_ALL else "_f_binary"

    def fake(o: str, *args: FVal) -> FVal:
        r = real(o, *args)
        return FVal(r.dt, r.lo * factor, r.hi * factor, r.nan) if o == op else r

    m.setattr(chains, name, fake)


MUTANTS = {
    # XLA semantics the oracle must hold XLA to
    "x / 0 = 0 for integers": lambda m: _mutate_int(
        m, "Div", lambda out, dt, a, b: np.where(np.broadcast_to(b, out.shape) == 0, 0, out).astype(out.dtype)),
    "logical instead of arithmetic right shifts": lambda m: _mutate_int(
        m, "ShiftRightArithmetic", lambda out, dt, a, b: chains._int_binary("ShiftRightLogical", dt, a, b)),
    "integer Max as Min": lambda m: _mutate_int(m, "Max", lambda out, dt, a, b: chains._int_binary("Min", dt, a, b)),
    "NaN-ignoring binary ops": lambda m: m.setattr(
        chains, "_combine_nan", lambda *n: np.minimum.reduce(np.broadcast_arrays(*n)) if len(n) > 1 else n[0]),
    # float results off by a small relative error (1e-4: about 800 f32 ulps)
    "Add off by 1e-4": lambda m: _mutate_float(m, "Add", 1 + 1e-4),
    "Exp off by 1e-4": lambda m: _mutate_float(m, "Exp", 1 + 1e-4),
    "Mul off by 1e-4": lambda m: _mutate_float(m, "Mul", 1 - 1e-4),
    # shape ops
    "Rev as the identity": lambda m: m.setattr(chains, "_eval_step", _rev_identity(chains._eval_step)),
}


def _rev_identity(real: object) -> object:
    def fake(env: dict, s: Step) -> object:
        if s.op == "Rev":
            return env[s.ins[0]] if isinstance(s.ins[0], str) else real(env, s)  # type: ignore[operator]
        return real(env, s)  # type: ignore[operator]

    return fake


@pytest.mark.campaign
def test_chains_long(capsys: pytest.CaptureFixture[str]) -> None:
    res = chains.run_campaign(LONG_CHAINS, first_seed=LONG_SEED, progress=True)
    _figures(capsys, res.summary())
    assert res.chains == LONG_CHAINS
    assert res.failures == 0, res.report(limit=20)


# -- the generator ---------------------------------------------------------------------------------


def test_generator_is_deterministic_and_covers_the_table() -> None:
    a, b = chains.generate(7), chains.generate(7)
    assert a.source() == b.source()
    assert all(np.array_equal(x, y, equal_nan=x.dtype.kind == "f") for x, y in zip(a.leaves, b.leaves, strict=True))
    ops_seen: set[str] = set()
    dtypes_seen: set[str] = set()
    depths = set()
    for seed in range(400):
        c = chains.generate(seed)
        assert 2 <= len(c.steps) <= 12
        depths.add(len(c.steps))
        ops_seen.update(s.op for s in c.steps)
        dtypes_seen.update(s.dt for s in c.steps)
        assert all(chains._size(s.shape) <= chains.MAX_SIZE and len(s.shape) <= chains.MAX_RANK for s in c.steps)
    want_ops = {
        "Add", "Sub", "Mul", "Div", "Rem", "Max", "Min", "Abs", "Neg", "Exp", "Log", "Sqrt", "Tanh", "Floor", "Ceil",
        "Not", "And", "Or", "Xor", "ShiftLeft", "ShiftRightArithmetic", "ShiftRightLogical", "Compare", "Select",
        "Clamp", "Convert", "Reshape", "Transpose", "Broadcast", "Slice", "Rev", "Concat", "Pad", "Reduce", "Dot",
    }
    assert want_ops <= ops_seen, want_ops - ops_seen
    assert dtypes_seen == set(chains.ALL)
    assert depths == set(range(2, 13))


# -- the oracle's integer semantics (shared/cases/cases.md) -----------------------------------------

INT_MIN = -(2**31)


def _ib(op: str, dt: str, a: list[int], b: list[int]) -> list[int]:
    d = chains.DT[dt]
    out = chains._int_binary(op, dt, np.array(a, dtype=np.int64).astype(d), np.array(b, dtype=np.int64).astype(d))
    assert out.dtype == d
    return [int(v) for v in out]


def test_oracle_integer_division_c03() -> None:
    a, b = [7, -7, 0, INT_MIN, INT_MIN, 7, -7], [0, 0, 0, -1, 0, -2, 2]
    assert _ib("Div", "s32", a, b) == [-1, -1, -1, INT_MIN, -1, -3, -3]
    assert _ib("Rem", "s32", a, b) == [7, -7, 0, 0, INT_MIN, 1, -1]
    assert _ib("Div", "u8", [7, 0, 255], [0, 0, 0]) == [255, 255, 255]
    assert _ib("Rem", "u8", [7, 0, 255], [0, 0, 0]) == [7, 0, 255]


def test_oracle_shifts_c05() -> None:
    assert _ib("ShiftRightArithmetic", "u8", [128], [2]) == [224]
    assert _ib("ShiftRightLogical", "u8", [128], [2]) == [32]
    x, s = [1, -8, 8, -1, 5, 1], [32, 32, 40, 32, -1, 31]
    assert _ib("ShiftLeft", "s32", x, s) == [0, 0, 0, 0, 0, INT_MIN]
    assert _ib("ShiftRightArithmetic", "s32", x, s) == [0, -1, 0, -1, 0, 0]
    assert _ib("ShiftRightLogical", "s32", x, s) == [0, 0, 0, 0, 0, 0]
    assert _ib("ShiftLeft", "u8", [1, 128, 255], [8, 9, 255]) == [0, 0, 0]
    assert _ib("ShiftRightArithmetic", "u8", [1, 128, 255], [8, 9, 255]) == [0, 255, 255]


def test_oracle_wraparound_and_pred() -> None:
    assert _ib("Add", "s32", [2**31 - 1], [1]) == [INT_MIN]
    assert _ib("Mul", "s32", [65536], [65536]) == [0]
    assert _ib("Sub", "u8", [0], [1]) == [255]
    t, f = np.array([True, True, False]), np.array([True, False, False])
    assert chains._int_binary("Add", "pred", t, f).tolist() == [True, True, False]  # pred add is or
    assert chains._int_binary("Mul", "pred", t, f).tolist() == [True, False, False]  # and
    assert chains._int_binary("Xor", "pred", t, f).tolist() == [False, True, False]


def test_oracle_float_to_int_convert_c04() -> None:
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.9, -2.9, -0.5], np.float32)
    v = chains._leaf(x)
    s32 = chains._convert(v, "s32")
    assert isinstance(s32, IVal) and s32.known.all()
    assert s32.val.tolist() == [0, 2**31 - 1, INT_MIN, 2**31 - 1, INT_MIN, 2, -2, 0]
    u8 = chains._convert(v, "u8")
    assert isinstance(u8, IVal) and u8.val.tolist() == [0, 255, 0, 255, 0, 2, 0, 0]
    p = chains._convert(chains._leaf(np.array([0.0, -0.0, np.nan, 0.1], np.float32)), "pred")
    assert isinstance(p, IVal) and p.known.all() and p.val.tolist() == [False, False, True, True]
    w = chains._convert(chains._leaf(np.array([256, 300, -1, 255], np.int32)), "u8")
    assert isinstance(w, IVal) and w.val.tolist() == [0, 44, 255, 255]


def test_oracle_nan_propagation_c01_c02() -> None:
    a = chains._leaf(np.array([3, np.nan, np.nan, 1, -0.0, 0.0], np.float32))
    b = chains._leaf(np.array([np.nan, 3, np.nan, 2, 0.0, -0.0], np.float32))
    for op in ("Max", "Min"):
        r = chains._f_binary(op, a, b)
        assert r.nan.tolist() == [2, 2, 2, 0, 0, 0]
    red = chains._reduce(chains._leaf(np.array([7, np.nan, -2.5, 11, 0.25], np.float32)), (0,), "max")
    assert isinstance(red, FVal) and int(red.nan) == 2
    lo, hi = chains._leaf(np.array(5, np.float32)), chains._leaf(np.array(2, np.float32))
    cl = chains._clamp(lo, chains._leaf(np.array([0, 3, 7, 10], np.float32)), hi)
    assert isinstance(cl, FVal) and cl.lo.tolist() == cl.hi.tolist() == [2, 2, 2, 2]


def test_oracle_rejects_wrong_answers() -> None:
    """The check accepts the exact answer and rejects one ulp off for exact ops, a few ulps off for others."""
    x = np.array([1.5, -2.25, 1e-3, 100.0], np.float32)
    y = np.array([3.0, 0.5, 7.0, -1.0], np.float32)
    leaves = [x, y]
    add = chains.Chain(0, leaves, [Step("v0", "Add", ("x0", "x1"), {}, "f32", (4,))])
    want = chains.evaluate(add)
    exact = x + y
    assert not chains.check(want, exact).problems
    assert chains.check(want, np.nextafter(exact, np.float32(np.inf))).problems == []  # within 1 ulp + input slack
    assert chains.check(want, exact * np.float32(1 + 2**-18)).problems  # 32 ulps off
    assert chains.check(want, exact.astype(np.float64)).problems  # wrong type
    assert chains.check(want, np.where([True, False, False, False], np.nan, exact).astype(np.float32)).problems
    floor = chains.Chain(0, leaves, [Step("v0", "Floor", ("x0",), {}, "f32", (4,))])
    w = chains.evaluate(floor)
    assert not chains.check(w, np.floor(x)).problems
    assert chains.check(w, np.floor(x) + np.float32(1)).problems
    ints = [np.array([5, -7, INT_MIN], np.int32), np.array([2, 0, -1], np.int32)]
    div = chains.Chain(0, ints, [Step("v0", "Div", ("x0", "x1"), {}, "s32", (3,))])
    w = chains.evaluate(div)
    assert not chains.check(w, np.array([2, -1, INT_MIN], np.int32)).problems
    assert chains.check(w, np.array([2, -1, 0], np.int32)).problems


def test_oracle_enclosure_holds_for_bf16_and_transcendentals() -> None:
    """numpy's own results (f64 computed, then rounded once) lie inside the enclosures."""
    g = np.random.default_rng(1)
    for dt in ("f32", "bf16", "f64"):
        x = g.uniform(0.01, 20, 64).astype(chains.DT[dt])
        for op, f in (("Exp", np.exp), ("Log", np.log), ("Sqrt", np.sqrt), ("Tanh", np.tanh)):
            c = chains.Chain(0, [x], [Step("v0", op, ("x0",), {}, dt, (64,))])
            got = f(x.astype(np.float64)).astype(chains.DT[dt])
            assert not chains.check(chains.evaluate(c), got).problems, (dt, op)


def test_chain_source_renders_literals() -> None:
    assert Lit("f32", math.nan).render() == "np.float32(float('nan'))"
    assert Lit("bf16", -math.inf).render() == "ml_dtypes.bfloat16(-float('inf'))"
    assert Lit("u8", 255).render() == "np.uint8(255)"
    assert Lit("pred", True).render() == "np.bool_(True)"
    src = chains.generate(3).source()
    assert src.startswith("def build(b, x0") and "return v" in src
    compile(src, "<chain>", "exec")
    assert ml_dtypes.bfloat16  # the rendered code names ml_dtypes


# -- the harness ---------------------------------------------------------------------------------------

_HARNESS_SRC = """
import os, signal, time
def main(x):
    print("stdout is safe")
    if x == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if x == "abort":
        os.abort()
    if x == "hang":
        time.sleep(60)
    if x == "raise":
        raise ValueError("bad input")
    return x * 2
"""


def test_harness_survives_deaths_hangs_and_errors(tmp_path: object) -> None:
    inputs = [1, "segv", 2, "hang", "raise", "abort", 3]
    rep = run_batch([Task(_HARNESS_SRC, x, key=f"t{i}") for i, x in enumerate(inputs)], timeout=3)
    assert [o.status for o in rep.outcomes] == ["ok", "died", "ok", "timeout", "error", "died", "ok"]
    assert [o.value for o in rep.ok] == [2, 4, 6]
    assert [o.signal_name for o in rep.deaths] == ["SIGSEGV", "SIGABRT"]
    assert rep.errors[0].error == "ValueError: bad input"
    assert "1 timeouts" in rep.summary() and "2 deaths (SIGABRT: 1, SIGSEGV: 1)" in rep.summary()
    assert "INPUT = 'segv'" in rep.deaths[0].reproducer()
    text = rep.describe_failures()
    assert "task 't1': died by SIGSEGV" in text and "task 't3': timeout" in text
    paths = rep.write_reproducers(str(tmp_path))
    assert sorted(os.path.basename(p) for p in paths) == ["t1.py", "t3.py", "t5.py"]


def test_harness_reproducer_pickles_arrays_and_reruns(tmp_path: object) -> None:
    src = "import numpy as np\ndef main(x):\n    return float(np.sum(x))\n"
    rep = run_batch([Task(src, np.arange(5.0))], timeout=60)
    assert rep.ok[0].value == 10.0
    path = os.path.join(str(tmp_path), "r.py")
    with open(path, "w") as f:
        f.write(rep.ok[0].reproducer())
    import subprocess

    out = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "10.0", out
