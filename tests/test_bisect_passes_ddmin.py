"""``bisect="passes"`` by delta debugging: the ddmin search itself on synthetic predicates (counted
trials), and on XLA:CPU passes that really change float bits.

Oracles: the synthetic predicates' known culprit sets; numpy's float32 arithmetic (each op
correctly rounded, as the reference evaluator rounds it) for the real programs; XLA itself,
compiled with the flags of the ``XLA_FLAGS`` line the bisection prints (the outputs must equal
numpy's) and without them (they must not). Whether a pass still changes the bits is probed first,
with and without that pass disabled: a release whose XLA no longer rewrites so is skipped, never
failed.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xlasdk as xs
from xlasdk.errors import CompareArgumentError
from xlasdk.reference._bisect_passes import StartingPoint, bisect_passes
from xlasdk.reference._ddmin import (
    Interaction,
    Outcome,
    TrialBudgetSpent,
    Trials,
    ddmin,
    describe,
    find_good,
    interaction,
    minimal_sets,
)
from xlasdk.reference._settings import DEFAULT_MAX_TRIALS

NAMES = [f"p{i:02d}" for i in range(16)]


def _trials(good: Callable[[set[str]], Outcome | bool], limit: int = 1000) -> tuple[Trials, list[list[str]]]:
    seen: list[list[str]] = []

    def test(subset: Sequence[str]) -> Outcome:
        seen.append(list(subset))
        verdict = good(set(subset))
        if isinstance(verdict, Outcome):
            return verdict
        return Outcome.GOOD if verdict else Outcome.BAD

    return Trials(test, limit), seen


# -- (a) the algorithm ------------------------------------------------------------------------------------------------
def test_single_culprit_in_logarithmic_trials() -> None:
    t, seen = _trials(lambda s: "p11" in s)
    sets = minimal_sets(NAMES, t)
    assert sets == [["p11"]] and interaction(sets) is Interaction.SINGLE and describe(sets) == "p11"
    # the whole set; halving: 16 -> 8 -> 4 -> 2 -> 1 (2 + 1 + 2 + 2 trials: a first half that
    # holds p11 is kept at once); all but p11 (no second set)
    assert t.count == len(seen) == 9, seen
    assert t.count <= 2 * int(np.log2(len(NAMES))) + 2


def test_two_culprits_needed_together() -> None:
    t, _ = _trials(lambda s: {"p03", "p12"} <= s)
    sets = minimal_sets(NAMES, t)
    assert sets == [["p03", "p12"]] and interaction(sets) is Interaction.TOGETHER
    assert describe(sets) == "p03 and p12 together (neither alone)"
    for one in sets[0]:  # 1-minimal: each pass alone was tried, and is not enough
        assert t.known([one]) is Outcome.BAD
    assert t.count <= 40, t.count


def test_either_of_two_culprits_each_enough() -> None:
    t, _ = _trials(lambda s: "p03" in s or "p12" in s)
    sets = minimal_sets(NAMES, t)
    assert sets == [["p03"], ["p12"]] and interaction(sets) is Interaction.EITHER
    assert describe(sets) == "either of p03 or p12 (each alone is enough)"
    rest = [n for n in NAMES if n not in ("p03", "p12")]
    assert t.known(rest) is Outcome.BAD  # the search for a third set: one trial
    assert t.count <= 20, t.count


def test_either_of_a_pair_or_a_single() -> None:
    t, _ = _trials(lambda s: {"p01", "p02"} <= s or "p09" in s)
    sets = minimal_sets(NAMES, t)
    assert sorted(map(sorted, sets)) == [["p01", "p02"], ["p09"]] and interaction(sets) is Interaction.EITHER
    assert describe([["p09"], ["p01", "p02"]]) == "either of p09, or p01 and p02 together (each alone is enough)"
    assert describe([["a"], ["b"], ["c"]]) == "either of a, b or c (each alone is enough)"


def test_none_after_a_bounded_search() -> None:
    t, seen = _trials(lambda s: False)
    assert minimal_sets(NAMES, t) == [] and describe([]) == "no pass"
    assert t.count == len(seen) <= 4 * len(NAMES), t.count  # chunks and complements down to single passes
    assert all([n] in seen for n in NAMES) and all([m for m in NAMES if m != n] in seen for n in NAMES)


def test_interacting_passes_disabling_all_does_not_fix() -> None:
    """Disabling p07 fixes it unless p02 is disabled too (without p02's rewrite another path goes
    wrong): disabling all does not, a complement does; the old search's "no pass" case."""
    t, _ = _trials(lambda s: "p07" in s and "p02" not in s)
    assert t(NAMES) is Outcome.BAD
    assert minimal_sets(NAMES, t) == [["p07"]]


