"""The op-call campaign (``op_calls.py``): every public op called with hostile arguments, each
call classified as an xlasdk error, a computation that builds, compiles and runs, a raw Python
exception (a failure) or a dead child process (a failure).

The quick profile (2,000 calls, about 20-30 s on one core) runs with the default suite; the long
profile (100,000 calls) only with ``pytest -m campaign``. ``python tests/campaigns/op_calls.py
--calls N --seed S`` runs any profile by hand and ``--show I`` prints call ``I``.
"""

from __future__ import annotations

import os

import op_calls
import pytest

QUICK_CALLS = 2000
LONG_CALLS = 100_000


def _check(report: op_calls.Report) -> None:
    print(report.summary())
    assert report.kinds["raw"] == 0, report.summary()
    assert report.kinds["death"] == 0, report.summary()
    assert report.kinds["hang"] == 0, report.summary()
    assert not report.failures, report.summary()


def test_every_public_op_has_a_valid_call() -> None:
    assert op_calls.public_ops(), "no public ops found"
    assert not op_calls.missing_templates(), op_calls.missing_templates()


def test_quick_profile() -> None:
    report = op_calls.run_campaign(QUICK_CALLS, seed=2026, batch=QUICK_CALLS)
    _check(report)
    assert report.calls == QUICK_CALLS
    # the first calls are each op's valid call: all of them build, compile and run (or compile
    # only: infeed/outfeed and token results)
    names = op_calls.public_ops()
    bad = {
        name: report.outcomes[i] for i, name in enumerate(names)
        if report.outcomes[i] not in op_calls.BUILT_OK and name not in op_calls.ALWAYS_RAISE
    }
    assert not bad, bad
    # most hostile calls are refused with an xlasdk error
    assert report.kinds["error"] > report.calls // 2, report.summary()


def test_a_child_that_dies_is_reported_and_the_campaign_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLASDK_CAMPAIGN_ABORT_AT", "3")
    report = op_calls.run_campaign(6, seed=1, batch=6, compile_run=False)
    assert report.calls == 6
    assert report.kinds["death"] == 1, report.summary()
    (f,) = report.failures
    assert f["index"] == 3 and f["kind"] == "death"
    assert f["call"].startswith(f"ops.{op_calls.public_ops()[3]}(")  # the reproducing call
    assert "call 3" in f["call"]


def test_a_child_that_hangs_is_killed_and_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLASDK_CAMPAIGN_HANG_AT", "2")
    # calls 0 and 1 only build (milliseconds); the child's start-up has START_TIMEOUT_S of its own
    monkeypatch.setattr(op_calls, "CALL_TIMEOUT_S", 10.0)
    report = op_calls.run_campaign(4, seed=1, batch=4, compile_run=False)
    assert report.calls == 4
    assert [f["index"] for f in report.failures] == [2] and report.kinds["hang"] == 1, report.summary()


def test_calls_are_reproducible() -> None:
    for i in range(1234, 1244):  # the same call, made twice (making some values raises: then both say so)
        assert op_calls._describe_call(5, i, None) == op_calls._describe_call(5, i, None)
        assert op_calls.run_call(i, seed=5, compile_run=False)["kind"] in ("error", "built")


@pytest.mark.campaign
def test_long_profile() -> None:
    seed = int(os.environ.get("XLASDK_CAMPAIGN_SEED", "2026"))
    calls = int(os.environ.get("XLASDK_CAMPAIGN_CALLS", str(LONG_CALLS)))
    report = op_calls.run_campaign(calls, seed=seed, batch=2000)
    _check(report)
    assert report.calls == calls
