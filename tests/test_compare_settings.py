"""compare's settings as one record (``xs.CompareSettings``, ``xlasdk/reference/_settings.py``): each
field checked once, when the record is made, with compare's own messages; ``compare(comp, args,
settings=s)`` gives the report the same keywords give, on a correct program and on a planted bug;
a setting given twice (in the record and as a keyword) is refused; and the record reaches the
bisections, which localise with it what they localise with the keywords."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import _numbers
from xlasdk.reference import _bisect_core, _runners
from xlasdk.reference.bisect import bisect_ops, find_nonfinite, local_divergences

_TEXT = ("HloModule {name}\nENTRY e {{\n  a = f32[4] parameter(0)\n  b = f32[4] parameter(1)\n"
         "  m = f32[4] {op}(a, b)\n  ROOT r = f32[4] negate(m)\n}}\n")


def _program(name: str = "good", op: str = "multiply") -> xs.XlaComputation:
    return xs.XlaComputation.from_hlo_text(_TEXT.format(name=name, op=op))


def _args() -> list[np.ndarray[Any, Any]]:
    return [np.array([1.0, 2.0, -3.0, 0.5], np.float32), np.array([4.0, -1.0, 2.0, 8.0], np.float32)]


#: the keywords the comparisons below are made with, as a record and as keywords (those bisect_ops takes too)
_KEYWORDS: dict[str, Any] = {"device": "cpu:0", "rtol": 1e-6, "atol": 0.0, "ulps": 2.0, "device_kind": "cpu"}


# -- checked once, when made -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "value", "message"), [
    ("rtol", math.nan, "compare: rtol must be a finite number >= 0, got nan"),
    ("atol", -1.0, "compare: atol must be a finite number >= 0, got -1.0"),
    ("ulps", math.inf, "compare: ulps must be a finite number >= 0, got inf"),
    ("rtol", True, "compare: rtol must be a finite number >= 0, got bool True"),
])
def test_a_bad_tolerance_is_refused_when_the_settings_are_made(name: str, value: Any, message: str) -> None:
    with pytest.raises(xs.ToleranceError, match=f"^{message}") as made:
        xs.CompareSettings(**{name: value})
    with pytest.raises(xs.ToleranceError, match=f"^{message}") as given:
        xs.compare(_program(), _args(), **{name: value})  # the keyword form says the same
    assert isinstance(made.value, xs.ShapeError) and isinstance(made.value, xs.CompareArgumentError)
    assert str(made.value).split(" — at ")[0] == str(given.value).split(" — at ")[0]
    ok = xs.CompareSettings(xla_flags={"xla_cpu_enable_fast_math": False})
    with pytest.raises(xs.ToleranceError, match=f"^{message}"):
        dataclasses.replace(ok, **{name: value})  # a changed copy is checked again


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"device_kind": "tpu-v9"}, "compare: device kind 'tpu-v9' is not known"),
    ({"precision": "medium"}, "compare: precision 'medium': expected default, high or highest"),
])
def test_an_unknown_kind_or_precision_is_refused_when_the_settings_are_made(kwargs: dict[str, Any],
                                                                           message: str) -> None:
    with pytest.raises(xs.CompareArgumentError, match=f"^{message}"):
        xs.CompareSettings(**kwargs)


def test_an_unknown_device_is_refused_when_the_settings_are_made() -> None:
    with pytest.raises(xs.UnknownDeviceError):
        xs.CompareSettings(device="cpu:4096")


def test_the_record_holds_resolved_typed_values() -> None:
    s = xs.CompareSettings(device="cpu:0", rtol=1, device_kind="TPU v5 lite", precision="Highest",
                           xla_flags={"xla_cpu_enable_fast_math": False})
    assert s.device == xs.devices("cpu")[0] and isinstance(s.device, xs.Device)  # resolved once, here
    assert s.rtol == 1.0 and isinstance(s.rtol, float)
    assert s.device_kind is not None and s.device_kind.name == "tpu-v5e" and s.kind is s.device_kind
    assert s.precision == "Highest"
    with pytest.raises(TypeError):
        s.xla_flags["xla_cpu_enable_fast_math"] = True  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.rtol = 2.0  # type: ignore[misc]
    assert xs.CompareSettings().kind.name == "cpu"  # unnamed: the device's
    recorded = xs.CompareSettings(outputs=[np.zeros(4, np.float32)], device="cpu:0")
    assert recorded.device is None and recorded.outputs is not None  # recorded elsewhere: nothing runs here
    with pytest.raises(xs.CompareArgumentError, match="recorded elsewhere.*nothing to bisect"):
        bisect_ops(_program(), _args(), settings=recorded)


def test_compare_checks_no_field_of_given_settings_again(monkeypatch: pytest.MonkeyPatch) -> None:
    s = xs.CompareSettings(**_KEYWORDS)
    checks: list[str] = []
    original = _numbers.Real.check

    def counted(self: _numbers.Real, value: object, name: str, *a: Any, **k: Any) -> float:
        checks.append(name)
        return original(self, value, name, *a, **k)

    monkeypatch.setattr(_numbers.Real, "check", counted)
    assert xs.compare(_program(), _args(), settings=s).ok
    assert checks == []
    xs.CompareSettings(rtol=0.5)
    assert checks == ["compare: rtol"]


# -- the record and the keywords give the same report -----------------------------------------------------------------
def test_a_correct_program_matches_with_the_settings_as_with_the_keywords() -> None:
    good, args = _program(), _args()
    by_keywords = xs.compare(good, args, **_KEYWORDS)
    by_settings = xs.compare(good, args, settings=xs.CompareSettings(**_KEYWORDS))
    assert by_keywords.ok and by_settings.ok
    assert by_settings.as_dict() == by_keywords.as_dict()
    assert str(by_settings) == str(by_keywords)


def test_a_planted_bug_diverges_with_the_settings_as_with_the_keywords() -> None:
    """The multiply of a program turned into an add (a second module computes what it should):
    the same DIVERGENCE and the same culprit from the record and from the keywords."""
    good, bad, args = _program(), _program("bad", "add"), _args()
    by_keywords = xs.compare(bad, args, against=good, bisect="ops", **_KEYWORDS)
    by_settings = xs.compare(bad, args, against=good, bisect="ops", settings=xs.CompareSettings(**_KEYWORDS))
    assert not by_keywords.ok and by_keywords.as_dict()["verdict"] == "DIVERGENCE"
    assert by_settings.as_dict() == by_keywords.as_dict()
    assert by_settings.bisect_ops is not None and by_settings.bisect_ops.culprit is not None
    assert by_settings.bisect_ops.culprit.name == "m", str(by_settings)
    wrong = [-(args[0] * args[1]) + np.float32(1)]  # recorded outputs off by one
    for form in ({"against": wrong, **_KEYWORDS}, {"against": wrong, "settings": xs.CompareSettings(**_KEYWORDS)}):
        report = xs.compare(good, args, **form)
        assert not report.ok and report.outputs[0].mismatches == 4


def test_recorded_outputs_are_judged_with_the_settings_as_with_the_keywords() -> None:
    good, args = _program(), _args()
    wrong = [-(args[0] * args[1]) * np.float32(1.5)]
    kw = {"outputs": wrong, "device_kind": "tpu-v5e", "rtol": 1e-3}
    by_keywords, by_settings = xs.compare(good, args, **kw), xs.compare(good, args,
                                                                       settings=xs.CompareSettings(**kw))
    assert not by_keywords.ok and by_settings.as_dict() == by_keywords.as_dict()
    assert by_settings.against == "reference evaluator computing as TPU v5e does"


# -- one setting, given once -------------------------------------------------------------------------------------
@pytest.mark.parametrize("keyword", [{"rtol": 0.5}, {"device": "cpu:0"}, {"excess_precision": True},
                                     {"progress": print}, {"xla_flags": {}}, {"outputs": []}])
def test_settings_and_one_of_their_keywords_together_are_refused(keyword: dict[str, Any]) -> None:
    (name,) = keyword
    with pytest.raises(xs.CompareArgumentError, match=rf"^compare: settings= and {name}= given together"):
        xs.compare(_program(), _args(), settings=xs.CompareSettings(), **keyword)


def test_the_bisections_refuse_settings_with_their_keywords_too() -> None:
    s = xs.CompareSettings()
    with pytest.raises(xs.CompareArgumentError, match=r"^bisect_ops: settings= and rtol=, device_kind= given"):
        bisect_ops(_program(), _args(), settings=s, rtol=0.1, device_kind="cpu")
    with pytest.raises(xs.CompareArgumentError, match=r"^find_nonfinite: settings= and device= given"):
        find_nonfinite(_program(), _args(), settings=s, device="cpu:0")
    with pytest.raises(xs.CompareArgumentError, match=r"^local_divergences: settings= and ulps= given"):
        local_divergences(_program(), _args(), settings=s, ulps=1.0)


# -- the record reaches the bisection --------------------------------------------------------------------------------
def _plant(monkeypatch: pytest.MonkeyPatch, factor: float = 1.01) -> list[Any]:
    """The device's values of ``m`` (the multiply) and of what it flows to (``r = negate(m)``) scaled by
    ``factor`` in every run of the program ``good``: a wrong multiply the reference does not share.
    Returns the settings each cut of the bisection ran with."""
    seen: list[Any] = []
    run_cut, run_whole = _bisect_core._Program.run, _runners.run_on

    def cut(self: _bisect_core._Program, nodes: Any) -> list[np.ndarray[Any, Any]]:
        values = run_cut(self, nodes)
        if self.comp.name == "good":
            seen.append(self.settings)
            names = [self.graph.instruction_of(n).name for n in nodes]
            values = [(v * np.float32(factor)).astype(v.dtype) if k in ("m", "r") else v
                      for k, v in zip(names, values, strict=True)]
        return values

    def whole(computation: Any, args: Any, device: Any, options: Any) -> list[np.ndarray[Any, Any]]:
        out = run_whole(computation, args, device, options)
        return [(v * np.float32(factor)).astype(v.dtype) for v in out] if computation.name == "good" else out

    monkeypatch.setattr(_bisect_core._Program, "run", cut)
    monkeypatch.setattr(_runners, "run_on", whole)
    return seen


def test_bisect_ops_localises_the_same_with_the_settings_as_with_the_keywords(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _plant(monkeypatch)
    good, args = _program(), _args()
    s = xs.CompareSettings(**_KEYWORDS)
    by_settings = bisect_ops(good, args, settings=s)
    assert seen and all(x is s for x in seen)  # the record itself, down to each cut
    by_keywords = bisect_ops(good, args, **_KEYWORDS)
    assert by_settings.status == "localised" and by_settings.culprit is not None, str(by_settings)
    assert by_settings.culprit.name == "m" and by_settings.as_dict() == by_keywords.as_dict()


def test_compare_hands_its_settings_to_the_bisection(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _plant(monkeypatch)
    good, args = _program(), _args()
    lines: list[str] = []
    s = xs.CompareSettings(**_KEYWORDS, progress=lines.append)
    by_settings = xs.compare(good, args, bisect="ops", settings=s)
    assert seen and all(x is s for x in seen)  # the op-by-op judgment's compile and the bisection's cuts
    assert any(line.startswith("bisect ops:") for line in lines)
    by_keywords = xs.compare(good, args, bisect="ops", progress=lines.append, **_KEYWORDS)
    assert by_settings.as_dict()["verdict"] == "DIVERGENCE"
    assert by_settings.bisect_ops is not None and by_settings.bisect_ops.culprit is not None
    assert by_settings.bisect_ops.culprit.name == "m", str(by_settings)
    assert by_settings.as_dict() == by_keywords.as_dict()