def test_interacting_pair_apart_in_the_pipeline() -> None:
    """Both p01 and p14 needed and p08 must stay enabled: no window of consecutive passes holds
    the pair without p08, all disabled diverges; chunks and complements find it."""
    t, _ = _trials(lambda s: {"p01", "p14"} <= s and "p08" not in s)
    assert minimal_sets(NAMES, t) == [["p01", "p14"]]


def test_unresolved_never_counts_as_good() -> None:
    """p00 is needed for the compile: any set disabling it fails (unresolved)."""
    t, _ = _trials(lambda s: Outcome.UNRESOLVED if "p00" in s else ("p11" in s))
    sets = minimal_sets(NAMES, t)
    assert sets == [["p11"]] and ["p00"] not in sets
    assert t.unresolved and all("p00" in u for u in t.unresolved) and t.unresolved[0] == sorted(NAMES)


def test_trials_are_cached_and_bounded() -> None:
    t, seen = _trials(lambda s: "p11" in s, limit=3)
    assert t(["p01", "p02"]) is Outcome.BAD and t(["p02", "p01"]) is Outcome.BAD and t.count == 1 == len(seen)
    with pytest.raises(TrialBudgetSpent):
        minimal_sets(NAMES, t)
    assert t.count == 3
    t, _ = _trials(lambda s: "p11" in s)
    assert ddmin(["p11"], t) == ["p11"] and t.count == 0  # nothing to shrink: no trial
    assert find_good([], t) is None


# -- (b) XLA:CPU ------------------------------------------------------------------------------------------------------
_TWO = """HloModule two
ENTRY e {
  x = f32[256] parameter(0)
  y = f32[256] parameter(1)
  c = f32[] constant(3)
  b = f32[256] broadcast(c), dimensions={}
  q = f32[256] divide(x, b)
  m = f32[256] multiply(x, y)
  s = f32[256] add(m, x)
  ROOT t = (f32[256], f32[256]) tuple(q, s)
}
"""
_NONE = """HloModule none
ENTRY e {
  x = f32[256] parameter(0)
  y = f32[256] parameter(1)
  c = f32[] constant(2)
  b = f32[256] broadcast(c), dimensions={}
  m = f32[256] multiply(x, b)
  n = f32[256] negate(y)
  ROOT s = f32[256] subtract(m, n)
}
"""
STRICT: dict[str, Any] = {"rtol": 0.0, "atol": 0.0, "ulps": 0.0}


def _inputs() -> list[np.ndarray[Any, Any]]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(256).astype(np.float32) for _ in range(2)]


def _numpy_two(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> list[np.ndarray[Any, Any]]:
    return [x / np.float32(3), x * y + x]  # float32 ops, each correctly rounded


def _load(tmp_path: Path, text: str, name: str = "m.hlo") -> xs.XlaComputation:
    path = tmp_path / name
    path.write_text(text)
    return xs.load_computation(path)


def _run(comp: xs.XlaComputation, args: Sequence[Any], flags: Sequence[tuple[str, Any]]) -> list[np.ndarray[Any, Any]]:
    out = xs.compile(comp, options=xs.CompileOptions(env_option_overrides=list(flags)), cache=False)(*args)
    return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]


def _changes_bits(comp: xs.XlaComputation, args: Sequence[Any], pass_name: str, output: int,
                  disabled: Sequence[str] = ()) -> bool:
    """Whether disabling ``pass_name`` (over ``disabled``) changes output ``output`` of this XLA to
    numpy's value: the rewrite this test needs, probed."""
    want = _numpy_two(*args)[output]
    base = [("xla_allow_excess_precision", False)]
    more = [("xla_disable_hlo_passes", ",".join(disabled))] if disabled else []
    with_pass = _run(comp, args, [*base, *more])[output]
    without = _run(comp, args, [*base, ("xla_disable_hlo_passes", ",".join([*disabled, pass_name]))])[output]
    return bool(np.array_equal(without, want) and not np.array_equal(with_pass, want))


def _flags_of(line: str) -> list[tuple[str, Any]]:
    """The XLA options of an ``XLA_FLAGS=...`` line, as compile options."""
    assert line.startswith("XLA_FLAGS=")
    out: list[tuple[str, Any]] = []
    (value,) = shlex.split(line.removeprefix("XLA_FLAGS="))  # one shell word: the variable's value
    for word in value.split():
        name, _, raw = word.removeprefix("--").partition("=")
        out.append((name, raw == "true" if raw in ("true", "false") else raw))
    return out


