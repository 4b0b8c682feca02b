"""What compare compares against, one runner per kind (``xlasdk/reference/_runners.py``):
:func:`reference_for` reads ``against`` once, each runner names itself in the report as compare
always did, allows its own bisections, and compare against each still gives the known answer."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk.reference._runners import (
    GivenOutputs,
    OtherDevice,
    Reference,
    ReferenceEvaluator,
    SecondModule,
    reference_for,
)

_TEXT = ("HloModule {name}\nENTRY e {{\n  a = f32[4] parameter(0)\n  b = f32[4] parameter(1)\n"
         "  ROOT r = f32[4] {op}(a, b)\n}}\n")


def _program(name: str = "good", op: str = "multiply") -> Any:
    return xs.XlaComputation.from_hlo_text(_TEXT.format(name=name, op=op))


def _args() -> list[np.ndarray[Any, Any]]:
    return [np.array([1.0, 2.0, -3.0, 0.5], np.float32), np.array([4.0, -1.0, 2.0, 8.0], np.float32)]


def test_each_kind_of_against_gets_its_runner_label_and_bisections() -> None:
    good = _program()
    ref = reference_for("reference")
    assert isinstance(ref, ReferenceEvaluator) and ref.evaluates
    assert ref.label == "reference evaluator (XLA without excess precision)"
    assert reference_for("reference", excess_precision=True).label == "reference evaluator (XLA with excess precision)"
    assert ref.bisect_modes == {"ops", "passes"}

    dev = reference_for("cpu:0")
    assert isinstance(dev, OtherDevice) and dev.label == "cpu:0" and dev.bisect_modes == {"ops"}
    assert not dev.evaluates and dev.source == "cpu:0"
    device = xs.devices("cpu")[0]
    d2 = reference_for(device)
    assert isinstance(d2, OtherDevice) and d2.label == str(device) and d2.source is device
    assert isinstance(reference_for(0), OtherDevice)  # an int is a device id, as compile reads it

    outs = [np.zeros(4, np.float32)]
    given = reference_for(outs)
    assert isinstance(given, GivenOutputs) and given.label == "given outputs" and given.bisect_modes == frozenset()
    assert isinstance(reference_for(tuple(outs)), GivenOutputs)

    mod = reference_for(good)
    assert isinstance(mod, SecondModule) and mod.label == "module 'good'" and mod.bisect_modes == {"ops"}

    recorded = GivenOutputs(outs, "the recorded result")
    assert reference_for(recorded) is recorded and recorded.label == "the recorded result"
    assert all(isinstance(r, Reference) for r in (ref, dev, given, mod))


@pytest.mark.parametrize("bad", [1.5, True, {"a": 1}])
def test_a_bad_against_names_what_was_expected(bad: Any) -> None:
    with pytest.raises(xs.XlaSdkError, match=r"against must be 'reference', a device .*, a list or tuple of "
                                             r"outputs or a second XlaComputation; got " + type(bad).__name__):
        reference_for(bad)


def test_the_error_models_each_runner_follows() -> None:
    from xlasdk.reference._precision import device_kind

    cpu = device_kind("cpu")
    good = _program()
    settings = xs.CompareSettings(device_kind="cpu")
    assert reference_for("reference").models(good, settings) == [cpu]
    assert reference_for([np.zeros(4, np.float32)]).models(good, settings) == []
    assert [getattr(k, "name", k) for k in reference_for("cpu:0").models(good, settings)] == ["cpu", "cpu"]
    assert [getattr(k, "name", k) for k in reference_for(good).models(good, settings)] == ["cpu", "cpu"]


def test_a_correct_program_matches_against_each_runner() -> None:
    good, args = _program(), _args()
    want = [args[0] * args[1]]
    for against, label in [("reference", "reference evaluator (XLA without excess precision)"),
                           ("cpu:0", "cpu:0"), (want, "given outputs"),
                           (_program("twin"), "module 'twin'"),
                           (GivenOutputs(want, "the recorded result"), "the recorded result")]:
        report = xs.compare(good, args, against=against)
        assert report.ok, (label, str(report))
        assert report.against == label


def test_wrong_outputs_and_a_wrong_module_are_mismatches() -> None:
    good, bad, args = _program(), _program("bad", "add"), _args()
    wrong = [args[0] * args[1] + np.float32(1)]
    report = xs.compare(good, args, against=wrong)
    assert not report.ok and report.outputs[0].mismatches == 4
    report = xs.compare(bad, args, against=good, bisect="ops")
    assert not report.ok and report.bisect_ops is not None and report.bisect_ops.culprit.name == "r"


def test_bisections_a_runner_does_not_support_are_refused_as_before() -> None:
    good, args = _program(), _args()
    with pytest.raises(xs.XlaSdkError, match=r"bisect='passes': expected 'ops' or 'passes', against the "
                                             r"reference \('ops' against a second module or device too\) "
                                             r"\(not against 'cpu:0'\)"):
        xs.compare(good, args, against="cpu:0", bisect="passes")
    with pytest.raises(xs.XlaSdkError, match=r"bisect='ops'.*\(not against \[array"):
        xs.compare(good, args, against=[args[0]], bisect="ops")
    with pytest.raises(xs.XlaSdkError, match=r"outputs= \(recorded elsewhere\) are compared with the reference alone"):
        xs.compare(good, args, against="cpu:0", outputs=[args[0]])