def _release() -> str:
    return str(xs.jaxlib_version_info().release)


def test_real_single_pass_named_and_its_flags_reproduce_the_good_run(tmp_path: Path) -> None:
    """x / 3: XLA:CPU's algebraic simplifier multiplies by the f32 reciprocal of 3 (1 ulp off numpy's
    correctly rounded quotient in 89 of 256 elements)."""
    text = _TWO.replace("ROOT t = (f32[256], f32[256]) tuple(q, s)", "ROOT t = (f32[256]) tuple(q)")
    comp = _load(tmp_path, text)
    args = _inputs()
    if not _changes_bits(comp, args, "algsimp", 0):
        pytest.skip(f"XLA of jaxlib {_release()}: algsimp no longer changes x / 3")
    report = xs.compare(comp, args, bisect="passes", **STRICT)
    b = report.bisect_passes
    assert not report.ok and b.status == "found", str(report)
    assert b.passes == ["algsimp"] and b.sets == [["algsimp"]] and b.interaction is Interaction.SINGLE
    assert "algsimp" in b.candidates and b.trials <= b.compiles <= b.trials + 3 and not b.budget_hit
    assert b.xla_flags == "XLA_FLAGS='--xla_allow_excess_precision=false --xla_disable_hlo_passes=algsimp'"
    np.testing.assert_array_equal(_run(comp, args, _flags_of(b.xla_flags))[0], args[0] / np.float32(3))
    assert "disabling algsimp removes the divergence" in str(report) and b.xla_flags in str(report)
    doc = json.loads(json.dumps(report.as_dict()))["bisect_passes"]
    assert doc["passes"] == ["algsimp"] and doc["interaction"] == "single" and doc["xla_flags"] == b.xla_flags
    assert doc["trials"] == b.trials and doc["max_trials"] == DEFAULT_MAX_TRIALS


def test_real_two_passes_together_one_per_output(tmp_path: Path) -> None:
    """Output 0 is x / 3 (algsimp's reciprocal), output 1 is x * y + x (fused into one FMA: one
    rounding, not numpy's two): only with both passes disabled do both outputs match."""
    comp = _load(tmp_path, _TWO)
    args = _inputs()
    if not (_changes_bits(comp, args, "algsimp", 0) and _changes_bits(comp, args, "fusion", 1)):
        pytest.skip(f"XLA of jaxlib {_release()}: algsimp or fusion no longer changes these outputs")
    report = xs.compare(comp, args, bisect="passes", **STRICT)
    b = report.bisect_passes
    assert b.status == "found" and sorted(b.passes) == ["algsimp", "fusion"], str(report)
    assert b.interaction is Interaction.TOGETHER and len(b.sets) == 1
    assert "algsimp and fusion together (neither alone)" in str(b) or "fusion and algsimp together" in str(b)
    got = _run(comp, args, _flags_of(b.xla_flags))
    for g, w in zip(got, _numpy_two(*args), strict=True):
        np.testing.assert_array_equal(g, w)
    for p in b.passes:  # each alone is not enough (checked against numpy, not by the search)
        alone = _run(comp, args, [("xla_allow_excess_precision", False), ("xla_disable_hlo_passes", p)])
        assert not all(np.array_equal(g, w) for g, w in zip(alone, _numpy_two(*args), strict=True))
    assert b.trials <= 30, str(b)


def test_real_either_set_when_the_budget_is_reached_says_so(tmp_path: Path) -> None:
    comp = _load(tmp_path, _TWO)
    args = _inputs()
    if not _changes_bits(comp, args, "algsimp", 0):
        pytest.skip(f"XLA of jaxlib {_release()}: algsimp no longer changes x / 3")
    b = xs.compare(comp, args, bisect="passes", settings=xs.CompareSettings(max_trials=2, **STRICT)).bisect_passes
    assert b.status == "not found" and b.budget_hit and b.trials == 2 and b.passes == [], str(b)
    assert "stopped at the limit of 2 trials" in str(b)
    with pytest.raises(CompareArgumentError, match="max_trials must be an integer >= 1, got 0"):
        xs.CompareSettings(max_trials=0)
    with pytest.raises(CompareArgumentError, match="max_trials must be an integer >= 1"):
        bisect_passes(comp, args, [], [], max_trials=-1)


def test_no_divergence_gives_no_pass(tmp_path: Path) -> None:
    """x * 2 - (-y): every rewrite XLA makes here is exact; called directly (compare would stop
    before), the search itself sees the outputs match and blames nobody."""
    comp = _load(tmp_path, _NONE)
    x, y = _inputs()
    want = [x * np.float32(2) + y]
    b = bisect_passes(comp, [x, y], want, [0.0], **STRICT)
    assert b.status == "no divergence" and b.passes == [] and b.sets == [] and b.xla_flags == "", str(b)
    assert b.trials == 1 and b.interaction is Interaction.NONE
    report = xs.compare(comp, [x, y], bisect="passes", **STRICT)
    assert report.ok and report.bisect_passes.status == "no divergence"


def test_a_pass_disabled_already_stays_disabled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """$XLA_FLAGS disables algsimp: a compile option xla_disable_hlo_passes replaces $XLA_FLAGS' list
    (XLA does not add them), so the search keeps it in every trial; it then names fusion alone, and
    its line disables both."""
    comp = _load(tmp_path, _TWO)
    args = _inputs()
    if not _changes_bits(comp, args, "fusion", 1, disabled=["algsimp"]):
        pytest.skip(f"XLA of jaxlib {_release()}: fusion no longer changes x * y + x")
    xs.compare(comp, args)  # the client made (and $XLA_FLAGS read) in this process before the change
    monkeypatch.setenv("XLA_FLAGS", "--xla_disable_hlo_passes=algsimp")
    b = xs.compare(comp, args, bisect="passes", **STRICT).bisect_passes
    assert b.status == "found" and b.passes == ["fusion"] and b.disabled_before == ["algsimp"], str(b)
    assert "algsimp" not in b.candidates
    assert b.xla_flags == "XLA_FLAGS='--xla_allow_excess_precision=false --xla_disable_hlo_passes=algsimp,fusion'"
    assert "disabled already, and kept so: algsimp" in str(b)


def test_cli_dump_debug_options_keep_their_disabled_pass(tmp_path: Path) -> None:
    """A dump's module_NNNN.NAME.debug_options disables algsimp: ``xlasdk compare --bisect passes``
    starts there, names fusion, and prints the line with both; --max-trials is reported."""
    from tests.test_cli import cli

    comp = _load(tmp_path, _TWO)
    args = _inputs()
    if not _changes_bits(comp, args, "fusion", 1, disabled=["algsimp"]):
        pytest.skip(f"XLA of jaxlib {_release()}: fusion no longer changes x * y + x")
    dump = tmp_path / "module_0001.jit_two.before_optimizations.txt"
    dump.write_text(_TWO)
    (tmp_path / "module_0001.jit_two.debug_options").write_text('xla_disable_hlo_passes: "algsimp"\n')
    np.savez(tmp_path / "in.npz", x=args[0], y=args[1])
    common = ["compare", str(dump), "--inputs", str(tmp_path / "in.npz"), "--rtol", "0", "--atol", "0", "--ulps", "0",
              "--bisect", "passes", "--json", str(tmp_path / "r.json")]
    code, out, err = cli(*common)
    assert code == 1, (out, err)
    doc = json.loads((tmp_path / "r.json").read_text())["bisect_passes"]
    assert doc["status"] == "found" and doc["passes"] == ["fusion"] and doc["disabled_before"] == ["algsimp"], doc
    line = "XLA_FLAGS='--xla_allow_excess_precision=false --xla_disable_hlo_passes=algsimp,fusion'"
    assert doc["xla_flags"] == line and f"the good run: {line}" in out, out
    assert "disabling fusion removes the divergence" in out
    code, out, err = cli(*common, "--max-trials", "1")
    assert code == 1 and "stopped at the limit of 1 trials" in out, (out, err)
    code, _, err = cli("compare", str(dump), "--inputs", str(tmp_path / "in.npz"), "--max-trials", "5")
    assert code == 2 and "--max-trials 5 bounds --bisect passes" in err, err
    code, _, err = cli(*common, "--max-trials", "0")
    assert code == 2 and "integer >= 1" in err, err


# -- the starting point ---------------------------------------------------------------------------------------------
def test_starting_point_unites_options_and_environment() -> None:
    opts = xs.CompileOptions(env_option_overrides=[("xla_allow_excess_precision", False),
                                                   ("xla_disable_hlo_passes", "b,c"),
                                                   ("xla_cpu_enable_fast_min_max", True)])
    s = StartingPoint.of(opts, "--xla_disable_hlo_passes=a,b --xla_cpu_enable_fast_min_max=false --xla_foo=1")
    assert s.disabled == ("a", "b", "c") and not s.all_disabled
    assert s.environment == ("--xla_foo=1",)  # the options' own value wins over $XLA_FLAGS'
    assert s.passes(["d", "a"]) == ["a", "b", "c", "d"]
    assert dict(s.options(["d"]).env_option_overrides)["xla_disable_hlo_passes"] == "a,b,c,d"
    assert s.xla_flags_line(["d"]) == ("XLA_FLAGS='--xla_foo=1 --xla_allow_excess_precision=false "
                                       "--xla_cpu_enable_fast_min_max=true --xla_disable_hlo_passes=a,b,c,d'")
    assert StartingPoint.of(None, None).xla_flags_line(["x"]) == "XLA_FLAGS=--xla_disable_hlo_passes=x"
    assert StartingPoint.of(None, "--xla_disable_all_hlo_passes").all_disabled
    assert StartingPoint.of(xs.CompileOptions(env_option_overrides=[("xla_disable_all_hlo_passes", True)]),
                            None).all_disabled
    with pytest.raises(CompareArgumentError, match="XLA_FLAGS cannot be split"):
        StartingPoint.of(None, "--xla_a='unclosed")


def test_every_pass_disabled_already_is_no_search(tmp_path: Path) -> None:
    comp = _load(tmp_path, _TWO)
    args = _inputs()
    s = xs.CompareSettings(xla_flags={"xla_disable_all_hlo_passes": True}, **STRICT)
    b = bisect_passes(comp, args, _numpy_two(*args), [0.0, 0.0], settings=s)
    assert b.status == "not found" and b.compiles == 0 and "xla_disable_all_hlo_passes is set" in b.note


def test_cli_help_names_the_default_limit(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.test_cli import cli

    code, out, _ = cli("compare", "--help")
    out += capsys.readouterr().out  # argparse prints the help itself
    assert code == 0 and f"--bisect passes: at most N trial compiles (default {DEFAULT_MAX_TRIALS};" in " ".join(
        out.split())


# -- the orchestration, on scripted trials --------------------------------------------------------------------------
def _scripted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, verdict: Callable[[set[str], int], Outcome],
              **settings: Any) -> Any:
    """bisect_passes with XLA's pass list and each compile's verdict scripted (``verdict(disabled,
    compile_number)``): what it concludes from them."""
    from xlasdk.reference import _bisect_passes as bp

    calls: list[int] = []

    def run(self: Any, disabled: Sequence[str]) -> Outcome:
        self.compiles += 1
        calls.append(1)
        return verdict(set(disabled), len(calls))

    monkeypatch.setattr(bp._Run, "__call__", run)
    monkeypatch.setattr(bp, "pass_names", lambda comp, device, options: list(NAMES))
    comp = _load(tmp_path, _NONE)
    return bisect_passes(comp, [], [], [], settings=xs.CompareSettings(**settings))


def test_either_reported_with_both_sets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    b = _scripted(monkeypatch, tmp_path, lambda d, k: Outcome.GOOD if {"p03", "p12"} & d else Outcome.BAD)
    assert b.status == "found" and b.sets == [["p03"], ["p12"]] and b.interaction is Interaction.EITHER
    assert b.passes == ["p03"] and b.xla_flags == "XLA_FLAGS=--xla_disable_hlo_passes=p03"
    assert "disabling either of p03 or p12 (each alone is enough) removes the divergence" in str(b)
    assert b.compiles == b.trials + 3  # the listing and the two final compiles
    assert b.as_dict()["interaction"] == "either" and b.as_dict()["sets"] == [["p03"], ["p12"]]


def test_a_final_compile_that_disagrees_claims_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Outputs that vary from run to run: a set that fixed it once does not the second time (the
    search tries each set once; the final compile tries the set found again)."""
    tried: set[frozenset[str]] = set()

    def flaky(d: set[str], k: int) -> Outcome:
        again = frozenset(d) in tried
        tried.add(frozenset(d))
        return Outcome.GOOD if "p05" in d and not again else Outcome.BAD

    b = _scripted(monkeypatch, tmp_path, flaky)
    assert b.status == "unverified" and b.xla_flags == "" and "nothing is claimed" in b.note, str(b)


def test_not_found_says_what_was_tried(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    b = _scripted(monkeypatch, tmp_path, lambda d, k: Outcome.UNRESOLVED if len(d) > 8 else Outcome.BAD)
    assert b.status == "not found" and b.passes == [] and not b.budget_hit, str(b)
    assert f"disabling all {len(NAMES)} candidate passes makes the compile fail" in b.note
    assert b.unknown and b.trials <= 4 * len(NAMES) + 1
